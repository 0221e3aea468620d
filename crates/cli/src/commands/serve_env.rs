//! `aware serve-env`: the environments as a Gymnasium-style gRPC service.

use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Duration;

use anyhow::Result;
use aware_rpc::{DEFAULT_MAX_MESSAGE_BYTES, DEFAULT_MAX_SESSIONS};

#[derive(clap::Args, Debug)]
pub struct Args {
    /// Address to listen on, HOST:PORT (port 0: a free port, printed on stderr).
    #[arg(long, default_value = "127.0.0.1:50051")]
    listen: String,
    /// File holding the bearer token (surrounding whitespace trimmed); every call must send
    /// `authorization: Bearer TOKEN`. Without it the service is open to anyone who can connect.
    #[arg(long)]
    token_file: Option<PathBuf>,
    /// PEM certificate chain for TLS (with --tls-key).
    #[arg(long, requires = "tls_key")]
    tls_cert: Option<PathBuf>,
    /// PEM private key for TLS (with --tls-cert).
    #[arg(long, requires = "tls_cert")]
    tls_key: Option<PathBuf>,
    /// Most sessions open at once; Make beyond it fails with RESOURCE_EXHAUSTED.
    #[arg(long, default_value_t = DEFAULT_MAX_SESSIONS as u64, value_parser = clap::value_parser!(u64).range(1..=100_000))]
    max_sessions: u64,
    /// Seconds without a call after which a session is closed.
    #[arg(long, default_value_t = 600, value_parser = clap::value_parser!(u64).range(1..))]
    idle_timeout_s: u64,
    /// Largest request or response in bytes.
    #[arg(long, default_value_t = DEFAULT_MAX_MESSAGE_BYTES as u64, value_parser = clap::value_parser!(u64).range(1024..=(1 << 30)))]
    max_message_bytes: u64,
    /// Keep polling the sockets this many microseconds after each call instead of sleeping,
    /// on one server thread (0: off, several threads). Lowers the latency of one sequential
    /// client (a thread wake-up costs tens of µs on a VM) at the cost of a busy core while it
    /// calls; leave it off for many concurrent clients.
    #[arg(long, default_value_t = 0, value_parser = clap::value_parser!(u64).range(0..=1_000_000))]
    busy_poll_us: u64,
}

pub fn run(args: Args) -> Result<ExitCode> {
    let options = aware_rpc::ServeOptions {
        listen: args.listen,
        token_file: args.token_file,
        tls: args.tls_cert.zip(args.tls_key).map(|(cert, key)| aware_rpc::TlsFiles { cert, key }),
        max_sessions: args.max_sessions as usize,
        idle_timeout: Duration::from_secs(args.idle_timeout_s),
        max_message_bytes: args.max_message_bytes as usize,
        busy_poll: Duration::from_micros(args.busy_poll_us),
    };
    let tls = options.tls.is_some();
    aware_rpc::serve(&options, |addr| {
        eprintln!("aware serve-env: listening on {addr}{}", if tls { " (TLS)" } else { "" });
    })?;
    eprintln!("aware serve-env: stopped");
    Ok(ExitCode::SUCCESS)
}
