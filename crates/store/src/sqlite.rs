//! The embedded default: one SQLite file, WAL, one writer, prepared statements, and one
//! transaction per episode close (the close's `COMMIT` is the acknowledgement).

use std::collections::HashMap;
use std::path::{Path, PathBuf};

use rusqlite::{Connection, OpenFlags, OptionalExtension, ToSql, params};

use crate::TrajectoryStore;
use crate::model::{
    DecisionQuery, DecisionRecord, EpisodeId, EpisodeMeta, EpisodeRecord, StageRecord, StoreError, StoreStats, TopMode,
    Transition, TransitionFilter, check_appended, decode, encode, pick_steps,
};

/// The schema this build writes and the newest it reads.
pub const SCHEMA_VERSION: i64 = 2;

const SCHEMA: &str = "
CREATE TABLE episodes (
    id           INTEGER PRIMARY KEY,
    agent        TEXT    NOT NULL,
    app          TEXT    NOT NULL,
    episode      INTEGER NOT NULL,
    stage        TEXT    NOT NULL,
    policy       TEXT    NOT NULL,
    state_dim    INTEGER NOT NULL,
    action_dim   INTEGER NOT NULL,
    started_at   REAL    NOT NULL,
    closed_at    REAL,
    total_reward REAL,
    length       INTEGER NOT NULL DEFAULT 0,
    UNIQUE (agent, episode)
);
CREATE INDEX episodes_agent_closed ON episodes (agent, episode) WHERE closed_at IS NOT NULL;
CREATE INDEX episodes_app_reward ON episodes (app, total_reward) WHERE closed_at IS NOT NULL;
CREATE INDEX episodes_started ON episodes (started_at);
CREATE TABLE transitions (
    episode_id INTEGER NOT NULL REFERENCES episodes (id) ON DELETE CASCADE,
    step       INTEGER NOT NULL,
    state      BLOB    NOT NULL,
    action     BLOB    NOT NULL,
    reward     REAL    NOT NULL,
    next_state BLOB    NOT NULL,
    done       INTEGER NOT NULL,
    PRIMARY KEY (episode_id, step)
) WITHOUT ROWID;
";

/// Version 2: the lifecycle manager's decision log and stage changes.
const SCHEMA_V2: &str = "
CREATE TABLE decisions (
    id            INTEGER PRIMARY KEY,
    agent         TEXT    NOT NULL,
    app           TEXT    NOT NULL,
    step          INTEGER NOT NULL,
    stage         TEXT    NOT NULL,
    acting_policy TEXT    NOT NULL,
    guard         TEXT    NOT NULL,
    detail        TEXT    NOT NULL
);
CREATE INDEX decisions_app_step ON decisions (app, step);
CREATE TABLE stage_changes (
    id         INTEGER PRIMARY KEY,
    agent      TEXT    NOT NULL,
    app        TEXT    NOT NULL,
    step       INTEGER NOT NULL,
    from_stage TEXT    NOT NULL,
    to_stage   TEXT    NOT NULL,
    reason     TEXT    NOT NULL
);
";

/// How hard a close is pushed to disk.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Sync {
    /// WAL with `synchronous=NORMAL`: an acknowledged close survives a crash of the process;
    /// a power loss may lose the last closes but never corrupts the file.
    #[default]
    Normal,
    /// `synchronous=FULL`: acknowledged closes also survive a power loss (an fsync per close).
    Full,
}

struct OpenEpisode {
    state_dim: u32,
    action_dim: u32,
    length: u32,
}

pub struct SqliteStore {
    conn: Connection,
    path: String,
    in_transaction: bool,
    /// False for a version-1 store opened read-only (it has no decisions to show).
    lifecycle_tables: bool,
    open: HashMap<EpisodeId, OpenEpisode>,
    /// A read-only store whose directory held no `-wal`/`-shm` beside it when it was opened:
    /// the file, so that closing it can leave the directory as it was found.
    tidy: Option<PathBuf>,
}

