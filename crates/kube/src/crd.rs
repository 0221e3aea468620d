//! The `MultidimPodAutoscaler` custom resource, wire-compatible with upstream's
//! `autoscaling.k8s.io/v1alpha1` (kubernetes/autoscaler, `multidimensional-pod-autoscaler/pkg/apis/
//! autoscaling.k8s.io/v1alpha1/types.go`, the Dec 2024 API: `policy`, `goals`, `constraints`,
//! `resourcePolicy`, `recommenders`). Field names, optionality and the status shape follow that
//! file; the vertical types (`PodResourcePolicy`, `RecommendedPodResources`, `UpdateMode`) follow
//! the VPA's `autoscaling.k8s.io/v1` types it imports.
//!
//! # The AWARE extension
//!
//! The AWARE profile (SLO, reward weights, lifecycle thresholds) rides in an **annotation** that an
//! upstream controller ignores: [`PROFILE_ANNOTATION`] holds the profile YAML inline (the same
//! format `aware run --profile` reads). An MPA without the annotation gets `Profile::default()`
//! with its replica bounds taken from `constraints.global`. The schema is therefore exactly
//! upstream's, and an MPA written for AWARE still works with upstream's recommender when the
//! `recommenders` list names that one instead.

use std::collections::BTreeMap;

use aware_core::{Profile, ProfileError};
use k8s_openapi::api::autoscaling::v1::CrossVersionObjectReference;
use k8s_openapi::api::autoscaling::v2::{HorizontalPodAutoscalerBehavior, MetricSpec, MetricStatus};
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use k8s_openapi::apimachinery::pkg::api::resource::Quantity;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use kube::{CustomResource, CustomResourceExt, ResourceExt};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use serde_json::{Value, json};

/// Annotation on a `MultidimPodAutoscaler` holding the AWARE profile as YAML. Upstream's
/// controllers never read annotations they do not know, so the object stays valid for them.
pub const PROFILE_ANNOTATION: &str = "autoscaling.aware.dev/profile";

/// The recommender name this project's controller answers to in `spec.recommenders[0].name`.
pub const DEFAULT_RECOMMENDER_NAME: &str = "aware";

/// Upstream's quantity pattern, as controller-gen emits it for `resource.Quantity`
/// (apimachinery `pkg/api/resource/quantity.go`, `+kubebuilder:validation:Pattern`).
pub const QUANTITY_PATTERN: &str = r"^(\+|-)?(([0-9]+(\.[0-9]*)?)|(\.[0-9]+))(([KMGTPE]i)|[numkMGTPE]|([eE](\+|-)?(([0-9]+(\.[0-9]*)?)|(\.[0-9]+))))?$";

/// A map from resource name (`cpu`, `memory`, …) to a quantity, as `core/v1 ResourceList`.
pub type ResourceList = BTreeMap<String, Quantity>;

/// Specification of the behaviour of the autoscaler (upstream `MultidimPodAutoscalerSpec`).
// kube's derive takes one `printcolumn(...)` per column; clippy reads the repeats as duplicates.
#[allow(clippy::duplicated_attributes)]
#[derive(CustomResource, Serialize, Deserialize, Clone, Debug, PartialEq, JsonSchema)]
#[kube(
    group = "autoscaling.k8s.io",
    version = "v1alpha1",
    kind = "MultidimPodAutoscaler",
    plural = "multidimpodautoscalers",
    namespaced,
    shortname = "mpa",
    status = "MultidimPodAutoscalerStatus",
    derive = "PartialEq",
    printcolumn(name = "Mode", type_ = "string", json_path = ".spec.policy.updateMode"),
    printcolumn(
        name = "CPU",
        type_ = "string",
        json_path = ".status.recommendation.containerRecommendations[0].target.cpu"
    ),
    printcolumn(
        name = "Mem",
        type_ = "string",
        json_path = ".status.recommendation.containerRecommendations[0].target.memory"
    ),
    printcolumn(name = "Replicas", type_ = "integer", json_path = ".status.desiredReplicas"),
    printcolumn(
        name = "Provided",
        type_ = "string",
        json_path = ".status.conditions[?(@.type=='RecommendationProvided')].status"
    ),
    printcolumn(name = "Age", type_ = "date", json_path = ".metadata.creationTimestamp")
)]
#[serde(rename_all = "camelCase")]
pub struct MultidimPodAutoscalerSpec {
    /// Points to the controller managing the set of pods for the autoscaler to control, e.g. a
    /// Deployment; it must implement the scale subresource.
    pub scale_target_ref: CrossVersionObjectReference,
    /// Describes the rules on how changes are applied to the pods.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub policy: Option<PodUpdatePolicy>,
    /// Describes the goals for autoscaling.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub goals: Option<Goals>,
    /// Describes the constraints for horizontal and vertical scaling.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub constraints: Option<ScalingConstraints>,
    /// Controls how the vertical autoscaler computes recommended resources (VPA container
    /// policies).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub resource_policy: Option<PodResourcePolicy>,
    /// The recommender responsible for this object: empty (the default recommender) or exactly one.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[schemars(length(max = 1))]
    pub recommenders: Vec<RecommenderSelector>,
}

