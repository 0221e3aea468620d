//! Applications: chains of segments with a synthetic load, generated reproducibly from a seed
//! and a [`Population`] (see [`crate::population`] for the populations and the published figures
//! they reproduce), each sized from its own load: replica and resource bounds, the replicas a
//! peak-provisioned deployment needs, and an SLO.
//!
//! # The SLO rule (an operator's operating point)
//!
//! An app's p99 latency objective is the p99 response time of one reference replica (one core,
//! in isolation) serving at [`SLO_UTILISATION`] = 70 % CPU utilisation, I/O waits included. An
//! operator who runs an HPA at its canonical 50 % target sets the SLO where that configuration
//! meets it with headroom: 20 utilisation points for metric lag, scale-up delay and arrival
//! noise. HPA therefore meets it in the common case and loses it when a burst or a fast ramp
//! takes replicas past 70 % before new pods are ready — as in production. (The SIMPPO rule this
//! replaces, p99 at the mean load + 15 %, was crossed near 45 % utilisation: no rule-based
//! autoscaler could meet it.) The profile's `slo.latency_p99_ms` overrides it.
//!
//! Measured with the CLI runner's scoring loop (40 microservices, 1,920 steps of 15 s, each
//! policy with its app's own bounds), seeds 1 / 2 / 3: HPA at 50 % runs at 0.39 / 0.42 / 0.40
//! CPU utilisation with 0.10 / 0.19 / 0.16 % of app-intervals violating the SLO (all in
//! bursts); `static-peak` at 0.22 / 0.23 / 0.27; no app reaches its replica cap.

use aware_core::{Bounds, MIB, Population};
use rand::{RngExt, SeedableRng};
use rand_distr::{Distribution, LogNormal};
use rand_pcg::Pcg64Mcg;
use serde::{Deserialize, Serialize};

use crate::load::{SyntheticLoad, Trace};
use crate::population::draw_load;
use crate::queueing::gamma_p99;
use crate::replica::step_replica;
use crate::scenario::ScenarioKind;
use crate::segments::{RequestCost, Segment, SegmentKind};

/// A per-replica allocation; the simulator's applications have one container, `app`.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct Allocation {
    pub replicas: u32,
    pub cpu_millicores: u64,
    pub memory_bytes: u64,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct AppSpec {
    pub id: usize,
    pub name: String,
    pub segments: Vec<Segment>,
    pub load: SyntheticLoad,
    /// p99 latency objective, milliseconds ([`SLO_UTILISATION`] rule unless overridden).
    pub slo_p99_ms: f64,
    /// The allocation the app starts at: one core per replica, replicas for
    /// [`REFERENCE_UTILISATION`] CPU at mean load, memory twice the working set at peak.
    pub reference: Allocation,
    /// The population it was drawn from.
    #[serde(default)]
    pub population: Population,
    /// Long-run mean arrival rate the app is sized from, requests/s: its synthetic load's, or
    /// its trace's once [`AppSpec::size_for_trace`] has run.
    pub mean_rps: f64,
    /// Busiest daily peak (bursts excluded) the app is sized from, requests/s.
    pub peak_rps: f64,
    /// Replicas `static-peak` deploys: one-core replicas at the target CPU utilisation under
    /// `peak_rps` (the default target, 0.5, unless [`AppSpec::size`] was given another).
    pub peak_replicas: u32,
    /// The same under `mean_rps`.
    pub mean_replicas: u32,
    /// The app's own replica and per-container resource bounds, as an HPA's `maxReplicas` is
    /// set per Deployment; the profile's `bounds:` keys override them
    /// (`aware_core::resolve_bounds`).
    pub bounds: Bounds,
    /// What one request costs, as measured on a running application rather than built from
    /// segments ([`AppSpec::measured`]); where set it is the app's cost and `segments` is empty.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub measured: Option<RequestCost>,
}

