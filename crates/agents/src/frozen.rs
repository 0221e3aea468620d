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
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
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

    /// The policy as bytes ([`FrozenPolicy::from_bytes`] reads them back): its weights, exactly,
    /// and how its outputs become an action. The same policy always gives the same bytes, so a
    /// hash of them names it.
    pub fn to_bytes(&self) -> Vec<u8> {
        let saved = Saved {
            format: SAVED_FORMAT,
            state_dim: self.state_dim,
            output: self.output,
            activation: self.net.activation(),
            layers: self
                .net
                .layers()
                .iter()
                .map(|(w, b, k, m)| SavedLayer { k: *k, m: *m, w: w.clone(), b: b.clone() })
                .collect(),
        };
        let mut out = Vec::new();
        ciborium::into_writer(&saved, &mut out).expect("writing to memory cannot fail");
        out
    }

    /// A policy [`FrozenPolicy::to_bytes`] wrote; what does not read as one (another format,
    /// layers that do not chain, weights that are not finite) is refused with the reason.
    pub fn from_bytes(bytes: &[u8]) -> Result<Self, AgentError> {
        let bad = |why: String| AgentError::Invalid(format!("not a frozen policy: {why}"));
        let saved: Saved = ciborium::from_reader(bytes).map_err(|e| bad(e.to_string()))?;
        if saved.format != SAVED_FORMAT {
            return Err(bad(format!("format {} (this build reads {SAVED_FORMAT})", saved.format)));
        }
        if saved.layers.is_empty() {
            return Err(bad("no layers".into()));
        }
        for (i, l) in saved.layers.iter().enumerate() {
            if l.k == 0 || l.m == 0 || l.k.checked_mul(l.m) != Some(l.w.len()) || l.b.len() != l.m {
                return Err(bad(format!(
                    "layer {i}: {} weights and {} biases for {} inputs and {} outputs",
                    l.w.len(),
                    l.b.len(),
                    l.k,
                    l.m
                )));
            }
            if let Some(j) = l.w.iter().chain(&l.b).position(|x| !x.is_finite()) {
                return Err(bad(format!("layer {i}: parameter {j} is not finite")));
            }
            if i > 0 && saved.layers[i - 1].m != l.k {
                return Err(bad(format!(
                    "layer {i} reads {} inputs, layer {} gives {}",
                    l.k,
                    i - 1,
                    saved.layers[i - 1].m
                )));
            }
        }
        if saved.layers[0].k > saved.state_dim {
            return Err(bad(format!("reads {} features of states of {}", saved.layers[0].k, saved.state_dim)));
        }
        let out = saved.layers.last().map_or(0, |l| l.m);
        if let Output::Argmax(a) = saved.output
            && a != out
        {
            return Err(bad(format!("{a} discrete actions from {out} outputs")));
        }
        let layers = saved.layers.into_iter().map(|l| (l.w, l.b, l.k, l.m)).collect();
        Ok(Self::new(FrozenMlp::from_layers_with(layers, saved.activation), saved.state_dim, saved.output))
    }

    /// Greedy actions for `n` row-major states, flat: what the policy's own greedy batch gave
    /// when it was frozen.
    pub fn greedy_batch(&self, obs: &[f32], n: usize) -> Result<Vec<f32>, AgentError> {
        check_batch(obs, n, self.state_dim)?;
        Ok(greedy_rows(&self.net, self.state_dim, self.output, obs, n))
    }
}

/// The version of [`FrozenPolicy::to_bytes`]'s layout this build writes and reads.
const SAVED_FORMAT: u32 = 1;

/// [`FrozenPolicy::to_bytes`]'s layout (CBOR: floats kept exactly).
#[derive(serde::Serialize, serde::Deserialize)]
struct Saved {
    format: u32,
    state_dim: usize,
    output: Output,
    activation: crate::net::Activation,
    layers: Vec<SavedLayer>,
}

#[derive(serde::Serialize, serde::Deserialize)]
struct SavedLayer {
    k: usize,
    m: usize,
    w: Vec<f32>,
    b: Vec<f32>,
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

    /// A frozen policy written as bytes reads back acting exactly as it did (DDPG's tanh, PPO's
    /// discrete argmax); bytes that are not one are refused, never read as a policy.
    #[test]
    fn a_frozen_policy_reads_back_from_its_bytes_acting_the_same() {
        let (dim, n) = (5, 16);
        let obs = states(n, dim);
        let ddpg = Ddpg::new(dim, 3, DdpgConfig::default(), 4).frozen_policy();
        let ppo = Ppo::new(dim, PpoActions::Discrete(4), PpoConfig::default(), 4).frozen_policy();
        for policy in [ddpg, ppo] {
            let bytes = policy.to_bytes();
            assert_eq!(bytes, policy.to_bytes(), "the same policy, the same bytes");
            let back = super::FrozenPolicy::from_bytes(&bytes).unwrap();
            assert_eq!(back.state_dim(), dim);
            assert_eq!(back.greedy_batch(&obs, n).unwrap(), policy.greedy_batch(&obs, n).unwrap());
            assert_eq!(back.to_bytes(), bytes);
            let cut = super::FrozenPolicy::from_bytes(&bytes[..bytes.len() / 2]).unwrap_err();
            assert!(cut.to_string().contains("not a frozen policy"), "{cut}");
        }
        // A weight that is not finite, and layers that do not chain, are named.
        let mut layers = vec![(vec![0.5; 6], vec![0.0; 2], 3, 2), (vec![0.1; 4], vec![0.0; 2], 2, 2)];
        let write = |layers: &Vec<crate::net::FrozenLinear>| {
            let saved = super::Saved {
                format: super::SAVED_FORMAT,
                state_dim: 3,
                output: super::Output::Tanh,
                activation: crate::net::Activation::Relu,
                layers: layers
                    .iter()
                    .map(|(w, b, k, m)| super::SavedLayer { k: *k, m: *m, w: w.clone(), b: b.clone() })
                    .collect(),
            };
            let mut out = Vec::new();
            ciborium::into_writer(&saved, &mut out).unwrap();
            super::FrozenPolicy::from_bytes(&out)
        };
        assert!(write(&layers).is_ok());
        layers[1].0[2] = f32::NAN;
        assert!(write(&layers).unwrap_err().to_string().contains("layer 1: parameter 2 is not finite"));
        layers[1] = (vec![0.1; 6], vec![0.0; 2], 3, 2);
        assert!(write(&layers).unwrap_err().to_string().contains("layer 1 reads 3 inputs, layer 0 gives 2"));
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
