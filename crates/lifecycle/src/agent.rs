//! The lifecycle's agent: one policy for every managed application, DDPG (AWARE's) or PPO
//! (FLASH's and SIMPPO's), acting in the relative action coordinates
//! ([`crate::manager::AGENT_ACTIONS`]) on the state encoder's features (then the fallback's
//! proposal, [`crate::manager::ASK_FEATURES`], for an agent acting on it, and a workload
//! embedding, for an agent conditioned on the meta-learner's).
//!
//! Each stage of Algorithm 1 feeds it the way its algorithm can learn:
//!
//! | | DDPG | PPO |
//! |---|---|---|
//! | OFFLINE (the fallback acts) | TD3+BC on the fallback's transitions in its replay | behaviour cloning: the Gaussian mean fitted to the fallback's actions by absolute error (their median: the fallback mostly holds, and the mean of its holds and rare jumps is a drift it never makes; that median is "hold" nearly everywhere, so the clone holds and only the guard's floor moves the allocation, see `docs/results/lifecycle.md`), minibatches of 64 drawn from the last [`DEMONSTRATIONS`] |
//! | ONLINE, learning | its own and the fallback's transitions (off-policy), TD3+BC's term kept with `online_bc` | its own sampled actions only (on-policy), one rollout per app; refused beside bootstrapping ([`LifecycleAgent::refuses`]) |
//! | ONLINE, not learning | greedy plus the manager's noise σ | greedy |
//! | SERVING | greedy | greedy |
//!
//! An on-policy learner cannot learn from what it did not choose: the fallback's transitions of
//! an ONLINE app (the guard refused the observation) and the actions the guard or the fallback
//! floor changed are learned as the action PPO *sampled*, the guard being part of its
//! environment; an interval it did not sample for (the guard let the fallback act) cuts the
//! app's rollout there. An app that stops learning online drops its partial rollout
//! ([`aware_agents::ppo::Ppo::forget`]), so the other apps' updates never wait for it.

use std::path::Path;

use aware_agents::ddpg::{Ddpg, DdpgConfig};
use aware_agents::ppo::{CloningLoss, Ppo, PpoActions, PpoConfig};
use aware_agents::{AgentError, Checkpoint, Experience, FrozenPolicy};
use aware_core::Space;
use rand::{Rng, RngExt, SeedableRng};
use rand_pcg::Pcg64Mcg;

pub use aware_lab::agent::Learner;

use crate::manager::{AGENT_ACTION_DIM, ManagerConfig};
use crate::stage::Stage;

/// Fallback demonstrations a PPO agent keeps for behaviour cloning (the newest; older ones are
/// overwritten): 100 episodes of 100 intervals of 10 apps.
pub const DEMONSTRATIONS: usize = 100_000;

/// Behaviour-cloning minibatch of a PPO agent learning offline.
pub const CLONING_BATCH: usize = 64;

/// The newest `capacity` (state, action) pairs the fallback took, row-major.
#[derive(Debug, Clone)]
struct Demonstrations {
    states: Vec<f32>,
    actions: Vec<f32>,
    state_dim: usize,
    action_dim: usize,
    capacity: usize,
    /// Where the next pair goes once full.
    next: usize,
    len: usize,
}

impl Demonstrations {
    fn new(state_dim: usize, action_dim: usize, capacity: usize) -> Self {
        Self { states: Vec::new(), actions: Vec::new(), state_dim, action_dim, capacity, next: 0, len: 0 }
    }

    fn push(&mut self, state: &[f32], action: &[f32]) {
        if self.len < self.capacity {
            self.states.extend_from_slice(state);
            self.actions.extend_from_slice(action);
            self.len += 1;
        } else {
            let (s, a) = (self.next * self.state_dim, self.next * self.action_dim);
            self.states[s..s + self.state_dim].copy_from_slice(state);
            self.actions[a..a + self.action_dim].copy_from_slice(action);
            self.next = (self.next + 1) % self.capacity;
        }
    }

    /// `n` pairs drawn uniformly with replacement, as two row-major buffers.
    fn sample(&self, n: usize, rng: &mut impl Rng) -> (Vec<f32>, Vec<f32>) {
        let (mut s, mut a) = (Vec::with_capacity(n * self.state_dim), Vec::with_capacity(n * self.action_dim));
        for _ in 0..n {
            let i = rng.random_range(0..self.len);
            s.extend_from_slice(&self.states[i * self.state_dim..(i + 1) * self.state_dim]);
            a.extend_from_slice(&self.actions[i * self.action_dim..(i + 1) * self.action_dim]);
        }
        (s, a)
    }
}

