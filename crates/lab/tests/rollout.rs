//! What a learner is shown by the one rollout loop.

use std::path::Path;
use std::sync::{Arc, Mutex};

use aware_agents::{Agent, AgentError, Experience};
use aware_core::{Action, Profile, Space};
use aware_env::Control;
use aware_env::{ActionKind, AppSlo, ClusterVecEnv, EnvConfig};
use aware_lab::progress::Silent;
use aware_lab::rollout::{Arena, Driver, EpisodeStart, Interval, Learner, Observer, rollout};
use aware_sim::{SimCluster, SimConfig, generate_apps};

/// What the agent was shown: each transition it learned from, and each environment cut.
#[derive(Default)]
struct Shown {
    learned: Vec<(usize, Vec<f32>, Vec<f32>)>,
    cuts: Vec<usize>,
}

/// Scales CPU up every third interval (so pods are replaced and the metrics lag behind them),
/// holds otherwise, and records what it is shown.
struct Recording {
    shown: Arc<Mutex<Shown>>,
    t: u64,
}

impl Agent for Recording {
    fn algorithm(&self) -> &'static str {
        "recording"
    }

    fn action_space(&self) -> Space {
        ActionKind::Discrete.space()
    }

    fn act(&mut self, states: &[Vec<f32>], _explore: bool) -> Result<Vec<Action>, AgentError> {
        self.t += 1;
        Ok(states.iter().map(|_| Action::Discrete(if self.t.is_multiple_of(3) { 3 } else { 0 })).collect())
    }

    fn observe(&mut self, env: usize, e: &Experience, _truncated: bool) -> Result<(), AgentError> {
        self.shown.lock().unwrap().learned.push((env, e.state.clone(), e.next_state.clone()));
        Ok(())
    }

    fn cut(&mut self, env: usize) {
        self.shown.lock().unwrap().cuts.push(env);
    }

    fn exploration(&self) -> f32 {
        0.0
    }

    fn save(&self, _dir: &Path, _observation_space: &Space, _training_step: u64) -> Result<(), AgentError> {
        Ok(())
    }
}

/// Every app-interval: (app, state, next state, measured at both ends).
#[derive(Default)]
struct Transitions(Vec<(usize, Vec<f32>, Vec<f32>, bool)>);

impl Observer for Transitions {
    fn record(&mut self, _arena: &dyn Arena, interval: &Interval) -> Result<(), aware_lab::LabError> {
        for (app, step) in interval.out.steps.iter().enumerate() {
            let carried = interval.infos[app].usage_carried || step.info.usage_carried;
            assert_eq!(interval.measured(app), !carried);
            self.0.push((app, interval.states[app].clone(), step.observation.clone(), !carried));
        }
        Ok(())
    }
}

/// Under a metrics pipeline that lags pod start-up, some intervals' utilisation is carried
/// from an earlier one. A training agent learns from exactly the transitions measured at both
/// ends, in order, and is told to cut its rollout at each of the others.
#[test]
fn a_learner_learns_nothing_across_a_carried_state_and_is_cut_there() {
    let slow = SimConfig { metrics_lag_s: 90.0, ..SimConfig::default() };
    let cluster = SimCluster::new(generate_apps(3, 3, 86_400.0), vec![], slow, 3);
    let apps: Vec<_> =
        (0..3).map(|a| (a, AppSlo { latency_p99_ms: Some(cluster.slo_p99_ms(a)), throughput_rps: None })).collect();
    let config = EnvConfig {
        profile: Profile::default(),
        action: ActionKind::Discrete,
        episode_steps: 100,
        container: aware_sim::CONTAINER.into(),
    };
    let mut env = ClusterVecEnv::new(cluster, &apps, config);
    let shown = Arc::new(Mutex::new(Shown::default()));
    let mut learner = Learner::new(Box::new(Recording { shown: shown.clone(), t: 0 }), true, true);
    let mut seen = Transitions::default();
    rollout(&mut env, &mut learner, 1, 100, &mut [&mut seen], &Silent).unwrap();

    let shown = shown.lock().unwrap();
    let measured: Vec<_> = seen.0.iter().filter(|t| t.3).map(|(a, s, n, _)| (*a, s.clone(), n.clone())).collect();
    let carried: Vec<usize> = seen.0.iter().filter(|t| !t.3).map(|t| t.0).collect();
    assert!(!carried.is_empty(), "no carried interval: the test tests nothing");
    assert!(!measured.is_empty());
    assert_eq!(shown.learned, measured, "learned from exactly the measured transitions, in order");
    assert_eq!(shown.cuts, carried, "cut exactly where a transition was not measured");
}

