//! AWARE's lifecycle manager (Qiu et al., USENIX ATC'23, Algorithm 1): a learned autoscaling
//! policy is bootstrapped from the rule-based autoscaler operators already run, acts only once
//! it is as good, stops learning once its rewards settle, and learns again when they slip; a
//! guard checks every observation and limits every action, in every stage, and while the agent
//! acts the fallback's scale-ups are a floor under it.
//!
//! - [`agent`]: the one policy for every app, DDPG or PPO, fed as each stage allows.
//! - [`stage`]: the stages (`initialized`, `offline`, `online`, `serving`) and stage changes.
//! - [`algorithm`]: Algorithm 1 for one application, on episode rewards.
//! - [`decision`]: the decision log behind `aware explain`.
//! - [`explain`]: `aware explain`, the decision log read back from the store.
//! - [`guard`]: observation checks (NaN, missing, stale → the fallback acts), action limits, and
//!   the fallback's scale-ups as a floor under the agent's proposals.
//! - [`shadow`]: the bootstrapping check, the agent against the fallback on the same traffic.
//! - [`manager`]: all of it as a driver of `aware_lab`'s one rollout loop.
//! - [`live`]: the same on a live backend (Prometheus, the Kubernetes controller): no episodes,
//!   observations that can be missing, no simulator for the bootstrapping check.
//! - [`checkpoint`]: the agent and every app's lifecycle kept between runs, verified on load.
//! - [`metrics`]: Prometheus metrics of stages, stage changes, who acted and guard verdicts.
//! - [`record`]: the manager's episodes, stage changes and decisions in a trajectory store.
//! - [`converged`]: the experiments' `converged` reference, trained from scratch until it stops
//!   improving.
//! - [`demo`]: `aware demo`, AWARE beside the MPA default and RL without bootstrapping.
//! - [`run`]: `aware run`, the manager beside the fallback alone on identical traffic.

pub mod agent;
pub mod algorithm;
pub mod checkpoint;
pub mod converged;
pub mod decision;
pub mod demo;
mod error;
pub mod explain;
pub mod fit;
pub mod guard;
pub mod live;
pub mod manager;
pub mod metrics;
pub mod record;
pub mod run;
pub mod shadow;
mod stage;

pub use agent::{Learner, LifecycleAgent};
pub use error::LifecycleError;
pub use stage::{Stage, StageChange};