impl AppSpec {
    /// An application known only by what its requests were measured to cost (a live app whose
    /// model is fitted from its metrics): no segments, the load it was seen under, the SLO and
    /// bounds its operator set, and `reference` as deployed. A payload change scales its CPU
    /// work and I/O wait alike ([`AppSpec::with_payload_scale`]).
    pub fn measured(
        name: &str,
        cost: RequestCost,
        load: SyntheticLoad,
        slo_p99_ms: f64,
        reference: Allocation,
        bounds: Bounds,
    ) -> AppSpec {
        AppSpec {
            id: 0,
            name: name.to_string(),
            segments: Vec::new(),
            mean_rps: load.mean_rps,
            peak_rps: load.peak_rps().max(load.mean_rps),
            load,
            slo_p99_ms,
            reference,
            population: Population::default(),
            peak_replicas: reference.replicas,
            mean_replicas: reference.replicas,
            bounds,
            measured: Some(cost),
        }
    }

    pub fn cost(&self) -> RequestCost {
        self.cost_scaled(|_| 1.0)
    }

    /// The request cost with each segment's payload multiplied by `payload_scale(kind)`; a
    /// measured app's by the mean of the scales its segments are unknown to (so 1 unless every
    /// kind scales alike).
    fn cost_scaled(&self, payload_scale: impl Fn(SegmentKind) -> f64) -> RequestCost {
        match self.measured {
            Some(c) => {
                let scale =
                    SegmentKind::ALL.iter().map(|&k| payload_scale(k)).sum::<f64>() / SegmentKind::ALL.len() as f64;
                scaled(c, scale)
            }
            None => RequestCost::of_chain(&self.segments, payload_scale),
        }
    }

    /// The request cost under scenario `kind`'s payloads (the load is the scenario's to scale).
    pub fn cost_under(&self, kind: ScenarioKind) -> RequestCost {
        self.cost_scaled(|k| kind.payload_scale(k))
    }

    /// One-core replicas that serve `rps` at `target` CPU utilisation (at least 1).
    pub fn replicas_for(&self, rps: f64, target: f64) -> u32 {
        replicas_for(&self.cost(), rps, target)
    }

    /// Re-derives everything that follows from the load (`mean_rps`, `peak_rps`, the target
    /// CPU utilisation): the reference allocation, `peak_replicas`, `mean_replicas`, the bounds
    /// and the SLO. The SLO does not depend on the load, so it only changes for a new chain.
    pub fn size(&mut self, target_cpu_utilisation: f64) {
        let cost = self.cost();
        self.peak_replicas = replicas_for(&cost, self.peak_rps, target_cpu_utilisation);
        self.mean_replicas = replicas_for(&cost, self.mean_rps, target_cpu_utilisation);
        let (reference, slo) = allocation_for(&cost, self.mean_rps, self.peak_rps);
        self.reference = reference;
        self.slo_p99_ms = slo;
        self.bounds = bounds_for(&cost, self.peak_replicas, reference.memory_bytes);
    }

    /// The reference allocation this app would be sized at after `kind`'s change: the request
    /// cost with the scenario's payloads, under its load scaled as the scenario scales it
    /// ([`allocation_for`]). What the cluster's sizing holds room for
    /// ([`crate::SimConfig::node_count`]); the app's own sizing, bounds and SLO do not change.
    pub fn reference_under(&self, kind: ScenarioKind) -> Allocation {
        let cost = self.cost_under(kind);
        let load = kind.load_scale();
        allocation_for(&cost, self.mean_rps * load, self.peak_rps * load).0
    }

    /// The same app with every segment's payload multiplied by `scale`: what a payload change
    /// the app's model was not built with looks like to it (the shadow check replays recent
    /// traffic on the app as measured, [`AppSpec::payload_scale_for`]). Sizing, bounds and the
    /// SLO are the operator's and stay as they were.
    pub fn with_payload_scale(&self, scale: f64) -> AppSpec {
        let mut app = self.clone();
        for s in &mut app.segments {
            s.payload *= scale;
        }
        app.measured = app.measured.map(|c| scaled(c, scale));
        app
    }

