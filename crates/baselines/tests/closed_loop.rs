//! Each baseline driving the simulator: the behaviour an operator would expect.

use std::sync::Arc;

use aware_baselines::{
    AdditiveIncreaseMultiplicativeDecrease, HorizontalPodAutoscaler, MultidimPodAutoscaler, ThresholdStepScaling,
    VerticalPodAutoscaler,
};
use aware_baselines::{UpdateMode, VpaSpec};
use aware_core::{Cluster, ContainerResources, Profile, Recommendation, Recommender, Resources};
use aware_sim::{AppSpec, SimCluster, SimConfig, Trace, generate_app};

const MIB: u64 = 1 << 20;

fn app() -> AppSpec {
    generate_app(3, 1, 86_400.0)
}

/// Requests per second that load one core to `utilisation`.
fn rate(utilisation: f64) -> f64 {
    utilisation / app().cost().cpu_s
}

/// The app under a stepped constant load, one level per 10 minutes.
fn cluster(rates: Vec<f64>) -> SimCluster {
    let trace = Arc::new(Trace { name: "steps".into(), interval_s: 600.0, rates });
    // These tests pin each policy's logic, so metrics are fresh here; the effect of the default
    // metrics lag on HPA is in `realism.rs`. (With the default one-interval lag the VPA, having no
    // usage sample of a restarted pod yet, cuts its CPU to the minimum and OOM-loops: a
    // baseline gap for the VPA work, not a simulator property.)
    SimCluster::new(vec![app()], vec![trace], SimConfig { metrics_lag_s: 0.0, ..SimConfig::default() }, 1)
}

fn drive(c: &mut SimCluster, rec: &mut dyn Recommender, steps: usize) -> Vec<u32> {
    let mut replicas = Vec::new();
    for _ in 0..steps {
        let obs = c.observe(0).unwrap();
        let r = rec.recommend(&obs).unwrap();
        c.apply(0, &r).unwrap();
        c.advance().unwrap();
        replicas.push(c.observe(0).unwrap().desired_replicas);
    }
    replicas
}

fn resize(c: &mut SimCluster, replicas: u32, cpu_m: u64, mem: u64) {
    let rec = Recommendation {
        replicas,
        containers: vec![ContainerResources::guaranteed("app", Resources::new(cpu_m, mem))],
    };
    c.apply(0, &rec).unwrap();
    c.advance().unwrap();
}

#[test]
fn hpa_follows_load_up_and_down() {
    // 30 % of one core, then 250 %, then 30 % again; 40 intervals per level.
    let mut c = cluster(vec![rate(0.3), rate(2.5), rate(0.3)]);
    // Room for the overload backlog: this test is about scaling, not OOM kills.
    resize(&mut c, 1, 1000, 16384 * MIB);
    let mut hpa = HorizontalPodAutoscaler::from_profile(&Profile::default());
    let r = drive(&mut c, &mut hpa, 120);
    assert_eq!(r[30], 1, "{r:?}");
    assert!(r[75] >= 4, "2.5 cores at a 70 % target need ≥ 4 pods: {r:?}");
    assert!(r[119] < r[75], "back in after the 5-minute stabilisation: {r:?}");
}

#[test]
fn vpa_raises_memory_after_oom_kills() {
    let mut c = cluster(vec![rate(0.5)]);
    let base = app().cost().mem_base_bytes as u64;
    resize(&mut c, 1, 1000, base + 8 * MIB);
    let mut spec = VpaSpec::from_profile(&Profile::default());
    spec.update_mode = UpdateMode::InPlaceOrRecreate;
    // With upstream's default `--min-replicas 2` the updater never touches a single replica.
    let mut blocked = VerticalPodAutoscaler::new(spec.clone());
    let mut c2 = cluster(vec![rate(0.5)]);
    resize(&mut c2, 1, 1000, base + 8 * MIB);
    drive(&mut c2, &mut blocked, 60);
    assert_eq!(c2.observe(0).unwrap().template.limits.memory_bytes, base + 8 * MIB, "min replicas 2: untouched");
    assert!(blocked.decisions().iter().any(|d| d.update && !d.evictable), "{:?}", blocked.decisions());
    // An operator running single replicas sets `--min-replicas=1`.
    spec.min_replicas = 1;
    let mut vpa = VerticalPodAutoscaler::new(spec);
    drive(&mut c, &mut vpa, 60);
    let after = c.observe(0).unwrap().template.limits.memory_bytes;
    assert!(after >= base + 100 * MIB, "OOM bump of ≥ 100 MiB: {after}");
    let ooms: u32 = (0..20)
        .map(|_| {
            drive(&mut c, &mut vpa, 1);
            c.stats(0).oom_events
        })
        .sum();
    assert_eq!(ooms, 0, "no more OOM kills once resized");
}

