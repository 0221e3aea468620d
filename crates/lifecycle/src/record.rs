//! The lifecycle manager's record in a trajectory store: every app's episode (its transitions
//! in the agent's coordinates, the stage it ran in and who acted), every stage change with its
//! reason, and the decision log `aware explain` reads. A run into a store that earlier runs
//! wrote goes on numbering each app's episodes after the last it holds, and its steps after the last
//! decision it holds (a run's step s is stored as that first step + s), so a step names one
//! decision in the store.

use std::time::{SystemTime, UNIX_EPOCH};

use aware_env::STATE_DIM;
use aware_lab::embed::WorkloadEmbedder;
use aware_store::{DecisionQuery, DecisionRecord, EpisodeMeta, StageRecord, StoreError, TrajectoryStore, Transition};

use crate::LifecycleError;
use crate::live::LiveRecords;
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
    /// holds for it, so a run into a store an earlier run wrote continues its numbering (while
    /// the store is away at the start, the numbering file's; else 0). Asked until the first
    /// episode is written, then kept.
    first_episode: Vec<Option<u64>>,
    /// Per app, the store step this run's step 0 is recorded as: one past the last decision
    /// the store holds for it, asked until the first decisions are written (then kept, so that
    /// the run's steps never jump).
    first_step: Vec<Option<u64>>,
    /// Records refused, unacknowledged, because the store was away and its spool full
    /// ([`StoreError::SpoolFull`]): episodes (one whose transitions or close was refused stays
    /// incomplete, which no training read sees), decisions and stage changes, each counted
    /// once. The apps stay served; these records are not kept.
    pub refused: u64,
    /// Why the first of them was refused.
    pub refused_reason: Option<String>,
    /// Where the next episode number and step of every app are kept after each episode
    /// ([`StoreSink::with_numbering`]), to go on from while the store is away at a restart.
    numbering: Option<std::path::PathBuf>,
}

/// Per store agent (`aware@APP`), the next episode number and the next store step: what
/// a run that starts while the store is away goes on from.
#[derive(Debug, Clone, Copy, Default, serde::Serialize, serde::Deserialize)]
struct Next {
    episode: u64,
    step: u64,
}

/// App `app`'s next episode number (of store agent `AGENT@APP`) and next decision step: one
/// past the last the store holds, else as `kept` (the numbering file) says, else unknown.
fn stored_next(
    store: &dyn TrajectoryStore,
    agent: &str,
    app: &str,
    kept: &std::collections::BTreeMap<String, Next>,
) -> (Option<u64>, Option<u64>) {
    let key = format!("{agent}@{app}");
    let episode = match store.episodes(Some(&key)) {
        Ok(e) => Some(e.iter().map(|r| r.meta.episode + 1).max().unwrap_or(0)),
        Err(_) => kept.get(&key).map(|n| n.episode),
    };
    let step = match store.decisions(app, DecisionQuery::Last(1)) {
        Ok(d) => Some(d.last().map_or(0, |r| r.step + 1)),
        Err(_) => kept.get(&key).map(|n| n.step),
    };
    (episode, step)
}

fn read_numbering(path: &std::path::Path) -> std::collections::BTreeMap<String, Next> {
    std::fs::read(path).ok().and_then(|text| serde_json::from_slice(&text).ok()).unwrap_or_default()
}

/// Replaced atomically; a failure only costs the hint.
fn write_numbering(path: &std::path::Path, numbering: &std::collections::BTreeMap<String, Next>) {
    let Ok(text) = serde_json::to_vec_pretty(numbering) else { return };
    let tmp = path.with_extension("json.tmp");
    if std::fs::write(&tmp, text).is_ok() {
        let _ = std::fs::rename(&tmp, path);
    }
}

impl<'s> StoreSink<'s> {
    pub fn new(store: &'s mut dyn TrajectoryStore) -> Self {
        Self {
            store,
            written_changes: 0,
            embedder: None,
            first_episode: Vec::new(),
            first_step: Vec::new(),
            refused: 0,
            refused_reason: None,
            numbering: None,
        }
    }

    /// Keeps every app's next episode number and store step in `path` (beside the spool) after
    /// each episode, and numbers from there an app the store cannot answer for at the start: a
    /// run restarted while the store is away goes on after the last run's records instead of
    /// numbering from 0, whose episodes the store would refuse as duplicates when the spool is
    /// flushed (set aside in `rejected.jsonl`) and whose steps would repeat.
    pub fn with_numbering(mut self, path: std::path::PathBuf) -> Self {
        self.numbering = Some(path);
        self
    }

