//! VPA's estimators (upstream `pkg/recommender/logic/estimator.go` and `recommender.go`),
//! composed the same way: percentile → safety margin → confidence multiplier (bounds only) →
//! minimum resources. Amounts are upstream's integer `ResourceAmount`s: millicores and bytes,
//! truncated, capped at 1e14.

use std::collections::BTreeMap;

use serde::Serialize;

use super::model::{AggregateContainerState, CONFIDENCE_INTERVAL_S};

/// Upstream's `MaxResourceAmount`.
pub const MAX_RESOURCE_AMOUNT: i64 = 100_000_000_000_000;

/// `resourceAmountFromFloat`: truncation, with overflow (and +∞) capped.
pub fn amount_from_float(v: f64) -> i64 {
    if v.is_nan() || v <= 0.0 {
        0
    } else if v >= MAX_RESOURCE_AMOUNT as f64 {
        MAX_RESOURCE_AMOUNT
    } else {
        v as i64
    }
}

pub fn scale_amount(amount: i64, factor: f64) -> i64 {
    amount_from_float(amount as f64 * factor)
}

/// CPU in millicores and memory in bytes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, serde::Serialize, serde::Deserialize)]
pub struct Amounts {
    pub cpu_millicores: i64,
    pub memory_bytes: i64,
}

impl Amounts {
    pub fn map(self, f: impl Fn(i64) -> i64) -> Amounts {
        Amounts { cpu_millicores: f(self.cpu_millicores), memory_bytes: f(self.memory_bytes) }
    }
}

/// One estimator of the chain.
#[derive(Debug, Clone, PartialEq)]
pub enum Estimator {
    /// A fixed answer (upstream's test helper `constEstimator`).
    Const(Amounts),
    /// The CPU usage percentile and the memory-peak percentile.
    Percentile { cpu: f64, memory: f64 },
    /// Adds `fraction` of the base estimate.
    Margin { fraction: f64, base: Box<Estimator> },
    /// Multiplies by `(1 + multiplier / confidence) ^ exponent`: wide bounds on short history;
    /// confidence is measured in `interval_s` (`--confidence-interval`, 24 h by default).
    Confidence { multiplier: f64, exponent: f64, interval_s: f64, base: Box<Estimator> },
    /// Raises each resource to at least `min`.
    MinResources { min: Amounts, base: Box<Estimator> },
}

impl Estimator {
    pub fn estimate(&self, s: &AggregateContainerState) -> Amounts {
        match self {
            Estimator::Const(a) => *a,
            Estimator::Percentile { cpu, memory } => Amounts {
                cpu_millicores: amount_from_float(s.cpu.percentile(*cpu) * 1000.0),
                memory_bytes: amount_from_float(s.memory_peaks.percentile(*memory)),
            },
            Estimator::Margin { fraction, base } => base.estimate(s).map(|a| a + scale_amount(a, *fraction)),
            Estimator::Confidence { multiplier, exponent, interval_s, base } => {
                let factor = (1.0 + multiplier / s.confidence_over(*interval_s)).powf(*exponent);
                base.estimate(s).map(|a| scale_amount(a, factor))
            }
            Estimator::MinResources { min, base } => {
                let e = base.estimate(s);
                Amounts {
                    cpu_millicores: e.cpu_millicores.max(min.cpu_millicores),
                    memory_bytes: e.memory_bytes.max(min.memory_bytes),
                }
            }
        }
    }
}

/// `--recommendation-margin-fraction`.
pub const SAFETY_MARGIN_FRACTION: f64 = 0.15;
/// `--pod-recommendation-min-cpu-millicores`.
pub const POD_MIN_CPU_MILLICORES: f64 = 25.0;
/// `--pod-recommendation-min-memory-mb` (MiB).
pub const POD_MIN_MEMORY_MB: f64 = 250.0;

/// Target, lower and upper bound for one container.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
pub struct RecommendedResources {
    pub target: Amounts,
    pub lower_bound: Amounts,
    pub upper_bound: Amounts,
}

/// `CreatePodResourceRecommender`: target p90, lower p50, upper p95 (CPU and memory peaks),
/// each with the 15 % margin; the upper bound × (1 + 1/days)¹, the lower × (1 + 0.001/days)⁻².
#[derive(Debug, Clone, PartialEq)]
pub struct PodResourceRecommender {
    pub target: Estimator,
    pub lower_bound: Estimator,
    pub upper_bound: Estimator,
    /// Pod-level minimum CPU, millicores (`--pod-recommendation-min-cpu-millicores`).
    pub min_cpu_millicores: f64,
    /// Pod-level minimum memory, MiB (`--pod-recommendation-min-memory-mb`).
    pub min_memory_mb: f64,
}

