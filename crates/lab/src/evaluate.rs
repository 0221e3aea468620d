//! Running recommenders over a workload and reporting them as an operator judges them:
//! `simulate` (one policy, per app) and `compare` (several policies on identical apps and
//! traffic).

use aware_env::ActionKind;
use aware_store::TrajectoryStore;
use serde::Serialize;

use crate::LabError;
use crate::policy::{Policy, PolicyName};
use crate::progress::Progress;
use crate::record::Recorder;
use crate::rollout::{Arena, Observer, Recommenders, rollout};
use crate::score::{LatencyHistogram, Scorer, Series, Summary};
use crate::workload::Workload;

/// One policy's run over every app of a workload.
pub struct Evaluation {
    pub policy: PolicyName,
    pub per_app: Vec<Summary>,
    pub series: Series,
    /// Latencies over all apps and intervals (for the aggregate p99).
    pub latencies: LatencyHistogram,
}

impl Evaluation {
    /// The policy's row: means of rates and sums of amounts over apps.
    pub fn aggregate(&self, label: &str) -> Summary {
        aggregate(label, &self.per_app, &self.latencies)
    }
}

/// Means of rates, sums of amounts, over apps; the p99 from the merged latencies.
pub fn aggregate(label: &str, per_app: &[Summary], latencies: &LatencyHistogram) -> Summary {
    let n = per_app.len().max(1) as f64;
    let mean = |f: fn(&Summary) -> f64| per_app.iter().map(f).sum::<f64>() / n;
    let sum = |f: fn(&Summary) -> f64| per_app.iter().map(f).sum::<f64>();
    let count = |f: fn(&Summary) -> u64| per_app.iter().map(f).sum::<u64>();
    let intervals = count(|s| s.intervals);
    let slo_violations = count(|s| s.slo_violations);
    Summary {
        app: label.into(),
        slo_p99_ms: mean(|s| s.slo_p99_ms),
        cpu_utilisation: mean(|s| s.cpu_utilisation),
        memory_utilisation: mean(|s| s.memory_utilisation),
        slo_violations,
        slo_violation_fraction: slo_violations as f64 / intervals.max(1) as f64,
        p99_latency_ms: latencies.quantile(0.99),
        dropped_requests: sum(|s| s.dropped_requests),
        arrivals: sum(|s| s.arrivals),
        oom_events: count(|s| s.oom_events),
        core_seconds: sum(|s| s.core_seconds),
        memory_gib_seconds: sum(|s| s.memory_gib_seconds),
        replica_seconds: sum(|s| s.replica_seconds),
        scaling_actions: count(|s| s.scaling_actions),
        direction_reversals: count(|s| s.direction_reversals),
        mean_reward: mean(|s| s.mean_reward),
        fallbacks: count(|s| s.fallbacks),
        intervals,
        utilisation_deficit: mean(|s| s.utilisation_deficit),
    }
}

/// Where a run's intervals go besides the scorer.
#[derive(Default)]
pub struct Sinks<'a> {
    /// Records every app's trajectory (one episode per app, agent = the policy's name).
    pub store: Option<&'a mut dyn TrajectoryStore>,
    /// Sees every interval (exporters, plots).
    pub observers: Vec<&'a mut dyn Observer>,
}

/// Shows each interval to the scorer, the recorder and the caller's observers, in that order.
struct Fanout<'a, 'r, 's> {
    scorer: &'a mut Scorer,
    recorder: Option<&'a mut Recorder<'r>>,
    rest: &'a mut [&'s mut dyn Observer],
}

impl Observer for Fanout<'_, '_, '_> {
    fn record(&mut self, arena: &dyn Arena, interval: &crate::rollout::Interval) -> Result<(), LabError> {
        self.scorer.record(arena, interval)?;
        if let Some(r) = self.recorder.as_mut() {
            r.record(arena, interval)?;
        }
        for o in self.rest.iter_mut() {
            o.record(arena, interval)?;
        }
        Ok(())
    }
}

/// Opens the store a URL names for recording (created if missing).
pub fn open_store(url: &str) -> Result<Box<dyn TrajectoryStore>, LabError> {
    let parsed: aware_store::StoreUrl = url.parse()?;
    Ok(aware_store::open(&parsed, false)?)
}

