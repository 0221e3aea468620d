//! Gymnasium-style environments over any `Cluster`: AWARE's state encoding (Table 1), a
//! continuous or discrete action decoder, and the AWARE reward. Because it only talks to the
//! `Cluster` trait, the same environment trains on the simulator and runs against Kubernetes.

pub mod action;
pub mod classic;
pub mod cluster_env;
pub mod reward;
pub mod state;
pub mod window;

pub use action::{ActionDecoder, ActionKind, Decoded};
pub use cluster_env::{AppSlo, ClusterEnv, ClusterVecEnv, Control, EnvConfig, direction};
pub use reward::{DROP_TOLERANCE, RewardFunction, served_preservation, slo_preservation};
pub use state::{STATE_DIM, StateEncoder};
pub use window::ObservationWindow;
