//! One interface over every learner, so trainers and recommenders drive DDPG, PPO, DQN, D3QN
//! and the Q-table alike. It is batched by environment because PPO keeps one rollout per
//! environment and every network acts faster on a batch than row by row.

use std::path::Path;

use aware_core::{Action, Space};

use crate::checkpoint::{Checkpoint, CheckpointError};
use crate::ddpg::Ddpg;
use crate::dqn::Dqn;
use crate::ppo::{Ppo, PpoActions};
use crate::tabular::QTable;
use crate::{AgentError, Experience};

/// `Send`: a policy may serve from a controller's worker threads (the Kubernetes recommender).
pub trait Agent: Send {
    /// The name written into checkpoints (`ddpg`, `ppo`, `dqn`, `d3qn`, `qtable`).
    fn algorithm(&self) -> &'static str;

    fn action_space(&self) -> Space;

    /// One action per state; row `i` acts for environment `i`. With `explore` the agent's
    /// exploration applies (and PPO remembers what it sampled for [`Agent::observe`]).
    fn act(&mut self, states: &[Vec<f32>], explore: bool) -> Result<Vec<Action>, AgentError>;

    /// The outcome of environment `env`'s last explored action. `truncated` marks a step
    /// limit (the task goes on), as opposed to `e.terminal`.
    fn observe(&mut self, env: usize, e: &Experience, truncated: bool) -> Result<(), AgentError>;

    /// Environment `env`'s last explored action will have no outcome to learn from (its state
    /// or the next one was not measured, or another controller acted for it): an on-policy
    /// learner ends the environment's rollout chain at its last observed step and drops the
    /// action awaiting its outcome (PPO: [`Ppo::cut`]), so no advantage reaches across the
    /// gap; an off-policy learner, which learns from each transition alone, has nothing to do
    /// (the default).
    fn cut(&mut self, _env: usize) {}

    /// Exploration left, for progress reports: ε for ε-greedy and noise-driven agents, σ or
    /// relative entropy for PPO.
    fn exploration(&self) -> f32;

    fn save(&self, dir: &Path, observation_space: &Space, training_step: u64) -> Result<(), AgentError>;
}

/// The floats an experience stores for an action.
pub fn action_values(action: &Action) -> Vec<f32> {
    match action {
        Action::Continuous(v) => v.clone(),
        Action::Discrete(i) => vec![*i as f32],
        Action::MultiDiscrete(v) => v.iter().map(|&i| i as f32).collect(),
    }
}

impl Agent for Ddpg {
    fn algorithm(&self) -> &'static str {
        "ddpg"
    }

    fn action_space(&self) -> Space {
        let d = self.action_dim();
        Space::Box { low: vec![-1.0; d], high: vec![1.0; d] }
    }

    fn act(&mut self, states: &[Vec<f32>], explore: bool) -> Result<Vec<Action>, AgentError> {
        states.iter().map(|s| Ddpg::act(self, s, explore).map(Action::Continuous)).collect()
    }

    fn observe(&mut self, _env: usize, e: &Experience, _truncated: bool) -> Result<(), AgentError> {
        Ddpg::observe(self, e).map(|_| ())
    }

    fn exploration(&self) -> f32 {
        self.epsilon()
    }

    fn save(&self, dir: &Path, observation_space: &Space, training_step: u64) -> Result<(), AgentError> {
        Ddpg::save(self, dir, observation_space, training_step)
    }
}

impl Agent for Dqn {
    fn algorithm(&self) -> &'static str {
        Dqn::algorithm(self)
    }

    fn action_space(&self) -> Space {
        Space::Discrete { n: self.actions() }
    }

    fn act(&mut self, states: &[Vec<f32>], explore: bool) -> Result<Vec<Action>, AgentError> {
        states.iter().map(|s| Dqn::act(self, s, explore).map(Action::Discrete)).collect()
    }

    fn observe(&mut self, _env: usize, e: &Experience, _truncated: bool) -> Result<(), AgentError> {
        Dqn::observe(self, e).map(|_| ())
    }

    fn exploration(&self) -> f32 {
        self.epsilon()
    }

    fn save(&self, dir: &Path, observation_space: &Space, _training_step: u64) -> Result<(), AgentError> {
        Dqn::save(self, dir, observation_space)
    }
}

