//! `aware validate-sim` without the CLI's dependencies, one line per case:
//! `cargo run --release -p aware-sim --example validate_probe -- [random|mmc|fixed] SEED`.
use aware_sim::validate;
fn main() {
    let which = std::env::args().nth(1).unwrap_or_default();
    let seed: u64 = std::env::args().nth(2).and_then(|s| s.parse().ok()).unwrap_or(1);
    let t = std::time::Instant::now();
    match which.as_str() {
        "mmc" => {
            let r = validate::run_mmc(seed);
            for c in &r.cases {
                println!(
                    "c={:>2} rho={:.2} mu={:.1} fast {:.1}/{:.1} des {:.1}/{:.1} exact {:.1}/{:.1} {}",
                    c.servers,
                    c.utilisation,
                    c.service_rate,
                    c.fast_mean_ms,
                    c.fast_p99_ms,
                    c.des_mean_ms,
                    c.des_p99_ms,
                    c.analytic_mean_ms,
                    c.analytic_p99_ms,
                    c.pass
                );
            }
            println!("pass {}", r.pass);
        }
        "fixed" => {
            let r = validate::run_fixed(seed);
            for c in &r.cases {
                println!(
                    "{:<18} oom {}/{} fast {:?}/{:?} thr {:.2} drop {:.3} | des {:?}/{:?} thr {:.2} drop {:.3} {}",
                    c.name,
                    c.fast.oom_kills,
                    c.discrete_event.oom_kills,
                    c.fast.latency_mean_ms.map(|v| v as i64),
                    c.fast.latency_p99_ms.map(|v| v as i64),
                    c.fast.throughput_rps,
                    c.fast.dropped_fraction,
                    c.discrete_event.latency_mean_ms.map(|v| v as i64),
                    c.discrete_event.latency_p99_ms.map(|v| v as i64),
                    c.discrete_event.throughput_rps,
                    c.discrete_event.dropped_fraction,
                    c.pass
                );
            }
        }
        _ => {
            let r = validate::run_random(seed);
            for c in &r.cases {
                println!(
                    "#{:<2} r{} c{:.2} x{:.2} steps{} scale{:?} served {:.3}/{:.3} drop {:.3}/{:.3} p99 {:?}/{:?} oom {}/{} {}",
                    c.case.index,
                    c.case.replicas,
                    c.case.cpu_millicores as f64 / 1000.0,
                    c.case.load_factor,
                    c.case.measure_steps,
                    c.case.scale_event,
                    c.fast.served_fraction,
                    c.discrete_event.served_fraction,
                    c.fast.dropped_fraction,
                    c.discrete_event.dropped_fraction,
                    c.fast.latency_p99_ms.map(|v| v as i64),
                    c.discrete_event.latency_p99_ms.map(|v| v as i64),
                    c.fast.oom_kills,
                    c.discrete_event.oom_kills,
                    c.pass
                );
            }
            println!("pass {}", r.pass);
        }
    }
    eprintln!("{:.1}s", t.elapsed().as_secs_f64());
}