/// Gives every app the same control each interval, and notes how each episode it drove began.
struct Scripted {
    control: Control,
    starts: Vec<EpisodeStart>,
}

impl Scripted {
    fn new(control: Control) -> Self {
        Scripted { control, starts: Vec::new() }
    }
}

impl Driver for Scripted {
    fn decide(
        &mut self,
        arena: &dyn Arena,
        _states: &[Vec<f32>],
        _infos: &[aware_core::StepInfo],
    ) -> Result<Vec<Control>, aware_lab::LabError> {
        Ok(vec![self.control.clone(); arena.num_apps()])
    }

    fn episode_start(&mut self, start: EpisodeStart) {
        self.starts.push(start);
    }
}

/// Two generated apps on the simulator, going on from `start` where given.
fn env_with(start: Option<aware_sim::Continuation>, steps: u32) -> ClusterVecEnv<SimCluster> {
    let config = SimConfig { start, ..SimConfig::default() };
    let cluster = SimCluster::new(generate_apps(2, 3, 86_400.0), vec![], config, 3);
    let apps: Vec<_> =
        (0..2).map(|a| (a, AppSlo { latency_p99_ms: Some(cluster.slo_p99_ms(a)), throughput_rps: None })).collect();
    let config = EnvConfig {
        profile: Profile::default(),
        action: ActionKind::Continuous,
        episode_steps: steps,
        container: aware_sim::CONTAINER.into(),
    };
    ClusterVecEnv::new(cluster, &apps, config)
}

/// The driver hears whether an episode's cluster was built afresh or goes on from another's
/// end, so rule-based controllers restart only with the cluster.
#[test]
fn the_driver_hears_whether_the_cluster_was_built_afresh_or_goes_on() {
    let env_with = |start| env_with(start, 5);
    let mut hold = Scripted::new(Control::Hold);
    let mut fresh = env_with(None);
    rollout(&mut fresh, &mut hold, 1, 5, &mut [], &Silent).unwrap();
    let mut continued = env_with(Some(fresh.cluster().continuation()));
    rollout(&mut continued, &mut hold, 2, 5, &mut [], &Silent).unwrap();
    assert_eq!(hold.starts, [EpisodeStart::Fresh, EpisodeStart::Continued]);
}

/// Counts each app's SLO-violating intervals as [`Interval::slo_violated`] says, and as the
/// step's info (the measured p99) says, in `measured`.
struct Violations {
    counted: Vec<u64>,
    measured: Vec<u64>,
}

impl Observer for Violations {
    fn record(&mut self, _arena: &dyn Arena, interval: &Interval) -> Result<(), aware_lab::LabError> {
        for (i, step) in interval.out.steps.iter().enumerate() {
            self.counted[i] += interval.slo_violated(i) as u64;
            self.measured[i] += step.info.slo_violated as u64;
        }
        Ok(())
    }
}

/// A driver and the scorer count SLO violations alike: by the true p99 where the simulator
/// knows it, not the noisy measured one the step's info carries.
#[test]
fn an_interval_counts_violations_as_the_scorer_does() {
    let mut env = env_with(None, 120);
    let names = vec!["a".to_string(), "b".to_string()];
    let mut scorer = aware_lab::score::Scorer::new(&env, &names);
    let mut counted = Violations { counted: vec![0; 2], measured: vec![0; 2] };
    // Starved: the fewest replicas and the least CPU and memory.
    let mut starve = Scripted::new(Control::Action(Action::Continuous(vec![-1.0, -1.0, -1.0])));
    rollout(&mut env, &mut starve, 4, 120, &mut [&mut scorer, &mut counted], &Silent).unwrap();
    let (per_app, _) = scorer.finish(&[0, 0]);
    let scored: Vec<u64> = per_app.iter().map(|s| s.slo_violations).collect();
    assert_eq!(counted.counted, scored);
    assert_ne!(counted.measured, scored, "the measured p99 agrees throughout: the test cannot tell them apart");
    assert!(scored.iter().sum::<u64>() > 0, "nothing violated: the test tests nothing");
}
