//! The recommender controller and the updater for `MultidimPodAutoscaler` objects.
//!
//! One level-triggered reconcile per MPA (kube-runtime `Controller`):
//! 1. skip MPAs whose `spec.recommenders` names another recommender (status is never written for
//!    them); an empty list is upstream's default recommender and is served only with
//!    [`ControllerConfig::claim_default`];
//! 2. read the target's scale subresource (desired replicas, pod selector), its pods and their
//!    usage (`metrics.k8s.io`), build the `Observation`, ask the [`Decider`] (once per MPA, for a
//!    decider that wants it, after reading the target's `spec.template`: the pod resources it
//!    was deployed with, see [`Decider::wants_declared`]);
//! 3. clamp the proposal to `constraints` and `resourcePolicy`;
//! 4. the updater (when enabled, and the update mode is not `Off`) sets replicas through the
//!    scale subresource and resources through `pods/{name}/resize` (`InPlaceOrRecreate`), or
//!    evicts one pod per pass (`Recreate` / `Auto`) when no PodDisruptionBudget forbids it and
//!    the ready pods stay at or above the live-pod minimum;
//! 5. write `status` (recommendation, replicas, conditions) with the object's resourceVersion:
//!    a 409 conflict re-reads the object and retries; any other API error fails the pass, which
//!    the error policy requeues with exponential back-off. The computed recommendation is kept
//!    until it is written, so a failed write loses nothing and does not feed the recommender the
//!    same world twice.

use std::collections::{BTreeMap, HashMap, HashSet};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use aware_core::{ContainerResources, Recommendation, RecommenderError};
use futures::StreamExt;
use k8s_openapi::api::autoscaling::v1::Scale;
use k8s_openapi::api::core::v1::Pod;
use k8s_openapi::api::policy::v1::PodDisruptionBudget;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use kube::api::{Api, DynamicObject, EvictParams, ListParams, Patch, PatchParams, PostParams};
use kube::core::{ApiResource, GroupVersionKind, Selector, SelectorExt};
use kube::runtime::controller::{Action, Controller};
use kube::runtime::{WatchStreamExt, watcher};
use kube::{Client, ResourceExt};
use serde_json::json;

use crate::crd::{
    CONDITION_ABLE_TO_SCALE, CONDITION_CONFIG_UNSUPPORTED, CONDITION_RECOMMENDATION_PROVIDED, CONDITION_SCALING_ACTIVE,
    CONDITION_SCALING_LIMITED, ContainerResourcePolicy, ExtensionError, MultidimPodAutoscaler,
    MultidimPodAutoscalerCondition, MultidimPodAutoscalerStatus, RecommendedContainerResources,
    RecommendedPodResources, ResourceList, UpdateMode, VerticalScalingConstraints,
};
use crate::decide::Decider;
use crate::observe::{self, PodMetricsList};
use crate::quantity::{self, QuantityError};

/// Field manager name for server-side bookkeeping of our patches.
pub const FIELD_MANAGER: &str = "aware-controller";

/// Upstream VPA updater's `MinChangePriority`: a pod is updated when a request differs from the
/// recommendation by at least 10 % (vertical-pod-autoscaler `pkg/updater/priority`).
pub const MIN_CHANGE_FRACTION: f64 = 0.1;

#[derive(Debug, Clone)]
pub struct ControllerConfig {
    /// The name MPAs put in `spec.recommenders[0].name` to be served by this controller.
    pub recommender_name: String,
    /// Also serve MPAs with an empty `recommenders` list (upstream's default recommender's).
    pub claim_default: bool,
    /// Run the recommender (compute and write `status`).
    pub recommend: bool,
    /// Run the updater (act on the recommendation).
    pub update: bool,
    /// Evict pods for `Recreate` / `Auto`. Recreated pods get the recommendation only from an
    /// admission webhook (upstream's MPA admission controller); without one, eviction would just
    /// restart pods with the old template, so this is off unless a webhook runs.
    pub evict: bool,
    /// Ready pods that must remain after an eviction (upstream VPA updater `--min-replicas`); the
    /// MPA's `constraints.global.minReplicas` raises it.
    pub min_live_pods: u32,
    /// Control interval: how often each MPA is reconciled when nothing changes (15 s, HPA's
    /// `--horizontal-pod-autoscaler-sync-period`).
    pub interval: Duration,
    /// Attempts at writing status when the object keeps changing under us (409 Conflict).
    pub max_conflict_retries: u32,
    /// First back-off after a failed pass; doubles per consecutive failure up to `max_backoff`.
    pub base_backoff: Duration,
    pub max_backoff: Duration,
    /// Watch one namespace, or all when `None`.
    pub namespace: Option<String>,
}

impl Default for ControllerConfig {
    fn default() -> Self {
        Self {
            recommender_name: crate::crd::DEFAULT_RECOMMENDER_NAME.into(),
            claim_default: false,
            recommend: true,
            update: true,
            evict: false,
            min_live_pods: 1,
            interval: Duration::from_secs(15),
            max_conflict_retries: 5,
            base_backoff: Duration::from_secs(1),
            max_backoff: Duration::from_secs(300),
            namespace: None,
        }
    }
}

#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum ControllerError {
    #[error("Kubernetes API: {0}")]
    Kube(#[from] kube::Error),
    #[error(transparent)]
    Extension(#[from] ExtensionError),
    #[error("MultidimPodAutoscaler {object}: {source}")]
    Quantity { object: String, source: QuantityError },
    #[error("MultidimPodAutoscaler {object}: recommender: {source}")]
    Decide { object: String, source: RecommenderError },
    #[error("MultidimPodAutoscaler {object}: spec.scaleTargetRef: {reason}")]
    BadTarget { object: String, reason: String },
    #[error("MultidimPodAutoscaler {object}: status write still conflicting after {attempts} attempts")]
    Conflict { object: String, attempts: u32 },
    #[error("MultidimPodAutoscaler {object} has no namespace")]
    NoNamespace { object: String },
    /// The target could not be observed (Prometheus unreachable, its samples stale): nothing
    /// was decided or written, and the pass is backed off.
    #[error("MultidimPodAutoscaler {object}: cannot observe the target: {reason}")]
    Unobservable { object: String, reason: String },
}

/// What one pass did, for logs, metrics and tests.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct PassOutcome {
    /// `false` when the MPA belongs to another recommender (nothing was read or written).
    pub owned: bool,
    pub status_written: bool,
    pub conflicts_retried: u32,
    pub scaled_to: Option<i32>,
    pub resized: Vec<String>,
    pub evicted: Vec<String>,
    /// Why an eviction that was wanted did not happen.
    pub eviction_blocked: Option<String>,
}

struct Pending {
    computed_at: Instant,
    recommendation: Recommendation,
    limited: bool,
}

/// Shared state of the controller.
pub struct Context<D: Decider> {
    pub client: Client,
    pub config: ControllerConfig,
    pub decider: D,
    /// Observe targets through Prometheus (the `Observation` with the application's latency,
    /// throughput and load, as the agent was trained on) instead of the API server and
    /// metrics.k8s.io (usage only). Its `namespace` and `apps` are each MPA's own.
    pub prometheus: Option<crate::prometheus::PrometheusConfig>,
    pending: Mutex<HashMap<String, Pending>>,
    failures: Mutex<HashMap<String, u32>>,
    /// When each MPA's target was last reported unobservable to the decider.
    unobservable: Mutex<HashMap<String, Instant>>,
    pub metrics: crate::metrics::ControllerMetrics,
    /// Where the decider's state is kept across restarts (`--state FILE`), if anywhere.
    pub state: Option<crate::state::StateFile>,
    /// Held while this controller writes the state file ([`crate::state::StateFile::lock`]),
    /// and one save at a time (a periodic one still running when the controller stops is
    /// waited for, so the last save is the newest); `None` inside: not writing (none taken up
    /// yet, or another process holds the directory).
    state_writer: Mutex<Option<aware_lab::output::DirLock>>,
    /// What the saves left out and the log already said (said once each, not every interval).
    state_left_out: Mutex<HashSet<String>>,
    /// The MPAs the watch's listing under way has reported so far ([`watch_event`]).
    listing: Mutex<Option<HashSet<String>>>,
}

