//! The environment server without the rest of the CLI (no burn to build), taking the same
//! flags as `aware serve-env`: `cargo run -p aware-rpc --example serve_env -- serve-env --listen
//! 127.0.0.1:0 --token-file F [--tls-cert F --tls-key F] [--max-sessions N] [--idle-timeout-s S]`.
//! The Python tests accept it as `AWARE_BIN`.

use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Duration;

use aware_rpc::{ServeOptions, TlsFiles};

fn parse(args: &[String]) -> Result<ServeOptions, String> {
    let mut o = ServeOptions::default();
    let (mut cert, mut key) = (None, None);
    let mut it = args.iter().skip_while(|a| *a == "serve-env");
    while let Some(flag) = it.next() {
        let mut value = || it.next().cloned().ok_or_else(|| format!("{flag}: needs a value"));
        let number = |v: String| v.parse::<u64>().map_err(|_| format!("{flag}: {v:?} is not a whole number"));
        match flag.as_str() {
            "--listen" => o.listen = value()?,
            "--token-file" => o.token_file = Some(PathBuf::from(value()?)),
            "--tls-cert" => cert = Some(PathBuf::from(value()?)),
            "--tls-key" => key = Some(PathBuf::from(value()?)),
            "--max-sessions" => o.max_sessions = number(value()?)? as usize,
            "--idle-timeout-s" => o.idle_timeout = Duration::from_secs(number(value()?)?),
            "--max-message-bytes" => o.max_message_bytes = number(value()?)? as usize,
            other => return Err(format!("unknown flag {other:?}")),
        }
    }
    o.tls = match (cert, key) {
        (Some(cert), Some(key)) => Some(TlsFiles { cert, key }),
        (None, None) => None,
        _ => return Err("--tls-cert and --tls-key go together".into()),
    };
    Ok(o)
}

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let options = match parse(&args) {
        Ok(o) => o,
        Err(e) => {
            eprintln!("error: {e}");
            return ExitCode::from(2);
        }
    };
    match aware_rpc::serve(&options, |addr| eprintln!("aware serve-env: listening on {addr}")) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("error: {e}");
            ExitCode::from(1)
        }
    }
}
