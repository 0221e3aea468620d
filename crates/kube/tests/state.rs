//! `aware controller --state FILE`: what the deciders keep across a restart of the controller,
//! through the state file as the controller writes and reads it (`Context::save_state`,
//! `Context::take_up_state`), on observations of the simulator.

mod sim;

use aware_core::{Observation, Profile};
use aware_kube::state::StateFile;
use aware_kube::{Context, ControllerConfig, Decider, LifecycleDecider, MpaDefaultDecider};
use aware_lifecycle::Stage;
use aware_lifecycle::algorithm::LifecycleState;
use aware_lifecycle::manager::{ManagerConfig, fresh_agent};
use http::{Request, Response};
use kube::Client;
use kube::client::Body;
use sim::{cluster, observe};

const KEY: &str = "shop/web";

/// A controller context around `decider` keeping its state in `file` (no API call is made).
fn context<D: Decider>(decider: D, file: Option<&StateFile>) -> Context<D> {
    let (service, _handle) = tower_test::mock::pair::<Request<Body>, Response<Body>>();
    let ctx = Context::new(Client::new(service, "default"), ControllerConfig::default(), decider);
    match file {
        Some(f) => ctx.with_state(f.clone()),
        None => ctx,
    }
}

/// The MPA default restarted from the state file recommends as the one that ran on, interval
/// after interval, from the same history (as many samples, the same confidence); restarted
/// without it, its VPA starts over.
#[tokio::test]
async fn the_mpa_defaults_vpa_histories_survive_a_restart() {
    for vertical_cpu in [true, false] {
        restart_keeps_the_vpa_history(vertical_cpu);
    }
}

fn restart_keeps_the_vpa_history(vertical_cpu: bool) {
    let dir = tempfile::tempdir().unwrap();
    let file = StateFile::new(dir.path().join("state.json"));
    let profile = Profile::default();
    let mut c = cluster();
    let ran_on = context(MpaDefaultDecider::new(vertical_cpu), Some(&file));
    ran_on.take_up_state();
    for _ in 0..240 {
        ran_on.decider.decide(KEY, &profile, &observe(&mut c)).expect("decided");
    }
    ran_on.save_state();
    ran_on.release_state();
    let restarted = context(MpaDefaultDecider::new(vertical_cpu), Some(&file));
    restarted.take_up_state();
    let empty = context(MpaDefaultDecider::new(vertical_cpu), None);
    for _ in 0..20 {
        let obs = observe(&mut c);
        let a = ran_on.decider.decide(KEY, &profile, &obs).unwrap();
        let b = restarted.decider.decide(KEY, &profile, &obs).unwrap();
        empty.decider.decide(KEY, &profile, &obs).unwrap();
        assert_eq!(a, b, "restarted from the state");
    }
    let history = |d: &MpaDefaultDecider| {
        let saved = d.save();
        let (container, c) = &saved[KEY].vpa[0];
        (container.clone(), c.total_samples_count, c.first_sample_start_s, c.cpu_histogram.total_weight)
    };
    let (a, b, e) = (history(&ran_on.decider), history(&restarted.decider), history(&empty.decider));
    assert_eq!((&a.0, a.1, a.2), (&b.0, b.1, b.2), "the same samples since the same time");
    assert!((a.3 - b.3).abs() <= 1e-6 * a.3, "CPU history's weight: {} against {}", a.3, b.3);
    assert!(e.1 * 5 < a.1 && e.2 > a.2, "restarted empty, the VPA starts over: {e:?} against {a:?}");
    // The restarted controller saves what it took up and has seen since.
    restarted.save_state();
    let saved = file.read().unwrap().expect("a state");
    assert_eq!(saved.decider, "mpa");
    assert_eq!(saved.mpas[KEY].vpa[0].1.total_samples_count, b.1);
}

fn aware(identity: &str) -> LifecycleDecider {
    // Held to a reference no interval reaches: SERVING degrades within a few windows of 5.
    decider(identity, vec![(KEY.to_string(), LifecycleState::fresh(Stage::Serving, Some(1e6)))])
}

