//! A bundle: the M trajectories of one ⟨application, environment⟩ pair the meta-learner reads,
//! laid out time-major and zero-padded to the longest, with a mask of the steps that exist.

use crate::MetaError;
use aware_store::Transition;

/// One step of a trajectory as the meta-learner reads it: state ⊕ action ⊕ reward.
pub fn step_features(t: &Transition) -> Vec<f32> {
    let mut v = Vec::with_capacity(t.state.len() + t.action.len() + 1);
    v.extend_from_slice(&t.state);
    v.extend_from_slice(&t.action);
    v.push(t.reward);
    v
}

/// Sums of every feature and of its square over the real (unpadded) steps of any number of
/// bundles of one width: the input standardisation and the bundle's signature both read them.
pub(crate) struct Moments {
    steps: f64,
    sum: Vec<f64>,
    squares: Vec<f64>,
}

impl Moments {
    pub(crate) fn new(features: usize) -> Self {
        Self { steps: 0.0, sum: vec![0.0; features], squares: vec![0.0; features] }
    }

    /// Adds `bundle`'s real steps (of this width: the caller checks).
    pub(crate) fn add(&mut self, bundle: &Bundle) {
        let (m, f) = (bundle.trajectories, bundle.features);
        for (i, &len) in bundle.lengths.iter().enumerate() {
            for t in 0..len {
                let at = (t * m + i) * f;
                for (j, &x) in bundle.data[at..at + f].iter().enumerate() {
                    self.sum[j] += x as f64;
                    self.squares[j] += x as f64 * x as f64;
                }
                self.steps += 1.0;
            }
        }
    }

    /// Per feature, the mean and the (population) standard deviation.
    pub(crate) fn mean_and_sd(&self) -> (Vec<f64>, Vec<f64>) {
        let n = self.steps.max(1.0);
        let mean: Vec<f64> = self.sum.iter().map(|s| s / n).collect();
        let sd = self.squares.iter().zip(&mean).map(|(q, mu)| (q / n - mu * mu).max(0.0).sqrt()).collect();
        (mean, sd)
    }
}

/// How close (relative to 1 + |value|) two consecutive values of a feature must be to count as
/// unchanged in [`Bundle::persistence`]: float rounding, not measurement noise.
pub const PERSISTENCE_TOLERANCE: f32 = 1e-6;

/// M trajectories of up to T steps of F features each.
///
/// `data` is time-major, `[T, M, F]` (step t of trajectory m at `(t·M + m)·F`), so that one
/// GRU step reads one contiguous slab; steps past a trajectory's end are zero and masked out.
#[derive(Debug, Clone, PartialEq)]
pub struct Bundle {
    trajectories: usize,
    steps: usize,
    features: usize,
    data: Vec<f32>,
    lengths: Vec<usize>,
}

impl Bundle {
    /// A bundle from trajectories given as lists of step vectors. Refuses an empty bundle, an
    /// empty trajectory, steps of different widths and non-finite values, naming the
    /// trajectory, step and component.
    pub fn new(trajectories: &[Vec<Vec<f32>>]) -> Result<Self, MetaError> {
        let m = trajectories.len();
        let first = trajectories.first().ok_or(MetaError::EmptyBundle)?;
        let features = first.first().map(Vec::len).ok_or(MetaError::EmptyTrajectory { trajectory: 0 })?;
        if features == 0 {
            return Err(MetaError::BadStep { trajectory: 0, step: 0, reason: "has no features".into() });
        }
        let mut lengths = Vec::with_capacity(m);
        for (i, traj) in trajectories.iter().enumerate() {
            if traj.is_empty() {
                return Err(MetaError::EmptyTrajectory { trajectory: i });
            }
            for (t, step) in traj.iter().enumerate() {
                if step.len() != features {
                    return Err(MetaError::BadStep {
                        trajectory: i,
                        step: t,
                        reason: format!("has {} features, the bundle's first step has {features}", step.len()),
                    });
                }
                if let Some(c) = step.iter().position(|v| !v.is_finite()) {
                    return Err(MetaError::BadStep {
                        trajectory: i,
                        step: t,
                        reason: format!("component {c} is {}", step[c]),
                    });
                }
            }
            lengths.push(traj.len());
        }
        let steps = lengths.iter().copied().max().unwrap_or(0);
        let mut data = vec![0.0; steps * m * features];
        for (i, traj) in trajectories.iter().enumerate() {
            for (t, step) in traj.iter().enumerate() {
                let at = (t * m + i) * features;
                data[at..at + features].copy_from_slice(step);
            }
        }
        Ok(Self { trajectories: m, steps, features, data, lengths })
    }

