//! Upstream's HPA and VPA cases driven through `aware recommend --input FILE --json`: each test
//! writes the case as the input JSON a user would (an `autoscaling/v2` HPA spec, pods with two
//! containers, phases, deletion, custom metrics, unlisted pod metrics, VPA checkpoints) and
//! checks upstream's expected numbers in `details`. Every case of upstream's
//! `replica_calculator_test.go` that these fields can express is here, preceded by the Go test's
//! name; `Object`/`External` metrics, overflow and the calculator's internals
//! (`TestGroupPods`, `TestCalculateRequests`) cannot be expressed and are covered by the
//! library's own tests. Then bad input: one line on stderr naming file, field and reason, exit 1.

mod common;

use std::process::{Command, Output};

use common::temp_file;

use serde_json::{Value, json};

fn aware(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_aware")).args(args).output().expect("run aware")
}

/// The observation's clock; "cool" pods started an hour before (past the 5-minute CPU
/// initialisation period), "hot" ones now.
const NOW: f64 = 100_000.0;
const COOL: f64 = NOW - 3600.0;
const HOT: f64 = NOW;
const N: i64 = 2;

fn resources(cpu_m: i64) -> Value {
    json!({ "cpu_millicores": cpu_m, "memory_bytes": 0 })
}

#[derive(Default, Clone)]
struct Case {
    current: i64,
    requests: Vec<i64>,
    levels: Vec<Vec<i64>>,
    unlisted: Vec<(&'static str, f64)>,
    readiness: Vec<bool>,
    start: Vec<f64>,
    phase: Vec<&'static str>,
    deleting: Vec<bool>,
    metric: Vec<i64>,
    /// (scale-down, scale-up) tolerances as quantity strings.
    tolerances: Option<(&'static str, &'static str)>,
}

fn levels(v: &[i64]) -> Vec<Vec<i64>> {
    v.iter().map(|&x| vec![x, x]).collect()
}

impl Case {
    fn input(&self, metric: Value) -> Value {
        let count = (self.current as usize).max(self.phase.len());
        let pods: Vec<Value> = (0..count)
            .map(|i| {
                let ready = self.readiness.get(i).copied().unwrap_or(true);
                let start = self.start.get(i).copied().unwrap_or(0.0);
                let phase = match self.phase.get(i).copied().unwrap_or("running") {
                    "running" if ready => "ready",
                    "running" => "starting",
                    other => other,
                };
                let request = self.requests.get(i).copied().unwrap_or(0);
                let containers: Vec<Value> = (0..2)
                    .map(|j| {
                        let usage = self.levels.get(i).and_then(|l| l.get(j)).map(|&m| m as f64 / 1000.0);
                        json!({
                            "name": format!("container{}", j + 1),
                            "requests": resources(request),
                            "limits": resources(request),
                            "cpu_usage_cores": usage,
                        })
                    })
                    .collect();
                let mut custom = serde_json::Map::new();
                if let Some(&v) = self.metric.get(i) {
                    custom.insert("qps".into(), json!(v as f64 / 1000.0));
                }
                json!({
                    "name": format!("test-pod-{i}"),
                    "phase": phase,
                    "node": null,
                    "created_at_s": start,
                    "ready_since_s": if phase == "ready" { Some(start) } else { None },
                    "cpu_usage_cores": null,
                    "memory_working_set_bytes": null,
                    "resources": { "name": "pod", "requests": resources(0), "limits": resources(0) },
                    "restarts": 0,
                    "oom_killed_at_bytes": null,
                    "deleting": self.deleting.get(i).copied().unwrap_or(false),
                    "containers": containers,
                    "custom_metrics": custom,
                })
            })
            .collect();
        let mut hpa = json!({ "minReplicas": 1, "maxReplicas": 100000, "metrics": [metric] });
        if let Some((down, up)) = self.tolerances {
            hpa["behavior"] = json!({ "scaleUp": { "tolerance": up }, "scaleDown": { "tolerance": down } });
        }
        let unlisted: Vec<Value> =
            self.unlisted.iter().map(|(p, c)| json!({ "pod": p, "cpu_usage_cores": c })).collect();
        json!({
            "observation": {
                "app": "upstream",
                "time_s": NOW,
                "interval_s": 60.0,
                "desired_replicas": self.current,
                "template": { "name": "container1", "requests": resources(1000), "limits": resources(1000) },
                "pods": pods,
                "arrival_rate": 0.0,
                "throughput": 0.0,
                "latency_mean_ms": null,
                "latency_p99_ms": null,
                "dropped_requests": 0,
                "oom_events": 0,
                "io_utilisation": 0.0,
                "network_utilisation": 0.0,
            },
            "hpa": hpa,
            "unlisted_pod_metrics": unlisted,
        })
    }

