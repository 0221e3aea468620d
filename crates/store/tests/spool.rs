//! The on-disk spool: writes made while the backend is unreachable are acknowledged, kept on
//! disk, and reach the backend in order once it is back — across a restart too.

mod common;

use std::cell::Cell;
use std::path::Path;
use std::rc::Rc;

use aware_store::{
    DecisionQuery, DecisionRecord, EpisodeId, EpisodeMeta, EpisodeRecord, Spooled, SqliteStore, StageRecord,
    StoreError, StoreStats, Sync, TopMode, TrajectoryStore, Transition, TransitionFilter,
};
use common::{meta, transition};

/// A SQLite store that answers `Unavailable` to everything while `down` is set.
struct Flaky {
    inner: SqliteStore,
    down: Rc<Cell<bool>>,
}

impl Flaky {
    fn open(path: &Path, down: &Rc<Cell<bool>>) -> Box<dyn TrajectoryStore> {
        Box::new(Flaky { inner: SqliteStore::open(path, Sync::Full).unwrap(), down: down.clone() })
    }
    fn check(&self) -> Result<(), StoreError> {
        if self.down.get() { Err(StoreError::Unavailable("test backend is down".into())) } else { Ok(()) }
    }
}

impl TrajectoryStore for Flaky {
    fn begin_episode(&mut self, meta: &EpisodeMeta) -> Result<EpisodeId, StoreError> {
        self.check()?;
        self.inner.begin_episode(meta)
    }
    fn append(&mut self, episode: EpisodeId, transitions: &[Transition]) -> Result<(), StoreError> {
        self.check()?;
        self.inner.append(episode, transitions)
    }
    fn close_episode(&mut self, episode: EpisodeId, total_reward: f64) -> Result<(), StoreError> {
        self.check()?;
        self.inner.close_episode(episode, total_reward)
    }
    fn last_rewards(&self, agent: &str, n: usize) -> Result<Vec<f64>, StoreError> {
        self.check()?;
        self.inner.last_rewards(agent, n)
    }
    fn top_episodes(&self, app: &str, m: usize, mode: TopMode) -> Result<Vec<EpisodeRecord>, StoreError> {
        self.check()?;
        self.inner.top_episodes(app, m, mode)
    }
    fn sample(&self, filter: &TransitionFilter, n: usize, seed: u64) -> Result<Vec<Transition>, StoreError> {
        self.check()?;
        self.inner.sample(filter, n, seed)
    }
    fn episode(&self, id: EpisodeId) -> Result<(EpisodeRecord, Vec<Transition>), StoreError> {
        self.check()?;
        self.inner.episode(id)
    }
    fn episodes(&self, agent: Option<&str>) -> Result<Vec<EpisodeRecord>, StoreError> {
        self.check()?;
        self.inner.episodes(agent)
    }
    fn retain(&mut self, cutoff_s: f64) -> Result<u64, StoreError> {
        self.check()?;
        self.inner.retain(cutoff_s)
    }
    fn stats(&self) -> Result<StoreStats, StoreError> {
        self.check()?;
        self.inner.stats()
    }
    fn record_decisions(&mut self, decisions: &[DecisionRecord]) -> Result<(), StoreError> {
        self.check()?;
        self.inner.record_decisions(decisions)
    }
    fn decisions(&self, app: &str, query: DecisionQuery) -> Result<Vec<DecisionRecord>, StoreError> {
        self.check()?;
        self.inner.decisions(app, query)
    }
    fn record_stage_change(&mut self, change: &StageRecord) -> Result<(), StoreError> {
        self.check()?;
        self.inner.record_stage_change(change)
    }
    fn stage_changes(&self, app: Option<&str>) -> Result<Vec<StageRecord>, StoreError> {
        self.check()?;
        self.inner.stage_changes(app)
    }
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

#[test]
fn an_outage_is_journaled_and_written_in_order_when_the_backend_is_back() {
    let dir = tempfile::tempdir().unwrap();
    let down = Rc::new(Cell::new(false));
    let mut s = Spooled::new(Flaky::open(&dir.path().join("a.db"), &down), &dir.path().join("spool"), 64 * MB).unwrap();

    // Begun while up, finished during the outage.
    let first = s.begin_episode(&meta("a", "x", 0, "mpa")).unwrap();
    assert!(first > 0, "a backend id while the backend is up");
    s.append(first, &steps(0, 0..5)).unwrap();
    down.set(true);
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
    // Still down: flushing keeps everything.
    assert!(s.flush().unwrap_err().is_unavailable());
    assert_eq!(s.pending(), 7);

    down.set(false);
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
    let down = Rc::new(Cell::new(true));
    {
        let mut s = Spooled::new(Flaky::open(&db, &down), &spool, 64 * MB).unwrap();
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
        let mut s = Spooled::new(Flaky::open(&db, &down), &spool, 64 * MB).unwrap();
        assert_eq!(s.pending(), 9);
        let id = s.begin_episode(&meta("a", "x", 3, "mpa")).unwrap();
        assert!(id < 0);
        s.append(id, &steps(3, 0..4)).unwrap();
        s.close_episode(id, 3.0).unwrap();
    }
    // Back up: opening flushes.
    down.set(false);
    let s = Spooled::new(Flaky::open(&db, &down), &spool, 64 * MB).unwrap();
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
    let down = Rc::new(Cell::new(true));
    let mut s = Spooled::new(Flaky::open(&dir.path().join("a.db"), &down), &dir.path().join("spool"), 4096).unwrap();
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
    down.set(false);
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
    let down = Rc::new(Cell::new(true));
    let mut s = Spooled::new(Flaky::open(&dir.path().join("a.db"), &down), &dir.path().join("spool"), 64 * MB).unwrap();
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
    let down = Rc::new(Cell::new(false));
    let spool = dir.path().join("spool");
    let _first = Spooled::new(Flaky::open(&dir.path().join("a.db"), &down), &spool, MB).unwrap();
    let err = Spooled::new(Flaky::open(&dir.path().join("b.db"), &down), &spool, MB).err().unwrap().to_string();
    assert!(err.contains("in use"), "{err}");
}
