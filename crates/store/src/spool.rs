//! An on-disk spool in front of any store, so that the lifecycle keeps recording through a
//! backend outage.
//!
//! A write the backend answers with [`StoreError::Unavailable`] is appended to a journal in the
//! spool's directory (one JSON line per operation, fsync'd before `Ok` is returned: acknowledged
//! means on disk). `begin_episode` then returns a provisional id (negative, unique); operations
//! on it are journaled too. Every later write first flushes the journal in order, mapping
//! provisional ids to the backend's, and is journaled itself while anything is still pending,
//! so the backend sees the operations in the order they were acknowledged. Reads flush first,
//! then go to the backend (`Unavailable` while it is down).
//!
//! Files in the directory: `journal-<generation>.jsonl`; `progress.json` (generation, lines
//! flushed, provisional ids mapped so far), replaced atomically after every operation the
//! backend confirmed or that was set aside; `rejected.jsonl`, appended, one JSON line
//! (`error`, `operation`) per journaled operation that can never be applied: one the backend
//! refused when flushed, or one naming an episode the spool never began (a damaged or
//! hand-edited journal). Those are set aside with the reason, never dropped silently, and
//! counted ([`Spooled::set_aside`]); the flush goes on past them. Only the backend being
//! unreachable stops a flush, so `pending` counts exactly what waits for the store. `lock`,
//! held while a `Spooled` uses the directory.
//! A journal left by a previous process is flushed by [`Spooled::new`].
//!
//! The at-least-once edge: a crash after the backend confirmed an operation but before
//! `progress.json` recorded it replays that one operation. A replayed decision batch or stage
//! change is recorded twice; a replayed `begin_episode` is refused as a duplicate and that
//! episode's journaled operations are set aside in `rejected.jsonl`. Likewise an episode the
//! backend had begun for a process that then died cannot be continued by the next one (the
//! store's rule: a dead writer's unclosed episode stays incomplete), so its journaled appends
//! and close are set aside.

use std::cell::RefCell;
use std::collections::{HashMap, HashSet};
use std::fs::{File, OpenOptions};
use std::io::Write;
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use crate::TrajectoryStore;
use crate::model::{
    DecisionQuery, DecisionRecord, EpisodeId, EpisodeMeta, EpisodeRecord, StageRecord, StoreError, StoreStats, TopMode,
    Transition, TransitionFilter, check_appended,
};

/// One journaled write. Floats are kept as their bits, so what is flushed is exactly what was
/// acknowledged.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "op", rename_all = "snake_case")]
enum Op {
    Begin {
        id: EpisodeId,
        meta: EpisodeMeta,
        #[serde(default)]
        started_at_bits: u64,
    },
    Append {
        id: EpisodeId,
        transitions: Vec<ExactTransition>,
    },
    Close {
        id: EpisodeId,
        total_reward_bits: u64,
    },
    Decisions {
        decisions: Vec<DecisionRecord>,
    },
    StageChange {
        change: StageRecord,
    },
}

/// A transition with its floats as bits.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
struct ExactTransition {
    step: u32,
    state: Vec<u32>,
    action: Vec<u32>,
    reward: u32,
    next_state: Vec<u32>,
    done: bool,
}

impl From<&Transition> for ExactTransition {
    fn from(t: &Transition) -> Self {
        let bits = |v: &[f32]| v.iter().map(|x| x.to_bits()).collect();
        Self {
            step: t.step,
            state: bits(&t.state),
            action: bits(&t.action),
            reward: t.reward.to_bits(),
            next_state: bits(&t.next_state),
            done: t.done,
        }
    }
}

impl From<&ExactTransition> for Transition {
    fn from(t: &ExactTransition) -> Self {
        let floats = |v: &[u32]| v.iter().map(|&x| f32::from_bits(x)).collect();
        Self {
            step: t.step,
            state: floats(&t.state),
            action: floats(&t.action),
            reward: f32::from_bits(t.reward),
            next_state: floats(&t.next_state),
            done: t.done,
        }
    }
}

fn begin_op(id: EpisodeId, meta: &EpisodeMeta) -> Op {
    Op::Begin { id, meta: meta.clone(), started_at_bits: meta.started_at_s.to_bits() }
}

impl Op {
    fn episode(&self) -> Option<EpisodeId> {
        match self {
            Op::Begin { id, .. } | Op::Append { id, .. } | Op::Close { id, .. } => Some(*id),
            _ => None,
        }
    }

