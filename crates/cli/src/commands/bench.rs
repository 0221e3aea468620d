use std::process::ExitCode;

use anyhow::Result;
use aware_lab::bench::{AgentsBenchSpec, SimBenchSpec, StoreBenchSpec};

use super::print_json;
use crate::progress::Bar;

#[derive(clap::Subcommand, Debug)]
pub enum Bench {
    /// Single-thread app-steps per second of the fast simulator at several app counts.
    Sim(SimArgs),
    /// Trajectory-store append throughput and query latency (SQLite, in a temporary directory).
    Store(StoreArgs),
    /// Median update step (batch 64) and single / batched inference of each agent.
    Agents(AgentsArgs),
    /// The environment service on loopback: unary Step calls, batched StepMany and in-process
    /// steps per second (starts its own server).
    Rpc(RpcArgs),
    /// The meta-learner at AWARE's size: one embedding of M trajectories and one meta-training
    /// step (forward, backward, Adam); RAYON_NUM_THREADS=1 times it on one thread.
    Meta(MetaArgs),
}

#[derive(clap::Args, Debug)]
pub struct MetaArgs {
    /// M: trajectories in the bundle.
    #[arg(long, default_value_t = 20, value_parser = clap::value_parser!(u32).range(1..=10_000))]
    trajectories: u32,
    /// T: steps per trajectory.
    #[arg(long, default_value_t = 100, value_parser = clap::value_parser!(u32).range(1..=100_000))]
    steps: u32,
    /// F: features per step (state ⊕ action ⊕ reward).
    #[arg(long, default_value_t = 15, value_parser = clap::value_parser!(u32).range(1..=4096))]
    features: u32,
    /// Timed repetitions of each measurement (the median is reported).
    #[arg(long, default_value_t = 10, value_parser = clap::value_parser!(u32).range(1..=10_000))]
    repeats: u32,
    /// Apps served at once, for the per-app policy compute with meta-learning on.
    #[arg(long, default_value_t = 1000, value_parser = clap::value_parser!(u32).range(1..=100_000))]
    apps: u32,
    /// Print JSON instead of a table.
    #[arg(long)]
    json: bool,
}

fn meta(args: MetaArgs) -> Result<ExitCode> {
    let spec = aware_meta::bench::MetaBenchSpec {
        trajectories: args.trajectories as usize,
        steps: args.steps as usize,
        features: args.features as usize,
        repeats: args.repeats,
        apps: args.apps as usize,
        ..Default::default()
    };
    let report = aware_meta::bench::run(&spec)?;
    if args.json {
        print_json(&report)?;
        return Ok(ExitCode::SUCCESS);
    }
    debug_warning(report.release_build);
    outln!(
        "meta-learner, {} parameters, M = {} trajectories × T = {} steps × F = {} features, {} thread(s)",
        report.parameters,
        report.trajectories,
        report.steps,
        report.features,
        report.threads
    );
    outln!("embedding:          {:>12.0} µs median", report.embed_us);
    outln!("meta-training step: {:>12.0} µs median", report.meta_train_step_us);
    outln!(
        "serving {} apps: {:.2} µs per app-interval (action {:.2} µs, embedding refresh {:.0} µs per app per {}-interval episode)",
        report.apps,
        report.policy_us_per_app_step,
        report.act_us_per_app,
        report.embedding_refresh_us_per_app,
        report.episode_steps
    );
    Ok(ExitCode::SUCCESS)
}