fn backend(path: &str) -> impl Fn(rusqlite::Error) -> StoreError + '_ {
    move |e| match &e {
        rusqlite::Error::SqliteFailure(f, msg) => match f.code {
            rusqlite::ErrorCode::ReadOnly => {
                StoreError::ReadOnly { path: path.into(), reason: msg.clone().unwrap_or_else(|| e.to_string()) }
            }
            rusqlite::ErrorCode::NotADatabase => {
                StoreError::Corrupt { path: path.into(), reason: "not an SQLite database".into() }
            }
            rusqlite::ErrorCode::DatabaseCorrupt => StoreError::Corrupt { path: path.into(), reason: e.to_string() },
            // Another writer held the lock past the busy timeout, or the file cannot be opened
            // (its directory is gone or unreachable): the same call may work later.
            rusqlite::ErrorCode::DatabaseBusy
            | rusqlite::ErrorCode::DatabaseLocked
            | rusqlite::ErrorCode::CannotOpen => StoreError::Unavailable(format!("{path}: {e}")),
            _ => StoreError::Backend(format!("{path}: {e}")),
        },
        _ => StoreError::Backend(format!("{path}: {e}")),
    }
}

/// A device, FIFO or socket is no store file: SQLite would fail on it with a bare I/O error,
/// and leave its journal (`/dev/null-journal`) beside it.
fn refuse_special_file(path: &Path) -> Result<(), StoreError> {
    match std::fs::metadata(path) {
        Ok(meta) if !meta.is_file() && !meta.is_dir() => Err(StoreError::Invalid(format!(
            "{}: not a regular file (a store is a SQLite database file)",
            path.display()
        ))),
        _ => Ok(()),
    }
}

impl SqliteStore {
    /// Opens (creating if needed) a store for writing. A newer schema, a read-only file or a
    /// file that is not an `aware` store is refused before anything is written.
    pub fn open(path: &Path, sync: Sync) -> Result<Self, StoreError> {
        let p = path.display().to_string();
        refuse_special_file(path)?;
        if let Ok(meta) = std::fs::metadata(path)
            && meta.permissions().readonly()
        {
            return Err(StoreError::ReadOnly { path: p, reason: "the file is not writable".into() });
        }
        let flags = OpenFlags::SQLITE_OPEN_READ_WRITE | OpenFlags::SQLITE_OPEN_CREATE | OpenFlags::SQLITE_OPEN_NO_MUTEX;
        let conn = Connection::open_with_flags(path, flags).map_err(backend(&p))?;
        let store = Self::check_schema(conn, p, true)?;
        let sync = match sync {
            Sync::Normal => "NORMAL",
            Sync::Full => "FULL",
        };
        let mode: String =
            store.conn.query_row("PRAGMA journal_mode=WAL", [], |r| r.get(0)).map_err(backend(&store.path))?;
        if !mode.eq_ignore_ascii_case("wal") {
            return Err(StoreError::Backend(format!("{}: could not enable WAL (journal mode {mode})", store.path)));
        }
        store
            .conn
            .execute_batch(&format!("PRAGMA synchronous={sync}; PRAGMA foreign_keys=ON; PRAGMA busy_timeout=5000;"))
            .map_err(backend(&store.path))?;
        Ok(store)
    }

    /// Opens an existing store for reading only (operators inspecting a store they may not
    /// write).
    pub fn open_read_only(path: &Path) -> Result<Self, StoreError> {
        let p = path.display().to_string();
        if !path.exists() {
            return Err(StoreError::Invalid(format!("{p}: no such store")));
        }
        refuse_special_file(path)?;
        // A reader of a WAL store makes its `-wal` and `-shm` files and, being read-only, cannot
        // remove them when it closes; noted here so that [`Drop`] can.
        let untouched = !journal_path(path, "-wal").exists() && !journal_path(path, "-shm").exists();
        let conn =
            Connection::open_with_flags(path, OpenFlags::SQLITE_OPEN_READ_ONLY | OpenFlags::SQLITE_OPEN_NO_MUTEX)
                .map_err(backend(&p))?;
        match Self::check_schema(conn, p, false) {
            Ok(mut store) => {
                store.tidy = untouched.then(|| path.to_path_buf());
                Ok(store)
            }
            Err(e) => {
                // The refused connection is closed by now: tidy as `Drop` would.
                if untouched {
                    remove_journal_files(path);
                }
                Err(e)
            }
        }
    }