    fn with_episode(mut self, new: EpisodeId) -> Self {
        if let Op::Begin { id, .. } | Op::Append { id, .. } | Op::Close { id, .. } = &mut self {
            *id = new;
        }
        self
    }
}

/// `progress.json`.
#[derive(Debug, Default, Serialize, Deserialize)]
struct Progress {
    generation: u64,
    /// Lines of the journal the backend has confirmed (or that were set aside).
    done: usize,
    /// Provisional id → backend id, for episodes begun by this generation's flushed lines.
    ids: Vec<(EpisodeId, EpisodeId)>,
    /// Provisional ids whose `begin_episode` the backend refused.
    rejected_ids: Vec<EpisodeId>,
}

/// Dimensions and length of an episode open through the spool, to refuse a bad append before
/// it is acknowledged.
struct Open {
    state_dim: u32,
    action_dim: u32,
    length: u32,
}

struct State {
    inner: Box<dyn TrajectoryStore>,
    dir: PathBuf,
    max_bytes: u64,
    progress: Progress,
    /// This generation's journal, flushed or not (`progress.done` of them are).
    lines: Vec<Op>,
    /// The journal file's size.
    bytes: u64,
    journal: File,
    /// Provisional → backend ids, all this process mapped (callers keep provisional ids).
    ids: HashMap<EpisodeId, EpisodeId>,
    rejected_ids: HashSet<EpisodeId>,
    open: HashMap<EpisodeId, Open>,
    next_provisional: EpisodeId,
    set_aside: u64,
    _lock: File,
}

/// A store whose writes survive the backend's outages: see the module documentation.
pub struct Spooled {
    state: RefCell<State>,
}

fn io_error(dir: &Path, what: &str, e: impl std::fmt::Display) -> StoreError {
    StoreError::Backend(format!("spool {}: {what}: {e}", dir.display()))
}

fn journal_path(dir: &Path, generation: u64) -> PathBuf {
    dir.join(format!("journal-{generation}.jsonl"))
}

fn sync_dir(dir: &Path) -> Result<(), StoreError> {
    File::open(dir).and_then(|d| d.sync_all()).map_err(|e| io_error(dir, "syncing the directory", e))
}

/// Writes a file atomically: temporary file, fsync, rename, directory fsync.
fn replace_file(dir: &Path, name: &str, contents: &[u8]) -> Result<(), StoreError> {
    let tmp = dir.join(format!("{name}.tmp"));
    let write = || -> std::io::Result<()> {
        let mut f = File::create(&tmp)?;
        f.write_all(contents)?;
        f.sync_all()?;
        std::fs::rename(&tmp, dir.join(name))
    };
    write().map_err(|e| io_error(dir, &format!("writing {name}"), e))?;
    sync_dir(dir)
}

/// A journal line that does not read back as an operation: its place among the journal's
/// lines (blank ones aside), its text and why.
struct Unreadable {
    position: usize,
    text: String,
    reason: String,
}

/// The `op` of a journal line that is a JSON object naming an operation this build does not
/// know.
fn newer_kind(line: &[u8]) -> Option<String> {
    const KNOWN: [&str; 5] = ["begin", "append", "close", "decisions", "stage_change"];
    let value: serde_json::Value = serde_json::from_slice(line).ok()?;
    let kind = value.get("op")?.as_str()?;
    (!KNOWN.contains(&kind)).then(|| kind.to_string())
}

/// What a journal holds: its operations, its size, and the lines that are none.
type Journal = (Vec<Op>, u64, Vec<Unreadable>);

