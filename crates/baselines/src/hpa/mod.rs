//! Kubernetes HorizontalPodAutoscaler (`autoscaling/v2`, resource metrics), faithful to
//! upstream `pkg/controller/podautoscaler`: the same grouping of pods, integer utilisation,
//! tolerance, invalid-metric rules, stabilisation and rate limits.

pub mod behavior;
pub mod replica_calculator;

use std::collections::BTreeMap;

use aware_core::{
    Observation, PodObservation, PodPhase, Profile, Recommendation, Recommender, RecommenderError, Resources, Scope,
};
use serde::{Deserialize, Serialize};

pub use behavior::{Behavior, Limit, PolicyKind, ScalingPolicy, ScalingRules, ScalingRulesSpec, SelectPolicy};
pub use replica_calculator::{
    ContainerKind, ContainerRequest, HpaError, MetricReplicas, MetricSample, Phase, PodMetrics, PodState,
    ReadyCondition, ReplicaCalculator, ResourceName, ResourceReplicas, Tolerances,
};

use behavior::{Normalization, ScaleEvent, TimestampedRecommendation};

/// A metric's target, as `autoscaling/v2` `MetricTarget` has it.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
#[non_exhaustive]
pub enum MetricTarget {
    /// `averageUtilization`: percent of the pods' requests (any value > 0, above 100 too).
    Utilization(i32),
    /// `averageValue`, milli-units of the metric per pod.
    AverageValueMilli(i64),
}

/// One entry of `spec.metrics` the controller computes from pods.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
#[non_exhaustive]
pub enum MetricSpec {
    /// `type: Resource`: the pods' total for CPU or memory.
    Resource { resource: ResourceName, target: MetricTarget },
    /// `type: ContainerResource`: one container's CPU or memory.
    ContainerResource { resource: ResourceName, container: String, target: MetricTarget },
    /// `type: Pods`: a per-pod custom metric with an `averageValue` target (milli-units).
    Pods { name: String, target_average_milli: i64 },
}

impl MetricSpec {
    /// CPU utilisation at `percent` of requests: the classic HPA.
    pub fn cpu_utilisation(percent: i32) -> Self {
        MetricSpec::Resource { resource: ResourceName::Cpu, target: MetricTarget::Utilization(percent) }
    }
}

/// `behavior` as a user writes it; either direction may be left to the defaults.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
pub struct BehaviorSpec {
    pub scale_up: Option<ScalingRulesSpec>,
    pub scale_down: Option<ScalingRulesSpec>,
    /// `scaleUp.tolerance` (feature `HPAConfigurableTolerance`); `None`: the controller flag.
    #[serde(default)]
    pub scale_up_tolerance: Option<f64>,
    /// `scaleDown.tolerance`.
    #[serde(default)]
    pub scale_down_tolerance: Option<f64>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct HpaSpec {
    pub min_replicas: i32,
    pub max_replicas: i32,
    pub metrics: Vec<MetricSpec>,
    /// `None` selects the legacy path (5-minute max-based downscale stabilisation, scale-up to
    /// at most `max(2 × current, 4)`); the API server defaults `behavior` on `autoscaling/v2`
    /// objects, so `Some` is what a current cluster runs.
    pub behavior: Option<BehaviorSpec>,
}

/// The controller's flags that matter here, with upstream defaults.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct ControllerFlags {
    pub calculator: ReplicaCalculator,
    /// `--horizontal-pod-autoscaler-downscale-stabilization`, 5 minutes.
    pub downscale_stabilisation_s: i32,
}

impl Default for ControllerFlags {
    fn default() -> Self {
        Self { calculator: ReplicaCalculator::default(), downscale_stabilisation_s: 300 }
    }
}

/// The outcome of one reconcile, for dry runs and reports.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Decision {
    pub current_replicas: i32,
    pub desired_replicas: i32,
    /// Largest proposal over the metrics before normalisation, when they could be computed.
    pub metric_replicas: Option<i32>,
    /// Per metric: utilisation (percent of request) when it could be computed.
    pub utilizations: Vec<Option<i32>>,
    /// Per metric: the current average per pod in the metric's unit (cores, bytes, the custom
    /// metric's unit), truncated to whole milli-units as upstream's quantities are; `None` where
    /// it could not be computed.
    pub average_values: Vec<Option<f64>>,
    pub limit: Option<Limit>,
    /// Why the HPA kept the current count without computing one (invalid metrics).
    pub error: Option<String>,
}

/// Samples the metrics API returned for a pod the HPA's selector did not list (INTERFACES
/// `unlisted_pod_metrics`): upstream ignores them for resource metrics (no request to divide
/// by) and averages them in for `Pods` metrics.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct UnlistedPodMetrics {
    pub pod: String,
    #[serde(default)]
    pub cpu_usage_cores: Option<f64>,
    #[serde(default)]
    pub custom_metrics: BTreeMap<String, f64>,
}

