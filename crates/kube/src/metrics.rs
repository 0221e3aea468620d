//! Prometheus exposition (prometheus-client, OpenMetrics text):
//! - [`ControllerMetrics`]: the controller's own `/metrics`;
//! - [`MetricsExporter`]: simulated pods' metrics under the names real exporters use, so the
//!   Prometheus backend can be tested end to end against a real Prometheus server.
//!
//! Names exported for each simulated app (`namespace` label from the exporter, `pod`/`container`
//! from the observation):
//! - cAdvisor: `container_cpu_usage_seconds_total` (counter: usage integrated over wall-clock time
//!   between updates, so `rate()` over a window where usage was constant returns that usage),
//!   `container_memory_working_set_bytes`, and the cgroup's limits — what the container runs
//!   with — `container_spec_cpu_quota` / `container_spec_cpu_period` (µs) and
//!   `container_spec_memory_limit_bytes` (not for pending pods, which have no container);
//! - kube-state-metrics: `kube_pod_container_resource_requests` / `_limits`
//!   (`resource="cpu"|"memory"`, `unit="core"|"byte"`), `kube_pod_status_ready{condition="true"}`,
//!   `kube_pod_status_phase{phase}`, `kube_pod_container_status_restarts_total`,
//!   `kube_deployment_spec_replicas{deployment}`;
//! - a typical HTTP service: `http_requests_total` (completed), `http_requests_received_total`
//!   (offered), `http_requests_dropped_total`, `http_request_duration_seconds{quantile="0.5"|"0.99"}`
//!   (the mean is reported under `quantile="mean"`), plus `aware_sim_step` (the simulator step
//!   the values belong to) and `aware_sim_time_seconds`.

use std::collections::HashMap;
use std::sync::atomic::AtomicU64;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use aware_core::{Observation, PodPhase};
use prometheus_client::encoding::text::encode;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::metrics::histogram::Histogram;
use prometheus_client::registry::Registry;

use crate::http::{self, OPENMETRICS, Reply, ServeError};

/// The kubelet's CFS period, microseconds (`cpu.cfs_period_us`).
const CFS_PERIOD_US: f64 = 100_000.0;

type Labels = Vec<(String, String)>;
type GaugeF = Gauge<f64, AtomicU64>;
type CounterF = Counter<f64, AtomicU64>;

fn labels(pairs: &[(&str, &str)]) -> Labels {
    pairs.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect()
}

/// The controller's own metrics.
#[derive(Debug, Clone)]
pub struct ControllerMetrics {
    passes: Family<Labels, Counter>,
    duration: Histogram,
    state_saves: Family<Labels, Counter>,
    learned_failures: Counter,
    registry: Arc<Registry>,
}

impl Default for ControllerMetrics {
    fn default() -> Self {
        let passes = Family::<Labels, Counter>::default();
        let duration = Histogram::new([0.005, 0.01, 0.05, 0.1, 0.5, 1.0, 5.0]);
        let state_saves = Family::<Labels, Counter>::default();
        let mut registry = Registry::default();
        registry.register("aware_controller_reconcile", "Reconcile passes by result", passes.clone());
        registry.register("aware_controller_reconcile_duration_seconds", "Reconcile pass duration", duration.clone());
        registry.register(
            "aware_controller_state_saves",
            "Writes of the --state file by result (ok, failed)",
            state_saves.clone(),
        );
        let learned_failures = Counter::default();
        registry.register(
            "aware_controller_learned_save_failures",
            "Writes of what the agent learned live (its weights, a policy an MPA is served with) into FILE.learned/ that failed; the state names what was written before",
            learned_failures.clone(),
        );
        Self { passes, duration, state_saves, learned_failures, registry: Arc::new(registry) }
    }
}

