//! Kubernetes VerticalPodAutoscaler: the recommender (decaying histograms, percentiles, margin,
//! confidence bounds, minimums) and the updater's decision of when a pod is worth updating,
//! applied through the simulator's Deployment template.

pub mod estimator;
pub mod histogram;
pub mod model;

use std::collections::BTreeMap;

use aware_core::{
    ContainerResources, Observation, PodPhase, Profile, Recommendation, Recommender, RecommenderError, Resources,
};
use serde::{Deserialize, Serialize};

pub use estimator::{Amounts, PodResourceRecommender, RecommendedResources};
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
                cpu_millicores: b.min_cpu_millicores as i64,
                memory_bytes: b.min_memory_bytes() as i64,
            },
            max_allowed: Amounts {
                cpu_millicores: b.max_cpu_millicores as i64,
                memory_bytes: b.max_memory_bytes() as i64,
            },
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
    pub update: bool,
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
    UpdateDecision { pod: pod.to_string(), outside_recommended_range: outside, quick_oom, resource_diff: diff, update }
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
    containers: BTreeMap<String, ContainerState>,
    last_run_s: Option<f64>,
    latest: Option<RecommendedResources>,
    decisions: Vec<UpdateDecision>,
}

impl VerticalPodAutoscaler {
    pub fn new(spec: VpaSpec) -> Self {
        Self {
            spec,
            recommender: PodResourceRecommender::default(),
            aggregates: BTreeMap::new(),
            containers: BTreeMap::new(),
            last_run_s: None,
            latest: None,
            decisions: Vec::new(),
        }
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
        let container = obs.template.name.clone();
        let agg = self.aggregates.entry(container.clone()).or_insert_with(|| AggregateContainerState::new(obs.time_s));
        let run = self.last_run_s.is_none_or(|t| obs.time_s - t >= RECOMMENDER_INTERVAL_S);
        let measure_start = obs.time_s - obs.interval_s;
        for pod in obs.pods.iter().filter(|p| p.phase != PodPhase::Pending) {
            let state = self.containers.entry(pod.name.clone()).or_default();
            let req = pod.resources.requests;
            if run {
                if let Some(cpu) = pod.cpu_usage_cores {
                    state.add_cpu_sample(agg, cpu, req.cpu_cores(), measure_start);
                }
                if let Some(mem) = pod.memory_working_set_bytes {
                    state.add_memory_sample(agg, mem, measure_start, false);
                }
            }
            if pod.oom_killed_at_bytes.is_some() {
                // A discarded (too old) OOM changes nothing; there is nothing else to do with it.
                let _ = state.record_oom(agg, obs.time_s, req.memory_bytes as f64);
            }
        }
        let live: Vec<&str> = obs.pods.iter().map(|p| p.name.as_str()).collect();
        self.containers.retain(|name, _| live.contains(&name.as_str()));
        if run {
            self.last_run_s = Some(obs.time_s);
        }
        if agg.is_expired(obs.time_s) {
            self.aggregates.remove(&container);
            self.latest = None;
        } else if !agg.cpu.is_empty() || !agg.memory_peaks.is_empty() {
            let rec = self.recommender.recommend(&[agg])[0];
            self.latest = Some(cap(rec, self.spec.min_allowed, self.spec.max_allowed));
        }
        self.decisions = match &self.latest {
            None => Vec::new(),
            Some(rec) => obs
                .pods
                .iter()
                .filter(|p| p.phase != PodPhase::Pending)
                .map(|p| {
                    let started = p.ready_since_s.unwrap_or(p.created_at_s);
                    let quick_oom =
                        p.oom_killed_at_bytes.is_some() && obs.time_s - started < EVICT_AFTER_OOM_THRESHOLD_S;
                    let r = p.resources.requests;
                    let request =
                        Amounts { cpu_millicores: r.cpu_millicores as i64, memory_bytes: r.memory_bytes as i64 };
                    update_decision(&self.spec, rec, &p.name, request, obs.time_s - p.created_at_s, quick_oom)
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

    /// Keeps the replica count; changes the template when the updater would act on any pod.
    fn recommend(&mut self, obs: &Observation) -> Result<Recommendation, RecommenderError> {
        obs.validate().map_err(RecommenderError::BadObservation)?;
        if self.spec.update_mode == UpdateMode::Initial {
            return Err(RecommenderError::Other(
                "VPA update mode Initial cannot drive the simulator: its Deployment template reaches running pods"
                    .into(),
            ));
        }
        self.observe(obs);
        let act = self.spec.update_mode != UpdateMode::Off && self.decisions.iter().any(|d| d.update);
        let template = if act { self.resources_for(&obs.template) } else { obs.template.clone() };
        Ok(Recommendation { replicas: obs.desired_replicas, containers: vec![template] })
    }
}

/// Resources in the simulator's units from VPA amounts.
pub fn to_resources(a: Amounts) -> Resources {
    Resources::new(a.cpu_millicores.max(0) as u64, a.memory_bytes.max(0) as u64)
}
