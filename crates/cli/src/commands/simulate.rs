use std::process::ExitCode;

use anyhow::Result;

use super::{AppsArgs, SimArgs, print_json};
use crate::policy::PolicyName;
use crate::progress::Bar;

#[derive(clap::Args, Debug)]
pub struct Args {
    #[command(flatten)]
    apps: AppsArgs,
    #[command(flatten)]
    sim: SimArgs,
    /// The recommender to run; the default is a fixed allocation sized for mean load.
    #[arg(long, default_value = "static")]
    policy: PolicyName,
    /// Record every app's trajectory into this store (sqlite:PATH, postgres://…, influxdb://…).
    #[arg(long)]
    store: Option<String>,
    /// Record into the profile's `store` (default sqlite:aware.db).
    #[arg(long, conflicts_with = "store")]
    record: bool,
    /// Serve every simulated pod's metrics on http://ADDR/metrics while the run lasts, under
    /// cAdvisor's, kube-state-metrics' and an HTTP service's metric names, for a Prometheus to
    /// scrape (the Prometheus backend reads them back as it would a cluster's).
    #[arg(long, value_name = "ADDR")]
    serve_metrics: Option<String>,
    /// With --serve-metrics: wall-clock seconds each interval is held for scrapes (default: the
    /// interval itself, real time; keep it above the scrape interval and within the rate window).
    #[arg(long, requires = "serve_metrics", value_parser = crate::commands::pause_seconds)]
    step_seconds: Option<f64>,
    /// Print JSON instead of a table.
    #[arg(long)]
    json: bool,
}

pub fn run(args: Args) -> Result<ExitCode> {
    let workload = args.sim.workload(&args.apps)?;
    let store = workload.recording_store(args.store.as_deref(), args.record);
    let mut bar = Bar::new();
    let mut exporter = match &args.serve_metrics {
        Some(addr) => {
            let handle = aware_kube::MetricsExporter::new("default")
                .serve(addr)
                .map_err(|e| anyhow::anyhow!("--serve-metrics: {e}"))?;
            // Said once the run begins: a run refused on its input says only why.
            bar = bar.with_notice(format!("serving the simulated pods' metrics on http://{}/metrics", handle.addr()));
            let pace = std::time::Duration::from_secs_f64(args.step_seconds.unwrap_or(workload.sim.interval_s));
            Some(aware_kube::ExportingObserver::new(handle, pace))
        }
        None => None,
    };
    let observers: Vec<&mut dyn aware_lab::rollout::Observer> =
        exporter.iter_mut().map(|e| e as &mut dyn aware_lab::rollout::Observer).collect();
    let report =
        aware_lab::evaluate::simulate_observed(&workload, &args.policy, args.sim.steps, store, observers, &bar)?;
    if args.json {
        print_json(&report)?;
        return Ok(ExitCode::SUCCESS);
    }
    outln!(
        "policy: {}  apps: {}  steps: {} × {} s  seed: {}{}",
        report.policy,
        report.apps,
        report.steps,
        report.interval_s,
        report.seed,
        report.scenario.as_ref().map(|s| format!("  scenario: {s}")).unwrap_or_default()
    );
    outln!(
        "{:<48} {:>6} {:>6} {:>8} {:>10} {:>5} {:>11} {:>9} {:>7}",
        "app",
        "cpu %",
        "mem %",
        "slo viol",
        "dropped",
        "ooms",
        "core-s",
        "p99 ms",
        "reward"
    );
    for s in report.per_app.iter().chain(std::iter::once(&report.aggregate.summary)) {
        outln!(
            "{:<48} {:>6.1} {:>6.1} {:>8} {:>10.0} {:>5} {:>11.0} {:>9} {:>7.3}",
            s.app,
            s.cpu_utilisation * 100.0,
            s.memory_utilisation * 100.0,
            s.slo_violations,
            s.dropped_requests,
            s.oom_events,
            s.core_seconds,
            s.p99_latency_ms.map_or("-".into(), |v| format!("{v:.0}")),
            s.mean_reward
        );
    }
    Ok(ExitCode::SUCCESS)
}
