//! HPA controller tables ported from upstream `horizontal_test.go` (`TestScalingWithRules`,
//! `TestNormalizeDesiredReplicas`, `TestStoreScaleEvents`), each case with upstream's expected
//! number, and the controller over time. The replica calculator's upstream cases are in
//! `replica_calculator.rs`, one test each.

use aware_baselines::behavior::{
    self, Behavior, Limit, Normalization, PolicyKind, ScaleEvent, ScalingPolicy, ScalingRules, SelectPolicy,
    TimestampedRecommendation,
};
use aware_baselines::{
    BehaviorSpec, ContainerKind, ContainerRequest, ControllerFlags, HorizontalPodAutoscaler, HpaError, HpaSpec,
    MetricSample, MetricSpec, MetricTarget, Phase, PodState, PodView, ReadyCondition, ResourceName,
};

const NOW: f64 = 10_000.0;

/// (recommendation or change, seconds ago) entries of a controller's history.
type Log = Vec<(i32, f64)>;

/// `generateScalingRules(pods, podsPeriod, percent, percentPeriod, window)`.
fn rules(pods: i32, pods_period: i32, percent: i32, percent_period: i32, window: i32) -> ScalingRules {
    let mut policies = Vec::new();
    if pods != 0 {
        policies.push(ScalingPolicy { kind: PolicyKind::Pods, value: pods, period_s: pods_period });
    }
    if percent != 0 {
        policies.push(ScalingPolicy { kind: PolicyKind::Percent, value: percent, period_s: percent_period });
    }
    ScalingRules { stabilization_window_s: window, select_policy: SelectPolicy::Max, policies }
}

/// `generateEventsUniformDistribution`: events centred in equal slices of the last `period` s.
fn events(raw: &[i32], period: f64) -> Vec<ScaleEvent> {
    let seg = period / raw.len() as f64;
    raw.iter()
        .enumerate()
        .map(|(i, &c)| ScaleEvent {
            replica_change: c,
            at_s: NOW - (period - seg * (i + 1) as f64 + seg / 2.0),
            outdated: false,
        })
        .collect()
}

