//! VPA recommender cases ported from upstream (kubernetes/autoscaler, vertical-pod-autoscaler)
//! `pkg/recommender/util/histogram_test.go`, `util/histogram_options_test.go`,
//! `util/decaying_histogram_test.go`, `logic/estimator_test.go` and `logic/recommender_test.go`,
//! one Rust test per upstream case with upstream's numbers, each preceded by the Go test's name;
//! then the model's OOM and aggregation rules and the updater's.

use std::collections::BTreeMap;

use aware_baselines::estimator::{
    Amounts, ContainerRecommendation, ControlledAmounts, Estimator, MAX_RESOURCE_AMOUNT, PodResourceRecommender,
    RecommendedResources, map_to_list,
};
use aware_baselines::histogram::{
    DecayingHistogram, Histogram, HistogramCheckpoint, HistogramOptions, MAX_CHECKPOINT_WEIGHT,
};
use aware_baselines::model::{
    AggregateContainerState, ContainerState, cpu_histogram_options, memory_histogram_options,
};
use aware_baselines::{ControlledValues, UpdateMode, VpaSpec, evictable_pods, update_decision};

const T0: f64 = 1_234_567_890.0;
const MIB: f64 = 1024.0 * 1024.0;
/// `valueEpsilon`: relative precision of histogram values.
const VALUE_EPS: f64 = 1e-15;
/// `weightEpsilon`.
const WEIGHT_EPS: f64 = 1e-15;
const HOUR: f64 = 3600.0;

fn close(a: f64, b: f64, rel: f64) -> bool {
    (a - b).abs() <= rel * b.abs().max(1e-12)
}

/// `testHistogramOptions`: linear, 10 buckets of 1.0.
fn test_options() -> HistogramOptions {
    HistogramOptions::linear(10.0, 1.0, WEIGHT_EPS).unwrap()
}

fn assert_percentiles(percentile: impl Fn(f64) -> f64, table: &[(f64, f64)]) {
    for &(p, want) in table {
        assert!(close(percentile(p), want, VALUE_EPS), "p{p}: {} != {want}", percentile(p));
    }
}

const ONE_TO_FOUR: [(f64, f64); 11] = [
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
];

// upstream: TestPercentilesEmptyHistogram
#[test]
fn percentiles_empty_histogram() {
    let h = Histogram::new(test_options());
    for p in [-0.5, 0.0, 0.5, 1.0, 1.5] {
        assert_eq!(h.percentile(p), 0.0);
    }
}

// upstream: TestPercentiles
#[test]
fn percentiles() {
    let mut h = Histogram::new(test_options());
    for i in 1..=4 {
        h.add_sample(i as f64, i as f64);
    }
    assert_percentiles(|p| h.percentile(p), &ONE_TO_FOUR);
}

// upstream: TestPercentileOutOfBounds
#[test]
fn percentile_out_of_bounds() {
    let mut h = Histogram::new(HistogramOptions::linear(1.0, 0.1, WEIGHT_EPS).unwrap());
    h.add_sample(0.1, 0.1);
    h.add_sample(0.2, 0.2);
    assert!(close(h.percentile(-0.1), 0.2, VALUE_EPS));
    assert!(close(h.percentile(1.1), 0.3, VALUE_EPS));
    // Fill the boundary buckets.
    h.add_sample(0.0, 0.1);
    h.add_sample(1.0, 0.2);
    assert!(close(h.percentile(-0.1), 0.1, VALUE_EPS));
    assert!(close(h.percentile(1.1), 1.0, VALUE_EPS));
}

// upstream: TestEmptyHistogram
#[test]
fn empty_histogram() {
    let mut h = Histogram::new(HistogramOptions::linear(1.0, 0.1, WEIGHT_EPS).unwrap());
    assert!(h.is_empty());
    h.add_sample(0.1, WEIGHT_EPS * 2.5);
    assert!(!h.is_empty());
    h.subtract_sample(0.1, WEIGHT_EPS);
    assert!(!h.is_empty(), "1.5 epsilon left");
    h.subtract_sample(0.1, WEIGHT_EPS);
    assert!(h.is_empty(), "0.5 epsilon left");
}

