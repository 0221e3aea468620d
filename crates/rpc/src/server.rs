//! The environment service: bounded sessions that expire when idle, every request validated
//! and answered with a gRPC status that says what is wrong, bearer-token auth compared in
//! constant time, optional TLS, the `grpc.health.v1` health service, graceful shutdown.

use std::collections::HashMap;
use std::future::Future;
use std::hash::{BuildHasher, RandomState};
use std::net::SocketAddr;
use std::panic::{AssertUnwindSafe, catch_unwind};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use aware_core::{Action, EnvError, Space};
use sha2::{Digest, Sha256};
use subtle::ConstantTimeEq;
use tokio::net::TcpListener;
use tokio_stream::StreamExt;
use tokio_stream::wrappers::TcpListenerStream;
use tonic::service::Interceptor;
use tonic::service::interceptor::InterceptedService;
use tonic::transport::{Identity, Server, ServerTlsConfig};
use tonic::{Request, Response, Status};

use crate::busy::Activity;
use crate::convert::{self, RequestError};
use crate::envs::{self, BoxedVecEnv};
use crate::proto;
use crate::proto::env_service_server::{EnvService, EnvServiceServer};

/// Default bound on open sessions.
pub const DEFAULT_MAX_SESSIONS: usize = 64;
/// Default idle time after which a session is closed.
pub const DEFAULT_IDLE_TIMEOUT: Duration = Duration::from_secs(600);
/// Default time in-flight calls get to finish after SIGTERM (Kubernetes waits 30 s by default).
pub const DEFAULT_SHUTDOWN_GRACE: Duration = Duration::from_secs(10);
/// Default largest request or response, bytes (gRPC's usual 4 MiB).
pub const DEFAULT_MAX_MESSAGE_BYTES: usize = 4 << 20;

#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum ServeError {
    /// A file a flag names cannot be read (`flag` is `--token-file`, `--tls-cert`, …).
    #[error("{flag} {path}: cannot read: {source}")]
    Read { flag: &'static str, path: PathBuf, source: std::io::Error },
    #[error("--token-file {0}: the token file is empty (after trimming whitespace)")]
    EmptyToken(PathBuf),
    #[error(
        "--token-file {0}: the token holds a character other than visible ASCII, a space or a tab (a line break, a control or non-ASCII byte), which no client can send in its authorization header"
    )]
    UnsendableToken(PathBuf),
    #[error("--listen: cannot listen on {addr}: {source}")]
    Bind { addr: String, source: std::io::Error },
    #[error("--tls-cert/--tls-key: {0}")]
    Tls(String),
    #[error("--max-sessions: must be at least 1")]
    NoSessions,
    #[error("server: {0}")]
    Transport(#[from] tonic::transport::Error),
    #[error("server: {0}")]
    Io(#[from] std::io::Error),
}

/// PEM files for TLS.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TlsFiles {
    pub cert: PathBuf,
    pub key: PathBuf,
}

/// `aware serve-env`'s options, as given on the command line.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ServeOptions {
    /// `HOST:PORT`; port 0 picks a free port (reported through `on_ready`).
    pub listen: String,
    /// A file whose content, surrounding whitespace trimmed, is the bearer token.
    pub token_file: Option<PathBuf>,
    pub tls: Option<TlsFiles>,
    pub max_sessions: usize,
    pub idle_timeout: Duration,
    pub max_message_bytes: usize,
    /// Busy-poll window after each call (0: off). When set, the server runs on one thread that
    /// keeps polling its sockets this long after a call instead of sleeping (see the `busy`
    /// module): lower latency for one sequential client, a busy core while it calls.
    pub busy_poll: Duration,
}

impl Default for ServeOptions {
    fn default() -> Self {
        Self {
            listen: "127.0.0.1:50051".into(),
            token_file: None,
            tls: None,
            max_sessions: DEFAULT_MAX_SESSIONS,
            idle_timeout: DEFAULT_IDLE_TIMEOUT,
            max_message_bytes: DEFAULT_MAX_MESSAGE_BYTES,
            busy_poll: Duration::ZERO,
        }
    }
}