/// PPO as the lifecycle runs it: the policy and the fallback's demonstrations it clones.
pub struct PpoAgent {
    pub ppo: Ppo,
    demonstrations: Demonstrations,
    rng: Pcg64Mcg,
}

impl PpoAgent {
    pub fn new(ppo: Ppo, seed: u64) -> Self {
        let state_dim = ppo.state_dim();
        Self {
            ppo,
            demonstrations: Demonstrations::new(state_dim, AGENT_ACTION_DIM, DEMONSTRATIONS),
            rng: Pcg64Mcg::seed_from_u64(seed ^ 0x5eed_c10e),
        }
    }

    /// Fallback demonstrations kept for cloning.
    pub fn demonstrations(&self) -> usize {
        self.demonstrations.len
    }
}

/// The DDPG settings of an agent that acts on the fallback's proposals (residual): AWARE's
/// Table 2 with the pre-activation penalty at β 1 (a tanh actor otherwise saturates on this
/// problem, see `docs/results/lifecycle.md`) and γ 0.9 (a scaling decision's effects are over within minutes).
/// It explores with the manager's `online_noise_sigma`; the experiments' `converged` reference
/// sets [`RESIDUAL_NOISE_SIGMA`].
pub fn residual_ddpg() -> DdpgConfig {
    DdpgConfig { preactivation_penalty: 1.0, gamma: 0.9, ..Default::default() }
}
/// The exploration noise of a residual DDPG agent: half Table 2's σ (relative actions compound).
pub const RESIDUAL_NOISE_SIGMA: f32 = 0.1;

/// Greedy actions for row-major states: the learning agent's, or a frozen copy's.
pub trait Greedy {
    /// Greedy actions for `n` row-major states, flat.
    fn greedy_batch(&self, states: &[f32], n: usize) -> Result<Vec<f32>, AgentError>;
}

impl Greedy for LifecycleAgent {
    fn greedy_batch(&self, states: &[f32], n: usize) -> Result<Vec<f32>, AgentError> {
        LifecycleAgent::greedy_batch(self, states, n)
    }
}

impl Greedy for FrozenPolicy {
    fn greedy_batch(&self, states: &[f32], n: usize) -> Result<Vec<f32>, AgentError> {
        FrozenPolicy::greedy_batch(self, states, n)
    }
}

/// The policy that acts for an app: the copy it was handed over with where it has one
/// (`served`), else the learning `agent`.
pub(crate) fn acting_policy<'a>(agent: &'a LifecycleAgent, served: Option<&'a FrozenPolicy>) -> &'a dyn Greedy {
    match served {
        Some(policy) => policy,
        None => agent,
    }
}

/// One action per row of the row-major `states` (`apps[k]` is row k's application), and
/// whether it explored: a row with a certified policy (`served[k]`) acts greedily with it, one
/// batched pass per distinct copy; the others with the learning `agent`, exploring where
/// `explore` says (a DDPG row with that σ around `effective(k, greedy action)`, what the guard lets
/// the action apply; a PPO row by sampling), in one batched pass.
pub(crate) fn act_served(
    agent: &mut LifecycleAgent,
    states: &[f32],
    apps: &[usize],
    served: &[Option<FrozenPolicy>],
    explore: &[Option<f32>],
    effective: &mut dyn FnMut(usize, Vec<f32>) -> Vec<f32>,
) -> Result<Vec<(Vec<f32>, bool)>, AgentError> {
    let n = apps.len();
    if served.len() != n || explore.len() != n {
        return Err(AgentError::Invalid(format!(
            "{} served and {} exploration flags for {n} rows",
            served.len(),
            explore.len()
        )));
    }
    let width = states.len().checked_div(n).unwrap_or(0);
    aware_agents::check_batch(states, n, width)?;
    let rows =
        |ks: &[usize]| -> Vec<f32> { ks.iter().flat_map(|&k| &states[k * width..(k + 1) * width]).copied().collect() };
    let mut out: Vec<(Vec<f32>, bool)> = vec![(Vec::new(), false); n];
    let learner: Vec<usize> = (0..n).filter(|&k| served[k].is_none()).collect();
    let learner_apps: Vec<usize> = learner.iter().map(|&k| apps[k]).collect();
    let learner_explore: Vec<Option<f32>> = learner.iter().map(|&k| explore[k]).collect();
    let acted = agent.act(&rows(&learner), &learner_apps, &learner_explore, &mut |j, a| effective(learner[j], a))?;
    for ((&k, action), e) in learner.iter().zip(acted).zip(&learner_explore) {
        out[k] = (action, e.is_some());
    }
    let mut left: Vec<usize> = (0..n).filter(|&k| served[k].is_some()).collect();
    while let Some(policy) = left.first().and_then(|&k| served[k].clone()) {
        let (same, other): (Vec<usize>, Vec<usize>) =
            left.iter().partition(|&&k| served[k].as_ref().is_some_and(|p| p.same(&policy)));
        let acted = policy.greedy_batch(&rows(&same), same.len())?;
        for (&k, action) in same.iter().zip(acted.chunks(acted.len() / same.len())) {
            out[k] = (action.to_vec(), false);
        }
        left = other;
    }
    Ok(out)
}

