use std::path::PathBuf;

/// Everything a lab run can fail on, each naming what was wrong (the flag or field, the file, the
/// policy) and why, so a command can print it as one line.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum LabError {
    /// A setting given by the user (a command-line flag or a field) is unusable.
    #[error("{input}: {reason}")]
    Input { input: String, reason: String },
    #[error(transparent)]
    Profile(#[from] aware_core::ProfileError),
    #[error(transparent)]
    Trace(#[from] aware_sim::TraceError),
    #[error(transparent)]
    Env(#[from] aware_core::EnvError),
    #[error(transparent)]
    Cluster(#[from] aware_core::ClusterError),
    #[error(transparent)]
    Agent(#[from] aware_agents::AgentError),
    #[error(transparent)]
    Store(#[from] aware_store::StoreError),
    #[error("{policy}: {reason}")]
    Policy { policy: String, reason: String },
    #[error("{}: {reason}", path.display())]
    Io { path: PathBuf, reason: String },
    /// An output directory another process holds ([`crate::output::lock_dir`]).
    #[error(
        "{}: another process is writing into this directory (an aware run still going?): wait for it to end, or choose another directory",
        path.display()
    )]
    Busy { path: PathBuf },
    #[error("{}: cannot draw the plot: {reason}", path.display())]
    Plot { path: PathBuf, reason: String },
    #[error("{what}: {reason}")]
    Bench { what: &'static str, reason: String },
}

impl LabError {
    pub fn input(input: impl Into<String>, reason: impl Into<String>) -> Self {
        LabError::Input { input: input.into(), reason: reason.into() }
    }

    pub fn io(path: impl Into<PathBuf>, error: impl std::fmt::Display) -> Self {
        LabError::Io { path: path.into(), reason: error.to_string() }
    }
}

/// A name or value given on the command line or in a file that does not parse.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[error("{value:?}: {reason}")]
pub struct ParseError {
    pub value: String,
    pub reason: String,
}

impl ParseError {
    pub fn new(value: impl Into<String>, reason: impl Into<String>) -> Self {
        ParseError { value: value.into(), reason: reason.into() }
    }
}