/// AWARE from a checkpoint named `identity` whose agent is `fresh_agent(1)`, placing
/// `checkpointed` apps; windows of 5 intervals.
fn decider(identity: &str, checkpointed: Vec<(String, LifecycleState)>) -> LifecycleDecider {
    LifecycleDecider::new(
        fresh_agent(1),
        ManagerConfig { episode_steps: 5, ..ManagerConfig::default() },
        checkpointed,
        "the checkpoint",
    )
    .unwrap()
    .with_checkpoint_identity(identity)
}

/// AWARE restarted from the state file resumes the stage a degradation left, not the
/// checkpoint's SERVING again; restarted beside another checkpoint's agent it takes up no
/// lifecycle and starts as the checkpoint says.
#[tokio::test]
async fn a_degraded_app_stays_degraded_across_a_restart() {
    let dir = tempfile::tempdir().unwrap();
    let file = StateFile::new(dir.path().join("state.json"));
    let profile = Profile::default();
    let mut c = cluster();
    let ran_on = context(aware("ck1"), Some(&file));
    ran_on.take_up_state();
    // Degraded within a few windows; saved while it retrains (some windows later the
    // bootstrapping check, on the app's fitted model, may find the fresh agent behind).
    for _ in 0..20 {
        ran_on.decider.decide(KEY, &profile, &observe(&mut c)).expect("decided");
    }
    let report = ran_on.decider.report();
    assert_eq!((report[0].stage, report[0].retraining), (Stage::Online, true), "{:?}", ran_on.decider.stage_changes());
    ran_on.save_state();
    ran_on.release_state();
    let saved = file.read().unwrap().expect("a state");
    assert_eq!((saved.decider.as_str(), saved.checkpoint.as_deref()), ("aware", Some("ck1")));

    let restarted = context(aware("ck1"), Some(&file));
    restarted.take_up_state();
    let obs = observe(&mut c);
    restarted.decider.decide(KEY, &profile, &obs).unwrap();
    let report = restarted.decider.report();
    assert_eq!((report[0].stage, report[0].retraining), (Stage::Online, true));
    let changes = restarted.decider.stage_changes();
    let last = changes.last().expect("a stage change");
    assert!(last.reason.contains("restored from the state"), "{changes:?}");

    restarted.release_state();
    let other = context(aware("ck2"), Some(&file));
    other.take_up_state();
    other.decider.decide(KEY, &profile, &obs).unwrap();
    assert_eq!(other.decider.report()[0].stage, Stage::Serving, "{:?}", other.decider.stage_changes());
}

/// Greedy actions of `policy` on a fixed spread of states.
fn actions(policy: &aware_agents::FrozenPolicy) -> Vec<f32> {
    let (dim, n) = (policy.state_dim(), 16);
    let states: Vec<f32> = (0..n * dim).map(|i| ((i * 37 % 101) as f32 / 50.0) - 1.0).collect();
    policy.greedy_batch(&states, n).expect("actions")
}

