//! Closed-form queueing for the fast mode.
//!
//! A replica is a processor-sharing server with `c` cores (its CPU limit, after node contention)
//! where one request can use at most one core: with `n` requests in their CPU phase the total
//! service rate is `min(n, c)` cores shared equally. This is a symmetric queue, so under Poisson
//! arrivals the number in the CPU phase has the product-form distribution
//! `π(n) ∝ aⁿ / Π_{k≤n} min(k, c)` with `a = λ·w`, *whatever* the distribution of per-request
//! work (insensitivity) — which is why the mean here is exact for the discrete-event model.
//! I/O waits are pure delays added on top. Percentiles have no closed form: the response time
//! is fitted with a gamma distribution by its first two moments, whose variance term is
//! calibrated against the discrete-event mode on the fixed fitting set (`validate::cases`).
//! At and above saturation the steady state does not exist and `fluid` takes over; a shared
//! FCFS queue (`Dispatch::SharedQueue`) is M/G/c, exact Erlang C for exponential work.

/// Steady-state moments of the CPU phase at one replica.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct CpuPhase {
    /// Utilisation of the allocated cores, λw/c.
    pub rho: f64,
    /// Mean number of requests in their CPU phase.
    pub mean_in_service: f64,
    /// Mean time spent in the CPU phase, seconds.
    pub mean_sojourn_s: f64,
    /// Variance of the CPU-phase sojourn, s².
    pub var_sojourn_s2: f64,
}

/// Extra variance of the processor-sharing sojourn time caused by queue fluctuations, as a
/// multiple of `s·(s − 1) · E[x]²`, where `s` is the slowdown (mean sojourn over unloaded
/// service time). Form and constant were fitted on the fixed fitting set `validate::cases`
/// (light to heavy load, fractional to multi-core, one to four replicas; `validate-sim --fixed`)
/// and on nothing else: one constant keeps every p99 within ±8 % of the discrete-event mode
/// there. `validate-sim --seed S` checks it on configurations drawn fresh from the seed.
pub const PS_VARIANCE_FACTOR: f64 = 1.3;

/// Highest utilisation evaluated in steady state. A queue at ρ ≥ 0.98 relaxes over
/// ~w/(1−√ρ)², minutes for typical work, so within one 15 s interval it never reaches its
/// steady state; evaluating there at 0.98 keeps latency finite and monotone in load and CPU
/// (the overload path in `replica` starts from this value).
pub const RHO_STEADY_CAP: f64 = 0.98;

/// The CPU phase at arrival rate `lambda` (1/s), mean work `work_s` (core-seconds, squared
/// coefficient of variation `work_cv2`) and `cores` allocated. `None` when `λw ≥ c`: no steady
/// state exists and the caller must treat the replica as overloaded.
pub fn cpu_phase(lambda: f64, work_s: f64, work_cv2: f64, cores: f64) -> Option<CpuPhase> {
    debug_assert!(cores > 0.0 && work_s >= 0.0 && lambda >= 0.0);
    let a = lambda * work_s;
    let rho = a / cores;
    if rho >= 1.0 {
        return None;
    }
    let lambda_eval = if rho > RHO_STEADY_CAP { RHO_STEADY_CAP * cores / work_s } else { lambda };
    let a = lambda_eval * work_s;
    let rho_eval = a / cores;
    let unloaded = work_s / cores.min(1.0);
    if lambda <= 0.0 || work_s <= 0.0 {
        return Some(CpuPhase {
            rho,
            mean_in_service: 0.0,
            mean_sojourn_s: unloaded,
            var_sojourn_s2: work_cv2 * unloaded * unloaded,
        });
    }
    // Terms t_n = aⁿ / n! for n ≤ m = ⌊c⌋, then a geometric tail with ratio ρ.
    let m = cores.floor() as usize;
    let (mut norm, mut first) = (0.0, 0.0);
    let mut t = 1.0;
    for n in 0..m {
        norm += t;
        first += n as f64 * t;
        t *= a / (n + 1) as f64;
    }
    // t is now t_m.
    let g = 1.0 - rho_eval;
    norm += t / g;
    first += t * (m as f64 / g + rho_eval / (g * g));
    let mean_sojourn_s = first / norm / lambda_eval;
    let mean_in_service = lambda * mean_sojourn_s;
    let slowdown = mean_sojourn_s / unloaded;
    let var_sojourn_s2 = unloaded
        * unloaded
        * (slowdown * slowdown * work_cv2 + PS_VARIANCE_FACTOR * slowdown * (slowdown - 1.0).max(0.0));
    Some(CpuPhase { rho, mean_in_service, mean_sojourn_s, var_sojourn_s2 })
}

/// Standard normal quantile for q = 0.99, used by the Wilson–Hilferty gamma quantile.
pub const Z99: f64 = 2.326_347_874_040_841;

