//! Gymnasium's spaces and the actions that live in them.

use serde::{Deserialize, Serialize};

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Space {
    /// A box of real vectors with per-dimension bounds.
    Box { low: Vec<f32>, high: Vec<f32> },
    /// One of `n` choices.
    Discrete { n: usize },
    /// One choice per dimension, `nvec[i]` choices in dimension `i`.
    MultiDiscrete { nvec: Vec<usize> },
}

impl Space {
    /// Dimension of a flat encoding: vector length for Box and MultiDiscrete, 1 for Discrete.
    pub fn dim(&self) -> usize {
        match self {
            Space::Box { low, .. } => low.len(),
            Space::Discrete { .. } => 1,
            Space::MultiDiscrete { nvec } => nvec.len(),
        }
    }

    pub fn contains(&self, action: &Action) -> bool {
        match (self, action) {
            (Space::Box { low, high }, Action::Continuous(v)) => {
                v.len() == low.len()
                    && v.iter().zip(low.iter().zip(high)).all(|(x, (l, h))| x.is_finite() && *x >= *l && *x <= *h)
            }
            (Space::Discrete { n }, Action::Discrete(a)) => a < n,
            (Space::MultiDiscrete { nvec }, Action::MultiDiscrete(v)) => {
                v.len() == nvec.len() && v.iter().zip(nvec).all(|(a, n)| a < n)
            }
            _ => false,
        }
    }
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Action {
    Continuous(Vec<f32>),
    Discrete(usize),
    MultiDiscrete(Vec<usize>),
}
