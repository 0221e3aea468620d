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

/// As Gymnasium prints a space, for messages: `Box(0, 1, (11,), float32)` where every
/// dimension has the same bounds, the bounds in full otherwise; `Discrete(5)`;
/// `MultiDiscrete([3, 3])`.
impl std::fmt::Display for Space {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Space::Box { low, high } => {
                let same = |v: &[f32]| v.windows(2).all(|w| w[0] == w[1]);
                if !low.is_empty() && same(low) && same(high) {
                    write!(f, "Box({}, {}, ({},), float32)", low[0], high[0], low.len())
                } else {
                    write!(f, "Box(low={low:?}, high={high:?}, float32)")
                }
            }
            Space::Discrete { n } => write!(f, "Discrete({n})"),
            Space::MultiDiscrete { nvec } => write!(f, "MultiDiscrete({nvec:?})"),
        }
    }
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

    /// `action` clipped into a box, as Gymnasium's agents clip a Gaussian policy's sample
    /// (`np.clip(action, low, high)`) before stepping; other actions are returned as they are.
    /// NaN stays NaN, for the environment to refuse.
    pub fn clip(&self, action: Action) -> Action {
        match (self, action) {
            (Space::Box { low, high }, Action::Continuous(v)) if v.len() == low.len() => Action::Continuous(
                v.iter()
                    .zip(low.iter().zip(high))
                    .map(|(x, (l, h))| if x.is_nan() { *x } else { x.clamp(*l, *h) })
                    .collect(),
            ),
            (_, a) => a,
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

#[cfg(test)]
mod tests {
    use super::*;

    /// Spaces print as Gymnasium prints them; a box whose dimensions differ in bounds in full.
    #[test]
    fn spaces_print_as_gymnasium_prints_them() {
        let unit = Space::Box { low: vec![0.0; 30], high: vec![1.0; 30] };
        assert_eq!(unit.to_string(), "Box(0, 1, (30,), float32)");
        let mixed = Space::Box { low: vec![0.0, -1.0], high: vec![1.0, 1.0] };
        assert_eq!(mixed.to_string(), "Box(low=[0.0, -1.0], high=[1.0, 1.0], float32)");
        assert_eq!(Space::Discrete { n: 5 }.to_string(), "Discrete(5)");
        assert_eq!(Space::MultiDiscrete { nvec: vec![3, 3] }.to_string(), "MultiDiscrete([3, 3])");
    }
    use proptest::prelude::*;

    proptest! {
        /// A finite action clipped into a box is in it, and an action already in it is unchanged.
        #[test]
        fn clipping_lands_in_the_box(v in proptest::collection::vec(-1e6f32..1e6, 3)) {
            let space = Space::Box { low: vec![-1.0; 3], high: vec![1.0, 2.0, 0.5] };
            let clipped = space.clip(Action::Continuous(v.clone()));
            prop_assert!(space.contains(&clipped), "{:?}", clipped);
            if space.contains(&Action::Continuous(v.clone())) {
                prop_assert_eq!(clipped, Action::Continuous(v));
            }
        }
    }

    #[test]
    fn clipping_leaves_nan_and_other_spaces_alone() {
        let space = Space::Box { low: vec![-1.0; 2], high: vec![1.0; 2] };
        let Action::Continuous(v) = space.clip(Action::Continuous(vec![f32::NAN, 3.0])) else { panic!() };
        assert!(v[0].is_nan() && v[1] == 1.0);
        assert_eq!(Space::Discrete { n: 3 }.clip(Action::Discrete(5)), Action::Discrete(5));
    }
}
