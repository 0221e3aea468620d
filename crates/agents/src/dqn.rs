//! DQN with the Double (van Hasselt et al.) and Dueling (Wang et al.) variants, as the
//! cloud-provisioning paper's D3QN uses: an online and a soft-updated target network, ε-greedy
//! exploration with linear decay, uniform replay, and a Huber TD loss.

use burn::module::Module;
use burn::module::Param;
use burn::nn::conv::{Conv1d, Conv1dConfig};
use burn::nn::{Linear, LinearConfig};
use burn::optim::GradientsParams;
use burn::tensor::{Device, Int, Tensor, TensorData};
use rand::{RngExt, SeedableRng};
use rand_pcg::Pcg64Mcg;
use serde::{Deserialize, Serialize};

use crate::adam::Adam;
use crate::checkpoint::{Checkpoint, module_file};
use crate::config::{self, ConfigError, Hyperparameters};
use crate::net::{FrozenMlp, Mlp, frozen_linear, matrix, side_by_side, values};
use crate::replay::ReplayBuffer;
use crate::tabular::argmax;
use crate::{AgentError, Experience, check_batch, check_observation};

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct DqnConfig {
    pub hidden: Vec<usize>,
    pub learning_rate: f64,
    pub gamma: f32,
    /// Soft target update rate per learning step.
    pub tau: f32,
    pub batch_size: usize,
    pub replay_capacity: usize,
    /// Experiences collected before learning starts.
    pub warmup: usize,
    pub epsilon_start: f32,
    pub epsilon_end: f32,
    pub epsilon_decay_steps: u64,
    /// Choose the next action with the online network, value it with the target (Double DQN).
    pub double: bool,
    /// Separate state-value and advantage streams (Dueling DQN).
    pub dueling: bool,
    /// Read the observation as a window of recent steps through a 1-D convolution over time
    /// (the provisioning paper's D3QN); `None` feeds it to the MLP as it is.
    #[serde(default)]
    pub window: Option<TimeWindow>,
    /// Learn every this many observed steps (Stable-Baselines3's `train_freq`; 1 = every step).
    #[serde(default = "one_u64")]
    pub train_frequency: u64,
    /// Gradient steps each time it learns (`gradient_steps`).
    #[serde(default = "one_usize")]
    pub gradient_steps: usize,
    /// 0: the target moves toward the online network by `tau` after every gradient step.
    /// k > 0: every k observed steps instead (`target_update_interval`; with `tau` 1, a copy),
    /// so the target stays fixed through a burst of gradient steps.
    #[serde(default)]
    pub target_update_period: u64,
    /// Gradient-norm limit per parameter tensor (`None`: unclipped).
    #[serde(default)]
    pub max_grad_norm: Option<f32>,
}

fn one_u64() -> u64 {
    1
}

fn one_usize() -> usize {
    1
}

/// A sliding window of `steps` observations of `features` metrics each, flattened oldest first.
/// One set of convolution kernels slides along time (weights tied across positions), mixing
/// the metrics into `channels` feature maps before the dense layers.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct TimeWindow {
    pub steps: usize,
    pub features: usize,
    pub channels: usize,
    pub kernel: usize,
}

impl TimeWindow {
    /// Positions the kernel takes along the window.
    pub fn positions(&self) -> usize {
        self.steps + 1 - self.kernel
    }

    /// Checks the window can read a `state_dim`-value observation: every size positive, the
    /// kernel no longer than the window, `steps × features` covering the observation exactly.
    pub fn validate(&self, state_dim: usize) -> Result<(), WindowError> {
        if self.steps == 0 || self.features == 0 || self.channels == 0 || self.kernel == 0 {
            return Err(WindowError::ZeroSize(*self));
        }
        if self.kernel > self.steps {
            return Err(WindowError::KernelTooLong { kernel: self.kernel, steps: self.steps });
        }
        if self.steps.checked_mul(self.features) != Some(state_dim) {
            return Err(WindowError::Coverage { steps: self.steps, features: self.features, state_dim });
        }
        Ok(())
    }
}

