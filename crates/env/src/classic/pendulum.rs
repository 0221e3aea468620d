//! Pendulum-v1: swing a pendulum up and hold it upright with a bounded torque.
//!
//! From Gymnasium's `pendulum.py`: max_speed 8, max_torque 2, dt 0.05, g 10, m 1, l 1;
//! `u = clip(u, −2, 2)`, cost `angle_normalize(θ)² + 0.1 θ̇² + 0.001 u²` (reward = −cost,
//! computed on the state before the step), `θ̇′ = clip(θ̇ + (3g/(2l) sin θ + 3/(m l²) u) dt, −8, 8)`,
//! `θ′ = θ + θ̇′ dt`; observation `[cos θ, sin θ, θ̇]`; start θ ~ U(−π, π), θ̇ ~ U(−1, 1); never
//! terminates, truncated after 200 steps (the registered `TimeLimit`).

use std::f64::consts::PI;

use aware_core::{Action, Env, EnvError, Space, Step, StepInfo};
use rand::{RngExt, SeedableRng};
use rand_pcg::Pcg64Mcg;

pub const MAX_SPEED: f64 = 8.0;
pub const MAX_TORQUE: f64 = 2.0;
pub const DT: f64 = 0.05;
pub const G: f64 = 10.0;
pub const M: f64 = 1.0;
pub const L: f64 = 1.0;
/// `max_episode_steps` of Pendulum-v1's registration.
pub const MAX_EPISODE_STEPS: u32 = 200;

/// Gymnasium's `angle_normalize`: `((x + π) mod 2π) − π`, with Python's floored modulo.
pub fn angle_normalize(x: f64) -> f64 {
    (x + PI).rem_euclid(2.0 * PI) - PI
}

#[derive(Debug, Clone)]
pub struct Pendulum {
    theta: f64,
    theta_dot: f64,
    steps: u32,
    /// False before the first reset and after truncation.
    live: bool,
    rng: Pcg64Mcg,
}

impl Pendulum {
    /// A pendulum that must be reset before stepping; `seed` seeds the generator later resets
    /// without a seed draw from.
    pub fn new(seed: u64) -> Self {
        Self { theta: 0.0, theta_dot: 0.0, steps: 0, live: false, rng: Pcg64Mcg::seed_from_u64(seed) }
    }

    /// Puts the pendulum in a given state (θ, θ̇), as if just reset.
    pub fn with_state(theta: f64, theta_dot: f64) -> Self {
        Self { theta, theta_dot, steps: 0, live: true, rng: Pcg64Mcg::seed_from_u64(0) }
    }

    /// (θ, θ̇).
    pub fn state(&self) -> (f64, f64) {
        (self.theta, self.theta_dot)
    }

    fn observation(&self) -> Vec<f32> {
        vec![self.theta.cos() as f32, self.theta.sin() as f32, self.theta_dot as f32]
    }
}

impl Env for Pendulum {
    fn observation_space(&self) -> Space {
        Space::Box { low: vec![-1.0, -1.0, -MAX_SPEED as f32], high: vec![1.0, 1.0, MAX_SPEED as f32] }
    }

    fn action_space(&self) -> Space {
        Space::Box { low: vec![-MAX_TORQUE as f32], high: vec![MAX_TORQUE as f32] }
    }

    fn reset(&mut self, seed: Option<u64>) -> Result<(Vec<f32>, StepInfo), EnvError> {
        if let Some(seed) = seed {
            self.rng = Pcg64Mcg::seed_from_u64(seed);
        }
        self.theta = self.rng.random_range(-PI..PI);
        self.theta_dot = self.rng.random_range(-1.0..1.0);
        self.steps = 0;
        self.live = true;
        Ok((self.observation(), StepInfo::default()))
    }

