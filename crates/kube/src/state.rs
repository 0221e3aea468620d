//! `aware controller --state FILE`: what the deciders keep across a restart of the controller.
//!
//! Upstream's VPA recommender keeps its histories in `VerticalPodAutoscalerCheckpoint` objects
//! so that a restart does not start every recommendation's confidence over; its HPA controller
//! keeps nothing (its stabilisation window is minutes long). The controller keeps, per MPA:
//!
//! - the MPA default's VPA histories (the fallback's, under AWARE), as upstream's checkpoint
//!   writer saves them;
//! - under AWARE, the guard's memory floor after an OOM kill, held for a day;
//! - under AWARE, the app's lifecycle (a stage a degradation left, not the checkpoint's
//!   SERVING again; [`aware_lifecycle::live::SavedLifecycle`]).
//!
//! The file is written atomically (a temporary file renamed over it) once per control interval
//! and when the controller stops, and read when it starts (a candidate replica: when it takes
//! the leader lease). It carries the exact bytes of its contents with their SHA-256, and the
//! identity of the lifecycle checkpoint whose agent it was written beside. A file that does not
//! parse, whose checksum differs, or of another format is never used: it is moved to
//! `FILE.rejected-N` and the controller starts as without one (the checkpoint's stages; the
//! fallback serving the rest). Lifecycles written beside another checkpoint are not taken up
//! (the VPA histories and OOM floors, facts about the workload, are).
//!
//! What the lifecycle's agent learns live is kept in `FILE.learned/` ([`LearnedStore`]): the
//! agent as it learned (`agent-<SHA-256 of its checkpoint.json>/`, each weight file
//! checksummed) and each policy an app is served with that the agent learned live
//! (`policy-<SHA-256>.cbor`), every entry named by the hash of its contents. They are written
//! and synced to disk before the state file that names them, and only what the state file
//! written names is kept afterwards, so a crash leaves the previous state with everything it
//! names. Entries that do not verify when taken up, or that were learned beside another
//! checkpoint, are moved to `rejected-…` in that directory and not used (nor removed).

use std::collections::{BTreeMap, HashSet};
use std::path::{Path, PathBuf};

use aware_baselines::AggregateCheckpoint;
use aware_lifecycle::guard::OomFloor;
use aware_lifecycle::live::SavedLifecycle;
use serde::{Deserialize, Serialize};

/// The version of the state file this build writes and reads.
pub const FORMAT: u32 = 1;

/// What a decider keeps of one MPA.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct SavedMpa {
    /// The MPA default's VPA history by container (under AWARE, its fallback's).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub vpa: Vec<(String, AggregateCheckpoint)>,
    /// The guard's memory floor after an OOM kill (the lifecycle decider only): a fact about
    /// the workload, kept whatever agent decides.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub oom_floor: Option<OomFloor>,
    /// AWARE's lifecycle of the MPA's target (the lifecycle decider only): bound to the agent
    /// of the checkpoint it was saved beside.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub aware: Option<SavedLifecycle>,
    /// The policy the lifecycle decider served the MPA with, where the agent learned it live
    /// (`aware.served_by_live_agent`): the SHA-256 naming it in [`LearnedStore`].
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub policy: Option<String>,
}

/// The state file's contents, checksummed whole.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SavedState {
    /// The decider that wrote it (`mpa`, `aware`).
    pub decider: String,
    /// The identity of the lifecycle checkpoint the agent came from
    /// ([`aware_lifecycle::checkpoint::Restored::identity`]); `None` for the MPA default.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub checkpoint: Option<String>,
    /// The agent as it learned live from the checkpoint's (the SHA-256 of its
    /// `checkpoint.json`, naming it in [`LearnedStore`]); `None` where it has not learned.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub learned: Option<String>,
    /// Wall-clock time of the write, seconds since the Unix epoch.
    pub saved_at_s: f64,
    /// By MPA, `namespace/name`.
    pub mpas: BTreeMap<String, SavedMpa>,
}

/// The file: `state` as written, byte for byte, and the SHA-256 of those bytes (not of a
/// re-serialisation, which need not give the same bytes: a float printed and parsed back, a
/// field added since with a default).
#[derive(Serialize, Deserialize)]
struct File {
    format: u32,
    sha256: String,
    state: Box<serde_json::value::RawValue>,
}

