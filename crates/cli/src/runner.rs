//! Runs one policy over simulated apps and scores it: the loop shared by `simulate` and
//! `compare`, so both measure exactly the same way.

use std::sync::Arc;

use anyhow::{Context, Result};
use aware_core::{Cluster, Profile, Recommendation};
use aware_env::action::reverses;
use aware_env::{RewardFunction, slo_preservation};
use aware_sim::{AppSpec, SimCluster, SimConfig, Trace};
use indicatif::ProgressBar;
use serde::Serialize;

use crate::policy::{Policy, PolicyName};

/// Per-app (or, aggregated, per-policy) outcome of a run. Utilisations and violations are the
/// simulator's true values; the reward is what a policy observing the noisy metrics would get.
#[derive(Debug, Default, Clone, Serialize)]
pub struct Summary {
    pub app: String,
    pub slo_p99_ms: f64,
    pub cpu_utilisation: f64,
    pub memory_utilisation: f64,
    /// Intervals whose p99 exceeded the SLO (or that dropped ≥ 1 % / served nothing).
    pub slo_violations: u64,
    pub dropped_requests: f64,
    pub arrivals: f64,
    pub oom_events: u64,
    /// Σ CPU requests of scheduled pods × time: what the operator pays for.
    pub core_seconds: f64,
    pub replica_seconds: f64,
    /// Intervals in which the recommendation changed replicas, CPU or memory.
    pub scaling_actions: u64,
    /// Changes that reversed the previous change of the same knob (oscillation).
    pub direction_reversals: u64,
    pub mean_reward: f64,
    /// Intervals where the recommender refused the observation and the allocation was kept.
    pub fallbacks: u64,
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

pub struct Run {
    pub policy: PolicyName,
    pub per_app: Vec<Summary>,
    pub series: Series,
}

pub struct Setup<'a> {
    pub apps: &'a [AppSpec],
    pub traces: &'a [Arc<Trace>],
    pub sim: SimConfig,
    pub seed: u64,
    pub steps: u64,
    pub profile: &'a Profile,
}

/// Direction of change per knob (replicas, CPU limit, memory limit).
fn direction(obs: &aware_core::Observation, rec: &Recommendation) -> [i8; 3] {
    let sign = |a: u64, b: u64| (a.cmp(&b) as i8).signum();
    let (cur, new) = (&obs.template.limits, rec.containers.first().map(|c| c.limits).unwrap_or(obs.template.limits));
    [
        sign(rec.replicas as u64, obs.desired_replicas as u64),
        sign(new.cpu_millicores, cur.cpu_millicores),
        sign(new.memory_bytes, cur.memory_bytes),
    ]
}

