//! A blocking client that implements `VecEnv` / `Env` over the service, so training code uses a
//! remote environment exactly as an in-process one (`aware train --env grpc://ADDR`).
//!
//! The client runs its own single-threaded tokio runtime and blocks on each call: call it from
//! plain threads, not from inside another async runtime.

use std::time::Duration;

use aware_core::{Action, ClusterError, Env, EnvError, Space, Step, StepInfo, VecEnv, VecStep};
use tonic::metadata::{Ascii, MetadataValue};
use tonic::service::Interceptor;
use tonic::service::interceptor::InterceptedService;
use tonic::transport::{Certificate, Channel, ClientTlsConfig, Endpoint};
use tonic::{Code, Request, Status};

use crate::busy::spin_on;
use crate::convert;
use crate::envs::{EnvId, MakeConfig};
use crate::proto;
use crate::proto::env_service_client::EnvServiceClient;

#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum ClientError {
    #[error("{address}: not a server address ({reason})")]
    Address { address: String, reason: String },
    #[error("{address}: cannot connect: {source}")]
    Connect { address: String, source: tonic::transport::Error },
    #[error("token: a bearer token must be visible ASCII")]
    BadToken,
    #[error("{call}: {}: {message}", code_label(.code))]
    Status { call: &'static str, code: Code, message: String },
    #[error("{call}: malformed response: {reason}")]
    BadResponse { call: &'static str, reason: String },
    #[error("RemoteEnv: the session holds {0} envs; use RemoteVecEnv")]
    NotSingle(usize),
    #[error("client runtime: {0}")]
    Runtime(#[from] std::io::Error),
}

impl ClientError {
    /// The gRPC status code, when the server answered with one.
    pub fn code(&self) -> Option<Code> {
        match self {
            ClientError::Status { code, .. } => Some(*code),
            _ => None,
        }
    }
}

fn code_label(code: &Code) -> &'static str {
    code_name(*code)
}

/// gRPC's canonical name of a status code (`UNAUTHENTICATED`), as every gRPC library prints it.
pub fn code_name(code: Code) -> &'static str {
    match code {
        Code::Ok => "OK",
        Code::Cancelled => "CANCELLED",
        Code::Unknown => "UNKNOWN",
        Code::InvalidArgument => "INVALID_ARGUMENT",
        Code::DeadlineExceeded => "DEADLINE_EXCEEDED",
        Code::NotFound => "NOT_FOUND",
        Code::AlreadyExists => "ALREADY_EXISTS",
        Code::PermissionDenied => "PERMISSION_DENIED",
        Code::ResourceExhausted => "RESOURCE_EXHAUSTED",
        Code::FailedPrecondition => "FAILED_PRECONDITION",
        Code::Aborted => "ABORTED",
        Code::OutOfRange => "OUT_OF_RANGE",
        Code::Unimplemented => "UNIMPLEMENTED",
        Code::Internal => "INTERNAL",
        Code::Unavailable => "UNAVAILABLE",
        Code::DataLoss => "DATA_LOSS",
        Code::Unauthenticated => "UNAUTHENTICATED",
    }
}

/// How to reach the server.
#[derive(Debug, Clone, Default)]
pub struct ClientOptions {
    /// Sent as `authorization: Bearer TOKEN`.
    pub token: Option<String>,
    /// PEM of the CA that signed the server's certificate; set to speak TLS.
    pub tls_ca_pem: Option<Vec<u8>>,
    /// The name the server's certificate is for [the address's host].
    pub tls_domain: Option<String>,
    /// Per-call deadline [60 s].
    pub timeout: Option<Duration>,
    /// Poll for the reply without sleeping for up to this long before waiting normally
    /// [0: off]. Saves a thread wake-up per call (tens of microseconds on a VM) at the cost of
    /// a busy core while waiting; pair it with a busy-polling server (`--busy-poll-us`).
    pub busy_poll: Duration,
}

#[derive(Clone)]
struct Bearer(Option<MetadataValue<Ascii>>);

impl Interceptor for Bearer {
    fn call(&mut self, mut request: Request<()>) -> Result<Request<()>, Status> {
        if let Some(v) = &self.0 {
            request.metadata_mut().insert("authorization", v.clone());
        }
        Ok(request)
    }
}

type Stub = EnvServiceClient<InterceptedService<Channel, Bearer>>;

/// The schemes an environment's address may start with (or none: `host:port`).
pub const ADDRESS_SCHEMES: [&str; 4] = ["grpc://", "grpcs://", "http://", "https://"];

