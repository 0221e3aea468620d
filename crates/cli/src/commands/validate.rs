use std::process::ExitCode;

use anyhow::Result;
use aware_sim::validate;

#[derive(clap::Args, Debug)]
pub struct Args {
    /// Seed of both modes' random streams.
    #[arg(long, default_value_t = 1)]
    seed: u64,
    /// Print JSON instead of a table.
    #[arg(long)]
    json: bool,
}

/// Exits 1 when any configuration misses its bound, so CI can call it.
pub fn run(args: Args) -> Result<ExitCode> {
    let report = validate::run(args.seed);
    if args.json {
        outln!("{}", serde_json::to_string_pretty(&report)?);
    } else {
        let pct = |e: Option<f64>| e.map(|e| format!("{:.1}%", e * 100.0)).unwrap_or_else(|| "-".into());
        let ms = |v: Option<f64>| v.map(|v| format!("{v:.0}")).unwrap_or_else(|| "-".into());
        outln!(
            "{:<17} {:>7} {:>5} {:>6} | {:>7} {:>7} {:>7} | {:>7} {:>7} {:>7} | {:>6} {:>6} {:>6} | {:>10} ok",
            "case",
            "rps",
            "pods",
            "cpu m",
            "mean",
            "p99",
            "thr",
            "mean",
            "p99",
            "thr",
            "e mean",
            "e p99",
            "e thr",
            "overloaded",
        );
        outln!("{:<38} | {:^23} | {:^23} |", "", "fast mode (ms, rps)", "discrete-event");
        for c in &report.cases {
            outln!(
                "{:<17} {:>7.1} {:>5} {:>6} | {:>7} {:>7} {:>7.2} | {:>7} {:>7} {:>7.2} | {:>6} {:>6} {:>6} | {:>4}/{:<5} {}",
                c.name,
                c.arrival_rps,
                c.replicas,
                c.cpu_millicores,
                ms(c.fast.latency_mean_ms),
                ms(c.fast.latency_p99_ms),
                c.fast.throughput_rps,
                ms(c.discrete_event.latency_mean_ms),
                ms(c.discrete_event.latency_p99_ms),
                c.discrete_event.throughput_rps,
                pct(c.mean_error),
                pct(c.p99_error),
                pct(c.throughput_error),
                c.fast.overloaded,
                c.discrete_event.overloaded,
                if c.pass { "ok" } else { "FAIL" }
            );
        }
        outln!(
            "bounds: mean ±{:.0}%, p99 ±{:.0}%, throughput ±{:.0}% when not overloaded; overload verdicts must agree",
            report.mean_tolerance * 100.0,
            report.p99_tolerance * 100.0,
            report.throughput_tolerance * 100.0
        );
    }
    if report.pass {
        Ok(ExitCode::SUCCESS)
    } else {
        eprintln!("error: the fast mode is outside its bounds on at least one configuration");
        Ok(ExitCode::from(1))
    }
}
