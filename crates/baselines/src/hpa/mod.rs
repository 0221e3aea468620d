//! Kubernetes HorizontalPodAutoscaler (`autoscaling/v2`, resource metrics), faithful to
//! upstream `pkg/controller/podautoscaler`: the same grouping of pods, integer utilisation,
//! tolerance, invalid-metric rules, stabilisation and rate limits.

pub mod behavior;
pub mod replica_calculator;

use std::collections::BTreeMap;

use aware_core::{Observation, PodPhase, Profile, Recommendation, Recommender, RecommenderError};
use serde::{Deserialize, Serialize};

pub use behavior::{Behavior, Limit, PolicyKind, ScalingPolicy, ScalingRules, ScalingRulesSpec, SelectPolicy};
pub use replica_calculator::{
    HpaError, MetricSample, Phase, PodState, ReadyCondition, ReplicaCalculator, ResourceName, Tolerances,
};

use behavior::{Normalization, ScaleEvent, TimestampedRecommendation};

/// One `type: Resource` metric with an `averageUtilization` target (percent of requests).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct ResourceTarget {
    pub resource: ResourceName,
    pub target_utilization: i32,
}

/// `behavior` as a user writes it; either direction may be left to the defaults.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
pub struct BehaviorSpec {
    pub scale_up: Option<ScalingRulesSpec>,
    pub scale_down: Option<ScalingRulesSpec>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct HpaSpec {
    pub min_replicas: i32,
    pub max_replicas: i32,
    pub metrics: Vec<ResourceTarget>,
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
    pub limit: Option<Limit>,
    /// Why the HPA kept the current count without computing one (invalid metrics).
    pub error: Option<String>,
}

#[derive(Debug, Clone)]
pub struct HorizontalPodAutoscaler {
    pub spec: HpaSpec,
    pub flags: ControllerFlags,
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
    pub fn new(spec: HpaSpec, flags: ControllerFlags) -> Self {
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
            metrics: vec![ResourceTarget {
                resource: ResourceName::Cpu,
                target_utilization: (profile.targets.cpu_utilisation * 100.0).round() as i32,
            }],
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
            for (i, target) in spec.metrics.iter().enumerate() {
                let view = views.get(i).cloned().unwrap_or_default();
                match self.flags.calculator.resource_replicas(
                    now_s,
                    current,
                    target.target_utilization,
                    target.resource,
                    &view.pods,
                    &view.samples,
                ) {
                    Ok(r) => {
                        decision.utilizations[i] = Some(r.utilization);
                        proposal = proposal.max(r.replicas);
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

/// What the HPA sees of a workload: pods with their phase, start time and Ready condition, and
/// a metrics-server sample per pod with usage (a pod without one is "missing").
pub fn pod_view(obs: &Observation, resource: ResourceName) -> PodView {
    let mut view = PodView::default();
    for p in &obs.pods {
        let (phase, ready) = match p.phase {
            PodPhase::Pending => (Phase::Pending, None),
            // A starting (or restarting) container: Running with Ready=False since creation.
            PodPhase::Starting => {
                (Phase::Running, Some(ReadyCondition { ready: false, last_transition_s: p.created_at_s }))
            }
            PodPhase::Ready => (
                Phase::Running,
                Some(ReadyCondition { ready: true, last_transition_s: p.ready_since_s.unwrap_or(p.created_at_s) }),
            ),
        };
        let r = p.resources.requests;
        let (request, usage) = match resource {
            ResourceName::Cpu => (r.cpu_millicores as i64, p.cpu_usage_cores.map(|c| (c * 1000.0).round() as i64)),
            ResourceName::Memory => {
                (r.memory_bytes as i64 * 1000, p.memory_working_set_bytes.map(|m| (m * 1000.0).round() as i64))
            }
        };
        view.pods.push(PodState {
            name: p.name.clone(),
            phase,
            deleting: false,
            start_time_s: (p.phase != PodPhase::Pending).then_some(p.created_at_s),
            ready,
            request_milli: (request > 0).then_some(request),
        });
        if let Some(value_milli) = usage {
            view.samples.insert(
                p.name.clone(),
                MetricSample { value_milli, timestamp_s: obs.time_s, window_s: obs.interval_s },
            );
        }
    }
    view
}

impl Recommender for HorizontalPodAutoscaler {
    fn name(&self) -> &str {
        "hpa"
    }

    fn recommend(&mut self, obs: &Observation) -> Result<Recommendation, RecommenderError> {
        obs.validate().map_err(RecommenderError::BadObservation)?;
        let views: Vec<PodView> = self.spec.metrics.iter().map(|m| pod_view(obs, m.resource)).collect();
        let decision = self.reconcile(obs.time_s, obs.desired_replicas as i32, &views);
        Ok(Recommendation { replicas: decision.desired_replicas.max(0) as u32, containers: vec![obs.template.clone()] })
    }
}
