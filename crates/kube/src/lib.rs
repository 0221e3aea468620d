//! AWARE on Kubernetes: the `MultidimPodAutoscaler` CRD (wire-compatible with upstream's
//! `autoscaling.k8s.io/v1alpha1`), the recommender controller and updater (kube-runtime), the
//! Prometheus-backed `Cluster`, and the Prometheus exposition of simulated pods.
//!
//! See `README.md` in this crate for the quick start and what was and was not tested.

mod controller;
mod crd;
mod decide;
pub mod http;
pub mod leader;
mod metrics;
pub mod observe;
mod prometheus;
pub mod quantity;
pub mod record;
pub mod state;
pub mod webhook;

pub use controller::{
    Context, ControllerConfig, ControllerError, FIELD_MANAGER, MIN_CHANGE_FRACTION, PassOutcome, RunError, RunOptions,
    WebhookOptions, backoff, clamp, error_policy, forget_mpa, open_store, reconcile, reconcile_once, run, run_blocking,
    watch_event,
};
pub use crd::{
    CONDITION_ABLE_TO_SCALE, CONDITION_CONFIG_DEPRECATED, CONDITION_CONFIG_UNSUPPORTED, CONDITION_FETCHING_HISTORY,
    CONDITION_LOW_CONFIDENCE, CONDITION_NO_PODS_MATCHED, CONDITION_RECOMMENDATION_PROVIDED, CONDITION_SCALING_ACTIVE,
    CONDITION_SCALING_LIMITED, ContainerControlledValues, ContainerResourcePolicy, ContainerScalingMode,
    ControlledResource, DEFAULT_RECOMMENDER_NAME, ExtensionError, Goals, HorizontalScalingConstraints,
    MinMaxVerticalScalingLimits, MultidimPodAutoscaler, MultidimPodAutoscalerCondition, MultidimPodAutoscalerSpec,
    MultidimPodAutoscalerStatus, PROFILE_ANNOTATION, PodResourcePolicy, PodUpdatePolicy, QUANTITY_PATTERN,
    RecommendedContainerResources, RecommendedPodResources, RecommenderSelector, ResourceList, ScalingConstraints,
    UpdateMode, VerticalScalingConstraints, crd, crd_yaml, json_schema_for_validation, open_api_v3_schema,
};
pub use decide::{Decider, LEARNED_AGENT_EVERY, Learned, LifecycleDecider, MpaDefaultDecider};
pub use metrics::{ControllerMetrics, ExporterHandle, ExportingObserver, MetricsExporter};
pub use prometheus::{Actuator, PrometheusCluster, PrometheusConfig, PrometheusConfigError, Queries, Sample};
