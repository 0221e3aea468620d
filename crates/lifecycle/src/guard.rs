//! The safety guard every action passes, in every stage, whoever proposed it.
//!
//! Before a policy sees an observation the guard checks it: a non-finite number in it or in
//! the state, no CPU sample from any ready pod (missing metrics), or a backend clock that has
//! not moved for [`GuardConfig::stale_after_intervals`] intervals (stale metrics) all make the
//! fallback act for that interval instead of the agent. After the agent proposes an allocation
//! the guard clamps it to the app's bounds and caps how far one interval may move it: replicas
//! at most doubled (or +4, as HPA's default scale-up policy allows) and at least halved, CPU and
//! memory limits at most ×2 or ÷2, decreases held by a stabilisation window; and where the
//! fallback (asked every interval beside the agent) scales up, the agent's proposal is raised to
//! the fallback's, while a cut of CPU capacity goes no further than leaves the pods at the
//! utilisation where the fallback's HPA would scale straight back out ([`Guard::floor`]). Every
//! verdict is counted and carries its reason.
//!
//! The fallback's proposals pass unchanged ([`Guard::witness`] only remembers them for the
//! stabilisation window): they are the trusted behaviour, bounded by the same profile and
//! rate-limited by their own upstream rules (HPA's behavior policies, VPA's update rules).
//! Capping them a second time would make the bootstrapping data, and the safety net itself,
//! differ from the rule-based autoscaler operators already run — measured, it turned the MPA
//! default's 18 OOM kills on one app into 222.

use aware_core::{Bounds, MIB};
use aware_core::{ContainerResources, Observation, ObservationError, PodPhase, Recommendation, Resources};
use serde::Serialize;

#[derive(Debug, Clone, PartialEq)]
pub struct GuardConfig {
    /// Observations whose clock has not advanced for this many intervals are stale.
    pub stale_after_intervals: u32,
    /// Largest factor one interval may multiply replicas by (HPA's default scale-up: 100 %).
    pub max_replica_growth: f64,
    /// Replicas one interval may always add, whatever the factor (HPA's default: 4 pods).
    pub min_replica_step: u32,
    /// Largest factor one interval may multiply or divide a CPU or memory limit by.
    pub max_resource_factor: f64,
    /// Intervals a scale-down looks back over (HPA's downscale stabilisation, 5 minutes = 20
    /// intervals of 15 s): a decrease goes only as low as the highest proposal in the window,
    /// so a policy that wavers cannot shrink and regrow the app every interval.
    pub stabilisation_intervals: usize,
}

impl Default for GuardConfig {
    fn default() -> Self {
        Self {
            stale_after_intervals: 3,
            max_replica_growth: 2.0,
            min_replica_step: 4,
            max_resource_factor: 2.0,
            stabilisation_intervals: 20,
        }
    }
}

/// What the guard did with an interval's decision.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Verdict {
    /// The proposal went through unchanged.
    Passed,
    /// The proposal was clamped to the bounds, its step capped, raised to (or held under) the
    /// fallback's scale-up, or its cut held at the utilisation ceiling.
    Limited,
    /// The observation was unusable: the fallback acted instead of the agent.
    Fallback,
}

impl Verdict {
    pub fn name(self) -> &'static str {
        match self {
            Verdict::Passed => "passed",
            Verdict::Limited => "limited",
            Verdict::Fallback => "fallback",
        }
    }
}

