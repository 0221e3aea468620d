//! `aware experiment`: the heavier, end-to-end checks of the project's claims, each with a
//! `--quick` size that CI runs once. An experiment prints its verdict and exits 1 when its bar
//! is not met.

use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::{Context, Result};
use aware_env::action::ActionKind;
use serde::Serialize;

use super::train::{Trained, train_agent};
use super::{AppsArgs, SimArgs, VerticalUpdateArg};
use crate::learner::{Algorithm, new_agent};
use crate::policy::PolicyName;
use crate::{progress, runner};

#[derive(clap::Subcommand, Debug)]
pub enum Experiment {
    /// DDPG and PPO, trained on one simulated application with diurnal load, against the MPA
    /// default on held-out traces of the same application.
    Agents(AgentsArgs),
    /// DDPG on Pendulum-v1, DQN and PPO on CartPole-v1 (Gymnasium's dynamics) with
    /// rl-baselines3-zoo's hyper-parameters: the agents where every practitioner knows the answer.
    Classic(ClassicArgs),
}

#[derive(clap::Args, Debug)]
pub struct ClassicArgs {
    /// Every seed of the run derives from this one.
    #[arg(long, default_value_t = 0)]
    seed: u64,
    /// A CI smoke size: fewer steps and smaller networks (need not reach the levels).
    #[arg(long)]
    quick: bool,
    #[arg(long)]
    json: bool,
}

#[derive(clap::Args, Debug)]
pub struct AgentsArgs {
    /// A smaller run for CI: fewer training episodes and held-out traces.
    #[arg(long)]
    quick: bool,
    /// Where the trained checkpoints go (default: a new directory under the system temp dir).
    #[arg(long)]
    out: Option<PathBuf>,
    #[arg(long)]
    json: bool,
}

pub fn run(experiment: Experiment) -> Result<ExitCode> {
    match experiment {
        Experiment::Agents(a) => agents(a),
        Experiment::Classic(a) => classic(a),
    }
}

/// Exit 0 whenever training completes: the levels are judged from `results`.
fn classic(args: ClassicArgs) -> Result<ExitCode> {
    use aware_experiments::classic::{self, ClassicConfig, ClassicProgress};
    let config = if args.quick { ClassicConfig::quick(args.seed) } else { ClassicConfig::full(args.seed) };
    let bar = std::cell::RefCell::new(None::<(String, indicatif::ProgressBar)>);
    let report = classic::run(&config, &|p| {
        if let ClassicProgress::Episode { algorithm, task, step, total, .. } = p {
            let name = format!("{algorithm} {task}");
            let mut bar = bar.borrow_mut();
            if bar.as_ref().is_none_or(|(n, _)| *n != name) {
                if let Some((_, old)) = bar.take() {
                    old.finish_and_clear();
                }
                *bar = Some((name.clone(), progress::bar(*total, &name)));
            }
            if let Some((_, b)) = bar.as_ref() {
                b.set_position(*step);
            }
        }
    })?;
    if let Some((_, b)) = bar.borrow_mut().take() {
        b.finish_and_clear();
    }
    if args.json {
        println!("{}", serde_json::to_string_pretty(&report)?);
    } else {
        println!(
            "{:<6} {:<9} {:>7} {:>12} {:>10} {:>10} {:>8}",
            "algo", "task", "steps", "mean_return", "untrained", "level", "wall_s"
        );
        for (row, d) in report.results.iter().zip(&report.details) {
            println!(
                "{:<6} {:<9} {:>7} {:>12.1} {:>10.1} {:>10.1} {:>8.1}",
                row.algorithm, row.task, row.steps, row.mean_return, d.untrained_return, d.level, d.wall_s
            );
        }
        println!("seed {}, {:.0} s in all", report.seed, report.wall_s);
    }
    Ok(ExitCode::SUCCESS)
}