/// The 0.99 quantile of a positive random variable with the given mean and variance, taking it
/// to be gamma distributed (Wilson–Hilferty cube-root normal approximation, accurate to a few
/// percent for shape ≥ 0.5).
pub fn gamma_p99(mean: f64, var: f64) -> f64 {
    gamma_quantile(mean, var, Z99)
}

/// Quantile of a gamma with the given mean and variance at standard-normal score `z`.
pub fn gamma_quantile(mean: f64, var: f64, z: f64) -> f64 {
    if mean <= 0.0 {
        return 0.0;
    }
    if var <= 0.0 {
        return mean;
    }
    let k = mean * mean / var;
    let h = 1.0 / (9.0 * k);
    let cube = (1.0 - h + z * h.sqrt()).max(0.0);
    mean * cube * cube * cube
}

/// CDF of the same gamma fit at `x`; used to take the quantile of a mixture of replicas.
pub fn gamma_cdf(mean: f64, var: f64, x: f64) -> f64 {
    if mean <= 0.0 || var <= 0.0 {
        return if x >= mean { 1.0 } else { 0.0 };
    }
    if x <= 0.0 {
        return 0.0;
    }
    let k = mean * mean / var;
    let h = 1.0 / (9.0 * k);
    let z = ((x / mean).cbrt() - (1.0 - h)) / h.sqrt();
    standard_normal_cdf(z)
}

/// Φ(z) via the Abramowitz–Stegun 7.1.26 erf approximation (|error| < 1.5e-7).
pub fn standard_normal_cdf(z: f64) -> f64 {
    let x = z.abs() / std::f64::consts::SQRT_2;
    let t = 1.0 / (1.0 + 0.327_591_1 * x);
    let poly =
        t * (0.254_829_592 + t * (-0.284_496_736 + t * (1.421_413_741 + t * (-1.453_152_027 + t * 1.061_405_429))));
    let erf = 1.0 - poly * (-x * x).exp();
    if z >= 0.0 { 0.5 * (1.0 + erf) } else { 0.5 * (1.0 - erf) }
}

/// The q-quantile of a mixture of gamma-fitted components `(weight, mean, var)`, by bisection.
pub fn mixture_quantile(components: &[(f64, f64, f64)], q: f64) -> f64 {
    let total: f64 = components.iter().map(|c| c.0).sum();
    if total <= 0.0 {
        return 0.0;
    }
    let hi_start = components.iter().map(|&(_, m, v)| gamma_quantile(m, v, 4.0)).fold(0.0, f64::max);
    let (mut lo, mut hi) = (0.0, hi_start.max(1e-12));
    for _ in 0..50 {
        let mid = 0.5 * (lo + hi);
        let cdf: f64 = components.iter().map(|&(w, m, v)| w * gamma_cdf(m, v, mid)).sum::<f64>() / total;
        if cdf < q { lo = mid } else { hi = mid }
    }
    0.5 * (lo + hi)
}

/// Erlang's C formula: the probability that an arrival waits in an M/M/c queue with offered
/// load `a = λ/μ < c`, computed through the stable Erlang-B recursion.
pub fn erlang_c(servers: u32, a: f64) -> f64 {
    if servers == 0 || a >= servers as f64 {
        return 1.0;
    }
    let mut b = 1.0;
    for k in 1..=servers {
        b = a * b / (k as f64 + a * b);
    }
    let c = servers as f64;
    c * b / (c - a * (1.0 - b))
}

/// Steady-state response time of a shared first-come-first-served queue in front of `servers`
/// single-request servers (a Knative-style activator with `containerConcurrency: 1`, a work
/// queue with consumers): M/G/c with service time mean `service_s` and squared coefficient of
/// variation `cv2`.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct SharedQueue {
    pub rho: f64,
    /// Probability of waiting.
    pub wait_probability: f64,
    pub mean_s: f64,
    pub var_s2: f64,
    pub p99_s: f64,
}

/// `None` at or above saturation. The waiting time is exact Erlang C for exponential service
/// (`cv2 = 1`): waiting with probability `C`, then exponential with rate `cμ − λ`; for other
/// service-time variability its mean is scaled by the Allen–Cunneen factor `(1 + cv2)/2` and
/// its shape kept. The response time is the wait plus an independent service time; its p99 is
/// exact for exponential service and from the two-moment gamma fit otherwise.
pub fn shared_queue(lambda: f64, servers: u32, service_s: f64, cv2: f64) -> Option<SharedQueue> {
    if servers == 0 || service_s <= 0.0 {
        return None;
    }
    let mu = 1.0 / service_s;
    let a = lambda / mu;
    let rho = a / servers as f64;
    if rho >= 1.0 {
        return None;
    }
    let pw = if lambda <= 0.0 { 0.0 } else { erlang_c(servers, a) };
    let theta = (servers as f64 * mu - lambda) / (0.5 * (1.0 + cv2));
    let mean_wait = pw / theta;
    let var_wait = 2.0 * pw / (theta * theta) - mean_wait * mean_wait;
    let mean_s = mean_wait + service_s;
    let var_s2 = var_wait + cv2 * service_s * service_s;
    let p99_s =
        if (cv2 - 1.0).abs() < 1e-12 { mmc_response_quantile(pw, theta, mu, 0.99) } else { gamma_p99(mean_s, var_s2) };
    Some(SharedQueue { rho, wait_probability: pw, mean_s, var_s2, p99_s })
}

