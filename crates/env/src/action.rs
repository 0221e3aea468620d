//! Turning a policy's action into a `Recommendation`, relative to what the workload has now.

use aware_core::{Action, ContainerResources, Recommendation, Resources, Space};
use aware_core::{Bounds, MIB};

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ActionKind {
    /// `[cpu, memory, replicas]` in [−1, 1]³, mapped onto the profile bounds (DDPG, as in FIRM
    /// and AWARE).
    Continuous,
    /// Seven deltas: no-op, ±1 replica, ±one CPU step, ±one memory step (PPO, DQN).
    Discrete,
    /// `[cpu, memory, replicas]` in [−1, 1]³, each a multiplicative change of the current
    /// allocation: factor 2^(x·r) with r from [`RELATIVE_RANGE`] (CPU and memory ×½…×2,
    /// replicas ×¼…×4 per interval). Scale-free, so one policy fits applications of any size:
    /// "utilisation 90 % against a 50 % target" means the same action for 2 replicas and for
    /// 200 (HPA's own rule is such a ratio). The lifecycle manager's agent acts in it.
    Relative,
}

/// Exponent range (log₂ of the largest factor) of each [`ActionKind::Relative`] dimension:
/// CPU, memory, replicas.
pub const RELATIVE_RANGE: [f64; 3] = [1.0, 1.0, 2.0];

/// A relative change by a factor within 1 ± this holds the current value (HPA's default
/// tolerance and VPA's update threshold are both 10 %).
pub const RELATIVE_TOLERANCE: f64 = 0.1;

pub const DISCRETE_ACTIONS: usize = 7;

/// The meaning of each discrete action, for reports and logs.
pub const DISCRETE_ACTION_NAMES: [&str; DISCRETE_ACTIONS] =
    ["no-op", "replicas+1", "replicas-1", "cpu+step", "cpu-step", "memory+step", "memory-step"];

#[derive(Debug, Clone, PartialEq)]
pub struct Decoded {
    pub recommendation: Recommendation,
    /// The action asked for something outside the bounds (it was clipped, or became a no-op).
    pub illegal: bool,
    /// Direction of change per dimension (CPU, memory, replicas): −1, 0 or +1.
    pub direction: [i8; 3],
}

/// An action no clipping can make sense of: the wrong type for the space, or not a number.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[non_exhaustive]
pub enum DecodeError {
    #[error("continuous action {0:?} is not finite")]
    NotFinite(Vec<f32>),
    #[error("action {action:?} does not fit the {} action space", kind.name())]
    WrongSpace { action: Action, kind: ActionKind },
}

#[derive(Debug, Clone, PartialEq)]
pub struct ActionDecoder {
    pub kind: ActionKind,
    pub bounds: Bounds,
    pub container: String,
    /// CPU request of the decoded container as a fraction of its CPU limit (the action sets
    /// limits): 1 asks for the Guaranteed QoS class, below 1 for Burstable
    /// ([`ContainerResources::burstable`]). Memory is requested in full either way.
    pub cpu_request_ratio: f64,
}

impl ActionKind {
    /// The name `--action-space` takes and messages use.
    pub fn name(self) -> &'static str {
        match self {
            ActionKind::Continuous => "continuous",
            ActionKind::Discrete => "discrete",
            ActionKind::Relative => "relative",
        }
    }

    pub fn space(self) -> Space {
        match self {
            ActionKind::Continuous | ActionKind::Relative => Space::Box { low: vec![-1.0; 3], high: vec![1.0; 3] },
            ActionKind::Discrete => Space::Discrete { n: DISCRETE_ACTIONS },
        }
    }
}

impl ActionDecoder {
    pub fn space(&self) -> Space {
        self.kind.space()
    }

