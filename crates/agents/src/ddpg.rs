//! DDPG as FIRM and AWARE use it: a deterministic actor (ReLU hidden layers, tanh output)
//! and a critic on state ⊕ action, both with soft-updated targets, trained from uniform replay;
//! exploration adds Gaussian or Ornstein–Uhlenbeck noise scaled by an ε that decays per step.
//! Defaults are AWARE's Table 2: actor lr 3e-4, critic lr 3e-3, γ 0.99, τ 3e-3, minibatch 64,
//! replay 1e6, noise σ 0.2, ε 1.0 decaying by 1e-6 per step; hidden layers 256 × 256.
//!
//! [`DdpgConfig::td3`] turns on TD3's three fixes (Fujimoto et al. 2018) on the same networks:
//! twin critics whose smaller estimate makes the target (clipped double Q), target policy
//! smoothing (clipped Gaussian noise on the target action), and a delayed actor (one actor and
//! target step per `policy_delay` critic steps). A DDPG critic over-estimates, its actor chases
//! the over-estimate into saturated actions, and the greedy policy now and then collapses for a
//! whole episode; each fix takes away one way that happens.
//!
//! Two options for learning from others' actions and for staying movable:
//! `bc_alpha` adds TD3+BC's behaviour term (Fujimoto & Gu 2021), and `preactivation_penalty`
//! (β) charges the actor β · mean z² on its pre-tanh outputs z, so that a critic which once
//! favoured a bound cannot leave the actor stranded where tanh′(z) ≈ 0.

use burn::module::Module;
use burn::optim::GradientsParams;
use burn::tensor::{Device, Tensor};
use rand::{RngExt, SeedableRng};
use rand_distr::{Distribution, StandardNormal};
use rand_pcg::Pcg64Mcg;
use serde::{Deserialize, Serialize};

use crate::adam::Adam;
use crate::checkpoint::{Checkpoint, module_file};
use crate::config::{self, ConfigError, Hyperparameters};
use crate::net::{FrozenMlp, Mlp, matrix, soft_update, values};
use crate::replay::{Batch, ReplayBuffer};
use crate::{AgentError, Experience, check_batch, check_observation};

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub enum Noise {
    Gaussian,
    /// Temporally correlated (θ 0.15), as the original DDPG paper used for physical control.
    OrnsteinUhlenbeck,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct DdpgConfig {
    pub hidden: Vec<usize>,
    pub actor_learning_rate: f64,
    pub critic_learning_rate: f64,
    pub gamma: f32,
    pub tau: f32,
    pub batch_size: usize,
    pub replay_capacity: usize,
    pub warmup: usize,
    pub noise: Noise,
    pub noise_sigma: f32,
    pub epsilon_start: f32,
    pub epsilon_decay: f32,
    pub epsilon_min: f32,
    /// Act uniformly at random in [−1, 1] until `warmup` experiences are stored, as
    /// Stable-Baselines3's `learning_starts` does; otherwise warm-up acts with the noisy policy.
    #[serde(default)]
    pub uniform_warmup: bool,
    /// TD3+BC's α (Fujimoto & Gu 2021, 2.5 there) when learning from another policy's
    /// transitions: the actor maximises λ·Q(s, π(s)) − (π(s) − a)² with λ = α / mean |Q|, so it
    /// stays near the actions the data holds instead of chasing the critic's extrapolation to
    /// actions nobody took. `None` is plain DDPG.
    #[serde(default)]
    pub bc_alpha: Option<f32>,
    /// TD3: a second critic; the target takes the smaller of the two target critics' values.
    #[serde(default)]
    pub twin_critic: bool,
    /// TD3: the standard deviation of the Gaussian noise added to the target action (0: none).
    #[serde(default)]
    pub target_noise: f32,
    /// TD3: that noise is clipped to ±this (0: not clipped).
    #[serde(default)]
    pub target_noise_clip: f32,
    /// TD3: critic steps per actor step (and per soft update of the targets); 1 is DDPG's.
    #[serde(default = "one")]
    pub policy_delay: u32,
    /// Weight β of a penalty on the actor's pre-tanh outputs z: the actor minimises
    /// −Q(s, tanh z) / mean |Q| + β · mean z² (with `bc_alpha`, TD3+BC's
    /// −α · Q / mean |Q| + (π − a)² + β · mean z²). A tanh actor whose critic keeps favouring
    /// one end of a dimension drives z far out, where tanh′(z) ≈ 0: the critic's gradient no
    /// longer reaches it and the action stays at the bound whatever the critic learns later.
    /// The penalty's gradient grows with z, so the output stays where the critic can move it.
    /// It also pulls actions slightly towards 0 (in the relative action space: holding the
    /// allocation). Dividing Q by mean |Q| makes β mean the same at any reward scale. 0 (or
    /// anything not above 0, NaN included) is plain DDPG's −Q, unnormalised.
    #[serde(default)]
    pub preactivation_penalty: f32,
}

fn one() -> u32 {
    1
}

impl DdpgConfig {
    /// TD3's fixes on these settings: twin critics, target smoothing σ 0.2 clipped at 0.5, the
    /// actor stepped every second critic step (the TD3 paper's values).
    pub fn td3(self) -> Self {
        Self { twin_critic: true, target_noise: 0.2, target_noise_clip: 0.5, policy_delay: 2, ..self }
    }
}

impl Default for DdpgConfig {
    fn default() -> Self {
        Self {
            hidden: vec![256, 256],
            actor_learning_rate: 3e-4,
            critic_learning_rate: 3e-3,
            gamma: 0.99,
            tau: 3e-3,
            batch_size: 64,
            replay_capacity: 1_000_000,
            warmup: 1_000,
            noise: Noise::Gaussian,
            noise_sigma: 0.2,
            epsilon_start: 1.0,
            epsilon_decay: 1e-6,
            epsilon_min: 0.0,
            uniform_warmup: false,
            bc_alpha: None,
            twin_critic: false,
            target_noise: 0.0,
            target_noise_clip: 0.0,
            policy_delay: 1,
            preactivation_penalty: 0.0,
        }
    }
}

impl Hyperparameters for DdpgConfig {
    fn validate(&self) -> Result<(), ConfigError> {
        config::hidden(&self.hidden)?;
        config::positive("actor_learning_rate", self.actor_learning_rate)?;
        config::positive("critic_learning_rate", self.critic_learning_rate)?;
        config::in_range("gamma", self.gamma, 0.0, 1.0)?;
        config::in_range("tau", self.tau, 0.0, 1.0)?;
        config::count("batch_size", self.batch_size as u64)?;
        config::count("replay_capacity", self.replay_capacity as u64)?;
        config::non_negative("noise_sigma", self.noise_sigma)?;
        config::non_negative("epsilon_start", self.epsilon_start)?;
        config::non_negative("epsilon_decay", self.epsilon_decay)?;
        config::non_negative("epsilon_min", self.epsilon_min)?;
        if let Some(alpha) = self.bc_alpha {
            config::non_negative("bc_alpha", alpha)?;
        }
        config::non_negative("target_noise", self.target_noise)?;
        config::finite("target_noise_clip", self.target_noise_clip)?;
        config::count("policy_delay", self.policy_delay.into())?;
        config::finite("preactivation_penalty", self.preactivation_penalty)
    }
}

#[derive(Module, Debug)]
pub struct Actor {
    net: Mlp,
}

impl Actor {
    pub fn new(state_dim: usize, action_dim: usize, hidden: &[usize], device: &Device) -> Self {
        let mut sizes = vec![state_dim];
        sizes.extend_from_slice(hidden);
        sizes.push(action_dim);
        Self { net: Mlp::new(&sizes, device) }
    }

    pub fn forward(&self, state: Tensor<2>) -> Tensor<2> {
        self.net.forward(state).tanh()
    }

    /// The pre-tanh outputs z and the actions tanh z.
    fn forward_with_preactivation(&self, state: Tensor<2>) -> (Tensor<2>, Tensor<2>) {
        let z = self.net.forward(state);
        (z.clone(), z.tanh())
    }
}

#[derive(Module, Debug)]
pub struct Critic {
    net: Mlp,
}

impl Critic {
    pub fn new(state_dim: usize, action_dim: usize, hidden: &[usize], device: &Device) -> Self {
        let mut sizes = vec![state_dim + action_dim];
        sizes.extend_from_slice(hidden);
        sizes.push(1);
        Self { net: Mlp::new(&sizes, device) }
    }

    pub fn forward(&self, state: Tensor<2>, action: Tensor<2>) -> Tensor<2> {
        self.net.forward(Tensor::cat(vec![state, action], 1))
    }
}

/// Everything a DDPG agent's training goes on from, bit for bit ([`Ddpg::training_state`],
/// [`Ddpg::resume`]): every network (online, target, the acting copy), both optimisers'
/// moments, the replay buffer with its sampler, the exploration generator and noise, ε and the
/// counters. A checkpoint ([`Ddpg::save`]) keeps what acting and fine-tuning need; an agent
/// resumed from this takes exactly the steps the agent it was taken from would have taken, so a
/// long training run stopped at an episode's end can go on from there. Networks are flat
/// parameter vectors in each module's order; serialise it with any serde format (it holds the
/// whole replay buffer, so a compact one for large buffers).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct DdpgTraining {
    config: DdpgConfig,
    state_dim: usize,
    action_dim: usize,
    actor: Vec<Vec<f32>>,
    critic: Vec<Vec<f32>>,
    actor_target: Vec<Vec<f32>>,
    critic_target: Vec<Vec<f32>>,
    policy: Vec<Vec<f32>>,
    actor_optimizer: crate::adam::AdamState,
    critic_optimizer: crate::adam::AdamState,
    /// TD3's second critic: online, target, optimiser.
    twin: Option<TwinTraining>,
    replay: ReplayBuffer,
    rng: Pcg64Mcg,
    epsilon: f32,
    ou_state: Vec<f32>,
    updates: u64,
    actor_loss: f32,
}