/// Runs `policy` on every app of `workload` for `steps` intervals of traffic `trace_seed`,
/// showing each interval to the `sinks` too.
pub fn evaluate(
    workload: &Workload,
    policy: &PolicyName,
    steps: u64,
    trace_seed: u64,
    sinks: &mut Sinks,
    progress: &dyn Progress,
) -> Result<Evaluation, LabError> {
    // The action space is irrelevant here: recommenders act through recommendations.
    let mut env = workload.env(ActionKind::Continuous, steps, trace_seed);
    let policies = (0..workload.apps.len())
        .map(|i| Policy::build(policy, &workload.app_profile(i), Some(&workload.apps[i]), env.slo_p99_ms(i)))
        .collect::<Result<Vec<_>, _>>()?;
    let names: Vec<String> = workload.apps.iter().map(|a| a.name.clone()).collect();
    let mut scorer = Scorer::new(&env, &names).with_cpu_targets(&workload.cpu_targets());
    let mut driver = Recommenders::new(policies);
    let mut recorder = sinks.store.as_mut().map(|store| {
        let bounds = (0..workload.apps.len()).map(|i| workload.app_profile(i).bounds.clone()).collect();
        Recorder::new(&mut **store, &policy.to_string(), "evaluation", names.clone(), bounds, 0)
    });
    {
        let mut fanout = Fanout { scorer: &mut scorer, recorder: recorder.as_mut(), rest: &mut sinks.observers };
        rollout(&mut env, &mut driver, trace_seed, steps, &mut [&mut fanout], progress)?;
    }
    if let Some(r) = recorder {
        r.finish()?;
    }
    let latencies = scorer.merged_latencies();
    let fallbacks: Vec<u64> =
        driver.policies.iter().zip(&driver.refusals).map(|(p, refused)| p.fallbacks() + refused).collect();
    let (per_app, series) = scorer.finish(&fallbacks);
    Ok(Evaluation { policy: policy.clone(), per_app, series, latencies })
}

/// `simulate --json`: one policy, its aggregate row and one row per app.
#[derive(Debug, Serialize)]
pub struct SimulateReport {
    pub policy: String,
    pub apps: usize,
    pub steps: u64,
    pub seed: u64,
    pub interval_s: f64,
    pub scenario: Option<String>,
    /// The episode length the aggregate's per-episode figures count in
    /// ([`default_episode_steps`]).
    pub episode_steps: u64,
    /// The run as one row of `compare --json`'s shape (`app` is `all`).
    pub aggregate: PolicyRow,
    pub per_app: Vec<Summary>,
}

/// The episode length per-episode figures count in when none is given: 100 intervals, `aware
/// run`'s episode.
pub const DEFAULT_EPISODE_STEPS: u64 = 100;

/// [`DEFAULT_EPISODE_STEPS`], or the whole run when it is shorter (a fraction of an episode
/// would scale its counts up to episodes it never ran).
pub fn default_episode_steps(steps: u64) -> u64 {
    DEFAULT_EPISODE_STEPS.min(steps)
}

/// `store`: a store URL to record the run's trajectories into.
pub fn simulate(
    workload: &Workload,
    policy: &PolicyName,
    steps: u64,
    store: Option<&str>,
    progress: &dyn Progress,
) -> Result<SimulateReport, LabError> {
    simulate_observed(workload, policy, steps, store, Vec::new(), progress)
}

/// Builds every policy of `policies` for every app of `workload` once (a checkpoint for the
/// first app only), before anything is opened or run: a checkpoint that cannot be loaded (its
/// error names the directory) or a `fixed:` allocation beyond what the simulator runs (named
/// by `flag`) is refused, and no store is created nor written by a run that could not
/// complete.
pub fn check_policies(workload: &Workload, policies: &[PolicyName], flag: &str) -> Result<(), LabError> {
    let max = aware_sim::MAX_SIMULATED_REPLICAS;
    let env = workload.env(ActionKind::Continuous, 1, workload.trace_seed);
    for policy in policies {
        if let PolicyName::Fixed(f) = policy
            && f.replicas > max
        {
            return Err(LabError::input(
                flag,
                format!("{}: {} replicas is more than the simulator runs ({max})", f.spec, f.replicas),
            ));
        }
        // A checkpoint is the same for every app: loaded (and verified) once here.
        let apps = if matches!(policy, PolicyName::Rl(_)) { workload.apps.len().min(1) } else { workload.apps.len() };
        for i in 0..apps {
            Policy::build(policy, &workload.app_profile(i), Some(&workload.apps[i]), env.slo_p99_ms(i))?;
        }
    }
    Ok(())
}