/// What the agent learned live survives a restart: the restarted controller's agent acts as the
/// one that ran on had learned to (a controller without the state, as the checkpoint's agent);
/// it is written beside the state file, named by its checksum, and what a later state no longer
/// names is removed. An agent that does not verify is set aside and the checkpoint's serves.
#[tokio::test]
async fn what_the_agent_learned_live_survives_a_restart() {
    let dir = tempfile::tempdir().unwrap();
    let file = StateFile::new(dir.path().join("state.json"));
    // The bootstrapping check never hands the app over (the agent would need ten times the
    // fallback's reward on its replays, the most a profile may ask), so the agent learns from
    // the fallback throughout.
    let mut profile = Profile::default();
    profile.lifecycle.t_online = 10.0;
    let mut c = cluster();
    let fresh = || decider("ck1", vec![]);
    let handed = actions(&fresh().learner().unwrap());
    let ran_on = context(fresh(), Some(&file));
    ran_on.take_up_state();
    ran_on.save_state();
    assert_eq!(file.read().unwrap().unwrap().learned, None, "nothing learned yet: no agent written");
    // Past the agent's first minibatch of the fallback's transitions.
    for _ in 0..100 {
        ran_on.decider.decide(KEY, &profile, &observe(&mut c)).expect("decided");
    }
    assert_eq!(ran_on.decider.report()[0].stage, Stage::Offline, "bootstrapping: the agent learns from the fallback");
    let learned = actions(&ran_on.decider.learner().unwrap());
    assert_ne!(learned, handed, "the agent learned offline from the fallback");
    ran_on.save_last_state();
    ran_on.release_state();
    let saved = file.read().unwrap().expect("a state");
    let id = saved.learned.clone().expect("the learned agent is named");
    let agent_dir = file.learned().dir.join(format!("agent-{id}"));
    assert!(agent_dir.join("checkpoint.json").exists(), "{}", agent_dir.display());

    let restarted = context(fresh(), Some(&file));
    restarted.take_up_state();
    assert_eq!(actions(&restarted.decider.learner().unwrap()), learned, "goes on from what it learned");
    // It learns on (its replay starts empty), and the state names the agent it has become; the
    // one before is removed.
    for _ in 0..100 {
        restarted.decider.decide(KEY, &profile, &observe(&mut c)).expect("decided");
    }
    restarted.save_last_state();
    let now = file.read().unwrap().unwrap().learned.expect("named");
    assert_ne!(now, id, "learned since");
    assert!(!agent_dir.exists(), "no longer named, removed");
    restarted.release_state();

    // A weight file damaged: set aside, and the checkpoint's agent learns from here.
    let now_dir = file.learned().dir.join(format!("agent-{now}"));
    let weights = now_dir.join("actor.safetensors");
    let mut bytes = std::fs::read(&weights).unwrap();
    let last = bytes.len() - 1;
    bytes[last] ^= 0x5a;
    std::fs::write(&weights, bytes).unwrap();
    let damaged = context(fresh(), Some(&file));
    damaged.take_up_state();
    assert_eq!(actions(&damaged.decider.learner().unwrap()), handed, "the checkpoint's agent");
    assert!(!now_dir.exists());
    let aside = file.learned().dir.join(format!("rejected-1-agent-{now}"));
    assert!(aside.join("actor.safetensors").exists(), "kept for inspection: {}", aside.display());
    // Where the agent cannot be written (FILE.learned is a file), the state is still written,
    // naming no agent, and the failure is counted.
    for _ in 0..100 {
        damaged.decider.decide(KEY, &profile, &observe(&mut c)).expect("decided");
    }
    std::fs::rename(file.learned().dir, dir.path().join("learned.kept")).unwrap();
    std::fs::write(file.learned().dir, b"in the way").unwrap();
    damaged.save_last_state();
    assert_eq!(file.read().unwrap().expect("written").learned, None);
    assert!(damaged.encode_metrics().contains("aware_controller_learned_save_failures_total 1"));
    std::fs::remove_file(file.learned().dir).unwrap();
    std::fs::rename(dir.path().join("learned.kept"), file.learned().dir).unwrap();
    damaged.save_last_state();
    let named = file.read().unwrap().unwrap().learned.expect("written once it can be");
    damaged.release_state();
    // Beside another checkpoint, what was learned from this one is not taken up, nor thrown
    // away: set aside, where the first save's clean-up leaves it.
    let other = context(fresh().with_checkpoint_identity("ck2"), Some(&file));
    other.take_up_state();
    assert_eq!(actions(&other.decider.learner().unwrap()), handed);
    other.save_last_state();
    assert_eq!(file.read().unwrap().unwrap().learned, None);
    let kept = file.learned().dir.join(format!("rejected-2-agent-{named}"));
    assert!(kept.join("checkpoint.json").exists(), "{}", kept.display());
}

/// A PPO agent's cloning of the fallback moves its weights without counting updates: what it
/// learned is written and taken up all the same.
#[tokio::test]
async fn what_a_ppo_agent_cloned_live_survives_a_restart() {
    let dir = tempfile::tempdir().unwrap();
    let file = StateFile::new(dir.path().join("state.json"));
    let profile = Profile::default();
    let mut c = cluster();
    let fresh = || {
        let agent = aware_lifecycle::LifecycleAgent::fresh(aware_lifecycle::Learner::Ppo, 1);
        let config = ManagerConfig { episode_steps: 5, ..ManagerConfig::default() };
        LifecycleDecider::new(agent, config, vec![], "the checkpoint").unwrap().with_checkpoint_identity("ck1")
    };
    let handed = actions(&fresh().learner().unwrap());
    let ran_on = context(fresh(), Some(&file));
    ran_on.take_up_state();
    for _ in 0..100 {
        ran_on.decider.decide(KEY, &profile, &observe(&mut c)).expect("decided");
    }
    let learned = actions(&ran_on.decider.learner().unwrap());
    assert_ne!(learned, handed, "the agent cloned the fallback");
    ran_on.save_last_state();
    ran_on.release_state();
    assert!(file.read().unwrap().unwrap().learned.is_some(), "the cloned agent is written");
    let restarted = context(fresh(), Some(&file));
    restarted.take_up_state();
    assert_eq!(actions(&restarted.decider.learner().unwrap()), learned);
}