#[test]
fn scaling_with_rules_table() {
    use Limit::*;
    struct R {
        name: &'static str,
        up_events: Vec<ScaleEvent>,
        down_events: Vec<ScaleEvent>,
        min: i32,
        max: i32,
        up: Option<ScalingRules>,
        down: Option<ScalingRules>,
        current: i32,
        desired: i32,
        expected: i32,
        limit: Limit,
    }
    let r = |name, min, max, up, down, current, desired, expected, limit| R {
        name,
        up_events: vec![],
        down_events: vec![],
        min,
        max,
        up,
        down,
        current,
        desired,
        expected,
        limit,
    };
    let e159 = || events(&[1, 5, 9], 120.0);
    let cases = vec![
        r("within range", 3, 8, None, None, 5, 7, 7, DesiredWithinRange),
        r("below minReplicas", 2, 8, None, None, 3, 1, 2, TooFewReplicas),
        r("within range when minReplicas is 0", 0, 10, None, None, 1, 0, 0, DesiredWithinRange),
        r("maxReplicas below scale-up limit", 1, 10, None, None, 20, 1000, 10, TooManyReplicas),
        r("more than maxReplicas", 100, 150, None, None, 100, 1000, 150, TooManyReplicas),
        r(
            "user scale-up limit below maxReplicas",
            1,
            2000,
            Some(rules(0, 0, 1, 60, 0)),
            None,
            3,
            1000,
            4,
            ScaleUpLimit,
        ),
        r(
            "user scale-down limit above minReplicas",
            3,
            2000,
            None,
            Some(rules(20, 60, 0, 0, 0)),
            1000,
            3,
            980,
            ScaleDownLimit,
        ),
        r("scale up, default behaviour", 1, 1000, None, None, 10, 50, 20, ScaleUpLimit),
        r(
            "scale up, pods policy larger than percent",
            1,
            1000,
            Some(rules(100, 60, 100, 60, 0)),
            None,
            10,
            500,
            110,
            ScaleUpLimit,
        ),
        r(
            "scale up, percent policy larger than pods",
            1,
            1000,
            Some(rules(2, 60, 100, 60, 0)),
            None,
            10,
            500,
            20,
            ScaleUpLimit,
        ),
        r(
            "scale up within large pods policy",
            1,
            1000,
            Some(rules(100, 60, 0, 0, 0)),
            None,
            10,
            50,
            50,
            DesiredWithinRange,
        ),
        r(
            "scale up within very large pods policy",
            1,
            1000,
            Some(rules(10000, 60, 0, 0, 0)),
            None,
            10,
            50,
            50,
            DesiredWithinRange,
        ),
        r("scale up, pods policy limits", 1, 1000, Some(rules(30, 60, 0, 0, 0)), None, 10, 50, 40, ScaleUpLimit),
        r("scale up, percent policy limits", 1, 1000, Some(rules(0, 0, 200, 60, 0)), None, 10, 50, 30, ScaleUpLimit),
        r(
            "scale down, percent policy larger than pods",
            1,
            1000,
            None,
            Some(rules(20, 60, 1, 60, 300)),
            100,
            2,
            80,
            ScaleDownLimit,
        ),
        r(
            "scale down, pods policy larger than percent",
            1,
            1000,
            None,
            Some(rules(2, 60, 1, 60, 300)),
            100,
            2,
            98,
            ScaleDownLimit,
        ),
        r(
            "scale down to minReplicas with large pods policy",
            1,
            1000,
            None,
            Some(rules(100, 60, 0, 0, 300)),
            10,
            0,
            1,
            TooFewReplicas,
        ),
        r(
            "scale down to minReplicas with large percent policy",
            5,
            1000,
            None,
            Some(rules(0, 0, 100, 60, 300)),
            10,
            2,
            5,
            TooFewReplicas,
        ),
        r("scale down, pods policy limits", 1, 1000, None, Some(rules(5, 60, 0, 0, 300)), 10, 2, 5, ScaleDownLimit),
        r(
            "scale down within percent policy",
            1,
            1000,
            None,
            Some(rules(0, 0, 50, 60, 300)),
            10,
            5,
            5,
            DesiredWithinRange,
        ),
        R {
            up_events: e159(),
            ..r(
                "max with large pods policy and events",
                1,
                200,
                Some(rules(300, 60, 0, 0, 0)),
                None,
                100,
                500,
                200,
                TooManyReplicas,
            )
        },
        R {
            up_events: e159(),
            ..r(
                "max with large percent policy and events",
                1,
                200,
                Some(rules(0, 0, 10000, 60, 0)),
                None,
                100,
                500,
                200,
                TooManyReplicas,
            )
        },
        R {
            up_events: e159(),
            ..r(
                "recent scale-ups exhaust the pods policy",
                1,
                1000,
                Some(rules(5, 120, 0, 0, 0)),
                None,
                100,
                500,
                100,
                ScaleUpLimit,
            )
        },
        R {
            up_events: e159(),
            ..r(
                "pods policy after scale-ups",
                1,
                1000,
                Some(rules(150, 120, 0, 0, 0)),
                None,
                100,
                500,
                235,
                ScaleUpLimit,
            )
        },
        R {
            up_events: e159(),
            ..r(
                "percent policy after scale-ups",
                1,
                1000,
                Some(rules(0, 0, 200, 120, 0)),
                None,
                100,
                500,
                255,
                ScaleUpLimit,
            )
        },
        R {
            up_events: events(&[4], 120.0),
            down_events: events(&[2], 120.0),
            ..r(
                "percent policy after ups and downs",
                1,
                1000,
                Some(rules(0, 0, 300, 300, 0)),
                None,
                6,
                24,
                16,
                ScaleUpLimit,
            )
        },
        R {
            down_events: e159(),
            ..r("scale down, default policy with events", 1, 1000, None, None, 10, 5, 5, DesiredWithinRange)
        },
        R {
            down_events: e159(),
            ..r(
                "scale down to min=1 with large pods policy and events",
                1,
                1000,
                None,
                Some(rules(115, 120, 0, 0, 300)),
                100,
                0,
                1,
                TooFewReplicas,
            )
        },
        R {
            down_events: e159(),
            ..r(
                "scale down to min=5 with large pods policy and events",
                5,
                1000,
                None,
                Some(rules(130, 120, 0, 0, 300)),
                100,
                0,
                5,
                TooFewReplicas,
            )
        },
        R {
            down_events: e159(),
            ..r(
                "scale down to min with 100 % policy and events",
                5,
                1000,
                None,
                Some(rules(0, 0, 100, 120, 300)),
                100,
                2,
                5,
                TooFewReplicas,
            )
        },
        R {
            down_events: e159(),
            ..r(
                "scale down, pods policy limits after events",
                1,
                1000,
                None,
                Some(rules(5, 120, 0, 0, 300)),
                100,
                2,
                100,
                ScaleDownLimit,
            )
        },
        R {
            down_events: events(&[2, 4, 6], 120.0),
            ..r(
                "scale down, percent policy limits after events",
                1,
                1000,
                None,
                Some(rules(0, 0, 50, 120, 300)),
                100,
                0,
                56,
                ScaleDownLimit,
            )
        },
        R {
            up_events: events(&[2], 120.0),
            down_events: events(&[4], 120.0),
            ..r(
                "scale down, percent policy after ups and downs",
                1,
                1000,
                None,
                Some(rules(0, 0, 50, 180, 0)),
                10,
                1,
                6,
                ScaleDownLimit,
            )
        },
        R {
            down_events: events(&[10, 10, 10], 120.0),
            ..r(
                "recent scale-downs prevent more",
                1,
                1000,
                None,
                Some(rules(0, 0, 10, 120, 300)),
                100,
                0,
                100,
                ScaleDownLimit,
            )
        },
        R {
            down_events: events(&[10, 10, 10], 120.0),
            ..r(
                "recent scale-downs still allow more",
                1,
                1000,
                None,
                Some(rules(0, 0, 1000, 120, 300)),
                10,
                5,
                5,
                DesiredWithinRange,
            )
        },
        R {
            up_events: events(&[8, 12, 9, 11], 120.0),
            ..r(
                "outdated up events, one policy",
                1,
                1000,
                Some(rules(1000, 60, 0, 0, 0)),
                None,
                100,
                200,
                200,
                DesiredWithinRange,
            )
        },
        R {
            up_events: events(&[8, 12, 9, 11], 120.0),
            ..r(
                "up events kept for two policies",
                1,
                1000,
                Some(rules(1000, 120, 100, 60, 0)),
                None,
                100,
                200,
                200,
                DesiredWithinRange,
            )
        },
        R {
            down_events: events(&[8, 12, 9, 11], 120.0),
            ..r(
                "outdated down events, one policy",
                1,
                1000,
                None,
                Some(rules(1000, 60, 0, 0, 300)),
                100,
                5,
                5,
                DesiredWithinRange,
            )
        },
    ];
    for c in &cases {
        let behavior = Behavior {
            scale_up: c.up.clone().unwrap_or_else(ScalingRules::default_scale_up),
            scale_down: c.down.clone().unwrap_or_else(|| ScalingRules::default_scale_down(300)),
        };
        let n = Normalization {
            now_s: NOW,
            behavior: &behavior,
            min_replicas: c.min,
            max_replicas: c.max,
            current_replicas: c.current,
            desired_replicas: c.desired,
        };
        let got = behavior::convert_with_behavior_rate(&n, &c.up_events, &c.down_events);
        assert_eq!(got, (c.expected, c.limit), "{}", c.name);
    }
}

