//! `aware demo`: AWARE end to end on the embedded simulator in a few minutes. Generated
//! applications run under AWARE (bootstrapping from the MPA default → online → serving, with a
//! workload change half way that makes rewards slip and triggers retraining), beside the MPA
//! default alone and an RL agent without bootstrapping, on identical traffic. The run leaves a
//! report directory: `report.md`, `report.json` (`policies`, `stages`), `timeline.png`, and the
//! store `aware.db` with every episode, stage change and decision (`aware explain` reads it).

use std::path::{Path, PathBuf};

use aware_lab::evaluate::PolicyRow;
use aware_lab::plot::{StageCounts, timeline};
use aware_lab::progress::{Progress, Silent};
use aware_lab::threads::beside;
use aware_lab::workload::{Workload, WorkloadSpec};
use aware_sim::{Scenario, ScenarioKind};
use serde::Serialize;

use crate::LifecycleError;
use crate::agent::Learner;
use crate::manager::{Counts, ManagerConfig};
use crate::record::StoreSink;
use crate::run::{Arm, Plan, Variant, run_fallback, run_manager};
use crate::stage::{Stage, StageChange};

/// What the demo runs.
#[derive(Debug, Clone)]
pub struct DemoSpec {
    pub out: PathBuf,
    /// Write into a non-empty `out` (the demo's own files are replaced).
    pub force: bool,
    pub seed: u64,
    pub apps: usize,
    /// Intervals (15 s each), rounded up to whole episodes.
    pub steps: u64,
    pub episode_steps: u64,
    /// The workload change; at the episode half way unless it names its step.
    pub change: Scenario,
    /// Episodes whose rewards must settle before an app serves (the profile's
    /// `reward_window`, 20, would need more than the demo's hours: 5 here, said in the report).
    pub reward_window: u32,
    /// The learning agent of the `aware` and `no-bootstrap` rows.
    pub agent: Learner,
}

impl Default for DemoSpec {
    fn default() -> Self {
        Self {
            out: PathBuf::from("aware-demo"),
            force: false,
            seed: 1,
            apps: 6,
            steps: 6000,
            episode_steps: 100,
            change: Scenario { kind: ScenarioKind::LoadHighToLow, at_step: None },
            reward_window: 5,
            agent: Learner::Ddpg,
        }
    }
}

/// One application at the end of AWARE's run.
#[derive(Debug, Clone, Serialize)]
pub struct DemoApp {
    pub app: String,
    pub stage: Stage,
    /// ONLINE at the end because its rewards degraded in SERVING: the agent relearns (from its
    /// own transitions, or the fallback's under `high_stakes`;
    /// [`crate::algorithm::AppLifecycle::retraining`]).
    pub retraining: bool,
    #[serde(flatten)]
    pub counts: Counts,
    /// Whether the app reached SERVING at some point.
    pub reached_serving: bool,
}

/// `report.json` and `aware demo --json`.
#[derive(Debug, Clone, Serialize)]
pub struct DemoReport {
    pub apps: usize,
    pub steps: u64,
    pub episode_steps: u64,
    pub seed: u64,
    /// The workload change and the interval it starts at.
    pub change: String,
    pub change_step: u64,
    /// Episodes whose rewards must settle (coefficient of variation < `t_serving`) to serve.
    pub reward_window: u32,
    /// The learning agent of the `aware` and `no-bootstrap` rows.
    pub agent: Learner,
    /// `aware`, `mpa`, `no-bootstrap`, on identical traffic.
    pub policies: Vec<PolicyRow>,
    /// AWARE's stage changes, in order.
    pub stages: Vec<StageChange>,
    pub per_app: Vec<DemoApp>,
    /// The report directory and what is in it.
    pub out: PathBuf,
    pub files: Vec<String>,
    /// The store the run recorded into (`aware explain --store …`).
    pub store: String,
}

const FILES: [&str; 4] = ["report.md", "report.json", "timeline.png", "aware.db"];

