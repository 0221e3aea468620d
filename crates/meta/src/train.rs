//! Meta-training and adaptation: one shared base learner (DDPG, AWARE's, by default; any
//! [`BaseLearner`], PPO among them) whose state is the encoded observation ⊕ the app's workload
//! embedding, driven through lab's one rollout loop.
//!
//! Per application the driver keeps its finished episodes (the best M by total reward, or FLASH's
//! best and worst halves: the meta-learner's input; probe episodes only unless
//! `embed_own_episodes`) and its recent transitions. Every `meta_every` intervals, while the
//! meta-learner learns, it takes one end-to-end step: the embeddings of a batch of apps are
//! computed with gradients, a minibatch of each app's transitions is formed with that app's
//! embedding in the state, and the base learner's loss on them ([`BaseLearner::state_gradient`]:
//! DDPG's critic TD loss, not the actor's, see [`Ddpg::state_gradient`]; PPO's actor-critic
//! loss), summed over the apps, is back-propagated through the base learner's input into the
//! meta-learner (AWARE §4.3). The base learner itself learns from every transition it may: an
//! off-policy one (DDPG) from the fallback's probes too, an on-policy one (PPO) only from the
//! actions it sampled itself. Embeddings are refreshed at episode ends. An app with fewer finished episodes
//! than the meta-learner needs acts with a zero embedding.

use std::collections::VecDeque;

use aware_agents::ddpg::Ddpg;
use aware_agents::{Agent, Batch, Experience, action_values};

use crate::base::BaseLearner;
use aware_core::Bounds;
use aware_core::{Action, StepInfo};
use aware_env::{ActionKind, Control, coordinates};
use aware_lab::LabError;
use aware_lab::rollout::{Arena, Driver, EpisodeStart, Interval, Recommenders};
use rand::{RngExt, SeedableRng};
use rand_pcg::Pcg64Mcg;

use crate::signature::SignatureHead;
use crate::{Bundle, MetaError, MetaLearner, Selection};

/// How meta-training interleaves with the base learner.
#[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct MetaTrainConfig {
    /// Intervals between meta-learner steps.
    pub meta_every: u64,
    /// Apps per meta-learner step.
    pub meta_apps: usize,
    /// Transitions per app in a meta-learner step.
    pub meta_samples: usize,
    /// Recent transitions kept per app for those minibatches.
    pub recent: usize,
    /// Weight of the auxiliary task beside the critic's gradient: the unit embedding predicts
    /// its bundle's input signature (`crates/meta/src/signature.rs`); 0 turns it off. The task
    /// starts with the input standardisation ([`MetaDriver::fit_normaliser`], after the pool's
    /// probes), whose statistics its targets are read in: a driver that never fits one
    /// (`PoolSpec::normalise` off) trains without it.
    pub signature_weight: f32,
}

impl Default for MetaTrainConfig {
    fn default() -> Self {
        Self { meta_every: 1, meta_apps: 8, meta_samples: 16, recent: 2_000, signature_weight: 2.0 }
    }
}

/// One app's memory: finished episodes (best first, at most M), the episode being recorded,
/// and recent transitions (observation only, without embedding).
#[derive(Debug, Default, Clone, PartialEq, serde::Serialize, serde::Deserialize)]
struct AppMemory {
    episodes: Vec<(f64, Vec<Vec<f32>>)>,
    current: Vec<Vec<f32>>,
    current_reward: f64,
    recent: VecDeque<Experience>,
}

