//! The environment over the real simulator: Gymnasium semantics, bounds and determinism.

use aware_core::{Action, Env, EnvError, Profile, Space, VecEnv};
use aware_env::{ActionKind, AppSlo, ClusterEnv, ClusterVecEnv, EnvConfig, STATE_DIM, StateEncoder};
use aware_sim::{SimCluster, SimConfig, generate_apps};

fn config(kind: ActionKind, steps: u32) -> EnvConfig {
    EnvConfig {
        profile: Profile::default(),
        action: kind,
        episode_steps: steps,
        container: aware_sim::CONTAINER.into(),
    }
}

fn sim(apps: usize, seed: u64) -> (SimCluster, Vec<AppSlo>) {
    let cluster = SimCluster::new(generate_apps(apps, seed, 3600.0), vec![], SimConfig::default(), seed);
    let slos =
        (0..apps).map(|a| AppSlo { latency_p99_ms: Some(cluster.slo_p99_ms(a)), throughput_rps: None }).collect();
    (cluster, slos)
}

#[test]
fn episode_runs_to_truncation_and_needs_reset() {
    let (cluster, slos) = sim(1, 3);
    let mut env = ClusterEnv::new(cluster, 0, slos[0], config(ActionKind::Discrete, 5));
    assert_eq!(env.action_space(), Space::Discrete { n: 7 });
    assert_eq!(env.step(&Action::Discrete(0)).unwrap_err().to_string(), EnvError::NeedsReset.to_string());
    let (obs, _) = env.reset(Some(1)).unwrap();
    assert_eq!(obs.len(), STATE_DIM);
    let space = StateEncoder::space();
    for t in 1..=5 {
        let step = env.step(&Action::Discrete(t % 7)).unwrap();
        assert_eq!(step.truncated, t == 5);
        assert!(!step.terminated);
        let Space::Box { low, high } = &space else { unreachable!() };
        for (i, v) in step.observation.iter().enumerate() {
            assert!(v.is_finite() && *v >= low[i] && *v <= high[i], "feature {i} = {v}");
        }
        let r = env.reward_function();
        assert!(step.reward >= r.min() && step.reward <= r.max());
    }
    assert!(matches!(env.step(&Action::Discrete(0)), Err(EnvError::NeedsReset)));
}

#[test]
fn same_seed_same_trajectory_different_seed_different() {
    let run = |seed: u64| {
        let (cluster, slos) = sim(1, 9);
        let mut env = ClusterEnv::new(cluster, 0, slos[0], config(ActionKind::Continuous, 20));
        let mut out = vec![env.reset(Some(seed)).unwrap().0];
        for t in 0..20 {
            let a = (t as f32 / 10.0) - 1.0;
            out.push(env.step(&Action::Continuous(vec![a, -a, 0.0])).unwrap().observation);
        }
        out
    };
    assert_eq!(run(5), run(5));
    assert_ne!(run(5), run(6));
}

#[test]
fn wrong_action_type_is_an_error_not_a_guess() {
    let (cluster, slos) = sim(1, 1);
    let mut env = ClusterEnv::new(cluster, 0, slos[0], config(ActionKind::Discrete, 5));
    env.reset(Some(1)).unwrap();
    assert!(matches!(env.step(&Action::Discrete(7)), Err(EnvError::ActionOutOfSpace { .. })));
    assert!(matches!(env.step(&Action::Continuous(vec![0.0; 3])), Err(EnvError::ActionOutOfSpace { .. })));
}

#[test]
fn illegal_and_oscillating_actions_are_penalised() {
    let (cluster, slos) = sim(1, 2);
    let mut env = ClusterEnv::new(cluster, 0, slos[0], config(ActionKind::Discrete, 50));
    env.reset(Some(1)).unwrap();
    let up = env.step(&Action::Discrete(3)).unwrap();
    assert!(!up.info.oscillation && !up.info.illegal_action);
    let down = env.step(&Action::Discrete(4)).unwrap();
    assert!(down.info.oscillation);
    // Scaling below the minimum replica count is illegal and becomes a no-op.
    let mut last = None;
    for _ in 0..25 {
        last = Some(env.step(&Action::Discrete(2)).unwrap());
    }
    let last = last.unwrap();
    assert!(last.info.illegal_action);
    assert_eq!(last.info.replicas, Profile::default().bounds.min_replicas);
}

#[test]
fn vec_env_steps_all_apps_with_one_advance() {
    let (cluster, slos) = sim(4, 11);
    let apps: Vec<_> = slos.iter().enumerate().map(|(i, s)| (i, *s)).collect();
    let mut env = ClusterVecEnv::new(cluster, &apps, config(ActionKind::Discrete, 3));
    assert_eq!(env.num_envs(), 4);
    let initial = env.reset(Some(2)).unwrap();
    assert_eq!(initial.len(), 4);
    let before = env.cluster().step_index();
    let out = env.step(&[Action::Discrete(1), Action::Discrete(0), Action::Discrete(3), Action::Discrete(5)]).unwrap();
    assert_eq!(out.steps.len(), 4);
    assert_eq!(env.cluster().step_index(), before + 1);
    let step_m = Profile::default().bounds.cpu_step_millicores;
    assert_eq!(out.steps[0].info.replicas, initial[0].1.replicas + 1, "app 0 scaled out");
    assert_eq!(out.steps[1].info.replicas, initial[1].1.replicas, "app 1 held");
    assert_eq!(out.steps[2].info.cpu_limit_millicores, initial[2].1.cpu_limit_millicores + step_m, "app 2 grew CPU");
    assert!(out.steps[3].info.memory_limit_bytes > initial[3].1.memory_limit_bytes, "app 3 grew memory");
    assert!(matches!(env.step(&[Action::Discrete(0)]), Err(EnvError::WrongActionCount { expected: 4, got: 1 })));
}
