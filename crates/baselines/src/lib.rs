//! The rule-based autoscalers: the baselines every result is measured against and the fallback
//! that keeps production safe while an RL agent learns. HPA and VPA follow upstream Kubernetes
//! constants and rounding; threshold step scaling and AIMD are the classic alternatives.
//!
//! [`Baseline`] / [`BaselineKind`] name and build them from a profile; [`dry_run`] answers
//! `aware recommend` from a JSON snapshot (the input model, its checks and the replay);
//! [`quantity`] parses Kubernetes quantity strings.

mod aimd;
pub mod dry_run;
mod hpa;
mod mpa;
pub mod quantity;
mod registry;
mod threshold;
mod vpa;

pub use aimd::{AdditiveIncreaseMultiplicativeDecrease, DECREASE_FACTOR, MEMORY_PRESSURE};
pub use hpa::{
    Behavior, BehaviorSpec, ContainerKind, ContainerRequest, ControllerFlags, Decision, HorizontalPodAutoscaler,
    HpaError, HpaSpec, Limit, MetricReplicas, MetricSample, MetricSpec, MetricTarget, Phase, PodMetrics, PodState,
    PodView, PolicyKind, ReadyCondition, ReplicaCalculator, ResourceName, ResourceReplicas, ScalingPolicy,
    ScalingRules, ScalingRulesSpec, SelectPolicy, Tolerances, UnlistedPodMetrics, behavior, pod_states, pod_view,
    pod_view_with, replica_calculator,
};
pub use mpa::MultidimPodAutoscaler;
pub use registry::{Baseline, BaselineError, BaselineKind};
pub use threshold::ThresholdStepScaling;
pub use vpa::{
    AggregateCheckpoint, Amounts, ContainerRecommendation, ControlledAmounts, ControlledValues,
    EVICT_AFTER_OOM_THRESHOLD_S, HistogramCheckpoint, HistogramError, MIN_CHANGE_PRIORITY,
    POD_LIFETIME_UPDATE_THRESHOLD_S, PodResourceRecommender, RECOMMENDER_INTERVAL_S, RecommendedResources,
    UPDATER_EVICTION_TOLERANCE, UPDATER_MIN_REPLICAS, UpdateDecision, UpdateMode, VerticalPodAutoscaler, VpaSpec, cap,
    estimator, evictable_pods, histogram, model, to_resources, update_decision,
};
