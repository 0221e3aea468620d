//! A policy's greedy actions with its weights frozen: a copy that later training does not move.
//!
//! A learner that keeps training (the lifecycle's one shared agent learns from every app it is
//! bootstrapping) changes the policy of every app it acts for. A [`FrozenPolicy`] is what was
//! checked, served as it was checked: cheap to take (the plain-float copy batched serving
//! already uses) and to share between the apps it serves.

use std::sync::Arc;

use crate::net::FrozenMlp;
use crate::tabular::argmax;
use crate::{AgentError, check_batch};

/// How a network's outputs become an action.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Output {
    /// A continuous action in [−1, 1]^n: each output through tanh (DDPG's actor, PPO's mean).
    Tanh,
    /// A discrete action out of this many: the index of the largest output.
    Argmax(usize),
}

/// The greedy actions of a policy as it was when frozen.
#[derive(Debug, Clone)]
pub struct FrozenPolicy {
    net: Arc<FrozenMlp>,
    state_dim: usize,
    output: Output,
}

impl FrozenPolicy {
    /// `net` reads the first `net.input_dim()` features of states of `state_dim` (a PPO policy
    /// may read fewer than its critic).
    pub(crate) fn new(net: FrozenMlp, state_dim: usize, output: Output) -> Self {
        debug_assert!(net.input_dim() <= state_dim);
        Self { net: Arc::new(net), state_dim, output }
    }

    pub fn state_dim(&self) -> usize {
        self.state_dim
    }

    /// Whether `self` and `other` are the same frozen copy (not merely equal weights).
    pub fn same(&self, other: &FrozenPolicy) -> bool {
        Arc::ptr_eq(&self.net, &other.net)
    }

    /// Greedy actions for `n` row-major states, flat: what the policy's own greedy batch gave
    /// when it was frozen.
    pub fn greedy_batch(&self, obs: &[f32], n: usize) -> Result<Vec<f32>, AgentError> {
        check_batch(obs, n, self.state_dim)?;
        Ok(greedy_rows(&self.net, self.state_dim, self.output, obs, n))
    }
}

/// The actions `net` gives `n` checked row-major states of `state_dim` (of which it reads the
/// first `net.input_dim()`), through `output`.
pub(crate) fn greedy_rows(net: &FrozenMlp, state_dim: usize, output: Output, obs: &[f32], n: usize) -> Vec<f32> {
    let k = net.input_dim();
    let local: Vec<f32>;
    let obs = if k < state_dim {
        local = obs.chunks(state_dim).flat_map(|row| row[..k].iter().copied()).collect();
        &local
    } else {
        obs
    };
    let out = net.forward(obs, n);
    match output {
        Output::Tanh => out.into_iter().map(f32::tanh).collect(),
        Output::Argmax(a) => out.chunks(a).map(|row| argmax(row) as f32).collect(),
    }
}

#[cfg(test)]
mod tests {
    use crate::Experience;
    use crate::ddpg::{Ddpg, DdpgConfig};
    use crate::ppo::{Ppo, PpoActions, PpoConfig};

    fn states(n: usize, dim: usize) -> Vec<f32> {
        (0..n * dim).map(|i| ((i * 37 % 101) as f32 / 50.0) - 1.0).collect()
    }

    /// A frozen DDPG policy acts as the learner did when it was frozen, and goes on doing so
    /// while the learner's own actions move with training.
    #[test]
    fn a_frozen_ddpg_policy_keeps_the_actions_it_was_frozen_with() {
        let (dim, n) = (4, 8);
        let mut agent = Ddpg::new(dim, 3, DdpgConfig { batch_size: 16, ..DdpgConfig::default() }, 7);
        let obs = states(n, dim);
        let frozen = agent.frozen_policy();
        let before = agent.greedy_batch(&obs, n).unwrap();
        assert_eq!(frozen.greedy_batch(&obs, n).unwrap(), before);
        for (k, s) in obs.chunks(dim).cycle().take(64).enumerate() {
            let e = Experience {
                state: s.to_vec(),
                action: vec![0.9, -0.9, if k % 2 == 0 { 0.5 } else { -0.5 }],
                reward: 1.0,
                next_state: s.to_vec(),
                terminal: false,
            };
            agent.remember(&e).unwrap();
        }
        agent.train_offline(50).expect("enough experience to train");
        let after = agent.greedy_batch(&obs, n).unwrap();
        let moved = before.iter().zip(&after).map(|(a, b)| (a - b).abs()).fold(0.0, f32::max);
        assert!(moved > 1e-3, "training moved the learner ({moved})");
        assert_eq!(frozen.greedy_batch(&obs, n).unwrap(), before, "the frozen copy did not move");
        let again = agent.frozen_policy();
        assert_eq!(again.greedy_batch(&obs, n).unwrap(), after);
        assert!(!again.same(&frozen) && frozen.same(&frozen.clone()));
        assert!(frozen.greedy_batch(&obs[..dim * 2 - 1], 2).is_err(), "a short batch is refused");
    }

    /// A frozen PPO policy acts as the learner's greedy mean did, through cloning that moves it.
    #[test]
    fn a_frozen_ppo_policy_keeps_the_actions_it_was_frozen_with() {
        let (dim, n) = (4, 8);
        let mut agent = Ppo::new(dim, PpoActions::Continuous(3), PpoConfig::default(), 3);
        let obs = states(n, dim);
        let frozen = agent.frozen_policy();
        let before = agent.greedy_batch(&obs, n).unwrap();
        assert_eq!(frozen.greedy_batch(&obs, n).unwrap(), before);
        let targets: Vec<f32> = (0..n).flat_map(|_| [0.8, -0.8, 0.3]).collect();
        agent.imitate(&obs, &targets, n, 20).unwrap();
        let after = agent.greedy_batch(&obs, n).unwrap();
        let moved = before.iter().zip(&after).map(|(a, b)| (a - b).abs()).fold(0.0, f32::max);
        assert!(moved > 1e-3, "cloning moved the learner ({moved})");
        assert_eq!(frozen.greedy_batch(&obs, n).unwrap(), before);
    }
}
