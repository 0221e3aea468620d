//! The one rollout loop and scoring path, through the library.

use aware_lab::evaluate::{PolicyRow, Sinks, compare, compare_runs, evaluate, reward_misrankings};
use aware_lab::policy::PolicyName;
use aware_lab::progress::Silent;
use aware_lab::workload::{Workload, WorkloadSpec};

fn workload(apps: usize, seed: u64, steps: u64) -> Workload {
    Workload::load(&WorkloadSpec { apps, seed, steps, ..WorkloadSpec::default() }).unwrap()
}

#[test]
fn same_seed_same_scores_and_other_seeds_differ() {
    let w = workload(4, 3, 120);
    let a = evaluate(&w, &PolicyName::Mpa, 120, 3, &mut Sinks::default(), &Silent).unwrap();
    let b = evaluate(&w, &PolicyName::Mpa, 120, 3, &mut Sinks::default(), &Silent).unwrap();
    let json = |e: &aware_lab::evaluate::Evaluation| serde_json::to_string(&e.per_app).unwrap();
    assert_eq!(json(&a), json(&b));
    let c = evaluate(&w, &PolicyName::Mpa, 120, 4, &mut Sinks::default(), &Silent).unwrap();
    assert_ne!(json(&a), json(&c));
}

#[test]
fn every_interval_is_scored_with_the_operator_figures() {
    let w = workload(3, 5, 80);
    let run = evaluate(&w, &PolicyName::Hpa, 80, 5, &mut Sinks::default(), &Silent).unwrap();
    let row = run.aggregate("hpa");
    assert_eq!(row.intervals, 3 * 80);
    assert!(row.core_seconds > 0.0);
    assert!((0.0..=1.0).contains(&row.slo_violation_fraction));
    assert_eq!(row.slo_violation_fraction, row.slo_violations as f64 / 240.0);
    assert!(row.p99_latency_ms.is_some_and(|p| p > 0.0));
    assert_eq!(run.series.reserved_cores.len(), 80);
}

/// A starved manual allocation can never out-earn the MPA default: the reward pays efficiency
/// only while the SLO is met, and the operator's judgement (violations, core-seconds) agrees.
#[test]
fn starving_never_pays() {
    for seed in [1, 2] {
        let w = workload(6, seed, 160);
        let policies: Vec<PolicyName> = vec![PolicyName::Mpa, "fixed:1x0.1x64".parse().unwrap()];
        let (report, _) = compare_runs(&w, &policies, 160, 100, &mut Sinks::default(), &Silent).unwrap();
        let (mpa, starved) = (&report.policies[0], &report.policies[1]);
        assert_eq!(starved.policy, "fixed:1x0.1x64");
        assert!(starved.summary.slo_violations > mpa.summary.slo_violations, "seed {seed}: {report:#?}");
        assert!(starved.summary.mean_reward < mpa.summary.mean_reward, "seed {seed}: {report:#?}");
    }
}

#[test]
fn a_policy_listed_twice_or_none_is_refused() {
    let w = workload(1, 1, 10);
    let err = compare_runs(&w, &[PolicyName::Hpa, PolicyName::Hpa], 10, 10, &mut Sinks::default(), &Silent)
        .err()
        .unwrap()
        .to_string();
    assert!(err.contains("--policies") && err.contains("twice"), "{err}");
    assert!(compare_runs(&w, &[], 10, 10, &mut Sinks::default(), &Silent).is_err());
}

