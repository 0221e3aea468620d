//! Faults around the lifecycle manager: the store going away mid-run and coming back. The
//! apps stay served exactly as without a store, and nothing acknowledged is lost.

use aware_lab::progress::Silent;
use aware_lab::workload::{Workload, WorkloadSpec};
use aware_lifecycle::manager::{Manager, ManagerConfig};
use aware_lifecycle::record::StoreSink;
use aware_lifecycle::run::{EpisodeSink, Plan, Variant, run_manager};
use aware_lifecycle::{LifecycleError, Stage};
use aware_store::fault::{Switch, Switchable};
use aware_store::{DecisionQuery, Spooled, TrajectoryStore};

const EPISODE: u64 = 50;
const EPISODES: u64 = 8;

/// Records into the store, switching it off before episode 2 is written and on again before
/// episode 6 (and calling `during` while it is off).
struct Outage<'s> {
    sink: StoreSink<'s>,
    switch: Switch,
    during: Box<dyn FnMut()>,
}

impl EpisodeSink for Outage<'_> {
    fn episode(&mut self, episode: u64, manager: &mut Manager) -> Result<(), LifecycleError> {
        match episode {
            2 => {
                self.switch.set_up(false);
                (self.during)();
            }
            6 => self.switch.set_up(true),
            _ => {}
        }
        self.sink.episode(episode, manager)
    }
}

fn drill(backend: Box<dyn TrajectoryStore>, during: Box<dyn FnMut()>) -> Box<dyn TrajectoryStore> {
    let spec = WorkloadSpec { apps: 2, seed: 11, steps: EPISODE * EPISODES, ..WorkloadSpec::default() };
    let workload = Workload::load(&spec).unwrap();
    let plan = Plan::new(&workload, EPISODE * EPISODES, EPISODE).unwrap();
    let config = ManagerConfig { episode_steps: EPISODE, log: true, ..ManagerConfig::default() };
    let spool_dir = tempfile::tempdir().unwrap();
    let (switchable, switch) = Switchable::new(backend);
    let mut spooled = Spooled::new(Box::new(switchable), spool_dir.path(), 64 << 20).unwrap();

    let unrecorded = run_manager(&workload, &plan, Variant::Aware, &config, 4, &mut (), &Silent).unwrap();
    let recorded = {
        let mut sink = Outage { sink: StoreSink::new(&mut spooled), switch: switch.clone(), during };
        run_manager(&workload, &plan, Variant::Aware, &config, 4, &mut sink, &Silent).unwrap()
    };
    // The apps were served as if the store had never gone away.
    assert_eq!(recorded.row.summary.slo_violations, unrecorded.row.summary.slo_violations);
    assert_eq!(recorded.row.summary.core_seconds, unrecorded.row.summary.core_seconds);
    assert_eq!(recorded.final_stages, unrecorded.final_stages);
    assert!(switch.is_up());

    // Everything acknowledged during the outage reached the store.
    assert_eq!(spooled.pending(), 0, "the spool was flushed when the store came back");
    assert_eq!(spooled.set_aside(), 0);
    let names: Vec<&str> = workload.apps.iter().map(|a| a.name.as_str()).collect();
    for (i, app) in names.iter().enumerate() {
        let episodes = spooled.episodes(Some(&format!("aware@{app}"))).unwrap();
        assert_eq!(episodes.len() as u64, EPISODES, "{app}: one record per episode");
        for (e, rec) in episodes.iter().enumerate() {
            assert_eq!(rec.meta.episode, e as u64);
            assert_eq!(rec.length, EPISODE as u32, "{app} episode {e} complete");
            assert!(rec.total_reward.is_some(), "{app} episode {e} closed");
        }
        let decisions = spooled.decisions(app, DecisionQuery::Last((10 * EPISODE * EPISODES) as usize)).unwrap();
        let steps: Vec<u64> = decisions.iter().map(|d| d.step).collect();
        assert_eq!(steps, (0..EPISODE * EPISODES).collect::<Vec<_>>(), "{app}: one decision per interval, in order");
        let changes = spooled.stage_changes(Some(app)).unwrap();
        let expected: Vec<_> = recorded.stages.iter().filter(|c| c.app == *app).collect();
        assert_eq!(changes.len(), expected.len(), "{app}: every stage change");
        assert_eq!(changes[0].to, Stage::Offline.name(), "app {i} starts bootstrapping");
    }
    drop(spool_dir);
    Box::new(spooled)
}