impl<D: Decider> Context<D> {
    pub fn new(client: Client, config: ControllerConfig, decider: D) -> Self {
        Self {
            client,
            config,
            decider,
            state: None,
            state_writer: Mutex::default(),
            state_left_out: Mutex::default(),
            listing: Mutex::default(),
            prometheus: None,
            pending: Mutex::default(),
            failures: Mutex::default(),
            unobservable: Mutex::default(),
            metrics: crate::metrics::ControllerMetrics::default(),
        }
    }

    /// Keeps the decider's state in `file` across restarts: taken up when [`run`] starts,
    /// written once per control interval and when it stops ([`Context::save_state`]).
    pub fn with_state(mut self, file: crate::state::StateFile) -> Self {
        self.state = Some(file);
        self
    }

    /// Takes up the state a previous run saved, if there is a state file: each MPA's when it is
    /// first decided for. A file that cannot be used is set aside, and the log says why.
    pub fn take_up_state(&self) {
        let Some(file) = &self.state else { return };
        {
            let mut writer = self.state_writer.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
            if writer.is_some() {
                // Already taken up by this process (its lock held): nothing more to take up.
                return;
            }
            match file.lock() {
                Ok(lock) => *writer = Some(lock),
                Err(e) => {
                    tracing::error!("{e}: this controller neither takes up nor writes a state");
                    return;
                }
            }
        }
        let (state, notes) = file.take_up(self.decider.checkpoint_identity().as_deref());
        for note in notes {
            tracing::warn!("{note}");
        }
        if let Some(state) = state {
            let policies: Vec<&str> = state.mpas.values().filter_map(|m| m.policy.as_deref()).collect();
            if state.learned.is_some() || !policies.is_empty() {
                let store = file.learned();
                for note in self.decider.take_up_learned(&store, state.learned.as_deref(), &policies) {
                    tracing::warn!("{note}");
                }
            }
            let from = format!("the state {} saved at {:.0} s", file.path.display(), state.saved_at_s);
            tracing::info!("taking up {} MPAs' state from {}", state.mpas.len(), file.path.display());
            self.decider.take_up(state.mpas, &from);
        }
    }

    /// Stops writing the state file and lets go of its directory (for another controller, or
    /// a restarted one, to take it up). A controller that loses the leader lease exits
    /// instead, which lets go of it too.
    pub fn release_state(&self) {
        *self.state_writer.lock().unwrap_or_else(std::sync::PoisonError::into_inner) = None;
    }

    /// Writes the decider's state to the state file, if there is one and this controller took
    /// it up ([`Context::take_up_state`]); a write that fails is
    /// logged and counted, and the previous file stands. What the agent learned live is written
    /// first ([`Decider::save_with_learned`]; the agent at most every
    /// [`crate::decide::LEARNED_AGENT_EVERY`]).
    pub fn save_state(&self) {
        self.save_state_as(false);
    }

    /// [`Context::save_state`] when the controller stops: the agent is written too if it has
    /// learned since it last was.
    pub fn save_last_state(&self) {
        self.save_state_as(true);
    }

    fn save_state_as(&self, last: bool) {
        let Some(file) = &self.state else { return };
        let writer = self.state_writer.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        if writer.is_none() {
            return;
        }
        let now = unix_now_s();
        let (mpas, learned) = self.decider.save_with_learned(&file.learned(), last);
        let state = crate::state::SavedState {
            decider: self.decider.name().to_string(),
            checkpoint: self.decider.checkpoint_identity(),
            learned: learned.agent,
            saved_at_s: now,
            mpas,
        };
        self.metrics.observe_learned_failures(learned.failures.len());
        let mut said = self.state_left_out.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        for why in learned.failures {
            if said.insert(why.clone()) {
                tracing::warn!("{why}");
            }
        }
        drop(said);
        match file.write_keeping_learned(&state) {
            Ok((left_out, not_dropped)) => {
                self.metrics.observe_state_save(true);
                let mut said = self.state_left_out.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
                for why in left_out {
                    if said.insert(why.clone()) {
                        tracing::warn!("{}: not written afresh for MPA {why}", file.path.display());
                    }
                }
                for why in not_dropped {
                    if said.insert(why.clone()) {
                        tracing::warn!("{why}");
                    }
                }
            }
            Err(e) => {
                self.metrics.observe_state_save(false);
                tracing::warn!("{e}: the state saved before stands");
            }
        }
    }

    /// Observes targets through Prometheus with `config`'s queries.
    pub fn with_prometheus(mut self, config: crate::prometheus::PrometheusConfig) -> Self {
        self.prometheus = Some(config);
        self
    }

    /// The controller's metrics and the decider's (the lifecycle's), as one OpenMetrics text.
    pub fn encode_metrics(&self) -> String {
        let own = self.metrics.encode();
        match self.decider.encode_metrics() {
            Some(more) => format!("{}{more}", own.strip_suffix("# EOF\n").unwrap_or(&own)),
            None => own,
        }
    }

    /// Whether this controller serves `mpa`.
    pub fn owns(&self, mpa: &MultidimPodAutoscaler) -> bool {
        mpa.served_by(&self.config.recommender_name, self.config.claim_default)
    }
}

/// The target's scale subresource, pods and (optionally) usage.
struct TargetView {
    scale: Scale,
    pods: Vec<Pod>,
}

pub(crate) fn target_api(
    client: &Client,
    ns: &str,
    mpa: &MultidimPodAutoscaler,
) -> Result<(Api<DynamicObject>, String), ControllerError> {
    let r = &mpa.spec.scale_target_ref;
    let bad = |reason: String| ControllerError::BadTarget { object: mpa.key(), reason };
    if r.name.is_empty() || r.kind.is_empty() {
        return Err(bad("kind and name are required".into()));
    }
    let api_version = r.api_version.as_deref().unwrap_or("apps/v1");
    let (group, version) = api_version.split_once('/').unwrap_or(("", api_version));
    // Plural of the well-known scalable kinds (Deployment, StatefulSet, ReplicaSet,
    // ReplicationController) is the lower-cased kind plus `s`.
    let plural = format!("{}s", r.kind.to_ascii_lowercase());
    let ar = ApiResource::from_gvk_with_plural(&GroupVersionKind::gvk(group, version, &r.kind), &plural);
    Ok((Api::namespaced_with(client.clone(), ns, &ar), r.name.clone()))
}

async fn read_target(client: &Client, ns: &str, mpa: &MultidimPodAutoscaler) -> Result<TargetView, ControllerError> {
    let (api, name) = target_api(client, ns, mpa)?;
    let scale = api.get_scale(&name).await?;
    let selector =
        scale.status.as_ref().and_then(|s| s.selector.clone()).ok_or_else(|| ControllerError::BadTarget {
            object: mpa.key(),
            reason: format!("the scale subresource of {name} reports no pod selector"),
        })?;
    let pods: Api<Pod> = Api::namespaced(client.clone(), ns);
    let pods = pods.list(&ListParams::default().labels(&selector)).await?.items;
    Ok(TargetView { scale, pods })
}