/// What the server runs with, files already read.
#[derive(Debug, Clone)]
pub struct ServerSettings {
    pub token: Option<String>,
    /// PEM certificate chain and key.
    pub tls: Option<(Vec<u8>, Vec<u8>)>,
    pub max_sessions: usize,
    pub idle_timeout: Duration,
    pub max_message_bytes: usize,
    /// Busy-poll window after each call (0: off); meant for a single-threaded runtime.
    pub busy_poll: Duration,
    /// After the shutdown signal, how long in-flight calls and connected clients get before
    /// the server stops anyway.
    pub shutdown_grace: Duration,
}

impl Default for ServerSettings {
    fn default() -> Self {
        Self {
            token: None,
            tls: None,
            max_sessions: DEFAULT_MAX_SESSIONS,
            idle_timeout: DEFAULT_IDLE_TIMEOUT,
            max_message_bytes: DEFAULT_MAX_MESSAGE_BYTES,
            busy_poll: Duration::ZERO,
            shutdown_grace: DEFAULT_SHUTDOWN_GRACE,
        }
    }
}

/// Reads the file `flag` names.
pub(crate) fn read(flag: &'static str, path: &Path) -> Result<Vec<u8>, ServeError> {
    std::fs::read(path).map_err(|source| ServeError::Read { flag, path: path.to_path_buf(), source })
}

/// Reads a token file: its content with surrounding whitespace trimmed.
pub fn read_token_file(path: &Path) -> Result<String, ServeError> {
    let bytes = read("--token-file", path)?;
    let text = String::from_utf8_lossy(&bytes);
    let token = text.trim();
    if token.is_empty() {
        return Err(ServeError::EmptyToken(path.to_path_buf()));
    }
    // What an HTTP/2 header value carries (`Bearer TOKEN`), so what a client can present.
    if !token.chars().all(|c| c == ' ' || c == '\t' || c.is_ascii_graphic()) {
        return Err(ServeError::UnsendableToken(path.to_path_buf()));
    }
    Ok(token.to_string())
}

impl ServeOptions {
    /// Reads the token and TLS files.
    pub fn load(&self) -> Result<ServerSettings, ServeError> {
        if self.max_sessions == 0 {
            return Err(ServeError::NoSessions);
        }
        let token = self.token_file.as_deref().map(read_token_file).transpose()?;
        let tls = match &self.tls {
            Some(t) => Some((read("--tls-cert", &t.cert)?, read("--tls-key", &t.key)?)),
            None => None,
        };
        Ok(ServerSettings {
            token,
            tls,
            max_sessions: self.max_sessions,
            idle_timeout: self.idle_timeout,
            max_message_bytes: self.max_message_bytes,
            busy_poll: self.busy_poll,
            shutdown_grace: DEFAULT_SHUTDOWN_GRACE,
        })
    }
}

/// Checks `authorization: Bearer TOKEN`. Both sides are hashed first so that the comparison
/// takes the same time whatever the presented token's length and content.
#[derive(Clone)]
pub struct BearerAuth {
    expected: Option<[u8; 32]>,
}

impl BearerAuth {
    pub fn new(token: Option<&str>) -> Self {
        Self { expected: token.map(|t| Sha256::digest(t.as_bytes()).into()) }
    }

    pub fn check(&self, header: Option<&[u8]>) -> Result<(), Status> {
        let Some(expected) = &self.expected else { return Ok(()) };
        let Some(header) = header else {
            return Err(Status::unauthenticated("missing bearer token: send metadata `authorization: Bearer TOKEN`"));
        };
        let presented = header.strip_prefix(b"Bearer ").unwrap_or(b"");
        let digest: [u8; 32] = Sha256::digest(presented).into();
        if bool::from(digest.ct_eq(expected)) { Ok(()) } else { Err(Status::unauthenticated("invalid bearer token")) }
    }
}

