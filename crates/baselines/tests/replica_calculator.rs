//! Upstream `pkg/controller/podautoscaler/replica_calculator_test.go` (kubernetes/kubernetes,
//! the 1.34-era file with `TestReplicaCalcConfigurableTolerance`), one Rust test per upstream
//! case, each preceded by the name of the Go test it ports. Table-driven Go tests
//! (`TestReplicaCalcResourceScale`, `TestReplicaCalcConfigurableTolerance`, `TestGroupPods`,
//! `TestCalculateRequests`) give one Rust test per row, with the row's name beside the Go name.
//!
//! The fixture is upstream's: pods `test-pod-N` with two containers `container1`/`container2`,
//! each requesting the pod's listed request; metric samples per container; a 2-minute CPU
//! initialisation period and 10 s readiness delay; metric samples at the zero time with a
//! one-minute window; "cool" pods started 3 minutes ago and "hot" ones now.

use std::collections::BTreeMap;

use aware_baselines::replica_calculator::{
    calculate_requests, group_pods, pod_request_from_containers, resource_metric_info,
};
use aware_baselines::{
    ContainerKind, ContainerRequest, HpaError, MetricSample, Phase, PodMetrics, PodState, ReadyCondition,
    ReplicaCalculator, ResourceName, Tolerances,
};

/// Upstream's `time.Time{}`: what unset start times, transitions and metric timestamps are.
const ZERO: f64 = 0.0;
const NOW: f64 = 1_000_000.0;
/// `coolCPUCreationTime()`: three minutes ago, past the initialisation period.
const COOL: f64 = NOW - 180.0;
/// `hotCPUCreationTime()`: now, inside it.
const HOT: f64 = NOW;
/// `defaultTestingTolerance`.
const TOL: f64 = 0.1;
const CONTAINERS_PER_POD: i64 = 2;

fn calculator(tolerances: Tolerances) -> ReplicaCalculator {
    ReplicaCalculator {
        tolerances,
        cpu_initialization_period_s: 120.0,
        delay_of_initial_readiness_status_s: 10.0,
        pod_level_resources: true,
    }
}

/// One upstream `replicaCalcTestCase` / `calcScenario`.
#[derive(Default, Clone)]
struct Tc {
    current: i32,
    /// Per pod, the request of each of its two containers (milli-units).
    requests: Vec<i64>,
    /// Resource samples, per pod, per container.
    levels: Vec<Vec<i64>>,
    pod_names: Vec<&'static str>,
    container: Option<&'static str>,
    readiness: Vec<bool>,
    start: Vec<f64>,
    phase: Vec<Phase>,
    deleting: Vec<bool>,
    tolerances: Option<Tolerances>,
    /// Custom (Pods / Object / External) metric values.
    metric: Vec<i64>,
}

/// `makePodMetricLevels`: both containers of pod i report `v[i]`.
fn levels(v: &[i64]) -> Vec<Vec<i64>> {
    v.iter().map(|&x| vec![x; CONTAINERS_PER_POD as usize]).collect()
}

fn cores(n: usize, milli: i64) -> Vec<i64> {
    vec![milli; n]
}

impl Tc {
    fn pods(&self) -> Vec<PodState> {
        let count = (self.current as usize).max(self.phase.len());
        (0..count)
            .map(|i| {
                let request = self.requests.get(i).copied();
                PodState {
                    name: format!("test-pod-{i}"),
                    phase: self.phase.get(i).copied().unwrap_or(Phase::Running),
                    deleting: self.deleting.get(i).copied().unwrap_or(false),
                    start_time_s: Some(self.start.get(i).copied().unwrap_or(ZERO)),
                    ready: Some(ReadyCondition {
                        ready: self.readiness.get(i).copied().unwrap_or(true),
                        last_transition_s: ZERO,
                    }),
                    containers: ["container1", "container2"]
                        .map(|n| ContainerRequest {
                            name: n.into(),
                            kind: ContainerKind::Regular,
                            request_milli: request,
                        })
                        .to_vec(),
                    pod_request_milli: None,
                }
            })
            .collect()
    }

    fn resource_samples(&self) -> BTreeMap<String, MetricSample> {
        let raw: BTreeMap<String, PodMetrics> = self
            .levels
            .iter()
            .enumerate()
            .map(|(i, l)| {
                let name = self.pod_names.get(i).map(|s| s.to_string()).unwrap_or(format!("test-pod-{i}"));
                // `make([]ContainerMetrics, 2)`: entries not filled stay nameless and empty.
                let containers = (0..CONTAINERS_PER_POD as usize)
                    .map(|j| match l.get(j) {
                        Some(&v) => (format!("container{}", j + 1), Some(v)),
                        None => (String::new(), None),
                    })
                    .collect();
                (name, PodMetrics { timestamp_s: ZERO, window_s: 60.0, containers })
            })
            .collect();
        resource_metric_info(&raw, self.container)
    }

    fn metric_samples(&self) -> BTreeMap<String, MetricSample> {
        self.metric
            .iter()
            .enumerate()
            .map(|(i, &v)| {
                (format!("test-pod-{i}"), MetricSample { value_milli: v, timestamp_s: ZERO, window_s: 60.0 })
            })
            .collect()
    }

    fn calc(&self) -> ReplicaCalculator {
        calculator(self.tolerances.unwrap_or(Tolerances { scale_down: TOL, scale_up: TOL }))
    }

    /// `GetResourceReplicas` for CPU: (replicas, utilisation, raw value) or an error substring.
    fn resource(&self, target: i32, want: Result<(i32, i32, i64), &str>) {
        let got = self.calc().resource_replicas(
            NOW,
            self.current,
            target,
            ResourceName::Cpu,
            self.container,
            &self.pods(),
            &self.resource_samples(),
        );
        match (want, got) {
            (Ok(w), Ok(r)) => assert_eq!((r.replicas, r.utilisation, r.raw_average), w),
            (Err(w), Err(e)) => assert!(e.to_string().contains(w), "{e}"),
            (w, g) => panic!("expected {w:?}, got {g:?}"),
        }
    }

