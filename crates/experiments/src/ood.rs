//! Out-of-distribution detection: does the meta-learner tell a workload family it never saw
//! from new apps of the families it trained on?
//!
//! A pool of one population (the trained families) is meta-trained as `aware_meta::pool` does it;
//! an [`OodDetector`] is fitted on the pool's embeddings and on the profiles (input signature,
//! persistence) of the bundles they were read from. Then, with the meta-learner frozen, two
//! sets of apps it has never seen are probed by the fallback and embedded exactly as unseen apps
//! are at adaptation: new apps of the pool's population (drawn from another seed: in family) and
//! apps of the excluded population (out of family). The report gives the share of each set the
//! detector flags: AWARE's lifecycle keeps the fallback acting for a flagged app, so flagging
//! in-family apps costs the learned policy's gains and missing out-of-family ones lets it act on a
//! workload it knows nothing about.

use std::time::Instant;

use aware_core::Population;
use aware_lab::progress::Progress;
use aware_lab::workload::{Workload, WorkloadSpec};
use aware_meta::pool::{PoolSpec, prepare_adaptation, run_episodes, train_pool};
use aware_meta::train::MetaDriver;
use aware_meta::{MetaConfig, OodDetector, Profile};
use serde::Serialize;

use crate::ExperimentError;

#[derive(Debug, Clone)]
pub struct OodConfig {
    pub seed: u64,
    pub quick: bool,
    /// The population the meta-learner trains on; its new apps are the in-family set.
    pub trained: Population,
    /// The population excluded from meta-training: the out-of-family set.
    pub excluded: Population,
    pub pool_apps: usize,
    /// Apps in each of the two unseen sets.
    pub unseen_apps: usize,
    /// The detector's neighbours, and the quantile of the pool's own scores the embedding's and
    /// the persistence test's thresholds sit at (the input signature test's is Tukey's fence:
    /// `aware_meta::SIGNATURE_FENCE`).
    pub k: usize,
    pub quantile: f64,
    pub pool: PoolSpec,
}

impl OodConfig {
    /// About 45 s on one core: 64 microservices in the pool, 20 unseen microservices and 20
    /// serverless functions, a meta-learner of hidden 64 with a 16-d embedding. (A pool of 32
    /// set each input test's threshold at its second-highest score, which moves a
    /// lot from one pool to the next: the share of unseen in-family apps flagged swung from 0
    /// to 50 % across seeds 25–33.)
    pub fn quick(seed: u64) -> Self {
        let mut pool = PoolSpec::new(3, 4, 48, seed);
        pool.meta = MetaConfig { hidden: 64, fc: 64, embedding: 16, ..pool.meta };
        Self {
            seed,
            quick: true,
            trained: Population::Microservices,
            excluded: Population::Serverless,
            pool_apps: 64,
            unseen_apps: 20,
            k: 3,
            quantile: 0.95,
            pool,
        }
    }

    /// AWARE's meta-learner on 96 pool apps, 50 unseen apps per set.
    pub fn full(seed: u64) -> Self {
        Self { pool_apps: 96, unseen_apps: 50, quick: false, pool: PoolSpec::new(5, 10, 96, seed), ..Self::quick(seed) }
    }

    fn check(&self) -> Result<(), ExperimentError> {
        let bad = |input: &str, reason: String| Err(ExperimentError::Input { input: input.into(), reason });
        if self.trained == self.excluded {
            return bad("--excluded", format!("{} is the population the meta-learner trains on", self.excluded.name()));
        }
        if self.pool_apps <= self.k {
            return bad("pool_apps", format!("{}: the detector needs more than k = {}", self.pool_apps, self.k));
        }
        if self.unseen_apps == 0 {
            return bad("unseen_apps", "each unseen set needs at least one app".into());
        }
        if self.pool.probes == 0 {
            return bad("probes", "embeddings are read from probe episodes: at least one".into());
        }
        Ok(())
    }
}

