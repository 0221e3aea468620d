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
