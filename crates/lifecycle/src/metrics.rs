//! The lifecycle manager's Prometheus metrics (prometheus-client, OpenMetrics text), updated
//! after every episode and served by `aware run --metrics-listen ADDR` on `/metrics`:
//!
//! - `aware_lifecycle_stage{app, stage}`: 1 for the stage the app is in, 0 for the others;
//! - `aware_lifecycle_retraining{app}`: 1 while the app is ONLINE to retrain, because its rewards
//!   degraded in SERVING or the rules failed (the agent relearns: from its own transitions, or
//!   from the fallback's under `high_stakes`), else 0;
//! - `aware_lifecycle_stage_changes_total{app, from, to}`;
//! - `aware_lifecycle_actions_total{app, policy="agent"|"fallback"}`: who proposed each
//!   interval's allocation;
//! - `aware_lifecycle_guard_total{app, verdict="passed"|"fallback"|"limited"|"unavailable"}`:
//!   agent proposals the guard let through unchanged, observations it refused to the agent,
//!   agent proposals it clamped, capped or raised to the fallback's scale-up, and (on a live
//!   backend) intervals the backend gave no observation;
//! - `aware_lifecycle_episodes_total`, `aware_lifecycle_step` (intervals run so far).
//!
//! `aware controller --checkpoint DIR` serves the same metrics for its MPAs on its own
//! `/metrics`, updated after every pass ([`LifecycleMetrics::update_live`]).

use std::sync::{Arc, Mutex};

use prometheus_client::encoding::text::encode;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::registry::Registry;

use crate::LifecycleError;
use crate::manager::{Counts, Manager};
use crate::run::EpisodeSink;
use crate::stage::Stage;

type Labels = Vec<(String, String)>;

fn labels(pairs: &[(&str, &str)]) -> Labels {
    pairs.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect()
}

/// What the metrics already count: stage changes, and per app its counts and intervals without
/// an observation.
type Seen = (usize, std::collections::HashMap<String, (Counts, u64)>);

/// One app's state as the metrics read it.
struct AppState {
    name: String,
    stage: Stage,
    /// [`crate::algorithm::AppLifecycle::retraining`].
    retraining: bool,
    counts: Counts,
    /// Intervals without an observation so far (a live backend's).
    unavailable: u64,
}

/// The metrics, shareable with the thread that serves them.
#[derive(Debug, Clone)]
pub struct LifecycleMetrics {
    stage: Family<Labels, Gauge>,
    retraining: Family<Labels, Gauge>,
    changes: Family<Labels, Counter>,
    actions: Family<Labels, Counter>,
    guard: Family<Labels, Counter>,
    episodes: Counter,
    step: Gauge<i64, std::sync::atomic::AtomicI64>,
    registry: Arc<Registry>,
    /// What was already counted: stage changes, and per app (by name) the counts at the last
    /// update.
    seen: Arc<Mutex<Seen>>,
}

impl Default for LifecycleMetrics {
    fn default() -> Self {
        let (stage, retraining, changes, actions, guard) = Default::default();
        let (episodes, step) = (Counter::default(), Gauge::default());
        let mut r = Registry::default();
        r.register("aware_lifecycle_stage", "1 for the lifecycle stage each app is in", Family::clone(&stage));
        r.register(
            "aware_lifecycle_retraining",
            "1 while an app is ONLINE to retrain (its rewards degraded in SERVING, or the rules failed)",
            Family::clone(&retraining),
        );
        r.register("aware_lifecycle_stage_changes", "Stage changes", Family::clone(&changes));
        r.register("aware_lifecycle_actions", "Intervals by who proposed the allocation", Family::clone(&actions));
        r.register("aware_lifecycle_guard", "Guard verdicts: agent proposals passed or limited, observations refused (fallback), none at all (unavailable)", Family::clone(&guard));
        r.register("aware_lifecycle_episodes", "Episodes completed", episodes.clone());
        r.register("aware_lifecycle_step", "Intervals run", step.clone());
        Self {
            stage,
            retraining,
            changes,
            actions,
            guard,
            episodes,
            step,
            registry: Arc::new(r),
            seen: Default::default(),
        }
    }
}

