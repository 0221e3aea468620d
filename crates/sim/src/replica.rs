//! One replica over one interval in the fast mode: the steady-state formulas when it keeps up,
//! a fluid backlog when it does not.

use crate::queueing::{RHO_STEADY_CAP, cpu_phase, gamma_cdf};
use crate::segments::{REQUEST_SIZE_CV, RequestCost};

/// What a replica did in one interval.
#[derive(Debug, Clone, Copy, PartialEq, Default)]
pub struct ReplicaStep {
    /// Requests completed.
    pub served: f64,
    /// Requests timed out (waited longer than the request timeout).
    pub dropped: f64,
    /// Requests still queued at the end of the interval.
    pub backlog: f64,
    /// Mean and variance of the response time of completed requests, seconds.
    pub latency_mean_s: f64,
    pub latency_var_s2: f64,
    /// Mean CPU used, cores.
    pub cpu_usage_cores: f64,
    /// Mean requests in flight (CPU phase, I/O phase and queued).
    pub mean_in_flight: f64,
    /// Variance of the number in flight, for the memory peak.
    pub var_in_flight: f64,
    /// Arrivals exceeded what the allocation can process.
    pub overloaded: bool,
}

/// Simulates one replica receiving `arrivals` requests over `dt` seconds with `backlog` carried
/// from before, `cores` of CPU, and requests abandoned after `timeout_s`.
pub fn step_replica(
    arrivals: f64,
    backlog: f64,
    dt: f64,
    cost: &RequestCost,
    cores: f64,
    timeout_s: f64,
) -> ReplicaStep {
    let cv2 = REQUEST_SIZE_CV * REQUEST_SIZE_CV;
    let demand = arrivals + backlog;
    let lambda = demand / dt;
    if demand <= 0.0 {
        return ReplicaStep::default();
    }
    let io_var = cv2 * cost.io_s * cost.io_s;
    match cpu_phase(lambda, cost.cpu_s, cv2, cores) {
        Some(phase) => {
            let mean = phase.mean_sojourn_s + cost.io_s;
            let var = phase.var_sojourn_s2 + io_var;
            // Requests whose response would exceed the timeout are abandoned.
            let late = 1.0 - gamma_cdf(mean, var, timeout_s);
            let dropped = demand * late;
            let in_flight = lambda * mean;
            ReplicaStep {
                served: demand - dropped,
                dropped,
                backlog: 0.0,
                latency_mean_s: mean,
                latency_var_s2: var,
                cpu_usage_cores: lambda * cost.cpu_s,
                mean_in_flight: in_flight,
                // Number in a processor-sharing system is over-dispersed relative to Poisson.
                var_in_flight: in_flight / (1.0 - phase.rho).max(0.05),
                overloaded: false,
            }
        }
        None => {
            let rate = cores / cost.cpu_s;
            let served = (rate * dt).min(demand);
            let queued = demand - served;
            let max_queue = rate * timeout_s;
            let dropped = (queued - max_queue).max(0.0);
            let end_backlog = queued - dropped;
            let avg_backlog = 0.5 * (backlog + end_backlog);
            let service = cost.cpu_s / cores.min(1.0);
            let wait_spread = (end_backlog - backlog).abs() / rate;
            // Never below the steady state at the cap: the queue was at least that long on
            // its way into overload.
            let floor = cpu_phase(RHO_STEADY_CAP * rate, cost.cpu_s, cv2, cores).expect("below saturation");
            let mean = (avg_backlog / rate + service).max(floor.mean_sojourn_s) + cost.io_s;
            let var = (wait_spread * wait_spread / 12.0 + cv2 * service * service).max(floor.var_sojourn_s2) + io_var;
            let in_flight = avg_backlog + cores.ceil() + rate * cost.io_s;
            ReplicaStep {
                served,
                dropped,
                backlog: end_backlog,
                latency_mean_s: mean,
                latency_var_s2: var,
                cpu_usage_cores: cores,
                mean_in_flight: in_flight,
                var_in_flight: in_flight,
                overloaded: true,
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cost() -> RequestCost {
        RequestCost {
            cpu_s: 0.05,
            io_s: 0.02,
            mem_base_bytes: 1e8,
            mem_per_request_bytes: 1e6,
            disk_bytes: 0.0,
            net_bytes: 0.0,
        }
    }

    #[test]
    fn light_load_is_served_fully_with_near_unloaded_latency() {
        let s = step_replica(15.0, 0.0, 15.0, &cost(), 1.0, 30.0);
        assert!(!s.overloaded && s.backlog == 0.0);
        assert!((s.served - 15.0).abs() < 1e-6);
        assert!(s.latency_mean_s > 0.07 && s.latency_mean_s < 0.08);
        assert!((s.cpu_usage_cores - 0.05).abs() < 1e-12);
    }

    #[test]
    fn overload_builds_backlog_and_saturates_cpu() {
        let s = step_replica(600.0, 0.0, 15.0, &cost(), 1.0, 30.0);
        assert!(s.overloaded);
        assert!((s.served - 300.0).abs() < 1e-9);
        assert!((s.backlog - 300.0).abs() < 1e-9);
        assert_eq!(s.cpu_usage_cores, 1.0);
        // Carrying the backlog into a quiet interval drains it.
        let next = step_replica(0.0, s.backlog, 15.0, &cost(), 1.0, 30.0);
        assert!(next.served >= 299.0);
    }

    #[test]
    fn backlog_beyond_the_timeout_is_dropped() {
        let s = step_replica(3000.0, 0.0, 15.0, &cost(), 1.0, 10.0);
        // 300 served, at most 200 (10 s × 20/s) may wait, the rest time out.
        assert!((s.dropped - 2500.0).abs() < 1e-6, "{s:?}");
    }
}
