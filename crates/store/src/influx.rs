//! InfluxDB 1.x backend (the store AWARE used): points written with line protocol over HTTP,
//! reads with InfluxQL. An episode is buffered and written in one request when it closes, so a
//! writer that dies leaves its unfinished episode absent, never half-present. Points:
//! `episode` (tags id, agent, app, policy, stage; time = start) and `transition` (tags
//! episode_id, agent, app, policy, stage; fields step, reward, done, s0…, a0…, n0…;
//! time = start + step ns). Lifecycle records: `decision` (tags app, agent, writer; fields
//! step, stage, acting_policy, guard, detail as JSON text) and `stage_change` (tags app, agent,
//! writer; fields step, from_stage, to_stage, reason), stamped with the writer's strictly
//! increasing nanosecond clock, so time order is recording order. A server that cannot be
//! reached (transport errors, HTTP 5xx) answers [`StoreError::Unavailable`].

use std::collections::{BTreeMap, HashMap};
use std::time::Duration;

use rand::{RngExt, SeedableRng};
use rand_pcg::Pcg64Mcg;
use serde_json::Value;

use crate::TrajectoryStore;
use crate::model::{
    DecisionQuery, DecisionRecord, EpisodeId, EpisodeMeta, EpisodeRecord, StageRecord, StoreError, StoreStats, TopMode,
    Transition, TransitionFilter, check_appended, pick_steps,
};
use crate::sqlite::SCHEMA_VERSION;

struct Pending {
    meta: EpisodeMeta,
    transitions: Vec<Transition>,
}

pub struct InfluxStore {
    http: ureq::Agent,
    base: String,
    db: String,
    shown: String,
    open: HashMap<EpisodeId, Pending>,
    ids: Pcg64Mcg,
    /// This writer's tag on lifecycle points (two writers never overwrite each other's).
    writer: String,
    /// The last timestamp given to a lifecycle point.
    last_ns: i64,
}

/// A double-quoted line-protocol string field value.
fn field(v: &str) -> String {
    format!("\"{}\"", v.replace('\\', "\\\\").replace('"', "\\\""))
}

/// Escapes a tag value for line protocol.
fn tag(v: &str) -> String {
    v.replace('\\', "\\\\").replace(',', "\\,").replace(' ', "\\ ").replace('=', "\\=")
}

/// A single-quoted InfluxQL string literal.
fn lit(v: &str) -> String {
    format!("'{}'", v.replace('\\', "\\\\").replace('\'', "\\'"))
}

fn ns(seconds: f64) -> i64 {
    (seconds * 1e9).round() as i64
}

/// Rows of one statement's result as column-name → value maps.
fn rows(result: &Value) -> Vec<BTreeMap<String, Value>> {
    let mut out = Vec::new();
    for series in result["series"].as_array().into_iter().flatten() {
        let columns: Vec<&str> =
            series["columns"].as_array().into_iter().flatten().filter_map(|c| c.as_str()).collect();
        for values in series["values"].as_array().into_iter().flatten() {
            let row =
                columns.iter().zip(values.as_array().into_iter().flatten()).map(|(c, v)| (c.to_string(), v.clone()));
            out.push(row.collect());
        }
    }
    out
}

impl InfluxStore {
    /// `influxdb://HOST:PORT/DATABASE`: pings the server, creates the database and checks the
    /// schema version.
    pub fn connect(url: &str) -> Result<Self, StoreError> {
        let rest = url
            .strip_prefix("influxdb://")
            .ok_or_else(|| StoreError::Invalid(format!("store URL {url:?}: expected influxdb://HOST:PORT/DATABASE")))?;
        let (host, db) = rest.split_once('/').unwrap_or((rest, "aware"));
        if host.is_empty() || db.is_empty() || db.contains('"') {
            return Err(StoreError::Invalid(format!("store URL {url:?}: expected influxdb://HOST:PORT/DATABASE")));
        }
        let config = ureq::Agent::config_builder()
            .timeout_global(Some(Duration::from_secs(30)))
            .http_status_as_error(false)
            .build();
        let seed =
            std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map_or(0, |d| d.as_nanos() as u64)
                ^ ((std::process::id() as u64) << 32);
        let mut ids = Pcg64Mcg::seed_from_u64(seed);
        let writer = format!("{:016x}", ids.random_range(0..u64::MAX));
        let store = Self {
            http: config.into(),
            base: format!("http://{host}"),
            db: db.to_string(),
            shown: url.to_string(),
            open: HashMap::new(),
            ids,
            writer,
            last_ns: 0,
        };
        let ping = store.http.get(format!("{}/ping", store.base)).call();
        match ping {
            Ok(r) if r.status().as_u16() == 204 => {}
            Ok(r) => {
                return Err(StoreError::Backend(format!(
                    "{url}: not an InfluxDB 1.x server (ping answered {})",
                    r.status()
                )));
            }
            Err(e) => return Err(StoreError::Unavailable(format!("{url}: cannot connect: {e}"))),
        }
        store.post_query(&format!("CREATE DATABASE \"{db}\""))?;
        let version = store.query("SELECT last(version) FROM aware_schema")?;
        match rows(&version[0]).first().and_then(|r| r.get("last").and_then(Value::as_i64)) {
            None => store.write(&format!("aware_schema version={SCHEMA_VERSION}i 0\n"))?,
            Some(v) if v > SCHEMA_VERSION => {
                return Err(StoreError::NewerSchema { path: url.to_string(), found: v, supported: SCHEMA_VERSION });
            }
            // Older: the new measurements need nothing created; the version point is replaced.
            Some(v) if v < SCHEMA_VERSION => store.write(&format!("aware_schema version={SCHEMA_VERSION}i 0\n"))?,
            Some(_) => {}
        }
        Ok(store)
    }