/// Refuses, before any connection is tried, an address whose scheme is none of
/// [`ADDRESS_SCHEMES`] (`foo://host:port`, naming the schemes that work), one that is not
/// `HOST:PORT` after its scheme with a port from 1 to 65535 (`grpc:x` would otherwise become a
/// name lookup, `:99999` a refused connection; after a scheme the port may be left to it, and
/// one trailing `/` is fine), and a TLS scheme without a CA certificate to check the server's
/// with (`tls_ca`: the client trusts only the CA it is given).
pub fn check_address(address: &str, tls_ca: bool) -> Result<(), String> {
    let (schemed, rest) = match address.split_once("://") {
        Some((scheme, rest)) => match ADDRESS_SCHEMES.iter().any(|s| address.starts_with(s)) {
            true => (true, rest.strip_suffix('/').unwrap_or(rest)),
            false => {
                return Err(format!(
                    "unknown scheme {scheme:?} (expected grpc:// or http://HOST:PORT, grpcs:// or https://HOST:PORT for TLS, or HOST:PORT)"
                ));
            }
        },
        None => (false, address),
    };
    // `[v6]` alone is a host; otherwise the last `:` starts the port.
    let (host, port) = match rest.rsplit_once(':') {
        Some((host, port)) if !(rest.starts_with('[') && rest.ends_with(']')) => (host, Some(port)),
        _ => (rest, None),
    };
    let not_host_port = || format!("{rest:?} is not HOST:PORT with a port from 1 to 65535");
    if host.is_empty() || host.contains('/') {
        return Err(not_host_port());
    }
    match port {
        Some(port) if !port.parse::<u16>().is_ok_and(|p| p > 0) => return Err(not_host_port()),
        None if !schemed => return Err(not_host_port()),
        _ => {}
    }
    if (address.starts_with("grpcs://") || address.starts_with("https://")) && !tls_ca {
        return Err("TLS needs the PEM of the CA that signed the server's certificate (--tls-ca FILE)".into());
    }
    Ok(())
}

/// `host:port`, `grpc://host:port` or `http(s)://host:port` → an endpoint URI.
fn endpoint_uri(address: &str, tls: bool) -> String {
    let rest = address
        .strip_prefix("grpc://")
        .or_else(|| address.strip_prefix("grpcs://"))
        .or_else(|| address.strip_prefix("http://"))
        .or_else(|| address.strip_prefix("https://"))
        .unwrap_or(address);
    format!(
        "{}://{rest}",
        if tls || address.starts_with("grpcs://") || address.starts_with("https://") { "https" } else { "http" }
    )
}

/// A connection with one open session.
struct Connection {
    runtime: tokio::runtime::Runtime,
    stub: Stub,
    session: String,
    observation_space: Space,
    action_space: Space,
    num_envs: usize,
    episode_steps: u32,
    busy_poll: Duration,
}

fn status(call: &'static str, s: Status) -> ClientError {
    ClientError::Status { call, code: s.code(), message: s.message().to_string() }
}

impl Connection {
    fn open(address: &str, id: EnvId, config: &MakeConfig, options: &ClientOptions) -> Result<Self, ClientError> {
        let runtime = tokio::runtime::Builder::new_current_thread().enable_all().build()?;
        let bad = |reason: String| ClientError::Address { address: address.to_string(), reason };
        check_address(address, options.tls_ca_pem.is_some()).map_err(bad)?;
        let uri = endpoint_uri(address, options.tls_ca_pem.is_some());
        let mut endpoint = Endpoint::from_shared(uri)
            .map_err(|e| bad(e.to_string()))?
            .tcp_nodelay(true)
            .connect_timeout(Duration::from_secs(10))
            .timeout(options.timeout.unwrap_or(Duration::from_secs(60)));
        if let Some(ca) = &options.tls_ca_pem {
            let mut tls = ClientTlsConfig::new().ca_certificate(Certificate::from_pem(ca));
            if let Some(d) = &options.tls_domain {
                tls = tls.domain_name(d.clone());
            }
            endpoint = endpoint.tls_config(tls).map_err(|e| bad(e.to_string()))?;
        }
        let channel = runtime
            .block_on(endpoint.connect())
            .map_err(|source| ClientError::Connect { address: address.to_string(), source })?;
        let bearer = match &options.token {
            Some(t) => Some(format!("Bearer {t}").parse().map_err(|_| ClientError::BadToken)?),
            None => None,
        };
        let mut stub = EnvServiceClient::with_interceptor(channel, Bearer(bearer))
            .max_decoding_message_size(64 << 20)
            .max_encoding_message_size(64 << 20);
        let made = runtime
            .block_on(stub.make(convert::make_to_proto(id, config)))
            .map_err(|s| status("Make", s))?
            .into_inner();
        let space = |s: &Option<proto::Space>, which: &str| {
            s.as_ref().and_then(convert::space_from_proto).ok_or_else(|| ClientError::BadResponse {
                call: "Make",
                reason: format!("no {which} space this client understands"),
            })
        };
        Ok(Self {
            observation_space: space(&made.observation_space, "observation")?,
            action_space: space(&made.action_space, "action")?,
            num_envs: made.num_envs as usize,
            episode_steps: made.episode_steps,
            session: made.session_id,
            runtime,
            stub,
            busy_poll: options.busy_poll,
        })
    }

