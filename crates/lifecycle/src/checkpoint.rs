//! The run's checkpoint (`aware run --checkpoint DIR`): the agent and every application's
//! lifecycle, written after every episode and taken up by the next run.
//!
//! `DIR/agent/` is the agent's checkpoint, DDPG or PPO (`checkpoint.json`, naming the algorithm, with a SHA-256 per weight file, as
//! every agent writes); `DIR/lifecycle.json` the apps' stages and recent rewards, with the
//! SHA-256 of the agent's `checkpoint.json` it was written beside. Each file is written to a
//! temporary name and renamed, the lifecycle last, so a crash leaves either the previous pair
//! or a pair whose checksums disagree. Apps of the restored checkpoint that a run does not
//! manage keep their entries in `lifecycle.json`, so a run over fewer apps loses none; but the
//! agent beside them has since been trained without being evaluated on them, so they are marked
//! `stale` and a later run (or `aware controller`) starts them over in their first stage.
//!
//! A checkpoint that does not verify (a weight file whose checksum differs, a `checkpoint.json`
//! changed since (checked before anything in it is used), unreadable metadata, spaces that do
//! not fit, an agent that fails to load, a lifecycle written beside another agent, or by an agent
//! acting the other way — on the fallback's proposals or on the current allocation) is never used:
//! it is moved whole to `DIR/rejected-N/` for inspection, the run starts with a fresh agent
//! and every app starts over in its first stage — with bootstrapping, OFFLINE, so the fallback
//! serves until the agent is retrained. The report says why.

use std::path::{Path, PathBuf};

use crate::agent::LifecycleAgent;
use aware_agents::{METADATA, sha256};
use aware_lab::output::{KEPT_POOL, write_atomically};
use serde::{Deserialize, Serialize};

use crate::LifecycleError;
use crate::algorithm::LifecycleState;
use crate::manager::{Manager, agent_space};
use crate::run::EpisodeSink;

/// The version of `lifecycle.json` this build writes and reads. 2: the cost-based reward
/// (`aware_env::RewardFunction`); 3: that reward charging what a violating interval leaves
/// idle and unserved. An older checkpoint's recent rewards, converged reference and critic
/// are on another reward's scale, so it is refused, not misread.
pub const FORMAT: u32 = 3;
const AGENT: &str = "agent";
const LIFECYCLE: &str = aware_lab::output::LIFECYCLE_CHECKPOINT;

