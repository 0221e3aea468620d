//! Behaviour of the simulated cluster through its public `Cluster` interface.

use std::sync::Arc;

use aware_core::{Cluster, ContainerResources, PodPhase, Recommendation, Resources};
use aware_sim::reference_allocation;
use aware_sim::replica::step_replica;
use aware_sim::{
    AppSpec, CONTAINER, Scenario, ScenarioKind, Segment, SegmentKind, SimCluster, SimConfig, Trace, VerticalUpdate,
    generate_app, generate_apps,
};
use proptest::prelude::*;

const MIB: u64 = 1 << 20;

fn rec(replicas: u32, cpu_m: u64, mem: u64) -> Recommendation {
    Recommendation { replicas, containers: vec![ContainerResources::guaranteed(CONTAINER, Resources::new(cpu_m, mem))] }
}

/// One app under a constant rate, alone on a large node.
fn isolated(app: AppSpec, rps: f64, config: SimConfig) -> SimCluster {
    let trace = Arc::new(Trace { name: "constant".into(), interval_s: 15.0, rates: vec![rps] });
    SimCluster::new(vec![app], vec![trace], SimConfig { nodes: Some(1), node_cores: 64.0, ..config }, 1)
}

fn web_app() -> AppSpec {
    let mut app = generate_app(0, 1, 86_400.0);
    app.segments = vec![
        Segment { kind: SegmentKind::ImageResize, payload: 1.0 },
        Segment { kind: SegmentKind::KvRead, payload: 1.0 },
    ];
    app.load.mean_rps = 5.0;
    (app.reference, app.slo_p99_ms) = reference_allocation(&app.cost(), &app.load);
    app
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(512))]

    /// More CPU never makes latency worse for a replica in isolation, loaded or overloaded.
    #[test]
    fn more_cpu_never_worse_for_a_replica(
        seed in 0u64..1000, rps in 0.1f64..200.0, c1 in 0.05f64..8.0, extra in 0.0f64..4.0, backlog in 0.0f64..500.0,
    ) {
        let cost = generate_app(seed as usize, seed, 86_400.0).cost();
        let lo = step_replica(rps * 15.0, backlog, 15.0, &cost, c1, 30.0);
        let hi = step_replica(rps * 15.0, backlog, 15.0, &cost, c1 + extra, 30.0);
        prop_assert!(hi.latency_mean_s <= lo.latency_mean_s * (1.0 + 1e-9), "mean {lo:?} → {hi:?}");
        prop_assert!(hi.served + 1e-9 >= lo.served);
        // Requests left unserved — dropped now or carried as backlog — never grow with CPU. (Drops
        // alone are the wrong measure: a saturated replica defers requests a faster one serves.)
        // At the saturation boundary the two paths model the timeout tail differently (README,
        // known limits): a sliver of demand, never more.
        let demand = rps * 15.0 + backlog;
        let (lo_left, hi_left) = (lo.dropped + lo.backlog, hi.dropped + hi.backlog);
        prop_assert!(hi_left <= lo_left + 1e-4 * demand, "unserved {lo_left} → {hi_left} of {demand}");
    }

    /// The same through the whole cluster: a CPU limit raised in place never raises p99.
    #[test]
    fn more_cpu_never_worse_in_the_cluster(rps in 1.0f64..40.0, m1 in 100u64..2000, extra in 0u64..2000) {
        let p99 = |cpu_m: u64| {
            let mut c = isolated(web_app(), rps, SimConfig { noise: 0.0, ..SimConfig::default() });
            c.apply(0, &rec(1, cpu_m, 64 << 30)).unwrap();
            let mut out = Vec::new();
            for _ in 0..6 {
                c.advance().unwrap();
                out.push(c.stats(0).latency_p99_ms.unwrap_or(f64::INFINITY));
            }
            out
        };
        for (lo, hi) in p99(m1).iter().zip(p99(m1 + extra)) {
            prop_assert!(hi <= lo * (1.0 + 1e-9), "{lo} → {hi}");
        }
    }

    /// Utilisation per limit is always in [0, 1], measured or true, whatever the allocation.
    #[test]
    fn utilisation_is_within_limits(seed in 0u64..500, reps in 1u32..6, cpu_m in 50u64..4000, mem_mib in 64u64..4096) {
        let mut c = SimCluster::new(generate_apps(3, seed, 3_600.0), vec![], SimConfig::default(), seed);
        for step in 0..12 {
            if step == 2 {
                for a in 0..3 {
                    c.apply(a, &rec(reps, cpu_m, mem_mib * MIB)).unwrap();
                }
            }
            c.advance().unwrap();
            for a in 0..3 {
                let st = c.stats(a);
                for u in [st.cpu_utilisation, st.memory_utilisation].into_iter().flatten() {
                    prop_assert!((0.0..=1.0).contains(&u), "true utilisation {u}");
                }
                prop_assert!((0.0..=1.0).contains(&st.io_utilisation) && (0.0..=1.0).contains(&st.network_utilisation));
                // Right after a resize the (lagged) metrics describe the old limits.
                if (2..6).contains(&step) {
                    continue;
                }
                let obs = c.observe(a).unwrap();
                for p in &obs.pods {
                    if let Some(cpu) = p.cpu_usage_cores {
                        prop_assert!(cpu >= 0.0 && cpu <= p.resources.limits.cpu_cores() + 1e-9);
                    }
                    if let Some(m) = p.memory_working_set_bytes {
                        // A memory decrease below the working set is deferred: the container
                        // keeps its old limit (the reference) until it fits.
                        let limit = p.resources.limits.memory_bytes.max(c.apps()[a].reference.memory_bytes);
                        prop_assert!(m >= 0.0 && m <= limit as f64);
                    }
                }
            }
        }
    }
}