    fn run(&self, name: &str, metric: Value) -> Value {
        let path = temp_file(&format!("{name}.json"), &self.input(metric).to_string());
        let o = aware(&["recommend", "--policy", "hpa", "--input", path.to_str().unwrap(), "--json"]);
        assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
        let v: Value = serde_json::from_slice(&o.stdout).unwrap();
        v["details"]["hpa"].clone()
    }

    /// A CPU `Utilization` target: upstream's (replicas, utilisation, raw value in millicores).
    fn cpu(&self, name: &str, target: i64, want: (i64, i64, i64)) {
        let metric = json!({ "type": "Resource", "resource": { "name": "cpu",
            "target": { "type": "Utilization", "averageUtilization": target } } });
        let d = self.run(name, metric);
        assert_eq!(d["error"], Value::Null, "{d}");
        assert_eq!(d["metric_replicas"], json!(want.0), "{d}");
        assert_eq!(d["utilizations"], json!([want.1]), "{d}");
        assert_eq!(d["average_values"], json!([want.2 as f64 / 1000.0]), "{d}");
    }

    fn cpu_error(&self, name: &str, target: i64, want: &str) {
        let metric = json!({ "type": "Resource", "resource": { "name": "cpu",
            "target": { "type": "Utilization", "averageUtilization": target } } });
        let d = self.run(name, metric);
        assert!(d["error"].as_str().unwrap_or("").contains(want), "{d}");
        assert_eq!(d["desired_replicas"], json!(self.current), "the HPA keeps the current count");
    }

