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
    let apps = args.apps.generate();
    let json = serde_json::to_string_pretty(&apps)?;
    if let Some(path) = &args.out {
        write_atomically(path, &(json.clone() + "\n"))?;
    }
    if args.json {
        outln!("{json}");
        return Ok(ExitCode::SUCCESS);
    }
    outln!(
        "{:<48} {:>9} {:>9} {:>9} {:>8} {:>8} {:>9}",
        "app",
        "mean rps",
        "peak rps",
        "cpu ms",
        "slo ms",
        "replicas",
        "mem MiB"
    );
    for app in &apps {
        let cost = app.cost();
        outln!(
            "{:<48} {:>9.2} {:>9.2} {:>9.1} {:>8.1} {:>8} {:>9}",
            app.name,
            app.load.mean_rps,
            app.load.peak_rps(),
            cost.cpu_s * 1000.0,
            app.slo_p99_ms,
            app.reference.replicas,
            app.reference.memory_bytes >> 20
        );
    }
    Ok(ExitCode::SUCCESS)
}
