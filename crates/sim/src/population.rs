//! Application populations calibrated to published production traces.
//!
//! Each population draws, per app, the chain of segments, how much load it gets and how that
//! load moves (daily and weekly cycles, trend, bursts). App `i` depends only on
//! `(seed, i, population)`; drawing one app costs a few microseconds, so 1,000 apps take
//! milliseconds and 1,000,000 a few seconds.
//!
//! # `microservices` (the default)
//!
//! Long-running services, sized like the Alibaba 2021 microservices trace (Luo et al., "An
//! In-Depth Study of Microservice Call Graph and Runtime Performance", IEEE TPDS 2022 / SoCC'21:
//! tens of instances per service on average — the reviews we calibrate against quote ~28–69 —
//! with a heavy tail of services running hundreds). What is drawn is the app's *peak replica
//! need*: CPU cores at its busiest daily peak over the reference utilisation (0.5 of a 1-core
//! request), log-normal with median [`MICRO_MEDIAN_PEAK_REPLICAS`] and log-spread
//! [`MICRO_SIGMA`], clamped to [[`MICRO_MIN_PEAK_REPLICAS`], [`MICRO_MAX_PEAK_REPLICAS`]]; the
//! arrival rate follows from the chain's CPU work per request. What it reproduces (measured on
//! 20,000 apps; `tests/population.rs` checks these on several seeds):
//!
//! | figure | value |
//! | --- | --- |
//! | median `peak_replicas` | 9 |
//! | apps with `peak_replicas` ≥ 10 | 48 % |
//! | apps with `peak_replicas` ≥ 50 | 17.5 % |
//! | largest `peak_replicas` | 1,000 (the clamp) |
//! | mean `peak_replicas` / mean `mean_replicas` | 42.8 / 27.7 (Alibaba: ~28–69 instances per service) |
//! | apps needing 1 replica at peak | 13 % |
//!
//! Load shape: a daily cycle of relative amplitude 0.2–0.6 whose phase is shared by the fleet
//! (one user base) with a 2-hour spread, a weekly cycle of amplitude 0–0.15, a trend of −1 % to
//! +2 % a day, and 0–1 bursts an hour adding 0.2–1.2× the load (decaying over 1–10 minutes).
//!
//! # `serverless`
//!
//! Functions with the Azure Functions 2019 invocation-rate distribution (Shahrad et al.,
//! "Serverless in the Wild", USENIX ATC'20, Fig. 5a: 45 % of applications are invoked at most
//! once per hour on average, 81 % at most once per minute, and rates span eight orders of
//! magnitude). The mean rate is log-normal, fitted through those two points:
//! `ln r ~ N(`[`SERVERLESS_LN_MEDIAN`]`, `[`SERVERLESS_SIGMA`]`²)` (r in requests/s), clamped to
//! [10⁻⁶, 10⁴]/s and to at most [`MICRO_MAX_PEAK_REPLICAS`] replicas at peak. Reproduced
//! (20,000 apps, seed 11): 44.8 % of apps ≤ 1/hour, 80.8 % ≤ 1/minute, 3.0 % ≥ 1/s, rates from
//! 10⁻⁶ to 2.6·10³/s (nine orders of magnitude), median `peak_replicas` 1, largest 589.
//! Load shape: daily amplitude 0–0.8 (timer-triggered functions are flat), 0–2 bursts an hour
//! adding up to 0.2–2× the load, decaying over 30 s–5 minutes.
//!
//! Poisson arrival noise is added on top of every rate, synthetic or replayed
//! ([`crate::load::LoadState::arrivals`]).

use aware_core::Population;
use rand::RngExt;
use rand_distr::{Distribution, LogNormal, Normal};
use rand_pcg::Pcg64Mcg;

use crate::load::SyntheticLoad;

/// Median of the peak replica need of a microservice (at 50 % of one core).
pub const MICRO_MEDIAN_PEAK_REPLICAS: f64 = 8.0;
/// Log-spread of the peak replica need.
pub const MICRO_SIGMA: f64 = 1.9;
pub const MICRO_MIN_PEAK_REPLICAS: f64 = 0.2;
/// Largest peak replica need drawn (either population).
pub const MICRO_MAX_PEAK_REPLICAS: f64 = 1000.0;

