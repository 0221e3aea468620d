//! `aware validate-sim`: the same configurations through the fast mode (the real `SimCluster`)
//! and the discrete-event mode, compared on mean latency, p99 latency and throughput.

use std::sync::Arc;

use aware_core::{Cluster, ContainerResources, Recommendation, Resources};
use serde::Serialize;

use crate::app::{Allocation, AppSpec};
use crate::cluster::{CONTAINER, SimCluster, SimConfig};
use crate::des::{self, DesConfig};
use crate::load::{SyntheticLoad, Trace};
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

/// Runs every case through both modes.
pub fn run(seed: u64) -> ValidationReport {
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
        cost,
        arrival_rps,
        replicas: case.replicas,
        cores: case.cores,
        memory_limit_bytes: memory_bytes as f64,
        timeout_s: SimConfig::default().request_timeout_s,
        startup_delay_s: SimConfig::default().startup_delay_s,
        warmup_s: WARMUP_STEPS as f64 * INTERVAL_S,
        measure_s: MEASURE_STEPS as f64 * INTERVAL_S,
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
    };
    let trace = Arc::new(Trace { name: "constant".into(), interval_s: INTERVAL_S, rates: vec![arrival_rps] });
    let config = SimConfig { noise: 0.0, nodes: Some(4), node_cores: 64.0, ..SimConfig::default() };
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