/// Amounts of the resources a container's VPA controls; the others are left out.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize)]
pub struct ControlledAmounts {
    #[serde(skip_serializing_if = "Option::is_none")]
    pub cpu_millicores: Option<i64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub memory_bytes: Option<i64>,
}

impl ControlledAmounts {
    fn of(a: Amounts, s: &AggregateContainerState) -> Self {
        ControlledAmounts {
            cpu_millicores: s.controls_cpu.then_some(a.cpu_millicores),
            memory_bytes: s.controls_memory.then_some(a.memory_bytes),
        }
    }
}

/// One entry of a VPA's `status.recommendation.containerRecommendations`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct ContainerRecommendation {
    pub container_name: String,
    pub target: ControlledAmounts,
    pub lower_bound: ControlledAmounts,
    pub upper_bound: ControlledAmounts,
}

/// Upstream `MapToListOfRecommendedContainerResources`: the recommendations as a list sorted by
/// container name.
pub fn map_to_list(recommendations: &BTreeMap<String, ContainerRecommendation>) -> Vec<ContainerRecommendation> {
    // A BTreeMap iterates in name order already.
    recommendations.values().cloned().collect()
}

impl Default for PodResourceRecommender {
    fn default() -> Self {
        let margin = |cpu, memory| Estimator::Margin {
            fraction: SAFETY_MARGIN_FRACTION,
            base: Box::new(Estimator::Percentile { cpu, memory }),
        };
        Self {
            target: margin(0.9, 0.9),
            lower_bound: Estimator::Confidence {
                multiplier: 0.001,
                exponent: -2.0,
                interval_s: CONFIDENCE_INTERVAL_S,
                base: Box::new(margin(0.5, 0.5)),
            },
            upper_bound: Estimator::Confidence {
                multiplier: 1.0,
                exponent: 1.0,
                interval_s: CONFIDENCE_INTERVAL_S,
                base: Box::new(margin(0.95, 0.95)),
            },
            min_cpu_millicores: POD_MIN_CPU_MILLICORES,
            min_memory_mb: POD_MIN_MEMORY_MB,
        }
    }
}

impl PodResourceRecommender {
    /// Recommends for every container of a pod; the pod-level minimum (25 m, 250 MiB) is split
    /// evenly across its containers.
    pub fn recommend(&self, containers: &[&AggregateContainerState]) -> Vec<RecommendedResources> {
        if containers.is_empty() {
            return Vec::new();
        }
        let fraction = 1.0 / containers.len() as f64;
        let min = Amounts {
            cpu_millicores: scale_amount(amount_from_float(self.min_cpu_millicores * 0.001 * 1000.0), fraction),
            memory_bytes: scale_amount(amount_from_float(self.min_memory_mb * 1024.0 * 1024.0), fraction),
        };
        let with_min = |e: &Estimator| Estimator::MinResources { min, base: Box::new(e.clone()) };
        let (t, l, u) = (with_min(&self.target), with_min(&self.lower_bound), with_min(&self.upper_bound));
        containers
            .iter()
            .map(|s| RecommendedResources {
                target: t.estimate(s),
                lower_bound: l.estimate(s),
                upper_bound: u.estimate(s),
            })
            .collect()
    }

    /// Upstream `GetRecommendedPodResources`: per container name, target and bounds of the
    /// resources that container's VPA controls.
    pub fn recommend_pod(
        &self,
        containers: &BTreeMap<String, &AggregateContainerState>,
    ) -> BTreeMap<String, ContainerRecommendation> {
        let states: Vec<&AggregateContainerState> = containers.values().copied().collect();
        containers
            .iter()
            .zip(self.recommend(&states))
            .map(|((name, s), r)| {
                let rec = ContainerRecommendation {
                    container_name: name.clone(),
                    target: ControlledAmounts::of(r.target, s),
                    lower_bound: ControlledAmounts::of(r.lower_bound, s),
                    upper_bound: ControlledAmounts::of(r.upper_bound, s),
                };
                (name.clone(), rec)
            })
            .collect()
    }
}
