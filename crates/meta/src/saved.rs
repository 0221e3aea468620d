//! A meta-trained pool kept for the lifecycle manager (`aware train-meta --out DIR`, read by
//! `aware run --meta DIR`): the meta-learner, the shared base learner conditioned on its
//! embeddings, and the out-of-distribution detector fitted on the pool's embeddings and on the
//! profiles (input signature and persistence) of the bundles they were read from.
//!
//! `DIR/meta/` is the meta-learner's checkpoint, `DIR/agent/` the base learner's (a DDPG or
//! PPO checkpoint over [`conditioned_space`], [`BaseAgent`]), `DIR/pool.json` the detector and how the pool was
//! trained, bound to both checkpoints by the SHA-256 of their metadata: a directory whose parts
//! come from different trainings, or whose files changed, is refused, naming the file.

use std::path::{Path, PathBuf};
use std::time::Instant;

use aware_agents::ddpg::Ddpg;
use aware_agents::ppo::{Ppo, PpoActions};
use aware_agents::{AgentError, Checkpoint, METADATA, sha256};
use aware_core::Space;
use aware_lab::embed::conditioned_space;
use aware_lab::output::write_atomically;
use aware_lab::progress::Progress;
use aware_lab::workload::Workload;
use serde::{Deserialize, Serialize};

use crate::base::{BaseLearner, Resumable};
use crate::pool::{
    ACTIONS, Learner, PoolEpisode, PoolSpec, PoolTraining, Resumed, ppo_base_learner, train_pool_resumable,
    train_pool_resumable_with,
};
use crate::train::MetaDriver;
use crate::{EpisodeFilter, MetaError, MetaLearner, OodDetector, Profile, StoreEmbedder};

const META: &str = "meta";
const AGENT: &str = "agent";
const POOL: &str = aware_lab::output::KEPT_POOL;
/// The version of `pool.json` this build writes. 2: the detector's signature test may read
/// its standard scores through a logarithm (`ood::Standard`'s `compress`), which a build
/// reading format 1 would drop without a word and then score on the wrong scale; this build
/// reads both (a format-1 detector scores as it always did). 3: the reward charging what a
/// violating interval leaves idle and unserved (session 58): the base learner, the embeddings
/// of ⟨state, action, reward⟩ bundles and the detector of an older pool are on another
/// reward's scale, so it is refused with the reason, not misread.
const FORMAT: u32 = 3;
/// The oldest version of `pool.json` this build reads.
const OLDEST_FORMAT: u32 = 3;

/// `path`'s `pool.json` of `format` is one this build reads, or why not.
fn readable_format(path: &Path, format: u32) -> Result<(), MetaError> {
    if (OLDEST_FORMAT..=FORMAT).contains(&format) {
        return Ok(());
    }
    let why = if format < OLDEST_FORMAT {
        format!(
            "format {format} was trained on an earlier reward (one charging nothing while the SLO is missed): retrain it with aware train-meta"
        )
    } else {
        format!("format {format} (this build reads {OLDEST_FORMAT} to {FORMAT})")
    };
    Err(file_error(path, why))
}

/// `DIR/pool.json`.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct PoolFile {
    pub format: u32,
    /// The rule-based policy that probed every pool app; the lifecycle's embeddings are read
    /// from the episodes the same policy drove.
    pub fallback: String,
    pub embedding: usize,
    pub seed: u64,
    pub probes: u64,
    pub episodes: u64,
    pub episode_steps: u64,
    /// The base learner's algorithm (a file written before PPO could be one holds DDPG's).
    #[serde(default = "ddpg")]
    pub base_learner: Learner,
    pub pool_apps: Vec<String>,
    pub ood: OodDetector,
    pub meta_metadata_sha256: String,
    pub agent_metadata_sha256: String,
}

fn ddpg() -> Learner {
    Learner::Ddpg
}

/// The shared base learner a pool was meta-trained with.
pub enum BaseAgent {
    Ddpg(Ddpg),
    Ppo(Ppo),
}

impl BaseAgent {
    pub fn kind(&self) -> Learner {
        match self {
            BaseAgent::Ddpg(_) => Learner::Ddpg,
            BaseAgent::Ppo(_) => Learner::Ppo,
        }
    }

    /// Width of the states it reads (the state encoder's and the embedding).
    pub fn state_dim(&self) -> usize {
        match self {
            BaseAgent::Ddpg(a) => a.state_dim(),
            BaseAgent::Ppo(a) => a.state_dim(),
        }
    }

    /// The greedy action in `state`.
    pub fn greedy(&self, state: &[f32]) -> Result<Vec<f32>, AgentError> {
        match self {
            BaseAgent::Ddpg(a) => a.greedy(state),
            BaseAgent::Ppo(a) => a.greedy(state),
        }
    }

    fn save(&self, dir: &Path, space: &Space) -> Result<(), AgentError> {
        match self {
            BaseAgent::Ddpg(a) => a.save(dir, space, a.updates()),
            BaseAgent::Ppo(a) => a.save(dir, space, a.updates()),
        }
    }

