//! PPO (Schulman et al. 2017) as SIMPPO uses it: a stochastic policy and a state-value critic
//! trained on-policy from short rollouts with the clipped surrogate objective, GAE(λ)
//! advantages, a weighted value loss and an entropy bonus, over several epochs of shuffled
//! minibatches. Discrete actions use a categorical policy over logits; continuous actions a
//! diagonal Gaussian with a tanh-squashed mean and a learned, state-independent log σ.
//! Defaults are SIMPPO's Table 4.2: lr 3e-4, γ 0.99, 2 × 64 hidden, minibatch 10, 5 epochs,
//! clip 0.2, entropy 0.01, value-loss weight 0.05, 50 steps per rollout.
//!
//! Rollouts are kept per environment (a vectorised trainer steps many applications at once),
//! so advantages never leak across applications; an update runs once every environment that
//! has acted holds `rollout_steps` transitions.

use burn::module::{Module, Param};
use burn::optim::GradientsParams;
use burn::tensor::activation::{log_softmax, softmax};
use burn::tensor::{Device, Int, Tensor, TensorData};
use rand::seq::SliceRandom;
use rand::{RngExt, SeedableRng};
use rand_distr::{Distribution, StandardNormal};
use rand_pcg::Pcg64Mcg;
use serde::{Deserialize, Serialize};

use crate::adam::Adam;
use crate::checkpoint::{Checkpoint, module_file};
use crate::config::{self, ConfigError, Hyperparameters};
use crate::net::{Activation, FrozenMlp, Mlp, matrix, values};
use crate::{AgentError, Batch, Experience, check_batch, check_observation};

const LN_2PI: f32 = 1.837_877_1;

/// The action space a PPO policy acts in.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub enum PpoActions {
    /// `n` actions, chosen from a categorical distribution.
    Discrete(usize),
    /// `d` dimensions in [−1, 1], drawn from a diagonal Gaussian (clipped into the box before
    /// the environment sees it; the policy learns from the sample).
    Continuous(usize),
}

impl PpoActions {
    pub fn space(self) -> aware_core::Space {
        match self {
            PpoActions::Discrete(n) => aware_core::Space::Discrete { n },
            PpoActions::Continuous(d) => aware_core::Space::Box { low: vec![-1.0; d], high: vec![1.0; d] },
        }
    }

    fn width(self) -> usize {
        match self {
            PpoActions::Discrete(n) | PpoActions::Continuous(n) => n,
        }
    }

    /// Floats per stored action: the index for discrete actions, the vector otherwise.
    fn stored(self) -> usize {
        match self {
            PpoActions::Discrete(_) => 1,
            PpoActions::Continuous(d) => d,
        }
    }
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct PpoConfig {
    pub hidden: Vec<usize>,
    pub learning_rate: f64,
    pub gamma: f32,
    pub gae_lambda: f32,
    /// Transitions each environment collects before an update.
    pub rollout_steps: usize,
    pub minibatch_size: usize,
    pub epochs: usize,
    pub clip: f32,
    pub entropy_coef: f32,
    pub value_coef: f32,
    /// Per-tensor gradient norm limit.
    pub max_grad_norm: f32,
    /// Initial log σ of the Gaussian policy (continuous actions only).
    pub initial_log_std: f32,
    /// Learn from rewards divided by the running standard deviation of the discounted return
    /// (per environment), as Gymnasium's `NormalizeReward` does for PPO: returns of a
    /// continuing task with γ 0.99 reach ~100 rewards, a scale the critic is slow to fit.
    #[serde(default = "enabled")]
    pub normalize_rewards: bool,
    /// The nonlinearity of the hidden layers (Stable-Baselines3's PPO uses tanh).
    #[serde(default)]
    pub activation: Activation,
    /// Anneal the learning rate and the clip range linearly to zero over this many observed
    /// steps (Stable-Baselines3's `lin_` schedules, CleanRL's `anneal_lr`); `None`: constant.
    #[serde(default)]
    pub anneal_steps: Option<u64>,
    /// Trailing inputs only the critic reads (SIMPPO's auxiliary global state): an agent's
    /// observation is its local state followed by these, the policy reads the first
    /// `state_dim − critic_extra` values and the value network all of them. 0: both read the
    /// whole observation.
    #[serde(default)]
    pub critic_extra: usize,
}

fn enabled() -> bool {
    true
}

impl Default for PpoConfig {
    fn default() -> Self {
        Self {
            hidden: vec![64, 64],
            learning_rate: 3e-4,
            gamma: 0.99,
            gae_lambda: 0.95,
            rollout_steps: 50,
            minibatch_size: 10,
            epochs: 5,
            clip: 0.2,
            entropy_coef: 0.01,
            value_coef: 0.05,
            max_grad_norm: 0.5,
            initial_log_std: -0.5,
            normalize_rewards: true,
            activation: Activation::Relu,
            anneal_steps: None,
            critic_extra: 0,
        }
    }
}

impl Hyperparameters for PpoConfig {
    fn validate(&self) -> Result<(), ConfigError> {
        config::hidden(&self.hidden)?;
        config::positive("learning_rate", self.learning_rate)?;
        config::in_range("gamma", self.gamma, 0.0, 1.0)?;
        config::in_range("gae_lambda", self.gae_lambda, 0.0, 1.0)?;
        config::count("rollout_steps", self.rollout_steps as u64)?;
        config::count("minibatch_size", self.minibatch_size as u64)?;
        config::count("epochs", self.epochs as u64)?;
        config::positive("clip", self.clip)?;
        config::non_negative("entropy_coef", self.entropy_coef)?;
        config::non_negative("value_coef", self.value_coef)?;
        config::positive("max_grad_norm", self.max_grad_norm)?;
        // σ between e^−20 and e^20: beyond, exp over- or underflows in the log-probabilities.
        config::in_range("initial_log_std", self.initial_log_std, -20.0, 20.0)
    }
}

/// Policy and critic as one module so one optimiser steps both through the combined loss.
#[derive(Module, Debug)]
pub struct PolicyValue {
    policy: Mlp,
    value: Mlp,
    log_std: Option<Param<Tensor<1>>>,
}

impl PolicyValue {
    /// `state_dim` is the critic's input width; the policy reads `state_dim − critic_extra`.
    pub fn new(state_dim: usize, actions: PpoActions, config: &PpoConfig, device: &Device) -> Self {
        let policy_dim = state_dim.saturating_sub(config.critic_extra).max(1);
        let sizes = |input: usize, out: usize| {
            let mut s = vec![input];
            s.extend_from_slice(&config.hidden);
            s.push(out);
            s
        };
        let log_std = match actions {
            PpoActions::Discrete(_) => None,
            PpoActions::Continuous(d) => {
                Some(Param::from_tensor(Tensor::<1>::full([d], config.initial_log_std, device)))
            }
        };
        let mlp = |input: usize, out: usize| Mlp::with_activation(&sizes(input, out), config.activation, device);
        Self { policy: mlp(policy_dim, actions.width()), value: mlp(state_dim, 1), log_std }
    }

    /// Logits (discrete) or the Gaussian mean in [−1, 1] (continuous). Columns beyond the
    /// policy's input width (the critic's extra inputs) are not read.
    pub fn head(&self, states: Tensor<2>) -> Tensor<2> {
        let k = self.policy.input_dim();
        let states = if states.dims()[1] > k { states.narrow(1, 0, k) } else { states };
        let out = self.policy.forward(states);
        if self.log_std.is_some() { out.tanh() } else { out }
    }

    pub fn value(&self, states: Tensor<2>) -> Tensor<2> {
        self.value.forward(states)
    }

    /// Every parameter (policy, critic, log σ) flattened in a fixed order.
    pub fn parameters(&self) -> Vec<f32> {
        crate::net::parameters(self).concat()
    }

    fn log_std_values(&self) -> Vec<f32> {
        self.log_std.as_ref().map(|p| p.val().into_data().try_to_vec::<f32>().expect("f32")).unwrap_or_default()
    }

    /// Log-probability of `actions` and the policy entropy, each `[n, 1]`.
    fn evaluate(&self, states: Tensor<2>, actions: &[f32], kind: PpoActions) -> (Tensor<2>, Tensor<2>) {
        let n = states.dims()[0];
        let device = states.device();
        let head = self.head(states);
        match kind {
            PpoActions::Discrete(_) => {
                let log_p = log_softmax(head, 1);
                let index: Vec<i64> = actions.iter().map(|&a| a as i64).collect();
                let index = Tensor::<2, Int>::from_data(TensorData::new(index, [n, 1]), &device);
                let entropy = (softmax(log_p.clone(), 1) * log_p.clone()).sum_dim(1).neg();
                (log_p.gather(1, index), entropy)
            }
            PpoActions::Continuous(d) => {
                let log_std = self.log_std.as_ref().expect("continuous policy has log σ").val().reshape([1, d]);
                let a = matrix(actions, n, d, &device);
                let z = (a - head) / log_std.clone().exp();
                let log_p = (z.powf_scalar(2.0).mul_scalar(-0.5) - log_std.clone())
                    .sum_dim(1)
                    .sub_scalar(0.5 * LN_2PI * d as f32);
                let entropy = log_std.add_scalar(0.5 + 0.5 * LN_2PI).sum_dim(1).repeat_dim(0, n);
                (log_p, entropy)
            }
        }
    }
}

/// One step of one environment's rollout.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
struct Step {
    state: Vec<f32>,
    action: Vec<f32>,
    log_prob: f32,
    value: f32,
    reward: f32,
    next_state: Vec<f32>,
    terminal: bool,
    truncated: bool,
}

/// What the last `act` with exploration decided for one environment, awaiting its outcome.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
struct Pending {
    action: Vec<f32>,
    log_prob: f32,
    value: f32,
}

/// Losses of the last update, averaged over its minibatches.
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize, Deserialize)]
pub struct PpoStats {
    pub policy_loss: f32,
    pub value_loss: f32,
    pub entropy: f32,
    /// Fraction of samples whose probability ratio left [1 − clip, 1 + clip].
    pub clip_fraction: f32,
}

