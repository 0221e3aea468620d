//! PostgreSQL backend, for several controllers sharing one store. The schema is created (or
//! migrated) on first connect; a newer schema is refused. Writes mirror the SQLite backend: one
//! transaction per episode close, which is the acknowledgement.
//!
//! A dropped connection answers [`StoreError::Unavailable`], and the next call reconnects
//! (once; still `Unavailable` if the server is not back). What the lost transaction held — the
//! open episodes' rows and transitions since the last commit — is kept in memory and written
//! again on reconnect, so episode ids stay valid across an outage. A call that failed before
//! its `COMMIT` was sent is retried once on a fresh connection; one whose `COMMIT` got no
//! answer is not (it may have committed), and repeating it is at-least-once: the replay and an
//! episode close are idempotent, a repeated `record_decisions` may record a batch twice.

use std::cell::{Cell, RefCell, RefMut};
use std::collections::HashMap;

use postgres::{Client, NoTls, Row};

use crate::TrajectoryStore;
use crate::model::{
    DecisionQuery, DecisionRecord, EpisodeId, EpisodeMeta, EpisodeRecord, StageRecord, StoreError, StoreStats, TopMode,
    Transition, TransitionFilter, check_appended, decode, encode, pick_steps,
};
use crate::sqlite::SCHEMA_VERSION;

const SCHEMA: &str = "
CREATE TABLE IF NOT EXISTS aware_schema (version INTEGER NOT NULL);
CREATE TABLE IF NOT EXISTS aware_episodes (
    id           BIGSERIAL PRIMARY KEY,
    agent        TEXT    NOT NULL,
    app          TEXT    NOT NULL,
    episode      BIGINT  NOT NULL,
    stage        TEXT    NOT NULL,
    policy       TEXT    NOT NULL,
    state_dim    INTEGER NOT NULL,
    action_dim   INTEGER NOT NULL,
    started_at   DOUBLE PRECISION NOT NULL,
    closed_at    DOUBLE PRECISION,
    total_reward DOUBLE PRECISION,
    length       INTEGER NOT NULL DEFAULT 0,
    UNIQUE (agent, episode)
);
CREATE INDEX IF NOT EXISTS aware_episodes_agent_closed ON aware_episodes (agent, episode) WHERE closed_at IS NOT NULL;
CREATE INDEX IF NOT EXISTS aware_episodes_app_reward ON aware_episodes (app, total_reward) WHERE closed_at IS NOT NULL;
CREATE INDEX IF NOT EXISTS aware_episodes_started ON aware_episodes (started_at);
CREATE TABLE IF NOT EXISTS aware_transitions (
    episode_id BIGINT  NOT NULL REFERENCES aware_episodes (id) ON DELETE CASCADE,
    step       INTEGER NOT NULL,
    state      BYTEA   NOT NULL,
    action     BYTEA   NOT NULL,
    reward     DOUBLE PRECISION NOT NULL,
    next_state BYTEA   NOT NULL,
    done       BOOLEAN NOT NULL,
    PRIMARY KEY (episode_id, step)
);
CREATE TABLE IF NOT EXISTS aware_decisions (
    id            BIGSERIAL PRIMARY KEY,
    agent         TEXT   NOT NULL,
    app           TEXT   NOT NULL,
    step          BIGINT NOT NULL,
    stage         TEXT   NOT NULL,
    acting_policy TEXT   NOT NULL,
    guard         TEXT   NOT NULL,
    detail        TEXT   NOT NULL
);
CREATE INDEX IF NOT EXISTS aware_decisions_app_step ON aware_decisions (app, step);
CREATE TABLE IF NOT EXISTS aware_stage_changes (
    id         BIGSERIAL PRIMARY KEY,
    agent      TEXT   NOT NULL,
    app        TEXT   NOT NULL,
    step       BIGINT NOT NULL,
    from_stage TEXT   NOT NULL,
    to_stage   TEXT   NOT NULL,
    reason     TEXT   NOT NULL
);
";

const COLUMNS: &str =
    "id, agent, app, episode, stage, policy, state_dim, action_dim, started_at, closed_at, total_reward, length";

struct OpenEpisode {
    state_dim: u32,
    action_dim: u32,
    length: u32,
}

