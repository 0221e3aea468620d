//! AWARE's meta-learner: a few trajectories of an ⟨application, environment⟩ pair in, a workload
//! embedding out, so that one shared base learner conditioned on it adapts to a new application
//! in a few episodes instead of being retrained for each.
//!
//! - [`Bundle`]: the M trajectories read (⟨state, action, reward⟩ per step, time-major, padded
//!   and masked);
//! - [`MetaNet`]: the network (bidirectional 2-layer GRU over time, hidden 256, forward and
//!   backward final states averaged over the bundle, FC 256 → FC 64 with ReLU);
//! - [`MetaLearner`]: the network with its optimiser: embeddings for inference and one
//!   meta-training step through any loss computed from the embeddings (the base learner's).
//!   An embedding is the network's output less the pool's mean output (a training pass's:
//!   less its batch's; [`MetaConfig::centring`]), so that what every app shares cannot crowd
//!   out what tells them apart;
//! - [`select`] and [`EmbeddingCache`]: the pair's chosen stored episodes (top-M by total
//!   reward, or FLASH's best and worst halves) and its embedding, recomputed only when they or
//!   the meta-learner change;
//! - [`OodDetector`]: flags a workload unlike any the pool held: its input signature or its
//!   persistence ([`Profile`]) farther from the pool's than the pool's members lie from each
//!   other (the embedding's own distance is reported beside them);
//! - [`service::MetaService`]: FLASH's interface for callers outside the lifecycle: register a
//!   base learner for a task, insert its trajectories (or supervised samples), get its
//!   embedding, turn meta-model updates on or off;
//! - [`mod@bench`]: `aware bench meta`.

pub mod base;
pub mod bench;
mod bundle;
mod checkpoint;
pub mod forecast;
mod fused;
mod net;
mod ood;
mod panel;
pub mod pool;
mod rows;
pub mod saved;
mod select;
pub mod service;
mod signature;
pub mod train;

pub use base::BaseLearner;
pub use bundle::{Bundle, step_features};
pub use net::{Batch, BiGruLayer, MetaNet};
pub use ood::{OodDetector, PERSISTENCE_MIN_THRESHOLD, Profile, SIGNATURE_FENCE, Verdict};
pub use select::{EmbeddingCache, EpisodeFilter, StoreEmbedder, select};

use burn::tensor::Device;
use serde::{Deserialize, Serialize};

/// Which stored episodes make a bundle.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Selection {
    /// The M best by total reward (AWARE).
    #[default]
    Best,
    /// The M/2 best and the M/2 worst (FLASH).
    BestAndWorst,
}

/// What the embedding layer's outputs pass through.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum EmbeddingOutput {
    /// As they are: signed embeddings, whose directions can oppose. The default: with a ReLU
    /// every embedding lies in the positive orthant, so any two share most of their direction
    /// and their cosine similarity says little (`aware experiment fig6`, see the README).
    Linear,
    /// Through a ReLU, non-negative. Meta-learners saved before the choice existed were
    /// trained so and read back so.
    Relu,
}

impl EmbeddingOutput {
    /// What a saved configuration without the field was trained with.
    fn saved_before_the_choice() -> Self {
        EmbeddingOutput::Relu
    }

    pub(crate) fn apply(self, v: f32) -> f32 {
        match self {
            EmbeddingOutput::Linear => v,
            EmbeddingOutput::Relu => v.max(0.0),
        }
    }

    /// The derivative of [`EmbeddingOutput::apply`] at the pre-activation `a`, as 0 or 1.
    pub(crate) fn passes(self, a: f32) -> bool {
        match self {
            EmbeddingOutput::Linear => true,
            EmbeddingOutput::Relu => a > 0.0,
        }
    }
}

/// The meta-learner's shape and training settings.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct MetaConfig {
    /// F: the width of one step, state ⊕ action ⊕ reward.
    pub features: usize,
    /// GRU hidden size per direction.
    pub hidden: usize,
    /// Stacked bidirectional GRU layers.
    pub layers: usize,
    /// Width of the dense layer between the GRU and the embedding.
    pub fc: usize,
    /// Embedding size.
    pub embedding: usize,
    /// What the embedding layer's outputs pass through (linear unless read from a meta-learner
    /// saved before the choice existed).
    #[serde(default = "EmbeddingOutput::saved_before_the_choice")]
    pub output: EmbeddingOutput,
    /// Dropout between GRU layers and after the dense layer, while training only.
    pub dropout: f64,
    /// M: trajectories per bundle.
    pub trajectories: usize,
    /// Fewer trajectories than this and no embedding is made (the lifecycle falls back).
    pub min_trajectories: usize,
    pub selection: Selection,
    /// Adam's learning rate for the meta-learner's parameters.
    pub learning_rate: f64,
    /// Per-feature standardisation of the steps read, fitted on the training pool's
    /// trajectories ([`MetaLearner::fit_normaliser`]); none: steps are read as they are.
    #[serde(default)]
    pub normaliser: Option<Normaliser>,
    /// Whether the embeddings are centred on the pool: an embedding is the embedding layer's
    /// output less the mean output of the apps it is trained or compared with. A training pass
    /// over several bundles subtracts their own mean (and its gradient loses its batch mean,
    /// [`MetaLearner::step`]); every other embedding subtracts [`MetaConfig::centre`]. Off for
    /// a meta-learner saved before the choice existed.
    #[serde(default)]
    pub centring: bool,
    /// The pool's mean output, subtracted from every embedding outside batch-centred training
    /// passes: set to the whole pool's by [`MetaLearner::centre_on`] (meta-training does at
    /// every refresh of the pool's embeddings) and moved towards each training batch's mean
    /// with momentum [`CENTRE_MOMENTUM`] in between; none: nothing is subtracted. Cleared when
    /// the input standardisation is fitted.
    #[serde(default)]
    pub centre: Option<Vec<f32>>,
}

/// `(x − mean) / scale` per step feature, so every feature moves the GRU by comparable amounts:
/// the encoded state's features sit in [0, 1] and apps under the same fallback differ in them
/// by hundredths, which unscaled inputs leave invisible next to the network's biases.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Normaliser {
    pub mean: Vec<f32>,
    pub scale: Vec<f32>,
}

