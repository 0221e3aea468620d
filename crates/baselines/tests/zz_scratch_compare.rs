// SCRATCH (not committed): the CLI runner's scoring loop for hpa / static-peak / mpa.
use aware_baselines::{HorizontalPodAutoscaler, MultidimPodAutoscaler};
use aware_core::{Cluster, ContainerResources, FixedRecommender, Profile, Recommendation, Recommender, Resources};
use aware_sim::{CONTAINER, SimCluster, SimConfig, generate_apps};

#[test]
#[ignore]
fn scratch_compare() {
    let apps_n: usize = std::env::var("APPS").ok().and_then(|v| v.parse().ok()).unwrap_or(40);
    let steps: usize = std::env::var("STEPS").ok().and_then(|v| v.parse().ok()).unwrap_or(1920);
    let seed: u64 = std::env::var("SEED").ok().and_then(|v| v.parse().ok()).unwrap_or(1);
    let apps = generate_apps(apps_n, seed, 86_400.0);
    let profile = Profile::default();
    for policy in ["hpa", "static-peak", "mpa"] {
        let mut cluster = SimCluster::new(apps.clone(), vec![], SimConfig::default(), seed);
        let mut recs: Vec<Box<dyn Recommender>> = apps
            .iter()
            .map(|a| {
                let p = profile.for_app(&a.bounds);
                let r: Box<dyn Recommender> = match policy {
                    "hpa" => Box::new(HorizontalPodAutoscaler::from_profile(&p)),
                    "mpa" => Box::new(MultidimPodAutoscaler::from_profile(&p, false)),
                    _ => Box::new(FixedRecommender {
                        name: "static-peak".into(),
                        recommendation: Recommendation {
                            replicas: a.replicas_for(a.peak_rps, 0.5).clamp(p.bounds.min_replicas, p.bounds.max_replicas),
                            containers: vec![ContainerResources::guaranteed(
                                CONTAINER,
                                Resources::new(a.reference.cpu_millicores, a.reference.memory_bytes),
                            )],
                        },
                    }),
                };
                r
            })
            .collect();
        cluster.advance().unwrap();
        let n = apps.len();
        let (mut util, mut util_n) = (vec![0.0; n], vec![0u64; n]);
        let mut viol = vec![0u64; n];
        let mut at_cap = 0u64;
        let mut core_s = 0.0;
        let mut dropped = 0.0;
        for _ in 0..steps {
            for i in 0..n {
                let obs = cluster.observe(i).unwrap();
                if let Ok(r) = recs[i].recommend(&obs) {
                    if r.replicas >= apps[i].bounds.max_replicas {
                        at_cap += 1;
                    }
                    cluster.apply(i, &r).unwrap();
                }
            }
            cluster.advance().unwrap();
            for i in 0..n {
                let st = cluster.stats(i);
                if let Some(u) = st.cpu_utilisation {
                    util[i] += u;
                    util_n[i] += 1;
                }
                viol[i] += st.slo_violated as u64;
                core_s += st.core_seconds;
                dropped += st.dropped;
            }
        }
        let cpu = (0..n).map(|i| util[i] / util_n[i].max(1) as f64).sum::<f64>() / n as f64;
        let v: u64 = viol.iter().sum();
        let worst: Vec<(usize, u64)> = {
            let mut w: Vec<(usize, u64)> = viol.iter().copied().enumerate().filter(|x| x.1 > 0).collect();
            w.sort_by_key(|x| std::cmp::Reverse(x.1));
            w.into_iter().take(6).collect()
        };
        eprintln!(
            "{policy:12} cpu_util {cpu:.3} violations {v} ({:.2}%) core_s {core_s:.0} dropped {dropped:.0} at_cap {at_cap} worst {worst:?}",
            100.0 * v as f64 / (n * steps) as f64
        );
    }
}
