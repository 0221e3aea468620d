use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::Result;
use aware_env::ActionKind;
use aware_lab::agent::Algorithm;
use aware_lab::train::TrainSpec;

use super::{AppsArgs, SimArgs, print_json};
use crate::progress::Bar;

#[derive(clap::Args, Debug)]
pub struct Args {
    /// The learner: ddpg, ppo, dqn, d3qn or qtable (with --resume: optional, and must match the
    /// checkpoint's).
    #[arg(long, required_unless_present = "resume")]
    algo: Option<Algorithm>,
    /// Continue from this checkpoint's weights (with a fresh optimiser and replay buffer; a
    /// DDPG's exploration noise restarts at full scale). The checkpoint itself is left as it is.
    #[arg(long)]
    resume: Option<PathBuf>,
    /// The action space: continuous [cpu, memory, replicas] or the seven discrete deltas.
    /// Defaults to continuous for DDPG and discrete otherwise; only PPO can use both.
    #[arg(long, value_enum)]
    action_space: Option<ActionSpace>,
    #[command(flatten)]
    apps: AppsArgs,
    #[command(flatten)]
    sim: SimArgs,
    /// Training episodes; each resets the simulator with a new trace realisation.
    #[arg(long, default_value_t = 50, value_parser = clap::value_parser!(u64).range(1..))]
    episodes: u64,
    /// Directory for the checkpoint, the learning curve (CSV and PNG) and a summary.
    #[arg(long)]
    out: PathBuf,
    /// Train against an environment another process serves (`aware serve-env`):
    /// `grpc://HOST:PORT`, or `grpcs://HOST:PORT` for TLS. The server builds the same
    /// environment from these options (the profile's text travels; `--trace` cannot).
    #[arg(long, value_name = "URL")]
    env: Option<String>,
    /// With --env: the bearer token's file (its content, whitespace trimmed).
    #[arg(long, requires = "env")]
    token_file: Option<PathBuf>,
    /// With --env: PEM of the CA that signed the server's certificate (speaks TLS).
    #[arg(long, requires = "env")]
    tls_ca: Option<PathBuf>,
    /// Print the summary as JSON.
    #[arg(long)]
    json: bool,
}

#[derive(clap::ValueEnum, Clone, Copy, Debug, PartialEq, Eq)]
enum ActionSpace {
    Discrete,
    Continuous,
}

/// Steps per episode come from `--steps` (AWARE's DDPG uses 100).
pub fn run(args: Args) -> Result<ExitCode> {
    let spec = TrainSpec {
        algorithm: args.algo,
        action: args.action_space.map(|a| match a {
            ActionSpace::Discrete => ActionKind::Discrete,
            ActionSpace::Continuous => ActionKind::Continuous,
        }),
        resume: args.resume,
        episodes: args.episodes,
        steps: args.sim.steps,
        out: args.out,
    };
    // A failed run leaves no directory behind that it created (one that existed stays).
    let report = aware_lab::output::removing_created_dir_on_failure(&spec.out, || -> Result<_> {
        Ok(match args.env {
            None => aware_lab::train::train(&args.sim.workload(&args.apps)?, &spec, &Bar::new())?,
            Some(address) => {
                let remote = aware_rpc::RemoteEnvArgs { address, token_file: args.token_file, tls_ca: args.tls_ca };
                aware_rpc::train_remote(&remote, &args.sim.spec(&args.apps), &spec, &Bar::new())?
            }
        })
    })?;
    if args.json {
        print_json(&report)?;
    } else {
        outln!(
            "{} on {} apps, {} episodes × {} steps: episode reward {:.2} → {:.2} (last 10)",
            report.algorithm,
            report.apps,
            report.episodes,
            report.steps_per_episode,
            report.first_mean_reward,
            report.last_10_mean_reward
        );
        outln!("checkpoint and learning curve in {}", report.checkpoint);
    }
    Ok(ExitCode::SUCCESS)
}