/// The lifecycle's agent.
pub enum LifecycleAgent {
    Ddpg(Ddpg),
    Ppo(PpoAgent),
}

impl From<Ddpg> for LifecycleAgent {
    fn from(agent: Ddpg) -> Self {
        LifecycleAgent::Ddpg(agent)
    }
}

impl LifecycleAgent {
    /// A fresh agent of `algorithm` on the state encoder's features and the agent's relative
    /// actions, weights seeded with `seed`: DDPG with AWARE's Table 2 hyper-parameters, PPO
    /// with SIMPPO's Table 4.2 and rollouts of 100 intervals per app (an episode at `aware
    /// run`'s default `--episode-steps`).
    pub fn fresh(algorithm: Learner, seed: u64) -> Self {
        Self::fresh_reading(algorithm, aware_env::STATE_DIM, DdpgConfig::default(), seed)
    }

    /// [`LifecycleAgent::fresh`] on `state_dim` state values, a DDPG agent with `ddpg`.
    fn fresh_reading(algorithm: Learner, state_dim: usize, ddpg: DdpgConfig, seed: u64) -> Self {
        match algorithm {
            Learner::Ddpg => Ddpg::new(state_dim, AGENT_ACTION_DIM, ddpg, seed).into(),
            Learner::Ppo => {
                let config = PpoConfig { rollout_steps: 100, ..PpoConfig::default() };
                let ppo = Ppo::new(state_dim, PpoActions::Continuous(AGENT_ACTION_DIM), config, seed);
                Self::ppo(ppo, seed)
            }
        }
    }

    /// A fresh agent for a manager configured as `config`: [`LifecycleAgent::fresh`] of its
    /// algorithm, but one acting residually ([`ManagerConfig::residual`]) also reads the
    /// fallback's proposal ([`crate::manager::ASK_FEATURES`]), and a residual DDPG agent has
    /// [`residual_ddpg`]'s settings.
    pub fn fresh_for(config: &ManagerConfig, seed: u64) -> Self {
        let state_dim = crate::manager::base_state_width(config.residual);
        let ddpg = if config.residual { residual_ddpg() } else { DdpgConfig::default() };
        Self::fresh_reading(config.agent, state_dim, ddpg, seed)
    }

    /// `ppo` as the lifecycle's agent (a meta-trained base learner, say); `seed` seeds the
    /// draws of its cloning minibatches.
    pub fn ppo(ppo: Ppo, seed: u64) -> Self {
        LifecycleAgent::Ppo(PpoAgent::new(ppo, seed))
    }

    pub fn algorithm(&self) -> Learner {
        match self {
            LifecycleAgent::Ddpg(_) => Learner::Ddpg,
            LifecycleAgent::Ppo(_) => Learner::Ppo,
        }
    }

    /// Width of the states it reads.
    pub fn state_dim(&self) -> usize {
        match self {
            LifecycleAgent::Ddpg(a) => a.state_dim(),
            LifecycleAgent::Ppo(a) => a.ppo.state_dim(),
        }
    }

    /// Gradient steps taken (DDPG: its updates; PPO: its rollout updates).
    pub fn updates(&self) -> u64 {
        match self {
            LifecycleAgent::Ddpg(a) => a.updates(),
            LifecycleAgent::Ppo(a) => a.ppo.updates(),
        }
    }

