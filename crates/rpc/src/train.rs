//! `aware train --env grpc://ADDR`: training an agent against an environment another process
//! serves, through the same training loop as in-process (`aware_lab::train::train_in`), so a
//! fixed seed gives the identical agent either way.

use std::path::PathBuf;

use aware_env::ActionKind;
use aware_lab::LabError;
use aware_lab::progress::Progress;
use aware_lab::rollout::ActionsOnly;
use aware_lab::train::{TrainReport, TrainSpec, train_in};
use aware_lab::workload::{Workload, WorkloadSpec};

use crate::client::{ClientError, ClientOptions, RemoteVecEnv};
use crate::envs::{EnvId, MAX_EPISODE_STEPS, MAX_NUM_ENVS, MakeConfig};
use crate::server::{ServeError, read_token_file};

/// Why remote training could not run.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum RemoteTrainError {
    #[error(transparent)]
    Lab(#[from] LabError),
    #[error("{}", client_line(address, source))]
    Client { address: String, source: ClientError },
    #[error(transparent)]
    Files(#[from] ServeError),
}

/// `--env ADDRESS: reason`, the address once: connection errors name it already.
fn client_line(address: &str, source: &ClientError) -> String {
    match source {
        ClientError::Address { .. } | ClientError::Connect { .. } => format!("--env {source}"),
        _ => format!("--env {address}: {source}"),
    }
}

/// Where the environment is served and how to reach it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RemoteEnvArgs {
    /// `grpc://host:port`, `grpcs://host:port` (TLS) or `host:port`.
    pub address: String,
    /// The bearer token's file (its content, whitespace trimmed, as `aware serve-env` reads it).
    pub token_file: Option<PathBuf>,
    /// PEM of the CA that signed the server's certificate; speaks TLS.
    pub tls_ca: Option<PathBuf>,
}

impl RemoteEnvArgs {
    /// The client options these files give.
    pub fn options(&self) -> Result<ClientOptions, ServeError> {
        let token = self.token_file.as_deref().map(read_token_file).transpose()?;
        let tls_ca_pem = match &self.tls_ca {
            Some(path) => Some(crate::server::read("--tls-ca", path)?),
            None => None,
        };
        Ok(ClientOptions { token, tls_ca_pem, ..ClientOptions::default() })
    }
}

/// Trains as `aware_lab::train::train` does, on the environment `workload` describes, built and
/// stepped by the server at `remote.address`.
///
/// The workload is loaded here first, so a bad profile or argument fails before any connection
/// (with the same message as in-process); what travels is the profile's text and the settings,
/// and the server builds the environment with the same construction. Replayed trace files stay
/// on this machine, so `workload.trace` is refused.
pub fn train_remote(
    remote: &RemoteEnvArgs,
    workload: &WorkloadSpec,
    spec: &TrainSpec,
    progress: &dyn Progress,
) -> Result<TrainReport, RemoteTrainError> {
    crate::client::check_address(&remote.address, remote.tls_ca.is_some())
        .map_err(|reason| LabError::input(format!("--env {}", remote.address), reason))?;
    if workload.trace.is_some() {
        return Err(LabError::input("--trace", "a remote environment cannot replay this machine's trace files").into());
    }
    if workload.apps > MAX_NUM_ENVS as usize {
        return Err(LabError::input(
            "--apps",
            format!("{} is more than a remote session's {MAX_NUM_ENVS} environments", workload.apps),
        )
        .into());
    }
    if spec.steps > MAX_EPISODE_STEPS as u64 {
        return Err(LabError::input(
            "--steps",
            format!("{} is more than a remote episode's {MAX_EPISODE_STEPS} steps", spec.steps),
        )
        .into());
    }
    let local = Workload::load(workload)?;
    let profile_yaml = match &workload.profile {
        Some(path) => Some(
            std::fs::read_to_string(path).map_err(|e| LabError::Io { path: path.clone(), reason: e.to_string() })?,
        ),
        None => None,
    };
    let id = match spec.action_kind()? {
        ActionKind::Continuous => EnvId::Autoscale,
        ActionKind::Discrete => EnvId::AutoscaleDiscrete,
        other => {
            return Err(LabError::input(
                "--resume",
                format!(
                    "the agent acts in the {} action space, which the environment service does not serve",
                    other.name()
                ),
            )
            .into());
        }
    };
    let config = MakeConfig {
        num_envs: workload.apps as u32,
        seed: workload.seed,
        trace_seed: workload.trace_seed,
        profile_yaml,
        // As given: both sides place a scenario without a step half way through an episode.
        scenario: workload.scenario,
        episode_steps: Some(spec.steps as u32),
        day_seconds: Some(workload.day_seconds),
        days: None,
        mean_count: None,
        population: workload.population,
        vertical_update: Some(workload.vertical_update),
    };
    let options = remote.options()?;
    let client = |source| RemoteTrainError::Client { address: remote.address.clone(), source };
    let env = RemoteVecEnv::connect(&remote.address, id, &config, &options).map_err(client)?;
    let mut arena = ActionsOnly { env, interval_s: local.sim.interval_s };
    Ok(train_in(&mut arena, local.apps.len(), local.seed, local.trace_seed, spec, progress)?)
}