/// ln of the median serverless invocation rate (requests/s): e^−7.68 ≈ 4.6·10⁻⁴/s ≈ 1.7/hour.
/// Solves P(r ≤ 1/3600) = 0.45 and P(r ≤ 1/60) = 0.81 for a log-normal:
/// σ = ln(60) / (z₀.₈₁ − z₀.₄₅) = 4.094 / (0.8779 + 0.1257), μ = ln(1/3600) − z₀.₄₅·σ.
pub const SERVERLESS_LN_MEDIAN: f64 = -7.677;
pub const SERVERLESS_SIGMA: f64 = 4.080;
const SERVERLESS_MIN_RPS: f64 = 1e-6;
const SERVERLESS_MAX_RPS: f64 = 1e4;

/// The fleet's shared daily phase for `seed`: every app of a population peaks near it.
fn fleet_phase(seed: u64, stream: u64) -> f64 {
    let u = crate::app::stream_seed(seed, u64::MAX, stream) >> 11;
    u as f64 / (1u64 << 53) as f64 * std::f64::consts::TAU
}

/// Daily phase with a spread of `spread_h` hours around the fleet's.
fn phase(rng: &mut Pcg64Mcg, seed: u64, stream: u64, spread_h: f64) -> f64 {
    let jitter = Normal::new(0.0, spread_h / 24.0 * std::f64::consts::TAU).expect("finite spread");
    (fleet_phase(seed, stream) + jitter.sample(rng)).rem_euclid(std::f64::consts::TAU)
}

const STREAM_DAILY: u64 = 101;
const STREAM_WEEKLY: u64 = 102;

/// Draws the load of one app of `population` whose chain does `cpu_s` core-seconds of work per
/// request; `day_s` is the length of a simulated day. `rng` is the app's own stream.
pub fn draw_load(population: Population, rng: &mut Pcg64Mcg, seed: u64, cpu_s: f64, day_s: f64) -> SyntheticLoad {
    match population {
        Population::Serverless => {
            let diurnal_amplitude = rng.random_range(0.0..0.8);
            let weekly_amplitude = rng.random_range(0.0..0.1);
            let rate = LogNormal::new(SERVERLESS_LN_MEDIAN, SERVERLESS_SIGMA).expect("valid lognormal").sample(rng);
            let peak_factor = (1.0 + diurnal_amplitude) * (1.0 + weekly_amplitude);
            let most = MICRO_MAX_PEAK_REPLICAS * crate::app::REFERENCE_UTILISATION / cpu_s / peak_factor;
            SyntheticLoad {
                mean_rps: rate.clamp(SERVERLESS_MIN_RPS, SERVERLESS_MAX_RPS).min(most),
                diurnal_amplitude,
                diurnal_phase: phase(rng, seed, STREAM_DAILY, 3.0),
                day_s,
                bursts_per_hour: rng.random_range(0.0..2.0),
                burst_peak: rng.random_range(0.2..2.0),
                burst_decay_s: rng.random_range(30.0..300.0),
                weekly_amplitude,
                weekly_phase: phase(rng, seed, STREAM_WEEKLY, 12.0),
                trend_per_day: 0.0,
            }
        }
        // Microservices, and any population added later until it has its own model.
        _ => {
            let diurnal_amplitude = rng.random_range(0.2..0.6);
            let weekly_amplitude = rng.random_range(0.0..0.15);
            let trend_per_day = rng.random_range(-0.01..0.02);
            let need = LogNormal::new(MICRO_MEDIAN_PEAK_REPLICAS.ln(), MICRO_SIGMA)
                .expect("valid lognormal")
                .sample(rng)
                .clamp(MICRO_MIN_PEAK_REPLICAS, MICRO_MAX_PEAK_REPLICAS);
            let mut load = SyntheticLoad {
                mean_rps: 1.0,
                diurnal_amplitude,
                diurnal_phase: phase(rng, seed, STREAM_DAILY, 2.0),
                day_s,
                bursts_per_hour: rng.random_range(0.0..1.0),
                burst_peak: rng.random_range(0.2..1.2),
                burst_decay_s: rng.random_range(60.0..600.0),
                weekly_amplitude,
                weekly_phase: phase(rng, seed, STREAM_WEEKLY, 12.0),
                trend_per_day,
            };
            // Peak cores = need × reference utilisation; the mean follows from the peak factor.
            let peak_rps = need * crate::app::REFERENCE_UTILISATION / cpu_s;
            load.mean_rps = peak_rps / load.peak_rps();
            load
        }
    }
}
