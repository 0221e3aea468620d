//! VPA's per-container aggregation (upstream `pkg/recommender/model`): CPU usage samples weighted
//! by the request, one memory peak per 24-hour interval per container, OOM kills turned into
//! bumped memory samples, and an 8-day window after which a silent aggregate expires.

use serde::{Deserialize, Serialize};

use super::histogram::{DecayingHistogram, HistogramCheckpoint, HistogramError, HistogramOptions};

/// The smallest weight a CPU sample can have (`minSampleWeight`).
pub const MIN_SAMPLE_WEIGHT: f64 = 0.1;
/// Weight below which a bucket counts as empty (`0.001 × minSampleWeight`).
pub const EPSILON: f64 = 0.001 * MIN_SAMPLE_WEIGHT;
/// Each bucket 5 % larger than the previous.
pub const BUCKET_GROWTH: f64 = 0.05;
pub const CPU_HALF_LIFE_S: f64 = 24.0 * 3600.0;
pub const MEMORY_HALF_LIFE_S: f64 = 24.0 * 3600.0;
/// One memory peak per interval…
pub const MEMORY_AGGREGATION_INTERVAL_S: f64 = 24.0 * 3600.0;
/// …over eight intervals: the history window, and the expiry of a silent aggregate.
pub const MEMORY_AGGREGATION_INTERVAL_COUNT: f64 = 8.0;
pub const OOM_BUMP_UP_RATIO: f64 = 1.2;
pub const OOM_MIN_BUMP_UP_BYTES: f64 = 100.0 * 1024.0 * 1024.0;
/// `--confidence-interval` (cpu and memory): the span a full confidence of 1 stands for.
pub const CONFIDENCE_INTERVAL_S: f64 = 24.0 * 3600.0;

/// A VPA checkpoint's aggregate state (upstream `VerticalPodAutoscalerCheckpointStatus`),
/// times in seconds since the Unix epoch.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
pub struct AggregateCheckpoint {
    pub cpu_histogram: HistogramCheckpoint,
    pub memory_histogram: HistogramCheckpoint,
    pub first_sample_start_s: Option<f64>,
    pub last_sample_start_s: Option<f64>,
    pub total_samples_count: u64,
}

/// An OOM kill the model could not use.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[non_exhaustive]
pub enum OomError {
    #[error("OOM event will be discarded - it is too old ({0})")]
    TooOld(f64),
    #[error("adding OOM sample failed")]
    Rejected,
}

pub fn cpu_histogram_options() -> HistogramOptions {
    // 0.01 core first bucket, up to 1000 cores.
    HistogramOptions::exponential(1000.0, 0.01, 1.0 + BUCKET_GROWTH, EPSILON).expect("valid options")
}

pub fn memory_histogram_options() -> HistogramOptions {
    // 10 MB first bucket, up to 1 TB.
    HistogramOptions::exponential(1e12, 1e7, 1.0 + BUCKET_GROWTH, EPSILON).expect("valid options")
}

pub fn memory_window_s() -> f64 {
    MEMORY_AGGREGATION_INTERVAL_S * MEMORY_AGGREGATION_INTERVAL_COUNT
}

/// The history of one container name across all pods of a workload.
#[derive(Debug, Clone, PartialEq)]
pub struct AggregateContainerState {
    pub cpu: DecayingHistogram,
    pub memory_peaks: DecayingHistogram,
    pub first_sample_s: Option<f64>,
    pub last_sample_s: f64,
    pub total_samples: u64,
    pub created_s: f64,
    /// Which resources the recommendation covers (`controlledResources`); both by default.
    pub controls_cpu: bool,
    pub controls_memory: bool,
}

impl AggregateContainerState {
    pub fn new(created_s: f64) -> Self {
        Self {
            cpu: DecayingHistogram::new(cpu_histogram_options(), CPU_HALF_LIFE_S),
            memory_peaks: DecayingHistogram::new(memory_histogram_options(), MEMORY_HALF_LIFE_S),
            first_sample_s: None,
            last_sample_s: 0.0,
            total_samples: 0,
            created_s,
            controls_cpu: true,
            controls_memory: true,
        }
    }

    /// Upstream `LoadFromCheckpoint`: the histograms and sample counters a running recommender
    /// saved, as the state before any new sample.
    pub fn load_from_checkpoint(&mut self, c: &AggregateCheckpoint) -> Result<(), HistogramError> {
        self.total_samples = c.total_samples_count;
        self.first_sample_s = c.first_sample_start_s;
        self.last_sample_s = c.last_sample_start_s.unwrap_or(self.last_sample_s);
        self.memory_peaks.load_from_checkpoint(&c.memory_histogram)?;
        self.cpu.load_from_checkpoint(&c.cpu_histogram)?;
        Ok(())
    }

    /// Upstream `SaveToCheckpoint`: the histograms and sample counters, to start a restarted
    /// recommender from ([`AggregateContainerState::load_from_checkpoint`]).
    pub fn save_to_checkpoint(&self) -> AggregateCheckpoint {
        AggregateCheckpoint {
            cpu_histogram: self.cpu.save_to_checkpoint(),
            memory_histogram: self.memory_peaks.save_to_checkpoint(),
            first_sample_start_s: self.first_sample_s,
            last_sample_start_s: Some(self.last_sample_s),
            total_samples_count: self.total_samples,
        }
    }

