//! `aware experiment`: the heavier, end-to-end checks of the project's claims, each with a
//! `--quick` size that CI runs once.

use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::Result;
use aware_experiments::agents::{AgentsConfig, Size};
use aware_experiments::lifecycle::{LifecycleConfig, Which};
use aware_lifecycle::Learner;

use super::{parse_learner, print_json};
use crate::progress::Bar;

#[derive(clap::Subcommand, Debug)]
pub enum Experiment {
    /// DDPG and PPO, trained on one simulated application with diurnal load, against the MPA
    /// default on held-out traces of the same application (exit 1 when an agent did not learn:
    /// its late training reward is not above its early one; beating MPA is reported, not gated).
    Agents(AgentsArgs),
    /// DDPG on Pendulum-v1, DQN and PPO on CartPole-v1 (Gymnasium's dynamics): the agents where
    /// every RL practitioner knows the answer. Exits 0 whenever training completes; the levels are
    /// judged from `results`.
    Classic(ClassicArgs),
    /// AWARE Table 3: RL without bootstrapping early in training — utilisation deficit and SLO
    /// violations in four segments of its episodes, beside the MPA default and AWARE. Exits 0
    /// when the run completes, whatever it shows.
    Table3(LifecycleArgs),
    /// AWARE Figure 9: the seven instability scenarios 5/8 of the way through; AWARE vs no-retrain vs
    /// the MPA default vs converged, from the scenario to the end. Exits 0 when it completes.
    Fig9(LifecycleArgs),
    /// AWARE Figure 10: bootstrapping; AWARE vs no-bootstrap vs the MPA default vs converged,
    /// from the first interval to the end. Exits 0 when it completes.
    Fig10(LifecycleArgs),
    /// AWARE Figure 6: workload embeddings of a meta-trained pool; mean cosine similarity of app
    /// pairs alike in resource sensitivity and load pattern against pairs unlike in both, and a
    /// 2-D projection plot. Exits 0 when it completes.
    Fig6(Fig6Args),
    /// AWARE Figure 8: episodes to adapt to unseen apps — AWARE (meta-trained shared policy)
    /// vs TL vs TL+ vs training from scratch, with each row's utilisation deficit, SLO
    /// violations and core-seconds over the same adaptation window. Exits 0 when it completes.
    Fig8(Fig8Args),
    /// Out-of-distribution detection: a meta-learner trained on one population (microservices)
    /// embeds new apps of it and apps of a population it never saw (serverless); the share of
    /// each the detector flags. Exits 0 when it completes.
    Ood(OodArgs),
    /// SIMPPO: many PPO agents on one shared cluster — S-RL trained alone (the reference) and
    /// together, SIMPPO and SIMPPO-All trained in the shared cluster, and MPA, on the same
    /// held-out traces; incremental training (agents added and removed) with and without
    /// parameter sharing; policy compute and memory per agent at 10, 100 and 1,000 agents.
    /// Exits 0 when it completes, whatever it shows.
    Simppo(SimppoArgs),
}

#[derive(clap::Args, Debug)]
pub struct OodArgs {
    /// A smaller run (minutes): 64 pool apps, 20 unseen apps per set, a smaller meta-learner.
    #[arg(long)]
    quick: bool,
    /// Seeds the pool, the unseen apps, their traffic and every learner.
    #[arg(long, default_value_t = 1)]
    seed: u64,
    /// The population left out of meta-training (the other one trains).
    #[arg(long, default_value = "serverless")]
    excluded: aware_core::Population,
    #[command(flatten)]
    task: super::MetaTaskArgs,
    /// Print JSON instead of a table.
    #[arg(long)]
    json: bool,
}

