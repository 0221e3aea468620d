//! `aware demo`'s report directory and store, the decision log `aware explain` reads, and the
//! attributions behind the agent's actions.

use aware_lab::progress::Silent;
use aware_lab::workload::{Workload, WorkloadSpec};
use aware_lifecycle::Stage;
use aware_lifecycle::decision::{Decision, gradient_times_input};
use aware_lifecycle::demo::{DemoSpec, demo};
use aware_lifecycle::explain::{Query, explain};
use aware_lifecycle::manager::ManagerConfig;
use aware_lifecycle::run::{Plan, Variant, run_manager};

fn small(out: &std::path::Path) -> DemoSpec {
    DemoSpec { out: out.to_path_buf(), apps: 2, steps: 400, episode_steps: 50, seed: 4, ..DemoSpec::default() }
}

#[test]
fn demo_writes_its_report_and_store_and_refuses_to_clobber() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("report");
    let r = demo(&small(&out), &Silent).unwrap();
    let names: Vec<&str> = r.policies.iter().map(|p| p.policy.as_str()).collect();
    assert_eq!(names, ["aware", "mpa", "no-bootstrap"]);
    for f in ["report.md", "report.json", "timeline.png", "aware.db"] {
        assert!(out.join(f).metadata().unwrap().len() > 0, "{f}");
    }
    let json: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(out.join("report.json")).unwrap()).unwrap();
    assert_eq!(json["policies"].as_array().unwrap().len(), 3);
    let stages = json["stages"].as_array().unwrap();
    assert!(stages.len() >= 2, "every app starts bootstrapping: {stages:?}");
    assert!(stages.iter().all(|s| ["app", "step", "from", "to", "reason"].iter().all(|k| s.get(k).is_some())));
    let md = std::fs::read_to_string(out.join("report.md")).unwrap();
    assert!(md.contains("| aware |") && md.contains("timeline.png"), "{md}");
    // An app the fallback serves at the end is named with its agent's last check.
    for a in r.per_app.iter().filter(|a| a.stage == Stage::Offline) {
        let check = a.counts.last_check.as_deref().unwrap_or("none yet");
        assert!(md.contains(&format!("- {}: {check}", a.app)), "{md}");
    }
    // Each app's rows under `aware` and `mpa` add up to the policies' rows, and the report
    // shows them.
    for (policy, row) in [("aware", &r.policies[0].summary), ("mpa", &r.policies[1].summary)] {
        let apps: Vec<_> = r.per_app.iter().map(|a| if policy == "aware" { &a.aware } else { &a.mpa }).collect();
        assert_eq!(apps.iter().map(|s| s.slo_violations).sum::<u64>(), row.slo_violations, "{policy}");
        let cores: f64 = apps.iter().map(|s| s.core_seconds).sum();
        assert!((cores - row.core_seconds).abs() <= 1e-9 * row.core_seconds.max(1.0), "{policy}: {cores}");
        assert!(apps.iter().zip(&r.per_app).all(|(s, a)| s.app == a.app), "{policy}");
    }
    let first = &r.per_app[0];
    assert!(
        md.contains(&format!(
            "| {} / {:.0} | {} / {:.0} |",
            first.aware.slo_violations, first.aware.core_seconds, first.mpa.slo_violations, first.mpa.core_seconds
        )),
        "{md}"
    );
    assert!(json["per_app"][0]["mpa"]["core_seconds"].as_f64().is_some(), "{json}");
    // Same traffic for all three: the same arrivals were offered.
    let arrivals: Vec<f64> = r.policies.iter().map(|p| p.summary.arrivals).collect();
    assert!(arrivals.iter().all(|&a| (a - arrivals[0]).abs() < 1e-6 * arrivals[0]), "{arrivals:?}");

    // Every interval of every app is explained from the store.
    let app = &r.per_app[0].app;
    let last = explain(&r.store, app, Query::Last(3)).unwrap();
    assert_eq!(last.decisions.iter().map(|d| d.step).collect::<Vec<_>>(), [397, 398, 399]);
    let at = explain(&r.store, app, Query::Step(10)).unwrap();
    assert_eq!(at.decisions.len(), 1);
    assert_eq!(at.decisions[0].acting_policy, "mpa", "bootstrapping: the fallback acts first");
    let err = explain(&r.store, "no-such-app", Query::Last(1)).unwrap_err().to_string();
    assert!(err.contains("no-such-app") && err.contains(app.as_str()), "{err}");

    // A non-empty directory needs --force, and then the demo's own files are replaced.
    let err = demo(&small(&out), &Silent).unwrap_err().to_string();
    assert!(err.contains("--out") && err.contains("--force"), "{err}");
    std::fs::write(out.join("notes.txt"), "mine").unwrap();
    demo(&DemoSpec { force: true, ..small(&out) }, &Silent).unwrap();
    assert_eq!(std::fs::read_to_string(out.join("notes.txt")).unwrap(), "mine");
    let again = explain(&r.store, app, Query::Step(10)).unwrap();
    assert_eq!(again.decisions.len(), 1, "the old store was replaced, not appended to");
    assert!(!json.as_object().unwrap().contains_key("interrupted"), "absent when nothing was kept");

    // A demo stopped while it moved its files in kept the run before it in its staging
    // directory: a later run leaves it there and names it.
    let stopped = out.join(".aware-demo-stopped").join("previous");
    std::fs::create_dir_all(&stopped).unwrap();
    std::fs::write(stopped.join("report.md"), "the only copy").unwrap();
    let r = demo(&DemoSpec { force: true, ..small(&out) }, &Silent).unwrap();
    assert_eq!(r.interrupted, [out.join(".aware-demo-stopped")]);
    assert_eq!(std::fs::read_to_string(stopped.join("report.md")).unwrap(), "the only copy");
    let json: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(out.join("report.json")).unwrap()).unwrap();
    assert_eq!(json["interrupted"].as_array().unwrap().len(), 1);
    let md = std::fs::read_to_string(out.join("report.md")).unwrap();
    assert!(md.contains(&stopped.display().to_string()), "{md}");
}

