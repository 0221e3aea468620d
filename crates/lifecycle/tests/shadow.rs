//! The bootstrapping check's shadow replays recent traffic on the application as it was
//! measured: a payload change the app's model was not built with shows in the request cost the
//! metrics imply, and the replay pays that cost.

use aware_core::Observation;
use aware_env::ActionKind;
use aware_lab::LabError;
use aware_lab::policy::{Policy, PolicyName};
use aware_lab::progress::Silent;
use aware_lab::rollout::{Arena, Interval, Observer, Recommenders, rollout};
use aware_lab::score::Scorer;
use aware_lab::workload::{Workload, WorkloadSpec};
use aware_lifecycle::shadow::{self, CostMeter, METER_MIN_INTERVALS, ShadowApp};
use aware_sim::{Scenario, ScenarioKind};

const STEPS: u64 = 200;

/// Every app's arrival rates and request cost, as the manager collects them.
struct Metered {
    rates: Vec<Vec<f64>>,
    meters: Vec<CostMeter>,
    /// The same, stopped one interval short of what an estimate needs, and at exactly that.
    short: Vec<CostMeter>,
    enough: Vec<CostMeter>,
    /// Every app's last observation that the meter measured.
    last: Vec<Option<Observation>>,
}

impl Observer for Metered {
    fn record(&mut self, arena: &dyn Arena, _interval: &Interval) -> Result<(), LabError> {
        for i in 0..arena.num_apps() {
            let obs = arena.observe(i).expect("the simulator observes")?;
            self.rates[i].push(obs.arrival_rate.max(0.0));
            if obs.validate().is_ok() {
                let before = self.meters[i].intervals();
                self.meters[i].measure(&obs);
                if self.meters[i].intervals() > before {
                    self.last[i] = Some(obs.clone());
                }
                if self.short[i].intervals() + 1 < METER_MIN_INTERVALS {
                    self.short[i].measure(&obs);
                }
                if self.enough[i].intervals() < METER_MIN_INTERVALS {
                    self.enough[i].measure(&obs);
                }
            }
        }
        Ok(())
    }
}

fn workload(seed: u64, scenario: Option<ScenarioKind>) -> Workload {
    let spec = WorkloadSpec { apps: 3, seed, steps: STEPS, ..WorkloadSpec::default() };
    let mut workload = Workload::load(&spec).unwrap();
    workload.sim.scenario = scenario.map(|kind| Scenario { kind, at_step: Some(0) });
    workload
}

/// App `i`'s recent traffic `rates` as the shadow replays it from a fresh start: the reference
/// allocation, clock 0, a fresh fallback and guard, the model's request cost.
fn traffic<'a>(
    workload: &'a Workload,
    i: usize,
    profile: &'a aware_core::Profile,
    rates: &'a [f64],
    seed: u64,
) -> ShadowApp<'a> {
    ShadowApp {
        spec: &workload.apps[i],
        profile,
        sim: &workload.sim,
        rates,
        payload_scale: 1.0,
        start: None,
        start_s: 0.0,
        fallback: None,
        guard: None,
        deployed: None,
        seed,
        observed_slo: false,
    }
}

/// MPA on every app of `workload` for `STEPS` intervals: what the metrics said, and the mean
/// reward each app earned.
fn run_mpa(workload: &Workload, seed: u64) -> (Metered, Vec<f64>) {
    let n = workload.apps.len();
    let policies = (0..n)
        .map(|i| Policy::build(&PolicyName::Mpa, &workload.app_profile(i), Some(&workload.apps[i]), None).unwrap())
        .collect();
    let mut env = workload.env(ActionKind::Continuous, STEPS, seed);
    let names: Vec<String> = workload.apps.iter().map(|a| a.name.clone()).collect();
    let mut scorer = Scorer::new(&env, &names);
    let meters = vec![CostMeter::default(); n];
    let mut metered = Metered {
        rates: vec![Vec::new(); n],
        meters: meters.clone(),
        short: meters.clone(),
        enough: meters,
        last: vec![None; n],
    };
    rollout(
        &mut env,
        &mut Recommenders::new(policies),
        seed,
        STEPS,
        &mut [&mut scorer as &mut dyn Observer, &mut metered],
        &Silent,
    )
    .unwrap();
    let (per_app, _) = scorer.finish(&vec![0; n]);
    (metered, per_app.iter().map(|s| s.mean_reward).collect())
}

