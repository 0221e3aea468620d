//! The lifecycle experiments of AWARE (USENIX ATC'23), on generated applications:
//!
//! - `table3`: what RL without bootstrapping costs early in training — utilisation deficit and
//!   SLO-violating intervals in four consecutive segments of its episodes, beside the MPA
//!   default (and AWARE) on the same traffic.
//! - `fig10`: bootstrapping — AWARE vs RL without bootstrapping vs the MPA default vs the
//!   `converged` reference, every row over the same window (the first interval to the end).
//! - `fig9`: serving through instability — for each of the seven instability scenarios,
//!   placed 5/8 of the way through, AWARE vs AWARE without retraining vs the MPA default vs `converged`
//!   (trained on the changed workload), scored from the scenario to the end.
//!
//! `converged` is an agent of the run's learner (`--agent`, DDPG by default) trained
//! separately, from scratch, on training traces of the same workload until its reward stops
//! improving, then run greedily (see
//! [`aware_lifecycle::converged`]). Every row has the operator's figures (SLO violations, dropped
//! requests, core-seconds) beside reward; `beats` below is the operator's test.

use std::path::PathBuf;

use aware_lab::evaluate::{PolicyRow, aggregate, reward_misrankings};
use aware_lab::policy::PolicyName;
use aware_lab::progress::{Progress, Silent};
use aware_lab::score::{LatencyHistogram, Summary};
use aware_lab::threads::beside;
use aware_lab::workload::{Workload, WorkloadSpec};
use aware_lifecycle::converged::{self, Training, TrainingReport};
use aware_lifecycle::manager::ManagerConfig;
use aware_lifecycle::run::{Arm, Plan, Variant, run_fallback, run_manager};
use aware_lifecycle::{Learner, LifecycleAgent, StageChange};
use aware_sim::{Scenario, ScenarioKind};
use serde::Serialize;

use crate::ExperimentError;

/// Which experiment.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Which {
    Table3,
    Fig9,
    Fig10,
}

impl Which {
    pub fn name(self) -> &'static str {
        match self {
            Which::Table3 => "table3",
            Which::Fig9 => "fig9",
            Which::Fig10 => "fig10",
        }
    }
}

/// How big a run and on what.
#[derive(Debug, Clone)]
pub struct LifecycleConfig {
    pub quick: bool,
    /// Seeds the applications, their traffic and the agents.
    pub seed: u64,
    /// Overrides the size's number of applications.
    pub apps: Option<usize>,
    /// Overrides the size's number of episodes.
    pub episodes: Option<u64>,
    pub episode_steps: u64,
    pub profile: Option<PathBuf>,
    /// Overrides the size's training of the `converged` reference.
    pub training: Option<Training>,
    /// Overrides the profile's `lifecycle.reward_window` (episodes SERVING's stability test
    /// looks at). Quick runs use 5, as `aware demo` does: the profile's 20 cannot settle
    /// within them.
    pub reward_window: Option<u32>,
    /// The learning agent of every learned row.
    pub agent: Learner,
}

impl LifecycleConfig {
    pub fn new(quick: bool, seed: u64) -> Self {
        Self {
            quick,
            seed,
            apps: None,
            episodes: None,
            episode_steps: 100,
            profile: None,
            training: None,
            reward_window: None,
            agent: Learner::Ddpg,
        }
    }

    fn apps(&self) -> usize {
        self.apps.unwrap_or(if self.quick { 4 } else { 8 })
    }

    fn episodes(&self, which: Which) -> u64 {
        self.episodes.unwrap_or(match (which, self.quick) {
            // The scenario comes 5/8 of the way through, and only apps already SERVING can show
            // retraining: bootstrapping (3 shadow episodes at least) then a stable reward
            // window (5 quick, the profile's 20 full) must fit before it. With 16 quick
            // episodes 2 of 28 app-scenarios got there (seed 1), so retraining had nothing
            // to do.
            (Which::Fig9, true) => 24,
            (Which::Fig9, false) => 64,
            (_, true) => 20,
            (_, false) => 60,
        })
    }

