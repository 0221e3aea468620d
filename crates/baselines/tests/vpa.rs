//! VPA tables ported from upstream `pkg/recommender/util/histogram*_test.go`,
//! `logic/estimator_test.go`, `logic/recommender_test.go` and `model/container_test.go`,
//! with upstream's expected numbers, plus the updater's rules.

use aware_baselines::vpa::estimator::{
    Amounts, Estimator, MAX_RESOURCE_AMOUNT, PodResourceRecommender, RecommendedResources,
};
use aware_baselines::vpa::histogram::{DecayingHistogram, Histogram, HistogramOptions};
use aware_baselines::vpa::model::{AggregateContainerState, ContainerState};
use aware_baselines::vpa::{ControlledValues, UpdateMode, VpaSpec, update_decision};

const T0: f64 = 1_234_567_890.0;
const MIB: f64 = 1024.0 * 1024.0;

fn close(a: f64, b: f64, rel: f64) -> bool {
    (a - b).abs() <= rel * b.abs().max(1e-12)
}

#[test]
fn exponential_options_table() {
    let o = HistogramOptions::exponential(100.0, 10.0, 2.0, 1e-15).unwrap();
    assert_eq!(o.num_buckets(), 5);
    // Buckets [0, 10), [10, 30), [30, 70), [70, 150), [150, ∞).
    for (value, bucket) in [
        (-1.0, 0),
        (0.0, 0),
        (9.99, 0),
        (10.0, 1),
        (29.99, 1),
        (30.0, 2),
        (69.99, 2),
        (70.0, 3),
        (149.99, 3),
        (150.0, 4),
        (1e9, 4),
    ] {
        assert_eq!(o.find_bucket(value), bucket, "{value}");
    }
    for (bucket, start) in [(0, 0.0), (1, 10.0), (2, 30.0), (3, 70.0), (4, 150.0)] {
        assert_eq!(o.bucket_start(bucket), start);
    }
    assert!(HistogramOptions::exponential(100.0, 10.0, 1.0, 1e-15).is_err(), "ratio must exceed 1");
}

#[test]
fn linear_options_table() {
    let o = HistogramOptions::linear(5.0, 0.3, 1e-15).unwrap();
    assert_eq!(o.num_buckets(), 18);
    assert_eq!(o.bucket_start(0), 0.0);
    assert!(close(o.bucket_start(17), 5.1, 1e-9));
    for (value, bucket) in [(-1.0, 0), (0.0, 0), (1.3, 4), (100.0, 17)] {
        assert_eq!(o.find_bucket(value), bucket, "{value}");
    }
}

fn linear_test_histogram() -> Histogram {
    Histogram::new(HistogramOptions::linear(10.0, 1.0, 1e-15).unwrap())
}

#[test]
fn percentiles_return_bucket_ends() {
    let mut h = linear_test_histogram();
    for i in 1..=4 {
        h.add_sample(i as f64, i as f64);
    }
    for (p, want) in [
        (0.0, 2.0),
        (0.1, 2.0),
        (0.2, 3.0),
        (0.3, 3.0),
        (0.4, 4.0),
        (0.5, 4.0),
        (0.6, 4.0),
        (0.7, 5.0),
        (0.8, 5.0),
        (0.9, 5.0),
        (1.0, 5.0),
    ] {
        assert_eq!(h.percentile(p), want, "p{p}");
    }
}

#[test]
fn empty_histogram_percentiles_are_zero() {
    let h = linear_test_histogram();
    assert!(h.is_empty());
    for p in [0.0, 0.5, 1.0] {
        assert_eq!(h.percentile(p), 0.0);
    }
    let mut tiny = Histogram::new(HistogramOptions::linear(10.0, 1.0, 1e-4).unwrap());
    tiny.add_sample(0.1, 1e-20);
    assert!(tiny.is_empty(), "a sample below epsilon keeps it empty");
    tiny.add_sample(0.1, 1.0);
    assert!(!tiny.is_empty());
}

#[test]
fn subtracting_a_sample_restores_emptiness() {
    let mut h = Histogram::new(HistogramOptions::linear(10.0, 1.0, 1e-4).unwrap());
    h.add_sample(5.0, 1.0);
    h.add_sample(2.0, 1.0);
    h.subtract_sample(5.0, 1.0);
    assert_eq!(h.percentile(1.0), 3.0, "the max bucket moved down");
    h.subtract_sample(2.0, 1.0);
    assert!(h.is_empty());
}

#[test]
fn decaying_histogram_simple_decay() {
    let mut h = DecayingHistogram::new(HistogramOptions::linear(10.0, 1.0, 1e-15).unwrap(), 3600.0);
    h.add_sample(2.0, 1000.0, T0);
    // 20 half-lives later a weight of 1 is worth 2^20 of the first.
    h.add_sample(1.0, 1.0, T0 + 20.0 * 3600.0);
    assert!(close(h.percentile(0.999), 2.0, 1e-9));
    assert!(close(h.percentile(1.0), 3.0, 1e-9));
}

