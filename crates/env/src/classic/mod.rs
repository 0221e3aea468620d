//! Gymnasium's classic-control tasks, for checking the agents where every RL practitioner knows
//! the answer: Pendulum-v1 (continuous torque) and CartPole-v1 (push left or right). Dynamics,
//! rewards, termination and truncation follow Gymnasium's
//! `gymnasium/envs/classic_control/{pendulum,cartpole}.py` (constants cited where used); the
//! step limits of their registered `TimeLimit` wrappers (200 and 500) are built in. Random
//! starts come from a seeded PCG generator, so a seed reproduces an episode here (not numpy's
//! stream).

pub mod cartpole;
pub mod pendulum;

pub use cartpole::CartPole;
pub use pendulum::Pendulum;

use aware_core::{Action, EnvError, Space};

/// The Gymnasium task, for choosing one by name.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "snake_case")]
#[non_exhaustive]
pub enum ClassicTask {
    /// Pendulum-v1.
    Pendulum,
    /// CartPole-v1.
    Cartpole,
}

impl ClassicTask {
    pub fn name(self) -> &'static str {
        match self {
            ClassicTask::Pendulum => "pendulum",
            ClassicTask::Cartpole => "cartpole",
        }
    }
}

fn out_of_space(action: &Action, space: Space) -> EnvError {
    EnvError::ActionOutOfSpace { action: action.clone(), space }
}