#[derive(clap::Args, Debug)]
pub struct RpcArgs {
    /// Applications in the batched and in-process measurements.
    #[arg(long, default_value_t = 64, value_parser = clap::value_parser!(u32).range(1..=4096))]
    apps: u32,
    /// Steps timed per repeat.
    #[arg(long, default_value_t = 2000, value_parser = clap::value_parser!(u32).range(1..=10_000_000))]
    steps: u32,
    /// Repeats (medians are reported).
    #[arg(long, default_value_t = 5, value_parser = clap::value_parser!(u32).range(1..=10_000))]
    repeats: u32,
    /// Seed of the simulated apps and their traffic.
    #[arg(long, default_value_t = 1)]
    seed: u64,
    /// Busy-poll window (µs) of the server and client in the unary measurement, which is also
    /// measured without; 0 measures only without.
    #[arg(long, default_value_t = aware_rpc::bench::DEFAULT_BENCH_BUSY_POLL.as_micros() as u64, value_parser = clap::value_parser!(u64).range(0..=1_000_000))]
    busy_poll_us: u64,
    /// Print JSON instead of a table.
    #[arg(long)]
    json: bool,
}

fn rpc(args: RpcArgs) -> Result<ExitCode> {
    let options = aware_rpc::bench::BenchOptions {
        apps: args.apps,
        steps: args.steps,
        repeats: args.repeats,
        seed: args.seed,
        busy_poll: std::time::Duration::from_micros(args.busy_poll_us),
    };
    let report = aware_rpc::bench::run(&options)?;
    if args.json {
        let mut value = serde_json::to_value(&report)?;
        value["benchmark"] = "rpc".into();
        value["release_build"] = (!cfg!(debug_assertions)).into();
        outln!("{}", serde_json::to_string_pretty(&value)?);
    } else {
        if report.busy_poll_us > 0 {
            outln!(
                "single Step calls        {:>12.0} steps/s (busy-polling {} µs)",
                report.single_steps_per_s,
                report.busy_poll_us
            );
            outln!("  without busy-polling   {:>12.0} steps/s", report.single_steps_per_s_without_busy_poll);
        } else {
            outln!("single Step calls        {:>12.0} steps/s", report.single_steps_per_s);
        }
        outln!("batched StepMany ({:>4})  {:>12.0} app-steps/s", report.apps, report.batched_app_steps_per_s);
        outln!("in-process ({:>4})        {:>12.0} app-steps/s", report.apps, report.in_process_app_steps_per_s);
    }
    Ok(ExitCode::SUCCESS)
}

#[derive(clap::Args, Debug)]
pub struct AgentsArgs {
    /// Timed repetitions (the median is reported).
    #[arg(long, default_value_t = 100, value_parser = clap::value_parser!(u32).range(1..=100_000))]
    repeats: u32,
    /// Observations in the batched-inference measurement.
    #[arg(long, default_value_t = 1000, value_parser = clap::value_parser!(u32).range(1..=100_000))]
    batch: u32,
    /// Threads of the compute pool (tiny networks are fastest on one).
    #[arg(long, default_value_t = 1, value_parser = clap::value_parser!(u32).range(1..=1024))]
    threads: u32,
    /// Print JSON instead of a table.
    #[arg(long)]
    json: bool,
}

#[derive(clap::Args, Debug)]
pub struct StoreArgs {
    /// Transitions to append before querying.
    #[arg(long, default_value_t = 1_000_000, value_parser = clap::value_parser!(u64).range(100..=100_000_000))]
    transitions: u64,
    /// State dimension of every transition.
    #[arg(long, default_value_t = 16, value_parser = clap::value_parser!(u32).range(1..=4096))]
    state_dim: u32,
    /// Timed repetitions of each query (the median is reported).
    #[arg(long, default_value_t = 200, value_parser = clap::value_parser!(u32).range(1..=100_000))]
    repeats: u32,
    /// An empty store to benchmark (postgres://…, influxdb://…, sqlite:PATH); by default a
    /// fresh SQLite file in a temporary directory. A store that holds episodes is refused.
    #[arg(long)]
    store: Option<String>,
    /// Print JSON instead of a table.
    #[arg(long)]
    json: bool,
}

