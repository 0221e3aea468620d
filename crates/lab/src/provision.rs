//! The cloud-provisioning problem (an auto-scaling group billed by the started instance-hour,
//! penalised for hot CPU): training agents on it and comparing them with CloudWatch step scaling
//! on held-out days, through the one rollout loop.

use std::fmt;
use std::path::PathBuf;
use std::str::FromStr;

use aware_agents::Agent;
use aware_agents::Checkpoint;
use aware_agents::dqn::{Dqn, DqnConfig, TimeWindow};
use aware_agents::ppo::{Ppo, PpoActions, PpoConfig};
use aware_baselines::ThresholdStepScaling;
use aware_core::{Action, Env, Space, StepInfo, VecStep};
use aware_env::{Control, ObservationWindow};
use aware_sim::provisioning::{
    ACTIONS, FEATURES, ProvisioningConfig, ProvisioningEnv, STEP_S, bins_from_trace, synthetic_bins,
};
use serde::Serialize;

use crate::output::{create_dir, refuse_checkpoint, write_training_outputs};
use crate::progress::Progress;
use crate::rollout::{Arena, Driver, Learner, rollout};
use crate::{LabError, ParseError};

/// Five-minute bins per day.
const BINS_PER_DAY: usize = 288;

/// The load both training and comparison split into training and held-out days.
#[derive(Debug, Clone)]
pub struct LoadSpec {
    /// Days of synthetic 5-minute load (ignored with `trace`).
    pub days: u32,
    /// The last days of the series, never trained on.
    pub test_days: u32,
    /// Mean requests per 5-minute bin before the ×20 scaling (synthetic load).
    pub mean_count: f64,
    /// Replay the first series of a trace file instead.
    pub trace: Option<PathBuf>,
    /// Seed for the synthetic series, episode starts and measurement noise.
    pub seed: u64,
}

/// The load split into training and held-out days, sized on the training days only.
pub struct Split {
    pub train: Vec<f64>,
    pub test: Vec<f64>,
    pub config: ProvisioningConfig,
}