    /// Transitions it keeps to learn from: DDPG's replay, PPO's demonstrations.
    pub fn stored(&self) -> usize {
        match self {
            LifecycleAgent::Ddpg(a) => a.stored(),
            LifecycleAgent::Ppo(a) => a.demonstrations.len,
        }
    }

    /// The PPO agent, if it is one.
    pub fn as_ppo(&self) -> Option<&PpoAgent> {
        match self {
            LifecycleAgent::Ddpg(_) => None,
            LifecycleAgent::Ppo(a) => Some(a),
        }
    }

    /// How it acts for the lifecycle, whatever it was trained with: DDPG with the manager's
    /// exploration noise and never uniformly at random (an agent trained with a uniform warm-up,
    /// such as the meta-learner's base learner, would otherwise act at random while its new
    /// replay buffer fills — for ever, once no app is left learning offline).
    pub(crate) fn serving_settings(&mut self, config: &ManagerConfig) {
        if let LifecycleAgent::Ddpg(agent) = self {
            agent.config.noise_sigma = config.online_noise_sigma;
            agent.config.uniform_warmup = false;
        }
    }

    /// Why it cannot run under `config` with bootstrapping `bootstrapping`, if it cannot: PPO
    /// learning online while other apps bootstrap, since cloning the fallback replaces the
    /// policy its samples came from and so discards every app's rollout (it would never update).
    pub fn refuses(&self, config: &ManagerConfig, bootstrapping: bool) -> Option<String> {
        let cloning_beside_online = config.online_learning && bootstrapping && config.fixed_stage.is_none();
        (matches!(self, LifecycleAgent::Ppo(_)) && cloning_beside_online).then(|| {
            "a PPO agent cannot learn online while other apps bootstrap (cloning the fallback discards its \
             rollouts): turn online learning or bootstrapping off"
                .to_string()
        })
    }

    /// Whether an ONLINE app's actions are perturbed by exploration: a DDPG agent's with the
    /// manager's σ above 0 (PPO explores only where it learns online).
    pub(crate) fn explores_with_noise(&self, config: &ManagerConfig) -> bool {
        match self {
            LifecycleAgent::Ddpg(_) => config.online_noise_sigma > 0.0,
            LifecycleAgent::Ppo(_) => config.online_learning,
        }
    }

    /// How it explores the actions of an app in `stage` (`retraining`:
    /// [`crate::algorithm::AppLifecycle::retraining`]) when it acts for it with the learner:
    /// only ONLINE; DDPG with the manager's σ (`online_noise_sigma`, or while retraining
    /// `retrain_noise_sigma` if that is larger: an agent that explores ONLINE anyway, as
    /// `no-bootstrap`'s does at Table 2's 0.2, explores no less for retraining), as given and
    /// not scaled by the agent's ε, around what the guard lets its action apply
    /// ([`Ddpg::act_batch_projected`], `ActingFrom::applied` in the manager; at σ 0 the greedy
    /// action itself, which the guard then limits like any proposal); PPO by
    /// sampling its own Gaussian (the value is unused) only when it learns online, since its
    /// updates need its own samples. `None`: greedy.
    pub(crate) fn exploration(&self, config: &ManagerConfig, stage: Stage, retraining: bool) -> Option<f32> {
        if stage != Stage::Online {
            return None;
        }
        match self {
            LifecycleAgent::Ddpg(_) if retraining => Some(config.retrain_noise_sigma.max(config.online_noise_sigma)),
            LifecycleAgent::Ddpg(_) => Some(config.online_noise_sigma),
            LifecycleAgent::Ppo(_) => config.online_learning.then_some(0.0),
        }
    }

    /// Whether an app in `stage` that it acts for acts exploring: DDPG with σ above 0, PPO
    /// sampling ([`LifecycleAgent::exploration`]).
    pub(crate) fn explores(&self, config: &ManagerConfig, stage: Stage, retraining: bool) -> bool {
        match (self, self.exploration(config, stage, retraining)) {
            (_, None) => false,
            (LifecycleAgent::Ddpg(_), Some(sigma)) => sigma > 0.0,
            (LifecycleAgent::Ppo(_), Some(_)) => true,
        }
    }

