//! A server store that was unreachable when a writer started: it connects on first use.
//!
//! [`crate::open_spooled`] opens a PostgreSQL or InfluxDB store through this when the server
//! does not answer at start, so that the [`crate::Spooled`] in front of it journals every write
//! from the first one, exactly as through an outage that began later, and flushes them once the
//! server answers. Until then every call answers [`StoreError::Unavailable`] with the reason of
//! the last attempt. Attempts are spaced out (1 s after a failure, doubling to at most 30 s), so
//! a spool flushing before every write does not wait on a dead server at every write.
//!
//! A server that answers but refuses (a wrong password, a newer schema) is reported as such by
//! the attempt that reached it: the writes stay journaled, nothing is set aside for it.

use std::cell::{Cell, RefCell};
use std::time::{Duration, Instant};

use crate::model::{
    DecisionQuery, DecisionRecord, EpisodeId, EpisodeMeta, EpisodeRecord, StageRecord, StoreError, StoreStats, TopMode,
    Transition, TransitionFilter,
};
use crate::{StoreUrl, TrajectoryStore};

/// The first wait after a failed attempt; it doubles after each failure up to [`MAX_WAIT`].
const FIRST_WAIT: Duration = Duration::from_secs(1);
const MAX_WAIT: Duration = Duration::from_secs(30);

/// How a store is opened: the URL's backend, or another way (tests).
type Opener = Box<dyn Fn() -> Result<Box<dyn TrajectoryStore>, StoreError>>;

pub(crate) struct Deferred {
    open: Opener,
    inner: RefCell<Option<Box<dyn TrajectoryStore>>>,
    /// The reason the last attempt failed.
    last_error: RefCell<String>,
    next_attempt: Cell<Instant>,
    wait: Cell<Duration>,
}

impl Deferred {
    /// A store of `url` not connected yet: `why` the first attempt failed.
    pub(crate) fn new(url: &StoreUrl, why: String) -> Self {
        let target = url.clone();
        Self::with_opener(Box::new(move || crate::open(&target, false)), why)
    }

    fn with_opener(open: Opener, why: String) -> Self {
        Self {
            open,
            inner: RefCell::new(None),
            last_error: RefCell::new(why),
            next_attempt: Cell::new(Instant::now() + FIRST_WAIT),
            wait: Cell::new(FIRST_WAIT),
        }
    }

    /// Connects if the wait since the last failure is over; `Unavailable` until connected.
    fn connect(&self) -> Result<(), StoreError> {
        if self.inner.borrow().is_some() {
            return Ok(());
        }
        let unavailable =
            || StoreError::Unavailable(format!("not reached since the writer started: {}", self.last_error.borrow()));
        if Instant::now() < self.next_attempt.get() {
            return Err(unavailable());
        }
        match (self.open)() {
            Ok(store) => {
                *self.inner.borrow_mut() = Some(store);
                Ok(())
            }
            Err(e) => {
                // A server that answered and refused (credentials, a newer schema) is not an
                // outage: said so, the writes keep waiting in the spool for an operator.
                *self.last_error.borrow_mut() = match e {
                    StoreError::Unavailable(why) => why,
                    other => format!("the store answered but refused: {other}"),
                };
                let wait = self.wait.get();
                self.next_attempt.set(Instant::now() + wait);
                self.wait.set((wait * 2).min(MAX_WAIT));
                Err(unavailable())
            }
        }
    }

    fn with<R>(&self, f: impl FnOnce(&dyn TrajectoryStore) -> Result<R, StoreError>) -> Result<R, StoreError> {
        self.connect()?;
        let inner = self.inner.borrow();
        f(inner.as_deref().expect("connected above"))
    }

    fn with_mut<R>(
        &mut self,
        f: impl FnOnce(&mut dyn TrajectoryStore) -> Result<R, StoreError>,
    ) -> Result<R, StoreError> {
        self.connect()?;
        f(self.inner.get_mut().as_deref_mut().expect("connected above"))
    }
}

