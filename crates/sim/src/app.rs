//! Applications: chains of segments with a synthetic load, generated reproducibly from a seed.

use rand::{RngExt, SeedableRng};
use rand_distr::{Distribution, LogNormal, Pareto};
use rand_pcg::Pcg64Mcg;
use serde::{Deserialize, Serialize};

use crate::load::SyntheticLoad;
use crate::queueing::gamma_p99;
use crate::replica::step_replica;
use crate::segments::{RequestCost, Segment, SegmentKind};

/// A per-replica allocation; the simulator's applications have one container, `app`.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct Allocation {
    pub replicas: u32,
    pub cpu_millicores: u64,
    pub memory_bytes: u64,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct AppSpec {
    pub id: usize,
    pub name: String,
    pub segments: Vec<Segment>,
    pub load: SyntheticLoad,
    /// p99 latency objective, milliseconds (SIMPPO rule unless overridden).
    pub slo_p99_ms: f64,
    /// The allocation the SLO was derived at: one core per replica, replicas for 60 % CPU
    /// utilisation at mean load, memory twice the working set at peak.
    pub reference: Allocation,
}

impl AppSpec {
    pub fn cost(&self) -> RequestCost {
        RequestCost::of_chain(&self.segments, |_| 1.0)
    }
}

/// SplitMix64: derives independent stream seeds from (seed, index, stream) so that app `i`
/// is the same app whatever the number of apps generated alongside it.
pub fn stream_seed(seed: u64, index: u64, stream: u64) -> u64 {
    let mut z = seed ^ index.wrapping_mul(0x9E37_79B9_7F4A_7C15) ^ stream.wrapping_mul(0xD1B5_4A32_D192_ED03);
    for _ in 0..2 {
        z = z.wrapping_add(0x9E37_79B9_7F4A_7C15);
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^= z >> 31;
    }
    z
}

pub const STREAM_APP: u64 = 1;
pub const STREAM_LOAD: u64 = 2;
pub const STREAM_NOISE: u64 = 3;

/// Mean CPU demand above which an application's rate is capped, cores: keeps a heavy-tailed
/// rate on a heavy chain from needing hundreds of cores.
pub const MAX_MEAN_CORES: f64 = 12.0;

/// Reference replica utilisation for the SLO rule.
const REFERENCE_UTILISATION: f64 = 0.6;

/// Generates `n` applications; application `i` depends only on `(seed, i)`.
pub fn generate_apps(n: usize, seed: u64, day_s: f64) -> Vec<AppSpec> {
    (0..n).map(|i| generate_app(i, seed, day_s)).collect()
}

pub fn generate_app(id: usize, seed: u64, day_s: f64) -> AppSpec {
    let mut rng = Pcg64Mcg::seed_from_u64(stream_seed(seed, id as u64, STREAM_APP));
    let len = rng.random_range(1..=3);
    let payload = LogNormal::<f64>::new(0.0, 0.4).expect("valid lognormal");
    let segments: Vec<Segment> = (0..len)
        .map(|_| Segment {
            kind: SegmentKind::ALL[rng.random_range(0..SegmentKind::ALL.len())],
            payload: payload.sample(&mut rng).clamp(0.25, 4.0),
        })
        .collect();
    let cost = RequestCost::of_chain(&segments, |_| 1.0);
    // Heavy-tailed popularity (Pareto, shape 1.2: most apps small, a few large).
    let pareto = Pareto::<f64>::new(1.0, 1.2).expect("valid pareto");
    let mean_rps = pareto.sample(&mut rng).min(200.0).min(MAX_MEAN_CORES / cost.cpu_s);
    let load = SyntheticLoad {
        mean_rps,
        diurnal_amplitude: rng.random_range(0.3..0.8),
        diurnal_phase: rng.random_range(0.0..std::f64::consts::TAU),
        day_s,
        bursts_per_hour: rng.random_range(0.0..2.0),
        burst_peak: rng.random_range(0.5..3.0),
        burst_decay_s: rng.random_range(60.0..600.0),
    };
    let names: Vec<&str> = segments.iter().map(|s| s.kind.name()).collect();
    let (reference, slo_p99_ms) = reference_allocation(&cost, &load);
    AppSpec { id, name: format!("app-{id:04}-{}", names.join("+")), segments, load, slo_p99_ms, reference }
}

/// The SIMPPO rule: the p99 latency at a reference allocation in isolation, plus 15 %.
pub fn reference_allocation(cost: &RequestCost, load: &SyntheticLoad) -> (Allocation, f64) {
    let replicas = ((load.mean_rps * cost.cpu_s / REFERENCE_UTILISATION).ceil() as u32).max(1);
    let per_replica = load.mean_rps / replicas as f64;
    let dt = 15.0;
    let step = step_replica(per_replica * dt, 0.0, dt, cost, 1.0, f64::INFINITY);
    let p99_s = gamma_p99(step.latency_mean_s, step.latency_var_s2);
    // Memory: twice the working set with the peak in-flight count, rounded up to 64 MiB.
    let peak = step_replica(load.peak_rps() / replicas as f64 * dt, 0.0, dt, cost, 1.0, f64::INFINITY);
    let in_flight =
        if peak.overloaded { peak.mean_in_flight } else { peak.mean_in_flight + 3.0 * peak.var_in_flight.sqrt() };
    let ws = cost.mem_base_bytes + cost.mem_per_request_bytes * in_flight;
    let step_bytes = 64.0 * 1024.0 * 1024.0;
    let memory_bytes = ((2.0 * ws / step_bytes).ceil() * step_bytes) as u64;
    (Allocation { replicas, cpu_millicores: 1000, memory_bytes }, p99_s * 1000.0 * 1.15)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn same_seed_same_apps_and_prefix_stable() {
        let a = generate_apps(20, 7, 86_400.0);
        let b = generate_apps(20, 7, 86_400.0);
        assert_eq!(a, b);
        assert_eq!(generate_apps(5, 7, 86_400.0)[..], a[..5], "app i does not depend on n");
        assert_ne!(generate_apps(20, 8, 86_400.0), a);
    }

    #[test]
    fn generated_apps_are_within_documented_ranges() {
        for app in generate_apps(500, 3, 86_400.0) {
            assert!((1..=3).contains(&app.segments.len()));
            assert!(app.load.mean_rps >= 1.0 || app.load.mean_rps * app.cost().cpu_s >= MAX_MEAN_CORES - 1e-9);
            assert!(app.load.mean_rps * app.cost().cpu_s <= MAX_MEAN_CORES + 1e-9);
            assert!(app.slo_p99_ms > 0.0 && app.slo_p99_ms.is_finite());
            assert!(app.reference.memory_bytes as f64 > app.cost().mem_base_bytes);
        }
    }
}
