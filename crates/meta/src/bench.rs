//! `aware bench meta`: the meta-learner's two costs at AWARE's size, medians in microseconds on
//! the current compute pool (`RAYON_NUM_THREADS=1` for one thread), the shapes
//! `../shared/peers/torch_meta_bench.py` times in PyTorch.

use std::time::Instant;

use serde::Serialize;

use crate::{Bundle, MetaConfig, MetaError, MetaLearner};

#[derive(Debug, Clone)]
pub struct MetaBenchSpec {
    /// M.
    pub trajectories: usize,
    /// T.
    pub steps: usize,
    /// F.
    pub features: usize,
    /// Timed repetitions of each measurement (after two untimed ones).
    pub repeats: u32,
    /// Apps a run manages at once, for the per-app policy compute with meta-learning on.
    pub apps: usize,
    /// Probe trajectories per app its embedding is refreshed from (the pool's default: 5).
    pub refresh_trajectories: usize,
    /// Intervals per episode (an app's embedding is refreshed once per episode).
    pub episode_steps: usize,
}

impl Default for MetaBenchSpec {
    fn default() -> Self {
        Self {
            trajectories: 20,
            steps: 100,
            features: 15,
            repeats: 10,
            apps: 1000,
            refresh_trajectories: 5,
            episode_steps: 100,
        }
    }
}

#[derive(Debug, Serialize)]
pub struct MetaBenchReport {
    pub benchmark: &'static str,
    pub release_build: bool,
    /// Threads of the compute pool.
    pub threads: usize,
    pub trajectories: usize,
    pub steps: usize,
    pub features: usize,
    pub parameters: usize,
    pub repeats: u32,
    /// One embedding of a bundle (no gradients).
    pub embed_us: f64,
    /// One meta-training step: forward with gradients, backward, Adam.
    pub meta_train_step_us: f64,
    pub apps: usize,
    /// One batched greedy action of the embedding-conditioned DDPG (256 × 256) for every app,
    /// per app.
    pub act_us_per_app: f64,
    /// Refreshing every app's embedding from `refresh_trajectories` trajectories, per app.
    pub embedding_refresh_us_per_app: f64,
    /// Policy compute per app per interval with meta-learning on: the action plus the
    /// refresh spread over an episode of `episode_steps` intervals.
    pub policy_us_per_app_step: f64,
    pub episode_steps: usize,
}

fn median_us(repeats: u32, mut f: impl FnMut() -> Result<(), MetaError>) -> Result<f64, MetaError> {
    for _ in 0..2 {
        f()?;
    }
    let mut times = Vec::with_capacity(repeats as usize);
    for _ in 0..repeats.max(1) {
        let start = Instant::now();
        f()?;
        times.push(start.elapsed().as_secs_f64() * 1e6);
    }
    Ok(aware_lab::bench::median(times))
}

/// A deterministic bundle of the asked shape (values in [−1, 1]).
pub fn synthetic_bundle(trajectories: usize, steps: usize, features: usize) -> Result<Bundle, MetaError> {
    let traj: Vec<Vec<Vec<f32>>> = (0..trajectories)
        .map(|m| {
            (0..steps)
                .map(|t| (0..features).map(|f| (((m * 131 + t * 17 + f * 7) % 200) as f32 / 100.0) - 1.0).collect())
                .collect()
        })
        .collect();
    Bundle::new(&traj)
}

pub fn run(spec: &MetaBenchSpec) -> Result<MetaBenchReport, MetaError> {
    // The peer's network ends in a ReLU and knows no centring
    // (`../shared/peers/torch_meta_bench.py`): timed alike.
    let config = MetaConfig {
        min_trajectories: 1,
        output: crate::EmbeddingOutput::Relu,
        centring: false,
        ..MetaConfig::aware(spec.features)
    };
    let mut learner = MetaLearner::new(config, 1)?;
    let bundle = synthetic_bundle(spec.trajectories, spec.steps, spec.features)?;
    let embed_us = median_us(spec.repeats, || learner.embed(&bundle).map(drop))?;
    // The peer's loss: the embedding's mean square.
    let zeros = vec![0.0; learner.config().embedding];
    let meta_train_step_us =
        median_us(spec.repeats, || learner.train_step(&[&bundle], |e| crate::mean_squared_error(e, &zeros)).map(drop))?;
    // Serving `apps` apps: one batched action of the conditioned base learner per interval, one
    // embedding refresh per episode (three timed refreshes: each embeds every app).
    let e = learner.config().embedding;
    let state = aware_env::STATE_DIM;
    let mut agent = aware_agents::ddpg::Ddpg::new(state + e, 3, aware_agents::ddpg::DdpgConfig::default(), 1);
    let rows: Vec<f32> = (0..spec.apps * (state + e)).map(|i| ((i * 37) % 200) as f32 / 100.0 - 1.0).collect();
    let explore = vec![false; spec.apps];
    let act_us = median_us(spec.repeats, || Ok(agent.act_batch(&rows, spec.apps, &explore).map(drop)?))?;
    let probes: Vec<Bundle> = (0..spec.apps)
        .map(|_| synthetic_bundle(spec.refresh_trajectories, spec.steps, spec.features))
        .collect::<Result<_, _>>()?;
    let refs: Vec<&Bundle> = probes.iter().collect();
    let refresh_us = median_us(3, || learner.embed_many(&refs).map(drop))?;
    let apps = spec.apps.max(1) as f64;
    let act_us_per_app = act_us / apps;
    let embedding_refresh_us_per_app = refresh_us / apps;
    Ok(MetaBenchReport {
        apps: spec.apps,
        act_us_per_app,
        embedding_refresh_us_per_app,
        policy_us_per_app_step: act_us_per_app + embedding_refresh_us_per_app / spec.episode_steps.max(1) as f64,
        episode_steps: spec.episode_steps,
        benchmark: "meta",
        release_build: !cfg!(debug_assertions),
        threads: rayon::current_num_threads(),
        trajectories: spec.trajectories,
        steps: spec.steps,
        features: spec.features,
        parameters: learner.parameters(),
        repeats: spec.repeats,
        embed_us,
        meta_train_step_us,
    })
}
