//! The fast-mode simulated cluster: Deployments of single-container pods on nodes of finite
//! capacity, stepped one control interval at a time with the closed-form replica model.

use std::sync::Arc;

use aware_core::{
    AppId, Cluster, ClusterError, ContainerResources, Observation, PodObservation, PodPhase, Recommendation, Resources,
};
use rand::{Rng, SeedableRng};
use rand_distr::{Distribution, StandardNormal};
use rand_pcg::Pcg64Mcg;
use serde::{Deserialize, Serialize};

use std::collections::VecDeque;

use crate::app::{Allocation, AppSpec, STREAM_LOAD, STREAM_NOISE, stream_seed};
use crate::contention::cpu_share;
use crate::load::{LoadSource, LoadState, Trace};
use crate::queueing::{RHO_STEADY_CAP, Z99, gamma_p99, mixture_quantile, shared_queue};
use crate::replica::{ReplicaQueue, step_queue};
use crate::scenario::{Scenario, ScenarioKind};
use crate::schedule::NodeIndex;
use crate::segments::{REQUEST_SIZE_CV, RequestCost};

/// The simulator's one container name.
pub const CONTAINER: &str = "app";

/// Most replicas the simulator runs for one app (a recommendation above it is refused).
pub const MAX_SIMULATED_REPLICAS: u32 = 10_000;

/// Most nodes a simulated cluster has (the bound of the profile's `simulation.nodes`).
pub const MAX_NODES: usize = 1_000_000;

/// Why a configuration gives no cluster the simulator can hold.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[non_exhaustive]
pub enum NodeCountError {
    /// `nodes` is set above [`MAX_NODES`].
    #[error("nodes: {nodes} is above the simulator's {MAX_NODES}")]
    Nodes { nodes: usize },
    /// Sizing by `node_headroom` (with `nodes` unset) needs more than [`MAX_NODES`] nodes, or
    /// no number of them (a node of no cores or memory, a headroom that is not a number).
    #[error(
        "node_headroom: {headroom} × the applications' reference reservation needs {needed:e} nodes \
         of {node_cores} cores and {node_memory_bytes} bytes; the simulator holds at most {MAX_NODES} \
         (run fewer or smaller applications, or give larger nodes)"
    )]
    Sizing { headroom: f64, needed: f64, node_cores: f64, node_memory_bytes: u64 },
}

/// How a change of CPU or memory reaches running pods.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, Default)]
#[serde(rename_all = "kebab-case")]
pub enum VerticalUpdate {
    /// In-place resize (Kubernetes ≥ 1.33): running pods change limits without a restart when
    /// their node has room; otherwise they are recreated.
    #[default]
    InPlace,
    /// Rolling restart with maxSurge 1, maxUnavailable 0, as a Deployment template change does.
    Restart,
}

/// How a Deployment's requests reach its ready pods.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, Default)]
#[serde(rename_all = "kebab-case")]
#[non_exhaustive]
pub enum Dispatch {
    /// kube-proxy's random endpoint choice; every pod serves its requests by processor sharing
    /// over its cores (a request uses at most one core).
    #[default]
    Random,
    /// One first-come-first-served queue in front of pods that serve one request at a time
    /// (Knative's activator with `containerConcurrency: 1`, a work queue with consumers): the
    /// M/G/c queue that `validate-sim --mmc` checks against Erlang C.
    SharedQueue,
}

/// The simulator's knobs. Each default is the Kubernetes default or a typical production value,
/// named in its comment; `simulation:` in the profile overrides them (`SimConfig::with_profile`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct SimConfig {
    /// Control interval, seconds (the HPA sync period, `--horizontal-pod-autoscaler-sync-period`
    /// 15 s).
    pub interval_s: f64,
    /// Number of nodes; `None` sizes the cluster to `node_headroom` times the apps' reference
    /// allocation (under a scenario, the larger of it before and after the change:
    /// [`SimConfig::node_count`]).
    pub nodes: Option<usize>,
    pub node_cores: f64,
    pub node_memory_bytes: u64,
    /// Node capacity over the apps' reference reservation when `nodes` is `None` (under a
    /// scenario, over the larger of it before and after the change). 1.5: a cluster run at two
    /// thirds of its allocatable resources at the reference allocation, so peaks can leave pods
    /// pending (no cluster autoscaler).
    pub node_headroom: f64,
    /// From scheduling to ready: image pull, container start, readiness probe.
    pub startup_delay_s: f64,
    /// CPU a starting container burns (JIT, cache warm-up) as a fraction of its limit: the
    /// reason HPA ignores CPU samples during `--horizontal-pod-autoscaler-cpu-initialization-period`.
    pub startup_cpu_fraction: f64,
    /// How often metrics are scraped (metrics-server `--metric-resolution`, 15 s); rounded to a
    /// whole number of control intervals, at least one.
    pub scrape_interval_s: f64,
    /// Age of the newest metrics a policy sees, seconds, rounded to whole intervals: with the
    /// default 15 s a policy deciding at the end of interval k sees the metrics of interval
    /// k − 1 (the scrape, the metrics API and the controller's sync are not simultaneous).
    pub metrics_lag_s: f64,
    pub vertical_update: VerticalUpdate,
    /// In-place resize: from the request to the container running with its new limits (the
    /// kubelet's resize loop and the runtime's cgroup update), seconds.
    pub resize_latency_s: f64,
    /// A terminated pod stops receiving requests and finishes what it holds for this long
    /// (`terminationGracePeriodSeconds`, 30 s); what is left then is dropped.
    pub termination_grace_s: f64,
    /// Requests waiting longer than this are abandoned (and counted as dropped).
    pub request_timeout_s: f64,
    /// Multiplier on measurement noise (0 disables it; 1 is the documented default).
    pub noise: f64,
    /// Start every episode begun by `reset` at a time drawn from the seed, uniform over a week,
    /// so that policies see every hour of the day and every day of the week (a newly built
    /// cluster starts at t = 0, where a replayed trace starts). [`SimConfig::start`], when
    /// set, gives the start time instead.
    pub random_start: bool,
    pub dispatch: Dispatch,
    /// Coefficient of variation of per-request CPU work (gamma distributed).
    pub work_cv: f64,
    pub scenario: Option<Scenario>,
    /// Overrides every app's derived p99 SLO, milliseconds.
    pub slo_p99_ms: Option<f64>,
    /// CPU request of the pods an application starts with, as a fraction of their CPU limit
    /// (its reference allocation): 1 is the Guaranteed QoS class (request = limit, the
    /// default); below 1 the Burstable class, where the scheduler reserves the request, a pod
    /// may use up to its limit, and co-located pods contend when their usage over-commits a
    /// node. Memory is always requested in full. Sizing a cluster (`nodes` = `None`) counts
    /// the requests.
    pub cpu_request_ratio: f64,
    /// Where the run starts when it goes on from another ([`SimCluster::continuation`]): its
    /// clock and every app's deployment as the other ended, in place of a start time drawn or
    /// at 0 and the apps' reference allocations. `None`: a fresh start.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub start: Option<Continuation>,
}

/// The state a run that goes on from another takes up: the clock and each app's deployment
/// (desired replicas and pod template), running and ready. The traffic is the new run's own
/// (its seed, from this time on); requests in flight and metrics history start afresh.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Continuation {
    /// Seconds, the clock the run starts at (a non-finite or negative one counts as 0).
    pub time_s: f64,
    /// Per app, in the cluster's order; an app beyond the list starts at its reference.
    pub deployments: Vec<DeploymentState>,
    /// The scenario in force when the state was taken. A run going on with the same scenario
    /// from its first step had it in force before it began, and its first observation (the
    /// warm start's, from before that step) shows it; a run whose scenario begins at its first
    /// step without it (a change falling on an episode's start) shows it from the first
    /// interval's metrics, as a change at any other step.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub scenario: Option<ScenarioKind>,
}

/// One app's deployment as a [`Continuation`] carries it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct DeploymentState {
    pub replicas: u32,
    pub template: ContainerResources,
    /// How many of its pods at `template` were bound to a node when the state was taken
    /// (`None`: all of them). The run going on binds these first, every app's before any app's
    /// others, so pods that were running are not displaced by another app's pods that were
    /// pending.
    #[serde(default)]
    pub bound: Option<u32>,
    /// The resources of each bound pod of an older template: a rollout or an in-place resize
    /// its node could not admit, not through when the state was taken. The run going on binds
    /// them first too, serving, and the rollout goes on from there, as the cluster's would: an
    /// episode's end is no event in a cluster, and it must not complete (or drop) a rollout
    /// that no node had room for. (Until session 69 a continuation counted only as many of the
    /// template's pods as the capacity the old ones held fitted: an app whose pods the agent
    /// had asked to grow past any node's room lost every pod at the next episode, and pended
    /// for the whole of it on a full cluster.)
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub outdated: Vec<ContainerResources>,
}

