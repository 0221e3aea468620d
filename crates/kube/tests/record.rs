//! `aware controller --store URL`: what the lifecycle decides for a live MPA reaches the
//! trajectory store as `aware run` records it — decisions `aware explain` reads back, stage
//! changes, windows as episodes — numbered on after a restart, and spooled through an outage;
//! on observations of the simulator, through the decider as the controller calls it.

mod sim;

use aware_core::Profile;
use aware_kube::record::{DemonstrationsStatus, StoreWriter};
use aware_kube::{Decider, LifecycleDecider, open_store};
use aware_lifecycle::explain::{Query, explain};
use aware_lifecycle::manager::{ManagerConfig, fresh_agent};
use aware_sim::SimCluster;
use aware_store::fault::Switchable;
use aware_store::{
    DecisionQuery, DecisionRecord, EpisodeId, EpisodeMeta, EpisodeRecord, Spooled, StageRecord, StoreError, StoreStats,
    StoreUrl, TopMode, TrajectoryStore, Transition, TransitionFilter,
};
use sim::{cluster, observe};

const KEY: &str = "shop/web";
/// Intervals per window.
const WINDOW: u64 = 5;
/// How long a test waits for the store's writer before it gives up on it (a hang, not a time
/// the test measures).
const HANG: std::time::Duration = std::time::Duration::from_secs(60);

/// AWARE from a checkpoint whose agent is `fresh_agent(1)`; windows of [`WINDOW`] intervals.
fn decider() -> LifecycleDecider {
    LifecycleDecider::new(
        fresh_agent(1),
        ManagerConfig { episode_steps: WINDOW, ..ManagerConfig::default() },
        vec![],
        "the checkpoint",
    )
    .unwrap()
}

fn passes(d: &LifecycleDecider, c: &mut SimCluster, n: usize) {
    passes_of(KEY, d, c, n);
}

fn passes_of(key: &str, d: &LifecycleDecider, c: &mut SimCluster, n: usize) {
    let profile = Profile::default();
    for _ in 0..n {
        d.decide(key, &profile, &observe(c)).expect("decided");
    }
}

/// A controller with `--store url --spool spool` for `n` passes, then stopped.
fn recorded_passes(url: &str, spool: &std::path::Path, c: &mut SimCluster, n: usize) {
    let d = decider();
    let writer = open_store(url, Some(spool), &d).unwrap();
    let d = d.with_store(writer);
    passes(&d, c, n);
    d.finish();
}

fn read(url: &str) -> Box<dyn TrajectoryStore> {
    aware_store::open(&url.parse::<StoreUrl>().unwrap(), true).unwrap()
}

/// The app's episodes: (episode number, stage, policy, transitions, complete).
fn episodes(store: &dyn TrajectoryStore) -> Vec<(u64, String, String, usize, bool)> {
    episodes_of(KEY, store)
}

fn episodes_of(key: &str, store: &dyn TrajectoryStore) -> Vec<(u64, String, String, usize, bool)> {
    let mut out: Vec<_> = store
        .episodes(Some(&format!("aware@{key}")))
        .unwrap()
        .into_iter()
        .map(|r| {
            let (_, transitions) = store.episode(r.id).unwrap();
            (r.meta.episode, r.meta.stage.clone(), r.meta.policy.clone(), transitions.len(), r.is_complete())
        })
        .collect();
    out.sort_by_key(|e| e.0);
    out
}

/// A controller with `--store sqlite:…` records each pass's decision (`aware explain` reads
/// it back, steps one after another per app), the app's stage change and each window of
/// [`WINDOW`] outcomes as a complete episode of the fallback's transitions; restarted on the
/// same store, it goes on after what the store holds.
#[test]
fn what_a_live_decider_decides_is_recorded_for_explain() {
    let dir = tempfile::tempdir().unwrap();
    let url = format!("sqlite:{}", dir.path().join("aware.db").display());
    let spool = dir.path().join("spool");
    let mut c = cluster();

    recorded_passes(&url, &spool, &mut c, 21);

    let explained = explain(&url, KEY, Query::Last(100)).unwrap();
    let steps: Vec<u64> = explained.decisions.iter().map(|x| x.step).collect();
    assert_eq!(steps, (0..21).collect::<Vec<_>>());
    // Bootstrapping: the fallback acts in OFFLINE, and the log says what it saw and set.
    for x in &explained.decisions {
        assert_eq!(x.stage.name(), "offline");
        assert_eq!(x.acting_policy, "mpa");
        assert!(x.observation.is_some() && x.action.is_some(), "{x:?}");
    }
    let store = read(&url);
    let changes = store.stage_changes(Some(KEY)).unwrap();
    assert_eq!(changes.len(), 1, "{changes:?}");
    assert_eq!((changes[0].step, changes[0].from.as_str(), changes[0].to.as_str()), (0, "initialized", "offline"));
    // 20 outcomes after 21 passes: four windows.
    let want: Vec<_> = (0..4).map(|e| (e, "offline".to_string(), "mpa".to_string(), WINDOW as usize, true)).collect();
    assert_eq!(episodes(&*store), want);
    drop(store);

    // Restarted on the same store (no state file: the app starts over), it numbers on.
    recorded_passes(&url, &spool, &mut c, 11);
    let store = read(&url);
    let steps: Vec<u64> = store.decisions(KEY, DecisionQuery::Last(1000)).unwrap().iter().map(|r| r.step).collect();
    assert_eq!(steps, (0..32).collect::<Vec<_>>());
    let changes = store.stage_changes(Some(KEY)).unwrap();
    assert_eq!(changes.iter().map(|c| c.step).collect::<Vec<_>>(), [0, 21]);
    assert_eq!(episodes(&*store).iter().map(|e| e.0).collect::<Vec<_>>(), [0, 1, 2, 3, 4, 5]);
    assert_eq!(explain(&url, KEY, Query::Step(25)).unwrap().decisions.len(), 1);
}

