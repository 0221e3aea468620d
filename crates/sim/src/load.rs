//! Request arrival series: synthetic (diurnal + bursts + heavy-tailed scale + Poisson noise) or
//! replayed from a trace file.

use std::path::Path;
use std::sync::Arc;

use rand::RngExt;
use rand_distr::{Distribution, Poisson};
use rand_pcg::Pcg64Mcg;
use serde::{Deserialize, Serialize};

/// Parameters of one application's synthetic load: a daily and a weekly cycle, a linear trend,
/// bursts, and Poisson arrival noise.
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
    /// Relative amplitude of the weekly cycle (a week is 7 `day_s`), in [0, 1).
    #[serde(default)]
    pub weekly_amplitude: f64,
    /// Phase of the weekly cycle, radians.
    #[serde(default)]
    pub weekly_phase: f64,
    /// Linear trend: relative change of the rate per day (0.01 = +1 % a day).
    #[serde(default)]
    pub trend_per_day: f64,
}

/// Days over which [`SyntheticLoad::peak_rps`] looks for the busiest daily peak: one week, the
/// longest cycle of the model.
pub const PEAK_HORIZON_DAYS: f64 = 7.0;

/// The trend never takes the rate below this fraction of the mean.
const TREND_FLOOR: f64 = 0.1;

impl Default for SyntheticLoad {
    /// A constant 1 request/s: no cycles, trend or bursts.
    fn default() -> Self {
        Self {
            mean_rps: 1.0,
            diurnal_amplitude: 0.0,
            diurnal_phase: 0.0,
            day_s: 86_400.0,
            bursts_per_hour: 0.0,
            burst_peak: 0.0,
            burst_decay_s: 60.0,
            weekly_amplitude: 0.0,
            weekly_phase: 0.0,
            trend_per_day: 0.0,
        }
    }
}

impl SyntheticLoad {
    /// Expected rate at time `t` without bursts or noise: the daily and weekly cycles and the trend.
    pub fn diurnal_rate(&self, t_s: f64) -> f64 {
        let tau = std::f64::consts::TAU;
        let days = t_s / self.day_s;
        let daily = 1.0 + self.diurnal_amplitude * (tau * days + self.diurnal_phase).sin();
        let weekly = 1.0 + self.weekly_amplitude * (tau * days / 7.0 + self.weekly_phase).sin();
        let trend = (1.0 + self.trend_per_day * days).max(TREND_FLOOR);
        self.mean_rps * daily * weekly * trend
    }

    /// The busiest daily peak of the first week (bursts excluded): the rate a deployment sized
    /// for peak must serve. An upper bound — both cycles at their crests, the trend at its
    /// highest over the week — tight to within the weekly cycle's curvature over a day.
    pub fn peak_rps(&self) -> f64 {
        let trend = (1.0 + self.trend_per_day * PEAK_HORIZON_DAYS).max(1.0);
        self.mean_rps * (1.0 + self.diurnal_amplitude) * (1.0 + self.weekly_amplitude) * trend
    }
}

