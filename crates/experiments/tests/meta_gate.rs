//! The lifecycle manager asking the meta-learner about each app's workload through lab's
//! `WorkloadEmbedder` seam (the manager knows nothing of `aware-meta`): an app the meta-learner
//! cannot embed, or whose workload is unlike its training pool's, is served by the fallback even
//! in SERVING, and the decision log in the store says why; a known workload lets the agent act.

use aware_agents::ddpg::{Ddpg, DdpgConfig};
use aware_env::STATE_DIM;
use aware_lab::embed::WorkloadEmbedder;
use aware_lab::progress::Silent;
use aware_lab::workload::{Workload, WorkloadSpec};
use aware_lifecycle::Stage;
use aware_lifecycle::manager::{AGENT_ACTION_DIM, ManagerConfig};
use aware_lifecycle::record::StoreSink;
use aware_lifecycle::run::{Plan, run_agent};
use aware_meta::{EpisodeFilter, MetaConfig, MetaLearner, OodDetector, StoreEmbedder};
use aware_store::{DecisionQuery, SqliteStore, Sync, TrajectoryStore};

fn agent() -> Ddpg {
    Ddpg::new(STATE_DIM, AGENT_ACTION_DIM, DdpgConfig { hidden: vec![16, 16], ..DdpgConfig::default() }, 3)
}

fn meta() -> MetaLearner {
    let config = MetaConfig {
        hidden: 8,
        fc: 8,
        embedding: 4,
        trajectories: 3,
        min_trajectories: 2,
        ..MetaConfig::aware(STATE_DIM + AGENT_ACTION_DIM + 1)
    };
    MetaLearner::new(config, 11).unwrap()
}

/// Runs `workload` for two 15-interval episodes, every app held in SERVING (the agent would
/// act at every interval), recording into `store` and asking `embedder`.
fn serve(
    workload: &Workload,
    store: &mut SqliteStore,
    embedder: Option<&mut dyn WorkloadEmbedder>,
) -> Vec<aware_lifecycle::manager::Counts> {
    let plan = Plan::new(workload, 30, 15).unwrap();
    let config =
        ManagerConfig { episode_steps: 15, fixed_stage: Some(Stage::Serving), log: true, ..Default::default() };
    let sink = StoreSink::new(store);
    let mut sink = match embedder {
        Some(e) => sink.with_embedder(e),
        None => sink,
    };
    let (arm, _) = run_agent(workload, &plan, agent(), "aware", &config, &mut sink, &Silent).unwrap();
    arm.counts
}

