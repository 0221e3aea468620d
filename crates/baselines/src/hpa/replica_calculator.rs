//! The HPA replica calculator, as upstream's `pkg/controller/podautoscaler/replica_calculator.go`
//! (Kubernetes 1.34) computes it: pods are grouped into ready, unready, missing-metric and
//! ignored (failed or terminating); utilisation is an integer percentage (truncated); missing or
//! unready pods are assumed to use whatever would damp the proposed change; and every metric type
//! the calculator serves (`Resource` utilisation or average value, `ContainerResource`, `Pods`,
//! `Object`, `External`) has its function here. Overflowing counts saturate at `i32::MAX` and
//! usages at `i64::MAX`, as upstream does since it guards those conversions.

use std::collections::{BTreeMap, BTreeSet};

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

/// Where a container sits in the pod spec.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, Default)]
#[serde(rename_all = "snake_case")]
pub enum ContainerKind {
    /// `spec.containers`.
    #[default]
    Regular,
    /// `spec.initContainers` that run to completion: not counted in the pod's request.
    Init,
    /// `spec.initContainers` with `restartPolicy: Always` (sidecars): counted.
    Sidecar,
}

/// One container's request for the resource the HPA is computing for.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ContainerRequest {
    pub name: String,
    pub kind: ContainerKind,
    /// Milli-units (millicores, or bytes × 1000); `None` when the container sets no request.
    pub request_milli: Option<i64>,
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
    pub containers: Vec<ContainerRequest>,
    /// The pod-level request (`spec.resources`, feature `PodLevelResources`), milli-units.
    pub pod_request_milli: Option<i64>,
}

impl PodState {
    /// A running, ready pod with one container `main` requesting `request_milli`.
    pub fn single(name: impl Into<String>, request_milli: Option<i64>) -> Self {
        PodState {
            name: name.into(),
            phase: Phase::Running,
            deleting: false,
            start_time_s: Some(0.0),
            ready: Some(ReadyCondition { ready: true, last_transition_s: 0.0 }),
            containers: vec![ContainerRequest { name: "main".into(), kind: ContainerKind::Regular, request_milli }],
            pod_request_milli: None,
        }
    }
}

/// A metrics sample for one pod: its value (milli-units), when it was taken and over what window.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct MetricSample {
    pub value_milli: i64,
    pub timestamp_s: f64,
    pub window_s: f64,
}

/// What the resource metrics API returns for one pod: per-container usage (`None`: the
/// container has no sample for the resource).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct PodMetrics {
    pub timestamp_s: f64,
    pub window_s: f64,
    pub containers: Vec<(String, Option<i64>)>,
}

/// Upstream's metrics client (`getPodMetrics` / `getContainerMetrics`): the pod's sum over its
/// containers (no sample if any container lacks one), or one container's value (no sample if the
/// pod has no such container or it has no value).
pub fn resource_metric_info(
    raw: &BTreeMap<String, PodMetrics>,
    container: Option<&str>,
) -> BTreeMap<String, MetricSample> {
    let mut out = BTreeMap::new();
    for (pod, m) in raw {
        let containers = m.containers.iter().map(|(n, v)| (n.as_str(), *v));
        if let Some(value_milli) = pod_metric_value(containers, container) {
            out.insert(pod.clone(), MetricSample { value_milli, timestamp_s: m.timestamp_s, window_s: m.window_s });
        }
    }
    out
}