/// A [`TimeWindow`] the network cannot be built with.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[non_exhaustive]
pub enum WindowError {
    #[error("window {0:?}: every size must be positive")]
    ZeroSize(TimeWindow),
    #[error("window: kernel {kernel} is longer than the {steps} steps")]
    KernelTooLong { kernel: usize, steps: usize },
    #[error("window: {steps} steps × {features} features do not cover the {state_dim}-value observation")]
    Coverage { steps: usize, features: usize, state_dim: usize },
}

impl DqnConfig {
    /// Plain DQN.
    pub fn dqn() -> Self {
        Self {
            hidden: vec![64, 64],
            learning_rate: 1e-3,
            gamma: 0.99,
            tau: 0.01,
            batch_size: 64,
            replay_capacity: 100_000,
            warmup: 500,
            epsilon_start: 1.0,
            epsilon_end: 0.05,
            epsilon_decay_steps: 10_000,
            double: false,
            dueling: false,
            window: None,
            train_frequency: 1,
            gradient_steps: 1,
            target_update_period: 0,
            max_grad_norm: None,
        }
    }

    /// Dueling Double DQN.
    pub fn d3qn() -> Self {
        Self { double: true, dueling: true, ..Self::dqn() }
    }
}

impl Hyperparameters for DqnConfig {
    fn validate(&self) -> Result<(), ConfigError> {
        config::hidden(&self.hidden)?;
        // The trunk repeats its last hidden width (`QNetwork::new`): that layer counts too.
        if let Some(&last) = self.hidden.last() {
            config::weights("hidden", &[self.hidden.as_slice(), &[last]].concat())?;
        }
        config::positive("learning_rate", self.learning_rate)?;
        config::in_range("gamma", self.gamma, 0.0, 1.0)?;
        config::in_range("tau", self.tau, 0.0, 1.0)?;
        config::count("batch_size", self.batch_size as u64)?;
        config::count("replay_capacity", self.replay_capacity as u64)?;
        config::in_range("epsilon_start", self.epsilon_start, 0.0, 1.0)?;
        config::in_range("epsilon_end", self.epsilon_end, 0.0, 1.0)?;
        config::count("train_frequency", self.train_frequency)?;
        config::count("gradient_steps", self.gradient_steps as u64)?;
        if let Some(norm) = self.max_grad_norm {
            config::positive("max_grad_norm", norm)?;
        }
        if let Some(w) = self.window {
            // Its shape is checked against the observation on loading (`TimeWindow::validate`);
            // here, that the dense layers after the convolution fit.
            let positions = w.steps.saturating_add(1).saturating_sub(w.kernel);
            let trunk = w.channels.saturating_mul(positions);
            let mut sizes = vec![trunk];
            sizes.extend_from_slice(&self.hidden);
            sizes.push(self.hidden.last().copied().unwrap_or(trunk));
            config::weights("window", &sizes)?;
            // The convolution's own kernels.
            let conv = w.channels.checked_mul(w.features).and_then(|n| n.checked_mul(w.kernel));
            if conv.is_none_or(|n| n > config::MAX_WEIGHTS) {
                return Err(ConfigError {
                    field: "window".into(),
                    reason: format!(
                        "{} channels of {} features × {} steps need more than the limit of {} weights",
                        w.channels,
                        w.features,
                        w.kernel,
                        config::MAX_WEIGHTS
                    ),
                });
            }
        }
        Ok(())
    }
}

/// The Q-network: an MLP trunk, then either one linear head (Q) or the dueling pair
/// (V and A, combined as `Q = V + A − mean(A)`).
#[derive(Module, Debug)]
pub struct QNetwork {
    conv: Option<Conv1d>,
    #[module(skip)]
    window: Option<TimeWindow>,
    trunk: Mlp,
    value: Option<Linear>,
    advantage: Linear,
}

