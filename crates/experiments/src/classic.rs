//! `aware experiment classic`: the agents checked where every RL practitioner knows the answer.
//! DDPG learns Pendulum-v1, DQN and PPO learn CartPole-v1 (Gymnasium's dynamics, in
//! `aware_env::classic`), each with rl-baselines3-zoo's tuned hyper-parameters, and each
//! trained policy is scored by its mean return over deterministic evaluation episodes on start
//! states training never drew. The zoo's reference levels: DDPG −152 on Pendulum after 20k
//! steps, DQN 500 on CartPole after 50k, PPO 500 after 100k; the acceptance bars are −250, 475
//! and 475 within those budgets.
//!
//! Each algorithm is one function, readable top to bottom: build the environment and agent,
//! score the untrained policy, run the training loop, score the trained policy.

use std::time::Instant;

use aware_agents::ddpg::{Ddpg, DdpgConfig, Noise};
use aware_agents::dqn::{Dqn, DqnConfig};
use aware_agents::net::Activation;
use aware_agents::ppo::{Ppo, PpoActions, PpoConfig};
use aware_agents::{AgentError, Experience};
use aware_core::{Action, Env, EnvError};
use aware_env::classic::{CartPole, Pendulum, pendulum};
use serde::{Deserialize, Serialize};

#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    #[error("{algorithm} on {task}: {source}")]
    Agent {
        algorithm: &'static str,
        task: &'static str,
        #[source]
        source: AgentError,
    },
    #[error("{algorithm} on {task}: {source}")]
    Env {
        algorithm: &'static str,
        task: &'static str,
        #[source]
        source: EnvError,
    },
    #[error("{algorithm} on {task}: snapshot directory: {reason}")]
    Snapshot { algorithm: &'static str, task: &'static str, reason: String },
    #[error("classic config: {field}: {reason}")]
    Config { field: &'static str, reason: String },
}

/// What to train and for how long. [`ClassicConfig::full`] is the acceptance run;
/// [`ClassicConfig::quick`] a CI smoke size that need not reach the levels.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ClassicConfig {
    /// Every seed of the run (agents, training starts, evaluation starts) derives from it.
    pub seed: u64,
    pub ddpg_steps: u64,
    pub dqn_steps: u64,
    pub ppo_steps: u64,
    /// CartPoles PPO steps together (the zoo's `n_envs`).
    pub ppo_envs: usize,
    /// Deterministic evaluation episodes per trained policy (≥ 10 for the acceptance run).
    pub evaluation_episodes: u32,
    /// DQN only: every this many training steps the greedy policy is scored on
    /// `selection_episodes` start states of its own, and the best-scoring snapshot is the
    /// trained policy (rl-baselines3-zoo's `EvalCallback` keeping `best_model`); 0 keeps the
    /// last weights. DQN's greedy policy on CartPole swings between balancing for 500 steps and
    /// collapsing to ~100 late in training, so its last weights are a draw from that swing.
    #[serde(default)]
    pub dqn_select_every: u64,
    #[serde(default = "five")]
    pub selection_episodes: u32,
    pub ddpg: DdpgConfig,
    pub dqn: DqnConfig,
    pub ppo: PpoConfig,
}

impl ClassicConfig {
    /// rl-baselines3-zoo's tuned hyper-parameters and budgets (`hyperparams/{ddpg,dqn,ppo}.yml`),
    /// with Stable-Baselines3's defaults where the zoo sets nothing; 20 evaluation episodes.
    pub fn full(seed: u64) -> Self {
        Self {
            seed,
            ddpg_steps: 20_000,
            dqn_steps: 50_000,
            ppo_steps: 100_000,
            ppo_envs: 8,
            evaluation_episodes: 20,
            dqn_select_every: 5_000,
            selection_episodes: 5,
            ddpg: zoo_ddpg_pendulum(),
            dqn: zoo_dqn_cartpole(),
            ppo: zoo_ppo_cartpole(100_000),
        }
    }

