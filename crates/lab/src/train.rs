//! Training an agent on the simulator's vectorised environment (or any arena): episodes of the
//! one rollout loop with a learning driver, then the checkpoint and the learning curve.

use std::path::PathBuf;

use aware_agents::Agent;
use aware_env::ActionKind;
use aware_env::StateEncoder;
use serde::Serialize;

use aware_agents::Checkpoint;

use crate::LabError;
use crate::agent::{Algorithm, Loaded, action_kind, load_agent, new_agent};
use crate::output::{create_dir, refuse_checkpoint, write_training_outputs};
use crate::progress::Progress;
use crate::rollout::{Arena, Learner, rollout};
use crate::workload::Workload;

/// One training episode on the learning curve.
#[derive(Debug, Clone, Serialize)]
pub struct Episode {
    pub episode: u64,
    /// Σ reward over the episode's intervals, averaged over apps.
    pub mean_reward: f64,
    pub slo_violations: u64,
    pub exploration: f32,
}

/// A trained agent with its learning curve.
pub struct Trained {
    pub agent: Box<dyn Agent>,
    pub curve: Vec<Episode>,
    /// Transitions learned from (intervals × apps): a checkpoint's training step.
    pub total_steps: u64,
}

/// Trains `agent` for `episodes` of `steps` intervals on `arena`; episode `k` resets with seed
/// `first_seed + k`, so runs with equal arguments are equal.
pub fn train_agent(
    arena: &mut dyn Arena,
    agent: Box<dyn Agent>,
    episodes: u64,
    steps: u64,
    first_seed: u64,
    progress: &dyn Progress,
) -> Result<Trained, LabError> {
    let mut learner = Learner::new(agent, true, true);
    let mut curve = Vec::new();
    let mut total_steps = 0u64;
    let apps = arena.num_apps().max(1) as f64;
    for episode in 0..episodes {
        let totals =
            rollout(arena, &mut learner, first_seed.wrapping_add(episode), steps, &mut [], &crate::progress::Silent)?;
        total_steps += totals.app_steps;
        let mean_reward = totals.reward / apps;
        curve.push(Episode {
            episode,
            mean_reward,
            slo_violations: totals.slo_violations,
            exploration: learner.agent.exploration(),
        });
        progress.message(&format!("ep {episode} r {mean_reward:.1} viol {}", totals.slo_violations));
        progress.inc(1);
    }
    Ok(Trained { agent: learner.agent, curve, total_steps })
}

/// What `aware train` is asked to do.
#[derive(Debug, Clone)]
pub struct TrainSpec {
    /// The learner (with `resume`: optional, and must match the checkpoint's).
    pub algorithm: Option<Algorithm>,
    /// The action space; the algorithm's default when absent.
    pub action: Option<ActionKind>,
    /// Continue from this checkpoint's weights (fresh optimiser and replay buffer).
    pub resume: Option<PathBuf>,
    pub episodes: u64,
    /// Intervals per episode.
    pub steps: u64,
    /// Directory for the checkpoint, the learning curve and the summary.
    pub out: PathBuf,
}

/// `train.json` (and `train --json`).
#[derive(Debug, Clone, Serialize)]
pub struct TrainReport {
    pub algorithm: String,
    pub action_space: String,
    /// The checkpoint this run continued from.
    pub resumed_from: Option<String>,
    pub apps: usize,
    pub episodes: u64,
    pub steps_per_episode: u64,
    pub seed: u64,
    /// Episodes used trace seeds first_trace_seed, +1, … (compare elsewhere for held-out traces).
    pub first_trace_seed: u64,
    pub first_mean_reward: f64,
    pub last_10_mean_reward: f64,
    pub checkpoint: String,
    pub learning_curve_csv: String,
    pub learning_curve_png: String,
}

