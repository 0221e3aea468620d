//! Export of closed episodes, backend-independent: CSV for analysis, InfluxDB line protocol
//! for loading into the store AWARE used.

use std::io::Write;

use crate::TrajectoryStore;
use crate::model::{EpisodeRecord, StoreError};

fn io(e: impl std::fmt::Display) -> StoreError {
    StoreError::Backend(format!("export: {e}"))
}

fn join(v: &[f32]) -> String {
    v.iter().map(|x| x.to_string()).collect::<Vec<_>>().join(" ")
}

fn closed(store: &dyn TrajectoryStore, agent: Option<&str>) -> Result<Vec<EpisodeRecord>, StoreError> {
    Ok(store.episodes(agent)?.into_iter().filter(|e| e.is_complete()).collect())
}

/// One row per transition; vectors are space-separated inside their column. Returns rows written.
pub fn csv(store: &dyn TrajectoryStore, agent: Option<&str>, out: impl Write) -> Result<u64, StoreError> {
    let mut w = ::csv::Writer::from_writer(out);
    w.write_record([
        "episode_id",
        "agent",
        "app",
        "episode",
        "stage",
        "policy",
        "step",
        "reward",
        "done",
        "state",
        "action",
        "next_state",
    ])
    .map_err(io)?;
    let mut rows = 0;
    for rec in closed(store, agent)? {
        let (_, transitions) = store.episode(rec.id)?;
        let m = &rec.meta;
        for t in transitions {
            w.write_record([
                rec.id.to_string(),
                m.agent.clone(),
                m.app.clone(),
                m.episode.to_string(),
                m.stage.clone(),
                m.policy.clone(),
                t.step.to_string(),
                t.reward.to_string(),
                t.done.to_string(),
                join(&t.state),
                join(&t.action),
                join(&t.next_state),
            ])
            .map_err(io)?;
            rows += 1;
        }
    }
    w.flush().map_err(io)?;
    Ok(rows)
}

/// Escapes a tag value (commas, spaces and equals signs).
fn tag(v: &str) -> String {
    v.replace('\\', "\\\\").replace(',', "\\,").replace(' ', "\\ ").replace('=', "\\=")
}

/// Line protocol: a `transition` point per step (fields `s0…`, `a0…`, `n0…`, reward, done,
/// episode and step; timestamp start + step nanoseconds so points never collide) and an
/// `episode` point per episode. Returns points written.
pub fn line_protocol(store: &dyn TrajectoryStore, agent: Option<&str>, mut out: impl Write) -> Result<u64, StoreError> {
    let mut points = 0;
    for rec in closed(store, agent)? {
        let (_, transitions) = store.episode(rec.id)?;
        let m = &rec.meta;
        let tags =
            format!("agent={},app={},policy={},stage={}", tag(&m.agent), tag(&m.app), tag(&m.policy), tag(&m.stage));
        let start_ns = (m.started_at_s * 1e9) as i64;
        for t in &transitions {
            let mut fields = format!("episode={}i,step={}i,reward={},done={}", m.episode, t.step, t.reward, t.done);
            for (prefix, v) in [("s", &t.state), ("a", &t.action), ("n", &t.next_state)] {
                for (i, x) in v.iter().enumerate() {
                    fields.push_str(&format!(",{prefix}{i}={x}"));
                }
            }
            writeln!(out, "transition,{tags} {fields} {}", start_ns + t.step as i64).map_err(io)?;
            points += 1;
        }
        let closed_ns = (rec.closed_at_s.unwrap_or(m.started_at_s) * 1e9) as i64;
        writeln!(
            out,
            "episode,{tags} episode={}i,total_reward={},length={}i {closed_ns}",
            m.episode,
            rec.total_reward.unwrap_or(0.0),
            rec.length
        )
        .map_err(io)?;
        points += 1;
    }
    Ok(points)
}