#[test]
fn the_lifecycle_keeps_the_fallback_for_workloads_the_meta_learner_cannot_vouch_for() {
    let workload = Workload::load(&WorkloadSpec { apps: 2, seed: 7, steps: 30, ..WorkloadSpec::default() }).unwrap();
    let names: Vec<String> = workload.apps.iter().map(|a| a.name.clone()).collect();
    let dir = tempfile::tempdir().unwrap();
    let mut store = SqliteStore::open(&dir.path().join("aware.db"), Sync::Normal).unwrap();

    // No history: nothing to embed, so the fallback serves from the first interval and says why.
    let mut embedder = StoreEmbedder::new(meta(), None);
    let counts = serve(&workload, &mut store, Some(&mut embedder));
    for (c, name) in counts.iter().zip(&names) {
        assert_eq!(c.agent_actions, 0, "{name}: {c:?}");
        assert_eq!(c.workload_holds, 30, "{c:?}");
        // Before the run no trajectory, after the first episode one, fewer than the two the
        // meta-learner needs; after the second, two: the last verdict is an embedding.
        assert!(c.workload_verdict.as_deref().unwrap().contains("known workload"), "{c:?}");
    }
    let first = store.decisions(&names[0], DecisionQuery::Step(0)).unwrap();
    assert_eq!(first.len(), 1);
    assert_eq!(first[0].acting_policy, "mpa");
    assert!(first[0].guard.starts_with("fallback: no workload embedding for"), "{}", first[0].guard);
    let second_episode = store.decisions(&names[0], DecisionQuery::Step(15)).unwrap();
    assert!(second_episode[0].guard.contains("the meta-learner needs at least 2"), "{}", second_episode[0].guard);

    // The pool: these apps' own embeddings, and one 20 away from them, so that the threshold
    // (the pool's largest leave-one-out distance) holds what more episodes move the embeddings
    // by. Known workloads: the agent acts.
    // (The detector knows embeddings as the meta-learner makes them; `values` is what the base
    // learner reads, at unit length.)
    let pool: Vec<Vec<f32>> =
        names.iter().map(|n| embedder.cache.embedding(&store, n, &embedder.learner).unwrap().to_vec()).collect();
    let unit = embedder.embed(&store, &names[0]).unwrap().values;
    assert!((unit.iter().map(|v| v * v).sum::<f32>().sqrt() - 1.0).abs() < 1e-5, "{unit:?}");
    let mut wide = pool.clone();
    wide.push(pool[0].iter().map(|v| v + 10.0).collect());
    let mut known = StoreEmbedder::new(meta(), Some(OodDetector::fit(wide, 1, 1.0).unwrap()));
    let counts = serve(&workload, &mut store, Some(&mut known));
    for c in &counts {
        assert_eq!((c.agent_actions, c.workload_holds), (30, 0), "{c:?}");
        // What the detector read, beside its threshold.
        let verdict = c.workload_verdict.as_deref().unwrap();
        assert!(verdict.starts_with("known workload (OOD score ") && verdict.contains("threshold"), "{verdict}");
    }

    // A pool far from these apps: their workloads are out of distribution, the fallback serves.
    let far: Vec<Vec<f32>> = pool.iter().map(|e| e.iter().map(|v| v + 100.0).collect()).collect();
    let mut strange = StoreEmbedder::new(meta(), Some(OodDetector::fit(far, 1, 1.0).unwrap()));
    let counts = serve(&workload, &mut store, Some(&mut strange));
    for c in &counts {
        assert_eq!((c.agent_actions, c.workload_holds), (0, 30), "{c:?}");
        assert!(c.workload_verdict.as_deref().unwrap().starts_with("workload out of distribution"), "{c:?}");
    }
    let last = store.decisions(&names[1], DecisionQuery::Last(1)).unwrap();
    assert!(last[0].guard.starts_with("fallback: workload out of distribution (OOD score"), "{}", last[0].guard);

    // Stages do not move on episodes the meta-learner held back: ONLINE apps served by the
    // fallback throughout are neither promoted on its rewards nor judged by them.
    let plan = Plan::new(&workload, 120, 15).unwrap();
    let config = ManagerConfig { episode_steps: 15, bootstrapping: Some(false), log: true, ..Default::default() };
    let mut sink = StoreSink::new(&mut store).with_embedder(&mut strange);
    let (arm, _) = run_agent(&workload, &plan, agent(), "aware", &config, &mut sink, &Silent).unwrap();
    assert!(arm.final_stages.iter().all(|s| *s == Stage::Online), "{:?}", arm.final_stages);
    assert!(arm.stages.iter().all(|c| c.from == Stage::Initialized), "{:?}", arm.stages);
    assert!(arm.counts.iter().all(|c| c.agent_actions == 0 && c.workload_holds == 120), "{:?}", arm.counts);

    // Without a meta-learner nothing is held.
    let counts = serve(&workload, &mut store, None);
    assert!(counts.iter().all(|c| c.workload_holds == 0 && c.agent_actions == 30 && c.workload_verdict.is_none()));
}