/// [`DdpgTraining`]'s second critic: online, target, optimiser.
type TwinTraining = (Vec<Vec<f32>>, Vec<Vec<f32>>, crate::adam::AdamState);

/// TD3's second critic: the online network, its soft-updated target and its optimiser.
struct Twin {
    online: Critic,
    /// Outside autodiff, like the other targets.
    target: Critic,
    optimizer: Adam,
}

pub struct Ddpg {
    pub config: DdpgConfig,
    state_dim: usize,
    action_dim: usize,
    device: Device,
    actor: Actor,
    critic: Critic,
    /// TD3's second critic (`twin_critic`).
    twin: Option<Twin>,
    /// Targets live outside autodiff: they are only ever evaluated and averaged.
    actor_target: Actor,
    critic_target: Critic,
    /// A gradient-free copy of the actor for acting, refreshed after every update.
    policy: Actor,
    /// The policy's weights as plain floats for batched serving, built on first use after an
    /// update (training acts one observation at a time and never pays for the copy).
    frozen: std::sync::OnceLock<FrozenMlp>,
    actor_optimizer: Adam,
    critic_optimizer: Adam,
    replay: ReplayBuffer,
    rng: Pcg64Mcg,
    epsilon: f32,
    ou_state: Vec<f32>,
    /// Critic steps taken (the actor steps on every `policy_delay`-th).
    updates: u64,
    /// The last actor loss (the actor steps only every `policy_delay` critic steps).
    actor_loss: f32,
}

impl Ddpg {
    pub fn new(state_dim: usize, action_dim: usize, config: DdpgConfig, seed: u64) -> Self {
        let device = Device::default().autodiff();
        // One seed for both networks (the actor's draws come first, then the critic's).
        let (actor, critic, twin) = crate::net::seeded(seed, || {
            (
                Actor::new(state_dim, action_dim, &config.hidden, &device),
                Critic::new(state_dim, action_dim, &config.hidden, &device),
                config.twin_critic.then(|| Critic::new(state_dim, action_dim, &config.hidden, &device)),
            )
        });
        Self {
            twin: twin.map(|c| Twin { target: c.valid(), online: c, optimizer: Adam::default() }),
            actor_target: actor.valid(),
            critic_target: critic.valid(),
            policy: actor.valid(),
            frozen: std::sync::OnceLock::new(),
            actor,
            critic,
            actor_optimizer: Adam::default(),
            critic_optimizer: Adam::default(),
            replay: ReplayBuffer::new(config.replay_capacity, state_dim, action_dim, seed ^ 0x5eed),
            rng: Pcg64Mcg::seed_from_u64(seed),
            epsilon: config.epsilon_start,
            ou_state: vec![0.0; action_dim],
            config,
            state_dim,
            action_dim,
            device,
            updates: 0,
            actor_loss: 0.0,
        }
    }

    pub fn action_dim(&self) -> usize {
        self.action_dim
    }

    pub fn epsilon(&self) -> f32 {
        self.epsilon
    }

    /// The deterministic action for an observation, in [−1, 1]^action_dim.
    pub fn greedy(&self, obs: &[f32]) -> Result<Vec<f32>, AgentError> {
        check_observation(obs, self.state_dim)?;
        Ok(values(self.policy.forward(matrix(obs, 1, self.state_dim, &Device::default()))))
    }

    /// Deterministic actions for `n` observations at once (row-major), for batched serving,
    /// through the fused inference path (equal to [`Ddpg::greedy`] up to float rounding).
    pub fn greedy_batch(&self, obs: &[f32], n: usize) -> Result<Vec<f32>, AgentError> {
        check_batch(obs, n, self.state_dim)?;
        let frozen = self.frozen.get_or_init(|| self.policy.net.frozen());
        let mut out = frozen.forward(obs, n);
        for v in &mut out {
            *v = v.tanh();
        }
        Ok(out)
    }

    /// The greedy policy as it is now, frozen: later updates do not move it
    /// ([`crate::FrozenPolicy`]).
    pub fn frozen_policy(&self) -> crate::FrozenPolicy {
        crate::FrozenPolicy::new(self.policy.net.frozen(), self.state_dim, crate::frozen::Output::Tanh)
    }

    /// Greedy plus ε-scaled exploration noise when `explore`, clipped to [−1, 1] (uniform
    /// noise during warm-up with `uniform_warmup`).
    pub fn act(&mut self, obs: &[f32], explore: bool) -> Result<Vec<f32>, AgentError> {
        check_observation(obs, self.state_dim)?;
        if self.uniform(explore) {
            return Ok(self.explored(Vec::new(), explore));
        }
        let greedy = self.greedy(obs)?;
        Ok(self.explored(greedy, explore))
    }

    /// [`Ddpg::act`] for `n` observations at once (row-major), row `i` exploring when
    /// `explore[i]`: one forward pass for all rows, then each exploring row's noise in row
    /// order, drawn as `n` calls of `act` would draw it.
    pub fn act_batch(&mut self, obs: &[f32], n: usize, explore: &[bool]) -> Result<Vec<Vec<f32>>, AgentError> {
        check_batch(obs, n, self.state_dim)?;
        if explore.len() != n {
            return Err(AgentError::BadObservation(format!(
                "{} exploration flags for {n} observations",
                explore.len()
            )));
        }
        let sigma = self.config.noise_sigma;
        let noise: Vec<Option<f32>> = explore.iter().map(|&e| e.then_some(sigma)).collect();
        self.act_batch_with(obs, n, &noise)
    }

    /// [`Ddpg::act_batch`] with each row's own exploration: `noise[i]` is row `i`'s σ
    /// (ε-scaled as the configured one is, and ε decays with each exploring row), `None` greedy.
    pub fn act_batch_with(
        &mut self,
        obs: &[f32],
        n: usize,
        noise: &[Option<f32>],
    ) -> Result<Vec<Vec<f32>>, AgentError> {
        self.act_rows(obs, n, noise, true, None)
    }

    /// [`Ddpg::act_batch_with`] with each σ as given: not scaled by ε, and ε left where it is.
    /// For a caller that decides how much to explore itself (the lifecycle manager, per stage):
    /// ε's decay belongs to a training run, and an agent that has served for 10⁶ intervals
    /// (ε 0 at Table 2's decay) must still explore when it is sent back to retrain.
    pub fn act_batch_absolute(
        &mut self,
        obs: &[f32],
        n: usize,
        noise: &[Option<f32>],
    ) -> Result<Vec<Vec<f32>>, AgentError> {
        self.act_rows(obs, n, noise, false, None)
    }

