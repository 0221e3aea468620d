//! The base learner a meta-learner conditions: any agent that acts in a continuous action box
//! on a batch of states, learns from transitions, and gives the gradient of its loss with
//! respect to its input (through which the embedding part of that input is meta-trained).
//! DDPG (AWARE's) and PPO (FLASH's) implement it.

use aware_agents::ddpg::Ddpg;
use aware_agents::ppo::Ppo;
use aware_agents::{Agent, AgentError, Batch};

pub trait BaseLearner: Agent {
    /// Width of the states it reads (observation ⊕ embedding).
    fn state_dim(&self) -> usize;

    /// Dimensions of its continuous action.
    fn action_dim(&self) -> usize;

    /// One action per row of the row-major `states` (`n` rows), exploring where `explore`
    /// says, in one batched pass.
    fn act_rows(&mut self, states: &[f32], n: usize, explore: bool) -> Result<Vec<Vec<f32>>, AgentError>;

    /// The gradient of its learning loss on `batch` with respect to `batch.states`, row-major,
    /// its parameters untouched.
    fn state_gradient(&self, batch: &Batch) -> Result<Vec<f32>, AgentError>;

    /// Whether it learns from transitions it did not choose (the fallback's probes): an
    /// off-policy learner's replay does, an on-policy learner's update must not.
    fn learns_off_policy(&self) -> bool;

    /// Starts from what the fallback did: `actions` it took in `states` (`n` rows each). An
    /// on-policy learner behaviour-clones them and, with `anchor`, keeps them as an anchor for
    /// its later updates in place of any before (PPO: [`ANCHOR_WEIGHT`]; without `anchor` it
    /// drops any it had); an off-policy one has them in its replay already (DDPG's TD3+BC term
    /// keeps it near them) and does nothing here.
    fn imitate(&mut self, states: &[f32], actions: &[f32], n: usize, anchor: bool) -> Result<(), AgentError>;

    /// The exploration it adapts to a new app with: DDPG's noise σ (0: none), PPO's Gaussian σ
    /// (which it goes on learning; it must be positive). Refused when it is not a number it
    /// can take.
    fn set_exploration(&mut self, sigma: f32) -> Result<(), AgentError>;
}

/// Passes over the fallback's probe transitions when a PPO base learner behaviour-clones them
/// (minibatches of 64 at its learning rate). Measured on `aware experiment fig8 --quick`, seeds
/// 1–10: at 20 passes the cloned policy started some unseen apps far below the fallback (seed
/// 2: −12 against r* 55), the whole fig8 goal held on 2 seeds and AWARE's SLO violations were
/// at most TL's on 6; at 100 (final squared error 0.0004–0.0009) on 4 and 8.
pub const IMITATION_EPOCHS: usize = 100;

/// Weight of the behaviour anchor a PPO base learner keeps on the fallback's probes it cloned
/// (DAPG's augmented loss, [`Ppo::set_behaviour_anchor`]; the on-policy counterpart of the
/// DDPG base learner's TD3+BC term). Without it a cloned policy that started an unseen app at
/// or above the bar drifted off it while adapting (`aware experiment fig8 --quick`, seed 9:
/// 59.3 against r* 54.9 at first, then −10.9 and 43–57). Measured on fig8 `--quick`, seeds
/// 1–10: at weight 0.3 and 1 the whole fig8 goal held on six seeds (on four without the
/// anchor), and at 1 AWARE had fewer SLO violations than at 0.3 on nine seeds of ten. The
/// anchor is set only while the meta-learner is frozen ([`crate::MetaDriver::imitate_recent`]):
/// its states carry the embeddings of the moment it is set, which in pool training go on
/// moving. Anchoring in pool training as well (seeds 1–14) reached the whole goal on 6 seeds
/// against 8 for adaptation alone, with more SLO violations on 10 of 14.
pub const ANCHOR_WEIGHT: f32 = 1.0;

/// A base learner whose training a pool run can stop and take up again bit for bit
/// (`aware train-meta --resume`): everything it goes on from, written down and read back.
pub trait Resumable: BaseLearner + Sized {
    /// Its training state ([`aware_agents::DdpgTraining`], [`aware_agents::PpoTraining`]).
    type Training: serde::Serialize + serde::de::DeserializeOwned + Clone + std::fmt::Debug + PartialEq;

    /// Everything its training goes on from.
    fn training_state(&self) -> Self::Training;

    /// [`Resumable::training_state`] with its large parts (a replay buffer) moved in, not
    /// copied; the learner is without them until [`Resumable::end_lending`].
    fn lend_training_state(&mut self) -> Self::Training;

    /// Takes back what [`Resumable::lend_training_state`] lent.
    fn end_lending(&mut self, state: Self::Training);

    /// The learner `state` was taken from, as it was; refused, naming the part, when no learner
    /// could have had it.
    fn resume(state: Self::Training) -> Result<Self, AgentError>;
}

impl Resumable for Ddpg {
    type Training = aware_agents::DdpgTraining;
    fn training_state(&self) -> Self::Training {
        Ddpg::training_state(self)
    }
    fn lend_training_state(&mut self) -> Self::Training {
        Ddpg::lend_training_state(self)
    }
    fn end_lending(&mut self, state: Self::Training) {
        Ddpg::end_lending(self, state)
    }
    fn resume(state: Self::Training) -> Result<Self, AgentError> {
        Ddpg::resume(state)
    }
}

