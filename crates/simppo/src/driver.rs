//! The team of agents as an `aware_lab` rollout driver: one PPO agent per present application
//! of a [`crate::tenant::Tenancy`], in three variants —
//!
//! - [`Variant::SRl`]: independent PPO (S-RL): policy and critic on the local state, each agent
//!   learns from its own reward.
//! - [`Variant::Simppo`]: the critic reads local state ⊕ g_i (the coordinator's mean-field
//!   summary of the other agents) and every agent learns from the team-averaged reward.
//! - [`Variant::SimppoAll`]: the ablation whose g_i is the mean of every agent's local state.
//!
//! The policy always reads the local state only, so serving needs nothing from the
//! coordinator. Greedy serving runs every agent of a category in one batched forward pass.

use std::time::Instant;

use aware_agents::ppo::{PolicyValue, Ppo, PpoActions, PpoConfig};
use aware_agents::{AgentError, Experience};
use aware_core::{Action, Recommendation, StepInfo};
use aware_env::{Control, DISCRETE_ACTIONS, STATE_DIM};
use aware_lab::LabError;
use aware_lab::rollout::{Arena, Driver, Interval};
use serde::Serialize;

use crate::SimppoError;
use crate::batched::BatchedPolicy;
use crate::category::Category;
use crate::coordinator::{AgentId, Coordinator, team_reward};
use crate::global::{AgentReport, Capacity, GLOBAL_DIM, mean_state};

/// Which learner each agent is.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Variant {
    /// Independent PPO on local state and own reward.
    SRl,
    /// Critic on local state ⊕ mean-field g_i, team reward.
    Simppo,
    /// Critic on local state ⊕ the mean of all local states, team reward.
    SimppoAll,
}

impl Variant {
    /// Inputs only the critic reads.
    pub fn critic_extra(self) -> usize {
        match self {
            Variant::SRl => 0,
            Variant::Simppo => GLOBAL_DIM,
            Variant::SimppoAll => STATE_DIM,
        }
    }

    /// Whether agents learn from the team-averaged reward.
    pub fn team_reward(self) -> bool {
        self != Variant::SRl
    }
}

/// How a team is built.
#[derive(Debug, Clone)]
pub struct TeamConfig {
    pub variant: Variant,
    /// Each agent's PPO (SIMPPO Table 4.2 by default); `critic_extra` is set from the variant.
    pub ppo: PpoConfig,
    /// New agents start from their category's base model (else from fresh weights).
    pub parameter_sharing: bool,
    /// Seeds every agent (agent `a` with `seed`·1000 + `a`).
    pub seed: u64,
    /// Intervals without a heartbeat after which the coordinator drops an agent.
    pub heartbeat_timeout: u64,
    /// The shared cluster's resources (the scale of the aggregated limits in g_i).
    pub capacity: Capacity,
}

/// Time spent computing policies, for the scale measurements.
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize)]
pub struct PolicyClock {
    pub nanos: u128,
    pub agent_steps: u64,
}

impl PolicyClock {
    /// Microseconds of policy compute per agent per step.
    pub fn us_per_agent_step(&self) -> f64 {
        self.nanos as f64 / 1000.0 / self.agent_steps.max(1) as f64
    }
}

/// The agents, their coordinator and what the current episode has seen.
pub struct Team {
    config: TeamConfig,
    agents: Vec<Option<Ppo>>,
    categories: Vec<Category>,
    coordinator: Coordinator<PolicyValue>,
    /// Explore (sample) and learn, or act greedily and learn nothing.
    explore: bool,
    learn: bool,
    /// Allocation changes that membership changes carry out at the next decision.
    changes: Vec<Option<Recommendation>>,
    /// Per application, the full observation (local ⊕ critic inputs) and the action decided.
    decided: Vec<Option<(Vec<f32>, Vec<f32>)>>,
    /// Critic inputs of the current states, computed with the last feedback.
    aux: Option<Vec<Vec<f32>>>,
    /// Stacked greedy policies per category, built on first greedy use.
    batched: Option<Vec<(Vec<AgentId>, BatchedPolicy)>>,
    /// Σ of the team reward over the episode's intervals, and the intervals.
    episode_team: (f64, u64),
    /// Σ of each agent's own reward over the episode.
    own_return: Vec<f64>,
    clock: PolicyClock,
}

fn lab(e: SimppoError) -> LabError {
    e.into()
}

fn agent_lab(e: AgentError) -> LabError {
    LabError::Agent(e)
}