impl QNetwork {
    pub fn new(
        state_dim: usize,
        actions: usize,
        hidden: &[usize],
        dueling: bool,
        window: Option<TimeWindow>,
        device: &Device,
    ) -> Self {
        // Callers validate windows they did not build themselves (`Dqn::load` does).
        if let Some(Err(e)) = window.map(|w| w.validate(state_dim)) {
            panic!("{e}");
        }
        let conv = window.map(|w| Conv1dConfig::new(w.features, w.channels, w.kernel).init(device));
        let trunk_input = window.map_or(state_dim, |w| w.channels * w.positions());
        let mut sizes = vec![trunk_input];
        sizes.extend_from_slice(hidden);
        let width = *sizes.last().expect("non-empty");
        // The trunk ends in a hidden layer; its output goes through ReLU into the heads.
        sizes.push(width);
        Self {
            conv,
            window,
            trunk: Mlp::new(&sizes, device),
            value: dueling.then(|| LinearConfig::new(width, 1).init(device)),
            advantage: LinearConfig::new(width, actions).init(device),
        }
    }

    pub fn forward(&self, x: Tensor<2>) -> Tensor<2> {
        let x = match (&self.conv, self.window) {
            (Some(conv), Some(w)) => {
                let n = x.dims()[0];
                // [n, steps·features] → [n, features, steps]: metrics are channels, time the axis.
                let series = x.reshape([n, w.steps, w.features]).swap_dims(1, 2);
                let maps = burn::tensor::activation::relu(conv.forward(series));
                maps.reshape([n, w.channels * w.positions()])
            }
            _ => x,
        };
        let h = burn::tensor::activation::relu(self.trunk.forward(x));
        let a = self.advantage.forward(h.clone());
        match &self.value {
            None => a,
            Some(v) => {
                let mean = a.clone().mean_dim(1);
                v.forward(h) + a - mean
            }
        }
    }

    /// The network as plain floats for serving, when it has no convolution: trunk and head(s)
    /// as one dense chain whose last layer emits [V, A…] (dueling) or Q.
    pub fn frozen(&self) -> Option<FrozenMlp> {
        if self.conv.is_some() {
            return None;
        }
        let mut layers = self.trunk.frozen_layers();
        let advantage = frozen_linear(&self.advantage);
        layers.push(match &self.value {
            Some(v) => side_by_side(frozen_linear(v), advantage),
            None => advantage,
        });
        Some(FrozenMlp::from_layers(layers))
    }

    /// Polyak averaging toward `online`, layer by layer.
    pub fn soft_update(self, online: &QNetwork, tau: f32) -> QNetwork {
        let mix = |t: Linear, o: &Linear| crate::net::mix_linear(t, o, tau);
        QNetwork {
            conv: match (self.conv, &online.conv) {
                (Some(t), Some(o)) => Some(mix_conv(t, o, tau)),
                _ => None,
            },
            window: self.window,
            trunk: crate::net::soft_update(self.trunk, &online.trunk, tau),
            value: match (self.value, &online.value) {
                (Some(t), Some(o)) => Some(mix(t, o)),
                _ => None,
            },
            advantage: mix(self.advantage, &online.advantage),
        }
    }
}

/// A convolution averaged toward `online` (detached: targets take no gradients).
fn mix_conv(t: Conv1d, o: &Conv1d, tau: f32) -> Conv1d {
    let weight = (t.weight.val().mul_scalar(1.0 - tau) + o.weight.val().mul_scalar(tau)).detach();
    let bias = match (&t.bias, &o.bias) {
        (Some(tb), Some(ob)) => {
            Some(Param::from_tensor((tb.val().mul_scalar(1.0 - tau) + ob.val().mul_scalar(tau)).detach()))
        }
        _ => None,
    };
    Conv1d { weight: Param::from_tensor(weight), bias, ..t }
}

pub struct Dqn {
    pub config: DqnConfig,
    state_dim: usize,
    actions: usize,
    device: Device,
    online: QNetwork,
    target: QNetwork,
    /// A gradient-free copy of `online` for acting, refreshed after every update.
    policy: QNetwork,
    /// `policy` as plain floats (built on first use after an update; convolutional networks
    /// stay on burn).
    frozen: std::sync::OnceLock<Option<FrozenMlp>>,
    optimizer: Adam,
    replay: ReplayBuffer,
    rng: Pcg64Mcg,
    steps: u64,
    updates: u64,
}

