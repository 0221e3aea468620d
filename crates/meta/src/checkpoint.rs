//! The meta-learner's checkpoint, in the agents' format: `meta.safetensors` (the network, as
//! [`crate::MetaNet`]'s record) and `checkpoint.json` (algorithm `meta`, the configuration, the
//! step-feature and embedding widths as spaces, the update count, each file's SHA-256). Adam's
//! moments are not kept: a loaded meta-learner continues with a fresh optimiser, as a resumed
//! agent does.

use std::path::Path;

use aware_agents::{Checkpoint, CheckpointError, module_file};
use aware_core::Space;
use burn::module::{Module, ModuleVisitor, Param};
use burn::tensor::{Device, Tensor};

use crate::{MetaConfig, MetaError, MetaLearner, MetaNet};

const ALGORITHM: &str = "meta";
const FILE: &str = "meta.safetensors";

/// The spaces a meta-learner's checkpoint records: one step's features in, the embedding out.
fn spaces(config: &MetaConfig) -> (Space, Space) {
    let unbounded = |d: usize| Space::Box { low: vec![f32::MIN; d], high: vec![f32::MAX; d] };
    (unbounded(config.features), unbounded(config.embedding))
}

/// Every parameter of a network, in declaration order (the flat layout's).
fn flat(net: &MetaNet) -> Vec<f32> {
    struct Collect(Vec<f32>);
    impl ModuleVisitor for Collect {
        fn visit_float<const D: usize>(&mut self, param: &Param<Tensor<D>>) {
            self.0.extend(param.val().into_data().try_to_vec::<f32>().expect("f32 parameters"));
        }
    }
    let mut c = Collect(Vec::new());
    net.visit(&mut c);
    c.0
}

impl MetaLearner {
    /// Writes the checkpoint into `dir` (created if missing; files replaced atomically).
    pub fn save(&self, dir: &Path) -> Result<(), MetaError> {
        let (input, output) = spaces(self.config());
        let bytes = module_file(dir, &self.to_net(&Device::default()))?;
        Checkpoint::save(dir, ALGORITHM, self.config(), &input, output, self.updates(), &[(FILE, bytes)])?;
        Ok(())
    }

    /// Loads a checkpoint written by [`MetaLearner::save`], verifying every file's checksum;
    /// `seed` seeds the dropout generator from here on.
    pub fn load(dir: &Path, seed: u64) -> Result<Self, MetaError> {
        let meta = Checkpoint::read_metadata(dir)?;
        let config: MetaConfig = serde_json::from_value(meta.hyperparameters.clone()).map_err(|e| {
            CheckpointError::Format { path: dir.display().to_string(), reason: format!("hyperparameters: {e}") }
        })?;
        config.check()?;
        let (input, output) = spaces(&config);
        let mut open = Checkpoint::open(dir, &[ALGORITHM], &input, &output)?;
        let mut learner = MetaLearner::new(config, seed)?;
        let net = open.module(learner.to_net(&Device::default()), FILE)?;
        let params = flat(&net);
        if params.len() != learner.parameters() || params.iter().any(|v| !v.is_finite()) {
            return Err(open
                .error(format!("{FILE}: {} parameters, not {} finite ones", params.len(), learner.parameters()))
                .into());
        }
        learner.restore(params, open.meta.training_step);
        Ok(learner)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{Bundle, mean_squared_error};

    fn bundle() -> Bundle {
        let traj: Vec<Vec<Vec<f32>>> =
            (0..3).map(|m| (0..6).map(|t| vec![(m * 7 + t) as f32 / 10.0, 0.5, -0.2]).collect()).collect();
        Bundle::new(&traj).unwrap()
    }

    #[test]
    fn a_saved_meta_learner_loads_bit_for_bit_and_corruption_is_refused() {
        let dir = tempfile::tempdir().unwrap();
        let config = MetaConfig { hidden: 8, fc: 8, embedding: 4, ..MetaConfig::aware(3) };
        let mut learner = MetaLearner::new(config, 2).unwrap();
        let b = bundle();
        let other =
            Bundle::new(&[vec![vec![0.9, -0.3, 0.4]; 4], vec![vec![0.1, 0.2, 0.3]; 5], vec![vec![0.5; 3]; 2]]).unwrap();
        let targets = [1.0, 0.0, -1.0, 0.5, -1.0, 0.0, 1.0, -0.5];
        for _ in 0..3 {
            learner.train_step(&[&b, &other], |e| mean_squared_error(e, &targets)).unwrap();
        }
        // The running centre the steps set is part of what is saved.
        assert!(learner.config().centring && learner.config().centre.is_some());
        learner.save(dir.path()).unwrap();
        let loaded = MetaLearner::load(dir.path(), 9).unwrap();
        assert_eq!(loaded.params(), learner.params());
        assert_eq!(loaded.updates(), 3);
        assert_eq!(loaded.config(), learner.config());
        assert_eq!(loaded.embed(&b).unwrap(), learner.embed(&b).unwrap());
        // One flipped byte in the weights: refused by its checksum, naming the file.
        let path = dir.path().join(FILE);
        let mut bytes = std::fs::read(&path).unwrap();
        let last = bytes.len() - 1;
        bytes[last] ^= 1;
        std::fs::write(&path, bytes).unwrap();
        let err = MetaLearner::load(dir.path(), 9).unwrap_err().to_string();
        assert!(err.contains("checksum mismatch for meta.safetensors"), "{err}");
        // A directory without a checkpoint says so.
        let empty = tempfile::tempdir().unwrap();
        let err = MetaLearner::load(empty.path(), 9).unwrap_err().to_string();
        assert!(err.contains("cannot read the checkpoint"), "{err}");
    }

    /// A meta-learner keeps its embedding's output through a save, and one saved before the
    /// choices existed (no `output`, `centring` or `centre` among its hyperparameters) reads back
    /// with the ReLU it was trained with and no centring.
    #[test]
    fn the_embedding_output_survives_a_save_and_an_old_checkpoint_reads_back_with_its_relu() {
        let b = bundle();
        for output in [crate::EmbeddingOutput::Relu, crate::EmbeddingOutput::Linear] {
            let dir = tempfile::tempdir().unwrap();
            let config = MetaConfig { hidden: 8, fc: 8, embedding: 4, output, ..MetaConfig::aware(3) };
            let learner = MetaLearner::new(config, 4).unwrap();
            learner.save(dir.path()).unwrap();
            let loaded = MetaLearner::load(dir.path(), 9).unwrap();
            assert_eq!(loaded.config().output, output);
            assert_eq!(loaded.embed(&b).unwrap(), learner.embed(&b).unwrap());
            if output == crate::EmbeddingOutput::Linear {
                // The same weights saved without the field: read as a ReLU network.
                let path = dir.path().join("checkpoint.json");
                let mut json: serde_json::Value = serde_json::from_slice(&std::fs::read(&path).unwrap()).unwrap();
                let hyper = json["hyperparameters"].as_object_mut().unwrap();
                hyper.remove("output").unwrap();
                hyper.remove("centring").unwrap();
                hyper.remove("centre").unwrap();
                std::fs::write(&path, serde_json::to_vec(&json).unwrap()).unwrap();
                let old = MetaLearner::load(dir.path(), 9).unwrap();
                assert_eq!(old.config().output, crate::EmbeddingOutput::Relu);
                assert!(!old.config().centring && old.config().centre.is_none());
                let relu: Vec<f32> = learner.embed(&b).unwrap().iter().map(|v| v.max(0.0)).collect();
                assert_eq!(old.embed(&b).unwrap(), relu);
            }
        }
    }
}