/// Reads a journal; a torn last line (no newline: its write was never acknowledged) is cut off.
fn read_journal(dir: &Path, path: &Path) -> Result<Journal, StoreError> {
    let text = match std::fs::read(path) {
        Ok(t) => t,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok((Vec::new(), 0, Vec::new())),
        Err(e) => return Err(io_error(dir, "reading the journal", e)),
    };
    let complete = text.iter().rposition(|&b| b == b'\n').map_or(0, |i| i + 1);
    if complete < text.len() {
        let f = OpenOptions::new().write(true).open(path).map_err(|e| io_error(dir, "repairing the journal", e))?;
        f.set_len(complete as u64)
            .and_then(|()| f.sync_all())
            .map_err(|e| io_error(dir, "repairing the journal", e))?;
    }
    let (mut ops, mut unreadable) = (Vec::new(), Vec::new());
    for (n, line) in text[..complete].split(|&b| b == b'\n').filter(|l| !l.is_empty()).enumerate() {
        match serde_json::from_slice(line) {
            Ok(op) => ops.push(op),
            Err(e) => match newer_kind(line) {
                // An operation of a kind this build does not know was written by a newer one,
                // which can still apply it: refused, not set aside for good.
                Some(kind) => {
                    return Err(StoreError::Corrupt {
                        path: path.display().to_string(),
                        reason: format!(
                            "operation {}: a {kind:?} operation, which this build does not know (written by a newer aware?); flush this spool with that version",
                            n + 1
                        ),
                    });
                }
                None => unreadable.push(Unreadable {
                    position: n,
                    text: String::from_utf8_lossy(line).into_owned(),
                    reason: format!("operation {}: {e}", n + 1),
                }),
            },
        }
    }
    Ok((ops, complete as u64, unreadable))
}

fn open_journal(dir: &Path, generation: u64) -> Result<File, StoreError> {
    let f = OpenOptions::new()
        .create(true)
        .append(true)
        .open(journal_path(dir, generation))
        .map_err(|e| io_error(dir, "opening the journal", e))?;
    sync_dir(dir)?;
    Ok(f)
}

impl Spooled {
    /// Wraps `inner`, spooling to `dir` (created if needed) at most `max_bytes` of journal. A
    /// journal left there by a previous process is flushed now if the backend is reachable (and
    /// kept for later if not). Refused when another `Spooled` holds the directory.
    pub fn new(inner: Box<dyn TrajectoryStore>, dir: &Path, max_bytes: u64) -> Result<Self, StoreError> {
        std::fs::create_dir_all(dir).map_err(|e| io_error(dir, "creating the directory", e))?;
        let lock = OpenOptions::new()
            .create(true)
            .truncate(false)
            .write(true)
            .open(dir.join("lock"))
            .map_err(|e| io_error(dir, "opening the lock", e))?;
        lock.try_lock().map_err(|_| {
            StoreError::Invalid(format!("spool {}: in use by another process (its lock is held)", dir.display()))
        })?;
        let progress: Progress = match std::fs::read(dir.join("progress.json")) {
            Ok(text) => serde_json::from_slice(&text).map_err(|e| StoreError::Corrupt {
                path: dir.join("progress.json").display().to_string(),
                reason: e.to_string(),
            })?,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Progress::default(),
            Err(e) => return Err(io_error(dir, "reading progress.json", e)),
        };
        // Journals of other generations are leftovers: older ones fully flushed, a newer one an
        // interrupted compaction (its generation was never recorded).
        let entries = std::fs::read_dir(dir).map_err(|e| io_error(dir, "listing the directory", e))?;
        for entry in entries.flatten() {
            let name = entry.file_name().to_string_lossy().into_owned();
            let generation = name.strip_prefix("journal-").and_then(|n| n.strip_suffix(".jsonl"));
            if generation.and_then(|g| g.parse::<u64>().ok()).is_some_and(|g| g != progress.generation) {
                std::fs::remove_file(entry.path()).map_err(|e| io_error(dir, "removing an old journal", e))?;
            }
        }
        let (lines, bytes, unreadable) = read_journal(dir, &journal_path(dir, progress.generation))?;
        let journal = open_journal(dir, progress.generation)?;
        let lowest = lines
            .iter()
            .filter_map(Op::episode)
            .chain(progress.ids.iter().map(|&(p, _)| p))
            .chain(progress.rejected_ids.iter().copied())
            .min()
            .unwrap_or(0)
            .min(0);
        let mut progress = progress;
        // `done` counts lines: damage among the lines already flushed (a line garbled, or two
        // run together) leaves no telling which of the rest were flushed, so such a journal
        // is refused as before; damage among the pending ones is set aside below.
        let flushed = progress.done;
        if let Some(u) = unreadable.iter().find(|u| u.position < flushed) {
            return Err(StoreError::Corrupt {
                path: journal_path(dir, progress.generation).display().to_string(),
                reason: format!(
                    "{} (among the operations already written to the store: which of the rest were is unknown; move the spool aside to start afresh)",
                    u.reason
                ),
            });
        }
        progress.done = progress.done.min(lines.len());
        let mut state = State {
            inner,
            dir: dir.to_path_buf(),
            max_bytes,
            ids: progress.ids.iter().copied().collect(),
            rejected_ids: progress.rejected_ids.iter().copied().collect(),
            progress,
            lines,
            bytes,
            journal,
            open: HashMap::new(),
            next_provisional: lowest - 1,
            set_aside: 0,
            _lock: lock,
        };
        let journal_file = journal_path(dir, state.progress.generation);
        for u in &unreadable {
            let error = format!("{}: {}", journal_file.display(), u.reason);
            state.set_aside_entry(serde_json::json!({ "error": error, "line": u.text }))?;
        }
        if !unreadable.is_empty() {
            // Rewritten without them, so that each is set aside once (again, should the
            // process die before the rewrite is in force: at least once, never lost).
            state.rotate()?;
        }
        let mut spooled = Self { state: RefCell::new(state) };
        match spooled.flush() {
            Ok(_) | Err(StoreError::Unavailable(_)) => Ok(spooled),
            Err(e) => Err(e),
        }
    }

