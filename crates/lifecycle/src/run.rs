//! Running the lifecycle manager — and the policies it is judged against — over generated
//! applications on the embedded simulator, episode by episode, on identical traffic, scored
//! by the one scoring path. `aware run`, `aware demo` and the lifecycle experiments are built
//! from [`run_manager`] and [`run_fallback`] over one [`Plan`].

use crate::agent::LifecycleAgent;
use aware_env::ActionKind;
use aware_lab::embed::WorkloadEmbedder;
use aware_lab::evaluate::{PolicyRow, aggregate};
use aware_lab::policy::{Policy, PolicyName};
use aware_lab::progress::Progress;
use aware_lab::rollout::{Driver, Observer, Recommenders, rollout};
use aware_lab::score::{LatencyHistogram, Scorer, Series, Summary};
use aware_lab::workload::{Workload, WorkloadSpec};
use aware_sim::{Continuation, Scenario};
use serde::Serialize;

use crate::LifecycleError;
use crate::decision::Decision;
use crate::manager::{Counts, Manager, ManagerConfig};
use crate::stage::{Stage, StageChange};

/// Which lifecycle a run uses.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Variant {
    /// AWARE: bootstrapping from the fallback, serving, retraining.
    Aware,
    /// The agent acts, exploring, and learns online from the first interval (no bootstrapping,
    /// no fallback floor: RL as deployed without AWARE).
    NoBootstrap,
    /// AWARE whose SERVING is final (no retraining).
    NoRetrain,
}

impl Variant {
    /// The row's `policy` name.
    pub fn label(self) -> &'static str {
        match self {
            Variant::Aware => "aware",
            Variant::NoBootstrap => "no-bootstrap",
            Variant::NoRetrain => "no-retrain",
        }
    }

    fn configure(self, config: &ManagerConfig) -> ManagerConfig {
        let mut c = config.clone();
        match self {
            Variant::Aware => {}
            Variant::NoBootstrap => {
                // RL without bootstrapping: the agent acts and learns from its own
                // transitions from the first interval, with no fallback in the loop (the
                // guard's caps and its refusal of unusable observations stay).
                c.bootstrapping = Some(false);
                // Nor does a fallback keep acting while it learns, whatever the profile says.
                c.high_stakes = Some(false);
                c.online_learning = true;
                c.fallback_floor = false;
                // Nothing to act on without the fallback in the loop.
                c.residual = false;
                // It learns from its own actions, so it explores them as DDPG trained from
                // scratch does (Table 2's σ, as the `converged` reference): without noise a
                // DDPG agent learning online only ever tries what its random weights say.
                // (AWARE's bootstrapped agent acts greedily; a PPO agent learning online
                // explores with its own policy's σ either way.)
                c.online_noise_sigma = aware_agents::ddpg::DdpgConfig::default().noise_sigma;
            }
            Variant::NoRetrain => c.may_retrain = false,
        }
        c
    }
}

/// The most episodes one plan holds (its trace seeds are listed before the run: 80 MB at most).
pub const MAX_EPISODES: u64 = 10_000_000;

/// The most intervals per app one plan runs: 10^9 intervals of 15 s are over 475 simulated
/// years, far beyond any run that can finish, and below `u32::MAX`, an episode's limit.
pub const MAX_STEPS: u64 = 1_000_000_000;

/// `steps` intervals (`--steps`) rounded up to whole episodes of `episode_steps`
/// (`--episode-steps`): the number of episodes and the intervals they make, or, naming the
/// flag, why no plan holds them (zero, or beyond [`MAX_EPISODES`] or [`MAX_STEPS`]).
pub fn plan_size(steps: u64, episode_steps: u64) -> Result<(u64, u64), LifecycleError> {
    check_episode_steps(episode_steps)?;
    if steps == 0 {
        return Err(LifecycleError::input("--steps", "must be at least 1"));
    }
    if steps > MAX_STEPS {
        return Err(LifecycleError::input("--steps", format!("{steps} is more than a run's {MAX_STEPS} intervals")));
    }
    let episodes = steps.div_ceil(episode_steps);
    if episodes > MAX_EPISODES {
        return Err(LifecycleError::input(
            "--steps",
            format!("{steps} intervals make {episodes} episodes of {episode_steps}, more than a run's {MAX_EPISODES}"),
        ));
    }
    let total = episodes.checked_mul(episode_steps).filter(|&t| t <= MAX_STEPS).ok_or_else(|| {
        LifecycleError::input(
            "--steps",
            format!(
                "{steps} intervals rounded up to whole episodes of {episode_steps} are more than a run's {MAX_STEPS}"
            ),
        )
    })?;
    Ok((episodes, total))
}

