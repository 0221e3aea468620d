//! The decision seam of the recommender controller: for one MPA and its latest observation,
//! propose a shape. The AWARE lifecycle manager (fallback or RL) will implement [`Decider`];
//! until it exists, [`MpaDefaultDecider`] runs `aware-baselines`' MultidimPodAutoscaler default
//! (HPA on CPU for replicas, VPA for resources), one instance per MPA so each keeps its own
//! stabilisation window and histograms, as upstream's controllers keep per-object state.

use std::collections::HashMap;
use std::sync::Mutex;

use aware_baselines::MultidimPodAutoscaler as MpaDefault;
use aware_core::{Observation, Profile, Recommendation, Recommender, RecommenderError};

/// Proposes a recommendation for the MPA identified by `key` (`namespace/name`).
pub trait Decider: Send + Sync + 'static {
    /// A short name for status messages and logs (`mpa`, `aware`).
    fn name(&self) -> &str;

    fn decide(
        &self,
        key: &str,
        profile: &Profile,
        observation: &Observation,
    ) -> Result<Recommendation, RecommenderError>;

    /// Forgets the state kept for an MPA that was deleted.
    fn forget(&self, _key: &str) {}
}

/// `aware-baselines`' MPA default behind the [`Decider`] seam.
#[derive(Debug, Default)]
pub struct MpaDefaultDecider {
    /// Whether the VPA half also controls CPU (otherwise memory only, CPU left to the HPA).
    pub vertical_cpu: bool,
    state: Mutex<HashMap<String, (Profile, MpaDefault)>>,
}

impl MpaDefaultDecider {
    pub fn new(vertical_cpu: bool) -> Self {
        Self { vertical_cpu, state: Mutex::default() }
    }
}

impl Decider for MpaDefaultDecider {
    fn name(&self) -> &str {
        "mpa"
    }

    fn decide(
        &self,
        key: &str,
        profile: &Profile,
        observation: &Observation,
    ) -> Result<Recommendation, RecommenderError> {
        let mut state = self.state.lock().map_err(|_| RecommenderError::Other("decider state poisoned".into()))?;
        let entry = state
            .entry(key.to_string())
            .or_insert_with(|| (profile.clone(), MpaDefault::from_profile(profile, self.vertical_cpu)));
        // A changed profile (annotation or constraints edited) restarts the recommender from it.
        if entry.0 != *profile {
            *entry = (profile.clone(), MpaDefault::from_profile(profile, self.vertical_cpu));
        }
        entry.1.recommend(observation)
    }

    fn forget(&self, key: &str) {
        if let Ok(mut state) = self.state.lock() {
            state.remove(key);
        }
    }
}