/// The fixed problem: application 0 of seed 7 (a single-segment service whose compressed day
/// of 1,500 s is exactly one 100-step episode), the default profile with α = 0.7.
const APP_SEED: u64 = 7;
const DAY_S: f64 = 1_500.0;
const EPISODE_STEPS: u64 = 100;
/// Weight of SLO preservation in the reward. At the papers' α = 0.3 the utilisation terms
/// outweigh it and starving the application (every interval violating) scores highest, so
/// the reward and the "no more SLO violations" bar cannot both be met; 0.7 makes them agree.
const ALPHA: f64 = 0.7;
const FIRST_TRAINING_TRACE: u64 = 1_000;
const FIRST_HELD_OUT_TRACE: u64 = 5_000;

struct Plan {
    ddpg_episodes: u64,
    ppo_episodes: u64,
    held_out_traces: u64,
    /// Steps per held-out trace (10 episodes).
    evaluation_steps: u64,
}

#[derive(Debug, Serialize)]
struct PolicyResult {
    policy: String,
    checkpoint: Option<String>,
    training_episodes: Option<u64>,
    mean_episode_reward: f64,
    slo_violations: u64,
    cpu_utilisation: f64,
    memory_utilisation: f64,
    core_seconds: f64,
    dropped_requests: f64,
    scaling_actions: u64,
    direction_reversals: u64,
    /// Reward above MPA's and no more SLO violations (`None` for MPA itself).
    beats_mpa: Option<bool>,
}

#[derive(Debug, Serialize)]
struct Report {
    experiment: &'static str,
    quick: bool,
    app_seed: u64,
    day_seconds: f64,
    episode_steps: u64,
    alpha: f64,
    training_trace_seeds: String,
    held_out_trace_seeds: String,
    evaluation_steps_per_trace: u64,
    policies: Vec<PolicyResult>,
    passed: bool,
}

