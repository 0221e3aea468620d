//! The cloud-provisioning environment of the DQN-family provisioning work: an auto-scaling
//! group of one instance type, decided every 5 minutes from CloudWatch-style metrics.
//!
//! - Fleet: 1–10 instances. An action adds or removes −2…+2 instances (clipped to the range);
//!   a launched instance serves after `boot_s`; scale-in removes the instance closest to its
//!   next billing hour (the AWS default termination policy's billing rule).
//! - Cost: a started instance-hour is charged up front, at launch and at each hour since.
//! - Reward: −(cost + penalty), the penalty 3×, 5× or 10× the hourly price when the group's
//!   CPU utilisation over the step is in 70–79 %, 80–89 % or ≥ 90 %.
//! - Load: 5-minute request-count bins scaled ×20, with Gaussian noise of spread √count.
//! - Observation: instance count, CPUUtilization, NetworkPacketsIn, Latency, RequestCount of
//!   the step just ended, each scaled into [0, 1] (see [`ProvisioningEnv::observation`]).

use aware_core::{Action, Env, EnvError, Space, Step, StepInfo};
use rand::{RngExt, SeedableRng};
use rand_distr::{Distribution, Normal};
use rand_pcg::Pcg64Mcg;
use serde::{Deserialize, Serialize};

use crate::load::{LoadSource, LoadState, SyntheticLoad, Trace};

pub const STEP_S: f64 = 300.0;
/// −2, −1, 0, +1, +2 instances.
pub const ACTIONS: usize = 5;
/// CloudWatch metrics per observation.
pub const FEATURES: usize = 5;

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ProvisioningConfig {
    pub min_instances: u32,
    pub max_instances: u32,
    /// On-demand price of one instance-hour (dollars).
    pub price_per_hour: f64,
    /// Requests per second one instance serves at 100 % CPU.
    pub instance_capacity_rps: f64,
    /// Seconds from launch until an instance serves.
    pub boot_s: f64,
    /// Mean service time of one request on an idle instance, ms.
    pub service_ms: f64,
    pub packets_per_request: f64,
    /// Multiplier applied to the trace's counts (the paper's ×20).
    pub load_scale: f64,
    /// (CPU utilisation lower bound in %, penalty in instance-hour prices), checked from the top.
    pub penalty_tiers: Vec<(f64, f64)>,
    /// Steps per episode; an episode starts at a seed-chosen bin when the series is longer.
    pub episode_steps: usize,
}

impl ProvisioningConfig {
    /// Defaults with the instance capacity sized so that the series' 99th-percentile load
    /// needs 8 instances at 60 % CPU: the range 1–10 then covers the load with headroom.
    pub fn sized_for(bins: &[f64]) -> Self {
        let base = Self::default();
        let mut rps: Vec<f64> = bins.iter().map(|c| c * base.load_scale / STEP_S).collect();
        rps.sort_by(f64::total_cmp);
        let p99 = rps.get(((rps.len() as f64 * 0.99) as usize).min(rps.len().saturating_sub(1))).copied();
        Self { instance_capacity_rps: (p99.unwrap_or(1.0) / (8.0 * 0.6)).max(1e-3), ..base }
    }
}

impl Default for ProvisioningConfig {
    fn default() -> Self {
        Self {
            min_instances: 1,
            max_instances: 10,
            price_per_hour: 0.10,
            instance_capacity_rps: 25.0,
            boot_s: 120.0,
            service_ms: 50.0,
            packets_per_request: 12.0,
            load_scale: 20.0,
            penalty_tiers: vec![(90.0, 10.0), (80.0, 5.0), (70.0, 3.0)],
            episode_steps: 288,
        }
    }
}

/// What CloudWatch would report for one step, plus its bill.
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize)]
pub struct ProvisioningStats {
    pub instances: u32,
    pub cpu_utilisation_pct: f64,
    pub network_packets_in: f64,
    pub latency_ms: f64,
    pub request_count: f64,
    /// Requests beyond the group's capacity in the step.
    pub dropped: f64,
    pub cost: f64,
    pub penalty: f64,
}

/// 5-minute request counts from a replayed rate series (integrated minute by minute).
pub fn bins_from_trace(trace: &Trace) -> Vec<f64> {
    let span = trace.interval_s * trace.rates.len() as f64;
    let bins = (span / STEP_S).ceil().max(1.0) as usize;
    (0..bins).map(|b| (0..5).map(|m| trace.rate_at(b as f64 * STEP_S + m as f64 * 60.0) * 60.0).sum()).collect()
}

