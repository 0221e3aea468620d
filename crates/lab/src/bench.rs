//! Benchmarks the command line reports (`aware bench sim|store|agents`): medians, on one thread
//! unless told otherwise, as library functions returning their reports.

use std::time::Instant;

use aware_agents::ddpg::{Ddpg, DdpgConfig};
use aware_agents::dqn::{Dqn, DqnConfig};
use aware_agents::ppo::{Ppo, PpoActions, PpoConfig};
use aware_agents::{AgentError, Experience};
use aware_core::Cluster;
use aware_sim::{SimCluster, SimConfig, generate_apps};
use aware_store::{EpisodeMeta, SqliteStore, StoreUrl, Sync, TopMode, TrajectoryStore, Transition, TransitionFilter};
use serde::Serialize;

use crate::LabError;
use crate::progress::Progress;

/// The median of timings (the upper one of an even count).
pub fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(f64::total_cmp);
    v[v.len() / 2]
}

fn time_us(repeats: u32, mut f: impl FnMut() -> Result<(), LabError>) -> Result<f64, LabError> {
    let mut times = Vec::with_capacity(repeats as usize);
    for _ in 0..repeats.max(1) {
        let start = Instant::now();
        f()?;
        times.push(start.elapsed().as_secs_f64() * 1e6);
    }
    Ok(median(times))
}

/// Runs `f` on a pool of `threads` threads (burn's CPU kernels and gemm use the current rayon
/// pool), so small networks are timed without thread hand-offs.
pub fn on_threads<T: Send>(threads: usize, f: impl FnOnce() -> T + Send) -> Result<T, LabError> {
    let pool = rayon::ThreadPoolBuilder::new()
        .num_threads(threads.max(1))
        .build()
        .map_err(|e| LabError::Bench { what: "threads", reason: e.to_string() })?;
    Ok(pool.install(f))
}

// ---------------------------------------------------------------------------------------------
// bench sim

#[derive(Debug, Clone)]
pub struct SimBenchSpec {
    /// App counts to measure.
    pub apps: Vec<usize>,
    /// Timed repetitions per app count (the median is reported).
    pub repeats: u32,
    /// App-steps per repetition (steps = this / apps, at least 20).
    pub work: usize,
    pub seed: u64,
}

#[derive(Debug, Serialize)]
pub struct SimBench {
    pub apps: usize,
    pub steps_per_repeat: usize,
    pub repeats: u32,
    /// Median over repeats of app-steps per second, `advance` only.
    pub median_app_steps_per_s: f64,
    /// Median with an `observe` of every app after each step (what a controller loop pays).
    pub median_app_steps_per_s_with_observe: f64,
    /// Steps of each repetition that the MPA default drives (a tenth of `steps_per_repeat`, at
    /// least 20: its step costs more).
    pub mpa_steps_per_repeat: usize,
    /// Median with the MPA default (HPA + VPA) recommending for every app from its observation
    /// and its recommendation applied, after each step: the rule-based fallback's loop, which
    /// every AWARE rollout pays for each app (its proposal, its shadow) and whose cost grows
    /// with the app's pods.
    pub median_app_steps_per_s_with_mpa: f64,
    /// Median wall time of one `advance` of the whole cluster, microseconds.
    pub median_step_us: f64,
}

#[derive(Debug, Serialize)]
pub struct SimBenchReport {
    pub benchmark: &'static str,
    /// Numbers from a debug build are not representative.
    pub release_build: bool,
    pub threads: usize,
    pub results: Vec<SimBench>,
}

