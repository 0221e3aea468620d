//! What a backend reports about one workload after a control interval.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use crate::recommendation::{ContainerResources, Resources};

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum PodPhase {
    /// Not scheduled: no node had room for its requests.
    Pending,
    /// Scheduled, container starting or restarting; not yet serving traffic.
    Starting,
    /// Passing readiness; receives traffic.
    Ready,
    /// Terminated with a failure (Kubernetes phase `Failed`); no longer counted as a replica.
    Failed,
}

/// One pod as the metrics pipeline sees it. Usage is `None` when no metric sample exists
/// (pending pods, or a scrape that failed): absence is explicit, never a silent zero.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PodObservation {
    pub name: String,
    pub phase: PodPhase,
    pub node: Option<String>,
    /// When the pod object was created, seconds on the backend clock.
    pub created_at_s: f64,
    /// When the pod last became ready; HPA's CPU-initialisation rules need it.
    pub ready_since_s: Option<f64>,
    pub cpu_usage_cores: Option<f64>,
    pub memory_working_set_bytes: Option<f64>,
    /// The resources the container runs with (`status.containerStatuses[].resources` since
    /// in-place resize), which utilisation is measured against; a resize still in flight (or a
    /// memory decrease deferred while the working set is above it) shows here once applied.
    pub resources: ContainerResources,
    /// The requests the node holds for the pod (`status.containerStatuses[].allocatedResources`:
    /// the spec once a resize is admitted, before the container runs with it; a decrease the
    /// kubelet defers is already the smaller value) — what the bill counts. `None` when the
    /// backend does not report it: `resources.requests` stands in.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub allocated: Option<Resources>,
    pub restarts: u32,
    /// The memory usage at the last OOM kill in this interval, for VPA's OOM bump.
    pub oom_killed_at_bytes: Option<f64>,
    /// The pod has a deletion timestamp (it is terminating); HPA ignores it.
    #[serde(default)]
    pub deleting: bool,
    /// Samples of `Pods` metrics (custom metrics API) in the metric's unit, by metric name; a
    /// name not present means no sample.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub custom_metrics: BTreeMap<String, f64>,
    /// Per-container resources and usage for pods with several containers; when present,
    /// `resources` and the pod's usage are their sums.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub containers: Vec<ContainerObservation>,
    /// Why the scheduler could not place a pending pod at its last attempt (the pod's
    /// `PodScheduled=False` condition with reason `Unschedulable`); `None` for a pod placed,
    /// not yet tried, or where the backend does not say.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub unschedulable: Option<Unschedulable>,
}

/// The scheduler's account of a pod no node could take, as its condition's message gives it
/// ("0/5 nodes are available: 3 Insufficient cpu, 4 Insufficient memory."): of `nodes`, how
/// many lacked the CPU the pod requests and how many the memory (a node may lack both).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Unschedulable {
    pub nodes: u32,
    pub insufficient_cpu: u32,
    pub insufficient_memory: u32,
}

impl Unschedulable {
    /// Whether some node had the memory the pod requests but not its CPU: there a pod asking
    /// for less CPU could go. Only more nodes short of CPU than of memory proves it: the
    /// scheduler counts nodes an earlier filter rejected (a taint, an affinity) in neither.
    pub fn cpu_short_where_memory_fits(&self) -> bool {
        self.insufficient_cpu > self.insufficient_memory
    }

    /// Parses the scheduler's message ("0/5 nodes are available: 3 Insufficient cpu, 1 node(s)
    /// had untolerated taint ….") for the node count and the CPU and memory shortfalls; `None`
    /// where it does not start with the node count.
    pub fn from_message(message: &str) -> Option<Self> {
        // The preemption pass's sentence after it repeats counts of its own.
        let message = message.split(" preemption:").next().unwrap_or(message);
        let (counts, reasons) = message.split_once(':')?;
        let nodes = counts.trim().strip_prefix("0/")?.split_whitespace().next()?.parse().ok()?;
        let mut u = Self { nodes, insufficient_cpu: 0, insufficient_memory: 0 };
        for part in reasons.trim().trim_end_matches('.').split(',') {
            let mut words = part.split_whitespace();
            let (Some(n), Some("Insufficient"), Some(what)) = (words.next(), words.next(), words.next()) else {
                continue;
            };
            let Ok(n) = n.parse::<u32>() else { continue };
            match what.trim_end_matches('.') {
                "cpu" => u.insufficient_cpu = n,
                "memory" => u.insufficient_memory = n,
                _ => {}
            }
        }
        Some(u)
    }
}

