use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::Arc;

use anyhow::{Context, Result};
use aware_core::{Cluster, ContainerResources, FixedRecommender, Profile, Recommendation, Recommender, Resources};
use aware_env::{RewardFunction, slo_preservation};
use aware_sim::{AppSpec, CONTAINER, Scenario, SimCluster, SimConfig, VerticalUpdate, load_traces};
use serde::Serialize;

use super::AppsArgs;
use crate::progress;

#[derive(clap::Args, Debug)]
pub struct Args {
    #[command(flatten)]
    apps: AppsArgs,
    /// Control intervals to simulate (15 s each).
    #[arg(long, default_value_t = 240, value_parser = clap::value_parser!(u64).range(1..))]
    steps: u64,
    /// Inject an instability scenario: NAME or NAME@STEP (default step: half way).
    #[arg(long)]
    scenario: Option<Scenario>,
    /// AWARE profile (YAML): SLO override, reward weights, bounds.
    #[arg(long)]
    profile: Option<PathBuf>,
    /// Replay load from a trace file (Azure Functions per-minute CSV or timestamp,count CSV).
    #[arg(long)]
    trace: Option<PathBuf>,
    /// How CPU/memory changes reach running pods.
    #[arg(long, value_enum, default_value = "in-place")]
    vertical_update: VerticalUpdateArg,
    /// Print JSON instead of a table.
    #[arg(long)]
    json: bool,
}

#[derive(clap::ValueEnum, Clone, Copy, Debug)]
enum VerticalUpdateArg {
    InPlace,
    Restart,
}

#[derive(Debug, Default, Serialize)]
pub struct AppSummary {
    pub app: String,
    pub slo_p99_ms: f64,
    pub cpu_utilisation: f64,
    pub memory_utilisation: f64,
    pub slo_violations: u64,
    pub dropped_requests: f64,
    pub arrivals: f64,
    pub oom_events: u64,
    pub core_seconds: f64,
    pub replica_seconds: f64,
    pub mean_reward: f64,
    /// Steps where the recommender refused the observation and the allocation was kept.
    pub fallbacks: u64,
}

#[derive(Debug, Serialize)]
struct Report {
    recommender: String,
    apps: u32,
    steps: u64,
    seed: u64,
    interval_s: f64,
    scenario: Option<String>,
    aggregate: AppSummary,
    per_app: Vec<AppSummary>,
}

/// The reference allocation clamped into the profile's bounds.
fn fixed_allocation(app: &AppSpec, profile: &Profile) -> Recommendation {
    let b = &profile.bounds;
    let r = app.reference;
    Recommendation {
        replicas: r.replicas.clamp(b.min_replicas, b.max_replicas),
        containers: vec![ContainerResources::guaranteed(
            CONTAINER,
            Resources::new(
                r.cpu_millicores.clamp(b.min_cpu_millicores, b.max_cpu_millicores),
                r.memory_bytes.clamp(b.min_memory_bytes(), b.max_memory_bytes()),
            ),
        )],
    }
}

