/// Everything the lifecycle manager can fail on, each naming what and why.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum LifecycleError {
    #[error(transparent)]
    Lab(#[from] aware_lab::LabError),
    #[error(transparent)]
    Agent(#[from] aware_agents::AgentError),
    #[error(transparent)]
    Store(#[from] aware_store::StoreError),
    #[error("{path}: {reason}")]
    Output { path: std::path::PathBuf, reason: String },
    /// A checkpoint that cannot be read or written.
    #[error("{}: {reason}", path.display())]
    Checkpoint { path: std::path::PathBuf, reason: String },
    #[error("{input}: {reason}")]
    Input { input: String, reason: String },
}

impl LifecycleError {
    pub fn input(input: impl Into<String>, reason: impl Into<String>) -> Self {
        LifecycleError::Input { input: input.into(), reason: reason.into() }
    }
}