/// One container of a pod, for pods with several containers.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ContainerObservation {
    pub name: String,
    pub requests: Resources,
    pub limits: Resources,
    /// `None`: the metrics API has no sample for this container.
    #[serde(default)]
    pub cpu_usage_cores: Option<f64>,
    #[serde(default)]
    pub memory_working_set_bytes: Option<f64>,
}

/// Counts derived from the pod list, the way `kubectl get deploy` shows them.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
pub struct ReplicaCounts {
    pub desired: u32,
    pub ready: u32,
    pub starting: u32,
    pub pending: u32,
}

/// One workload at the end of a control interval. Latency is `None` when no request completed
/// in the interval, so a policy can never mistake "nothing served" for "fast".
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Observation {
    pub app: String,
    /// Backend clock at the end of the interval, seconds.
    pub time_s: f64,
    /// Length of the measurement interval, seconds.
    pub interval_s: f64,
    pub desired_replicas: u32,
    /// The resources new pods get (the Deployment's template).
    pub template: ContainerResources,
    pub pods: Vec<PodObservation>,
    /// Offered load, requests per second.
    pub arrival_rate: f64,
    /// Completed requests per second.
    pub throughput: f64,
    pub latency_mean_ms: Option<f64>,
    pub latency_p99_ms: Option<f64>,
    /// Requests rejected, timed out or lost to a crash in the interval.
    pub dropped_requests: u64,
    pub oom_events: u32,
    /// Disk I/O bandwidth used over bandwidth available to the ready pods, in [0, 1].
    pub io_utilisation: f64,
    /// Network bandwidth used over bandwidth available to the ready pods, in [0, 1].
    pub network_utilisation: f64,
}

impl Observation {
    pub fn replica_counts(&self) -> ReplicaCounts {
        let mut counts = ReplicaCounts { desired: self.desired_replicas, ..Default::default() };
        for pod in &self.pods {
            match pod.phase {
                PodPhase::Pending => counts.pending += 1,
                PodPhase::Starting => counts.starting += 1,
                PodPhase::Ready => counts.ready += 1,
                PodPhase::Failed => {}
            }
        }
        counts
    }

    /// Mean CPU usage over limit across ready pods with a sample, in [0, 1]; `None` without
    /// samples.
    pub fn cpu_utilisation(&self) -> Option<f64> {
        self.mean_over_ready(|p| Some(p.cpu_usage_cores? / p.resources.limits.cpu_cores()))
    }

    /// Mean memory working set over limit across ready pods with a sample, in [0, 1].
    pub fn memory_utilisation(&self) -> Option<f64> {
        self.mean_over_ready(|p| Some(p.memory_working_set_bytes? / p.resources.limits.memory_bytes as f64))
    }

    fn mean_over_ready(&self, f: impl Fn(&PodObservation) -> Option<f64>) -> Option<f64> {
        let (sum, n) = self
            .pods
            .iter()
            .filter(|p| p.phase == PodPhase::Ready)
            .filter_map(f)
            .fold((0.0, 0usize), |(s, n), v| (s + v.clamp(0.0, 1.0), n + 1));
        (n > 0).then(|| sum / n as f64)
    }

