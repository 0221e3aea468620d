//! Request arrival series: synthetic (diurnal + bursts + heavy-tailed scale + Poisson noise) or
//! replayed from a trace file.

use std::path::Path;
use std::sync::Arc;

use rand::RngExt;
use rand_distr::{Distribution, Poisson};
use rand_pcg::Pcg64Mcg;
use serde::{Deserialize, Serialize};

/// Parameters of one application's synthetic load.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SyntheticLoad {
    /// Long-run mean arrival rate, requests/s (drawn heavy-tailed across applications).
    pub mean_rps: f64,
    /// Relative amplitude of the daily cycle, in [0, 1).
    pub diurnal_amplitude: f64,
    /// Phase of the daily cycle, radians.
    pub diurnal_phase: f64,
    /// Length of a "day" in simulated seconds (86 400 for real time; shorter to compress).
    pub day_s: f64,
    /// Expected bursts per hour.
    pub bursts_per_hour: f64,
    /// Largest extra multiple of the load a burst adds at its onset.
    pub burst_peak: f64,
    /// Time constant of a burst's exponential decay, seconds.
    pub burst_decay_s: f64,
}

impl SyntheticLoad {
    /// Expected rate at time `t` without bursts or noise.
    pub fn diurnal_rate(&self, t_s: f64) -> f64 {
        let angle = std::f64::consts::TAU * t_s / self.day_s + self.diurnal_phase;
        self.mean_rps * (1.0 + self.diurnal_amplitude * angle.sin())
    }

    /// Highest rate of the daily cycle (bursts excluded).
    pub fn peak_rps(&self) -> f64 {
        self.mean_rps * (1.0 + self.diurnal_amplitude)
    }
}

/// A replayed rate series: one value per `interval_s`, looping at its end.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Trace {
    pub name: String,
    pub interval_s: f64,
    /// Requests per second in each interval.
    pub rates: Vec<f64>,
}

impl Trace {
    pub fn rate_at(&self, t_s: f64) -> f64 {
        let i = (t_s / self.interval_s).floor().max(0.0) as usize % self.rates.len();
        self.rates[i]
    }

    pub fn mean_rps(&self) -> f64 {
        self.rates.iter().sum::<f64>() / self.rates.len() as f64
    }
}

#[derive(Debug, Clone)]
pub enum LoadSource {
    Synthetic(SyntheticLoad),
    Trace(Arc<Trace>),
}

impl LoadSource {
    pub fn mean_rps(&self) -> f64 {
        match self {
            LoadSource::Synthetic(s) => s.mean_rps,
            LoadSource::Trace(t) => t.mean_rps(),
        }
    }
}

/// The evolving state of one application's arrivals. It owns its random stream so that the
/// trace an application sees depends only on the seed, never on what the autoscaler did: every
/// policy in an A/B comparison faces the same requests.
#[derive(Debug, Clone)]
pub struct LoadState {
    pub source: LoadSource,
    rng: Pcg64Mcg,
    burst_excess: f64,
    /// Multiplier injected by load scenarios (1 = none).
    pub scale: f64,
    /// The expectation of the last `arrivals` draw (its Poisson mean, before noise).
    last_expected: f64,
}

impl LoadState {
    pub fn new(source: LoadSource, rng: Pcg64Mcg) -> Self {
        Self { source, rng, burst_excess: 0.0, scale: 1.0, last_expected: 0.0 }
    }

    /// The expected number of the last `arrivals` call (no Poisson noise): the rate the
    /// steady-state queueing formulas describe.
    pub fn expected_arrivals(&self) -> f64 {
        self.last_expected
    }

    /// Number of requests arriving in `[t, t + dt)`.
    pub fn arrivals(&mut self, t_s: f64, dt: f64) -> f64 {
        let (count, expected) = self.draw(t_s, dt);
        self.last_expected = expected;
        count
    }