fn ood(args: OodArgs) -> Result<ExitCode> {
    use aware_core::Population;
    use aware_experiments::ood::{OodConfig, ood};
    use aware_lab::progress::Progress;
    let excluded = args.excluded;
    let mut config = if args.quick { OodConfig::quick(args.seed) } else { OodConfig::full(args.seed) };
    config.excluded = excluded;
    args.task.apply(&mut config.pool);
    config.trained = Population::ALL.into_iter().find(|p| *p != excluded).expect("two populations, one excluded");
    let bar = Bar::new();
    let report = ood(&config, &bar)?;
    bar.finish();
    if args.json {
        print_json(&report)?;
        return Ok(ExitCode::SUCCESS);
    }
    outln!(
        "ood: meta-trained on {} {} apps ({} meta-learner steps in {:.0} s), seed {}; k {}; thresholds on the pool's leave-one-out scores: input signature {:.3} (Tukey's far-out fence), persistence {:.3} (the {:.0}th percentile, at least 1), embedding distance {:.4} (the {:.0}th percentile, alone)",
        report.pool_apps,
        report.trained_population,
        report.meta_steps,
        report.training_seconds,
        report.seed,
        report.k,
        report.signature_threshold,
        report.persistence_threshold,
        report.quantile * 100.0,
        report.threshold,
        report.quantile * 100.0
    );
    outln!(
        "flagged: {:.0} % of {} unseen {} apps (out of family), {:.0} % of {} unseen {} apps (in family)",
        report.out_of_family_flagged * 100.0,
        report.unseen_apps,
        report.excluded_population,
        report.in_family_flagged * 100.0,
        report.unseen_apps,
        report.trained_population
    );
    outln!(
        "by the embedding's distance alone: {:.0} % out of family, {:.0} % in family",
        report.out_of_family_flagged_by_embedding * 100.0,
        report.in_family_flagged_by_embedding * 100.0
    );
    if report.zero_embeddings > 0 {
        outln!("{} apps left without an embedding (scored as the zero vector)", report.zero_embeddings);
    }
    Ok(ExitCode::SUCCESS)
}

#[derive(clap::Args, Debug)]
pub struct SimppoArgs {
    /// A smaller run (≤ 30 minutes on 2 cores): 300 training episodes per row, 600 incremental
    /// episodes, 3 training episodes per scale row.
    #[arg(long)]
    quick: bool,
    /// Seeds the applications, their traffic and every agent.
    #[arg(long, default_value_t = 1)]
    seed: u64,
    /// Applications sharing the cluster (default 12).
    #[arg(long, value_parser = clap::value_parser!(u64).range(2..=1_000))]
    apps: Option<u64>,
    /// Shared cluster capacity over the applications' reference reservation (default 1.25).
    #[arg(long)]
    headroom: Option<f64>,
    /// CPU request over CPU limit of every pod in the shared cluster, in (0, 1]: 1 is the
    /// Guaranteed QoS class (request = limit), below 1 Burstable pods that may use idle CPU
    /// their requests do not reserve, where tenants interfere (default 0.5).
    #[arg(long)]
    request_ratio: Option<f64>,
    /// Write the incremental-training plot (team reward per episode, with and without
    /// parameter sharing, agents joining and leaving marked) here, a PNG.
    #[arg(long)]
    plot: Option<PathBuf>,
    /// Print JSON instead of a table.
    #[arg(long)]
    json: bool,
}

fn simppo(args: SimppoArgs) -> Result<ExitCode> {
    use aware_experiments::simppo::{SimppoConfig, simppo};
    use aware_lab::progress::Progress;
    let mut config = if args.quick { SimppoConfig::quick(args.seed) } else { SimppoConfig::full(args.seed) };
    if let Some(n) = args.apps {
        config.apps = n as usize;
    }
    if let Some(h) = args.headroom {
        config.headroom = h;
    }
    if let Some(r) = args.request_ratio {
        config.request_ratio = r;
    }
    config.plot = args.plot;
    let bar = Bar::new();
    let report = simppo(&config, &bar)?;
    bar.finish();
    if args.json {
        print_json(&report)?;
        return Ok(ExitCode::SUCCESS);
    }
    outln!(
        "simppo: {} apps on {} nodes (CPU requests {} × limits), seed {}; {} training and {} held-out episodes of {} intervals",
        report.apps,
        report.nodes,
        report.request_ratio,
        report.seed,
        report.train_episodes,
        report.eval_episodes,
        report.episode_steps
    );
    outln!(
        "{:<20} {:>10} {:>12} {:>10} {:>14} {:>10}",
        "policy",
        "p99 ms",
        "degradation",
        "SLO viol.",
        "core-s",
        "reward"
    );
    for p in &report.policies {
        let s = &p.row.summary;
        outln!(
            "{:<20} {:>10} {:>12} {:>10} {:>14.0} {:>10.3}",
            p.row.policy,
            s.p99_latency_ms.map_or("-".into(), |v| format!("{v:.0}")),
            p.degradation.map_or("-".into(), |d| format!("{:+.1}%", d * 100.0)),
            s.slo_violations,
            s.core_seconds,
            s.mean_reward
        );
    }
    outln!("simppo beats mpa: {}", report.simppo_beats_mpa);
    if let Some(p) = &report.plot {
        outln!("plot: {p}");
    }
    for r in &report.incremental {
        outln!(
            "incremental {:<6} at {:>4} ({} → {} agents), sharing {:<5}: drop {:+.1}%, {} episodes to re-converge{}",
            r.change,
            r.at_episode,
            r.agents_before,
            r.agents_after,
            r.parameter_sharing,
            r.drop_fraction * 100.0,
            r.episodes_to_reconverge,
            if r.censored { " (censored)" } else { "" }
        );
    }
    for r in &report.scale {
        outln!(
            "scale {:>5} agents: {:.1} µs policy per agent-step, {:.0} bytes per agent, team reward {:.3}",
            r.agents,
            r.policy_us_per_agent_step,
            r.memory_bytes_per_agent,
            r.team_reward
        );
    }
    Ok(ExitCode::SUCCESS)
}