    /// Torques outside ±2 are clipped, as Gymnasium clips them; a non-finite torque or a
    /// vector of the wrong length is refused.
    fn step(&mut self, action: &Action) -> Result<Step, EnvError> {
        if !self.live {
            return Err(EnvError::NeedsReset);
        }
        let u = match action {
            Action::Continuous(v) if v.len() == 1 && v[0].is_finite() => (v[0] as f64).clamp(-MAX_TORQUE, MAX_TORQUE),
            Action::Continuous(v) if v.len() != 1 => {
                return Err(EnvError::WrongActionCount { expected: 1, got: v.len() });
            }
            _ => return Err(super::out_of_space(action, self.action_space())),
        };
        let (th, thdot) = (self.theta, self.theta_dot);
        let cost = angle_normalize(th).powi(2) + 0.1 * thdot * thdot + 0.001 * u * u;
        let new_thdot =
            (thdot + (3.0 * G / (2.0 * L) * th.sin() + 3.0 / (M * L * L) * u) * DT).clamp(-MAX_SPEED, MAX_SPEED);
        self.theta = th + new_thdot * DT;
        self.theta_dot = new_thdot;
        self.steps += 1;
        let truncated = self.steps >= MAX_EPISODE_STEPS;
        if truncated {
            self.live = false;
        }
        Ok(Step {
            observation: self.observation(),
            reward: -cost,
            terminated: false,
            truncated,
            info: StepInfo::default(),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// One step by hand from θ = 1, θ̇ = 0.5, u = 1.5:
    /// cost = 1 + 0.1·0.25 + 0.001·2.25 = 1.02725;
    /// θ̇′ = 0.5 + (15 sin 1 + 3·1.5)·0.05 = 0.5 + (12.62206… + 4.5)·0.05 = 1.35610…;
    /// θ′ = 1 + 1.35610…·0.05 = 1.06780….
    #[test]
    fn one_step_by_hand() {
        let mut env = Pendulum::with_state(1.0, 0.5);
        let step = env.step(&Action::Continuous(vec![1.5])).unwrap();
        assert!((step.reward + 1.02725).abs() < 1e-12, "{}", step.reward);
        let want_thdot = 0.5 + (15.0 * 1.0f64.sin() + 4.5) * 0.05;
        assert!((want_thdot - 1.356_103_2).abs() < 1e-6);
        let (th, thdot) = env.state();
        assert!((thdot - want_thdot).abs() < 1e-12);
        assert!((th - (1.0 + want_thdot * 0.05)).abs() < 1e-12);
        let obs = step.observation;
        assert!((obs[0] as f64 - th.cos()).abs() < 1e-6 && (obs[1] as f64 - th.sin()).abs() < 1e-6);
        assert!((obs[2] as f64 - thdot).abs() < 1e-6);
        assert!(!step.terminated && !step.truncated);
    }

    /// Torque is clipped to ±2 before the cost and the dynamics; speed is clipped to ±8.
    #[test]
    fn torque_and_speed_are_clipped() {
        let mut a = Pendulum::with_state(0.3, 7.9);
        let mut b = Pendulum::with_state(0.3, 7.9);
        let sa = a.step(&Action::Continuous(vec![50.0])).unwrap();
        let sb = b.step(&Action::Continuous(vec![2.0])).unwrap();
        assert_eq!(sa, sb);
        assert_eq!(a.state().1, MAX_SPEED);
        // The cost uses the state before the step and the clipped torque.
        assert!((sa.reward + (0.09 + 0.1 * 7.9 * 7.9 + 0.004)).abs() < 1e-12);
    }

    #[test]
    fn angle_normalize_wraps_like_python() {
        assert!((angle_normalize(3.0 * PI / 2.0) + PI / 2.0).abs() < 1e-12);
        assert!((angle_normalize(-3.0 * PI / 2.0) - PI / 2.0).abs() < 1e-12);
        assert!((angle_normalize(0.25) - 0.25).abs() < 1e-15);
        assert!((angle_normalize(PI) + PI).abs() < 1e-12, "π maps to −π, as ((π + π) % 2π) − π does");
    }

    #[test]
    fn truncates_after_200_steps_and_needs_reset() {
        let mut env = Pendulum::new(3);
        let (obs, _) = env.reset(Some(3)).unwrap();
        assert!(env.observation_space().contains(&Action::Continuous(obs)));
        for t in 1..=MAX_EPISODE_STEPS {
            let s = env.step(&Action::Continuous(vec![0.0])).unwrap();
            assert!(!s.terminated);
            assert_eq!(s.truncated, t == MAX_EPISODE_STEPS);
            assert!(s.reward <= 0.0 && s.reward >= -16.273_604_4 - 1e-9);
        }
        assert!(matches!(env.step(&Action::Continuous(vec![0.0])), Err(EnvError::NeedsReset)));
    }

    #[test]
    fn seeded_resets_repeat_and_start_in_range() {
        let mut a = Pendulum::new(0);
        let mut b = Pendulum::new(99);
        assert_eq!(a.reset(Some(42)).unwrap(), b.reset(Some(42)).unwrap());
        for seed in 0..200 {
            a.reset(Some(seed)).unwrap();
            let (th, thdot) = a.state();
            assert!((-PI..PI).contains(&th) && (-1.0..1.0).contains(&thdot));
        }
    }

    #[test]
    fn refuses_bad_actions() {
        let mut env = Pendulum::with_state(0.0, 0.0);
        assert!(matches!(env.step(&Action::Discrete(1)), Err(EnvError::ActionOutOfSpace { .. })));
        assert!(matches!(env.step(&Action::Continuous(vec![f32::NAN])), Err(EnvError::ActionOutOfSpace { .. })));
        assert!(matches!(
            env.step(&Action::Continuous(vec![0.0, 1.0])),
            Err(EnvError::WrongActionCount { expected: 1, got: 2 })
        ));
    }
}