    fn check_actions(&self, actions: &[Action]) -> Result<(), EnvError> {
        if actions.len() != self.num_envs {
            return Err(EnvError::WrongActionCount { expected: self.num_envs, got: actions.len() });
        }
        match actions.iter().find(|a| !self.action_space.contains(a)) {
            Some(a) => Err(EnvError::ActionOutOfSpace { action: a.clone(), space: self.action_space.clone() }),
            None => Ok(()),
        }
    }

    fn split_observations(&self, call: &'static str, flat: Vec<f32>, n: usize) -> Result<Vec<Vec<f32>>, EnvError> {
        let dim = self.observation_space.dim();
        if flat.len() != n * dim {
            return Err(remote(ClientError::BadResponse {
                call,
                reason: format!("{} observation values for {n} env(s) of dimension {dim}", flat.len()),
            }));
        }
        Ok(flat.chunks(dim.max(1)).map(<[f32]>::to_vec).collect())
    }
}

impl Drop for Connection {
    fn drop(&mut self) {
        // Best effort: the server's idle expiry frees the slot if this does not arrive.
        if tokio::runtime::Handle::try_current().is_err() {
            let req = proto::CloseRequest { session_id: std::mem::take(&mut self.session) };
            let mut stub = self.stub.clone();
            let _ = self
                .runtime
                .block_on(async move { tokio::time::timeout(Duration::from_secs(2), stub.close(req)).await });
        }
    }
}

/// A remote failure as the `EnvError` the traits speak: a finished episode is `NeedsReset`, as
/// in-process; anything else is the backend being unavailable, with the status in the text.
fn remote(e: ClientError) -> EnvError {
    match &e {
        ClientError::Status { code: Code::FailedPrecondition, message, .. } if message.contains("call Reset") => {
            EnvError::NeedsReset
        }
        _ => EnvError::Cluster(ClusterError::Unavailable(e.to_string())),
    }
}

/// Many sub-environments of one remote session, stepped in one round trip (`StepMany`).
pub struct RemoteVecEnv {
    conn: Connection,
}

impl RemoteVecEnv {
    /// Connects to `address` (`host:port` or `grpc://host:port`) and makes `id` from `config`.
    pub fn connect(
        address: &str,
        id: EnvId,
        config: &MakeConfig,
        options: &ClientOptions,
    ) -> Result<Self, ClientError> {
        Ok(Self { conn: Connection::open(address, id, config, options)? })
    }

    pub fn session_id(&self) -> &str {
        &self.conn.session
    }

    pub fn episode_steps(&self) -> u32 {
        self.conn.episode_steps
    }
}

impl VecEnv for RemoteVecEnv {
    fn num_envs(&self) -> usize {
        self.conn.num_envs
    }

    fn observation_space(&self) -> Space {
        self.conn.observation_space.clone()
    }

    fn action_space(&self) -> Space {
        self.conn.action_space.clone()
    }

    fn reset(&mut self, seed: Option<u64>) -> Result<Vec<(Vec<f32>, StepInfo)>, EnvError> {
        let c = &mut self.conn;
        let req = proto::ResetRequest {
            session_id: c.session.clone(),
            seed: seed.map(|s| s as i64),
            options: Default::default(),
        };
        let resp = c
            .runtime
            .block_on(spin_on(c.stub.reset_many(req), c.busy_poll))
            .map_err(|s| remote(status("ResetMany", s)))?
            .into_inner();
        let n = c.num_envs;
        if resp.infos.len() != n {
            return Err(remote(ClientError::BadResponse {
                call: "ResetMany",
                reason: format!("{} infos for {n} envs", resp.infos.len()),
            }));
        }
        let obs = c.split_observations("ResetMany", resp.observations, n)?;
        Ok(obs.into_iter().zip(resp.infos.iter().map(convert::info_from_proto)).collect())
    }

