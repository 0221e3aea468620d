//! `aware recommend`: what a rule-based policy would do now, from a JSON snapshot of a workload.
//!
//! The input (field names fixed by the interface document): `observation`, optional `history`
//! (oldest first, replayed before the observation so stabilisation windows and histograms match
//! a controller that had been running), `slo_p99_ms`, and optionally `hpa` (an `autoscaling/v2`
//! HorizontalPodAutoscalerSpec as `kubectl get hpa -o json` prints `.spec`),
//! `unlisted_pod_metrics` and `vpa_checkpoints` (`VerticalPodAutoscalerCheckpoint` objects).
//! Unknown fields are rejected; every error names the file, the field and the reason.
//!
//! Valid ranges: replicas 1–100,000; per container CPU 1 m–1,000 cores and memory
//! 1 MiB–16 TiB, where 0 means "not set" as in Kubernetes; usages finite and non-negative.

use std::collections::BTreeMap;
use std::path::Path;

use aware_core::{ContainerResources, Observation, Profile, Recommendation, Resources};
use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::hpa::behavior::{PolicyKind, ScalingPolicy, ScalingRulesSpec, SelectPolicy};
use crate::hpa::{
    BehaviorSpec, ControllerFlags, HorizontalPodAutoscaler, HpaSpec, MetricSpec, MetricTarget, ResourceName,
    UnlistedPodMetrics,
};
use crate::quantity;
use crate::registry::{Baseline, BaselineError, BaselineKind};
use crate::vpa::histogram::HistogramCheckpoint;
use crate::vpa::model::AggregateCheckpoint;

pub const MAX_REPLICAS: u64 = aware_core::REPLICAS_RANGE.1;
pub const MAX_CPU_MILLICORES: u64 = aware_core::CPU_MILLICORES_RANGE.1;
pub const MIN_MEMORY_BYTES: u64 = 1 << 20;
pub const MAX_MEMORY_BYTES: u64 = aware_core::MEMORY_MIB_RANGE.1 * aware_core::MIB;

/// Why a dry run could not answer. The CLI prints it as one line and exits 1.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum DryRunError {
    #[error("{file}: cannot read: {reason}")]
    Read { file: String, reason: String },
    /// The JSON does not fit the input model (syntax, types, unknown fields).
    #[error("{file}:{line}:{column}: {field}: {reason}")]
    Parse { file: String, line: usize, column: usize, field: String, reason: String },
    /// The JSON is malformed where no field can be named: it ends early, or text follows it.
    #[error("{file}:{line}:{column}: {reason}")]
    Syntax { file: String, line: usize, column: usize, reason: String },
    /// The file holds JSON, but not an object (an array, a string).
    #[error("{file}: expected a JSON object")]
    NotAnObject { file: String },
    /// A value is well-typed but not acceptable.
    #[error("{file}: {field}: {reason}")]
    Invalid { file: String, field: String, reason: String },
    #[error("{file}: {source}")]
    Baseline {
        file: String,
        #[source]
        source: BaselineError,
    },
    /// The recommender refused an observation (history or the final one).
    #[error("{file}: {field}: {reason}")]
    Recommender { file: String, field: String, reason: String },
}

/// A Kubernetes quantity as JSON carries it: a string (`"500m"`) or a number.
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(untagged)]
pub enum QuantityJson {
    Text(String),
    Number(f64),
}

impl QuantityJson {
    fn value(&self) -> Result<f64, quantity::QuantityError> {
        match self {
            QuantityJson::Text(s) => quantity::parse(s),
            QuantityJson::Number(v) if v.is_finite() => Ok(*v),
            QuantityJson::Number(v) => Err(quantity::QuantityError::OutOfRange(v.to_string())),
        }
    }
}

#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct HpaSpecJson {
    #[serde(default)]
    pub scale_target_ref: Option<Value>,
    #[serde(default)]
    pub min_replicas: Option<i64>,
    pub max_replicas: i64,
    #[serde(default)]
    pub metrics: Vec<MetricJson>,
    #[serde(default)]
    pub behavior: Option<BehaviorJson>,
}

