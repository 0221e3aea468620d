//! CartPole-v1: balance a pole on a cart by pushing the cart left or right.
//!
//! From Gymnasium's `cartpole.py`: gravity 9.8, cart mass 1.0, pole mass 0.1, half pole length
//! 0.5, force 10, τ 0.02 s, explicit Euler integration; terminated when |x| > 2.4 or
//! |θ| > 12° (12·2π/360 rad); reward 1 for every step including the terminating one;
//! truncated after 500 steps (the registered `TimeLimit`); start state U(−0.05, 0.05)⁴;
//! observation `[x, ẋ, θ, θ̇]` in the box ±[4.8, f32::MAX, 24°, f32::MAX]; actions 0 (push
//! left) and 1 (push right).

use aware_core::{Action, Env, EnvError, Space, Step, StepInfo};
use rand::{RngExt, SeedableRng};
use rand_pcg::Pcg64Mcg;

pub const GRAVITY: f64 = 9.8;
pub const MASS_CART: f64 = 1.0;
pub const MASS_POLE: f64 = 0.1;
pub const TOTAL_MASS: f64 = MASS_POLE + MASS_CART;
/// Half the pole's length.
pub const LENGTH: f64 = 0.5;
pub const POLE_MASS_LENGTH: f64 = MASS_POLE * LENGTH;
pub const FORCE_MAG: f64 = 10.0;
/// Seconds between state updates.
pub const TAU: f64 = 0.02;
pub const THETA_THRESHOLD_RADIANS: f64 = 12.0 * 2.0 * std::f64::consts::PI / 360.0;
pub const X_THRESHOLD: f64 = 2.4;
/// `max_episode_steps` of CartPole-v1's registration.
pub const MAX_EPISODE_STEPS: u32 = 500;

#[derive(Debug, Clone)]
pub struct CartPole {
    /// x, ẋ, θ, θ̇.
    state: [f64; 4],
    steps: u32,
    /// False before the first reset and after the episode ended.
    live: bool,
    rng: Pcg64Mcg,
}

impl CartPole {
    /// A cart-pole that must be reset before stepping; `seed` seeds the generator later
    /// resets without a seed draw from.
    pub fn new(seed: u64) -> Self {
        Self { state: [0.0; 4], steps: 0, live: false, rng: Pcg64Mcg::seed_from_u64(seed) }
    }

    /// Puts the system in a given state `[x, ẋ, θ, θ̇]`, as if just reset.
    pub fn with_state(state: [f64; 4]) -> Self {
        Self { state, steps: 0, live: true, rng: Pcg64Mcg::seed_from_u64(0) }
    }

    pub fn state(&self) -> [f64; 4] {
        self.state
    }

    fn observation(&self) -> Vec<f32> {
        self.state.iter().map(|&v| v as f32).collect()
    }
}

impl Env for CartPole {
    fn observation_space(&self) -> Space {
        let high = vec![(X_THRESHOLD * 2.0) as f32, f32::MAX, (THETA_THRESHOLD_RADIANS * 2.0) as f32, f32::MAX];
        Space::Box { low: high.iter().map(|h| -h).collect(), high }
    }

    fn action_space(&self) -> Space {
        Space::Discrete { n: 2 }
    }

    fn reset(&mut self, seed: Option<u64>) -> Result<(Vec<f32>, StepInfo), EnvError> {
        if let Some(seed) = seed {
            self.rng = Pcg64Mcg::seed_from_u64(seed);
        }
        for v in &mut self.state {
            *v = self.rng.random_range(-0.05..0.05);
        }
        self.steps = 0;
        self.live = true;
        Ok((self.observation(), StepInfo::default()))
    }

