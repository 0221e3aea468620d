//! Threshold step scaling, the AWS Auto Scaling step policy on average CPU utilisation:
//! +2 replicas at ≥ 90 %, +1 at ≥ 70 %, hold in [50 %, 70 %), −1 below 50 %, −2 below 30 %,
//! within the profile's replica bounds.

use aware_core::{Observation, Profile, Recommendation, Recommender, RecommenderError, Scope};

#[derive(Debug, Clone, PartialEq)]
pub struct ThresholdStepScaling {
    pub min_replicas: u32,
    pub max_replicas: u32,
    /// (lower bound of CPU utilisation, replica change), checked from the top.
    pub steps: Vec<(f64, i64)>,
}

impl ThresholdStepScaling {
    pub fn from_profile(profile: &Profile) -> Self {
        Self {
            min_replicas: profile.bounds.min_replicas,
            max_replicas: profile.bounds.max_replicas,
            steps: Self::default_steps(),
        }
    }

    /// +2 at ≥ 90 % CPU, +1 at ≥ 70 %, hold at ≥ 50 %, −1 at ≥ 30 %, −2 below: CloudWatch
    /// step scaling as the provisioning paper's baseline configures it.
    pub fn default_steps() -> Vec<(f64, i64)> {
        vec![(0.9, 2), (0.7, 1), (0.5, 0), (0.3, -1), (f64::NEG_INFINITY, -2)]
    }

    /// The change for a utilisation in [0, 1].
    pub fn step(&self, utilisation: f64) -> i64 {
        self.steps.iter().find(|(lower, _)| utilisation >= *lower).map_or(0, |s| s.1)
    }
}

impl Recommender for ThresholdStepScaling {
    fn name(&self) -> &str {
        "threshold"
    }

    /// Replicas only: the pod template passes unchanged.
    fn scope(&self) -> Scope {
        Scope { replicas: true, cpu: false, memory: false }
    }

    /// CPU utilisation is usage over request averaged over ready pods (CloudWatch's
    /// CPUUtilization of the group); with no ready pod there is nothing to measure and the
    /// count is held.
    fn recommend(&mut self, obs: &Observation) -> Result<Recommendation, RecommenderError> {
        obs.validate()?;
        let current = obs.desired_replicas as i64;
        let change = obs.cpu_utilisation().map_or(0, |u| self.step(u));
        let replicas = (current + change).clamp(self.min_replicas as i64, self.max_replicas as i64) as u32;
        Ok(Recommendation { replicas, containers: vec![obs.template.clone()] })
    }
}
