//! Reinforcement-learning agents on burn: the base learners of `aware`. Each algorithm is
//! readable top to bottom in its own module, in the spirit of CleanRL; they share only the
//! replay buffer, the MLP and the checkpoint format.

pub mod adam;
mod agent;
mod checkpoint;
mod config;
pub mod ddpg;
pub mod dqn;
mod frozen;
pub mod net;
pub mod ppo;
mod replay;
pub mod tabular;
pub use agent::{Agent, action_values, load};
pub use checkpoint::{Checkpoint, CheckpointError, FORMAT, METADATA, OpenCheckpoint, module_file, sha256};
pub use config::{ConfigError, Hyperparameters, MAX_COUNT, MAX_LAYERS, MAX_WEIGHTS, MAX_WIDTH};
pub use ddpg::DdpgTraining;
pub use frozen::FrozenPolicy;
pub use ppo::PpoTraining;
pub use replay::{Batch, ReplayBuffer};

/// One experience, as agents consume it (actions as floats: a discrete action is its index).
#[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct Experience {
    pub state: Vec<f32>,
    pub action: Vec<f32>,
    pub reward: f32,
    pub next_state: Vec<f32>,
    /// The episode ended in a terminal state (no bootstrapping from `next_state`). Truncation
    /// at a step limit is *not* terminal.
    pub terminal: bool,
}

#[derive(Debug, thiserror::Error)]
pub enum AgentError {
    /// A NaN or infinite observation: never fed to a network.
    #[error("observation {0}")]
    BadObservation(String),
    /// A request the agent cannot carry out as asked (a setting out of range, an action its
    /// space does not have).
    #[error("{0}")]
    Invalid(String),
    #[error(transparent)]
    Checkpoint(#[from] CheckpointError),
}

/// Refuses a row-major batch of `n` observations a network must not see.
pub fn check_batch(obs: &[f32], n: usize, dim: usize) -> Result<(), AgentError> {
    if obs.len() != n * dim {
        return Err(AgentError::BadObservation(format!("batch holds {} values, {n} × {dim} expected", obs.len())));
    }
    if let Some(i) = obs.iter().position(|v| !v.is_finite()) {
        return Err(AgentError::BadObservation(format!("row {} component {} is {}", i / dim, i % dim, obs[i])));
    }
    Ok(())
}

/// Refuses observations a network must not see.
pub fn check_observation(obs: &[f32], dim: usize) -> Result<(), AgentError> {
    if obs.len() != dim {
        return Err(AgentError::BadObservation(format!("has dimension {}, the agent expects {dim}", obs.len())));
    }
    if let Some(i) = obs.iter().position(|v| !v.is_finite()) {
        return Err(AgentError::BadObservation(format!("component {i} is {}", obs[i])));
    }
    Ok(())
}
