//! AWARE Figure 6: do workload embeddings reflect what the workloads are? A pool of generated
//! apps is meta-trained (`aware_meta::pool`: the fallback probes, then the conditioned base
//! learner and the meta-learner train together), each app is embedded from its probe episodes,
//! and the cosine similarity of pairs alike in resource sensitivity and load pattern is set
//! beside that of pairs unlike in both. A 2-D projection (the embeddings' two principal
//! components) is plotted.
//!
//! Groups: an app is `cpu`-sensitive when CPU work is at least half of a request's cost
//! (CPU seconds against I/O wait), else `io`; its load is `bursty` when its burst intensity
//! (bursts per hour × peak multiple) is at or above the pool's median, else `smooth`.

use std::path::PathBuf;
use std::time::Instant;

use aware_lab::progress::Progress;
use aware_lab::workload::{Workload, WorkloadSpec};
use aware_meta::MetaConfig;
use aware_meta::pool::{PoolSpec, train_pool};
use serde::Serialize;

use crate::ExperimentError;

#[derive(Debug, Clone)]
pub struct Fig6Config {
    pub seed: u64,
    pub apps: usize,
    pub quick: bool,
    /// Where the projection plot goes (PNG), if anywhere.
    pub plot: Option<PathBuf>,
    pub pool: PoolSpec,
}

impl Fig6Config {
    /// Minutes on 2 cores: 16 apps, 3 probe and 2 training episodes of 50 intervals, a
    /// meta-learner of hidden 64 with a 16-d embedding.
    pub fn quick(seed: u64) -> Self {
        let mut pool = PoolSpec::new(3, 2, 50, seed);
        pool.meta = MetaConfig { hidden: 64, fc: 64, embedding: 16, ..pool.meta };
        Self { seed, apps: 16, quick: true, plot: None, pool }
    }

    /// AWARE's meta-learner on 48 apps, 5 probe and 10 training episodes of 100 intervals.
    pub fn full(seed: u64) -> Self {
        Self { seed, apps: 48, quick: false, plot: None, pool: PoolSpec::new(5, 10, 100, seed) }
    }
}

#[derive(Debug, Clone, Serialize)]
pub struct Fig6App {
    pub app: String,
    pub sensitivity: &'static str,
    pub pattern: &'static str,
    /// CPU work's share of a request's cost.
    pub cpu_share: f64,
    /// Bursts per hour × the burst's peak multiple.
    pub burst_intensity: f64,
    /// The embedding's first two principal components.
    pub projection: [f64; 2],
    pub embedding: Vec<f32>,
}

/// How one app property moves with the embeddings' principal components (Pearson).
#[derive(Debug, Clone, Serialize)]
pub struct Tracks {
    pub property: &'static str,
    pub pc1: Option<f64>,
    pub pc2: Option<f64>,
}

fn pearson(x: &[f64], y: &[f64]) -> Option<f64> {
    let n = x.len() as f64;
    let (mx, my) = (x.iter().sum::<f64>() / n, y.iter().sum::<f64>() / n);
    let cov: f64 = x.iter().zip(y).map(|(a, b)| (a - mx) * (b - my)).sum();
    let (vx, vy) = (x.iter().map(|a| (a - mx).powi(2)).sum::<f64>(), y.iter().map(|b| (b - my).powi(2)).sum::<f64>());
    (vx > 0.0 && vy > 0.0).then(|| cov / (vx * vy).sqrt())
}

/// Mean cosine similarity over a set of app pairs.
#[derive(Debug, Clone, Serialize)]
pub struct PairSet {
    pub pairs: usize,
    pub mean_cosine: Option<f64>,
}