    /// [`Ddpg::act_batch_absolute`] with each exploring row's greedy action first passed through
    /// `project(row, action)`, the noise then drawn around what it returns: around what the
    /// action does where the caller knows that differs from what it says. (An actor asking to
    /// grow an allocation already at its bounds does nothing; noise around its +1 is clipped
    /// back to +1, never tries a cut, and the critic, which learns from what was applied, never
    /// sees one there.) Greedy rows, and rows exploring at σ 0 (no noise to draw), are returned
    /// as the actor gives them: the projection is only a centre for noise. (A caller whose
    /// projection is its guard's dry run would otherwise have a greedy cut that the guard's
    /// stabilisation window holds act as "no change", and the window, remembering that instead
    /// of the cut, would hold every later cut too.)
    pub fn act_batch_projected(
        &mut self,
        obs: &[f32],
        n: usize,
        noise: &[Option<f32>],
        project: &mut dyn FnMut(usize, Vec<f32>) -> Vec<f32>,
    ) -> Result<Vec<Vec<f32>>, AgentError> {
        self.act_rows(obs, n, noise, false, Some(project))
    }

    fn act_rows(
        &mut self,
        obs: &[f32],
        n: usize,
        noise: &[Option<f32>],
        with_epsilon: bool,
        mut project: Option<&mut dyn FnMut(usize, Vec<f32>) -> Vec<f32>>,
    ) -> Result<Vec<Vec<f32>>, AgentError> {
        check_batch(obs, n, self.state_dim)?;
        if noise.len() != n {
            return Err(AgentError::BadObservation(format!("{} exploration flags for {n} observations", noise.len())));
        }
        if let Some(bad) = noise.iter().flatten().find(|s| !(s.is_finite() && **s >= 0.0)) {
            return Err(AgentError::Invalid(format!("exploration noise σ {bad} is not a finite non-negative number")));
        }
        let greedy = if n == 0 { Vec::new() } else { self.greedy_batch(obs, n)? };
        let mut out = Vec::with_capacity(n);
        for (i, (row, &sigma)) in greedy.chunks(self.action_dim).zip(noise).enumerate() {
            let mut row = row.to_vec();
            // Only where noise is drawn: a row exploring at σ 0 acts its greedy action itself, so
            // that what it asked for, not what the projection says it would do, reaches the caller.
            if let (Some(project), Some(sigma)) = (project.as_mut(), sigma)
                && sigma > 0.0
            {
                let projected = project(i, row.clone());
                if projected.len() == row.len() && projected.iter().all(|v| v.is_finite()) {
                    row = projected.into_iter().map(|v| v.clamp(-1.0, 1.0)).collect();
                }
            }
            out.push(self.explored_with(row, sigma.is_some(), sigma.unwrap_or(0.0), with_epsilon));
        }
        Ok(out)
    }

    /// Whether an exploring action is drawn uniformly (warm-up with `uniform_warmup`).
    fn uniform(&self, explore: bool) -> bool {
        explore && self.config.uniform_warmup && self.replay.len() < self.config.warmup
    }

    /// `greedy` as acting leaves it: unchanged, perturbed by the exploration noise, or replaced
    /// by a uniform draw during warm-up.
    fn explored(&mut self, a: Vec<f32>, explore: bool) -> Vec<f32> {
        self.explored_with(a, explore, self.config.noise_sigma, true)
    }

    /// [`Ddpg::explored`] with noise of σ `noise_sigma` instead of the configured one: scaled
    /// by ε, which then decays, `with_epsilon`; as given otherwise.
    fn explored_with(&mut self, mut a: Vec<f32>, explore: bool, noise_sigma: f32, with_epsilon: bool) -> Vec<f32> {
        if self.uniform(explore) {
            return (0..self.action_dim).map(|_| self.rng.random_range(-1.0..=1.0)).collect();
        }
        if explore {
            let sigma = if with_epsilon { noise_sigma * self.epsilon } else { noise_sigma };
            for (i, x) in a.iter_mut().enumerate() {
                let z: f32 = StandardNormal.sample(&mut self.rng);
                let n = match self.config.noise {
                    Noise::Gaussian => sigma * z,
                    Noise::OrnsteinUhlenbeck => {
                        self.ou_state[i] += 0.15 * -self.ou_state[i] + sigma * z;
                        self.ou_state[i]
                    }
                };
                *x = (*x + n).clamp(-1.0, 1.0);
            }
            if with_epsilon {
                self.epsilon = (self.epsilon - self.config.epsilon_decay).max(self.config.epsilon_min);
            }
        }
        a
    }

    /// Stores an experience and, once past warm-up, takes one critic step (and, every
    /// `policy_delay`-th, an actor step). Returns (critic loss, the actor's last loss).
    pub fn observe(&mut self, e: &Experience) -> Result<Option<(f32, f32)>, AgentError> {
        self.check_experience(e, false)?;
        self.replay.push(e);
        if self.replay.len() < self.config.warmup.max(self.config.batch_size) {
            return Ok(None);
        }
        Ok(Some(self.update()))
    }

    /// Stores an experience without learning from it (offline data: another policy's
    /// transitions, learned from later with [`Ddpg::train_offline`]).
    pub fn remember(&mut self, e: &Experience) -> Result<(), AgentError> {
        self.check_experience(e, true)?;
        self.replay.push(e);
        Ok(())
    }

    /// States of the right dimension, a finite action of the right dimension, and with
    /// `in_box` one inside [−1, 1] (another policy's actions must be ones this actor can take).
    fn check_experience(&self, e: &Experience, in_box: bool) -> Result<(), AgentError> {
        check_observation(&e.state, self.state_dim)?;
        check_observation(&e.next_state, self.state_dim)?;
        let fits = |a: &f32| a.is_finite() && (!in_box || a.abs() <= 1.0);
        if e.action.len() != self.action_dim || !e.action.iter().all(fits) {
            let space =
                if in_box { format!("[-1, 1]^{}", self.action_dim) } else { format!("dimension {}", self.action_dim) };
            return Err(AgentError::BadObservation(format!("action {:?} does not fit {space}", e.action)));
        }
        Ok(())
    }

    /// `updates` critic steps (with their delayed actor steps) on the stored experiences (none
    /// while fewer than a minibatch are stored). Returns the last (critic loss, actor loss).
    pub fn train_offline(&mut self, updates: usize) -> Option<(f32, f32)> {
        if self.replay.len() < self.config.batch_size {
            return None;
        }
        (0..updates).map(|_| self.update()).last()
    }

    /// Experiences stored.
    pub fn stored(&self) -> usize {
        self.replay.len()
    }

    /// The critic's regression targets r + γ (1 − terminal) Q′(s′, μ′(s′) + ε), computed
    /// without autodiff bookkeeping: with twin critics the smaller target Q, with `noise` (TD3's
    /// smoothing, row-major like the actions) the target action perturbed and kept in [−1, 1].
    fn targets(&self, b: &Batch, noise: Option<&[f32]>) -> Vec<f32> {
        let next = matrix(&b.next_states, b.size, self.state_dim, &Device::default());
        let mut next_action = self.actor_target.forward(next.clone());
        if let Some(noise) = noise {
            let noise = matrix(noise, b.size, self.action_dim, &Device::default());
            next_action = (next_action + noise).clamp(-1.0, 1.0);
        }
        let mut next_q = values(self.critic_target.forward(next.clone(), next_action.clone()));
        if let Some(twin) = &self.twin {
            let other = values(twin.target.forward(next, next_action));
            next_q.iter_mut().zip(other).for_each(|(q, o)| *q = q.min(o));
        }
        (0..b.size).map(|i| b.rewards[i] + self.config.gamma * (1.0 - b.terminals[i]) * next_q[i]).collect()
    }

    /// TD3's target-smoothing noise for a minibatch, none when `target_noise` is 0.
    fn smoothing_noise(&mut self, rows: usize) -> Option<Vec<f32>> {
        let (sigma, clip) = (self.config.target_noise, self.config.target_noise_clip);
        (sigma > 0.0).then(|| {
            (0..rows * self.action_dim)
                .map(|_| {
                    let z: f32 = StandardNormal.sample(&mut self.rng);
                    // A clip of 0 (or less) leaves the noise unclipped.
                    if clip > 0.0 { (sigma * z).clamp(-clip, clip) } else { sigma * z }
                })
                .collect()
        })
    }

