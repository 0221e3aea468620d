//! SIMPPO (SoCC'22): many autoscaling agents on one shared cluster. Each application has its
//! own PPO agent whose policy reads the application's local state and whose critic also reads
//! an *auxiliary global state* g_i summarising every other agent (a "virtual agent", turning the
//! many-agent problem into a two-agent one); all agents learn from the team-averaged reward.
//! A [`coordinator::Coordinator`] computes each g_i, keeps heartbeat membership (an agent that
//! stops reporting is dropped) and the per-category base models that initialise new agents
//! (parameter sharing).
//!
//! - [`category`]: CPU-, memory- or I/O-intensive, from an application's segment mix.
//! - [`global`]: an agent's report and the auxiliary global states (mean-field and SIMPPO-All).
//! - [`coordinator`]: membership, global states, team reward, base models.
//! - [`batched`]: one forward pass per step for every agent of a category.
//! - [`tenant`]: the multi-tenant environment — N applications in one simulated cluster.
//! - [`driver`]: the agents as a `aware_lab` rollout driver (S-RL, SIMPPO, SIMPPO-All).

pub mod batched;
pub mod category;
pub mod coordinator;
pub mod driver;
mod error;
pub mod global;
pub mod tenant;

pub use error::SimppoError;
