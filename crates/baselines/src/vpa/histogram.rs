//! VPA's histograms (upstream `pkg/recommender/util/histogram*.go`): weighted samples in
//! exponentially (or linearly) sized buckets; percentiles return the *end* of the bucket that
//! reaches the requested weight. The decaying variant halves a sample's weight every half-life,
//! renormalising its reference time when exponents would overflow.

/// Bucketing scheme.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum HistogramOptions {
    /// Buckets of equal size.
    Linear { num_buckets: usize, bucket_size: f64, epsilon: f64 },
    /// Bucket `i` starts at `first · (ratioⁱ − 1) / (ratio − 1)`.
    Exponential { num_buckets: usize, first_bucket_size: f64, ratio: f64, epsilon: f64 },
}

impl HistogramOptions {
    pub fn linear(max_value: f64, bucket_size: f64, epsilon: f64) -> Result<Self, String> {
        if max_value <= 0.0 || bucket_size <= 0.0 || epsilon <= 0.0 {
            return Err("maxValue, bucketSize and epsilon must be > 0.0".into());
        }
        let num_buckets = (max_value / bucket_size).ceil() as usize + 1;
        Ok(HistogramOptions::Linear { num_buckets, bucket_size, epsilon })
    }

    /// The smallest `n` with `first · (ratioⁿ − 1) / (ratio − 1) ≥ max`, plus one open-ended
    /// last bucket.
    pub fn exponential(max_value: f64, first_bucket_size: f64, ratio: f64, epsilon: f64) -> Result<Self, String> {
        if max_value <= 0.0 || first_bucket_size <= 0.0 || ratio <= 1.0 || epsilon <= 0.0 {
            return Err("maxValue, firstBucketSize, epsilon must be > 0.0 and ratio must be > 1.0".into());
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

    pub fn subtract_sample(&mut self, value: f64, weight: f64) {
        assert!(weight >= 0.0, "sample weight must be non-negative");
        let b = self.options.find_bucket(value);
        self.weights[b] -= weight;
        self.total -= weight;
        if self.weights[b] < self.options.epsilon() && (b == self.min_bucket || b == self.max_bucket) {
            self.update_min_max();
        }
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

    fn decay_factor(&mut self, at_s: f64) -> f64 {
        if self.reference_s == f64::MIN || at_s > self.reference_s + self.half_life_s * MAX_DECAY_EXPONENT {
            self.shift_reference(at_s);
        }
        ((at_s - self.reference_s) / self.half_life_s).exp2()
    }

    /// Moves the reference to `at_s` rounded to a whole number of half-lives, rescaling weights.
    fn shift_reference(&mut self, at_s: f64) {
        let new_reference = (at_s / self.half_life_s).round() * self.half_life_s;
        if self.reference_s != f64::MIN {
            let exponent = ((self.reference_s - new_reference) / self.half_life_s).round();
            self.histogram.scale(exponent.exp2());
        }
        self.reference_s = new_reference;
    }
}