    /// One action per row of the row-major `states` (`apps[i]` is row i's application),
    /// exploring where `explore` says (DDPG with that row's σ, PPO by sampling its own
    /// Gaussian), in one batched pass (two for PPO when some rows explore and some do not).
    /// A DDPG row's noise is drawn around `effective(row, greedy action)`: what the guard lets
    /// the action apply (the identity where the caller cannot say; [`Ddpg::act_batch_projected`]).
    pub fn act(
        &mut self,
        states: &[f32],
        apps: &[usize],
        explore: &[Option<f32>],
        effective: &mut dyn FnMut(usize, Vec<f32>) -> Vec<f32>,
    ) -> Result<Vec<Vec<f32>>, AgentError> {
        let n = apps.len();
        match self {
            LifecycleAgent::Ddpg(a) => a.act_batch_projected(states, n, explore, effective),
            LifecycleAgent::Ppo(a) => {
                let width = a.ppo.state_dim();
                aware_agents::check_batch(states, n, width)?;
                if explore.len() != n {
                    return Err(AgentError::Invalid(format!("{} exploration flags for {n} rows", explore.len())));
                }
                let row = |i: usize| &states[i * width..(i + 1) * width];
                let (sampled, greedy): (Vec<usize>, Vec<usize>) = (0..n).partition(|&i| explore[i].is_some());
                let mut out = vec![Vec::new(); n];
                if !sampled.is_empty() {
                    let envs: Vec<usize> = sampled.iter().map(|&i| apps[i]).collect();
                    let rows: Vec<f32> = sampled.iter().flat_map(|&i| row(i).iter().copied()).collect();
                    for (i, action) in sampled.iter().zip(a.ppo.sample_for(&envs, &rows)?) {
                        out[*i] = action;
                    }
                }
                if !greedy.is_empty() {
                    let rows: Vec<f32> = greedy.iter().flat_map(|&i| row(i).iter().copied()).collect();
                    let actions = a.ppo.greedy_batch(&rows, greedy.len())?;
                    for (i, action) in greedy.iter().zip(actions.chunks(AGENT_ACTION_DIM)) {
                        out[*i] = action.to_vec();
                    }
                }
                Ok(out)
            }
        }
    }

    /// The greedy action in `state`.
    pub fn greedy(&self, state: &[f32]) -> Result<Vec<f32>, AgentError> {
        match self {
            LifecycleAgent::Ddpg(a) => a.greedy(state),
            LifecycleAgent::Ppo(a) => a.ppo.greedy(state),
        }
    }

    /// Greedy actions for `n` row-major states, flat.
    pub fn greedy_batch(&self, states: &[f32], n: usize) -> Result<Vec<f32>, AgentError> {
        match self {
            LifecycleAgent::Ddpg(a) => a.greedy_batch(states, n),
            LifecycleAgent::Ppo(a) => a.ppo.greedy_batch(states, n),
        }
    }

    /// The greedy policy as it is now, frozen: what an app handed over to it is served with
    /// while the agent goes on learning from other apps ([`crate::manager`]).
    pub fn frozen(&self) -> FrozenPolicy {
        match self {
            LifecycleAgent::Ddpg(a) => a.frozen_policy(),
            LifecycleAgent::Ppo(a) => a.ppo.frozen_policy(),
        }
    }

    /// Keeps one of the fallback's transitions to learn offline from: DDPG's replay, PPO's
    /// demonstrations (the action clipped into the box).
    pub(crate) fn remember_offline(&mut self, e: &Experience) -> Result<(), AgentError> {
        match self {
            LifecycleAgent::Ddpg(a) => a.remember(e),
            LifecycleAgent::Ppo(a) => {
                aware_agents::check_observation(&e.state, a.ppo.state_dim())?;
                if e.action.len() != AGENT_ACTION_DIM || e.action.iter().any(|x| !x.is_finite()) {
                    return Err(AgentError::BadObservation(format!(
                        "demonstrated action {:?} is not {AGENT_ACTION_DIM} finite values",
                        e.action
                    )));
                }
                let action: Vec<f32> = e.action.iter().map(|x| x.clamp(-1.0, 1.0)).collect();
                a.demonstrations.push(&e.state, &action);
                Ok(())
            }
        }
    }

