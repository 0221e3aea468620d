pub mod bench;
pub mod compare;
pub mod controller;
pub mod crd;
pub mod demo;
pub mod experiment;
pub mod explain;
pub mod generate;
pub mod provision;
pub mod recommend;
pub mod run;
pub mod serve_env;
pub mod simulate;
pub mod store;
pub mod train;
pub mod train_meta;
pub mod validate;

use std::path::PathBuf;

use anyhow::Result;
use aware_core::Population;
use aware_lab::workload::{Workload, WorkloadSpec};
use aware_sim::{Scenario, VerticalUpdate};

pub use aware_lab::output::write_atomically;

/// Options every simulator-backed command shares.
#[derive(clap::Args, Debug, Clone)]
pub struct AppsArgs {
    /// Number of applications.
    #[arg(long, default_value_t = 10, value_parser = clap::value_parser!(u32).range(1..=1_000_000))]
    pub apps: u32,
    /// Seed for applications, load traces and measurement noise.
    #[arg(long, default_value_t = 1)]
    pub seed: u64,
    /// Seed for load realisations and measurement noise only (default: --seed): the same apps
    /// under other traffic. `train` uses trace seeds S, S+1, … (one per episode), so a seed
    /// outside that range gives held-out traces.
    #[arg(long)]
    pub trace_seed: Option<u64>,
    /// Length of a simulated day in seconds (86400 = real time; smaller compresses the daily cycle).
    #[arg(long, default_value_t = 86_400.0, value_parser = day_seconds)]
    pub day_seconds: f64,
    /// Application population: microservices (Alibaba-2021-like replica needs) or serverless
    /// (Azure-Functions-2019-like invocation rates). Default: the profile's `population`.
    #[arg(long)]
    pub population: Option<Population>,
}

impl AppsArgs {
    /// The applications alone (default profile unless `profile` is given), as `generate` prints them.
    pub fn workload(&self, profile: Option<PathBuf>) -> Result<Workload> {
        Ok(Workload::load(&self.spec(profile, WorkloadSpec::default().steps))?)
    }

    /// The workload these options describe, under `profile`, with traces of `steps` intervals.
    pub fn spec(&self, profile: Option<PathBuf>, steps: u64) -> WorkloadSpec {
        WorkloadSpec {
            apps: self.apps as usize,
            seed: self.seed,
            trace_seed: self.trace_seed,
            day_seconds: self.day_seconds,
            population: self.population,
            profile,
            steps,
            ..WorkloadSpec::default()
        }
    }
}

/// Meta-training's auxiliary task, for every command that meta-trains (`train-meta`,
/// `experiment fig6|fig8|ood`).
#[derive(clap::Args, Debug, Clone, Copy)]
pub struct MetaTaskArgs {
    /// Weight of meta-training's auxiliary task beside the critic's gradient (the embedding
    /// predicts its trajectories' input signature), 0 to 1000; 0 trains on the critic's
    /// gradient alone.
    #[arg(long, default_value_t = aware_meta::train::MetaTrainConfig::default().signature_weight, value_parser = signature_weight)]
    pub signature_weight: f32,
    /// What the meta-learner's embedding layer outputs pass through: `relu` (non-negative) or
    /// `linear` (signed).
    #[arg(long, value_enum, default_value_t = EmbeddingOutputArg::of(aware_meta::MetaConfig::aware(1).output))]
    pub embedding_output: EmbeddingOutputArg,
    /// Whether the meta-learner centres its embeddings on the pool's mean output (`on`) or
    /// takes them as its embedding layer outputs them (`off`).
    #[arg(long, value_enum, default_value_t = Switch::of(aware_meta::MetaConfig::aware(1).centring))]
    pub embedding_centring: Switch,
    /// The meta-learner's variant: `aware` (AWARE's: no dropout, the M best trajectories) or
    /// `flash` (FLASH's: dropout 0.05, the M/2 best and M/2 worst trajectories; `train-meta`
    /// also takes its 32-d embedding unless `--embedding` says otherwise).
    #[arg(long, value_enum, default_value_t = MetaVariant::Aware)]
    pub meta_variant: MetaVariant,
}

