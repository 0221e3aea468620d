use std::process::ExitCode;
use std::time::Instant;

use anyhow::Result;
use aware_core::Cluster;
use aware_sim::{SimCluster, SimConfig, generate_apps};
use aware_store::{EpisodeMeta, SqliteStore, StoreUrl, Sync, TopMode, TrajectoryStore, Transition, TransitionFilter};
use serde::Serialize;

use crate::progress;

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
}

#[derive(clap::Args, Debug)]
pub struct RpcArgs {
    /// Applications in the batched and in-process measurements.
    #[arg(long, default_value_t = 64, value_parser = clap::value_parser!(u32).range(1..=4096))]
    apps: u32,
    /// Steps timed per repeat.
    #[arg(long, default_value_t = 2000, value_parser = clap::value_parser!(u32).range(1..))]
    steps: u32,
    /// Repeats (medians are reported).
    #[arg(long, default_value_t = 5, value_parser = clap::value_parser!(u32).range(1..))]
    repeats: u32,
    #[arg(long, default_value_t = 1)]
    seed: u64,
    /// Print JSON instead of a table.
    #[arg(long)]
    json: bool,
}

fn rpc(args: RpcArgs) -> Result<ExitCode> {
    let options =
        aware_rpc::bench::BenchOptions { apps: args.apps, steps: args.steps, repeats: args.repeats, seed: args.seed };
    let report = aware_rpc::bench::run(&options)?;
    if args.json {
        let mut value = serde_json::to_value(&report)?;
        value["benchmark"] = "rpc".into();
        value["release_build"] = (!cfg!(debug_assertions)).into();
        println!("{}", serde_json::to_string_pretty(&value)?);
    } else {
        println!("single Step calls        {:>12.0} steps/s", report.single_steps_per_s);
        println!("batched StepMany ({:>4})  {:>12.0} app-steps/s", report.apps, report.batched_app_steps_per_s);
        println!("in-process ({:>4})        {:>12.0} app-steps/s", report.apps, report.in_process_app_steps_per_s);
    }
    Ok(ExitCode::SUCCESS)
}

#[derive(clap::Args, Debug)]
pub struct AgentsArgs {
    /// Timed repetitions (the median is reported).
    #[arg(long, default_value_t = 100, value_parser = clap::value_parser!(u32).range(1..))]
    repeats: u32,
    /// Observations in the batched-inference measurement.
    #[arg(long, default_value_t = 1000, value_parser = clap::value_parser!(u32).range(1..))]
    batch: u32,
    /// Print JSON instead of a table.
    #[arg(long)]
    json: bool,
}

#[derive(Debug, Serialize)]
struct AgentBench {
    algorithm: &'static str,
    hidden: Vec<usize>,
    state_dim: usize,
    median_update_us: f64,
    median_single_inference_us: f64,
    median_batched_inference_us: f64,
    batch: u32,
}

#[derive(Debug, Serialize)]
struct AgentsReport {
    benchmark: &'static str,
    release_build: bool,
    /// RAYON_NUM_THREADS as the benchmark ran (1 unless set: threads slow tiny networks).
    threads: String,
    results: Vec<AgentBench>,
}

#[derive(clap::Args, Debug)]
pub struct StoreArgs {
    /// Transitions to append before querying.
    #[arg(long, default_value_t = 1_000_000, value_parser = clap::value_parser!(u64).range(100..))]
    transitions: u64,
    /// State dimension of every transition.
    #[arg(long, default_value_t = 16, value_parser = clap::value_parser!(u32).range(1..))]
    state_dim: u32,
    /// Timed repetitions of each query (the median is reported).
    #[arg(long, default_value_t = 200, value_parser = clap::value_parser!(u32).range(1..))]
    repeats: u32,
    /// An empty store to benchmark (postgres://…, influxdb://…, sqlite:PATH); by default a
    /// fresh SQLite file in a temporary directory. A store that holds episodes is refused.
    #[arg(long)]
    store: Option<String>,
    /// Print JSON instead of a table.
    #[arg(long)]
    json: bool,
}