    fn check_schema(conn: Connection, path: String, create: bool) -> Result<Self, StoreError> {
        let version: i64 = conn.query_row("PRAGMA user_version", [], |r| r.get(0)).map_err(backend(&path))?;
        if version > SCHEMA_VERSION {
            return Err(StoreError::NewerSchema { path, found: version, supported: SCHEMA_VERSION });
        }
        if version < 0 {
            return Err(StoreError::Corrupt { path, reason: format!("not an aware store (schema version {version})") });
        }
        if version > 0 {
            Self::check_tables(&conn, &path, version)?;
            Self::check_pages(&conn, &path)?;
        }
        if version == 0 {
            let tables: i64 =
                conn.query_row("SELECT count(*) FROM sqlite_master", [], |r| r.get(0)).map_err(backend(&path))?;
            if tables > 0 {
                return Err(StoreError::Corrupt {
                    path,
                    reason: "not an aware store (tables without a schema version)".into(),
                });
            }
            if !create {
                return Err(StoreError::Invalid(format!("{path}: empty store")));
            }
            conn.execute_batch(&format!("BEGIN; {SCHEMA} {SCHEMA_V2} PRAGMA user_version = {SCHEMA_VERSION}; COMMIT;"))
                .map_err(backend(&path))?;
        } else if version < 2 && create {
            // Migration in place: the trajectories stay, the lifecycle tables are added.
            conn.execute_batch(&format!("BEGIN IMMEDIATE; {SCHEMA_V2} PRAGMA user_version = 2; COMMIT;"))
                .map_err(backend(&path))?;
        }
        let lifecycle_tables = version == 0 || version >= 2 || create;
        Ok(Self { conn, path, in_transaction: false, open: HashMap::new(), lifecycle_tables, tidy: None })
    }

    /// Refuses a store whose pages SQLite finds damaged (`PRAGMA quick_check`: every page's
    /// structure, without matching indexes against their tables; about a second a GB), before
    /// anything reads it or writes into it: a damaged page can hide rows from a query with no
    /// error, and writing into it spreads the damage.
    fn check_pages(conn: &Connection, path: &str) -> Result<(), StoreError> {
        let problems: Vec<String> = {
            let mut stmt = conn.prepare("PRAGMA quick_check").map_err(backend(path))?;
            stmt.query_map([], |r| r.get::<_, String>(0))
                .and_then(|rows| rows.collect::<Result<Vec<_>, _>>())
                .map_err(backend(path))?
        };
        match problems.as_slice() {
            [ok] if ok == "ok" => Ok(()),
            [] => Ok(()),
            [first, rest @ ..] => Err(StoreError::Corrupt {
                path: path.to_string(),
                reason: format!(
                    "the database is damaged (SQLite's quick_check: {first}{}); restore it from a copy, or move it aside and start a new store",
                    if rest.is_empty() { String::new() } else { format!(", and {} more", rest.len()) }
                ),
            }),
        }
    }

    /// Refuses a database whose schema version claims an `aware` store but whose tables are
    /// not this version's (another program's database with a `user_version` of its own): each
    /// table the version defines must be there with its columns. Checked before a migration
    /// writes anything.
    fn check_tables(conn: &Connection, path: &str, version: i64) -> Result<(), StoreError> {
        let columns = |c: &Connection, table: &str| -> Result<Vec<String>, rusqlite::Error> {
            let mut stmt = c.prepare("SELECT name FROM pragma_table_info(?1)")?;
            let names = stmt.query_map([table], |r| r.get::<_, String>(0))?.collect::<Result<Vec<_>, _>>()?;
            Ok(names)
        };
        let reference = Connection::open_in_memory().map_err(backend(path))?;
        let schema = if version >= 2 { format!("{SCHEMA} {SCHEMA_V2}") } else { SCHEMA.to_string() };
        reference.execute_batch(&schema).map_err(backend(path))?;
        let tables: Vec<String> = {
            let mut stmt = reference
                .prepare("SELECT name FROM sqlite_master WHERE type = 'table' ORDER BY name")
                .map_err(backend(path))?;
            stmt.query_map([], |r| r.get::<_, String>(0))
                .and_then(|rows| rows.collect::<Result<Vec<_>, _>>())
                .map_err(backend(path))?
        };
        for table in &tables {
            let found = columns(conn, table).map_err(backend(path))?;
            let not_ours = |reason: String| StoreError::Corrupt {
                path: path.to_string(),
                reason: format!("not an aware store (schema version {version}, but {reason})"),
            };
            if found.is_empty() {
                return Err(not_ours(format!("no table {table}")));
            }
            if let Some(missing) =
                columns(&reference, table).map_err(backend(path))?.into_iter().find(|c| !found.contains(c))
            {
                return Err(not_ours(format!("table {table} has no column {missing}")));
            }
        }
        Ok(())
    }

