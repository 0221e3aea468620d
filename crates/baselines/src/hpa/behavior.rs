//! How the HPA turns a raw proposal into a replica count: stabilisation windows and rate
//! limits, as in upstream `horizontal.go` (`stabilizeRecommendationWithBehaviors`,
//! `convertDesiredReplicasWithBehaviorRate`, `calculateScale{Up,Down}Limit…`,
//! `storeScaleEvent`) and the legacy path used when an HPA has no `behavior`
//! (`stabilizeRecommendation`, `convertDesiredReplicasWithRules`).

use serde::{Deserialize, Serialize};

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub enum PolicyKind {
    Pods,
    Percent,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct ScalingPolicy {
    pub kind: PolicyKind,
    pub value: i32,
    pub period_s: i32,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, Default)]
pub enum SelectPolicy {
    /// The policy allowing the largest change.
    #[default]
    Max,
    /// The policy allowing the smallest change.
    Min,
    /// No scaling in this direction.
    Disabled,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ScalingRules {
    pub stabilization_window_s: i32,
    pub select_policy: SelectPolicy,
    pub policies: Vec<ScalingPolicy>,
}

/// Partially specified rules, as a user writes them; `None` takes upstream's default.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
pub struct ScalingRulesSpec {
    pub stabilization_window_s: Option<i32>,
    pub select_policy: Option<SelectPolicy>,
    pub policies: Option<Vec<ScalingPolicy>>,
}

impl ScalingRules {
    /// Upstream defaults for scale-up: no stabilisation, at most +4 pods or +100 % per 15 s,
    /// whichever allows more.
    pub fn default_scale_up() -> Self {
        ScalingRules {
            stabilization_window_s: 0,
            select_policy: SelectPolicy::Max,
            policies: vec![
                ScalingPolicy { kind: PolicyKind::Pods, value: 4, period_s: 15 },
                ScalingPolicy { kind: PolicyKind::Percent, value: 100, period_s: 15 },
            ],
        }
    }

    /// Upstream defaults for scale-down: 300 s stabilisation (the controller's
    /// `--horizontal-pod-autoscaler-downscale-stabilization`), up to −100 % per 15 s.
    pub fn default_scale_down(downscale_stabilisation_s: i32) -> Self {
        ScalingRules {
            stabilization_window_s: downscale_stabilisation_s,
            select_policy: SelectPolicy::Max,
            policies: vec![ScalingPolicy { kind: PolicyKind::Percent, value: 100, period_s: 15 }],
        }
    }

    /// `GenerateHPAScale{Up,Down}Rules`: fills what the user left out from `defaults`.
    pub fn from_spec(spec: Option<&ScalingRulesSpec>, defaults: ScalingRules) -> ScalingRules {
        let Some(s) = spec else { return defaults };
        ScalingRules {
            stabilization_window_s: s.stabilization_window_s.unwrap_or(defaults.stabilization_window_s),
            select_policy: s.select_policy.unwrap_or(defaults.select_policy),
            policies: s.policies.clone().unwrap_or(defaults.policies),
        }
    }

    fn longest_period_s(&self) -> i32 {
        self.policies.iter().map(|p| p.period_s).max().unwrap_or(0)
    }
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Behavior {
    pub scale_up: ScalingRules,
    pub scale_down: ScalingRules,
}

/// One recorded scale event: the size of the change and when it happened.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct ScaleEvent {
    pub replica_change: i32,
    pub at_s: f64,
    pub outdated: bool,
}

/// One recorded raw recommendation.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct TimestampedRecommendation {
    pub recommendation: i32,
    pub at_s: f64,
}

/// Why the final count is what it is, with upstream's condition reasons.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub enum Limit {
    DesiredWithinRange,
    TooFewReplicas,
    TooManyReplicas,
    ScaleUpLimit,
    ScaleDownLimit,
}

