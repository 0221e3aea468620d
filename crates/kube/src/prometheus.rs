//! The Prometheus-backed `Cluster`: each application's `Observation` read through PromQL
//! (Prometheus HTTP API `GET /api/v1/query`) from cAdvisor, kube-state-metrics and the
//! application's own request metrics, with every query taken from the configuration.
//!
//! **Staleness.** An observation is only as good as its newest sample: the `freshness` query
//! returns the newest sample timestamp behind the pod list; older than `max_staleness_s` (or no
//! sample at all, or Prometheus unreachable) and `observe` fails with
//! `ClusterError::Unavailable`, so the caller's safety guard falls back to the rule-based
//! recommender instead of acting on old numbers. A pod with no usage sample gets `None` usage,
//! an app with no latency sample `None` latency: absence stays explicit.
//!
//! **Actuation** is not Prometheus' business: `apply` hands the recommendation to the
//! [`Actuator`] the backend was built with (the Kubernetes updater in a cluster, the simulator in
//! the end-to-end test).
//!
//! Query templates may use `{namespace}`, `{app}` (escaped for a quoted label value),
//! `{app_regex}` (escaped for a `=~` matcher), `{rate_window}`, `{interval}` (a PromQL duration)
//! and `{interval_s}` (a number of seconds).

use std::collections::BTreeMap;
use std::time::Duration;

use aware_core::{
    AppId, Cluster, ClusterError, ContainerResources, Observation, PodObservation, PodPhase, Recommendation, Resources,
};
use serde::{Deserialize, Serialize};
use serde_json::Value;

/// PromQL per signal. Defaults work against a real cluster scraped by cAdvisor (kubelet) and
/// kube-state-metrics, whose pods are named `{deployment}-…`, and an app exporting the usual
/// `http_requests_total` and latency quantiles.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct Queries {
    pub pod_cpu_request_cores: String,
    pub pod_memory_request_bytes: String,
    /// The limits each pod's containers run with (the cgroup's).
    pub pod_cpu_limit_cores: String,
    pub pod_memory_limit_bytes: String,
    /// The limits in each pod's spec: what the Deployment asks for, ahead of the running
    /// limits while an in-place resize is pending. The template is built from these.
    pub pod_cpu_spec_limit_cores: String,
    pub pod_memory_spec_limit_bytes: String,
    pub pod_ready: String,
    pub pod_pending: String,
    pub pod_cpu_usage_cores: String,
    pub pod_memory_working_set_bytes: String,
    pub pod_restarts: String,
    pub desired_replicas: String,
    pub arrival_rate: String,
    pub throughput: String,
    pub latency_p99_ms: String,
    pub latency_mean_ms: String,
    pub dropped_requests: String,
    /// Newest sample timestamp (seconds) behind the pod list.
    pub freshness: String,
}

