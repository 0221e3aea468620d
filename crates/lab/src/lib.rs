//! The laboratory every higher layer runs in: workloads (apps + traces + profile), the policy
//! registry, the agent factory, the one rollout loop, the one scoring path, the training loops
//! and the benchmarks. The command line, the experiments, the lifecycle manager and the services
//! call these functions; none of them steps an environment or scores a run itself.
//!
//! - [`workload`]: [`workload::WorkloadSpec`] → [`workload::Workload`] (apps, traffic, profile).
//! - [`policy`]: policy names (`hpa`, `fixed:1x0.1x64`, `rl:DIR`, …) and building them.
//! - [`agent`]: fresh and checkpointed agents, and the RL policy as a recommender.
//! - [`rollout`]: the [`rollout::Arena`] / [`rollout::Driver`] / [`rollout::Observer`] loop.
//! - [`score`]: per-app summaries (utilisation, SLO violations, drops, core-seconds, reward, p99).
//! - [`evaluate`]: `simulate` and `compare`; [`train`]: `train`; [`provision`]: the
//!   provisioning problem; [`bench`]: `bench sim|store|agents`; [`record`]: trajectories into a
//!   store; [`embed`]: the [`embed::WorkloadEmbedder`] seam the lifecycle calls and the
//!   meta-learner implements; [`threads`]: independent runs side by side; [`faults`]: faults
//!   injected into an arena, for drivers' fault tests.

pub mod agent;
pub mod bench;
pub mod embed;
mod error;
pub mod evaluate;
pub mod faults;
pub mod output;
pub mod plot;
pub mod policy;
pub mod progress;
pub mod provision;
pub mod record;
pub mod rollout;
pub mod score;
pub mod threads;
pub mod train;
pub mod workload;

pub use error::{LabError, ParseError};
