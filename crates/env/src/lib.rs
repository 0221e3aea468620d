//! Gymnasium-style environments over any `Cluster`: AWARE's state encoding (Table 1), a
//! continuous or discrete action decoder, and the AWARE reward. Because it only talks to the
//! `Cluster` trait, the same environment trains on the simulator and runs against Kubernetes.

mod action;
pub mod classic;
mod cluster_env;
mod reward;
mod state;
mod window;

pub use action::{
    ActionDecoder, ActionKind, DISCRETE_ACTION_NAMES, DISCRETE_ACTIONS, DecodeError, Decoded, RELATIVE_RANGE,
    RELATIVE_TOLERANCE, coordinates, reverses,
};
pub use cluster_env::{AppSlo, ClusterEnv, ClusterVecEnv, Control, EnvConfig, direction, measure};
pub use reward::{DROP_TOLERANCE, RESOURCES, RewardFunction, served_preservation, slo_preservation};
pub use state::{STATE_DIM, STATE_FEATURES, StateEncoder, UsageSource};
pub use window::ObservationWindow;