#[derive(clap::Args, Debug)]
pub struct Fig8Args {
    /// A smaller run (minutes): 32 pool apps, 4 unseen, a smaller meta-learner, 40 episodes.
    #[arg(long)]
    quick: bool,
    /// Seeds the pool, the unseen apps, their traffic and every learner.
    #[arg(long, default_value_t = 1)]
    seed: u64,
    /// Unseen applications (default 4 quick, 8 full).
    #[arg(long, value_parser = clap::value_parser!(u64).range(1..=1_000))]
    apps: Option<u64>,
    /// AWARE's shared base learner: ppo (behaviour-clones the fallback's probes, then learns
    /// on-policy, anchored to a new app's probes while it adapts) or ddpg (the paper's; TL,
    /// TL+ and scratch always are)
    #[arg(long, default_value = "ppo", value_parser = parse_learner)]
    base_learner: Learner,
    #[command(flatten)]
    task: super::MetaTaskArgs,
    /// Print JSON instead of a table.
    #[arg(long)]
    json: bool,
}

fn fig8(args: Fig8Args) -> Result<ExitCode> {
    use aware_experiments::fig8::{Fig8Config, fig8};
    use aware_lab::progress::Progress;
    let mut config = if args.quick { Fig8Config::quick(args.seed) } else { Fig8Config::full(args.seed) };
    args.task.apply(&mut config.pool);
    if let Some(n) = args.apps {
        config.unseen_apps = n as usize;
    }
    config.base_learner = args.base_learner;
    let bar = Bar::new();
    let report = fig8(&config, &bar)?;
    bar.finish();
    if args.json {
        print_json(&report)?;
        return Ok(ExitCode::SUCCESS);
    }
    outln!(
        "fig8: {} unseen apps after a pool of {}, seed {}; window B = {} episodes of {} intervals ({} probes for aware, base learner {})",
        report.unseen_apps,
        report.pool_apps,
        report.seed,
        report.budget,
        report.episode_steps,
        report.probes,
        report.base_learner.name()
    );
    outln!(
        "{:<8} {:>9} {:>9} {:>11} {:>11} {:>12} {:>9} {:>8}",
        "policy",
        "episodes",
        "censored",
        "util.def.",
        "SLO viol.",
        "core-s",
        "dropped",
        "cpu s"
    );
    for p in &report.policies {
        let s = &p.row.summary;
        outln!(
            "{:<8} {:>9.1} {:>9} {:>11.3} {:>11} {:>12.0} {:>9.0} {:>8}",
            p.row.policy,
            p.episodes_to_convergence,
            format!("{}/{}", p.censored_apps, report.unseen_apps),
            s.utilisation_deficit,
            s.slo_violations,
            s.core_seconds,
            s.dropped_requests,
            p.cpu_seconds.map_or("-".into(), |c| format!("{c:.0}"))
        );
    }
    outln!("tl / aware episodes to convergence: {:.2}", report.tl_over_aware);
    Ok(ExitCode::SUCCESS)
}