    /// A `Pods` metric `qps` with an `AverageValue` target (milli-units): (replicas, usage).
    fn qps(&self, name: &str, target_milli: i64, want: (i64, i64)) {
        let metric = json!({ "type": "Pods", "pods": { "metric": { "name": "qps" },
            "target": { "type": "AverageValue", "averageValue": format!("{target_milli}m") } } });
        let d = self.run(name, metric);
        assert_eq!(d["error"], Value::Null, "{d}");
        assert_eq!(d["metric_replicas"], json!(want.0), "{d}");
        assert_eq!(d["utilizations"], json!([null]), "{d}");
        assert_eq!(d["average_values"], json!([want.1 as f64 / 1000.0]), "{d}");
    }
}

fn cores(n: usize) -> Vec<i64> {
    vec![1000; n]
}

// upstream: TestReplicaCalcResourceScale
// case: "scale up"
#[test]
fn resource_scale_up() {
    Case { current: 3, requests: cores(3), levels: levels(&[300, 500, 700]), ..Default::default() }.cpu(
        "scale-up",
        30,
        (5, 50, N * 500),
    );
}

// upstream: TestReplicaCalcResourceScale
// case: "scale up: unready pod scales less"
#[test]
fn resource_scale_up_unready_pod_scales_less() {
    Case {
        current: 3,
        readiness: vec![false, true, true],
        requests: cores(3),
        levels: levels(&[300, 500, 700]),
        ..Default::default()
    }
    .cpu("unready-less", 30, (4, 60, N * 600));
}

// upstream: TestReplicaCalcResourceScale
// case: "scale up: hot-CPU pod scales less"
#[test]
fn resource_scale_up_hot_cpu_pod_scales_less() {
    Case {
        current: 3,
        start: vec![HOT, COOL, COOL],
        requests: cores(3),
        levels: levels(&[300, 500, 700]),
        ..Default::default()
    }
    .cpu("hot-less", 30, (4, 60, N * 600));
}

// upstream: TestReplicaCalcResourceScale
// case: "no scale: unready pods ignored"
#[test]
fn resource_no_scale_unready_pods_ignored() {
    Case {
        current: 3,
        readiness: vec![true, false, false],
        requests: cores(3),
        levels: levels(&[400, 500, 700]),
        ..Default::default()
    }
    .cpu("unready-ignored", 30, (3, 40, N * 400));
}

// upstream: TestReplicaCalcResourceScale
// case: "no scale: hot-CPU pods ignored"
#[test]
fn resource_no_scale_hot_cpu_pods_ignored() {
    Case {
        current: 3,
        readiness: vec![true, false, false],
        start: vec![COOL, HOT, HOT],
        requests: cores(3),
        levels: levels(&[400, 500, 700]),
        ..Default::default()
    }
    .cpu("hot-ignored", 30, (3, 40, N * 400));
}

// upstream: TestReplicaCalcResourceScale
// case: "scale up: failed pods ignored"
#[test]
fn resource_scale_up_failed_pods_ignored() {
    Case {
        current: 2,
        readiness: vec![true, true, false, false],
        phase: vec!["running", "running", "failed", "failed"],
        requests: cores(4),
        levels: levels(&[500, 700]),
        ..Default::default()
    }
    .cpu("failed-up", 30, (4, 60, N * 600));
}

// upstream: TestReplicaCalcResourceScale
// case: "scale up: pods being deleted are ignored"
#[test]
fn resource_scale_up_pods_being_deleted_are_ignored() {
    Case {
        current: 2,
        readiness: vec![true, true, false, false],
        phase: vec!["running"; 4],
        deleting: vec![false, false, true, true],
        requests: cores(4),
        levels: levels(&[500, 700]),
        ..Default::default()
    }
    .cpu("deleting-up", 30, (4, 60, N * 600));
}

fn five() -> Case {
    Case { current: 5, requests: cores(5), levels: levels(&[100, 300, 500, 250, 250]), ..Default::default() }
}

// upstream: TestReplicaCalcResourceScale
// case: "scale down"
#[test]
fn resource_scale_down() {
    five().cpu("scale-down", 50, (3, 28, N * 280));
}

// upstream: TestReplicaCalcResourceScale
// case: "scale down: exclude unready pods"
#[test]
fn resource_scale_down_exclude_unready_pods() {
    Case { readiness: vec![true, true, true, false, false], ..five() }.cpu("down-unready", 50, (2, 30, N * 300));
}

// upstream: TestReplicaCalcResourceScale
// case: "scale down: exclude unscheduled pods"
#[test]
fn resource_scale_down_exclude_unscheduled_pods() {
    Case {
        readiness: vec![true, false, false, false, false],
        phase: vec!["running", "pending", "pending", "pending", "pending"],
        levels: levels(&[100]),
        ..five()
    }
    .cpu("down-unscheduled", 50, (1, 10, N * 100));
}

// upstream: TestReplicaCalcResourceScale
// case: "scale down: ignore hot-CPU pods"
#[test]
fn resource_scale_down_ignore_hot_cpu_pods() {
    Case { start: vec![COOL, COOL, COOL, HOT, HOT], ..five() }.cpu("down-hot", 50, (2, 30, N * 300));
}

fn seven() -> Case {
    Case { readiness: vec![true, true, true, true, true, false, false], requests: cores(7), ..five() }
}

// upstream: TestReplicaCalcResourceScale
// case: "scale down: failed pods ignored"
#[test]
fn resource_scale_down_failed_pods_ignored() {
    Case { phase: vec!["running", "running", "running", "running", "running", "failed", "failed"], ..seven() }.cpu(
        "down-failed",
        50,
        (3, 28, N * 280),
    );
}

// upstream: TestReplicaCalcResourceScale
// case: "scale down: pods being deleted are ignored"
#[test]
fn resource_scale_down_pods_being_deleted_are_ignored() {
    Case { phase: vec!["running"; 7], deleting: vec![false, false, false, false, false, true, true], ..seven() }.cpu(
        "down-deleting",
        50,
        (3, 28, N * 280),
    );
}

// upstream: TestReplicaCalcDisjointResourcesMetrics
#[test]
fn disjoint_resources_metrics() {
    Case { current: 1, requests: cores(1), unlisted: vec![("an-older-pod-name", 0.2)], ..Default::default() }
        .cpu_error("disjoint", 100, "no metrics returned matched known pods");
}

// upstream: TestReplicaCalcScaleUpCM
#[test]
fn scale_up_cm() {
    Case { current: 3, metric: vec![20000, 10000, 30000], ..Default::default() }.qps("cm-up", 15000, (4, 20000));
}

// upstream: TestReplicaCalcScaleUpCMUnreadyHotCpuNoLessScale
#[test]
fn scale_up_cm_unready_hot_cpu_no_less_scale() {
    Case {
        current: 3,
        readiness: vec![true, true, false],
        start: vec![COOL, COOL, HOT],
        metric: vec![50000, 10000, 30000],
        ..Default::default()
    }
    .qps("cm-hot-no-less", 15000, (6, 30000));
}

// upstream: TestReplicaCalcScaleUpCMUnreadyHotCpuScaleWouldScaleDown
#[test]
fn scale_up_cm_unready_hot_cpu_scale_would_scale_down() {
    Case {
        current: 3,
        readiness: vec![false, true, false],
        start: vec![HOT, COOL, HOT],
        metric: vec![50000, 15000, 30000],
        ..Default::default()
    }
    .qps("cm-would-down", 15000, (7, 31666));
}

// upstream: TestReplicaCalcScaleDownCM
#[test]
fn scale_down_cm() {
    Case { current: 5, metric: vec![12000; 5], ..Default::default() }.qps("cm-down", 20000, (3, 12000));
}

fn uneven(l: &[i64]) -> Case {
    Case { current: 3, requests: vec![900, 1000, 1100], levels: levels(l), ..Default::default() }
}

// upstream: TestReplicaCalcTolerance
#[test]
fn tolerance() {
    uneven(&[1010, 1030, 1020]).cpu("tolerance", 100, (3, 102, N * 1020));
}

// upstream: TestReplicaCalcToleranceCM
#[test]
fn tolerance_cm() {
    Case { current: 3, metric: vec![20000, 21000, 21000], ..Default::default() }.qps("tolerance-cm", 20000, (3, 20666));
}

// upstream: TestReplicaCalcConfigurableTolerance
// case: "Outside of a 0% tolerance"
#[test]
fn configurable_tolerance_outside_zero() {
    Case { tolerances: Some(("0", "0")), ..uneven(&[909, 1010, 1111]) }.cpu("tol-0", 100, (4, 101, N * 1010));
}

// upstream: TestReplicaCalcConfigurableTolerance
// case: "Within a 200% scale-up tolerance"
#[test]
fn configurable_tolerance_within_200_percent_up() {
    Case { tolerances: Some(("0.1", "2")), ..uneven(&[1890, 1910, 1900]) }.cpu("tol-200", 100, (3, 190, N * 1900));
}

// upstream: TestReplicaCalcConfigurableTolerance
// case: "Outside 8% scale-up tolerance (and superfuous scale-down tolerance)"
#[test]
fn configurable_tolerance_outside_8_percent_up() {
    Case { tolerances: Some(("2", "80m")), ..uneven(&[1100, 1080, 1090]) }.cpu("tol-8", 100, (4, 109, N * 1090));
}

// upstream: TestReplicaCalcConfigurableTolerance
// case: "Within a 36% scale-down tolerance"
#[test]
fn configurable_tolerance_within_36_percent_down() {
    Case { tolerances: Some(("0.36", "0.1")), ..uneven(&[660, 640, 650]) }.cpu("tol-36", 100, (3, 65, N * 650));
}

// upstream: TestReplicaCalcConfigurableTolerance
// case: "Outside a 34% scale-down tolerance"
#[test]
fn configurable_tolerance_outside_34_percent_down() {
    Case { tolerances: Some(("340m", "0.1")), ..uneven(&[660, 640, 650]) }.cpu("tol-34", 100, (2, 65, N * 650));
}

// upstream: TestReplicaCalcConfigurableToleranceCM
#[test]
fn configurable_tolerance_cm() {
    Case { tolerances: Some(("0.1", "0.01")), current: 3, metric: vec![20000, 21000, 21000], ..Default::default() }
        .qps("tol-cm", 20000, (4, 20666));
}

// upstream: TestReplicaCalcSuperfluousMetrics
#[test]
fn superfluous_metrics() {
    Case {
        current: 4,
        requests: cores(4),
        levels: levels(&[4000, 9500, 3000, 7000]),
        unlisted: vec![("test-pod-4", 6.4), ("test-pod-5", 4.0)],
        ..Default::default()
    }
    .cpu("superfluous", 100, (24, 587, N * 5875));
}

// upstream: TestReplicaCalcMissingMetrics
#[test]
fn missing_metrics() {
    Case { current: 4, requests: cores(4), levels: levels(&[400, 95]), ..Default::default() }.cpu(
        "missing",
        100,
        (3, 24, 495),
    );
}

// upstream: TestReplicaCalcEmptyMetrics
#[test]
fn empty_metrics() {
    Case { current: 4, requests: cores(3), ..Default::default() }.cpu_error(
        "empty",
        100,
        "unable to get metrics for resource cpu: no metrics returned from resource metrics API",
    );
}

// upstream: TestReplicaCalcEmptyCPURequest
#[test]
fn empty_cpu_request() {
    // A zero request is "not set", as a container without one.
    Case { current: 1, levels: levels(&[200]), ..Default::default() }.cpu_error(
        "no-request",
        100,
        "missing request for",
    );
}

// upstream: TestPlainMetricReplicaCalcMissingMetricsNoChangeEq
#[test]
fn plain_metric_missing_metrics_no_change_eq() {
    Case { current: 5, metric: vec![20000, 19000, 21000], ..Default::default() }.qps("plain-eq", 20000, (5, 20000));
}

fn two(level: i64) -> Case {
    Case { current: 2, requests: cores(2), levels: levels(&[level]), ..Default::default() }
}

// upstream: TestReplicaCalcMissingMetricsNoChangeEq
#[test]
fn missing_metrics_no_change_eq() {
    two(1000).cpu("missing-eq", 100, (2, 100, N * 1000));
}

// upstream: TestReplicaCalcMissingMetricsNoChangeGt
#[test]
fn missing_metrics_no_change_gt() {
    two(1900).cpu("missing-gt", 100, (2, 190, N * 1900));
}

// upstream: TestReplicaCalcMissingMetricsNoChangeLt
#[test]
fn missing_metrics_no_change_lt() {
    two(600).cpu("missing-lt", 100, (2, 60, N * 600));
}

fn three(l: &[i64]) -> Case {
    Case { current: 3, requests: cores(3), levels: levels(l), ..Default::default() }
}

// upstream: TestReplicaCalcMissingMetricsUnreadyChange
#[test]
fn missing_metrics_unready_change() {
    Case { readiness: vec![false, true, true], ..three(&[100, 450]) }.cpu("missing-unready", 50, (3, 45, N * 450));
}

// upstream: TestReplicaCalcMissingMetricsHotCpuNoChange
#[test]
fn missing_metrics_hot_cpu_no_change() {
    Case { start: vec![HOT, COOL, COOL], ..three(&[100, 450]) }.cpu("missing-hot", 50, (3, 45, N * 450));
}

// upstream: TestReplicaCalcMissingMetricsUnreadyScaleUp
#[test]
fn missing_metrics_unready_scale_up() {
    Case { readiness: vec![false, true, true], ..three(&[100, 2000]) }.cpu(
        "missing-unready-up",
        50,
        (4, 200, N * 2000),
    );
}

// upstream: TestReplicaCalcMissingMetricsHotCpuScaleUp
#[test]
fn missing_metrics_hot_cpu_scale_up() {
    Case { readiness: vec![false, true, true], start: vec![HOT, COOL, COOL], ..three(&[100, 2000]) }.cpu(
        "missing-hot-up",
        50,
        (4, 200, N * 2000),
    );
}

// upstream: TestReplicaCalcMissingMetricsUnreadyScaleDown
#[test]
fn missing_metrics_unready_scale_down() {
    Case {
        current: 4,
        readiness: vec![false, true, true, true],
        requests: cores(4),
        levels: levels(&[100, 100, 100]),
        ..Default::default()
    }
    .cpu("missing-unready-down", 50, (3, 10, N * 100));
}

// upstream: TestReplicaCalcMissingMetricsScaleDownTargetOver100
#[test]
fn missing_metrics_scale_down_target_over_100() {
    Case {
        current: 4,
        readiness: vec![false, true, true, true],
        requests: vec![1000, 1000, 2000, 2000],
        levels: levels(&[200, 100, 100]),
        ..Default::default()
    }
    .cpu("target-over-100", 300, (2, 6, N * 100));
}

// upstream: TestReplicaCalcDuringRollingUpdateWithMaxSurge
#[test]
fn during_rolling_update_with_max_surge() {
    Case {
        current: 2,
        phase: vec!["running"; 3],
        requests: cores(3),
        levels: levels(&[100, 100]),
        ..Default::default()
    }
    .cpu("max-surge", 50, (2, 10, N * 100));
}

// upstream: TestReplicaCalcDuringRollingUpdateWithMaxSurgeCM
#[test]
fn during_rolling_update_with_max_surge_cm() {
    Case { current: 2, phase: vec!["running"; 3], metric: vec![10000, 10000], ..Default::default() }.qps(
        "max-surge-cm",
        17000,
        (2, 10000),
    );
}

// upstream: TestReplicaCalcComputedToleranceAlgImplementation
#[test]
fn computed_tolerance_alg_implementation() {
    let case = Case {
        current: 10,
        requests: [100, -100, 10, -10, 2, -2, 1, -1, 0, 0].map(|d| 300 + d).to_vec(),
        levels: levels(&[150; 10]),
        ..Default::default()
    };
    // Upstream's derivation: target 1 / (2 × 0.9) + 0.01 → 56 % scales 10 → 9; + 0.004 → 55 % does not.
    case.cpu("computed-56", 56, (9, 50, N * 150));
    case.cpu("computed-55", 55, (10, 50, N * 150));
}

/// The example input plus `patch`ed fields, for the VPA and error cases.
fn example() -> Value {
    let path = concat!(env!("CARGO_MANIFEST_DIR"), "/../../docs/examples/recommend-input.json");
    serde_json::from_str(&std::fs::read_to_string(path).unwrap()).unwrap()
}

fn run_json(name: &str, input: &Value, policy: &str) -> Output {
    let path = temp_file(&format!("{name}.json"), &input.to_string());
    aware(&["recommend", "--policy", policy, "--input", path.to_str().unwrap(), "--json"])
}

/// A `VerticalPodAutoscalerCheckpoint` as `kubectl get vpacheckpoint -o json` prints it: eight
/// days of one-minute samples ending at the example's clock origin (the example observation is at
/// t = 90 s).
fn checkpoint(container: &str, cpu_buckets: Value, total: f64) -> Value {
    json!({
        "apiVersion": "autoscaling.k8s.io/v1",
        "kind": "VerticalPodAutoscalerCheckpoint",
        "metadata": { "name": "app-vpa-app", "namespace": "default" },
        "spec": { "vpaObjectName": "app-vpa", "containerName": container },
        "status": {
            "lastUpdateTime": "1970-01-01T00:00:00Z",
            "version": "v3",
            "cpuHistogram": { "referenceTimestamp": "1970-01-01T00:00:00Z", "bucketWeights": cpu_buckets, "totalWeight": total },
            "memoryHistogram": { "referenceTimestamp": "1970-01-01T00:00:00Z", "bucketWeights": { "10": 10000 }, "totalWeight": 8.0 },
            "firstSampleStart": "1969-12-24T00:00:00Z",
            "lastSampleStart": "1970-01-01T00:00:00Z",
            "totalSamplesCount": 11520,
        }
    })
}

/// A week of checkpointed history gives the VPA confident (narrow) bounds from the first
/// observation; without it the bounds are wide. Field names as the interface fixes them.
#[test]
fn vpa_starts_from_checkpoints() {
    let mut input = example();
    input["history"] = json!([]);
    let fresh: Value = serde_json::from_slice(&run_json("vpa-fresh", &input, "vpa").stdout).unwrap();
    // CPU bucket 53 of the recommender's 5 %-growth histogram starts at ≈ 2.46 cores.
    input["vpa_checkpoints"] = json!([checkpoint("app", json!({ "53": 10000 }), 1000.0)]);
    let o = run_json("vpa-checkpoint", &input, "vpa");
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let v: Value = serde_json::from_slice(&o.stdout).unwrap();
    let rec = &v["details"]["vpa"]["recommendation"];
    let target = rec["target"]["cpu_millicores"].as_i64().unwrap();
    assert!(target > 2000, "the checkpoint's 2.5 cores dominate one fresh sample: {rec}");
    let (lo, up) = (
        rec["lower_bound"]["cpu_millicores"].as_i64().unwrap(),
        rec["upper_bound"]["cpu_millicores"].as_i64().unwrap(),
    );
    assert!(lo <= target && target <= up, "{rec}");
    let fresh_up = fresh["details"]["vpa"]["recommendation"]["upper_bound"]["cpu_millicores"].as_i64().unwrap();
    assert!(up < fresh_up, "eight days of history narrow the upper bound: {up} vs {fresh_up}");
    let list = &v["details"]["vpa"]["container_recommendations"];
    assert_eq!(list[0]["container_name"], "app", "{list}");
    assert_eq!(list[0]["target"], rec["target"], "{list}");
}

#[test]
fn invalid_checkpoints_exit_1_naming_the_field() {
    let mut input = example();
    for (name, buckets, total, field) in [
        ("ck-negative", json!({ "-1": 5 }), 1.0, "vpa_checkpoints[0].status.cpuHistogram"),
        ("ck-range", json!({ "100000": 5 }), 1.0, "vpa_checkpoints[0].status.cpuHistogram"),
        ("ck-weight", json!({ "1": 5 }), -1.0, "vpa_checkpoints[0].status.cpuHistogram.totalWeight"),
    ] {
        input["vpa_checkpoints"] = json!([checkpoint("app", buckets, total)]);
        let o = run_json(name, &input, "vpa");
        assert_eq!(o.status.code(), Some(1), "{name}");
        let err = String::from_utf8_lossy(&o.stderr);
        assert_eq!(err.trim_end().lines().count(), 1, "{err}");
        assert!(err.contains(field) && err.contains(&format!("{name}.json")), "{err}");
    }
}

/// Issue 19 input bugs: negative, non-finite and absurd limits exit 1 with the field named; a
/// zero CPU request stays valid ("none").
#[test]
fn absurd_limits_exit_1_naming_the_field() {
    let cases = [
        (
            "neg-limit",
            "/observation/template/limits/cpu_millicores",
            json!(-1000),
            "observation.template.limits.cpu_millicores",
        ),
        (
            "huge-limit",
            "/observation/template/limits/cpu_millicores",
            json!(1e308),
            "observation.template.limits.cpu_millicores",
        ),
        (
            "big-cpu",
            "/observation/template/limits/cpu_millicores",
            json!(2_000_000u64),
            "observation.template.limits.cpu_millicores",
        ),
        (
            "big-mem",
            "/observation/pods/0/resources/limits/memory_bytes",
            json!(1u64 << 50),
            "observation.pods[0].resources.limits.memory_bytes",
        ),
        ("replicas", "/observation/desired_replicas", json!(200_000), "observation.desired_replicas"),
        ("zero-replicas", "/observation/desired_replicas", json!(0), "observation.desired_replicas"),
    ];
    for (name, pointer, value, field) in cases {
        let mut input = example();
        *input.pointer_mut(pointer).unwrap_or_else(|| panic!("{pointer}")) = value;
        let o = run_json(name, &input, "hpa");
        assert_eq!(o.status.code(), Some(1), "{name}: {}", String::from_utf8_lossy(&o.stdout));
        let err = String::from_utf8_lossy(&o.stderr);
        assert_eq!(err.trim_end().lines().count(), 1, "{err}");
        assert!(err.contains(field), "{name}: {err}");
    }
    let mut input = example();
    input["observation"]["template"]["requests"]["cpu_millicores"] = json!(0);
    assert!(run_json("zero-cpu", &input, "hpa").status.success(), "a zero CPU request means none");
}

/// A negative latency is no measurement: refused, exit 1, naming the file and the field (of the
/// observation and of a history entry), for every policy.
#[test]
fn negative_latencies_exit_1_naming_the_file_and_field() {
    for (name, field, policy) in [
        ("neg-p99", "latency_p99_ms", "hpa"),
        ("neg-mean", "latency_mean_ms", "mpa"),
        ("neg-p99-history", "latency_p99_ms", "vpa"),
    ] {
        let mut input = example();
        let at = if name.ends_with("history") {
            let first = input["history"][0].clone();
            assert!(first.is_object(), "the example has a history");
            input["history"] = json!([first]);
            input["history"][0][field] = json!(-5.0);
            format!("history[0].{field}")
        } else {
            input["observation"][field] = json!(-5.0);
            format!("observation.{field}")
        };
        let o = run_json(name, &input, policy);
        assert_eq!(o.status.code(), Some(1), "{name}: {}", String::from_utf8_lossy(&o.stdout));
        let err = String::from_utf8_lossy(&o.stderr);
        assert_eq!(err.trim_end().lines().count(), 1, "{err}");
        assert!(err.contains(&format!("{name}.json")) && err.contains(&at) && err.contains("-5"), "{name}: {err}");
    }
    // Nor is a negative usage, working set or OOM size of a pod.
    for field in ["cpu_usage_cores", "memory_working_set_bytes", "oom_killed_at_bytes"] {
        let mut input = example();
        input["observation"]["pods"][0][field] = json!(-1.0);
        let name = format!("neg-{field}");
        let o = run_json(&name, &input, "mpa");
        assert_eq!(o.status.code(), Some(1), "{name}: {}", String::from_utf8_lossy(&o.stdout));
        let err = String::from_utf8_lossy(&o.stderr);
        assert_eq!(err.trim_end().lines().count(), 1, "{err}");
        assert!(err.contains(&format!("{name}.json")) && err.contains(field) && err.contains("negative"), "{err}");
    }
}

#[test]
fn hpa_spec_errors_name_the_field() {
    let mut input = example();
    input["hpa"] = json!({ "maxReplicas": 5, "metrics": [{ "type": "Resource", "resource": { "name": "cpu",
        "target": { "type": "Utilization", "averageUtilization": 0 } } }] });
    let err = String::from_utf8_lossy(&run_json("hpa-zero", &input, "hpa").stderr).to_string();
    assert!(err.contains("hpa.metrics[0].resource.target.averageUtilization"), "{err}");
    input["hpa"] = json!({ "maxReplicas": 5, "behavior": { "scaleUp": { "tolerance": "abc" } } });
    let err = String::from_utf8_lossy(&run_json("hpa-tol", &input, "hpa").stderr).to_string();
    assert!(err.contains("hpa.behavior.scaleUp.tolerance"), "{err}");
    input["hpa"] = json!({ "maxReplicas": 5, "extra": 1 });
    let err = String::from_utf8_lossy(&run_json("hpa-unknown", &input, "hpa").stderr).to_string();
    assert!(err.contains("unknown field") && err.contains("hpa"), "{err}");
}

/// The HPA spec replaces the profile's target and bounds; a target above 100 % works.
#[test]
fn hpa_spec_replaces_the_profile() {
    let mut input = example();
    input["hpa"] = json!({ "minReplicas": 3, "maxReplicas": 7, "metrics": [{ "type": "Resource", "resource": { "name": "cpu",
        "target": { "type": "Utilization", "averageUtilization": 150 } } }] });
    let o = run_json("hpa-150", &input, "hpa");
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let v: Value = serde_json::from_slice(&o.stdout).unwrap();
    let r = v["recommendation"]["replicas"].as_u64().unwrap();
    assert!((3..=7).contains(&r), "{v}");
}

#[test]
fn utf8_bom_is_accepted() {
    let text = format!("\u{feff}{}", example());
    let path = temp_file("bom.json", &text);
    let o = aware(&["recommend", "--policy", "hpa", "--input", path.to_str().unwrap(), "--json"]);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
}
