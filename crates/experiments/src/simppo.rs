//! SIMPPO (SoCC'22): many autoscaling agents on one shared cluster.
//!
//! - **Serving**: `apps` applications share one simulated cluster sized `headroom` × their
//!   reference reservation, every allocation requesting `request_ratio` × its CPU limit
//!   (Burstable pods below 1, so tenants contend on over-committed nodes). Rows, every one
//!   but the reference evaluated in that cluster on the same held-out traces:
//!   `s-rl-single-tenant` (one PPO agent per application, trained and evaluated alone on its
//!   share of the nodes: the reference), `s-rl-multi-tenant` (those agents evaluated together),
//!   `simppo` and `simppo-all` (trained and evaluated in the shared cluster), `mpa`.
//!   Degradation = a row's `p99_latency_ms` / the reference's − 1.
//! - **Incremental**: SIMPPO starts with `apps` agents, `added` more join at episode
//!   `add_at`, `added` of the original ones leave at `remove_at`; team reward per training
//!   episode, the drop at each change and the episodes to re-converge, with and without
//!   parameter sharing.
//! - **Scale**: 10, 100, 1,000 agents — policy compute per agent per step (the batched greedy
//!   pass), resident memory per agent, and the team reward after training.

use std::time::Instant;

use aware_agents::ppo::PpoConfig;
use aware_lab::evaluate::{PolicyRow, aggregate};
use aware_lab::policy::{Policy, PolicyName};
use aware_lab::progress::{Progress, Silent};
use aware_lab::rollout::{Arena, Recommenders, rollout};
use aware_lab::score::{LatencyHistogram, Scorer, Summary};
use aware_lab::workload::{Workload, WorkloadSpec};
use aware_simppo::category::Category;
use aware_simppo::driver::{Team, TeamConfig, Variant};
use aware_simppo::tenant::Tenancy;
use serde::Serialize;

use crate::ExperimentError;

/// The sizes of a run.
#[derive(Debug, Clone)]
pub struct SimppoConfig {
    pub seed: u64,
    pub quick: bool,
    /// Applications sharing the cluster in the serving comparison and at the start of the
    /// incremental run.
    pub apps: usize,
    /// Cluster capacity over the applications' reference reservation.
    pub headroom: f64,
    /// CPU request over CPU limit of every allocation in the shared cluster — the pods the
    /// applications start with, the agents' decoded actions, MPA's recommendations — in
    /// (0, 1]. 1 is the Guaranteed QoS class; below 1 pods are Burstable: the scheduler (and
    /// the cluster's size, `headroom` × the reference requests) counts the request, a pod may
    /// use up to its limit, and co-located tenants slow each other when their usage
    /// over-commits a node. Default 0.5: CPU requests at half the limit, a common Burstable
    /// setting (a 2× CPU over-commit). MPA's HPA, which measures utilisation against
    /// requests, runs at the profile's target / ratio, the same operating point over limits.
    pub request_ratio: f64,
    /// Intervals per episode (SIMPPO: 50).
    pub episode_steps: u64,
    /// Training episodes of every serving row.
    pub train_episodes: u64,
    /// Held-out evaluation episodes per serving row.
    pub eval_episodes: u64,
    /// Incremental run: agents added, the episode they join, the episode as many leave, the
    /// last episode.
    pub added: usize,
    pub add_at: u64,
    pub remove_at: u64,
    pub incremental_episodes: u64,
    /// Agent counts of the scale rows, and their training episodes.
    pub scale_agents: Vec<usize>,
    pub scale_episodes: u64,
    pub ppo: PpoConfig,
    /// Where the incremental-training plot goes (PNG), if anywhere.
    pub plot: Option<std::path::PathBuf>,
}

impl SimppoConfig {
    /// Minutes on two cores.
    pub fn quick(seed: u64) -> Self {
        Self {
            seed,
            quick: true,
            apps: 12,
            headroom: 1.25,
            request_ratio: 0.5,
            episode_steps: 50,
            train_episodes: 300,
            eval_episodes: 4,
            added: 5,
            add_at: 200,
            remove_at: 400,
            incremental_episodes: 600,
            scale_agents: vec![10, 100, 1000],
            scale_episodes: 3,
            ppo: PpoConfig::default(),
            plot: None,
        }
    }