/// One embedded app and the detector's verdict on it.
#[derive(Debug, Clone, Serialize)]
pub struct OodApp {
    pub app: String,
    /// `pool`, `in_family` or `out_of_family`.
    pub set: &'static str,
    pub population: &'static str,
    /// Mean distance of its embedding to the k nearest pool embeddings (for a pool app, the k
    /// nearest others).
    pub score: f32,
    /// Mean distance of its input signature to the k nearest pool signatures, in the pool's
    /// standard units, each compressed by a signed logarithm (`aware_meta::ood`).
    pub signature_score: f32,
    /// How far its persistence lies outside the pool's range, in the pool's standard units.
    pub persistence_score: f32,
    /// The detector's verdict: the signature or the persistence test above its threshold.
    pub flagged: bool,
    /// The verdict of the embedding's distance alone (the detector before the input tests).
    pub flagged_by_embedding: bool,
    /// The app's mean request rate and peak replica need (what embeddings follow most).
    pub mean_rps: f64,
    pub peak_replicas: u32,
    /// The embedding the detector scored.
    pub embedding: Vec<f32>,
    /// What the input tests read: per feature of the ⟨state, action, reward⟩ steps, the mean
    /// and the spread (standardised as the meta-learner reads them), and the share of steps at
    /// which it did not change.
    pub signature: Vec<f32>,
    pub persistence: Vec<f32>,
}

#[derive(Debug, Clone, Serialize)]
pub struct OodReport {
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
    pub trained_population: &'static str,
    pub excluded_population: &'static str,
    /// Always empty: the experiment runs no policy, it scores the detector's verdicts (per app
    /// in `apps`). The list is there because every experiment's JSON carries one
    /// (`../shared/INTERFACES.md`).
    pub policies: Vec<aware_lab::evaluate::PolicyRow>,
    pub pool_apps: usize,
    pub unseen_apps: usize,
    pub k: usize,
    pub quantile: f64,
    /// The embedding distance's threshold.
    pub threshold: f32,
    /// The input tests' thresholds.
    pub signature_threshold: f32,
    pub persistence_threshold: f32,
    /// Share of the excluded population's apps flagged (goal ≥ 0.9).
    pub out_of_family_flagged: f64,
    /// Share of the trained population's unseen apps flagged (goal ≤ 0.1).
    pub in_family_flagged: f64,
    /// The same two shares by the embedding's distance alone.
    pub out_of_family_flagged_by_embedding: f64,
    pub in_family_flagged_by_embedding: f64,
    /// Apps whose probes left no embedding (every output off, with a ReLU output): scored as
    /// the zero vector.
    pub zero_embeddings: usize,
    pub meta_steps: u64,
    pub training_seconds: f64,
    pub apps: Vec<OodApp>,
}

/// Probes every app of `workload` with the fallback, the meta-learner frozen, and returns their
/// embeddings (the zero vector for an app left without one), how many were zero, and the
/// profiles of the bundles they were read from.
fn embed_unseen(
    driver: &mut MetaDriver,
    workload: &Workload,
    pool: &PoolSpec,
    progress: &dyn Progress,
) -> Result<Embedded, ExperimentError> {
    let probes_only = PoolSpec { episodes: 0, ..pool.clone() };
    prepare_adaptation(driver, workload, &probes_only)?;
    // Embeddings read the fallback's probes only: the base learner has nothing to learn here.
    driver.learn = false;
    run_episodes(driver, workload, &probes_only, &aware_lab::progress::Silent, "embedding")?;
    progress.inc(pool.probes);
    let (embeddings, zero) = embeddings_of(driver, workload.apps.len(), pool.meta.embedding);
    Ok(Embedded { embeddings, zero, profiles: profiles_of(driver, workload.apps.len())? })
}

/// A set of apps' embeddings, how many of them were zero, and their bundles' profiles.
struct Embedded {
    embeddings: Vec<Vec<f32>>,
    zero: usize,
    profiles: Vec<Profile>,
}

/// The driver's embeddings of its first `apps` apps, the zero vector for an app without one
/// (or with every output off, a ReLU output's), and how many were zero.
fn embeddings_of(driver: &MetaDriver, apps: usize, width: usize) -> (Vec<Vec<f32>>, usize) {
    let mut zero = 0;
    let embeddings = (0..apps)
        .map(|i| match driver.embedding(i) {
            Some(e) if e.iter().any(|v| *v != 0.0) => e.to_vec(),
            _ => {
                zero += 1;
                vec![0.0; width]
            }
        })
        .collect();
    (embeddings, zero)
}

/// The profile of each of the driver's first `apps` apps' bundles (its probe episodes).
fn profiles_of(driver: &MetaDriver, apps: usize) -> Result<Vec<Profile>, ExperimentError> {
    Ok((0..apps).map(|i| driver.profile(i)).collect::<Result<Vec<_>, _>>()?)
}