#[test]
fn memory_limit_under_the_working_set_is_oom_killed() {
    let app = web_app();
    let base = app.cost().mem_base_bytes as u64;
    // New pods get the small limit (an in-place decrease below the working set is deferred by
    // the kubelet: see `in_place_memory_decrease_waits_for_the_working_set`).
    let mut c = isolated(app, 10.0, SimConfig { vertical_update: VerticalUpdate::Restart, ..SimConfig::default() });
    c.apply(0, &rec(1, 1000, base + 4 * MIB)).unwrap();
    let (mut ooms, mut dropped) = (0, 0.0);
    for _ in 0..40 {
        c.advance().unwrap();
        ooms += c.stats(0).oom_events;
        dropped += c.stats(0).dropped;
    }
    assert!(ooms >= 2, "expected repeated OOM kills, got {ooms}");
    assert!(dropped > 0.0);
    let obs = c.observe(0).unwrap();
    assert!(obs.pods.iter().map(|p| p.restarts).sum::<u32>() >= 2);
    // CrashLoopBackOff: the kills get further apart, so fewer than one per start-up cycle.
    assert!(ooms < 40 / 3);

    // With room for the working set there are none.
    let mut ok = isolated(web_app(), 10.0, SimConfig::default());
    ok.apply(0, &rec(1, 1000, 4 << 30)).unwrap();
    for _ in 0..40 {
        ok.advance().unwrap();
        assert_eq!(ok.stats(0).oom_events, 0);
    }
}

#[test]
fn pods_that_do_not_fit_stay_pending_and_go_first_on_scale_down() {
    let config = SimConfig { nodes: Some(1), node_cores: 4.0, ..SimConfig::default() };
    let mut c = SimCluster::new(vec![web_app()], vec![], config, 1);
    c.apply(0, &rec(10, 1000, 256 * MIB)).unwrap();
    c.advance().unwrap();
    let counts = c.observe(0).unwrap().replica_counts();
    assert_eq!(counts.pending, 6, "{counts:?}");
    assert_eq!(c.stats(0).scheduled_replicas, 4);
    assert_eq!(c.stats(0).core_seconds, 4.0 * 15.0, "pending pods reserve nothing");
    let obs = c.observe(0).unwrap();
    let pending: Vec<_> = obs.pods.iter().filter(|p| p.phase == PodPhase::Pending).collect();
    assert_eq!(pending.len(), 6);
    // Each says why, as the scheduler's condition does: the one node is short of CPU, not memory.
    let why = aware_core::Unschedulable { nodes: 1, insufficient_cpu: 1, insufficient_memory: 0 };
    assert!(pending.iter().all(|p| p.unschedulable == Some(why)), "{:?}", pending[0].unschedulable);
    assert!(obs.pods.iter().filter(|p| p.node.is_some()).all(|p| p.unschedulable.is_none()));
    c.apply(0, &rec(4, 1000, 256 * MIB)).unwrap();
    c.advance().unwrap();
    let counts = c.observe(0).unwrap().replica_counts();
    assert_eq!((counts.pending, counts.ready + counts.starting), (0, 4), "pending pods deleted first");
}

#[test]
fn new_pods_serve_only_after_the_startup_delay() {
    let mut c = isolated(web_app(), 5.0, SimConfig::default());
    c.apply(0, &rec(3, 1000, 1 << 30)).unwrap();
    let mut ready = Vec::new();
    for _ in 0..4 {
        c.advance().unwrap();
        ready.push(c.observe(0).unwrap().replica_counts().ready);
    }
    // Created at t=0 with a 30 s start-up: ready from the reconcile at t=30 (third interval).
    assert_eq!(ready, vec![1, 1, 3, 3]);
}