/// The intervals of `episodes` episodes (`--episodes`) of `episode_steps` (`--episode-steps`),
/// or, naming the flag, why no plan holds them ([`plan_size`] for runs counted in episodes).
pub fn episodes_steps(episodes: u64, episode_steps: u64) -> Result<u64, LifecycleError> {
    check_episode_steps(episode_steps)?;
    if episodes == 0 {
        return Err(LifecycleError::input("--episodes", "must be at least 1"));
    }
    if episodes > MAX_EPISODES {
        return Err(LifecycleError::input("--episodes", format!("{episodes} is more than a run's {MAX_EPISODES}")));
    }
    episodes.checked_mul(episode_steps).filter(|&t| t <= MAX_STEPS).ok_or_else(|| {
        LifecycleError::input(
            "--episodes",
            format!("{episodes} episodes of {episode_steps} intervals are more than a run's {MAX_STEPS} intervals"),
        )
    })
}

fn check_episode_steps(episode_steps: u64) -> Result<(), LifecycleError> {
    if episode_steps == 0 {
        return Err(LifecycleError::input("--episode-steps", "must be at least 1"));
    }
    if episode_steps > MAX_STEPS {
        return Err(LifecycleError::input(
            "--episode-steps",
            format!("{episode_steps} is more than a run's {MAX_STEPS} intervals"),
        ));
    }
    Ok(())
}

/// The episodes every policy of a comparison runs: same count, same traffic, same change.
#[derive(Debug, Clone)]
pub struct Plan {
    pub episode_steps: u64,
    /// One trace seed per episode.
    pub seeds: Vec<u64>,
    /// The workload change: in effect from this interval (counted from the start of the run)
    /// to the end. Each episode goes on from the cluster as the one before left it, on its
    /// own traffic, so an episode after the change is changed from its first interval.
    pub change: Option<(u64, Scenario)>,
    /// Episode ranges scored on their own as well (segments of training, the span after a
    /// change), each an [`Arm::windows`] entry.
    pub windows: Vec<std::ops::Range<u64>>,
    /// The cluster the first episode goes on from (where a plan continues another, the other's
    /// [`Arm::end`]); `None`: a fresh cluster at the apps' reference allocations.
    pub start: Option<Continuation>,
}

impl Plan {
    /// `steps` rounded up to whole episodes of `episode_steps`, traffic from `workload`'s trace
    /// seed on, and the workload's scenario (placed at its step of the whole run) as the change.
    /// A plan beyond [`MAX_EPISODES`] or [`MAX_STEPS`] is refused ([`plan_size`]).
    pub fn new(workload: &Workload, steps: u64, episode_steps: u64) -> Result<Plan, LifecycleError> {
        let (episodes, _) = plan_size(steps, episode_steps)?;
        let seeds = (0..episodes).map(|e| workload.trace_seed.wrapping_add(e)).collect();
        let change = workload.sim.scenario.map(|s| (s.at_step.unwrap_or(steps / 2), s));
        Ok(Plan { episode_steps, seeds, change, windows: Vec::new(), start: None })
    }

    /// The plan's episodes in `n` consecutive segments as even as they divide.
    pub fn segments(&self, n: u64) -> Vec<std::ops::Range<u64>> {
        let episodes = self.seeds.len() as u64;
        let n = n.clamp(1, episodes.max(1));
        (0..n).map(|k| k * episodes / n..(k + 1) * episodes / n).collect()
    }

    /// The episode the change first affects (the one containing its interval).
    pub fn change_episode(&self) -> Option<u64> {
        self.change.map(|(at, _)| at / self.episode_steps)
    }

    pub fn steps(&self) -> u64 {
        self.seeds.len() as u64 * self.episode_steps
    }

    /// The workload as episode `e` sees it: the change placed within the episode, from its
    /// first interval once the change has begun, absent before.
    fn episode_workload(&self, workload: &Workload, e: u64) -> Workload {
        let mut w = workload.clone();
        let start = e * self.episode_steps;
        w.sim.scenario = match self.change {
            Some((at, s)) if at < start + self.episode_steps => {
                Some(Scenario { kind: s.kind, at_step: Some(at.saturating_sub(start)) })
            }
            _ => None,
        };
        w
    }
}

