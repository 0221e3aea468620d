//! The experiments that check the project's claims, each a library function returning a report
//! (the command line only parses arguments and prints). Rows follow `compare --json`'s shape:
//! a `policies` list of [`aware_lab::evaluate::PolicyRow`]s plus the experiment's own fields.

pub mod agents;
pub mod classic;
pub mod fig8;
pub mod lifecycle;
pub mod meta;
pub mod ood;
pub mod simppo;

/// Why an experiment could not run to completion.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum ExperimentError {
    #[error(transparent)]
    Lab(#[from] aware_lab::LabError),
    #[error(transparent)]
    Agent(#[from] aware_agents::AgentError),
    #[error(transparent)]
    Lifecycle(#[from] aware_lifecycle::LifecycleError),
    #[error(transparent)]
    Meta(#[from] aware_meta::MetaError),
    #[error("{input}: {reason}")]
    Input { input: String, reason: String },
}