/// The pod resources the MPA's target declares in `spec.template` (summed over its
/// containers, named after the first), or why they cannot be read; `None` where the read failed
/// in a way the next pass may not (a timeout, a 5xx, throttling: read again then), as opposed to
/// an answer that will not change by itself (403: no RBAC for it; 404; a template without
/// containers). The updater resizes pods in place and scales through `/scale`, so the template
/// stays as the operator deployed it.
async fn read_declared(
    client: &Client,
    ns: &str,
    mpa: &MultidimPodAutoscaler,
) -> Option<Result<ContainerResources, String>> {
    let (api, name) = match target_api(client, ns, mpa) {
        Ok(found) => found,
        Err(e) => return Some(Err(e.to_string())),
    };
    let target = match api.get(&name).await {
        Ok(target) => target,
        Err(kube::Error::Api(status)) if matches!(status.code, 403 | 404) => {
            return Some(Err(format!("reading {name}: {}", status.message)));
        }
        Err(e) => {
            tracing::warn!(object = %mpa.key(), "reading {name} for its pod template: {e}; read again next pass");
            return None;
        }
    };
    Some(declared_resources(&name, &target))
}

fn declared_resources(name: &str, target: &DynamicObject) -> Result<ContainerResources, String> {
    let containers = target.data.pointer("/spec/template/spec/containers").cloned().unwrap_or_default();
    let containers: Vec<k8s_openapi::api::core::v1::Container> =
        serde_json::from_value(containers).map_err(|e| format!("{name}: spec.template.spec.containers: {e}"))?;
    if containers.is_empty() {
        return Err(format!("{name}: spec.template.spec.containers is empty"));
    }
    observe::pod_resources(&containers).map_err(|e| format!("{name}: spec.template.spec.containers: {e}"))
}

/// Usage from the resource metrics API; `None` samples when it is unavailable (no
/// metrics-server), so the recommender sees absence rather than zero.
async fn read_usage(client: &Client, ns: &str, selector: &str) -> HashMap<String, observe::PodUsage> {
    let url = format!("/apis/metrics.k8s.io/v1beta1/namespaces/{ns}/pods");
    let request = kube::core::Request::new(url).list(&ListParams::default().labels(selector));
    let Ok(request) = request else { return HashMap::new() };
    match client.request::<PodMetricsList>(request).await {
        Ok(list) => observe::usage_by_pod(&list).unwrap_or_else(|e| {
            tracing::warn!("metrics.k8s.io returned an unparsable usage: {e}");
            HashMap::new()
        }),
        Err(e) => {
            tracing::warn!("metrics.k8s.io unavailable: {e}");
            HashMap::new()
        }
    }
}

fn unix_now_s() -> f64 {
    std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map(|d| d.as_secs_f64()).unwrap_or(0.0)
}

fn now_time() -> Time {
    Time(k8s_openapi::jiff::Timestamp::now())
}

/// Clamps a recommendation to the MPA's constraints; returns whether anything was capped.
pub fn clamp(mpa: &MultidimPodAutoscaler, rec: &mut Recommendation) -> Result<bool, QuantityError> {
    let mut limited = false;
    if let Some(global) = mpa.spec.constraints.as_ref().and_then(|c| c.global.as_ref()) {
        let min = global.min_replicas.unwrap_or(1).max(0) as u32;
        let max = (global.max_replicas.max(0) as u32).max(min);
        let clamped = rec.replicas.clamp(min, max);
        limited |= clamped != rec.replicas;
        rec.replicas = clamped;
    }
    for c in &mut rec.containers {
        let before = c.requests;
        if clamp_requests(mpa, &c.name, &mut c.requests)? {
            limited = true;
            scale_limits(c, before);
        }
    }
    Ok(limited)
}

/// Clamps one container's requests to the MPA's `minAllowed`/`maxAllowed` for it; returns
/// whether anything was capped.
pub(crate) fn clamp_requests(
    mpa: &MultidimPodAutoscaler,
    container: &str,
    requests: &mut aware_core::Resources,
) -> Result<bool, QuantityError> {
    let before = *requests;
    for (min, max) in container_bounds(mpa, container) {
        if let Some(q) = min.get("cpu") {
            requests.cpu_millicores = requests.cpu_millicores.max(quantity::cpu_millicores(q)?);
        }
        if let Some(q) = min.get("memory") {
            requests.memory_bytes = requests.memory_bytes.max(quantity::memory_bytes(q)?);
        }
        if let Some(q) = max.get("cpu") {
            requests.cpu_millicores = requests.cpu_millicores.min(quantity::cpu_millicores(q)?);
        }
        if let Some(q) = max.get("memory") {
            requests.memory_bytes = requests.memory_bytes.min(quantity::memory_bytes(q)?);
        }
    }
    Ok(before != *requests)
}

/// Keeps each limit's ratio to its request when the request moves (VPA `RequestsAndLimits`).
pub(crate) fn scale_limits(c: &mut ContainerResources, old_requests: aware_core::Resources) {
    let ratio = |limit: u64, old: u64, new: u64| {
        if old == 0 { limit.max(new) } else { ((limit as f64 / old as f64) * new as f64).round() as u64 }
    };
    c.limits.cpu_millicores = ratio(c.limits.cpu_millicores, old_requests.cpu_millicores, c.requests.cpu_millicores);
    c.limits.memory_bytes = ratio(c.limits.memory_bytes, old_requests.memory_bytes, c.requests.memory_bytes);
}

/// (minAllowed, maxAllowed) pairs that apply to a container: `constraints.container` and
/// `resourcePolicy.containerPolicies`, by exact name, else the `*` entry.
fn container_bounds<'a>(mpa: &'a MultidimPodAutoscaler, name: &str) -> Vec<(&'a ResourceList, &'a ResourceList)> {
    let mut out = Vec::new();
    if let Some(r) = container_constraint(mpa, name).and_then(|v| v.requests.as_ref()) {
        out.push((&r.min_allowed, &r.max_allowed));
    }
    if let Some(v) = container_policy(mpa, name) {
        out.push((&v.min_allowed, &v.max_allowed));
    }
    out
}

/// The `constraints.container` entry for a container: by exact name, else `*`.
fn container_constraint<'a>(mpa: &'a MultidimPodAutoscaler, name: &str) -> Option<&'a VerticalScalingConstraints> {
    let all = &mpa.spec.constraints.as_ref()?.container;
    all.iter().find(|v| v.name == name).or_else(|| all.iter().find(|v| v.name == "*"))
}

/// The `resourcePolicy.containerPolicies` entry for a container: by exact name, else `*`.
fn container_policy<'a>(mpa: &'a MultidimPodAutoscaler, name: &str) -> Option<&'a ContainerResourcePolicy> {
    let all = &mpa.spec.resource_policy.as_ref()?.container_policies;
    all.iter().find(|v| v.container_name == name).or_else(|| all.iter().find(|v| v.container_name == "*"))
}

/// Whether the MPA switches vertical scaling off for a container (`mode: Off` in
/// `constraints.container` or `resourcePolicy.containerPolicies`, by exact name, else `*`).
pub(crate) fn vertical_off(mpa: &MultidimPodAutoscaler, name: &str) -> bool {
    use crate::crd::ContainerScalingMode::Off;
    container_constraint(mpa, name).and_then(|v| v.mode) == Some(Off)
        || container_policy(mpa, name).and_then(|v| v.mode) == Some(Off)
}

/// What the MPA may change in one container.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Controlled {
    pub cpu: bool,
    pub memory: bool,
    /// Limits follow requests in ratio (`RequestsAndLimits`, the default); `RequestsOnly`
    /// leaves them alone.
    pub limits: bool,
}