    /// The payload multiplier, applied to every segment, under which one request costs
    /// `cpu_s_per_request` core-seconds on this app's model: how far what was measured has
    /// moved from what the model was built with. `None` when the model cannot say: a
    /// measurement that is not a positive finite number, one no multiplier in [1/64, 64] gives,
    /// or a chain whose CPU work hardly depends on its payload (less than ×2 across that range,
    /// e.g. one that mostly sleeps), where metric noise would read as a large payload change.
    pub fn payload_scale_for(&self, cpu_s_per_request: f64) -> Option<f64> {
        if !(cpu_s_per_request.is_finite() && cpu_s_per_request > 0.0) {
            return None;
        }
        let cpu = |log_scale: f64| self.cost_scaled(|_| log_scale.exp2()).cpu_s;
        // CPU work does not fall as payload grows (no exponent is negative): bisect on log₂.
        let (mut lo, mut hi) = (-6.0_f64, 6.0_f64);
        let (low, high) = (cpu(lo), cpu(hi));
        if !(high >= 2.0 * low && (low..=high).contains(&cpu_s_per_request)) {
            return None;
        }
        for _ in 0..60 {
            let mid = 0.5 * (lo + hi);
            if cpu(mid) < cpu_s_per_request {
                lo = mid;
            } else {
                hi = mid;
            }
        }
        Some((0.5 * (lo + hi)).exp2())
    }

    /// Sizes the app from the trace it will replay (trace-aware sizing): mean and peak are the
    /// trace's, the rest follows as in [`AppSpec::size`].
    pub fn size_for_trace(&mut self, trace: &Trace, target_cpu_utilisation: f64) {
        self.mean_rps = trace.mean_rps();
        self.peak_rps = trace.peak_rps().max(self.mean_rps);
        self.size(target_cpu_utilisation);
    }
}

/// Sizes every app from the trace it replays, assigned as the simulator assigns them (app `i`
/// replays `traces[i % traces.len()]`). No-op without traces. Whoever builds a `SimCluster`
/// with traces calls this on its apps first.
pub fn size_for_traces(apps: &mut [AppSpec], traces: &[std::sync::Arc<Trace>], target_cpu_utilisation: f64) {
    if traces.is_empty() {
        return;
    }
    for (i, app) in apps.iter_mut().enumerate() {
        app.size_for_trace(&traces[i % traces.len()], target_cpu_utilisation);
    }
}

/// A measured request cost under a payload `scale`: CPU work, I/O wait and bytes moved scale
/// with it, the memory a request holds in flight does not.
fn scaled(c: RequestCost, scale: f64) -> RequestCost {
    RequestCost {
        cpu_s: c.cpu_s * scale,
        io_s: c.io_s * scale,
        disk_bytes: c.disk_bytes * scale,
        net_bytes: c.net_bytes * scale,
        ..c
    }
}

/// SplitMix64: derives independent stream seeds from (seed, index, stream) so that app `i`
/// is the same app whatever the number of apps generated alongside it.
pub fn stream_seed(seed: u64, index: u64, stream: u64) -> u64 {
    let mut z = seed ^ index.wrapping_mul(0x9E37_79B9_7F4A_7C15) ^ stream.wrapping_mul(0xD1B5_4A32_D192_ED03);
    for _ in 0..2 {
        z = z.wrapping_add(0x9E37_79B9_7F4A_7C15);
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^= z >> 31;
    }
    z
}

pub const STREAM_APP: u64 = 1;
pub const STREAM_LOAD: u64 = 2;
pub const STREAM_NOISE: u64 = 3;

/// Former cap on an app's mean CPU demand, cores. The populations now size apps from 1 to
/// hundreds of replicas; kept for callers that referred to it.
pub const MAX_MEAN_CORES: f64 = 12.0;

/// Target CPU utilisation apps are sized at by default: the HPA's canonical 50 % (and the
/// profile's default `targets.cpu_utilisation`).
pub const REFERENCE_UTILISATION: f64 = 0.5;

/// CPU utilisation of one reference replica at which its p99 defines the SLO (module docs).
pub const SLO_UTILISATION: f64 = 0.7;

/// CPU request of one reference replica, millicores.
pub const REFERENCE_CPU_MILLICORES: u64 = 1000;

/// Most replicas any app's bounds allow (issue 19: replica counts are 1–100,000).
pub const MAX_REPLICAS: u32 = aware_core::REPLICAS_RANGE.1 as u32;

/// Generates `n` microservices; application `i` depends only on `(seed, i)`.
pub fn generate_apps(n: usize, seed: u64, day_s: f64) -> Vec<AppSpec> {
    generate_population(n, seed, day_s, Population::Microservices)
}

/// Generates `n` applications of `population`; application `i` depends only on
/// `(seed, i, population)`.
pub fn generate_population(n: usize, seed: u64, day_s: f64, population: Population) -> Vec<AppSpec> {
    (0..n).map(|i| generate_app_in(i, seed, day_s, population)).collect()
}

