//! The one scoring path: what every report (`simulate`, `compare`, experiments) says about a
//! policy, measured the same way whatever acted. Utilisation, SLO violations, drops and
//! core-seconds are the simulator's noise-free truth where the arena has it; the reward is the
//! one the environment paid for the step (the reward agents train on, penalties included).

use aware_env::reverses;
use serde::Serialize;

use crate::LabError;
use crate::rollout::{Arena, Interval, Observer};

/// Per-app (or, aggregated, per-policy) outcome of a run.
#[derive(Debug, Default, Clone, Serialize)]
pub struct Summary {
    pub app: String,
    pub slo_p99_ms: f64,
    /// Mean CPU usage / CPU request over intervals with ready pods.
    pub cpu_utilisation: f64,
    /// Mean memory working set / memory request.
    pub memory_utilisation: f64,
    /// Intervals whose p99 exceeded the SLO, that dropped ≥ 1 % of their requests, or that
    /// served nothing while requests arrived.
    pub slo_violations: u64,
    /// `slo_violations` / intervals.
    pub slo_violation_fraction: f64,
    /// p99 of request latency over all intervals (served-request weighted), milliseconds; null
    /// when nothing was served.
    pub p99_latency_ms: Option<f64>,
    pub dropped_requests: f64,
    pub arrivals: f64,
    pub oom_events: u64,
    /// Σ CPU requests of scheduled pods × time: what the operator pays for.
    pub core_seconds: f64,
    /// Σ memory requests of scheduled pods × time, GiB·s: the rest of the bill.
    pub memory_gib_seconds: f64,
    pub replica_seconds: f64,
    /// Intervals in which the allocation changed (replicas, CPU or memory).
    pub scaling_actions: u64,
    /// Changes that reversed the previous change of the same knob (oscillation).
    pub direction_reversals: u64,
    /// Mean per-interval reward.
    pub mean_reward: f64,
    /// Intervals in which the acting policy refused its observation and a fallback answered or
    /// the allocation was held.
    pub fallbacks: u64,
    /// Intervals scored.
    pub intervals: u64,
    /// Mean over intervals with ready pods of max(0, CPU utilisation target − CPU
    /// utilisation): how far below the operator's target the app ran (0 where the scorer was
    /// given no target).
    pub utilisation_deficit: f64,
}

/// The operator's judgement on two outcomes given as (core-seconds, SLO-violating intervals):
/// `a` beats `b` when it reserved fewer core-seconds with no more violations, or had fewer
/// violations with no more core-seconds ([`Summary::beats`]).
pub fn beats(a: (f64, u64), b: (f64, u64)) -> bool {
    let ((a_cores, a_violations), (b_cores, b_violations)) = (a, b);
    (a_cores < b_cores && a_violations <= b_violations) || (a_violations < b_violations && a_cores <= b_cores)
}

impl Summary {
    /// The operator's judgement: this outcome beats `other` when it reserved fewer core-seconds
    /// with no more SLO-violating intervals, or had fewer violations with no more core-seconds.
    pub fn beats(&self, other: &Summary) -> bool {
        beats((self.core_seconds, self.slo_violations), (other.core_seconds, other.slo_violations))
    }

    /// The operator ranks this outcome above `other` without ambiguity: it [`beats`](Self::beats)
    /// `other` without dropping more requests, reserving more memory or reversing its scaling
    /// more often.
    pub fn clearly_beats(&self, other: &Summary) -> bool {
        self.beats(other)
            && self.dropped_requests <= other.dropped_requests
            && self.memory_gib_seconds <= other.memory_gib_seconds
            && self.direction_reversals <= other.direction_reversals
    }
}

/// Per-interval values across all apps, for plots.
#[derive(Debug, Default, Clone, Serialize)]
pub struct Series {
    /// Mean CPU utilisation over apps with ready pods.
    pub cpu_utilisation: Vec<f64>,
    /// Apps violating their SLO in the interval.
    pub slo_violations: Vec<u64>,
    /// CPU cores reserved (Σ requests of scheduled pods).
    pub reserved_cores: Vec<f64>,
}