/// Largest arrival rate a trace may hold, requests/s (issue 19: rates are finite and ≤ 10⁹/s).
pub const MAX_TRACE_RATE_PER_S: f64 = 1e9;

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

    /// The highest rate of the series: the peak an app replaying it is sized for.
    pub fn peak_rps(&self) -> f64 {
        self.rates.iter().copied().fold(0.0, f64::max)
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

/// A Poisson count with mean `mean` (0 when the mean is not positive).
fn poisson(rng: &mut Pcg64Mcg, mean: f64) -> f64 {
    if mean <= 0.0 { 0.0 } else { Poisson::new(mean).map(|d| d.sample(rng)).unwrap_or(mean) }
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

    /// Number of requests arriving in `[t, t + dt)`: a Poisson count around the expected rate,
    /// for replayed traces too (a trace gives the rate per interval; the requests within it are
    /// a fresh realisation per seed, so held-out trace seeds are held-out traffic).
    pub fn arrivals(&mut self, t_s: f64, dt: f64) -> f64 {
        let (count, expected) = self.draw(t_s, dt);
        self.last_expected = expected;
        count
    }

    /// The expected arrival rate at `t_s`, requests per second: the source's rate, with the
    /// burst in progress (synthetic load) and the scenario's scale, before Poisson noise. Not
    /// clamped at 0.
    pub fn expected_rate(&self, t_s: f64) -> f64 {
        match &self.source {
            LoadSource::Synthetic(s) => s.diurnal_rate(t_s) * (1.0 + self.burst_excess) * self.scale,
            LoadSource::Trace(t) => t.rate_at(t_s) * self.scale,
        }
    }

    /// (count, expected count) for `[t, t + dt)`.
    fn draw(&mut self, t_s: f64, dt: f64) -> (f64, f64) {
        if let LoadSource::Synthetic(s) = &self.source {
            let p_burst = 1.0 - (-s.bursts_per_hour * dt / 3600.0).exp();
            self.burst_excess *= (-dt / s.burst_decay_s).exp();
            if self.rng.random::<f64>() < p_burst {
                self.burst_excess += self.rng.random_range(0.25..=1.0) * s.burst_peak;
            }
        }
        let mean = self.expected_rate(t_s) * dt;
        (poisson(&mut self.rng, mean), mean.max(0.0))
    }
}

/// A trace file that cannot be used: one line naming the file, the line (when known), the field
/// (when one is at fault) and the reason.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[error("{file}{}{}: {reason}", line.map(|l| format!(":{l}")).unwrap_or_default(), field.as_ref().map(|f| format!(": {f}")).unwrap_or_default())]
#[non_exhaustive]
pub struct TraceError {
    pub file: String,
    /// 1-based line of the file.
    pub line: Option<u64>,
    /// The column or field at fault (`count`, `minute 12`, `timestamp`).
    pub field: Option<String>,
    pub reason: String,
}

impl TraceError {
    fn new(file: &str, line: Option<u64>, field: Option<&str>, reason: impl Into<String>) -> Self {
        TraceError { file: file.into(), line, field: field.map(str::to_string), reason: reason.into() }
    }
}

/// Reads a trace file, recognising the format by its header: Azure Functions per-minute
/// invocations (`HashOwner,HashApp,HashFunction,Trigger,1..1440`, one trace per function) or
/// `timestamp,count` (one trace).
pub fn load_traces(path: &Path) -> Result<Vec<Trace>, TraceError> {
    let file = path.display().to_string();
    let text =
        std::fs::read_to_string(path).map_err(|e| TraceError::new(&file, None, None, format!("cannot read: {e}")))?;
    parse_traces(&text, &file)
}

/// Parses trace text; `source` names it in errors. A leading UTF-8 byte-order mark is ignored.
pub fn parse_traces(text: &str, source: &str) -> Result<Vec<Trace>, TraceError> {
    let text = text.strip_prefix('\u{feff}').unwrap_or(text);
    // The header is the first line with text (blank lines may come before it).
    let first = text.lines().map(str::trim).find(|l| !l.is_empty()).unwrap_or("");
    if first.to_ascii_lowercase().starts_with("hashowner") {
        parse_azure(text, source)
    } else {
        parse_timestamp_count(text, source).map(|t| vec![t])
    }
}

fn reader(text: &str) -> csv::Reader<&[u8]> {
    csv::ReaderBuilder::new().has_headers(false).flexible(true).trim(csv::Trim::All).from_reader(text.as_bytes())
}

/// Line numbers as an editor shows them, read off byte offsets: the csv reader's own count
/// skips blank lines and counts a CRLF file's lines one short. Records come in order, so each
/// call counts only the text since the last.
struct Lines<'t> {
    text: &'t [u8],
    byte: usize,
    line: u64,
}

