//! Overload in the fast mode: more resources never cost requests, and memory behaviour is
//! monotone through saturation.

use std::sync::Arc;

use aware_core::Cluster;
use aware_sim::{Allocation, AppSpec, SimCluster, SimConfig, Trace, generate_app};
use proptest::prelude::*;

const MIB: u64 = 1 << 20;
/// Enough memory that no pod is OOM-killed at any load drawn here (1 TiB).
const AMPLE_MEMORY: u64 = 1 << 40;

/// Total (arrivals, dropped, OOM kills) of app `seed` at `alloc` under `rates` (one per 15 s).
fn run(seed: u64, alloc: Allocation, rates: &[f64]) -> (f64, f64, u32) {
    let mut c = cluster(seed, alloc, rates);
    let (mut arrivals, mut dropped, mut ooms) = (0.0, 0.0, 0);
    for _ in 0..rates.len() {
        c.advance().unwrap();
        let s = c.stats(0);
        arrivals += s.arrivals;
        dropped += s.dropped;
        ooms += s.oom_events;
    }
    (arrivals, dropped, ooms)
}

fn cluster(seed: u64, alloc: Allocation, rates: &[f64]) -> SimCluster {
    let mut app = generate_app(seed as usize, seed, 86_400.0);
    app.reference = alloc;
    let trace = Arc::new(Trace { name: "drawn".into(), interval_s: 15.0, rates: rates.to_vec() });
    let config = SimConfig {
        noise: 0.0,
        random_start: false,
        nodes: Some(4),
        node_cores: 256.0,
        node_memory_bytes: 1 << 44,
        ..SimConfig::default()
    };
    SimCluster::new(vec![app], vec![trace], config, seed)
}

/// Total (arrivals, served, dropped) of app `seed` at `alloc` under `rates`.
fn run_totals(seed: u64, alloc: Allocation, rates: &[f64]) -> (f64, f64, f64) {
    let mut c = cluster(seed, alloc, rates);
    let (mut arrivals, mut served, mut dropped) = (0.0, 0.0, 0.0);
    for _ in 0..rates.len() {
        c.advance().unwrap();
        let s = c.stats(0);
        (arrivals, served, dropped) = (arrivals + s.arrivals, served + s.served, dropped + s.dropped);
    }
    (arrivals, served, dropped)
}

/// Arrivals of app `seed` at `alloc` under `rates`, interval by interval, and the intervals in
/// which its pod was OOM-killed (one entry per kill).
fn arrivals_and_kills(seed: u64, alloc: Allocation, rates: &[f64]) -> (Vec<f64>, Vec<usize>) {
    let mut c = cluster(seed, alloc, rates);
    let (mut arrivals, mut kills) = (Vec::new(), Vec::new());
    for i in 0..rates.len() {
        c.advance().unwrap();
        let s = c.stats(0);
        arrivals.push(s.arrivals);
        kills.extend(std::iter::repeat_n(i, s.oom_events as usize));
    }
    (arrivals, kills)
}

fn capacity_rps(seed: u64, alloc: &Allocation) -> f64 {
    let app: AppSpec = generate_app(seed as usize, seed, 86_400.0);
    alloc.replicas as f64 * alloc.cpu_millicores as f64 / 1000.0 / app.cost().cpu_s
}

