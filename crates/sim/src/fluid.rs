//! Overload in the fast mode: the fluid limit of a processor-sharing replica with impatient
//! requests, transients included.
//!
//! Under processor sharing every request in its CPU phase gets `φ = min(1, c/n)` cores, where
//! `n` is the number of such requests and `c` the replica's cores. A request abandons when it
//! has waited the timeout `T`. In overload `n` grows until abandonment balances arrivals, so
//! every request gets a small share, and only requests whose work `X` is below `φ·T` finish:
//! throughput *collapses* (the fluid steady state solves `λ·E[min(X, s)] = c` for `s = φT`, and
//! serves `λ·P(X ≤ s)`), which is what the discrete-event mode shows and what a "serve at full
//! capacity, queue the rest" model gets wrong by a factor of up to forty.
//!
//! The state is a list of arrival cohorts, each with the number that arrived and the CPU time
//! every member has attained (all members of a cohort attain the same amount under processor
//! sharing); a cohort's members with work below the attained amount have finished. Stepping
//! this in sub-steps of at most [`MAX_SUBSTEP_S`] seconds follows the onset and the drain of an
//! overload as well as its steady state, with no fitted parameter. Work sizes are gamma
//! distributed with the same coefficient of variation as the discrete-event mode.

use puruspe::gammp;

/// Longest fluid sub-step, seconds.
pub const MAX_SUBSTEP_S: f64 = 1.5;

/// Requests that arrived in the same sub-step.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Cohort {
    /// How many arrived.
    pub arrived: f64,
    /// CPU time each member has received so far, core-seconds.
    pub attained_s: f64,
    /// Time since the cohort arrived, seconds.
    pub age_s: f64,
    /// Fraction of members finished: P(X ≤ attained), cached.
    pub finished: f64,
}

impl Cohort {
    pub fn left(&self) -> f64 {
        self.arrived * (1.0 - self.finished)
    }
}

/// The distribution of one request's CPU work: gamma with mean `mean_s` and squared
/// coefficient of variation `cv2`.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Work {
    pub mean_s: f64,
    pub cv2: f64,
}

impl Work {
    fn shape(&self) -> f64 {
        1.0 / self.cv2.max(1e-6)
    }

    /// P(X ≤ x).
    pub fn cdf(&self, x: f64) -> f64 {
        if self.mean_s <= 0.0 {
            return 1.0;
        }
        if x <= 0.0 {
            return 0.0;
        }
        let k = self.shape();
        regularized_gamma(k, x * k / self.mean_s)
    }

    /// E[min(X, s)]: the CPU a request consumes when it is cut off after `s` core-seconds.
    pub fn truncated_mean(&self, s: f64) -> f64 {
        if s <= 0.0 {
            return 0.0;
        }
        let k = self.shape();
        let z = s * k / self.mean_s;
        self.mean_s * regularized_gamma(k + 1.0, z) + s * (1.0 - regularized_gamma(k, z))
    }

    /// Fluid steady state of a processor-sharing server at offered load `rho = λ·E[X]/c > 1`:
    /// the attained work `s` at which requests are cut off, from `E[min(X, s)] = E[X]/ρ`.
    pub fn overload_cutoff(&self, rho: f64) -> f64 {
        let target = self.mean_s / rho;
        let (mut lo, mut hi) = (0.0, self.mean_s);
        while self.truncated_mean(hi) < target && hi < 1e6 * self.mean_s {
            hi *= 2.0;
        }
        for _ in 0..60 {
            let mid = 0.5 * (lo + hi);
            if self.truncated_mean(mid) < target { lo = mid } else { hi = mid }
        }
        0.5 * (lo + hi)
    }
}

/// The regularised lower incomplete gamma function P(k, z). For a whole shape up to 32 (the
/// default work CV of 0.5 gives 4, exponential work 1) it is the Erlang CDF,
/// `1 − e^{−z} Σ_{j<k} z^j/j!`, one exponential instead of a series; otherwise `puruspe`.
pub fn regularized_gamma(k: f64, z: f64) -> f64 {
    if z <= 0.0 {
        return 0.0;
    }
    let whole = k.round();
    if (k - whole).abs() < 1e-9 && (1.0..=32.0).contains(&whole) && z < 600.0 {
        let (mut term, mut sum) = (1.0, 1.0);
        for j in 1..whole as usize {
            term *= z / j as f64;
            sum += term;
        }
        return (1.0 - (-z).exp() * sum).clamp(0.0, 1.0);
    }
    gammp(k, z).clamp(0.0, 1.0)
}

/// What the fluid queue did over one interval.
#[derive(Debug, Clone, Copy, PartialEq, Default)]
pub struct FluidStep {
    pub served: f64,
    pub dropped: f64,
    /// Σ latency and Σ latency² over served requests (seconds), for their mean and variance.
    pub latency_sum_s: f64,
    pub latency_sq_sum_s2: f64,
    /// Time-mean of requests in the CPU phase.
    pub mean_in_cpu: f64,
    /// Time-mean CPU used, cores.
    pub cpu_cores: f64,
    /// Requests in the CPU phase at the end.
    pub remaining: f64,
}