/// Why a state file was not used.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[error("--state {path}: {reason}")]
pub struct StateError {
    pub path: String,
    pub reason: String,
}

/// The state file at `path`.
#[derive(Debug, Clone)]
pub struct StateFile {
    pub path: PathBuf,
}

impl StateFile {
    pub fn new(path: impl Into<PathBuf>) -> Self {
        Self { path: path.into() }
    }

    /// The directory the file is in (the working directory for a bare name).
    fn dir(&self) -> PathBuf {
        match self.path.parent() {
            Some(d) if !d.as_os_str().is_empty() => d.to_path_buf(),
            _ => PathBuf::from("."),
        }
    }

    fn error(&self, reason: impl Into<String>) -> StateError {
        StateError { path: self.path.display().to_string(), reason: reason.into() }
    }

    /// Refuses a path the controller could never write (a directory, or one in a directory
    /// that does not exist or is not writable), before the controller starts rather than at its
    /// first save.
    pub fn check_writable(&self) -> Result<(), StateError> {
        if self.path.is_dir() {
            return Err(self.error("is a directory; give a file path (e.g. /var/lib/aware/state.json)"));
        }
        let dir = self.dir();
        if !dir.is_dir() {
            return Err(self.error(format!("its directory {} does not exist", dir.display())));
        }
        // A name no other process uses (every container's first process is 1).
        let nanos = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map_or(0, |d| d.as_nanos());
        let probe = dir.join(format!(".aware-state-write-check-{}-{nanos}", std::process::id()));
        let fail = |e: std::io::Error| self.error(format!("its directory {} cannot be written: {e}", dir.display()));
        std::fs::write(&probe, b"").map_err(fail)?;
        match std::fs::remove_file(&probe) {
            Err(e) if e.kind() != std::io::ErrorKind::NotFound => Err(fail(e)),
            _ => Ok(()),
        }
    }

    /// Holds the state file's directory for this process while it is the one writing there
    /// ([`aware_lab::output::lock_dir`], an advisory lock released when the process ends): a
    /// second controller given a file in the same directory is refused rather than
    /// overwriting the first's entries with its own. (Where the file system cannot lock, as
    /// on NFS, it goes on unlocked.)
    pub fn lock(&self) -> Result<aware_lab::output::DirLock, StateError> {
        let dir = self.dir();
        aware_lab::output::lock_dir(&dir).map_err(|e| match e {
            aware_lab::LabError::Busy { .. } => self.error(format!(
                "another process holds its directory {} (another aware controller keeping its state there?): give each controller its own directory",
                dir.display()
            )),
            e => self.error(e.to_string()),
        })
    }

    /// The state saved there; `None` when there is none; why it cannot be used otherwise (the
    /// caller sets it aside, [`StateFile::set_aside`]).
    pub fn read(&self) -> Result<Option<SavedState>, StateError> {
        let bytes = match std::fs::read(&self.path) {
            Ok(b) => b,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
            Err(e) => return Err(self.error(format!("cannot be read: {e}"))),
        };
        let file: File = serde_json::from_slice(&bytes).map_err(|e| self.error(format!("not a state file: {e}")))?;
        if file.format != FORMAT {
            return Err(self.error(format!("format {} (this build reads {FORMAT})", file.format)));
        }
        let sum = aware_agents::sha256(file.state.get().as_bytes());
        if sum != file.sha256 {
            return Err(self.error(format!(
                "its contents do not match their SHA-256 (changed or damaged since written: {} recorded, {sum} now)",
                file.sha256
            )));
        }
        let state = parse(file.state.get()).map_err(|e| self.error(e))?;
        Ok(Some(state))
    }

    /// Writes `state` atomically (a temporary file renamed over the old one): a crash leaves the
    /// old file or the new one, never half of either. An MPA whose state would not read back (a
    /// number that is not finite is written as null) keeps what the file held for it (the
    /// lifecycle only when saved beside the same checkpoint), or is left out where it held
    /// nothing: one bad value does not stop every other MPA's state from being kept. What was
    /// not written afresh, and why, is returned.
    pub fn write(&self, state: &SavedState) -> Result<Vec<String>, StateError> {
        self.write_state(state).map(|(left_out, _)| left_out)
    }

