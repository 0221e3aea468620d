//! The lifecycle experiments end to end on tiny sizes: the rows, segments and scenario windows
//! they report add up to what was run.

use aware_experiments::lifecycle::{LifecycleConfig, Which, fig9_scenarios, run};
use aware_lab::progress::Silent;
use aware_lifecycle::Stage;
use aware_lifecycle::converged::Training;

fn tiny(episodes: u64) -> LifecycleConfig {
    LifecycleConfig {
        apps: Some(2),
        episodes: Some(episodes),
        episode_steps: 20,
        training: Some(Training {
            max_episodes: 3,
            min_episodes: 1,
            patience: 1,
            validate_every: 2,
            validation_episodes: 1,
            ..Training::default()
        }),
        ..LifecycleConfig::new(true, 9)
    }
}

#[test]
fn fig10_scores_every_policy_over_the_whole_run() {
    let r = run(Which::Fig10, &tiny(3), &Silent).unwrap();
    let names: Vec<&str> = r.policies.iter().map(|p| p.policy.as_str()).collect();
    assert_eq!(names, ["aware", "no-bootstrap", "mpa", "converged"]);
    for p in &r.policies {
        assert_eq!(p.summary.intervals, 2 * 3 * 20, "{}: every app-interval of the run", p.policy);
        assert!(p.summary.utilisation_deficit >= 0.0 && p.summary.utilisation_deficit <= 1.0);
        assert!(p.summary.core_seconds > 0.0);
    }
    let t = r.converged_training.as_ref().expect("fig10 trains the reference");
    assert!((1..=3).contains(&t.episodes) && t.episode_rewards.len() as u64 == t.episodes);
    // The DDPG reference acts on the fallback's proposals, priced and validated: every episode
    // moved the price, and the weights it stopped with were checked.
    assert!(t.residual && t.violation_prices.len() as u64 == t.episodes);
    assert_eq!(t.validations.last().map(|v| v.episode), Some(t.episodes));
    // Every check tries each CPU headroom; the one served was checked with the weights kept.
    let headrooms = Training::default().headrooms;
    assert_eq!(t.validations.len() % headrooms.len(), 0);
    for check in t.validations.chunks(headrooms.len()) {
        assert!(check.iter().map(|v| v.headroom).eq(headrooms.iter().copied()), "{check:?}");
    }
    assert!(t.validations.iter().any(|v| v.episode == t.selected_episode && v.headroom == t.headroom));
    assert!(t.validation_fallback.is_some());
    assert!(r.segments.is_empty() && r.scenarios.is_empty());
    let json = serde_json::to_value(&r).unwrap();
    assert!(json["policies"][0]["slo_violations"].is_u64() && json["policies"][0]["utilisation_deficit"].is_f64());
}

#[test]
fn table3_segments_add_up_to_the_run() {
    let r = run(Which::Table3, &tiny(5), &Silent).unwrap();
    let names: Vec<&str> = r.policies.iter().map(|p| p.policy.as_str()).collect();
    assert_eq!(names, ["aware", "no-bootstrap", "mpa"]);
    assert_eq!(r.segments.len(), 3 * 4);
    for p in &r.policies {
        let segs: Vec<_> = r.segments.iter().filter(|s| s.row.policy == p.policy).collect();
        assert_eq!(segs.iter().map(|s| s.segment).collect::<Vec<_>>(), [1, 2, 3, 4]);
        let sum = |f: fn(&aware_lab::score::Summary) -> f64| segs.iter().map(|s| f(&s.row.summary)).sum::<f64>();
        assert_eq!(sum(|s| s.intervals as f64), p.summary.intervals as f64, "{}", p.policy);
        assert_eq!(sum(|s| s.slo_violations as f64), p.summary.slo_violations as f64, "{}", p.policy);
        let core = sum(|s| s.core_seconds);
        assert!(
            (core - p.summary.core_seconds).abs() <= 1e-6 * core,
            "{}: {core} vs {}",
            p.policy,
            p.summary.core_seconds
        );
    }
    // Five episodes in four segments: 1 + 1 + 1 + 2.
    let first: Vec<&str> = r.segments.iter().take(4).map(|s| s.episode_range.as_str()).collect();
    assert_eq!(first, ["0..1", "1..2", "2..3", "3..5"]);
    let json = serde_json::to_value(&r).unwrap();
    assert_eq!(json["segments"][3]["episode_range"], "3..5");
    assert_eq!(json["segments"][3]["episodes"], 4.0, "the row's own count: app-episodes (2 apps × 2)");
}

#[test]
fn fig9_scores_each_scenario_from_its_start() {
    let config = LifecycleConfig { apps: Some(1), ..tiny(2) };
    let r = run(Which::Fig9, &config, &Silent).unwrap();
    assert_eq!(r.scenarios.len(), fig9_scenarios().len());
    let names: Vec<&str> = r.policies.iter().map(|p| p.policy.as_str()).collect();
    assert_eq!(names, ["aware", "no-retrain", "mpa", "converged"]);
    for (k, p) in r.policies.iter().enumerate() {
        // Two episodes, the scenario at the second: one episode per scenario is scored.
        assert_eq!(p.summary.intervals, 20 * fig9_scenarios().len() as u64, "{}", p.policy);
        let per_scenario: u64 = r.scenarios.iter().map(|s| s.policies[k].summary.slo_violations).sum();
        assert_eq!(per_scenario, p.summary.slo_violations, "{}", p.policy);
    }
    assert!(r.scenarios.iter().all(|s| s.at_step == 20));
    // Each scenario's run lists AWARE's stage changes from the start: the one app bootstraps.
    for s in &r.scenarios {
        let first = s.aware_stages.first().expect("every run starts its app");
        assert_eq!((first.step, first.from, first.to), (0, Stage::Initialized, Stage::Offline), "{}", s.scenario);
    }
    assert_eq!(fig9_scenarios().len(), 7, "the paper's seven");
    assert!(r.checks.aware_reward_shortfall_vs_converged.is_some_and(f64::is_finite));
}

#[test]
fn too_few_episodes_are_refused_with_the_flag() {
    let err = run(Which::Table3, &tiny(3), &Silent).unwrap_err().to_string();
    assert!(err.contains("--episodes") && err.contains("4"), "{err}");
}