    /// (count, expected count) for `[t, t + dt)`.
    fn draw(&mut self, t_s: f64, dt: f64) -> (f64, f64) {
        match &self.source {
            LoadSource::Synthetic(s) => {
                let p_burst = 1.0 - (-s.bursts_per_hour * dt / 3600.0).exp();
                self.burst_excess *= (-dt / s.burst_decay_s).exp();
                if self.rng.random::<f64>() < p_burst {
                    self.burst_excess += self.rng.random_range(0.25..=1.0) * s.burst_peak;
                }
                let mean = s.diurnal_rate(t_s) * (1.0 + self.burst_excess) * self.scale * dt;
                let count =
                    if mean <= 0.0 { 0.0 } else { Poisson::new(mean).map(|d| d.sample(&mut self.rng)).unwrap_or(mean) };
                (count, mean.max(0.0))
            }
            LoadSource::Trace(t) => {
                let v = t.rate_at(t_s) * self.scale * dt;
                (v, v)
            }
        }
    }
}

/// One line naming file, line, field and reason.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[error("{0}")]
pub struct TraceError(pub String);

/// Reads a trace file, recognising the format by its header: Azure Functions per-minute
/// invocations (`HashOwner,HashApp,HashFunction,Trigger,1..1440`, one trace per function) or
/// `timestamp,count` (one trace).
pub fn load_traces(path: &Path) -> Result<Vec<Trace>, TraceError> {
    let text =
        std::fs::read_to_string(path).map_err(|e| TraceError(format!("{}: cannot read: {e}", path.display())))?;
    parse_traces(&text, &path.display().to_string())
}

pub fn parse_traces(text: &str, source: &str) -> Result<Vec<Trace>, TraceError> {
    let first = text.lines().next().unwrap_or("").trim();
    if first.to_ascii_lowercase().starts_with("hashowner") {
        parse_azure(text, source)
    } else {
        parse_timestamp_count(text, source).map(|t| vec![t])
    }
}

fn reader(text: &str) -> csv::Reader<&[u8]> {
    csv::ReaderBuilder::new().has_headers(false).flexible(true).trim(csv::Trim::All).from_reader(text.as_bytes())
}

fn parse_count(source: &str, line: u64, field: &str, raw: &str) -> Result<f64, TraceError> {
    if raw.is_empty() {
        return Err(TraceError(format!("{source}:{line}: {field}: missing value (gap in the series)")));
    }
    let v: f64 = raw.parse().map_err(|_| TraceError(format!("{source}:{line}: {field}: not a number ({raw:?})")))?;
    if !v.is_finite() {
        return Err(TraceError(format!("{source}:{line}: {field}: not finite ({raw})")));
    }
    if v < 0.0 {
        return Err(TraceError(format!("{source}:{line}: {field}: negative count ({raw})")));
    }
    Ok(v)
}

fn parse_azure(text: &str, source: &str) -> Result<Vec<Trace>, TraceError> {
    let mut rows = reader(text).into_records();
    let header = rows
        .next()
        .transpose()
        .map_err(|e| TraceError(format!("{source}:1: {e}")))?
        .ok_or_else(|| TraceError(format!("{source}: empty file")))?;
    let minutes = header.len().saturating_sub(4);
    for (i, h) in header.iter().skip(4).enumerate() {
        if h != (i + 1).to_string() {
            return Err(TraceError(format!(
                "{source}:1: column {}: expected minute {} in the Azure header, found {h:?}",
                i + 5,
                i + 1
            )));
        }
    }
    if minutes == 0 {
        return Err(TraceError(format!("{source}:1: Azure header has no minute columns")));
    }
    let mut traces = Vec::new();
    for row in rows {
        let row = row.map_err(|e| TraceError(format!("{source}: {e}")))?;
        let line = row.position().map(|p| p.line()).unwrap_or(0);
        if row.len() != minutes + 4 {
            return Err(TraceError(format!(
                "{source}:{line}: expected {} fields, found {} (gap in the series)",
                minutes + 4,
                row.len()
            )));
        }
        let mut rates = Vec::with_capacity(minutes);
        for (i, raw) in row.iter().skip(4).enumerate() {
            rates.push(parse_count(source, line, &format!("minute {}", i + 1), raw)? / 60.0);
        }
        traces.push(Trace { name: format!("{}/{}", &row[1], &row[2]), interval_s: 60.0, rates });
    }
    if traces.is_empty() {
        return Err(TraceError(format!("{source}: no function rows after the header")));
    }
    Ok(traces)
}