/// One pod's sample in [`resource_metric_info`], from its containers' `(name, usage)`: the
/// named container's usage, or the sum over all of them (none if any lacks one, or there are
/// none).
pub fn pod_metric_value<'a>(
    containers: impl IntoIterator<Item = (&'a str, Option<i64>)>,
    container: Option<&str>,
) -> Option<i64> {
    let mut containers = containers.into_iter();
    match container {
        Some(c) => containers.find(|(n, _)| *n == c).and_then(|(_, v)| v),
        None => {
            let mut sum = None;
            for (_, v) in containers {
                sum = Some(sum.unwrap_or(0i64).saturating_add(v?));
            }
            sum
        }
    }
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
/// `[1 − down, 1 + up]` (both 0.1 by default, `--horizontal-pod-autoscaler-tolerance`; per HPA
/// through `behavior.scale{Up,Down}.tolerance`).
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

/// Upstream's error texts, so a dry run can show exactly what the controller would log.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[non_exhaustive]
pub enum HpaError {
    #[error("unable to get metrics for resource {0}: no metrics returned from resource metrics API")]
    NoMetrics(&'static str),
    #[error("unable to get metric {0}: no metrics returned from custom metrics API")]
    NoCustomMetrics(String),
    #[error("no pods returned by selector while calculating replica count")]
    NoPods,
    #[error("did not receive metrics for targeted pods (pods might be unready)")]
    NoReadyMetrics,
    #[error("missing request for {resource} in container {container} of Pod {pod}")]
    MissingRequest { resource: &'static str, container: String, pod: String },
    #[error("container {container} not found in Pod {pod}")]
    ContainerNotFound { container: String, pod: String },
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
    /// Feature gate `PodLevelResources` (beta, on by default since Kubernetes 1.34): a pod-level
    /// request replaces the sum of its containers' requests.
    pub pod_level_resources: bool,
}

impl Default for ReplicaCalculator {
    fn default() -> Self {
        Self {
            tolerances: Tolerances::default(),
            cpu_initialization_period_s: 300.0,
            delay_of_initial_readiness_status_s: 30.0,
            pod_level_resources: true,
        }
    }
}

/// The calculator's answer for a utilisation target: the proposed count, the current
/// utilisation (integer percent of requests) and the mean raw usage per pod (milli-units).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct ResourceReplicas {
    pub replicas: i32,
    pub utilisation: i32,
    pub raw_average: i64,
}

/// The calculator's answer for a value target: the proposed count and the usage it compared
/// (milli-units: per pod for average targets, total for `Object`/`External` value targets).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct MetricReplicas {
    pub replicas: i32,
    pub usage: i64,
}

/// A metric or request per pod, keyed by the pod's name as the view holds it: the calculator
/// builds these once per sync for every pod, so it borrows the names instead of copying them.
type ByPod<'a> = BTreeMap<&'a str, i64>;

/// `ceil(x)` as an `int32`, saturating instead of overflowing (upstream's guarded conversion).
pub fn ceil_to_i32(x: f64) -> i32 {
    let c = x.ceil();
    if c.is_nan() {
        0
    } else if c >= i32::MAX as f64 {
        i32::MAX
    } else if c <= i32::MIN as f64 {
        i32::MIN
    } else {
        c as i32
    }
}

/// Sum of usage over sum of requests as a truncated integer percentage, over pods present in
/// both maps; a pod with a metric but no request is ignored ("extraneous metric").
/// Upstream `GetResourceUtilizationRatio`.
pub fn resource_utilisation_ratio<K: Ord>(
    metrics: &BTreeMap<K, i64>,
    requests: &BTreeMap<K, i64>,
    target_utilisation: i32,
) -> Result<(f64, i32, i64), HpaError> {
    let (mut metrics_total, mut requests_total, mut entities) = (0i128, 0i128, 0i128);
    // Both maps are sorted by pod: one pass pairs them (integer sums, so the order of the
    // pairs does not matter).
    let mut requests = requests.iter().peekable();
    for (pod, value) in metrics {
        while requests.next_if(|(r, _)| *r < pod).is_some() {}
        if let Some((_, request)) = requests.next_if(|(r, _)| *r == pod) {
            metrics_total += *value as i128;
            requests_total += *request as i128;
            entities += 1;
        }
    }
    if requests_total == 0 {
        return Err(HpaError::DisjointMetrics);
    }
    let utilisation = ((metrics_total * 100) / requests_total).clamp(i32::MIN as i128, i32::MAX as i128) as i32;
    let raw = (metrics_total / entities).clamp(i64::MIN as i128, i64::MAX as i128) as i64;
    Ok((utilisation as f64 / target_utilisation as f64, utilisation, raw))
}

/// Upstream `GetMetricUsageRatio`: the mean over all samples (listed pods or not) against the
/// target.
pub fn metric_usage_ratio<K>(metrics: &BTreeMap<K, i64>, target_usage: i64) -> (f64, i64) {
    let total: i128 = metrics.values().map(|&v| v as i128).sum();
    let usage = (total / metrics.len().max(1) as i128).clamp(i64::MIN as i128, i64::MAX as i128) as i64;
    (usage as f64 / target_usage as f64, usage)
}

/// Pods sorted into upstream's four groups.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct PodGroups {
    pub ready_count: usize,
    pub unready: BTreeSet<String>,
    pub missing: BTreeSet<String>,
    pub ignored: BTreeSet<String>,
}