/// Rules on how changes are applied to the pods (upstream `PodUpdatePolicy`).
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, Default, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct PodUpdatePolicy {
    /// Controls when the autoscaler applies changes to the pod resources. The default is `Auto`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub update_mode: Option<UpdateMode>,
}

/// VPA's `UpdateMode` (vertical-pod-autoscaler `types.go`), including `InPlaceOrRecreate`
/// (VPA 1.4, in-place pod resize): `Off` computes recommendations and never applies them;
/// `Initial` sets resources only when pods are created; `Recreate` evicts pods to recreate them
/// with the recommended resources; `InPlaceOrRecreate` resizes through `pods/{name}/resize`;
/// `Auto` (the default) is currently `Recreate`, as upstream.
// No per-variant doc comments: schemars would turn the enum into `oneOf` consts instead of the
// plain `enum` upstream's CRD has.
#[derive(Serialize, Deserialize, Clone, Copy, Debug, PartialEq, Eq, Default, JsonSchema)]
#[non_exhaustive]
pub enum UpdateMode {
    Off,
    Initial,
    Recreate,
    InPlaceOrRecreate,
    #[default]
    Auto,
}

impl UpdateMode {
    /// Whether the updater may change running pods at all.
    pub fn acts_on_running_pods(self) -> bool {
        matches!(self, Self::Recreate | Self::InPlaceOrRecreate | Self::Auto)
    }
}

/// Goals of the autoscaling (upstream `Goals`).
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, Default, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct Goals {
    /// autoscaling/v2 metric specifications (resource utilisation or workload performance).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[schemars(extend("x-kubernetes-list-type" = "atomic"))]
    pub metrics: Vec<MetricSpec>,
}

/// Constraints for horizontal and vertical scaling (upstream `ScalingConstraints`).
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, Default, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ScalingConstraints {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub global: Option<HorizontalScalingConstraints>,
    /// Controlled resources; `[cpu, memory]` when unset.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub container_controlled_resources: Vec<String>,
    /// Per-container vertical limits.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub container: Vec<VerticalScalingConstraints>,
}

/// Horizontal limits (upstream `HorizontalScalingConstraints`).
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct HorizontalScalingConstraints {
    /// Lower limit for the number of pods, default 1.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 0))]
    pub min_replicas: Option<i32>,
    /// Upper limit for the number of pods; not smaller than `minReplicas`.
    #[schemars(range(min = 1))]
    pub max_replicas: i32,
    /// autoscaling/v2 scaling behaviour (stabilisation windows, policies, tolerances).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub behavior: Option<HorizontalPodAutoscalerBehavior>,
}

/// Vertical limits for one container (upstream `VerticalScalingConstraints`).
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, Default, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct VerticalScalingConstraints {
    /// Name of the container, or `*` for every container.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub name: String,
    /// Whether autoscaling is enabled for the container; default `Auto`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub mode: Option<ContainerScalingMode>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub requests: Option<MinMaxVerticalScalingLimits>,
}

/// Min/max vertical limits (upstream `MinMaxVerticalScalingLimits`).
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, Default, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct MinMaxVerticalScalingLimits {
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    #[schemars(schema_with = "resource_list_schema")]
    pub min_allowed: ResourceList,
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    #[schemars(schema_with = "resource_list_schema")]
    pub max_allowed: ResourceList,
}

/// VPA's `ContainerScalingMode`.
#[derive(Serialize, Deserialize, Clone, Copy, Debug, PartialEq, Eq, Default, JsonSchema)]
#[non_exhaustive]
pub enum ContainerScalingMode {
    #[default]
    Auto,
    Off,
}

