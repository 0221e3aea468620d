//! HPA tables ported from upstream `replica_calculator_test.go` and `horizontal_test.go`
//! (`TestReplicaCalc*`, `TestScalingWithRules`, `TestNormalizeDesiredReplicas`,
//! `TestStoreScaleEvents`), each case with upstream's expected number. Upstream's test pods have
//! two containers; ours have one, so upstream's raw per-pod values are halved here.

use std::collections::BTreeMap;

use aware_baselines::hpa::behavior::{
    self, Behavior, Limit, Normalization, PolicyKind, ScaleEvent, ScalingPolicy, ScalingRules, SelectPolicy,
    TimestampedRecommendation,
};
use aware_baselines::hpa::{
    BehaviorSpec, ControllerFlags, HorizontalPodAutoscaler, HpaError, HpaSpec, MetricSample, Phase, PodState, PodView,
    ReadyCondition, ReplicaCalculator, ResourceName, ResourceTarget, Tolerances,
};

const NOW: f64 = 10_000.0;

/// (recommendation or change, seconds ago) entries of a controller's history.
type Log = Vec<(i32, f64)>;
const COOL: f64 = 0.0;
const HOT: f64 = NOW - 30.0;

/// Upstream's test flags: 2-minute CPU initialisation period, 10 s readiness delay.
fn calculator() -> ReplicaCalculator {
    ReplicaCalculator {
        tolerances: Tolerances::default(),
        cpu_initialization_period_s: 120.0,
        delay_of_initial_readiness_status_s: 10.0,
    }
}

struct Case {
    name: &'static str,
    current: i32,
    requests_milli: Vec<i64>,
    levels: Vec<i64>,
    pod_names: Vec<&'static str>,
    target: i32,
    readiness: Vec<bool>,
    start: Vec<f64>,
    phase: Vec<Phase>,
    deleting: Vec<bool>,
    expected: Result<(i32, i32, i64), &'static str>,
}

impl Default for Case {
    fn default() -> Self {
        Case {
            name: "",
            current: 0,
            requests_milli: vec![],
            levels: vec![],
            pod_names: vec![],
            target: 100,
            readiness: vec![],
            start: vec![],
            phase: vec![],
            deleting: vec![],
            expected: Err("unset"),
        }
    }
}

fn run(c: &Case) {
    let count = (c.current as usize).max(c.phase.len());
    let pods: Vec<PodState> = (0..count)
        .map(|i| PodState {
            name: format!("test-pod-{i}"),
            phase: c.phase.get(i).copied().unwrap_or(Phase::Running),
            deleting: c.deleting.get(i).copied().unwrap_or(false),
            start_time_s: Some(c.start.get(i).copied().unwrap_or(COOL)),
            ready: Some(ReadyCondition { ready: c.readiness.get(i).copied().unwrap_or(true), last_transition_s: 0.0 }),
            request_milli: c.requests_milli.get(i).copied(),
        })
        .collect();
    let samples: BTreeMap<String, MetricSample> = c
        .levels
        .iter()
        .enumerate()
        .map(|(i, &v)| {
            let name = c.pod_names.get(i).map(|s| s.to_string()).unwrap_or(format!("test-pod-{i}"));
            (name, MetricSample { value_milli: v, timestamp_s: 0.0, window_s: 60.0 })
        })
        .collect();
    let got = calculator().resource_replicas(NOW, c.current, c.target, ResourceName::Cpu, &pods, &samples);
    match (&c.expected, got) {
        (Ok((replicas, utilization, raw)), Ok(r)) => {
            assert_eq!((r.replicas, r.utilization, r.raw_average), (*replicas, *utilization, *raw), "{}", c.name)
        }
        (Err(want), Err(e)) => assert!(e.to_string().contains(want), "{}: {e}", c.name),
        (want, got) => panic!("{}: expected {want:?}, got {got:?}", c.name),
    }
}

fn ones(n: usize) -> Vec<i64> {
    vec![1000; n]
}

