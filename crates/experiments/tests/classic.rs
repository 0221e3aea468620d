//! The classic-control experiment through the library at a tiny size: every row is present
//! with its steps, and training beats the untrained policy on the same evaluation starts.

use aware_experiments::classic::{ClassicConfig, ClassicProgress, run};

#[test]
fn tiny_training_improves_on_the_untrained_policies() {
    let config = ClassicConfig::quick(3);
    let episodes = std::cell::Cell::new(0u64);
    let report = run(&config, &|p| {
        if let ClassicProgress::Episode { .. } = p {
            episodes.set(episodes.get() + 1);
        }
    })
    .unwrap();
    let rows: Vec<(&str, &str, u64)> =
        report.results.iter().map(|r| (r.algorithm.as_str(), r.task.as_str(), r.steps)).collect();
    assert_eq!(
        rows,
        [
            ("ddpg", "pendulum", config.ddpg_steps),
            ("dqn", "cartpole", config.dqn_steps),
            ("ppo", "cartpole", config.ppo_steps),
        ]
    );
    let total: u64 = report.details.iter().map(|d| d.training_episodes).sum();
    assert_eq!(episodes.get(), total, "one progress report per training episode");
    for (row, d) in report.results.iter().zip(&report.details) {
        assert_eq!(d.returns.len(), config.evaluation_episodes as usize);
        assert!(
            row.mean_return > d.untrained_return + 0.1 * d.untrained_return.abs(),
            "{} on {}: trained {:.1}, untrained {:.1}",
            row.algorithm,
            row.task,
            row.mean_return,
            d.untrained_return
        );
    }
    // The JSON document has the fields the interface names.
    let json = serde_json::to_value(&report).unwrap();
    for row in json["results"].as_array().unwrap() {
        let mut keys: Vec<&str> = row.as_object().unwrap().keys().map(String::as_str).collect();
        keys.sort_unstable();
        assert_eq!(keys, ["algorithm", "mean_return", "steps", "task"]);
    }
}