#[test]
fn the_meter_reads_a_payload_change_and_nothing_where_there_was_none() {
    let mut up_measured = 0;
    for seed in [3, 8, 13] {
        let (unchanged, _) = run_mpa(&workload(seed, None), seed);
        let changed_workload = workload(seed, Some(ScenarioKind::PayloadDown));
        let (down, _) = run_mpa(&changed_workload, seed);
        let up_workload = workload(seed, Some(ScenarioKind::PayloadUp));
        let (up, _) = run_mpa(&up_workload, seed);
        for (i, app) in changed_workload.apps.iter().enumerate() {
            // The model is right about an unchanged app: no correction.
            assert_eq!(unchanged.meters[i].payload_scale(app), Some(1.0), "seed {seed} app {i}");
            // Every segment's payload ×¼ (×4): the meter reads it back within a fifth.
            let d = down.meters[i].payload_scale(app).unwrap_or(f64::NAN);
            assert!((0.2..0.3).contains(&d), "seed {seed} app {i}: payload-down read as ×{d}");
            // An app the heavier requests take down (every pod killed for memory) serves
            // nothing to measure.
            if let Some(u) = up.meters[i].payload_scale(app) {
                up_measured += 1;
                assert!((3.2..4.8).contains(&u), "seed {seed} app {i}: payload-up read as ×{u}");
            }
        }
    }
    assert!(up_measured >= 2, "payload-up measured on {up_measured} apps of 9");
}

#[test]
fn too_little_measured_leaves_the_model_as_it_is() {
    let workload = workload(5, Some(ScenarioKind::PayloadDown));
    let (metered, _) = run_mpa(&workload, 5);
    for (i, app) in workload.apps.iter().enumerate() {
        assert_eq!(CostMeter::default().payload_scale(app), None);
        assert_eq!(metered.short[i].intervals() + 1, METER_MIN_INTERVALS, "app {i}");
        assert_eq!(metered.short[i].payload_scale(app), None, "app {i}");
        // One more interval and the change shows.
        assert_eq!(metered.enough[i].intervals(), METER_MIN_INTERVALS, "app {i}");
        let scale = metered.enough[i].payload_scale(app).unwrap_or(f64::NAN);
        assert!((0.2..0.3).contains(&scale), "app {i}: ×{scale}");
    }
}

#[test]
fn a_replay_at_the_measured_cost_tracks_the_changed_app() {
    let seed = 6;
    let workload = workload(seed, Some(ScenarioKind::PayloadDown));
    let (metered, real) = run_mpa(&workload, seed);
    let (mut measured_gap, mut model_gap) = (0.0, 0.0);
    for (i, app) in workload.apps.iter().enumerate() {
        let profile = workload.app_profile(i);
        let replay = |payload_scale| {
            let shadow = ShadowApp { payload_scale, ..traffic(&workload, i, &profile, &metered.rates[i], 17) };
            shadow::fallback(&shadow, &PolicyName::Mpa).unwrap().mean_reward
        };
        let scale = metered.meters[i].payload_scale(app).unwrap_or(f64::NAN);
        assert!(scale < 0.5, "app {i}: ×{scale}");
        measured_gap += (replay(scale) - real[i]).abs();
        model_gap += (replay(1.0) - real[i]).abs();
    }
    // The replay at the model's cost pays for requests four times as heavy as the app's.
    assert!(measured_gap < 0.5 * model_gap, "gap at the measured cost {measured_gap}, at the model's {model_gap}");
}