#[test]
fn replica_calculator_table() {
    use Phase::*;
    let cases = vec![
        Case {
            name: "ScaleUp",
            current: 3,
            requests_milli: ones(3),
            levels: vec![300, 500, 700],
            target: 30,
            expected: Ok((5, 50, 500)),
            ..Default::default()
        },
        Case {
            name: "ScaleUpUnreadyLessScale",
            current: 3,
            requests_milli: ones(3),
            levels: vec![300, 500, 700],
            target: 30,
            readiness: vec![false, true, true],
            expected: Ok((4, 60, 600)),
            ..Default::default()
        },
        Case {
            name: "ScaleUpHotCpuLessScale",
            current: 3,
            requests_milli: ones(3),
            levels: vec![300, 500, 700],
            target: 30,
            start: vec![HOT, COOL, COOL],
            expected: Ok((4, 60, 600)),
            ..Default::default()
        },
        Case {
            name: "ScaleUpUnreadyNoScale",
            current: 3,
            requests_milli: ones(3),
            levels: vec![400, 500, 700],
            target: 30,
            readiness: vec![true, false, false],
            expected: Ok((3, 40, 400)),
            ..Default::default()
        },
        Case {
            name: "ScaleHotCpuNoScale",
            current: 3,
            requests_milli: ones(3),
            levels: vec![400, 500, 700],
            target: 30,
            readiness: vec![true, false, false],
            start: vec![COOL, HOT, HOT],
            expected: Ok((3, 40, 400)),
            ..Default::default()
        },
        Case {
            name: "ScaleUpIgnoresFailedPods",
            current: 2,
            requests_milli: ones(4),
            levels: vec![500, 700],
            target: 30,
            readiness: vec![true, true, false, false],
            phase: vec![Running, Running, Failed, Failed],
            expected: Ok((4, 60, 600)),
            ..Default::default()
        },
        Case {
            name: "ScaleUpIgnoresDeletionPods",
            current: 2,
            requests_milli: ones(4),
            levels: vec![500, 700],
            target: 30,
            readiness: vec![true, true, false, false],
            phase: vec![Running; 4],
            deleting: vec![false, false, true, true],
            expected: Ok((4, 60, 600)),
            ..Default::default()
        },
        Case {
            name: "ScaleDown",
            current: 5,
            requests_milli: ones(5),
            levels: vec![100, 300, 500, 250, 250],
            target: 50,
            expected: Ok((3, 28, 280)),
            ..Default::default()
        },
        Case {
            name: "ScaleDownExcludeUnreadyPods",
            current: 5,
            requests_milli: ones(5),
            levels: vec![100, 300, 500, 250, 250],
            target: 50,
            readiness: vec![true, true, true, false, false],
            expected: Ok((2, 30, 300)),
            ..Default::default()
        },
        Case {
            name: "ScaleDownExcludeUnscheduledPods",
            current: 5,
            requests_milli: ones(5),
            levels: vec![100],
            target: 50,
            readiness: vec![true, false, false, false, false],
            phase: vec![Running, Pending, Pending, Pending, Pending],
            expected: Ok((1, 10, 100)),
            ..Default::default()
        },
        Case {
            name: "ScaleDownIgnoreHotCpuPods",
            current: 5,
            requests_milli: ones(5),
            levels: vec![100, 300, 500, 250, 250],
            target: 50,
            start: vec![COOL, COOL, COOL, HOT, HOT],
            expected: Ok((2, 30, 300)),
            ..Default::default()
        },
        Case {
            name: "ScaleDownIgnoresFailedPods",
            current: 5,
            requests_milli: ones(7),
            levels: vec![100, 300, 500, 250, 250],
            target: 50,
            readiness: vec![true, true, true, true, true, false, false],
            phase: vec![Running, Running, Running, Running, Running, Failed, Failed],
            expected: Ok((3, 28, 280)),
            ..Default::default()
        },
        Case {
            name: "ScaleDownIgnoresDeletionPods",
            current: 5,
            requests_milli: ones(7),
            levels: vec![100, 300, 500, 250, 250],
            target: 50,
            readiness: vec![true, true, true, true, true, false, false],
            phase: vec![Running; 7],
            deleting: vec![false, false, false, false, false, true, true],
            expected: Ok((3, 28, 280)),
            ..Default::default()
        },
        Case {
            name: "Tolerance",
            current: 3,
            requests_milli: vec![900, 1000, 1100],
            levels: vec![1010, 1030, 1020],
            target: 100,
            expected: Ok((3, 102, 1020)),
            ..Default::default()
        },
        Case {
            name: "SuperfluousMetrics",
            current: 4,
            requests_milli: ones(4),
            levels: vec![4000, 9500, 3000, 7000, 3200, 2000],
            target: 100,
            expected: Ok((24, 587, 5875)),
            ..Default::default()
        },
        Case {
            name: "MissingMetrics",
            current: 4,
            requests_milli: ones(4),
            levels: vec![400, 95],
            target: 100,
            expected: Ok((3, 24, 247)),
            ..Default::default()
        },
        Case {
            name: "EmptyMetrics",
            current: 4,
            requests_milli: ones(3),
            levels: vec![],
            target: 100,
            expected: Err("unable to get metrics for resource cpu: no metrics returned from resource metrics API"),
            ..Default::default()
        },
        Case {
            name: "EmptyCPURequest",
            current: 1,
            requests_milli: vec![],
            levels: vec![200],
            target: 100,
            expected: Err("missing request for"),
            ..Default::default()
        },
        Case {
            name: "DisjointResourcesMetrics",
            current: 1,
            requests_milli: ones(1),
            levels: vec![100],
            pod_names: vec!["an-older-pod-name"],
            target: 100,
            expected: Err("no metrics returned matched known pods"),
            ..Default::default()
        },
        Case {
            name: "MissingMetricsNoChangeEq",
            current: 2,
            requests_milli: ones(2),
            levels: vec![1000],
            target: 100,
            expected: Ok((2, 100, 1000)),
            ..Default::default()
        },
        Case {
            name: "MissingMetricsNoChangeGt",
            current: 2,
            requests_milli: ones(2),
            levels: vec![1900],
            target: 100,
            expected: Ok((2, 190, 1900)),
            ..Default::default()
        },
        Case {
            name: "MissingMetricsNoChangeLt",
            current: 2,
            requests_milli: ones(2),
            levels: vec![600],
            target: 100,
            expected: Ok((2, 60, 600)),
            ..Default::default()
        },
        Case {
            name: "MissingMetricsUnreadyChange",
            current: 3,
            requests_milli: ones(3),
            levels: vec![100, 450],
            target: 50,
            readiness: vec![false, true, true],
            expected: Ok((3, 45, 450)),
            ..Default::default()
        },
        Case {
            name: "MissingMetricsHotCpuNoChange",
            current: 3,
            requests_milli: ones(3),
            levels: vec![100, 450],
            target: 50,
            start: vec![HOT, COOL, COOL],
            expected: Ok((3, 45, 450)),
            ..Default::default()
        },
        Case {
            name: "MissingMetricsUnreadyScaleUp",
            current: 3,
            requests_milli: ones(3),
            levels: vec![100, 2000],
            target: 50,
            readiness: vec![false, true, true],
            expected: Ok((4, 200, 2000)),
            ..Default::default()
        },
        Case {
            name: "MissingMetricsHotCpuScaleUp",
            current: 3,
            requests_milli: ones(3),
            levels: vec![100, 2000],
            target: 50,
            readiness: vec![false, true, true],
            start: vec![HOT, COOL, COOL],
            expected: Ok((4, 200, 2000)),
            ..Default::default()
        },
        Case {
            name: "MissingMetricsUnreadyScaleDown",
            current: 4,
            requests_milli: ones(4),
            levels: vec![100, 100, 100],
            target: 50,
            readiness: vec![false, true, true, true],
            expected: Ok((3, 10, 100)),
            ..Default::default()
        },
        Case {
            name: "DuringRollingUpdateWithMaxSurge",
            current: 2,
            requests_milli: ones(3),
            levels: vec![100, 100],
            target: 50,
            phase: vec![Running; 3],
            expected: Ok((2, 10, 100)),
            ..Default::default()
        },
    ];
    assert!(cases.len() >= 28);
    for c in &cases {
        run(c);
    }
}