#[derive(clap::Args, Debug)]
pub struct Fig6Args {
    /// A smaller run (minutes): 16 apps, a smaller meta-learner, fewer episodes.
    #[arg(long)]
    quick: bool,
    /// Seeds the applications, their traffic, the meta-learner and the base learner.
    #[arg(long, default_value_t = 1)]
    seed: u64,
    /// Applications in the pool (default 16 quick, 48 full).
    #[arg(long, value_parser = clap::value_parser!(u64).range(2..=10_000))]
    apps: Option<u64>,
    /// Write the projection plot (PNG) here.
    #[arg(long)]
    plot: Option<PathBuf>,
    #[command(flatten)]
    task: super::MetaTaskArgs,
    /// Print JSON instead of a table.
    #[arg(long)]
    json: bool,
}

fn fig6(args: Fig6Args) -> Result<ExitCode> {
    use aware_experiments::meta::{Fig6Config, PairSet, fig6};
    use aware_lab::progress::Progress;
    let mut config = if args.quick { Fig6Config::quick(args.seed) } else { Fig6Config::full(args.seed) };
    args.task.apply(&mut config.pool);
    if let Some(n) = args.apps {
        config.apps = n as usize;
    }
    config.plot = args.plot;
    let bar = Bar::new();
    let report = fig6(&config, &bar)?;
    bar.finish();
    if args.json {
        print_json(&report)?;
        return Ok(ExitCode::SUCCESS);
    }
    outln!(
        "fig6: {} apps, {}-d embeddings, {} meta-learner steps in {:.0} s, seed {}",
        report.apps.len(),
        report.embedding,
        report.meta_steps,
        report.training_seconds,
        report.seed
    );
    let show = |label: &str, p: &PairSet| match p.mean_cosine {
        Some(c) => outln!("{label:<34} {:>6} pairs   mean cosine {c:.3}", p.pairs),
        None => outln!("{label:<34} {:>6} pairs", p.pairs),
    };
    show("alike in sensitivity and pattern", &report.within_group);
    show("unlike in both", &report.across_group);
    show("same resource sensitivity", &report.same_sensitivity);
    show("different resource sensitivity", &report.different_sensitivity);
    show("same load pattern", &report.same_pattern);
    show("different load pattern", &report.different_pattern);
    for t in &report.tracks {
        let r = |v: Option<f64>| v.map_or("-".to_string(), |v| format!("{v:+.2}"));
        outln!("{:<34} corr. with PC 1 {:>6}   PC 2 {:>6}", t.property, r(t.pc1), r(t.pc2));
    }
    if report.zero_embeddings > 0 {
        outln!("{} pairs left out: an all-zero embedding has no direction", report.zero_embeddings);
    }
    if let Some(p) = &report.plot {
        outln!("plot: {p}");
    }
    Ok(ExitCode::SUCCESS)
}

#[derive(clap::Args, Debug)]
pub struct LifecycleArgs {
    /// A smaller run (minutes): fewer apps and episodes, a shorter converged training.
    #[arg(long)]
    quick: bool,
    /// Seeds the applications, their traffic and the agents.
    #[arg(long, default_value_t = 1)]
    seed: u64,
    /// Applications (default 4 quick, 8 full).
    #[arg(long, value_parser = clap::value_parser!(u64).range(1..=1_000))]
    apps: Option<u64>,
    /// Episodes per policy (default: table3/fig10 20 quick, 60 full; fig9 24 quick, 64 full).
    #[arg(long, value_parser = clap::value_parser!(u64).range(2..))]
    episodes: Option<u64>,
    /// Intervals (15 s) per episode.
    #[arg(long, default_value_t = 100, value_parser = clap::value_parser!(u64).range(1..))]
    episode_steps: u64,
    /// AWARE profile (YAML).
    #[arg(long)]
    profile: Option<PathBuf>,
    /// Episodes SERVING's stability test looks at (default: 5 quick, the profile's otherwise).
    #[arg(long, value_parser = clap::value_parser!(u32).range(1..))]
    reward_window: Option<u32>,
    /// The learning agent of every learned row (aware, no-bootstrap, no-retrain, converged):
    /// ddpg (AWARE's; TD3+BC learns offline from the fallback) or ppo (behaviour-clones the
    /// fallback offline, learns on-policy where it learns online).
    #[arg(long, default_value = "ddpg", value_parser = parse_learner)]
    agent: Learner,
    /// Print JSON instead of a table.
    #[arg(long)]
    json: bool,
}