/// The resources and values the MPA controls in a container: a resource is controlled when
/// `constraints.containerControlledResources` (default: cpu and memory) and the container
/// policy's `controlledResources` (default: both) both name it; `controlledValues` picks
/// whether limits follow.
pub(crate) fn controlled(mpa: &MultidimPodAutoscaler, name: &str) -> Controlled {
    use crate::crd::{ContainerControlledValues, ControlledResource};
    let global = mpa.spec.constraints.as_ref().map(|c| c.container_controlled_resources.as_slice()).unwrap_or(&[]);
    let policy = container_policy(mpa, name);
    let listed = |resource: ControlledResource, key: &str| {
        (global.is_empty() || global.iter().any(|r| r == key))
            && policy.and_then(|p| p.controlled_resources.as_ref()).is_none_or(|rs| rs.contains(&resource))
    };
    Controlled {
        cpu: listed(ControlledResource::Cpu, "cpu"),
        memory: listed(ControlledResource::Memory, "memory"),
        limits: policy.and_then(|p| p.controlled_values) != Some(ContainerControlledValues::RequestsOnly),
    }
}

fn resource_list(r: aware_core::Resources) -> ResourceList {
    BTreeMap::from([
        ("cpu".to_string(), quantity::cpu_quantity(r.cpu_millicores)),
        ("memory".to_string(), quantity::memory_quantity(r.memory_bytes)),
    ])
}

fn condition(type_: &str, status: bool, reason: &str, message: String) -> MultidimPodAutoscalerCondition {
    MultidimPodAutoscalerCondition {
        type_: type_.into(),
        status: if status { "True" } else { "False" }.into(),
        last_transition_time: Some(now_time()),
        reason: reason.into(),
        message,
    }
}

/// Merges conditions by type, keeping `lastTransitionTime` when the status did not change.
fn merge_conditions(
    old: &[MultidimPodAutoscalerCondition],
    new: Vec<MultidimPodAutoscalerCondition>,
) -> Vec<MultidimPodAutoscalerCondition> {
    let mut out: Vec<MultidimPodAutoscalerCondition> =
        old.iter().filter(|o| !new.iter().any(|n| n.type_ == o.type_)).cloned().collect();
    for mut n in new {
        if let Some(o) = old.iter().find(|o| o.type_ == n.type_ && o.status == n.status) {
            n.last_transition_time = o.last_transition_time.clone();
        }
        out.push(n);
    }
    out.sort_by(|a, b| a.type_.cmp(&b.type_));
    out
}

/// Writes `status` with optimistic concurrency: a 409 re-reads the object and tries again.
async fn write_status(
    api: &Api<MultidimPodAutoscaler>,
    mpa: &MultidimPodAutoscaler,
    build: impl Fn(&MultidimPodAutoscaler) -> MultidimPodAutoscalerStatus,
    max_retries: u32,
    outcome: &mut PassOutcome,
) -> Result<MultidimPodAutoscaler, ControllerError> {
    let name = mpa.name_any();
    let mut current = mpa.clone();
    for attempt in 0..=max_retries {
        if attempt > 0 {
            current = api.get_status(&name).await?;
        }
        let mut next = current.clone();
        next.status = Some(build(&current));
        match api
            .replace_status(
                &name,
                &PostParams { field_manager: Some(FIELD_MANAGER.into()), ..Default::default() },
                &next,
            )
            .await
        {
            Ok(written) => {
                outcome.status_written = true;
                return Ok(written);
            }
            Err(kube::Error::Api(status)) if status.code == 409 => {
                outcome.conflicts_retried += 1;
                tracing::debug!("{}: status conflict, retrying", mpa.key());
            }
            Err(e) => return Err(e.into()),
        }
    }
    Err(ControllerError::Conflict { object: mpa.key(), attempts: max_retries + 1 })
}

fn relative_change(current: u64, target: u64) -> f64 {
    if current == 0 {
        return if target == 0 { 0.0 } else { f64::INFINITY };
    }
    (target as f64 - current as f64).abs() / current as f64
}

/// The recommendation for a container: by name, else an entry without a name (for every
/// container).
pub(crate) fn recommendation_for<'a>(
    targets: &'a [RecommendedContainerResources],
    container: &str,
) -> Option<&'a RecommendedContainerResources> {
    // The entry naming the container wins over an unnamed one, whatever their order.
    targets
        .iter()
        .find(|t| t.container_name == container)
        .or_else(|| targets.iter().find(|t| t.container_name.is_empty()))
}

/// Pods (not terminating, one container, vertical scaling not `Off`) whose requests differ from the recommendation
/// by at least [`MIN_CHANGE_FRACTION`], with the resources they should get.
fn pods_to_update(
    mpa: &MultidimPodAutoscaler,
    pods: &[Pod],
    targets: &[RecommendedContainerResources],
) -> Result<Vec<(String, String, serde_json::Value)>, QuantityError> {
    let mut out = Vec::new();
    for pod in pods.iter().filter(|p| p.metadata.deletion_timestamp.is_none()) {
        let Some(spec) = &pod.spec else { continue };
        if spec.containers.len() != 1 {
            continue; // the observation sums containers; per-container targets need one container
        }
        let container = &spec.containers[0];
        if vertical_off(mpa, &container.name) {
            continue;
        }
        let Some(target) = recommendation_for(targets, &container.name) else { continue };
        let controlled = controlled(mpa, &container.name);
        let current = observe::pod_resources(std::slice::from_ref(container))?;
        let mut wanted = current.clone();
        if let (Some(q), true) = (target.target.get("cpu"), controlled.cpu) {
            wanted.requests.cpu_millicores = quantity::cpu_millicores(q)?;
        }
        if let (Some(q), true) = (target.target.get("memory"), controlled.memory) {
            wanted.requests.memory_bytes = quantity::memory_bytes(q)?;
        }
        // Which limits the spec sets (`pod_resources` reports a missing limit as the request).
        let limit_set =
            |k: &str| container.resources.as_ref().and_then(|r| r.limits.as_ref()).is_some_and(|l| l.contains_key(k));
        let has_limit = (limit_set("cpu"), limit_set("memory"));
        if controlled.limits {
            scale_limits(&mut wanted, current.requests);
        } else {
            cap_at_limits(&mut wanted.requests, current.limits, has_limit);
        }
        let change = relative_change(current.requests.cpu_millicores, wanted.requests.cpu_millicores)
            .max(relative_change(current.requests.memory_bytes, wanted.requests.memory_bytes));
        if change >= MIN_CHANGE_FRACTION {
            out.push((pod.name_any(), container.name.clone(), resize_resources(&wanted, controlled, has_limit)));
        }
    }
    Ok(out)
}

/// `RequestsOnly`: the limits stay, so a request never exceeds the limit the spec sets
/// (`has_limit`: CPU, memory); the API server would refuse it.
pub(crate) fn cap_at_limits(
    requests: &mut aware_core::Resources,
    limits: aware_core::Resources,
    has_limit: (bool, bool),
) {
    if has_limit.0 {
        requests.cpu_millicores = requests.cpu_millicores.min(limits.cpu_millicores);
    }
    if has_limit.1 {
        requests.memory_bytes = requests.memory_bytes.min(limits.memory_bytes);
    }
}

/// The `resources` of a resize patch: the controlled requests, and their limits where they
/// follow requests (`RequestsAndLimits`) and the container's spec sets one (`has_limit`: CPU,
/// memory); a container without a limit is not given one.
fn resize_resources(wanted: &ContainerResources, c: Controlled, has_limit: (bool, bool)) -> serde_json::Value {
    let mut requests = serde_json::Map::new();
    let mut limits = serde_json::Map::new();
    if c.cpu {
        requests.insert("cpu".into(), json!(quantity::cpu_quantity(wanted.requests.cpu_millicores)));
        if c.limits && has_limit.0 {
            limits.insert("cpu".into(), json!(quantity::cpu_quantity(wanted.limits.cpu_millicores)));
        }
    }
    if c.memory {
        requests.insert("memory".into(), json!(quantity::memory_quantity(wanted.requests.memory_bytes)));
        if c.limits && has_limit.1 {
            limits.insert("memory".into(), json!(quantity::memory_quantity(wanted.limits.memory_bytes)));
        }
    }
    let mut resources = json!({"requests": requests});
    if !limits.is_empty() {
        resources["limits"] = serde_json::Value::Object(limits);
    }
    resources
}