/// Upstream `groupPods`. `resource` is `Some(Cpu)` for CPU metrics, where unready pods and pods
/// within their CPU initialisation period are set aside; `None` for custom metrics.
pub fn group_pods(
    now_s: f64,
    pods: &[PodState],
    metrics: &BTreeMap<String, MetricSample>,
    resource: Option<ResourceName>,
    cpu_initialization_period_s: f64,
    delay_of_initial_readiness_status_s: f64,
) -> PodGroups {
    let mut g = PodGroups::default();
    for pod in pods {
        if pod.deleting || pod.phase == Phase::Failed {
            g.ignored.insert(pod.name.clone());
            continue;
        }
        if pod.phase == Phase::Pending {
            g.unready.insert(pod.name.clone());
            continue;
        }
        let Some(metric) = metrics.get(&pod.name) else {
            g.missing.insert(pod.name.clone());
            continue;
        };
        if resource == Some(ResourceName::Cpu) {
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
                g.unready.insert(pod.name.clone());
                continue;
            }
        }
        g.ready_count += 1;
    }
    g
}

/// Upstream `calculatePodRequestsFromContainers`: the sum over regular containers and sidecars,
/// or one named container's request.
pub fn pod_request_from_containers(
    pod: &PodState,
    container: Option<&str>,
    resource: ResourceName,
) -> Result<i64, HpaError> {
    let mut request = 0i64;
    let mut found = false;
    for c in pod.containers.iter().filter(|c| c.kind != ContainerKind::Init) {
        if container.is_some_and(|want| want != c.name) {
            continue;
        }
        found = true;
        let r = c.request_milli.ok_or_else(|| HpaError::MissingRequest {
            resource: resource.as_str(),
            container: c.name.clone(),
            pod: pod.name.clone(),
        })?;
        request = request.saturating_add(r);
    }
    match container {
        Some(want) if !found => Err(HpaError::ContainerNotFound { container: want.to_string(), pod: pod.name.clone() }),
        _ => Ok(request),
    }
}

/// Upstream `calculateRequests`: per pod, the pod-level request when the feature is on, no
/// container is targeted and the pod sets one; the containers' otherwise.
pub fn calculate_requests(
    pods: &[PodState],
    container: Option<&str>,
    resource: ResourceName,
    pod_level_resources: bool,
) -> Result<BTreeMap<String, i64>, HpaError> {
    let requests = requests_by_pod(pods, container, resource, pod_level_resources)?;
    Ok(requests.into_iter().map(|(pod, r)| (pod.to_string(), r)).collect())
}

/// [`calculate_requests`] keyed by the pods' names as `pods` holds them.
fn requests_by_pod<'a>(
    pods: &'a [PodState],
    container: Option<&str>,
    resource: ResourceName,
    pod_level_resources: bool,
) -> Result<ByPod<'a>, HpaError> {
    let mut requests = Vec::with_capacity(pods.len());
    for pod in pods {
        let request = match pod.pod_request_milli {
            Some(r) if container.is_none() && pod_level_resources => r,
            _ => pod_request_from_containers(pod, container, resource)?,
        };
        requests.push((pod.name.as_str(), request));
    }
    // As a map built by inserting in order: a later pod of the same name replaces an earlier.
    Ok(requests.into_iter().collect())
}

/// Pods in phase Running whose Ready condition is true (upstream `getReadyPodsCount`).
pub fn ready_pods_count(pods: &[PodState]) -> Result<i64, HpaError> {
    if pods.is_empty() {
        return Err(HpaError::NoPods);
    }
    Ok(pods.iter().filter(|p| p.phase == Phase::Running && p.ready.is_some_and(|c| c.ready)).count() as i64)
}

/// A sum that saturates at `i64::MAX` instead of wrapping (upstream's external-metric sum).
fn saturating_sum(values: &[i64]) -> i64 {
    values.iter().fold(0i64, |acc, &v| acc.saturating_add(v))
}

impl ReplicaCalculator {
    /// Upstream `GetResourceReplicas`: a `Resource` or `ContainerResource` metric with an
    /// `averageUtilization` target (percent of requests).
    #[allow(clippy::too_many_arguments)]
    pub fn resource_replicas(
        &self,
        now_s: f64,
        current_replicas: i32,
        target_utilisation: i32,
        resource: ResourceName,
        container: Option<&str>,
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
            Some(resource),
            self.cpu_initialization_period_s,
            self.delay_of_initial_readiness_status_s,
        );
        let mut metrics: ByPod = samples.iter().map(|(k, v)| (k.as_str(), v.value_milli)).collect();
        for name in groups.ignored.iter().chain(&groups.unready) {
            metrics.remove(name.as_str());
        }
        if metrics.is_empty() {
            return Err(HpaError::NoReadyMetrics);
        }
        let requests = requests_by_pod(pods, container, resource, self.pod_level_resources)?;
        let (usage_ratio, utilisation, raw_average) =
            resource_utilisation_ratio(&metrics, &requests, target_utilisation)?;
        let answer = |replicas| Ok(ResourceReplicas { replicas, utilisation, raw_average });