    /// The same algorithms at a size CI runs in about a minute: smaller networks and a tenth of
    /// the steps or less. It shows training improves on the untrained policy, not the levels.
    pub fn quick(seed: u64) -> Self {
        Self {
            seed,
            ddpg_steps: 3_000,
            dqn_steps: 5_000,
            ppo_steps: 10_000,
            ppo_envs: 8,
            evaluation_episodes: 10,
            dqn_select_every: 1_000,
            selection_episodes: 3,
            ddpg: DdpgConfig { hidden: vec![64, 64], warmup: 1_000, batch_size: 64, ..zoo_ddpg_pendulum() },
            dqn: DqnConfig { hidden: vec![64, 64], warmup: 500, epsilon_decay_steps: 1_000, ..zoo_dqn_cartpole() },
            ppo: zoo_ppo_cartpole(10_000),
        }
    }

    fn validate(&self) -> Result<(), Error> {
        let positive = |field, v: u64| {
            if v == 0 { Err(Error::Config { field, reason: "must be positive".into() }) } else { Ok(()) }
        };
        positive("ddpg_steps", self.ddpg_steps)?;
        positive("dqn_steps", self.dqn_steps)?;
        positive("ppo_steps", self.ppo_steps)?;
        positive("ppo_envs", self.ppo_envs as u64)?;
        positive("evaluation_episodes", self.evaluation_episodes as u64)?;
        if self.dqn_select_every > 0 {
            positive("selection_episodes", self.selection_episodes as u64)?;
        }
        if self.ppo_steps < self.ppo_envs as u64 {
            return Err(Error::Config {
                field: "ppo_steps",
                reason: format!("{} is fewer than one step per environment ({})", self.ppo_steps, self.ppo_envs),
            });
        }
        Ok(())
    }
}

fn five() -> u32 {
    5
}

/// `hyperparams/ddpg.yml`, Pendulum-v1: γ 0.98, buffer 200k, learning_starts 10k (uniform
/// random actions until then), normal noise σ 0.1, train_freq 1, gradient_steps 1, lr 1e-3,
/// net_arch [400, 300]; Stable-Baselines3's DDPG defaults τ 0.005 and batch 256.
pub fn zoo_ddpg_pendulum() -> DdpgConfig {
    DdpgConfig {
        hidden: vec![400, 300],
        actor_learning_rate: 1e-3,
        critic_learning_rate: 1e-3,
        gamma: 0.98,
        tau: 0.005,
        batch_size: 256,
        replay_capacity: 200_000,
        warmup: 10_000,
        noise: Noise::Gaussian,
        noise_sigma: 0.1,
        epsilon_start: 1.0,
        epsilon_decay: 0.0,
        epsilon_min: 1.0,
        uniform_warmup: true,
        ..DdpgConfig::default()
    }
}

/// `hyperparams/dqn.yml`, CartPole-v1: lr 2.3e-3, batch 64, buffer 100k, learning_starts 1000,
/// γ 0.99, target_update_interval 10, train_freq 256, gradient_steps 128, exploration over the
/// first 16 % of 50k steps down to ε 0.04, net_arch [256, 256]; Stable-Baselines3's DQN
/// defaults: hard target copies (τ 1), Huber loss, gradient norm limit 10.
pub fn zoo_dqn_cartpole() -> DqnConfig {
    DqnConfig {
        hidden: vec![256, 256],
        learning_rate: 2.3e-3,
        gamma: 0.99,
        tau: 1.0,
        batch_size: 64,
        replay_capacity: 100_000,
        warmup: 1_000,
        epsilon_start: 1.0,
        epsilon_end: 0.04,
        epsilon_decay_steps: 8_000,
        train_frequency: 256,
        gradient_steps: 128,
        target_update_period: 10,
        max_grad_norm: Some(10.0),
        ..DqnConfig::dqn()
    }
}

/// `hyperparams/ppo.yml`, CartPole-v1: n_envs 8, n_steps 32, batch 256, GAE λ 0.8, γ 0.98,
/// 20 epochs, no entropy bonus, learning rate lin_1e-3 and clip range lin_0.2 (both annealed to
/// zero over the budget); Stable-Baselines3's PPO defaults: value-loss weight 0.5, gradient
/// norm limit 0.5, tanh hidden layers [64, 64], no reward normalisation.
pub fn zoo_ppo_cartpole(budget: u64) -> PpoConfig {
    PpoConfig {
        hidden: vec![64, 64],
        learning_rate: 1e-3,
        gamma: 0.98,
        gae_lambda: 0.8,
        rollout_steps: 32,
        minibatch_size: 256,
        epochs: 20,
        clip: 0.2,
        entropy_coef: 0.0,
        value_coef: 0.5,
        max_grad_norm: 0.5,
        normalize_rewards: false,
        activation: Activation::Tanh,
        anneal_steps: Some(budget),
        ..PpoConfig::default()
    }
}