/// The largest `mean_count` [`synthetic_bins`] takes: a replayed trace's ceiling
/// ([`crate::MAX_TRACE_RATE_PER_S`]) in requests per five-minute bin.
pub const MAX_MEAN_COUNT: f64 = crate::MAX_TRACE_RATE_PER_S * STEP_S;

/// Checks a synthetic series' mean count per bin: positive and at most [`MAX_MEAN_COUNT`]; the
/// reason when not.
pub fn check_mean_count(mean_count: f64) -> Result<(), String> {
    match mean_count.is_finite() && mean_count > 0.0 && mean_count <= MAX_MEAN_COUNT {
        true => Ok(()),
        false => Err(format!(
            "{mean_count} requests per five-minute bin: give a positive count of at most {MAX_MEAN_COUNT:e} (1e9 requests/s)"
        )),
    }
}

/// `days` of synthetic 5-minute counts around `mean_count` per bin: a daily cycle with
/// bursts and Poisson noise, from the simulator's load model.
pub fn synthetic_bins(days: usize, mean_count: f64, seed: u64) -> Vec<f64> {
    let mut rng = Pcg64Mcg::seed_from_u64(seed);
    let load = SyntheticLoad {
        mean_rps: mean_count / STEP_S,
        diurnal_amplitude: 0.6,
        diurnal_phase: rng.random_range(0.0..std::f64::consts::TAU),
        day_s: 86_400.0,
        bursts_per_hour: 0.1,
        burst_peak: 0.8,
        burst_decay_s: 1_800.0,
        ..SyntheticLoad::default()
    };
    let mut state = LoadState::new(LoadSource::Synthetic(load), rng);
    (0..days * 288).map(|i| state.arrivals(i as f64 * STEP_S, STEP_S)).collect()
}

/// One running instance, times in seconds since the episode began.
#[derive(Debug, Clone, Copy, PartialEq)]
struct Instance {
    launched_s: f64,
    serving_s: f64,
}

/// Why a provisioning environment cannot be built.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[non_exhaustive]
pub enum ProvisioningError {
    #[error("the load series is empty")]
    EmptyLoad,
    #[error("bin {bin} holds {value}, not a request count")]
    BadBin { bin: usize, value: f64 },
    #[error("instances {min}..{max} is not a range of at least one")]
    InstanceRange { min: u32, max: u32 },
    #[error("capacity and episode length must be positive, the price non-negative")]
    Config,
}

#[derive(Debug, Clone)]
pub struct ProvisioningEnv {
    bins: Vec<f64>,
    pub config: ProvisioningConfig,
    rng: Pcg64Mcg,
    start: usize,
    t: usize,
    fleet: Vec<Instance>,
    last: ProvisioningStats,
    needs_reset: bool,
}

impl ProvisioningEnv {
    /// An environment replaying `bins` (5-minute request counts before the ×20 scaling).
    pub fn new(bins: Vec<f64>, config: ProvisioningConfig) -> Result<Self, ProvisioningError> {
        if bins.is_empty() {
            return Err(ProvisioningError::EmptyLoad);
        }
        if let Some(bin) = bins.iter().position(|c| !c.is_finite() || *c < 0.0) {
            return Err(ProvisioningError::BadBin { bin, value: bins[bin] });
        }
        let c = &config;
        if c.min_instances == 0 || c.min_instances > c.max_instances {
            return Err(ProvisioningError::InstanceRange { min: c.min_instances, max: c.max_instances });
        }
        if !(c.instance_capacity_rps > 0.0 && c.price_per_hour >= 0.0 && c.episode_steps > 0) {
            return Err(ProvisioningError::Config);
        }
        Ok(Self {
            bins,
            config,
            rng: Pcg64Mcg::seed_from_u64(0),
            start: 0,
            t: 0,
            fleet: Vec::new(),
            last: ProvisioningStats::default(),
            needs_reset: true,
        })
    }

    pub fn episode_steps(&self) -> usize {
        self.config.episode_steps.min(self.bins.len())
    }

    /// The last step's metrics and bill.
    pub fn stats(&self) -> ProvisioningStats {
        self.last
    }