impl Team {
    /// A team over a roster of `categories.len()` applications, none present yet.
    pub fn new(mut config: TeamConfig, categories: Vec<Category>) -> Self {
        config.ppo.critic_extra = config.variant.critic_extra();
        let n = categories.len();
        Self {
            coordinator: Coordinator::new(config.heartbeat_timeout),
            config,
            agents: (0..n).map(|_| None).collect(),
            categories,
            explore: true,
            learn: true,
            changes: vec![None; n],
            decided: vec![None; n],
            aux: None,
            batched: None,
            episode_team: (0.0, 0),
            own_return: vec![0.0; n],
            clock: PolicyClock::default(),
        }
    }

    fn fresh_agent(&self, app: AgentId) -> Ppo {
        Ppo::new(
            STATE_DIM + self.config.variant.critic_extra(),
            PpoActions::Discrete(DISCRETE_ACTIONS),
            self.config.ppo.clone(),
            self.config.seed.wrapping_mul(1000).wrapping_add(app as u64),
        )
    }

    /// Adds an agent for application `app`: it joins the coordinator and, with parameter
    /// sharing, starts from its category's base model. `arrival`: the allocation to apply at the
    /// next decision (an application added during an episode); `None` when it is already
    /// running (added between episodes, present from the reset).
    pub fn add(&mut self, app: AgentId, arrival: Option<Recommendation>) -> Result<(), SimppoError> {
        let category = *self.categories.get(app).ok_or(SimppoError::UnknownAgent(app))?;
        if self.agents[app].is_some() {
            return Err(SimppoError::AlreadyMember(app));
        }
        if self.coordinator.is_member(app) {
            // Removed during this episode and not yet dropped: it comes back as a new agent.
            self.coordinator.leave(app)?;
        }
        let base = self.coordinator.join(app, category)?;
        let mut agent = self.fresh_agent(app);
        if self.config.parameter_sharing
            && let Some(weights) = base
        {
            agent.set_weights(weights)?;
        }
        self.agents[app] = Some(agent);
        self.changes[app] = arrival;
        self.own_return[app] = 0.0;
        self.batched = None;
        Ok(())
    }

    /// Removes application `app`'s agent: it stops reporting (the coordinator drops it after
    /// the heartbeat timeout). `departure`: the allocation to apply at the next decision (zero
    /// replicas during an episode); `None` between episodes.
    pub fn remove(&mut self, app: AgentId, departure: Option<Recommendation>) -> Result<(), SimppoError> {
        if self.agents.get(app).and_then(Option::as_ref).is_none() {
            return Err(SimppoError::UnknownAgent(app));
        }
        let between_episodes = departure.is_none();
        self.agents[app] = None;
        self.changes[app] = departure;
        self.decided[app] = None;
        self.batched = None;
        if between_episodes {
            // Between episodes nobody waits for the timeout.
            let _ = self.coordinator.leave(app);
        }
        Ok(())
    }

    /// Applications with an agent, in order.
    pub fn present(&self) -> Vec<AgentId> {
        (0..self.agents.len()).filter(|&a| self.agents[a].is_some()).collect()
    }

    /// Presence flags over the roster.
    pub fn presence(&self) -> Vec<bool> {
        self.agents.iter().map(Option::is_some).collect()
    }

    pub fn agent(&self, app: AgentId) -> Option<&Ppo> {
        self.agents.get(app).and_then(Option::as_ref)
    }

    pub fn coordinator(&self) -> &Coordinator<PolicyValue> {
        &self.coordinator
    }

    pub fn variant(&self) -> Variant {
        self.config.variant
    }

    /// Explore and learn (training) or act greedily through the batched policies (serving).
    pub fn set_training(&mut self, training: bool) {
        self.set_mode(training, training);
    }

    /// Sample actions (`explore`) or act greedily; learn from the outcomes or not.
    pub fn set_mode(&mut self, explore: bool, learn: bool) {
        self.explore = explore;
        self.learn = learn;
        self.batched = None;
    }

    /// Policy compute time since the last [`Team::reset_clock`].
    pub fn policy_clock(&self) -> PolicyClock {
        self.clock
    }

    /// Takes application `app`'s agent out of the team (to serve it elsewhere).
    pub fn take_agent(&mut self, app: AgentId) -> Option<Ppo> {
        self.batched = None;
        self.agents.get_mut(app).and_then(Option::take)
    }