/// Upstream's upper bound is multiplied by (1 + 1/days of history): huge at first, so a young,
/// over-provisioned pod is left alone; ×3 at 12 h, by which time 4 GiB is far above it.
#[test]
fn vpa_shrinks_over_provisioned_memory_once_history_is_long_enough() {
    let mut c = cluster(vec![rate(0.3)]);
    resize(&mut c, 1, 1000, 4096 * MIB);
    let mut spec = VpaSpec::from_profile(&Profile::default());
    spec.update_mode = UpdateMode::InPlaceOrRecreate;
    spec.min_replicas = 1;
    let mut vpa = VerticalPodAutoscaler::new(spec);
    drive(&mut c, &mut vpa, 120);
    assert_eq!(c.observe(0).unwrap().template.limits.memory_bytes, 4096 * MIB, "30 minutes of history: untouched");
    let upper = vpa.recommendation().unwrap().upper_bound.memory_bytes;
    assert!(upper as u64 > 4096 * MIB, "upper bound still above the request: {upper}");
    drive(&mut c, &mut vpa, (12 * 3600 / 15) as usize);
    let after = c.observe(0).unwrap().template.limits.memory_bytes;
    assert!(after < 1024 * MIB, "shrunk within 12 h: {after}");
    let ws = c.observe(0).unwrap().pods[0].memory_working_set_bytes.unwrap();
    assert!(after as f64 > ws, "still above the working set");
}

#[test]
fn vpa_initial_mode_is_refused_in_the_simulator() {
    let mut c = cluster(vec![1.0]);
    c.advance().unwrap();
    let mut spec = VpaSpec::from_profile(&Profile::default());
    spec.update_mode = UpdateMode::Initial;
    let err = VerticalPodAutoscaler::new(spec).recommend(&c.observe(0).unwrap()).unwrap_err();
    assert!(err.to_string().contains("Initial"));
}

#[test]
fn mpa_scales_out_and_fixes_memory() {
    // Horizontal: 2.5 cores of load on one pod.
    let mut c = cluster(vec![rate(2.5)]);
    resize(&mut c, 1, 1000, 16384 * MIB);
    // An overloaded processor-sharing pod holds every request of the last timeout (~15 GiB
    // here): memory bounds must allow the VPA's OOM bumps to reach that, or the pods crash-loop
    // and never count as ready for the HPA.
    let mut profile = Profile::default();
    profile.bounds.max_memory_mib = 65536;
    let mut mpa = MultidimPodAutoscaler::from_profile(&profile, false);
    let r = drive(&mut c, &mut mpa, 60);
    assert!(*r.last().unwrap() >= 4, "{r:?}");
    // Vertical: memory just above the runtime's base, OOM kills at a light load.
    let mut c = cluster(vec![rate(0.5)]);
    let base = app().cost().mem_base_bytes as u64;
    resize(&mut c, 1, 1000, base + 8 * MIB);
    let mut mpa = MultidimPodAutoscaler::from_profile(&Profile::default(), false);
    // One replica: the updater needs `--min-replicas=1` to resize it.
    mpa.vpa.spec.min_replicas = 1;
    drive(&mut c, &mut mpa, 60);
    let obs = c.observe(0).unwrap();
    assert!(obs.template.limits.memory_bytes >= base + 100 * MIB);
    assert_eq!(obs.template.limits.cpu_millicores, 1000, "CPU is the HPA's: the VPA leaves it");
}