    /// The full size.
    pub fn full(seed: u64) -> Self {
        Self {
            quick: false,
            train_episodes: 1000,
            eval_episodes: 10,
            add_at: 500,
            remove_at: 1000,
            incremental_episodes: 1500,
            scale_episodes: 10,
            ..Self::quick(seed)
        }
    }

    fn check(&self) -> Result<(), ExperimentError> {
        let bad = |input: &str, reason: String| Err(ExperimentError::Input { input: input.into(), reason });
        if !(self.headroom.is_finite() && self.headroom > 0.0) {
            return bad("--headroom", format!("{} is not a positive number", self.headroom));
        }
        if self.headroom > aware_simppo::tenant::MAX_HEADROOM {
            return bad("--headroom", format!("{:e} is above {}", self.headroom, aware_simppo::tenant::MAX_HEADROOM));
        }
        if !(self.request_ratio > 0.0 && self.request_ratio <= 1.0) {
            return bad("--request-ratio", format!("{} is not in (0, 1]", self.request_ratio));
        }
        // A plot that cannot be written is refused before the run, not after it.
        if let Some(path) = &self.plot {
            aware_lab::plot::check_path(path).or_else(|reason| bad("--plot", reason))?;
        }
        if self.apps < 2 {
            return bad("--apps", format!("{}: a shared cluster needs at least 2 applications", self.apps));
        }
        if self.added > self.apps {
            return bad(
                "--apps",
                format!(
                    "{}: the incremental run adds {} agents and later removes as many, so it needs at least {} applications",
                    self.apps, self.added, self.added
                ),
            );
        }
        if !(0 < self.add_at && self.add_at < self.remove_at && self.remove_at < self.incremental_episodes) {
            return bad("add_at", "the changes must fall in order within the incremental run".into());
        }
        if self.train_episodes == 0 || self.eval_episodes == 0 || self.episode_steps == 0 {
            return bad("episodes", "training, evaluation and episode lengths must be positive".into());
        }
        Ok(())
    }
}

/// A serving row: `compare --json`'s fields (with `p99_latency_ms`) plus the degradation.
#[derive(Debug, Clone, Serialize)]
pub struct SimppoRow {
    #[serde(flatten)]
    pub row: PolicyRow,
    /// `p99_latency_ms` / the reference's − 1 (null for the reference itself or without a p99).
    pub degradation: Option<f64>,
    /// Mean over applications of (the application's p99 / its SLO): a latency figure every
    /// application weighs in equally (the pooled p99 follows the latency-heaviest one).
    pub mean_p99_over_slo: Option<f64>,
    /// `mean_p99_over_slo` / the reference's − 1.
    pub normalised_degradation: Option<f64>,
    /// Training wall time, seconds (0 for `mpa`).
    pub training_seconds: f64,
}

/// One membership change of the incremental run.
#[derive(Debug, Clone, Serialize)]
pub struct IncrementalRow {
    pub parameter_sharing: bool,
    /// `add` or `remove`.
    pub change: String,
    pub at_episode: u64,
    pub agents_before: usize,
    pub agents_after: usize,
    /// Mean team reward per interval over the 10 training episodes before the change.
    pub reward_before: f64,
    /// The new team's converged level: mean of the last 10 episodes before the next change.
    pub reward_converged: f64,
    /// Team reward of the first episode after the change.
    pub reward_after: f64,
    /// (reward_before − reward_after) / |reward_before|.
    pub drop_fraction: f64,
    /// Episodes after the change until the 10-episode moving average is within 2 % of the
    /// new team's converged level (the mean of the last 10 episodes before the next change);
    /// `censored` when only that last window reaches it.
    pub episodes_to_reconverge: u64,
    pub censored: bool,
}

/// The team reward per training episode of one incremental run.
#[derive(Debug, Clone, Serialize)]
pub struct IncrementalCurve {
    pub parameter_sharing: bool,
    pub team_reward: Vec<f64>,
    pub agents: Vec<usize>,
}