    /// Decodes `action` against the current replica count and container resources.
    /// Err only for actions of the wrong type or NaN, which no clipping can make sense of.
    pub fn decode(&self, action: &Action, replicas: u32, current: &ContainerResources) -> Result<Decoded, DecodeError> {
        let b = &self.bounds;
        let cur = current.limits;
        let (mut cpu, mut mem, mut reps) = (cur.cpu_millicores as i64, cur.memory_bytes as i64, replicas as i64);
        let mut illegal = false;
        match (self.kind, action) {
            (ActionKind::Continuous, Action::Continuous(v)) if v.len() == 3 => {
                if v.iter().any(|x| !x.is_finite()) {
                    return Err(DecodeError::NotFinite(v.clone()));
                }
                illegal = v.iter().any(|x| x.abs() > 1.0);
                let unit = |x: f32| ((x.clamp(-1.0, 1.0) as f64) + 1.0) / 2.0;
                let lerp = |x: f32, lo: u64, hi: u64| (lo as f64 + unit(x) * (hi - lo) as f64).round() as i64;
                // A dead band of half a discrete step: a continuous policy's output is never
                // exactly equal twice, and without one every interval resizes every pod.
                let hold = |target: i64, now: i64, step: u64| {
                    if (target - now).abs() * 2 < step as i64 { now } else { target }
                };
                cpu = hold(lerp(v[0], b.min_cpu_millicores, b.max_cpu_millicores), cpu, b.cpu_step_millicores);
                mem = hold(lerp(v[1], b.min_memory_mib, b.max_memory_mib) * MIB as i64, mem, b.memory_step_bytes());
                reps = lerp(v[2], b.min_replicas as u64, b.max_replicas as u64);
            }
            (ActionKind::Relative, Action::Continuous(v)) if v.len() == 3 => {
                if v.iter().any(|x| !x.is_finite()) {
                    return Err(DecodeError::NotFinite(v.clone()));
                }
                illegal = v.iter().any(|x| x.abs() > 1.0);
                // A change within the tolerance holds (HPA's and VPA's own 10 % hysteresis): a
                // policy's output is never exactly 0, and without it small biases would ratchet
                // the allocation one dead band at a time.
                let factor = |x: f32, d: usize| {
                    let f = (x.clamp(-1.0, 1.0) as f64 * RELATIVE_RANGE[d]).exp2();
                    if (f - 1.0).abs() <= RELATIVE_TOLERANCE { 1.0 } else { f }
                };
                // The same dead band of half a step as the absolute space.
                let hold = |target: f64, now: i64, step: u64| {
                    let target = target.round() as i64;
                    if (target - now).abs() * 2 < step as i64 { now } else { target }
                };
                let within = |v: i64, lo: i64, hi: i64, illegal: &mut bool| {
                    if v < lo || v > hi {
                        *illegal = true;
                    }
                    v.clamp(lo, hi)
                };
                let c = hold(cpu as f64 * factor(v[0], 0), cpu, b.cpu_step_millicores);
                let m = hold(mem as f64 * factor(v[1], 1), mem, b.memory_step_bytes());
                let r = (reps.max(1) as f64 * factor(v[2], 2)).round() as i64;
                cpu = within(c, b.min_cpu_millicores as i64, b.max_cpu_millicores as i64, &mut illegal);
                mem = within(m, b.min_memory_bytes() as i64, b.max_memory_bytes() as i64, &mut illegal);
                reps = within(r, b.min_replicas as i64, b.max_replicas as i64, &mut illegal);
            }
            (ActionKind::Discrete, Action::Discrete(a)) if *a < DISCRETE_ACTIONS => {
                let (dc, dm, dr) = match a {
                    0 => (0, 0, 0),
                    1 => (0, 0, 1),
                    2 => (0, 0, -1),
                    3 => (b.cpu_step_millicores as i64, 0, 0),
                    4 => (-(b.cpu_step_millicores as i64), 0, 0),
                    5 => (0, b.memory_step_bytes() as i64, 0),
                    _ => (0, -(b.memory_step_bytes() as i64), 0),
                };
                let (nc, nm, nr) = (cpu + dc, mem + dm, reps + dr);
                let within = (b.min_cpu_millicores as i64..=b.max_cpu_millicores as i64).contains(&nc)
                    && (b.min_memory_bytes() as i64..=b.max_memory_bytes() as i64).contains(&nm)
                    && (b.min_replicas as i64..=b.max_replicas as i64).contains(&nr);
                if within {
                    (cpu, mem, reps) = (nc, nm, nr);
                } else {
                    illegal = true;
                }
            }
            _ => return Err(DecodeError::WrongSpace { action: action.clone(), kind: self.kind }),
        }
        let sign = |new: i64, old: i64| (new - old).signum() as i8;
        let direction =
            [sign(cpu, cur.cpu_millicores as i64), sign(mem, cur.memory_bytes as i64), sign(reps, replicas as i64)];
        let resources = Resources::new(cpu.max(1) as u64, mem.max(1) as u64);
        Ok(Decoded {
            recommendation: Recommendation {
                replicas: reps.max(0) as u32,
                containers: vec![ContainerResources::burstable(
                    self.container.clone(),
                    resources,
                    self.cpu_request_ratio,
                )],
            },
            illegal,
            direction,
        })
    }
}