/// Latencies on log-spaced buckets (1 µs to 10⁷ ms, 0.5 % wide): a bounded-memory, weighted
/// quantile over any number of app-intervals.
#[derive(Debug, Clone)]
pub struct LatencyHistogram {
    weights: Vec<f64>,
    total: f64,
}

const BUCKET_RATIO: f64 = 1.005;
const MIN_LATENCY_MS: f64 = 1e-3;
const BUCKETS: usize = 4_700; // 1.005^4700 ≈ 1.5e10: 1 µs … 15,000 s

impl Default for LatencyHistogram {
    fn default() -> Self {
        Self { weights: vec![0.0; BUCKETS], total: 0.0 }
    }
}

impl LatencyHistogram {
    pub fn add(&mut self, latency_ms: f64, weight: f64) {
        if !(latency_ms.is_finite() && weight.is_finite() && weight > 0.0) {
            return;
        }
        let b = ((latency_ms.max(MIN_LATENCY_MS) / MIN_LATENCY_MS).ln() / BUCKET_RATIO.ln()) as usize;
        self.weights[b.min(BUCKETS - 1)] += weight;
        self.total += weight;
    }

    pub fn merge(&mut self, other: &LatencyHistogram) {
        for (a, b) in self.weights.iter_mut().zip(&other.weights) {
            *a += b;
        }
        self.total += other.total;
    }

    /// The `q` quantile (upper edge of its bucket), `None` when empty.
    pub fn quantile(&self, q: f64) -> Option<f64> {
        if self.total <= 0.0 {
            return None;
        }
        let target = q.clamp(0.0, 1.0) * self.total;
        let mut seen = 0.0;
        for (b, w) in self.weights.iter().enumerate() {
            seen += w;
            if seen >= target && *w > 0.0 {
                return Some(MIN_LATENCY_MS * BUCKET_RATIO.powi(b as i32 + 1));
            }
        }
        let last = self.weights.iter().rposition(|w| *w > 0.0)?;
        Some(MIN_LATENCY_MS * BUCKET_RATIO.powi(last as i32 + 1))
    }
}

/// Scores every interval of a rollout, per application.
pub struct Scorer {
    pub per_app: Vec<Summary>,
    pub series: Series,
    latencies: Vec<LatencyHistogram>,
    cpu_n: Vec<u64>,
    mem_n: Vec<u64>,
    last_direction: Vec<[i8; 3]>,
    /// Each app's CPU utilisation target, for `utilisation_deficit`.
    cpu_targets: Vec<Option<f64>>,
}

impl Scorer {
    /// A scorer for the arena's applications, named `names`.
    pub fn new(arena: &dyn Arena, names: &[String]) -> Self {
        let n = arena.num_apps();
        let per_app = (0..n)
            .map(|i| Summary {
                app: names.get(i).cloned().unwrap_or_else(|| format!("app-{i}")),
                slo_p99_ms: arena.slo_p99_ms(i).unwrap_or(f64::NAN),
                ..Default::default()
            })
            .collect();
        Self {
            per_app,
            series: Series::default(),
            latencies: vec![LatencyHistogram::default(); n],
            cpu_n: vec![0; n],
            mem_n: vec![0; n],
            last_direction: vec![[0; 3]; n],
            cpu_targets: vec![None; n],
        }
    }

    /// Measures `utilisation_deficit` against each app's CPU utilisation target.
    pub fn with_cpu_targets(mut self, targets: &[f64]) -> Self {
        for (slot, &t) in self.cpu_targets.iter_mut().zip(targets) {
            *slot = Some(t);
        }
        self
    }

    /// The per-app summaries with means taken; `fallbacks[i]` added to app i's.
    pub fn finish(mut self, fallbacks: &[u64]) -> (Vec<Summary>, Series) {
        for (i, s) in self.per_app.iter_mut().enumerate() {
            s.cpu_utilisation /= self.cpu_n[i].max(1) as f64;
            s.memory_utilisation /= self.mem_n[i].max(1) as f64;
            s.utilisation_deficit /= self.cpu_n[i].max(1) as f64;
            s.mean_reward /= s.intervals.max(1) as f64;
            s.slo_violation_fraction = s.slo_violations as f64 / s.intervals.max(1) as f64;
            s.p99_latency_ms = self.latencies[i].quantile(0.99);
            s.fallbacks += fallbacks.get(i).copied().unwrap_or(0);
        }
        (self.per_app, self.series)
    }

