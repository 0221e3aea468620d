//! Helpers shared by the store's integration tests, and the suite every backend must pass.
#![allow(dead_code)]
use aware_store::{EpisodeMeta, StoreError, TopMode, TrajectoryStore, Transition, TransitionFilter};

pub fn meta(agent: &str, app: &str, episode: u64, policy: &str) -> EpisodeMeta {
    EpisodeMeta {
        agent: agent.into(),
        app: app.into(),
        episode,
        stage: "online".into(),
        policy: policy.into(),
        state_dim: 4,
        action_dim: 2,
        started_at_s: 1_700_000_000.0 + episode as f64,
    }
}

/// State encodes (episode, step) so any transition read back can be traced to its origin.
pub fn transition(episode: u64, step: u32) -> Transition {
    let s = |k: f32| vec![episode as f32, step as f32, k, 0.5];
    Transition {
        step,
        state: s(0.0),
        action: vec![step as f32 * 0.1, -1.0],
        reward: step as f32 * 0.01,
        next_state: s(1.0),
        done: false,
    }
}

/// Writes a closed episode of `len` steps with the given total reward.
pub fn write(store: &mut dyn TrajectoryStore, m: &EpisodeMeta, len: u32, total: f64) -> i64 {
    let id = store.begin_episode(m).unwrap();
    let steps: Vec<Transition> = (0..len).map(|s| transition(m.episode, s)).collect();
    store.append(id, &steps[..len as usize / 2]).unwrap();
    store.append(id, &steps[len as usize / 2..]).unwrap();
    store.close_episode(id, total).unwrap();
    id
}

pub fn run_suite(mut open: impl FnMut() -> Box<dyn TrajectoryStore>) {
    let mut store = open();
    // Episodes 0..10 of agent a on app x (rewards 0, 10, …, 90), 5 of agent b on app y by mpa.
    let mut ids = Vec::new();
    for e in 0..10 {
        ids.push(write(store.as_mut(), &meta("a", "x", e, "agent"), 20, e as f64 * 10.0));
    }
    for e in 0..5 {
        write(store.as_mut(), &meta("b", "y", e, "mpa"), 10, 100.0 - e as f64);
    }
    // An unclosed episode: visible as incomplete, never in training reads.
    let open_id = store.begin_episode(&meta("a", "x", 10, "agent")).unwrap();
    store.append(open_id, &[transition(10, 0)]).unwrap();

    assert_eq!(store.last_rewards("a", 3).unwrap(), vec![90.0, 80.0, 70.0], "most recent first");
    assert_eq!(store.last_rewards("a", 50).unwrap().len(), 10, "the open episode is excluded");
    assert!(store.last_rewards("nobody", 5).unwrap().is_empty());

    let best: Vec<f64> =
        store.top_episodes("x", 3, TopMode::Best).unwrap().iter().map(|r| r.total_reward.unwrap()).collect();
    assert_eq!(best, vec![90.0, 80.0, 70.0]);
    let both: Vec<f64> =
        store.top_episodes("x", 4, TopMode::BestAndWorst).unwrap().iter().map(|r| r.total_reward.unwrap()).collect();
    assert_eq!(both, vec![90.0, 80.0, 0.0, 10.0]);
    assert_eq!(
        store.top_episodes("x", 50, TopMode::BestAndWorst).unwrap().len(),
        10,
        "no duplicates when m > episodes"
    );

    // Read-back is exact.
    let (rec, transitions) = store.episode(ids[3]).unwrap();
    assert!(rec.is_complete());
    assert_eq!((rec.meta.episode, rec.length, rec.total_reward), (3, 20, Some(30.0)));
    assert_eq!(transitions, (0..20).map(|s| transition(3, s)).collect::<Vec<_>>());
    let (open_rec, _) = store.episode(open_id).unwrap();
    assert!(!open_rec.is_complete());

    // Minibatches: deterministic per seed, filtered, never from the open episode.
    let by_agent = TransitionFilter { agent: Some("a".into()), ..Default::default() };
    let batch = store.sample(&by_agent, 64, 7).unwrap();
    assert_eq!(batch.len(), 64);
    assert_eq!(batch, store.sample(&by_agent, 64, 7).unwrap());
    assert_ne!(batch, store.sample(&by_agent, 64, 8).unwrap());
    assert!(batch.iter().all(|t| t.state[0] < 10.0), "never the unclosed episode 10");
    let fallback = TransitionFilter { policy: Some("mpa".into()), ..Default::default() };
    let b = store.sample(&fallback, 32, 1).unwrap();
    assert!(b.iter().all(|t| t.state[0] < 5.0 && t.state.len() == 4));
    assert!(
        store.sample(&TransitionFilter { app: Some("zzz".into()), ..Default::default() }, 8, 1).unwrap().is_empty()
    );

    // Bad writes are refused with the reason and change nothing.
    let mut wrong = transition(10, 1);
    wrong.state.push(0.0);
    let err = store.append(open_id, &[wrong]).unwrap_err().to_string();
    assert!(err.contains("state has dimension 5") && err.contains("declared 4"), "{err}");
    assert!(store.append(open_id, &[transition(10, 5)]).unwrap_err().to_string().contains("out of order"));
    let mut nan = transition(10, 1);
    nan.reward = f32::NAN;
    assert!(store.append(open_id, &[nan]).unwrap_err().to_string().contains("NaN"));
    assert!(store.append(ids[0], &[transition(0, 20)]).unwrap_err().to_string().contains("closed"));
    assert!(
        store.begin_episode(&meta("a", "x", 3, "agent")).unwrap_err().to_string().contains("already has an episode 3")
    );
    assert!(matches!(store.episode(999_999), Err(StoreError::UnknownEpisode(_))));

    let stats = store.stats().unwrap();
    assert_eq!((stats.episodes, stats.incomplete_episodes, stats.transitions), (16, 1, 10 * 20 + 5 * 10 + 1));
    assert_eq!(stats.agents, vec!["a".to_string(), "b".to_string()]);

    // Retention drops old episodes (not the open one).
    let dropped = store.retain(1_700_000_000.0 + 5.0).unwrap();
    assert_eq!(dropped, 5 + 5, "agent a's episodes 0–4 and all of b's");
    assert_eq!(store.last_rewards("a", 50).unwrap().len(), 5);
    assert!(store.episode(ids[0]).is_err());
    store.close_episode(open_id, 1.0).unwrap();
    drop(store);

    // Everything acknowledged is still there after reopening.
    let store = open();
    assert_eq!(store.last_rewards("a", 2).unwrap(), vec![1.0, 90.0]);
    assert_eq!(store.stats().unwrap().incomplete_episodes, 0);
}