impl Normaliser {
    /// The smallest scale a feature gets: a feature (nearly) constant over the pool is centred,
    /// not blown up from its noise.
    pub const MIN_SCALE: f32 = 0.01;

    /// Mean and standard deviation of every feature over the real (unpadded) steps of `bundles`.
    pub fn fit(bundles: &[&Bundle]) -> Result<Self, MetaError> {
        let f = bundles.first().ok_or(MetaError::EmptyBundle)?.features();
        let mut moments = bundle::Moments::new(f);
        for b in bundles {
            if b.features() != f {
                return Err(MetaError::Features { got: b.features(), expected: f });
            }
            moments.add(b);
        }
        let (mean, sd) = moments.mean_and_sd();
        let scale = sd.into_iter().map(|v| (v as f32).max(Self::MIN_SCALE)).collect();
        Ok(Self { mean: mean.into_iter().map(|m| m as f32).collect(), scale })
    }

    fn check(&self, features: usize) -> Result<(), MetaError> {
        let bad = |reason: String| Err(MetaError::Config { field: "normaliser", reason });
        if self.mean.len() != features || self.scale.len() != features {
            return bad(format!("{} means and {} scales for {features} features", self.mean.len(), self.scale.len()));
        }
        if !self.mean.iter().all(|m| m.is_finite()) || !self.scale.iter().all(|s| s.is_finite() && *s > 0.0) {
            return bad("means must be finite and scales positive".into());
        }
        Ok(())
    }
}

impl MetaConfig {
    /// AWARE's meta-learner: 2 × 256 bidirectional GRU, FC 256 → 64, the 20 best trajectories.
    pub fn aware(features: usize) -> Self {
        Self {
            features,
            hidden: 256,
            layers: 2,
            fc: 256,
            embedding: 64,
            output: EmbeddingOutput::Linear,
            dropout: 0.0,
            trajectories: 20,
            min_trajectories: 3,
            selection: Selection::Best,
            learning_rate: 1e-3,
            normaliser: None,
            centring: true,
            centre: None,
        }
    }

    /// FLASH's variant: a 32-d embedding, dropout 0.05, the M/2 best and M/2 worst trajectories.
    pub fn flash(features: usize) -> Self {
        Self { embedding: 32, dropout: 0.05, selection: Selection::BestAndWorst, ..Self::aware(features) }
    }

    /// Refuses sizes no network can have, naming the field.
    pub fn check(&self) -> Result<(), MetaError> {
        let positive = [
            ("features", self.features),
            ("hidden", self.hidden),
            ("layers", self.layers),
            ("fc", self.fc),
            ("embedding", self.embedding),
            ("trajectories", self.trajectories),
            ("min_trajectories", self.min_trajectories),
        ];
        for (field, v) in positive {
            if v == 0 {
                return Err(MetaError::Config { field, reason: "must be at least 1".into() });
            }
        }
        if self.min_trajectories > self.trajectories {
            return Err(MetaError::Config {
                field: "min_trajectories",
                reason: format!("{} exceeds trajectories ({})", self.min_trajectories, self.trajectories),
            });
        }
        if !(0.0..1.0).contains(&self.dropout) {
            return Err(MetaError::Config { field: "dropout", reason: format!("{} is not in [0, 1)", self.dropout) });
        }
        if !(self.learning_rate.is_finite() && self.learning_rate > 0.0) {
            return Err(MetaError::Config {
                field: "learning_rate",
                reason: format!("{} is not a positive number", self.learning_rate),
            });
        }
        if let Some(n) = &self.normaliser {
            n.check(self.features)?;
        }
        if let Some(c) = &self.centre {
            let bad = |reason: String| Err(MetaError::Config { field: "centre", reason });
            if c.len() != self.embedding {
                return bad(format!("{} values for an embedding of {}", c.len(), self.embedding));
            }
            if let Some(v) = c.iter().find(|v| !v.is_finite()) {
                return bad(format!("holds {v}"));
            }
        }
        Ok(())
    }
}