/// Where an allocation lies in a continuous action space: the inverse of [`ActionDecoder::decode`],
/// so what a recommender chose can be learned from as if an agent had chosen it. In
/// [`ActionKind::Continuous`] each of CPU limit, memory limit and replicas maps linearly from the
/// bounds onto [−1, 1]; in [`ActionKind::Relative`] each is log₂(target / current) over its
/// [`RELATIVE_RANGE`]. Both clamp to [−1, 1]. `None` for the discrete space.
pub fn coordinates(
    kind: ActionKind,
    bounds: &Bounds,
    target: (u64, u64, u32),
    current: (u64, u64, u32),
) -> Option<Vec<f32>> {
    let (cpu, mem, reps) = target;
    match kind {
        ActionKind::Continuous => {
            let unit = |v: f64, lo: f64, hi: f64| {
                if hi > lo { ((v - lo) / (hi - lo) * 2.0 - 1.0).clamp(-1.0, 1.0) } else { 0.0 }
            };
            Some(vec![
                unit(cpu as f64, bounds.min_cpu_millicores as f64, bounds.max_cpu_millicores as f64) as f32,
                unit(mem as f64, bounds.min_memory_bytes() as f64, bounds.max_memory_bytes() as f64) as f32,
                unit(reps as f64, bounds.min_replicas as f64, bounds.max_replicas as f64) as f32,
            ])
        }
        ActionKind::Relative => {
            let (c0, m0, r0) = current;
            let ratio = |new: f64, old: f64, d: usize| {
                ((new.max(1.0) / old.max(1.0)).log2() / RELATIVE_RANGE[d]).clamp(-1.0, 1.0) as f32
            };
            Some(vec![
                ratio(cpu as f64, c0 as f64, 0),
                ratio(mem as f64, m0 as f64, 1),
                ratio(reps as f64, r0 as f64, 2),
            ])
        }
        ActionKind::Discrete => None,
    }
}

/// Whether `now` reverses `previous` in any dimension (scale up then down, or down then up).
pub fn reverses(previous: [i8; 3], now: [i8; 3]) -> bool {
    previous.iter().zip(now).any(|(&p, n)| p != 0 && n == -p)
}

#[cfg(test)]
mod tests {
    use super::*;
    use aware_core::Profile;

    fn decoder(kind: ActionKind) -> ActionDecoder {
        ActionDecoder { kind, bounds: Profile::default().bounds, container: "app".into(), cpu_request_ratio: 1.0 }
    }

    fn current() -> ContainerResources {
        ContainerResources::guaranteed("app", Resources::new(1000, 512 * MIB))
    }

    #[test]
    fn discrete_table() {
        let d = decoder(ActionKind::Discrete);
        // (action, replicas before, expected replicas, cpu m, memory MiB, illegal, direction)
        type Case = (usize, u32, u32, u64, u64, bool, [i8; 3]);
        let cases: [Case; 9] = [
            (0, 3, 3, 1000, 512, false, [0, 0, 0]),
            (1, 3, 4, 1000, 512, false, [0, 0, 1]),
            (2, 3, 2, 1000, 512, false, [0, 0, -1]),
            (3, 3, 3, 1250, 512, false, [1, 0, 0]),
            (4, 3, 3, 750, 512, false, [-1, 0, 0]),
            (5, 3, 3, 1000, 640, false, [0, 1, 0]),
            (6, 3, 3, 1000, 384, false, [0, -1, 0]),
            (2, 1, 1, 1000, 512, true, [0, 0, 0]),
            (1, 20, 20, 1000, 512, true, [0, 0, 0]),
        ];
        for (a, before, reps, cpu, mem, illegal, dir) in cases {
            let out = d.decode(&Action::Discrete(a), before, &current()).unwrap();
            let c = &out.recommendation.containers[0];
            assert_eq!(
                (
                    out.recommendation.replicas,
                    c.limits.cpu_millicores,
                    c.limits.memory_bytes / MIB,
                    out.illegal,
                    out.direction
                ),
                (reps, cpu, mem, illegal, dir),
                "action {a} from {before}"
            );
        }
    }

    #[test]
    fn continuous_maps_onto_bounds_and_flags_out_of_box() {
        let d = decoder(ActionKind::Continuous);
        let b = Profile::default().bounds;
        let lo = d.decode(&Action::Continuous(vec![-1.0, -1.0, -1.0]), 3, &current()).unwrap();
        assert_eq!(lo.recommendation.replicas, b.min_replicas);
        assert_eq!(lo.recommendation.containers[0].limits.cpu_millicores, b.min_cpu_millicores);
        let hi = d.decode(&Action::Continuous(vec![1.0, 1.0, 1.0]), 3, &current()).unwrap();
        assert_eq!(hi.recommendation.replicas, b.max_replicas);
        assert_eq!(hi.recommendation.containers[0].limits.memory_bytes, b.max_memory_bytes());
        assert!(!hi.illegal);
        let out = d.decode(&Action::Continuous(vec![3.0, 0.0, 0.0]), 3, &current()).unwrap();
        assert!(out.illegal);
        assert_eq!(out.recommendation.containers[0].limits.cpu_millicores, b.max_cpu_millicores);
        assert!(d.decode(&Action::Continuous(vec![f32::NAN, 0.0, 0.0]), 3, &current()).is_err());
        assert!(d.decode(&Action::Discrete(1), 3, &current()).is_err());
    }