    /// `GetMetricReplicas` (a `Pods` metric): (replicas, usage).
    fn pods_metric(&self, target: i64, want: (i32, i64)) {
        let r = self
            .calc()
            .metric_replicas(NOW, self.current, target, "qps", &self.pods(), &self.metric_samples())
            .unwrap();
        assert_eq!((r.replicas, r.usage), want);
    }

    /// `GetObjectMetricReplicas`.
    fn object(&self, target: i64, want: (i32, i64)) {
        let r = self.calc().object_metric_replicas(self.current, target, self.metric[0], &self.pods()).unwrap();
        assert_eq!((r.replicas, r.usage), want);
    }

    /// `GetObjectPerPodMetricReplicas`.
    fn object_per_pod(&self, target: i64, want: (i32, i64)) {
        let r = self.calc().object_per_pod_metric_replicas(self.current, target, self.metric[0]);
        assert_eq!((r.replicas, r.usage), want);
    }

    /// `GetExternalMetricReplicas`.
    fn external(&self, target: i64, want: (i32, i64)) {
        let r = self.calc().external_metric_replicas(self.current, target, &self.metric, &self.pods()).unwrap();
        assert_eq!((r.replicas, r.usage), want);
    }

    /// `GetExternalPerPodMetricReplicas`.
    fn external_per_pod(&self, target: i64, want: (i32, i64)) {
        let r = self.calc().external_per_pod_metric_replicas(self.current, target, &self.metric);
        assert_eq!((r.replicas, r.usage), want);
    }
}

const N: i64 = CONTAINERS_PER_POD;
use Phase::{Failed, Pending, Running};

// upstream: TestReplicaCalcResourceScale
// case: "scale up"
#[test]
fn resource_scale_up() {
    Tc { current: 3, requests: cores(3, 1000), levels: levels(&[300, 500, 700]), ..Default::default() }
        .resource(30, Ok((5, 50, N * 500)));
}

// upstream: TestReplicaCalcResourceScale
// case: "scale up: container metric"
#[test]
fn resource_scale_up_container_metric() {
    Tc {
        current: 3,
        container: Some("container2"),
        requests: cores(3, 1000),
        levels: vec![vec![1000, 300], vec![1000, 500], vec![1000, 700]],
        ..Default::default()
    }
    .resource(30, Ok((5, 50, 500)));
}

// upstream: TestReplicaCalcResourceScale
// case: "scale up: unready pod scales less"
#[test]
fn resource_scale_up_unready_pod_scales_less() {
    Tc {
        current: 3,
        readiness: vec![false, true, true],
        requests: cores(3, 1000),
        levels: levels(&[300, 500, 700]),
        ..Default::default()
    }
    .resource(30, Ok((4, 60, N * 600)));
}

// upstream: TestReplicaCalcResourceScale
// case: "scale up: hot-CPU container scales less"
#[test]
fn resource_scale_up_hot_cpu_container_scales_less() {
    Tc {
        current: 3,
        start: vec![HOT, COOL, COOL],
        container: Some("container2"),
        requests: cores(3, 1000),
        levels: vec![vec![0, 300], vec![0, 500], vec![0, 700]],
        ..Default::default()
    }
    .resource(30, Ok((4, 60, 600)));
}

// upstream: TestReplicaCalcResourceScale
// case: "scale up: hot-CPU pod scales less"
#[test]
fn resource_scale_up_hot_cpu_pod_scales_less() {
    Tc {
        current: 3,
        start: vec![HOT, COOL, COOL],
        requests: cores(3, 1000),
        levels: levels(&[300, 500, 700]),
        ..Default::default()
    }
    .resource(30, Ok((4, 60, N * 600)));
}

// upstream: TestReplicaCalcResourceScale
// case: "no scale: unready pods ignored"
#[test]
fn resource_no_scale_unready_pods_ignored() {
    Tc {
        current: 3,
        readiness: vec![true, false, false],
        requests: cores(3, 1000),
        levels: levels(&[400, 500, 700]),
        ..Default::default()
    }
    .resource(30, Ok((3, 40, N * 400)));
}

// upstream: TestReplicaCalcResourceScale
// case: "no scale: hot-CPU pods ignored"
#[test]
fn resource_no_scale_hot_cpu_pods_ignored() {
    Tc {
        current: 3,
        readiness: vec![true, false, false],
        start: vec![COOL, HOT, HOT],
        requests: cores(3, 1000),
        levels: levels(&[400, 500, 700]),
        ..Default::default()
    }
    .resource(30, Ok((3, 40, N * 400)));
}

fn failed_pods_up() -> Tc {
    Tc {
        current: 2,
        readiness: vec![true, true, false, false],
        phase: vec![Running, Running, Failed, Failed],
        requests: cores(4, 1000),
        levels: levels(&[500, 700]),
        ..Default::default()
    }
}

// upstream: TestReplicaCalcResourceScale
// case: "scale up: failed pods ignored"
#[test]
fn resource_scale_up_failed_pods_ignored() {
    failed_pods_up().resource(30, Ok((4, 60, N * 600)));
}

// upstream: TestReplicaCalcResourceScale
// case: "scale up: failed pods ignored with missing container metric"
#[test]
fn resource_scale_up_failed_pods_ignored_with_missing_container_metric() {
    Tc {
        container: Some("container2"),
        levels: vec![vec![1000, 500], vec![9000, 700], vec![1000], vec![9000]],
        ..failed_pods_up()
    }
    .resource(30, Ok((4, 60, 600)));
}

// upstream: TestReplicaCalcResourceScale
// case: "scale up: container metrics with failed pods ignored"
#[test]
fn resource_scale_up_container_metrics_with_failed_pods_ignored() {
    Tc { container: Some("container2"), levels: vec![vec![1000, 500], vec![9000, 700]], ..failed_pods_up() }
        .resource(30, Ok((4, 60, 600)));
}