/// The meta-conditioned base learner as a rollout driver.
pub struct MetaDriver<A: BaseLearner = Ddpg> {
    pub agent: A,
    pub meta: MetaLearner,
    pub config: MetaTrainConfig,
    /// Explore (training) or act greedily (evaluation).
    pub explore: bool,
    /// The base learner learns from the transitions (an on-policy one only from actions it
    /// sampled while exploring: with `explore` off it learns nothing, while the meta-learner's
    /// steps still run).
    pub learn: bool,
    /// Probe instead of acting: the fallback's choices (see [`MetaDriver::with_fallback`]), or
    /// uniform random actions without one; a behaviour that is the same in meta-training and at
    /// adaptation (AWARE's fallback in OFFLINE plays this part).
    pub probing: bool,
    /// Whether episodes the agent drove (not probes) also enter the apps' kept episodes. Off
    /// (the default), embeddings read probe episodes only, so the meta-learner never learns to
    /// read back the agent's own embedding-conditioned behaviour (a shortcut that fails on
    /// unseen apps, and with the auxiliary task one that would ask the embedding to predict its
    /// own conditioned actions).
    pub embed_own_episodes: bool,
    observation_dim: usize,
    apps: Vec<AppMemory>,
    embeddings: Vec<Option<Vec<f32>>>,
    intervals: u64,
    rng: Pcg64Mcg,
    /// Meta-learner steps taken by this driver.
    pub meta_steps: u64,
    /// Who probes: the fallback recommenders (AWARE's OFFLINE behaviour), whose choices are
    /// recorded as the agent's action would be; uniform random actions without one.
    fallback: Option<Fallback>,
    /// The probe's actions this interval, in the agent's action space.
    probe_actions: Vec<Vec<f32>>,
    /// The auxiliary task's head, fitted with the input standardisation.
    signature_head: Option<SignatureHead>,
}

/// Everything a driver's meta-training goes on from at an episode's end, bit for bit
/// ([`MetaDriver::training_state`], [`MetaDriver::resume`]): the base learner's (`T`: DDPG's by
/// default, or PPO's, [`crate::base::Resumable`]) and the
/// meta-learner's training states, the auxiliary head, every app's kept episodes and recent
/// transitions, the embeddings, the generator and the counters. Not the fallback: it acts only
/// in probe episodes, and a state is taken only once they are over.
#[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct DriverTraining<T = aware_agents::DdpgTraining> {
    pub(crate) agent: T,
    meta: crate::MetaTraining,
    config: MetaTrainConfig,
    explore: bool,
    learn: bool,
    embed_own_episodes: bool,
    observation_dim: usize,
    apps: Vec<AppMemory>,
    embeddings: Vec<Option<Vec<f32>>>,
    intervals: u64,
    rng: Pcg64Mcg,
    meta_steps: u64,
    signature_head: Option<SignatureHead>,
}

impl<A: crate::base::Resumable> MetaDriver<A> {
    /// Everything its training goes on from ([`DriverTraining`]); taken between episodes, with
    /// no episode open (the probes over: a resumed driver does not probe until told to).
    pub fn training_state(&self) -> Result<DriverTraining<A::Training>, MetaError> {
        self.between_episodes()?;
        Ok(self.state_with(self.agent.training_state(), self.apps.clone()))
    }

    /// [`MetaDriver::training_state`] with its large parts — every app's memory, the base
    /// learner's replay buffer or demonstrations — moved into it, not copied (a GB at 800
    /// apps): the driver is without them until [`MetaDriver::end_lending`] hands them back,
    /// and must not run meanwhile. For writing the state down.
    pub fn lend_training_state(&mut self) -> Result<DriverTraining<A::Training>, MetaError> {
        self.between_episodes()?;
        let apps = std::mem::take(&mut self.apps);
        let agent = self.agent.lend_training_state();
        Ok(self.state_with(agent, apps))
    }

    /// Takes back what [`MetaDriver::lend_training_state`] lent.
    pub fn end_lending(&mut self, state: DriverTraining<A::Training>) {
        self.apps = state.apps;
        self.agent.end_lending(state.agent);
    }

    fn between_episodes(&self) -> Result<(), MetaError> {
        if self.apps.iter().any(|a| !a.current.is_empty()) {
            return Err(MetaError::Config {
                field: "training state",
                reason: "taken only between episodes, with none open".into(),
            });
        }
        Ok(())
    }