    /// Writes the journaled operations to the backend, in order; returns how many it confirmed.
    /// An operation that can never be applied (the backend refuses it, or it names an episode
    /// this spool never began) is set aside in `rejected.jsonl` and the flush goes on.
    /// `Unavailable` (with what was flushed kept, the rest still pending) only when the backend
    /// is down.
    pub fn flush(&mut self) -> Result<usize, StoreError> {
        self.state.get_mut().flush()
    }

    /// Operations journaled and not yet written to the backend.
    pub fn pending(&self) -> usize {
        self.state.borrow().pending()
    }

    /// Journaled operations set aside as never applicable (refused by the backend when flushed,
    /// naming an episode the spool never began, or a journal line that does not read back as
    /// an operation), since this `Spooled` was made — including
    /// by the flush in [`Spooled::new`]; each is in `rejected.jsonl` with the reason.
    pub fn set_aside(&self) -> u64 {
        self.state.borrow().set_aside
    }

    /// The spool's directory.
    pub fn dir(&self) -> PathBuf {
        self.state.borrow().dir.clone()
    }

    /// The backend id of an episode (itself for a backend id; `None` while a provisional
    /// episode is still spooled).
    pub fn backend_id(&self, id: EpisodeId) -> Option<EpisodeId> {
        self.state.borrow().resolve(id).ok()
    }

    /// Runs a read on the backend after a flush attempt.
    fn read<R>(&self, f: impl FnOnce(&dyn TrajectoryStore) -> Result<R, StoreError>) -> Result<R, StoreError> {
        let mut state = self.state.borrow_mut();
        if state.pending() > 0 {
            // A backend still down answers the read below; a spool error is not the read's.
            let _ = state.flush();
        }
        f(state.inner.as_ref())
    }
}

impl State {
    fn pending(&self) -> usize {
        self.lines.len() - self.progress.done
    }

    /// The backend id for an id a caller holds: `Unavailable` only while its begin still waits
    /// in the journal; an id this spool never began is an `UnknownEpisode`.
    fn resolve(&self, id: EpisodeId) -> Result<EpisodeId, StoreError> {
        if id >= 0 || self.ids.contains_key(&id) || self.rejected_ids.contains(&id) {
            return self.resolve_flushed(id);
        }
        if self.begin_pending(id) {
            return Err(StoreError::Unavailable(format!("episode {id} is still in the spool {}", self.dir.display())));
        }
        Err(StoreError::UnknownEpisode(id))
    }

    /// The backend id for an episode named by a journaled operation being flushed. Its begin
    /// precedes it in the journal, so it was flushed (mapped) or refused already; anything else
    /// (a damaged journal) can never be applied, and is never mistaken for an outage.
    fn resolve_flushed(&self, id: EpisodeId) -> Result<EpisodeId, StoreError> {
        if id >= 0 {
            return Ok(id);
        }
        if let Some(&real) = self.ids.get(&id) {
            return Ok(real);
        }
        if self.rejected_ids.contains(&id) {
            return Err(StoreError::Invalid(format!("episode {id}: the store refused its begin (see rejected.jsonl)")));
        }
        Err(StoreError::Invalid(format!(
            "episode {id} was never begun in this spool (no begin precedes it in the journal); it can never be applied"
        )))
    }

    /// Whether the begin of provisional episode `id` is journaled and not yet flushed.
    fn begin_pending(&self, id: EpisodeId) -> bool {
        self.lines[self.progress.done..].iter().any(|op| matches!(op, Op::Begin { id: b, .. } if *b == id))
    }

