//! Populations reproduce the published figures they are calibrated to (crate docs of
//! `aware_sim::population`), on several seeds, and sizing keeps every app off its replica cap.

use std::time::Instant;

use aware_sim::app::SLO_UTILISATION;
use aware_sim::{Population, generate_population};

fn fraction(xs: &[f64], pred: impl Fn(f64) -> bool) -> f64 {
    xs.iter().filter(|x| pred(**x)).count() as f64 / xs.len() as f64
}

fn median(mut xs: Vec<f64>) -> f64 {
    xs.sort_by(f64::total_cmp);
    xs[xs.len() / 2]
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
    }
}

#[test]
fn print_population_figures() {
    for population in Population::ALL {
        let apps = generate_population(20_000, 11, 86_400.0, population);
        let peak: Vec<f64> = apps.iter().map(|a| a.peak_replicas as f64).collect();
        let mean_r: Vec<f64> = apps.iter().map(|a| a.mean_replicas as f64).collect();
        let rate: Vec<f64> = apps.iter().map(|a| a.mean_rps).collect();
        eprintln!(
            "{population}: median peak {} ≥10 {:.3} ≥50 {:.3} max {} mean peak {:.1} mean mean {:.1} one {:.3} ≤1/h {:.3} ≤1/min {:.3} ≥1/s {:.3} min rate {:e} max rate {:e}",
            median(peak.clone()),
            fraction(&peak, |p| p >= 10.0),
            fraction(&peak, |p| p >= 50.0),
            peak.iter().copied().fold(0.0, f64::max),
            peak.iter().sum::<f64>() / peak.len() as f64,
            mean_r.iter().sum::<f64>() / mean_r.len() as f64,
            fraction(&peak, |p| p == 1.0),
            fraction(&rate, |r| r <= 1.0 / 3600.0),
            fraction(&rate, |r| r <= 1.0 / 60.0),
            fraction(&rate, |r| r >= 1.0),
            rate.iter().copied().fold(f64::INFINITY, f64::min),
            rate.iter().copied().fold(0.0, f64::max),
        );
        let slo: Vec<f64> = apps.iter().map(|a| a.slo_p99_ms).collect();
        eprintln!("slo median {} ms, SLO_UTILISATION {SLO_UTILISATION}", median(slo));
    }
    let t = Instant::now();
    let apps = generate_population(1000, 5, 86_400.0, Population::Microservices);
    eprintln!("1000 apps in {:?}", t.elapsed());
    drop(apps);
}
