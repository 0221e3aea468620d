//! The fast-mode simulated cluster: Deployments of single-container pods on nodes of finite
//! capacity, stepped one control interval at a time with the closed-form replica model.

use std::sync::Arc;

use aware_core::{
    AppId, Cluster, ClusterError, ContainerResources, Observation, PodObservation, PodPhase, Recommendation, Resources,
};
use rand::SeedableRng;
use rand_distr::{Distribution, StandardNormal};
use rand_pcg::Pcg64Mcg;
use serde::{Deserialize, Serialize};

use crate::app::{AppSpec, STREAM_LOAD, STREAM_NOISE, stream_seed};
use crate::load::{LoadSource, LoadState, Trace};
use crate::queueing::{Z99, gamma_p99, mixture_quantile};
use crate::replica::step_replica;
use crate::scenario::{Scenario, ScenarioKind};
use crate::segments::RequestCost;

/// The simulator's one container name.
pub const CONTAINER: &str = "app";

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

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SimConfig {
    /// Control interval, seconds (the HPA sync period).
    pub interval_s: f64,
    /// Number of nodes; `None` sizes the cluster to three times the apps' reference allocation.
    pub nodes: Option<usize>,
    pub node_cores: f64,
    pub node_memory_bytes: u64,
    /// From scheduling to ready: image pull, container start, readiness probe.
    pub startup_delay_s: f64,
    pub vertical_update: VerticalUpdate,
    /// Requests waiting longer than this are abandoned (and counted as dropped).
    pub request_timeout_s: f64,
    /// Multiplier on measurement noise (0 disables it; 1 is the documented default).
    pub noise: f64,
    pub scenario: Option<Scenario>,
    /// Overrides every app's derived p99 SLO, milliseconds.
    pub slo_p99_ms: Option<f64>,
}

impl Default for SimConfig {
    fn default() -> Self {
        Self {
            interval_s: 15.0,
            nodes: None,
            node_cores: 16.0,
            node_memory_bytes: 64 << 30,
            startup_delay_s: 30.0,
            vertical_update: VerticalUpdate::InPlace,
            request_timeout_s: 30.0,
            noise: 1.0,
            scenario: None,
            slo_p99_ms: None,
        }
    }
}

/// Relative standard deviations of measurement noise (metrics-server samples and latency
/// histograms are estimates, not truths).
const CPU_NOISE: f64 = 0.03;
const MEMORY_NOISE: f64 = 0.01;
const LATENCY_NOISE: f64 = 0.05;
/// CPU a starting container burns (JIT, cache warm-up), as a fraction of its limit; the reason
/// HPA ignores CPU samples during its initialisation period.
const STARTUP_CPU_FRACTION: f64 = 0.3;
/// CrashLoopBackOff: first delay, cap, and how long a pod must run to reset it.
const BACKOFF_INITIAL_S: f64 = 10.0;
const BACKOFF_MAX_S: f64 = 300.0;
const BACKOFF_RESET_S: f64 = 600.0;
/// Per-pod disk and network bandwidth, bytes/s, for I/O and network utilisation.
const POD_DISK_BPS: f64 = 100e6;
const POD_NET_BPS: f64 = 125e6;

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

    /// kube-scheduler's LeastAllocated score: mean free fraction after placing.
    fn free_score(&self, r: &Resources) -> f64 {
        let cpu = 1.0 - (self.allocated_cpu_m + r.cpu_millicores) as f64 / (self.cores * 1000.0);
        let mem = 1.0 - (self.allocated_memory + r.memory_bytes) as f64 / self.memory_bytes as f64;
        cpu + mem
    }
}

#[derive(Debug, Clone)]
struct Pod {
    name: String,
    node: Option<usize>,
    phase: PodPhase,
    resources: ContainerResources,
    generation: u64,
    created_at: f64,
    ready_at: f64,
    ready_since: Option<f64>,
    restarts: u32,
    /// Consecutive crashes since the pod last ran for `BACKOFF_RESET_S`.
    crash_streak: u32,
    backlog: f64,
    cpu_usage: f64,
    memory_ws: f64,
    measured_cpu: Option<f64>,
    measured_memory: Option<f64>,
    oom_at_bytes: Option<f64>,
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
    /// Σ CPU requests of scheduled pods × interval.
    pub core_seconds: f64,
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
    load: LoadState,
    noise_rng: Pcg64Mcg,
    cost: RequestCost,
    slo_p99_ms: f64,
    stats: AppStepStats,
    measured_latency_mean_ms: Option<f64>,
    measured_latency_p99_ms: Option<f64>,
}