/// `DIR/lifecycle.json`.
#[derive(Debug, Clone, Serialize, Deserialize)]
struct LifecycleFile {
    format: u32,
    /// Episodes the writing run had finished.
    episodes: u64,
    /// SHA-256 of the `agent/checkpoint.json` written with it.
    agent_metadata_sha256: String,
    /// The meta-learner whose embeddings the agent reads (its identity, as the run was given
    /// it), `None` for an agent that reads the state alone.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    meta: Option<String>,
    /// The agent acts on the fallback's proposal of each interval, not on the current
    /// allocation ([`crate::manager::ManagerConfig::residual`]): the same weights mean other
    /// allocations in the other kind of run, so each takes up only its own kind.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    residual: bool,
    apps: Vec<AppEntry>,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
struct AppEntry {
    app: String,
    #[serde(flatten)]
    state: LifecycleState,
    /// Written back by a run that did not manage the app, so trained an agent it was never
    /// evaluated on: its stage says nothing about the agent beside it. Kept for the record, but
    /// restored as a fresh app (first stage, the fallback serving), and never served from.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    stale: bool,
}

/// What happened to the checkpoint in one run.
#[derive(Debug, Clone, Default, Serialize)]
pub struct CheckpointReport {
    pub path: String,
    /// The run took up the agent and the lifecycles found there.
    pub restored: bool,
    /// Why what was there was not used (it was moved to `set_aside`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub rejected: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub set_aside: Option<String>,
    /// Episodes written (one checkpoint after each).
    pub saved: u64,
    /// Writes that failed (the run went on; the previous checkpoint stands), and the last reason.
    pub save_failures: u64,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub last_save_error: Option<String>,
}

/// A checkpoint read back: the agent, every app's lifecycle by name, and the episodes the
/// writing run had finished.
pub struct Restored {
    pub agent: LifecycleAgent,
    pub apps: Vec<(String, LifecycleState)>,
    pub episodes: u64,
    /// The SHA-256 of the agent's `checkpoint.json` the lifecycles were written beside: what
    /// names this checkpoint's agent (a live controller's saved state is bound to it).
    pub identity: String,
}

/// The algorithm the agent kept in checkpoint `dir` names, with the file that says so; `None`
/// when there is none or it cannot be read (taking it up then says why, or sets it aside).
/// Only metadata the lifecycle was written beside counts: a changed one does not verify and is
/// set aside when taken up, whatever algorithm it names.
pub fn kept_algorithm(dir: &Path) -> Option<(PathBuf, String)> {
    /// The one field of `lifecycle.json` needed here (the rest is checked when taken up).
    #[derive(Deserialize)]
    struct Binding {
        agent_metadata_sha256: String,
    }
    let path = dir.join(AGENT).join(METADATA);
    let bytes = std::fs::read(&path).ok()?;
    let binding: Binding = serde_json::from_slice(&std::fs::read(dir.join(LIFECYCLE)).ok()?).ok()?;
    if sha256(&bytes) != binding.agent_metadata_sha256 {
        return None;
    }
    let meta: aware_agents::Checkpoint = serde_json::from_slice(&bytes).ok()?;
    Some((path, meta.algorithm))
}

/// Refuses a directory holding a bare agent checkpoint (`aware train --out`'s) where a lifecycle
/// checkpoint belongs: it would be ignored, the run starting from a fresh agent beside it. And
/// one holding a meta-trained pool: its `agent/` is the pool's base learner, which taking it up
/// as a lifecycle checkpoint would set aside and overwrite, breaking the pool.
pub(crate) fn refuse_agent_checkpoint(dir: &Path) -> Result<(), LifecycleError> {
    if dir.join(KEPT_POOL).exists() {
        return Err(LifecycleError::input(
            format!("--checkpoint {}", dir.display()),
            format!(
                "holds a meta-trained pool ({KEPT_POOL}, as `aware train-meta --out` writes), not a lifecycle \
                 checkpoint; give a new directory or one a lifecycle run wrote"
            ),
        ));
    }
    if dir.join(METADATA).exists() && !dir.join(AGENT).exists() && !dir.join(LIFECYCLE).exists() {
        return Err(LifecycleError::input(
            format!("--checkpoint {}", dir.display()),
            format!(
                "holds an agent checkpoint ({METADATA}, as `aware train --out` writes), not a lifecycle one \
                 ({AGENT}/ and {LIFECYCLE}); give a new directory or one a lifecycle run wrote"
            ),
        ));
    }
    Ok(())
}

/// Reads the checkpoint in `dir` without changing it (a live backend's, which may sit on a
/// read-only volume): `None` when there is none, an error naming the file when it does not
/// verify. `seed` seeds the agent's exploration. (The live backend's agent reads the state
/// alone, no workload embedding, and acts on the current allocation: a residual agent's
/// checkpoint does not verify.)
pub fn read(dir: &Path, seed: u64) -> Result<Option<Restored>, LifecycleError> {
    refuse_agent_checkpoint(dir)?;
    Ok(CheckpointSink::new(dir, seed).read(0, false)?.map(|(agent, file)| Restored {
        agent,
        identity: file.agent_metadata_sha256.clone(),
        apps: file.apps.into_iter().filter(|e| !e.stale).map(|e| (e.app, e.state)).collect(),
        episodes: file.episodes,
    }))
}

/// The checkpoint as an [`EpisodeSink`]: restores at the start, writes after every episode.
pub struct CheckpointSink {
    dir: PathBuf,
    seed: u64,
    /// The meta-learner of this run ([`CheckpointSink::with_meta`]).
    meta: Option<String>,
    /// The restored checkpoint's apps this run does not manage, written back unchanged after
    /// every episode (a run over fewer apps loses none of the others' lifecycles).
    carried: Vec<AppEntry>,
    /// Held from the start to the end of the run: a second run given the same directory is
    /// refused rather than rewriting the checkpoint under this one.
    lock: Option<aware_lab::output::DirLock>,
    pub report: CheckpointReport,
}

impl CheckpointSink {
    /// A checkpoint in `dir` (created when the run starts, [`EpisodeSink::start`]); `seed` seeds
    /// a restored agent's exploration.
    pub fn new(dir: &Path, seed: u64) -> Self {
        Self {
            dir: dir.to_path_buf(),
            seed,
            meta: None,
            carried: Vec::new(),
            lock: None,
            report: CheckpointReport { path: dir.display().to_string(), ..CheckpointReport::default() },
        }
    }

