//! The AWARE reward: `r = α·SP·|R| + (1−α)·Σ_{i∈R} RU_i − penalties`, R = {CPU, memory}.

use aware_core::profile::RewardWeights;

/// Number of resources in R (CPU and memory): the weight that puts the SLO term on the same
/// scale as the summed utilisations.
pub const RESOURCES: f64 = 2.0;

/// SLO preservation in [0, 1]: `min(1, SLO / measured)` for latency, `min(1, measured / SLO)`
/// for throughput, the smaller of the two when both are set, 1 when neither is. A workload that
/// received requests but served none has SP 0.
pub fn slo_preservation(
    latency_slo_ms: Option<f64>,
    throughput_slo_rps: Option<f64>,
    latency_p99_ms: Option<f64>,
    throughput_rps: f64,
    arrival_rps: f64,
) -> f64 {
    let latency = match (latency_slo_ms, latency_p99_ms) {
        (None, _) => 1.0,
        (Some(slo), Some(l)) if l > 0.0 => (slo / l).min(1.0),
        (Some(_), Some(_)) => 1.0,
        (Some(_), None) => {
            if arrival_rps > 0.0 {
                0.0
            } else {
                1.0
            }
        }
    };
    let throughput = match throughput_slo_rps {
        None => 1.0,
        Some(slo) => (throughput_rps / slo).min(1.0),
    };
    latency.min(throughput).clamp(0.0, 1.0)
}

#[derive(Debug, Clone, PartialEq)]
pub struct RewardFunction {
    pub weights: RewardWeights,
}

impl RewardFunction {
    /// Lowest value the reward can take.
    pub fn min(&self) -> f64 {
        -(self.weights.illegal_action_penalty + self.weights.oscillation_penalty)
    }

    /// Highest value: SLO met with both resources fully used.
    pub fn max(&self) -> f64 {
        RESOURCES
    }

    /// `sp`, `cpu` and `memory` are clamped into [0, 1] so that the documented bounds always hold.
    pub fn reward(&self, sp: f64, cpu: f64, memory: f64, illegal: bool, oscillation: bool) -> f64 {
        let a = self.weights.alpha;
        let unit = |v: f64| if v.is_finite() { v.clamp(0.0, 1.0) } else { 0.0 };
        let mut r = a * unit(sp) * RESOURCES + (1.0 - a) * (unit(cpu) + unit(memory));
        if illegal {
            r -= self.weights.illegal_action_penalty;
        }
        if oscillation {
            r -= self.weights.oscillation_penalty;
        }
        r
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use aware_core::Profile;
    use proptest::prelude::*;

    #[test]
    fn slo_preservation_table() {
        // (latency slo, throughput slo, p99, throughput, arrivals, expected)
        let cases = [
            (Some(100.0), None, Some(50.0), 10.0, 10.0, 1.0),
            (Some(100.0), None, Some(200.0), 10.0, 10.0, 0.5),
            (Some(100.0), None, None, 0.0, 10.0, 0.0),
            (Some(100.0), None, None, 0.0, 0.0, 1.0),
            (None, Some(20.0), None, 10.0, 10.0, 0.5),
            (None, Some(20.0), None, 40.0, 40.0, 1.0),
            (Some(100.0), Some(20.0), Some(400.0), 10.0, 10.0, 0.25),
            (None, None, Some(1e9), 0.0, 5.0, 1.0),
        ];
        for (ls, ts, p99, thr, arr, want) in cases {
            assert_eq!(slo_preservation(ls, ts, p99, thr, arr), want, "{ls:?} {ts:?} {p99:?} {thr} {arr}");
        }
    }

    #[test]
    fn reward_matches_formula() {
        let f = RewardFunction { weights: Profile::default().reward };
        let a = f.weights.alpha;
        assert!((f.reward(1.0, 0.5, 0.25, false, false) - (2.0 * a + (1.0 - a) * 0.75)).abs() < 1e-12);
        assert!((f.reward(1.0, 1.0, 1.0, false, false) - 2.0).abs() < 1e-12);
        let penalised = f.reward(1.0, 1.0, 1.0, true, true);
        assert!((f.max() - penalised - f.weights.illegal_action_penalty - f.weights.oscillation_penalty).abs() < 1e-12);
    }

    proptest! {
        #[test]
        fn reward_is_within_documented_bounds(
            alpha in 0.0f64..=1.0, sp in -1.0f64..2.0, cpu in -1.0f64..2.0, mem in -1.0f64..2.0,
            illegal: bool, osc: bool, pi in 0.0f64..10.0, po in 0.0f64..10.0,
        ) {
            let f = RewardFunction { weights: RewardWeights { alpha, illegal_action_penalty: pi, oscillation_penalty: po } };
            let r = f.reward(sp, cpu, mem, illegal, osc);
            prop_assert!(r >= f.min() - 1e-12 && r <= f.max() + 1e-12, "{r}");
        }
    }
}
