//! `aware provision`: the cloud-provisioning problem (an auto-scaling group billed by the
//! started instance-hour, penalised for hot CPU) — train agents on it and compare them with
//! CloudWatch step scaling on held-out days.

use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::{Context, Result, bail};
use aware_agents::agent::action_values;
use aware_agents::checkpoint::Checkpoint;
use aware_agents::dqn::{Dqn, DqnConfig, TimeWindow};
use aware_agents::ppo::{Ppo, PpoActions, PpoConfig};
use aware_agents::{Agent, Experience};
use aware_baselines::ThresholdStepScaling;
use aware_core::{Action, Env, Space};
use aware_env::ObservationWindow;
use aware_sim::provisioning::{
    ACTIONS, FEATURES, ProvisioningConfig, ProvisioningEnv, STEP_S, bins_from_trace, synthetic_bins,
};
use serde::Serialize;

use super::{positive_f64, write_training_outputs};
use crate::progress;

#[derive(clap::Subcommand, Debug)]
pub enum Provision {
    /// Train an agent on the training days; writes a checkpoint and a learning curve.
    Train(TrainArgs),
    /// Run policies over the held-out days and compare their bills and penalties.
    Compare(CompareArgs),
}

/// The load both subcommands split into training and held-out days.
#[derive(clap::Args, Debug, Clone)]
pub struct LoadArgs {
    /// Days of synthetic 5-minute load (ignored with --trace).
    #[arg(long, default_value_t = 14, value_parser = clap::value_parser!(u32).range(2..=3650))]
    days: u32,
    /// The last days of the series, never trained on, for `compare`.
    #[arg(long, default_value_t = 3, value_parser = clap::value_parser!(u32).range(1..=365))]
    test_days: u32,
    /// Mean requests per 5-minute bin before the ×20 scaling (synthetic load).
    #[arg(long, default_value_t = 1500.0, value_parser = positive_f64)]
    mean_count: f64,
    /// Replay the first series of a trace file (Azure per-minute or timestamp,count CSV).
    #[arg(long)]
    trace: Option<PathBuf>,
    /// Seed for the synthetic series, episode starts and measurement noise.
    #[arg(long, default_value_t = 1)]
    seed: u64,
}

struct Split {
    train: Vec<f64>,
    test: Vec<f64>,
    /// Sized on the training days only, used for both.
    config: ProvisioningConfig,
}

impl LoadArgs {
    fn split(&self) -> Result<Split> {
        let bins = match &self.trace {
            Some(path) => {
                let traces = aware_sim::load_traces(path)?;
                bins_from_trace(traces.first().with_context(|| format!("{}: no series", path.display()))?)
            }
            None => synthetic_bins(self.days as usize, self.mean_count, self.seed),
        };
        let test = self.test_days as usize * 288;
        if bins.len() < test + 288 {
            bail!(
                "--test-days: {} days held out leave less than one training day in {} five-minute bins",
                self.test_days,
                bins.len()
            );
        }
        let (train, test) = bins.split_at(bins.len() - test);
        Ok(Split { config: ProvisioningConfig::sized_for(train), train: train.to_vec(), test: test.to_vec() })
    }
}

#[derive(clap::ValueEnum, Clone, Copy, Debug, PartialEq, Eq)]
pub enum ProvisionAlgorithm {
    /// Dueling Double DQN over the observation window through a 1-D convolution (the paper's).
    D3qn,
    Dqn,
    Ppo,
}

#[derive(clap::Args, Debug)]
pub struct TrainArgs {
    #[arg(long, value_enum, default_value = "d3qn")]
    algo: ProvisionAlgorithm,
    #[command(flatten)]
    load: LoadArgs,
    /// Training episodes, one day each from a random start in the training days.
    #[arg(long, default_value_t = 100, value_parser = clap::value_parser!(u64).range(1..))]
    episodes: u64,
    /// Observations (5-minute steps) the agent sees at once.
    #[arg(long, default_value_t = 6, value_parser = clap::value_parser!(u32).range(1..=288))]
    window: u32,
    /// Directory for the checkpoint, learning curve and summary.
    #[arg(long)]
    out: PathBuf,
    #[arg(long)]
    json: bool,
}

#[derive(clap::Args, Debug)]
pub struct CompareArgs {
    /// Comma-separated: threshold, rl:DIR (a checkpoint from `aware provision train`).
    #[arg(long, default_value = "threshold", value_delimiter = ',')]
    policies: Vec<String>,
    #[command(flatten)]
    load: LoadArgs,
    #[arg(long)]
    json: bool,
}