    /// `updates` offline steps: DDPG's TD3+BC at `bc_alpha` (infinite: no behaviour term,
    /// the plain agent, TD3+BC's limit); PPO's behaviour cloning, one minibatch of [`CLONING_BATCH`]
    /// demonstrations each (nothing before it has any).
    pub(crate) fn train_offline(&mut self, updates: usize, bc_alpha: f32) -> Result<(), AgentError> {
        match self {
            LifecycleAgent::Ddpg(a) => {
                a.config.bc_alpha = bc_alpha.is_finite().then_some(bc_alpha);
                a.train_offline(updates);
                a.config.bc_alpha = None;
                Ok(())
            }
            LifecycleAgent::Ppo(a) => {
                if a.demonstrations.len == 0 || updates == 0 {
                    return Ok(());
                }
                let (states, actions) = a.demonstrations.sample(updates * CLONING_BATCH, &mut a.rng);
                let n = updates * CLONING_BATCH;
                a.ppo.imitate_with(&states, &actions, n, 1, CloningLoss::Absolute).map(|_| ())
            }
        }
    }

    /// Learns online from app `app`'s outcome `e` of the last interval, `sampled` being the
    /// action the agent sampled for it (PPO learns from it, DDPG from `e.action`, what was
    /// applied); `truncated` marks the episode's last interval. DDPG keeps TD3+BC's term at
    /// `bc_alpha` when given. PPO with no sample awaiting this app's outcome (the guard let the
    /// fallback act, or cloning replaced the policy since) learns nothing from it and cuts the
    /// app's rollout there ([`Ppo::cut`]), so no advantage reaches across the gap.
    pub(crate) fn learn_online(
        &mut self,
        app: usize,
        e: &Experience,
        sampled: Option<&[f32]>,
        truncated: bool,
        bc_alpha: Option<f32>,
        updates: usize,
    ) -> Result<(), AgentError> {
        match self {
            LifecycleAgent::Ddpg(a) => {
                a.config.bc_alpha = bc_alpha;
                let out = a.observe(e);
                if matches!(out, Ok(Some(_))) && updates > 1 {
                    a.train_offline(updates - 1);
                }
                a.config.bc_alpha = None;
                out.map(|_| ())
            }
            LifecycleAgent::Ppo(a) => match sampled {
                Some(action) if a.ppo.awaiting(app) => {
                    let e = Experience { action: action.to_vec(), ..e.clone() };
                    a.ppo.observe(app, &e, truncated).map(|_| ())
                }
                _ => {
                    a.ppo.cut(app);
                    Ok(())
                }
            },
        }
    }

    /// App `app`'s last decision closes no transition (not applied, its outcome missing or
    /// late, its profile edited): PPO cuts its rollout there ([`Ppo::cut`]).
    pub(crate) fn cut(&mut self, app: usize) {
        if let LifecycleAgent::Ppo(a) = self {
            a.ppo.cut(app);
        }
    }

    /// App `app` no longer learns online (its stage moved on): PPO drops its partial rollout.
    pub(crate) fn stop_online(&mut self, app: usize) {
        if let LifecycleAgent::Ppo(a) = self {
            a.ppo.forget(app);
        }
    }

    /// Saves the weights and `checkpoint.json` in `dir` for states of `space`.
    pub fn save(&self, dir: &Path, space: &Space) -> Result<(), AgentError> {
        match self {
            LifecycleAgent::Ddpg(a) => a.save(dir, space, a.updates()),
            LifecycleAgent::Ppo(a) => a.ppo.save(dir, space, a.ppo.updates()),
        }
    }

    /// Saves the agent as [`LifecycleAgent::save`], a DDPG agent with its Polyak-averaged actor
    /// ([`Ddpg::save_averaged`]); PPO keeps no average and is saved as it is.
    pub fn save_averaged(&self, dir: &Path, space: &Space) -> Result<(), AgentError> {
        match self {
            LifecycleAgent::Ddpg(a) => a.save_averaged(dir, space, a.updates()),
            LifecycleAgent::Ppo(_) => self.save(dir, space),
        }
    }

