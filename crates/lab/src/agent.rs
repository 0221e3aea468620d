//! The agent factory (a fresh learner for this project's autoscaling environment, or one loaded
//! from a checkpoint) and the RL policy that serves a checkpoint through the same loop as the
//! rule-based recommenders.

use std::fmt;
use std::path::Path;
use std::str::FromStr;

use aware_agents::Agent;
use aware_agents::Checkpoint;
use aware_agents::ddpg::{Ddpg, DdpgConfig};
use aware_agents::dqn::{Dqn, DqnConfig};
use aware_agents::ppo::{Ppo, PpoActions, PpoConfig};
use aware_agents::tabular::{QTable, QTableConfig};
use aware_baselines::MultidimPodAutoscaler;
use aware_core::{Observation, Profile, Recommendation, Recommender, RecommenderError, Space};
use aware_env::{ActionDecoder, ActionKind, DISCRETE_ACTIONS};
use aware_env::{STATE_DIM, StateEncoder};
use aware_sim::CONTAINER;

use crate::{LabError, ParseError};

/// The learner of a continuous-action policy that imitates a rule-based fallback and then
/// learns: the lifecycle's agent (`aware run --agent`) and the meta-learner's base learner
/// (`aware train-meta --base-learner`, `aware experiment fig8 --base-learner`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Learner {
    /// DDPG (AWARE's): TD3+BC learns from the fallback's transitions in its replay.
    Ddpg,
    /// PPO (FLASH's, SIMPPO's): behaviour-clones the fallback, then learns on-policy.
    Ppo,
}

impl Learner {
    pub fn name(self) -> &'static str {
        match self {
            Learner::Ddpg => "ddpg",
            Learner::Ppo => "ppo",
        }
    }
}

impl std::fmt::Display for Learner {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}

impl std::str::FromStr for Learner {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        match s {
            "ddpg" => Ok(Learner::Ddpg),
            "ppo" => Ok(Learner::Ppo),
            other => Err(format!("unknown learner '{other}' (expected ddpg or ppo)")),
        }
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum Algorithm {
    Ddpg,
    Ppo,
    Dqn,
    D3qn,
    Qtable,
}

impl Algorithm {
    pub const ALL: [Algorithm; 5] =
        [Algorithm::Ddpg, Algorithm::Ppo, Algorithm::Dqn, Algorithm::D3qn, Algorithm::Qtable];

    /// The name checkpoints and reports use.
    pub fn name(self) -> &'static str {
        match self {
            Algorithm::Ddpg => "ddpg",
            Algorithm::Ppo => "ppo",
            Algorithm::Dqn => "dqn",
            Algorithm::D3qn => "d3qn",
            Algorithm::Qtable => "qtable",
        }
    }

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
            Algorithm::Ddpg => kind != ActionKind::Discrete,
            Algorithm::Ppo => true,
            _ => kind == ActionKind::Discrete,
        }
    }
}

impl fmt::Display for Algorithm {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

impl FromStr for Algorithm {
    type Err = ParseError;
    fn from_str(s: &str) -> Result<Self, ParseError> {
        Algorithm::ALL.into_iter().find(|a| a.name() == s).ok_or_else(|| {
            let names: Vec<_> = Algorithm::ALL.iter().map(|a| a.name()).collect();
            ParseError::new(s, format!("unknown algorithm (expected one of {})", names.join(", ")))
        })
    }
}

/// A fresh agent for this project's environment (state [`STATE_DIM`], actions per `kind`).
pub fn new_agent(algorithm: Algorithm, kind: ActionKind, seed: u64) -> Result<Box<dyn Agent>, LabError> {
    if !algorithm.supports(kind) {
        return Err(LabError::input(
            "--action-space",
            format!("{algorithm} cannot act in the {} action space", kind.name()),
        ));
    }
    Ok(match algorithm {
        Algorithm::Ddpg => Box::new(Ddpg::new(STATE_DIM, 3, autoscaling_ddpg(), seed)),
        Algorithm::Ppo => {
            let actions = match kind {
                ActionKind::Discrete => PpoActions::Discrete(DISCRETE_ACTIONS),
                ActionKind::Continuous | ActionKind::Relative => PpoActions::Continuous(3),
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

/// An agent loaded from a checkpoint, with what it was trained for.
pub struct Loaded {
    pub agent: Box<dyn Agent>,
    pub kind: ActionKind,
    /// Transitions it has learned from so far.
    pub training_step: u64,
}

/// Loads whichever agent the checkpoint holds, checked against this project's spaces.
pub fn load_agent(dir: &Path) -> Result<Loaded, LabError> {
    let meta = Checkpoint::read_metadata(dir).map_err(aware_agents::AgentError::from)?;
    let kind = action_kind(&meta.action_space);
    let agent = aware_agents::load(dir, &StateEncoder::space(), &kind.space())?;
    Ok(Loaded { agent, kind, training_step: meta.training_step })
}

/// A trained agent as a `Recommender`: it encodes the observation, acts greedily and decodes
/// the action. An observation the encoder refuses (NaN, missing samples) never reaches the
/// network: the MPA default answers instead, and the fallback is counted with its reason.
pub struct RlRecommender {
    name: String,
    agent: Box<dyn Agent>,
    encoder: StateEncoder,
    decoder: ActionDecoder,
    previous_arrival: Option<f64>,
    fallback: MultidimPodAutoscaler,
    fallbacks: u64,
    last_fallback_reason: Option<String>,
}

impl RlRecommender {
    pub fn new(dir: &Path, profile: &Profile, slo_p99_ms: Option<f64>) -> Result<Self, LabError> {
        let Loaded { agent, kind, .. } = load_agent(dir)?;
        Ok(Self {
            name: format!("rl:{}", dir.display()),
            encoder: StateEncoder {
                bounds: profile.bounds.clone(),
                latency_slo_ms: profile.slo.latency_p99_ms.or(slo_p99_ms),
                throughput_slo_rps: profile.slo.throughput_rps,
            },
            decoder: ActionDecoder {
                kind,
                bounds: profile.bounds.clone(),
                container: CONTAINER.into(),
                cpu_request_ratio: 1.0,
            },
            agent,
            previous_arrival: None,
            fallback: MultidimPodAutoscaler::from_profile(profile, false),
            fallbacks: 0,
            last_fallback_reason: None,
        })
    }

    /// Intervals in which the MPA default answered because the observation was refused.
    pub fn fallbacks(&self) -> u64 {
        self.fallbacks
    }

    pub fn last_fallback_reason(&self) -> Option<&str> {
        self.last_fallback_reason.as_deref()
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
                self.last_fallback_reason = Some(reason.to_string());
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
        let decoded = self
            .decoder
            .decode(&action, obs.desired_replicas, &obs.template)
            .map_err(|e| RecommenderError::Other(e.to_string()))?;
        Ok(decoded.recommendation)
    }

    /// The agent keeps its weights; the fallback restarts and the load history is dropped.
    fn restart(&mut self) {
        self.fallback.restart();
        self.previous_arrival = None;
    }
}

/// DDPG for the autoscaling environment: AWARE's Table 2, but the first `warmup` (1,000)
/// actions uniform over the whole action box (Stable-Baselines3's `learning_starts`), so the
/// critic has seen what starving and over-provisioning cost before the actor follows it; with
/// Table 2 alone the actor drove every knob to its minimum on `experiment agents` and never
/// recovered.
pub fn autoscaling_ddpg() -> DdpgConfig {
    DdpgConfig { uniform_warmup: true, ..DdpgConfig::default() }
}
