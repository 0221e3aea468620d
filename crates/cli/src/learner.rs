//! The trainable agents behind one interface for `train`, and the RL `Recommender` that serves
//! a checkpoint through the same loop as the rule-based policies.

use std::path::Path;

use anyhow::{Context, Result, bail};
use aware_agents::ddpg::{Ddpg, DdpgConfig};
use aware_agents::dqn::{Dqn, DqnConfig};
use aware_agents::tabular::{QTable, QTableConfig};
use aware_agents::{AgentError, Experience};
use aware_baselines::MultidimPodAutoscaler;
use aware_core::{Action, Observation, Profile, Recommendation, Recommender, RecommenderError};
use aware_env::action::{ActionDecoder, ActionKind, DISCRETE_ACTIONS};
use aware_env::{STATE_DIM, StateEncoder};
use aware_sim::CONTAINER;

#[derive(clap::ValueEnum, Clone, Copy, Debug, PartialEq, Eq)]
pub enum Algorithm {
    Ddpg,
    Dqn,
    D3qn,
    Qtable,
}

pub enum Learner {
    Ddpg(Box<Ddpg>),
    Dqn(Box<Dqn>),
    QTable(Box<QTable>),
}

impl Learner {
    pub fn new(algorithm: Algorithm, seed: u64) -> Self {
        match algorithm {
            Algorithm::Ddpg => Learner::Ddpg(Box::new(Ddpg::new(STATE_DIM, 3, DdpgConfig::default(), seed))),
            Algorithm::Dqn => Learner::Dqn(Box::new(Dqn::new(STATE_DIM, DISCRETE_ACTIONS, DqnConfig::dqn(), seed))),
            Algorithm::D3qn => Learner::Dqn(Box::new(Dqn::new(STATE_DIM, DISCRETE_ACTIONS, DqnConfig::d3qn(), seed))),
            Algorithm::Qtable => {
                Learner::QTable(Box::new(QTable::new(STATE_DIM, DISCRETE_ACTIONS, QTableConfig::default(), seed)))
            }
        }
    }

    pub fn action_kind(&self) -> ActionKind {
        match self {
            Learner::Ddpg(_) => ActionKind::Continuous,
            _ => ActionKind::Discrete,
        }
    }

    pub fn act(&mut self, obs: &[f32], explore: bool) -> Result<Action, AgentError> {
        Ok(match self {
            Learner::Ddpg(a) => Action::Continuous(a.act(obs, explore)?),
            Learner::Dqn(a) => Action::Discrete(a.act(obs, explore)?),
            Learner::QTable(a) => Action::Discrete(a.act(obs, explore)?),
        })
    }

    pub fn learn(
        &mut self,
        state: &[f32],
        action: &Action,
        reward: f32,
        next: &[f32],
        terminal: bool,
    ) -> Result<(), AgentError> {
        let as_vec = match action {
            Action::Continuous(v) => v.clone(),
            Action::Discrete(i) => vec![*i as f32],
            Action::MultiDiscrete(v) => v.iter().map(|&i| i as f32).collect(),
        };
        let e = Experience { state: state.to_vec(), action: as_vec, reward, next_state: next.to_vec(), terminal };
        match self {
            Learner::Ddpg(a) => a.observe(&e).map(|_| ()),
            Learner::Dqn(a) => a.observe(&e).map(|_| ()),
            Learner::QTable(a) => a.learn(state, e.action[0] as usize, reward, next, terminal),
        }
    }

    /// Exploration rate, for progress reports.
    pub fn epsilon(&self) -> f32 {
        match self {
            Learner::Ddpg(a) => a.epsilon(),
            Learner::Dqn(a) => a.epsilon(),
            Learner::QTable(a) => a.epsilon(),
        }
    }

    pub fn save(&self, dir: &Path, step: u64) -> Result<(), AgentError> {
        let space = StateEncoder::space();
        match self {
            Learner::Ddpg(a) => a.save(dir, &space, step),
            Learner::Dqn(a) => a.save(dir, &space),
            Learner::QTable(a) => a.save(dir, &space),
        }
    }

    /// Loads whichever algorithm the checkpoint holds, for this project's environment.
    pub fn load(dir: &Path) -> Result<Self> {
        let meta = dir.join(aware_agents::checkpoint::METADATA);
        let text = std::fs::read_to_string(&meta).with_context(|| format!("{}: cannot read", meta.display()))?;
        let v: serde_json::Value =
            serde_json::from_str(&text).with_context(|| format!("{}: not JSON", meta.display()))?;
        let space = StateEncoder::space();
        Ok(match v["algorithm"].as_str() {
            Some("ddpg") => Learner::Ddpg(Box::new(Ddpg::load(dir, &space, 3, 0)?)),
            Some("dqn" | "d3qn") => Learner::Dqn(Box::new(Dqn::load(dir, &space, DISCRETE_ACTIONS, 0)?)),
            Some("qtable") => Learner::QTable(Box::new(QTable::load(dir, &space, DISCRETE_ACTIONS, 0)?)),
            other => bail!("{}: algorithm: unknown {other:?}", meta.display()),
        })
    }
}

/// A trained agent as a `Recommender`: it encodes the observation, acts greedily and decodes
/// the action. An observation the encoder refuses (NaN, missing samples) never reaches the
/// network: the MPA default answers instead, and the fallback is counted.
pub struct RlRecommender {
    name: String,
    learner: Learner,
    encoder: StateEncoder,
    decoder: ActionDecoder,
    previous_arrival: Option<f64>,
    fallback: MultidimPodAutoscaler,
    pub fallbacks: u64,
}

impl RlRecommender {
    pub fn new(dir: &Path, profile: &Profile, slo_p99_ms: Option<f64>) -> Result<Self> {
        let learner = Learner::load(dir)?;
        let kind = learner.action_kind();
        Ok(Self {
            name: format!("rl:{}", dir.display()),
            encoder: StateEncoder {
                bounds: profile.bounds.clone(),
                latency_slo_ms: profile.slo.latency_p99_ms.or(slo_p99_ms),
                throughput_slo_rps: profile.slo.throughput_rps,
            },
            decoder: ActionDecoder { kind, bounds: profile.bounds.clone(), container: CONTAINER.into() },
            learner,
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
        let action = self.learner.act(&state, false).map_err(|e| RecommenderError::BadObservation(e.to_string()))?;
        let decoded =
            self.decoder.decode(&action, obs.desired_replicas, &obs.template).map_err(RecommenderError::Other)?;
        Ok(decoded.recommendation)
    }
}