#[test]
fn threshold_steps_out_and_aimd_grows_cpu_under_pressure() {
    let mut c = cluster(vec![rate(2.5)]);
    resize(&mut c, 1, 1000, 16384 * MIB);
    let mut t = ThresholdStepScaling::from_profile(&Profile::default());
    let r = drive(&mut c, &mut t, 6);
    // ≥ 90 % utilisation: +2 per interval until utilisation falls.
    assert_eq!(&r[..2], &[3, 5], "{r:?}");

    let mut c = cluster(vec![rate(2.5)]);
    resize(&mut c, 1, 1000, 16384 * MIB);
    let slo = c.slo_p99_ms(0);
    let mut aimd = AdditiveIncreaseMultiplicativeDecrease::from_profile(&Profile::default(), Some(slo));
    drive(&mut c, &mut aimd, 20);
    assert!(c.observe(0).unwrap().template.limits.cpu_millicores >= 2000);
}

/// A controller kept across simulator episodes (each a fresh cluster whose clock starts again,
/// at 0 or at a random time of the week) and restarted at each, as the episode loops do,
/// behaves as a fresh one; without the restart its history from the episode before can lie in
/// the future, inside every stabilisation window, and freeze the replica count.
#[test]
fn controllers_restarted_between_episodes_behave_as_fresh_ones() {
    let mut c = cluster(vec![rate(2.5), rate(0.3)]);
    let episode = |c: &mut SimCluster, rec: &mut dyn Recommender, seed: u64| {
        c.reset(Some(seed)).unwrap();
        rec.restart();
        resize(c, 1, 1000, 16384 * MIB);
        drive(c, rec, 80)
    };
    let fresh = |seed: u64, c: &mut SimCluster| {
        let mut hpa = HorizontalPodAutoscaler::from_profile(&Profile::default());
        let mut mpa = MultidimPodAutoscaler::from_profile(&Profile::default(), true);
        (episode(c, &mut hpa, seed), episode(c, &mut mpa, seed))
    };
    let mut hpa = HorizontalPodAutoscaler::from_profile(&Profile::default());
    let mut mpa = MultidimPodAutoscaler::from_profile(&Profile::default(), true);
    for seed in [5, 9, 5, 2] {
        let kept = (episode(&mut c, &mut hpa, seed), episode(&mut c, &mut mpa, seed));
        assert_eq!(kept, fresh(seed, &mut c), "seed {seed}");
    }
    let (first, _) = fresh(5, &mut c);
    let peak = first.iter().position(|&r| r >= 4).expect("scales out");
    assert!(first[peak..].windows(2).any(|w| w[1] < w[0]), "then back in: {first:?}");
    // Without the restart the kept HPA does not scale back in on the same traffic.
    let mut stale = HorizontalPodAutoscaler::from_profile(&Profile::default());
    let _ = episode(&mut c, &mut stale, 5);
    c.reset(Some(5)).unwrap();
    resize(&mut c, 1, 1000, 16384 * MIB);
    assert_ne!(drive(&mut c, &mut stale, 80), first);
}