#[test]
fn nonsense_is_not_measured_and_a_nonsense_scale_is_refused() {
    let workload = workload(4, None);
    let (metered, _) = run_mpa(&workload, 4);
    let good = metered.last.iter().flatten().next().expect("an interval was measured").clone();
    let measured = |obs: &Observation| {
        let mut meter = CostMeter::default();
        // The first observation only sets the ready pods the next are compared with.
        for _ in 0..3 {
            meter.measure(obs);
        }
        meter.intervals()
    };
    assert_eq!(measured(&good), 2);
    let mut bad = vec![
        Observation { interval_s: f64::NAN, ..good.clone() },
        Observation { interval_s: 0.0, ..good.clone() },
        Observation { dropped_requests: 3, ..good.clone() },
        Observation { throughput: 0.5 * good.arrival_rate, ..good.clone() },
    ];
    for usage in [f64::NAN, -1.0, 100.0] {
        let mut o = good.clone();
        o.pods.iter_mut().for_each(|p| p.cpu_usage_cores = Some(usage));
        bad.push(o);
    }
    let mut o = good.clone();
    o.pods[0].deleting = true;
    bad.push(o);
    let mut o = good.clone();
    o.pods.iter_mut().for_each(|p| p.ready_since_s = Some(good.time_s));
    bad.push(o);
    for (k, o) in bad.iter().enumerate() {
        assert_eq!(measured(o), 0, "case {k}");
    }
    // A ready set that changes every interval is never measured.
    let mut meter = CostMeter::default();
    for k in 0..20 {
        let mut o = good.clone();
        o.pods.iter_mut().for_each(|p| p.name = format!("{}-{k}", p.name));
        meter.measure(&o);
    }
    assert_eq!(meter.intervals(), 0);
    let profile = workload.app_profile(0);
    for scale in [f64::NAN, 0.0, -2.0, f64::INFINITY] {
        let shadow = ShadowApp { payload_scale: scale, ..traffic(&workload, 0, &profile, &metered.rates[0], 1) };
        assert!(shadow::fallback(&shadow, &PolicyName::Mpa).is_err(), "×{scale}");
    }
}

/// A replay starts from the deployment the app had when its traffic began (episodes go on
/// from one another, so not always the reference allocation): from the reference it is the
/// fresh start exactly; from three times its replicas it reserves more.
#[test]
fn a_replay_starts_from_the_deployment_the_traffic_began_with() {
    use aware_core::{ContainerResources, Resources};
    use aware_sim::{CONTAINER, DeploymentState};
    let workload = workload(5, None);
    let app = &workload.apps[0];
    let profile = workload.app_profile(0);
    let rates = vec![app.mean_rps; 40];
    let at = |replicas: u32| {
        DeploymentState::at(
            replicas,
            ContainerResources::guaranteed(
                CONTAINER,
                Resources::new(app.reference.cpu_millicores, app.reference.memory_bytes),
            ),
        )
    };
    let replay = |start: Option<&DeploymentState>| {
        let shadow = ShadowApp { start, ..traffic(&workload, 0, &profile, &rates, 3) };
        shadow::fallback(&shadow, &PolicyName::Mpa).unwrap()
    };
    let fresh = replay(None);
    assert_eq!(replay(Some(&at(app.reference.replicas))), fresh);
    let larger = replay(Some(&at(3 * app.reference.replicas)));
    assert!(larger.core_seconds.unwrap() > fresh.core_seconds.unwrap(), "{larger:?} against {fresh:?}");
}