    /// Latency histograms per application (for aggregating a p99 over apps).
    pub fn latencies(&self) -> &[LatencyHistogram] {
        &self.latencies
    }

    /// Every application's latencies in one histogram (the aggregate row's p99).
    pub fn merged_latencies(&self) -> LatencyHistogram {
        let mut all = LatencyHistogram::default();
        for h in &self.latencies {
            all.merge(h);
        }
        all
    }
}

impl Observer for Scorer {
    fn record(&mut self, arena: &dyn Arena, interval: &Interval) -> Result<(), LabError> {
        let out = interval.out;
        let dt = arena.interval_s();
        let (mut util_sum, mut util_n, mut violations, mut cores) = (0.0, 0usize, 0u64, 0.0);
        for (i, (s, step)) in self.per_app.iter_mut().zip(&out.steps).enumerate() {
            let info = &step.info;
            s.intervals += 1;
            s.mean_reward += step.reward;
            // The change this interval made, from the allocation before to the one after.
            if let Some(before) = interval.infos.get(i) {
                let sign = |a: u64, b: u64| (a.cmp(&b) as i8).signum();
                let dir = [
                    sign(info.cpu_limit_millicores, before.cpu_limit_millicores),
                    sign(info.memory_limit_bytes, before.memory_limit_bytes),
                    sign(info.replicas as u64, before.replicas as u64),
                ];
                if dir != [0; 3] {
                    s.scaling_actions += 1;
                    s.direction_reversals += reverses(self.last_direction[i], dir) as u64;
                    for (k, d) in dir.iter().enumerate() {
                        if *d != 0 {
                            self.last_direction[i][k] = *d;
                        }
                    }
                }
            }
            match interval.truth.get(i).copied().flatten() {
                Some(t) => {
                    if let Some(u) = t.cpu_utilisation {
                        s.cpu_utilisation += u;
                        s.utilisation_deficit += self.cpu_targets[i].map_or(0.0, |target| (target - u).max(0.0));
                        self.cpu_n[i] += 1;
                        util_sum += u;
                        util_n += 1;
                    }
                    if let Some(u) = t.memory_utilisation {
                        s.memory_utilisation += u;
                        self.mem_n[i] += 1;
                    }
                    s.slo_violations += t.slo_violated as u64;
                    violations += t.slo_violated as u64;
                    s.dropped_requests += t.dropped;
                    s.arrivals += t.arrivals;
                    s.oom_events += t.oom_events as u64;
                    s.core_seconds += t.core_seconds;
                    s.memory_gib_seconds += t.memory_gib_seconds;
                    cores += t.core_seconds / dt;
                    s.replica_seconds += t.replica_seconds;
                    if let Some(p99) = t.latency_p99_ms {
                        self.latencies[i].add(p99, t.served.max(1e-9));
                    }
                }
                None => {
                    s.cpu_utilisation += info.cpu_utilisation;
                    s.utilisation_deficit +=
                        self.cpu_targets[i].map_or(0.0, |target| (target - info.cpu_utilisation).max(0.0));
                    self.cpu_n[i] += 1;
                    util_sum += info.cpu_utilisation;
                    util_n += 1;
                    s.memory_utilisation += info.memory_utilisation;
                    self.mem_n[i] += 1;
                    s.slo_violations += info.slo_violated as u64;
                    violations += info.slo_violated as u64;
                    s.dropped_requests += info.dropped_requests as f64;
                    s.oom_events += info.oom_events as u64;
                    let reserved = info.replicas as f64 * info.cpu_limit_millicores as f64 / 1000.0;
                    s.core_seconds += reserved * dt;
                    s.memory_gib_seconds +=
                        info.replicas as f64 * info.memory_limit_bytes as f64 / aware_core::GIB as f64 * dt;
                    cores += reserved;
                    s.replica_seconds += info.replicas as f64 * dt;
                }
            }
        }
        self.series.cpu_utilisation.push(if util_n > 0 { util_sum / util_n as f64 } else { 0.0 });
        self.series.slo_violations.push(violations);
        self.series.reserved_cores.push(cores);
        Ok(())
    }
}