    /// Loads whichever of the two `dir`'s `checkpoint.json` names, for states of `space`; any
    /// other algorithm is refused with its name.
    pub fn load(dir: &Path, space: &Space, seed: u64) -> Result<Self, AgentError> {
        let meta = Checkpoint::read_metadata(dir)?;
        match meta.algorithm.as_str() {
            "ddpg" => Ddpg::load(dir, space, AGENT_ACTION_DIM, seed).map(Into::into),
            "ppo" => Ok(Self::ppo(Ppo::load(dir, space, PpoActions::Continuous(AGENT_ACTION_DIM), seed)?, seed)),
            other => Err(AgentError::Invalid(format!(
                "{}: a {other} agent; the lifecycle runs ddpg or ppo",
                dir.join(aware_agents::METADATA).display()
            ))),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn experience(state: f32, action: f32) -> Experience {
        Experience {
            state: vec![state; aware_env::STATE_DIM],
            action: vec![action; AGENT_ACTION_DIM],
            reward: 0.0,
            next_state: vec![state; aware_env::STATE_DIM],
            terminal: false,
        }
    }

    /// How each stage explores and learns, per algorithm: a DDPG agent retraining explores with
    /// the manager's retraining σ and learns online without a behaviour term; everything else
    /// as before session 52 (ONLINE after bootstrapping greedy with σ 0, no learning; OFFLINE
    /// learning offline; PPO retraining by cloning its own transitions, greedily).
    #[test]
    fn each_stage_explores_and_learns_as_its_algorithm_can() {
        use crate::manager::Learning;
        let config = ManagerConfig { retrain_noise_sigma: 0.1, online_noise_sigma: 0.0, ..ManagerConfig::default() };
        let ddpg = LifecycleAgent::fresh(Learner::Ddpg, 3);
        let ppo = LifecycleAgent::fresh(Learner::Ppo, 3);
        // (stage, retraining, DDPG's σ, PPO samples, DDPG learns, PPO learns)
        let cases = [
            (Stage::Offline, false, None, false, Learning::Offline, Learning::Offline),
            (Stage::Online, false, Some(0.0), false, Learning::None, Learning::None),
            (Stage::Online, true, Some(0.1), false, Learning::Online { bc: None }, Learning::Offline),
            (Stage::Serving, false, None, false, Learning::None, Learning::None),
        ];
        for (stage, retraining, sigma, samples, ddpg_learns, ppo_learns) in cases {
            assert_eq!(ddpg.exploration(&config, stage, retraining), sigma, "{stage:?} {retraining}");
            assert_eq!(ppo.exploration(&config, stage, retraining).is_some(), samples, "{stage:?} {retraining}");
            assert_eq!(config.learning(Learner::Ddpg, stage, retraining), ddpg_learns, "{stage:?} {retraining}");
            assert_eq!(config.learning(Learner::Ppo, stage, retraining), ppo_learns, "{stage:?} {retraining}");
        }
        // High stakes: the fallback acts while the agent retrains, and it learns from it offline.
        let high = ManagerConfig { high_stakes: Some(true), ..config.clone() };
        assert_eq!(high.learning(Learner::Ddpg, Stage::Online, true), Learning::Offline);
        // Learning online (RL without bootstrapping): TD3+BC's term kept, PPO samples.
        let online = ManagerConfig { online_learning: true, online_noise_sigma: 0.2, ..config };
        assert_eq!(online.learning(Learner::Ddpg, Stage::Online, true), Learning::Online { bc: Some(0.5) });
        assert!(ppo.exploration(&online, Stage::Online, false).is_some());
        // ... and an agent that explores ONLINE at Table 2's σ 0.2 (`no-bootstrap`) explores no
        // less when it retrains.
        assert_eq!(ddpg.exploration(&online, Stage::Online, true), Some(0.2));
        assert_eq!(ddpg.exploration(&online, Stage::Online, false), Some(0.2));
    }

    /// A PPO agent learning offline clones the fallback: where it held (action 0) in one state
    /// and scaled up (0.6) in another, the greedy policy comes to do the same.
    #[test]
    fn ppo_learns_offline_by_cloning_the_fallback() {
        let mut agent = LifecycleAgent::fresh(Learner::Ppo, 3);
        let before = agent.greedy(&[0.9; aware_env::STATE_DIM]).unwrap();
        for _ in 0..200 {
            agent.remember_offline(&experience(0.1, 0.0)).unwrap();
            agent.remember_offline(&experience(0.9, 0.6)).unwrap();
        }
        agent.train_offline(300, 0.5).unwrap();
        let low = agent.greedy(&[0.1; aware_env::STATE_DIM]).unwrap();
        let high = agent.greedy(&[0.9; aware_env::STATE_DIM]).unwrap();
        for (l, h) in low.iter().zip(&high) {
            assert!(l.abs() < 0.1, "held state: {low:?}");
            assert!((h - 0.6).abs() < 0.1, "scale-up state: {high:?}");
        }
        assert!(before.iter().all(|b| (b - 0.6).abs() > 0.2), "the untrained policy already did it: {before:?}");
        assert_eq!(agent.as_ppo().unwrap().demonstrations(), 400);
        let bad = Experience { action: vec![f32::NAN; AGENT_ACTION_DIM], ..experience(0.5, 0.0) };
        assert!(agent.remember_offline(&bad).is_err());
    }

    /// The demonstrations keep the newest pairs once full.
    #[test]
    fn demonstrations_overwrite_the_oldest() {
        let mut d = Demonstrations::new(1, 1, 3);
        for x in 0..5 {
            d.push(&[x as f32], &[x as f32]);
        }
        let mut kept = d.states.clone();
        kept.sort_by(f32::total_cmp);
        assert_eq!(kept, vec![2.0, 3.0, 4.0]);
        assert_eq!(d.len, 3);
    }

    /// PPO samples only for the apps that explore, remembers the sample under the app's index,
    /// learns from its outcome with the action it sampled (whatever was applied), and an app
    /// that stops learning online is forgotten.
    #[test]
    fn ppo_samples_per_app_and_learns_from_what_it_sampled() {
        let mut agent = LifecycleAgent::fresh(Learner::Ppo, 5);
        let states: Vec<f32> = (0..3).flat_map(|i| vec![0.2 * i as f32; aware_env::STATE_DIM]).collect();
        let actions = agent.act(&states, &[4, 7, 9], &[Some(1.0), None, Some(1.0)], &mut |_, a| a).unwrap();
        assert_eq!(actions.len(), 3);
        let greedy = agent.greedy(&states[aware_env::STATE_DIM..2 * aware_env::STATE_DIM]).unwrap();
        assert_eq!(actions[1], greedy, "a row that does not explore acts greedily");
        let LifecycleAgent::Ppo(p) = &agent else { unreachable!() };
        assert!(p.ppo.awaiting(4) && p.ppo.awaiting(9) && !p.ppo.awaiting(7));
        // Applied: something else (the guard's); learned: the sample.
        let e = Experience { action: vec![0.0; AGENT_ACTION_DIM], ..experience(0.0, 0.0) };
        agent.learn_online(4, &e, Some(&actions[0]), false, None, 1).unwrap();
        let e9 = Experience { action: vec![0.0; AGENT_ACTION_DIM], ..experience(0.4, 0.0) };
        let wrong = vec![9.0; AGENT_ACTION_DIM];
        assert!(agent.learn_online(9, &e9, Some(&wrong), false, None, 1).is_err(), "not the sampled action");
        agent.stop_online(9);
        let LifecycleAgent::Ppo(p) = &agent else { unreachable!() };
        assert!(!p.ppo.awaiting(9) && !p.ppo.awaiting(4));
        // Nothing awaiting: nothing learned, no error.
        agent.learn_online(7, &e, Some(&actions[1]), false, None, 1).unwrap();
    }

    /// A checkpoint says which algorithm it holds: either loads back acting as it was saved, and
    /// another algorithm's is refused with its name.
    #[test]
    fn checkpoints_load_back_whichever_algorithm_they_hold() {
        let space = aware_env::StateEncoder::space();
        let state = vec![0.3; aware_env::STATE_DIM];
        for algorithm in [Learner::Ddpg, Learner::Ppo] {
            let dir = tempfile::tempdir().unwrap();
            let agent = LifecycleAgent::fresh(algorithm, 11);
            agent.save(dir.path(), &space).unwrap();
            let loaded = LifecycleAgent::load(dir.path(), &space, 2).unwrap();
            assert_eq!(loaded.algorithm(), algorithm);
            assert_eq!(loaded.greedy(&state).unwrap(), agent.greedy(&state).unwrap());
        }
        let dir = tempfile::tempdir().unwrap();
        LifecycleAgent::fresh(Learner::Ppo, 1).save(dir.path(), &space).unwrap();
        let meta = dir.path().join(aware_agents::METADATA);
        let text = std::fs::read_to_string(&meta).unwrap().replace("\"ppo\"", "\"dqn\"");
        std::fs::write(&meta, text).unwrap();
        let err = LifecycleAgent::load(dir.path(), &space, 2).err().unwrap().to_string();
        assert!(err.contains("dqn") && err.contains("ddpg or ppo"), "{err}");
    }

    #[test]
    fn algorithm_names_round_trip() {
        for a in [Learner::Ddpg, Learner::Ppo] {
            assert_eq!(a.name().parse::<Learner>().unwrap(), a);
        }
        assert!("sac".parse::<Learner>().unwrap_err().contains("ddpg or ppo"));
    }
}