impl LoadSpec {
    pub fn split(&self) -> Result<Split, LabError> {
        let bins = match &self.trace {
            Some(path) => {
                let traces = aware_sim::load_traces(path)?;
                let first = traces.first().ok_or_else(|| LabError::io(path, "no series"))?;
                bins_from_trace(first)
            }
            None => {
                aware_sim::provisioning::check_mean_count(self.mean_count)
                    .map_err(|reason| LabError::input("--mean-count", reason))?;
                synthetic_bins(self.days as usize, self.mean_count, self.seed)
            }
        };
        let test = self.test_days as usize * BINS_PER_DAY;
        if bins.len() < test + BINS_PER_DAY {
            let held_out = format!(
                "{} days held out (--test-days) leave less than one training day in {} five-minute bins ({:.1} days)",
                self.test_days,
                bins.len(),
                bins.len() as f64 / BINS_PER_DAY as f64
            );
            // Blame what the user can change: a trace that is too short, or --days.
            return Err(match &self.trace {
                Some(path) => LabError::io(path, format!("too short: {held_out}")),
                None => LabError::input("--days", format!("{}: {held_out}", self.days)),
            });
        }
        let (train, test) = bins.split_at(bins.len() - test);
        Ok(Split { config: ProvisioningConfig::sized_for(train), train: train.to_vec(), test: test.to_vec() })
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum ProvisionAlgorithm {
    /// Dueling Double DQN over the observation window through a 1-D convolution (the paper's).
    D3qn,
    Dqn,
    Ppo,
}

fn observation_space(window: usize) -> Space {
    Space::Box { low: vec![0.0; window * FEATURES], high: vec![1.0; window * FEATURES] }
}

fn new_agent(algo: ProvisionAlgorithm, window: usize, seed: u64) -> Box<dyn Agent> {
    let dim = window * FEATURES;
    match algo {
        ProvisionAlgorithm::D3qn => {
            let window = TimeWindow { steps: window, features: FEATURES, channels: 16, kernel: window.min(3) };
            let config = DqnConfig { window: Some(window), epsilon_decay_steps: 20_000, ..DqnConfig::d3qn() };
            Box::new(Dqn::new(dim, ACTIONS, config, seed))
        }
        ProvisionAlgorithm::Dqn => {
            Box::new(Dqn::new(dim, ACTIONS, DqnConfig { epsilon_decay_steps: 20_000, ..DqnConfig::dqn() }, seed))
        }
        ProvisionAlgorithm::Ppo => Box::new(Ppo::new(dim, PpoActions::Discrete(ACTIONS), PpoConfig::default(), seed)),
    }
}

/// The provisioning environment as a one-application arena whose state is the last `window`
/// observations; it keeps the bill of what happened.
pub struct ProvisioningArena {
    env: ProvisioningEnv,
    history: ObservationWindow,
    /// The bill since the arena was made.
    pub outcome: Outcome,
    instances: u32,
}

impl ProvisioningArena {
    pub fn new(bins: Vec<f64>, config: ProvisioningConfig, window: usize) -> Result<Self, LabError> {
        let env = ProvisioningEnv::new(bins, config).map_err(|e| LabError::input("load", e.to_string()))?;
        Ok(Self { env, history: ObservationWindow::new(window), outcome: Outcome::default(), instances: 0 })
    }
}

impl Arena for ProvisioningArena {
    fn num_apps(&self) -> usize {
        1
    }

    fn interval_s(&self) -> f64 {
        STEP_S
    }

    fn reset(&mut self, seed: u64) -> Result<Vec<(Vec<f32>, StepInfo)>, LabError> {
        let (first, info) = self.env.reset(Some(seed))?;
        self.instances = self.env.stats().instances;
        Ok(vec![(self.history.reset(&first), info)])
    }

    fn step(&mut self, controls: &[Control]) -> Result<VecStep, LabError> {
        let Some(Control::Action(action)) = controls.first() else {
            return Err(LabError::input("control", "the provisioning environment takes one action"));
        };
        let mut step = self.env.step(action)?;
        step.observation = self.history.push(&step.observation);
        let s = self.env.stats();
        let o = &mut self.outcome;
        o.steps += 1;
        o.reward += step.reward;
        o.cost += s.cost;
        o.penalty += s.penalty;
        o.penalised_steps += (s.penalty > 0.0) as u64;
        o.steps_at_90_pct += (s.cpu_utilisation_pct >= 90.0) as u64;
        o.mean_instances += s.instances as f64;
        o.mean_cpu_pct += s.cpu_utilisation_pct;
        o.dropped_requests += s.dropped;
        o.scaling_actions += (s.instances != self.instances) as u64;
        self.instances = s.instances;
        Ok(VecStep { steps: vec![step] })
    }
}

/// CloudWatch step scaling on the last interval's CPU (−2…+2 instances).
pub struct StepScaling(pub ThresholdStepScaling);

impl Driver for StepScaling {
    fn decide(
        &mut self,
        _arena: &dyn Arena,
        _states: &[Vec<f32>],
        infos: &[StepInfo],
    ) -> Result<Vec<Control>, LabError> {
        Ok(infos
            .iter()
            .map(|info| {
                Control::Action(Action::Discrete((self.0.step(info.cpu_utilisation).clamp(-2, 2) + 2) as usize))
            })
            .collect())
    }
}

/// What `provision train` is asked to do.
#[derive(Debug, Clone)]
pub struct ProvisionTrainSpec {
    pub algorithm: ProvisionAlgorithm,
    pub load: LoadSpec,
    pub episodes: u64,
    /// Observations (5-minute steps) the agent sees at once.
    pub window: u32,
    pub out: PathBuf,
}

#[derive(Debug, Clone, Serialize)]
pub struct ProvisionTrainReport {
    pub algorithm: String,
    pub window: u32,
    pub episodes: u64,
    pub training_days: usize,
    pub instance_capacity_rps: f64,
    pub first_episode_reward: f64,
    pub last_10_episode_reward: f64,
    pub checkpoint: String,
}

/// Trains on the training days (one-day episodes from random starts) and writes the checkpoint,
/// learning curve and summary into `spec.out`.
pub fn train(spec: &ProvisionTrainSpec, progress: &dyn Progress) -> Result<ProvisionTrainReport, LabError> {
    refuse_checkpoint("--out", &spec.out)?;
    // One process at a time writes the directory; checked again once it is ours.
    create_dir(&spec.out)?;
    let _lock = crate::output::lock_dir(&spec.out)?;
    refuse_checkpoint("--out", &spec.out)?;
    let split = spec.load.split()?;
    let window = spec.window as usize;
    let mut arena = ProvisioningArena::new(split.train.clone(), split.config.clone(), window)?;
    let mut learner = Learner::new(new_agent(spec.algorithm, window, spec.load.seed), true, true);
    progress.start(spec.episodes, "training");
    let mut curve = Vec::new();
    let mut steps = 0u64;
    for episode in 0..spec.episodes {
        let seed = spec.load.seed.wrapping_mul(1_000_003).wrapping_add(episode);
        let totals = rollout(&mut arena, &mut learner, seed, u64::MAX, &mut [], &crate::progress::Silent)?;
        steps += totals.app_steps;
        curve.push(totals.reward);
        progress.message(&format!("ep {episode} r {:.2}", totals.reward));
        progress.inc(1);
    }
    progress.finish();
    let agent = learner.agent;
    create_dir(&spec.out)?;
    agent.save(&spec.out, &observation_space(window), steps)?;
    let mut csv = String::from("episode,reward\n");
    for (i, r) in curve.iter().enumerate() {
        csv.push_str(&format!("{i},{r}\n"));
    }
    let points: Vec<(f64, f64)> = curve.iter().enumerate().map(|(i, r)| (i as f64, *r)).collect();
    let last: Vec<f64> = curve.iter().rev().take(10).copied().collect();
    let report = ProvisionTrainReport {
        algorithm: agent.algorithm().into(),
        window: spec.window,
        episodes: spec.episodes,
        training_days: split.train.len() / BINS_PER_DAY,
        instance_capacity_rps: split.config.instance_capacity_rps,
        first_episode_reward: curve.first().copied().unwrap_or(0.0),
        last_10_episode_reward: last.iter().sum::<f64>() / last.len().max(1) as f64,
        checkpoint: spec.out.display().to_string(),
    };
    write_training_outputs(&spec.out, agent.algorithm(), &csv, &points, &report)?;
    Ok(report)
}

/// A provisioning policy as named on the command line: `threshold` or `rl:DIR` (a checkpoint
/// from `aware provision train`, read when the policy is built). The name parses on its own, so
/// an unknown one is a usage error before any work.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum ProvisionPolicyName {
    Threshold,
    Rl(PathBuf),
}

impl FromStr for ProvisionPolicyName {
    type Err = ParseError;
    fn from_str(s: &str) -> Result<Self, ParseError> {
        if s == "threshold" {
            return Ok(ProvisionPolicyName::Threshold);
        }
        match s.strip_prefix("rl:") {
            Some("") => Err(ParseError::new(s, "needs a checkpoint directory (rl:DIR)")),
            Some(dir) => Ok(ProvisionPolicyName::Rl(dir.into())),
            None => Err(ParseError::new(s, "unknown policy (expected threshold or rl:DIR)")),
        }
    }
}

impl fmt::Display for ProvisionPolicyName {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ProvisionPolicyName::Threshold => f.write_str("threshold"),
            ProvisionPolicyName::Rl(dir) => write!(f, "rl:{}", dir.display()),
        }
    }
}