    /// Mean CPU and memory utilisation (usage over limit, each in [0, 1]) over the ready pods
    /// that are not terminating and have both samples; `Ok(None)` when no pod is ready. A ready
    /// pod without a sample is set aside while it has been ready for at most
    /// [`USAGE_SAMPLE_GRACE_S`] (the metrics pipeline lags pod start-up, as the HPA allows);
    /// one ready for longer is refused ([`ObservationError::NoUsageSample`]), and so is an
    /// observation where no ready pod has a sample yet ([`ObservationError::NoUsageSampleYet`]).
    pub fn sampled_utilisation(&self) -> Result<Option<(f64, f64)>, ObservationError> {
        let (mut cpu, mut memory, mut n) = (0.0, 0.0, 0usize);
        let mut first_ready = None;
        for pod in self.pods.iter().filter(|p| p.phase == PodPhase::Ready && !p.deleting) {
            first_ready.get_or_insert(pod);
            match (pod.cpu_usage_cores, pod.memory_working_set_bytes) {
                (Some(c), Some(m)) => {
                    cpu += (c / pod.resources.limits.cpu_cores()).clamp(0.0, 1.0);
                    memory += (m / pod.resources.limits.memory_bytes as f64).clamp(0.0, 1.0);
                    n += 1;
                }
                _ => {
                    let recent = pod.ready_since_s.is_some_and(|t| self.time_s - t <= USAGE_SAMPLE_GRACE_S);
                    if !recent {
                        return Err(ObservationError::NoUsageSample { app: self.app.clone(), pod: pod.name.clone() });
                    }
                }
            }
        }
        match first_ready {
            None => Ok(None),
            Some(pod) if n == 0 => {
                Err(ObservationError::NoUsageSampleYet { app: self.app.clone(), pod: pod.name.clone() })
            }
            Some(_) => Ok(Some((cpu / n as f64, memory / n as f64))),
        }
    }

    /// Checks every number a policy could consume is finite and in range; the first problem is
    /// named so the caller can say why it fell back.
    pub fn validate(&self) -> Result<(), ObservationError> {
        let finite = |field: &str, value: f64| {
            if value.is_finite() {
                Ok(())
            } else {
                Err(ObservationError::NotFinite { app: self.app.clone(), field: field.to_string(), value })
            }
        };
        finite("time_s", self.time_s)?;
        finite("arrival_rate", self.arrival_rate)?;
        finite("throughput", self.throughput)?;
        finite("io_utilisation", self.io_utilisation)?;
        finite("network_utilisation", self.network_utilisation)?;
        if let Some(v) = self.latency_mean_ms {
            finite("latency_mean_ms", v)?;
        }
        if let Some(v) = self.latency_p99_ms {
            finite("latency_p99_ms", v)?;
        }
        for (field, value) in [("arrival_rate", self.arrival_rate), ("throughput", self.throughput)] {
            if value < 0.0 {
                return Err(ObservationError::NegativeRate { app: self.app.clone(), field: field.into(), value });
            }
        }
        for (field, value) in
            [("io_utilisation", self.io_utilisation), ("network_utilisation", self.network_utilisation)]
        {
            if value < 0.0 {
                return Err(ObservationError::NegativeUtilisation {
                    app: self.app.clone(),
                    field: field.into(),
                    value,
                });
            }
        }
        for (field, value) in [("latency_mean_ms", self.latency_mean_ms), ("latency_p99_ms", self.latency_p99_ms)] {
            if let Some(v) = value
                && v < 0.0
            {
                return Err(ObservationError::NegativeLatency { app: self.app.clone(), field: field.into(), value: v });
            }
        }
        for pod in &self.pods {
            // The field's name is written out only for the value that fails.
            for (field, value) in
                [("cpu_usage_cores", pod.cpu_usage_cores), ("memory_working_set_bytes", pod.memory_working_set_bytes)]
            {
                if let Some(v) = value
                    && !v.is_finite()
                {
                    finite(&format!("pods[{}].{field}", pod.name), v)?;
                }
            }
            for (field, value) in [
                ("cpu_usage_cores", pod.cpu_usage_cores),
                ("memory_working_set_bytes", pod.memory_working_set_bytes),
                ("oom_killed_at_bytes", pod.oom_killed_at_bytes),
            ] {
                if let Some(v) = value
                    && !(v.is_finite() && v >= 0.0)
                {
                    let field = format!("pods[{}].{field}", pod.name);
                    finite(&field, v)?;
                    return Err(ObservationError::NegativeUsage { app: self.app.clone(), field, value: v });
                }
            }
        }
        Ok(())
    }
}

