//! The MultidimPodAutoscaler default recommender, AWARE's fallback controller: HPA on CPU
//! utilisation decides replicas, VPA decides memory (and optionally CPU), in one
//! `Recommendation`, so the two never fight over the same knob.
//!
//! Checked against upstream's MPA (kubernetes/autoscaler `multidimensional-pod-autoscaler`,
//! AEP): upstream's default recommender reuses the VPA libraries for vertical actions on CPU
//! *and* memory and the HPA algorithm (CPU utilisation or a custom metric) for replicas, and
//! alternates the two in its feedback cycle, vertical first; its updater evicts under the VPA
//! updater's rules (`--min-replicas`, eviction tolerance). Here the vertical side is the same
//! VPA (decaying histograms, confidence bounds, the same updater rules, so a single-replica
//! workload is not resized unless `vpa.spec.min_replicas` is lowered), but (1) both actions are
//! proposed in the same interval rather than alternately, and (2) by default it sets memory
//! only, leaving CPU to the HPA as AWARE's MPA-default does; `vertical_cpu = true` gives
//! upstream's CPU-and-memory vertical scope.

use aware_core::{Observation, Profile, Recommendation, Recommender, RecommenderError, Scope};

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

    /// Replicas (its HPA) and what its VPA controls: memory, and CPU with `vertical_cpu`.
    fn scope(&self) -> Scope {
        let v = self.vpa.scope();
        Scope { replicas: true, cpu: v.cpu, memory: v.memory }
    }

    fn recommend(&mut self, obs: &Observation) -> Result<Recommendation, RecommenderError> {
        let horizontal = self.hpa.recommend(obs)?;
        let vertical = self.vpa.recommend(obs)?;
        Ok(Recommendation { replicas: horizontal.replicas, containers: vertical.containers })
    }

    fn restart(&mut self) {
        self.hpa.restart();
        self.vpa.restart();
    }
}