#[test]
fn rolling_restart_never_drops_below_desired_ready() {
    let config = SimConfig { vertical_update: VerticalUpdate::Restart, noise: 0.0, ..SimConfig::default() };
    let mut c = isolated(web_app(), 5.0, config);
    c.apply(0, &rec(3, 1000, 1 << 30)).unwrap();
    for _ in 0..4 {
        c.advance().unwrap();
    }
    c.apply(0, &rec(3, 1500, 1 << 30)).unwrap();
    let mut done = false;
    for _ in 0..30 {
        c.advance().unwrap();
        let obs = c.observe(0).unwrap();
        assert!(obs.replica_counts().ready >= 3, "{:?}", obs.replica_counts());
        assert!(obs.pods.len() <= 4, "surge is one pod");
        done |= obs.pods.iter().all(|p| p.resources.limits.cpu_millicores == 1500) && obs.pods.len() == 3;
    }
    assert!(done, "the rollout completed");
}

#[test]
fn in_place_resize_takes_effect_without_restart() {
    let mut c = isolated(web_app(), 5.0, SimConfig::default());
    c.advance().unwrap();
    let before = c.observe(0).unwrap().pods[0].name.clone();
    c.apply(0, &rec(1, 2000, 1 << 30)).unwrap();
    c.advance().unwrap();
    let obs = c.observe(0).unwrap();
    assert_eq!(obs.pods[0].name, before);
    assert_eq!(obs.pods[0].resources.limits.cpu_millicores, 2000);
    assert_eq!(obs.pods[0].phase, PodPhase::Ready);
}

#[test]
fn invalid_recommendations_are_rejected_with_the_reason() {
    let mut c = isolated(web_app(), 5.0, SimConfig::default());
    let bad_name = Recommendation {
        replicas: 1,
        containers: vec![ContainerResources::guaranteed("sidecar", Resources::new(100, MIB))],
    };
    assert!(c.apply(0, &bad_name).unwrap_err().to_string().contains("sidecar"));
    let mut over = rec(1, 100, MIB);
    over.containers[0].requests.cpu_millicores = 200;
    assert!(c.apply(0, &over).unwrap_err().to_string().contains("exceed"));
    assert!(c.apply(0, &rec(1, 0, MIB)).is_err());
    assert!(c.apply(5, &rec(1, 100, MIB)).is_err());
}

#[test]
fn same_seed_same_run_different_seed_different() {
    let run = |seed| {
        let mut c = SimCluster::new(generate_apps(5, seed, 3_600.0), vec![], SimConfig::default(), seed);
        (0..30)
            .map(|_| {
                c.advance().unwrap();
                (0..5).map(|a| serde_json::to_string(&c.observe(a).unwrap()).unwrap()).collect::<Vec<_>>()
            })
            .collect::<Vec<_>>()
    };
    assert_eq!(run(4), run(4));
    assert_ne!(run(4), run(5));
}

#[test]
fn load_does_not_depend_on_the_policy() {
    // A/B fairness: two different allocations see exactly the same arrivals.
    let mut a = SimCluster::new(generate_apps(3, 8, 3_600.0), vec![], SimConfig::default(), 8);
    let mut b = a.clone();
    b.apply(0, &rec(5, 300, 1 << 30)).unwrap();
    for _ in 0..50 {
        a.advance().unwrap();
        b.advance().unwrap();
        assert_eq!(a.stats(0).arrivals, b.stats(0).arrivals);
    }
}

#[test]
fn scenarios_change_the_workload_at_their_step() {
    let arrivals = |scenario: Option<Scenario>| {
        let config = SimConfig { scenario, ..SimConfig::default() };
        let mut c = isolated(web_app(), 10.0, config);
        // Room for ×4 payloads: the point is latency, not an OOM.
        c.apply(0, &rec(4, 4000, 8 << 30)).unwrap();
        (0..20)
            .map(|_| {
                c.advance().unwrap();
                (c.stats(0).arrivals, c.stats(0).latency_mean_ms.unwrap_or(0.0))
            })
            .collect::<Vec<_>>()
    };
    let base = arrivals(None);
    let up = arrivals(Some(Scenario { kind: ScenarioKind::LoadLowToHigh, at_step: Some(10) }));
    assert_eq!(base[..10], up[..10]);
    // Arrivals are Poisson counts around the (×5) rate, trace replay included: compare totals.
    let total = |v: &[(f64, f64)]| v[10..].iter().map(|x| x.0).sum::<f64>();
    assert!((total(&up) / total(&base) - 5.0).abs() < 0.75, "{} vs {}", total(&up), total(&base));
    let heavy = arrivals(Some(Scenario { kind: ScenarioKind::PayloadUp, at_step: Some(10) }));
    assert_eq!(base[..10], heavy[..10]);
    assert!(heavy[12].1 > 2.0 * base[12].1, "bigger payloads are slower: {:?} vs {:?}", base[12], heavy[12]);
}

