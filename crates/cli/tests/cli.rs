//! The command-line contract: determinism, JSON, and one-line errors with a non-zero exit.

use std::path::PathBuf;
use std::process::{Command, Output};

fn aware(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_aware")).args(args).output().expect("run aware")
}

fn stdout(o: &Output) -> String {
    String::from_utf8(o.stdout.clone()).unwrap()
}

fn stderr(o: &Output) -> String {
    String::from_utf8(o.stderr.clone()).unwrap()
}

fn temp_file(name: &str, text: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("aware-cli-test-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let path = dir.join(name);
    std::fs::write(&path, text).unwrap();
    path
}

/// A failing command prints exactly one line, naming what it must, and exits non-zero.
fn assert_one_line_error(o: &Output, wants: &[&str]) {
    assert!(!o.status.success(), "expected failure, got success: {}", stdout(o));
    let err = stderr(o);
    assert_eq!(err.trim_end().lines().count(), 1, "one line: {err:?}");
    for w in wants {
        assert!(err.contains(w), "{err:?} lacks {w:?}");
    }
}

#[test]
fn simulate_json_is_byte_identical_for_a_seed_and_differs_across_seeds() {
    let args = ["simulate", "--apps", "6", "--steps", "60", "--seed", "11", "--json", "--scenario", "payload-up@30"];
    let a = aware(&args);
    let b = aware(&args);
    assert!(a.status.success(), "{}", stderr(&a));
    assert_eq!(a.stdout, b.stdout);
    let c =
        aware(&["simulate", "--apps", "6", "--steps", "60", "--seed", "12", "--json", "--scenario", "payload-up@30"]);
    assert_ne!(a.stdout, c.stdout);
    let v: serde_json::Value = serde_json::from_slice(&a.stdout).unwrap();
    assert_eq!(v["per_app"].as_array().unwrap().len(), 6);
    assert_eq!(v["scenario"], "payload-up@30");
    for key in ["cpu_utilisation", "memory_utilisation", "slo_violations", "dropped_requests", "mean_reward"] {
        assert!(v["aggregate"][key].is_number(), "aggregate.{key}");
    }
}

#[test]
fn generate_is_seed_stable() {
    let a = aware(&["generate", "--apps", "5", "--seed", "3", "--json"]);
    assert_eq!(a.stdout, aware(&["generate", "--apps", "5", "--seed", "3", "--json"]).stdout);
    assert_ne!(a.stdout, aware(&["generate", "--apps", "5", "--seed", "4", "--json"]).stdout);
    let apps: serde_json::Value = serde_json::from_slice(&a.stdout).unwrap();
    assert_eq!(apps.as_array().unwrap().len(), 5);
    let out = temp_file("apps.json", "");
    let saved = aware(&["generate", "--apps", "5", "--seed", "3", "--out", out.to_str().unwrap()]);
    assert!(saved.status.success());
    assert_eq!(std::fs::read(&out).unwrap(), [a.stdout.as_slice(), b""].concat());
}

#[test]
fn malformed_profile_exits_non_zero_with_file_field_and_reason() {
    let p = temp_file("bad-profile.yaml", "reward:\n  alpha: 3\n");
    let o = aware(&["simulate", "--apps", "1", "--steps", "2", "--profile", p.to_str().unwrap()]);
    assert_one_line_error(&o, &["bad-profile.yaml:2:", "reward.alpha", "[0, 1]"]);
    let missing = aware(&["simulate", "--profile", "/nonexistent/profile.yaml"]);
    assert_one_line_error(&missing, &["/nonexistent/profile.yaml", "cannot read"]);
}

#[test]
fn trace_with_a_gap_or_negative_count_is_rejected_with_its_line() {
    let gap = temp_file("gap.csv", "timestamp,count\n0,10\n60,12\n180,9\n");
    assert_one_line_error(&aware(&["simulate", "--trace", gap.to_str().unwrap()]), &["gap.csv:4", "gap"]);
    let neg = temp_file("neg.csv", "timestamp,count\n0,10\n60,-1\n");
    assert_one_line_error(&aware(&["simulate", "--trace", neg.to_str().unwrap()]), &["neg.csv:3", "negative"]);
}

#[test]
fn a_good_trace_drives_the_load() {
    let t = temp_file("ok.csv", "timestamp,count\n0,600\n60,600\n");
    let o = aware(&["simulate", "--apps", "2", "--steps", "8", "--trace", t.to_str().unwrap(), "--json"]);
    assert!(o.status.success(), "{}", stderr(&o));
    let v: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    // 10 req/s for 8 intervals of 15 s, per app.
    assert_eq!(v["per_app"][0]["arrivals"], 1200.0);
}

#[test]
fn unknown_scenario_is_a_usage_error() {
    let o = aware(&["simulate", "--scenario", "meteor-strike"]);
    assert!(!o.status.success());
    assert!(stderr(&o).contains("payload-up"), "lists valid names");
}

#[test]
fn validate_sim_passes_its_bounds() {
    let o = aware(&["validate-sim", "--json"]);
    assert!(o.status.success(), "{}", stderr(&o));
    let v: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(v["pass"], true);
    let cases = v["cases"].as_array().unwrap();
    assert!(cases.len() >= 8);
    assert!(cases.iter().any(|c| c["fast"]["overloaded"] == true), "covers overload");
    assert!(cases.iter().any(|c| c["fast"]["overloaded"] == false), "covers normal load");
}

#[test]
fn bench_sim_reports_json() {
    let o = aware(&["bench", "sim", "--json", "--apps", "1,20", "--repeats", "1", "--work", "200"]);
    assert!(o.status.success(), "{}", stderr(&o));
    let v: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    let r = v["results"].as_array().unwrap();
    assert_eq!(r.len(), 2);
    assert!(r[1]["median_app_steps_per_s"].as_f64().unwrap() > 0.0);
    assert_one_line_error(&aware(&["bench", "sim", "--apps", "0"]), &["--apps"]);
}
