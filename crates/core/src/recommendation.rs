//! What an autoscaler proposes. Recommendation is separated from actuation, as in the Kubernetes
//! MultidimPodAutoscaler: a recommender only proposes, the backend applies.

use serde::{Deserialize, Serialize};

use crate::observation::Observation;

/// CPU and memory quantities in the integer units Kubernetes uses, so that rounding matches the
/// upstream controllers exactly (HPA and VPA both work in millicores and bytes).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize, Default)]
#[serde(deny_unknown_fields)]
pub struct Resources {
    pub cpu_millicores: u64,
    pub memory_bytes: u64,
}

impl Resources {
    pub const fn new(cpu_millicores: u64, memory_bytes: u64) -> Self {
        Self { cpu_millicores, memory_bytes }
    }

    /// CPU in cores, the unit usage is measured in.
    pub fn cpu_cores(&self) -> f64 {
        self.cpu_millicores as f64 / 1000.0
    }

    /// Memory in GiB, the unit the bill prices it in.
    pub fn memory_gib(&self) -> f64 {
        self.memory_bytes as f64 / crate::GIB as f64
    }
}

/// Requests (what the scheduler reserves) and limits (what the container may use) of one
/// container; they differ when a workload is allowed to burst into idle node capacity.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ContainerResources {
    pub name: String,
    pub requests: Resources,
    pub limits: Resources,
}

impl ContainerResources {
    /// Requests equal to limits: the Guaranteed QoS class, the simplest safe default.
    pub fn guaranteed(name: impl Into<String>, resources: Resources) -> Self {
        Self { name: name.into(), requests: resources, limits: resources }
    }

    /// Limits `limits` with a CPU request of `cpu_request_ratio` × the CPU limit (whole
    /// millicores, rounded, at least 1) and memory requested in full: the Burstable QoS class
    /// of a cluster whose tenants may burst into CPU their neighbours leave idle. Memory is not
    /// over-committed (it is not compressible: a node short of it evicts or OOM-kills).
    /// A ratio of 1 (or anything outside (0, 1)) is [`Self::guaranteed`].
    pub fn burstable(name: impl Into<String>, limits: Resources, cpu_request_ratio: f64) -> Self {
        let mut out = Self::guaranteed(name, limits);
        if cpu_request_ratio > 0.0 && cpu_request_ratio < 1.0 {
            let cpu = (limits.cpu_millicores as f64 * cpu_request_ratio).round() as u64;
            out.requests.cpu_millicores = cpu.clamp(1.min(limits.cpu_millicores), limits.cpu_millicores);
        }
        out
    }
}

/// A proposed shape for one workload: horizontal (replicas) and vertical (per-container
/// resources) at once.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Recommendation {
    pub replicas: u32,
    pub containers: Vec<ContainerResources>,
}

#[derive(Debug, thiserror::Error)]
pub enum RecommenderError {
    /// The observation cannot be trusted (NaN, missing or stale metrics); callers fall back to a
    /// rule-based recommender rather than act on it.
    #[error("untrustworthy observation: {0}")]
    BadObservation(String),
    #[error("untrustworthy observation: {0}")]
    InvalidObservation(#[from] crate::observation::ObservationError),
    #[error("{0}")]
    Other(String),
}

/// Anything that proposes a shape for a workload from what it observes: HPA, VPA, MPA default,
/// threshold rules, AIMD and RL policies all implement this.
///
/// Recommenders keep whatever history they need (HPA's stabilisation window, VPA's histograms)
/// inside themselves, as the upstream controllers do; `warm_up` replays recorded history into a
/// fresh one so that a dry run answers "what would it do now?".
/// Which parts of an allocation a recommender decides: its proposals echo what runs for the
/// rest (HPA decides replicas only; the MPA default replicas and memory, leaving the CPU limit
/// as deployed). The lifecycle reads it to hand an app back to the rules with what they do not
/// manage as the deployment had it ([`Recommender::scope`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Scope {
    pub replicas: bool,
    pub cpu: bool,
    pub memory: bool,
}

impl Scope {
    /// Replicas, CPU and memory.
    pub const ALL: Scope = Scope { replicas: true, cpu: true, memory: true };
}

pub trait Recommender {
    /// A short stable name used in reports (`hpa`, `mpa`, `rl:ckpt`).
    fn name(&self) -> &str;

    /// What this recommender decides; all of it unless it says otherwise.
    fn scope(&self) -> Scope {
        Scope::ALL
    }

    fn recommend(&mut self, observation: &Observation) -> Result<Recommendation, RecommenderError>;

    /// Forgets what earlier observations taught it, as a controller deployed afresh on a new
    /// cluster. Episode loops call it when a simulator episode begins on a cluster built afresh
    /// (its clock starts again, at 0 or a random time of the week), so a history of
    /// recommendations, scale events or usage samples from the previous episode would describe
    /// a cluster that no longer exists; not when the episode goes on from the cluster the last
    /// one left, where the controller carries on as on a running cluster. Stateless
    /// recommenders need nothing.
    fn restart(&mut self) {}

    /// Feeds past observations (oldest first) so internal state matches a controller that had
    /// been running; the recommendations produced along the way are discarded.
    fn warm_up(&mut self, history: &[Observation]) -> Result<(), RecommenderError> {
        for observation in history {
            self.recommend(observation)?;
        }
        Ok(())
    }
}

/// Always proposes the same shape: the "do nothing clever" baseline every autoscaler has to beat,
/// and the recommender `aware simulate` runs before the rule-based baselines exist.
#[derive(Debug, Clone, PartialEq)]
pub struct FixedRecommender {
    pub name: String,
    pub recommendation: Recommendation,
}

impl Recommender for FixedRecommender {
    fn name(&self) -> &str {
        &self.name
    }

    fn recommend(&mut self, observation: &Observation) -> Result<Recommendation, RecommenderError> {
        observation.validate()?;
        Ok(self.recommendation.clone())
    }
}