pub fn run(command: Provision) -> Result<ExitCode> {
    match command {
        Provision::Train(a) => train(a),
        Provision::Compare(a) => compare(a),
    }
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

#[derive(Debug, Serialize)]
struct TrainSummary {
    algorithm: String,
    window: u32,
    episodes: u64,
    training_days: usize,
    instance_capacity_rps: f64,
    first_episode_reward: f64,
    last_10_episode_reward: f64,
    checkpoint: String,
}

fn train(args: TrainArgs) -> Result<ExitCode> {
    if args.out.join(aware_agents::checkpoint::METADATA).exists() {
        bail!("--out: {} already holds a checkpoint; choose another directory", args.out.display());
    }
    let split = args.load.split()?;
    let window = args.window as usize;
    let mut env = ProvisioningEnv::new(split.train.clone(), split.config.clone()).map_err(anyhow::Error::msg)?;
    let mut agent = new_agent(args.algo, window, args.load.seed);
    let bar = progress::bar(args.episodes, "training");
    let mut curve = Vec::new();
    let mut steps = 0u64;
    for episode in 0..args.episodes {
        let (first, _) = env.reset(Some(args.load.seed.wrapping_mul(1_000_003).wrapping_add(episode)))?;
        let mut history = ObservationWindow::new(window);
        let mut state = history.reset(&first);
        let mut total = 0.0;
        loop {
            let action = agent.act(std::slice::from_ref(&state), true)?.remove(0);
            let step = env.step(&action)?;
            let next = history.push(&step.observation);
            let e = Experience {
                state: state.clone(),
                action: action_values(&action),
                reward: step.reward as f32,
                next_state: next.clone(),
                terminal: step.terminated,
            };
            agent.observe(0, &e, step.truncated)?;
            total += step.reward;
            steps += 1;
            state = next;
            if step.truncated || step.terminated {
                break;
            }
        }
        curve.push(total);
        bar.set_message(format!("ep {episode} r {total:.2}"));
        bar.inc(1);
    }
    bar.finish_and_clear();
    std::fs::create_dir_all(&args.out).with_context(|| format!("{}: cannot create", args.out.display()))?;
    agent.save(&args.out, &observation_space(window), steps)?;
    let mut csv = String::from("episode,reward\n");
    for (i, r) in curve.iter().enumerate() {
        csv.push_str(&format!("{i},{r}\n"));
    }
    let points: Vec<(f64, f64)> = curve.iter().enumerate().map(|(i, r)| (i as f64, *r)).collect();
    let last: Vec<f64> = curve.iter().rev().take(10).copied().collect();
    let summary = TrainSummary {
        algorithm: agent.algorithm().into(),
        window: args.window,
        episodes: args.episodes,
        training_days: split.train.len() / 288,
        instance_capacity_rps: split.config.instance_capacity_rps,
        first_episode_reward: curve[0],
        last_10_episode_reward: last.iter().sum::<f64>() / last.len() as f64,
        checkpoint: args.out.display().to_string(),
    };
    write_training_outputs(&args.out, agent.algorithm(), &csv, &points, &summary, args.json, || {
        println!(
            "{} (window {}) on {} training days, {} episodes: day reward {:.2} → {:.2} (last 10)",
            summary.algorithm,
            summary.window,
            summary.training_days,
            summary.episodes,
            summary.first_episode_reward,
            summary.last_10_episode_reward
        );
        println!("checkpoint and learning curve in {}", summary.checkpoint);
    })?;
    Ok(ExitCode::SUCCESS)
}

enum Policy {
    Threshold(ThresholdStepScaling),
    Agent { agent: Box<dyn Agent>, window: usize },
}

impl Policy {
    fn parse(spec: &str) -> Result<Self> {
        if spec == "threshold" {
            return Ok(Policy::Threshold(ThresholdStepScaling {
                min_replicas: 1,
                max_replicas: 10,
                steps: ThresholdStepScaling::default_steps(),
            }));
        }
        let Some(dir) = spec.strip_prefix("rl:") else {
            bail!("--policies: {spec:?} is not threshold or rl:DIR");
        };
        let dir = PathBuf::from(dir);
        let meta = Checkpoint::read_metadata(&dir)?;
        let dim = meta.observation_space.dim();
        if dim == 0 || dim % FEATURES != 0 {
            bail!("{}: observation dimension {dim} is not a window of {FEATURES} provisioning metrics", dir.display());
        }
        let window = dim / FEATURES;
        let agent = aware_agents::agent::load(&dir, &observation_space(window), &Space::Discrete { n: ACTIONS })?;
        Ok(Policy::Agent { agent, window })
    }
}

#[derive(Debug, Default, Serialize)]
struct Outcome {
    policy: String,
    steps: u64,
    reward: f64,
    cost: f64,
    penalty: f64,
    /// Steps at ≥ 70 % CPU (any penalty tier), and at ≥ 90 %.
    penalised_steps: u64,
    steps_at_90_pct: u64,
    mean_instances: f64,
    mean_cpu_pct: f64,
    dropped_requests: f64,
    /// Steps whose action changed the fleet.
    scaling_actions: u64,
}

fn compare(args: CompareArgs) -> Result<ExitCode> {
    let split = args.load.split()?;
    let config = ProvisioningConfig { episode_steps: split.test.len(), ..split.config.clone() };
    let mut policies = args.policies.iter().map(|p| Ok((p.clone(), Policy::parse(p)?))).collect::<Result<Vec<_>>>()?;
    let bar = progress::bar((policies.len() * split.test.len()) as u64, "held-out days");
    let mut outcomes = Vec::new();
    for (name, policy) in &mut policies {
        // Every policy meets the same held-out load and the same noise.
        let mut env = ProvisioningEnv::new(split.test.clone(), config.clone()).map_err(anyhow::Error::msg)?;
        let (first, _) = env.reset(Some(args.load.seed))?;
        let mut history = ObservationWindow::new(match policy {
            Policy::Agent { window, .. } => *window,
            Policy::Threshold(_) => 1,
        });
        let mut state = history.reset(&first);
        let mut o = Outcome { policy: name.clone(), ..Outcome::default() };
        let before = env.stats().instances;
        let mut instances = before;
        loop {
            let action = match policy {
                Policy::Threshold(t) => {
                    let cpu = env.stats().cpu_utilisation_pct / 100.0;
                    Action::Discrete((t.step(cpu).clamp(-2, 2) + 2) as usize)
                }
                Policy::Agent { agent, .. } => agent.act(std::slice::from_ref(&state), false)?.remove(0),
            };
            let step = env.step(&action)?;
            let s = env.stats();
            o.steps += 1;
            o.reward += step.reward;
            o.cost += s.cost;
            o.penalty += s.penalty;
            o.penalised_steps += (s.penalty > 0.0) as u64;
            o.steps_at_90_pct += (s.cpu_utilisation_pct >= 90.0) as u64;
            o.mean_instances += s.instances as f64;
            o.mean_cpu_pct += s.cpu_utilisation_pct;
            o.dropped_requests += s.dropped;
            o.scaling_actions += (s.instances != instances) as u64;
            instances = s.instances;
            state = history.push(&step.observation);
            bar.inc(1);
            if step.truncated {
                break;
            }
        }
        o.mean_instances /= o.steps as f64;
        o.mean_cpu_pct /= o.steps as f64;
        outcomes.push(o);
    }
    bar.finish_and_clear();
    #[derive(Serialize)]
    struct Report {
        held_out_days: f64,
        step_seconds: f64,
        instance_capacity_rps: f64,
        price_per_hour: f64,
        policies: Vec<Outcome>,
    }
    let report = Report {
        held_out_days: split.test.len() as f64 / 288.0,
        step_seconds: STEP_S,
        instance_capacity_rps: config.instance_capacity_rps,
        price_per_hour: config.price_per_hour,
        policies: outcomes,
    };
    if args.json {
        println!("{}", serde_json::to_string_pretty(&report)?);
        return Ok(ExitCode::SUCCESS);
    }
    println!(
        "{:.0} held-out days, instance capacity {:.1} req/s, ${:.2}/instance-hour",
        report.held_out_days, report.instance_capacity_rps, report.price_per_hour
    );
    println!(
        "{:<28} {:>9} {:>8} {:>8} {:>10} {:>7} {:>10} {:>7} {:>8}",
        "policy", "reward", "cost $", "penalty", "penalised", "≥90%", "instances", "CPU %", "actions"
    );
    for o in &report.policies {
        println!(
            "{:<28} {:>9.2} {:>8.2} {:>8.2} {:>10} {:>7} {:>10.2} {:>7.1} {:>8}",
            o.policy,
            o.reward,
            o.cost,
            o.penalty,
            o.penalised_steps,
            o.steps_at_90_pct,
            o.mean_instances,
            o.mean_cpu_pct,
            o.scaling_actions
        );
    }
    Ok(ExitCode::SUCCESS)
}
