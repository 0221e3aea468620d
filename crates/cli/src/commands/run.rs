use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::Result;
use aware_lab::workload::WorkloadSpec;
use aware_lifecycle::manager::ManagerConfig;
use aware_lifecycle::metrics::LifecycleMetrics;
use aware_lifecycle::run::{RunSpec, RunStore};
use aware_lifecycle::{Learner, Stage};
use aware_sim::Scenario;

use super::{AppsArgs, parse_learner, print_json};
use crate::policy::PolicyName;
use crate::progress::Bar;

#[derive(clap::ValueEnum, Clone, Copy, Debug)]
enum Backend {
    /// The embedded cluster simulator.
    Sim,
}

#[derive(clap::Args, Debug)]
pub struct Args {
    /// AWARE profile (YAML): lifecycle thresholds, bootstrapping, SLO, targets, reward, bounds.
    #[arg(long)]
    profile: Option<PathBuf>,
    /// Where the managed applications run.
    #[arg(long, value_enum, default_value = "sim")]
    backend: Backend,
    #[command(flatten)]
    apps: AppsArgs,
    /// Control intervals to run (15 s each), rounded up to whole episodes.
    #[arg(long, default_value_t = 3000, value_parser = clap::value_parser!(u64).range(1..))]
    steps: u64,
    /// Intervals per episode: the lifecycle's decisions happen at episode ends.
    #[arg(long, default_value_t = 100, value_parser = clap::value_parser!(u64).range(1..))]
    episode_steps: u64,
    /// The rule-based autoscaler that bootstraps the agent and stands in for it.
    #[arg(long, default_value = "mpa")]
    fallback: PolicyName,
    /// Keep the fallback acting while the agent (re)trains; the agent acts only when serving
    /// (the profile's `high_stakes: true` does the same).
    #[arg(long)]
    high_stakes: bool,
    /// The learning agent: ddpg (AWARE's; TD3+BC learns offline from the fallback) or ppo
    /// (behaviour-clones the fallback). Default: the one a --meta DIR keeps, else ddpg. A
    /// --checkpoint or --meta DIR that keeps the other algorithm is refused.
    #[arg(long, value_parser = parse_learner)]
    agent: Option<Learner>,
    /// Inject an instability scenario: NAME or NAME@STEP (default step: half way).
    #[arg(long)]
    scenario: Option<Scenario>,
    /// Record every episode, stage change and decision here (sqlite:PATH, postgres://…,
    /// influxdb://…); `aware explain --store URL` reads it back.
    #[arg(long)]
    store: Option<String>,
    /// Where writes wait on disk while the store is unreachable (default: PATH.spool/ beside a
    /// SQLite file, ./aware-spool/ for a server). Flushed, in order, when the store returns.
    #[arg(long, requires = "store")]
    spool: Option<PathBuf>,
    /// Serve the lifecycle's Prometheus metrics on http://ADDR/metrics while the run lasts
    /// (stage per app, stage changes, who acted, guard verdicts; updated every episode).
    #[arg(long, value_name = "ADDR")]
    metrics_listen: Option<String>,
    /// Keep the agent and every app's stage here between runs: taken up at the start when its
    /// checksums verify (otherwise moved to DIR/rejected-N/ and every app starts over, the
    /// fallback serving), written after every episode.
    #[arg(long, value_name = "DIR")]
    checkpoint: Option<PathBuf>,
    /// Run with AWARE's meta-learner kept in DIR (`aware train-meta --out DIR`): its base
    /// learner, conditioned on each app's workload embedding, is the agent. An app's embedding
    /// is read from the episodes the fallback drove (its first ones, in bootstrapping); until
    /// it has one, and while its workload is unlike the training pool's, the fallback serves it
    /// and the decision log says why. Needs --store.
    #[arg(long, value_name = "DIR", requires = "store")]
    meta: Option<PathBuf>,
    /// Print JSON instead of a table.
    #[arg(long)]
    json: bool,
}