/// A scenario in force from the first step shows in the warm start's first observation: the
/// load it scales and the payload it changes, not the workload before it.
#[test]
fn a_scenario_from_the_first_step_shows_in_the_first_observation() {
    let first = |kind: Option<ScenarioKind>| {
        let scenario = kind.map(|kind| Scenario { kind, at_step: Some(0) });
        let c = isolated(web_app(), 10.0, SimConfig { scenario, noise: 0.0, ..SimConfig::default() });
        let o = c.observe(0).unwrap();
        let usage: f64 = o.pods.iter().filter_map(|p| p.cpu_usage_cores).sum();
        (o.arrival_rate, usage)
    };
    let (base_rate, base_usage) = first(None);
    assert!((base_rate - 10.0).abs() < 1e-9, "{base_rate}");
    let (low_rate, low_usage) = first(Some(ScenarioKind::LoadHighToLow));
    assert!((low_rate - 2.0).abs() < 1e-9, "{low_rate}");
    assert!(low_usage < 0.5 * base_usage, "{low_usage} vs {base_usage}");
    let (heavy_rate, heavy_usage) = first(Some(ScenarioKind::PayloadUp));
    assert!((heavy_rate - 10.0).abs() < 1e-9, "{heavy_rate}");
    assert!(heavy_usage > 1.5 * base_usage, "{heavy_usage} vs {base_usage}");

    // Going on from another run: shown at once where the other had it in force (an episode
    // after a change), from the first interval's metrics where it begins there (the change
    // falls on the episode's start).
    let go_on = |scenario_before: Option<ScenarioKind>| {
        let config = SimConfig { noise: 0.0, ..SimConfig::default() };
        let before = scenario_before.map(|kind| Scenario { kind, at_step: Some(0) });
        let mut c = isolated(web_app(), 10.0, SimConfig { scenario: before, ..config.clone() });
        for _ in 0..4 {
            c.advance().unwrap();
        }
        let start = c.continuation();
        assert_eq!(start.scenario, scenario_before);
        let scenario = Some(Scenario { kind: ScenarioKind::LoadHighToLow, at_step: Some(0) });
        let mut next = isolated(web_app(), 10.0, SimConfig { scenario, start: Some(start), ..config });
        let first = next.observe(0).unwrap().arrival_rate;
        next.advance().unwrap();
        next.advance().unwrap();
        (first, next.observe(0).unwrap().arrival_rate)
    };
    let (first, later) = go_on(Some(ScenarioKind::LoadHighToLow));
    assert!((first - 2.0).abs() < 1e-9, "{first}");
    assert!(later < 5.0, "{later}");
    let (first, later) = go_on(None);
    assert!((first - 10.0).abs() < 1e-9, "{first}");
    assert!(later < 5.0, "{later}");
}

/// A cluster sized by `node_headroom` keeps that headroom over the workload a scenario changes
/// it to: every app at the reference allocation of its changed workload is scheduled in full,
/// where the cluster sized for the workload as generated leaves pods pending. A change that
/// shrinks the workload, or interference, sizes it as before.
#[test]
fn a_cluster_is_sized_for_the_workload_its_scenario_changes_to() {
    let apps = generate_apps(6, 19, 86_400.0);
    let sized = |kind: Option<ScenarioKind>| {
        let scenario = kind.map(|kind| Scenario { kind, at_step: Some(0) });
        SimCluster::new(apps.clone(), Vec::new(), SimConfig { scenario, ..SimConfig::default() }, 1)
    };
    let before = sized(None).node_count();
    for kind in [ScenarioKind::PayloadDown, ScenarioKind::LoadHighToLow, ScenarioKind::NodeInterference] {
        assert_eq!(sized(Some(kind)).node_count(), before, "{}", kind.name());
    }
    for kind in [ScenarioKind::LoadLowToHigh, ScenarioKind::PayloadUp] {
        let pending = |c: &mut SimCluster| {
            for (i, app) in apps.iter().enumerate() {
                let r = app.reference_under(kind);
                c.apply(i, &rec(r.replicas, r.cpu_millicores, r.memory_bytes)).unwrap();
            }
            c.advance().unwrap();
            (0..apps.len()).map(|i| c.observe(i).unwrap().replica_counts().pending).sum::<u32>()
        };
        let mut changed = sized(Some(kind));
        assert!(changed.node_count() > before, "{}: {} nodes", kind.name(), changed.node_count());
        assert_eq!(pending(&mut changed), 0, "{}", kind.name());
        let config = SimConfig {
            scenario: Some(Scenario { kind, at_step: Some(0) }),
            nodes: Some(before),
            ..SimConfig::default()
        };
        let mut as_generated = SimCluster::new(apps.clone(), Vec::new(), config, 1);
        assert!(pending(&mut as_generated) > 0, "{}: the generated sizing fits the change too", kind.name());
    }
}

