//! `aware validate-sim`: the same configurations through the fast mode (the real `SimCluster`)
//! and the discrete-event mode.
//!
//! Three checks, none of which can be passed by tuning on what it checks:
//! - [`run_fixed`]: the fixed *fitting set* ([`cases`]): light to heavy load, fractional to
//!   multi-core, one to four replicas, I/O-bound, overloaded, starved. The fast mode's only
//!   fitted constants (`queueing::PS_VARIANCE_FACTOR`, `queueing::RHO_STEADY_CAP`,
//!   `fluid::MAX_SUBSTEP_S`) were chosen on these configurations and nothing else.
//! - [`run_random`]: a *fresh* random set drawn from the seed — random segment chains,
//!   1–6 replicas, 0.25–4 cores, load 1.2× to 5× capacity, bursts, and a scale event mid-run —
//!   compared on served and dropped fractions, p99 and OOM kills with tolerances fixed here.
//! - [`run_mmc`]: M/M/c apps through both modes against the Erlang-C response-time
//!   distribution, computed here independently of the simulator's own formulas.

use std::sync::Arc;

use aware_core::{Cluster, ContainerResources, Recommendation, Resources};
use rand::{RngExt, SeedableRng};
use rand_pcg::Pcg64Mcg;
use serde::Serialize;

use crate::app::{Allocation, AppSpec};
use crate::cluster::{CONTAINER, Dispatch, SimCluster, SimConfig};
use crate::des::{self, DesConfig};
use crate::load::{SyntheticLoad, Trace};
use crate::queueing::{gamma_p99, mixture_quantile};
use crate::segments::{RequestCost, Segment, SegmentKind};

/// Relative error bounds the fast mode must meet on configurations that are not overloaded.
pub const MEAN_TOLERANCE: f64 = 0.10;
pub const THROUGHPUT_TOLERANCE: f64 = 0.10;
pub const P99_TOLERANCE: f64 = 0.20;

/// One fixed allocation under constant load.
#[derive(Debug, Clone, Serialize)]
pub struct ValidationCase {
    pub name: &'static str,
    pub segments: Vec<Segment>,
    /// Offered load as a fraction of the allocation's CPU capacity (λw / (replicas·cores)).
    pub cpu_load: f64,
    pub replicas: u32,
    pub cores: f64,
    /// Requests in flight the memory limit has room for (base + per-request × this).
    pub memory_in_flight: f64,
}

#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct ModeResult {
    pub latency_mean_ms: Option<f64>,
    pub latency_p99_ms: Option<f64>,
    pub throughput_rps: f64,
    pub dropped_fraction: f64,
    pub oom_kills: u64,
    /// Dropped ≥ 1 %, throughput under 97 % of arrivals, or OOM kills.
    pub overloaded: bool,
}

#[derive(Debug, Clone, Serialize)]
pub struct CaseReport {
    pub name: &'static str,
    pub arrival_rps: f64,
    pub replicas: u32,
    pub cpu_millicores: u64,
    pub memory_bytes: u64,
    pub fast: ModeResult,
    pub discrete_event: ModeResult,
    /// |fast − des| / des, for cases that are not overloaded.
    pub mean_error: Option<f64>,
    pub p99_error: Option<f64>,
    pub throughput_error: Option<f64>,
    pub pass: bool,
}

#[derive(Debug, Clone, Serialize)]
pub struct ValidationReport {
    pub mean_tolerance: f64,
    pub p99_tolerance: f64,
    pub throughput_tolerance: f64,
    pub cases: Vec<CaseReport>,
    pub pass: bool,
}

fn seg(kind: SegmentKind) -> Segment {
    Segment { kind, payload: 1.0 }
}

/// The fixed set: light, moderate and heavy load, fractional and multi-core limits, several
/// replicas, an I/O-bound chain, and three configurations that must read as overloaded.
pub fn cases() -> Vec<ValidationCase> {
    use SegmentKind::*;
    let web = vec![seg(ImageResize), seg(KvRead)];
    let case = |name, segments: &Vec<Segment>, cpu_load, replicas, cores, memory_in_flight| ValidationCase {
        name,
        segments: segments.clone(),
        cpu_load,
        replicas,
        cores,
        memory_in_flight,
    };
    vec![
        // Room for 200 requests in flight: memory never binds unless the case is about memory.
        case("light", &web, 0.3, 1, 1.0, 200.0),
        case("moderate", &web, 0.6, 1, 1.0, 200.0),
        case("heavy", &web, 0.85, 1, 1.0, 200.0),
        case("fractional-cpu", &web, 0.6, 1, 0.5, 200.0),
        case("multi-core", &web, 0.7, 1, 4.0, 200.0),
        case("several-replicas", &web, 0.7, 4, 1.0, 200.0),
        case("io-bound", &vec![seg(ObjectRead), seg(JsonToYaml)], 0.5, 2, 1.0, 200.0),
        case("overloaded", &web, 1.3, 2, 1.0, 200.0),
        case("cpu-starved", &web, 3.0, 1, 0.25, 200.0),
        // Room for half a request: the working set at mean load does not fit.
        case("memory-starved", &web, 0.5, 1, 1.0, 0.5),
    ]
}

