//! Invariants of the rule-based recommenders, over random inputs.

use std::collections::BTreeMap;

use aware_baselines::estimator::PodResourceRecommender;
use aware_baselines::model::AggregateContainerState;
use aware_baselines::{
    AdditiveIncreaseMultiplicativeDecrease, HorizontalPodAutoscaler, MultidimPodAutoscaler, ThresholdStepScaling,
};
use aware_baselines::{
    MetricSample, MetricSpec, MetricTarget, PodMetrics, PodState, ReplicaCalculator, ResourceName, UnlistedPodMetrics,
    pod_view_with, replica_calculator,
};
use aware_core::{
    ContainerObservation, ContainerResources, Observation, PodObservation, PodPhase, Profile, Recommender, Resources,
};
use proptest::prelude::*;

fn observation(usages: &[f64], replicas: u32, cpu_m: u64, mem: u64, p99: Option<f64>, t: f64) -> Observation {
    let template = ContainerResources::guaranteed("app", Resources::new(cpu_m, mem));
    Observation {
        app: "a".into(),
        time_s: t,
        interval_s: 15.0,
        desired_replicas: replicas,
        template: template.clone(),
        pods: usages
            .iter()
            .enumerate()
            .map(|(i, &u)| PodObservation {
                name: format!("p{i}"),
                phase: PodPhase::Ready,
                node: Some("n".into()),
                created_at_s: 0.0,
                ready_since_s: Some(30.0),
                cpu_usage_cores: Some(u * cpu_m as f64 / 1000.0),
                memory_working_set_bytes: Some(0.5 * mem as f64),
                resources: template.clone(),
                allocated: None,
                restarts: 0,
                oom_killed_at_bytes: None,
                deleting: false,
                custom_metrics: Default::default(),
                containers: Vec::new(),
                unschedulable: None,
            })
            .collect(),
        arrival_rate: 10.0,
        throughput: 10.0,
        latency_mean_ms: p99.map(|p| p / 3.0),
        latency_p99_ms: p99,
        dropped_requests: 0,
        oom_events: 0,
        io_utilisation: 0.0,
        network_utilisation: 0.0,
    }
}

fn profile(min: u32, max: u32) -> Profile {
    let mut p = Profile::default();
    p.bounds.min_replicas = min;
    p.bounds.max_replicas = max;
    p
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(200))]

    /// Every recommender's replicas stay within [min, max] and AIMD's resources within bounds,
    /// over sequences of random observations.
    #[test]
    fn recommendations_respect_bounds(
        min in 1u32..4, extra in 0u32..10, utils in prop::collection::vec(prop::collection::vec(0.0f64..1.0, 1..12), 1..20),
        p99 in prop::option::of(1.0f64..5000.0),
    ) {
        let p = profile(min, min + extra);
        let mut recs: Vec<Box<dyn Recommender>> = vec![
            Box::new(HorizontalPodAutoscaler::from_profile(&p)),
            Box::new(ThresholdStepScaling::from_profile(&p)),
            Box::new(MultidimPodAutoscaler::from_profile(&p, true)),
            Box::new(AdditiveIncreaseMultiplicativeDecrease::from_profile(&p, Some(200.0))),
        ];
        for rec in &mut recs {
            let mut replicas = min;
            for (t, u) in utils.iter().enumerate() {
                let obs = observation(u, replicas, 1000, 512 << 20, p99, 1000.0 + 15.0 * t as f64);
                let r = rec.recommend(&obs).unwrap();
                prop_assert!(r.replicas >= p.bounds.min_replicas && r.replicas <= p.bounds.max_replicas, "{}: {}", rec.name(), r.replicas);
                let l = r.containers[0].limits;
                prop_assert!(l.cpu_millicores >= p.bounds.min_cpu_millicores && l.cpu_millicores <= p.bounds.max_cpu_millicores);
                prop_assert!(l.memory_bytes >= p.bounds.min_memory_bytes() && l.memory_bytes <= p.bounds.max_memory_bytes());
                replicas = r.replicas;
            }
        }
    }

    /// With every pod ready and measured, a ratio inside the tolerance never changes the count.
    #[test]
    fn hpa_never_scales_within_tolerance(current in 1i32..30, target in 10i32..100, drift in -0.1f64..0.1, jitter in prop::collection::vec(-0.05f64..0.05, 30)) {
        let n = current as usize;
        let base = target as f64 / 100.0 * (1.0 + drift) * 1000.0;
        let mut levels: Vec<i64> = (0..n).map(|i| (base * (1.0 + jitter[i])).max(0.0) as i64).collect();
        // Re-centre so the truncated aggregate is exactly (1 + drift) × target.
        let total_wanted = (base * n as f64) as i64;
        let total: i64 = levels.iter().sum();
        levels[0] = (levels[0] + total_wanted - total).max(0);
        let utilisation = levels.iter().sum::<i64>() * 100 / (1000 * n as i64);
        let ratio = utilisation as f64 / target as f64;
        prop_assume!((0.9..=1.1).contains(&ratio));
        let pods: Vec<PodState> = (0..n).map(|i| PodState::single(format!("p{i}"), Some(1000))).collect();
        let samples: BTreeMap<String, MetricSample> = levels.iter().enumerate()
            .map(|(i, &v)| (format!("p{i}"), MetricSample { value_milli: v, timestamp_s: 1000.0, window_s: 15.0 })).collect();
        let r = ReplicaCalculator::default().resource_replicas(10_000.0, current, target, ResourceName::Cpu, None, &pods, &samples).unwrap();
        prop_assert_eq!(r.replicas, current);
    }

    /// The VPA target is monotone in usage: scaling every sample up never lowers it.
    #[test]
    fn vpa_target_monotone_in_usage(samples in prop::collection::vec(0.001f64..8.0, 1..200), k in 1.0f64..5.0) {
        let build = |scale: f64| {
            let mut s = AggregateContainerState::new(0.0);
            for (i, &c) in samples.iter().enumerate() {
                s.add_cpu_sample(c * scale, 1.0, 60.0 * i as f64);
                s.memory_peaks.add_sample(c * scale * 1e9, 1.0, 60.0 * i as f64);
            }
            PodResourceRecommender::default().recommend(&[&s])[0]
        };
        let (lo, hi) = (build(1.0), build(k));
        prop_assert!(hi.target.cpu_millicores >= lo.target.cpu_millicores);
        prop_assert!(hi.target.memory_bytes >= lo.target.memory_bytes);
        prop_assert!(lo.lower_bound.cpu_millicores <= lo.target.cpu_millicores && lo.target.cpu_millicores <= lo.upper_bound.cpu_millicores);
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(300))]

    /// AIMD never cuts memory below the largest working set (unless the profile's maximum is
    /// lower), whatever the usage, limits and targets.
    #[test]
    fn aimd_never_cuts_memory_below_the_working_set(
        ws_fraction in prop::collection::vec(0.0f64..1.0, 1..8), mem_mib in 64u64..8192, target in 0.05f64..1.0,
    ) {
        let mem = mem_mib << 20;
        let mut obs = observation(&vec![0.2; ws_fraction.len()], ws_fraction.len() as u32, 1000, mem, None, 100.0);
        for (p, f) in obs.pods.iter_mut().zip(&ws_fraction) {
            p.memory_working_set_bytes = Some(f * mem as f64);
        }
        let mut prof = Profile::default();
        prof.targets.memory_utilisation = target;
        prof.bounds.max_memory_mib = 1 << 20;
        let rec = AdditiveIncreaseMultiplicativeDecrease::from_profile(&prof, Some(100.0)).recommend(&obs).unwrap();
        let ws = ws_fraction.iter().fold(0.0f64, |a, f| a.max(f * mem as f64));
        prop_assert!(rec.containers[0].limits.memory_bytes as f64 >= ws, "{} < {ws}", rec.containers[0].limits.memory_bytes);
    }
}