/// One scale measurement.
#[derive(Debug, Clone, Serialize)]
pub struct ScaleRow {
    pub agents: usize,
    /// Batched greedy policy compute, microseconds per agent per step.
    pub policy_us_per_agent_step: f64,
    /// Sampling policy compute while training (per-agent burn forward), microseconds.
    pub training_policy_us_per_agent_step: f64,
    /// Growth of the process's resident memory from before the team was built to after its
    /// training, per agent (networks, optimiser state, rollouts, coordinator entry).
    pub memory_bytes_per_agent: f64,
    /// Parameters of one agent (policy, critic) × 4 bytes.
    pub model_bytes_per_agent: usize,
    /// Mean team reward per interval of a greedy episode after training.
    pub team_reward: f64,
    pub training_episodes: u64,
    pub wall_seconds: f64,
}

/// `aware experiment simppo --json`.
#[derive(Debug, Clone, Serialize)]
pub struct SimppoReport {
    pub experiment: &'static str,
    pub seed: u64,
    pub quick: bool,
    pub apps: usize,
    pub nodes: usize,
    /// CPU request over CPU limit of every allocation (`SimppoConfig::request_ratio`).
    pub request_ratio: f64,
    pub episode_steps: u64,
    pub train_episodes: u64,
    pub eval_episodes: u64,
    pub policies: Vec<SimppoRow>,
    /// Per row name, its degradation (also in the rows): `s-rl-multi-tenant`'s and `simppo`'s.
    pub s_rl_multi_tenant_degradation: Option<f64>,
    pub simppo_degradation: Option<f64>,
    /// `simppo` beats `mpa` in the operator's sense.
    pub simppo_beats_mpa: bool,
    pub incremental: Vec<IncrementalRow>,
    pub incremental_curves: Vec<IncrementalCurve>,
    pub scale: Vec<ScaleRow>,
    /// The incremental-training plot's path, when `--plot` asked for one.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub plot: Option<String>,
    pub wall_seconds: f64,
}

fn train_seed(seed: u64, e: u64) -> u64 {
    seed.wrapping_mul(1_000_003).wrapping_add(10_000 + e)
}

/// Held-out traffic: seeds training never draws.
fn eval_seed(seed: u64, e: u64) -> u64 {
    seed.wrapping_mul(1_000_003).wrapping_add(900_000 + e)
}

/// `apps` applications of the run's seed, every allocation requesting `request_ratio` × its
/// CPU limit.
fn shared_workload(config: &SimppoConfig, apps: usize) -> Result<Workload, ExperimentError> {
    let spec = WorkloadSpec { apps, seed: config.seed, steps: config.episode_steps, ..Default::default() };
    let mut workload = Workload::load(&spec)?;
    workload.sim.cpu_request_ratio = config.request_ratio;
    Ok(workload)
}

/// A team of `variant`. `budget`: the training episodes it gets before it serves, over which
/// each agent's learning rate and clip range anneal to zero (CleanRL's `anneal_lr`), unless the
/// configuration sets its own schedule; `None` for a team that keeps learning (the incremental
/// run). With a constant rate the policy serving is whatever the last update left: on seed 3
/// of the learning test the last one shrank memory into an OOM loop on 3 of 5 held-out episodes.
fn team(
    config: &SimppoConfig,
    tenancy: &Tenancy,
    variant: Variant,
    sharing: bool,
    seed: u64,
    budget: Option<u64>,
) -> Team {
    let categories: Vec<Category> = tenancy.workload.apps.iter().map(Category::of).collect();
    let mut ppo = config.ppo.clone();
    if ppo.anneal_steps.is_none() {
        ppo.anneal_steps = budget.map(|episodes| episodes.saturating_mul(config.episode_steps));
    }
    Team::new(
        TeamConfig {
            variant,
            ppo,
            parameter_sharing: sharing,
            seed,
            heartbeat_timeout: 1,
            capacity: tenancy.capacity(),
        },
        categories,
    )
}

/// Trains `team` for `episodes` on its present applications in the shared cluster (or, with
/// `alone`, on application `alone`'s share); returns the team reward per episode.
fn train(
    team: &mut Team,
    tenancy: &Tenancy,
    alone: Option<(usize, &[usize])>,
    config: &SimppoConfig,
    episodes: u64,
    progress: &dyn Progress,
) -> Result<Vec<f64>, ExperimentError> {
    let steps = config.episode_steps;
    let mut arena = match alone {
        Some((app, shared)) => tenancy.alone(app, shared, steps, 0).map_err(aware_lab::LabError::from)?,
        None => tenancy.env(&team.presence(), steps, 0).map_err(aware_lab::LabError::from)?,
    };
    team.set_training(true);
    let mut curve = Vec::new();
    for e in 0..episodes {
        rollout(&mut arena, team, train_seed(config.seed, e), steps, &mut [], &Silent)?;
        curve.push(team.end_episode());
        progress.inc(1);
    }
    Ok(curve)
}

