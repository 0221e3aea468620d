//! The request-level discrete-event mode of the same model, used to validate the fast mode.
//!
//! Every request is simulated: Poisson arrivals (at a rate that may change every interval)
//! routed uniformly at random to ready replicas (kube-proxy's random endpoint choice), a CPU
//! phase of gamma-distributed work under processor sharing where a request uses at most one
//! core, then a gamma-distributed I/O wait. Requests still in their CPU phase are abandoned at
//! the timeout. A replica whose working set (base + per-request × in flight) exceeds its memory
//! limit is OOM-killed: everything in it is lost and it returns after CrashLoopBackOff and the
//! start-up delay. Scale events add replicas (ready after the start-up delay) or delete the
//! newest ones (no new requests; they drain for the grace period, then what is left is
//! dropped). With `Dispatch::SharedQueue` requests instead wait in one FCFS queue and each
//! replica serves one at a time. These are exactly the rules of the fast mode.

use std::cmp::Reverse;
use std::collections::{BinaryHeap, VecDeque};

use rand::{RngExt, SeedableRng};
use rand_distr::{Distribution, Exp, Gamma};
use rand_pcg::Pcg64Mcg;

use crate::cluster::Dispatch;
use crate::segments::{REQUEST_SIZE_CV, RequestCost};

/// CrashLoopBackOff: first delay, cap, and how long a pod must run to reset it (as the fast mode).
const BACKOFF_INITIAL_S: f64 = 10.0;
const BACKOFF_MAX_S: f64 = 300.0;
const BACKOFF_RESET_S: f64 = 600.0;

/// One app under a given allocation and arrival-rate series.
#[derive(Debug, Clone, PartialEq)]
pub struct DesConfig {
    pub cost: RequestCost,
    /// Arrival rate when `rates` is empty, requests/s.
    pub arrival_rps: f64,
    /// Arrival rate of each `interval_s`-long interval from t = 0 (the last one holds after).
    pub rates: Vec<f64>,
    pub interval_s: f64,
    pub replicas: u32,
    /// (time, replicas): the Deployment is scaled to that many replicas at that time.
    pub scale_events: Vec<(f64, u32)>,
    pub cores: f64,
    pub memory_limit_bytes: f64,
    pub timeout_s: f64,
    pub startup_delay_s: f64,
    pub termination_grace_s: f64,
    pub warmup_s: f64,
    pub measure_s: f64,
    pub dispatch: Dispatch,
    /// Coefficient of variation of per-request CPU (and I/O) time.
    pub work_cv: f64,
}

impl DesConfig {
    /// A fixed allocation under a constant rate, with the fast mode's defaults for the rest.
    pub fn constant(cost: RequestCost, arrival_rps: f64, replicas: u32, cores: f64, memory_limit_bytes: f64) -> Self {
        DesConfig {
            cost,
            arrival_rps,
            rates: Vec::new(),
            interval_s: 15.0,
            replicas,
            scale_events: Vec::new(),
            cores,
            memory_limit_bytes,
            timeout_s: 30.0,
            startup_delay_s: 30.0,
            termination_grace_s: 30.0,
            warmup_s: 120.0,
            measure_s: 6000.0,
            dispatch: Dispatch::Random,
            work_cv: REQUEST_SIZE_CV,
        }
    }

    fn rate_at(&self, t: f64) -> f64 {
        if self.rates.is_empty() {
            return self.arrival_rps;
        }
        let i = ((t / self.interval_s).floor().max(0.0) as usize).min(self.rates.len() - 1);
        self.rates[i]
    }
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

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum State {
    Queued,
    Cpu,
    Io,
    Gone,
}

#[derive(Debug, Clone, Copy)]
struct Job {
    arrived: f64,
    work: f64,
    io_s: f64,
    state: State,
}

#[derive(Debug, Default)]
struct Replica {
    /// Processor-sharing virtual clock: attained service of every job in the CPU phase.
    virtual_time: f64,
    /// (finish tag in virtual time, job) of CPU-phase jobs; entries of jobs that left are
    /// skipped lazily.
    cpu: BinaryHeap<Reverse<(Key, usize)>>,
    /// (completion time, job) of I/O-phase jobs.
    io: BinaryHeap<Reverse<(Key, usize)>>,
    /// CPU-phase jobs in arrival order, for abandonment at the timeout (lazily cleaned).
    fifo: VecDeque<usize>,
    cpu_count: usize,
    in_flight: usize,
    down_until: f64,
    up_since: f64,
    crash_streak: u32,
    /// Deleted: no new requests; everything left is dropped at this time.
    drain_until: Option<f64>,
    removed: bool,
}

impl Replica {
    fn rate(&self, cores: f64) -> f64 {
        if self.cpu_count == 0 { 0.0 } else { (cores / self.cpu_count as f64).min(1.0) }
    }