/// One policy's run over a plan.
#[derive(Debug, Clone)]
pub struct Arm {
    pub row: PolicyRow,
    pub per_app: Vec<Summary>,
    pub series: Series,
    /// Every stage change, in order (empty for the fallback alone).
    pub stages: Vec<StageChange>,
    /// Apps in each stage after every interval, in [`Stage::ALL`] order (empty for the
    /// fallback alone).
    pub stage_series: Vec<[u32; 4]>,
    pub final_stages: Vec<Stage>,
    /// Per app at the end, whether it was retraining
    /// ([`crate::algorithm::AppLifecycle::retraining`]; empty for the fallback alone).
    pub final_retraining: Vec<bool>,
    pub counts: Vec<Counts>,
    /// The plan's windows, each scored on its own (fallback counts are the whole run's only).
    pub windows: Vec<Window>,
    /// The cluster as the last episode left it (a plan going on from this one starts there).
    pub end: Option<Continuation>,
}

/// One window of a plan, scored on its own.
#[derive(Debug, Clone)]
pub struct Window {
    pub episodes: std::ops::Range<u64>,
    pub row: PolicyRow,
    pub per_app: Vec<Summary>,
    /// The window's request latencies (to aggregate p99s over several windows).
    pub latencies: LatencyHistogram,
}

/// What a run hands its caller between episodes (the decision log goes to a store there).
pub trait EpisodeSink {
    /// Before the first episode (a checkpoint restores the agent and the lifecycles here).
    fn start(&mut self, _manager: &mut Manager) -> Result<(), LifecycleError> {
        Ok(())
    }

    fn episode(&mut self, episode: u64, manager: &mut Manager) -> Result<(), LifecycleError>;
}

impl EpisodeSink for () {
    fn episode(&mut self, _: u64, _: &mut Manager) -> Result<(), LifecycleError> {
        Ok(())
    }
}

/// A sink that may be absent.
impl<S: EpisodeSink> EpisodeSink for Option<S> {
    fn start(&mut self, manager: &mut Manager) -> Result<(), LifecycleError> {
        match self {
            Some(s) => s.start(manager),
            None => Ok(()),
        }
    }

    fn episode(&mut self, episode: u64, manager: &mut Manager) -> Result<(), LifecycleError> {
        match self {
            Some(s) => s.episode(episode, manager),
            None => Ok(()),
        }
    }
}

/// Two sinks, in order.
impl<A: EpisodeSink, B: EpisodeSink> EpisodeSink for (A, B) {
    fn start(&mut self, manager: &mut Manager) -> Result<(), LifecycleError> {
        self.0.start(manager)?;
        self.1.start(manager)
    }

    fn episode(&mut self, episode: u64, manager: &mut Manager) -> Result<(), LifecycleError> {
        self.0.episode(episode, manager)?;
        self.1.episode(episode, manager)
    }
}

/// A sink lent for the run.
impl<S: EpisodeSink + ?Sized> EpisodeSink for &mut S {
    fn start(&mut self, manager: &mut Manager) -> Result<(), LifecycleError> {
        (**self).start(manager)
    }

    fn episode(&mut self, episode: u64, manager: &mut Manager) -> Result<(), LifecycleError> {
        (**self).episode(episode, manager)
    }
}

/// Collects the decision log in memory.
impl EpisodeSink for Vec<Decision> {
    fn episode(&mut self, _: u64, manager: &mut Manager) -> Result<(), LifecycleError> {
        self.extend(manager.take_log().decisions);
        Ok(())
    }
}

/// The lifecycle manager (`variant`) with a fresh agent seeded `agent_seed` over `plan`.
pub fn run_manager(
    workload: &Workload,
    plan: &Plan,
    variant: Variant,
    config: &ManagerConfig,
    agent_seed: u64,
    sink: &mut dyn EpisodeSink,
    progress: &dyn Progress,
) -> Result<Arm, LifecycleError> {
    let config = variant.configure(config);
    let agent = crate::agent::LifecycleAgent::fresh_for(&config, agent_seed);
    run_agent(workload, plan, agent, variant.label(), &config, sink, progress).map(|(arm, _)| arm)
}

/// Apps a live view shows one line each for.
const LIVE_ROWS: usize = 12;

