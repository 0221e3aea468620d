//! The trajectory store: every ⟨state, action, reward⟩ with its logical timestamp (agent,
//! episode, step). The lifecycle's decisions are driven from it — recent rewards for the
//! retraining trigger, the best trajectories for the meta-learner, fallback-controller data
//! for offline bootstrapping — so it must never lose or corrupt what it acknowledged: an
//! episode is acknowledged when `close_episode` returns, and unclosed episodes never reach a
//! training read.
//!
//! A backend that cannot be reached answers [`StoreError::Unavailable`]; [`Spooled`] wraps any
//! store so that writes made during such an outage are journaled on disk and written later.

mod deferred;
pub mod export;
pub mod fault;
mod influx;
mod model;
mod postgres;
mod spool;
mod sqlite;
mod url;

pub use influx::InfluxStore;
pub use model::{
    DecisionQuery, DecisionRecord, EpisodeId, EpisodeMeta, EpisodeRecord, StageRecord, StoreError, StoreStats, TopMode,
    Transition, TransitionFilter, VectorSizeError, best_then_worst, check_appended, decode, encode, pick_steps,
};
pub use postgres::PostgresStore;
pub use spool::Spooled;
pub use sqlite::{SCHEMA_VERSION, SqliteStore, Sync};
pub use url::{DEFAULT_SPOOL_BYTES, SQLITE_JOURNALS, StoreUrl, open, open_spooled};

/// What every backend provides. Reads only ever see closed (acknowledged) episodes, except
/// `episodes` and `episode`, which show incomplete ones marked as such for operators.
pub trait TrajectoryStore {
    /// Registers an episode; its transitions follow with `append`.
    fn begin_episode(&mut self, meta: &EpisodeMeta) -> Result<EpisodeId, StoreError>;

    /// Appends transitions (any number of calls per episode); checked against the episode's
    /// declared dimensions.
    fn append(&mut self, episode: EpisodeId, transitions: &[Transition]) -> Result<(), StoreError>;

    /// Closes an episode with its total reward: durable once this returns.
    fn close_episode(&mut self, episode: EpisodeId, total_reward: f64) -> Result<(), StoreError>;

    /// Total rewards of the agent's last `n` closed episodes, most recent first.
    fn last_rewards(&self, agent: &str, n: usize) -> Result<Vec<f64>, StoreError>;

    /// The application's closed episodes ranked by total reward: the best `m`, or the best `m/2`
    /// and the worst `m/2` (FLASH).
    fn top_episodes(&self, app: &str, m: usize, mode: TopMode) -> Result<Vec<EpisodeRecord>, StoreError>;

    /// `n` transitions drawn uniformly (with replacement) from the closed episodes matching
    /// `filter`; deterministic for a seed.
    fn sample(&self, filter: &TransitionFilter, n: usize, seed: u64) -> Result<Vec<Transition>, StoreError>;

    /// One episode with all its transitions, in step order.
    fn episode(&self, id: EpisodeId) -> Result<(EpisodeRecord, Vec<Transition>), StoreError>;

    /// Episodes (closed and incomplete), optionally of one agent, in id order.
    fn episodes(&self, agent: Option<&str>) -> Result<Vec<EpisodeRecord>, StoreError>;

    /// Deletes episodes started before `cutoff_s` (seconds since the Unix epoch); returns how many.
    fn retain(&mut self, cutoff_s: f64) -> Result<u64, StoreError>;

    fn stats(&self) -> Result<StoreStats, StoreError>;

    /// Appends lifecycle decisions, all or none; durable when it returns (one transaction
    /// per call). Each must have a non-empty agent and app and a JSON-object `detail`.
    fn record_decisions(&mut self, decisions: &[DecisionRecord]) -> Result<(), StoreError>;

    /// An application's decisions in (step, recording) order: all those of one step, or the
    /// `k` most recently recorded.
    fn decisions(&self, app: &str, query: DecisionQuery) -> Result<Vec<DecisionRecord>, StoreError>;

    /// Appends a stage change; durable when it returns.
    fn record_stage_change(&mut self, change: &StageRecord) -> Result<(), StoreError>;

    /// Stage changes, optionally of one application, in recording order.
    fn stage_changes(&self, app: Option<&str>) -> Result<Vec<StageRecord>, StoreError>;
}
