pub mod bench;
pub mod compare;
pub mod controller;
pub mod crd;
pub mod experiment;
pub mod generate;
pub mod provision;
pub mod recommend;
pub mod simulate;
pub mod store;
pub mod train;
pub mod validate;

use std::path::{Path, PathBuf};
use std::sync::Arc;

use anyhow::Result;
use aware_core::Profile;
use aware_sim::{AppSpec, Scenario, SimConfig, Trace, VerticalUpdate, generate_apps, load_traces};

use crate::runner::Setup;

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
    #[arg(long, default_value_t = 86_400.0, value_parser = positive_f64)]
    pub day_seconds: f64,
}

impl AppsArgs {
    pub fn trace_seed(&self) -> u64 {
        self.trace_seed.unwrap_or(self.seed)
    }

    pub fn generate(&self) -> Vec<AppSpec> {
        generate_apps(self.apps as usize, self.seed, self.day_seconds)
    }
}

/// Simulator options shared by `simulate` and `compare`.
#[derive(clap::Args, Debug, Clone)]
pub struct SimArgs {
    /// Control intervals to simulate (15 s each).
    #[arg(long, default_value_t = 240, value_parser = clap::value_parser!(u64).range(1..))]
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

/// Everything loaded and validated before any simulation starts.
pub struct Prepared {
    pub apps: Vec<AppSpec>,
    pub traces: Vec<Arc<Trace>>,
    pub sim: SimConfig,
    pub profile: Profile,
}

impl SimArgs {
    pub fn prepare(&self, apps: &AppsArgs) -> Result<Prepared> {
        let profile = match &self.profile {
            Some(p) => Profile::load(p)?,
            None => Profile::default(),
        };
        let traces = match &self.trace {
            Some(p) => load_traces(p)?.into_iter().map(Arc::new).collect(),
            None => Vec::new(),
        };
        let scenario =
            self.scenario.map(|s| Scenario { kind: s.kind, at_step: Some(s.at_step.unwrap_or(self.steps / 2)) });
        let sim = SimConfig {
            scenario,
            slo_p99_ms: profile.slo.latency_p99_ms,
            vertical_update: match self.vertical_update {
                VerticalUpdateArg::InPlace => VerticalUpdate::InPlace,
                VerticalUpdateArg::Restart => VerticalUpdate::Restart,
            },
            ..SimConfig::default()
        };
        Ok(Prepared { apps: apps.generate(), traces, sim, profile })
    }
}

impl Prepared {
    pub fn setup(&self, apps: &AppsArgs, steps: u64) -> Setup<'_> {
        Setup {
            apps: &self.apps,
            traces: &self.traces,
            sim: self.sim.clone(),
            seed: apps.trace_seed(),
            steps,
            profile: &self.profile,
        }
    }
}

pub fn positive_f64(s: &str) -> Result<f64, String> {
    match s.parse::<f64>() {
        Ok(v) if v.is_finite() && v > 0.0 => Ok(v),
        _ => Err(format!("{s:?} is not a positive number")),
    }
}

/// Writes `text` to `path` atomically (temp file then rename), so an interrupted run never leaves
/// a half-written result where a good one was.
/// The outputs every training run leaves beside its checkpoint: `learning_curve.csv` (as
/// given), `learning_curve.png` (episode → reward) and `train.json` (the summary), which is
/// also printed with `--json`; otherwise `human` prints the summary.
pub fn write_training_outputs(
    out: &Path,
    algorithm: &str,
    csv: &str,
    points: &[(f64, f64)],
    summary: &impl serde::Serialize,
    json: bool,
    human: impl FnOnce(),
) -> Result<()> {
    write_atomically(&out.join("learning_curve.csv"), csv)?;
    crate::plot::learning_curve(&out.join("learning_curve.png"), algorithm, points)?;
    let text = serde_json::to_string_pretty(summary)?;
    write_atomically(&out.join("train.json"), &(text.clone() + "\n"))?;
    if json {
        println!("{text}");
    } else {
        human();
    }
    Ok(())
}

pub fn write_atomically(path: &Path, text: &str) -> Result<()> {
    use anyhow::Context;
    let tmp: PathBuf = {
        let mut name = path.file_name().map(|n| n.to_os_string()).unwrap_or_default();
        name.push(".tmp");
        path.with_file_name(name)
    };
    std::fs::write(&tmp, text).with_context(|| format!("{}: cannot write", tmp.display()))?;
    std::fs::rename(&tmp, path).with_context(|| format!("{}: cannot write", path.display()))?;
    Ok(())
}