pub fn ood(config: &OodConfig, progress: &dyn Progress) -> Result<OodReport, ExperimentError> {
    config.check()?;
    let steps = config.pool.episode_steps * (config.pool.probes + config.pool.episodes);
    let load = |apps: usize, seed: u64, population: Population| {
        Workload::load(&WorkloadSpec { apps, seed, steps, population: Some(population), ..WorkloadSpec::default() })
    };
    let pool = load(config.pool_apps, config.seed, config.trained)?;
    let unseen_seed = crate::unseen_seed(config.seed);
    let in_family = load(config.unseen_apps, unseen_seed, config.trained)?;
    let out_of_family = load(config.unseen_apps, unseen_seed.wrapping_add(1), config.excluded)?;
    progress.start(config.pool.probes * 3 + config.pool.episodes, "ood");

    let start = Instant::now();
    let (mut driver, _) = train_pool(&pool, &config.pool, &aware_lab::progress::Silent)?;
    progress.inc(config.pool.probes + config.pool.episodes);
    let training_seconds = start.elapsed().as_secs_f64();
    // The pool's embeddings and profiles as the meta-learner ends: what the detector compares
    // against.
    driver.refresh_embeddings()?;
    let (pool_embeddings, mut zero) = embeddings_of(&driver, pool.apps.len(), config.pool.meta.embedding);
    let pool_profiles = profiles_of(&driver, pool.apps.len())?;
    let detector = OodDetector::fit(pool_embeddings.clone(), config.k, config.quantile)?
        .with_inputs(&pool_profiles, config.quantile)?;
    let meta_steps = driver.meta_steps;
    progress.message("ood: embedding unseen apps");
    let inside = embed_unseen(&mut driver, &in_family, &config.pool, progress)?;
    let outside = embed_unseen(&mut driver, &out_of_family, &config.pool, progress)?;
    progress.finish();
    zero += inside.zero + outside.zero;

    let mut apps = Vec::new();
    // Per unseen set: flagged by the detector, flagged by the embedding's distance alone.
    let mut rates = [[0.0f64; 2]; 2];
    for (set, workload, embeddings, profiles) in [
        ("pool", &pool, &pool_embeddings, &pool_profiles),
        ("in_family", &in_family, &inside.embeddings, &inside.profiles),
        ("out_of_family", &out_of_family, &outside.embeddings, &outside.profiles),
    ] {
        let mut flagged = [0usize; 2];
        for (i, ((spec, e), profile)) in workload.apps.iter().zip(embeddings).zip(profiles).enumerate() {
            // A pool member is scored as the thresholds' scores are: leaving itself out.
            let verdict = match set {
                "pool" => detector.pool_verdict(i).expect("one verdict per pool member"),
                _ => detector.judge(e, Some(profile))?,
            };
            let by_embedding = verdict.distance > detector.threshold();
            flagged[0] += usize::from(verdict.out_of_distribution);
            flagged[1] += usize::from(by_embedding);
            apps.push(OodApp {
                app: spec.name.clone(),
                set,
                population: spec.population.name(),
                score: verdict.distance,
                signature_score: verdict.signature.expect("the detector has its input tests"),
                persistence_score: verdict.persistence.expect("the detector has its input tests"),
                flagged: verdict.out_of_distribution,
                flagged_by_embedding: by_embedding,
                mean_rps: spec.mean_rps,
                peak_replicas: spec.peak_replicas,
                embedding: e.clone(),
                signature: profile.signature.clone(),
                persistence: profile.persistence.clone(),
            });
        }
        let share = |n: usize| n as f64 / workload.apps.len() as f64;
        match set {
            "in_family" => rates[0] = [share(flagged[0]), share(flagged[1])],
            "out_of_family" => rates[1] = [share(flagged[0]), share(flagged[1])],
            _ => {}
        }
    }
    let (signature_threshold, persistence_threshold) =
        detector.input_thresholds().expect("fitted with the input tests above");
    Ok(OodReport {
        experiment: "ood",
        seed: config.seed,
        quick: config.quick,
        signature_weight: config.pool.train.signature_weight,
        embedding_output: config.pool.meta.output,
        embedding_centring: config.pool.meta.centring,
        trained_population: config.trained.name(),
        excluded_population: config.excluded.name(),
        policies: Vec::new(),
        pool_apps: config.pool_apps,
        unseen_apps: config.unseen_apps,
        k: config.k,
        quantile: config.quantile,
        threshold: detector.threshold(),
        signature_threshold,
        persistence_threshold,
        out_of_family_flagged: rates[1][0],
        in_family_flagged: rates[0][0],
        out_of_family_flagged_by_embedding: rates[1][1],
        in_family_flagged_by_embedding: rates[0][1],
        zero_embeddings: zero,
        meta_steps,
        training_seconds,
        apps,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use aware_agents::ddpg::DdpgConfig;

    #[test]
    fn a_population_the_pool_lacks_is_scored_against_the_pool_and_rates_add_up() {
        let mut pool = PoolSpec::new(2, 1, 12, 3);
        pool.meta = MetaConfig { hidden: 8, fc: 8, embedding: 4, ..pool.meta };
        pool.ddpg = DdpgConfig { hidden: vec![16, 16], warmup: 24, ..pool.ddpg };
        let config = OodConfig { pool_apps: 6, unseen_apps: 3, pool, ..OodConfig::quick(3) };
        let r = ood(&config, &aware_lab::progress::Silent).unwrap();
        assert_eq!(r.apps.len(), 6 + 3 + 3);
        let json = serde_json::to_value(&r).unwrap();
        assert_eq!(json["policies"], serde_json::json!([]), "the list every experiment's JSON has");
        let set = |s: &str| r.apps.iter().filter(|a| a.set == s).collect::<Vec<_>>();
        assert!(set("out_of_family").iter().all(|a| a.population == "serverless"));
        assert!(set("in_family").iter().chain(&set("pool")).all(|a| a.population == "microservices"));
        for (name, rate) in [("in_family", r.in_family_flagged), ("out_of_family", r.out_of_family_flagged)] {
            let apps = set(name);
            let flagged = apps.iter().filter(|a| a.flagged).count() as f64 / apps.len() as f64;
            assert!((flagged - rate).abs() < 1e-12, "{name}: {flagged} vs {rate}");
        }
        // Flagged means an input test scored above its threshold, for every app; the
        // embedding's own verdict is its distance above its threshold.
        assert!(r.apps.iter().all(|a| {
            a.flagged == (a.signature_score > r.signature_threshold || a.persistence_score > r.persistence_threshold)
                && a.flagged_by_embedding == (a.score > r.threshold)
                && a.score.is_finite()
        }));
        // Each threshold sits at the pool's leave-one-out scores: with 6 apps the embedding's
        // 95th percentile is the largest, so one pool app scores it and none lies above; the
        // signature test's is Tukey's far-out fence over them (the upper quartile plus 3
        // interquartile ranges, quartiles interpolated). The persistence test's is the largest,
        // or its least where higher (a step or two outside the pool's range is sampling).
        let largest = |scores: &[f32]| scores.iter().copied().fold(f32::MIN, f32::max);
        let scores: Vec<f32> = set("pool").iter().map(|a| a.score).collect();
        assert_eq!(largest(&scores), r.threshold, "{scores:?}");
        let mut signatures: Vec<f32> = set("pool").iter().map(|a| a.signature_score).collect();
        signatures.sort_by(f32::total_cmp);
        // Six scores: the lower quartile at rank 1.25, the upper at 3.75.
        let (q1, q3) = (
            signatures[1] + 0.25 * (signatures[2] - signatures[1]),
            signatures[3] + 0.75 * (signatures[4] - signatures[3]),
        );
        let fence = q3 + aware_meta::SIGNATURE_FENCE * (q3 - q1);
        assert!(
            (fence - r.signature_threshold).abs() <= 1e-5 * fence,
            "{signatures:?}: {fence} vs {}",
            r.signature_threshold
        );
        let persistence = largest(&set("pool").iter().map(|a| a.persistence_score).collect::<Vec<_>>());
        assert_eq!(persistence.max(aware_meta::PERSISTENCE_MIN_THRESHOLD), r.persistence_threshold);
        assert!(set("pool").iter().all(|a| !a.flagged_by_embedding));
        assert!(r.apps.iter().all(|a| a.persistence.len() == a.signature.len() / 2));
        assert!(r.meta_steps > 0);
        let same = OodConfig { excluded: Population::Microservices, ..config };
        assert!(matches!(same.check(), Err(ExperimentError::Input { .. })));
    }
}
