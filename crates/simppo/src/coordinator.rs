//! SIMPPO's coordinator: who is in the team (agents join and leave on request; one that stops
//! sending heartbeats is dropped), each member's auxiliary global state g_i from the others'
//! latest reports, the team reward, and one base model per application category that a new
//! agent starts from (network parameter sharing).

use std::collections::BTreeMap;

use crate::SimppoError;
use crate::category::Category;
use crate::global::{AgentReport, GLOBAL_DIM, Totals};

/// An agent's id: its application's index in the cluster.
pub type AgentId = usize;

#[derive(Debug, Clone)]
struct Member {
    category: Category,
    /// Tick of the last heartbeat (or of joining).
    last_seen: u64,
    report: AgentReport,
}

/// Membership, global states and base models. `M` is the base model type (a PPO network in
/// [`crate::driver`]; anything clonable in tests).
#[derive(Debug, Clone)]
pub struct Coordinator<M> {
    members: BTreeMap<AgentId, Member>,
    tick: u64,
    /// Ticks without a heartbeat after which an agent is dropped.
    timeout: u64,
    base: BTreeMap<Category, M>,
}

impl<M: Clone> Coordinator<M> {
    /// A coordinator dropping agents silent for more than `timeout_ticks` ticks (at least 1).
    pub fn new(timeout_ticks: u64) -> Self {
        Self { members: BTreeMap::new(), tick: 0, timeout: timeout_ticks.max(1), base: BTreeMap::new() }
    }

    /// Admits `id`; returns a copy of its category's base model to start from, if there is one.
    pub fn join(&mut self, id: AgentId, category: Category) -> Result<Option<M>, SimppoError> {
        if self.members.contains_key(&id) {
            return Err(SimppoError::AlreadyMember(id));
        }
        self.members.insert(id, Member { category, last_seen: self.tick, report: AgentReport::default() });
        Ok(self.base.get(&category).cloned())
    }

    /// Removes `id` on request.
    pub fn leave(&mut self, id: AgentId) -> Result<(), SimppoError> {
        self.members.remove(&id).map(|_| ()).ok_or(SimppoError::UnknownAgent(id))
    }

    /// `id` is alive and reports this interval's outcome.
    pub fn heartbeat(&mut self, id: AgentId, report: AgentReport) -> Result<(), SimppoError> {
        let tick = self.tick;
        let m = self.members.get_mut(&id).ok_or(SimppoError::UnknownAgent(id))?;
        m.report = report;
        m.last_seen = tick;
        Ok(())
    }

    /// Moves the clock one interval on and drops every member whose last heartbeat is more
    /// than the timeout old; returns the dropped ids.
    pub fn advance(&mut self) -> Vec<AgentId> {
        self.tick += 1;
        let (tick, timeout) = (self.tick, self.timeout);
        let silent: Vec<AgentId> =
            self.members.iter().filter(|(_, m)| tick - m.last_seen > timeout).map(|(id, _)| *id).collect();
        for id in &silent {
            self.members.remove(id);
        }
        silent
    }

    /// The current members, in id order.
    pub fn members(&self) -> Vec<AgentId> {
        self.members.keys().copied().collect()
    }

    pub fn is_member(&self, id: AgentId) -> bool {
        self.members.contains_key(&id)
    }

    pub fn len(&self) -> usize {
        self.members.len()
    }

    pub fn is_empty(&self) -> bool {
        self.members.is_empty()
    }

    /// The category `id` joined with.
    pub fn category(&self, id: AgentId) -> Option<Category> {
        self.members.get(&id).map(|m| m.category)
    }

    /// g_i for member `id`: the mean-field summary of every *other* member's latest report.
    pub fn global_state(&self, id: AgentId) -> Result<[f32; GLOBAL_DIM], SimppoError> {
        let own = self.members.get(&id).ok_or(SimppoError::UnknownAgent(id))?;
        Ok(Totals::of(self.members.values().map(|m| &m.report)).excluding(&own.report))
    }

