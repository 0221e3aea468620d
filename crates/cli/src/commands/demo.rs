use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::Result;
use aware_lifecycle::Learner;
use aware_lifecycle::demo::DemoSpec;
use aware_sim::Scenario;

use super::{parse_learner, print_json};
use crate::progress::Bar;

#[derive(clap::Args, Debug)]
pub struct Args {
    /// Report directory (created if missing; a non-empty one needs --force).
    #[arg(long, default_value = "aware-demo")]
    out: PathBuf,
    /// Write into a non-empty --out (the demo's own files there are replaced).
    #[arg(long)]
    force: bool,
    /// Seed for applications, traffic and the agent.
    #[arg(long, default_value_t = 1)]
    seed: u64,
    /// Number of applications.
    #[arg(long, default_value_t = DemoSpec::default().apps as u32, value_parser = clap::value_parser!(u32).range(1..=1000))]
    apps: u32,
    /// Control intervals (15 s each), rounded up to whole episodes.
    #[arg(long, default_value_t = DemoSpec::default().steps, value_parser = clap::value_parser!(u64).range(1..))]
    steps: u64,
    /// Intervals per episode.
    #[arg(long, default_value_t = DemoSpec::default().episode_steps, value_parser = clap::value_parser!(u64).range(1..))]
    episode_steps: u64,
    /// The workload change: NAME or NAME@STEP (default step: the episode half way).
    #[arg(long, default_value = "load-high-to-low")]
    change: Scenario,
    /// Episodes whose rewards must settle before an app serves.
    #[arg(long, default_value_t = DemoSpec::default().reward_window, value_parser = clap::value_parser!(u32).range(1..))]
    reward_window: u32,
    /// The learning agent: ddpg (AWARE's; TD3+BC learns offline from the fallback) or ppo
    /// (behaviour-clones the fallback offline, learns on-policy where it learns online).
    #[arg(long, default_value = "ddpg", value_parser = parse_learner)]
    agent: Learner,
    /// Print report.json on stdout instead of a table.
    #[arg(long)]
    json: bool,
}

pub fn run(args: Args) -> Result<ExitCode> {
    let spec = DemoSpec {
        out: args.out,
        force: args.force,
        seed: args.seed,
        apps: args.apps as usize,
        steps: args.steps,
        episode_steps: args.episode_steps,
        change: args.change,
        reward_window: args.reward_window,
        agent: args.agent,
    };
    let report = aware_lifecycle::demo::demo(&spec, &Bar::new())?;
    for dir in &report.interrupted {
        eprintln!("note: {}", aware_lifecycle::demo::interrupted_note(dir));
    }
    if args.json {
        print_json(&report)?;
        return Ok(ExitCode::SUCCESS);
    }
    outln!(
        "{} apps × {} intervals (episodes of {}), seed {}; workload change `{}` at interval {}",
        report.apps,
        report.steps,
        report.episode_steps,
        report.seed,
        report.change,
        report.change_step
    );
    super::print_rows(&report.policies);
    let serving: Vec<&str> = report.per_app.iter().filter(|a| a.reached_serving).map(|a| a.app.as_str()).collect();
    outln!("stage changes: {}; apps that reached serving: {}", report.stages.len(), serving.len());
    outln!("report: {}", report.out.join("report.md").display());
    Ok(ExitCode::SUCCESS)
}