#[derive(Debug, Clone, Serialize)]
pub struct Fig6Report {
    pub experiment: &'static str,
    pub seed: u64,
    pub quick: bool,
    /// Weight of meta-training's auxiliary task (the embedding predicts its trajectories'
    /// input signature); 0: the critic's gradient alone.
    pub signature_weight: f32,
    /// What the meta-learner's embedding layer outputs pass through.
    pub embedding_output: aware_meta::EmbeddingOutput,
    /// Whether the embeddings are centred on the pool's mean output.
    pub embedding_centring: bool,
    /// Always empty: fig6 runs no policy, it compares embeddings. The list is there because
    /// every experiment's JSON carries one (`../shared/INTERFACES.md`), so a script that reads
    /// `policies` from each experiment reads fig6's too.
    pub policies: Vec<aware_lab::evaluate::PolicyRow>,
    pub apps: Vec<Fig6App>,
    /// Pairs alike in both sensitivity and load pattern.
    pub within_group: PairSet,
    /// Pairs unlike in both.
    pub across_group: PairSet,
    pub same_sensitivity: PairSet,
    pub different_sensitivity: PairSet,
    pub same_pattern: PairSet,
    pub different_pattern: PairSet,
    /// Pairs left out because an embedding was all zeros (no direction to compare).
    pub zero_embeddings: usize,
    /// What the embeddings follow: the correlation of each app property with the embeddings'
    /// first two principal components.
    pub tracks: Vec<Tracks>,
    pub embedding: usize,
    pub meta_steps: u64,
    pub training_seconds: f64,
    pub plot: Option<String>,
}

fn cosine(a: &[f32], b: &[f32]) -> Option<f64> {
    let dot: f64 = a.iter().zip(b).map(|(x, y)| *x as f64 * *y as f64).sum();
    let na = a.iter().map(|x| (*x as f64).powi(2)).sum::<f64>().sqrt();
    let nb = b.iter().map(|x| (*x as f64).powi(2)).sum::<f64>().sqrt();
    (na > 0.0 && nb > 0.0).then(|| dot / (na * nb))
}

/// The first two principal components of the rows (centred), by power iteration with deflation.
fn project(rows: &[Vec<f32>]) -> Vec<[f64; 2]> {
    let n = rows.len();
    let d = rows.first().map_or(0, Vec::len);
    if n == 0 || d == 0 {
        return vec![[0.0; 2]; n];
    }
    let mean: Vec<f64> = (0..d).map(|j| rows.iter().map(|r| r[j] as f64).sum::<f64>() / n as f64).collect();
    let centred: Vec<Vec<f64>> =
        rows.iter().map(|r| r.iter().zip(&mean).map(|(v, m)| *v as f64 - m).collect()).collect();
    let mut cov = vec![vec![0.0; d]; d];
    for r in &centred {
        for i in 0..d {
            for j in 0..d {
                cov[i][j] += r[i] * r[j] / n as f64;
            }
        }
    }
    let mut components: Vec<Vec<f64>> = Vec::new();
    for c in 0..2 {
        let mut v: Vec<f64> = (0..d).map(|i| 1.0 + ((i * 7 + c * 3) % 5) as f64 / 10.0).collect();
        for _ in 0..300 {
            let mut w: Vec<f64> = (0..d).map(|i| (0..d).map(|j| cov[i][j] * v[j]).sum()).collect();
            for p in &components {
                let dot: f64 = w.iter().zip(p).map(|(a, b)| a * b).sum();
                w.iter_mut().zip(p).for_each(|(a, b)| *a -= dot * b);
            }
            let norm = w.iter().map(|x| x * x).sum::<f64>().sqrt();
            if norm < 1e-12 {
                break;
            }
            v = w.into_iter().map(|x| x / norm).collect();
        }
        components.push(v);
    }
    centred.iter().map(|r| [0, 1].map(|c| r.iter().zip(&components[c]).map(|(a, b)| a * b).sum())).collect()
}

fn mean(v: &[f64]) -> Option<f64> {
    (!v.is_empty()).then(|| v.iter().sum::<f64>() / v.len() as f64)
}