impl Interceptor for BearerAuth {
    fn call(&mut self, request: Request<()>) -> Result<Request<()>, Status> {
        self.check(request.metadata().get("authorization").map(|v| v.as_bytes()))?;
        Ok(request)
    }
}

struct Session {
    env: BoxedVecEnv,
    action_space: Space,
    num_envs: usize,
    last_used: Instant,
    /// A panic inside the environment leaves it in an unknown state: the session is unusable.
    broken: bool,
}

/// The open sessions, shared by the service and the idle sweeper.
pub struct Sessions {
    map: Mutex<HashMap<String, Arc<Mutex<Session>>>>,
    max: usize,
    idle_timeout: Duration,
    counter: AtomicU64,
    ids: RandomState,
}

impl Sessions {
    fn new(max: usize, idle_timeout: Duration) -> Self {
        Self { map: Mutex::new(HashMap::new()), max, idle_timeout, counter: AtomicU64::new(0), ids: RandomState::new() }
    }

    fn lock_map(&self) -> std::sync::MutexGuard<'_, HashMap<String, Arc<Mutex<Session>>>> {
        // No code panics while holding this lock; recover the map if one ever did.
        self.map.lock().unwrap_or_else(|p| p.into_inner())
    }

    pub fn len(&self) -> usize {
        self.lock_map().len()
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    fn insert(&self, session: Session) -> Result<String, Status> {
        let mut map = self.lock_map();
        if map.len() >= self.max {
            return Err(Status::resource_exhausted(format!(
                "{} sessions are open, the server's --max-sessions limit; close one or wait for idle ones to expire",
                map.len()
            )));
        }
        let n = self.counter.fetch_add(1, Ordering::Relaxed);
        // Unguessable across server runs: a per-process random key hashed with a counter.
        let id = format!("s{n}-{:016x}", self.ids.hash_one(n));
        map.insert(id.clone(), Arc::new(Mutex::new(session)));
        Ok(id)
    }

    fn get(&self, id: &str) -> Result<Arc<Mutex<Session>>, Status> {
        if id.is_empty() {
            return Err(Status::invalid_argument("session_id: empty; call Make first"));
        }
        self.lock_map()
            .get(id)
            .cloned()
            .ok_or_else(|| Status::not_found(format!("session_id: session {id:?} is unknown, closed or expired")))
    }

    fn remove(&self, id: &str) -> bool {
        self.lock_map().remove(id).is_some()
    }

    /// Closes sessions idle for longer than the timeout; returns how many.
    pub fn expire_idle(&self) -> usize {
        let mut map = self.lock_map();
        let before = map.len();
        map.retain(|_, s| match s.try_lock() {
            Ok(s) => s.last_used.elapsed() < self.idle_timeout,
            // In use right now, so not idle.
            Err(_) => true,
        });
        before - map.len()
    }
}

/// Runs `f` on a session's environment, turning a panic into an INTERNAL status (and the
/// session into a broken one) rather than a dead connection.
fn with_env<T>(sessions: &Sessions, id: &str, f: impl FnOnce(&mut Session) -> Result<T, Status>) -> Result<T, Status> {
    let session = sessions.get(id)?;
    let mut s = session.lock().unwrap_or_else(|p| p.into_inner());
    if s.broken {
        return Err(Status::internal(format!("session_id: session {id:?} failed earlier; make a new one")));
    }
    s.last_used = Instant::now();
    match catch_unwind(AssertUnwindSafe(|| f(&mut s))) {
        Ok(r) => r,
        Err(_) => {
            s.broken = true;
            drop(s);
            sessions.remove(id);
            Err(Status::internal(format!("session {id:?}: the environment failed; the session is closed")))
        }
    }
}

fn bad_request(e: RequestError) -> Status {
    Status::invalid_argument(e.to_string())
}

fn env_status(id: &str, e: EnvError) -> Status {
    match e {
        EnvError::NeedsReset => Status::failed_precondition(format!(
            "session {id:?}: the episode ended (truncated or terminated); call Reset before stepping again"
        )),
        EnvError::WrongActionCount { .. } | EnvError::ActionOutOfSpace { .. } => {
            Status::invalid_argument(format!("action: {e}"))
        }
        other => Status::internal(format!("session {id:?}: environment: {other}")),
    }
}