impl Default for Queries {
    fn default() -> Self {
        let pods = r#"namespace="{namespace}",pod=~"{app_regex}-.+""#;
        let app = r#"namespace="{namespace}",app="{app}""#;
        let ksm = |metric: &str, extra: &str| format!("sum by (pod) ({metric}{{{pods}{extra}}})");
        Self {
            pod_cpu_request_cores: ksm("kube_pod_container_resource_requests", r#",resource="cpu""#),
            pod_memory_request_bytes: ksm("kube_pod_container_resource_requests", r#",resource="memory""#),
            // What the containers run with: the cgroup's limits as cAdvisor reads them, which
            // follow an in-place resize only once the kubelet has applied it (a memory decrease
            // waits while the working set is above it). kube-state-metrics' limits are the
            // spec's, so a deferred decrease would read as a container at 100 % memory. Pods
            // with no container yet (pending), or unlimited ones, fall back to the spec.
            pod_cpu_limit_cores: format!(
                "(sum by (pod) (container_spec_cpu_quota{{{pods},container!=\"\"}} / container_spec_cpu_period{{{pods},container!=\"\"}} > 0)) or {}",
                ksm("kube_pod_container_resource_limits", r#",resource="cpu""#)
            ),
            pod_memory_limit_bytes: format!(
                "(sum by (pod) (container_spec_memory_limit_bytes{{{pods},container!=\"\"}} > 0)) or {}",
                ksm("kube_pod_container_resource_limits", r#",resource="memory""#)
            ),
            pod_cpu_spec_limit_cores: ksm("kube_pod_container_resource_limits", r#",resource="cpu""#),
            pod_memory_spec_limit_bytes: ksm("kube_pod_container_resource_limits", r#",resource="memory""#),
            pod_ready: ksm("kube_pod_status_ready", r#",condition="true""#),
            pod_pending: ksm("kube_pod_status_phase", r#",phase="Pending""#),
            pod_cpu_usage_cores: format!(
                "sum by (pod) (rate(container_cpu_usage_seconds_total{{{pods},container!=\"\"}}[{{rate_window}}]))"
            ),
            pod_memory_working_set_bytes: ksm("container_memory_working_set_bytes", r#",container!="""#),
            pod_restarts: ksm("kube_pod_container_status_restarts_total", ""),
            desired_replicas: r#"max(kube_deployment_spec_replicas{namespace="{namespace}",deployment="{app}"})"#
                .into(),
            arrival_rate: format!("sum(rate(http_requests_received_total{{{app}}}[{{rate_window}}]))"),
            throughput: format!("sum(rate(http_requests_total{{{app}}}[{{rate_window}}]))"),
            latency_p99_ms: format!("1000 * max(http_request_duration_seconds{{{app},quantile=\"0.99\"}})"),
            latency_mean_ms: format!("1000 * max(http_request_duration_seconds{{{app},quantile=\"mean\"}})"),
            dropped_requests: format!(
                "sum(rate(http_requests_dropped_total{{{app}}}[{{rate_window}}])) * {{interval_s}}"
            ),
            freshness: format!("max(timestamp(kube_pod_container_resource_requests{{{pods}}}))"),
        }
    }
}

/// The backend's configuration (YAML or JSON; unknown fields are rejected).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PrometheusConfig {
    /// Base URL of the Prometheus server, e.g. `http://127.0.0.1:9090`.
    pub url: String,
    #[serde(default = "default_namespace")]
    pub namespace: String,
    /// The applications (Deployment names) observed, in `AppId` order, when the backend is a
    /// `Cluster`. `aware controller --prometheus` ignores it: it observes each MPA's target, in
    /// the MPA's namespace.
    #[serde(default)]
    pub apps: Vec<String>,
    /// Control interval, seconds.
    #[serde(default = "default_interval")]
    pub interval_s: f64,
    /// Window of `rate()` queries, a PromQL duration.
    #[serde(default = "default_rate_window")]
    pub rate_window: String,
    /// Samples older than this make the observation stale.
    #[serde(default = "default_staleness")]
    pub max_staleness_s: f64,
    /// HTTP timeout per query, seconds.
    #[serde(default = "default_timeout")]
    pub timeout_s: f64,
    /// Whether `advance` sleeps for one interval (a live cluster) or returns at once (the
    /// caller paces time itself).
    #[serde(default = "default_true")]
    pub wait_on_advance: bool,
    #[serde(default)]
    pub queries: Queries,
}

fn default_namespace() -> String {
    "default".into()
}
fn default_interval() -> f64 {
    15.0
}
fn default_rate_window() -> String {
    "1m".into()
}
fn default_staleness() -> f64 {
    60.0
}
fn default_timeout() -> f64 {
    5.0
}
fn default_true() -> bool {
    true
}

#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum PrometheusConfigError {
    #[error("{path}: cannot read: {source}")]
    Read { path: String, source: std::io::Error },
    /// `message` names the file, line and column (`aware_core::syntax_error_line`).
    #[error("{message}")]
    Parse { path: String, message: String },
    #[error("{path}: {field}: {reason}")]
    Invalid { path: String, field: &'static str, reason: String },
}

impl PrometheusConfig {
    /// A configuration with default queries.
    pub fn new(url: impl Into<String>, apps: Vec<String>) -> Self {
        Self {
            url: url.into(),
            namespace: default_namespace(),
            apps,
            interval_s: default_interval(),
            rate_window: default_rate_window(),
            max_staleness_s: default_staleness(),
            timeout_s: default_timeout(),
            wait_on_advance: true,
            queries: Queries::default(),
        }
    }

    /// Parses YAML (a superset of JSON); `source` names the file in errors.
    pub fn parse(text: &str, source: &str) -> Result<Self, PrometheusConfigError> {
        let config: Self = serde_saphyr::from_str(text).map_err(|e| PrometheusConfigError::Parse {
            path: source.into(),
            message: aware_core::syntax_error_line(source, text, &e),
        })?;
        config.validate(source)?;
        Ok(config)
    }

    pub fn load(path: &std::path::Path) -> Result<Self, PrometheusConfigError> {
        let shown = path.display().to_string();
        let text = std::fs::read_to_string(path)
            .map_err(|source| PrometheusConfigError::Read { path: shown.clone(), source })?;
        Self::parse(&text, &shown)
    }

    pub fn validate(&self, source: &str) -> Result<(), PrometheusConfigError> {
        let invalid = |field, reason: &str| {
            Err(PrometheusConfigError::Invalid { path: source.into(), field, reason: reason.into() })
        };
        if !(self.url.starts_with("http://") || self.url.starts_with("https://")) {
            return invalid("url", "must start with http:// or https://");
        }
        for (field, v) in
            [("interval_s", self.interval_s), ("max_staleness_s", self.max_staleness_s), ("timeout_s", self.timeout_s)]
        {
            // At most a year: each is a wait or a timeout, and a longer one cannot be waited on.
            if !(v.is_finite() && v > 0.0 && v <= 365.0 * 86_400.0) {
                return invalid(field, "must be a positive number of seconds, at most a year (31536000)");
            }
        }
        Ok(())
    }
}

/// Where `apply` sends recommendations.
pub trait Actuator: Send {
    fn apply(&mut self, app: &str, recommendation: &Recommendation) -> Result<(), ClusterError>;
}

impl<F: FnMut(&str, &Recommendation) -> Result<(), ClusterError> + Send> Actuator for F {
    fn apply(&mut self, app: &str, recommendation: &Recommendation) -> Result<(), ClusterError> {
        self(app, recommendation)
    }
}

/// One instant-vector sample: labels and value.
#[derive(Debug, Clone, PartialEq)]
pub struct Sample {
    pub labels: BTreeMap<String, String>,
    pub value: f64,
}

/// The Prometheus backend.
pub struct PrometheusCluster<A: Actuator> {
    config: PrometheusConfig,
    http: ureq::Agent,
    actuator: A,
}

fn escape_label(s: &str) -> String {
    s.replace('\\', "\\\\").replace('"', "\\\"")
}

/// Escapes regex metacharacters (RE2 syntax), then quotes for a label value.
fn escape_regex(s: &str) -> String {
    let mut out = String::new();
    for c in s.chars() {
        if r"\.+*?()|[]{}^$".contains(c) {
            out.push('\\');
        }
        out.push(c);
    }
    escape_label(&out)
}

fn unix_now_s() -> f64 {
    std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map(|d| d.as_secs_f64()).unwrap_or(0.0)
}

impl<A: Actuator> PrometheusCluster<A> {
    pub fn new(config: PrometheusConfig, actuator: A) -> Self {
        let http = ureq::Agent::config_builder()
            .timeout_global(Some(Duration::from_secs_f64(config.timeout_s)))
            .http_status_as_error(false)
            .build()
            .into();
        Self { config, http, actuator }
    }

    pub fn config(&self) -> &PrometheusConfig {
        &self.config
    }

    /// Fills a query template for `app`.
    pub fn render(&self, template: &str, app: &str) -> String {
        template
            .replace("{namespace}", &escape_label(&self.config.namespace))
            .replace("{app_regex}", &escape_regex(app))
            .replace("{app}", &escape_label(app))
            .replace("{rate_window}", &self.config.rate_window)
            .replace("{interval_s}", &self.config.interval_s.to_string())
            .replace("{interval}", &format!("{}s", self.config.interval_s.round().max(1.0) as u64))
    }

    /// Runs one instant query at `time` (Unix seconds); an unreachable server, an HTTP error or a
    /// Prometheus error is `Unavailable` naming the query.
    pub fn query(&self, promql: &str, time: f64) -> Result<Vec<Sample>, ClusterError> {
        let fail = |what: String| {
            ClusterError::Unavailable(format!("prometheus {}: {what} (query: {promql})", self.config.url))
        };
        let url = format!("{}/api/v1/query", self.config.url.trim_end_matches('/'));
        let mut response = self
            .http
            .get(url)
            .query("query", promql)
            .query("time", format!("{time:.3}"))
            .call()
            .map_err(|e| fail(e.to_string()))?;
        let status = response.status().as_u16();
        let body = response.body_mut().read_to_string().map_err(|e| fail(e.to_string()))?;
        let v: Value =
            serde_json::from_str(&body).map_err(|e| fail(format!("HTTP {status}: unreadable answer: {e}")))?;
        if v["status"] != "success" {
            return Err(fail(format!("HTTP {status}: {}", v["error"].as_str().unwrap_or("error"))));
        }
        let result = &v["data"]["result"];
        match v["data"]["resultType"].as_str() {
            Some("vector") => result
                .as_array()
                .map(|items| items.iter().map(parse_sample).collect::<Result<Vec<_>, _>>())
                .unwrap_or(Ok(Vec::new()))
                .map_err(|e| fail(e.to_string())),
            Some("scalar") => parse_value(result)
                .map(|value| vec![Sample { labels: BTreeMap::new(), value }])
                .map_err(|e| fail(e.to_string())),
            other => Err(fail(format!("unexpected result type {other:?}"))),
        }
    }

    fn per_pod(&self, template: &str, app: &str, time: f64) -> Result<BTreeMap<String, f64>, ClusterError> {
        let q = self.render(template, app);
        Ok(self
            .query(&q, time)?
            .into_iter()
            .filter(|s| s.value.is_finite())
            .filter_map(|s| Some((s.labels.get("pod")?.clone(), s.value)))
            .collect())
    }

    fn scalar(&self, template: &str, app: &str, time: f64) -> Result<Option<f64>, ClusterError> {
        let q = self.render(template, app);
        Ok(self.query(&q, time)?.into_iter().map(|s| s.value).find(|v| v.is_finite()))
    }

    /// The observation of `app` as of `time` (Unix seconds).
    pub fn observe_at(&self, app: &str, time: f64) -> Result<Observation, ClusterError> {
        let q = &self.config.queries;
        let newest = self.scalar(&q.freshness, app, time)?;
        let age = match newest {
            None => {
                return Err(ClusterError::Unavailable(format!("{app}: no samples in Prometheus (stale or missing)")));
            }
            Some(t) => time - t,
        };
        if age > self.config.max_staleness_s {
            return Err(ClusterError::Unavailable(format!(
                "{app}: newest sample is {age:.0} s old (limit {} s)",
                self.config.max_staleness_s
            )));
        }
        let cpu_req = self.per_pod(&q.pod_cpu_request_cores, app, time)?;
        let mem_req = self.per_pod(&q.pod_memory_request_bytes, app, time)?;
        let cpu_lim = self.per_pod(&q.pod_cpu_limit_cores, app, time)?;
        let mem_lim = self.per_pod(&q.pod_memory_limit_bytes, app, time)?;
        let cpu_spec = self.per_pod(&q.pod_cpu_spec_limit_cores, app, time)?;
        let mem_spec = self.per_pod(&q.pod_memory_spec_limit_bytes, app, time)?;
        let mut specs = Vec::with_capacity(cpu_req.len());
        let ready = self.per_pod(&q.pod_ready, app, time)?;
        let pending = self.per_pod(&q.pod_pending, app, time)?;
        let cpu = self.per_pod(&q.pod_cpu_usage_cores, app, time)?;
        let mem = self.per_pod(&q.pod_memory_working_set_bytes, app, time)?;
        let restarts = self.per_pod(&q.pod_restarts, app, time)?;
        let mut pods = Vec::with_capacity(cpu_req.len());
        for (name, &req_cores) in &cpu_req {
            let requests = Resources::new(
                (req_cores * 1000.0).round() as u64,
                mem_req.get(name).copied().unwrap_or(0.0).round() as u64,
            );
            let millicores = |c: &f64| (c * 1000.0).round() as u64;
            let bytes = |m: &f64| m.round() as u64;
            let spec = Resources::new(
                cpu_spec.get(name).or(cpu_lim.get(name)).map(millicores).unwrap_or(requests.cpu_millicores),
                mem_spec.get(name).or(mem_lim.get(name)).map(bytes).unwrap_or(requests.memory_bytes),
            );
            specs.push(ContainerResources { name: app.to_string(), requests, limits: spec });
            let limits = Resources::new(
                cpu_lim.get(name).map(millicores).unwrap_or(spec.cpu_millicores),
                mem_lim.get(name).map(bytes).unwrap_or(spec.memory_bytes),
            );
            // While a resize is pending the spec's requests can be above the running limits;
            // what the container runs with never requests more than its limits.
            let requests = Resources::new(
                requests.cpu_millicores.min(limits.cpu_millicores),
                requests.memory_bytes.min(limits.memory_bytes),
            );
            let phase = if pending.get(name).copied().unwrap_or(0.0) > 0.5 {
                PodPhase::Pending
            } else if ready.get(name).copied().unwrap_or(0.0) > 0.5 {
                PodPhase::Ready
            } else {
                PodPhase::Starting
            };
            let usable = phase != PodPhase::Pending;
            pods.push(PodObservation {
                name: name.clone(),
                phase,
                node: None,
                // Prometheus does not carry pod creation/readiness times in these series; the
                // HPA's start-up rules then treat every ready pod as long ready.
                created_at_s: 0.0,
                ready_since_s: (phase == PodPhase::Ready).then_some(0.0),
                cpu_usage_cores: cpu.get(name).copied().filter(|_| usable),
                memory_working_set_bytes: mem.get(name).copied().filter(|_| usable),
                resources: ContainerResources { name: app.to_string(), requests, limits },
                allocated: None,
                restarts: restarts.get(name).map(|r| r.round().max(0.0) as u32).unwrap_or(0),
                oom_killed_at_bytes: None,
                deleting: false,
                custom_metrics: Default::default(),
                containers: Vec::new(),
                unschedulable: None,
            });
        }
        if pods.is_empty() {
            return Err(ClusterError::Unavailable(format!("{app}: no pods in Prometheus")));
        }
        // The template is the spec's (what new pods get, and what a recommender that keeps the
        // allocation echoes back), not the running limits: echoing those would cancel a
        // pending resize.
        let first = pods.iter().position(|p| p.phase == PodPhase::Ready).unwrap_or(0);
        let template = specs.swap_remove(first);
        let desired = self.scalar(&q.desired_replicas, app, time)?.map(|r| r.round().max(0.0) as u32);
        Ok(Observation {
            app: app.to_string(),
            time_s: time,
            interval_s: self.config.interval_s,
            desired_replicas: desired.unwrap_or(pods.len() as u32),
            template,
            pods,
            arrival_rate: self.scalar(&q.arrival_rate, app, time)?.unwrap_or(0.0).max(0.0),
            throughput: self.scalar(&q.throughput, app, time)?.unwrap_or(0.0).max(0.0),
            latency_mean_ms: self.scalar(&q.latency_mean_ms, app, time)?,
            latency_p99_ms: self.scalar(&q.latency_p99_ms, app, time)?,
            dropped_requests: self.scalar(&q.dropped_requests, app, time)?.unwrap_or(0.0).round().max(0.0) as u64,
            oom_events: 0,
            io_utilisation: 0.0,
            network_utilisation: 0.0,
        })
    }
}

/// A sample in a Prometheus answer that carries no number.
#[derive(Debug, thiserror::Error)]
enum BadSample {
    #[error("a sample without a value")]
    NoValue,
    #[error("sample value {0:?} is not a number")]
    NotANumber(String),
}

fn parse_value(v: &Value) -> Result<f64, BadSample> {
    let s = v.get(1).and_then(Value::as_str).ok_or(BadSample::NoValue)?;
    match s {
        "NaN" => Ok(f64::NAN),
        "+Inf" => Ok(f64::INFINITY),
        "-Inf" => Ok(f64::NEG_INFINITY),
        _ => s.parse().map_err(|_| BadSample::NotANumber(s.to_string())),
    }
}

fn parse_sample(item: &Value) -> Result<Sample, BadSample> {
    let labels = item["metric"]
        .as_object()
        .map(|m| m.iter().filter_map(|(k, v)| Some((k.clone(), v.as_str()?.to_string()))).collect())
        .unwrap_or_default();
    Ok(Sample { labels, value: parse_value(&item["value"])? })
}

impl<A: Actuator> Cluster for PrometheusCluster<A> {
    fn app_names(&self) -> Vec<String> {
        self.config.apps.clone()
    }

    fn interval_s(&self) -> f64 {
        self.config.interval_s
    }

    fn observe(&self, app: AppId) -> Result<Observation, ClusterError> {
        let name = self.config.apps.get(app).ok_or(ClusterError::UnknownApp(app))?;
        let obs = self.observe_at(name, unix_now_s())?;
        obs.validate().map_err(|e| ClusterError::Unavailable(e.to_string()))?;
        Ok(obs)
    }

    fn apply(&mut self, app: AppId, recommendation: &Recommendation) -> Result<(), ClusterError> {
        let name = self.config.apps.get(app).ok_or(ClusterError::UnknownApp(app))?.clone();
        self.actuator.apply(&name, recommendation)
    }

    fn advance(&mut self) -> Result<(), ClusterError> {
        if self.config.wait_on_advance {
            std::thread::sleep(Duration::from_secs_f64(self.config.interval_s));
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn templates_escape_app_names() {
        let c = PrometheusCluster::new(
            PrometheusConfig::new("http://127.0.0.1:1", vec!["a".into()]),
            |_: &str, _: &Recommendation| Ok::<(), ClusterError>(()),
        );
        let q = c.render(r#"x{pod=~"{app_regex}-.+",app="{app}"}[{rate_window}]"#, "app-0001-matmul+sleep");
        assert_eq!(q, r#"x{pod=~"app-0001-matmul\\+sleep-.+",app="app-0001-matmul+sleep"}[1m]"#);
    }

    #[test]
    fn unreachable_server_is_unavailable() {
        let mut config = PrometheusConfig::new("http://127.0.0.1:9", vec!["a".into()]);
        config.timeout_s = 1.0;
        let c = PrometheusCluster::new(config, |_: &str, _: &Recommendation| Ok::<(), ClusterError>(()));
        assert!(matches!(c.observe(0), Err(ClusterError::Unavailable(_))));
        assert!(matches!(c.observe(1), Err(ClusterError::UnknownApp(1))));
    }

    #[test]
    fn config_errors_name_the_field() {
        let e = PrometheusConfig::parse("url: ftp://x\napps: [a]\n", "p.yaml").unwrap_err().to_string();
        assert_eq!(e, "p.yaml: url: must start with http:// or https://");
        let e = PrometheusConfig::parse("url: http://x\napps: [a]\nbogus: 1\n", "p.yaml").unwrap_err().to_string();
        assert!(e.starts_with("p.yaml:3:1: bogus: unknown field") && !e.contains("error:"), "{e}");
    }
}
