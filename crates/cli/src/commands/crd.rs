//! `aware crd`: the MultidimPodAutoscaler CustomResourceDefinition generated from the Rust types.

use std::process::ExitCode;

use anyhow::Result;

#[derive(clap::Args, Debug)]
pub struct Args {
    /// Print the CRD as one JSON document instead of YAML.
    #[arg(long)]
    pub json: bool,
}

pub fn run(args: Args) -> Result<ExitCode> {
    let text =
        if args.json { serde_json::to_string_pretty(&aware_kube::crd())? + "\n" } else { aware_kube::crd_yaml() };
    // A closed stdout (`aware crd | head`) ends the command quietly; a failed one says so.
    crate::stdout::bytes(text.as_bytes());
    Ok(ExitCode::SUCCESS)
}