pub struct Ppo {
    pub config: PpoConfig,
    state_dim: usize,
    actions: PpoActions,
    device: Device,
    net: PolicyValue,
    /// A gradient-free copy for acting, refreshed after every update.
    acting: PolicyValue,
    /// The acting policy's MLP as plain floats for greedy serving, built on first use.
    frozen: std::sync::OnceLock<FrozenMlp>,
    optimizer: Adam,
    rng: Pcg64Mcg,
    pending: Vec<Option<Pending>>,
    /// Per environment: its rollout was cut ([`Ppo::cut`]) and has not gone on since, so an
    /// update does not wait for it to fill.
    stalled: Vec<bool>,
    rollouts: Vec<Vec<Step>>,
    steps: u64,
    /// Rollout chains cut ([`Ppo::cut`]).
    cuts: u64,
    updates: u64,
    last: Option<PpoStats>,
    /// Discounted return so far per environment, and the running variance of all of them.
    returns: Vec<f64>,
    return_stats: RunningVariance,
    /// Demonstrations every update keeps the policy near ([`Ppo::set_behaviour_anchor`]).
    anchor: Option<Anchor>,
}

/// Everything a [`Ppo`] agent's training goes on from, for a run stopped and taken up again
/// ([`Ppo::training_state`], [`Ppo::resume`]): the policy and critic, Adam's moments (in the
/// network's parameter order), the sampling generator, each environment's rollout so far and
/// the action awaiting its outcome, the running return statistics and the behaviour anchor.
/// The acting copy is the network itself, as after every change.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct PpoTraining {
    config: PpoConfig,
    state_dim: usize,
    actions: PpoActions,
    net: Vec<Vec<f32>>,
    optimizer: crate::adam::AdamState,
    rng: Pcg64Mcg,
    pending: Vec<Option<Pending>>,
    stalled: Vec<bool>,
    rollouts: Vec<Vec<Step>>,
    steps: u64,
    cuts: u64,
    updates: u64,
    last: Option<PpoStats>,
    returns: Vec<f64>,
    return_stats: RunningVariance,
    anchor: Option<Anchor>,
}

/// Another policy's actions in the states it took them in, and how strongly each update holds
/// this one to them.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
struct Anchor {
    states: Vec<f32>,
    actions: Vec<f32>,
    n: usize,
    weight: f32,
}

/// How behaviour cloning fits a continuous policy's mean to demonstrated actions
/// ([`Ppo::imitate_with`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CloningLoss {
    /// Squared error: the conditional mean.
    Squared,
    /// Absolute error: the conditional median.
    Absolute,
}

/// Rows `rows` of the row-major `src` (`width` values each), in that order: a minibatch.
fn gather_rows(src: &[f32], rows: &[usize], width: usize) -> Vec<f32> {
    rows.iter().flat_map(|&i| src[i * width..(i + 1) * width].iter().copied()).collect()
}

/// Shifts and scales `values` to mean 0 and standard deviation 1 (as PPO's advantages are).
fn standardise(values: &mut [f32]) {
    let n = values.len().max(1) as f32;
    let mean = values.iter().sum::<f32>() / n;
    let std = (values.iter().map(|a| (a - mean).powi(2)).sum::<f32>() / n).sqrt();
    values.iter_mut().for_each(|a| *a = (*a - mean) / (std + 1e-8));
}

/// Welford's running mean and variance.
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize, Deserialize)]
struct RunningVariance {
    count: f64,
    mean: f64,
    m2: f64,
}

impl RunningVariance {
    fn push(&mut self, x: f64) {
        self.count += 1.0;
        let d = x - self.mean;
        self.mean += d / self.count;
        self.m2 += d * (x - self.mean);
    }

    fn std(&self) -> f64 {
        if self.count < 2.0 { 1.0 } else { (self.m2 / self.count).sqrt() }
    }
}

impl Ppo {
    pub fn new(state_dim: usize, actions: PpoActions, config: PpoConfig, seed: u64) -> Self {
        let device = Device::default().autodiff();
        let net = crate::net::seeded(seed, || PolicyValue::new(state_dim, actions, &config, &device));
        let optimizer = Adam::new(1e-5, Some(config.max_grad_norm));
        Self {
            acting: net.valid(),
            frozen: std::sync::OnceLock::new(),
            net,
            optimizer,
            rng: Pcg64Mcg::seed_from_u64(seed),
            pending: Vec::new(),
            stalled: Vec::new(),
            rollouts: Vec::new(),
            config,
            state_dim,
            actions,
            device,
            steps: 0,
            cuts: 0,
            updates: 0,
            last: None,
            returns: Vec::new(),
            return_stats: RunningVariance::default(),
            anchor: None,
        }
    }

    pub fn action_space(&self) -> aware_core::Space {
        self.actions.space()
    }

    /// A copy of the trained policy and critic (what parameter sharing hands a new agent).
    pub fn weights(&self) -> PolicyValue {
        self.net.clone()
    }

    /// Replaces the policy and critic with `weights` (of the same shapes), keeping the
    /// optimiser, rollouts, reward statistics and any behaviour anchor.
    pub fn set_weights(&mut self, weights: PolicyValue) -> Result<(), AgentError> {
        if weights.parameters().len() != self.net.parameters().len() {
            return Err(AgentError::BadObservation(format!(
                "weights hold {} parameters, the agent {}",
                weights.parameters().len(),
                self.net.parameters().len()
            )));
        }
        self.net = weights;
        self.refresh_acting();
        Ok(())
    }

    /// Sets the Gaussian policy's σ to `sigma` in every dimension (it stays a learned
    /// parameter, a new one: Adam's moments for it start afresh): how widely it explores from
    /// here on. Like [`Ppo::imitate`] it changes the policy, so any partial rollout and any
    /// action awaiting its outcome (sampled by the old policy) are discarded. Refused for a
    /// discrete policy and for a σ that is not a positive finite number.
    pub fn set_exploration_std(&mut self, sigma: f32) -> Result<(), AgentError> {
        if !(sigma.is_finite() && sigma > 0.0) {
            return Err(AgentError::Invalid(format!("exploration σ {sigma} is not a positive number")));
        }
        let PpoActions::Continuous(d) = self.actions else {
            return Err(AgentError::Invalid("a discrete PPO policy has no exploration σ".into()));
        };
        let device = self.device.clone();
        self.net.log_std = Some(Param::from_tensor(Tensor::<1>::full([d], sigma.ln(), &device)));
        self.policy_changed();
        Ok(())
    }

    /// The acting copy (and its fused serving form) follow the trained network.
    fn refresh_acting(&mut self) {
        self.acting = self.net.valid();
        self.frozen = std::sync::OnceLock::new();
    }

    /// The policy was changed outside an update: what the old one sampled is not learned from.
    fn policy_changed(&mut self) {
        self.refresh_acting();
        self.pending.clear();
        self.rollouts.clear();
        self.stalled.clear();
    }

    /// Refuses discrete actions that are not indices of the policy's actions.
    fn check_actions(&self, actions: &[f32]) -> Result<(), AgentError> {
        if let PpoActions::Discrete(k) = self.actions
            && let Some(bad) = actions.iter().find(|a| !(a.fract() == 0.0 && **a >= 0.0 && (**a as usize) < k))
        {
            return Err(AgentError::Invalid(format!("action {bad} is not one of the {k} discrete actions")));
        }
        Ok(())
    }

    /// σ of each dimension of a Gaussian policy (empty for a discrete one).
    pub fn exploration_std(&self) -> Vec<f32> {
        self.acting.log_std_values().iter().map(|l| l.exp()).collect()
    }

    /// The acting policy network's layers as plain floats (for batched serving across agents).
    pub fn policy_layers(&self) -> Vec<crate::net::FrozenLinear> {
        self.acting.policy.frozen_layers()
    }

    /// The policy's input width: the observation less the critic's extra inputs.
    pub fn policy_dim(&self) -> usize {
        self.acting.policy.input_dim()
    }

    /// The observation width the agent takes (policy inputs and critic-only inputs).
    pub fn state_dim(&self) -> usize {
        self.state_dim
    }

    pub fn updates(&self) -> u64 {
        self.updates
    }

    /// Transitions observed (on-policy steps learned from) over the agent's life.
    pub fn observed(&self) -> u64 {
        self.steps
    }

    /// Times a rollout chain was cut ([`Ppo::cut`]) over the agent's life.
    pub fn cuts(&self) -> u64 {
        self.cuts
    }

    pub fn last_update(&self) -> Option<PpoStats> {
        self.last
    }

    /// Exploration left in the policy: σ averaged over dimensions (continuous), or the last
    /// update's entropy as a fraction of the uniform policy's (discrete; 1 before any update).
    pub fn exploration(&self) -> f32 {
        match self.actions {
            PpoActions::Continuous(d) => self.exploration_std().iter().sum::<f32>() / d as f32,
            PpoActions::Discrete(n) => self.last.map_or(1.0, |s| s.entropy / (n as f32).ln()),
        }
    }

    fn heads(&self, obs: &[f32], n: usize) -> Vec<f32> {
        values(self.acting.head(matrix(obs, n, self.state_dim, &Device::default())))
    }

    /// The most likely action for each of `n` observations (row-major): the argmax index as
    /// a float (discrete) or the Gaussian mean (continuous), `stored()` floats per row; through
    /// the fused inference path (equal to the burn forward up to float rounding).
    pub fn greedy_batch(&self, obs: &[f32], n: usize) -> Result<Vec<f32>, AgentError> {
        check_batch(obs, n, self.state_dim)?;
        let frozen = self.frozen.get_or_init(|| self.acting.policy.frozen());
        Ok(crate::frozen::greedy_rows(frozen, self.state_dim, self.output(), obs, n))
    }