/// The store away for longer than the spool holds: the records that do not fit are refused
/// (never acknowledged) and counted, the apps stay served exactly as without a store, and what
/// was acknowledged before is kept.
#[test]
fn a_full_spool_refuses_records_and_the_apps_stay_served() {
    let spec = WorkloadSpec { apps: 2, seed: 11, steps: EPISODE * EPISODES, ..WorkloadSpec::default() };
    let workload = Workload::load(&spec).unwrap();
    let plan = Plan::new(&workload, EPISODE * EPISODES, EPISODE).unwrap();
    let config = ManagerConfig { episode_steps: EPISODE, log: true, ..ManagerConfig::default() };
    let dir = tempfile::tempdir().unwrap();
    let store = aware_store::SqliteStore::open(&dir.path().join("aware.db"), aware_store::Sync::Normal).unwrap();
    let (switchable, switch) = Switchable::new(Box::new(store));
    // Room for about one episode's records of two apps.
    let mut spooled = Spooled::new(Box::new(switchable), &dir.path().join("spool"), 200 << 10).unwrap();
    let unrecorded = run_manager(&workload, &plan, Variant::Aware, &config, 4, &mut (), &Silent).unwrap();
    let (recorded, refused) = {
        let mut sink = Outage { sink: StoreSink::new(&mut spooled), switch: switch.clone(), during: Box::new(|| {}) };
        // Off from episode 2 and never back.
        let never_back = EPISODES + 1;
        let mut sink = Never { outage: &mut sink, from: 2, until: never_back };
        let run = run_manager(&workload, &plan, Variant::Aware, &config, 4, &mut sink, &Silent).unwrap();
        (run, (sink.outage.sink.refused, sink.outage.sink.refused_reason.clone()))
    };
    assert_eq!(recorded.row.summary.slo_violations, unrecorded.row.summary.slo_violations);
    assert_eq!(recorded.row.summary.core_seconds, unrecorded.row.summary.core_seconds);
    assert_eq!(recorded.final_stages, unrecorded.final_stages);
    assert!(refused.0 > 0, "the spool filled up");
    assert!(refused.1.as_deref().is_some_and(|r| r.contains("spool")), "{refused:?}");
    // Back up: what the spool acknowledged reaches the store (complete episodes, in order);
    // what it refused is missing, not corrupted.
    switch.set_up(true);
    spooled.flush().unwrap();
    assert_eq!(spooled.pending(), 0);
    assert_eq!(spooled.set_aside(), 0);
    let mut missing = 0;
    for app in workload.apps.iter().map(|a| a.name.as_str()) {
        let complete: Vec<u64> = spooled
            .episodes(Some(&format!("aware@{app}")))
            .unwrap()
            .iter()
            .filter(|r| r.total_reward.is_some() && r.length == EPISODE as u32)
            .map(|r| r.meta.episode)
            .collect();
        assert!(complete.len() >= 2, "{app}: {complete:?}");
        assert_eq!(complete, (0..complete.len() as u64).collect::<Vec<_>>(), "{app}: the first ones, in order");
        let decisions = spooled.decisions(app, DecisionQuery::Last((10 * EPISODE * EPISODES) as usize)).unwrap();
        let steps: Vec<u64> = decisions.iter().map(|d| d.step).collect();
        assert_eq!(steps, (0..steps.len() as u64).collect::<Vec<_>>(), "{app}: the first decisions, in order");
        missing += EPISODE * EPISODES - steps.len() as u64 + EPISODES - complete.len() as u64;
    }
    assert!(missing > 0, "the refused records are missing from the store");
}

/// Keeps the store off from episode `from` to `until`, whatever `Outage` does.
struct Never<'a, 's> {
    outage: &'a mut Outage<'s>,
    from: u64,
    until: u64,
}

impl EpisodeSink for Never<'_, '_> {
    fn episode(&mut self, episode: u64, manager: &mut Manager) -> Result<(), LifecycleError> {
        let off = (self.from..self.until).contains(&episode);
        self.outage.switch.set_up(!off);
        self.outage.sink.episode(episode, manager)
    }
}

