//! The recommender controller and updater against kube's mocked API service (a tower-test pair,
//! as kube's own `mock_tests.rs`): each test scripts the exact API calls a pass must make, in
//! order, with the server's answers, and fails on any call it did not script.

mod common;

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use aware_core::{ContainerResources, Observation, Profile, Recommendation, RecommenderError, Resources};
use aware_kube::{Context, Decider, MpaDefaultDecider, MultidimPodAutoscaler};
use aware_kube::{ControllerConfig, ControllerError, backoff, error_policy, reconcile_once};
use http::{Method, Request, Response, StatusCode};
use kube::Client;
use kube::client::Body;
use kube::runtime::controller::Action;
use serde_json::{Value, json};

/// What the mocked API server answers to one expected call.
struct Step {
    method: Method,
    /// The request path (without the query string) must equal this.
    path: &'static str,
    status: StatusCode,
    /// `None`: echo the request body back (what PUT/PATCH on a subresource returns).
    body: Option<Value>,
}

fn step(method: Method, path: &'static str, status: StatusCode, body: Option<Value>) -> Step {
    Step { method, path, status, body }
}

/// One recorded call: path and query, body.
#[derive(Debug, Clone)]
struct Call {
    uri: String,
    body: Value,
}

type Handle = tower_test::mock::Handle<Request<Body>, Response<Body>>;

/// Serves the script, then checks nothing else is asked once every client is dropped.
fn serve(mut handle: Handle, script: Vec<Step>) -> tokio::task::JoinHandle<Vec<Call>> {
    tokio::spawn(async move {
        let mut calls = Vec::new();
        for (i, s) in script.into_iter().enumerate() {
            let (request, send) = handle.next_request().await.unwrap_or_else(|| {
                panic!("call {i}: expected {} {} but the client made no more calls", s.method, s.path)
            });
            let uri = request.uri().to_string();
            let method = request.method().clone();
            let bytes = request.into_body().collect_bytes().await.unwrap();
            let body: Value = if bytes.is_empty() { Value::Null } else { serde_json::from_slice(&bytes).unwrap() };
            assert_eq!((&method, request_path(&uri)), (&s.method, s.path), "call {i}: {method} {uri}");
            let answer = s.body.unwrap_or_else(|| body.clone());
            calls.push(Call { uri, body });
            let response = Response::builder()
                .status(s.status)
                .header("content-type", "application/json")
                .body(Body::from(serde_json::to_vec(&answer).unwrap()))
                .unwrap();
            send.send_response(response);
        }
        if let Some((request, _)) = handle.next_request().await {
            panic!("unscripted call: {} {}", request.method(), request.uri());
        }
        calls
    })
}

fn request_path(uri: &str) -> &str {
    uri.split('?').next().unwrap()
}

/// A decider that always proposes the same shape and counts how often it was asked.
struct FixedDecider {
    recommendation: Recommendation,
    calls: Arc<AtomicUsize>,
}

impl Decider for FixedDecider {
    fn name(&self) -> &str {
        "fixed"
    }

    fn decide(&self, _key: &str, _profile: &Profile, obs: &Observation) -> Result<Recommendation, RecommenderError> {
        obs.validate()?;
        self.calls.fetch_add(1, Ordering::SeqCst);
        Ok(self.recommendation.clone())
    }
}

fn shape(replicas: u32, cpu_millicores: u64, memory_mib: u64) -> Recommendation {
    let r = Resources::new(cpu_millicores, memory_mib << 20);
    Recommendation { replicas, containers: vec![ContainerResources::guaranteed("web", r)] }
}

fn mpa(recommenders: Value, mode: &str) -> MultidimPodAutoscaler {
    let mut spec = json!({
        "scaleTargetRef": {"apiVersion": "apps/v1", "kind": "Deployment", "name": "web"},
        "policy": {"updateMode": mode},
        "constraints": {"global": {"minReplicas": 1, "maxReplicas": 10}},
    });
    if !recommenders.is_null() {
        spec["recommenders"] = recommenders;
    }
    serde_json::from_value(json!({
        "apiVersion": "autoscaling.k8s.io/v1alpha1",
        "kind": "MultidimPodAutoscaler",
        "metadata": {"name": "web", "namespace": "default", "resourceVersion": "1", "uid": "u-1"},
        "spec": spec,
    }))
    .unwrap()
}

fn owned(mode: &str) -> MultidimPodAutoscaler {
    mpa(json!([{"name": "aware"}]), mode)
}

fn scale(replicas: i32) -> Value {
    json!({
        "apiVersion": "autoscaling/v1", "kind": "Scale",
        "metadata": {"name": "web", "namespace": "default"},
        "spec": {"replicas": replicas},
        "status": {"replicas": replicas, "selector": "app=web"},
    })
}

fn pod(name: &str, ready: bool) -> Value {
    json!({
        "metadata": {"name": name, "namespace": "default", "labels": {"app": "web"},
                     "creationTimestamp": "2026-01-01T00:00:00Z"},
        "spec": {"nodeName": "node-1", "containers": [{"name": "web", "image": "web",
            "resources": {"requests": {"cpu": "100m", "memory": "128Mi"}, "limits": {"cpu": "200m", "memory": "256Mi"}}}]},
        "status": {"phase": "Running", "conditions": [
            {"type": "Ready", "status": if ready { "True" } else { "False" }, "lastTransitionTime": "2026-01-01T00:01:00Z"}]},
    })
}

fn pods(n: usize) -> Value {
    let items: Vec<Value> = (1..=n).map(|i| pod(&format!("web-{i}"), true)).collect();
    json!({"apiVersion": "v1", "kind": "PodList", "metadata": {"resourceVersion": "7"}, "items": items})
}

fn pod_metrics(n: usize) -> Value {
    let items: Vec<Value> = (1..=n)
        .map(|i| json!({"metadata": {"name": format!("web-{i}")}, "containers": [{"name": "web", "usage": {"cpu": "90m", "memory": "100Mi"}}]}))
        .collect();
    json!({"apiVersion": "metrics.k8s.io/v1beta1", "kind": "PodMetricsList", "items": items})
}

fn pdbs(disruptions_allowed: i32) -> Value {
    json!({"apiVersion": "policy/v1", "kind": "PodDisruptionBudgetList", "metadata": {}, "items": [{
        "metadata": {"name": "web-pdb", "namespace": "default"},
        "spec": {"selector": {"matchLabels": {"app": "web"}}, "minAvailable": 2},
        "status": {"currentHealthy": 3, "desiredHealthy": 2, "disruptionsAllowed": disruptions_allowed, "expectedPods": 3},
    }]})
}

fn api_status(code: u16, reason: &str) -> Value {
    json!({"apiVersion": "v1", "kind": "Status", "status": "Failure", "message": format!("{reason} (test)"), "reason": reason, "code": code})
}

const SCALE: &str = "/apis/apps/v1/namespaces/default/deployments/web/scale";
const PODS: &str = "/api/v1/namespaces/default/pods";
const METRICS: &str = "/apis/metrics.k8s.io/v1beta1/namespaces/default/pods";
const PDBS: &str = "/apis/policy/v1/namespaces/default/poddisruptionbudgets";
const STATUS: &str = "/apis/autoscaling.k8s.io/v1alpha1/namespaces/default/multidimpodautoscalers/web/status";
/// The MPA's target itself: AWARE's decider reads its pod template once.
const DEPLOYMENT: &str = "/apis/apps/v1/namespaces/default/deployments/web";

