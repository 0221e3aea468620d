use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::Result;
use aware_meta::MetaConfig;
use aware_meta::pool::PoolSpec;

use super::{AppsArgs, MetaTaskArgs, parse_learner, print_json};
use crate::progress::Bar;
use aware_lab::agent::Learner;

#[derive(clap::Args, Debug)]
pub struct Args {
    /// AWARE profile (YAML): SLO override, targets, reward weights, bounds.
    #[arg(long)]
    profile: Option<PathBuf>,
    #[command(flatten)]
    apps: AppsArgs,
    /// Episodes the fallback probes every pool app (each app's embedding is read from them; the
    /// lifecycle reads a new app's from as many of its first episodes).
    #[arg(long, default_value_t = 3, value_parser = clap::value_parser!(u64).range(1..=1_000))]
    probes: u64,
    /// Episodes the conditioned base learner and the meta-learner then train on every pool app.
    #[arg(long, default_value_t = 60, value_parser = clap::value_parser!(u64).range(1..=1_000_000))]
    episodes: u64,
    /// Intervals per episode (`aware run`'s default is 100).
    #[arg(long, default_value_t = 100, value_parser = clap::value_parser!(u64).range(1..=100_000))]
    episode_steps: u64,
    /// Hidden width of the meta-learner's GRU layers and of its first FC layer (AWARE: 256).
    #[arg(long, default_value_t = 256, value_parser = clap::value_parser!(u64).range(1..=4096))]
    hidden: u64,
    /// Width of the workload embedding (default: the variant's, AWARE 64, FLASH 32).
    #[arg(long, value_parser = clap::value_parser!(u64).range(1..=1024))]
    embedding: Option<u64>,
    #[command(flatten)]
    task: MetaTaskArgs,
    /// The shared base learner: ddpg (the paper's: TD3 with TD3+BC's behaviour term and the
    /// pre-activation penalty) or ppo (behaviour-clones the probes, then learns on-policy; the
    /// base learner `aware experiment fig8` measures by default). `aware run --meta DIR` runs
    /// whichever DIR holds.
    #[arg(long, default_value = "ddpg", value_parser = parse_learner)]
    base_learner: Learner,
    /// Where the meta-learner, the base learner and the pool's OOD detector are kept
    /// (`aware run --meta DIR` reads them). While a run lasts it keeps its training state
    /// there too (`DIR/training/`, after every episode past the probes; removed at the end).
    #[arg(long)]
    out: PathBuf,
    /// Go on from the training state an interrupted run of this same command kept in `--out`
    /// (either base learner): the run ends as the uninterrupted one would have.
    #[arg(long)]
    resume: bool,
    /// Print the summary as JSON.
    #[arg(long)]
    json: bool,
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
        embedding: args.embedding.map_or(args.task.meta_variant.config().embedding, |e| e as usize),
        ..pool.meta
    };
    args.task.apply(&mut pool);
    // A failed run leaves no directory behind that it created (one that existed stays), unless
    // it kept a training state there to go on from.
    let training = [aware_meta::saved::TRAINING];
    let result = aware_lab::output::removing_created_dir_on_failure_keeping(&args.out, &training, || {
        let detector = (3, 0.95);
        let (out, base) = (&args.out, args.base_learner);
        aware_meta::saved::train_and_keep_resumable(&workload, &pool, base, detector, out, &Bar::new(), args.resume)
    });
    let kept = args.out.join(aware_meta::saved::TRAINING);
    let report = result.map_err(|e| {
        let said = e.to_string();
        // A run that failed after keeping its training state says where it is and how to go on
        // (not one refused because another process is at work on that state).
        let busy = matches!(e, aware_meta::MetaError::Lab(aware_lab::LabError::Busy { .. }));
        if kept.exists() && !busy && !said.contains("--resume") {
            anyhow::anyhow!(
                "{said} (its training state is kept in {}: the same command with --resume goes on from it)",
                kept.display()
            )
        } else {
            anyhow::Error::from(e)
        }
    })?;
    if args.json {
        print_json(&report)?;
    } else {
        outln!(
            "meta-trained a {} base learner on {} apps ({} probe + {} training episodes of {} intervals) in {:.0} s: last episode's reward per app {:.2}, {} meta-learner steps",
            report.base_learner.name(),
            report.pool_apps,
            report.probes,
            report.episodes,
            report.episode_steps,
            report.seconds,
            report.final_episode_reward,
            report.meta_steps
        );
        outln!(
            "OOD thresholds: input signature {:.3}, persistence {:.3} (embedding distance {:.3}); kept in {} (`aware run --meta {} --store URL`)",
            report.ood_signature_threshold,
            report.ood_persistence_threshold,
            report.ood_threshold,
            report.path,
            report.path
        );
    }
    Ok(ExitCode::SUCCESS)
}
