use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::Result;

use super::{AppsArgs, SimArgs, print_json};
use crate::policy::PolicyName;
use crate::progress::Bar;

#[derive(clap::Args, Debug)]
pub struct Args {
    /// Policies to compare, comma-separated: hpa, vpa, mpa, threshold, aimd, static,
    /// static-peak, fixed:RxCPUxMEM (replicas × cores × MiB, e.g. fixed:1x0.1x64), rl:DIR.
    #[arg(long, value_delimiter = ',', default_value = "hpa,vpa,mpa,threshold,aimd,static,static-peak")]
    policies: Vec<PolicyName>,
    #[command(flatten)]
    apps: AppsArgs,
    #[command(flatten)]
    sim: SimArgs,
    /// Steps per episode when counting violations per 100 episodes and episode reward, at most
    /// --steps [default: 100, or --steps when the run is shorter]
    #[arg(long, value_parser = clap::value_parser!(u64).range(1..))]
    episode_steps: Option<u64>,
    /// Record every policy's trajectories into this store (sqlite:PATH, postgres://…, influxdb://…).
    #[arg(long)]
    store: Option<String>,
    /// Record into the profile's `store` (default sqlite:aware.db).
    #[arg(long, conflicts_with = "store")]
    record: bool,
    /// Print JSON instead of a table.
    #[arg(long)]
    json: bool,
    /// Also draw utilisation, SLO violations and cost over time to this PNG.
    #[arg(long)]
    plot: Option<PathBuf>,
}

pub fn run(args: Args) -> Result<ExitCode> {
    let workload = args.sim.workload(&args.apps)?;
    let store = workload.recording_store(args.store.as_deref(), args.record);
    let report = aware_lab::evaluate::compare(
        &workload,
        &args.policies,
        args.sim.steps,
        args.episode_steps.unwrap_or(aware_lab::evaluate::default_episode_steps(args.sim.steps)),
        store,
        args.plot.as_deref(),
        &Bar::new(),
    )?;
    if args.json {
        print_json(&report)?;
        return Ok(ExitCode::SUCCESS);
    }
    outln!(
        "{} apps × {} steps of {} s, seed {}{}; episodes of {} steps",
        report.apps,
        report.steps,
        report.interval_s,
        report.seed,
        report.scenario.as_ref().map(|s| format!(", scenario {s}")).unwrap_or_default(),
        report.episode_steps
    );
    super::print_rows(&report.policies);
    super::print_misranked(&report.reward_misranked);
    if let Some(path) = &args.plot {
        outln!("plot: {}", path.display());
    }
    Ok(ExitCode::SUCCESS)
}