#[derive(Debug, Clone)]
pub struct HorizontalPodAutoscaler {
    pub spec: HpaSpec,
    pub flags: ControllerFlags,
    /// Extra samples for pods that are not in the observation, used by `recommend`.
    pub unlisted_pod_metrics: Vec<UnlistedPodMetrics>,
    behavior: Option<Behavior>,
    recommendations: Vec<TimestampedRecommendation>,
    scale_up_events: Vec<ScaleEvent>,
    scale_down_events: Vec<ScaleEvent>,
    last: Option<Decision>,
}

/// The per-resource view of the pods and the samples the metrics API would return.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct PodView {
    pub pods: Vec<PodState>,
    pub samples: BTreeMap<String, MetricSample>,
}

impl HorizontalPodAutoscaler {
    pub fn new(spec: HpaSpec, mut flags: ControllerFlags) -> Self {
        if let Some(b) = &spec.behavior {
            let t = &mut flags.calculator.tolerances;
            t.scale_up = b.scale_up_tolerance.unwrap_or(t.scale_up);
            t.scale_down = b.scale_down_tolerance.unwrap_or(t.scale_down);
        }
        let behavior = spec.behavior.as_ref().map(|b| Behavior {
            scale_up: ScalingRules::from_spec(b.scale_up.as_ref(), ScalingRules::default_scale_up()),
            scale_down: ScalingRules::from_spec(
                b.scale_down.as_ref(),
                ScalingRules::default_scale_down(flags.downscale_stabilisation_s),
            ),
        });
        Self {
            spec,
            flags,
            unlisted_pod_metrics: Vec::new(),
            behavior,
            recommendations: Vec::new(),
            scale_up_events: Vec::new(),
            scale_down_events: Vec::new(),
            last: None,
        }
    }

    /// CPU-utilisation HPA with the profile's target and replica bounds and default behaviour.
    pub fn from_profile(profile: &Profile) -> Self {
        let spec = HpaSpec {
            min_replicas: profile.bounds.min_replicas as i32,
            max_replicas: profile.bounds.max_replicas as i32,
            metrics: vec![MetricSpec::cpu_utilisation((profile.targets.cpu_utilisation * 100.0).round() as i32)],
            behavior: Some(BehaviorSpec::default()),
        };
        Self::new(spec, ControllerFlags::default())
    }

    pub fn last_decision(&self) -> Option<&Decision> {
        self.last.as_ref()
    }

    /// Upstream `reconcileAutoscaler` for one sync: `views` holds, per metric of the spec, the
    /// pods and samples for that metric's resource.
    pub fn reconcile(&mut self, now_s: f64, current: i32, views: &[PodView]) -> Decision {
        let spec = &self.spec;
        let mut decision = Decision {
            current_replicas: current,
            desired_replicas: current,
            metric_replicas: None,
            utilizations: vec![None; spec.metrics.len()],
            average_values: vec![None; spec.metrics.len()],
            limit: None,
            error: None,
        };
        let desired;
        if current == 0 && spec.min_replicas != 0 {
            // Scaled to zero by hand: autoscaling is disabled.
            self.last = Some(decision.clone());
            return decision;
        } else if current > spec.max_replicas {
            desired = spec.max_replicas;
        } else if current < spec.min_replicas {
            desired = spec.min_replicas;
        } else {
            let mut proposal = 0;
            let mut invalid: Vec<HpaError> = Vec::new();
            for (i, metric) in spec.metrics.iter().enumerate() {
                let empty = PodView::default();
                let view = views.get(i).unwrap_or(&empty);
                let calc = &self.flags.calculator;
                let (pods, samples) = (&view.pods, &view.samples);
                let result = match metric {
                    MetricSpec::Resource { resource, target }
                    | MetricSpec::ContainerResource { resource, target, .. } => {
                        let container = match metric {
                            MetricSpec::ContainerResource { container, .. } => Some(container.as_str()),
                            _ => None,
                        };
                        match *target {
                            MetricTarget::Utilization(u) => calc
                                .resource_replicas(now_s, current, u, *resource, container, pods, samples)
                                .map(|r| (r.replicas, Some(r.utilisation), r.raw_average)),
                            MetricTarget::AverageValueMilli(v) => calc
                                .raw_resource_replicas(now_s, current, v, *resource, pods, samples)
                                .map(|r| (r.replicas, None, r.usage)),
                        }
                    }
                    MetricSpec::Pods { name, target_average_milli } => calc
                        .metric_replicas(now_s, current, *target_average_milli, name, pods, samples)
                        .map(|r| (r.replicas, None, r.usage)),
                };
                match result {
                    Ok((replicas, utilisation, average)) => {
                        decision.utilizations[i] = utilisation;
                        decision.average_values[i] = Some(average as f64 / 1000.0);
                        proposal = proposal.max(replicas);
                    }
                    Err(e) => invalid.push(e),
                }
            }
            // All metrics invalid, or some invalid and the valid ones would scale down: keep.
            if !invalid.is_empty() && (invalid.len() >= spec.metrics.len() || proposal < current) {
                let error = HpaError::InvalidMetrics {
                    invalid: invalid.len(),
                    total: spec.metrics.len(),
                    first: Box::new(invalid.remove(0)),
                };
                decision.error = Some(error.to_string());
                self.last = Some(decision.clone());
                return decision;
            }
            decision.metric_replicas = Some(proposal);
            let (normalized, limit) = match &self.behavior {
                Some(behavior) => {
                    let mut n = Normalization {
                        now_s,
                        behavior,
                        min_replicas: spec.min_replicas,
                        max_replicas: spec.max_replicas,
                        current_replicas: current,
                        desired_replicas: proposal,
                    };
                    n.desired_replicas = behavior::stabilize_with_behaviors(&n, &mut self.recommendations);
                    behavior::convert_with_behavior_rate(&n, &self.scale_up_events, &self.scale_down_events)
                }
                None => {
                    let stabilized = behavior::stabilize_legacy(
                        now_s,
                        self.flags.downscale_stabilisation_s as f64,
                        proposal,
                        &mut self.recommendations,
                    );
                    behavior::convert_with_rules(current, stabilized, spec.min_replicas, spec.max_replicas)
                }
            };
            decision.limit = Some(limit);
            desired = normalized;
        }
        if desired != current
            && let Some(behavior) = &self.behavior
        {
            behavior::store_scale_event(
                now_s,
                behavior,
                &mut self.scale_up_events,
                &mut self.scale_down_events,
                current,
                desired,
            );
        }
        decision.desired_replicas = desired;
        self.last = Some(decision.clone());
        decision
    }
}