/// A write since the last commit, kept to replay on a new connection.
enum Uncommitted {
    Begin(EpisodeId, EpisodeMeta),
    Append(EpisodeId, Vec<Transition>),
}

pub struct PostgresStore {
    /// `None` after a connection was lost and not yet re-established.
    client: RefCell<Option<Client>>,
    /// The URL to reconnect with (may hold a password: never shown).
    connect_url: String,
    /// The URL as shown in messages.
    url: String,
    in_transaction: Cell<bool>,
    uncommitted: Vec<Uncommitted>,
    open: HashMap<EpisodeId, OpenEpisode>,
}

/// The server's own message when there is one ("db error" alone says nothing), on one line.
fn describe(e: &postgres::Error) -> String {
    let text = match e.as_db_error() {
        Some(db) => format!("{}: {}", db.code().code(), db.message()),
        None => {
            let mut s = e.to_string();
            let mut source = std::error::Error::source(e);
            while let Some(inner) = source {
                s.push_str(&format!(": {inner}"));
                source = inner.source();
            }
            s
        }
    };
    text.replace('\n', " ")
}

/// Whether an error means the server cannot be reached or the connection is gone (rather
/// than a refused statement): transport errors, a closed connection, SQLSTATE class 08
/// (connection exception) and 57P01–57P03 (shutdown, cannot connect now).
fn is_connection_error(e: &postgres::Error) -> bool {
    if let Some(db) = e.as_db_error() {
        let code = db.code().code();
        return code.starts_with("08") || matches!(code, "57P01" | "57P02" | "57P03");
    }
    if e.is_closed() {
        return true;
    }
    let mut source = std::error::Error::source(e);
    while let Some(inner) = source {
        if inner.is::<std::io::Error>() {
            return true;
        }
        source = inner.source();
    }
    false
}

/// The URL with any password removed, for error messages.
fn redact(url: &str) -> String {
    match (url.find("://"), url.rfind('@')) {
        (Some(s), Some(at)) if at > s => {
            let creds = &url[s + 3..at];
            let user = creds.split(':').next().unwrap_or("");
            format!("{}{user}@{}", &url[..s + 3], &url[at + 1..])
        }
        _ => url.to_string(),
    }
}

/// How long a connection attempt may take when the URL does not say (`connect_timeout=S`): a
/// server host that drops packets would otherwise hold every attempt, and with it the run, for
/// the operating system's TCP timeout (minutes).
pub const CONNECT_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(10);

/// The URL's connection settings, with [`CONNECT_TIMEOUT`] unless it sets its own.
fn client_config(url: &str) -> Result<postgres::Config, postgres::Error> {
    let mut config: postgres::Config = url.parse()?;
    if config.get_connect_timeout().is_none() {
        config.connect_timeout(CONNECT_TIMEOUT);
    }
    Ok(config)
}

fn record(row: &Row) -> EpisodeRecord {
    EpisodeRecord {
        id: row.get(0),
        meta: EpisodeMeta {
            agent: row.get(1),
            app: row.get(2),
            episode: row.get::<_, i64>(3) as u64,
            stage: row.get(4),
            policy: row.get(5),
            state_dim: row.get::<_, i32>(6) as u32,
            action_dim: row.get::<_, i32>(7) as u32,
            started_at_s: row.get(8),
        },
        closed_at_s: row.get(9),
        total_reward: row.get(10),
        length: row.get::<_, i32>(11) as u32,
    }
}

const INSERT_EPISODE: &str =
    "INSERT INTO aware_episodes (agent, app, episode, stage, policy, state_dim, action_dim, started_at)
     VALUES ($1, $2, $3, $4, $5, $6, $7, $8) ON CONFLICT (agent, episode) DO NOTHING RETURNING id";