    pub fn greedy(&self, obs: &[f32]) -> Result<Vec<f32>, AgentError> {
        check_observation(obs, self.state_dim)?;
        self.greedy_batch(obs, 1)
    }

    /// The greedy policy as it is now, frozen: later updates do not move it
    /// ([`crate::FrozenPolicy`]).
    pub fn frozen_policy(&self) -> crate::FrozenPolicy {
        crate::FrozenPolicy::new(self.acting.policy.frozen(), self.state_dim, self.output())
    }

    /// How the policy network's outputs become an action.
    fn output(&self) -> crate::frozen::Output {
        match self.actions {
            PpoActions::Discrete(a) => crate::frozen::Output::Argmax(a),
            PpoActions::Continuous(_) => crate::frozen::Output::Tanh,
        }
    }

    /// One action per environment (row `i` of `states` acts for environment `i`). With
    /// `explore` the action is sampled and remembered until [`Ppo::observe`] brings its
    /// outcome; without, it is the greedy action and nothing is recorded.
    pub fn act(&mut self, states: &[Vec<f32>], explore: bool) -> Result<Vec<Vec<f32>>, AgentError> {
        let n = states.len();
        let flat: Vec<f32> = states.iter().flat_map(|s| s.iter().copied()).collect();
        if let Some(bad) = states.iter().position(|s| s.len() != self.state_dim) {
            return Err(AgentError::BadObservation(format!(
                "row {bad} has dimension {}, the agent expects {}",
                states[bad].len(),
                self.state_dim
            )));
        }
        if !explore {
            let greedy = self.greedy_batch(&flat, n)?;
            return Ok(greedy.chunks(self.actions.stored()).map(<[f32]>::to_vec).collect());
        }
        let envs: Vec<usize> = (0..n).collect();
        self.sample_for(&envs, &flat)
    }

    /// Samples one action for each of `envs` (row `i` of the row-major `states` acts for
    /// environment `envs[i]`) and remembers it until [`Ppo::observe`] brings that environment's
    /// outcome: for a caller whose environments do not all act every step (the lifecycle's
    /// apps, of which only those learning online sample). Environments must be distinct.
    pub fn sample_for(&mut self, envs: &[usize], states: &[f32]) -> Result<Vec<Vec<f32>>, AgentError> {
        let n = envs.len();
        check_batch(states, n, self.state_dim)?;
        if let Some(i) = (1..n).find(|&i| envs[..i].contains(&envs[i])) {
            return Err(AgentError::Invalid(format!("environment {} is given twice", envs[i])));
        }
        let heads = self.heads(states, n);
        let state_values = values(self.acting.value(matrix(states, n, self.state_dim, &Device::default())));
        let log_std = self.acting.log_std_values();
        let most = envs.iter().max().map_or(0, |&e| e + 1);
        if self.pending.len() < most {
            self.pending.resize(most, None);
        }
        let mut out = Vec::with_capacity(n);
        for (i, head) in heads.chunks(self.actions.width()).enumerate() {
            let (action, log_prob) = match self.actions {
                PpoActions::Discrete(_) => {
                    let max = head.iter().copied().fold(f32::NEG_INFINITY, f32::max);
                    let total: f32 = head.iter().map(|l| (l - max).exp()).sum();
                    let mut u = self.rng.random::<f32>() * total;
                    let mut pick = head.len() - 1;
                    for (k, l) in head.iter().enumerate() {
                        u -= (l - max).exp();
                        if u <= 0.0 {
                            pick = k;
                            break;
                        }
                    }
                    (vec![pick as f32], head[pick] - max - total.ln())
                }
                PpoActions::Continuous(d) => {
                    let mut a = Vec::with_capacity(d);
                    let mut log_prob = -0.5 * LN_2PI * d as f32;
                    for (mean, ls) in head.iter().zip(&log_std) {
                        let z: f32 = StandardNormal.sample(&mut self.rng);
                        a.push(mean + ls.exp() * z);
                        log_prob += -0.5 * z * z - ls;
                    }
                    (a, log_prob)
                }
            };
            self.pending[envs[i]] = Some(Pending { action: action.clone(), log_prob, value: state_values[i] });
            out.push(action);
        }
        Ok(out)
    }

    /// The outcome of the last explored action in environment `env`: `e.action` must be the
    /// action `act` returned (it is checked). `truncated` marks a step limit, where the return
    /// bootstraps from the next state's value; `e.terminal` a true end, where it does not.
    /// Runs an update when every environment holds a full rollout; returns its statistics.
    pub fn observe(&mut self, env: usize, e: &Experience, truncated: bool) -> Result<Option<PpoStats>, AgentError> {
        check_observation(&e.state, self.state_dim)?;
        check_observation(&e.next_state, self.state_dim)?;
        if !e.reward.is_finite() {
            return Err(AgentError::BadObservation(format!("reward {} is not finite", e.reward)));
        }
        let pending = self.pending.get_mut(env).and_then(Option::take).ok_or_else(|| {
            AgentError::BadObservation(format!("environment {env} has no explored action awaiting an outcome"))
        })?;
        if pending.action != e.action {
            return Err(AgentError::BadObservation(format!(
                "environment {env}: action {:?} is not the one sampled ({:?})",
                e.action, pending.action
            )));
        }
        if self.rollouts.len() <= env {
            self.rollouts.resize_with(env + 1, Vec::new);
        }
        let reward = if self.config.normalize_rewards {
            if self.returns.len() <= env {
                self.returns.resize(env + 1, 0.0);
            }
            self.returns[env] = self.returns[env] * self.config.gamma as f64 + e.reward as f64;
            self.return_stats.push(self.returns[env]);
            if e.terminal || truncated {
                self.returns[env] = 0.0;
            }
            (e.reward as f64 / (self.return_stats.std() + 1e-8)) as f32
        } else {
            e.reward
        };
        self.rollouts[env].push(Step {
            state: e.state.clone(),
            action: pending.action,
            log_prob: pending.log_prob,
            value: pending.value,
            reward,
            next_state: e.next_state.clone(),
            terminal: e.terminal,
            truncated,
        });
        self.steps += 1;
        if let Some(s) = self.stalled.get_mut(env) {
            *s = false;
        }
        let full = self.config.rollout_steps.max(1);
        let stalled = |i: usize| self.stalled.get(i).copied().unwrap_or(false);
        if self.rollouts.iter().enumerate().filter(|(_, r)| !r.is_empty()).all(|(i, r)| r.len() >= full || stalled(i)) {
            return Ok(Some(self.update()));
        }
        Ok(None)
    }

    /// Whether environment `env` has a sampled action awaiting its outcome.
    pub fn awaiting(&self, env: usize) -> bool {
        self.pending.get(env).is_some_and(Option::is_some)
    }

    /// Ends environment `env`'s rollout chain at its last step, as a step limit does (its return
    /// bootstraps from the critic's value of the next state), and drops any action awaiting its
    /// outcome: the environment skipped a step (another controller acted for it), so no
    /// advantage may reach across the gap. Its steps so far are kept, and until it goes on
    /// the next update does not wait for its rollout to fill (an environment that stops
    /// without [`Ppo::forget`] never holds the others' updates back).
    pub fn cut(&mut self, env: usize) {
        self.cuts += 1;
        if let Some(p) = self.pending.get_mut(env) {
            *p = None;
        }
        if self.stalled.len() <= env {
            self.stalled.resize(env + 1, false);
        }
        self.stalled[env] = true;
        if let Some(last) = self.rollouts.get_mut(env).and_then(|r| r.last_mut()) {
            last.truncated = true;
        }
        if let Some(g) = self.returns.get_mut(env) {
            *g = 0.0;
        }
    }

    /// Drops environment `env`'s partial rollout and any action awaiting its outcome: it stops
    /// learning (an application handed to the fallback or to serving), and an update, which
    /// waits for every environment with steps to hold a full rollout, must not wait for it.
    pub fn forget(&mut self, env: usize) {
        if let Some(p) = self.pending.get_mut(env) {
            *p = None;
        }
        if let Some(s) = self.stalled.get_mut(env) {
            *s = false;
        }
        if let Some(r) = self.rollouts.get_mut(env) {
            r.clear();
        }
        if let Some(g) = self.returns.get_mut(env) {
            *g = 0.0;
        }
    }

    /// GAE(λ) advantages and returns for one environment's rollout. The chain is cut at every
    /// episode end; a truncated or unfinished end bootstraps from the critic's value of the
    /// next state, a terminal end from zero.
    fn advantages(&self, steps: &[Step], bootstrap: &[f32]) -> (Vec<f32>, Vec<f32>) {
        let (g, l) = (self.config.gamma, self.config.gae_lambda);
        let mut adv = vec![0.0; steps.len()];
        let mut next_adv = 0.0;
        for t in (0..steps.len()).rev() {
            let s = &steps[t];
            let last = t + 1 == steps.len();
            let cut = s.terminal || s.truncated || last;
            let next_value = if s.terminal {
                0.0
            } else if cut {
                bootstrap[t]
            } else {
                steps[t + 1].value
            };
            let delta = s.reward + g * next_value - s.value;
            next_adv = delta + if cut { 0.0 } else { g * l * next_adv };
            adv[t] = next_adv;
        }
        let returns = adv.iter().zip(steps).map(|(a, s)| a + s.value).collect();
        (adv, returns)
    }

    /// The fraction of the learning rate and clip range left: 1, or falling linearly to 0
    /// over `anneal_steps` observed steps (counted at the update, as Stable-Baselines3 does).
    pub fn schedule_remaining(&self) -> f64 {
        match self.config.anneal_steps {
            Some(total) if total > 0 => (1.0 - self.steps as f64 / total as f64).max(0.0),
            _ => 1.0,
        }
    }

