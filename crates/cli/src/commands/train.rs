use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::{Context, Result, bail};
use aware_agents::agent::action_values;
use aware_agents::checkpoint::Checkpoint;
use aware_agents::{Agent, Experience};
use aware_core::VecEnv;
use aware_env::action::ActionKind;
use aware_env::{AppSlo, ClusterVecEnv, EnvConfig};
use aware_sim::{CONTAINER, SimCluster};
use indicatif::ProgressBar;
use serde::Serialize;

use super::{AppsArgs, Prepared, SimArgs, write_training_outputs};
use crate::learner::{Algorithm, load_agent, new_agent};
use crate::progress;

#[derive(clap::Args, Debug)]
pub struct Args {
    /// The learner (with --resume: optional, and must match the checkpoint's).
    #[arg(long, value_enum, required_unless_present = "resume")]
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
    /// Print the summary as JSON.
    #[arg(long)]
    json: bool,
}

#[derive(clap::ValueEnum, Clone, Copy, Debug, PartialEq, Eq)]
enum ActionSpace {
    Discrete,
    Continuous,
}

#[derive(Debug, Serialize)]
pub struct Episode {
    pub episode: u64,
    pub mean_reward: f64,
    pub slo_violations: u64,
    pub exploration: f32,
}

#[derive(Debug, Serialize)]
struct Summary {
    algorithm: String,
    action_space: String,
    /// The checkpoint this run continued from.
    resumed_from: Option<String>,
    apps: u32,
    episodes: u64,
    steps_per_episode: u64,
    seed: u64,
    /// Episodes used trace seeds first_trace_seed, +1, … (compare elsewhere for held-out traces).
    first_trace_seed: u64,
    first_mean_reward: f64,
    last_10_mean_reward: f64,
    checkpoint: String,
    learning_curve_csv: String,
    learning_curve_png: String,
}

/// Steps per episode come from `--steps` (AWARE's DDPG uses 100).
pub fn run(args: Args) -> Result<ExitCode> {
    if args.out.exists() && args.out.join(aware_agents::checkpoint::METADATA).exists() {
        bail!("--out: {} already holds a checkpoint; choose another directory", args.out.display());
    }
    let prepared = args.sim.prepare(&args.apps)?;
    let steps = args.sim.steps;
    let seed = args.apps.seed;
    let asked = args.action_space.map(|a| match a {
        ActionSpace::Discrete => ActionKind::Discrete,
        ActionSpace::Continuous => ActionKind::Continuous,
    });
    let (agent, kind, steps_before) = match &args.resume {
        None => {
            let algo = args.algo.expect("clap requires --algo without --resume");
            let kind = asked.unwrap_or(algo.default_actions());
            (new_agent(algo, kind, seed)?, kind, 0)
        }
        Some(dir) => {
            let (agent, kind) = load_agent(dir)?;
            if let Some(algo) = args.algo
                && format!("{algo:?}").to_lowercase() != agent.algorithm()
            {
                bail!("--algo: {algo:?} does not match {}, which holds a {} agent", dir.display(), agent.algorithm());
            }
            if let Some(k) = asked
                && k != kind
            {
                bail!("--action-space: {}'s agent acts in a {kind:?} space", dir.display());
            }
            (agent, kind, Checkpoint::read_metadata(dir)?.training_step)
        }
    };
    let bar = progress::bar(args.episodes, "training");
    let Trained { agent, curve, total_steps } =
        train_agent(&prepared, &args.apps, steps, args.episodes, agent, kind, &bar)?;
    let total_steps = steps_before + total_steps;
    let trace_seed = args.apps.trace_seed();
    bar.finish_and_clear();
    std::fs::create_dir_all(&args.out).with_context(|| format!("{}: cannot create", args.out.display()))?;
    agent.save(&args.out, &aware_env::StateEncoder::space(), total_steps)?;
    let mut csv = String::from("episode,mean_reward,slo_violations,exploration\n");
    for e in &curve {
        csv.push_str(&format!("{},{},{},{}\n", e.episode, e.mean_reward, e.slo_violations, e.exploration));
    }
    let points: Vec<(f64, f64)> = curve.iter().map(|e| (e.episode as f64, e.mean_reward)).collect();
    let last: Vec<f64> = curve.iter().rev().take(10).map(|e| e.mean_reward).collect();
    let summary = Summary {
        algorithm: agent.algorithm().to_string(),
        action_space: format!("{kind:?}").to_lowercase(),
        resumed_from: args.resume.as_ref().map(|d| d.display().to_string()),
        apps: args.apps.apps,
        episodes: args.episodes,
        steps_per_episode: steps,
        seed,
        first_trace_seed: trace_seed,
        first_mean_reward: curve[0].mean_reward,
        last_10_mean_reward: last.iter().sum::<f64>() / last.len() as f64,
        checkpoint: args.out.display().to_string(),
        learning_curve_csv: args.out.join("learning_curve.csv").display().to_string(),
        learning_curve_png: args.out.join("learning_curve.png").display().to_string(),
    };
    write_training_outputs(&args.out, agent.algorithm(), &csv, &points, &summary, args.json, || {
        println!(
            "{} on {} apps, {} episodes × {} steps: episode reward {:.2} → {:.2} (last 10)",
            summary.algorithm,
            summary.apps,
            summary.episodes,
            steps,
            summary.first_mean_reward,
            summary.last_10_mean_reward
        );
        println!("checkpoint and learning curve in {}", summary.checkpoint);
    })?;
    Ok(ExitCode::SUCCESS)
}

