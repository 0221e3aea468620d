//! VPA's histograms (upstream `pkg/recommender/util/histogram*.go`): weighted samples in
//! exponentially (or linearly) sized buckets; percentiles return the *end* of the bucket that
//! reaches the requested weight. The decaying variant halves a sample's weight every half-life,
//! renormalising its reference time when exponents would overflow. Both save to and load from
//! the `HistogramCheckpoint` of a `VerticalPodAutoscalerCheckpoint`.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

/// Weights in a checkpoint are scaled so the largest bucket holds this (`MaxCheckpointWeight`).
pub const MAX_CHECKPOINT_WEIGHT: u32 = 10_000;

/// Why options or a checkpoint were refused.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[non_exhaustive]
pub enum HistogramError {
    #[error("maxValue, bucketSize and epsilon must be > 0.0")]
    InvalidLinearOptions,
    #[error("maxValue, firstBucketSize, epsilon must be > 0.0 and ratio must be > 1.0")]
    InvalidExponentialOptions,
    #[error("cannot load checkpoint with negative weight {0}")]
    NegativeTotalWeight(f64),
    #[error("checkpoint has a negative bucket {0}")]
    NegativeBucket(i64),
    #[error("checkpoint has bucket {bucket} that is exceeding histogram buckets {buckets}")]
    BucketOutOfRange { bucket: i64, buckets: usize },
}

/// Upstream `HistogramCheckpoint`: bucket weights scaled to integers (at most
/// [`MAX_CHECKPOINT_WEIGHT`]), the true total weight, and for decaying histograms the reference
/// time (seconds since the Unix epoch).
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
pub struct HistogramCheckpoint {
    pub reference_timestamp_s: Option<f64>,
    pub bucket_weights: BTreeMap<i64, u32>,
    pub total_weight: f64,
}

/// Go's `int(math.Floor(x + 0.5))`.
fn round_half_up(x: f64) -> f64 {
    (x + 0.5).floor()
}

/// Bucketing scheme.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum HistogramOptions {
    /// Buckets of equal size.
    Linear { num_buckets: usize, bucket_size: f64, epsilon: f64 },
    /// Bucket `i` starts at `first · (ratioⁱ − 1) / (ratio − 1)`.
    Exponential { num_buckets: usize, first_bucket_size: f64, ratio: f64, epsilon: f64 },
}

impl HistogramOptions {
    pub fn linear(max_value: f64, bucket_size: f64, epsilon: f64) -> Result<Self, HistogramError> {
        if !(max_value > 0.0 && bucket_size > 0.0 && epsilon > 0.0) {
            return Err(HistogramError::InvalidLinearOptions);
        }
        let num_buckets = (max_value / bucket_size).ceil() as usize + 1;
        Ok(HistogramOptions::Linear { num_buckets, bucket_size, epsilon })
    }

    /// The smallest `n` with `first · (ratioⁿ − 1) / (ratio − 1) ≥ max`, plus one open-ended
    /// last bucket.
    pub fn exponential(
        max_value: f64,
        first_bucket_size: f64,
        ratio: f64,
        epsilon: f64,
    ) -> Result<Self, HistogramError> {
        if !(max_value > 0.0 && first_bucket_size > 0.0 && ratio > 1.0 && epsilon > 0.0) {
            return Err(HistogramError::InvalidExponentialOptions);
        }
        let n = ((max_value * (ratio - 1.0) / first_bucket_size + 1.0).ln() / ratio.ln()).ceil() as usize + 1;
        Ok(HistogramOptions::Exponential { num_buckets: n, first_bucket_size, ratio, epsilon })
    }

    pub fn num_buckets(&self) -> usize {
        match *self {
            HistogramOptions::Linear { num_buckets, .. } | HistogramOptions::Exponential { num_buckets, .. } => {
                num_buckets
            }
        }
    }

    pub fn epsilon(&self) -> f64 {
        match *self {
            HistogramOptions::Linear { epsilon, .. } | HistogramOptions::Exponential { epsilon, .. } => epsilon,
        }
    }

    pub fn find_bucket(&self, value: f64) -> usize {
        match *self {
            HistogramOptions::Linear { num_buckets, bucket_size, .. } => {
                let bucket = (value / bucket_size) as i64;
                bucket.clamp(0, num_buckets as i64 - 1) as usize
            }
            HistogramOptions::Exponential { num_buckets, first_bucket_size, ratio, .. } => {
                if value < first_bucket_size {
                    return 0;
                }
                let bucket = ((value * (ratio - 1.0) / first_bucket_size + 1.0).ln() / ratio.ln()) as usize;
                bucket.min(num_buckets - 1)
            }
        }
    }

    pub fn bucket_start(&self, bucket: usize) -> f64 {
        match *self {
            HistogramOptions::Linear { bucket_size, .. } => bucket as f64 * bucket_size,
            HistogramOptions::Exponential { first_bucket_size, ratio, .. } => {
                if bucket == 0 {
                    0.0
                } else {
                    first_bucket_size * (ratio.powi(bucket as i32) - 1.0) / (ratio - 1.0)
                }
            }
        }
    }
}