    /// Continuous targets within half a step (125 m CPU, 64 MiB) of the current limits keep
    /// them; replicas are whole numbers already.
    #[test]
    fn continuous_dead_band_table() {
        let d = decoder(ActionKind::Continuous);
        let b = Profile::default().bounds;
        let cur = current().limits;
        // The action that maps exactly onto a CPU target, memory held at the current value.
        let unit = |x: f64, lo: u64, hi: u64| ((x - lo as f64) / (hi - lo) as f64 * 2.0 - 1.0) as f32;
        let mem_now = unit((cur.memory_bytes / MIB) as f64, b.min_memory_mib, b.max_memory_mib);
        for (cpu_target, want) in [
            (cur.cpu_millicores as f64 + 100.0, cur.cpu_millicores),
            (cur.cpu_millicores as f64 - 120.0, cur.cpu_millicores),
            (cur.cpu_millicores as f64 + 130.0, cur.cpu_millicores + 130),
            (cur.cpu_millicores as f64 - 400.0, cur.cpu_millicores - 400),
        ] {
            let a = unit(cpu_target, b.min_cpu_millicores, b.max_cpu_millicores);
            let got = d.decode(&Action::Continuous(vec![a, mem_now, 0.0]), 3, &current()).unwrap();
            let limits = got.recommendation.containers[0].limits;
            assert!((limits.cpu_millicores as i64 - want as i64).abs() <= 1, "{cpu_target} → {limits:?}, want {want}");
            assert_eq!(limits.memory_bytes, cur.memory_bytes, "memory within the band is held");
        }
    }

    /// Relative actions: factor 2^(x·range) of the current allocation, clipped to the bounds
    /// (flagged illegal), with the absolute space's dead band.
    #[test]
    fn relative_table() {
        let d = decoder(ActionKind::Relative);
        let b = Profile::default().bounds;
        // (action, replicas before, expected replicas, cpu m, memory MiB, illegal)
        type Case = ([f32; 3], u32, u32, u64, u64, bool);
        let cases: [Case; 10] = [
            ([0.0, 0.0, 0.0], 3, 3, 1000, 512, false),
            ([1.0, 0.0, 0.0], 3, 3, 2000, 512, false),
            ([-1.0, -1.0, 0.0], 3, 3, 500, 256, false),
            ([0.0, 0.0, 0.5], 3, 6, 1000, 512, false),
            ([0.0, 0.0, -1.0], 8, 2, 1000, 512, false),
            ([0.0, 0.0, 1.0], 3, 12, 1000, 512, false),
            // 2 % and 9 % more CPU are within the 10 % tolerance; 15 % is not
            ([0.03, 0.0, 0.0], 3, 3, 1000, 512, false),
            ([0.12, 0.0, 0.0], 3, 3, 1000, 512, false),
            ([0.2, 0.0, 0.0], 3, 3, 1149, 512, false),
            ([0.0, 0.0, 1.0], b.max_replicas, b.max_replicas, 1000, 512, true),
        ];
        for (a, before, reps, cpu, mem, illegal) in cases {
            let out = d.decode(&Action::Continuous(a.to_vec()), before, &current()).unwrap();
            let c = &out.recommendation.containers[0];
            assert_eq!(
                (out.recommendation.replicas, c.limits.cpu_millicores, c.limits.memory_bytes / MIB, out.illegal),
                (reps.min(b.max_replicas), cpu, mem, illegal),
                "action {a:?} from {before}"
            );
        }
        assert!(d.decode(&Action::Continuous(vec![0.0, f32::NAN, 0.0]), 3, &current()).is_err());
    }