#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct MetricJson {
    #[serde(rename = "type")]
    pub kind: String,
    #[serde(default)]
    pub resource: Option<ResourceMetricJson>,
    #[serde(default)]
    pub container_resource: Option<ContainerResourceMetricJson>,
    #[serde(default)]
    pub pods: Option<PodsMetricJson>,
    #[serde(default)]
    pub object: Option<Value>,
    #[serde(default)]
    pub external: Option<Value>,
}

#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct ResourceMetricJson {
    pub name: String,
    pub target: TargetJson,
}

#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct ContainerResourceMetricJson {
    pub name: String,
    pub container: String,
    pub target: TargetJson,
}

#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct PodsMetricJson {
    pub metric: MetricIdentifierJson,
    pub target: TargetJson,
}

#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct MetricIdentifierJson {
    pub name: String,
    /// Accepted for fidelity to `kubectl` output; the samples in the input are already the
    /// selected series.
    #[serde(default)]
    pub selector: Option<Value>,
}

#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct TargetJson {
    #[serde(rename = "type")]
    pub kind: String,
    #[serde(default)]
    pub average_utilization: Option<i64>,
    #[serde(default)]
    pub average_value: Option<QuantityJson>,
    #[serde(default)]
    pub value: Option<QuantityJson>,
}

#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct BehaviorJson {
    #[serde(default)]
    pub scale_up: Option<RulesJson>,
    #[serde(default)]
    pub scale_down: Option<RulesJson>,
}

#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct RulesJson {
    #[serde(default)]
    pub stabilization_window_seconds: Option<i64>,
    #[serde(default)]
    pub select_policy: Option<String>,
    #[serde(default)]
    pub policies: Option<Vec<PolicyJson>>,
    #[serde(default)]
    pub tolerance: Option<QuantityJson>,
}

#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct PolicyJson {
    #[serde(rename = "type")]
    pub kind: String,
    pub value: i64,
    pub period_seconds: i64,
}

/// A `VerticalPodAutoscalerCheckpoint` object.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct CheckpointJson {
    #[serde(default)]
    pub api_version: Option<String>,
    #[serde(default)]
    pub kind: Option<String>,
    #[serde(default)]
    pub metadata: Option<Value>,
    pub spec: CheckpointSpecJson,
    pub status: CheckpointStatusJson,
}

#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct CheckpointSpecJson {
    pub container_name: String,
    #[serde(default)]
    pub vpa_object_name: Option<String>,
}

#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct CheckpointStatusJson {
    #[serde(default)]
    pub last_update_time: Option<String>,
    #[serde(default)]
    pub version: Option<String>,
    #[serde(default)]
    pub cpu_histogram: HistogramCheckpointJson,
    #[serde(default)]
    pub memory_histogram: HistogramCheckpointJson,
    #[serde(default)]
    pub first_sample_start: Option<String>,
    #[serde(default)]
    pub last_sample_start: Option<String>,
    #[serde(default)]
    pub total_samples_count: u64,
}

#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct HistogramCheckpointJson {
    #[serde(default)]
    pub reference_timestamp: Option<String>,
    #[serde(default)]
    pub bucket_weights: BTreeMap<String, u32>,
    #[serde(default)]
    pub total_weight: f64,
}

/// The dry-run input, as parsed.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct DryRunInput {
    pub observation: Observation,
    #[serde(default)]
    pub history: Vec<Observation>,
    /// The latency objective, for policies that need one (AIMD) when the profile has none.
    #[serde(default)]
    pub slo_p99_ms: Option<f64>,
    #[serde(default)]
    pub hpa: Option<HpaSpecJson>,
    #[serde(default)]
    pub unlisted_pod_metrics: Vec<UnlistedPodMetrics>,
    #[serde(default)]
    pub vpa_checkpoints: Vec<CheckpointJson>,
}

/// What `recommend --json` prints.
#[derive(Debug, Clone, Serialize)]
pub struct DryRunOutput {
    pub policy: String,
    pub app: String,
    pub time_s: f64,
    pub current: Current,
    pub recommendation: Recommendation,
    pub details: Value,
}

#[derive(Debug, Clone, Serialize)]
pub struct Current {
    pub replicas: u32,
    pub resources: ContainerResources,
}