/// Why an observation must not reach a policy: the first problem found, naming the app and the
/// field, so the decision log can say why the fallback acted.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[non_exhaustive]
pub enum ObservationError {
    #[error("{app}: {field} is {value}")]
    NotFinite { app: String, field: String, value: f64 },
    #[error("{app}: {field} is {value}, a negative request rate")]
    NegativeRate { app: String, field: String, value: f64 },
    #[error("{app}: {field} is {value}, a negative utilisation")]
    NegativeUtilisation { app: String, field: String, value: f64 },
    #[error("{app}: {field} is {value}: usage and memory are never negative")]
    NegativeUsage { app: String, field: String, value: f64 },
    /// A pod ready for longer than [`USAGE_SAMPLE_GRACE_S`] (or since a time the backend does
    /// not report) has no CPU or memory sample: the metrics pipeline lost it, and a mean
    /// without it would be a guess.
    #[error("{app}: ready pod {pod} has no usage sample")]
    NoUsageSample { app: String, pod: String },
    /// Every ready pod became ready so recently that none has a sample yet (`pod` is the first
    /// of them): a metrics pipeline that lags pod start-up.
    #[error("{app}: no ready pod has a usage sample yet (first ready pod: {pod})")]
    NoUsageSampleYet { app: String, pod: String },
    #[error("{app}: {field} is {value}, not a latency")]
    NegativeLatency { app: String, field: String, value: f64 },
}

/// How long after a pod became ready a missing usage sample is expected rather than lost:
/// the HPA's `--horizontal-pod-autoscaler-cpu-initialization-period` (5 minutes), within which
/// it sets aside a pod whose metrics predate its readiness.
pub const USAGE_SAMPLE_GRACE_S: f64 = 300.0;

#[cfg(test)]
mod tests {
    use super::Unschedulable;
    use proptest::prelude::*;

    /// One case per shape of the scheduler's message (kube-scheduler's `FitError`).
    #[test]
    fn the_schedulers_message_reads_as_its_counts() {
        let u = |nodes, insufficient_cpu, insufficient_memory| {
            Some(Unschedulable { nodes, insufficient_cpu, insufficient_memory })
        };
        let cases = [
            ("0/5 nodes are available: 3 Insufficient cpu, 4 Insufficient memory.", u(5, 3, 4)),
            ("0/3 nodes are available: 3 Insufficient cpu.", u(3, 3, 0)),
            (
                "0/2 nodes are available: 2 Insufficient memory. preemption: 0/2 nodes are available: 2 No preemption victims found for incoming pod.",
                u(2, 0, 2),
            ),
            (
                "0/4 nodes are available: 1 node(s) had untolerated taint {node-role.kubernetes.io/control-plane: }, 3 Insufficient cpu.",
                u(4, 3, 0),
            ),
            ("0/1 nodes are available: 1 node(s) didn't match Pod's node affinity/selector.", u(1, 0, 0)),
            ("no nodes available to schedule pods", None),
            ("", None),
        ];
        for (message, want) in cases {
            assert_eq!(Unschedulable::from_message(message), want, "{message}");
        }
        assert!(u(3, 3, 2).unwrap().cpu_short_where_memory_fits());
        assert!(!u(3, 3, 3).unwrap().cpu_short_where_memory_fits(), "memory short everywhere");
        assert!(!u(3, 0, 1).unwrap().cpu_short_where_memory_fits(), "CPU short nowhere");
        // The tainted node is in neither count: the three workers lack both.
        let tainted = "0/4 nodes are available: 1 node(s) had untolerated taint {node-role.kubernetes.io/control-plane: }, 3 Insufficient cpu, 3 Insufficient memory.";
        assert!(!Unschedulable::from_message(tainted).unwrap().cpu_short_where_memory_fits());
        // The preemption sentence's counts are not the scheduler's.
        let preempting = "0/3 nodes are available: 3 Insufficient cpu. preemption: 0/3 nodes are available: 2 Insufficient memory, 1 No preemption victims found for incoming pod.";
        assert_eq!(Unschedulable::from_message(preempting), u(3, 3, 0));
    }

    proptest! {
        #[test]
        fn any_message_reads_without_panicking(message in ".*") {
            let _ = Unschedulable::from_message(&message);
        }

        #[test]
        fn a_formatted_message_reads_back(nodes in 1u32..10_000, cpu in 0u32..10_000, memory in 0u32..10_000) {
            let message = format!("0/{nodes} nodes are available: {cpu} Insufficient cpu, {memory} Insufficient memory.");
            let u = Unschedulable::from_message(&message).unwrap();
            prop_assert_eq!(u, Unschedulable { nodes, insufficient_cpu: cpu, insufficient_memory: memory });
        }
    }
}