proptest! {
    // `oom_kills_are_monotone_near_saturation` rejects about a quarter of its inputs; room for
    // that at any PROPTEST_CASES.
    #![proptest_config(ProptestConfig { max_global_rejects: 1 << 20, ..ProptestConfig::with_cases(48) })]

    /// The same arrivals on more replicas or more CPU never drop more requests, overloaded or not,
    /// while memory is ample. (With OOM kills in play it need not hold, in either mode or in a
    /// real cluster: a pod that survives an interval longer can be killed later, at a worse
    /// moment of its CrashLoopBackOff; see `crash_loops_make_drops_path_dependent`.)
    #[test]
    fn more_compute_never_drops_more(
        seed in 0u64..200,
        replicas in 1u32..5, cpu_m in 100u64..3000,
        extra_replicas in 0u32..3, extra_cpu in 0u64..2000,
        levels in prop::collection::vec(0.2f64..5.0, 4..12),
    ) {
        let small = Allocation { replicas, cpu_millicores: cpu_m, memory_bytes: AMPLE_MEMORY };
        let big = Allocation { replicas: replicas + extra_replicas, cpu_millicores: cpu_m + extra_cpu, ..small };
        let cap = capacity_rps(seed, &small);
        // Each level (a multiple of the small allocation's capacity) holds for 5 intervals.
        let rates: Vec<f64> = levels.iter().flat_map(|&f| std::iter::repeat_n(f * cap, 5)).collect();
        let (arrivals, lo, lo_oom) = run(seed, small, &rates);
        let (_, hi, hi_oom) = run(seed, big, &rates);
        prop_assert_eq!((lo_oom, hi_oom), (0, 0), "memory must be ample for this property");
        prop_assert!(hi <= lo + 1e-6 * arrivals.max(1.0), "dropped {lo} → {hi} with more resources ({small:?} → {big:?})");
    }

    /// Every request is counted once: after the load stops and the queues drain, served plus
    /// dropped is what arrived, OOM kills, crash loops and overload included.
    #[test]
    fn every_request_is_served_or_dropped_exactly_once(
        seed in 0u64..200,
        replicas in 1u32..5, cpu_m in 100u64..3000, mem_mib in 128u64..4096,
        levels in prop::collection::vec(0.2f64..5.0, 4..12),
    ) {
        let alloc = Allocation { replicas, cpu_millicores: cpu_m, memory_bytes: mem_mib * MIB };
        let cap = capacity_rps(seed, &alloc);
        let mut rates: Vec<f64> = levels.iter().flat_map(|&f| std::iter::repeat_n(f * cap, 5)).collect();
        // Quiet until every queue has drained or timed out (the timeout is 30 s: two intervals).
        rates.extend([0.0; 8]);
        let (arrivals, served, dropped) = run_totals(seed, alloc, &rates);
        prop_assert!(
            (served + dropped - arrivals).abs() <= 1e-6 * arrivals.max(1.0),
            "arrived {arrivals}, served {served} + dropped {dropped} = {}", served + dropped
        );
    }

    /// More memory never drops more up to saturation. (Beyond it, an OOM kill empties a
    /// processor-sharing queue that was serving almost nothing, so a crash-looping pod can
    /// complete a fraction of a percent more than one that holds its collapsed queue: the
    /// discrete-event mode shows the same; see the report of this change.)
    #[test]
    fn more_memory_never_drops_more_up_to_saturation(
        seed in 0u64..200, replicas in 1u32..5, cpu_m in 100u64..3000, mem_mib in 64u64..2048, extra_mem in 1u64..4096,
        levels in prop::collection::vec(0.1f64..0.95, 4..12),
    ) {
        let small = Allocation { replicas, cpu_millicores: cpu_m, memory_bytes: mem_mib * MIB };
        let big = Allocation { memory_bytes: (mem_mib + extra_mem) * MIB, ..small };
        let cap = capacity_rps(seed, &small);
        let rates: Vec<f64> = levels.iter().flat_map(|&f| std::iter::repeat_n(f * cap, 5)).collect();
        let (arrivals, lo, _) = run(seed, small, &rates);
        let (_, hi, _) = run(seed, big, &rates);
        prop_assert!(hi <= lo + 1e-6 * arrivals.max(1.0), "dropped {lo} → {hi} with more memory ({small:?} → {big:?})");
    }

    /// Near saturation (0.8× to 1.3× capacity) more memory never means more OOM kills, and more
    /// load never means fewer when it brings at least as many requests in every interval.
    ///
    /// The same seed at a higher rate is not the same requests plus a few: each interval's count
    /// is a Poisson draw by a rejection sampler whose use of the random stream depends on the
    /// rate, so in about a quarter of the pairs drawn here the two runs' traffic falls out of
    /// step and they compare two different realisations, as two runs on a real cluster would. A
    /// crash-looping pod's kill count over a fixed window then moves by whole kills either way
    /// (`oom_kills_can_fall_with_load_when_the_traffic_differs`), so those pairs are rejected,
    /// not passed. More memory leaves the traffic alone (checked) and is compared on every input.
    #[test]
    fn oom_kills_are_monotone_near_saturation(
        seed in 0u64..200, cpu_m in 250u64..2000, mem_mib in 128u64..2048, load in 0.8f64..1.25, more in 0.0f64..0.05,
    ) {
        let alloc = Allocation { replicas: 1, cpu_millicores: cpu_m, memory_bytes: mem_mib * MIB };
        let cap = capacity_rps(seed, &alloc);
        let (traffic, at) = arrivals_and_kills(seed, alloc, &vec![load * cap; 40]);
        let roomier = Allocation { memory_bytes: alloc.memory_bytes + 256 * MIB, ..alloc };
        let (same_traffic, roomy) = arrivals_and_kills(seed, roomier, &vec![load * cap; 40]);
        prop_assert_eq!(&same_traffic, &traffic, "memory must not change the requests");
        prop_assert!(roomy.len() <= at.len(), "256 MiB more memory: OOM kills at intervals {at:?} → {roomy:?}");
        let (more_traffic, above) = arrivals_and_kills(seed, alloc, &vec![(load + more) * cap; 40]);
        prop_assume!(
            more_traffic.iter().zip(&traffic).all(|(m, t)| m >= t),
            "the higher rate's Poisson draws fell out of step with the lower rate's"
        );
        prop_assert!(
            above.len() >= at.len(),
            "load {load:.3} → {:.3}: OOM kills at intervals {at:?} → {above:?}", load + more
        );
    }
}