/// Greedy held-out episodes of `team` in `arena`, scored.
fn serve(
    team: &mut Team,
    arena: &mut dyn Arena,
    names: &[String],
    targets: &[f64],
    config: &SimppoConfig,
) -> Result<(Vec<Summary>, Vec<LatencyHistogram>), ExperimentError> {
    team.set_training(false);
    let mut scorer = Scorer::new(&*arena, names).with_cpu_targets(targets);
    for e in 0..config.eval_episodes {
        rollout(arena, team, eval_seed(config.seed, e), config.episode_steps, &mut [&mut scorer], &Silent)?;
        team.end_episode();
    }
    let latencies = scorer.latencies().to_vec();
    Ok((scorer.finish(&[]).0, latencies))
}

fn row(name: &str, per_app: &[Summary], latencies: &[LatencyHistogram], steps: u64, training: f64) -> SimppoRow {
    let mut merged = LatencyHistogram::default();
    latencies.iter().for_each(|h| merged.merge(h));
    let ratios: Vec<f64> =
        per_app.iter().filter_map(|s| s.p99_latency_ms.map(|p| p / s.slo_p99_ms)).filter(|r| r.is_finite()).collect();
    let mean_p99_over_slo = (!ratios.is_empty()).then(|| ratios.iter().sum::<f64>() / ratios.len() as f64);
    SimppoRow {
        row: PolicyRow::new(name, aggregate(name, per_app, &merged), steps),
        degradation: None,
        mean_p99_over_slo,
        normalised_degradation: None,
        training_seconds: training,
    }
}

