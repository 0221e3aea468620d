//! Additive-increase / multiplicative-decrease on resource limits: when the workload is in
//! trouble (SLO violated, requests dropped, OOM kills, or memory nearly full) add one step;
//! otherwise shrink by a constant factor while utilisation is below the profile target.
//!
//! Constants: the increase is the profile's discrete step (250 m CPU, 128 MiB by default), the
//! decrease factor is 0.9 per control interval (15 s), memory counts as "nearly full" above
//! 90 % of its limit. The decrease only applies below the utilisation target so that AIMD
//! settles near the target instead of sawing into violations every few intervals.
//!
//! Memory is never cut below the working set: a decrease stops at the largest working set any
//! pod reports divided by the pressure threshold, so the next interval does not read as memory
//! trouble either (cutting below the working set is an OOM kill in waiting). MiB bounds are
//! converted with saturating arithmetic, so absurd profile values clamp instead of panicking.

use aware_core::Bounds;
use aware_core::{Observation, Profile, Recommendation, Recommender, RecommenderError, Scope};

pub const DECREASE_FACTOR: f64 = 0.9;
pub const MEMORY_PRESSURE: f64 = 0.9;

const MIB: u64 = 1 << 20;

fn mib_to_bytes(mib: u64) -> u64 {
    mib.saturating_mul(MIB)
}

#[derive(Debug, Clone, PartialEq)]
pub struct AdditiveIncreaseMultiplicativeDecrease {
    pub bounds: Bounds,
    pub slo_p99_ms: Option<f64>,
    pub cpu_target: f64,
    pub memory_target: f64,
}

impl AdditiveIncreaseMultiplicativeDecrease {
    /// `slo_p99_ms` is the workload's objective when the profile does not set one.
    pub fn from_profile(profile: &Profile, slo_p99_ms: Option<f64>) -> Self {
        Self {
            bounds: profile.bounds.clone(),
            slo_p99_ms: profile.slo.latency_p99_ms.or(slo_p99_ms),
            cpu_target: profile.targets.cpu_utilisation,
            memory_target: profile.targets.memory_utilisation,
        }
    }
}

impl Recommender for AdditiveIncreaseMultiplicativeDecrease {
    fn name(&self) -> &str {
        "aimd"
    }

    /// CPU and memory limits: the replicas pass unchanged.
    fn scope(&self) -> Scope {
        Scope { replicas: false, cpu: true, memory: true }
    }

    fn recommend(&mut self, obs: &Observation) -> Result<Recommendation, RecommenderError> {
        obs.validate()?;
        let b = &self.bounds;
        let violated = match (self.slo_p99_ms, obs.latency_p99_ms) {
            (Some(slo), Some(p99)) => p99 > slo,
            (Some(_), None) => obs.arrival_rate > 0.0,
            (None, _) => false,
        } || obs.dropped_requests > 0;
        let memory = obs.memory_utilisation();
        let memory_trouble = obs.oom_events > 0 || memory.is_some_and(|m| m > MEMORY_PRESSURE);
        let mut c = obs.template.clone();
        let (cpu, mem) = (c.limits.cpu_millicores as f64, c.limits.memory_bytes as f64);
        let new_cpu = if violated {
            cpu + b.cpu_step_millicores as f64
        } else if obs.cpu_utilisation().is_some_and(|u| u < self.cpu_target) {
            cpu * DECREASE_FACTOR
        } else {
            cpu
        };
        // The largest working set any pod (or container) reports.
        let working_set = obs
            .pods
            .iter()
            .flat_map(|p| {
                let containers = p.containers.iter().filter_map(|c| c.memory_working_set_bytes);
                p.memory_working_set_bytes.into_iter().chain(containers)
            })
            .fold(0.0f64, f64::max);
        let new_mem = if memory_trouble {
            mem + mib_to_bytes(b.memory_step_mib) as f64
        } else if memory.is_some_and(|m| m < self.memory_target) {
            (mem * DECREASE_FACTOR).max((working_set / MEMORY_PRESSURE).min(mem))
        } else {
            mem
        };
        let (min_cpu, max_cpu) = (b.min_cpu_millicores, b.max_cpu_millicores.max(b.min_cpu_millicores));
        let (min_mem, max_mem) = (mib_to_bytes(b.min_memory_mib), mib_to_bytes(b.max_memory_mib));
        // `as` saturates: a huge or infinite value becomes u64::MAX and then the bound.
        let cpu_m = (new_cpu.round() as u64).clamp(min_cpu, max_cpu);
        let mem_b = (new_mem.round() as u64).clamp(min_mem, max_mem.max(min_mem));
        c.limits.cpu_millicores = cpu_m;
        c.limits.memory_bytes = mem_b;
        c.requests.cpu_millicores = cpu_m;
        c.requests.memory_bytes = mem_b;
        Ok(Recommendation { replicas: obs.desired_replicas, containers: vec![c] })
    }
}