#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum MetaError {
    #[error("meta-learner {field}: {reason}")]
    Config { field: &'static str, reason: String },
    #[error("the bundle holds no trajectory")]
    EmptyBundle,
    #[error("trajectory {trajectory} has no step")]
    EmptyTrajectory { trajectory: usize },
    #[error("trajectory {trajectory}, step {step}: {reason}")]
    BadStep { trajectory: usize, step: usize, reason: String },
    #[error("{have} trajectories, the meta-learner needs at least {need}")]
    TooFewTrajectories { have: usize, need: usize },
    #[error("steps have {got} features, the meta-learner reads {expected}")]
    Features { got: usize, expected: usize },
    #[error("the meta-training loss is {0}")]
    Loss(f32),
    #[error("the loss's gradient with respect to the embeddings {0}")]
    Gradient(String),
    #[error("the embedding {0}")]
    Embedding(String),
    #[error("episode {id}: {reason}")]
    Episode { id: aware_store::EpisodeId, reason: String },
    #[error("task {task}: {reason}")]
    Task { task: String, reason: String },
    #[error(transparent)]
    Store(#[from] aware_store::StoreError),
    #[error(transparent)]
    Lab(#[from] aware_lab::LabError),
    #[error(transparent)]
    Checkpoint(#[from] aware_agents::CheckpointError),
    #[error(transparent)]
    Agent(#[from] aware_agents::AgentError),
}

/// The meta-learner: its parameters (one flat vector, laid out as [`MetaNet::from_params`]
/// reads them), Adam, and the dropout generator.
///
/// Embedding and training run the fused pass (`fused`), which equals [`MetaNet`] on burn (the
/// readable reference, tested against each other) at a fraction of the cost.
pub struct MetaLearner {
    config: MetaConfig,
    layout: fused::Layout,
    params: Vec<f32>,
    adam: fused::Adam,
    rng: rand_pcg::Pcg64Mcg,
    updates: u64,
    /// Meta-model updates are switched off at adaptation time (FLASH's toggle).
    learning: bool,
    /// Changes, to a value no other learner of the process has had, whenever what it embeds a
    /// bundle as may change: parameters, input standardisation or centre
    /// ([`MetaLearner::revision`]).
    revision: u64,
}

/// Everything a meta-learner's training goes on from, bit for bit ([`MetaLearner::training_state`],
/// [`MetaLearner::resume`]): its config (the input standardisation and centre with it), its
/// parameters, Adam's moments, the dropout generator, its step count and whether it learns.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct MetaTraining {
    config: MetaConfig,
    params: Vec<f32>,
    adam: fused::Adam,
    rng: rand_pcg::Pcg64Mcg,
    updates: u64,
    learning: bool,
}

/// The next [`MetaLearner::revision`]: one counter for the process, so a learner built or
/// loaded later never takes a revision another had.
fn next_revision() -> u64 {
    static REVISIONS: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);
    REVISIONS.fetch_add(1, std::sync::atomic::Ordering::Relaxed) + 1
}

impl std::fmt::Debug for MetaLearner {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("MetaLearner").field("config", &self.config).field("updates", &self.updates).finish()
    }
}

/// The running centre's momentum: each meta-training step moves it a tenth of the way to its
/// batch's mean output (DINO's centring, Caron et al. 2021, uses the same).
pub const CENTRE_MOMENTUM: f32 = 0.9;

/// Trajectories per fused pass when embedding many bundles.
pub const EMBED_ROWS: usize = 256;

/// One forward pass with what its backward pass needs: the embeddings (`[B, E]` row-major) and
/// the tape. Hand it back to [`MetaLearner::step`] with the loss's gradient.
pub struct Pass {
    embeddings: Vec<f32>,
    /// The batch's mean output of the embedding layer, before the centre is subtracted.
    output_mean: Vec<f32>,
    tape: fused::Tape,
    bundles: usize,
    /// The meta-learner's update count when the pass ran: a step on a stale pass is refused.
    updates: u64,
}

impl Pass {
    /// `[B, E]` row-major.
    pub fn embeddings(&self) -> &[f32] {
        &self.embeddings
    }

    pub fn bundles(&self) -> usize {
        self.bundles
    }
}

impl MetaLearner {
    pub fn new(config: MetaConfig, seed: u64) -> Result<Self, MetaError> {
        config.check()?;
        let layout = fused::Layout::new(&config);
        let params = layout.init(seed);
        Ok(Self {
            adam: fused::Adam::new(layout.len),
            rng: <rand_pcg::Pcg64Mcg as rand::SeedableRng>::seed_from_u64(seed ^ 0xd20_9047),
            params,
            layout,
            config,
            updates: 0,
            learning: true,
            revision: next_revision(),
        })
    }

    pub fn config(&self) -> &MetaConfig {
        &self.config
    }

    /// Everything its training goes on from ([`MetaTraining`]).
    pub fn training_state(&self) -> MetaTraining {
        MetaTraining {
            config: self.config.clone(),
            params: self.params.clone(),
            adam: self.adam.clone(),
            rng: self.rng.clone(),
            updates: self.updates,
            learning: self.learning,
        }
    }

    /// The meta-learner `state` was taken from, as it was (with a revision of its own: what it
    /// embeds may be cached by no one yet). A state no learner could have had is refused.
    pub fn resume(state: MetaTraining) -> Result<Self, MetaError> {
        let bad = |reason: String| MetaError::Config { field: "training state", reason };
        state.config.check()?;
        let layout = fused::Layout::new(&state.config);
        if state.params.len() != layout.len || !state.params.iter().all(|v| v.is_finite()) {
            return Err(bad(format!("{} parameters, {} finite ones expected", state.params.len(), layout.len)));
        }
        state.adam.check(layout.len).map_err(bad)?;
        Ok(Self {
            config: state.config,
            layout,
            params: state.params,
            adam: state.adam,
            rng: state.rng,
            updates: state.updates,
            learning: state.learning,
            revision: next_revision(),
        })
    }

    /// Every parameter, in the layout [`MetaNet::from_params`] reads.
    pub fn params(&self) -> &[f32] {
        &self.params
    }

    /// The same network on burn (the reference implementation; for checkpoints and tests).
    pub fn to_net(&self, device: &Device) -> MetaNet {
        MetaNet::from_params(&self.config, &self.params, device)
    }

    /// Takes up loaded parameters (a checkpoint's) with a fresh optimiser.
    fn restore(&mut self, params: Vec<f32>, updates: u64) {
        self.adam = fused::Adam::new(params.len());
        self.params = params;
        self.updates = updates;
        self.revision = next_revision();
    }

    /// Meta-training steps taken.
    pub fn updates(&self) -> u64 {
        self.updates
    }

    /// Stands for what the learner embeds bundles as: it changes with every meta-training step,
    /// fitted standardisation, new centre ([`MetaLearner::centre_on`]) and loaded checkpoint, to
    /// a value no learner of this process has had before, so equal revisions give equal
    /// embeddings ([`crate::EmbeddingCache`]'s key). Not saved.
    pub fn revision(&self) -> u64 {
        self.revision
    }

    /// Freezes (false) or thaws (true) the meta-model: frozen, [`MetaLearner::step`] computes
    /// nothing and leaves every parameter as it is.
    pub fn set_learning(&mut self, on: bool) {
        self.learning = on;
    }

    pub fn is_learning(&self) -> bool {
        self.learning
    }

    /// The number of trainable parameters.
    pub fn parameters(&self) -> usize {
        self.params.len()
    }

    fn check(&self, bundles: &[&Bundle]) -> Result<(), MetaError> {
        if bundles.is_empty() {
            return Err(MetaError::EmptyBundle);
        }
        for b in bundles {
            if b.features() != self.config.features {
                return Err(MetaError::Features { got: b.features(), expected: self.config.features });
            }
            if b.trajectories() < self.config.min_trajectories {
                return Err(MetaError::TooFewTrajectories {
                    have: b.trajectories(),
                    need: self.config.min_trajectories,
                });
            }
        }
        Ok(())
    }

    /// Fits the input standardisation on `bundles` (the training pool's trajectories) and keeps
    /// it from here on: in every embedding, every training step and the checkpoint.
    pub fn fit_normaliser(&mut self, bundles: &[&Bundle]) -> Result<(), MetaError> {
        self.check(bundles)?;
        self.config.normaliser = Some(Normaliser::fit(bundles)?);
        // A centre of outputs read without the standardisation no longer applies.
        self.config.centre = None;
        self.revision = next_revision();
        Ok(())
    }

    /// The bundles standardised, when the meta-learner has a normaliser.
    fn standardised(&self, bundles: &[&Bundle]) -> Option<Vec<Bundle>> {
        let n = self.config.normaliser.as_ref()?;
        Some(bundles.iter().map(|b| b.standardised(&n.mean, &n.scale)).collect())
    }

    /// The bundle's input signature: per feature, the mean and then the standard deviation
    /// over its real steps, standardised as the meta-learner reads them (raw without a
    /// normaliser). What meta-training's auxiliary task asks the embedding to carry
    /// ([`crate::train::MetaTrainConfig::signature_weight`]).
    pub fn signature(&self, bundle: &Bundle) -> Result<Vec<f32>, MetaError> {
        self.check(&[bundle])?;
        Ok(match self.standardised(&[bundle]) {
            Some(v) => v[0].feature_moments(),
            None => bundle.feature_moments(),
        })
    }

    /// What the out-of-distribution detector reads of a bundle beside its embedding: its
    /// signature and its persistence ([`Profile`]).
    pub fn profile(&self, bundle: &Bundle) -> Result<Profile, MetaError> {
        Ok(Profile { signature: self.signature(bundle)?, persistence: bundle.persistence() })
    }

    /// The embedding of one bundle.
    pub fn embed(&self, bundle: &Bundle) -> Result<Vec<f32>, MetaError> {
        Ok(self.embed_many(&[bundle])?.pop().expect("one bundle, one embedding"))
    }

    /// One embedding per bundle, computed in one batched pass (no dropout).
    ///
    /// Bundles go through in groups of at most [`EMBED_ROWS`] trajectories, so embedding a
    /// thousand apps at once needs the memory of a few hundred trajectories, not of all.
    pub fn embed_many(&self, bundles: &[&Bundle]) -> Result<Vec<Vec<f32>>, MetaError> {
        let mut out = self.outputs(bundles)?;
        if let Some(c) = &self.config.centre {
            rows::subtract(&mut out, c);
        }
        Ok(self.split(out))
    }

    /// Flat `[B, E]` embeddings, one `Vec` each.
    fn split(&self, flat: Vec<f32>) -> Vec<Vec<f32>> {
        flat.chunks_exact(self.config.embedding).map(<[f32]>::to_vec).collect()
    }

    /// The embedding layer's outputs for `bundles`, flat `[B, E]`, before any centre is
    /// subtracted.
    fn outputs(&self, bundles: &[&Bundle]) -> Result<Vec<f32>, MetaError> {
        self.check(bundles)?;
        let mut out = Vec::with_capacity(bundles.len() * self.config.embedding);
        let mut start = 0;
        while start < bundles.len() {
            let mut end = start + 1;
            let mut rows = bundles[start].trajectories();
            while end < bundles.len() && rows + bundles[end].trajectories() <= EMBED_ROWS {
                rows += bundles[end].trajectories();
                end += 1;
            }
            let chunk = &bundles[start..end];
            // Standardised chunk by chunk, so memory stays that of one chunk.
            let packed = match self.standardised(chunk) {
                Some(v) => bundle::Packed::new(&v.iter().collect::<Vec<_>>()),
                None => bundle::Packed::new(chunk),
            };
            let (flat, _) = fused::forward(&self.layout, &self.params, 0.0, &packed.input(), None);
            out.extend(flat);
            start = end;
        }
        Ok(out)
    }

    /// A training forward pass (dropout on) over `bundles`: their embeddings, for a caller that
    /// builds its loss from them (the base learner's), and the tape [`MetaLearner::step`] needs.
    pub fn forward(&mut self, bundles: &[&Bundle]) -> Result<Pass, MetaError> {
        self.check(bundles)?;
        let standardised = self.standardised(bundles);
        let packed = match &standardised {
            Some(v) => bundle::Packed::new(&v.iter().collect::<Vec<_>>()),
            None => bundle::Packed::new(bundles),
        };
        let (mut embeddings, tape) =
            fused::forward(&self.layout, &self.params, self.config.dropout, &packed.input(), Some(&mut self.rng));
        let output_mean = rows::column_mean(&embeddings, self.config.embedding);
        let centre = match (&self.config.centre, self.batch_centred(bundles.len())) {
            (_, true) => Some(&output_mean),
            (c, false) => c.as_ref(),
        };
        if let Some(c) = centre {
            rows::subtract(&mut embeddings, c);
        }
        Ok(Pass { embeddings, output_mean, tape, bundles: bundles.len(), updates: self.updates })
    }

    /// Back-propagates `d_embeddings` (the loss's gradient with respect to the pass's
    /// embeddings, `[B, E]`) into the meta-learner and takes one Adam step, unless updates are
    /// switched off. A non-finite gradient changes nothing and is an error.
    pub fn step(&mut self, pass: &Pass, d_embeddings: &[f32]) -> Result<(), MetaError> {
        if d_embeddings.len() != pass.embeddings.len() {
            return Err(MetaError::Gradient(format!(
                "{} values for {} embeddings of {}",
                d_embeddings.len(),
                pass.bundles,
                self.config.embedding
            )));
        }
        if let Some(v) = d_embeddings.iter().find(|v| !v.is_finite()) {
            return Err(MetaError::Gradient(format!("holds {v}")));
        }
        if pass.updates != self.updates {
            return Err(MetaError::Gradient("its pass predates the last meta-training step".into()));
        }
        if !self.learning {
            return Ok(());
        }
        let grad = if self.batch_centred(pass.bundles) {
            // Centred on their batch, the embeddings do not move when every output moves
            // together: the gradient with respect to the outputs is the embeddings' gradient
            // less its batch mean. (Centred on a running mean instead, with that mean's gradient
            // passed on, the outputs drifted 0.2–2 a step on fig6's full mode, the running mean
            // lagging several steps behind and every embedding offset by the lag.)
            let mut d = d_embeddings.to_vec();
            rows::remove_column_mean(&mut d, self.config.embedding);
            self.gradient(pass, &d)
        } else {
            self.gradient(pass, d_embeddings)
        };
        self.adam.step(&mut self.params, &grad, self.config.learning_rate);
        self.updates += 1;
        self.revision = next_revision();
        if self.batch_centred(pass.bundles) {
            // Between refreshes over the whole pool, the centre follows the batches (not a
            // single bundle: the centre would become that one app's output).
            let centre = self.config.centre.get_or_insert_with(|| pass.output_mean.clone());
            centre
                .iter_mut()
                .zip(&pass.output_mean)
                .for_each(|(c, m)| *c = CENTRE_MOMENTUM * *c + (1.0 - CENTRE_MOMENTUM) * m);
        }
        Ok(())
    }

    /// Whether a training pass over `bundles` bundles is centred on its own batch: while the
    /// meta-learner centres and learns, over more than one bundle. A frozen one subtracts the
    /// centre it keeps.
    fn batch_centred(&self, bundles: usize) -> bool {
        self.config.centring && self.learning && bundles > 1
    }

    /// The embeddings of `bundles` (the pool's apps), centred on their own mean output, which
    /// becomes the centre every later embedding subtracts. Without [`MetaConfig::centring`],
    /// while the meta-learner is frozen, or for a single bundle (whose centred embedding would
    /// be zero), the centre stays as it is: the same as [`MetaLearner::embed_many`].
    pub fn centre_on(&mut self, bundles: &[&Bundle]) -> Result<Vec<Vec<f32>>, MetaError> {
        if !self.batch_centred(bundles.len()) {
            return self.embed_many(bundles);
        }
        let mut outputs = self.outputs(bundles)?;
        let mean = rows::column_mean(&outputs, self.config.embedding);
        rows::subtract(&mut outputs, &mean);
        self.config.centre = Some(mean);
        self.revision = next_revision();
        Ok(self.split(outputs))
    }

    /// The gradient of every parameter, given the loss's gradient with respect to the embedding
    /// layer's outputs (for a batch-centred pass, [`MetaLearner::step`] first removes the batch
    /// mean from the gradient with respect to the embeddings).
    pub fn gradient(&self, pass: &Pass, d_embeddings: &[f32]) -> Vec<f32> {
        let mut grad = vec![0.0; self.layout.len];
        fused::backward(&self.layout, &self.params, &pass.tape, d_embeddings, &mut grad);
        grad
    }

    /// One meta-training step with a loss computed on the embeddings: `loss(embeddings)`
    /// returns the loss and its gradient with respect to them. Returns the loss.
    pub fn train_step(
        &mut self,
        bundles: &[&Bundle],
        loss: impl FnOnce(&[f32]) -> (f32, Vec<f32>),
    ) -> Result<f32, MetaError> {
        let pass = self.forward(bundles)?;
        let (value, d) = loss(pass.embeddings());
        if !value.is_finite() {
            return Err(MetaError::Loss(value));
        }
        self.step(&pass, &d)?;
        Ok(value)
    }
}

/// The mean squared error of embeddings against targets (both `[B, E]`) and its gradient.
pub fn mean_squared_error(embeddings: &[f32], targets: &[f32]) -> (f32, Vec<f32>) {
    assert_eq!(embeddings.len(), targets.len(), "embeddings and targets differ in size");
    let n = embeddings.len().max(1) as f32;
    let loss = embeddings.iter().zip(targets).map(|(e, t)| (e - t) * (e - t)).sum::<f32>() / n;
    let grad = embeddings.iter().zip(targets).map(|(e, t)| 2.0 * (e - t) / n).collect();
    (loss, grad)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Two workload families whose steps take the same values in opposite time order (load
    /// ramping up through the episode, or down), so only the sequence tells them apart.
    fn family(up: bool, trajectories: usize, salt: u64) -> Bundle {
        let steps = 12;
        let traj: Vec<Vec<Vec<f32>>> = (0..trajectories)
            .map(|m| {
                let jitter = ((salt * 7 + m as u64 * 3) % 5) as f32 * 0.04;
                (0..steps)
                    .map(|t| {
                        let phase = if up { t } else { steps - 1 - t } as f32 / (steps - 1) as f32;
                        vec![phase + jitter, 1.0 - phase]
                    })
                    .collect()
            })
            .collect();
        Bundle::new(&traj).unwrap()
    }

    fn targets(ups: &[bool]) -> Vec<f32> {
        ups.iter().flat_map(|&up| (0..8).map(move |i| if (i < 4) == up { 1.0 } else { 0.0 })).collect()
    }

    fn config() -> MetaConfig {
        MetaConfig {
            hidden: 16,
            fc: 16,
            embedding: 8,
            min_trajectories: 1,
            learning_rate: 1e-2,
            // These tests regress embeddings on fixed targets, which centring (a pool-mean
            // constraint for meta-training) would keep off their mean.
            centring: false,
            ..MetaConfig::aware(2)
        }
    }

    /// Centring: the embeddings are the outputs less the pool's mean (`centre_on`), a training
    /// pass's less its batch's. Under a loss that asks each app for its own (zero-mean) target
    /// and pushes every embedding ten times harder one common way (the direction that collapsed
    /// fig6's full-mode embeddings), the centred learner learns the targets, apps of the two
    /// families opposite, while the plain learner's embeddings all lean the common way.
    #[test]
    fn a_centring_meta_learner_keeps_its_embeddings_on_the_pools_mean() {
        let pool: Vec<Bundle> = (0..6).map(|i| family(i % 2 == 0, 3, i)).collect();
        let refs: Vec<&Bundle> = pool.iter().collect();
        let mean_norm = |e: &[Vec<f32>]| rows::column_mean(&e.concat(), 8).iter().map(|v| v * v).sum::<f32>().sqrt();
        let mut centred = MetaLearner::new(MetaConfig { centring: true, ..config() }, 5).unwrap();
        let raw = centred.embed_many(&refs).unwrap();
        let returned = centred.centre_on(&refs).unwrap();
        assert!(mean_norm(&centred.embed_many(&refs).unwrap()) < 1e-5, "the centre is the pool's mean");
        assert_eq!(returned, centred.embed_many(&refs).unwrap());
        let c = centred.config().centre.clone().unwrap();
        for (r, a) in raw.iter().zip(&returned) {
            r.iter().zip(a).zip(&c).for_each(|((r, a), c)| assert!((r - c - a).abs() < 1e-6));
        }
        // A training pass over several bundles is centred on their own mean.
        let pass = centred.forward(&refs[..3]).unwrap();
        // Each component sums to zero over the batch of three.
        assert!(rows::column_mean(pass.embeddings(), 8).iter().all(|m| (3.0 * m).abs() < 1e-5));
        // One bundle alone is not centred on itself (its embedding would be zero).
        let alone = centred.centre_on(&refs[..1]).unwrap();
        assert_eq!(centred.config().centre.as_ref(), Some(&c));
        assert!(alone[0].iter().any(|v| v.abs() > 1e-4));
        let mut plain = MetaLearner::new(config(), 5).unwrap();
        assert_eq!(plain.centre_on(&refs).unwrap(), raw);
        assert!(plain.config().centre.is_none(), "no centre without centring");
        // Targets: +1 on the first half and −1 on the second for one family, the opposite for
        // the other (zero mean over the pool).
        let targets: Vec<f32> =
            (0..6).flat_map(|i| (0..8).map(move |j| if (j < 4) == (i % 2 == 0) { 1.0 } else { -1.0 })).collect();
        let loss = |e: &[f32]| {
            let (fit, mut d) = mean_squared_error(e, &targets);
            let push = 10.0 / e.len() as f32;
            d.iter_mut().for_each(|v| *v -= push);
            (fit - push * e.iter().sum::<f32>(), d)
        };
        for _ in 0..300 {
            centred.train_step(&refs, loss).unwrap();
            plain.train_step(&refs, loss).unwrap();
        }
        let cosine = |a: &[f32], b: &[f32]| {
            let dot: f32 = a.iter().zip(b).map(|(x, y)| x * y).sum();
            dot / (a.iter().map(|x| x * x).sum::<f32>() * b.iter().map(|x| x * x).sum::<f32>()).sqrt()
        };
        let (ce, pe) = (centred.centre_on(&refs).unwrap(), plain.embed_many(&refs).unwrap());
        let error = ce.iter().flatten().zip(&targets).map(|(e, t)| (e - t).powi(2)).sum::<f32>() / 48.0;
        assert!(error < 0.1, "centred: squared error {error} to the targets");
        let (c01, p01) = (cosine(&ce[0], &ce[1]), cosine(&pe[0], &pe[1]));
        assert!(c01 < -0.8 && p01 > c01 + 0.5, "apps of the two families: centred cosine {c01}, plain {p01}");
        assert!(mean_norm(&pe) > 1.0, "the plain learner's embeddings moved the common way");
        // A frozen learner keeps its centre, in its passes too.
        centred.set_learning(false);
        let before = centred.config().centre.clone();
        centred.train_step(&refs, loss).unwrap();
        let other: Vec<Bundle> = (0..3).map(|i| family(true, 4, 20 + i)).collect();
        let other_refs: Vec<&Bundle> = other.iter().collect();
        let frozen = centred.centre_on(&other_refs).unwrap();
        assert_eq!(centred.config().centre, before);
        let pass = centred.forward(&other_refs).unwrap();
        for (a, b) in pass.embeddings().iter().zip(frozen.iter().flatten()) {
            assert!((a - b).abs() < 1e-5, "a frozen pass subtracts the kept centre");
        }
    }

    #[test]
    fn meta_training_learns_to_tell_workloads_apart_by_their_time_course() {
        let mut learner = MetaLearner::new(config(), 7).unwrap();
        let ups = [true, false, true, false, true, false];
        let train: Vec<Bundle> = ups.iter().enumerate().map(|(i, &up)| family(up, 3, i as u64)).collect();
        let refs: Vec<&Bundle> = train.iter().collect();
        let goal = targets(&ups);
        let loss = |e: &[f32]| mean_squared_error(e, &goal);
        let first = learner.train_step(&refs, loss).unwrap();
        let mut last = first;
        for _ in 0..150 {
            last = learner.train_step(&refs, loss).unwrap();
        }
        // The best embedding blind to the family (0.5 everywhere) has loss 0.25; below it the
        // network reads the order of the steps. (With a ReLU output, a unit held at zero for
        // every input keeps 1/16 of loss per unit: 0.125 is two dead units, both families apart.)
        assert!(first > 0.3 && last < 0.15, "meta-training loss {first} → {last}");
        assert_eq!(learner.updates(), 151);
        // Bundles it never saw (other jitter, other sizes) land on their family's side.
        for (salt, up) in [(40, true), (41, false), (42, true), (43, false)] {
            let e = learner.embed(&family(up, 5, salt)).unwrap();
            let (a, b): (f32, f32) = (e[..4].iter().sum(), e[4..].iter().sum());
            assert_eq!(a > b, up, "unseen {} bundle embedded as {e:?}", if up { "ramp-up" } else { "ramp-down" });
        }
    }

    #[test]
    fn a_frozen_meta_learner_keeps_its_embeddings() {
        let mut learner = MetaLearner::new(config(), 3).unwrap();
        let b = family(true, 3, 0);
        let before = learner.embed(&b).unwrap();
        learner.set_learning(false);
        let goal = targets(&[false]);
        let loss = learner.train_step(&[&b], |e| mean_squared_error(e, &goal)).unwrap();
        assert!(loss.is_finite());
        assert_eq!(learner.embed(&b).unwrap(), before);
        assert_eq!(learner.updates(), 0);
        learner.set_learning(true);
        learner.train_step(&[&b], |e| mean_squared_error(e, &goal)).unwrap();
        assert_ne!(learner.embed(&b).unwrap(), before);
    }

    #[test]
    fn a_non_finite_loss_changes_nothing() {
        let mut learner = MetaLearner::new(config(), 3).unwrap();
        let b = family(false, 3, 1);
        let before = learner.embed(&b).unwrap();
        let err = learner.train_step(&[&b], |e| (f32::NAN, vec![0.0; e.len()])).unwrap_err();
        assert_eq!(err.to_string(), "the meta-training loss is NaN");
        let err = learner.train_step(&[&b], |e| (1.0, vec![f32::INFINITY; e.len()])).unwrap_err();
        assert_eq!(err.to_string(), "the loss's gradient with respect to the embeddings holds inf");
        let err = learner.train_step(&[&b], |_| (1.0, vec![0.0; 3])).unwrap_err();
        assert_eq!(
            err.to_string(),
            "the loss's gradient with respect to the embeddings 3 values for 1 embeddings of 8"
        );
        assert_eq!(learner.embed(&b).unwrap(), before);
        assert_eq!(learner.updates(), 0);
    }

    #[test]
    fn embedding_requests_it_cannot_answer_are_errors() {
        let learner = MetaLearner::new(MetaConfig { min_trajectories: 3, ..config() }, 1).unwrap();
        let e = learner.embed(&family(true, 2, 0)).unwrap_err();
        assert_eq!(e.to_string(), "2 trajectories, the meta-learner needs at least 3");
        let wide = Bundle::new(&vec![vec![vec![0.0; 5]]; 3]).unwrap();
        assert_eq!(learner.embed(&wide).unwrap_err().to_string(), "steps have 5 features, the meta-learner reads 2");
        assert_eq!(learner.embed_many(&[]).unwrap_err().to_string(), "the bundle holds no trajectory");
    }

    #[test]
    fn configurations_no_network_can_have_are_refused() {
        let bad = [
            (MetaConfig { hidden: 0, ..config() }, "meta-learner hidden: must be at least 1"),
            (
                MetaConfig { min_trajectories: 30, ..config() },
                "meta-learner min_trajectories: 30 exceeds trajectories (20)",
            ),
            (MetaConfig { dropout: 1.0, ..config() }, "meta-learner dropout: 1 is not in [0, 1)"),
            (
                MetaConfig { learning_rate: f64::NAN, ..config() },
                "meta-learner learning_rate: NaN is not a positive number",
            ),
            (
                MetaConfig { centre: Some(vec![0.0; 3]), ..config() },
                "meta-learner centre: 3 values for an embedding of 8",
            ),
            (MetaConfig { centre: Some(vec![f32::NAN; 8]), ..config() }, "meta-learner centre: holds NaN"),
        ];
        for (c, message) in bad {
            assert_eq!(MetaLearner::new(c, 1).unwrap_err().to_string(), message);
        }
        MetaConfig::flash(15).check().unwrap();
        assert_eq!(MetaConfig::flash(15).embedding, 32);
    }

    #[test]
    fn a_configuration_saved_before_the_output_and_centring_choices_reads_back_as_trained() {
        let fresh = MetaConfig::aware(15);
        assert_eq!(fresh.output, EmbeddingOutput::Linear);
        let mut saved = serde_json::to_value(&fresh).unwrap();
        assert_eq!(saved["output"], "linear");
        assert_eq!(saved["centring"], true);
        for field in ["output", "centring", "centre"] {
            saved.as_object_mut().unwrap().remove(field);
        }
        let old: MetaConfig = serde_json::from_value(saved).unwrap();
        assert_eq!(old, MetaConfig { output: EmbeddingOutput::Relu, centring: false, ..fresh });
    }

    #[test]
    fn many_bundles_embed_in_groups_as_each_does_alone() {
        let learner = MetaLearner::new(config(), 5).unwrap();
        let bundles: Vec<Bundle> = (0..30).map(|i| family(i % 2 == 0, 10, i)).collect();
        let refs: Vec<&Bundle> = bundles.iter().collect();
        assert!(refs.iter().map(|b| b.trajectories()).sum::<usize>() > EMBED_ROWS);
        let together = learner.embed_many(&refs).unwrap();
        assert_eq!(together.len(), 30);
        for (b, e) in bundles.iter().zip(&together) {
            let alone = learner.embed(b).unwrap();
            for (x, y) in alone.iter().zip(e) {
                assert!((x - y).abs() < 1e-5, "{alone:?} vs {e:?}");
            }
        }
    }

    #[test]
    fn a_step_on_a_stale_pass_is_refused() {
        let mut learner = MetaLearner::new(config(), 3).unwrap();
        let b = family(true, 3, 0);
        let old = learner.forward(&[&b]).unwrap();
        let fresh = learner.forward(&[&b]).unwrap();
        learner.step(&fresh, &[0.1; 8]).unwrap();
        let err = learner.step(&old, &[0.1; 8]).unwrap_err();
        assert!(err.to_string().ends_with("its pass predates the last meta-training step"), "{err}");
    }

    /// Small sizes, uneven lengths, two bundles: the fused pass against burn's network.
    fn small() -> (MetaConfig, Vec<Bundle>) {
        // Uncentred: these tests hold the fused pass to burn's network, which knows no pool.
        let c =
            MetaConfig { hidden: 6, fc: 5, embedding: 4, min_trajectories: 1, centring: false, ..MetaConfig::aware(3) };
        let traj = |lengths: &[usize], salt: usize| crate::net::tests::trajectories(lengths, 3, salt);
        (c, vec![Bundle::new(&traj(&[5, 2, 4], 0)).unwrap(), Bundle::new(&traj(&[3, 3], 1)).unwrap()])
    }

    fn close(a: &[f32], b: &[f32], what: &str) {
        assert_eq!(a.len(), b.len(), "{what}: lengths");
        for (i, (x, y)) in a.iter().zip(b).enumerate() {
            assert!((x - y).abs() <= 1e-5 + 1e-3 * y.abs(), "{what}[{i}]: fused {x} vs burn {y}");
        }
    }

    #[test]
    fn the_fused_pass_embeds_as_burns_network() {
        let (c, bundles) = small();
        for (seed, output) in [(1, EmbeddingOutput::Linear), (2, EmbeddingOutput::Relu), (3, EmbeddingOutput::Linear)] {
            let learner = MetaLearner::new(MetaConfig { output, ..c.clone() }, seed).unwrap();
            let refs: Vec<&Bundle> = bundles.iter().collect();
            let d = Device::default();
            let burn = learner.to_net(&d).forward(&Batch::new(&refs, &d)).into_data().try_to_vec::<f32>().unwrap();
            let fused: Vec<f32> = learner.embed_many(&refs).unwrap().concat();
            close(&fused, &burn, "embedding");
        }
    }

    #[test]
    fn the_fused_gradient_is_burns_autodiff() {
        for output in [EmbeddingOutput::Linear, EmbeddingOutput::Relu] {
            fused_gradient_is_burns_autodiff(output);
        }
    }

    fn fused_gradient_is_burns_autodiff(output: EmbeddingOutput) {
        use burn::module::{Module, ModuleVisitor, Param};
        use burn::tensor::{Tensor, TensorData};
        let (c, bundles) = small();
        let c = MetaConfig { output, ..c };
        let refs: Vec<&Bundle> = bundles.iter().collect();
        let mut learner = MetaLearner::new(c.clone(), 11).unwrap();
        // Loss = Σ w ⊙ e for fixed weights w: its gradient with respect to e is w.
        let w: Vec<f32> = (0..2 * c.embedding).map(|i| ((i * 7) % 5) as f32 / 2.0 - 1.0).collect();
        let pass = learner.forward(&refs).unwrap();
        assert!(pass.embeddings().iter().filter(|v| **v > 0.0).count() >= 2, "mostly dead: {:?}", pass.embeddings());
        // A linear output's negative components are where the two masks differ: they must be
        // there for the gradient to be checked through them.
        if output == EmbeddingOutput::Linear {
            assert!(pass.embeddings().iter().any(|v| *v < 0.0), "{:?}", pass.embeddings());
        }
        let fused = learner.gradient(&pass, &w);
        let d = Device::default().autodiff();
        let net = learner.to_net(&d);
        let e = net.forward(&Batch::new(&refs, &d));
        let loss = (e * Tensor::<2>::from_data(TensorData::new(w.clone(), [2, c.embedding]), &d)).sum();
        let grads = loss.backward();
        struct Collect<'a>(&'a burn::tensor::Gradients, Vec<f32>);
        impl ModuleVisitor for Collect<'_> {
            fn visit_float<const D: usize>(&mut self, param: &Param<Tensor<D>>) {
                let g = param.val().grad(self.0).expect("every parameter has a gradient");
                self.1.extend(g.into_data().try_to_vec::<f32>().unwrap());
            }
        }
        let mut collect = Collect(&grads, Vec::new());
        net.visit(&mut collect);
        // The module visits parameters in declaration order, which is the flat layout's.
        close(&fused, &collect.1, "gradient");
        assert!(fused.iter().filter(|g| g.abs() > 1e-6).count() > fused.len() / 2, "most gradients vanish");
        // And a step moves the embedding along −w.
        let before: f32 = pass.embeddings().iter().zip(&w).map(|(a, b)| a * b).sum();
        learner.step(&pass, &w).unwrap();
        let after: f32 = learner.forward(&refs).unwrap().embeddings().iter().zip(&w).map(|(a, b)| a * b).sum();
        assert!(after < before, "Σ w·e {before} → {after}");
    }

    #[test]
    fn the_normaliser_standardises_real_steps_and_travels_with_the_learner() {
        // Feature 0 varies, feature 1 is constant; trajectory 1 is shorter (padding).
        let b = Bundle::new(&[vec![vec![1.0, 5.0], vec![3.0, 5.0], vec![5.0, 5.0]], vec![vec![7.0, 5.0]]]).unwrap();
        let n = Normaliser::fit(&[&b]).unwrap();
        assert!((n.mean[0] - 4.0).abs() < 1e-6 && (n.mean[1] - 5.0).abs() < 1e-6, "{n:?}");
        assert!((n.scale[0] - 5.0f32.sqrt()).abs() < 1e-5, "{n:?}");
        assert_eq!(n.scale[1], Normaliser::MIN_SCALE, "a constant feature is centred, not blown up");
        let z = b.standardised(&n.mean, &n.scale);
        let real: Vec<f32> = [0usize, 1, 2, 4].iter().map(|&t| z.data()[t * 2]).collect();
        assert!((real.iter().sum::<f32>()).abs() < 1e-5 && z.data()[6..8] == [0.0, 0.0], "{:?}", z.data());
        // A fitted learner reads standardised steps: shifting every input by the pool's mean
        // changes nothing once it is refitted, and the normaliser is checked and kept.
        let mut learner = MetaLearner::new(MetaConfig { features: 2, ..config() }, 3).unwrap();
        let raw = learner.embed(&b).unwrap();
        learner.fit_normaliser(&[&b]).unwrap();
        let fitted = learner.embed(&b).unwrap();
        assert_ne!(raw, fitted);
        let shifted =
            Bundle::new(&[vec![vec![101.0, 5.0], vec![103.0, 5.0], vec![105.0, 5.0]], vec![vec![107.0, 5.0]]]).unwrap();
        let mut other = MetaLearner::new(MetaConfig { features: 2, ..config() }, 3).unwrap();
        other.fit_normaliser(&[&shifted]).unwrap();
        let e = other.embed(&shifted).unwrap();
        assert!(e.iter().zip(&fitted).all(|(a, b)| (a - b).abs() < 1e-5), "{e:?} vs {fitted:?}");
        let dir = tempfile::tempdir().unwrap();
        learner.save(dir.path()).unwrap();
        let loaded = MetaLearner::load(dir.path(), 3).unwrap();
        assert_eq!(loaded.config().normaliser, learner.config().normaliser);
        assert_eq!(loaded.embed(&b).unwrap(), fitted);
        let bad = MetaConfig {
            features: 2,
            normaliser: Some(Normaliser { mean: vec![0.0; 2], scale: vec![1.0, 0.0] }),
            ..config()
        };
        assert!(MetaLearner::new(bad, 1).unwrap_err().to_string().contains("normaliser"));
    }
}