#[derive(clap::Args, Debug)]
pub struct ClassicArgs {
    /// Every seed of the run derives from this one.
    #[arg(long, default_value_t = 1)]
    seed: u64,
    /// A smoke-sized run (fewer steps, smaller networks; it need not reach the levels).
    #[arg(long)]
    quick: bool,
    /// Print JSON instead of a table.
    #[arg(long)]
    json: bool,
}

#[derive(clap::Args, Debug)]
pub struct AgentsArgs {
    /// A smaller run for CI: fewer training episodes and held-out traces.
    #[arg(long)]
    quick: bool,
    /// Where the trained checkpoints go (default: a new directory under the system temp dir).
    #[arg(long)]
    out: Option<PathBuf>,
    /// Print JSON instead of a table.
    #[arg(long)]
    json: bool,
}

pub fn run(experiment: Experiment) -> Result<ExitCode> {
    match experiment {
        Experiment::Agents(a) => agents(a),
        Experiment::Classic(a) => classic(a),
        Experiment::Table3(a) => lifecycle(Which::Table3, a),
        Experiment::Fig9(a) => lifecycle(Which::Fig9, a),
        Experiment::Fig10(a) => lifecycle(Which::Fig10, a),
        Experiment::Fig6(a) => fig6(a),
        Experiment::Fig8(a) => fig8(a),
        Experiment::Ood(a) => ood(a),
        Experiment::Simppo(a) => simppo(a),
    }
}

fn classic(args: ClassicArgs) -> Result<ExitCode> {
    use aware_experiments::classic::{self, ClassicConfig, ClassicProgress};
    use aware_lab::progress::Progress;
    let config = if args.quick { ClassicConfig::quick(args.seed) } else { ClassicConfig::full(args.seed) };
    let bar = Bar::new();
    let phase = std::sync::Mutex::new((String::new(), 0u64));
    let report = classic::run(&config, &|p| {
        if let ClassicProgress::Episode { algorithm, task, step, total, .. } = p {
            let name = format!("{algorithm} {task}");
            let mut phase = phase.lock().unwrap_or_else(|e| e.into_inner());
            if phase.0 != name {
                bar.start(*total, &name);
                *phase = (name, 0);
            }
            bar.inc(step.saturating_sub(phase.1));
            phase.1 = *step;
        }
    })?;
    bar.finish();
    if args.json {
        print_json(&report)?;
        return Ok(ExitCode::SUCCESS);
    }
    outln!(
        "{:<6} {:<9} {:>7} {:>12} {:>10} {:>10} {:>8}",
        "algo",
        "task",
        "steps",
        "mean_return",
        "untrained",
        "level",
        "wall_s"
    );
    for (row, d) in report.results.iter().zip(&report.details) {
        outln!(
            "{:<6} {:<9} {:>7} {:>12.1} {:>10.1} {:>10.1} {:>8.1}",
            row.algorithm,
            row.task,
            row.steps,
            row.mean_return,
            d.untrained_return,
            d.level,
            d.wall_s
        );
    }
    outln!("seed {}, {:.0} s in all", report.seed, report.wall_s);
    Ok(ExitCode::SUCCESS)
}