/// The q-quantile of `W + S` with `W` = 0 with probability `1 − pw`, else exponential with rate
/// `theta`, and `S` exponential with rate `mu` — the M/M/c response time — by bisection on
/// its closed-form tail.
pub fn mmc_response_quantile(pw: f64, theta: f64, mu: f64, q: f64) -> f64 {
    let tail = |t: f64| -> f64 {
        let s = (-mu * t).exp();
        let both = if (theta - mu).abs() < 1e-9 * mu {
            (1.0 + mu * t) * s
        } else {
            (theta * s - mu * (-theta * t).exp()) / (theta - mu)
        };
        (1.0 - pw) * s + pw * both
    };
    let (mut lo, mut hi) = (0.0, 1.0 / mu);
    while tail(hi) > 1.0 - q {
        hi *= 2.0;
    }
    for _ in 0..100 {
        let mid = 0.5 * (lo + hi);
        if tail(mid) > 1.0 - q { lo = mid } else { hi = mid }
    }
    0.5 * (lo + hi)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn single_core_matches_mm1_ps() {
        // M/G/1-PS: E[T] = w / (1 − ρ).
        for rho in [0.1, 0.5, 0.9] {
            let w = 0.05;
            let r = cpu_phase(rho / w, w, 0.25, 1.0).unwrap();
            assert!((r.mean_sojourn_s - w / (1.0 - rho)).abs() < 1e-12, "{rho}");
        }
    }

    #[test]
    fn fractional_core_is_slower_in_proportion() {
        let r = cpu_phase(2.0, 0.1, 0.25, 0.5).unwrap();
        // Service rate 5/s, ρ = 0.4: E[T] = 0.2 / 0.6.
        assert!((r.mean_sojourn_s - 0.2 / 0.6).abs() < 1e-12);
    }

    #[test]
    fn integer_cores_match_erlang_c() {
        // M/M/c with c = 2, a = 1.5: Erlang C = 0.642857; E[W] = C / (cμ − λ); E[T] = E[W] + 1/μ.
        let (lambda, w) = (15.0, 0.1);
        let r = cpu_phase(lambda, w, 1.0, 2.0).unwrap();
        let erlang_c = 0.642_857_142_857;
        let expected = erlang_c / (2.0 / w - lambda) + w;
        assert!((r.mean_sojourn_s - expected).abs() < 1e-9, "{} vs {expected}", r.mean_sojourn_s);
    }

    #[test]
    fn erlang_c_textbook_values() {
        // c = 2, a = 1.5 (above); c = 1: C = ρ.
        assert!((erlang_c(2, 1.5) - 0.642_857_142_857).abs() < 1e-9);
        assert!((erlang_c(1, 0.7) - 0.7).abs() < 1e-12);
    }

    #[test]
    fn shared_queue_single_server_is_mm1() {
        // M/M/1 FCFS: response ~ Exp(μ − λ): mean 1/(μ−λ), p99 ln(100)/(μ−λ).
        let q = shared_queue(8.0, 1, 0.1, 1.0).unwrap();
        assert!((q.mean_s - 0.5).abs() < 1e-9, "{q:?}");
        assert!((q.p99_s - 0.5 * 100f64.ln()).abs() < 1e-6, "{q:?}");
    }

    #[test]
    fn overload_has_no_steady_state() {
        assert!(cpu_phase(10.0, 0.1, 0.25, 1.0).is_none());
        assert!(cpu_phase(9.99, 0.1, 0.25, 1.0).is_some());
    }

    #[test]
    fn gamma_quantile_matches_exponential() {
        // Exponential(mean 1): p99 = ln 100 = 4.605.
        let q = gamma_p99(1.0, 1.0);
        assert!((q - 4.605).abs() / 4.605 < 0.03, "{q}");
        let c = gamma_cdf(1.0, 1.0, 4.605);
        assert!((c - 0.99).abs() < 0.003, "{c}");
    }

    #[test]
    fn mixture_of_identical_components_is_the_component() {
        let single = gamma_p99(0.2, 0.01);
        let mix = mixture_quantile(&[(1.0, 0.2, 0.01), (3.0, 0.2, 0.01)], 0.99);
        assert!((single - mix).abs() / single < 1e-3, "{single} {mix}");
    }
}