/// Requests still in their CPU phase.
pub fn in_system(cohorts: &[Cohort]) -> f64 {
    cohorts.iter().map(Cohort::left).sum()
}

/// Advances the cohorts over `dt` seconds with `arrivals` spread evenly, on `cores` cores;
/// requests abandon `timeout_s` after arrival; completed requests then wait `io_s` more (their
/// latency counts it; a completion later than the timeout is counted as dropped, as in the
/// discrete-event mode). `arrivals` may be zero (draining).
pub fn step(
    cohorts: &mut Vec<Cohort>,
    arrivals: f64,
    dt: f64,
    work: &Work,
    io_s: f64,
    cores: f64,
    timeout_s: f64,
) -> FluidStep {
    let subs = (dt / MAX_SUBSTEP_S).ceil().max(1.0);
    let h = dt / subs;
    let per_sub = arrivals / subs;
    let mut out = FluidStep::default();
    for _ in 0..subs as usize {
        if per_sub > 0.0 {
            cohorts.push(Cohort { arrived: per_sub, attained_s: 0.0, age_s: 0.0, finished: 0.0 });
        }
        let alive: f64 = in_system(cohorts);
        let phi = if alive > 0.0 { (cores / alive).min(1.0) } else { 1.0 };
        out.mean_in_cpu += alive * h / dt;
        out.cpu_cores += (alive * phi).min(cores) * h / dt;
        for c in cohorts.iter_mut() {
            c.attained_s += phi * h;
            let now_finished = work.cdf(c.attained_s).max(c.finished);
            let done = c.arrived * (now_finished - c.finished);
            c.finished = now_finished;
            // Members finish through the sub-step: on average halfway.
            let latency = c.age_s + 0.5 * h + io_s;
            if latency > timeout_s {
                out.dropped += done;
            } else {
                out.served += done;
                out.latency_sum_s += done * latency;
                out.latency_sq_sum_s2 += done * latency * latency;
            }
            c.age_s += h;
        }
        // Abandonment: cohorts that have waited the timeout leave; empty cohorts are forgotten.
        cohorts.retain(|c| {
            let left = c.left();
            if c.age_s >= timeout_s {
                out.dropped += left;
                false
            } else if left > 1e-6 * c.arrived.max(1.0) {
                true
            } else {
                // A negligible remainder finishes now.
                out.served += left;
                out.latency_sum_s += left * (c.age_s + io_s);
                out.latency_sq_sum_s2 += left * (c.age_s + io_s) * (c.age_s + io_s);
                false
            }
        });
        // An unbounded timeout must not grow the list without bound: merge the two oldest.
        while cohorts.len() > 256 {
            let (a, b) = (cohorts[0], cohorts[1]);
            cohorts[1] = Cohort {
                arrived: (a.left() + b.left()) / (1.0 - b.finished).max(1e-12),
                attained_s: b.attained_s,
                age_s: b.age_s,
                finished: b.finished,
            };
            cohorts.remove(0);
        }
    }
    out.remaining = in_system(cohorts);
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    const W: Work = Work { mean_s: 0.1, cv2: 0.25 };

    #[test]
    fn whole_shape_gamma_matches_the_series() {
        for k in [1.0, 2.0, 4.0, 9.0] {
            for z in [0.01, 0.5, 1.0, 3.7, 12.0, 80.0] {
                let (a, b) = (regularized_gamma(k, z), gammp(k, z));
                assert!((a - b).abs() < 1e-9, "P({k}, {z}): {a} vs {b}");
            }
        }
    }

    #[test]
    fn truncated_mean_limits() {
        assert!((W.truncated_mean(1e3) - 0.1).abs() < 1e-9);
        assert!((W.truncated_mean(1e-4) - 1e-4).abs() < 1e-7);
        assert!(W.truncated_mean(0.05) < 0.05 && W.truncated_mean(0.05) > 0.04);
    }

    #[test]
    fn steady_overload_matches_the_fluid_fixed_point() {
        // ρ = 2 on one core: the stepped fluid converges to λ·P(X ≤ s) with λ·E[min(X, s)] = c.
        let rho = 2.0;
        let lambda = rho / W.mean_s;
        let s = W.overload_cutoff(rho);
        let expect = lambda * W.cdf(s);
        let mut cohorts = Vec::new();
        let mut last = FluidStep::default();
        for _ in 0..40 {
            last = step(&mut cohorts, lambda * 15.0, 15.0, &W, 0.0, 1.0, 30.0);
        }
        let got = last.served / 15.0;
        assert!((got - expect).abs() / expect < 0.1, "{got} vs {expect}");
        assert!(got < 0.5 * lambda, "overloaded processor sharing serves far below capacity");
        assert!((last.cpu_cores - 1.0).abs() < 1e-6);
    }

    #[test]
    fn a_backlog_drains_when_load_stops() {
        let mut cohorts = Vec::new();
        step(&mut cohorts, 300.0, 15.0, &W, 0.0, 1.0, 30.0);
        let mut served = 0.0;
        for _ in 0..4 {
            served += step(&mut cohorts, 0.0, 15.0, &W, 0.0, 1.0, 30.0).served;
        }
        assert!(served > 10.0 && cohorts.is_empty(), "{served} {cohorts:?}");
    }
}
