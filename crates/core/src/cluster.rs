//! The backend seam: the embedded simulator and Kubernetes both implement `Cluster`, and
//! nothing above it may know which one it is talking to.

use crate::observation::Observation;
use crate::recommendation::{ContainerResources, Recommendation};

/// Index of an application within one backend; stable for the backend's lifetime.
pub type AppId = usize;

#[derive(Debug, thiserror::Error)]
pub enum ClusterError {
    #[error("unknown application {0}")]
    UnknownApp(AppId),
    #[error("invalid recommendation for {app}: {reason}")]
    InvalidRecommendation { app: String, reason: String },
    #[error("backend unavailable: {0}")]
    Unavailable(String),
}

pub trait Cluster {
    /// Names of the applications this backend manages, indexed by `AppId`.
    fn app_names(&self) -> Vec<String>;

    /// Length of one control interval in seconds (15 s, the HPA sync period, by default).
    fn interval_s(&self) -> f64;

    /// The latest measurements for one application.
    fn observe(&self, app: AppId) -> Result<Observation, ClusterError>;

    /// What the application is scaled to now: its desired replicas and the resources its new
    /// pods get (the Deployment's template), the part of [`Cluster::observe`] an action is
    /// decoded against. Backends that can answer without building a whole observation (the
    /// simulator) override it.
    fn target(&self, app: AppId) -> Result<(u32, ContainerResources), ClusterError> {
        let obs = self.observe(app)?;
        Ok((obs.desired_replicas, obs.template))
    }

    /// Hands a recommendation to the backend's actuator; it takes effect over the next
    /// interval(s) with the backend's own delays (pod start-up, rolling restarts).
    fn apply(&mut self, app: AppId, recommendation: &Recommendation) -> Result<(), ClusterError>;

    /// Moves time forward by one interval: the simulator simulates it, a live backend waits for it.
    fn advance(&mut self) -> Result<(), ClusterError>;

    /// Starts a fresh episode. The simulator rebuilds its state from `seed`; a live backend cannot
    /// rewind the world and simply carries on, which is why the default does nothing.
    fn reset(&mut self, _seed: Option<u64>) -> Result<(), ClusterError> {
        Ok(())
    }
}