const INTERVAL_S: f64 = 15.0;
const WARMUP_STEPS: u64 = 8;
const MEASURE_STEPS: u64 = 400;

/// Runs every case of the fixed fitting set through both modes.
pub fn run_fixed(seed: u64) -> ValidationReport {
    // Cases are independent: run them on all cores, keep the fixed order.
    let all = cases();
    let cases: Vec<CaseReport> = std::thread::scope(|s| {
        let handles: Vec<_> = all.iter().map(|c| s.spawn(move || run_case(c, seed))).collect();
        handles.into_iter().map(|h| h.join().expect("validation case panicked")).collect()
    });
    let pass = cases.iter().all(|c| c.pass);
    ValidationReport {
        mean_tolerance: MEAN_TOLERANCE,
        p99_tolerance: P99_TOLERANCE,
        throughput_tolerance: THROUGHPUT_TOLERANCE,
        cases,
        pass,
    }
}

fn overloaded(dropped_fraction: f64, throughput: f64, arrival_rps: f64, oom_kills: u64) -> bool {
    dropped_fraction >= 0.01 || throughput < 0.97 * arrival_rps || oom_kills > 0
}

pub fn run_case(case: &ValidationCase, seed: u64) -> CaseReport {
    let cost = RequestCost::of_chain(&case.segments, |_| 1.0);
    let arrival_rps = case.cpu_load * case.replicas as f64 * case.cores / cost.cpu_s;
    let memory_bytes = (cost.mem_base_bytes + cost.mem_per_request_bytes * case.memory_in_flight) as u64;
    let cpu_millicores = (case.cores * 1000.0).round() as u64;

    let fast = run_fast(case, arrival_rps, cpu_millicores, memory_bytes, seed);
    let des_cfg = DesConfig {
        warmup_s: WARMUP_STEPS as f64 * INTERVAL_S,
        measure_s: MEASURE_STEPS as f64 * INTERVAL_S,
        ..DesConfig::constant(cost, arrival_rps, case.replicas, case.cores, memory_bytes as f64)
    };
    let d = des::simulate(&des_cfg, seed);
    let arrivals = d.arrivals.max(1) as f64;
    let dropped_fraction = d.dropped as f64 / arrivals;
    let discrete_event = ModeResult {
        latency_mean_ms: (d.completed > 0).then_some(d.latency_mean_s * 1000.0),
        latency_p99_ms: (d.completed > 0).then_some(d.latency_p99_s * 1000.0),
        throughput_rps: d.throughput_rps,
        dropped_fraction,
        oom_kills: d.oom_kills,
        overloaded: overloaded(dropped_fraction, d.throughput_rps, d.arrivals as f64 / des_cfg.measure_s, d.oom_kills),
    };
    let rel = |a: Option<f64>, b: Option<f64>| Some((a? - b?).abs() / b?);
    let compare = !fast.overloaded && !discrete_event.overloaded;
    let mean_error = compare.then(|| rel(fast.latency_mean_ms, discrete_event.latency_mean_ms)).flatten();
    let p99_error = compare.then(|| rel(fast.latency_p99_ms, discrete_event.latency_p99_ms)).flatten();
    let throughput_error =
        compare.then(|| rel(Some(fast.throughput_rps), Some(discrete_event.throughput_rps))).flatten();
    let pass = fast.overloaded == discrete_event.overloaded
        && (!compare
            || (mean_error.is_some_and(|e| e <= MEAN_TOLERANCE)
                && p99_error.is_some_and(|e| e <= P99_TOLERANCE)
                && throughput_error.is_some_and(|e| e <= THROUGHPUT_TOLERANCE)));
    CaseReport {
        name: case.name,
        arrival_rps,
        replicas: case.replicas,
        cpu_millicores,
        memory_bytes,
        fast,
        discrete_event,
        mean_error,
        p99_error,
        throughput_error,
        pass,
    }
}

