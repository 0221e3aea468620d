//! `aware recommend`: parses the arguments, asks `aware_baselines::dry_run`, prints.

use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::Result;
use aware_baselines::BaselineKind;
use aware_baselines::dry_run::{self, DryRunOutput};
use aware_core::{ContainerResources, Profile};

#[derive(clap::Args, Debug)]
pub struct Args {
    /// Which rule-based recommender to ask: hpa, vpa, mpa, threshold or aimd.
    #[arg(long)]
    policy: BaselineKind,
    /// JSON file: {"observation": …, "history": [… oldest first …], "slo_p99_ms": …, and
    /// optionally "hpa" (an autoscaling/v2 spec), "unlisted_pod_metrics", "vpa_checkpoints"}.
    #[arg(long)]
    input: PathBuf,
    /// AWARE profile (YAML): targets, bounds, SLO.
    #[arg(long)]
    profile: Option<PathBuf>,
    /// Print JSON instead of a summary.
    #[arg(long)]
    json: bool,
}

pub fn run(args: Args) -> Result<ExitCode> {
    let profile = match &args.profile {
        Some(p) => Profile::load(p)?,
        None => Profile::default(),
    };
    let out = dry_run::recommend_file(args.policy, &profile, &args.input)?;
    if args.json {
        outln!("{}", serde_json::to_string_pretty(&out)?);
    } else {
        print_summary(&out)?;
    }
    Ok(ExitCode::SUCCESS)
}

fn print_summary(out: &DryRunOutput) -> Result<()> {
    let show = |replicas: u32, c: &ContainerResources| {
        format!(
            "{replicas} × {} (cpu {}m/{}m, memory {}Mi/{}Mi request/limit)",
            c.name,
            c.requests.cpu_millicores,
            c.limits.cpu_millicores,
            c.requests.memory_bytes >> 20,
            c.limits.memory_bytes >> 20
        )
    };
    outln!("{} for {} at t={} s", out.policy, out.app, out.time_s);
    outln!("  now:         {}", show(out.current.replicas, &out.current.resources));
    for c in &out.recommendation.containers {
        outln!("  recommended: {}", show(out.recommendation.replicas, c));
    }
    outln!("  details:     {}", serde_json::to_string(&out.details)?);
    Ok(())
}
