//! The on-disk spool: writes made while the backend is unreachable are acknowledged, kept on
//! disk, and reach the backend in order once it is back — across a restart too.

mod common;

use std::path::Path;

use aware_store::fault::{Switch, Switchable};
use aware_store::{
    DecisionQuery, DecisionRecord, Spooled, SqliteStore, StageRecord, StoreError, Sync, TrajectoryStore, Transition,
};
use common::{meta, transition};

/// A SQLite store behind a switch, and the switch.
fn flaky(path: &Path) -> (Box<dyn TrajectoryStore>, Switch) {
    let (store, switch) = Switchable::new(Box::new(SqliteStore::open(path, Sync::Full).unwrap()));
    (Box::new(store), switch)
}

fn steps(episode: u64, range: std::ops::Range<u32>) -> Vec<Transition> {
    range.map(|s| transition(episode, s)).collect()
}

fn decision(app: &str, step: u64) -> DecisionRecord {
    DecisionRecord {
        agent: "aware".into(),
        app: app.into(),
        step,
        stage: "offline".into(),
        acting_policy: "mpa".into(),
        guard: "passed".into(),
        detail: serde_json::json!({ "step": step }),
    }
}

const MB: u64 = 1 << 20;

/// The SQLite store at `db`, unreachable.
fn down(db: &Path) -> Box<dyn TrajectoryStore> {
    let (backend, switch) = flaky(db);
    switch.set_up(false);
    backend
}

/// Journals one episode (begin, four steps, close at 1.5) and a decision into `spool` while
/// the store at `db` is down, as a process that then exits; the journal's four lines.
fn journal_while_down(db: &Path, spool: &Path) -> Vec<String> {
    {
        let mut s = Spooled::new(down(db), spool, 64 * MB).unwrap();
        let id = s.begin_episode(&meta("a", "x", 0, "mpa")).unwrap();
        s.append(id, &steps(0, 0..4)).unwrap();
        s.close_episode(id, 1.5).unwrap();
        s.record_decisions(&[decision("x", 1)]).unwrap();
    }
    let journal = std::fs::read_to_string(spool.join("journal-0.jsonl")).unwrap();
    let lines: Vec<String> = journal.lines().map(String::from).collect();
    assert_eq!(lines.len(), 4);
    lines
}

#[test]
fn an_outage_is_journaled_and_written_in_order_when_the_backend_is_back() {
    let dir = tempfile::tempdir().unwrap();
    let (backend, switch) = flaky(&dir.path().join("a.db"));
    let mut s = Spooled::new(backend, &dir.path().join("spool"), 64 * MB).unwrap();

    // Begun while up, finished during the outage.
    let first = s.begin_episode(&meta("a", "x", 0, "mpa")).unwrap();
    assert!(first > 0, "a backend id while the backend is up");
    s.append(first, &steps(0, 0..5)).unwrap();
    switch.set_up(false);
    s.append(first, &steps(0, 5..10)).unwrap();
    s.close_episode(first, 1.5).unwrap();
    // Begun and finished during the outage: a provisional id.
    let second = s.begin_episode(&meta("a", "x", 1, "mpa")).unwrap();
    assert!(second < 0, "a provisional id during the outage, got {second}");
    s.append(second, &steps(1, 0..7)).unwrap();
    s.close_episode(second, 2.5).unwrap();
    s.record_decisions(&[decision("x", 3), decision("x", 4)]).unwrap();
    let change = StageRecord {
        agent: "aware".into(),
        app: "x".into(),
        step: 4,
        from: "offline".into(),
        to: "online".into(),
        reason: "test".into(),
    };
    s.record_stage_change(&change).unwrap();
    assert_eq!(s.pending(), 7, "every write of the outage waits on disk");
    assert!(s.episodes(None).unwrap_err().is_unavailable(), "reads say the backend is down");
    assert!(s.episode(second).unwrap_err().is_unavailable(), "a spooled episode waits for the backend");
    // Still down: flushing keeps everything.
    assert!(s.flush().unwrap_err().is_unavailable());
    assert_eq!(s.pending(), 7);

    switch.set_up(true);
    assert_eq!(s.flush().unwrap(), 7);
    assert_eq!(s.pending(), 0);
    let real = s.backend_id(second).expect("the provisional episode has a backend id");
    assert!(real > 0 && real != first);
    let (rec, ts) = s.episode(first).unwrap();
    assert_eq!((rec.total_reward, rec.length, ts), (Some(1.5), 10, steps(0, 0..10)));
    let (rec, ts) = s.episode(real).unwrap();
    assert_eq!((rec.total_reward, rec.length, ts), (Some(2.5), 7, steps(1, 0..7)));
    assert_eq!(s.last_rewards("a", 5).unwrap(), vec![2.5, 1.5], "closed in the order acknowledged");
    assert_eq!(s.decisions("x", DecisionQuery::Last(5)).unwrap(), vec![decision("x", 3), decision("x", 4)]);
    assert_eq!(s.stage_changes(Some("x")).unwrap(), vec![change]);
    assert_eq!(s.set_aside(), 0);
}

