//! The decision log: for every application and interval, who acted, on what, what it set, what
//! the guard said and — when the agent acted — which state features drove its action, so an
//! operator can see why it scaled (`aware explain`).

use aware_agents::AgentError;
use aware_agents::ddpg::Ddpg;
use aware_core::{Observation, Recommendation};
use aware_env::STATE_FEATURES;
use serde::{Deserialize, Serialize};

use crate::stage::Stage;

/// What the acting policy saw.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Seen {
    pub replicas: u32,
    pub cpu_limit_millicores: u64,
    pub memory_limit_bytes: u64,
    pub arrival_rate_per_s: f64,
    /// Mean CPU usage / request over ready pods; absent without samples.
    pub cpu_utilisation: Option<f64>,
    pub latency_p99_ms: Option<f64>,
}

impl Seen {
    pub fn of(obs: &Observation) -> Self {
        let finite = |v: f64| v.is_finite().then_some(v);
        Self {
            replicas: obs.desired_replicas,
            cpu_limit_millicores: obs.template.limits.cpu_millicores,
            memory_limit_bytes: obs.template.limits.memory_bytes,
            arrival_rate_per_s: if obs.arrival_rate.is_finite() { obs.arrival_rate } else { 0.0 },
            cpu_utilisation: obs.cpu_utilisation().and_then(finite),
            latency_p99_ms: obs.latency_p99_ms.and_then(finite),
        }
    }
}

/// What was set: the allocation after the guard, or nothing (the app kept its allocation).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Set {
    pub replicas: u32,
    pub cpu_millicores: u64,
    pub memory_bytes: u64,
}

impl Set {
    pub fn of(rec: &Recommendation) -> Option<Self> {
        rec.containers.first().map(|c| Set {
            replicas: rec.replicas,
            cpu_millicores: c.limits.cpu_millicores,
            memory_bytes: c.limits.memory_bytes,
        })
    }
}

/// One state feature's share in one action dimension: gradient × input.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Share {
    pub feature: String,
    pub value: f32,
    pub attribution: f32,
}

/// The features behind one dimension of the agent's action, largest |attribution| first.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct DimensionAttribution {
    /// `cpu`, `memory` or `replicas`.
    pub dimension: String,
    /// The agent's raw action in that dimension (log₂ of the change over its range).
    pub action: f32,
    pub features: Vec<Share>,
}

/// Action dimensions of the agent's relative action space, in order.
pub const ACTION_DIMENSIONS: [&str; 3] = ["cpu", "memory", "replicas"];

/// Gradient × input of the greedy actor at `state`: `out[a][f] = ∂π(s)_a/∂s_f · s_f`, the
/// gradient by central differences (ε = 10⁻³) over one batched forward pass of 2·|s| states.
pub fn gradient_times_input(agent: &Ddpg, state: &[f32]) -> Result<Vec<Vec<f32>>, AgentError> {
    const EPS: f32 = 1e-3;
    let n = state.len();
    let mut batch = Vec::with_capacity(2 * n * n);
    for f in 0..n {
        for sign in [1.0, -1.0] {
            let mut s = state.to_vec();
            s[f] += sign * EPS;
            batch.extend_from_slice(&s);
        }
    }
    let out = agent.greedy_batch(&batch, 2 * n)?;
    let dims = out.len() / (2 * n).max(1);
    Ok((0..dims)
        .map(|a| {
            (0..n)
                .map(|f| {
                    let plus = out[(2 * f) * dims + a];
                    let minus = out[(2 * f + 1) * dims + a];
                    (plus - minus) / (2.0 * EPS) * state[f]
                })
                .collect()
        })
        .collect())
}

/// Gradient × input per action dimension (`grads[a][f]`) as named shares, largest first.
pub fn attribution(state: &[f32], action: &[f32], grads: &[Vec<f32>]) -> Vec<DimensionAttribution> {
    grads
        .iter()
        .zip(action)
        .enumerate()
        .map(|(a, (row, &x))| {
            let mut features: Vec<Share> = row
                .iter()
                .zip(state)
                .enumerate()
                .map(|(f, (&g, &v))| Share {
                    // Past the state encoder's features: the workload embedding's dimensions
                    // (an agent conditioned on the meta-learner's embedding).
                    feature: STATE_FEATURES
                        .get(f)
                        .map_or_else(|| format!("embedding_{}", f - STATE_FEATURES.len()), |n| n.to_string()),
                    value: v,
                    attribution: g,
                })
                .collect();
            features.sort_by(|p, q| q.attribution.abs().total_cmp(&p.attribution.abs()));
            DimensionAttribution {
                dimension: ACTION_DIMENSIONS.get(a).map_or_else(|| format!("action_{a}"), |n| n.to_string()),
                action: x,
                features,
            }
        })
        .collect()
}

/// One decision of the lifecycle manager for one application in one interval.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Decision {
    pub app: String,
    /// Interval since the run started.
    pub step: u64,
    pub stage: Stage,
    /// `aware` when the agent proposed, else the fallback's name.
    pub acting_policy: String,
    /// `None`: the backend gave no observation (the allocation was kept).
    pub observation: Option<Seen>,
    /// `None`: the app kept its allocation (no proposal).
    pub action: Option<Set>,
    /// `passed`, `limited: …` or `fallback: …` (the observation was refused to the agent).
    pub guard: String,
    /// For the agent's actions: the state features behind each action dimension.
    pub attribution: Option<Vec<DimensionAttribution>>,
}
