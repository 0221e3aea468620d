//! The lifecycle manager's record in a trajectory store: every app's episode (its transitions
//! in the agent's coordinates, the stage it ran in and who acted), every stage change with its
//! reason, and the decision log `aware explain` reads.

use std::time::{SystemTime, UNIX_EPOCH};

use aware_env::STATE_DIM;
use aware_lab::embed::WorkloadEmbedder;
use aware_store::{DecisionRecord, EpisodeMeta, StageRecord, TrajectoryStore, Transition};

use crate::LifecycleError;
use crate::manager::Manager;
use crate::run::EpisodeSink;

/// The agent name the manager's records carry.
pub const AGENT: &str = "aware";
/// The name a residual agent's records carry ([`crate::manager::ManagerConfig::residual`]): its
/// stored actions are changes of the fallback's proposals, and the fallback's own intervals are
/// stored as the action 0, so its episodes live apart from [`AGENT`]'s (`aware-residual@APP`),
/// where nothing that reads actions as changes of the current allocation (the meta-learner's
/// selection of the fallback's episodes) picks them up.
pub const RESIDUAL_AGENT: &str = "aware-residual";

/// The agent name of a manager's records: [`RESIDUAL_AGENT`] for a residual agent, else [`AGENT`].
pub fn agent_name(manager: &Manager) -> &'static str {
    if manager.config().residual { RESIDUAL_AGENT } else { AGENT }
}

/// Writes the manager's log into a store after every episode, and, with a meta-learner, asks
/// it about every app's workload from what the store now holds.
pub struct StoreSink<'s> {
    pub store: &'s mut dyn TrajectoryStore,
    /// Stage changes already written.
    written_changes: usize,
    embedder: Option<&'s mut dyn WorkloadEmbedder>,
    /// Per app, the number its first episode of this run gets: one past the last the store
    /// holds for it, so a run into a store an earlier run wrote continues its numbering. `None`
    /// until the store has answered (asked again at every episode while it is away).
    first_episode: Vec<Option<u64>>,
}

impl<'s> StoreSink<'s> {
    pub fn new(store: &'s mut dyn TrajectoryStore) -> Self {
        Self { store, written_changes: 0, embedder: None, first_episode: Vec::new() }
    }

    /// After each episode is written, `embedder` judges every app's workload from the store
    /// ([`Manager::judge_workload`]): an app it cannot embed, or whose workload is unlike its
    /// training pool's, is served by the fallback, and the decision log says why.
    pub fn with_embedder(mut self, embedder: &'s mut dyn WorkloadEmbedder) -> Self {
        self.embedder = Some(embedder);
        self
    }

    /// Asks the store, for every app it has not answered for yet, one past the highest episode
    /// number it holds for the app's agent. While the store is away (its writes spooled) the
    /// app's episodes are numbered from 0 and it is asked again next episode; episodes whose
    /// numbers then collide with stored ones are set aside (`rejected.jsonl`) when the spool is
    /// flushed, not lost.
    fn number_from_store(&mut self, agent: &str, names: &[String]) {
        self.first_episode.resize(names.len(), None);
        for (slot, name) in self.first_episode.iter_mut().zip(names) {
            if slot.is_none() {
                *slot = self
                    .store
                    .episodes(Some(&format!("{agent}@{name}")))
                    .ok()
                    .map(|e| e.iter().map(|r| r.meta.episode + 1).max().unwrap_or(0));
            }
        }
    }

    /// Asks the embedder about every app (the run's start: apps arriving with history in the
    /// store are judged before their first interval).
    fn judge(&mut self, manager: &mut Manager) {
        if let Some(embedder) = self.embedder.as_deref_mut() {
            for (i, name) in manager.app_names().iter().enumerate() {
                manager.judge_workload(i, embedder.embed(&*self.store, name));
            }
        }
    }
}

fn now_s() -> f64 {
    SystemTime::now().duration_since(UNIX_EPOCH).map_or(0.0, |d| d.as_secs_f64())
}

impl EpisodeSink for StoreSink<'_> {
    fn start(&mut self, manager: &mut Manager) -> Result<(), LifecycleError> {
        self.number_from_store(agent_name(manager), &manager.app_names());
        self.judge(manager);
        Ok(())
    }

    fn episode(&mut self, episode: u64, manager: &mut Manager) -> Result<(), LifecycleError> {
        let log = manager.take_log();
        let names = manager.app_names();
        let agent = agent_name(manager);
        self.number_from_store(agent, &names);
        let first: Vec<u64> = self.first_episode.iter().map(|f| f.unwrap_or(0)).collect();
        let fallback = manager.fallback_name();
        for (i, transitions) in log.transitions.iter().enumerate() {
            let acted = log.agent_acted.get(i).copied().unwrap_or(false);
            // One store agent per app (the store numbers episodes per agent): `aware@APP`
            // (`aware-residual@APP`).
            let meta = EpisodeMeta {
                agent: format!("{agent}@{}", names[i]),
                app: names[i].clone(),
                episode: first.get(i).copied().unwrap_or(0) + episode,
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
                    agent: agent.into(),
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
                agent: agent.into(),
                app: c.app.clone(),
                step: c.step,
                from: c.from.name().into(),
                to: c.to.name().into(),
                reason: c.reason.clone(),
            })?;
        }
        self.written_changes = manager.changes().len();
        self.judge(manager);
        Ok(())
    }
}