fn deleting_pods_up() -> Tc {
    Tc {
        current: 2,
        readiness: vec![true, true, false, false],
        phase: vec![Running; 4],
        deleting: vec![false, false, true, true],
        requests: cores(4, 1000),
        levels: levels(&[500, 700]),
        ..Default::default()
    }
}

// upstream: TestReplicaCalcResourceScale
// case: "scale up: pods being deleted are ignored"
#[test]
fn resource_scale_up_pods_being_deleted_are_ignored() {
    deleting_pods_up().resource(30, Ok((4, 60, N * 600)));
}

// upstream: TestReplicaCalcResourceScale
// case: "scale up: container metrics with pods being deleted ignored"
#[test]
fn resource_scale_up_container_metrics_with_pods_being_deleted_ignored() {
    Tc { container: Some("container1"), ..deleting_pods_up() }.resource(30, Ok((4, 60, 600)));
}

fn five_pods() -> Tc {
    Tc { current: 5, requests: cores(5, 1000), levels: levels(&[100, 300, 500, 250, 250]), ..Default::default() }
}

fn container2_levels(v: &[i64]) -> Vec<Vec<i64>> {
    v.iter().map(|&x| vec![1000, x]).collect()
}

// upstream: TestReplicaCalcResourceScale
// case: "scale down"
#[test]
fn resource_scale_down() {
    five_pods().resource(50, Ok((3, 28, N * 280)));
}

// upstream: TestReplicaCalcResourceScale
// case: "scale down: container metric"
#[test]
fn resource_scale_down_container_metric() {
    Tc { container: Some("container2"), levels: container2_levels(&[100, 300, 500, 250, 250]), ..five_pods() }
        .resource(50, Ok((3, 28, 280)));
}

// upstream: TestReplicaCalcResourceScale
// case: "scale down: exclude unready pods"
#[test]
fn resource_scale_down_exclude_unready_pods() {
    Tc { readiness: vec![true, true, true, false, false], ..five_pods() }.resource(50, Ok((2, 30, N * 300)));
}

// upstream: TestReplicaCalcResourceScale
// case: "scale down: container metric excludes unready pods"
#[test]
fn resource_scale_down_container_metric_excludes_unready_pods() {
    Tc {
        readiness: vec![true, true, true, false, false],
        container: Some("container2"),
        levels: container2_levels(&[100, 300, 500, 250, 250]),
        ..five_pods()
    }
    .resource(50, Ok((2, 30, 300)));
}

fn unscheduled() -> Tc {
    Tc {
        readiness: vec![true, false, false, false, false],
        phase: vec![Running, Pending, Pending, Pending, Pending],
        levels: levels(&[100]),
        ..five_pods()
    }
}

// upstream: TestReplicaCalcResourceScale
// case: "scale down: exclude unscheduled pods"
#[test]
fn resource_scale_down_exclude_unscheduled_pods() {
    unscheduled().resource(50, Ok((1, 10, N * 100)));
}

// upstream: TestReplicaCalcResourceScale
// case: "scale down: container metric excludes unscheduled pods"
#[test]
fn resource_scale_down_container_metric_excludes_unscheduled_pods() {
    Tc { container: Some("container2"), levels: container2_levels(&[100, 300, 500, 250, 250]), ..unscheduled() }
        .resource(50, Ok((1, 10, 100)));
}

// upstream: TestReplicaCalcResourceScale
// case: "scale down: ignore hot-CPU pods"
#[test]
fn resource_scale_down_ignore_hot_cpu_pods() {
    Tc { start: vec![COOL, COOL, COOL, HOT, HOT], ..five_pods() }.resource(50, Ok((2, 30, N * 300)));
}

// upstream: TestReplicaCalcResourceScale
// case: "scale down: container metric ignores hot-CPU pods"
#[test]
fn resource_scale_down_container_metric_ignores_hot_cpu_pods() {
    Tc {
        start: vec![COOL, COOL, COOL, HOT, HOT],
        container: Some("container2"),
        levels: container2_levels(&[100, 300, 500, 1000, 1000]),
        ..five_pods()
    }
    .resource(50, Ok((2, 30, 300)));
}

fn seven_pods() -> Tc {
    Tc {
        current: 5,
        readiness: vec![true, true, true, true, true, false, false],
        requests: cores(7, 1000),
        levels: levels(&[100, 300, 500, 250, 250]),
        ..Default::default()
    }
}

// upstream: TestReplicaCalcResourceScale
// case: "scale down: failed pods ignored"
#[test]
fn resource_scale_down_failed_pods_ignored() {
    Tc { phase: vec![Running, Running, Running, Running, Running, Failed, Failed], ..seven_pods() }
        .resource(50, Ok((3, 28, N * 280)));
}

// upstream: TestReplicaCalcResourceScale
// case: "scale down: container metric with failed pods ignored"
#[test]
fn resource_scale_down_container_metric_with_failed_pods_ignored() {
    Tc {
        phase: vec![Running, Running, Running, Running, Running, Failed, Failed],
        container: Some("container2"),
        levels: container2_levels(&[100, 300, 500, 250, 250]),
        ..seven_pods()
    }
    .resource(50, Ok((3, 28, 280)));
}

// upstream: TestReplicaCalcResourceScale
// case: "scale down: pods being deleted are ignored"
#[test]
fn resource_scale_down_pods_being_deleted_are_ignored() {
    Tc { phase: vec![Running; 7], deleting: vec![false, false, false, false, false, true, true], ..seven_pods() }
        .resource(50, Ok((3, 28, N * 280)));
}

// upstream: TestReplicaCalcResourceScale
// case: "scale down: still-running pods being deleted are ignored" (kubernetes#83561)
#[test]
fn resource_scale_down_still_running_pods_being_deleted_are_ignored() {
    Tc {
        phase: vec![Running; 7],
        deleting: vec![false, false, false, false, false, true, true],
        container: Some("container2"),
        levels: container2_levels(&[100, 300, 500, 250, 250]),
        ..seven_pods()
    }
    .resource(50, Ok((3, 28, 280)));
}