    proptest::proptest! {
        /// What a recommender chose, encoded as coordinates and decoded again, is what it chose
        /// (to the rounding of whole replicas and the dead band), in both continuous spaces.
        #[test]
        fn coordinates_invert_the_decoder(
            relative in proptest::bool::ANY,
            cpu in 100u64..4000, mem_mib in 64u64..4096, reps in 1u32..20,
            cpu0 in 100u64..4000, mem0_mib in 64u64..4096, reps0 in 1u32..20,
        ) {
            let kind = if relative { ActionKind::Relative } else { ActionKind::Continuous };
            let d = decoder(kind);
            let b = &d.bounds;
            let (cpu, mem) = (cpu.clamp(b.min_cpu_millicores, b.max_cpu_millicores),
                (mem_mib * MIB).clamp(b.min_memory_bytes(), b.max_memory_bytes()));
            let reps = reps.clamp(b.min_replicas, b.max_replicas);
            let from = ContainerResources::guaranteed("app", Resources::new(cpu0, mem0_mib * MIB));
            let x = coordinates(kind, b, (cpu, mem, reps), (cpu0, mem0_mib * MIB, reps0)).unwrap();
            let out = d.decode(&Action::Continuous(x.clone()), reps0, &from).unwrap();
            let got = (out.recommendation.replicas, out.recommendation.containers[0].limits);
            // Targets beyond one interval's reach (relative) come out at the reach's edge.
            let reachable = !relative || x.iter().all(|v| v.abs() < 1.0);
            // Relative changes within the tolerance hold the current value instead.
            let near = |target: f64, now: f64| relative && (target.max(1.0) / now.max(1.0) - 1.0).abs() <= RELATIVE_TOLERANCE * 1.001;
            if reachable {
                let want_reps = if near(reps as f64, reps0 as f64) { reps0 } else { reps };
                let want_cpu = if near(cpu as f64, cpu0 as f64) { cpu0 } else { cpu };
                let want_mem = if near(mem as f64, (mem0_mib * MIB) as f64) { mem0_mib * MIB } else { mem };
                let edge = |target: f64, now: f64| relative && ((target.max(1.0) / now.max(1.0) - 1.0).abs() - RELATIVE_TOLERANCE).abs() < 1e-3;
                if !edge(reps as f64, reps0 as f64) {
                    proptest::prop_assert_eq!(got.0, want_reps.clamp(b.min_replicas, b.max_replicas), "{:?}", x);
                }
                if !edge(cpu as f64, cpu0 as f64) {
                    proptest::prop_assert!((got.1.cpu_millicores as i64 - want_cpu.clamp(b.min_cpu_millicores, b.max_cpu_millicores) as i64).abs() <= b.cpu_step_millicores as i64 / 2 + 1);
                }
                if !edge(mem as f64, (mem0_mib * MIB) as f64) {
                    proptest::prop_assert!((got.1.memory_bytes as i64 - want_mem.clamp(b.min_memory_bytes(), b.max_memory_bytes()) as i64).abs() <= b.memory_step_bytes() as i64 / 2 + MIB as i64);
                }
            }
        }
    }

    #[test]
    fn reversal_detection() {
        assert!(reverses([0, 0, 1], [0, 0, -1]));
        assert!(reverses([-1, 0, 0], [1, 1, 0]));
        assert!(!reverses([0, 0, 1], [0, 0, 1]));
        assert!(!reverses([0, 0, 0], [1, -1, 1]));
    }

    #[test]
    fn request_ratio_sets_cpu_requests() {
        // Every action space: requests = ratio × the decoded CPU limit, memory in full.
        let cases: [(ActionKind, Action); 3] = [
            (ActionKind::Discrete, Action::Discrete(3)),
            (ActionKind::Continuous, Action::Continuous(vec![0.3, 0.0, 0.0])),
            (ActionKind::Relative, Action::Continuous(vec![0.5, 0.0, 0.0])),
        ];
        for (kind, action) in cases {
            for ratio in [1.0, 0.5, 0.3] {
                let d = ActionDecoder { cpu_request_ratio: ratio, ..decoder(kind) };
                let c = &d.decode(&action, 3, &current()).unwrap().recommendation.containers[0];
                let lim = c.limits.cpu_millicores;
                assert_eq!(c.requests.cpu_millicores, (lim as f64 * ratio).round() as u64, "{kind:?} {ratio}");
                assert_eq!(c.requests.memory_bytes, c.limits.memory_bytes);
            }
        }
        // Halves round to the nearest millicore; a request is never 0 nor above the limit.
        let b = |cpu: u64, ratio: f64| ContainerResources::burstable("app", Resources::new(cpu, MIB), ratio).requests;
        assert_eq!(b(1125, 0.5).cpu_millicores, 563);
        assert_eq!(b(1, 0.3).cpu_millicores, 1);
        assert_eq!(b(1000, 1e-9).cpu_millicores, 1);
        assert_eq!(b(1000, 1.0), Resources::new(1000, MIB));
        assert_eq!(b(1000, 0.0), Resources::new(1000, MIB), "no ratio in (0, 1): Guaranteed");
    }
}
