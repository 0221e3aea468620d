//! Builds an `aware_core::Observation` for an MPA's target from what the API server knows: the
//! scale subresource (desired replicas, pod selector), the pods (phase, readiness, requests,
//! restarts, OOM kills) and the resource metrics API (`metrics.k8s.io/v1beta1` PodMetrics,
//! served by metrics-server: the same usage source upstream HPA and VPA read).
//!
//! Request-level signals (arrival rate, throughput, latency) are not in the resource metrics API;
//! they come from the Prometheus backend (`crate::prometheus`). Here they are reported as absent
//! (`latency_*: None`, rates 0), which the MPA default does not read.

use std::collections::{BTreeMap, HashMap};

use aware_core::{ContainerResources, Observation, PodObservation, PodPhase, Resources};
use k8s_openapi::api::core::v1::{Container, Pod, ResourceRequirements};
use k8s_openapi::apimachinery::pkg::api::resource::Quantity;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use serde::Deserialize;

use crate::quantity::{self, QuantityError};

/// `metrics.k8s.io/v1beta1` PodMetrics, the fields read here.
#[derive(Debug, Clone, Deserialize, PartialEq)]
pub struct PodMetrics {
    pub metadata: MetricsMeta,
    #[serde(default)]
    pub containers: Vec<ContainerMetrics>,
}

#[derive(Debug, Clone, Deserialize, PartialEq)]
pub struct MetricsMeta {
    pub name: String,
}

#[derive(Debug, Clone, Deserialize, PartialEq)]
pub struct ContainerMetrics {
    pub name: String,
    #[serde(default)]
    pub usage: BTreeMap<String, Quantity>,
}

/// `metrics.k8s.io/v1beta1` PodMetricsList.
#[derive(Debug, Clone, Deserialize, PartialEq)]
pub struct PodMetricsList {
    #[serde(default)]
    pub items: Vec<PodMetrics>,
}

/// Usage of one pod summed over its containers: CPU cores and working-set bytes.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct PodUsage {
    pub cpu_cores: f64,
    pub memory_bytes: f64,
}

/// Sums each pod's container usage; a pod whose metrics cannot be parsed is an error naming it.
pub fn usage_by_pod(list: &PodMetricsList) -> Result<HashMap<String, PodUsage>, QuantityError> {
    let mut out = HashMap::new();
    for pod in &list.items {
        let mut usage = PodUsage { cpu_cores: 0.0, memory_bytes: 0.0 };
        for c in &pod.containers {
            if let Some(q) = c.usage.get("cpu") {
                usage.cpu_cores += quantity::cpu_millicores(q)? as f64 / 1000.0;
            }
            if let Some(q) = c.usage.get("memory") {
                usage.memory_bytes += quantity::memory_bytes(q)? as f64;
            }
        }
        out.insert(pod.metadata.name.clone(), usage);
    }
    Ok(out)
}

fn seconds(t: &Time) -> f64 {
    t.0.as_millisecond() as f64 / 1000.0
}

/// Requests and limits summed over a pod's containers; the name is the first container's.
pub fn pod_resources(containers: &[Container]) -> Result<ContainerResources, QuantityError> {
    let name = containers.first().map(|c| c.name.clone()).unwrap_or_default();
    summed(name, containers.iter().map(|c| c.resources.as_ref()))
}

/// The resources a pod's containers run with: `status.containerStatuses[].resources` (reported
/// since in-place resize) when every container reports them, else the spec's. A resize in
/// flight, or a memory decrease the kubelet defers while the working set is above it, must not
/// read as a container running with its new limit (it would read as one at 100 %).
fn running_resources(pod: &Pod, containers: &[Container]) -> Result<ContainerResources, QuantityError> {
    let statuses = pod.status.as_ref().and_then(|s| s.container_statuses.as_deref()).unwrap_or_default();
    let reported: Option<Vec<&ResourceRequirements>> = containers
        .iter()
        .map(|c| statuses.iter().find(|s| s.name == c.name).and_then(|s| s.resources.as_ref()))
        .collect();
    match reported {
        Some(r) if !r.is_empty() => {
            let name = containers.first().map(|c| c.name.clone()).unwrap_or_default();
            summed(name, r.into_iter().map(Some))
        }
        _ => pod_resources(containers),
    }
}

