//! AWARE's meta-learner: a few trajectories of an ⟨application, environment⟩ pair in, a workload
//! embedding out, so that one shared base learner conditioned on it adapts to a new application
//! in a few episodes instead of being retrained for each.
//!
//! - [`Bundle`]: the M trajectories read (⟨state, action, reward⟩ per step, time-major, padded
//!   and masked);
//! - [`MetaNet`]: the network (bidirectional 2-layer GRU over time, hidden 256, forward and
//!   backward final states averaged over the bundle, FC 256 → FC 64 with ReLU);
//! - [`MetaLearner`]: the network with its optimiser: embeddings for inference and one
//!   meta-training step through any loss computed from the embeddings (the base learner's);
//! - [`select`] and [`EmbeddingCache`]: the pair's chosen stored episodes (top-M by total
//!   reward, or FLASH's best and worst halves) and its embedding, recomputed only when they or
//!   the meta-learner change;
//! - [`bench`]: `aware bench meta`.

pub mod bench;
mod bundle;
mod net;
mod select;

pub use bundle::{Bundle, step_features};
pub use net::{Batch, BiGruLayer, MetaNet};
pub use select::{EmbeddingCache, select};

use burn::module::Module;
use burn::optim::{AdamConfig, GradientsParams, ModuleOptimizer};
use burn::tensor::{Device, Tensor};
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
    /// Dropout between GRU layers and after the dense layer, while training only.
    pub dropout: f64,
    /// M: trajectories per bundle.
    pub trajectories: usize,
    /// Fewer trajectories than this and no embedding is made (the lifecycle falls back).
    pub min_trajectories: usize,
    pub selection: Selection,
    /// Adam's learning rate for the meta-learner's parameters.
    pub learning_rate: f64,
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
            dropout: 0.0,
            trajectories: 20,
            min_trajectories: 3,
            selection: Selection::Best,
            learning_rate: 1e-3,
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
    #[error("episode {id}: {reason}")]
    Episode { id: aware_store::EpisodeId, reason: String },
    #[error(transparent)]
    Store(#[from] aware_store::StoreError),
}

/// The meta-learner: its network on the training device, a gradient-free copy for embedding,
/// and Adam.
pub struct MetaLearner {
    config: MetaConfig,
    net: MetaNet,
    frozen: MetaNet,
    optimizer: ModuleOptimizer,
    updates: u64,
    /// Meta-model updates are switched off at adaptation time (FLASH's toggle).
    learning: bool,
}

impl std::fmt::Debug for MetaLearner {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("MetaLearner").field("config", &self.config).field("updates", &self.updates).finish()
    }
}

impl MetaLearner {
    pub fn new(config: MetaConfig, seed: u64) -> Result<Self, MetaError> {
        config.check()?;
        let net = MetaNet::new(&config, seed, &Device::default().autodiff());
        Ok(Self { frozen: net.valid(), net, optimizer: AdamConfig::new().init(), config, updates: 0, learning: true })
    }

    pub fn config(&self) -> &MetaConfig {
        &self.config
    }

    /// Meta-training steps taken.
    pub fn updates(&self) -> u64 {
        self.updates
    }

    /// Freezes (false) or thaws (true) the meta-model: frozen, [`MetaLearner::train_step`]
    /// computes the loss but leaves every parameter as it is.
    pub fn set_learning(&mut self, on: bool) {
        self.learning = on;
    }