/// The serving comparison; returns the rows and the shared cluster's node count.
fn serving(config: &SimppoConfig, progress: &dyn Progress) -> Result<(Vec<SimppoRow>, usize), ExperimentError> {
    let steps = config.episode_steps;
    let workload = shared_workload(config, config.apps)?;
    let all: Vec<usize> = (0..config.apps).collect();
    let tenancy = Tenancy::new(workload.clone(), &all, config.headroom).map_err(aware_lab::LabError::from)?;
    let names: Vec<String> = workload.apps.iter().map(|a| a.name.clone()).collect();
    let targets = workload.cpu_targets();
    let mut rows = Vec::new();

    // S-RL single-tenant: one agent per application, trained and evaluated alone on its share.
    progress.message("simppo: s-rl single-tenant");
    let start = Instant::now();
    let mut single = team(config, &tenancy, Variant::SRl, false, config.seed, None);
    let (mut per_app, mut lats) = (Vec::new(), Vec::new());
    let mut trained = Vec::new();
    for app in 0..config.apps {
        let mut alone = team(config, &tenancy, Variant::SRl, false, config.seed, Some(config.train_episodes));
        alone.add(app, None).map_err(aware_lab::LabError::from)?;
        train(&mut alone, &tenancy, Some((app, &all)), config, config.train_episodes, progress)?;
        let mut arena = tenancy.alone(app, &all, steps, 0).map_err(aware_lab::LabError::from)?;
        let (summaries, histograms) = serve(&mut alone, &mut arena, &names, &targets, config)?;
        per_app.push(summaries[app].clone());
        lats.push(histograms[app].clone());
        trained.push(alone.take_agent(app).ok_or_else(|| ExperimentError::Input {
            input: "s-rl".into(),
            reason: format!("application {app} lost its agent"),
        })?);
    }
    let single_seconds = start.elapsed().as_secs_f64();
    rows.push(row("s-rl-single-tenant", &per_app, &lats, steps, single_seconds));

    // S-RL multi-tenant: the same agents together in the shared cluster.
    progress.message("simppo: s-rl multi-tenant");
    for (app, agent) in trained.into_iter().enumerate() {
        single.insert_agent(app, agent).map_err(aware_lab::LabError::from)?;
    }
    let mut shared = tenancy.env(&vec![true; config.apps], steps, 0).map_err(aware_lab::LabError::from)?;
    let (s, l) = serve(&mut single, &mut shared, &names, &targets, config)?;
    rows.push(row("s-rl-multi-tenant", &s, &l, steps, single_seconds));

    for (name, variant) in [("simppo", Variant::Simppo), ("simppo-all", Variant::SimppoAll)] {
        progress.message(&format!("simppo: {name}"));
        let start = Instant::now();
        let mut t = team(config, &tenancy, variant, true, config.seed, Some(config.train_episodes));
        for app in 0..config.apps {
            t.add(app, None).map_err(aware_lab::LabError::from)?;
        }
        train(&mut t, &tenancy, None, config, config.train_episodes, progress)?;
        let seconds = start.elapsed().as_secs_f64();
        let (s, l) = serve(&mut t, &mut shared, &names, &targets, config)?;
        rows.push(row(name, &s, &l, steps, seconds));
    }

    progress.message("simppo: mpa");
    let mpa: PolicyName = "mpa"
        .parse()
        .map_err(|e: aware_lab::ParseError| ExperimentError::Input { input: "mpa".into(), reason: e.to_string() })?;
    // The HPA's utilisation is usage over *requests*; the profile's target (and the agents'
    // utilisation) is over limits. The same target over limits is target / ratio over
    // requests, so MPA runs at the operating point it has with Guaranteed pods (without it,
    // it would reserve 1 / ratio × as many cores for the same usage).
    let policies = (0..config.apps)
        .map(|i| {
            let mut profile = workload.app_profile(i);
            profile.targets.cpu_utilisation /= config.request_ratio;
            Policy::build(&mpa, &profile, Some(&workload.apps[i]), Some(shared.cluster().slo_p99_ms(i)))
        })
        .collect::<Result<Vec<_>, _>>()?;
    let mut driver = Recommenders::new(policies);
    let mut scorer = Scorer::new(&shared, &names).with_cpu_targets(&targets);
    for e in 0..config.eval_episodes {
        rollout(&mut shared, &mut driver, eval_seed(config.seed, e), steps, &mut [&mut scorer], &Silent)?;
    }
    let l = scorer.latencies().to_vec();
    let (s, _) = scorer.finish(&driver.refusals);
    rows.push(row("mpa", &s, &l, steps, 0.0));

    let reference = rows[0].row.summary.p99_latency_ms;
    let normalised = rows[0].mean_p99_over_slo;
    for r in rows.iter_mut().skip(1) {
        r.degradation = reference.zip(r.row.summary.p99_latency_ms).map(|(a, b)| b / a - 1.0);
        r.normalised_degradation = normalised.zip(r.mean_p99_over_slo).map(|(a, b)| b / a - 1.0);
    }
    Ok((rows, tenancy.nodes))
}

/// The drop and re-convergence after a change at episode `at` of `curve`, whose segment runs
/// to `end`: the level before (mean of the `window` episodes before the change), the first
/// episode after it, the drop, and the episodes until the `window`-episode moving average is
/// within 2 % of the segment's converged level (the mean of its last `window` episodes) —
/// `censored` when only the segment's last window gets there.
fn reconvergence(curve: &[f64], at: usize, window: usize, end: usize) -> (f64, f64, f64, u64, bool) {
    let mean = |s: &[f64]| s.iter().sum::<f64>() / s.len().max(1) as f64;
    let before = mean(&curve[at.saturating_sub(window)..at]);
    let after = curve.get(at).copied().unwrap_or(f64::NAN);
    let drop = (before - after) / before.abs().max(1e-9);
    let w = window.min(end - at).max(1);
    let level = mean(&curve[end - w..end]);
    let bar = level - 0.02 * level.abs();
    for e in at + w - 1..end {
        if mean(&curve[e + 1 - w..=e]) >= bar {
            return (before, after, drop, (e + 1 - at) as u64, e + 1 == end);
        }
    }
    (before, after, drop, (end - at) as u64, true)
}

