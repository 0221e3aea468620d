//! Checkpoints: weights as safetensors and `checkpoint.json` with the algorithm, its
//! hyper-parameters, the observation and action spaces, the training step and a SHA-256 per
//! file. Loading refuses a checksum that does not match and spaces that differ from the
//! environment's, with the reason: a checkpoint is never silently applied to the wrong problem.

use std::collections::BTreeMap;
use std::path::{Component, Path, PathBuf};

use aware_core::Space;
use burn::module::Module;
use burn::store::{ModuleSnapshot, SafetensorsStore};
use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};

use crate::config::Hyperparameters;

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

/// Refuses a file name that is not one plain name inside the checkpoint directory (absolute,
/// with `..` or a separator, or the metadata's own): the saver writes no other kind.
fn check_file_name(name: &str, path: &Path) -> Result<(), CheckpointError> {
    let mut parts = Path::new(name).components();
    let plain = matches!((parts.next(), parts.next()), (Some(Component::Normal(n)), None) if n == name);
    if plain && name != METADATA {
        return Ok(());
    }
    Err(CheckpointError::Format {
        path: path.display().to_string(),
        reason: format!("files: {name:?} is not a file name inside the checkpoint directory"),
    })
}

fn io(path: &Path) -> impl Fn(std::io::Error) -> CheckpointError + '_ {
    move |e| CheckpointError::Io { path: path.display().to_string(), reason: e.to_string() }
}

/// A module's weights as safetensors bytes, in canonical form (see [`canonical_safetensors`]).
fn module_bytes<M: Module>(module: &M, path: &str) -> Result<Vec<u8>, CheckpointError> {
    let malformed = |reason: String| CheckpointError::Format { path: path.to_string(), reason };
    let mut store = SafetensorsStore::from_bytes(None);
    module.save_into(&mut store).map_err(|e| malformed(e.to_string()))?;
    canonical_safetensors(&store.get_bytes().map_err(|e| malformed(e.to_string()))?, path)
}

/// Rewrites safetensors bytes with header keys sorted and tensor data laid out in that order.
/// The writer's header order follows a hash map, so equal weights gave different files (and
/// checksums); canonical bytes make "same seed, same checkpoint" checkable with `cmp`.
fn canonical_safetensors(bytes: &[u8], path: &str) -> Result<Vec<u8>, CheckpointError> {
    let bad = |why: &str| CheckpointError::Format { path: path.to_string(), reason: format!("safetensors: {why}") };
    let n =
        u64::from_le_bytes(bytes.get(..8).ok_or_else(|| bad("shorter than its header length"))?.try_into().unwrap());
    let header_end =
        8usize.checked_add(n as usize).filter(|&e| e <= bytes.len()).ok_or_else(|| bad("header length"))?;
    // serde_json's map is ordered by key (no `preserve_order`), so iteration is sorted.
    let header: serde_json::Map<String, serde_json::Value> =
        serde_json::from_slice(&bytes[8..header_end]).map_err(|e| bad(&e.to_string()))?;
    let data = &bytes[header_end..];
    let mut out_header = serde_json::Map::new();
    let mut out_data = Vec::with_capacity(data.len());
    for (name, entry) in header {
        if name == "__metadata__" {
            out_header.insert(name, entry);
            continue;
        }
        let offsets = entry["data_offsets"].as_array().ok_or_else(|| bad("data_offsets"))?;
        let range = match (offsets.first().and_then(|v| v.as_u64()), offsets.get(1).and_then(|v| v.as_u64())) {
            (Some(a), Some(b)) if a <= b && b as usize <= data.len() => a as usize..b as usize,
            _ => return Err(bad(&format!("{name}: data_offsets out of range"))),
        };
        let start = out_data.len();
        out_data.extend_from_slice(&data[range]);
        let mut entry = entry.clone();
        entry["data_offsets"] = serde_json::json!([start, out_data.len()]);
        out_header.insert(name, entry);
    }
    let mut text = serde_json::to_vec(&out_header).map_err(|e| bad(&e.to_string()))?;
    while text.len() % 8 != 0 {
        text.push(b' ');
    }
    let mut out = (text.len() as u64).to_le_bytes().to_vec();
    out.extend_from_slice(&text);
    out.extend_from_slice(&out_data);
    Ok(out)
}

