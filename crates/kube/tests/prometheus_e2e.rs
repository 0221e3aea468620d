//! End to end against a real Prometheus server: the simulator's observations are served by the
//! exporter, scraped every second by Prometheus (`.ci/services.sh` starts it with that scrape
//! config), and read back through the Prometheus `Cluster` backend; they must match the
//! simulator's ground truth within the scrape resolution. Stopping the exporter makes the
//! backend report the app unavailable (stale), and it resumes when the exporter returns.
//!
//! CI starts the server and sets `AWARE_REQUIRE_SERVERS=1`, so a missing server fails there;
//! elsewhere the test says it skipped (the store suite's convention).

use std::collections::BTreeMap;
use std::time::Duration;

use aware_core::{Cluster, ClusterError, Observation, PodPhase};
use aware_kube::{MetricsExporter, PrometheusCluster, PrometheusConfig};
use aware_sim::{SimCluster, SimConfig, generate_apps};

fn env(var: &str) -> Option<String> {
    match std::env::var(var) {
        Ok(v) => Some(v),
        Err(_) if std::env::var("AWARE_REQUIRE_SERVERS").as_deref() == Ok("1") => {
            panic!("{var} is not set but AWARE_REQUIRE_SERVERS=1")
        }
        Err(_) => {
            eprintln!("skipped: {var} not set (start servers with `eval \"$(bash .ci/services.sh start)\"`)");
            None
        }
    }
}

fn close(what: &str, got: f64, want: f64, rel: f64) {
    let tol = rel * want.abs().max(1e-9);
    assert!((got - want).abs() <= tol, "{what}: Prometheus says {got}, simulator {want} (tolerance {tol})");
}

/// Holds long enough for the 3 s rate window (three scrapes 1 s apart) to lie after the update.
const HOLD: Duration = Duration::from_millis(4500);

fn compare(step: u64, truth: &Observation, seen: &Observation) {
    assert_eq!(seen.desired_replicas, truth.desired_replicas, "step {step}: desired replicas");
    assert_eq!(seen.template.limits, truth.template.limits, "step {step}: template (the spec's limits)");
    let truth_pods: BTreeMap<&str, _> = truth.pods.iter().map(|p| (p.name.as_str(), p)).collect();
    let seen_pods: BTreeMap<&str, _> = seen.pods.iter().map(|p| (p.name.as_str(), p)).collect();
    assert_eq!(seen_pods.keys().collect::<Vec<_>>(), truth_pods.keys().collect::<Vec<_>>(), "step {step}: pods");
    for (name, t) in &truth_pods {
        let s = seen_pods[name];
        assert_eq!(s.phase, t.phase, "step {step}: {name} phase");
        assert_eq!(s.resources.requests, t.resources.requests, "step {step}: {name} requests");
        assert_eq!(s.resources.limits, t.resources.limits, "step {step}: {name} limits");
        match (s.memory_working_set_bytes, t.memory_working_set_bytes) {
            (Some(got), Some(want)) => close(&format!("step {step}: {name} memory"), got, want, 1e-9),
            (got, want) => assert_eq!(got.is_some(), want.is_some() && t.phase != PodPhase::Pending, "{name} memory"),
        }
        if let (Some(want), true) = (t.cpu_usage_cores, t.phase != PodPhase::Pending) {
            let got = s.cpu_usage_cores.unwrap_or_else(|| panic!("step {step}: {name} has no CPU sample"));
            // rate() over a counter the exporter grows linearly: exact up to the skew between the
            // scrape's timestamp and the moment the exporter rendered it (milliseconds in 3 s).
            close(&format!("step {step}: {name} cpu"), got, want, 0.03);
        }
    }
    close(&format!("step {step}: throughput"), seen.throughput, truth.throughput, 0.03);
    close(&format!("step {step}: arrival rate"), seen.arrival_rate, truth.arrival_rate, 0.03);
    match (seen.latency_p99_ms, truth.latency_p99_ms) {
        (Some(got), Some(want)) => close(&format!("step {step}: p99"), got, want, 1e-9),
        (got, want) => assert_eq!(got, want, "step {step}: p99"),
    }
    let dropped_tol = (truth.dropped_requests as f64 * 0.03).max(1.0);
    assert!(
        (seen.dropped_requests as f64 - truth.dropped_requests as f64).abs() <= dropped_tol,
        "step {step}: dropped {} vs {}",
        seen.dropped_requests,
        truth.dropped_requests
    );
}

