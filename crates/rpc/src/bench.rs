//! `aware bench rpc`: the service's throughput on loopback against the same environment stepped
//! in-process. It starts its own server (with a bearer token, so auth is in the timing).

use std::time::{Duration, Instant};

use aware_core::{Action, Env, EnvError, VecEnv};
use serde::Serialize;

use crate::client::{ClientError, ClientOptions, RemoteEnv, RemoteVecEnv};
use crate::envs::{self, EnvId, MakeConfig, MakeError};
use crate::server::{self, ServeError, ServerSettings};

#[derive(Debug, Clone, PartialEq)]
pub struct BenchOptions {
    /// Applications in the batched and in-process runs.
    pub apps: u32,
    /// Steps timed per repeat.
    pub steps: u32,
    /// Repeats; the report gives medians.
    pub repeats: u32,
    pub seed: u64,
    /// Busy-poll window of the server and the client in the unary measurement (0: off).
    pub busy_poll: Duration,
}

/// The bench's default busy-poll window: longer than a round trip (tens of microseconds), short
/// enough that an idle server stops polling almost at once.
pub const DEFAULT_BENCH_BUSY_POLL: Duration = Duration::from_micros(200);

impl Default for BenchOptions {
    fn default() -> Self {
        Self { apps: 64, steps: 2000, repeats: 5, seed: 1, busy_poll: DEFAULT_BENCH_BUSY_POLL }
    }
}

/// Medians over the repeats (names fixed by INTERFACES.md).
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct BenchReport {
    /// Sequential unary `Step` calls on a one-app session, per second, server and client
    /// busy-polling for `busy_poll_us` after each call.
    pub single_steps_per_s: f64,
    /// The same without busy-polling (both sides sleep between calls).
    pub single_steps_per_s_without_busy_poll: f64,
    pub busy_poll_us: u64,
    /// App-steps per second through `StepMany` on an `apps`-app session.
    pub batched_app_steps_per_s: f64,
    /// App-steps per second of the same environment stepped in-process.
    pub in_process_app_steps_per_s: f64,
    /// `in_process_app_steps_per_s / batched_app_steps_per_s` (the goal: at most 2).
    pub in_process_over_batched: f64,
    pub apps: u32,
    pub steps: u32,
    pub repeats: u32,
    pub env_id: String,
}

#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum BenchError {
    #[error("--{0}: must be at least 1")]
    Zero(&'static str),
    #[error(transparent)]
    Serve(#[from] ServeError),
    #[error(transparent)]
    Client(#[from] ClientError),
    #[error(transparent)]
    Make(#[from] MakeError),
    #[error("environment: {0}")]
    Env(#[from] EnvError),
}

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(f64::total_cmp);
    let n = v.len();
    if n % 2 == 1 { v[n / 2] } else { (v[n / 2 - 1] + v[n / 2]) / 2.0 }
}

/// Runs the measurements, each `repeats` times, and reports medians.
/// Each server runs on one thread of its own (a single-threaded runtime: no hand-offs between
/// worker threads), the client on the calling thread. The unary measurement runs twice: against
/// a server that busy-polls, with a client that does too, and against one that does not.
pub fn run(options: &BenchOptions) -> Result<BenchReport, BenchError> {
    for (name, v) in [("apps", options.apps), ("steps", options.steps), ("repeats", options.repeats)] {
        if v == 0 {
            return Err(BenchError::Zero(name));
        }
    }
    // The discrete space's no-op keeps every app at the allocation it was sized for; the
    // continuous space has no such action (0 is the middle of each app's bounds, hundreds of
    // replicas for some apps), so a step would cost what that arbitrary size costs.
    let id = EnvId::AutoscaleDiscrete;
    let token = "bench-token".to_string();
    let settings = ServerSettings { token: Some(token.clone()), ..Default::default() };
    let server = server::spawn("127.0.0.1:0", settings.clone(), 1)?;
    let address = server.addr().to_string();
    let client = ClientOptions { token: Some(token), ..Default::default() };
    let polling = (!options.busy_poll.is_zero())
        .then(|| server::spawn("127.0.0.1:0", ServerSettings { busy_poll: options.busy_poll, ..settings }, 1))
        .transpose()?;
    let polling_address = polling.as_ref().map(|s| s.addr().to_string());
    let polling_client = ClientOptions { busy_poll: options.busy_poll, ..client.clone() };
    // Episodes longer than the run: every timed step is a step, never a reset.
    let long = Some(options.steps.saturating_add(1).min(envs::MAX_EPISODE_STEPS));
    let single_config = MakeConfig { num_envs: 1, seed: options.seed, episode_steps: long, ..Default::default() };
    let batch_config = MakeConfig { num_envs: options.apps, ..single_config.clone() };
    let hold = Action::Discrete(0);
    let batch_actions = vec![hold.clone(); options.apps as usize];

    let unary = |address: &str, client: &ClientOptions| -> Result<f64, BenchError> {
        let mut env = RemoteEnv::connect(address, id, &single_config, client)?;
        env.reset(Some(options.seed))?;
        let t = Instant::now();
        for _ in 0..options.steps {
            env.step(&hold)?;
        }
        Ok(options.steps as f64 / t.elapsed().as_secs_f64())
    };

    let (mut single, mut sleeping, mut batched, mut local) = (Vec::new(), Vec::new(), Vec::new(), Vec::new());
    for _ in 0..options.repeats {
        let plain = unary(&address, &client)?;
        sleeping.push(plain);
        single.push(match &polling_address {
            Some(a) => unary(a, &polling_client)?,
            None => plain,
        });

        let mut env = RemoteVecEnv::connect(&address, id, &batch_config, &client)?;
        env.reset(Some(options.seed))?;
        let t = Instant::now();
        for _ in 0..options.steps {
            env.step(&batch_actions)?;
        }
        batched.push((options.steps as u64 * options.apps as u64) as f64 / t.elapsed().as_secs_f64());
        drop(env);

        let mut env = envs::make(id, &batch_config)?;
        env.reset(Some(options.seed))?;
        let t = Instant::now();
        for _ in 0..options.steps {
            env.step(&batch_actions)?;
        }
        local.push((options.steps as u64 * options.apps as u64) as f64 / t.elapsed().as_secs_f64());
    }
    server.shutdown()?;
    if let Some(s) = polling {
        s.shutdown()?;
    }
    let (single, batched, local) = (median(single), median(batched), median(local));
    Ok(BenchReport {
        single_steps_per_s: single,
        single_steps_per_s_without_busy_poll: median(sleeping),
        busy_poll_us: options.busy_poll.as_micros() as u64,
        batched_app_steps_per_s: batched,
        in_process_app_steps_per_s: local,
        in_process_over_batched: local / batched,
        apps: options.apps,
        steps: options.steps,
        repeats: options.repeats,
        env_id: id.name().to_string(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn median_of_odd_and_even() {
        assert_eq!(median(vec![3.0, 1.0, 2.0]), 2.0);
        assert_eq!(median(vec![4.0, 1.0, 2.0, 3.0]), 2.5);
    }

    #[test]
    fn zero_is_refused() {
        let e = run(&BenchOptions { repeats: 0, ..Default::default() }).unwrap_err().to_string();
        assert_eq!(e, "--repeats: must be at least 1");
    }
}
