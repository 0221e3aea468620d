//! The reward: `r = α·SP·|R| + (1−α)·[SP = 1]·Σ_{i∈R} RU_i − penalties`, R = {CPU, memory}.
//!
//! AWARE's reward is `α·SP·|R| + (1−α)·Σ RU_i`. Taken literally it pays for starving the
//! application: a starved app runs at full utilisation, and at α = 0.3 the utilisation terms
//! (up to 1.4) outweigh the whole SLO term (0.6), so a policy violating its SLO in every interval
//! out-earns one that serves. Two changes make the reward rank policies as an operator does:
//!
//! - **SP counts lost requests.** SLO preservation is the smaller of the latency/throughput
//!   preservation and the served share of the demand ([`served_preservation`]): an interval that
//!   drops more than [`DROP_TOLERANCE`] of its requests (or lets them pile up unserved) is not
//!   meeting its SLO, however fast the requests it did serve were.
//! - **Utilisation is only paid while the SLO is met** (`SP = 1`). Any interval that meets its SLO
//!   then earns at least `2α`, and any interval that misses it at most `2α·SP < 2α`, for every α:
//!   meeting the SLO always beats missing it, and among intervals that meet it the cheaper
//!   allocation (higher utilisation) earns more. So "fewer core-seconds with no more SLO
//!   violations" and "fewer violations with no more core-seconds" both earn more reward.
//!
//! α keeps the papers' default of 0.3: with the gate it no longer decides whether starving pays
//! (it never does), only how steep the slope of missing the SLO is against the efficiency bonus.

use aware_core::RewardWeights;

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

/// Share of an interval's requests that may be dropped before the interval violates its SLO —
/// the same 1 % the simulator's ground truth uses.
pub const DROP_TOLERANCE: f64 = 0.01;

/// The served share of the demand as SLO preservation in [0, 1]: 1 while at most
/// [`DROP_TOLERANCE`] of the `arrivals` were `dropped`, falling linearly to 0 when none were
/// served. No arrivals is 1.
pub fn served_preservation(dropped: f64, arrivals: f64) -> f64 {
    // NaN arrivals count as none; a NaN or infinite drop count with demand preserves nothing.
    let has_demand = arrivals > 0.0;
    if !has_demand || !dropped.is_finite() {
        return if has_demand { 0.0 } else { 1.0 };
    }
    let served = (1.0 - dropped.max(0.0) / arrivals).clamp(0.0, 1.0);
    (served / (1.0 - DROP_TOLERANCE)).min(1.0)
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

    /// `sp`, `cpu` and `memory` are clamped into [0, 1] so that the documented bounds always hold;
    /// the utilisation terms count only when the SLO is met (`sp` = 1).
    pub fn reward(&self, sp: f64, cpu: f64, memory: f64, illegal: bool, oscillation: bool) -> f64 {
        let a = self.weights.alpha;
        let unit = |v: f64| if v.is_finite() { v.clamp(0.0, 1.0) } else { 0.0 };
        let sp = unit(sp);
        let efficiency = if sp >= 1.0 { unit(cpu) + unit(memory) } else { 0.0 };
        let mut r = a * sp * RESOURCES + (1.0 - a) * efficiency;
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
        // A missed SLO earns no utilisation: starving never pays.
        assert!((f.reward(0.9, 1.0, 1.0, false, false) - 2.0 * a * 0.9).abs() < 1e-12);
        let penalised = f.reward(1.0, 1.0, 1.0, true, true);
        assert!((f.max() - penalised - f.weights.illegal_action_penalty - f.weights.oscillation_penalty).abs() < 1e-12);
    }

    #[test]
    fn served_preservation_table() {
        // (dropped, arrivals, expected)
        let cases = [
            (0.0, 100.0, 1.0),
            (1.0, 100.0, 1.0),
            (50.0, 100.0, 0.5 / 0.99),
            (100.0, 100.0, 0.0),
            (150.0, 100.0, 0.0),
            (0.0, 0.0, 1.0),
            (f64::NAN, 10.0, 0.0),
        ];
        for (d, a, want) in cases {
            assert!((served_preservation(d, a) - want).abs() < 1e-12, "{d} of {a}");
        }
    }

    proptest! {
        /// Meeting the SLO earns at least as much as missing it, whatever the utilisations.
        #[test]
        fn meeting_the_slo_always_beats_missing_it(
            alpha in 0.0f64..=1.0, sp in 0.0f64..0.999_999, c1 in 0.0f64..1.0, m1 in 0.0f64..1.0,
            c2 in 0.0f64..1.0, m2 in 0.0f64..1.0,
        ) {
            let f = RewardFunction { weights: RewardWeights { alpha, illegal_action_penalty: 0.1, oscillation_penalty: 0.05 } };
            prop_assert!(f.reward(1.0, c1, m1, false, false) >= f.reward(sp, c2, m2, false, false));
        }

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