impl<'t> Lines<'t> {
    fn new(text: &'t str) -> Self {
        Self { text: text.as_bytes(), byte: 0, line: 1 }
    }

    /// The line the byte at `offset` lies on (line ends: `\n`, `\r\n` or a lone `\r`).
    fn at(&mut self, offset: u64) -> u64 {
        let mut offset = (offset as usize).min(self.text.len());
        // The reader may place a record's start on the line end before it (a CRLF's `\n`).
        while matches!(self.text.get(offset), Some(b'\r' | b'\n')) {
            offset += 1;
        }
        if offset < self.byte {
            *self = Self { text: self.text, byte: 0, line: 1 };
        }
        let span = &self.text[self.byte..offset];
        for (i, b) in span.iter().enumerate() {
            let lone_cr = *b == b'\r' && self.text.get(self.byte + i + 1) != Some(&b'\n');
            if *b == b'\n' || lone_cr {
                self.line += 1;
            }
        }
        self.byte = offset;
        self.line
    }

    fn of(&mut self, position: Option<&csv::Position>) -> u64 {
        position.map_or(0, |p| self.at(p.byte()))
    }
}

fn csv_error(source: &str, text: &str, e: csv::Error) -> TraceError {
    let line = e.position().map(|p| Lines::new(text).at(p.byte()));
    let reason = match e.kind() {
        csv::ErrorKind::Utf8 { .. } => "not UTF-8 text".to_string(),
        _ => e.to_string().split_whitespace().collect::<Vec<_>>().join(" "),
    };
    TraceError::new(source, line, None, reason)
}

/// A field's text as an error shows it: in full up to 24 characters, else its start and length
/// (a 300-digit count is not repeated back whole).
fn shown(raw: &str) -> String {
    if raw.chars().count() <= 24 {
        raw.to_string()
    } else {
        format!("{}… ({} characters)", raw.chars().take(16).collect::<String>(), raw.chars().count())
    }
}

fn parse_count(source: &str, line: u64, field: &str, raw: &str) -> Result<f64, TraceError> {
    let fail = |reason: String| TraceError::new(source, Some(line), Some(field), reason);
    if raw.is_empty() {
        return Err(fail("missing value (gap in the series)".into()));
    }
    let v: f64 = raw.parse().map_err(|_| fail(format!("not a number ({:?})", shown(raw))))?;
    if !v.is_finite() {
        return Err(fail(format!("not finite ({})", shown(raw))));
    }
    if v < 0.0 {
        return Err(fail(format!("negative count ({})", shown(raw))));
    }
    Ok(v)
}

/// A parsed count as a person reads it: plain from 10⁻⁴ to 10¹⁵ (`5`, not `5e0`), in e-notation
/// beyond.
fn count_text(count: f64) -> String {
    if count == 0.0 || (1e-4..1e15).contains(&count.abs()) { format!("{count}") } else { format!("{count:e}") }
}

/// Checks a rate against [`MAX_TRACE_RATE_PER_S`].
fn check_rate(source: &str, line: u64, field: &str, rate: f64, raw: &str) -> Result<f64, TraceError> {
    if rate.is_finite() && rate <= MAX_TRACE_RATE_PER_S {
        Ok(rate)
    } else {
        Err(TraceError::new(
            source,
            Some(line),
            Some(field),
            format!("{} is {rate:.3e} requests/s, above the limit of 1e9/s", shown(raw)),
        ))
    }
}

