//! A model of a live application fitted from its own metrics, for the bootstrapping check.
//!
//! On the simulator the check replays an app's recent traffic on the app's model
//! ([`crate::shadow`]). A live cluster has no such model, so one is fitted from what the
//! app's observations measured while it ran: per request, the CPU work, the I/O wait, the
//! bytes it moves, and the memory of a pod as a base plus a share per request in flight. The
//! result is a simulator application ([`AppSpec::measured`]) the check replays as it replays a
//! simulated one. Whether to believe a replay on it is not this module's call: the check
//! replays the fallback on the traffic the fallback drove and refuses the model when the
//! replay does not come out as what was observed ([`crate::manager::replay_misses`]).
//!
//! How each figure is read (each interval is one [`Sample`]; a sample is taken only where
//! every ready pod reported usage and the app served requests):
//! - **CPU work per request**: CPU used over requests served, summed over the intervals where
//!   that ratio is the work (no pod above [`crate::shadow::METER_MAX_UTILISATION`] of its limit,
//!   served within 5 % of arrivals, nothing dropped), as the simulator's cost meter reads it.
//! - **I/O wait**: the mean latency less the CPU phase the simulator's queueing model gives
//!   that work at the pod's load and cores ([`aware_sim::queueing::cpu_phase`]), the median over
//!   intervals below [`IO_MAX_UTILISATION`] (where the CPU phase is small and the model's
//!   queueing least in doubt).
//! - **Memory**: each pod's mean working set against its requests in flight (Little's law:
//!   arrivals per pod × mean latency), a least-squares line with both terms at least 0, over the
//!   intervals with no OOM kill and no pod near its memory limit.
//! - **Disk and network bytes per request**: from the I/O and network utilisation the pods
//!   reported, over the simulator's per-pod bandwidths.

use std::collections::VecDeque;

use aware_core::{Bounds, Observation, Profile};
use aware_sim::queueing::cpu_phase;
use aware_sim::{Allocation, AppSpec, POD_DISK_BPS, POD_NET_BPS, REQUEST_SIZE_CV, RequestCost, SyntheticLoad};

use crate::shadow::METER_MAX_UTILISATION;

/// Intervals a fit keeps (the oldest go first): a day of 15-second intervals.
pub const FIT_SAMPLES: usize = 5_760;
/// Intervals where CPU over requests is the work per request that a fit needs.
pub const FIT_MIN_CPU_SAMPLES: usize = 10;
/// Intervals below [`IO_MAX_UTILISATION`] that a fit needs to read the I/O wait.
pub const FIT_MIN_IO_SAMPLES: usize = 5;
/// CPU utilisation (usage over limit, per pod) below which an interval's latency is read for
/// the I/O wait.
pub const IO_MAX_UTILISATION: f64 = 0.5;
/// Cores per pod above which an interval's latency is not read (no node has more).
pub const MAX_POD_CORES: f64 = 1024.0;
/// Share of a pod's memory limit above which its working set may be capped by the limit and
/// is not read for the memory line.
pub const MEMORY_MAX_SHARE: f64 = 0.9;

/// What one interval measured of an application, as the fit reads it.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Sample {
    pub arrival_rps: f64,
    pub throughput_rps: f64,
    pub dropped: u64,
    /// Ready pods (not terminating).
    pub ready: u32,
    /// CPU used by the ready pods, cores.
    pub cpu_cores: f64,
    /// The ready pods' CPU limits, cores, summed.
    pub cpu_limit_cores: f64,
    /// The busiest ready pod's usage over its limit.
    pub max_cpu_share: f64,
    /// Mean latency, seconds.
    pub latency_mean_s: f64,
    /// The ready pods' mean working set, bytes.
    pub memory_bytes: f64,
    /// The highest share of its memory limit any ready pod used.
    pub max_memory_share: f64,
    pub oom: bool,
    pub io_utilisation: f64,
    pub network_utilisation: f64,
    /// Every ready pod had been ready for two intervals and none was terminating.
    pub settled: bool,
}