    /// How long a write waits for another writer's lock before answering
    /// [`StoreError::Unavailable`] (5 s unless set).
    pub fn set_busy_timeout(&mut self, timeout: std::time::Duration) -> Result<(), StoreError> {
        self.conn.busy_timeout(timeout).map_err(backend(&self.path))
    }

    pub fn path(&self) -> &str {
        &self.path
    }

    /// `PRAGMA integrity_check`: "ok" or the problems SQLite found.
    pub fn integrity_check(&self) -> Result<String, StoreError> {
        self.conn.query_row("PRAGMA integrity_check", [], |r| r.get(0)).map_err(backend(&self.path))
    }

    fn begin(&mut self) -> Result<(), StoreError> {
        if !self.in_transaction {
            self.conn.execute_batch("BEGIN IMMEDIATE").map_err(backend(&self.path))?;
            self.in_transaction = true;
        }
        Ok(())
    }

    fn commit(&mut self) -> Result<(), StoreError> {
        if self.in_transaction {
            self.conn.execute_batch("COMMIT").map_err(backend(&self.path))?;
            self.in_transaction = false;
        }
        Ok(())
    }

    fn record(row: &rusqlite::Row) -> rusqlite::Result<EpisodeRecord> {
        Ok(EpisodeRecord {
            id: row.get(0)?,
            meta: EpisodeMeta {
                agent: row.get(1)?,
                app: row.get(2)?,
                episode: row.get::<_, i64>(3)? as u64,
                stage: row.get(4)?,
                policy: row.get(5)?,
                state_dim: row.get(6)?,
                action_dim: row.get(7)?,
                started_at_s: row.get(8)?,
            },
            closed_at_s: row.get(9)?,
            total_reward: row.get(10)?,
            length: row.get(11)?,
        })
    }

    const COLUMNS: &'static str =
        "id, agent, app, episode, stage, policy, state_dim, action_dim, started_at, closed_at, total_reward, length";

    fn transition(&self, rec: &EpisodeRecord, row: &rusqlite::Row) -> Result<Transition, StoreError> {
        let get = |e: rusqlite::Error| backend(&self.path)(e);
        let step: u32 = row.get(0).map_err(get)?;
        let blob = |i: usize| -> Result<Vec<u8>, StoreError> { row.get(i).map_err(backend(&self.path)) };
        let corrupt = |reason: String| StoreError::Corrupt {
            path: self.path.clone(),
            reason: format!("episode {} step {step}: {reason}", rec.id),
        };
        Ok(Transition {
            step,
            state: decode(&blob(1)?, rec.meta.state_dim, "state").map_err(|e| corrupt(e.to_string()))?,
            action: decode(&blob(2)?, rec.meta.action_dim, "action").map_err(|e| corrupt(e.to_string()))?,
            reward: row.get::<_, f64>(3).map_err(get)? as f32,
            next_state: decode(&blob(4)?, rec.meta.state_dim, "next_state").map_err(|e| corrupt(e.to_string()))?,
            done: row.get(5).map_err(get)?,
        })
    }

    fn load_record(&self, id: EpisodeId) -> Result<EpisodeRecord, StoreError> {
        let sql = format!("SELECT {} FROM episodes WHERE id = ?1", Self::COLUMNS);
        let mut stmt = self.conn.prepare_cached(&sql).map_err(backend(&self.path))?;
        stmt.query_row([id], Self::record)
            .optional()
            .map_err(backend(&self.path))?
            .ok_or(StoreError::UnknownEpisode(id))
    }
}