/// VPA's `ContainerControlledValues`.
#[derive(Serialize, Deserialize, Clone, Copy, Debug, PartialEq, Eq, Default, JsonSchema)]
#[non_exhaustive]
pub enum ContainerControlledValues {
    #[default]
    RequestsAndLimits,
    RequestsOnly,
}

/// VPA's `PodResourcePolicy`.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, Default, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct PodResourcePolicy {
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub container_policies: Vec<ContainerResourcePolicy>,
}

/// VPA's `ContainerResourcePolicy`.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, Default, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ContainerResourcePolicy {
    /// Name of the container, or `*` for the default policy.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub container_name: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub mode: Option<ContainerScalingMode>,
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    #[schemars(schema_with = "resource_list_schema")]
    pub min_allowed: ResourceList,
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    #[schemars(schema_with = "resource_list_schema")]
    pub max_allowed: ResourceList,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub controlled_resources: Option<Vec<ControlledResource>>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub controlled_values: Option<ContainerControlledValues>,
}

/// The resources a VPA container policy may name (`controlledResources` items).
#[derive(Serialize, Deserialize, Clone, Copy, Debug, PartialEq, Eq, JsonSchema)]
#[serde(rename_all = "lowercase")]
#[non_exhaustive]
pub enum ControlledResource {
    Cpu,
    Memory,
}

/// Selects the recommender for an MPA (upstream `MultidimPodAutoscalerRecommenderSelector`).
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, JsonSchema)]
pub struct RecommenderSelector {
    pub name: String,
}

/// Current state of the autoscaler (upstream `MultidimPodAutoscalerStatus`).
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, Default, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct MultidimPodAutoscalerStatus {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_scale_time: Option<Time>,
    #[serde(default)]
    pub current_replicas: i32,
    #[serde(default)]
    pub desired_replicas: i32,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub recommendation: Option<RecommendedPodResources>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[schemars(extend("x-kubernetes-list-type" = "atomic"))]
    pub current_metrics: Vec<MetricStatus>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub conditions: Vec<MultidimPodAutoscalerCondition>,
}

/// VPA's `RecommendedPodResources`.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, Default, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct RecommendedPodResources {
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub container_recommendations: Vec<RecommendedContainerResources>,
}

/// VPA's `RecommendedContainerResources`.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, Default, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct RecommendedContainerResources {
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub container_name: String,
    #[schemars(schema_with = "resource_list_schema")]
    pub target: ResourceList,
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    #[schemars(schema_with = "resource_list_schema")]
    pub lower_bound: ResourceList,
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    #[schemars(schema_with = "resource_list_schema")]
    pub upper_bound: ResourceList,
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    #[schemars(schema_with = "resource_list_schema")]
    pub uncapped_target: ResourceList,
}

/// One condition (upstream `MultidimPodAutoscalerCondition`). `type` is a free string upstream;
/// the known values are the `CONDITION_*` constants.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct MultidimPodAutoscalerCondition {
    #[serde(rename = "type")]
    pub type_: String,
    /// `True`, `False` or `Unknown`.
    pub status: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_transition_time: Option<Time>,
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub reason: String,
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub message: String,
}

// Condition types, upstream `types.go`.
pub const CONDITION_RECOMMENDATION_PROVIDED: &str = "RecommendationProvided";
pub const CONDITION_LOW_CONFIDENCE: &str = "LowConfidence";
pub const CONDITION_NO_PODS_MATCHED: &str = "NoPodsMatched";
pub const CONDITION_FETCHING_HISTORY: &str = "FetchingHistory";
pub const CONDITION_CONFIG_DEPRECATED: &str = "ConfigDeprecated";
pub const CONDITION_CONFIG_UNSUPPORTED: &str = "ConfigUnsupported";
pub const CONDITION_SCALING_ACTIVE: &str = "ScalingActive";
pub const CONDITION_ABLE_TO_SCALE: &str = "AbleToScale";
pub const CONDITION_SCALING_LIMITED: &str = "ScalingLimited";

/// Upstream's schema for a `ResourceList`: a map of int-or-string quantities with the quantity
/// pattern, exactly as controller-gen emits it in `mpa-v1alpha1-crd-gen.yaml`.
fn resource_list_schema(_: &mut schemars::SchemaGenerator) -> schemars::Schema {
    schemars::json_schema!({
        "type": "object",
        "additionalProperties": quantity_schema(),
    })
}