    /// Behaviour cloning: fits the policy to `actions` another policy took in `states` (`n`
    /// rows each, row-major), for `epochs` passes in shuffled minibatches of 64 at the
    /// configured learning rate, so PPO starts from what that policy (a rule-based fallback)
    /// does. Continuous: the Gaussian mean regresses on the actions (clipped into the box) by
    /// squared error, σ left as it is so that the policy still explores; discrete: the
    /// log-likelihood of the actions taken. The critic is not touched. Any partial rollout and
    /// any action awaiting its outcome (sampled by the policy before) are discarded. Returns the
    /// last epoch's mean loss.
    pub fn imitate(&mut self, states: &[f32], actions: &[f32], n: usize, epochs: usize) -> Result<f32, AgentError> {
        self.imitate_with(states, actions, n, epochs, CloningLoss::Squared)
    }

    /// [`Ppo::imitate`] with the continuous policy's mean fitted by `loss`: squared error (the
    /// conditional mean of the demonstrated actions) or absolute error (their conditional
    /// median). A rule-based fallback mostly holds and now and then jumps; where its states
    /// overlap, the mean is a small drift it never makes and the median is what it does most
    /// often. Discrete policies take the log-likelihood either way.
    pub fn imitate_with(
        &mut self,
        states: &[f32],
        actions: &[f32],
        n: usize,
        epochs: usize,
        loss: CloningLoss,
    ) -> Result<f32, AgentError> {
        let actions = self.demonstrated_actions(states, actions, n)?;
        let width = self.actions.stored();
        let mut order: Vec<usize> = (0..n).collect();
        let mut last = f32::NAN;
        let d = &self.device;
        for _ in 0..epochs {
            order.shuffle(&mut self.rng);
            let (mut total, mut batches) = (0.0, 0);
            for chunk in order.chunks(64) {
                let m = chunk.len();
                let gather = |src: &[f32], w: usize| gather_rows(src, chunk, w);
                let s = matrix(&gather(states, self.state_dim), m, self.state_dim, d);
                let a = gather(&actions, width);
                let loss = match self.actions {
                    PpoActions::Continuous(k) => {
                        let error = self.net.head(s) - matrix(&a, m, k, d);
                        match loss {
                            CloningLoss::Squared => error.powf_scalar(2.0).mean(),
                            CloningLoss::Absolute => error.abs().mean(),
                        }
                    }
                    PpoActions::Discrete(_) => self.net.evaluate(s, &a, self.actions).0.mean().neg(),
                };
                total += values(loss.clone().reshape([1, 1]).detach())[0];
                batches += 1;
                let grads = GradientsParams::from_grads(loss.backward(), &self.net);
                self.net = self.optimizer.step(self.config.learning_rate, self.net.clone(), grads);
            }
            last = total / batches.max(1) as f32;
        }
        self.policy_changed();
        Ok(last)
    }

    /// Holds the policy near another policy's `actions` in `states` (`n` rows each, row-major)
    /// while it learns: every minibatch of every update adds `weight` × the demonstrations'
    /// negative log-likelihood under the policy, on as many of them drawn at random, to PPO's
    /// loss — the augmented loss of DAPG (Rajeswaran et al., "Learning Complex Dexterous
    /// Manipulation with Deep Reinforcement Learning and Demonstrations", RSS 2018), kept
    /// constant as TD3+BC's behaviour term is. For a Gaussian policy σ is held constant in that
    /// term, so it pulls the mean towards the demonstrations in the units of PPO's own policy
    /// gradient ((a − μ)/σ² per unit of advantage) and leaves exploration to PPO: where the
    /// (standardised) advantages point away from the demonstrations the mean settles of the
    /// order of σ/w from them (the test's one-step problem: 0.19 and 0.019 at σ 0.1 and weights
    /// 0.3 and 3, 0.80 unanchored). The pull grows as σ shrinks: the same weight holds a policy
    /// exploring with σ 0.05 about twelve times closer than one with σ e^−0.5. Demonstrations
    /// at the edge of the box (±1) draw the tanh mean towards saturation, as behaviour cloning
    /// does. Replaces any anchor set before; weight 0 (or no demonstrations) removes it. Not
    /// kept in checkpoints; kept through [`Ppo::set_weights`].
    pub fn set_behaviour_anchor(
        &mut self,
        states: &[f32],
        actions: &[f32],
        n: usize,
        weight: f32,
    ) -> Result<(), AgentError> {
        if !(weight.is_finite() && weight >= 0.0) {
            return Err(AgentError::Invalid(format!("behaviour anchor weight {weight} is not a non-negative number")));
        }
        let actions = self.demonstrated_actions(states, actions, n)?;
        self.anchor = (weight > 0.0 && n > 0).then(|| Anchor { states: states.to_vec(), actions, n, weight });
        Ok(())
    }

    /// Another policy's `actions` in `states` (`n` rows each) as this one learns from them:
    /// both checked, continuous actions clipped into the box, discrete ones refused unless
    /// they are the policy's.
    fn demonstrated_actions(&self, states: &[f32], actions: &[f32], n: usize) -> Result<Vec<f32>, AgentError> {
        check_batch(states, n, self.state_dim)?;
        check_batch(actions, n, self.actions.stored())?;
        self.check_actions(actions)?;
        Ok(match self.actions {
            PpoActions::Continuous(_) => actions.iter().map(|x| x.clamp(-1.0, 1.0)).collect(),
            PpoActions::Discrete(_) => actions.to_vec(),
        })
    }

    /// The weight of the behaviour anchor in force (0: none).
    pub fn behaviour_anchor_weight(&self) -> f32 {
        self.anchor.as_ref().map_or(0.0, |a| a.weight)
    }

    /// The anchor's term for one minibatch of `m` demonstrations drawn at random: weight ×
    /// their mean negative log-likelihood, σ held constant (constants dropped).
    fn anchor_loss(&mut self, m: usize) -> Option<Tensor<1>> {
        let anchor = self.anchor.as_ref()?;
        let rows: Vec<usize> = (0..m).map(|_| self.rng.random_range(0..anchor.n)).collect();
        let d = &self.device;
        let width = self.actions.stored();
        let s = matrix(&gather_rows(&anchor.states, &rows, self.state_dim), m, self.state_dim, d);
        let a = gather_rows(&anchor.actions, &rows, width);
        let nll = match self.actions {
            PpoActions::Continuous(k) => {
                let log_std = self.net.log_std.as_ref().expect("continuous policy has log σ").val().detach();
                let inv_var = log_std.mul_scalar(-2.0).exp().reshape([1, k]);
                ((self.net.head(s) - matrix(&a, m, k, d)).powf_scalar(2.0) * inv_var).sum_dim(1).mean().mul_scalar(0.5)
            }
            PpoActions::Discrete(_) => self.net.evaluate(s, &a, self.actions).0.mean().neg(),
        };
        Some(nll.mul_scalar(anchor.weight))
    }

    /// The gradient, with respect to the states of `b`, of the actor-critic loss on its
    /// transitions at the current parameters (which it leaves as they are): the critic's
    /// `value_coef` · mean (V(s) − y)², y = r̃ + γ (1 − terminal) V(s'), less the policy
    /// gradient's mean Â · log π(a | s), Â the TD error y − V(s) standardised over the batch and
    /// held constant; r̃ is the reward as the critic learns it (divided by the running return
    /// spread with `normalize_rewards`). Row-major `[b.size, state_dim]`. A meta-learner whose
    /// embedding is part of the state back-propagates its part of it, as through
    /// [`crate::ddpg::Ddpg::state_gradient`] for DDPG. The policy's term is what carries a
    /// workload property into the embedding: V(s) averages over the policy's own actions, so
    /// two apps whose best actions differ while their values do not give the critic's term
    /// nothing to tell them apart.
    pub fn state_gradient(&self, b: &Batch) -> Result<Vec<f32>, AgentError> {
        check_batch(&b.states, b.size, self.state_dim)?;
        check_batch(&b.next_states, b.size, self.state_dim)?;
        check_batch(&b.actions, b.size, self.actions.stored())?;
        self.check_actions(&b.actions)?;
        if b.rewards.len() != b.size || b.terminals.len() != b.size {
            return Err(AgentError::Invalid(format!(
                "{} rewards and {} terminal flags for a batch of {}",
                b.rewards.len(),
                b.terminals.len(),
                b.size
            )));
        }
        let (y, advantages) = self.td_targets(b);
        let states = matrix(&b.states, b.size, self.state_dim, &self.device).require_grad();
        let loss = self.actor_critic_loss(states.clone(), b, &y, &advantages);
        let grads = loss.backward();
        Ok(states.grad(&grads).map(values).unwrap_or_else(|| vec![0.0; b.size * self.state_dim]))
    }

    /// The TD targets y and the standardised TD errors Â of [`Ppo::state_gradient`].
    fn td_targets(&self, b: &Batch) -> (Vec<f32>, Vec<f32>) {
        let plain = Device::default();
        let scale = if self.config.normalize_rewards { (1.0 / (self.return_stats.std() + 1e-8)) as f32 } else { 1.0 };
        let now = values(self.acting.value(matrix(&b.states, b.size, self.state_dim, &plain)));
        let next = values(self.acting.value(matrix(&b.next_states, b.size, self.state_dim, &plain)));
        let y: Vec<f32> =
            (0..b.size).map(|i| b.rewards[i] * scale + self.config.gamma * (1.0 - b.terminals[i]) * next[i]).collect();
        let mut advantages: Vec<f32> = y.iter().zip(&now).map(|(y, v)| y - v).collect();
        standardise(&mut advantages);
        (y, advantages)
    }

