//! Populations reproduce the published figures they are calibrated to (module docs of
//! `aware_sim::population`), on several seeds, and sizing keeps every app off its replica cap.

use std::time::Instant;

use aware_core::Population;
use aware_sim::{generate_app_in, generate_population};

fn fraction(xs: &[f64], pred: impl Fn(f64) -> bool) -> f64 {
    xs.iter().filter(|x| pred(**x)).count() as f64 / xs.len() as f64
}

fn median(mut xs: Vec<f64>) -> f64 {
    xs.sort_by(f64::total_cmp);
    xs[xs.len() / 2]
}

fn mean(xs: &[f64]) -> f64 {
    xs.iter().sum::<f64>() / xs.len() as f64
}

/// The issue-19 acceptance of `generate --apps 1000 --json`, on seeds beyond the default.
#[test]
fn microservices_replica_needs_meet_the_acceptance_on_several_seeds() {
    for seed in [1, 2, 3, 7, 42, 1234, 99_999, u64::MAX] {
        let apps = generate_population(1000, seed, 86_400.0, Population::Microservices);
        let peak: Vec<f64> = apps.iter().map(|a| a.peak_replicas as f64).collect();
        let med = median(peak.clone());
        let ten = fraction(&peak, |p| p >= 10.0);
        let fifty = fraction(&peak, |p| p >= 50.0);
        assert!(med >= 3.0, "seed {seed}: median peak_replicas {med}");
        assert!(ten >= 0.25, "seed {seed}: {ten} of apps ≥ 10");
        assert!(fifty >= 0.05, "seed {seed}: {fifty} of apps ≥ 50");
        let max = peak.iter().copied().fold(0.0, f64::max);
        assert!((200.0..=1000.0).contains(&max), "seed {seed}: largest peak {max} (1 to several hundred)");
        assert!(peak.contains(&1.0), "seed {seed}: some apps need one replica");
        for a in &apps {
            assert!(a.bounds.max_replicas >= 4 * a.peak_replicas, "{}: capped at peak", a.name);
        }
    }
}

/// The figures the module docs print for `microservices` (20,000 apps).
#[test]
fn microservices_reproduce_their_documented_figures() {
    for seed in [11, 12] {
        let apps = generate_population(20_000, seed, 86_400.0, Population::Microservices);
        let peak: Vec<f64> = apps.iter().map(|a| a.peak_replicas as f64).collect();
        let mean_r: Vec<f64> = apps.iter().map(|a| a.mean_replicas as f64).collect();
        let m = median(peak.clone());
        assert!((8.0..=10.0).contains(&m), "median {m}");
        let f = fraction(&peak, |p| p >= 10.0);
        assert!((0.43..=0.51).contains(&f), "≥ 10: {f}");
        let f = fraction(&peak, |p| p >= 50.0);
        assert!((0.15..=0.20).contains(&f), "≥ 50: {f}");
        let f = fraction(&peak, |p| p == 1.0);
        assert!((0.11..=0.16).contains(&f), "one replica: {f}");
        // Alibaba 2021: ~28–69 instances per service on average.
        let (mp, mm) = (mean(&peak), mean(&mean_r));
        assert!((36.0..=50.0).contains(&mp) && (24.0..=33.0).contains(&mm), "means {mp} {mm}");
        // Daily and weekly cycles, trend, bursts: every app moves.
        for a in &apps[..200] {
            let l = &a.load;
            assert!((0.2..0.6).contains(&l.diurnal_amplitude) && l.weekly_amplitude < 0.15);
            assert!((-0.01..0.02).contains(&l.trend_per_day));
        }
        let bursty = apps.iter().filter(|a| a.load.bursts_per_hour > 0.1).count();
        assert!(bursty > apps.len() * 8 / 10);
    }
}

/// Azure Functions 2019: 45 % of apps ≤ 1 invocation/hour, 81 % ≤ 1/minute, eight orders of
/// magnitude between the idlest and the busiest.
#[test]
fn serverless_reproduces_the_azure_invocation_rate_distribution() {
    for seed in [1, 5, 77] {
        let apps = generate_population(20_000, seed, 86_400.0, Population::Serverless);
        let rate: Vec<f64> = apps.iter().map(|a| a.mean_rps).collect();
        let hour = fraction(&rate, |r| r <= 1.0 / 3600.0);
        let minute = fraction(&rate, |r| r <= 1.0 / 60.0);
        let busy = fraction(&rate, |r| r >= 1.0);
        assert!((0.43..=0.47).contains(&hour), "seed {seed}: ≤ 1/hour {hour}");
        assert!((0.79..=0.83).contains(&minute), "seed {seed}: ≤ 1/minute {minute}");
        assert!((0.02..=0.04).contains(&busy), "seed {seed}: ≥ 1/s {busy}");
        let lo = rate.iter().copied().fold(f64::INFINITY, f64::min);
        let hi = rate.iter().copied().fold(0.0, f64::max);
        assert!(hi / lo >= 1e8, "seed {seed}: span {lo:e}..{hi:e}");
        let peak: Vec<f64> = apps.iter().map(|a| a.peak_replicas as f64).collect();
        assert_eq!(median(peak.clone()), 1.0);
        assert!(peak.iter().copied().fold(0.0, f64::max) >= 50.0, "a long tail of busy functions");
    }
}

/// The fleet shares its daily phase (one user base): apps' peaks cluster in time.
#[test]
fn a_fleet_peaks_together() {
    let apps = generate_population(2000, 3, 86_400.0, Population::Microservices);
    let (s, c) =
        apps.iter().fold((0.0, 0.0), |(s, c), a| (s + a.load.diurnal_phase.sin(), c + a.load.diurnal_phase.cos()));
    let resultant = (s * s + c * c).sqrt() / apps.len() as f64;
    // A 2-hour spread on a 24-hour circle: mean resultant length exp(−σ²/2) ≈ 0.87 (uniform phases: ≈ 0).
    assert!(resultant > 0.8, "phases concentrated: {resultant}");
    let other = generate_population(2000, 4, 86_400.0, Population::Microservices);
    assert_ne!(apps[0].load.diurnal_phase, other[0].load.diurnal_phase);
}

/// Generation stays fast: 1,000 apps well under a second (debug build included), app `i` the
/// same alone as in a crowd.
#[test]
fn generation_is_fast_and_index_stable() {
    for population in Population::ALL {
        let t = Instant::now();
        let apps = generate_population(1000, 5, 86_400.0, population);
        assert!(t.elapsed().as_secs_f64() < 1.0, "{population}: {:?}", t.elapsed());
        assert_eq!(apps[777], generate_app_in(777, 5, 86_400.0, population));
    }
}

/// 1,000,000 apps are feasible (`cargo test --release -- --ignored million`).
#[test]
#[ignore = "slow in debug builds; run with --release"]
fn a_million_apps_generate_in_seconds() {
    let t = Instant::now();
    let apps = generate_population(1_000_000, 1, 86_400.0, Population::Microservices);
    let took = t.elapsed().as_secs_f64();
    eprintln!("1,000,000 apps in {took:.2} s");
    assert_eq!(apps.len(), 1_000_000);
    assert!(took < 60.0, "{took} s");
}