#[test]
fn node_interference_slows_co_located_pods() {
    let lat = |scenario| {
        // Half of a 2-core node goes to the neighbour; the pod wants ~1.5 of its 2 cores.
        let config = SimConfig { scenario, nodes: Some(1), node_cores: 2.0, noise: 0.0, ..SimConfig::default() };
        let trace = Arc::new(Trace { name: "c".into(), interval_s: 15.0, rates: vec![25.0] });
        let mut c = SimCluster::new(vec![web_app()], vec![trace], config, 1);
        c.apply(0, &rec(1, 2000, 8 << 30)).unwrap();
        // Over the run: the worst mean latency of an interval and how many intervals violated
        // the SLO (contended, the pod's queue grows until it is OOM-killed and restarts, so the
        // last interval alone says little).
        let (mut worst, mut violated) = (0.0f64, 0);
        for _ in 0..8 {
            c.advance().unwrap();
            let st = c.stats(0);
            worst = worst.max(st.latency_mean_ms.unwrap_or(f64::INFINITY));
            violated += usize::from(st.slo_violated);
        }
        (worst, violated)
    };
    let (quiet, quiet_violations) = lat(None);
    let (noisy, noisy_violations) = lat(Some(Scenario { kind: ScenarioKind::NodeInterference, at_step: Some(0) }));
    assert_eq!(quiet_violations, 0, "alone on its node the pod meets its SLO");
    assert!(noisy > 1.5 * quiet, "{quiet} vs {noisy}");
    assert!(noisy_violations >= 2, "{noisy_violations} SLO-violating intervals under interference");
}

#[test]
fn policies_see_the_previous_window() {
    // Load doubles at 10 minutes; the observation at the end of the first doubled interval still
    // shows the interval before it, the next one the doubled interval. Arrivals are Poisson
    // counts, so the check is against what each interval actually received.
    let run = |config: SimConfig| {
        let trace = Arc::new(Trace { name: "step".into(), interval_s: 600.0, rates: vec![5.0, 10.0] });
        let mut c = SimCluster::new(vec![web_app()], vec![trace], config, 1);
        let mut arrivals = Vec::new();
        for _ in 0..41 {
            c.advance().unwrap();
            arrivals.push(c.stats(0).arrivals / 15.0);
        }
        (c, arrivals)
    };
    let (mut c, rates) = run(SimConfig { noise: 0.0, ..SimConfig::default() });
    // Interval 40 (the 41st) is the first under the doubled rate (a count of mean 150, sd ~12).
    assert!((rates[40] - 10.0).abs() < 3.0, "{rates:?}");
    assert!((rates[39] - 5.0).abs() < 2.0, "{rates:?}");
    assert!((c.observe(0).unwrap().arrival_rate - rates[39]).abs() < 1e-9);
    assert_eq!(c.metrics_age_s(0), Some(15.0));
    c.advance().unwrap();
    assert!((c.observe(0).unwrap().arrival_rate - rates[40]).abs() < 1e-9);
    // With no lag the observation is the interval just ended.
    let (c, rates) = run(SimConfig { noise: 0.0, metrics_lag_s: 0.0, ..SimConfig::default() });
    assert!((c.observe(0).unwrap().arrival_rate - rates[40]).abs() < 1e-9);
}

#[test]
fn scaled_down_pods_drain_and_what_is_left_is_dropped() {
    // Two pods deep in overload hold queues; deleting one drops what it cannot finish in the
    // grace period, and the pod holds its node until then.
    let app = web_app();
    let cap = 2.0 / app.cost().cpu_s;
    // Memory for every queued request: this is about draining, not OOM kills. A grace period
    // shorter than the request timeout (with equal ones, queued requests time out first).
    let config =
        SimConfig { noise: 0.0, node_memory_bytes: 1 << 42, termination_grace_s: 15.0, ..SimConfig::default() };
    let mut c = isolated(app, 3.0 * cap, config);
    c.apply(0, &rec(2, 1000, 1 << 40)).unwrap();
    for _ in 0..10 {
        c.advance().unwrap();
    }
    c.apply(0, &rec(1, 1000, 1 << 40)).unwrap();
    c.advance().unwrap();
    let st = *c.stats(0);
    assert_eq!(st.draining_replicas, 1, "{st:?}");
    assert_eq!(st.scheduled_replicas, 1);
    assert!(st.dropped_on_termination > 10.0, "{st:?}");
    c.advance().unwrap();
    assert_eq!(c.stats(0).draining_replicas, 0);
}

#[test]
fn in_place_memory_decrease_waits_for_the_working_set() {
    let app = web_app();
    let base = app.cost().mem_base_bytes as u64;
    let mut c = isolated(app, 10.0, SimConfig { noise: 0.0, ..SimConfig::default() });
    c.advance().unwrap();
    // Below the working set: the spec changes, the container keeps its memory and is not killed.
    c.apply(0, &rec(1, 1000, base + MIB)).unwrap();
    for _ in 0..10 {
        c.advance().unwrap();
        assert_eq!(c.stats(0).oom_events, 0);
        assert_eq!(c.stats(0).ready_replicas, 1);
    }
    // The spec (the template) has the new limit; the pod shows what its container runs with,
    // so its memory utilisation is the working set over the limit still in force, not 100 %.
    let o = c.observe(0).unwrap();
    assert_eq!(o.template.limits.memory_bytes, base + MIB);
    assert!(o.pods[0].resources.limits.memory_bytes > base + MIB, "{:?}", o.pods[0].resources);
    let u = o.memory_utilisation().unwrap();
    assert!(u < 0.99, "a deferred decrease read as a full container: {u}");
}