impl ControllerMetrics {
    pub fn observe_pass(&self, took: Duration, outcome: Option<&crate::controller::PassOutcome>) {
        let result = match outcome {
            None => "error",
            Some(o) if !o.owned => "skipped",
            Some(_) => "ok",
        };
        self.passes.get_or_create(&labels(&[("result", result)])).inc();
        self.duration.observe(took.as_secs_f64());
    }

    /// One write of the `--state` file, `ok` or failed.
    pub fn observe_state_save(&self, ok: bool) {
        self.state_saves.get_or_create(&labels(&[("result", if ok { "ok" } else { "failed" })])).inc();
    }

    /// Writes into `FILE.learned/` that failed.
    pub fn observe_learned_failures(&self, n: usize) {
        self.learned_failures.inc_by(n as u64);
    }

    pub fn encode(&self) -> String {
        let mut out = String::new();
        encode(&mut out, &self.registry).expect("writing to a String cannot fail");
        out
    }
}

#[derive(Debug, Clone)]
struct AppState {
    step: u64,
    observation: Observation,
    updated_at: Instant,
    /// CPU seconds accumulated per pod up to `updated_at`.
    cpu_seconds: HashMap<String, f64>,
    completed: f64,
    received: f64,
    dropped: f64,
}

impl AppState {
    /// Counter values `elapsed` seconds after the last update: CPU seconds per pod, completed,
    /// received and dropped requests.
    fn totals(&self, elapsed: f64) -> (HashMap<String, f64>, f64, f64, f64) {
        let obs = &self.observation;
        let cpu = obs
            .pods
            .iter()
            .map(|p| {
                let base = self.cpu_seconds.get(&p.name).copied().unwrap_or(0.0);
                (p.name.clone(), base + p.cpu_usage_cores.unwrap_or(0.0) * elapsed)
            })
            .collect();
        let per_s = |per_interval: f64| if obs.interval_s > 0.0 { per_interval / obs.interval_s } else { 0.0 };
        (
            cpu,
            self.completed + obs.throughput * elapsed,
            self.received + obs.arrival_rate * elapsed,
            self.dropped + per_s(obs.dropped_requests as f64) * elapsed,
        )
    }
}

/// Holds the latest observation per app; a scrape renders them.
#[derive(Debug, Clone)]
pub struct MetricsExporter {
    namespace: String,
    state: Arc<Mutex<HashMap<String, AppState>>>,
}

/// A running exporter: update it after each simulated step. Serving runs on its own thread
/// (a one-thread Tokio runtime), so synchronous callers such as the simulate loop need no
/// runtime of their own. Dropping the handle stops the server.
#[derive(Debug)]
pub struct ExporterHandle {
    exporter: MetricsExporter,
    addr: std::net::SocketAddr,
    shutdown: Option<tokio::sync::oneshot::Sender<()>>,
    thread: Option<std::thread::JoinHandle<()>>,
}

impl MetricsExporter {
    /// An exporter labelling every series with `namespace`.
    pub fn new(namespace: impl Into<String>) -> Self {
        Self { namespace: namespace.into(), state: Arc::default() }
    }

    /// Serves `/metrics` (and `/healthz`) on `addr` (`127.0.0.1:0` picks a port) from a
    /// background thread; returns once the address is bound.
    pub fn serve(self, addr: &str) -> Result<ExporterHandle, ServeError> {
        let err = |source| ServeError { addr: addr.to_string(), source };
        let listener = std::net::TcpListener::bind(addr).map_err(err)?;
        listener.set_nonblocking(true).map_err(err)?;
        let bound = listener.local_addr().map_err(err)?;
        let runtime = tokio::runtime::Builder::new_current_thread().enable_all().build().map_err(err)?;
        let me = self.clone();
        let handler: http::Handler = Arc::new(move |path| match path {
            "/metrics" => Reply::ok(OPENMETRICS, me.render()),
            "/healthz" => Reply::ok("text/plain", "ok\n".into()),
            _ => Reply::not_found(),
        });
        let (tx, rx) = tokio::sync::oneshot::channel::<()>();
        let thread = std::thread::Builder::new()
            .name("aware-metrics".into())
            .spawn(move || {
                runtime.block_on(async move {
                    let Ok(listener) = tokio::net::TcpListener::from_std(listener) else { return };
                    tokio::select! {
                        _ = http::accept_loop(listener, handler) => {}
                        _ = rx => {}
                    }
                });
            })
            .map_err(err)?;
        Ok(ExporterHandle { exporter: self, addr: bound, shutdown: Some(tx), thread: Some(thread) })
    }

