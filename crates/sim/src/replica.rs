//! One replica over one interval in the fast mode: the steady-state formulas when it keeps up,
//! a fluid backlog when it does not.

use crate::fluid::{self, Cohort, Work};
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

/// The queue state a replica carries from one interval to the next.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct ReplicaQueue {
    /// Requests left over from a near-saturated interval, served first in the next one.
    pub backlog: f64,
    /// Fluid cohorts while the replica is (or is draining from) overloaded.
    pub cohorts: Vec<Cohort>,
}

impl ReplicaQueue {
    /// Requests queued or in service that the next interval inherits.
    pub fn queued(&self) -> f64 {
        self.backlog + fluid::in_system(&self.cohorts)
    }

    /// Forgets every queued request (a crash or a kill) and returns how many there were.
    pub fn clear(&mut self) -> f64 {
        let lost = self.queued();
        self.backlog = 0.0;
        self.cohorts.clear();
        lost
    }
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
    let mut q = ReplicaQueue { backlog, cohorts: Vec::new() };
    let mut r = step_queue(&mut q, arrivals, arrivals, dt, cost, REQUEST_SIZE_CV * REQUEST_SIZE_CV, cores, timeout_s);
    r.backlog = q.queued();
    r
}

/// One interval of one replica. `arrivals` is the realised count, `expected_arrivals` its
/// expectation (the Poisson mean): the steady-state formulas describe a Poisson stream of the
/// expected rate, whose count fluctuations are already part of them, so the rate they use is
/// the expected one while what is served is counted from the realised arrivals. `work_cv2` is
/// the squared coefficient of variation of per-request CPU work.
///
/// Below saturation with nothing queued, the closed-form steady state of the processor-sharing
/// replica applies ([`cpu_phase`]). Otherwise the replica is overloaded or draining, and the
/// fluid cohort model ([`fluid`]) follows it until the queue is back to a few requests.
#[allow(clippy::too_many_arguments)]
pub fn step_queue(
    q: &mut ReplicaQueue,
    arrivals: f64,
    expected_arrivals: f64,
    dt: f64,
    cost: &RequestCost,
    work_cv2: f64,
    cores: f64,
    timeout_s: f64,
) -> ReplicaStep {
    let cv2 = work_cv2;
    let io_var = cv2 * cost.io_s * cost.io_s;
    let demand = arrivals + q.backlog;
    if demand <= 0.0 && q.cohorts.is_empty() {
        return ReplicaStep::default();
    }
    let lambda = (expected_arrivals + q.backlog) / dt;
    let steady = if q.cohorts.is_empty() { cpu_phase(lambda, cost.cpu_s, cv2, cores) } else { None };
    if let Some(phase) = steady {
        let mean = phase.mean_sojourn_s + cost.io_s;
        let var = phase.var_sojourn_s2 + io_var;
        // Requests whose response would exceed the timeout are abandoned.
        let late = 1.0 - gamma_cdf(mean, var, timeout_s);
        let dropped = demand * late;
        let in_flight = lambda * mean;
        q.backlog = 0.0;
        return ReplicaStep {
            served: demand - dropped,
            dropped,
            backlog: 0.0,
            latency_mean_s: mean,
            latency_var_s2: var,
            cpu_usage_cores: (demand / dt * cost.cpu_s).min(cores),
            mean_in_flight: in_flight,
            // Number in a processor-sharing system is over-dispersed relative to Poisson.
            var_in_flight: in_flight / (1.0 - phase.rho).max(0.05),
            overloaded: false,
        };
    }
    // Overloaded, or draining a queue built up before.
    if q.backlog > 0.0 {
        q.cohorts.insert(0, Cohort { arrived: q.backlog, attained_s: 0.0, age_s: 0.0, finished: 0.0 });
        q.backlog = 0.0;
    }
    let work = Work { mean_s: cost.cpu_s, cv2 };
    let f = fluid::step(&mut q.cohorts, arrivals, dt, &work, cost.io_s, cores, timeout_s);
    let (mut mean, mut var) = if f.served > 0.0 {
        let m = f.latency_sum_s / f.served;
        (m, (f.latency_sq_sum_s2 / f.served - m * m).max(0.0))
    } else {
        (0.0, 0.0)
    };
    // Never below the steady state at the cap: the queue was at least that long on its way
    // into overload (the fluid limit has no queueing noise of its own).
    let mut in_flight = f.mean_in_cpu + f.served / dt * cost.io_s;
    let mut var_in_flight = in_flight.max(1.0);
    if let Some(floor) = cpu_phase(RHO_STEADY_CAP * cores / cost.cpu_s.max(1e-12), cost.cpu_s, cv2, cores) {
        mean = mean.max(floor.mean_sojourn_s + cost.io_s);
        var = var.max(floor.var_sojourn_s2 + io_var);
        // The same holds for the requests in flight (memory): what the steady state gives just
        // below saturation at this arrival rate, so the working set is continuous and monotone
        // in load across the boundary between the two regimes.
        let rho = (lambda * cost.cpu_s / cores).min(1.0);
        let steady_in_flight = lambda.min(cores / cost.cpu_s.max(1e-12)) * (floor.mean_sojourn_s + cost.io_s);
        in_flight = in_flight.max(steady_in_flight);
        var_in_flight = var_in_flight.max(steady_in_flight / (1.0 - rho).max(0.05));
    }
    let rho_next = expected_arrivals / dt * cost.cpu_s / cores;
    if rho_next < RHO_STEADY_CAP && f.remaining <= cores.max(1.0) {
        // Drained to a few requests: hand them to the steady state.
        q.backlog = f.remaining;
        q.cohorts.clear();
    }
    ReplicaStep {
        served: f.served,
        dropped: f.dropped,
        backlog: q.queued(),
        latency_mean_s: mean,
        latency_var_s2: var,
        cpu_usage_cores: f.cpu_cores,
        mean_in_flight: in_flight,
        var_in_flight,
        overloaded: true,
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
    fn overload_saturates_cpu_and_serves_less_than_capacity() {
        // ρ = 2: processor sharing with impatient requests serves far below its capacity.
        let s = step_replica(600.0, 0.0, 15.0, &cost(), 1.0, 30.0);
        assert!(s.overloaded);
        assert!(s.served < 300.0 && s.backlog > 100.0, "{s:?}");
        assert!(s.cpu_usage_cores > 0.9);
        // Carrying the backlog into a quiet interval drains most of it.
        let mut q = ReplicaQueue::default();
        let cv2 = REQUEST_SIZE_CV * REQUEST_SIZE_CV;
        step_queue(&mut q, 600.0, 600.0, 15.0, &cost(), cv2, 1.0, 30.0);
        let queued = q.queued();
        let next = step_queue(&mut q, 0.0, 0.0, 15.0, &cost(), cv2, 1.0, 30.0);
        assert!(next.served > 0.5 * queued, "{next:?} of {queued}");
    }

    #[test]
    fn deep_overload_drops_most_requests() {
        let mut q = ReplicaQueue::default();
        let cv2 = REQUEST_SIZE_CV * REQUEST_SIZE_CV;
        let (mut dropped, mut arrived) = (0.0, 0.0);
        for _ in 0..20 {
            let s = step_queue(&mut q, 3000.0, 3000.0, 15.0, &cost(), cv2, 1.0, 10.0);
            dropped += s.dropped;
            arrived += 3000.0;
        }
        assert!(dropped > 0.9 * arrived, "{dropped} of {arrived}");
    }
}