    fn fail(&self, what: impl std::fmt::Display) -> StoreError {
        StoreError::Backend(format!("{}: {what}", self.shown))
    }

    /// A transport error or a server error (5xx): the server cannot be reached now.
    fn unavailable(&self, what: impl std::fmt::Display) -> StoreError {
        StoreError::Unavailable(format!("{}: {what}", self.shown))
    }

    /// A strictly increasing timestamp for this writer's lifecycle points.
    fn stamp(&mut self) -> i64 {
        let now = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map_or(0, |d| d.as_nanos() as i64);
        self.last_ns = now.max(self.last_ns + 1);
        self.last_ns
    }

    fn lifecycle_tags(&self, agent: &str, app: &str) -> String {
        format!("app={},agent={},writer={}", tag(app), tag(agent), self.writer)
    }

    fn write(&self, lines: &str) -> Result<(), StoreError> {
        let mut r = self
            .http
            .post(format!("{}/write", self.base))
            .query("db", &self.db)
            .query("precision", "ns")
            .send(lines)
            .map_err(|e| self.unavailable(e))?;
        if r.status().as_u16() != 204 {
            let body = r.body_mut().read_to_string().unwrap_or_default();
            let what = format!("write failed ({}): {}", r.status(), body.trim());
            return Err(if r.status().is_server_error() { self.unavailable(what) } else { self.fail(what) });
        }
        Ok(())
    }

    fn request(&self, post: bool, q: &str) -> Result<Vec<Value>, StoreError> {
        let url = format!("{}/query", self.base);
        let req =
            if post { self.http.post(url).query("q", q) } else { self.http.get(url).query("q", q).force_send_body() };
        let mut r = req.query("db", &self.db).query("epoch", "ns").send("").map_err(|e| self.unavailable(e))?;
        let body = r.body_mut().read_to_string().map_err(|e| self.unavailable(e))?;
        if r.status().is_server_error() {
            return Err(self.unavailable(format!("query failed ({}): {}", r.status(), body.trim())));
        }
        let v: Value = serde_json::from_str(&body).map_err(|e| self.fail(format!("unreadable answer: {e}")))?;
        if let Some(e) = v["error"].as_str() {
            return Err(self.fail(e));
        }
        let results = v["results"].as_array().cloned().unwrap_or_default();
        if let Some(e) = results.iter().find_map(|r| r["error"].as_str()) {
            return Err(self.fail(e));
        }
        Ok(results)
    }

    fn query(&self, q: &str) -> Result<Vec<Value>, StoreError> {
        self.request(false, q)
    }

    fn post_query(&self, q: &str) -> Result<Vec<Value>, StoreError> {
        self.request(true, q)
    }

    fn record(&self, row: &BTreeMap<String, Value>) -> Result<EpisodeRecord, StoreError> {
        let s = |k: &str| {
            row.get(k)
                .and_then(Value::as_str)
                .map(str::to_string)
                .ok_or_else(|| self.fail(format!("episode point lacks {k}")))
        };
        let f =
            |k: &str| row.get(k).and_then(Value::as_f64).ok_or_else(|| self.fail(format!("episode point lacks {k}")));
        Ok(EpisodeRecord {
            id: s("id")?.parse().map_err(|_| self.fail("episode id is not a number"))?,
            meta: EpisodeMeta {
                agent: s("agent")?,
                app: s("app")?,
                episode: f("episode")? as u64,
                stage: s("stage")?,
                policy: s("policy")?,
                state_dim: f("state_dim")? as u32,
                action_dim: f("action_dim")? as u32,
                started_at_s: f("started_at")?,
            },
            total_reward: Some(f("total_reward")?),
            length: f("length")? as u32,
            closed_at_s: Some(f("closed_at")?),
        })
    }

