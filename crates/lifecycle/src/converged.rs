//! The `converged` reference of the lifecycle experiments: a policy trained separately, from
//! scratch, on the same workload until its reward stops improving, then evaluated greedily.
//! It is what AWARE's agents would reach with unlimited, unsafe training — the yardstick, not a
//! variant of AWARE.

use aware_agents::ddpg::DdpgConfig;
use aware_lab::progress::Progress;
use aware_lab::workload::Workload;
use aware_sim::Scenario;
use serde::Serialize;

use crate::LifecycleError;
use crate::agent::LifecycleAgent;
use crate::manager::ManagerConfig;
use crate::run::{Arm, Plan, run_agent};
use crate::stage::Stage;

/// When training stops.
#[derive(Debug, Clone, Copy)]
pub struct Training {
    /// Most episodes trained, whatever the rewards do.
    pub max_episodes: u64,
    /// Fewest episodes trained before a plateau may stop it (the first episodes' rewards say
    /// little: the replay buffer is still filling and exploration dominates).
    pub min_episodes: u64,
    /// Stop after this many episodes without a new best (of the 3-episode moving average of
    /// the mean reward over apps).
    pub patience: u64,
    /// What counts as better: this fraction of the best's magnitude (and at least 1e-4).
    pub min_gain: f64,
}

impl Default for Training {
    fn default() -> Self {
        Self { max_episodes: 200, min_episodes: 40, patience: 10, min_gain: 0.01 }
    }
}

/// How the reference was trained.
#[derive(Debug, Clone, Serialize)]
pub struct TrainingReport {
    pub episodes: u64,
    /// True when the reward stopped improving before `max_episodes`.
    pub converged: bool,
    /// Mean reward over apps of every training episode (with exploration noise).
    pub episode_rewards: Vec<f64>,
}

/// Trace seeds for training: far from any plan's, so the reference is evaluated on traffic it
/// never trained on.
const TRAINING_TRACE_OFFSET: u64 = 1 << 40;

/// Trains a fresh agent of `config.agent`'s algorithm (seed `seed`) on `workload`, acting and learning in every
/// interval of every app with the agent's own exploration noise, in episodes of
/// `episode_steps` on training traces, with `change` (if any) in effect from each episode's
/// start; stops when [`Training`] says.
pub fn train(
    workload: &Workload,
    episode_steps: u64,
    change: Option<Scenario>,
    training: Training,
    config: &ManagerConfig,
    seed: u64,
    progress: &dyn Progress,
) -> Result<(LifecycleAgent, TrainingReport), LifecycleError> {
    let mut workload = workload.clone();
    workload.sim.scenario = change.map(|s| Scenario { kind: s.kind, at_step: Some(0) });
    let config = ManagerConfig {
        fixed_stage: Some(Stage::Online),
        online_noise_sigma: DdpgConfig::default().noise_sigma,
        online_bc: false,
        online_learning: true,
        // The policy alone: no fallback to lean on, in training or evaluation.
        fallback_floor: false,
        log: false,
        ..config.clone()
    };
    let mut agent = LifecycleAgent::fresh(config.agent, seed);
    let mut rewards = Vec::new();
    let (mut best, mut since_best) = (f64::NEG_INFINITY, 0);
    let mut converged = false;
    for e in 0..training.max_episodes {
        let plan = Plan {
            episode_steps,
            seeds: vec![workload.trace_seed.wrapping_add(TRAINING_TRACE_OFFSET + e)],
            change: None,
            windows: Vec::new(),
        };
        let (arm, trained) = run_agent(&workload, &plan, agent, "converged (training)", &config, &mut (), progress)?;
        agent = trained;
        rewards.push(arm.row.summary.mean_reward);
        let recent = &rewards[rewards.len().saturating_sub(3)..];
        let smoothed = recent.iter().sum::<f64>() / recent.len() as f64;
        if smoothed > best + (training.min_gain * best.abs()).max(1e-4) || best == f64::NEG_INFINITY {
            (best, since_best) = (smoothed, 0);
        } else {
            since_best += 1;
        }
        progress.message(&format!("converged reference: episode {} mean reward {smoothed:.3}", e + 1));
        if since_best >= training.patience && rewards.len() as u64 >= training.min_episodes {
            converged = true;
            break;
        }
    }
    Ok((agent, TrainingReport { episodes: rewards.len() as u64, converged, episode_rewards: rewards }))
}

/// The trained `agent` over `plan`, greedily, learning nothing, with the guard as always.
pub fn evaluate(
    workload: &Workload,
    plan: &Plan,
    agent: LifecycleAgent,
    config: &ManagerConfig,
    progress: &dyn Progress,
) -> Result<Arm, LifecycleError> {
    let config =
        ManagerConfig { fixed_stage: Some(Stage::Serving), fallback_floor: false, log: false, ..config.clone() };
    run_agent(workload, plan, agent, "converged", &config, &mut (), progress).map(|(arm, _)| arm)
}