fn agents(args: AgentsArgs) -> Result<ExitCode> {
    let plan = if args.quick {
        Plan { ddpg_episodes: 100, ppo_episodes: 1_000, held_out_traces: 3, evaluation_steps: 1_000 }
    } else {
        Plan { ddpg_episodes: 200, ppo_episodes: 2_000, held_out_traces: 10, evaluation_steps: 1_000 }
    };
    let out = args.out.clone().unwrap_or_else(|| {
        let stamp = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map_or(0, |d| d.as_millis());
        std::env::temp_dir().join(format!("aware-experiment-agents-{}-{stamp}", std::process::id()))
    });
    let apps = AppsArgs { apps: 1, seed: APP_SEED, trace_seed: Some(FIRST_TRAINING_TRACE), day_seconds: DAY_S };
    let sim = SimArgs {
        steps: EPISODE_STEPS,
        scenario: None,
        profile: None,
        trace: None,
        vertical_update: VerticalUpdateArg::InPlace,
    };
    let mut prepared = sim.prepare(&apps)?;
    prepared.profile.reward.alpha = ALPHA;

    let learners = [
        ("ddpg", Algorithm::Ddpg, ActionKind::Continuous, plan.ddpg_episodes),
        ("ppo", Algorithm::Ppo, ActionKind::Continuous, plan.ppo_episodes),
    ];
    let mut policies = vec![("mpa", PolicyName::Mpa, None)];
    for (name, algorithm, kind, episodes) in learners {
        let dir = out.join(name);
        if dir.join(aware_agents::checkpoint::METADATA).exists() {
            anyhow::bail!("--out: {} already holds a checkpoint; choose another directory", dir.display());
        }
        let bar = progress::bar(episodes, &format!("train {name}"));
        let agent = new_agent(algorithm, kind, APP_SEED)?;
        let Trained { agent, total_steps, .. } =
            train_agent(&prepared, &apps, EPISODE_STEPS, episodes, agent, kind, &bar)?;
        bar.finish_and_clear();
        std::fs::create_dir_all(&dir).with_context(|| format!("{}: cannot create", dir.display()))?;
        agent.save(&dir, &aware_env::StateEncoder::space(), total_steps)?;
        policies.push((name, PolicyName::Rl(dir), Some(episodes)));
    }

    let bar = progress::bar(plan.held_out_traces * policies.len() as u64 * plan.evaluation_steps, "held-out traces");
    let mut results = Vec::new();
    for (name, policy, episodes) in &policies {
        let mut per_app = Vec::new();
        for k in 0..plan.held_out_traces {
            let mut setup = prepared.setup(&apps, plan.evaluation_steps);
            setup.seed = FIRST_HELD_OUT_TRACE + k;
            per_app.extend(runner::run(&setup, policy, &bar)?.per_app);
        }
        let s = runner::aggregate(&policy.to_string(), &per_app);
        results.push(PolicyResult {
            policy: name.to_string(),
            checkpoint: match policy {
                PolicyName::Rl(dir) => Some(dir.display().to_string()),
                _ => None,
            },
            training_episodes: *episodes,
            mean_episode_reward: s.mean_reward * EPISODE_STEPS as f64,
            slo_violations: s.slo_violations,
            cpu_utilisation: s.cpu_utilisation,
            memory_utilisation: s.memory_utilisation,
            core_seconds: s.core_seconds,
            dropped_requests: s.dropped_requests,
            scaling_actions: s.scaling_actions,
            direction_reversals: s.direction_reversals,
            beats_mpa: None,
        });
    }
    bar.finish_and_clear();
    let (mpa_reward, mpa_violations) = (results[0].mean_episode_reward, results[0].slo_violations);
    for r in results.iter_mut().skip(1) {
        r.beats_mpa = Some(r.mean_episode_reward > mpa_reward && r.slo_violations <= mpa_violations);
    }
    let passed = results.iter().all(|r| r.beats_mpa != Some(false));
    let report = Report {
        experiment: "agents",
        quick: args.quick,
        app_seed: APP_SEED,
        day_seconds: DAY_S,
        episode_steps: EPISODE_STEPS,
        alpha: ALPHA,
        training_trace_seeds: format!("{FIRST_TRAINING_TRACE}…"),
        held_out_trace_seeds: format!("{FIRST_HELD_OUT_TRACE}–{}", FIRST_HELD_OUT_TRACE + plan.held_out_traces - 1),
        evaluation_steps_per_trace: plan.evaluation_steps,
        policies: results,
        passed,
    };
    if args.json {
        println!("{}", serde_json::to_string_pretty(&report)?);
    } else {
        println!(
            "app {} of seed {APP_SEED}, {} s day = one {EPISODE_STEPS}-step episode, α = {ALPHA}; {} held-out traces × {} steps",
            0, DAY_S, plan.held_out_traces, plan.evaluation_steps
        );
        println!(
            "{:<6} {:>9} {:>10} {:>10} {:>7} {:>7} {:>12} {:>9} {:>8}",
            "policy", "episodes", "ep reward", "slo viol", "cpu %", "mem %", "core-s", "actions", "beats"
        );
        for r in &report.policies {
            println!(
                "{:<6} {:>9} {:>10.2} {:>10} {:>7.1} {:>7.1} {:>12.0} {:>9} {:>8}",
                r.policy,
                r.training_episodes.map_or("-".into(), |e| e.to_string()),
                r.mean_episode_reward,
                r.slo_violations,
                r.cpu_utilisation * 100.0,
                r.memory_utilisation * 100.0,
                r.core_seconds,
                r.scaling_actions,
                r.beats_mpa.map_or("-", |b| if b { "yes" } else { "NO" })
            );
        }
        println!("checkpoints in {}", out.display());
        println!("{}", if passed { "PASS: every agent beats MPA" } else { "FAIL: an agent does not beat MPA" });
    }
    Ok(if passed { ExitCode::SUCCESS } else { ExitCode::from(1) })
}