    /// Instance count, CPU, packets, latency and requests of the last step, each in [0, 1]:
    /// count / max, CPU / 100, packets and requests against the most the largest fleet serves
    /// in a step, latency against 20 × the idle service time.
    pub fn observation(&self) -> Vec<f32> {
        let c = &self.config;
        let most = c.instance_capacity_rps * c.max_instances as f64 * STEP_S;
        let s = &self.last;
        [
            s.instances as f64 / c.max_instances as f64,
            s.cpu_utilisation_pct / 100.0,
            s.network_packets_in / (most * c.packets_per_request),
            s.latency_ms / (20.0 * c.service_ms),
            s.request_count / most,
        ]
        .iter()
        .map(|v| v.clamp(0.0, 1.0) as f32)
        .collect()
    }

    /// Requests arriving in the step: the bin ×20 plus N(0, √count) noise.
    fn requests(&mut self, bin: usize) -> f64 {
        let count = self.bins[bin % self.bins.len()] * self.config.load_scale;
        let noise = Normal::new(0.0, count.sqrt().max(f64::MIN_POSITIVE)).expect("finite spread");
        (count + noise.sample(&mut self.rng)).max(0.0)
    }

    /// Serves `requests` over the step beginning at `start_s` with the current fleet.
    fn serve(&self, requests: f64, start_s: f64) -> ProvisioningStats {
        let c = &self.config;
        // Instance-seconds of service in the step: a booting instance serves its remainder.
        let serving: f64 = self
            .fleet
            .iter()
            .map(|i| ((start_s + STEP_S) - i.serving_s.max(start_s)).clamp(0.0, STEP_S) / STEP_S)
            .sum();
        let capacity = serving * c.instance_capacity_rps * STEP_S;
        let rho = if capacity > 0.0 {
            requests / capacity
        } else if requests > 0.0 {
            f64::INFINITY
        } else {
            0.0
        };
        let latency_ms = if rho < 1.0 { c.service_ms / (1.0 - rho.min(0.99)) } else { c.service_ms * 100.0 };
        ProvisioningStats {
            instances: self.fleet.len() as u32,
            cpu_utilisation_pct: (rho * 100.0).min(100.0),
            network_packets_in: requests * c.packets_per_request,
            latency_ms,
            request_count: requests,
            dropped: (requests - capacity).max(0.0),
            cost: 0.0,
            penalty: 0.0,
        }
    }

    /// Instance-hours started in [from, to): at launch and at every hour after it.
    fn charges(&self, from: f64, to: f64) -> u32 {
        self.fleet
            .iter()
            .map(|i| {
                let l = i.launched_s;
                let first = ((from - l) / 3600.0).ceil().max(0.0) as u64;
                let last = ((to - l) / 3600.0).ceil().max(0.0) as u64;
                (last - first) as u32
            })
            .sum()
    }

    fn penalty(&self, cpu_pct: f64) -> f64 {
        let tier = self.config.penalty_tiers.iter().find(|(lower, _)| cpu_pct >= *lower);
        tier.map_or(0.0, |(_, multiple)| multiple * self.config.price_per_hour)
    }
}

impl Env for ProvisioningEnv {
    fn observation_space(&self) -> Space {
        Space::Box { low: vec![0.0; FEATURES], high: vec![1.0; FEATURES] }
    }

    fn action_space(&self) -> Space {
        Space::Discrete { n: ACTIONS }
    }

    /// Starts an episode at a seed-chosen bin with the fleet an operator would size for the
    /// first bin at 50 % CPU, already running (its first hours are charged in step one).
    fn reset(&mut self, seed: Option<u64>) -> Result<(Vec<f32>, StepInfo), EnvError> {
        self.rng = Pcg64Mcg::seed_from_u64(seed.unwrap_or(0));
        let spare = self.bins.len() - self.episode_steps();
        self.start = if spare > 0 { self.rng.random_range(0..=spare) } else { 0 };
        self.t = 0;
        let c = &self.config;
        let first_rps = self.bins[self.start] * c.load_scale / STEP_S;
        let fleet =
            ((first_rps / (0.5 * c.instance_capacity_rps)).ceil() as u32).clamp(c.min_instances, c.max_instances);
        // Launched as the episode begins, already warm.
        self.fleet = vec![Instance { launched_s: 0.0, serving_s: 0.0 }; fleet as usize];
        let before = self.start.checked_sub(1).unwrap_or(self.start);
        let requests = self.requests(before);
        self.last = self.serve(requests, 0.0);
        self.needs_reset = false;
        Ok((self.observation(), StepInfo { replicas: fleet, ..StepInfo::default() }))
    }

