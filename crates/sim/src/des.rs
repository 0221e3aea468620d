//! The request-level discrete-event mode of the same model, used to validate the fast mode.
//!
//! Every request is simulated: Poisson arrivals routed uniformly at random to ready replicas
//! (kube-proxy's random endpoint choice), a CPU phase of gamma-distributed work under processor
//! sharing where a request uses at most one core, then a gamma-distributed I/O wait. Requests
//! are abandoned at the timeout. A replica whose working set (base + per-request × in flight)
//! exceeds its memory limit is OOM-killed: everything in it is lost and it returns after
//! CrashLoopBackOff and the start-up delay, exactly the rules of the fast mode.

use std::cmp::Reverse;
use std::collections::{BinaryHeap, VecDeque};

use rand::{RngExt, SeedableRng};
use rand_distr::{Distribution, Exp, Gamma};
use rand_pcg::Pcg64Mcg;

use crate::segments::{REQUEST_SIZE_CV, RequestCost};

/// A fixed allocation under a constant arrival rate.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct DesConfig {
    pub cost: RequestCost,
    pub arrival_rps: f64,
    pub replicas: u32,
    pub cores: f64,
    pub memory_limit_bytes: f64,
    pub timeout_s: f64,
    pub startup_delay_s: f64,
    pub warmup_s: f64,
    pub measure_s: f64,
}

#[derive(Debug, Clone, PartialEq, Default)]
pub struct DesResult {
    pub arrivals: u64,
    pub completed: u64,
    pub dropped: u64,
    pub oom_kills: u64,
    pub latency_mean_s: f64,
    pub latency_p99_s: f64,
    pub throughput_rps: f64,
}

/// Total order on f64 for the heaps (values are never NaN here).
#[derive(Debug, Clone, Copy, PartialEq)]
struct Key(f64);
impl Eq for Key {}
impl PartialOrd for Key {
    fn partial_cmp(&self, other: &Self) -> Option<std::cmp::Ordering> {
        Some(self.cmp(other))
    }
}
impl Ord for Key {
    fn cmp(&self, other: &Self) -> std::cmp::Ordering {
        self.0.total_cmp(&other.0)
    }
}

#[derive(Debug, Clone, Copy)]
struct Job {
    arrived: f64,
    io_s: f64,
    alive: bool,
}

#[derive(Debug, Default)]
struct Replica {
    /// Processor-sharing virtual clock: attained service of every job in the CPU phase.
    virtual_time: f64,
    /// (finish tag in virtual time, job) of CPU-phase jobs.
    cpu: BinaryHeap<Reverse<(Key, usize)>>,
    /// (completion time, job) of I/O-phase jobs.
    io: BinaryHeap<Reverse<(Key, usize)>>,
    /// CPU-phase jobs in arrival order, for abandonment at the timeout.
    fifo: VecDeque<usize>,
    cpu_count: usize,
    in_flight: usize,
    down_until: f64,
    up_since: f64,
    crash_streak: u32,
}

impl Replica {
    fn rate(&self, cores: f64) -> f64 {
        if self.cpu_count == 0 { 0.0 } else { (cores / self.cpu_count as f64).min(1.0) }
    }
}