#[test]
fn sqlite_going_away_mid_run_loses_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("aware.db");
    let store = aware_store::SqliteStore::open(&path, aware_store::Sync::Normal).unwrap();
    drop(drill(Box::new(store), Box::new(|| {})));
}

#[test]
#[ignore = "needs PostgreSQL: set AWARE_TEST_POSTGRES_URL"]
fn postgres_going_away_mid_run_loses_nothing() {
    let url = std::env::var("AWARE_TEST_POSTGRES_URL")
        .expect("AWARE_TEST_POSTGRES_URL is not set: start servers with `eval \"$(bash .ci/services.sh start)\"`");
    let mut admin = postgres::Client::connect(&url, postgres::NoTls).unwrap();
    admin.batch_execute("DROP DATABASE IF EXISTS aware_test_lifecycle_faults WITH (FORCE)").unwrap();
    admin.batch_execute("CREATE DATABASE aware_test_lifecycle_faults").unwrap();
    let store = aware_store::PostgresStore::connect(&format!("{url}_lifecycle_faults")).unwrap();
    // While the store is off, the server also drops its connection: it must reconnect.
    let kill = move || {
        admin
            .execute(
                "SELECT pg_terminate_backend(pid) FROM pg_stat_activity
                 WHERE datname = 'aware_test_lifecycle_faults' AND pid <> pg_backend_pid()",
                &[],
            )
            .unwrap();
    };
    drop(drill(Box::new(store), Box::new(kill)));
}

/// The metrics `aware run --metrics-listen` serves add up to what the run did.
#[test]
fn metrics_count_every_interval_and_stage_change() {
    use aware_lifecycle::metrics::LifecycleMetrics;
    let spec = WorkloadSpec { apps: 2, seed: 11, steps: EPISODE * 4, ..WorkloadSpec::default() };
    let workload = Workload::load(&spec).unwrap();
    let plan = Plan::new(&workload, EPISODE * 4, EPISODE).unwrap();
    let config = ManagerConfig { episode_steps: EPISODE, ..ManagerConfig::default() };
    let metrics = LifecycleMetrics::default();
    let arm = run_manager(&workload, &plan, Variant::Aware, &config, 4, &mut metrics.clone(), &Silent).unwrap();
    let text = metrics.encode();
    let value = |prefix: &str| -> f64 {
        text.lines()
            .filter(|l| l.starts_with(prefix))
            .map(|l| l.rsplit(' ').next().unwrap().parse::<f64>().unwrap())
            .sum()
    };
    assert_eq!(value("aware_lifecycle_actions_total{"), (2 * EPISODE * 4) as f64, "{text}");
    assert_eq!(value("aware_lifecycle_stage_changes_total{"), arm.stages.len() as f64, "{text}");
    assert_eq!(value("aware_lifecycle_episodes_total"), 4.0);
    assert_eq!(value("aware_lifecycle_step "), (EPISODE * 4) as f64);
    for (app, stage) in workload.apps.iter().zip(&arm.final_stages) {
        let line = format!("aware_lifecycle_stage{{app=\"{}\",stage=\"{}\"}} 1", app.name, stage.name());
        assert!(text.contains(&line), "{line} missing from\n{text}");
    }
    assert_eq!(value("aware_lifecycle_stage{"), 2.0, "one stage per app");
    // Every agent proposal has one verdict, passed or limited; a refused observation is the
    // fallback's.
    let agent: u64 = arm.counts.iter().map(|c| c.agent_actions).sum();
    assert!(agent > 0, "the agent acted");
    let verdict = |v: &str| -> f64 {
        let label = format!("verdict=\"{v}\"");
        text.lines()
            .filter(|l| l.starts_with("aware_lifecycle_guard_total{") && l.contains(&label))
            .map(|l| l.rsplit(' ').next().unwrap().parse::<f64>().unwrap())
            .sum()
    };
    assert_eq!(verdict("passed") + verdict("limited"), agent as f64, "{text}");
    let fallbacks: u64 = arm.counts.iter().map(|c| c.guard_fallbacks).sum();
    assert_eq!(verdict("fallback"), fallbacks as f64);
}