    /// [`Ppo::state_gradient`]'s loss at `states`, the targets and advantages held fixed, the
    /// parameters taking no gradient.
    fn actor_critic_loss(&self, states: Tensor<2>, b: &Batch, y: &[f32], advantages: &[f32]) -> Tensor<1> {
        let d = &self.device;
        let net = self.net.clone().no_grad();
        let (log_p, _) = net.evaluate(states.clone(), &b.actions, self.actions);
        let policy = (log_p * matrix(advantages, b.size, 1, d)).mean().neg();
        let value = (net.value(states) - matrix(y, b.size, 1, d)).powf_scalar(2.0).mean();
        policy + value.mul_scalar(self.config.value_coef)
    }

    fn update(&mut self) -> PpoStats {
        let rollouts = std::mem::take(&mut self.rollouts);
        self.stalled.clear();
        let mut c = self.config.clone();
        let remaining = self.schedule_remaining();
        c.learning_rate *= remaining;
        c.clip *= remaining as f32;
        let plain = Device::default();
        let (mut states, mut actions, mut old_log_p, mut advantages, mut returns) =
            (Vec::new(), Vec::new(), Vec::new(), Vec::new(), Vec::new());
        for steps in &rollouts {
            // Values of next states, needed only where an episode was cut.
            let next: Vec<f32> = steps.iter().flat_map(|s| s.next_state.iter().copied()).collect();
            let bootstrap = values(self.acting.value(matrix(&next, steps.len(), self.state_dim, &plain)));
            let (adv, ret) = self.advantages(steps, &bootstrap);
            for (s, (a, r)) in steps.iter().zip(adv.into_iter().zip(ret)) {
                states.extend_from_slice(&s.state);
                actions.extend_from_slice(&s.action);
                old_log_p.push(s.log_prob);
                advantages.push(a);
                returns.push(r);
            }
        }
        // Normalised over the whole rollout: minibatches of 10 are too small to normalise alone.
        let n = advantages.len();
        standardise(&mut advantages);
        let width = self.actions.stored();
        let mut order: Vec<usize> = (0..n).collect();
        let mut totals = PpoStats::default();
        let mut minibatches = 0;
        let d = &self.device.clone();
        for _ in 0..c.epochs {
            order.shuffle(&mut self.rng);
            for chunk in order.chunks(c.minibatch_size.max(1)) {
                let m = chunk.len();
                let gather = |src: &[f32], w: usize| gather_rows(src, chunk, w);
                let s = matrix(&gather(&states, self.state_dim), m, self.state_dim, d);
                let (log_p, entropy) = self.net.evaluate(s.clone(), &gather(&actions, width), self.actions);
                let old = matrix(&gather(&old_log_p, 1), m, 1, d);
                let adv = matrix(&gather(&advantages, 1), m, 1, d);
                let ratio = (log_p - old).exp();
                let clipped = ratio.clone().clamp(1.0 - c.clip, 1.0 + c.clip);
                let ratios = values(ratio.clone().detach());
                let policy_loss = (ratio * adv.clone()).min_pair(clipped * adv).mean().neg();
                let value_loss = (self.net.value(s) - matrix(&gather(&returns, 1), m, 1, d)).powf_scalar(2.0).mean();
                let entropy = entropy.mean();
                let mut loss = policy_loss.clone() + value_loss.clone().mul_scalar(c.value_coef)
                    - entropy.clone().mul_scalar(c.entropy_coef);
                if let Some(anchor) = self.anchor_loss(m) {
                    loss = loss + anchor;
                }
                let scalar = |t: Tensor<1>| values(t.reshape([1, 1]).detach())[0];
                totals.policy_loss += scalar(policy_loss);
                totals.value_loss += scalar(value_loss);
                totals.entropy += scalar(entropy);
                totals.clip_fraction += ratios.iter().filter(|r| (**r - 1.0).abs() > c.clip).count() as f32 / m as f32;
                minibatches += 1;
                let grads = GradientsParams::from_grads(loss.backward(), &self.net);
                self.net = self.optimizer.step(c.learning_rate, self.net.clone(), grads);
            }
        }
        let k = minibatches.max(1) as f32;
        let stats = PpoStats {
            policy_loss: totals.policy_loss / k,
            value_loss: totals.value_loss / k,
            entropy: totals.entropy / k,
            clip_fraction: totals.clip_fraction / k,
        };
        self.refresh_acting();
        self.updates += 1;
        self.last = Some(stats);
        stats
    }

    /// Everything its training goes on from ([`PpoTraining`]).
    pub fn training_state(&self) -> PpoTraining {
        PpoTraining {
            config: self.config.clone(),
            state_dim: self.state_dim,
            actions: self.actions,
            net: crate::net::parameters(&self.net),
            optimizer: self.optimizer.state(&self.net),
            rng: self.rng.clone(),
            pending: self.pending.clone(),
            stalled: self.stalled.clone(),
            rollouts: self.rollouts.clone(),
            steps: self.steps,
            cuts: self.cuts,
            updates: self.updates,
            last: self.last,
            returns: self.returns.clone(),
            return_stats: self.return_stats,
            anchor: self.anchor.clone(),
        }
    }

    /// [`Ppo::training_state`] with the rollouts and the behaviour anchor (a pool's probe
    /// demonstrations) moved into it, not copied: the agent holds none until
    /// [`Ppo::end_lending`] hands them back, and must not act or learn meanwhile.
    pub fn lend_training_state(&mut self) -> PpoTraining {
        let anchor = self.anchor.take();
        let rollouts = std::mem::take(&mut self.rollouts);
        PpoTraining { anchor, rollouts, ..self.training_state() }
    }

    /// Takes back what [`Ppo::lend_training_state`] lent.
    pub fn end_lending(&mut self, state: PpoTraining) {
        self.anchor = state.anchor;
        self.rollouts = state.rollouts;
    }

    /// The agent `state` was taken from, as it was: it samples, learns and serves on exactly as
    /// that agent would have. A state no agent could have had (a network or moments of the
    /// wrong sizes, values that are not finite, a rollout, pending action or anchor that does
    /// not fit the spaces, a config the agent refuses) is refused, saying which part.
    pub fn resume(state: PpoTraining) -> Result<Self, AgentError> {
        let bad = |part: &str, reason: String| AgentError::Invalid(format!("PPO training state, {part}: {reason}"));
        state.config.validate().map_err(|e| bad("config", e.to_string()))?;
        let (s, width) = (state.state_dim, state.actions.stored());
        let valid_actions = match state.actions {
            PpoActions::Continuous(d) => d > 0 && d <= crate::MAX_WIDTH,
            PpoActions::Discrete(n) => n > 0 && n <= crate::MAX_WIDTH,
        };
        if s == 0 || s > crate::MAX_WIDTH || !valid_actions {
            return Err(bad("dimensions", format!("{s} state dimensions, actions {:?}", state.actions)));
        }
        let finite = |v: &[f32]| v.iter().all(|x| x.is_finite());
        let action_fits = |a: &[f32]| {
            a.len() == width
                && match state.actions {
                    PpoActions::Continuous(_) => finite(a),
                    PpoActions::Discrete(n) => a.iter().all(|x| x.fract() == 0.0 && *x >= 0.0 && (*x as usize) < n),
                }
        };
        for (env, p) in state.pending.iter().enumerate() {
            if let Some(p) = p
                && !(action_fits(&p.action) && p.log_prob.is_finite() && p.value.is_finite())
            {
                return Err(bad("pending", format!("environment {env}'s awaited action does not fit the actions")));
            }
        }
        for (env, rollout) in state.rollouts.iter().enumerate() {
            let fits = |t: &Step| {
                t.state.len() == s
                    && t.next_state.len() == s
                    && finite(&t.state)
                    && finite(&t.next_state)
                    && action_fits(&t.action)
                    && [t.log_prob, t.value, t.reward].iter().all(|x| x.is_finite())
            };
            if let Some(t) = rollout.iter().position(|t| !fits(t)) {
                return Err(bad("rollouts", format!("environment {env}'s step {t} does not fit {s} state values")));
            }
        }
        let stats = state.return_stats;
        let sound = state.returns.iter().all(|g| g.is_finite())
            && stats.count >= 0.0
            && stats.mean.is_finite()
            && stats.m2.is_finite()
            && stats.m2 >= 0.0;
        if !sound {
            return Err(bad("returns", "the running return statistics are not finite".into()));
        }
        if let Some(a) = &state.anchor
            && (a.n == 0
                || a.n.checked_mul(s) != Some(a.states.len())
                || a.n.checked_mul(width) != Some(a.actions.len())
                || !finite(&a.states)
                || !a.actions.chunks(width.max(1)).all(action_fits)
                || !(a.weight.is_finite() && a.weight > 0.0))
        {
            return Err(bad("anchor", format!("{} demonstrations do not fit {s} state values", a.n)));
        }
        // The network's shapes come from the config; the seed only draws weights replaced below.
        let mut agent = Ppo::new(s, state.actions, state.config, 0);
        agent.net = crate::net::with_parameters(agent.net, state.net).map_err(|e| bad("net", e))?;
        agent.optimizer = Adam::from_state(state.optimizer, &agent.net).map_err(|e| bad("optimizer", e))?;
        agent.acting = agent.net.valid();
        agent.frozen = std::sync::OnceLock::new();
        agent.rng = state.rng;
        agent.pending = state.pending;
        agent.stalled = state.stalled;
        agent.rollouts = state.rollouts;
        agent.steps = state.steps;
        agent.cuts = state.cuts;
        agent.updates = state.updates;
        agent.last = state.last;
        agent.returns = state.returns;
        agent.return_stats = stats;
        agent.anchor = state.anchor;
        Ok(agent)
    }

    pub fn save(
        &self,
        dir: &std::path::Path,
        observation_space: &aware_core::Space,
        training_step: u64,
    ) -> Result<(), AgentError> {
        let weights = module_file(dir, &self.acting)?;
        let step = training_step.max(self.steps);
        let files = [("policy_value.safetensors", weights)];
        crate::checkpoint::check_config(dir, &self.config)?;
        Checkpoint::save(dir, "ppo", &self.config, observation_space, self.actions.space(), step, &files)?;
        Ok(())
    }