pub fn sim(spec: &SimBenchSpec, progress: &dyn Progress) -> Result<SimBenchReport, LabError> {
    if let Some(bad) = spec.apps.iter().find(|&&a| a == 0) {
        return Err(LabError::input("--apps", format!("app counts must be positive (got {bad})")));
    }
    progress.start(spec.apps.len() as u64 * spec.repeats as u64 * 3, "bench sim");
    let mut results = Vec::new();
    for &n in &spec.apps {
        let steps = (spec.work / n).max(20);
        let apps = generate_apps(n, spec.seed, 86_400.0);
        let mut cluster = SimCluster::new(apps, vec![], SimConfig::default(), spec.seed);
        // Warm-up: caches, branch predictors and the initial pod placement are not what we time.
        for _ in 0..5 {
            cluster.advance()?;
        }
        let mpa_steps = (steps / 10).max(20);
        // The rules resize their apps: on a copy, so the other columns keep timing the initial
        // allocation.
        let mut governed = cluster.clone();
        let profile = aware_core::Profile::default();
        let mut rules = (0..n)
            .map(|_| aware_baselines::Baseline::build(aware_baselines::BaselineKind::Mpa, &profile, None))
            .collect::<Result<Vec<_>, _>>()
            .map_err(|e| LabError::Bench { what: "sim", reason: e.to_string() })?;
        let (mut plain, mut with_observe, mut with_mpa) = (Vec::new(), Vec::new(), Vec::new());
        for _ in 0..spec.repeats.max(1) {
            let start = Instant::now();
            for _ in 0..steps {
                cluster.advance()?;
            }
            plain.push(start.elapsed().as_secs_f64());
            progress.inc(1);
            let start = Instant::now();
            for _ in 0..steps {
                cluster.advance()?;
                for a in 0..n {
                    std::hint::black_box(cluster.observe(a)?);
                }
            }
            with_observe.push(start.elapsed().as_secs_f64());
            progress.inc(1);
            let start = Instant::now();
            for _ in 0..mpa_steps {
                governed.advance()?;
                for (a, rule) in rules.iter_mut().enumerate() {
                    let obs = governed.observe(a)?;
                    // A recommendation the rules refuse (no pod measured yet) leaves the app as it is.
                    if let Ok(rec) = rule.recommender().recommend(&obs) {
                        governed.apply(a, &rec)?;
                    }
                }
            }
            with_mpa.push(start.elapsed().as_secs_f64());
            progress.inc(1);
        }
        let app_steps = (n * steps) as f64;
        let (t_plain, t_obs) = (median(plain), median(with_observe));
        results.push(SimBench {
            apps: n,
            steps_per_repeat: steps,
            repeats: spec.repeats,
            median_app_steps_per_s: app_steps / t_plain,
            median_app_steps_per_s_with_observe: app_steps / t_obs,
            mpa_steps_per_repeat: mpa_steps,
            median_app_steps_per_s_with_mpa: (n * mpa_steps) as f64 / median(with_mpa),
            median_step_us: t_plain / steps as f64 * 1e6,
        });
    }
    progress.finish();
    Ok(SimBenchReport { benchmark: "sim", release_build: !cfg!(debug_assertions), threads: 1, results })
}

// ---------------------------------------------------------------------------------------------
// bench store

#[derive(Debug, Clone)]
pub struct StoreBenchSpec {
    /// Transitions to append before querying.
    pub transitions: u64,
    /// State dimension of every transition.
    pub state_dim: u32,
    /// Timed repetitions of each query (the median is reported).
    pub repeats: u32,
    /// An empty store to benchmark; by default a fresh SQLite file in a temporary directory. A
    /// store that holds episodes is refused.
    pub store: Option<String>,
}

#[derive(Debug, Serialize)]
pub struct StoreBenchReport {
    pub benchmark: &'static str,
    pub backend: String,
    pub release_build: bool,
    pub transitions: u64,
    pub episodes: u64,
    pub state_dim: u32,
    pub append_transitions_per_s: f64,
    pub median_last_50_rewards_us: f64,
    pub median_top_20_episodes_us: f64,
    pub median_sample_64_us: f64,
}