/// The lifecycle manager with `agent` over `plan`, scored as `label`; the agent as it ends.
pub fn run_agent(
    workload: &Workload,
    plan: &Plan,
    agent: impl Into<LifecycleAgent>,
    label: &str,
    config: &ManagerConfig,
    sink: &mut dyn EpisodeSink,
    progress: &dyn Progress,
) -> Result<(Arm, LifecycleAgent), LifecycleError> {
    let mut manager = Manager::new(workload, agent, config.clone())?;
    sink.start(&mut manager)?;
    let episodes = plan.seeds.len();
    let mut logged = 0;
    let (scorer, windows, end) =
        play_with(workload, plan, label, &mut manager, progress, &mut |e, m: &mut Manager| {
            sink.episode(e, m)?;
            // Every stage change as it happens, with its numbers (where the progress sink logs).
            for c in &m.changes()[logged..] {
                progress.log(&format!(
                    "{label} {} step {}: {} → {}: {}",
                    c.app,
                    c.step,
                    c.from.name(),
                    c.to.name(),
                    c.reason
                ));
            }
            logged = m.changes().len();
            // The live view: one line per app (the first LIVE_ROWS; the rest summed up).
            let view = m.live_view();
            let mut lines = vec![crate::manager::AppView::HEADER.to_string()];
            lines.extend(view.iter().take(LIVE_ROWS).map(crate::manager::AppView::line));
            if view.len() > LIVE_ROWS {
                let rest = &view[LIVE_ROWS..];
                lines.push(format!(
                    "… {} more apps: {} SLO-violating intervals, {} fallback actions",
                    rest.len(),
                    rest.iter().map(|v| v.slo_violations).sum::<u64>(),
                    rest.iter().map(|v| v.fallback_actions).sum::<u64>()
                ));
            }
            progress.table(&lines);
            let stages = m.stages();
            let count = |s: Stage| stages.iter().filter(|&&x| x == s).count();
            progress.message(&format!(
                "{label} episode {}/{episodes}: offline {} online {} serving {}",
                e + 1,
                count(Stage::Offline),
                count(Stage::Online),
                count(Stage::Serving)
            ));
            Ok(())
        })?;
    let (row, per_app, series, _) = score(label, scorer, &manager.fallbacks(), plan.episode_steps);
    let arm = Arm {
        row,
        per_app,
        series,
        stages: manager.changes().to_vec(),
        stage_series: manager.stage_series().to_vec(),
        final_stages: manager.stages(),
        final_retraining: manager.retraining(),
        counts: manager.counts(),
        windows: score_windows(label, plan, windows),
        end,
    };
    Ok((arm, manager.into_agent()))
}

/// A rule-based policy alone over `plan` (the fallback the manager is judged against).
pub fn run_fallback(
    workload: &Workload,
    plan: &Plan,
    policy: &PolicyName,
    progress: &dyn Progress,
) -> Result<Arm, LifecycleError> {
    let policies = (0..workload.apps.len())
        .map(|i| Policy::build(policy, &workload.app_profile(i), Some(&workload.apps[i]), None))
        .collect::<Result<Vec<_>, _>>()?;
    let mut driver = Recommenders::new(policies);
    let label = policy.to_string();
    let (scorer, windows, end) = play_with(workload, plan, &label, &mut driver, progress, &mut |_, _| Ok(()))?;
    let (row, per_app, series, _) = score(&label, scorer, &driver.refusals, plan.episode_steps);
    Ok(Arm {
        row,
        per_app,
        series,
        stages: Vec::new(),
        stage_series: Vec::new(),
        final_stages: Vec::new(),
        final_retraining: Vec::new(),
        counts: Vec::new(),
        windows: score_windows(&label, plan, windows),
        end,
    })
}

/// Any driver over `plan`, scored as `label` (no fallback counts).
pub fn run_driver<D: Driver>(
    workload: &Workload,
    plan: &Plan,
    label: &str,
    driver: &mut D,
    progress: &dyn Progress,
) -> Result<(PolicyRow, Vec<Summary>, Series), LifecycleError> {
    let (scorer, ..) = play_with(workload, plan, label, driver, progress, &mut |_, _| Ok(()))?;
    let (row, per_app, series, _) = score(label, scorer, &vec![0; workload.apps.len()], plan.episode_steps);
    Ok((row, per_app, series))
}

/// The plan's episodes under `driver`, each interval shown to one scorer for the whole run and
/// one for every window containing its episode; `between` runs after every episode.
fn play_with<D: Driver>(
    workload: &Workload,
    plan: &Plan,
    label: &str,
    driver: &mut D,
    progress: &dyn Progress,
    between: &mut dyn FnMut(u64, &mut D) -> Result<(), LifecycleError>,
) -> Result<(Scorer, Vec<Scorer>, Option<Continuation>), LifecycleError> {
    let names = names(workload);
    let targets = workload.cpu_targets();
    let mut scorers: Option<(Scorer, Vec<Scorer>)> = None;
    progress.start(plan.steps(), label);
    // Episodes are what the agent learns and the lifecycle judges in, not restarts: each one
    // goes on from the cluster as the one before left it (clock, replicas, pod templates), on
    // its own traffic from then on, as a cluster in production does.
    let mut carried = plan.start.clone();
    for (e, &seed) in plan.seeds.iter().enumerate() {
        let mut episode = plan.episode_workload(workload, e as u64);
        episode.sim.start = carried.take();
        let mut env = episode.env(ActionKind::Continuous, plan.episode_steps, seed);
        let (whole, windows) = scorers.get_or_insert_with(|| {
            let new = || Scorer::new(&env, &names).with_cpu_targets(&targets);
            (new(), plan.windows.iter().map(|_| new()).collect())
        });
        let mut observers: Vec<&mut dyn Observer> = vec![whole as &mut dyn Observer];
        for (w, scorer) in plan.windows.iter().zip(windows.iter_mut()) {
            if w.contains(&(e as u64)) {
                observers.push(scorer);
            }
        }
        rollout(&mut env, &mut *driver as &mut dyn Driver, seed, plan.episode_steps, &mut observers, progress)?;
        carried = Some(env.cluster().continuation());
        between(e as u64, driver)?;
    }
    progress.finish();
    let (whole, windows) = scorers.ok_or_else(|| LifecycleError::input("--steps", "the plan has no episode"))?;
    Ok((whole, windows, carried))
}