fn parse_azure(text: &str, source: &str) -> Result<Vec<Trace>, TraceError> {
    let mut rows = reader(text).into_records();
    let header = rows
        .next()
        .transpose()
        .map_err(|e| csv_error(source, text, e))?
        .ok_or_else(|| TraceError::new(source, None, None, "empty file"))?;
    let mut lines = Lines::new(text);
    let header_line = lines.of(header.position());
    let minutes = header.len().saturating_sub(4);
    for (i, h) in header.iter().skip(4).enumerate() {
        if h != (i + 1).to_string() {
            return Err(TraceError::new(
                source,
                Some(header_line),
                Some(&format!("column {}", i + 5)),
                format!("expected minute {} in the Azure header, found {h:?}", i + 1),
            ));
        }
    }
    if minutes == 0 {
        return Err(TraceError::new(source, Some(header_line), None, "Azure header has no minute columns"));
    }
    let mut traces = Vec::new();
    for row in rows {
        let row = row.map_err(|e| csv_error(source, text, e))?;
        let line = lines.of(row.position());
        if row.len() != minutes + 4 {
            return Err(TraceError::new(
                source,
                Some(line),
                None,
                format!("expected {} fields, found {} (gap in the series)", minutes + 4, row.len()),
            ));
        }
        let mut rates = Vec::with_capacity(minutes);
        for (i, raw) in row.iter().skip(4).enumerate() {
            let field = format!("minute {}", i + 1);
            let count = parse_count(source, line, &field, raw)?;
            rates.push(check_rate(source, line, &field, count / 60.0, raw)?);
        }
        traces.push(Trace { name: format!("{}/{}", &row[1], &row[2]), interval_s: 60.0, rates });
    }
    if traces.is_empty() {
        return Err(TraceError::new(source, None, None, "no function rows after the header"));
    }
    Ok(traces)
}