// upstream: TestReplicaCalcDisjointResourcesMetrics
#[test]
fn disjoint_resources_metrics() {
    Tc {
        current: 1,
        requests: vec![1000],
        levels: levels(&[100]),
        pod_names: vec!["an-older-pod-name"],
        ..Default::default()
    }
    .resource(100, Err("no metrics returned matched known pods"));
}

// upstream: TestReplicaCalcScaleUpOverflow
#[test]
fn scale_up_overflow() {
    Tc { current: 3, metric: vec![i64::MAX], ..Default::default() }.object(1, (i32::MAX, i64::MAX));
}

// upstream: TestExternalPerPodMetricReplicaOverflow
#[test]
fn external_per_pod_metric_replica_overflow() {
    Tc { current: 1, metric: vec![i64::MAX], ..Default::default() }.external_per_pod(1, (i32::MAX, i64::MAX));
}

// upstream: TestExternalPerPodMetricUsageOverflow
#[test]
fn external_per_pod_metric_usage_overflow() {
    Tc { current: 1, metric: vec![i64::MAX], ..Default::default() }.external_per_pod(i64::MAX, (1, i64::MAX));
}

// upstream: TestReplicaCalcScaleUpCM
#[test]
fn scale_up_cm() {
    Tc { current: 3, metric: vec![20000, 10000, 30000], ..Default::default() }.pods_metric(15000, (4, 20000));
}

// upstream: TestReplicaCalcScaleUpCMUnreadyHotCpuNoLessScale
#[test]
fn scale_up_cm_unready_hot_cpu_no_less_scale() {
    Tc {
        current: 3,
        readiness: vec![true, true, false],
        start: vec![COOL, COOL, HOT],
        metric: vec![50000, 10000, 30000],
        ..Default::default()
    }
    .pods_metric(15000, (6, 30000));
}

// upstream: TestReplicaCalcScaleUpCMUnreadyHotCpuScaleWouldScaleDown
#[test]
fn scale_up_cm_unready_hot_cpu_scale_would_scale_down() {
    Tc {
        current: 3,
        readiness: vec![false, true, false],
        start: vec![HOT, COOL, HOT],
        metric: vec![50000, 15000, 30000],
        ..Default::default()
    }
    .pods_metric(15000, (7, 31666));
}

// upstream: TestReplicaCalcScaleUpCMObject
#[test]
fn scale_up_cm_object() {
    Tc { current: 3, metric: vec![20000], ..Default::default() }.object(15000, (4, 20000));
}

// upstream: TestReplicaCalcScaleUpCMPerPodObject
#[test]
fn scale_up_cm_per_pod_object() {
    Tc { current: 3, metric: vec![20000], ..Default::default() }.object_per_pod(5000, (4, 6667));
}

// upstream: TestReplicaCalcScaleUpCMObjectIgnoresUnreadyPods
#[test]
fn scale_up_cm_object_ignores_unready_pods() {
    // 15 replicas if the unready pods counted.
    Tc { current: 3, readiness: vec![false, true, false], metric: vec![50000], ..Default::default() }
        .object(10000, (5, 50000));
}

// upstream: TestReplicaCalcScaleUpCMExternalIgnoresUnreadyPods
#[test]
fn scale_up_cm_external_ignores_unready_pods() {
    // 6 if the unready pods counted.
    Tc { current: 3, readiness: vec![false, true, false], metric: vec![8600], ..Default::default() }
        .external(4400, (2, 8600));
}

// upstream: TestReplicaCalcScaleUpPerPodCMExternal
#[test]
fn scale_up_per_pod_cm_external() {
    Tc { current: 3, metric: vec![8600], ..Default::default() }.external_per_pod(2150, (4, 2867));
}

// upstream: TestReplicaCalcScaleDownCM
#[test]
fn scale_down_cm() {
    Tc { current: 5, metric: vec![12000; 5], ..Default::default() }.pods_metric(20000, (3, 12000));
}

// upstream: TestReplicaCalcScaleDownPerPodCMObject
#[test]
fn scale_down_per_pod_cm_object() {
    Tc { current: 5, metric: vec![6000], ..Default::default() }.object_per_pod(2000, (3, 1200));
}

// upstream: TestReplicaCalcScaleDownCMObject
#[test]
fn scale_down_cm_object() {
    Tc { current: 5, metric: vec![12000], ..Default::default() }.object(20000, (3, 12000));
}

// upstream: TestReplicaCalcScaleDownCMExternal
#[test]
fn scale_down_cm_external() {
    Tc { current: 5, metric: vec![8600], ..Default::default() }.external(14334, (3, 8600));
}

// upstream: TestReplicaCalcScaleDownPerPodCMExternal
#[test]
fn scale_down_per_pod_cm_external() {
    Tc { current: 5, metric: vec![8600], ..Default::default() }.external_per_pod(2867, (3, 1720));
}

fn uneven_requests(l: &[i64]) -> Tc {
    Tc { current: 3, requests: vec![900, 1000, 1100], levels: levels(l), ..Default::default() }
}

// upstream: TestReplicaCalcTolerance
#[test]
fn tolerance() {
    uneven_requests(&[1010, 1030, 1020]).resource(100, Ok((3, 102, N * 1020)));
}

// upstream: TestReplicaCalcToleranceCM
#[test]
fn tolerance_cm() {
    Tc { current: 3, metric: vec![20000, 21000, 21000], ..Default::default() }.pods_metric(20000, (3, 20666));
}

// upstream: TestReplicaCalcToleranceCMObject
#[test]
fn tolerance_cm_object() {
    Tc { current: 3, metric: vec![20666], ..Default::default() }.object(20000, (3, 20666));
}

// upstream: TestReplicaCalcTolerancePerPodCMObject
#[test]
fn tolerance_per_pod_cm_object() {
    Tc { current: 4, metric: vec![20166], ..Default::default() }.object_per_pod(5000, (4, 5042));
}

// upstream: TestReplicaCalcToleranceCMExternal
#[test]
fn tolerance_cm_external() {
    Tc { current: 3, metric: vec![8600], ..Default::default() }.external(8888, (3, 8600));
}