/// The input, checked: the HPA spec and checkpoints converted, ranges enforced, pods with
/// containers given their sums.
#[derive(Debug, Clone)]
pub struct Checked {
    pub observation: Observation,
    pub history: Vec<Observation>,
    pub slo_p99_ms: Option<f64>,
    pub hpa: Option<HpaSpec>,
    pub unlisted_pod_metrics: Vec<UnlistedPodMetrics>,
    /// (container name, aggregate state) per checkpoint.
    pub vpa_checkpoints: Vec<(String, AggregateCheckpoint)>,
}

/// Parses and checks the input JSON; `file` names it in errors.
pub fn parse_input(text: &str, file: &str) -> Result<Checked, DryRunError> {
    let text = text.strip_prefix('\u{feff}').unwrap_or(text);
    // serde would take an array for the object, field by field in order; refused as the
    // object it is not, rather than in serde's words (`expected struct DryRunInput`).
    if text.trim_start().starts_with(|c: char| c != '{') {
        return Err(DryRunError::NotAnObject { file: file.into() });
    }
    let mut de = serde_json::Deserializer::from_str(text);
    let input: DryRunInput = serde_path_to_error::deserialize(&mut de).map_err(|e| {
        let field = e.path().to_string();
        parse_error(file, e.inner(), &field)
    })?;
    // Nothing but white space may follow the object.
    de.end().map_err(|e| parse_error(file, &e, "."))?;
    check(input, file)
}

/// A JSON error as the user reads it: the field when one is known, serde's reason without its
/// position (given before) and without the names of internal types.
fn parse_error(file: &str, e: &serde_json::Error, field: &str) -> DryRunError {
    let (line, column) = (e.line(), e.column());
    let syntax = |reason: &str| DryRunError::Syntax { file: file.into(), line, column, reason: reason.into() };
    if e.classify() == serde_json::error::Category::Eof {
        return syntax("unexpected end of file");
    }
    let reason = e.to_string();
    let reason = plain_reason(reason.split(" at line ").next().unwrap_or(&reason));
    if reason == "trailing characters" {
        return syntax("unexpected text after the JSON object");
    }
    // A key that does not parse leaves its place unknown (`?`): named up to its object.
    let field = field.trim_end_matches('?').trim_end_matches('.');
    if field.is_empty() {
        return syntax(&reason);
    }
    DryRunError::Parse { file: file.into(), line, column, field: field.into(), reason }
}

/// serde's reason with the internal type it expected (`expected struct Observation`, `… with 12
/// elements` when given an array) named as the JSON object it is.
fn plain_reason(reason: &str) -> String {
    match reason.find("expected struct ") {
        None => reason.to_string(),
        Some(_) if reason.starts_with("invalid length") => "expected a JSON object, not an array".to_string(),
        Some(at) => format!("{}expected a JSON object", &reason[..at]),
    }
}

/// Reads, parses and checks `path`.
pub fn read_input(path: &Path) -> Result<Checked, DryRunError> {
    let file = path.display().to_string();
    let text =
        std::fs::read_to_string(path).map_err(|e| DryRunError::Read { file: file.clone(), reason: e.to_string() })?;
    parse_input(&text, &file)
}

fn invalid(file: &str, field: impl Into<String>, reason: impl Into<String>) -> DryRunError {
    DryRunError::Invalid { file: file.into(), field: field.into(), reason: reason.into() }
}

fn check_resources(file: &str, at: &str, r: &Resources) -> Result<(), DryRunError> {
    if r.cpu_millicores > MAX_CPU_MILLICORES {
        return Err(invalid(
            file,
            format!("{at}.cpu_millicores"),
            format!("{} is above 1,000 cores (valid: 0 for none, or 1 m to 1,000 cores)", r.cpu_millicores),
        ));
    }
    if r.memory_bytes != 0 && !(MIN_MEMORY_BYTES..=MAX_MEMORY_BYTES).contains(&r.memory_bytes) {
        return Err(invalid(
            file,
            format!("{at}.memory_bytes"),
            format!("{} is outside 1 MiB to 16 TiB (0 means none)", r.memory_bytes),
        ));
    }
    Ok(())
}

