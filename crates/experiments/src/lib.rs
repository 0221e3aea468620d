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

/// The seed the apps no learner has seen are drawn from: the same population as the pool of
/// `seed`, other apps (fig8's unseen apps, ood's unseen sets).
pub(crate) fn unseen_seed(seed: u64) -> u64 {
    seed.wrapping_mul(7919).wrapping_add(104_729)
}

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