impl Sample {
    /// The interval `obs` measured, or `None` where it cannot be read: no ready pod, a pod
    /// without a usage sample, no request served, no mean latency, a figure not finite.
    pub fn of(obs: &Observation) -> Option<Sample> {
        let dt = obs.interval_s;
        let mut s = Sample {
            arrival_rps: obs.arrival_rate,
            throughput_rps: obs.throughput,
            dropped: obs.dropped_requests,
            ready: 0,
            cpu_cores: 0.0,
            cpu_limit_cores: 0.0,
            max_cpu_share: 0.0,
            latency_mean_s: obs.latency_mean_ms? / 1000.0,
            memory_bytes: 0.0,
            max_memory_share: 0.0,
            oom: obs.oom_events > 0,
            io_utilisation: obs.io_utilisation,
            network_utilisation: obs.network_utilisation,
            settled: !obs.pods.iter().any(|p| p.deleting),
        };
        for p in crate::guard::serving_pods(obs) {
            let (cpu, memory) = (p.cpu_usage_cores?, p.memory_working_set_bytes?);
            let (limit, memory_limit) = (p.resources.limits.cpu_cores(), p.resources.limits.memory_bytes as f64);
            if !(cpu.is_finite() && cpu >= 0.0 && memory.is_finite() && memory >= 0.0 && limit > 0.0) {
                return None;
            }
            s.ready += 1;
            s.cpu_cores += cpu;
            s.cpu_limit_cores += limit;
            s.max_cpu_share = s.max_cpu_share.max(cpu / limit);
            s.memory_bytes += memory;
            if memory_limit > 0.0 {
                s.max_memory_share = s.max_memory_share.max(memory / memory_limit);
            }
            s.settled &= p.ready_since_s.is_some_and(|t| t <= obs.time_s - 2.0 * dt);
        }
        if s.ready == 0 {
            return None;
        }
        s.memory_bytes /= s.ready as f64;
        let figures = [
            s.arrival_rps,
            s.throughput_rps,
            s.latency_mean_s,
            s.io_utilisation,
            s.network_utilisation,
            s.cpu_cores,
            s.memory_bytes,
        ];
        (figures.iter().all(|v| v.is_finite() && *v >= 0.0) && s.throughput_rps > 0.0 && s.latency_mean_s > 0.0)
            .then_some(s)
    }

    /// Whether CPU used over requests served is the work per request here.
    fn measures_work(&self) -> bool {
        self.settled
            && self.dropped == 0
            && self.arrival_rps > 0.0
            && (self.throughput_rps - self.arrival_rps).abs() <= 0.05 * self.arrival_rps
            && self.max_cpu_share <= METER_MAX_UTILISATION
            && self.cpu_cores > 0.0
    }
}

/// The intervals an application's model is fitted from, newest last.
#[derive(Debug, Clone, Default)]
pub struct MeasuredApp {
    samples: VecDeque<Sample>,
}

/// An application model fitted from its metrics, with how much it rests on.
#[derive(Debug, Clone, PartialEq)]
pub struct Fitted {
    pub app: AppSpec,
    /// Intervals the CPU work, the I/O wait and the memory line were read from.
    pub cpu_samples: usize,
    pub io_samples: usize,
    pub memory_samples: usize,
}

impl MeasuredApp {
    /// Adds what `obs` measured (nothing where it cannot be read, [`Sample::of`]).
    pub fn push(&mut self, obs: &Observation) {
        if let Some(s) = Sample::of(obs) {
            if self.samples.len() == FIT_SAMPLES {
                self.samples.pop_front();
            }
            self.samples.push_back(s);
        }
    }

    /// Intervals kept.
    pub fn len(&self) -> usize {
        self.samples.len()
    }

    pub fn is_empty(&self) -> bool {
        self.samples.is_empty()
    }