/// Without bootstrapping the agent acts from the first interval: each of its decisions carries
/// an attribution per action dimension over every state feature, and the attribution is
/// gradient × input (a feature at 0 contributes 0; the numbers match the actor's response).
#[test]
fn agent_decisions_carry_gradient_times_input() {
    let w = Workload::load(&WorkloadSpec { apps: 2, seed: 6, steps: 100, ..WorkloadSpec::default() }).unwrap();
    let plan = Plan::new(&w, 100, 50).unwrap();
    let config = ManagerConfig { episode_steps: 50, log: true, ..ManagerConfig::default() };
    let mut log: Vec<Decision> = Vec::new();
    run_manager(&w, &plan, Variant::NoBootstrap, &config, 6, &mut log, &Silent).unwrap();
    assert_eq!(log.len(), 200);
    let agent: Vec<&Decision> = log.iter().filter(|d| d.acting_policy == "aware").collect();
    assert!(!agent.is_empty());
    for d in &agent {
        let a = d.attribution.as_ref().expect("agent actions are explained");
        assert_eq!(a.iter().map(|x| x.dimension.as_str()).collect::<Vec<_>>(), ["cpu", "memory", "replicas"]);
        for dim in a {
            assert_eq!(dim.features.len(), aware_env::STATE_DIM);
            for f in &dim.features {
                if f.value == 0.0 {
                    assert_eq!(f.attribution, 0.0, "{f:?}");
                }
            }
            let sizes: Vec<f32> = dim.features.iter().map(|f| f.attribution.abs()).collect();
            assert!(sizes.windows(2).all(|p| p[0] >= p[1]), "largest first: {sizes:?}");
        }
    }
    assert!(log.iter().filter(|d| d.acting_policy != "aware").all(|d| d.attribution.is_none()));

    // The central difference against a linear check: for the actor at a state, moving feature f
    // by δ changes the action by about gradient · δ.
    let agent: aware_lifecycle::LifecycleAgent =
        aware_agents::ddpg::Ddpg::new(aware_env::STATE_DIM, 3, Default::default(), 9).into();
    let state: Vec<f32> = (0..aware_env::STATE_DIM).map(|i| 0.1 + 0.07 * i as f32).collect();
    // A conditioned agent's embedding is one feature: scaling the whole embedding by 1 %
    // changes the action by about its attribution · 0.01.
    let conditioned: aware_lifecycle::LifecycleAgent =
        aware_agents::ddpg::Ddpg::new(aware_env::STATE_DIM + 4, 3, Default::default(), 9).into();
    let mut with_embedding = state.clone();
    with_embedding.extend([0.5, -0.5, 0.5, 0.5]);
    let g = gradient_times_input(&conditioned, &with_embedding, aware_env::STATE_DIM).unwrap();
    assert!(g.iter().all(|row| row.len() == aware_env::STATE_DIM + 1));
    let base = conditioned.greedy(&with_embedding).unwrap();
    let mut moved = with_embedding.clone();
    moved[aware_env::STATE_DIM..].iter_mut().for_each(|v| *v *= 1.01);
    let after = conditioned.greedy(&moved).unwrap();
    for a in 0..3 {
        let (predicted, actual) = (g[a][aware_env::STATE_DIM] * 0.01, after[a] - base[a]);
        assert!((predicted - actual).abs() <= 1e-4 + 0.05 * actual.abs(), "embedding dim {a}: {predicted} vs {actual}");
    }
    let g = gradient_times_input(&agent, &state, aware_env::STATE_DIM).unwrap();
    let base = agent.greedy(&state).unwrap();
    for f in [0, 3, 10] {
        let mut moved = state.clone();
        moved[f] *= 1.01; // δ = 1 % of the input: predicted change = (g·x)·0.01
        let after = agent.greedy(&moved).unwrap();
        for a in 0..3 {
            let predicted = g[a][f] * 0.01;
            let actual = after[a] - base[a];
            assert!(
                (predicted - actual).abs() <= 1e-4 + 0.05 * actual.abs(),
                "feature {f} dim {a}: {predicted} vs {actual}"
            );
        }
    }
}