fn is_ready(pod: &Pod) -> bool {
    pod.metadata.deletion_timestamp.is_none()
        && pod
            .status
            .as_ref()
            .and_then(|s| s.conditions.as_ref())
            .is_some_and(|cs| cs.iter().any(|c| c.type_ == "Ready" && c.status == "True"))
}

/// The updater for one MPA: replicas, then resources.
async fn update<D: Decider>(
    ctx: &Context<D>,
    ns: &str,
    mpa: &MultidimPodAutoscaler,
    view: &TargetView,
    desired_replicas: i32,
    recommendation: &RecommendedPodResources,
    outcome: &mut PassOutcome,
) -> Result<(), ControllerError> {
    let mode = mpa.update_mode();
    if mode == UpdateMode::Off {
        return Ok(());
    }
    let current = view.scale.spec.as_ref().and_then(|s| s.replicas).unwrap_or(0);
    if desired_replicas != current {
        let (api, name) = target_api(&ctx.client, ns, mpa)?;
        let patch = json!({"spec": {"replicas": desired_replicas}});
        api.patch_scale(&name, &PatchParams::default(), &Patch::Merge(&patch)).await?;
        outcome.scaled_to = Some(desired_replicas);
    }
    if !mode.acts_on_running_pods() {
        return Ok(());
    }
    let object = mpa.key();
    let updates = pods_to_update(mpa, &view.pods, &recommendation.container_recommendations)
        .map_err(|source| ControllerError::Quantity { object: object.clone(), source })?;
    if updates.is_empty() {
        return Ok(());
    }
    let pods: Api<Pod> = Api::namespaced(ctx.client.clone(), ns);
    if mode == UpdateMode::InPlaceOrRecreate {
        for (pod, container, resources) in &updates {
            let patch = json!({"spec": {"containers": [{"name": container, "resources": resources}]}});
            pods.patch_resize(pod, &PatchParams::default(), &Patch::Strategic(&patch)).await?;
            outcome.resized.push(pod.clone());
        }
        return Ok(());
    }
    // Recreate / Auto: at most one eviction per pass.
    if !ctx.config.evict {
        outcome.eviction_blocked =
            Some("eviction disabled: no admission webhook would apply the recommendation".into());
        return Ok(());
    }
    let ready = view.pods.iter().filter(|p| is_ready(p)).count() as u32;
    let min_replicas = mpa.spec.constraints.as_ref().and_then(|c| c.global.as_ref()).and_then(|g| g.min_replicas);
    let min_live = ctx.config.min_live_pods.max(min_replicas.unwrap_or(0).max(0) as u32);
    if ready.saturating_sub(1) < min_live {
        outcome.eviction_blocked =
            Some(format!("{ready} ready pods: evicting one would drop below the live-pod minimum {min_live}"));
        return Ok(());
    }
    let Some((victim, _, _)) =
        updates.iter().find(|(name, _, _)| view.pods.iter().any(|p| p.name_any() == *name && is_ready(p)))
    else {
        return Ok(());
    };
    let victim_pod = view.pods.iter().find(|p| p.name_any() == *victim).expect("victim is one of the pods");
    let pdbs: Api<PodDisruptionBudget> = Api::namespaced(ctx.client.clone(), ns);
    for pdb in pdbs.list(&ListParams::default()).await?.items {
        let Some(selector) = pdb.spec.as_ref().and_then(|s| s.selector.clone()) else { continue };
        let Ok(selector) = Selector::try_from(selector) else { continue };
        let allowed = pdb.status.as_ref().and_then(|s| s.disruptions_allowed).unwrap_or(0);
        if selector.matches(victim_pod.labels()) && allowed < 1 {
            outcome.eviction_blocked = Some(format!("PodDisruptionBudget {} allows no disruption", pdb.name_any()));
            return Ok(());
        }
    }
    match pods.evict(victim, &EvictParams::default()).await {
        Ok(_) => outcome.evicted.push(victim.clone()),
        // 429: the API server's own PDB check refused (the budget changed since we read it).
        Err(kube::Error::Api(s)) if s.code == 429 => {
            outcome.eviction_blocked = Some(format!("eviction of {victim} refused: {}", s.message));
        }
        Err(e) => return Err(e.into()),
    }
    Ok(())
}

/// The observation of `mpa`'s target from Prometheus, queried in the MPA's namespace for its
/// target's name (on a blocking thread: the backend's HTTP client blocks).
async fn observe_through_prometheus(
    config: &crate::prometheus::PrometheusConfig,
    ns: &str,
    mpa: &MultidimPodAutoscaler,
) -> Result<aware_core::Observation, String> {
    let mut config = config.clone();
    let target = mpa.spec.scale_target_ref.name.clone();
    config.namespace = ns.to_string();
    config.apps = vec![target];
    let observed = tokio::task::spawn_blocking(move || {
        let backend = crate::prometheus::PrometheusCluster::new(config, |_: &str, _: &Recommendation| {
            Ok::<(), aware_core::ClusterError>(())
        });
        aware_core::Cluster::observe(&backend, 0)
    })
    .await;
    match observed {
        Ok(Ok(obs)) => Ok(obs),
        Ok(Err(e)) => Err(e.to_string()),
        Err(e) => Err(format!("the Prometheus query task failed: {e}")),
    }
}