fn agents(args: AgentsArgs) -> Result<ExitCode> {
    let config = AgentsConfig { size: if args.quick { Size::Quick } else { Size::Full }, out: args.out.clone() };
    let work = || aware_experiments::agents::run(&config, &Bar::new());
    // A run that fails removes the --out it made, unless an agent was trained and kept there
    // (DDPG's, before PPO's failed): minutes of training are not thrown away.
    let report = match &args.out {
        Some(out) => {
            let kept = ["ddpg", "ppo"].map(|a| format!("{a}/{}", aware_agents::METADATA));
            let kept: Vec<&str> = kept.iter().map(String::as_str).collect();
            aware_lab::output::removing_created_dir_on_failure_keeping(out, &kept, work)?
        }
        None => work()?,
    };
    let code = if report.passed { ExitCode::SUCCESS } else { ExitCode::from(1) };
    if args.json {
        print_json(&report)?;
        return Ok(code);
    }
    outln!(
        "app 0 of seed {}, {} s day, {}-step episodes from random starts, α = {}; held-out traces {} × {} steps",
        report.app_seed,
        report.day_seconds,
        report.episode_steps,
        report.alpha,
        report.held_out_trace_seeds,
        report.evaluation_steps_per_trace
    );
    outln!(
        "{:<6} {:>9} {:>10} {:>10} {:>10} {:>7} {:>7} {:>12} {:>9} {:>8}",
        "policy",
        "episodes",
        "ep reward",
        "slo viol",
        "dropped",
        "cpu %",
        "mem %",
        "core-s",
        "actions",
        "beats"
    );
    for r in &report.policies {
        let s = &r.row.summary;
        outln!(
            "{:<6} {:>9} {:>10.2} {:>10} {:>10.0} {:>7.1} {:>7.1} {:>12.0} {:>9} {:>8}",
            r.row.policy,
            r.training_episodes.map_or("-".into(), |e| e.to_string()),
            r.row.mean_episode_reward,
            s.slo_violations,
            s.dropped_requests,
            s.cpu_utilisation * 100.0,
            s.memory_utilisation * 100.0,
            s.core_seconds,
            s.scaling_actions,
            r.beats_mpa.map_or("-", |b| if b { "yes" } else { "NO" })
        );
    }
    outln!("checkpoints in {}", report.out);
    outln!("{}", if report.passed { "PASS: every agent learned" } else { "FAIL: an agent did not learn" });
    Ok(code)
}

fn lifecycle(which: Which, args: LifecycleArgs) -> Result<ExitCode> {
    let config = LifecycleConfig {
        apps: args.apps.map(|n| n as usize),
        episodes: args.episodes,
        episode_steps: args.episode_steps,
        profile: args.profile,
        reward_window: args.reward_window,
        agent: args.agent,
        ..LifecycleConfig::new(args.quick, args.seed)
    };
    let report = aware_experiments::lifecycle::run(which, &config, &Bar::new())?;
    if args.json {
        print_json(&report)?;
        return Ok(ExitCode::SUCCESS);
    }
    outln!(
        "{}: {} apps × {} episodes of {} intervals, seed {}, α = {}",
        report.experiment,
        report.apps,
        report.episodes,
        report.episode_steps,
        report.seed,
        report.alpha
    );
    if which == Which::Fig9 {
        outln!("every scenario from its start to the end, summed over scenarios:");
    }
    super::print_rows(&report.policies);
    if !report.segments.is_empty() {
        outln!(
            "\n{:<14} {:>8} {:>9} {:>10} {:>10} {:>12} {:>8}",
            "policy",
            "segment",
            "episodes",
            "deficit",
            "slo viol",
            "core-s",
            "reward"
        );
        for s in &report.segments {
            outln!(
                "{:<14} {:>8} {:>9} {:>10.3} {:>10} {:>12.0} {:>8.3}",
                s.row.policy,
                s.segment,
                s.episode_range,
                s.row.summary.utilisation_deficit,
                s.row.summary.slo_violations,
                s.row.summary.core_seconds,
                s.row.summary.mean_reward
            );
        }
    }
    for s in &report.scenarios {
        outln!("\n{} (from interval {}):", s.scenario, s.at_step);
        super::print_rows(&s.policies);
    }
    let c = &report.checks;
    outln!("\napps that reached serving: {}", report.aware_apps_served);
    outln!("aware beats mpa: {}; converged beats mpa: {}", c.aware_beats_mpa, c.converged_beats_mpa);
    super::print_misranked(&c.reward_misranked);
    if let Some(ratio) = c.no_bootstrap_violation_ratio {
        match ratio {
            Some(r) => outln!("no-bootstrap has {r:.2}× aware's SLO violations"),
            None => outln!("aware had no SLO violations"),
        }
    }
    if let Some(s) = c.aware_reward_shortfall_vs_converged {
        outln!("aware's mean reward is {:.1} % below converged's", 100.0 * s);
    }
    if let Some(b) = c.aware_above_no_retrain {
        outln!("aware above no-retrain (reward and SLO violations): {b}");
    }
    Ok(ExitCode::SUCCESS)
}