    fn step(&mut self, action: &Action) -> Result<Step, EnvError> {
        if self.needs_reset {
            return Err(EnvError::NeedsReset);
        }
        let delta = match action {
            Action::Discrete(a) if *a < ACTIONS => *a as i64 - 2,
            _ => return Err(EnvError::ActionOutOfSpace { action: action.clone(), space: self.action_space() }),
        };
        let c = self.config.clone();
        let now = self.t as f64 * STEP_S;
        let have = self.fleet.len() as i64;
        let want = (have + delta).clamp(c.min_instances as i64, c.max_instances as i64);
        if want > have {
            let new = Instance { launched_s: now, serving_s: now + c.boot_s };
            self.fleet.extend(std::iter::repeat_n(new, (want - have) as usize));
        }
        for _ in want..have {
            // The instance nearest the end of its paid hour goes first.
            let used = |l: f64| (now - l).rem_euclid(3600.0);
            let victim = (0..self.fleet.len())
                .max_by(|&a, &b| used(self.fleet[a].launched_s).total_cmp(&used(self.fleet[b].launched_s)))
                .expect("at least min_instances");
            self.fleet.swap_remove(victim);
        }
        // Hours started in the step, including at launch (the initial fleet's at t = 0).
        let charged = self.charges(now, now + STEP_S);
        let requests = self.requests(self.start + self.t);
        let mut stats = self.serve(requests, now);
        stats.cost = charged as f64 * c.price_per_hour;
        stats.penalty = self.penalty(stats.cpu_utilisation_pct);
        self.last = stats;
        self.t += 1;
        let truncated = self.t >= self.episode_steps();
        self.needs_reset = truncated;
        Ok(Step {
            observation: self.observation(),
            reward: -(stats.cost + stats.penalty),
            terminated: false,
            truncated,
            info: StepInfo {
                slo_violated: stats.penalty > 0.0,
                dropped_requests: stats.dropped.round() as u64,
                illegal_action: want != have + delta,
                cpu_utilisation: stats.cpu_utilisation_pct / 100.0,
                slo_preservation: if stats.penalty > 0.0 { 0.0 } else { 1.0 },
                replicas: stats.instances,
                ..StepInfo::default()
            },
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn env(bins: Vec<f64>, config: ProvisioningConfig) -> ProvisioningEnv {
        ProvisioningEnv::new(bins, config).unwrap()
    }

    /// Instance-hours are charged up front: at launch and once per hour of running.
    #[test]
    fn started_hours_are_charged_up_front() {
        let config = ProvisioningConfig { instance_capacity_rps: 1e9, episode_steps: 30, ..Default::default() };
        let mut e = env(vec![100.0; 30], config);
        e.reset(Some(1)).unwrap();
        assert_eq!(e.fleet.len(), 1);
        let mut costs = Vec::new();
        for t in 0..26 {
            let a = if t == 2 { 4 } else { 2 }; // +2 instances at step 2, then hold
            costs.push(e.step(&Action::Discrete(a)).unwrap().reward);
        }
        let hour = -0.10;
        // Step 0 charges the initial instance; step 2 the two launched; then every 12 steps.
        let want_at = |t: usize| match t {
            0 | 12 | 24 => hour,
            2 | 14 => 2.0 * hour,
            _ => 0.0,
        };
        for (t, c) in costs.iter().enumerate() {
            assert!((c - want_at(t)).abs() < 1e-12, "step {t}: {c} vs {}", want_at(t));
        }
    }

    #[test]
    fn graduated_cpu_penalty_table() {
        let e = env(vec![1.0], ProvisioningConfig::default());
        for (cpu, want) in
            [(0.0, 0.0), (69.9, 0.0), (70.0, 0.3), (79.9, 0.3), (80.0, 0.5), (89.9, 0.5), (90.0, 1.0), (100.0, 1.0)]
        {
            assert!((e.penalty(cpu) - want).abs() < 1e-12, "{cpu}% → {}", e.penalty(cpu));
        }
    }

    #[test]
    fn load_is_scaled_twenty_times_with_root_count_noise() {
        let mut e = env(vec![500.0; 10], ProvisioningConfig::default());
        e.reset(Some(3)).unwrap();
        let draws: Vec<f64> = (0..4000).map(|_| e.requests(0)).collect();
        let mean = draws.iter().sum::<f64>() / draws.len() as f64;
        let sd = (draws.iter().map(|d| (d - mean).powi(2)).sum::<f64>() / draws.len() as f64).sqrt();
        assert!((mean - 10_000.0).abs() < 10.0, "mean {mean}");
        assert!((sd - 100.0).abs() < 5.0, "spread {sd}");
    }

    #[test]
    fn fleet_stays_in_range_and_boot_delays_capacity() {
        let config = ProvisioningConfig { instance_capacity_rps: 10.0, episode_steps: 20, ..Default::default() };
        // 20 × 300 counts per 300 s = 20 rps: two instances at 100 %.
        let mut e = env(vec![300.0; 20], config);
        e.reset(Some(1)).unwrap();
        assert_eq!(e.stats().instances, 4, "sized for 50 % CPU");
        for _ in 0..5 {
            let s = e.step(&Action::Discrete(0)).unwrap();
            assert!(s.info.replicas >= 1);
        }
        assert_eq!(e.stats().instances, 1);
        assert!(e.stats().cpu_utilisation_pct > 99.0 && e.stats().dropped > 0.0);
        // +2: the new instances boot for 120 of the step's 300 s, so capacity is 1 + 2 × 0.6.
        let s = e.step(&Action::Discrete(4)).unwrap();
        assert_eq!(s.info.replicas, 3);
        assert!((e.stats().cpu_utilisation_pct - (20.0 / 22.0 * 100.0)).abs() < 3.0, "{:?}", e.stats());
        for _ in 0..10 {
            e.step(&Action::Discrete(4)).unwrap();
        }
        assert_eq!(e.stats().instances, 10);
        assert!(e.step(&Action::Discrete(5)).is_err());
    }

    #[test]
    fn scale_in_removes_the_instance_nearest_its_next_billing_hour() {
        let mut e = env(vec![1.0; 100], ProvisioningConfig { episode_steps: 100, ..Default::default() });
        e.reset(Some(1)).unwrap();
        e.fleet = [0.0, 1500.0, 2700.0].map(|l| Instance { launched_s: l, serving_s: l }).to_vec();
        e.t = 11; // now = 3300 s: hours used 3300, 1800, 600 s
        e.step(&Action::Discrete(1)).unwrap();
        assert_eq!(e.fleet.len(), 2);
        assert!(e.fleet.iter().all(|i| i.launched_s != 0.0), "{:?}", e.fleet);
    }

    #[test]
    fn episodes_truncate_and_need_a_reset() {
        let mut e = env(synthetic_bins(2, 1000.0, 4), ProvisioningConfig { episode_steps: 288, ..Default::default() });
        assert!(matches!(e.step(&Action::Discrete(2)), Err(EnvError::NeedsReset)));
        e.reset(Some(9)).unwrap();
        let mut steps = 0;
        loop {
            let s = e.step(&Action::Discrete(2)).unwrap();
            steps += 1;
            assert!(s.observation.iter().all(|v| (0.0..=1.0).contains(v)));
            if s.truncated {
                break;
            }
        }
        assert_eq!(steps, 288);
        assert!(matches!(e.step(&Action::Discrete(2)), Err(EnvError::NeedsReset)));
    }

    #[test]
    fn bad_series_are_refused() {
        let empty = ProvisioningEnv::new(vec![], ProvisioningConfig::default()).unwrap_err();
        assert_eq!(empty, ProvisioningError::EmptyLoad);
        let err = ProvisioningEnv::new(vec![1.0, f64::NAN], ProvisioningConfig::default()).unwrap_err();
        assert!(matches!(err, ProvisioningError::BadBin { bin: 1, .. }), "{err}");
        assert!(err.to_string().contains("bin 1"), "{err}");
        let nan_price = ProvisioningConfig { price_per_hour: f64::NAN, ..ProvisioningConfig::default() };
        assert_eq!(ProvisioningEnv::new(vec![1.0], nan_price).unwrap_err(), ProvisioningError::Config);
    }
}
