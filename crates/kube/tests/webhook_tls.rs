//! The admission webhook over real TLS: a server on 127.0.0.1 with the self-signed certificate in
//! `tests/tls/` (see `generate.sh` there), a client that trusts exactly that certificate, an
//! AdmissionReview posted as the API server would post it.

use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use aware_kube::MultidimPodAutoscaler;
use aware_kube::webhook::{StaticMpaSource, TargetedMpa, WebhookConfig, WebhookState, parse_selector, serve_webhook};
use http_body_util::{BodyExt, Full};
use hyper::body::Bytes;
use hyper::{Request, StatusCode};
use hyper_util::rt::TokioIo;
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, ServerName};
use serde_json::{Value, json};
use tokio::net::TcpStream;
use tokio_rustls::TlsConnector;

fn tls_file(name: &str) -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/tls").join(name)
}

/// A client that trusts only the certificate in `trusted`.
fn connector(trusted: &Path) -> TlsConnector {
    let mut roots = rustls::RootCertStore::empty();
    roots.add(CertificateDer::from_pem_file(trusted).unwrap()).unwrap();
    let config = rustls::ClientConfig::builder_with_provider(Arc::new(rustls::crypto::ring::default_provider()))
        .with_safe_default_protocol_versions()
        .unwrap()
        .with_root_certificates(roots)
        .with_no_client_auth();
    TlsConnector::from(Arc::new(config))
}

/// One HTTP/1.1 request over TLS to `localhost`; `Err` with the reason when the handshake fails.
async fn call(
    addr: SocketAddr,
    trusted: &Path,
    method: &str,
    path: &str,
    body: Vec<u8>,
) -> Result<(StatusCode, Vec<u8>), String> {
    call_as(addr, trusted, "localhost", method, path, body).await
}

/// [`call`] with the server name the client checks the certificate against.
async fn call_as(
    addr: SocketAddr,
    trusted: &Path,
    server_name: &str,
    method: &str,
    path: &str,
    body: Vec<u8>,
) -> Result<(StatusCode, Vec<u8>), String> {
    let tcp = TcpStream::connect(addr).await.map_err(|e| e.to_string())?;
    let name = ServerName::try_from(server_name.to_string()).unwrap();
    let tls = connector(trusted).connect(name, tcp).await.map_err(|e| e.to_string())?;
    let (mut sender, connection) =
        hyper::client::conn::http1::handshake(TokioIo::new(tls)).await.map_err(|e| e.to_string())?;
    tokio::spawn(connection);
    let request = Request::builder()
        .method(method)
        .uri(path)
        .header("host", "localhost")
        .header("content-type", "application/json")
        .body(Full::new(Bytes::from(body)))
        .unwrap();
    let response = sender.send_request(request).await.map_err(|e| e.to_string())?;
    let status = response.status();
    let bytes = response.into_body().collect().await.map_err(|e| e.to_string())?.to_bytes();
    Ok((status, bytes.to_vec()))
}

fn pod() -> Value {
    json!({
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"generateName": "hamster-", "namespace": "shop", "labels": {"app": "hamster"}},
        "spec": {"containers": [{
            "name": "hamster",
            "image": "registry.k8s.io/ubuntu-slim:0.14",
            "resources": {"requests": {"cpu": "100m", "memory": "50Mi"}, "limits": {"cpu": "200m", "memory": "100Mi"}},
        }]},
    })
}

fn review(uid: &str) -> Vec<u8> {
    serde_json::to_vec(&json!({
        "apiVersion": "admission.k8s.io/v1",
        "kind": "AdmissionReview",
        "request": {
            "uid": uid,
            "kind": {"group": "", "version": "v1", "kind": "Pod"},
            "resource": {"group": "", "version": "v1", "resource": "pods"},
            "requestKind": {"group": "", "version": "v1", "kind": "Pod"},
            "requestResource": {"group": "", "version": "v1", "resource": "pods"},
            "namespace": "shop",
            "operation": "CREATE",
            "userInfo": {"username": "system:serviceaccount:kube-system:replicaset-controller"},
            "object": pod(),
            "oldObject": null,
            "dryRun": false,
            "options": {"apiVersion": "meta.k8s.io/v1", "kind": "CreateOptions"},
        },
    }))
    .unwrap()
}

fn mpa() -> MultidimPodAutoscaler {
    serde_json::from_value(json!({
        "apiVersion": "autoscaling.k8s.io/v1alpha1",
        "kind": "MultidimPodAutoscaler",
        "metadata": {"name": "hamster-mpa", "namespace": "shop"},
        "spec": {
            "scaleTargetRef": {"apiVersion": "apps/v1", "kind": "Deployment", "name": "hamster"},
            "policy": {"updateMode": "Recreate"},
            "recommenders": [{"name": "aware"}],
        },
        "status": {"recommendation": {"containerRecommendations": [
            {"containerName": "hamster", "target": {"cpu": "250m", "memory": "64Mi"}},
        ]}},
    }))
    .unwrap()
}