/// One container's requests and limits as Kubernetes admits them: each in range, and a request no
/// larger than its limit where both are set (the API server refuses such a container).
fn check_requests_and_limits(
    file: &str,
    at: &str,
    requests: &Resources,
    limits: &Resources,
) -> Result<(), DryRunError> {
    check_resources(file, &format!("{at}.requests"), requests)?;
    check_resources(file, &format!("{at}.limits"), limits)?;
    for (name, request, limit) in [
        ("cpu_millicores", requests.cpu_millicores, limits.cpu_millicores),
        ("memory_bytes", requests.memory_bytes, limits.memory_bytes),
    ] {
        if request > 0 && limit > 0 && request > limit {
            return Err(invalid(
                file,
                format!("{at}.requests.{name}"),
                format!("{request} is above the limit {limit} (a request must not exceed its limit)"),
            ));
        }
    }
    Ok(())
}

/// A usage sample: finite, not negative, and no more than any pod can hold (`most`).
fn check_usage(file: &str, at: &str, v: Option<f64>, most: f64) -> Result<(), DryRunError> {
    match v {
        Some(x) if !(x.is_finite() && x >= 0.0) => {
            Err(invalid(file, at, format!("{x} is not a finite non-negative usage")))
        }
        Some(x) if x > most => Err(invalid(file, at, format!("{x} is above what one pod can hold ({most})"))),
        _ => Ok(()),
    }
}

/// A pod's custom metric, which the HPA averages per pod against its target: finite and not
/// negative.
fn check_custom_metric(file: &str, at: &str, v: f64) -> Result<(), DryRunError> {
    if v.is_finite() && v >= 0.0 {
        return Ok(());
    }
    Err(invalid(file, at, format!("{v} is not a finite non-negative value (the HPA averages it per pod)")))
}

/// Most CPU cores and working-set bytes one pod's usage can read.
const MOST_CORES: f64 = MAX_CPU_MILLICORES as f64 / 1000.0;
const MOST_BYTES: f64 = MAX_MEMORY_BYTES as f64;

/// Range checks on one observation; pods with containers get the containers' sums.
fn check_observation(file: &str, at: &str, o: &mut Observation) -> Result<(), DryRunError> {
    // Named by its path in the file before `validate`, which refuses it too.
    for (field, v) in [("latency_mean_ms", o.latency_mean_ms), ("latency_p99_ms", o.latency_p99_ms)] {
        if let Some(v) = v
            && v < 0.0
        {
            return Err(invalid(file, format!("{at}.{field}"), format!("{v} is not a latency (negative)")));
        }
    }
    o.validate().map_err(|e| invalid(file, at, e.to_string()))?;
    if !(o.time_s.is_finite() && o.interval_s.is_finite() && o.interval_s > 0.0) {
        return Err(invalid(file, format!("{at}.interval_s"), "must be a positive number of seconds"));
    }
    if !(1..=MAX_REPLICAS).contains(&(o.desired_replicas as u64)) {
        return Err(invalid(
            file,
            format!("{at}.desired_replicas"),
            format!("{} is outside 1 to 100,000", o.desired_replicas),
        ));
    }
    if o.pods.len() as u64 > 2 * MAX_REPLICAS {
        return Err(invalid(file, format!("{at}.pods"), "more than 200,000 pods"));
    }
    // The template and a pod's `resources` are sums over containers (one may have a request
    // and no limit): only each container's own request is held to its limit.
    check_resources(file, &format!("{at}.template.requests"), &o.template.requests)?;
    check_resources(file, &format!("{at}.template.limits"), &o.template.limits)?;
    let mut names = std::collections::HashSet::new();
    for (i, p) in o.pods.iter_mut().enumerate() {
        let pat = format!("{at}.pods[{i}]");
        if !names.insert(p.name.clone()) {
            return Err(invalid(file, format!("{pat}.name"), format!("{:?} names an earlier pod too", p.name)));
        }
        check_resources(file, &format!("{pat}.resources.requests"), &p.resources.requests)?;
        check_resources(file, &format!("{pat}.resources.limits"), &p.resources.limits)?;
        for (name, v) in &p.custom_metrics {
            check_custom_metric(file, &format!("{pat}.custom_metrics.{name}"), *v)?;
        }
        for (j, c) in p.containers.iter().enumerate() {
            let cat = format!("{pat}.containers[{j}]");
            check_requests_and_limits(file, &cat, &c.requests, &c.limits)?;
            check_usage(file, &format!("{cat}.cpu_usage_cores"), c.cpu_usage_cores, MOST_CORES)?;
            check_usage(file, &format!("{cat}.memory_working_set_bytes"), c.memory_working_set_bytes, MOST_BYTES)?;
        }
        check_usage(file, &format!("{pat}.cpu_usage_cores"), p.cpu_usage_cores, MOST_CORES)?;
        check_usage(file, &format!("{pat}.memory_working_set_bytes"), p.memory_working_set_bytes, MOST_BYTES)?;
        if !p.containers.is_empty() {
            let total = |f: &dyn Fn(&aware_core::ContainerObservation) -> u64| {
                p.containers.iter().map(f).fold(0u64, u64::saturating_add)
            };
            let requests = Resources::new(total(&|c| c.requests.cpu_millicores), total(&|c| c.requests.memory_bytes));
            let limits = Resources::new(total(&|c| c.limits.cpu_millicores), total(&|c| c.limits.memory_bytes));
            // A container without a sample makes the pod's sum unknown, as the metrics API has it.
            let cpu = p.containers.iter().try_fold(0.0, |a, c| c.cpu_usage_cores.map(|v| a + v));
            let mem = p.containers.iter().try_fold(0.0, |a, c| c.memory_working_set_bytes.map(|v| a + v));
            p.resources.requests = requests;
            p.resources.limits = limits;
            p.cpu_usage_cores = cpu;
            p.memory_working_set_bytes = mem;
        }
    }
    Ok(())
}