// upstream: TestReplicaCalcTolerancePerPodCMExternal
#[test]
fn tolerance_per_pod_cm_external() {
    Tc { current: 3, metric: vec![8600], ..Default::default() }.external_per_pod(2900, (3, 2867));
}

fn tol(scale_down: f64, scale_up: f64) -> Option<Tolerances> {
    Some(Tolerances { scale_down, scale_up })
}

// upstream: TestReplicaCalcConfigurableTolerance
// case: "Outside of a 0% tolerance"
#[test]
fn configurable_tolerance_outside_zero() {
    Tc { tolerances: tol(0.0, 0.0), ..uneven_requests(&[909, 1010, 1111]) }.resource(100, Ok((4, 101, N * 1010)));
}

// upstream: TestReplicaCalcConfigurableTolerance
// case: "Within a 200% scale-up tolerance"
#[test]
fn configurable_tolerance_within_200_percent_up() {
    Tc { tolerances: tol(TOL, 2.0), ..uneven_requests(&[1890, 1910, 1900]) }.resource(100, Ok((3, 190, N * 1900)));
}

// upstream: TestReplicaCalcConfigurableTolerance
// case: "Outside 8% scale-up tolerance (and superfuous scale-down tolerance)"
#[test]
fn configurable_tolerance_outside_8_percent_up() {
    Tc { tolerances: tol(2.0, 0.08), ..uneven_requests(&[1100, 1080, 1090]) }.resource(100, Ok((4, 109, N * 1090)));
}

// upstream: TestReplicaCalcConfigurableTolerance
// case: "Within a 36% scale-down tolerance"
#[test]
fn configurable_tolerance_within_36_percent_down() {
    Tc { tolerances: tol(0.36, TOL), ..uneven_requests(&[660, 640, 650]) }.resource(100, Ok((3, 65, N * 650)));
}

// upstream: TestReplicaCalcConfigurableTolerance
// case: "Outside a 34% scale-down tolerance"
#[test]
fn configurable_tolerance_outside_34_percent_down() {
    Tc { tolerances: tol(0.34, TOL), ..uneven_requests(&[660, 640, 650]) }.resource(100, Ok((2, 65, N * 650)));
}

// upstream: TestReplicaCalcConfigurableToleranceCM
#[test]
fn configurable_tolerance_cm() {
    Tc { tolerances: tol(TOL, 0.01), current: 3, metric: vec![20000, 21000, 21000], ..Default::default() }
        .pods_metric(20000, (4, 20666));
}

// upstream: TestReplicaCalcConfigurableToleranceCMObject
#[test]
fn configurable_tolerance_cm_object() {
    Tc { tolerances: tol(TOL, 0.01), current: 3, metric: vec![20666], ..Default::default() }.object(20000, (4, 20666));
}

// upstream: TestReplicaCalcConfigurableTolerancePerPodCMObject
#[test]
fn configurable_tolerance_per_pod_cm_object() {
    Tc { tolerances: tol(TOL, 0.01), current: 4, metric: vec![20208], ..Default::default() }
        .object_per_pod(5000, (5, 5052));
}

// upstream: TestReplicaCalcConfigurableToleranceCMExternal
#[test]
fn configurable_tolerance_cm_external() {
    Tc { tolerances: tol(TOL, 0.01), current: 3, metric: vec![8900], ..Default::default() }.external(8800, (4, 8900));
}

// upstream: TestReplicaCalcConfigurableTolerancePerPodCMExternal
#[test]
fn configurable_tolerance_per_pod_cm_external() {
    Tc { tolerances: tol(TOL, 0.01), current: 3, metric: vec![8600], ..Default::default() }
        .external_per_pod(2800, (4, 2867));
}

// upstream: TestReplicaCalcSuperfluousMetrics
#[test]
fn superfluous_metrics() {
    Tc {
        current: 4,
        requests: cores(4, 1000),
        levels: levels(&[4000, 9500, 3000, 7000, 3200, 2000]),
        ..Default::default()
    }
    .resource(100, Ok((24, 587, N * 5875)));
}

// upstream: TestReplicaCalcMissingMetrics
#[test]
fn missing_metrics() {
    // 495: numContainersPerPod × 247, "for sufficiently large values of 247".
    Tc { current: 4, requests: cores(4, 1000), levels: levels(&[400, 95]), ..Default::default() }
        .resource(100, Ok((3, 24, 495)));
}

// upstream: TestReplicaCalcEmptyMetrics
#[test]
fn empty_metrics() {
    Tc { current: 4, requests: cores(3, 1000), levels: levels(&[]), ..Default::default() }
        .resource(100, Err("unable to get metrics for resource cpu: no metrics returned from resource metrics API"));
}

// upstream: TestReplicaCalcEmptyCPURequest
#[test]
fn empty_cpu_request() {
    Tc { current: 1, requests: vec![], levels: levels(&[200]), ..Default::default() }
        .resource(100, Err("missing request for"));
}

// upstream: TestPlainMetricReplicaCalcMissingMetricsNoChangeEq
#[test]
fn plain_metric_missing_metrics_no_change_eq() {
    Tc { current: 5, metric: vec![20000, 19000, 21000], ..Default::default() }.pods_metric(20000, (5, 20000));
}

fn two_pods(level: i64) -> Tc {
    Tc { current: 2, requests: cores(2, 1000), levels: levels(&[level]), ..Default::default() }
}

// upstream: TestReplicaCalcMissingMetricsNoChangeEq
#[test]
fn missing_metrics_no_change_eq() {
    two_pods(1000).resource(100, Ok((2, 100, N * 1000)));
}

// upstream: TestReplicaCalcMissingMetricsNoChangeGt
#[test]
fn missing_metrics_no_change_gt() {
    two_pods(1900).resource(100, Ok((2, 190, N * 1900)));
}

// upstream: TestReplicaCalcMissingMetricsNoChangeLt
#[test]
fn missing_metrics_no_change_lt() {
    two_pods(600).resource(100, Ok((2, 60, N * 600)));
}