#[test]
fn reset_draws_the_start_over_a_week_and_keeps_determinism() {
    let mut a = SimCluster::new(generate_apps(3, 2, 86_400.0), vec![], SimConfig::default(), 2);
    assert_eq!(a.start_time_s(), 0.0, "a new cluster starts where a trace starts");
    let mut starts = Vec::new();
    for seed in 0..20 {
        a.reset(Some(seed)).unwrap();
        let t = a.start_time_s();
        assert!((0.0..7.0 * 86_400.0).contains(&t) && (t / 15.0).fract() == 0.0);
        starts.push(t);
        let mut b = SimCluster::new(generate_apps(3, 2, 86_400.0), vec![], SimConfig::default(), 99);
        b.reset(Some(seed)).unwrap();
        assert_eq!(b.start_time_s(), t, "same seed, same start");
        a.advance().unwrap();
        b.advance().unwrap();
        assert_eq!(a.stats(0).arrivals, b.stats(0).arrivals);
    }
    starts.sort_by(f64::total_cmp);
    starts.dedup();
    assert!(starts.len() >= 18, "{starts:?}");
    assert!(starts.iter().any(|&t| t > 3.5 * 86_400.0), "later days too");
}

#[test]
fn a_hundred_thousand_apps_schedule_and_step() {
    let apps = generate_apps(100_000, 5, 86_400.0);
    let start = std::time::Instant::now();
    let mut c = SimCluster::new(apps, vec![], SimConfig::default(), 5);
    c.advance().unwrap();
    let pods: u32 = (0..100_000).map(|a| c.stats(a).scheduled_replicas).sum();
    assert!(pods >= 100_000);
    // Quadratic scheduling took minutes here; the segment tree takes about a second.
    assert!(start.elapsed().as_secs() < 120, "{:?}", start.elapsed());
}

#[test]
fn target_is_what_observe_reports_as_desired_and_template() {
    let mut c = isolated(web_app(), 40.0, SimConfig::default());
    let check = |c: &SimCluster| {
        let obs = c.observe(0).unwrap();
        assert_eq!(c.target(0).unwrap(), (obs.desired_replicas, obs.template));
    };
    check(&c);
    for (i, r) in [rec(3, 500, 256 * MIB), rec(1, 1500, 512 * MIB), rec(5, 250, 128 * MIB)].iter().enumerate() {
        c.apply(0, r).unwrap();
        check(&c);
        for _ in 0..=i {
            c.advance().unwrap();
        }
        check(&c);
    }
    assert!(c.target(7).is_err());
}

/// Burstable pods (CPU request at half the limit) let the scheduler place more limits on a
/// node than it has cores, and under load the co-located tenants slow each other (the one
/// contention model: a node's demand over its cores); Guaranteed pods of the same limits do
/// not all fit — the surplus is pending — and the placed one runs undisturbed.
#[test]
fn burstable_pods_over_commit_a_node_and_contend() {
    // Two tenants, one 1-core replica each, on a 1-core node; each pod wants ~0.75 core.
    let tenant = |name: &str| {
        let mut app = web_app();
        app.name = name.into();
        app.reference.replicas = 1;
        app.reference.cpu_millicores = 1000;
        app
    };
    let rps = 0.75 / web_app().cost().cpu_s;
    let run = |ratio: f64, neighbour_rps: f64| {
        let traces = vec![
            Arc::new(Trace { name: "a".into(), interval_s: 15.0, rates: vec![rps] }),
            Arc::new(Trace { name: "b".into(), interval_s: 15.0, rates: vec![neighbour_rps] }),
        ];
        let config =
            SimConfig { nodes: Some(1), node_cores: 1.0, noise: 0.0, cpu_request_ratio: ratio, ..SimConfig::default() };
        let mut c = SimCluster::new(vec![tenant("a"), tenant("b")], traces, config, 1);
        let (mut worst, mut core_seconds) = (0.0f64, 0.0);
        for _ in 0..8 {
            c.advance().unwrap();
            worst = worst.max(c.stats(0).latency_mean_ms.unwrap_or(f64::INFINITY));
            core_seconds += c.stats(0).core_seconds;
        }
        let template = c.observe(0).unwrap().template;
        (worst, c.stats(0).pending_replicas, c.stats(1).pending_replicas, core_seconds, template)
    };
    // Burstable: both pods are placed (requests 0.5 + 0.5 cores; limits 2 cores on 1).
    let (alone, p0, p1, core_seconds, template) = run(0.5, 0.0);
    assert_eq!((p0, p1), (0, 0));
    assert_eq!((template.requests.cpu_millicores, template.limits.cpu_millicores), (500, 1000));
    assert_eq!(template.requests.memory_bytes, template.limits.memory_bytes, "memory is requested in full");
    // Core-seconds count the request, not the limit.
    assert!((core_seconds - 8.0 * 15.0 * 0.5).abs() < 1e-6, "{core_seconds}");
    let (contended, p0, p1, ..) = run(0.5, rps);
    assert_eq!((p0, p1), (0, 0));
    assert!(contended > 1.5 * alone, "a busy neighbour slows a burstable pod: {alone} vs {contended} ms");
    // Guaranteed: the neighbour's pod does not fit and pends; the placed pod is not slowed.
    let (quiet, p0, p1, core_seconds, _) = run(1.0, 0.0);
    assert_eq!((p0, p1), (0, 1));
    assert!((core_seconds - 8.0 * 15.0).abs() < 1e-6, "{core_seconds}");
    let (busy, ..) = run(1.0, rps);
    assert_eq!(busy, quiet, "a pending neighbour does not interfere");
}