/// One row of `results`: exactly the fields `INTERFACES.md` names.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ClassicRow {
    /// `ddpg`, `dqn` or `ppo`.
    pub algorithm: String,
    /// `pendulum` or `cartpole`.
    pub task: String,
    /// Environment steps consumed by training.
    pub steps: u64,
    /// Mean undiscounted return over the deterministic evaluation episodes.
    pub mean_return: f64,
}

/// What else is known about a row, in the report's `details`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ClassicDetail {
    pub algorithm: String,
    pub task: String,
    /// The acceptance bar for `mean_return` at the full budget.
    pub level: f64,
    /// The same evaluation before training.
    pub untrained_return: f64,
    /// Every evaluation episode's return, in seed order.
    pub returns: Vec<f64>,
    pub std_return: f64,
    pub training_episodes: u64,
    /// Wall-clock seconds for training and both evaluations.
    pub wall_s: f64,
    /// With snapshot selection (DQN): each scoring during training, `[step, mean return]`
    /// over the selection episodes, and the step of the snapshot kept.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub selection: Vec<(u64, f64)>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub selected_step: Option<u64>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ClassicReport {
    pub seed: u64,
    pub results: Vec<ClassicRow>,
    pub details: Vec<ClassicDetail>,
    pub wall_s: f64,
    pub config: ClassicConfig,
}

/// Progress while training: after each finished training episode, and each finished row.
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
pub enum ClassicProgress {
    Episode { algorithm: &'static str, task: &'static str, step: u64, total: u64, episode_return: f64 },
    Done { row: ClassicRow },
}

/// One (algorithm, task) pair of the experiment.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
#[non_exhaustive]
pub enum ClassicPair {
    DdpgPendulum,
    DqnCartpole,
    PpoCartpole,
}

impl ClassicPair {
    pub const ALL: [ClassicPair; 3] = [ClassicPair::DdpgPendulum, ClassicPair::DqnCartpole, ClassicPair::PpoCartpole];
}

/// Trains and scores DDPG on Pendulum, DQN on CartPole and PPO on CartPole, in that order.
pub fn run(config: &ClassicConfig, progress: &dyn Fn(&ClassicProgress)) -> Result<ClassicReport, Error> {
    run_pairs(config, &ClassicPair::ALL, progress)
}

/// [`run`] for the chosen pairs only, in the order given (for tuning one algorithm).
pub fn run_pairs(
    config: &ClassicConfig,
    pairs: &[ClassicPair],
    progress: &dyn Fn(&ClassicProgress),
) -> Result<ClassicReport, Error> {
    config.validate()?;
    let start = Instant::now();
    let mut results = Vec::new();
    let mut details = Vec::new();
    for pair in pairs {
        let (row, detail) = match pair {
            ClassicPair::DdpgPendulum => ddpg_pendulum(config, progress)?,
            ClassicPair::DqnCartpole => dqn_cartpole(config, progress)?,
            ClassicPair::PpoCartpole => ppo_cartpole(config, progress)?,
        };
        progress(&ClassicProgress::Done { row: row.clone() });
        results.push(row);
        details.push(detail);
    }
    Ok(ClassicReport {
        seed: config.seed,
        results,
        details,
        wall_s: start.elapsed().as_secs_f64(),
        config: config.clone(),
    })
}

/// SplitMix64: distinct, well-mixed seeds for each part of a run from the one `--seed`.
fn derive_seed(seed: u64, stream: u64) -> u64 {
    let mut z = seed ^ stream.wrapping_mul(0x9e37_79b9_7f4a_7c15);
    z = z.wrapping_add(0x9e37_79b9_7f4a_7c15);
    z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    z ^ (z >> 31)
}

/// Seed streams: agent weights and noise, training starts, evaluation starts, selection starts.
const AGENT: u64 = 1;
const TRAINING: u64 = 2;
const EVALUATION: u64 = 3;
/// Start states for choosing among snapshots during training.
const SELECTION: u64 = 4;