#[test]
fn decaying_histogram_long_term_decay() {
    let mut h = DecayingHistogram::new(HistogramOptions::linear(10.0, 1.0, 1e-15).unwrap(), 3600.0);
    h.add_sample(2.0, 1.0, T0);
    // 101 half-lives later the reference time is renormalised and the first sample vanishes.
    h.add_sample(1.0, 1.0, T0 + 101.0 * 3600.0);
    assert!(close(h.percentile(1.0), 2.0, 1e-9));
}

fn state_with(cpu: &[f64], memory: &[f64]) -> AggregateContainerState {
    let mut s = AggregateContainerState::new(T0);
    for &c in cpu {
        s.cpu.add_sample(c, 1.0, T0);
    }
    for &m in memory {
        s.memory_peaks.add_sample(m, 1.0, T0);
    }
    s
}

#[test]
fn percentile_estimator() {
    let s = state_with(&[1.0, 2.0, 3.0], &[1e9, 2e9, 3e9]);
    let e = Estimator::Percentile { cpu: 0.2, memory: 0.5 }.estimate(&s);
    // 5 % for histogram rounding, as upstream allows.
    assert!(close(e.cpu_millicores as f64 / 1000.0, 1.0, 0.05), "{e:?}");
    assert!(close(e.memory_bytes as f64, 2e9, 0.05), "{e:?}");
}

fn constant() -> Box<Estimator> {
    Box::new(Estimator::Const(Amounts { cpu_millicores: 3140, memory_bytes: 3_140_000_000 }))
}

#[test]
fn confidence_multiplier() {
    let mut s = AggregateContainerState::new(T0);
    // Nine CPU samples two minutes apart: confidence = 9 / (60 × 24) = 0.00625.
    for i in 0..9 {
        s.add_cpu_sample(1.0, 1.0, T0 + 120.0 * i as f64);
    }
    assert_eq!(s.confidence(), 0.00625);
    let e = Estimator::Confidence { multiplier: 0.1, exponent: 2.0, base: constant() }.estimate(&s);
    // 3.14 × (1 + 0.1 / 0.00625)² = 907.46 cores.
    assert_eq!(e.cpu_millicores, 907_460);
}

#[test]
fn confidence_multiplier_without_history() {
    let s = AggregateContainerState::new(T0);
    let upper = Estimator::Confidence { multiplier: 0.1, exponent: 2.0, base: constant() }.estimate(&s);
    assert_eq!(upper.cpu_millicores, MAX_RESOURCE_AMOUNT, "infinite multiplier caps");
    let lower = Estimator::Confidence { multiplier: 0.001, exponent: -2.0, base: constant() }.estimate(&s);
    assert_eq!(lower.cpu_millicores, 0);
}

#[test]
fn margin_estimator() {
    let s = AggregateContainerState::new(T0);
    let e = Estimator::Margin { fraction: 0.1, base: constant() }.estimate(&s);
    assert_eq!(e, Amounts { cpu_millicores: 3454, memory_bytes: 3_454_000_000 });
}

#[test]
fn min_resources_estimator() {
    let s = AggregateContainerState::new(T0);
    let base = Box::new(Estimator::Const(Amounts { cpu_millicores: 3140, memory_bytes: 20_000_000 }));
    let e =
        Estimator::MinResources { min: Amounts { cpu_millicores: 200, memory_bytes: 400_000_000 }, base }.estimate(&s);
    assert_eq!(e, Amounts { cpu_millicores: 3140, memory_bytes: 400_000_000 });
}

fn tiny_constant_recommender() -> PodResourceRecommender {
    let c = Estimator::Const(Amounts { cpu_millicores: 1, memory_bytes: 1_000_000 });
    PodResourceRecommender { target: c.clone(), lower_bound: c.clone(), upper_bound: c }
}

#[test]
fn pod_minimums_applied() {
    let s = AggregateContainerState::new(T0);
    let r = tiny_constant_recommender().recommend(&[&s]);
    assert_eq!(r[0].target, Amounts { cpu_millicores: 25, memory_bytes: 262_144_000 });
}

#[test]
fn pod_minimums_split_across_containers() {
    let (a, b) = (AggregateContainerState::new(T0), AggregateContainerState::new(T0));
    let r = tiny_constant_recommender().recommend(&[&a, &b]);
    for c in r {
        assert_eq!(c.target, Amounts { cpu_millicores: 12, memory_bytes: 131_072_000 });
        assert_eq!(c.upper_bound, c.target);
    }
}

#[test]
fn oom_bumps_memory_table() {
    // (request MiB, expected sample MiB): max(used + 100 MiB, used × 1.2).
    for (request, want) in [(50.0, 150.0), (400.0, 500.0), (1024.0, 1228.8)] {
        let mut agg = AggregateContainerState::new(T0);
        let mut c = ContainerState::default();
        c.record_oom(&mut agg, T0, request * MIB).unwrap();
        let got = agg.memory_peaks.percentile(1.0);
        assert!((want * MIB..=want * MIB * 1.05).contains(&got), "{request} MiB → {got} (want ≈{want} MiB)");
    }
}