fn check_options(options: &HashMap<String, String>) -> Result<(), Status> {
    match options.keys().next() {
        Some(k) => Err(bad_request(RequestError::UnknownOption(k.clone()))),
        None => Ok(()),
    }
}

fn single(s: &Session, id: &str, call: &str) -> Result<(), Status> {
    if s.num_envs != 1 {
        return Err(Status::failed_precondition(format!(
            "session {id:?} holds {} envs; {call} serves single-env sessions, use {call}Many",
            s.num_envs
        )));
    }
    Ok(())
}

/// The gRPC service over a set of sessions.
pub struct EnvServiceImpl {
    sessions: Arc<Sessions>,
    /// Set when the server busy-polls: every environment call keeps it polling.
    activity: Option<Arc<Activity>>,
}

impl EnvServiceImpl {
    pub fn new(sessions: Arc<Sessions>) -> Self {
        Self { sessions, activity: None }
    }

    /// The window runs from the reply, not the request: a call longer than the window (a
    /// `StepMany` over many apps) still leaves the server polling for the next one.
    fn with_env<T>(&self, id: &str, f: impl FnOnce(&mut Session) -> Result<T, Status>) -> Result<T, Status> {
        let out = with_env(&self.sessions, id, f);
        if let Some(a) = &self.activity {
            a.touch();
        }
        out
    }
}

fn reset_session(s: &mut Session, id: &str, seed: Option<u64>) -> Result<proto::ResetManyResponse, Status> {
    let out = s.env.reset(seed).map_err(|e| env_status(id, e))?;
    let mut resp = proto::ResetManyResponse::default();
    for (obs, info) in &out {
        resp.observations.extend_from_slice(obs);
        resp.infos.push(convert::info_to_proto(info));
    }
    Ok(resp)
}

fn step_session(s: &mut Session, id: &str, actions: &[Action]) -> Result<proto::StepManyResponse, Status> {
    let out = s.env.step(actions).map_err(|e| env_status(id, e))?;
    Ok(convert::steps_to_proto(&out.steps))
}

#[tonic::async_trait]
impl EnvService for EnvServiceImpl {
    async fn make(&self, request: Request<proto::MakeRequest>) -> Result<Response<proto::MakeResponse>, Status> {
        let (id, config) = convert::make_from_proto(request.get_ref()).map_err(bad_request)?;
        if self.sessions.len() >= self.sessions.max {
            // Refuse before building anything.
            return Err(Status::resource_exhausted(format!(
                "{} sessions are open, the server's --max-sessions limit; close one or wait for idle ones to expire",
                self.sessions.len()
            )));
        }
        let env = catch_unwind(|| envs::make(id, &config))
            .map_err(|_| Status::internal("the environment failed while being built"))?
            .map_err(|e| Status::invalid_argument(e.to_string()))?;
        let (observation_space, action_space, num_envs) = (env.observation_space(), env.action_space(), env.num_envs());
        let episode_steps = config.episode_steps.unwrap_or(match id {
            envs::EnvId::Provisioning => 288,
            _ => 100,
        });
        let resp = proto::MakeResponse {
            session_id: String::new(),
            observation_space: Some(convert::space_to_proto(&observation_space)),
            action_space: Some(convert::space_to_proto(&action_space)),
            num_envs: num_envs as u32,
            episode_steps,
        };
        let session_id =
            self.sessions.insert(Session { env, action_space, num_envs, last_used: Instant::now(), broken: false })?;
        Ok(Response::new(proto::MakeResponse { session_id, ..resp }))
    }