impl Resumable for Ppo {
    type Training = aware_agents::PpoTraining;
    fn training_state(&self) -> Self::Training {
        Ppo::training_state(self)
    }
    fn lend_training_state(&mut self) -> Self::Training {
        Ppo::lend_training_state(self)
    }
    fn end_lending(&mut self, state: Self::Training) {
        Ppo::end_lending(self, state)
    }
    fn resume(state: Self::Training) -> Result<Self, AgentError> {
        Ppo::resume(state)
    }
}

impl BaseLearner for Ddpg {
    fn state_dim(&self) -> usize {
        Ddpg::state_dim(self)
    }

    fn action_dim(&self) -> usize {
        Ddpg::action_dim(self)
    }

    fn act_rows(&mut self, states: &[f32], n: usize, explore: bool) -> Result<Vec<Vec<f32>>, AgentError> {
        self.act_batch(states, n, &vec![explore; n])
    }

    /// The critic's TD loss ([`Ddpg::state_gradient`]).
    fn state_gradient(&self, batch: &Batch) -> Result<Vec<f32>, AgentError> {
        Ddpg::state_gradient(self, batch)
    }

    fn learns_off_policy(&self) -> bool {
        true
    }

    fn imitate(&mut self, _states: &[f32], _actions: &[f32], _n: usize, _anchor: bool) -> Result<(), AgentError> {
        Ok(())
    }

    fn set_exploration(&mut self, sigma: f32) -> Result<(), AgentError> {
        if !(sigma.is_finite() && sigma >= 0.0) {
            return Err(AgentError::Invalid(format!("exploration σ {sigma} is not a non-negative number")));
        }
        self.config.noise_sigma = sigma;
        Ok(())
    }
}

impl BaseLearner for Ppo {
    fn state_dim(&self) -> usize {
        Ppo::state_dim(self)
    }

    fn action_dim(&self) -> usize {
        match self.action_space() {
            aware_core::Space::Box { low, .. } => low.len(),
            _ => 0,
        }
    }

    /// Refused for a discrete policy: the meta-learner's steps and the fallback's probes are
    /// read in the continuous action box.
    fn act_rows(&mut self, states: &[f32], n: usize, explore: bool) -> Result<Vec<Vec<f32>>, AgentError> {
        if !matches!(self.action_space(), aware_core::Space::Box { .. }) {
            return Err(AgentError::Invalid(
                "a meta-learner's base learner acts in a continuous action box; this PPO policy is discrete".into(),
            ));
        }
        let width = Ppo::state_dim(self);
        aware_agents::check_batch(states, n, width)?;
        let rows: Vec<Vec<f32>> = states.chunks(width).map(<[f32]>::to_vec).collect();
        self.act(&rows, explore)
    }

    /// The actor-critic loss ([`Ppo::state_gradient`]).
    fn state_gradient(&self, batch: &Batch) -> Result<Vec<f32>, AgentError> {
        Ppo::state_gradient(self, batch)
    }

    fn learns_off_policy(&self) -> bool {
        false
    }

    /// Behaviour cloning ([`Ppo::imitate`], [`IMITATION_EPOCHS`] passes), then, with
    /// `anchor`, the same demonstrations anchor its updates ([`Ppo::set_behaviour_anchor`],
    /// [`ANCHOR_WEIGHT`]).
    fn imitate(&mut self, states: &[f32], actions: &[f32], n: usize, anchor: bool) -> Result<(), AgentError> {
        Ppo::imitate(self, states, actions, n, IMITATION_EPOCHS)?;
        let weight = if anchor { ANCHOR_WEIGHT } else { 0.0 };
        self.set_behaviour_anchor(states, actions, n, weight)
    }

    /// Its Gaussian's σ ([`Ppo::set_exploration_std`]).
    fn set_exploration(&mut self, sigma: f32) -> Result<(), AgentError> {
        self.set_exploration_std(sigma)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use aware_agents::ppo::{PpoActions, PpoConfig};

    /// Both learners act row by row on a flat batch; a discrete PPO policy and a batch of the
    /// wrong width are refused with a reason.
    #[test]
    fn base_learners_act_on_flat_batches_and_refuse_what_they_cannot_read() {
        let rows = [0.1f32, 0.2, -0.3, 0.4, 0.0, 0.9];
        let mut ddpg = Ddpg::new(3, 2, Default::default(), 1);
        let mut ppo = Ppo::new(3, PpoActions::Continuous(2), PpoConfig::default(), 1);
        for actions in [ddpg.act_rows(&rows, 2, false).unwrap(), ppo.act_rows(&rows, 2, false).unwrap()] {
            assert_eq!(actions.len(), 2);
            assert!(actions.iter().all(|a| a.len() == 2 && a.iter().all(|x| x.is_finite())));
        }
        assert_eq!((BaseLearner::action_dim(&ppo), BaseLearner::state_dim(&ppo)), (2, 3));
        assert!(ddpg.learns_off_policy() && !ppo.learns_off_policy());
        let err = ppo.act_rows(&rows[..5], 2, true).unwrap_err().to_string();
        assert!(err.contains("5 values, 2 × 3 expected"), "{err}");
        assert!(ddpg.set_exploration(0.0).is_ok() && ddpg.set_exploration(-0.1).is_err());
        assert!(ppo.set_exploration(0.05).is_ok() && ppo.set_exploration(0.0).is_err());
        assert!(ppo.set_exploration(f32::NAN).is_err());
        let mut discrete = Ppo::new(3, PpoActions::Discrete(7), PpoConfig::default(), 1);
        let err = discrete.act_rows(&rows, 2, true).unwrap_err().to_string();
        assert!(err.contains("discrete"), "{err}");
    }
}