    /// Gymnasium asserts the action is 0 or 1; anything else is refused here.
    fn step(&mut self, action: &Action) -> Result<Step, EnvError> {
        if !self.live {
            return Err(EnvError::NeedsReset);
        }
        let push_right = match action {
            Action::Discrete(0) => false,
            Action::Discrete(1) => true,
            _ => return Err(super::out_of_space(action, self.action_space())),
        };
        let [x, x_dot, theta, theta_dot] = self.state;
        let force = if push_right { FORCE_MAG } else { -FORCE_MAG };
        let (sin, cos) = theta.sin_cos();
        // The equations of Florian (2007), "Correct equations for the dynamics of the
        // cart-pole system", as Gymnasium writes them.
        let temp = (force + POLE_MASS_LENGTH * theta_dot * theta_dot * sin) / TOTAL_MASS;
        let theta_acc = (GRAVITY * sin - cos * temp) / (LENGTH * (4.0 / 3.0 - MASS_POLE * cos * cos / TOTAL_MASS));
        let x_acc = temp - POLE_MASS_LENGTH * theta_acc * cos / TOTAL_MASS;
        // Explicit Euler: positions advance with the old velocities.
        self.state = [x + TAU * x_dot, x_dot + TAU * x_acc, theta + TAU * theta_dot, theta_dot + TAU * theta_acc];
        let [x, _, theta, _] = self.state;
        let terminated = !(-X_THRESHOLD..=X_THRESHOLD).contains(&x)
            || !(-THETA_THRESHOLD_RADIANS..=THETA_THRESHOLD_RADIANS).contains(&theta);
        self.steps += 1;
        let truncated = !terminated && self.steps >= MAX_EPISODE_STEPS;
        if terminated || truncated {
            self.live = false;
        }
        Ok(Step { observation: self.observation(), reward: 1.0, terminated, truncated, info: StepInfo::default() })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// One step by hand from [0.01, −0.02, 0.1, 0.3] pushing right (force +10):
    /// temp = (10 + 0.05·0.09·sin 0.1)/1.1 = 9.0913175;
    /// θ̈ = (9.8 sin 0.1 − cos 0.1·temp) / (0.5 (4/3 − 0.1 cos² 0.1 / 1.1)) = −12.9772937;
    /// ẍ = temp − 0.05 θ̈ cos 0.1 / 1.1 = 9.6782476; then Euler with τ = 0.02.
    #[test]
    fn one_step_by_hand() {
        let mut env = CartPole::with_state([0.01, -0.02, 0.1, 0.3]);
        let step = env.step(&Action::Discrete(1)).unwrap();
        let want = [0.0096, 0.173_564_951_200_367_25, 0.106, 0.040_454_125_449_862_71];
        for (got, want) in env.state().iter().zip(want) {
            assert!((got - want).abs() < 1e-12, "{got} vs {want}");
        }
        assert_eq!(step.reward, 1.0);
        assert!(!step.terminated && !step.truncated);
        let obs: Vec<f32> = want.iter().map(|&v| v as f32).collect();
        assert_eq!(step.observation, obs);
    }

    /// Pushing left mirrors pushing right from the mirrored state.
    #[test]
    fn dynamics_are_mirror_symmetric() {
        let mut a = CartPole::with_state([0.3, 0.2, 0.05, -0.4]);
        let mut b = CartPole::with_state([-0.3, -0.2, -0.05, 0.4]);
        a.step(&Action::Discrete(1)).unwrap();
        b.step(&Action::Discrete(0)).unwrap();
        for (p, q) in a.state().iter().zip(b.state()) {
            assert!((p + q).abs() < 1e-12);
        }
    }

    /// Terminates (with reward 1) once |θ| passes 12° or |x| passes 2.4, and not before.
    #[test]
    fn terminates_at_the_thresholds() {
        let mut env = CartPole::with_state([0.0, 0.0, THETA_THRESHOLD_RADIANS - 1e-4, 1.0]);
        let s = env.step(&Action::Discrete(1)).unwrap();
        assert!(s.terminated && !s.truncated && s.reward == 1.0);
        assert!(matches!(env.step(&Action::Discrete(1)), Err(EnvError::NeedsReset)));
        let mut env = CartPole::with_state([X_THRESHOLD - 1e-3, 0.1, 0.0, 0.0]);
        assert!(env.step(&Action::Discrete(0)).unwrap().terminated, "x 2.401 is out");
        let mut env = CartPole::with_state([X_THRESHOLD - 1e-3, 0.01, 0.0, 0.0]);
        assert!(!env.step(&Action::Discrete(0)).unwrap().terminated, "x 2.3992 is in");
    }

    /// A bang-bang controller on the pole keeps it up for the whole episode: truncation at 500.
    #[test]
    fn truncates_after_500_steps() {
        let mut env = CartPole::new(1);
        let (mut obs, _) = env.reset(Some(5)).unwrap();
        let mut total = 0.0;
        for t in 1..=MAX_EPISODE_STEPS {
            let push_right = obs[2] + 0.5 * obs[3] + 0.01 * obs[0] + 0.1 * obs[1] > 0.0;
            let s = env.step(&Action::Discrete(push_right as usize)).unwrap();
            total += s.reward;
            assert!(!s.terminated, "fell at step {t}");
            assert_eq!(s.truncated, t == MAX_EPISODE_STEPS);
            obs = s.observation;
        }
        assert_eq!(total, 500.0);
    }

    #[test]
    fn seeded_resets_repeat_and_start_in_range() {
        let (mut a, mut b) = (CartPole::new(0), CartPole::new(1));
        assert_eq!(a.reset(Some(8)).unwrap(), b.reset(Some(8)).unwrap());
        for seed in 0..100 {
            let (obs, _) = a.reset(Some(seed)).unwrap();
            assert!(obs.iter().all(|v| (-0.05..0.05).contains(v)));
            assert!(a.observation_space().contains(&Action::Continuous(obs)));
        }
    }

    #[test]
    fn refuses_bad_actions() {
        let mut env = CartPole::with_state([0.0; 4]);
        assert!(matches!(env.step(&Action::Discrete(2)), Err(EnvError::ActionOutOfSpace { .. })));
        assert!(matches!(env.step(&Action::Continuous(vec![1.0])), Err(EnvError::ActionOutOfSpace { .. })));
    }
}