fn incremental(
    config: &SimppoConfig,
    progress: &dyn Progress,
) -> Result<(Vec<IncrementalRow>, Vec<IncrementalCurve>), ExperimentError> {
    let steps = config.episode_steps;
    let roster = config.apps + config.added;
    let workload = shared_workload(config, roster)?;
    let initial: Vec<usize> = (0..config.apps).collect();
    let tenancy = Tenancy::new(workload, &initial, config.headroom).map_err(aware_lab::LabError::from)?;
    let (mut rows, mut curves) = (Vec::new(), Vec::new());
    for sharing in [true, false] {
        progress.message(&format!("simppo: incremental, parameter sharing {sharing}"));
        let mut t = team(config, &tenancy, Variant::Simppo, sharing, config.seed.wrapping_add(77), None);
        for &app in &initial {
            t.add(app, None).map_err(aware_lab::LabError::from)?;
        }
        let (mut curve, mut agents) = (Vec::new(), Vec::new());
        let mut e = 0;
        while e < config.incremental_episodes {
            if e == config.add_at {
                for app in config.apps..roster {
                    t.add(app, None).map_err(aware_lab::LabError::from)?;
                }
            }
            if e == config.remove_at {
                for app in 0..config.added {
                    t.remove(app, None).map_err(aware_lab::LabError::from)?;
                }
            }
            let next = if e < config.add_at {
                config.add_at
            } else if e < config.remove_at {
                config.remove_at
            } else {
                config.incremental_episodes
            };
            let mut arena = tenancy.env(&t.presence(), steps, 0).map_err(aware_lab::LabError::from)?;
            t.set_training(true);
            for k in e..next {
                rollout(&mut arena, &mut t, train_seed(config.seed, k), steps, &mut [], &Silent)?;
                curve.push(t.end_episode());
                agents.push(t.present().len());
                progress.inc(1);
            }
            e = next;
        }
        let window = 10usize.min(config.add_at as usize).max(1);
        for (change, at, end) in [
            ("add", config.add_at as usize, config.remove_at as usize),
            ("remove", config.remove_at as usize, config.incremental_episodes as usize),
        ] {
            let (before, after, drop, episodes, censored) = reconvergence(&curve, at, window, end);
            let w = window.min(end - at).max(1);
            let converged = curve[end - w..end].iter().sum::<f64>() / w as f64;
            rows.push(IncrementalRow {
                parameter_sharing: sharing,
                change: change.into(),
                at_episode: at as u64,
                agents_before: agents[at - 1],
                agents_after: agents[at],
                reward_before: before,
                reward_converged: converged,
                reward_after: after,
                drop_fraction: drop,
                episodes_to_reconverge: episodes,
                censored,
            });
        }
        curves.push(IncrementalCurve { parameter_sharing: sharing, team_reward: curve, agents });
    }
    Ok((rows, curves))
}

/// Resident memory of this process, bytes (Linux `/proc/self/statm`).
fn resident_bytes() -> Option<f64> {
    let statm = std::fs::read_to_string("/proc/self/statm").ok()?;
    let pages: f64 = statm.split_whitespace().nth(1)?.parse().ok()?;
    Some(pages * 4096.0)
}

fn scale(config: &SimppoConfig, progress: &dyn Progress) -> Result<Vec<ScaleRow>, ExperimentError> {
    let steps = config.episode_steps;
    let mut rows = Vec::new();
    for &n in &config.scale_agents {
        progress.message(&format!("simppo: scale, {n} agents"));
        let start = Instant::now();
        let workload = shared_workload(config, n)?;
        let all: Vec<usize> = (0..n).collect();
        let tenancy = Tenancy::new(workload, &all, config.headroom).map_err(aware_lab::LabError::from)?;
        let before = resident_bytes();
        let mut t = team(config, &tenancy, Variant::Simppo, true, config.seed, Some(config.scale_episodes));
        for app in 0..n {
            t.add(app, None).map_err(aware_lab::LabError::from)?;
        }
        t.reset_clock();
        train(&mut t, &tenancy, None, config, config.scale_episodes, progress)?;
        let training = t.policy_clock();
        let after = resident_bytes();
        let mut arena = tenancy.env(&t.presence(), steps, 0).map_err(aware_lab::LabError::from)?;
        t.set_training(false);
        t.reset_clock();
        rollout(&mut arena, &mut t, eval_seed(config.seed, 0), steps, &mut [], &Silent)?;
        let reward = t.end_episode();
        let serving = t.policy_clock();
        let model = t.agent(0).map_or(0, |a| a.weights().parameters().len() * 4);
        rows.push(ScaleRow {
            agents: n,
            policy_us_per_agent_step: serving.us_per_agent_step(),
            training_policy_us_per_agent_step: training.us_per_agent_step(),
            memory_bytes_per_agent: before.zip(after).map_or(f64::NAN, |(b, a)| (a - b).max(0.0) / n as f64),
            model_bytes_per_agent: model,
            team_reward: reward,
            training_episodes: config.scale_episodes,
            wall_seconds: start.elapsed().as_secs_f64(),
        });
    }
    Ok(rows)
}