/// The Deployment `web` whose pod template declares `cpu_request` / `cpu_limit` (and the pods'
/// memory).
fn deployment(cpu_request: &str, cpu_limit: &str) -> Value {
    json!({
        "apiVersion": "apps/v1", "kind": "Deployment",
        "metadata": {"name": "web", "namespace": "default"},
        "spec": {"replicas": 2, "selector": {"matchLabels": {"app": "web"}}, "template": {
            "metadata": {"labels": {"app": "web"}},
            "spec": {"containers": [{"name": "web", "image": "web", "resources": {
                "requests": {"cpu": cpu_request, "memory": "128Mi"}, "limits": {"cpu": cpu_limit, "memory": "256Mi"}}}]}}},
    })
}

/// One pass's observation of `web` at 2 replicas: its scale subresource, pods and their usage.
fn observed() -> [Step; 3] {
    [
        step(Method::GET, SCALE, StatusCode::OK, Some(scale(2))),
        step(Method::GET, PODS, StatusCode::OK, Some(pods(2))),
        step(Method::GET, METRICS, StatusCode::OK, Some(pod_metrics(2))),
    ]
}

fn context<D: Decider>(config: ControllerConfig, decider: D) -> (Context<D>, Handle) {
    let (service, handle) = tower_test::mock::pair::<Request<Body>, Response<Body>>();
    (Context::new(Client::new(service, "default"), config, decider), handle)
}

/// AWARE's decider with a fresh agent, the apps' stages `checkpointed` (from `source`).
fn lifecycle_decider(
    checkpointed: Vec<(String, aware_lifecycle::algorithm::LifecycleState)>,
    source: &str,
) -> aware_kube::LifecycleDecider {
    aware_kube::LifecycleDecider::new(
        aware_lifecycle::manager::fresh_agent(1),
        aware_lifecycle::manager::ManagerConfig::default(),
        checkpointed,
        source,
    )
    .unwrap()
}

fn fixed(rec: Recommendation) -> (FixedDecider, Arc<AtomicUsize>) {
    let calls = Arc::new(AtomicUsize::new(0));
    (FixedDecider { recommendation: rec, calls: calls.clone() }, calls)
}

fn recommend_only() -> ControllerConfig {
    ControllerConfig { update: false, ..Default::default() }
}

#[tokio::test]
async fn status_is_written_only_for_owned_mpas() {
    let (decider, calls) = fixed(shape(3, 200, 256));
    let (ctx, handle) = context(recommend_only(), decider);
    let server = serve(handle, vec![]);
    for other in [mpa(json!([{"name": "upstream-recommender"}]), "Auto"), mpa(Value::Null, "Auto")] {
        let outcome = reconcile_once(&other, &ctx).await.unwrap();
        assert!(!outcome.owned && !outcome.status_written, "{outcome:?}");
    }
    drop(ctx);
    assert!(server.await.unwrap().is_empty(), "no API call for MPAs of another recommender");
    assert_eq!(calls.load(Ordering::SeqCst), 0);

    // The same object named `aware` is served: scale, pods, usage, then status.
    let (decider, _) = fixed(shape(3, 200, 256));
    let (ctx, handle) = context(recommend_only(), decider);
    let server = serve(
        handle,
        vec![
            step(Method::GET, SCALE, StatusCode::OK, Some(scale(2))),
            step(Method::GET, PODS, StatusCode::OK, Some(pods(2))),
            step(Method::GET, METRICS, StatusCode::OK, Some(pod_metrics(2))),
            step(Method::PUT, STATUS, StatusCode::OK, None),
        ],
    );
    let outcome = reconcile_once(&owned("Auto"), &ctx).await.unwrap();
    assert!(outcome.owned && outcome.status_written && outcome.scaled_to.is_none());
    drop(ctx);
    let calls = server.await.unwrap();
    assert!(calls[1].uri.contains("labelSelector=app%3Dweb"), "{}", calls[1].uri);
    let written = &calls[3].body;
    assert_eq!(written["metadata"]["resourceVersion"], "1");
    assert_eq!(written["status"]["desiredReplicas"], 3);
    assert_eq!(written["status"]["currentReplicas"], 2);
    let target = &written["status"]["recommendation"]["containerRecommendations"][0];
    assert_eq!(target["containerName"], "web");
    assert_eq!(target["target"], json!({"cpu": "200m", "memory": "256Mi"}));
    let provided = written["status"]["conditions"]
        .as_array()
        .unwrap()
        .iter()
        .find(|c| c["type"] == "RecommendationProvided")
        .unwrap();
    assert_eq!(provided["status"], "True");

    // Claiming upstream's default recommender serves MPAs with an empty list.
    let (decider, _) = fixed(shape(3, 200, 256));
    let config = ControllerConfig { claim_default: true, ..recommend_only() };
    let (ctx, _handle) = context(config, decider);
    assert!(ctx.owns(&mpa(Value::Null, "Auto")));
    assert!(!ctx.owns(&mpa(json!([{"name": "upstream-recommender"}]), "Auto")));
}

#[tokio::test]
async fn updater_patches_scale_and_resizes_in_place() {
    let (decider, _) = fixed(shape(4, 300, 256));
    let (ctx, handle) = context(ControllerConfig::default(), decider);
    let resize_1 = "/api/v1/namespaces/default/pods/web-1/resize";
    let resize_2 = "/api/v1/namespaces/default/pods/web-2/resize";
    let server = serve(
        handle,
        vec![
            step(Method::GET, SCALE, StatusCode::OK, Some(scale(2))),
            step(Method::GET, PODS, StatusCode::OK, Some(pods(2))),
            step(Method::GET, METRICS, StatusCode::OK, Some(pod_metrics(2))),
            step(Method::PATCH, SCALE, StatusCode::OK, Some(scale(4))),
            step(Method::PATCH, resize_1, StatusCode::OK, Some(pod("web-1", true))),
            step(Method::PATCH, resize_2, StatusCode::OK, Some(pod("web-2", true))),
            step(Method::PUT, STATUS, StatusCode::OK, None),
        ],
    );
    let outcome = reconcile_once(&owned("InPlaceOrRecreate"), &ctx).await.unwrap();
    assert_eq!(outcome.scaled_to, Some(4));
    assert_eq!(outcome.resized, vec!["web-1".to_string(), "web-2".to_string()]);
    assert!(outcome.evicted.is_empty());
    drop(ctx);
    let calls = server.await.unwrap();
    assert_eq!(calls[3].body, json!({"spec": {"replicas": 4}}));
    // The resize keeps the limit/request ratio (2×): 300m → 600m, 256Mi → 512Mi.
    let container = &calls[4].body["spec"]["containers"][0];
    assert_eq!(container["name"], "web");
    assert_eq!(container["resources"]["requests"], json!({"cpu": "300m", "memory": "256Mi"}));
    assert_eq!(container["resources"]["limits"], json!({"cpu": "600m", "memory": "512Mi"}));
    let status = &calls[6].body["status"];
    assert_eq!(status["desiredReplicas"], 4);
    assert!(status["lastScaleTime"].is_string(), "{status}");
}

