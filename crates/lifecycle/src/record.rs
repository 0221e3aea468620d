//! The lifecycle manager's record in a trajectory store: every app's episode (its transitions
//! in the agent's coordinates, the stage it ran in and who acted), every stage change with its
//! reason, and the decision log `aware explain` reads.

use std::time::{SystemTime, UNIX_EPOCH};

use aware_env::STATE_DIM;
use aware_store::{DecisionRecord, EpisodeMeta, StageRecord, TrajectoryStore, Transition};

use crate::LifecycleError;
use crate::manager::Manager;
use crate::run::EpisodeSink;

/// The agent name the manager's records carry.
pub const AGENT: &str = "aware";

/// Writes the manager's log into a store after every episode.
pub struct StoreSink<'s> {
    pub store: &'s mut dyn TrajectoryStore,
    /// Stage changes already written.
    written_changes: usize,
}

impl<'s> StoreSink<'s> {
    pub fn new(store: &'s mut dyn TrajectoryStore) -> Self {
        Self { store, written_changes: 0 }
    }
}

fn now_s() -> f64 {
    SystemTime::now().duration_since(UNIX_EPOCH).map_or(0.0, |d| d.as_secs_f64())
}

impl EpisodeSink for StoreSink<'_> {
    fn episode(&mut self, episode: u64, manager: &mut Manager) -> Result<(), LifecycleError> {
        let log = manager.take_log();
        let names = manager.app_names();
        let fallback = manager.fallback_name();
        for (i, transitions) in log.transitions.iter().enumerate() {
            let acted = log.agent_acted.get(i).copied().unwrap_or(false);
            // One store agent per app (the store numbers episodes per agent): `aware@APP`.
            let meta = EpisodeMeta {
                agent: format!("{AGENT}@{}", names[i]),
                app: names[i].clone(),
                episode,
                stage: log.episode_stage.get(i).map_or("initialized", |s| s.name()).into(),
                policy: if acted { AGENT.to_string() } else { fallback.clone() },
                state_dim: STATE_DIM as u32,
                action_dim: 3,
                started_at_s: now_s(),
            };
            let id = self.store.begin_episode(&meta)?;
            let rows: Vec<Transition> = transitions
                .iter()
                .enumerate()
                .map(|(step, e)| Transition {
                    step: step as u32,
                    state: e.state.clone(),
                    action: e.action.clone(),
                    reward: e.reward,
                    next_state: e.next_state.clone(),
                    done: e.terminal,
                })
                .collect();
            self.store.append(id, &rows)?;
            let total: f64 = transitions.iter().map(|e| e.reward as f64).sum();
            self.store.close_episode(id, total)?;
        }
        let records = log
            .decisions
            .iter()
            .map(|d| {
                Ok(DecisionRecord {
                    agent: AGENT.into(),
                    app: d.app.clone(),
                    step: d.step,
                    stage: d.stage.name().into(),
                    acting_policy: d.acting_policy.clone(),
                    guard: d.guard.clone(),
                    detail: serde_json::to_value(d)
                        .map_err(|e| LifecycleError::input("decision log", e.to_string()))?,
                })
            })
            .collect::<Result<Vec<_>, LifecycleError>>()?;
        self.store.record_decisions(&records)?;
        for c in &manager.changes()[self.written_changes..] {
            self.store.record_stage_change(&StageRecord {
                agent: AGENT.into(),
                app: c.app.clone(),
                step: c.step,
                from: c.from.name().into(),
                to: c.to.name().into(),
                reason: c.reason.clone(),
            })?;
        }
        self.written_changes = manager.changes().len();
        Ok(())
    }
}