    fn accepts(&self, now: f64) -> bool {
        !self.removed && self.drain_until.is_none() && self.down_until <= now
    }

    /// Drops stale heap and queue heads (jobs that already left).
    fn clean(&mut self, jobs: &[Job]) {
        while let Some(Reverse((_, j))) = self.cpu.peek() {
            if jobs[*j].state == State::Cpu {
                break;
            }
            self.cpu.pop();
        }
        while let Some(&j) = self.fifo.front() {
            if jobs[j].state == State::Cpu {
                break;
            }
            self.fifo.pop_front();
        }
    }

    /// Everything in the replica is lost; returns how many of the lost arrived while measuring.
    fn lose_all(&mut self, jobs: &mut [Job], measuring_from: f64) -> u64 {
        let mut lost = 0;
        for Reverse((_, j)) in self.cpu.drain().chain(self.io.drain()) {
            if matches!(jobs[j].state, State::Cpu | State::Io) {
                jobs[j].state = State::Gone;
                if jobs[j].arrived >= measuring_from {
                    lost += 1;
                }
            }
        }
        self.fifo.clear();
        self.cpu_count = 0;
        self.in_flight = 0;
        lost
    }
}

/// Runs one configuration; deterministic for a seed.
pub fn simulate(cfg: &DesConfig, seed: u64) -> DesResult {
    let mut rng = Pcg64Mcg::seed_from_u64(seed);
    let shape = 1.0 / (cfg.work_cv * cfg.work_cv).max(1e-6);
    let work = Gamma::new(shape, cfg.cost.cpu_s / shape).expect("valid gamma");
    let io = (cfg.cost.io_s > 0.0).then(|| Gamma::new(shape, cfg.cost.io_s / shape).expect("valid gamma"));
    let shared = cfg.dispatch == Dispatch::SharedQueue;
    let mut replicas: Vec<Replica> = (0..cfg.replicas).map(|_| Replica::default()).collect();
    let mut queue: VecDeque<usize> = VecDeque::new();
    let mut jobs: Vec<Job> = Vec::new();
    let mut scale: VecDeque<(f64, u32)> = cfg.scale_events.iter().copied().collect();
    let end = cfg.warmup_s + cfg.measure_s;
    let from = cfg.warmup_s;
    let mut now = 0.0;
    let exp1 = Exp::new(1.0).expect("positive rate");
    // Arrivals of a piecewise-constant rate: unit-rate exponential gaps in integrated-rate time.
    let mut next_arrival = {
        let mut budget: f64 = exp1.sample(&mut rng);
        next_time(cfg, 0.0, &mut budget)
    };
    let mut out = DesResult::default();
    let mut latencies: Vec<f64> = Vec::new();
    let record_done = |out: &mut DesResult, latencies: &mut Vec<f64>, job: &Job, now: f64| {
        if job.arrived >= from {
            let latency = now - job.arrived;
            if latency > cfg.timeout_s {
                out.dropped += 1;
            } else {
                out.completed += 1;
                latencies.push(latency);
            }
        }
    };
    // Shared queue: start the next queued job on replica i if it is free.
    fn start_next(i: usize, replicas: &mut [Replica], queue: &mut VecDeque<usize>, jobs: &mut [Job], now: f64) {
        let r = &mut replicas[i];
        if !r.accepts(now) || r.in_flight > 0 {
            return;
        }
        while let Some(j) = queue.pop_front() {
            if jobs[j].state != State::Queued {
                continue;
            }
            jobs[j].state = State::Cpu;
            r.cpu.push(Reverse((Key(r.virtual_time + jobs[j].work), j)));
            r.fifo.push_back(j);
            r.cpu_count += 1;
            r.in_flight += 1;
            return;
        }
    }
    loop {
        // The earliest event.
        #[derive(Clone, Copy)]
        enum Ev {
            Arrival,
            Scale,
            Cpu(usize),
            Io(usize),
            Abandon(usize),
            Drained(usize),
            Up(usize),
            QueueAbandon,
        }
        let mut t_next = next_arrival;
        let mut ev = Ev::Arrival;
        if let Some(&(t, _)) = scale.front()
            && t < t_next
        {
            (t_next, ev) = (t, Ev::Scale);
        }
        if let Some(&j) = queue.front() {
            let t = jobs[j].arrived + cfg.timeout_s;
            if t < t_next {
                (t_next, ev) = (t, Ev::QueueAbandon);
            }
        }
        for (i, r) in replicas.iter_mut().enumerate() {
            if r.removed {
                continue;
            }
            r.clean(&jobs);
            if let Some(Reverse((Key(tag), _))) = r.cpu.peek() {
                let t = now + (tag - r.virtual_time).max(0.0) / r.rate(cfg.cores);
                if t < t_next {
                    (t_next, ev) = (t, Ev::Cpu(i));
                }
            }
            if let Some(Reverse((Key(t), _))) = r.io.peek()
                && *t < t_next
            {
                (t_next, ev) = (*t, Ev::Io(i));
            }
            if !shared && let Some(&j) = r.fifo.front() {
                let t = jobs[j].arrived + cfg.timeout_s;
                if t < t_next {
                    (t_next, ev) = (t, Ev::Abandon(i));
                }
            }
            if let Some(t) = r.drain_until
                && t < t_next
            {
                (t_next, ev) = (t, Ev::Drained(i));
            }
            if shared && r.down_until > now && r.down_until < t_next && r.drain_until.is_none() {
                (t_next, ev) = (r.down_until, Ev::Up(i));
            }
        }
        if t_next > end {
            break;
        }
        for r in replicas.iter_mut() {
            r.virtual_time += (t_next - now) * r.rate(cfg.cores);
        }
        now = t_next;
        match ev {
            Ev::Arrival => {
                let mut budget: f64 = exp1.sample(&mut rng);
                next_arrival = next_time(cfg, now, &mut budget);
                if now >= from {
                    out.arrivals += 1;
                }
                let x = work.sample(&mut rng);
                let d = io.as_ref().map_or(0.0, |g| g.sample(&mut rng));
                jobs.push(Job { arrived: now, work: x, io_s: d, state: State::Queued });
                let j = jobs.len() - 1;
                if shared {
                    if !replicas.iter().any(|r| r.accepts(now)) {
                        jobs[j].state = State::Gone;
                        if now >= from {
                            out.dropped += 1;
                        }
                        continue;
                    }
                    queue.push_back(j);
                    if let Some(i) =
                        (0..replicas.len()).find(|&i| replicas[i].accepts(now) && replicas[i].in_flight == 0)
                    {
                        start_next(i, &mut replicas, &mut queue, &mut jobs, now);
                    }
                    continue;
                }
                // Random routing among ready replicas, without allocating.
                let up = replicas.iter().filter(|r| r.accepts(now)).count();
                if up == 0 {
                    jobs[j].state = State::Gone;
                    if now >= from {
                        out.dropped += 1;
                    }
                    continue;
                }
                let k = rng.random_range(0..up);
                let i = (0..replicas.len()).filter(|&i| replicas[i].accepts(now)).nth(k).expect("k < up");
                let r = &mut replicas[i];
                if r.up_since < r.down_until {
                    r.up_since = r.down_until;
                }
                if now - r.up_since >= BACKOFF_RESET_S {
                    r.crash_streak = 0;
                }
                jobs[j].state = State::Cpu;
                r.cpu.push(Reverse((Key(r.virtual_time + x), j)));
                r.fifo.push_back(j);
                r.cpu_count += 1;
                r.in_flight += 1;
                let ws = cfg.cost.mem_base_bytes + cfg.cost.mem_per_request_bytes * r.in_flight as f64;
                if ws > cfg.memory_limit_bytes {
                    // OOM kill: everything in flight is lost.
                    let lost = r.lose_all(&mut jobs, from);
                    let backoff = if r.crash_streak == 0 {
                        0.0
                    } else {
                        (BACKOFF_INITIAL_S * 2f64.powi(r.crash_streak as i32 - 1)).min(BACKOFF_MAX_S)
                    };
                    r.crash_streak += 1;
                    r.down_until = now + backoff + cfg.startup_delay_s;
                    out.dropped += lost;
                    if now >= from {
                        out.oom_kills += 1;
                    }
                }
            }
            Ev::Scale => {
                let (_, target) = scale.pop_front().expect("peeked");
                let active: Vec<usize> = (0..replicas.len())
                    .filter(|&i| !replicas[i].removed && replicas[i].drain_until.is_none())
                    .collect();
                if (target as usize) > active.len() {
                    for _ in active.len()..target as usize {
                        replicas.push(Replica {
                            down_until: now + cfg.startup_delay_s,
                            up_since: now + cfg.startup_delay_s,
                            ..Replica::default()
                        });
                    }
                } else {
                    // The newest replicas go first.
                    for &i in active.iter().rev().take(active.len() - target as usize) {
                        let r = &mut replicas[i];
                        if r.down_until > now || r.in_flight == 0 {
                            r.removed = true;
                            r.lose_all(&mut jobs, f64::INFINITY);
                        } else {
                            r.drain_until = Some(now + cfg.termination_grace_s);
                        }
                    }
                }
            }
            Ev::Cpu(i) => {
                let r = &mut replicas[i];
                let Reverse((_, j)) = r.cpu.pop().expect("peeked");
                r.cpu_count -= 1;
                jobs[j].state = State::Io;
                let done = now + jobs[j].io_s;
                r.io.push(Reverse((Key(done), j)));
            }
            Ev::Io(i) => {
                let r = &mut replicas[i];
                let Reverse((_, j)) = r.io.pop().expect("peeked");
                r.in_flight -= 1;
                jobs[j].state = State::Gone;
                record_done(&mut out, &mut latencies, &jobs[j], now);
                if r.drain_until.is_some() && r.in_flight == 0 {
                    r.removed = true;
                }
                if shared {
                    start_next(i, &mut replicas, &mut queue, &mut jobs, now);
                }
            }
            Ev::Abandon(i) => {
                // The oldest CPU-phase request hit its timeout.
                let r = &mut replicas[i];
                let j = r.fifo.pop_front().expect("peeked");
                jobs[j].state = State::Gone;
                r.cpu_count -= 1;
                r.in_flight -= 1;
                if jobs[j].arrived >= from {
                    out.dropped += 1;
                }
            }
            Ev::QueueAbandon => {
                let j = queue.pop_front().expect("peeked");
                if jobs[j].state == State::Queued {
                    jobs[j].state = State::Gone;
                    if jobs[j].arrived >= from {
                        out.dropped += 1;
                    }
                }
            }
            Ev::Drained(i) => {
                let r = &mut replicas[i];
                out.dropped += r.lose_all(&mut jobs, from);
                r.drain_until = None;
                r.removed = true;
            }
            Ev::Up(i) => {
                start_next(i, &mut replicas, &mut queue, &mut jobs, now);
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

/// The time at which the integrated arrival rate from `t` reaches `budget` (consumed).
fn next_time(cfg: &DesConfig, mut t: f64, budget: &mut f64) -> f64 {
    if cfg.rates.is_empty() {
        return if cfg.arrival_rps > 0.0 { t + *budget / cfg.arrival_rps } else { f64::INFINITY };
    }
    let last_start = (cfg.rates.len() - 1) as f64 * cfg.interval_s;
    loop {
        let rate = cfg.rate_at(t);
        let boundary =
            if t >= last_start { f64::INFINITY } else { ((t / cfg.interval_s).floor() + 1.0) * cfg.interval_s };
        if rate > 0.0 && t + *budget / rate <= boundary {
            return t + *budget / rate;
        }
        if boundary.is_infinite() {
            return f64::INFINITY;
        }
        *budget -= rate * (boundary - t);
        t = boundary;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cfg(rps: f64, cores: f64) -> DesConfig {
        let cost = RequestCost {
            cpu_s: 0.05,
            io_s: 0.0,
            mem_base_bytes: 1e8,
            mem_per_request_bytes: 1e6,
            disk_bytes: 0.0,
            net_bytes: 0.0,
        };
        DesConfig { warmup_s: 100.0, measure_s: 2000.0, ..DesConfig::constant(cost, rps, 1, cores, 1e9) }
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
    fn shared_queue_mm1_mean_matches_theory() {
        // M/M/1 FCFS at ρ = 0.5: E[T] = 1/(μ − λ) = 0.1 s.
        let c = DesConfig { dispatch: Dispatch::SharedQueue, work_cv: 1.0, ..cfg(10.0, 1.0) };
        let r = simulate(&c, 3);
        assert!((r.latency_mean_s - 0.1).abs() < 0.01, "{r:?}");
    }

    #[test]
    fn rate_series_and_scale_down_are_followed() {
        // Half the run at 10/s then 30/s: about 20/s over the run.
        let mut c = cfg(0.0, 4.0);
        c.replicas = 2;
        c.warmup_s = 0.0;
        c.rates = vec![10.0; 100];
        c.rates.extend(vec![30.0; 100]);
        c.measure_s = 3000.0;
        let r = simulate(&c, 5);
        assert!((r.arrivals as f64 / 3000.0 - 20.0).abs() < 1.0, "{r:?}");
        // Scaling to zero replicas mid-run drops what arrives after.
        c.scale_events = vec![(1500.0, 0)];
        let r0 = simulate(&c, 5);
        assert!(r0.dropped as f64 > 0.7 * r0.arrivals as f64, "{r0:?}");
    }

    #[test]
    fn memory_below_working_set_is_oom_killed() {
        let mut c = cfg(10.0, 1.0);
        c.memory_limit_bytes = 1e8 + 0.5e6;
        let r = simulate(&c, 1);
        assert!(r.oom_kills > 0 && r.dropped > 0);
    }
}