impl Dqn {
    pub fn new(state_dim: usize, actions: usize, config: DqnConfig, seed: u64) -> Self {
        let device = Device::default().autodiff();
        let online = crate::net::seeded(seed, || {
            QNetwork::new(state_dim, actions, &config.hidden, config.dueling, config.window, &device)
        });
        let target = online.clone();
        let policy = online.valid();
        Self {
            optimizer: Adam::new(1e-5, config.max_grad_norm),
            replay: ReplayBuffer::new(config.replay_capacity, state_dim, 1, seed ^ 0x5eed),
            rng: Pcg64Mcg::seed_from_u64(seed),
            config,
            state_dim,
            actions,
            device,
            online,
            target,
            policy,
            frozen: std::sync::OnceLock::new(),
            steps: 0,
            updates: 0,
        }
    }

    pub fn actions(&self) -> usize {
        self.actions
    }

    pub fn epsilon(&self) -> f32 {
        let c = &self.config;
        let frac = (self.steps as f32 / c.epsilon_decay_steps.max(1) as f32).min(1.0);
        c.epsilon_start + frac * (c.epsilon_end - c.epsilon_start)
    }

    /// Q-values for one observation (greedy network, no gradient).
    pub fn q_values(&self, obs: &[f32]) -> Result<Vec<f32>, AgentError> {
        check_observation(obs, self.state_dim)?;
        Ok(self.forward_policy(obs, 1))
    }

    /// Q-values for `n` observations at once (row-major), for batched serving.
    pub fn q_values_batch(&self, obs: &[f32], n: usize) -> Result<Vec<f32>, AgentError> {
        check_batch(obs, n, self.state_dim)?;
        Ok(self.forward_policy(obs, n))
    }

    /// The greedy network's Q-values through the fused path when it has one.
    fn forward_policy(&self, obs: &[f32], n: usize) -> Vec<f32> {
        match self.frozen.get_or_init(|| self.policy.frozen()) {
            None => values(self.policy.forward(matrix(obs, n, self.state_dim, &Device::default()))),
            Some(net) if self.config.dueling => {
                // Rows of [V, A…]: Q = V + A − mean(A).
                let a = self.actions;
                let mut q = Vec::with_capacity(n * a);
                for row in net.forward(obs, n).chunks(a + 1) {
                    let mean = row[1..].iter().sum::<f32>() / a as f32;
                    q.extend(row[1..].iter().map(|adv| row[0] + adv - mean));
                }
                q
            }
            Some(net) => net.forward(obs, n),
        }
    }

    pub fn act(&mut self, obs: &[f32], explore: bool) -> Result<usize, AgentError> {
        check_observation(obs, self.state_dim)?;
        if explore && self.rng.random::<f32>() < self.epsilon() {
            return Ok(self.rng.random_range(0..self.actions));
        }
        Ok(argmax(&self.q_values(obs)?))
    }

    /// Stores an experience and, once past warm-up, takes `gradient_steps` gradient steps
    /// every `train_frequency` steps (by default one per step); returns the last loss.
    pub fn observe(&mut self, e: &Experience) -> Result<Option<f32>, AgentError> {
        check_observation(&e.state, self.state_dim)?;
        check_observation(&e.next_state, self.state_dim)?;
        self.replay.push(e);
        self.steps += 1;
        let period = self.config.target_update_period;
        if period > 0 && self.steps.is_multiple_of(period) {
            self.target = self.target.clone().soft_update(&self.online, self.config.tau);
        }
        if self.replay.len() < self.config.warmup.max(self.config.batch_size)
            || !self.steps.is_multiple_of(self.config.train_frequency.max(1))
        {
            return Ok(None);
        }
        let mut loss = None;
        for _ in 0..self.config.gradient_steps {
            loss = Some(self.update());
        }
        Ok(loss)
    }