/// One in-place pass for an MPA edited by `edit`, replicas unchanged: the resize patch's
/// `resources` for web-1.
async fn resize_of(edit: impl FnOnce(&mut Value)) -> Value {
    let (decider, _) = fixed(shape(2, 300, 256));
    let (ctx, handle) = context(ControllerConfig::default(), decider);
    let mut object = serde_json::to_value(owned("InPlaceOrRecreate")).unwrap();
    edit(&mut object);
    let mpa: MultidimPodAutoscaler = serde_json::from_value(object).unwrap();
    let server = serve(
        handle,
        vec![
            step(Method::GET, SCALE, StatusCode::OK, Some(scale(2))),
            step(Method::GET, PODS, StatusCode::OK, Some(pods(1))),
            step(Method::GET, METRICS, StatusCode::OK, Some(pod_metrics(1))),
            step(
                Method::PATCH,
                "/api/v1/namespaces/default/pods/web-1/resize",
                StatusCode::OK,
                Some(pod("web-1", true)),
            ),
            step(Method::PUT, STATUS, StatusCode::OK, None),
        ],
    );
    reconcile_once(&mpa, &ctx).await.unwrap();
    drop(ctx);
    server.await.unwrap()[3].body["spec"]["containers"][0]["resources"].clone()
}

#[tokio::test]
async fn requests_only_resizes_leave_the_limits_alone() {
    let resources = resize_of(|mpa| {
        mpa["spec"]["resourcePolicy"] =
            json!({"containerPolicies": [{"containerName": "*", "controlledValues": "RequestsOnly"}]});
    })
    .await;
    assert_eq!(resources, json!({"requests": {"cpu": "200m", "memory": "256Mi"}}), "requests capped at the limits");
}

/// A container without limits keeps none (the updater must not change its QoS class).
#[tokio::test]
async fn a_container_without_limits_is_given_none() {
    let (decider, _) = fixed(shape(2, 300, 256));
    let (ctx, handle) = context(ControllerConfig::default(), decider);
    let mut limitless = pods(1);
    limitless["items"][0]["spec"]["containers"][0]["resources"] =
        json!({"requests": {"cpu": "100m", "memory": "128Mi"}});
    let server = serve(
        handle,
        vec![
            step(Method::GET, SCALE, StatusCode::OK, Some(scale(2))),
            step(Method::GET, PODS, StatusCode::OK, Some(limitless)),
            step(Method::GET, METRICS, StatusCode::OK, Some(pod_metrics(1))),
            step(
                Method::PATCH,
                "/api/v1/namespaces/default/pods/web-1/resize",
                StatusCode::OK,
                Some(pod("web-1", true)),
            ),
            step(Method::PUT, STATUS, StatusCode::OK, None),
        ],
    );
    reconcile_once(&owned("InPlaceOrRecreate"), &ctx).await.unwrap();
    drop(ctx);
    let resources = server.await.unwrap()[3].body["spec"]["containers"][0]["resources"].clone();
    assert_eq!(resources, json!({"requests": {"cpu": "300m", "memory": "256Mi"}}));
}

#[tokio::test]
async fn only_the_controlled_resources_are_resized() {
    let resources =
        resize_of(|mpa| mpa["spec"]["constraints"]["containerControlledResources"] = json!(["memory"])).await;
    assert_eq!(resources, json!({"requests": {"memory": "256Mi"}, "limits": {"memory": "512Mi"}}));
}

#[tokio::test]
async fn containers_with_vertical_mode_off_are_not_resized() {
    let (decider, _) = fixed(shape(4, 300, 256));
    let (ctx, handle) = context(ControllerConfig::default(), decider);
    let mut object = owned("InPlaceOrRecreate");
    object.spec.resource_policy =
        Some(serde_json::from_value(json!({"containerPolicies": [{"containerName": "web", "mode": "Off"}]})).unwrap());
    let server = serve(
        handle,
        vec![
            step(Method::GET, SCALE, StatusCode::OK, Some(scale(2))),
            step(Method::GET, PODS, StatusCode::OK, Some(pods(2))),
            step(Method::GET, METRICS, StatusCode::OK, Some(pod_metrics(2))),
            step(Method::PATCH, SCALE, StatusCode::OK, Some(scale(4))),
            step(Method::PUT, STATUS, StatusCode::OK, None),
        ],
    );
    let outcome = reconcile_once(&object, &ctx).await.unwrap();
    assert_eq!(outcome.scaled_to, Some(4));
    assert!(outcome.resized.is_empty());
    drop(ctx);
    server.await.unwrap();
}

#[tokio::test]
async fn recommendation_is_clamped_to_constraints() {
    let (decider, _) = fixed(shape(50, 300, 256));
    let (ctx, handle) = context(recommend_only(), decider);
    let server = serve(
        handle,
        vec![
            step(Method::GET, SCALE, StatusCode::OK, Some(scale(2))),
            step(Method::GET, PODS, StatusCode::OK, Some(pods(2))),
            step(Method::GET, METRICS, StatusCode::OK, Some(pod_metrics(2))),
            step(Method::PUT, STATUS, StatusCode::OK, None),
        ],
    );
    reconcile_once(&owned("Off"), &ctx).await.unwrap();
    drop(ctx);
    let calls = server.await.unwrap();
    let status = &calls[3].body["status"];
    assert_eq!(status["desiredReplicas"], 10, "maxReplicas caps");
    let limited = status["conditions"].as_array().unwrap().iter().find(|c| c["type"] == "ScalingLimited").unwrap();
    assert_eq!(limited["status"], "True");
}

fn evicting() -> ControllerConfig {
    ControllerConfig { evict: true, ..Default::default() }
}

#[tokio::test]
async fn eviction_is_blocked_by_a_pod_disruption_budget() {
    let (decider, _) = fixed(shape(3, 300, 256));
    let (ctx, handle) = context(evicting(), decider);
    let server = serve(
        handle,
        vec![
            step(Method::GET, SCALE, StatusCode::OK, Some(scale(3))),
            step(Method::GET, PODS, StatusCode::OK, Some(pods(3))),
            step(Method::GET, METRICS, StatusCode::OK, Some(pod_metrics(3))),
            step(Method::GET, PDBS, StatusCode::OK, Some(pdbs(0))),
            step(Method::PUT, STATUS, StatusCode::OK, None),
        ],
    );
    let outcome = reconcile_once(&owned("Recreate"), &ctx).await.unwrap();
    assert!(outcome.evicted.is_empty());
    assert!(outcome.eviction_blocked.as_deref().unwrap().contains("web-pdb"), "{outcome:?}");
    drop(ctx);
    let calls = server.await.unwrap();
    let able = calls[4].body["status"]["conditions"]
        .as_array()
        .unwrap()
        .iter()
        .find(|c| c["type"] == "AbleToScale")
        .unwrap()
        .clone();
    assert_eq!(able["status"], "False");
    assert!(able["message"].as_str().unwrap().contains("web-pdb"));
}