/// Refuses a non-empty output directory unless `force`; creates a missing one.
fn prepare(out: &Path, force: bool) -> Result<(), LifecycleError> {
    let io = |e: std::io::Error| LifecycleError::Output { path: out.to_path_buf(), reason: e.to_string() };
    aware_lab::output::refuse_non_directory("--out", out)?;
    if out.exists() {
        let non_empty = std::fs::read_dir(out).map_err(io)?.next().is_some();
        if non_empty && !force {
            return Err(LifecycleError::input(
                "--out",
                format!("{} is not empty; choose another directory or pass --force", out.display()),
            ));
        }
        // The demo's own files from an earlier run go; anything else stays.
        for f in FILES.iter().chain(&["aware.db-wal", "aware.db-shm"]) {
            let p = out.join(f);
            if p.exists() {
                std::fs::remove_file(&p).map_err(io)?;
            }
        }
    } else {
        std::fs::create_dir_all(out).map_err(io)?;
    }
    Ok(())
}

pub fn demo(spec: &DemoSpec, progress: &dyn Progress) -> Result<DemoReport, LifecycleError> {
    if spec.apps == 0 {
        return Err(LifecycleError::input("--apps", "must be at least 1"));
    }
    let episodes = spec.steps.div_ceil(spec.episode_steps.max(1));
    let steps = episodes * spec.episode_steps;
    // The change at the start of the episode half way through, unless told otherwise.
    let change_step = spec.change.at_step.unwrap_or(episodes / 2 * spec.episode_steps);
    if change_step >= steps {
        return Err(LifecycleError::input(
            "--change",
            format!("step {change_step} is not within the demo's {steps} steps"),
        ));
    }
    let mut workload = Workload::load(&WorkloadSpec {
        apps: spec.apps,
        seed: spec.seed,
        scenario: Some(Scenario { kind: spec.change.kind, at_step: Some(change_step) }),
        steps,
        ..WorkloadSpec::default()
    })?;
    if spec.reward_window == 0 {
        return Err(LifecycleError::input("--reward-window", "must be at least 1"));
    }
    workload.profile.lifecycle.reward_window = spec.reward_window;
    let plan = Plan::new(&workload, steps, spec.episode_steps)?;
    prepare(&spec.out, spec.force)?;
    let db = spec.out.join("aware.db");
    let url = format!("sqlite:{}", db.display());
    let mut store = aware_store::open(&url.parse()?, false)?;

    let config =
        ManagerConfig { episode_steps: spec.episode_steps, log: true, agent: spec.agent, ..ManagerConfig::default() };
    // MPA and RL without bootstrapping run beside AWARE (nothing is shared; the store is
    // AWARE's alone), and the progress shown is AWARE's.
    let (others, aware) = beside(
        || {
            let mpa = run_fallback(&workload, &plan, &config.fallback, &Silent)?;
            let config = ManagerConfig { log: false, ..config.clone() };
            let no_bootstrap =
                run_manager(&workload, &plan, Variant::NoBootstrap, &config, spec.seed, &mut (), &Silent)?;
            Ok::<_, LifecycleError>((mpa, no_bootstrap))
        },
        || {
            let mut sink = StoreSink::new(&mut *store);
            run_manager(&workload, &plan, Variant::Aware, &config, spec.seed, &mut sink, progress)
        },
    );
    let aware = aware?;
    let (mpa, no_bootstrap) = others?;
    drop(store);

    let names: Vec<String> = workload.apps.iter().map(|a| a.name.clone()).collect();
    let per_app = names
        .iter()
        .zip(aware.final_stages.iter().zip(&aware.final_retraining).zip(&aware.counts))
        .map(|(app, ((&stage, &retraining), counts))| DemoApp {
            app: app.clone(),
            stage,
            retraining,
            counts: counts.clone(),
            reached_serving: aware.stages.iter().any(|c| &c.app == app && c.to == Stage::Serving),
        })
        .collect();
    let report = DemoReport {
        apps: workload.apps.len(),
        steps,
        episode_steps: spec.episode_steps,
        seed: spec.seed,
        agent: spec.agent,
        change: spec.change.kind.name().into(),
        change_step,
        reward_window: spec.reward_window,
        policies: vec![aware.row.clone(), mpa.row.clone(), no_bootstrap.row.clone()],
        stages: aware.stages.clone(),
        per_app,
        out: spec.out.clone(),
        files: FILES.iter().map(|f| f.to_string()).collect(),
        store: url,
    };
    write_plot(&spec.out.join("timeline.png"), &[&aware, &mpa, &no_bootstrap], workload.sim.interval_s)?;
    let json =
        serde_json::to_string_pretty(&report).map_err(|e| LifecycleError::input("report.json", e.to_string()))?;
    write(&spec.out.join("report.json"), &(json + "\n"))?;
    write(&spec.out.join("report.md"), &markdown(&report))?;
    Ok(report)
}