fn run_fast(case: &ValidationCase, arrival_rps: f64, cpu_m: u64, mem: u64, seed: u64) -> ModeResult {
    let app = AppSpec {
        id: 0,
        name: format!("validate-{}", case.name),
        segments: case.segments.clone(),
        load: SyntheticLoad {
            mean_rps: arrival_rps,
            diurnal_amplitude: 0.0,
            diurnal_phase: 0.0,
            day_s: 86_400.0,
            bursts_per_hour: 0.0,
            burst_peak: 0.0,
            burst_decay_s: 60.0,
            ..SyntheticLoad::default()
        },
        slo_p99_ms: f64::INFINITY,
        reference: Allocation { replicas: case.replicas, cpu_millicores: cpu_m, memory_bytes: mem },
        // Sizing fields (issue 19, workload side): unused by validation.
        population: Default::default(),
        mean_rps: arrival_rps,
        peak_rps: arrival_rps,
        peak_replicas: case.replicas,
        mean_replicas: case.replicas,
        bounds: aware_core::Profile::default().bounds,
        measured: None,
    };
    let trace = Arc::new(Trace { name: "constant".into(), interval_s: INTERVAL_S, rates: vec![arrival_rps] });
    let config =
        SimConfig { noise: 0.0, nodes: Some(4), node_cores: 64.0, random_start: false, ..SimConfig::default() };
    let mut cluster = SimCluster::new(vec![app], vec![trace], config, seed);
    let rec = Recommendation {
        replicas: case.replicas,
        containers: vec![ContainerResources::guaranteed(CONTAINER, Resources::new(cpu_m, mem))],
    };
    cluster.apply(0, &rec).expect("valid allocation");
    let (mut arrivals, mut served, mut dropped, mut ooms) = (0.0, 0.0, 0.0, 0u64);
    let (mut lat_sum, mut p99_sum) = (0.0, 0.0);
    for step in 0..WARMUP_STEPS + MEASURE_STEPS {
        cluster.advance().expect("simulator step");
        if step < WARMUP_STEPS {
            continue;
        }
        let s = cluster.stats(0);
        arrivals += s.arrivals;
        served += s.served;
        dropped += s.dropped;
        ooms += s.oom_events as u64;
        if let (Some(m), Some(p)) = (s.latency_mean_ms, s.latency_p99_ms) {
            lat_sum += m * s.served;
            p99_sum += p * s.served;
        }
    }
    let measure_s = MEASURE_STEPS as f64 * INTERVAL_S;
    let throughput = served / measure_s;
    let dropped_fraction = dropped / arrivals.max(1.0);
    ModeResult {
        latency_mean_ms: (served > 0.0).then(|| lat_sum / served),
        latency_p99_ms: (served > 0.0).then(|| p99_sum / served),
        throughput_rps: throughput,
        dropped_fraction,
        oom_kills: ooms,
        overloaded: overloaded(dropped_fraction, throughput, arrivals / measure_s, ooms),
    }
}

fn constant_load(rps: f64) -> SyntheticLoad {
    SyntheticLoad {
        mean_rps: rps,
        diurnal_amplitude: 0.0,
        diurnal_phase: 0.0,
        day_s: 86_400.0,
        bursts_per_hour: 0.0,
        burst_peak: 0.0,
        burst_decay_s: 60.0,
        ..SyntheticLoad::default()
    }
}

// ---------------------------------------------------------------------------------------------
// Fresh random configurations in overload.

/// Served and dropped fractions (of arrivals) must agree within 10 % relative, or within 0.02
/// absolute where the discrete-event value is below 0.2.
pub const FRACTION_TOLERANCE: f64 = 0.10;
pub const FRACTION_ABSOLUTE_TOLERANCE: f64 = 0.02;
pub const FRACTION_ABSOLUTE_BELOW: f64 = 0.2;
/// p99 latency of served requests: within 25 %.
pub const RANDOM_P99_TOLERANCE: f64 = 0.25;
/// OOM kills: within one per app-hour of the measured run.
pub const OOM_PER_APP_HOUR: f64 = 1.0;
/// Below this many completed requests a p99 is not compared (it is not defined well enough).
pub const MIN_COMPLETIONS_FOR_P99: u64 = 2_000;
/// Configurations drawn per seed.
pub const RANDOM_CASES: usize = 12;

/// One drawn configuration.
#[derive(Debug, Clone, Serialize)]
pub struct RandomCase {
    pub index: usize,
    pub segments: Vec<Segment>,
    pub replicas: u32,
    pub cpu_millicores: u64,
    pub memory_bytes: u64,
    /// Base offered load over the initial allocation's CPU capacity.
    pub load_factor: f64,
    /// Arrival rate per interval, requests/s (bursts included).
    #[serde(skip)]
    pub rates: Vec<f64>,
    pub bursts: usize,
    /// (step, replicas): the scale event mid-run.
    pub scale_event: (u64, u32),
    pub warmup_steps: u64,
    pub measure_steps: u64,
}

/// What one mode measured on a drawn configuration.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct RandomModeResult {
    pub arrivals: f64,
    pub served_fraction: f64,
    pub dropped_fraction: f64,
    pub latency_p99_ms: Option<f64>,
    pub oom_kills: u64,
    pub completions: f64,
}