/// [`simulate`] with every interval also shown to `observers` (`aware simulate
/// --serve-metrics`'s exporter).
pub fn simulate_observed(
    workload: &Workload,
    policy: &PolicyName,
    steps: u64,
    store: Option<&str>,
    mut observers: Vec<&mut dyn Observer>,
    progress: &dyn Progress,
) -> Result<SimulateReport, LabError> {
    // Before the store is opened (or created): a refused run leaves nothing behind.
    check_policies(workload, std::slice::from_ref(policy), "--policy")?;
    let mut opened = store.map(open_store).transpose()?;
    let mut sinks = Sinks {
        store: opened.as_mut().map(|b| b.as_mut() as &mut dyn TrajectoryStore),
        observers: observers.iter_mut().map(|o| &mut **o as &mut dyn Observer).collect(),
    };
    simulate_into(workload, policy, steps, &mut sinks, progress)
}

/// [`simulate`] with the run's intervals shown to `sinks`.
pub fn simulate_into(
    workload: &Workload,
    policy: &PolicyName,
    steps: u64,
    sinks: &mut Sinks,
    progress: &dyn Progress,
) -> Result<SimulateReport, LabError> {
    progress.start(steps, "simulating");
    let run = evaluate(workload, policy, steps, workload.trace_seed, sinks, progress)?;
    progress.finish();
    let episode_steps = default_episode_steps(steps);
    Ok(SimulateReport {
        policy: policy.to_string(),
        apps: workload.apps.len(),
        steps,
        seed: workload.seed,
        interval_s: workload.sim.interval_s,
        scenario: workload.sim.scenario.map(|s| s.to_string()),
        episode_steps,
        aggregate: PolicyRow::new(&policy.to_string(), run.aggregate("all"), episode_steps),
        per_app: run.per_app,
    })
}

/// A row of `compare --json` (and of every experiment's `policies`): the policy's aggregate
/// summary plus per-episode figures.
#[derive(Debug, Clone, Serialize)]
pub struct PolicyRow {
    pub policy: String,
    #[serde(flatten)]
    pub summary: Summary,
    pub episodes: f64,
    pub slo_violations_per_100_episodes: f64,
    pub mean_episode_reward: f64,
}

impl PolicyRow {
    /// `episode_steps` sets what an episode is for the per-episode figures.
    pub fn new(policy: &str, summary: Summary, episode_steps: u64) -> Self {
        let episodes = summary.intervals as f64 / episode_steps.max(1) as f64;
        PolicyRow {
            policy: policy.to_string(),
            episodes,
            slo_violations_per_100_episodes: if episodes > 0.0 {
                summary.slo_violations as f64 / episodes * 100.0
            } else {
                0.0
            },
            mean_episode_reward: summary.mean_reward * episode_steps as f64,
            summary,
        }
    }

    /// The operator's judgement: this row beats `other` when it reserved fewer core-seconds with
    /// no more SLO violations, or had fewer violations with no more core-seconds.
    pub fn beats(&self, other: &PolicyRow) -> bool {
        self.summary.beats(&other.summary)
    }
}

/// Every pair of policies the reward ranks against the operator on one app: on that app the
/// first clearly beats the second ([`Summary::clearly_beats`]), yet earned strictly less mean
/// reward (a tie ranks neither). `policies`
/// are (label, per-app summaries, every policy's apps in the same order). Judged app by app: across apps of different sizes the mean reward weighs
/// each app equally (each with its own cost scale) while core-seconds weigh each core equally.
/// Empty when the reward agrees with the operator on every pair the operator ranks
/// unambiguously; reports carry it so a disagreement is seen, not silently learned from. Left
/// out: a cheaper policy that dropped more requests (with equal violation counts, say on an app
/// no policy can serve, the reward pays the one that served more), one that saved cores by
/// reserving more memory (the reward prices memory, `reward.memory_price`; core-seconds do not),
/// and one that thrashed (the reward's oscillation penalty).
pub fn reward_misrankings(policies: &[(&str, &[Summary])]) -> Vec<String> {
    let apps = policies.iter().map(|(_, per_app)| per_app.len()).min().unwrap_or(0);
    let mut out = Vec::new();
    for app in 0..apps {
        for (la, pa) in policies {
            for (lb, pb) in policies {
                let (a, b) = (&pa[app], &pb[app]);
                if a.clearly_beats(b) && a.mean_reward < b.mean_reward {
                    out.push(format!(
                        "{}: {la} beats {lb} ({} SLO-violating intervals and {:.0} core-seconds against {} and {:.0}) but earned {:.4} per interval against {:.4}",
                        a.app, a.slo_violations, a.core_seconds, b.slo_violations, b.core_seconds, a.mean_reward, b.mean_reward
                    ));
                }
            }
        }
    }
    out
}