/// Per-application guard state (the clock it last saw).
/// Why an observation must not reach the agent: the fallback acts for that interval instead.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[non_exhaustive]
pub enum Untrusted {
    #[error("state feature {feature} is {value}")]
    State { feature: usize, value: f32 },
    #[error("observation: {0}")]
    Observation(#[from] ObservationError),
    #[error("metrics stale: the clock has stood at {time_s} s for {intervals} intervals")]
    Stale { time_s: f64, intervals: u32 },
    #[error("metrics missing: none of {ready} ready pods has a CPU sample")]
    MissingMetrics { ready: usize },
}

#[derive(Debug, Clone)]
pub struct Guard {
    pub config: GuardConfig,
    last_time_s: Option<f64>,
    unchanged: u32,
    /// Recent proposals (replicas, CPU millicores, memory bytes), newest last.
    recent: std::collections::VecDeque<(u32, u64, u64)>,
}

impl Guard {
    pub fn new(config: GuardConfig) -> Self {
        Self { config, last_time_s: None, unchanged: 0, recent: std::collections::VecDeque::new() }
    }

    /// Forgets the clock and the recent proposals: a new simulator episode is a new cluster,
    /// whose first decreases must not be held against the previous episode's proposals.
    pub fn restart(&mut self) {
        *self = Self::new(self.config.clone());
    }

    /// Why `obs` (with its encoded `state`) must not reach the agent, if it must not.
    pub fn check(&mut self, obs: &Observation, state: &[f32]) -> Result<(), Untrusted> {
        // A clock that moved either way is live (backwards: the backend restarted an episode).
        let advanced = self.last_time_s.is_none_or(|t| obs.time_s != t);
        if advanced {
            self.unchanged = 0;
            self.last_time_s = Some(obs.time_s);
        } else {
            self.unchanged += 1;
        }
        if let Some(i) = state.iter().position(|v| !v.is_finite()) {
            return Err(Untrusted::State { feature: i, value: state[i] });
        }
        obs.validate()?;
        if self.unchanged >= self.config.stale_after_intervals {
            return Err(Untrusted::Stale { time_s: obs.time_s, intervals: self.unchanged });
        }
        let ready: Vec<_> = obs.pods.iter().filter(|p| p.phase == PodPhase::Ready && !p.deleting).collect();
        if !ready.is_empty() && ready.iter().all(|p| p.cpu_usage_cores.is_none()) {
            return Err(Untrusted::MissingMetrics { ready: ready.len() });
        }
        Ok(())
    }

    /// Remembers a proposal that acted without the guard's caps (the fallback's), so a later
    /// agent decrease is stabilised against it too.
    pub fn witness(&mut self, proposal: &Recommendation, current: &ContainerResources) {
        let template = proposal.containers.first().unwrap_or(current);
        self.remember((proposal.replicas, template.limits.cpu_millicores, template.limits.memory_bytes));
    }

    /// Forgets the last proposal remembered: it was never applied (the backend refused it), so
    /// it must not hold later decreases back.
    pub fn forget_last(&mut self) {
        self.recent.pop_back();
    }

    fn remember(&mut self, proposal: (u32, u64, u64)) {
        self.recent.push_back(proposal);
        while self.recent.len() > self.config.stabilisation_intervals.max(1) {
            self.recent.pop_front();
        }
    }