/// The embedded simulator backend.
#[derive(Debug, Clone)]
pub struct SimCluster {
    config: SimConfig,
    apps: Vec<AppSpec>,
    traces: Vec<Arc<Trace>>,
    seed: u64,
    nodes: Vec<Node>,
    deployments: Vec<Deployment>,
    step: u64,
    time_s: f64,
    next_pod_id: u64,
    /// Set when a reservation was released, so pending pods retry scheduling.
    capacity_freed: bool,
    scenario_active: Option<ScenarioKind>,
    /// Scratch space for per-replica latency moments, so stepping allocates nothing.
    latency_components: Vec<(f64, f64, f64)>,
}

impl SimCluster {
    /// A cluster running `apps`, each starting Ready at its reference allocation. `traces`, when
    /// given, replace the synthetic load (assigned round-robin).
    pub fn new(apps: Vec<AppSpec>, traces: Vec<Arc<Trace>>, config: SimConfig, seed: u64) -> Self {
        let mut c = SimCluster {
            config,
            apps,
            traces,
            seed,
            nodes: Vec::new(),
            deployments: Vec::new(),
            step: 0,
            time_s: 0.0,
            next_pod_id: 0,
            capacity_freed: false,
            scenario_active: None,
            latency_components: Vec::new(),
        };
        c.rebuild();
        c
    }

    pub fn apps(&self) -> &[AppSpec] {
        &self.apps
    }

