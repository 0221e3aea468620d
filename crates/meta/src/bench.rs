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
}

impl Default for MetaBenchSpec {
    fn default() -> Self {
        Self { trajectories: 20, steps: 100, features: 15, repeats: 10 }
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
    let config = MetaConfig { min_trajectories: 1, ..MetaConfig::aware(spec.features) };
    let mut learner = MetaLearner::new(config, 1)?;
    let bundle = synthetic_bundle(spec.trajectories, spec.steps, spec.features)?;
    let embed_us = median_us(spec.repeats, || learner.embed(&bundle).map(drop))?;
    // The peer's loss: the embedding's mean square.
    let zeros = vec![0.0; learner.config().embedding];
    let meta_train_step_us =
        median_us(spec.repeats, || learner.train_step(&[&bundle], |e| crate::mean_squared_error(e, &zeros)).map(drop))?;
    Ok(MetaBenchReport {
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