/// `path` with `suffix` appended to its file name (`-wal`, `-shm`).
fn journal_path(path: &Path, suffix: &str) -> PathBuf {
    let mut name = path.as_os_str().to_os_string();
    name.push(suffix);
    PathBuf::from(name)
}

/// Removes the `-wal` and `-shm` files a read-only connection to `path` left behind, the way
/// SQLite itself does: the last read-write connection to close checkpoints the journal and
/// deletes both. SQLite decides under its own locks, so while any other connection (a writer in
/// another process) has the store open nothing is checkpointed or deleted, and nothing is lost.
/// Best effort: a file this process may not write keeps its journal files.
fn remove_journal_files(path: &Path) {
    if !journal_path(path, "-wal").exists() && !journal_path(path, "-shm").exists() {
        return;
    }
    let flags = OpenFlags::SQLITE_OPEN_READ_WRITE | OpenFlags::SQLITE_OPEN_NO_MUTEX;
    if let Ok(conn) = Connection::open_with_flags(path, flags) {
        // A read opens the journal, so that closing the connection closes it as its last user.
        let _ = conn.query_row("PRAGMA user_version", [], |r| r.get::<_, i64>(0));
        let _ = conn.close();
    }
}

impl Drop for SqliteStore {
    /// Commits what was written: unclosed episodes stay visible as incomplete, never as data.
    /// A read-only store opened where no journal files were leaves none behind.
    fn drop(&mut self) {
        let _ = self.commit();
        if let Some(path) = self.tidy.take() {
            // Close this connection first (SQLite removes the files only with no reader left).
            if let Ok(memory) = Connection::open_in_memory() {
                let _ = std::mem::replace(&mut self.conn, memory).close();
                remove_journal_files(&path);
            }
        }
    }
}

