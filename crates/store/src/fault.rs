//! Fault injection: a store that can be switched off and on, for drills and tests of what the
//! system does while its store is unreachable.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use crate::TrajectoryStore;
use crate::model::{
    DecisionQuery, DecisionRecord, EpisodeId, EpisodeMeta, EpisodeRecord, StageRecord, StoreError, StoreStats, TopMode,
    Transition, TransitionFilter,
};

/// Wraps a store; while its switch is off every call answers [`StoreError::Unavailable`] and
/// reaches nothing.
pub struct Switchable {
    inner: Box<dyn TrajectoryStore>,
    up: Arc<AtomicBool>,
}

/// Turns a [`Switchable`] store off and on.
#[derive(Debug, Clone)]
pub struct Switch(Arc<AtomicBool>);

impl Switch {
    pub fn set_up(&self, up: bool) {
        self.0.store(up, Ordering::SeqCst);
    }

    pub fn is_up(&self) -> bool {
        self.0.load(Ordering::SeqCst)
    }
}

impl Switchable {
    /// `inner`, reachable until the returned switch says otherwise.
    pub fn new(inner: Box<dyn TrajectoryStore>) -> (Self, Switch) {
        let up = Arc::new(AtomicBool::new(true));
        (Self { inner, up: up.clone() }, Switch(up))
    }

    fn check(&self) -> Result<(), StoreError> {
        if self.up.load(Ordering::SeqCst) {
            Ok(())
        } else {
            Err(StoreError::Unavailable("the store is switched off (fault injection)".into()))
        }
    }
}

impl TrajectoryStore for Switchable {
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