    /// `proposal` clamped to `bounds` and capped to one interval's step from the current
    /// `replicas` and `current` container; the reason when anything changed.
    pub fn limit(
        &mut self,
        proposal: &Recommendation,
        replicas: u32,
        current: &ContainerResources,
        bounds: &Bounds,
    ) -> (Recommendation, Option<String>) {
        let template = proposal.containers.first().unwrap_or(current);
        let wanted = (proposal.replicas, template.limits.cpu_millicores, template.limits.memory_bytes);
        self.remember(wanted);
        // Downscale stabilisation: a decrease stops at the highest recent proposal.
        let mut reasons = Vec::new();
        let highest = |f: fn(&(u32, u64, u64)) -> u64| self.recent.iter().map(f).max().unwrap_or(0);
        let stabilised = |want: u64, now: u64, high: u64, what: &str, reasons: &mut Vec<String>| {
            if want < now && high > want {
                let got = high.min(now);
                reasons.push(format!(
                    "{what} held at {got} by the {}-interval stabilisation window",
                    self.config.stabilisation_intervals
                ));
                got
            } else {
                want
            }
        };
        let want_replicas =
            stabilised(wanted.0 as u64, replicas as u64, highest(|p| p.0 as u64), "replicas", &mut reasons) as u32;
        let want_cpu =
            stabilised(wanted.1, current.limits.cpu_millicores, highest(|p| p.1), "cpu millicores", &mut reasons);
        let want_memory =
            stabilised(wanted.2, current.limits.memory_bytes, highest(|p| p.2), "memory bytes", &mut reasons);
        let c = &self.config;
        let up = ((replicas as f64 * c.max_replica_growth).ceil() as u32).max(replicas + c.min_replica_step);
        let down = replicas.div_ceil(2).max(1);
        let lo_r = bounds.min_replicas.max(down.min(bounds.max_replicas));
        let hi_r = bounds.max_replicas.min(up).max(lo_r);
        let new_replicas = want_replicas.clamp(lo_r, hi_r);
        if new_replicas != want_replicas {
            reasons.push(format!("replicas {want_replicas} → {new_replicas}"));
        }
        let scale = |now: u64, want: u64, min: u64, max: u64, what: &str, unit: u64, reasons: &mut Vec<String>| {
            let f = c.max_resource_factor;
            let lo = ((now as f64 / f).ceil() as u64).clamp(min, max);
            let hi = ((now as f64 * f).floor() as u64).clamp(lo, max);
            let got = want.clamp(lo, hi);
            if got != want {
                reasons.push(format!("{what} {} → {}", want / unit, got / unit));
            }
            got
        };
        let cpu = scale(
            current.limits.cpu_millicores,
            want_cpu,
            bounds.min_cpu_millicores,
            bounds.max_cpu_millicores,
            "cpu millicores",
            1,
            &mut reasons,
        );
        let memory = scale(
            current.limits.memory_bytes,
            want_memory,
            bounds.min_memory_bytes(),
            bounds.max_memory_bytes(),
            "memory MiB",
            MIB,
            &mut reasons,
        );
        let rec = Recommendation {
            replicas: new_replicas,
            containers: vec![ContainerResources::guaranteed(template.name.clone(), Resources::new(cpu, memory))],
        };
        (rec, (!reasons.is_empty()).then(|| reasons.join(", ")))
    }

    /// An agent's `proposal` [`Guard::limit`]ed, then, when the fallback's proposal for the same
    /// interval is given, [`Guard::floor`]ed under it; the reasons of both, when anything changed.
    pub fn limit_under(
        &mut self,
        proposal: &Recommendation,
        fallback: Option<Floor<'_>>,
        replicas: u32,
        current: &ContainerResources,
        bounds: &Bounds,
    ) -> (Recommendation, Option<String>) {
        let (rec, limited) = self.limit(proposal, replicas, current, bounds);
        let (rec, raised) = match fallback {
            Some(f) => self.floor(rec, f, replicas, current, bounds),
            None => (rec, None),
        };
        let why: Vec<String> = limited.into_iter().chain(raised).collect();
        (rec, (!why.is_empty()).then(|| why.join("; ")))
    }