/// Issue 19 "Input bugs": a MiB bound near `u64::MAX` made AIMD's MiB → bytes conversion
/// overflow and panic; it now saturates and clamps.
#[test]
fn aimd_mib_arithmetic_never_overflows() {
    let mut prof = Profile::default();
    prof.bounds.max_memory_mib = u64::MAX / 2;
    prof.bounds.memory_step_mib = u64::MAX / 3;
    let mut obs = observation(&[0.95], 1, 1000, 1 << 30, Some(10.0), 100.0);
    obs.oom_events = 1;
    let rec = AdditiveIncreaseMultiplicativeDecrease::from_profile(&prof, Some(100.0)).recommend(&obs).unwrap();
    assert!(rec.containers[0].limits.memory_bytes > 1 << 30, "grew after an OOM kill");
}

/// A working set of 500 MiB under a 600 MiB limit at an 0.9 target: a plain ×0.9 cut would give
/// 540 MiB, right at the edge; AIMD stops at 500 / 0.9 ≈ 555.6 MiB.
#[test]
fn aimd_memory_decrease_stops_above_the_working_set() {
    let mut obs = observation(&[0.2], 1, 1000, 600 << 20, None, 100.0);
    obs.pods[0].memory_working_set_bytes = Some((500u64 << 20) as f64);
    let mut prof = Profile::default();
    prof.targets.memory_utilisation = 0.9;
    let rec = AdditiveIncreaseMultiplicativeDecrease::from_profile(&prof, Some(100.0)).recommend(&obs).unwrap();
    let got = rec.containers[0].limits.memory_bytes;
    assert_eq!(got, ((500u64 << 20) as f64 / 0.9).round() as u64);
}

/// A pod of [`pod_view_samples_are_the_metrics_apis`]: name (of a few, so that some repeat),
/// phase, pod-level CPU and memory usage, and its containers' `(name, CPU, memory)` (none: one
/// container named after the template).
type RandomPod = (usize, usize, Option<f64>, Option<f64>, Vec<(usize, Option<f64>, Option<f64>)>);

fn random_pods() -> impl Strategy<Value = Vec<RandomPod>> {
    let usage = || prop::option::of(0.0f64..8.0);
    let container = (0usize..2, usage(), usage());
    prop::collection::vec((0usize..6, 0usize..4, usage(), usage(), prop::collection::vec(container, 0..3)), 0..10)
}

