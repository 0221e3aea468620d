//! The command-line contract: determinism, JSON, and one-line errors with a non-zero exit.

mod common;

use std::path::PathBuf;
use std::process::{Command, Output};

use common::temp_file;

fn aware(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_aware")).args(args).output().expect("run aware")
}

fn stdout(o: &Output) -> String {
    String::from_utf8(o.stdout.clone()).unwrap()
}

fn stderr(o: &Output) -> String {
    String::from_utf8(o.stderr.clone()).unwrap()
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
    // The aggregate is a result row as `compare` prints them: its policy, and per-episode
    // figures over episodes of 100 intervals or, as here, the whole run when it is shorter.
    assert_eq!(v["aggregate"]["policy"], v["policy"]);
    assert_eq!(v["episode_steps"], 60);
    assert_eq!(v["aggregate"]["episodes"], 6.0, "six apps, one 60-interval episode each");
    let close = |a: f64, b: f64| (a - b).abs() <= 1e-12 * (1.0 + b.abs());
    let per_100 = v["aggregate"]["slo_violations"].as_f64().unwrap() / 6.0 * 100.0;
    assert!(close(v["aggregate"]["slo_violations_per_100_episodes"].as_f64().unwrap(), per_100));
    let reward = v["aggregate"]["mean_reward"].as_f64().unwrap();
    assert!(close(v["aggregate"]["mean_episode_reward"].as_f64().unwrap(), reward * 60.0));
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
    // 10 req/s for 8 intervals of 15 s, per app: 1,200 expected, with Poisson arrival noise
    // (replayed traces are a rate; the requests within it are a realisation per seed).
    let arrivals = v["per_app"][0]["arrivals"].as_f64().unwrap();
    assert!((arrivals - 1200.0).abs() < 5.0 * 1200f64.sqrt(), "{arrivals}");
}

#[test]
fn simppo_request_ratio_outside_0_1_is_a_one_line_error() {
    for bad in ["0", "1.5", "-0.2", "NaN"] {
        let o = aware(&["experiment", "simppo", "--quick", &format!("--request-ratio={bad}")]);
        assert_one_line_error(&o, &["--request-ratio", "(0, 1]"]);
    }
}

#[test]
fn simppo_refuses_a_plot_it_could_not_write_before_running() {
    assert_one_line_error(
        &aware(&["experiment", "simppo", "--quick", "--plot", "/nonexistent/dir/x.png"]),
        &["--plot", "does not exist"],
    );
    assert_one_line_error(&aware(&["experiment", "simppo", "--quick", "--plot", "x.svg"]), &["--plot", ".png"]);
}

/// Durations and day lengths a run could not use are refused as usage errors (they panicked
/// or overflowed into NaN arrivals once).
#[test]
fn unusable_durations_and_day_lengths_are_usage_errors() {
    for args in [
        &["simulate", "--apps", "1", "--steps", "2", "--serve-metrics", "127.0.0.1:0", "--step-seconds", "1e300"][..],
        &["controller", "--interval-s", "2e19"][..],
        &["simulate", "--apps", "1", "--steps", "2", "--day-seconds", "1e-300"][..],
        &["bench", "sim", "--apps", "100000000"][..],
    ] {
        let o = aware(args);
        assert_eq!(o.status.code(), Some(2), "{args:?}: {}", stderr(&o));
        assert!(!stderr(&o).contains("panicked"), "{args:?}: {}", stderr(&o));
    }
}

/// An output directory that is a file is refused before any training, naming the flag.
#[test]
fn output_directories_that_are_files_are_refused_before_the_work() {
    let file = temp_file("not-a-directory", "x");
    let file = file.to_str().unwrap();
    for (args, flag) in [
        (&["train", "--algo", "ddpg", "--apps", "1", "--episodes", "1", "--steps", "5", "--out", file][..], "--out"),
        (&["run", "--apps", "1", "--steps", "10", "--episode-steps", "10", "--checkpoint", file][..], "--checkpoint"),
        (&["experiment", "agents", "--quick", "--out", file][..], "--out"),
        (&["train-meta", "--apps", "4", "--out", file][..], "--out"),
        (&["demo", "--out", file][..], "--out"),
        (&["demo", "--force", "--out", &format!("{file}/report")][..], "--out"),
    ] {
        let o = aware(args);
        assert_eq!(o.status.code(), Some(1), "{args:?}");
        assert_one_line_error(&o, &[flag, file, "not a directory"]);
    }
    assert_eq!(std::fs::read_to_string(file).unwrap(), "x", "the file is untouched");
}

#[test]
fn unknown_scenario_is_a_usage_error() {
    let o = aware(&["simulate", "--scenario", "meteor-strike"]);
    assert!(!o.status.success());
    assert!(stderr(&o).contains("payload-up"), "lists valid names");
}

#[test]
fn validate_sim_passes_its_bounds() {
    // The fixed fitting set (the default is a fresh random overload set: `aware_sim::validate`).
    let o = aware(&["validate-sim", "--fixed", "--json"]);
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
    // The MPA default's loop: a tenth of the steps, at least 20.
    assert_eq!(r[1]["mpa_steps_per_repeat"], 20);
    assert!(r[1]["median_app_steps_per_s_with_mpa"].as_f64().unwrap() > 0.0);
    // A count outside 1..=100,000 is a usage error (clap's, exit 2), naming the flag.
    for apps in ["0", "100001"] {
        let o = aware(&["bench", "sim", "--apps", apps]);
        assert_eq!(o.status.code(), Some(2), "{}", stderr(&o));
        assert!(stderr(&o).contains("--apps"), "{}", stderr(&o));
    }
}

fn example_input() -> String {
    concat!(env!("CARGO_MANIFEST_DIR"), "/../../docs/examples/recommend-input.json").to_string()
}

#[test]
fn recommend_answers_for_every_policy() {
    for policy in ["hpa", "vpa", "mpa", "threshold", "aimd"] {
        let o = aware(&["recommend", "--policy", policy, "--input", &example_input(), "--json"]);
        assert!(o.status.success(), "{policy}: {}", stderr(&o));
        let v: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
        assert_eq!(v["policy"], policy);
        assert!(v["recommendation"]["replicas"].as_u64().unwrap() >= 1);
        assert_eq!(v["recommendation"]["containers"][0]["name"], "app");
    }
    // The example app has been OOM-killed: the VPA raises memory.
    let v: serde_json::Value =
        serde_json::from_slice(&aware(&["recommend", "--policy", "vpa", "--input", &example_input(), "--json"]).stdout)
            .unwrap();
    let now = v["current"]["resources"]["requests"]["memory_bytes"].as_u64().unwrap();
    let rec = v["recommendation"]["containers"][0]["requests"]["memory_bytes"].as_u64().unwrap();
    assert!(rec > now, "{now} → {rec}");
}