    /// A checkpoint of an agent conditioned on the embeddings of the meta-learner `id`: one
    /// written with another meta-learner (or none) does not verify, and the reverse.
    pub fn with_meta(mut self, id: Option<String>) -> Self {
        self.meta = id;
        self
    }

    /// The agent and lifecycles in the directory, `None` when there is no checkpoint, or why
    /// they cannot be used.
    fn read(
        &self,
        embedding_width: usize,
        residual: bool,
    ) -> Result<Option<(LifecycleAgent, LifecycleFile)>, LifecycleError> {
        let agent_dir = self.dir.join(AGENT);
        let lifecycle_path = self.dir.join(LIFECYCLE);
        if !agent_dir.exists() && !lifecycle_path.exists() {
            return Ok(None);
        }
        let bad = |reason: String| LifecycleError::Checkpoint { path: lifecycle_path.clone(), reason };
        let text = std::fs::read(&lifecycle_path).map_err(|e| bad(e.to_string()))?;
        let file: LifecycleFile = serde_json::from_slice(&text).map_err(|e| bad(e.to_string()))?;
        if file.format > FORMAT {
            return Err(bad(format!("written by a newer build (format {}; this one reads {FORMAT})", file.format)));
        }
        if file.format < FORMAT {
            return Err(bad(format!(
                "format {} was written with an earlier reward ({}); its rewards and agent are on another scale: retrain (aware run --checkpoint DIR into a new DIR)",
                file.format,
                if file.format < 2 { "the utilisation reward" } else { "one charging nothing while the SLO is missed" }
            )));
        }
        // Before the agent, whose state width would differ: the cause in plain words.
        if file.meta != self.meta {
            let name = |m: &Option<String>| {
                m.as_ref().map_or("no meta-learner".to_string(), |id| format!("the meta-learner {id}"))
            };
            return Err(bad(format!(
                "written with {}, this run has {} (a checkpoint of `aware run --meta DIR` is taken up only with the same DIR)",
                name(&file.meta),
                name(&self.meta)
            )));
        }
        if file.residual != residual {
            let kind = |r: bool| if r { "on the fallback's proposals (residual)" } else { "on the current allocation" };
            return Err(bad(format!(
                "written by an agent acting {}, the reader's agent acts {}",
                kind(file.residual),
                kind(residual)
            )));
        }
        // What no run writes: a hand-edited file, refused as a changed one is.
        if file.episodes > crate::run::MAX_EPISODES {
            return Err(bad(format!(
                "episodes {} is more than a run finishes ({})",
                file.episodes,
                crate::run::MAX_EPISODES
            )));
        }
        let mut seen = std::collections::HashSet::new();
        for entry in &file.apps {
            if !seen.insert(entry.app.as_str()) {
                return Err(bad(format!("app {} is listed twice", entry.app)));
            }
            if entry.state.behind >= crate::algorithm::DEGRADATION_EPISODES {
                return Err(bad(format!(
                    "app {}: behind {} (a lifecycle goes back to offline at {})",
                    entry.app,
                    entry.state.behind,
                    crate::algorithm::DEGRADATION_EPISODES
                )));
            }
        }
        // The agent's metadata is verified before anything in it is used: a changed
        // `checkpoint.json` (its hyper-parameters build the networks) is refused here, and
        // loading then checks each weight file against the checksums it lists.
        let meta = agent_dir.join(METADATA);
        let written_with = std::fs::read(&meta).map_err(|e| bad(format!("{}: {e}", meta.display())))?;
        if sha256(&written_with) != file.agent_metadata_sha256 {
            return Err(bad(format!(
                "written beside another agent checkpoint than {} (its SHA-256 differs: changed since, or another agent's)",
                meta.display()
            )));
        }
        let agent = LifecycleAgent::load(&agent_dir, &agent_space(residual, embedding_width), self.seed)?;
        Ok(Some((agent, file)))
    }