const CONTAINERS: [&str; 2] = ["app", "side"];

/// What the metrics API returns for one pod's usage of `resource` (milli-units).
fn milli(resource: ResourceName, cpu: Option<f64>, memory: Option<f64>) -> Option<i64> {
    let v = match resource {
        ResourceName::Cpu => cpu?,
        ResourceName::Memory => memory?,
    };
    Some((v * 1000.0).round() as i64)
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(300))]

    /// The samples the HPA's view holds are what upstream's metrics client reads
    /// (`resource_metric_info`) from the metrics API's response: every listed pod that is not
    /// pending, each container's usage, then the pods the observation does not list (CPU only),
    /// a later entry of a pod replacing an earlier one.
    #[test]
    fn pod_view_samples_are_the_metrics_apis(
        pods in random_pods(),
        unlisted in prop::collection::vec((0usize..6, prop::option::of(0.0f64..8.0)), 0..3),
        memory in any::<bool>(),
        targeted in prop::option::of(0usize..2),
    ) {
        let resource = if memory { ResourceName::Memory } else { ResourceName::Cpu };
        let template = ContainerResources::guaranteed("app", Resources::new(500, 256 << 20));
        let phases = [PodPhase::Pending, PodPhase::Starting, PodPhase::Ready, PodPhase::Failed];
        let mut obs = observation(&[], 1, 500, 256 << 20, None, 1000.0);
        obs.pods = pods.iter().map(|(name, phase, cpu, mem, containers)| PodObservation {
            name: format!("p{name}"),
            phase: phases[*phase],
            cpu_usage_cores: *cpu,
            memory_working_set_bytes: *mem,
            containers: containers.iter().map(|(c, cpu, mem)| ContainerObservation {
                name: CONTAINERS[*c].into(),
                requests: template.requests,
                limits: template.limits,
                cpu_usage_cores: *cpu,
                memory_working_set_bytes: *mem,
            }).collect(),
            ..observation(&[0.5], 1, 500, 256 << 20, None, 1000.0).pods.remove(0)
        }).collect();
        let unlisted: Vec<UnlistedPodMetrics> = unlisted.iter().map(|(name, cpu)| UnlistedPodMetrics {
            pod: format!("p{name}"),
            cpu_usage_cores: *cpu,
            custom_metrics: Default::default(),
        }).collect();
        let target = MetricTarget::Utilization(70);
        let metric = match targeted {
            Some(c) => MetricSpec::ContainerResource { resource, container: CONTAINERS[c].into(), target },
            None => MetricSpec::Resource { resource, target },
        };
        // The metrics API's response, pod by pod.
        let mut raw: BTreeMap<String, PodMetrics> = BTreeMap::new();
        for p in obs.pods.iter().filter(|p| p.phase != PodPhase::Pending) {
            let containers = if p.containers.is_empty() {
                vec![(obs.template.name.clone(), milli(resource, p.cpu_usage_cores, p.memory_working_set_bytes))]
            } else {
                p.containers.iter().map(|c| (c.name.clone(), milli(resource, c.cpu_usage_cores, c.memory_working_set_bytes))).collect()
            };
            raw.insert(p.name.clone(), PodMetrics { timestamp_s: obs.time_s, window_s: obs.interval_s, containers });
        }
        if resource == ResourceName::Cpu {
            for u in &unlisted {
                let containers = vec![(obs.template.name.clone(), milli(resource, u.cpu_usage_cores, None))];
                raw.insert(u.pod.clone(), PodMetrics { timestamp_s: obs.time_s, window_s: obs.interval_s, containers });
            }
        }
        let container = targeted.map(|c| CONTAINERS[c]);
        let expected = replica_calculator::resource_metric_info(&raw, container);
        prop_assert_eq!(pod_view_with(&obs, &metric, &unlisted).samples, expected);
    }

    /// Upstream's utilisation ratio sums usage and requests over the pods in both maps, looked up
    /// by name.
    #[test]
    fn utilisation_ratio_pairs_pods_by_name(
        metrics in prop::collection::btree_map(0usize..12, 0i64..5000, 0..10),
        requests in prop::collection::btree_map(0usize..12, 1i64..5000, 0..10),
        target in 1i32..150,
    ) {
        let named = |m: &BTreeMap<usize, i64>| m.iter().map(|(k, v)| (format!("p{k}"), *v)).collect::<BTreeMap<_, _>>();
        let (metrics, requests) = (named(&metrics), named(&requests));
        let both: Vec<(i64, i64)> = metrics.iter().filter_map(|(k, v)| requests.get(k).map(|r| (*v, *r))).collect();
        let got = replica_calculator::resource_utilisation_ratio(&metrics, &requests, target);
        if both.is_empty() {
            prop_assert!(got.is_err());
        } else {
            let (m, r) = both.iter().fold((0i64, 0i64), |(m, r), (a, b)| (m + a, r + b));
            let utilisation = (m * 100 / r) as i32;
            prop_assert_eq!(got.unwrap(), (utilisation as f64 / target as f64, utilisation, m / both.len() as i64));
        }
    }
}