    fn save_progress(&mut self) -> Result<(), StoreError> {
        let text = serde_json::to_vec(&self.progress).map_err(|e| io_error(&self.dir, "encoding progress", e))?;
        replace_file(&self.dir, "progress.json", &text)
    }

    /// Appends an operation to the journal, durably. Over the bound: the flushed part is
    /// compacted away first, then `SpoolFull` if it still does not fit.
    fn push(&mut self, op: &Op) -> Result<(), StoreError> {
        let mut line = serde_json::to_vec(op).map_err(|e| io_error(&self.dir, "encoding an operation", e))?;
        line.push(b'\n');
        let len = line.len() as u64;
        if self.bytes + len > self.max_bytes && self.progress.done > 0 {
            self.rotate()?;
        }
        if self.bytes + len > self.max_bytes {
            return Err(StoreError::SpoolFull { dir: self.dir.display().to_string(), max_bytes: self.max_bytes });
        }
        let written = self.journal.write_all(&line).and_then(|()| self.journal.sync_data());
        if let Err(e) = written {
            // Cut a partial line off so the next one starts clean.
            let _ = self.journal.set_len(self.bytes).and_then(|()| self.journal.sync_data());
            return Err(io_error(&self.dir, "writing the journal", e));
        }
        self.bytes += len;
        self.lines.push(op.clone());
        Ok(())
    }

    /// Starts the next generation holding only the unflushed operations (with the backend ids
    /// already known), then drops the old journal. The switch is the atomic replacement of
    /// `progress.json`; a crash before it leaves the old generation in force.
    fn rotate(&mut self) -> Result<(), StoreError> {
        let next = self.progress.generation + 1;
        let rest: Vec<Op> = self.lines[self.progress.done..]
            .iter()
            .map(|op| match op.episode() {
                Some(id) if id < 0 => match self.ids.get(&id) {
                    Some(&real) => op.clone().with_episode(real),
                    None => op.clone(),
                },
                _ => op.clone(),
            })
            .collect();
        let mut text = Vec::new();
        for op in &rest {
            text.extend(serde_json::to_vec(op).map_err(|e| io_error(&self.dir, "encoding an operation", e))?);
            text.push(b'\n');
        }
        let path = journal_path(&self.dir, next);
        let write = || -> std::io::Result<()> {
            let mut f = File::create(&path)?;
            f.write_all(&text)?;
            f.sync_all()
        };
        write().map_err(|e| io_error(&self.dir, "compacting the journal", e))?;
        sync_dir(&self.dir)?;
        let old = self.progress.generation;
        self.progress = Progress {
            generation: next,
            done: 0,
            ids: Vec::new(),
            rejected_ids: self.rejected_ids.iter().copied().collect(),
        };
        self.save_progress()?;
        self.journal = open_journal(&self.dir, next)?;
        self.lines = rest;
        self.bytes = text.len() as u64;
        let _ = std::fs::remove_file(journal_path(&self.dir, old));
        Ok(())
    }

    /// Applies one operation (ids already the caller's) to the backend; a begin returns the
    /// backend's id.
    fn apply(&mut self, op: &Op) -> Result<Option<EpisodeId>, StoreError> {
        match op {
            Op::Begin { meta, started_at_bits, .. } => {
                let meta = EpisodeMeta { started_at_s: f64::from_bits(*started_at_bits), ..meta.clone() };
                self.inner.begin_episode(&meta).map(Some)
            }
            Op::Append { id, transitions } => {
                let id = self.resolve_flushed(*id)?;
                let transitions: Vec<Transition> = transitions.iter().map(Transition::from).collect();
                self.inner.append(id, &transitions).map(|()| None)
            }
            Op::Close { id, total_reward_bits } => {
                let id = self.resolve_flushed(*id)?;
                self.inner.close_episode(id, f64::from_bits(*total_reward_bits)).map(|()| None)
            }
            Op::Decisions { decisions } => self.inner.record_decisions(decisions).map(|()| None),
            Op::StageChange { change } => self.inner.record_stage_change(change).map(|()| None),
        }
    }