fn metric(d: &LifecycleDecider, name: &str) -> f64 {
    let text = d.encode_metrics().unwrap();
    text.lines()
        .find_map(|l| l.strip_prefix(name).and_then(|rest| rest.strip_prefix(' ')))
        .unwrap_or_else(|| panic!("{name} not in\n{text}"))
        .parse()
        .unwrap()
}

/// The store goes away for fifteen passes and comes back: the decider goes on deciding, the
/// records of the outage wait in the spool (the metric says how many) and reach the store in
/// order once it returns, none refused, none twice.
#[test]
fn records_made_while_the_store_is_away_reach_it_when_it_returns() {
    let dir = tempfile::tempdir().unwrap();
    let url = format!("sqlite:{}", dir.path().join("aware.db").display());
    outage_drill(&url, KEY, &dir.path().join("spool"));
}

/// The same drill on a real PostgreSQL server (`bash .ci/run` starts one), under an app name
/// of its own so that earlier runs' records do not count.
#[test]
#[ignore = "needs PostgreSQL: set AWARE_TEST_POSTGRES_URL"]
fn records_made_while_postgres_is_away_reach_it_when_it_returns() {
    let url = std::env::var("AWARE_TEST_POSTGRES_URL")
        .expect("AWARE_TEST_POSTGRES_URL is not set: start servers with `eval \"$(bash .ci/services.sh start)\"`");
    let nanos = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap().as_nanos();
    let key = format!("drill-{}-{nanos}/web", std::process::id());
    let dir = tempfile::tempdir().unwrap();
    outage_drill(&url, &key, &dir.path().join("spool"));
}