/// A residual agent's weights mean changes of the fallback's proposals; read as changes of the
/// current allocation they would mean other allocations. So a checkpoint records which kind of
/// agent wrote it, and a run of the other kind sets it aside and says why, and the reverse.
#[test]
fn a_checkpoint_is_taken_up_only_by_the_kind_of_agent_that_wrote_it() {
    use aware_lifecycle::run::{RunSpec, run};
    let dir = tempfile::tempdir().unwrap();
    let ckpt = dir.path().join("ckpt");
    let url = format!("sqlite:{}", dir.path().join("s.db").display());
    let spec = |residual: bool| RunSpec {
        workload: WorkloadSpec { apps: 2, seed: 12, steps: EPISODE, ..WorkloadSpec::default() },
        steps: EPISODE,
        manager: ManagerConfig { episode_steps: EPISODE, residual, ..ManagerConfig::default() },
        seed: 12,
        store: Some(aware_lifecycle::run::RunStore { url: url.clone(), spool: None }),
        metrics: None,
        checkpoint: Some(ckpt.clone()),
    };
    let first = run(&spec(true), &Silent).unwrap();
    assert!(!first.checkpoint.unwrap().restored);
    // In the store too its episodes live apart: actions of another meaning under another name.
    let app = &first.per_app[0].app;
    let store = aware_store::open(&url.parse().unwrap(), true).unwrap();
    assert_eq!(store.episodes(Some(&format!("aware-residual@{app}"))).unwrap().len(), 1);
    assert!(store.episodes(Some(&format!("aware@{app}"))).unwrap().is_empty());
    drop(store);
    assert!(run(&spec(true), &Silent).unwrap().checkpoint.unwrap().restored);
    let c = run(&spec(false), &Silent).unwrap().checkpoint.unwrap();
    assert!(!c.restored, "{c:?}");
    let why = c.rejected.as_deref().unwrap();
    assert!(why.contains("written by an agent acting on the fallback's proposals (residual)"), "{why}");
    assert!(why.contains("the reader's agent acts on the current allocation"), "{why}");
    assert_eq!(c.set_aside.as_deref().map(std::path::PathBuf::from), Some(ckpt.join("rejected-1")));
    // The checkpoint that run wrote in its place is of its own kind.
    assert!(run(&spec(false), &Silent).unwrap().checkpoint.unwrap().restored);
    let c = run(&spec(true), &Silent).unwrap().checkpoint.unwrap();
    assert!(c.rejected.as_deref().unwrap().contains("written by an agent acting on the current allocation"), "{c:?}");
    let store = aware_store::open(&url.parse().unwrap(), true).unwrap();
    assert_eq!(store.episodes(Some(&format!("aware-residual@{app}"))).unwrap().len(), 3);
    assert_eq!(store.episodes(Some(&format!("aware@{app}"))).unwrap().len(), 2);
    drop(store);
    // `aware explain` answers for both kinds (the last decisions recorded are the residual run's).
    let last = aware_lifecycle::explain::explain(&url, app, aware_lifecycle::explain::Query::Last(3)).unwrap();
    assert_eq!(last.decisions.len(), 3);
}

/// `aware run --checkpoint DIR` thrice: a fresh run writes the checkpoint, the next takes it
/// up, and after a weight file is corrupted the next refuses it, keeps it aside, and serves
/// exactly as a run without any checkpoint would (every app bootstrapping, the fallback acting).
#[test]
fn a_corrupted_checkpoint_is_set_aside_and_the_apps_are_served_as_from_scratch() {
    // Each learner keeps its own weight files: PPO one network, DDPG (the default) an actor
    // and critics.
    for (agent, weights) in [
        (aware_lifecycle::Learner::Ppo, "policy_value.safetensors"),
        (aware_lifecycle::Learner::Ddpg, "actor.safetensors"),
    ] {
        a_corrupted_checkpoint_is_set_aside(agent, weights);
    }
}

