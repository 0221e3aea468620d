//! The policy names and built policies the commands use (they live in `aware-lab`).

pub use aware_lab::policy::{Policy, PolicyName};