/// The fallback's replay hands back what the fallback does not manage as deployed, as the
/// manager does where its stage hands an app to it: an episode that began with the CPU limit
/// an agent cut to a quarter (which MPA, scaling replicas and memory, never raises) replays
/// with the limit as deployed, so with fewer SLO-violating intervals than the cut left; from
/// the deployment itself, or with nothing below it, the replay is the one without.
#[test]
fn the_fallbacks_replay_hands_back_what_it_does_not_manage_as_deployed() {
    use aware_core::{ContainerResources, Resources};
    use aware_sim::{CONTAINER, DeploymentState};
    let workload = workload(5, None);
    let app = &workload.apps[0];
    let profile = workload.app_profile(0);
    let rates = vec![app.peak_rps; 60];
    let template =
        |cpu: u64| ContainerResources::guaranteed(CONTAINER, Resources::new(cpu, app.reference.memory_bytes));
    let deployed = (app.reference.replicas, template(app.reference.cpu_millicores));
    let cut = DeploymentState::at(
        app.reference.replicas,
        template((app.reference.cpu_millicores / 4).max(profile.bounds.min_cpu_millicores)),
    );
    let replay = |start: Option<&DeploymentState>, deployed: Option<&(u32, ContainerResources)>| {
        let shadow = ShadowApp { start, deployed, ..traffic(&workload, 0, &profile, &rates, 3) };
        shadow::fallback(&shadow, &PolicyName::Mpa).unwrap()
    };
    let as_cut = replay(Some(&cut), None);
    let handed_back = replay(Some(&cut), Some(&deployed));
    assert!(as_cut.slo_violations > 0, "the cut must hurt for the test to say anything: {as_cut:?}");
    assert!(handed_back.slo_violations < as_cut.slo_violations, "{handed_back:?} against {as_cut:?}");
    assert!(handed_back.core_seconds.unwrap() > as_cut.core_seconds.unwrap(), "{handed_back:?} against {as_cut:?}");
    // Nothing below the deployment: nothing to hand back.
    assert_eq!(replay(None, Some(&deployed)), replay(None, None));
}

/// A replay runs at the clock its traffic began at, with the traffic's first rate in its first
/// interval, and with the fallback as it was then: at another clock a fresh fallback replays
/// the same episode exactly; a fallback carried over from a run on the app replays it with what
/// it learned there (so differently).
#[test]
fn a_replay_goes_on_at_the_clock_and_with_the_fallback_the_traffic_began_with() {
    let workload = Workload::load(&WorkloadSpec { apps: 1, seed: 9, steps: STEPS, ..WorkloadSpec::default() }).unwrap();
    let app = &workload.apps[0];
    let profile = workload.app_profile(0);
    // A ramp and a fall: a trace turned the wrong way round would replay another episode.
    let rates: Vec<f64> =
        (0..40).map(|t| app.mean_rps * (0.5 + 2.5 * (1.0 - (t as f64 - 10.0).abs() / 30.0).max(0.0))).collect();
    let replay = |start_s: f64, fallback: Option<&Policy>| {
        let shadow = ShadowApp { start_s, fallback, ..traffic(&workload, 0, &profile, &rates, 5) };
        shadow::fallback(&shadow, &PolicyName::Mpa).unwrap()
    };
    let interval = workload.sim.interval_s;
    let fresh = replay(0.0, None);
    assert_eq!(replay(977.0 * interval, None), fresh);
    assert_eq!(replay(40.0 * interval, None), fresh, "a whole turn of the trace");

    // MPA after a run on the app, at the clock and deployment that run ended on, replays a
    // quiet episode: a fresh one scales down at once, the carried one holds its recent
    // recommendations through HPA's downscale stabilisation window.
    let policy = Policy::build(&PolicyName::Mpa, &profile, Some(app), None).unwrap();
    let mut rules = Recommenders::new(vec![policy]);
    let mut env = workload.env(ActionKind::Continuous, STEPS, 9);
    rollout(&mut env, &mut rules, 9, STEPS, &mut [], &Silent).unwrap();
    let end = env.cluster().continuation();
    let carried = &rules.policies[0];
    let quiet = vec![0.2 * app.mean_rps; 40];
    let replay = |fallback: Option<&Policy>| {
        let shadow = ShadowApp {
            start: end.deployments.first(),
            start_s: end.time_s,
            fallback,
            ..traffic(&workload, 0, &profile, &quiet, 5)
        };
        shadow::fallback(&shadow, &PolicyName::Mpa).unwrap()
    };
    let (fresh, warm) = (replay(None), replay(Some(carried)));
    assert!(warm.core_seconds.unwrap() > fresh.core_seconds.unwrap(), "{warm:?} against {fresh:?}");
}