/// [`aware_meta::MetaConfig::aware`] or [`aware_meta::MetaConfig::flash`] on the command line.
#[derive(clap::ValueEnum, Debug, Clone, Copy, PartialEq, Eq)]
pub enum MetaVariant {
    Aware,
    Flash,
}

impl MetaVariant {
    /// The variant's own settings (sizes apart: each command sizes its meta-learner).
    pub fn config(self) -> aware_meta::MetaConfig {
        match self {
            MetaVariant::Aware => aware_meta::MetaConfig::aware(1),
            MetaVariant::Flash => aware_meta::MetaConfig::flash(1),
        }
    }
}

/// A choice that is on or off.
#[derive(clap::ValueEnum, Debug, Clone, Copy, PartialEq, Eq)]
pub enum Switch {
    On,
    Off,
}

impl Switch {
    fn of(on: bool) -> Self {
        if on { Switch::On } else { Switch::Off }
    }
}

/// [`aware_meta::EmbeddingOutput`] on the command line.
#[derive(clap::ValueEnum, Debug, Clone, Copy, PartialEq, Eq)]
pub enum EmbeddingOutputArg {
    Relu,
    Linear,
}

impl EmbeddingOutputArg {
    fn of(output: aware_meta::EmbeddingOutput) -> Self {
        match output {
            aware_meta::EmbeddingOutput::Relu => EmbeddingOutputArg::Relu,
            aware_meta::EmbeddingOutput::Linear => EmbeddingOutputArg::Linear,
        }
    }

    fn output(self) -> aware_meta::EmbeddingOutput {
        match self {
            EmbeddingOutputArg::Relu => aware_meta::EmbeddingOutput::Relu,
            EmbeddingOutputArg::Linear => aware_meta::EmbeddingOutput::Linear,
        }
    }
}

impl MetaTaskArgs {
    /// Sets the weight, the embedding's output and its centring, and the variant's dropout and
    /// trajectory selection, on a pool's meta-training.
    pub fn apply(self, pool: &mut aware_meta::pool::PoolSpec) {
        pool.train.signature_weight = self.signature_weight;
        pool.meta.output = self.embedding_output.output();
        pool.meta.centring = self.embedding_centring == Switch::On;
        let variant = self.meta_variant.config();
        pool.meta.dropout = variant.dropout;
        pool.meta.selection = variant.selection;
    }
}

fn signature_weight(text: &str) -> Result<f32, String> {
    match text.parse::<f32>() {
        Ok(w) if (0.0..=1_000.0).contains(&w) => Ok(w),
        Ok(w) => Err(format!("{w} is not a weight from 0 to 1000")),
        Err(e) => Err(format!("{text:?} is not a number: {e}")),
    }
}

/// Simulator options shared by `simulate`, `compare` and `train`.
#[derive(clap::Args, Debug, Clone)]
pub struct SimArgs {
    /// Control intervals to simulate (15 s each; at most 10⁹, as `aware run`).
    #[arg(long, default_value_t = 240, value_parser = clap::value_parser!(u64).range(1..=1_000_000_000))]
    pub steps: u64,
    /// Inject an instability scenario: NAME or NAME@STEP (default step: half way).
    #[arg(long)]
    pub scenario: Option<Scenario>,
    /// AWARE profile (YAML): SLO override, targets, reward weights, bounds.
    #[arg(long)]
    pub profile: Option<PathBuf>,
    /// Replay load from a trace file (Azure Functions per-minute CSV or timestamp,count CSV).
    #[arg(long)]
    pub trace: Option<PathBuf>,
    /// How CPU/memory changes reach running pods.
    #[arg(long, value_enum, default_value = "in-place")]
    pub vertical_update: VerticalUpdateArg,
}

#[derive(clap::ValueEnum, Clone, Copy, Debug)]
pub enum VerticalUpdateArg {
    InPlace,
    Restart,
}