fn outage_drill(url: &str, key: &str, spool: &std::path::Path) {
    let spool = spool.to_path_buf();
    let mut c = cluster();
    let d = decider();
    let (tx, rx) = std::sync::mpsc::channel();
    let opened = url.to_string();
    let writer = StoreWriter::start(
        "drill",
        move || {
            let inner = aware_store::open(&opened.parse::<StoreUrl>().unwrap(), false)?;
            let (store, switch) = Switchable::new(inner);
            tx.send(switch).unwrap();
            Spooled::new(Box::new(store), &spool, aware_store::DEFAULT_SPOOL_BYTES)
        },
        d.recorder().unwrap(),
        None,
        0,
    )
    .unwrap();
    let switch = rx.recv().unwrap();
    let d = d.with_store(writer);
    passes_of(key, &d, &mut c, 10);
    switch.set_up(false);
    passes_of(key, &d, &mut c, 15);
    // The writer spools what it is handed while the store is away.
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(20);
    while metric(&d, "aware_controller_store_spooled_operations") == 0.0 {
        assert!(std::time::Instant::now() < deadline, "nothing spooled during the outage");
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
    switch.set_up(true);
    passes_of(key, &d, &mut c, 10);
    assert_eq!(metric(&d, "aware_controller_store_records_refused_total"), 0.0);
    assert_eq!(metric(&d, "aware_controller_store_set_aside_operations"), 0.0);
    d.finish();
    let store = read(url);
    let steps: Vec<u64> = store.decisions(key, DecisionQuery::Last(1000)).unwrap().iter().map(|r| r.step).collect();
    assert_eq!(steps, (0..35).collect::<Vec<_>>(), "every decision once, in order");
    // 34 outcomes: six complete windows.
    let eps = episodes_of(key, &*store);
    assert_eq!(
        eps.iter().map(|e| (e.0, e.3, e.4)).collect::<Vec<_>>(),
        (0..6).map(|e| (e, 5, true)).collect::<Vec<_>>()
    );
    // Each change once, at the step of the first decision taken in the stage it moved to.
    let changes = store.stage_changes(Some(key)).unwrap();
    assert_eq!((changes[0].step, changes[0].from.as_str()), (0, "initialized"), "{changes:#?}");
    let mut seen = std::collections::HashSet::new();
    for change in &changes {
        assert!(seen.insert((change.step, change.to.clone())), "recorded twice: {change:?}");
        let at = store.decisions(key, DecisionQuery::Step(change.step)).unwrap();
        assert_eq!(at[0].stage, change.to, "{change:?}");
    }
}

/// A SQLite store (its directory, URL and spool) into which 101 passes over the cluster
/// returned were recorded (20 windows, 100 transitions, most of them the fallback's in
/// OFFLINE), and the transitions of the windows the fallback served alone while the agent
/// learned from it, at least a minibatch of them.
fn recorded_store() -> (tempfile::TempDir, String, std::path::PathBuf, SimCluster, usize) {
    let dir = tempfile::tempdir().unwrap();
    let url = format!("sqlite:{}", dir.path().join("aware.db").display());
    let spool = dir.path().join("spool");
    let mut c = cluster();
    recorded_passes(&url, &spool, &mut c, 101);
    let eps = episodes(&*read(&url));
    assert_eq!(eps.iter().map(|e| e.3).sum::<usize>(), 100);
    let fallbacks: usize =
        eps.iter().filter(|e| e.2 == "mpa" && (e.1 == "offline" || e.1 == "online")).map(|e| e.3).sum();
    assert!(fallbacks >= 64, "{eps:?}");
    (dir, url, spool, c, fallbacks)
}

/// Greedy actions of `policy` on a fixed spread of states.
fn actions(policy: &aware_agents::FrozenPolicy) -> Vec<f32> {
    let (dim, n) = (policy.state_dim(), 16);
    let states: Vec<f32> = (0..n * dim).map(|i| ((i * 37 % 101) as f32 / 50.0) - 1.0).collect();
    policy.greedy_batch(&states, n).expect("actions")
}

/// A controller restarted on the store learns offline again from the fallback's transitions the
/// store holds: at its first passes its agent trains (it holds a minibatch at once), where one
/// restarted without the store waits for 64 new transitions, its weights unchanged.
#[test]
fn a_restarted_controller_learns_again_from_the_fallbacks_transitions_in_the_store() {
    let (_dir, url, spool, mut c, fallbacks) = recorded_store();

    let restarted = decider();
    let writer = open_store(&url, Some(&spool), &restarted).unwrap();
    assert_eq!(writer.demonstrations.wait(HANG), DemonstrationsStatus::Read(fallbacks), "read from the store");
    let demonstrations = writer.demonstrations.clone();
    let restarted = restarted.with_store(writer);
    let without = decider();
    let (a0, b0) = (actions(&restarted.learner().unwrap()), actions(&without.learner().unwrap()));
    assert_eq!(a0, b0, "the same checkpoint's agent");
    for _ in 0..3 {
        let obs = observe(&mut c);
        restarted.decide(KEY, &Profile::default(), &obs).unwrap();
        without.decide(KEY, &Profile::default(), &obs).unwrap();
    }
    restarted.finish();
    assert_eq!(demonstrations.status(), DemonstrationsStatus::TakenUp);
    assert_ne!(actions(&restarted.learner().unwrap()), a0, "learned offline from the store's transitions");
    assert_eq!(actions(&without.learner().unwrap()), b0, "nothing to learn from yet");
}

/// A store whose first list of episodes (the writer's read of the fallback's transitions) says
/// it began and waits for the test to let it go on, at most [`HANG`]; every other call goes
/// straight to the store within.
struct Gated {
    inner: Box<dyn TrajectoryStore>,
    began: std::sync::mpsc::Sender<()>,
    gate: std::cell::RefCell<Option<std::sync::mpsc::Receiver<()>>>,
}

impl TrajectoryStore for Gated {
    fn begin_episode(&mut self, meta: &EpisodeMeta) -> Result<EpisodeId, StoreError> {
        self.inner.begin_episode(meta)
    }
    fn append(&mut self, episode: EpisodeId, transitions: &[Transition]) -> Result<(), StoreError> {
        self.inner.append(episode, transitions)
    }
    fn close_episode(&mut self, episode: EpisodeId, total_reward: f64) -> Result<(), StoreError> {
        self.inner.close_episode(episode, total_reward)
    }
    fn last_rewards(&self, agent: &str, n: usize) -> Result<Vec<f64>, StoreError> {
        self.inner.last_rewards(agent, n)
    }
    fn top_episodes(&self, app: &str, m: usize, mode: TopMode) -> Result<Vec<EpisodeRecord>, StoreError> {
        self.inner.top_episodes(app, m, mode)
    }
    fn sample(&self, filter: &TransitionFilter, n: usize, seed: u64) -> Result<Vec<Transition>, StoreError> {
        self.inner.sample(filter, n, seed)
    }
    fn episode(&self, id: EpisodeId) -> Result<(EpisodeRecord, Vec<Transition>), StoreError> {
        self.inner.episode(id)
    }
    fn episodes(&self, agent: Option<&str>) -> Result<Vec<EpisodeRecord>, StoreError> {
        let gate = self.gate.borrow_mut().take();
        if let Some(gate) = gate {
            let _ = self.began.send(());
            gate.recv_timeout(HANG).map_err(|_| StoreError::Unavailable("the test never let the read go on".into()))?;
        }
        self.inner.episodes(agent)
    }
    fn retain(&mut self, cutoff_s: f64) -> Result<u64, StoreError> {
        self.inner.retain(cutoff_s)
    }
    fn stats(&self) -> Result<StoreStats, StoreError> {
        self.inner.stats()
    }
    fn record_decisions(&mut self, decisions: &[DecisionRecord]) -> Result<(), StoreError> {
        self.inner.record_decisions(decisions)
    }
    fn decisions(&self, app: &str, query: DecisionQuery) -> Result<Vec<DecisionRecord>, StoreError> {
        self.inner.decisions(app, query)
    }
    fn record_stage_change(&mut self, change: &StageRecord) -> Result<(), StoreError> {
        self.inner.record_stage_change(change)
    }
    fn stage_changes(&self, app: Option<&str>) -> Result<Vec<StageRecord>, StoreError> {
        self.inner.stage_changes(app)
    }
}

/// Starting the store's writer waits for the store to open, not for the read of the fallback's
/// transitions it holds (100,000 of them can take long on a large store, and the controller
/// serves nothing before the writer has started): while that read is held, the writer has
/// started and the decider decides without them, its agent unchanged, its records queued. Once
/// the read is let go, the next pass takes them up (once) and the agent learns offline from
/// them; the records of the passes made meanwhile reach the store, in order.
#[test]
fn the_writer_starts_before_the_fallbacks_transitions_are_read_and_the_decider_takes_them_up_after() {
    let (_dir, url, spool, mut c, fallbacks) = recorded_store();

    let restarted = decider();
    let (began_tx, began) = std::sync::mpsc::channel();
    let (release, gate) = std::sync::mpsc::channel();
    let opened = url.clone();
    let writer = StoreWriter::start(
        "gated",
        move || {
            let inner = aware_store::open(&opened.parse::<StoreUrl>()?, false)?;
            let gated = Gated { inner, began: began_tx, gate: std::cell::RefCell::new(Some(gate)) };
            Spooled::new(Box::new(gated), &spool, aware_store::DEFAULT_SPOOL_BYTES)
        },
        restarted.recorder().unwrap(),
        None,
        aware_lifecycle::record::DEMONSTRATIONS_TAKEN_UP,
    )
    .unwrap();
    // Started, and the read is under way, held.
    began.recv_timeout(HANG).expect("the writer reads the fallback's transitions once the store is open");
    let demonstrations = writer.demonstrations.clone();
    assert_eq!(demonstrations.status(), DemonstrationsStatus::Reading);

    let restarted = restarted.with_store(writer);
    let a0 = actions(&restarted.learner().unwrap());
    passes(&restarted, &mut c, 3);
    assert_eq!(demonstrations.status(), DemonstrationsStatus::Reading, "nothing to take up while the read is held");
    assert_eq!(actions(&restarted.learner().unwrap()), a0, "nothing to learn from yet");

    release.send(()).expect("the read still waits after the writer started");
    assert_eq!(demonstrations.wait(HANG), DemonstrationsStatus::Read(fallbacks));
    passes(&restarted, &mut c, 1);
    assert_eq!(demonstrations.status(), DemonstrationsStatus::TakenUp, "taken up at the next pass");
    assert!(demonstrations.take().is_none(), "taken up once");
    passes(&restarted, &mut c, 2);
    restarted.finish();
    assert_eq!(demonstrations.status(), DemonstrationsStatus::TakenUp);
    assert_ne!(actions(&restarted.learner().unwrap()), a0, "learned offline from the store's transitions");

    // The six passes' decisions, those made during the read included, follow the first run's.
    let store = read(&url);
    let steps: Vec<u64> = store.decisions(KEY, DecisionQuery::Last(1000)).unwrap().iter().map(|r| r.step).collect();
    assert_eq!(steps, (0..107).collect::<Vec<_>>());
}