/// An app served with a policy the agent learned live goes on SERVING with that policy after a
/// restart, the policy kept beside the state file by its checksum; one whose policy does not
/// verify retrains, as before the policy was kept.
#[tokio::test]
async fn an_app_served_with_a_policy_learned_live_keeps_it_across_a_restart() {
    use aware_kube::state::{SavedMpa, SavedState};
    use aware_lifecycle::live::SavedLifecycle;
    let dir = tempfile::tempdir().unwrap();
    let file = StateFile::new(dir.path().join("state.json"));
    let profile = Profile::default();
    let mut c = cluster();
    // As a controller that ran on would have saved it: the app SERVING with a policy retraining
    // froze (here another agent's), kept in the learned store.
    let policy = fresh_agent(7).frozen();
    let id = file.learned().write_policy(&policy.to_bytes()).unwrap();
    let lifecycle = LifecycleState { recent: vec![0.5; 3], ..LifecycleState::fresh(Stage::Serving, Some(-1e6)) };
    let mpa = SavedMpa {
        aware: Some(SavedLifecycle { lifecycle, served_by_live_agent: true }),
        policy: Some(id.clone()),
        ..SavedMpa::default()
    };
    // And an MPA no pass reaches in this test: what was saved for it, its policy included, is
    // kept as it was.
    let other_policy = fresh_agent(8).frozen();
    let other_id = file.learned().write_policy(&other_policy.to_bytes()).unwrap();
    let other = SavedMpa { policy: Some(other_id.clone()), ..mpa.clone() };
    let state = SavedState {
        decider: "aware".into(),
        checkpoint: Some("ck1".into()),
        learned: None,
        saved_at_s: 1.7e9,
        mpas: [(KEY.to_string(), mpa), ("shop/db".to_string(), other)].into(),
    };
    file.write(&state).unwrap();

    let restarted = context(decider("ck1", vec![]), Some(&file));
    restarted.take_up_state();
    restarted.decider.decide(KEY, &profile, &observe(&mut c)).unwrap();
    let report = restarted.decider.report();
    assert_eq!(
        (report[0].stage, report[0].retraining),
        (Stage::Serving, false),
        "{:?}",
        restarted.decider.stage_changes()
    );
    let served = restarted.decider.served_policy(KEY).expect("served with the policy kept");
    assert_eq!(actions(&served), actions(&policy));
    // Written again from the policy served where its file is gone.
    let path = file.learned().dir.join(format!("policy-{id}.cbor"));
    std::fs::remove_file(&path).unwrap();
    restarted.save_last_state();
    let saved = file.read().unwrap().unwrap();
    assert_eq!(saved.mpas[KEY].policy.as_deref(), Some(id.as_str()), "still named");
    assert_eq!(saved.mpas["shop/db"].policy.as_deref(), Some(other_id.as_str()), "not reached, kept");
    assert!(path.exists(), "written again");
    assert!(file.learned().dir.join(format!("policy-{other_id}.cbor")).exists());
    restarted.release_state();

    // Damaged: set aside, and the app retrains, served by the fallback meanwhile.
    let mut bytes = std::fs::read(&path).unwrap();
    bytes[10] ^= 0x01;
    std::fs::write(&path, bytes).unwrap();
    let damaged = context(decider("ck1", vec![]), Some(&file));
    damaged.take_up_state();
    damaged.decider.decide(KEY, &profile, &observe(&mut c)).unwrap();
    let report = damaged.decider.report();
    assert_eq!((report[0].stage, report[0].retraining), (Stage::Online, true));
    assert!(damaged.decider.served_policy(KEY).is_none());
    assert!(file.learned().dir.join(format!("rejected-1-policy-{id}.cbor")).exists());
    damaged.save_last_state();
    assert_eq!(file.read().unwrap().unwrap().mpas[KEY].policy, None);
}