    /// The app `name` as measured, under `profile`'s SLO and bounds, deployed as
    /// `deployed` (replicas, CPU and memory limits), or why no model can be fitted yet.
    pub fn fit(&self, name: &str, profile: &Profile, deployed: Allocation) -> Result<Fitted, String> {
        let work: Vec<&Sample> = self.samples.iter().filter(|s| s.measures_work()).collect();
        if work.len() < FIT_MIN_CPU_SAMPLES {
            return Err(format!(
                "no model of the app yet: {} of {} intervals measured where CPU used over requests served is the work per request, {FIT_MIN_CPU_SAMPLES} needed",
                work.len(),
                self.samples.len()
            ));
        }
        let cpu_s = work.iter().map(|s| s.cpu_cores).sum::<f64>() / work.iter().map(|s| s.throughput_rps).sum::<f64>();
        let cv2 = REQUEST_SIZE_CV * REQUEST_SIZE_CV;
        // The I/O wait: latency less the CPU phase at each interval's load and cores.
        let mut io: Vec<f64> = self
            .samples
            .iter()
            .filter(|s| s.settled && s.dropped == 0 && s.max_cpu_share <= IO_MAX_UTILISATION)
            .filter_map(|s| {
                let per_pod = s.throughput_rps / s.ready as f64;
                let cores = s.cpu_limit_cores / s.ready as f64;
                // The CPU phase sums a term per core: a limit no pod can have is not read.
                if !(cores.is_finite() && cores <= MAX_POD_CORES) {
                    return None;
                }
                let phase = cpu_phase(per_pod, cpu_s, cv2, cores)?;
                Some((s.latency_mean_s - phase.mean_sojourn_s).max(0.0))
            })
            .collect();
        if io.len() < FIT_MIN_IO_SAMPLES {
            return Err(format!(
                "no model of the app yet: {} intervals measured its latency with every pod below {:.0} % CPU, {FIT_MIN_IO_SAMPLES} needed",
                io.len(),
                IO_MAX_UTILISATION * 100.0
            ));
        }
        io.sort_by(f64::total_cmp);
        let io_s = io[io.len() / 2];
        // Memory: working set per pod against requests in flight per pod.
        let points: Vec<(f64, f64)> = self
            .samples
            .iter()
            .filter(|s| !s.oom && s.max_memory_share < MEMORY_MAX_SHARE)
            .map(|s| (s.throughput_rps / s.ready as f64 * s.latency_mean_s, s.memory_bytes))
            .collect();
        if points.is_empty() {
            return Err("no model of the app yet: every interval had an OOM kill or a pod near its memory limit".into());
        }
        let (base, per_request) = nonnegative_line(&points);
        let mean = |f: &dyn Fn(&Sample) -> f64| work.iter().map(|s| f(s)).sum::<f64>() / work.len() as f64;
        let per_request_bytes = |utilisation: &dyn Fn(&Sample) -> f64, bps: f64| {
            mean(&|s| utilisation(s) * s.ready as f64 * bps / s.throughput_rps).max(0.0)
        };
        let cost = RequestCost {
            cpu_s,
            io_s,
            mem_base_bytes: base,
            mem_per_request_bytes: per_request,
            disk_bytes: per_request_bytes(&|s| s.io_utilisation, POD_DISK_BPS),
            net_bytes: per_request_bytes(&|s| s.network_utilisation, POD_NET_BPS),
        };
        let terms =
            [cost.cpu_s, cost.io_s, cost.mem_base_bytes, cost.mem_per_request_bytes, cost.disk_bytes, cost.net_bytes];
        if !terms.iter().all(|v| v.is_finite() && *v >= 0.0) {
            return Err(format!(
                "no model of the app: its measured costs do not make a finite request cost ({cost:?})"
            ));
        }
        let arrivals: Vec<f64> = self.samples.iter().map(|s| s.arrival_rps).collect();
        let mean_rps = arrivals.iter().sum::<f64>() / arrivals.len() as f64;
        let load = SyntheticLoad {
            mean_rps,
            diurnal_amplitude: 0.0,
            bursts_per_hour: 0.0,
            burst_peak: 0.0,
            ..SyntheticLoad::default()
        };
        let slo = profile.slo.latency_p99_ms.unwrap_or(f64::INFINITY);
        let bounds: Bounds = profile.bounds.clone();
        let mut app = AppSpec::measured(name, cost, load, slo, deployed, bounds);
        app.peak_rps = arrivals.iter().copied().fold(mean_rps, f64::max);
        Ok(Fitted { app, cpu_samples: work.len(), io_samples: io.len(), memory_samples: points.len() })
    }
}