/// An episode longer than the run would extrapolate the per-episode figures from a fraction of
/// one (a 5-step run at 100 steps an episode: violations "per 100 episodes" × 2,000): refused.
#[test]
fn an_episode_longer_than_the_run_is_refused() {
    let w = workload(1, 1, 10);
    for episode_steps in [0, 11, u64::MAX] {
        let err = compare_runs(&w, &[PolicyName::Hpa], 10, episode_steps, &mut Sinks::default(), &Silent)
            .err()
            .unwrap()
            .to_string();
        assert!(err.starts_with("--episode-steps: ") && err.contains("1 to 10 steps"), "{err}");
    }
    let (report, _) = compare_runs(&w, &[PolicyName::Hpa], 10, 10, &mut Sinks::default(), &Silent).unwrap();
    assert_eq!(report.policies[0].episodes, 1.0);
    // Refused before the store is opened: no database file is created for a run that never ran.
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("new.db");
    let url = format!("sqlite:{}", db.display());
    let err = compare(&w, &[PolicyName::Hpa], 10, 50, Some(&url), None, &Silent).unwrap_err().to_string();
    assert!(err.starts_with("--episode-steps: "), "{err}");
    let err = compare(&w, &[PolicyName::Hpa, PolicyName::Hpa], 10, 10, Some(&url), None, &Silent).unwrap_err();
    assert!(err.to_string().contains("twice"), "{err}");
    assert!(!db.exists(), "a refused run created {}", db.display());
}

/// Counts the phases a run starts: none when it is refused before it begins.
#[derive(Default)]
struct Phases(std::sync::atomic::AtomicU64);

impl aware_lab::progress::Progress for Phases {
    fn start(&self, _len: u64, _label: &str) {
        self.0.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    }
    fn inc(&self, _units: u64) {}
    fn message(&self, _message: &str) {}
    fn finish(&self) {}
}

/// A `--plot` the PNG cannot be written to (a directory, a place nothing can be created) is
/// refused before the comparison runs, not after it, with one line naming the flag and path.
#[test]
fn an_unwritable_plot_is_refused_before_the_run() {
    let w = workload(1, 1, 10);
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path().join("d.png");
    std::fs::create_dir(&d).unwrap();
    let mut places = vec![(d, "is a directory")];
    if cfg!(target_os = "linux") {
        places.push(("/proc/aware-plot.png".into(), "cannot write: "));
    }
    for (place, why) in places {
        let phases = Phases::default();
        let e = compare(&w, &[PolicyName::Hpa], 10, 10, None, Some(&place), &phases).unwrap_err().to_string();
        assert!(e.starts_with("--plot: ") && e.contains(&*place.to_string_lossy()) && e.contains(why), "{e}");
        assert!(!e.contains('\n') && !e.contains("Os {"), "{e}");
        assert_eq!(phases.0.into_inner(), 0, "refused before the run");
    }
    // A writable one gets its figure.
    let ok = dir.path().join("ok.png");
    compare(&w, &[PolicyName::Hpa], 10, 10, None, Some(&ok), &Silent).unwrap();
    assert!(std::fs::read(&ok).unwrap().starts_with(b"\x89PNG"));
}

#[test]
fn a_scenario_beyond_the_run_is_refused() {
    let spec = WorkloadSpec {
        apps: 1,
        steps: 10,
        scenario: Some("payload-up@50".parse().unwrap()),
        ..WorkloadSpec::default()
    };
    let err = Workload::load(&spec).unwrap_err().to_string();
    assert!(err.starts_with("--scenario") && err.contains("50"), "{err}");
}

#[test]
fn recorded_runs_land_in_the_store_one_episode_per_app() {
    let dir = tempfile::tempdir().unwrap();
    let url = format!("sqlite:{}", dir.path().join("runs.db").display());
    let w = workload(3, 2, 50);
    let mut store = aware_lab::evaluate::open_store(&url).unwrap();
    let mut sinks = Sinks { store: Some(store.as_mut()), observers: Vec::new() };
    let run = evaluate(&w, &PolicyName::Mpa, 50, 2, &mut sinks, &Silent).unwrap();
    let stats = store.stats().unwrap();
    assert_eq!(stats.episodes, 3);
    assert_eq!(stats.transitions, 150);
    // The stored rewards are the rewards the scorer reported; each app's policy is an agent.
    let total: f64 =
        w.apps.iter().map(|a| store.last_rewards(&format!("mpa@{}", a.name), 10).unwrap().iter().sum::<f64>()).sum();
    let scored: f64 = run.per_app.iter().map(|s| s.mean_reward * 50.0).sum();
    assert!((total - scored).abs() < 1e-3 * scored.abs().max(1.0), "{total} vs {scored}");
    // A second run into the same store adds episodes.
    let mut sinks = Sinks { store: Some(store.as_mut()), observers: Vec::new() };
    evaluate(&w, &PolicyName::Mpa, 50, 2, &mut sinks, &Silent).unwrap();
    assert_eq!(store.stats().unwrap().episodes, 6);
}