#[derive(Debug, Clone, Serialize)]
pub struct RandomCaseReport {
    pub case: RandomCase,
    pub fast: RandomModeResult,
    pub discrete_event: RandomModeResult,
    pub served_ok: bool,
    pub dropped_ok: bool,
    /// `None` when too few requests completed to compare p99.
    pub p99_error: Option<f64>,
    pub p99_ok: bool,
    pub oom_ok: bool,
    pub pass: bool,
}

#[derive(Debug, Clone, Serialize)]
pub struct RandomReport {
    pub seed: u64,
    pub fraction_tolerance: f64,
    pub fraction_absolute_tolerance: f64,
    pub fraction_absolute_below: f64,
    pub p99_tolerance: f64,
    pub oom_per_app_hour: f64,
    pub cases: Vec<RandomCaseReport>,
    pub pass: bool,
}

/// Draws the random configurations of `seed`: each from its own stream, so case `i` does not
/// depend on how many are drawn.
pub fn draw_random_cases(seed: u64, n: usize) -> Vec<RandomCase> {
    (0..n).map(|i| draw_random_case(seed, i)).collect()
}

fn draw_random_case(seed: u64, index: usize) -> RandomCase {
    let mut rng = Pcg64Mcg::seed_from_u64(crate::app::stream_seed(seed, index as u64, 0x0076_414c_4944));
    let len = rng.random_range(1..=3);
    let segments: Vec<Segment> = (0..len)
        .map(|_| Segment {
            kind: SegmentKind::ALL[rng.random_range(0..SegmentKind::ALL.len())],
            payload: (rng.random_range(-1.0f64..1.0) * 0.7).exp(),
        })
        .collect();
    let cost = RequestCost::of_chain(&segments, |_| 1.0);
    let replicas = rng.random_range(1..=6u32);
    let cores = (rng.random_range(0.25f64..4.0) * 20.0).round() / 20.0;
    let load_factor = rng.random_range(1.2f64..5.0);
    let capacity = replicas as f64 * cores / cost.cpu_s;
    let base = load_factor * capacity;
    // Bound the discrete-event run to about two million arrivals.
    let warmup_steps = 8u64;
    let measure_steps = ((2.0e6 / base / INTERVAL_S).floor() as u64).clamp(40, 400);
    let total = (warmup_steps + measure_steps) as usize;
    // Bursts: the rate is multiplied by 1.5–3 for one to six intervals.
    let mut rates = vec![base; total];
    let bursts = rng.random_range(1..=3usize);
    for _ in 0..bursts {
        let at = rng.random_range(warmup_steps as usize..total);
        let len = rng.random_range(1..=6usize);
        let factor = rng.random_range(1.5f64..3.0);
        for r in rates.iter_mut().skip(at).take(len) {
            *r *= factor;
        }
    }
    // A scale event between 30 % and 70 % of the run: double, or halve (at least one replica).
    let at = warmup_steps + (measure_steps as f64 * rng.random_range(0.3f64..0.7)) as u64;
    let to = if rng.random_bool(0.5) { replicas * 2 } else { (replicas / 2).max(1) };
    // Memory with room for every request the overloaded replicas hold (the fluid queue holds
    // about rate × timeout): this set checks CPU overload; OOMs must then agree at zero.
    let peak_rate_per_replica = rates.iter().cloned().fold(0.0, f64::max) / replicas.min(to) as f64;
    let room = 1.5 * peak_rate_per_replica * SimConfig::default().request_timeout_s + 64.0;
    let step = 64.0 * 1024.0 * 1024.0;
    let memory_bytes = (((cost.mem_base_bytes + cost.mem_per_request_bytes * room) / step).ceil() * step) as u64;
    RandomCase {
        index,
        segments,
        replicas,
        cpu_millicores: (cores * 1000.0).round() as u64,
        memory_bytes,
        load_factor,
        rates,
        bursts,
        scale_event: (at, to),
        warmup_steps,
        measure_steps,
    }
}

/// Draws `RANDOM_CASES` configurations from `seed` and checks the fast mode against the
/// discrete-event mode on each.
pub fn run_random(seed: u64) -> RandomReport {
    let all = draw_random_cases(seed, RANDOM_CASES);
    let cases: Vec<RandomCaseReport> = parallel_map(&all, |c| run_random_case(c, seed));
    let pass = cases.iter().all(|c| c.pass);
    RandomReport {
        seed,
        fraction_tolerance: FRACTION_TOLERANCE,
        fraction_absolute_tolerance: FRACTION_ABSOLUTE_TOLERANCE,
        fraction_absolute_below: FRACTION_ABSOLUTE_BELOW,
        p99_tolerance: RANDOM_P99_TOLERANCE,
        oom_per_app_hour: OOM_PER_APP_HOUR,
        cases,
        pass,
    }
}