    fn transition(&self, rec: &EpisodeRecord, row: &BTreeMap<String, Value>) -> Result<Transition, StoreError> {
        let step = row.get("step").and_then(Value::as_u64).unwrap_or(u64::MAX) as u32;
        let corrupt = |reason: String| StoreError::Corrupt {
            path: self.shown.clone(),
            reason: format!("episode {} step {step}: {reason}", rec.id),
        };
        let vector = |prefix: &str, dim: u32| -> Result<Vec<f32>, StoreError> {
            let v: Vec<f32> = (0..dim)
                .map(|i| row.get(&format!("{prefix}{i}")).and_then(Value::as_f64).map(|x| x as f32))
                .collect::<Option<_>>()
                .ok_or_else(|| corrupt(format!("{prefix}: fewer than the {dim} components declared")))?;
            if row.get(&format!("{prefix}{dim}")).is_some_and(|x| !x.is_null()) {
                return Err(corrupt(format!("{prefix}: more than the {dim} components declared")));
            }
            Ok(v)
        };
        Ok(Transition {
            step,
            state: vector("s", rec.meta.state_dim)?,
            action: vector("a", rec.meta.action_dim)?,
            reward: row.get("reward").and_then(Value::as_f64).ok_or_else(|| corrupt("no reward".into()))? as f32,
            next_state: vector("n", rec.meta.state_dim)?,
            done: row.get("done").and_then(Value::as_bool).unwrap_or(false),
        })
    }

    fn closed_episodes(&self, condition: &str) -> Result<Vec<EpisodeRecord>, StoreError> {
        let q = format!("SELECT * FROM episode{condition}");
        let mut out: Vec<EpisodeRecord> =
            rows(&self.query(&q)?[0]).iter().map(|r| self.record(r)).collect::<Result<_, _>>()?;
        out.sort_by(|a, b| a.meta.started_at_s.total_cmp(&b.meta.started_at_s).then(a.id.cmp(&b.id)));
        Ok(out)
    }

    fn pending_record(&self, id: EpisodeId, p: &Pending) -> EpisodeRecord {
        EpisodeRecord {
            id,
            meta: p.meta.clone(),
            total_reward: None,
            length: p.transitions.len() as u32,
            closed_at_s: None,
        }
    }

    /// Drops the database (tests and benchmarks use a scratch one).
    pub fn clear(&mut self) -> Result<(), StoreError> {
        self.open.clear();
        self.post_query(
            "DROP SERIES FROM episode; DROP SERIES FROM transition; DROP SERIES FROM decision; DROP SERIES FROM stage_change",
        )?;
        Ok(())
    }
}

impl TrajectoryStore for InfluxStore {
    fn begin_episode(&mut self, meta: &EpisodeMeta) -> Result<EpisodeId, StoreError> {
        if meta.state_dim == 0 || !meta.started_at_s.is_finite() {
            return Err(StoreError::Invalid("episode: state_dim must be positive and started_at_s finite".into()));
        }
        let duplicate = self.open.values().any(|p| p.meta.agent == meta.agent && p.meta.episode == meta.episode)
            || !rows(
                &self.query(&format!(
                    "SELECT \"length\" FROM episode WHERE \"agent\" = {} AND \"episode\" = {}",
                    lit(&meta.agent),
                    meta.episode
                ))?[0],
            )
            .is_empty();
        if duplicate {
            return Err(StoreError::Invalid(format!("agent {:?} already has an episode {}", meta.agent, meta.episode)));
        }
        let id = self.ids.random_range(1..i64::MAX);
        self.open.insert(id, Pending { meta: meta.clone(), transitions: Vec::new() });
        Ok(id)
    }