    /// g_i for every member, in id order, in O(members).
    pub fn global_states(&self) -> Vec<(AgentId, [f32; GLOBAL_DIM])> {
        let totals = Totals::of(self.members.values().map(|m| &m.report));
        self.members.iter().map(|(id, m)| (*id, totals.excluding(&m.report))).collect()
    }

    /// Makes `model` the base model new agents of `category` start from.
    pub fn set_base(&mut self, category: Category, model: M) {
        self.base.insert(category, model);
    }

    /// The base model of `category`, if one was set.
    pub fn base(&self, category: Category) -> Option<&M> {
        self.base.get(&category)
    }
}

/// The team-averaged reward r_t = Σ_i r_t^i / N (0 for an empty team).
pub fn team_reward(rewards: &[f64]) -> f64 {
    if rewards.is_empty() { 0.0 } else { rewards.iter().sum::<f64>() / rewards.len() as f64 }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn report(cpu: f64, sp: f64) -> AgentReport {
        AgentReport { cpu_limits: cpu, slo_preservation: sp, ..Default::default() }
    }

    #[test]
    fn a_silent_agent_is_dropped_and_the_rest_stay() {
        let mut c: Coordinator<()> = Coordinator::new(2);
        for id in 0..3 {
            c.join(id, Category::Cpu).unwrap();
        }
        assert!(matches!(c.join(1, Category::Io), Err(SimppoError::AlreadyMember(1))));
        for _ in 0..5 {
            // Agent 1 stops reporting after joining.
            c.heartbeat(0, report(0.1, 1.0)).unwrap();
            c.heartbeat(2, report(0.2, 1.0)).unwrap();
            let dropped = c.advance();
            if c.is_member(1) {
                assert!(dropped.is_empty());
            } else {
                assert!(dropped.is_empty() || dropped == vec![1]);
            }
        }
        assert_eq!(c.members(), vec![0, 2]);
        assert!(matches!(c.heartbeat(1, report(0.0, 0.0)), Err(SimppoError::UnknownAgent(1))));
        // Exactly after the timeout: silent for 3 ticks > 2.
        let mut c: Coordinator<()> = Coordinator::new(2);
        c.join(7, Category::Io).unwrap();
        assert!(c.advance().is_empty() && c.advance().is_empty());
        assert_eq!(c.advance(), vec![7]);
    }

    #[test]
    fn global_states_exclude_the_agent_and_follow_membership() {
        let mut c: Coordinator<()> = Coordinator::new(1);
        for (id, cpu) in [(0, 0.5), (1, 0.2), (2, 0.1)] {
            c.join(id, Category::Cpu).unwrap();
            c.heartbeat(id, report(cpu, 1.0)).unwrap();
        }
        assert!((c.global_state(0).unwrap()[0] - 0.3).abs() < 1e-6);
        assert!((c.global_state(2).unwrap()[0] - 0.7).abs() < 1e-6);
        let all = c.global_states();
        for (id, g) in &all {
            assert_eq!(*g, c.global_state(*id).unwrap());
        }
        c.leave(1).unwrap();
        assert!((c.global_state(0).unwrap()[0] - 0.1).abs() < 1e-6, "the leaver no longer counts");
        assert!(matches!(c.leave(1), Err(SimppoError::UnknownAgent(1))));
    }

    #[test]
    fn a_new_agent_gets_its_categorys_base_model() {
        let mut c: Coordinator<Vec<f32>> = Coordinator::new(1);
        assert_eq!(c.join(0, Category::Cpu).unwrap(), None, "no base model yet");
        c.set_base(Category::Cpu, vec![1.0, 2.0]);
        c.set_base(Category::Io, vec![3.0]);
        assert_eq!(c.join(1, Category::Cpu).unwrap(), Some(vec![1.0, 2.0]));
        assert_eq!(c.join(2, Category::Io).unwrap(), Some(vec![3.0]));
        assert_eq!(c.join(3, Category::Memory).unwrap(), None);
    }

    #[test]
    fn the_team_reward_is_the_mean() {
        assert_eq!(team_reward(&[1.0, 2.0, 6.0]), 3.0);
        assert_eq!(team_reward(&[]), 0.0);
    }
}