/// Maps on all cores, keeping the order.
fn parallel_map<T: Sync, R: Send>(items: &[T], f: impl Fn(&T) -> R + Sync) -> Vec<R> {
    let threads = std::thread::available_parallelism().map_or(1, |n| n.get()).min(items.len().max(1));
    let next = std::sync::atomic::AtomicUsize::new(0);
    let mut out: Vec<Option<R>> = (0..items.len()).map(|_| None).collect();
    let slots = std::sync::Mutex::new(&mut out);
    std::thread::scope(|s| {
        for _ in 0..threads {
            s.spawn(|| {
                loop {
                    let i = next.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                    if i >= items.len() {
                        break;
                    }
                    let r = f(&items[i]);
                    slots.lock().expect("no panics while holding")[i] = Some(r);
                }
            });
        }
    });
    out.into_iter().map(|r| r.expect("every item mapped")).collect()
}

fn fraction_ok(fast: f64, des: f64) -> bool {
    if des < FRACTION_ABSOLUTE_BELOW {
        (fast - des).abs() <= FRACTION_ABSOLUTE_TOLERANCE
    } else {
        (fast - des).abs() <= FRACTION_TOLERANCE * des
    }
}

pub fn run_random_case(case: &RandomCase, seed: u64) -> RandomCaseReport {
    let cost = RequestCost::of_chain(&case.segments, |_| 1.0);
    let cores = case.cpu_millicores as f64 / 1000.0;
    let fast = run_random_fast(case, seed);
    let (at, to) = case.scale_event;
    let des_cfg = DesConfig {
        rates: case.rates.clone(),
        interval_s: INTERVAL_S,
        scale_events: vec![(at as f64 * INTERVAL_S, to)],
        warmup_s: case.warmup_steps as f64 * INTERVAL_S,
        measure_s: case.measure_steps as f64 * INTERVAL_S,
        ..DesConfig::constant(cost, 0.0, case.replicas, cores, case.memory_bytes as f64)
    };
    let d = des::simulate(&des_cfg, seed ^ 0x5eed);
    let arrivals = d.arrivals.max(1) as f64;
    let discrete_event = RandomModeResult {
        arrivals: d.arrivals as f64,
        served_fraction: d.completed as f64 / arrivals,
        dropped_fraction: d.dropped as f64 / arrivals,
        latency_p99_ms: (d.completed > 0).then_some(d.latency_p99_s * 1000.0),
        oom_kills: d.oom_kills,
        completions: d.completed as f64,
    };
    let served_ok = fraction_ok(fast.served_fraction, discrete_event.served_fraction);
    let dropped_ok = fraction_ok(fast.dropped_fraction, discrete_event.dropped_fraction);
    let comparable = discrete_event.completions >= MIN_COMPLETIONS_FOR_P99 as f64
        && fast.completions >= MIN_COMPLETIONS_FOR_P99 as f64;
    let p99_error = if comparable {
        match (fast.latency_p99_ms, discrete_event.latency_p99_ms) {
            (Some(f), Some(d)) => Some((f - d).abs() / d),
            _ => None,
        }
    } else {
        None
    };
    let p99_ok = p99_error.is_none_or(|e| e <= RANDOM_P99_TOLERANCE);
    let hours = case.measure_steps as f64 * INTERVAL_S / 3600.0;
    let oom_ok = (fast.oom_kills as f64 - discrete_event.oom_kills as f64).abs() <= OOM_PER_APP_HOUR * hours;
    let pass = served_ok && dropped_ok && p99_ok && oom_ok;
    RandomCaseReport {
        case: case.clone(),
        fast,
        discrete_event,
        served_ok,
        dropped_ok,
        p99_error,
        p99_ok,
        oom_ok,
        pass,
    }
}