    /// Records step `step`'s observations (one per app, keyed by the app's name). Counters carry
    /// on in wall-clock time: between two updates, CPU seconds accrue at each pod's last usage and
    /// request counts at the app's last rates, so `rate()` over a window inside one update's span
    /// returns exactly the observation's usage and rates, as it would for a real exporter under a
    /// steady load.
    pub fn update(&self, step: u64, apps: &[(String, Observation)]) {
        let now = Instant::now();
        let mut state = self.state.lock().expect("exporter state");
        for (name, obs) in apps {
            let entry = state.entry(name.clone()).or_insert_with(|| AppState {
                step,
                observation: obs.clone(),
                updated_at: now,
                cpu_seconds: HashMap::new(),
                completed: 0.0,
                received: 0.0,
                dropped: 0.0,
            });
            let elapsed = now.duration_since(entry.updated_at).as_secs_f64();
            let (cpu, completed, received, dropped) = entry.totals(elapsed);
            // Pods that left take their series with them; new pods start from zero.
            entry.cpu_seconds =
                obs.pods.iter().map(|p| (p.name.clone(), cpu.get(&p.name).copied().unwrap_or(0.0))).collect();
            entry.completed = completed;
            entry.received = received;
            entry.dropped = dropped;
            entry.step = step;
            entry.observation = obs.clone();
            entry.updated_at = now;
        }
    }