    /// Makes the directory and creates a file of a fresh name in it (removed at once): a run
    /// whose checkpoint can never be kept is refused before its first episode, not found out
    /// at the end. (A save that fails later, a disk filling up mid-run, is counted in the
    /// report and the run goes on serving.)
    fn check_writable(&self) -> Result<(), LifecycleError> {
        let fail = |e: std::io::Error| LifecycleError::Checkpoint {
            path: self.dir.clone(),
            reason: format!("cannot be written: {e}"),
        };
        std::fs::create_dir_all(&self.dir).map_err(fail)?;
        tempfile::Builder::new()
            .prefix(".aware-write-check")
            .tempfile_in(&self.dir)
            .map_err(fail)?
            .close()
            .map_err(fail)
    }

    /// Moves the checkpoint to the first free `DIR/rejected-N/`; its path.
    fn set_aside(&self) -> Result<PathBuf, LifecycleError> {
        let to = (1..).map(|n| self.dir.join(format!("rejected-{n}"))).find(|p| !p.exists()).expect("unbounded");
        let fail = |e: std::io::Error| LifecycleError::Checkpoint { path: to.clone(), reason: e.to_string() };
        std::fs::create_dir_all(&to).map_err(fail)?;
        for name in [AGENT, LIFECYCLE] {
            let from = self.dir.join(name);
            if from.exists() {
                std::fs::rename(&from, to.join(name)).map_err(fail)?;
            }
        }
        Ok(to)
    }

    fn write(&self, episodes: u64, manager: &Manager) -> Result<(), LifecycleError> {
        let agent_dir = self.dir.join(AGENT);
        manager.agent.save(&agent_dir, &agent_space(manager.config().residual, manager.embedding_width()))?;
        let meta = agent_dir.join(METADATA);
        let written = std::fs::read(&meta)
            .map_err(|e| LifecycleError::Checkpoint { path: meta.clone(), reason: e.to_string() })?;
        let file = LifecycleFile {
            format: FORMAT,
            episodes,
            agent_metadata_sha256: sha256(&written),
            meta: self.meta.clone(),
            residual: manager.config().residual,
            apps: manager
                .lifecycles()
                .into_iter()
                .map(|(app, state)| AppEntry { app, state, stale: false })
                .chain(self.carried.iter().map(|e| AppEntry { stale: true, ..e.clone() }))
                .collect(),
        };
        let text = serde_json::to_string_pretty(&file).expect("serialisable");
        Ok(write_atomically(&self.dir.join(LIFECYCLE), &text)?)
    }
}

impl EpisodeSink for CheckpointSink {
    fn start(&mut self, manager: &mut Manager) -> Result<(), LifecycleError> {
        refuse_agent_checkpoint(&self.dir)?;
        std::fs::create_dir_all(&self.dir).map_err(|e| LifecycleError::Checkpoint {
            path: self.dir.clone(),
            reason: format!("cannot be written: {e}"),
        })?;
        if self.lock.is_none() {
            self.lock = Some(aware_lab::output::lock_dir(&self.dir)?);
        }
        match self.read(manager.embedding_width(), manager.config().residual) {
            Ok(None) => {}
            Ok(Some((agent, file))) => {
                manager.replace_agent(agent);
                let managed = manager.app_names();
                let (states, carried): (Vec<_>, Vec<_>) = file.apps.into_iter().partition(|e| managed.contains(&e.app));
                self.carried = carried;
                // An app whose entry went stale starts over, as an app the checkpoint never held.
                let states: Vec<_> = states.into_iter().filter(|e| !e.stale).map(|e| (e.app, e.state)).collect();
                let reason =
                    format!("restored from checkpoint {} (after {} episodes)", self.dir.display(), file.episodes);
                manager.restore_lifecycles(&states, &reason);
                self.report.restored = true;
            }
            Err(reason) => {
                let to = self.set_aside()?;
                // Said when it happens, on stderr, whatever the run prints on stdout (JSON too).
                tracing::warn!(
                    "checkpoint {}: not used ({reason}); moved to {}; every app starts over",
                    self.dir.display(),
                    to.display()
                );
                self.report.rejected = Some(reason.to_string());
                self.report.set_aside = Some(to.display().to_string());
            }
        }
        self.check_writable()
    }