impl DeploymentState {
    /// `replicas` pods of `template`, all bound (what an observation of a deployment says).
    pub fn at(replicas: u32, template: ContainerResources) -> Self {
        Self { replicas, template, bound: None, outdated: Vec::new() }
    }
}

impl Default for SimConfig {
    fn default() -> Self {
        Self {
            interval_s: 15.0,
            nodes: None,
            node_cores: 16.0,
            node_memory_bytes: 64 << 30,
            node_headroom: 1.5,
            startup_delay_s: 30.0,
            startup_cpu_fraction: 0.3,
            scrape_interval_s: 15.0,
            metrics_lag_s: 15.0,
            vertical_update: VerticalUpdate::InPlace,
            resize_latency_s: 5.0,
            termination_grace_s: 30.0,
            request_timeout_s: 30.0,
            noise: 1.0,
            random_start: true,
            dispatch: Dispatch::Random,
            work_cv: REQUEST_SIZE_CV,
            scenario: None,
            slo_p99_ms: None,
            cpu_request_ratio: 1.0,
            start: None,
        }
    }
}

impl SimConfig {
    /// This configuration with the profile's `simulation:` settings applied.
    pub fn with_profile(self, p: &aware_core::Simulation) -> Self {
        SimConfig {
            interval_s: p.interval_s,
            nodes: p.nodes.map(|n| n as usize),
            node_cores: p.node_cores,
            node_memory_bytes: p.node_memory_mib.saturating_mul(aware_core::MIB),
            node_headroom: p.node_headroom,
            startup_delay_s: p.startup_delay_s,
            startup_cpu_fraction: p.startup_cpu_fraction,
            scrape_interval_s: p.scrape_interval_s,
            metrics_lag_s: p.metrics_lag_s,
            resize_latency_s: p.resize_latency_s,
            termination_grace_s: p.termination_grace_s,
            request_timeout_s: p.request_timeout_s,
            random_start: p.random_start,
            ..self
        }
    }

    /// Whole intervals in `seconds` (rounded; 0 for a negative or NaN span).
    pub fn steps_of(&self, seconds: f64) -> u64 {
        (seconds / self.interval_s).round().max(0.0) as u64
    }

    /// The configured CPU request ratio, 1 unless it is in (0, 1).
    fn request_ratio(&self) -> f64 {
        let r = self.cpu_request_ratio;
        if r > 0.0 && r < 1.0 { r } else { 1.0 }
    }

    /// How many nodes a cluster running `apps` has: `nodes`, or (unset) `node_headroom` × the
    /// apps' reference reservation in nodes, at least 2. With a [`Scenario`], the reservation
    /// is the larger of the apps' as generated and as the scenario changes them (the reference
    /// allocation of the changed request cost under the changed load), each of CPU and memory:
    /// the cluster keeps its headroom over the workload it will run, so what a scenario
    /// measures is how a policy follows the change, not a cluster too small for any policy.
    /// Refused above [`MAX_NODES`], where the nodes would not fit in memory, and when the
    /// sizing gives no number (non-finite).
    pub fn node_count(&self, apps: &[AppSpec]) -> Result<usize, NodeCountError> {
        if let Some(nodes) = self.nodes {
            return if nodes > MAX_NODES { Err(NodeCountError::Nodes { nodes }) } else { Ok(nodes) };
        }
        let (mut cores, mut memory) = reservation(apps.iter().map(|a| a.reference));
        // A scenario without a step never takes effect; interference changes no workload.
        let change = self.scenario.filter(|s| s.at_step.is_some()).map(|s| s.kind);
        if let Some(kind) = change.filter(|k| *k != ScenarioKind::NodeInterference) {
            // An app absent at the start (no replicas, as a tenant not yet arrived) is sized
            // by its reference alone.
            let changed =
                apps.iter().map(|a| if a.reference.replicas == 0 { a.reference } else { a.reference_under(kind) });
            let (c, m) = reservation(changed);
            cores = cores.max(c);
            memory = memory.max(m);
        }
        let cores = cores * self.request_ratio();
        let h = self.node_headroom;
        let by_cpu = (h * cores / self.node_cores).ceil();
        let by_memory = (h * memory / self.node_memory_bytes as f64).ceil();
        let needed = by_cpu.max(by_memory);
        if needed.is_nan() || needed > MAX_NODES as f64 {
            return Err(NodeCountError::Sizing {
                headroom: h,
                needed,
                node_cores: self.node_cores,
                node_memory_bytes: self.node_memory_bytes,
            });
        }
        Ok((needed as usize).max(2))
    }
}

/// Cores and bytes `allocations` reserve in sum.
fn reservation(allocations: impl Iterator<Item = Allocation>) -> (f64, f64) {
    allocations.fold((0.0, 0.0), |(cores, bytes), a| {
        let replicas = a.replicas as f64;
        (cores + replicas * a.cpu_millicores as f64 / 1000.0, bytes + replicas * a.memory_bytes as f64)
    })
}

/// Stream of the episode start time (distinct from the app, load and noise streams).
const STREAM_START: u64 = 0x0053_5441_5254;
/// A week, seconds: the span episode start times are drawn from.
const WEEK_S: f64 = 7.0 * 86_400.0;

/// Relative standard deviations of measurement noise (metrics-server samples and latency
/// histograms are estimates, not truths).
const CPU_NOISE: f64 = 0.03;
const MEMORY_NOISE: f64 = 0.01;
const LATENCY_NOISE: f64 = 0.05;
/// CrashLoopBackOff: first delay, cap, and how long a pod must run to reset it.
const BACKOFF_INITIAL_S: f64 = 10.0;
const BACKOFF_MAX_S: f64 = 300.0;
const BACKOFF_RESET_S: f64 = 600.0;
/// Per-pod disk and network bandwidth, bytes/s, for I/O and network utilisation.
/// Disk bandwidth of one pod, bytes per second: `io_utilisation` is bytes moved over it.
pub const POD_DISK_BPS: f64 = 100e6;
/// Network bandwidth of one pod, bytes per second: `network_utilisation` is bytes sent over it.
pub const POD_NET_BPS: f64 = 125e6;

#[derive(Debug, Clone)]
struct Node {
    cores: f64,
    memory_bytes: u64,
    allocated_cpu_m: u64,
    allocated_memory: u64,
    /// CPU taken by a co-located tenant outside our control (interference scenario).
    interference_cores: f64,
    /// CPU the node's pods wanted this interval, cores.
    demand_cores: f64,
    /// Share of its limit each pod gets next interval, in (0, 1].
    contention: f64,
}

impl Node {
    fn fits(&self, r: &Resources) -> bool {
        self.allocated_cpu_m + r.cpu_millicores <= (self.cores * 1000.0) as u64
            && self.allocated_memory + r.memory_bytes <= self.memory_bytes
    }

    fn free_cpu_m(&self) -> i64 {
        (self.cores * 1000.0) as i64 - self.allocated_cpu_m as i64
    }

    fn free_memory(&self) -> i64 {
        self.memory_bytes.min(i64::MAX as u64) as i64 - self.allocated_memory.min(i64::MAX as u64) as i64
    }

    /// kube-scheduler's LeastAllocated score before placing (the same order as after placing,
    /// nodes being identical): the free fractions of CPU and memory, summed.
    fn free_score(&self) -> f64 {
        let cpu = 1.0 - self.allocated_cpu_m as f64 / (self.cores * 1000.0);
        let mem = 1.0 - self.allocated_memory as f64 / self.memory_bytes as f64;
        cpu + mem
    }
}

/// One pod. Laid out in declaration order, what every step reads first: a cluster of 10,000
/// apps holds hundreds of thousands of pods, and the step loop is bound by their cache lines.
#[derive(Debug, Clone)]
#[repr(C)]
struct Pod {
    /// Names the pod (`{app}-{id:05x}`, formed when observed) and orders the metrics.
    id: u64,
    generation: u64,
    node: Option<usize>,
    phase: PodPhase,
    restarts: u32,
    /// Consecutive crashes since the pod last ran for `BACKOFF_RESET_S`.
    crash_streak: u32,
    cpu_usage: f64,
    memory_ws: f64,
    ready_at: f64,
    ready_since: Option<f64>,
    resize_at: Option<f64>,
    oom_at_bytes: Option<f64>,
    queue: ReplicaQueue,
    /// What the container runs with now; differs from the spec while an in-place resize is
    /// on its way (`resize_at`) or a memory decrease is deferred.
    running: ContainerResources,
    /// The pod's spec: what its node reserves and what a policy sees.
    resources: ContainerResources,
    created_at: f64,
    /// Set once the pod was deleted: it drains until then and holds its node meanwhile.
    drain_until: Option<f64>,
    /// Why no node took the pod at its last scheduling attempt (the pod's `PodScheduled`
    /// condition); cleared once it is placed.
    unschedulable: Option<aware_core::Unschedulable>,
}