/// Inserts transitions in one statement; `replay` ignores rows already there.
fn insert_transitions(
    c: &mut Client,
    episode: EpisodeId,
    transitions: &[Transition],
    replay: bool,
) -> Result<u64, postgres::Error> {
    let steps: Vec<i32> = transitions.iter().map(|t| t.step as i32).collect();
    let states: Vec<Vec<u8>> = transitions.iter().map(|t| encode(&t.state)).collect();
    let actions: Vec<Vec<u8>> = transitions.iter().map(|t| encode(&t.action)).collect();
    let rewards: Vec<f64> = transitions.iter().map(|t| t.reward as f64).collect();
    let nexts: Vec<Vec<u8>> = transitions.iter().map(|t| encode(&t.next_state)).collect();
    let dones: Vec<bool> = transitions.iter().map(|t| t.done).collect();
    let conflict = if replay { " ON CONFLICT DO NOTHING" } else { "" };
    c.execute(
        &format!(
            "INSERT INTO aware_transitions (episode_id, step, state, action, reward, next_state, done)
             SELECT $1, * FROM UNNEST($2::int4[], $3::bytea[], $4::bytea[], $5::float8[], $6::bytea[], $7::bool[]){conflict}"
        ),
        &[&episode, &steps, &states, &actions, &rewards, &nexts, &dones],
    )
}

impl PostgresStore {
    /// Connects and creates or checks the schema. An unreachable server is a one-line
    /// [`StoreError::Unavailable`].
    pub fn connect(url: &str) -> Result<Self, StoreError> {
        let shown = redact(url);
        let mut client = Self::open_client(url, &shown)?;
        let err = |e: postgres::Error| {
            let text = format!("{shown}: {}", describe(&e));
            if is_connection_error(&e) { StoreError::Unavailable(text) } else { StoreError::Backend(text) }
        };
        // Controllers sharing a database may start together: one migrates, the others wait.
        let mut tx = client.transaction().map_err(err)?;
        tx.execute("SELECT pg_advisory_xact_lock(7412023)", &[]).map_err(err)?;
        tx.batch_execute(SCHEMA).map_err(err)?;
        let version: Option<i32> = tx.query_one("SELECT max(version) FROM aware_schema", &[]).map_err(err)?.get(0);
        match version {
            None => {
                tx.execute("INSERT INTO aware_schema (version) VALUES ($1)", &[&(SCHEMA_VERSION as i32)])
                    .map_err(err)?;
            }
            Some(v) if v as i64 > SCHEMA_VERSION => {
                return Err(StoreError::NewerSchema { path: shown, found: v as i64, supported: SCHEMA_VERSION });
            }
            // Older: the schema above just added what it lacked (`IF NOT EXISTS`).
            Some(v) if (v as i64) < SCHEMA_VERSION => {
                tx.execute("INSERT INTO aware_schema (version) VALUES ($1)", &[&(SCHEMA_VERSION as i32)])
                    .map_err(err)?;
            }
            Some(_) => {}
        }
        tx.commit().map_err(err)?;
        Ok(Self {
            client: RefCell::new(Some(client)),
            connect_url: url.to_string(),
            url: shown,
            in_transaction: Cell::new(false),
            uncommitted: Vec::new(),
            open: HashMap::new(),
        })
    }

    fn open_client(url: &str, shown: &str) -> Result<Client, StoreError> {
        let failed = |e: postgres::Error| {
            let text = format!("{shown}: cannot connect: {}", describe(&e));
            if is_connection_error(&e) { StoreError::Unavailable(text) } else { StoreError::Backend(text) }
        };
        client_config(url).map_err(failed)?.connect(NoTls).map_err(failed)
    }

    /// Classifies an error; a lost connection is dropped so that the next call reconnects.
    fn fail(&self, e: postgres::Error) -> StoreError {
        let text = format!("{}: {}", self.url, describe(&e));
        if is_connection_error(&e) {
            if let Ok(mut slot) = self.client.try_borrow_mut() {
                *slot = None;
            }
            StoreError::Unavailable(text)
        } else {
            StoreError::Backend(text)
        }
    }