fn a_corrupted_checkpoint_is_set_aside(agent: aware_lifecycle::Learner, weights: &str) {
    use aware_lifecycle::run::{RunSpec, run};
    let dir = tempfile::tempdir().unwrap();
    let ckpt = dir.path().join("ckpt");
    let spec = |checkpoint: Option<std::path::PathBuf>| RunSpec {
        workload: WorkloadSpec { apps: 2, seed: 11, steps: EPISODE * 3, ..WorkloadSpec::default() },
        steps: EPISODE * 3,
        manager: ManagerConfig { episode_steps: EPISODE, agent, ..ManagerConfig::default() },
        seed: 11,
        store: None,
        metrics: None,
        checkpoint,
    };
    let from_scratch = run(&spec(None), &Silent).unwrap();
    assert!(from_scratch.checkpoint.is_none());

    let first = run(&spec(Some(ckpt.clone())), &Silent).unwrap();
    let c = first.checkpoint.as_ref().unwrap();
    assert!(!c.restored && c.rejected.is_none() && c.set_aside.is_none(), "{c:?}");
    assert_eq!((c.saved, c.save_failures), (3, 0));
    // Keeping a checkpoint changes nothing about how the apps are served.
    assert_eq!(first.policies[0].summary.slo_violations, from_scratch.policies[0].summary.slo_violations);
    assert_eq!(first.policies[0].summary.core_seconds, from_scratch.policies[0].summary.core_seconds);

    let second = run(&spec(Some(ckpt.clone())), &Silent).unwrap();
    let c = second.checkpoint.as_ref().unwrap();
    assert!(c.restored && c.rejected.is_none(), "{c:?}");
    for change in second.stages.iter().filter(|s| s.reason.starts_with("restored")) {
        let ended = first.per_app.iter().find(|a| a.app == change.app).unwrap();
        assert_eq!(change.to, ended.stage, "{change:?}");
    }

    // One flipped byte in the agent's weights.
    let actor = ckpt.join("agent").join(weights);
    let mut bytes = std::fs::read(&actor).unwrap();
    let last = bytes.len() - 1;
    bytes[last] ^= 0x40;
    std::fs::write(&actor, &bytes).unwrap();

    let third = run(&spec(Some(ckpt.clone())), &Silent).unwrap();
    let c = third.checkpoint.as_ref().unwrap();
    assert!(!c.restored, "{c:?}");
    let why = c.rejected.as_deref().unwrap();
    assert!(why.contains(&format!("checksum mismatch for {weights}")), "{agent}: {why}");
    // Kept aside byte for byte, and a sound checkpoint written in its place.
    let aside = std::path::Path::new(c.set_aside.as_deref().unwrap());
    assert_eq!(aside, ckpt.join("rejected-1"));
    assert_eq!(std::fs::read(aside.join("agent").join(weights)).unwrap(), bytes);
    assert!(aside.join("lifecycle.json").exists());
    assert_eq!(c.saved, 3);
    // Every app started over, bootstrapping (the fallback serving), as from scratch.
    let starts: Vec<_> = third.stages.iter().filter(|s| s.from == Stage::Initialized).collect();
    assert_eq!(starts.len(), 2);
    assert!(starts.iter().all(|s| s.to == Stage::Offline));
    assert!(!third.stages.iter().any(|s| s.reason.starts_with("restored")));
    assert_eq!(third.policies[0].summary.slo_violations, from_scratch.policies[0].summary.slo_violations);
    assert_eq!(third.policies[0].summary.core_seconds, from_scratch.policies[0].summary.core_seconds);
    assert_eq!(third.stages, from_scratch.stages);

    let fourth = run(&spec(Some(ckpt.clone())), &Silent).unwrap();
    assert!(fourth.checkpoint.unwrap().restored);

    // A checkpoint of an earlier reward (format 2: nothing charged while the SLO is missed)
    // is set aside, not misread.
    let path = ckpt.join("lifecycle.json");
    let mut file: serde_json::Value = serde_json::from_slice(&std::fs::read(&path).unwrap()).unwrap();
    file["format"] = 2.into();
    std::fs::write(&path, serde_json::to_vec(&file).unwrap()).unwrap();
    let fifth = run(&spec(Some(ckpt)), &Silent).unwrap();
    let c = fifth.checkpoint.as_ref().unwrap();
    assert!(!c.restored, "{c:?}");
    let why = c.rejected.as_deref().unwrap();
    assert!(why.contains("earlier reward") && why.contains("charging nothing") && why.contains("retrain"), "{why}");
    assert_eq!(fifth.stages, from_scratch.stages);
}

