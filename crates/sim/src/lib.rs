//! The embedded cluster simulator: a trace-driven model of Kubernetes Deployments on a
//! multi-node cluster, fast enough to train many agents on a laptop (closed-form queueing per
//! replica) and checked against a request-level discrete-event mode of the same model.

pub mod app;
pub mod cluster;
pub mod contention;
pub mod des;
pub mod fluid;
pub mod load;
pub mod population;
pub mod provisioning;
pub mod queueing;
pub mod replica;
pub mod scenario;
pub mod schedule;
pub mod segments;
pub mod validate;

pub use app::{
    Allocation, AppSpec, generate_app, generate_app_in, generate_apps, generate_population, size_for_traces,
};
pub use aware_core::profile::Population;
pub use cluster::{AppStepStats, CONTAINER, Dispatch, SimCluster, SimConfig, VerticalUpdate};
pub use load::{LoadSource, SyntheticLoad, Trace, TraceError, load_traces, parse_traces};
pub use scenario::{Scenario, ScenarioKind};
pub use segments::{RequestCost, Segment, SegmentKind};
