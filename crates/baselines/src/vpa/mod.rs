//! Kubernetes VerticalPodAutoscaler: the recommender (decaying histograms, percentiles, margin,
//! confidence bounds, minimums) and the updater's decision of when a pod is worth updating,
//! applied through the simulator's Deployment template.

pub mod estimator;
pub mod histogram;
pub mod model;

use std::collections::BTreeMap;

use aware_core::{
    ContainerResources, Observation, PodPhase, Profile, Recommendation, Recommender, RecommenderError, Resources, Scope,
};
use serde::{Deserialize, Serialize};

pub use estimator::{
    Amounts, ContainerRecommendation, ControlledAmounts, PodResourceRecommender, RecommendedResources,
};
pub use histogram::{HistogramCheckpoint, HistogramError};
pub use model::AggregateCheckpoint;
use model::{AggregateContainerState, ContainerState};

/// `updatePolicy.updateMode`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, Default)]
pub enum UpdateMode {
    /// Recommend only.
    Off,
    /// Apply only when pods are created. A simulated Deployment template reaches running pods
    /// too, so this mode cannot be represented there and is refused by `Recommender` use.
    Initial,
    /// Evict pods to apply (a rolling restart of the template in the simulator).
    #[default]
    Recreate,
    /// Resize in place when possible, otherwise recreate.
    InPlaceOrRecreate,
}

/// `controlledValues`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, Default)]
pub enum ControlledValues {
    /// Limits follow requests, keeping the original limit/request ratio.
    #[default]
    RequestsAndLimits,
    /// Only requests change.
    RequestsOnly,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct VpaSpec {
    pub update_mode: UpdateMode,
    pub controlled_values: ControlledValues,
    /// Which resources the VPA sets (`controlledResources`).
    pub control_cpu: bool,
    pub control_memory: bool,
    /// `minAllowed` / `maxAllowed` of the container policy.
    pub min_allowed: Amounts,
    pub max_allowed: Amounts,
    /// The updater's `--min-replicas` (per VPA `updatePolicy.minReplicas`): with fewer live
    /// pods it evicts none. Upstream default 2.
    #[serde(default = "default_min_replicas")]
    pub min_replicas: u32,
    /// The updater's `--eviction-tolerance`: the fraction of the configured replicas that may be
    /// down for updates at once (truncated). Upstream default 0.5.
    #[serde(default = "default_eviction_tolerance")]
    pub eviction_tolerance: f64,
}

fn default_min_replicas() -> u32 {
    UPDATER_MIN_REPLICAS
}

fn default_eviction_tolerance() -> f64 {
    UPDATER_EVICTION_TOLERANCE
}

/// `--min-replicas` of the VPA (and MPA) updater.
pub const UPDATER_MIN_REPLICAS: u32 = 2;
/// `--eviction-tolerance` of the VPA (and MPA) updater.
pub const UPDATER_EVICTION_TOLERANCE: f64 = 0.5;

/// Upstream `singleGroupStats.isPodDisruptable` applied pod after pod: how many of `running`
/// live pods (of `configured` replicas) the updater may evict in one pass; none below
/// `min_replicas` live pods.
pub fn evictable_pods(configured: u32, live: u32, running: u32, min_replicas: u32, tolerance_fraction: f64) -> u32 {
    if live < min_replicas {
        return 0;
    }
    let configured = configured as i64;
    let tolerance = (configured as f64 * tolerance_fraction) as i64;
    let should_be_alive = configured - tolerance;
    let mut evicted = 0i64;
    loop {
        let alive = running as i64 - evicted;
        let ok = alive > should_be_alive || (configured == running as i64 && tolerance == 0 && evicted == 0);
        if !ok || evicted >= running as i64 {
            return evicted as u32;
        }
        evicted += 1;
    }
}

impl VpaSpec {
    pub fn from_profile(profile: &Profile) -> Self {
        let b = &profile.bounds;
        Self {
            update_mode: UpdateMode::Recreate,
            controlled_values: ControlledValues::RequestsAndLimits,
            control_cpu: true,
            control_memory: true,
            min_allowed: Amounts {
                cpu_millicores: b.min_cpu_millicores.min(i64::MAX as u64) as i64,
                memory_bytes: b.min_memory_mib.saturating_mul(1 << 20).min(i64::MAX as u64) as i64,
            },
            max_allowed: Amounts {
                cpu_millicores: b.max_cpu_millicores.min(i64::MAX as u64) as i64,
                memory_bytes: b.max_memory_mib.saturating_mul(1 << 20).min(i64::MAX as u64) as i64,
            },
            min_replicas: UPDATER_MIN_REPLICAS,
            eviction_tolerance: UPDATER_EVICTION_TOLERANCE,
        }
    }
}

/// The updater's thresholds (`update_priority_calculator.go`).
pub const MIN_CHANGE_PRIORITY: f64 = 0.1;
pub const POD_LIFETIME_UPDATE_THRESHOLD_S: f64 = 12.0 * 3600.0;
pub const EVICT_AFTER_OOM_THRESHOLD_S: f64 = 10.0 * 60.0;
/// `--recommender-interval`.
pub const RECOMMENDER_INTERVAL_S: f64 = 60.0;

/// Why (or whether) the updater would act on a pod.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct UpdateDecision {
    pub pod: String,
    pub outside_recommended_range: bool,
    pub quick_oom: bool,
    /// Σ|recommended − requested| / Σ requested over controlled resources.
    pub resource_diff: f64,
    /// Whether the priority rules want the pod updated.
    pub update: bool,
    /// Whether the eviction restriction (min replicas, eviction tolerance) lets the updater
    /// evict it in this pass; filled by the autoscaler, `true` from [`update_decision`].
    pub evictable: bool,
}

