use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::{Context, Result, bail};
use aware_core::{Observation, Profile};
use serde::{Deserialize, Serialize};

use crate::policy::{Policy, PolicyName};

#[derive(clap::Args, Debug)]
pub struct Args {
    /// Which rule-based recommender to ask.
    #[arg(long)]
    policy: PolicyName,
    /// JSON file: {"observation": …, "history": [… oldest first …], "slo_p99_ms": …}.
    #[arg(long)]
    input: PathBuf,
    /// AWARE profile (YAML): targets, bounds, SLO.
    #[arg(long)]
    profile: Option<PathBuf>,
    /// Print JSON instead of a summary.
    #[arg(long)]
    json: bool,
}

/// The dry-run input: the observation to answer for, and the history a running controller
/// would have seen before it (replayed first, so stabilisation windows and histograms match).
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Input {
    pub observation: Observation,
    #[serde(default)]
    pub history: Vec<Observation>,
    /// The latency objective, for policies that need one (AIMD) when the profile has none.
    #[serde(default)]
    pub slo_p99_ms: Option<f64>,
}

#[derive(Debug, Serialize)]
struct Output {
    policy: String,
    app: String,
    time_s: f64,
    current: Current,
    recommendation: aware_core::Recommendation,
    details: serde_json::Value,
}

#[derive(Debug, Serialize)]
struct Current {
    replicas: u32,
    resources: aware_core::ContainerResources,
}

/// `FILE:LINE:COL: field.path: reason`, one line.
pub fn parse_input(text: &str, source: &str) -> Result<Input> {
    let mut de = serde_json::Deserializer::from_str(text);
    let input: Input = serde_path_to_error::deserialize(&mut de).map_err(|e| {
        let path = e.path().to_string();
        let inner = e.inner();
        let (line, column) = (inner.line(), inner.column());
        let msg = inner.to_string();
        let msg = msg.split(" at line ").next().unwrap_or(&msg).to_string();
        anyhow::anyhow!("{source}:{line}:{column}: {path}: {msg}")
    })?;
    let check = |o: &Observation, at: &str| o.validate().map_err(|e| anyhow::anyhow!("{source}: {at}: {e}"));
    check(&input.observation, "observation")?;
    let mut previous = f64::NEG_INFINITY;
    for (i, h) in input.history.iter().enumerate() {
        check(h, &format!("history[{i}]"))?;
        if h.app != input.observation.app {
            bail!("{source}: history[{i}].app: {:?} is not the observation's app {:?}", h.app, input.observation.app);
        }
        if h.time_s <= previous || h.time_s >= input.observation.time_s {
            bail!("{source}: history[{i}].time_s: history must be oldest first and before the observation");
        }
        previous = h.time_s;
    }
    if let Some(slo) = input.slo_p99_ms
        && !(slo.is_finite() && slo > 0.0)
    {
        bail!("{source}: slo_p99_ms: must be a positive number (got {slo})");
    }
    Ok(input)
}

pub fn run(args: Args) -> Result<ExitCode> {
    let profile = match &args.profile {
        Some(p) => Profile::load(p)?,
        None => Profile::default(),
    };
    let source = args.input.display().to_string();
    let text = std::fs::read_to_string(&args.input).with_context(|| format!("{source}: cannot read"))?;
    let input = parse_input(&text, &source)?;
    let mut policy = Policy::build(&args.policy, &profile, None, input.slo_p99_ms)?;
    let rec = policy.recommender();
    rec.warm_up(&input.history).map_err(|e| anyhow::anyhow!("{source}: history: {e}"))?;
    let recommendation =
        rec.recommend(&input.observation).map_err(|e| anyhow::anyhow!("{source}: observation: {e}"))?;
    let obs = &input.observation;
    let out = Output {
        policy: args.policy.to_string(),
        app: obs.app.clone(),
        time_s: obs.time_s,
        current: Current { replicas: obs.desired_replicas, resources: obs.template.clone() },
        recommendation,
        details: policy.details(),
    };
    if args.json {
        outln!("{}", serde_json::to_string_pretty(&out)?);
    } else {
        let show = |replicas: u32, c: &aware_core::ContainerResources| {
            format!(
                "{replicas} × {} (cpu {}m/{}m, memory {}Mi/{}Mi request/limit)",
                c.name,
                c.requests.cpu_millicores,
                c.limits.cpu_millicores,
                c.requests.memory_bytes >> 20,
                c.limits.memory_bytes >> 20
            )
        };
        outln!("{} for {} at t={} s", out.policy, out.app, out.time_s);
        outln!("  now:         {}", show(out.current.replicas, &out.current.resources));
        for c in &out.recommendation.containers {
            outln!("  recommended: {}", show(out.recommendation.replicas, c));
        }
        outln!("  details:     {}", serde_json::to_string(&out.details)?);
    }
    Ok(ExitCode::SUCCESS)
}