    /// The state with `agent`'s training state and `apps`, the rest copied.
    fn state_with(&self, agent: A::Training, apps: Vec<AppMemory>) -> DriverTraining<A::Training> {
        DriverTraining {
            agent,
            meta: self.meta.training_state(),
            config: self.config.clone(),
            explore: self.explore,
            learn: self.learn,
            embed_own_episodes: self.embed_own_episodes,
            observation_dim: self.observation_dim,
            apps,
            embeddings: self.embeddings.clone(),
            intervals: self.intervals,
            rng: self.rng.clone(),
            meta_steps: self.meta_steps,
            signature_head: self.signature_head.clone(),
        }
    }

    /// The driver `state` was taken from, as it was, probing (should it ever probe again) with
    /// `fallback`. A state no driver could have had is refused, saying which part.
    pub fn resume(state: DriverTraining<A::Training>, fallback: Option<Fallback>) -> Result<Self, MetaError> {
        let bad = |reason: String| MetaError::Config { field: "training state", reason };
        let agent = A::resume(state.agent)?;
        let meta = MetaLearner::resume(state.meta)?;
        let width = meta.config().embedding;
        let (obs, action) = (state.observation_dim, BaseLearner::action_dim(&agent));
        if action == 0 {
            return Err(bad("the base learner does not act in a continuous box".into()));
        }
        if BaseLearner::state_dim(&agent) != obs + width {
            return Err(bad(format!(
                "the base learner reads {} values, {obs} + a {width}-value embedding expected",
                BaseLearner::state_dim(&agent)
            )));
        }
        if state.config.meta_every == 0 || state.config.recent == 0 {
            return Err(bad("meta_every and recent must be at least 1".into()));
        }
        if state.embeddings.len() != state.apps.len()
            || state.embeddings.iter().flatten().any(|e| e.len() != width || !e.iter().all(|v| v.is_finite()))
        {
            return Err(bad(format!("embeddings do not fit {} apps of {width} values", state.apps.len())));
        }
        let features = obs + action + 1;
        for (i, app) in state.apps.iter().enumerate() {
            let steps_fit = app.episodes.iter().flat_map(|(_, t)| t).chain(&app.current).all(|s| s.len() == features);
            let recent_fit = app
                .recent
                .iter()
                .all(|e| e.state.len() == obs && e.next_state.len() == obs && e.action.len() == action);
            if !steps_fit || !recent_fit || app.recent.len() > state.config.recent {
                return Err(bad(format!("app {i}'s episodes or transitions do not fit {obs} + {action} features")));
            }
        }
        if let Some(head) = &state.signature_head {
            // Per feature of the meta-learner's steps, the mean and the spread.
            head.check(width, 2 * meta.config().features).map_err(bad)?;
        }
        Ok(Self {
            agent,
            meta,
            config: state.config,
            explore: state.explore,
            learn: state.learn,
            probing: false,
            embed_own_episodes: state.embed_own_episodes,
            observation_dim: obs,
            apps: state.apps,
            embeddings: state.embeddings,
            intervals: state.intervals,
            rng: state.rng,
            meta_steps: state.meta_steps,
            fallback,
            probe_actions: Vec::new(),
            signature_head: state.signature_head,
        })
    }
}

/// The fallback probing for every app, and how its choices read in the agent's action space.
pub struct Fallback {
    pub recommenders: Recommenders,
    pub kind: ActionKind,
    /// Per app, the bounds the action space spans.
    pub bounds: Vec<Bounds>,
}

impl<A: BaseLearner> MetaDriver<A> {
    /// `agent`'s state must be `observation_dim` + the meta-learner's embedding.
    pub fn new(agent: A, meta: MetaLearner, observation_dim: usize, config: MetaTrainConfig, seed: u64) -> Self {
        Self {
            agent,
            meta,
            config,
            explore: true,
            learn: true,
            probing: false,
            embed_own_episodes: false,
            observation_dim,
            apps: Vec::new(),
            embeddings: Vec::new(),
            intervals: 0,
            rng: Pcg64Mcg::seed_from_u64(seed),
            meta_steps: 0,
            fallback: None,
            probe_actions: Vec::new(),
            signature_head: None,
        }
    }

    /// Apps it keeps a memory of.
    pub fn apps_known(&self) -> usize {
        self.apps.len()
    }