/// Sum of changes newer than `period_s` (strictly after the cutoff, as `time.After`).
pub fn replicas_change_per_period(now_s: f64, period_s: i32, events: &[ScaleEvent]) -> i32 {
    let cutoff = now_s - period_s as f64;
    events.iter().filter(|e| e.at_s > cutoff).map(|e| e.replica_change).sum()
}

/// Highest count scale-up policies allow now, given recent scale events.
pub fn scale_up_limit(now_s: f64, current: i32, up: &[ScaleEvent], down: &[ScaleEvent], rules: &ScalingRules) -> i32 {
    let (mut result, pick): (i32, fn(i32, i32) -> i32) = match rules.select_policy {
        SelectPolicy::Disabled => return current,
        SelectPolicy::Min => (i32::MAX, i32::min),
        SelectPolicy::Max => (i32::MIN, i32::max),
    };
    for p in &rules.policies {
        let start = current - replicas_change_per_period(now_s, p.period_s, up)
            + replicas_change_per_period(now_s, p.period_s, down);
        let proposed = match p.kind {
            PolicyKind::Pods => start + p.value,
            // Rounded up so that a small percentage on a small count can still add a pod.
            PolicyKind::Percent => (start as f64 * (1.0 + p.value as f64 / 100.0)).ceil() as i32,
        };
        result = pick(result, proposed);
    }
    result
}

/// Lowest count scale-down policies allow now, given recent scale events.
pub fn scale_down_limit(now_s: f64, current: i32, up: &[ScaleEvent], down: &[ScaleEvent], rules: &ScalingRules) -> i32 {
    let (mut result, pick): (i32, fn(i32, i32) -> i32) = match rules.select_policy {
        SelectPolicy::Disabled => return current,
        SelectPolicy::Min => (i32::MIN, i32::max),
        SelectPolicy::Max => (i32::MAX, i32::min),
    };
    for p in &rules.policies {
        let start = current - replicas_change_per_period(now_s, p.period_s, up)
            + replicas_change_per_period(now_s, p.period_s, down);
        let proposed = match p.kind {
            PolicyKind::Pods => start - p.value,
            // Truncated toward zero, as Go's int32 conversion does.
            PolicyKind::Percent => (start as f64 * (1.0 - p.value as f64 / 100.0)) as i32,
        };
        result = pick(result, proposed);
    }
    result
}

/// Inputs of one normalisation.
#[derive(Debug, Clone, Copy)]
pub struct Normalization<'a> {
    pub now_s: f64,
    pub behavior: &'a Behavior,
    pub min_replicas: i32,
    pub max_replicas: i32,
    pub current_replicas: i32,
    pub desired_replicas: i32,
}

/// `stabilizeRecommendationWithBehaviors`: bounds the recommendation by the lowest recent
/// recommendation (scale-up window) and the highest (scale-down window), then records it,
/// reusing a slot older than both windows.
pub fn stabilize_with_behaviors(n: &Normalization, log: &mut Vec<TimestampedRecommendation>) -> i32 {
    let up_cutoff = n.now_s - n.behavior.scale_up.stabilization_window_s as f64;
    let down_cutoff = n.now_s - n.behavior.scale_down.stabilization_window_s as f64;
    let (mut up, mut down) = (n.desired_replicas, n.desired_replicas);
    let mut old_slot = None;
    for (i, rec) in log.iter().enumerate() {
        if rec.at_s > up_cutoff {
            up = up.min(rec.recommendation);
        }
        if rec.at_s > down_cutoff {
            down = down.max(rec.recommendation);
        }
        if rec.at_s < up_cutoff && rec.at_s < down_cutoff {
            old_slot = Some(i);
        }
    }
    let mut recommendation = n.current_replicas;
    if recommendation < up {
        recommendation = up;
    }
    if recommendation > down {
        recommendation = down;
    }
    let entry = TimestampedRecommendation { recommendation: n.desired_replicas, at_s: n.now_s };
    match old_slot {
        Some(i) => log[i] = entry,
        None => log.push(entry),
    }
    recommendation
}