    /// [`StateFile::write`], then drops from [`StateFile::learned`] what the state written no
    /// longer names: what was left out of the state, and what could not be dropped, each with
    /// why.
    pub fn write_keeping_learned(&self, state: &SavedState) -> Result<(Vec<String>, Vec<String>), StateError> {
        let (left_out, written) = self.write_state(state)?;
        let store = self.learned();
        let mut not_dropped = Vec::new();
        if store.dir.exists() {
            let policies: HashSet<&str> = written.mpas.values().filter_map(|m| m.policy.as_deref()).collect();
            not_dropped = store.collect(written.learned.as_deref(), &policies);
        }
        Ok((left_out, not_dropped))
    }

    /// Where what the lifecycle's agent learned live is kept: `FILE.learned/`.
    pub fn learned(&self) -> LearnedStore {
        let name = self.path.file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_else(|| "state".into());
        LearnedStore { dir: self.path.with_file_name(format!("{name}.learned")) }
    }

    /// [`StateFile::write`], with the state as written (what was kept from before included).
    fn write_state(&self, state: &SavedState) -> Result<(Vec<String>, SavedState), StateError> {
        let mut state = state.clone();
        let mut bad = Vec::new();
        state.mpas.retain(|key, mpa| match reads_back(mpa) {
            Ok(()) => true,
            Err(why) => {
                bad.push((key.clone(), why));
                false
            }
        });
        let before = if bad.is_empty() { None } else { self.read().ok().flatten() };
        let mut left_out = Vec::new();
        for (key, why) in bad {
            let kept = before.as_ref().and_then(|b| {
                let mut m = b.mpas.get(&key)?.clone();
                if b.checkpoint != state.checkpoint {
                    m.aware = None;
                    m.policy = None;
                }
                Some(m)
            });
            match kept {
                Some(m) => {
                    state.mpas.insert(key.clone(), m);
                    left_out.push(format!("{key}: {why}; what was saved for it before is kept"));
                }
                None => left_out.push(format!("{key}: {why}; nothing was saved for it before")),
            }
        }
        let body = serde_json::to_string(&state).map_err(|e| self.error(format!("cannot be serialised: {e}")))?;
        // What would still not read back is not written: the previous file stands.
        parse(&body).map_err(|e| self.error(format!("not written, it would not read back: {e}")))?;
        let raw = serde_json::value::RawValue::from_string(body)
            .map_err(|e| self.error(format!("cannot be serialised: {e}")))?;
        let sha256 = aware_agents::sha256(raw.get().as_bytes());
        let text = serde_json::to_string(&File { format: FORMAT, sha256, state: raw })
            .map_err(|e| self.error(format!("cannot be serialised: {e}")))?;
        aware_lab::output::write_atomically(&self.path, &text).map_err(|e| match e {
            aware_lab::LabError::Io { reason, .. } => self.error(reason),
            e => self.error(e.to_string()),
        })?;
        Ok((left_out, state))
    }

    /// Moves the file to the first free `FILE.rejected-N`; that path.
    pub fn set_aside(&self) -> Result<PathBuf, StateError> {
        let name = self.path.file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_else(|| "state".into());
        let to = (1..)
            .map(|n| self.path.with_file_name(format!("{name}.rejected-{n}")))
            .find(|p| !p.exists())
            .expect("unbounded");
        std::fs::rename(&self.path, &to).map_err(|e| self.error(format!("cannot be set aside: {e}")))?;
        Ok(to)
    }

