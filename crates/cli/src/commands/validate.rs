use std::process::ExitCode;

use anyhow::Result;
use aware_sim::validate::{self, Check, MmcReport, RandomReport, Report, ValidationReport};

#[derive(clap::Args, Debug)]
pub struct Args {
    /// Seed of the drawn configurations and of both modes' random streams.
    #[arg(long, default_value_t = 1)]
    seed: u64,
    /// M/M/c apps (Poisson arrivals, exponential service, c servers behind one queue) through
    /// both modes against the Erlang-C response time: mean and p99 within 10 % at utilisation ≤ 0.9.
    #[arg(long, conflicts_with = "fixed")]
    mmc: bool,
    /// The fixed configurations the fast mode's constants were fitted on (instead of a fresh
    /// random overload set).
    #[arg(long)]
    fixed: bool,
    /// Print JSON instead of a table.
    #[arg(long)]
    json: bool,
}

/// Exits 1 when any configuration misses its bound, so CI can call it.
pub fn run(args: Args) -> Result<ExitCode> {
    let check = if args.mmc {
        Check::Mmc
    } else if args.fixed {
        Check::Fixed
    } else {
        Check::Random
    };
    let report = validate::run(check, args.seed);
    if args.json {
        outln!("{}", serde_json::to_string_pretty(&report)?);
    } else {
        match &report {
            Report::Random(r) => print_random(r),
            Report::Mmc(r) => print_mmc(r),
            Report::Fixed(r) => print_fixed(r),
            _ => {}
        }
    }
    if report.pass() {
        Ok(ExitCode::SUCCESS)
    } else {
        eprintln!("error: the fast mode is outside its bounds on at least one configuration");
        Ok(ExitCode::from(1))
    }
}

fn ms(v: Option<f64>) -> String {
    v.map(|v| format!("{v:.0}")).unwrap_or_else(|| "-".into())
}

fn print_random(r: &RandomReport) {
    outln!(
        "{:>3} {:>4} {:>6} {:>5} {:>11} | {:>13} {:>13} {:>13} {:>7} | ok",
        "#",
        "pods",
        "cpu m",
        "load",
        "scale",
        "served f/d",
        "dropped f/d",
        "p99 ms f/d",
        "oom f/d"
    );
    for c in &r.cases {
        outln!(
            "{:>3} {:>4} {:>6} {:>4.2}x {:>4}->{:<3}@{:<3} | {:>6.3}/{:<6.3} {:>6.3}/{:<6.3} {:>6}/{:<6} {:>3}/{:<3} | {}",
            c.case.index,
            c.case.replicas,
            c.case.cpu_millicores,
            c.case.load_factor,
            c.case.replicas,
            c.case.scale_event.1,
            c.case.scale_event.0,
            c.fast.served_fraction,
            c.discrete_event.served_fraction,
            c.fast.dropped_fraction,
            c.discrete_event.dropped_fraction,
            ms(c.fast.latency_p99_ms),
            ms(c.discrete_event.latency_p99_ms),
            c.fast.oom_kills,
            c.discrete_event.oom_kills,
            if c.pass { "ok" } else { "FAIL" }
        );
    }
    outln!(
        "bounds: served and dropped fractions ±{:.0}% (±{} absolute below {}), p99 ±{:.0}%, OOM kills ±{} per app-hour",
        r.fraction_tolerance * 100.0,
        r.fraction_absolute_tolerance,
        r.fraction_absolute_below,
        r.p99_tolerance * 100.0,
        r.oom_per_app_hour
    );
}

fn print_mmc(r: &MmcReport) {
    outln!(
        "{:>3} {:>9} {:>7} {:>5} | {:>8} {:>8} | {:>8} {:>8} | {:>8} {:>8} | ok",
        "c",
        "λ /s",
        "μ /s",
        "ρ",
        "fast ms",
        "p99",
        "des ms",
        "p99",
        "M/M/c",
        "p99"
    );
    for c in &r.cases {
        outln!(
            "{:>3} {:>9.1} {:>7.1} {:>5.2} | {:>8.1} {:>8.1} | {:>8.1} {:>8.1} | {:>8.1} {:>8.1} | {}",
            c.servers,
            c.arrival_rate,
            c.service_rate,
            c.utilisation,
            c.fast_mean_ms,
            c.fast_p99_ms,
            c.des_mean_ms,
            c.des_p99_ms,
            c.analytic_mean_ms,
            c.analytic_p99_ms,
            if !c.checked {
                "(not checked)"
            } else if c.pass {
                "ok"
            } else {
                "FAIL"
            }
        );
    }
    outln!(
        "bounds: mean and p99 of both modes within {:.0}% of M/M/c where utilisation ≤ {}",
        r.tolerance * 100.0,
        r.checked_up_to_utilisation
    );
}

fn print_fixed(report: &ValidationReport) {
    let pct = |e: Option<f64>| e.map(|e| format!("{:.1}%", e * 100.0)).unwrap_or_else(|| "-".into());
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