    /// A bundle from stored episodes' transitions (each ⟨state, action, reward⟩ one step).
    pub fn from_transitions(episodes: &[Vec<Transition>]) -> Result<Self, MetaError> {
        let trajectories: Vec<Vec<Vec<f32>>> = episodes.iter().map(|e| e.iter().map(step_features).collect()).collect();
        Self::new(&trajectories)
    }

    /// The bundle with every real step's features mapped to `(x − mean) / scale` (padding
    /// stays zero). `mean` and `scale` hold one value per feature.
    pub fn standardised(&self, mean: &[f32], scale: &[f32]) -> Bundle {
        let (m, f) = (self.trajectories, self.features);
        let mut out = self.clone();
        for (i, &len) in self.lengths.iter().enumerate() {
            for t in 0..len {
                let at = (t * m + i) * f;
                for (j, x) in out.data[at..at + f].iter_mut().enumerate() {
                    *x = (*x - mean[j]) / scale[j];
                }
            }
        }
        out
    }

    /// Per feature, the mean and then the standard deviation over the real steps:
    /// `[mean_0, …, mean_F−1, sd_0, …, sd_F−1]`.
    pub fn feature_moments(&self) -> Vec<f32> {
        let mut moments = Moments::new(self.features);
        moments.add(self);
        let (mean, sd) = moments.mean_and_sd();
        mean.into_iter().chain(sd).map(|v| v as f32).collect()
    }

    /// Per feature, the share of consecutive steps (within each trajectory) at which it did not
    /// change: how persistent the trace is, which its moments do not tell. A feature that moves
    /// with Poisson noise every interval reads 0; an idle app's, held at one value, reads 1. A
    /// bundle of one-step trajectories has no consecutive steps and reads 0.
    pub fn persistence(&self) -> Vec<f32> {
        let (m, f) = (self.trajectories, self.features);
        let mut held = vec![0usize; f];
        let mut pairs = 0usize;
        for (i, &len) in self.lengths.iter().enumerate() {
            for t in 1..len {
                let (now, before) = ((t * m + i) * f, ((t - 1) * m + i) * f);
                for (j, h) in held.iter_mut().enumerate() {
                    let (a, b) = (self.data[now + j], self.data[before + j]);
                    *h += usize::from((a - b).abs() <= PERSISTENCE_TOLERANCE * (1.0 + b.abs()));
                }
                pairs += 1;
            }
        }
        held.into_iter().map(|h| if pairs == 0 { 0.0 } else { h as f32 / pairs as f32 }).collect()
    }

    /// M.
    pub fn trajectories(&self) -> usize {
        self.trajectories
    }

    /// T, the longest trajectory's length.
    pub fn steps(&self) -> usize {
        self.steps
    }

    /// F.
    pub fn features(&self) -> usize {
        self.features
    }

    /// Each trajectory's own length.
    pub fn lengths(&self) -> &[usize] {
        &self.lengths
    }

    /// The padded steps, `[T, M, F]` row-major.
    pub fn data(&self) -> &[f32] {
        &self.data
    }

    /// 1 where step t of trajectory m exists, 0 in the padding; `[T, M]` row-major.
    pub fn mask(&self) -> Vec<f32> {
        let m = self.trajectories;
        let mut mask = vec![0.0; self.steps * m];
        for (i, &len) in self.lengths.iter().enumerate() {
            for t in 0..len {
                mask[t * m + i] = 1.0;
            }
        }
        mask
    }
}

/// Bundles side by side, padded to the longest: `x` `[T, N, F]` over every trajectory of every
/// bundle (N = Σ M_b), `mask` `[T, N]`, and each bundle's first row and row count.
#[derive(Debug, Clone)]
pub(crate) struct Packed {
    pub x: Vec<f32>,
    pub mask: Vec<f32>,
    pub steps: usize,
    pub rows: usize,
    pub features: usize,
    pub groups: Vec<(usize, usize)>,
}