    /// The state to take up for a decider whose learned parts came from `checkpoint` (its
    /// identity, `None` for the MPA default), and what to log about it: a file that cannot be
    /// used is set aside (and nothing is taken up); lifecycles written beside another
    /// checkpoint are dropped (the VPA histories are kept).
    pub fn take_up(&self, checkpoint: Option<&str>) -> (Option<SavedState>, Vec<String>) {
        let mut notes = Vec::new();
        let mut state = match self.read() {
            Ok(Some(s)) => s,
            Ok(None) => return (None, notes),
            Err(e) => {
                match self.set_aside() {
                    Ok(to) => notes.push(format!("{e}: not used, moved to {}", to.display())),
                    Err(moved) => notes.push(format!("{e}: not used ({moved})")),
                }
                return (None, notes);
            }
        };
        let lifecycles = state.mpas.values().filter(|m| m.aware.is_some()).count();
        if state.checkpoint.as_deref() != checkpoint && lifecycles > 0 {
            notes.push(format!(
                "--state {}: the lifecycles of {lifecycles} MPAs were saved beside {}, this controller's agent is {}: not taken up (their VPA histories and OOM floors are)",
                self.path.display(),
                state.checkpoint.as_deref().map_or("no checkpoint".to_string(), |c| format!("checkpoint {c}")),
                checkpoint.map_or("none (the MPA default decides)".to_string(), |c| format!("checkpoint {c}")),
            ));
            for m in state.mpas.values_mut() {
                m.aware = None;
            }
        }
        if state.checkpoint.as_deref() != checkpoint {
            // What was learned live from another agent is not this one's to go on from, but it
            // is not thrown away either: set aside, out of reach of the first save's clean-up.
            let store = self.learned();
            let agent = state.learned.take().map(|id| (id, false));
            let policies: std::collections::BTreeSet<String> =
                state.mpas.values_mut().filter_map(|m| m.policy.take()).collect();
            for (id, policy) in agent.into_iter().chain(policies.into_iter().map(|id| (id, true))) {
                let what = if policy { "a policy" } else { "the agent" };
                match store.set_aside(&id, policy) {
                    Ok(to) => notes.push(format!(
                        "{what} learned live beside {} is not taken up by this controller's agent; kept as {}",
                        state.checkpoint.as_deref().map_or("no checkpoint".to_string(), |c| format!("checkpoint {c}")),
                        to.display()
                    )),
                    Err(e) => {
                        notes.push(format!("{what} learned live beside another checkpoint is not taken up ({e})"))
                    }
                }
            }
        }
        (Some(state), notes)
    }
}

/// `FILE.learned/` ([`StateFile::learned`]): what the lifecycle decider's agent learned live, each
/// entry named by the SHA-256 of its contents, so an entry the state file names is the one it
/// was written beside or does not verify.
#[derive(Debug, Clone)]
pub struct LearnedStore {
    pub dir: PathBuf,
}

/// Prefixes of [`LearnedStore`]'s entries.
const AGENT_PREFIX: &str = "agent-";
const POLICY_PREFIX: &str = "policy-";
const POLICY_SUFFIX: &str = ".cbor";
/// An agent being written (renamed to its name once complete).
const WRITING_PREFIX: &str = ".writing-";
const REJECTED_PREFIX: &str = "rejected-";
/// How many entries set aside are kept (the newest).
pub const REJECTED_KEPT: usize = 8;

impl LearnedStore {
    fn error(&self, reason: impl Into<String>) -> StateError {
        StateError { path: self.dir.display().to_string(), reason: reason.into() }
    }

