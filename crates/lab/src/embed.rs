//! The seam between the lifecycle manager and the meta-learner: the lifecycle asks for an
//! application's workload embedding through [`WorkloadEmbedder`] when an app arrives or its
//! workload changes; `aware-meta` implements it. Neither crate depends on the other.

use aware_store::TrajectoryStore;

/// An application's workload embedding and how it relates to what the meta-learner was trained on.
#[derive(Debug, Clone, PartialEq)]
pub struct WorkloadEmbedding {
    pub values: Vec<f32>,
    /// Distance to the training pool's embeddings (where the embedder knows the pool).
    pub ood_score: Option<f32>,
    /// Unlike anything in the training pool: the lifecycle keeps the fallback acting (or
    /// retrains) and says so in the decision log.
    pub out_of_distribution: bool,
}

/// Why no embedding could be made (too few episodes, NaN rewards, the store away, …); the
/// lifecycle keeps the fallback acting and logs the reason.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[error("no workload embedding for {app}: {reason}")]
pub struct EmbedRefusal {
    pub app: String,
    pub reason: String,
}

/// What the lifecycle manager asks of a meta-learner.
pub trait WorkloadEmbedder {
    /// Width of the embeddings (what the base learner's state grows by).
    fn width(&self) -> usize;

    /// The embedding of `app` from what `store` holds of it.
    fn embed(&mut self, store: &dyn TrajectoryStore, app: &str) -> Result<WorkloadEmbedding, EmbedRefusal>;
}