/// The rollout loop restarts the rule-based controllers a driver holds at every episode: MPA
/// kept across episodes of other traffic scores each episode exactly as a fresh MPA does.
#[test]
fn recommenders_kept_across_episodes_score_as_fresh_ones() {
    use aware_lab::policy::Policy;
    use aware_lab::rollout::{Recommenders, rollout};
    let w = workload(3, 5, 300);
    let mpa = || {
        Recommenders::new(
            (0..w.apps.len())
                .map(|i| Policy::build(&PolicyName::Mpa, &w.app_profile(i), Some(&w.apps[i]), None).unwrap())
                .collect(),
        )
    };
    let run = |driver: &mut Recommenders, seed: u64| {
        let mut env = w.env(aware_env::ActionKind::Continuous, 100, seed);
        let t = rollout(&mut env, driver, seed, 100, &mut [], &Silent).unwrap();
        (t.reward.to_bits(), t.slo_violations)
    };
    let mut kept = mpa();
    for seed in [11, 3, 17, 3] {
        assert_eq!(run(&mut kept, seed), run(&mut mpa(), seed), "seed {seed}");
    }
}

/// The reward ranks the rule-based policies as the operator does, app by app: whenever one
/// reserved fewer core-seconds with no more SLO-violating intervals (or the reverse), and
/// dropped no more requests and reserved no more memory, it did not earn less per interval.
/// (The case that made the reward cost-based, a learned policy squeezing its quiet intervals,
/// is `aware_env`'s `fewer_core_seconds_earn_more_whatever_the_per_interval_utilisation`;
/// `aware experiment fig10` reports any misranked pair of its rows.) Across apps of different sizes
/// the mean reward weighs each app equally while core-seconds weigh each core equally, so the
/// check is per app.
#[test]
fn the_reward_ranks_policies_as_the_operator_does() {
    let mut ranked = 0;
    for seed in [1, 2, 3] {
        let w = workload(4, seed, 200);
        let mut policies = PolicyName::NAMED.to_vec();
        policies.extend(["fixed:1x0.1x64", "fixed:2x1x1024", "fixed:6x2x4096"].map(|p| p.parse().unwrap()));
        let (_, runs) = compare_runs(&w, &policies, 200, 100, &mut Sinks::default(), &Silent).unwrap();
        let labels: Vec<String> = runs.iter().map(|r| r.policy.to_string()).collect();
        let per_app: Vec<(&str, &[aware_lab::score::Summary])> =
            labels.iter().zip(&runs).map(|(l, r)| (l.as_str(), r.per_app.as_slice())).collect();
        let misranked = reward_misrankings(&per_app);
        assert!(misranked.is_empty(), "seed {seed}: {misranked:#?}");
        for app in 0..w.apps.len() {
            let rows: Vec<PolicyRow> =
                runs.iter().map(|r| PolicyRow::new(&r.policy.to_string(), r.per_app[app].clone(), 100)).collect();
            ranked +=
                rows.iter().flat_map(|a| rows.iter().filter(move |b| a.summary.clearly_beats(&b.summary))).count();
        }
    }
    // The check means something only if the operator could rank many pairs.
    assert!(ranked >= 100, "only {ranked} pairs were ranked by the operator");
}