#[test]
fn recommend_rejects_bad_input_with_the_field_path() {
    let text = std::fs::read_to_string(example_input()).unwrap();
    let bad = temp_file("bad-phase.json", &text.replacen("\"phase\": \"ready\"", "\"phase\": \"runing\"", 1));
    assert_one_line_error(
        &aware(&["recommend", "--policy", "hpa", "--input", bad.to_str().unwrap()]),
        &["bad-phase.json:", "history[0].pods[0].phase", "unknown variant"],
    );
    let bad = temp_file("bad-type.json", r#"{"observation": {"app": "x", "time_s": "soon"}}"#);
    assert_one_line_error(
        &aware(&["recommend", "--policy", "hpa", "--input", bad.to_str().unwrap()]),
        &["bad-type.json:1:", "observation.time_s", "invalid type"],
    );
    let nan = temp_file("nan.json", &text.replacen("\"arrival_rate\": ", "\"arrival_rate\": -", 1));
    assert_one_line_error(&aware(&["recommend", "--policy", "hpa", "--input", nan.to_str().unwrap()]), &["negative"]);
}

#[test]
fn compare_is_an_ab_test_over_identical_traces() {
    let args = ["compare", "--apps", "4", "--steps", "120", "--seed", "5", "--policies", "hpa,static,mpa", "--json"];
    let a = aware(&args);
    assert!(a.status.success(), "{}", stderr(&a));
    assert_eq!(a.stdout, aware(&args).stdout, "deterministic");
    let v: serde_json::Value = serde_json::from_slice(&a.stdout).unwrap();
    let p = v["policies"].as_array().unwrap();
    assert_eq!(p.len(), 3);
    // Every policy saw the same requests.
    assert_eq!(p[0]["arrivals"], p[1]["arrivals"]);
    assert_eq!(p[1]["arrivals"], p[2]["arrivals"]);
    for key in [
        "cpu_utilisation",
        "memory_utilisation",
        "slo_violations",
        "slo_violations_per_100_episodes",
        "dropped_requests",
        "replica_seconds",
        "core_seconds",
        "memory_gib_seconds",
        "scaling_actions",
        "direction_reversals",
        "mean_episode_reward",
    ] {
        assert!(p[0][key].is_number(), "{key}");
    }
    assert_eq!(p[1]["direction_reversals"], 0, "a fixed allocation never reverses");
}

#[test]
fn compare_draws_a_png() {
    let dir = tempfile::tempdir().unwrap();
    let png = dir.path().join("cmp.png");
    let o = aware(&[
        "compare",
        "--apps",
        "2",
        "--steps",
        "40",
        "--policies",
        "hpa,static",
        "--plot",
        png.to_str().unwrap(),
    ]);
    assert!(o.status.success(), "{}", stderr(&o));
    let bytes = std::fs::read(&png).unwrap();
    assert_eq!(&bytes[..8], b"\x89PNG\r\n\x1a\n");
    assert!(bytes.len() > 10_000, "a real figure, not an empty image");
    assert_one_line_error(&aware(&["compare", "--plot", "out.jpg"]), &["--plot", ".png"]);
    assert_one_line_error(&aware(&["compare", "--policies", "hpa,hpa"]), &["twice"]);
}

#[test]
fn store_commands_inspect_and_export_without_writing() {
    use aware_store::{EpisodeMeta, SqliteStore, Sync, TrajectoryStore, Transition};
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("t.db");
    {
        let mut s = SqliteStore::open(&path, Sync::Normal).unwrap();
        for e in 0..3u64 {
            let meta = EpisodeMeta {
                agent: "ddpg-1".into(),
                app: "checkout".into(),
                episode: e,
                stage: "offline".into(),
                policy: "mpa".into(),
                state_dim: 2,
                action_dim: 1,
                started_at_s: 1.7e9,
            };
            let id = s.begin_episode(&meta).unwrap();
            let t = |step| Transition {
                step,
                state: vec![0.0, 1.0],
                action: vec![0.5],
                reward: 1.0,
                next_state: vec![1.0, 0.0],
                done: false,
            };
            s.append(id, &[t(0), t(1)]).unwrap();
            if e < 2 {
                s.close_episode(id, 2.0).unwrap();
            }
        }
    }
    let url = format!("sqlite:{}", path.display());
    let before = std::fs::read(&path).unwrap();
    let o = aware(&["store", "stats", "--store", &url, "--json"]);
    assert!(o.status.success(), "{}", stderr(&o));
    let v: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(
        (v["episodes"].as_u64(), v["incomplete_episodes"].as_u64(), v["transitions"].as_u64()),
        (Some(3), Some(1), Some(6))
    );
    let o = aware(&["store", "episodes", "--store", &url, "--agent", "ddpg-1", "--json"]);
    let eps: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(eps.as_array().unwrap().len(), 3);
    assert!(eps[2]["closed_at_s"].is_null(), "the third is incomplete");
    let o = aware(&["store", "export", "--store", &url, "--format", "csv"]);
    assert_eq!(stdout(&o).lines().count(), 1 + 4, "header + the closed episodes' transitions");
    let out = dir.path().join("e.lp");
    let o = aware(&["store", "export", "--store", &url, "--format", "line-protocol", "--out", out.to_str().unwrap()]);
    assert!(o.status.success(), "{}", stderr(&o));
    assert_eq!(std::fs::read_to_string(&out).unwrap().lines().count(), 4 + 2);
    assert_eq!(std::fs::read(&path).unwrap(), before, "inspection wrote nothing");
    // Exporting over the store being exported is refused; the store stays whole.
    let o = aware(&["store", "export", "--store", &url, "--out", path.to_str().unwrap()]);
    assert_one_line_error(&o, &["--out", "is the store being exported"]);
    assert_eq!(std::fs::read(&path).unwrap(), before, "the store is untouched");
    // An agent the store does not know is refused, naming those it holds: a typo would
    // otherwise read as an empty store.
    for command in ["stats", "episodes", "export"] {
        let o = aware(
            &["store", command, "--store", &url, "--agent", "nobody", "--json"]
                [..if command == "export" { 6 } else { 7 }],
        );
        assert_one_line_error(&o, &["--agent nobody", "holds no episode of that agent", "ddpg-1"]);
    }
    // A directory where the export should go: refused, and no temporary file left beside it.
    let o = aware(&["store", "export", "--store", &url, "--out", dir.path().to_str().unwrap()]);
    assert_one_line_error(&o, &["is a directory"]);
    let tmp = format!("{}.tmp", dir.path().display());
    assert!(!std::path::Path::new(&tmp).exists(), "{tmp} left behind");
    assert_one_line_error(&aware(&["store", "stats", "--store", "sqlite:/nonexistent/x.db"]), &["no such store"]);
    assert_one_line_error(&aware(&["store", "stats", "--store", "mysql://db"]), &["unknown scheme"]);
    assert_one_line_error(
        &aware(&["store", "stats", "--store", "postgres://aware@127.0.0.1:1/aware"]),
        &["cannot connect"],
    );
}

#[test]
fn bench_store_reports_json() {
    let o = aware(&["bench", "store", "--json", "--transitions", "2000", "--repeats", "3"]);
    assert!(o.status.success(), "{}", stderr(&o));
    let v: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(v["transitions"], 2000);
    assert!(v["append_transitions_per_s"].as_f64().unwrap() > 0.0);
    assert!(v["median_top_20_episodes_us"].as_f64().unwrap() > 0.0);
}

#[test]
fn train_writes_a_checkpoint_that_compare_can_serve() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("agent");
    let o = aware(&[
        "train",
        "--algo",
        "qtable",
        "--apps",
        "3",
        "--steps",
        "30",
        "--episodes",
        "4",
        "--seed",
        "3",
        "--out",
        out.to_str().unwrap(),
        "--json",
    ]);
    assert!(o.status.success(), "{}", stderr(&o));
    let v: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(v["algorithm"], "qtable");
    for f in ["checkpoint.json", "q_table.json", "learning_curve.csv", "learning_curve.png", "train.json"] {
        assert!(out.join(f).exists(), "{f}");
    }
    assert_eq!(std::fs::read_to_string(out.join("learning_curve.csv")).unwrap().lines().count(), 1 + 4);
    let policy = format!("rl:{}", out.display());
    let o = aware(&["compare", "--apps", "3", "--steps", "40", "--policies", &format!("mpa,{policy}"), "--json"]);
    assert!(o.status.success(), "{}", stderr(&o));
    let v: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(v["policies"][1]["policy"], policy);
    // A second run into the same directory would overwrite a checkpoint: refused.
    let again = aware(&[
        "train",
        "--algo",
        "qtable",
        "--apps",
        "1",
        "--steps",
        "5",
        "--episodes",
        "1",
        "--out",
        out.to_str().unwrap(),
    ]);
    assert_one_line_error(&again, &["already holds a checkpoint"]);
    assert_one_line_error(
        &aware(&["compare", "--policies", "rl:/nonexistent/agent", "--steps", "5"]),
        &["/nonexistent/agent", "cannot read the checkpoint"],
    );
}