/// True (noise-free) outcome of one application over the last interval: what reports and
/// experiments score, as opposed to the noisy `Observation` a policy sees.
#[derive(Debug, Clone, Copy, PartialEq, Default, Serialize)]
pub struct AppStepStats {
    pub arrivals: f64,
    pub served: f64,
    pub dropped: f64,
    pub latency_mean_ms: Option<f64>,
    pub latency_p99_ms: Option<f64>,
    pub slo_p99_ms: f64,
    /// p99 over the SLO, nothing served while requests arrived, or ≥ 1 % dropped.
    pub slo_violated: bool,
    pub cpu_utilisation: Option<f64>,
    pub memory_utilisation: Option<f64>,
    pub io_utilisation: f64,
    pub network_utilisation: f64,
    pub ready_replicas: u32,
    /// Pods holding a node reservation (what the operator pays for).
    pub scheduled_replicas: u32,
    pub pending_replicas: u32,
    /// Pending pods × interval: how long pods waited for a node.
    pub pending_seconds: f64,
    /// Deleted pods still draining (they hold their node and are paid for).
    pub draining_replicas: u32,
    /// Requests lost when pods were deleted with work left after their grace period (part of
    /// `dropped`).
    pub dropped_on_termination: f64,
    /// Σ CPU requests of scheduled pods × interval.
    pub core_seconds: f64,
    /// Σ memory requests of scheduled pods × interval, GiB·s.
    pub memory_gib_seconds: f64,
    pub replica_seconds: f64,
    pub oom_events: u32,
    pub overloaded: bool,
}

#[derive(Debug, Clone)]
struct Deployment {
    desired: u32,
    template: ContainerResources,
    generation: u64,
    pods: Vec<Pod>,
    /// Pods `Ready` as of the last `reconcile`.
    ready: usize,
    /// Deleted pods finishing their in-flight work.
    draining: Vec<Pod>,
    /// Requests waiting in the shared queue (`Dispatch::SharedQueue`).
    shared_backlog: f64,
    /// Metrics as scraped, newest last; a policy sees the newest one old enough.
    history: VecDeque<Metrics>,
    load: LoadState,
    noise_rng: Pcg64Mcg,
    cost: RequestCost,
    slo_p99_ms: f64,
    stats: AppStepStats,
    measured_latency_mean_ms: Option<f64>,
    measured_latency_p99_ms: Option<f64>,
}

/// One scrape: what the metrics pipeline reports for an interval.
#[derive(Debug, Clone, Default)]
struct Metrics {
    /// End of the interval the metrics describe.
    window_end_s: f64,
    /// What each scheduled pod used, by pod id: the truth; the metrics pipeline's noise is
    /// applied when it is observed ([`PodUsage::measured`]).
    pods: Vec<PodUsage>,
    /// Seeds this scrape's measurement noise.
    noise_key: u64,
    arrival_rate: f64,
    throughput: f64,
    latency_mean_ms: Option<f64>,
    latency_p99_ms: Option<f64>,
    dropped: f64,
    oom_events: u32,
    io_utilisation: f64,
    network_utilisation: f64,
}

/// One ready pod's interval, kept so that the next identical pod copies it.
#[derive(Debug, Clone, Default)]
struct QueueMemo {
    valid: bool,
    limits: Resources,
    contention: f64,
    before: ReplicaQueue,
    after: ReplicaQueue,
    out: ReadyOutcome,
}

/// What one ready pod did in an interval, everything derived from its queue's step.
#[derive(Debug, Clone, Copy, Default)]
struct ReadyOutcome {
    step: crate::replica::ReplicaStep,
    /// Requests completed: the step's, less those in flight at an OOM kill.
    served: f64,
    /// Requests in flight at an OOM kill: counted as served by the queue, lost instead (every
    /// request is counted once).
    lost: f64,
    cpu_usage: f64,
    memory_ws: f64,
    /// What the pod would use without contention, for next interval's contention.
    demand_cores: f64,
    /// The working set's peak crossed the memory limit.
    killed: bool,
    cpu_utilisation: f64,
    memory_utilisation: f64,
}

impl ReadyOutcome {
    fn of(r: crate::replica::ReplicaStep, demand_cores: f64, limits: &Resources, cost: &RequestCost) -> Self {
        let (limit_cores, limit_mem) = (limits.cpu_cores(), limits.memory_bytes as f64);
        let cpu_usage = r.cpu_usage_cores.min(limit_cores);
        let peak = r.mean_in_flight + Z99 * r.var_in_flight.sqrt();
        let killed = cost.mem_base_bytes + cost.mem_per_request_bytes * peak > limit_mem;
        // A killed container's working set was at its limit when it died.
        let memory_ws =
            if killed { limit_mem } else { cost.mem_base_bytes + cost.mem_per_request_bytes * r.mean_in_flight };
        let lost = if killed { r.mean_in_flight.min(r.served) } else { 0.0 };
        ReadyOutcome {
            step: r,
            served: r.served - lost,
            lost,
            cpu_usage,
            memory_ws,
            demand_cores,
            killed,
            cpu_utilisation: cpu_usage / limit_cores,
            memory_utilisation: (memory_ws / limit_mem).min(1.0),
        }
    }
}

/// Adds `weight` served requests of response time (mean, variance) to the interval's mixture;
/// identical pods (the common case) extend the last component instead of adding one each.
fn push_component(components: &mut Vec<(f64, f64, f64)>, weight: f64, mean: f64, var: f64) {
    match components.last_mut() {
        Some(last) if last.1 == mean && last.2 == var => last.0 += weight,
        _ => components.push((weight, mean, var)),
    }
}

/// One pod's usage in one scrape, and the limits its measurement is clamped to.
#[derive(Debug, Clone, Copy)]
struct PodUsage {
    id: u64,
    /// `None` for a pod without a node (nothing to measure).
    usage: Option<(f64, f64)>,
    limits: Resources,
}

impl PodUsage {
    fn of(p: &Pod) -> Self {
        PodUsage { id: p.id, usage: p.node.map(|_| (p.cpu_usage, p.memory_ws)), limits: p.running.limits }
    }

    /// (CPU cores, memory bytes) as the metrics pipeline reports them: multiplicative noise of
    /// relative size `noise` × ([`CPU_NOISE`], [`MEMORY_NOISE`]), clamped to the limits. The
    /// noise is a pure function of the scrape and the pod (a counter-based draw), so it costs
    /// nothing until observed and is the same however often or in whatever order it is read.
    fn measured(&self, noise_key: u64, noise: f64) -> (Option<f64>, Option<f64>) {
        let Some((cpu, memory)) = self.usage else { return (None, None) };
        let (z_cpu, z_memory) = normal_pair(stream_seed(noise_key, self.id, STREAM_NOISE));
        (
            Some((cpu * (1.0 + noise * CPU_NOISE * z_cpu)).clamp(0.0, self.limits.cpu_cores())),
            Some((memory * (1.0 + noise * MEMORY_NOISE * z_memory)).clamp(0.0, self.limits.memory_bytes as f64)),
        )
    }
}

/// `APP-ID` with the id in at least five lowercase hex digits (`format!("{app}-{id:05x}")`),
/// without the formatting machinery: observe names every pod of every app every interval.
fn pod_name(app: &str, id: u64) -> String {
    let digits = (16 - id.leading_zeros() as usize / 4).max(5);
    let mut name = String::with_capacity(app.len() + 1 + digits);
    name.push_str(app);
    name.push('-');
    for k in (0..digits).rev() {
        name.push(char::from(b"0123456789abcdef"[((id >> (4 * k)) & 0xf) as usize]));
    }
    name
}

/// Two independent standard normals from 64 random bits (Box–Muller on two 32-bit uniforms).
fn normal_pair(bits: u64) -> (f64, f64) {
    let u1 = ((bits >> 32) as f64 + 0.5) / 4_294_967_296.0;
    let u2 = ((bits & 0xFFFF_FFFF) as f64 + 0.5) / 4_294_967_296.0;
    let r = (-2.0 * u1.ln()).sqrt();
    let (sin, cos) = (std::f64::consts::TAU * u2).sin_cos();
    (r * cos, r * sin)
}