async fn start() -> SocketAddr {
    start_with("server").await
}

/// The webhook serving `tests/tls/{name}.crt` and `.key`.
async fn start_with(name: &str) -> SocketAddr {
    let state = Arc::new(WebhookState {
        source: StaticMpaSource(vec![TargetedMpa { mpa: mpa(), selector: parse_selector("app=hamster").unwrap() }]),
        config: WebhookConfig::default(),
    });
    let (cert, key) = (tls_file(&format!("{name}.crt")), tls_file(&format!("{name}.key")));
    let (addr, _task) = serve_webhook("127.0.0.1:0", &cert, &key, state).await.unwrap();
    addr
}

#[tokio::test]
async fn a_review_over_tls_gets_the_patch_and_its_uid_back() {
    let addr = start().await;
    let trusted = tls_file("server.crt");
    let (status, body) = call(addr, &trusted, "POST", "/mutate-pods", review("b5e2a1d0-1")).await.unwrap();
    assert_eq!(status, StatusCode::OK, "{}", String::from_utf8_lossy(&body));
    let answer: Value = serde_json::from_slice(&body).unwrap();
    assert_eq!(answer["apiVersion"], "admission.k8s.io/v1");
    assert_eq!(answer["kind"], "AdmissionReview");
    let response = &answer["response"];
    assert_eq!(response["uid"], "b5e2a1d0-1");
    assert_eq!(response["allowed"], true);
    assert_eq!(response["patchType"], "JSONPatch");
    let bytes: Vec<u8> = serde_json::from_value(response["patch"].clone()).unwrap();
    let patch: json_patch::Patch = serde_json::from_slice(&bytes).unwrap();
    let mut patched = pod();
    json_patch::patch(&mut patched, &patch).unwrap();
    let resources = &patched["spec"]["containers"][0]["resources"];
    assert_eq!(resources["requests"], json!({"cpu": "250m", "memory": "64Mi"}));
    assert_eq!(resources["limits"], json!({"cpu": "500m", "memory": "128Mi"}));
    assert_eq!(
        patched["metadata"]["annotations"]["autoscaling.aware.dev/updates"],
        "Pod resources updated by hamster-mpa: container 0: cpu request, memory request, cpu limit, memory limit"
    );

    // The same connection type serves health, 404s and 400s.
    let (status, body) = call(addr, &trusted, "GET", "/healthz", vec![]).await.unwrap();
    assert_eq!((status, body.as_slice()), (StatusCode::OK, &b"ok\n"[..]));
    assert_eq!(call(addr, &trusted, "GET", "/metrics", vec![]).await.unwrap().0, StatusCode::NOT_FOUND);
    assert_eq!(call(addr, &trusted, "GET", "/mutate-pods", vec![]).await.unwrap().0, StatusCode::METHOD_NOT_ALLOWED);
    let (status, body) = call(addr, &trusted, "POST", "/mutate-pods", b"{\"kind\":".to_vec()).await.unwrap();
    assert_eq!(status, StatusCode::BAD_REQUEST);
    assert!(String::from_utf8_lossy(&body).starts_with("malformed AdmissionReview"));
    let huge = vec![b' '; 5 << 20];
    assert_eq!(call(addr, &trusted, "POST", "/mutate-pods", huge).await.unwrap().0, StatusCode::PAYLOAD_TOO_LARGE);
}

#[tokio::test]
async fn a_client_that_does_not_trust_the_certificate_fails_the_handshake() {
    let addr = start().await;
    let error = call(addr, &tls_file("other.crt"), "POST", "/mutate-pods", review("u")).await.unwrap_err();
    assert!(error.contains("certificate"), "{error}");
    // The server is still there for a client that trusts it.
    assert_eq!(call(addr, &tls_file("server.crt"), "GET", "/healthz", vec![]).await.unwrap().0, StatusCode::OK);
}

#[tokio::test]
async fn a_certificate_made_as_the_readme_says_is_trusted_through_its_ca() {
    // What the API server does: trust the caBundle, connect to the Service's DNS name.
    let addr = start_with("svc").await;
    let ca = tls_file("ca.crt");
    let (status, body) =
        call_as(addr, &ca, "aware-webhook.aware-system.svc", "POST", "/mutate-pods", review("c1")).await.unwrap();
    assert_eq!(status, StatusCode::OK, "{}", String::from_utf8_lossy(&body));
    let answer: Value = serde_json::from_slice(&body).unwrap();
    assert_eq!(answer["response"]["uid"], "c1");
    // Another name is refused: the certificate names only the Service.
    let error = call_as(addr, &ca, "aware-webhook.default.svc", "GET", "/healthz", vec![]).await.unwrap_err();
    assert!(error.contains("certificate"), "{error}");
}