    /// Loads a PPO checkpoint for an environment with these spaces (fresh optimiser state).
    pub fn load(
        dir: &std::path::Path,
        observation_space: &aware_core::Space,
        actions: PpoActions,
        seed: u64,
    ) -> Result<Self, AgentError> {
        let mut c = Checkpoint::open(dir, &["ppo"], observation_space, &actions.space())?;
        let mut agent = Ppo::new(observation_space.dim(), actions, c.config()?, seed);
        agent.net = c.module(agent.net.clone(), "policy_value.safetensors")?;
        agent.acting = agent.net.valid();
        agent.frozen = std::sync::OnceLock::new();
        agent.steps = c.meta.training_step;
        Ok(agent)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn step(reward: f32, value: f32, terminal: bool, truncated: bool) -> Step {
        Step {
            state: vec![0.0],
            action: vec![0.0],
            log_prob: 0.0,
            value,
            reward,
            next_state: vec![0.0],
            terminal,
            truncated,
        }
    }

    /// A run stopped, written down and resumed goes on as the run that never stopped: the same
    /// samples, the same updates, the same weights bit for bit, for a Gaussian policy holding a
    /// behaviour anchor over three environments (one cut part way) and for a categorical one,
    /// each taken mid-rollout with actions awaiting their outcomes.
    #[test]
    fn a_resumed_agent_goes_on_exactly_as_the_one_it_was_taken_from() {
        let config = PpoConfig { hidden: vec![8, 8], rollout_steps: 6, minibatch_size: 4, ..PpoConfig::default() };
        for actions in [PpoActions::Continuous(2), PpoActions::Discrete(3)] {
            let mut a = Ppo::new(3, actions, config.clone(), 5);
            let obs = |t: usize, env: usize| {
                vec![(t as f32 * 0.37 + env as f32).sin(), (t as f32 * 0.11).cos(), (t % 7) as f32 / 7.0]
            };
            if let PpoActions::Continuous(_) = actions {
                let states: Vec<f32> = (0..4).flat_map(|t| obs(t, 9)).collect();
                a.set_behaviour_anchor(&states, &[0.5, -0.5, 0.2, 0.1, 0.0, 0.3, -0.9, 0.9], 4, 0.3).unwrap();
            }
            // Every environment acts, then learns what it did; environment 2 is cut at step 9.
            let step = |agent: &mut Ppo, t: usize| {
                let states: Vec<f32> = (0..3).flat_map(|env| obs(t, env)).collect();
                let chosen = agent.sample_for(&[0, 1, 2], &states).unwrap();
                let mut stats = Vec::new();
                for (env, action) in chosen.iter().enumerate() {
                    let e = Experience {
                        state: obs(t, env),
                        action: action.clone(),
                        reward: action.iter().sum::<f32>() - (t % 5) as f32 * 0.1 + env as f32,
                        next_state: obs(t + 1, env),
                        terminal: (t + env).is_multiple_of(11),
                    };
                    if env == 2 && t == 9 {
                        agent.cut(env);
                        continue;
                    }
                    stats.push(agent.observe(env, &e, false).unwrap());
                }
                (chosen, stats)
            };
            for t in 0..16 {
                step(&mut a, t);
            }
            // Mid-rollout, with every environment's next action sampled and awaiting its outcome.
            let states: Vec<f32> = (0..3).flat_map(|env| obs(16, env)).collect();
            let awaited = a.sample_for(&[0, 1, 2], &states).unwrap();
            // Through the bytes a file would hold (CBOR, as `train-meta` keeps it: exact for f64,
            // which JSON's shortest decimal form is not).
            let mut bytes = Vec::new();
            ciborium::into_writer(&a.training_state(), &mut bytes).unwrap();
            let mut b = Ppo::resume(ciborium::from_reader(bytes.as_slice()).unwrap()).unwrap();
            assert_eq!(b.training_state(), a.training_state(), "{actions:?}");
            assert!(a.updates() > 0 && a.rollouts.iter().any(|r| !r.is_empty()), "taken mid-rollout after updates");
            for (agent, awaited) in [(&mut a, &awaited), (&mut b, &awaited)] {
                for (env, action) in awaited.iter().enumerate() {
                    let e = Experience {
                        state: obs(16, env),
                        action: action.clone(),
                        reward: 0.5,
                        next_state: obs(17, env),
                        terminal: false,
                    };
                    agent.observe(env, &e, false).unwrap();
                }
            }
            for t in 17..40 {
                assert_eq!(step(&mut a, t), step(&mut b, t), "step {t}, {actions:?}");
            }
            assert_eq!(a.training_state(), b.training_state(), "{actions:?}");
            assert!(a.updates() >= 5, "{}", a.updates());
            assert_eq!(a.greedy(&obs(3, 0)).unwrap(), b.greedy(&obs(3, 0)).unwrap());
        }
    }

    /// A PPO training state no agent could have had is refused, naming the part.
    #[test]
    fn a_damaged_ppo_training_state_is_refused_naming_the_part() {
        let config = PpoConfig { hidden: vec![4], rollout_steps: 3, minibatch_size: 2, ..PpoConfig::default() };
        let mut agent = Ppo::new(2, PpoActions::Continuous(1), config, 3);
        agent.set_behaviour_anchor(&[0.1, 0.2, 0.3, 0.4], &[0.5, -0.5], 2, 0.3).unwrap();
        for t in 0..4 {
            let state = vec![t as f32, 1.0];
            let action = agent.sample_for(&[0], &state).unwrap().remove(0);
            let e = Experience { state, action, reward: 1.0, next_state: vec![1.0, t as f32], terminal: false };
            agent.observe(0, &e, false).unwrap();
        }
        agent.sample_for(&[0], &[0.0, 0.0]).unwrap();
        let good = agent.training_state();
        assert!(good.rollouts[0].len() == 1 && good.pending[0].is_some() && good.updates == 1);
        type Damage = fn(&mut PpoTraining);
        let cases: [(Damage, &str); 9] = [
            (|s| s.net[0].pop().map(|_| ()).unwrap(), "net: parameter 0 is not"),
            (|s| s.net[1][0] = f32::NAN, "net: parameter 1 is not"),
            (|s| s.optimizer.moments_mut().truncate(1), "optimizer: optimiser holds moments for 1 parameters"),
            (|s| s.rollouts[0][0].state.push(0.0), "rollouts: environment 0's step 0 does not fit 2 state values"),
            (|s| s.pending[0].as_mut().unwrap().action = vec![f32::NAN], "pending: environment 0's awaited action"),
            (|s| s.anchor.as_mut().unwrap().n = 3, "anchor: 3 demonstrations do not fit 2 state values"),
            (|s| s.anchor.as_mut().unwrap().n = usize::MAX, "anchor: 18446744073709551615 demonstrations"),
            (|s| s.return_stats.m2 = f64::NAN, "returns: the running return statistics are not finite"),
            (
                |s| {
                    let a = s.anchor.as_mut().unwrap();
                    (a.n, a.states, a.actions) = (0, Vec::new(), Vec::new());
                },
                "anchor: 0 demonstrations",
            ),
        ];
        for (damage, says) in cases {
            let mut state = good.clone();
            damage(&mut state);
            let e = Ppo::resume(state).err().expect("refused").to_string();
            assert!(e.starts_with("PPO training state, ") && e.contains(says), "{e}");
        }
        assert!(Ppo::resume(good).is_ok());
    }

    /// Sampling for chosen environments records each sample under its environment; a cut ends
    /// that environment's chain at its last step and keeps its steps, forgetting drops them, and
    /// neither touches another environment's.
    #[test]
    fn samples_are_kept_per_environment_and_cut_or_forgotten_alone() {
        let mut ppo = Ppo::new(2, PpoActions::Continuous(1), PpoConfig { rollout_steps: 10, ..Default::default() }, 3);
        let states = [0.1, 0.2, 0.3, 0.4];
        assert!(ppo.sample_for(&[5, 5], &states).is_err(), "an environment given twice");
        for _ in 0..3 {
            let actions = ppo.sample_for(&[2, 5], &states).unwrap();
            assert!(ppo.awaiting(2) && ppo.awaiting(5) && !ppo.awaiting(0));
            for (env, (a, s)) in [2, 5].into_iter().zip(actions.iter().zip(states.chunks(2))) {
                let e = Experience {
                    state: s.to_vec(),
                    action: a.clone(),
                    reward: 1.0,
                    next_state: s.to_vec(),
                    terminal: false,
                };
                ppo.observe(env, &e, false).unwrap();
            }
        }
        ppo.sample_for(&[2, 5], &states).unwrap();
        ppo.cut(2);
        assert!(!ppo.awaiting(2) && ppo.awaiting(5));
        assert_eq!(ppo.rollouts[2].len(), 3);
        assert_eq!(ppo.rollouts[2].iter().map(|s| s.truncated).collect::<Vec<_>>(), [false, false, true]);
        assert!(ppo.rollouts[5].iter().all(|s| !s.truncated));
        ppo.forget(5);
        assert!(ppo.rollouts[5].is_empty() && !ppo.awaiting(5));
        assert_eq!(ppo.rollouts[2].len(), 3);
        // Environment 2 stays cut while 7 fills its rollout: the update does not wait for 2.
        for k in 0..10 {
            let a = ppo.sample_for(&[7], &states[..2]).unwrap().remove(0);
            let e = Experience {
                state: states[..2].to_vec(),
                action: a,
                reward: 1.0,
                next_state: states[..2].to_vec(),
                terminal: false,
            };
            let stats = ppo.observe(7, &e, false).unwrap();
            assert_eq!(stats.is_some(), k == 9, "step {k}");
        }
        assert!(ppo.rollouts.iter().all(Vec::is_empty), "the update took every rollout, the cut one's too");
    }

    /// Demonstrations that hold (0) four times in five and jump to 0.8 once: squared error
    /// clones their mean (0.16), absolute error their median (0, what the demonstrator does).
    #[test]
    fn cloning_by_absolute_error_fits_the_median_action() {
        let n = 500;
        let states = vec![0.5f32; n];
        let actions: Vec<f32> = (0..n).map(|i| if i % 5 == 0 { 0.8 } else { 0.0 }).collect();
        let fitted = |loss| {
            let mut ppo =
                Ppo::new(1, PpoActions::Continuous(1), PpoConfig { learning_rate: 3e-3, ..Default::default() }, 2);
            ppo.imitate_with(&states, &actions, n, 60, loss).unwrap();
            ppo.greedy(&[0.5]).unwrap()[0]
        };
        let (mean, median) = (fitted(CloningLoss::Squared), fitted(CloningLoss::Absolute));
        assert!((mean - 0.16).abs() < 0.03, "squared error: {mean}");
        assert!(median.abs() < 0.03, "absolute error: {median}");
    }

    /// Hand-computed GAE: γ = 0.5, λ = 0.5, three steps with V = 1, 2, 3 and rewards 1, 1, 1.
    #[test]
    fn gae_table() {
        let config = PpoConfig { gamma: 0.5, gae_lambda: 0.5, ..PpoConfig::default() };
        let ppo = Ppo::new(1, PpoActions::Discrete(2), config, 1);
        // (name, terminal flags, truncated flags, bootstrap value, expected advantages)
        type Case = (&'static str, [bool; 3], [bool; 3], f32, [f32; 3]);
        let cases: [Case; 3] = [
            // Unfinished: the last step bootstraps from V(s′) = 4.
            // δ3 = 1 + 0.5·4 − 3 = 0; δ2 = 1 + 0.5·3 − 2 = 0.5; δ1 = 1 + 0.5·2 − 1 = 1.
            // A3 = 0; A2 = 0.5 + 0.25·0 = 0.5; A1 = 1 + 0.25·0.5 = 1.125.
            ("unfinished", [false; 3], [false; 3], 4.0, [1.125, 0.5, 0.0]),
            // Terminal at the end: δ3 = 1 − 3 = −2; A2 = 0.5 − 0.5 = 0; A1 = 1 + 0 = 1.
            ("terminal", [false, false, true], [false; 3], 4.0, [1.0, 0.0, -2.0]),
            // Truncated after step 1: δ1 = 1 + 0.5·V(s′ = bootstrap 4) − 1 = 2, chain cut.
            ("truncated", [false; 3], [true, false, false], 4.0, [2.0, 0.5, 0.0]),
        ];
        for (name, terminal, truncated, boot, want) in cases {
            let steps: Vec<Step> = (0..3).map(|t| step(1.0, (t + 1) as f32, terminal[t], truncated[t])).collect();
            let (adv, ret) = ppo.advantages(&steps, &[boot; 3]);
            for t in 0..3 {
                assert!((adv[t] - want[t]).abs() < 1e-6, "{name}: A{t} = {}, want {}", adv[t], want[t]);
                assert!((ret[t] - (want[t] + (t + 1) as f32)).abs() < 1e-6, "{name}: return {t}");
            }
        }
    }

    #[test]
    fn sampled_log_probability_matches_the_network() {
        for actions in [PpoActions::Discrete(4), PpoActions::Continuous(3)] {
            let mut ppo = Ppo::new(2, actions, PpoConfig::default(), 7);
            let states = vec![vec![0.3, -0.4], vec![0.9, 0.1]];
            let sampled = ppo.act(&states, true).unwrap();
            let flat: Vec<f32> = states.concat();
            let (log_p, _) = ppo.acting.evaluate(matrix(&flat, 2, 2, &Device::default()), &sampled.concat(), actions);
            for (i, theirs) in values(log_p).into_iter().enumerate() {
                let mine = ppo.pending[i].as_ref().unwrap().log_prob;
                assert!((mine - theirs).abs() < 1e-4, "{actions:?} row {i}: {mine} vs {theirs}");
            }
        }
    }

    #[test]
    fn rewards_are_scaled_by_the_running_return_spread() {
        let mut v = RunningVariance::default();
        assert_eq!(v.std(), 1.0, "no scaling before two returns");
        for x in [1.0, 2.0, 3.0, 4.0] {
            v.push(x);
        }
        assert!((v.mean - 2.5).abs() < 1e-12 && (v.std() - 1.25f64.sqrt()).abs() < 1e-12);
        // Rewards 1, 1, 1 with γ = 0.5: returns 1, 1.5, 1.75; the third reward is stored as
        // 1 / std(1, 1.5, 1.75).
        let config = PpoConfig { gamma: 0.5, rollout_steps: 100, ..PpoConfig::default() };
        let mut ppo = Ppo::new(1, PpoActions::Discrete(2), config, 1);
        for _ in 0..3 {
            let a = ppo.act(&[vec![0.0]], true).unwrap().remove(0);
            let e = Experience { state: vec![0.0], action: a, reward: 1.0, next_state: vec![0.0], terminal: false };
            ppo.observe(0, &e, false).unwrap();
        }
        let mean = (1.0 + 1.5 + 1.75) / 3.0;
        let std = ([1.0f64, 1.5, 1.75].iter().map(|x| (x - mean) * (x - mean)).sum::<f64>() / 3.0).sqrt();
        assert!((ppo.rollouts[0][2].reward as f64 - 1.0 / std).abs() < 1e-5, "{}", ppo.rollouts[0][2].reward);
    }

    #[test]
    fn fused_greedy_actions_match_the_network() {
        let obs: Vec<f32> = (0..6 * 3).map(|i| ((i * 7) % 11) as f32 / 11.0 - 0.5).collect();
        for actions in [PpoActions::Discrete(4), PpoActions::Continuous(2)] {
            let ppo = Ppo::new(3, actions, PpoConfig::default(), 5);
            let heads = values(ppo.acting.head(matrix(&obs, 6, 3, &Device::default())));
            let greedy = ppo.greedy_batch(&obs, 6).unwrap();
            match actions {
                PpoActions::Discrete(a) => {
                    let want: Vec<f32> = heads.chunks(a).map(|r| crate::tabular::argmax(r) as f32).collect();
                    assert_eq!(greedy, want);
                }
                PpoActions::Continuous(_) => {
                    for (g, h) in greedy.iter().zip(&heads) {
                        assert!((g - h).abs() < 1e-5, "{g} vs {h}");
                    }
                }
            }
        }
    }

    /// With critic-only inputs the policy ignores them (greedy and sampled log-probabilities
    /// alike) while the critic reads them.
    #[test]
    fn critic_only_inputs_reach_the_critic_not_the_policy() {
        let config = PpoConfig { critic_extra: 2, ..PpoConfig::default() };
        let mut ppo = Ppo::new(5, PpoActions::Discrete(4), config, 3);
        assert_eq!((ppo.policy_dim(), ppo.state_dim()), (3, 5));
        let a = vec![0.1, 0.2, 0.3, 0.0, 0.0];
        let b = vec![0.1, 0.2, 0.3, 5.0, -5.0];
        assert_eq!(ppo.greedy(&a).unwrap(), ppo.greedy(&b).unwrap());
        let d = Device::default();
        let heads = |s: &[f32]| values(ppo.acting.head(matrix(s, 1, 5, &d)));
        assert_eq!(heads(&a), heads(&b));
        let value = |s: &[f32]| values(ppo.acting.value(matrix(s, 1, 5, &d)))[0];
        assert_ne!(value(&a), value(&b));
        // It trains: a full rollout runs an update through the sliced policy.
        let config = PpoConfig { critic_extra: 2, rollout_steps: 10, ..PpoConfig::default() };
        ppo = Ppo::new(5, PpoActions::Discrete(4), config, 3);
        for _ in 0..10 {
            let act = ppo.act(std::slice::from_ref(&b), true).unwrap().remove(0);
            let e = Experience { state: b.clone(), action: act, reward: 1.0, next_state: a.clone(), terminal: false };
            ppo.observe(0, &e, false).unwrap();
        }
        assert_eq!(ppo.updates(), 1);
    }

    #[test]
    fn weights_move_between_agents() {
        let one = Ppo::new(3, PpoActions::Discrete(2), PpoConfig::default(), 1);
        let mut two = Ppo::new(3, PpoActions::Discrete(2), PpoConfig::default(), 2);
        assert_ne!(one.weights().parameters(), two.weights().parameters());
        two.set_weights(one.weights()).unwrap();
        assert_eq!(one.weights().parameters(), two.weights().parameters());
        let wider = Ppo::new(4, PpoActions::Discrete(2), PpoConfig::default(), 1);
        assert!(two.set_weights(wider.weights()).is_err());
    }

    #[test]
    fn an_outcome_must_follow_its_sampled_action() {
        let mut ppo = Ppo::new(1, PpoActions::Discrete(3), PpoConfig::default(), 1);
        let e = Experience { state: vec![0.0], action: vec![0.0], reward: 0.0, next_state: vec![0.0], terminal: false };
        assert!(ppo.observe(0, &e, false).unwrap_err().to_string().contains("no explored action"));
        let a = ppo.act(&[vec![0.0]], true).unwrap()[0].clone();
        let wrong = Experience { action: vec![a[0] + 1.0], ..e.clone() };
        assert!(ppo.observe(0, &wrong, false).unwrap_err().to_string().contains("not the one sampled"));
    }

    /// The state gradient is the derivative of its loss (targets and advantages held, as the
    /// gradient holds them): central differences agree, for both action spaces; the agent is
    /// left as it was, and a malformed batch is refused.
    #[test]
    fn the_state_gradient_is_the_actor_critic_losses_derivative() {
        for (actions, stored) in [(PpoActions::Continuous(2), 2), (PpoActions::Discrete(3), 1)] {
            let config = PpoConfig { hidden: vec![16, 16], activation: Activation::Tanh, ..PpoConfig::default() };
            let ppo = Ppo::new(3, actions, config, 9);
            let n = 5;
            let mut rng = Pcg64Mcg::seed_from_u64(3);
            let mut draw = |k: usize| (0..k).map(|_| rng.random_range(-1.0f32..1.0)).collect::<Vec<f32>>();
            let action_values = match actions {
                PpoActions::Continuous(_) => draw(n * stored),
                PpoActions::Discrete(_) => vec![0.0, 2.0, 1.0, 1.0, 0.0],
            };
            let batch = Batch {
                size: n,
                states: draw(n * 3),
                actions: action_values,
                rewards: draw(n),
                next_states: draw(n * 3),
                terminals: vec![0.0, 0.0, 1.0, 0.0, 0.0],
            };
            let before = ppo.net.parameters();
            let grad = ppo.state_gradient(&batch).unwrap();
            assert_eq!(grad.len(), n * 3);
            assert!(grad.iter().filter(|g| g.abs() > 1e-5).count() > n * 3 / 2, "{actions:?}: {grad:?}");
            let (y, adv) = ppo.td_targets(&batch);
            let loss = |states: &[f32]| {
                let t = matrix(states, n, 3, &ppo.device);
                values(ppo.actor_critic_loss(t, &batch, &y, &adv).reshape([1, 1]))[0]
            };
            let h = 1e-2;
            for (k, analytic) in grad.iter().enumerate() {
                let (mut up, mut down) = (batch.states.clone(), batch.states.clone());
                up[k] += h;
                down[k] -= h;
                let numeric = (loss(&up) - loss(&down)) / (2.0 * h);
                assert!(
                    (numeric - analytic).abs() <= 2e-3 + 0.05 * numeric.abs(),
                    "{actions:?}, state component {k}: analytic {analytic} vs numeric {numeric}"
                );
            }
            assert_eq!(ppo.net.parameters(), before, "nothing learned from it");
            assert_eq!(ppo.updates(), 0);
            assert!(ppo.state_gradient(&Batch { size: 2, ..batch.clone() }).is_err());
            assert!(ppo.state_gradient(&Batch { rewards: vec![0.0; 4], ..batch }).is_err());
        }
    }

    /// Behaviour cloning makes the greedy policy do what the rule did, in both action spaces,
    /// and refuses actions the space does not have.
    #[test]
    fn imitation_reproduces_a_rule() {
        let mut rng = Pcg64Mcg::seed_from_u64(5);
        let n = 512;
        let states: Vec<f32> = (0..n * 2).map(|_| rng.random_range(-1.0f32..1.0)).collect();
        let rule_c = |s: &[f32]| vec![0.5 * s[0] - 0.3 * s[1], if s[1] > 0.0 { 0.8 } else { -0.8 }];
        let rule_d = |s: &[f32]| {
            if s[0] > 0.2 {
                2.0
            } else if s[1] > 0.0 {
                1.0
            } else {
                0.0
            }
        };
        let config = PpoConfig { learning_rate: 3e-3, ..PpoConfig::default() };

        let mut ppo = Ppo::new(2, PpoActions::Continuous(2), config.clone(), 1);
        let actions: Vec<f32> = states.chunks(2).flat_map(rule_c).collect();
        let error = |ppo: &Ppo| {
            let greedy = ppo.greedy_batch(&states, n).unwrap();
            greedy.iter().zip(&actions).map(|(g, a)| (g - a).powi(2)).sum::<f32>() / (2 * n) as f32
        };
        let before = error(&ppo);
        let log_std = ppo.acting.log_std_values();
        ppo.imitate(&states, &actions, n, 60).unwrap();
        let after = error(&ppo);
        assert!(after < 0.02 && after < before / 10.0, "squared error {before} before, {after} after");
        assert_eq!(ppo.acting.log_std_values(), log_std, "σ is left to explore with");

        let mut ppo = Ppo::new(2, PpoActions::Discrete(3), config, 1);
        let actions: Vec<f32> = states.chunks(2).map(rule_d).collect();
        let agreement = |ppo: &Ppo| {
            let greedy = ppo.greedy_batch(&states, n).unwrap();
            greedy.iter().zip(&actions).filter(|(g, a)| g == a).count() as f32 / n as f32
        };
        let before = agreement(&ppo);
        ppo.imitate(&states, &actions, n, 60).unwrap();
        let after = agreement(&ppo);
        assert!(after > 0.95 && after > before, "agreement {before} before, {after} after");
        let err = ppo.imitate(&states[..4], &[3.0, 0.0], 2, 1).unwrap_err().to_string();
        assert!(err.contains("not one of the 3"), "{err}");
        assert!(ppo.imitate(&states, &actions[..10], n, 1).is_err());
    }

    /// A one-step problem that pays for acting at 0.8 in a policy cloned from demonstrations at
    /// 0: unanchored, PPO leaves the demonstrations for the reward; anchored, it moves less far
    /// the heavier the anchor, yet still learns (it does move); weight 0 removes the anchor.
    #[test]
    fn the_behaviour_anchor_holds_the_policy_near_its_demonstrations() {
        let n = 256;
        let states: Vec<f32> = (0..n).map(|i| (i as f32 / n as f32) - 0.5).collect();
        let demonstrations = vec![0.0f32; n];
        let train = |weight: f32| {
            let config =
                PpoConfig { rollout_steps: 64, minibatch_size: 16, learning_rate: 1e-3, ..PpoConfig::default() };
            let mut ppo = Ppo::new(1, PpoActions::Continuous(1), config, 7);
            ppo.imitate(&states, &demonstrations, n, 30).unwrap();
            ppo.set_exploration_std(0.1).unwrap();
            let cloned = ppo.greedy_batch(&states, n).unwrap().iter().sum::<f32>() / n as f32;
            ppo.set_behaviour_anchor(&states, &demonstrations, n, weight).unwrap();
            assert_eq!(ppo.behaviour_anchor_weight(), weight);
            let mut rng = Pcg64Mcg::seed_from_u64(11);
            for _ in 0..64 * 40 {
                let s = vec![rng.random_range(-0.5f32..0.5)];
                let a = ppo.act(std::slice::from_ref(&s), true).unwrap().remove(0);
                let reward = -(a[0] - 0.8).powi(2);
                let e = Experience { state: s.clone(), action: a, reward, next_state: s, terminal: true };
                ppo.observe(0, &e, false).unwrap();
            }
            let greedy = ppo.greedy_batch(&states, n).unwrap();
            greedy.iter().sum::<f32>() / n as f32 - cloned
        };
        // How far the mean action moved from the cloned policy's.
        let (free, light, heavy) = (train(0.0), train(0.3), train(3.0));
        assert!(free > 0.4, "unanchored: moved {free}");
        assert!(heavy < light && light < free, "moved: free {free}, weight 0.3 {light}, weight 3 {heavy}");
        assert!(heavy < 0.5 * free && heavy > 0.005, "weight 3: moved {heavy} (free {free})");
        // σ is held in the anchor's term: its gradient reaches the policy's weights, not log σ.
        let mut ppo = Ppo::new(1, PpoActions::Continuous(1), PpoConfig::default(), 7);
        ppo.set_exploration_std(0.1).unwrap();
        ppo.set_behaviour_anchor(&states, &vec![0.5; n], n, 1.0).unwrap();
        let grads = ppo.anchor_loss(16).expect("an anchor is set").backward();
        let log_std = ppo.net.log_std.as_ref().unwrap().val().grad(&grads);
        let log_std: Vec<f32> = log_std.map(|g| g.into_data().try_to_vec().unwrap()).unwrap_or_default();
        assert!(log_std.iter().all(|g| *g == 0.0), "log σ took a gradient: {log_std:?}");
        let policy = GradientsParams::from_grads(grads, &ppo.net);
        assert!(!policy.is_empty(), "the policy's weights take the anchor's gradient");
        let mut ppo = Ppo::new(1, PpoActions::Continuous(1), PpoConfig::default(), 7);
        assert!(ppo.set_behaviour_anchor(&states, &demonstrations, n, -1.0).is_err());
        assert!(ppo.set_behaviour_anchor(&states, &demonstrations, n, f32::NAN).is_err());
        assert!(ppo.set_behaviour_anchor(&states, &demonstrations[..3], n, 1.0).is_err());
        ppo.set_behaviour_anchor(&states, &demonstrations, n, 1.0).unwrap();
        ppo.set_behaviour_anchor(&states, &demonstrations, n, 0.0).unwrap();
        assert_eq!(ppo.behaviour_anchor_weight(), 0.0);
    }

    /// σ can be set (and is then what the policy samples with); nonsense is refused.
    #[test]
    fn exploration_std_is_set_and_sampled_with() {
        let mut ppo = Ppo::new(2, PpoActions::Continuous(2), PpoConfig::default(), 3);
        assert!(ppo.exploration_std().iter().all(|s| (s - (-0.5f32).exp()).abs() < 1e-6));
        ppo.set_exploration_std(0.05).unwrap();
        assert!(ppo.exploration_std().iter().all(|s| (s - 0.05).abs() < 1e-6));
        let state = vec![0.2, -0.1];
        let mean = ppo.greedy(&state).unwrap();
        let spread: Vec<f32> =
            (0..200).map(|_| ppo.act(std::slice::from_ref(&state), true).unwrap()[0][0] - mean[0]).collect();
        let sd = (spread.iter().map(|x| x * x).sum::<f32>() / spread.len() as f32).sqrt();
        assert!((0.04..0.06).contains(&sd), "sampled spread {sd}");
        assert!(ppo.set_exploration_std(0.0).is_err() && ppo.set_exploration_std(f32::NAN).is_err());
        let mut discrete = Ppo::new(2, PpoActions::Discrete(3), PpoConfig::default(), 3);
        assert!(discrete.set_exploration_std(0.1).is_err());
        assert!(discrete.exploration_std().is_empty());
    }
}