/// One pass for one MPA. Public so tests (and a dry-run mode) can drive it without a watcher.
pub async fn reconcile_once<D: Decider>(
    mpa: &MultidimPodAutoscaler,
    ctx: &Context<D>,
) -> Result<PassOutcome, ControllerError> {
    let mut outcome = PassOutcome::default();
    if !ctx.owns(mpa) {
        return Ok(outcome);
    }
    outcome.owned = true;
    ctx.decider.seen(&mpa.key());
    let key = mpa.key();
    let ns = mpa.namespace().ok_or_else(|| ControllerError::NoNamespace { object: key.clone() })?;
    let mpas: Api<MultidimPodAutoscaler> = Api::namespaced(ctx.client.clone(), &ns);
    let profile = match mpa.profile() {
        Ok(p) => p,
        Err(e) => {
            // A broken annotation is the operator's to fix: say so on the object, do not act.
            let message = e.to_string();
            let build = |cur: &MultidimPodAutoscaler| {
                let mut status = cur.status.clone().unwrap_or_default();
                let old = std::mem::take(&mut status.conditions);
                status.conditions = merge_conditions(
                    &old,
                    vec![condition(CONDITION_CONFIG_UNSUPPORTED, true, "InvalidProfile", message.clone())],
                );
                status
            };
            write_status(&mpas, mpa, build, ctx.config.max_conflict_retries, &mut outcome).await?;
            return Err(e.into());
        }
    };
    let view = read_target(&ctx.client, &ns, mpa).await?;
    let current_replicas = view.scale.status.as_ref().map(|s| s.replicas).unwrap_or(0);
    let desired_now = view.scale.spec.as_ref().and_then(|s| s.replicas).unwrap_or(current_replicas);

    let (desired, recommendation, limited) = if ctx.config.recommend {
        let reuse = {
            let pending = ctx.pending.lock().expect("pending map");
            pending
                .get(&key)
                .filter(|p| p.computed_at.elapsed() < ctx.config.interval)
                .map(|p| (p.recommendation.clone(), p.limited))
        };
        let (rec, limited) = match reuse {
            Some(found) => found,
            None => {
                let obs = match &ctx.prometheus {
                    None => {
                        let selector = view.scale.status.as_ref().and_then(|s| s.selector.clone()).unwrap_or_default();
                        let usage = read_usage(&ctx.client, &ns, &selector).await;
                        observe::observation(
                            &key,
                            desired_now.max(0) as u32,
                            &view.pods,
                            &usage,
                            unix_now_s(),
                            ctx.config.interval.as_secs_f64(),
                        )
                        .map_err(|source| ControllerError::Quantity { object: key.clone(), source })?
                    }
                    Some(config) => match observe_through_prometheus(config, &ns, mpa).await {
                        Ok(mut obs) => {
                            // Prometheus names the template after the workload; recommendations
                            // name the container (single-container pods, as the updater needs).
                            if let Some(c) = view.pods.iter().find_map(|p| p.spec.as_ref()?.containers.first()) {
                                obs.template.name = c.name.clone();
                            }
                            obs.app = key.clone();
                            obs
                        }
                        Err(reason) => {
                            // Once per interval: back-off retries are not intervals.
                            let notice = {
                                let mut noticed = ctx.unobservable.lock().expect("unobservable map");
                                let due = noticed.get(&key).is_none_or(|t| t.elapsed() >= ctx.config.interval);
                                if due {
                                    noticed.insert(key.clone(), Instant::now());
                                }
                                due
                            };
                            if notice {
                                ctx.decider.unavailable(&key, &profile, &reason);
                            }
                            return Err(ControllerError::Unobservable { object: key, reason });
                        }
                    },
                };
                if ctx.decider.wants_declared(&key)
                    && let Some(declared) = read_declared(&ctx.client, &ns, mpa).await
                {
                    ctx.decider.declared(&key, &profile, declared);
                }
                let mut rec = ctx
                    .decider
                    .decide(&key, &profile, &obs)
                    .map_err(|source| ControllerError::Decide { object: key.clone(), source })?;
                let limited =
                    clamp(mpa, &mut rec).map_err(|source| ControllerError::Quantity { object: key.clone(), source })?;
                ctx.pending
                    .lock()
                    .expect("pending map")
                    .insert(key.clone(), Pending { computed_at: Instant::now(), recommendation: rec.clone(), limited });
                (rec, limited)
            }
        };
        let pod_resources = RecommendedPodResources {
            container_recommendations: rec
                .containers
                .iter()
                .map(|c| RecommendedContainerResources {
                    container_name: c.name.clone(),
                    target: resource_list(c.requests),
                    ..Default::default()
                })
                .collect(),
        };
        (rec.replicas as i32, pod_resources, limited)
    } else {
        // Updater only: act on whatever recommender owns the status.
        let status = mpa.status.clone().unwrap_or_default();
        match status.recommendation {
            Some(r) => (status.desired_replicas, r, false),
            None => return Ok(outcome),
        }
    };

    if ctx.config.update {
        update(ctx, &ns, mpa, &view, desired, &recommendation, &mut outcome).await?;
    }

    if ctx.config.recommend {
        let scaled = outcome.scaled_to.is_some();
        let decider = ctx.decider.name().to_string();
        let blocked = outcome.eviction_blocked.clone();
        let build = |cur: &MultidimPodAutoscaler| {
            let old = cur.status.clone().unwrap_or_default();
            let mut conditions = vec![
                condition(
                    CONDITION_RECOMMENDATION_PROVIDED,
                    true,
                    "RecommendationProvided",
                    format!("recommended by {decider}"),
                ),
                condition(
                    CONDITION_SCALING_ACTIVE,
                    true,
                    "ValidMetricFound",
                    "the recommender computed a recommendation".into(),
                ),
                condition(
                    CONDITION_SCALING_LIMITED,
                    limited,
                    if limited { "TooFewOrTooManyResources" } else { "DesiredWithinRange" },
                    if limited {
                        "the recommendation was capped by the MPA's constraints".into()
                    } else {
                        String::new()
                    },
                ),
            ];
            if ctx.config.update {
                conditions.push(match &blocked {
                    Some(why) => condition(CONDITION_ABLE_TO_SCALE, false, "UpdateBlocked", why.clone()),
                    None => condition(CONDITION_ABLE_TO_SCALE, true, "SucceededRescale", String::new()),
                });
            }
            MultidimPodAutoscalerStatus {
                last_scale_time: if scaled { Some(now_time()) } else { old.last_scale_time.clone() },
                current_replicas,
                desired_replicas: desired,
                recommendation: Some(recommendation.clone()),
                current_metrics: old.current_metrics.clone(),
                conditions: merge_conditions(&old.conditions, conditions),
            }
        };
        write_status(&mpas, mpa, build, ctx.config.max_conflict_retries, &mut outcome).await?;
        // The recommendation stands for the rest of the interval: passes the watch triggers
        // meanwhile (this status write among them) reuse it rather than decide again.
    } else if outcome.scaled_to.is_some() {
        let patch = json!({"status": {"lastScaleTime": now_time()}});
        mpas.patch_status(&mpa.name_any(), &PatchParams::default(), &Patch::Merge(&patch)).await?;
    }
    Ok(outcome)
}

/// kube-runtime reconciler: one pass, then come back after the control interval.
pub async fn reconcile<D: Decider>(
    mpa: Arc<MultidimPodAutoscaler>,
    ctx: Arc<Context<D>>,
) -> Result<Action, ControllerError> {
    let started = Instant::now();
    let result = reconcile_once(&mpa, &ctx).await;
    ctx.metrics.observe_pass(started.elapsed(), result.as_ref().ok());
    let outcome = result?;
    ctx.failures.lock().expect("failure map").remove(&mpa.key());
    if !outcome.owned {
        forget_mpa(&ctx, &mpa.key());
        return Ok(Action::await_change());
    }
    tracing::info!(mpa = %mpa.key(), ?outcome, "reconciled");
    Ok(Action::requeue(ctx.config.interval))
}

/// Back-off for a failed pass: `base · 2^(n−1)` for the n-th consecutive failure, capped.
pub fn backoff(config: &ControllerConfig, consecutive_failures: u32) -> Duration {
    let exp = consecutive_failures.saturating_sub(1).min(20);
    config.base_backoff.saturating_mul(1 << exp).min(config.max_backoff)
}

/// kube-runtime error policy: counts consecutive failures per MPA and backs off exponentially.
pub fn error_policy<D: Decider>(
    mpa: Arc<MultidimPodAutoscaler>,
    error: &ControllerError,
    ctx: Arc<Context<D>>,
) -> Action {
    let n = {
        let mut failures = ctx.failures.lock().expect("failure map");
        let n = failures.entry(mpa.key()).or_insert(0);
        *n += 1;
        *n
    };
    let delay = backoff(&ctx.config, n);
    tracing::warn!(mpa = %mpa.key(), failures = n, ?delay, "reconcile failed: {error}");
    Action::requeue(delay)
}