/// The updater's rule: outside [lower, upper], or an OOM within 10 minutes of start, or a pod
/// at least 12 h old whose requests differ from the target by ≥ 10 %.
pub fn update_decision(
    spec: &VpaSpec,
    rec: &RecommendedResources,
    pod: &str,
    request: Amounts,
    age_s: f64,
    quick_oom: bool,
) -> UpdateDecision {
    // (requested, target, lower, upper) of each controlled resource.
    let mut resources = Vec::with_capacity(2);
    if spec.control_cpu {
        let (t, l, u) = (rec.target.cpu_millicores, rec.lower_bound.cpu_millicores, rec.upper_bound.cpu_millicores);
        resources.push((request.cpu_millicores, t, l, u));
    }
    if spec.control_memory {
        let (t, l, u) = (rec.target.memory_bytes, rec.lower_bound.memory_bytes, rec.upper_bound.memory_bytes);
        resources.push((request.memory_bytes, t, l, u));
    }
    let outside = resources.iter().any(|&(req, _, lower, upper)| req < lower || req > upper);
    let diff: f64 =
        resources.iter().map(|&(req, target, _, _)| (target - req).abs() as f64 / (req as f64).max(1.0)).sum();
    let update = outside || quick_oom || (age_s >= POD_LIFETIME_UPDATE_THRESHOLD_S && diff >= MIN_CHANGE_PRIORITY);
    UpdateDecision {
        pod: pod.to_string(),
        outside_recommended_range: outside,
        quick_oom,
        resource_diff: diff,
        update,
        evictable: true,
    }
}

/// Clamps every amount of a recommendation into `[min_allowed, max_allowed]`.
pub fn cap(rec: RecommendedResources, min: Amounts, max: Amounts) -> RecommendedResources {
    let c = |a: Amounts| Amounts {
        cpu_millicores: a.cpu_millicores.clamp(min.cpu_millicores, max.cpu_millicores.max(min.cpu_millicores)),
        memory_bytes: a.memory_bytes.clamp(min.memory_bytes, max.memory_bytes.max(min.memory_bytes)),
    };
    RecommendedResources { target: c(rec.target), lower_bound: c(rec.lower_bound), upper_bound: c(rec.upper_bound) }
}

#[derive(Debug, Clone)]
pub struct VerticalPodAutoscaler {
    pub spec: VpaSpec,
    recommender: PodResourceRecommender,
    aggregates: BTreeMap<String, AggregateContainerState>,
    /// Per `pod/container`: its state, and the observation ([`Self::observations`]) that last
    /// listed it.
    containers: BTreeMap<String, (ContainerState, u64)>,
    /// Observations seen: the stamp that tells, after one, which containers it listed.
    observations: u64,
    last_run_s: Option<f64>,
    /// The time of the last observation.
    observed_s: Option<f64>,
    latest: Option<RecommendedResources>,
    containers_latest: Vec<ContainerRecommendation>,
    decisions: Vec<UpdateDecision>,
}

