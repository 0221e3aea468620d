//! Gymnasium semantics in Rust: `reset(seed) -> (obs, info)` and
//! `step(action) -> (obs, reward, terminated, truncated, info)`.

use serde::{Deserialize, Serialize};

use crate::space::{Action, Space};

#[derive(Debug, thiserror::Error)]
pub enum EnvError {
    #[error("action {action:?} is not in the action space {space:?}")]
    ActionOutOfSpace { action: Action, space: Space },
    #[error("expected {expected} actions, got {got}")]
    WrongActionCount { expected: usize, got: usize },
    #[error("step called after the episode ended; call reset first")]
    NeedsReset,
    #[error("backend: {0}")]
    Cluster(#[from] crate::cluster::ClusterError),
    #[error("observation rejected: {0}")]
    BadObservation(#[from] crate::observation::ObservationError),
}

/// Diagnostics Gymnasium would put in `info`: typed here so that callers need no string keys.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct StepInfo {
    pub slo_violated: bool,
    pub dropped_requests: u64,
    pub oom_events: u32,
    /// The action asked for something outside the profile bounds and was clipped to a no-op.
    pub illegal_action: bool,
    /// The action reversed the previous one (scale up then down, or the converse).
    pub oscillation: bool,
    pub cpu_utilisation: f64,
    pub memory_utilisation: f64,
    /// SLO preservation in [0, 1] (1 = met).
    pub slo_preservation: f64,
    pub replicas: u32,
    pub cpu_limit_millicores: u64,
    pub memory_limit_bytes: u64,
    /// The state's CPU and memory utilisation (and this info's) are the last measured, carried
    /// over an interval whose usage samples could not be trusted (a metrics pipeline lagging
    /// pod start-up): learn nothing from it, and serve nothing on it unchecked.
    #[serde(default)]
    pub usage_carried: bool,
}

#[derive(Debug, Clone, PartialEq)]
pub struct Step {
    pub observation: Vec<f32>,
    pub reward: f64,
    /// The task reached a terminal state; autoscaling is a continuing task, so rarely true.
    pub terminated: bool,
    /// The episode hit its step limit.
    pub truncated: bool,
    pub info: StepInfo,
}

pub trait Env {
    fn observation_space(&self) -> Space;
    fn action_space(&self) -> Space;
    fn reset(&mut self, seed: Option<u64>) -> Result<(Vec<f32>, StepInfo), EnvError>;
    fn step(&mut self, action: &Action) -> Result<Step, EnvError>;
}

/// Results of stepping every sub-environment once, in sub-environment order.
#[derive(Debug, Clone, PartialEq)]
pub struct VecStep {
    pub steps: Vec<Step>,
}

/// Many environments stepped in one call so that a policy runs batched. Sub-environments share
/// one episode clock: they reset together.
pub trait VecEnv {
    fn num_envs(&self) -> usize;
    fn observation_space(&self) -> Space;
    fn action_space(&self) -> Space;
    fn reset(&mut self, seed: Option<u64>) -> Result<Vec<(Vec<f32>, StepInfo)>, EnvError>;
    fn step(&mut self, actions: &[Action]) -> Result<VecStep, EnvError>;
}