fn resource_name(file: &str, at: &str, name: &str) -> Result<ResourceName, DryRunError> {
    match name {
        "cpu" => Ok(ResourceName::Cpu),
        "memory" => Ok(ResourceName::Memory),
        other => Err(invalid(file, at, format!("resource {other:?} is not supported (cpu or memory)"))),
    }
}

fn positive_milli(file: &str, at: &str, q: &QuantityJson) -> Result<i64, DryRunError> {
    let v = q.value().map_err(|e| invalid(file, at, e.to_string()))?;
    match quantity::milli(v) {
        Some(m) if m > 0 => Ok(m),
        None if v > 0.0 => Err(invalid(file, at, format!("{v:e} is too large (at most 9.2e15)"))),
        _ => Err(invalid(file, at, format!("{v} must be a positive quantity"))),
    }
}

fn target(file: &str, at: &str, t: &TargetJson, allow_utilisation: bool) -> Result<MetricTarget, DryRunError> {
    match t.kind.as_str() {
        "Utilization" if allow_utilisation => match t.average_utilization {
            Some(u) if u > 0 && u <= i32::MAX as i64 => Ok(MetricTarget::Utilization(u as i32)),
            Some(u) => Err(invalid(file, format!("{at}.averageUtilization"), format!("{u} must be above 0"))),
            None => Err(invalid(file, format!("{at}.averageUtilization"), "required for a Utilization target")),
        },
        "AverageValue" => match &t.average_value {
            Some(q) => Ok(MetricTarget::AverageValueMilli(positive_milli(file, &format!("{at}.averageValue"), q)?)),
            None => Err(invalid(file, format!("{at}.averageValue"), "required for an AverageValue target")),
        },
        other => Err(invalid(
            file,
            format!("{at}.type"),
            format!(
                "target type {other:?} is not supported here (expected {})",
                if allow_utilisation { "Utilization or AverageValue" } else { "AverageValue" }
            ),
        )),
    }
}