    fn training(&self) -> Training {
        if let Some(t) = self.training {
            t
        } else if self.quick {
            // A check every 2 episodes (over 30 episodes, 15 snapshots to choose from instead of
            // 6: beat MPA on 8 fig10 seeds of 16 instead of 6; see `docs/results/lifecycle.md`;
            // 20–21 now that training stops at 40–42). Trained until
            // the reward stops improving (at least 40 episodes, 6 without a new best), as the
            // reference is defined: capped at 30 it never got there (`converged: false` on fig10
            // seeds 1–16); stopping at the plateau (40–42 episodes) kept the same snapshot on
            // 15 of those 16 seeds.
            Training { max_episodes: 80, patience: 6, validate_every: 2, ..Training::default() }
        } else {
            Training::default()
        }
    }
}

/// One segment of `table3`.
#[derive(Debug, Clone, Serialize)]
pub struct Segment {
    pub segment: usize,
    /// The episodes it covers, `first..end` (end exclusive).
    pub episode_range: String,
    #[serde(flatten)]
    pub row: PolicyRow,
}

/// One scenario of `fig9`: every policy from the scenario on.
#[derive(Debug, Clone, Serialize)]
pub struct ScenarioRows {
    pub scenario: String,
    /// The interval the scenario begins at.
    pub at_step: u64,
    pub policies: Vec<PolicyRow>,
    pub converged_training: TrainingReport,
    /// AWARE's stage changes in the run (from its first interval, so bootstrapping too):
    /// when its apps reached SERVING and whether the scenario sent them back to retrain.
    pub aware_stages: Vec<StageChange>,
}

/// The operator's verdicts the acceptance reads (reported, not gated).
#[derive(Debug, Clone, Serialize)]
pub struct Checks {
    /// `aware` beats the MPA default: fewer core-seconds with no more SLO violations, or fewer
    /// violations with no more core-seconds.
    pub aware_beats_mpa: bool,
    /// `converged` beats the MPA default in the same sense (on held-out traces).
    pub converged_beats_mpa: bool,
    /// fig10: `no-bootstrap`'s SLO violations / `aware`'s (∞ as null when AWARE had none).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub no_bootstrap_violation_ratio: Option<Option<f64>>,
    /// fig9: (`converged`'s mean reward − `aware`'s) / |`converged`'s| (negative: AWARE above).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub aware_reward_shortfall_vs_converged: Option<f64>,
    /// fig9: `aware` above `no-retrain` in mean reward with fewer SLO violations.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub aware_above_no_retrain: Option<bool>,
    /// Pairs of rows the reward ranks against the operator ([`reward_misrankings`]); empty when
    /// it agrees on every pair the operator can rank.
    pub reward_misranked: Vec<String>,
}

#[derive(Debug, Clone, Serialize)]
pub struct LifecycleReport {
    pub experiment: &'static str,
    pub quick: bool,
    pub seed: u64,
    pub apps: usize,
    pub episodes: u64,
    pub episode_steps: u64,
    pub alpha: f64,
    /// The learning agent of every learned row.
    pub agent: Learner,
    /// The rows (for fig9, over every scenario from its start to the end).
    pub policies: Vec<PolicyRow>,
    /// table3: each policy in four consecutive segments of its episodes.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub segments: Vec<Segment>,
    /// fig9: per scenario.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub scenarios: Vec<ScenarioRows>,
    /// fig10: how the converged reference was trained.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub converged_training: Option<TrainingReport>,
    /// Apps that reached `serving` at least once (AWARE).
    pub aware_apps_served: usize,
    pub checks: Checks,
}

/// The seven instability scenarios of AWARE's Figure 9: every scenario the simulator has but
/// node interference (its addition, left out here as in the paper).
pub fn fig9_scenarios() -> Vec<ScenarioKind> {
    ScenarioKind::ALL.into_iter().filter(|k| *k != ScenarioKind::NodeInterference).collect()
}

