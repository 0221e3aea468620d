//! Building and loading agents for this project's environment for `train`, and the RL `Recommender` that serves
//! a checkpoint through the same loop as the rule-based policies.

use std::path::Path;

use anyhow::{Result, bail};
use aware_agents::Agent;
use aware_agents::checkpoint::Checkpoint;
use aware_agents::ddpg::{Ddpg, DdpgConfig};
use aware_agents::dqn::{Dqn, DqnConfig};
use aware_agents::ppo::{Ppo, PpoActions, PpoConfig};
use aware_agents::tabular::{QTable, QTableConfig};
use aware_baselines::MultidimPodAutoscaler;
use aware_core::{Observation, Profile, Recommendation, Recommender, RecommenderError, Space};
use aware_env::action::{ActionDecoder, ActionKind, DISCRETE_ACTIONS};
use aware_env::{STATE_DIM, StateEncoder};
use aware_sim::CONTAINER;

#[derive(clap::ValueEnum, Clone, Copy, Debug, PartialEq, Eq)]
pub enum Algorithm {
    Ddpg,
    Ppo,
    Dqn,
    D3qn,
    Qtable,
}

impl Algorithm {
    /// The action space an algorithm trains in unless told otherwise: DDPG is continuous,
    /// PPO discrete as in SIMPPO, the value-based learners can only be discrete.
    pub fn default_actions(self) -> ActionKind {
        match self {
            Algorithm::Ddpg => ActionKind::Continuous,
            _ => ActionKind::Discrete,
        }
    }

    pub fn supports(self, kind: ActionKind) -> bool {
        match self {
            Algorithm::Ddpg => kind == ActionKind::Continuous,
            Algorithm::Ppo => true,
            _ => kind == ActionKind::Discrete,
        }
    }
}

/// A fresh agent for this project's environment (state [`STATE_DIM`], actions per `kind`).
pub fn new_agent(algorithm: Algorithm, kind: ActionKind, seed: u64) -> Result<Box<dyn Agent>> {
    if !algorithm.supports(kind) {
        bail!("--action-space: {algorithm:?} cannot act in a {kind:?} action space");
    }
    Ok(match algorithm {
        Algorithm::Ddpg => Box::new(Ddpg::new(STATE_DIM, 3, DdpgConfig::default(), seed)),
        Algorithm::Ppo => {
            let actions = match kind {
                ActionKind::Discrete => PpoActions::Discrete(DISCRETE_ACTIONS),
                ActionKind::Continuous => PpoActions::Continuous(3),
            };
            Box::new(Ppo::new(STATE_DIM, actions, PpoConfig::default(), seed))
        }
        Algorithm::Dqn => Box::new(Dqn::new(STATE_DIM, DISCRETE_ACTIONS, DqnConfig::dqn(), seed)),
        Algorithm::D3qn => Box::new(Dqn::new(STATE_DIM, DISCRETE_ACTIONS, DqnConfig::d3qn(), seed)),
        Algorithm::Qtable => Box::new(QTable::new(STATE_DIM, DISCRETE_ACTIONS, QTableConfig::default(), seed)),
    })
}

/// The action kind of a space this project's decoder produces.
pub fn action_kind(space: &Space) -> ActionKind {
    match space {
        Space::Discrete { .. } => ActionKind::Discrete,
        _ => ActionKind::Continuous,
    }
}

/// Loads whichever agent the checkpoint holds, checked against this project's spaces.
pub fn load_agent(dir: &Path) -> Result<(Box<dyn Agent>, ActionKind)> {
    let meta = Checkpoint::read_metadata(dir)?;
    let kind = action_kind(&meta.action_space);
    Ok((aware_agents::agent::load(dir, &StateEncoder::space(), &kind.space())?, kind))
}

/// A trained agent as a `Recommender`: it encodes the observation, acts greedily and decodes
/// the action. An observation the encoder refuses (NaN, missing samples) never reaches the
/// network: the MPA default answers instead, and the fallback is counted.
pub struct RlRecommender {
    name: String,
    agent: Box<dyn Agent>,
    encoder: StateEncoder,
    decoder: ActionDecoder,
    previous_arrival: Option<f64>,
    fallback: MultidimPodAutoscaler,
    pub fallbacks: u64,
}

impl RlRecommender {
    pub fn new(dir: &Path, profile: &Profile, slo_p99_ms: Option<f64>) -> Result<Self> {
        let (agent, kind) = load_agent(dir)?;
        Ok(Self {
            name: format!("rl:{}", dir.display()),
            encoder: StateEncoder {
                bounds: profile.bounds.clone(),
                latency_slo_ms: profile.slo.latency_p99_ms.or(slo_p99_ms),
                throughput_slo_rps: profile.slo.throughput_rps,
            },
            decoder: ActionDecoder { kind, bounds: profile.bounds.clone(), container: CONTAINER.into() },
            agent,
            previous_arrival: None,
            fallback: MultidimPodAutoscaler::from_profile(profile, false),
            fallbacks: 0,
        })
    }
}

impl Recommender for RlRecommender {
    fn name(&self) -> &str {
        &self.name
    }

    fn recommend(&mut self, obs: &Observation) -> Result<Recommendation, RecommenderError> {
        let state = match self.encoder.encode(obs, self.previous_arrival) {
            Ok(s) => s,
            Err(reason) => {
                self.fallbacks += 1;
                eprintln!("{}: falling back to mpa: {reason}", self.name);
                return self.fallback.recommend(obs);
            }
        };
        self.previous_arrival = Some(obs.arrival_rate);
        // The fallback keeps its history current so a hand-over never starts it cold.
        let _ = self.fallback.recommend(obs);
        let action = self
            .agent
            .act(std::slice::from_ref(&state), false)
            .map_err(|e| RecommenderError::BadObservation(e.to_string()))?
            .remove(0);
        let decoded =
            self.decoder.decode(&action, obs.desired_replicas, &obs.template).map_err(RecommenderError::Other)?;
        Ok(decoded.recommendation)
    }
}
