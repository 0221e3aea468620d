//! Helpers the command-line tests share.

use std::path::{Path, PathBuf};

/// A file named `name` holding `text`, alone in a fresh temporary directory that goes with it.
pub struct TempFile {
    _dir: tempfile::TempDir,
    path: PathBuf,
}

impl std::ops::Deref for TempFile {
    type Target = Path;
    fn deref(&self) -> &Path {
        &self.path
    }
}

impl AsRef<Path> for TempFile {
    fn as_ref(&self) -> &Path {
        &self.path
    }
}

pub fn temp_file(name: &str, text: &str) -> TempFile {
    let dir = tempfile::Builder::new().prefix("aware-cli-test-").tempdir().unwrap();
    let path = dir.path().join(name);
    std::fs::write(&path, text).unwrap();
    TempFile { _dir: dir, path }
}