fn three_pods(l: &[i64]) -> Tc {
    Tc { current: 3, requests: cores(3, 1000), levels: levels(l), ..Default::default() }
}

// upstream: TestReplicaCalcMissingMetricsUnreadyChange
#[test]
fn missing_metrics_unready_change() {
    Tc { readiness: vec![false, true, true], ..three_pods(&[100, 450]) }.resource(50, Ok((3, 45, N * 450)));
}

// upstream: TestReplicaCalcMissingMetricsHotCpuNoChange
#[test]
fn missing_metrics_hot_cpu_no_change() {
    Tc { start: vec![HOT, COOL, COOL], ..three_pods(&[100, 450]) }.resource(50, Ok((3, 45, N * 450)));
}

// upstream: TestReplicaCalcMissingMetricsUnreadyScaleUp
#[test]
fn missing_metrics_unready_scale_up() {
    Tc { readiness: vec![false, true, true], ..three_pods(&[100, 2000]) }.resource(50, Ok((4, 200, N * 2000)));
}

// upstream: TestReplicaCalcMissingMetricsHotCpuScaleUp
#[test]
fn missing_metrics_hot_cpu_scale_up() {
    Tc { readiness: vec![false, true, true], start: vec![HOT, COOL, COOL], ..three_pods(&[100, 2000]) }
        .resource(50, Ok((4, 200, N * 2000)));
}

// upstream: TestReplicaCalcMissingMetricsUnreadyScaleDown
#[test]
fn missing_metrics_unready_scale_down() {
    Tc {
        current: 4,
        readiness: vec![false, true, true, true],
        requests: cores(4, 1000),
        levels: levels(&[100, 100, 100]),
        ..Default::default()
    }
    .resource(50, Ok((3, 10, N * 100)));
}

// upstream: TestReplicaCalcMissingMetricsScaleDownTargetOver100
#[test]
fn missing_metrics_scale_down_target_over_100() {
    Tc {
        current: 4,
        readiness: vec![false, true, true, true],
        requests: vec![1000, 1000, 2000, 2000],
        levels: levels(&[200, 100, 100]),
        ..Default::default()
    }
    .resource(300, Ok((2, 6, N * 100)));
}

// upstream: TestReplicaCalcDuringRollingUpdateWithMaxSurge
#[test]
fn during_rolling_update_with_max_surge() {
    Tc {
        current: 2,
        phase: vec![Running; 3],
        requests: cores(3, 1000),
        levels: levels(&[100, 100]),
        ..Default::default()
    }
    .resource(50, Ok((2, 10, N * 100)));
}

// upstream: TestReplicaCalcDuringRollingUpdateWithMaxSurgeCM
#[test]
fn during_rolling_update_with_max_surge_cm() {
    Tc { current: 2, phase: vec![Running; 3], metric: vec![10000, 10000], ..Default::default() }
        .pods_metric(17000, (2, 10000));
}

/// Upstream's derivation: 10 pods using 150 m each and requesting twice that (with jitter);
/// a target just outside the tolerance scales 10 → 9, one just inside it does not.
fn computed_tolerance_case(delta: f64) -> (Tc, i32, i32) {
    let start_pods = 10i32;
    let used_total = (start_pods * 150) as i64;
    let requested_total = (2 * used_total) as i32;
    let requested_to_used = (requested_total / used_total as i32) as f64;
    let per_pod = (requested_total / start_pods) as i64;
    let target = (1.0 / (requested_to_used * (1.0 - TOL))).abs() + delta;
    let percent = (target * 100.0) as i32;
    let used_ratio = used_total as f64 / (requested_total as f64 * target);
    let final_pods = (used_ratio * start_pods as f64).ceil() as i32;
    let tc = Tc {
        current: start_pods,
        levels: levels(&[used_total / 10; 10]),
        requests: [100, -100, 10, -10, 2, -2, 1, -1, 0, 0].map(|d| per_pod + d).to_vec(),
        ..Default::default()
    };
    (tc, percent, final_pods)
}

// upstream: TestReplicaCalcComputedToleranceAlgImplementation
#[test]
fn computed_tolerance_alg_implementation() {
    let expected_utilisation: i32 = 1500 * 100 / 3000;
    let (tc, percent, final_pods) = computed_tolerance_case(0.01);
    assert_eq!(final_pods, 9, "upstream's derivation");
    tc.resource(percent, Ok((final_pods, expected_utilisation, N * 150)));
    // "Now, we test that no scaling happens if we are in a very close margin to the tolerance."
    let (tc, percent, _) = computed_tolerance_case(0.004);
    tc.resource(percent, Ok((10, expected_utilisation, N * 150)));
}