fn rules(file: &str, at: &str, r: &RulesJson) -> Result<(ScalingRulesSpec, Option<f64>), DryRunError> {
    let window = match r.stabilization_window_seconds {
        Some(w) if (0..=3600).contains(&w) => Some(w as i32),
        Some(w) => {
            return Err(invalid(file, format!("{at}.stabilizationWindowSeconds"), format!("{w} is outside 0 to 3600")));
        }
        None => None,
    };
    let select = match r.select_policy.as_deref() {
        None => None,
        Some("Max") => Some(SelectPolicy::Max),
        Some("Min") => Some(SelectPolicy::Min),
        Some("Disabled") => Some(SelectPolicy::Disabled),
        Some(other) => {
            return Err(invalid(file, format!("{at}.selectPolicy"), format!("{other:?} is not Max, Min or Disabled")));
        }
    };
    let policies = match &r.policies {
        None => None,
        Some(ps) => {
            let mut out = Vec::new();
            for (i, p) in ps.iter().enumerate() {
                let pat = format!("{at}.policies[{i}]");
                let kind = match p.kind.as_str() {
                    "Pods" => PolicyKind::Pods,
                    "Percent" => PolicyKind::Percent,
                    other => {
                        return Err(invalid(file, format!("{pat}.type"), format!("{other:?} is not Pods or Percent")));
                    }
                };
                if !(1..=i32::MAX as i64).contains(&p.value) {
                    return Err(invalid(file, format!("{pat}.value"), format!("{} must be above 0", p.value)));
                }
                if !(1..=1800).contains(&p.period_seconds) {
                    return Err(invalid(
                        file,
                        format!("{pat}.periodSeconds"),
                        format!("{} is outside 1 to 1800", p.period_seconds),
                    ));
                }
                out.push(ScalingPolicy { kind, value: p.value as i32, period_s: p.period_seconds as i32 });
            }
            Some(out)
        }
    };
    let tolerance = match &r.tolerance {
        None => None,
        Some(q) => {
            let v = q.value().map_err(|e| invalid(file, format!("{at}.tolerance"), e.to_string()))?;
            if v < 0.0 {
                return Err(invalid(file, format!("{at}.tolerance"), format!("{v} must not be negative")));
            }
            Some(v)
        }
    };
    Ok((ScalingRulesSpec { stabilization_window_s: window, select_policy: select, policies }, tolerance))
}

/// `autoscaling/v2` spec → the controller's spec. Defaults as the API server applies them:
/// `minReplicas` 1, metrics CPU at 80 %, `behavior` present.
pub fn hpa_spec(file: &str, h: &HpaSpecJson) -> Result<HpaSpec, DryRunError> {
    let min = h.min_replicas.unwrap_or(1);
    if !(1..=MAX_REPLICAS as i64).contains(&min) {
        return Err(invalid(file, "hpa.minReplicas", format!("{min} is outside 1 to 100,000")));
    }
    if !(1..=MAX_REPLICAS as i64).contains(&h.max_replicas) {
        return Err(invalid(file, "hpa.maxReplicas", format!("{} is outside 1 to 100,000", h.max_replicas)));
    }
    if h.max_replicas < min {
        return Err(invalid(file, "hpa.maxReplicas", format!("{} is below minReplicas {min}", h.max_replicas)));
    }
    let mut metrics = Vec::new();
    for (i, m) in h.metrics.iter().enumerate() {
        let at = format!("hpa.metrics[{i}]");
        let missing = |part: &str| invalid(file, format!("{at}.{part}"), format!("required for type {}", m.kind));
        let spec = match m.kind.as_str() {
            "Resource" => {
                let r = m.resource.as_ref().ok_or_else(|| missing("resource"))?;
                MetricSpec::Resource {
                    resource: resource_name(file, &format!("{at}.resource.name"), &r.name)?,
                    target: target(file, &format!("{at}.resource.target"), &r.target, true)?,
                }
            }
            "ContainerResource" => {
                let r = m.container_resource.as_ref().ok_or_else(|| missing("containerResource"))?;
                MetricSpec::ContainerResource {
                    resource: resource_name(file, &format!("{at}.containerResource.name"), &r.name)?,
                    container: r.container.clone(),
                    target: target(file, &format!("{at}.containerResource.target"), &r.target, true)?,
                }
            }
            "Pods" => {
                let p = m.pods.as_ref().ok_or_else(|| missing("pods"))?;
                let MetricTarget::AverageValueMilli(v) = target(file, &format!("{at}.pods.target"), &p.target, false)?
                else {
                    return Err(invalid(file, format!("{at}.pods.target"), "must be AverageValue"));
                };
                MetricSpec::Pods { name: p.metric.name.clone(), target_average_milli: v }
            }
            other @ ("Object" | "External") => {
                return Err(invalid(
                    file,
                    format!("{at}.type"),
                    format!(
                        "{other} metrics need the object's or external series' value, which the input cannot carry"
                    ),
                ));
            }
            other => return Err(invalid(file, format!("{at}.type"), format!("unknown metric type {other:?}"))),
        };
        metrics.push(spec);
    }
    if metrics.is_empty() {
        metrics.push(MetricSpec::cpu_utilisation(80));
    }
    let mut behavior = BehaviorSpec::default();
    if let Some(b) = &h.behavior {
        if let Some(r) = &b.scale_up {
            let (rules, tolerance) = rules(file, "hpa.behavior.scaleUp", r)?;
            behavior.scale_up = Some(rules);
            behavior.scale_up_tolerance = tolerance;
        }
        if let Some(r) = &b.scale_down {
            let (rules, tolerance) = rules(file, "hpa.behavior.scaleDown", r)?;
            behavior.scale_down = Some(rules);
            behavior.scale_down_tolerance = tolerance;
        }
    }
    Ok(HpaSpec { min_replicas: min as i32, max_replicas: h.max_replicas as i32, metrics, behavior: Some(behavior) })
}