fn workload(config: &LifecycleConfig, steps: u64) -> Result<Workload, ExperimentError> {
    let mut workload = Workload::load(&WorkloadSpec {
        apps: config.apps(),
        seed: config.seed,
        profile: config.profile.clone(),
        steps,
        ..WorkloadSpec::default()
    })?;
    match config.reward_window.or(config.quick.then_some(5)) {
        Some(0) => {
            return Err(ExperimentError::Input {
                input: "--reward-window".into(),
                reason: "must be at least 1".into(),
            });
        }
        Some(w) => workload.profile.lifecycle.reward_window = w,
        None => {}
    }
    Ok(workload)
}

fn manager_config(config: &LifecycleConfig) -> ManagerConfig {
    ManagerConfig { episode_steps: config.episode_steps, agent: config.agent, ..ManagerConfig::default() }
}

fn served(arm: &Arm) -> usize {
    let mut apps: Vec<&str> =
        arm.stages.iter().filter(|c| c.to == aware_lifecycle::Stage::Serving).map(|c| c.app.as_str()).collect();
    apps.sort_unstable();
    apps.dedup();
    apps.len()
}

fn row<'a>(rows: &'a [PolicyRow], policy: &str) -> Option<&'a PolicyRow> {
    rows.iter().find(|r| r.policy == policy)
}

/// Runs one of the lifecycle experiments.
pub fn run(
    which: Which,
    config: &LifecycleConfig,
    progress: &dyn Progress,
) -> Result<LifecycleReport, ExperimentError> {
    if config.episode_steps == 0 {
        return Err(ExperimentError::Input { input: "--episode-steps".into(), reason: "must be at least 1".into() });
    }
    let episodes = config.episodes(which);
    if episodes < 4 && which == Which::Table3 {
        return Err(ExperimentError::Input { input: "--episodes".into(), reason: "table3 needs at least 4".into() });
    }
    if episodes < 2 {
        return Err(ExperimentError::Input { input: "--episodes".into(), reason: "must be at least 2".into() });
    }
    let steps = aware_lifecycle::run::episodes_steps(episodes, config.episode_steps)?;
    let manager = manager_config(config);
    match which {
        Which::Table3 | Which::Fig10 => {
            let workload = workload(config, steps)?;
            let mut plan = Plan::new(&workload, steps, config.episode_steps)?;
            if which == Which::Table3 {
                plan.windows = plan.segments(4);
            }
            // The converged reference trains beside the other three (nothing is shared), and
            // the progress shown is its own; table3, without it, shows the other three's.
            let fig10 = which == Which::Fig10;
            let shown: &dyn Progress = if fig10 { &Silent } else { progress };
            let (others, reference) = beside(
                || {
                    let aware = run_manager(&workload, &plan, Variant::Aware, &manager, config.seed, &mut (), shown)?;
                    let scratch =
                        run_manager(&workload, &plan, Variant::NoBootstrap, &manager, config.seed, &mut (), shown)?;
                    let mpa = run_fallback(&workload, &plan, &PolicyName::Mpa, shown)?;
                    Ok::<_, ExperimentError>((aware, scratch, mpa))
                },
                || {
                    if !fig10 {
                        return Ok::<_, ExperimentError>((None, None));
                    }
                    let (agent, training) = converged::train(
                        &workload,
                        config.episode_steps,
                        None,
                        config.training(),
                        &manager,
                        config.seed,
                        progress,
                    )?;
                    let arm = converged::evaluate(&workload, &plan, agent, &training, &manager, progress)?;
                    Ok((Some(arm), Some(training)))
                },
            );
            let (aware, scratch, mpa) = others?;
            let (converged, training) = reference?;
            let mut policies = vec![aware.row.clone(), scratch.row.clone(), mpa.row.clone()];
            policies.extend(converged.as_ref().map(|c| c.row.clone()));
            let segments = [&scratch, &mpa, &aware]
                .iter()
                .flat_map(|arm| {
                    arm.windows.iter().enumerate().map(|(k, w)| Segment {
                        segment: k + 1,
                        episode_range: format!("{}..{}", w.episodes.start, w.episodes.end),
                        row: w.row.clone(),
                    })
                })
                .collect();
            let violations = |p: &str| row(&policies, p).map_or(0, |r| r.summary.slo_violations);
            let checks = Checks {
                aware_beats_mpa: aware.row.beats(&mpa.row),
                converged_beats_mpa: converged.as_ref().is_some_and(|c| c.row.beats(&mpa.row)),
                no_bootstrap_violation_ratio: Some(match violations("aware") {
                    0 => None,
                    a => Some(violations("no-bootstrap") as f64 / a as f64),
                }),
                aware_reward_shortfall_vs_converged: None,
                aware_above_no_retrain: None,
                reward_misranked: reward_misrankings(
                    &[Some(&aware), Some(&scratch), Some(&mpa), converged.as_ref()]
                        .into_iter()
                        .flatten()
                        .map(|arm| (arm.row.policy.as_str(), arm.per_app.as_slice()))
                        .collect::<Vec<_>>(),
                ),
            };
            Ok(LifecycleReport {
                experiment: which.name(),
                quick: config.quick,
                seed: config.seed,
                apps: workload.apps.len(),
                episodes,
                episode_steps: config.episode_steps,
                alpha: workload.profile.reward.alpha,
                agent: config.agent,
                policies,
                segments,
                scenarios: Vec::new(),
                converged_training: training,
                aware_apps_served: served(&aware),
                checks,
            })
        }
        Which::Fig9 => fig9(config, episodes, &manager, progress),
    }
}

