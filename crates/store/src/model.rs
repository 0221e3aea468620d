//! The store's records.

use serde::{Deserialize, Serialize};

/// Store-wide identifier of an episode.
pub type EpisodeId = i64;

#[derive(Debug, thiserror::Error)]
pub enum StoreError {
    #[error("{0}")]
    Invalid(String),
    #[error("{path}: written by a newer schema (v{found}); this build reads up to v{supported}, and will not touch it")]
    NewerSchema { path: String, found: i64, supported: i64 },
    #[error("{path}: read-only ({reason}); nothing was written")]
    ReadOnly { path: String, reason: String },
    #[error("{path}: {reason}")]
    Corrupt { path: String, reason: String },
    #[error("unknown episode {0}")]
    UnknownEpisode(EpisodeId),
    #[error("{0}")]
    Backend(String),
    /// The backend cannot be reached now (server down, connection broken, database busy):
    /// the same call may succeed later.
    #[error("store unavailable: {0}")]
    Unavailable(String),
    /// The on-disk spool in `dir` holds `max_bytes` of operations not yet written to the backend;
    /// the operation was refused (nothing acknowledged is dropped).
    #[error("spool {dir} is full ({max_bytes} bytes of operations wait for the store); the operation was refused")]
    SpoolFull { dir: String, max_bytes: u64 },
}

impl StoreError {
    /// True when the backend could not be reached (worth retrying later).
    pub fn is_unavailable(&self) -> bool {
        matches!(self, StoreError::Unavailable(_))
    }
}

/// What is known when an episode starts.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct EpisodeMeta {
    pub agent: String,
    pub app: String,
    /// The agent's own episode counter (the logical timestamp's middle part).
    pub episode: u64,
    /// Lifecycle stage it ran in (`offline`, `online`, `serving`, …).
    pub stage: String,
    /// Who acted: the fallback recommender's name or the agent's.
    pub policy: String,
    pub state_dim: u32,
    pub action_dim: u32,
    /// Wall-clock start, seconds since the Unix epoch (retention works on it).
    pub started_at_s: f64,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Transition {
    pub step: u32,
    pub state: Vec<f32>,
    pub action: Vec<f32>,
    pub reward: f32,
    pub next_state: Vec<f32>,
    pub done: bool,
}

impl Transition {
    /// Refuses a transition that does not match the episode's dimensions or is not finite.
    pub fn check(&self, state_dim: u32, action_dim: u32) -> Result<(), StoreError> {
        let dims = [
            ("state", self.state.len(), state_dim),
            ("next_state", self.next_state.len(), state_dim),
            ("action", self.action.len(), action_dim),
        ];
        for (field, got, want) in dims {
            if got != want as usize {
                return Err(StoreError::Invalid(format!(
                    "transition step {}: {field} has dimension {got}, the episode declared {want}",
                    self.step
                )));
            }
        }
        let finite = self.state.iter().chain(&self.action).chain(&self.next_state).all(|v| v.is_finite());
        if !finite || !self.reward.is_finite() {
            return Err(StoreError::Invalid(format!("transition step {}: NaN or infinite value", self.step)));
        }
        Ok(())
    }
}

#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct EpisodeRecord {
    pub id: EpisodeId,
    pub meta: EpisodeMeta,
    /// `None` while incomplete (never closed: still running, or its writer died).
    pub total_reward: Option<f64>,
    pub length: u32,
    pub closed_at_s: Option<f64>,
}