/// A node count no memory holds is refused with the setting named, not attempted (a headroom
/// of 1e300 once asked for `usize::MAX` nodes and aborted on `capacity overflow`); `new`, which
/// cannot refuse, holds at most `MAX_NODES`.
#[test]
fn node_counts_beyond_the_simulator_are_refused() {
    let apps = generate_apps(3, 7, 86_400.0);
    let sized = |config: SimConfig| SimCluster::try_new(apps.clone(), Vec::new(), config, 1);
    let fine = sized(SimConfig::default()).unwrap();
    assert!((2..=aware_sim::MAX_NODES).contains(&fine.node_count()));
    for (config, field) in [
        (SimConfig { node_headroom: 1e300, ..SimConfig::default() }, "node_headroom"),
        (SimConfig { node_headroom: f64::NAN, ..SimConfig::default() }, "node_headroom"),
        (SimConfig { node_cores: 0.0, ..SimConfig::default() }, "node_headroom"),
        (SimConfig { nodes: Some(aware_sim::MAX_NODES + 1), ..SimConfig::default() }, "nodes"),
    ] {
        let e = sized(config.clone()).unwrap_err().to_string();
        assert_eq!(e, config.node_count(&apps).unwrap_err().to_string());
        assert!(e.starts_with(&format!("{field}: ")) && e.contains("1000000"), "{e}");
    }
    let capped = SimCluster::new(apps, Vec::new(), SimConfig { node_headroom: 1e300, ..SimConfig::default() }, 1);
    assert_eq!(capped.node_count(), aware_sim::MAX_NODES);
}

/// A run that goes on from another starts at its clock with every app's deployment as it ended
/// (running and ready), where a fresh run starts at the reference allocation; the traffic is
/// the new run's own.
#[test]
fn a_continued_run_starts_where_the_other_ended() {
    let apps = generate_apps(2, 11, 86_400.0);
    let config = SimConfig { noise: 0.0, ..SimConfig::default() };
    let mut first = SimCluster::new(apps.clone(), Vec::new(), config.clone(), 3);
    let (replicas, cpu_m, memory) = (apps[0].reference.replicas + 2, 700, 300 * MIB);
    first.apply(0, &rec(replicas, cpu_m, memory)).unwrap();
    for _ in 0..20 {
        first.advance().unwrap();
    }
    let ended = first.continuation();
    assert_eq!(ended.time_s, first.start_time_s() + 20.0 * config.interval_s);
    let continued =
        SimCluster::new(apps.clone(), Vec::new(), SimConfig { start: Some(ended.clone()), ..config.clone() }, 4);
    assert_eq!(continued.start_time_s(), ended.time_s);
    let obs = continued.observe(0).unwrap();
    assert_eq!(obs.desired_replicas, replicas);
    assert_eq!(obs.template.limits, Resources::new(cpu_m, memory));
    assert_eq!(obs.replica_counts().ready, replicas, "the pods it had are running and ready");
    // The other app, untouched, goes on at its reference; a fresh run starts there for both.
    let other = continued.observe(1).unwrap();
    assert_eq!(other.desired_replicas, apps[1].reference.replicas);
    let fresh = SimCluster::new(apps.clone(), Vec::new(), config, 4).observe(0).unwrap();
    assert_eq!(fresh.desired_replicas, apps[0].reference.replicas);
    assert_eq!(fresh.template.limits.cpu_millicores, apps[0].reference.cpu_millicores);
}

