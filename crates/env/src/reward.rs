//! The reward: `r = (1−α)·|R|·([SP = 1]·(1 − cost) − [SP < 1]·(idle + unserved)) −
//! α·|R|·(1 − SP) − penalties`, |R| = 2 (CPU, memory): the efficiency earned while the SLO is
//! met, less what is left idle and what is left unserved while it is missed, less the SLO's
//! shortfall.
//!
//! AWARE's reward is `α·SP·|R| + (1−α)·Σ_{i∈R} RU_i`: SLO preservation plus the utilisation of
//! each resource. Taken literally it pays for starving the application: a starved app runs at
//! full utilisation, and at α = 0.3 the utilisation terms (up to 1.4) outweigh the whole SLO term
//! (0.6), so a policy violating its SLO in every interval out-earns one that serves. Gating the
//! utilisation on the SLO being met fixes that, but per-interval utilisation still ranks policies
//! differently from the operator, who compares SLO-violating intervals and core-seconds
//! ("A beats B" = fewer core-seconds with no more violations, or the reverse):
//!
//! - **Utilisation is a ratio per interval; the bill is a sum.** Squeezing a quiet interval
//!   raises its utilisation far more than the same cores saved at the peak, so a policy can earn
//!   more while spending more core-seconds. Measured: in `aware experiment fig10 --quick` (seeds
//!   1–3) 3 of 10 pairs where one policy beat another in the operator's sense were ranked the
//!   other way round, e.g. an agent with 48 SLO-violating intervals and 780,945 core-seconds
//!   earning more than the MPA default with 6 and 777,135.
//! - **Memory utilisation was paid like CPU**, so a learner squeezed memory: 2,196 OOM kills and
//!   14× the MPA default's SLO violations, at a reward equal to the default's.
//!
//! So the efficiency term is one minus the allocation's *cost*, a linear charge whose sum over
//! an episode is the core-seconds (and GiB-seconds) reserved:
//!
//! - `cost` = Σ over the app's scheduled pods of (CPU cores + `memory_price` × memory GiB)
//!   requested, what the operator's core-seconds count, over the app's cost scale
//!   `max_replicas` × 1 core, up to [`COST_KNEE`] and rising more slowly to 1 beyond it
//!   ([`RewardFunction::cost`]). A pod is charged
//!   what its node holds for it, as the bill counts it (`PodObservation::allocated`): a resize
//!   once admitted, a memory decrease the kubelet defers at its new size, a resize no node can
//!   fit not at all. (Charging the template's requests as soon as they were asked for left one
//!   pair misranked on `fig10 --quick` seed 3: a policy that kept asking for more than its node
//!   could give earned a quarter of what one with the same violations earned.) Pending pods hold
//!   nothing and cost nothing; pods draining after a scale-down are billed but not observed, so
//!   not charged.
//!   `memory_price` (profile `reward.memory_price`, default 0.134) is what a GiB costs in cores:
//!   the ratio of on-demand GiB-hour to vCPU-hour prices of general-purpose cloud machines,
//!   about 1 : 7.5.
//! - **An interval that misses the SLO is charged only what its pods leave idle.** Charging its
//!   whole allocation paid a policy for cutting resources further once the SLO was already lost,
//!   a slope towards starvation: measured with the whole charge in every interval, PPO in `aware
//!   experiment agents --quick` learned to starve its app (3,000 of 3,000 intervals violating,
//!   0.0001 per interval). Charging nothing there (until session 58) made growth inside violations
//!   that no allocation avoids free: in `fig9 --quick` seed 38 a retraining agent reserved 1.26 M
//!   and 1.89 M core-seconds in the two scenarios where every row violated in 2,700 intervals,
//!   against 0.98 M and 1.60 M without retraining, and the reward could not tell (13 pairs of
//!   policies misranked on seed 36). So a violating interval is charged the cost of the idle
//!   share of what its pods hold, each resource's allocation times one minus its utilisation
//!   ([`RewardFunction::idle_cost`]): a starved app runs its pods full and is not charged for
//!   them, and cores that sit idle while the SLO is lost anyway (latency the cores do not set, a
//!   payload no allocation serves) cost what they cost when it is met.
//! - **…and what it leaves unserved.** Idle cores alone paid for starving where the SLO is lost
//!   by latency whatever the allocation: SP is then already near 0, so the shortfall term no
//!   longer falls as requests are dropped. Measured on `fig9 --quick` seeds 36 and 38, the
//!   reference cut its app until it dropped 98 % of its requests (MPA: 11 %), at a higher
//!   reward. So a violating interval is also charged its unserved share, `1 −`
//!   [`served_preservation`] (0 within the 1 % drop tolerance), at the same rate as the cost
//!   scale: dropping a tenth of the demand costs what a tenth of the scale (about 40 % of the
//!   app's peak need) costs. Cutting pods that are busy drops requests and is charged for it;
//!   cutting pods that are idle is not.
//! - An episode's return is then a constant, minus `(1−α)·|R|` per SLO-violating interval,
//!   minus a multiple of the core-seconds reserved while meeting the SLO and of those left idle
//!   while missing it (below the knee, see below) and of the share of the demand dropped while
//!   missing it, minus `α·|R|·(1 − SP)` for how deep the violations went. Policies the operator ranks are ranked alike unless they
//!   differ by a handful of violations of very different depth, or one spent its core-seconds
//!   busy inside its violations (`aware_lab::evaluate::reward_misrankings` reports any such
//!   pair, app by app, in every comparison).
//! - **Starving never pays:** an interval that meets its SLO earns at least 0 (cost ≤ 1); one
//!   that misses it less than 0, for every α > 0 and every allocation; and of two intervals that
//!   miss it equally deep, the one that leaves fewer resources idle and fewer requests unserved
//!   earns more.
//! - **Zero is the floor of serving**, not a constant bonus: the published form's `α·|R|·SP`
//!   paid every interval that met the SLO 2α whatever it cost, so the lifecycle's ratio
//!   thresholds (`t_online`: the agent's reward at least the fallback's; `t_var`,
//!   `t_serving`) would measure mostly that constant. Without it they measure efficiency.
//! - **The charge rises up to the bounds.** The scale is about four times the app's peak need;
//!   past three quarters of it ([`COST_KNEE`]) the charge rises more slowly, linearly to 1 at
//!   the largest allocation the bounds allow (`max_replicas` pods of the largest size), so
//!   serving still never earns less than 0. Until session 54 it saturated at the scale, and the
//!   bounds allow far more (20 pods of 4 cores and 8 GiB are 5 scales): a flat reward over most
//!   of the action box ranked 80 reserved cores level with 20, where the operator ranks them
//!   strictly, and a learner found that plateau. In `aware run --apps 4 --seed 30 --scenario
//!   payload-up@1500` (the profile's `reward_window` at 5) an app the rules could not serve
//!   retrained to 20 × 4000 m × 8192 MiB at 4 % CPU utilisation, earned exactly 0 per interval
//!   for 5 episodes (no violations, the whole scale reserved) with no gradient to come down, and
//!   was promoted to SERVING as converged (coefficient of variation 0).
//!
//! α keeps the papers' default of 0.3: one SLO-violating interval costs at least as much as
//! reserving the whole cost scale (`max_replicas` one-core pods) for one interval that meets it.