#[test]
fn prometheus_backend_reads_what_the_simulator_served() {
    let (Some(url), Some(addr)) = (env("AWARE_TEST_PROMETHEUS_URL"), env("AWARE_TEST_EXPORTER_ADDR")) else {
        return;
    };
    let apps = generate_apps(1, 7, 3600.0);
    let name = apps[0].name.clone();
    let mut sim = SimCluster::new(apps, Vec::new(), SimConfig::default(), 7);
    for _ in 0..20 {
        sim.advance().unwrap();
    }

    let exporter = MetricsExporter::new("default");
    let handle = exporter.clone().serve(&addr).unwrap_or_else(|e| panic!("{e}"));
    let mut config = PrometheusConfig::new(url, vec![name.clone()]);
    config.rate_window = "3s".into();
    config.max_staleness_s = 5.0;
    config.wait_on_advance = false;
    config.interval_s = sim.interval_s();
    let backend = PrometheusCluster::new(config, |_: &str, _: &aware_core::Recommendation| Ok::<(), ClusterError>(()));

    // Before the first scrape the backend has nothing: unavailable, never zeros.
    assert!(matches!(backend.observe(0), Err(ClusterError::Unavailable(_))));

    for step in 20..24u64 {
        let truth = sim.observe(0).unwrap();
        handle.update(step, &[(name.clone(), truth.clone())]);
        std::thread::sleep(HOLD);
        let seen = backend.observe(0).unwrap_or_else(|e| panic!("step {step}: {e}"));
        compare(step, &truth, &seen);
        sim.advance().unwrap();
    }

    // The exporter goes away: Prometheus marks its series stale, the backend says unavailable.
    drop(handle);
    std::thread::sleep(HOLD);
    match backend.observe(0) {
        Err(ClusterError::Unavailable(reason)) => eprintln!("while the exporter is down: {reason}"),
        other => panic!("expected the app to be unavailable while its exporter is down, got {other:?}"),
    }

    // It comes back on the same address: observations resume.
    let handle = exporter.serve(&addr).unwrap_or_else(|e| panic!("{e}"));
    let truth = sim.observe(0).unwrap();
    handle.update(24, &[(name.clone(), truth.clone())]);
    std::thread::sleep(HOLD);
    let seen = backend.observe(0).unwrap_or_else(|e| panic!("after the exporter returned: {e}"));
    compare(24, &truth, &seen);
}

/// The exporter's cAdvisor series carry the limits each container runs with (the observation's
/// running resources), which the backend's default limit queries read first; pending pods have
/// no container and no such series.
#[test]
fn exporter_serves_the_cgroup_limits_of_running_containers() {
    let apps = generate_apps(1, 7, 3600.0);
    let name = apps[0].name.clone();
    let mut sim = SimCluster::new(apps, Vec::new(), SimConfig::default(), 7);
    sim.advance().unwrap();
    let mut obs = sim.observe(0).unwrap();
    assert!(!obs.pods.is_empty());
    obs.pods[0].resources.limits.cpu_millicores = 750;
    obs.pods[0].resources.limits.memory_bytes = 300 << 20;
    let mut pending = obs.pods[0].clone();
    pending.name = format!("{}-pending", obs.pods[0].name);
    pending.phase = PodPhase::Pending;
    obs.pods.push(pending.clone());
    let exporter = MetricsExporter::new("default");
    exporter.update(1, &[(name, obs.clone())]);
    let text = exporter.render();
    let value = |metric: &str, pod: &str| -> Option<f64> {
        text.lines()
            .find(|l| l.starts_with(&format!("{metric}{{")) && l.contains(&format!("pod=\"{pod}\"")))
            .and_then(|l| l.rsplit(' ').next()?.parse().ok())
    };
    let first = &obs.pods[0].name;
    assert_eq!(value("container_spec_cpu_quota", first), Some(75_000.0), "{text}");
    assert_eq!(value("container_spec_cpu_period", first), Some(100_000.0));
    assert_eq!(value("container_spec_memory_limit_bytes", first), Some((300u64 << 20) as f64));
    assert_eq!(value("container_spec_memory_limit_bytes", &pending.name), None);
    assert!(value("kube_pod_container_resource_limits", &pending.name).is_some());
    // kube-state-metrics serves the spec (the template), not the running limits.
    assert!(
        text.lines().any(|l| l.starts_with("kube_pod_container_resource_limits{")
            && l.contains(&format!("pod=\"{first}\""))
            && l.contains("resource=\"memory\"")
            && l.rsplit(' ').next().and_then(|v| v.parse::<f64>().ok())
                == Some(obs.template.limits.memory_bytes as f64)),
        "{text}"
    );
}