    fn step(&mut self, actions: &[Action]) -> Result<VecStep, EnvError> {
        let c = &mut self.conn;
        c.check_actions(actions)?;
        let req =
            proto::StepManyRequest { session_id: c.session.clone(), actions: Some(convert::actions_to_proto(actions)) };
        let r = c
            .runtime
            .block_on(spin_on(c.stub.step_many(req), c.busy_poll))
            .map_err(|s| remote(status("StepMany", s)))?
            .into_inner();
        let n = c.num_envs;
        if [r.rewards.len(), r.terminated.len(), r.truncated.len(), r.infos.len()].iter().any(|&l| l != n) {
            return Err(remote(ClientError::BadResponse {
                call: "StepMany",
                reason: format!("result lists are not {n} long"),
            }));
        }
        let obs = c.split_observations("StepMany", r.observations, n)?;
        let steps = obs
            .into_iter()
            .enumerate()
            .map(|(i, observation)| Step {
                observation,
                reward: r.rewards[i],
                terminated: r.terminated[i],
                truncated: r.truncated[i],
                info: convert::info_from_proto(&r.infos[i]),
            })
            .collect();
        Ok(VecStep { steps })
    }
}

/// One remote environment, stepped with unary `Step` calls.
pub struct RemoteEnv {
    conn: Connection,
}

impl RemoteEnv {
    /// As [`RemoteVecEnv::connect`]; `config.num_envs` must be 0 or 1.
    pub fn connect(
        address: &str,
        id: EnvId,
        config: &MakeConfig,
        options: &ClientOptions,
    ) -> Result<Self, ClientError> {
        if config.num_envs > 1 {
            return Err(ClientError::NotSingle(config.num_envs as usize));
        }
        Ok(Self { conn: Connection::open(address, id, config, options)? })
    }

    pub fn session_id(&self) -> &str {
        &self.conn.session
    }
}

impl Env for RemoteEnv {
    fn observation_space(&self) -> Space {
        self.conn.observation_space.clone()
    }

    fn action_space(&self) -> Space {
        self.conn.action_space.clone()
    }

    fn reset(&mut self, seed: Option<u64>) -> Result<(Vec<f32>, StepInfo), EnvError> {
        let c = &mut self.conn;
        let req = proto::ResetRequest {
            session_id: c.session.clone(),
            seed: seed.map(|s| s as i64),
            options: Default::default(),
        };
        let r = c
            .runtime
            .block_on(spin_on(c.stub.reset(req), c.busy_poll))
            .map_err(|s| remote(status("Reset", s)))?
            .into_inner();
        let obs = c.split_observations("Reset", r.observation, 1)?.remove(0);
        Ok((obs, r.info.as_ref().map(convert::info_from_proto).unwrap_or_default()))
    }

    fn step(&mut self, action: &Action) -> Result<Step, EnvError> {
        let c = &mut self.conn;
        c.check_actions(std::slice::from_ref(action))?;
        let req = proto::StepRequest {
            session_id: c.session.clone(),
            action: Some(convert::actions_to_proto(std::slice::from_ref(action))),
        };
        let r = c
            .runtime
            .block_on(spin_on(c.stub.step(req), c.busy_poll))
            .map_err(|s| remote(status("Step", s)))?
            .into_inner();
        let observation = c.split_observations("Step", r.observation, 1)?.remove(0);
        Ok(Step {
            observation,
            reward: r.reward,
            terminated: r.terminated,
            truncated: r.truncated,
            info: r.info.as_ref().map(convert::info_from_proto).unwrap_or_default(),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn addresses_become_uris() {
        assert_eq!(endpoint_uri("127.0.0.1:5", false), "http://127.0.0.1:5");
        assert_eq!(endpoint_uri("grpc://h:5", false), "http://h:5");
        assert_eq!(endpoint_uri("grpcs://h:5", false), "https://h:5");
        assert_eq!(endpoint_uri("h:5", true), "https://h:5");
        for ok in
            ["h:5", "grpc://h:5", "http://h:5", "127.0.0.1:65535", "grpc://[::1]:50051", "http://h:5/", "grpc://h"]
        {
            assert!(check_address(ok, false).is_ok(), "{ok}");
        }
        for ok in ["grpcs://h:5", "https://h:5", "h:5", "https://h"] {
            assert!(check_address(ok, true).is_ok(), "{ok}");
        }
        let e = check_address("foo://x", false).unwrap_err();
        assert!(e.contains("\"foo\"") && e.contains("grpc://") && e.contains("grpcs://"), "{e}");
        for bad in ["grpc:x", "grpc://127.0.0.1:99999", "h:0", "h", ":5", "grpc://h:5/path", "grpc://h/x:5"] {
            let e = check_address(bad, false).unwrap_err();
            assert!(e.contains("HOST:PORT"), "{bad}: {e}");
        }
        for tls in ["grpcs://h:5", "https://h:5"] {
            let e = check_address(tls, false).unwrap_err();
            assert!(e.contains("--tls-ca"), "{tls}: {e}");
        }
    }

    #[test]
    fn status_text_names_the_code() {
        let e = status("Make", Status::unauthenticated("invalid bearer token")).to_string();
        assert!(e.starts_with("Make: UNAUTHENTICATED"), "{e}");
        assert!(e.ends_with("invalid bearer token"), "{e}");
    }
}