impl TrajectoryStore for Deferred {
    fn begin_episode(&mut self, meta: &EpisodeMeta) -> Result<EpisodeId, StoreError> {
        self.with_mut(|s| s.begin_episode(meta))
    }
    fn append(&mut self, episode: EpisodeId, transitions: &[Transition]) -> Result<(), StoreError> {
        self.with_mut(|s| s.append(episode, transitions))
    }
    fn close_episode(&mut self, episode: EpisodeId, total_reward: f64) -> Result<(), StoreError> {
        self.with_mut(|s| s.close_episode(episode, total_reward))
    }
    fn last_rewards(&self, agent: &str, n: usize) -> Result<Vec<f64>, StoreError> {
        self.with(|s| s.last_rewards(agent, n))
    }
    fn top_episodes(&self, app: &str, m: usize, mode: TopMode) -> Result<Vec<EpisodeRecord>, StoreError> {
        self.with(|s| s.top_episodes(app, m, mode))
    }
    fn sample(&self, filter: &TransitionFilter, n: usize, seed: u64) -> Result<Vec<Transition>, StoreError> {
        self.with(|s| s.sample(filter, n, seed))
    }
    fn episode(&self, id: EpisodeId) -> Result<(EpisodeRecord, Vec<Transition>), StoreError> {
        self.with(|s| s.episode(id))
    }
    fn episodes(&self, agent: Option<&str>) -> Result<Vec<EpisodeRecord>, StoreError> {
        self.with(|s| s.episodes(agent))
    }
    fn retain(&mut self, cutoff_s: f64) -> Result<u64, StoreError> {
        self.with_mut(|s| s.retain(cutoff_s))
    }
    fn stats(&self) -> Result<StoreStats, StoreError> {
        self.with(|s| s.stats())
    }
    fn record_decisions(&mut self, decisions: &[DecisionRecord]) -> Result<(), StoreError> {
        self.with_mut(|s| s.record_decisions(decisions))
    }
    fn decisions(&self, app: &str, query: DecisionQuery) -> Result<Vec<DecisionRecord>, StoreError> {
        self.with(|s| s.decisions(app, query))
    }
    fn record_stage_change(&mut self, change: &StageRecord) -> Result<(), StoreError> {
        self.with_mut(|s| s.record_stage_change(change))
    }
    fn stage_changes(&self, app: Option<&str>) -> Result<Vec<StageRecord>, StoreError> {
        self.with(|s| s.stage_changes(app))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{Spooled, SqliteStore, Sync};

    fn meta(episode: u64) -> EpisodeMeta {
        EpisodeMeta {
            agent: "aware@a".into(),
            app: "a".into(),
            episode,
            stage: "offline".into(),
            policy: "mpa".into(),
            state_dim: 1,
            action_dim: 1,
            started_at_s: 1.0,
        }
    }

    /// A server down when the writer starts: its writes are spooled from the first, and reach
    /// the store, in order and complete, once it answers.
    #[test]
    fn writes_made_before_the_store_first_answers_are_spooled_and_flushed_when_it_does() {
        let dir = tempfile::tempdir().unwrap();
        let db = dir.path().join("late.db");
        let up = std::rc::Rc::new(Cell::new(false));
        let opener = {
            let (up, db) = (up.clone(), db.clone());
            Box::new(move || -> Result<Box<dyn TrajectoryStore>, StoreError> {
                if up.get() {
                    Ok(Box::new(SqliteStore::open(&db, Sync::Normal)?))
                } else {
                    Err(StoreError::Unavailable("connection refused".into()))
                }
            })
        };
        let deferred = Deferred::with_opener(opener, "connection refused".into());
        let mut store = Spooled::new(Box::new(deferred), &dir.path().join("spool"), 1 << 20).unwrap();
        let row =
            Transition { step: 0, state: vec![0.5], action: vec![0.1], reward: 1.0, next_state: vec![0.6], done: true };
        for e in 0..2 {
            let id = store.begin_episode(&meta(e)).unwrap();
            store.append(id, std::slice::from_ref(&row)).unwrap();
            store.close_episode(id, 1.0).unwrap();
        }
        assert_eq!(store.pending(), 6, "every write acknowledged into the spool");
        assert!(matches!(store.episodes(None), Err(StoreError::Unavailable(m)) if m.contains("connection refused")));
        up.set(true);
        // One failure so far: its wait is the first.
        std::thread::sleep(FIRST_WAIT);
        assert_eq!(store.flush().unwrap(), 6);
        assert_eq!(store.pending(), 0);
        let stored = store.episodes(Some("aware@a")).unwrap();
        assert_eq!(stored.iter().map(|r| r.meta.episode).collect::<Vec<_>>(), vec![0, 1]);
        assert!(stored.iter().all(|r| r.is_complete() && r.total_reward == Some(1.0)), "{stored:?}");
    }

    /// Attempts are spaced out: a failure is not retried before its wait is over.
    #[test]
    fn a_failed_attempt_is_not_repeated_before_its_wait() {
        let tries = std::rc::Rc::new(Cell::new(0));
        let opener = {
            let tries = tries.clone();
            Box::new(move || -> Result<Box<dyn TrajectoryStore>, StoreError> {
                tries.set(tries.get() + 1);
                Err(StoreError::Unavailable("refused".into()))
            })
        };
        let d = Deferred::with_opener(opener, "refused".into());
        for _ in 0..50 {
            assert!(matches!(d.stats(), Err(StoreError::Unavailable(_))));
        }
        assert_eq!(tries.get(), 0, "the first wait follows the failure at start");
        d.next_attempt.set(Instant::now());
        for _ in 0..50 {
            assert!(d.stats().is_err());
        }
        assert_eq!(tries.get(), 1);
        assert_eq!(d.wait.get(), FIRST_WAIT * 2, "the wait doubles");
    }
}