fn summed<'a>(
    name: String,
    containers: impl Iterator<Item = Option<&'a ResourceRequirements>>,
) -> Result<ContainerResources, QuantityError> {
    let mut requests = Resources::default();
    let mut limits = Resources::default();
    for r in containers {
        let get = |m: Option<&BTreeMap<String, Quantity>>, k: &str| m.and_then(|m| m.get(k)).cloned();
        let req = r.and_then(|r| r.requests.as_ref());
        let lim = r.and_then(|r| r.limits.as_ref());
        // A limit without a request defaults the request to the limit (core/v1 defaulting).
        let req_cpu = get(req, "cpu").or_else(|| get(lim, "cpu"));
        let req_mem = get(req, "memory").or_else(|| get(lim, "memory"));
        requests.cpu_millicores += req_cpu.map(|q| quantity::cpu_millicores(&q)).transpose()?.unwrap_or(0);
        requests.memory_bytes += req_mem.map(|q| quantity::memory_bytes(&q)).transpose()?.unwrap_or(0);
        limits.cpu_millicores += get(lim, "cpu").map(|q| quantity::cpu_millicores(&q)).transpose()?.unwrap_or(0);
        limits.memory_bytes += get(lim, "memory").map(|q| quantity::memory_bytes(&q)).transpose()?.unwrap_or(0);
    }
    // No limit: report the request as the limit (usage/limit would otherwise divide by zero).
    if limits.cpu_millicores == 0 {
        limits.cpu_millicores = requests.cpu_millicores;
    }
    if limits.memory_bytes == 0 {
        limits.memory_bytes = requests.memory_bytes;
    }
    Ok(ContainerResources { name, requests, limits })
}

/// One pod as the metrics pipeline sees it. OOM kills count when the container's last
/// termination was `OOMKilled` and finished within the last interval; the memory recorded is
/// the request, as upstream VPA's OOM observer records it.
pub fn pod_observation(
    pod: &Pod,
    usage: Option<&PodUsage>,
    now_s: f64,
    interval_s: f64,
) -> Result<PodObservation, QuantityError> {
    let spec = pod.spec.as_ref();
    let status = pod.status.as_ref();
    let containers = spec.map(|s| s.containers.as_slice()).unwrap_or_default();
    let resources = running_resources(pod, containers)?;
    let ready_condition = status
        .and_then(|s| s.conditions.as_ref())
        .and_then(|cs| cs.iter().find(|c| c.type_ == "Ready" && c.status == "True"));
    let node = spec.and_then(|s| s.node_name.clone());
    let phase = match (status.and_then(|s| s.phase.as_deref()), ready_condition, &node) {
        (_, Some(_), _) => PodPhase::Ready,
        (Some("Pending") | None, None, None) => PodPhase::Pending,
        _ => PodPhase::Starting,
    };
    let statuses = status.and_then(|s| s.container_statuses.as_ref());
    let restarts = statuses.map(|cs| cs.iter().map(|c| c.restart_count.max(0) as u32).sum()).unwrap_or(0);
    let oom = statuses.is_some_and(|cs| {
        cs.iter().any(|c| {
            let t = c.last_state.as_ref().and_then(|s| s.terminated.as_ref());
            t.is_some_and(|t| {
                t.reason.as_deref() == Some("OOMKilled")
                    && t.finished_at.as_ref().is_some_and(|f| now_s - seconds(f) <= interval_s)
            })
        })
    });
    let usable = phase != PodPhase::Pending;
    // The scheduler's last word on a pod it could not place.
    let unschedulable = status
        .and_then(|s| s.conditions.as_ref())
        .and_then(|cs| {
            cs.iter().find(|c| {
                c.type_ == "PodScheduled" && c.status == "False" && c.reason.as_deref() == Some("Unschedulable")
            })
        })
        .and_then(|c| c.message.as_deref())
        .and_then(aware_core::Unschedulable::from_message)
        .filter(|_| phase == PodPhase::Pending);
    Ok(PodObservation {
        name: pod.metadata.name.clone().unwrap_or_default(),
        phase,
        node,
        created_at_s: pod.metadata.creation_timestamp.as_ref().map(seconds).unwrap_or(now_s),
        ready_since_s: ready_condition.and_then(|c| c.last_transition_time.as_ref()).map(seconds),
        cpu_usage_cores: usage.filter(|_| usable).map(|u| u.cpu_cores),
        memory_working_set_bytes: usage.filter(|_| usable).map(|u| u.memory_bytes),
        resources: resources.clone(),
        allocated: None,
        restarts,
        oom_killed_at_bytes: oom.then_some(resources.requests.memory_bytes as f64),
        deleting: pod.metadata.deletion_timestamp.is_some(),
        custom_metrics: Default::default(),
        containers: Vec::new(),
        unschedulable,
    })
}

