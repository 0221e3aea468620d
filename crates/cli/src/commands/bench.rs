use std::process::ExitCode;
use std::time::Instant;

use anyhow::Result;
use aware_core::Cluster;
use aware_sim::{SimCluster, SimConfig, generate_apps};
use serde::Serialize;

use crate::progress;

#[derive(clap::Subcommand, Debug)]
pub enum Bench {
    /// Single-thread app-steps per second of the fast simulator at several app counts.
    Sim(SimArgs),
}

#[derive(clap::Args, Debug)]
pub struct SimArgs {
    /// App counts to measure.
    #[arg(long, value_delimiter = ',', default_value = "1,100,10000")]
    apps: Vec<usize>,
    /// Timed repetitions per app count (the median is reported).
    #[arg(long, default_value_t = 7, value_parser = clap::value_parser!(u32).range(1..))]
    repeats: u32,
    /// App-steps per repetition (steps = this / apps, at least 20).
    #[arg(long, default_value_t = 500_000)]
    work: usize,
    #[arg(long, default_value_t = 1)]
    seed: u64,
    /// Print JSON instead of a table.
    #[arg(long)]
    json: bool,
}

#[derive(Debug, Serialize)]
struct SimBench {
    apps: usize,
    steps_per_repeat: usize,
    repeats: u32,
    /// Median over repeats of app-steps per second, `advance` only.
    median_app_steps_per_s: f64,
    /// Median with an `observe` of every app after each step (what a controller loop pays).
    median_app_steps_per_s_with_observe: f64,
    /// Median wall time of one `advance` of the whole cluster, microseconds.
    median_step_us: f64,
}

#[derive(Debug, Serialize)]
struct Report {
    benchmark: &'static str,
    /// Numbers from a debug build are not representative.
    release_build: bool,
    threads: usize,
    results: Vec<SimBench>,
}

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(f64::total_cmp);
    v[v.len() / 2]
}

pub fn run(bench: Bench) -> Result<ExitCode> {
    let Bench::Sim(args) = bench;
    if let Some(bad) = args.apps.iter().find(|&&a| a == 0) {
        anyhow::bail!("--apps: app counts must be positive (got {bad})");
    }
    let total: u64 = args.apps.len() as u64 * args.repeats as u64 * 2;
    let bar = progress::bar(total, "bench sim");
    let mut results = Vec::new();
    for &n in &args.apps {
        let steps = (args.work / n).max(20);
        let apps = generate_apps(n, args.seed, 86_400.0);
        let mut cluster = SimCluster::new(apps, vec![], SimConfig::default(), args.seed);
        // Warm-up: caches, branch predictors, and the initial pod placement are not what we time.
        for _ in 0..5 {
            cluster.advance()?;
        }
        let mut plain = Vec::new();
        let mut with_observe = Vec::new();
        for _ in 0..args.repeats {
            let start = Instant::now();
            for _ in 0..steps {
                cluster.advance()?;
            }
            plain.push(start.elapsed().as_secs_f64());
            bar.inc(1);
            let start = Instant::now();
            for _ in 0..steps {
                cluster.advance()?;
                for a in 0..n {
                    std::hint::black_box(cluster.observe(a)?);
                }
            }
            with_observe.push(start.elapsed().as_secs_f64());
            bar.inc(1);
        }
        let app_steps = (n * steps) as f64;
        let t_plain = median(plain);
        let t_obs = median(with_observe);
        results.push(SimBench {
            apps: n,
            steps_per_repeat: steps,
            repeats: args.repeats,
            median_app_steps_per_s: app_steps / t_plain,
            median_app_steps_per_s_with_observe: app_steps / t_obs,
            median_step_us: t_plain / steps as f64 * 1e6,
        });
    }
    bar.finish_and_clear();
    let report = Report { benchmark: "sim", release_build: !cfg!(debug_assertions), threads: 1, results };
    if args.json {
        println!("{}", serde_json::to_string_pretty(&report)?);
    } else {
        if !report.release_build {
            println!("warning: debug build; run with `cargo run --release` for meaningful numbers");
        }
        println!("{:>8} {:>20} {:>26} {:>14}", "apps", "app-steps/s", "app-steps/s (+observe)", "step µs");
        for r in &report.results {
            println!(
                "{:>8} {:>20.0} {:>26.0} {:>14.1}",
                r.apps, r.median_app_steps_per_s, r.median_app_steps_per_s_with_observe, r.median_step_us
            );
        }
    }
    Ok(ExitCode::SUCCESS)
}
