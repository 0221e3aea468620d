//! Experiments run through the library, without the binary.

use aware_experiments::agents::{AgentsConfig, Size, run};
use aware_lab::progress::Silent;

#[test]
fn the_agents_experiment_runs_end_to_end_through_the_library() {
    let dir = tempfile::tempdir().unwrap();
    let report = run(&AgentsConfig { size: Size::Smoke, out: Some(dir.path().to_path_buf()) }, &Silent).unwrap();
    let names: Vec<&str> = report.policies.iter().map(|r| r.row.policy.as_str()).collect();
    assert_eq!(names, ["mpa", "ddpg", "ppo"]);
    for r in &report.policies {
        // Every row carries the operator's figures, over the same held-out window.
        assert_eq!(r.row.summary.intervals, 100, "{}", r.row.policy);
        assert!(r.row.summary.core_seconds > 0.0);
    }
    // The checkpoints were written and can be served again.
    assert!(dir.path().join("ddpg").join("checkpoint.json").exists());
    assert!(dir.path().join("ppo").join("checkpoint.json").exists());
    // A second run into the same directory refuses to overwrite them.
    let again = run(&AgentsConfig { size: Size::Smoke, out: Some(dir.path().to_path_buf()) }, &Silent);
    assert!(again.err().unwrap().to_string().contains("already holds a checkpoint"));
}