/// Application `id` of the default (microservices) population.
pub fn generate_app(id: usize, seed: u64, day_s: f64) -> AppSpec {
    generate_app_in(id, seed, day_s, Population::Microservices)
}

/// Application `id` of `population`.
pub fn generate_app_in(id: usize, seed: u64, day_s: f64, population: Population) -> AppSpec {
    let mut rng = Pcg64Mcg::seed_from_u64(stream_seed(seed, id as u64, STREAM_APP));
    let len = rng.random_range(1..=3);
    let payload = LogNormal::<f64>::new(0.0, 0.4).expect("valid lognormal");
    let segments: Vec<Segment> = (0..len)
        .map(|_| Segment {
            kind: SegmentKind::ALL[rng.random_range(0..SegmentKind::ALL.len())],
            payload: payload.sample(&mut rng).clamp(0.25, 4.0),
        })
        .collect();
    let cost = RequestCost::of_chain(&segments, |_| 1.0);
    let load = draw_load(population, &mut rng, seed, cost.cpu_s, day_s);
    let mut name = format!("app-{id:04}-");
    for (i, s) in segments.iter().enumerate() {
        if i > 0 {
            name.push('+');
        }
        name.push_str(s.kind.name());
    }
    let mut app = AppSpec {
        id,
        name,
        segments,
        mean_rps: load.mean_rps,
        peak_rps: load.peak_rps(),
        load,
        slo_p99_ms: 0.0,
        reference: Allocation { replicas: 1, cpu_millicores: REFERENCE_CPU_MILLICORES, memory_bytes: 0 },
        population,
        peak_replicas: 1,
        mean_replicas: 1,
        bounds: aware_core::Profile::default().bounds,
        measured: None,
    };
    app.size(REFERENCE_UTILISATION);
    app
}

/// One-core replicas serving `rps` at `target` utilisation, in 1..=[`MAX_REPLICAS`].
pub fn replicas_for(cost: &RequestCost, rps: f64, target: f64) -> u32 {
    let need = rps * cost.cpu_s / (target * REFERENCE_CPU_MILLICORES as f64 / 1000.0);
    // A hair of tolerance so an exact multiple does not round up through float error.
    (need * (1.0 - 1e-12)).ceil().clamp(1.0, MAX_REPLICAS as f64) as u32
}

/// An app's own bounds, sized from its load: 1 to `max(10, 4 × peak_replicas)` replicas (room
/// for bursts on top of the peak and for a vertical policy running smaller pods), CPU 100 m to
/// 4 cores per container in 250 m steps, memory from 1.25× the runtime's resident base (below
/// it the container is OOM-killed idle) to the larger of 8 GiB and 4× the reference, in 128 MiB
/// steps.
fn bounds_for(cost: &RequestCost, peak_replicas: u32, reference_memory: u64) -> Bounds {
    let d = aware_core::Profile::default().bounds;
    let min_memory_mib = ((1.25 * cost.mem_base_bytes / MIB as f64).ceil() as u64).max(d.min_memory_mib);
    let max_memory_mib = (4 * reference_memory / MIB).max(d.max_memory_mib).max(min_memory_mib);
    Bounds {
        min_replicas: 1,
        max_replicas: peak_replicas.saturating_mul(4).clamp(10, MAX_REPLICAS),
        min_memory_mib,
        max_memory_mib,
        ..d
    }
}

/// The reference allocation and SLO of an app with request cost `cost` and `load`'s mean and
/// peak (see [`allocation_for`]).
pub fn reference_allocation(cost: &RequestCost, load: &SyntheticLoad) -> (Allocation, f64) {
    allocation_for(cost, load.mean_rps, load.peak_rps())
}