fn run_random_fast(case: &RandomCase, seed: u64) -> RandomModeResult {
    let cost_app = AppSpec {
        id: 0,
        name: format!("random-{}", case.index),
        segments: case.segments.clone(),
        load: constant_load(case.rates[0]),
        slo_p99_ms: f64::INFINITY,
        reference: Allocation {
            replicas: case.replicas,
            cpu_millicores: case.cpu_millicores,
            memory_bytes: case.memory_bytes,
        },
        // Sizing fields: unused by validation.
        population: Default::default(),
        mean_rps: case.rates[0],
        peak_rps: case.rates[0],
        peak_replicas: case.replicas,
        mean_replicas: case.replicas,
        bounds: aware_core::Profile::default().bounds,
        measured: None,
    };
    let trace = Arc::new(Trace { name: "drawn".into(), interval_s: INTERVAL_S, rates: case.rates.clone() });
    // Nodes large enough for every pod: the discrete-event mode has no scheduler.
    let config = SimConfig {
        noise: 0.0,
        nodes: Some(16),
        node_cores: 64.0,
        node_memory_bytes: 1 << 50,
        random_start: false,
        ..SimConfig::default()
    };
    let mut cluster = SimCluster::new(vec![cost_app], vec![trace], config, seed);
    let shape = ContainerResources::guaranteed(CONTAINER, Resources::new(case.cpu_millicores, case.memory_bytes));
    let (mut arrivals, mut served, mut dropped, mut ooms) = (0.0, 0.0, 0.0, 0u64);
    let mut intervals: Vec<(f64, f64, f64)> = Vec::new();
    for step in 0..case.warmup_steps + case.measure_steps {
        if step == case.scale_event.0 {
            let rec = Recommendation { replicas: case.scale_event.1, containers: vec![shape.clone()] };
            cluster.apply(0, &rec).expect("valid allocation");
        }
        cluster.advance().expect("simulator step");
        if step < case.warmup_steps {
            continue;
        }
        let s = cluster.stats(0);
        arrivals += s.arrivals;
        served += s.served;
        dropped += s.dropped;
        ooms += s.oom_events as u64;
        if let (Some(m), Some(p)) = (s.latency_mean_ms, s.latency_p99_ms)
            && s.served > 0.0
        {
            intervals.push((s.served, m, p));
        }
    }
    RandomModeResult {
        arrivals,
        served_fraction: served / arrivals.max(1.0),
        dropped_fraction: dropped / arrivals.max(1.0),
        latency_p99_ms: pooled_p99_ms(&intervals),
        oom_kills: ooms,
        completions: served,
    }
}

/// The p99 over all served requests of several intervals, each described by (served, mean,
/// p99): every interval's latency is taken as the gamma with that mean and p99, and the 0.99
/// quantile of their served-weighted mixture is returned.
pub fn pooled_p99_ms(intervals: &[(f64, f64, f64)]) -> Option<f64> {
    if intervals.is_empty() {
        return None;
    }
    let components: Vec<(f64, f64, f64)> = intervals
        .iter()
        .map(|&(w, mean, p99)| {
            // The variance whose gamma fit has this p99 (p99 grows with the variance).
            let (mut lo, mut hi) = (0.0, (mean * mean).max(1e-12));
            while gamma_p99(mean, hi) < p99 && hi < 1e12 * mean * mean.max(1e-12) {
                hi *= 4.0;
            }
            for _ in 0..60 {
                let mid = 0.5 * (lo + hi);
                if gamma_p99(mean, mid) < p99 { lo = mid } else { hi = mid }
            }
            (w, mean, 0.5 * (lo + hi))
        })
        .collect();
    Some(mixture_quantile(&components, 0.99))
}

// ---------------------------------------------------------------------------------------------
// M/M/c against Erlang C.

/// Mean and p99 response time must be within 10 % of the M/M/c values where utilisation ≤ 0.9.
pub const MMC_TOLERANCE: f64 = 0.10;
pub const MMC_CHECKED_UP_TO: f64 = 0.9;
/// Server counts, each run at two utilisations (one in 0.3–0.6, one in 0.6–0.95).
pub const MMC_SERVERS: [u32; 7] = [1, 2, 4, 8, 16, 32, 64];

/// One M/M/c configuration (fields as in INTERFACES.md, plus the analytic values).
#[derive(Debug, Clone, Serialize)]
pub struct MmcCase {
    pub servers: u32,
    pub arrival_rate: f64,
    pub service_rate: f64,
    pub utilisation: f64,
    pub fast_mean_ms: f64,
    pub fast_p99_ms: f64,
    pub des_mean_ms: f64,
    pub des_p99_ms: f64,
    pub analytic_mean_ms: f64,
    pub analytic_p99_ms: f64,
    /// Utilisation ≤ 0.9: the tolerance applies.
    pub checked: bool,
    pub pass: bool,
}

#[derive(Debug, Clone, Serialize)]
pub struct MmcReport {
    pub seed: u64,
    pub tolerance: f64,
    pub checked_up_to_utilisation: f64,
    pub cases: Vec<MmcCase>,
    pub pass: bool,
}