/// A provisioning policy by name: `threshold` or `rl:DIR`.
#[non_exhaustive]
pub enum ProvisionPolicy {
    Threshold(ThresholdStepScaling),
    Agent { agent: Box<dyn Agent>, window: usize },
}

impl ProvisionPolicy {
    pub fn parse(spec: &str) -> Result<Self, LabError> {
        let name = spec.parse().map_err(|e: ParseError| LabError::input("--policies", e.to_string()))?;
        Self::build(&name)
    }

    /// The policy `name` names, its checkpoint read and checked.
    pub fn build(name: &ProvisionPolicyName) -> Result<Self, LabError> {
        let dir = match name {
            ProvisionPolicyName::Threshold => {
                return Ok(ProvisionPolicy::Threshold(ThresholdStepScaling {
                    min_replicas: 1,
                    max_replicas: 10,
                    steps: ThresholdStepScaling::default_steps(),
                }));
            }
            ProvisionPolicyName::Rl(dir) => dir.as_path(),
        };
        let meta = Checkpoint::read_metadata(dir).map_err(aware_agents::AgentError::from)?;
        let dim = meta.observation_space.dim();
        if dim == 0 || dim % FEATURES != 0 {
            return Err(LabError::input(
                "--policies",
                format!(
                    "{}: observation dimension {dim} is not a window of {FEATURES} provisioning metrics",
                    dir.display()
                ),
            ));
        }
        let window = dim / FEATURES;
        let agent = aware_agents::load(dir, &observation_space(window), &Space::Discrete { n: ACTIONS })?;
        Ok(ProvisionPolicy::Agent { agent, window })
    }
}