/// Loads weights into `module` (whose architecture must match), all tensors or an error.
fn load_module<M: Module>(mut module: M, bytes: Vec<u8>, name: &str, path: &str) -> Result<M, CheckpointError> {
    let malformed = |reason: String| CheckpointError::Format { path: path.to_string(), reason };
    let mut store = SafetensorsStore::from_bytes(Some(bytes));
    let applied = module.load_from(&mut store).map_err(|e| malformed(format!("{name}: {e}")))?;
    if !applied.missing.is_empty() || !applied.unused.is_empty() || !applied.errors.is_empty() {
        return Err(malformed(format!(
            "{name}: weights do not fit the network (missing {:?}, unused {:?}, errors {:?})",
            applied.missing, applied.unused, applied.errors
        )));
    }
    Ok(module)
}

/// A module's canonical safetensors bytes, or a format error naming `dir`.
pub fn module_file<M: Module>(dir: &Path, module: &M) -> Result<Vec<u8>, CheckpointError> {
    module_bytes(module, &dir.display().to_string())
}

/// A verified checkpoint being loaded: its metadata and files, with errors naming its directory.
pub struct OpenCheckpoint {
    pub meta: Checkpoint,
    files: BTreeMap<String, Vec<u8>>,
    path: String,
}

impl OpenCheckpoint {
    pub fn error(&self, reason: String) -> CheckpointError {
        CheckpointError::Format { path: self.path.clone(), reason }
    }

    /// The hyper-parameters as the algorithm's configuration type, validated: a value out of
    /// range is refused as `DIR/checkpoint.json: hyperparameters.FIELD: REASON`.
    pub fn config<T: Hyperparameters>(&self) -> Result<T, CheckpointError> {
        let config: T = serde_json::from_value(self.meta.hyperparameters.clone())
            .map_err(|e| self.error(format!("hyperparameters: {e}")))?;
        config.validate().map_err(|e| CheckpointError::Format {
            path: Path::new(&self.path).join(METADATA).display().to_string(),
            reason: format!("hyperparameters.{e}"),
        })?;
        Ok(config)
    }

    /// One file's bytes (verified against its checksum when the checkpoint was opened).
    pub fn file(&mut self, name: &str) -> Result<Vec<u8>, CheckpointError> {
        self.files.remove(name).ok_or_else(|| self.error(format!("no {name}")))
    }

    /// Weights from file `name` into `module`, whose architecture must match.
    pub fn module<M: Module>(&mut self, module: M, name: &str) -> Result<M, CheckpointError> {
        let bytes = self.file(name)?;
        load_module(module, bytes, name, &self.path)
    }
}

/// Refuses to save an agent whose configuration loading would refuse (one built in code with a
/// value out of range): nothing is written that cannot be read back.
pub(crate) fn check_config(dir: &Path, config: &impl Hyperparameters) -> Result<(), CheckpointError> {
    config.validate().map_err(|e| CheckpointError::Format {
        path: dir.join(METADATA).display().to_string(),
        reason: format!("not saved: hyperparameters.{e}"),
    })
}

impl Checkpoint {
    /// Writes a checkpoint of `algorithm`: `files`, then metadata recording the
    /// hyper-parameters, spaces, training step and each file's checksum.
    pub fn save(
        dir: &Path,
        algorithm: &str,
        hyperparameters: &impl Serialize,
        observation_space: &Space,
        action_space: Space,
        training_step: u64,
        files: &[(&str, Vec<u8>)],
    ) -> Result<(), CheckpointError> {
        Checkpoint {
            format: FORMAT,
            algorithm: algorithm.into(),
            hyperparameters: serde_json::to_value(hyperparameters).expect("serialisable"),
            observation_space: observation_space.clone(),
            action_space,
            training_step,
            files: Default::default(),
        }
        .write(dir, files)
    }