// upstream: TestNonEmptyOnEpsilonAddition
#[test]
fn non_empty_on_epsilon_addition() {
    let mut h = Histogram::new(HistogramOptions::linear(1.0, 0.1, WEIGHT_EPS).unwrap());
    assert!(h.is_empty());
    h.add_sample(9.9, WEIGHT_EPS * 3.0);
    assert!(!h.is_empty());
    h.add_sample(0.1, WEIGHT_EPS * 0.3);
    assert!(!h.is_empty());
    h.add_sample(999.9, WEIGHT_EPS * 0.3);
    assert!(!h.is_empty());
}

// upstream: TestHistogramMerge
#[test]
fn histogram_merge() {
    let mut h1 = Histogram::new(test_options());
    h1.add_sample(1.0, 1.0);
    h1.add_sample(2.0, 1.0);
    let mut h2 = Histogram::new(test_options());
    h2.add_sample(2.0, 1.0);
    h2.add_sample(3.0, 1.0);
    let mut expected = Histogram::new(test_options());
    for v in [1.0, 2.0, 2.0, 3.0] {
        expected.add_sample(v, 1.0);
    }
    h1.merge(&h2);
    assert!(h1.equals(&expected));
    // And a histogram with a different sample is not equal.
    expected.add_sample(7.0, 1.0);
    assert!(!h1.equals(&expected));
}

// upstream: TestHistogramSaveToCheckpointEmpty
#[test]
fn histogram_save_to_checkpoint_empty() {
    let c = Histogram::new(test_options()).save_to_checkpoint();
    assert_eq!(c.total_weight, 0.0);
    assert!(c.bucket_weights.is_empty());
}

// upstream: TestHistogramSaveToCheckpoint
#[test]
fn histogram_save_to_checkpoint() {
    let mut h = Histogram::new(test_options());
    h.add_sample(1.0, 1.0);
    let c = h.save_to_checkpoint();
    let bucket = test_options().find_bucket(1.0) as i64;
    assert_eq!(c.total_weight, 1.0);
    assert_eq!(c.bucket_weights, BTreeMap::from([(bucket, MAX_CHECKPOINT_WEIGHT)]));
}

// upstream: TestHistogramSaveToCheckpointDropsRelativelySmallValues
#[test]
fn histogram_save_to_checkpoint_drops_relatively_small_values() {
    let mut h = Histogram::new(test_options());
    let (v1, w1, v2, w2) = (1.0, 1.0, 2.0, 100_000.0);
    h.add_sample(v1, w1);
    h.add_sample(v2, w2);
    let (b1, b2) = (test_options().find_bucket(v1), test_options().find_bucket(v2));
    assert_ne!(b1, b2);
    assert!(w1 < (w2 / MAX_CHECKPOINT_WEIGHT as f64) / 2.0);
    let c = h.save_to_checkpoint();
    assert_eq!(c.total_weight, 100_001.0);
    assert_eq!(c.bucket_weights, BTreeMap::from([(b2 as i64, MAX_CHECKPOINT_WEIGHT)]));
}

// upstream: TestHistogramSaveToCheckpointForMultipleValues
#[test]
fn histogram_save_to_checkpoint_for_multiple_values() {
    let mut h = Histogram::new(test_options());
    for (v, w) in [(1.0, 1.0), (2.0, 10_000.0), (3.0, 50.0)] {
        h.add_sample(v, w);
    }
    let c = h.save_to_checkpoint();
    assert_eq!(c.total_weight, 10_051.0);
    let b = |v| test_options().find_bucket(v) as i64;
    assert_eq!(c.bucket_weights, BTreeMap::from([(b(1.0), 1), (b(2.0), 10_000), (b(3.0), 50)]));
}

fn checkpoint(total: f64, buckets: &[(i64, u32)]) -> HistogramCheckpoint {
    HistogramCheckpoint {
        reference_timestamp_s: None,
        bucket_weights: buckets.iter().copied().collect(),
        total_weight: total,
    }
}