impl VerticalPodAutoscaler {
    pub fn new(spec: VpaSpec) -> Self {
        Self {
            spec,
            recommender: PodResourceRecommender::default(),
            aggregates: BTreeMap::new(),
            containers: BTreeMap::new(),
            observations: 0,
            last_run_s: None,
            observed_s: None,
            latest: None,
            containers_latest: Vec::new(),
            decisions: Vec::new(),
        }
    }

    /// Starts a container's history from a `VerticalPodAutoscalerCheckpoint`, as the
    /// recommender does on start-up, before any observation.
    pub fn load_checkpoint(
        &mut self,
        container: &str,
        c: &AggregateCheckpoint,
        now_s: f64,
    ) -> Result<(), HistogramError> {
        let (cpu, memory) = (self.spec.control_cpu, self.spec.control_memory);
        let agg = self.aggregates.entry(container.to_string()).or_insert_with(|| {
            // As `observe` makes a container's aggregate: what it recommends is the spec's.
            let mut a = AggregateContainerState::new(now_s);
            a.controls_cpu = cpu;
            a.controls_memory = memory;
            a
        });
        agg.load_from_checkpoint(c)
    }

    /// [`VerticalPodAutoscaler::save_checkpoints_at`] the time of the last observation (the
    /// recommender's own clock; nothing is open before any).
    pub fn save_checkpoints(&self) -> Vec<(String, AggregateCheckpoint)> {
        self.save_checkpoints_at(self.observed_s.unwrap_or(f64::NEG_INFINITY))
    }

    /// Upstream's checkpoint writer (`checkpoint_writer.go`): each container name's history as
    /// a `VerticalPodAutoscalerCheckpoint` keeps it, by name, for a restarted recommender to
    /// start from ([`VerticalPodAutoscaler::load_checkpoint`]). The memory peaks of aggregation
    /// intervals still open at `now_s` are left out (`subtractCurrentContainerMemoryPeak`): the
    /// restarted recommender adds them again when it next sees those containers, so keeping
    /// them would count one interval's peak twice.
    pub fn save_checkpoints_at(&self, now_s: f64) -> Vec<(String, AggregateCheckpoint)> {
        self.aggregates
            .iter()
            .map(|(name, agg)| {
                let mut agg = agg.clone();
                for (key, (c, _)) in &self.containers {
                    let this = key.split_once('/').is_some_and(|(_, container)| container == name);
                    if let Some(end) = c.window_end_s.filter(|end| this && now_s < *end) {
                        agg.memory_peaks.subtract_sample(c.max_peak(), 1.0, end);
                    }
                }
                (name.clone(), agg.save_to_checkpoint())
            })
            .collect()
    }

    /// [`VerticalPodAutoscaler::load_checkpoint`] for every container of `saved` (as
    /// [`VerticalPodAutoscaler::save_checkpoints`] gives them), all or none: a history that does
    /// not load leaves this one as it was, and the error names its container.
    pub fn load_checkpoints(&mut self, saved: &[(String, AggregateCheckpoint)]) -> Result<(), String> {
        let mut loaded = self.clone();
        for (container, c) in saved {
            let created = c.last_sample_start_s.filter(|t| t.is_finite()).unwrap_or(0.0);
            loaded
                .load_checkpoint(container, c, created)
                .map_err(|e| format!("VPA history of container {container}: {e}"))?;
        }
        *self = loaded;
        Ok(())
    }

    /// Every container's target and bounds at the last observation, sorted by name (after
    /// `minAllowed`/`maxAllowed`).
    pub fn container_recommendations(&self) -> &[ContainerRecommendation] {
        &self.containers_latest
    }

    /// The latest target and bounds (after capping), once any history exists.
    pub fn recommendation(&self) -> Option<&RecommendedResources> {
        self.latest.as_ref()
    }

    /// The updater's view of each pod at the last observation.
    pub fn decisions(&self) -> &[UpdateDecision] {
        &self.decisions
    }

