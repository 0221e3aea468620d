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
    /// non-finite number, or a ready pod without a usage sample, is refused: a policy never sees
    /// a guess. (A workload with no ready pod is a real state, encoded as zero utilisation.)
    pub fn encode(&self, obs: &Observation, previous_arrival_rps: Option<f64>) -> Result<Vec<f32>, ObservationError> {
        obs.validate()?;
        let counts = obs.replica_counts();
        for pod in obs.pods.iter().filter(|p| p.phase == aware_core::PodPhase::Ready) {
            if pod.cpu_usage_cores.is_none() || pod.memory_working_set_bytes.is_none() {
                return Err(ObservationError::NoUsageSample { app: obs.app.clone(), pod: pod.name.clone() });
            }
        }
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
            obs.cpu_utilisation().unwrap_or(0.0),
            obs.memory_utilisation().unwrap_or(0.0),
            obs.io_utilisation.clamp(0.0, 1.0),
            obs.network_utilisation.clamp(0.0, 1.0),
            sp_latency,
            sp_throughput,
            load_change,
            (counts.ready as f64 / counts.desired.max(1) as f64).min(1.0),
        ];
        Ok(state.iter().map(|&v| v as f32).collect())
    }
}
