//! The embedded cluster simulator: a trace-driven model of Kubernetes Deployments on a
//! multi-node cluster, fast enough to train many agents on a laptop (closed-form queueing per
//! replica) and checked against a request-level discrete-event mode of the same model.

mod app;
mod cluster;
pub mod contention;
pub mod des;
pub mod fluid;
mod load;
pub mod population;
pub mod provisioning;
pub mod queueing;
pub mod replica;
mod scenario;
pub mod schedule;
mod segments;
pub mod validate;

pub use app::{
    Allocation, AppSpec, MAX_MEAN_CORES, MAX_REPLICAS, REFERENCE_CPU_MILLICORES, REFERENCE_UTILISATION,
    SLO_UTILISATION, STREAM_APP, STREAM_LOAD, STREAM_NOISE, allocation_for, generate_app, generate_app_in,
    generate_apps, generate_population, reference_allocation, replicas_for, size_for_traces, slo_p99_ms, stream_seed,
};
pub use cluster::{
    AppStepStats, CONTAINER, Continuation, DeploymentState, Dispatch, MAX_NODES, MAX_SIMULATED_REPLICAS,
    NodeCountError, POD_DISK_BPS, POD_NET_BPS, SimCluster, SimConfig, VerticalUpdate,
};
pub use load::{
    LoadSource, LoadState, MAX_TRACE_RATE_PER_S, PEAK_HORIZON_DAYS, SyntheticLoad, Trace, TraceError, load_traces,
    parse_traces,
};
pub use scenario::{Scenario, ScenarioError, ScenarioKind};
pub use segments::{REQUEST_SIZE_CV, RequestCost, Segment, SegmentKind, SegmentParams};