#[test]
fn ppo_trains_in_either_action_space_deterministically_and_serves() {
    let dir = tempfile::tempdir().unwrap();
    let train = |name: &str, space: &str| {
        let out = dir.path().join(name);
        let o = aware(&[
            "train",
            "--algo",
            "ppo",
            "--action-space",
            space,
            "--apps",
            "2",
            "--steps",
            "50",
            "--episodes",
            "2",
            "--seed",
            "5",
            "--out",
            out.to_str().unwrap(),
            "--json",
        ]);
        assert!(o.status.success(), "{}", stderr(&o));
        let v: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
        assert_eq!((v["algorithm"].as_str(), v["action_space"].as_str()), (Some("ppo"), Some(space)));
        out
    };
    let a = train("a", "continuous");
    let b = train("b", "continuous");
    let curve = |d: &std::path::Path| std::fs::read_to_string(d.join("learning_curve.csv")).unwrap();
    assert_eq!(curve(&a), curve(&b), "same seed, same learning curve");
    let weights = |d: &std::path::Path| std::fs::read(d.join("policy_value.safetensors")).unwrap();
    assert!(weights(&a) == weights(&b), "same seed, same weights");
    let discrete = train("d", "discrete");
    for out in [a, discrete] {
        let policy = format!("rl:{}", out.display());
        let o = aware(&["simulate", "--apps", "2", "--steps", "20", "--policy", &policy, "--json"]);
        assert!(o.status.success(), "{}", stderr(&o));
    }
    assert_one_line_error(
        &aware(&[
            "train",
            "--algo",
            "dqn",
            "--action-space",
            "continuous",
            "--steps",
            "5",
            "--episodes",
            "1",
            "--out",
            dir.path().join("x").to_str().unwrap(),
        ]),
        &["--action-space", "dqn cannot act in the continuous action space"],
    );
}

/// The provisioning bar: a D3QN over a 6-step window, trained for 40 one-day episodes on five
/// synthetic days, earns more reward (lower bill + penalties) than CloudWatch step scaling on
/// the two held-out days, with fewer penalised steps.
#[test]
fn provisioning_d3qn_beats_step_scaling_on_held_out_days() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("d3qn");
    let load = ["--days", "7", "--test-days", "2", "--seed", "2"];
    let mut train = vec!["provision", "train", "--algo", "d3qn", "--episodes", "40", "--out", out.to_str().unwrap()];
    train.extend(load);
    let o = aware(&train);
    assert!(o.status.success(), "{}", stderr(&o));
    for f in ["checkpoint.json", "q_network.safetensors", "learning_curve.csv", "learning_curve.png", "train.json"] {
        assert!(out.join(f).exists(), "{f}");
    }
    let policy = format!("rl:{}", out.display());
    let policies = format!("threshold,{policy}");
    let mut compare = vec!["provision", "compare", "--policies", &policies, "--json"];
    compare.extend(load);
    let o = aware(&compare);
    assert!(o.status.success(), "{}", stderr(&o));
    let v: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    let (threshold, d3qn) = (&v["policies"][0], &v["policies"][1]);
    let reward = |p: &serde_json::Value| p["reward"].as_f64().unwrap();
    let penalised = |p: &serde_json::Value| p["penalised_steps"].as_u64().unwrap();
    assert_eq!(threshold["steps"], 576);
    assert!(reward(d3qn) > reward(threshold) * 0.9, "d3qn {d3qn} vs threshold {threshold}");
    assert!(penalised(d3qn) < penalised(threshold), "d3qn {d3qn} vs threshold {threshold}");
    // Bad input: one line naming the option.
    assert_one_line_error(
        &aware(&["provision", "compare", "--days", "3", "--test-days", "3"]),
        &["--test-days", "less than one training day"],
    );
    // A trace too short for the days held out is blamed, by its path, not --test-days alone.
    let short = dir.path().join("short.csv");
    let rows: String = (0..600).map(|m| format!("{},{}\n", m * 60, 100 + m % 7)).collect();
    std::fs::write(&short, format!("timestamp,count\n{rows}")).unwrap();
    assert_one_line_error(
        &aware(&["provision", "compare", "--trace", short.to_str().unwrap(), "--test-days", "1"]),
        &["short.csv", "too short", "less than one training day"],
    );
    let o = aware(&["provision", "compare", "--policies", "hpa"]);
    assert_eq!(o.status.code(), Some(2), "an unknown policy is a usage error, as in compare");
    assert!(stderr(&o).contains("--policies") && stderr(&o).contains("\"hpa\""), "{}", stderr(&o));
    let dqn_dir = dir.path().join("cluster");
    let o = aware(&[
        "train",
        "--algo",
        "dqn",
        "--apps",
        "1",
        "--steps",
        "5",
        "--episodes",
        "1",
        "--out",
        dqn_dir.to_str().unwrap(),
    ]);
    assert!(o.status.success(), "{}", stderr(&o));
    assert_one_line_error(
        &aware(&["provision", "compare", "--policies", &format!("rl:{}", dqn_dir.display())]),
        &["observation dimension 11 is not a window of 5 provisioning metrics"],
    );
}

#[test]
fn training_resumes_from_a_checkpoint_into_a_new_directory() {
    let dir = tempfile::tempdir().unwrap();
    let first = dir.path().join("first");
    let second = dir.path().join("second");
    let common = ["--apps", "2", "--steps", "20", "--episodes", "2", "--seed", "4", "--json"];
    let mut args = vec!["train", "--algo", "d3qn", "--out", first.to_str().unwrap()];
    args.extend(common);
    let o = aware(&args);
    assert!(o.status.success(), "{}", stderr(&o));
    let before = std::fs::read(first.join("checkpoint.json")).unwrap();
    let mut args = vec!["train", "--resume", first.to_str().unwrap(), "--out", second.to_str().unwrap()];
    args.extend(common);
    let o = aware(&args);
    assert!(o.status.success(), "{}", stderr(&o));
    let v: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(v["algorithm"], "d3qn");
    assert_eq!(v["resumed_from"], first.to_str().unwrap());
    let meta = |d: &std::path::Path| -> serde_json::Value {
        serde_json::from_slice(&std::fs::read(d.join("checkpoint.json")).unwrap()).unwrap()
    };
    // 2 apps × 20 steps × 2 episodes per run: the step count carries on.
    assert_eq!(meta(&first)["training_step"], 80);
    assert_eq!(meta(&second)["training_step"], 160);
    assert_eq!(std::fs::read(first.join("checkpoint.json")).unwrap(), before, "the source is left as it is");
    let wrong = ["train", "--resume", first.to_str().unwrap(), "--algo", "ddpg", "--out", "/tmp/never-written"];
    assert_one_line_error(&aware(&wrong), &["--algo", "ddpg does not match", "d3qn agent"]);
    assert!(!std::path::Path::new("/tmp/never-written").exists());
    // A usage error (clap's, exit 2) when neither --algo nor --resume is given.
    let o = aware(&["train", "--out", "/tmp/never-written"]);
    assert_eq!(o.status.code(), Some(2));
    assert!(stderr(&o).contains("--algo"), "{}", stderr(&o));
}

#[test]
fn bench_agents_reports_every_algorithm() {
    let o = aware(&["bench", "agents", "--repeats", "2", "--batch", "10", "--json"]);
    assert!(o.status.success(), "{}", stderr(&o));
    let v: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    let names: Vec<&str> = v["results"].as_array().unwrap().iter().map(|r| r["algorithm"].as_str().unwrap()).collect();
    assert_eq!(names, ["ddpg", "dqn", "d3qn", "ppo"]);
    for r in v["results"].as_array().unwrap() {
        for field in ["median_update_us", "median_single_inference_us", "median_batched_inference_us"] {
            assert!(r[field].as_f64().unwrap() > 0.0, "{field} in {r}");
        }
        assert_eq!(r["batch"], 10);
    }
    // One thread unless the caller chose otherwise.
    let want = std::env::var("RAYON_NUM_THREADS").unwrap_or_else(|_| "1".into());
    assert_eq!(v["threads"], want.as_str());
}