/// Returns of `episodes` deterministic episodes from evaluation start states of this run (the
/// same for the untrained and trained policy, never those training drew).
fn evaluate<E: Env>(
    make: impl Fn() -> E,
    config: &ClassicConfig,
    stream: u64,
    policy: impl FnMut(&[f32]) -> Result<Action, AgentError>,
    names: (&'static str, &'static str),
) -> Result<Vec<f64>, Error> {
    let base = derive_seed(config.seed, EVALUATION ^ (stream << 8));
    run_episodes(make, base, config.evaluation_episodes, policy, names)
}

/// Returns of `n` deterministic episodes from start states `base`, `base + 1`, ….
fn run_episodes<E: Env>(
    make: impl Fn() -> E,
    base: u64,
    n: u32,
    mut policy: impl FnMut(&[f32]) -> Result<Action, AgentError>,
    names: (&'static str, &'static str),
) -> Result<Vec<f64>, Error> {
    let (algorithm, task) = names;
    let env_err = |source| Error::Env { algorithm, task, source };
    let mut returns = Vec::with_capacity(n as usize);
    for k in 0..n as u64 {
        let mut env = make();
        let (mut obs, _) = env.reset(Some(base.wrapping_add(k))).map_err(env_err)?;
        let mut total = 0.0;
        loop {
            let action = policy(&obs).map_err(|source| Error::Agent { algorithm, task, source })?;
            let step = env.step(&action).map_err(env_err)?;
            total += step.reward;
            if step.terminated || step.truncated {
                break;
            }
            obs = step.observation;
        }
        returns.push(total);
    }
    Ok(returns)
}

fn mean_std(v: &[f64]) -> (f64, f64) {
    let mean = v.iter().sum::<f64>() / v.len() as f64;
    (mean, (v.iter().map(|x| (x - mean).powi(2)).sum::<f64>() / v.len() as f64).sqrt())
}

fn finish(
    names: (&'static str, &'static str),
    level: f64,
    steps: u64,
    untrained: &[f64],
    returns: Vec<f64>,
    training_episodes: u64,
    start: Instant,
) -> (ClassicRow, ClassicDetail) {
    let (algorithm, task) = names;
    let (mean_return, std_return) = mean_std(&returns);
    let row = ClassicRow { algorithm: algorithm.into(), task: task.into(), steps, mean_return };
    let detail = ClassicDetail {
        algorithm: algorithm.into(),
        task: task.into(),
        level,
        untrained_return: mean_std(untrained).0,
        returns,
        std_return,
        training_episodes,
        wall_s: start.elapsed().as_secs_f64(),
        selection: Vec::new(),
        selected_step: None,
    };
    (row, detail)
}

/// DDPG on Pendulum-v1. The actor acts in [−1, 1]; the environment gets that times the
/// maximum torque (Stable-Baselines3 rescales the same way).
fn ddpg_pendulum(
    config: &ClassicConfig,
    progress: &dyn Fn(&ClassicProgress),
) -> Result<(ClassicRow, ClassicDetail), Error> {
    const NAMES: (&str, &str) = ("ddpg", "pendulum");
    let start = Instant::now();
    let agent_err = |source| Error::Agent { algorithm: NAMES.0, task: NAMES.1, source };
    let env_err = |source| Error::Env { algorithm: NAMES.0, task: NAMES.1, source };
    let torque = |a: &[f32]| Action::Continuous(vec![a[0] * pendulum::MAX_TORQUE as f32]);

    let mut agent = Ddpg::new(3, 1, config.ddpg.clone(), derive_seed(config.seed, AGENT));
    let untrained = evaluate(|| Pendulum::new(0), config, 1, |o| Ok(torque(&agent.greedy(o)?)), NAMES)?;

    let mut env = Pendulum::new(derive_seed(config.seed, TRAINING));
    let (mut obs, _) = env.reset(None).map_err(env_err)?;
    let (mut episode_return, mut episodes) = (0.0, 0);
    for step in 1..=config.ddpg_steps {
        let action = agent.act(&obs, true).map_err(agent_err)?;
        let outcome = env.step(&torque(&action)).map_err(env_err)?;
        episode_return += outcome.reward;
        let experience = Experience {
            state: obs,
            action,
            reward: outcome.reward as f32,
            next_state: outcome.observation.clone(),
            terminal: outcome.terminated,
        };
        agent.observe(&experience).map_err(agent_err)?;
        obs = outcome.observation;
        if outcome.terminated || outcome.truncated {
            episodes += 1;
            let total = config.ddpg_steps;
            progress(&ClassicProgress::Episode { algorithm: NAMES.0, task: NAMES.1, step, total, episode_return });
            episode_return = 0.0;
            obs = env.reset(None).map_err(env_err)?.0;
        }
    }

    let returns = evaluate(|| Pendulum::new(0), config, 1, |o| Ok(torque(&agent.greedy(o)?)), NAMES)?;
    Ok(finish(NAMES, -250.0, config.ddpg_steps, &untrained, returns, episodes, start))
}