    fn append(&mut self, episode: EpisodeId, transitions: &[Transition]) -> Result<(), StoreError> {
        let Some(p) = self.open.get_mut(&episode) else {
            return Err(
                match self.closed_episodes(&format!(" WHERE \"id\" = {}", lit(&episode.to_string())))?.first() {
                    Some(_) => StoreError::Invalid(format!("episode {episode} is closed")),
                    None => StoreError::UnknownEpisode(episode),
                },
            );
        };
        check_appended(episode, transitions, p.meta.state_dim, p.meta.action_dim, p.transitions.len() as u32)?;
        p.transitions.extend_from_slice(transitions);
        Ok(())
    }

    fn close_episode(&mut self, episode: EpisodeId, total_reward: f64) -> Result<(), StoreError> {
        if !total_reward.is_finite() {
            return Err(StoreError::Invalid(format!("episode {episode}: total reward {total_reward} is not finite")));
        }
        let Some(p) = self.open.get(&episode) else {
            return Err(StoreError::Invalid(format!("episode {episode} is not open in this store")));
        };
        let m = &p.meta;
        let tags =
            format!("agent={},app={},policy={},stage={}", tag(&m.agent), tag(&m.app), tag(&m.policy), tag(&m.stage));
        let start = ns(m.started_at_s);
        let mut lines = String::with_capacity(p.transitions.len() * 256);
        for t in &p.transitions {
            lines.push_str(&format!(
                "transition,episode_id={episode},{tags} step={}i,reward={},done={}",
                t.step, t.reward, t.done
            ));
            for (prefix, v) in [("s", &t.state), ("a", &t.action), ("n", &t.next_state)] {
                for (i, x) in v.iter().enumerate() {
                    lines.push_str(&format!(",{prefix}{i}={x}"));
                }
            }
            lines.push_str(&format!(" {}\n", start + t.step as i64));
        }
        let now = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map_or(0.0, |d| d.as_secs_f64());
        lines.push_str(&format!(
            "episode,id={episode},{tags} episode={}i,state_dim={}i,action_dim={}i,started_at={},closed_at={now},total_reward={total_reward},length={}i {start}\n",
            m.episode, m.state_dim, m.action_dim, m.started_at_s, p.transitions.len()
        ));
        self.write(&lines)?;
        self.open.remove(&episode);
        Ok(())
    }

    fn last_rewards(&self, agent: &str, n: usize) -> Result<Vec<f64>, StoreError> {
        let q = format!(
            "SELECT \"total_reward\" FROM episode WHERE \"agent\" = {} ORDER BY time DESC LIMIT {n}",
            lit(agent)
        );
        Ok(rows(&self.query(&q)?[0]).iter().filter_map(|r| r.get("total_reward").and_then(Value::as_f64)).collect())
    }

    fn top_episodes(&self, app: &str, m: usize, mode: TopMode) -> Result<Vec<EpisodeRecord>, StoreError> {
        let pick = |func: &str, k: usize| -> Result<Vec<String>, StoreError> {
            if k == 0 {
                return Ok(Vec::new());
            }
            let q = format!("SELECT {func}(\"total_reward\", \"id\", {k}) FROM episode WHERE \"app\" = {}", lit(app));
            let mut r: Vec<(f64, String)> = rows(&self.query(&q)?[0])
                .iter()
                .filter_map(|r| {
                    Some((r.get(func.to_lowercase().as_str())?.as_f64()?, r.get("id")?.as_str()?.to_string()))
                })
                .collect();
            r.sort_by(|a, b| if func == "TOP" { b.0.total_cmp(&a.0) } else { a.0.total_cmp(&b.0) }.then(a.1.cmp(&b.1)));
            Ok(r.into_iter().map(|x| x.1).collect())
        };
        let (best, worst) = mode.split(m);
        let mut ids = pick("TOP", best)?;
        for w in pick("BOTTOM", worst)? {
            if !ids.contains(&w) {
                ids.push(w);
            }
        }
        if ids.is_empty() {
            return Ok(Vec::new());
        }
        let cond = ids.iter().map(|id| format!("\"id\" = {}", lit(id))).collect::<Vec<_>>().join(" OR ");
        let by_id: HashMap<String, EpisodeRecord> =
            self.closed_episodes(&format!(" WHERE {cond}"))?.into_iter().map(|r| (r.id.to_string(), r)).collect();
        Ok(ids.iter().filter_map(|id| by_id.get(id).cloned()).collect())
    }

