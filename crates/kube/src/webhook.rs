//! The admission webhook: sets the recommended resources on pods as they are created, so that
//! `Initial`, `Recreate` and `Auto` take effect (upstream's VPA / MPA admission controller,
//! kubernetes/autoscaler `vertical-pod-autoscaler/pkg/admission-controller`).
//!
//! On a Pod CREATE the API server posts an `admission.k8s.io/v1` `AdmissionReview` to
//! [`MUTATE_PATH`]. [`mutate_pod`] picks the first MultidimPodAutoscaler in the pod's namespace
//! that this recommender serves, whose update mode is not `Off`, that has a recommendation for
//! one of the pod's containers and whose target's pod selector matches the pod's labels; it
//! answers with a JSON patch setting each controlled container's requests to the recommendation
//! (clamped to the MPA's bounds) and, unless `controlledValues: RequestsOnly`, each limit the pod
//! has in its original ratio to the request. An annotation ([`UPDATES_ANNOTATION`]) says what was
//! changed.
//!
//! The webhook never blocks pod creation: no match, an undecodable pod, a bad quantity or an
//! unreachable API server all answer `allowed` without a patch (with a warning for the errors),
//! and the `MutatingWebhookConfiguration` in `deploy/` says `failurePolicy: Ignore` for the case
//! where the webhook does not answer at all. Only a request that is not an AdmissionReview gets
//! an HTTP error (400).
//!
//! TLS: the certificate and key files are read at start and re-read when their modification
//! time changes (checked at most every [`CERT_RECHECK`]), so a Secret renewed by cert-manager is
//! picked up without a restart.

use std::convert::Infallible;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant, SystemTime};

use futures::future::BoxFuture;
use http_body_util::{BodyExt, Full, Limited};
use hyper::body::Bytes;
use hyper::server::conn::http1;
use hyper::service::service_fn;
use hyper::{Method, Request, Response, StatusCode};
use hyper_util::rt::TokioIo;
use json_patch::jsonptr::{PointerBuf, Token};
use json_patch::{AddOperation, PatchOperation};
use k8s_openapi::api::core::v1::{Container, Pod};
use k8s_openapi::apimachinery::pkg::api::resource::Quantity;
use kube::api::{Api, DynamicObject, ListParams};
use kube::core::admission::{AdmissionRequest, AdmissionResponse, AdmissionReview, Operation};
use kube::core::{Expression, Selector, SelectorExt};
use kube::{Client, ResourceExt};
use rustls::crypto::CryptoProvider;
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer};
use rustls::server::{ClientHello, ResolvesServerCert};
use rustls::sign::CertifiedKey;
use serde_json::{Value, json};
use tokio::net::TcpListener;
use tokio::task::JoinHandle;
use tokio_rustls::TlsAcceptor;

use crate::controller::{clamp_requests, controlled, recommendation_for, scale_limits, target_api, vertical_off};
use crate::crd::{MultidimPodAutoscaler, UpdateMode};
use crate::http::Reply;
use crate::observe;
use crate::quantity::{self, QuantityError};

/// The path the `MutatingWebhookConfiguration` points at.
pub const MUTATE_PATH: &str = "/mutate-pods";

/// Pod annotation saying what the webhook changed (upstream's `vpaUpdates` / `mpaUpdates`).
pub const UPDATES_ANNOTATION: &str = "autoscaling.aware.dev/updates";

/// Largest request body accepted (the API server's own request limit is 3 MiB).
pub const MAX_BODY_BYTES: usize = 4 << 20;

/// How often the certificate files' modification times are checked for a renewal.
pub const CERT_RECHECK: Duration = Duration::from_secs(10);

/// A TLS handshake not done within this is dropped.
const HANDSHAKE_TIMEOUT: Duration = Duration::from_secs(10);

/// Which MPAs the webhook serves: the controller's ownership rule.
#[derive(Debug, Clone)]
pub struct WebhookConfig {
    /// The name MPAs put in `spec.recommenders[0].name` to be served.
    pub recommender_name: String,
    /// Also serve MPAs with an empty `recommenders` list.
    pub claim_default: bool,
}

impl Default for WebhookConfig {
    fn default() -> Self {
        Self { recommender_name: crate::crd::DEFAULT_RECOMMENDER_NAME.into(), claim_default: false }
    }
}