fn write(path: &Path, text: &str) -> Result<(), LifecycleError> {
    aware_lab::output::write_atomically(path, text).map_err(LifecycleError::from)
}

fn write_plot(path: &Path, arms: &[&Arm], interval_s: f64) -> Result<(), LifecycleError> {
    let runs: Vec<(&str, &aware_lab::score::Series)> =
        arms.iter().map(|a| (a.row.policy.as_str(), &a.series)).collect();
    let names: Vec<&str> = Stage::ALL.iter().map(|s| s.name()).collect();
    let aware = arms[0];
    let counts = (0..4).map(|k| aware.stage_series.iter().map(|c| c[k] as f64).collect()).collect::<Vec<Vec<f64>>>();
    let stages = StageCounts { label: &aware.row.policy, names: &names, counts };
    timeline(path, &runs, Some(&stages), interval_s)?;
    Ok(())
}

/// The report an operator reads.
pub fn markdown(r: &DemoReport) -> String {
    let mut md = String::new();
    let hours = r.steps as f64 * 15.0 / 3600.0;
    md.push_str("# AWARE demo\n\n");
    md.push_str(&format!(
        "{} generated applications, {} intervals of 15 s ({hours:.1} h, episodes of {}), seed {}. \
         From interval {} the workload changes (`{}`). The three policies ran on identical traffic. \
         An app serves once its rewards settle over {} episodes (the profile's default is 20; \
         `aware run` uses the profile).\n\n",
        r.apps, r.steps, r.episode_steps, r.seed, r.change_step, r.change, r.reward_window
    ));
    md.push_str(
        "| policy | SLO-violating intervals | dropped requests | core-seconds | CPU utilisation | mean reward |\n",
    );
    md.push_str("| --- | ---: | ---: | ---: | ---: | ---: |\n");
    for p in &r.policies {
        let s = &p.summary;
        md.push_str(&format!(
            "| {} | {} | {:.0} | {:.0} | {:.1} % | {:.3} |\n",
            p.policy,
            s.slo_violations,
            s.dropped_requests,
            s.core_seconds,
            s.cpu_utilisation * 100.0,
            s.mean_reward
        ));
    }
    md.push_str(
        "\n`aware` is the lifecycle manager: the MPA default (HPA + VPA) acts while the agent learns \
         from it offline; an app's agent acts once it is as good on the same traffic, serves once \
         its rewards settle, retrains on what it does when they degrade, and hands back to the \
         fallback when it falls behind; while it acts, the \
         fallback's scale-ups are a floor under its proposals. `no-bootstrap` is the same agent \
         acting and learning from the first interval, with no fallback floor.\n\n",
    );
    md.push_str("![timeline](timeline.png)\n\n## Stage changes\n\n| step | app | from | to | reason |\n| ---: | --- | --- | --- | --- |\n");
    for c in &r.stages {
        md.push_str(&format!("| {} | {} | {} | {} | {} |\n", c.step, c.app, c.from, c.to, c.reason));
    }
    md.push_str("\n## Applications\n\n| app | final stage | reached serving | agent actions | fallback actions | guard fallbacks | guard-limited |\n| --- | --- | --- | ---: | ---: | ---: | ---: |\n");
    for a in &r.per_app {
        let c = &a.counts;
        md.push_str(&format!(
            "| {} | {} | {} | {} | {} | {} | {} |\n",
            a.app,
            if a.retraining { format!("{} (retraining)", a.stage) } else { a.stage.to_string() },
            a.reached_serving,
            c.agent_actions,
            c.fallback_actions,
            c.guard_fallbacks,
            c.guard_limited
        ));
    }
    md.push_str(&format!(
        "\nEvery decision is in the store: `aware explain --store {} --app APP --last 5`.\n",
        r.store
    ));
    md
}