    /// Transitions kept for the meta-learner's batches, over every app.
    pub fn recent_transitions(&self) -> usize {
        self.apps.iter().map(|a| a.recent.len()).sum()
    }

    /// Probes with `fallback` instead of uniform random actions.
    pub fn with_fallback(mut self, fallback: Fallback) -> Self {
        self.fallback = Some(fallback);
        self
    }

    /// Replaces the fallback (new apps: adaptation).
    pub fn set_fallback(&mut self, fallback: Fallback) {
        self.fallback = Some(fallback);
    }

    /// Forgets every app (a new pool: adaptation to unseen apps starts from nothing known).
    pub fn forget_apps(&mut self) {
        self.apps.clear();
        self.embeddings.clear();
    }

    /// The current embedding of app `i`, if it has one.
    pub fn embedding(&self, app: usize) -> Option<&[f32]> {
        self.embeddings.get(app).and_then(|e| e.as_deref())
    }

    fn embedding_width(&self) -> usize {
        self.meta.config().embedding
    }

    fn ensure(&mut self, apps: usize) {
        if self.apps.len() < apps {
            self.apps.resize_with(apps, AppMemory::default);
            self.embeddings.resize(apps, None);
        }
    }

    /// The observation ⊕ the app's embedding as the base learner reads it: scaled to unit
    /// length (its direction is the workload; its size would be one more input the critic could
    /// lean on as a bias), zeros without one.
    fn conditioned(&self, app: usize, observation: &[f32]) -> Vec<f32> {
        let mut s = observation.to_vec();
        match self.embedding(app) {
            Some(e) => s.extend_from_slice(&unit(e).0),
            None => s.extend(std::iter::repeat_n(0.0, self.embedding_width())),
        }
        s
    }

    /// The bundle app `i`'s embedding is read from: its kept episodes.
    fn bundle(&self, app: usize) -> Result<Bundle, MetaError> {
        Bundle::new(&self.apps[app].episodes.iter().map(|(_, t)| t.clone()).collect::<Vec<_>>())
    }

    /// The profile of app `i`'s bundle ([`MetaLearner::profile`]): what the OOD detector reads
    /// beside its embedding.
    pub fn profile(&self, app: usize) -> Result<crate::Profile, MetaError> {
        self.meta.profile(&self.bundle(app)?)
    }

    /// Recomputes the embedding of every app with enough finished episodes, in one batched pass.
    pub fn refresh_embeddings(&mut self) -> Result<(), MetaError> {
        let need = self.meta.config().min_trajectories;
        let ready: Vec<usize> = (0..self.apps.len()).filter(|&i| self.apps[i].episodes.len() >= need).collect();
        if ready.is_empty() {
            return Ok(());
        }
        let bundles = ready.iter().map(|&i| self.bundle(i)).collect::<Result<Vec<_>, _>>()?;
        let refs: Vec<&Bundle> = bundles.iter().collect();
        // While the meta-learner learns, the pool's embeddings are centred on the pool's mean
        // output afresh (a frozen one keeps the centre it was trained with).
        for (i, e) in ready.into_iter().zip(self.meta.centre_on(&refs)?) {
            self.embeddings[i] = Some(e);
        }
        Ok(())
    }

    /// Fits the meta-learner's input standardisation on every app's kept episodes (the pool's
    /// probe episodes) and re-embeds them.
    pub fn fit_normaliser(&mut self) -> Result<(), MetaError> {
        let need = self.meta.config().min_trajectories;
        let bundles = (0..self.apps.len())
            .filter(|&i| self.apps[i].episodes.len() >= need)
            .map(|i| self.bundle(i))
            .collect::<Result<Vec<_>, _>>()?;
        if bundles.is_empty() {
            return Err(MetaError::TooFewTrajectories { have: 0, need });
        }
        self.meta.fit_normaliser(&bundles.iter().collect::<Vec<_>>())?;
        if self.config.signature_weight > 0.0 {
            let signatures = bundles.iter().map(|b| self.meta.signature(b)).collect::<Result<Vec<_>, _>>()?;
            self.signature_head = Some(SignatureHead::fit(self.embedding_width(), &signatures, &mut self.rng));
        }
        self.refresh_embeddings()
    }