pub fn run(args: Args) -> Result<ExitCode> {
    let profile = match &args.profile {
        Some(p) => Profile::load(p)?,
        None => Profile::default(),
    };
    let traces = match &args.trace {
        Some(p) => load_traces(p)?.into_iter().map(Arc::new).collect(),
        None => Vec::new(),
    };
    let apps = args.apps.generate();
    let scenario = args.scenario.map(|s| Scenario { kind: s.kind, at_step: Some(s.at_step.unwrap_or(args.steps / 2)) });
    let config = SimConfig {
        scenario,
        slo_p99_ms: profile.slo.latency_p99_ms,
        vertical_update: match args.vertical_update {
            VerticalUpdateArg::InPlace => VerticalUpdate::InPlace,
            VerticalUpdateArg::Restart => VerticalUpdate::Restart,
        },
        ..SimConfig::default()
    };
    let mut recommenders: Vec<FixedRecommender> = apps
        .iter()
        .map(|a| FixedRecommender { name: "fixed".into(), recommendation: fixed_allocation(a, &profile) })
        .collect();
    let mut cluster = SimCluster::new(apps, traces, config, args.apps.seed);
    let reward = RewardFunction { weights: profile.reward.clone() };
    let n = recommenders.len();
    let mut per_app: Vec<AppSummary> = (0..n)
        .map(|i| AppSummary {
            app: cluster.apps()[i].name.clone(),
            slo_p99_ms: cluster.slo_p99_ms(i),
            ..Default::default()
        })
        .collect();
    let (mut cpu_steps, mut mem_steps) = (vec![0u64; n], vec![0u64; n]);
    let bar = progress::bar(args.steps, "simulating");
    // The first interval runs under the initial allocation so every recommender sees a real
    // observation.
    cluster.advance()?;
    for _ in 0..args.steps {
        for (i, rec) in recommenders.iter_mut().enumerate() {
            let obs = cluster.observe(i)?;
            match rec.recommend(&obs) {
                Ok(r) => cluster.apply(i, &r).with_context(|| format!("applying the {} recommendation", rec.name()))?,
                Err(_) => per_app[i].fallbacks += 1,
            }
        }
        cluster.advance()?;
        for (i, s) in per_app.iter_mut().enumerate() {
            let st = cluster.stats(i);
            let obs = cluster.observe(i)?;
            if let Some(u) = st.cpu_utilisation {
                s.cpu_utilisation += u;
                cpu_steps[i] += 1;
            }
            if let Some(u) = st.memory_utilisation {
                s.memory_utilisation += u;
                mem_steps[i] += 1;
            }
            s.slo_violations += st.slo_violated as u64;
            s.dropped_requests += st.dropped;
            s.arrivals += st.arrivals;
            s.oom_events += st.oom_events as u64;
            s.core_seconds += st.core_seconds;
            s.replica_seconds += st.replica_seconds;
            let sp = slo_preservation(
                Some(s.slo_p99_ms),
                profile.slo.throughput_rps,
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
        bar.inc(1);
    }
    bar.finish_and_clear();
    let steps = args.steps as f64;
    for (i, s) in per_app.iter_mut().enumerate() {
        s.cpu_utilisation /= cpu_steps[i].max(1) as f64;
        s.memory_utilisation /= mem_steps[i].max(1) as f64;
        s.mean_reward /= steps;
    }
    let mean = |f: fn(&AppSummary) -> f64| per_app.iter().map(f).sum::<f64>() / n as f64;
    let sum = |f: fn(&AppSummary) -> f64| per_app.iter().map(f).sum::<f64>();
    let aggregate = AppSummary {
        app: "all".into(),
        slo_p99_ms: mean(|s| s.slo_p99_ms),
        cpu_utilisation: mean(|s| s.cpu_utilisation),
        memory_utilisation: mean(|s| s.memory_utilisation),
        slo_violations: per_app.iter().map(|s| s.slo_violations).sum(),
        dropped_requests: sum(|s| s.dropped_requests),
        arrivals: sum(|s| s.arrivals),
        oom_events: per_app.iter().map(|s| s.oom_events).sum(),
        core_seconds: sum(|s| s.core_seconds),
        replica_seconds: sum(|s| s.replica_seconds),
        mean_reward: mean(|s| s.mean_reward),
        fallbacks: per_app.iter().map(|s| s.fallbacks).sum(),
    };
    let report = Report {
        recommender: "fixed (reference allocation)".into(),
        apps: args.apps.apps,
        steps: args.steps,
        seed: args.apps.seed,
        interval_s: cluster.interval_s(),
        scenario: scenario.map(|s| s.to_string()),
        aggregate,
        per_app,
    };
    if args.json {
        println!("{}", serde_json::to_string_pretty(&report)?);
    } else {
        print_table(&report);
    }
    Ok(ExitCode::SUCCESS)
}

fn print_table(r: &Report) {
    println!(
        "recommender: {}  apps: {}  steps: {} × {} s  seed: {}{}",
        r.recommender,
        r.apps,
        r.steps,
        r.interval_s,
        r.seed,
        r.scenario.as_ref().map(|s| format!("  scenario: {s}")).unwrap_or_default()
    );
    println!(
        "{:<48} {:>6} {:>6} {:>8} {:>10} {:>5} {:>11} {:>7}",
        "app", "cpu %", "mem %", "slo viol", "dropped", "ooms", "core-s", "reward"
    );
    for s in r.per_app.iter().chain(std::iter::once(&r.aggregate)) {
        println!(
            "{:<48} {:>6.1} {:>6.1} {:>8} {:>10.0} {:>5} {:>11.0} {:>7.3}",
            s.app,
            s.cpu_utilisation * 100.0,
            s.memory_utilisation * 100.0,
            s.slo_violations,
            s.dropped_requests,
            s.oom_events,
            s.core_seconds,
            s.mean_reward
        );
    }
}