    fn update(&mut self) -> f32 {
        let c = self.config.clone();
        let b = self.replay.sample(c.batch_size);
        let n = b.size;
        let d = &self.device;
        let next = matrix(&b.next_states, n, self.state_dim, d);
        let target_q = values(self.target.forward(next.clone()).detach());
        let next_action: Vec<usize> = if c.double {
            values(self.online.forward(next).detach()).chunks(self.actions).map(argmax).collect()
        } else {
            target_q.chunks(self.actions).map(argmax).collect()
        };
        let y: Vec<f32> = (0..n)
            .map(|i| b.rewards[i] + c.gamma * (1.0 - b.terminals[i]) * target_q[i * self.actions + next_action[i]])
            .collect();
        let actions: Vec<i64> = b.actions.iter().map(|a| *a as i64).collect();
        let index = Tensor::<2, Int>::from_data(TensorData::new(actions, [n, 1]), d);
        let q = self.online.forward(matrix(&b.states, n, self.state_dim, d)).gather(1, index);
        let loss = burn::nn::loss::HuberLossConfig::new(1.0).init().forward(
            q,
            matrix(&y, n, 1, d),
            burn::nn::loss::Reduction::Mean,
        );
        let loss_value = values(loss.clone().reshape([1, 1]).detach())[0];
        let grads = GradientsParams::from_grads(loss.backward(), &self.online);
        // Modules are moved through the optimiser; their tensors are shared, so clones are cheap.
        self.online = self.optimizer.step(c.learning_rate, self.online.clone(), grads);
        if c.target_update_period == 0 {
            self.target = self.target.clone().soft_update(&self.online, c.tau);
        }
        self.policy = self.online.valid();
        self.frozen = std::sync::OnceLock::new();
        self.updates += 1;
        loss_value
    }

    pub fn updates(&self) -> u64 {
        self.updates
    }

    /// `d3qn` with both variants, `dqn` otherwise (the flags are in the hyper-parameters).
    pub fn algorithm(&self) -> &'static str {
        if self.config.double && self.config.dueling { "d3qn" } else { "dqn" }
    }

    pub fn save(&self, dir: &std::path::Path, observation_space: &aware_core::Space) -> Result<(), AgentError> {
        let weights = module_file(dir, &self.policy)?;
        let space = aware_core::Space::Discrete { n: self.actions };
        let files = [("q_network.safetensors", weights)];
        crate::checkpoint::check_config(dir, &self.config)?;
        Checkpoint::save(dir, self.algorithm(), &self.config, observation_space, space, self.steps, &files)?;
        Ok(())
    }

    /// Loads a DQN or D3QN checkpoint for an environment with these spaces; it can act at once
    /// and keep learning (with a fresh optimiser and replay buffer).
    pub fn load(
        dir: &std::path::Path,
        observation_space: &aware_core::Space,
        actions: usize,
        seed: u64,
    ) -> Result<Self, AgentError> {
        let action_space = aware_core::Space::Discrete { n: actions };
        let mut c = Checkpoint::open(dir, &["dqn", "d3qn"], observation_space, &action_space)?;
        let config: DqnConfig = c.config()?;
        if let Some(w) = config.window {
            w.validate(observation_space.dim()).map_err(|e| c.error(format!("hyperparameters: {e}")))?;
        }
        let mut agent = Dqn::new(observation_space.dim(), actions, config, seed);
        agent.online = c.module(agent.online.clone(), "q_network.safetensors")?;
        agent.target = agent.online.clone();
        agent.policy = agent.online.valid();
        agent.frozen = std::sync::OnceLock::new();
        agent.steps = c.meta.training_step;
        Ok(agent)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The fused serving path gives the burn network's Q-values (to float rounding), with and
    /// without the dueling head; convolutional networks keep burn's path.
    #[test]
    fn fused_q_values_match_the_network() {
        let obs: Vec<f32> = (0..9 * 4).map(|i| ((i * 13) % 17) as f32 / 17.0).collect();
        for config in [DqnConfig::dqn(), DqnConfig::d3qn()] {
            let dqn = Dqn::new(4, 5, config, 3);
            assert!(dqn.policy.frozen().is_some());
            let burn = values(dqn.policy.forward(matrix(&obs, 9, 4, &Device::default())));
            let fused = dqn.q_values_batch(&obs, 9).unwrap();
            for (a, b) in fused.iter().zip(&burn) {
                assert!((a - b).abs() < 1e-5, "{a} vs {b}");
            }
        }
        let window = TimeWindow { steps: 2, features: 2, channels: 3, kernel: 2 };
        let conv = Dqn::new(4, 5, DqnConfig { window: Some(window), ..DqnConfig::d3qn() }, 3);
        assert!(conv.policy.frozen().is_none());
        assert_eq!(conv.q_values_batch(&obs, 9).unwrap().len(), 45);
    }
}