    /// The exposition text as of now.
    pub fn render(&self) -> String {
        let now = Instant::now();
        let state = self.state.lock().expect("exporter state");
        let gauge = |registry: &mut Registry, name: &str, help: &str| {
            let f = Family::<Labels, GaugeF>::default();
            registry.register(name, help, f.clone());
            f
        };
        let counter = |registry: &mut Registry, name: &str, help: &str| {
            let f = Family::<Labels, CounterF>::default();
            registry.register(name, help, f.clone());
            f
        };
        let mut r = Registry::default();
        let cpu = counter(&mut r, "container_cpu_usage_seconds", "Cumulative CPU time consumed in seconds (cAdvisor)");
        let mem = gauge(&mut r, "container_memory_working_set_bytes", "Current working set in bytes (cAdvisor)");
        let quota = gauge(&mut r, "container_spec_cpu_quota", "CPU quota of the container's cgroup (cAdvisor)");
        let period = gauge(&mut r, "container_spec_cpu_period", "CPU period of the container's cgroup (cAdvisor)");
        let mem_limit =
            gauge(&mut r, "container_spec_memory_limit_bytes", "Memory limit of the container's cgroup (cAdvisor)");
        let req = gauge(&mut r, "kube_pod_container_resource_requests", "Requested resources (kube-state-metrics)");
        let lim = gauge(&mut r, "kube_pod_container_resource_limits", "Resource limits (kube-state-metrics)");
        let ready = gauge(&mut r, "kube_pod_status_ready", "Pod ready condition (kube-state-metrics)");
        let phase = gauge(&mut r, "kube_pod_status_phase", "Pod phase (kube-state-metrics)");
        let restarts = counter(&mut r, "kube_pod_container_status_restarts", "Container restarts (kube-state-metrics)");
        let replicas = gauge(&mut r, "kube_deployment_spec_replicas", "Desired replicas (kube-state-metrics)");
        let completed = counter(&mut r, "http_requests", "Completed HTTP requests");
        let received = counter(&mut r, "http_requests_received", "Offered HTTP requests");
        let dropped = counter(&mut r, "http_requests_dropped", "Rejected, timed out or lost requests");
        let latency =
            gauge(&mut r, "http_request_duration_seconds", "Request latency quantiles over the last interval");
        let step_g = gauge(&mut r, "aware_sim_step", "Simulator step the app's series belong to");
        let time_g = gauge(&mut r, "aware_sim_time_seconds", "Simulator clock at the end of the step");
        let ns = self.namespace.as_str();
        for (app, s) in state.iter() {
            let obs = &s.observation;
            let app_l = labels(&[("namespace", ns), ("app", app)]);
            replicas.get_or_create(&labels(&[("namespace", ns), ("deployment", app)])).set(obs.desired_replicas as f64);
            let elapsed = now.duration_since(s.updated_at).as_secs_f64();
            let (cpu_totals, completed_total, received_total, dropped_total) = s.totals(elapsed);
            completed.get_or_create(&app_l).inc_by(completed_total);
            received.get_or_create(&app_l).inc_by(received_total);
            dropped.get_or_create(&app_l).inc_by(dropped_total);
            step_g.get_or_create(&app_l).set(s.step as f64);
            time_g.get_or_create(&app_l).set(obs.time_s);
            let q = |quantile: &str| labels(&[("namespace", ns), ("app", app), ("quantile", quantile)]);
            if let Some(v) = obs.latency_p99_ms {
                latency.get_or_create(&q("0.99")).set(v / 1000.0);
            }
            if let Some(v) = obs.latency_mean_ms {
                latency.get_or_create(&q("mean")).set(v / 1000.0);
            }
            for pod in &obs.pods {
                let c = &pod.resources;
                let pod_l = labels(&[("namespace", ns), ("pod", &pod.name), ("container", &c.name), ("app", app)]);
                if pod.phase != PodPhase::Pending {
                    cpu.get_or_create(&pod_l).inc_by(cpu_totals.get(&pod.name).copied().unwrap_or(0.0));
                    if let Some(m) = pod.memory_working_set_bytes {
                        mem.get_or_create(&pod_l).set(m);
                    }
                    restarts.get_or_create(&pod_l).inc_by(pod.restarts as f64);
                    // The cgroup's limits: what the container runs with (the kubelet's
                    // `status.containerStatuses[].resources`, which the observation carries).
                    quota.get_or_create(&pod_l).set(c.limits.cpu_cores() * CFS_PERIOD_US);
                    period.get_or_create(&pod_l).set(CFS_PERIOD_US);
                    mem_limit.get_or_create(&pod_l).set(c.limits.memory_bytes as f64);
                }
                let res = |resource: &str, unit: &str| {
                    labels(&[
                        ("namespace", ns),
                        ("pod", &pod.name),
                        ("container", &c.name),
                        ("app", app),
                        ("resource", resource),
                        ("unit", unit),
                    ])
                };
                req.get_or_create(&res("cpu", "core")).set(c.requests.cpu_cores());
                req.get_or_create(&res("memory", "byte")).set(c.requests.memory_bytes as f64);
                // kube-state-metrics reads the spec (the template: in-place resizes change it
                // first), cAdvisor above the cgroup (what the container runs with).
                lim.get_or_create(&res("cpu", "core")).set(obs.template.limits.cpu_cores());
                lim.get_or_create(&res("memory", "byte")).set(obs.template.limits.memory_bytes as f64);
                let pod_only =
                    |k: &str, v: &str| labels(&[("namespace", ns), ("pod", &pod.name), ("app", app), (k, v)]);
                ready.get_or_create(&pod_only("condition", "true")).set(f64::from(pod.phase == PodPhase::Ready));
                for (name, is) in
                    [("Pending", pod.phase == PodPhase::Pending), ("Running", pod.phase != PodPhase::Pending)]
                {
                    phase.get_or_create(&pod_only("phase", name)).set(f64::from(is));
                }
            }
        }
        let mut out = String::new();
        encode(&mut out, &r).expect("writing to a String cannot fail");
        out
    }
}

