//! `aware bench sim` without the CLI's dependencies: `cargo run --release -p aware-sim --example
//! bench_probe -- APPS STEPS` prints the median app-steps/s of five repeats (and with `observe`).
use aware_core::Cluster;
use aware_sim::{SimCluster, SimConfig, generate_apps};
use std::time::Instant;
fn main() {
    let n: usize = std::env::args().nth(1).and_then(|s| s.parse().ok()).unwrap_or(1000);
    let steps: usize = std::env::args().nth(2).and_then(|s| s.parse().ok()).unwrap_or(100);
    let t = Instant::now();
    let apps = generate_apps(n, 1, 86_400.0);
    let mut c = SimCluster::new(apps, vec![], SimConfig::default(), 1);
    eprintln!("build {:.2}s nodes {}", t.elapsed().as_secs_f64(), c.node_count());
    for _ in 0..5 {
        c.advance().unwrap();
    }
    let mut times = Vec::new();
    for _ in 0..5 {
        let t = Instant::now();
        for _ in 0..steps {
            c.advance().unwrap();
        }
        times.push(t.elapsed().as_secs_f64());
    }
    times.sort_by(f64::total_cmp);
    let med = times[2];
    let over = (0..n).filter(|&a| c.stats(a).overloaded).count();
    eprintln!("overloaded now: {over} of {n}");
    println!("apps {n} steps {steps}: median {:.0} app-steps/s", (n * steps) as f64 / med);
    let t = Instant::now();
    for _ in 0..steps {
        c.advance().unwrap();
        for a in 0..n {
            std::hint::black_box(c.observe(a).unwrap());
        }
    }
    println!("with observe {:.0} app-steps/s", (n * steps) as f64 / t.elapsed().as_secs_f64());
}