    /// A SHA-256 as hex, and nothing else (no path can hide in one).
    fn checked_id<'a>(&self, id: &'a str) -> Result<&'a str, StateError> {
        if id.len() == 64 && id.bytes().all(|b| b.is_ascii_hexdigit() && !b.is_ascii_uppercase()) {
            Ok(id)
        } else {
            Err(self.error(format!("{id:?} is not a SHA-256")))
        }
    }

    fn agent_path(&self, id: &str) -> PathBuf {
        self.dir.join(format!("{AGENT_PREFIX}{id}"))
    }

    fn policy_path(&self, id: &str) -> PathBuf {
        self.dir.join(format!("{POLICY_PREFIX}{id}{POLICY_SUFFIX}"))
    }

    fn create(&self) -> Result<(), StateError> {
        std::fs::create_dir_all(&self.dir).map_err(|e| self.error(format!("cannot be created: {e}")))
    }

    /// Writes an agent with `save` (which writes its checkpoint into the directory it is
    /// given) and names it by the SHA-256 of its `checkpoint.json` (which lists each weight
    /// file's): that name.
    pub fn write_agent(&self, save: impl FnOnce(&Path) -> Result<(), String>) -> Result<String, StateError> {
        self.create()?;
        let nanos = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map_or(0, |d| d.as_nanos());
        let writing = self.dir.join(format!("{WRITING_PREFIX}{}-{nanos}", std::process::id()));
        let result = (|| {
            save(&writing).map_err(|e| self.error(format!("the agent cannot be saved: {e}")))?;
            let meta = writing.join(aware_agents::METADATA);
            let bytes = std::fs::read(&meta).map_err(|e| self.error(format!("{}: {e}", meta.display())))?;
            let id = aware_agents::sha256(&bytes);
            let to = self.agent_path(&id);
            if !to.exists() {
                // On disk before anything names it: each file, the directory, then the rename.
                let sync = |e: std::io::Error| self.error(format!("{}: cannot be synced: {e}", writing.display()));
                for entry in std::fs::read_dir(&writing).map_err(sync)? {
                    std::fs::File::open(entry.map_err(sync)?.path()).and_then(|f| f.sync_all()).map_err(sync)?;
                }
                sync_dir(&writing).map_err(sync)?;
                std::fs::rename(&writing, &to).map_err(|e| self.error(format!("{}: {e}", to.display())))?;
                sync_dir(&self.dir).map_err(|e| self.error(format!("cannot be synced: {e}")))?;
            }
            Ok(id)
        })();
        // Written already under its name (the same agent again), or failed part way.
        let _ = std::fs::remove_dir_all(&writing);
        result
    }

    /// The directory of the agent `id`, its `checkpoint.json` checked against the name (its
    /// weight files are checked against that when loaded).
    pub fn agent_dir(&self, id: &str) -> Result<PathBuf, StateError> {
        let dir = self.agent_path(self.checked_id(id)?);
        let meta = dir.join(aware_agents::METADATA);
        let bytes = std::fs::read(&meta).map_err(|e| self.error(format!("{}: {e}", meta.display())))?;
        if aware_agents::sha256(&bytes) != id {
            return Err(self.error(format!("{}: its SHA-256 is not the one it is named by", meta.display())));
        }
        Ok(dir)
    }

    /// Writes a policy's bytes ([`aware_agents::FrozenPolicy::to_bytes`]) unless already
    /// there (synced to disk, as the directory holding it): the SHA-256 naming them.
    pub fn write_policy(&self, bytes: &[u8]) -> Result<String, StateError> {
        let id = aware_agents::sha256(bytes);
        let path = self.policy_path(&id);
        if !path.exists() {
            self.create()?;
            aware_lab::output::write_bytes_atomically(&path, bytes).map_err(|e| self.error(e.to_string()))?;
            sync_dir(&self.dir).map_err(|e| self.error(format!("cannot be synced: {e}")))?;
        }
        Ok(id)
    }

    /// Whether the policy `id` is there (not whether it verifies).
    pub fn has_policy(&self, id: &str) -> bool {
        self.checked_id(id).is_ok_and(|id| self.policy_path(id).is_file())
    }

    /// The policy `id`, checked against its name.
    pub fn read_policy(&self, id: &str) -> Result<aware_agents::FrozenPolicy, StateError> {
        let path = self.policy_path(self.checked_id(id)?);
        let bytes = std::fs::read(&path).map_err(|e| self.error(format!("{}: {e}", path.display())))?;
        if aware_agents::sha256(&bytes) != id {
            return Err(self.error(format!("{}: its SHA-256 is not the one it is named by", path.display())));
        }
        aware_agents::FrozenPolicy::from_bytes(&bytes).map_err(|e| self.error(format!("{}: {e}", path.display())))
    }

    /// Moves the agent (`policy`: false) or policy `id` that did not verify, or was learned
    /// beside another checkpoint, to `rejected-N-<its name>` beside it (N one more than any set
    /// aside before), for inspection; that path. The newest [`REJECTED_KEPT`] are kept.
    pub fn set_aside(&self, id: &str, policy: bool) -> Result<PathBuf, StateError> {
        let from = if policy { self.policy_path(self.checked_id(id)?) } else { self.agent_path(self.checked_id(id)?) };
        let name = from.file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_default();
        let mut aside = self.set_aside_entries();
        let n = aside.last().map_or(1, |(n, _)| n + 1);
        let to = self.dir.join(format!("{REJECTED_PREFIX}{n}-{name}"));
        std::fs::rename(&from, &to).map_err(|e| self.error(format!("{} cannot be set aside: {e}", from.display())))?;
        // The oldest go beyond the newest [`REJECTED_KEPT`]: a controller restarted again and
        // again beside a damaged disk does not fill it.
        aside.push((n, to.clone()));
        let over = aside.len().saturating_sub(REJECTED_KEPT);
        for (_, old) in aside.drain(..over) {
            let removed = if old.is_dir() { std::fs::remove_dir_all(&old) } else { std::fs::remove_file(&old) };
            if let Err(e) = removed {
                tracing::warn!("{}: set aside long ago, but cannot be removed: {e}", old.display());
            }
        }
        Ok(to)
    }

    /// The entries set aside (`rejected-N-…`), by N, oldest first.
    fn set_aside_entries(&self) -> Vec<(u64, PathBuf)> {
        let Ok(entries) = std::fs::read_dir(&self.dir) else { return Vec::new() };
        let mut out: Vec<(u64, PathBuf)> = entries
            .flatten()
            .filter_map(|e| {
                let name = e.file_name().to_string_lossy().into_owned();
                let (n, _) = name.strip_prefix(REJECTED_PREFIX)?.split_once('-')?;
                Some((n.parse().ok()?, e.path()))
            })
            .collect();
        out.sort();
        out
    }

    /// Removes the agents and policies other than `agent` and `policies` (what the state file
    /// just written names), and agents left half written; entries set aside stay. What could not
    /// be removed, and why.
    fn collect(&self, agent: Option<&str>, policies: &HashSet<&str>) -> Vec<String> {
        let Ok(entries) = std::fs::read_dir(&self.dir) else { return Vec::new() };
        let mut failed = Vec::new();
        for entry in entries.flatten() {
            let name = entry.file_name().to_string_lossy().into_owned();
            let stale = if let Some(id) = name.strip_prefix(AGENT_PREFIX) {
                agent != Some(id)
            } else if let Some(id) = name.strip_prefix(POLICY_PREFIX).and_then(|n| n.strip_suffix(POLICY_SUFFIX)) {
                !policies.contains(id)
            } else {
                name.starts_with(WRITING_PREFIX)
            };
            if !stale {
                continue;
            }
            let path = entry.path();
            let removed = if path.is_dir() { std::fs::remove_dir_all(&path) } else { std::fs::remove_file(&path) };
            if let Err(e) = removed {
                failed.push(format!("{}: no longer named by the state, but cannot be removed: {e}", path.display()));
            }
        }
        failed
    }
}