pub fn store(spec: &StoreBenchSpec, progress: &dyn Progress) -> Result<StoreBenchReport, LabError> {
    const STEPS: u64 = 100;
    let dir = tempfile::tempdir().map_err(|e| LabError::io(std::env::temp_dir(), e))?;
    let (backend, mut store): (String, Box<dyn TrajectoryStore>) = match &spec.store {
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
                return Err(LabError::input(
                    "--store",
                    format!("{url} holds {held} episodes; benchmark an empty scratch store"),
                ));
            }
            (name.into(), store)
        }
    };
    let episodes = spec.transitions.div_ceil(STEPS);
    progress.start(episodes, "bench store");
    let dim = spec.state_dim as usize;
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
            state_dim: spec.state_dim,
            action_dim: 3,
            started_at_s: 1_700_000_000.0 + e as f64,
        };
        let id = store.begin_episode(&meta)?;
        store.append(id, &steps)?;
        store.close_episode(id, ((e * 7919) % 1000) as f64)?;
        progress.inc(1);
    }
    let append_s = start.elapsed().as_secs_f64();
    progress.finish();
    let mut k = 0u64;
    let last = time_us(spec.repeats, || {
        k += 1;
        std::hint::black_box(store.last_rewards(&format!("agent-{}", k % 10), 50)?);
        Ok(())
    })?;
    let top = time_us(spec.repeats, || {
        k += 1;
        std::hint::black_box(store.top_episodes(&format!("app-{}", k % 50), 20, TopMode::Best)?);
        Ok(())
    })?;
    let sample = time_us(spec.repeats, || {
        k += 1;
        let filter = TransitionFilter { agent: Some(format!("agent-{}", k % 10)), ..Default::default() };
        std::hint::black_box(store.sample(&filter, 64, k)?);
        Ok(())
    })?;
    Ok(StoreBenchReport {
        benchmark: "store",
        backend,
        release_build: !cfg!(debug_assertions),
        transitions: episodes * STEPS,
        episodes,
        state_dim: spec.state_dim,
        append_transitions_per_s: (episodes * STEPS) as f64 / append_s,
        median_last_50_rewards_us: last,
        median_top_20_episodes_us: top,
        median_sample_64_us: sample,
    })
}

// ---------------------------------------------------------------------------------------------
// bench agents

#[derive(Debug, Clone)]
pub struct AgentsBenchSpec {
    /// Timed repetitions (the median is reported).
    pub repeats: u32,
    /// Observations in the batched-inference measurement.
    pub batch: u32,
    /// Threads of the compute pool (1: small networks are fastest without hand-offs).
    pub threads: usize,
}

#[derive(Debug, Serialize)]
pub struct AgentBench {
    pub algorithm: &'static str,
    pub hidden: Vec<usize>,
    pub state_dim: usize,
    pub median_update_us: f64,
    pub median_single_inference_us: f64,
    pub median_batched_inference_us: f64,
    pub batch: u32,
}

#[derive(Debug, Serialize)]
pub struct AgentsBenchReport {
    pub benchmark: &'static str,
    pub release_build: bool,
    /// Threads of the compute pool the benchmark ran on.
    pub threads: String,
    pub results: Vec<AgentBench>,
}

const DIM: usize = aware_env::STATE_DIM;

fn obs(i: usize) -> Vec<f32> {
    (0..DIM).map(|k| ((i * 31 + k * 7) % 100) as f32 / 100.0).collect()
}

fn experience(i: usize, action: Vec<f32>) -> Experience {
    Experience { state: obs(i), action, reward: 0.5, next_state: obs(i + 1), terminal: false }
}

pub fn agents(spec: &AgentsBenchSpec, progress: &dyn Progress) -> Result<AgentsBenchReport, LabError> {
    let threads = spec.threads.max(1);
    let results = on_threads(threads, || agents_on_this_pool(spec, progress))??;
    Ok(AgentsBenchReport {
        benchmark: "agents",
        release_build: !cfg!(debug_assertions),
        threads: threads.to_string(),
        results,
    })
}

