//! A sliding window of recent observations, flattened oldest first (Gymnasium's frame
//! stacking): agents that read trends, like the provisioning D3QN, see the last few steps.

use std::collections::VecDeque;

#[derive(Debug, Clone, PartialEq)]
pub struct ObservationWindow {
    steps: usize,
    recent: VecDeque<Vec<f32>>,
}

impl ObservationWindow {
    pub fn new(steps: usize) -> Self {
        assert!(steps > 0, "a window holds at least one observation");
        Self { steps, recent: VecDeque::with_capacity(steps) }
    }

    /// Starts an episode: the first observation fills the whole window, so the agent sees a
    /// flat history rather than zeros it never met in training.
    pub fn reset(&mut self, first: &[f32]) -> Vec<f32> {
        self.recent = std::iter::repeat_n(first.to_vec(), self.steps).collect();
        self.flat()
    }

    /// Adds the newest observation, drops the oldest, and returns the window.
    pub fn push(&mut self, observation: &[f32]) -> Vec<f32> {
        if self.recent.len() == self.steps {
            self.recent.pop_front();
        }
        self.recent.push_back(observation.to_vec());
        self.flat()
    }

    pub fn flat(&self) -> Vec<f32> {
        self.recent.iter().flatten().copied().collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn slides_oldest_first() {
        let mut w = ObservationWindow::new(3);
        assert_eq!(w.reset(&[1.0, 10.0]), vec![1.0, 10.0, 1.0, 10.0, 1.0, 10.0]);
        assert_eq!(w.push(&[2.0, 20.0]), vec![1.0, 10.0, 1.0, 10.0, 2.0, 20.0]);
        w.push(&[3.0, 30.0]);
        assert_eq!(w.push(&[4.0, 40.0]), vec![2.0, 20.0, 3.0, 30.0, 4.0, 40.0]);
    }
}
