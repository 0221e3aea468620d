//! The instability scenarios of AWARE §2.3 — workload changes that make a trained policy
//! degrade — plus node-level interference, injectable at a chosen step.
//!
//! AWARE's characterisation changed one thing at a time: the payload size handled by the
//! application's segments (all of them, or only its CPU-, I/O- or memory-dominated ones, up or
//! down) and the load level (high to low, low to high). The seven below are our reading of
//! that set; `node-interference` is the environment change (a noisy neighbour).

use std::fmt;
use std::str::FromStr;

use serde::{Deserialize, Serialize};

use crate::segments::SegmentKind;

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum ScenarioKind {
    /// Every segment's payload ×4.
    PayloadUp,
    /// Every segment's payload ×¼.
    PayloadDown,
    /// CPU-bound segments' payload ×4.
    CpuPayloadUp,
    /// I/O-bound segments' payload ×4.
    IoPayloadUp,
    /// Memory-heavy segments' payload ×4.
    MemoryPayloadUp,
    /// Load drops to 20 %.
    LoadHighToLow,
    /// Load rises ×5.
    LoadLowToHigh,
    /// A quarter of the nodes lose half their CPU to a co-located tenant.
    NodeInterference,
}

impl ScenarioKind {
    pub const ALL: [ScenarioKind; 8] = [
        ScenarioKind::PayloadUp,
        ScenarioKind::PayloadDown,
        ScenarioKind::CpuPayloadUp,
        ScenarioKind::IoPayloadUp,
        ScenarioKind::MemoryPayloadUp,
        ScenarioKind::LoadHighToLow,
        ScenarioKind::LoadLowToHigh,
        ScenarioKind::NodeInterference,
    ];

    pub fn name(self) -> &'static str {
        match self {
            ScenarioKind::PayloadUp => "payload-up",
            ScenarioKind::PayloadDown => "payload-down",
            ScenarioKind::CpuPayloadUp => "cpu-payload-up",
            ScenarioKind::IoPayloadUp => "io-payload-up",
            ScenarioKind::MemoryPayloadUp => "memory-payload-up",
            ScenarioKind::LoadHighToLow => "load-high-to-low",
            ScenarioKind::LoadLowToHigh => "load-low-to-high",
            ScenarioKind::NodeInterference => "node-interference",
        }
    }

    /// Payload multiplier this scenario applies to a segment kind.
    pub fn payload_scale(self, kind: SegmentKind) -> f64 {
        match self {
            ScenarioKind::PayloadUp => 4.0,
            ScenarioKind::PayloadDown => 0.25,
            ScenarioKind::CpuPayloadUp if kind.is_cpu_bound() => 4.0,
            ScenarioKind::IoPayloadUp if !kind.is_cpu_bound() => 4.0,
            ScenarioKind::MemoryPayloadUp if kind.is_memory_heavy() => 4.0,
            _ => 1.0,
        }
    }

    pub fn load_scale(self) -> f64 {
        match self {
            ScenarioKind::LoadHighToLow => 0.2,
            ScenarioKind::LoadLowToHigh => 5.0,
            _ => 1.0,
        }
    }
}

/// A scenario and the step it takes effect at (`None`: the caller picks, usually mid-run).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct Scenario {
    pub kind: ScenarioKind,
    pub at_step: Option<u64>,
}

impl fmt::Display for Scenario {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.at_step {
            Some(s) => write!(f, "{}@{s}", self.kind.name()),
            None => f.write_str(self.kind.name()),
        }
    }
}

/// A scenario name that does not parse.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum ScenarioError {
    #[error("scenario step {0:?} is not a non-negative integer")]
    Step(String),
    #[error("unknown scenario {name:?} (expected one of {expected})")]
    Unknown { name: String, expected: String },
}

impl FromStr for Scenario {
    type Err = ScenarioError;

    /// `NAME` or `NAME@STEP`.
    fn from_str(s: &str) -> Result<Self, ScenarioError> {
        let (name, step) = match s.split_once('@') {
            Some((n, st)) => (n, Some(st.parse().map_err(|_| ScenarioError::Step(st.to_string()))?)),
            None => (s, None),
        };
        let kind = ScenarioKind::ALL.into_iter().find(|k| k.name() == name).ok_or_else(|| {
            let names: Vec<_> = ScenarioKind::ALL.iter().map(|k| k.name()).collect();
            ScenarioError::Unknown { name: name.to_string(), expected: names.join(", ") }
        })?;
        Ok(Scenario { kind, at_step: step })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_names_and_steps() {
        assert_eq!(
            "load-low-to-high@40".parse(),
            Ok(Scenario { kind: ScenarioKind::LoadLowToHigh, at_step: Some(40) })
        );
        assert_eq!("payload-up".parse::<Scenario>().unwrap().at_step, None);
        assert!("nope".parse::<Scenario>().unwrap_err().to_string().contains("payload-up"));
        assert!("payload-up@x".parse::<Scenario>().is_err());
        for k in ScenarioKind::ALL {
            assert_eq!(k.name().parse::<Scenario>().unwrap().kind, k);
        }
    }
}