/// The embedded simulator backend.
#[derive(Debug, Clone)]
pub struct SimCluster {
    config: SimConfig,
    /// Nodes every episode is built with ([`SimConfig::node_count`], at most [`MAX_NODES`]).
    node_count: usize,
    apps: Vec<AppSpec>,
    traces: Vec<Arc<Trace>>,
    seed: u64,
    nodes: Vec<Node>,
    node_index: NodeIndex,
    deployments: Vec<Deployment>,
    /// Clock at the start of the episode (the continuation's when `config.start` is set, else
    /// drawn from the seed when `random_start`).
    start_s: f64,
    step: u64,
    time_s: f64,
    next_pod_id: u64,
    /// Set when a reservation was released, so pending pods retry scheduling.
    capacity_freed: bool,
    /// Set whenever room is freed; cleared before each app's reconcile, so the pass knows which
    /// apps freed room the ones reconciled before them did not retry in.
    freed_in_pass: bool,
    scenario_active: Option<ScenarioKind>,
    /// Scratch space for per-replica latency moments, so stepping allocates nothing.
    latency_components: Vec<(f64, f64, f64)>,
    /// `node-NNNN`, as observations name the nodes (apart from them: the step loop touches
    /// nodes at random and wants them small).
    node_names: Vec<String>,
    /// The last pod's queue step within a deployment, reused by identical pods.
    queue_memo: QueueMemo,
}

/// `d` as a [`Continuation`] carries it: its bound pods of the current template counted, those
/// of an older one listed with what they hold.
fn deployment_state(d: &Deployment) -> DeploymentState {
    let bound = d.pods.iter().filter(|p| p.node.is_some());
    let current = bound.clone().filter(|p| p.generation == d.generation).count();
    DeploymentState {
        replicas: d.desired,
        template: d.template.clone(),
        bound: Some(current.min(u32::MAX as usize) as u32),
        // An old pod that is not serving (crashed, in back-off) the rollout deletes at once.
        outdated: bound
            .filter(|p| p.generation != d.generation && p.phase == PodPhase::Ready)
            .map(|p| p.resources.clone())
            .collect(),
    }
}

impl SimCluster {
    /// A cluster running `apps`, each starting Ready at its reference allocation (or, with
    /// [`SimConfig::start`], at the deployment it continues). `traces`, when
    /// given, replace the synthetic load (assigned round-robin). A configuration that would
    /// give more than [`MAX_NODES`] nodes (or no number of them) gets [`MAX_NODES`];
    /// [`SimCluster::try_new`] refuses it instead.
    pub fn new(apps: Vec<AppSpec>, traces: Vec<Arc<Trace>>, config: SimConfig, seed: u64) -> Self {
        let node_count = config.node_count(&apps).unwrap_or(MAX_NODES);
        Self::with_nodes(apps, traces, config, seed, node_count)
    }

    /// As [`SimCluster::new`], refusing a configuration that gives no cluster the simulator can
    /// hold ([`SimConfig::node_count`]).
    pub fn try_new(
        apps: Vec<AppSpec>,
        traces: Vec<Arc<Trace>>,
        config: SimConfig,
        seed: u64,
    ) -> Result<Self, NodeCountError> {
        let node_count = config.node_count(&apps)?;
        Ok(Self::with_nodes(apps, traces, config, seed, node_count))
    }

    fn with_nodes(
        apps: Vec<AppSpec>,
        traces: Vec<Arc<Trace>>,
        config: SimConfig,
        seed: u64,
        node_count: usize,
    ) -> Self {
        let mut c = SimCluster {
            config,
            node_count,
            apps,
            traces,
            seed,
            nodes: Vec::new(),
            node_index: NodeIndex::default(),
            deployments: Vec::new(),
            start_s: 0.0,
            step: 0,
            time_s: 0.0,
            next_pod_id: 0,
            capacity_freed: false,
            freed_in_pass: false,
            scenario_active: None,
            latency_components: Vec::new(),
            node_names: Vec::new(),
            queue_memo: QueueMemo::default(),
        };
        c.rebuild(false);
        c
    }

    pub fn apps(&self) -> &[AppSpec] {
        &self.apps
    }

    pub fn config(&self) -> &SimConfig {
        &self.config
    }

    /// The configured CPU request ratio, 1 unless it is in (0, 1).
    fn request_ratio(&self) -> f64 {
        self.config.request_ratio()
    }

    pub fn step_index(&self) -> u64 {
        self.step
    }

    pub fn node_count(&self) -> usize {
        self.nodes.len()
    }

    /// The true outcome of the last interval for `app`.
    pub fn stats(&self, app: AppId) -> &AppStepStats {
        &self.deployments[app].stats
    }

    pub fn slo_p99_ms(&self, app: AppId) -> f64 {
        self.deployments[app].slo_p99_ms
    }

    /// Clock at the start of the episode, seconds.
    pub fn start_time_s(&self) -> f64 {
        self.start_s
    }

    /// Where a run going on from this one starts ([`SimConfig::start`]): the clock now and
    /// every app's desired replicas and pod template.
    pub fn continuation(&self) -> Continuation {
        Continuation {
            time_s: self.time_s,
            deployments: self.deployments.iter().map(deployment_state).collect(),
            scenario: self.scenario_active,
        }
    }

    /// Age of the metrics `observe(app)` reports, seconds (`None` before the first scrape old
    /// enough to be visible).
    pub fn metrics_age_s(&self, app: AppId) -> Option<f64> {
        self.visible_metrics(app).map(|m| self.time_s - m.window_end_s)
    }

    fn visible_metrics(&self, app: AppId) -> Option<&Metrics> {
        let lag = self.config.steps_of(self.config.metrics_lag_s) as f64 * self.config.interval_s;
        let cutoff = self.time_s - lag + 1e-6 * self.config.interval_s;
        self.deployments.get(app)?.history.iter().rev().find(|m| m.window_end_s <= cutoff)
    }

    fn index_node(&mut self, n: usize) {
        let node = &self.nodes[n];
        self.node_index.set(n, node.free_cpu_m(), node.free_memory(), node.free_score());
    }

    fn release(&mut self, node: usize, requests: Resources) {
        let n = &mut self.nodes[node];
        n.allocated_cpu_m -= requests.cpu_millicores;
        n.allocated_memory -= requests.memory_bytes;
        self.index_node(node);
        self.capacity_freed = true;
        self.freed_in_pass = true;
    }

    /// Builds the episode from scratch; `draw_start` draws its start time (on `reset`).
    fn rebuild(&mut self, draw_start: bool) {
        let node_count = self.node_count;
        self.nodes = (0..node_count)
            .map(|_| Node {
                cores: self.config.node_cores,
                memory_bytes: self.config.node_memory_bytes,
                allocated_cpu_m: 0,
                allocated_memory: 0,
                interference_cores: 0.0,
                demand_cores: 0.0,
                contention: 1.0,
            })
            .collect();
        self.node_names = (0..node_count).map(|n| format!("node-{n:04}")).collect();
        let cpu_m = (self.config.node_cores * 1000.0) as i64;
        let memory = self.config.node_memory_bytes.min(i64::MAX as u64) as i64;
        self.node_index = NodeIndex::new(node_count, cpu_m, memory);
        let continued = self.config.start.as_ref().map(|c| if c.time_s.is_finite() { c.time_s } else { 0.0 });
        self.start_s = if let Some(t) = continued {
            (t / self.config.interval_s).round().max(0.0) * self.config.interval_s
        } else if draw_start && self.config.random_start {
            let u = (stream_seed(self.seed, u64::MAX, STREAM_START) >> 11) as f64 / (1u64 << 53) as f64;
            (u * WEEK_S / self.config.interval_s).floor() * self.config.interval_s
        } else {
            0.0
        };
        self.step = 0;
        self.time_s = self.start_s;
        self.next_pod_id = 0;
        self.scenario_active = None;
        self.deployments = Vec::with_capacity(self.apps.len());
        let ratio = self.request_ratio();
        for (i, app) in self.apps.iter().enumerate() {
            let source = if self.traces.is_empty() {
                LoadSource::Synthetic(app.load.clone())
            } else {
                LoadSource::Trace(self.traces[i % self.traces.len()].clone())
            };
            let load_rng = Pcg64Mcg::seed_from_u64(stream_seed(self.seed, i as u64, STREAM_LOAD));
            let noise_rng = Pcg64Mcg::seed_from_u64(stream_seed(self.seed, i as u64, STREAM_NOISE));
            let r = app.reference;
            let (desired, template) = match self.config.start.as_ref().and_then(|c| c.deployments.get(i)) {
                Some(d) => (d.replicas.min(MAX_SIMULATED_REPLICAS), d.template.clone()),
                None => (
                    r.replicas,
                    ContainerResources::burstable(CONTAINER, Resources::new(r.cpu_millicores, r.memory_bytes), ratio),
                ),
            };
            self.deployments.push(Deployment {
                desired,
                template,
                generation: 0,
                pods: Vec::new(),
                ready: 0,
                draining: Vec::new(),
                shared_backlog: 0.0,
                history: VecDeque::new(),
                load: LoadState::new(source, load_rng),
                noise_rng,
                cost: app.cost(),
                slo_p99_ms: self.config.slo_p99_ms.unwrap_or(app.slo_p99_ms),
                stats: AppStepStats::default(),
                measured_latency_mean_ms: None,
                measured_latency_p99_ms: None,
            });
        }
        // Start warm: the initial pods are already running and ready. Going on from another
        // run, the pods that were bound there are placed first, every app's, then the rest.
        // An app the continuation does not say of (`bound: None`, or beyond its list) counts
        // as all bound. Pods of an older template that were bound and serving go on serving,
        // and the rollout goes on from them.
        // (Taken out while the pods are placed, which borrow the cluster; put back below.)
        let start = self.config.start.take();
        if let Some(start) = &start {
            for d in 0..self.deployments.len() {
                let state = start.deployments.get(d);
                let outdated = state.map_or(&[][..], |s| &s.outdated[..]);
                if !outdated.is_empty() {
                    self.deployments[d].generation = 1;
                }
                for resources in outdated {
                    let mut pod = self.new_pod(d);
                    (pod.resources, pod.running, pod.generation) = (resources.clone(), resources.clone(), 0);
                    self.deployments[d].pods.push(pod);
                    let p = self.deployments[d].pods.len() - 1;
                    self.schedule(d, p);
                    if self.deployments[d].pods[p].node.is_none() {
                        // Packed otherwise than before, no node has its room: it goes.
                        self.deployments[d].pods.pop();
                    } else {
                        self.deployments[d].pods[p].phase = PodPhase::Ready;
                    }
                }
                let desired = self.deployments[d].desired;
                let bound = state.and_then(|s| s.bound).map_or(desired, |b| desired.min(b));
                self.add_pods(d, bound as usize);
            }
        }
        self.config.start = start;
        // A scenario already in force when the run begins shows in the warm start: on a fresh
        // cluster one from the first step, going on from another run one the other had in
        // force too ([`Continuation::scenario`]). Until session 79 it applied only at the
        // first step, so the first observation of every episode after a change showed the
        // workload before it (a continued run starts each with the change at step 0): `aware
        // demo`'s `load-high-to-low` read five times the load at each episode's start, and
        // every policy scaled up for it.
        if let Some(s) = self.config.scenario
            && s.at_step == Some(0)
            && self.config.start.as_ref().is_none_or(|c| c.scenario == Some(s.kind))
        {
            self.apply_scenario(s.kind);
        }
        for d in 0..self.deployments.len() {
            self.reconcile(d);
            for pod in &mut self.deployments[d].pods {
                if pod.node.is_some() {
                    pod.phase = PodPhase::Ready;
                    pod.ready_at = self.start_s;
                    pod.ready_since = Some(self.start_s);
                }
            }
            self.warm_metrics(d);
        }
    }