/// Runs the whole experiment.
pub fn simppo(config: &SimppoConfig, progress: &dyn Progress) -> Result<SimppoReport, ExperimentError> {
    config.check()?;
    let start = Instant::now();
    let total = config.train_episodes * (config.apps as u64 + 2)
        + 2 * config.incremental_episodes
        + config.scale_agents.len() as u64 * config.scale_episodes;
    progress.start(total, "simppo");
    // Scale first: its resident-memory growth is then not hidden by memory the other phases
    // freed.
    let scale = scale(config, progress)?;
    let (policies, nodes) = serving(config, progress)?;
    let (incremental, incremental_curves) = incremental(config, progress)?;
    progress.finish();
    if let Some(path) = &config.plot {
        plot_incremental(path, config, &incremental_curves)?;
    }
    let find = |name: &str| policies.iter().find(|r| r.row.policy == name);
    let simppo_beats_mpa = match (find("simppo"), find("mpa")) {
        (Some(s), Some(m)) => s.row.beats(&m.row),
        _ => false,
    };
    Ok(SimppoReport {
        experiment: "simppo",
        seed: config.seed,
        quick: config.quick,
        apps: config.apps,
        nodes,
        request_ratio: config.request_ratio,
        episode_steps: config.episode_steps,
        train_episodes: config.train_episodes,
        eval_episodes: config.eval_episodes,
        s_rl_multi_tenant_degradation: find("s-rl-multi-tenant").and_then(|r| r.degradation),
        simppo_degradation: find("simppo").and_then(|r| r.degradation),
        simppo_beats_mpa,
        policies,
        incremental,
        incremental_curves,
        scale,
        plot: config.plot.as_ref().map(|p| p.display().to_string()),
        wall_seconds: start.elapsed().as_secs_f64(),
    })
}