use aware_core::{Bounds, Resources, RewardWeights};

/// Where the cost stops being the bill over the cost scale and rises, more slowly, to 1 at the
/// largest allocation the bounds allow: three quarters of the scale, about three times an app's
/// peak need (see the module's docs).
pub const COST_KNEE: f64 = 0.75;

/// Number of resources in R (CPU and memory): the published reward's scale (its utilisation
/// terms summed over R), kept so α weighs the terms as in the papers.
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
    /// Lowest value the reward can take: the SLO missed completely, no request served, every
    /// resource held idle at the largest allocation, with both penalties.
    pub fn min(&self) -> f64 {
        -RESOURCES * (2.0 - self.weights.alpha)
            - (self.weights.illegal_action_penalty + self.weights.oscillation_penalty)
    }

    /// Highest value: the SLO met at no cost.
    pub fn max(&self) -> f64 {
        (1.0 - self.weights.alpha) * RESOURCES
    }

    /// The cost of pods holding `requests` each, in [0, 1]: Σ (cores + `memory_price` × GiB)
    /// over the app's cost scale (`bounds.max_replicas` one-core pods) up to [`COST_KNEE`],
    /// then rising linearly to 1 at the largest allocation `bounds` allow (`max_replicas` pods
    /// of the largest size), so that it never stops rising inside them (the module's docs say
    /// why).
    pub fn cost(&self, bounds: &Bounds, requests: impl IntoIterator<Item = Resources>) -> f64 {
        let price = self.weights.memory_price;
        let per_pod = |r: Resources| r.cpu_cores() + price * r.memory_gib();
        let c = requests.into_iter().map(per_pod).sum::<f64>() / bounds.max_replicas.max(1) as f64;
        if !c.is_finite() {
            return 1.0;
        }
        let c = c.max(0.0);
        if c <= COST_KNEE {
            return c;
        }
        // The largest pod's cost in cores: the whole box over the scale.
        let largest = bounds.max_cpu_millicores as f64 / 1000.0 + price * bounds.max_memory_mib as f64 / 1024.0;
        let top = largest.max(1.0);
        (COST_KNEE + (1.0 - COST_KNEE) * (c - COST_KNEE) / (top - COST_KNEE)).min(1.0)
    }

    /// The cost of what the `pods` leave idle, in [0, 1]: each pod is (what its node holds for
    /// it, its limits), and utilisation is usage over the limits (as observations report it),
    /// so a pod leaves idle what it holds beyond `utilisation × limit` of each resource
    /// (utilisation clamped into [0, 1]; a Burstable pod running above its request leaves
    /// nothing idle), priced by [`Self::cost`]. A non-finite utilisation counts as fully busy:
    /// an interval whose usage is unknown is not charged for it.
    pub fn idle_cost(
        &self,
        bounds: &Bounds,
        pods: impl IntoIterator<Item = (Resources, Resources)>,
        cpu_utilisation: f64,
        memory_utilisation: f64,
    ) -> f64 {
        let used = |u: f64| if u.is_finite() { u.clamp(0.0, 1.0) } else { f64::INFINITY };
        let (cpu, memory) = (used(cpu_utilisation), used(memory_utilisation));
        let idle = |held: u64, limit: u64, used: f64| (held as f64 - used * limit as f64).max(0.0).round() as u64;
        self.cost(
            bounds,
            pods.into_iter().map(|(held, limit)| {
                Resources::new(
                    idle(held.cpu_millicores, limit.cpu_millicores, cpu),
                    idle(held.memory_bytes, limit.memory_bytes, memory),
                )
            }),
        )
    }

    /// One interval's reward. `sp` is the SLO preservation, `cost` what the pods hold
    /// ([`Self::cost`]), charged while the SLO is met (SP 1); `idle` ([`Self::idle_cost`]) and
    /// `unserved` (the share of the demand not served beyond the drop tolerance, `1 −`
    /// [`served_preservation`]) are charged while it is missed. Each is clamped into [0, 1]; a
    /// non-finite SP, cost or unserved share counts as the worst (SP 0, cost 1, nothing
    /// served), a non-finite idle cost as none, so that the documented bounds always hold.
    pub fn reward(&self, sp: f64, cost: f64, idle: f64, unserved: f64, illegal: bool, oscillation: bool) -> f64 {
        let a = self.weights.alpha;
        let sp = if sp.is_finite() { sp.clamp(0.0, 1.0) } else { 0.0 };
        let cost = if cost.is_finite() { cost.clamp(0.0, 1.0) } else { 1.0 };
        let idle = if idle.is_finite() { idle.clamp(0.0, 1.0) } else { 0.0 };
        let unserved = if unserved.is_finite() { unserved.clamp(0.0, 1.0) } else { 1.0 };
        let efficiency = if sp >= 1.0 { 1.0 - cost } else { -(idle + unserved) };
        let mut r = RESOURCES * ((1.0 - a) * efficiency - a * (1.0 - sp));
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
    use aware_core::{DEFAULT_MEMORY_PRICE, GIB, Profile};
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

    fn weights(alpha: f64) -> RewardWeights {
        RewardWeights {
            alpha,
            memory_price: DEFAULT_MEMORY_PRICE,
            illegal_action_penalty: 0.1,
            oscillation_penalty: 0.05,
        }
    }

    #[test]
    fn reward_matches_formula() {
        let f = RewardFunction { weights: Profile::default().reward };
        let a = f.weights.alpha;
        assert!((f.reward(1.0, 0.25, 0.0, 0.0, false, false) - 2.0 * (1.0 - a) * 0.75).abs() < 1e-12);
        assert!((f.reward(1.0, 0.0, 0.0, 0.0, false, false) - f.max()).abs() < 1e-12);
        // Serving at the whole cost scale still earns the floor of serving, 0.
        assert_eq!(f.reward(1.0, 1.0, 0.0, 0.0, false, false), 0.0);
        // A missed SLO loses its shortfall and what it left idle, whatever it reserved busy:
        // cutting a busy allocation further never pays.
        assert!((f.reward(0.9, 0.25, 0.0, 0.0, false, false) + 2.0 * a * 0.1).abs() < 1e-12);
        assert_eq!(f.reward(0.9, 0.25, 0.0, 0.0, false, false), f.reward(0.9, 0.0, 0.0, 0.0, false, false));
        assert!((f.reward(0.9, 0.25, 0.1, 0.0, false, false) + 2.0 * a * 0.1 + 2.0 * (1.0 - a) * 0.1).abs() < 1e-12);
        // The idle charge counts only while the SLO is missed: a met interval pays its cost.
        assert_eq!(f.reward(1.0, 0.25, 0.2, 0.0, false, false), f.reward(1.0, 0.25, 0.0, 0.0, false, false));
        let penalised = f.reward(1.0, 0.0, 0.0, 0.0, true, true);
        assert!((f.max() - penalised - f.weights.illegal_action_penalty - f.weights.oscillation_penalty).abs() < 1e-12);
        assert!((f.reward(0.0, 0.0, 1.0, 1.0, true, true) - f.min()).abs() < 1e-12);
        // What a missed interval leaves unserved is charged at the rate of the cost scale.
        assert!((f.reward(0.9, 0.25, 0.1, 0.2, false, false) + 2.0 * a * 0.1 + 2.0 * (1.0 - a) * 0.3).abs() < 1e-12);
        // Not-a-number counts as the worst case, never as a free interval; an unknown idle
        // share as none (usage not measured is not charged).
        assert_eq!(f.reward(f64::NAN, f64::NAN, 0.0, 0.0, false, false), f.reward(0.0, 1.0, 0.0, 0.0, false, false));
        assert_eq!(f.reward(0.5, 0.5, f64::NAN, 0.0, false, false), f.reward(0.5, 0.5, 0.0, 0.0, false, false));
        assert_eq!(f.reward(0.5, 0.5, 0.0, f64::NAN, false, false), f.reward(0.5, 0.5, 0.0, 1.0, false, false));
    }

    #[test]
    fn cost_counts_replicas_cores_and_priced_memory_over_the_scale() {
        let f = RewardFunction { weights: Profile::default().reward };
        let bounds = Bounds { max_replicas: 40, ..Profile::default().bounds };
        let pod = Resources::new(500, 2 * GIB);
        let want = 10.0 * (0.5 + DEFAULT_MEMORY_PRICE * 2.0) / 40.0;
        assert!((f.cost(&bounds, vec![pod; 10]) - want).abs() < 1e-12);
        assert_eq!(f.cost(&bounds, []), 0.0);
        // Beyond the bounds the cost saturates, so serving never earns less than starving.
        assert_eq!(f.cost(&bounds, vec![Resources::new(4_000, 64 * GIB); 1_000]), 1.0);
        let free_memory = RewardFunction { weights: RewardWeights { memory_price: 0.0, ..f.weights.clone() } };
        assert!((free_memory.cost(&bounds, vec![pod; 10]) - 10.0 * 0.5 / 40.0).abs() < 1e-12);
    }

    /// The case that made the charge rise up to the bounds: a retraining learner at 20 pods of
    /// 4000 m and 8 GiB (the whole box) earned what 5 pods of 4000 m earn, exactly 0, and had
    /// no gradient to come down. Now every pod, core or GiB less earns more inside the bounds,
    /// the charge is the bill below the knee and continuous through it, and 1 at the corner.
    #[test]
    fn the_charge_rises_up_to_the_bounds_and_is_the_bill_below_the_knee() {
        let f = RewardFunction { weights: Profile::default().reward };
        let bounds =
            Bounds { max_replicas: 20, max_cpu_millicores: 4_000, max_memory_mib: 8_192, ..Profile::default().bounds };
        let largest = Resources::new(4_000, 8 * GIB);
        let serve = |pods: usize, r: Resources| f.reward(1.0, f.cost(&bounds, vec![r; pods]), 0.0, 0.0, false, false);
        assert_eq!(f.cost(&bounds, vec![largest; 20]), 1.0);
        assert_eq!(serve(20, largest), 0.0);
        let mut last = serve(20, largest);
        for pods in (1..20).rev() {
            let r = serve(pods, largest);
            assert!(r > last, "{pods} pods earn {r}, no more than {} with one more", last);
            last = r;
        }
        assert!(serve(20, Resources::new(3_500, 8 * GIB)) > 0.0);
        assert!(serve(20, Resources::new(4_000, 7 * GIB)) > 0.0);
        // Below the knee: the bill over the scale. Through it: continuous.
        let one_core = |pods: usize| f.cost(&bounds, vec![Resources::new(1_000, 0); pods]);
        assert!((one_core(10) - 0.5).abs() < 1e-12);
        assert!((one_core(15) - COST_KNEE).abs() < 1e-12);
        let just_past = f.cost(&bounds, [Resources::new(15_001, 0)]);
        // 15.001 cores are 0.75005 scales: past the knee it rises, more slowly than the bill.
        assert!(just_past > COST_KNEE && just_past - COST_KNEE < 0.000_05, "{just_past}");
    }

    /// The case that made the reward cost-based: per-interval utilisation paid a policy that
    /// squeezed its quiet intervals and spent more core-seconds at its peak more than one that
    /// spent fewer core-seconds in total with the same SLO record. A cost charge per interval
    /// sums to the core-seconds, so the cheaper policy earns more.
    #[test]
    fn fewer_core_seconds_earn_more_whatever_the_per_interval_utilisation() {
        let f = RewardFunction { weights: Profile::default().reward };
        let bounds = Bounds { max_replicas: 40, ..Profile::default().bounds };
        let usage = [1.0, 1.0, 1.0, 8.0]; // cores busy per interval: quiet, quiet, quiet, peak
        let squeezer = [1.25, 1.25, 1.25, 16.0]; // 80 % busy when quiet, 50 % at the peak
        let even = [2.0, 2.0, 2.0, 10.0]; // 50 % when quiet, 80 % at the peak
        let utilisation = |alloc: &[f64]| usage.iter().zip(alloc).map(|(u, a)| u / a).sum::<f64>();
        assert!(utilisation(&squeezer) > utilisation(&even), "the case needs the squeezer ahead on utilisation");
        assert!(squeezer.iter().sum::<f64>() > even.iter().sum::<f64>(), "and behind on core-seconds");
        let ret = |alloc: &[f64]| {
            alloc
                .iter()
                .map(|&c| {
                    f.reward(1.0, f.cost(&bounds, [Resources::new((c * 1000.0) as u64, 0)]), 0.0, 0.0, false, false)
                })
                .sum::<f64>()
        };
        assert!(ret(&even) > ret(&squeezer));
    }

    /// The case that made violating intervals charge what they leave idle: growth that no
    /// allocation turns into a met SLO was free. Now, of two intervals missing the SLO equally,
    /// the one that holds more idle cores earns less; a starved app (its pods full) is charged
    /// nothing, so cutting it further never pays; and the idle share is the allocation's cost
    /// scaled by one minus each resource's utilisation.
    #[test]
    fn a_violating_interval_is_charged_what_it_leaves_idle_and_starving_is_not_paid() {
        let f = RewardFunction { weights: Profile::default().reward };
        let bounds = Bounds { max_replicas: 20, ..Profile::default().bounds };
        let pod = Resources::new(2_000, 4 * GIB);
        let miss = |pods: usize, cpu_u: f64, mem_u: f64| {
            let held = vec![pod; pods];
            let pods = held.iter().map(|&r| (r, r));
            f.reward(0.8, f.cost(&bounds, held.clone()), f.idle_cost(&bounds, pods, cpu_u, mem_u), 0.0, false, false)
        };
        // More pods at the same (low) utilisation: more idle, less reward.
        assert!(miss(4, 0.2, 0.5) > miss(8, 0.2, 0.5));
        // Pods running full: nothing idle, the same as holding nothing (the shortfall alone).
        assert_eq!(miss(8, 1.0, 1.0), miss(0, 1.0, 1.0));
        assert!((miss(8, 1.0, 1.0) + 2.0 * f.weights.alpha * 0.2).abs() < 1e-12);
        // Unknown usage is charged as busy.
        assert_eq!(miss(8, f64::NAN, f64::NAN), miss(8, 1.0, 1.0));
        let held = vec![pod; 8];
        let want = f.cost(&bounds, vec![Resources::new(500, 2 * GIB); 8]);
        let pods = || held.iter().map(|&r| (r, r));
        assert!((f.idle_cost(&bounds, pods(), 0.75, 0.5) - want).abs() < 1e-12);
        assert!(f.idle_cost(&bounds, pods(), 0.0, 0.0) == f.cost(&bounds, held.clone()));
        // A Burstable pod holding half its limit and using 60 % of it leaves nothing idle; at
        // 20 % of its limit it leaves 30 % of the limit idle.
        let burstable = [(Resources::new(1_000, GIB), Resources::new(2_000, 2 * GIB))];
        assert_eq!(f.idle_cost(&bounds, burstable, 0.6, 0.6), 0.0);
        let want = f.cost(&bounds, [Resources::new(600, 6 * GIB / 10)]);
        assert!((f.idle_cost(&bounds, burstable, 0.2, 0.2) - want).abs() < 1e-9);
    }

    /// The case that made violating intervals charge what they leave unserved: with the SLO
    /// lost by latency whatever the allocation (SP near 0 for every policy), the idle charge
    /// alone paid a learner that cut its app until it dropped 98 % of its requests more than
    /// MPA, which served 89 % of them at a third of its cores idle. Now dropping the demand
    /// costs more than the cores it saves, and a cut of idle cores that drops nothing still pays.
    #[test]
    fn where_the_slo_is_lost_anyway_dropping_the_demand_does_not_pay() {
        let f = RewardFunction { weights: Profile::default().reward };
        let sp = 0.05; // p99 twenty times the SLO, for either policy
        let rules = f.reward(sp, 0.3, 0.3 * 0.33, 1.0 - served_preservation(11.0, 100.0), false, false);
        let starver = f.reward(sp, 0.02, 0.02 * 0.07, 1.0 - served_preservation(98.0, 100.0), false, false);
        assert!(rules > starver, "serving 89 % earns {rules}, dropping 98 % {starver}");
        // Cutting the idle third, nothing more dropped: earns more.
        let trimmed = f.reward(sp, 0.2, 0.0, 1.0 - served_preservation(11.0, 100.0), false, false);
        assert!(trimmed > rules);
        // Within the drop tolerance nothing is unserved.
        assert_eq!(served_preservation(0.5, 100.0), 1.0);
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
        /// Meeting the SLO earns at least as much as missing it, whatever either allocation costs.
        #[test]
        fn meeting_the_slo_always_beats_missing_it(
            alpha in 0.0f64..=1.0, sp in 0.0f64..0.999_999, c1 in 0.0f64..=1.0, c2 in 0.0f64..=1.0,
            idle1 in 0.0f64..=1.0, idle2 in 0.0f64..=1.0, unserved1 in 0.0f64..=1.0, unserved2 in 0.0f64..=1.0,
        ) {
            let f = RewardFunction { weights: weights(alpha) };
            prop_assert!(f.reward(1.0, c1, idle1, unserved1, false, false) >= f.reward(sp, c2, idle2, unserved2, false, false));
        }

        /// The charge never falls as pods grow or multiply, and stays in [0, 1].
        #[test]
        fn the_charge_is_monotone_in_pods_and_size(
            pods in 0usize..40, more in 0usize..10, cpu in 0u64..8_000, mem_mib in 0u64..16_384,
            extra_cpu in 0u64..2_000, extra_mib in 0u64..4_096, max_replicas in 1u32..40,
        ) {
            let f = RewardFunction { weights: Profile::default().reward };
            let bounds = Bounds { max_replicas, max_cpu_millicores: 4_000, max_memory_mib: 8_192, ..Profile::default().bounds };
            let small = Resources::new(cpu, mem_mib << 20);
            let big = Resources::new(cpu + extra_cpu, (mem_mib + extra_mib) << 20);
            let lo = f.cost(&bounds, vec![small; pods]);
            let hi = f.cost(&bounds, vec![big; pods + more]);
            prop_assert!((0.0..=1.0).contains(&lo) && (0.0..=1.0).contains(&hi));
            prop_assert!(hi >= lo, "{pods} × {small:?} cost {lo}, {} × {big:?} {hi}", pods + more);
        }

        /// With the same SLO preservation, the cheaper allocation never earns less (and earns
        /// strictly more while the SLO is met).
        #[test]
        fn cheaper_never_earns_less(alpha in 0.0f64..=1.0, sp in 0.0f64..=1.0, c1 in 0.0f64..=1.0, c2 in 0.0f64..=1.0) {
            let f = RewardFunction { weights: weights(alpha) };
            let (lo, hi) = if c1 <= c2 { (c1, c2) } else { (c2, c1) };
            prop_assert!(f.reward(sp, lo, 0.0, 0.0, false, false) >= f.reward(sp, hi, 0.0, 0.0, false, false));
            if alpha < 1.0 && hi > lo {
                prop_assert!(f.reward(1.0, lo, 0.0, 0.0, false, false) > f.reward(1.0, hi, 0.0, 0.0, false, false));
            }
        }

        #[test]
        fn reward_is_within_documented_bounds(
            alpha in 0.0f64..=1.0, sp in -1.0f64..2.0, cost in -1.0f64..2.0,
            idle in -1.0f64..2.0, unserved in -1.0f64..2.0, illegal: bool, osc: bool, pi in 0.0f64..10.0, po in 0.0f64..10.0,
        ) {
            let f = RewardFunction { weights: RewardWeights { alpha, memory_price: DEFAULT_MEMORY_PRICE, illegal_action_penalty: pi, oscillation_penalty: po } };
            let r = f.reward(sp, cost, idle, unserved, illegal, osc);
            prop_assert!(r >= f.min() - 1e-12 && r <= f.max() + 1e-12, "{r}");
        }
    }
}