    /// Feeds one observation: OOM kills always, usage samples once per recommender interval;
    /// then recomputes the recommendation and the updater's decisions.
    pub fn observe(&mut self, obs: &Observation) {
        let template = obs.template.name.as_str();
        self.observed_s = Some(obs.time_s);
        let run = self.last_run_s.is_none_or(|t| obs.time_s - t >= RECOMMENDER_INTERVAL_S);
        let measure_start = obs.time_s - obs.interval_s;
        let (cpu_on, mem_on) = (self.spec.control_cpu, self.spec.control_memory);
        // Every interval of every pod: looked up without allocating (a pod's key is built in
        // one reused buffer and copied only when the container is new).
        let mut key = String::new();
        self.observations += 1;
        let stamp = self.observations;
        for pod in obs.pods.iter().filter(|p| !matches!(p.phase, PodPhase::Pending | PodPhase::Failed)) {
            // (container, usage, request) of each container of the pod.
            // A pod that lists no containers is one container named after the template.
            let single = [(template, pod.cpu_usage_cores, pod.memory_working_set_bytes, pod.resources.requests)]
                .into_iter()
                .filter(|_| pod.containers.is_empty());
            let listed = pod
                .containers
                .iter()
                .map(|c| (c.name.as_str(), c.cpu_usage_cores, c.memory_working_set_bytes, c.requests));
            for (i, (name, cpu, mem, req)) in single.chain(listed).enumerate() {
                if !self.aggregates.contains_key(name) {
                    let mut a = AggregateContainerState::new(obs.time_s);
                    a.controls_cpu = cpu_on;
                    a.controls_memory = mem_on;
                    self.aggregates.insert(name.to_string(), a);
                }
                let agg = self.aggregates.get_mut(name).expect("inserted above");
                key.clear();
                key.push_str(&pod.name);
                key.push('/');
                key.push_str(name);
                let (state, seen) = match self.containers.get_mut(&key) {
                    Some(entry) => entry,
                    None => self.containers.entry(key.clone()).or_default(),
                };
                *seen = stamp;
                if run {
                    if let Some(cpu) = cpu {
                        state.add_cpu_sample(agg, cpu, req.cpu_cores(), measure_start);
                    }
                    if let Some(mem) = mem {
                        state.add_memory_sample(agg, mem, measure_start, false);
                    }
                }
                // The pod-level OOM record is attributed to its first container.
                if i == 0 && pod.oom_killed_at_bytes.is_some() {
                    // A discarded (too old) OOM changes nothing; there is nothing else to do with it.
                    let _ = state.record_oom(agg, obs.time_s, req.memory_bytes as f64);
                }
            }
        }
        // A container this observation listed belongs to a live pod; only the others are looked
        // up among the pods (pending and failed ones are live too), and only if there are any.
        let mut live: Option<std::collections::HashSet<&str>> = None;
        self.containers.retain(|key, (_, seen)| {
            *seen == stamp
                || key.split_once('/').is_some_and(|(pod, _)| {
                    live.get_or_insert_with(|| obs.pods.iter().map(|p| p.name.as_str()).collect()).contains(pod)
                })
        });
        if run {
            self.last_run_s = Some(obs.time_s);
        }
        self.aggregates.retain(|_, agg| !agg.is_expired(obs.time_s));
        let active: BTreeMap<String, &AggregateContainerState> = self
            .aggregates
            .iter()
            .filter(|(_, a)| !a.cpu.is_empty() || !a.memory_peaks.is_empty())
            .map(|(k, a)| (k.clone(), a))
            .collect();
        let (min, max) = (self.spec.min_allowed, self.spec.max_allowed);
        let clamp = |c: ControlledAmounts| ControlledAmounts {
            cpu_millicores: c
                .cpu_millicores
                .map(|v| v.clamp(min.cpu_millicores, max.cpu_millicores.max(min.cpu_millicores))),
            memory_bytes: c.memory_bytes.map(|v| v.clamp(min.memory_bytes, max.memory_bytes.max(min.memory_bytes))),
        };
        self.containers_latest = estimator::map_to_list(&self.recommender.recommend_pod(&active))
            .into_iter()
            .map(|r| ContainerRecommendation {
                target: clamp(r.target),
                lower_bound: clamp(r.lower_bound),
                upper_bound: clamp(r.upper_bound),
                ..r
            })
            .collect();
        let states: Vec<&AggregateContainerState> = active.values().copied().collect();
        let names: Vec<&String> = active.keys().collect();
        let recs = self.recommender.recommend(&states);
        let first = names.iter().position(|n| n.as_str() == template).or((!names.is_empty()).then_some(0));
        self.latest = first.map(|i| cap(recs[i], self.spec.min_allowed, self.spec.max_allowed));
        let live_pods = obs.pods.iter().filter(|p| p.phase != PodPhase::Failed).count() as u32;
        let running =
            obs.pods.iter().filter(|p| matches!(p.phase, PodPhase::Starting | PodPhase::Ready)).count() as u32;
        let mut budget = evictable_pods(
            obs.desired_replicas,
            live_pods,
            running,
            self.spec.min_replicas,
            self.spec.eviction_tolerance,
        );
        self.decisions = match &self.latest {
            None => Vec::new(),
            Some(rec) => obs
                .pods
                .iter()
                .filter(|p| !matches!(p.phase, PodPhase::Pending | PodPhase::Failed))
                .map(|p| {
                    let started = p.ready_since_s.unwrap_or(p.created_at_s);
                    let quick_oom =
                        p.oom_killed_at_bytes.is_some() && obs.time_s - started < EVICT_AFTER_OOM_THRESHOLD_S;
                    let r = p.resources.requests;
                    let request =
                        Amounts { cpu_millicores: r.cpu_millicores as i64, memory_bytes: r.memory_bytes as i64 };
                    let mut d =
                        update_decision(&self.spec, rec, &p.name, request, obs.time_s - p.created_at_s, quick_oom);
                    d.evictable = d.update && budget > 0;
                    if d.evictable {
                        budget -= 1;
                    }
                    d
                })
                .collect(),
        };
    }

