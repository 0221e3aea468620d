//! The rule-based autoscalers: the baselines every result is measured against and the fallback
//! that keeps production safe while an RL agent learns. HPA and VPA follow upstream Kubernetes
//! constants and rounding; threshold step scaling and AIMD are the classic alternatives.
//!
//! [`Baseline`] / [`BaselineKind`] name and build them from a profile; [`dry_run`] answers
//! `aware recommend` from a JSON snapshot (the input model, its checks and the replay);
//! [`quantity`] parses Kubernetes quantity strings.

pub mod aimd;
pub mod dry_run;
pub mod hpa;
pub mod mpa;
pub mod quantity;
pub mod registry;
pub mod threshold;
pub mod vpa;

pub use aimd::AdditiveIncreaseMultiplicativeDecrease;
pub use hpa::HorizontalPodAutoscaler;
pub use mpa::MultidimPodAutoscaler;
pub use registry::{Baseline, BaselineError, BaselineKind};
pub use threshold::ThresholdStepScaling;
pub use vpa::VerticalPodAutoscaler;