/// Two apps over `episodes` episodes, the manager logging its decisions.
fn two_apps(episodes: u64) -> (Workload, Plan, ManagerConfig) {
    let spec = WorkloadSpec { apps: 2, seed: 11, steps: EPISODE * episodes, ..WorkloadSpec::default() };
    let workload = Workload::load(&spec).unwrap();
    let plan = Plan::new(&workload, EPISODE * episodes, EPISODE).unwrap();
    (workload, plan, ManagerConfig { episode_steps: EPISODE, log: true, ..ManagerConfig::default() })
}

/// A SQLite store in `dir` that can be switched off, behind a spool there, and the path of the
/// numbering file beside the spool.
fn spooled_sqlite(dir: &std::path::Path) -> (Spooled, Switch, std::path::PathBuf) {
    let store = aware_store::SqliteStore::open(&dir.join("aware.db"), aware_store::Sync::Normal).unwrap();
    let (switchable, switch) = Switchable::new(Box::new(store));
    let spool = dir.join("spool");
    let spooled = Spooled::new(Box::new(switchable), &spool, 64 << 20).unwrap();
    (spooled, switch, spool.join(aware_lifecycle::run::NUMBERING))
}

/// A run restarted while the store is away goes on from where the last run's records end (kept
/// beside the spool), so that when the store answers, its episodes and steps follow the last
/// run's instead of colliding with them: nothing is set aside.
#[test]
fn a_restart_with_the_store_away_goes_on_numbering_after_the_last_run() {
    let (workload, plan, config) = two_apps(3);
    let dir = tempfile::tempdir().unwrap();
    let (mut spooled, switch, numbering) = spooled_sqlite(dir.path());
    for up in [true, false] {
        switch.set_up(up);
        let mut sink = StoreSink::new(&mut spooled).with_numbering(numbering.clone());
        run_manager(&workload, &plan, Variant::Aware, &config, 4, &mut sink, &Silent).unwrap();
    }
    switch.set_up(true);
    spooled.flush().unwrap();
    assert_eq!((spooled.pending(), spooled.set_aside()), (0, 0), "nothing set aside as a duplicate");
    for app in workload.apps.iter().map(|a| a.name.as_str()) {
        let episodes: Vec<u64> =
            spooled.episodes(Some(&format!("aware@{app}"))).unwrap().iter().map(|r| r.meta.episode).collect();
        assert_eq!(episodes, (0..6).collect::<Vec<_>>(), "{app}");
        let steps: Vec<u64> =
            spooled.decisions(app, DecisionQuery::Last(10_000)).unwrap().iter().map(|d| d.step).collect();
        assert_eq!(steps, (0..6 * EPISODE).collect::<Vec<_>>(), "{app}: one decision per step");
    }
}

/// A store away at a first run's start and back mid-run: the run's numbers neither jump nor
/// collide when it answers (they are kept from the first episode written).
#[test]
fn a_store_back_mid_run_keeps_the_runs_numbers() {
    let (workload, plan, config) = two_apps(4);
    let dir = tempfile::tempdir().unwrap();
    let (mut spooled, switch, numbering) = spooled_sqlite(dir.path());
    switch.set_up(false);
    {
        let sink = StoreSink::new(&mut spooled).with_numbering(numbering);
        let mut outage = Outage { sink, switch: switch.clone(), during: Box::new(|| {}) };
        let mut sink = Never { outage: &mut outage, from: 0, until: 2 };
        run_manager(&workload, &plan, Variant::Aware, &config, 4, &mut sink, &Silent).unwrap();
    }
    switch.set_up(true);
    spooled.flush().unwrap();
    assert_eq!((spooled.pending(), spooled.set_aside()), (0, 0));
    for app in workload.apps.iter().map(|a| a.name.as_str()) {
        let episodes: Vec<u64> =
            spooled.episodes(Some(&format!("aware@{app}"))).unwrap().iter().map(|r| r.meta.episode).collect();
        assert_eq!(episodes, (0..4).collect::<Vec<_>>(), "{app}");
        let steps: Vec<u64> =
            spooled.decisions(app, DecisionQuery::Last(10_000)).unwrap().iter().map(|d| d.step).collect();
        assert_eq!(steps, (0..4 * EPISODE).collect::<Vec<_>>(), "{app}");
    }
}