#[derive(Debug, Serialize)]
struct StoreBench {
    benchmark: &'static str,
    backend: String,
    release_build: bool,
    transitions: u64,
    episodes: u64,
    state_dim: u32,
    append_transitions_per_s: f64,
    median_last_50_rewards_us: f64,
    median_top_20_episodes_us: f64,
    median_sample_64_us: f64,
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
    match bench {
        Bench::Sim(args) => sim(args),
        Bench::Store(args) => store(args),
        Bench::Agents(args) => agents(args),
        Bench::Rpc(args) => rpc(args),
    }
}

fn agents(args: AgentsArgs) -> Result<ExitCode> {
    use aware_agents::Experience;
    use aware_agents::ddpg::{Ddpg, DdpgConfig};
    use aware_agents::dqn::{Dqn, DqnConfig};
    if std::env::var_os("RAYON_NUM_THREADS").is_none() {
        // SAFETY: set before any thread pool exists; nothing else reads the environment here.
        unsafe { std::env::set_var("RAYON_NUM_THREADS", "1") };
    }
    const DIM: usize = aware_env::STATE_DIM;
    let obs = |i: usize| -> Vec<f32> { (0..DIM).map(|k| ((i * 31 + k * 7) % 100) as f32 / 100.0).collect() };
    let batch: Vec<f32> = (0..args.batch as usize).flat_map(obs).collect();
    let bar = progress::bar(4, "bench agents");
    let mut results = Vec::new();
    // DDPG at AWARE's size: warm-up filled, then each observe is one critic + one actor step.
    let config = DdpgConfig { warmup: 64, ..DdpgConfig::default() };
    let hidden = config.hidden.clone();
    let mut ddpg = Ddpg::new(DIM, 3, config, 1);
    let mut i = 0;
    let exp = |i: usize, a: Vec<f32>| Experience {
        state: obs(i),
        action: a,
        reward: 0.5,
        next_state: obs(i + 1),
        terminal: false,
    };
    for _ in 0..64 {
        i += 1;
        ddpg.observe(&exp(i, vec![0.1, -0.2, 0.3]))?;
    }
    let update = time_us(args.repeats, || {
        i += 1;
        ddpg.observe(&exp(i, vec![0.1, -0.2, 0.3]))?;
        Ok(())
    })?;
    results.push(agent_row(
        &args,
        "ddpg",
        hidden,
        update,
        || ddpg.greedy(&obs(7)),
        || ddpg.greedy_batch(&batch, args.batch as usize),
    )?);
    bar.inc(1);
    for (name, config) in [("dqn", DqnConfig::dqn()), ("d3qn", DqnConfig::d3qn())] {
        let config = DqnConfig { warmup: 64, ..config };
        let hidden = config.hidden.clone();
        let mut dqn = Dqn::new(DIM, aware_env::action::DISCRETE_ACTIONS, config, 1);
        for _ in 0..64 {
            i += 1;
            dqn.observe(&exp(i, vec![(i % 7) as f32]))?;
        }
        let update = time_us(args.repeats, || {
            i += 1;
            dqn.observe(&exp(i, vec![(i % 7) as f32]))?;
            Ok(())
        })?;
        results.push(agent_row(
            &args,
            name,
            hidden,
            update,
            || dqn.q_values(&obs(7)),
            || dqn.q_values_batch(&batch, args.batch as usize),
        )?);
        bar.inc(1);
    }
    results.push(ppo_bench(&args, &obs, &batch)?);
    bar.inc(1);
    bar.finish_and_clear();
    let report = AgentsReport {
        benchmark: "agents",
        release_build: !cfg!(debug_assertions),
        threads: std::env::var("RAYON_NUM_THREADS").unwrap_or_default(),
        results,
    };
    if args.json {
        println!("{}", serde_json::to_string_pretty(&report)?);
    } else {
        if !report.release_build {
            println!("warning: debug build; run with `cargo run --release` for meaningful numbers");
        }
        println!(
            "{:<6} {:>12} {:>14} {:>16} {:>22}",
            "agent", "hidden", "update µs", "single inf. µs", "batched inf. µs"
        );
        for r in &report.results {
            println!(
                "{:<6} {:>12} {:>14.1} {:>16.1} {:>22.1}",
                r.algorithm,
                format!("{:?}", r.hidden),
                r.median_update_us,
                r.median_single_inference_us,
                r.median_batched_inference_us
            );
        }
    }
    Ok(ExitCode::SUCCESS)
}

