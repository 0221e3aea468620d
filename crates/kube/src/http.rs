//! A minimal HTTP/1 server (hyper) for `/metrics` and `/healthz`, shared by the metrics exporter
//! and the controller.

use std::convert::Infallible;
use std::net::SocketAddr;
use std::sync::Arc;

use http_body_util::Full;
use hyper::body::Bytes;
use hyper::server::conn::http1;
use hyper::service::service_fn;
use hyper::{Request, Response, StatusCode};
use hyper_util::rt::TokioIo;
use tokio::net::TcpListener;
use tokio::task::JoinHandle;

/// What a handler answers: status, content type, body.
pub struct Reply {
    pub status: StatusCode,
    pub content_type: &'static str,
    pub body: String,
}

impl Reply {
    pub fn ok(content_type: &'static str, body: String) -> Self {
        Self { status: StatusCode::OK, content_type, body }
    }

    pub fn not_found() -> Self {
        Self { status: StatusCode::NOT_FOUND, content_type: "text/plain", body: "not found\n".into() }
    }
}

pub type Handler = Arc<dyn Fn(&str) -> Reply + Send + Sync>;

/// The content type of prometheus-client's text encoding (OpenMetrics 1.0).
pub const OPENMETRICS: &str = "application/openmetrics-text; version=1.0.0; charset=utf-8";

#[derive(Debug, thiserror::Error)]
#[error("cannot listen on {addr}: {source}")]
pub struct ServeError {
    pub addr: String,
    pub source: std::io::Error,
}

/// Binds `addr` (port 0 picks a free one) and serves `handler` on a background task; returns
/// the bound address and the task.
pub async fn serve(addr: &str, handler: Handler) -> Result<(SocketAddr, JoinHandle<()>), ServeError> {
    let listener = TcpListener::bind(addr).await.map_err(|source| ServeError { addr: addr.into(), source })?;
    let bound = listener.local_addr().map_err(|source| ServeError { addr: addr.into(), source })?;
    Ok((bound, tokio::spawn(accept_loop(listener, handler))))
}

/// Serves `handler` on an already bound listener until the task is dropped or aborted.
pub async fn accept_loop(listener: TcpListener, handler: Handler) {
    {
        loop {
            let Ok((stream, _)) = listener.accept().await else { continue };
            let handler = handler.clone();
            tokio::spawn(async move {
                let service = service_fn(move |req: Request<hyper::body::Incoming>| {
                    let reply = handler(req.uri().path());
                    async move {
                        let response = Response::builder()
                            .status(reply.status)
                            .header("content-type", reply.content_type)
                            .body(Full::new(Bytes::from(reply.body)))
                            .expect("a response with a valid header");
                        Ok::<_, Infallible>(response)
                    }
                });
                let _ = http1::Builder::new().serve_connection(TokioIo::new(stream), service).await;
            });
        }
    }
}

/// A server running on its own runtime until dropped.
pub struct Background {
    /// The bound address (port 0 resolved).
    pub addr: SocketAddr,
    _runtime: tokio::runtime::Runtime,
}

/// Serves `/metrics` (the OpenMetrics text `render` returns at each scrape) and `/healthz` on
/// `addr` from a background thread, for callers that are not async themselves.
pub fn serve_metrics_in_background(
    addr: &str,
    render: impl Fn() -> String + Send + Sync + 'static,
) -> Result<Background, ServeError> {
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(1)
        .enable_all()
        .build()
        .map_err(|source| ServeError { addr: addr.into(), source })?;
    let handler: Handler = Arc::new(move |path| match path {
        "/metrics" => Reply::ok(OPENMETRICS, render()),
        "/healthz" => Reply::ok("text/plain", "ok\n".into()),
        _ => Reply::not_found(),
    });
    let (bound, _task) = runtime.block_on(serve(addr, handler))?;
    Ok(Background { addr: bound, _runtime: runtime })
}

#[cfg(test)]
mod tests {
    #[test]
    fn a_background_server_answers_metrics_and_health() {
        let server = super::serve_metrics_in_background("127.0.0.1:0", || "aware_up 1\n".into()).unwrap();
        let get = |path: &str| ureq::get(format!("http://{}{path}", server.addr)).call();
        let mut metrics = get("/metrics").unwrap();
        assert!(
            metrics
                .headers()
                .get("content-type")
                .unwrap()
                .to_str()
                .unwrap()
                .starts_with("application/openmetrics-text")
        );
        assert_eq!(metrics.body_mut().read_to_string().unwrap(), "aware_up 1\n");
        assert_eq!(get("/healthz").unwrap().body_mut().read_to_string().unwrap(), "ok\n");
        assert!(get("/nothing").is_err(), "404 for anything else");
        let taken = super::serve_metrics_in_background(&server.addr.to_string(), String::new).err().unwrap();
        assert!(taken.to_string().contains("cannot listen"), "{taken}");
    }
}