    /// The container resources the target implies, given the current ones.
    pub fn resources_for(&self, current: &ContainerResources) -> ContainerResources {
        let Some(rec) = &self.latest else { return current.clone() };
        let mut out = current.clone();
        let proportional = |old_req: u64, old_lim: u64, new_req: u64| -> u64 {
            match self.spec.controlled_values {
                ControlledValues::RequestsAndLimits if old_req > 0 => {
                    ((new_req as f64) * (old_lim as f64 / old_req as f64)).round() as u64
                }
                _ => old_lim.max(new_req),
            }
        };
        if self.spec.control_cpu {
            let new = rec.target.cpu_millicores.max(1) as u64;
            out.limits.cpu_millicores =
                proportional(current.requests.cpu_millicores, current.limits.cpu_millicores, new);
            out.requests.cpu_millicores = new;
        }
        if self.spec.control_memory {
            let new = rec.target.memory_bytes.max(1) as u64;
            out.limits.memory_bytes = proportional(current.requests.memory_bytes, current.limits.memory_bytes, new);
            out.requests.memory_bytes = new;
        }
        out
    }
}

impl Recommender for VerticalPodAutoscaler {
    fn name(&self) -> &str {
        "vpa"
    }

    /// The resources its spec controls; never replicas.
    fn scope(&self) -> Scope {
        Scope { replicas: false, cpu: self.spec.control_cpu, memory: self.spec.control_memory }
    }

    /// Keeps the replica count; changes the template when the updater would act on any pod.
    fn recommend(&mut self, obs: &Observation) -> Result<Recommendation, RecommenderError> {
        obs.validate()?;
        if self.spec.update_mode == UpdateMode::Initial {
            return Err(RecommenderError::Other(
                "VPA update mode Initial cannot drive the simulator: its Deployment template reaches running pods"
                    .into(),
            ));
        }
        self.observe(obs);
        // The updater acts only on pods its eviction restriction lets it evict.
        let act = self.spec.update_mode != UpdateMode::Off && self.decisions.iter().any(|d| d.update && d.evictable);
        let template = if act { self.resources_for(&obs.template) } else { obs.template.clone() };
        Ok(Recommendation { replicas: obs.desired_replicas, containers: vec![template] })
    }

    /// Forgets every sample, OOM and recommendation, as a recommender started without a
    /// checkpoint (a new simulator episode: the samples' times belong to the old cluster).
    fn restart(&mut self) {
        *self = Self::new(self.spec.clone());
    }
}

/// Resources in the simulator's units from VPA amounts.
pub fn to_resources(a: Amounts) -> Resources {
    Resources::new(a.cpu_millicores.max(0) as u64, a.memory_bytes.max(0) as u64)
}