    /// `rec` (already [`Guard::limit`]ed) under the fallback's scale-ups: wherever the fallback
    /// asks to grow a dimension beyond the current allocation (`replicas`, `current`) the agent's
    /// proposal is raised to the fallback's, and while it grows any, no dimension shrinks (a
    /// CPU cut the fallback does not manage would otherwise undo its scale-out). The agent may
    /// save where the rules hold or shrink, but never refuses a scale-up they make under
    /// pressure. The fallback's value passes uncapped, as its own proposals do. The reason when
    /// anything was raised or held.
    ///
    /// Only through [`Guard::limit_under`], right after [`Guard::limit`] of the same proposal: it
    /// replaces the proposal `limit` remembered with what acts. Held values stay within `bounds`.
    ///
    /// The floor only knows what the fallback proposes: a dimension it never grows (CPU limits,
    /// with the MPA default, which scales CPU out by replicas) is held under pressure but never
    /// restored by it; the step caps, the stabilisation window and the stage checks bound it.
    ///
    /// Nor may the agent cut CPU capacity (replicas × CPU limit) so far that the pods, at the
    /// CPU they use now, would run above [`Floor::ceiling`], where the rules would scale straight
    /// back out: the cut is held at the capacity that meets it (replicas restored first, then
    /// CPU), never above the current allocation. Without it an agent that wants fewer replicas
    /// than HPA's target gives sawed the app: its cut landed once the stabilisation window let
    /// it, the pods ran at 75–80 % CPU, and the SLO was missed until the fallback's scale-up
    /// restored them (`fig10 --quick`, seeds 14 and 18: most of AWARE's violations above MPA's).
    fn floor(
        &mut self,
        rec: Recommendation,
        floor: Floor<'_>,
        replicas: u32,
        current: &ContainerResources,
        bounds: &Bounds,
    ) -> (Recommendation, Option<String>) {
        let fallback = floor.ask;
        let ask = fallback.containers.first().unwrap_or(current).limits;
        let got = rec.containers.first().unwrap_or(current);
        // The current allocation as far as the bounds allow (a profile changed under a running
        // app can leave it outside them): what "no dimension shrinks" holds to.
        let now = (
            (replicas as u64).clamp(bounds.min_replicas as u64, bounds.max_replicas as u64),
            current.limits.cpu_millicores.clamp(bounds.min_cpu_millicores, bounds.max_cpu_millicores),
            current.limits.memory_bytes.clamp(bounds.min_memory_bytes(), bounds.max_memory_bytes()),
        );
        let fb = (fallback.replicas as u64, ask.cpu_millicores, ask.memory_bytes);
        let pressure = fb.0 > now.0 || fb.1 > now.1 || fb.2 > now.2;
        let mut reasons = Vec::new();
        let mut raise = |want: u64, now: u64, fb: u64, what: &str, unit: u64| {
            if fb > now && fb > want {
                reasons.push(format!("{what} {} → {}", want / unit, fb / unit));
                fb
            } else if pressure && want < now {
                reasons.push(format!("{what} held at {}", now / unit));
                now
            } else {
                want
            }
        };
        let mut new_replicas = raise(rec.replicas as u64, now.0, fb.0, "replicas", 1) as u32;
        let mut cpu = raise(got.limits.cpu_millicores, now.1, fb.1, "cpu millicores", 1);
        let memory = raise(got.limits.memory_bytes, now.2, fb.2, "memory MiB", MIB);
        let (capacity_now, capacity) = (now.0 as f64 * now.1 as f64, new_replicas as f64 * cpu as f64);
        if let Some(u) = floor.utilisation.filter(|u| u.is_finite() && *u > 0.0)
            && capacity < capacity_now
            && u * capacity_now > floor.ceiling * capacity
        {
            let need = (u * capacity_now / floor.ceiling).min(capacity_now);
            // Between the proposal and the current allocation (the proposal may add replicas
            // while it cuts CPU, or raise CPU while it cuts replicas).
            let r =
                ((need / cpu.max(1) as f64).ceil() as u64).clamp(new_replicas as u64, now.0.max(new_replicas as u64));
            if (r as f64 * cpu as f64) < need {
                cpu = ((need / r.max(1) as f64).ceil() as u64).clamp(cpu, now.1.max(cpu));
            }
            reasons.push(format!(
                "capacity cut held at {} replicas of {} millicores (CPU at {:.0} % now; {:.0} % at most after a cut)",
                r,
                cpu,
                u * 100.0,
                floor.ceiling * 100.0
            ));
            new_replicas = r as u32;
        }
        if reasons.is_empty() {
            return (rec, None);
        }
        let raised = Recommendation {
            replicas: new_replicas,
            containers: vec![ContainerResources::guaranteed(got.name.clone(), Resources::new(cpu, memory))],
        };
        // The stabilisation window remembers what acts, not what the agent asked for.
        self.recent.pop_back();
        self.remember((raised.replicas, cpu, memory));
        (raised, Some(format!("held by the fallback's floor: {}", reasons.join(", "))))
    }
}

/// HPA's default tolerance around its target utilisation (`--horizontal-pod-autoscaler-tolerance`,
/// the baselines' `Tolerances::default().scale_up`): it scales out once utilisation exceeds the
/// target by more than this share. (On a live backend whose pods request less than their
/// limits HPA measures against requests, so there the ceiling is looser than HPA's.)
pub const HPA_TOLERANCE: f64 = 0.1;

/// The fallback's floor under an agent's proposal ([`Guard::limit_under`]): its proposal for
/// the same interval, the pods' CPU utilisation now, and the hottest utilisation a cut may
/// leave them at.
#[derive(Debug, Clone, Copy)]
pub struct Floor<'a> {
    pub ask: &'a Recommendation,
    /// Mean CPU use over limit of the ready pods ([`Observation::cpu_utilisation`]); `None`
    /// without a sample (no cut is then held for it).
    pub utilisation: Option<f64>,
    pub ceiling: f64,
}