    async fn reset(&self, request: Request<proto::ResetRequest>) -> Result<Response<proto::ResetResponse>, Status> {
        let r = request.get_ref();
        let seed = convert::seed_from_proto("seed", r.seed).map_err(bad_request)?;
        check_options(&r.options)?;
        let id = r.session_id.as_str();
        self.with_env(id, |s| {
            single(s, id, "Reset")?;
            let mut many = reset_session(s, id, seed)?;
            Ok(Response::new(proto::ResetResponse { observation: many.observations, info: many.infos.pop() }))
        })
    }

    async fn step(&self, request: Request<proto::StepRequest>) -> Result<Response<proto::StepResponse>, Status> {
        let r = request.get_ref();
        let id = r.session_id.as_str();
        self.with_env(id, |s| {
            single(s, id, "Step")?;
            let actions =
                convert::actions_from_proto("action", r.action.as_ref(), &s.action_space, 1).map_err(bad_request)?;
            let mut many = step_session(s, id, &actions)?;
            Ok(Response::new(proto::StepResponse {
                observation: many.observations,
                reward: many.rewards[0],
                terminated: many.terminated[0],
                truncated: many.truncated[0],
                info: many.infos.pop(),
            }))
        })
    }

    async fn reset_many(
        &self,
        request: Request<proto::ResetRequest>,
    ) -> Result<Response<proto::ResetManyResponse>, Status> {
        let r = request.get_ref();
        let seed = convert::seed_from_proto("seed", r.seed).map_err(bad_request)?;
        check_options(&r.options)?;
        let id = r.session_id.as_str();
        self.with_env(id, |s| reset_session(s, id, seed).map(Response::new))
    }

    async fn step_many(
        &self,
        request: Request<proto::StepManyRequest>,
    ) -> Result<Response<proto::StepManyResponse>, Status> {
        let r = request.get_ref();
        let id = r.session_id.as_str();
        self.with_env(id, |s| {
            let actions = convert::actions_from_proto("actions", r.actions.as_ref(), &s.action_space, s.num_envs)
                .map_err(bad_request)?;
            step_session(s, id, &actions).map(Response::new)
        })
    }

    async fn close(&self, request: Request<proto::CloseRequest>) -> Result<Response<proto::CloseResponse>, Status> {
        self.sessions.remove(&request.get_ref().session_id);
        Ok(Response::new(proto::CloseResponse {}))
    }
}

/// The service stack with its limits and auth, ready for a tonic router.
pub fn service(
    sessions: Arc<Sessions>,
    settings: &ServerSettings,
) -> InterceptedService<EnvServiceServer<EnvServiceImpl>, BearerAuth> {
    service_with(EnvServiceImpl::new(sessions), settings)
}

fn service_with(
    service: EnvServiceImpl,
    settings: &ServerSettings,
) -> InterceptedService<EnvServiceServer<EnvServiceImpl>, BearerAuth> {
    let server = EnvServiceServer::new(service)
        .max_decoding_message_size(settings.max_message_bytes)
        .max_encoding_message_size(settings.max_message_bytes);
    InterceptedService::new(server, BearerAuth::new(settings.token.as_deref()))
}

