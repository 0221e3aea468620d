//! `aware provision`: the cloud-provisioning problem (an auto-scaling group billed by the
//! started instance-hour, penalised for hot CPU) — train agents on it and compare them with
//! CloudWatch step scaling on held-out days.

use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::Result;
use aware_lab::provision::{LoadSpec, ProvisionAlgorithm, ProvisionPolicyName, ProvisionTrainSpec};

use super::{positive_f64, print_json};
use crate::progress::Bar;

#[derive(clap::Subcommand, Debug)]
pub enum Provision {
    /// Train an agent on the training days; writes a checkpoint and a learning curve.
    Train(TrainArgs),
    /// Run policies over the held-out days and compare their bills and penalties.
    Compare(CompareArgs),
}

/// The load both subcommands split into training and held-out days.
#[derive(clap::Args, Debug, Clone)]
pub struct LoadArgs {
    /// Days of synthetic 5-minute load (ignored with --trace).
    #[arg(long, default_value_t = 14, value_parser = clap::value_parser!(u32).range(2..=3650))]
    days: u32,
    /// The last days of the series, never trained on, for `compare`.
    #[arg(long, default_value_t = 3, value_parser = clap::value_parser!(u32).range(1..=365))]
    test_days: u32,
    /// Mean requests per 5-minute bin before the ×20 scaling (synthetic load).
    #[arg(long, default_value_t = 1500.0, value_parser = positive_f64)]
    mean_count: f64,
    /// Replay the first series of a trace file (Azure per-minute or timestamp,count CSV).
    #[arg(long)]
    trace: Option<PathBuf>,
    /// Seed for the synthetic series, episode starts and measurement noise.
    #[arg(long, default_value_t = 1)]
    seed: u64,
}

impl LoadArgs {
    fn spec(&self) -> LoadSpec {
        LoadSpec {
            days: self.days,
            test_days: self.test_days,
            mean_count: self.mean_count,
            trace: self.trace.clone(),
            seed: self.seed,
        }
    }
}

#[derive(clap::ValueEnum, Clone, Copy, Debug, PartialEq, Eq)]
pub enum AlgorithmArg {
    /// Dueling Double DQN over the observation window through a 1-D convolution (the paper's).
    D3qn,
    Dqn,
    Ppo,
}

#[derive(clap::Args, Debug)]
pub struct TrainArgs {
    #[arg(long, value_enum, default_value = "d3qn")]
    algo: AlgorithmArg,
    #[command(flatten)]
    load: LoadArgs,
    /// Training episodes, one day each from a random start in the training days.
    #[arg(long, default_value_t = 100, value_parser = clap::value_parser!(u64).range(1..))]
    episodes: u64,
    /// Observations (5-minute steps) the agent sees at once.
    #[arg(long, default_value_t = 6, value_parser = clap::value_parser!(u32).range(1..=288))]
    window: u32,
    /// Directory for the checkpoint, learning curve and summary.
    #[arg(long)]
    out: PathBuf,
    /// Print JSON instead of a table.
    #[arg(long)]
    json: bool,
}

#[derive(clap::Args, Debug)]
pub struct CompareArgs {
    /// Comma-separated: threshold, rl:DIR (a checkpoint from `aware provision train`).
    #[arg(long, default_value = "threshold", value_delimiter = ',')]
    policies: Vec<ProvisionPolicyName>,
    #[command(flatten)]
    load: LoadArgs,
    /// Print JSON instead of a table.
    #[arg(long)]
    json: bool,
}

pub fn run(command: Provision) -> Result<ExitCode> {
    match command {
        Provision::Train(a) => train(a),
        Provision::Compare(a) => compare(a),
    }
}

fn train(args: TrainArgs) -> Result<ExitCode> {
    let spec = ProvisionTrainSpec {
        algorithm: match args.algo {
            AlgorithmArg::D3qn => ProvisionAlgorithm::D3qn,
            AlgorithmArg::Dqn => ProvisionAlgorithm::Dqn,
            AlgorithmArg::Ppo => ProvisionAlgorithm::Ppo,
        },
        load: args.load.spec(),
        episodes: args.episodes,
        window: args.window,
        out: args.out,
    };
    // A failed run leaves no directory behind that it created (one that existed stays).
    let report = aware_lab::output::removing_created_dir_on_failure(&spec.out, || {
        aware_lab::provision::train(&spec, &Bar::new())
    })?;
    if args.json {
        print_json(&report)?;
    } else {
        outln!(
            "{} (window {}) on {} training days, {} episodes: day reward {:.2} → {:.2} (last 10)",
            report.algorithm,
            report.window,
            report.training_days,
            report.episodes,
            report.first_episode_reward,
            report.last_10_episode_reward
        );
        outln!("checkpoint and learning curve in {}", report.checkpoint);
    }
    Ok(ExitCode::SUCCESS)
}

fn compare(args: CompareArgs) -> Result<ExitCode> {
    let report = aware_lab::provision::compare(&args.load.spec(), &args.policies, &Bar::new())?;
    if args.json {
        print_json(&report)?;
        return Ok(ExitCode::SUCCESS);
    }
    outln!(
        "{:.0} held-out days, instance capacity {:.1} req/s, ${:.2}/instance-hour",
        report.held_out_days,
        report.instance_capacity_rps,
        report.price_per_hour
    );
    outln!(
        "{:<28} {:>9} {:>8} {:>8} {:>10} {:>7} {:>10} {:>7} {:>8}",
        "policy",
        "reward",
        "cost $",
        "penalty",
        "penalised",
        "≥90%",
        "instances",
        "CPU %",
        "actions"
    );
    for o in &report.policies {
        outln!(
            "{:<28} {:>9.2} {:>8.2} {:>8.2} {:>10} {:>7} {:>10.2} {:>7.1} {:>8}",
            o.policy,
            o.reward,
            o.cost,
            o.penalty,
            o.penalised_steps,
            o.steps_at_90_pct,
            o.mean_instances,
            o.mean_cpu_pct,
            o.scaling_actions
        );
    }
    Ok(ExitCode::SUCCESS)
}