/// Runs one configuration; deterministic for a seed.
pub fn simulate(cfg: &DesConfig, seed: u64) -> DesResult {
    let mut rng = Pcg64Mcg::seed_from_u64(seed);
    let shape = 1.0 / (REQUEST_SIZE_CV * REQUEST_SIZE_CV);
    let work = Gamma::new(shape, cfg.cost.cpu_s / shape).expect("valid gamma");
    let io = (cfg.cost.io_s > 0.0).then(|| Gamma::new(shape, cfg.cost.io_s / shape).expect("valid gamma"));
    let inter = Exp::new(cfg.arrival_rps).expect("positive rate");
    let mut replicas: Vec<Replica> = (0..cfg.replicas).map(|_| Replica::default()).collect();
    let mut jobs: Vec<Job> = Vec::new();
    let end = cfg.warmup_s + cfg.measure_s;
    let mut now = 0.0;
    let mut next_arrival = inter.sample(&mut rng);
    let mut out = DesResult::default();
    let mut latencies: Vec<f64> = Vec::new();
    let measuring = |t: f64| t >= cfg.warmup_s;
    loop {
        // Earliest event: arrival, or per replica a CPU completion, I/O completion or timeout.
        let mut t_next = next_arrival;
        let mut which: Option<(usize, u8)> = None;
        for (i, r) in replicas.iter().enumerate() {
            if let Some(Reverse((Key(tag), _))) = r.cpu.peek() {
                let t = now + (tag - r.virtual_time).max(0.0) / r.rate(cfg.cores);
                if t < t_next {
                    (t_next, which) = (t, Some((i, 0)));
                }
            }
            if let Some(Reverse((Key(t), _))) = r.io.peek()
                && *t < t_next
            {
                (t_next, which) = (*t, Some((i, 1)));
            }
            if let Some(&j) = r.fifo.front() {
                let t = jobs[j].arrived + cfg.timeout_s;
                if t < t_next {
                    (t_next, which) = (t, Some((i, 2)));
                }
            }
        }
        if t_next > end {
            break;
        }
        for r in replicas.iter_mut() {
            r.virtual_time += (t_next - now) * r.rate(cfg.cores);
        }
        now = t_next;
        match which {
            None => {
                next_arrival = now + inter.sample(&mut rng);
                if measuring(now) {
                    out.arrivals += 1;
                }
                let up: Vec<usize> = (0..replicas.len()).filter(|&i| replicas[i].down_until <= now).collect();
                if up.is_empty() {
                    if measuring(now) {
                        out.dropped += 1;
                    }
                    continue;
                }
                let i = up[rng.random_range(0..up.len())];
                let r = &mut replicas[i];
                if r.up_since < r.down_until {
                    r.up_since = r.down_until;
                }
                if now - r.up_since >= 600.0 {
                    r.crash_streak = 0;
                }
                let x = work.sample(&mut rng);
                let d = io.as_ref().map_or(0.0, |g| g.sample(&mut rng));
                jobs.push(Job { arrived: now, io_s: d, alive: true });
                let j = jobs.len() - 1;
                r.cpu.push(Reverse((Key(r.virtual_time + x), j)));
                r.fifo.push_back(j);
                r.cpu_count += 1;
                r.in_flight += 1;
                let ws = cfg.cost.mem_base_bytes + cfg.cost.mem_per_request_bytes * r.in_flight as f64;
                if ws > cfg.memory_limit_bytes {
                    // OOM kill: everything in flight is lost.
                    let lost = r.in_flight as u64;
                    for Reverse((_, j)) in r.cpu.drain().chain(r.io.drain()) {
                        jobs[j].alive = false;
                    }
                    r.fifo.clear();
                    r.cpu_count = 0;
                    r.in_flight = 0;
                    let backoff = if r.crash_streak == 0 {
                        0.0
                    } else {
                        (10.0 * 2f64.powi(r.crash_streak as i32 - 1)).min(300.0)
                    };
                    r.crash_streak += 1;
                    r.down_until = now + backoff + cfg.startup_delay_s;
                    if measuring(now) {
                        out.dropped += lost;
                        out.oom_kills += 1;
                    }
                }
            }
            Some((i, 0)) => {
                let r = &mut replicas[i];
                let Reverse((_, j)) = r.cpu.pop().expect("peeked");
                r.cpu_count -= 1;
                r.fifo.retain(|&k| k != j);
                let done = now + jobs[j].io_s;
                r.io.push(Reverse((Key(done), j)));
            }
            Some((i, 1)) => {
                let r = &mut replicas[i];
                let Reverse((_, j)) = r.io.pop().expect("peeked");
                r.in_flight -= 1;
                let latency = now - jobs[j].arrived;
                if measuring(jobs[j].arrived) {
                    if latency > cfg.timeout_s {
                        out.dropped += 1;
                    } else {
                        out.completed += 1;
                        latencies.push(latency);
                    }
                }
            }
            Some((i, _)) => {
                // Abandonment: the oldest CPU-phase request hit its timeout.
                let r = &mut replicas[i];
                let j = r.fifo.pop_front().expect("peeked");
                jobs[j].alive = false;
                r.cpu.retain(|Reverse((_, k))| *k != j);
                r.cpu_count -= 1;
                r.in_flight -= 1;
                if measuring(jobs[j].arrived) {
                    out.dropped += 1;
                }
            }
        }
    }
    out.throughput_rps = out.completed as f64 / cfg.measure_s;
    if !latencies.is_empty() {
        out.latency_mean_s = latencies.iter().sum::<f64>() / latencies.len() as f64;
        latencies.sort_by(f64::total_cmp);
        let idx = ((latencies.len() as f64 * 0.99).ceil() as usize).clamp(1, latencies.len()) - 1;
        out.latency_p99_s = latencies[idx];
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cfg(rps: f64, cores: f64) -> DesConfig {
        DesConfig {
            cost: RequestCost {
                cpu_s: 0.05,
                io_s: 0.0,
                mem_base_bytes: 1e8,
                mem_per_request_bytes: 1e6,
                disk_bytes: 0.0,
                net_bytes: 0.0,
            },
            arrival_rps: rps,
            replicas: 1,
            cores,
            memory_limit_bytes: 1e9,
            timeout_s: 30.0,
            startup_delay_s: 30.0,
            warmup_s: 100.0,
            measure_s: 2000.0,
        }
    }

    #[test]
    fn mg1_ps_mean_matches_theory() {
        // ρ = 0.5 on one core: E[T] = w / (1 − ρ) = 0.1 s.
        let r = simulate(&cfg(10.0, 1.0), 1);
        assert!((r.latency_mean_s - 0.1).abs() < 0.01, "{r:?}");
        assert!((r.throughput_rps - 10.0).abs() < 0.5);
        assert_eq!(r.dropped, 0);
    }

    #[test]
    fn memory_below_working_set_is_oom_killed() {
        let mut c = cfg(10.0, 1.0);
        c.memory_limit_bytes = 1e8 + 0.5e6;
        let r = simulate(&c, 1);
        assert!(r.oom_kills > 0 && r.dropped > 0);
    }
}