    /// Puts a trained agent in charge of application `app` (present from the next reset); it
    /// joins the coordinator.
    pub fn insert_agent(&mut self, app: AgentId, agent: Ppo) -> Result<(), SimppoError> {
        let category = *self.categories.get(app).ok_or(SimppoError::UnknownAgent(app))?;
        if agent.state_dim() != STATE_DIM + self.config.variant.critic_extra() {
            return Err(SimppoError::input(
                "agent",
                format!(
                    "observes {} values, the team {}",
                    agent.state_dim(),
                    STATE_DIM + self.config.variant.critic_extra()
                ),
            ));
        }
        if !self.coordinator.is_member(app) {
            self.coordinator.join(app, category)?;
        }
        self.agents[app] = Some(agent);
        self.batched = None;
        Ok(())
    }

    /// Starts a new policy-time measurement.
    pub fn reset_clock(&mut self) {
        self.clock = PolicyClock::default();
    }

    /// Ends an episode: forgets its per-interval state, and when learning makes each category's
    /// best agent of the episode (highest own return) that category's base model. Returns the
    /// episode's mean team reward per interval.
    pub fn end_episode(&mut self) -> f64 {
        if self.learn {
            for category in Category::ALL {
                let best = self
                    .present()
                    .into_iter()
                    .filter(|&a| self.categories[a] == category)
                    .max_by(|&a, &b| self.own_return[a].total_cmp(&self.own_return[b]));
                if let Some(a) = best
                    && let Some(agent) = &self.agents[a]
                {
                    self.coordinator.set_base(category, agent.weights());
                }
            }
        }
        let (sum, n) = std::mem::take(&mut self.episode_team);
        self.own_return.iter_mut().for_each(|r| *r = 0.0);
        self.decided.iter_mut().for_each(|d| *d = None);
        self.aux = None;
        sum / n.max(1) as f64
    }

    /// Heartbeats of every present agent for the interval that ended with `infos`.
    fn report(&mut self, infos: &[&StepInfo], before: &[Option<&StepInfo>]) -> Result<(), SimppoError> {
        let cap = self.config.capacity;
        for app in self.present() {
            if self.changes[app].is_some() {
                continue;
            }
            let r = AgentReport::from_infos(before[app], infos[app], cap);
            if !self.coordinator.is_member(app) {
                // Dropped while silent (an arrival waits one interval): it rejoins.
                self.coordinator.join(app, self.categories[app])?;
            }
            self.coordinator.heartbeat(app, r)?;
        }
        Ok(())
    }

    /// The critic-only inputs of every application's current state.
    fn critic_inputs(&self, states: &[Vec<f32>]) -> Vec<Vec<f32>> {
        let n = states.len();
        match self.config.variant {
            Variant::SRl => vec![Vec::new(); n],
            Variant::Simppo => {
                let mut out = vec![vec![0.0; GLOBAL_DIM]; n];
                for (id, g) in self.coordinator.global_states() {
                    if id < n {
                        out[id] = g.to_vec();
                    }
                }
                out
            }
            Variant::SimppoAll => {
                let present: Vec<&[f32]> =
                    self.present().into_iter().filter(|&a| a < n).map(|a| states[a].as_slice()).collect();
                let mean = if present.is_empty() { vec![0.0; STATE_DIM] } else { mean_state(&present) };
                vec![mean; n]
            }
        }
    }

    fn build_batched(&mut self) -> Result<(), SimppoError> {
        let mut groups = Vec::new();
        for category in Category::ALL {
            let ids: Vec<AgentId> = self.present().into_iter().filter(|&a| self.categories[a] == category).collect();
            if ids.is_empty() {
                continue;
            }
            let layers: Vec<_> = ids.iter().filter_map(|&a| self.agents[a].as_ref().map(Ppo::policy_layers)).collect();
            let activation = self.config.ppo.activation;
            groups.push((ids, BatchedPolicy::stack(&layers, activation)?));
        }
        self.batched = Some(groups);
        Ok(())
    }