/// `convertDesiredReplicasWithBehaviorRate`: applies the rate limits and min/max.
pub fn convert_with_behavior_rate(n: &Normalization, up: &[ScaleEvent], down: &[ScaleEvent]) -> (i32, Limit) {
    if n.desired_replicas > n.current_replicas {
        let limit = scale_up_limit(n.now_s, n.current_replicas, up, down, &n.behavior.scale_up).max(n.current_replicas);
        let (maximum, reason) = if n.max_replicas > limit {
            (limit, Limit::ScaleUpLimit)
        } else {
            (n.max_replicas, Limit::TooManyReplicas)
        };
        if n.desired_replicas > maximum {
            return (maximum, reason);
        }
    } else if n.desired_replicas < n.current_replicas {
        let limit =
            scale_down_limit(n.now_s, n.current_replicas, up, down, &n.behavior.scale_down).min(n.current_replicas);
        let (minimum, reason) = if n.min_replicas < limit {
            (limit, Limit::ScaleDownLimit)
        } else {
            (n.min_replicas, Limit::TooFewReplicas)
        };
        if n.desired_replicas < minimum {
            return (minimum, reason);
        }
    }
    (n.desired_replicas, Limit::DesiredWithinRange)
}

/// `storeScaleEvent`: records a change, marking events older than the longest policy period
/// of that direction outdated and reusing the last outdated slot.
pub fn store_scale_event(
    now_s: f64,
    behavior: &Behavior,
    up: &mut Vec<ScaleEvent>,
    down: &mut Vec<ScaleEvent>,
    previous: i32,
    new: i32,
) {
    let (events, rules, change) = if new > previous {
        (up, &behavior.scale_up, new - previous)
    } else {
        (down, &behavior.scale_down, previous - new)
    };
    let cutoff = now_s - rules.longest_period_s() as f64;
    let mut old_slot = None;
    for (i, e) in events.iter_mut().enumerate() {
        if e.at_s < cutoff {
            e.outdated = true;
        }
        if e.outdated {
            old_slot = Some(i);
        }
    }
    let event = ScaleEvent { replica_change: change, at_s: now_s, outdated: false };
    match old_slot {
        Some(i) => events[i] = event,
        None => events.push(event),
    }
}

/// Legacy `stabilizeRecommendation`: the highest recommendation within the downscale window.
pub fn stabilize_legacy(now_s: f64, window_s: f64, desired: i32, log: &mut Vec<TimestampedRecommendation>) -> i32 {
    let cutoff = now_s - window_s;
    let mut max = desired;
    let mut old_slot = None;
    for (i, rec) in log.iter().enumerate() {
        if rec.at_s < cutoff {
            old_slot = Some(i);
        } else if rec.recommendation > max {
            max = rec.recommendation;
        }
    }
    let entry = TimestampedRecommendation { recommendation: desired, at_s: now_s };
    match old_slot {
        Some(i) => log[i] = entry,
        None => log.push(entry),
    }
    max
}

/// Legacy `calculateScaleUpLimit`: at most double, or 4, whichever is more.
pub fn legacy_scale_up_limit(current: i32) -> i32 {
    (2.0 * current as f64).max(4.0) as i32
}

/// Legacy `convertDesiredReplicasWithRules`.
pub fn convert_with_rules(current: i32, desired: i32, min: i32, max: i32) -> (i32, Limit) {
    let scale_up_limit = legacy_scale_up_limit(current);
    let (maximum, over) =
        if max > scale_up_limit { (scale_up_limit, Limit::ScaleUpLimit) } else { (max, Limit::TooManyReplicas) };
    if desired < min {
        (min, Limit::TooFewReplicas)
    } else if desired > maximum {
        (maximum, over)
    } else {
        (desired, Limit::DesiredWithinRange)
    }
}