/// `TestReplicaCalcComputedToleranceAlgImplementation`: a target just outside the tolerance
/// scales 10 → 9; just inside it does not scale.
#[test]
fn computed_tolerance_regression() {
    let per_pod_requested = 300;
    let requests = [100, -100, 10, -10, 2, -2, 1, -1, 0, 0].map(|d| per_pod_requested + d).to_vec();
    let mk = |target| Case {
        name: "ComputedTolerance",
        current: 10,
        requests_milli: requests.clone(),
        levels: vec![150; 10],
        target,
        ..Default::default()
    };
    // target = 1 / (2 × (1 − 0.1)) + 0.01 → 56 %; resources used / requested at it → 9 pods.
    run(&Case { expected: Ok((9, 50, 150)), ..mk(56) });
    // + 0.004 instead → 55 %, inside the tolerance.
    run(&Case { expected: Ok((10, 50, 150)), ..mk(55) });
}

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
            request_milli: Some(1000),
        });
        view.samples.insert(name, MetricSample { value_milli: usage_m, timestamp_s: 0.0, window_s: 15.0 });
    }
    view
}

fn cpu_hpa(behavior: Option<BehaviorSpec>) -> HorizontalPodAutoscaler {
    HorizontalPodAutoscaler::new(
        HpaSpec {
            min_replicas: 1,
            max_replicas: 20,
            metrics: vec![ResourceTarget { resource: ResourceName::Cpu, target_utilization: 50 }],
            behavior,
        },
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
                ResourceTarget { resource: ResourceName::Cpu, target_utilization: 50 },
                ResourceTarget { resource: ResourceName::Memory, target_utilization: 50 },
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
                ResourceTarget { resource: ResourceName::Cpu, target_utilization: 50 },
                ResourceTarget { resource: ResourceName::Memory, target_utilization: 50 },
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