fn decision(app: &str, step: u64, n: u64) -> aware_store::DecisionRecord {
    aware_store::DecisionRecord {
        agent: "aware".into(),
        app: app.into(),
        step,
        stage: "serving".into(),
        acting_policy: "aware".into(),
        guard: "passed".into(),
        detail: serde_json::json!({ "n": n, "action": { "replicas": step } }),
    }
}

/// Decisions and stage changes: round trips, `Step`/`Last` semantics, refusals, durability
/// across a reopen.
pub fn run_lifecycle_log_suite(mut open: impl FnMut() -> Box<dyn TrajectoryStore>) {
    use aware_store::{DecisionQuery, StageRecord};
    let mut s = open();
    let mut batch: Vec<_> = (0..10).map(|k| decision("a", k, k)).collect();
    batch.push(decision("b", 3, 100));
    s.record_decisions(&batch).unwrap();
    // A second record at step 9 of app a (a later run into the same store).
    s.record_decisions(&[decision("a", 9, 99)]).unwrap();
    let change = StageRecord {
        agent: "aware".into(),
        app: "a".into(),
        step: 100,
        from: "offline".into(),
        to: "online".into(),
        reason: "agent earned 1.0 against 0.9".into(),
    };
    s.record_stage_change(&change).unwrap();
    s.record_stage_change(&StageRecord { app: "b".into(), ..change.clone() }).unwrap();
    drop(s);

    let s = open();
    let last = s.decisions("a", DecisionQuery::Last(3)).unwrap();
    let ns: Vec<u64> = last.iter().map(|d| d.detail["n"].as_u64().unwrap()).collect();
    assert_eq!(ns, vec![8, 9, 99], "the three most recent, oldest first");
    let at9 = s.decisions("a", DecisionQuery::Step(9)).unwrap();
    assert_eq!(at9.len(), 2);
    assert_eq!(at9[0], decision("a", 9, 9));
    assert_eq!(s.decisions("b", DecisionQuery::Last(10)).unwrap(), vec![decision("b", 3, 100)]);
    assert!(s.decisions("c", DecisionQuery::Last(10)).unwrap().is_empty());
    assert!(s.decisions("a", DecisionQuery::Step(50)).unwrap().is_empty());
    assert_eq!(s.stage_changes(Some("a")).unwrap(), vec![change.clone()]);
    assert_eq!(s.stage_changes(None).unwrap().len(), 2);
    drop(s);

    let mut s = open();
    let mut bad = decision("a", 1, 1);
    bad.detail = serde_json::json!([1, 2]);
    let err = s.record_decisions(&[decision("a", 20, 20), bad]).unwrap_err().to_string();
    assert!(err.contains("detail") && err.contains("not a JSON object"), "{err}");
    assert!(s.decisions("a", DecisionQuery::Step(20)).unwrap().is_empty(), "a refused batch writes nothing");
    let err = s.record_stage_change(&StageRecord { app: String::new(), ..change }).unwrap_err().to_string();
    assert!(err.contains("app"), "{err}");
}