    pub fn config(&self) -> &SimConfig {
        &self.config
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

    fn rebuild(&mut self) {
        let node_count = self.config.nodes.unwrap_or_else(|| {
            let cores: f64 = self
                .apps
                .iter()
                .map(|a| a.reference.replicas as f64 * a.reference.cpu_millicores as f64 / 1000.0)
                .sum();
            let memory: f64 =
                self.apps.iter().map(|a| a.reference.replicas as f64 * a.reference.memory_bytes as f64).sum();
            let by_cpu = (3.0 * cores / self.config.node_cores).ceil() as usize;
            let by_memory = (3.0 * memory / self.config.node_memory_bytes as f64).ceil() as usize;
            by_cpu.max(by_memory).max(2)
        });
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
        self.step = 0;
        self.time_s = 0.0;
        self.next_pod_id = 0;
        self.scenario_active = None;
        self.deployments = Vec::with_capacity(self.apps.len());
        for (i, app) in self.apps.iter().enumerate() {
            let source = if self.traces.is_empty() {
                LoadSource::Synthetic(app.load.clone())
            } else {
                LoadSource::Trace(self.traces[i % self.traces.len()].clone())
            };
            let load_rng = Pcg64Mcg::seed_from_u64(stream_seed(self.seed, i as u64, STREAM_LOAD));
            let noise_rng = Pcg64Mcg::seed_from_u64(stream_seed(self.seed, i as u64, STREAM_NOISE));
            let r = app.reference;
            let template = ContainerResources::guaranteed(CONTAINER, Resources::new(r.cpu_millicores, r.memory_bytes));
            self.deployments.push(Deployment {
                desired: r.replicas,
                template,
                generation: 0,
                pods: Vec::new(),
                load: LoadState::new(source, load_rng),
                noise_rng,
                cost: app.cost(),
                slo_p99_ms: self.config.slo_p99_ms.unwrap_or(app.slo_p99_ms),
                stats: AppStepStats::default(),
                measured_latency_mean_ms: None,
                measured_latency_p99_ms: None,
            });
        }
        // Start warm: the initial pods are already running and ready.
        for d in 0..self.deployments.len() {
            self.reconcile(d);
            for pod in &mut self.deployments[d].pods {
                if pod.node.is_some() {
                    pod.phase = PodPhase::Ready;
                    pod.ready_at = 0.0;
                    pod.ready_since = Some(0.0);
                }
            }
        }
    }

    fn new_pod(&mut self, d: usize) -> Pod {
        self.next_pod_id += 1;
        let dep = &self.deployments[d];
        Pod {
            name: format!("{}-{:05x}", self.apps[d].name, self.next_pod_id),
            node: None,
            phase: PodPhase::Pending,
            resources: dep.template.clone(),
            generation: dep.generation,
            created_at: self.time_s,
            ready_at: f64::INFINITY,
            ready_since: None,
            restarts: 0,
            crash_streak: 0,
            backlog: 0.0,
            cpu_usage: 0.0,
            memory_ws: 0.0,
            measured_cpu: None,
            measured_memory: None,
            oom_at_bytes: None,
        }
    }

    /// Places a pending pod on the least-allocated node with room; it stays pending otherwise.
    fn schedule(&mut self, d: usize, p: usize) {
        let req = self.deployments[d].pods[p].resources.requests;
        let best = self
            .nodes
            .iter()
            .enumerate()
            .filter(|(_, n)| n.fits(&req))
            .max_by(|a, b| a.1.free_score(&req).total_cmp(&b.1.free_score(&req)))
            .map(|(i, _)| i);
        if let Some(n) = best {
            let node = &mut self.nodes[n];
            node.allocated_cpu_m += req.cpu_millicores;
            node.allocated_memory += req.memory_bytes;
            let pod = &mut self.deployments[d].pods[p];
            pod.node = Some(n);
            pod.phase = PodPhase::Starting;
            pod.ready_at = self.time_s + self.config.startup_delay_s;
        }
    }

    fn remove_pod(&mut self, d: usize, p: usize) {
        let pod = self.deployments[d].pods.remove(p);
        if let Some(n) = pod.node {
            let node = &mut self.nodes[n];
            node.allocated_cpu_m -= pod.resources.requests.cpu_millicores;
            node.allocated_memory -= pod.resources.requests.memory_bytes;
            self.capacity_freed = true;
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
        // Old pods that are not serving can go at once.
        while let Some(i) = self.victim(d, |p| is_old(p) && p.phase != PodPhase::Ready) {
            self.remove_pod(d, i);
        }
        let old_ready = self.deployments[d].pods.iter().filter(|p| is_old(p)).count();
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
            for p in 0..self.deployments[d].pods.len() {
                if self.deployments[d].pods[p].node.is_none() {
                    self.schedule(d, p);
                }
            }
        }
        let now = self.time_s;
        for pod in &mut self.deployments[d].pods {
            if pod.phase == PodPhase::Starting && pod.ready_at <= now {
                pod.phase = PodPhase::Ready;
                pod.ready_since = Some(now);
            }
            if pod.phase == PodPhase::Ready && pod.ready_since.is_some_and(|s| now - s >= BACKOFF_RESET_S) {
                pod.crash_streak = 0;
            }
        }
    }

    fn apply_scenario(&mut self, kind: ScenarioKind) {
        self.scenario_active = Some(kind);
        for (d, app) in self.apps.iter().enumerate() {
            let dep = &mut self.deployments[d];
            dep.cost = RequestCost::of_chain(&app.segments, |k| kind.payload_scale(k));
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
        let now = self.time_s;
        let dep = &mut self.deployments[d];
        let arrivals = dep.load.arrivals(now, dt);
        let cost = dep.cost;
        let ready = dep.pods.iter().filter(|p| p.phase == PodPhase::Ready).count();
        let mut st = AppStepStats { arrivals, slo_p99_ms: dep.slo_p99_ms, ..Default::default() };
        let per_pod = if ready > 0 { arrivals / ready as f64 } else { 0.0 };
        if ready == 0 {
            st.dropped = arrivals;
        }
        // (weight, mean, var) of each serving pod's response time, seconds; reused across steps.
        let components = &mut self.latency_components;
        components.clear();
        let (mut cpu_util, mut mem_util, mut n_util) = (0.0, 0.0, 0usize);
        for pod in dep.pods.iter_mut() {
            pod.oom_at_bytes = None;
            let Some(n) = pod.node else {
                pod.measured_cpu = None;
                pod.measured_memory = None;
                continue;
            };
            let limit_cores = pod.resources.limits.cpu_cores();
            let limit_mem = pod.resources.limits.memory_bytes as f64;
            st.scheduled_replicas += 1;
            st.core_seconds += pod.resources.requests.cpu_cores() * dt;
            if pod.phase != PodPhase::Ready {
                pod.cpu_usage = STARTUP_CPU_FRACTION * limit_cores;
                pod.memory_ws = cost.mem_base_bytes.min(limit_mem);
                self.nodes[n].demand_cores += pod.cpu_usage;
            } else {
                let cores = limit_cores * self.nodes[n].contention;
                let r = step_replica(per_pod, pod.backlog, dt, &cost, cores, timeout);
                pod.backlog = r.backlog;
                pod.cpu_usage = r.cpu_usage_cores.min(limit_cores);
                // What the pod would use without contention, for next interval's contention.
                self.nodes[n].demand_cores += ((per_pod + pod.backlog) / dt * cost.cpu_s).min(limit_cores);
                st.served += r.served;
                st.dropped += r.dropped;
                st.overloaded |= r.overloaded;
                let peak = r.mean_in_flight + Z99 * r.var_in_flight.sqrt();
                pod.memory_ws = cost.mem_base_bytes + cost.mem_per_request_bytes * r.mean_in_flight;
                if r.served > 0.0 {
                    components.push((r.served, r.latency_mean_s, r.latency_var_s2));
                }
                if cost.mem_base_bytes + cost.mem_per_request_bytes * peak > limit_mem {
                    // OOM kill at the peak: in-flight and queued requests are lost, the container
                    // restarts after CrashLoopBackOff.
                    st.oom_events += 1;
                    st.dropped += r.mean_in_flight.min(r.served) + pod.backlog;
                    pod.backlog = 0.0;
                    pod.oom_at_bytes = Some(limit_mem);
                    pod.memory_ws = limit_mem;
                    pod.restarts += 1;
                    let backoff = if pod.crash_streak == 0 {
                        0.0
                    } else {
                        (BACKOFF_INITIAL_S * 2f64.powi(pod.crash_streak as i32 - 1)).min(BACKOFF_MAX_S)
                    };
                    pod.crash_streak += 1;
                    pod.phase = PodPhase::Starting;
                    pod.ready_since = None;
                    pod.ready_at = now + dt + backoff + self.config.startup_delay_s;
                } else {
                    cpu_util += pod.cpu_usage / limit_cores;
                    mem_util += (pod.memory_ws / limit_mem).min(1.0);
                    n_util += 1;
                    st.ready_replicas += 1;
                }
            }
            let rng = &mut dep.noise_rng;
            let mut jitter = |sd: f64| 1.0 + noise * sd * Distribution::<f64>::sample(&StandardNormal, rng);
            pod.measured_cpu = Some((pod.cpu_usage * jitter(CPU_NOISE)).clamp(0.0, limit_cores));
            pod.measured_memory = Some((pod.memory_ws * jitter(MEMORY_NOISE)).clamp(0.0, limit_mem));
        }
        st.pending_replicas = dep.pods.len() as u32 - st.scheduled_replicas;
        st.replica_seconds = st.scheduled_replicas as f64 * dt;
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
            let p99 = if same { gamma_p99(m0, v0) } else { mixture_quantile(components, 0.99) };
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
        let st = &dep.stats;
        Ok(Observation {
            app: self.apps[app].name.clone(),
            time_s: self.time_s,
            interval_s: dt,
            desired_replicas: dep.desired,
            template: dep.template.clone(),
            pods: dep
                .pods
                .iter()
                .map(|p| PodObservation {
                    name: p.name.clone(),
                    phase: p.phase,
                    node: p.node.map(|n| format!("node-{n:04}")),
                    created_at_s: p.created_at,
                    ready_since_s: p.ready_since,
                    cpu_usage_cores: p.measured_cpu,
                    memory_working_set_bytes: p.measured_memory,
                    resources: p.resources.clone(),
                    restarts: p.restarts,
                    oom_killed_at_bytes: p.oom_at_bytes,
                    deleting: false,
                    custom_metrics: Default::default(),
                    containers: Vec::new(),
                })
                .collect(),
            arrival_rate: st.arrivals / dt,
            throughput: st.served / dt,
            latency_mean_ms: dep.measured_latency_mean_ms,
            latency_p99_ms: dep.measured_latency_p99_ms,
            dropped_requests: st.dropped.round() as u64,
            oom_events: st.oom_events,
            io_utilisation: st.io_utilisation,
            network_utilisation: st.network_utilisation,
        })
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
        if rec.replicas > 10_000 {
            return Err(invalid(format!("{} replicas is beyond the simulator's 10000", rec.replicas)));
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
            for p in 0..self.deployments[app].pods.len() {
                let pod = &self.deployments[app].pods[p];
                let Some(n) = pod.node else {
                    // Not placed yet: just take the new shape.
                    let pod = &mut self.deployments[app].pods[p];
                    pod.resources = c.clone();
                    pod.generation = generation;
                    continue;
                };
                let node = &mut self.nodes[n];
                let old = pod.resources.requests;
                let new = c.requests;
                let cpu_after = node.allocated_cpu_m - old.cpu_millicores + new.cpu_millicores;
                let mem_after = node.allocated_memory - old.memory_bytes + new.memory_bytes;
                if cpu_after <= (node.cores * 1000.0) as u64 && mem_after <= node.memory_bytes {
                    node.allocated_cpu_m = cpu_after;
                    node.allocated_memory = mem_after;
                    if new.cpu_millicores < old.cpu_millicores || new.memory_bytes < old.memory_bytes {
                        self.capacity_freed = true;
                    }
                    let pod = &mut self.deployments[app].pods[p];
                    pod.resources = c.clone();
                    pod.generation = generation;
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
        for d in 0..self.deployments.len() {
            self.reconcile(d);
        }
        self.capacity_freed = false;
        for node in &mut self.nodes {
            node.demand_cores = node.interference_cores;
        }
        for d in 0..self.deployments.len() {
            self.step_traffic(d);
        }
        for node in &mut self.nodes {
            let available = node.cores;
            node.contention = if node.demand_cores > available { available / node.demand_cores } else { 1.0 };
        }
        self.step += 1;
        self.time_s += self.config.interval_s;
        Ok(())
    }

    fn reset(&mut self, seed: Option<u64>) -> Result<(), ClusterError> {
        if let Some(s) = seed {
            self.seed = s;
        }
        self.rebuild();
        Ok(())
    }
}