    fn flush(&mut self) -> Result<usize, StoreError> {
        let mut flushed = 0;
        while self.progress.done < self.lines.len() {
            let op = self.lines[self.progress.done].clone();
            match self.apply(&op) {
                Ok(real) => {
                    if let (Some(real), Op::Begin { id, .. }) = (real, &op) {
                        self.ids.insert(*id, real);
                        self.progress.ids.push((*id, real));
                    }
                    flushed += 1;
                }
                Err(e) if e.is_unavailable() => return Err(e),
                Err(e) => self.reject(&op, &e)?,
            }
            self.progress.done += 1;
            self.save_progress()?;
        }
        if !self.lines.is_empty() {
            self.rotate()?;
        }
        Ok(flushed)
    }

    /// Sets aside an operation that can never be applied, with the reason.
    fn reject(&mut self, op: &Op, e: &StoreError) -> Result<(), StoreError> {
        if let Op::Begin { id, .. } = op {
            self.rejected_ids.insert(*id);
            self.progress.rejected_ids.push(*id);
        }
        self.set_aside_entry(serde_json::json!({ "error": e.to_string(), "operation": op }))
    }

    /// Appends `entry` to `rejected.jsonl`, synced, and counts it.
    fn set_aside_entry(&mut self, entry: serde_json::Value) -> Result<(), StoreError> {
        let mut line = entry.to_string().into_bytes();
        line.push(b'\n');
        let path = self.dir.join("rejected.jsonl");
        let write = || -> std::io::Result<()> {
            let mut f = OpenOptions::new().create(true).append(true).open(&path)?;
            f.write_all(&line)?;
            f.sync_data()
        };
        write().map_err(|e| io_error(&self.dir, "writing rejected.jsonl", e))?;
        self.set_aside += 1;
        Ok(())
    }

    /// Refuses what the backend would refuse anyway, before anything is acknowledged.
    fn validate(&self, op: &Op) -> Result<(), StoreError> {
        match op {
            Op::Begin { meta, .. } => {
                if meta.state_dim == 0 || !meta.started_at_s.is_finite() {
                    return Err(StoreError::Invalid(
                        "episode: state_dim must be positive and started_at_s finite".into(),
                    ));
                }
            }
            Op::Append { id, transitions } => match self.open.get(id) {
                Some(o) => {
                    let transitions: Vec<Transition> = transitions.iter().map(Transition::from).collect();
                    check_appended(*id, &transitions, o.state_dim, o.action_dim, o.length)?;
                }
                None if *id < 0 => return Err(StoreError::Invalid(format!("episode {id} is not open"))),
                None => {}
            },
            Op::Close { id, total_reward_bits } => {
                let total_reward = f64::from_bits(*total_reward_bits);
                if !total_reward.is_finite() {
                    return Err(StoreError::Invalid(format!(
                        "episode {id}: total reward {total_reward} is not finite"
                    )));
                }
                if *id < 0 && !self.open.contains_key(id) {
                    return Err(StoreError::Invalid(format!("episode {id} is not open")));
                }
            }
            Op::Decisions { decisions } => {
                for d in decisions {
                    d.check()?;
                }
            }
            Op::StageChange { change } => change.check()?,
        }
        Ok(())
    }

    /// Keeps the episode bookkeeping after an acknowledged operation (`id`: the caller's).
    fn track(&mut self, op: &Op, id: Option<EpisodeId>) {
        match (op, id) {
            (Op::Begin { meta, .. }, Some(id)) => {
                self.open.insert(id, Open { state_dim: meta.state_dim, action_dim: meta.action_dim, length: 0 });
            }
            (Op::Append { id, transitions }, _) => {
                if let Some(o) = self.open.get_mut(id) {
                    o.length += transitions.len() as u32;
                }
            }
            (Op::Close { id, .. }, _) => {
                self.open.remove(id);
            }
            _ => {}
        }
    }