// upstream: TestHistogramLoadFromCheckpoint
#[test]
fn histogram_load_from_checkpoint() {
    let mut h = Histogram::new(test_options());
    h.load_from_checkpoint(&checkpoint(6.0, &[(0, 1), (1, 2)])).unwrap();
    assert_eq!(h.total_weight(), 6.0);
    assert_eq!(h.bucket_weight(0), 2.0);
    assert_eq!(h.bucket_weight(1), 4.0);
}

// upstream: TestHistogramLoadFromCheckpointReturnsErrorOnNegativeBucket
#[test]
fn histogram_load_from_checkpoint_error_on_negative_bucket() {
    let err = Histogram::new(test_options()).load_from_checkpoint(&checkpoint(1.0, &[(-1, 1)])).unwrap_err();
    assert_eq!(err.to_string(), "checkpoint has a negative bucket -1");
}

// upstream: TestHistogramLoadFromCheckpointReturnsErrorOnInvalidBucket
#[test]
fn histogram_load_from_checkpoint_error_on_invalid_bucket() {
    let err = Histogram::new(test_options()).load_from_checkpoint(&checkpoint(1.0, &[(99, 1)])).unwrap_err();
    assert!(err.to_string().contains("checkpoint has bucket 99 that is exceeding histogram buckets"), "{err}");
}

// upstream: TestHistogramLoadFromCheckpointReturnsErrorNegativeTotaWeight
#[test]
fn histogram_load_from_checkpoint_error_negative_total_weight() {
    let err = Histogram::new(test_options()).load_from_checkpoint(&checkpoint(-1.0, &[])).unwrap_err();
    assert_eq!(err.to_string(), "cannot load checkpoint with negative weight -1");
}

// upstream: TestHistogramLoadFromCheckpointReturnsErrorOnNilInput
// A nil checkpoint cannot be expressed in Rust (the argument is a reference); the nearest input,
// a checkpoint with no buckets, loads as nothing.
#[test]
fn histogram_load_from_checkpoint_without_buckets_loads_nothing() {
    let mut h = Histogram::new(test_options());
    h.load_from_checkpoint(&checkpoint(0.0, &[])).unwrap();
    assert!(h.is_empty());
    assert_eq!(h.total_weight(), 0.0);
}

// upstream: TestHistogramIsNotEmptyAfterSavingAndLoadingCheckpointsWithBoundaryValues
#[test]
fn histogram_not_empty_after_checkpoint_round_trip_with_boundary_values() {
    let mut h = Histogram::new(test_options());
    h.add_sample(1.0, WEIGHT_EPS);
    h.add_sample(2.0, MAX_CHECKPOINT_WEIGHT as f64 * WEIGHT_EPS - WEIGHT_EPS);
    assert!(!h.is_empty());
    let c = h.save_to_checkpoint();
    let mut loaded = Histogram::new(test_options());
    loaded.load_from_checkpoint(&c).unwrap();
    assert!(!loaded.is_empty(), "kubernetes/autoscaler#7726");
}

// upstream: TestLinearHistogramOptions
#[test]
fn linear_histogram_options() {
    let o = HistogramOptions::linear(5.0, 0.3, 0.001).unwrap();
    assert_eq!(o.epsilon(), 0.001);
    assert_eq!(o.num_buckets(), 18);
    assert_eq!(o.bucket_start(0), 0.0);
    // Upstream asserts 5.1 exactly: 17 × 0.3 in floating point.
    assert!(close(o.bucket_start(17), 5.1, 1e-15));
    for (value, bucket) in [(-1.0, 0), (0.0, 0), (1.3, 4), (100.0, 17)] {
        assert_eq!(o.find_bucket(value), bucket, "{value}");
    }
}