    /// The metrics history of a warm start: one scrape, as old as the metrics lag, of the pods
    /// serving the load's expected rate at the start time in steady state (no random draw, so
    /// the arrival streams are untouched).
    fn warm_metrics(&mut self, d: usize) {
        let dt = self.config.interval_s;
        let lag = self.config.steps_of(self.config.metrics_lag_s) as f64 * dt;
        let cv2 = self.config.work_cv * self.config.work_cv;
        let start = self.start_s;
        let timeout = self.config.request_timeout_s;
        let dep = &mut self.deployments[d];
        let rate = dep.load.expected_rate(start).max(0.0);
        let serving: Vec<usize> = (0..dep.pods.len()).filter(|&i| dep.pods[i].phase == PodPhase::Ready).collect();
        let mut m = Metrics { window_end_s: start - lag, arrival_rate: rate, ..Metrics::default() };
        if !serving.is_empty() {
            let per_pod = rate * dt / serving.len() as f64;
            let (mut served, mut mean, mut p99) = (0.0, 0.0, 0.0);
            for &i in &serving {
                let pod = &mut dep.pods[i];
                let limit = pod.running.limits.cpu_cores();
                let mut q = ReplicaQueue::default();
                let r = step_queue(&mut q, per_pod, per_pod, dt, &dep.cost, cv2, limit, timeout);
                pod.cpu_usage = r.cpu_usage_cores.min(limit);
                pod.memory_ws = (dep.cost.mem_base_bytes + dep.cost.mem_per_request_bytes * r.mean_in_flight)
                    .min(pod.running.limits.memory_bytes as f64);
                served += r.served;
                mean += r.served * r.latency_mean_s;
                p99 += r.served * gamma_p99(r.latency_mean_s, r.latency_var_s2);
            }
            m.throughput = served / dt;
            if served > 0.0 {
                m.latency_mean_ms = Some(mean / served * 1000.0);
                m.latency_p99_ms = Some(p99 / served * 1000.0);
            }
        }
        m.pods.extend(dep.pods.iter().map(PodUsage::of));
        m.noise_key = dep.noise_rng.next_u64();
        dep.history.clear();
        dep.history.push_back(m);
    }

    fn new_pod(&mut self, d: usize) -> Pod {
        self.next_pod_id += 1;
        let dep = &self.deployments[d];
        Pod {
            id: self.next_pod_id,
            node: None,
            phase: PodPhase::Pending,
            resources: dep.template.clone(),
            running: dep.template.clone(),
            resize_at: None,
            generation: dep.generation,
            created_at: self.time_s,
            ready_at: f64::INFINITY,
            ready_since: None,
            restarts: 0,
            crash_streak: 0,
            queue: ReplicaQueue::default(),
            drain_until: None,
            cpu_usage: 0.0,
            memory_ws: 0.0,
            oom_at_bytes: None,
            unschedulable: None,
        }
    }

    /// Places a pending pod on the least-allocated node with room; it stays pending otherwise.
    fn schedule(&mut self, d: usize, p: usize) {
        let req = self.deployments[d].pods[p].resources.requests;
        let best = self
            .node_index
            .best_fit(req.cpu_millicores.min(i64::MAX as u64) as i64, req.memory_bytes.min(i64::MAX as u64) as i64);
        if let Some(n) = best {
            debug_assert!(self.nodes[n].fits(&req));
            let node = &mut self.nodes[n];
            node.allocated_cpu_m += req.cpu_millicores;
            node.allocated_memory += req.memory_bytes;
            self.index_node(n);
            let pod = &mut self.deployments[d].pods[p];
            pod.node = Some(n);
            pod.phase = PodPhase::Starting;
            pod.ready_at = self.time_s + self.config.startup_delay_s;
            pod.unschedulable = None;
        } else {
            // As the scheduler's message counts them: nodes short of the CPU, of the memory.
            let short = |short: &dyn Fn(&Node) -> bool| self.nodes.iter().filter(|n| short(n)).count() as u32;
            let why = aware_core::Unschedulable {
                nodes: self.nodes.len() as u32,
                insufficient_cpu: short(&|n| n.allocated_cpu_m + req.cpu_millicores > (n.cores * 1000.0) as u64),
                insufficient_memory: short(&|n| n.allocated_memory + req.memory_bytes > n.memory_bytes),
            };
            self.deployments[d].pods[p].unschedulable = Some(why);
        }
    }

    /// Tries to place every pending pod of deployment `d`.
    fn retry_pending(&mut self, d: usize) {
        for p in 0..self.deployments[d].pods.len() {
            if self.deployments[d].pods[p].node.is_none() {
                self.schedule(d, p);
            }
        }
    }

    /// Deletes a pod. A serving pod drains: it gets no new requests, finishes what it holds for
    /// the grace period and keeps its node meanwhile; any other pod goes at once.
    fn remove_pod(&mut self, d: usize, p: usize) {
        let mut pod = self.deployments[d].pods.remove(p);
        if pod.phase == PodPhase::Ready && pod.node.is_some() && self.config.termination_grace_s > 0.0 {
            pod.drain_until = Some(self.time_s + self.config.termination_grace_s);
            self.deployments[d].draining.push(pod);
            return;
        }
        if let Some(n) = pod.node {
            self.release(n, pod.resources.requests);
        }
    }

    /// Index of the pod Kubernetes would delete first among those matching `filter`: pending,
    /// then starting, then the most recently created ready pod.
    fn victim(&self, d: usize, filter: impl Fn(&Pod) -> bool) -> Option<usize> {
        let rank = |p: &Pod| match p.phase {
            PodPhase::Pending => 0,
            PodPhase::Starting => 1,
            PodPhase::Ready => 2,
            // The simulator never produces failed pods; delete them first if it ever does.
            PodPhase::Failed => -1,
        };
        self.deployments[d]
            .pods
            .iter()
            .enumerate()
            .filter(|(_, p)| filter(p))
            // Newest first; pods created at the same instant go in reverse creation order.
            .min_by(|a, b| {
                rank(a.1).cmp(&rank(b.1)).then(b.1.created_at.total_cmp(&a.1.created_at)).then(b.0.cmp(&a.0))
            })
            .map(|(i, _)| i)
    }

    fn add_pods(&mut self, d: usize, count: usize) {
        for _ in 0..count {
            let pod = self.new_pod(d);
            self.deployments[d].pods.push(pod);
            let p = self.deployments[d].pods.len() - 1;
            self.schedule(d, p);
        }
    }