#[test]
fn legacy_stabilization_table() {
    // (name, log of (recommendation, seconds ago), desired, expected, log length after)
    type Case = (&'static str, Log, i32, i32, usize);
    let cases: [Case; 5] = [
        ("empty log", vec![], 5, 5, 1),
        ("stabilize", vec![(4, 120.0), (5, 60.0)], 3, 5, 3),
        ("no stabilize", vec![(1, 120.0), (2, 60.0)], 3, 3, 3),
        ("no stabilize - old recommendations", vec![(10, 600.0), (9, 540.0)], 3, 3, 2),
        ("stabilize - old recommendations", vec![(10, 600.0), (4, 60.0), (5, 120.0), (9, 540.0)], 3, 5, 4),
    ];
    for (name, log, desired, expected, len) in cases {
        let mut log: Vec<TimestampedRecommendation> =
            log.into_iter().map(|(r, ago)| TimestampedRecommendation { recommendation: r, at_s: NOW - ago }).collect();
        assert_eq!(behavior::stabilize_legacy(NOW, 300.0, desired, &mut log), expected, "{name}");
        assert_eq!(log.len(), len, "{name}");
    }
}

#[test]
fn stabilization_with_behaviors_table() {
    // Karmada's port of the same function: (desired, current, log, expected).
    let behavior = Behavior { scale_up: rules(4, 15, 0, 0, 300), scale_down: rules(0, 0, 100, 15, 600) };
    type Case = (i32, i32, Log, i32);
    let cases: [Case; 3] =
        [(10, 5, vec![(8, 120.0), (7, 240.0)], 7), (3, 8, vec![(5, 300.0), (4, 480.0)], 5), (5, 5, vec![(5, 60.0)], 5)];
    for (desired, current, log, expected) in cases {
        let mut log: Vec<TimestampedRecommendation> =
            log.into_iter().map(|(r, ago)| TimestampedRecommendation { recommendation: r, at_s: NOW - ago }).collect();
        let before = log.len();
        let n = Normalization {
            now_s: NOW,
            behavior: &behavior,
            min_replicas: 1,
            max_replicas: 100,
            current_replicas: current,
            desired_replicas: desired,
        };
        assert_eq!(behavior::stabilize_with_behaviors(&n, &mut log), expected);
        assert_eq!(log.len(), before + 1);
    }
}

#[test]
fn legacy_conversion_table() {
    use Limit::*;
    let cases = [
        (5, 7, 3, 8, 7, DesiredWithinRange),
        (3, 1, 2, 8, 2, TooFewReplicas),
        (20, 1000, 1, 10, 10, TooManyReplicas),
        (3, 1000, 1, 2000, 6, ScaleUpLimit), // max(2 × 3, 4)
        (1, 1000, 1, 2000, 4, ScaleUpLimit), // max(2 × 1, 4)
    ];
    for (current, desired, min, max, expected, limit) in cases {
        assert_eq!(behavior::convert_with_rules(current, desired, min, max), (expected, limit));
    }
}

#[test]
fn store_scale_events_table() {
    // (name, previous events as (change, seconds ago), rules, expected (change, outdated) after)
    type Case = (&'static str, Log, ScalingRules, Vec<(i32, bool)>, i32);
    let cases: Vec<Case> = vec![
        ("empty, two policies", vec![], rules(10, 60, 100, 60, 0), vec![(5, false)], 0),
        ("outdated entry replaced", vec![(7, 61.0)], rules(10, 60, 100, 60, 0), vec![(5, false)], 0),
        ("recent entry kept", vec![(7, 58.0)], rules(10, 60, 100, 60, 0), vec![(7, false), (5, false)], 7),
        ("one of two replaced", vec![(7, 61.0), (6, 59.0)], rules(10, 60, 0, 0, 0), vec![(5, false), (6, false)], 6),
        (
            "different periods",
            vec![(8, 29.0), (6, 59.0), (7, 61.0), (9, 61.0)],
            rules(10, 60, 100, 30, 0),
            vec![(8, false), (6, false), (7, true), (5, false)],
            14,
        ),
        (
            "both recent",
            vec![(7, 58.0), (6, 59.0)],
            rules(10, 120, 100, 30, 0),
            vec![(7, false), (6, false), (5, false)],
            13,
        ),
    ];
    for (name, prev, up_rules, expected, change_60s) in cases {
        let mut up: Vec<ScaleEvent> =
            prev.iter().map(|&(c, ago)| ScaleEvent { replica_change: c, at_s: NOW - ago, outdated: false }).collect();
        assert_eq!(behavior::replicas_change_per_period(NOW, 60, &up), change_60s, "{name}");
        let behavior = Behavior { scale_up: up_rules, scale_down: ScalingRules::default_scale_down(300) };
        behavior::store_scale_event(NOW, &behavior, &mut up, &mut Vec::new(), 10, 15);
        let got: Vec<(i32, bool)> = up.iter().map(|e| (e.replica_change, e.outdated)).collect();
        assert_eq!(got, expected, "{name}");
    }
}

fn ready_pods(n: usize, usage_m: i64) -> PodView {
    let mut view = PodView::default();
    for i in 0..n {
        let name = format!("p{i}");
        view.pods.push(PodState {
            name: name.clone(),
            phase: Phase::Running,
            deleting: false,
            start_time_s: Some(0.0),
            ready: Some(ReadyCondition { ready: true, last_transition_s: 0.0 }),
            containers: vec![ContainerRequest {
                name: "main".into(),
                kind: ContainerKind::Regular,
                request_milli: Some(1000),
            }],
            pod_request_milli: None,
        });
        view.samples.insert(name, MetricSample { value_milli: usage_m, timestamp_s: 0.0, window_s: 15.0 });
    }
    view
}

fn cpu_hpa(behavior: Option<BehaviorSpec>) -> HorizontalPodAutoscaler {
    HorizontalPodAutoscaler::new(
        HpaSpec { min_replicas: 1, max_replicas: 20, metrics: vec![MetricSpec::cpu_utilisation(50)], behavior },
        ControllerFlags::default(),
    )
}

/// The controller over time: usage drops, and the default 300 s scale-down window holds the
/// count until the high recommendations age out.
#[test]
fn downscale_waits_for_the_stabilisation_window() {
    for behavior in [Some(BehaviorSpec::default()), None] {
        let mut hpa = cpu_hpa(behavior.clone());
        let mut replicas = 8;
        // At target: recommendations of 8 fill the window.
        for t in 0..5 {
            replicas = hpa.reconcile(1000.0 + 15.0 * t as f64, replicas, &[ready_pods(8, 500)]).desired_replicas;
        }
        assert_eq!(replicas, 8);
        let mut history = Vec::new();
        for t in 5..40 {
            let now = 1000.0 + 15.0 * t as f64;
            replicas = hpa.reconcile(now, replicas, &[ready_pods(replicas as usize, 100)]).desired_replicas;
            history.push((now, replicas));
        }
        let first_drop = history.iter().find(|(_, r)| *r < 8).map(|(t, _)| *t).expect("scales down eventually");
        assert!(first_drop >= 1000.0 + 15.0 * 4.0 + 300.0, "{behavior:?}: dropped at {first_drop}");
        // 8 pods at 10 % of request with a 50 % target want ceil(0.2 × 8) = 2.
        assert_eq!(history.last().unwrap().1, 2, "{behavior:?}");
    }
}

#[test]
fn invalid_metrics_keep_the_current_count() {
    let mut hpa = cpu_hpa(Some(BehaviorSpec::default()));
    let d = hpa.reconcile(1000.0, 4, &[PodView::default()]);
    assert_eq!(d.desired_replicas, 4);
    assert!(d.error.unwrap().contains("invalid metrics (1 invalid out of 1)"));
    // Two metrics, the valid one would scale down while the other is missing: keep too.
    let mut two = HorizontalPodAutoscaler::new(
        HpaSpec {
            min_replicas: 1,
            max_replicas: 20,
            metrics: vec![
                MetricSpec::cpu_utilisation(50),
                MetricSpec::Resource { resource: ResourceName::Memory, target: MetricTarget::Utilization(50) },
            ],
            behavior: Some(BehaviorSpec::default()),
        },
        ControllerFlags::default(),
    );
    let d = two.reconcile(1000.0, 4, &[ready_pods(4, 100), PodView::default()]);
    assert_eq!(d.desired_replicas, 4);
    assert!(d.error.is_some());
    // …but scaling up on the valid metric goes ahead.
    let d = two.reconcile(1015.0, 4, &[ready_pods(4, 900), PodView::default()]);
    assert_eq!(d.desired_replicas, 8);
}

#[test]
fn max_over_metrics_and_spec_bounds() {
    let mut hpa = HorizontalPodAutoscaler::new(
        HpaSpec {
            min_replicas: 2,
            max_replicas: 6,
            metrics: vec![
                MetricSpec::cpu_utilisation(50),
                MetricSpec::Resource { resource: ResourceName::Memory, target: MetricTarget::Utilization(50) },
            ],
            behavior: Some(BehaviorSpec::default()),
        },
        ControllerFlags::default(),
    );
    // CPU wants 2 × 0.6 / 0.5 → 3, memory 2 × 0.9 / 0.5 → 4: the larger wins.
    let d = hpa.reconcile(1000.0, 2, &[ready_pods(2, 600), ready_pods(2, 900)]);
    assert_eq!((d.metric_replicas, d.desired_replicas), (Some(4), 4));
    // Outside the spec range the controller first moves into it, without metrics.
    assert_eq!(hpa.reconcile(1015.0, 9, &[]).desired_replicas, 6);
    assert_eq!(hpa.reconcile(1030.0, 1, &[]).desired_replicas, 2);
    // Scaled to zero by hand: autoscaling is off.
    assert_eq!(hpa.reconcile(1045.0, 0, &[]).desired_replicas, 0);
    let _ = HpaError::NoPods;
}

#[test]
fn scale_limits_round_like_upstream() {
    let both = |select| ScalingRules {
        stabilization_window_s: 300,
        select_policy: select,
        policies: vec![
            ScalingPolicy { kind: PolicyKind::Pods, value: 2, period_s: 60 },
            ScalingPolicy { kind: PolicyKind::Percent, value: 50, period_s: 60 },
        ],
    };
    // Upstream `TestCalculateScaleDownLimitWithSelectPolicy`: Min picks the smaller change.
    assert_eq!(behavior::scale_down_limit(NOW, 5, &[], &[], &both(SelectPolicy::Min)), 3);
    // Max picks the larger change: 5 − 50 % = 2.5, truncated to 2 (Go's int32 conversion).
    assert_eq!(behavior::scale_down_limit(NOW, 5, &[], &[], &both(SelectPolicy::Max)), 2);
    assert_eq!(behavior::scale_down_limit(NOW, 5, &[], &[], &both(SelectPolicy::Disabled)), 5);
    // Scale-up percentages round up: 3 × 1.5 = 4.5 → 5.
    let up = rules(0, 0, 50, 60, 0);
    assert_eq!(behavior::scale_up_limit(NOW, 3, &[], &[], &up), 5);
}

fn pod(name: &str, phase: aware_core::PodPhase, restarts: u32, cpu: Option<f64>) -> aware_core::PodObservation {
    let r = aware_core::Resources::new(1000, 512 << 20);
    aware_core::PodObservation {
        name: name.into(),
        phase,
        node: Some("n".into()),
        created_at_s: 0.0,
        ready_since_s: (phase == aware_core::PodPhase::Ready).then_some(30.0),
        cpu_usage_cores: cpu,
        memory_working_set_bytes: Some(100e6),
        resources: aware_core::ContainerResources::guaranteed("app", r),
        allocated: None,
        restarts,
        oom_killed_at_bytes: None,
        deleting: false,
        custom_metrics: Default::default(),
        containers: Vec::new(),
        unschedulable: None,
    }
}

fn observation(pods: Vec<aware_core::PodObservation>) -> aware_core::Observation {
    aware_core::Observation {
        app: "a".into(),
        time_s: 3600.0,
        interval_s: 15.0,
        desired_replicas: pods.len() as u32,
        template: aware_core::ContainerResources::guaranteed("app", aware_core::Resources::new(1000, 512 << 20)),
        pods,
        arrival_rate: 1.0,
        throughput: 1.0,
        latency_mean_ms: None,
        latency_p99_ms: None,
        dropped_requests: 0,
        oom_events: 0,
        io_utilisation: 0.0,
        network_utilisation: 0.0,
    }
}

/// Upstream's readiness rules on what the simulator reports: a crash-looping (or OOM-killed)
/// container that was ready before counts with its sample after the CPU initialisation period,
/// as upstream counts a pod that "was ready" once; a container that never became ready is set
/// aside; failed and terminating pods are ignored.
#[test]
fn crash_looping_failed_and_terminating_pods_as_upstream() {
    use aware_baselines::pod_view;
    use aware_core::PodPhase::{Failed, Ready, Starting};
    let mut terminating = pod("p4", Ready, 0, Some(0.9));
    terminating.deleting = true;
    let obs = observation(vec![
        pod("p0", Ready, 0, Some(0.9)),
        pod("p1", Starting, 3, Some(0.0)),
        pod("p2", Starting, 0, Some(0.5)),
        pod("p3", Failed, 0, None),
        terminating,
    ]);
    let view = pod_view(&obs, &MetricSpec::cpu_utilisation(50));
    let calc = ControllerFlags::default().calculator;
    let groups = aware_baselines::replica_calculator::group_pods(
        obs.time_s,
        &view.pods,
        &view.samples,
        Some(ResourceName::Cpu),
        calc.cpu_initialization_period_s,
        calc.delay_of_initial_readiness_status_s,
    );
    assert_eq!(groups.ready_count, 2, "p0 and the crash-looping p1: {groups:?}");
    assert_eq!(groups.unready.iter().map(String::as_str).collect::<Vec<_>>(), ["p2"]);
    assert_eq!(groups.ignored.iter().map(String::as_str).collect::<Vec<_>>(), ["p3", "p4"]);
    // (0.9 + 0.0) / 2 cores = 45 % against 50 %: within tolerance, 5 replicas stay 5.
    let r = calc.resource_replicas(obs.time_s, 5, 50, ResourceName::Cpu, None, &view.pods, &view.samples).unwrap();
    assert_eq!((r.replicas, r.utilisation), (5, 45));
}