#[derive(clap::Args, Debug)]
pub struct SimArgs {
    /// App counts to measure.
    #[arg(long, value_delimiter = ',', default_value = "1,100,10000", value_parser = clap::value_parser!(u64).range(1..=100_000))]
    apps: Vec<u64>,
    /// Timed repetitions per app count (the median is reported).
    #[arg(long, default_value_t = 7, value_parser = clap::value_parser!(u32).range(1..=10_000))]
    repeats: u32,
    /// App-steps per repetition (steps = this / apps, at least 20).
    #[arg(long, default_value_t = 500_000, value_parser = clap::value_parser!(u64).range(1..=1_000_000_000))]
    work: u64,
    /// Seed of the simulated apps and their traffic.
    #[arg(long, default_value_t = 1)]
    seed: u64,
    /// Print JSON instead of a table.
    #[arg(long)]
    json: bool,
}

pub fn run(bench: Bench) -> Result<ExitCode> {
    match bench {
        Bench::Sim(args) => sim(args),
        Bench::Store(args) => store(args),
        Bench::Agents(args) => agents(args),
        Bench::Rpc(args) => rpc(args),
        Bench::Meta(args) => meta(args),
    }
}

fn debug_warning(release: bool) {
    if !release {
        outln!("warning: debug build; run with `cargo run --release` for meaningful numbers");
    }
}

fn agents(args: AgentsArgs) -> Result<ExitCode> {
    let spec = AgentsBenchSpec { repeats: args.repeats, batch: args.batch, threads: args.threads as usize };
    let report = aware_lab::bench::agents(&spec, &Bar::new())?;
    if args.json {
        print_json(&report)?;
        return Ok(ExitCode::SUCCESS);
    }
    debug_warning(report.release_build);
    outln!("{:<6} {:>12} {:>14} {:>16} {:>22}", "agent", "hidden", "update µs", "single inf. µs", "batched inf. µs");
    for r in &report.results {
        outln!(
            "{:<6} {:>12} {:>14.1} {:>16.1} {:>22.1}",
            r.algorithm,
            format!("{:?}", r.hidden),
            r.median_update_us,
            r.median_single_inference_us,
            r.median_batched_inference_us
        );
    }
    Ok(ExitCode::SUCCESS)
}

fn store(args: StoreArgs) -> Result<ExitCode> {
    let spec = StoreBenchSpec {
        transitions: args.transitions,
        state_dim: args.state_dim,
        repeats: args.repeats,
        store: args.store,
    };
    let report = aware_lab::bench::store(&spec, &Bar::new())?;
    if args.json {
        print_json(&report)?;
        return Ok(ExitCode::SUCCESS);
    }
    debug_warning(report.release_build);
    outln!(
        "{}, {} transitions (state dimension {}), {} episodes",
        report.backend,
        report.transitions,
        report.state_dim,
        report.episodes
    );
    outln!("append:          {:>12.0} transitions/s", report.append_transitions_per_s);
    outln!("last 50 rewards: {:>12.1} µs median", report.median_last_50_rewards_us);
    outln!("top 20 episodes: {:>12.1} µs median", report.median_top_20_episodes_us);
    outln!("sample 64:       {:>12.1} µs median", report.median_sample_64_us);
    Ok(ExitCode::SUCCESS)
}

fn sim(args: SimArgs) -> Result<ExitCode> {
    let spec = SimBenchSpec {
        apps: args.apps.iter().map(|&a| a as usize).collect(),
        repeats: args.repeats,
        work: args.work as usize,
        seed: args.seed,
    };
    let report = aware_lab::bench::sim(&spec, &Bar::new())?;
    if args.json {
        print_json(&report)?;
        return Ok(ExitCode::SUCCESS);
    }
    debug_warning(report.release_build);
    outln!(
        "{:>8} {:>20} {:>26} {:>22} {:>14}",
        "apps",
        "app-steps/s",
        "app-steps/s (+observe)",
        "app-steps/s (+MPA)",
        "step µs"
    );
    for r in &report.results {
        outln!(
            "{:>8} {:>20.0} {:>26.0} {:>22.0} {:>14.1}",
            r.apps,
            r.median_app_steps_per_s,
            r.median_app_steps_per_s_with_observe,
            r.median_app_steps_per_s_with_mpa,
            r.median_step_us
        );
    }
    Ok(ExitCode::SUCCESS)
}