fn parse_timestamp_count(text: &str, source: &str) -> Result<Trace, TraceError> {
    let mut points: Vec<(u64, f64, f64)> = Vec::new();
    for row in reader(text).into_records() {
        let row = row.map_err(|e| TraceError(format!("{source}: {e}")))?;
        let line = row.position().map(|p| p.line()).unwrap_or(0);
        if row.iter().all(str::is_empty) {
            continue;
        }
        if line == 1 && row.get(0).is_some_and(|f| f.eq_ignore_ascii_case("timestamp")) {
            continue;
        }
        if row.len() != 2 {
            return Err(TraceError(format!(
                "{source}:{line}: expected 2 fields (timestamp,count), found {}",
                row.len()
            )));
        }
        let ts: f64 = row[0].parse().ok().filter(|t: &f64| t.is_finite()).ok_or_else(|| {
            TraceError(format!("{source}:{line}: timestamp: not a number of seconds ({:?})", &row[0]))
        })?;
        let count = parse_count(source, line, "count", &row[1])?;
        points.push((line, ts, count));
    }
    if points.len() < 2 {
        return Err(TraceError(format!("{source}: need at least two timestamp,count rows")));
    }
    let interval = points[1].1 - points[0].1;
    if interval <= 0.0 {
        return Err(TraceError(format!(
            "{source}:{}: timestamp: must increase ({} after {})",
            points[1].0, points[1].1, points[0].1
        )));
    }
    for w in points.windows(2) {
        let step = w[1].1 - w[0].1;
        if (step - interval).abs() > 1e-6 * interval.max(1.0) {
            let what = if step > interval { "gap" } else { "irregular step" };
            return Err(TraceError(format!(
                "{source}:{}: timestamp: {what}: {} follows {} but the interval is {interval} s",
                w[1].0, w[1].1, w[0].1
            )));
        }
    }
    Ok(Trace {
        name: source.rsplit('/').next().unwrap_or(source).to_string(),
        interval_s: interval,
        rates: points.iter().map(|p| p.2 / interval).collect(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn timestamp_count_becomes_rates() {
        let t = parse_traces("timestamp,count\n0,60\n60,120\n120,0\n", "t.csv").unwrap();
        assert_eq!(t[0].interval_s, 60.0);
        assert_eq!(t[0].rates, vec![1.0, 2.0, 0.0]);
        assert_eq!(t[0].rate_at(61.0), 2.0);
        assert_eq!(t[0].rate_at(180.0), 1.0, "loops");
    }

    #[test]
    fn azure_rows_become_per_function_traces() {
        let text = "HashOwner,HashApp,HashFunction,Trigger,1,2,3\no,a,f1,http,60,0,6\no,a,f2,timer,1,1,1\n";
        let t = parse_traces(text, "az.csv").unwrap();
        assert_eq!(t.len(), 2);
        assert_eq!(t[0].name, "a/f1");
        assert_eq!(t[0].rates, vec![1.0, 0.0, 0.1]);
    }

    /// Table: (file text, substrings the error must contain).
    #[test]
    fn malformed_traces_are_rejected_with_line_and_reason() {
        let cases: &[(&str, &[&str])] = &[
            ("timestamp,count\n0,5\n60,-3\n", &["t.csv:3", "count", "negative"]),
            ("timestamp,count\n0,5\n60,5\n180,5\n", &["t.csv:4", "gap", "180"]),
            ("0,5\n60,five\n", &["t.csv:2", "count", "not a number"]),
            ("0,5\n60,\n", &["t.csv:2", "missing"]),
            ("0,5\n0,5\n", &["t.csv:2", "increase"]),
            ("0,5\n", &["at least two"]),
            ("HashOwner,HashApp,HashFunction,Trigger,1,2\no,a,f,http,1,-2\n", &["t.csv:2", "minute 2", "negative"]),
            ("HashOwner,HashApp,HashFunction,Trigger,1,2\no,a,f,http,1,\n", &["t.csv:2", "minute 2", "missing"]),
            ("HashOwner,HashApp,HashFunction,Trigger,1,2\no,a,f,http,1\n", &["t.csv:2", "expected 6 fields"]),
            ("HashOwner,HashApp,HashFunction,Trigger,1,3\n", &["t.csv:1", "minute 2"]),
        ];
        for (text, wants) in cases {
            let err = parse_traces(text, "t.csv").unwrap_err().to_string();
            assert!(!err.contains('\n'));
            for want in *wants {
                assert!(err.contains(want), "{text:?}: {err:?} lacks {want:?}");
            }
        }
    }
}