#[test]
fn the_journal_survives_a_restart_during_the_outage() {
    let dir = tempfile::tempdir().unwrap();
    let (db, spool) = (dir.path().join("a.db"), dir.path().join("spool"));
    let down = |db: &Path| {
        let (backend, switch) = flaky(db);
        switch.set_up(false);
        backend
    };
    {
        let mut s = Spooled::new(down(&db), &spool, 64 * MB).unwrap();
        for e in 0..3 {
            let id = s.begin_episode(&meta("a", "x", e, "mpa")).unwrap();
            s.append(id, &steps(e, 0..4)).unwrap();
            s.close_episode(id, e as f64).unwrap();
        }
        assert_eq!(s.pending(), 9);
        // Dropped while the backend is still down: the process "exits".
    }
    // The next process, still down, keeps the journal and adds to it.
    {
        let mut s = Spooled::new(down(&db), &spool, 64 * MB).unwrap();
        assert_eq!(s.pending(), 9);
        let id = s.begin_episode(&meta("a", "x", 3, "mpa")).unwrap();
        assert!(id < 0);
        s.append(id, &steps(3, 0..4)).unwrap();
        s.close_episode(id, 3.0).unwrap();
    }
    // Back up: opening flushes.
    let s = Spooled::new(flaky(&db).0, &spool, 64 * MB).unwrap();
    assert_eq!(s.pending(), 0);
    let direct = SqliteStore::open_read_only(&db).unwrap();
    assert_eq!(direct.last_rewards("a", 10).unwrap(), vec![3.0, 2.0, 1.0, 0.0]);
    for rec in direct.episodes(Some("a")).unwrap() {
        let (_, ts) = direct.episode(rec.id).unwrap();
        assert_eq!(ts, steps(rec.meta.episode, 0..4), "episode {} intact", rec.meta.episode);
    }
}

#[test]
fn a_full_spool_refuses_and_keeps_what_it_acknowledged() {
    let dir = tempfile::tempdir().unwrap();
    let (backend, switch) = flaky(&dir.path().join("a.db"));
    switch.set_up(false);
    let mut s = Spooled::new(backend, &dir.path().join("spool"), 4096).unwrap();
    let mut acknowledged = 0u64;
    let err = loop {
        match s.record_decisions(&[decision("x", acknowledged)]) {
            Ok(()) => acknowledged += 1,
            Err(e) => break e,
        }
        assert!(acknowledged < 10_000, "the spool never filled");
    };
    assert!(matches!(err, StoreError::SpoolFull { .. }), "{err}");
    assert!(err.to_string().contains("full"), "{err}");
    assert!(acknowledged > 0);
    switch.set_up(true);
    s.flush().unwrap();
    let kept = s.decisions("x", DecisionQuery::Last(100_000)).unwrap();
    assert_eq!(kept.len() as u64, acknowledged, "every acknowledged decision, none of the refused");
    // With room again, writes go straight through.
    s.record_decisions(&[decision("x", 99_999)]).unwrap();
    assert_eq!(s.pending(), 0);
}

#[test]
fn bad_writes_are_refused_before_they_are_acknowledged() {
    let dir = tempfile::tempdir().unwrap();
    let (backend, switch) = flaky(&dir.path().join("a.db"));
    switch.set_up(false);
    let mut s = Spooled::new(backend, &dir.path().join("spool"), 64 * MB).unwrap();
    let id = s.begin_episode(&meta("a", "x", 0, "mpa")).unwrap();
    let mut wrong = transition(0, 0);
    wrong.state.push(1.0);
    assert!(matches!(s.append(id, &[wrong]), Err(StoreError::Invalid(_))), "wrong state dimension");
    assert!(matches!(s.close_episode(id, f64::NAN), Err(StoreError::Invalid(_))), "NaN total reward");
    assert!(matches!(s.append(-999, &steps(0, 0..1)), Err(StoreError::Invalid(_))), "unknown provisional episode");
    let mut empty = decision("", 1);
    empty.app.clear();
    assert!(s.record_decisions(&[empty]).is_err());
    assert_eq!(s.pending(), 1, "only the begin was acknowledged");
}