pub fn run(args: Args) -> Result<ExitCode> {
    let Backend::Sim = args.backend;
    // Whole episodes of traffic, bounded (a plan beyond the lifecycle's maximum is refused).
    let (_, traffic) = aware_lifecycle::run::plan_size(args.steps, args.episode_steps)?;
    let spec = RunSpec {
        workload: WorkloadSpec { scenario: args.scenario, ..args.apps.spec(args.profile.clone(), traffic) },
        steps: args.steps,
        manager: ManagerConfig {
            episode_steps: args.episode_steps,
            // The flag turns it on; without it the profile's `high_stakes` decides.
            high_stakes: args.high_stakes.then_some(true),
            fallback: args.fallback.clone(),
            agent: match (args.agent, &args.meta) {
                (Some(agent), _) => agent,
                (None, Some(dir)) => aware_meta::saved::Trained::kept_learner(dir)?,
                (None, None) => Learner::Ddpg,
            },
            ..ManagerConfig::default()
        },
        seed: args.apps.seed,
        store: args.store.clone().map(|url| RunStore { url, spool: args.spool.clone() }),
        metrics: args.metrics_listen.as_ref().map(|_| LifecycleMetrics::default()),
        checkpoint: args.checkpoint.clone(),
    };
    let mut bar = Bar::logging();
    let _server = match (&args.metrics_listen, &spec.metrics) {
        (Some(addr), Some(metrics)) => {
            let metrics = metrics.clone();
            let server = aware_kube::http::serve_metrics_in_background(addr, move || metrics.encode())
                .map_err(|e| anyhow::anyhow!("--metrics-listen: {e}"))?;
            // Said once the run begins: a run refused on its input says only why.
            bar = bar.with_notice(format!("serving the lifecycle's metrics on http://{}/metrics", server.addr));
            Some(server)
        }
        _ => None,
    };
    let report = match &args.meta {
        None => aware_lifecycle::run::run(&spec, &bar)?,
        Some(dir) => aware_experiments::lifecycle::run_with_meta(&spec, dir, &bar)?,
    };
    if args.json {
        print_json(&report)?;
        return Ok(ExitCode::SUCCESS);
    }
    outln!(
        "{} apps × {} steps (episodes of {}), seed {}; fallback {}",
        report.apps,
        report.steps,
        report.episode_steps,
        report.seed,
        report.fallback
    );
    super::print_rows(&report.policies);
    outln!("stage changes:");
    for c in &report.stages {
        outln!("  step {:>6}  {:<40} {:>8} → {:<8} {}", c.step, c.app, c.from.name(), c.to.name(), c.reason);
    }
    outln!("{:<40} {:>8} {:>8} {:>9} {:>7} {:>7}", "app", "stage", "agent", "fallback", "guard", "limited");
    for a in &report.per_app {
        let c = &a.counts;
        outln!(
            "{:<40} {:>8} {:>8} {:>9} {:>7} {:>7}",
            a.app,
            a.stage.name(),
            c.agent_actions,
            c.fallback_actions,
            c.guard_fallbacks,
            c.guard_limited
        );
        if a.retraining {
            outln!("    retraining: its rewards degraded in serving");
        }
        if let Some(v) = &c.workload_verdict {
            outln!("    meta-learner: {v} ({} intervals held for the fallback)", c.workload_holds);
        }
        if a.stage == Stage::Offline {
            outln!("    last bootstrapping check: {}", c.last_check.as_deref().unwrap_or("none yet"));
        }
    }
    if let Some(s) = &report.store {
        outln!("recorded into {} (`aware explain --store {} --app APP`)", s.url, s.url);
        if let Some(why) = &s.unreachable_at_start {
            outln!("the store did not answer when the run started: {why}");
        }
        if s.pending > 0 {
            outln!("{} writes still wait in the spool {} (the store was unreachable at the end)", s.pending, s.spool);
        }
        if s.refused > 0 {
            outln!(
                "{} records were not kept: {} (the apps stayed served)",
                s.refused,
                s.refused_reason.as_deref().unwrap_or("the spool was full")
            );
        }
        if s.set_aside > 0 {
            outln!(
                "{} spooled writes that can never be applied (refused by the store, or naming an episode the spool never began) are kept in {}/rejected.jsonl",
                s.set_aside,
                s.spool
            );
        }
    }
    if let Some(c) = &report.checkpoint {
        if c.restored {
            outln!("checkpoint {}: restored the agent and the apps' stages", c.path);
        }
        if let (Some(why), Some(to)) = (&c.rejected, &c.set_aside) {
            outln!("checkpoint {}: not used ({why}); moved to {to}; every app started over", c.path);
        }
        outln!("checkpoint {}: written after {} episodes", c.path, c.saved);
        if let Some(e) = &c.last_save_error {
            outln!("checkpoint {}: {} writes failed, the last: {e}", c.path, c.save_failures);
        }
    }
    Ok(ExitCode::SUCCESS)
}