/// A trained agent with its learning curve.
pub struct Trained {
    pub agent: Box<dyn Agent>,
    pub curve: Vec<Episode>,
    /// Transitions learned from (environment steps × apps): a checkpoint's training step.
    pub total_steps: u64,
}

/// Trains `agent` for `episodes` of `steps` on the prepared apps; episode `k` replays trace
/// seed `apps.trace_seed() + k`, so runs with equal arguments are equal.
pub fn train_agent(
    prepared: &Prepared,
    apps: &AppsArgs,
    steps: u64,
    episodes: u64,
    mut agent: Box<dyn Agent>,
    kind: ActionKind,
    bar: &ProgressBar,
) -> Result<Trained> {
    let trace_seed = apps.trace_seed();
    let cluster = SimCluster::new(prepared.apps.clone(), prepared.traces.clone(), prepared.sim.clone(), trace_seed);
    let slos: Vec<(usize, AppSlo)> = (0..prepared.apps.len())
        .map(|i| (i, AppSlo { latency_p99_ms: Some(cluster.slo_p99_ms(i)), throughput_rps: None }))
        .collect();
    let config = EnvConfig {
        profile: prepared.profile.clone(),
        action: kind,
        episode_steps: steps as u32,
        container: CONTAINER.into(),
    };
    let mut env = ClusterVecEnv::new(cluster, &slos, config);
    let mut curve = Vec::new();
    let mut total_steps = 0u64;
    for episode in 0..episodes {
        let mut states: Vec<Vec<f32>> =
            env.reset(Some(trace_seed.wrapping_add(episode)))?.into_iter().map(|(s, _)| s).collect();
        let (mut reward, mut violations) = (0.0, 0u64);
        for _ in 0..steps {
            let actions = agent.act(&states, true)?;
            let out = env.step(&actions)?;
            for (i, ((s, a), step)) in states.iter().zip(&actions).zip(&out.steps).enumerate() {
                let e = Experience {
                    state: s.clone(),
                    action: action_values(a),
                    reward: step.reward as f32,
                    next_state: step.observation.clone(),
                    terminal: step.terminated,
                };
                agent.observe(i, &e, step.truncated)?;
                reward += step.reward;
                violations += step.info.slo_violated as u64;
                total_steps += 1;
            }
            states = out.steps.into_iter().map(|s| s.observation).collect();
        }
        let mean_reward = reward / states.len() as f64;
        curve.push(Episode { episode, mean_reward, slo_violations: violations, exploration: agent.exploration() });
        bar.set_message(format!("ep {episode} r {mean_reward:.1} viol {violations}"));
        bar.inc(1);
    }
    Ok(Trained { agent, curve, total_steps })
}