/// The M/M/c response time (wait + service) in closed form: Erlang C from its defining sum (in
/// log space), mean `C/(cμ − λ) + 1/μ`, and the p99 of `W + S` where `W` is 0 with probability
/// `1 − C` and otherwise exponential with rate `cμ − λ`, `S` exponential with rate `μ`.
pub fn mmc_analytic(servers: u32, lambda: f64, mu: f64) -> (f64, f64) {
    let c = servers as f64;
    let a = lambda / mu;
    assert!(a < c, "M/M/c needs λ < cμ");
    // log(a^k / k!) for k < c, and the tail term a^c/c! · c/(c − a).
    let mut terms = Vec::with_capacity(servers as usize + 1);
    let mut log_t = 0.0;
    for k in 0..servers {
        if k > 0 {
            log_t += a.ln() - (k as f64).ln();
        }
        terms.push(log_t);
    }
    let log_tail = log_t + a.ln() - c.ln() + (c / (c - a)).ln();
    let max = terms.iter().cloned().fold(log_tail, f64::max);
    let sum: f64 = terms.iter().map(|t| (t - max).exp()).sum::<f64>() + (log_tail - max).exp();
    let erlang_c = (log_tail - max).exp() / sum;
    let theta = c * mu - lambda;
    let mean = erlang_c / theta + 1.0 / mu;
    let tail = |t: f64| -> f64 {
        let no_wait = (-mu * t).exp();
        // P(Exp(θ) + Exp(μ) > t).
        let both = if (theta - mu).abs() < 1e-9 * mu {
            (1.0 + mu * t) * (-mu * t).exp()
        } else {
            (theta * (-mu * t).exp() - mu * (-theta * t).exp()) / (theta - mu)
        };
        (1.0 - erlang_c) * no_wait + erlang_c * both
    };
    let (mut lo, mut hi) = (0.0, 1.0 / mu);
    while tail(hi) > 0.01 {
        hi *= 2.0;
    }
    for _ in 0..100 {
        let mid = 0.5 * (lo + hi);
        if tail(mid) > 0.01 { lo = mid } else { hi = mid }
    }
    (mean, 0.5 * (lo + hi))
}

/// The M/M/c cases of `seed`: every server count in [`MMC_SERVERS`] at one utilisation drawn
/// from 0.3–0.6 and one from 0.6–0.95, service rates drawn from 8–60 requests/s.
pub fn draw_mmc_cases(seed: u64) -> Vec<(u32, f64, f64)> {
    let mut rng = Pcg64Mcg::seed_from_u64(crate::app::stream_seed(seed, 0, 0x006d_6d63));
    let mut out = Vec::new();
    for &c in &MMC_SERVERS {
        for (lo, hi) in [(0.3, 0.6), (0.6, 0.95)] {
            let rho: f64 = rng.random_range(lo..hi);
            let mu: f64 = rng.random_range(8.0..60.0);
            out.push((c, rho * c as f64 * mu, mu));
        }
    }
    out
}

/// Runs the M/M/c cases through both modes and the closed form.
pub fn run_mmc(seed: u64) -> MmcReport {
    let all = draw_mmc_cases(seed);
    let cases = parallel_map(&all, |&(c, lambda, mu)| run_mmc_case(c, lambda, mu, seed));
    let pass = cases.iter().all(|c| c.pass);
    MmcReport { seed, tolerance: MMC_TOLERANCE, checked_up_to_utilisation: MMC_CHECKED_UP_TO, cases, pass }
}

/// The app of an M/M/c case: one `float-ops` segment (CPU only, no I/O) whose payload gives
/// service time 1/μ on one core.
fn mmc_segments(mu: f64) -> Vec<Segment> {
    let unit = RequestCost::of_chain(&[Segment { kind: SegmentKind::FloatOps, payload: 1.0 }], |_| 1.0).cpu_s;
    vec![Segment { kind: SegmentKind::FloatOps, payload: 1.0 / (mu * unit) }]
}