fn score_windows(label: &str, plan: &Plan, scorers: Vec<Scorer>) -> Vec<Window> {
    plan.windows
        .iter()
        .zip(scorers)
        .map(|(episodes, scorer)| {
            let (row, per_app, _, latencies) = score(label, scorer, &[], plan.episode_steps);
            Window { episodes: episodes.clone(), row, per_app, latencies }
        })
        .collect()
}

fn names(workload: &Workload) -> Vec<String> {
    workload.apps.iter().map(|a| a.name.clone()).collect()
}

/// A scorer's row, per-app summaries, series and merged latencies.
fn score(
    label: &str,
    scorer: Scorer,
    fallbacks: &[u64],
    episode_steps: u64,
) -> (PolicyRow, Vec<Summary>, Series, LatencyHistogram) {
    let latencies = scorer.merged_latencies();
    let (per_app, series) = scorer.finish(fallbacks);
    (PolicyRow::new(label, aggregate(label, &per_app, &latencies), episode_steps), per_app, series, latencies)
}

#[derive(Debug, Clone)]
pub struct RunSpec {
    pub workload: WorkloadSpec,
    /// Intervals to run (rounded up to whole episodes).
    pub steps: u64,
    pub manager: ManagerConfig,
    /// Seeds the agent (the workload has its own seed).
    pub seed: u64,
    /// Records every episode, stage change and decision here (`aware explain` reads it).
    pub store: Option<RunStore>,
    /// Updated after every episode (`aware run --metrics-listen` serves them).
    pub metrics: Option<crate::metrics::LifecycleMetrics>,
    /// Where the agent and the lifecycles are kept between runs (`aware run --checkpoint`):
    /// taken up at the start when they verify, written after every episode.
    pub checkpoint: Option<std::path::PathBuf>,
}

/// Where `aware run` records, and where it spools while that store is unreachable.
#[derive(Debug, Clone)]
pub struct RunStore {
    pub url: String,
    /// The spool directory; the URL's default ([`aware_store::StoreUrl::default_spool_dir`])
    /// when `None`.
    pub spool: Option<std::path::PathBuf>,
}

/// The store a run recorded into, and what still waits in its spool.
#[derive(Debug, Clone, Serialize)]
pub struct StoreReport {
    pub url: String,
    pub spool: String,
    /// Writes acknowledged during an outage and not yet in the store (written when a later
    /// writer opens the same spool with the store reachable).
    pub pending: usize,
    /// Writes the store refused when they were flushed, kept in the spool's `rejected.jsonl`.
    pub set_aside: u64,
    /// Records the run could not keep (episodes, decisions, stage changes): the store was away
    /// and the spool full, so they were refused (never acknowledged) while the apps stayed
    /// served.
    pub refused: u64,
    /// Why the first of them was refused.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub refused_reason: Option<String>,
    /// Why the store did not answer when the run started (its writes went to the spool from
    /// the first); absent when it did.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub unreachable_at_start: Option<String>,
}

/// The file beside the spool's journal where every app's next episode number and store step
/// are kept ([`crate::record::StoreSink::with_numbering`]).
pub const NUMBERING: &str = "numbering.json";

/// One application at the end of the run.
#[derive(Debug, Clone, Serialize)]
pub struct AppReport {
    pub app: String,
    pub stage: Stage,
    /// ONLINE at the end because its rewards degraded in SERVING: the agent relearns (from its
    /// own transitions, or the fallback's under `high_stakes`;
    /// [`crate::algorithm::AppLifecycle::retraining`]).
    pub retraining: bool,
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
    /// The learning agent's algorithm.
    pub agent: crate::agent::Learner,
    /// `aware` (the lifecycle manager) and the fallback alone, on identical traffic.
    pub policies: Vec<PolicyRow>,
    /// Every stage change, in order.
    pub stages: Vec<StageChange>,
    pub per_app: Vec<AppReport>,
    /// Present when the run recorded into a store.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub store: Option<StoreReport>,
    /// Present when the run kept a checkpoint.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub checkpoint: Option<crate::checkpoint::CheckpointReport>,
}