/// The reference allocation (one-core replicas at [`REFERENCE_UTILISATION`] under `mean_rps`,
/// memory twice the working set with the peak in-flight count, in 64 MiB steps) and the SLO
/// (module docs), milliseconds.
pub fn allocation_for(cost: &RequestCost, mean_rps: f64, peak_rps: f64) -> (Allocation, f64) {
    let replicas = replicas_for(cost, mean_rps, REFERENCE_UTILISATION);
    let dt = 15.0;
    let peak = step_replica(peak_rps / replicas as f64 * dt, 0.0, dt, cost, 1.0, f64::INFINITY);
    let in_flight =
        if peak.overloaded { peak.mean_in_flight } else { peak.mean_in_flight + 3.0 * peak.var_in_flight.sqrt() };
    let ws = cost.mem_base_bytes + cost.mem_per_request_bytes * in_flight;
    let step_bytes = 64.0 * MIB as f64;
    let memory_bytes = ((2.0 * ws / step_bytes).ceil() * step_bytes) as u64;
    let allocation = Allocation { replicas, cpu_millicores: REFERENCE_CPU_MILLICORES, memory_bytes };
    (allocation, slo_p99_ms(cost))
}

/// The SLO rule: p99 of one one-core replica in isolation at [`SLO_UTILISATION`], ms.
pub fn slo_p99_ms(cost: &RequestCost) -> f64 {
    let dt = 15.0;
    let rps = if cost.cpu_s > 0.0 { SLO_UTILISATION / cost.cpu_s } else { 0.0 };
    let step = step_replica(rps * dt, 0.0, dt, cost, 1.0, f64::INFINITY);
    gamma_p99(step.latency_mean_s, step.latency_var_s2) * 1000.0
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_payload_scale_is_read_back_from_the_cost_it_gives() {
        let mut flat = 0;
        for app in generate_apps(60, 11, 86_400.0) {
            let model = app.cost().cpu_s;
            let responsive =
                app.with_payload_scale(64.0).cost().cpu_s >= 2.0 * app.with_payload_scale(1.0 / 64.0).cost().cpu_s;
            for scale in [0.25, 0.7, 1.0, 1.6, 4.0] {
                let back = app.payload_scale_for(app.with_payload_scale(scale).cost().cpu_s);
                match responsive {
                    true => {
                        let back = back.unwrap_or_else(|| panic!("{}: ×{scale} not read back", app.name));
                        assert!((back / scale - 1.0).abs() < 1e-6, "{}: ×{scale} read as ×{back}", app.name);
                    }
                    false => assert_eq!(back, None, "{}", app.name),
                }
            }
            flat += usize::from(!responsive);
            // Outside what any multiplier in range gives, and nonsense: no answer.
            assert_eq!(app.payload_scale_for(model * 1e6), None);
            assert_eq!(app.payload_scale_for(model * 1e-6), None);
            assert_eq!(app.payload_scale_for(f64::NAN), None);
            assert_eq!(app.payload_scale_for(0.0), None);
            assert_eq!(app.payload_scale_for(-model), None);
            let scaled = app.with_payload_scale(4.0);
            assert_eq!(
                (scaled.slo_p99_ms, scaled.reference, scaled.bounds),
                (app.slo_p99_ms, app.reference, app.bounds.clone())
            );
        }
        // Most chains do work that grows with payload.
        assert!(flat < 10, "{flat} of 60 chains read as flat");
    }

    #[test]
    fn a_chain_that_only_sleeps_has_no_payload_scale() {
        let mut app = generate_apps(1, 3, 86_400.0).remove(0);
        app.segments = vec![Segment { kind: SegmentKind::Sleep, payload: 1.0 }];
        let cpu = app.cost().cpu_s;
        for measured in [cpu, 1.1 * cpu, 0.9 * cpu] {
            assert_eq!(app.payload_scale_for(measured), None);
        }
    }

    #[test]
    fn same_seed_same_apps_and_prefix_stable() {
        let a = generate_apps(20, 7, 86_400.0);
        let b = generate_apps(20, 7, 86_400.0);
        assert_eq!(a, b);
        assert_eq!(generate_apps(5, 7, 86_400.0)[..], a[..5], "app i does not depend on n");
        assert_ne!(generate_apps(20, 8, 86_400.0), a);
        let s = generate_population(20, 7, 86_400.0, Population::Serverless);
        assert_eq!(generate_population(5, 7, 86_400.0, Population::Serverless)[..], s[..5]);
        assert_eq!(s[3], generate_app_in(3, 7, 86_400.0, Population::Serverless));
        assert_ne!(s[3].load, a[3].load, "the population changes the app");
    }

    #[test]
    fn generated_apps_are_within_documented_ranges() {
        for population in Population::ALL {
            for app in generate_population(500, 3, 86_400.0, population) {
                assert!((1..=3).contains(&app.segments.len()));
                assert_eq!(app.population, population);
                assert!(app.mean_rps > 0.0 && app.peak_rps >= app.mean_rps, "{app:?}");
                assert!(app.slo_p99_ms > 0.0 && app.slo_p99_ms.is_finite());
                assert!(app.reference.memory_bytes as f64 > app.cost().mem_base_bytes);
                assert!((1..=1000).contains(&app.peak_replicas), "{}", app.peak_replicas);
                assert!(app.mean_replicas <= app.peak_replicas);
                let b = &app.bounds;
                assert!(b.min_replicas == 1 && b.max_replicas >= 4 * app.peak_replicas.min(25_000));
                assert!(b.min_memory_mib <= b.max_memory_mib && b.min_cpu_millicores <= b.max_cpu_millicores);
                assert!(app.reference.memory_bytes <= b.max_memory_mib * MIB);
                assert!(b.min_memory_mib as f64 * MIB as f64 >= app.cost().mem_base_bytes, "idle pods fit");
            }
        }
    }

    /// `peak_replicas` is what serves the peak at the target: one replica fewer would not.
    #[test]
    fn peak_replicas_serve_the_peak_at_the_target_utilisation() {
        for app in generate_apps(300, 9, 86_400.0) {
            let cores = app.peak_rps * app.cost().cpu_s;
            assert!(cores / app.peak_replicas as f64 <= REFERENCE_UTILISATION * (1.0 + 1e-9));
            if app.peak_replicas > 1 {
                assert!(cores / (app.peak_replicas - 1) as f64 > REFERENCE_UTILISATION);
            }
            assert_eq!(app.peak_replicas, app.replicas_for(app.peak_rps, REFERENCE_UTILISATION));
        }
    }

    /// The SLO rule: a replica at 50 % CPU meets it with headroom, one at 95 % does not.
    #[test]
    fn slo_is_met_at_the_hpa_target_and_missed_near_saturation() {
        for app in generate_apps(200, 4, 86_400.0) {
            let cost = app.cost();
            let p99 = |u: f64| {
                let s = step_replica(u / cost.cpu_s * 15.0, 0.0, 15.0, &cost, 1.0, f64::INFINITY);
                gamma_p99(s.latency_mean_s, s.latency_var_s2) * 1000.0
            };
            assert!(p99(0.5) < app.slo_p99_ms, "{}: {} vs {}", app.name, p99(0.5), app.slo_p99_ms);
            assert!((p99(SLO_UTILISATION) - app.slo_p99_ms).abs() <= 1e-9 * app.slo_p99_ms);
            // CPU-light chains are dominated by I/O waits; the rest lose the SLO near saturation.
            if cost.cpu_s > cost.io_s {
                assert!(p99(0.95) > app.slo_p99_ms, "{}", app.name);
            }
        }
    }

    #[test]
    fn trace_aware_sizing_uses_the_trace() {
        let mut app = generate_app(0, 1, 86_400.0);
        let per_core = 1.0 / app.cost().cpu_s;
        // A trace averaging 10 cores' worth, peaking at 40.
        let rates =
            vec![5.0 * per_core, 5.0 * per_core, 5.0 * per_core, 10.0 * per_core, 40.0 * per_core, 5.0 * per_core];
        let trace = Trace { name: "t".into(), interval_s: 60.0, rates };
        app.size_for_trace(&trace, 0.5);
        assert!((app.mean_rps - trace.mean_rps()).abs() < 1e-9);
        assert_eq!(app.peak_replicas, 80);
        assert_eq!(app.mean_replicas, 24);
        assert_eq!(app.reference.replicas, 24);
        assert!(app.bounds.max_replicas >= 320);
        let mut apps = generate_apps(3, 1, 86_400.0);
        size_for_traces(&mut apps, &[std::sync::Arc::new(trace)], 0.5);
        let sized = |a: &AppSpec| {
            (a.peak_rps - 40.0 * per_core).abs() < 1e-9 && (a.mean_rps - 70.0 / 6.0 * per_core).abs() < 1e-9
        };
        assert!(apps.iter().all(sized), "every app replays and is sized from the one trace");
    }
}