/// A base learner conditioned on the meta-learner's embedding (`aware run --meta`): it acts for
/// an app only once the app has an embedding, read from the episodes the fallback drove, and
/// reads it beside the state; explanations name the embedding's dimensions.
#[test]
fn a_conditioned_agent_waits_for_each_apps_embedding_and_reads_it_beside_the_state() {
    let workload = Workload::load(&WorkloadSpec { apps: 2, seed: 9, steps: 150, ..WorkloadSpec::default() }).unwrap();
    let names: Vec<String> = workload.apps.iter().map(|a| a.name.clone()).collect();
    let dir = tempfile::tempdir().unwrap();
    let mut store = SqliteStore::open(&dir.path().join("aware.db"), Sync::Normal).unwrap();
    let conditioned =
        Ddpg::new(STATE_DIM + 4, AGENT_ACTION_DIM, DdpgConfig { hidden: vec![16, 16], ..DdpgConfig::default() }, 3);
    let mut embedder = StoreEmbedder::filtered(meta(), None, lifecycle_fallback_episodes());
    let plan = Plan::new(&workload, 60, 15).unwrap();
    let config =
        ManagerConfig { episode_steps: 15, fixed_stage: Some(Stage::Serving), log: true, ..Default::default() };
    let mut sink = StoreSink::new(&mut store).with_embedder(&mut embedder);
    let (arm, _) = run_agent(&workload, &plan, conditioned, "aware", &config, &mut sink, &Silent).unwrap();
    // Two fallback episodes before the meta-learner (needing 2) can embed; then the agent acts
    // wherever the guard lets it (this untrained agent's cuts can leave an episode starting
    // with no pod ready, since episodes go on from one another: the fallback acts there).
    for c in &arm.counts {
        assert_eq!(c.workload_holds, 30, "{c:?}");
        assert_eq!(c.agent_actions + c.guard_fallbacks, 30, "{c:?}");
        assert!(c.agent_actions > 0, "{c:?}");
        assert!(c.workload_verdict.as_deref().unwrap().starts_with("known workload"), "{c:?}");
    }
    let held = store.decisions(&names[0], DecisionQuery::Step(0)).unwrap();
    assert!(held[0].guard.starts_with("fallback: no workload embedding for"), "{}", held[0].guard);
    let acted = store.decisions(&names[0], DecisionQuery::Step(30)).unwrap();
    assert_eq!(acted[0].acting_policy, "aware");
    let features: Vec<String> = acted[0].detail["attribution"][0]["features"]
        .as_array()
        .unwrap()
        .iter()
        .map(|f| f["feature"].as_str().unwrap().to_string())
        .collect();
    assert_eq!(features.len(), STATE_DIM + 1, "{features:?}");
    assert!(features.iter().any(|f| f == "workload_embedding"), "{features:?}");
    // The agent's own episodes are recorded as its own and not read back into the embedding.
    let episodes = store.episodes(Some(&format!("aware@{}", names[0]))).unwrap();
    let policies: Vec<&str> = episodes.iter().map(|e| e.meta.policy.as_str()).collect();
    assert_eq!(policies, ["mpa", "mpa", "aware", "aware"]);

    // Bootstrapping: the conditioned agent learns from the fallback's transitions once the app
    // is embedded, and the bootstrapping check tries it with the embedding.
    let mut store = SqliteStore::open(&dir.path().join("boot.db"), Sync::Normal).unwrap();
    let small = DdpgConfig { hidden: vec![16, 16], warmup: 16, batch_size: 16, ..DdpgConfig::default() };
    let conditioned = Ddpg::new(STATE_DIM + 4, AGENT_ACTION_DIM, small, 3);
    let mut embedder = StoreEmbedder::filtered(meta(), None, lifecycle_fallback_episodes());
    let config = ManagerConfig { episode_steps: 15, log: true, ..Default::default() };
    let mut sink = StoreSink::new(&mut store).with_embedder(&mut embedder);
    let long = Plan::new(&workload, 150, 15).unwrap();
    let (arm, agent) = run_agent(&workload, &long, conditioned, "aware", &config, &mut sink, &Silent).unwrap();
    // It learns only from transitions read with the embedding (from the third episode on),
    // and the check tries it only with one: the first at the third episode's end (step 45).
    assert!(agent.updates() > 0);
    let promoted: Vec<_> = arm.stages.iter().filter(|c| c.from == Stage::Offline).collect();
    assert!(!promoted.is_empty(), "{:?}", arm.stages);
    assert!(promoted.iter().all(|c| c.step >= 45), "{promoted:?}");
}

/// The episodes the lifecycle's fallback drove, at least two of them.
fn lifecycle_fallback_episodes() -> EpisodeFilter {
    EpisodeFilter {
        agent_prefix: format!("{}@", aware_lifecycle::record::AGENT),
        policy: "mpa".into(),
        min_episodes: 2,
        episode_steps: 15,
    }
}

/// The pool's base learner acts in the lifecycle agent's action space, so a kept one can be the
/// lifecycle's agent (`aware run --meta`).
#[test]
fn the_pool_and_the_lifecycle_act_in_one_action_space() {
    assert_eq!(aware_meta::pool::ACTIONS, aware_lifecycle::manager::AGENT_ACTIONS);
    assert_eq!(aware_meta::pool::ACTIONS.space().dim(), AGENT_ACTION_DIM);
}
