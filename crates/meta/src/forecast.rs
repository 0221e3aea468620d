//! The state features TL+ (fig8's transfer-learning baseline with state features) adds: the
//! next-step load forecast, an ARIMA(p, d, 0) model — an autoregression of order p on the
//! d-times differenced series, fitted by least squares — refitted on a sliding window of recent
//! observations; and a resource→performance table learned online.

use crate::MetaError;

/// ARIMA(p, d, 0) over the last `window` observations.
#[derive(Debug, Clone, PartialEq)]
pub struct Arima {
    pub p: usize,
    pub d: usize,
    pub window: usize,
    history: Vec<f64>,
}

fn difference(x: &[f64], d: usize) -> Vec<f64> {
    let mut v = x.to_vec();
    for _ in 0..d {
        v = v.windows(2).map(|w| w[1] - w[0]).collect();
    }
    v
}

/// Solves the normal equations `a x = b` (a symmetric positive semi-definite, n × n) by
/// Gaussian elimination with partial pivoting and a small ridge for rank-deficient windows.
fn solve(mut a: Vec<Vec<f64>>, mut b: Vec<f64>) -> Vec<f64> {
    let n = b.len();
    let scale = (0..n).map(|i| a[i][i].abs()).fold(0.0, f64::max).max(1e-12);
    for (i, row) in a.iter_mut().enumerate() {
        row[i] += 1e-9 * scale;
    }
    for col in 0..n {
        let pivot = (col..n).max_by(|&i, &j| a[i][col].abs().total_cmp(&a[j][col].abs())).unwrap_or(col);
        a.swap(col, pivot);
        b.swap(col, pivot);
        let p = a[col][col];
        if p.abs() < 1e-300 {
            continue;
        }
        let (upper, lower) = a.split_at_mut(col + 1);
        let pivot_row = &upper[col];
        for (k, row) in lower.iter_mut().enumerate() {
            let f = row[col] / p;
            row[col..].iter_mut().zip(&pivot_row[col..]).for_each(|(x, y)| *x -= f * y);
            b[col + 1 + k] -= f * b[col];
        }
    }
    let mut x = vec![0.0; n];
    for i in (0..n).rev() {
        let s: f64 = (i + 1..n).map(|j| a[i][j] * x[j]).sum();
        x[i] = if a[i][i].abs() < 1e-300 { 0.0 } else { (b[i] - s) / a[i][i] };
    }
    x
}

impl Arima {
    /// Refuses orders no window of `window` points can fit (it must hold 2·p + d + 1 points).
    pub fn new(p: usize, d: usize, window: usize) -> Result<Self, MetaError> {
        if p == 0 || d > 2 {
            return Err(MetaError::Config {
                field: "arima", reason: format!("order (p {p}, d {d}): p ≥ 1 and d ≤ 2")
            });
        }
        if window < 2 * p + d + 1 {
            return Err(MetaError::Config {
                field: "arima.window",
                reason: format!("{window} points cannot fit p = {p}, d = {d} (at least {} needed)", 2 * p + d + 1),
            });
        }
        Ok(Self { p, d, window, history: Vec::with_capacity(window) })
    }

    /// Adds an observation (a non-finite one is skipped: it never enters a fit).
    pub fn observe(&mut self, x: f64) {
        if !x.is_finite() {
            return;
        }
        if self.history.len() == self.window {
            self.history.remove(0);
        }
        self.history.push(x);
    }

    /// The fitted AR coefficients (intercept first, then lag 1 … p) on the current window, or
    /// `None` while the window is too short.
    pub fn coefficients(&self) -> Option<Vec<f64>> {
        let z = difference(&self.history, self.d);
        let p = self.p;
        if z.len() < 2 * p + 1 {
            return None;
        }
        let k = p + 1;
        let mut ata = vec![vec![0.0; k]; k];
        let mut atb = vec![0.0; k];
        for t in p..z.len() {
            let row: Vec<f64> = std::iter::once(1.0).chain((1..=p).map(|l| z[t - l])).collect();
            for i in 0..k {
                atb[i] += row[i] * z[t];
                for j in 0..k {
                    ata[i][j] += row[i] * row[j];
                }
            }
        }
        Some(solve(ata, atb))
    }