/// The case CI found: crossing saturation (0.974 → 1.008 of capacity) used to switch from the
/// steady state's full queue to an empty fluid queue, so more load meant fewer OOM kills.
#[test]
fn oom_kills_do_not_fall_when_load_crosses_saturation() {
    let (seed, alloc) = (67, Allocation { replicas: 1, cpu_millicores: 250, memory_bytes: 518 * MIB });
    let cap = capacity_rps(seed, &alloc);
    let (_, _, below) = run(seed, alloc, &[0.974 * cap; 40]);
    let (_, _, above) = run(seed, alloc, &[1.008 * cap; 40]);
    assert!(below > 0, "the case must OOM below saturation to mean anything");
    assert!(above >= below, "OOM kills {below} → {above} across saturation");
}

/// The case proptest found (seed 47): a pod with 216 more millicores survives two intervals at
/// 1.007× the smaller pod's capacity that kill the smaller one, is OOM-killed when the next
/// overload comes, and so sits in CrashLoopBackOff later, when the smaller one is serving again.
/// Both run the same crash loops; the bigger one drops more (0.4 % of the arrivals) because of
/// when its crashes fall. Kubernetes' backoff does the same. With ample memory (no OOM) more CPU
/// drops less here, as `more_compute_never_drops_more` checks everywhere.
#[test]
fn crash_loops_make_drops_path_dependent() {
    let small = Allocation { replicas: 3, cpu_millicores: 2585, memory_bytes: 546 * MIB };
    let big = Allocation { cpu_millicores: 2585 + 216, ..small };
    let cap = capacity_rps(47, &small);
    let levels = [
        3.482054994809881,
        3.1782883110153675,
        4.957189573335702,
        1.0074789749092388,
        4.431273846226825,
        0.9305648757886462,
    ];
    let rates: Vec<f64> = levels.iter().flat_map(|&f| std::iter::repeat_n(f * cap, 5)).collect();
    let (arrivals, lo, lo_oom) = run(47, small, &rates);
    let (_, hi, hi_oom) = run(47, big, &rates);
    assert!(lo_oom > 0 && hi_oom > 0, "both crash-loop: {lo_oom}, {hi_oom}");
    assert!((hi - lo).abs() < 0.01 * arrivals, "the crash loops' timing moves drops by under 1 %: {lo} vs {hi}");
    let roomy = |a: Allocation| Allocation { memory_bytes: AMPLE_MEMORY, ..a };
    let (_, lo, _) = run(47, roomy(small), &rates);
    let (_, hi, _) = run(47, roomy(big), &rates);
    assert!(hi <= lo, "without OOM kills more CPU drops no more: {lo} → {hi}");
}