#[test]
fn experiment_fig6_reports_similarities_and_draws_the_projection() {
    let dir = tempfile::tempdir().unwrap();
    let plot = dir.path().join("fig6.png");
    let o = aware(&[
        "experiment",
        "fig6",
        "--quick",
        "--apps",
        "4",
        "--seed",
        "3",
        "--signature-weight",
        "0.5",
        "--embedding-output",
        "relu",
        "--embedding-centring",
        "off",
        "--json",
        "--plot",
        plot.to_str().unwrap(),
    ]);
    assert!(o.status.success(), "{}", stderr(&o));
    let v: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(v["experiment"], "fig6");
    assert_eq!(v["signature_weight"], 0.5, "the auxiliary task's weight is reported as run");
    assert_eq!(v["embedding_output"], "relu", "and the embedding's output");
    assert_eq!(v["embedding_centring"], false, "and its centring");
    // Every experiment's JSON has the `policies` list INTERFACES fixes; fig6 runs none.
    assert_eq!(v["policies"], serde_json::json!([]));
    assert_eq!(v["apps"].as_array().unwrap().len(), 4);
    let pairs = |k: &str| v[k]["pairs"].as_u64().unwrap();
    assert_eq!(pairs("same_sensitivity") + pairs("different_sensitivity") + v["zero_embeddings"].as_u64().unwrap(), 6);
    for a in v["apps"].as_array().unwrap() {
        assert!(["cpu", "io"].contains(&a["sensitivity"].as_str().unwrap()), "{a}");
        let e = a["embedding"].as_array().unwrap();
        assert_eq!(e.len(), 16);
        assert!(e.iter().all(|x| x.as_f64().unwrap() >= 0.0), "a ReLU output is never negative: {a}");
    }
    assert!(std::fs::read(&plot).unwrap().starts_with(b"\x89PNG"), "a PNG");
    // A plot it could not write is refused before training.
    assert_one_line_error(
        &aware(&["experiment", "fig6", "--quick", "--plot", "/nonexistent/dir/x.png"]),
        &["--plot", "does not exist"],
    );
    for experiment in ["fig6", "fig8", "ood"] {
        let o = aware(&["experiment", experiment, "--quick", "--signature-weight=-0.5"]);
        assert_eq!(o.status.code(), Some(2), "{experiment}: {}", stderr(&o));
        assert!(stderr(&o).contains("--signature-weight"), "{experiment}: {}", stderr(&o));
        let o = aware(&["experiment", experiment, "--quick", "--embedding-output", "sigmoid"]);
        assert_eq!(o.status.code(), Some(2), "{experiment}: {}", stderr(&o));
        assert!(stderr(&o).contains("--embedding-output"), "{experiment}: {}", stderr(&o));
        let o = aware(&["experiment", experiment, "--quick", "--embedding-centring", "yes"]);
        assert_eq!(o.status.code(), Some(2), "{experiment}: {}", stderr(&o));
        assert!(stderr(&o).contains("--embedding-centring"), "{experiment}: {}", stderr(&o));
    }
}

#[test]
fn bench_meta_reports_its_medians() {
    let args = ["bench", "meta", "--trajectories", "3", "--steps", "8", "--repeats", "1", "--apps", "4", "--json"];
    let o = aware(&args);
    assert!(o.status.success(), "{}", stderr(&o));
    let v: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(v["benchmark"], "meta");
    for field in ["embed_us", "meta_train_step_us", "act_us_per_app", "embedding_refresh_us_per_app"] {
        assert!(v[field].as_f64().unwrap() > 0.0, "{field} in {v}");
    }
    assert_eq!((v["trajectories"].as_u64(), v["apps"].as_u64()), (Some(3), Some(4)));
    assert_eq!(v["parameters"], 1_749_824);
    let bad = aware(&["bench", "meta", "--trajectories", "0"]);
    assert_eq!(bad.status.code(), Some(2), "a usage error");
    assert!(stderr(&bad).starts_with("error: invalid value '0' for '--trajectories"), "{}", stderr(&bad));
}

/// `aware run --store` records what `aware explain` then reads; a bad store URL is one line.
#[test]
fn run_records_into_a_store_that_explain_reads() {
    let dir = tempfile::tempdir().unwrap();
    let url = format!("sqlite:{}", dir.path().join("run.db").display());
    let o = aware(&["run", "--apps", "2", "--steps", "100", "--episode-steps", "50", "--store", &url, "--json"]);
    assert!(o.status.success(), "{}", stderr(&o));
    let report: serde_json::Value = serde_json::from_str(&stdout(&o)).unwrap();
    assert_eq!(report["store"]["url"], url.as_str());
    // Every stage change is logged on stderr as it happens, with its reason.
    let log = stderr(&o);
    let changes = report["stages"].as_array().unwrap();
    assert_eq!(log.lines().filter(|l| l.starts_with("aware app-")).count(), changes.len(), "{log}");
    assert!(log.contains(" step 0: initialized → offline: bootstrapping"), "{log}");
    assert_eq!(report["store"]["pending"], 0);
    let app = report["per_app"][0]["app"].as_str().unwrap().to_string();
    let o = aware(&["explain", "--store", &url, "--app", &app, "--last", "3", "--json"]);
    assert!(o.status.success(), "{}", stderr(&o));
    let explained: serde_json::Value = serde_json::from_str(&stdout(&o)).unwrap();
    let steps: Vec<u64> =
        explained["decisions"].as_array().unwrap().iter().map(|d| d["step"].as_u64().unwrap()).collect();
    assert_eq!(steps, [97, 98, 99], "the last three decisions of {app}");
    // A second run into the same store (a restart) goes on numbering each app's episodes.
    let o = aware(&["run", "--apps", "2", "--steps", "100", "--episode-steps", "50", "--store", &url, "--json"]);
    assert!(o.status.success(), "{}", stderr(&o));
    // ... and its steps: a step names one decision in the store.
    let o = aware(&["explain", "--store", &url, "--app", &app, "--last", "2", "--json"]);
    let explained: serde_json::Value = serde_json::from_str(&stdout(&o)).unwrap();
    let steps: Vec<u64> =
        explained["decisions"].as_array().unwrap().iter().map(|d| d["step"].as_u64().unwrap()).collect();
    assert_eq!(steps, [198, 199], "the second run's last two decisions of {app}");
    let o = aware(&["explain", "--store", &url, "--app", &app, "--step", "30", "--json"]);
    assert_eq!(
        serde_json::from_str::<serde_json::Value>(&stdout(&o)).unwrap()["decisions"].as_array().unwrap().len(),
        1
    );
    let agent = format!("aware@{app}");
    let o = aware(&["store", "episodes", "--store", &url, "--agent", &agent, "--json"]);
    assert!(o.status.success(), "{}", stderr(&o));
    let episodes: serde_json::Value = serde_json::from_str(&stdout(&o)).unwrap();
    let numbers: Vec<u64> =
        episodes.as_array().unwrap().iter().map(|e| e["meta"]["episode"].as_u64().unwrap()).collect();
    assert_eq!(numbers, [0, 1, 2, 3]);
    let o = aware(&["run", "--apps", "1", "--steps", "10", "--store", "bogus:x"]);
    assert_one_line_error(&o, &["bogus:x", "unknown scheme"]);
    // The fallback stands in when the agent cannot be trusted: a rule, not a learned policy.
    let o = aware(&["run", "--apps", "1", "--steps", "10", "--fallback", "rl:/nonexistent/agent"]);
    assert_one_line_error(&o, &["--fallback", "learned policy", "rule-based"]);
}