pub fn fig6(config: &Fig6Config, progress: &dyn Progress) -> Result<Fig6Report, ExperimentError> {
    // A plot that cannot be written is refused before minutes of training, not after.
    if let Some(path) = &config.plot {
        aware_lab::plot::check_path(path)
            .map_err(|reason| ExperimentError::Input { input: format!("--plot {}", path.display()), reason })?;
    }
    let spec = WorkloadSpec {
        apps: config.apps,
        seed: config.seed,
        steps: config.pool.episode_steps * (config.pool.probes + config.pool.episodes),
        ..WorkloadSpec::default()
    };
    let workload = Workload::load(&spec)?;
    let start = Instant::now();
    let (driver, _curve) = train_pool(&workload, &config.pool, progress)?;
    let training_seconds = start.elapsed().as_secs_f64();
    let embeddings: Vec<Vec<f32>> = (0..config.apps)
        .map(|i| driver.embedding(i).map(<[f32]>::to_vec).unwrap_or_else(|| vec![0.0; config.pool.meta.embedding]))
        .collect();
    let intensity: Vec<f64> = workload.apps.iter().map(|a| a.load.bursts_per_hour * a.load.burst_peak).collect();
    let mut sorted = intensity.clone();
    sorted.sort_by(f64::total_cmp);
    let median = sorted[sorted.len() / 2];
    let projection = project(&embeddings);
    let apps: Vec<Fig6App> = workload
        .apps
        .iter()
        .enumerate()
        .map(|(i, a)| {
            let cost = a.cost();
            let cpu_share = cost.cpu_s / (cost.cpu_s + cost.io_s).max(f64::MIN_POSITIVE);
            Fig6App {
                app: a.name.clone(),
                sensitivity: if cpu_share >= 0.5 { "cpu" } else { "io" },
                pattern: if intensity[i] >= median { "bursty" } else { "smooth" },
                cpu_share,
                burst_intensity: intensity[i],
                projection: projection[i],
                embedding: embeddings[i].clone(),
            }
        })
        .collect();
    let mut sets: [Vec<f64>; 6] = Default::default();
    let mut zero = 0;
    for i in 0..apps.len() {
        for j in i + 1..apps.len() {
            let Some(c) = cosine(&embeddings[i], &embeddings[j]) else {
                zero += 1;
                continue;
            };
            let same_s = apps[i].sensitivity == apps[j].sensitivity;
            let same_p = apps[i].pattern == apps[j].pattern;
            if same_s && same_p {
                sets[0].push(c);
            }
            if !same_s && !same_p {
                sets[1].push(c);
            }
            sets[if same_s { 2 } else { 3 }].push(c);
            sets[if same_p { 4 } else { 5 }].push(c);
        }
    }
    let pair = |v: &Vec<f64>| PairSet { pairs: v.len(), mean_cosine: mean(v) };
    let properties: [(&'static str, Vec<f64>); 5] = [
        ("cpu_share", apps.iter().map(|a| a.cpu_share).collect()),
        ("burst_intensity", apps.iter().map(|a| a.burst_intensity).collect()),
        ("log_mean_rps", workload.apps.iter().map(|a| a.mean_rps.max(1e-9).ln()).collect()),
        ("peak_replicas", workload.apps.iter().map(|a| a.peak_replicas as f64).collect()),
        ("slo_p99_ms", workload.apps.iter().map(|a| a.slo_p99_ms).collect()),
    ];
    let pcs: [Vec<f64>; 2] = [0, 1].map(|c| apps.iter().map(|a| a.projection[c]).collect());
    let tracks = properties
        .iter()
        .map(|(property, v)| Tracks { property, pc1: pearson(v, &pcs[0]), pc2: pearson(v, &pcs[1]) })
        .collect();
    let plot = match &config.plot {
        Some(path) => {
            let points: Vec<(String, f64, f64)> = apps
                .iter()
                .map(|a| (format!("{}, {}", a.sensitivity, a.pattern), a.projection[0], a.projection[1]))
                .collect();
            aware_lab::plot::scatter(path, "Workload embeddings (2 principal components)", ("PC 1", "PC 2"), &points)?;
            Some(path.display().to_string())
        }
        None => None,
    };
    Ok(Fig6Report {
        experiment: "fig6",
        seed: config.seed,
        quick: config.quick,
        signature_weight: config.pool.train.signature_weight,
        embedding_output: config.pool.meta.output,
        policies: Vec::new(),
        embedding_centring: config.pool.meta.centring,
        within_group: pair(&sets[0]),
        across_group: pair(&sets[1]),
        same_sensitivity: pair(&sets[2]),
        different_sensitivity: pair(&sets[3]),
        same_pattern: pair(&sets[4]),
        different_pattern: pair(&sets[5]),
        zero_embeddings: zero,
        tracks,
        embedding: config.pool.meta.embedding,
        meta_steps: driver.meta_steps,
        training_seconds,
        apps,
        plot,
    })
}

/// fig8's `episodes_to_convergence`: the (1-based) episode from which the episode reward stays
/// at or above r* − 0.02·|r*| for `window` consecutive episodes, r* being the scratch policy's
/// converged reward; at least 1. If no such run fits in the budget: the budget, censored.
pub fn episodes_to_convergence(rewards: &[f64], r_star: f64, window: usize) -> (u64, bool) {
    let threshold = r_star - 0.02 * r_star.abs();
    let window = window.max(1);
    let mut run = 0;
    for (i, r) in rewards.iter().enumerate() {
        run = if *r >= threshold { run + 1 } else { 0 };
        if run == window {
            return ((i + 2 - window) as u64, false);
        }
    }
    ((rewards.len() as u64).max(1), true)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn convergence_is_the_start_of_the_first_run_that_stays_near_the_reference() {
        let r_star = 100.0; // threshold 98
        let cases: [(&[f64], usize, (u64, bool)); 6] = [
            (&[99.0, 99.0, 99.0], 3, (1, false)),
            (&[50.0, 98.0, 99.0, 120.0], 3, (2, false)),
            (&[98.0, 97.9, 98.0, 98.0, 98.0], 3, (3, false)),
            (&[99.0, 99.0], 3, (2, true)),
            (&[], 10, (1, true)),
            (&[10.0, 99.0, 10.0, 99.0], 1, (2, false)),
        ];
        for (rewards, window, want) in cases {
            assert_eq!(episodes_to_convergence(rewards, r_star, window), want, "{rewards:?} window {window}");
        }
        // A negative reference: the band is 2 % of its magnitude below it.
        assert_eq!(episodes_to_convergence(&[-103.0, -101.9, -101.0], -100.0, 2), (2, false));
    }

    #[test]
    fn the_projection_finds_the_direction_of_most_spread() {
        let rows: Vec<Vec<f32>> = (0..20).map(|i| vec![i as f32, 0.1 * ((i % 3) as f32), 1.0]).collect();
        let p = project(&rows);
        let spread = |c: usize| p.iter().map(|r| r[c] * r[c]).sum::<f64>();
        assert!(spread(0) > 100.0 * spread(1), "{p:?}");
        assert!((p[19][0] - p[0][0]).abs() > 18.0);
        assert_eq!(cosine(&[1.0, 0.0], &[0.0, 0.0]), None);
        let p1: Vec<f64> = p.iter().map(|r| r[0]).collect();
        let along: Vec<f64> = (0..20).map(|i| i as f64).collect();
        assert!(pearson(&along, &p1).unwrap().abs() > 0.999, "the spread's direction is the first component");
        assert_eq!(pearson(&[1.0, 1.0], &[0.0, 1.0]), None);
        assert!((cosine(&[1.0, 1.0], &[2.0, 2.0]).unwrap() - 1.0).abs() < 1e-12);
    }
}
