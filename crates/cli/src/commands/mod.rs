pub mod bench;
pub mod generate;
pub mod recommend;
pub mod simulate;
pub mod validate;

use std::path::{Path, PathBuf};

use anyhow::Result;
use aware_sim::{AppSpec, generate_apps};

/// Options every simulator-backed command shares.
#[derive(clap::Args, Debug, Clone)]
pub struct AppsArgs {
    /// Number of applications.
    #[arg(long, default_value_t = 10, value_parser = clap::value_parser!(u32).range(1..=1_000_000))]
    pub apps: u32,
    /// Seed for applications, load traces and measurement noise.
    #[arg(long, default_value_t = 1)]
    pub seed: u64,
    /// Length of a simulated day in seconds (86400 = real time; smaller compresses the daily cycle).
    #[arg(long, default_value_t = 86_400.0, value_parser = positive_f64)]
    pub day_seconds: f64,
}

impl AppsArgs {
    pub fn generate(&self) -> Vec<AppSpec> {
        generate_apps(self.apps as usize, self.seed, self.day_seconds)
    }
}

pub fn positive_f64(s: &str) -> Result<f64, String> {
    match s.parse::<f64>() {
        Ok(v) if v.is_finite() && v > 0.0 => Ok(v),
        _ => Err(format!("{s:?} is not a positive number")),
    }
}

/// Writes `text` to `path` atomically (temp file then rename), so an interrupted run never leaves
/// a half-written result where a good one was.
pub fn write_atomically(path: &Path, text: &str) -> Result<()> {
    use anyhow::Context;
    let tmp: PathBuf = {
        let mut name = path.file_name().map(|n| n.to_os_string()).unwrap_or_default();
        name.push(".tmp");
        path.with_file_name(name)
    };
    std::fs::write(&tmp, text).with_context(|| format!("{}: cannot write", tmp.display()))?;
    std::fs::rename(&tmp, path).with_context(|| format!("{}: cannot write", path.display()))?;
    Ok(())
}