fn quantity_schema() -> Value {
    json!({
        "anyOf": [{"type": "integer"}, {"type": "string"}],
        "pattern": QUANTITY_PATTERN,
        "x-kubernetes-int-or-string": true,
    })
}

/// Errors reading an MPA's AWARE extension.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum ExtensionError {
    #[error("MultidimPodAutoscaler {object}: annotation {PROFILE_ANNOTATION}: {source}")]
    Profile { object: String, source: ProfileError },
}

impl MultidimPodAutoscaler {
    /// `namespace/name`, for messages.
    pub fn key(&self) -> String {
        format!("{}/{}", self.namespace().unwrap_or_default(), self.name_any())
    }

    /// The update mode with upstream's default (`Auto`).
    pub fn update_mode(&self) -> UpdateMode {
        self.spec.policy.as_ref().and_then(|p| p.update_mode).unwrap_or_default()
    }

    /// The recommender named in `spec.recommenders`, `None` for upstream's default recommender.
    pub fn recommender_name(&self) -> Option<&str> {
        self.spec.recommenders.first().map(|r| r.name.as_str())
    }

    /// Whether a recommender called `recommender_name` serves this MPA: `spec.recommenders[0]`
    /// names it, or the list is empty (upstream's default recommender) and `claim_default` is set.
    pub fn served_by(&self, recommender_name: &str, claim_default: bool) -> bool {
        match self.recommender_name() {
            Some(name) => name == recommender_name,
            None => claim_default,
        }
    }

    /// The AWARE profile: the annotation's YAML when present, else the default; replica bounds
    /// from `constraints.global` override the profile's (the MPA object is the operator's
    /// contract with the cluster).
    pub fn profile(&self) -> Result<Profile, ExtensionError> {
        let mut profile = match self.annotations().get(PROFILE_ANNOTATION) {
            Some(text) => {
                let source = format!("MultidimPodAutoscaler {}", self.key());
                Profile::parse(text, &source)
                    .map_err(|source| ExtensionError::Profile { object: self.key(), source })?
            }
            None => Profile::default(),
        };
        if let Some(global) = self.spec.constraints.as_ref().and_then(|c| c.global.as_ref()) {
            profile.bounds.min_replicas = global.min_replicas.unwrap_or(1).max(1) as u32;
            profile.bounds.max_replicas = (global.max_replicas.max(1) as u32).max(profile.bounds.min_replicas);
        }
        Ok(profile)
    }
}

/// The CRD generated from the Rust types, with quantities given upstream's int-or-string schema
/// (`anyOf: [integer, string]` + the quantity pattern) and k8s-openapi's long Quantity
/// description shortened.
pub fn crd() -> CustomResourceDefinition {
    let mut crd = MultidimPodAutoscaler::crd();
    for version in &mut crd.spec.versions {
        if let Some(schema) = version.schema.as_mut().and_then(|s| s.open_api_v3_schema.as_mut()) {
            let mut value = serde_json::to_value(&*schema).expect("a JSONSchemaProps serialises");
            normalise_quantities(&mut value);
            *schema = serde_json::from_value(value).expect("a rewritten JSONSchemaProps deserialises");
        }
    }
    crd
}

/// The CRD as YAML, what `aware crd` prints.
pub fn crd_yaml() -> String {
    serde_saphyr::to_string(&crd()).expect("a CRD serialises to YAML")
}

/// The `openAPIV3Schema` of the (only) version, as JSON.
pub fn open_api_v3_schema() -> Value {
    let crd = crd();
    let schema = crd.spec.versions[0].schema.as_ref().and_then(|s| s.open_api_v3_schema.as_ref());
    serde_json::to_value(schema).expect("a JSONSchemaProps serialises")
}