/// One pod of a `TestGroupPods` row: name, phase, start, Ready condition (ready, transition),
/// deleting.
type GroupPod = (&'static str, Phase, Option<f64>, Option<(bool, f64)>, bool);

/// One `TestGroupPods` row: pods, metric (timestamp, window) per pod name, resource; expected
/// ready count and sets.
struct GroupCase {
    pods: Vec<GroupPod>,
    metrics: Vec<(&'static str, f64, f64)>,
    resource: Option<ResourceName>,
    ready: usize,
    unready: Vec<&'static str>,
    missing: Vec<&'static str>,
    ignored: Vec<&'static str>,
}

fn group(c: GroupCase) {
    let pods: Vec<PodState> = c
        .pods
        .iter()
        .map(|&(name, phase, start, cond, deleting)| PodState {
            name: name.into(),
            phase,
            deleting,
            start_time_s: start,
            ready: cond.map(|(ready, last_transition_s)| ReadyCondition { ready, last_transition_s }),
            containers: vec![],
            pod_request_milli: None,
        })
        .collect();
    let metrics = c
        .metrics
        .iter()
        .map(|&(n, ts, w)| (n.to_string(), MetricSample { value_milli: 1, timestamp_s: ts, window_s: w }))
        .collect();
    let g = group_pods(NOW, &pods, &metrics, c.resource, 120.0, 10.0);
    let set = |v: &[&str]| v.iter().map(|s| s.to_string()).collect();
    assert_eq!(g.ready_count, c.ready);
    assert_eq!(g.unready, set(&c.unready));
    assert_eq!(g.missing, set(&c.missing));
    assert_eq!(g.ignored, set(&c.ignored));
}

const CPU: Option<ResourceName> = Some(ResourceName::Cpu);
use Phase::Succeeded;

// upstream: TestGroupPods
// case: "void"
#[test]
fn group_pods_void() {
    group(GroupCase {
        pods: vec![],
        metrics: vec![],
        resource: CPU,
        ready: 0,
        unready: vec![],
        missing: vec![],
        ignored: vec![],
    });
}

// upstream: TestGroupPods
// case: "count in a ready pod - memory"
#[test]
fn group_pods_count_in_a_ready_pod_memory() {
    group(GroupCase {
        pods: vec![("bentham", Succeeded, None, None, false)],
        metrics: vec![("bentham", NOW, 60.0)],
        resource: Some(ResourceName::Memory),
        ready: 1,
        unready: vec![],
        missing: vec![],
        ignored: vec![],
    });
}

// upstream: TestGroupPods
// case: "unready a pod without ready condition - CPU"
#[test]
fn group_pods_unready_without_ready_condition() {
    group(GroupCase {
        pods: vec![("lucretius", Succeeded, Some(NOW), None, false)],
        metrics: vec![("lucretius", ZERO, 0.0)],
        resource: CPU,
        ready: 0,
        unready: vec!["lucretius"],
        missing: vec![],
        ignored: vec![],
    });
}

// upstream: TestGroupPods
// case: "count in a ready pod with fresh metrics during initialization period - CPU"
#[test]
fn group_pods_ready_with_fresh_metrics_during_initialization() {
    group(GroupCase {
        pods: vec![("bentham", Succeeded, Some(NOW - 60.0), Some((true, NOW - 30.0)), false)],
        metrics: vec![("bentham", NOW, 30.0)],
        resource: CPU,
        ready: 1,
        unready: vec![],
        missing: vec![],
        ignored: vec![],
    });
}

// upstream: TestGroupPods
// case: "unready a ready pod without fresh metrics during initialization period - CPU"
#[test]
fn group_pods_unready_without_fresh_metrics_during_initialization() {
    group(GroupCase {
        pods: vec![("bentham", Succeeded, Some(NOW - 60.0), Some((true, NOW - 30.0)), false)],
        metrics: vec![("bentham", NOW, 60.0)],
        resource: CPU,
        ready: 0,
        unready: vec!["bentham"],
        missing: vec![],
        ignored: vec![],
    });
}

// upstream: TestGroupPods
// case: "unready an unready pod during initialization period - CPU"
#[test]
fn group_pods_unready_during_initialization() {
    group(GroupCase {
        pods: vec![("lucretius", Succeeded, Some(NOW - 600.0), Some((false, NOW - 594.0)), false)],
        metrics: vec![("lucretius", ZERO, 0.0)],
        resource: CPU,
        ready: 0,
        unready: vec!["lucretius"],
        missing: vec![],
        ignored: vec![],
    });
}

// upstream: TestGroupPods
// case: "count in a ready pod without fresh metrics after initialization period - CPU"
#[test]
fn group_pods_ready_without_fresh_metrics_after_initialization() {
    group(GroupCase {
        pods: vec![("bentham", Succeeded, Some(NOW - 180.0), Some((true, NOW - 180.0)), false)],
        metrics: vec![("bentham", NOW - 120.0, 60.0)],
        resource: CPU,
        ready: 1,
        unready: vec![],
        missing: vec![],
        ignored: vec![],
    });
}

// upstream: TestGroupPods
// case: "count in an unready pod that was ready after initialization period - CPU"
#[test]
fn group_pods_unready_that_was_ready_after_initialization() {
    group(GroupCase {
        pods: vec![("lucretius", Succeeded, Some(NOW - 600.0), Some((false, NOW - 540.0)), false)],
        metrics: vec![("lucretius", ZERO, 0.0)],
        resource: CPU,
        ready: 1,
        unready: vec![],
        missing: vec![],
        ignored: vec![],
    });
}

// upstream: TestGroupPods
// case: "unready pod that has never been ready after initialization period - CPU"
#[test]
fn group_pods_never_ready_after_initialization() {
    // The transition sits exactly at start + the readiness delay, which upstream counts in.
    group(GroupCase {
        pods: vec![("lucretius", Succeeded, Some(NOW - 600.0), Some((false, NOW - 590.0)), false)],
        metrics: vec![("lucretius", ZERO, 0.0)],
        resource: CPU,
        ready: 1,
        unready: vec![],
        missing: vec![],
        ignored: vec![],
    });
}

// upstream: TestGroupPods
// case: "a missing pod"
#[test]
fn group_pods_a_missing_pod() {
    group(GroupCase {
        pods: vec![("epicurus", Succeeded, Some(NOW - 180.0), None, false)],
        metrics: vec![],
        resource: CPU,
        ready: 0,
        unready: vec![],
        missing: vec!["epicurus"],
        ignored: vec![],
    });
}

// upstream: TestGroupPods
// case: "several pods"
#[test]
fn group_pods_several_pods() {
    group(GroupCase {
        pods: vec![
            ("lucretius", Succeeded, Some(NOW), None, false),
            ("niccolo", Succeeded, Some(NOW - 180.0), Some((true, NOW - 180.0)), false),
            ("epicurus", Succeeded, Some(NOW - 180.0), None, false),
        ],
        metrics: vec![("lucretius", ZERO, 0.0), ("niccolo", ZERO, 0.0)],
        resource: CPU,
        ready: 1,
        unready: vec!["lucretius"],
        missing: vec!["epicurus"],
        ignored: vec![],
    });
}

// upstream: TestGroupPods
// case: "pending pods are unreadied"
#[test]
fn group_pods_pending_pods_are_unreadied() {
    group(GroupCase {
        pods: vec![("unscheduled", Pending, None, None, false)],
        metrics: vec![],
        resource: CPU,
        ready: 0,
        unready: vec!["unscheduled"],
        missing: vec![],
        ignored: vec![],
    });
}

// upstream: TestGroupPods
// case: "ignore pods with deletion timestamps"
#[test]
fn group_pods_ignore_pods_with_deletion_timestamps() {
    group(GroupCase {
        pods: vec![("deleted", Pending, None, None, true)],
        metrics: vec![("deleted", ZERO, 0.0)],
        resource: CPU,
        ready: 0,
        unready: vec![],
        missing: vec![],
        ignored: vec!["deleted"],
    });
}

// upstream: TestGroupPods
// case: "ignore pods in a failed state"
#[test]
fn group_pods_ignore_pods_in_a_failed_state() {
    group(GroupCase {
        pods: vec![("failed", Failed, None, None, false)],
        metrics: vec![("failed", ZERO, 0.0)],
        resource: CPU,
        ready: 0,
        unready: vec![],
        missing: vec![],
        ignored: vec!["failed"],
    });
}

fn container(name: &str, kind: ContainerKind, request: Option<i64>) -> ContainerRequest {
    ContainerRequest { name: name.into(), kind, request_milli: request }
}

fn request_pod(containers: Vec<ContainerRequest>, pod_request: Option<i64>) -> PodState {
    PodState {
        name: "test-pod".into(),
        phase: Running,
        deleting: false,
        start_time_s: None,
        ready: None,
        containers,
        pod_request_milli: pod_request,
    }
}

fn two_containers() -> Vec<ContainerRequest> {
    vec![
        container("container1", ContainerKind::Regular, Some(100)),
        container("container2", ContainerKind::Regular, Some(50)),
    ]
}

fn requests(pods: &[PodState], c: Option<&str>, pod_level: bool) -> Result<BTreeMap<String, i64>, HpaError> {
    calculate_requests(pods, c, ResourceName::Cpu, pod_level)
}

fn one(v: i64) -> Result<BTreeMap<String, i64>, HpaError> {
    Ok([("test-pod".to_string(), v)].into())
}

// upstream: TestCalculateRequests
// case: "void"
#[test]
fn calculate_requests_void() {
    assert_eq!(requests(&[], None, false), Ok(BTreeMap::new()));
}

// upstream: TestCalculateRequests
// case: "Sum container requests if pod-level feature is disabled"
#[test]
fn calculate_requests_sum_when_feature_disabled() {
    assert_eq!(requests(&[request_pod(two_containers(), None)], None, false), one(150));
}

// upstream: TestCalculateRequests
// case: "Pod-level resources are enabled, but not set: fallback to sum container requests"
#[test]
fn calculate_requests_pod_level_enabled_but_unset() {
    assert_eq!(requests(&[request_pod(two_containers(), None)], None, true), one(150));
}

// upstream: TestCalculateRequests
// case: "Pod-level resources override container requests when feature enabled and pod resources specified"
#[test]
fn calculate_requests_pod_level_overrides() {
    assert_eq!(requests(&[request_pod(two_containers(), Some(800))], None, true), one(800));
}

// upstream: TestCalculateRequests
// case: "Fail if at least one of the containers is missing requests and pod-level feature/requests are not set"
#[test]
fn calculate_requests_missing_container_request_fails() {
    let pod = request_pod(
        vec![
            container("container1", ContainerKind::Regular, None),
            container("container2", ContainerKind::Regular, Some(50)),
        ],
        None,
    );
    let err = requests(&[pod], None, false).unwrap_err();
    assert_eq!(err.to_string(), "missing request for cpu in container container1 of Pod test-pod");
}

// upstream: TestCalculateRequests
// case: "Pod-level resources override missing container requests when feature enabled and pod resources specified"
#[test]
fn calculate_requests_pod_level_overrides_missing_container_request() {
    let pod = request_pod(
        vec![
            container("container1", ContainerKind::Regular, None),
            container("container2", ContainerKind::Regular, Some(50)),
        ],
        Some(800),
    );
    assert_eq!(requests(&[pod], None, true), one(800));
}

// upstream: TestCalculateRequests
// case: "Container: if a container name is specified, calculate requests only for that container"
#[test]
fn calculate_requests_named_container() {
    assert_eq!(requests(&[request_pod(two_containers(), None)], Some("container1"), false), one(100));
}

// upstream: TestCalculateRequests
// case: "Container: if a container name is specified, calculate requests only for that container and ignore pod-level requests"
#[test]
fn calculate_requests_named_container_ignores_pod_level() {
    assert_eq!(requests(&[request_pod(two_containers(), Some(800))], Some("container1"), true), one(100));
}

// upstream: TestCalculateRequests
// case: "pod with restartable init containers"
#[test]
fn calculate_requests_restartable_init_containers() {
    let pod = request_pod(
        vec![
            container("container1", ContainerKind::Regular, Some(100)),
            container("init-container1", ContainerKind::Init, Some(20)),
            container("restartable-container1", ContainerKind::Sidecar, Some(50)),
        ],
        None,
    );
    assert_eq!(requests(&[pod], None, false), one(150));
}

// upstream: TestCalculatePodRequestsFromContainers_NonExistentContainer
#[test]
fn pod_requests_from_containers_non_existent_container() {
    let pod = request_pod(vec![container("container1", ContainerKind::Regular, Some(100))], None);
    let err = pod_request_from_containers(&pod, Some("non-existent-container"), ResourceName::Cpu).unwrap_err();
    assert_eq!(err.to_string(), "container non-existent-container not found in Pod test-pod");
}

// upstream: TestReplicaCalcExternalMetricUsageOverflow
#[test]
fn external_metric_usage_overflow() {
    Tc { current: 3, metric: vec![i64::MAX / 2 + 1, i64::MAX / 2 + 1], ..Default::default() }
        .external(i64::MAX, (3, i64::MAX));
}