    /// Samples are weighted by the request, so raising the request makes old history decay
    /// faster in effect, which reacts quickly to CPU starvation.
    pub fn add_cpu_sample(&mut self, usage_cores: f64, request_cores: f64, at_s: f64) {
        self.cpu.add_sample(usage_cores, request_cores.max(MIN_SAMPLE_WEIGHT), at_s);
        if at_s > self.last_sample_s {
            self.last_sample_s = at_s;
        }
        if self.first_sample_s.is_none_or(|f| at_s < f) {
            self.first_sample_s = Some(at_s);
        }
        self.total_samples += 1;
    }

    /// Heuristic confidence: for one sample a minute over N days, N (upstream `getConfidence`
    /// with the default 24-hour interval).
    pub fn confidence(&self) -> f64 {
        self.confidence_over(CONFIDENCE_INTERVAL_S)
    }

    /// `getConfidence` for another confidence interval: the smaller of the history's length and
    /// the number of one-minute samples, both in intervals.
    pub fn confidence_over(&self, interval_s: f64) -> f64 {
        let lifespan = self.first_sample_s.map_or(0.0, |f| (self.last_sample_s - f) / interval_s);
        let samples = self.total_samples as f64 / (interval_s / 60.0);
        lifespan.min(samples)
    }

    pub fn is_expired(&self, now_s: f64) -> bool {
        let since =
            if self.cpu.is_empty() && self.memory_peaks.is_empty() { self.created_s } else { self.last_sample_s };
        now_s - since >= memory_window_s()
    }
}

/// One container of one pod: the de-duplication of CPU samples and the current memory-peak
/// window, feeding its workload's aggregate.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct ContainerState {
    pub last_cpu_sample_s: Option<f64>,
    pub last_memory_sample_s: Option<f64>,
    pub window_end_s: Option<f64>,
    pub memory_peak: f64,
    pub oom_peak: f64,
}

impl ContainerState {
    /// Drops duplicate and out-of-order samples, as upstream does.
    pub fn add_cpu_sample(
        &mut self,
        agg: &mut AggregateContainerState,
        usage_cores: f64,
        request_cores: f64,
        at_s: f64,
    ) -> bool {
        if usage_cores < 0.0 || self.last_cpu_sample_s.is_some_and(|l| at_s <= l) {
            return false;
        }
        agg.add_cpu_sample(usage_cores, request_cores, at_s);
        self.last_cpu_sample_s = Some(at_s);
        true
    }

    pub(crate) fn max_peak(&self) -> f64 {
        self.memory_peak.max(self.oom_peak)
    }

    /// Keeps one peak per aggregation interval: a higher sample in the same interval replaces
    /// the peak (subtract the old, add the new); a sample past the window end opens a new one.
    pub fn add_memory_sample(
        &mut self,
        agg: &mut AggregateContainerState,
        usage_bytes: f64,
        at_s: f64,
        is_oom: bool,
    ) -> bool {
        if !is_oom && self.last_memory_sample_s.is_some_and(|l| at_s < l) {
            return false;
        }
        self.last_memory_sample_s = Some(at_s);
        let window_end = *self.window_end_s.get_or_insert(at_s);
        let mut add_new_peak = false;
        if at_s < window_end {
            let old = self.max_peak();
            if old != 0.0 && usage_bytes > old {
                agg.memory_peaks.subtract_sample(old, 1.0, window_end);
                add_new_peak = true;
            }
        } else {
            let interval = MEMORY_AGGREGATION_INTERVAL_S;
            let shift = ((at_s - window_end) / interval).floor() * interval + interval;
            self.window_end_s = Some(window_end + shift);
            self.memory_peak = 0.0;
            self.oom_peak = 0.0;
            add_new_peak = true;
        }
        if add_new_peak {
            let end = self.window_end_s.expect("set above");
            agg.memory_peaks.add_sample(usage_bytes, 1.0, end);
            if is_oom {
                self.oom_peak = usage_bytes;
            } else {
                self.memory_peak = usage_bytes;
            }
        }
        true
    }

    /// An OOM kill becomes a memory sample of `max(used + 100 MiB, used × 1.2)` where `used` is
    /// the larger of the request and the recent (non-OOM) peak. OOMs older than the current
    /// interval are discarded.
    pub fn record_oom(
        &mut self,
        agg: &mut AggregateContainerState,
        at_s: f64,
        requested_bytes: f64,
    ) -> Result<(), OomError> {
        if let Some(end) = self.window_end_s
            && at_s < end - MEMORY_AGGREGATION_INTERVAL_S
        {
            return Err(OomError::TooOld(at_s));
        }
        let used = requested_bytes.max(self.memory_peak);
        let needed = (used + OOM_MIN_BUMP_UP_BYTES).max(used * OOM_BUMP_UP_RATIO);
        if self.add_memory_sample(agg, needed, at_s, true) { Ok(()) } else { Err(OomError::Rejected) }
    }
}
