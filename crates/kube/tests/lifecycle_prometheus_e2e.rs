//! The lifecycle on the Prometheus backend, end to end against a real Prometheus server that the
//! test starts, stops and starts again: the simulator's pods are served by the exporter,
//! scraped by Prometheus, read back through the Prometheus `Cluster`, decided on by the live
//! lifecycle (the agent SERVING), and the decisions applied back to the simulator. Stopping
//! Prometheus makes the rule-based fallback act (with nothing to read, it keeps the
//! allocation) and the decision log say why; the agent resumes once Prometheus is back.
//!
//! Needs Debian's `prometheus` binary on the PATH (`.ci/services.sh start` installs it). CI sets
//! `AWARE_REQUIRE_SERVERS=1`, so a missing binary fails there; elsewhere the test says it
//! skipped.

mod common;

use std::sync::{Arc, Mutex};
use std::time::Duration;

use aware_core::{Cluster, Recommendation};
use aware_kube::{MetricsExporter, PrometheusCluster, PrometheusConfig};
use aware_lifecycle::Stage;
use aware_lifecycle::algorithm::LifecycleState;
use aware_lifecycle::live::{LiveDecision, LiveManager};
use aware_lifecycle::manager::{ManagerConfig, fresh_agent};
use aware_sim::{SimCluster, SimConfig, generate_apps};
use common::{Server, free_port, prometheus_binary};

/// Long enough after an update for the 2 s rate window to hold only its samples.
const HOLD: Duration = Duration::from_millis(2600);

#[test]
fn stopping_prometheus_makes_the_fallback_act_and_the_agent_resumes_when_it_returns() {
    let Some(binary) = prometheus_binary() else { return };
    let dir = tempfile::tempdir().unwrap();
    let exporter_addr = format!("127.0.0.1:{}", free_port());
    let mut prometheus = Server::new(binary, dir.path(), &exporter_addr);
    prometheus.start();

    let apps = generate_apps(1, 11, 3600.0);
    let name = apps[0].name.clone();
    let sim = Arc::new(Mutex::new(SimCluster::new(apps, Vec::new(), SimConfig::default(), 11)));
    for _ in 0..20 {
        sim.lock().unwrap().advance().unwrap();
    }
    let handle = MetricsExporter::new("default").serve(&exporter_addr).unwrap_or_else(|e| panic!("{e}"));
    let mut config = PrometheusConfig::new(prometheus.url(), vec![name.clone()]);
    config.rate_window = "2s".into();
    config.max_staleness_s = 3.0;
    config.timeout_s = 1.0;
    config.wait_on_advance = false;
    let actuated = sim.clone();
    let mut backend =
        PrometheusCluster::new(config, move |_: &str, rec: &Recommendation| actuated.lock().unwrap().apply(0, rec));

    let serving = LifecycleState::fresh(Stage::Serving, Some(-1e6));
    let profile = aware_core::Profile::default();
    let mut manager = LiveManager::new(
        std::slice::from_ref(&name),
        &profile,
        fresh_agent(5),
        ManagerConfig { log: true, ..Default::default() },
    )
    .unwrap();
    manager.restore_lifecycles(&[(name.clone(), serving)], "test: a checkpoint that serves");
    assert_eq!(manager.stages(), vec![Stage::Serving]);

    // One control interval: the simulator moves on, the exporter serves it, Prometheus scrapes
    // it, and the lifecycle decides on what Prometheus says.
    let mut step = 20u64;
    let mut interval = |manager: &mut LiveManager, backend: &mut dyn Cluster| -> LiveDecision {
        let truth = {
            let mut sim = sim.lock().unwrap();
            sim.advance().unwrap();
            sim.observe(0).unwrap()
        };
        handle.update(step, &[(name.clone(), truth)]);
        step += 1;
        std::thread::sleep(HOLD);
        manager.interval(backend).unwrap().remove(0)
    };

    // Prometheus up: once its rate window has samples, the agent acts.
    let mut first = None;
    for i in 0..6 {
        let d = interval(&mut manager, &mut backend);
        if d.agent_acted {
            first = Some(i);
            break;
        }
    }
    assert!(first.is_some(), "the agent never acted while Prometheus was up: {:?}", manager.take_decisions());
    for _ in 0..2 {
        let d = interval(&mut manager, &mut backend);
        assert!(d.agent_acted, "{:?}", d.decision);
        assert_eq!(d.decision.acting_policy, "aware");
        assert!(d.decision.observation.is_some());
    }

    // Prometheus stops: no observation; the fallback acts and keeps the allocation.
    prometheus.stop();
    let before = sim.lock().unwrap().target(0).unwrap();
    for _ in 0..3 {
        let d = interval(&mut manager, &mut backend);
        assert!(!d.agent_acted);
        assert_eq!(d.decision.acting_policy, "mpa");
        assert!(d.recommendation.is_none(), "{:?}", d.decision);
        assert!(d.decision.observation.is_none());
        assert!(d.decision.guard.contains("backend unavailable"), "{}", d.decision.guard);
    }
    assert_eq!(sim.lock().unwrap().target(0).unwrap(), before, "nothing was applied while Prometheus was down");

    // Prometheus returns (same data directory): the agent resumes once fresh samples arrive.
    prometheus.start();
    let mut resumed = false;
    for _ in 0..6 {
        let d = interval(&mut manager, &mut backend);
        if d.agent_acted {
            resumed = true;
            break;
        }
        assert!(d.decision.guard.starts_with("fallback"), "{:?}", d.decision);
    }
    assert!(resumed, "the agent did not resume after Prometheus returned: {:?}", manager.take_decisions());
    let report = manager.report();
    assert_eq!(report[0].stage, Stage::Serving);
    assert!(report[0].unavailable >= 3, "{report:?}");
}