/// DQN on CartPole-v1.
fn dqn_cartpole(
    config: &ClassicConfig,
    progress: &dyn Fn(&ClassicProgress),
) -> Result<(ClassicRow, ClassicDetail), Error> {
    const NAMES: (&str, &str) = ("dqn", "cartpole");
    let start = Instant::now();
    let agent_err = |source| Error::Agent { algorithm: NAMES.0, task: NAMES.1, source };
    let env_err = |source| Error::Env { algorithm: NAMES.0, task: NAMES.1, source };

    let mut agent = Dqn::new(4, 2, config.dqn.clone(), derive_seed(config.seed, AGENT ^ 0x100));
    let untrained = evaluate(|| CartPole::new(0), config, 2, |o| Ok(Action::Discrete(agent.act(o, false)?)), NAMES)?;

    let mut env = CartPole::new(derive_seed(config.seed, TRAINING ^ 0x100));
    let (mut obs, _) = env.reset(None).map_err(env_err)?;
    let (mut episode_return, mut episodes) = (0.0, 0);
    // Snapshot selection on start states of its own (SELECTION), never the final evaluation's.
    let snapshots = tempfile::tempdir().map_err(|e| Error::Snapshot {
        algorithm: NAMES.0,
        task: NAMES.1,
        reason: e.to_string(),
    })?;
    let selection_base = derive_seed(config.seed, SELECTION ^ 0x100);
    let space = env.observation_space();
    let mut selection = Vec::new();
    let mut best: Option<(f64, u64)> = None;
    let mut select = |agent: &mut Dqn, step: u64| -> Result<(), Error> {
        let scores = run_episodes(
            || CartPole::new(0),
            selection_base,
            config.selection_episodes,
            |o| Ok(Action::Discrete(agent.act(o, false)?)),
            NAMES,
        )?;
        let mean = mean_std(&scores).0;
        selection.push((step, mean));
        // Ties go to the later, longer-trained snapshot.
        if best.is_none_or(|(b, _)| mean >= b) {
            agent.save(snapshots.path(), &space).map_err(agent_err)?;
            best = Some((mean, step));
        }
        Ok(())
    };
    for step in 1..=config.dqn_steps {
        let action = agent.act(&obs, true).map_err(agent_err)?;
        let outcome = env.step(&Action::Discrete(action)).map_err(env_err)?;
        episode_return += outcome.reward;
        let experience = Experience {
            state: obs,
            action: vec![action as f32],
            reward: outcome.reward as f32,
            next_state: outcome.observation.clone(),
            terminal: outcome.terminated,
        };
        agent.observe(&experience).map_err(agent_err)?;
        obs = outcome.observation;
        if outcome.terminated || outcome.truncated {
            episodes += 1;
            let total = config.dqn_steps;
            progress(&ClassicProgress::Episode { algorithm: NAMES.0, task: NAMES.1, step, total, episode_return });
            episode_return = 0.0;
            obs = env.reset(None).map_err(env_err)?.0;
        }
        let every = config.dqn_select_every;
        if every > 0 && (step % every == 0 || step == config.dqn_steps) {
            select(&mut agent, step)?;
        }
    }
    let selected_step = best.map(|(_, step)| step);
    if selected_step.is_some_and(|s| s != config.dqn_steps) {
        agent = Dqn::load(snapshots.path(), &space, 2, derive_seed(config.seed, AGENT ^ 0x100)).map_err(agent_err)?;
    }

    let returns = evaluate(|| CartPole::new(0), config, 2, |o| Ok(Action::Discrete(agent.act(o, false)?)), NAMES)?;
    let (row, mut detail) = finish(NAMES, 475.0, config.dqn_steps, &untrained, returns, episodes, start);
    detail.selection = selection;
    detail.selected_step = selected_step;
    Ok((row, detail))
}