#[test]
fn one_directory_serves_one_spool() {
    let dir = tempfile::tempdir().unwrap();
    let spool = dir.path().join("spool");
    let _first = Spooled::new(flaky(&dir.path().join("a.db")).0, &spool, MB).unwrap();
    let err = Spooled::new(flaky(&dir.path().join("b.db")).0, &spool, MB).err().unwrap().to_string();
    assert!(err.contains("in use"), "{err}");
}

/// A journal line that does not read back as an operation at all (a damaged or hand-edited
/// journal: garbage, a line missing its `op`) is set aside in `rejected.jsonl` with its text
/// and the reason when the spool is opened, once; the operations around it are kept and
/// written, whether the store is reachable then or only later.
#[test]
fn an_unreadable_journal_line_is_set_aside_and_the_rest_kept() {
    let dir = tempfile::tempdir().unwrap();
    let (db, spool) = (dir.path().join("a.db"), dir.path().join("spool"));
    let journal = spool.join("journal-0.jsonl");
    let valid = journal_while_down(&db, &spool);
    let damaged = format!("garbage{{\n{}\n{}\n{{\"id\":-1}}\n{}\n{}\n", valid[0], valid[1], valid[2], valid[3]);
    std::fs::write(&journal, damaged).unwrap();

    // Still down: the unreadable lines are set aside, the four operations wait.
    {
        let s = Spooled::new(down(&db), &spool, 64 * MB).unwrap();
        assert_eq!((s.pending(), s.set_aside()), (4, 2));
    }
    let rejected = std::fs::read_to_string(spool.join("rejected.jsonl")).unwrap();
    let rejected: Vec<serde_json::Value> = rejected.lines().map(|l| serde_json::from_str(l).unwrap()).collect();
    assert_eq!(rejected.len(), 2, "{rejected:?}");
    assert_eq!(rejected[0]["line"], "garbage{");
    assert_eq!(rejected[1]["line"], "{\"id\":-1}");
    let why = rejected[1]["error"].as_str().unwrap();
    assert!(why.contains("journal-0.jsonl: operation 4") && why.contains("missing field `op`"), "{why}");

    // Back up: opening flushes what was kept, and sets nothing aside twice.
    let s = Spooled::new(flaky(&db).0, &spool, 64 * MB).unwrap();
    assert_eq!((s.pending(), s.set_aside()), (0, 0));
    assert_eq!(std::fs::read_to_string(spool.join("rejected.jsonl")).unwrap().lines().count(), 2);
    let direct = SqliteStore::open_read_only(&db).unwrap();
    assert_eq!(direct.last_rewards("a", 10).unwrap(), vec![1.5]);
    let rec = &direct.episodes(Some("a")).unwrap()[0];
    assert_eq!(direct.episode(rec.id).unwrap().1, steps(0, 0..4));
    assert_eq!(direct.decisions("x", DecisionQuery::Last(5)).unwrap(), vec![decision("x", 1)]);
}

/// Damage the spool cannot set aside safely is refused, naming the journal, as before: a
/// damaged line among those already written to the store (which of the rest were is then
/// unknown), and an operation of a kind this build does not know (a newer one can apply it).
#[test]
fn damage_among_flushed_lines_or_an_unknown_operation_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    let (db, spool) = (dir.path().join("a.db"), dir.path().join("spool"));
    let journal = spool.join("journal-0.jsonl");
    let valid = journal_while_down(&db, &spool);
    let progress = spool.join("progress.json");
    let saved = std::fs::read(&progress).ok();

    // The first two lines count as written to the store, and the first is garbled.
    std::fs::write(&progress, r#"{"generation":0,"done":2,"ids":[[-1,1]],"rejected_ids":[]}"#).unwrap();
    std::fs::write(&journal, format!("garbage{{\n{}\n{}\n{}\n", valid[1], valid[2], valid[3])).unwrap();
    let err = Spooled::new(down(&db), &spool, 64 * MB).err().unwrap().to_string();
    assert!(err.contains("journal-0.jsonl: operation 1") && err.contains("already written"), "{err}");
    assert!(!spool.join("rejected.jsonl").exists(), "nothing set aside");

    // A kind of operation this build does not know, pending.
    match &saved {
        Some(text) => std::fs::write(&progress, text).unwrap(),
        None => std::fs::remove_file(&progress).unwrap(),
    }
    let newer = r#"{"op":"snapshot","id":-1}"#;
    std::fs::write(&journal, format!("{}\n{newer}\n{}\n", valid[0], valid[1])).unwrap();
    let err = Spooled::new(down(&db), &spool, 64 * MB).err().unwrap().to_string();
    assert!(err.contains("operation 2") && err.contains("\"snapshot\"") && err.contains("newer"), "{err}");
    assert!(!spool.join("rejected.jsonl").exists(), "nothing set aside");
    assert_eq!(std::fs::read_to_string(&journal).unwrap().lines().count(), 3, "the journal is left as it was");
}