    fn episode(&mut self, episode: u64, manager: &mut Manager) -> Result<(), LifecycleError> {
        match self.write(episode + 1, manager) {
            Ok(()) => self.report.saved += 1,
            Err(e) => {
                self.report.save_failures += 1;
                self.report.last_save_error = Some(e.to_string());
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::agent::Learner;
    use crate::manager::ManagerConfig;
    use crate::stage::Stage;
    use aware_lab::workload::{Workload, WorkloadSpec};

    fn workload(apps: usize) -> Workload {
        Workload::load(&WorkloadSpec { apps, seed: 5, steps: 100, ..WorkloadSpec::default() }).unwrap()
    }

    fn config(agent: Learner) -> ManagerConfig {
        ManagerConfig { episode_steps: 50, agent, ..ManagerConfig::default() }
    }

    /// Writes a checkpoint of a fresh manager over `workload` into `dir`, as a run does after an
    /// episode.
    fn save(dir: &Path, workload: &Workload, agent: Learner) {
        let config = config(agent);
        let mut manager = Manager::new(workload, LifecycleAgent::fresh_for(&config, 1), config).unwrap();
        let mut sink = CheckpointSink::new(dir, 1);
        sink.start(&mut manager).unwrap();
        sink.episode(0, &mut manager).unwrap();
        assert_eq!((sink.report.saved, sink.report.save_failures), (1, 0), "{:?}", sink.report);
    }

    /// Takes up the checkpoint in `dir` as a run over `workload` starts; its report.
    fn take_up(dir: &Path, workload: &Workload, agent: Learner) -> CheckpointReport {
        let config = config(agent);
        let mut manager = Manager::new(workload, LifecycleAgent::fresh_for(&config, 2), config).unwrap();
        let mut sink = CheckpointSink::new(dir, 2);
        sink.start(&mut manager).unwrap();
        sink.report
    }

    /// A second run given the checkpoint directory of a run still going is refused before it
    /// reads or writes anything there; once the first has ended, the next takes it up.
    #[cfg(unix)]
    #[test]
    fn a_checkpoint_another_run_is_writing_is_refused() {
        let dir = tempfile::tempdir().unwrap();
        let workload = workload(2);
        let config = config(Learner::Ddpg);
        let mut manager = Manager::new(&workload, LifecycleAgent::fresh_for(&config, 1), config.clone()).unwrap();
        let mut running = CheckpointSink::new(dir.path(), 1);
        running.start(&mut manager).unwrap();
        running.episode(0, &mut manager).unwrap();
        let sorted = |d: &Path| {
            let mut files = walk(d);
            files.sort();
            files
        };
        let before = sorted(dir.path());
        let mut second = Manager::new(&workload, LifecycleAgent::fresh_for(&config, 2), config).unwrap();
        let e = CheckpointSink::new(dir.path(), 2).start(&mut second).unwrap_err().to_string();
        assert!(e.contains("another process is writing into this directory"), "{e}");
        assert!(sorted(dir.path()) == before, "nothing of the running one's checkpoint changed");
        drop(running);
        assert!(take_up(dir.path(), &workload, Learner::Ddpg).restored);
    }

    fn edit_json(path: &Path, edit: impl FnOnce(&mut serde_json::Value)) -> Vec<u8> {
        let mut value: serde_json::Value = serde_json::from_slice(&std::fs::read(path).unwrap()).unwrap();
        edit(&mut value);
        let bytes = serde_json::to_vec_pretty(&value).unwrap();
        std::fs::write(path, &bytes).unwrap();
        bytes
    }

    /// A changed `agent/checkpoint.json` (here a hidden layer's width, which builds the
    /// networks) is refused on its SHA-256 before anything in it is used: moved aside whole,
    /// nothing panics, and every reader (a run, the live backend) says why.
    #[test]
    fn a_changed_agent_metadata_is_set_aside_before_it_is_loaded() {
        for agent in [Learner::Ddpg, Learner::Ppo] {
            let dir = tempfile::tempdir().unwrap();
            let ckpt = dir.path().join("ckpt");
            let workload = workload(2);
            save(&ckpt, &workload, agent);
            assert!(take_up(&ckpt, &workload, agent).restored, "{agent}: the checkpoint as written verifies");
            assert_eq!(kept_algorithm(&ckpt).map(|k| k.1), Some(agent.name().to_string()));

            let meta = ckpt.join(AGENT).join(METADATA);
            let changed = edit_json(&meta, |v| v["hyperparameters"]["hidden"][0] = 0.into());

            // The live backend's reader refuses it, naming the file.
            let err = read(&ckpt, 0).err().expect("a changed checkpoint.json does not verify").to_string();
            assert!(err.contains("checkpoint.json") && err.contains("SHA-256"), "{agent}: {err}");
            // Whatever algorithm it names, it is not the kept one.
            assert_eq!(kept_algorithm(&ckpt), None);

            let report = take_up(&ckpt, &workload, agent);
            assert!(!report.restored, "{agent}: {report:?}");
            let why = report.rejected.as_deref().unwrap();
            assert!(why.contains("lifecycle.json") && why.contains("checkpoint.json"), "{agent}: {why}");
            let aside = ckpt.join("rejected-1");
            assert_eq!(report.set_aside.as_deref().map(PathBuf::from), Some(aside.clone()));
            assert_eq!(std::fs::read(aside.join(AGENT).join(METADATA)).unwrap(), changed);
            assert!(aside.join(LIFECYCLE).exists());
            assert!(!ckpt.join(AGENT).exists() && !ckpt.join(LIFECYCLE).exists());
        }
    }

    /// A hand-edited `lifecycle.json` holding what no run writes (an app twice, a count past
    /// its bound) is set aside as a changed agent is, and every app starts over.
    #[test]
    fn a_lifecycle_file_no_run_wrote_is_set_aside() {
        let workload = workload(2);
        type Edit = fn(&mut serde_json::Value);
        let edits: [(&str, Edit); 3] = [
            ("listed twice", |v| {
                let first = v["apps"][0].clone();
                v["apps"].as_array_mut().unwrap().push(first);
            }),
            // The bound itself: a lifecycle that falls behind that often is offline again.
            ("behind", |v| v["apps"][0]["behind"] = (crate::algorithm::DEGRADATION_EPISODES as u64).into()),
            ("episodes", |v| v["episodes"] = u64::MAX.into()),
        ];
        for (why, edit) in edits {
            let dir = tempfile::tempdir().unwrap();
            let ckpt = dir.path().join("ckpt");
            save(&ckpt, &workload, Learner::Ddpg);
            edit_json(&ckpt.join(LIFECYCLE), edit);
            let err = read(&ckpt, 0).err().expect("refused").to_string();
            assert!(err.contains("lifecycle.json") && err.contains(why), "{why}: {err}");
            let report = take_up(&ckpt, &workload, Learner::Ddpg);
            assert!(!report.restored && report.rejected.as_deref().is_some_and(|r| r.contains(why)), "{report:?}");
            assert!(ckpt.join("rejected-1").join(LIFECYCLE).exists());
        }
    }

    /// A bare agent checkpoint (`aware train --out`'s) given where a lifecycle one belongs is
    /// refused naming the flag, not silently ignored, and nothing is written beside it.
    #[test]
    fn an_agent_checkpoint_is_not_taken_for_a_lifecycle_one() {
        let dir = tempfile::tempdir().unwrap();
        let config = config(Learner::Ddpg);
        let agent = LifecycleAgent::fresh_for(&config, 1);
        agent.save(dir.path(), &agent_space(false, 0)).unwrap();
        let before: Vec<_> = std::fs::read_dir(dir.path()).unwrap().map(|e| e.unwrap().file_name()).collect();
        let err = read(dir.path(), 0).err().expect("refused").to_string();
        assert!(err.contains("--checkpoint") && err.contains("aware train --out"), "{err}");
        let one = workload(1);
        let mut manager = Manager::new(&one, agent, config).unwrap();
        let err = CheckpointSink::new(dir.path(), 1).start(&mut manager).expect_err("refused").to_string();
        assert!(err.contains("--checkpoint") && err.contains("not a lifecycle one"), "{err}");
        let after: Vec<_> = std::fs::read_dir(dir.path()).unwrap().map(|e| e.unwrap().file_name()).collect();
        assert_eq!(before, after);
    }

    /// A meta-trained pool's directory (`aware train-meta --out`'s: `agent/`, `meta/`,
    /// `pool.json`) given to `--checkpoint` is refused, its base learner neither set aside nor
    /// overwritten.
    #[test]
    fn a_kept_pool_is_not_taken_for_a_lifecycle_checkpoint() {
        let dir = tempfile::tempdir().unwrap();
        let config = config(Learner::Ddpg);
        let agent = LifecycleAgent::fresh_for(&config, 1);
        agent.save(&dir.path().join(AGENT), &agent_space(false, 0)).unwrap();
        std::fs::write(dir.path().join(KEPT_POOL), "{}").unwrap();
        let listing = || {
            let mut v: Vec<_> = walk(dir.path());
            v.sort();
            v
        };
        let before = listing();
        let one = workload(1);
        let mut manager = Manager::new(&one, agent, config).unwrap();
        let err = CheckpointSink::new(dir.path(), 1).start(&mut manager).expect_err("refused").to_string();
        assert!(err.contains("--checkpoint") && err.contains("meta-trained pool") && !err.contains('\n'), "{err}");
        assert!(read(dir.path(), 0).is_err());
        assert_eq!(before, listing(), "nothing moved or written");
    }

    /// Every file under `dir` with its bytes.
    fn walk(dir: &Path) -> Vec<(PathBuf, Vec<u8>)> {
        let mut out = Vec::new();
        for e in std::fs::read_dir(dir).unwrap() {
            let p = e.unwrap().path();
            if p.is_dir() {
                out.extend(walk(&p));
            } else {
                out.push((p.clone(), std::fs::read(&p).unwrap()));
            }
        }
        out
    }

    /// A checkpoint directory that cannot be made (under a file) is refused before the first
    /// episode, naming it, instead of a run that ends with nothing kept.
    #[test]
    fn a_checkpoint_that_cannot_be_written_is_refused_up_front() {
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("a-file");
        std::fs::write(&file, "x").unwrap();
        let ckpt = file.join("ckpt");
        let config = config(Learner::Ddpg);
        let one = workload(1);
        let mut manager = Manager::new(&one, LifecycleAgent::fresh_for(&config, 1), config).unwrap();
        let err = CheckpointSink::new(&ckpt, 1).start(&mut manager).expect_err("refused").to_string();
        assert!(err.starts_with(&ckpt.display().to_string()) && err.contains("cannot be written"), "{err}");
        assert!(!err.contains('\n'), "{err}");
        // A writable one is made, and the check leaves nothing behind in it.
        let fresh = dir.path().join("new").join("ckpt");
        let config = self::config(Learner::Ddpg);
        let mut manager = Manager::new(&one, LifecycleAgent::fresh_for(&config, 1), config).unwrap();
        CheckpointSink::new(&fresh, 1).start(&mut manager).unwrap();
        assert_eq!(std::fs::read_dir(&fresh).unwrap().count(), 0);
    }

    /// An agent that does not load although its metadata is the one the lifecycle was written
    /// beside (here one naming an algorithm the lifecycle does not run) is set aside as well,
    /// not an error that ends the run.
    #[test]
    fn an_agent_that_fails_to_load_is_set_aside() {
        let dir = tempfile::tempdir().unwrap();
        let ckpt = dir.path().join("ckpt");
        let workload = workload(2);
        save(&ckpt, &workload, Learner::Ddpg);
        let changed = edit_json(&ckpt.join(AGENT).join(METADATA), |v| v["algorithm"] = "dqn".into());
        edit_json(&ckpt.join(LIFECYCLE), |v| v["agent_metadata_sha256"] = sha256(&changed).into());
        assert_eq!(kept_algorithm(&ckpt).map(|k| k.1).as_deref(), Some("dqn"));

        let report = take_up(&ckpt, &workload, Learner::Ddpg);
        assert!(!report.restored, "{report:?}");
        let why = report.rejected.as_deref().unwrap();
        assert!(why.contains("a dqn agent"), "{why}");
        assert_eq!(report.set_aside.as_deref().map(PathBuf::from), Some(ckpt.join("rejected-1")));
        assert!(!ckpt.join(AGENT).exists());
    }

    /// A run over fewer apps than the checkpoint keeps carries the others' lifecycles over
    /// unchanged: nothing stored is lost, and a later run over all of them takes them up.
    #[test]
    fn apps_not_in_the_run_keep_their_saved_lifecycles() {
        let dir = tempfile::tempdir().unwrap();
        let ckpt = dir.path().join("ckpt");
        let three = workload(3);
        save(&ckpt, &three, Learner::Ddpg);
        let saved = read(&ckpt, 0).unwrap().unwrap().apps;
        assert_eq!(saved.len(), 3);

        // A run over one app (another population: its own name) writes its checkpoint.
        let one = Workload::load(&WorkloadSpec { apps: 1, seed: 6, steps: 100, ..WorkloadSpec::default() }).unwrap();
        let name = one.apps[0].name.clone();
        let config = config(Learner::Ddpg);
        let mut manager = Manager::new(&one, LifecycleAgent::fresh_for(&config, 3), config).unwrap();
        let mut sink = CheckpointSink::new(&ckpt, 3);
        sink.start(&mut manager).unwrap();
        assert!(sink.report.restored, "{:?}", sink.report);
        sink.episode(0, &mut manager).unwrap();
        sink.episode(1, &mut manager).unwrap();
        assert_eq!(sink.report.saved, 2);
        drop(sink); // the run ends

        // Every earlier entry is still in the file, unchanged but marked stale: the agent beside
        // it has since trained without being evaluated on those apps.
        let entries = || -> Vec<AppEntry> {
            let file: serde_json::Value =
                serde_json::from_slice(&std::fs::read(ckpt.join(LIFECYCLE)).unwrap()).unwrap();
            serde_json::from_value(file["apps"].clone()).unwrap()
        };
        let written = entries();
        let new = usize::from(!saved.iter().any(|(app, _)| app == &name));
        assert_eq!(written.len(), 3 + new, "{:?}", written.iter().map(|a| &a.app).collect::<Vec<_>>());
        for kept in saved.iter().filter(|kept| kept.0 != name) {
            let e = written.iter().find(|e| e.app == kept.0).unwrap_or_else(|| panic!("{} lost", kept.0));
            assert!(e.stale && e.state == kept.1, "{} changed", kept.0);
        }
        // What a reader serves from (the live backend) is the run's own app alone.
        let after = read(&ckpt, 0).unwrap().unwrap();
        assert_eq!(after.episodes, 2);
        assert_eq!(after.apps.iter().map(|a| a.0.as_str()).collect::<Vec<_>>(), [name.as_str()]);

        // A stale entry in SERVING (as an app left serving by an earlier run would be) is not
        // restored to it: a run over the three starts it over in its first stage.
        let path = ckpt.join(LIFECYCLE);
        let mut file: serde_json::Value = serde_json::from_slice(&std::fs::read(&path).unwrap()).unwrap();
        let stale = three.apps.iter().position(|a| a.name != name).unwrap();
        for e in file["apps"].as_array_mut().unwrap() {
            if e["app"] == three.apps[stale].name.as_str() {
                e["stage"] = serde_json::to_value(Stage::Serving).unwrap();
            }
        }
        std::fs::write(&path, serde_json::to_vec_pretty(&file).unwrap()).unwrap();
        let three_config = self::config(Learner::Ddpg);
        let mut manager = Manager::new(&three, LifecycleAgent::fresh_for(&three_config, 4), three_config).unwrap();
        let first = manager.stages()[stale];
        let mut sink = CheckpointSink::new(&ckpt, 4);
        sink.start(&mut manager).unwrap();
        assert!(sink.report.restored, "{:?}", sink.report);
        assert_eq!(manager.stages()[stale], first);
        assert_ne!(first, Stage::Serving);
    }
}