/// A store server that does not answer when `aware run` starts: the apps are managed all the
/// same, every record is acknowledged into the spool, and the report says what waits there.
#[test]
fn run_spools_from_the_start_when_the_store_server_is_down() {
    // Nothing listens on a port this test just bound and released.
    let port = std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port();
    let url = format!("postgres://aware@127.0.0.1:{port}/aware");
    let dir = tempfile::tempdir().unwrap();
    let spool = dir.path().join("spool");
    let args = ["run", "--apps", "2", "--steps", "100", "--episode-steps", "50", "--store", &url];
    let o = aware(&[&args[..], &["--spool", spool.to_str().unwrap(), "--json"]].concat());
    assert!(o.status.success(), "{}", stderr(&o));
    let report: serde_json::Value = serde_json::from_str(&stdout(&o)).unwrap();
    // Per app and episode a begin, an append and a close; per episode the decisions; the
    // first stage change of each app.
    let pending = report["store"]["pending"].as_u64().unwrap();
    assert!(pending >= 2 * 2 * 3 + 2 + 2, "{}", report["store"]);
    assert_eq!(report["store"]["refused"], 0);
    // Said at once, on stderr and in the report, with the reason (a wrong URL looks the same).
    let why = report["store"]["unreachable_at_start"].as_str().expect("the reason");
    assert!(why.contains(&format!("127.0.0.1:{port}")), "{why}");
    assert!(stderr(&o).contains(&format!("store {url} unreachable: ")), "{}", stderr(&o));
    let journal = std::fs::read_to_string(spool.join("journal-0.jsonl")).unwrap();
    assert_eq!(journal.lines().count() as u64, pending, "every pending write is on disk");
    // The same run without a store serves the apps identically.
    let alone = aware(&["run", "--apps", "2", "--steps", "100", "--episode-steps", "50", "--json"]);
    let alone: serde_json::Value = serde_json::from_str(&stdout(&alone)).unwrap();
    assert_eq!(report["policies"], alone["policies"]);
}

/// `run` and `compare` answer a seed with the same bytes (the agent is seeded too), and a
/// different seed with different ones.
#[test]
fn run_and_compare_json_are_byte_identical_for_a_seed() {
    for (cmd, extra) in [("run", &["--episode-steps", "40"][..]), ("compare", &["--policies", "hpa,mpa"][..])] {
        let with_seed = |seed: &str| {
            let mut args = vec![cmd, "--apps", "2", "--steps", "80", "--seed", seed, "--json"];
            args.extend_from_slice(extra);
            let o = aware(&args);
            assert!(o.status.success(), "{cmd}: {}", stderr(&o));
            o.stdout
        };
        let a = with_seed("5");
        assert_eq!(a, with_seed("5"), "{cmd} --seed 5 twice");
        assert_ne!(a, with_seed("6"), "{cmd} --seed 5 and 6");
    }
}

/// `aware train --env grpc://ADDR` against `aware serve-env` in another process trains the same
/// agent as in-process training with the same arguments.
#[test]
fn train_through_serve_env_equals_training_in_process() {
    use std::io::{BufRead, BufReader};
    let dir = tempfile::tempdir().unwrap();
    let token = dir.path().join("token");
    std::fs::write(&token, "s3cret\n").unwrap();
    let mut server = Command::new(env!("CARGO_BIN_EXE_aware"))
        .args(["serve-env", "--listen", "127.0.0.1:0", "--token-file", token.to_str().unwrap()])
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let mut first = String::new();
    BufReader::new(server.stderr.take().unwrap()).read_line(&mut first).unwrap();
    let addr = first.trim().rsplit(' ').next().unwrap().to_string();
    assert!(first.contains("listening on"), "{first}");
    let run = |out: &str, remote: bool| {
        let out = dir.path().join(out);
        let mut args = vec!["train", "--algo", "ppo", "--action-space", "continuous", "--apps", "2", "--steps", "30"];
        args.extend(["--episodes", "3", "--seed", "5", "--population", "serverless", "--json"]);
        let out_s = out.to_str().unwrap().to_string();
        let url = format!("grpc://{addr}");
        let mut args: Vec<&str> = args;
        args.extend(["--out", &out_s]);
        if remote {
            args.extend(["--env", &url, "--token-file", token.to_str().unwrap()]);
        }
        let o = aware(&args);
        assert!(o.status.success(), "{}", stderr(&o));
        (
            std::fs::read(out.join("learning_curve.csv")).unwrap(),
            std::fs::read(out.join("policy_value.safetensors")).unwrap(),
        )
    };
    let remote = run("remote", true);
    let local = run("local", false);
    assert!(remote == local, "training through serve-env differs from in-process");
    // A wrong token: one line naming the address and the status, exit 1, nothing written.
    std::fs::write(&token, "wrong").unwrap();
    let out = dir.path().join("refused");
    let o = aware(
        &["train", "--algo", "ppo", "--apps", "1", "--steps", "5", "--episodes", "1", "--out"]
            .into_iter()
            .chain([out.to_str().unwrap(), "--env", &format!("grpc://{addr}"), "--token-file", token.to_str().unwrap()])
            .collect::<Vec<_>>(),
    );
    assert_one_line_error(&o, &[&addr, "UNAUTHENTICATED"]);
    assert!(!out.exists());
    server.kill().unwrap();
    let _ = server.wait();
}

/// Against an API server that refuses every connection the controller keeps retrying (with
/// backoff), and SIGTERM, as Kubernetes sends it to stop a pod, ends it cleanly: exit 0 within
/// its shutdown grace. Once it spun a core and took a second signal to stop.
#[test]
fn the_controller_stops_on_sigterm_while_its_api_server_is_unreachable() {
    let dir = tempfile::tempdir().unwrap();
    let kubeconfig = dir.path().join("kubeconfig");
    std::fs::write(
        &kubeconfig,
        "apiVersion: v1\nkind: Config\nclusters:\n- name: c\n  cluster:\n    server: http://127.0.0.1:1\n\
         contexts:\n- name: x\n  context:\n    cluster: c\n    user: u\ncurrent-context: x\n\
         users:\n- name: u\n  user:\n    token: t\n",
    )
    .unwrap();
    // A free port for /healthz: once it answers, the controller is up and handles signals.
    let port = std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port();
    let listen = format!("127.0.0.1:{port}");
    let mut controller = Command::new(env!("CARGO_BIN_EXE_aware"))
        .args(["controller", "--listen", &listen])
        .env("KUBECONFIG", &kubeconfig)
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let up = std::time::Instant::now() + std::time::Duration::from_secs(60);
    while std::net::TcpStream::connect(&listen).is_err() {
        if controller.try_wait().unwrap().is_some() || std::time::Instant::now() > up {
            let _ = controller.kill();
            panic!("the controller never served /healthz on {listen}");
        }
        std::thread::sleep(std::time::Duration::from_millis(100));
    }
    std::thread::sleep(std::time::Duration::from_millis(500));
    assert!(controller.try_wait().unwrap().is_none(), "the controller keeps running while it cannot reach the API");
    let killed = Command::new("kill").args(["-TERM", &controller.id().to_string()]).status();
    if !killed.is_ok_and(|s| s.success()) {
        let _ = controller.kill();
        panic!("could not send SIGTERM");
    }
    // Its grace is 5 s; a minute means it did not stop.
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(60);
    let status = loop {
        if let Some(status) = controller.try_wait().unwrap() {
            break status;
        }
        if std::time::Instant::now() > deadline {
            controller.kill().unwrap();
            panic!("still running a minute after SIGTERM");
        }
        std::thread::sleep(std::time::Duration::from_millis(100));
    };
    let mut err = String::new();
    std::io::Read::read_to_string(controller.stderr.as_mut().unwrap(), &mut err).unwrap();
    assert_eq!(status.code(), Some(0), "{err}");
}

#[test]
fn controller_webhook_certificate_problems_are_one_line_errors_naming_flag_and_file() {
    let tls = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../kube/tests/tls");
    let (cert, key) = (tls.join("server.crt"), tls.join("server.key"));
    let (cert, key) = (cert.to_str().unwrap(), key.to_str().unwrap());
    let missing = aware(&["controller", "--webhook", "--webhook-cert", "/nonexistent/tls.crt", "--webhook-key", key]);
    assert_one_line_error(&missing, &["--webhook-cert", "/nonexistent/tls.crt"]);
    let not_a_key = temp_file("not-a-key.pem", "-----BEGIN CERTIFICATE-----\nAAAA\n-----END CERTIFICATE-----\n");
    let not_a_key =
        aware(&["controller", "--webhook", "--webhook-cert", cert, "--webhook-key", not_a_key.to_str().unwrap()]);
    assert_one_line_error(&not_a_key, &["--webhook-key", "not-a-key.pem"]);
    // --webhook without its certificate is a usage error.
    let usage = aware(&["controller", "--webhook"]);
    assert!(!usage.status.success() && stderr(&usage).contains("--webhook-cert"), "{}", stderr(&usage));
}