// upstream: TestExponentialHistogramOptions
#[test]
fn exponential_histogram_options() {
    let o = HistogramOptions::exponential(500.0, 40.0, 1.5, 0.001).unwrap();
    assert_eq!(o.epsilon(), 0.001);
    assert_eq!(o.num_buckets(), 6);
    for (bucket, start) in [(0, 0.0), (1, 40.0), (2, 100.0), (3, 190.0), (4, 325.0), (5, 527.5)] {
        assert_eq!(o.bucket_start(bucket), start);
    }
    for (value, bucket) in [(-1.0, 0), (39.99, 0), (40.0, 1), (100.0, 2), (900.0, 5)] {
        assert_eq!(o.find_bucket(value), bucket, "{value}");
    }
    assert!(HistogramOptions::exponential(500.0, 40.0, 1.0, 0.001).is_err(), "ratio must exceed 1");
}

fn decaying() -> DecayingHistogram {
    DecayingHistogram::new(test_options(), HOUR)
}

// upstream: TestPercentilesEmptyDecayingHistogram
#[test]
fn percentiles_empty_decaying_histogram() {
    let h = decaying();
    for p in [-0.5, 0.0, 0.5, 1.0, 1.5] {
        assert_eq!(h.percentile(p), 0.0);
    }
}

// upstream: TestSimpleDecay
#[test]
fn simple_decay() {
    let mut h = decaying();
    h.add_sample(2.0, 1000.0, T0);
    // 20 half-lives later a weight of 1 is worth 2^20 × 0.001 > 1000 times the first.
    h.add_sample(1.0, 1.0, T0 + 20.0 * HOUR);
    assert!(close(h.percentile(0.999), 2.0, VALUE_EPS));
    assert!(close(h.percentile(1.0), 3.0, VALUE_EPS));
}

// upstream: TestLongtermDecay
#[test]
fn longterm_decay() {
    let mut h = decaying();
    h.add_sample(2.0, 1.0, T0);
    // The relative decay exceeds 2^maxDecayExponent: the reference time is renormalised.
    h.add_sample(1.0, 1.0, T0 + 101.0 * HOUR);
    assert!(close(h.percentile(1.0), 2.0, VALUE_EPS));
}

// upstream: TestDecayingHistogramPercentiles
#[test]
fn decaying_histogram_percentiles() {
    let mut h = decaying();
    for i in 1..=4 {
        h.add_sample(i as f64, i as f64, T0 + (i - 1) as f64 * HOUR);
    }
    assert_percentiles(
        |p| h.percentile(p),
        &[(0.0, 2.0), (0.02, 2.0), (0.03, 3.0), (0.10, 3.0), (0.11, 4.0), (0.34, 4.0), (0.35, 5.0), (1.0, 5.0)],
    );
}

// upstream: TestNoDecay
#[test]
fn no_decay() {
    let mut h = decaying();
    for i in 1..=4 {
        h.add_sample(i as f64, i as f64, T0);
    }
    assert_percentiles(|p| h.percentile(p), &ONE_TO_FOUR);
}

// upstream: TestDecayingHistogramMerge
#[test]
fn decaying_histogram_merge() {
    let mut h1 = decaying();
    h1.add_sample(1.0, 1.0, T0);
    h1.add_sample(2.0, 1.0, T0 + HOUR);
    let mut h2 = decaying();
    h2.add_sample(2.0, 1.0, T0 + 2.0 * HOUR);
    h2.add_sample(3.0, 1.0, T0 + HOUR);
    let mut expected = decaying();
    expected.add_sample(2.0, 1.0, T0 + 2.0 * HOUR);
    expected.add_sample(2.0, 1.0, T0 + HOUR);
    expected.add_sample(3.0, 1.0, T0 + HOUR);
    expected.add_sample(1.0, 1.0, T0);
    h1.merge(&h2);
    assert!(h1.equals(&expected));
}

// upstream: TestDecayingHistogramSaveToCheckpoint
#[test]
fn decaying_histogram_save_to_checkpoint() {
    let mut d = decaying();
    d.add_sample(2.0, 1.0, T0 + 100.0 * HOUR);
    assert!(d.reference_s().is_some());
    let c = d.save_to_checkpoint();
    assert_eq!(c.reference_timestamp_s, d.reference_s());
    assert!(!c.bucket_weights.is_empty());
    assert!(c.total_weight != 0.0);
}