impl ExporterHandle {
    /// The address actually bound.
    pub fn addr(&self) -> std::net::SocketAddr {
        self.addr
    }

    /// See [`MetricsExporter::update`].
    pub fn update(&self, step: u64, apps: &[(String, Observation)]) {
        self.exporter.update(step, apps);
    }

    pub fn exporter(&self) -> &MetricsExporter {
        &self.exporter
    }

    /// Stops serving and waits for the server thread.
    pub fn stop(mut self) {
        self.shutdown_now();
    }

    fn shutdown_now(&mut self) {
        if let Some(tx) = self.shutdown.take() {
            let _ = tx.send(());
        }
        if let Some(thread) = self.thread.take() {
            let _ = thread.join();
        }
    }
}

impl Drop for ExporterHandle {
    fn drop(&mut self) {
        self.shutdown_now();
    }
}

/// Serves a simulation run to Prometheus as it goes (`aware simulate --serve-metrics ADDR`): after
/// every interval the exporter takes each app's observation, and the loop holds for `pace` so
/// that scrapes (and `rate()` windows) see each interval.
pub struct ExportingObserver {
    handle: ExporterHandle,
    pace: std::time::Duration,
    step: u64,
}

impl ExportingObserver {
    pub fn new(handle: ExporterHandle, pace: std::time::Duration) -> Self {
        Self { handle, pace, step: 0 }
    }

    pub fn handle(&self) -> &ExporterHandle {
        &self.handle
    }
}

impl aware_lab::rollout::Observer for ExportingObserver {
    fn record(
        &mut self,
        arena: &dyn aware_lab::rollout::Arena,
        _interval: &aware_lab::rollout::Interval,
    ) -> Result<(), aware_lab::LabError> {
        let apps: Vec<(String, Observation)> =
            (0..arena.num_apps()).filter_map(|i| arena.observe(i)?.ok()).map(|obs| (obs.app.clone(), obs)).collect();
        self.handle.update(self.step, &apps);
        self.step += 1;
        std::thread::sleep(self.pace);
        Ok(())
    }
}

#[cfg(test)]
mod exporting_tests {
    use super::*;
    use aware_lab::policy::PolicyName;
    use aware_lab::progress::Silent;
    use aware_lab::workload::{Workload, WorkloadSpec};

    /// `aware simulate --serve-metrics`: a run served as it goes; after it, the exporter holds
    /// the last interval's pods under cAdvisor's names, one series per pod of the app.
    #[test]
    fn a_simulation_run_is_served_interval_by_interval() {
        let workload = Workload::load(&WorkloadSpec { apps: 2, seed: 3, steps: 6, ..WorkloadSpec::default() }).unwrap();
        let handle = MetricsExporter::new("default").serve("127.0.0.1:0").unwrap();
        let mut observer = ExportingObserver::new(handle, std::time::Duration::ZERO);
        let report = aware_lab::evaluate::simulate_observed(
            &workload,
            &PolicyName::Mpa,
            6,
            None,
            vec![&mut observer as &mut dyn aware_lab::rollout::Observer],
            &Silent,
        )
        .unwrap();
        assert_eq!(report.steps, 6);
        assert_eq!(observer.step, 6, "one update per interval");
        let text = ureq::get(&format!("http://{}/metrics", observer.handle().addr()))
            .call()
            .unwrap()
            .body_mut()
            .read_to_string()
            .unwrap();
        for app in &workload.apps {
            let prefix = format!("{}-", app.name);
            assert!(
                text.lines().any(|l| l.starts_with("container_cpu_usage_seconds_total{") && l.contains(&prefix)),
                "no CPU series for {}'s pods",
                app.name
            );
        }
    }
}