fn timestamp(file: &str, at: &str, t: &Option<String>) -> Result<Option<f64>, DryRunError> {
    match t.as_deref() {
        None | Some("") => Ok(None),
        Some(s) => chrono::DateTime::parse_from_rfc3339(s)
            .map(|d| Some(d.timestamp() as f64 + d.timestamp_subsec_nanos() as f64 * 1e-9))
            .map_err(|e| invalid(file, at, format!("{s:?} is not an RFC 3339 time: {e}"))),
    }
}

fn histogram_checkpoint(file: &str, at: &str, h: &HistogramCheckpointJson) -> Result<HistogramCheckpoint, DryRunError> {
    let mut buckets = BTreeMap::new();
    for (k, &w) in &h.bucket_weights {
        let b: i64 = k
            .parse()
            .map_err(|_| invalid(file, format!("{at}.bucketWeights.{k}"), "bucket index is not an integer"))?;
        buckets.insert(b, w);
    }
    if !(h.total_weight.is_finite() && h.total_weight >= 0.0) {
        return Err(invalid(
            file,
            format!("{at}.totalWeight"),
            format!("{} must be a non-negative number", h.total_weight),
        ));
    }
    Ok(HistogramCheckpoint {
        reference_timestamp_s: timestamp(file, &format!("{at}.referenceTimestamp"), &h.reference_timestamp)?,
        bucket_weights: buckets,
        total_weight: h.total_weight,
    })
}

fn checkpoint(file: &str, i: usize, c: &CheckpointJson) -> Result<(String, AggregateCheckpoint), DryRunError> {
    let at = format!("vpa_checkpoints[{i}]");
    if let Some(v) = c.status.version.as_deref()
        && v != "v3"
    {
        return Err(invalid(file, format!("{at}.status.version"), format!("unsupported checkpoint version {v}")));
    }
    let s = &c.status;
    let agg = AggregateCheckpoint {
        cpu_histogram: histogram_checkpoint(file, &format!("{at}.status.cpuHistogram"), &s.cpu_histogram)?,
        memory_histogram: histogram_checkpoint(file, &format!("{at}.status.memoryHistogram"), &s.memory_histogram)?,
        first_sample_start_s: timestamp(file, &format!("{at}.status.firstSampleStart"), &s.first_sample_start)?,
        last_sample_start_s: timestamp(file, &format!("{at}.status.lastSampleStart"), &s.last_sample_start)?,
        total_samples_count: s.total_samples_count,
    };
    // Validate bucket indices against the recommender's own histograms now, naming the field.
    for (name, h, opts) in [
        ("cpuHistogram", &agg.cpu_histogram, crate::vpa::model::cpu_histogram_options()),
        ("memoryHistogram", &agg.memory_histogram, crate::vpa::model::memory_histogram_options()),
    ] {
        crate::vpa::histogram::Histogram::new(opts)
            .load_from_checkpoint(h)
            .map_err(|e| invalid(file, format!("{at}.status.{name}"), e.to_string()))?;
    }
    Ok((c.spec.container_name.clone(), agg))
}