// upstream: TestDecayingHistogramLoadFromCheckpoint
#[test]
fn decaying_histogram_load_from_checkpoint() {
    // 2018-01-02T03:04:05Z.
    let timestamp = 1_514_862_245.0;
    let mut d = decaying();
    let c = HistogramCheckpoint { reference_timestamp_s: Some(timestamp), ..checkpoint(6.0, &[(0, 1)]) };
    d.load_from_checkpoint(&c).unwrap();
    assert!(!d.is_empty());
    assert_eq!(d.reference_s(), Some(timestamp));
}

/// `anyTime = time.Unix(0, 0)`.
const ANY_TIME: f64 = 0.0;
/// `defaultConfidenceInterval`: 24 h.
const DAY: f64 = 24.0 * HOUR;

fn constant() -> Box<Estimator> {
    // `NewConstCPUEstimator(CPUAmountFromCores(3.14))`, `NewConstMemoryEstimator(3.14e9)`.
    Box::new(Estimator::Const(Amounts { cpu_millicores: 3140, memory_bytes: 3_140_000_000 }))
}

fn confidence(multiplier: f64, exponent: f64, interval_s: f64) -> Estimator {
    Estimator::Confidence { multiplier, exponent, interval_s, base: constant() }
}

/// Nine CPU samples two minutes apart.
fn nine_samples() -> AggregateContainerState {
    let mut s = AggregateContainerState::new(ANY_TIME);
    for i in 0..9 {
        s.add_cpu_sample(1.0, 1.0, ANY_TIME + 120.0 * i as f64);
    }
    s
}

// upstream: TestPercentileEstimator
#[test]
fn percentile_estimator() {
    let mut s = AggregateContainerState::new(ANY_TIME);
    let mut cpu = Histogram::new(cpu_histogram_options());
    let mut memory = Histogram::new(memory_histogram_options());
    for v in [1.0, 2.0, 3.0] {
        cpu.add_sample(v, 1.0);
        memory.add_sample(v * 1e9, 1.0);
        s.cpu.add_sample(v, 1.0, ANY_TIME);
        s.memory_peaks.add_sample(v * 1e9, 1.0, ANY_TIME);
    }
    let e = Estimator::Percentile { cpu: 0.2, memory: 0.5 }.estimate(&s);
    // 5 % for histogram rounding, as upstream allows.
    assert!(close(e.cpu_millicores as f64 / 1000.0, 1.0, 0.05), "{e:?}");
    assert!(close(e.memory_bytes as f64, 2e9, 0.05), "{e:?}");
    // The plain histograms agree with the decaying ones at a single timestamp.
    assert_eq!(cpu.percentile(0.2), s.cpu.percentile(0.2));
    assert_eq!(memory.percentile(0.5), s.memory_peaks.percentile(0.5));
}

// upstream: TestConfidenceMultiplier
#[test]
fn confidence_multiplier() {
    let empty = AggregateContainerState::new(ANY_TIME);
    assert_eq!(confidence(1.0, 1.0, DAY).estimate(&empty).cpu_millicores, MAX_RESOURCE_AMOUNT);
    assert_eq!(confidence(1.0, -1.0, DAY).estimate(&empty).cpu_millicores, 0);
    let s = nine_samples();
    // 9 / (60 × 24) = 0.00625.
    assert_eq!(s.confidence_over(DAY), 0.00625);
    // 3.14 × (1 + 0.1 / 0.00625)² = 907.46; 3.14e9 × 289 = 9.0746e11.
    let e = confidence(0.1, 2.0, DAY).estimate(&s);
    assert_eq!(e.cpu_millicores as f64 / 1000.0, 907.46);
    assert_eq!(e.memory_bytes as f64, 9.0746e11);
}