/// The pod's phase and Ready condition as the HPA sees them. A restarted container (crash
/// loop, OOM kill) is Running with Ready=False since its last crash, which the observation
/// places in the current interval; upstream then counts its sample once the CPU initialisation
/// period is over, because the pod has been ready before.
fn phase_and_ready(obs: &Observation, p: &PodObservation) -> (Phase, Option<ReadyCondition>) {
    match p.phase {
        PodPhase::Pending => (Phase::Pending, None),
        PodPhase::Failed => (Phase::Failed, None),
        PodPhase::Starting if p.restarts > 0 => {
            (Phase::Running, Some(ReadyCondition { ready: false, last_transition_s: obs.time_s - obs.interval_s }))
        }
        // A starting container: Running with Ready=False since creation.
        PodPhase::Starting => {
            (Phase::Running, Some(ReadyCondition { ready: false, last_transition_s: p.created_at_s }))
        }
        PodPhase::Ready => (
            Phase::Running,
            Some(ReadyCondition { ready: true, last_transition_s: p.ready_since_s.unwrap_or(p.created_at_s) }),
        ),
    }
}

fn milli(resource: ResourceName, r: &Resources) -> i64 {
    match resource {
        ResourceName::Cpu => r.cpu_millicores as i64,
        ResourceName::Memory => (r.memory_bytes as i64).saturating_mul(1000),
    }
}

fn usage_milli(resource: ResourceName, cpu_cores: Option<f64>, memory_bytes: Option<f64>) -> Option<i64> {
    let v = match resource {
        ResourceName::Cpu => cpu_cores? * 1000.0,
        ResourceName::Memory => memory_bytes? * 1000.0,
    };
    // `as` saturates; the observation was validated finite.
    Some(v.round() as i64)
}

/// The pods as the HPA's pod lister returns them, for `resource` (a zero request means none, as
/// a Kubernetes container without one).
pub fn pod_states(obs: &Observation, resource: ResourceName) -> Vec<PodState> {
    obs.pods
        .iter()
        .map(|p| {
            let (phase, ready) = phase_and_ready(obs, p);
            let request = |r: &Resources| Some(milli(resource, r)).filter(|&v| v > 0);
            let containers = if p.containers.is_empty() {
                vec![ContainerRequest {
                    name: obs.template.name.clone(),
                    kind: ContainerKind::Regular,
                    request_milli: request(&p.resources.requests),
                }]
            } else {
                p.containers
                    .iter()
                    .map(|c| ContainerRequest {
                        name: c.name.clone(),
                        kind: ContainerKind::Regular,
                        request_milli: request(&c.requests),
                    })
                    .collect()
            };
            PodState {
                name: p.name.clone(),
                phase,
                deleting: p.deleting,
                start_time_s: (p.phase != PodPhase::Pending).then_some(p.created_at_s),
                ready,
                containers,
                pod_request_milli: None,
            }
        })
        .collect()
}