/// Team reward per episode of the incremental runs, with and without parameter sharing, the
/// episodes where agents join and leave marked.
fn plot_incremental(
    path: &std::path::Path,
    config: &SimppoConfig,
    curves: &[IncrementalCurve],
) -> Result<(), ExperimentError> {
    let series: Vec<(String, Vec<(f64, f64)>)> = curves
        .iter()
        .map(|c| {
            let label = if c.parameter_sharing { "with parameter sharing" } else { "without parameter sharing" };
            (label.to_string(), c.team_reward.iter().enumerate().map(|(e, &r)| (e as f64, r)).collect())
        })
        .collect();
    let markers = [
        (config.add_at as f64, format!("+{} agents", config.added)),
        (config.remove_at as f64, format!("−{} agents", config.added)),
    ];
    aware_lab::plot::curves(
        path,
        &format!("SIMPPO incremental training ({} apps, seed {})", config.apps, config.seed),
        ("episode", "team reward"),
        &series,
        &markers,
    )?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reconvergence_is_read_against_the_new_level() {
        // Level 1.0, a change at 10 drops to 0.5, climbing by 0.1 per episode to a new level of 0.9.
        let mut curve = vec![1.0; 10];
        curve.extend((0..5).map(|k| 0.5 + 0.1 * k as f64));
        curve.extend(vec![0.9; 15]);
        let (before, after, drop, episodes, censored) = reconvergence(&curve, 10, 3, 30);
        assert_eq!((before, after), (1.0, 0.5));
        assert!((drop - 0.5).abs() < 1e-12);
        // Windows of 3 ending at episode 10 + k − 1: the first within 2 % of 0.9 (≥ 0.882) is
        // 0.8, 0.9, 0.9 (mean 0.867) no; 0.9, 0.9, 0.9 at k = 7.
        assert_eq!((episodes, censored), (7, false));
        // A segment still climbing at its end is censored.
        let rising: Vec<f64> = (0..20).map(|k| k as f64).collect();
        assert!(reconvergence(&rising, 5, 3, 20).4);
    }

    #[test]
    fn request_ratio_reaches_every_allocation() {
        use aware_core::{Cluster, ContainerResources};
        let config = SimppoConfig { apps: 3, request_ratio: 0.5, ..SimppoConfig::quick(3) };
        let workload = shared_workload(&config, config.apps).unwrap();
        let all: Vec<usize> = (0..config.apps).collect();
        let tenancy = Tenancy::new(workload.clone(), &all, config.headroom).unwrap();
        let burstable = |c: &ContainerResources| {
            c.requests.cpu_millicores == ((c.limits.cpu_millicores as f64 * 0.5).round() as u64).max(1)
                && c.requests.cpu_millicores > 0
                && c.requests.memory_bytes == c.limits.memory_bytes
        };
        // The cluster is sized by the requests: half the CPU of the Guaranteed one (or memory's).
        let guaranteed = Tenancy::new(
            shared_workload(&SimppoConfig { request_ratio: 1.0, ..config.clone() }, 3).unwrap(),
            &all,
            config.headroom,
        )
        .unwrap();
        assert!(tenancy.capacity().cores <= guaranteed.capacity().cores);
        // The pods the applications start with, and an application added later.
        let mut t = team(&config, &tenancy, Variant::Simppo, true, 3, None);
        for &app in &all {
            t.add(app, None).unwrap();
        }
        let mut arena = tenancy.env(&t.presence(), 10, 0).unwrap();
        for &app in &all {
            assert!(burstable(&arena.cluster().target(app).unwrap().1));
        }
        assert!(burstable(&tenancy.arrival(0).containers[0]));
        // The agents' decoded actions, as applied.
        t.set_training(true);
        rollout(&mut arena, &mut t, 1, 10, &mut [], &Silent).unwrap();
        let mut resized = 0;
        for &app in &all {
            let (_, c) = arena.cluster().target(app).unwrap();
            assert!(burstable(&c), "{c:?}");
            resized += usize::from(c.limits.cpu_millicores != workload.apps[app].reference.cpu_millicores);
        }
        assert!(resized > 0, "the agents resized some CPU limit");
        // MPA's recommendations, as applied.
        let mpa: PolicyName = "mpa".parse().unwrap();
        let policies = (0..config.apps)
            .map(|i| Policy::build(&mpa, &workload.app_profile(i), Some(&workload.apps[i]), None).unwrap())
            .collect();
        let mut driver = Recommenders::new(policies);
        rollout(&mut arena, &mut driver, 2, 10, &mut [], &Silent).unwrap();
        for &app in &all {
            let (_, c) = arena.cluster().target(app).unwrap();
            assert!(burstable(&c), "{c:?}");
        }
    }

    #[test]
    fn the_incremental_plot_is_checked_first_and_drawn_from_the_curves() {
        let dir = tempfile::tempdir().unwrap();
        let missing = dir.path().join("nope/x.png");
        let err = SimppoConfig { plot: Some(missing), ..SimppoConfig::quick(1) }.check().unwrap_err().to_string();
        assert!(err.contains("--plot") && err.contains("does not exist"), "{err}");
        let path = dir.path().join("incremental.png");
        let config = SimppoConfig { plot: Some(path.clone()), ..SimppoConfig::quick(1) };
        assert!(config.check().is_ok());
        let curve = |sharing: bool| IncrementalCurve {
            parameter_sharing: sharing,
            team_reward: (0..600).map(|e| 1.0 + (e as f64 / 50.0).sin() * 0.1).collect(),
            agents: (0..600).map(|e| if (200..400).contains(&e) { 17 } else { 12 }).collect(),
        };
        plot_incremental(&path, &config, &[curve(true), curve(false)]).unwrap();
        assert!(std::fs::read(&path).unwrap().starts_with(b"\x89PNG"));
    }

    #[test]
    fn request_ratio_is_checked() {
        for bad in [0.0, -0.5, 1.5, f64::NAN] {
            let err = SimppoConfig { request_ratio: bad, ..SimppoConfig::quick(1) }.check().unwrap_err().to_string();
            assert!(err.contains("--request-ratio"), "{err}");
        }
        assert!(SimppoConfig { request_ratio: 1.0, ..SimppoConfig::quick(1) }.check().is_ok());
    }
}