fn check(input: DryRunInput, file: &str) -> Result<Checked, DryRunError> {
    let DryRunInput { mut observation, mut history, slo_p99_ms, hpa, unlisted_pod_metrics, vpa_checkpoints } = input;
    check_observation(file, "observation", &mut observation)?;
    let mut previous = f64::NEG_INFINITY;
    for (i, h) in history.iter_mut().enumerate() {
        let at = format!("history[{i}]");
        check_observation(file, &at, h)?;
        if h.app != observation.app {
            return Err(invalid(
                file,
                format!("{at}.app"),
                format!("{:?} is not the observation's app {:?}", h.app, observation.app),
            ));
        }
        if h.time_s <= previous || h.time_s >= observation.time_s {
            return Err(invalid(
                file,
                format!("{at}.time_s"),
                "history must be oldest first and before the observation",
            ));
        }
        previous = h.time_s;
    }
    if let Some(slo) = slo_p99_ms
        && !(slo.is_finite() && slo > 0.0)
    {
        return Err(invalid(file, "slo_p99_ms", format!("must be a positive number (got {slo})")));
    }
    for (i, u) in unlisted_pod_metrics.iter().enumerate() {
        check_usage(file, &format!("unlisted_pod_metrics[{i}].cpu_usage_cores"), u.cpu_usage_cores, MOST_CORES)?;
        for (name, v) in &u.custom_metrics {
            check_custom_metric(file, &format!("unlisted_pod_metrics[{i}].custom_metrics.{name}"), *v)?;
        }
    }
    let hpa = hpa.as_ref().map(|h| hpa_spec(file, h)).transpose()?;
    let vpa_checkpoints =
        vpa_checkpoints.iter().enumerate().map(|(i, c)| checkpoint(file, i, c)).collect::<Result<Vec<_>, _>>()?;
    Ok(Checked { observation, history, slo_p99_ms, hpa, unlisted_pod_metrics, vpa_checkpoints })
}

/// Builds `kind` from the profile (the input's `hpa` replacing the profile's CPU target and
/// replica bounds), starts the VPA from the checkpoints, replays the history and answers for the
/// observation.
pub fn run(kind: BaselineKind, profile: &Profile, input: &Checked, file: &str) -> Result<DryRunOutput, DryRunError> {
    let mut baseline = Baseline::build(kind, profile, input.slo_p99_ms)
        .map_err(|source| DryRunError::Baseline { file: file.into(), source })?;
    if let Some(h) = baseline.hpa_mut()
        && let Some(spec) = &input.hpa
    {
        *h = HorizontalPodAutoscaler::new(spec.clone(), ControllerFlags::default());
    }
    let start = input.history.first().unwrap_or(&input.observation).time_s;
    if let Some(v) = baseline.vpa_mut() {
        for (i, (container, c)) in input.vpa_checkpoints.iter().enumerate() {
            v.load_checkpoint(container, c, start)
                .map_err(|e| invalid(file, format!("vpa_checkpoints[{i}].status"), e.to_string()))?;
        }
    }
    let rec = baseline.recommender();
    for (i, h) in input.history.iter().enumerate() {
        rec.recommend(h).map_err(|e| DryRunError::Recommender {
            file: file.into(),
            field: format!("history[{i}]"),
            reason: e.to_string(),
        })?;
    }
    if let Some(h) = baseline.hpa_mut() {
        h.unlisted_pod_metrics = input.unlisted_pod_metrics.clone();
    }
    let recommendation = baseline.recommender().recommend(&input.observation).map_err(|e| {
        DryRunError::Recommender { file: file.into(), field: "observation".into(), reason: e.to_string() }
    })?;
    let obs = &input.observation;
    Ok(DryRunOutput {
        policy: kind.to_string(),
        app: obs.app.clone(),
        time_s: obs.time_s,
        current: Current { replicas: obs.desired_replicas, resources: obs.template.clone() },
        recommendation,
        details: baseline.details(),
    })
}

/// `aware recommend --policy KIND --input FILE`: read, check, run.
pub fn recommend_file(kind: BaselineKind, profile: &Profile, path: &Path) -> Result<DryRunOutput, DryRunError> {
    let input = read_input(path)?;
    run(kind, profile, &input, &path.display().to_string())
}
