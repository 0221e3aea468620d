//! The policy names the commands parse (they live in `aware-lab`).

pub use aware_lab::policy::PolicyName;