/// Flushes a directory's entries (a file created or renamed in it) to disk.
fn sync_dir(dir: &Path) -> std::io::Result<()> {
    std::fs::File::open(dir)?.sync_all()
}

/// Whether one MPA's state reads back as written; the field that does not, otherwise.
fn reads_back(mpa: &SavedMpa) -> Result<(), String> {
    let text = serde_json::to_string(mpa).map_err(|e| format!("cannot be serialised: {e}"))?;
    let mut de = serde_json::Deserializer::from_str(&text);
    let _: SavedMpa = serde_path_to_error::deserialize(&mut de)
        .map_err(|e| format!("{} would not read back: {}", e.path(), e.inner()))?;
    Ok(())
}

/// The state in `text`, checked: the field that does not read, and a time that is not finite.
fn parse(text: &str) -> Result<SavedState, String> {
    let mut de = serde_json::Deserializer::from_str(text);
    let state: SavedState =
        serde_path_to_error::deserialize(&mut de).map_err(|e| format!("state.{}: {}", e.path(), e.inner()))?;
    if !state.saved_at_s.is_finite() {
        return Err("state.saved_at_s: not a finite time".into());
    }
    Ok(state)
}

#[cfg(test)]
mod tests {
    use super::*;
    use aware_lifecycle::Stage;
    use aware_lifecycle::algorithm::LifecycleState;

    fn state() -> SavedState {
        let mut mpas = BTreeMap::new();
        let checkpoint =
            AggregateCheckpoint { total_samples_count: 7, last_sample_start_s: Some(1.7e9), ..Default::default() };
        mpas.insert("shop/web".to_string(), SavedMpa { vpa: vec![("app".into(), checkpoint)], ..SavedMpa::default() });
        mpas.insert(
            "shop/db".to_string(),
            SavedMpa {
                vpa: Vec::new(),
                oom_floor: Some(OomFloor { killed_bytes: 1 << 29, bytes: 644_245_094, at_s: 1_700_006_985.711_714_3 }),
                aware: Some(SavedLifecycle {
                    lifecycle: LifecycleState {
                        recent: vec![0.123_456_789_012_345_68, 1_700_006_985.711_714_3],
                        ..LifecycleState::fresh(Stage::Online, None)
                    },
                    served_by_live_agent: false,
                }),
                policy: None,
            },
        );
        // Times and rewards as a running controller has them: fractions that a float printed
        // and parsed back need not reproduce to the bit (serde_json without `float_roundtrip`,
        // as in the release build; the test build has it through a dev-dependency, which is
        // why `the_checksum_is_of_the_bytes_written` writes its own bytes).
        SavedState {
            decider: "aware".into(),
            checkpoint: Some("abc".into()),
            learned: None,
            saved_at_s: 1_700_006_985.711_714_3,
            mpas,
        }
    }