/// The least-squares line `y = a + b·x` through `points` with `a, b ≥ 0`: where the free fit
/// has a negative slope, the mean (a flat line); a negative intercept, the line through the
/// origin.
fn nonnegative_line(points: &[(f64, f64)]) -> (f64, f64) {
    let n = points.len() as f64;
    let (mx, my) = (points.iter().map(|p| p.0).sum::<f64>() / n, points.iter().map(|p| p.1).sum::<f64>() / n);
    let sxx: f64 = points.iter().map(|p| (p.0 - mx).powi(2)).sum();
    let sxy: f64 = points.iter().map(|p| (p.0 - mx) * (p.1 - my)).sum();
    if sxx <= f64::EPSILON * (1.0 + mx * mx) * n {
        return (my.max(0.0), 0.0);
    }
    let b = sxy / sxx;
    if b <= 0.0 {
        return (my.max(0.0), 0.0);
    }
    let a = my - b * mx;
    if a >= 0.0 {
        return (a, b);
    }
    let sxx0: f64 = points.iter().map(|p| p.0 * p.0).sum();
    let b0 = if sxx0 > 0.0 { points.iter().map(|p| p.0 * p.1).sum::<f64>() / sxx0 } else { 0.0 };
    (0.0, b0.max(0.0))
}

#[cfg(test)]
mod tests {
    use super::*;
    use aware_core::Cluster;
    use aware_sim::{SimCluster, SimConfig};

    #[test]
    fn a_line_is_fitted_with_no_negative_term() {
        let (a, b) = nonnegative_line(&[(1.0, 12.0), (2.0, 14.0), (3.0, 16.0)]);
        assert!((a - 10.0).abs() < 1e-9 && (b - 2.0).abs() < 1e-9, "{a} {b}");
        // Falling: flat at the mean.
        assert_eq!(nonnegative_line(&[(1.0, 3.0), (2.0, 1.0)]), (2.0, 0.0));
        // Through the origin where the intercept would be negative.
        let (a, b) = nonnegative_line(&[(1.0, 1.0), (2.0, 3.0)]);
        assert_eq!(a, 0.0);
        assert!((b - 7.0 / 5.0).abs() < 1e-9);
        // One x: flat.
        assert_eq!(nonnegative_line(&[(1.0, 4.0), (1.0, 6.0)]), (5.0, 0.0));
    }

    /// Fitted from a simulated app's own observations, the model's request cost is the app's:
    /// CPU work within 10 %, I/O wait within 25 % (or a tenth of the whole service time), memory at the load seen within 10 %.
    #[test]
    fn a_simulated_apps_cost_is_recovered_from_its_metrics() {
        for seed in [3_u64, 11, 29] {
            let apps = aware_sim::generate_apps(3, seed, 3_600.0);
            let truth: Vec<RequestCost> = apps.iter().map(AppSpec::cost).collect();
            let mut sim = SimCluster::new(apps.clone(), Vec::new(), SimConfig::default(), seed);
            let mut measured = vec![MeasuredApp::default(); apps.len()];
            for _ in 0..240 {
                for (i, m) in measured.iter_mut().enumerate() {
                    m.push(&sim.observe(i).expect("observation"));
                }
                sim.advance().expect("advance");
            }
            for (i, m) in measured.iter().enumerate() {
                let deployed = apps[i].reference;
                let fitted = m.fit(&apps[i].name, &Profile::default(), deployed).expect("fit");
                let (got, want) = (fitted.app.cost(), truth[i]);
                let what = format!("seed {seed} app {} ({fitted:?})", apps[i].name);
                assert!((got.cpu_s / want.cpu_s - 1.0).abs() < 0.1, "CPU {} against {}: {what}", got.cpu_s, want.cpu_s);
                assert!(
                    (got.io_s - want.io_s).abs() < (0.25 * want.io_s).max(0.1 * (want.cpu_s + want.io_s)),
                    "I/O {} against {}: {what}",
                    got.io_s,
                    want.io_s
                );
                // What a pod holds at the load seen: the line, not its two terms, is what the
                // samples pin down.
                let in_flight = apps[i].mean_rps / deployed.replicas as f64 * (want.cpu_s + want.io_s);
                let memory = |c: &RequestCost| c.mem_base_bytes + c.mem_per_request_bytes * in_flight;
                assert!((memory(&got) / memory(&want) - 1.0).abs() < 0.1, "memory: {what}");
            }
        }
    }

    #[test]
    fn too_little_measured_is_said() {
        let m = MeasuredApp::default();
        let deployed = Allocation { replicas: 1, cpu_millicores: 1000, memory_bytes: 1 << 30 };
        let e = m.fit("a", &Profile::default(), deployed).unwrap_err();
        assert!(e.contains("0 of 0 intervals"), "{e}");
    }
}
