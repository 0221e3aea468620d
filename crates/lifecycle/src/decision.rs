//! The decision log: for every application and interval, who acted, on what, what it set, what
//! the guard said and — when the agent acted — which state features drove its action, so an
//! operator can see why it scaled (`aware explain`).

use crate::agent::Greedy;
use aware_agents::AgentError;
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

/// The name under which an agent's workload embedding appears among the features behind its
/// action (all its dimensions as one).
pub const EMBEDDING_FEATURE: &str = "workload_embedding";

/// Action dimensions of the agent's relative action space, in order.
pub const ACTION_DIMENSIONS: [&str; 3] = ["cpu", "memory", "replicas"];

/// The features an agent reads that are named one by one in its attributions: the state
/// encoder's, then, for a `residual` agent, the fallback's proposal
/// ([`crate::manager::ASK_FEATURES`]). A workload embedding after them is one feature,
/// [`EMBEDDING_FEATURE`].
pub fn named_features(residual: bool) -> Vec<&'static str> {
    let ask: &[&str] = if residual { &crate::manager::ASK_FEATURES } else { &[] };
    STATE_FEATURES.iter().chain(ask).copied().collect()
}

/// Gradient × input of the greedy actor at `state`: `out[a][f] = ∂π(s)_a/∂s_f · s_f`, the
/// gradient by central differences (ε = 10⁻³) over one batched forward pass. The first `named`
/// features ([`named_features`]) each get their own; a workload embedding beyond them (an agent
/// conditioned on the meta-learner's) gets one, summed over its dimensions — the derivative
/// along the embedding itself, `Σ_f ∂π_a/∂s_f · s_f` over them, from one pair of states — since
/// a single embedding dimension means nothing to an operator and costs two forward rows.
pub fn gradient_times_input(
    agent: &(impl Greedy + ?Sized),
    state: &[f32],
    named: usize,
) -> Result<Vec<Vec<f32>>, AgentError> {
    const EPS: f32 = 1e-3;
    let n = state.len();
    let own = n.min(named);
    // Each feature's direction: a unit step in it (scaled back by its value below), or the
    // embedding's own direction (already scaled by its values).
    let mut directions: Vec<Vec<f32>> = (0..own)
        .map(|f| {
            let mut d = vec![0.0; n];
            d[f] = 1.0;
            d
        })
        .collect();
    if n > own {
        directions.push((0..n).map(|f| if f < own { 0.0 } else { state[f] }).collect());
    }
    let rows = 2 * directions.len();
    let mut batch = Vec::with_capacity(rows * n);
    for d in &directions {
        for sign in [1.0, -1.0] {
            batch.extend(state.iter().zip(d).map(|(s, d)| s + sign * EPS * d));
        }
    }
    let out = agent.greedy_batch(&batch, rows)?;
    let dims = out.len() / rows.max(1);
    Ok((0..dims)
        .map(|a| {
            (0..directions.len())
                .map(|f| {
                    let slope = (out[(2 * f) * dims + a] - out[(2 * f + 1) * dims + a]) / (2.0 * EPS);
                    if f < own { slope * state[f] } else { slope }
                })
                .collect()
        })
        .collect())
}

/// Gradient × input per action dimension (`grads[a][f]`) as shares named by `names` (then the
/// workload embedding), largest first.
pub fn attribution(state: &[f32], action: &[f32], grads: &[Vec<f32>], names: &[&str]) -> Vec<DimensionAttribution> {
    grads
        .iter()
        .zip(action)
        .enumerate()
        .map(|(a, (row, &x))| {
            let mut features: Vec<Share> = row
                .iter()
                .enumerate()
                .map(|(f, &g)| Share {
                    // Past the named features: the workload embedding, as one (its value: its
                    // length).
                    feature: names.get(f).map_or_else(|| EMBEDDING_FEATURE.to_string(), |n| n.to_string()),
                    value: match names.get(f) {
                        Some(_) => state.get(f).copied().unwrap_or(f32::NAN),
                        None => state.get(f..).map_or(f32::NAN, |e| e.iter().map(|v| v * v).sum::<f32>().sqrt()),
                    },
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
