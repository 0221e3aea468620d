//! Crash safety: a writer process is SIGKILLed mid-stream; every episode whose close was
//! acknowledged must be intact, the file must pass `integrity_check`, and the half-written
//! episode must never reach a training read.

mod common;

use std::io::{BufRead, BufReader, Write};
use std::process::{Command, Stdio};

use aware_store::{SqliteStore, Sync, TopMode, TrajectoryStore, TransitionFilter};
use common::{meta, transition};

const CHILD: &str = "AWARE_STORE_CRASH_WRITER";

/// Child mode: writes 100-step episodes in chunks forever, announcing each acknowledged close.
#[test]
fn writer_child() {
    let Ok(path) = std::env::var(CHILD) else { return };
    let mut store = SqliteStore::open(std::path::Path::new(&path), Sync::Normal).unwrap();
    let mut out = std::io::stdout().lock();
    for e in 0.. {
        let id = store.begin_episode(&meta("a", "x", e, "agent")).unwrap();
        for chunk in 0..10u32 {
            let steps: Vec<_> = (chunk * 10..chunk * 10 + 10).map(|s| transition(e, s)).collect();
            store.append(id, &steps).unwrap();
        }
        store.close_episode(id, e as f64).unwrap();
        writeln!(out, "closed {id} {e}").unwrap();
        out.flush().unwrap();
    }
}

#[test]
fn sigkill_mid_stream_keeps_every_acknowledged_episode() {
    if std::env::var(CHILD).is_ok() {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("crash.db");
    let mut child = Command::new(std::env::current_exe().unwrap())
        .args(["--exact", "writer_child", "--nocapture", "--test-threads=1"])
        .env(CHILD, &path)
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let mut acknowledged = Vec::new();
    for line in BufReader::new(child.stdout.take().unwrap()).lines() {
        let line = line.unwrap();
        if let Some(rest) = line.strip_prefix("closed ") {
            let mut parts = rest.split(' ');
            let id: i64 = parts.next().unwrap().parse().unwrap();
            let e: u64 = parts.next().unwrap().parse().unwrap();
            acknowledged.push((id, e));
            if acknowledged.len() == 200 {
                break;
            }
        }
    }
    child.kill().unwrap(); // SIGKILL on Unix
    child.wait().unwrap();

    let store = SqliteStore::open(&path, Sync::Normal).unwrap();
    assert_eq!(store.integrity_check().unwrap(), "ok");
    for &(id, e) in &acknowledged {
        let (rec, transitions) = store.episode(id).unwrap();
        assert!(rec.is_complete(), "episode {e} was acknowledged");
        assert_eq!(rec.total_reward, Some(e as f64));
        assert_eq!(transitions, (0..100).map(|s| transition(e, s)).collect::<Vec<_>>());
    }
    // Whatever was in flight is absent or incomplete, and never read for training.
    let all = store.episodes(None).unwrap();
    let closed: Vec<u64> = all.iter().filter(|r| r.is_complete()).map(|r| r.meta.episode).collect();
    assert!(all.len() <= closed.len() + 1, "at most the one in-flight episode is incomplete");
    for r in all.iter().filter(|r| !r.is_complete()) {
        assert!(!acknowledged.iter().any(|&(id, _)| id == r.id));
    }
    let batch = store.sample(&TransitionFilter { agent: Some("a".into()), ..Default::default() }, 2000, 3).unwrap();
    assert!(batch.iter().all(|t| closed.contains(&(t.state[0] as u64))));
    assert!(store.top_episodes("x", 500, TopMode::Best).unwrap().iter().all(|r| r.is_complete()));
    assert_eq!(store.last_rewards("a", 10_000).unwrap().len(), closed.len());
}