/// The whole observation for one target. Pods being deleted are left out (they no longer serve
/// and upstream's controllers skip them). The template is the newest pod's resources (the
/// Deployment's current template in steady state).
pub fn observation(
    app: &str,
    desired_replicas: u32,
    pods: &[Pod],
    usage: &HashMap<String, PodUsage>,
    now_s: f64,
    interval_s: f64,
) -> Result<Observation, QuantityError> {
    let live: Vec<&Pod> = pods.iter().filter(|p| p.metadata.deletion_timestamp.is_none()).collect();
    let mut observed = Vec::with_capacity(live.len());
    for pod in &live {
        let name = pod.metadata.name.as_deref().unwrap_or_default();
        observed.push(pod_observation(pod, usage.get(name), now_s, interval_s)?);
    }
    let template = observed
        .iter()
        .max_by(|a, b| a.created_at_s.total_cmp(&b.created_at_s))
        .map(|p| p.resources.clone())
        .unwrap_or_else(|| ContainerResources::guaranteed("", Resources::default()));
    let oom_events = observed.iter().filter(|p| p.oom_killed_at_bytes.is_some()).count() as u32;
    Ok(Observation {
        app: app.to_string(),
        time_s: now_s,
        interval_s,
        desired_replicas,
        template,
        pods: observed,
        arrival_rate: 0.0,
        throughput: 0.0,
        latency_mean_ms: None,
        latency_p99_ms: None,
        dropped_requests: 0,
        oom_events,
        io_utilisation: 0.0,
        network_utilisation: 0.0,
    })
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn pod(v: serde_json::Value) -> Pod {
        serde_json::from_value(v).unwrap()
    }

    const NOW: f64 = 1_767_225_600.0; // 2026-01-01T00:00:00Z

    #[test]
    fn phases_requests_and_oom_kills() {
        let pending = pod(json!({
            "metadata": {"name": "p", "creationTimestamp": "2025-12-31T23:59:00Z"},
            "spec": {"containers": [{"name": "c", "resources": {"limits": {"cpu": "500m", "memory": "1Gi"}}}]},
            "status": {"phase": "Pending"},
        }));
        let o = pod_observation(&pending, Some(&PodUsage { cpu_cores: 1.0, memory_bytes: 1.0 }), NOW, 15.0).unwrap();
        assert_eq!(o.phase, PodPhase::Pending);
        assert_eq!(o.cpu_usage_cores, None, "a pending pod has no usage");
        // A limit without a request defaults the request to the limit.
        assert_eq!(o.resources.requests, Resources::new(500, 1 << 30));
        assert_eq!(o.created_at_s, NOW - 60.0);
        assert_eq!(o.unschedulable, None, "not tried yet");
        // The scheduler's condition on a pod no node could take says why.
        let mut unschedulable = pending.clone();
        unschedulable.status = Some(serde_json::from_value(json!({"phase": "Pending", "conditions": [{
            "type": "PodScheduled", "status": "False", "reason": "Unschedulable",
            "message": "0/3 nodes are available: 3 Insufficient cpu, 1 Insufficient memory. preemption: 0/3 nodes are available: 3 No preemption victims found for incoming pod."}]})).unwrap());
        let o = pod_observation(&unschedulable, None, NOW, 15.0).unwrap();
        let why = aware_core::Unschedulable { nodes: 3, insufficient_cpu: 3, insufficient_memory: 1 };
        assert_eq!(o.unschedulable, Some(why));

        let oom = pod(json!({
            "metadata": {"name": "r"},
            "spec": {"nodeName": "n", "containers": [
                {"name": "a", "resources": {"requests": {"cpu": "100m", "memory": "64Mi"}}},
                {"name": "b", "resources": {"requests": {"cpu": "50m", "memory": "64Mi"}}}]},
            "status": {"phase": "Running", "conditions": [{"type": "Ready", "status": "False"}],
                "containerStatuses": [
                    {"name": "a", "ready": false, "restartCount": 2, "image": "i", "imageID": "",
                     "lastState": {"terminated": {"exitCode": 137, "reason": "OOMKilled", "finishedAt": "2025-12-31T23:59:50Z"}}},
                    {"name": "b", "ready": true, "restartCount": 1, "image": "i", "imageID": ""}]},
        }));
        let o = pod_observation(&oom, None, NOW, 15.0).unwrap();
        assert_eq!(o.phase, PodPhase::Starting);
        assert_eq!(o.restarts, 3);
        assert_eq!(o.resources.requests, Resources::new(150, 128 << 20), "containers are summed");
        assert_eq!(o.oom_killed_at_bytes, Some((128u64 << 20) as f64));
        // The same kill 40 s ago is outside a 15 s interval.
        assert_eq!(pod_observation(&oom, None, NOW + 30.0, 15.0).unwrap().oom_killed_at_bytes, None);
    }

    /// A pod whose status reports the resources its container runs with (a memory decrease the
    /// kubelet defers) is observed with those, not with the spec's new limit.
    #[test]
    fn a_deferred_resize_is_observed_with_the_running_resources() {
        let resized = pod(json!({
            "metadata": {"name": "r"},
            "spec": {"nodeName": "n", "containers": [{"name": "c", "resources": {"limits": {"cpu": "500m", "memory": "256Mi"}}}]},
            "status": {"phase": "Running", "conditions": [{"type": "Ready", "status": "True"}],
                "containerStatuses": [{"name": "c", "ready": true, "restartCount": 0, "image": "i", "imageID": "",
                    "resources": {"limits": {"cpu": "500m", "memory": "1Gi"}, "requests": {"cpu": "500m", "memory": "1Gi"}}}]},
        }));
        let o =
            pod_observation(&resized, Some(&PodUsage { cpu_cores: 0.1, memory_bytes: 512.0 * 1048576.0 }), NOW, 15.0)
                .unwrap();
        assert_eq!(o.resources.limits, Resources::new(500, 1 << 30));
        // Without a reported status the spec stands in (clusters before in-place resize).
        let mut old = resized.clone();
        old.status.as_mut().unwrap().container_statuses.as_mut().unwrap()[0].resources = None;
        assert_eq!(pod_observation(&old, None, NOW, 15.0).unwrap().resources.limits, Resources::new(500, 256 << 20));
    }

    #[test]
    fn observation_skips_terminating_pods_and_sums_usage() {
        let live = pod(json!({
            "metadata": {"name": "a", "creationTimestamp": "2025-12-31T23:00:00Z"},
            "spec": {"nodeName": "n", "containers": [{"name": "c", "resources": {"requests": {"cpu": "200m", "memory": "128Mi"}}}]},
            "status": {"phase": "Running", "conditions": [{"type": "Ready", "status": "True", "lastTransitionTime": "2025-12-31T23:01:00Z"}]},
        }));
        let mut going = live.clone();
        going.metadata.name = Some("b".into());
        going.metadata.deletion_timestamp = live.metadata.creation_timestamp.clone();
        let metrics: PodMetricsList =
            serde_json::from_value(json!({"items": [{"metadata": {"name": "a"}, "containers": [
            {"name": "c", "usage": {"cpu": "150m", "memory": "100Mi"}},
            {"name": "sidecar", "usage": {"cpu": "10m", "memory": "4Mi"}}]}]}))
            .unwrap();
        let usage = usage_by_pod(&metrics).unwrap();
        let obs = observation("ns/web", 2, &[live, going], &usage, NOW, 15.0).unwrap();
        assert_eq!(obs.pods.len(), 1);
        let p = &obs.pods[0];
        assert_eq!(p.phase, PodPhase::Ready);
        assert!((p.cpu_usage_cores.unwrap() - 0.16).abs() < 1e-12);
        assert_eq!(p.memory_working_set_bytes, Some((104u64 << 20) as f64));
        assert_eq!(p.ready_since_s, Some(NOW - 3540.0));
        assert_eq!(obs.template.requests, Resources::new(200, 128 << 20));
        assert_eq!(obs.desired_replicas, 2);
        obs.validate().unwrap();
    }
}
