//! The HPA replica calculator for resource metrics, as upstream's
//! `pkg/controller/podautoscaler/replica_calculator.go` computes it: pods are grouped into
//! ready, unready, missing-metric and ignored; utilisation is an integer percentage (truncated);
//! and missing or unready pods are assumed to use whatever would damp the proposed change.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

/// The lifecycle phase Kubernetes reports for a pod.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Phase {
    Pending,
    Running,
    Succeeded,
    Failed,
}

/// The pod's Ready condition: its status and when it last changed.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct ReadyCondition {
    pub ready: bool,
    pub last_transition_s: f64,
}

/// What the HPA knows about one pod of its target.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct PodState {
    pub name: String,
    pub phase: Phase,
    /// Being deleted (has a deletion timestamp).
    pub deleting: bool,
    pub start_time_s: Option<f64>,
    pub ready: Option<ReadyCondition>,
    /// The pod's request for the resource, milli-units (millicores, or bytes × 1000); `None`
    /// when the container sets no request, which upstream rejects.
    pub request_milli: Option<i64>,
}

/// A metrics-server sample: its value (milli-units), when it was taken and over what window.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct MetricSample {
    pub value_milli: i64,
    pub timestamp_s: f64,
    pub window_s: f64,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ResourceName {
    Cpu,
    Memory,
}

impl ResourceName {
    pub fn as_str(self) -> &'static str {
        match self {
            ResourceName::Cpu => "cpu",
            ResourceName::Memory => "memory",
        }
    }
}

/// Scale-down and scale-up tolerances: no change while the usage ratio is in
/// `[1 − down, 1 + up]` (both 0.1 by default, the `--horizontal-pod-autoscaler-tolerance`).
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct Tolerances {
    pub scale_down: f64,
    pub scale_up: f64,
}

impl Default for Tolerances {
    fn default() -> Self {
        Self { scale_down: 0.1, scale_up: 0.1 }
    }
}

impl Tolerances {
    pub fn is_within(&self, usage_ratio: f64) -> bool {
        (1.0 - self.scale_down) <= usage_ratio && usage_ratio <= (1.0 + self.scale_up)
    }
}

#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum HpaError {
    #[error("unable to get metrics for resource {0}: no metrics returned from resource metrics API")]
    NoMetrics(&'static str),
    #[error("no pods returned by selector while calculating replica count")]
    NoPods,
    #[error("did not receive metrics for targeted pods (pods might be unready)")]
    NoReadyMetrics,
    #[error("missing request for {resource} in container of Pod {pod}")]
    MissingRequest { resource: &'static str, pod: String },
    #[error("no metrics returned matched known pods")]
    DisjointMetrics,
    #[error("invalid metrics ({invalid} invalid out of {total}), first error is: {first}")]
    InvalidMetrics { invalid: usize, total: usize, first: Box<HpaError> },
}

#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct ReplicaCalculator {
    pub tolerances: Tolerances,
    /// `--horizontal-pod-autoscaler-cpu-initialization-period`, 5 minutes by default.
    pub cpu_initialization_period_s: f64,
    /// `--horizontal-pod-autoscaler-initial-readiness-delay`, 30 seconds by default.
    pub delay_of_initial_readiness_status_s: f64,
}

impl Default for ReplicaCalculator {
    fn default() -> Self {
        Self {
            tolerances: Tolerances::default(),
            cpu_initialization_period_s: 300.0,
            delay_of_initial_readiness_status_s: 30.0,
        }
    }
}

/// The calculator's answer: the proposed count, the current utilisation (integer percent of
/// requests) and the mean raw usage per pod (milli-units).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct ResourceReplicas {
    pub replicas: i32,
    pub utilization: i32,
    pub raw_average: i64,
}

type Metrics = BTreeMap<String, i64>;

/// Sum of usage over sum of requests as a truncated integer percentage, over pods present in
/// both maps; a pod with a metric but no request is ignored ("extraneous metric").
pub fn resource_utilization_ratio(
    metrics: &Metrics,
    requests: &BTreeMap<String, i64>,
    target_utilization: i32,
) -> Result<(f64, i32, i64), HpaError> {
    let (mut metrics_total, mut requests_total, mut entities) = (0i64, 0i64, 0i64);
    for (pod, value) in metrics {
        if let Some(request) = requests.get(pod) {
            metrics_total += value;
            requests_total += request;
            entities += 1;
        }
    }
    if requests_total == 0 {
        return Err(HpaError::DisjointMetrics);
    }
    let utilization = ((metrics_total * 100) / requests_total) as i32;
    Ok((utilization as f64 / target_utilization as f64, utilization, metrics_total / entities))
}

/// Pods sorted into upstream's four groups.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct PodGroups {
    pub ready_count: usize,
    pub unready: Vec<String>,
    pub missing: Vec<String>,
    pub ignored: Vec<String>,
}