/// `compare --json`.
#[derive(Debug, Serialize)]
pub struct CompareReport {
    pub apps: usize,
    pub steps: u64,
    pub seed: u64,
    pub trace_seed: u64,
    pub interval_s: f64,
    pub episode_steps: u64,
    pub scenario: Option<String>,
    pub policies: Vec<PolicyRow>,
    /// [`reward_misrankings`] of the policies, app by app.
    pub reward_misranked: Vec<String>,
}

/// Refuses a `--policies` list that is empty or names a policy twice (`compare` and
/// `provision compare` alike).
pub fn check_policy_list<P: PartialEq + std::fmt::Display>(policies: &[P]) -> Result<(), LabError> {
    if policies.is_empty() {
        return Err(LabError::input("--policies", "name at least one policy"));
    }
    for (i, p) in policies.iter().enumerate() {
        if policies[..i].contains(p) {
            return Err(LabError::input("--policies", format!("{p} is listed twice")));
        }
    }
    Ok(())
}

/// Every policy on identical apps and identical traffic; `store`: a store URL to record every
/// run's trajectories into; `plot`: a PNG of utilisation, SLO violations and reserved cores over
/// time.
pub fn compare(
    workload: &Workload,
    policies: &[PolicyName],
    steps: u64,
    episode_steps: u64,
    store: Option<&str>,
    plot: Option<&std::path::Path>,
    progress: &dyn Progress,
) -> Result<CompareReport, LabError> {
    if let Some(path) = plot {
        crate::plot::check_path(path).map_err(|reason| LabError::input("--plot", reason))?;
        if let Some(url) = store
            && url.parse::<aware_store::StoreUrl>().is_ok_and(|u| u.is_store_file(path))
        {
            return Err(LabError::input(
                "--plot",
                format!("{} is the store ({url}); choose another file", path.display()),
            ));
        }
    }
    // Before the store is opened (or created): a refused run leaves nothing behind.
    check_policy_list(policies)?;
    check_episode_steps(steps, episode_steps)?;
    check_policies(workload, policies, "--policies")?;
    let mut opened = store.map(open_store).transpose()?;
    let mut sinks =
        Sinks { store: opened.as_mut().map(|b| b.as_mut() as &mut dyn TrajectoryStore), observers: Vec::new() };
    let (report, runs) = compare_runs(workload, policies, steps, episode_steps, &mut sinks, progress)?;
    if let Some(path) = plot {
        // Named by the flag, as the checks before the run are (`--plot: PATH: cannot write: …`).
        crate::plot::comparison(path, &runs, workload.sim.interval_s)
            .map_err(|e| LabError::input("--plot", e.to_string()))?;
    }
    Ok(report)
}

/// Refuses an episode longer than the run: its per-episode figures would be extrapolated from
/// a fraction of one (a 5-step run at 100 steps an episode counts violations × 2,000).
fn check_episode_steps(steps: u64, episode_steps: u64) -> Result<(), LabError> {
    if episode_steps == 0 || episode_steps > steps {
        return Err(LabError::input(
            "--episode-steps",
            format!(
                "{episode_steps} steps per episode in a run of {steps}: the per-episode figures need an episode \
                 of 1 to {steps} steps"
            ),
        ));
    }
    Ok(())
}

/// [`compare`] returning every run (per-app summaries and series) too.
pub fn compare_runs(
    workload: &Workload,
    policies: &[PolicyName],
    steps: u64,
    episode_steps: u64,
    sinks: &mut Sinks,
    progress: &dyn Progress,
) -> Result<(CompareReport, Vec<Evaluation>), LabError> {
    check_policy_list(policies)?;
    check_episode_steps(steps, episode_steps)?;
    progress.start(steps * policies.len() as u64, "comparing");
    let mut runs = Vec::new();
    for p in policies {
        progress.message(&p.to_string());
        runs.push(evaluate(workload, p, steps, workload.trace_seed, sinks, progress)?);
    }
    progress.finish();
    let policies: Vec<PolicyRow> = runs
        .iter()
        .map(|r| PolicyRow::new(&r.policy.to_string(), r.aggregate(&r.policy.to_string()), episode_steps))
        .collect();
    let report = CompareReport {
        reward_misranked: reward_misrankings(
            &runs.iter().zip(&policies).map(|(r, p)| (p.policy.as_str(), r.per_app.as_slice())).collect::<Vec<_>>(),
        ),
        apps: workload.apps.len(),
        steps,
        seed: workload.seed,
        trace_seed: workload.trace_seed,
        interval_s: workload.sim.interval_s,
        episode_steps,
        scenario: workload.sim.scenario.map(|s| s.to_string()),
        policies,
    };
    Ok((report, runs))
}