fn agents_on_this_pool(spec: &AgentsBenchSpec, progress: &dyn Progress) -> Result<Vec<AgentBench>, LabError> {
    let batch: Vec<f32> = (0..spec.batch as usize).flat_map(obs).collect();
    progress.start(4, "bench agents");
    let mut results = Vec::new();
    // DDPG at AWARE's size: warm-up filled, then each observe is one critic + one actor step.
    let config = DdpgConfig { warmup: 64, ..DdpgConfig::default() };
    let hidden = config.hidden.clone();
    let mut ddpg = Ddpg::new(DIM, 3, config, 1);
    let mut i = 0;
    for _ in 0..64 {
        i += 1;
        ddpg.observe(&experience(i, vec![0.1, -0.2, 0.3]))?;
    }
    let update = time_us(spec.repeats, || {
        i += 1;
        ddpg.observe(&experience(i, vec![0.1, -0.2, 0.3]))?;
        Ok(())
    })?;
    results.push(agent_row(
        spec,
        "ddpg",
        hidden,
        update,
        || ddpg.greedy(&obs(7)),
        || ddpg.greedy_batch(&batch, spec.batch as usize),
    )?);
    progress.inc(1);
    for (name, config) in [("dqn", DqnConfig::dqn()), ("d3qn", DqnConfig::d3qn())] {
        let config = DqnConfig { warmup: 64, ..config };
        let hidden = config.hidden.clone();
        let mut dqn = Dqn::new(DIM, aware_env::DISCRETE_ACTIONS, config, 1);
        for _ in 0..64 {
            i += 1;
            dqn.observe(&experience(i, vec![(i % 7) as f32]))?;
        }
        let update = time_us(spec.repeats, || {
            i += 1;
            dqn.observe(&experience(i, vec![(i % 7) as f32]))?;
            Ok(())
        })?;
        results.push(agent_row(
            spec,
            name,
            hidden,
            update,
            || dqn.q_values(&obs(7)),
            || dqn.q_values_batch(&batch, spec.batch as usize),
        )?);
        progress.inc(1);
    }
    results.push(ppo_bench(spec, &batch)?);
    progress.inc(1);
    progress.finish();
    Ok(results)
}

/// PPO at SIMPPO's size (2 × 64, discrete actions). Its unit of learning is a rollout, so the
/// update timed here is a 64-step rollout learned in one epoch of one 64-sample minibatch:
/// GAE, the value bootstrap and one gradient step, comparable with the off-policy updates.
fn ppo_bench(spec: &AgentsBenchSpec, batch: &[f32]) -> Result<AgentBench, LabError> {
    let config = PpoConfig { rollout_steps: 64, minibatch_size: 64, epochs: 1, ..PpoConfig::default() };
    let hidden = config.hidden.clone();
    let mut ppo = Ppo::new(DIM, PpoActions::Discrete(aware_env::DISCRETE_ACTIONS), config, 1);
    // Acts on observation i and returns the experience its outcome completes.
    let explored = |i: usize, ppo: &mut Ppo| -> Result<Experience, LabError> {
        let action = ppo.act(&[obs(i)], true)?.remove(0);
        Ok(Experience { state: obs(i), action, reward: 0.5, next_state: obs(i + 1), terminal: false })
    };
    let mut times = Vec::with_capacity(spec.repeats as usize);
    let mut i = 0;
    for _ in 0..spec.repeats.max(1) {
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
        if !updated {
            return Err(LabError::Bench { what: "ppo", reason: "the 64th step did not complete a rollout".into() });
        }
    }
    agent_row(
        spec,
        "ppo",
        hidden,
        median(times),
        || ppo.greedy(&obs(7)),
        || ppo.greedy_batch(batch, spec.batch as usize),
    )
}

/// One agent's row: the update time measured by the caller, then median single-observation
/// and batched greedy inference.
fn agent_row<T>(
    spec: &AgentsBenchSpec,
    algorithm: &'static str,
    hidden: Vec<usize>,
    median_update_us: f64,
    mut single: impl FnMut() -> Result<T, AgentError>,
    mut batched: impl FnMut() -> Result<T, AgentError>,
) -> Result<AgentBench, LabError> {
    let timed = |f: &mut dyn FnMut() -> Result<T, AgentError>| {
        time_us(spec.repeats, || {
            std::hint::black_box(f()?);
            Ok(())
        })
    };
    Ok(AgentBench {
        algorithm,
        hidden,
        state_dim: DIM,
        median_update_us,
        median_single_inference_us: timed(&mut single)?,
        median_batched_inference_us: timed(&mut batched)?,
        batch: spec.batch,
    })
}