pub fn run_mmc_case(servers: u32, lambda: f64, mu: f64, seed: u64) -> MmcCase {
    let segments = mmc_segments(mu);
    let cost = RequestCost::of_chain(&segments, |_| 1.0);
    debug_assert!((cost.cpu_s * mu - 1.0).abs() < 1e-9 && cost.io_s == 0.0);
    let rho = lambda / (servers as f64 * mu);
    let (analytic_mean, analytic_p99) = mmc_analytic(servers, lambda, mu);
    // Memory never binds: room for every request the case could hold.
    let memory = (cost.mem_base_bytes + cost.mem_per_request_bytes * 64.0) as u64 + (64 << 20);
    // Fast mode: the real SimCluster with a shared queue, exponential work, no noise.
    let app = AppSpec {
        id: 0,
        name: format!("mmc-{servers}"),
        segments: segments.clone(),
        load: constant_load(lambda),
        slo_p99_ms: f64::INFINITY,
        reference: Allocation { replicas: servers, cpu_millicores: 1000, memory_bytes: memory },
        // Sizing fields: unused by validation.
        population: Default::default(),
        mean_rps: lambda,
        peak_rps: lambda,
        peak_replicas: servers,
        mean_replicas: servers,
        bounds: aware_core::Profile::default().bounds,
        measured: None,
    };
    let trace = Arc::new(Trace { name: "poisson".into(), interval_s: INTERVAL_S, rates: vec![lambda] });
    let config = SimConfig {
        noise: 0.0,
        nodes: Some(8),
        node_cores: 64.0,
        node_memory_bytes: 1 << 40,
        random_start: false,
        dispatch: Dispatch::SharedQueue,
        work_cv: 1.0,
        ..SimConfig::default()
    };
    let mut cluster = SimCluster::new(vec![app], vec![trace], config, seed);
    let (mut served, mut mean_sum, mut p99_sum) = (0.0, 0.0, 0.0);
    for step in 0..WARMUP_STEPS + 100 {
        cluster.advance().expect("simulator step");
        let s = cluster.stats(0);
        if step >= WARMUP_STEPS
            && let (Some(m), Some(p)) = (s.latency_mean_ms, s.latency_p99_ms)
        {
            served += s.served;
            mean_sum += m * s.served;
            p99_sum += p * s.served;
        }
    }
    // Discrete-event mode: long enough for about 1.5 million arrivals.
    let measure_s = (1.5e6 / lambda).clamp(2_000.0, 200_000.0);
    let des_cfg = DesConfig {
        dispatch: Dispatch::SharedQueue,
        work_cv: 1.0,
        warmup_s: 200.0,
        measure_s,
        timeout_s: f64::INFINITY,
        ..DesConfig::constant(cost, lambda, servers, 1.0, memory as f64)
    };
    let d = des::simulate(&des_cfg, seed ^ servers as u64);
    let fast_mean_ms = mean_sum / served.max(1e-12);
    let fast_p99_ms = p99_sum / served.max(1e-12);
    let (des_mean_ms, des_p99_ms) = (d.latency_mean_s * 1000.0, d.latency_p99_s * 1000.0);
    let (am, ap) = (analytic_mean * 1000.0, analytic_p99 * 1000.0);
    let checked = rho <= MMC_CHECKED_UP_TO;
    let within = |x: f64, want: f64| (x - want).abs() <= MMC_TOLERANCE * want;
    let pass = !checked
        || (within(fast_mean_ms, am) && within(fast_p99_ms, ap) && within(des_mean_ms, am) && within(des_p99_ms, ap));
    MmcCase {
        servers,
        arrival_rate: lambda,
        service_rate: mu,
        utilisation: rho,
        fast_mean_ms,
        fast_p99_ms,
        des_mean_ms,
        des_p99_ms,
        analytic_mean_ms: am,
        analytic_p99_ms: ap,
        checked,
        pass,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn mmc_closed_form_textbook_values() {
        // M/M/1, λ = 8, μ = 10: T ~ Exp(2): mean 0.5 s, p99 ln(100)/2.
        let (m, p) = mmc_analytic(1, 8.0, 10.0);
        assert!((m - 0.5).abs() < 1e-9 && (p - 100f64.ln() / 2.0).abs() < 1e-6, "{m} {p}");
        // M/M/2, λ = 15, μ = 10: C = 0.642857, E[T] = C/5 + 0.1.
        let (m, _) = mmc_analytic(2, 15.0, 10.0);
        assert!((m - (0.642_857_142_857 / 5.0 + 0.1)).abs() < 1e-9, "{m}");
        // Agrees with the simulator's own Erlang C (Erlang-B recursion).
        for c in [1u32, 3, 16, 64] {
            let a = 0.8 * c as f64;
            let (m, _) = mmc_analytic(c, a * 10.0, 10.0);
            let ec = crate::queueing::erlang_c(c, a);
            assert!((m - (ec / (c as f64 * 10.0 - a * 10.0) + 0.1)).abs() < 1e-9);
        }
    }

    #[test]
    fn random_draws_are_fresh_per_seed_and_stable_per_index() {
        let a = draw_random_cases(1, 4);
        let b = draw_random_cases(1, 6);
        assert_eq!(a[2].rates, b[2].rates);
        assert_ne!(draw_random_cases(2, 1)[0].rates, a[0].rates);
        for c in &a {
            assert!((1.2..5.0).contains(&c.load_factor));
        }
    }
}

/// Which check `validate-sim` runs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum Check {
    /// A fresh random overload set drawn from the seed (the default).
    Random,
    /// M/M/c against Erlang C.
    Mmc,
    /// The fixed set the fast mode's constants were fitted on.
    Fixed,
}

/// The report of one check.
#[derive(Debug, Clone, Serialize)]
#[serde(untagged)]
#[non_exhaustive]
pub enum Report {
    Random(RandomReport),
    Mmc(MmcReport),
    Fixed(ValidationReport),
}

impl Report {
    pub fn pass(&self) -> bool {
        match self {
            Report::Random(r) => r.pass,
            Report::Mmc(r) => r.pass,
            Report::Fixed(r) => r.pass,
        }
    }
}

/// Runs one check with `seed`.
pub fn run(check: Check, seed: u64) -> Report {
    match check {
        Check::Random => Report::Random(run_random(seed)),
        Check::Mmc => Report::Mmc(run_mmc(seed)),
        Check::Fixed => Report::Fixed(run_fixed(seed)),
    }
}
