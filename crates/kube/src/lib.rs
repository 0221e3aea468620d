//! AWARE on Kubernetes: the `MultidimPodAutoscaler` CRD (wire-compatible with upstream's
//! `autoscaling.k8s.io/v1alpha1`), the recommender controller and updater (kube-runtime), the
//! Prometheus-backed `Cluster`, and the Prometheus exposition of simulated pods.
//!
//! See `README.md` in this crate for the quick start and what was and was not tested.

pub mod controller;
pub mod crd;
pub mod decide;
pub mod http;
pub mod leader;
pub mod metrics;
pub mod observe;
pub mod prometheus;
pub mod quantity;

pub use controller::{Context, ControllerConfig, ControllerError, PassOutcome};
pub use crd::{
    MultidimPodAutoscaler, MultidimPodAutoscalerSpec, MultidimPodAutoscalerStatus, UpdateMode, crd, crd_yaml,
};
pub use decide::{Decider, MpaDefaultDecider};
pub use metrics::{ExporterHandle, MetricsExporter};
pub use prometheus::{Actuator, PrometheusCluster, PrometheusConfig};