fn parse_timestamp_count(text: &str, source: &str) -> Result<Trace, TraceError> {
    let mut points: Vec<(u64, f64, f64)> = Vec::new();
    // The first two timestamps as written: two that differ in text may be one float.
    let mut first_written: Vec<String> = Vec::new();
    let mut lines = Lines::new(text);
    let mut first_row = true;
    for row in reader(text).into_records() {
        let row = row.map_err(|e| csv_error(source, text, e))?;
        let line = lines.of(row.position());
        if row.iter().all(str::is_empty) {
            continue;
        }
        // The header, if any, is the first row with text (blank lines may come before it).
        if std::mem::take(&mut first_row) && row.get(0).is_some_and(|f| f.eq_ignore_ascii_case("timestamp")) {
            continue;
        }
        if row.len() != 2 {
            return Err(TraceError::new(
                source,
                Some(line),
                None,
                format!("expected 2 fields (timestamp,count), found {}", row.len()),
            ));
        }
        let ts: f64 = row[0].parse().ok().filter(|t: &f64| t.is_finite()).ok_or_else(|| {
            TraceError::new(source, Some(line), Some("timestamp"), format!("not a number of seconds ({:?})", &row[0]))
        })?;
        let count = parse_count(source, line, "count", &row[1])?;
        if first_written.len() < 2 {
            first_written.push(shown(&row[0]));
        }
        points.push((line, ts, count));
    }
    if points.len() < 2 {
        return Err(TraceError::new(source, None, None, "need at least two timestamp,count rows"));
    }
    let interval = points[1].1 - points[0].1;
    if !(interval > 0.0 && interval.is_finite()) {
        return Err(TraceError::new(
            source,
            Some(points[1].0),
            Some("timestamp"),
            format!(
                "must increase ({} after {}; timestamps are seconds, as 64-bit floats)",
                first_written[1], first_written[0]
            ),
        ));
    }
    for w in points.windows(2) {
        let step = w[1].1 - w[0].1;
        if (step - interval).abs() > 1e-6 * interval.max(1.0) {
            let what = if step > interval { "gap" } else { "irregular step" };
            return Err(TraceError::new(
                source,
                Some(w[1].0),
                Some("timestamp"),
                format!("{what}: {} follows {} but the interval is {interval} s", w[1].1, w[0].1),
            ));
        }
    }
    let mut rates = Vec::with_capacity(points.len());
    for &(line, _, count) in &points {
        rates.push(check_rate(source, line, "count", count / interval, &count_text(count))?);
    }
    Ok(Trace { name: source.rsplit('/').next().unwrap_or(source).to_string(), interval_s: interval, rates })
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
            // Lines as an editor numbers them: CRLF line ends, blank lines, a lone CR.
            ("timestamp,count\r\n0,1\r\n60,2\r\n120,3\r\n180,x\r\n", &["t.csv:5", "count", "not a number"]),
            ("timestamp,count\r\n0,1\r\n60,2\r\n120,3\r\n240,3\r\n", &["t.csv:5", "gap"]),
            ("timestamp,count\n0,1\n\n\n\n\n60,x\n", &["t.csv:7", "count"]),
            ("\n\ntimestamp,count\n0,1\n60,x\n", &["t.csv:5", "count"]),
            ("timestamp,count\r0,1\r60,x\r", &["t.csv:3", "count"]),
            ("\n\nHashOwner,HashApp,HashFunction,Trigger,1,3\n", &["t.csv:3", "minute 2"]),
            ("\r\nHashOwner,HashApp,HashFunction,Trigger,1,2\r\no,a,f,http,1,x\r\n", &["t.csv:3", "minute 2"]),
            (
                "HashOwner,HashApp,HashFunction,Trigger,1,2\r\no,a,f,http,1,2\r\n\r\no,a,g,http,1,-2\r\n",
                &["t.csv:4", "minute 2"],
            ),
        ];
        for (text, wants) in cases {
            let err = parse_traces(text, "t.csv").unwrap_err().to_string();
            assert!(!err.contains('\n'));
            for want in *wants {
                assert!(err.contains(want), "{text:?}: {err:?} lacks {want:?}");
            }
        }
    }

    /// Issue 19: 1e300, non-finite values and rates above 10⁹/s are rejected at their line.
    #[test]
    fn absurd_rates_are_rejected_with_file_and_line() {
        let cases: &[(&str, &[&str])] = &[
            ("timestamp,count\n0,5\n60,1e300\n", &["t.csv:3", "count", "1e9"]),
            ("timestamp,count\n0,5\n60,inf\n", &["t.csv:3", "count", "not finite"]),
            ("timestamp,count\n0,5\n60,NaN\n", &["t.csv:3", "count", "not finite"]),
            (&format!("timestamp,count\n0,5\n60,{}\n", "9".repeat(300)), &["t.csv:3", "count: 1e300 is"]),
            (&format!("0,5\n60,{}\n", "x".repeat(300)), &["t.csv:2", "count", "(300 characters)"]),
            // Two timestamps that differ in text but not as floats: named as written.
            (
                "9223372036854775807,5\n9223372036854775806,5\n",
                &["t.csv:2", "9223372036854775806 after 9223372036854775807"],
            ),
            // 6.1e10 per minute is ~1.02e9/s.
            ("timestamp,count\n0,5\n60,61000000000\n", &["t.csv:3", "count", "1e9"]),
            ("0,5\n1e-300,5\n", &["t.csv:1", "count: 5 is 5.000e300 requests/s", "1e9"]),
            ("0,12\n0.000000001,10\n", &["t.csv:1", "count: 12 is 1.200e10 requests/s"]),
            ("0,1e-30\n1e-45,1\n", &["t.csv:1", "count: 1e-30 is 1.000e15 requests/s"]),
            ("HashOwner,HashApp,HashFunction,Trigger,1,2\no,a,f,http,1,1e300\n", &["t.csv:2", "minute 2", "1e9"]),
            ("HashOwner,HashApp,HashFunction,Trigger,1,2\no,a,f,http,1,-inf\n", &["t.csv:2", "minute 2"]),
            ("0,5\ninf,5\n", &["t.csv:2", "timestamp"]),
        ];
        for (text, wants) in cases {
            let err = parse_traces(text, "t.csv").unwrap_err();
            let msg = err.to_string();
            assert!(!msg.contains('\n'));
            assert_eq!(err.file, "t.csv");
            for want in *wants {
                assert!(msg.contains(want), "{text:?}: {msg:?} lacks {want:?}");
            }
        }
        // Exactly at the limit is fine: 6e10 a minute is 1e9/s.
        assert!(parse_traces("0,0\n60,60000000000\n", "t.csv").is_ok());
    }

    #[test]
    fn trace_errors_carry_file_line_field_and_reason() {
        let err = parse_traces("timestamp,count\n0,5\n60,-3\n", "t.csv").unwrap_err();
        assert_eq!(
            (err.file.as_str(), err.line, err.field.as_deref(), err.reason.as_str()),
            ("t.csv", Some(3), Some("count"), "negative count (-3)")
        );
        assert_eq!(err.to_string(), "t.csv:3: count: negative count (-3)");
    }

    /// Issue 19: a UTF-8 byte-order mark (as Excel writes) no longer hides the Azure header.
    #[test]
    fn a_byte_order_mark_does_not_break_format_detection() {
        let text = "\u{feff}HashOwner,HashApp,HashFunction,Trigger,1,2\no,a,f,http,60,120\n";
        let t = parse_traces(text, "az.csv").unwrap();
        assert_eq!(t[0].rates, vec![1.0, 2.0]);
        let t = parse_traces("\u{feff}timestamp,count\n0,60\n60,120\n", "t.csv").unwrap();
        assert_eq!(t[0].rates, vec![1.0, 2.0]);
    }

    /// Replayed traces get Poisson arrival noise: the count varies by seed around rate × dt.
    #[test]
    fn replayed_traces_get_poisson_noise() {
        use rand::SeedableRng;
        let trace = Arc::new(Trace { name: "c".into(), interval_s: 60.0, rates: vec![10.0] });
        let draws = |seed| {
            let mut s = LoadState::new(LoadSource::Trace(trace.clone()), Pcg64Mcg::seed_from_u64(seed));
            (0..4000).map(|i| s.arrivals(i as f64 * 15.0, 15.0)).collect::<Vec<_>>()
        };
        let a = draws(1);
        assert_ne!(a, draws(2), "another trace seed is other traffic");
        let mean = a.iter().sum::<f64>() / a.len() as f64;
        let var = a.iter().map(|x| (x - mean).powi(2)).sum::<f64>() / a.len() as f64;
        assert!((mean - 150.0).abs() < 1.5, "mean {mean}");
        assert!((var / 150.0 - 1.0).abs() < 0.1, "Poisson: variance {var} ≈ mean");
    }

    #[test]
    fn weekly_cycle_and_trend_shape_the_rate_and_the_peak_bounds_it() {
        let load = SyntheticLoad {
            mean_rps: 10.0,
            diurnal_amplitude: 0.5,
            diurnal_phase: 1.0,
            weekly_amplitude: 0.2,
            weekly_phase: 2.0,
            trend_per_day: 0.01,
            ..SyntheticLoad::default()
        };
        let week = 7.0 * 86_400.0;
        let rates: Vec<f64> = (0..2016).map(|i| load.diurnal_rate(i as f64 * week / 2016.0)).collect();
        let max = rates.iter().copied().fold(0.0, f64::max);
        let min = rates.iter().copied().fold(f64::INFINITY, f64::min);
        assert!(max <= load.peak_rps() + 1e-9, "{max} > {}", load.peak_rps());
        assert!(max > 0.9 * load.peak_rps(), "peak bound tight: {max} vs {}", load.peak_rps());
        assert!(min < 10.0 * 0.5 * 0.85, "troughs: {min}");
        // Weekly: the mean of one day differs from another's by the weekly cycle.
        let day_mean = |d: usize| rates[d * 288..(d + 1) * 288].iter().sum::<f64>() / 288.0;
        let days: Vec<f64> = (0..7).map(day_mean).collect();
        let spread = days.iter().copied().fold(0.0, f64::max) / days.iter().copied().fold(f64::INFINITY, f64::min);
        assert!(spread > 1.2, "weekly cycle visible in daily means: {days:?}");
    }
}