    /// The probe episodes are over: a learning base learner that cannot learn from them in its
    /// updates (on-policy: PPO) starts from them now ([`MetaDriver::imitate_recent`]); DDPG
    /// already learns from them through its replay.
    pub fn probes_done(&mut self) -> Result<(), MetaError> {
        if self.learn && !self.agent.learns_off_policy() {
            self.imitate_recent()?;
        }
        Ok(())
    }

    /// Hands the base learner every app's recent transitions (right after the probes: the
    /// fallback's), each state conditioned on the app's embedding as the app acts with it
    /// (zeros without one), to start from what the fallback did ([`BaseLearner::imitate`]).
    /// They anchor its later updates only while the meta-learner is frozen (adaptation): while
    /// it learns, the embeddings in those states go on moving. Returns how many transitions it
    /// was given.
    pub fn imitate_recent(&mut self) -> Result<usize, MetaError> {
        let (mut states, mut actions, mut n) = (Vec::new(), Vec::new(), 0);
        for app in 0..self.apps.len() {
            for x in &self.apps[app].recent {
                states.extend(self.conditioned(app, &x.state));
                actions.extend_from_slice(&x.action);
                n += 1;
            }
        }
        if n > 0 {
            let anchor = !self.meta.is_learning();
            self.agent.imitate(&states, &actions, n, anchor)?;
        }
        Ok(n)
    }

    /// One end-to-end meta-learner step over a random batch of apps with embeddings and data.
    fn meta_step(&mut self) -> Result<(), MetaError> {
        let (s_dim, e_dim) = (self.observation_dim, self.embedding_width());
        let need = self.meta.config().min_trajectories;
        let mut candidates: Vec<usize> = (0..self.apps.len())
            .filter(|&i| self.apps[i].episodes.len() >= need && self.apps[i].recent.len() >= self.config.meta_samples)
            .collect();
        if candidates.is_empty() {
            return Ok(());
        }
        // A random subset, without replacement.
        for k in (1..candidates.len()).rev() {
            let j = self.rng.random_range(0..=k);
            candidates.swap(k, j);
        }
        candidates.truncate(self.config.meta_apps);
        let bundles = candidates.iter().map(|&i| self.bundle(i)).collect::<Result<Vec<_>, _>>()?;
        let refs: Vec<&Bundle> = bundles.iter().collect();
        let pass = self.meta.forward(&refs)?;
        let k = self.config.meta_samples;
        let mut batch = Batch {
            size: candidates.len() * k,
            states: Vec::new(),
            actions: Vec::new(),
            rewards: Vec::new(),
            next_states: Vec::new(),
            terminals: Vec::new(),
        };
        let units: Vec<(Vec<f32>, f32)> = pass.embeddings().chunks_exact(e_dim).map(unit).collect();
        for (b, &app) in candidates.iter().enumerate() {
            let e = &units[b].0;
            let recent = &self.apps[app].recent;
            for _ in 0..k {
                let x = &recent[self.rng.random_range(0..recent.len())];
                batch.states.extend_from_slice(&x.state);
                batch.states.extend_from_slice(e);
                batch.next_states.extend_from_slice(&x.next_state);
                batch.next_states.extend_from_slice(e);
                batch.actions.extend_from_slice(&x.action);
                batch.rewards.push(x.reward);
                batch.terminals.push(if x.terminal { 1.0 } else { 0.0 });
            }
        }
        let grad = BaseLearner::state_gradient(&self.agent, &batch).map_err(|e| MetaError::Gradient(e.to_string()))?;
        let width = s_dim + e_dim;
        let mut d = vec![0.0f32; candidates.len() * e_dim];
        for (row, g) in grad.chunks_exact(width).enumerate() {
            let b = row / k;
            d[b * e_dim..(b + 1) * e_dim].iter_mut().zip(&g[s_dim..]).for_each(|(a, v)| *a += v);
        }
        // Only what differs between the apps trains the meta-learner: the gradient's component
        // common to every app of the batch is removed. That component asks every embedding to
        // move the same way — the critic using the embedding as one more bias, to reach the
        // magnitude of its targets sooner — which carries nothing about any workload, and, left
        // in, it grew every embedding into the same large vector (cosine 0.99999999 between
        // any two apps, norm ~50 after 200 steps on `experiment fig6 --quick`). A centring
        // meta-learner ([`crate::MetaConfig::centring`]) removes the batch mean of the whole
        // gradient, the auxiliary task's and the unit scaling's included, itself.
        if candidates.len() > 1 {
            crate::rows::remove_column_mean(&mut d, e_dim);
        }
        // The auxiliary task: the unit embedding predicts its bundle's input signature.
        if let Some(head) = self.signature_head.as_mut().filter(|_| self.config.signature_weight > 0.0) {
            let signatures = bundles.iter().map(|b| self.meta.signature(b)).collect::<Result<Vec<_>, _>>()?;
            let refs: Vec<&[f32]> = units.iter().map(|(u, _)| u.as_slice()).collect();
            let weight = self.config.signature_weight;
            for (b, g) in head.step(&refs, &signatures).into_iter().enumerate() {
                d[b * e_dim..(b + 1) * e_dim].iter_mut().zip(g).for_each(|(a, v)| *a += weight * v);
            }
        }
        // Through the unit scaling: d/de (e/‖e‖) = (I − u uᵀ) / ‖e‖.
        for (b, (u, norm)) in units.iter().enumerate() {
            let g = &mut d[b * e_dim..(b + 1) * e_dim];
            let along: f32 = g.iter().zip(u).map(|(a, b)| a * b).sum();
            // An embedding near zero would blow the step up: its norm is floored at 10⁻³.
            g.iter_mut()
                .zip(u)
                .for_each(|(a, u)| *a = if *norm > 0.0 { (*a - along * u) / norm.max(1e-3) } else { 0.0 });
        }
        self.meta.step(&pass, &d)?;
        self.meta_steps += 1;
        Ok(())
    }