    /// The live connection: reconnects (once) when the last one was lost or closed, and then
    /// writes again what the lost transaction held.
    fn client(&self) -> Result<RefMut<'_, Client>, StoreError> {
        let mut slot = self.client.try_borrow_mut().map_err(|_| StoreError::Backend("connection in use".into()))?;
        if slot.as_ref().is_none_or(Client::is_closed) {
            *slot = None;
            let mut client = Self::open_client(&self.connect_url, &self.url)?;
            if self.in_transaction.get() {
                self.replay(&mut client).map_err(|e| {
                    let text = format!("{}: replaying the open episodes after a reconnect: {}", self.url, describe(&e));
                    if is_connection_error(&e) { StoreError::Unavailable(text) } else { StoreError::Backend(text) }
                })?;
            }
            *slot = Some(client);
        }
        RefMut::filter_map(slot, Option::as_mut)
            .map_err(|_| StoreError::Unavailable(format!("{}: not connected", self.url)))
    }

    /// Opens a transaction holding again what the lost one held (rows already there, from a
    /// commit whose answer was lost, are kept as they are).
    fn replay(&self, c: &mut Client) -> Result<(), postgres::Error> {
        c.batch_execute("BEGIN")?;
        for u in &self.uncommitted {
            match u {
                Uncommitted::Begin(id, m) => {
                    c.execute(
                        "INSERT INTO aware_episodes (id, agent, app, episode, stage, policy, state_dim, action_dim, started_at)
                         VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9) ON CONFLICT DO NOTHING",
                        &[
                            id,
                            &m.agent,
                            &m.app,
                            &(m.episode as i64),
                            &m.stage,
                            &m.policy,
                            &(m.state_dim as i32),
                            &(m.action_dim as i32),
                            &m.started_at_s,
                        ],
                    )?;
                }
                Uncommitted::Append(id, transitions) => {
                    insert_transitions(c, *id, transitions, true)?;
                }
            }
        }
        Ok(())
    }

    /// Runs a read, retrying once on a new connection if the old one was found gone.
    fn read<R>(&self, body: impl Fn(&mut Client) -> Result<R, postgres::Error>) -> Result<R, StoreError> {
        let mut result = Err(StoreError::Unavailable(self.url.clone()));
        for _ in 0..2 {
            let outcome = body(&mut *self.client()?);
            result = outcome.map_err(|e| self.fail(e));
            if !matches!(result, Err(StoreError::Unavailable(_))) {
                break;
            }
        }
        result
    }

    /// Runs a write inside the store's transaction, committing after it when `commit`. A
    /// connection lost before the `COMMIT` was sent is retried once on a new connection (the
    /// lost transaction is replayed first); a lost `COMMIT` answers `Unavailable`.
    fn write<R>(
        &mut self,
        commit: bool,
        body: impl Fn(&mut Client) -> Result<R, postgres::Error>,
    ) -> Result<R, StoreError> {
        let mut attempt = 0;
        let value = loop {
            attempt += 1;
            let mut client = self.client()?;
            let done = if self.in_transaction.get() { Ok(()) } else { client.batch_execute("BEGIN") }
                .map(|()| self.in_transaction.set(true))
                .and_then(|()| body(&mut client));
            drop(client);
            match done {
                Ok(v) => break v,
                Err(e) => {
                    let err = self.fail(e);
                    if attempt >= 2 || !err.is_unavailable() {
                        return Err(err);
                    }
                }
            }
        };
        if commit {
            self.commit()?;
        }
        Ok(value)
    }

    fn commit(&mut self) -> Result<(), StoreError> {
        if self.in_transaction.get() {
            let committed = self.client()?.batch_execute("COMMIT");
            committed.map_err(|e| self.fail(e))?;
            self.in_transaction.set(false);
            self.uncommitted.clear();
        }
        Ok(())
    }

    fn transition(&self, rec: &EpisodeRecord, row: &Row) -> Result<Transition, StoreError> {
        let step = row.get::<_, i32>(0) as u32;
        let corrupt = |reason: String| StoreError::Corrupt {
            path: self.url.clone(),
            reason: format!("episode {} step {step}: {reason}", rec.id),
        };
        Ok(Transition {
            step,
            state: decode(row.get(1), rec.meta.state_dim, "state").map_err(|e| corrupt(e.to_string()))?,
            action: decode(row.get(2), rec.meta.action_dim, "action").map_err(|e| corrupt(e.to_string()))?,
            reward: row.get::<_, f64>(3) as f32,
            next_state: decode(row.get(4), rec.meta.state_dim, "next_state").map_err(|e| corrupt(e.to_string()))?,
            done: row.get(5),
        })
    }

    fn load_record(&self, id: EpisodeId) -> Result<EpisodeRecord, StoreError> {
        let rows = self.read(|c| c.query(&format!("SELECT {COLUMNS} FROM aware_episodes WHERE id = $1"), &[&id]))?;
        rows.first().map(record).ok_or(StoreError::UnknownEpisode(id))
    }

    /// Removes every episode and lifecycle record (tests and benchmarks use a scratch database).
    pub fn clear(&mut self) -> Result<(), StoreError> {
        self.commit()?;
        self.open.clear();
        self.read(|c| {
            c.batch_execute("TRUNCATE aware_transitions, aware_episodes, aware_decisions, aware_stage_changes")
        })
    }
}