/// Serves on `listener` until `shutdown` completes, then finishes in-flight calls and returns.
/// In-flight calls and connected clients get [`ServerSettings::shutdown_grace`]; after it the
/// function returns even if connections are still open. Their tasks live on the runtime, so
/// a caller running this on a runtime of its own should drop that runtime afterwards (as
/// [`serve`] and [`spawn`] do) to close them.
pub async fn serve_on(
    listener: TcpListener,
    settings: ServerSettings,
    shutdown: impl Future<Output = ()> + Send,
) -> Result<(), ServeError> {
    if settings.max_sessions == 0 {
        return Err(ServeError::NoSessions);
    }
    let sessions = Arc::new(Sessions::new(settings.max_sessions, settings.idle_timeout));
    let (health, health_service) = tonic_health::server::health_reporter();
    health.set_serving::<EnvServiceServer<EnvServiceImpl>>().await;

    let sweeper = {
        let sessions = sessions.clone();
        let period = (settings.idle_timeout / 4).clamp(Duration::from_millis(50), Duration::from_secs(10));
        tokio::spawn(async move {
            let mut tick = tokio::time::interval(period);
            loop {
                tick.tick().await;
                sessions.expire_idle();
            }
        })
    };

    let activity = (!settings.busy_poll.is_zero()).then(|| Activity::new(settings.busy_poll));
    let spinner = activity.clone().map(|a| tokio::spawn(a.spin()));

    let mut builder = with_tls(Server::builder(), &settings)?;
    let incoming = TcpListenerStream::new(listener).map(|conn| {
        let conn = conn?;
        conn.set_nodelay(true)?;
        Ok::<_, std::io::Error>(conn)
    });
    // Graceful: in-flight calls finish and clients are told to go away, but a client that never
    // reads (a blocking client between calls drives its connection only inside a call) cannot
    // hold the server past the grace period.
    let (stopping, stopped) = tokio::sync::oneshot::channel::<()>();
    let serving = builder
        .add_service(health_service)
        .add_service(service_with(EnvServiceImpl { sessions, activity }, &settings))
        .serve_with_incoming_shutdown(incoming, async move {
            shutdown.await;
            health.set_not_serving::<EnvServiceServer<EnvServiceImpl>>().await;
            let _ = stopping.send(());
        });
    let grace = settings.shutdown_grace;
    let deadline = async move {
        match stopped.await {
            Ok(()) => tokio::time::sleep(grace).await,
            Err(_) => std::future::pending().await,
        }
    };
    let result = tokio::select! {
        r = serving => r,
        () = deadline => Ok(()),
    };
    sweeper.abort();
    if let Some(s) = spinner {
        s.abort();
    }
    Ok(result?)
}

async fn bind(listen: &str) -> Result<TcpListener, ServeError> {
    TcpListener::bind(listen).await.map_err(|source| ServeError::Bind { addr: listen.to_string(), source })
}

async fn terminate_signal() {
    #[cfg(unix)]
    {
        use tokio::signal::unix::{SignalKind, signal};
        match signal(SignalKind::terminate()) {
            Ok(mut term) => {
                tokio::select! {
                    _ = term.recv() => {}
                    _ = tokio::signal::ctrl_c() => {}
                }
            }
            Err(_) => {
                let _ = tokio::signal::ctrl_c().await;
            }
        }
    }
    #[cfg(not(unix))]
    {
        let _ = tokio::signal::ctrl_c().await;
    }
}

/// `builder` serving TLS with the settings' certificate and key, if any; a pair the TLS stack
/// refuses is an error naming why (its whole cause chain: tonic's own text is only
/// "transport error").
fn with_tls(builder: Server, settings: &ServerSettings) -> Result<Server, ServeError> {
    let Some((cert, key)) = &settings.tls else {
        return Ok(builder);
    };
    builder.tls_config(ServerTlsConfig::new().identity(Identity::from_pem(cert, key))).map_err(|e| {
        let chain: Vec<String> =
            std::iter::successors(Some(&e as &dyn std::error::Error), |e| e.source()).map(|e| e.to_string()).collect();
        ServeError::Tls(chain.join(": "))
    })
}

/// `aware serve-env`: serves until SIGTERM or Ctrl-C, then lets in-flight calls finish.
/// `on_ready` gets the bound address (the real port when the options asked for port 0).
pub fn serve(options: &ServeOptions, on_ready: impl FnOnce(SocketAddr)) -> Result<(), ServeError> {
    let settings = options.load()?;
    // A certificate or key the TLS stack refuses is refused before the server says it listens.
    with_tls(Server::builder(), &settings)?;
    // Busy-polling only pays on a runtime whose one thread both polls and serves.
    let runtime = if settings.busy_poll.is_zero() {
        tokio::runtime::Builder::new_multi_thread().enable_all().build()?
    } else {
        tokio::runtime::Builder::new_current_thread().enable_all().build()?
    };
    runtime.block_on(async {
        let listener = bind(&options.listen).await?;
        on_ready(listener.local_addr()?);
        serve_on(listener, settings, terminate_signal()).await
    })
}