#[test]
fn run_with_a_kept_meta_learner_embeds_each_app_from_its_fallback_episodes() {
    let dir = tempfile::tempdir().unwrap();
    let kept = dir.path().join("meta");
    let kept_s = kept.to_str().unwrap();
    let o = aware(&[
        "train-meta",
        "--apps",
        "5",
        "--seed",
        "2",
        "--probes",
        "2",
        "--episodes",
        "1",
        "--episode-steps",
        "20",
        "--hidden",
        "8",
        "--embedding",
        "4",
        "--out",
        kept_s,
        "--json",
    ]);
    assert!(o.status.success(), "{}", stderr(&o));
    let report: serde_json::Value = serde_json::from_str(&stdout(&o)).unwrap();
    assert_eq!((report["pool_apps"].as_u64(), report["embedding"].as_u64()), (Some(5), Some(4)));
    // The default embedding output, reported and kept in the meta-learner's checkpoint.
    assert_eq!(report["embedding_output"], "linear", "{report}");
    let kept_json: serde_json::Value =
        serde_json::from_slice(&std::fs::read(kept.join("meta").join("checkpoint.json")).unwrap()).unwrap();
    assert_eq!(kept_json["hyperparameters"]["output"], "linear", "{kept_json}");
    // Centred by default; the pool's mean output is kept with the meta-learner.
    assert_eq!(report["embedding_centring"], true, "{report}");
    let centre = kept_json["hyperparameters"]["centre"].as_array().expect("a saved centre");
    assert_eq!(centre.len(), 4, "{kept_json}");
    assert!(report["ood_threshold"].as_f64().unwrap() > 0.0);
    for t in ["ood_signature_threshold", "ood_persistence_threshold"] {
        assert!(report[t].as_f64().is_some_and(f64::is_finite), "{t}: {report}");
    }

    // Apps from another seed than the pool's: unseen.
    let url = format!("sqlite:{}", dir.path().join("aware.db").display());
    let run = [
        "run",
        "--meta",
        kept_s,
        "--store",
        &url,
        "--apps",
        "2",
        "--seed",
        "5",
        "--steps",
        "80",
        "--episode-steps",
        "20",
        "--json",
    ];
    let o = aware(&run);
    assert!(o.status.success(), "{}", stderr(&o));
    let report: serde_json::Value = serde_json::from_str(&stdout(&o)).unwrap();
    for app in report["per_app"].as_array().unwrap() {
        let verdict = app["workload_verdict"].as_str().unwrap();
        assert!(
            verdict.starts_with("known workload") || verdict.starts_with("workload out of distribution"),
            "{verdict}"
        );
    }
    // Nothing leaves bootstrapping before the app has its embedding (2 fallback episodes, as
    // the pool's probes) and one check with it: step 60.
    for c in report["stages"].as_array().unwrap() {
        if c["from"] == "offline" {
            assert!(c["step"].as_u64().unwrap() >= 60, "{c}");
        }
    }
    // Another episode length than the pool's: its embeddings would be read from other episodes.
    let mut other = run.to_vec();
    let at = other.len() - 2;
    other[at] = "25";
    assert_one_line_error(&aware(&other), &["--episode-steps 20"]);

    // The conditioned agent is kept and taken up again by a checkpoint like any other.
    let ckpt = dir.path().join("ckpt");
    let mut again = run.to_vec();
    let ckpt_s = ckpt.to_str().unwrap().to_string();
    again.extend(["--checkpoint", &ckpt_s]);
    assert!(aware(&again).status.success());
    let o = aware(&again);
    assert!(o.status.success(), "{}", stderr(&o));
    let report: serde_json::Value = serde_json::from_str(&stdout(&o)).unwrap();
    assert_eq!(report["checkpoint"]["restored"], true, "{}", report["checkpoint"]);
    // Too small a pool for its detector: refused before training, naming the flag.
    let small = dir.path().join("small");
    let o = aware(&["train-meta", "--apps", "3", "--out", small.to_str().unwrap()]);
    assert_one_line_error(&o, &["--apps", "at least 4"]);
    assert!(!small.exists());
    // The auxiliary task's weight: a number of at least 0.
    for bad in ["nan", "inf", "x", "1e30"] {
        let o = aware(&["train-meta", "--apps", "4", "--signature-weight", bad, "--out", small.to_str().unwrap()]);
        assert_eq!(o.status.code(), Some(2), "{bad}: {}", stderr(&o));
        assert!(stderr(&o).contains("--signature-weight"), "{bad}: {}", stderr(&o));
        assert!(!small.exists());
    }
    // Without a store there is nowhere to read embeddings from: a usage error.
    let o = aware(&["run", "--meta", kept_s, "--apps", "1", "--steps", "20"]);
    assert_eq!(o.status.code(), Some(2), "{}", stderr(&o));
    // A directory that holds no kept meta-learner, or another fallback than the pool's.
    let o = aware(&["run", "--meta", dir.path().to_str().unwrap(), "--store", &url, "--apps", "1", "--steps", "20"]);
    assert_one_line_error(&o, &["pool.json"]);
    let o = aware(&["run", "--meta", kept_s, "--store", &url, "--apps", "1", "--steps", "20", "--fallback", "hpa"]);
    assert_one_line_error(&o, &["--meta", "mpa"]);
}

/// An unknown policy is a usage error (exit 2, naming the flag and the name) in `compare` and in
/// `provision compare` alike; a policy listed twice is refused in both, naming it, before any
/// work.
#[test]
fn policy_lists_are_checked_alike_in_compare_and_provision_compare() {
    for args in
        [&["compare", "--policies", "hpa,nope"][..], &["provision", "compare", "--policies", "threshold,nope"][..]]
    {
        let o = aware(args);
        assert_eq!(o.status.code(), Some(2), "{args:?}: {}", stderr(&o));
        assert!(stderr(&o).contains("--policies") && stderr(&o).contains("\"nope\""), "{args:?}: {}", stderr(&o));
    }
    for args in [
        &["compare", "--apps", "1", "--steps", "5", "--policies", "hpa,mpa,hpa"][..],
        &["provision", "compare", "--policies", "threshold,threshold"][..],
    ] {
        let o = aware(args);
        assert_eq!(o.status.code(), Some(1), "{args:?}");
        let twice = if args[0] == "compare" { "hpa is listed twice" } else { "threshold is listed twice" };
        assert_one_line_error(&o, &["--policies", twice]);
    }
}

/// A trace whose peak no simulated app could serve (more replicas than the simulator runs) is
/// refused before the run, naming the flag, the file and where the peak is; it failed part-way
/// once, naming only an app.
#[test]
fn a_trace_too_heavy_to_simulate_is_refused_naming_the_file() {
    let trace = temp_file("heavy.csv", "timestamp,count\n0,5\n60,5e10\n120,5\n");
    let path = trace.to_str().unwrap();
    for args in [
        &["simulate", "--apps", "1", "--steps", "5", "--trace", path][..],
        &["compare", "--apps", "2", "--steps", "5", "--policies", "hpa", "--trace", path][..],
    ] {
        let o = aware(args);
        assert_eq!(o.status.code(), Some(1), "{args:?}");
        assert_one_line_error(&o, &["--trace", path, "interval 2", "10000", "bounds.max_replicas"]);
    }
    // A profile may allow more replicas than the simulator runs (a live cluster might): refused
    // for a simulated run, naming the file and the key.
    let profile = temp_file("many-replicas.yaml", "bounds:\n  max_replicas: 20000\n");
    let profile = profile.to_str().unwrap();
    let o = aware(&["simulate", "--apps", "1", "--steps", "5", "--profile", profile]);
    assert_eq!(o.status.code(), Some(1));
    assert_one_line_error(&o, &[profile, "bounds.max_replicas", "20000", "10000"]);
}

