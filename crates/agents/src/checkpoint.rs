//! Checkpoints: weights as safetensors and `checkpoint.json` with the algorithm, its
//! hyper-parameters, the observation and action spaces, the training step and a SHA-256 per
//! file. Loading refuses a checksum that does not match and spaces that differ from the
//! environment's, with the reason: a checkpoint is never silently applied to the wrong problem.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use aware_core::Space;
use burn::module::Module;
use burn::store::{ModuleSnapshot, SafetensorsStore};
use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};

pub const FORMAT: u32 = 1;
pub const METADATA: &str = "checkpoint.json";

#[derive(Debug, thiserror::Error)]
pub enum CheckpointError {
    #[error("{path}: {reason}")]
    Io { path: String, reason: String },
    #[error("{path}: {reason}")]
    Format { path: String, reason: String },
    #[error("{path}: checksum mismatch for {file} (the file changed after it was written)")]
    Checksum { path: String, file: String },
    #[error("{path}: the checkpoint's {what} space {checkpoint} does not match the environment's {environment}")]
    SpaceMismatch { path: String, what: &'static str, checkpoint: String, environment: String },
    #[error("{path}: a {found} checkpoint cannot be loaded as {expected}")]
    Algorithm { path: String, found: String, expected: String },
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Checkpoint {
    pub format: u32,
    pub algorithm: String,
    pub hyperparameters: serde_json::Value,
    pub observation_space: Space,
    pub action_space: Space,
    pub training_step: u64,
    /// File name → SHA-256 (hex) of its bytes.
    pub files: BTreeMap<String, String>,
}

pub fn sha256(bytes: &[u8]) -> String {
    Sha256::digest(bytes).iter().map(|b| format!("{b:02x}")).collect()
}

fn io(path: &Path) -> impl Fn(std::io::Error) -> CheckpointError + '_ {
    move |e| CheckpointError::Io { path: path.display().to_string(), reason: e.to_string() }
}

/// A module's weights as safetensors bytes.
pub fn module_bytes<M: Module>(module: &M) -> Result<Vec<u8>, String> {
    let mut store = SafetensorsStore::from_bytes(None);
    module.save_into(&mut store).map_err(|e| e.to_string())?;
    store.get_bytes().map_err(|e| e.to_string())
}

/// Loads weights into `module` (whose architecture must match), all tensors or an error.
pub fn load_module<M: Module>(mut module: M, bytes: Vec<u8>, name: &str) -> Result<M, String> {
    let mut store = SafetensorsStore::from_bytes(Some(bytes));
    let applied = module.load_from(&mut store).map_err(|e| format!("{name}: {e}"))?;
    if !applied.missing.is_empty() || !applied.unused.is_empty() || !applied.errors.is_empty() {
        return Err(format!(
            "{name}: weights do not fit the network (missing {:?}, unused {:?}, errors {:?})",
            applied.missing, applied.unused, applied.errors
        ));
    }
    Ok(module)
}

impl Checkpoint {
    /// Writes `files` and then the metadata (each via a temporary file and a rename), so a
    /// crash never leaves metadata pointing at missing or partial weights.
    pub fn write(mut self, dir: &Path, files: &[(&str, Vec<u8>)]) -> Result<(), CheckpointError> {
        std::fs::create_dir_all(dir).map_err(io(dir))?;
        self.format = FORMAT;
        self.files.clear();
        for (name, bytes) in files {
            let path = dir.join(name);
            let tmp = dir.join(format!(".{name}.tmp"));
            std::fs::write(&tmp, bytes).map_err(io(&tmp))?;
            std::fs::rename(&tmp, &path).map_err(io(&path))?;
            self.files.insert(name.to_string(), sha256(bytes));
        }
        let meta = dir.join(METADATA);
        let tmp = dir.join(format!(".{METADATA}.tmp"));
        let text = serde_json::to_string_pretty(&self).expect("serialisable");
        std::fs::write(&tmp, text + "\n").map_err(io(&tmp))?;
        std::fs::rename(&tmp, &meta).map_err(io(&meta))
    }

    /// Reads and verifies a checkpoint of one of `algorithms` on an environment with these spaces;
    /// returns the metadata and every file's bytes.
    pub fn read(
        dir: &Path,
        algorithms: &[&str],
        observation_space: &Space,
        action_space: &Space,
    ) -> Result<(Checkpoint, BTreeMap<String, Vec<u8>>), CheckpointError> {
        let meta_path: PathBuf = dir.join(METADATA);
        let shown = dir.display().to_string();
        let text = std::fs::read_to_string(&meta_path).map_err(io(&meta_path))?;
        let c: Checkpoint = serde_json::from_str(&text)
            .map_err(|e| CheckpointError::Format { path: meta_path.display().to_string(), reason: e.to_string() })?;
        if c.format > FORMAT {
            return Err(CheckpointError::Format {
                path: shown,
                reason: format!("format {} is newer than this build's {FORMAT}", c.format),
            });
        }
        if !algorithms.contains(&c.algorithm.as_str()) {
            return Err(CheckpointError::Algorithm {
                path: shown,
                found: c.algorithm.clone(),
                expected: algorithms.join(" or "),
            });
        }
        let show = |s: &Space| serde_json::to_string(s).expect("serialisable");
        for (what, ours, theirs) in
            [("observation", &c.observation_space, observation_space), ("action", &c.action_space, action_space)]
        {
            if ours != theirs {
                return Err(CheckpointError::SpaceMismatch {
                    path: shown,
                    what,
                    checkpoint: show(ours),
                    environment: show(theirs),
                });
            }
        }
        let mut files = BTreeMap::new();
        for (name, digest) in &c.files {
            let path = dir.join(name);
            let bytes = std::fs::read(&path).map_err(io(&path))?;
            if &sha256(&bytes) != digest {
                return Err(CheckpointError::Checksum { path: shown, file: name.clone() });
            }
            files.insert(name.clone(), bytes);
        }
        Ok((c, files))
    }
}