/// One policy's bill over the held-out days.
#[derive(Debug, Clone, Default, Serialize)]
pub struct Outcome {
    pub policy: String,
    pub steps: u64,
    pub reward: f64,
    pub cost: f64,
    pub penalty: f64,
    /// Steps at ≥ 70 % CPU (any penalty tier), and at ≥ 90 %.
    pub penalised_steps: u64,
    pub steps_at_90_pct: u64,
    pub mean_instances: f64,
    pub mean_cpu_pct: f64,
    pub dropped_requests: f64,
    /// Steps whose action changed the fleet.
    pub scaling_actions: u64,
}

#[derive(Debug, Serialize)]
pub struct ProvisionCompareReport {
    pub held_out_days: f64,
    pub step_seconds: f64,
    pub instance_capacity_rps: f64,
    pub price_per_hour: f64,
    pub policies: Vec<Outcome>,
}

/// Every policy over the held-out days with identical load and noise.
pub fn compare(
    load: &LoadSpec,
    policies: &[ProvisionPolicyName],
    progress: &dyn Progress,
) -> Result<ProvisionCompareReport, LabError> {
    crate::evaluate::check_policy_list(policies)?;
    let split = load.split()?;
    let config = ProvisioningConfig { episode_steps: split.test.len(), ..split.config.clone() };
    let parsed = policies
        .iter()
        .map(|p| Ok((p.to_string(), ProvisionPolicy::build(p)?)))
        .collect::<Result<Vec<_>, LabError>>()?;
    progress.start((parsed.len() * split.test.len()) as u64, "held-out days");
    let mut outcomes = Vec::new();
    for (name, policy) in parsed {
        let (mut driver, window): (Box<dyn Driver>, usize) = match policy {
            ProvisionPolicy::Threshold(t) => (Box::new(StepScaling(t)), 1),
            ProvisionPolicy::Agent { agent, window } => (Box::new(Learner::new(agent, false, false)), window),
        };
        let mut arena = ProvisioningArena::new(split.test.clone(), config.clone(), window)?;
        rollout(&mut arena, driver.as_mut(), load.seed, u64::MAX, &mut [], progress)?;
        let mut o = std::mem::take(&mut arena.outcome);
        o.policy = name;
        o.mean_instances /= o.steps.max(1) as f64;
        o.mean_cpu_pct /= o.steps.max(1) as f64;
        outcomes.push(o);
    }
    progress.finish();
    Ok(ProvisionCompareReport {
        held_out_days: split.test.len() as f64 / BINS_PER_DAY as f64,
        step_seconds: STEP_S,
        instance_capacity_rps: config.instance_capacity_rps,
        price_per_hour: config.price_per_hour,
        policies: outcomes,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_synthetic_load_beyond_any_trace_is_refused() {
        let spec = |mean_count| LoadSpec { days: 4, test_days: 1, mean_count, trace: None, seed: 1 };
        for bad in [1e300, f64::INFINITY, f64::NAN, 0.0, -5.0] {
            let err = spec(bad).split().err().unwrap_or_else(|| panic!("{bad} accepted")).to_string();
            assert!(err.starts_with("--mean-count: ") && err.contains("at most"), "{bad}: {err}");
        }
        let split = spec(1500.0).split().unwrap();
        assert_eq!((split.train.len(), split.test.len()), (3 * BINS_PER_DAY, BINS_PER_DAY));
    }
}
