//! The MultidimPodAutoscaler default recommender, AWARE's fallback controller: HPA on CPU
//! utilisation decides replicas, VPA decides memory (and optionally CPU), in one
//! `Recommendation`, so the two never fight over the same knob.

use aware_core::{Observation, Profile, Recommendation, Recommender, RecommenderError};

use crate::hpa::HorizontalPodAutoscaler;
use crate::vpa::{VerticalPodAutoscaler, VpaSpec};

#[derive(Debug, Clone)]
pub struct MultidimPodAutoscaler {
    pub hpa: HorizontalPodAutoscaler,
    pub vpa: VerticalPodAutoscaler,
}

impl MultidimPodAutoscaler {
    /// HPA on CPU at the profile's target; VPA on memory only, or on memory and CPU.
    pub fn from_profile(profile: &Profile, vertical_cpu: bool) -> Self {
        let mut spec = VpaSpec::from_profile(profile);
        spec.control_cpu = vertical_cpu;
        Self { hpa: HorizontalPodAutoscaler::from_profile(profile), vpa: VerticalPodAutoscaler::new(spec) }
    }
}

impl Recommender for MultidimPodAutoscaler {
    fn name(&self) -> &str {
        "mpa"
    }

    fn recommend(&mut self, obs: &Observation) -> Result<Recommendation, RecommenderError> {
        let horizontal = self.hpa.recommend(obs)?;
        let vertical = self.vpa.recommend(obs)?;
        Ok(Recommendation { replicas: horizontal.replicas, containers: vertical.containers })
    }
}