    /// [`Checkpoint::read`] for loading: the metadata and files behind one handle.
    pub fn open(
        dir: &Path,
        algorithms: &[&str],
        observation_space: &Space,
        action_space: &Space,
    ) -> Result<OpenCheckpoint, CheckpointError> {
        let (meta, files) = Checkpoint::read(dir, algorithms, observation_space, action_space)?;
        Ok(OpenCheckpoint { meta, files, path: dir.display().to_string() })
    }

    /// Writes `files` and then the metadata (each via a temporary file and a rename), so a
    /// crash never leaves metadata pointing at missing or partial weights.
    pub fn write(mut self, dir: &Path, files: &[(&str, Vec<u8>)]) -> Result<(), CheckpointError> {
        for (name, _) in files {
            check_file_name(name, dir)?;
        }
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

    /// The metadata alone (no weights read, nothing verified beyond the format), so a caller
    /// can see which algorithm and spaces a checkpoint holds before loading it.
    pub fn read_metadata(dir: &Path) -> Result<Checkpoint, CheckpointError> {
        let meta_path: PathBuf = dir.join(METADATA);
        let text = std::fs::read_to_string(&meta_path).map_err(|e| {
            // A directory that holds a checkpoint one level down (a meta-trained pool's
            // `agent/`) is named, rather than leaving the user to guess.
            let below = std::fs::read_dir(dir)
                .into_iter()
                .flatten()
                .flatten()
                .map(|entry| entry.path())
                .filter(|p| p.join(METADATA).is_file())
                .min();
            let hint = below.map_or(String::new(), |p| format!("; {} holds one", p.display()));
            CheckpointError::Io {
                path: meta_path.display().to_string(),
                reason: format!("cannot read the checkpoint: {e}{hint}"),
            }
        })?;
        let c: Checkpoint = serde_json::from_str(&text)
            .map_err(|e| CheckpointError::Format { path: meta_path.display().to_string(), reason: e.to_string() })?;
        if c.format > FORMAT {
            return Err(CheckpointError::Format {
                path: dir.display().to_string(),
                reason: format!("format {} is newer than this build's {FORMAT}", c.format),
            });
        }
        for name in c.files.keys() {
            check_file_name(name, &meta_path)?;
        }
        Ok(c)
    }

    /// Reads and verifies a checkpoint of one of `algorithms` on an environment with these spaces;
    /// returns the metadata and every file's bytes.
    pub fn read(
        dir: &Path,
        algorithms: &[&str],
        observation_space: &Space,
        action_space: &Space,
    ) -> Result<(Checkpoint, BTreeMap<String, Vec<u8>>), CheckpointError> {
        let shown = dir.display().to_string();
        let c = Checkpoint::read_metadata(dir)?;
        if !algorithms.contains(&c.algorithm.as_str()) {
            return Err(CheckpointError::Algorithm {
                path: shown,
                found: c.algorithm.clone(),
                expected: algorithms.join(" or "),
            });
        }
        for (what, ours, theirs) in
            [("observation", &c.observation_space, observation_space), ("action", &c.action_space, action_space)]
        {
            if ours != theirs {
                return Err(CheckpointError::SpaceMismatch {
                    path: shown,
                    what,
                    checkpoint: ours.to_string(),
                    environment: theirs.to_string(),
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

#[cfg(test)]
mod tests {
    use super::*;

    /// A directory without a checkpoint whose subdirectory holds one (a meta-trained pool's
    /// `agent/`) is refused naming that subdirectory.
    #[test]
    fn a_checkpoint_one_level_down_is_named() {
        let dir = tempfile::tempdir().unwrap();
        let err = Checkpoint::read_metadata(dir.path()).unwrap_err().to_string();
        assert!(err.contains("cannot read the checkpoint") && !err.contains("holds one"), "{err}");
        std::fs::create_dir(dir.path().join("agent")).unwrap();
        std::fs::write(dir.path().join("agent").join(METADATA), "{}").unwrap();
        let err = Checkpoint::read_metadata(dir.path()).unwrap_err().to_string();
        assert!(err.contains(&format!("{} holds one", dir.path().join("agent").display())), "{err}");
    }
}