/// The fresh or resumed agent a spec asks for, with its action space and prior training steps.
pub fn agent_for(spec: &TrainSpec, seed: u64) -> Result<Loaded, LabError> {
    match &spec.resume {
        None => {
            let algorithm =
                spec.algorithm.ok_or_else(|| LabError::input("--algo", "name the learner (or --resume)"))?;
            let kind = spec.action.unwrap_or(algorithm.default_actions());
            Ok(Loaded { agent: new_agent(algorithm, kind, seed)?, kind, training_step: 0 })
        }
        Some(dir) => {
            let loaded = load_agent(dir)?;
            if let Some(algorithm) = spec.algorithm
                && algorithm.name() != loaded.agent.algorithm()
            {
                return Err(LabError::input(
                    "--algo",
                    format!(
                        "{algorithm} does not match {}, which holds a {} agent",
                        dir.display(),
                        loaded.agent.algorithm()
                    ),
                ));
            }
            if let Some(k) = spec.action
                && k != loaded.kind
            {
                return Err(LabError::input(
                    "--action-space",
                    format!("{}'s agent acts in a {:?} space", dir.display(), loaded.kind),
                ));
            }
            Ok(loaded)
        }
    }
}

/// Trains on the workload's vectorised environment and writes the checkpoint, the learning
/// curve (CSV and PNG) and `train.json` into `spec.out`.
pub fn train(workload: &Workload, spec: &TrainSpec, progress: &dyn Progress) -> Result<TrainReport, LabError> {
    let mut env = workload.env(spec.action_kind()?, spec.steps, workload.trace_seed);
    train_in(&mut env, workload.apps.len(), workload.seed, workload.trace_seed, spec, progress)
}

impl TrainSpec {
    /// The action space the agent will act in: the resumed checkpoint's, else `action`, else
    /// the algorithm's default.
    pub fn action_kind(&self) -> Result<ActionKind, LabError> {
        Ok(match (&self.resume, self.action, self.algorithm) {
            (Some(dir), _, _) => {
                let meta = Checkpoint::read_metadata(dir).map_err(aware_agents::AgentError::from)?;
                action_kind(&meta.action_space)
            }
            (None, Some(k), _) => k,
            (None, None, Some(a)) => a.default_actions(),
            (None, None, None) => return Err(LabError::input("--algo", "name the learner (or --resume)")),
        })
    }
}

/// [`train`] on any arena (a remote environment, say): `apps`, `seed` and `first_trace_seed`
/// are reported as given.
pub fn train_in(
    arena: &mut dyn Arena,
    apps: usize,
    seed: u64,
    first_trace_seed: u64,
    spec: &TrainSpec,
    progress: &dyn Progress,
) -> Result<TrainReport, LabError> {
    refuse_checkpoint("--out", &spec.out)?;
    let Loaded { agent, kind, training_step } = agent_for(spec, seed)?;
    // One process at a time writes the directory (a second start of the same command is refused
    // at once, not after hours of training): checked again once it is ours.
    create_dir(&spec.out)?;
    let _lock = crate::output::lock_dir(&spec.out)?;
    refuse_checkpoint("--out", &spec.out)?;
    progress.start(spec.episodes, "training");
    let Trained { agent, curve, total_steps } =
        train_agent(arena, agent, spec.episodes, spec.steps, first_trace_seed, progress)?;
    progress.finish();
    create_dir(&spec.out)?;
    agent.save(&spec.out, &StateEncoder::space(), training_step + total_steps)?;
    let mut csv = String::from("episode,mean_reward,slo_violations,exploration\n");
    for e in &curve {
        csv.push_str(&format!("{},{},{},{}\n", e.episode, e.mean_reward, e.slo_violations, e.exploration));
    }
    let points: Vec<(f64, f64)> = curve.iter().map(|e| (e.episode as f64, e.mean_reward)).collect();
    let last: Vec<f64> = curve.iter().rev().take(10).map(|e| e.mean_reward).collect();
    let report = TrainReport {
        algorithm: agent.algorithm().to_string(),
        action_space: kind.name().to_string(),
        resumed_from: spec.resume.as_ref().map(|d| d.display().to_string()),
        apps,
        episodes: spec.episodes,
        steps_per_episode: spec.steps,
        seed,
        first_trace_seed,
        first_mean_reward: curve.first().map_or(0.0, |e| e.mean_reward),
        last_10_mean_reward: last.iter().sum::<f64>() / last.len().max(1) as f64,
        checkpoint: spec.out.display().to_string(),
        learning_curve_csv: spec.out.join(crate::output::LEARNING_CURVE_CSV).display().to_string(),
        learning_curve_png: spec.out.join(crate::output::LEARNING_CURVE_PNG).display().to_string(),
    };
    write_training_outputs(&spec.out, agent.algorithm(), &csv, &points, &report)?;
    Ok(report)
}