#[derive(Debug, Clone, PartialEq)]
pub struct Histogram {
    options: HistogramOptions,
    weights: Vec<f64>,
    total: f64,
    min_bucket: usize,
    max_bucket: usize,
}

impl Histogram {
    pub fn new(options: HistogramOptions) -> Self {
        let n = options.num_buckets();
        Self { options, weights: vec![0.0; n], total: 0.0, min_bucket: n - 1, max_bucket: 0 }
    }

    pub fn options(&self) -> &HistogramOptions {
        &self.options
    }

    pub fn add_sample(&mut self, value: f64, weight: f64) {
        assert!(weight >= 0.0, "sample weight must be non-negative");
        let b = self.options.find_bucket(value);
        self.weights[b] += weight;
        self.total += weight;
        let eps = self.options.epsilon();
        if b < self.min_bucket && self.weights[b] >= eps {
            self.min_bucket = b;
        }
        if b > self.max_bucket && self.weights[b] >= eps {
            self.max_bucket = b;
        }
    }

    /// Removes weight from a bucket; a result below epsilon becomes exactly zero (upstream
    /// `safeSubtract`).
    pub fn subtract_sample(&mut self, value: f64, weight: f64) {
        assert!(weight >= 0.0, "sample weight must be non-negative");
        let b = self.options.find_bucket(value);
        let eps = self.options.epsilon();
        let safe = |v: f64| if v - weight < eps { 0.0 } else { v - weight };
        self.total = safe(self.total);
        self.weights[b] = safe(self.weights[b]);
        self.update_min_max();
    }

    /// Adds another histogram's weights (same options).
    pub fn merge(&mut self, other: &Histogram) {
        assert_eq!(self.options, other.options, "can't merge histograms with different options");
        for b in other.min_bucket..=other.max_bucket {
            self.weights[b] += other.weights[b];
        }
        self.total += other.total;
        self.min_bucket = self.min_bucket.min(other.min_bucket);
        self.max_bucket = self.max_bucket.max(other.max_bucket);
    }

    /// Upstream `Equals`: same options, same non-empty range, weights within 1e-15.
    pub fn equals(&self, other: &Histogram) -> bool {
        self.options == other.options
            && self.min_bucket == other.min_bucket
            && self.max_bucket == other.max_bucket
            && (self.min_bucket..=self.max_bucket).all(|b| (self.weights[b] - other.weights[b]).abs() <= 1e-15)
    }

    pub fn total_weight(&self) -> f64 {
        self.total
    }

    /// The weight in one bucket.
    pub fn bucket_weight(&self, bucket: usize) -> f64 {
        self.weights.get(bucket).copied().unwrap_or(0.0)
    }

    /// Upstream `SaveToChekpoint`: weights scaled so the largest is [`MAX_CHECKPOINT_WEIGHT`],
    /// rounded, zeros dropped.
    pub fn save_to_checkpoint(&self) -> HistogramCheckpoint {
        let mut out = HistogramCheckpoint { total_weight: self.total, ..Default::default() };
        let max = (self.min_bucket..=self.max_bucket).map(|b| self.weights[b]).fold(0.0, f64::max);
        if max <= 0.0 {
            return out;
        }
        let ratio = MAX_CHECKPOINT_WEIGHT as f64 / max;
        for b in self.min_bucket..=self.max_bucket {
            let w = round_half_up(self.weights[b] * ratio);
            if w > 0.0 {
                out.bucket_weights.insert(b as i64, w.min(u32::MAX as f64) as u32);
            }
        }
        out
    }

    /// Upstream `LoadFromCheckpoint`: adds the checkpoint's weights, rescaled to its total.
    pub fn load_from_checkpoint(&mut self, c: &HistogramCheckpoint) -> Result<(), HistogramError> {
        if c.total_weight < 0.0 || c.total_weight.is_nan() {
            return Err(HistogramError::NegativeTotalWeight(c.total_weight));
        }
        let n = self.options.num_buckets();
        let mut sum = 0i64;
        for (&bucket, &w) in &c.bucket_weights {
            sum += w as i64;
            if bucket >= n as i64 {
                return Err(HistogramError::BucketOutOfRange { bucket, buckets: n });
            }
            if bucket < 0 {
                return Err(HistogramError::NegativeBucket(bucket));
            }
        }
        if sum == 0 {
            return Ok(());
        }
        let ratio = c.total_weight / sum as f64;
        for (&bucket, &w) in &c.bucket_weights {
            let b = bucket as usize;
            self.min_bucket = self.min_bucket.min(b);
            self.max_bucket = self.max_bucket.max(b);
            self.weights[b] += w as f64 * ratio;
        }
        self.total += c.total_weight;
        // kubernetes/autoscaler#7726: drop buckets rounding pushed below epsilon.
        self.update_min_max();
        Ok(())
    }

