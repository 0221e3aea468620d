//! The lifecycle with a PPO agent: bootstrapping behaviour-clones the fallback, and without
//! bootstrapping PPO learns on-policy from its own samples, one rollout per app.

use aware_agents::Experience;
use aware_env::ActionKind;
use aware_lab::faults::Faulty;
use aware_lab::progress::Silent;
use aware_lab::rollout::rollout;
use aware_lab::workload::{Workload, WorkloadSpec};
use aware_lifecycle::manager::{Manager, ManagerConfig};
use aware_lifecycle::{Learner, LifecycleAgent, Stage};

fn workload(apps: usize, bootstrapping: bool) -> (Workload, tempfile::TempDir) {
    let dir = tempfile::tempdir().unwrap();
    let profile = dir.path().join("profile.yaml");
    std::fs::write(&profile, format!("bootstrapping: {bootstrapping}\n")).unwrap();
    let spec = WorkloadSpec { apps, seed: 4, profile: Some(profile), steps: 400, ..WorkloadSpec::default() };
    (Workload::load(&spec).unwrap(), dir)
}

/// Mean squared distance between the agent's greedy actions and the actions taken.
fn imitation_error(agent: &LifecycleAgent, transitions: &[Experience]) -> f32 {
    let total: f32 = transitions
        .iter()
        .map(|e| {
            let a = agent.greedy(&e.state).unwrap();
            a.iter().zip(&e.action).map(|(x, y)| (x - y.clamp(-1.0, 1.0)).powi(2)).sum::<f32>()
        })
        .sum();
    total / transitions.len() as f32
}

/// While the fallback bootstraps, the PPO agent clones what it did: its greedy actions in the
/// fallback's states come far closer to the fallback's than an untrained policy's, and every
/// transition the fallback made is kept as a demonstration.
#[test]
fn a_ppo_agent_bootstraps_by_cloning_the_fallback() {
    let (w, _dir) = workload(3, true);
    let config = ManagerConfig { episode_steps: 100, log: true, agent: Learner::Ppo, ..Default::default() };
    let untrained = LifecycleAgent::fresh(Learner::Ppo, 7);
    let mut manager = Manager::new(&w, LifecycleAgent::fresh(Learner::Ppo, 7), config).unwrap();
    assert_eq!(manager.stages(), [Stage::Offline; 3]);
    let mut env = w.env(ActionKind::Continuous, 100, w.trace_seed);
    // One episode: no bootstrapping check has run yet, so the fallback acts throughout.
    rollout(&mut env, &mut manager, w.trace_seed, 100, &mut [], &Silent).unwrap();
    let log = manager.take_log();
    let transitions: Vec<Experience> = log.transitions.into_iter().flatten().collect();
    assert_eq!(transitions.len(), 300);
    assert!(log.decisions.iter().all(|d| d.acting_policy == "mpa"));
    // The fallback scaled: the demonstrations are not all holds.
    assert!(transitions.iter().any(|e| e.action.iter().any(|a| a.abs() > 0.05)));
    let agent = manager.into_agent();
    assert_eq!(agent.stored(), 300);
    assert_eq!(agent.updates(), 0, "cloning is not a PPO update");
    let (before, after) = (imitation_error(&untrained, &transitions), imitation_error(&agent, &transitions));
    assert!(after < 0.3 * before, "imitation error {after} after cloning against {before} untrained");
}

