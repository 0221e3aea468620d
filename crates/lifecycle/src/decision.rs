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
    /// The acting policy's own (greedy) action there, before any exploration (absent in
    /// decisions logged before it was kept).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub greedy: Option<f32>,
    /// Whether the policy's own action there is pinned at a bound of its range (|greedy| ≥
    /// [`SATURATED`]): its tanh output is flat, so a small change of any feature moves it by
    /// nothing and every attribution reads about 0. The features did not stop mattering; the
    /// policy asks for the largest change its range allows (growth at +1, a cut at −1).
    #[serde(default)]
    pub saturated: bool,
    pub features: Vec<Share>,
}

/// |greedy action| from which a dimension counts as saturated ([`DimensionAttribution::saturated`]).
pub const SATURATED: f32 = 0.999;

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
    Ok(greedy_and_gradient_times_input(agent, state, named)?.1)
}

/// The greedy action at `state` and [`gradient_times_input`] there, from the same batched
/// forward pass (`state` itself its last row).
fn greedy_and_gradient_times_input(
    agent: &(impl Greedy + ?Sized),
    state: &[f32],
    named: usize,
) -> Result<(Vec<f32>, Vec<Vec<f32>>), AgentError> {
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
    let rows = 2 * directions.len() + 1;
    let mut batch = Vec::with_capacity(rows * n);
    for d in &directions {
        for sign in [1.0, -1.0] {
            batch.extend(state.iter().zip(d).map(|(s, d)| s + sign * EPS * d));
        }
    }
    batch.extend_from_slice(state);
    let out = agent.greedy_batch(&batch, rows)?;
    let dims = out.len() / rows;
    let grads = (0..dims)
        .map(|a| {
            (0..directions.len())
                .map(|f| {
                    let slope = (out[(2 * f) * dims + a] - out[(2 * f + 1) * dims + a]) / (2.0 * EPS);
                    if f < own { slope * state[f] } else { slope }
                })
                .collect()
        })
        .collect();
    Ok((out[(rows - 1) * dims..].to_vec(), grads))
}

/// Why `policy` took `action` in `state`: its greedy action there and the gradient × input
/// ([`gradient_times_input`]) of each dimension, the first `names` features named.
pub fn explain_action(
    policy: &(impl Greedy + ?Sized),
    state: &[f32],
    action: &[f32],
    names: &[&str],
) -> Result<Vec<DimensionAttribution>, AgentError> {
    let (greedy, grads) = greedy_and_gradient_times_input(policy, state, names.len())?;
    Ok(attribution(state, action, Some(&greedy), &grads, names))
}

/// Gradient × input per action dimension (`grads[a][f]`) as shares named by `names` (then the
/// workload embedding), largest first; with the policy's `greedy` action, when given.
pub fn attribution(
    state: &[f32],
    action: &[f32],
    greedy: Option<&[f32]>,
    grads: &[Vec<f32>],
    names: &[&str],
) -> Vec<DimensionAttribution> {
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
            let greedy = greedy.and_then(|g| g.get(a)).copied();
            DimensionAttribution {
                dimension: ACTION_DIMENSIONS.get(a).map_or_else(|| format!("action_{a}"), |n| n.to_string()),
                action: x,
                greedy,
                saturated: greedy.is_some_and(|g| g.abs() >= SATURATED),
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
    /// What the guard did, with its reasons: `passed` (the proposal went through as it was),
    /// `limited: …` (the agent's proposal clamped, capped, raised or held), `fallback: …` (the
    /// observation was refused to the agent and the fallback acted); where the fallback acts,
    /// what its rules' net changed follows (`lowered: …` back to what the pods last ran, none
    /// of them on a node; `restored: …` what the fallback does not set, back to the
    /// deployment; `raised: …` above the floor an OOM kill left), after `; ` when it follows
    /// a `fallback: …`.
    pub guard: String,
    /// For the agent's actions: the state features behind each action dimension.
    pub attribution: Option<Vec<DimensionAttribution>>,
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A policy whose every action dimension is tanh(`gain` · (s₀ + 2·s₁)).
    struct Tanh {
        gain: f32,
    }

    impl Greedy for Tanh {
        fn greedy_batch(&self, states: &[f32], n: usize) -> Result<Vec<f32>, AgentError> {
            let width = states.len() / n;
            Ok(states.chunks(width).flat_map(|s| [(self.gain * (s[0] + 2.0 * s[1])).tanh(); 3]).collect())
        }
    }

    /// An operator is told when a dimension is pinned at its bound (every attribution about 0
    /// there says nothing), and when the action taken is not the policy's own (it explored).
    #[test]
    fn a_saturated_dimension_is_said_to_be_and_its_own_action_is_kept() {
        let names = ["a", "b"];
        let state = [0.5, 0.25];
        let linear = explain_action(&Tanh { gain: 0.1 }, &state, &[0.3, 0.0, 0.0], &names).unwrap();
        let own = (0.1f32 * 1.0).tanh();
        assert!(linear.iter().all(|d| !d.saturated && d.greedy.is_some_and(|g| (g - own).abs() < 1e-6)), "{linear:?}");
        // b (value 0.25, weight 2) drives it as much as a (0.5, 1): both ≈ 0.1 · 0.5 · (1 − own²).
        assert!(
            linear[0].features.iter().all(|f| (f.attribution - 0.05 * (1.0 - own * own)).abs() < 1e-3),
            "{linear:?}"
        );
        assert_eq!(linear[0].action, 0.3);
        let pinned = explain_action(&Tanh { gain: 50.0 }, &state, &[-0.94, 1.0, 1.0], &names).unwrap();
        assert!(pinned.iter().all(|d| d.saturated), "{pinned:?}");
        assert!(pinned.iter().flat_map(|d| &d.features).all(|f| f.attribution.abs() < 1e-3), "{pinned:?}");
        // Logged decisions from before the field read back unsaturated, without a greedy action.
        let old: DimensionAttribution =
            serde_json::from_str(r#"{"dimension":"cpu","action":-0.9,"features":[]}"#).unwrap();
        assert!(!old.saturated && old.greedy.is_none());
    }
}