/// A second controller given the same state directory while the first writes there neither
/// takes up nor writes a state: it would overwrite the first's MPAs with its own.
#[tokio::test]
async fn a_second_controller_on_the_same_state_directory_keeps_out() {
    let dir = tempfile::tempdir().unwrap();
    let file = StateFile::new(dir.path().join("state.json"));
    let profile = Profile::default();
    let mut c = cluster();
    let first = context(MpaDefaultDecider::new(false), Some(&file));
    first.take_up_state();
    first.decider.decide(KEY, &profile, &observe(&mut c)).unwrap();
    first.save_state();
    let written = std::fs::read(&file.path).unwrap();
    let second = context(MpaDefaultDecider::new(false), Some(&file));
    second.take_up_state();
    second.decider.decide("other/app", &profile, &observe(&mut c)).unwrap();
    second.save_state();
    assert_eq!(std::fs::read(&file.path).unwrap(), written, "the second controller wrote over the first's state");
    assert!(second.decider.save().contains_key("other/app"));
    // Once the first lets go, a controller started then takes it up.
    first.release_state();
    let third = context(MpaDefaultDecider::new(false), Some(&file));
    third.take_up_state();
    third.save_state();
    assert!(file.read().unwrap().expect("a state").mpas.contains_key(KEY));
}

/// A decider that keeps state for two MPAs and records the listings and forgetting the
/// controller's watch reports.
#[derive(Default)]
struct Listings {
    listed: std::sync::Mutex<Vec<Option<String>>>,
    forgotten: std::sync::Mutex<Vec<String>>,
}

impl Decider for Listings {
    fn name(&self) -> &str {
        "listings"
    }

    fn decide(
        &self,
        _key: &str,
        _profile: &Profile,
        obs: &Observation,
    ) -> Result<aware_core::Recommendation, aware_core::RecommenderError> {
        Err(aware_core::RecommenderError::Other(format!("not deciding at {} s", obs.time_s)))
    }

    fn keys(&self) -> Vec<String> {
        vec!["shop/web".into(), "shop/gone".into()]
    }

    fn forget(&self, key: &str) {
        self.forgotten.lock().unwrap().push(key.to_string());
    }

    fn listed(&self, namespace: Option<&str>) {
        self.listed.lock().unwrap().push(namespace.map(str::to_string));
    }
}

/// The watch's completed listing reaches the decider with the namespace it covered (where the
/// hour the state file's unreached MPAs are kept for starts), and what the decider keeps for an
/// MPA the listing did not show (deleted while the watch was down: a re-list reports no
/// deletions) is forgotten.
#[tokio::test]
async fn a_completed_listing_reaches_the_decider_and_forgets_what_it_did_not_list() {
    use kube::runtime::watcher::Event;
    let (service, _handle) = tower_test::mock::pair::<Request<Body>, Response<Body>>();
    let config = ControllerConfig { namespace: Some("shop".into()), ..ControllerConfig::default() };
    let ctx = Context::new(Client::new(service, "default"), config, Listings::default());
    let web: aware_kube::MultidimPodAutoscaler = serde_json::from_value(serde_json::json!({
        "apiVersion": "autoscaling.k8s.io/v1alpha1",
        "kind": "MultidimPodAutoscaler",
        "metadata": {"name": "web", "namespace": "shop"},
        "spec": {"scaleTargetRef": {"apiVersion": "apps/v1", "kind": "Deployment", "name": "web"}},
    }))
    .unwrap();
    aware_kube::watch_event(&ctx, &Event::Init);
    aware_kube::watch_event(&ctx, &Event::InitApply(web.clone()));
    assert!(ctx.decider.listed.lock().unwrap().is_empty(), "a listing that has only begun is not one");
    assert!(ctx.decider.forgotten.lock().unwrap().is_empty());
    aware_kube::watch_event(&ctx, &Event::InitDone);
    assert_eq!(*ctx.decider.listed.lock().unwrap(), [Some("shop".to_string())]);
    assert_eq!(*ctx.decider.forgotten.lock().unwrap(), ["shop/gone"]);
    // Changes after the listing forget nothing.
    aware_kube::watch_event(&ctx, &Event::Apply(web));
    assert_eq!(ctx.decider.forgotten.lock().unwrap().len(), 1);
}