/// PPO on `ppo_envs` CartPole-v1s stepped together; it learns once every environment holds
/// `rollout_steps` transitions. Training consumes whole rounds (one step of every environment).
fn ppo_cartpole(
    config: &ClassicConfig,
    progress: &dyn Fn(&ClassicProgress),
) -> Result<(ClassicRow, ClassicDetail), Error> {
    const NAMES: (&str, &str) = ("ppo", "cartpole");
    let start = Instant::now();
    let agent_err = |source| Error::Agent { algorithm: NAMES.0, task: NAMES.1, source };
    let env_err = |source| Error::Env { algorithm: NAMES.0, task: NAMES.1, source };
    let greedy = |agent: &mut Ppo, o: &[f32]| -> Result<Action, AgentError> {
        Ok(Action::Discrete(agent.act(&[o.to_vec()], false)?[0][0] as usize))
    };

    let mut agent = Ppo::new(4, PpoActions::Discrete(2), config.ppo.clone(), derive_seed(config.seed, AGENT ^ 0x200));
    let untrained = evaluate(|| CartPole::new(0), config, 3, |o| greedy(&mut agent, o), NAMES)?;

    let n = config.ppo_envs;
    let training = derive_seed(config.seed, TRAINING ^ 0x200);
    let mut envs: Vec<CartPole> = (0..n as u64).map(|i| CartPole::new(training.wrapping_add(i))).collect();
    let mut obs = Vec::with_capacity(n);
    for env in &mut envs {
        obs.push(env.reset(None).map_err(env_err)?.0);
    }
    let mut episode_returns = vec![0.0; n];
    let mut episodes = 0;
    let rounds = config.ppo_steps / n as u64;
    let steps = rounds * n as u64;
    for round in 1..=rounds {
        let actions = agent.act(&obs, true).map_err(agent_err)?;
        for (i, (env, action)) in envs.iter_mut().zip(actions).enumerate() {
            let outcome = env.step(&Action::Discrete(action[0] as usize)).map_err(env_err)?;
            episode_returns[i] += outcome.reward;
            let experience = Experience {
                state: std::mem::take(&mut obs[i]),
                action,
                reward: outcome.reward as f32,
                next_state: outcome.observation.clone(),
                terminal: outcome.terminated,
            };
            agent.observe(i, &experience, outcome.truncated).map_err(agent_err)?;
            obs[i] = outcome.observation;
            if outcome.terminated || outcome.truncated {
                episodes += 1;
                let episode_return = std::mem::take(&mut episode_returns[i]);
                let step = round * n as u64;
                progress(&ClassicProgress::Episode {
                    algorithm: NAMES.0,
                    task: NAMES.1,
                    step,
                    total: steps,
                    episode_return,
                });
                obs[i] = env.reset(None).map_err(env_err)?.0;
            }
        }
    }

    let returns = evaluate(|| CartPole::new(0), config, 3, |o| greedy(&mut agent, o), NAMES)?;
    Ok(finish(NAMES, 475.0, steps, &untrained, returns, episodes, start))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn derived_seeds_differ_by_stream_and_seed() {
        let seeds: std::collections::BTreeSet<u64> =
            (0..50).flat_map(|s| [AGENT, TRAINING, EVALUATION].map(|k| derive_seed(s, k))).collect();
        assert_eq!(seeds.len(), 150);
    }

    #[test]
    fn bad_configs_are_refused_with_the_field() {
        let mut c = ClassicConfig::quick(1);
        c.evaluation_episodes = 0;
        assert!(run(&c, &|_| {}).unwrap_err().to_string().contains("evaluation_episodes"));
        let mut c = ClassicConfig::quick(1);
        c.ppo_steps = 3;
        assert!(run(&c, &|_| {}).unwrap_err().to_string().contains("ppo_steps"));
    }
}