    /// Actions of the acting applications: sampled per agent when exploring, else one batched
    /// greedy pass per category.
    fn policy(&mut self, acting: &[AgentId], full: &[Vec<f32>]) -> Result<Vec<Vec<f32>>, SimppoError> {
        let start = Instant::now();
        let mut actions = vec![Vec::new(); full.len()];
        if self.explore {
            for &a in acting {
                let agent = self.agents[a].as_mut().ok_or(SimppoError::UnknownAgent(a))?;
                actions[a] = agent.act(std::slice::from_ref(&full[a]), true)?.remove(0);
            }
        } else {
            if self.batched.is_none() {
                self.build_batched()?;
            }
            let acting_set: std::collections::BTreeSet<AgentId> = acting.iter().copied().collect();
            for (ids, policy) in self.batched.as_ref().into_iter().flatten() {
                let mut stacked = Vec::with_capacity(ids.len() * STATE_DIM);
                for &a in ids {
                    stacked.extend_from_slice(&full[a][..STATE_DIM]);
                }
                for (&a, choice) in ids.iter().zip(policy.greedy(&stacked)?) {
                    if acting_set.contains(&a) {
                        actions[a] = vec![choice as f32];
                    }
                }
            }
        }
        self.clock.nanos += start.elapsed().as_nanos();
        self.clock.agent_steps += acting.len() as u64;
        Ok(actions)
    }
}

impl Driver for Team {
    fn decide(
        &mut self,
        _arena: &dyn Arena,
        states: &[Vec<f32>],
        infos: &[StepInfo],
    ) -> Result<Vec<Control>, LabError> {
        let n = states.len();
        if n != self.agents.len() || infos.len() != n {
            return Err(LabError::input("team", format!("{n} states for a roster of {}", self.agents.len())));
        }
        let aux = match self.aux.take() {
            Some(aux) => aux,
            None => {
                // An episode's first decision: report the reset's interval.
                let refs: Vec<&StepInfo> = infos.iter().collect();
                let none = vec![None; n];
                self.report(&refs, &none).map_err(lab)?;
                self.critic_inputs(states)
            }
        };
        let mut controls = vec![Control::Hold; n];
        let mut full = vec![Vec::new(); n];
        let mut acting = Vec::new();
        for app in 0..n {
            if let Some(change) = self.changes[app].take() {
                controls[app] = Control::Recommendation(change);
                self.decided[app] = None;
                continue;
            }
            if self.agents[app].is_none() {
                continue;
            }
            let mut f = states[app].clone();
            f.extend_from_slice(&aux[app]);
            full[app] = f;
            acting.push(app);
        }
        let actions = self.policy(&acting, &full).map_err(lab)?;
        for &app in &acting {
            controls[app] = Control::Action(Action::Discrete(actions[app][0] as usize));
            self.decided[app] = Some((std::mem::take(&mut full[app]), actions[app].clone()));
        }
        Ok(controls)
    }

    fn feedback(&mut self, interval: &Interval) -> Result<(), LabError> {
        let out = interval.out;
        let n = self.agents.len();
        if out.steps.len() != n {
            return Err(LabError::input("team", format!("{} outcomes for a roster of {n}", out.steps.len())));
        }
        let acting: Vec<AgentId> = (0..n).filter(|&a| self.decided[a].is_some() && self.agents[a].is_some()).collect();
        let rewards: Vec<f64> = acting.iter().map(|&a| out.steps[a].reward).collect();
        let team = team_reward(&rewards);
        if !acting.is_empty() {
            self.episode_team.0 += team;
            self.episode_team.1 += 1;
        }
        for &a in &acting {
            self.own_return[a] += out.steps[a].reward;
        }
        let infos: Vec<&StepInfo> = out.steps.iter().map(|s| &s.info).collect();
        // The infos the decision was made on.
        let before: Vec<Option<&StepInfo>> = interval.infos.iter().map(Some).collect();
        self.report(&infos, &before).map_err(lab)?;
        self.coordinator.advance();
        let next_states: Vec<Vec<f32>> = out.steps.iter().map(|s| s.observation.clone()).collect();
        let aux = self.critic_inputs(&next_states);
        if self.learn {
            for &a in &acting {
                let Some((state, action)) = self.decided[a].take() else { continue };
                if !interval.measured(a) {
                    if let Some(agent) = self.agents[a].as_mut() {
                        agent.cut(0);
                    }
                    continue;
                }
                let step = &out.steps[a];
                let mut next = step.observation.clone();
                next.extend_from_slice(&aux[a]);
                let reward = if self.config.variant.team_reward() { team } else { step.reward };
                let e =
                    Experience { state, action, reward: reward as f32, next_state: next, terminal: step.terminated };
                if let Some(agent) = self.agents[a].as_mut() {
                    agent.observe(0, &e, step.truncated).map_err(agent_lab)?;
                }
            }
        }
        self.aux = Some(aux);
        Ok(())
    }
}