/// What the HPA sees of a workload for one metric: the pods with their phase, start time and
/// Ready condition, and the metrics API's samples (a pod without one is "missing").
pub fn pod_view(obs: &Observation, metric: &MetricSpec) -> PodView {
    pod_view_with(obs, metric, &[])
}

/// [`pod_view`] plus samples for pods the observation does not list.
pub fn pod_view_with(obs: &Observation, metric: &MetricSpec, unlisted: &[UnlistedPodMetrics]) -> PodView {
    let resource = match metric {
        MetricSpec::Resource { resource, .. } | MetricSpec::ContainerResource { resource, .. } => *resource,
        MetricSpec::Pods { .. } => ResourceName::Cpu,
    };
    let mut view = PodView { pods: pod_states(obs, resource), samples: BTreeMap::new() };
    match metric {
        MetricSpec::Pods { name, .. } => {
            for p in obs.pods.iter() {
                if let Some(v) = p.custom_metrics.get(name) {
                    let value_milli = (v * 1000.0).round() as i64;
                    view.samples.insert(
                        p.name.clone(),
                        MetricSample { value_milli, timestamp_s: obs.time_s, window_s: obs.interval_s },
                    );
                }
            }
            for u in unlisted {
                if let Some(v) = u.custom_metrics.get(name) {
                    let value_milli = (v * 1000.0).round() as i64;
                    view.samples.insert(
                        u.pod.clone(),
                        MetricSample { value_milli, timestamp_s: obs.time_s, window_s: obs.interval_s },
                    );
                }
            }
        }
        MetricSpec::Resource { .. } | MetricSpec::ContainerResource { .. } => {
            let container = match metric {
                MetricSpec::ContainerResource { container, .. } => Some(container.as_str()),
                _ => None,
            };
            // What `resource_metric_info` reads from the metrics API's per-container usage,
            // computed per pod without building that response: this runs every sync for every
            // pod. A later entry of the same pod replaces an earlier one (unlisted pods last).
            let template = obs.template.name.as_str();
            let listed = obs.pods.iter().filter(|p| p.phase != PodPhase::Pending).map(|p| {
                let value = if p.containers.is_empty() {
                    let usage = usage_milli(resource, p.cpu_usage_cores, p.memory_working_set_bytes);
                    replica_calculator::pod_metric_value([(template, usage)], container)
                } else {
                    let usage = p.containers.iter().map(|c| {
                        (c.name.as_str(), usage_milli(resource, c.cpu_usage_cores, c.memory_working_set_bytes))
                    });
                    replica_calculator::pod_metric_value(usage, container)
                };
                (p.name.as_str(), value)
            });
            let unlisted = unlisted.iter().filter(|_| resource == ResourceName::Cpu).map(|u| {
                let usage = usage_milli(resource, u.cpu_usage_cores, None);
                (u.pod.as_str(), replica_calculator::pod_metric_value([(template, usage)], container))
            });
            let values: BTreeMap<&str, Option<i64>> = listed.chain(unlisted).collect();
            view.samples = values
                .into_iter()
                .filter_map(|(pod, value)| {
                    let sample =
                        MetricSample { value_milli: value?, timestamp_s: obs.time_s, window_s: obs.interval_s };
                    Some((pod.to_string(), sample))
                })
                .collect();
        }
    }
    view
}

impl Recommender for HorizontalPodAutoscaler {
    fn name(&self) -> &str {
        "hpa"
    }

    /// Replicas only: the pod template passes unchanged.
    fn scope(&self) -> Scope {
        Scope { replicas: true, cpu: false, memory: false }
    }

    fn recommend(&mut self, obs: &Observation) -> Result<Recommendation, RecommenderError> {
        obs.validate()?;
        let views: Vec<PodView> =
            self.spec.metrics.iter().map(|m| pod_view_with(obs, m, &self.unlisted_pod_metrics)).collect();
        let decision = self.reconcile(obs.time_s, obs.desired_replicas as i32, &views);
        Ok(Recommendation { replicas: decision.desired_replicas.max(0) as u32, containers: vec![obs.template.clone()] })
    }

    /// Forgets every recommendation and scale event. Kept across a simulator episode (whose
    /// clock starts again), the previous episode's history could lie "in the future", inside
    /// every stabilisation window and scaling period for ever, and freeze the replica count.
    fn restart(&mut self) {
        self.recommendations.clear();
        self.scale_up_events.clear();
        self.scale_down_events.clear();
        self.last = None;
    }
}