    fn sample(&self, filter: &TransitionFilter, n: usize, seed: u64) -> Result<Vec<Transition>, StoreError> {
        let mut cond = vec!["\"length\" > 0".to_string()];
        for (k, v) in [("agent", &filter.agent), ("app", &filter.app), ("policy", &filter.policy)] {
            if let Some(v) = v {
                cond.push(format!("\"{k}\" = {}", lit(v)));
            }
        }
        let mut episodes = self.closed_episodes(&format!(" WHERE {}", cond.join(" AND ")))?;
        episodes.sort_by_key(|e| e.id);
        let picks = pick_steps(&episodes, n, seed);
        if picks.is_empty() {
            return Ok(Vec::new());
        }
        // One request with a statement per pick; results come back in statement order.
        let statements: Vec<String> = picks
            .iter()
            .map(|&(i, step)| {
                let e = &episodes[i];
                format!(
                    "SELECT * FROM transition WHERE \"episode_id\" = {} AND time = {}",
                    lit(&e.id.to_string()),
                    ns(e.meta.started_at_s) + step as i64
                )
            })
            .collect();
        let mut out = Vec::with_capacity(n);
        for chunk in statements.chunks(256).zip(picks.chunks(256)) {
            let results = self.query(&chunk.0.join("; "))?;
            for (result, &(i, step)) in results.iter().zip(chunk.1) {
                let row = rows(result).into_iter().next().ok_or_else(|| StoreError::Corrupt {
                    path: self.shown.clone(),
                    reason: format!("episode {} is missing step {step}", episodes[i].id),
                })?;
                out.push(self.transition(&episodes[i], &row)?);
            }
        }
        Ok(out)
    }

    fn episode(&self, id: EpisodeId) -> Result<(EpisodeRecord, Vec<Transition>), StoreError> {
        if let Some(p) = self.open.get(&id) {
            return Ok((self.pending_record(id, p), p.transitions.clone()));
        }
        let rec = self
            .closed_episodes(&format!(" WHERE \"id\" = {}", lit(&id.to_string())))?
            .into_iter()
            .next()
            .ok_or(StoreError::UnknownEpisode(id))?;
        let q = format!("SELECT * FROM transition WHERE \"episode_id\" = {}", lit(&id.to_string()));
        let transitions =
            rows(&self.query(&q)?[0]).iter().map(|r| self.transition(&rec, r)).collect::<Result<_, _>>()?;
        Ok((rec, transitions))
    }

    fn episodes(&self, agent: Option<&str>) -> Result<Vec<EpisodeRecord>, StoreError> {
        let cond = agent.map(|a| format!(" WHERE \"agent\" = {}", lit(a))).unwrap_or_default();
        let mut all = self.closed_episodes(&cond)?;
        let mut pending: Vec<EpisodeRecord> = self
            .open
            .iter()
            .filter(|(_, p)| agent.is_none_or(|a| p.meta.agent == a))
            .map(|(&id, p)| self.pending_record(id, p))
            .collect();
        pending.sort_by_key(|r| r.id);
        all.extend(pending);
        Ok(all)
    }

    fn retain(&mut self, cutoff_s: f64) -> Result<u64, StoreError> {
        let old = self.closed_episodes(&format!(" WHERE time < {}", ns(cutoff_s)))?;
        for chunk in old.chunks(100) {
            let statements: Vec<String> = chunk
                .iter()
                .flat_map(|e| {
                    let id = lit(&e.id.to_string());
                    [
                        format!("DELETE FROM transition WHERE \"episode_id\" = {id}"),
                        format!("DELETE FROM episode WHERE \"id\" = {id}"),
                    ]
                })
                .collect();
            self.post_query(&statements.join("; "))?;
        }
        Ok(old.len() as u64)
    }

    fn record_decisions(&mut self, decisions: &[DecisionRecord]) -> Result<(), StoreError> {
        for d in decisions {
            d.check()?;
        }
        if decisions.is_empty() {
            return Ok(());
        }
        let mut lines = String::new();
        for d in decisions {
            let time = self.stamp();
            lines.push_str(&format!(
                "decision,{} step={}i,stage={},acting_policy={},guard={},detail={} {time}\n",
                self.lifecycle_tags(&d.agent, &d.app),
                d.step,
                field(&d.stage),
                field(&d.acting_policy),
                field(&d.guard),
                field(&d.detail.to_string())
            ));
        }
        // One request: the batch is written whole or refused whole.
        self.write(&lines)
    }