    pub fn is_learning(&self) -> bool {
        self.learning
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

    /// The embedding of one bundle.
    pub fn embed(&self, bundle: &Bundle) -> Result<Vec<f32>, MetaError> {
        Ok(self.embed_many(&[bundle])?.pop().expect("one bundle, one embedding"))
    }

    /// One embedding per bundle, computed in one batched pass.
    pub fn embed_many(&self, bundles: &[&Bundle]) -> Result<Vec<Vec<f32>>, MetaError> {
        self.check(bundles)?;
        let batch = Batch::new(bundles, &Device::default());
        let out = self.frozen.forward(&batch);
        let flat = out.into_data().try_to_vec::<f32>().expect("f32 tensor");
        Ok(flat.chunks(self.config.embedding).map(<[f32]>::to_vec).collect())
    }

    /// The embeddings of `bundles` with gradients attached (`[B, embedding]`), for a caller that
    /// builds its loss from them and passes it to [`MetaLearner::step`].
    pub fn embed_for_training(&self, bundles: &[&Bundle]) -> Result<Tensor<2>, MetaError> {
        self.check(bundles)?;
        let batch = Batch::new(bundles, &Device::default().autodiff());
        Ok(self.net.forward(&batch))
    }

    /// Back-propagates `loss` (a scalar built from [`MetaLearner::embed_for_training`]'s
    /// output) into the meta-learner and takes one Adam step, unless updates are switched off.
    /// Returns the loss. A non-finite loss changes nothing and is an error.
    pub fn step(&mut self, loss: Tensor<1>) -> Result<f32, MetaError> {
        let value = loss.clone().detach().into_data().try_to_vec::<f32>().expect("f32 tensor")[0];
        if !value.is_finite() {
            return Err(MetaError::Loss(value));
        }
        if self.learning {
            let grads = GradientsParams::from_grads(loss.backward(), &self.net);
            self.net = self.optimizer.step(self.config.learning_rate, self.net.clone(), grads);
            self.frozen = self.net.valid();
            self.updates += 1;
        }
        Ok(value)
    }

    /// One meta-training step with the loss `loss` computes from the embeddings.
    pub fn train_step(
        &mut self,
        bundles: &[&Bundle],
        loss: impl FnOnce(Tensor<2>) -> Tensor<1>,
    ) -> Result<f32, MetaError> {
        let embeddings = self.embed_for_training(bundles)?;
        self.step(loss(embeddings))
    }

    /// The number of trainable parameters.
    pub fn parameters(&self) -> usize {
        self.net.num_params()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use burn::tensor::TensorData;

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

    fn targets(ups: &[bool]) -> Tensor<2> {
        let v: Vec<f32> =
            ups.iter().flat_map(|&up| (0..8).map(move |i| if (i < 4) == up { 1.0 } else { 0.0 })).collect();
        Tensor::from_data(TensorData::new(v, [ups.len(), 8]), &Device::default().autodiff())
    }

    fn config() -> MetaConfig {
        MetaConfig {
            hidden: 16,
            fc: 16,
            embedding: 8,
            min_trajectories: 1,
            learning_rate: 1e-2,
            ..MetaConfig::aware(2)
        }
    }

    #[test]
    fn meta_training_learns_to_tell_workloads_apart_by_their_time_course() {
        let mut learner = MetaLearner::new(config(), 7).unwrap();
        let ups = [true, false, true, false, true, false];
        let train: Vec<Bundle> = ups.iter().enumerate().map(|(i, &up)| family(up, 3, i as u64)).collect();
        let refs: Vec<&Bundle> = train.iter().collect();
        let loss = |e: Tensor<2>| (e - targets(&ups)).powf_scalar(2.0).mean();
        let first = learner.train_step(&refs, loss).unwrap();
        let mut last = first;
        for _ in 0..150 {
            last = learner.train_step(&refs, loss).unwrap();
        }
        // The best embedding blind to the family (0.5 everywhere) has loss 0.25; below it the
        // network reads the order of the steps. (A unit the final ReLU holds at zero for every
        // input keeps 1/16 of loss per unit: 0.125 is two dead units, both families apart.)
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
        let loss = learner.train_step(&[&b], |e| (e - targets(&[false])).powf_scalar(2.0).mean()).unwrap();
        assert!(loss.is_finite());
        assert_eq!(learner.embed(&b).unwrap(), before);
        assert_eq!(learner.updates(), 0);
        learner.set_learning(true);
        learner.train_step(&[&b], |e| (e - targets(&[false])).powf_scalar(2.0).mean()).unwrap();
        assert_ne!(learner.embed(&b).unwrap(), before);
    }

    #[test]
    fn a_non_finite_loss_changes_nothing() {
        let mut learner = MetaLearner::new(config(), 3).unwrap();
        let b = family(false, 3, 1);
        let before = learner.embed(&b).unwrap();
        let err = learner.train_step(&[&b], |e| e.mean().mul_scalar(f32::NAN)).unwrap_err();
        assert_eq!(err.to_string(), "the meta-training loss is NaN");
        assert_eq!(learner.embed(&b).unwrap(), before);
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
        ];
        for (c, message) in bad {
            assert_eq!(MetaLearner::new(c, 1).unwrap_err().to_string(), message);
        }
        MetaConfig::flash(15).check().unwrap();
        assert_eq!(MetaConfig::flash(15).embedding, 32);
    }
}