/// PPO at SIMPPO's size (2 × 64, discrete actions). Its unit of learning is a rollout, so the
/// update timed here is a 64-step rollout learned in one epoch of one 64-sample minibatch:
/// GAE, the value bootstrap and one gradient step, comparable with the off-policy updates.
fn ppo_bench(args: &AgentsArgs, obs: &dyn Fn(usize) -> Vec<f32>, batch: &[f32]) -> Result<AgentBench> {
    use aware_agents::Experience;
    use aware_agents::ppo::{Ppo, PpoActions, PpoConfig};
    const DIM: usize = aware_env::STATE_DIM;
    let config = PpoConfig { rollout_steps: 64, minibatch_size: 64, epochs: 1, ..PpoConfig::default() };
    let hidden = config.hidden.clone();
    let mut ppo = Ppo::new(DIM, PpoActions::Discrete(aware_env::action::DISCRETE_ACTIONS), config, 1);
    // Acts on observation i and returns the experience its outcome completes.
    let explored = |i: usize, ppo: &mut Ppo| -> Result<Experience> {
        let action = ppo.act(&[obs(i)], true)?.remove(0);
        Ok(Experience { state: obs(i), action, reward: 0.5, next_state: obs(i + 1), terminal: false })
    };
    let mut times = Vec::with_capacity(args.repeats as usize);
    let mut i = 0;
    for _ in 0..args.repeats {
        for _ in 0..63 {
            i += 1;
            let e = explored(i, &mut ppo)?;
            ppo.observe(0, &e, false)?;
        }
        i += 1;
        let e = explored(i, &mut ppo)?;
        let start = Instant::now();
        let updated = ppo.observe(0, &e, false)?.is_some();
        times.push(start.elapsed().as_secs_f64() * 1e6);
        anyhow::ensure!(updated, "the 64th step should complete a rollout");
    }
    agent_row(
        args,
        "ppo",
        hidden,
        median(times),
        || ppo.greedy(&obs(7)),
        || ppo.greedy_batch(batch, args.batch as usize),
    )
}

/// One agent's row: the update time measured by the caller, then median single-observation
/// and batched greedy inference.
fn agent_row<T>(
    args: &AgentsArgs,
    algorithm: &'static str,
    hidden: Vec<usize>,
    median_update_us: f64,
    mut single: impl FnMut() -> Result<T, aware_agents::AgentError>,
    mut batched: impl FnMut() -> Result<T, aware_agents::AgentError>,
) -> Result<AgentBench> {
    let timed = |f: &mut dyn FnMut() -> Result<T, aware_agents::AgentError>| {
        time_us(args.repeats, || {
            std::hint::black_box(f()?);
            Ok(())
        })
    };
    Ok(AgentBench {
        algorithm,
        hidden,
        state_dim: aware_env::STATE_DIM,
        median_update_us,
        median_single_inference_us: timed(&mut single)?,
        median_batched_inference_us: timed(&mut batched)?,
        batch: args.batch,
    })
}

fn time_us(repeats: u32, mut f: impl FnMut() -> Result<()>) -> Result<f64> {
    let mut times = Vec::with_capacity(repeats as usize);
    for _ in 0..repeats {
        let start = Instant::now();
        f()?;
        times.push(start.elapsed().as_secs_f64() * 1e6);
    }
    Ok(median(times))
}

