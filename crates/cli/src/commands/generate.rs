use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::Result;

use super::{AppsArgs, write_atomically};

#[derive(clap::Args, Debug)]
pub struct Args {
    #[command(flatten)]
    apps: AppsArgs,
    /// Also save the applications as JSON to this file.
    #[arg(long)]
    out: Option<PathBuf>,
    /// Print JSON instead of a table.
    #[arg(long)]
    json: bool,
}

pub fn run(args: Args) -> Result<ExitCode> {
    let apps = args.apps.workload(None)?.apps;
    let json = serde_json::to_string_pretty(&apps)?;
    if let Some(path) = &args.out {
        write_atomically(path, &(json.clone() + "\n"))?;
    }
    if args.json {
        outln!("{json}");
        return Ok(ExitCode::SUCCESS);
    }
    outln!(
        "{:<48} {:>10} {:>10} {:>8} {:>9} {:>6} {:>6} {:>6} {:>8}",
        "app",
        "mean rps",
        "peak rps",
        "cpu ms",
        "slo ms",
        "mean r",
        "peak r",
        "max r",
        "mem MiB"
    );
    for app in &apps {
        outln!(
            "{:<48} {:>10.3} {:>10.3} {:>8.1} {:>9.1} {:>6} {:>6} {:>6} {:>8}",
            app.name,
            app.mean_rps,
            app.peak_rps,
            app.cost().cpu_s * 1000.0,
            app.slo_p99_ms,
            app.mean_replicas,
            app.peak_replicas,
            app.bounds.max_replicas,
            app.reference.memory_bytes >> 20
        );
    }
    Ok(ExitCode::SUCCESS)
}