pub fn run(setup: &Setup, name: &PolicyName, bar: &ProgressBar) -> Result<Run> {
    let mut cluster = SimCluster::new(setup.apps.to_vec(), setup.traces.to_vec(), setup.sim.clone(), setup.seed);
    let n = setup.apps.len();
    let mut policies: Vec<Policy> = (0..n)
        // Each app's recommender sees its own bounds (with the profile's overrides).
        .map(|i| {
            let profile = setup.profile.for_app(&setup.apps[i].bounds);
            Policy::build(name, &profile, Some(&setup.apps[i]), Some(cluster.slo_p99_ms(i)))
        })
        .collect::<Result<_>>()?;
    let reward = RewardFunction { weights: setup.profile.reward.clone() };
    let mut per_app: Vec<Summary> = (0..n)
        .map(|i| Summary { app: setup.apps[i].name.clone(), slo_p99_ms: cluster.slo_p99_ms(i), ..Default::default() })
        .collect();
    let (mut cpu_n, mut mem_n) = (vec![0u64; n], vec![0u64; n]);
    let mut last_direction = vec![[0i8; 3]; n];
    let mut series = Series::default();
    let dt = cluster.interval_s();
    // One interval under the initial allocation, so every policy starts from a real observation.
    cluster.advance()?;
    for _ in 0..setup.steps {
        for (i, policy) in policies.iter_mut().enumerate() {
            let obs = cluster.observe(i)?;
            match policy.recommender().recommend(&obs) {
                Ok(rec) => {
                    let dir = direction(&obs, &rec);
                    if dir != [0; 3] {
                        per_app[i].scaling_actions += 1;
                        per_app[i].direction_reversals += reverses(last_direction[i], dir) as u64;
                        for (k, d) in dir.iter().enumerate() {
                            if *d != 0 {
                                last_direction[i][k] = *d;
                            }
                        }
                    }
                    cluster.apply(i, &rec).with_context(|| format!("applying the {name} recommendation"))?;
                }
                Err(_) => per_app[i].fallbacks += 1,
            }
        }
        cluster.advance()?;
        let (mut util_sum, mut util_n, mut violations, mut cores) = (0.0, 0usize, 0u64, 0.0);
        for (i, s) in per_app.iter_mut().enumerate() {
            let st = cluster.stats(i);
            if let Some(u) = st.cpu_utilisation {
                s.cpu_utilisation += u;
                cpu_n[i] += 1;
                util_sum += u;
                util_n += 1;
            }
            if let Some(u) = st.memory_utilisation {
                s.memory_utilisation += u;
                mem_n[i] += 1;
            }
            s.slo_violations += st.slo_violated as u64;
            violations += st.slo_violated as u64;
            s.dropped_requests += st.dropped;
            s.arrivals += st.arrivals;
            s.oom_events += st.oom_events as u64;
            s.core_seconds += st.core_seconds;
            cores += st.core_seconds / dt;
            s.replica_seconds += st.replica_seconds;
            let obs = cluster.observe(i)?;
            let sp = slo_preservation(
                Some(s.slo_p99_ms),
                setup.profile.slo.throughput_rps,
                obs.latency_p99_ms,
                obs.throughput,
                obs.arrival_rate,
            );
            s.mean_reward += reward.reward(
                sp,
                obs.cpu_utilisation().unwrap_or(0.0),
                obs.memory_utilisation().unwrap_or(0.0),
                false,
                false,
            );
        }
        series.cpu_utilisation.push(if util_n > 0 { util_sum / util_n as f64 } else { 0.0 });
        series.slo_violations.push(violations);
        series.reserved_cores.push(cores);
        bar.inc(1);
    }
    for (i, s) in per_app.iter_mut().enumerate() {
        s.cpu_utilisation /= cpu_n[i].max(1) as f64;
        s.memory_utilisation /= mem_n[i].max(1) as f64;
        s.mean_reward /= setup.steps as f64;
    }
    Ok(Run { policy: name.clone(), per_app, series })
}

/// Means of rates, sums of amounts, over apps.
pub fn aggregate(label: &str, per_app: &[Summary]) -> Summary {
    let n = per_app.len().max(1) as f64;
    let mean = |f: fn(&Summary) -> f64| per_app.iter().map(f).sum::<f64>() / n;
    let sum = |f: fn(&Summary) -> f64| per_app.iter().map(f).sum::<f64>();
    let count = |f: fn(&Summary) -> u64| per_app.iter().map(f).sum::<u64>();
    Summary {
        app: label.into(),
        slo_p99_ms: mean(|s| s.slo_p99_ms),
        cpu_utilisation: mean(|s| s.cpu_utilisation),
        memory_utilisation: mean(|s| s.memory_utilisation),
        slo_violations: count(|s| s.slo_violations),
        dropped_requests: sum(|s| s.dropped_requests),
        arrivals: sum(|s| s.arrivals),
        oom_events: count(|s| s.oom_events),
        core_seconds: sum(|s| s.core_seconds),
        replica_seconds: sum(|s| s.replica_seconds),
        scaling_actions: count(|s| s.scaling_actions),
        direction_reversals: count(|s| s.direction_reversals),
        mean_reward: mean(|s| s.mean_reward),
        fallbacks: count(|s| s.fallbacks),
    }
}