/// Every scenario's window, merged per policy into one row.
#[derive(Default)]
struct Merged {
    per_app: Vec<Summary>,
    latencies: LatencyHistogram,
}

fn fig9(
    config: &LifecycleConfig,
    episodes: u64,
    manager: &ManagerConfig,
    progress: &dyn Progress,
) -> Result<LifecycleReport, ExperimentError> {
    let steps = aware_lifecycle::run::episodes_steps(episodes, config.episode_steps)?;
    // The scenario begins at the first interval of the episode 5/8 of the way through: time
    // for the apps to bootstrap and reach SERVING first, and time after it to retrain.
    let at_step = (episodes * 5 / 8).max(1) * config.episode_steps;
    let labels = ["aware", "no-retrain", "mpa", "converged"];
    let mut merged: Vec<Merged> = labels.iter().map(|_| Merged::default()).collect();
    let mut scenarios = Vec::new();
    let mut served_apps = 0;
    let unchanged = workload(config, steps)?;
    let kinds = fig9_scenarios();
    for (k, &kind) in kinds.iter().enumerate() {
        let mut workload = unchanged.clone();
        workload.sim.scenario = Some(Scenario { kind, at_step: Some(at_step) });
        let mut plan = Plan::new(&workload, steps, config.episode_steps)?;
        let from = plan.change_episode().unwrap_or(0);
        plan.windows = std::iter::once(from..episodes).collect();
        progress.message(&format!("fig9: scenario {} of {} ({})", k + 1, kinds.len(), kind.name()));
        // The converged reference trains beside the other three (nothing is shared); the
        // progress shown is its own.
        let (others, reference) = beside(
            || {
                let aware = run_manager(&workload, &plan, Variant::Aware, manager, config.seed, &mut (), &Silent)?;
                let no_retrain =
                    run_manager(&workload, &plan, Variant::NoRetrain, manager, config.seed, &mut (), &Silent)?;
                let mpa = run_fallback(&workload, &plan, &PolicyName::Mpa, &Silent)?;
                Ok::<_, ExperimentError>((aware, no_retrain, mpa))
            },
            || {
                let changed = Scenario { kind, at_step: Some(0) };
                let (agent, training) = converged::train(
                    &workload,
                    config.episode_steps,
                    Some(changed),
                    config.training(),
                    manager,
                    config.seed,
                    progress,
                )?;
                let arm = converged::evaluate(&workload, &plan, agent, &training, manager, progress)?;
                Ok::<_, ExperimentError>((arm, training))
            },
        );
        let (aware, no_retrain, mpa) = others?;
        let (converged, training) = reference?;
        served_apps += served(&aware);
        let mut rows = Vec::new();
        for (slot, arm) in merged.iter_mut().zip([&aware, &no_retrain, &mpa, &converged]) {
            let window = arm.windows.first().ok_or_else(|| ExperimentError::Input {
                input: "--episodes".into(),
                reason: "the scenario leaves no episode to score".into(),
            })?;
            slot.per_app.extend(window.per_app.iter().cloned());
            slot.latencies.merge(&window.latencies);
            rows.push(window.row.clone());
        }
        scenarios.push(ScenarioRows {
            scenario: kind.name().into(),
            at_step,
            policies: rows,
            converged_training: training,
            aware_stages: aware.stages.clone(),
        });
    }
    let policies: Vec<PolicyRow> = labels
        .iter()
        .zip(&merged)
        .map(|(label, m)| PolicyRow::new(label, aggregate(label, &m.per_app, &m.latencies), config.episode_steps))
        .collect();
    let get = |p: &str| row(&policies, p).expect("every label has a row");
    let (aware, no_retrain, mpa, conv) = (get("aware"), get("no-retrain"), get("mpa"), get("converged"));
    let checks = Checks {
        aware_beats_mpa: aware.beats(mpa),
        converged_beats_mpa: conv.beats(mpa),
        no_bootstrap_violation_ratio: None,
        aware_reward_shortfall_vs_converged: Some(
            (conv.summary.mean_reward - aware.summary.mean_reward) / conv.summary.mean_reward.abs().max(1e-12),
        ),
        aware_above_no_retrain: Some(
            aware.summary.mean_reward > no_retrain.summary.mean_reward
                && aware.summary.slo_violations < no_retrain.summary.slo_violations,
        ),
        reward_misranked: reward_misrankings(
            &labels.iter().zip(&merged).map(|(l, m)| (*l, m.per_app.as_slice())).collect::<Vec<_>>(),
        ),
    };
    Ok(LifecycleReport {
        experiment: "fig9",
        quick: config.quick,
        seed: config.seed,
        apps: unchanged.apps.len(),
        episodes,
        episode_steps: config.episode_steps,
        alpha: unchanged.profile.reward.alpha,
        agent: config.agent,
        policies,
        segments: Vec::new(),
        scenarios,
        converged_training: None,
        aware_apps_served: served_apps,
        checks,
    })
}