    /// The critic's loss: the mean squared TD error.
    fn critic_loss(&self, critic: &Critic, states: Tensor<2>, b: &Batch, y: &[f32]) -> Tensor<1> {
        let actions = matrix(&b.actions, b.size, self.action_dim, &self.device);
        let q = critic.forward(states, actions);
        (q - matrix(y, b.size, 1, &self.device)).powf_scalar(2.0).mean()
    }

    /// The actor's loss: −Q(s, μ(s)), plus TD3+BC's behaviour term with `bc_alpha`, plus the
    /// pre-activation penalty with `preactivation_penalty`.
    fn actor_loss(&self, actor: &Actor, critic: &Critic, states: Tensor<2>, b: &Batch) -> Tensor<1> {
        let (z, pi) = actor.forward_with_preactivation(states.clone());
        let q_pi = critic.forward(states, pi.clone());
        let beta = self.config.preactivation_penalty;
        let loss = self.q_loss(q_pi, pi, b);
        if beta > 0.0 { loss + z.powf_scalar(2.0).mean().mul_scalar(beta) } else { loss }
    }

    /// The part of the actor's loss that reads the critic: −Q(s, π(s)) (over mean |Q| when the
    /// pre-activation penalty is on, so that β weighs it the same at any scale of Q), or
    /// TD3+BC's.
    fn q_loss(&self, q_pi: Tensor<2>, pi: Tensor<2>, b: &Batch) -> Tensor<1> {
        let mean_abs_q = |q: &Tensor<2>| values(q.clone().abs().mean().reshape([1, 1]).detach())[0].max(1e-6);
        match self.config.bc_alpha {
            None if self.config.preactivation_penalty > 0.0 => {
                let scale = mean_abs_q(&q_pi);
                q_pi.mean().mul_scalar(-1.0 / scale)
            }
            None => q_pi.mean().neg(),
            Some(alpha) => {
                // λ normalises Q's scale so that α alone sets the balance (TD3+BC, eq. 3).
                let lambda = alpha / mean_abs_q(&q_pi);
                let behaviour = matrix(&b.actions, b.size, self.action_dim, &self.device);
                q_pi.mean().mul_scalar(-lambda) + (pi - behaviour).powf_scalar(2.0).mean()
            }
        }
    }

    fn update(&mut self) -> (f32, f32) {
        let c = self.config.clone();
        let b = self.replay.sample(c.batch_size);
        let states = matrix(&b.states, b.size, self.state_dim, &self.device);
        // Critic (and its twin): regress Q(s, a) on the targets.
        let noise = self.smoothing_noise(b.size);
        let y = self.targets(&b, noise.as_deref());
        let critic_loss = self.critic_loss(&self.critic, states.clone(), &b, &y);
        let critic_value = values(critic_loss.clone().reshape([1, 1]).detach())[0];
        let grads = GradientsParams::from_grads(critic_loss.backward(), &self.critic);
        self.critic = self.critic_optimizer.step(c.critic_learning_rate, self.critic.clone(), grads);
        if let Some(Twin { online, target, mut optimizer }) = self.twin.take() {
            let loss = self.critic_loss(&online, states.clone(), &b, &y);
            let grads = GradientsParams::from_grads(loss.backward(), &online);
            let online = optimizer.step(c.critic_learning_rate, online, grads);
            self.twin = Some(Twin { online, target, optimizer });
        }
        if (self.updates + 1).is_multiple_of(u64::from(c.policy_delay.max(1))) {
            // Actor: ascend Q(s, μ(s)); only the actor's parameters are stepped, so the critic
            // is used without parameter gradients (backward skips its weight products).
            let frozen_critic = self.critic.clone().no_grad();
            let actor_loss = self.actor_loss(&self.actor, &frozen_critic, states, &b);
            self.actor_loss = values(actor_loss.clone().reshape([1, 1]).detach())[0];
            let grads = GradientsParams::from_grads(actor_loss.backward(), &self.actor);
            self.actor = self.actor_optimizer.step(c.actor_learning_rate, self.actor.clone(), grads);
            self.policy = self.actor.valid();
            let critic = self.critic.valid();
            self.actor_target = Actor { net: soft_update(self.actor_target.net.clone(), &self.policy.net, c.tau) };
            self.critic_target = Critic { net: soft_update(self.critic_target.net.clone(), &critic.net, c.tau) };
            if let Some(twin) = self.twin.as_mut() {
                twin.target = Critic { net: soft_update(twin.target.net.clone(), &twin.online.valid().net, c.tau) };
            }
            self.frozen = std::sync::OnceLock::new();
        }
        self.updates += 1;
        // The actor's last loss: on a step where it waited, the one before (0 before its first).
        (critic_value, self.actor_loss)
    }

    /// The gradient, with respect to the states of `batch`, of the critic's TD loss at the
    /// current parameters, which it leaves as they are. Row-major `[batch.size, state_dim]`. A
    /// meta-learner whose embedding is part of the state back-propagates its part of it (AWARE's
    /// end-to-end meta-training). Not the actor's loss: −Q(s, μ(s)) rises wherever the critic
    /// over-estimates, and an embedding trained on it chases those regions (on the simulator it
    /// drifted to one large constant vector for every app) instead of describing the workload.
    pub fn state_gradient(&self, b: &Batch) -> Result<Vec<f32>, AgentError> {
        check_batch(&b.states, b.size, self.state_dim)?;
        check_batch(&b.next_states, b.size, self.state_dim)?;
        check_batch(&b.actions, b.size, self.action_dim)?;
        let y = self.targets(b, None);
        let states = matrix(&b.states, b.size, self.state_dim, &self.device).require_grad();
        let critic = self.critic.clone().no_grad();
        let grads = self.critic_loss(&critic, states.clone(), b, &y).backward();
        Ok(states.grad(&grads).map(values).unwrap_or_else(|| vec![0.0; b.size * self.state_dim]))
    }

    /// The loss [`Ddpg::state_gradient`] differentiates (the critic's), as a number.
    pub fn losses(&self, b: &Batch) -> Result<f32, AgentError> {
        check_batch(&b.states, b.size, self.state_dim)?;
        let y = self.targets(b, None);
        let states = matrix(&b.states, b.size, self.state_dim, &self.device);
        let critic = self.critic.clone().no_grad();
        let loss = self.critic_loss(&critic, states, b, &y);
        Ok(values(loss.reshape([1, 1]).detach())[0])
    }

    /// Width of the states the agent acts on.
    pub fn state_dim(&self) -> usize {
        self.state_dim
    }

    pub fn updates(&self) -> u64 {
        self.updates
    }

    pub fn save(
        &self,
        dir: &std::path::Path,
        observation_space: &aware_core::Space,
        training_step: u64,
    ) -> Result<(), AgentError> {
        self.save_actor(dir, observation_space, training_step, &self.policy)
    }

    /// Saves the agent with its Polyak-averaged actor (the target network, averaged with weight
    /// τ per actor step) in place of the online one: what a greedy check should read of a
    /// policy still learning, whose online weights swing from one update to the next. Loaded
    /// back, it acts as that average.
    pub fn save_averaged(
        &self,
        dir: &std::path::Path,
        observation_space: &aware_core::Space,
        training_step: u64,
    ) -> Result<(), AgentError> {
        self.save_actor(dir, observation_space, training_step, &self.actor_target)
    }

    fn save_actor(
        &self,
        dir: &std::path::Path,
        observation_space: &aware_core::Space,
        training_step: u64,
        actor: &Actor,
    ) -> Result<(), AgentError> {
        let actor = module_file(dir, actor)?;
        let critic = module_file(dir, &self.critic.valid())?;
        let space = aware_core::Space::Box { low: vec![-1.0; self.action_dim], high: vec![1.0; self.action_dim] };
        let mut files = vec![("actor.safetensors", actor), ("critic.safetensors", critic)];
        if let Some(twin) = &self.twin {
            files.push(("critic2.safetensors", module_file(dir, &twin.online.valid())?));
        }
        crate::checkpoint::check_config(dir, &self.config)?;
        Checkpoint::save(dir, "ddpg", &self.config, observation_space, space, training_step, &files)?;
        Ok(())
    }