/// A VPA restarted from the checkpoints it saved (through JSON, as the controller's state file
/// keeps them) recommends as the one that ran on: the same target and the same confidence
/// bounds. One restarted empty starts its confidence over (a far wider upper bound). The memory
/// peaks of the aggregation interval still open are left out of the checkpoint, so the
/// restarted recommender, adding them again when it sees the pods, does not count them twice.
#[test]
fn a_vpa_restarted_from_its_checkpoints_recommends_as_the_one_that_ran_on() {
    let mut c = cluster(vec![rate(0.6); 20]);
    resize(&mut c, 2, 1000, 1024 * MIB);
    let spec = VpaSpec { update_mode: UpdateMode::Off, ..VpaSpec::from_profile(&Profile::default()) };
    let mut ran_on = VerticalPodAutoscaler::new(spec.clone());
    for _ in 0..480 {
        ran_on.recommend(&c.observe(0).unwrap()).unwrap();
        c.advance().unwrap();
    }
    let now = c.observe(0).unwrap().time_s;
    let saved = ran_on.save_checkpoints();
    assert_eq!(saved.len(), 1, "one container: {saved:?}");
    let text = serde_json::to_string(&saved).unwrap();
    let saved: Vec<(String, aware_baselines::AggregateCheckpoint)> = serde_json::from_str(&text).unwrap();
    let mut restarted = VerticalPodAutoscaler::new(spec.clone());
    for (container, checkpoint) in &saved {
        restarted.load_checkpoint(container, checkpoint, now).unwrap();
    }
    let mut empty = VerticalPodAutoscaler::new(spec);
    for _ in 0..20 {
        let obs = c.observe(0).unwrap();
        for v in [&mut ran_on, &mut restarted, &mut empty] {
            v.recommend(&obs).unwrap();
        }
        c.advance().unwrap();
    }
    let (a, b, e) =
        (ran_on.recommendation().unwrap(), restarted.recommendation().unwrap(), empty.recommendation().unwrap());
    let near = |x: i64, y: i64| (x as f64 - y as f64).abs() <= 0.05 * x as f64;
    for (what, x, y) in [
        ("cpu target", a.target.cpu_millicores, b.target.cpu_millicores),
        ("memory target", a.target.memory_bytes, b.target.memory_bytes),
        ("cpu upper bound", a.upper_bound.cpu_millicores, b.upper_bound.cpu_millicores),
        ("memory upper bound", a.upper_bound.memory_bytes, b.upper_bound.memory_bytes),
        ("memory lower bound", a.lower_bound.memory_bytes, b.lower_bound.memory_bytes),
    ] {
        assert!(near(x, y), "{what}: ran on {x}, restarted {y}");
    }
    assert!(
        e.upper_bound.memory_bytes as f64 > 1.5 * a.upper_bound.memory_bytes as f64,
        "an empty restart starts its confidence over: {} against {}",
        e.upper_bound.memory_bytes,
        a.upper_bound.memory_bytes
    );
    // One peak per pod for the interval, in both (as kept once every interval closed; the
    // restarted recommender's intervals began later, so its samples decayed a little less).
    // Kept in the checkpoint, the open interval's peaks would be there twice.
    let total = |v: &VerticalPodAutoscaler| v.save_checkpoints_at(f64::INFINITY)[0].1.memory_histogram.total_weight;
    let (ran, back) = (total(&ran_on), total(&restarted));
    assert!(ran > 0.0 && (0.8..1.25).contains(&(back / ran)), "memory peaks' weight: ran on {ran}, restarted {back}");
}

/// A memory-only VPA restarted from its checkpoints recommends memory only, as the one that ran
/// on does: a container's history taken up is controlled as the spec says.
#[test]
fn a_restarted_vpa_controls_what_its_spec_says() {
    let mut c = cluster(vec![rate(0.6); 4]);
    let spec =
        VpaSpec { update_mode: UpdateMode::Off, control_cpu: false, ..VpaSpec::from_profile(&Profile::default()) };
    let mut ran_on = VerticalPodAutoscaler::new(spec.clone());
    for _ in 0..40 {
        ran_on.recommend(&c.observe(0).unwrap()).unwrap();
        c.advance().unwrap();
    }
    let mut restarted = VerticalPodAutoscaler::new(spec);
    restarted.load_checkpoints(&ran_on.save_checkpoints()).unwrap();
    let obs = c.observe(0).unwrap();
    ran_on.recommend(&obs).unwrap();
    restarted.recommend(&obs).unwrap();
    let cpu = |v: &VerticalPodAutoscaler| {
        v.container_recommendations().iter().map(|r| r.target.cpu_millicores).collect::<Vec<_>>()
    };
    assert!(cpu(&ran_on).iter().all(Option::is_none), "{:?}", ran_on.container_recommendations());
    assert_eq!(cpu(&restarted), cpu(&ran_on));
}