    #[test]
    fn a_state_written_reads_back_the_same() {
        let dir = tempfile::tempdir().unwrap();
        let file = StateFile::new(dir.path().join("state.json"));
        assert_eq!(file.read(), Ok(None), "nothing there yet");
        file.check_writable().unwrap();
        file.write(&state()).unwrap();
        assert_eq!(file.read(), Ok(Some(state())));
        let (taken, notes) = file.take_up(Some("abc"));
        assert_eq!(taken, Some(state()));
        assert!(notes.is_empty(), "{notes:?}");
    }

    /// An MPA whose state would not read back (a time that is not a number) keeps what was
    /// saved for it before (left out where nothing was) and is named; every other MPA's state
    /// is written afresh and reads back.
    #[test]
    fn one_mpa_that_would_not_read_back_does_not_stop_the_others_being_saved() {
        let dir = tempfile::tempdir().unwrap();
        let file = StateFile::new(dir.path().join("state.json"));
        let mut bad = state();
        bad.mpas.get_mut("shop/db").unwrap().oom_floor.as_mut().unwrap().at_s = f64::NAN;
        let left_out = file.write(&bad).unwrap();
        assert_eq!(left_out.len(), 1, "{left_out:?}");
        assert!(left_out[0].starts_with("shop/db: oom_floor.at_s would not read back"), "{left_out:?}");
        assert!(left_out[0].ends_with("nothing was saved for it before"), "{left_out:?}");
        let mut expected = state();
        expected.mpas.remove("shop/db");
        assert_eq!(file.read(), Ok(Some(expected)));
        // Saved well once, then badly: what was saved before stands for it, the rest is new.
        file.write(&state()).unwrap();
        bad.mpas.get_mut("shop/web").unwrap().vpa[0].1.total_samples_count = 8;
        let left_out = file.write(&bad).unwrap();
        assert!(left_out[0].ends_with("what was saved for it before is kept"), "{left_out:?}");
        let mut expected = state();
        expected.mpas.get_mut("shop/web").unwrap().vpa[0].1.total_samples_count = 8;
        assert_eq!(file.read(), Ok(Some(expected)));
    }

    /// A damaged or hand-edited file, or one of another format, is set aside whole and nothing
    /// in it is used; the reason names the file and what is wrong.
    #[test]
    fn a_damaged_state_is_set_aside_and_not_used() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("state.json");
        let file = StateFile::new(&path);
        file.write(&state()).unwrap();
        let written = std::fs::read_to_string(&path).unwrap();
        let cases = [
            ("edited", written.replace("\"total_samples_count\":7", "\"total_samples_count\":8"), "SHA-256"),
            ("cut short", written[..written.len() / 2].to_string(), "not a state file"),
            ("of another format", written.replacen("\"format\":1", "\"format\":9", 1), "format 9"),
            (
                "with a field that does not read, its checksum remade",
                {
                    let body = r#"{"decider":"mpa","saved_at_s":1.0,"mpas":{"a/b":{"vpa":[["app",{"total_samples_count":-1}]]}}}"#;
                    format!(r#"{{"format":1,"sha256":"{}","state":{body}}}"#, aware_agents::sha256(body.as_bytes()))
                },
                "state.mpas.a/b.vpa[0][1]",
            ),
        ];
        for (n, (what, text, reason)) in cases.into_iter().enumerate() {
            std::fs::write(&path, &text).unwrap();
            let err = file.read().unwrap_err();
            assert!(err.to_string().starts_with(&format!("--state {}: ", path.display())), "{what}: {err}");
            assert!(err.reason.contains(reason), "{what}: {err}");
            let (taken, notes) = file.take_up(Some("abc"));
            assert_eq!(taken, None, "{what}");
            let aside = dir.path().join(format!("state.json.rejected-{}", n + 1));
            assert!(notes[0].contains(&aside.display().to_string()), "{what}: {notes:?}");
            assert_eq!(std::fs::read_to_string(&aside).unwrap(), text, "{what}: kept as it was");
            assert!(!path.exists(), "{what}");
        }
    }