    /// The checkpoint in `dir`, of whichever algorithm its metadata names (`want`: the one
    /// `pool.json` says; another is refused).
    fn load(dir: &Path, space: &Space, want: Learner, seed: u64) -> Result<Self, MetaError> {
        let found = Checkpoint::read_metadata(dir).map_err(AgentError::from)?.algorithm;
        if found != want.name() {
            return Err(file_error(
                &dir.join(METADATA),
                format!("a {found} checkpoint; pool.json says the base learner is {}", want.name()),
            ));
        }
        Ok(match want {
            Learner::Ddpg => BaseAgent::Ddpg(Ddpg::load(dir, space, ACTIONS.space().dim(), seed)?),
            Learner::Ppo => BaseAgent::Ppo(Ppo::load(dir, space, PpoActions::Continuous(ACTIONS.space().dim()), seed)?),
        })
    }
}

/// A meta-trained pool, as kept.
pub struct Trained {
    pub meta: MetaLearner,
    pub agent: BaseAgent,
    pub pool: PoolFile,
}

/// What `aware train-meta` reports.
#[derive(Debug, Clone, Serialize)]
pub struct TrainedReport {
    pub path: String,
    pub pool_apps: usize,
    pub probes: u64,
    pub episodes: u64,
    pub episode_steps: u64,
    pub embedding: usize,
    /// What the meta-learner's embedding layer outputs pass through.
    pub embedding_output: crate::EmbeddingOutput,
    /// Whether the embeddings are centred on the pool's mean output.
    pub embedding_centring: bool,
    pub base_learner: Learner,
    /// Mean reward per app of the last training episode (Σ over its intervals).
    pub final_episode_reward: f64,
    pub meta_steps: u64,
    /// The detector's embedding-distance threshold (it decides alone only without the input
    /// tests).
    pub ood_threshold: f32,
    /// The input tests' thresholds: signature, persistence (`crates/meta/src/ood.rs`).
    pub ood_signature_threshold: f32,
    pub ood_persistence_threshold: f32,
    pub seconds: f64,
}

fn metadata_sha(dir: &Path) -> Result<String, MetaError> {
    let path = dir.join(METADATA);
    std::fs::read(&path).map(|b| sha256(&b)).map_err(|e| file_error(&path, e.to_string()))
}

fn file_error(path: &Path, reason: String) -> MetaError {
    MetaError::Checkpoint(aware_agents::CheckpointError::Format { path: path.display().to_string(), reason })
}

/// What pool training left: the meta-learner, the base learner, every app's embedding, the
/// meta-learner's steps and the curve.
struct Pooled {
    meta: MetaLearner,
    agent: BaseAgent,
    embeddings: Vec<Vec<f32>>,
    /// The profile of each embedded app's bundle, in the same order.
    profiles: Vec<Profile>,
    meta_steps: u64,
    curve: Vec<PoolEpisode>,
}

impl Pooled {
    fn of<A: BaseLearner>(
        (driver, curve): (MetaDriver<A>, Vec<PoolEpisode>),
        apps: usize,
        wrap: fn(A) -> BaseAgent,
    ) -> Result<Self, MetaError> {
        let embedded: Vec<usize> = (0..apps).filter(|&i| driver.embedding(i).is_some()).collect();
        let embeddings = embedded.iter().filter_map(|&i| driver.embedding(i).map(<[f32]>::to_vec)).collect();
        let profiles = embedded.iter().map(|&i| driver.profile(i)).collect::<Result<Vec<_>, _>>()?;
        Ok(Self {
            meta_steps: driver.meta_steps,
            meta: driver.meta,
            agent: wrap(driver.agent),
            embeddings,
            profiles,
            curve,
        })
    }
}

/// Meta-trains on every app of `workload` as `spec` says, with a `base` base learner, fits the
/// detector (`k` nearest pool embeddings and profiles; the embedding's threshold at `quantile`
/// of the pool's own scores, the input tests' as `OodDetector::with_inputs` sets them) and
/// keeps all in `dir` (created if missing; one that already holds a kept pool is refused before
/// training).
pub fn train_and_keep(
    workload: &Workload,
    spec: &PoolSpec,
    base: Learner,
    detector: (usize, f64),
    dir: &Path,
    progress: &dyn Progress,
) -> Result<TrainedReport, MetaError> {
    train_and_keep_resumable(workload, spec, base, detector, dir, progress, false)
}

/// Where a pool run keeps its training state while it runs (`DIR/training/state.cbor`,
/// [`KeptTraining`]: rewritten atomically at the end of every episode after the probes).
/// Removed once the pool is kept.
pub const TRAINING: &str = "training";
const TRAINING_STATE: &str = "state.cbor";

/// What `DIR/training/state.cbor` holds, in one file so that a kill leaves both parts or
/// neither: the run's fingerprint (what it was asked to do, hashed: a resumed run must be the
/// same run) and its training state.
#[derive(Debug, Serialize, Deserialize)]
struct KeptTraining {
    run: String,
    state: KeptState,
}

/// A pool run's training state, with the base learner it trains.
#[derive(Debug, Serialize, Deserialize)]
enum KeptState {
    Ddpg(Box<PoolTraining<aware_agents::DdpgTraining>>),
    Ppo(Box<PoolTraining<aware_agents::PpoTraining>>),
}

impl KeptState {
    fn learner(&self) -> Learner {
        match self {
            KeptState::Ddpg(_) => Learner::Ddpg,
            KeptState::Ppo(_) => Learner::Ppo,
        }
    }
}