impl Drop for PostgresStore {
    fn drop(&mut self) {
        let _ = self.commit();
    }
}

impl TrajectoryStore for PostgresStore {
    fn begin_episode(&mut self, meta: &EpisodeMeta) -> Result<EpisodeId, StoreError> {
        if meta.state_dim == 0 || !meta.started_at_s.is_finite() {
            return Err(StoreError::Invalid("episode: state_dim must be positive and started_at_s finite".into()));
        }
        let rows = self.write(false, |c| {
            c.query(
                INSERT_EPISODE,
                &[
                    &meta.agent,
                    &meta.app,
                    &(meta.episode as i64),
                    &meta.stage,
                    &meta.policy,
                    &(meta.state_dim as i32),
                    &(meta.action_dim as i32),
                    &meta.started_at_s,
                ],
            )
        })?;
        let Some(row) = rows.first() else {
            return Err(StoreError::Invalid(format!("agent {:?} already has an episode {}", meta.agent, meta.episode)));
        };
        let id: EpisodeId = row.get(0);
        self.open.insert(id, OpenEpisode { state_dim: meta.state_dim, action_dim: meta.action_dim, length: 0 });
        self.uncommitted.push(Uncommitted::Begin(id, meta.clone()));
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
        self.write(false, |c| insert_transitions(c, episode, transitions, false))?;
        if let Some(open) = self.open.get_mut(&episode) {
            open.length = length;
        }
        self.uncommitted.push(Uncommitted::Append(episode, transitions.to_vec()));
        Ok(())
    }

    fn close_episode(&mut self, episode: EpisodeId, total_reward: f64) -> Result<(), StoreError> {
        if !total_reward.is_finite() {
            return Err(StoreError::Invalid(format!("episode {episode}: total reward {total_reward} is not finite")));
        }
        let Some(length) = self.open.get(&episode).map(|o| o.length as i32) else {
            return Err(StoreError::Invalid(format!("episode {episode} is not open in this store")));
        };
        let now = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map_or(0.0, |d| d.as_secs_f64());
        // The episode stays open here until the commit is confirmed, so a close that failed
        // can be repeated.
        self.write(true, |c| {
            c.execute(
                "UPDATE aware_episodes SET closed_at = $1, total_reward = $2, length = $3 WHERE id = $4",
                &[&now, &total_reward, &length, &episode],
            )
        })?;
        self.open.remove(&episode);
        Ok(())
    }

    fn last_rewards(&self, agent: &str, n: usize) -> Result<Vec<f64>, StoreError> {
        let rows = self.read(|c| {
            c.query(
                "SELECT total_reward FROM aware_episodes WHERE agent = $1 AND closed_at IS NOT NULL ORDER BY episode DESC LIMIT $2",
                &[&agent, &(n as i64)],
            )
        })?;
        Ok(rows.iter().map(|r| r.get(0)).collect())
    }

    fn top_episodes(&self, app: &str, m: usize, mode: TopMode) -> Result<Vec<EpisodeRecord>, StoreError> {
        let query = |order: &str, limit: usize| -> Result<Vec<EpisodeRecord>, StoreError> {
            let sql = format!(
                "SELECT {COLUMNS} FROM aware_episodes WHERE app = $1 AND closed_at IS NOT NULL ORDER BY total_reward {order}, id LIMIT $2"
            );
            let rows = self.read(|c| c.query(&sql, &[&app, &(limit as i64)]))?;
            Ok(rows.iter().map(record).collect())
        };
        let (best, worst) = mode.split(m);
        let worst = if worst > 0 { query("ASC", worst)? } else { Vec::new() };
        Ok(crate::model::best_then_worst(query("DESC", best)?, worst))
    }