fn store(args: StoreArgs) -> Result<ExitCode> {
    const STEPS: u64 = 100;
    let dir = tempfile::tempdir()?;
    let (backend, mut store): (String, Box<dyn TrajectoryStore>) = match &args.store {
        None => ("sqlite".into(), Box::new(SqliteStore::open(&dir.path().join("bench.db"), Sync::Normal)?)),
        Some(url) => {
            let parsed: StoreUrl = url.parse()?;
            let name = match parsed {
                StoreUrl::Sqlite { .. } => "sqlite",
                StoreUrl::Postgres(_) => "postgres",
                StoreUrl::Influx(_) => "influxdb",
            };
            let store = aware_store::open(&parsed, false)?;
            let held = store.stats()?.episodes;
            if held > 0 {
                anyhow::bail!("--store: {url} holds {held} episodes; benchmark an empty scratch store");
            }
            (name.into(), store)
        }
    };
    let episodes = args.transitions.div_ceil(STEPS);
    let bar = progress::bar(episodes, "bench store");
    let dim = args.state_dim as usize;
    // Prepared outside the timed loop: the benchmark measures the store, not vector building.
    let steps: Vec<Transition> = (0..STEPS as u32)
        .map(|s| Transition {
            step: s,
            state: (0..dim).map(|i| (s as f32 + i as f32) * 0.01).collect(),
            action: vec![0.1, -0.2, 0.3],
            reward: s as f32 * 0.001,
            next_state: (0..dim).map(|i| (s as f32 + i as f32) * 0.02).collect(),
            done: s as u64 == STEPS - 1,
        })
        .collect();
    let start = Instant::now();
    for e in 0..episodes {
        let meta = EpisodeMeta {
            agent: format!("agent-{}", e % 10),
            app: format!("app-{}", e % 50),
            episode: e / 10,
            stage: "online".into(),
            policy: if e % 3 == 0 { "mpa".into() } else { "agent".into() },
            state_dim: args.state_dim,
            action_dim: 3,
            started_at_s: 1_700_000_000.0 + e as f64,
        };
        let id = store.begin_episode(&meta)?;
        store.append(id, &steps)?;
        store.close_episode(id, ((e * 7919) % 1000) as f64)?;
        bar.inc(1);
    }
    let append_s = start.elapsed().as_secs_f64();
    bar.finish_and_clear();
    let mut k = 0u64;
    let last = time_us(args.repeats, || {
        k += 1;
        std::hint::black_box(store.last_rewards(&format!("agent-{}", k % 10), 50)?);
        Ok(())
    })?;
    let top = time_us(args.repeats, || {
        k += 1;
        std::hint::black_box(store.top_episodes(&format!("app-{}", k % 50), 20, TopMode::Best)?);
        Ok(())
    })?;
    let sample = time_us(args.repeats, || {
        k += 1;
        let filter = TransitionFilter { agent: Some(format!("agent-{}", k % 10)), ..Default::default() };
        std::hint::black_box(store.sample(&filter, 64, k)?);
        Ok(())
    })?;
    let report = StoreBench {
        benchmark: "store",
        backend,
        release_build: !cfg!(debug_assertions),
        transitions: episodes * STEPS,
        episodes,
        state_dim: args.state_dim,
        append_transitions_per_s: (episodes * STEPS) as f64 / append_s,
        median_last_50_rewards_us: last,
        median_top_20_episodes_us: top,
        median_sample_64_us: sample,
    };
    if args.json {
        println!("{}", serde_json::to_string_pretty(&report)?);
    } else {
        if !report.release_build {
            println!("warning: debug build; run with `cargo run --release` for meaningful numbers");
        }
        println!(
            "{}, {} transitions (state dimension {}), {} episodes",
            report.backend, report.transitions, report.state_dim, report.episodes
        );
        println!("append:          {:>12.0} transitions/s", report.append_transitions_per_s);
        println!("last 50 rewards: {:>12.1} µs median", report.median_last_50_rewards_us);
        println!("top 20 episodes: {:>12.1} µs median", report.median_top_20_episodes_us);
        println!("sample 64:       {:>12.1} µs median", report.median_sample_64_us);
    }
    Ok(ExitCode::SUCCESS)
}

fn sim(args: SimArgs) -> Result<ExitCode> {
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