/// Runs the controller until SIGINT or SIGTERM.
pub async fn run<D: Decider>(ctx: Arc<Context<D>>) {
    let api: Api<MultidimPodAutoscaler> = match &ctx.config.namespace {
        Some(ns) => Api::namespaced(ctx.client.clone(), ns),
        None => Api::all(ctx.client.clone()),
    };
    // A deleted MPA's state (the decider's, the interval's recommendation) is forgotten: a new
    // MPA of the same name starts afresh. With the controller's own watch, it backs off between
    // failed watches (client-go's exponential backoff): without it an unreachable API server
    // was asked again at once, forever, on one core, and the loop never yielded to the
    // shutdown signal.
    let forget = {
        let ctx = ctx.clone();
        watcher::watcher(api.clone(), watcher::Config::default()).default_backoff().for_each(move |event| {
            if let Ok(event) = event {
                watch_event(&ctx, &event);
            }
            futures::future::ready(())
        })
    };
    // The state a previous run saved is taken up before the first pass; it is written back
    // once per control interval and once more when the controller stops.
    ctx.take_up_state();
    let saver = {
        let ctx = ctx.clone();
        async move {
            if ctx.state.is_none() {
                return futures::future::pending().await;
            }
            let mut tick = tokio::time::interval(ctx.config.interval);
            tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
            tick.tick().await;
            loop {
                tick.tick().await;
                let ctx = ctx.clone();
                // Serialising every MPA's histories is blocking work.
                let _ = tokio::task::spawn_blocking(move || ctx.save_state()).await;
            }
        }
    };
    let last = ctx.clone();
    let controller = Controller::new(api, watcher::Config::default())
        .shutdown_on_signal()
        .run(reconcile, error_policy, ctx)
        .for_each(|result| async move {
            if let Err(e) = result {
                tracing::debug!("controller: {e}");
            }
        });
    // kube-runtime's graceful shutdown lets running reconciles finish, but it did not end the
    // controller at all while its watch of an unreachable API server was backing off (a
    // second signal was needed). After the signal it gets [`SHUTDOWN_GRACE`], well within
    // Kubernetes' default 30 s between SIGTERM and SIGKILL; then the controller stops anyway.
    let bounded_grace = async {
        shutdown_signal().await;
        tokio::time::sleep(SHUTDOWN_GRACE).await;
        tracing::warn!("stopping: reconciles still running {SHUTDOWN_GRACE:?} after the shutdown signal");
    };
    tokio::select! {
        _ = controller => {}
        _ = forget => {}
        _ = bounded_grace => {}
        _ = saver => {}
    }
    let _ = tokio::task::spawn_blocking(move || {
        last.save_last_state();
        // The store's writer writes (or spools) what is queued before the process ends.
        last.decider.finish();
    })
    .await;
}

/// How long running reconciles may take to finish after SIGINT or SIGTERM.
pub const SHUTDOWN_GRACE: Duration = Duration::from_secs(5);

/// What the controller's own watch of its MPAs does with an event: a deleted MPA is forgotten
/// ([`forget_mpa`]); when a listing completes, so is every MPA the controller keeps state for
/// that it did not list (deleted while the watch was down: a re-list reports no deletions),
/// and the decider is told ([`Decider::listed`]), so the hour the state file's unreached MPAs
/// are kept for starts once the controller has looked.
pub fn watch_event<D: Decider>(ctx: &Context<D>, event: &watcher::Event<MultidimPodAutoscaler>) {
    let listing = || ctx.listing.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
    match event {
        watcher::Event::Delete(mpa) => forget_mpa(ctx, &mpa.key()),
        watcher::Event::Init => *listing() = Some(HashSet::new()),
        watcher::Event::InitApply(mpa) => {
            if let Some(listed) = listing().as_mut() {
                listed.insert(mpa.key());
            }
        }
        watcher::Event::InitDone => {
            // Taken out first: the forgetting below takes the other maps' locks.
            let listed = listing().take();
            if let Some(listed) = listed {
                let mut kept: HashSet<String> = ctx.decider.keys().into_iter().collect();
                kept.extend(ctx.pending.lock().expect("pending map").keys().cloned());
                kept.extend(ctx.failures.lock().expect("failure map").keys().cloned());
                kept.extend(ctx.unobservable.lock().expect("unobservable map").keys().cloned());
                for key in kept.difference(&listed) {
                    tracing::info!(mpa = %key, "forgetting an MPA the watch's listing no longer shows (deleted while the watch was down)");
                    forget_mpa(ctx, key);
                }
            }
            ctx.decider.listed(ctx.config.namespace.as_deref());
        }
        watcher::Event::Apply(_) => {}
    }
}

/// Drops everything kept for the MPA `key`: it was deleted, or another recommender owns it now.
pub fn forget_mpa<D: Decider>(ctx: &Context<D>, key: &str) {
    ctx.decider.forget(key);
    ctx.pending.lock().expect("pending map").remove(key);
    ctx.unobservable.lock().expect("unobservable map").remove(key);
    ctx.failures.lock().expect("failure map").remove(key);
}