#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum WebhookError {
    #[error("pod {pod}: {source}")]
    PodQuantity { pod: String, source: QuantityError },
    #[error("MultidimPodAutoscaler {object}: status.recommendation: {source}")]
    RecommendationQuantity { object: String, source: QuantityError },
    #[error("MultidimPodAutoscaler {object}: constraints: {source}")]
    BoundQuantity { object: String, source: QuantityError },
    #[error("the AdmissionReview's object is not a Pod: {0}")]
    NotAPod(String),
    #[error("listing MultidimPodAutoscalers in {namespace}: {source}")]
    List { namespace: String, source: kube::Error },
    #[error("MultidimPodAutoscaler {object}: spec.scaleTargetRef: {reason}")]
    Target { object: String, reason: String },
    #[error("{flag} {path}: {reason}")]
    Pem { flag: &'static str, path: String, reason: String },
    #[error("TLS configuration: {0}")]
    Tls(#[from] rustls::Error),
    #[error("--webhook-listen: {0}")]
    Listen(#[from] crate::http::ServeError),
}

/// An MPA and the pod selector of its target (the scale subresource's `status.selector`).
#[derive(Debug, Clone)]
pub struct TargetedMpa {
    pub mpa: MultidimPodAutoscaler,
    pub selector: Selector,
}

/// What the webhook does to one pod.
#[derive(Debug, Clone, PartialEq)]
pub struct PodMutation {
    /// `namespace/name` of the MPA whose recommendation was applied.
    pub mpa: String,
    pub patch: json_patch::Patch,
    /// The value of [`UPDATES_ANNOTATION`].
    pub annotation: String,
}

/// Whether an MPA may set resources on new pods at all: served by this recommender, update
/// mode not `Off`, and a recommendation to apply. (The selector is checked per pod.)
pub fn applies_to_new_pods(mpa: &MultidimPodAutoscaler, config: &WebhookConfig) -> bool {
    mpa.served_by(&config.recommender_name, config.claim_default)
        && mpa.update_mode() != UpdateMode::Off
        && mpa
            .status
            .as_ref()
            .and_then(|s| s.recommendation.as_ref())
            .is_some_and(|r| !r.container_recommendations.is_empty())
}

fn pod_name(pod: &Pod) -> String {
    let m = &pod.metadata;
    let name = m.name.clone().or_else(|| m.generate_name.as_ref().map(|g| format!("{g}*"))).unwrap_or_default();
    format!("{}/{name}", m.namespace.as_deref().unwrap_or_default())
}

/// Decides the patch for a pod being created: the first of `candidates` (the MPAs of the pod's
/// namespace) that [`applies_to_new_pods`], has a recommendation for one of the pod's
/// containers and whose selector matches the pod's labels. `None`: leave the pod alone.
pub fn mutate_pod(
    pod: &Pod,
    candidates: &[TargetedMpa],
    config: &WebhookConfig,
) -> Result<Option<PodMutation>, WebhookError> {
    let Some(spec) = &pod.spec else { return Ok(None) };
    let labels = pod.labels();
    let chosen = candidates.iter().find(|c| {
        applies_to_new_pods(&c.mpa, config)
            && c.selector.matches(labels)
            && c.mpa.status.as_ref().and_then(|s| s.recommendation.as_ref()).is_some_and(|r| {
                spec.containers.iter().any(|k| recommendation_for(&r.container_recommendations, &k.name).is_some())
            })
    });
    let Some(TargetedMpa { mpa, .. }) = chosen else { return Ok(None) };
    let targets =
        mpa.status.as_ref().and_then(|s| s.recommendation.as_ref()).map(|r| r.container_recommendations.as_slice());
    let mut ops = Vec::new();
    let mut changes = Vec::new();
    for (index, container) in spec.containers.iter().enumerate() {
        let Some(target) = recommendation_for(targets.unwrap_or_default(), &container.name) else { continue };
        if vertical_off(mpa, &container.name) {
            continue;
        }
        let update = container_update(mpa, pod, container, &target.target)?;
        if !update.is_empty() {
            changes.push(format!("container {index}: {}", update.describe()));
            update.patch_ops(index, container, &mut ops);
        }
    }
    if ops.is_empty() {
        return Ok(None);
    }
    let annotation = format!("Pod resources updated by {}: {}", mpa.name_any(), changes.join("; "));
    if pod.metadata.annotations.is_none() {
        ops.push(add(&["metadata", "annotations"], json!({})));
    }
    ops.push(add(&["metadata", "annotations", UPDATES_ANNOTATION], Value::String(annotation.clone())));
    Ok(Some(PodMutation { mpa: mpa.key(), patch: json_patch::Patch(ops), annotation }))
}

/// The new values for one container, `None` where the webhook leaves a value alone.
#[derive(Debug, Default)]
struct ContainerUpdate {
    cpu_request: Option<Quantity>,
    memory_request: Option<Quantity>,
    cpu_limit: Option<Quantity>,
    memory_limit: Option<Quantity>,
}

impl ContainerUpdate {
    fn is_empty(&self) -> bool {
        self.fields().iter().all(|(_, _, q)| q.is_none())
    }

    /// (map, resource, value) in upstream's order: requests, then limits.
    fn fields(&self) -> [(&'static str, &'static str, &Option<Quantity>); 4] {
        [
            ("requests", "cpu", &self.cpu_request),
            ("requests", "memory", &self.memory_request),
            ("limits", "cpu", &self.cpu_limit),
            ("limits", "memory", &self.memory_limit),
        ]
    }

    /// `cpu request, memory request, cpu limit`, as upstream's annotation.
    fn describe(&self) -> String {
        let named: Vec<String> = self
            .fields()
            .iter()
            .filter(|(_, _, q)| q.is_some())
            .map(|(map, resource, _)| format!("{resource} {}", map.trim_end_matches('s')))
            .collect();
        named.join(", ")
    }

    /// JSON-patch `add` operations, creating `resources`, `requests` and `limits` first where
    /// the pod has none (adding to an existing key replaces its value).
    fn patch_ops(&self, index: usize, container: &Container, ops: &mut Vec<PatchOperation>) {
        let i = index.to_string();
        let resources = container.resources.as_ref();
        if resources.is_none() {
            ops.push(add(&["spec", "containers", &i, "resources"], json!({})));
        }
        for map in ["requests", "limits"] {
            let present = match map {
                "requests" => resources.and_then(|r| r.requests.as_ref()).is_some(),
                _ => resources.and_then(|r| r.limits.as_ref()).is_some(),
            };
            let values: Vec<_> = self.fields().into_iter().filter(|(m, _, q)| *m == map && q.is_some()).collect();
            if values.is_empty() {
                continue;
            }
            if !present {
                ops.push(add(&["spec", "containers", &i, "resources", map], json!({})));
            }
            for (_, resource, q) in values {
                if let Some(q) = q {
                    ops.push(add(&["spec", "containers", &i, "resources", map, resource], Value::String(q.0.clone())));
                }
            }
        }
    }
}

fn add(tokens: &[&str], value: Value) -> PatchOperation {
    let path = PointerBuf::from_tokens(tokens.iter().map(|t| Token::new(*t)));
    PatchOperation::Add(AddOperation { path, value })
}

/// Requests from the recommendation for the controlled resources (clamped to the MPA's bounds);
/// limits the container has, scaled in their ratio to the old request unless `RequestsOnly`.
fn container_update(
    mpa: &MultidimPodAutoscaler,
    pod: &Pod,
    container: &Container,
    target: &crate::crd::ResourceList,
) -> Result<ContainerUpdate, WebhookError> {
    let pod_err = |source| WebhookError::PodQuantity { pod: pod_name(pod), source };
    let rec_err = |source| WebhookError::RecommendationQuantity { object: mpa.key(), source };
    let control = controlled(mpa, &container.name);
    let current = observe::pod_resources(std::slice::from_ref(container)).map_err(pod_err)?;
    let mut wanted = current.clone();
    let cpu = match target.get("cpu").filter(|_| control.cpu) {
        Some(q) => Some(quantity::cpu_millicores(q).map_err(rec_err)?),
        None => None,
    };
    let memory = match target.get("memory").filter(|_| control.memory) {
        Some(q) => Some(quantity::memory_bytes(q).map_err(rec_err)?),
        None => None,
    };
    if let Some(v) = cpu {
        wanted.requests.cpu_millicores = v;
    }
    if let Some(v) = memory {
        wanted.requests.memory_bytes = v;
    }
    let mut clamped = wanted.requests;
    clamp_requests(mpa, &container.name, &mut clamped)
        .map_err(|source| WebhookError::BoundQuantity { object: mpa.key(), source })?;
    if cpu.is_some() {
        wanted.requests.cpu_millicores = clamped.cpu_millicores;
    }
    if memory.is_some() {
        wanted.requests.memory_bytes = clamped.memory_bytes;
    }
    // Only limits the container has: a pod without a limit keeps none.
    let limits = container.resources.as_ref().and_then(|r| r.limits.as_ref());
    let has_limit = |r: &str| limits.is_some_and(|l| l.contains_key(r));
    if control.limits {
        scale_limits(&mut wanted, current.requests);
    } else {
        crate::controller::cap_at_limits(&mut wanted.requests, current.limits, (has_limit("cpu"), has_limit("memory")));
    }
    Ok(ContainerUpdate {
        cpu_request: cpu.map(|_| quantity::cpu_quantity(wanted.requests.cpu_millicores)),
        memory_request: memory.map(|_| quantity::memory_quantity(wanted.requests.memory_bytes)),
        cpu_limit: (cpu.is_some() && control.limits && has_limit("cpu"))
            .then(|| quantity::cpu_quantity(wanted.limits.cpu_millicores)),
        memory_limit: (memory.is_some() && control.limits && has_limit("memory"))
            .then(|| quantity::memory_quantity(wanted.limits.memory_bytes)),
    })
}

/// A label selector in its string form (apimachinery `labels.Parse`, what a scale
/// subresource's `status.selector` holds): `a=b`, `a==b`, `a!=b`, `a in (x,y)`,
/// `a notin (x,y)`, `a`, `!a`, comma-separated. An empty string is an error here: a target
/// that selects every pod of the namespace is not one the webhook acts on.
pub fn parse_selector(text: &str) -> Result<Selector, String> {
    let mut parts = Vec::new();
    let (mut depth, mut start) = (0i32, 0);
    for (i, ch) in text.char_indices() {
        match ch {
            '(' => depth += 1,
            ')' => depth -= 1,
            ',' if depth == 0 => {
                parts.push(&text[start..i]);
                start = i + 1;
            }
            _ => {}
        }
        if depth < 0 {
            return Err(format!("unbalanced ')' in selector {text:?}"));
        }
    }
    if depth != 0 {
        return Err(format!("unbalanced '(' in selector {text:?}"));
    }
    parts.push(&text[start..]);
    let key = |k: &str| {
        let k = k.trim();
        if k.is_empty() || k.contains(|c: char| c.is_whitespace() || "=!(),".contains(c)) {
            Err(format!("bad label key {k:?} in selector {text:?}"))
        } else {
            Ok(k.to_string())
        }
    };
    let mut expressions = Vec::new();
    for part in parts.into_iter().map(str::trim) {
        if part.is_empty() {
            return Err(format!("empty requirement in selector {text:?}"));
        }
        let expression = if let Some(k) = part.strip_prefix('!') {
            Expression::DoesNotExist(key(k)?)
        } else if let Some((k, v)) = part.split_once("!=") {
            Expression::NotEqual(key(k)?, v.trim().to_string())
        } else if let Some((k, v)) = part.split_once("==").or_else(|| part.split_once('=')) {
            Expression::Equal(key(k)?, v.trim().to_string())
        } else if let Some((k, rest)) = part.split_once(char::is_whitespace) {
            let rest = rest.trim();
            let (notin, set) = match (rest.strip_prefix("notin"), rest.strip_prefix("in")) {
                (Some(set), _) => (true, set),
                (None, Some(set)) => (false, set),
                _ => return Err(format!("unknown operator in {part:?} of selector {text:?}")),
            };
            let values = set
                .trim()
                .strip_prefix('(')
                .and_then(|s| s.strip_suffix(')'))
                .ok_or_else(|| format!("expected (values) in {part:?} of selector {text:?}"))?;
            let values = values.split(',').map(|v| v.trim().to_string()).filter(|v| !v.is_empty()).collect();
            if notin { Expression::NotIn(key(k)?, values) } else { Expression::In(key(k)?, values) }
        } else {
            Expression::Exists(key(part)?)
        };
        expressions.push(expression);
    }
    Ok(expressions.into_iter().collect())
}

/// Where the webhook finds the MPAs of a namespace and their targets' selectors.
pub trait MpaSource: Send + Sync + 'static {
    /// The MPAs of `namespace` that may apply to a new pod, with their targets' selectors.
    fn candidates<'a>(&'a self, namespace: &'a str) -> BoxFuture<'a, Result<Vec<TargetedMpa>, WebhookError>>;
}

/// A fixed set of MPAs (tests, dry runs).
#[derive(Debug, Clone, Default)]
pub struct StaticMpaSource(pub Vec<TargetedMpa>);

impl MpaSource for StaticMpaSource {
    fn candidates<'a>(&'a self, namespace: &'a str) -> BoxFuture<'a, Result<Vec<TargetedMpa>, WebhookError>> {
        let found = self.0.iter().filter(|c| c.mpa.namespace().as_deref() == Some(namespace)).cloned().collect();
        Box::pin(std::future::ready(Ok(found)))
    }
}

/// MPAs read from the API server at each admission: one list of the namespace's MPAs (served
/// from the API server's watch cache, `resourceVersion=0`), then one scale-subresource read per
/// MPA that [`applies_to_new_pods`]. A target that cannot be read skips that MPA with a warning.
#[derive(Clone)]
pub struct KubeMpaSource {
    pub client: Client,
    pub config: WebhookConfig,
}

impl MpaSource for KubeMpaSource {
    fn candidates<'a>(&'a self, namespace: &'a str) -> BoxFuture<'a, Result<Vec<TargetedMpa>, WebhookError>> {
        Box::pin(async move {
            let api: Api<MultidimPodAutoscaler> = Api::namespaced(self.client.clone(), namespace);
            let list = api
                .list(&ListParams::default().match_any())
                .await
                .map_err(|source| WebhookError::List { namespace: namespace.into(), source })?;
            let mut out = Vec::new();
            for mpa in list.items.into_iter().filter(|m| applies_to_new_pods(m, &self.config)) {
                match target_selector(&self.client, namespace, &mpa).await {
                    Ok(selector) => out.push(TargetedMpa { mpa, selector }),
                    Err(e) => tracing::warn!("webhook: {e}; skipping it"),
                }
            }
            Ok(out)
        })
    }
}

/// The pod selector the target's scale subresource reports.
async fn target_selector(client: &Client, ns: &str, mpa: &MultidimPodAutoscaler) -> Result<Selector, WebhookError> {
    let bad = |reason: String| WebhookError::Target { object: mpa.key(), reason };
    let (api, name) = target_api(client, ns, mpa).map_err(|e| bad(e.to_string()))?;
    let scale = api.get_scale(&name).await.map_err(|e| bad(format!("reading the scale of {name}: {e}")))?;
    let text = scale.status.and_then(|s| s.selector).unwrap_or_default();
    parse_selector(&text).map_err(|e| bad(format!("the scale subresource of {name}: {e}")))
}

/// What the webhook server shares between requests.
pub struct WebhookState<S: MpaSource> {
    pub source: S,
    pub config: WebhookConfig,
}

/// Answers one request body posted to [`MUTATE_PATH`]: 400 unless it is an
/// `admission.k8s.io/v1` AdmissionReview with a request; otherwise 200 with the response review.
pub async fn admit<S: MpaSource>(body: &[u8], state: &WebhookState<S>) -> Reply {
    let bad =
        |reason: String| Reply { status: StatusCode::BAD_REQUEST, content_type: "text/plain", body: reason + "\n" };
    let review: AdmissionReview<DynamicObject> = match serde_json::from_slice(body) {
        Ok(r) => r,
        Err(e) => return bad(format!("malformed AdmissionReview: {e}")),
    };
    if review.types.api_version != "admission.k8s.io/v1" || review.types.kind != "AdmissionReview" {
        return bad(format!(
            "expected an admission.k8s.io/v1 AdmissionReview, got apiVersion {:?} kind {:?}",
            review.types.api_version, review.types.kind
        ));
    }
    let request: AdmissionRequest<DynamicObject> = match review.try_into() {
        Ok(r) => r,
        Err(_) => return bad("malformed AdmissionReview: no request".into()),
    };
    let response = respond(&request, state).await.into_review();
    match serde_json::to_string(&response) {
        Ok(body) => Reply { status: StatusCode::OK, content_type: "application/json", body },
        // Not reachable with kube's types; still an answer rather than a panic.
        Err(e) => Reply {
            status: StatusCode::INTERNAL_SERVER_ERROR,
            content_type: "text/plain",
            body: format!("cannot encode the AdmissionReview: {e}\n"),
        },
    }
}

/// Allowed in every case: with the patch when an MPA applies, with a warning when something
/// went wrong.
async fn respond<S: MpaSource>(
    request: &AdmissionRequest<DynamicObject>,
    state: &WebhookState<S>,
) -> AdmissionResponse {
    let response = AdmissionResponse::from(request);
    let warn = |mut response: AdmissionResponse, message: String| {
        tracing::warn!("webhook: {message}; admitting the pod unchanged");
        response.warnings = Some(vec![format!("aware webhook: {message}; pod admitted unchanged")]);
        response
    };
    match mutation(request, state).await {
        Ok(None) => response,
        Ok(Some(m)) => {
            tracing::info!(uid = %request.uid, mpa = %m.mpa, "{}", m.annotation);
            match response.clone().with_patch(m.patch) {
                Ok(patched) => patched,
                Err(e) => warn(response, format!("cannot encode the patch: {e}")),
            }
        }
        Err(e) => warn(response, e.to_string()),
    }
}

async fn mutation<S: MpaSource>(
    request: &AdmissionRequest<DynamicObject>,
    state: &WebhookState<S>,
) -> Result<Option<PodMutation>, WebhookError> {
    let is_pod = request.kind.group.is_empty() && request.kind.kind == "Pod" && request.sub_resource.is_none();
    if request.operation != Operation::Create || !is_pod {
        return Ok(None);
    }
    let Some(object) = &request.object else { return Ok(None) };
    let pod: Pod = serde_json::to_value(object)
        .and_then(serde_json::from_value)
        .map_err(|e| WebhookError::NotAPod(e.to_string()))?;
    let Some(namespace) = request.namespace.clone().or_else(|| pod.metadata.namespace.clone()) else {
        return Ok(None);
    };
    let candidates = state.source.candidates(&namespace).await?;
    mutate_pod(&pod, &candidates, &state.config)
}

/// The certificate chain and key, from PEM files; errors name the flag, the file and why.
fn load_certified_key(cert: &Path, key: &Path, provider: &CryptoProvider) -> Result<CertifiedKey, WebhookError> {
    let pem = |flag, path: &Path, reason: String| WebhookError::Pem { flag, path: path.display().to_string(), reason };
    let chain: Vec<CertificateDer<'static>> = CertificateDer::pem_file_iter(cert)
        .and_then(|certs| certs.collect::<Result<_, _>>())
        .map_err(|e| pem("--webhook-cert", cert, e.to_string()))?;
    if chain.is_empty() {
        return Err(pem("--webhook-cert", cert, "no CERTIFICATE block in the file".into()));
    }
    let private = PrivateKeyDer::from_pem_file(key).map_err(|e| pem("--webhook-key", key, e.to_string()))?;
    CertifiedKey::from_der(chain, private, provider)
        .map_err(|e| pem("--webhook-key", key, format!("does not go with the certificate: {e}")))
}

fn modified(path: &Path) -> Option<SystemTime> {
    std::fs::metadata(path).and_then(|m| m.modified()).ok()
}

/// Serves the certificate of two PEM files, re-reading them when either file's modification
/// time changes (checked at most every `recheck`); a renewal that does not load keeps the old
/// certificate and logs why.
#[derive(Debug)]
pub struct ReloadingCert {
    cert: PathBuf,
    key: PathBuf,
    provider: Arc<CryptoProvider>,
    recheck: Duration,
    state: Mutex<LoadedCert>,
}

#[derive(Debug)]
struct LoadedCert {
    key: Arc<CertifiedKey>,
    stamp: (Option<SystemTime>, Option<SystemTime>),
    checked: Instant,
}

impl ReloadingCert {
    pub fn new(cert: &Path, key: &Path, recheck: Duration) -> Result<Self, WebhookError> {
        let provider = Arc::new(rustls::crypto::ring::default_provider());
        let stamp = (modified(cert), modified(key));
        let loaded = load_certified_key(cert, key, &provider)?;
        Ok(Self {
            cert: cert.into(),
            key: key.into(),
            provider,
            recheck,
            state: Mutex::new(LoadedCert { key: Arc::new(loaded), stamp, checked: Instant::now() }),
        })
    }

    /// The certificate to serve now, re-read first when the files changed.
    pub fn current(&self) -> Arc<CertifiedKey> {
        let mut state = match self.state.lock() {
            Ok(s) => s,
            Err(poisoned) => poisoned.into_inner(),
        };
        if state.checked.elapsed() >= self.recheck {
            state.checked = Instant::now();
            let stamp = (modified(&self.cert), modified(&self.key));
            if stamp != state.stamp {
                match load_certified_key(&self.cert, &self.key, &self.provider) {
                    Ok(k) => {
                        tracing::info!("webhook: reloaded the TLS certificate from {}", self.cert.display());
                        state.key = Arc::new(k);
                        state.stamp = stamp;
                    }
                    Err(e) => {
                        tracing::warn!("webhook: certificate files changed but do not load ({e}); keeping the old")
                    }
                }
            }
        }
        state.key.clone()
    }

    fn provider(&self) -> Arc<CryptoProvider> {
        self.provider.clone()
    }
}

impl ResolvesServerCert for ReloadingCert {
    fn resolve(&self, _: ClientHello<'_>) -> Option<Arc<CertifiedKey>> {
        Some(self.current())
    }
}

/// The rustls server configuration for the webhook: TLS 1.2 and 1.3 with the ring provider,
/// HTTP/1.1, the certificate from `cert` / `key` (reloaded on change).
pub fn tls_config(cert: &Path, key: &Path) -> Result<Arc<rustls::ServerConfig>, WebhookError> {
    let resolver = ReloadingCert::new(cert, key, CERT_RECHECK)?;
    let mut config = rustls::ServerConfig::builder_with_provider(resolver.provider())
        .with_safe_default_protocol_versions()?
        .with_no_client_auth()
        .with_cert_resolver(Arc::new(resolver));
    config.alpn_protocols = vec![b"http/1.1".to_vec()];
    Ok(Arc::new(config))
}

/// Binds `addr` (port 0 picks a free one) and serves the webhook over TLS on a background task:
/// `POST /mutate-pods` and `GET /healthz`, 404 for anything else. Returns the bound address and
/// the task.
pub async fn serve_webhook<S: MpaSource>(
    addr: &str,
    cert: &Path,
    key: &Path,
    state: Arc<WebhookState<S>>,
) -> Result<(SocketAddr, JoinHandle<()>), WebhookError> {
    serve_webhook_with(addr, tls_config(cert, key)?, state).await
}

/// [`serve_webhook`] with a TLS configuration built beforehand ([`tls_config`]).
pub async fn serve_webhook_with<S: MpaSource>(
    addr: &str,
    tls: Arc<rustls::ServerConfig>,
    state: Arc<WebhookState<S>>,
) -> Result<(SocketAddr, JoinHandle<()>), WebhookError> {
    let acceptor = TlsAcceptor::from(tls);
    let listen_err = |source| crate::http::ServeError { addr: addr.into(), source };
    let listener = TcpListener::bind(addr).await.map_err(listen_err)?;
    let bound = listener.local_addr().map_err(listen_err)?;
    Ok((bound, tokio::spawn(accept_loop(listener, acceptor, state))))
}

async fn accept_loop<S: MpaSource>(listener: TcpListener, acceptor: TlsAcceptor, state: Arc<WebhookState<S>>) {
    loop {
        let Ok((stream, peer)) = listener.accept().await else { continue };
        let (acceptor, state) = (acceptor.clone(), state.clone());
        tokio::spawn(async move {
            let tls = match tokio::time::timeout(HANDSHAKE_TIMEOUT, acceptor.accept(stream)).await {
                Ok(Ok(tls)) => tls,
                Ok(Err(e)) => {
                    tracing::debug!("webhook: TLS handshake with {peer} failed: {e}");
                    return;
                }
                Err(_) => {
                    tracing::debug!("webhook: TLS handshake with {peer} timed out");
                    return;
                }
            };
            let service = service_fn(move |req| handle(req, state.clone()));
            let _ = http1::Builder::new().serve_connection(TokioIo::new(tls), service).await;
        });
    }
}

async fn handle<S: MpaSource>(
    req: Request<hyper::body::Incoming>,
    state: Arc<WebhookState<S>>,
) -> Result<Response<Full<Bytes>>, Infallible> {
    let text = |status, body: &str| Reply { status, content_type: "text/plain", body: body.into() };
    let reply = match (req.method(), req.uri().path()) {
        (&Method::GET, "/healthz") => text(StatusCode::OK, "ok\n"),
        (&Method::POST, MUTATE_PATH) => match Limited::new(req.into_body(), MAX_BODY_BYTES).collect().await {
            Ok(body) => admit(&body.to_bytes(), &state).await,
            Err(e) if e.is::<http_body_util::LengthLimitError>() => {
                text(StatusCode::PAYLOAD_TOO_LARGE, &format!("request body larger than {MAX_BODY_BYTES} bytes\n"))
            }
            Err(e) => text(StatusCode::BAD_REQUEST, &format!("cannot read the request body: {e}\n")),
        },
        (_, MUTATE_PATH) => text(StatusCode::METHOD_NOT_ALLOWED, "POST an AdmissionReview\n"),
        _ => Reply::not_found(),
    };
    let mut response = Response::new(Full::new(Bytes::from(reply.body)));
    *response.status_mut() = reply.status;
    response
        .headers_mut()
        .insert(hyper::header::CONTENT_TYPE, hyper::header::HeaderValue::from_static(reply.content_type));
    Ok(response)
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;
    use std::path::PathBuf;

    use proptest::prelude::*;
    use serde_json::{Value, json};

    use super::*;

    fn mpa(name: &str, edit: impl FnOnce(&mut Value)) -> MultidimPodAutoscaler {
        let mut v = json!({
            "apiVersion": "autoscaling.k8s.io/v1alpha1",
            "kind": "MultidimPodAutoscaler",
            "metadata": {"name": name, "namespace": "default"},
            "spec": {
                "scaleTargetRef": {"apiVersion": "apps/v1", "kind": "Deployment", "name": name},
                "policy": {"updateMode": "Auto"},
                "recommenders": [{"name": "aware"}],
            },
            "status": {"recommendation": {"containerRecommendations": [
                {"containerName": "app", "target": {"cpu": "500m", "memory": "256Mi"}},
            ]}},
        });
        edit(&mut v);
        serde_json::from_value(v).unwrap()
    }

    fn targeted(mpa: MultidimPodAutoscaler, selector: &str) -> TargetedMpa {
        TargetedMpa { mpa, selector: parse_selector(selector).unwrap() }
    }

    fn pod_json() -> Value {
        json!({
            "apiVersion": "v1",
            "kind": "Pod",
            "metadata": {"generateName": "web-", "namespace": "default", "labels": {"app": "web"}},
            "spec": {"containers": [{
                "name": "app",
                "image": "nginx",
                "resources": {
                    "requests": {"cpu": "250m", "memory": "128Mi"},
                    "limits": {"cpu": "1", "memory": "256Mi"},
                },
            }]},
        })
    }

    fn pod(edit: impl FnOnce(&mut Value)) -> Pod {
        let mut v = pod_json();
        edit(&mut v);
        serde_json::from_value(v).unwrap()
    }

    fn decide(pod: &Pod, candidates: &[TargetedMpa]) -> Option<PodMutation> {
        mutate_pod(pod, candidates, &WebhookConfig::default()).unwrap()
    }

    /// The pod as the API server stores it after the patch.
    fn apply(pod: &Pod, m: &PodMutation) -> Value {
        let mut doc = serde_json::to_value(pod).unwrap();
        json_patch::patch(&mut doc, &m.patch).unwrap();
        doc
    }

    fn resources(doc: &Value, container: usize) -> &Value {
        &doc["spec"]["containers"][container]["resources"]
    }

    #[test]
    fn a_matching_owned_mpa_sets_the_requests() {
        let p = pod(|_| {});
        let m = decide(&p, &[targeted(mpa("web", |_| {}), "app=web")]).expect("a patch");
        assert_eq!(m.mpa, "default/web");
        let doc = apply(&p, &m);
        assert_eq!(resources(&doc, 0)["requests"], json!({"cpu": "500m", "memory": "256Mi"}));
        let patched: Pod = serde_json::from_value(doc).expect("still a pod");
        assert_eq!(patched.spec.unwrap().containers[0].image.as_deref(), Some("nginx"));
    }

    #[test]
    fn limits_keep_their_ratio_to_the_requests() {
        // 250m → 500m with a 1-CPU limit (ratio 4) gives 2; 128Mi → 256Mi with 256Mi (ratio 2) gives 512Mi.
        let p = pod(|_| {});
        let m = decide(&p, &[targeted(mpa("web", |_| {}), "app=web")]).unwrap();
        assert_eq!(resources(&apply(&p, &m), 0)["limits"], json!({"cpu": "2", "memory": "512Mi"}));
    }

    #[test]
    fn the_annotation_says_what_was_applied() {
        let p = pod(|_| {});
        let m = decide(&p, &[targeted(mpa("web", |_| {}), "app=web")]).unwrap();
        let expected =
            "Pod resources updated by web: container 0: cpu request, memory request, cpu limit, memory limit";
        assert_eq!(m.annotation, expected);
        assert_eq!(apply(&p, &m)["metadata"]["annotations"][UPDATES_ANNOTATION], expected);
        // Existing annotations are kept.
        let p = pod(|v| v["metadata"]["annotations"] = json!({"team": "a"}));
        let doc = apply(&p, &decide(&p, &[targeted(mpa("web", |_| {}), "app=web")]).unwrap());
        assert_eq!(doc["metadata"]["annotations"]["team"], "a");
        assert_eq!(doc["metadata"]["annotations"][UPDATES_ANNOTATION], expected);
    }

    #[test]
    fn another_recommenders_mpa_is_left_alone() {
        let p = pod(|_| {});
        let other = mpa("web", |v| v["spec"]["recommenders"] = json!([{"name": "upstream"}]));
        assert_eq!(decide(&p, &[targeted(other, "app=web")]), None);
        // An empty list is upstream's default recommender's: served only with claim_default.
        let default = targeted(
            mpa("web", |v| v["spec"].as_object_mut().unwrap().remove("recommenders").map(drop).unwrap()),
            "app=web",
        );
        assert_eq!(decide(&p, std::slice::from_ref(&default)), None);
        let claim = WebhookConfig { claim_default: true, ..WebhookConfig::default() };
        assert!(mutate_pod(&p, &[default], &claim).unwrap().is_some());
    }

    #[test]
    fn update_mode_off_is_left_alone() {
        let p = pod(|_| {});
        let off = mpa("web", |v| v["spec"]["policy"]["updateMode"] = json!("Off"));
        assert_eq!(decide(&p, &[targeted(off, "app=web")]), None);
        // Initial is what the webhook is for.
        let initial = mpa("web", |v| v["spec"]["policy"]["updateMode"] = json!("Initial"));
        assert!(decide(&p, &[targeted(initial, "app=web")]).is_some());
    }

    #[test]
    fn a_selector_that_does_not_match_is_left_alone() {
        let p = pod(|_| {});
        assert_eq!(decide(&p, &[targeted(mpa("web", |_| {}), "app=api")]), None);
        assert_eq!(decide(&p, &[targeted(mpa("web", |_| {}), "app=web,tier=db")]), None);
    }

    #[test]
    fn no_recommendation_no_patch() {
        let p = pod(|_| {});
        let none = mpa("web", |v| v["status"] = json!({}));
        assert_eq!(decide(&p, &[targeted(none, "app=web")]), None);
        let elsewhere = mpa("web", |v| {
            v["status"]["recommendation"]["containerRecommendations"][0]["containerName"] = json!("other")
        });
        assert_eq!(decide(&p, &[targeted(elsewhere, "app=web")]), None);
    }

    #[test]
    fn the_first_matching_mpa_wins() {
        let p = pod(|_| {});
        let off = targeted(mpa("a", |v| v["spec"]["policy"]["updateMode"] = json!("Off")), "app=web");
        let miss = targeted(mpa("b", |_| {}), "app=api");
        let hit = targeted(mpa("c", |_| {}), "app");
        let later = targeted(mpa("d", |_| {}), "app=web");
        assert_eq!(decide(&p, &[off, miss, hit, later]).unwrap().mpa, "default/c");
    }

    #[test]
    fn a_container_with_mode_off_is_skipped() {
        let p = pod(|v| {
            let mut sidecar = v["spec"]["containers"][0].clone();
            sidecar["name"] = json!("sidecar");
            v["spec"]["containers"].as_array_mut().unwrap().push(sidecar);
        });
        let m = mpa("web", |v| {
            v["spec"]["constraints"] = json!({"container": [{"name": "sidecar", "mode": "Off"}]});
            v["status"]["recommendation"]["containerRecommendations"] =
                json!([{"target": {"cpu": "500m", "memory": "256Mi"}}]);
        });
        let mutation = decide(&p, &[targeted(m, "app=web")]).unwrap();
        let doc = apply(&p, &mutation);
        assert_eq!(resources(&doc, 0)["requests"]["cpu"], "500m");
        assert_eq!(resources(&doc, 1), &pod_json()["spec"]["containers"][0]["resources"]);
        assert!(mutation.annotation.contains("container 0:") && !mutation.annotation.contains("container 1"));
        // Off through resourcePolicy, for every container: nothing to do.
        let all_off = mpa("web", |v| {
            v["spec"]["resourcePolicy"] = json!({"containerPolicies": [{"containerName": "*", "mode": "Off"}]})
        });
        assert_eq!(decide(&p, &[targeted(all_off, "app=web")]), None);
    }

    #[test]
    fn requests_only_leaves_the_limits() {
        let p = pod(|_| {});
        let m = mpa("web", |v| {
            v["spec"]["resourcePolicy"] =
                json!({"containerPolicies": [{"containerName": "app", "controlledValues": "RequestsOnly"}]})
        });
        let mutation = decide(&p, &[targeted(m, "app=web")]).unwrap();
        let doc = apply(&p, &mutation);
        assert_eq!(resources(&doc, 0)["requests"], json!({"cpu": "500m", "memory": "256Mi"}));
        assert_eq!(resources(&doc, 0)["limits"], json!({"cpu": "1", "memory": "256Mi"}));
        assert!(!mutation.annotation.contains("limit"), "{}", mutation.annotation);
    }

    #[test]
    fn requests_only_never_asks_more_than_the_limit() {
        let p = pod(|_| {});
        let m = mpa("web", |v| {
            v["spec"]["resourcePolicy"] =
                json!({"containerPolicies": [{"containerName": "app", "controlledValues": "RequestsOnly"}]});
            v["status"]["recommendation"]["containerRecommendations"][0]["target"] =
                json!({"cpu": "3", "memory": "2Gi"});
        });
        let doc = apply(&p, &decide(&p, &[targeted(m, "app=web")]).unwrap());
        assert_eq!(resources(&doc, 0)["requests"], json!({"cpu": "1", "memory": "256Mi"}), "capped at the limits");
        assert_eq!(resources(&doc, 0)["limits"], json!({"cpu": "1", "memory": "256Mi"}));
    }

    #[test]
    fn only_controlled_resources_change() {
        let p = pod(|_| {});
        let m = mpa("web", |v| v["spec"]["constraints"] = json!({"containerControlledResources": ["memory"]}));
        let doc = apply(&p, &decide(&p, &[targeted(m, "app=web")]).unwrap());
        assert_eq!(resources(&doc, 0)["requests"], json!({"cpu": "250m", "memory": "256Mi"}));
        assert_eq!(resources(&doc, 0)["limits"], json!({"cpu": "1", "memory": "512Mi"}));
        let m = mpa("web", |v| {
            v["spec"]["resourcePolicy"] =
                json!({"containerPolicies": [{"containerName": "*", "controlledResources": ["cpu"]}]})
        });
        let doc = apply(&p, &decide(&p, &[targeted(m, "app=web")]).unwrap());
        assert_eq!(resources(&doc, 0)["requests"], json!({"cpu": "500m", "memory": "128Mi"}));
    }

    #[test]
    fn the_recommendation_is_clamped_to_the_bounds() {
        let p = pod(|_| {});
        let m = mpa("web", |v| {
            v["spec"]["resourcePolicy"] =
                json!({"containerPolicies": [{"containerName": "app", "maxAllowed": {"cpu": "300m"}}]});
            v["spec"]["constraints"] =
                json!({"container": [{"name": "*", "requests": {"minAllowed": {"memory": "1Gi"}}}]});
        });
        let doc = apply(&p, &decide(&p, &[targeted(m, "app=web")]).unwrap());
        assert_eq!(resources(&doc, 0)["requests"], json!({"cpu": "300m", "memory": "1Gi"}));
        assert_eq!(resources(&doc, 0)["limits"], json!({"cpu": "1200m", "memory": "2Gi"}));
    }

    #[test]
    fn a_pod_without_resources_gets_requests_and_no_limits() {
        let p = pod(|v| {
            v["spec"]["containers"][0].as_object_mut().unwrap().remove("resources");
        });
        let doc = apply(&p, &decide(&p, &[targeted(mpa("web", |_| {}), "app=web")]).unwrap());
        assert_eq!(resources(&doc, 0), &json!({"requests": {"cpu": "500m", "memory": "256Mi"}}));
        // A limit on one resource only: only that one is scaled.
        let p = pod(|v| v["spec"]["containers"][0]["resources"] = json!({"limits": {"memory": "512Mi"}}));
        let doc = apply(&p, &decide(&p, &[targeted(mpa("web", |_| {}), "app=web")]).unwrap());
        assert_eq!(
            resources(&doc, 0),
            &json!({"requests": {"cpu": "500m", "memory": "256Mi"}, "limits": {"memory": "256Mi"}})
        );
    }

    #[test]
    fn a_bad_quantity_is_an_error_naming_the_object() {
        let p = pod(|_| {});
        let bad = mpa("web", |v| {
            v["status"]["recommendation"]["containerRecommendations"][0]["target"]["cpu"] = json!("lots")
        });
        let e = mutate_pod(&p, &[targeted(bad, "app=web")], &WebhookConfig::default()).unwrap_err().to_string();
        assert!(e.contains("default/web") && e.contains("lots"), "{e}");
        let bad_pod = pod(|v| v["spec"]["containers"][0]["resources"]["requests"]["cpu"] = json!("-1"));
        let e =
            mutate_pod(&bad_pod, &[targeted(mpa("web", |_| {}), "app=web")], &WebhookConfig::default()).unwrap_err();
        assert!(e.to_string().starts_with("pod default/web-*:"), "{e}");
    }

    #[test]
    fn selectors_parse_as_apimachinery_prints_them() {
        let s = parse_selector("app=web, tier in (a, b),!canary,env!=prod,track,release==1").unwrap();
        let labels = |pairs: &[(&str, &str)]| -> BTreeMap<String, String> {
            pairs.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect()
        };
        assert!(s.matches(&labels(&[("app", "web"), ("tier", "b"), ("track", "x"), ("release", "1")])));
        assert!(!s.matches(&labels(&[("app", "web"), ("tier", "c"), ("track", "x"), ("release", "1")])));
        assert!(!s.matches(&labels(&[
            ("app", "web"),
            ("tier", "a"),
            ("track", "x"),
            ("release", "1"),
            ("canary", "")
        ])));
        assert!(!s.matches(&labels(&[
            ("app", "web"),
            ("tier", "a"),
            ("track", "x"),
            ("release", "1"),
            ("env", "prod")
        ])));
        assert!(!s.matches(&labels(&[("app", "web"), ("tier", "a"), ("release", "1")])));
        let notin = parse_selector("tier notin (db)").unwrap();
        assert!(notin.matches(&labels(&[("tier", "web")])) && !notin.matches(&labels(&[("tier", "db")])));
        for bad in ["", "app=web,", "tier in (a", "tier in a)", "tier between (a)", "a b=c"] {
            assert!(parse_selector(bad).is_err(), "{bad:?} parsed");
        }
    }

    fn review(operation: &str, object: Value) -> Vec<u8> {
        serde_json::to_vec(&json!({
            "apiVersion": "admission.k8s.io/v1",
            "kind": "AdmissionReview",
            "request": {
                "uid": "705ab4f5-6393-11e8-b7cc-42010a800002",
                "kind": {"group": "", "version": "v1", "kind": "Pod"},
                "resource": {"group": "", "version": "v1", "resource": "pods"},
                "namespace": "default",
                "operation": operation,
                "userInfo": {"username": "system:serviceaccount:kube-system:replicaset-controller"},
                "object": object,
                "dryRun": false,
            },
        }))
        .unwrap()
    }

    fn state() -> WebhookState<StaticMpaSource> {
        WebhookState {
            source: StaticMpaSource(vec![targeted(mpa("web", |_| {}), "app=web")]),
            config: WebhookConfig::default(),
        }
    }

    fn response(reply: &Reply) -> Value {
        assert_eq!(reply.status, StatusCode::OK, "{}", reply.body);
        let v: Value = serde_json::from_str(&reply.body).unwrap();
        assert_eq!(v["apiVersion"], "admission.k8s.io/v1");
        assert_eq!(v["kind"], "AdmissionReview");
        assert_eq!(v["response"]["uid"], "705ab4f5-6393-11e8-b7cc-42010a800002");
        assert_eq!(v["response"]["allowed"], true);
        v["response"].clone()
    }

    #[tokio::test]
    async fn a_review_is_answered_with_the_patch() {
        let r = response(&admit(&review("CREATE", pod_json()), &state()).await);
        assert_eq!(r["patchType"], "JSONPatch");
        let bytes: Vec<u8> = serde_json::from_value(r["patch"].clone()).unwrap();
        let patch: json_patch::Patch = serde_json::from_slice(&bytes).unwrap();
        let mut doc = pod_json();
        json_patch::patch(&mut doc, &patch).unwrap();
        assert_eq!(doc["spec"]["containers"][0]["resources"]["requests"]["memory"], "256Mi");
    }

    #[tokio::test]
    async fn only_pod_creation_is_patched() {
        let r = response(&admit(&review("UPDATE", pod_json()), &state()).await);
        assert!(r.get("patch").is_none(), "{r}");
        let mut other_ns = pod_json();
        other_ns["metadata"]["namespace"] = json!("other");
        let body = String::from_utf8(review("CREATE", other_ns)).unwrap().replace("\"default\"", "\"other\"");
        let r = response(&admit(body.as_bytes(), &state()).await);
        assert!(r.get("patch").is_none(), "{r}");
    }

    #[tokio::test]
    async fn an_undecodable_pod_is_allowed_with_a_warning() {
        let mut p = pod_json();
        p["spec"]["containers"] = json!("not a list");
        let r = response(&admit(&review("CREATE", p), &state()).await);
        assert!(r.get("patch").is_none(), "{r}");
        let warning = r["warnings"][0].as_str().unwrap();
        assert!(warning.contains("not a Pod") && warning.contains("admitted unchanged"), "{warning}");
        // A bad quantity in the pod: the same.
        let mut p = pod_json();
        p["spec"]["containers"][0]["resources"]["requests"]["cpu"] = json!("1Xi");
        let r = response(&admit(&review("CREATE", p), &state()).await);
        assert!(r.get("patch").is_none() && r["warnings"][0].as_str().unwrap().contains("1Xi"), "{r}");
    }

    #[tokio::test]
    async fn a_malformed_review_is_a_400_with_a_one_line_reason() {
        for (body, says) in [
            (&b"{not json"[..], "malformed AdmissionReview"),
            (
                br#"{"apiVersion":"admission.k8s.io/v1beta1","kind":"AdmissionReview","request":null}"#,
                "admission.k8s.io/v1",
            ),
            (br#"{"apiVersion":"admission.k8s.io/v1","kind":"AdmissionReview"}"#, "no request"),
            (br#"{"apiVersion":"admission.k8s.io/v1","kind":"AdmissionReview","request":{"uid":1}}"#, "malformed"),
        ] {
            let reply = admit(body, &state()).await;
            assert_eq!(reply.status, StatusCode::BAD_REQUEST, "{}", reply.body);
            assert!(reply.body.contains(says), "{}", reply.body);
            assert_eq!(reply.body.trim_end().lines().count(), 1, "{}", reply.body);
        }
    }

    fn tls_file(name: &str) -> PathBuf {
        PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/tls").join(name)
    }

    #[test]
    fn pem_errors_name_the_flag_and_the_file() {
        let missing = tls_config(&tls_file("absent.crt"), &tls_file("server.key")).unwrap_err().to_string();
        assert!(missing.starts_with("--webhook-cert ") && missing.contains("absent.crt"), "{missing}");
        let not_a_key = tls_config(&tls_file("server.crt"), &tls_file("server.crt")).unwrap_err().to_string();
        assert!(not_a_key.starts_with("--webhook-key ") && not_a_key.contains("server.crt"), "{not_a_key}");
        let not_a_cert = tls_config(&tls_file("server.key"), &tls_file("server.key")).unwrap_err().to_string();
        assert!(not_a_cert.starts_with("--webhook-cert "), "{not_a_cert}");
        let mismatch = tls_config(&tls_file("server.crt"), &tls_file("other.key")).unwrap_err().to_string();
        assert!(mismatch.starts_with("--webhook-key ") && mismatch.contains("does not go with"), "{mismatch}");
        assert!(tls_config(&tls_file("server.crt"), &tls_file("server.key")).is_ok());
    }

    #[test]
    fn a_renewed_certificate_is_picked_up_and_a_broken_one_ignored() {
        let dir = tempfile::tempdir().unwrap();
        let (cert, key) = (dir.path().join("tls.crt"), dir.path().join("tls.key"));
        let install = |name: &str, stamp: u64| {
            std::fs::copy(tls_file(&format!("{name}.crt")), &cert).unwrap();
            std::fs::copy(tls_file(&format!("{name}.key")), &key).unwrap();
            let when = SystemTime::UNIX_EPOCH + Duration::from_secs(stamp);
            for p in [&cert, &key] {
                std::fs::File::options().write(true).open(p).unwrap().set_modified(when).unwrap();
            }
        };
        install("server", 1_000);
        let resolver = ReloadingCert::new(&cert, &key, Duration::ZERO).unwrap();
        let first = resolver.current().cert[0].clone();
        assert_eq!(resolver.current().cert[0], first, "unchanged files: same certificate");
        install("other", 2_000);
        let second = resolver.current().cert[0].clone();
        assert_ne!(second, first, "the renewed certificate is served");
        std::fs::write(&key, "not a key").unwrap();
        assert_eq!(resolver.current().cert[0], second, "a broken renewal keeps the old certificate");
    }

    proptest! {
        #[test]
        fn the_patched_pod_is_valid_and_has_the_recommended_requests(
            rec_cpu in 1u64..200_000,
            rec_mem in 1u64..(1u64 << 40),
            old_cpu in 1u64..200_000,
            old_mem in 1u64..(1u64 << 40),
            cpu_ratio in 1u64..8,
            mem_ratio in 1u64..8,
            with_limits in any::<bool>(),
        ) {
            let (cpu, mem) = (quantity::cpu_quantity(rec_cpu), quantity::memory_quantity(rec_mem));
            let m = mpa("web", |v| {
                v["status"]["recommendation"]["containerRecommendations"][0]["target"] = json!({"cpu": cpu.0, "memory": mem.0});
            });
            let p = pod(|v| {
                let r = &mut v["spec"]["containers"][0]["resources"];
                r["requests"] = json!({"cpu": quantity::cpu_quantity(old_cpu).0, "memory": quantity::memory_quantity(old_mem).0});
                if with_limits {
                    r["limits"] = json!({
                        "cpu": quantity::cpu_quantity(old_cpu * cpu_ratio).0,
                        "memory": quantity::memory_quantity(old_mem * mem_ratio).0,
                    });
                } else {
                    r.as_object_mut().unwrap().remove("limits");
                }
            });
            let mutation = decide(&p, &[targeted(m, "app=web")]).expect("a patch");
            let patched: Pod = serde_json::from_value(apply(&p, &mutation)).expect("a valid pod");
            let c = &patched.spec.unwrap().containers[0];
            let got = observe::pod_resources(std::slice::from_ref(c)).expect("valid quantities");
            prop_assert_eq!(got.requests.cpu_millicores, rec_cpu);
            prop_assert_eq!(got.requests.memory_bytes, rec_mem);
            let limits = c.resources.as_ref().and_then(|r| r.limits.as_ref());
            prop_assert_eq!(limits.is_some(), with_limits);
            if with_limits {
                // The ratio is kept up to the rounding of one unit.
                prop_assert!(got.limits.cpu_millicores.abs_diff(rec_cpu * cpu_ratio) <= 1);
                prop_assert!(got.limits.memory_bytes.abs_diff(rec_mem * mem_ratio) <= 1);
            }
        }
    }
}