/// `aware run`: the manager beside the fallback alone.
pub fn run(spec: &RunSpec, progress: &dyn Progress) -> Result<RunReport, LifecycleError> {
    run_with(spec, None, progress)
}

/// A meta-learner for [`run_with`] (`aware run --meta DIR`): the base learner it was
/// meta-trained with, conditioned on its workload embeddings, is the lifecycle's agent, and
/// `embedder` judges every app's workload from the app's recorded episodes when the run starts
/// and after each episode. Until an app has an embedding, and while its workload is unlike the
/// training pool's, the fallback serves it and the decision log says why.
pub struct MetaRun<'m> {
    pub agent: LifecycleAgent,
    pub embedder: &'m mut dyn WorkloadEmbedder,
    /// What identifies the meta-learner (a `--checkpoint` is bound to it).
    pub id: String,
}

/// [`run`], with a meta-learner when `meta` is given (it needs `spec.store`: embeddings are read
/// from the apps' recorded episodes).
pub fn run_with(
    spec: &RunSpec,
    meta: Option<MetaRun<'_>>,
    progress: &dyn Progress,
) -> Result<RunReport, LifecycleError> {
    if let Some(m) = &meta {
        if spec.manager.residual {
            return Err(LifecycleError::input(
                "--meta",
                "a residual agent's episodes are stored apart (aware-residual@APP), where the meta-learner, which reads the fallback's episodes as changes of the current allocation, does not look: run the meta-learner's base learner on the current allocation",
            ));
        }
        if spec.store.is_none() {
            return Err(LifecycleError::input(
                "--meta",
                "needs a store (--store URL): the meta-learner reads each app's embedding from its recorded episodes",
            ));
        }
        let width = crate::manager::embedding_width_of(&m.agent, spec.manager.residual);
        if width == 0 || width != m.embedder.width() {
            return Err(LifecycleError::input(
                "--meta",
                format!(
                    "the base learner reads {} state values, the lifecycle's {} plus the meta-learner's {}-value embedding",
                    m.agent.state_dim(),
                    aware_env::STATE_DIM,
                    m.embedder.width()
                ),
            ));
        }
    }
    let workload = Workload::load(&spec.workload)?;
    let plan = Plan::new(&workload, spec.steps, spec.manager.episode_steps)?;
    let (agent, embedder, meta_id) = match meta {
        Some(MetaRun { agent, embedder, id }) => (agent, Some(embedder), Some(id)),
        None => (crate::agent::LifecycleAgent::fresh_for(&spec.manager, spec.seed), None, None),
    };
    let wanted = spec.manager.agent;
    if agent.algorithm() != wanted {
        return Err(LifecycleError::input(
            "--agent",
            format!(
                "the meta-learner's base learner is {}, the run's agent {wanted} (--agent {} runs it)",
                agent.algorithm(),
                agent.algorithm()
            ),
        ));
    }
    if let Some(dir) = &spec.checkpoint {
        aware_lab::output::refuse_non_directory("--checkpoint", dir)?;
        crate::checkpoint::refuse_agent_checkpoint(dir)?;
    }
    // Refused before the store is opened (or created), as the manager would refuse it.
    if let Some(why) = spec.manager.fallback_refusal() {
        return Err(LifecycleError::input("--fallback", why));
    }
    // The store's URL and spool (given, or the URL's default), checked before anything is made
    // (the store first of all): a spool that cannot be one is refused here.
    let recording = match &spec.store {
        Some(target) => {
            let url: aware_store::StoreUrl = target.url.parse()?;
            let spool = target.spool.clone().unwrap_or_else(|| url.default_spool_dir());
            aware_lab::output::refuse_non_directory("--spool", &spool)?;
            Some((target, url, spool))
        }
        None => None,
    };
    if let Some(kept) = spec.checkpoint.as_deref().and_then(crate::checkpoint::kept_algorithm)
        && kept.1 != wanted.name()
    {
        return Err(LifecycleError::input(
            "--agent",
            format!(
                "{} holds a {} agent, the run's is {wanted} (--agent {} takes it up)",
                kept.0.display(),
                kept.1,
                kept.1
            ),
        ));
    }
    let mut checkpoint = spec
        .checkpoint
        .as_deref()
        .map(|dir| crate::checkpoint::CheckpointSink::new(dir, spec.seed).with_meta(meta_id.clone()));
    let metrics = spec.metrics.clone();
    let label = Variant::Aware.label();
    let (aware, store) = match recording {
        None => {
            let mut sink = (metrics, &mut checkpoint);
            let config = Variant::Aware.configure(&spec.manager);
            (run_agent(&workload, &plan, agent, label, &config, &mut sink, progress)?.0, None)
        }
        Some((target, url, spool)) => {
            let mut store = aware_store::open_spooled(&url, Some(&spool), aware_store::DEFAULT_SPOOL_BYTES)?;
            // A store that does not answer now is written through the spool from the first
            // record; said at once, in case the URL is wrong rather than the server down.
            // A cheap read (one agent's last reward), not `stats`, which counts every row.
            let unreachable = match aware_store::TrajectoryStore::last_rewards(&store, crate::record::AGENT, 1) {
                Err(aware_store::StoreError::Unavailable(why)) => {
                    progress.log(&format!(
                        "store {} unreachable: {why}; recording into the spool {} until it answers",
                        target.url,
                        spool.display()
                    ));
                    Some(why)
                }
                _ => None,
            };
            let config = Variant::Aware.configure(&ManagerConfig { log: true, ..spec.manager.clone() });
            let mut records = crate::record::StoreSink::new(&mut store).with_numbering(spool.join(NUMBERING));
            if let Some(embedder) = embedder {
                records = records.with_embedder(embedder);
            }
            let mut sink = ((metrics, &mut checkpoint), records);
            let arm = run_agent(&workload, &plan, agent, label, &config, &mut sink, progress)?.0;
            let (refused, refused_reason) = (sink.1.refused, sink.1.refused_reason.take());
            drop(sink);
            // One last attempt to empty the spool; what stays is reported, never dropped.
            let _ = store.flush();
            let report = StoreReport {
                url: target.url.clone(),
                spool: spool.display().to_string(),
                pending: store.pending(),
                set_aside: store.set_aside(),
                refused,
                refused_reason,
                unreachable_at_start: unreachable,
            };
            (arm, Some(report))
        }
    };
    let alone = run_fallback(&workload, &plan, &spec.manager.fallback, progress)?;
    let per_app = names(&workload)
        .into_iter()
        .zip(aware.final_stages.iter().zip(&aware.final_retraining))
        .zip(&aware.counts)
        .zip(aware.per_app.iter().zip(&alone.per_app))
        .map(|(((app, (&stage, &retraining)), counts), (a, f))| AppReport {
            app,
            stage,
            retraining,
            counts: counts.clone(),
            aware: a.clone(),
            fallback_alone: f.clone(),
        })
        .collect();
    Ok(RunReport {
        apps: workload.apps.len(),
        steps: plan.steps(),
        episode_steps: plan.episode_steps,
        seed: spec.seed,
        fallback: spec.manager.fallback.to_string(),
        agent: wanted,
        policies: vec![aware.row, alone.row],
        stages: aware.stages,
        per_app,
        store,
        checkpoint: checkpoint.map(|c| c.report),
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use aware_lab::rollout::EpisodeStart;

    /// A driver that notes app 0's deployment and clock at every episode's first decision.
    struct Watch {
        rules: Recommenders,
        starts: Vec<(u32, f64)>,
        fresh: bool,
    }

    impl Driver for Watch {
        fn decide(
            &mut self,
            arena: &dyn aware_lab::rollout::Arena,
            states: &[Vec<f32>],
            infos: &[aware_core::StepInfo],
        ) -> Result<Vec<aware_env::Control>, aware_lab::LabError> {
            if std::mem::take(&mut self.fresh) {
                let obs = arena.observe(0).expect("the simulator observes")?;
                self.starts.push((obs.desired_replicas, obs.time_s));
            }
            self.rules.decide(arena, states, infos)
        }

        fn feedback(&mut self, interval: &aware_lab::rollout::Interval) -> Result<(), aware_lab::LabError> {
            self.rules.feedback(interval)
        }

        fn episode_start(&mut self, start: EpisodeStart) {
            self.fresh = true;
            self.rules.episode_start(start);
        }
    }

    /// Episodes go on from one another: the first starts at the reference allocation, each
    /// later one with the deployment the one before left and at the clock it ended on.
    #[test]
    fn each_episode_goes_on_from_the_cluster_the_one_before_left() {
        let workload =
            Workload::load(&WorkloadSpec { apps: 1, seed: 4, steps: 60, ..WorkloadSpec::default() }).unwrap();
        let plan = Plan::new(&workload, 60, 20).unwrap();
        let reference = workload.apps[0].reference;
        let replicas = reference.replicas + 3;
        let fixed: PolicyName =
            format!("fixed:{replicas}x{}x{}", reference.cpu_millicores as f64 / 1000.0, reference.memory_bytes >> 20)
                .parse()
                .unwrap();
        let rules = Policy::build(&fixed, &workload.app_profile(0), Some(&workload.apps[0]), None).unwrap();
        let mut watch = Watch { rules: Recommenders::new(vec![rules]), starts: Vec::new(), fresh: false };
        run_driver(&workload, &plan, "fixed", &mut watch, &aware_lab::progress::Silent).unwrap();
        let interval = workload.sim.interval_s;
        let [(r0, t0), (r1, t1), (r2, t2)] = watch.starts[..] else { panic!("{:?}", watch.starts) };
        assert_eq!((r0, r1, r2), (reference.replicas, replicas, replicas));
        // An episode's clock runs its 20 intervals and the one its reset runs to measure the
        // first state; the next goes on from there.
        assert_eq!((t1 - t0, t2 - t1), (21.0 * interval, 21.0 * interval));

        // A plan going on from another's end starts there.
        let arm = run_fallback(&workload, &plan, &fixed, &aware_lab::progress::Silent).unwrap();
        let end = arm.end.clone().unwrap();
        assert_eq!(end.deployments[0].replicas, replicas);
        let next = Plan { start: arm.end, ..plan.clone() };
        watch.starts.clear();
        run_driver(&workload, &next, "fixed", &mut watch, &aware_lab::progress::Silent).unwrap();
        assert_eq!(watch.starts[0], (replicas, end.time_s + interval));
    }

    /// Plans beyond the documented maximum are refused, naming the flag and why, before
    /// anything is allocated for them: no overflow, no allocation of one entry per episode.
    #[test]
    fn a_plan_beyond_the_maximum_is_refused_naming_the_flag() {
        let workload =
            Workload::load(&WorkloadSpec { apps: 1, seed: 1, steps: 100, ..WorkloadSpec::default() }).unwrap();
        let plan = Plan::new(&workload, 250, 100).unwrap();
        assert_eq!((plan.seeds.len(), plan.steps()), (3, 300));
        assert_eq!(plan_size(MAX_STEPS, 100).unwrap(), (MAX_STEPS / 100, MAX_STEPS));
        assert_eq!(plan_size(MAX_EPISODES, 1).unwrap(), (MAX_EPISODES, MAX_EPISODES));

        for (steps, episode_steps, flag, why) in [
            (u64::MAX, 100, "--steps", "more than a run's 1000000000 intervals"),
            (u64::MAX, 1, "--steps", "more than a run's 1000000000 intervals"),
            (1_000_000_000_000, 1, "--steps", "more than a run's 1000000000 intervals"),
            (MAX_EPISODES + 1, 1, "--steps", "make 10000001 episodes of 1, more than a run's 10000000"),
            (MAX_STEPS, 300_000_000, "--steps", "rounded up to whole episodes of 300000000"),
            (1, u64::MAX, "--episode-steps", "more than a run's 1000000000 intervals"),
            (0, 100, "--steps", "at least 1"),
            (100, 0, "--episode-steps", "at least 1"),
        ] {
            let err = Plan::new(&workload, steps, episode_steps).unwrap_err().to_string();
            assert!(err.starts_with(&format!("{flag}: ")) && err.contains(why), "{steps}/{episode_steps}: {err}");
            assert_eq!(plan_size(steps, episode_steps).unwrap_err().to_string(), err);
        }

        assert_eq!(episodes_steps(40, 100).unwrap(), 4_000);
        assert_eq!(episodes_steps(MAX_EPISODES, 100).unwrap(), MAX_EPISODES * 100);
        for (episodes, episode_steps, flag, why) in [
            (u64::MAX, 100, "--episodes", "more than a run's 10000000"),
            (MAX_EPISODES, 101, "--episodes", "10000000 episodes of 101 intervals are more than"),
            (2, MAX_STEPS, "--episodes", "2 episodes of 1000000000 intervals are more than"),
            (2, u64::MAX, "--episode-steps", "more than a run's 1000000000 intervals"),
            (0, 100, "--episodes", "at least 1"),
            (4, 0, "--episode-steps", "at least 1"),
        ] {
            let err = episodes_steps(episodes, episode_steps).unwrap_err().to_string();
            assert!(err.starts_with(&format!("{flag}: ")) && err.contains(why), "{episodes}/{episode_steps}: {err}");
        }
    }
}
