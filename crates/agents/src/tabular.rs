//! Tabular Q-learning with non-linear state binning: the simplest learner that can run an
//! autoscaler, and a sanity baseline for the deep ones. α 0.1, γ 0.99 by default.

use std::collections::HashMap;

use rand::{RngExt, SeedableRng};
use rand_pcg::Pcg64Mcg;
use serde::{Deserialize, Serialize};

use crate::checkpoint::{Checkpoint, CheckpointError};
use crate::config::{self, ConfigError, Hyperparameters};
use crate::{AgentError, check_observation};

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct QTableConfig {
    pub alpha: f32,
    pub gamma: f32,
    pub epsilon_start: f32,
    pub epsilon_end: f32,
    /// Steps over which ε decays linearly.
    pub epsilon_decay_steps: u64,
    /// Bin edges per feature, shared by all features: denser near the middle of [0, 1] where
    /// autoscaling decisions change, sparser at the ends.
    pub edges: Vec<f32>,
}

impl Default for QTableConfig {
    fn default() -> Self {
        Self {
            alpha: 0.1,
            gamma: 0.99,
            epsilon_start: 1.0,
            epsilon_end: 0.05,
            epsilon_decay_steps: 10_000,
            edges: vec![-0.5, 0.1, 0.3, 0.45, 0.55, 0.7, 0.9],
        }
    }
}

impl Hyperparameters for QTableConfig {
    fn validate(&self) -> Result<(), ConfigError> {
        config::positive("alpha", self.alpha)?;
        config::in_range("alpha", self.alpha, 0.0, 1.0)?;
        config::in_range("gamma", self.gamma, 0.0, 1.0)?;
        config::in_range("epsilon_start", self.epsilon_start, 0.0, 1.0)?;
        config::in_range("epsilon_end", self.epsilon_end, 0.0, 1.0)?;
        // Bin indices are bytes: at most 255 edges, 256 bins.
        if self.edges.len() > u8::MAX as usize {
            let reason = format!("{} edges exceed the limit of {}", self.edges.len(), u8::MAX);
            return Err(ConfigError { field: "edges".into(), reason });
        }
        for (i, e) in self.edges.iter().enumerate() {
            config::finite(&format!("edges[{i}]"), *e)?;
            if i > 0 && *e <= self.edges[i - 1] {
                let reason = format!("{e} is not above edges[{}] {}", i - 1, self.edges[i - 1]);
                return Err(ConfigError { field: format!("edges[{i}]"), reason });
            }
        }
        Ok(())
    }
}

#[derive(Debug, Clone)]
pub struct QTable {
    pub config: QTableConfig,
    state_dim: usize,
    actions: usize,
    table: HashMap<Vec<u8>, Vec<f32>>,
    steps: u64,
    rng: Pcg64Mcg,
}

impl QTable {
    pub fn new(state_dim: usize, actions: usize, config: QTableConfig, seed: u64) -> Self {
        Self { config, state_dim, actions, table: HashMap::new(), steps: 0, rng: Pcg64Mcg::seed_from_u64(seed) }
    }

    /// The bin index of each feature.
    pub fn bin(&self, obs: &[f32]) -> Vec<u8> {
        obs.iter().map(|v| self.config.edges.partition_point(|e| e <= v) as u8).collect()
    }

    pub fn actions(&self) -> usize {
        self.actions
    }

    pub fn epsilon(&self) -> f32 {
        let c = &self.config;
        let frac = (self.steps as f32 / c.epsilon_decay_steps.max(1) as f32).min(1.0);
        c.epsilon_start + frac * (c.epsilon_end - c.epsilon_start)
    }

    fn q(&self, key: &[u8]) -> Option<&Vec<f32>> {
        self.table.get(key)
    }

    /// ε-greedy when `explore`, greedy otherwise (ties to the lowest index).
    pub fn act(&mut self, obs: &[f32], explore: bool) -> Result<usize, AgentError> {
        check_observation(obs, self.state_dim)?;
        if explore && self.rng.random::<f32>() < self.epsilon() {
            return Ok(self.rng.random_range(0..self.actions));
        }
        let key = self.bin(obs);
        Ok(self.q(&key).map_or(0, |q| argmax(q)))
    }

    /// One Q-learning update: `Q(s,a) += α (r + γ max Q(s′) − Q(s,a))`.
    pub fn learn(
        &mut self,
        state: &[f32],
        action: usize,
        reward: f32,
        next: &[f32],
        terminal: bool,
    ) -> Result<(), AgentError> {
        check_observation(state, self.state_dim)?;
        check_observation(next, self.state_dim)?;
        let bootstrap = if terminal {
            0.0
        } else {
            self.q(&self.bin(next)).map_or(0.0, |q| q.iter().cloned().fold(f32::MIN, f32::max))
        };
        let (alpha, gamma, n) = (self.config.alpha, self.config.gamma, self.actions);
        let key = self.bin(state);
        let q = self.table.entry(key).or_insert_with(|| vec![0.0; n]);
        q[action] += alpha * (reward + gamma * bootstrap - q[action]);
        self.steps += 1;
        Ok(())
    }

    pub fn states_visited(&self) -> usize {
        self.table.len()
    }

    /// Saves the table as JSON rows (bin indices → Q-values), sorted for stable bytes.
    pub fn save(&self, dir: &std::path::Path, observation_space: &aware_core::Space) -> Result<(), AgentError> {
        let mut rows: Vec<(&Vec<u8>, &Vec<f32>)> = self.table.iter().collect();
        rows.sort_by(|a, b| a.0.cmp(b.0));
        // The loader refuses non-finite values: never write a table it cannot read back.
        if let Some((key, values)) = rows.iter().find(|(_, values)| values.iter().any(|v| !v.is_finite())) {
            return Err(CheckpointError::Format {
                path: dir.display().to_string(),
                reason: format!("q_table.json: not saved, Q-values {values:?} of state bins {key:?} are not finite"),
            }
            .into());
        }
        let bytes = serde_json::to_vec(&rows).expect("serialisable");
        let space = aware_core::Space::Discrete { n: self.actions };
        let files = [("q_table.json", bytes)];
        crate::checkpoint::check_config(dir, &self.config)?;
        Checkpoint::save(dir, "qtable", &self.config, observation_space, space, self.steps, &files)?;
        Ok(())
    }

    pub fn load(
        dir: &std::path::Path,
        observation_space: &aware_core::Space,
        actions: usize,
        seed: u64,
    ) -> Result<Self, AgentError> {
        let action_space = aware_core::Space::Discrete { n: actions };
        let mut c = Checkpoint::open(dir, &["qtable"], observation_space, &action_space)?;
        let bytes = c.file("q_table.json")?;
        let rows: Vec<(Vec<u8>, Vec<f32>)> =
            serde_json::from_slice(&bytes).map_err(|e| c.error(format!("q_table.json: {e}")))?;
        let mut q = QTable::new(observation_space.dim(), actions, c.config()?, seed);
        for (key, values) in rows {
            if key.len() != q.state_dim || values.len() != actions || values.iter().any(|v| !v.is_finite()) {
                return Err(c.error("q_table.json: a row does not fit the spaces".into()).into());
            }
            q.table.insert(key, values);
        }
        q.steps = c.meta.training_step;
        Ok(q)
    }
}

pub fn argmax(v: &[f32]) -> usize {
    let mut best = 0;
    for (i, x) in v.iter().enumerate() {
        if *x > v[best] {
            best = i;
        }
    }
    best
}