    /// Drives the pod set toward the Deployment spec: replica count and, on a template change
    /// in restart mode, a rolling update with one surge pod and no unavailability.
    fn reconcile(&mut self, d: usize) {
        let generation = self.deployments[d].generation;
        let desired = self.deployments[d].desired as usize;
        let is_old = move |p: &Pod| p.generation != generation;
        // One pass (this runs for every app every step): pods of an older template, serving or
        // not. Without a rollout both are zero and the rest is plain scaling.
        let (old_ready, old_other) = self.deployments[d]
            .pods
            .iter()
            .filter(|p| is_old(p))
            .fold((0, 0), |(r, o), p| if p.phase == PodPhase::Ready { (r + 1, o) } else { (r, o + 1) });
        // Old pods that are not serving can go at once.
        for _ in 0..old_other {
            if let Some(i) = self.victim(d, |p| is_old(p) && p.phase != PodPhase::Ready) {
                self.remove_pod(d, i);
            }
        }
        let new_count = self.deployments[d].pods.len() - old_ready;
        // During a rollout the new pods may use the one surge slot the old ones leave; new pods
        // that already exist are kept. Without old pods this is plain scaling to `desired`.
        let target_new =
            if old_ready == 0 { desired } else { (desired + 1).saturating_sub(old_ready).max(new_count).min(desired) };
        if new_count < target_new {
            self.add_pods(d, target_new - new_count);
        }
        for _ in target_new..new_count {
            if let Some(i) = self.victim(d, |p| !is_old(p)) {
                self.remove_pod(d, i);
            }
        }
        if old_ready > 0 {
            let new_ready =
                self.deployments[d].pods.iter().filter(|p| !is_old(p) && p.phase == PodPhase::Ready).count();
            let mut ready_total = old_ready + new_ready;
            while ready_total > desired {
                match self.victim(d, is_old) {
                    Some(i) => self.remove_pod(d, i),
                    None => break,
                }
                ready_total -= 1;
            }
        }
        // Pending pods retry only when something freed room.
        if self.capacity_freed {
            self.retry_pending(d);
        }
        let now = self.time_s;
        let dep = &mut self.deployments[d];
        dep.ready = 0;
        for pod in &mut dep.pods {
            // An in-place resize reaches the container after its latency; a memory decrease
            // waits while the working set is above the new limit (the kubelet defers it).
            // Intervals are the clock's resolution: a resize lands at the nearest boundary.
            if pod.resize_at.is_some_and(|t| t <= now + 0.5 * self.config.interval_s) {
                let shrinks_memory = pod.resources.limits.memory_bytes < pod.running.limits.memory_bytes;
                if shrinks_memory && pod.memory_ws > pod.resources.limits.memory_bytes as f64 {
                    // CPU changes now; memory keeps its old value until the working set fits.
                    let memory = (pod.running.requests.memory_bytes, pod.running.limits.memory_bytes);
                    pod.running = pod.resources.clone();
                    (pod.running.requests.memory_bytes, pod.running.limits.memory_bytes) = memory;
                } else {
                    pod.running = pod.resources.clone();
                    pod.resize_at = None;
                }
            }
            if pod.phase == PodPhase::Starting && pod.ready_at <= now {
                pod.phase = PodPhase::Ready;
                pod.ready_since = Some(now);
            }
            if pod.phase == PodPhase::Ready {
                dep.ready += 1;
                if pod.ready_since.is_some_and(|s| now - s >= BACKOFF_RESET_S) {
                    pod.crash_streak = 0;
                }
            }
        }
    }

    fn apply_scenario(&mut self, kind: ScenarioKind) {
        self.scenario_active = Some(kind);
        for (d, app) in self.apps.iter().enumerate() {
            let dep = &mut self.deployments[d];
            dep.cost = app.cost_under(kind);
            dep.load.scale = kind.load_scale();
        }
        if kind == ScenarioKind::NodeInterference {
            let affected = self.nodes.len().div_ceil(4);
            for node in &mut self.nodes[..affected] {
                node.interference_cores = node.cores * 0.5;
            }
        }
    }

