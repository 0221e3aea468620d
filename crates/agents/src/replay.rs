//! A fixed-capacity ring buffer with uniform sampling: memory stays bounded at capacity, the
//! oldest experience is overwritten first.

use rand::{RngExt, SeedableRng};
use rand_pcg::Pcg64Mcg;
use serde::{Deserialize, Serialize};

use crate::Experience;

/// A minibatch in flat row-major arrays, ready to become tensors.
#[derive(Debug, Clone, PartialEq)]
pub struct Batch {
    pub size: usize,
    pub states: Vec<f32>,
    pub actions: Vec<f32>,
    pub rewards: Vec<f32>,
    pub next_states: Vec<f32>,
    /// 1.0 where the transition was terminal.
    pub terminals: Vec<f32>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ReplayBuffer {
    capacity: usize,
    state_dim: usize,
    action_dim: usize,
    states: Vec<f32>,
    actions: Vec<f32>,
    rewards: Vec<f32>,
    next_states: Vec<f32>,
    terminals: Vec<f32>,
    pub(crate) len: usize,
    next: usize,
    rng: Pcg64Mcg,
}

impl ReplayBuffer {
    /// Storage is allocated as experiences arrive, up to `capacity`.
    pub fn new(capacity: usize, state_dim: usize, action_dim: usize, seed: u64) -> Self {
        assert!(capacity > 0, "replay capacity must be positive");
        Self {
            capacity,
            state_dim,
            action_dim,
            states: Vec::new(),
            actions: Vec::new(),
            rewards: Vec::new(),
            next_states: Vec::new(),
            terminals: Vec::new(),
            len: 0,
            next: 0,
            rng: Pcg64Mcg::seed_from_u64(seed),
        }
    }

    pub fn len(&self) -> usize {
        self.len
    }

    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    pub fn capacity(&self) -> usize {
        self.capacity
    }

    pub fn push(&mut self, e: &Experience) {
        assert_eq!(e.state.len(), self.state_dim, "state dimension");
        assert_eq!(e.action.len(), self.action_dim, "action dimension");
        let (s, a) = (self.state_dim, self.action_dim);
        if self.len < self.capacity {
            self.states.extend_from_slice(&e.state);
            self.actions.extend_from_slice(&e.action);
            self.rewards.push(e.reward);
            self.next_states.extend_from_slice(&e.next_state);
            self.terminals.push(e.terminal as u8 as f32);
            self.len += 1;
        } else {
            let i = self.next;
            self.states[i * s..(i + 1) * s].copy_from_slice(&e.state);
            self.actions[i * a..(i + 1) * a].copy_from_slice(&e.action);
            self.rewards[i] = e.reward;
            self.next_states[i * s..(i + 1) * s].copy_from_slice(&e.next_state);
            self.terminals[i] = e.terminal as u8 as f32;
        }
        self.next = (self.next + 1) % self.capacity;
    }

    /// `size` experiences drawn uniformly with replacement.
    pub fn sample(&mut self, size: usize) -> Batch {
        assert!(!self.is_empty(), "sampling an empty replay buffer");
        let (s, a) = (self.state_dim, self.action_dim);
        let mut b = Batch {
            size,
            states: Vec::with_capacity(size * s),
            actions: Vec::with_capacity(size * a),
            rewards: Vec::with_capacity(size),
            next_states: Vec::with_capacity(size * s),
            terminals: Vec::with_capacity(size),
        };
        for _ in 0..size {
            let i = self.rng.random_range(0..self.len);
            b.states.extend_from_slice(&self.states[i * s..(i + 1) * s]);
            b.actions.extend_from_slice(&self.actions[i * a..(i + 1) * a]);
            b.rewards.push(self.rewards[i]);
            b.next_states.extend_from_slice(&self.next_states[i * s..(i + 1) * s]);
            b.terminals.push(self.terminals[i]);
        }
        b
    }

    /// Whether a buffer read back from elsewhere (an agent's training state) is one this type
    /// could have built: arrays as long as `len` experiences, `len` and the next slot within
    /// the capacity. A buffer that is not would index out of its arrays when sampled.
    pub(crate) fn check(&self, state_dim: usize, action_dim: usize) -> Result<(), String> {
        let (n, s, a) = (self.len, self.state_dim, self.action_dim);
        if (s, a) != (state_dim, action_dim) {
            return Err(format!(
                "replay holds {s}-wide states and {a}-wide actions, {state_dim} and {action_dim} expected"
            ));
        }
        if self.capacity == 0 || n > self.capacity || self.next >= self.capacity {
            return Err(format!("replay holds {n} of {} experiences, next slot {}", self.capacity, self.next));
        }
        let lengths =
            [self.states.len(), self.actions.len(), self.rewards.len(), self.next_states.len(), self.terminals.len()];
        let (Some(ns), Some(na)) = (n.checked_mul(s), n.checked_mul(a)) else {
            return Err(format!("replay of {n} experiences of {s} + {a} values is larger than memory"));
        };
        if lengths != [ns, na, n, ns, n] {
            return Err(format!("replay arrays hold {lengths:?} values for {n} experiences"));
        }
        if n < self.capacity && self.next != n {
            return Err(format!("replay not yet full ({n} of {}) writes next at {}", self.capacity, self.next));
        }
        Ok(())
    }

    /// Bytes held by the stored experiences.
    pub fn memory_bytes(&self) -> usize {
        4 * (self.states.capacity()
            + self.actions.capacity()
            + self.rewards.capacity()
            + self.next_states.capacity()
            + self.terminals.capacity())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn e(i: usize) -> Experience {
        Experience {
            state: vec![i as f32; 3],
            action: vec![i as f32],
            reward: i as f32,
            next_state: vec![i as f32 + 1.0; 3],
            terminal: i.is_multiple_of(2),
        }
    }

    #[test]
    fn stays_bounded_and_overwrites_oldest() {
        let mut r = ReplayBuffer::new(100, 3, 1, 1);
        for i in 0..100 {
            r.push(&e(i));
        }
        let full = r.memory_bytes();
        for i in 100..10_000 {
            r.push(&e(i));
        }
        assert_eq!(r.len(), 100);
        assert_eq!(r.memory_bytes(), full, "no growth past capacity");
        let b = r.sample(1000);
        assert!(b.rewards.iter().all(|&x| x >= 9900.0), "only the newest 100 remain");
        // Rows stay aligned across arrays.
        for k in 0..b.size {
            assert_eq!(b.states[k * 3], b.rewards[k]);
            assert_eq!(b.actions[k], b.rewards[k]);
            assert_eq!(b.next_states[k * 3], b.rewards[k] + 1.0);
            assert_eq!(b.terminals[k], (b.rewards[k] as usize).is_multiple_of(2) as u8 as f32);
        }
    }

    #[test]
    fn sampling_is_uniform_and_seeded() {
        let mut r = ReplayBuffer::new(10, 3, 1, 7);
        for i in 0..10 {
            r.push(&e(i));
        }
        let b = r.sample(20_000);
        let mut counts = [0usize; 10];
        for x in &b.rewards {
            counts[*x as usize] += 1;
        }
        assert!(counts.iter().all(|&c| (1700..2300).contains(&c)), "{counts:?}");
        let filled = || {
            let mut x = ReplayBuffer::new(10, 3, 1, 7);
            for i in 0..10 {
                x.push(&e(i));
            }
            x
        };
        assert_eq!(filled().sample(50), filled().sample(50), "same seed, same minibatches");
    }
}