impl<'a> Floor<'a> {
    /// The floor of `ask` for `obs`, the ceiling HPA's own: the profile's CPU `target` plus
    /// [`HPA_TOLERANCE`], beyond which the rules scale straight back out.
    pub fn new(ask: &'a Recommendation, obs: &Observation, target: f64) -> Self {
        Self { ask, utilisation: obs.cpu_utilisation(), ceiling: target * (1.0 + HPA_TOLERANCE) }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use aware_core::Profile;
    use proptest::prelude::*;

    fn container(cpu: u64, mib: u64) -> ContainerResources {
        ContainerResources::guaranteed("app", Resources::new(cpu, mib * MIB))
    }

    fn rec(replicas: u32, cpu: u64, mib: u64) -> Recommendation {
        Recommendation { replicas, containers: vec![container(cpu, mib)] }
    }

    #[test]
    fn step_caps_table() {
        let bounds = Profile::default().bounds;
        // (replicas now, proposed, allowed)
        let cases = [(3, 3, 3), (3, 20, 7), (10, 20, 20), (10, 1, 5), (1, 20, 5), (3, 0, 2)];
        for (now, want, got) in cases {
            let mut g = Guard::new(GuardConfig::default());
            let (out, why) = g.limit(&rec(want, 1000, 512), now, &container(1000, 512), &bounds);
            let expected = got.clamp(bounds.min_replicas, bounds.max_replicas);
            assert_eq!(out.replicas, expected, "{now} → {want}");
            assert_eq!(why.is_some(), expected != want, "{now} → {want}: {why:?}");
        }
        let mut g = Guard::new(GuardConfig::default());
        let (out, why) = g.limit(&rec(3, 4000, 64), 3, &container(1000, 512), &bounds);
        assert_eq!(out.containers[0].limits.cpu_millicores, 2000);
        assert_eq!(out.containers[0].limits.memory_bytes, 256 * MIB);
        assert!(why.unwrap().contains("cpu"));
    }

    proptest! {
        #[test]
        fn limited_allocations_stay_in_bounds_and_within_a_step(
            now in 1u32..200, want in 0u32..1000, cpu_now in 100u64..8000, cpu in 0u64..100_000,
            mem_now in 64u64..8192, mem in 0u64..100_000,
        ) {
            let bounds = Bounds { max_replicas: 150, ..Profile::default().bounds };
            let mut g = Guard::new(GuardConfig::default());
            let (out, _) = g.limit(&rec(want, cpu, mem), now, &container(cpu_now, mem_now), &bounds);
            let c = &out.containers[0].limits;
            prop_assert!((bounds.min_replicas..=bounds.max_replicas).contains(&out.replicas));
            prop_assert!((bounds.min_cpu_millicores..=bounds.max_cpu_millicores).contains(&c.cpu_millicores));
            prop_assert!((bounds.min_memory_bytes()..=bounds.max_memory_bytes()).contains(&c.memory_bytes));
            let up = (now * 2).max(now + 4);
            prop_assert!(out.replicas <= up.max(bounds.min_replicas));
            prop_assert!(out.replicas >= now.div_ceil(2).min(bounds.max_replicas).max(bounds.min_replicas));
        }
    }

    proptest! {
        /// Whatever the proposal (cuts and growth mixed across dimensions), the ceiling never
        /// panics, moves each dimension only between the proposal and the current allocation,
        /// and leaves no less capacity than the pods need at the ceiling (or the current
        /// capacity, if less).
        #[test]
        fn a_held_cut_lies_between_the_proposal_and_now(
            now in 1u32..60, want in 1u32..120, cpu_now in 100u64..4000, cpu in 50u64..8000,
            u in 0.01f64..1.5, ceiling in 0.1f64..1.0,
        ) {
            let bounds = Bounds { max_replicas: 150, ..Profile::default().bounds };
            let holding = rec(now, cpu_now, 512);
            let mut g = Guard::new(GuardConfig::default());
            let proposal = rec(want, cpu, 512);
            let floor = Floor { ask: &holding, utilisation: Some(u), ceiling };
            let (out, _) = g.floor(proposal, floor, now, &container(cpu_now, 512), &bounds);
            let got = out.containers[0].limits.cpu_millicores;
            prop_assert!(out.replicas >= want && out.replicas <= want.max(now));
            prop_assert!(got >= cpu && got <= cpu.max(cpu_now));
            let (capacity_now, capacity) = (now as f64 * cpu_now as f64, out.replicas as f64 * got as f64);
            if (want as f64 * cpu as f64) < capacity_now {
                prop_assert!(capacity + 1e-6 >= (u * capacity_now / ceiling).min(capacity_now));
            }
        }
    }

    #[test]
    fn a_wavering_policy_cannot_shrink_within_the_window() {
        let bounds = Profile::default().bounds;
        let mut g = Guard::new(GuardConfig { stabilisation_intervals: 3, ..GuardConfig::default() });
        let c = container(1000, 512);
        // Up to 8, then proposals of 4: held at 8 until the 8 leaves the 3-interval window.
        assert_eq!(g.limit(&rec(8, 1000, 512), 6, &c, &bounds).0.replicas, 8);
        let (out, why) = g.limit(&rec(4, 1000, 512), 8, &c, &bounds);
        assert_eq!(out.replicas, 8);
        assert!(why.unwrap().contains("stabilisation"));
        assert_eq!(g.limit(&rec(4, 1000, 512), 8, &c, &bounds).0.replicas, 8);
        assert_eq!(g.limit(&rec(4, 1000, 512), 8, &c, &bounds).0.replicas, 4);
        // Increases are never held back by the window.
        assert_eq!(g.limit(&rec(6, 1000, 512), 4, &c, &bounds).0.replicas, 6);
    }

    #[test]
    fn the_fallbacks_scale_ups_floor_the_agent_table() {
        // Now 4 replicas × (1000 m, 512 MiB). (agent's proposal, fallback's, what acts)
        let cases = [
            // The fallback holds or shrinks: the agent's proposal stands, even below it.
            (rec(3, 800, 512), rec(4, 1000, 512), rec(3, 800, 512)),
            (rec(2, 1000, 256), rec(3, 900, 400), rec(2, 1000, 256)),
            // The fallback scales out: replicas at least its ask, and nothing shrinks meanwhile.
            (rec(3, 800, 512), rec(6, 1000, 512), rec(6, 1000, 512)),
            (rec(5, 1200, 256), rec(6, 1000, 512), rec(6, 1200, 512)),
            // It grows memory (an OOM kill) and CPU: both raised, replicas the agent's.
            (rec(5, 1000, 512), rec(4, 1500, 1024), rec(5, 1500, 1024)),
            // The agent already asks for more than the fallback: nothing to raise.
            (rec(8, 2000, 2048), rec(6, 1500, 1024), rec(8, 2000, 2048)),
        ];
        for (agent, fallback, want) in cases {
            let mut g = Guard::new(GuardConfig::default());
            let floor = Floor { ask: &fallback, utilisation: None, ceiling: 0.55 };
            let (out, why) = g.floor(agent.clone(), floor, 4, &container(1000, 512), &Profile::default().bounds);
            assert_eq!(out.replicas, want.replicas, "{agent:?} / {fallback:?}");
            assert_eq!(out.containers[0].limits, want.containers[0].limits, "{agent:?} / {fallback:?}");
            assert_eq!(why.is_some(), want != agent, "{agent:?} / {fallback:?}: {why:?}");
            if let Some(why) = why {
                assert!(why.contains("fallback's floor"), "{why}");
            }
        }
    }

    /// Where the fallback holds, an agent's cut of CPU capacity (replicas × CPU limit) goes only
    /// as far as leaves the pods, at the CPU they use now, at or below the ceiling: replicas are
    /// restored first, then CPU, never beyond the current allocation.
    #[test]
    fn a_cut_never_leaves_the_pods_above_the_ceiling_table() {
        // Now 4 replicas × 1000 m; the fallback holds; ceiling 55 %.
        // (CPU utilisation now, agent's proposal, what acts)
        let cases = [
            // At 50 % any cut of capacity runs them above 55 %: held at the current capacity.
            (Some(0.5), rec(2, 1000, 512), rec(4, 1000, 512)),
            (Some(0.5), rec(3, 1000, 512), rec(4, 1000, 512)),
            // A CPU cut: replicas cannot make up for it beyond the current 4, so CPU is restored
            // to ⌈0.5 × 4000 / 0.55 / 4⌉ = 910 m.
            (Some(0.5), rec(4, 600, 512), rec(4, 910, 512)),
            // At 30 % a cut to 3 leaves them at 40 %: it stands; one to 2 (60 %) is held at 3.
            (Some(0.3), rec(3, 1000, 512), rec(3, 1000, 512)),
            (Some(0.3), rec(2, 1000, 512), rec(3, 1000, 512)),
            // Already above the ceiling: the cut is refused, nothing grows by this rule.
            (Some(0.9), rec(3, 1000, 512), rec(4, 1000, 512)),
            // Growing, or cutting memory alone, is no cut of CPU capacity.
            (Some(0.5), rec(5, 1000, 512), rec(5, 1000, 512)),
            (Some(0.5), rec(4, 1000, 256), rec(4, 1000, 256)),
            // No CPU sample: nothing to predict with, the cut stands.
            (None, rec(2, 1000, 512), rec(2, 1000, 512)),
            // More replicas of much less CPU is still a cut of capacity (3000 m of 4000 m, the
            // pods at 60 %, already above the ceiling): the replicas stay the agent's 6, the CPU
            // goes back until the capacity is the current one, ⌈4000 / 6⌉ m.
            (Some(0.6), rec(6, 500, 512), rec(6, 667, 512)),
        ];
        let holding = rec(4, 1000, 512);
        for (utilisation, agent, want) in cases {
            let mut g = Guard::new(GuardConfig::default());
            let floor = Floor { ask: &holding, utilisation, ceiling: 0.55 };
            let (out, why) = g.floor(agent.clone(), floor, 4, &container(1000, 512), &Profile::default().bounds);
            assert_eq!(out.replicas, want.replicas, "{utilisation:?} {agent:?}");
            assert_eq!(out.containers[0].limits, want.containers[0].limits, "{utilisation:?} {agent:?}");
            assert_eq!(why.is_some(), want != agent, "{utilisation:?} {agent:?}: {why:?}");
            if let Some(why) = why {
                assert!(why.contains("capacity cut held at") && why.contains("55 % at most"), "{why}");
            }
        }
        // The ceiling is HPA's: the profile's target plus its tolerance.
        let obs = observation(15.0, Some(0.1));
        let f = Floor::new(&holding, &obs, 0.5);
        assert!((f.ceiling - 0.55).abs() < 1e-12, "{}", f.ceiling);
        assert!(f.utilisation.is_some() && f.utilisation == obs.cpu_utilisation());
        assert_eq!(Floor::new(&holding, &observation(15.0, None), 0.5).utilisation, None);
    }

    #[test]
    fn a_raised_allocation_holds_later_decreases_in_the_window() {
        let bounds = Profile::default().bounds;
        let mut g = Guard::new(GuardConfig { stabilisation_intervals: 3, ..GuardConfig::default() });
        let c = container(1000, 512);
        let (limited, _) = g.limit(&rec(4, 1000, 512), 4, &c, &bounds);
        let ask = rec(8, 1000, 512);
        let (raised, _) = g.floor(limited, Floor { ask: &ask, utilisation: None, ceiling: 0.55 }, 4, &c, &bounds);
        assert_eq!(raised.replicas, 8);
        // The agent asks for 4 again: held at 8, what acted, not what it asked for.
        assert_eq!(g.limit(&rec(4, 1000, 512), 8, &c, &bounds).0.replicas, 8);
    }

    fn observation(time_s: f64, cpu: Option<f64>) -> Observation {
        use aware_core::Cluster;
        let apps = aware_sim::generate_apps(1, 7, 86_400.0);
        let mut c = aware_sim::SimCluster::new(apps, Vec::new(), aware_sim::SimConfig::default(), 7);
        for _ in 0..8 {
            c.advance().unwrap();
        }
        let mut obs = c.observe(0).unwrap();
        assert!(obs.pods.iter().any(|p| p.phase == PodPhase::Ready));
        obs.time_s = time_s;
        for p in &mut obs.pods {
            p.cpu_usage_cores = cpu;
        }
        obs
    }

    #[test]
    fn unusable_observations_are_refused_with_a_reason() {
        let mut g = Guard::new(GuardConfig::default());
        assert!(g.check(&observation(15.0, Some(0.5)), &[0.1, 0.2]).is_ok());
        let e = g.check(&observation(30.0, Some(0.5)), &[f32::NAN, 0.2]).unwrap_err();
        assert!(matches!(e, Untrusted::State { feature: 0, .. }), "{e}");
        assert!(e.to_string().contains("state feature 0"), "{e}");
        let e = g.check(&observation(45.0, None), &[0.1]).unwrap_err();
        assert!(matches!(e, Untrusted::MissingMetrics { ready } if ready > 0), "{e}");
        assert!(e.to_string().contains("metrics missing"), "{e}");
        let e = g.check(&observation(60.0, Some(f64::NAN)), &[0.1]).unwrap_err();
        assert!(matches!(e, Untrusted::Observation(ObservationError::NotFinite { .. })), "{e}");
        // The clock stops: fine for two intervals, stale on the third.
        assert!(g.check(&observation(60.0, Some(0.5)), &[0.1]).is_ok());
        assert!(g.check(&observation(60.0, Some(0.5)), &[0.1]).is_ok());
        let e = g.check(&observation(60.0, Some(0.5)), &[0.1]).unwrap_err();
        assert!(matches!(e, Untrusted::Stale { intervals: 3, .. }), "{e}");
        assert!(e.to_string().contains("stale"), "{e}");
        assert!(g.check(&observation(75.0, Some(0.5)), &[0.1]).is_ok());
        // A clock that went back (a new episode) is live.
        assert!(g.check(&observation(15.0, Some(0.5)), &[0.1]).is_ok());
        assert!(g.check(&observation(30.0, Some(0.5)), &[0.1]).is_ok());
    }
}