// upstream: TestConfidenceMultiplierWithCustomInterval
#[test]
fn confidence_multiplier_with_custom_interval() {
    let s = nine_samples();
    let interval = 18.0 * 60.0;
    // 9 samples over an 18-minute interval: 0.5.
    assert_eq!(s.confidence_over(interval), 0.5);
    // 3.14 × (1 + 0.1 / 0.5)² = 4.5216, truncated to millicores.
    let e = confidence(0.1, 2.0, interval).estimate(&s);
    assert_eq!(e.cpu_millicores as f64 / 1000.0, 4.521);
    assert_eq!(e.memory_bytes as f64, 4.5216e9);
}

// upstream: TestConfidenceMultiplierNoHistory
#[test]
fn confidence_multiplier_no_history() {
    let s = AggregateContainerState::new(ANY_TIME);
    assert_eq!(confidence(0.1, 2.0, DAY).estimate(&s).cpu_millicores, MAX_RESOURCE_AMOUNT);
}

// upstream: TestMarginEstimator
#[test]
fn margin_estimator() {
    let s = AggregateContainerState::new(ANY_TIME);
    let e = Estimator::Margin { fraction: 0.1, base: constant() }.estimate(&s);
    // Go evaluates the constant `3.14*1.1` exactly: 3.454.
    assert_eq!(e.cpu_millicores as f64 / 1000.0, 3.454);
    assert_eq!(e.memory_bytes as f64, 3.454e9);
}

// upstream: TestMinResourcesEstimator
#[test]
fn min_resources_estimator() {
    let s = AggregateContainerState::new(ANY_TIME);
    let base = Box::new(Estimator::Const(Amounts { cpu_millicores: 3140, memory_bytes: 400_000_000 }));
    let e =
        Estimator::MinResources { min: Amounts { cpu_millicores: 200, memory_bytes: 20_000_000 }, base }.estimate(&s);
    assert_eq!(e, Amounts { cpu_millicores: 3140, memory_bytes: 400_000_000 });
    // And the minimum wins when the estimate is below it.
    let base = Box::new(Estimator::Const(Amounts { cpu_millicores: 100, memory_bytes: 1 }));
    let e = Estimator::MinResources { min: Amounts { cpu_millicores: 200, memory_bytes: 2 }, base }.estimate(&s);
    assert_eq!(e, Amounts { cpu_millicores: 200, memory_bytes: 2 });
}

/// `podResourceRecommender` with 1 m / 1 MB constant estimators.
fn tiny_constant_recommender(min_cpu_millicores: f64, min_memory_mb: f64) -> PodResourceRecommender {
    let c = Estimator::Const(Amounts { cpu_millicores: 1, memory_bytes: 1_000_000 });
    PodResourceRecommender {
        target: c.clone(),
        lower_bound: c.clone(),
        upper_bound: c,
        min_cpu_millicores,
        min_memory_mb,
    }
}

fn recommend(
    r: &PodResourceRecommender,
    states: &[(&str, &AggregateContainerState)],
) -> BTreeMap<String, ContainerRecommendation> {
    let map: BTreeMap<String, &AggregateContainerState> = states.iter().map(|(n, s)| (n.to_string(), *s)).collect();
    r.recommend_pod(&map)
}

// upstream: TestMinResourcesApplied
#[test]
fn min_resources_applied() {
    let s = AggregateContainerState::new(ANY_TIME);
    let r = recommend(&tiny_constant_recommender(25.0, 250.0), &[("container-1", &s)]);
    assert_eq!(
        r["container-1"].target,
        ControlledAmounts { cpu_millicores: Some(25), memory_bytes: Some(262_144_000) }
    );
}

// upstream: TestMinResourcesSplitAcrossContainers
#[test]
fn min_resources_split_across_containers() {
    let (a, b) = (AggregateContainerState::new(ANY_TIME), AggregateContainerState::new(ANY_TIME));
    let r = recommend(&tiny_constant_recommender(25.0, 250.0), &[("container-1", &a), ("container-2", &b)]);
    for name in ["container-1", "container-2"] {
        // CPUAmountFromCores(0.0125) truncates to 12 m; 125 MiB.
        assert_eq!(r[name].target, ControlledAmounts { cpu_millicores: Some(12), memory_bytes: Some(131_072_000) });
    }
}