        let scale_up_with_unready = !groups.unready.is_empty() && usage_ratio > 1.0;
        if !scale_up_with_unready && groups.missing.is_empty() {
            if self.tolerances.is_within(usage_ratio) {
                return answer(current_replicas);
            }
            return answer(ceil_to_i32(usage_ratio * groups.ready_count as f64));
        }
        if !groups.missing.is_empty() {
            if usage_ratio < 1.0 {
                // Scale-down: missing pods count as using their full request (or the target,
                // for targets above 100 %), which damps the scale-down.
                let fallback = (target_utilisation as i64).max(100);
                for name in &groups.missing {
                    let request = requests.get(name.as_str()).copied().unwrap_or(0);
                    metrics.insert(name, request.saturating_mul(fallback) / 100);
                }
            } else if usage_ratio > 1.0 {
                // Scale-up: missing pods count as idle, which damps the scale-up.
                for name in &groups.missing {
                    metrics.insert(name, 0);
                }
            }
        }
        if scale_up_with_unready {
            for name in &groups.unready {
                metrics.insert(name, 0);
            }
        }
        let (new_ratio, _, _) = resource_utilisation_ratio(&metrics, &requests, target_utilisation)?;
        if self.tolerances.is_within(new_ratio)
            || (usage_ratio < 1.0 && new_ratio > 1.0)
            || (usage_ratio > 1.0 && new_ratio < 1.0)
        {
            // Too small a change, or the assumptions flipped the direction.
            return answer(current_replicas);
        }
        let new_replicas = ceil_to_i32(new_ratio * metrics.len() as f64);
        if (new_ratio < 1.0 && new_replicas > current_replicas) || (new_ratio > 1.0 && new_replicas < current_replicas)
        {
            return answer(current_replicas);
        }
        answer(new_replicas)
    }

    /// Upstream `GetRawResourceReplicas`: a `Resource` or `ContainerResource` metric with an
    /// `averageValue` target (milli-units per pod); CPU readiness rules apply.
    #[allow(clippy::too_many_arguments)]
    pub fn raw_resource_replicas(
        &self,
        now_s: f64,
        current_replicas: i32,
        target_usage_milli: i64,
        resource: ResourceName,
        pods: &[PodState],
        samples: &BTreeMap<String, MetricSample>,
    ) -> Result<MetricReplicas, HpaError> {
        if samples.is_empty() {
            return Err(HpaError::NoMetrics(resource.as_str()));
        }
        self.plain_metric_replicas(now_s, current_replicas, target_usage_milli, Some(resource), pods, samples)
    }

    /// Upstream `GetMetricReplicas`: a `Pods` metric with an `averageValue` target. Samples for
    /// pods the selector did not return still count in the average, as upstream.
    pub fn metric_replicas(
        &self,
        now_s: f64,
        current_replicas: i32,
        target_usage_milli: i64,
        metric_name: &str,
        pods: &[PodState],
        samples: &BTreeMap<String, MetricSample>,
    ) -> Result<MetricReplicas, HpaError> {
        if samples.is_empty() {
            return Err(HpaError::NoCustomMetrics(metric_name.to_string()));
        }
        self.plain_metric_replicas(now_s, current_replicas, target_usage_milli, None, pods, samples)
    }

    /// Upstream `calcPlainMetricReplicas`.
    fn plain_metric_replicas(
        &self,
        now_s: f64,
        current_replicas: i32,
        target_usage: i64,
        resource: Option<ResourceName>,
        pods: &[PodState],
        samples: &BTreeMap<String, MetricSample>,
    ) -> Result<MetricReplicas, HpaError> {
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
        let mut metrics: ByPod = samples.iter().map(|(k, v)| (k.as_str(), v.value_milli)).collect();
        for name in groups.ignored.iter().chain(&groups.unready) {
            metrics.remove(name.as_str());
        }
        if metrics.is_empty() {
            return Err(HpaError::NoReadyMetrics);
        }
        let (usage_ratio, usage) = metric_usage_ratio(&metrics, target_usage);
        let answer = |replicas| Ok(MetricReplicas { replicas, usage });
        let scale_up_with_unready = !groups.unready.is_empty() && usage_ratio > 1.0;
        if !scale_up_with_unready && groups.missing.is_empty() {
            if self.tolerances.is_within(usage_ratio) {
                return answer(current_replicas);
            }
            return answer(ceil_to_i32(usage_ratio * groups.ready_count as f64));
        }
        if !groups.missing.is_empty() {
            if usage_ratio < 1.0 {
                for name in &groups.missing {
                    metrics.insert(name, target_usage);
                }
            } else if usage_ratio > 1.0 {
                for name in &groups.missing {
                    metrics.insert(name, 0);
                }
            }
        }
        if scale_up_with_unready {
            for name in &groups.unready {
                metrics.insert(name, 0);
            }
        }
        let (new_ratio, _) = metric_usage_ratio(&metrics, target_usage);
        if self.tolerances.is_within(new_ratio)
            || (usage_ratio < 1.0 && new_ratio > 1.0)
            || (usage_ratio > 1.0 && new_ratio < 1.0)
        {
            return answer(current_replicas);
        }
        let new_replicas = ceil_to_i32(new_ratio * metrics.len() as f64);
        if (new_ratio < 1.0 && new_replicas > current_replicas) || (new_ratio > 1.0 && new_replicas < current_replicas)
        {
            return answer(current_replicas);
        }
        answer(new_replicas)
    }

    /// Upstream `getUsageRatioReplicaCount`: ready pods × ratio, or `ceil(ratio)` from zero.
    fn usage_ratio_replica_count(
        &self,
        current_replicas: i32,
        usage_ratio: f64,
        pods: &[PodState],
    ) -> Result<i32, HpaError> {
        if current_replicas != 0 {
            if self.tolerances.is_within(usage_ratio) {
                return Ok(current_replicas);
            }
            let ready = ready_pods_count(pods)?;
            Ok(ceil_to_i32(usage_ratio * ready as f64))
        } else {
            Ok(ceil_to_i32(usage_ratio))
        }
    }

    /// Upstream `GetObjectMetricReplicas`: an `Object` metric with a `value` target.
    pub fn object_metric_replicas(
        &self,
        current_replicas: i32,
        target_usage: i64,
        usage: i64,
        pods: &[PodState],
    ) -> Result<MetricReplicas, HpaError> {
        let ratio = usage as f64 / target_usage as f64;
        let replicas = self.usage_ratio_replica_count(current_replicas, ratio, pods)?;
        Ok(MetricReplicas { replicas, usage })
    }

    /// Upstream `GetObjectPerPodMetricReplicas`: an `Object` metric with an `averageValue` target.
    pub fn object_per_pod_metric_replicas(
        &self,
        status_replicas: i32,
        target_average: i64,
        usage: i64,
    ) -> MetricReplicas {
        self.per_pod_replicas(status_replicas, target_average, usage)
    }

    /// Upstream `GetExternalMetricReplicas`: the sum of an `External` metric's series against a
    /// `value` target.
    pub fn external_metric_replicas(
        &self,
        current_replicas: i32,
        target_usage: i64,
        values: &[i64],
        pods: &[PodState],
    ) -> Result<MetricReplicas, HpaError> {
        let usage = saturating_sum(values);
        let ratio = usage as f64 / target_usage as f64;
        let replicas = self.usage_ratio_replica_count(current_replicas, ratio, pods)?;
        Ok(MetricReplicas { replicas, usage })
    }

    /// Upstream `GetExternalPerPodMetricReplicas`: an `External` metric with an `averageValue`
    /// target.
    pub fn external_per_pod_metric_replicas(
        &self,
        status_replicas: i32,
        target_per_pod: i64,
        values: &[i64],
    ) -> MetricReplicas {
        self.per_pod_replicas(status_replicas, target_per_pod, saturating_sum(values))
    }

    fn per_pod_replicas(&self, status_replicas: i32, target_per_pod: i64, usage: i64) -> MetricReplicas {
        let mut replicas = status_replicas;
        let ratio = usage as f64 / (target_per_pod as f64 * replicas as f64);
        if !self.tolerances.is_within(ratio) {
            replicas = ceil_to_i32(usage as f64 / target_per_pod as f64);
        }
        // `as` saturates, where upstream's unguarded conversion would wrap.
        let usage = (usage as f64 / status_replicas as f64).ceil() as i64;
        MetricReplicas { replicas, usage }
    }
}
