/// Why a SIMPPO operation could not be done.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum SimppoError {
    /// The coordinator has no member with this id (never joined, left, or dropped as silent).
    #[error("agent {0} is not a member")]
    UnknownAgent(usize),
    /// The agent is a member already.
    #[error("agent {0} is already a member")]
    AlreadyMember(usize),
    /// A setting or argument is unusable.
    #[error("{input}: {reason}")]
    Input { input: String, reason: String },
    #[error(transparent)]
    Agent(#[from] aware_agents::AgentError),
    #[error(transparent)]
    Lab(#[from] aware_lab::LabError),
}

impl SimppoError {
    /// An unusable setting, named with the reason.
    pub fn input(input: impl Into<String>, reason: impl Into<String>) -> Self {
        SimppoError::Input { input: input.into(), reason: reason.into() }
    }
}

impl From<SimppoError> for aware_lab::LabError {
    fn from(e: SimppoError) -> Self {
        match e {
            SimppoError::Lab(e) => e,
            SimppoError::Agent(e) => aware_lab::LabError::Agent(e),
            other => aware_lab::LabError::input("simppo", other.to_string()),
        }
    }
}