    /// Simulates the traffic of one deployment over the interval starting now.
    fn step_traffic(&mut self, d: usize) {
        let dt = self.config.interval_s;
        let timeout = self.config.request_timeout_s;
        let noise = self.config.noise;
        let cv2 = self.config.work_cv * self.config.work_cv;
        let startup_cpu = self.config.startup_cpu_fraction;
        let dispatch = self.config.dispatch;
        let startup_delay = self.config.startup_delay_s;
        let now = self.time_s;
        let nodes = &mut self.nodes;
        let dep = &mut self.deployments[d];
        let arrivals = dep.load.arrivals(now, dt);
        let expected = dep.load.expected_arrivals();
        let cost = dep.cost;
        // Counted by `reconcile`, which ran last and set every pod's phase for this interval.
        let ready = dep.ready;
        debug_assert_eq!(ready, dep.pods.iter().filter(|p| p.phase == PodPhase::Ready).count());
        let mut st = AppStepStats { arrivals, slo_p99_ms: dep.slo_p99_ms, ..Default::default() };
        let (per_pod, per_pod_expected) =
            if ready > 0 { (arrivals / ready as f64, expected / ready as f64) } else { (0.0, 0.0) };
        if ready == 0 {
            st.dropped = arrivals + dep.shared_backlog;
            dep.shared_backlog = 0.0;
        }
        // The shared queue (if any) in front of the ready pods, solved for the whole Deployment.
        let shared = if dispatch == Dispatch::SharedQueue && ready > 0 {
            Some(step_shared_queue(dep, arrivals, expected, ready, dt, cv2, timeout, nodes))
        } else {
            None
        };
        let mut p99_override = None;
        // (weight, mean, var) of each serving pod's response time, seconds; reused across steps.
        let components = &mut self.latency_components;
        let memo = &mut self.queue_memo;
        memo.valid = false;
        components.clear();
        if let Some(sq) = shared {
            st.served += sq.served;
            st.dropped += sq.dropped;
            st.overloaded |= sq.overloaded;
            if sq.served > 0.0 {
                components.push((sq.served, sq.mean_s, sq.var_s2));
                p99_override = Some(sq.p99_s);
            }
        }
        let (mut cpu_util, mut mem_util, mut n_util) = (0.0, 0.0, 0usize);
        let (mut requested_m, mut requested_bytes) = (0u64, 0u64);
        for pod in dep.pods.iter_mut() {
            pod.oom_at_bytes = None;
            let Some(n) = pod.node else {
                st.pending_replicas += 1;
                continue;
            };
            st.scheduled_replicas += 1;
            requested_m += pod.resources.requests.cpu_millicores;
            requested_bytes += pod.resources.requests.memory_bytes;
            let limits = pod.running.limits;
            if pod.phase != PodPhase::Ready {
                pod.cpu_usage = startup_cpu * limits.cpu_cores();
                pod.memory_ws = cost.mem_base_bytes.min(limits.memory_bytes as f64);
                nodes[n].demand_cores += pod.cpu_usage;
                continue;
            }
            let contention = nodes[n].contention;
            // A ready pod's interval is a pure function of its limits, its node's contention and
            // its queue (every ready pod gets the same arrivals): identical pods, the common
            // case, in steady state or overloaded alike, reuse the previous one's outcome.
            let out = if shared.is_none()
                && memo.valid
                && memo.limits == limits
                && memo.contention == contention
                && memo.before == pod.queue
            {
                pod.queue.clone_from(&memo.after);
                memo.out
            } else {
                let cores = limits.cpu_cores() * contention;
                let (r, demand_cores) = if let Some(sq) = shared {
                    // Every pod of a shared queue is busy the same fraction of the time.
                    let busy = sq.busy_fraction;
                    let r = crate::replica::ReplicaStep {
                        cpu_usage_cores: busy * cores.min(1.0),
                        mean_in_flight: busy,
                        var_in_flight: busy * (1.0 - busy),
                        ..Default::default()
                    };
                    (r, busy * cores.min(1.0))
                } else {
                    memo.before.clone_from(&pod.queue);
                    let r = step_queue(&mut pod.queue, per_pod, per_pod_expected, dt, &cost, cv2, cores, timeout);
                    memo.after.clone_from(&pod.queue);
                    // What the pod would use without contention, for next interval's contention.
                    let want = ((per_pod + pod.queue.queued()) / dt * cost.cpu_s).min(limits.cpu_cores());
                    (r, want)
                };
                let out = ReadyOutcome::of(r, demand_cores, &limits, &cost);
                if shared.is_none() {
                    (memo.valid, memo.limits, memo.contention, memo.out) = (true, limits, contention, out);
                }
                out
            };
            pod.cpu_usage = out.cpu_usage;
            pod.memory_ws = out.memory_ws;
            nodes[n].demand_cores += out.demand_cores;
            if shared.is_none() {
                let r = &out.step;
                st.served += out.served;
                st.dropped += r.dropped + out.lost;
                st.overloaded |= r.overloaded;
                if out.served > 0.0 {
                    push_component(components, out.served, r.latency_mean_s, r.latency_var_s2);
                }
            }
            if out.killed {
                // OOM kill at the peak: in-flight and queued requests are lost, the container
                // restarts after CrashLoopBackOff.
                st.oom_events += 1;
                st.dropped += pod.queue.clear();
                pod.oom_at_bytes = Some(limits.memory_bytes as f64);
                pod.restarts += 1;
                let backoff = if pod.crash_streak == 0 {
                    0.0
                } else {
                    (BACKOFF_INITIAL_S * 2f64.powi(pod.crash_streak as i32 - 1)).min(BACKOFF_MAX_S)
                };
                pod.crash_streak += 1;
                pod.phase = PodPhase::Starting;
                pod.ready_since = None;
                pod.ready_at = now + dt + backoff + startup_delay;
            } else {
                cpu_util += out.cpu_utilisation;
                mem_util += out.memory_utilisation;
                n_util += 1;
                st.ready_replicas += 1;
            }
        }
        st.core_seconds += requested_m as f64 / 1000.0 * dt;
        st.memory_gib_seconds += requested_bytes as f64 / aware_core::GIB as f64 * dt;
        // Deleted pods drain what they hold, then release their node; the rest is dropped.
        let mut released = Vec::new();
        dep.draining.retain_mut(|pod| {
            let n = pod.node.expect("only scheduled pods drain");
            let cores = pod.running.limits.cpu_cores() * nodes[n].contention;
            let r = step_queue(&mut pod.queue, 0.0, 0.0, dt, &cost, cv2, cores, timeout);
            st.served += r.served;
            st.dropped += r.dropped;
            if r.served > 0.0 {
                components.push((r.served, r.latency_mean_s, r.latency_var_s2));
            }
            st.core_seconds += pod.resources.requests.cpu_cores() * dt;
            st.memory_gib_seconds += pod.resources.requests.memory_gib() * dt;
            st.draining_replicas += 1;
            nodes[n].demand_cores += r.cpu_usage_cores;
            if pod.drain_until.is_some_and(|t| t <= now + dt) || pod.queue.queued() <= 0.0 {
                let lost = pod.queue.clear();
                st.dropped += lost;
                st.dropped_on_termination += lost;
                released.push((n, pod.resources.requests));
                false
            } else {
                true
            }
        });
        st.pending_seconds = st.pending_replicas as f64 * dt;
        st.replica_seconds = (st.scheduled_replicas + st.draining_replicas) as f64 * dt;
        if n_util > 0 {
            st.cpu_utilisation = Some(cpu_util / n_util as f64);
            st.memory_utilisation = Some(mem_util / n_util as f64);
        }
        if let Some(&(_, m0, v0)) = components.first() {
            let total: f64 = components.iter().map(|c| c.0).sum();
            let mean = components.iter().map(|c| c.0 * c.1).sum::<f64>() / total;
            // Identical replicas (the common case) need no mixture search.
            let same =
                components.iter().all(|c| (c.1 - m0).abs() <= 1e-9 * m0 && (c.2 - v0).abs() <= 1e-9 * v0.max(1e-30));
            let p99 = match p99_override {
                Some(p) if components.len() == 1 => p,
                _ if same => gamma_p99(m0, v0),
                _ => mixture_quantile(components, 0.99),
            };
            // Served requests answered within their client's timeout; later ones were abandoned
            // and counted as dropped, so no served latency exceeds it.
            let (mean, p99) = (mean.min(timeout), p99.min(timeout));
            st.latency_mean_ms = Some(mean * 1000.0);
            st.latency_p99_ms = Some(p99 * 1000.0);
            let rng = &mut dep.noise_rng;
            let mut jitter = |sd: f64| (noise * sd * Distribution::<f64>::sample(&StandardNormal, rng)).exp();
            dep.measured_latency_mean_ms = Some(mean * 1000.0 * jitter(LATENCY_NOISE));
            dep.measured_latency_p99_ms = Some(p99 * 1000.0 * jitter(LATENCY_NOISE));
        } else {
            dep.measured_latency_mean_ms = None;
            dep.measured_latency_p99_ms = None;
        }
        let served_rate = st.served / dt;
        if st.ready_replicas > 0 {
            st.io_utilisation = (served_rate * cost.disk_bytes / (st.ready_replicas as f64 * POD_DISK_BPS)).min(1.0);
            st.network_utilisation = (served_rate * cost.net_bytes / (st.ready_replicas as f64 * POD_NET_BPS)).min(1.0);
        }
        st.slo_violated = match st.latency_p99_ms {
            Some(p99) => p99 > st.slo_p99_ms,
            None => st.arrivals > 0.0,
        } || st.dropped >= 0.01 * st.arrivals.max(1.0);
        dep.stats = st;
        for (n, req) in released {
            self.release(n, req);
        }
    }

    /// Records a scrape of deployment `d`'s last interval when one is due, keeping only as many
    /// as the metrics lag needs.
    fn scrape(&mut self, d: usize) {
        let every = self.config.steps_of(self.config.scrape_interval_s).max(1);
        if !(self.step + 1).is_multiple_of(every) {
            return;
        }
        let keep = (self.config.steps_of(self.config.metrics_lag_s) / every + 2) as usize;
        let dt = self.config.interval_s;
        let end = self.time_s + dt;
        let dep = &mut self.deployments[d];
        let mut m =
            if dep.history.len() >= keep { dep.history.pop_front().unwrap_or_default() } else { Metrics::default() };
        let st = &dep.stats;
        m.window_end_s = end;
        m.pods.clear();
        m.pods.extend(dep.pods.iter().map(PodUsage::of));
        m.noise_key = dep.noise_rng.next_u64();
        m.arrival_rate = st.arrivals / dt;
        m.throughput = st.served / dt;
        m.latency_mean_ms = dep.measured_latency_mean_ms;
        m.latency_p99_ms = dep.measured_latency_p99_ms;
        m.dropped = st.dropped;
        m.oom_events = st.oom_events;
        m.io_utilisation = st.io_utilisation;
        m.network_utilisation = st.network_utilisation;
        dep.history.push_back(m);
    }
}

/// The shared queue's outcome for one interval.
#[derive(Debug, Clone, Copy)]
struct SharedStep {
    served: f64,
    dropped: f64,
    mean_s: f64,
    var_s2: f64,
    p99_s: f64,
    busy_fraction: f64,
    overloaded: bool,
}

/// One interval of a shared FCFS queue in front of `ready` single-request pods: Erlang C below
/// saturation, a fluid FCFS queue with abandonment at the timeout above it (first come, first
/// served keeps serving at capacity in overload; only the requests that waited too long leave).
#[allow(clippy::too_many_arguments)]
fn step_shared_queue(
    dep: &mut Deployment,
    arrivals: f64,
    expected: f64,
    ready: usize,
    dt: f64,
    cv2: f64,
    timeout: f64,
    nodes: &[Node],
) -> SharedStep {
    let cost = dep.cost;
    // Mean speed of a pod's one request: its cores (after contention), at most one.
    let speed = dep
        .pods
        .iter()
        .filter(|p| p.phase == PodPhase::Ready)
        .map(|p| (p.running.limits.cpu_cores() * p.node.map_or(1.0, |n| nodes[n].contention)).min(1.0))
        .sum::<f64>()
        / ready as f64;
    let service = cost.cpu_s / speed.max(1e-9) + cost.io_s;
    let capacity = ready as f64 / service;
    let demand = arrivals + dep.shared_backlog;
    let lambda = (expected + dep.shared_backlog) / dt;
    if let Some(q) = shared_queue(lambda, ready as u32, service, cv2).filter(|q| q.rho < RHO_STEADY_CAP) {
        dep.shared_backlog = 0.0;
        let late = 1.0 - crate::queueing::gamma_cdf(q.mean_s, q.var_s2, timeout);
        return SharedStep {
            served: demand * (1.0 - late),
            dropped: demand * late,
            mean_s: q.mean_s,
            var_s2: q.var_s2,
            p99_s: q.p99_s,
            busy_fraction: q.rho,
            overloaded: false,
        };
    }
    let served = (capacity * dt).min(demand);
    let queued = demand - served;
    let dropped = (queued - capacity * timeout).max(0.0);
    let end = queued - dropped;
    let wait = 0.5 * (dep.shared_backlog + end) / capacity;
    dep.shared_backlog = end;
    let mean = wait + service;
    let var = cv2 * service * service + (end / capacity).powi(2) / 12.0;
    SharedStep {
        served,
        dropped,
        mean_s: mean,
        var_s2: var,
        p99_s: gamma_p99(mean, var),
        busy_fraction: (served / dt / capacity).min(1.0),
        overloaded: true,
    }
}