// upstream: TestControlledResourcesFiltered
#[test]
fn controlled_resources_filtered() {
    let mut s = AggregateContainerState::new(ANY_TIME);
    s.controls_cpu = false;
    let r = recommend(&tiny_constant_recommender(0.0, 0.0), &[("container-1", &s)]);
    let c = &r["container-1"];
    for a in [c.target, c.lower_bound, c.upper_bound] {
        assert!(a.memory_bytes.is_some());
        assert!(a.cpu_millicores.is_none());
    }
}

// upstream: TestControlledResourcesFilteredDefault
#[test]
fn controlled_resources_filtered_default() {
    let s = AggregateContainerState::new(ANY_TIME);
    let r = recommend(&tiny_constant_recommender(0.0, 0.0), &[("container-1", &s)]);
    let c = &r["container-1"];
    for a in [c.target, c.lower_bound, c.upper_bound] {
        assert!(a.memory_bytes.is_some() && a.cpu_millicores.is_some());
    }
}

fn target_only(name: &str, cores: i64) -> (String, ContainerRecommendation) {
    let t = ControlledAmounts { cpu_millicores: Some(cores * 1000), memory_bytes: Some(cores * 1_000_000) };
    (
        name.to_string(),
        ContainerRecommendation { container_name: name.into(), target: t, lower_bound: t, upper_bound: t },
    )
}

// upstream: TestMapToListOfRecommendedContainerResources
// case: "All recommendations sorted"
#[test]
fn map_to_list_sorted() {
    let m: BTreeMap<_, _> = [
        target_only("a-container", 1),
        target_only("b-container", 2),
        target_only("c-container", 3),
        target_only("d-container", 4),
    ]
    .into();
    let list = map_to_list(&m);
    let names: Vec<&str> = list.iter().map(|r| r.container_name.as_str()).collect();
    assert_eq!(names, ["a-container", "b-container", "c-container", "d-container"]);
    for r in &list {
        assert_eq!(r, &m[&r.container_name], "unchanged");
    }
}

// upstream: TestMapToListOfRecommendedContainerResources
// case: "All recommendations unsorted"
#[test]
fn map_to_list_unsorted() {
    let m: BTreeMap<_, _> = [
        target_only("b-container", 1),
        target_only("a-container", 2),
        target_only("d-container", 3),
        target_only("c-container", 4),
    ]
    .into();
    let list = map_to_list(&m);
    let names: Vec<&str> = list.iter().map(|r| r.container_name.as_str()).collect();
    assert_eq!(names, ["a-container", "b-container", "c-container", "d-container"]);
    for r in &list {
        assert_eq!(r, &m[&r.container_name], "unchanged");
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
    assert!(c.record_oom(&mut agg, T0, 50.0 * MIB).unwrap_err().to_string().contains("too old"));
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
        min_replicas: 2,
        eviction_tolerance: 0.5,
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

/// The updater's eviction restriction: none below `--min-replicas` live pods, otherwise at most
/// `floor(configured × tolerance)` at once, and one when the tolerance rounds to zero.
#[test]
fn eviction_restriction_table() {
    // (configured, live, running, min replicas, tolerance, evictable)
    for (configured, live, running, min, tol, want) in [
        (1, 1, 1, 2, 0.5, 0), // a single replica: the default --min-replicas 2 forbids it
        (1, 1, 1, 1, 0.5, 1), // allowed with --min-replicas 1: tolerance 0, nothing evicted yet
        (2, 2, 2, 2, 0.5, 1), // floor(2 × 0.5) = 1
        (10, 10, 10, 2, 0.5, 5),
        (10, 10, 8, 2, 0.5, 3), // two already down count against the budget
        (3, 3, 3, 2, 0.1, 1),   // tolerance rounds to 0: still one
        (4, 1, 1, 2, 0.5, 0),   // below min replicas live
    ] {
        assert_eq!(evictable_pods(configured, live, running, min, tol), want, "{configured}/{live}/{running}");
    }
}