#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum RunError {
    #[error("cannot start the async runtime: {0}")]
    Runtime(std::io::Error),
    #[error("no Kubernetes configuration (in-cluster service account or kubeconfig): {0}")]
    Config(#[source] kube::Error),
    #[error("--listen: {0}")]
    Listen(#[from] crate::http::ServeError),
    #[error("lost the leader lease {0}: stopping so that another replica takes over")]
    LostLease(String),
    #[error("--checkpoint {path}: {reason}")]
    Checkpoint { path: String, reason: String },
    #[error(transparent)]
    Webhook(#[from] crate::webhook::WebhookError),
    #[error(transparent)]
    State(#[from] crate::state::StateError),
    #[error("--store {url}: {reason}")]
    Store { url: String, reason: String },
}

/// The admission webhook's settings for [`run_blocking`].
#[derive(Debug, Clone)]
pub struct WebhookOptions {
    /// Address of the TLS listener (`0.0.0.0:8443`).
    pub listen: String,
    /// PEM certificate chain and private key (a Secret's `tls.crt` / `tls.key`).
    pub cert: std::path::PathBuf,
    pub key: std::path::PathBuf,
}

/// How `aware controller` runs besides the controller's own configuration.
#[derive(Debug, Clone)]
pub struct RunOptions {
    /// Address for `/healthz` and `/metrics`.
    pub listen: String,
    /// The VPA half of the MPA default also controls CPU.
    pub vertical_cpu: bool,
    /// Leader election: the Lease's namespace and settings; `None` runs unconditionally.
    pub leader: Option<(String, crate::leader::LeaderConfig)>,
    /// AWARE decides, with the agent and the apps' stages from this `aware run --checkpoint`
    /// directory; `None`: the MPA default decides.
    pub checkpoint: Option<std::path::PathBuf>,
    /// Keep the decider's state in this file across restarts (the VPA histories; under AWARE
    /// also each app's lifecycle and OOM floor): taken up at the start, written every control
    /// interval and at the end ([`crate::state`]).
    pub state: Option<std::path::PathBuf>,
    /// Let a retraining agent explore on the cluster
    /// ([`aware_lifecycle::manager::ManagerConfig::live_exploration`]); off: the fallback serves
    /// a retraining app while the agent learns from it.
    pub explore_while_retraining: bool,
    /// Observe targets through Prometheus instead of metrics.k8s.io.
    pub prometheus: Option<crate::prometheus::PrometheusConfig>,
    /// Serve the admission webhook too (on every replica, leader or not).
    pub webhook: Option<WebhookOptions>,
    /// With `checkpoint`: record every decision, stage change and window in this trajectory
    /// store (`sqlite:PATH`, `postgres://…`, `influxdb://…`; [`crate::record`]).
    pub store: Option<String>,
    /// Where the store's writes wait while it is unreachable (default: `PATH.spool/` beside a
    /// SQLite file, `./aware-spool/` for a server).
    pub spool: Option<std::path::PathBuf>,
}

/// The lifecycle decider from a checkpoint directory: its agent, and its apps' stages for the
/// MPAs whose `namespace/name` it names. The directory must hold a checkpoint that verifies.
/// `live_exploration`: whether a retraining agent may explore on the cluster
/// ([`aware_lifecycle::manager::ManagerConfig::live_exploration`]).
pub fn lifecycle_decider(
    dir: &std::path::Path,
    live_exploration: bool,
) -> Result<crate::decide::LifecycleDecider, RunError> {
    let fail = |reason: String| RunError::Checkpoint { path: dir.display().to_string(), reason };
    let restored = aware_lifecycle::checkpoint::read(dir, 0)
        .map_err(|e| match e {
            // Already worded for the flag (`--checkpoint DIR: …`): its reason alone.
            aware_lifecycle::LifecycleError::Input { reason, .. } => fail(reason),
            e => fail(e.to_string()),
        })?
        .ok_or_else(|| fail("no checkpoint there (`aware run --checkpoint DIR` writes one)".into()))?;
    let from = format!("checkpoint {} (after {} episodes)", dir.display(), restored.episodes);
    crate::decide::LifecycleDecider::new(
        restored.agent,
        aware_lifecycle::manager::ManagerConfig { live_exploration, ..Default::default() },
        restored.apps,
        from,
    )
    .map(|d| d.with_checkpoint_identity(restored.identity))
    .map_err(|e| fail(e.to_string()))
}

/// The store `url` behind its spool (`spool`, else the store's default), written on a thread
/// of its own ([`crate::record::StoreWriter`]) with `decider`'s agent name and fallback.
/// Returns once the store is open: the fallback's transitions the store holds are read on that
/// thread afterwards, while the controller serves and decides.
pub fn open_store(
    url: &str,
    spool: Option<&std::path::Path>,
    decider: &crate::decide::LifecycleDecider,
) -> Result<crate::record::StoreWriter, RunError> {
    let fail = |reason: String| RunError::Store { url: url.to_string(), reason };
    let parsed: aware_store::StoreUrl = url.parse().map_err(|e: aware_store::StoreError| fail(e.to_string()))?;
    let dir = spool.map_or_else(|| parsed.default_spool_dir(), std::path::Path::to_path_buf);
    let numbering = dir.join(crate::record::NUMBERING);
    let open_dir = dir.clone();
    let recorder = decider.recorder().map_err(|e| fail(e.to_string()))?;
    // A residual agent's states are not the store's whole: nothing to read for it.
    let demonstrations = if recorder.agent() == aware_lifecycle::record::AGENT {
        aware_lifecycle::record::DEMONSTRATIONS_TAKEN_UP
    } else {
        0
    };
    crate::record::StoreWriter::start(
        url,
        move || aware_store::open_spooled(&parsed, Some(&open_dir), aware_store::DEFAULT_SPOOL_BYTES),
        recorder,
        Some(numbering),
        demonstrations,
    )
    .map_err(|e| fail(e.to_string()))
}

/// Resolves on SIGINT or SIGTERM.
async fn shutdown_signal() {
    #[cfg(unix)]
    if let Ok(mut term) = tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()) {
        tokio::select! {
            _ = tokio::signal::ctrl_c() => {}
            _ = term.recv() => {}
        }
        return;
    }
    let _ = tokio::signal::ctrl_c().await;
}

/// `aware controller`: connects with the in-cluster service account or the local kubeconfig,
/// serves `/healthz` and `/metrics` and, with [`RunOptions::webhook`], the admission webhook;
/// optionally waits to hold the leader Lease, and runs the recommender and/or updater with the
/// MPA default behind the decision seam until SIGINT or SIGTERM (or until the lease is lost,
/// which is an error so the pod restarts as a candidate). With neither recommender nor updater
/// it serves the webhook until SIGINT or SIGTERM.
pub fn run_blocking(config: ControllerConfig, options: RunOptions) -> Result<(), RunError> {
    // Certificate problems are reported before anything else (they are the operator's to fix).
    let tls = match &options.webhook {
        Some(w) => Some(crate::webhook::tls_config(&w.cert, &w.key)?),
        None => None,
    };
    if let Some(path) = &options.state {
        crate::state::StateFile::new(path).check_writable()?;
    }
    match &options.checkpoint {
        Some(dir) => {
            let mut decider = lifecycle_decider(dir, options.explore_while_retraining)?;
            if let Some(url) = &options.store {
                let writer = open_store(url, options.spool.as_deref(), &decider)?;
                decider = decider.with_store(writer);
            }
            run_with(config, options, tls, decider)
        }
        None if options.store.is_some() => Err(RunError::Store {
            url: options.store.clone().unwrap_or_default(),
            reason: "needs --checkpoint: the MPA default keeps no decision log".into(),
        }),
        None => {
            let decider = crate::decide::MpaDefaultDecider::new(options.vertical_cpu);
            run_with(config, options, tls, decider)
        }
    }
}

fn run_with<D: Decider>(
    config: ControllerConfig,
    options: RunOptions,
    tls: Option<std::sync::Arc<rustls::ServerConfig>>,
    decider: D,
) -> Result<(), RunError> {
    let runtime = tokio::runtime::Builder::new_multi_thread().enable_all().build().map_err(RunError::Runtime)?;
    let result = runtime.block_on(async move {
        let client = Client::try_default().await.map_err(RunError::Config)?;
        let webhook = match (options.webhook, tls) {
            (Some(w), Some(tls)) => {
                let webhook_config = crate::webhook::WebhookConfig {
                    recommender_name: config.recommender_name.clone(),
                    claim_default: config.claim_default,
                };
                let source = crate::webhook::KubeMpaSource { client: client.clone(), config: webhook_config.clone() };
                let state = Arc::new(crate::webhook::WebhookState { source, config: webhook_config });
                let (bound, task) = crate::webhook::serve_webhook_with(&w.listen, tls, state).await?;
                tracing::info!("serving the admission webhook on https://{bound}{}", crate::webhook::MUTATE_PATH);
                Some(task)
            }
            _ => None,
        };
        let mut ctx = Context::new(client.clone(), config, decider);
        if let Some(p) = options.prometheus.clone() {
            ctx = ctx.with_prometheus(p);
        }
        if let Some(path) = &options.state {
            ctx = ctx.with_state(crate::state::StateFile::new(path));
        }
        let ctx = Arc::new(ctx);
        let metrics = ctx.clone();
        let handler: crate::http::Handler = Arc::new(move |path| match path {
            "/metrics" => crate::http::Reply::ok(crate::http::OPENMETRICS, metrics.encode_metrics()),
            "/healthz" => crate::http::Reply::ok("text/plain", "ok\n".into()),
            _ => crate::http::Reply::not_found(),
        });
        let (bound, server) = crate::http::serve(&options.listen, handler).await?;
        tracing::info!("serving /healthz and /metrics on {bound}");
        let result = match options.leader {
            _ if !(ctx.config.recommend || ctx.config.update) => {
                shutdown_signal().await;
                Ok(())
            }
            None => {
                run(ctx).await;
                Ok(())
            }
            Some((namespace, leader)) => {
                let lease = format!("{namespace}/{}", leader.lease_name);
                let mut elector = crate::leader::LeaderElector::new(Api::namespaced(client, &namespace), leader);
                // A candidate waiting for the lease stops on SIGINT or SIGTERM too.
                let acquired = tokio::select! {
                    _ = elector.acquire() => true,
                    _ = shutdown_signal() => false,
                };
                if acquired {
                    tracing::info!("holding the leader lease {lease}");
                    tokio::select! {
                        _ = run(ctx) => Ok(()),
                        _ = elector.hold() => Err(RunError::LostLease(lease)),
                    }
                } else {
                    Ok(())
                }
            }
        };
        server.abort();
        if let Some(task) = webhook {
            task.abort();
        }
        result
    });
    // A Prometheus query still running on a blocking thread is not waited for past a second
    // (dropping the runtime would wait for it, up to its timeout).
    runtime.shutdown_timeout(Duration::from_secs(1));
    result
}