impl EpisodeRecord {
    pub fn is_complete(&self) -> bool {
        self.closed_at_s.is_some()
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TopMode {
    /// The best `m` (AWARE's meta-learner input).
    Best,
    /// The best `m/2` and the worst `m/2` (FLASH's).
    BestAndWorst,
}

impl TopMode {
    /// How many of the best and of the worst episodes `m` asks for.
    pub fn split(self, m: usize) -> (usize, usize) {
        match self {
            TopMode::Best => (m, 0),
            TopMode::BestAndWorst => (m.div_ceil(2), m / 2),
        }
    }
}

/// The best episodes followed by the worst ones not already among them.
pub fn best_then_worst(mut best: Vec<EpisodeRecord>, worst: Vec<EpisodeRecord>) -> Vec<EpisodeRecord> {
    for w in worst {
        if !best.iter().any(|b| b.id == w.id) {
            best.push(w);
        }
    }
    best
}

/// Checks transitions about to be appended to an episode of `length` steps: dimensions, finite
/// values and gap-free step order. Returns the episode's length after them.
pub fn check_appended(
    episode: EpisodeId,
    transitions: &[Transition],
    state_dim: u32,
    action_dim: u32,
    length: u32,
) -> Result<u32, StoreError> {
    let mut length = length;
    for t in transitions {
        t.check(state_dim, action_dim)?;
        if t.step != length {
            return Err(StoreError::Invalid(format!(
                "episode {episode}: transition step {} out of order (expected {length})",
                t.step
            )));
        }
        length += 1;
    }
    Ok(length)
}

/// `n` (episode index, step) pairs drawn uniformly, with replacement, over all transitions of
/// `episodes`; deterministic for a seed. Empty when the episodes hold no transition.
pub fn pick_steps(episodes: &[EpisodeRecord], n: usize, seed: u64) -> Vec<(usize, u64)> {
    use rand::{RngExt, SeedableRng};
    let mut cumulative = Vec::with_capacity(episodes.len());
    let mut total = 0u64;
    for e in episodes {
        total += e.length as u64;
        cumulative.push(total);
    }
    if total == 0 {
        return Vec::new();
    }
    let mut rng = rand_pcg::Pcg64Mcg::seed_from_u64(seed);
    (0..n)
        .map(|_| {
            let k = rng.random_range(0..total);
            let i = cumulative.partition_point(|&c| c <= k);
            (i, k - (cumulative[i] - episodes[i].length as u64))
        })
        .collect()
}

/// Which transitions a minibatch may come from.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct TransitionFilter {
    pub agent: Option<String>,
    pub app: Option<String>,
    /// Only episodes this policy acted in (offline bootstrapping trains on the fallback's data).
    pub policy: Option<String>,
}

#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct StoreStats {
    pub episodes: u64,
    pub incomplete_episodes: u64,
    pub transitions: u64,
    pub agents: Vec<String>,
    pub apps: u64,
    /// Lifecycle decisions recorded.
    pub decisions: u64,
    /// Lifecycle stage changes recorded.
    pub stage_changes: u64,
}

/// Little-endian f32 vector encoding.
pub fn encode(v: &[f32]) -> Vec<u8> {
    let mut out = Vec::with_capacity(v.len() * 4);
    for x in v {
        out.extend_from_slice(&x.to_le_bytes());
    }
    out
}

/// A stored vector whose size does not match its recorded dimension.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{what}: {bytes} bytes stored, dimension {dim} needs {}", *dim as u64 * 4)]
pub struct VectorSizeError {
    pub what: &'static str,
    pub bytes: usize,
    pub dim: u32,
}

/// Decodes a vector, refusing one whose size does not match `dim`.
pub fn decode(bytes: &[u8], dim: u32, what: &'static str) -> Result<Vec<f32>, VectorSizeError> {
    if bytes.len() != dim as usize * 4 {
        return Err(VectorSizeError { what, bytes: bytes.len(), dim });
    }
    Ok(bytes.chunks_exact(4).map(|c| f32::from_le_bytes([c[0], c[1], c[2], c[3]])).collect())
}

/// One decision of the lifecycle manager for one application in one interval. The store keys
/// it by app and step; `detail` (observation, action, attribution, …) is opaque to it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct DecisionRecord {
    /// Who ran the manager (`aware`).
    pub agent: String,
    pub app: String,
    /// Interval since the run started.
    pub step: u64,
    /// `initialized`, `offline`, `online` or `serving`.
    pub stage: String,
    /// The agent's name or the fallback's.
    pub acting_policy: String,
    /// The guard's verdict (`passed`, `limited: …`, `fallback: …`).
    pub guard: String,
    /// A JSON object.
    pub detail: serde_json::Value,
}

impl DecisionRecord {
    /// Refuses a record with an empty agent or app, or a `detail` that is not a JSON object.
    pub fn check(&self) -> Result<(), StoreError> {
        let at = |field: &str, reason: &str| {
            StoreError::Invalid(format!("decision of {:?} at step {}: {field} {reason}", self.app, self.step))
        };
        if self.agent.is_empty() {
            return Err(at("agent", "is empty"));
        }
        if self.app.is_empty() {
            return Err(at("app", "is empty"));
        }
        if !self.detail.is_object() {
            return Err(at("detail", "is not a JSON object"));
        }
        if self.step > i64::MAX as u64 {
            return Err(at("step", "is out of range"));
        }
        Ok(())
    }
}

/// One lifecycle stage change of one application, with the reason (and its numbers).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct StageRecord {
    pub agent: String,
    pub app: String,
    pub step: u64,
    pub from: String,
    pub to: String,
    pub reason: String,
}

impl StageRecord {
    /// Refuses a change with an empty agent or app.
    pub fn check(&self) -> Result<(), StoreError> {
        for (field, value) in [("agent", &self.agent), ("app", &self.app)] {
            if value.is_empty() {
                return Err(StoreError::Invalid(format!("stage change at step {}: {field} is empty", self.step)));
            }
        }
        if self.step > i64::MAX as u64 {
            return Err(StoreError::Invalid(format!("stage change of {:?}: step out of range", self.app)));
        }
        Ok(())
    }
}

/// Which of an application's decisions to read.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum DecisionQuery {
    /// Every decision recorded at this step.
    Step(u64),
    /// The `k` most recently recorded, oldest first.
    Last(usize),
}