    /// A write's outcome: `Ok(Some(v))` written (or spooled), `Ok(None)` refused because the
    /// spool is full (counted: the run goes on serving its apps), any other error as it is.
    fn admit<T>(&mut self, written: Result<T, StoreError>, records: u64) -> Result<Option<T>, LifecycleError> {
        admit(written, records, &mut self.refused, &mut self.refused_reason)
    }

    /// After each episode is written, `embedder` judges every app's workload from the store
    /// ([`Manager::judge_workload`]): an app it cannot embed, or whose workload is unlike its
    /// training pool's, is served by the fallback, and the decision log says why.
    pub fn with_embedder(mut self, embedder: &'s mut dyn WorkloadEmbedder) -> Self {
        self.embedder = Some(embedder);
        self
    }

    /// Asks the store, for every app it has not answered for yet, one past the highest episode
    /// number it holds for the app's agent, and one past its last decision's step. While the
    /// store is away (its writes spooled) the numbering file kept beside the spool answers
    /// ([`StoreSink::with_numbering`]), else the app is numbered from 0; episodes whose numbers
    /// then collide with stored ones (another writer's) are set aside (`rejected.jsonl`) when
    /// the spool is flushed, not lost.
    fn number_from_store(&mut self, agent: &str, names: &[String]) {
        self.first_episode.resize(names.len(), None);
        self.first_step.resize(names.len(), None);
        let kept = self.numbering.as_deref().map(read_numbering).unwrap_or_default();
        for ((episode, step), name) in self.first_episode.iter_mut().zip(self.first_step.iter_mut()).zip(names) {
            if episode.is_none() || step.is_none() {
                // What is still unknown is asked again next time.
                let (stored_episode, stored_step) = stored_next(&*self.store, agent, name, &kept);
                if episode.is_none() {
                    *episode = stored_episode;
                }
                if step.is_none() {
                    *step = stored_step;
                }
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

/// A write's outcome: `Ok(Some(v))` written (or spooled), `Ok(None)` refused because the spool
/// is full (`records` counted in `refused`, the first reason kept), any other error as it is.
fn admit<T>(
    written: Result<T, StoreError>,
    records: u64,
    refused: &mut u64,
    reason: &mut Option<String>,
) -> Result<Option<T>, LifecycleError> {
    match written {
        Ok(v) => Ok(Some(v)),
        Err(e @ StoreError::SpoolFull { .. }) => {
            *refused += records;
            reason.get_or_insert_with(|| e.to_string());
            Ok(None)
        }
        Err(e) => Err(e.into()),
    }
}

/// Decision `d` as the store keeps it, at the store's `step`.
fn decision_record(agent: &str, d: &crate::decision::Decision, step: u64) -> Result<DecisionRecord, LifecycleError> {
    Ok(DecisionRecord {
        agent: agent.into(),
        app: d.app.clone(),
        step,
        stage: d.stage.name().into(),
        acting_policy: d.acting_policy.clone(),
        guard: d.guard.clone(),
        detail: serde_json::to_value(crate::decision::Decision { step, ..d.clone() })
            .map_err(|e| LifecycleError::input("decision log", e.to_string()))?,
    })
}

/// Writes one episode (begun, its transitions, closed with their total reward). Refused at
/// its start, it is not kept; refused later, it stays incomplete in the store, which no
/// training read sees.
fn write_episode(
    store: &mut dyn TrajectoryStore,
    meta: &EpisodeMeta,
    transitions: &[aware_agents::Experience],
) -> Result<(), StoreError> {
    let id = store.begin_episode(meta)?;
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
    store.append(id, &rows)?;
    let total: f64 = transitions.iter().map(|e| e.reward as f64).sum();
    store.close_episode(id, total)
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
        // Kept from the first episode written on: a number learned later (the store back, with
        // this run's own spooled episodes in it by then) would make the run's numbers jump.
        let first: Vec<u64> = self.first_episode.iter_mut().map(|f| *f.get_or_insert(0)).collect();
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
            let written = write_episode(&mut *self.store, &meta, transitions);
            self.admit(written, 1)?;
        }
        // The store's steps go on from run to run as its episode numbers do (after the last
        // decision it holds for the app), so that `aware explain --step N` names one decision
        // even in a store several runs wrote.
        // An app whose store was away when its first decisions were written keeps numbering
        // from 0: its steps must not jump once the store answers.
        let first_step: Vec<u64> = self.first_step.iter_mut().map(|f| *f.get_or_insert(0)).collect();
        let offsets: std::collections::HashMap<&str, u64> =
            names.iter().map(String::as_str).zip(first_step.iter().copied()).collect();
        let offset = |app: &str| offsets.get(app).copied().unwrap_or(0);
        let records = log
            .decisions
            .iter()
            .map(|d| decision_record(agent, d, offset(&d.app) + d.step))
            .collect::<Result<Vec<_>, LifecycleError>>()?;
        let decisions = records.len() as u64;
        let recorded = self.store.record_decisions(&records);
        self.admit(recorded, decisions)?;
        for c in &manager.changes()[self.written_changes..] {
            let recorded = self.store.record_stage_change(&StageRecord {
                agent: agent.into(),
                app: c.app.clone(),
                step: offset(&c.app) + c.step,
                from: c.from.name().into(),
                to: c.to.name().into(),
                reason: c.reason.clone(),
            });
            self.admit(recorded, 1)?;
        }
        self.written_changes = manager.changes().len();
        if let Some(path) = &self.numbering {
            let mut kept = read_numbering(path);
            // One pass over the episode's decisions (thousands of apps, each interval's).
            let mut last_steps: std::collections::HashMap<&str, u64> = std::collections::HashMap::new();
            for d in &log.decisions {
                let last = last_steps.entry(d.app.as_str()).or_default();
                *last = (*last).max(d.step + 1);
            }
            for (i, name) in names.iter().enumerate() {
                let last_step = last_steps.get(name.as_str()).copied();
                let key = format!("{agent}@{name}");
                let step = match last_step {
                    Some(s) => first_step.get(i).copied().unwrap_or(0) + s,
                    // No decision logged this episode: the last count stands.
                    None => kept.get(&key).map_or(0, |n| n.step),
                };
                let next = Next { episode: first.get(i).copied().unwrap_or(0) + episode + 1, step };
                kept.insert(key, next);
            }
            write_numbering(path, &kept);
        }
        self.judge(manager);
        Ok(())
    }
}

/// How often a [`LiveRecorder`] rewrites its numbering file at most: it holds every app (a
/// controller decides for each MPA in turn, many passes a second), and it matters only for a
/// restart while the store is away, whose steps then may repeat those of the last second.
pub const NUMBERING_EVERY: std::time::Duration = std::time::Duration::from_secs(1);

/// Writes a live manager's records ([`crate::live::LiveManager::take_records`]) into a store as
/// they come: each window an app's agent or fallback ended as an episode of the app
/// (`aware@APP`, `aware-residual@APP` for a residual agent), every decision, and every stage
/// change, so that `aware explain --store URL --app APP` answers for an app `aware controller`
/// manages as for one `aware run` managed. Each app's episodes and steps go on after the last
/// the store holds for it (while the store is away, after the numbering file's, else from 0),
/// so a restarted controller appends to what the one before wrote. A live manager's steps are
/// its passes over all apps; the store's are each app's own decisions, one after another.
pub struct LiveRecorder {
    agent: &'static str,
    fallback: String,
    /// Per app, the next episode number and store step, once known.
    next: std::collections::HashMap<String, Next>,
    numbering: Option<std::path::PathBuf>,
    /// When the numbering file was last written ([`NUMBERING_EVERY`]).
    numbered_at: Option<std::time::Instant>,
    /// Apps numbered from 0 because neither the store nor the numbering file could say where
    /// their records go on from, since the caller last took them: their records may collide
    /// with what the store holds once it answers.
    pub guessed: Vec<String>,
    /// Records refused, unacknowledged: by the store, or because it was away and its spool full.
    pub refused: u64,
    pub refused_reason: Option<String>,
}

impl LiveRecorder {
    /// For a live manager whose agent is residual or not, whose fallback is named `fallback`.
    pub fn new(residual: bool, fallback: impl Into<String>) -> Self {
        Self {
            agent: if residual { RESIDUAL_AGENT } else { AGENT },
            fallback: fallback.into(),
            next: Default::default(),
            numbering: None,
            numbered_at: None,
            guessed: Vec::new(),
            refused: 0,
            refused_reason: None,
        }
    }

    /// For `manager`.
    pub fn of(manager: &crate::live::LiveManager) -> Self {
        Self::new(manager.residual(), manager.fallback_name())
    }

    /// Keeps every app's next episode number and store step in `path` (beside the spool) after
    /// each write, to go on from when the store is away at a restart
    /// ([`StoreSink::with_numbering`]).
    pub fn with_numbering(mut self, path: std::path::PathBuf) -> Self {
        self.numbering = Some(path);
        self
    }

    /// The store agent name the records carry.
    pub fn agent(&self) -> &str {
        self.agent
    }

    /// The fallback's name, as the records of the windows it served name it.
    pub fn fallback(&self) -> &str {
        &self.fallback
    }

    /// App `app`'s next episode and step: asked of the store (one past the last it holds),
    /// else the numbering file, else 0 — then kept, so that the numbers never jump.
    fn next(
        &mut self,
        store: &dyn TrajectoryStore,
        app: &str,
        kept: &std::collections::BTreeMap<String, Next>,
    ) -> Next {
        if let Some(n) = self.next.get(app) {
            return *n;
        }
        let (episode, step) = stored_next(store, self.agent, app, kept);
        if episode.is_none() || step.is_none() {
            self.guessed.push(app.to_string());
        }
        let n = Next { episode: episode.unwrap_or(0), step: step.unwrap_or(0) };
        self.next.insert(app.to_string(), n);
        n
    }

    /// A write's `records`, counted in `refused` with the first reason where the store (or
    /// the full spool) refused them: a live controller goes on serving, and writing the rest.
    fn keep(&mut self, written: Result<(), StoreError>, records: u64) {
        if let Err(e) = written {
            self.refused += records;
            self.refused_reason.get_or_insert_with(|| e.to_string());
        }
    }

    /// Writes `records` into `store`: the windows, the decisions, then the stage changes (a
    /// change's step is that of the app's first decision after it). A write the store or the
    /// full spool refuses is counted in `refused` and the others go on.
    pub fn write(&mut self, store: &mut dyn TrajectoryStore, records: LiveRecords) -> Result<(), LifecycleError> {
        if records.is_empty() {
            return Ok(());
        }
        // The numbering file only for apps the store has not answered for yet.
        let unnumbered = records.decisions.iter().map(|d| &d.app).any(|a| !self.next.contains_key(a))
            || records.windows.iter().map(|w| &w.app).any(|a| !self.next.contains_key(a))
            || records.changes.iter().map(|c| &c.app).any(|a| !self.next.contains_key(a));
        let kept = match (&self.numbering, unnumbered) {
            (Some(path), true) => read_numbering(path),
            _ => Default::default(),
        };
        let apps: std::collections::BTreeSet<&str> = records
            .decisions
            .iter()
            .map(|d| d.app.as_str())
            .chain(records.windows.iter().map(|w| w.app.as_str()))
            .chain(records.changes.iter().map(|c| c.app.as_str()))
            .collect();
        let start: std::collections::HashMap<String, Next> =
            apps.into_iter().map(|app| (app.to_string(), self.next(&*store, app, &kept))).collect();
        let agent = self.agent;
        for w in &records.windows {
            let next = self.next.get_mut(&w.app).expect("numbered above");
            let meta = EpisodeMeta {
                agent: format!("{agent}@{}", w.app),
                app: w.app.clone(),
                episode: next.episode,
                stage: w.stage.name().into(),
                policy: if w.agent_acted { AGENT.to_string() } else { self.fallback.clone() },
                state_dim: STATE_DIM as u32,
                action_dim: 3,
                started_at_s: now_s(),
            };
            next.episode += 1;
            self.keep(write_episode(store, &meta, &w.transitions), 1);
        }
        let mut rows = Vec::with_capacity(records.decisions.len());
        for d in &records.decisions {
            let next = self.next.get_mut(&d.app).expect("numbered above");
            let step = next.step;
            next.step += 1;
            rows.push(decision_record(agent, d, step)?);
        }
        let count = rows.len() as u64;
        self.keep(store.record_decisions(&rows), count);
        for c in &records.changes {
            // After the app's decisions of this batch taken before it.
            let before = records.decisions.iter().filter(|d| d.app == c.app && d.step < c.step).count() as u64;
            let change = StageRecord {
                agent: agent.into(),
                app: c.app.clone(),
                step: start[&c.app].step + before,
                from: c.from.name().into(),
                to: c.to.name().into(),
                reason: c.reason.clone(),
            };
            self.keep(store.record_stage_change(&change), 1);
        }
        if self.numbered_at.is_none_or(|at| at.elapsed() >= NUMBERING_EVERY) {
            self.save_numbering();
        }
        Ok(())
    }

    /// Writes every app's next episode and step into the numbering file, if there is one
    /// (after a write at most every [`NUMBERING_EVERY`]; a writer stopping calls it last).
    pub fn save_numbering(&mut self) {
        let Some(path) = &self.numbering else { return };
        let mut kept = read_numbering(path);
        for (app, n) in &self.next {
            kept.insert(format!("{}@{app}", self.agent), *n);
        }
        write_numbering(path, &kept);
        self.numbered_at = Some(std::time::Instant::now());
    }
}

/// The most transitions [`recent_demonstrations`] takes up from a store: about 17 hours of 100
/// apps at 15-second intervals (a DDPG agent's replay holds up to a million, PPO's
/// demonstrations [`crate::agent::DEMONSTRATIONS`]).
pub const DEMONSTRATIONS_TAKEN_UP: usize = 100_000;

/// The newest transitions (at most `max`, oldest first) of the windows in `store` that the
/// fallback named `fallback` served alone for a live manager whose store agent is `agent`
/// (`aware@APP` episodes, complete, of the state encoder's width, run `offline` or `online`:
/// where a live manager's agent learns offline from the fallback). What a restarted
/// `aware controller --store` gives its agent to learn offline from again
/// ([`crate::live::LiveManager::take_up_demonstrations`]), instead of starting from an empty
/// replay. Only Kubernetes apps' (`NAMESPACE/NAME`; a simulated run's generated apps are
/// never named so).
pub fn recent_demonstrations(
    store: &dyn TrajectoryStore,
    agent: &str,
    fallback: &str,
    max: usize,
) -> Result<Vec<aware_agents::Experience>, StoreError> {
    let prefix = format!("{agent}@");
    let mut episodes: Vec<_> = store
        .episodes(None)?
        .into_iter()
        .filter(|r| {
            r.is_complete()
                && r.meta.agent.starts_with(&prefix)
                && r.meta.app.contains('/')
                && r.meta.policy == fallback
                && r.meta.state_dim as usize == STATE_DIM
                && (r.meta.stage == "offline" || r.meta.stage == "online")
        })
        .collect();
    // Newest first.
    episodes.sort_by(|a, b| b.closed_at_s.partial_cmp(&a.closed_at_s).unwrap_or(std::cmp::Ordering::Equal));
    let mut out: Vec<Vec<aware_agents::Experience>> = Vec::new();
    let mut taken = 0;
    for r in episodes {
        if taken >= max {
            break;
        }
        let (_, transitions) = store.episode(r.id)?;
        let keep = transitions.len().min(max - taken);
        taken += keep;
        // The episode's newest `keep`.
        let from = transitions.len() - keep;
        out.push(
            transitions[from..]
                .iter()
                .map(|t| aware_agents::Experience {
                    state: t.state.clone(),
                    action: t.action.clone(),
                    reward: t.reward,
                    next_state: t.next_state.clone(),
                    terminal: t.done,
                })
                .collect(),
        );
    }
    Ok(out.into_iter().rev().flatten().collect())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::decision::Decision;
    use crate::stage::Stage;

    fn decision(app: &str, step: u64) -> Decision {
        Decision {
            app: app.into(),
            step,
            stage: Stage::Offline,
            acting_policy: "mpa".into(),
            observation: None,
            action: None,
            guard: "passed".into(),
            attribution: None,
        }
    }

    fn records(app: &str, steps: std::ops::Range<u64>) -> LiveRecords {
        LiveRecords { decisions: steps.map(|s| decision(app, s)).collect(), ..LiveRecords::default() }
    }

    /// An app first seen while the store is away and absent from the numbering file is
    /// numbered from 0 and said to be (`guessed`); where the store answers, or the numbering
    /// file kept beside the spool does, it goes on after what they hold and is not.
    #[test]
    fn a_live_recorder_says_which_apps_it_numbered_without_knowing() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("aware.db");
        let numbering = dir.path().join("numbering.json");
        let open = || aware_store::SqliteStore::open(&path, aware_store::Sync::Normal).unwrap();
        let mut store = open();
        let mut first = LiveRecorder::new(false, "mpa").with_numbering(numbering.clone());
        first.write(&mut store, records("shop/web", 0..3)).unwrap();
        assert!(first.guessed.is_empty(), "the store answered: {:?}", first.guessed);
        first.save_numbering();
        drop(store);

        let (away, switch) = aware_store::fault::Switchable::new(Box::new(open()));
        let mut away = aware_store::Spooled::new(Box::new(away), &dir.path().join("spool"), 1 << 20).unwrap();
        switch.set_up(false);
        // The numbering file knows `shop/web`, nothing knows `shop/new`.
        let mut restarted = LiveRecorder::new(false, "mpa").with_numbering(numbering);
        restarted.write(&mut away, records("shop/web", 0..2)).unwrap();
        restarted.write(&mut away, records("shop/new", 0..2)).unwrap();
        assert_eq!(restarted.guessed, ["shop/new"]);
        switch.set_up(true);
        away.flush().unwrap();
        let steps: Vec<u64> =
            away.decisions("shop/web", DecisionQuery::Last(10)).unwrap().iter().map(|d| d.step).collect();
        assert_eq!(steps, [0, 1, 2, 3, 4], "went on after the numbering file's");
    }
}