/// A server running on its own thread (for tests and `aware bench rpc`); dropping the handle
/// shuts it down gracefully.
pub struct ServerHandle {
    addr: SocketAddr,
    stop: Option<tokio::sync::oneshot::Sender<()>>,
    thread: Option<std::thread::JoinHandle<Result<(), ServeError>>>,
}

impl ServerHandle {
    pub fn addr(&self) -> SocketAddr {
        self.addr
    }

    /// Stops accepting, finishes in-flight calls and waits for the server to end.
    pub fn shutdown(mut self) -> Result<(), ServeError> {
        self.stop_and_join()
    }

    fn stop_and_join(&mut self) -> Result<(), ServeError> {
        if let Some(stop) = self.stop.take() {
            let _ = stop.send(());
        }
        match self.thread.take().map(|t| t.join()) {
            Some(Ok(r)) => r,
            Some(Err(_)) => Err(ServeError::Io(std::io::Error::other("the server thread panicked"))),
            None => Ok(()),
        }
    }
}

impl Drop for ServerHandle {
    fn drop(&mut self) {
        let _ = self.stop_and_join();
    }
}

/// Starts a server on `listen` (port 0: a free one) on a thread of its own with `workers`
/// runtime threads (1: a single-threaded runtime, the lowest latency for one client).
pub fn spawn(listen: &str, settings: ServerSettings, workers: usize) -> Result<ServerHandle, ServeError> {
    let runtime = if workers <= 1 {
        tokio::runtime::Builder::new_current_thread().enable_all().build()?
    } else {
        tokio::runtime::Builder::new_multi_thread().worker_threads(workers).enable_all().build()?
    };
    let listener = runtime.block_on(bind(listen))?;
    let addr = listener.local_addr()?;
    let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
    let thread = std::thread::Builder::new().name("aware-rpc-server".into()).spawn(move || {
        runtime.block_on(serve_on(listener, settings, async {
            let _ = stopped.await;
        }))
    })?;
    Ok(ServerHandle { addr, stop: Some(stop), thread: Some(thread) })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bearer_auth_accepts_only_the_token() {
        let auth = BearerAuth::new(Some("s3cret"));
        assert!(auth.check(Some(b"Bearer s3cret")).is_ok());
        for bad in [&b"Bearer s3cre"[..], b"Bearer s3cret ", b"s3cret", b"Basic s3cret", b""] {
            assert_eq!(auth.check(Some(bad)).unwrap_err().code(), tonic::Code::Unauthenticated);
        }
        let missing = auth.check(None).unwrap_err();
        assert_eq!(missing.code(), tonic::Code::Unauthenticated);
        assert!(missing.message().contains("missing bearer token"));
        assert!(BearerAuth::new(None).check(None).is_ok());
    }

    #[test]
    fn token_file_is_trimmed_and_must_not_be_empty() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("token");
        std::fs::write(&p, "  abc\n\n").unwrap();
        assert_eq!(read_token_file(&p).unwrap(), "abc");
        std::fs::write(&p, " \n").unwrap();
        let e = read_token_file(&p).unwrap_err().to_string();
        assert!(e.contains("empty") && e.starts_with("--token-file "), "{e}");
        let e = read_token_file(&dir.path().join("nope")).unwrap_err().to_string();
        assert!(e.starts_with("--token-file ") && e.contains("nope: cannot read"), "{e}");
        // A token no client could send is refused at the start, not at every call.
        for unsendable in [&b"ab\ncd"[..], b"ab\rcd", b"ab\x07cd", b"caf\xc3\xa9", b"\xff\xfe"] {
            std::fs::write(&p, unsendable).unwrap();
            let e = read_token_file(&p).unwrap_err().to_string();
            assert!(e.starts_with("--token-file ") && e.contains("visible ASCII"), "{unsendable:?}: {e}");
        }
        std::fs::write(&p, "two words\n").unwrap();
        assert_eq!(read_token_file(&p).unwrap(), "two words");
    }
}
