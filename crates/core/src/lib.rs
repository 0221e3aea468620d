//! The shared vocabulary of `aware`: what a cluster reports, what an autoscaler proposes, and the
//! traits that let the simulator, Kubernetes, rule-based recommenders and RL agents be swapped
//! for one another without the layers above noticing.

pub mod cluster;
pub mod env;
pub mod observation;
pub mod profile;
pub mod recommendation;
pub mod space;

pub use cluster::{AppId, Cluster, ClusterError};
pub use env::{Env, EnvError, Step, StepInfo, VecEnv, VecStep};
pub use observation::{ContainerObservation, Observation, PodObservation, PodPhase, ReplicaCounts};
pub use profile::{Profile, ProfileError};
pub use recommendation::{
    ContainerResources, FixedRecommender, Recommendation, Recommender, RecommenderError, Resources,
};
pub use space::{Action, Space};