pub fn group_pods(
    now_s: f64,
    pods: &[PodState],
    metrics: &BTreeMap<String, MetricSample>,
    resource: ResourceName,
    cpu_initialization_period_s: f64,
    delay_of_initial_readiness_status_s: f64,
) -> PodGroups {
    let mut g = PodGroups::default();
    for pod in pods {
        if pod.deleting || pod.phase == Phase::Failed {
            g.ignored.push(pod.name.clone());
            continue;
        }
        if pod.phase == Phase::Pending {
            g.unready.push(pod.name.clone());
            continue;
        }
        let Some(metric) = metrics.get(&pod.name) else {
            g.missing.push(pod.name.clone());
            continue;
        };
        if resource == ResourceName::Cpu {
            let unready = match (pod.ready, pod.start_time_s) {
                (Some(cond), Some(start)) => {
                    if start + cpu_initialization_period_s > now_s {
                        // Within the initialisation period: ignore the sample if the pod is
                        // unready or no full metric window has passed since it became ready.
                        !cond.ready || metric.timestamp_s < cond.last_transition_s + metric.window_s
                    } else {
                        // Afterwards: ignore it only if the pod is unready and never was ready.
                        !cond.ready && start + delay_of_initial_readiness_status_s > cond.last_transition_s
                    }
                }
                _ => true,
            };
            if unready {
                g.unready.push(pod.name.clone());
                continue;
            }
        }
        g.ready_count += 1;
    }
    g
}

impl ReplicaCalculator {
    /// Upstream `GetResourceReplicas`.
    pub fn resource_replicas(
        &self,
        now_s: f64,
        current_replicas: i32,
        target_utilization: i32,
        resource: ResourceName,
        pods: &[PodState],
        samples: &BTreeMap<String, MetricSample>,
    ) -> Result<ResourceReplicas, HpaError> {
        if samples.is_empty() {
            return Err(HpaError::NoMetrics(resource.as_str()));
        }
        if pods.is_empty() {
            return Err(HpaError::NoPods);
        }
        let groups = group_pods(
            now_s,
            pods,
            samples,
            resource,
            self.cpu_initialization_period_s,
            self.delay_of_initial_readiness_status_s,
        );
        let mut metrics: Metrics = samples.iter().map(|(k, v)| (k.clone(), v.value_milli)).collect();
        for name in groups.ignored.iter().chain(&groups.unready) {
            metrics.remove(name);
        }
        if metrics.is_empty() {
            return Err(HpaError::NoReadyMetrics);
        }
        let mut requests = BTreeMap::new();
        for pod in pods {
            let request = pod
                .request_milli
                .ok_or_else(|| HpaError::MissingRequest { resource: resource.as_str(), pod: pod.name.clone() })?;
            requests.insert(pod.name.clone(), request);
        }
        let (usage_ratio, utilization, raw_average) =
            resource_utilization_ratio(&metrics, &requests, target_utilization)?;
        let answer = |replicas| Ok(ResourceReplicas { replicas, utilization, raw_average });

        let scale_up_with_unready = !groups.unready.is_empty() && usage_ratio > 1.0;
        if !scale_up_with_unready && groups.missing.is_empty() {
            if self.tolerances.is_within(usage_ratio) {
                return answer(current_replicas);
            }
            return answer((usage_ratio * groups.ready_count as f64).ceil() as i32);
        }
        if !groups.missing.is_empty() {
            if usage_ratio < 1.0 {
                // Scale-down: missing pods count as using their full request (or the target,
                // for targets above 100 %), which damps the scale-down.
                let fallback = (target_utilization as i64).max(100);
                for name in &groups.missing {
                    metrics.insert(name.clone(), requests[name] * fallback / 100);
                }
            } else if usage_ratio > 1.0 {
                // Scale-up: missing pods count as idle, which damps the scale-up.
                for name in &groups.missing {
                    metrics.insert(name.clone(), 0);
                }
            }
        }
        if scale_up_with_unready {
            for name in &groups.unready {
                metrics.insert(name.clone(), 0);
            }
        }
        let (new_ratio, _, _) = resource_utilization_ratio(&metrics, &requests, target_utilization)?;
        if self.tolerances.is_within(new_ratio)
            || (usage_ratio < 1.0 && new_ratio > 1.0)
            || (usage_ratio > 1.0 && new_ratio < 1.0)
        {
            // Too small a change, or the assumptions flipped the direction.
            return answer(current_replicas);
        }
        let new_replicas = (new_ratio * metrics.len() as f64).ceil() as i32;
        if (new_ratio < 1.0 && new_replicas > current_replicas) || (new_ratio > 1.0 && new_replicas < current_replicas)
        {
            return answer(current_replicas);
        }
        answer(new_replicas)
    }
}