impl SimArgs {
    /// The workload these options and `apps` describe, loaded and validated.
    pub fn workload(&self, apps: &AppsArgs) -> Result<Workload> {
        Ok(Workload::load(&self.spec(apps))?)
    }

    /// What [`SimArgs::workload`] loads.
    pub fn spec(&self, apps: &AppsArgs) -> WorkloadSpec {
        WorkloadSpec {
            apps: apps.apps as usize,
            seed: apps.seed,
            trace_seed: apps.trace_seed,
            day_seconds: apps.day_seconds,
            population: apps.population,
            profile: self.profile.clone(),
            trace: self.trace.clone(),
            scenario: self.scenario,
            vertical_update: match self.vertical_update {
                VerticalUpdateArg::InPlace => VerticalUpdate::InPlace,
                VerticalUpdateArg::Restart => VerticalUpdate::Restart,
            },
            steps: self.steps,
        }
    }
}

pub fn positive_f64(s: &str) -> Result<f64, String> {
    match s.parse::<f64>() {
        Ok(v) if v.is_finite() && v > 0.0 => Ok(v),
        _ => Err(format!("{s:?} is not a positive number")),
    }
}

/// Longest wall-clock pause a flag may ask for: one year.
const MAX_PAUSE_S: f64 = 365.0 * 86_400.0;

/// A wall-clock pause in seconds (`--step-seconds`, `--interval-s`): positive, at most a year.
pub fn pause_seconds(s: &str) -> Result<f64, String> {
    match positive_f64(s)? {
        v if v <= MAX_PAUSE_S => Ok(v),
        _ => Err(format!("{s:?} seconds is more than a year ({MAX_PAUSE_S})")),
    }
}

/// `--day-seconds`: a simulated day's length the simulator takes (at least an hour).
pub fn day_seconds(s: &str) -> Result<f64, String> {
    let v = positive_f64(s)?;
    aware_lab::workload::check_day_seconds(v).map(|()| v)
}

/// `--agent` / `--base-learner`: ddpg or ppo.
pub fn parse_learner(s: &str) -> Result<aware_lab::agent::Learner, String> {
    s.parse()
}

/// Prints `value` as one pretty JSON document on stdout.
pub fn print_json(value: &impl serde::Serialize) -> Result<()> {
    outln!("{}", serde_json::to_string_pretty(value)?);
    Ok(())
}

/// The policy table `compare`, `run` and the experiments print: what an operator pays for
/// (SLO violations, drops, core-seconds) beside the reward.
/// Says, one line each, which pairs of rows the reward ranked against the operator (nothing
/// when it agreed on every pair).
pub fn print_misranked(misranked: &[String]) {
    for m in misranked {
        outln!("reward misranks: {m}");
    }
}

pub fn print_rows(rows: &[aware_lab::evaluate::PolicyRow]) {
    outln!(
        "{:<16} {:>6} {:>6} {:>9} {:>7} {:>10} {:>12} {:>12} {:>9} {:>8} {:>9} {:>9}",
        "policy",
        "cpu %",
        "mem %",
        "slo viol",
        "viol %",
        "dropped",
        "replica-s",
        "core-s",
        "p99 ms",
        "actions",
        "reversals",
        "ep reward"
    );
    for p in rows {
        let s = &p.summary;
        outln!(
            "{:<16} {:>6.1} {:>6.1} {:>9} {:>7.2} {:>10.0} {:>12.0} {:>12.0} {:>9} {:>8} {:>9} {:>9.2}",
            p.policy,
            s.cpu_utilisation * 100.0,
            s.memory_utilisation * 100.0,
            s.slo_violations,
            s.slo_violation_fraction * 100.0,
            s.dropped_requests,
            s.replica_seconds,
            s.core_seconds,
            s.p99_latency_ms.map_or("-".into(), |v| format!("{v:.0}")),
            s.scaling_actions,
            s.direction_reversals,
            p.mean_episode_reward
        );
    }
}
