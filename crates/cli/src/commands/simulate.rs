use std::process::ExitCode;

use anyhow::Result;
use serde::Serialize;

use super::{AppsArgs, SimArgs};
use crate::policy::PolicyName;
use crate::progress;
use crate::runner::{self, Summary};

#[derive(clap::Args, Debug)]
pub struct Args {
    #[command(flatten)]
    apps: AppsArgs,
    #[command(flatten)]
    sim: SimArgs,
    /// The recommender to run; the default is a fixed allocation sized for mean load.
    #[arg(long, default_value = "static")]
    policy: PolicyName,
    /// Print JSON instead of a table.
    #[arg(long)]
    json: bool,
}

#[derive(Debug, Serialize)]
struct Report {
    policy: String,
    apps: u32,
    steps: u64,
    seed: u64,
    interval_s: f64,
    scenario: Option<String>,
    aggregate: Summary,
    per_app: Vec<Summary>,
}

pub fn run(args: Args) -> Result<ExitCode> {
    let prepared = args.sim.prepare(&args.apps)?;
    let bar = progress::bar(args.sim.steps, "simulating");
    let run = runner::run(&prepared.setup(&args.apps, args.sim.steps), &args.policy, &bar)?;
    bar.finish_and_clear();
    let report = Report {
        policy: args.policy.to_string(),
        apps: args.apps.apps,
        steps: args.sim.steps,
        seed: args.apps.seed,
        interval_s: prepared.sim.interval_s,
        scenario: prepared.sim.scenario.map(|s| s.to_string()),
        aggregate: runner::aggregate("all", &run.per_app),
        per_app: run.per_app,
    };
    if args.json {
        println!("{}", serde_json::to_string_pretty(&report)?);
    } else {
        println!(
            "policy: {}  apps: {}  steps: {} × {} s  seed: {}{}",
            report.policy,
            report.apps,
            report.steps,
            report.interval_s,
            report.seed,
            report.scenario.as_ref().map(|s| format!("  scenario: {s}")).unwrap_or_default()
        );
        println!(
            "{:<48} {:>6} {:>6} {:>8} {:>10} {:>5} {:>11} {:>7}",
            "app", "cpu %", "mem %", "slo viol", "dropped", "ooms", "core-s", "reward"
        );
        for s in report.per_app.iter().chain(std::iter::once(&report.aggregate)) {
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
    Ok(ExitCode::SUCCESS)
}