/// The case proptest found (seed 111): at 1.0795× capacity the pod is OOM-killed 6 times in 40
/// intervals, at 1.0820× only 5. The memory model is not at fault: the two rates get different
/// requests. Poisson counts come from a rejection sampler whose use of the seed's random stream
/// depends on the rate; at interval 4 the two runs fall out of step, and from there on the higher
/// rate sees the lower rate's counts one interval later (105, 106, 139 at intervals 5–7 come at
/// 6–8). Both pods die at interval 2 and are back at 5; the lower rate's dies in its 139-request
/// interval 7, the higher rate's survives 106 there and dies at 8. Every later crash loop then
/// runs one interval behind (kills at 2, 7, 14, 21, 28, 39 against 2, 8, 15, 22, 29), and the
/// lower rate's sixth kill, in the last interval, has its twin at interval 40, past the horizon:
/// one interval more and both count 6. Two runs on a real cluster at nearly the same rate see
/// different traffic too, and a crash loop's kill count over a window moves by whole kills with
/// its phase. Where the higher rate brings at least as many requests in every interval, more load
/// never meant fewer kills (`oom_kills_are_monotone_near_saturation`).
#[test]
fn oom_kills_can_fall_with_load_when_the_traffic_differs() {
    let (seed, alloc) = (111, Allocation { replicas: 1, cpu_millicores: 507, memory_bytes: 1356 * MIB });
    let cap = capacity_rps(seed, &alloc);
    let (lower, higher) = (1.0794584583495634, 1.0794584583495634 + 0.0025469177798639366);
    let (traffic, at) = arrivals_and_kills(seed, alloc, &[lower * cap; 40]);
    let (more_traffic, above) = arrivals_and_kills(seed, alloc, &[higher * cap; 40]);
    assert_eq!((at.len(), above.len()), (6, 5), "kills at intervals {at:?} and {above:?}");
    // The same requests until interval 4, give or take the rate; then one interval behind.
    assert!(traffic[..4].iter().zip(&more_traffic).all(|(t, m)| m >= t && m - t <= 1.0));
    assert_eq!(&traffic[5..8], &more_traffic[6..9], "the lower rate's 105, 106, 139 come one interval later");
    assert!(more_traffic[7] < traffic[7], "the higher rate brings fewer requests where the lower one's pod dies");
    // The first kill is shared; each later one comes one interval later at the higher rate.
    assert_eq!(at[0], above[0]);
    assert!(at[1..].iter().zip(&above[1..]).all(|(a, b)| b == &(a + 1)), "{at:?} vs {above:?}");
    assert_eq!(at.last(), Some(&39), "the lower rate's last kill is in the last interval");
    // Its twin is in the next one: over 41 intervals the counts agree.
    let (_, at) = arrivals_and_kills(seed, alloc, &[lower * cap; 41]);
    let (_, above) = arrivals_and_kills(seed, alloc, &[higher * cap; 41]);
    assert_eq!((at.len(), above.len()), (6, 6), "kills at intervals {at:?} and {above:?}");
    assert_eq!(above.last(), Some(&40));
}