    /// The next observation's forecast; the last observation while the window is too short to
    /// fit (a random walk's forecast), `None` before any observation.
    pub fn forecast(&self) -> Option<f64> {
        let last = *self.history.last()?;
        let Some(c) = self.coefficients() else { return Some(last) };
        let z = difference(&self.history, self.d);
        let next_z = c[0] + (1..=self.p).map(|l| c[l] * z[z.len() - l]).sum::<f64>();
        // Undo the differencing: add the next difference back through each order.
        Some(match self.d {
            0 => next_z,
            1 => last + next_z,
            _ => {
                let n = self.history.len();
                let d1 = self.history[n - 1] - self.history[n - 2];
                last + d1 + next_z
            }
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use rand::{RngExt, SeedableRng};
    use rand_pcg::Pcg64Mcg;

    #[test]
    fn an_autoregression_is_recovered() {
        let mut rng = Pcg64Mcg::seed_from_u64(3);
        let mut m = Arima::new(2, 0, 2_000).unwrap();
        let (mut a, mut b) = (0.0, 0.0);
        for _ in 0..2_000 {
            let x = 1.0 + 0.6 * a - 0.3 * b + rng.random_range(-0.5..0.5);
            m.observe(x);
            (b, a) = (a, x);
        }
        let c = m.coefficients().unwrap();
        for (got, want) in c.iter().zip([1.0, 0.6, -0.3]) {
            assert!((got - want).abs() < 0.06, "{c:?}");
        }
    }

    #[test]
    fn it_forecasts_a_daily_cycle_with_a_trend_better_than_the_last_value() {
        let mut rng = Pcg64Mcg::seed_from_u64(8);
        let series: Vec<f64> = (0..600)
            .map(|t| {
                let t = t as f64;
                100.0 + 0.05 * t + 30.0 * (t * std::f64::consts::TAU / 96.0).sin() + rng.random_range(-2.0..2.0)
            })
            .collect();
        let mut m = Arima::new(4, 1, 192).unwrap();
        let (mut arima, mut naive) = (0.0, 0.0);
        for t in 0..series.len() - 1 {
            m.observe(series[t]);
            if t >= 200 {
                arima += (m.forecast().unwrap() - series[t + 1]).abs();
                naive += (series[t] - series[t + 1]).abs();
            }
        }
        // The noise alone costs a perfect forecast ~0.57 of the last value's error here;
        // ARIMA(4, 1, 0) measured 0.81 (seed 8).
        assert!(arima < 0.9 * naive, "mean absolute error {arima:.1} vs the last value's {naive:.1}");
    }

    #[test]
    fn short_windows_and_bad_orders_are_handled() {
        assert!(Arima::new(0, 1, 10).is_err());
        assert_eq!(
            Arima::new(3, 1, 6).unwrap_err().to_string(),
            "meta-learner arima.window: 6 points cannot fit p = 3, d = 1 (at least 8 needed)"
        );
        let mut m = Arima::new(1, 1, 10).unwrap();
        assert_eq!(m.forecast(), None);
        m.observe(5.0);
        m.observe(f64::NAN);
        assert_eq!(m.forecast(), Some(5.0), "the last value until a fit is possible; NaN skipped");
        for x in [6.0, 7.0, 8.0, 9.0, 10.0] {
            m.observe(x);
        }
        assert!((m.forecast().unwrap() - 11.0).abs() < 1e-6, "{:?}", m.forecast());
    }
}

/// TL+'s resource→performance table: the mean performance seen at each level of a resource
/// measure (e.g. latency / SLO against CPU utilisation), in equal-width bins over a range,
/// learned online. A bin never seen answers with the nearest bin that was.
#[derive(Debug, Clone, PartialEq)]
pub struct PerformanceTable {
    low: f64,
    high: f64,
    /// Per bin: observations and their mean.
    bins: Vec<(u64, f64)>,
}

impl PerformanceTable {
    pub fn new(low: f64, high: f64, bins: usize) -> Result<Self, MetaError> {
        if !(low.is_finite() && high.is_finite() && low < high) || bins == 0 {
            return Err(MetaError::Config {
                field: "performance_table",
                reason: format!("range [{low}, {high}) with {bins} bins"),
            });
        }
        Ok(Self { low, high, bins: vec![(0, 0.0); bins] })
    }

    fn bin(&self, x: f64) -> usize {
        let n = self.bins.len();
        (((x - self.low) / (self.high - self.low) * n as f64).floor().max(0.0) as usize).min(n - 1)
    }

    /// Records `performance` seen at `resource` (non-finite pairs are skipped).
    pub fn observe(&mut self, resource: f64, performance: f64) {
        if !(resource.is_finite() && performance.is_finite()) {
            return;
        }
        let b = self.bin(resource);
        let (n, mean) = &mut self.bins[b];
        *n += 1;
        *mean += (performance - *mean) / *n as f64;
    }

    /// The expected performance at `resource`; `None` before any observation.
    pub fn predict(&self, resource: f64) -> Option<f64> {
        if !resource.is_finite() {
            return None;
        }
        let b = self.bin(resource) as isize;
        (0..self.bins.len() as isize)
            .flat_map(|d| [b - d, b + d])
            .filter(|&i| i >= 0 && (i as usize) < self.bins.len())
            .map(|i| self.bins[i as usize])
            .find(|(n, _)| *n > 0)
            .map(|(_, mean)| mean)
    }
}

#[cfg(test)]
mod table_tests {
    use super::*;

    #[test]
    fn the_table_answers_with_the_mean_of_the_nearest_seen_level() {
        let mut t = PerformanceTable::new(0.0, 1.0, 10).unwrap();
        assert_eq!(t.predict(0.5), None);
        t.observe(0.31, 0.5);
        t.observe(0.39, 0.7);
        t.observe(0.92, 2.0);
        t.observe(f64::NAN, 9.0);
        assert!((t.predict(0.35).unwrap() - 0.6).abs() < 1e-12);
        assert_eq!(t.predict(0.1), Some(0.6), "nearest seen bin below");
        assert_eq!(t.predict(0.99), Some(2.0));
        assert_eq!(t.predict(7.0), Some(2.0), "beyond the range: the last bin");
        assert_eq!(t.predict(0.7), Some(2.0), "0.9 is nearer than 0.3");
        assert!(PerformanceTable::new(1.0, 1.0, 4).is_err());
    }
}

/// TL+'s two state features for one application, appended to the encoded observation: the
/// ARIMA forecast of the next interval's load as a relative change from the current load
/// (tanh-squashed like the state's `load_change`), and the SLO preservation the performance
/// table expects at the current CPU utilisation (1 before anything is known).
#[derive(Debug, Clone, PartialEq)]
pub struct TlPlusFeatures {
    arima: Arima,
    table: PerformanceTable,
}

/// The number of features [`TlPlusFeatures`] adds.
pub const TL_PLUS_FEATURES: usize = 2;

impl TlPlusFeatures {
    /// ARIMA(2, 1, 0) on the last 32 intervals; the table over CPU utilisation [0, 1.5) in 15 bins.
    pub fn new() -> Self {
        Self {
            arima: Arima::new(2, 1, 32).expect("ARIMA(2, 1, 0) fits a 32-point window"),
            table: PerformanceTable::new(0.0, 1.5, 15).expect("a valid range"),
        }
    }

    /// Records an interval — its arrival rate, CPU utilisation and SLO preservation — and
    /// returns the features for the state that follows it. With `learn` off the load history
    /// still grows (the forecast needs it) but the performance table learns nothing.
    pub fn observe(
        &mut self,
        arrival_rps: f64,
        cpu_utilisation: f64,
        slo_preservation: f64,
        learn: bool,
    ) -> [f32; TL_PLUS_FEATURES] {
        self.arima.observe(arrival_rps);
        if learn {
            self.table.observe(cpu_utilisation, slo_preservation);
        }
        self.features(arrival_rps, cpu_utilisation)
    }

    /// Starts a new episode: the load history restarts (a replayed day does not continue the
    /// last one); the performance table keeps what it learned.
    pub fn new_episode(&mut self) {
        self.arima.history.clear();
    }

    /// The features at the current load and utilisation, without recording anything.
    pub fn features(&self, arrival_rps: f64, cpu_utilisation: f64) -> [f32; TL_PLUS_FEATURES] {
        let change = match self.arima.forecast() {
            Some(f) if f.is_finite() && arrival_rps.is_finite() => ((f - arrival_rps) / arrival_rps.max(1e-3)).tanh(),
            _ => 0.0,
        };
        let performance = self.table.predict(cpu_utilisation).unwrap_or(1.0).clamp(0.0, 1.0);
        [change as f32, performance as f32]
    }
}

impl Default for TlPlusFeatures {
    fn default() -> Self {
        Self::new()
    }
}

#[cfg(test)]
mod tl_plus_tests {
    use super::*;

    #[test]
    fn tl_plus_features_forecast_a_rising_load_and_recall_performance() {
        let mut f = TlPlusFeatures::new();
        assert_eq!(f.features(10.0, 0.5), [0.0, 1.0], "nothing known yet");
        let mut last = [0.0; 2];
        for t in 0..20 {
            // Load rising 10 % an interval; the SLO slips when utilisation is high.
            let load = 10.0 * 1.1f64.powi(t);
            let util = if t % 2 == 0 { 0.4 } else { 0.95 };
            last = f.observe(load, util, if util > 0.9 { 0.6 } else { 1.0 }, true);
        }
        assert!(last[0] > 0.05 && last[0] < 0.2, "a rise of about 10 %: {last:?}");
        let load = 10.0 * 1.1f64.powi(19);
        assert!((f.features(load, 0.95)[1] - 0.6).abs() < 1e-6);
        assert!((f.features(load, 0.4)[1] - 1.0).abs() < 1e-6);
        assert!(f.features(f64::NAN, 0.4)[0] == 0.0);
        // Not learning: the table keeps what it knew.
        f.observe(load, 0.4, 0.1, false);
        assert!((f.features(load, 0.4)[1] - 1.0).abs() < 1e-6);
    }
}