/// A journal entry that can never be applied (here: operations on episodes the spool never
/// began, as a damaged or hand-edited journal holds) is set aside in `rejected.jsonl` with the
/// reason; it does not hold back the valid entries behind it, nor pass for an outage.
#[test]
fn an_entry_on_an_unknown_episode_is_set_aside_and_the_rest_flushed() {
    let dir = tempfile::tempdir().unwrap();
    let (db, spool) = (dir.path().join("a.db"), dir.path().join("spool"));
    // Valid entries, journaled during an outage by a process that then exits.
    {
        let (backend, switch) = flaky(&db);
        switch.set_up(false);
        let mut s = Spooled::new(backend, &spool, 64 * MB).unwrap();
        let id = s.begin_episode(&meta("a", "x", 0, "mpa")).unwrap();
        s.append(id, &steps(0, 0..4)).unwrap();
        s.close_episode(id, 1.5).unwrap();
        s.record_decisions(&[decision("x", 1)]).unwrap();
        assert_eq!(s.pending(), 4);
    }
    // The journal is damaged: it now starts with operations on episodes never begun.
    let journal = spool.join("journal-0.jsonl");
    let valid = std::fs::read_to_string(&journal).unwrap();
    let bogus_append = serde_json::json!({
        "op": "append",
        "id": -98,
        "transitions": [{ "step": 0, "state": [0, 0, 0, 0], "action": [0, 0], "reward": 0,
                          "next_state": [0, 0, 0, 0], "done": false }],
    });
    let damaged =
        format!("{{\"op\":\"close\",\"id\":-99,\"total_reward_bits\":{}}}\n{bogus_append}\n{valid}", 2.0f64.to_bits());
    std::fs::write(&journal, damaged).unwrap();

    // The store is reachable: opening the spool flushes everything valid.
    let (backend, _switch) = flaky(&db);
    let mut s = Spooled::new(backend, &spool, 64 * MB).unwrap();
    assert_eq!(s.pending(), 0, "nothing waits: the store is reachable");
    assert_eq!(s.set_aside(), 2, "both entries on unknown episodes are set aside");
    let rejected = std::fs::read_to_string(spool.join("rejected.jsonl")).unwrap();
    let rejected: Vec<serde_json::Value> = rejected.lines().map(|l| serde_json::from_str(l).unwrap()).collect();
    assert_eq!(rejected.len(), 2, "{rejected:?}");
    assert_eq!(rejected[0]["operation"]["op"], "close");
    assert_eq!(rejected[0]["operation"]["id"], -99);
    assert_eq!(rejected[1]["operation"]["op"], "append");
    assert_eq!(rejected[1]["operation"]["id"], -98);
    for r in &rejected {
        let why = r["error"].as_str().unwrap();
        assert!(why.contains("never begun") && !why.contains("unavailable"), "{why}");
    }

    // The valid entries are in the store, exactly.
    let direct = SqliteStore::open_read_only(&db).unwrap();
    assert_eq!(direct.last_rewards("a", 10).unwrap(), vec![1.5]);
    let rec = &direct.episodes(Some("a")).unwrap()[0];
    let (_, ts) = direct.episode(rec.id).unwrap();
    assert_eq!(ts, steps(0, 0..4));
    assert_eq!(direct.decisions("x", DecisionQuery::Last(5)).unwrap(), vec![decision("x", 1)]);

    // An episode the spool never knew reads as unknown, not as the store being down.
    let err = s.episode(-99).unwrap_err();
    assert!(matches!(err, StoreError::UnknownEpisode(-99)), "{err}");
    // Later writes go straight through; the spool stays empty.
    s.record_decisions(&[decision("x", 2)]).unwrap();
    assert_eq!(s.pending(), 0);
    assert_eq!(s.flush().unwrap(), 0);
}
