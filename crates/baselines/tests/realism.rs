//! Control costs time in the simulator, as in a cluster: HPA driving generated apps loses SLO
//! intervals when its metrics are older or its pods start slower, and a smaller cluster leaves
//! pods pending longer. Same seed, same arrivals: only the knob differs.

use std::sync::Arc;

use aware_baselines::HorizontalPodAutoscaler;
use aware_core::{Cluster, Profile, Recommender};
use aware_sim::{AppSpec, SimCluster, SimConfig, Trace, generate_apps};

const APPS: usize = 8;
const STEPS: usize = 480;
const SEEDS: [u64; 4] = [1, 2, 3, 4];

/// The seed's apps, each under load steps of its own mean rate (×1, ×3, ×1, ×2.5, ×1, ×4 for
/// ten minutes each): every rise is a scale-up race HPA runs against its lag and start-up.
fn workload(seed: u64) -> (Vec<AppSpec>, Vec<Arc<Trace>>) {
    let apps = generate_apps(APPS, seed, 86_400.0);
    let traces = apps
        .iter()
        .map(|a| {
            let m = a.load.mean_rps;
            let rates = [1.0, 3.0, 1.0, 2.5, 1.0, 4.0].iter().map(|f| f * m).collect();
            Arc::new(Trace { name: a.name.clone(), interval_s: 600.0, rates })
        })
        .collect();
    (apps, traces)
}

/// (SLO-violating app-intervals, pending pod-seconds) of HPA on the seed's apps.
fn run_hpa(seed: u64, config: SimConfig) -> (u32, f64) {
    let (apps, traces) = workload(seed);
    let mut c = SimCluster::new(apps, traces, config, seed);
    let profile = Profile::default();
    let mut hpas: Vec<HorizontalPodAutoscaler> =
        (0..APPS).map(|_| HorizontalPodAutoscaler::from_profile(&profile)).collect();
    let (mut violations, mut pending) = (0, 0.0);
    for _ in 0..STEPS {
        for (a, hpa) in hpas.iter_mut().enumerate() {
            let obs = c.observe(a).unwrap();
            let rec = hpa.recommend(&obs).unwrap();
            c.apply(a, &rec).unwrap();
        }
        c.advance().unwrap();
        for a in 0..APPS {
            let st = c.stats(a);
            violations += st.slo_violated as u32;
            pending += st.pending_seconds;
        }
    }
    (violations, pending)
}

#[test]
fn doubling_the_metrics_lag_never_lowers_hpa_slo_violations() {
    for seed in SEEDS {
        let base = SimConfig::default();
        let (fresh, _) = run_hpa(seed, base.clone());
        let (stale, _) = run_hpa(seed, SimConfig { metrics_lag_s: 2.0 * base.metrics_lag_s, ..base.clone() });
        assert!(stale >= fresh, "seed {seed}: lag ×2 gave {stale} violating intervals, fewer than {fresh}");
    }
}

#[test]
fn doubling_the_scrape_interval_never_lowers_hpa_slo_violations() {
    for seed in SEEDS {
        let base = SimConfig::default();
        let (fast, _) = run_hpa(seed, base.clone());
        let (slow, _) = run_hpa(seed, SimConfig { scrape_interval_s: 2.0 * base.scrape_interval_s, ..base.clone() });
        assert!(slow >= fast, "seed {seed}: scrape ×2 gave {slow} violating intervals, fewer than {fast}");
    }
}

#[test]
fn doubling_the_startup_delay_never_lowers_hpa_slo_violations() {
    for seed in SEEDS {
        let base = SimConfig::default();
        let (quick, _) = run_hpa(seed, base.clone());
        let (slow, _) = run_hpa(seed, SimConfig { startup_delay_s: 2.0 * base.startup_delay_s, ..base.clone() });
        assert!(slow >= quick, "seed {seed}: start-up ×2 gave {slow} violating intervals, fewer than {quick}");
    }
}

#[test]
fn halving_the_nodes_never_lowers_pending_pod_time() {
    for seed in SEEDS {
        // Small nodes, so that the fleet spans several.
        let small = SimConfig { node_cores: 4.0, node_memory_bytes: 16 << 30, ..SimConfig::default() };
        let (apps, traces) = workload(seed);
        let nodes = SimCluster::new(apps, traces, small.clone(), seed).node_count();
        let (_, full) = run_hpa(seed, SimConfig { nodes: Some(nodes), ..small.clone() });
        let (_, half) = run_hpa(seed, SimConfig { nodes: Some(nodes.div_ceil(2)), ..small.clone() });
        assert!(half >= full, "seed {seed}: {half} pending pod-seconds on half the nodes, fewer than {full}");
        assert!(half > 0.0, "seed {seed}: half the nodes ({}) never left a pod pending", nodes.div_ceil(2));
    }
}

/// Prints the figures behind the assertions (`--ignored --nocapture`).
#[test]
#[ignore]
fn print_realism_figures() {
    for seed in SEEDS {
        let base = SimConfig::default();
        let small = SimConfig { node_cores: 4.0, node_memory_bytes: 16 << 30, ..SimConfig::default() };
        let (apps, traces) = workload(seed);
        let n = SimCluster::new(apps, traces, small.clone(), seed).node_count();
        eprintln!(
            "seed {seed}: default {:?} lag×2 {:?} scrape×2 {:?} startup×2 {:?} nodes {n} {:?} half {:?}",
            run_hpa(seed, base.clone()),
            run_hpa(seed, SimConfig { metrics_lag_s: 30.0, ..base.clone() }),
            run_hpa(seed, SimConfig { scrape_interval_s: 30.0, ..base.clone() }),
            run_hpa(seed, SimConfig { startup_delay_s: 60.0, ..base.clone() }),
            run_hpa(seed, SimConfig { nodes: Some(n), ..small.clone() }),
            run_hpa(seed, SimConfig { nodes: Some(n.div_ceil(2)), ..small.clone() }),
        );
    }
}