/// A spool that cannot be a directory is refused before anything is made: the store it was to
/// spool for is not created.
#[test]
fn an_unusable_spool_is_refused_before_the_store_is_created() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("spool-file");
    std::fs::write(&file, "x").unwrap();
    let db = dir.path().join("x.db");
    let url = format!("sqlite:{}", db.display());
    for spool in [file.clone(), file.join("below")] {
        let spool = spool.to_str().unwrap();
        let o =
            aware(&["run", "--apps", "1", "--steps", "10", "--episode-steps", "10", "--store", &url, "--spool", spool]);
        assert_eq!(o.status.code(), Some(1), "{spool}");
        assert_one_line_error(&o, &["--spool", spool, "not a directory"]);
        let mut left: Vec<_> = std::fs::read_dir(dir.path()).unwrap().map(|e| e.unwrap().file_name()).collect();
        left.sort();
        assert_eq!(left, ["spool-file"], "nothing created beside the spool file");
    }
    assert_eq!(std::fs::read_to_string(&file).unwrap(), "x", "the file is untouched");
}

/// `train-meta` that fails after making its --out directory removes what it made; a directory
/// that was there before stays.
#[test]
fn a_failed_train_meta_removes_the_directory_it_created() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("f");
    std::fs::write(&file, "x").unwrap();
    let kept = dir.path().join("kept");
    std::fs::create_dir(&kept).unwrap();
    // `NEW/../f`: making it makes NEW, then fails on the file.
    for (made, existed) in [(dir.path().join("new"), false), (kept.clone(), true)] {
        let out = made.join("..").join("f");
        let o = aware(&[
            "train-meta",
            "--apps",
            "4",
            "--probes",
            "1",
            "--episodes",
            "1",
            "--episode-steps",
            "2",
            "--hidden",
            "4",
            "--embedding",
            "2",
            "--out",
            out.to_str().unwrap(),
        ]);
        assert_eq!(o.status.code(), Some(1), "{}", stderr(&o));
        assert_eq!(made.exists(), existed, "{}: {}", made.display(), stderr(&o));
    }
    assert_eq!(std::fs::read_to_string(&file).unwrap(), "x");
}

/// `train-meta` keeps no training state once its pool is kept, and `--resume` with nothing to
/// resume is one line naming the flag, leaving no directory behind.
#[test]
fn train_meta_resumes_only_what_an_interrupted_run_kept() {
    let dir = tempfile::tempdir().unwrap();
    let args =
        ["train-meta", "--apps", "4", "--probes", "1", "--episodes", "2", "--episode-steps", "5", "--hidden", "4"];
    let done = dir.path().join("done");
    let o = aware(&[&args[..], &["--embedding", "2", "--out", done.to_str().unwrap()]].concat());
    assert!(o.status.success(), "{}", stderr(&o));
    assert!(done.join("pool.json").exists() && !done.join("training").exists());
    let none = dir.path().join("none");
    let o = aware(&[&args[..], &["--embedding", "2", "--resume", "--out", none.to_str().unwrap()]].concat());
    assert_one_line_error(&o, &["training/state.cbor", "--resume: no interrupted run's state here"]);
    assert!(!none.exists(), "the directory the refused run made is gone");
    // A directory another process is writing into (here this test holds its lock, as a run
    // still going would) is refused before anything there is read or cleared.
    #[cfg(unix)]
    {
        let held = dir.path().join("held");
        std::fs::create_dir_all(held.join("training")).unwrap();
        std::fs::write(held.join("training").join(".aware-x.tmp"), "a write under way").unwrap();
        let lock = aware_lab::output::lock_dir(&held).unwrap();
        let o = aware(&[&args[..], &["--embedding", "2", "--resume", "--out", held.to_str().unwrap()]].concat());
        assert_one_line_error(&o, &["held", "another process is writing into this directory"]);
        assert!(!stderr(&o).contains("goes on from it"), "no hint to resume what another process runs");
        assert!(held.join("training").join(".aware-x.tmp").exists());
        drop(lock);
    }
}

/// Inspecting a SQLite store leaves its directory as it was: no `-wal`/`-shm` files left behind
/// by a read-only connection, and every record still there.
#[test]
fn read_only_store_commands_leave_no_journal_files_behind() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("s.db");
    let url = format!("sqlite:{}", db.display());
    let o = aware(&["compare", "--apps", "1", "--steps", "5", "--policies", "hpa,mpa", "--store", &url]);
    assert!(o.status.success(), "{}", stderr(&o));
    let listing = || {
        let mut names: Vec<_> =
            std::fs::read_dir(dir.path()).unwrap().map(|e| e.unwrap().file_name().into_string().unwrap()).collect();
        names.sort();
        names
    };
    assert_eq!(listing(), ["s.db"]);
    let before = std::fs::read(&db).unwrap();
    let csv = dir.path().join("e.csv");
    for args in [
        &["store", "stats", "--store", &url][..],
        &["store", "episodes", "--store", &url, "--json"][..],
        &["store", "export", "--store", &url, "--out", csv.to_str().unwrap()][..],
    ] {
        let o = aware(args);
        assert!(o.status.success(), "{args:?}: {}", stderr(&o));
        let mut want = vec!["s.db".to_string()];
        if csv.exists() {
            want.insert(0, "e.csv".into());
        }
        assert_eq!(listing(), want, "{args:?}");
    }
    assert_eq!(std::fs::read(&db).unwrap(), before, "the store is unchanged");
    let o = aware(&["store", "stats", "--store", &url, "--json"]);
    let v: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(v["episodes"].as_u64(), Some(2), "{v}");
}

/// A token file that is missing or empty is named with its flag, in `serve-env` and in `train
/// --env`.
#[test]
fn token_file_errors_name_the_flag() {
    let empty = temp_file("empty-token", " \n");
    let empty = empty.to_str().unwrap();
    for (args, why) in [
        (&["serve-env", "--listen", "127.0.0.1:0", "--token-file", "/nonexistent/token"][..], "cannot read"),
        (&["serve-env", "--listen", "127.0.0.1:0", "--token-file", empty][..], "empty"),
        (
            &[
                "train",
                "--algo",
                "ddpg",
                "--apps",
                "1",
                "--episodes",
                "1",
                "--steps",
                "5",
                "--out",
                "/nonexistent/out",
                "--env",
                "grpc://127.0.0.1:1",
                "--token-file",
                "/nonexistent/token",
            ][..],
            "cannot read",
        ),
    ] {
        let o = aware(args);
        assert_eq!(o.status.code(), Some(1), "{args:?}");
        let file = args[args.iter().position(|a| *a == "--token-file").unwrap() + 1];
        assert_one_line_error(&o, &[&format!("--token-file {file}"), why]);
    }
}

/// `train --env` with a scheme no client speaks is refused before anything is tried, naming the
/// flag and the schemes that work.
#[test]
fn train_refuses_an_unknown_env_scheme() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("out");
    let o = aware(&[
        "train",
        "--algo",
        "ddpg",
        "--apps",
        "1",
        "--episodes",
        "1",
        "--steps",
        "5",
        "--out",
        out.to_str().unwrap(),
        "--env",
        "foo://x",
    ]);
    assert_eq!(o.status.code(), Some(1));
    assert_one_line_error(&o, &["--env foo://x", "unknown scheme \"foo\"", "grpc://", "grpcs://"]);
    assert!(!stderr(&o).contains("connect"), "refused by its scheme, not by a failed connection");
    assert!(!out.exists());
}

/// FLASH's variant of the meta-learner is a flag away: its dropout, its selection of the best
/// and worst trajectories and, unless `--embedding` says otherwise, its 32-d embedding.
#[test]
fn train_meta_keeps_flashs_variant_when_asked() {
    let dir = tempfile::tempdir().unwrap();
    let kept = dir.path().join("flash");
    let args = ["train-meta", "--apps", "4", "--probes", "1", "--episodes", "1", "--episode-steps", "10"];
    let o = aware(
        &[&args[..], &["--hidden", "8", "--meta-variant", "flash", "--json", "--out", kept.to_str().unwrap()]].concat(),
    );
    assert!(o.status.success(), "{}", stderr(&o));
    let report: serde_json::Value = serde_json::from_str(&stdout(&o)).unwrap();
    assert_eq!(report["embedding"], 32, "{report}");
    let checkpoint: serde_json::Value =
        serde_json::from_slice(&std::fs::read(kept.join("meta").join("checkpoint.json")).unwrap()).unwrap();
    let h = &checkpoint["hyperparameters"];
    assert!(h["dropout"].as_f64().is_some_and(|d| (d - 0.05).abs() < 1e-6), "{h}");
    assert_eq!(h["selection"], "best_and_worst", "{h}");
    let bad = aware(&["train-meta", "--apps", "4", "--meta-variant", "maml", "--out", "x"]);
    assert_eq!(bad.status.code(), Some(2));
}