/// [`KeptTraining`] as it is written, borrowing the state (about a GB at 800 apps): the same
/// encoding, field for field and variant for variant.
#[derive(Serialize)]
struct KeptTrainingRef<'a> {
    run: &'a str,
    state: KeptStateRef<'a>,
}

#[derive(Serialize)]
enum KeptStateRef<'a> {
    Ddpg(&'a PoolTraining<aware_agents::DdpgTraining>),
    Ppo(&'a PoolTraining<aware_agents::PpoTraining>),
}

/// Writes `kept` to `path` (in `training/`, made if missing), streamed: never held whole in
/// memory beside the state.
fn write_kept(path: &Path, kept: &KeptTrainingRef) -> Result<(), MetaError> {
    let dir = path.parent().unwrap_or(Path::new("."));
    std::fs::create_dir_all(dir).map_err(|e| file_error(dir, e.to_string()))?;
    Ok(aware_lab::output::write_atomically_with(path, |w| {
        ciborium::into_writer(kept, w).map_err(|e| match e {
            ciborium::ser::Error::Io(e) => e,
            e => std::io::Error::other(e.to_string()),
        })
    })?)
}

/// The state kept at `path` (open as `file`), read as a stream (about a GB at 800 apps): as
/// this build writes it, or as builds before it wrote a DDPG run's (no learner named), which
/// is read again in that layout only when the first reading fails.
fn read_kept(path: &Path, file: std::fs::File) -> Result<KeptTraining, MetaError> {
    /// The layout before the base learner was named (a DDPG run's, the only one kept then).
    #[derive(Deserialize)]
    struct Before {
        run: String,
        state: PoolTraining<aware_agents::DdpgTraining>,
    }
    let stream = |file| std::io::BufReader::with_capacity(1 << 20, file);
    let unreadable = |e: String| file_error(path, format!("--resume: not a training state this build reads ({e})"));
    match ciborium::from_reader::<KeptTraining, _>(stream(file)) {
        Ok(kept) => Ok(kept),
        Err(now) => {
            let file = std::fs::File::open(path).map_err(|e| unreadable(e.to_string()))?;
            let before: Before = ciborium::from_reader(stream(file)).map_err(|_| unreadable(now.to_string()))?;
            Ok(KeptTraining { run: before.run, state: KeptState::Ddpg(Box::new(before.state)) })
        }
    }
}

/// The run `state` (kept at `path`) was taken from, checked and ready to go on.
fn resume_kept<A: Resumable>(
    workload: &Workload,
    spec: &PoolSpec,
    state: PoolTraining<A::Training>,
    path: &Path,
) -> Result<Resumed<A>, MetaError> {
    crate::pool::resume_pool(workload, spec, state).map_err(|e| file_error(path, format!("--resume: {e}")))
}

/// The hash a resumed run must match: every pool app and its traffic, the simulator's and the
/// profile's settings, the seeds, the spec (the meta-learner's and the base learner's settings,
/// episodes) and the detector's settings, as this build prints them.
fn run_fingerprint(workload: &Workload, spec: &PoolSpec, detector: (usize, f64)) -> String {
    let w = workload;
    let run = format!(
        "{:?}\n{:?}\n{:?}\n{:?}\n{}\n{}\n{spec:?}\n{detector:?}",
        w.apps, w.traces, w.sim, w.profile, w.seed, w.trace_seed
    );
    aware_agents::sha256(run.as_bytes())
}

/// [`train_and_keep`]; the run also keeps its training state in `DIR/training/` after every
/// episode past the probes ([`TRAINING`]), and with `resume` goes on from the state an
/// interrupted run of the same command kept there, ending as that run would have. Without
/// `resume`, a directory holding such a state is refused (it names the flag); with it, one
/// without, or kept by a run asked for anything else, is refused.
pub fn train_and_keep_resumable(
    workload: &Workload,
    spec: &PoolSpec,
    base: Learner,
    (k, quantile): (usize, f64),
    dir: &Path,
    progress: &dyn Progress,
    resume: bool,
) -> Result<TrainedReport, MetaError> {
    let apps = workload.apps.len();
    if apps <= k {
        return Err(MetaError::Config {
            field: "apps",
            reason: format!(
                "{apps} pool apps; the OOD detector compares each with its {k} nearest others: at least {} needed",
                k + 1
            ),
        });
    }
    aware_lab::output::refuse_non_directory("--out", dir)?;
    std::fs::create_dir_all(dir)
        .map_err(|e| MetaError::Lab(aware_lab::LabError::input(format!("--out {}", dir.display()), e.to_string())))?;
    // One process at a time: a second one given the same directory (a resume started twice)
    // would clear the first's half-written state and both would rewrite it and keep the pool.
    let _lock = aware_lab::output::lock_dir(dir)?;
    if dir.join(POOL).exists() {
        return Err(file_error(&dir.join(POOL), "already holds a kept pool: choose another directory".into()));
    }
    let training = dir.join(TRAINING);
    let state_path = training.join(TRAINING_STATE);
    let fingerprint = run_fingerprint(workload, spec, (k, quantile));
    // Nor beside what another run kept there (`aware train --out`'s checkpoint and outputs, a
    // lifecycle checkpoint), which the pool's own files would overwrite or mix with. A resumed
    // run may find its own `meta/` and `agent/` half written: it was stopped while keeping the
    // pool (written before `pool.json`), and writes them again.
    if !resume && training.exists() {
        return Err(file_error(
            &training,
            "holds an interrupted run's training state: run the same command with --resume, or choose another directory"
                .into(),
        ));
    }
    let mut kept = vec![aware_lab::output::LIFECYCLE_CHECKPOINT];
    kept.extend(aware_lab::output::TRAINING_OUTPUTS);
    if !resume {
        kept.extend([META, AGENT, METADATA]);
    }
    aware_lab::output::refuse_overwrite("--out", dir, &kept)?;
    let resumed = if resume {
        let file = std::fs::File::open(&state_path)
            .map_err(|e| file_error(&state_path, format!("--resume: no interrupted run's state here ({e})")))?;
        // A run killed while rewriting its state left the half-written copy (up to a GB).
        aware_lab::output::remove_stale_temporaries(&training)
            .map_err(|e| file_error(&training, format!("cannot clear what a stopped write left: {e}")))?;
        let kept = read_kept(&state_path, file)?;
        if kept.run != fingerprint {
            return Err(file_error(
                &state_path,
                "--resume: kept by a run of other apps or options; give the same ones".into(),
            ));
        }
        if kept.state.learner() != base {
            let name = kept.state.learner().name();
            return Err(file_error(
                &state_path,
                format!(
                    "--resume: kept by a run with the {} base learner; give --base-learner {name}",
                    name.to_uppercase()
                ),
            ));
        }
        Some(kept.state)
    } else {
        None
    };
    let start = Instant::now();
    let pooled = match base {
        Learner::Ddpg => {
            let resumed = match resumed {
                Some(KeptState::Ddpg(state)) => Some(resume_kept(workload, spec, *state, &state_path)?),
                _ => None,
            };
            let mut keep = |state: &PoolTraining<_>| {
                write_kept(&state_path, &KeptTrainingRef { run: &fingerprint, state: KeptStateRef::Ddpg(state) })
            };
            let trained = train_pool_resumable(workload, spec, progress, resumed, &mut keep)?;
            Pooled::of(trained, apps, BaseAgent::Ddpg)?
        }
        Learner::Ppo => {
            let resumed = match resumed {
                Some(KeptState::Ppo(state)) => Some(resume_kept(workload, spec, *state, &state_path)?),
                _ => None,
            };
            let mut keep = |state: &PoolTraining<_>| {
                write_kept(&state_path, &KeptTrainingRef { run: &fingerprint, state: KeptStateRef::Ppo(state) })
            };
            let fresh = || ppo_base_learner(spec);
            let trained = train_pool_resumable_with(fresh, workload, spec, progress, resumed, &mut keep)?;
            Pooled::of(trained, apps, BaseAgent::Ppo)?
        }
    };
    let Pooled { meta, agent, embeddings, profiles, meta_steps, curve } = pooled;
    if embeddings.len() < apps {
        return Err(MetaError::Embedding(format!(
            "could be made for {} of the {apps} pool apps after {} probe episodes",
            embeddings.len(),
            spec.probes
        )));
    }
    let ood = OodDetector::fit(embeddings, k, quantile)?.with_inputs(&profiles, quantile)?;
    let trained = Trained {
        pool: PoolFile {
            format: FORMAT,
            fallback: spec.fallback.to_string(),
            embedding: spec.meta.embedding,
            seed: spec.seed,
            probes: spec.probes,
            episodes: spec.episodes,
            episode_steps: spec.episode_steps,
            base_learner: base,
            pool_apps: workload.apps.iter().map(|a| a.name.clone()).collect(),
            ood,
            meta_metadata_sha256: String::new(),
            agent_metadata_sha256: String::new(),
        },
        meta,
        agent,
    };
    let ood_threshold = trained.pool.ood.threshold();
    let (ood_signature_threshold, ood_persistence_threshold) =
        trained.pool.ood.input_thresholds().expect("fitted with the input tests above");
    trained.save(dir)?;
    // The pool is kept: the state it could have been resumed from is no longer needed.
    if training.exists() {
        std::fs::remove_dir_all(&training).map_err(|e| file_error(&training, format!("cannot remove: {e}")))?;
    }
    Ok(TrainedReport {
        path: dir.display().to_string(),
        pool_apps: apps,
        probes: spec.probes,
        episodes: spec.episodes,
        episode_steps: spec.episode_steps,
        embedding: spec.meta.embedding,
        embedding_output: spec.meta.output,
        embedding_centring: spec.meta.centring,
        base_learner: base,
        final_episode_reward: curve.last().map_or(f64::NAN, |e| e.mean_reward),
        meta_steps,
        ood_threshold,
        ood_signature_threshold,
        ood_persistence_threshold,
        seconds: start.elapsed().as_secs_f64(),
    })
}

impl Trained {
    /// Writes the three parts into `dir` (created if missing), `pool.json` last.
    pub fn save(&self, dir: &Path) -> Result<(), MetaError> {
        std::fs::create_dir_all(dir).map_err(|e| file_error(dir, e.to_string()))?;
        let (meta_dir, agent_dir) = (dir.join(META), dir.join(AGENT));
        self.meta.save(&meta_dir)?;
        self.agent.save(&agent_dir, &conditioned_space(self.pool.embedding))?;
        let pool = PoolFile {
            meta_metadata_sha256: metadata_sha(&meta_dir)?,
            agent_metadata_sha256: metadata_sha(&agent_dir)?,
            ..self.pool.clone()
        };
        let text = serde_json::to_string_pretty(&pool).expect("serialisable");
        write_atomically(&dir.join(POOL), &text).map_err(|e| file_error(&dir.join(POOL), e.to_string()))
    }

    /// The base learner `dir` keeps (DDPG or PPO), read from its `pool.json` alone, for a
    /// caller that takes up whichever it holds.
    pub fn kept_learner(dir: &Path) -> Result<Learner, MetaError> {
        let path: PathBuf = dir.join(POOL);
        let text = std::fs::read(&path).map_err(|e| file_error(&path, e.to_string()))?;
        let pool: PoolFile = serde_json::from_slice(&text).map_err(|e| file_error(&path, e.to_string()))?;
        readable_format(&path, pool.format)?;
        Ok(pool.base_learner)
    }

    /// Reads `dir` back, verifying every file's checksum and that the parts belong together;
    /// `seed` seeds the agent's exploration and the meta-learner's dropout from here on.
    pub fn load(dir: &Path, seed: u64) -> Result<Self, MetaError> {
        let path: PathBuf = dir.join(POOL);
        let text = std::fs::read(&path).map_err(|e| file_error(&path, e.to_string()))?;
        let pool: PoolFile = serde_json::from_slice(&text).map_err(|e| file_error(&path, e.to_string()))?;
        readable_format(&path, pool.format)?;
        // What no `train-meta` writes: a new app's embedding is read from its first `probes`
        // episodes, and the detector compares it with a pool of apps.
        if pool.probes == 0 {
            return Err(file_error(&path, "probes: 0 (an embedding is read from at least one probe episode)".into()));
        }
        if pool.episode_steps == 0 {
            return Err(file_error(&path, "episode_steps: 0".into()));
        }
        if pool.pool_apps.len() != pool.ood.pool_size() {
            return Err(file_error(
                &path,
                format!(
                    "pool_apps: {} names for the detector's {} pool embeddings",
                    pool.pool_apps.len(),
                    pool.ood.pool_size()
                ),
            ));
        }
        let (meta_dir, agent_dir) = (dir.join(META), dir.join(AGENT));
        for (part, want) in [(&meta_dir, &pool.meta_metadata_sha256), (&agent_dir, &pool.agent_metadata_sha256)] {
            if &metadata_sha(part)? != want {
                return Err(file_error(
                    &path,
                    format!("written beside another checkpoint than {}", part.join(METADATA).display()),
                ));
            }
        }
        let meta = MetaLearner::load(&meta_dir, seed)?;
        pool.ood.check(pool.embedding, meta.config().features).map_err(|e| file_error(&path, e.to_string()))?;
        if meta.config().embedding != pool.embedding {
            return Err(file_error(
                &path,
                format!("embedding: {} here, {} in the meta-learner", pool.embedding, meta.config().embedding),
            ));
        }
        let agent = BaseAgent::load(&agent_dir, &conditioned_space(pool.embedding), pool.base_learner, seed)?;
        Ok(Self { meta, agent, pool })
    }

    /// The base learner and the embedder the lifecycle manager runs with: an app's embedding is
    /// read from the episodes the pool's fallback drove under the store agent
    /// `{agent_prefix}{app}` (the lifecycle manager's), once there are as many as the pool's
    /// probes, and judged by the pool's detector.
    pub fn into_lifecycle(self, agent_prefix: &str) -> (BaseAgent, StoreEmbedder) {
        let filter = EpisodeFilter {
            agent_prefix: agent_prefix.to_string(),
            policy: self.pool.fallback.clone(),
            min_episodes: self.pool.probes.max(1) as usize,
            episode_steps: self.pool.episode_steps.min(u32::MAX as u64) as u32,
        };
        (self.agent, StoreEmbedder::filtered(self.meta, Some(self.pool.ood), filter))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::MetaConfig;
    use aware_agents::ddpg::{Ddpg, DdpgConfig};
    use aware_env::STATE_DIM;
    use aware_lab::workload::WorkloadSpec;

    fn small(seed: u64) -> (Workload, PoolSpec) {
        let workload = Workload::load(&WorkloadSpec { apps: 5, seed, steps: 12, ..WorkloadSpec::default() }).unwrap();
        let mut spec = PoolSpec::new(2, 1, 12, seed);
        spec.meta = MetaConfig { hidden: 8, fc: 8, embedding: 4, ..spec.meta };
        spec.ddpg = DdpgConfig { hidden: vec![16, 16], warmup: 16, ..spec.ddpg };
        (workload, spec)
    }

    /// `train-meta --resume`: a run that kept its training state after an episode (as one
    /// stopped there leaves it) ends, resumed, with the pool the uninterrupted run keeps, for
    /// either base learner; the state is removed once the pool is kept; resuming nothing,
    /// another run's state, or running anew over a kept state is refused.
    #[test]
    fn an_interrupted_pool_run_resumes_to_the_pool_the_uninterrupted_one_keeps() {
        let (workload, mut spec) = small(3);
        spec.episodes = 3;
        spec.ppo = aware_agents::ppo::PpoConfig { hidden: vec![16, 16], ..spec.ppo };
        let ddpg = || Ddpg::new(STATE_DIM + spec.meta.embedding, ACTIONS.space().dim(), spec.ddpg.clone(), spec.seed);
        resumes_to_the_same_pool(&workload, &spec, Learner::Ddpg, ddpg, |s| KeptState::Ddpg(Box::new(s)));
        let ppo = || ppo_base_learner(&spec);
        resumes_to_the_same_pool(&workload, &spec, Learner::Ppo, ppo, |s| KeptState::Ppo(Box::new(s)));
    }

    fn resumes_to_the_same_pool<A: Resumable>(
        workload: &Workload,
        spec: &PoolSpec,
        base: Learner,
        fresh: impl Fn() -> A,
        wrap: fn(PoolTraining<A::Training>) -> KeptState,
    ) {
        let dir = tempfile::tempdir().unwrap();
        let silent = &aware_lab::progress::Silent;
        let detector = (2, 0.9);
        let (straight, resumed) = (dir.path().join("straight"), dir.path().join("resumed"));
        train_and_keep(workload, spec, base, detector, &straight, silent).unwrap();
        assert!(!straight.join(TRAINING).exists(), "removed once the pool is kept");
        // What a run stopped after its third episode (the first training one) leaves, or one
        // stopped while keeping the pool (its `meta/` half written) after that.
        let mut states = Vec::new();
        train_pool_resumable_with(&fresh, workload, spec, silent, None, &mut |s| {
            states.push(s.clone());
            Ok(())
        })
        .unwrap();
        // What a run writes (borrowing its state) reads back as the state it kept.
        let written = dir.path().join("written").join(TRAINING_STATE);
        let wrote = match wrap(states[1].clone()) {
            KeptState::Ddpg(s) => write_kept(&written, &KeptTrainingRef { run: "r", state: KeptStateRef::Ddpg(&s) }),
            KeptState::Ppo(s) => write_kept(&written, &KeptTrainingRef { run: "r", state: KeptStateRef::Ppo(&s) }),
        };
        wrote.unwrap();
        let read: KeptTraining = ciborium::from_reader(std::fs::read(&written).unwrap().as_slice()).unwrap();
        let same = match (read.state, wrap(states[1].clone())) {
            (KeptState::Ddpg(a), KeptState::Ddpg(b)) => a == b,
            (KeptState::Ppo(a), KeptState::Ppo(b)) => a == b,
            _ => false,
        };
        assert!(same && read.run == "r", "{base:?}");
        let training = resumed.join(TRAINING);
        let write_state = |dir: &Path, run: String, state: KeptState| {
            std::fs::create_dir_all(dir.join(TRAINING)).unwrap();
            let mut bytes = Vec::new();
            ciborium::into_writer(&KeptTraining { run, state }, &mut bytes).unwrap();
            std::fs::write(dir.join(TRAINING).join(TRAINING_STATE), bytes).unwrap();
        };
        write_state(&resumed, run_fingerprint(workload, spec, detector), wrap(states[1].clone()));
        std::fs::create_dir_all(resumed.join(META)).unwrap();
        std::fs::write(resumed.join(META).join("partial"), "x").unwrap();
        std::fs::write(training.join(".aware-half.tmp"), "half a state").unwrap();
        let again = |resume| train_and_keep_resumable(workload, spec, base, detector, &resumed, silent, resume);
        let e = again(false).err().unwrap().to_string();
        assert!(e.contains("interrupted run's training state: run the same command with --resume"), "{e}");
        // A second process resuming while one runs is refused before it touches anything.
        #[cfg(unix)]
        {
            let running = aware_lab::output::lock_dir(&resumed).unwrap();
            let e = again(true).err().unwrap().to_string();
            assert!(e.contains("another process is writing into this directory"), "{e}");
            assert!(training.join(".aware-half.tmp").exists(), "the running one's write is left alone");
            drop(running);
        }
        again(true).unwrap();
        assert!(!training.exists());
        let pool = |d: &Path| {
            let p: serde_json::Value = serde_json::from_slice(&std::fs::read(d.join(POOL)).unwrap()).unwrap();
            (p["ood"].clone(), p["pool_apps"].clone(), p["base_learner"].clone())
        };
        assert_eq!(pool(&resumed), pool(&straight));
        let files = |d: &Path| {
            let mut found = Vec::new();
            for part in [META, AGENT] {
                for entry in std::fs::read_dir(d.join(part)).unwrap() {
                    let path = entry.unwrap().path();
                    if path.extension().is_some_and(|e| e == "safetensors") {
                        found.push((path.file_name().unwrap().to_owned(), std::fs::read(&path).unwrap()));
                    }
                }
            }
            found.sort();
            found
        };
        let (ours, theirs) = (files(&resumed), files(&straight));
        assert!(ours.len() >= 2, "the meta-learner and the base learner's networks: {}", ours.len());
        assert!(ours == theirs, "every weight file equals the uninterrupted run's ({base:?})");
        // Nothing to resume; a state kept by a run of other options, or of the other learner.
        let e = again(true).err().unwrap().to_string();
        assert!(e.contains("already holds a kept pool"), "{e}");
        let other = dir.path().join("other");
        let e =
            train_and_keep_resumable(workload, spec, base, detector, &other, silent, true).err().unwrap().to_string();
        assert!(e.contains("--resume: no interrupted run's state here"), "{e}");
        write_state(&other, run_fingerprint(workload, spec, (3, 0.9)), wrap(states[0].clone()));
        let e =
            train_and_keep_resumable(workload, spec, base, detector, &other, silent, true).err().unwrap().to_string();
        assert!(e.contains("kept by a run of other apps or options"), "{e}");
        write_state(&other, run_fingerprint(workload, spec, detector), wrap(states[0].clone()));
        let (name, wrong) = match base {
            Learner::Ddpg => ("DDPG", Learner::Ppo),
            Learner::Ppo => ("PPO", Learner::Ddpg),
        };
        let e =
            train_and_keep_resumable(workload, spec, wrong, detector, &other, silent, true).err().unwrap().to_string();
        assert!(e.contains(&format!("kept by a run with the {name} base learner; give --base-learner")), "{e}");
    }

    /// A DDPG run's state in the layout builds before this one wrote (no learner named) is
    /// taken up too, and ends with the uninterrupted run's pool; a file that is neither layout
    /// is refused, naming it.
    #[test]
    fn a_state_kept_before_the_learner_was_named_resumes() {
        let (workload, mut spec) = small(3);
        spec.episodes = 2;
        let dir = tempfile::tempdir().unwrap();
        let silent = &aware_lab::progress::Silent;
        let detector = (2, 0.9);
        let straight = dir.path().join("straight");
        train_and_keep(&workload, &spec, Learner::Ddpg, detector, &straight, silent).unwrap();
        let mut states = Vec::new();
        train_pool_resumable(&workload, &spec, silent, None, &mut |s| {
            states.push(s.clone());
            Ok(())
        })
        .unwrap();
        #[derive(Serialize)]
        struct Before<'a> {
            run: String,
            state: &'a PoolTraining,
        }
        let old = dir.path().join("old");
        std::fs::create_dir_all(old.join(TRAINING)).unwrap();
        let mut bytes = Vec::new();
        ciborium::into_writer(
            &Before { run: run_fingerprint(&workload, &spec, detector), state: &states[0] },
            &mut bytes,
        )
        .unwrap();
        std::fs::write(old.join(TRAINING).join(TRAINING_STATE), &bytes).unwrap();
        train_and_keep_resumable(&workload, &spec, Learner::Ddpg, detector, &old, silent, true).unwrap();
        let pool =
            |d: &Path| -> serde_json::Value { serde_json::from_slice(&std::fs::read(d.join(POOL)).unwrap()).unwrap() };
        assert_eq!(pool(&old)["ood"], pool(&straight)["ood"]);
        let junk = dir.path().join("junk");
        std::fs::create_dir_all(junk.join(TRAINING)).unwrap();
        std::fs::write(junk.join(TRAINING).join(TRAINING_STATE), &bytes[..bytes.len() / 2]).unwrap();
        let e = train_and_keep_resumable(&workload, &spec, Learner::Ddpg, detector, &junk, silent, true)
            .err()
            .unwrap()
            .to_string();
        assert!(e.contains("state.cbor") && e.contains("not a training state this build reads"), "{e}");
    }

    #[test]
    fn a_kept_pool_reads_back_whole_and_refuses_mixed_or_changed_parts() {
        let dir = tempfile::tempdir().unwrap();
        let (workload, spec) = small(2);
        let (a, b) = (dir.path().join("a"), dir.path().join("b"));
        let report =
            train_and_keep(&workload, &spec, Learner::Ddpg, (2, 0.9), &a, &aware_lab::progress::Silent).unwrap();
        assert_eq!((report.pool_apps, report.embedding), (5, 4));
        let trained = Trained::load(&a, 7).unwrap();
        assert_eq!(trained.pool.pool_apps.len(), 5);
        assert_eq!(trained.pool.fallback, "mpa");
        assert_eq!(trained.pool.ood.threshold(), report.ood_threshold);
        let state = vec![0.3; aware_env::STATE_DIM + 4];
        let again = Trained::load(&a, 8).unwrap();
        assert_eq!(trained.agent.greedy(&state).unwrap(), again.agent.greedy(&state).unwrap());
        let (agent, embedder) = trained.into_lifecycle("aware@");
        assert_eq!(
            (agent.state_dim(), aware_lab::embed::WorkloadEmbedder::width(&embedder)),
            (aware_env::STATE_DIM + 4, 4)
        );

        // Another training's meta-learner beside this pool file: refused, naming the file.
        train_and_keep(
            &workload,
            &PoolSpec { seed: 3, ..spec.clone() },
            Learner::Ddpg,
            (2, 0.9),
            &b,
            &aware_lab::progress::Silent,
        )
        .unwrap();
        std::fs::remove_dir_all(a.join(META)).unwrap();
        copy_dir(&b.join(META), &a.join(META));
        let err = Trained::load(&a, 7).err().unwrap().to_string();
        assert!(err.contains("pool.json") && err.contains("written beside another checkpoint"), "{err}");

        // A changed weight file: its checksum says so.
        let bytes = std::fs::read(b.join(AGENT).join("actor.safetensors")).unwrap();
        let mut changed = bytes.clone();
        let last = changed.len() - 1;
        changed[last] ^= 1;
        std::fs::write(b.join(AGENT).join("actor.safetensors"), &changed).unwrap();
        let err = Trained::load(&b, 7).err().unwrap().to_string();
        assert!(err.contains("actor.safetensors"), "{err}");

        // A pool file no `train-meta` wrote (hand-edited): refused naming the field.
        let text = std::fs::read_to_string(b.join(POOL)).unwrap();
        type Edit = fn(&mut serde_json::Value);
        let edits: [(Edit, &str); 4] = [
            (|j| j["probes"] = 0.into(), "probes: 0"),
            (|j| j["pool_apps"] = serde_json::json!([]), "pool_apps: 0 names"),
            (|j| j["ood"]["threshold"] = (-1.0).into(), "threshold -1 is not a finite distance"),
            (|j| j["ood"]["inputs"]["signature_threshold"] = (-1.0).into(), "input test's threshold"),
        ];
        for (edit, want) in edits {
            let mut json: serde_json::Value = serde_json::from_str(&text).unwrap();
            edit(&mut json);
            std::fs::write(b.join(POOL), json.to_string()).unwrap();
            let err = Trained::load(&b, 7).err().unwrap().to_string();
            assert!(err.contains("pool.json") && err.contains(want), "{want}: {err}");
        }
        // A detector no fitting could have made.
        let mut json: serde_json::Value = serde_json::from_str(&text).unwrap();
        json["ood"]["pool"] = serde_json::json!([]);
        std::fs::write(b.join(POOL), json.to_string()).unwrap();
        let err = Trained::load(&b, 7).err().unwrap().to_string();
        assert!(err.contains("pool.json") && err.contains("0 pool embeddings"), "{err}");
        // A directory that already holds a pool is not trained into; too small a pool is refused.
        let err =
            train_and_keep(&workload, &spec, Learner::Ddpg, (2, 0.9), &b, &aware_lab::progress::Silent).err().unwrap();
        assert!(err.to_string().contains("already holds a kept pool"), "{err}");
        // Nor one holding another run's checkpoint or outputs: refused before training, untouched.
        let trained_there = dir.path().join("trained");
        std::fs::create_dir(&trained_there).unwrap();
        std::fs::write(trained_there.join(METADATA), "{}").unwrap();
        let err =
            train_and_keep(&workload, &spec, Learner::Ddpg, (2, 0.9), &trained_there, &aware_lab::progress::Silent)
                .err()
                .unwrap()
                .to_string();
        assert!(err.contains("--out") && err.contains(&format!("already holds {METADATA}")), "{err}");
        let left: Vec<_> = std::fs::read_dir(&trained_there).unwrap().map(|e| e.unwrap().file_name()).collect();
        assert_eq!(left, [METADATA]);
        let c = dir.path().join("c");
        let err = train_and_keep(&workload, &spec, Learner::Ddpg, (5, 0.9), &c, &aware_lab::progress::Silent);
        assert!(err.err().unwrap().to_string().contains("at least 6 needed"));
        // No pool file, or not JSON: one line naming it.
        let err = Trained::load(dir.path(), 7).err().unwrap().to_string();
        assert!(err.contains("pool.json"), "{err}");
        std::fs::write(b.join(POOL), "{").unwrap();
        let err = Trained::load(&b, 7).err().unwrap().to_string();
        assert!(err.contains("pool.json") && !err.contains('\n'), "{err}");
    }

    /// A pool meta-trained with a PPO base learner keeps it and reads it back acting as it did;
    /// a `pool.json` that names another algorithm than the agent's checkpoint is refused, and
    /// one written before the field existed reads as DDPG's.
    #[test]
    fn a_pool_keeps_a_ppo_base_learner() {
        let dir = tempfile::tempdir().unwrap();
        let (workload, spec) = small(4);
        let a = dir.path().join("a");
        let report =
            train_and_keep(&workload, &spec, Learner::Ppo, (2, 0.9), &a, &aware_lab::progress::Silent).unwrap();
        assert_eq!(report.base_learner, Learner::Ppo);
        let (one, two) = (Trained::load(&a, 1).unwrap(), Trained::load(&a, 2).unwrap());
        assert_eq!((one.agent.kind(), one.pool.base_learner), (Learner::Ppo, Learner::Ppo));
        let state = vec![0.3; aware_env::STATE_DIM + 4];
        assert_eq!(one.agent.greedy(&state).unwrap(), two.agent.greedy(&state).unwrap());
        // What is kept is the base learner in memory: another PPO policy saved in its place
        // reads back acting as that one does.
        let other = crate::pool::ppo_base_learner(&PoolSpec { seed: 99, ..spec.clone() });
        let greedy = other.greedy(&state).unwrap();
        assert_ne!(greedy, one.agent.greedy(&state).unwrap());
        let replaced = Trained { agent: BaseAgent::Ppo(other), ..one };
        let b = dir.path().join("b");
        replaced.save(&b).unwrap();
        assert_eq!(Trained::load(&b, 3).unwrap().agent.greedy(&state).unwrap(), greedy);
        let text = std::fs::read_to_string(a.join(POOL)).unwrap();
        let mut json: serde_json::Value = serde_json::from_str(&text).unwrap();
        json.as_object_mut().unwrap().remove("base_learner");
        std::fs::write(a.join(POOL), json.to_string()).unwrap();
        let err = Trained::load(&a, 1).err().unwrap().to_string();
        assert!(err.contains("a ppo checkpoint") && err.contains("says the base learner is ddpg"), "{err}");
    }

    fn copy_dir(from: &Path, to: &Path) {
        std::fs::create_dir_all(to).unwrap();
        for entry in std::fs::read_dir(from).unwrap() {
            let entry = entry.unwrap();
            std::fs::copy(entry.path(), to.join(entry.file_name())).unwrap();
        }
    }
}