    fn sample(&self, filter: &TransitionFilter, n: usize, seed: u64) -> Result<Vec<Transition>, StoreError> {
        let sql = format!(
            "SELECT {COLUMNS} FROM aware_episodes WHERE closed_at IS NOT NULL AND length > 0
               AND ($1::text IS NULL OR agent = $1) AND ($2::text IS NULL OR app = $2) AND ($3::text IS NULL OR policy = $3)
             ORDER BY id"
        );
        let rows = self.read(|c| c.query(&sql, &[&filter.agent, &filter.app, &filter.policy]))?;
        let episodes: Vec<EpisodeRecord> = rows.iter().map(record).collect();
        let picks: Vec<(usize, i32)> = pick_steps(&episodes, n, seed).into_iter().map(|(i, s)| (i, s as i32)).collect();
        if picks.is_empty() {
            return Ok(Vec::new());
        }
        // One round trip for the whole minibatch, results in pick order.
        let ids: Vec<i64> = picks.iter().map(|&(i, _)| episodes[i].id).collect();
        let steps: Vec<i32> = picks.iter().map(|&(_, s)| s).collect();
        let rows = self.read(|c| {
            c.query(
                "SELECT t.step, t.state, t.action, t.reward, t.next_state, t.done, p.ord
                 FROM UNNEST($1::int8[], $2::int4[]) WITH ORDINALITY AS p(episode_id, step, ord)
                 JOIN aware_transitions t ON t.episode_id = p.episode_id AND t.step = p.step ORDER BY p.ord",
                &[&ids, &steps],
            )
        })?;
        if rows.len() != n {
            return Err(StoreError::Corrupt {
                path: self.url.clone(),
                reason: format!("{} of {n} sampled transitions are missing", n - rows.len()),
            });
        }
        rows.iter().zip(&picks).map(|(row, &(i, _))| self.transition(&episodes[i], row)).collect()
    }

    fn episode(&self, id: EpisodeId) -> Result<(EpisodeRecord, Vec<Transition>), StoreError> {
        let rec = self.load_record(id)?;
        let rows = self.read(|c| {
            c.query(
                "SELECT step, state, action, reward, next_state, done FROM aware_transitions WHERE episode_id = $1 ORDER BY step",
                &[&id],
            )
        })?;
        let transitions = rows.iter().map(|r| self.transition(&rec, r)).collect::<Result<_, _>>()?;
        Ok((rec, transitions))
    }

    fn episodes(&self, agent: Option<&str>) -> Result<Vec<EpisodeRecord>, StoreError> {
        let sql = format!("SELECT {COLUMNS} FROM aware_episodes WHERE ($1::text IS NULL OR agent = $1) ORDER BY id");
        let rows = self.read(|c| c.query(&sql, &[&agent]))?;
        Ok(rows.iter().map(record).collect())
    }

    fn retain(&mut self, cutoff_s: f64) -> Result<u64, StoreError> {
        let open: Vec<i64> = self.open.keys().copied().collect();
        self.write(true, |c| {
            c.execute("DELETE FROM aware_episodes WHERE started_at < $1 AND NOT (id = ANY($2))", &[&cutoff_s, &open])
        })
    }

    fn record_decisions(&mut self, decisions: &[DecisionRecord]) -> Result<(), StoreError> {
        for d in decisions {
            d.check()?;
        }
        let details: Vec<String> = decisions.iter().map(|d| d.detail.to_string()).collect();
        self.write(true, |c| {
            let stmt = c.prepare(
                "INSERT INTO aware_decisions (agent, app, step, stage, acting_policy, guard, detail)
                 VALUES ($1, $2, $3, $4, $5, $6, $7)",
            )?;
            for (d, detail) in decisions.iter().zip(&details) {
                c.execute(&stmt, &[&d.agent, &d.app, &(d.step as i64), &d.stage, &d.acting_policy, &d.guard, detail])?;
            }
            Ok(())
        })
    }