#[test]
fn oom_uses_the_recent_peak_when_larger_than_the_request() {
    let mut agg = AggregateContainerState::new(T0);
    let mut c = ContainerState::default();
    c.add_memory_sample(&mut agg, 1000.0 * MIB, T0, false);
    c.record_oom(&mut agg, T0 + 60.0, 100.0 * MIB).unwrap();
    // used = max(100 MiB request, 1000 MiB peak) → 1200 MiB replaces the 1000 MiB peak.
    let got = agg.memory_peaks.percentile(0.5);
    assert!((1200.0 * MIB..=1200.0 * MIB * 1.05).contains(&got), "{got}");
}

#[test]
fn old_oom_is_discarded() {
    let mut agg = AggregateContainerState::new(T0);
    let mut c = ContainerState::default();
    c.add_memory_sample(&mut agg, 100.0 * MIB, T0, false);
    c.add_memory_sample(&mut agg, 100.0 * MIB, T0 + 3.0 * 86_400.0, false);
    assert!(c.record_oom(&mut agg, T0, 50.0 * MIB).unwrap_err().contains("too old"));
}

#[test]
fn one_memory_peak_per_aggregation_interval() {
    let mut agg = AggregateContainerState::new(T0);
    let mut c = ContainerState::default();
    c.add_memory_sample(&mut agg, 1e9, T0, false);
    // Within the same 24 h interval a higher sample replaces the peak, a lower one is ignored.
    c.add_memory_sample(&mut agg, 2e9, T0 + 3600.0, false);
    c.add_memory_sample(&mut agg, 0.5e9, T0 + 7200.0, false);
    assert!(close(agg.memory_peaks.percentile(0.0), 2e9, 0.05), "only the 2 GB peak remains");
    // A sample a day later opens a new interval: two peaks now.
    c.add_memory_sample(&mut agg, 0.5e9, T0 + 86_400.0 + 60.0, false);
    assert!(close(agg.memory_peaks.percentile(0.3), 0.5e9, 0.05));
    assert!(close(agg.memory_peaks.percentile(1.0), 2e9, 0.05));
}

#[test]
fn cpu_samples_are_weighted_by_request_and_deduplicated() {
    let mut agg = AggregateContainerState::new(T0);
    let mut c = ContainerState::default();
    assert!(c.add_cpu_sample(&mut agg, 1.0, 4.0, T0));
    // Request below the 0.1-core floor counts as 0.1: 40× less weight than the first sample.
    assert!(c.add_cpu_sample(&mut agg, 3.0, 0.01, T0 + 60.0));
    assert!(!c.add_cpu_sample(&mut agg, 9.0, 1.0, T0 + 60.0), "duplicate timestamp dropped");
    assert!(!c.add_cpu_sample(&mut agg, 9.0, 1.0, T0), "out of order dropped");
    assert!(close(agg.cpu.percentile(0.9), 1.0, 0.05));
    assert_eq!(agg.total_samples, 2);
}

#[test]
fn aggregate_expires_after_eight_days_of_silence() {
    let mut agg = AggregateContainerState::new(T0);
    agg.add_cpu_sample(1.0, 1.0, T0);
    assert!(!agg.is_expired(T0 + 7.9 * 86_400.0));
    assert!(agg.is_expired(T0 + 8.0 * 86_400.0));
}

fn spec() -> VpaSpec {
    VpaSpec {
        update_mode: UpdateMode::Recreate,
        controlled_values: ControlledValues::RequestsAndLimits,
        control_cpu: true,
        control_memory: true,
        min_allowed: Amounts::default(),
        max_allowed: Amounts { cpu_millicores: i64::MAX, memory_bytes: i64::MAX },
    }
}

#[test]
fn updater_decision_table() {
    let rec = RecommendedResources {
        target: Amounts { cpu_millicores: 500, memory_bytes: 500 },
        lower_bound: Amounts { cpu_millicores: 400, memory_bytes: 400 },
        upper_bound: Amounts { cpu_millicores: 800, memory_bytes: 800 },
    };
    let hour = 3600.0;
    // (request cpu, request memory, age h, quick OOM, expect update)
    let cases = [
        (300, 500, 1.0, false, true),   // CPU below the lower bound
        (500, 900, 1.0, false, true),   // memory above the upper bound
        (450, 450, 1.0, false, false),  // inside the range, young
        (450, 450, 13.0, false, true),  // inside, old, 11 % + 11 % off target
        (490, 500, 13.0, false, false), // inside, old, 2 % off: not worth it
        (500, 500, 1.0, true, true),    // OOM soon after start
    ];
    for (cpu, mem, age, oom, want) in cases {
        let d =
            update_decision(&spec(), &rec, "p", Amounts { cpu_millicores: cpu, memory_bytes: mem }, age * hour, oom);
        assert_eq!(d.update, want, "{cpu}/{mem} at {age} h oom={oom}: {d:?}");
    }
}