    /// Everything its training goes on from ([`DdpgTraining`]).
    pub fn training_state(&self) -> DdpgTraining {
        use crate::net::parameters;
        DdpgTraining {
            config: self.config.clone(),
            state_dim: self.state_dim,
            action_dim: self.action_dim,
            actor: parameters(&self.actor),
            critic: parameters(&self.critic),
            actor_target: parameters(&self.actor_target),
            critic_target: parameters(&self.critic_target),
            policy: parameters(&self.policy),
            actor_optimizer: self.actor_optimizer.state(&self.actor),
            critic_optimizer: self.critic_optimizer.state(&self.critic),
            twin: self
                .twin
                .as_ref()
                .map(|t| (parameters(&t.online), parameters(&t.target), t.optimizer.state(&t.online))),
            replay: self.replay.clone(),
            rng: self.rng.clone(),
            epsilon: self.epsilon,
            ou_state: self.ou_state.clone(),
            updates: self.updates,
            actor_loss: self.actor_loss,
        }
    }

    /// [`Ddpg::training_state`] with the replay buffer moved into it, not copied (it is most of
    /// a large pool run's state): the agent holds none until [`Ddpg::end_lending`] hands it
    /// back, and must not act or learn meanwhile. For writing the state down.
    pub fn lend_training_state(&mut self) -> DdpgTraining {
        let stand_in = ReplayBuffer::new(1, self.state_dim, self.action_dim, 0);
        let replay = std::mem::replace(&mut self.replay, stand_in);
        DdpgTraining { replay, ..self.training_state() }
    }

    /// Takes back what [`Ddpg::lend_training_state`] lent.
    pub fn end_lending(&mut self, state: DdpgTraining) {
        self.replay = state.replay;
    }

    /// The agent `state` was taken from, as it was: it acts and learns on exactly as that
    /// agent would have. A state that no agent could have had (networks or moments of the wrong
    /// sizes, values that are not finite, a replay buffer out of step with itself, a config the
    /// agent refuses) is refused, saying which part.
    pub fn resume(state: DdpgTraining) -> Result<Self, AgentError> {
        use crate::net::with_parameters;
        let bad = |part: &str, reason: String| AgentError::Invalid(format!("DDPG training state, {part}: {reason}"));
        state.config.validate().map_err(|e| bad("config", e.to_string()))?;
        let (s, a) = (state.state_dim, state.action_dim);
        if s == 0 || a == 0 || s > crate::MAX_WIDTH || a > crate::MAX_WIDTH {
            return Err(bad("dimensions", format!("{s} state and {a} action dimensions")));
        }
        state.replay.check(s, a).map_err(|e| bad("replay", e))?;
        if state.ou_state.len() != a || !state.ou_state.iter().all(|v| v.is_finite()) {
            return Err(bad("ou_state", format!("{} values, {a} finite ones expected", state.ou_state.len())));
        }
        if !state.epsilon.is_finite() || !state.actor_loss.is_finite() {
            return Err(bad(
                "epsilon",
                format!("ε {} or actor loss {} is not finite", state.epsilon, state.actor_loss),
            ));
        }
        // The networks' shapes come from the config; the seed only draws weights replaced below.
        let mut agent = Ddpg::new(s, a, state.config, 0);
        agent.actor = with_parameters(agent.actor, state.actor).map_err(|e| bad("actor", e))?;
        agent.critic = with_parameters(agent.critic, state.critic).map_err(|e| bad("critic", e))?;
        agent.actor_target =
            with_parameters(agent.actor_target, state.actor_target).map_err(|e| bad("actor_target", e))?;
        agent.critic_target =
            with_parameters(agent.critic_target, state.critic_target).map_err(|e| bad("critic_target", e))?;
        agent.policy = with_parameters(agent.policy, state.policy).map_err(|e| bad("policy", e))?;
        agent.actor_optimizer =
            Adam::from_state(state.actor_optimizer, &agent.actor).map_err(|e| bad("actor_optimizer", e))?;
        agent.critic_optimizer =
            Adam::from_state(state.critic_optimizer, &agent.critic).map_err(|e| bad("critic_optimizer", e))?;
        agent.twin = match (agent.twin.take(), state.twin) {
            (None, None) => None,
            (Some(Twin { online, target, .. }), Some((o, t, optimizer))) => {
                let online = with_parameters(online, o).map_err(|e| bad("twin", e))?;
                let target = with_parameters(target, t).map_err(|e| bad("twin target", e))?;
                let optimizer = Adam::from_state(optimizer, &online).map_err(|e| bad("twin optimizer", e))?;
                Some(Twin { online, target, optimizer })
            }
            _ => {
                return Err(bad("twin", "present where the config has no twin critic, or missing where it has".into()));
            }
        };
        agent.replay = state.replay;
        agent.rng = state.rng;
        agent.epsilon = state.epsilon;
        agent.ou_state = state.ou_state;
        agent.updates = state.updates;
        agent.actor_loss = state.actor_loss;
        agent.frozen = std::sync::OnceLock::new();
        Ok(agent)
    }

