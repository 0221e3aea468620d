//! Files a run leaves behind, written so that an interrupted run never leaves a half-written
//! result where a good one was.

use std::path::{Path, PathBuf};

use crate::LabError;

/// Writes `text` to `path` atomically (a temporary file beside it, then a rename).
pub fn write_atomically(path: &Path, text: &str) -> Result<(), LabError> {
    let tmp: PathBuf = {
        let mut name = path.file_name().map(|n| n.to_os_string()).unwrap_or_default();
        name.push(".tmp");
        path.with_file_name(name)
    };
    std::fs::write(&tmp, text).map_err(|e| LabError::io(&tmp, format!("cannot write: {e}")))?;
    std::fs::rename(&tmp, path).map_err(|e| LabError::io(path, format!("cannot write: {e}")))?;
    Ok(())
}

/// Creates `dir` (and its parents) unless it exists.
pub fn create_dir(dir: &Path) -> Result<(), LabError> {
    std::fs::create_dir_all(dir).map_err(|e| LabError::io(dir, format!("cannot create: {e}")))
}

/// Refuses an output directory that already holds a checkpoint: a run never overwrites one.
pub fn refuse_checkpoint(flag: &str, dir: &Path) -> Result<(), LabError> {
    if dir.join(aware_agents::METADATA).exists() {
        return Err(LabError::input(
            flag,
            format!("{} already holds a checkpoint; choose another directory", dir.display()),
        ));
    }
    Ok(())
}

/// The outputs every training run leaves beside its checkpoint: `learning_curve.csv` (as
/// given), `learning_curve.png` (episode → reward) and `train.json` (the summary). Returns the
/// summary's JSON text.
pub fn write_training_outputs(
    out: &Path,
    algorithm: &str,
    csv: &str,
    points: &[(f64, f64)],
    summary: &impl serde::Serialize,
) -> Result<String, LabError> {
    write_atomically(&out.join("learning_curve.csv"), csv)?;
    crate::plot::learning_curve(&out.join("learning_curve.png"), algorithm, points)?;
    let text = serde_json::to_string_pretty(summary).map_err(|e| LabError::io(out.join("train.json"), e))?;
    write_atomically(&out.join("train.json"), &(text.clone() + "\n"))?;
    Ok(text)
}