impl TrajectoryStore for SqliteStore {
    fn begin_episode(&mut self, meta: &EpisodeMeta) -> Result<EpisodeId, StoreError> {
        if meta.state_dim == 0 {
            return Err(StoreError::Invalid("episode: state_dim must be positive".into()));
        }
        if !meta.started_at_s.is_finite() {
            return Err(StoreError::Invalid("episode: started_at_s must be finite".into()));
        }
        self.begin()?;
        let mut stmt = self
            .conn
            .prepare_cached(
                "INSERT INTO episodes (agent, app, episode, stage, policy, state_dim, action_dim, started_at)
                 VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8)",
            )
            .map_err(backend(&self.path))?;
        let inserted = stmt.execute(params![
            meta.agent,
            meta.app,
            meta.episode as i64,
            meta.stage,
            meta.policy,
            meta.state_dim,
            meta.action_dim,
            meta.started_at_s
        ]);
        match inserted {
            Err(rusqlite::Error::SqliteFailure(f, _)) if f.code == rusqlite::ErrorCode::ConstraintViolation => {
                return Err(StoreError::Invalid(format!(
                    "agent {:?} already has an episode {}",
                    meta.agent, meta.episode
                )));
            }
            other => other.map_err(backend(&self.path))?,
        };
        let id = self.conn.last_insert_rowid();
        self.open.insert(id, OpenEpisode { state_dim: meta.state_dim, action_dim: meta.action_dim, length: 0 });
        Ok(id)
    }

    fn append(&mut self, episode: EpisodeId, transitions: &[Transition]) -> Result<(), StoreError> {
        let Some(open) = self.open.get(&episode) else {
            return Err(match self.load_record(episode) {
                Ok(r) if r.is_complete() => StoreError::Invalid(format!("episode {episode} is closed")),
                Ok(_) => StoreError::Invalid(format!("episode {episode} was begun by another writer")),
                Err(e) => e,
            });
        };
        let length = check_appended(episode, transitions, open.state_dim, open.action_dim, open.length)?;
        self.begin()?;
        let mut stmt = self
            .conn
            .prepare_cached(
                "INSERT INTO transitions (episode_id, step, state, action, reward, next_state, done)
                 VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7)",
            )
            .map_err(backend(&self.path))?;
        for t in transitions {
            let (s, a, n) = (encode(&t.state), encode(&t.action), encode(&t.next_state));
            let args: [&dyn ToSql; 7] = [&episode, &t.step, &s, &a, &(t.reward as f64), &n, &t.done];
            stmt.execute(&args[..]).map_err(backend(&self.path))?;
        }
        drop(stmt);
        if let Some(open) = self.open.get_mut(&episode) {
            open.length = length;
        }
        Ok(())
    }

    fn close_episode(&mut self, episode: EpisodeId, total_reward: f64) -> Result<(), StoreError> {
        if !total_reward.is_finite() {
            return Err(StoreError::Invalid(format!("episode {episode}: total reward {total_reward} is not finite")));
        }
        let Some(length) = self.open.get(&episode).map(|o| o.length) else {
            return Err(StoreError::Invalid(format!("episode {episode} is not open in this store")));
        };
        self.begin()?;
        let now = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map_or(0.0, |d| d.as_secs_f64());
        let mut stmt = self
            .conn
            .prepare_cached("UPDATE episodes SET closed_at = ?1, total_reward = ?2, length = ?3 WHERE id = ?4")
            .map_err(backend(&self.path))?;
        stmt.execute(params![now, total_reward, length, episode]).map_err(backend(&self.path))?;
        drop(stmt);
        // Open until the commit is confirmed: a close that failed (busy) can be repeated.
        self.commit()?;
        self.open.remove(&episode);
        Ok(())
    }

    fn last_rewards(&self, agent: &str, n: usize) -> Result<Vec<f64>, StoreError> {
        let mut stmt = self
            .conn
            .prepare_cached(
                "SELECT total_reward FROM episodes WHERE agent = ?1 AND closed_at IS NOT NULL ORDER BY episode DESC LIMIT ?2",
            )
            .map_err(backend(&self.path))?;
        let rows = stmt.query_map(params![agent, n as i64], |r| r.get(0)).map_err(backend(&self.path))?;
        rows.collect::<Result<_, _>>().map_err(backend(&self.path))
    }

    fn top_episodes(&self, app: &str, m: usize, mode: TopMode) -> Result<Vec<EpisodeRecord>, StoreError> {
        let query = |order: &str, limit: usize| -> Result<Vec<EpisodeRecord>, StoreError> {
            let sql = format!(
                "SELECT {} FROM episodes WHERE app = ?1 AND closed_at IS NOT NULL ORDER BY total_reward {order}, id LIMIT ?2",
                Self::COLUMNS
            );
            let mut stmt = self.conn.prepare_cached(&sql).map_err(backend(&self.path))?;
            let rows = stmt.query_map(params![app, limit as i64], Self::record).map_err(backend(&self.path))?;
            rows.collect::<Result<_, _>>().map_err(backend(&self.path))
        };
        let (best, worst) = mode.split(m);
        let worst = if worst > 0 { query("ASC", worst)? } else { Vec::new() };
        Ok(crate::model::best_then_worst(query("DESC", best)?, worst))
    }

    fn sample(&self, filter: &TransitionFilter, n: usize, seed: u64) -> Result<Vec<Transition>, StoreError> {
        let mut stmt = self
            .conn
            .prepare_cached(&format!(
                "SELECT {} FROM episodes WHERE closed_at IS NOT NULL AND length > 0
                   AND (?1 IS NULL OR agent = ?1) AND (?2 IS NULL OR app = ?2) AND (?3 IS NULL OR policy = ?3)
                 ORDER BY id",
                Self::COLUMNS
            ))
            .map_err(backend(&self.path))?;
        let episodes: Vec<EpisodeRecord> = stmt
            .query_map(params![filter.agent, filter.app, filter.policy], Self::record)
            .map_err(backend(&self.path))?
            .collect::<Result<_, _>>()
            .map_err(backend(&self.path))?;
        let picks = pick_steps(&episodes, n, seed);
        if picks.is_empty() {
            return Ok(Vec::new());
        }
        let mut get = self
            .conn
            .prepare_cached(
                "SELECT step, state, action, reward, next_state, done FROM transitions WHERE episode_id = ?1 AND step = ?2",
            )
            .map_err(backend(&self.path))?;
        let mut out = Vec::with_capacity(n);
        for (i, step) in picks {
            let rec = &episodes[i];
            let t = get
                .query_row(params![rec.id, step as i64], |row| Ok(self.transition(rec, row)))
                .optional()
                .map_err(backend(&self.path))?
                .ok_or_else(|| StoreError::Corrupt {
                    path: self.path.clone(),
                    reason: format!("episode {} is missing step {step} of {}", rec.id, rec.length),
                })??;
            out.push(t);
        }
        Ok(out)
    }

    fn episode(&self, id: EpisodeId) -> Result<(EpisodeRecord, Vec<Transition>), StoreError> {
        let rec = self.load_record(id)?;
        let mut stmt = self
            .conn
            .prepare_cached(
                "SELECT step, state, action, reward, next_state, done FROM transitions WHERE episode_id = ?1 ORDER BY step",
            )
            .map_err(backend(&self.path))?;
        let mut rows = stmt.query([id]).map_err(backend(&self.path))?;
        let mut out = Vec::new();
        while let Some(row) = rows.next().map_err(backend(&self.path))? {
            out.push(self.transition(&rec, row)?);
        }
        Ok((rec, out))
    }

    fn episodes(&self, agent: Option<&str>) -> Result<Vec<EpisodeRecord>, StoreError> {
        let sql = format!("SELECT {} FROM episodes WHERE (?1 IS NULL OR agent = ?1) ORDER BY id", Self::COLUMNS);
        let mut stmt = self.conn.prepare_cached(&sql).map_err(backend(&self.path))?;
        let rows = stmt.query_map([agent], Self::record).map_err(backend(&self.path))?;
        rows.collect::<Result<_, _>>().map_err(backend(&self.path))
    }

    fn retain(&mut self, cutoff_s: f64) -> Result<u64, StoreError> {
        self.begin()?;
        let open: Vec<EpisodeId> = self.open.keys().copied().collect();
        let mut deleted = 0;
        let ids: Vec<EpisodeId> = {
            let mut stmt = self
                .conn
                .prepare_cached("SELECT id FROM episodes WHERE started_at < ?1")
                .map_err(backend(&self.path))?;
            stmt.query_map([cutoff_s], |r| r.get(0))
                .map_err(backend(&self.path))?
                .collect::<Result<_, _>>()
                .map_err(backend(&self.path))?
        };
        for id in ids.into_iter().filter(|id| !open.contains(id)) {
            self.conn.execute("DELETE FROM transitions WHERE episode_id = ?1", [id]).map_err(backend(&self.path))?;
            deleted +=
                self.conn.execute("DELETE FROM episodes WHERE id = ?1", [id]).map_err(backend(&self.path))? as u64;
        }
        self.commit()?;
        Ok(deleted)
    }

    fn record_decisions(&mut self, decisions: &[DecisionRecord]) -> Result<(), StoreError> {
        for d in decisions {
            d.check()?;
        }
        self.begin()?;
        // A savepoint keeps the call all-or-none inside a transaction an open episode shares.
        self.conn.execute_batch("SAVEPOINT decisions").map_err(backend(&self.path))?;
        let inserted = (|| -> Result<(), StoreError> {
            let mut stmt = self
                .conn
                .prepare_cached(
                    "INSERT INTO decisions (agent, app, step, stage, acting_policy, guard, detail)
                     VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7)",
                )
                .map_err(backend(&self.path))?;
            for d in decisions {
                stmt.execute(rusqlite::params![
                    d.agent,
                    d.app,
                    d.step as i64,
                    d.stage,
                    d.acting_policy,
                    d.guard,
                    d.detail.to_string()
                ])
                .map_err(backend(&self.path))?;
            }
            Ok(())
        })();
        let end = if inserted.is_ok() { "RELEASE decisions" } else { "ROLLBACK TO decisions; RELEASE decisions" };
        self.conn.execute_batch(end).map_err(backend(&self.path))?;
        inserted?;
        self.commit()
    }

    fn decisions(&self, app: &str, query: DecisionQuery) -> Result<Vec<DecisionRecord>, StoreError> {
        if !self.lifecycle_tables {
            return Ok(Vec::new());
        }
        const COLS: &str = "agent, app, step, stage, acting_policy, guard, detail, id";
        let (sql, arg) = match query {
            DecisionQuery::Step(n) => {
                (format!("SELECT {COLS} FROM decisions WHERE app = ?1 AND step = ?2 ORDER BY id"), n as i64)
            }
            DecisionQuery::Last(k) => (
                format!(
                    "SELECT * FROM (SELECT {COLS} FROM decisions WHERE app = ?1 ORDER BY id DESC LIMIT ?2) ORDER BY step, id"
                ),
                k.min(i64::MAX as usize) as i64,
            ),
        };
        let mut stmt = self.conn.prepare_cached(&sql).map_err(backend(&self.path))?;
        let rows = stmt
            .query_map(rusqlite::params![app, arg], |r| {
                Ok((
                    r.get::<_, String>(0)?,
                    r.get::<_, String>(1)?,
                    r.get::<_, i64>(2)?,
                    r.get::<_, String>(3)?,
                    r.get::<_, String>(4)?,
                    r.get::<_, String>(5)?,
                    r.get::<_, String>(6)?,
                ))
            })
            .map_err(backend(&self.path))?;
        let mut out = Vec::new();
        for row in rows {
            let (agent, app, step, stage, acting_policy, guard, detail) = row.map_err(backend(&self.path))?;
            let detail = serde_json::from_str(&detail).map_err(|e| StoreError::Corrupt {
                path: self.path.clone(),
                reason: format!("decision of {app} at step {step}: detail is not JSON ({e})"),
            })?;
            out.push(DecisionRecord { agent, app, step: step as u64, stage, acting_policy, guard, detail });
        }
        Ok(out)
    }

    fn record_stage_change(&mut self, c: &StageRecord) -> Result<(), StoreError> {
        c.check()?;
        self.begin()?;
        self.conn
            .execute(
                "INSERT INTO stage_changes (agent, app, step, from_stage, to_stage, reason) VALUES (?1, ?2, ?3, ?4, ?5, ?6)",
                rusqlite::params![c.agent, c.app, c.step as i64, c.from, c.to, c.reason],
            )
            .map_err(backend(&self.path))?;
        self.commit()
    }

    fn stage_changes(&self, app: Option<&str>) -> Result<Vec<StageRecord>, StoreError> {
        if !self.lifecycle_tables {
            return Ok(Vec::new());
        }
        let mut stmt = self
            .conn
            .prepare_cached(
                "SELECT agent, app, step, from_stage, to_stage, reason FROM stage_changes
                 WHERE ?1 IS NULL OR app = ?1 ORDER BY id",
            )
            .map_err(backend(&self.path))?;
        let rows = stmt
            .query_map([app], |r| {
                Ok(StageRecord {
                    agent: r.get(0)?,
                    app: r.get(1)?,
                    step: r.get::<_, i64>(2)? as u64,
                    from: r.get(3)?,
                    to: r.get(4)?,
                    reason: r.get(5)?,
                })
            })
            .map_err(backend(&self.path))?;
        rows.collect::<Result<Vec<_>, _>>().map_err(backend(&self.path))
    }

    fn stats(&self) -> Result<StoreStats, StoreError> {
        let one = |sql: &str| -> Result<i64, StoreError> {
            self.conn.query_row(sql, [], |r| r.get(0)).map_err(backend(&self.path))
        };
        let mut stmt = self
            .conn
            .prepare_cached("SELECT DISTINCT agent FROM episodes ORDER BY agent")
            .map_err(backend(&self.path))?;
        let agents = stmt
            .query_map([], |r| r.get(0))
            .map_err(backend(&self.path))?
            .collect::<Result<_, _>>()
            .map_err(backend(&self.path))?;
        Ok(StoreStats {
            episodes: one("SELECT count(*) FROM episodes")? as u64,
            incomplete_episodes: one("SELECT count(*) FROM episodes WHERE closed_at IS NULL")? as u64,
            transitions: one("SELECT count(*) FROM transitions")? as u64,
            agents,
            apps: one("SELECT count(DISTINCT app) FROM episodes")? as u64,
            decisions: if self.lifecycle_tables { one("SELECT count(*) FROM decisions")? as u64 } else { 0 },
            stage_changes: if self.lifecycle_tables { one("SELECT count(*) FROM stage_changes")? as u64 } else { 0 },
        })
    }
}
