use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::Result;
use aware_meta::MetaConfig;
use aware_meta::pool::PoolSpec;

use super::{AppsArgs, print_json};
use crate::progress::Bar;

#[derive(clap::Args, Debug)]
pub struct Args {
    /// AWARE profile (YAML): SLO override, targets, reward weights, bounds.
    #[arg(long)]
    profile: Option<PathBuf>,
    #[command(flatten)]
    apps: AppsArgs,
    /// Episodes the fallback probes every pool app (each app's embedding is read from them; the
    /// lifecycle reads a new app's from as many of its first episodes).
    #[arg(long, default_value_t = 3, value_parser = clap::value_parser!(u64).range(1..))]
    probes: u64,
    /// Episodes the conditioned base learner and the meta-learner then train on every pool app.
    #[arg(long, default_value_t = 60, value_parser = clap::value_parser!(u64).range(1..))]
    episodes: u64,
    /// Intervals per episode (`aware run`'s default is 100).
    #[arg(long, default_value_t = 100, value_parser = clap::value_parser!(u64).range(1..))]
    episode_steps: u64,
    /// Hidden width of the meta-learner's GRU layers and of its first FC layer (AWARE: 256).
    #[arg(long, default_value_t = 256, value_parser = clap::value_parser!(u64).range(1..=4096))]
    hidden: u64,
    /// Width of the workload embedding (AWARE: 64).
    #[arg(long, default_value_t = 64, value_parser = clap::value_parser!(u64).range(1..=1024))]
    embedding: u64,
    /// Weight of meta-training's auxiliary task beside the critic's gradient (the embedding
    /// predicts its trajectories' input signature); 0 trains on the critic's gradient alone.
    #[arg(long, default_value_t = aware_meta::train::MetaTrainConfig::default().signature_weight, value_parser = signature_weight)]
    signature_weight: f32,
    /// Where the meta-learner, the base learner and the pool's OOD detector are kept
    /// (`aware run --meta DIR` reads them).
    #[arg(long)]
    out: PathBuf,
    /// Print the summary as JSON.
    #[arg(long)]
    json: bool,
}

pub(crate) fn signature_weight(text: &str) -> Result<f32, String> {
    match text.parse::<f32>() {
        Ok(w) if (0.0..=1_000.0).contains(&w) => Ok(w),
        Ok(w) => Err(format!("{w} is not a weight from 0 to 1000")),
        Err(e) => Err(format!("{text:?} is not a number: {e}")),
    }
}

/// `aware train-meta`: meta-trains on a pool of generated apps and keeps the result.
pub fn run(args: Args) -> Result<ExitCode> {
    if args.apps.apps < 4 {
        anyhow::bail!(
            "--apps: {} pool apps; the out-of-distribution detector compares each with its 3 nearest others, so at least 4",
            args.apps.apps
        );
    }
    let workload = aware_lab::workload::Workload::load(&args.apps.spec(args.profile.clone(), args.episode_steps))?;
    let mut pool = PoolSpec::new(args.probes, args.episodes, args.episode_steps, args.apps.seed);
    pool.meta = MetaConfig {
        hidden: args.hidden as usize,
        fc: args.hidden as usize,
        embedding: args.embedding as usize,
        ..pool.meta
    };
    pool.train.signature_weight = args.signature_weight;
    let report = aware_meta::saved::train_and_keep(&workload, &pool, (3, 0.95), &args.out, &Bar::new())?;
    if args.json {
        print_json(&report)?;
    } else {
        outln!(
            "meta-trained on {} apps ({} probe + {} training episodes of {} intervals) in {:.0} s: last episode's reward per app {:.2}, {} meta-learner steps",
            report.pool_apps,
            report.probes,
            report.episodes,
            report.episode_steps,
            report.seconds,
            report.final_episode_reward,
            report.meta_steps
        );
        outln!(
            "OOD threshold {:.3}; kept in {} (`aware run --meta {} --store URL`)",
            report.ood_threshold,
            report.path,
            report.path
        );
    }
    Ok(ExitCode::SUCCESS)
}