#[tokio::test]
async fn eviction_refused_by_the_api_server_is_not_an_error() {
    let (decider, _) = fixed(shape(3, 300, 256));
    let (ctx, handle) = context(evicting(), decider);
    let server = serve(
        handle,
        vec![
            step(Method::GET, SCALE, StatusCode::OK, Some(scale(3))),
            step(Method::GET, PODS, StatusCode::OK, Some(pods(3))),
            step(Method::GET, METRICS, StatusCode::OK, Some(pod_metrics(3))),
            step(Method::GET, PDBS, StatusCode::OK, Some(pdbs(1))),
            step(
                Method::POST,
                "/api/v1/namespaces/default/pods/web-1/eviction",
                StatusCode::TOO_MANY_REQUESTS,
                Some(api_status(429, "TooManyRequests")),
            ),
            step(Method::PUT, STATUS, StatusCode::OK, None),
        ],
    );
    let outcome = reconcile_once(&owned("Recreate"), &ctx).await.unwrap();
    assert!(outcome.evicted.is_empty());
    assert!(outcome.eviction_blocked.as_deref().unwrap().contains("refused"), "{outcome:?}");
    drop(ctx);
    server.await.unwrap();
}

#[tokio::test]
async fn one_pod_is_evicted_when_the_budget_allows() {
    let (decider, _) = fixed(shape(3, 300, 256));
    let (ctx, handle) = context(evicting(), decider);
    let server = serve(
        handle,
        vec![
            step(Method::GET, SCALE, StatusCode::OK, Some(scale(3))),
            step(Method::GET, PODS, StatusCode::OK, Some(pods(3))),
            step(Method::GET, METRICS, StatusCode::OK, Some(pod_metrics(3))),
            step(Method::GET, PDBS, StatusCode::OK, Some(pdbs(1))),
            step(
                Method::POST,
                "/api/v1/namespaces/default/pods/web-1/eviction",
                StatusCode::CREATED,
                Some(json!({"apiVersion": "v1", "kind": "Status", "status": "Success", "code": 201})),
            ),
            step(Method::PUT, STATUS, StatusCode::OK, None),
        ],
    );
    let outcome = reconcile_once(&owned("Auto"), &ctx).await.unwrap();
    assert_eq!(outcome.evicted, vec!["web-1".to_string()]);
    drop(ctx);
    let calls = server.await.unwrap();
    // kube's EvictParams send an Eviction body without `kind`; the subresource path names it.
    assert!(calls[4].uri.starts_with("/api/v1/namespaces/default/pods/web-1/eviction"), "{}", calls[4].uri);
}

#[tokio::test]
async fn eviction_never_drops_below_the_live_pod_minimum() {
    let (decider, _) = fixed(shape(2, 300, 256));
    let (ctx, handle) = context(evicting(), decider);
    // minReplicas 2 with 2 ready pods: evicting one would leave 1. No PDB call, no eviction.
    let mut object = owned("Recreate");
    object.spec.constraints.as_mut().unwrap().global.as_mut().unwrap().min_replicas = Some(2);
    let server = serve(
        handle,
        vec![
            step(Method::GET, SCALE, StatusCode::OK, Some(scale(2))),
            step(Method::GET, PODS, StatusCode::OK, Some(pods(2))),
            step(Method::GET, METRICS, StatusCode::OK, Some(pod_metrics(2))),
            step(Method::PUT, STATUS, StatusCode::OK, None),
        ],
    );
    let outcome = reconcile_once(&object, &ctx).await.unwrap();
    assert!(outcome.evicted.is_empty());
    assert!(outcome.eviction_blocked.as_deref().unwrap().contains("live-pod minimum"), "{outcome:?}");
    drop(ctx);
    server.await.unwrap();
}

#[tokio::test]
async fn a_conflict_is_retried_against_the_fresh_object() {
    let (decider, calls_to_decider) = fixed(shape(3, 200, 256));
    let (ctx, handle) = context(recommend_only(), decider);
    let mut fresh = serde_json::to_value(owned("Auto")).unwrap();
    fresh["metadata"]["resourceVersion"] = json!("2");
    let server = serve(
        handle,
        vec![
            step(Method::GET, SCALE, StatusCode::OK, Some(scale(2))),
            step(Method::GET, PODS, StatusCode::OK, Some(pods(2))),
            step(Method::GET, METRICS, StatusCode::OK, Some(pod_metrics(2))),
            step(Method::PUT, STATUS, StatusCode::CONFLICT, Some(api_status(409, "Conflict"))),
            step(Method::GET, STATUS, StatusCode::OK, Some(fresh)),
            step(Method::PUT, STATUS, StatusCode::OK, None),
        ],
    );
    let outcome = reconcile_once(&owned("Auto"), &ctx).await.unwrap();
    assert_eq!(outcome.conflicts_retried, 1);
    assert!(outcome.status_written);
    drop(ctx);
    let calls = server.await.unwrap();
    assert_eq!(calls[3].body["metadata"]["resourceVersion"], "1");
    assert_eq!(calls[5].body["metadata"]["resourceVersion"], "2", "the retry carries the fresh resourceVersion");
    assert_eq!(calls[5].body["status"], calls[3].body["status"]);
    assert_eq!(calls_to_decider.load(Ordering::SeqCst), 1);
}

#[tokio::test]
async fn conflicts_give_up_after_the_configured_attempts() {
    let (decider, _) = fixed(shape(3, 200, 256));
    let config = ControllerConfig { max_conflict_retries: 1, ..recommend_only() };
    let (ctx, handle) = context(config, decider);
    let server = serve(
        handle,
        vec![
            step(Method::GET, SCALE, StatusCode::OK, Some(scale(2))),
            step(Method::GET, PODS, StatusCode::OK, Some(pods(2))),
            step(Method::GET, METRICS, StatusCode::OK, Some(pod_metrics(2))),
            step(Method::PUT, STATUS, StatusCode::CONFLICT, Some(api_status(409, "Conflict"))),
            step(Method::GET, STATUS, StatusCode::OK, Some(serde_json::to_value(owned("Auto")).unwrap())),
            step(Method::PUT, STATUS, StatusCode::CONFLICT, Some(api_status(409, "Conflict"))),
        ],
    );
    let err = reconcile_once(&owned("Auto"), &ctx).await.unwrap_err();
    assert!(matches!(err, ControllerError::Conflict { attempts: 2, .. }), "{err}");
    drop(ctx);
    server.await.unwrap();
}