/// A run going on from another keeps the pods that were running there: an app whose scale-up
/// was left pending on a full cluster does not take the place of a later app's running pods
/// when the cluster is rebuilt (the pods that were bound are placed first, every app's).
#[test]
fn a_continued_run_keeps_running_pods_before_pending_ones() {
    let apps = generate_apps(2, 11, 86_400.0);
    let config = SimConfig { noise: 0.0, nodes: Some(1), node_cores: 64.0, ..SimConfig::default() };
    let mut first = SimCluster::new(apps.clone(), Vec::new(), config.clone(), 3);
    let ready = |c: &SimCluster, app| c.observe(app).unwrap().replica_counts().ready;
    let others = apps[1].reference.replicas;
    assert_eq!(ready(&first, 1), others, "the second app must fit at the start");
    // The first app asks for more than the node has left: some of its pods pend.
    first.apply(0, &rec(200, 1000, 256 * MIB)).unwrap();
    for _ in 0..10 {
        first.advance().unwrap();
    }
    let ended = first.continuation();
    let bound = ended.deployments[0].bound.unwrap();
    assert!(bound < 200, "nothing pending: the test tests nothing ({bound} of 200 bound)");
    assert_eq!(ended.deployments[1].bound, Some(others));
    let continued = SimCluster::new(apps, Vec::new(), SimConfig { start: Some(ended), ..config }, 4);
    assert_eq!(ready(&continued, 1), others, "the second app's running pods were displaced");
    assert_eq!(ready(&continued, 0), bound);
}

/// A pod whose resize its node could not admit holds its old requests and goes on serving with
/// them; a continuation carries it so, and the run going on keeps it serving (placed before any
/// app's pending pods) while the rollout to the new template waits for room, as the cluster
/// would. Until session 69 the continuation counted as bound only as many of the new template's
/// pods as the capacity held fitted: at four times the CPU a quarter of the pods, at more than
/// the whole app held none, and a full cluster left the app without a pod for an episode.
#[test]
fn a_continued_run_keeps_the_pods_an_unadmitted_resize_left_serving() {
    let apps = generate_apps(2, 11, 86_400.0);
    let config = SimConfig { noise: 0.0, nodes: Some(1), node_cores: 64.0, ..SimConfig::default() };
    let mut first = SimCluster::new(apps.clone(), Vec::new(), config.clone(), 3);
    // The first app fills the node (some of its pods pend).
    first.apply(0, &rec(200, 1000, 256 * MIB)).unwrap();
    first.advance().unwrap();
    let held = first.observe(1).unwrap().replica_counts().ready;
    assert!(held > 0);
    let before = first.observe(1).unwrap().template;
    // More CPU per pod than the second app held in all: no resize is admitted, and no pod of
    // the new template fits anywhere.
    let bigger = (held as u64 + 1) * before.requests.cpu_millicores;
    first.apply(1, &rec(held, bigger, before.requests.memory_bytes)).unwrap();
    for _ in 0..3 {
        first.advance().unwrap();
    }
    let serving = |c: &SimCluster| {
        let obs = c.observe(1).unwrap();
        let old = obs.pods.iter().filter(|p| p.phase == PodPhase::Ready && p.resources.requests == before.requests);
        (obs.replica_counts().ready, old.count() as u32)
    };
    assert_eq!(serving(&first), (held, held), "the old pods serve while the rollout waits");
    let ended = first.continuation();
    assert_eq!(ended.deployments[1].bound, Some(0));
    assert_eq!(ended.deployments[1].outdated.len(), held as usize);
    let continued = SimCluster::new(apps, Vec::new(), SimConfig { start: Some(ended), ..config }, 4);
    assert_eq!(serving(&continued), (held, held), "the continued run dropped the pods that were serving");
    assert_eq!(continued.observe(1).unwrap().template.requests.cpu_millicores, bigger);
}

/// Room an app reconciled after another frees (its pods deleted before they served) reaches
/// the other's pending pods within the interval: until session 69 the event was lost to the
/// apps reconciled before, whose pods then pended on a node with room until something else
/// freed some.
#[test]
fn room_a_later_app_frees_reaches_an_earlier_apps_pending_pods() {
    let apps = generate_apps(2, 11, 86_400.0);
    let config = SimConfig { noise: 0.0, nodes: Some(1), node_cores: 64.0, ..SimConfig::default() };
    let mut cluster = SimCluster::new(apps, Vec::new(), config, 3);
    let counts = |c: &SimCluster, app| c.observe(app).unwrap().replica_counts();
    let template = |c: &SimCluster, app| c.observe(app).unwrap().template.requests;
    let (first, second) = (template(&cluster, 0), template(&cluster, 1));
    let (keep0, keep1) = (counts(&cluster, 0).desired, counts(&cluster, 1).desired);
    // The second app takes the rest of the node with pods that are still starting …
    cluster.apply(1, &rec(200, second.cpu_millicores, second.memory_bytes)).unwrap();
    cluster.advance().unwrap();
    // … so the first app's scale-up pends.
    cluster.apply(0, &rec(keep0 + 2, first.cpu_millicores, first.memory_bytes)).unwrap();
    cluster.advance().unwrap();
    assert!(counts(&cluster, 0).pending > 0, "nothing pending: the test tests nothing");
    // The second app goes back before its new pods serve: they go at once, and their room is
    // the first app's.
    cluster.apply(1, &rec(keep1, second.cpu_millicores, second.memory_bytes)).unwrap();
    cluster.advance().unwrap();
    assert_eq!(counts(&cluster, 0).pending, 0, "the first app's pods pend on a node with room");
}
