//! Serving many agents at once: the policy networks of every agent of a category stacked into
//! one set of weight tensors `[agents, in, out]`, so one forward pass per step computes every
//! agent's action (row `a` of the input through agent `a`'s own weights — a batched matrix
//! product over the stacked weights). Equal to each agent's own forward up to float rounding
//! (tested).

use aware_agents::net::{Activation, FrozenLinear};

use crate::SimppoError;

/// One layer of every agent: weights `[agents][k × m]` (row-major, input-major as
/// [`FrozenLinear`]) and biases `[agents][m]`, contiguous.
#[derive(Debug, Clone)]
struct StackedLayer {
    weights: Vec<f32>,
    biases: Vec<f32>,
    k: usize,
    m: usize,
}

/// The stacked policies of a group of agents.
#[derive(Debug, Clone)]
pub struct BatchedPolicy {
    layers: Vec<StackedLayer>,
    agents: usize,
    activation: Activation,
}

impl BatchedPolicy {
    /// Stacks the agents' policy layers (as `aware_agents::ppo::Ppo::policy_layers` gives
    /// them); every agent's network must have the same shape.
    pub fn stack(agents: &[Vec<FrozenLinear>], activation: Activation) -> Result<Self, SimppoError> {
        let Some(first) = agents.first() else {
            return Ok(Self { layers: Vec::new(), agents: 0, activation });
        };
        let mut layers: Vec<StackedLayer> = first
            .iter()
            .map(|(_, _, k, m)| StackedLayer {
                weights: Vec::with_capacity(agents.len() * k * m),
                biases: Vec::with_capacity(agents.len() * m),
                k: *k,
                m: *m,
            })
            .collect();
        for (a, net) in agents.iter().enumerate() {
            if net.len() != layers.len() {
                return Err(SimppoError::input(
                    "policy",
                    format!("agent {a} has {} layers, agent 0 {}", net.len(), layers.len()),
                ));
            }
            for (l, (w, b, k, m)) in layers.iter_mut().zip(net) {
                if (*k, *m) != (l.k, l.m) || w.len() != k * m || b.len() != *m {
                    return Err(SimppoError::input(
                        "policy",
                        format!("agent {a}: layer {k}×{m} differs from agent 0's {}×{}", l.k, l.m),
                    ));
                }
                l.weights.extend_from_slice(w);
                l.biases.extend_from_slice(b);
            }
        }
        Ok(Self { layers, agents: agents.len(), activation })
    }

    pub fn agents(&self) -> usize {
        self.agents
    }

    pub fn input_dim(&self) -> usize {
        self.layers.first().map_or(0, |l| l.k)
    }

    pub fn output_dim(&self) -> usize {
        self.layers.last().map_or(0, |l| l.m)
    }

    /// Bytes of stacked weights and biases.
    pub fn bytes(&self) -> usize {
        self.layers.iter().map(|l| (l.weights.len() + l.biases.len()) * std::mem::size_of::<f32>()).sum()
    }

    /// Row `a` of `states` (`agents × input_dim`, row-major) through agent `a`'s network;
    /// `agents × output_dim` outputs (logits for a discrete policy).
    pub fn forward(&self, states: &[f32]) -> Result<Vec<f32>, SimppoError> {
        if states.len() != self.agents * self.input_dim() {
            return Err(SimppoError::input(
                "states",
                format!("{} values for {} agents × {} inputs", states.len(), self.agents, self.input_dim()),
            ));
        }
        if let Some(i) = states.iter().position(|v| !v.is_finite()) {
            return Err(SimppoError::input(
                "states",
                format!("row {} holds {}", i / self.input_dim().max(1), states[i]),
            ));
        }
        let mut x = states.to_vec();
        let last = self.layers.len().saturating_sub(1);
        for (li, l) in self.layers.iter().enumerate() {
            let mut out = l.biases.clone();
            for a in 0..self.agents {
                let w = &l.weights[a * l.k * l.m..(a + 1) * l.k * l.m];
                let xa = &x[a * l.k..(a + 1) * l.k];
                let oa = &mut out[a * l.m..(a + 1) * l.m];
                for (r, &xv) in xa.iter().enumerate() {
                    if xv == 0.0 {
                        continue;
                    }
                    for (o, wv) in oa.iter_mut().zip(&w[r * l.m..(r + 1) * l.m]) {
                        *o += xv * wv;
                    }
                }
            }
            if li < last {
                match self.activation {
                    Activation::Tanh => out.iter_mut().for_each(|v| *v = v.tanh()),
                    _ => out.iter_mut().for_each(|v| *v = v.max(0.0)),
                }
            }
            x = out;
        }
        Ok(x)
    }

    /// The greedy discrete action of every agent: the argmax of its logits.
    pub fn greedy(&self, states: &[f32]) -> Result<Vec<usize>, SimppoError> {
        let m = self.output_dim().max(1);
        Ok(self
            .forward(states)?
            .chunks(m)
            .map(|row| {
                let mut best = 0;
                for (i, v) in row.iter().enumerate() {
                    if *v > row[best] {
                        best = i;
                    }
                }
                best
            })
            .collect())
    }
}