/// Where an interval's utilisation is carried from an earlier one (here every seventh interval
/// is marked so, as a lagging metrics pipeline marks it), PPO learning online observes only the
/// transitions measured at both ends that it acted in: at the others its rollout is cut, as at
/// an interval the fallback acted in.
#[test]
fn ppo_learns_nothing_across_a_carried_state() {
    let (w, _dir) = workload(3, false);
    let config = ManagerConfig {
        episode_steps: 100,
        online_learning: true,
        log: true,
        agent: Learner::Ppo,
        ..ManagerConfig::default()
    };
    let mut manager = Manager::new(&w, LifecycleAgent::fresh(Learner::Ppo, 5), config).unwrap();
    let mut arena = Faulty::new(w.env(ActionKind::Continuous, 100, w.trace_seed));
    arena.carried_every = Some(7);
    rollout(&mut arena, &mut manager, w.trace_seed, 100, &mut [], &Silent).unwrap();
    let log = manager.take_log();
    assert_eq!(log.decisions.len(), 300);
    // Interval t (from 1) ends in a carried state when 7 divides t, and starts in one when 7
    // divides t − 1; decisions come interval by interval, app by app.
    let measured = |t: usize| !(t.is_multiple_of(7) || (t > 1 && (t - 1).is_multiple_of(7)));
    let acted = log.decisions.iter().enumerate().filter(|(_, d)| d.acting_policy == "aware");
    let (acted_measured, acted_carried) =
        acted.fold((0, 0), |(m, c), (k, _)| if measured(k / 3 + 1) { (m + 1, c) } else { (m, c + 1) });
    assert!(acted_carried >= 10, "the agent acted into {acted_carried} carried states: the test tests little");
    let agent = manager.into_agent();
    let ppo = &agent.as_ppo().unwrap().ppo;
    assert_eq!(
        ppo.observed(),
        acted_measured,
        "PPO observes each measured transition it acted in, and none of the {acted_carried} carried ones"
    );
    assert!(ppo.cuts() >= acted_carried, "{} cuts for {acted_carried} carried transitions it acted in", ppo.cuts());
}

/// Without bootstrapping every app is ONLINE and PPO learns from its own samples: its rollouts
/// fill app by app and it updates, whatever the guard applied.
#[test]
fn without_bootstrapping_ppo_learns_online_on_policy() {
    let (w, _dir) = workload(2, false);
    let config =
        ManagerConfig { episode_steps: 100, online_learning: true, agent: Learner::Ppo, ..ManagerConfig::default() };
    let mut manager = Manager::new(&w, LifecycleAgent::fresh(Learner::Ppo, 3), config).unwrap();
    assert_eq!(manager.stages(), [Stage::Online; 2]);
    // Three episodes of 100 intervals, each on its own traffic.
    for e in 0..3 {
        let seed = w.trace_seed + e;
        let mut env = w.env(ActionKind::Continuous, 100, seed);
        rollout(&mut env, &mut manager, seed, 100, &mut [], &Silent).unwrap();
    }
    let counts = manager.counts();
    assert!(counts.iter().all(|c| c.agent_actions > 0));
    // Rollouts of 100 intervals per app: every app's full rollout is one update.
    let agent = manager.into_agent();
    assert!(agent.updates() >= 2, "PPO updated {} times in 300 intervals", agent.updates());
    assert_eq!(agent.stored(), 0, "nothing was learned offline");
}

/// PPO cannot learn online beside bootstrapping apps (cloning the fallback discards its
/// rollouts): the manager refuses the combination, naming it.
#[test]
fn ppo_learning_online_beside_bootstrapping_is_refused() {
    let (w, _dir) = workload(2, true);
    let config = ManagerConfig { online_learning: true, agent: Learner::Ppo, ..ManagerConfig::default() };
    let err = Manager::new(&w, LifecycleAgent::fresh(Learner::Ppo, 1), config.clone()).err().unwrap().to_string();
    assert!(err.contains("cannot learn online while other apps bootstrap"), "{err}");
    // DDPG learns off-policy: the same settings run.
    assert!(Manager::new(&w, LifecycleAgent::fresh(Learner::Ddpg, 1), config).is_ok());
}

/// `--agent` names the algorithm: a checkpoint that keeps the other one is refused before the
/// run, naming its file, and left where it is.
#[test]
fn a_checkpoint_of_the_other_algorithm_is_refused() {
    use aware_lifecycle::run::{RunSpec, run};
    let dir = tempfile::tempdir().unwrap();
    let spec = |agent: Learner| RunSpec {
        workload: WorkloadSpec { apps: 2, seed: 6, steps: 100, ..WorkloadSpec::default() },
        steps: 100,
        manager: ManagerConfig { episode_steps: 50, agent, ..ManagerConfig::default() },
        seed: 6,
        store: None,
        metrics: None,
        checkpoint: Some(dir.path().to_path_buf()),
    };
    let first = run(&spec(Learner::Ddpg), &Silent).unwrap();
    assert_eq!(first.agent, Learner::Ddpg);
    let err = run(&spec(Learner::Ppo), &Silent).err().unwrap().to_string();
    assert!(err.contains("holds a ddpg agent") && err.contains("checkpoint.json"), "{err}");
    assert!(dir.path().join("agent").join("checkpoint.json").exists(), "the checkpoint stays");
    assert!(run(&spec(Learner::Ddpg), &Silent).unwrap().checkpoint.unwrap().restored);
}