    /// Files the app's episode in progress among its kept episodes: the best M by total reward
    /// (AWARE), or the best ⌈M/2⌉ and the worst ⌊M/2⌋ (FLASH).
    fn finish_episode(&mut self, app: usize) {
        let (m, selection) = (self.meta.config().trajectories, self.meta.config().selection);
        let mem = &mut self.apps[app];
        if !mem.current.is_empty() {
            let episode = std::mem::take(&mut mem.current);
            mem.episodes.push((mem.current_reward, episode));
            mem.episodes.sort_by(|a, b| b.0.total_cmp(&a.0));
            if mem.episodes.len() > m {
                let best = match selection {
                    Selection::Best => m,
                    Selection::BestAndWorst => m.div_ceil(2),
                };
                let excess = mem.episodes.len() - m;
                mem.episodes.drain(best..best + excess);
            }
        }
        mem.current_reward = 0.0;
    }
}

/// `e / ‖e‖` and `‖e‖`; the zero vector (every output off, with a ReLU output) stays zero.
pub(crate) fn unit(e: &[f32]) -> (Vec<f32>, f32) {
    let norm = e.iter().map(|v| v * v).sum::<f32>().sqrt();
    if norm > 1e-12 { (e.iter().map(|v| v / norm).collect(), norm) } else { (vec![0.0; e.len()], 0.0) }
}

fn lab(e: MetaError) -> LabError {
    LabError::input("meta-learner", e.to_string())
}

impl<A: BaseLearner> Driver for MetaDriver<A> {
    fn episode_start(&mut self, start: EpisodeStart) {
        if let Some(f) = self.fallback.as_mut() {
            f.recommenders.episode_start(start);
        }
    }

