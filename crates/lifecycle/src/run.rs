//! `aware run`: the lifecycle manager over generated applications on the embedded simulator,
//! beside the fallback alone on identical traffic, scored by the one scoring path.

use aware_agents::ddpg::{Ddpg, DdpgConfig};
use aware_env::STATE_DIM;
use aware_env::action::ActionKind;
use aware_lab::evaluate::{PolicyRow, aggregate};
use aware_lab::policy::Policy;
use aware_lab::progress::Progress;
use aware_lab::rollout::{Observer, Recommenders, rollout};
use aware_lab::score::{Scorer, Summary};
use aware_lab::workload::{Workload, WorkloadSpec};
use serde::Serialize;

use crate::LifecycleError;
use crate::manager::{Counts, Manager, ManagerConfig};
use crate::stage::{Stage, StageChange};

#[derive(Debug, Clone)]
pub struct RunSpec {
    pub workload: WorkloadSpec,
    /// Intervals to run (rounded up to whole episodes).
    pub steps: u64,
    pub manager: ManagerConfig,
    /// Seeds the agent (the workload has its own seed).
    pub seed: u64,
}

/// One application at the end of the run.
#[derive(Debug, Clone, Serialize)]
pub struct AppReport {
    pub app: String,
    pub stage: Stage,
    #[serde(flatten)]
    pub counts: Counts,
    /// The app under the lifecycle manager and under the fallback alone.
    pub aware: Summary,
    pub fallback_alone: Summary,
}

/// `aware run --json`.
#[derive(Debug, Clone, Serialize)]
pub struct RunReport {
    pub apps: usize,
    pub steps: u64,
    pub episode_steps: u64,
    pub seed: u64,
    pub fallback: String,
    /// `aware` (the lifecycle manager) and the fallback alone, on identical traffic.
    pub policies: Vec<PolicyRow>,
    /// Every stage change, in order.
    pub stages: Vec<StageChange>,
    pub per_app: Vec<AppReport>,
}

pub fn run(spec: &RunSpec, progress: &dyn Progress) -> Result<RunReport, LifecycleError> {
    let episode_steps = spec.manager.episode_steps;
    if episode_steps == 0 {
        return Err(LifecycleError::input("--episode-steps", "must be at least 1"));
    }
    if spec.steps == 0 {
        return Err(LifecycleError::input("--steps", "must be at least 1"));
    }
    let workload = Workload::load(&spec.workload)?;
    let episodes = spec.steps.div_ceil(episode_steps);
    let steps = episodes * episode_steps;
    let names: Vec<String> = workload.apps.iter().map(|a| a.name.clone()).collect();
    let seeds: Vec<u64> = (0..episodes).map(|e| workload.trace_seed.wrapping_add(e)).collect();

    let agent = Ddpg::new(STATE_DIM, 3, DdpgConfig::default(), spec.seed);
    let mut manager = Manager::new(&workload, agent, spec.manager.clone())?;
    let mut env = workload.env(ActionKind::Continuous, episode_steps, workload.trace_seed);
    let mut scorer = Scorer::new(&env, &names);
    progress.start(steps, "aware");
    for (e, &seed) in seeds.iter().enumerate() {
        rollout(&mut env, &mut manager, seed, episode_steps, &mut [&mut scorer as &mut dyn Observer], progress)?;
        let stages = manager.stages();
        let count = |s: Stage| stages.iter().filter(|&&x| x == s).count();
        progress.message(&format!(
            "episode {}/{episodes}: offline {} online {} serving {}",
            e + 1,
            count(Stage::Offline),
            count(Stage::Online),
            count(Stage::Serving)
        ));
    }
    progress.finish();
    let (aware, aware_apps) = row("aware", scorer, &manager.fallbacks(), episode_steps);

    // The fallback alone, on the same episodes.
    let fallback_name = spec.manager.fallback.clone();
    let policies = (0..workload.apps.len())
        .map(|i| Policy::build(&fallback_name, &workload.app_profile(i), Some(&workload.apps[i]), None))
        .collect::<Result<Vec<_>, _>>()?;
    let mut driver = Recommenders::new(policies);
    let mut env = workload.env(ActionKind::Continuous, episode_steps, workload.trace_seed);
    let mut scorer = Scorer::new(&env, &names);
    progress.start(steps, fallback_name.to_string().as_str());
    for &seed in &seeds {
        rollout(&mut env, &mut driver, seed, episode_steps, &mut [&mut scorer as &mut dyn Observer], progress)?;
    }
    progress.finish();
    let refusals = driver.refusals.clone();
    let (baseline, baseline_apps) = row(&fallback_name.to_string(), scorer, &refusals, episode_steps);

    let per_app = names
        .iter()
        .zip(manager.stages())
        .zip(manager.counts())
        .zip(aware_apps.into_iter().zip(baseline_apps))
        .map(|(((app, stage), counts), (aware, fallback_alone))| AppReport {
            app: app.clone(),
            stage,
            counts,
            aware,
            fallback_alone,
        })
        .collect();
    Ok(RunReport {
        apps: workload.apps.len(),
        steps,
        episode_steps,
        seed: spec.seed,
        fallback: fallback_name.to_string(),
        policies: vec![aware, baseline],
        stages: manager.changes().to_vec(),
        per_app,
    })
}

fn row(label: &str, scorer: Scorer, fallbacks: &[u64], episode_steps: u64) -> (PolicyRow, Vec<Summary>) {
    let latencies = scorer.merged_latencies();
    let (per_app, _): (Vec<Summary>, _) = scorer.finish(fallbacks);
    (PolicyRow::new(label, aggregate(label, &per_app, &latencies), episode_steps), per_app)
}