/// `run --meta DIR` takes up the base learner DIR keeps unless `--agent` names the other.
#[test]
fn run_with_a_kept_ppo_pool_needs_no_agent_flag() {
    let dir = tempfile::tempdir().unwrap();
    let kept = dir.path().join("ppo");
    let kept_s = kept.to_str().unwrap();
    let args = ["train-meta", "--apps", "4", "--probes", "1", "--episodes", "1", "--episode-steps", "10"];
    let o =
        aware(&[&args[..], &["--hidden", "8", "--embedding", "4", "--base-learner", "ppo", "--out", kept_s]].concat());
    assert!(o.status.success(), "{}", stderr(&o));
    let url = format!("sqlite:{}", dir.path().join("a.db").display());
    let run =
        ["run", "--meta", kept_s, "--store", &url, "--apps", "2", "--steps", "20", "--episode-steps", "10", "--json"];
    let o = aware(&run);
    assert!(o.status.success(), "{}", stderr(&o));
    let o = aware(&[&run[..], &["--agent", "ddpg"]].concat());
    assert_one_line_error(&o, &["--agent"]);
}

/// A run refused on its input creates no store and writes none: the policies, the fallback and
/// the checkpoint directory are checked before the store is opened.
#[test]
fn a_run_refused_on_its_input_creates_no_store() {
    let dir = tempfile::tempdir().unwrap();
    let db = |name: &str| dir.path().join(name);
    let url = |name: &str| format!("sqlite:{}", db(name).display());
    let missing = format!("rl:{}", dir.path().join("missing").display());
    let compare = |policies: &str, db: &str| {
        aware(&["compare", "--apps", "1", "--steps", "20", "--policies", policies, "--store", &url(db)])
    };
    let o = compare(&format!("hpa,{missing}"), "a.db");
    assert_one_line_error(&o, &["missing"]);
    let o = aware(&["simulate", "--apps", "1", "--steps", "5", "--policy", &missing, "--store", &url("b.db")]);
    assert_one_line_error(&o, &["missing"]);
    // More replicas than the simulator runs: refused naming the flag, before HPA's run is stored.
    let o = compare("hpa,fixed:20000x1x64", "c.db");
    assert_one_line_error(&o, &["--policies", "fixed:20000x1x64", "10000"]);
    // An agent checkpoint (as `aware train --out` writes) where a lifecycle one belongs.
    let trained = dir.path().join("trained");
    std::fs::create_dir(&trained).unwrap();
    std::fs::write(trained.join("checkpoint.json"), "{}").unwrap();
    let run = ["run", "--apps", "1", "--steps", "20", "--episode-steps", "10"];
    let o = aware(&[&run[..], &["--store", &url("d.db"), "--checkpoint", trained.to_str().unwrap()]].concat());
    assert_one_line_error(&o, &["--checkpoint", "agent checkpoint"]);
    let o = aware(&[&run[..], &["--store", &url("e.db"), "--fallback", &missing]].concat());
    assert_one_line_error(&o, &["--fallback", "learned policy"]);
    // Nor does it say what it would have served: the refusal is the one line.
    let o = aware(&[&run[..], &["--metrics-listen", "127.0.0.1:0", "--fallback", &missing]].concat());
    assert_one_line_error(&o, &["--fallback"]);
    let o = aware(&["simulate", "--apps", "1", "--steps", "5", "--serve-metrics", "127.0.0.1:0", "--policy", &missing]);
    assert_one_line_error(&o, &["missing"]);
    let mut left: Vec<String> =
        std::fs::read_dir(dir.path()).unwrap().map(|e| e.unwrap().file_name().to_string_lossy().into_owned()).collect();
    left.sort();
    assert_eq!(left, ["trained"], "no store nor spool made");
    // A run that begins says where its metrics are served.
    let o = aware(&[&run[..], &["--metrics-listen", "127.0.0.1:0", "--json"]].concat());
    assert!(o.status.success(), "{}", stderr(&o));
    assert!(stderr(&o).contains("serving the lifecycle's metrics on http://127.0.0.1:"), "{}", stderr(&o));
}

/// `--out /dev/stdout` with stdout redirected to a file writes into that file, after what was
/// there: the file is neither replaced by a rename nor truncated.
#[cfg(target_os = "linux")]
#[test]
fn out_to_dev_stdout_writes_into_the_file_stdout_goes_to() {
    let dir = tempfile::tempdir().unwrap();
    let log = dir.path().join("log.txt");
    std::fs::write(&log, "before\n").unwrap();
    let appending = std::fs::OpenOptions::new().append(true).open(&log).unwrap();
    let status = Command::new(env!("CARGO_BIN_EXE_aware"))
        .args(["generate", "--apps", "1", "--json", "--out", "/dev/stdout"])
        .stdout(appending)
        .status()
        .unwrap();
    assert!(status.success());
    let text = std::fs::read_to_string(&log).unwrap();
    assert!(text.starts_with("before\n") && text.matches("\"peak_replicas\"").count() == 2, "{text}");
    assert!(std::fs::symlink_metadata(&log).unwrap().file_type().is_file());
    let left: Vec<_> = std::fs::read_dir(dir.path()).unwrap().map(|e| e.unwrap().file_name()).collect();
    assert_eq!(left, ["log.txt"]);
}

/// A checkpoint that cannot be used is set aside and the run starts over, and the operator is
/// told so on stderr when it happens, with `--json` too (whose stdout stays one JSON document).
#[test]
fn a_rejected_checkpoint_is_reported_on_stderr_as_it_is_set_aside() {
    let dir = tempfile::tempdir().unwrap();
    let ckpt = dir.path().join("ckpt");
    std::fs::create_dir(&ckpt).unwrap();
    std::fs::write(ckpt.join("lifecycle.json"), "{").unwrap();
    let ckpt_s = ckpt.to_str().unwrap();
    // With the default log filter (warnings), whatever the caller's RUST_LOG says.
    let o = Command::new(env!("CARGO_BIN_EXE_aware"))
        .args(["run", "--apps", "1", "--steps", "20", "--episode-steps", "10", "--checkpoint", ckpt_s, "--json"])
        .env_remove("RUST_LOG")
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", stderr(&o));
    let report: serde_json::Value = serde_json::from_str(&stdout(&o)).unwrap();
    assert!(report["checkpoint"]["rejected"].is_string(), "{}", report["checkpoint"]);
    let err = stderr(&o);
    let warning = err.lines().find(|l| l.contains("not used")).unwrap_or_else(|| panic!("no warning: {err:?}"));
    assert!(warning.contains("WARN") && warning.contains(ckpt_s) && warning.contains("rejected-1"), "{warning}");
    assert!(ckpt.join("rejected-1").join("lifecycle.json").exists());
}

/// A negative number is refused by the option it was given to, naming it, not taken for an
/// unknown flag.
#[test]
fn a_negative_number_is_refused_naming_its_option() {
    for (args, flag) in [
        (&["compare", "--apps", "-1"][..], "--apps"),
        (&["run", "--apps", "2", "--steps", "20", "--seed", "-5"][..], "--seed"),
        (&["train-meta", "--apps", "4", "--signature-weight", "-1", "--out", "x"][..], "--signature-weight"),
        (&["explain", "--store", "sqlite:x.db", "--app", "a", "--step", "-1"][..], "--step"),
    ] {
        let o = aware(args);
        assert_eq!(o.status.code(), Some(2), "{args:?}: {}", stderr(&o));
        let err = stderr(&o);
        assert!(err.contains(&format!("for '{flag}")) && !err.contains("unexpected argument"), "{args:?}: {err}");
    }
}
