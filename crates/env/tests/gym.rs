//! The environment over the real simulator: Gymnasium semantics, bounds and determinism.

use aware_core::{Action, Cluster, Env, EnvError, ObservationError, PodPhase, Profile, Space, VecEnv};
use aware_env::{ActionKind, AppSlo, ClusterEnv, ClusterVecEnv, EnvConfig, STATE_DIM, StateEncoder, UsageSource};
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

/// What a controller reads between steps is what the backend shows: the observation the step
/// was measured from, handed out once, then built afresh, after a reset as after a step, and
/// never one from before the backend changed.
#[test]
fn observations_between_steps_are_the_backends() {
    let (cluster, slos) = sim(3, 5);
    let apps: Vec<_> = slos.iter().enumerate().map(|(i, s)| (i, *s)).collect();
    let mut env = ClusterVecEnv::new(cluster, &apps, config(ActionKind::Discrete, 10));
    env.reset(Some(3)).unwrap();
    let mut last_time = f64::NEG_INFINITY;
    for step in 0..6 {
        for i in 0..3 {
            // App 1's is left unread every other step: the next step must not hand it out.
            if i == 1 && step % 2 == 1 {
                continue;
            }
            let fresh = env.cluster().observe(env.app(i)).unwrap();
            assert!(fresh.time_s > last_time, "step {step}: the backend moved on");
            assert_eq!(env.observe(i).unwrap(), fresh, "step {step}, app {i}: the step's");
            assert_eq!(env.observe(i).unwrap(), fresh, "step {step}, app {i}: built again");
        }
        last_time = env.cluster().observe(0).unwrap().time_s;
        env.step(&[Action::Discrete(1), Action::Discrete(3), Action::Discrete(0)]).unwrap();
    }
}

/// The metrics pipeline lags the pod list (`metrics_lag_s`): a pod that became ready after the
/// last visible scrape has no usage sample yet. The state leaves it out of the utilisation means
/// (as the HPA does) instead of refusing the whole observation; only an observation whose ready
/// pods all lack a sample is refused.
#[test]
fn a_ready_pod_newer_than_the_metrics_is_left_out_not_refused() {
    let mut env_config = config(ActionKind::Discrete, 40);
    env_config.profile.bounds.max_replicas = 100_000;
    let lagged = SimConfig { metrics_lag_s: 60.0, ..SimConfig::default() };
    let cluster = SimCluster::new(generate_apps(1, 4, 3600.0), vec![], lagged, 4);
    let slo = AppSlo { latency_p99_ms: Some(cluster.slo_p99_ms(0)), throughput_rps: None };
    let mut env = ClusterEnv::new(cluster, 0, slo, env_config.clone());
    env.reset(Some(1)).unwrap();
    let encoder = StateEncoder {
        bounds: env_config.profile.bounds.clone(),
        latency_slo_ms: slo.latency_p99_ms,
        throughput_slo_rps: None,
    };
    let (mut unsampled_seen, mut lost_checked) = (0, 0);
    for t in 0..30 {
        // Scale out every other step: new pods keep arriving ahead of their metrics.
        let step = env.step(&Action::Discrete(if t % 2 == 0 { 1 } else { 0 })).unwrap();
        assert!(step.observation.iter().all(|v| v.is_finite()));
        let obs = env.cluster().observe(0).unwrap();
        let ready: Vec<_> = obs.pods.iter().filter(|p| p.phase == PodPhase::Ready).collect();
        if ready.iter().any(|p| p.cpu_usage_cores.is_none()) && ready.iter().any(|p| p.cpu_usage_cores.is_some()) {
            unsampled_seen += 1;
            let state = encoder.encode(&obs, None).unwrap();
            let sampled_mean = obs.cpu_utilisation().unwrap();
            assert!((state[3] as f64 - sampled_mean).abs() < 1e-6, "{} vs {sampled_mean}", state[3]);
            let mut blind = obs.clone();
            for p in &mut blind.pods {
                p.cpu_usage_cores = None;
            }
            assert!(matches!(
                encoder.encode(&blind, None),
                Err(ObservationError::NoUsageSample { .. } | ObservationError::NoUsageSampleYet { .. })
            ));
            // The environment carries the last measured utilisation over such an interval.
            let (carried, source) = encoder.encode_carrying(&blind, None, Some([0.25, 0.5])).unwrap();
            assert_eq!(source, UsageSource::Carried);
            assert_eq!((carried[3], carried[4]), (0.25, 0.5));
            assert_eq!(carried[..3], state[..3]);
            // A pod ready for longer than the grace without a sample is a lost sample, not a
            // late one: refused even though the other pods have theirs.
            let mut lost = obs.clone();
            let old = lost
                .pods
                .iter_mut()
                .filter(|p| p.phase == PodPhase::Ready)
                .min_by(|a, b| a.ready_since_s.partial_cmp(&b.ready_since_s).unwrap())
                .unwrap();
            if obs.time_s - old.ready_since_s.unwrap() > aware_core::USAGE_SAMPLE_GRACE_S {
                old.cpu_usage_cores = None;
                assert!(matches!(encoder.encode(&lost, None), Err(ObservationError::NoUsageSample { .. })));
                lost_checked += 1;
            }
        }
    }
    assert!(unsampled_seen > 0, "the lag never left a ready pod without a sample: the test tests nothing");
    assert!(lost_checked > 0, "no pod ready long enough to test a lost sample");
}

/// A metrics pipeline slower than pods start (`metrics_lag_s` well above `startup_delay_s`)
/// leaves intervals where no serving pod has a sample yet (here a one-pod app whose pod is
/// replaced to grow its CPU): the episode still runs to the end, each such state carrying the
/// utilisation last measured, finite and in its space.
#[test]
fn episodes_run_when_every_ready_pod_is_newer_than_the_metrics() {
    let slow = SimConfig { metrics_lag_s: 90.0, ..SimConfig::default() };
    let cluster = SimCluster::new(generate_apps(3, 3, 86400.0), vec![], slow, 3);
    let apps: Vec<_> =
        (0..3).map(|a| (a, AppSlo { latency_p99_ms: Some(cluster.slo_p99_ms(a)), throughput_rps: None })).collect();
    let mut env = ClusterVecEnv::new(cluster, &apps, config(ActionKind::Discrete, 100));
    env.reset(Some(1)).unwrap();
    let Space::Box { low, high } = StateEncoder::space() else { unreachable!() };
    let mut blind = 0;
    for t in 0..100 {
        let actions: Vec<_> = (0..3).map(|_| Action::Discrete(if t % 3 == 0 { 3 } else { 0 })).collect();
        let out = env.step(&actions).unwrap_or_else(|e| panic!("step {t}: {e}"));
        for (app, s) in out.steps.iter().enumerate() {
            assert!(s.observation.iter().enumerate().all(|(i, v)| v.is_finite() && *v >= low[i] && *v <= high[i]));
            let obs = env.cluster().observe(app).unwrap();
            let ready: Vec<_> = obs.pods.iter().filter(|p| p.phase == PodPhase::Ready).collect();
            let is_blind = !ready.is_empty() && ready.iter().all(|p| p.cpu_usage_cores.is_none());
            assert_eq!(s.info.usage_carried, is_blind, "step {t}, app {app}: the info says when the state is carried");
            if is_blind {
                blind += 1;
                assert!(matches!(obs.sampled_utilisation(), Err(ObservationError::NoUsageSampleYet { .. })));
            }
        }
    }
    assert!(blind > 0, "no interval without a usage sample: the test tests nothing");
}
