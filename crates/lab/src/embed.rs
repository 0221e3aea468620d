//! The seam between the lifecycle manager and the meta-learner: the lifecycle asks for an
//! application's workload embedding through [`WorkloadEmbedder`] when an app arrives or its
//! workload changes; `aware-meta` implements it. Neither crate depends on the other.

use aware_store::TrajectoryStore;

/// An application's workload embedding and how it relates to what the meta-learner was trained on.
#[derive(Debug, Clone, PartialEq)]
pub struct WorkloadEmbedding {
    /// What the base learner reads beside the state (for AWARE's meta-learner: the embedding
    /// scaled to unit length).
    pub values: Vec<f32>,
    /// Distance to the training pool's embeddings (where the embedder knows the pool).
    pub ood_score: Option<f32>,
    /// Unlike anything in the training pool: the lifecycle keeps the fallback acting (or
    /// retrains) and says so in the decision log.
    pub out_of_distribution: bool,
    /// Why it was judged out of distribution: the test that flagged it, its score and the
    /// pool's threshold.
    pub ood_reason: Option<String>,
    /// What the detector read, flagged or not: each test's score beside its threshold (what the
    /// decision log says of a workload judged known).
    pub ood_detail: Option<String>,
}

/// Why no embedding could be made (too few episodes, NaN rewards, the store away, …); the
/// lifecycle keeps the fallback acting and logs the reason.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[error("no workload embedding for {app}: {reason}")]
pub struct EmbedRefusal {
    pub app: String,
    pub reason: String,
}

/// The space of the states a base learner conditioned on `width` embedding values reads: the
/// state encoder's features, then the embedding at unit length (each value within [−1, 1]).
/// The meta-learner's saved base learner and the lifecycle's checkpoint both use it (the
/// lifecycle's `width` counts a residual agent's three proposal features too, also in
/// [−1, 1]).
pub fn conditioned_space(width: usize) -> aware_core::Space {
    match aware_env::StateEncoder::space() {
        aware_core::Space::Box { mut low, mut high } => {
            low.extend(std::iter::repeat_n(-1.0, width));
            high.extend(std::iter::repeat_n(1.0, width));
            aware_core::Space::Box { low, high }
        }
        other => other,
    }
}

/// What the lifecycle manager asks of a meta-learner.
pub trait WorkloadEmbedder {
    /// Width of the embeddings (what the base learner's state grows by).
    fn width(&self) -> usize;

    /// The embedding of `app` from what `store` holds of it.
    fn embed(&mut self, store: &dyn TrajectoryStore, app: &str) -> Result<WorkloadEmbedding, EmbedRefusal>;
}