    fn decisions(&self, app: &str, query: DecisionQuery) -> Result<Vec<DecisionRecord>, StoreError> {
        const COLS: &str = "agent, app, step, stage, acting_policy, guard, detail, id";
        let (sql, arg) = match query {
            DecisionQuery::Step(n) => {
                (format!("SELECT {COLS} FROM aware_decisions WHERE app = $1 AND step = $2 ORDER BY id"), n as i64)
            }
            DecisionQuery::Last(k) => (
                format!(
                    "SELECT * FROM (SELECT {COLS} FROM aware_decisions WHERE app = $1 ORDER BY id DESC LIMIT $2) d ORDER BY step, id"
                ),
                k.min(i64::MAX as usize) as i64,
            ),
        };
        let rows = self.read(|c| c.query(&sql, &[&app, &arg]))?;
        rows.iter()
            .map(|r| {
                let step: i64 = r.get(2);
                let detail: String = r.get(6);
                let detail = serde_json::from_str(&detail).map_err(|e| StoreError::Corrupt {
                    path: self.url.clone(),
                    reason: format!("decision of {app} at step {step}: detail is not JSON ({e})"),
                })?;
                Ok(DecisionRecord {
                    agent: r.get(0),
                    app: r.get(1),
                    step: step as u64,
                    stage: r.get(3),
                    acting_policy: r.get(4),
                    guard: r.get(5),
                    detail,
                })
            })
            .collect()
    }

    fn record_stage_change(&mut self, c: &StageRecord) -> Result<(), StoreError> {
        c.check()?;
        self.write(true, |client| {
            client.execute(
                "INSERT INTO aware_stage_changes (agent, app, step, from_stage, to_stage, reason) VALUES ($1, $2, $3, $4, $5, $6)",
                &[&c.agent, &c.app, &(c.step as i64), &c.from, &c.to, &c.reason],
            )
        })?;
        Ok(())
    }

    fn stage_changes(&self, app: Option<&str>) -> Result<Vec<StageRecord>, StoreError> {
        let rows = self.read(|c| {
            c.query(
                "SELECT agent, app, step, from_stage, to_stage, reason FROM aware_stage_changes
                 WHERE $1::TEXT IS NULL OR app = $1 ORDER BY id",
                &[&app],
            )
        })?;
        Ok(rows
            .iter()
            .map(|r| StageRecord {
                agent: r.get(0),
                app: r.get(1),
                step: r.get::<_, i64>(2) as u64,
                from: r.get(3),
                to: r.get(4),
                reason: r.get(5),
            })
            .collect())
    }

    fn stats(&self) -> Result<StoreStats, StoreError> {
        let (agents, counts) = self.read(|c| {
            let agents: Vec<String> =
                c.query("SELECT DISTINCT agent FROM aware_episodes ORDER BY agent", &[])?.iter().map(|r| r.get(0)).collect();
            let r = c.query_one(
                "SELECT (SELECT count(*) FROM aware_episodes), (SELECT count(*) FROM aware_episodes WHERE closed_at IS NULL),
                        (SELECT count(*) FROM aware_transitions), (SELECT count(DISTINCT app) FROM aware_episodes),
                        (SELECT count(*) FROM aware_decisions), (SELECT count(*) FROM aware_stage_changes)",
                &[],
            )?;
            let counts: Vec<u64> = (0..6).map(|i| r.get::<_, i64>(i) as u64).collect();
            Ok((agents, counts))
        })?;
        Ok(StoreStats {
            episodes: counts[0],
            incomplete_episodes: counts[1],
            transitions: counts[2],
            agents,
            apps: counts[3],
            decisions: counts[4],
            stage_changes: counts[5],
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_connection_attempt_is_bounded_unless_the_url_says_otherwise() {
        let c = client_config("postgres://aware@db.example/aware").unwrap();
        assert_eq!(c.get_connect_timeout(), Some(&CONNECT_TIMEOUT));
        let c = client_config("postgres://aware@db.example/aware?connect_timeout=3").unwrap();
        assert_eq!(c.get_connect_timeout(), Some(&std::time::Duration::from_secs(3)));
        assert!(client_config("postgres://aware@db.example/aware?connect_timeout=x").is_err());
    }
}