    fn decide(&mut self, arena: &dyn Arena, states: &[Vec<f32>], infos: &[StepInfo]) -> Result<Vec<Control>, LabError> {
        self.ensure(states.len());
        if self.probing {
            let d = BaseLearner::action_dim(&self.agent);
            let Some(fallback) = self.fallback.as_mut() else {
                return Ok((0..states.len())
                    .map(|_| {
                        Control::Action(Action::Continuous((0..d).map(|_| self.rng.random_range(-1.0..=1.0)).collect()))
                    })
                    .collect());
            };
            let controls = fallback.recommenders.decide(arena, states, infos)?;
            self.probe_actions = controls
                .iter()
                .zip(infos)
                .enumerate()
                .map(|(i, (c, info))| match c {
                    Control::Recommendation(rec) => {
                        let l = rec.containers.first().map(|c| c.limits);
                        let target = l.map_or((info.cpu_limit_millicores, info.memory_limit_bytes), |l| {
                            (l.cpu_millicores, l.memory_bytes)
                        });
                        coordinates(
                            fallback.kind,
                            &fallback.bounds[i],
                            (target.0, target.1, rec.replicas),
                            (info.cpu_limit_millicores, info.memory_limit_bytes, info.replicas),
                        )
                        .unwrap_or_else(|| vec![0.0; d])
                    }
                    _ => vec![0.0; d],
                })
                .collect();
            return Ok(controls);
        }
        // One batched forward pass for every app (the fused inference path).
        let rows: Vec<f32> = states.iter().enumerate().flat_map(|(i, s)| self.conditioned(i, s)).collect();
        let actions = self.agent.act_rows(&rows, states.len(), self.explore)?;
        Ok(actions.into_iter().map(|a| Control::Action(Action::Continuous(a))).collect())
    }

    fn feedback(&mut self, interval: &Interval) -> Result<(), LabError> {
        let states = interval.states;
        self.ensure(states.len());
        let mut ended = false;
        for (i, ((state, control), step)) in states.iter().zip(interval.controls).zip(&interval.out.steps).enumerate() {
            let action = match control {
                Control::Action(a) => action_values(a),
                Control::Recommendation(_) | Control::Hold if self.probing && self.fallback.is_some() => {
                    self.probe_actions.get(i).cloned().unwrap_or_default()
                }
                _ => continue,
            };
            let raw = Experience {
                state: state.clone(),
                action: action.clone(),
                reward: step.reward as f32,
                next_state: step.observation.clone(),
                terminal: step.terminated,
            };
            // An on-policy learner learns only from the actions it sampled itself; nothing
            // learns from a transition whose utilisation was carried rather than measured (nor
            // do the meta-learner's batches draw on it). The bundles the embedding reads keep
            // it: a sequence, the last measured value standing in.
            let own = !self.probing && self.explore;
            let measured = interval.measured(i);
            if own && !measured {
                Agent::cut(&mut self.agent, i);
            }
            if self.learn && measured && (own || self.agent.learns_off_policy()) {
                let e = Experience {
                    state: self.conditioned(i, state),
                    next_state: self.conditioned(i, &step.observation),
                    ..raw.clone()
                };
                Agent::observe(&mut self.agent, i, &e, step.truncated)?;
            }
            let mem = &mut self.apps[i];
            if self.probing || self.embed_own_episodes {
                let mut features = state.clone();
                features.extend_from_slice(&action);
                features.push(step.reward as f32);
                mem.current.push(features);
                mem.current_reward += step.reward;
            }
            if measured {
                mem.recent.push_back(raw);
                if mem.recent.len() > self.config.recent {
                    mem.recent.pop_front();
                }
            }
            if step.truncated || step.terminated {
                self.finish_episode(i);
                ended = true;
            }
        }
        self.intervals += 1;
        if self.learn && self.meta.is_learning() && self.intervals.is_multiple_of(self.config.meta_every) {
            self.meta_step().map_err(lab)?;
        }
        if ended {
            self.refresh_embeddings().map_err(lab)?;
        }
        Ok(())
    }
}

/// Closes every app's episode in progress (an episode the arena did not truncate itself, at
/// the end of a rollout's step budget) and refreshes the embeddings.
pub fn end_episodes<A: BaseLearner>(driver: &mut MetaDriver<A>) -> Result<(), MetaError> {
    for app in 0..driver.apps.len() {
        driver.finish_episode(app);
    }
    driver.refresh_embeddings()
}