    fn decisions(&self, app: &str, query: DecisionQuery) -> Result<Vec<DecisionRecord>, StoreError> {
        let q = match query {
            DecisionQuery::Step(n) => format!("SELECT * FROM decision WHERE \"app\" = {} AND \"step\" = {n}", lit(app)),
            DecisionQuery::Last(0) => return Ok(Vec::new()),
            DecisionQuery::Last(k) => {
                format!("SELECT * FROM decision WHERE \"app\" = {} ORDER BY time DESC LIMIT {k}", lit(app))
            }
        };
        let mut out = Vec::new();
        for row in rows(&self.query(&q)?[0]) {
            let s = |k: &str| row.get(k).and_then(Value::as_str).map(str::to_string);
            let time = row.get("time").and_then(Value::as_i64).unwrap_or(0);
            let step = row.get("step").and_then(Value::as_u64);
            let corrupt = |what: &str| StoreError::Corrupt {
                path: self.shown.clone(),
                reason: format!("decision point of {app} at {time}: {what}"),
            };
            let (Some(agent), Some(step), Some(stage), Some(acting_policy), Some(guard), Some(detail)) =
                (s("agent"), step, s("stage"), s("acting_policy"), s("guard"), s("detail"))
            else {
                return Err(corrupt("a field is missing"));
            };
            let detail = serde_json::from_str(&detail).map_err(|e| corrupt(&format!("detail is not JSON ({e})")))?;
            let record = DecisionRecord { agent, app: app.to_string(), step, stage, acting_policy, guard, detail };
            out.push((time, record));
        }
        out.sort_by(|a, b| a.1.step.cmp(&b.1.step).then(a.0.cmp(&b.0)));
        Ok(out.into_iter().map(|(_, d)| d).collect())
    }

    fn record_stage_change(&mut self, c: &StageRecord) -> Result<(), StoreError> {
        c.check()?;
        let time = self.stamp();
        let line = format!(
            "stage_change,{} step={}i,from_stage={},to_stage={},reason={} {time}\n",
            self.lifecycle_tags(&c.agent, &c.app),
            c.step,
            field(&c.from),
            field(&c.to),
            field(&c.reason)
        );
        self.write(&line)
    }

    fn stage_changes(&self, app: Option<&str>) -> Result<Vec<StageRecord>, StoreError> {
        let cond = app.map(|a| format!(" WHERE \"app\" = {}", lit(a))).unwrap_or_default();
        let mut out = Vec::new();
        for row in rows(&self.query(&format!("SELECT * FROM stage_change{cond}"))?[0]) {
            let s = |k: &str| row.get(k).and_then(Value::as_str).map(str::to_string);
            let time = row.get("time").and_then(Value::as_i64).unwrap_or(0);
            let (Some(agent), Some(app), Some(step), Some(from), Some(to), Some(reason)) = (
                s("agent"),
                s("app"),
                row.get("step").and_then(Value::as_u64),
                s("from_stage"),
                s("to_stage"),
                s("reason"),
            ) else {
                return Err(StoreError::Corrupt {
                    path: self.shown.clone(),
                    reason: format!("stage change point at {time}: a field is missing"),
                });
            };
            out.push((time, StageRecord { agent, app, step, from, to, reason }));
        }
        out.sort_by_key(|(time, _)| *time);
        Ok(out.into_iter().map(|(_, c)| c).collect())
    }

    fn stats(&self) -> Result<StoreStats, StoreError> {
        let r = self.query(
            "SELECT count(\"length\") FROM episode; SELECT count(\"reward\") FROM transition; \
             SHOW TAG VALUES FROM episode WITH KEY = \"agent\"; SHOW TAG VALUES FROM episode WITH KEY = \"app\"; \
             SELECT count(\"step\") FROM decision; SELECT count(\"step\") FROM stage_change",
        )?;
        let count = |v: &Value, k: &str| rows(v).first().and_then(|r| r.get(k).and_then(Value::as_u64)).unwrap_or(0);
        let values = |v: &Value| -> Vec<String> {
            rows(v).iter().filter_map(|r| r.get("value").and_then(Value::as_str).map(str::to_string)).collect()
        };
        let mut agents = values(&r[2]);
        let mut apps = values(&r[3]);
        for p in self.open.values() {
            agents.push(p.meta.agent.clone());
            apps.push(p.meta.app.clone());
        }
        agents.sort();
        agents.dedup();
        apps.sort();
        apps.dedup();
        let pending_transitions: u64 = self.open.values().map(|p| p.transitions.len() as u64).sum();
        Ok(StoreStats {
            episodes: count(&r[0], "count") + self.open.len() as u64,
            incomplete_episodes: self.open.len() as u64,
            transitions: count(&r[1], "count") + pending_transitions,
            agents,
            apps: apps.len() as u64,
            decisions: count(&r[4], "count"),
            stage_changes: count(&r[5], "count"),
        })
    }
}