fn normalise_quantities(node: &mut Value) {
    match node {
        Value::Object(map) => {
            let int_or_string = map.get("x-kubernetes-int-or-string") == Some(&Value::Bool(true));
            let from_k8s_openapi =
                map.get("description").and_then(Value::as_str).is_some_and(|d| d.starts_with("Quantity is"));
            // kube's structural rewrite hoists the types out of our own quantities' `anyOf`,
            // leaving `anyOf: [{}, {}]` (anything goes); put upstream's int-or-string back.
            let ours = map.get("pattern").and_then(Value::as_str) == Some(QUANTITY_PATTERN);
            // k8s-openapi's quantities, top-level or embedded in autoscaling/v2 (`averageValue`,
            // `value`, `tolerance`), carry no type at all. (The MPA embeds no `IntOrString`
            // field, only quantities; the CRD test checks every int-or-string node ends up with
            // the pattern.)
            let untyped = !map.contains_key("anyOf") && !map.contains_key("type");
            if int_or_string && (ours || untyped) {
                // k8s-openapi's own Quantity description is a page long: replace it; keep a
                // field's description.
                let description = if from_k8s_openapi {
                    Some(Value::String("A resource quantity (Kubernetes `resource.Quantity`): an integer or a string such as `500m`, `1.5`, `128Mi`.".into()))
                } else {
                    map.get("description").cloned()
                };
                let mut q = quantity_schema();
                if let Some(d) = description {
                    q["description"] = d;
                }
                *node = q;
                return;
            }
            for v in map.values_mut() {
                normalise_quantities(v);
            }
        }
        Value::Array(items) => items.iter_mut().for_each(normalise_quantities),
        _ => {}
    }
}

/// Translates a Kubernetes structural `openAPIV3Schema` into a plain JSON Schema (draft 2020-12)
/// that a standard validator enforces the way the API server does with strict field validation
/// (`kubectl --validate=strict`, the default since Kubernetes 1.27):
/// - `nullable: true` admits `null`;
/// - `x-kubernetes-int-or-string: true` means an integer or a string (`anyOf`);
/// - `format: int32` / `int64` bound the integer's range;
/// - an object schema with `properties` rejects unknown fields (`additionalProperties: false`)
///   unless it has `x-kubernetes-preserve-unknown-fields: true` or its own `additionalProperties`;
/// - the embedded `metadata` is left to the API server (any object).
pub fn json_schema_for_validation(openapi: &Value) -> Value {
    let mut schema = openapi.clone();
    translate(&mut schema);
    // The API server accepts the object's envelope whatever the CRD's schema says: `apiVersion`
    // and `kind` are strings and `metadata` is validated by the server itself, not the schema.
    if let Some(Value::Object(props)) = schema.get_mut("properties") {
        props.insert("apiVersion".into(), json!({"type": "string"}));
        props.insert("kind".into(), json!({"type": "string"}));
        props.insert("metadata".into(), json!({"type": "object"}));
    }
    schema
}

fn translate(node: &mut Value) {
    let Value::Object(map) = node else { return };
    if map.get("x-kubernetes-int-or-string") == Some(&Value::Bool(true)) && !map.contains_key("anyOf") {
        map.remove("type");
        map.insert("anyOf".into(), json!([{"type": "integer"}, {"type": "string"}]));
    }
    match map.get("format").and_then(Value::as_str) {
        Some("int32") => {
            map.entry("minimum").or_insert(json!(i32::MIN));
            map.entry("maximum").or_insert(json!(i32::MAX));
        }
        Some("int64") => {
            map.entry("minimum").or_insert(json!(i64::MIN));
            map.entry("maximum").or_insert(json!(i64::MAX));
        }
        _ => {}
    }
    if map.get("nullable") == Some(&Value::Bool(true)) {
        if let Some(Value::String(t)) = map.get("type").cloned() {
            map.insert("type".into(), json!([t, "null"]));
        } else if let Some(Value::Array(options)) = map.get_mut("anyOf") {
            options.push(json!({"type": "null"}));
        }
    }
    let preserve = map.get("x-kubernetes-preserve-unknown-fields") == Some(&Value::Bool(true));
    if map.contains_key("properties") && !map.contains_key("additionalProperties") && !preserve {
        map.insert("additionalProperties".into(), Value::Bool(false));
    }
    for key in ["properties", "patternProperties"] {
        if let Some(Value::Object(props)) = map.get_mut(key) {
            props.values_mut().for_each(translate);
        }
    }
    for key in ["items", "additionalProperties", "not"] {
        if let Some(v) = map.get_mut(key) {
            translate(v);
        }
    }
    for key in ["anyOf", "allOf", "oneOf"] {
        if let Some(Value::Array(vs)) = map.get_mut(key) {
            vs.iter_mut().for_each(translate);
        }
    }
}