    /// The checksum is of the bytes written, not of what they parse to: a state written as
    /// another writer spells it (spaces, an exponent, an escaped letter; a float the release
    /// build's serde_json would print back otherwise) verifies, and one changed byte does not.
    #[test]
    fn the_checksum_is_of_the_bytes_written() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("state.json");
        let file = StateFile::new(&path);
        let body = r#"{ "decider" : "mpa", "saved_at_s": 1.7e9, "mpas": {"a/b": {"vpa": [["app", {"cpu_histogram": {"reference_timestamp_s": null, "bucket_weights": {}, "total_weight": 0.1000000000000000055511151231257827}, "memory_histogram": {"reference_timestamp_s": null, "bucket_weights": {}, "total_weight": 0}, "first_sample_start_s": 1700006985.7117143, "last_sample_start_s": null, "total_samples_count": 3}]]}}}"#;
        let write = |body: &str| {
            let text = format!(r#"{{"format":1,"sha256":"{}","state":{body}}}"#, aware_agents::sha256(body.as_bytes()));
            std::fs::write(&path, text).unwrap();
        };
        write(body);
        let state = file.read().unwrap().expect("verifies");
        assert_eq!(state.mpas["a/b"].vpa[0].0, "app");
        assert_eq!(state.saved_at_s, 1.7e9);
        let text = std::fs::read_to_string(&path).unwrap().replacen(
            "\"total_samples_count\": 3",
            "\"total_samples_count\": 4",
            1,
        );
        std::fs::write(&path, text).unwrap();
        assert!(file.read().unwrap_err().reason.contains("SHA-256"));
    }

    /// Lifecycles saved beside another checkpoint's agent are not taken up; VPA histories are.
    #[test]
    fn lifecycles_saved_beside_another_checkpoint_are_dropped_and_histories_kept() {
        let dir = tempfile::tempdir().unwrap();
        let file = StateFile::new(dir.path().join("state.json"));
        file.write(&state()).unwrap();
        for other in [Some("def"), None] {
            let (taken, notes) = file.take_up(other);
            let taken = taken.expect("taken up");
            assert!(taken.mpas.values().all(|m| m.aware.is_none()), "{taken:?}");
            assert_eq!(taken.mpas["shop/web"].vpa, state().mpas["shop/web"].vpa);
            assert_eq!(taken.mpas["shop/db"].oom_floor, state().mpas["shop/db"].oom_floor, "a fact about the workload");
            assert!(notes[0].contains("not taken up"), "{notes:?}");
        }
    }

    /// Entries set aside are numbered on from the last, and only the newest
    /// [`REJECTED_KEPT`] stay; an id that is not a SHA-256 names no path.
    #[test]
    fn entries_set_aside_are_numbered_on_and_the_oldest_go() {
        let dir = tempfile::tempdir().unwrap();
        let store = StateFile::new(dir.path().join("state.json")).learned();
        let ids: Vec<String> = (0..REJECTED_KEPT + 2).map(|i| store.write_policy(&[i as u8; 5]).unwrap()).collect();
        for (n, id) in ids.iter().enumerate() {
            let to = store.set_aside(id, true).unwrap();
            assert_eq!(to, store.dir.join(format!("rejected-{}-policy-{id}.cbor", n + 1)));
        }
        let left: Vec<u64> = store.set_aside_entries().into_iter().map(|(n, _)| n).collect();
        assert_eq!(left, (3..=REJECTED_KEPT as u64 + 2).collect::<Vec<_>>());
        assert!(store.set_aside("../state.json", true).unwrap_err().reason.contains("not a SHA-256"));
        assert!(!store.has_policy(&ids[0]), "set aside, no longer there to serve");
    }

    #[test]
    fn a_path_the_controller_cannot_write_is_refused_up_front() {
        let dir = tempfile::tempdir().unwrap();
        let err = StateFile::new(dir.path()).check_writable().unwrap_err();
        assert!(err.reason.contains("is a directory"), "{err}");
        let err = StateFile::new(dir.path().join("missing/state.json")).check_writable().unwrap_err();
        assert!(err.reason.contains("does not exist"), "{err}");
    }
}