impl LifecycleMetrics {
    /// Brings every metric up to the manager's state.
    pub fn update(&self, manager: &Manager) {
        let apps: Vec<_> = manager
            .app_names()
            .into_iter()
            .zip(manager.stages())
            .zip(manager.retraining())
            .zip(manager.counts())
            .map(|(((name, stage), retraining), counts)| AppState { name, stage, retraining, counts, unavailable: 0 })
            .collect();
        self.bring_up(&apps, manager.changes(), manager.stage_series().len() as u64);
    }

    /// Brings every metric up to a live manager's state (its apps come and go with their MPAs).
    pub fn update_live(&self, manager: &crate::live::LiveManager) {
        let apps: Vec<_> = manager
            .report()
            .into_iter()
            .map(|r| AppState {
                name: r.app,
                stage: r.stage,
                retraining: r.retraining,
                counts: r.counts,
                unavailable: r.unavailable,
            })
            .collect();
        self.bring_up(&apps, manager.changes(), manager.step());
    }

    /// `apps`: each app's state now; `changes`: every stage change so far.
    fn bring_up(&self, apps: &[AppState], changes: &[crate::StageChange], step: u64) {
        let mut seen = self.seen.lock().unwrap_or_else(|e| e.into_inner());
        // Apps no longer managed (a deleted MPA) leave the stage and retraining gauges and the
        // counts kept.
        let gone: Vec<String> = seen.1.keys().filter(|k| !apps.iter().any(|a| a.name == **k)).cloned().collect();
        for name in gone {
            for s in Stage::ALL {
                self.stage.remove(&labels(&[("app", &name), ("stage", s.name())]));
            }
            self.retraining.remove(&labels(&[("app", &name)]));
            seen.1.remove(&name);
        }
        for a in apps {
            for s in Stage::ALL {
                self.stage.get_or_create(&labels(&[("app", &a.name), ("stage", s.name())])).set((s == a.stage) as i64);
            }
            self.retraining.get_or_create(&labels(&[("app", &a.name)])).set(a.retraining as i64);
        }
        for c in &changes[seen.0.min(changes.len())..] {
            self.changes.get_or_create(&labels(&[("app", &c.app), ("from", c.from.name()), ("to", c.to.name())])).inc();
        }
        seen.0 = changes.len();
        for AppState { name, counts: now, unavailable, .. } in apps {
            let (before, before_unavailable) = seen.1.entry(name.clone()).or_default();
            let add = |family: &Family<Labels, Counter>, key: &str, value: &str, n: u64, m: u64| {
                family.get_or_create(&labels(&[("app", name), (key, value)])).inc_by(n.saturating_sub(m));
            };
            add(&self.actions, "policy", "agent", now.agent_actions, before.agent_actions);
            add(&self.actions, "policy", "fallback", now.fallback_actions, before.fallback_actions);
            let passed = |c: &Counts| c.agent_actions.saturating_sub(c.guard_limited);
            add(&self.guard, "verdict", "passed", passed(now), passed(before));
            add(&self.guard, "verdict", "fallback", now.guard_fallbacks, before.guard_fallbacks);
            add(&self.guard, "verdict", "limited", now.guard_limited, before.guard_limited);
            if *unavailable > 0 {
                add(&self.guard, "verdict", "unavailable", *unavailable, *before_unavailable);
            }
            *before = now.clone();
            *before_unavailable = *unavailable;
        }
        self.step.set(step.min(i64::MAX as u64) as i64);
    }

    /// The OpenMetrics text of every metric.
    pub fn encode(&self) -> String {
        let mut out = String::new();
        encode(&mut out, &self.registry).expect("writing to a String cannot fail");
        out
    }
}

/// Updates the metrics after every episode.
impl EpisodeSink for LifecycleMetrics {
    fn episode(&mut self, _episode: u64, manager: &mut Manager) -> Result<(), LifecycleError> {
        self.episodes.inc();
        self.update(manager);
        Ok(())
    }
}