#[tokio::test]
async fn a_server_error_is_backed_off_and_nothing_is_lost() {
    let (decider, calls_to_decider) = fixed(shape(3, 200, 256));
    let (ctx, handle) = context(recommend_only(), decider);
    let ctx = Arc::new(ctx);
    let server = serve(
        handle,
        vec![
            step(Method::GET, SCALE, StatusCode::OK, Some(scale(2))),
            step(Method::GET, PODS, StatusCode::OK, Some(pods(2))),
            step(Method::GET, METRICS, StatusCode::OK, Some(pod_metrics(2))),
            step(Method::PUT, STATUS, StatusCode::INTERNAL_SERVER_ERROR, Some(api_status(500, "InternalError"))),
            // The retry: the computed recommendation is reused (no usage read, no second decision).
            step(Method::GET, SCALE, StatusCode::OK, Some(scale(2))),
            step(Method::GET, PODS, StatusCode::OK, Some(pods(2))),
            step(Method::PUT, STATUS, StatusCode::OK, None),
        ],
    );
    let object = Arc::new(owned("Auto"));
    let err = reconcile_once(&object, &ctx).await.unwrap_err();
    assert!(matches!(&err, ControllerError::Kube(kube::Error::Api(s)) if s.code == 500), "{err}");
    let config = ctx.config.clone();
    assert_eq!(error_policy(object.clone(), &err, ctx.clone()), Action::requeue(backoff(&config, 1)));
    assert_eq!(error_policy(object.clone(), &err, ctx.clone()), Action::requeue(backoff(&config, 2)));
    assert_eq!(backoff(&config, 1), Duration::from_secs(1));
    assert_eq!(backoff(&config, 2), Duration::from_secs(2));
    assert_eq!(backoff(&config, 30), config.max_backoff);

    // Success resets the failure count and requeues after the control interval.
    let action = aware_kube::reconcile(object.clone(), ctx.clone()).await.unwrap();
    assert_eq!(action, Action::requeue(config.interval));
    assert_eq!(error_policy(object.clone(), &err, ctx.clone()), Action::requeue(backoff(&config, 1)));
    drop(ctx);
    let calls = server.await.unwrap();
    assert_eq!(calls_to_decider.load(Ordering::SeqCst), 1, "the recommendation was decided once");
    assert_eq!(calls[6].body["status"]["desiredReplicas"], 3);
    assert_eq!(calls[6].body["status"]["recommendation"], calls[3].body["status"]["recommendation"]);
}

#[tokio::test]
async fn the_mpa_default_recommender_serves_through_the_decider_seam() {
    let (ctx, handle) = context(recommend_only(), MpaDefaultDecider::new(false));
    let server = serve(
        handle,
        vec![
            step(Method::GET, SCALE, StatusCode::OK, Some(scale(2))),
            step(Method::GET, PODS, StatusCode::OK, Some(pods(2))),
            step(Method::GET, METRICS, StatusCode::OK, Some(pod_metrics(2))),
            step(Method::PUT, STATUS, StatusCode::OK, None),
        ],
    );
    reconcile_once(&owned("Off"), &ctx).await.unwrap();
    drop(ctx);
    let calls = server.await.unwrap();
    let status = &calls[3].body["status"];
    // 90m of 100m requested = 90 % against the default 50 % target: the HPA half scales up
    // (ceil(2 × 0.9 / 0.5) = 4).
    assert_eq!(status["desiredReplicas"], 4, "{status}");
    assert_eq!(status["recommendation"]["containerRecommendations"][0]["containerName"], "web");
}

/// AWARE behind the seam: an MPA whose key the checkpoint has SERVING gets the agent's
/// (guarded) recommendation; when metrics.k8s.io fails, the guard refuses the observation to
/// the agent and the fallback (the MPA default) acts on it instead: without usage it keeps the
/// replicas, as upstream's HPA does.
#[tokio::test]
async fn the_lifecycle_serves_through_the_decider_seam_and_falls_back_without_metrics() {
    use aware_lifecycle::Stage;
    use aware_lifecycle::algorithm::LifecycleState;
    let serving = LifecycleState::fresh(Stage::Serving, Some(-1e6));
    let decider = lifecycle_decider(vec![("default/web".into(), serving)], "a test checkpoint");
    // Every pass a new interval (none reuses the last recommendation).
    let (ctx, handle) = context(ControllerConfig { interval: Duration::ZERO, ..recommend_only() }, decider);
    let server = serve(
        handle,
        vec![
            step(Method::GET, SCALE, StatusCode::OK, Some(scale(2))),
            step(Method::GET, PODS, StatusCode::OK, Some(pods(2))),
            step(Method::GET, METRICS, StatusCode::OK, Some(pod_metrics(2))),
            // Once, before the MPA's first decision: what it was deployed with.
            step(Method::GET, DEPLOYMENT, StatusCode::OK, Some(deployment("100m", "200m"))),
            step(Method::PUT, STATUS, StatusCode::OK, None),
            step(Method::GET, SCALE, StatusCode::OK, Some(scale(2))),
            step(Method::GET, PODS, StatusCode::OK, Some(pods(2))),
            step(Method::GET, METRICS, StatusCode::SERVICE_UNAVAILABLE, Some(api_status(503, "ServiceUnavailable"))),
            step(Method::PUT, STATUS, StatusCode::OK, None),
        ],
    );
    reconcile_once(&owned("Off"), &ctx).await.unwrap();
    let report = ctx.decider.report();
    assert_eq!(report.len(), 1);
    assert_eq!((report[0].app.as_str(), report[0].stage), ("default/web", Stage::Serving));
    assert_eq!(report[0].counts.agent_actions, 1, "{report:?}");
    reconcile_once(&owned("Off"), &ctx).await.unwrap();
    let report = ctx.decider.report();
    let c = &report[0].counts;
    assert_eq!((c.agent_actions, c.fallback_actions, c.guard_fallbacks), (1, 1, 1), "{report:?}");
    assert!(report[0].counts.last_guard_reason.as_deref().is_some_and(|r| r.contains("metrics missing")), "{report:?}");
    let changes = ctx.decider.stage_changes();
    assert!(changes.iter().any(|c| c.to == Stage::Serving && c.reason.contains("a test checkpoint")), "{changes:?}");
    // /metrics: the controller's and the lifecycle's, one OpenMetrics text.
    let text = ctx.encode_metrics();
    assert_eq!(text.matches("# EOF").count(), 1, "{text}");
    assert!(text.ends_with("# EOF\n"), "{text}");
    for line in [
        r#"aware_lifecycle_stage{app="default/web",stage="serving"} 1"#,
        r#"aware_lifecycle_retraining{app="default/web"} 0"#,
        r#"aware_lifecycle_actions_total{app="default/web",policy="agent"} 1"#,
        r#"aware_lifecycle_guard_total{app="default/web",verdict="fallback"} 1"#,
    ] {
        assert!(text.lines().any(|l| l == line), "{line} missing from\n{text}");
    }
    drop(ctx);
    let calls = server.await.unwrap();
    let status = &calls[4].body["status"];
    // The agent's allocation names the pods' container.
    assert_eq!(status["recommendation"]["containerRecommendations"][0]["containerName"], "web", "{status}");
    let provided = status["conditions"].as_array().unwrap().iter().find(|c| c["type"] == "RecommendationProvided");
    assert_eq!(provided.unwrap()["message"], "recommended by aware", "{status}");
    assert_eq!(calls[8].body["status"]["desiredReplicas"], 2, "{}", calls[8].body);
}