impl Agent for QTable {
    fn algorithm(&self) -> &'static str {
        "qtable"
    }

    fn action_space(&self) -> Space {
        Space::Discrete { n: self.actions() }
    }

    fn act(&mut self, states: &[Vec<f32>], explore: bool) -> Result<Vec<Action>, AgentError> {
        states.iter().map(|s| QTable::act(self, s, explore).map(Action::Discrete)).collect()
    }

    fn observe(&mut self, _env: usize, e: &Experience, _truncated: bool) -> Result<(), AgentError> {
        self.learn(&e.state, e.action[0] as usize, e.reward, &e.next_state, e.terminal)
    }

    fn exploration(&self) -> f32 {
        self.epsilon()
    }

    fn save(&self, dir: &Path, observation_space: &Space, _training_step: u64) -> Result<(), AgentError> {
        QTable::save(self, dir, observation_space)
    }
}

impl Agent for Ppo {
    fn algorithm(&self) -> &'static str {
        "ppo"
    }

    fn action_space(&self) -> Space {
        Ppo::action_space(self)
    }

    fn act(&mut self, states: &[Vec<f32>], explore: bool) -> Result<Vec<Action>, AgentError> {
        let discrete = matches!(Ppo::action_space(self), Space::Discrete { .. });
        Ok(Ppo::act(self, states, explore)?
            .into_iter()
            .map(|a| if discrete { Action::Discrete(a[0] as usize) } else { Action::Continuous(a) })
            .collect())
    }

    fn observe(&mut self, env: usize, e: &Experience, truncated: bool) -> Result<(), AgentError> {
        Ppo::observe(self, env, e, truncated).map(|_| ())
    }

    fn cut(&mut self, env: usize) {
        Ppo::cut(self, env)
    }

    fn exploration(&self) -> f32 {
        Ppo::exploration(self)
    }

    fn save(&self, dir: &Path, observation_space: &Space, training_step: u64) -> Result<(), AgentError> {
        Ppo::save(self, dir, observation_space, training_step)
    }
}

/// Loads whichever algorithm the checkpoint in `dir` holds, for an environment with these
/// spaces; a checkpoint for other spaces is refused with both spaces named.
pub fn load(dir: &Path, observation_space: &Space, action_space: &Space) -> Result<Box<dyn Agent>, AgentError> {
    let meta = Checkpoint::read_metadata(dir)?;
    let mismatch = || CheckpointError::SpaceMismatch {
        path: dir.display().to_string(),
        what: "action",
        checkpoint: meta.action_space.to_string(),
        environment: action_space.to_string(),
    };
    let agent: Box<dyn Agent> = match (meta.algorithm.as_str(), action_space) {
        ("ddpg", Space::Box { low, .. }) => Box::new(Ddpg::load(dir, observation_space, low.len(), 0)?),
        ("dqn" | "d3qn", Space::Discrete { n }) => Box::new(Dqn::load(dir, observation_space, *n, 0)?),
        ("qtable", Space::Discrete { n }) => Box::new(QTable::load(dir, observation_space, *n, 0)?),
        ("ppo", Space::Discrete { n }) => Box::new(Ppo::load(dir, observation_space, PpoActions::Discrete(*n), 0)?),
        ("ppo", Space::Box { low, .. }) => {
            Box::new(Ppo::load(dir, observation_space, PpoActions::Continuous(low.len()), 0)?)
        }
        ("ddpg" | "dqn" | "d3qn" | "qtable" | "ppo", _) => return Err(mismatch().into()),
        (other, _) => {
            return Err(CheckpointError::Algorithm {
                path: dir.display().to_string(),
                found: other.to_string(),
                expected: "ddpg, ppo, dqn, d3qn or qtable".into(),
            }
            .into());
        }
    };
    Ok(agent)
}