    /// A write: straight to the backend when nothing is pending and it is reachable, to the
    /// journal otherwise. Returns the caller's id for a begin.
    fn write(&mut self, op: Op) -> Result<Option<EpisodeId>, StoreError> {
        self.validate(&op)?;
        if self.pending() > 0 {
            match self.flush() {
                Ok(_) | Err(StoreError::Unavailable(_)) => {}
                Err(e) => return Err(e),
            }
        }
        let spooled_episode = op.episode().is_some_and(|id| id < 0 && !self.ids.contains_key(&id));
        if self.pending() == 0 && !spooled_episode {
            let direct = match op.episode() {
                Some(id) => op.clone().with_episode(self.resolve(id)?),
                None => op.clone(),
            };
            match self.apply(&direct) {
                Ok(real) => {
                    let caller = match op {
                        Op::Begin { .. } => real,
                        _ => op.episode(),
                    };
                    self.track(&op, caller);
                    return Ok(caller);
                }
                Err(e) if e.is_unavailable() => {}
                Err(e) => return Err(e),
            }
        }
        if let Some(id) = op.episode()
            && id < 0
            && self.rejected_ids.contains(&id)
        {
            return Err(StoreError::Invalid(format!("episode {id}: the store refused its begin (see rejected.jsonl)")));
        }
        let (journaled, caller) = match op {
            Op::Begin { meta, .. } => {
                let id = self.next_provisional;
                (begin_op(id, &meta), Some(id))
            }
            other => {
                let caller = other.episode();
                let journaled = match caller.and_then(|id| self.ids.get(&id)) {
                    Some(&real) => other.with_episode(real),
                    None => other,
                };
                (journaled, caller)
            }
        };
        self.push(&journaled)?;
        if let Op::Begin { id, .. } = journaled {
            self.next_provisional = id - 1;
        }
        self.track(&journaled.clone().with_episode(caller.unwrap_or_default()), caller);
        Ok(caller)
    }
}

impl TrajectoryStore for Spooled {
    fn begin_episode(&mut self, meta: &EpisodeMeta) -> Result<EpisodeId, StoreError> {
        let id = self.state.get_mut().write(begin_op(0, meta))?;
        id.ok_or_else(|| StoreError::Backend("begin_episode returned no id".into()))
    }

    fn append(&mut self, episode: EpisodeId, transitions: &[Transition]) -> Result<(), StoreError> {
        let transitions = transitions.iter().map(ExactTransition::from).collect();
        self.state.get_mut().write(Op::Append { id: episode, transitions }).map(|_| ())
    }

    fn close_episode(&mut self, episode: EpisodeId, total_reward: f64) -> Result<(), StoreError> {
        self.state.get_mut().write(Op::Close { id: episode, total_reward_bits: total_reward.to_bits() }).map(|_| ())
    }

    fn last_rewards(&self, agent: &str, n: usize) -> Result<Vec<f64>, StoreError> {
        self.read(|s| s.last_rewards(agent, n))
    }

    fn top_episodes(&self, app: &str, m: usize, mode: TopMode) -> Result<Vec<EpisodeRecord>, StoreError> {
        self.read(|s| s.top_episodes(app, m, mode))
    }

    fn sample(&self, filter: &TransitionFilter, n: usize, seed: u64) -> Result<Vec<Transition>, StoreError> {
        self.read(|s| s.sample(filter, n, seed))
    }

    /// A provisional id reads the backend's episode once flushed (`Unavailable` while its begin
    /// still waits in the spool; `UnknownEpisode` for one this spool never began).
    fn episode(&self, id: EpisodeId) -> Result<(EpisodeRecord, Vec<Transition>), StoreError> {
        let mut state = self.state.borrow_mut();
        if state.pending() > 0 {
            let _ = state.flush();
        }
        let real = state.resolve(id)?;
        state.inner.episode(real)
    }

    fn episodes(&self, agent: Option<&str>) -> Result<Vec<EpisodeRecord>, StoreError> {
        self.read(|s| s.episodes(agent))
    }

    fn retain(&mut self, cutoff_s: f64) -> Result<u64, StoreError> {
        let state = self.state.get_mut();
        if state.pending() > 0 {
            state.flush()?;
        }
        state.inner.retain(cutoff_s)
    }

    fn stats(&self) -> Result<StoreStats, StoreError> {
        self.read(|s| s.stats())
    }

    fn record_decisions(&mut self, decisions: &[DecisionRecord]) -> Result<(), StoreError> {
        self.state.get_mut().write(Op::Decisions { decisions: decisions.to_vec() }).map(|_| ())
    }

    fn decisions(&self, app: &str, query: DecisionQuery) -> Result<Vec<DecisionRecord>, StoreError> {
        self.read(|s| s.decisions(app, query))
    }

    fn record_stage_change(&mut self, change: &StageRecord) -> Result<(), StoreError> {
        self.state.get_mut().write(Op::StageChange { change: change.clone() }).map(|_| ())
    }

    fn stage_changes(&self, app: Option<&str>) -> Result<Vec<StageRecord>, StoreError> {
        self.read(|s| s.stage_changes(app))
    }
}
