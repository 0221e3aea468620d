use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::{Result, bail};
use serde::Serialize;

use super::{AppsArgs, SimArgs};
use crate::policy::PolicyName;
use crate::runner::{self, Summary};
use crate::{plot, progress};

#[derive(clap::Args, Debug)]
pub struct Args {
    /// Policies to compare, comma-separated.
    #[arg(long, value_delimiter = ',', default_value = "hpa,vpa,mpa,threshold,aimd,static,static-peak")]
    policies: Vec<PolicyName>,
    #[command(flatten)]
    apps: AppsArgs,
    #[command(flatten)]
    sim: SimArgs,
    /// Steps per episode when counting violations per 100 episodes and episode reward.
    #[arg(long, default_value_t = 100, value_parser = clap::value_parser!(u64).range(1..))]
    episode_steps: u64,
    /// Print JSON instead of a table.
    #[arg(long)]
    json: bool,
    /// Also draw utilisation, SLO violations and cost over time to this PNG.
    #[arg(long)]
    plot: Option<PathBuf>,
}

#[derive(Debug, Serialize)]
struct PolicyReport {
    policy: String,
    #[serde(flatten)]
    summary: Summary,
    episodes: f64,
    slo_violations_per_100_episodes: f64,
    mean_episode_reward: f64,
}

#[derive(Debug, Serialize)]
struct Report {
    apps: u32,
    steps: u64,
    seed: u64,
    trace_seed: u64,
    interval_s: f64,
    episode_steps: u64,
    scenario: Option<String>,
    policies: Vec<PolicyReport>,
}

pub fn run(args: Args) -> Result<ExitCode> {
    if args.policies.is_empty() {
        bail!("--policies: name at least one policy");
    }
    let mut seen = std::collections::HashSet::new();
    if let Some(dup) = args.policies.iter().find(|p| !seen.insert((*p).clone())) {
        bail!("--policies: {dup} is listed twice");
    }
    if let Some(path) = &args.plot
        && path.extension().and_then(|e| e.to_str()).map(str::to_ascii_lowercase).as_deref() != Some("png")
    {
        bail!("--plot: {} must end in .png", path.display());
    }
    let prepared = args.sim.prepare(&args.apps)?;
    let setup = prepared.setup(&args.apps, args.sim.steps);
    let bar = progress::bar(args.sim.steps * args.policies.len() as u64, "comparing");
    let mut runs = Vec::new();
    for p in &args.policies {
        bar.set_message(p.to_string());
        runs.push(runner::run(&setup, p, &bar)?);
    }
    bar.finish_and_clear();
    let episodes = (args.sim.steps * args.apps.apps as u64) as f64 / args.episode_steps as f64;
    let report = Report {
        apps: args.apps.apps,
        steps: args.sim.steps,
        seed: args.apps.seed,
        trace_seed: args.apps.trace_seed(),
        interval_s: prepared.sim.interval_s,
        episode_steps: args.episode_steps,
        scenario: prepared.sim.scenario.map(|s| s.to_string()),
        policies: runs
            .iter()
            .map(|r| {
                let summary = runner::aggregate(&r.policy.to_string(), &r.per_app);
                PolicyReport {
                    policy: r.policy.to_string(),
                    episodes,
                    slo_violations_per_100_episodes: summary.slo_violations as f64 / episodes * 100.0,
                    mean_episode_reward: summary.mean_reward * args.episode_steps as f64,
                    summary,
                }
            })
            .collect(),
    };
    if let Some(path) = &args.plot {
        plot::comparison(path, &runs, prepared.sim.interval_s)?;
    }
    if args.json {
        println!("{}", serde_json::to_string_pretty(&report)?);
        return Ok(ExitCode::SUCCESS);
    }
    println!(
        "{} apps × {} steps of {} s, seed {}{}; episodes of {} steps",
        report.apps,
        report.steps,
        report.interval_s,
        report.seed,
        report.scenario.as_ref().map(|s| format!(", scenario {s}")).unwrap_or_default(),
        report.episode_steps
    );
    println!(
        "{:<12} {:>6} {:>6} {:>9} {:>10} {:>10} {:>12} {:>12} {:>8} {:>9} {:>9}",
        "policy",
        "cpu %",
        "mem %",
        "slo viol",
        "viol/100ep",
        "dropped",
        "replica-s",
        "core-s",
        "actions",
        "reversals",
        "ep reward"
    );
    for p in &report.policies {
        let s = &p.summary;
        println!(
            "{:<12} {:>6.1} {:>6.1} {:>9} {:>10.1} {:>10.0} {:>12.0} {:>12.0} {:>8} {:>9} {:>9.2}",
            p.policy,
            s.cpu_utilisation * 100.0,
            s.memory_utilisation * 100.0,
            s.slo_violations,
            p.slo_violations_per_100_episodes,
            s.dropped_requests,
            s.replica_seconds,
            s.core_seconds,
            s.scaling_actions,
            s.direction_reversals,
            p.mean_episode_reward
        );
    }
    if let Some(path) = &args.plot {
        println!("plot: {}", path.display());
    }
    Ok(ExitCode::SUCCESS)
}