/// An MPA handed to another recommender is forgotten: its lifecycle, counts and the interval's
/// recommendation go (a deleted one is forgotten the same way, from the watch's delete events).
#[tokio::test]
async fn an_mpa_another_recommender_takes_over_is_forgotten() {
    let decider = lifecycle_decider(Vec::new(), "an empty checkpoint");
    let (ctx, handle) = context(recommend_only(), decider);
    let server = serve(
        handle,
        vec![
            step(Method::GET, SCALE, StatusCode::OK, Some(scale(2))),
            step(Method::GET, PODS, StatusCode::OK, Some(pods(2))),
            step(Method::GET, METRICS, StatusCode::OK, Some(pod_metrics(2))),
            step(Method::GET, DEPLOYMENT, StatusCode::OK, Some(deployment("100m", "200m"))),
            step(Method::PUT, STATUS, StatusCode::OK, None),
        ],
    );
    let ctx = Arc::new(ctx);
    aware_kube::reconcile(Arc::new(owned("Off")), ctx.clone()).await.unwrap();
    assert_eq!(ctx.decider.report().len(), 1);
    let action = aware_kube::reconcile(Arc::new(mpa(json!([{"name": "other"}]), "Off")), ctx.clone()).await.unwrap();
    assert_eq!(action, Action::await_change());
    assert!(ctx.decider.report().is_empty(), "{:?}", ctx.decider.report());
    let text = ctx.encode_metrics();
    assert!(!text.contains(r#"aware_lifecycle_stage{app="default/web""#), "{text}");
    assert!(!text.contains(r#"aware_lifecycle_retraining{app="default/web""#), "{text}");
    drop(ctx);
    server.await.unwrap();
}

/// An MPA the checkpoint does not name starts bootstrapping: the MPA default acts for it.
#[tokio::test]
async fn an_mpa_the_checkpoint_does_not_name_is_served_by_the_fallback() {
    let decider = lifecycle_decider(Vec::new(), "an empty checkpoint");
    let (ctx, handle) = context(recommend_only(), decider);
    let server = serve(
        handle,
        vec![
            step(Method::GET, SCALE, StatusCode::OK, Some(scale(2))),
            step(Method::GET, PODS, StatusCode::OK, Some(pods(2))),
            step(Method::GET, METRICS, StatusCode::OK, Some(pod_metrics(2))),
            step(Method::GET, DEPLOYMENT, StatusCode::OK, Some(deployment("100m", "200m"))),
            step(Method::PUT, STATUS, StatusCode::OK, None),
        ],
    );
    reconcile_once(&owned("Off"), &ctx).await.unwrap();
    let report = ctx.decider.report();
    assert_eq!((report[0].stage, report[0].counts.fallback_actions), (aware_lifecycle::Stage::Offline, 1));
    drop(ctx);
    let calls = server.await.unwrap();
    // The same recommendation the MPA default gives on its own (see the test above).
    assert_eq!(calls[4].body["status"]["desiredReplicas"], 4, "{}", calls[4].body);
}

/// Pods running at a quarter of the CPU their Deployment declares (100m / 200m against
/// 400m / 800m: what an agent left before the controller restarted). Read from the Deployment once, the declared CPU is what the
/// fallback (the MPA default, which never sets CPU) hands the app back with; where the
/// Deployment cannot be read (no RBAC for it), the pass still serves, with the pods as first
/// observed taken for the deployment.
#[tokio::test]
async fn after_a_restart_the_fallback_hands_back_the_cpu_the_deployment_declares() {
    let pass = |declared: Step| {
        let decider = lifecycle_decider(Vec::new(), "an empty checkpoint");
        let (ctx, handle) = context(recommend_only(), decider);
        let mut script = Vec::from(observed());
        script.extend([declared, step(Method::PUT, STATUS, StatusCode::OK, None)]);
        let server = serve(handle, script);
        (ctx, server)
    };
    let (ctx, server) = pass(step(Method::GET, DEPLOYMENT, StatusCode::OK, Some(deployment("400m", "800m"))));
    reconcile_once(&owned("Off"), &ctx).await.unwrap();
    drop(ctx);
    let calls = server.await.unwrap();
    let target = &calls[4].body["status"]["recommendation"]["containerRecommendations"][0]["target"];
    assert_eq!(target["cpu"], "400m", "the declared request, back with its limit: {}", calls[4].body);

    let (ctx, server) = pass(step(Method::GET, DEPLOYMENT, StatusCode::FORBIDDEN, Some(api_status(403, "Forbidden"))));
    reconcile_once(&owned("Off"), &ctx).await.unwrap();
    drop(ctx);
    let calls = server.await.unwrap();
    let target = &calls[4].body["status"]["recommendation"]["containerRecommendations"][0]["target"];
    assert_eq!(target["cpu"], "100m", "nothing known to hand back: {}", calls[4].body);
}

/// A template read that fails for now (a 500) is tried again at the next pass; the pass itself
/// serves as ever. A 403 (above) is not tried again.
#[tokio::test]
async fn a_template_read_that_fails_for_now_is_tried_again() {
    let decider = lifecycle_decider(Vec::new(), "an empty checkpoint");
    let (ctx, handle) = context(ControllerConfig { interval: Duration::ZERO, ..recommend_only() }, decider);
    let mut script = Vec::new();
    for answer in [
        step(Method::GET, DEPLOYMENT, StatusCode::INTERNAL_SERVER_ERROR, Some(api_status(500, "InternalError"))),
        step(Method::GET, DEPLOYMENT, StatusCode::OK, Some(deployment("400m", "800m"))),
    ] {
        script.extend(observed());
        script.extend([answer, step(Method::PUT, STATUS, StatusCode::OK, None)]);
    }
    // Read once it answered: the third pass does not ask.
    script.extend(observed());
    script.push(step(Method::PUT, STATUS, StatusCode::OK, None));
    let server = serve(handle, script);
    for _ in 0..3 {
        reconcile_once(&owned("Off"), &ctx).await.unwrap();
    }
    drop(ctx);
    let calls = server.await.unwrap();
    assert_eq!(calls.len(), 14);
}

/// Observing through Prometheus: unreachable, nothing is decided or written, the decision log
/// says the fallback kept the allocation, and the pass is an error to back off.
#[tokio::test]
async fn an_unreachable_prometheus_decides_and_writes_nothing() {
    let decider = lifecycle_decider(Vec::new(), "an empty checkpoint");
    let mut prometheus = aware_kube::PrometheusConfig::new("http://127.0.0.1:9", Vec::new());
    prometheus.timeout_s = 1.0;
    let (ctx, handle) = context(recommend_only(), decider);
    let ctx = ctx.with_prometheus(prometheus);
    let server = serve(
        handle,
        vec![
            step(Method::GET, SCALE, StatusCode::OK, Some(scale(2))),
            step(Method::GET, PODS, StatusCode::OK, Some(pods(2))),
        ],
    );
    let err = reconcile_once(&owned("Off"), &ctx).await.unwrap_err();
    assert!(matches!(err, ControllerError::Unobservable { .. }), "{err}");
    assert!(err.to_string().contains("default/web") && err.to_string().contains("127.0.0.1:9"), "{err}");
    let report = ctx.decider.report();
    assert_eq!((report[0].unavailable, report[0].counts.fallback_actions), (1, 1), "{report:?}");
    let text = ctx.encode_metrics();
    assert!(
        text.lines().any(|l| l == r#"aware_lifecycle_guard_total{app="default/web",verdict="unavailable"} 1"#),
        "{text}"
    );
    drop(ctx);
    assert_eq!(server.await.unwrap().len(), 2, "no metrics.k8s.io read, no status write");
}

/// The controller observing through a real Prometheus (the test's own, scraping the simulator's
/// exporter): the agent SERVING acts on what Prometheus says; with Prometheus stopped, the pass
/// decides and writes nothing and the fallback is logged as having kept the allocation; once
/// Prometheus returns, the agent acts again.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_controller_observes_through_prometheus_and_resumes_after_it_stops() {
    use aware_core::Cluster;
    use aware_lifecycle::Stage;
    use aware_lifecycle::algorithm::LifecycleState;
    let Some(binary) = common::prometheus_binary() else { return };
    let dir = tempfile::tempdir().unwrap();
    let exporter_addr = format!("127.0.0.1:{}", common::free_port());
    let mut prometheus = common::Server::new(binary, dir.path(), &exporter_addr);
    prometheus.start();
    let mut apps = aware_sim::generate_apps(1, 13, 3600.0);
    apps[0].name = "web".into(); // the MPA's target; its pods are web-…
    let mut sim = aware_sim::SimCluster::new(apps, Vec::new(), aware_sim::SimConfig::default(), 13);
    for _ in 0..20 {
        sim.advance().unwrap();
    }
    let exporter = aware_kube::MetricsExporter::new("default").serve(&exporter_addr).unwrap();
    let mut config = aware_kube::PrometheusConfig::new(prometheus.url(), Vec::new());
    config.rate_window = "2s".into();
    config.max_staleness_s = 3.0;
    config.timeout_s = 1.0;
    // Serves the simulator's next interval and waits until Prometheus has it in its rate window.
    let serve_next = |sim: &mut aware_sim::SimCluster, step: u64| {
        sim.advance().unwrap();
        exporter.update(step, &[("web".into(), sim.observe(0).unwrap())]);
        std::thread::sleep(Duration::from_millis(2600));
    };

    let serving = LifecycleState::fresh(Stage::Serving, Some(-1e6));
    let decider = lifecycle_decider(vec![("default/web".into(), serving)], "a test checkpoint");
    let (ctx, handle) = context(ControllerConfig { interval: Duration::ZERO, ..recommend_only() }, decider);
    let ctx = ctx.with_prometheus(config.clone());
    let pass = || {
        vec![
            step(Method::GET, SCALE, StatusCode::OK, Some(scale(2))),
            step(Method::GET, PODS, StatusCode::OK, Some(pods(2))),
        ]
    };
    let mut script = Vec::new();
    for k in 0..2 {
        script.extend(pass());
        if k == 0 {
            script.push(step(Method::GET, DEPLOYMENT, StatusCode::OK, Some(deployment("100m", "200m"))));
        }
        script.push(step(Method::PUT, STATUS, StatusCode::OK, None));
    }
    script.extend(pass());
    script.extend(pass());
    script.push(step(Method::PUT, STATUS, StatusCode::OK, None));
    let server = serve(handle, script);

    // Until Prometheus has scraped the exporter twice (a rate needs two samples).
    let probe = aware_kube::PrometheusCluster::new(
        aware_kube::PrometheusConfig { apps: vec!["web".into()], ..config.clone() },
        |_: &str, _: &Recommendation| Ok::<(), aware_core::ClusterError>(()),
    );
    // Samples of every kind, CPU rates included (a rate needs two scrapes in its window).
    let ready = || {
        probe.observe(0).is_ok_and(|o| {
            let ready: Vec<_> = o.pods.iter().filter(|p| p.phase == aware_core::PodPhase::Ready).collect();
            !ready.is_empty() && ready.iter().all(|p| p.cpu_usage_cores.is_some())
        })
    };
    let mut step_no = 20;
    while !ready() {
        assert!(step_no < 32, "Prometheus never had the exporter's samples: {:?}", probe.observe(0));
        serve_next(&mut sim, step_no);
        step_no += 1;
    }
    for _ in 0..2 {
        serve_next(&mut sim, step_no);
        step_no += 1;
        reconcile_once(&owned("Off"), &ctx).await.unwrap_or_else(|e| panic!("Prometheus up: {e}"));
    }
    assert_eq!(ctx.decider.report()[0].counts.agent_actions, 2, "{:?}", ctx.decider.report());

    prometheus.stop();
    serve_next(&mut sim, step_no);
    let err = reconcile_once(&owned("Off"), &ctx).await.unwrap_err();
    assert!(matches!(err, ControllerError::Unobservable { .. }), "{err}");
    let report = ctx.decider.report();
    assert_eq!((report[0].unavailable, report[0].counts.agent_actions), (1, 2), "{report:?}");

    // Prometheus' service discovery hands targets to the scraper up to 5 s after start.
    prometheus.start();
    for k in 1..=6 {
        serve_next(&mut sim, step_no + k);
        if ready() {
            break;
        }
    }
    reconcile_once(&owned("Off"), &ctx).await.unwrap_or_else(|e| panic!("after Prometheus returned: {e}"));
    let report = ctx.decider.report();
    assert_eq!((report[0].stage, report[0].counts.agent_actions), (Stage::Serving, 3), "{report:?}");
    drop(ctx);
    let calls = server.await.unwrap();
    let status = &calls.last().unwrap().body["status"];
    let replicas = status["desiredReplicas"].as_i64().unwrap();
    assert!((1..=10).contains(&replicas), "within the MPA's constraints: {status}");
    // Prometheus names the workload; the recommendation names the pods' container.
    assert_eq!(status["recommendation"]["containerRecommendations"][0]["containerName"], "web", "{status}");
}

/// The webhook's API-server lookup: one list of the namespace's MPAs, then the scale
/// subresource of each MPA that could apply (owned, not `Off`, with a recommendation); a target
/// that cannot be read is skipped, never an error that would fail admission.
#[tokio::test]
async fn the_webhook_reads_mpas_and_their_target_selectors_from_the_api_server() {
    use aware_kube::webhook::{KubeMpaSource, MpaSource, WebhookConfig};
    let with_recommendation = |mut m: Value| {
        m["status"] = json!({"recommendation": {"containerRecommendations": [
            {"containerName": "web", "target": {"cpu": "300m", "memory": "256Mi"}}]}});
        m
    };
    let applies = with_recommendation(serde_json::to_value(owned("Auto")).unwrap());
    let mut broken = applies.clone();
    broken["metadata"]["name"] = json!("api");
    broken["spec"]["scaleTargetRef"]["name"] = json!("api");
    let others = with_recommendation(serde_json::to_value(mpa(json!([{"name": "other"}]), "Auto")).unwrap());
    let off = with_recommendation(serde_json::to_value(owned("Off")).unwrap());
    let unrecommended = serde_json::to_value(owned("Auto")).unwrap();
    let list = json!({"apiVersion": "autoscaling.k8s.io/v1alpha1", "kind": "MultidimPodAutoscalerList",
        "metadata": {"resourceVersion": "9"}, "items": [applies, others, off, unrecommended, broken]});
    let (service, handle) = tower_test::mock::pair::<Request<Body>, Response<Body>>();
    let server = serve(
        handle,
        vec![
            step(
                Method::GET,
                "/apis/autoscaling.k8s.io/v1alpha1/namespaces/default/multidimpodautoscalers",
                StatusCode::OK,
                Some(list),
            ),
            step(Method::GET, SCALE, StatusCode::OK, Some(scale(2))),
            step(
                Method::GET,
                "/apis/apps/v1/namespaces/default/deployments/api/scale",
                StatusCode::INTERNAL_SERVER_ERROR,
                Some(api_status(500, "InternalError")),
            ),
        ],
    );
    let source = KubeMpaSource {
        client: Client::new(service, "default"),
        config: WebhookConfig { recommender_name: "aware".into(), claim_default: false },
    };
    let found = source.candidates("default").await.unwrap();
    assert_eq!(found.len(), 1, "only the owned, acting, recommended MPA whose target could be read");
    assert_eq!(found[0].mpa.key(), "default/web");
    let web: std::collections::BTreeMap<String, String> = [("app".to_string(), "web".to_string())].into();
    let db: std::collections::BTreeMap<String, String> = [("app".to_string(), "db".to_string())].into();
    use kube::core::SelectorExt;
    assert!(found[0].selector.matches(&web) && !found[0].selector.matches(&db));
    drop(source);
    let calls = server.await.unwrap();
    assert_eq!(calls.len(), 3);
}

/// An API server that answers every call with an error (down, or refusing the controller):
/// the controller's watches of the MPAs back off between tries instead of asking again at once.
/// Time is paused, so it moves only while every task waits on a timer: asked again at once,
/// the tries would all come at the same instant (as they did for the watch that forgets
/// deleted MPAs, which spun one core and never yielded to SIGTERM).
#[tokio::test(start_paused = true)]
async fn an_unreachable_api_server_is_retried_with_backoff() {
    let (ctx, mut handle) = context(recommend_only(), MpaDefaultDecider::new(false));
    let run = tokio::spawn(aware_kube::run(Arc::new(ctx)));
    let start = tokio::time::Instant::now();
    let mut at = Vec::new();
    while at.len() < 12 {
        let (request, send) = handle.next_request().await.expect("the controller keeps watching");
        assert!(request.uri().path().ends_with("/multidimpodautoscalers"), "{}", request.uri());
        at.push(start.elapsed());
        let answer = serde_json::to_vec(&api_status(503, "ServiceUnavailable")).unwrap();
        send.send_response(
            Response::builder()
                .status(StatusCode::SERVICE_UNAVAILABLE)
                .header("content-type", "application/json")
                .body(Body::from(answer))
                .unwrap(),
        );
    }
    run.abort();
    // Two watches (the controller's and the one that forgets deleted MPAs), each backing off
    // from about a second (client-go's 800 ms, with jitter), doubling: twelve tries take
    // several seconds, never an instant.
    assert!(at[11] >= Duration::from_secs(3), "tries at {at:?}");
    let instant = at.windows(2).filter(|w| w[1] == w[0]).count();
    assert!(instant <= 2, "at most the two watches' first tries together: {at:?}");
}

mod leader {
    use std::time::Duration;

    use aware_kube::leader::{LeaderConfig, LeaderElector};
    use k8s_openapi::api::coordination::v1::Lease;
    use kube::Api;

    use super::*;

    const LEASE: &str = "/apis/coordination.k8s.io/v1/namespaces/aware-system/leases/aware-controller";
    const LEASES: &str = "/apis/coordination.k8s.io/v1/namespaces/aware-system/leases";

    fn lease(holder: &str, version: &str, duration_s: u32) -> Value {
        json!({
            "apiVersion": "coordination.k8s.io/v1", "kind": "Lease",
            "metadata": {"name": "aware-controller", "namespace": "aware-system", "resourceVersion": version},
            "spec": {"holderIdentity": holder, "leaseDurationSeconds": duration_s, "leaseTransitions": 3,
                     "renewTime": "2026-01-01T00:00:00.000000Z"},
        })
    }

    fn elector(lease_duration: Duration) -> (LeaderElector, Handle) {
        let (service, handle) = tower_test::mock::pair::<Request<Body>, Response<Body>>();
        let api: Api<Lease> = Api::namespaced(Client::new(service, "default"), "aware-system");
        let mut config = LeaderConfig::new("aware-controller", "me");
        config.lease_duration = lease_duration;
        (LeaderElector::new(api, config), handle)
    }

    #[tokio::test]
    async fn creates_the_lease_when_there_is_none() {
        let (mut e, handle) = elector(Duration::from_secs(15));
        let server = serve(
            handle,
            vec![
                step(Method::GET, LEASE, StatusCode::NOT_FOUND, Some(api_status(404, "NotFound"))),
                step(Method::POST, LEASES, StatusCode::CREATED, None),
            ],
        );
        assert!(e.try_acquire_or_renew().await.unwrap());
        drop(e);
        let calls = server.await.unwrap();
        assert_eq!(calls[1].body["spec"]["holderIdentity"], "me");
    }

    #[tokio::test]
    async fn waits_while_another_holder_renews_and_takes_over_an_expired_lease() {
        // Held by someone else: a fresh record is respected (no write).
        let (mut e, handle) = elector(Duration::from_secs(15));
        let server = serve(handle, vec![step(Method::GET, LEASE, StatusCode::OK, Some(lease("other", "5", 15)))]);
        assert!(!e.try_acquire_or_renew().await.unwrap());
        drop(e);
        server.await.unwrap();

        // A record whose lease duration (0 s, as written by its holder) has passed since we first
        // saw it unchanged is expired: take it over.
        let (mut e, handle) = elector(Duration::from_secs(15));
        let server = serve(
            handle,
            vec![
                step(Method::GET, LEASE, StatusCode::OK, Some(lease("other", "5", 0))),
                step(Method::PUT, LEASE, StatusCode::CONFLICT, Some(api_status(409, "Conflict"))),
            ],
        );
        // It tries, and a concurrent writer wins the race (409): not leader, no error.
        assert!(!e.try_acquire_or_renew().await.unwrap());
        drop(e);
        let calls = server.await.unwrap();
        assert_eq!(calls[1].body["spec"]["holderIdentity"], "me");
        assert_eq!(calls[1].body["spec"]["leaseTransitions"], 4);
        assert_eq!(calls[1].body["metadata"]["resourceVersion"], "5");
    }

    #[tokio::test]
    async fn the_holder_renews_its_own_lease() {
        let (mut e, handle) = elector(Duration::from_secs(15));
        let server = serve(
            handle,
            vec![
                step(Method::GET, LEASE, StatusCode::OK, Some(lease("me", "8", 15))),
                step(Method::PUT, LEASE, StatusCode::OK, None),
            ],
        );
        assert!(e.try_acquire_or_renew().await.unwrap());
        drop(e);
        let calls = server.await.unwrap();
        assert_eq!(calls[1].body["spec"]["leaseTransitions"], 3, "renewal is not a transition");
        assert_ne!(calls[1].body["spec"]["renewTime"], "2026-01-01T00:00:00.000000Z");
    }
}