impl Packed {
    /// All bundles must have the same number of features (the caller checks).
    pub fn new(bundles: &[&Bundle]) -> Self {
        let steps = bundles.iter().map(|b| b.steps()).max().unwrap_or(0);
        let rows: usize = bundles.iter().map(|b| b.trajectories()).sum();
        let f = bundles.first().map_or(0, |b| b.features());
        let mut x = vec![0.0f32; steps * rows * f];
        let mut mask = vec![0.0f32; steps * rows];
        let mut groups = Vec::with_capacity(bundles.len());
        let mut col = 0;
        for b in bundles {
            let (m, data, own) = (b.trajectories(), b.data(), b.mask());
            for t in 0..b.steps() {
                let at = (t * rows + col) * f;
                x[at..at + m * f].copy_from_slice(&data[t * m * f..(t + 1) * m * f]);
                mask[t * rows + col..t * rows + col + m].copy_from_slice(&own[t * m..(t + 1) * m]);
            }
            groups.push((col, m));
            col += m;
        }
        Self { x, mask, steps, rows, features: f, groups }
    }

    pub fn input(&self) -> crate::fused::Input<'_> {
        crate::fused::Input { x: &self.x, mask: &self.mask, steps: self.steps, rows: self.rows, groups: &self.groups }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn persistence_counts_unchanged_consecutive_steps_within_each_trajectory() {
        // Feature 0 held for 2 of 3 pairs in the first trajectory, 1 of 1 in the second; feature
        // 1 moves every step. The step from one trajectory to the next is not a pair.
        let b = Bundle::new(&[
            vec![vec![0.0, 1.0], vec![0.0, 2.0], vec![0.0, 3.0], vec![5.0, 4.0]],
            vec![vec![5.0, 1.0], vec![5.0, 1.5]],
        ])
        .unwrap();
        assert_eq!(b.persistence(), vec![3.0 / 4.0, 0.0]);
        // Values equal up to float rounding count as held; any real change does not.
        let c = Bundle::new(&[vec![vec![1000.0], vec![1000.0001], vec![1000.1]]]).unwrap();
        assert_eq!(c.persistence(), vec![0.5]);
        // One-step trajectories have no pairs.
        assert_eq!(Bundle::new(&[vec![vec![1.0]]]).unwrap().persistence(), vec![0.0]);
    }

    #[test]
    fn steps_are_time_major_and_padding_is_masked() {
        let b = Bundle::new(&[vec![vec![1.0, 2.0], vec![3.0, 4.0]], vec![vec![5.0, 6.0]]]).unwrap();
        assert_eq!((b.trajectories(), b.steps(), b.features()), (2, 2, 2));
        assert_eq!(b.data(), &[1.0, 2.0, 5.0, 6.0, 3.0, 4.0, 0.0, 0.0]);
        assert_eq!(b.mask(), vec![1.0, 1.0, 1.0, 0.0]);
        assert_eq!(b.lengths(), &[2, 1]);
    }

    #[test]
    fn bad_bundles_are_refused_with_where() {
        assert_eq!(Bundle::new(&[]).unwrap_err().to_string(), "the bundle holds no trajectory");
        let e = Bundle::new(&[vec![vec![1.0]], vec![]]).unwrap_err();
        assert_eq!(e.to_string(), "trajectory 1 has no step");
        let e = Bundle::new(&[vec![vec![1.0, 2.0]], vec![vec![1.0, 2.0], vec![f32::NAN, 0.0]]]).unwrap_err();
        assert_eq!(e.to_string(), "trajectory 1, step 1: component 0 is NaN");
        let e = Bundle::new(&[vec![vec![1.0, 2.0], vec![1.0]]]).unwrap_err();
        assert_eq!(e.to_string(), "trajectory 0, step 1: has 1 features, the bundle's first step has 2");
    }

    #[test]
    fn transitions_read_as_state_action_reward() {
        let t = Transition {
            step: 0,
            state: vec![0.5, 0.25],
            action: vec![-1.0],
            reward: 2.0,
            next_state: vec![0.0, 0.0],
            done: false,
        };
        let b = Bundle::from_transitions(&[vec![t]]).unwrap();
        assert_eq!(b.data(), &[0.5, 0.25, -1.0, 2.0]);
    }
}