/// `aware run --meta DIR`: AWARE's lifecycle manager with the meta-learner kept in `dir`
/// (`aware train-meta --out DIR`): its base learner, conditioned on every app's workload
/// embedding, is the agent; the embeddings are read from the episodes the pool's fallback drove
/// and judged by the pool's out-of-distribution detector.
pub fn run_with_meta(
    spec: &aware_lifecycle::run::RunSpec,
    dir: &std::path::Path,
    progress: &dyn Progress,
) -> Result<aware_lifecycle::run::RunReport, ExperimentError> {
    let trained = aware_meta::saved::Trained::load(dir, spec.seed)?;
    if trained.pool.fallback != spec.manager.fallback.to_string() {
        return Err(ExperimentError::Input {
            input: "--meta".into(),
            reason: format!(
                "{} was meta-trained on {}'s episodes; the run's fallback is {} (--fallback {})",
                dir.display(),
                trained.pool.fallback,
                spec.manager.fallback,
                trained.pool.fallback
            ),
        });
    }
    if trained.pool.episode_steps != spec.manager.episode_steps {
        return Err(ExperimentError::Input {
            input: "--meta".into(),
            reason: format!(
                "{} was meta-trained on episodes of {} intervals, and its embeddings are read from such episodes; the run's are {} (--episode-steps {})",
                dir.display(),
                trained.pool.episode_steps,
                spec.manager.episode_steps,
                trained.pool.episode_steps
            ),
        });
    }
    // The meta-learner's checkpoint metadata's hash: wherever the directory is moved.
    let id = trained.pool.meta_metadata_sha256.clone();
    let (agent, mut embedder) = trained.into_lifecycle(&format!("{}@", aware_lifecycle::record::AGENT));
    let agent = match agent {
        aware_meta::saved::BaseAgent::Ddpg(a) => LifecycleAgent::Ddpg(a),
        aware_meta::saved::BaseAgent::Ppo(a) => LifecycleAgent::ppo(a, spec.seed),
    };
    let meta = aware_lifecycle::run::MetaRun { agent, embedder: &mut embedder, id };
    Ok(aware_lifecycle::run::run_with(spec, Some(meta), progress)?)
}