impl Cluster for SimCluster {
    fn app_names(&self) -> Vec<String> {
        self.apps.iter().map(|a| a.name.clone()).collect()
    }

    fn interval_s(&self) -> f64 {
        self.config.interval_s
    }

    fn observe(&self, app: AppId) -> Result<Observation, ClusterError> {
        let dep = self.deployments.get(app).ok_or(ClusterError::UnknownApp(app))?;
        let dt = self.config.interval_s;
        // The pod list is the API server's (current); usage, latency and load are the metrics
        // pipeline's, as old as the metrics lag.
        let m = self.visible_metrics(app);
        let noise = self.config.noise;
        // Pods are created with increasing ids and removed in place, so both the pod list and
        // the scrape's are in id order: one forward pass pairs them (a binary search per pod
        // was half of observe's time on apps of hundreds of pods).
        debug_assert!(dep.pods.windows(2).all(|w| w[0].id < w[1].id));
        let mut cursor = 0;
        let mut usage = |id: u64| -> (Option<f64>, Option<f64>) {
            let Some(m) = m else { return (None, None) };
            while m.pods.get(cursor).is_some_and(|u| u.id < id) {
                cursor += 1;
            }
            match m.pods.get(cursor) {
                Some(u) if u.id == id => u.measured(m.noise_key, noise),
                _ => (None, None),
            }
        };
        let app_name = &self.apps[app].name;
        Ok(Observation {
            app: self.apps[app].name.clone(),
            time_s: self.time_s,
            interval_s: dt,
            desired_replicas: dep.desired,
            template: dep.template.clone(),
            pods: dep
                .pods
                .iter()
                .map(|p| {
                    let (cpu, memory) = usage(p.id);
                    PodObservation {
                        name: pod_name(app_name, p.id),
                        phase: p.phase,
                        node: p.node.map(|n| self.node_names[n].clone()),
                        created_at_s: p.created_at,
                        ready_since_s: p.ready_since,
                        cpu_usage_cores: cpu,
                        memory_working_set_bytes: memory,
                        // What the container runs with (the kubelet's `status.containerStatuses[]
                        // .resources`), not the spec: a memory decrease the kubelet defers while
                        // the working set is above it must not read as a container at 100 %.
                        resources: p.running.clone(),
                        allocated: Some(p.resources.requests),
                        restarts: p.restarts,
                        oom_killed_at_bytes: p.oom_at_bytes,
                        deleting: false,
                        custom_metrics: Default::default(),
                        containers: Vec::new(),
                        unschedulable: p.unschedulable.filter(|_| p.node.is_none()),
                    }
                })
                .collect(),
            arrival_rate: m.map_or(0.0, |m| m.arrival_rate),
            throughput: m.map_or(0.0, |m| m.throughput),
            latency_mean_ms: m.and_then(|m| m.latency_mean_ms),
            latency_p99_ms: m.and_then(|m| m.latency_p99_ms),
            dropped_requests: m.map_or(0, |m| m.dropped.round() as u64),
            oom_events: m.map_or(0, |m| m.oom_events),
            io_utilisation: m.map_or(0.0, |m| m.io_utilisation),
            network_utilisation: m.map_or(0.0, |m| m.network_utilisation),
        })
    }

    fn target(&self, app: AppId) -> Result<(u32, ContainerResources), ClusterError> {
        let dep = self.deployments.get(app).ok_or(ClusterError::UnknownApp(app))?;
        Ok((dep.desired, dep.template.clone()))
    }

    fn apply(&mut self, app: AppId, rec: &Recommendation) -> Result<(), ClusterError> {
        let name = self.apps.get(app).ok_or(ClusterError::UnknownApp(app))?.name.clone();
        let invalid = |reason: String| ClusterError::InvalidRecommendation { app: name.clone(), reason };
        let container = match rec.containers.as_slice() {
            [] => None,
            [c] if c.name == CONTAINER => Some(c),
            [c] => {
                return Err(invalid(format!(
                    "unknown container {:?} (the simulator's pods have one, {CONTAINER:?})",
                    c.name
                )));
            }
            _ => return Err(invalid(format!("{} containers given; pods have one", rec.containers.len()))),
        };
        if rec.replicas > MAX_SIMULATED_REPLICAS {
            return Err(invalid(format!(
                "{} replicas is beyond the simulator's {MAX_SIMULATED_REPLICAS}",
                rec.replicas
            )));
        }
        if let Some(c) = container {
            let (req, lim) = (c.requests, c.limits);
            if lim.cpu_millicores == 0 || lim.memory_bytes == 0 {
                return Err(invalid("CPU and memory limits must be positive".into()));
            }
            if req.cpu_millicores > lim.cpu_millicores || req.memory_bytes > lim.memory_bytes {
                return Err(invalid("requests must not exceed limits".into()));
            }
        }
        let dep = &mut self.deployments[app];
        dep.desired = rec.replicas;
        let Some(c) = container else { return Ok(()) };
        if *c == dep.template {
            return Ok(());
        }
        dep.template = c.clone();
        dep.generation += 1;
        if self.config.vertical_update == VerticalUpdate::InPlace {
            let generation = dep.generation;
            let resize_at = self.time_s + self.config.resize_latency_s;
            for p in 0..self.deployments[app].pods.len() {
                let pod = &self.deployments[app].pods[p];
                let Some(n) = pod.node else {
                    // Not placed yet: just take the new shape (which the scheduler has not
                    // tried yet).
                    let pod = &mut self.deployments[app].pods[p];
                    pod.unschedulable = None;
                    pod.resources = c.clone();
                    pod.running = c.clone();
                    pod.generation = generation;
                    continue;
                };
                let node = &mut self.nodes[n];
                let old = pod.resources.requests;
                let new = c.requests;
                let cpu_after = node.allocated_cpu_m - old.cpu_millicores + new.cpu_millicores;
                let mem_after = node.allocated_memory - old.memory_bytes + new.memory_bytes;
                if cpu_after <= (node.cores * 1000.0) as u64 && mem_after <= node.memory_bytes {
                    // Admitted: the node reserves the new requests now; the container runs with
                    // them once the resize has gone through (`reconcile`).
                    node.allocated_cpu_m = cpu_after;
                    node.allocated_memory = mem_after;
                    if new.cpu_millicores < old.cpu_millicores || new.memory_bytes < old.memory_bytes {
                        self.capacity_freed = true;
                    }
                    self.index_node(n);
                    let pod = &mut self.deployments[app].pods[p];
                    pod.resources = c.clone();
                    pod.generation = generation;
                    if pod.phase == PodPhase::Ready {
                        pod.resize_at = Some(resize_at);
                    } else {
                        pod.running = c.clone();
                    }
                }
                // Otherwise the resize is infeasible on this node: the pod keeps its old
                // generation and the rolling logic in `reconcile` replaces it.
            }
        }
        Ok(())
    }

    fn advance(&mut self) -> Result<(), ClusterError> {
        if let Some(s) = self.config.scenario
            && self.scenario_active.is_none()
            && s.at_step.is_some_and(|at| self.step >= at)
        {
            self.apply_scenario(s.kind);
        }
        // Room freed by an app's reconcile (a pod deleted before it served) is an event the
        // apps reconciled before it have not seen: their pending pods retry after the pass, as
        // the scheduler's queue moves unschedulable pods back on any pod's deletion (the apps
        // after it retry within the pass). Until session 69 the event was lost, and such pods
        // pended until the next one.
        let mut last_freeing = None;
        for d in 0..self.deployments.len() {
            self.freed_in_pass = false;
            self.reconcile(d);
            if self.freed_in_pass {
                last_freeing = Some(d);
            }
        }
        for d in 0..last_freeing.unwrap_or(0) {
            self.retry_pending(d);
        }
        self.capacity_freed = false;
        for node in &mut self.nodes {
            node.demand_cores = node.interference_cores;
        }
        for d in 0..self.deployments.len() {
            self.step_traffic(d);
            self.scrape(d);
        }
        for node in &mut self.nodes {
            node.contention = cpu_share(node.cores, node.demand_cores);
        }
        self.step += 1;
        self.time_s += self.config.interval_s;
        Ok(())
    }

    fn reset(&mut self, seed: Option<u64>) -> Result<(), ClusterError> {
        if let Some(s) = seed {
            self.seed = s;
        }
        self.rebuild(true);
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use proptest::prelude::*;

    proptest! {
        #[test]
        fn pod_names_are_the_formatted_ones(id in any::<u64>(), app in "[a-z0-9-]{0,12}") {
            prop_assert_eq!(super::pod_name(&app, id), format!("{app}-{id:05x}"));
        }
    }
}
