//! AWARE Table 1 state: resource limits, utilisation (CPU, memory, I/O, network), SLO
//! preservation (latency, throughput) and the observed load change, each normalised.

use aware_core::Bounds;
use aware_core::Space;
use aware_core::{Observation, ObservationError};

use crate::reward::slo_preservation;

/// Feature order: CPU limit, memory limit, replicas (each scaled into [0, 1] across the profile
/// bounds), CPU, memory, I/O and network utilisation, latency and throughput SLO preservation,
/// load change (tanh of the relative change, in (−1, 1)), and the fraction of desired replicas
/// that are ready.
pub const STATE_DIM: usize = 11;

/// The name of each state feature, in order (for explanations and logs).
pub const STATE_FEATURES: [&str; STATE_DIM] = [
    "cpu_limit",
    "memory_limit",
    "replicas",
    "cpu_utilisation",
    "memory_utilisation",
    "io_utilisation",
    "network_utilisation",
    "latency_slo_preservation",
    "throughput_slo_preservation",
    "load_change",
    "ready_fraction",
];

/// Where a state's CPU and memory utilisation features came from
/// ([`StateEncoder::encode_carrying`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum UsageSource {
    /// The ready pods' usage samples.
    Measured,
    /// The last state that measured them: the samples of this interval cannot be trusted.
    Carried,
    /// No pod is ready: zero utilisation, a real state.
    NoReadyPod,
}

#[derive(Debug, Clone, PartialEq)]
pub struct StateEncoder {
    pub bounds: Bounds,
    pub latency_slo_ms: Option<f64>,
    pub throughput_slo_rps: Option<f64>,
}

fn scale(v: f64, lo: f64, hi: f64) -> f64 {
    if hi > lo { ((v - lo) / (hi - lo)).clamp(0.0, 1.0) } else { 0.0 }
}

impl StateEncoder {
    pub fn space() -> Space {
        let mut low = vec![0.0; STATE_DIM];
        low[9] = -1.0;
        Space::Box { low, high: vec![1.0; STATE_DIM] }
    }

    /// Encodes an observation, given the arrival rate of the previous one. An observation with a
    /// non-finite number is refused, and so is one whose usage samples cannot be trusted
    /// ([`Observation::sampled_utilisation`]): a policy never sees a guess. Utilisation is the
    /// mean over the ready pods that have a sample: a pod ready for at most
    /// [`aware_core::USAGE_SAMPLE_GRACE_S`] without one (it became ready after the newest
    /// visible scrape: the metrics pipeline lags the pod list) is set aside until its first
    /// sample arrives, as the HPA does, not counted as idle. (A workload with no ready pod is a
    /// real state, encoded as zero utilisation.)
    pub fn encode(&self, obs: &Observation, previous_arrival_rps: Option<f64>) -> Result<Vec<f32>, ObservationError> {
        self.encode_carrying(obs, previous_arrival_rps, None).map(|(state, _)| state)
    }

    /// [`encode`](Self::encode), except that where the usage samples cannot be trusted (above;
    /// typically every serving pod started after the newest visible scrape, under a metrics
    /// pipeline that lags more than pods take to start) the CPU and memory utilisation
    /// features are `carried` (those of the last state that measured them) instead of the
    /// observation being refused. The second value says where the utilisation came from. The simulator's
    /// environment uses this so that a rollout survives such an interval, and flags it
    /// ([`aware_core::StepInfo::usage_carried`]); what serves an app (the lifecycle's guard, a
    /// recommender) reads the observation itself, refuses it, and the fallback acts.
    pub fn encode_carrying(
        &self,
        obs: &Observation,
        previous_arrival_rps: Option<f64>,
        carried: Option<[f32; 2]>,
    ) -> Result<(Vec<f32>, UsageSource), ObservationError> {
        obs.validate()?;
        let counts = obs.replica_counts();
        let (usage, source) = match (obs.sampled_utilisation(), carried) {
            (Ok(Some((cpu, memory))), _) => ([cpu, memory], UsageSource::Measured),
            (Ok(None), _) => ([0.0, 0.0], UsageSource::NoReadyPod),
            (
                Err(ObservationError::NoUsageSample { .. } | ObservationError::NoUsageSampleYet { .. }),
                Some([cpu, memory]),
            ) => ([cpu as f64, memory as f64], UsageSource::Carried),
            (Err(e), _) => return Err(e),
        };
        let b = &self.bounds;
        let lim = obs.template.limits;
        let sp_latency =
            slo_preservation(self.latency_slo_ms, None, obs.latency_p99_ms, obs.throughput, obs.arrival_rate);
        let sp_throughput = slo_preservation(None, self.throughput_slo_rps, None, obs.throughput, obs.arrival_rate);
        let load_change = match previous_arrival_rps {
            Some(prev) => ((obs.arrival_rate - prev) / prev.max(1e-3)).tanh(),
            None => 0.0,
        };
        let state = [
            scale(lim.cpu_millicores as f64, b.min_cpu_millicores as f64, b.max_cpu_millicores as f64),
            scale(lim.memory_bytes as f64, b.min_memory_bytes() as f64, b.max_memory_bytes() as f64),
            scale(obs.desired_replicas as f64, b.min_replicas as f64, b.max_replicas as f64),
            usage[0],
            usage[1],
            obs.io_utilisation.clamp(0.0, 1.0),
            obs.network_utilisation.clamp(0.0, 1.0),
            sp_latency,
            sp_throughput,
            load_change,
            (counts.ready as f64 / counts.desired.max(1) as f64).min(1.0),
        ];
        Ok((state.iter().map(|&v| v as f32).collect(), source))
    }
}