    /// Loads a DDPG checkpoint for an environment with these spaces.
    pub fn load(
        dir: &std::path::Path,
        observation_space: &aware_core::Space,
        action_dim: usize,
        seed: u64,
    ) -> Result<Self, AgentError> {
        let action_space = aware_core::Space::Box { low: vec![-1.0; action_dim], high: vec![1.0; action_dim] };
        let mut c = Checkpoint::open(dir, &["ddpg"], observation_space, &action_space)?;
        let mut agent = Ddpg::new(observation_space.dim(), action_dim, c.config()?, seed);
        agent.actor = c.module(agent.actor.clone(), "actor.safetensors")?;
        agent.critic = c.module(agent.critic.clone(), "critic.safetensors")?;
        agent.actor_target = agent.actor.valid();
        agent.critic_target = agent.critic.valid();
        if let Some(Twin { online, optimizer, .. }) = agent.twin.take() {
            let online = c.module(online, "critic2.safetensors")?;
            agent.twin = Some(Twin { target: online.valid(), online, optimizer });
        }
        agent.policy = agent.actor.valid();
        agent.frozen = std::sync::OnceLock::new();
        Ok(agent)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The state gradient is the derivative of the update's losses: central differences agree.
    #[test]
    fn the_state_gradient_is_the_losses_derivative() {
        let config = DdpgConfig { hidden: vec![16, 16], ..DdpgConfig::default() };
        let ddpg = Ddpg::new(3, 2, config, 9);
        let n = 5;
        let batch = Batch { terminals: vec![0.0, 0.0, 1.0, 0.0, 0.0], ..small_batch(n) };
        let grad = ddpg.state_gradient(&batch).unwrap();
        assert_eq!(grad.len(), n * 3);
        assert!(grad.iter().filter(|g| g.abs() > 1e-5).count() > n * 3 / 2, "{grad:?}");
        let h = 1e-2;
        for (k, analytic) in grad.iter().enumerate() {
            let (mut up, mut down) = (batch.clone(), batch.clone());
            up.states[k] += h;
            down.states[k] -= h;
            let numeric = (ddpg.losses(&up).unwrap() - ddpg.losses(&down).unwrap()) / (2.0 * h);
            assert!(
                (numeric - analytic).abs() <= 2e-3 + 0.05 * numeric.abs(),
                "state component {k}: analytic {analytic} vs numeric {numeric}"
            );
        }
        // Nothing learned from it.
        assert_eq!(ddpg.updates(), 0);
        assert!(ddpg.state_gradient(&Batch { size: 2, ..batch }).is_err());
    }

    /// Acting for a batch draws what acting row by row draws: the same greedy actions (to float
    /// rounding) and the same noise for the exploring rows, in row order.
    #[test]
    fn acting_for_a_batch_is_acting_row_by_row() {
        let config = DdpgConfig { hidden: vec![16, 16], ..DdpgConfig::default() };
        let obs: Vec<f32> = (0..4 * 3).map(|i| ((i * 7) % 11) as f32 / 11.0 - 0.5).collect();
        let explore = [true, false, true, true];
        let mut rows = Ddpg::new(3, 2, config.clone(), 5);
        let one_by_one: Vec<Vec<f32>> = obs.chunks(3).zip(explore).map(|(o, e)| rows.act(o, e).unwrap()).collect();
        let mut batch = Ddpg::new(3, 2, config, 5);
        let together = batch.act_batch(&obs, 4, &explore).unwrap();
        assert_eq!(together.len(), 4);
        for (a, b) in one_by_one.iter().zip(&together) {
            for (x, y) in a.iter().zip(b) {
                assert!((x - y).abs() < 1e-5, "{a:?} vs {b:?}");
            }
        }
        // The greedy row carries no noise; the exploring rows do.
        assert_eq!(together[1], batch.greedy_batch(&obs[3..6], 1).unwrap());
        assert_ne!(together[0], batch.greedy_batch(&obs[0..3], 1).unwrap());
        assert_eq!(rows.epsilon(), batch.epsilon());
        assert!(batch.act_batch(&obs, 4, &[true]).is_err(), "one flag per row");
    }

    /// Each row explores with its own σ: a row with σ 0 acts greedily, and over many draws a
    /// row's noise has the spread it was given, not the configured one.
    #[test]
    fn each_row_explores_with_its_own_sigma() {
        let config = DdpgConfig { hidden: vec![8], noise_sigma: 0.5, ..DdpgConfig::default() };
        let mut ddpg = Ddpg::new(2, 1, config, 3);
        let obs = [0.1, -0.2, 0.1, -0.2, 0.1, -0.2];
        let greedy = ddpg.greedy_batch(&obs[..2], 1).unwrap()[0];
        assert!(greedy.abs() < 0.5, "a greedy action far from the box's edges: {greedy}");
        let (mut small, mut large) = (Vec::new(), Vec::new());
        for _ in 0..2_000 {
            let acted = ddpg.act_batch_with(&obs, 3, &[Some(0.02), Some(0.2), Some(0.0)]).unwrap();
            assert!((acted[2][0] - greedy).abs() < 1e-5, "σ 0 is greedy");
            small.push(acted[0][0] - greedy);
            large.push(acted[1][0] - greedy);
        }
        let sd = |v: &[f32]| (v.iter().map(|x| x * x).sum::<f32>() / v.len() as f32).sqrt();
        assert!((sd(&small) - 0.02).abs() < 0.004, "σ 0.02 row: {}", sd(&small));
        assert!((sd(&large) - 0.2).abs() < 0.03, "σ 0.2 row: {}", sd(&large));
        let greedy_rows = ddpg.act_batch_with(&obs, 3, &[None, None, None]).unwrap();
        assert!(greedy_rows.iter().all(|a| (a[0] - greedy).abs() < 1e-5), "None is greedy");
        assert!(ddpg.act_batch_with(&obs, 3, &[Some(f32::NAN), None, None]).is_err(), "σ must be a number");
        assert!(ddpg.act_batch_with(&obs, 3, &[Some(-0.1), None, None]).is_err(), "σ must not be negative");
        assert!(ddpg.act_batch_with(&obs, 3, &[None]).is_err(), "one σ per row");
    }

    /// An agent whose ε has decayed to nothing no longer explores by ε-scaled noise, but still
    /// does with noise given as it is (a served agent sent back to retrain), and acting so
    /// leaves ε alone.
    #[test]
    fn absolute_noise_ignores_a_spent_epsilon() {
        let config = DdpgConfig { hidden: vec![8], epsilon_start: 0.5, epsilon_decay: 0.1, ..DdpgConfig::default() };
        let mut ddpg = Ddpg::new(2, 1, config, 5);
        let obs = [0.1, -0.2];
        let greedy = ddpg.greedy_batch(&obs, 1).unwrap()[0];
        for _ in 0..6 {
            ddpg.act_batch_with(&obs, 1, &[Some(0.2)]).unwrap();
        }
        assert_eq!(ddpg.epsilon(), 0.0, "six exploring rows spent ε 0.5 at 0.1 each");
        let scaled = ddpg.act_batch_with(&obs, 1, &[Some(0.2)]).unwrap()[0][0];
        assert!((scaled - greedy).abs() < 1e-6, "ε 0 scales the noise away: {scaled} against {greedy}");
        let moved: Vec<f32> =
            (0..200).map(|_| ddpg.act_batch_absolute(&obs, 1, &[Some(0.2)]).unwrap()[0][0] - greedy).collect();
        let sd = (moved.iter().map(|x| x * x).sum::<f32>() / moved.len() as f32).sqrt();
        assert!((sd - 0.2).abs() < 0.04, "absolute σ 0.2 explores at 0.2 whatever ε: {sd}");
        let mut fresh = Ddpg::new(2, 1, DdpgConfig { hidden: vec![8], ..DdpgConfig::default() }, 5);
        fresh.act_batch_absolute(&obs, 1, &[Some(0.2)]).unwrap();
        assert_eq!(fresh.epsilon(), 1.0, "acting with absolute noise leaves ε alone");
    }

    /// An exploring row's noise is drawn around its projection; a greedy row is not projected.
    #[test]
    fn exploring_rows_explore_around_their_projection() {
        let mut ddpg = Ddpg::new(2, 2, DdpgConfig { hidden: vec![8], warmup: 0, ..DdpgConfig::default() }, 3);
        let obs = [0.1, -0.2, 0.3, 0.4];
        let greedy = ddpg.greedy_batch(&obs, 2).unwrap();
        let mut seen = Vec::new();
        let (mut sum, draws) = ([0.0f32; 2], 400);
        for _ in 0..draws {
            let mut project = |row: usize, a: Vec<f32>| {
                seen.push(row);
                assert_eq!(a.len(), 2);
                vec![-0.5, 2.0]
            };
            let out = ddpg.act_batch_projected(&obs, 2, &[None, Some(0.1)], &mut project).unwrap();
            assert_eq!(out[0], greedy[..2].to_vec(), "a greedy row is the actor's");
            for (s, v) in sum.iter_mut().zip(&out[1]) {
                *s += v;
            }
            assert!(out[1][1] <= 1.0, "the projection is clipped into the box");
        }
        assert!(seen.iter().all(|&r| r == 1) && seen.len() == draws, "only the exploring row is projected");
        let mean = sum.map(|s| s / draws as f32);
        assert!((mean[0] + 0.5).abs() < 0.02, "noise around the projection's −0.5: {mean:?}");
        assert!(mean[1] > 0.9 && mean[1] <= 1.0, "around the projection's +2 clipped to 1: {mean:?}");
    }

    /// A row exploring at σ 0 has no noise to centre: it acts the actor's own action, and the
    /// projection is not asked; the same row at σ 0.1 is drawn around the projection.
    #[test]
    fn a_row_exploring_at_sigma_zero_is_not_projected() {
        let mut ddpg = Ddpg::new(2, 2, DdpgConfig { hidden: vec![8], warmup: 0, ..DdpgConfig::default() }, 3);
        let obs = [0.1, -0.2, 0.3, 0.4];
        let greedy = ddpg.greedy_batch(&obs, 2).unwrap();
        let mut asked = 0;
        let mut project = |_: usize, _: Vec<f32>| {
            asked += 1;
            vec![0.0, 0.0]
        };
        let out = ddpg.act_batch_projected(&obs, 2, &[Some(0.0), Some(0.0)], &mut project).unwrap();
        assert_eq!(out.concat(), greedy, "σ 0 acts the actor's action");
        assert_eq!(asked, 0, "and asks no projection");
        let mut far = 0.0f32;
        for _ in 0..50 {
            let mut project = |_: usize, _: Vec<f32>| vec![-0.9, -0.9];
            let out = ddpg.act_batch_projected(&obs, 2, &[Some(0.1), Some(0.0)], &mut project).unwrap();
            assert_eq!(out[1], greedy[2..].to_vec(), "the σ-0 row beside an exploring one is the actor's");
            far = far.max((out[0][0] + 0.9).abs());
        }
        assert!(far < 0.5, "the exploring row is drawn around −0.9: {far}");
    }

    /// Offline data from one behaviour (action 0.4 in state s, −0.4 in −s), all rewards 1:
    /// the critic cannot say which action is better, so only TD3+BC's behaviour term pulls the
    /// actor onto the data; plain DDPG has no reason to.
    #[test]
    fn the_behaviour_term_pulls_the_actor_onto_the_data() {
        let run = |bc_alpha: Option<f32>| {
            let config =
                DdpgConfig { hidden: vec![16, 16], batch_size: 32, warmup: 32, bc_alpha, ..DdpgConfig::default() };
            let mut agent = Ddpg::new(2, 1, config, 7);
            for i in 0..200 {
                let sign = if i % 2 == 0 { 1.0 } else { -1.0 };
                agent.remember(&one_step(vec![sign, 0.5], 0.4 * sign, 1.0)).unwrap();
            }
            assert_eq!(agent.stored(), 200);
            agent.train_offline(1500).unwrap();
            let up = agent.greedy(&[1.0, 0.5]).unwrap()[0];
            let down = agent.greedy(&[-1.0, 0.5]).unwrap()[0];
            ((up - 0.4).abs() + (down + 0.4).abs()) / 2.0
        };
        let with_bc = run(Some(2.5));
        let plain = run(None);
        // The critic's extrapolation still pulls (α = 2.5 balances the two), but at most half as
        // far from the data as plain DDPG drifts.
        assert!(with_bc < 0.5 * plain, "TD3+BC is {with_bc} from the behaviour, plain DDPG {plain}");
    }

    /// A one-step problem whose critic first favours the top of the action range (reward a),
    /// then an interior action (reward −(a − 0.3)², fresh data replacing the old). Plain DDPG's
    /// pre-tanh output runs off while the critic favours the bound, and tanh′ ≈ 0 there keeps
    /// it near the bound once the critic has changed its mind; the penalty keeps it where the
    /// critic's gradient reaches it.
    #[test]
    fn the_preactivation_penalty_keeps_a_saturating_actor_movable() {
        let run = |beta: f32| {
            let config = DdpgConfig {
                hidden: vec![16, 16],
                batch_size: 32,
                warmup: 32,
                replay_capacity: 256,
                preactivation_penalty: beta,
                ..DdpgConfig::default()
            };
            let mut agent = Ddpg::new(1, 1, config, 3);
            let phase = |agent: &mut Ddpg, reward: &dyn Fn(f32) -> f32, updates: usize| {
                for i in 0..256 {
                    let a = i as f32 / 127.5 - 1.0;
                    agent.remember(&one_step(vec![0.5], a, reward(a))).unwrap();
                }
                agent.train_offline(updates).unwrap();
                agent.greedy(&[0.5]).unwrap()[0]
            };
            let top = phase(&mut agent, &|a| 1.0 + a, 3000);
            let interior = phase(&mut agent, &|a| 1.0 - (a - 0.3).powi(2), 600);
            (top, interior)
        };
        let (plain_top, plain) = run(0.0);
        let (penalised_top, penalised) = run(0.1);
        // Both learn that the top is best while it is.
        assert!(plain_top > 0.99 && penalised_top > 0.5, "plain {plain_top}, penalised {penalised_top}");
        // Only the penalised actor is back near the new optimum.
        assert!((penalised - 0.3).abs() < 0.15, "penalised actor at {penalised}");
        assert!((plain - 0.3).abs() > 2.0 * (penalised - 0.3).abs(), "plain {plain} vs penalised {penalised}");
    }

    /// With TD3+BC, data whose every action sits at the bound pulls the actor's output there
    /// and its pre-activation on without limit; the penalty stops it short of saturation.
    #[test]
    fn the_penalty_also_holds_a_behaviour_cloning_actor_off_the_bound() {
        let run = |beta: f32| {
            let config = DdpgConfig {
                hidden: vec![16, 16],
                batch_size: 32,
                warmup: 32,
                bc_alpha: Some(2.5),
                preactivation_penalty: beta,
                ..DdpgConfig::default()
            };
            let mut agent = Ddpg::new(1, 1, config, 5);
            for _ in 0..128 {
                agent.remember(&one_step(vec![0.5], 1.0, 1.0)).unwrap();
            }
            agent.train_offline(2000).unwrap();
            agent.greedy(&[0.5]).unwrap()[0]
        };
        let cloned = run(0.0);
        let penalised = run(0.1);
        assert!(cloned > 0.99, "behaviour cloning alone runs to the bound: {cloned}");
        assert!(penalised > 0.5 && penalised < 0.95, "the penalised actor stays short of it: {penalised}");
    }

    /// A one-step (terminal) experience of a one-dimensional action: a bandit's pull.
    fn one_step(state: Vec<f32>, action: f32, reward: f32) -> Experience {
        Experience { next_state: state.clone(), state, action: vec![action], reward, terminal: true }
    }

    fn small_batch(n: usize) -> Batch {
        let f = |i: usize, k: usize| ((i * k + 3 * i + k) % 13) as f32 / 13.0 - 0.5;
        Batch {
            size: n,
            states: (0..n * 3).map(|i| f(i, 7)).collect(),
            actions: (0..n * 2).map(|i| f(i, 5)).collect(),
            rewards: (0..n).map(|i| f(i, 3)).collect(),
            next_states: (0..n * 3).map(|i| f(i, 11)).collect(),
            terminals: vec![0.0; n],
        }
    }

    fn fill(agent: &mut Ddpg, n: usize) {
        let b = small_batch(n);
        for i in 0..n {
            let e = Experience {
                state: b.states[i * 3..i * 3 + 3].to_vec(),
                action: b.actions[i * 2..i * 2 + 2].to_vec(),
                reward: b.rewards[i],
                next_state: b.next_states[i * 3..i * 3 + 3].to_vec(),
                terminal: false,
            };
            agent.remember(&e).unwrap();
        }
    }

    /// TD3's target is the smaller of the two target critics' values, each computed as a
    /// single critic would compute it.
    #[test]
    fn the_twin_target_takes_the_smaller_critic() {
        let config = DdpgConfig { hidden: vec![16, 16], batch_size: 8, warmup: 8, ..DdpgConfig::default() }.td3();
        let mut agent = Ddpg::new(3, 2, config, 11);
        // Three updates: the online critics have moved away from their targets.
        fill(&mut agent, 16);
        agent.train_offline(3).unwrap();
        let b = small_batch(6);
        let y = agent.targets(&b, None);
        let next = matrix(&b.next_states, b.size, 3, &Device::default());
        let a = agent.actor_target.forward(next.clone());
        let q1 = values(agent.critic_target.forward(next.clone(), a.clone()));
        let twin = agent.twin.as_ref().unwrap();
        let q2 = values(twin.target.forward(next.clone(), a.clone()));
        let q2_online = values(twin.online.valid().forward(next, a));
        assert!(q1.iter().zip(&q2).any(|(a, b)| (a - b).abs() > 1e-4), "two different critics");
        assert!(q2.iter().zip(&q2_online).any(|(a, b)| (a - b).abs() > 1e-4), "a target that lags its critic");
        for i in 0..b.size {
            let expected = b.rewards[i] + 0.99 * q1[i].min(q2[i]);
            // The twin's target, not its online network.
            assert!((y[i] - expected).abs() < 1e-5, "row {i}: {} vs {expected}", y[i]);
        }
        // Smoothing noise moves the target action, clipped: the targets move too.
        let noise = agent.smoothing_noise(b.size).expect("σ 0.2");
        assert!(noise.iter().all(|n| n.abs() <= 0.5) && noise.iter().any(|n| *n != 0.0));
        assert_ne!(agent.targets(&b, Some(&noise)), y);
    }

    /// The actor (and the targets) step once per `policy_delay` critic steps.
    #[test]
    fn the_delayed_actor_steps_every_second_update() {
        let config = DdpgConfig { hidden: vec![16, 16], batch_size: 8, warmup: 8, ..DdpgConfig::default() }.td3();
        let mut agent = Ddpg::new(3, 2, config, 12);
        fill(&mut agent, 16);
        let obs = [0.1, -0.2, 0.3];
        let before = agent.greedy(&obs).unwrap();
        agent.train_offline(1).unwrap();
        assert_eq!(agent.greedy(&obs).unwrap(), before, "one critic step: the actor waits");
        agent.train_offline(1).unwrap();
        assert_ne!(agent.greedy(&obs).unwrap(), before, "the second: the actor steps");
        assert_eq!(agent.updates(), 2);
    }

    /// A TD3 checkpoint carries the second critic: the loaded agent's targets are the saved
    /// agent's.
    #[test]
    fn a_td3_checkpoint_keeps_both_critics() {
        let config = DdpgConfig { hidden: vec![16, 16], batch_size: 8, warmup: 8, ..DdpgConfig::default() }.td3();
        let mut agent = Ddpg::new(3, 2, config, 13);
        fill(&mut agent, 16);
        agent.train_offline(4).unwrap();
        let dir = tempfile::tempdir().unwrap();
        let space = aware_core::Space::Box { low: vec![-1.0; 3], high: vec![1.0; 3] };
        agent.save(dir.path(), &space, 4).unwrap();
        let loaded = Ddpg::load(dir.path(), &space, 2, 99).unwrap();
        assert!(loaded.config.twin_critic && loaded.config.policy_delay == 2);
        let b = small_batch(5);
        // Loaded targets are the online critics; the saved agent's targets lag them, so compare
        // the online critics through a fresh target copy.
        let q = |a: &Ddpg| {
            let s = matrix(&b.states, b.size, 3, &Device::default());
            let act = matrix(&b.actions, b.size, 2, &Device::default());
            let twin = a.twin.as_ref().unwrap().online.valid();
            (values(a.critic.valid().forward(s.clone(), act.clone())), values(twin.forward(s, act)))
        };
        let ((a1, a2), (b1, b2)) = (q(&agent), q(&loaded));
        for (x, y) in a1.iter().chain(&a2).zip(b1.iter().chain(&b2)) {
            assert!((x - y).abs() < 1e-5, "{x} vs {y}");
        }
    }

    /// `save_averaged` keeps the target actor, the Polyak average: with τ 0 it never moves, so
    /// the averaged save acts as the untrained actor; with τ 1 it follows every actor step, so
    /// it acts as the trained one; `save` keeps the trained one either way.
    #[test]
    fn the_averaged_save_keeps_the_polyak_average_of_the_actor() {
        let space = aware_core::Space::Box { low: vec![-1.0; 3], high: vec![1.0; 3] };
        let probe = [0.3f32, -0.2, 0.7];
        let greedy_of = |agent: &Ddpg, averaged: bool| {
            let dir = tempfile::tempdir().unwrap();
            if averaged {
                agent.save_averaged(dir.path(), &space, 0).unwrap();
            } else {
                agent.save(dir.path(), &space, 0).unwrap();
            }
            Ddpg::load(dir.path(), &space, 2, 99).unwrap().greedy(&probe).unwrap()
        };
        let close = |a: &[f32], b: &[f32]| a.iter().zip(b).all(|(x, y)| (x - y).abs() < 1e-5);
        for tau in [0.0, 1.0] {
            let config = DdpgConfig { hidden: vec![16, 16], batch_size: 8, warmup: 8, tau, ..DdpgConfig::default() };
            let mut agent = Ddpg::new(3, 2, config, 13);
            let untrained = agent.greedy(&probe).unwrap();
            fill(&mut agent, 32);
            agent.train_offline(50).unwrap();
            let trained = agent.greedy(&probe).unwrap();
            assert!(!close(&untrained, &trained), "training moved the actor: {untrained:?}");
            assert!(close(&greedy_of(&agent, false), &trained));
            let want = if tau == 0.0 { &untrained } else { &trained };
            assert!(close(&greedy_of(&agent, true), want), "τ {tau}: {:?} vs {want:?}", greedy_of(&agent, true));
        }
    }

    /// A configuration saved before TD3's options and the pre-activation penalty existed reads
    /// as plain DDPG.
    #[test]
    fn a_config_without_td3_fields_is_plain_ddpg() {
        let mut json = serde_json::to_value(DdpgConfig::default()).unwrap();
        let fields = json.as_object_mut().unwrap();
        for f in ["twin_critic", "target_noise", "target_noise_clip", "policy_delay", "preactivation_penalty"] {
            assert!(fields.remove(f).is_some(), "{f}");
        }
        let old: DdpgConfig = serde_json::from_value(json).unwrap();
        assert_eq!(old, DdpgConfig::default());
        assert_eq!(old.policy_delay, 1);
    }

    #[test]
    fn remembering_refuses_actions_outside_the_box() {
        let mut agent = Ddpg::new(2, 1, DdpgConfig { hidden: vec![8], ..DdpgConfig::default() }, 1);
        let e = Experience {
            state: vec![0.0, 0.0],
            action: vec![1.5],
            reward: 0.0,
            next_state: vec![0.0, 0.0],
            terminal: false,
        };
        assert!(agent.remember(&e).is_err());
        assert!(agent.train_offline(10).is_none());
    }

    /// A run stopped, written down and resumed goes on as the run that never stopped: the same
    /// actions (exploration noise included), the same losses, the same weights bit for bit, for
    /// plain DDPG with Ornstein–Uhlenbeck noise and for TD3 with TD3+BC's term and uniform warm-up.
    #[test]
    fn a_resumed_agent_goes_on_exactly_as_the_one_it_was_taken_from() {
        let plain = DdpgConfig {
            hidden: vec![16, 16],
            batch_size: 8,
            warmup: 8,
            replay_capacity: 40,
            noise: Noise::OrnsteinUhlenbeck,
            epsilon_decay: 1e-3,
            ..DdpgConfig::default()
        };
        let td3 = DdpgConfig { bc_alpha: Some(2.5), uniform_warmup: true, warmup: 12, ..plain.clone().td3() };
        for config in [plain, td3] {
            let twin = config.twin_critic;
            let mut a = Ddpg::new(3, 2, config.clone(), 11);
            // Observations and rewards that depend on the step only: both runs see the same.
            let obs = |t: usize| vec![(t as f32 * 0.37).sin(), (t as f32 * 0.11).cos(), (t % 7) as f32 / 7.0];
            let step = |agent: &mut Ddpg, t: usize| {
                let action = agent.act(&obs(t), true).unwrap();
                let reward = action.iter().sum::<f32>() - (t % 5) as f32 * 0.1;
                let e = Experience {
                    state: obs(t),
                    action: action.clone(),
                    reward,
                    next_state: obs(t + 1),
                    terminal: t.is_multiple_of(13),
                };
                (action, agent.observe(&e).unwrap())
            };
            for t in 0..50 {
                step(&mut a, t);
            }
            // Through text and back: the state is what a file would hold.
            let text = serde_json::to_string(&a.training_state()).unwrap();
            let mut b = Ddpg::resume(serde_json::from_str(&text).unwrap()).unwrap();
            assert_eq!(b.training_state(), a.training_state(), "twin {twin}");
            for t in 50..120 {
                assert_eq!(step(&mut a, t), step(&mut b, t), "step {t}, twin {twin}");
            }
            assert_eq!(a.training_state(), b.training_state(), "twin {twin}");
            assert_eq!(a.greedy_batch(&obs(3), 1).unwrap(), b.greedy_batch(&obs(3), 1).unwrap());
        }
    }

    /// A training state no agent could have had is refused, naming the part.
    #[test]
    fn a_damaged_training_state_is_refused_naming_the_part() {
        let config = DdpgConfig { hidden: vec![8], batch_size: 4, warmup: 4, ..DdpgConfig::default() };
        let mut agent = Ddpg::new(2, 1, config, 3);
        for t in 0..10 {
            let e = Experience {
                state: vec![t as f32, 1.0],
                action: vec![0.5],
                reward: 1.0,
                next_state: vec![1.0, t as f32],
                terminal: false,
            };
            agent.observe(&e).unwrap();
        }
        let good = agent.training_state();
        type Damage = fn(&mut DdpgTraining);
        let cases: [(Damage, &str); 6] = [
            (|s| s.actor[0].pop().map(|_| ()).unwrap(), "actor: parameter 0 is not 16 finite values"),
            (|s| s.critic[1][0] = f32::NAN, "critic: parameter 1 is not 8 finite values"),
            (|s| s.policy.push(vec![0.0]), "policy: 5 parameter tensors given, the network has 4"),
            (|s| s.replay.len += 1, "replay: "),
            (|s| s.ou_state.clear(), "ou_state: 0 values, 1 finite ones expected"),
            (
                |s| s.critic_optimizer.moments_mut().truncate(1),
                "critic_optimizer: optimiser holds moments for 1 parameters",
            ),
        ];
        for (damage, says) in cases {
            let mut state = good.clone();
            damage(&mut state);
            let e = Ddpg::resume(state).err().expect("refused").to_string();
            assert!(e.starts_with("DDPG training state, ") && e.contains(says), "{e}");
        }
        assert!(Ddpg::resume(good).is_ok());
    }
}