    pub fn is_empty(&self) -> bool {
        self.weights[self.min_bucket] < self.options.epsilon()
    }

    /// The end of the first bucket whose cumulative weight reaches `p` of the total (the start of
    /// the last bucket, which has no end).
    pub fn percentile(&self, p: f64) -> f64 {
        if self.is_empty() {
            return 0.0;
        }
        let threshold = p * self.total;
        let mut partial = 0.0;
        let mut bucket = self.min_bucket;
        while bucket < self.max_bucket {
            partial += self.weights[bucket];
            if partial >= threshold {
                break;
            }
            bucket += 1;
        }
        if bucket < self.options.num_buckets() - 1 {
            self.options.bucket_start(bucket + 1)
        } else {
            self.options.bucket_start(bucket)
        }
    }

    fn scale(&mut self, factor: f64) {
        for w in &mut self.weights {
            *w *= factor;
        }
        self.total *= factor;
        self.update_min_max();
    }

    fn update_min_max(&mut self) {
        let last = self.options.num_buckets() - 1;
        let eps = self.options.epsilon();
        while self.weights[self.min_bucket] < eps && self.min_bucket < last {
            self.min_bucket += 1;
        }
        while self.weights[self.max_bucket] < eps && self.max_bucket > 0 {
            self.max_bucket -= 1;
        }
    }
}

/// When a decay factor would exceed 2^100 the reference time is moved forward.
const MAX_DECAY_EXPONENT: f64 = 100.0;

#[derive(Debug, Clone, PartialEq)]
pub struct DecayingHistogram {
    histogram: Histogram,
    half_life_s: f64,
    reference_s: f64,
}

impl DecayingHistogram {
    /// The reference starts at the epoch, like upstream's zero `time.Time`; the first sample far
    /// from it renormalises.
    pub fn new(options: HistogramOptions, half_life_s: f64) -> Self {
        Self { histogram: Histogram::new(options), half_life_s, reference_s: f64::MIN }
    }

    pub fn add_sample(&mut self, value: f64, weight: f64, at_s: f64) {
        let w = weight * self.decay_factor(at_s);
        self.histogram.add_sample(value, w);
    }

    pub fn subtract_sample(&mut self, value: f64, weight: f64, at_s: f64) {
        let w = weight * self.decay_factor(at_s);
        self.histogram.subtract_sample(value, w);
    }

    pub fn percentile(&self, p: f64) -> f64 {
        self.histogram.percentile(p)
    }

    pub fn is_empty(&self) -> bool {
        self.histogram.is_empty()
    }

    pub fn histogram(&self) -> &Histogram {
        &self.histogram
    }

    /// The reference time, seconds since the Unix epoch; `None` while it is Go's zero time.
    pub fn reference_s(&self) -> Option<f64> {
        (self.reference_s != f64::MIN).then_some(self.reference_s)
    }

    /// Aligns the older reference time with the younger one, then adds the weights.
    pub fn merge(&mut self, other: &DecayingHistogram) {
        assert_eq!(self.half_life_s, other.half_life_s, "can't merge decaying histograms with different half lives");
        let mut other = other.clone();
        if self.reference_s < other.reference_s {
            self.shift_reference(other.reference_s);
        } else if other.reference_s < self.reference_s {
            other.shift_reference(self.reference_s);
        }
        self.histogram.merge(&other.histogram);
    }

    pub fn equals(&self, other: &DecayingHistogram) -> bool {
        self.half_life_s == other.half_life_s
            && self.reference_s == other.reference_s
            && self.histogram.equals(&other.histogram)
    }

    pub fn save_to_checkpoint(&self) -> HistogramCheckpoint {
        HistogramCheckpoint { reference_timestamp_s: self.reference_s(), ..self.histogram.save_to_checkpoint() }
    }

    pub fn load_from_checkpoint(&mut self, c: &HistogramCheckpoint) -> Result<(), HistogramError> {
        self.histogram.load_from_checkpoint(c)?;
        self.reference_s = c.reference_timestamp_s.unwrap_or(f64::MIN);
        Ok(())
    }

    fn decay_factor(&mut self, at_s: f64) -> f64 {
        if at_s > self.reference_s + self.half_life_s * MAX_DECAY_EXPONENT {
            self.shift_reference(at_s);
        }
        ((at_s - self.reference_s) / self.half_life_s).exp2()
    }

    /// Moves the reference to `at_s` rounded to a whole number of half-lives, rescaling weights
    /// (Go's `time.Round` rounds halves away from zero, as `f64::round`).
    fn shift_reference(&mut self, at_s: f64) {
        let new_reference = (at_s / self.half_life_s).round() * self.half_life_s;
        let exponent = if self.reference_s == f64::MIN {
            f64::NEG_INFINITY
        } else {
            round_half_up((self.reference_s - new_reference) / self.half_life_s)
        };
        self.histogram.scale(exponent.exp2());
        self.reference_s = new_reference;
    }
}
