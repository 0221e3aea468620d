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
//! the fallback's ([`Guard::floor`]), and, with the floor, a cut that would leave less than the
//! measured usage plus VPA's 15 % safety margin (or past the point where the fallback's HPA would
//! scale straight back up) is undone ([`Guard::fit_usage`]), and once the app has missed its
//! SLO in two intervals in a row no replica or CPU cut goes below what last met it, for a while
//! longer each time the same cut is refused ([`Guard::keep_slo`]), and while it is met no
//! replica or CPU growth is made where the fallback's HPA would scale down
//! ([`Guard::hold_idle_growth`]). An
//! observation with no ready pod (nothing serves: pods starting, pending or crash-looping) has
//! no utilisation to act on, so the fallback acts for it too, where it has watched every
//! interval ([`GuardConfig::refuse_not_serving`]). Every verdict is counted and carries its reason.
//!
//! The fallback's proposals are not capped ([`Guard::witness`] only remembers them for the
//! stabilisation window): they are the trusted behaviour, bounded by the same profile and
//! rate-limited by their own upstream rules (HPA's behavior policies, VPA's update rules).
//! Capping them a second time would make the bootstrapping data, and the safety net itself,
//! differ from the rule-based autoscaler operators already run — measured, it turned the MPA
//! default's 18 OOM kills on one app into 222. Two rules reach them, where the rules cannot
//! help themselves after an agent handed an app back: after an OOM kill no proposal goes below
//! the killed limit bumped as VPA bumps it ([`Guard::keep_oom_floor`]; VPA's histogram of many
//! small pods' peaks can keep recommending the limit just killed), and once none of the app's
//! pods has had a node for a while its proposal goes back to what the pods last ran
//! ([`Guard::roll_back_unplaced`]; with nothing running the rules measure nothing), spread
//! over smaller pods where that does not get one placed and CPU is what no node has.

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
    /// Whether an observation with no ready pod is refused ([`Untrusted::NotServing`]): only
    /// where the fallback has watched every interval (the floor asks it each one, so its HPA
    /// and VPA state is current when it takes over). The policy alone (`no-bootstrap`, the
    /// `converged` reference) asks its fallback only when it must act, and that cold fallback,
    /// acting on an app that is down, did worse than the agent: on `fig10 --quick` seeds
    /// 77–80 and 83 `no-bootstrap` had 240 / 284 / 696 / 530 / 328 SLO-violating intervals
    /// with it against 242 / 170 / 445 / 401 / 22 without. Not a profile setting.
    pub refuse_not_serving: bool,
    /// Cores a replica or CPU cut must leave per core the ready pods use ([`Guard::fit_usage`]):
    /// 1 + [`USAGE_MARGIN`] (VPA's safety margin), or, under a fallback that scales replicas
    /// by HPA on CPU utilisation, HPA's own scale-up point ([`hpa_cut_headroom`]): a cut past it
    /// is one the fallback undoes at its next look, through the floor.
    pub cpu_cut_headroom: f64,
    /// How long an OOM kill holds the memory limit up ([`Guard::keep_oom_floor`]), seconds
    /// (the profile's `guard.oom_hold_s`; by default VPA's memory aggregation interval, 24 h,
    /// for which its recommender keeps an OOM kill as the container's memory peak). 0: no
    /// floor. Like the fallback's floor, it is part of the rules' net:
    /// [`GuardConfig::for_agent`] keeps it only where the fallback floors the agent (the policy
    /// alone, `no-bootstrap` and the `converged` reference, learns its own memory).
    pub oom_hold_s: f64,
    /// Seconds of backend time with none of the app's pods on a node after which the
    /// fallback's proposals go back to what its pods last ran ready
    /// ([`Guard::roll_back_unplaced`]; the profile's `guard.unplaced_grace_s`, 2 minutes by
    /// default): time for a node to come, short of an outage. Each further grace (at least
    /// [`MIN_SPREAD_STEP_S`]) with no pod placed halves the pods' CPU where CPU is short
    /// ([`Guard::roll_back_unplaced_keeping`]).
    pub unplaced_grace_s: f64,
    /// The most an agent's proposal may reserve as a multiple of the fallback's proposal of the
    /// same interval ([`Guard::cap`]; the profile's `guard.fallback_ceiling`). 0: no ceiling.
    /// Like the fallback's floor, it is part of the rules' net: [`GuardConfig::for_agent`]
    /// keeps it only where the fallback floors the agent.
    pub fallback_ceiling: f64,
    /// Whether a replica or CPU cut the SLO does not fit is rolled back ([`Guard::keep_slo`]):
    /// once the app has missed its SLO in [`SLO_ROLL_BACK_AFTER`] intervals in a row, no
    /// proposal goes below the replicas and CPU limit of the last interval that met it. Like
    /// the fallback's floor, it is part of the rules' net: [`GuardConfig::for_agent`] keeps it
    /// only where the fallback floors the agent. A roll-back is remembered for a while, longer
    /// each time the same cut is refused again.
    pub slo_roll_back: bool,
    /// Cores per core in use at or above which an agent's growth of replicas or CPU is held
    /// while the SLO is met ([`Guard::hold_idle_growth`]): under a fallback that scales replicas
    /// by HPA, HPA's scale-down point ([`hpa_idle_headroom`]). 0: off. Like the fallback's
    /// floor, it is part of the rules' net: [`GuardConfig::for_agent`] sets it only where the
    /// fallback floors the agent.
    pub idle_growth_headroom: f64,
}

/// Intervals in a row the SLO must have been missed before [`Guard::keep_slo`] rolls a cut back
/// (one can be a pod restarting after a resize).
pub const SLO_ROLL_BACK_AFTER: u32 = 2;

/// Observations [`Guard::note_slo`] looks back over for what served an interval reported as
/// meeting the SLO: the metrics can be this many intervals, less one, behind the pods.
pub const SLO_MET_LOOKBACK: usize = 4;

/// Intervals a cut the SLO refused stays refused after its first roll-back, as a multiple of
/// the stabilisation window ([`Guard::keep_slo`]): each further roll-back while one is
/// remembered doubles the hold, up to [`SLO_REFUSAL_MAX_DOUBLINGS`] times.
pub const SLO_REFUSAL_HOLD_WINDOWS: usize = 2;

/// How many times a repeated roll-back doubles the hold of a refused cut ([`Guard::keep_slo`]):
/// 2 windows, then 4, 8, … up to 2⁵ × 2 = 64 windows (5 h 20 min of 15 s intervals with
/// HPA's 20-interval window), the order of VPA's 24 h memory of an OOM kill.
pub const SLO_REFUSAL_MAX_DOUBLINGS: u32 = 5;

/// Intervals after a refusal's hold has run out, beyond as long again as the hold, in which a
/// roll-back is still a repeat of it ([`Guard::keep_slo`]): the cut made again once the hold
/// lets it, an interval for the metrics lag, and the [`SLO_ROLL_BACK_AFTER`] misses a
/// roll-back takes.
pub const SLO_REFUSAL_REPEAT_SLACK: u64 = SLO_ROLL_BACK_AFTER as u64 + 1;

/// A replica and CPU floor the SLO set ([`Guard::keep_slo`]): what last met it, when a cut
/// below it missed it.
#[derive(Debug, Clone, Copy, PartialEq)]
struct SloRefusal {
    replicas: u32,
    cpu_millicores: u64,
    /// The last interval ([`Guard::note_slo`]'s count) it holds in.
    until: u64,
    /// Intervals it was set to hold for at its last roll-back; once as many more have passed
    /// after `until`, and the [`SLO_REFUSAL_REPEAT_SLACK`] a repeat takes to be rolled back,
    /// without another, it is forgotten, counts and all.
    hold: u64,
    /// Roll-backs since it was first made (1 at the first).
    times: u32,
}

impl SloRefusal {
    /// Intervals it holds for yet, the interval `now` included (0: run out).
    fn left(&self, now: u64) -> u64 {
        (self.until + 1).saturating_sub(now)
    }
}

/// The cores per core in use below which HPA, targeting `cpu_target` utilisation, scales up:
/// its usage ratio (utilisation over target) beyond 1 + the scale-up tolerance (upstream's
/// 0.1, [`aware_baselines::Tolerances`]). Never below 1 + [`USAGE_MARGIN`].
pub fn hpa_cut_headroom(cpu_target: f64) -> f64 {
    let tolerance = aware_baselines::Tolerances::default().scale_up;
    (1.0 / (cpu_target * (1.0 + tolerance))).max(1.0 + USAGE_MARGIN)
}

/// The cores per core in use above which HPA, targeting `cpu_target` utilisation, scales down:
/// its usage ratio below 1 − the scale-down tolerance (upstream's 0.1,
/// [`aware_baselines::Tolerances`]).
pub fn hpa_idle_headroom(cpu_target: f64) -> f64 {
    let tolerance = aware_baselines::Tolerances::default().scale_down;
    1.0 / (cpu_target * (1.0 - tolerance))
}

impl GuardConfig {
    /// The profile's `guard:` section for an agent whose proposals the fallback floors
    /// (`fallback_floor`): only then is a down app handed to the fallback, and, when the
    /// fallback decides replicas by HPA (`hpa_target`: the profile's CPU utilisation target),
    /// a replica or CPU cut the fallback would undo at once is not made.
    ///
    /// Why: the floor raises the agent's proposal wherever the fallback scales up, so a cut
    /// that takes the app past HPA's scale-up point is undone a few intervals later, when the
    /// metrics show it; the agent then cuts again once the stabilisation window lets it, each
    /// turn a replica stopped and started again, with the latency of the intervals in between.
    /// Measured with `aware run --apps 4 --seed S --steps 2000` on seeds 77–108, holding such
    /// cuts took AWARE's direction reversals from 4,053 to 2,583 (MPA's: 1,598), its SLO-violating
    /// intervals from 1,070 to 888 (MPA's: 1,052) and its core-seconds down by 0.7 %.
    pub fn for_agent(g: &aware_core::GuardLimits, fallback_floor: bool, hpa_target: Option<f64>) -> Self {
        let (cpu_cut_headroom, idle_growth_headroom) = match hpa_target {
            Some(t) if fallback_floor => (hpa_cut_headroom(t), hpa_idle_headroom(t)),
            _ => (1.0 + USAGE_MARGIN, 0.0),
        };
        let base = Self::from(g);
        // The floor after an OOM kill comes with the rules' net, as the fallback's floor does.
        let oom_hold_s = if fallback_floor { base.oom_hold_s } else { 0.0 };
        let fallback_ceiling = if fallback_floor { base.fallback_ceiling } else { 0.0 };
        Self {
            refuse_not_serving: fallback_floor,
            cpu_cut_headroom,
            oom_hold_s,
            fallback_ceiling,
            slo_roll_back: fallback_floor,
            idle_growth_headroom,
            ..base
        }
    }
}

impl Default for GuardConfig {
    fn default() -> Self {
        Self::from(&aware_core::GuardLimits::default())
    }
}

/// The profile's `guard:` section.
impl From<&aware_core::GuardLimits> for GuardConfig {
    fn from(g: &aware_core::GuardLimits) -> Self {
        Self {
            stale_after_intervals: g.stale_after_intervals,
            max_replica_growth: g.max_replica_growth,
            min_replica_step: g.min_replica_step,
            max_resource_factor: g.max_resource_factor,
            stabilisation_intervals: g.stabilisation_intervals as usize,
            refuse_not_serving: false,
            cpu_cut_headroom: 1.0 + USAGE_MARGIN,
            oom_hold_s: g.oom_hold_s,
            unplaced_grace_s: g.unplaced_grace_s,
            fallback_ceiling: g.fallback_ceiling,
            slo_roll_back: false,
            idle_growth_headroom: 0.0,
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
    /// fallback's scale-up or above the floor an OOM kill left, or a cut the measured usage
    /// does not fit undone.
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
    #[error("metrics missing: none of {ready} ready pods has a usage sample")]
    MissingMetrics { ready: usize },
    #[error(
        "nothing serves: none of {pods} pods is ready (starting, pending or failing), so no utilisation was measured"
    )]
    NotServing { pods: usize },
}

/// What the app's ready pods used in the interval, as measured: the floor under the agent's cuts
/// ([`Guard::fit_usage`]).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Usage {
    /// CPU cores in use, summed over the ready pods with a sample (a throttled pod reports its
    /// limit: demand beyond it is not seen, so this is a lower bound).
    pub cpu_cores: f64,
    /// The largest working set of one ready pod, bytes.
    pub memory_bytes: f64,
    /// The CPU limits, cores, of the pods `cpu_cores` was measured over (`None`: not known, or
    /// one of them has no limit;
    /// [`Guard::hold_idle_growth`] then reads the desired allocation). Below the desired
    /// replicas × limit while pods start or wait for a node.
    pub serving_cores: Option<f64>,
}

impl Usage {
    /// The usage of `obs`'s ready pods with a sample; `None` when none has one.
    pub fn of(obs: &Observation) -> Option<Usage> {
        let sampled = serving_pods(obs).filter_map(|p| {
            Some((p.cpu_usage_cores?, p.memory_working_set_bytes?, p.resources.limits.cpu_millicores))
                .filter(|(c, m, _)| c.is_finite() && m.is_finite())
        });
        sampled.fold(None, |u: Option<Usage>, (c, m, limit)| {
            let u = u.unwrap_or(Usage { cpu_cores: 0.0, memory_bytes: 0.0, serving_cores: Some(0.0) });
            Some(Usage {
                cpu_cores: u.cpu_cores + c,
                memory_bytes: u.memory_bytes.max(m),
                // A pod without a CPU limit (0) has no cores to count: not known.
                serving_cores: u.serving_cores.filter(|_| limit > 0).map(|s| s + limit as f64 / 1000.0),
            })
        })
    }
}

/// Observations further apart than this many intervals have a gap between them (the backend
/// gave none): what happened in it is not known.
pub const MAX_OBSERVATION_GAP_INTERVALS: f64 = 1.5;

/// The margin a cut must leave above the measured usage: VPA's recommender's safety margin
/// (`SAFETY_MARGIN_FRACTION`, 15 %), which it adds to its own estimate for the same reason.
pub const USAGE_MARGIN: f64 = aware_baselines::estimator::SAFETY_MARGIN_FRACTION;

#[derive(Debug, Clone)]
pub struct Guard {
    pub config: GuardConfig,
    last_time_s: Option<f64>,
    unchanged: u32,
    /// Recent proposals (replicas, CPU millicores, memory bytes), newest last.
    recent: std::collections::VecDeque<(u32, u64, u64)>,
    /// The proposals are an exploring agent's ([`Guard::set_exploring`]): its decreases are
    /// not held by the stabilisation window.
    exploring: bool,
    /// The memory limit an OOM kill proved too small, bumped as VPA bumps it, and the backend
    /// time until which no proposal goes below it ([`Guard::keep_oom_floor`]).
    oom_floor: Option<OomFloor>,
    /// What the app's ready pods last ran: their number and each resource's largest limit.
    last_ready: Option<(u32, u64, u64)>,
    /// Since when (backend time) the app has had pods and none of them on a node: the last
    /// observation before that showed one placed (else the first that showed none).
    unplaced_since_s: Option<f64>,
    /// Whether the app's pods have nodes again after the roll-back but none is ready yet (the
    /// spell goes on: [`Guard::note_placement`]).
    placed_starting: bool,
    /// Whether none of the app's pods has had a node since an observation in which the
    /// scheduler said one of them found a node with room for its memory but not its CPU
    /// ([`aware_core::Unschedulable`]).
    cpu_short_where_memory_fits: bool,
    /// When an observation last showed one of the app's pods placed (or none pending).
    last_placed_s: Option<f64>,
    /// Intervals in a row that missed the SLO ([`Guard::note_slo`]).
    slo_missed: u32,
    /// The replicas and CPU limit of the last interval that met the SLO with a pod serving.
    slo_last_met: Option<(u32, u64)>,
    /// The ready pods' number and largest CPU limit at the last notes ([`Guard::note_slo`]),
    /// newest last; `None` where none was ready.
    slo_serving: std::collections::VecDeque<Option<(u32, u64)>>,
    /// The floor the last roll-back set, held for a while ([`Guard::keep_slo`]).
    slo_refused: Option<SloRefusal>,
    /// Intervals noted ([`Guard::note_slo`]): the clock a refusal's hold is counted on.
    slo_intervals: u64,
    /// Whether the proposals are an exploring agent's ([`Guard::set_explores`]).
    explores: bool,
}

/// The pods of `obs` that serve: ready and not terminating (the ones utilisation and usage are
/// measured over).
pub(crate) fn serving_pods(obs: &Observation) -> impl Iterator<Item = &aware_core::PodObservation> {
    obs.pods.iter().filter(|p| p.phase == PodPhase::Ready && !p.deleting)
}

/// Sets a nonzero `limit` to `to`, its `request` moved in the same ratio (a Burstable pod stays
/// Burstable).
pub(crate) fn move_limit(request: &mut u64, limit: &mut u64, to: u64) {
    *request = (*request as f64 * to as f64 / *limit as f64).round() as u64;
    *limit = to;
}

/// The least time, seconds, between two halvings of an unplaced app's pods
/// ([`Guard::spread_unplaced`]) where the profile's `guard.unplaced_grace_s` is shorter: a pod
/// smaller than the last gets a scheduling pass or two to be placed.
pub const MIN_SPREAD_STEP_S: f64 = 60.0;

/// The least CPU, millicores, [`Guard::spread_unplaced`] cuts a pod to: one core. A request
/// uses at most one core (it runs on one thread), so pods of a core or more serve each request
/// as fast as one larger pod does; smaller ones slow every request. Measured: `aware run --apps 4
/// --seed 6 --steps 2000`, an app whose 13 pods of 1 core could not be placed in a cluster with
/// no core free, spread down to 84 pods of 100 m: placed no sooner (the cluster had no room at
/// all, not room in pieces), and then at a p99 of 30 s, 200 SLO-violating intervals against 106.
pub const SPREAD_MIN_POD_MILLICORES: u64 = 1000;

/// The memory limit below which no proposal goes for a while after an OOM kill.
#[derive(Debug, Clone, Copy, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct OomFloor {
    /// The limit the pod was killed at, bytes.
    pub killed_bytes: u64,
    /// The floor: `killed_bytes` bumped by VPA's OOM rule, bytes.
    pub bytes: u64,
    /// Backend time of the kill, seconds.
    pub at_s: f64,
}

impl Guard {
    pub fn new(config: GuardConfig) -> Self {
        Self {
            config,
            last_time_s: None,
            unchanged: 0,
            recent: std::collections::VecDeque::new(),
            exploring: false,
            oom_floor: None,
            last_ready: None,
            unplaced_since_s: None,
            cpu_short_where_memory_fits: false,
            placed_starting: false,
            last_placed_s: None,
            slo_missed: 0,
            slo_last_met: None,
            slo_serving: std::collections::VecDeque::new(),
            slo_refused: None,
            slo_intervals: 0,
            explores: false,
        }
    }

    /// Whether the proposals from now on are an exploring agent's (its actions perturbed by
    /// exploration noise) whose decreases of replicas and CPU the downscale stabilisation
    /// window must not hold, every other rule unchanged (the step caps, the bounds, the
    /// fallback's floor, the usage fit; memory is held as ever). The window steadies a
    /// recommender whose proposals flap with noisy metrics; an exploring agent flaps on
    /// purpose, and with its relative actions the window turns that into a ratchet: each step
    /// up acts at once, each step down is held at the highest of the last 20 proposals, so the
    /// allocation climbs while the agent explores (`aware run --apps 4 --seed 38 --steps 2400
    /// --scenario io-payload-up@1500`, as `fig9 --quick --seed 38`: an app retraining went from
    /// 7 to 16 replicas and from 1 to 4 cores a pod in 20 intervals, 164 of its 500 decisions
    /// while retraining held by the window). The manager sets it where
    /// [`crate::manager::ManagerConfig::unheld_exploration`] says so, and for one proposal of a
    /// retraining app's probe ([`crate::manager::Probe`]), after which the window remembers the
    /// probe's path instead ([`Guard::remember_instead`]).
    pub fn set_exploring(&mut self, on: bool) {
        self.exploring = on;
    }

    /// Whether the proposals from now on are an exploring agent's (its actions perturbed by
    /// exploration noise, as a retraining app's are): growth the usage does not need is then
    /// not held ([`Guard::hold_idle_growth`]), every other rule unchanged. The manager sets it
    /// for every app the agent acts for, every interval.
    pub fn set_explores(&mut self, on: bool) {
        self.explores = on;
    }

    /// The backend time of the last observation [`Guard::check`]ed, if any.
    pub fn clock(&self) -> Option<f64> {
        self.last_time_s
    }

    /// Forgets everything it remembered (the clock, the recent proposals, the OOM floor, what
    /// the pods last ran and since when none has had a node): a simulator episode on a fresh
    /// cluster is a new cluster, whose first decreases must not be held against the previous
    /// episode's proposals (an episode that goes on from the last one's cluster keeps it all).
    pub fn restart(&mut self) {
        *self = Self::new(self.config.clone());
    }

    /// Notes how the interval `obs` reports served: `violated` is whether it missed the SLO
    /// (`None`: not known, e.g. the synthetic outcome a reset reports, which counts towards
    /// neither; the interval still passes for a refusal's hold).
    /// One that missed it counts towards [`SLO_ROLL_BACK_AFTER`]. One that met it with a pod
    /// ready makes what served it the replicas and CPU limit [`Guard::keep_slo`] rolls back to:
    /// the largest of each among the last [`SLO_MET_LOOKBACK`] observations' ready pods (their
    /// number, at most the desired replicas, and their largest CPU limit). Latency and drops are
    /// reported a scrape behind the pods (the simulator's `metrics_lag_s`, one interval by
    /// default; Prometheus's rate windows), so the interval reported as met can be one the pods
    /// of `obs` never served: `aware demo --seed 31` reported 70 ms as the pods showed the cut
    /// to 250 m, then 187 ms. Every interval, whoever acted, so that a cut is measured against
    /// what last served.
    pub fn note_slo(&mut self, obs: &Observation, violated: Option<bool>) {
        let ready: Vec<&ContainerResources> = serving_pods(obs).map(|p| &p.resources).collect();
        let serving = (!ready.is_empty()).then(|| {
            let replicas = (ready.len() as u32).min(obs.desired_replicas.max(1));
            (replicas, ready.iter().map(|c| c.limits.cpu_millicores).max().unwrap_or(0))
        });
        if self.slo_serving.len() == SLO_MET_LOOKBACK {
            self.slo_serving.pop_front();
        }
        self.slo_serving.push_back(serving);
        match violated {
            Some(true) => self.slo_missed = self.slo_missed.saturating_add(1),
            Some(false) => {
                self.slo_missed = 0;
                if serving.is_some() {
                    let most = |f: fn(&(u32, u64)) -> u64| self.slo_serving.iter().flatten().map(f).max().unwrap_or(0);
                    let met = (most(|a| a.0 as u64) as u32, most(|a| a.1));
                    self.slo_last_met = Some(met);
                    // Less than the floor met the SLO (the fallback acted, or the load fell):
                    // the refusal is out of date.
                    if self.slo_refused.is_some_and(|r| {
                        met.0 <= r.replicas && met.1 <= r.cpu_millicores && met != (r.replicas, r.cpu_millicores)
                    }) {
                        self.slo_refused = None;
                    }
                }
            }
            None => {}
        }
        self.slo_intervals += 1;
        // A repeat is the same cut made again within as long as the hold after it ran out, and
        // rolled back once missed ([`SLO_REFUSAL_REPEAT_SLACK`]); later, a roll-back is another
        // refusal (a long-lived controller would otherwise double an unrelated one's hold).
        if self.slo_refused.is_some_and(|r| {
            self.slo_intervals > r.until.saturating_add(r.hold).saturating_add(SLO_REFUSAL_REPEAT_SLACK)
        }) {
            self.slo_refused = None;
        }
    }

    /// Why `obs` (with its encoded `state`) must not reach the agent, if it must not.
    pub fn check(&mut self, obs: &Observation, state: &[f32]) -> Result<(), Untrusted> {
        self.note_oom_kills(obs);
        self.note_placement(obs);
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
        // A pod that became ready after the newest visible scrape may lack a sample for a
        // while (set aside); one ready for longer may not, nor may every ready pod.
        match obs.sampled_utilisation() {
            Err(e @ (ObservationError::NoUsageSample { .. } | ObservationError::NoUsageSampleYet { .. })) => {
                let ready: Vec<_> = serving_pods(obs).collect();
                if ready.iter().any(|p| p.cpu_usage_cores.is_some() && p.memory_working_set_bytes.is_some()) {
                    Err(e.into())
                } else {
                    Err(Untrusted::MissingMetrics { ready: ready.len() })
                }
            }
            Err(e) => Err(e.into()),
            Ok(None) if self.config.refuse_not_serving => Err(Untrusted::NotServing { pods: obs.pods.len() }),
            Ok(_) => Ok(()),
        }
    }

    /// Remembers the OOM kills `obs` reports (the limit each pod was killed at): the floor
    /// [`Guard::keep_oom_floor`] keeps under every proposal. Every observation passes here
    /// ([`Guard::check`]), whoever acts on it.
    fn note_oom_kills(&mut self, obs: &Observation) {
        // The limit the pod was killed at: a backend may report the request (Kubernetes does,
        // as upstream VPA reads it), which is below the limit of a Burstable pod.
        let killed_limit = |p: &aware_core::PodObservation| {
            let reported = p.oom_killed_at_bytes.filter(|b| b.is_finite())?;
            Some(reported.max(p.resources.limits.memory_bytes as f64))
        };
        let Some(killed) = obs.pods.iter().filter_map(killed_limit).reduce(f64::max) else {
            return;
        };
        let killed_bytes = killed.max(0.0) as u64;
        let bumped = (killed + aware_baselines::model::OOM_MIN_BUMP_UP_BYTES)
            .max(killed * aware_baselines::model::OOM_BUMP_UP_RATIO);
        let floor = OomFloor { killed_bytes, bytes: bumped.ceil() as u64, at_s: obs.time_s };
        // A kill at a lower limit than the floor's (an older pod's) neither lowers it nor
        // holds it longer: it proves the lower limit too small, not the floor.
        self.oom_floor = match self.active_oom_floor(obs.time_s) {
            Some(f) if f.bytes > floor.bytes => Some(f),
            _ => Some(floor),
        };
    }

    /// Remembers what the app's ready pods ran, and since when none of its pods has had a node
    /// ([`Guard::roll_back_unplaced`]): every pod pending without one, and, once the roll-back
    /// has acted, until one is ready. (A backend that does not
    /// report nodes, as the Prometheus one, reports no node for a running pod: only a pending
    /// one counts.)
    fn note_placement(&mut self, obs: &Observation) {
        let ready: Vec<&ContainerResources> = serving_pods(obs).map(|p| &p.resources).collect();
        if !ready.is_empty() {
            let most = |f: fn(&ContainerResources) -> u64| ready.iter().map(|c| f(c)).max().unwrap_or(0);
            self.last_ready =
                Some((ready.len() as u32, most(|c| c.limits.cpu_millicores), most(|c| c.limits.memory_bytes)));
        }
        let all_pending =
            !obs.pods.is_empty() && obs.pods.iter().all(|p| p.node.is_none() && p.phase == PodPhase::Pending);
        // A clock that went back (a backend restarted) starts the count again.
        let now = obs.time_s;
        // A spell the roll-back has acted in lasts until a pod is ready, not only placed: a
        // fallback that proposes the shape that did not fit again as soon as a pod has a node
        // (VPA setting CPU from its history) replaces the pods still starting, and all are
        // pending again. Not once a pod has restarted: a crash loop is the rules' to answer
        // (more memory after an OOM kill, more replicas), not a start to wait for.
        let rolled_back =
            self.unplaced_since_s.is_some_and(|since| since <= now && now - since >= self.config.unplaced_grace_s);
        self.placed_starting = !all_pending
            && rolled_back
            && ready.is_empty()
            && !obs.pods.is_empty()
            && obs.pods.iter().all(|p| p.restarts == 0);
        let unplaced = all_pending || self.placed_starting;
        self.last_placed_s = self.last_placed_s.filter(|t| *t <= now);
        // Unplaced since the observation before, where that one showed a pod placed and came
        // an interval before; after a gap in the observations (a backend that did not answer),
        // since now: when the pods lost their nodes in the gap is not known, and counting the
        // gap would roll back pods that have just become pending.
        let just_before = |t: &f64| now - *t <= MAX_OBSERVATION_GAP_INTERVALS * obs.interval_s;
        self.unplaced_since_s = match self.unplaced_since_s {
            Some(since) if unplaced && since <= now => Some(since),
            _ if unplaced => Some(self.last_placed_s.filter(just_before).unwrap_or(now)),
            _ => None,
        };
        if !unplaced {
            self.last_placed_s = Some(now);
        }
        // Once the scheduler said so in this spell with no pod placed, it holds until one is:
        // pods it has not tried yet (new ones, or ones whose shape changed) say nothing.
        let says = obs.pods.iter().any(|p| p.unschedulable.is_some_and(|u| u.cpu_short_where_memory_fits()));
        self.cpu_short_where_memory_fits = unplaced && (says || self.cpu_short_where_memory_fits);
    }

    /// `rec` (the fallback's) brought back down to what the app's pods last ran ready (their
    /// number, each pod's CPU and memory limits, within `bounds`) where it asks for more, once
    /// none of the app's pods has had a node for [`GuardConfig::unplaced_grace_s`]; the reason
    /// when it lowered anything. The rules cannot do it: with nothing running they measure
    /// nothing (HPA keeps the replicas, VPA its recommendation), and MPA never sets the CPU
    /// limit. Where the stage hands the app to the fallback, what the fallback does not set is
    /// raised back to the deployment after this ([`crate::manager::guard_fallback`]). Where that
    /// does not get a pod placed either, and the scheduler says CPU is what is short, the same
    /// cores spread over smaller pods ([`Guard::spread_unplaced`]).
    ///
    /// Why: `aware run --apps 4 --seed 6 --steps 2000` (reward window 5, as `fig10 --quick
    /// --seed 6`): an app retraining grew from 13 replicas of (1 core, 2.4 GiB) to 84 of
    /// (4 cores, 6.2 GiB) at the same load, most of them never placed; when the next episode
    /// began none of its pods had a node, and the fallback held them so for the last 200
    /// intervals of the run, each violating the SLO (200 against 50 for the rules alone).
    pub fn roll_back_unplaced(&self, rec: &mut Recommendation, bounds: &Bounds) -> Option<String> {
        self.roll_back_unplaced_keeping(rec, bounds, 0)
    }

    /// [`Guard::roll_back_unplaced`] where the caller raises each pod's CPU back to
    /// `cpu_kept` millicores afterwards (what a fallback that does not set CPU hands back as
    /// deployed, [`crate::manager::guard_fallback`]): the spread cuts no pod below it, so the
    /// replicas it adds are not raised to pods of the size that could not be placed.
    pub fn roll_back_unplaced_keeping(
        &self,
        rec: &mut Recommendation,
        bounds: &Bounds,
        cpu_kept: u64,
    ) -> Option<String> {
        // As of the last observation (`check` has just seen it).
        let unplaced_for_s = self.last_time_s? - self.unplaced_since_s?;
        if unplaced_for_s < self.config.unplaced_grace_s {
            return None;
        }
        let (ran_replicas, ran_cpu, memory) = self.last_ready?;
        let mut replicas = ran_replicas.clamp(bounds.min_replicas.max(1), bounds.max_replicas.max(1));
        // A limit of 0 (none: the pods ran unlimited) stays none.
        let within = |v: u64, lo: u64, hi: u64| if v > 0 { v.clamp(lo, hi) } else { 0 };
        let mut cpu = within(ran_cpu, bounds.min_cpu_millicores, bounds.max_cpu_millicores);
        let memory = within(memory, bounds.min_memory_bytes(), bounds.max_memory_bytes());
        let ran = (replicas, cpu);
        let spread = self.spread_unplaced(unplaced_for_s, ran, bounds, cpu_kept);
        if let Some((r, c)) = spread {
            (replicas, cpu) = (r, c);
        }
        let mut changed = Vec::new();
        if rec.replicas > replicas || (spread.is_some() && rec.replicas < replicas) {
            changed.push(format!("replicas {} → {replicas}", rec.replicas));
            rec.replicas = replicas;
        }
        if let Some(c) = rec.containers.first_mut() {
            if cpu > 0 && c.limits.cpu_millicores > cpu {
                changed.push(format!("cpu millicores {} → {cpu}", c.limits.cpu_millicores));
                move_limit(&mut c.requests.cpu_millicores, &mut c.limits.cpu_millicores, cpu);
            }
            if memory > 0 && c.limits.memory_bytes > memory {
                changed.push(format!("memory MiB {} → {}", c.limits.memory_bytes / MIB, memory / MIB));
                move_limit(&mut c.requests.memory_bytes, &mut c.limits.memory_bytes, memory);
            }
        }
        let spread_said = match spread {
            Some((_, c)) => format!(
                ", spread over pods of {c} m: no node had the CPU for one of {} m {:.0} s after the roll-back began",
                ran.1,
                unplaced_for_s - self.config.unplaced_grace_s
            ),
            None => String::new(),
        };
        let starting = if self.placed_starting { ", those placed since still starting" } else { "" };
        (!changed.is_empty()).then(|| {
            format!(
                "{} (what its pods last ran ready{spread_said}: none has had a node for {unplaced_for_s:.0} s{starting})",
                changed.join(", ")
            )
        })
    }

    /// The shape (replicas, each pod's CPU in millicores) the cores of `ran` (what the pods
    /// last ran, within the bounds) spread over smaller pods, once the roll-back
    /// ([`Guard::roll_back_unplaced`]) has had a grace of its own to get a pod placed and the
    /// scheduler says some node had room for a pod's memory but not its CPU: each further grace
    /// ([`GuardConfig::unplaced_grace_s`], at least [`MIN_SPREAD_STEP_S`]) with no pod placed
    /// halves each pod's CPU (down to one core, [`SPREAD_MIN_POD_MILLICORES`], or the bounds'
    /// least if more), the replicas rising to keep the cores (up to the bounds' most); memory
    /// stays each pod's. `None` before, or where the backend
    /// does not say why its pods are pending, or where memory is what no node has.
    ///
    /// Why: a pod no node has room for stays pending however long the rules wait, and an app
    /// whose only pod is pending serves nothing. The room that frees up comes in the pieces the
    /// other apps' pods leave: `aware run --apps 4 --seed 6 --steps 2000` with retraining
    /// probes (session 63), an app's only pod of 2,491 m, restarted by a memory change, waited
    /// 700 intervals for a node while a neighbour's HPA filled each core that freed with one of
    /// its 1-core pods (577 of them). Spreading where memory is short would only ask for more of
    /// it.
    fn spread_unplaced(
        &self,
        unplaced_for_s: f64,
        (ran_replicas, ran_cpu): (u32, u64),
        bounds: &Bounds,
        cpu_kept: u64,
    ) -> Option<(u32, u64)> {
        let step = self.config.unplaced_grace_s.max(MIN_SPREAD_STEP_S);
        // The roll-back's grace, then one grace per halving.
        let halvings = ((unplaced_for_s - self.config.unplaced_grace_s) / step).floor();
        if halvings.is_nan() || halvings < 1.0 || ran_cpu == 0 || !self.cpu_short_where_memory_fits {
            return None;
        }
        let floor = bounds.min_cpu_millicores.max(SPREAD_MIN_POD_MILLICORES).max(cpu_kept);
        let cpu = ran_cpu.div_ceil(1 << (halvings as u32).min(32)).max(floor).min(ran_cpu);
        let cores = u64::from(ran_replicas) * ran_cpu;
        let replicas = u32::try_from(cores.div_ceil(cpu)).unwrap_or(u32::MAX).min(bounds.max_replicas.max(1));
        (cpu < ran_cpu).then_some((replicas.max(ran_replicas), cpu))
    }

    /// The floor an OOM kill holds at the guard's clock (the last observation checked), for a
    /// restarted controller to keep ([`Guard::keep_saved_oom_floor`]); `None` when none holds.
    pub fn oom_floor(&self) -> Option<OomFloor> {
        match self.last_time_s {
            Some(now) => self.active_oom_floor(now),
            // Taken up and not yet checked against an observation's clock: kept as it is.
            None => self.oom_floor,
        }
    }

    /// Takes up a floor a previous run of the controller kept ([`Guard::oom_floor`]): held
    /// until [`GuardConfig::oom_hold_s`] after its kill, as if this guard had seen the kill. A
    /// floor that makes no sense (0 bytes, below the limit killed, a time that is not finite)
    /// is refused with the reason.
    pub fn keep_saved_oom_floor(&mut self, floor: OomFloor) -> Result<(), String> {
        if floor.bytes == 0 || floor.bytes < floor.killed_bytes || !floor.at_s.is_finite() {
            return Err(format!(
                "an OOM floor of {} bytes for a kill at {} bytes at {} s makes no sense",
                floor.bytes, floor.killed_bytes, floor.at_s
            ));
        }
        self.oom_floor = match self.oom_floor {
            Some(f) if f.bytes > floor.bytes => Some(f),
            _ => Some(floor),
        };
        Ok(())
    }

    fn active_oom_floor(&self, now_s: f64) -> Option<OomFloor> {
        self.oom_floor.filter(|f| now_s - f.at_s < self.config.oom_hold_s && now_s >= f.at_s)
    }

    /// `rec` with a memory limit below the one the last OOM kill proved too small raised to it,
    /// bumped by VPA's OOM rule (× 1.2, at least + 100 MiB) and within `bounds`, for
    /// [`GuardConfig::oom_hold_s`] after the kill; the reason when it raised anything.
    /// Whoever proposes: the agent's proposals ([`Guard::limit_under`]) and the fallback's.
    ///
    /// Why the fallback's too: VPA bumps an OOM-killed container's memory by adding the bumped
    /// value to a histogram of every pod's peak, so where many pods ran small (an agent had 16
    /// replicas where the rules run 2) one pod's kill does not move the percentile it
    /// recommends, and it keeps recommending the limit that was just killed. `aware run --apps 4
    /// --seed 120 --steps 2000` (reward window 5, as `fig10 --quick --seed 120`): an app handed
    /// back from an agent at 16 × (4 cores, 8 GiB) had its memory cut by VPA to 250 MiB and its
    /// replicas by HPA to 1, which crash-looped on OOM kills under the rules for the rest of
    /// the run: 382 SLO-violating intervals against 0 for the same rules alone.
    pub fn keep_oom_floor(&self, rec: &mut Recommendation, now_s: f64, bounds: &Bounds) -> Option<String> {
        let f = self.active_oom_floor(now_s)?;
        let to = f.bytes.min(bounds.max_memory_bytes());
        let c = rec.containers.first_mut()?;
        if c.limits.memory_bytes == 0 || c.limits.memory_bytes >= to {
            return None;
        }
        let from = c.limits.memory_bytes;
        move_limit(&mut c.requests.memory_bytes, &mut c.limits.memory_bytes, to);
        Some(format!(
            "memory MiB {} → {}: a pod was OOM-killed at {} MiB {:.0} s ago",
            from / MIB,
            to / MIB,
            f.killed_bytes / MIB,
            now_s - f.at_s
        ))
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

    /// Replaces the proposal last remembered with `proposal` (within `bounds`; `current`'s
    /// container where it has none): an exploring agent's probe acted, and the window remembers
    /// the greedy path it probes around, so later cuts of that path are held against the path,
    /// not against the probe's excursions.
    pub fn remember_instead(&mut self, proposal: &Recommendation, current: &ContainerResources, bounds: &Bounds) {
        let container = proposal.containers.first().unwrap_or(current);
        let path = within_bounds(proposal.replicas, container, bounds);
        if let Some(last) = self.recent.back_mut() {
            *last = path;
        }
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
        let exploring = self.exploring;
        // Memory is held either way: it is incompressible, and a cut too deep kills pods (every
        // request they hold is dropped), where a CPU cut only throttles them.
        let stabilised = |want: u64, now: u64, high: u64, what: &str, reasons: &mut Vec<String>| {
            let held = !exploring || what == "memory bytes";
            if held && want < now && high > want {
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
    /// interval is given, [`Guard::floor`]ed under it and, when `ceiling` (that proposal as the
    /// ceiling measures it: [`ceiling_reference`]) is given too, [`Guard::cap`]ped under it;
    /// the reasons of each, when anything changed. Then [`Guard::fit_usage`] under the measured
    /// `usage`, when given, [`Guard::keep_slo`] where [`GuardConfig::slo_roll_back`] says so,
    /// and [`Guard::keep_oom_floor`].
    #[allow(clippy::too_many_arguments)]
    pub fn limit_under(
        &mut self,
        proposal: &Recommendation,
        fallback: Option<&Recommendation>,
        ceiling: Option<&Recommendation>,
        usage: Option<&Usage>,
        replicas: u32,
        current: &ContainerResources,
        bounds: &Bounds,
    ) -> (Recommendation, Option<String>) {
        let (rec, limited) = self.limit(proposal, replicas, current, bounds);
        let (rec, raised) = match fallback {
            Some(f) => self.floor(rec, f, replicas, current, bounds),
            None => (rec, None),
        };
        let (rec, capped) = match (fallback, ceiling) {
            (Some(_), Some(c)) => self.cap(rec, c, current, bounds),
            _ => (rec, None),
        };
        let (rec, fitted) = match usage {
            Some(u) => self.fit_usage(rec, u, replicas, current, bounds),
            None => (rec, None),
        };
        let (rec, idle) = match usage {
            Some(u) => self.hold_idle_growth(rec, u, fallback, replicas, current, bounds),
            None => (rec, None),
        };
        let (rec, rolled) = if self.config.slo_roll_back { self.keep_slo(rec, current, bounds) } else { (rec, None) };
        let mut rec = rec;
        let oom = self.last_time_s.and_then(|now| self.keep_oom_floor(&mut rec, now, bounds));
        // The window remembers what acts.
        if let (Some(_), Some(last), Some(c)) = (&oom, self.recent.back_mut(), rec.containers.first()) {
            last.2 = c.limits.memory_bytes;
        }
        let why: Vec<String> = limited
            .into_iter()
            .chain(raised)
            .chain(capped)
            .chain(fitted)
            .chain(idle)
            .chain(rolled)
            .chain(oom)
            .collect();
        (rec, (!why.is_empty()).then(|| why.join("; ")))
    }

    /// `rec` with any cut the measured `usage` does not fit undone: a cut of replicas or CPU
    /// that leaves the app fewer cores than it used times [`GuardConfig::cpu_cut_headroom`] (VPA's
    /// margin, or the fallback HPA's scale-up point) is not made (the
    /// dimensions cut are held at the current allocation, replicas first); nor is a memory cut
    /// below the largest working set plus the margin (held at the current limit). Halving the
    /// replicas of an app at 56 % CPU saturates it, and an overloaded pod whose queue outgrows
    /// its memory is killed again and again; neither is a saving. Increases, and cuts that
    /// the usage fits, pass. The reason when anything was held.
    ///
    /// Only through [`Guard::limit_under`], after [`Guard::limit`] (and the floor) of the same
    /// proposal: it replaces the proposal remembered with what acts.
    fn fit_usage(
        &mut self,
        rec: Recommendation,
        usage: &Usage,
        replicas: u32,
        current: &ContainerResources,
        bounds: &Bounds,
    ) -> (Recommendation, Option<String>) {
        let got = rec.containers.first().unwrap_or(current).clone();
        let (mut new_replicas, mut cpu, mut memory) =
            (rec.replicas, got.limits.cpu_millicores, got.limits.memory_bytes);
        let (now_replicas, now_cpu, now_memory) = within_bounds(replicas, current, bounds);
        let headroom = self.config.cpu_cut_headroom;
        let needed_cores = usage.cpu_cores * headroom;
        let cores = |r: u32, cpu: u64| r as f64 * cpu as f64 / 1000.0;
        let mut reasons = Vec::new();
        if cores(new_replicas, cpu) < needed_cores && cores(new_replicas, cpu) < cores(now_replicas, now_cpu) {
            if new_replicas < now_replicas {
                new_replicas = now_replicas;
                reasons.push(format!("replicas held at {now_replicas}"));
            }
            if cores(new_replicas, cpu) < needed_cores && cpu < now_cpu {
                cpu = now_cpu;
                reasons.push(format!("cpu millicores held at {cpu}"));
            }
            // A proposal that moved the two apart (more replicas of less CPU, or fewer of
            // more) is held whole: restoring only its cut would exceed the current cores.
            if cores(new_replicas, cpu) > cores(now_replicas, now_cpu) {
                (new_replicas, cpu) = (now_replicas, now_cpu);
                reasons = vec![format!("replicas and cpu millicores held at {now_replicas} × {now_cpu}")];
            }
            if !reasons.is_empty() {
                reasons = vec![format!(
                    "{}: the cut would leave {:.2} cores for {:.2} in use (needs ×{headroom:.2})",
                    reasons.join(", "),
                    cores(rec.replicas, got.limits.cpu_millicores),
                    usage.cpu_cores,
                )];
            }
        }
        let needed_memory = usage.memory_bytes * (1.0 + USAGE_MARGIN);
        if (memory as f64) < needed_memory && memory < now_memory {
            memory = now_memory;
            reasons.push(format!(
                "memory held at {} MiB: the cut would leave {} MiB for a working set of {:.0} MiB (+{:.0} %)",
                memory / MIB,
                got.limits.memory_bytes / MIB,
                usage.memory_bytes / MIB as f64,
                USAGE_MARGIN * 100.0
            ));
        }
        if reasons.is_empty() {
            return (rec, None);
        }
        let fitted = self.replace_last(&got.name, (new_replicas, cpu, memory));
        (fitted, Some(format!("cut undone, the usage does not fit it: {}", reasons.join("; "))))
    }

    /// `rec` with a growth of replicas or CPU the usage does not need held: while the SLO is met
    /// (the last interval noted met it, [`Guard::note_slo`]) and the app has at least
    /// [`GuardConfig::idle_growth_headroom`] cores per core its ready pods use (under an HPA
    /// fallback, where HPA would scale down), a proposal above the current replicas or CPU
    /// limit, and below neither, is held at them, or at the fallback's proposal where that is
    /// higher (the floor is never undone). Memory is left alone; an exploring agent's growth passes
    /// ([`Guard::set_explores`]). The reason when anything was held.
    ///
    /// Not for exploring agents: measured on `fig9 --quick --seed 30`, holding a retraining
    /// app's exploring growth took AWARE from 4,455 SLO-violating intervals / 7.69 M
    /// core-seconds / reward 0.470 to 5,910 / 5.44 M / 0.341 (dropped requests 0.76 M to
    /// 2.76 M): the ratchet of session 75 costs cores, and it is what serves a retraining app
    /// whose greedy policy is not yet worth following.
    ///
    /// Why: the ceiling over the fallback's proposal does not hold such growth where the
    /// fallback follows the agent. Upstream HPA counts a pod without metrics (one just started)
    /// as using its whole request when it would scale down, so each pod the agent adds makes
    /// HPA hold the replicas it sees. `aware demo --seed 3`: a frozen agent grew
    /// `app-0003-mat-mul` from 2 to 10 replicas in six intervals at 0.10–0.22 CPU utilisation,
    /// HPA's proposal, and the ceiling at twice it, rising with each step (MPA alone runs the app
    /// on 1 replica at 0.21), and held 10 replicas at 0.01–0.09 until the app was handed back.
    fn hold_idle_growth(
        &mut self,
        rec: Recommendation,
        usage: &Usage,
        fallback: Option<&Recommendation>,
        replicas: u32,
        current: &ContainerResources,
        bounds: &Bounds,
    ) -> (Recommendation, Option<String>) {
        let headroom = self.config.idle_growth_headroom;
        let met = self.slo_last_met.is_some() && self.slo_missed == 0;
        // NaN is neither above nor below 0: off, as 0 is.
        let positive = |x: f64| x.partial_cmp(&0.0) == Some(std::cmp::Ordering::Greater);
        if !positive(headroom) || !met || !positive(usage.cpu_cores) || self.explores {
            return (rec, None);
        }
        let got = rec.containers.first().unwrap_or(current).clone();
        let (now_replicas, now_cpu, _) = within_bounds(replicas, current, bounds);
        // What served the usage: pods starting or pending add cores that did not, and the app
        // may need them.
        let desired_cores = now_replicas as f64 * now_cpu as f64 / 1000.0;
        let cores_now = usage.serving_cores.map_or(desired_cores, |s| s.min(desired_cores));
        if cores_now < usage.cpu_cores * headroom {
            return (rec, None);
        }
        let asked = fallback.map(|f| (f.replicas, f.containers.first().map_or(0, |c| c.limits.cpu_millicores)));
        let (mut new_replicas, mut cpu) = (rec.replicas, got.limits.cpu_millicores);
        // A proposal that moves the two apart (more replicas of less CPU, or fewer of more) is
        // no idle growth: holding only its growth would make it a cut the usage fit and the
        // ceiling never saw.
        if new_replicas < now_replicas || cpu < now_cpu {
            return (rec, None);
        }
        let mut reasons = Vec::new();
        let hold_replicas = now_replicas.max(asked.map_or(0, |a| a.0));
        if new_replicas > hold_replicas {
            reasons.push(format!("replicas {new_replicas} → {hold_replicas}"));
            new_replicas = hold_replicas;
        }
        let hold_cpu = now_cpu.max(asked.map_or(0, |a| a.1));
        if cpu > hold_cpu {
            reasons.push(format!("cpu millicores {cpu} → {hold_cpu}"));
            cpu = hold_cpu;
        }

        if reasons.is_empty() {
            return (rec, None);
        }
        let held = self.replace_last(&got.name, (new_replicas, cpu, got.limits.memory_bytes));
        let why = format!(
            "growth held, the usage does not need it: {}: {cores_now:.2} cores for {:.2} in use with the SLO met \
             (×{headroom:.2} or more)",
            reasons.join(", "),
            usage.cpu_cores
        );
        (held, Some(why))
    }

    /// `rec` with a replica or CPU cut the SLO does not fit rolled back: once the app has
    /// missed its SLO in [`SLO_ROLL_BACK_AFTER`] intervals in a row ([`Guard::note_slo`]), the
    /// replicas and the CPU limit go no lower than those of the last interval that met it.
    /// Increases, and allocations at or above that, pass; memory is left to the OOM floor.
    /// Each dimension is raised on its own, past the step caps and the ceiling over the
    /// fallback's proposal, but never above what the app ran in the few intervals before one
    /// that met the SLO ([`Guard::note_slo`]). The reason when anything was raised.
    ///
    /// Why: the usage fit and the fallback's floor read CPU utilisation, and a CPU limit below
    /// a core slows every request whatever the utilisation (a request runs on one thread).
    /// `aware demo --seed 31`: after the load fell, a frozen agent serving an app with a
    /// 100 ms SLO cut it from 2 pods of 1 core to 1 of 250 m; its p99 went from about 70 to
    /// 180 ms at 45–50 % utilisation, which neither the usage fit nor MPA's HPA (which never
    /// moves the CPU limit) reads as pressure, and it missed the SLO in 76 intervals in a row
    /// until the episode's check handed the app back.
    ///
    /// A roll-back is remembered: for [`SLO_REFUSAL_HOLD_WINDOWS`] stabilisation windows after
    /// it, no proposal goes below the replicas and CPU limit it rolled back to, missed or not
    /// (`cut refused, …`), and a cut refused again once that hold has run out (within as long
    /// again, plus [`SLO_REFUSAL_REPEAT_SLACK`]) is held twice as long, and so on
    /// ([`SLO_REFUSAL_MAX_DOUBLINGS`]). The window alone held the roll-back for
    /// 20 intervals, after which the frozen agent of `aware demo --seed 31` made the same cut
    /// again and missed the SLO three times more before the next roll-back: 3 violating
    /// intervals in every 23. An interval that met the SLO on less than the floor (the fallback
    /// acting, or the agent after the hold) forgets it, counts and all.
    ///
    /// Only through [`Guard::limit_under`]: it replaces the proposal remembered with what acts,
    /// so the stabilisation window holds the rolled-back allocation against the next cuts.
    fn keep_slo(
        &mut self,
        rec: Recommendation,
        current: &ContainerResources,
        bounds: &Bounds,
    ) -> (Recommendation, Option<String>) {
        let missed = self.slo_last_met.filter(|_| self.slo_missed >= SLO_ROLL_BACK_AFTER);
        let now = self.slo_intervals;
        let held = self.slo_refused.filter(|r| r.left(now) > 0);
        let held_floor = held.map(|r| (r.replicas, r.cpu_millicores));
        let Some((met_replicas, met_cpu)) = (match (missed, held_floor) {
            (Some(m), Some(h)) => Some((m.0.max(h.0), m.1.max(h.1))),
            (m, h) => m.or(h),
        }) else {
            return (rec, None);
        };
        let got = rec.containers.first().unwrap_or(current).clone();
        let (mut replicas, mut cpu) = (rec.replicas, got.limits.cpu_millicores);
        let met_replicas = met_replicas.clamp(bounds.min_replicas, bounds.max_replicas.max(bounds.min_replicas));
        let met_cpu =
            met_cpu.clamp(bounds.min_cpu_millicores, bounds.max_cpu_millicores.max(bounds.min_cpu_millicores));
        let mut reasons = Vec::new();
        if replicas < met_replicas {
            reasons.push(format!("replicas {replicas} → {met_replicas}"));
            replicas = met_replicas;
        }
        if got.limits.cpu_millicores > 0 && cpu < met_cpu {
            reasons.push(format!("cpu millicores {cpu} → {met_cpu}"));
            cpu = met_cpu;
        }
        if reasons.is_empty() {
            return (rec, None);
        }
        let rolled = self.replace_last(&got.name, (replicas, cpu, got.limits.memory_bytes));
        let why = if missed.is_some() {
            // The same misses roll back every interval until one is met (the metrics lag the
            // pods): one refusal. A cut refused again once its hold ran out is remembered twice
            // as long.
            let times = match self.slo_refused {
                Some(r) if r.left(now) > 0 => r.times,
                Some(r) => r.times.saturating_add(1),
                None => 1,
            };
            let hold = ((self.config.stabilisation_intervals.max(1) * SLO_REFUSAL_HOLD_WINDOWS) as u64)
                << (times - 1).min(SLO_REFUSAL_MAX_DOUBLINGS);
            // The intervals after this one: this interval's proposal is the roll-back itself.
            let until = held.map_or(now + hold, |r| r.until.max(now + hold));
            let left = until - now;
            self.slo_refused = Some(SloRefusal { replicas: met_replicas, cpu_millicores: met_cpu, until, hold, times });
            format!(
                "cut rolled back, the SLO was missed in the last {} intervals: {} (as when it was last met; \
                 refused for {left} intervals)",
                self.slo_missed,
                reasons.join(", ")
            )
        } else {
            format!(
                "cut refused, the SLO was missed the last time it was made: {} (for {} more intervals)",
                reasons.join(", "),
                held.map_or(0, |r| r.left(now))
            )
        };
        (rolled, Some(why))
    }

    /// What acts instead of the proposal [`Guard::limit`] last remembered: the stabilisation
    /// window remembers what acts, not what the agent asked for.
    fn replace_last(&mut self, container: &str, (replicas, cpu, memory): (u32, u64, u64)) -> Recommendation {
        self.recent.pop_back();
        self.remember((replicas, cpu, memory));
        Recommendation {
            replicas,
            containers: vec![ContainerResources::guaranteed(container.to_string(), Resources::new(cpu, memory))],
        }
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
    fn floor(
        &mut self,
        rec: Recommendation,
        fallback: &Recommendation,
        replicas: u32,
        current: &ContainerResources,
        bounds: &Bounds,
    ) -> (Recommendation, Option<String>) {
        let ask = fallback.containers.first().unwrap_or(current).limits;
        let got = rec.containers.first().unwrap_or(current);
        // What "no dimension shrinks" holds to.
        let (r, cpu_now, memory_now) = within_bounds(replicas, current, bounds);
        let now = (r as u64, cpu_now, memory_now);
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
        let new_replicas = raise(rec.replicas as u64, now.0, fb.0, "replicas", 1) as u32;
        let cpu = raise(got.limits.cpu_millicores, now.1, fb.1, "cpu millicores", 1);
        let memory = raise(got.limits.memory_bytes, now.2, fb.2, "memory MiB", MIB);
        if reasons.is_empty() {
            return (rec, None);
        }
        let raised = self.replace_last(&got.name, (new_replicas, cpu, memory));
        (raised, Some(format!("raised to the fallback's scale-up: {}", reasons.join(", "))))
    }

    /// `rec` (already [`Guard::floor`]ed) under the ceiling [`GuardConfig::fallback_ceiling`]
    /// sets over `reference`, the fallback's proposal of the interval as [`ceiling_reference`]
    /// measures it: the cores in all (replicas × CPU) and the memory in all (replicas × memory)
    /// each at most the ceiling times the reference's, fewer replicas first (never fewer than
    /// the reference's), then less per pod. The agent spends as it likes within that: more
    /// CPU per pod on fewer pods, or more pods of less. The reason when anything was lowered.
    ///
    /// It lowers at once, past the step caps: what it lowers to is at least the rules' own
    /// proposal. What comes after it in [`Guard::limit_under`] comes first: a cut the measured
    /// usage does not fit is undone, and memory stays above an OOM kill's floor, whatever the
    /// ceiling says.
    ///
    /// Why: the floor keeps an agent from refusing the rules' scale-ups, but nothing kept one
    /// from growing without end. A DDPG agent retraining online (SERVING's rewards slipped
    /// with the time of day) saturated its actor and took an app from 46 pods of 1 core and
    /// 320 MiB to 332 of 4 cores and 8 GiB within 60 intervals, its pods pending on a full
    /// cluster and crowding a neighbour's node into violating its SLO in every interval
    /// (`aware run --apps 4 --seed 142 --steps 2000`, `lifecycle.reward_window: 5`). A ceiling
    /// on each dimension alone was tried first: it also kept the CPU per pod that a heavier
    /// payload needs below twice the deployment's, and on the fig9 scenarios AWARE violated
    /// its SLO more often for it.
    ///
    /// Only through [`Guard::limit_under`]: it replaces the proposal remembered with what acts.
    fn cap(
        &mut self,
        rec: Recommendation,
        reference: &Recommendation,
        current: &ContainerResources,
        bounds: &Bounds,
    ) -> (Recommendation, Option<String>) {
        // Never below the fallback's own proposal (a configuration below 1 is read as 1).
        let k = self.config.fallback_ceiling;
        if k <= 0.0 || k.is_nan() {
            return (rec, None);
        }
        let k = k.max(1.0);
        let got = rec.containers.first().unwrap_or(current);
        let limits = reference.containers.first().map_or(got.limits, |c| c.limits);
        let base = reference.replicas.max(bounds.min_replicas).max(1);
        let (mut new_replicas, mut cpu, mut memory) =
            (rec.replicas, got.limits.cpu_millicores, got.limits.memory_bytes);
        // The most in all, per resource, where both sides have a limit (0 is none: unlimited).
        let most = |per_pod: u64, mine: u64| (per_pod > 0 && mine > 0).then_some(base as f64 * per_pod as f64 * k);
        let (cores, bytes) = (most(limits.cpu_millicores, cpu), most(limits.memory_bytes, memory));
        // Fewer replicas first, down to the reference's.
        let fits = |total: Option<f64>, per_pod: u64| {
            total.map_or(u32::MAX, |t| (t / per_pod as f64).floor().min(u32::MAX as f64) as u32)
        };
        let hi_replicas = fits(cores, cpu).min(fits(bytes, memory)).max(base);
        let mut reasons = Vec::new();
        if new_replicas > hi_replicas {
            reasons.push(format!("replicas {new_replicas} → {hi_replicas}"));
            new_replicas = hi_replicas;
        }
        // Then less per pod.
        let per_pod = |total: f64, lo: u64| ((total / new_replicas.max(1) as f64).floor() as u64).max(lo);
        if let Some(total) = cores {
            let hi = per_pod(total, bounds.min_cpu_millicores);
            if cpu > hi {
                reasons.push(format!("cpu millicores {cpu} → {hi}"));
                cpu = hi;
            }
        }
        if let Some(total) = bytes {
            let hi = per_pod(total, bounds.min_memory_bytes());
            if memory > hi {
                reasons.push(format!("memory MiB {} → {}", memory / MIB, hi / MIB));
                memory = hi;
            }
        }
        if reasons.is_empty() {
            return (rec, None);
        }
        let capped = self.replace_last(&got.name, (new_replicas, cpu, memory));
        (capped, Some(format!("capped at {k}× the fallback's proposal in all: {}", reasons.join(", "))))
    }
}

/// The fallback's proposal `ask` as [`Guard::cap`] measures an agent against it: each dimension
/// the fallback does not set (`scope`) at the `deployed` allocation instead (within `bounds`),
/// since there the proposal only carries on what runs, and a ceiling over what runs would rise
/// with every step it let through. Without a known deployment, the proposal as it is.
pub(crate) fn ceiling_reference(
    ask: &Recommendation,
    scope: aware_core::Scope,
    deployed: Option<&(u32, ContainerResources)>,
    bounds: &Bounds,
) -> Recommendation {
    let Some((replicas, template)) = deployed else { return ask.clone() };
    let deployed = within_bounds(*replicas, template, bounds);
    let mut reference = ask.clone();
    if !scope.replicas {
        reference.replicas = deployed.0;
    }
    // A limit of 0 (none: unlimited), in the proposal or the deployment, is left as proposed.
    let (cpu_set, memory_set) = (template.limits.cpu_millicores > 0, template.limits.memory_bytes > 0);
    for c in reference.containers.iter_mut().take(1) {
        if !scope.cpu && cpu_set && c.limits.cpu_millicores > 0 {
            move_limit(&mut c.requests.cpu_millicores, &mut c.limits.cpu_millicores, deployed.1);
        }
        if !scope.memory && memory_set && c.limits.memory_bytes > 0 {
            move_limit(&mut c.requests.memory_bytes, &mut c.limits.memory_bytes, deployed.2);
        }
    }
    reference
}

/// The current allocation (`replicas` of `current`) as far as `bounds` allow: what the floor and
/// the usage fit hold to (a profile changed under a running app can leave it outside them), and
/// what the lifecycle hands a deployment back as ([`crate::manager::restore_unmanaged`]).
pub(crate) fn within_bounds(replicas: u32, current: &ContainerResources, bounds: &Bounds) -> (u32, u64, u64) {
    (
        replicas.clamp(bounds.min_replicas, bounds.max_replicas),
        current.limits.cpu_millicores.clamp(bounds.min_cpu_millicores, bounds.max_cpu_millicores),
        current.limits.memory_bytes.clamp(bounds.min_memory_bytes(), bounds.max_memory_bytes()),
    )
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

    /// The ceiling over the fallback's proposal, one case per row, at the default 2×: the
    /// fallback proposes 10 × (1000 m, 512 MiB), so at most 20 cores and 10 GiB in all, and the
    /// app runs 10 such pods, so every row's proposal is within one interval's step and only
    /// the ceiling acts. (proposal, what acts)
    #[test]
    fn the_ceiling_over_the_fallbacks_proposal_table() {
        let bounds = Profile::default().bounds;
        let ask = rec(10, 1000, 512);
        for (proposal, want) in [
            // Within it in all: passes, however it is spread.
            (rec(20, 1000, 512), rec(20, 1000, 512)),
            (rec(5, 2000, 256), rec(5, 2000, 256)),
            (rec(10, 2000, 1024), rec(10, 2000, 1024)),
            // Too many cores, too much memory, or both: fewer replicas first.
            (rec(20, 2000, 512), rec(10, 2000, 512)),
            (rec(20, 1000, 1024), rec(10, 1000, 1024)),
            (rec(15, 2000, 1024), rec(10, 2000, 1024)),
            (rec(14, 1500, 512), rec(13, 1500, 512)),
        ] {
            let mut g = Guard::new(GuardConfig { stabilisation_intervals: 0, ..GuardConfig::default() });
            let (got, why) = g.limit_under(&proposal, Some(&ask), Some(&ask), None, 10, &container(1000, 512), &bounds);
            assert_eq!(got, want, "{proposal:?}");
            assert_eq!(why.is_some(), want != proposal, "{proposal:?}: {why:?}");
            if let Some(why) = why {
                assert!(why.contains("capped at 2× the fallback's proposal"), "{why}");
            }
        }
        // Beyond it, from where a diverged agent had taken the app (as the step caps allow):
        // lowered to the ceiling in one interval, and the window remembers what acts.
        let mut g = Guard::new(GuardConfig::default());
        let (got, why) =
            g.limit_under(&rec(332, 4000, 8192), Some(&ask), Some(&ask), None, 332, &container(4000, 8192), &bounds);
        assert_eq!(got, rec(10, 2000, 1024), "{why:?}");
        let (again, _) =
            g.limit_under(&rec(300, 4000, 8192), Some(&ask), Some(&ask), None, 10, &container(2000, 1024), &bounds);
        assert_eq!(again, rec(10, 2000, 1024));
        // Off (0), or without the fallback's proposal: no ceiling.
        let mut off = Guard::new(GuardConfig { fallback_ceiling: 0.0, ..GuardConfig::default() });
        let (got, _) =
            off.limit_under(&rec(20, 2000, 1024), Some(&ask), Some(&ask), None, 10, &container(1000, 512), &bounds);
        assert_eq!(got, rec(20, 2000, 1024));
        let mut alone = Guard::new(GuardConfig::default());
        let (got, _) =
            alone.limit_under(&rec(20, 2000, 1024), None, Some(&ask), None, 10, &container(1000, 512), &bounds);
        assert_eq!(got, rec(20, 2000, 1024));
        // The policy alone (no floor) has none; the rules' net has the profile's.
        let limits = aware_core::GuardLimits::default();
        assert_eq!(GuardConfig::for_agent(&limits, false, None).fallback_ceiling, 0.0);
        assert_eq!(GuardConfig::for_agent(&limits, true, None).fallback_ceiling, 2.0);
    }

    /// What the fallback does not set is measured against the deployment, not against what
    /// runs (which its proposal carries on, and which would let the ceiling rise each step).
    #[test]
    fn the_ceiling_measures_what_the_fallback_does_not_set_against_the_deployment() {
        let bounds = Profile::default().bounds;
        let mpa = aware_core::Scope { replicas: true, cpu: false, memory: true };
        // MPA carries on the 4000 m an agent set; the deployment had 1000 m.
        let deployed = (4, container(1000, 512));
        let reference = ceiling_reference(&rec(6, 4000, 300), mpa, Some(&deployed), &bounds);
        assert_eq!(reference, rec(6, 1000, 300));
        let all = ceiling_reference(&rec(6, 4000, 300), aware_core::Scope::ALL, Some(&deployed), &bounds);
        assert_eq!(all, rec(6, 4000, 300));
        assert_eq!(ceiling_reference(&rec(6, 4000, 300), mpa, None, &bounds), rec(6, 4000, 300));
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

        /// Under the fallback's floor and ceiling, what acts reserves at most twice the
        /// fallback's proposal in cores and in memory, wherever the app was and whatever the
        /// agent proposed (or the least a pod may have).
        #[test]
        fn what_acts_stays_under_the_ceiling(
            now in 1u32..150, want in 0u32..1000, cpu_now in 100u64..4000, cpu in 0u64..100_000,
            mem_now in 64u64..8192, mem in 0u64..100_000,
            ask_r in 1u32..150, ask_cpu in 100u64..4000, ask_mem in 64u64..8192,
        ) {
            let bounds = Bounds { max_replicas: 150, ..Profile::default().bounds };
            let mut g = Guard::new(GuardConfig::default());
            let ask = rec(ask_r, ask_cpu, ask_mem);
            let (out, _) =
                g.limit_under(&rec(want, cpu, mem), Some(&ask), Some(&ask), None, now, &container(cpu_now, mem_now), &bounds);
            let c = &out.containers[0].limits;
            let base = ask_r.max(bounds.min_replicas) as u64;
            let r = out.replicas as u64;
            prop_assert!(r * c.cpu_millicores <= 2 * base * ask_cpu || c.cpu_millicores <= bounds.min_cpu_millicores, "{out:?}");
            prop_assert!(r * c.memory_bytes <= 2 * base * ask_mem * MIB || c.memory_bytes <= bounds.min_memory_bytes(), "{out:?}");
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

    /// An exploring agent's decreases are not held by the window (its flapping is on purpose,
    /// and holding only its steps down walks the allocation up); the step caps still bound
    /// them, and once it stops exploring the window holds again.
    #[test]
    fn an_exploring_agent_steps_down_as_freely_as_up() {
        let bounds = Profile::default().bounds;
        let mut g = Guard::new(GuardConfig { stabilisation_intervals: 3, ..GuardConfig::default() });
        let c = container(1000, 512);
        g.set_exploring(true);
        assert_eq!(g.limit(&rec(8, 1000, 512), 6, &c, &bounds).0.replicas, 8);
        let (out, why) = g.limit(&rec(6, 700, 512), 8, &c, &bounds);
        assert_eq!((out.replicas, out.containers[0].limits.cpu_millicores), (6, 700), "{why:?}");
        // Halving at most, as ever.
        assert_eq!(g.limit(&rec(1, 1000, 512), 6, &c, &bounds).0.replicas, 3);
        g.set_exploring(false);
        assert_eq!(g.limit(&rec(4, 1000, 512), 6, &c, &bounds).0.replicas, 6, "held by the window again");
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
            let (out, why) = g.floor(agent.clone(), &fallback, 4, &container(1000, 512), &Profile::default().bounds);
            assert_eq!(out.replicas, want.replicas, "{agent:?} / {fallback:?}");
            assert_eq!(out.containers[0].limits, want.containers[0].limits, "{agent:?} / {fallback:?}");
            assert_eq!(why.is_some(), want != agent, "{agent:?} / {fallback:?}: {why:?}");
            if let Some(why) = why {
                assert!(why.contains("fallback's scale-up"), "{why}");
            }
        }
    }

    #[test]
    fn a_raised_allocation_holds_later_decreases_in_the_window() {
        let bounds = Profile::default().bounds;
        let mut g = Guard::new(GuardConfig { stabilisation_intervals: 3, ..GuardConfig::default() });
        let c = container(1000, 512);
        let (limited, _) = g.limit(&rec(4, 1000, 512), 4, &c, &bounds);
        let (raised, _) = g.floor(limited, &rec(8, 1000, 512), 4, &c, &bounds);
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

    /// After an OOM kill no proposal, the fallback's or the agent's, goes below the killed
    /// limit bumped as VPA bumps it (× 1.2, at least + 100 MiB), for the hold; a later kill at a
    /// higher limit raises the floor, one at a lower limit neither lowers it nor holds it longer.
    #[test]
    fn after_an_oom_kill_no_proposal_goes_below_the_killed_limit_bumped() {
        assert_eq!(GuardConfig::default().oom_hold_s, aware_baselines::model::MEMORY_AGGREGATION_INTERVAL_S);
        let bounds = Profile::default().bounds;
        let mut g = Guard::new(GuardConfig { oom_hold_s: 3600.0, ..GuardConfig::default() });
        let mut obs = observation(1000.0, Some(0.5));
        assert!(g.check(&obs, &[0.1]).is_ok());
        let mut fallback = rec(1, 4000, 250);
        assert_eq!(g.keep_oom_floor(&mut fallback, obs.time_s, &bounds), None, "no kill yet");
        obs.time_s = 1015.0;
        obs.pods[0].oom_killed_at_bytes = Some((250 * MIB) as f64);
        obs.pods[0].resources.limits.memory_bytes = 250 * MIB;
        let _ = g.check(&obs, &[0.1]);
        // 250 MiB killed: + 100 MiB beats × 1.2.
        let why = g.keep_oom_floor(&mut fallback, obs.time_s, &bounds).expect("raised");
        assert_eq!(fallback.containers[0].limits.memory_bytes, 350 * MIB);
        assert_eq!(fallback.containers[0].requests.memory_bytes, 350 * MIB, "the request moves with the limit");
        assert!(why.contains("OOM-killed at 250 MiB"), "{why}");
        // The agent's proposals too, through the guard's caps.
        let c = container(1000, 250);
        let (agent, why) = g.limit_under(&rec(1, 1000, 200), None, None, None, 1, &c, &bounds);
        assert_eq!(agent.containers[0].limits.memory_bytes, 350 * MIB);
        assert!(why.unwrap().contains("OOM-killed"));
        // Killed again at 1000 MiB: × 1.2 beats + 100 MiB. A later kill at 300 MiB keeps it.
        obs.time_s = 1030.0;
        obs.pods[0].oom_killed_at_bytes = Some((1000 * MIB) as f64);
        obs.pods[0].resources.limits.memory_bytes = 1000 * MIB;
        let _ = g.check(&obs, &[0.1]);
        obs.time_s = 1045.0;
        obs.pods[0].oom_killed_at_bytes = Some((300 * MIB) as f64);
        obs.pods[0].resources.limits.memory_bytes = 300 * MIB;
        let _ = g.check(&obs, &[0.1]);
        let mut p = rec(1, 1000, 512);
        g.keep_oom_floor(&mut p, 1045.0, &bounds);
        assert_eq!(p.containers[0].limits.memory_bytes, 1200 * MIB);
        // A proposal at or above the floor passes; the floor stays within the bounds.
        let mut above = rec(1, 1000, 2048);
        assert_eq!(g.keep_oom_floor(&mut above, 1045.0, &bounds), None);
        let tight = aware_core::Bounds { max_memory_mib: 1024, ..bounds.clone() };
        let mut p = rec(1, 1000, 512);
        g.keep_oom_floor(&mut p, 1045.0, &tight);
        assert_eq!(p.containers[0].limits.memory_bytes, 1024 * MIB);
        // Once the hold has passed since the kill that set the floor, proposals pass as they
        // are: the later kill at a lower limit did not hold it longer.
        let mut late = rec(1, 1000, 256);
        assert_eq!(g.keep_oom_floor(&mut late, 1030.0 + 3600.0, &bounds), None);
        assert_eq!(late.containers[0].limits.memory_bytes, 256 * MIB);
        // A fresh cluster (restart) forgets the kills.
        g.restart();
        let mut p = rec(1, 1000, 256);
        assert_eq!(g.keep_oom_floor(&mut p, 1050.0, &bounds), None);
    }

    /// Once no pod has had a node for the grace, the fallback's proposal goes back to what the
    /// pods last ran ready (within the bounds), where it asks for more; not before, and not once
    /// a pod is placed.
    #[test]
    fn with_no_pod_placed_for_the_grace_the_fallback_goes_back_to_what_last_ran() {
        let bounds = Profile::default().bounds;
        let mut g = Guard::new(GuardConfig { unplaced_grace_s: 45.0, ..GuardConfig::default() });
        let placed = observation(15.0, Some(0.5));
        let ready = placed.pods.iter().filter(|p| p.phase == PodPhase::Ready).count() as u32;
        let ran = placed.pods.iter().find(|p| p.phase == PodPhase::Ready).unwrap().resources.limits;
        let _ = g.check(&placed, &[0.1]);
        let mut unplaced = placed.clone();
        for p in &mut unplaced.pods {
            p.node = None;
            p.phase = PodPhase::Pending;
        }
        let big = || rec(84, 4000, 6384);
        for t in 1..=2 {
            unplaced.time_s = 15.0 + 15.0 * t as f64;
            let _ = g.check(&unplaced, &[0.1]);
            let mut p = big();
            assert_eq!(g.roll_back_unplaced(&mut p, &bounds), None, "within the grace");
        }
        unplaced.time_s = 75.0;
        let _ = g.check(&unplaced, &[0.1]);
        let mut p = big();
        let why = g.roll_back_unplaced(&mut p, &bounds).expect("lowered");
        assert_eq!(p.replicas, ready);
        assert_eq!(p.containers[0].limits.cpu_millicores, ran.cpu_millicores);
        assert_eq!(p.containers[0].limits.memory_bytes, ran.memory_bytes);
        assert_eq!(p.containers[0].requests, p.containers[0].limits, "requests keep their ratio");
        // Timed from the last observation with a pod placed (15 s), as 8 intervals of 15 s are
        // the default's 120 s.
        assert!(why.contains("none has had a node for 60 s"), "{why}");
        // Within the bounds: at least their least replicas, at most their largest CPU.
        let tight = aware_core::Bounds {
            min_replicas: ready + 2,
            max_cpu_millicores: ran.cpu_millicores / 2,
            min_cpu_millicores: 10,
            ..bounds.clone()
        };
        let mut p = big();
        g.roll_back_unplaced(&mut p, &tight).expect("lowered");
        assert_eq!((p.replicas, p.containers[0].limits.cpu_millicores), (ready + 2, ran.cpu_millicores / 2));
        // Less than what last ran passes as it is.
        let mut small = rec(1, 100, 64);
        assert_eq!(g.roll_back_unplaced(&mut small, &bounds), None);
        // A pod placed again ends it.
        let mut back = placed.clone();
        back.time_s = 90.0;
        let _ = g.check(&back, &[0.1]);
        let mut p = big();
        assert_eq!(g.roll_back_unplaced(&mut p, &bounds), None);
        // The grace is time, not observations: unplaced again, two observations 60 s apart pass it.
        unplaced.time_s = 105.0;
        let _ = g.check(&unplaced, &[0.1]);
        let mut p = big();
        assert_eq!(g.roll_back_unplaced(&mut p, &bounds), None, "just unplaced");
        unplaced.time_s = 165.0;
        let _ = g.check(&unplaced, &[0.1]);
        let mut p = big();
        assert!(g.roll_back_unplaced(&mut p, &bounds).is_some(), "60 s unplaced");
        // A clock that went back (a backend restarted) starts the count again.
        unplaced.time_s = 20.0;
        let _ = g.check(&unplaced, &[0.1]);
        let mut p = big();
        assert_eq!(g.roll_back_unplaced(&mut p, &bounds), None, "a new clock");
        // After a gap in the observations the count starts at the first one unplaced: the
        // pods may have lost their nodes just before it.
        back.time_s = 200.0;
        let _ = g.check(&back, &[0.1]);
        for (t, rolled) in [(800.0, false), (830.0, false), (845.0, true)] {
            unplaced.time_s = t;
            let _ = g.check(&unplaced, &[0.1]);
            let mut p = big();
            assert_eq!(g.roll_back_unplaced(&mut p, &bounds).is_some(), rolled, "at {t} s, placed at 200 s, 600 s gap");
        }
    }

    /// A guard (grace 120 s) that saw one pod of `cpu` millicores and 800 MiB ready at 15 s, that
    /// observation, and the pod pending at 15 s with the scheduler's reason `why`.
    fn one_pod_ran_then_pending(cpu: u64, why: aware_core::Unschedulable) -> (Guard, Observation, Observation) {
        let mut g = Guard::new(GuardConfig { unplaced_grace_s: 120.0, ..GuardConfig::default() });
        let mut placed = observation(15.0, Some(0.5));
        placed.pods.truncate(1);
        placed.pods[0].phase = PodPhase::Ready;
        placed.pods[0].resources = container(cpu, 800);
        let _ = g.check(&placed, &[0.1]);
        let mut unplaced = placed.clone();
        unplaced.pods[0].node = None;
        unplaced.pods[0].phase = PodPhase::Pending;
        unplaced.pods[0].unschedulable = Some(why);
        (g, placed, unplaced)
    }

    /// With the roll-back in force for another grace and still no pod placed, the same cores
    /// go to smaller pods: each pod's CPU halves every grace (at least a minute), the replicas
    /// rising to keep what last ran, within the bounds; memory stays; a placed pod ends it.
    #[test]
    fn with_no_pod_placed_after_the_roll_back_the_cores_spread_over_smaller_pods() {
        let bounds = aware_core::Bounds { min_cpu_millicores: 300, max_replicas: 10, ..Profile::default().bounds };
        // One pod of 2,400 m ran ready; of 3 nodes, every one is short of its CPU, one of its memory.
        let cpu_short = aware_core::Unschedulable { nodes: 3, insufficient_cpu: 3, insufficient_memory: 1 };
        let (mut g, mut placed, mut unplaced) = one_pod_ran_then_pending(2400, cpu_short);
        let mut memory_short = unplaced.clone();
        memory_short.pods[0].unschedulable = Some(aware_core::Unschedulable { insufficient_memory: 3, ..cpu_short });
        // Where memory is what no node has, no spread.
        {
            let mut g = g.clone();
            for t in 1..=80 {
                memory_short.time_s = 15.0 + 15.0 * t as f64;
                let _ = g.check(&memory_short, &[0.1]);
            }
            let mut p = rec(1, 3800, 900);
            let why = g.roll_back_unplaced(&mut p, &bounds).expect("rolled back");
            assert_eq!((p.replicas, p.containers[0].limits.cpu_millicores), (1, 2400), "{why}");
        }
        // Observed every 15 s up to `t`.
        let mut at = |t: f64| {
            while unplaced.time_s < t {
                unplaced.time_s = (unplaced.time_s + 15.0).min(t);
                let _ = g.check(&unplaced, &[0.1]);
            }
            let mut p = rec(1, 3800, 900);
            let why = g.roll_back_unplaced(&mut p, &bounds);
            (p.replicas, p.containers[0].limits.cpu_millicores, p.containers[0].limits.memory_bytes / MIB, why)
        };
        // 15 s + 120 s: rolled back, not spread; one more grace: half; then a quarter.
        let (r, cpu, mem, why) = at(135.0);
        assert_eq!((r, cpu, mem), (1, 2400, 800), "{why:?}");
        assert!(!why.unwrap().contains("spread"));
        assert_eq!(at(240.0).0, 1, "within the roll-back's own grace");
        let (r, cpu, mem, why) = at(255.0);
        assert_eq!((r, cpu, mem), (2, 1200, 800), "{why:?}");
        let why = why.unwrap();
        assert!(why.starts_with("replicas 1 → 2, cpu millicores 3800 → 1200, memory MiB 900 → 800"), "{why}");
        assert!(why.contains("spread over pods of 1200 m: no node had the CPU for one of 2400 m 120 s after"), "{why}");
        // Down to one core a pod (a request uses one), 3 for the 2,400 m that ran.
        let (r, cpu, mem, _) = at(375.0);
        assert_eq!((r, cpu, mem), (3, 1000, 800));
        assert_eq!(at(975.0).0, 3);
        // Never past the bounds' most replicas.
        let few = aware_core::Bounds { max_replicas: 2, ..bounds.clone() };
        let mut p = rec(1, 3800, 900);
        g.roll_back_unplaced(&mut p, &few).expect("spread");
        assert_eq!(p.replicas, 2);
        // A proposal asking for more replicas gets the spread's.
        let mut p = rec(9, 3800, 900);
        g.roll_back_unplaced(&mut p, &bounds).expect("spread");
        assert_eq!((p.replicas, p.containers[0].limits.cpu_millicores), (3, 1000));
        // Above one core, the bounds' least CPU is the floor.
        let big_floor = aware_core::Bounds { min_cpu_millicores: 1500, ..bounds.clone() };
        let mut p = rec(1, 3800, 900);
        g.roll_back_unplaced(&mut p, &big_floor).expect("spread");
        assert_eq!((p.replicas, p.containers[0].limits.cpu_millicores), (2, 1500));
        // A pod placed again ends it.
        placed.time_s = 990.0;
        let _ = g.check(&placed, &[0.1]);
        let mut p = rec(1, 3800, 900);
        assert_eq!(g.roll_back_unplaced(&mut p, &bounds), None);
    }

    /// The scheduler's word holds for the spell: pods it has not tried since (their shape
    /// changed) keep the spread going; and no pod is cut below the CPU the caller hands back
    /// afterwards (a fallback that does not set CPU, restored as deployed), so the replicas
    /// added are of that size.
    #[test]
    fn the_spread_holds_through_untried_pods_and_keeps_the_cpu_handed_back() {
        let bounds = aware_core::Bounds { max_replicas: 10, ..Profile::default().bounds };
        let why = aware_core::Unschedulable { nodes: 3, insufficient_cpu: 3, insufficient_memory: 0 };
        let (mut g, _, mut obs) = one_pod_ran_then_pending(4000, why);
        while obs.time_s < 135.0 {
            obs.time_s += 15.0;
            let _ = g.check(&obs, &[0.1]);
        }
        // Untried since: no reason given.
        obs.pods[0].unschedulable = None;
        while obs.time_s < 375.0 {
            obs.time_s += 15.0;
            let _ = g.check(&obs, &[0.1]);
        }
        let mut p = rec(1, 4000, 800);
        g.roll_back_unplaced(&mut p, &bounds).expect("spread");
        assert_eq!((p.replicas, p.containers[0].limits.cpu_millicores), (4, 1000), "two halvings");
        let mut p = rec(1, 4000, 800);
        g.roll_back_unplaced_keeping(&mut p, &bounds, 2000).expect("spread");
        assert_eq!((p.replicas, p.containers[0].limits.cpu_millicores), (2, 2000), "no pod below 2,000 m");
        // With nothing to say from the start, no spread.
        let mut quiet = Guard::new(GuardConfig { unplaced_grace_s: 120.0, ..GuardConfig::default() });
        obs.time_s = 15.0;
        obs.pods[0].node = Some("n".into());
        obs.pods[0].phase = PodPhase::Ready;
        let _ = quiet.check(&obs, &[0.1]);
        obs.pods[0].node = None;
        obs.pods[0].phase = PodPhase::Pending;
        while obs.time_s < 375.0 {
            obs.time_s += 15.0;
            let _ = quiet.check(&obs, &[0.1]);
        }
        let mut p = rec(1, 4000, 800);
        quiet.roll_back_unplaced(&mut p, &bounds);
        assert_eq!((p.replicas, p.containers[0].limits.cpu_millicores), (1, 4000), "rolled back only");
    }

    /// Pods placed after the roll-back but still starting keep it in force (a fallback that
    /// proposed the shape that did not fit again would replace them before they serve); a
    /// ready pod ends it. Placed and starting before the grace ran out, nothing is rolled back.
    #[test]
    fn the_roll_back_holds_until_a_pod_is_ready_not_only_placed() {
        let bounds = Profile::default().bounds;
        let why = aware_core::Unschedulable { nodes: 3, insufficient_cpu: 3, insufficient_memory: 3 };
        let (mut g, mut ready, mut obs) = one_pod_ran_then_pending(2400, why);
        while obs.time_s < 150.0 {
            obs.time_s += 15.0;
            let _ = g.check(&obs, &[0.1]);
        }
        let mut p = rec(1, 3800, 900);
        assert!(g.roll_back_unplaced(&mut p, &bounds).is_some(), "past the grace");
        let mut starting = obs.clone();
        starting.pods[0].node = Some("n".into());
        starting.pods[0].phase = PodPhase::Starting;
        starting.pods[0].unschedulable = None;
        starting.time_s = 165.0;
        let _ = g.check(&starting, &[0.1]);
        let mut p = rec(1, 3800, 900);
        let why = g.roll_back_unplaced(&mut p, &bounds).expect("held while starting");
        assert_eq!(p.containers[0].limits.cpu_millicores, 2400);
        assert!(why.contains("those placed since still starting"), "{why}");
        // A pod that restarted (a crash loop) ends it too.
        let mut g2 = g.clone();
        let mut crashing = starting.clone();
        crashing.pods[0].restarts = 1;
        crashing.time_s = 180.0;
        let _ = g2.check(&crashing, &[0.1]);
        assert_eq!(g2.roll_back_unplaced(&mut rec(1, 3800, 900), &bounds), None, "restarted");
        ready.time_s = 180.0;
        let _ = g.check(&ready, &[0.1]);
        let mut p = rec(1, 3800, 900);
        assert_eq!(g.roll_back_unplaced(&mut p, &bounds), None, "a ready pod ends it");
        // Starting within the grace: no spell to hold.
        starting.time_s = 195.0;
        let _ = g.check(&starting, &[0.1]);
        starting.time_s = 400.0;
        let _ = g.check(&starting, &[0.1]);
        let mut p = rec(1, 3800, 900);
        assert_eq!(g.roll_back_unplaced(&mut p, &bounds), None, "never unplaced");
    }

    /// Running pods a backend reports no node for (Prometheus reports none) are not unplaced;
    /// pods that ran with no limit (0) are not given the bounds' least when rolled back.
    #[test]
    fn only_pending_pods_are_unplaced_and_no_limit_stays_none() {
        let bounds = Profile::default().bounds;
        let mut g = Guard::new(GuardConfig { unplaced_grace_s: 0.0, ..GuardConfig::default() });
        let mut nodeless = observation(15.0, Some(0.5));
        for p in &mut nodeless.pods {
            p.node = None;
            p.resources.limits.cpu_millicores = 0;
            p.resources.limits.memory_bytes = 0;
        }
        let _ = g.check(&nodeless, &[0.1]);
        let mut p = rec(84, 4000, 6384);
        assert_eq!(g.roll_back_unplaced(&mut p, &bounds), None, "ready pods are placed");
        let mut pending = nodeless.clone();
        pending.time_s = 30.0;
        for p in &mut pending.pods {
            p.phase = PodPhase::Pending;
        }
        let _ = g.check(&pending, &[0.1]);
        let mut p = rec(84, 4000, 6384);
        g.roll_back_unplaced(&mut p, &bounds).expect("replicas lowered");
        assert!(p.replicas < 84);
        assert_eq!((p.containers[0].limits.cpu_millicores, p.containers[0].limits.memory_bytes), (4000, 6384 * MIB));
    }

    /// The guard's rules for the fallback, in their order: the roll-back to what last ran,
    /// then what the fallback does not set back to the deployment (the roll-back never undoes
    /// it), then the OOM floor (the roll-back never goes below it); each said in the verdict.
    #[test]
    fn the_fallbacks_net_rolls_back_then_restores_the_deployment_then_keeps_the_oom_floor() {
        let bounds = Profile::default().bounds;
        let mut g = Guard::new(GuardConfig { unplaced_grace_s: 30.0, ..GuardConfig::default() });
        let mut placed = observation(15.0, Some(0.5));
        let ready = placed.pods.iter().filter(|p| p.phase == PodPhase::Ready).count() as u32;
        let ran = placed.pods.iter().find(|p| p.phase == PodPhase::Ready).unwrap().resources.limits;
        placed.pods[0].oom_killed_at_bytes = Some(ran.memory_bytes as f64);
        let _ = g.check(&placed, &[0.1]);
        let mut unplaced = placed.clone();
        for p in &mut unplaced.pods {
            (p.node, p.phase, p.oom_killed_at_bytes) = (None, PodPhase::Pending, None);
        }
        for t in [30.0, 60.0] {
            unplaced.time_s = t;
            let _ = g.check(&unplaced, &[0.1]);
        }
        let deployed = (ready, container(ran.cpu_millicores * 2, ran.memory_bytes / MIB));
        let mpa = aware_core::Scope { replicas: true, cpu: false, memory: true };
        let big = || rec(84, ran.cpu_millicores * 4, 4 * ran.memory_bytes / MIB);
        let mut p = big();
        let mut verdict = "passed".to_string();
        crate::manager::guard_fallback(&g, &mut p, 60.0, &bounds, Some((mpa, &deployed)), &mut verdict);
        let floor = (ran.memory_bytes + 100 * MIB).max(ran.memory_bytes * 6 / 5);
        assert_eq!(p.replicas, ready);
        assert_eq!(p.containers[0].limits.cpu_millicores, ran.cpu_millicores * 2, "as deployed, not as last ran");
        assert!(
            p.containers[0].limits.memory_bytes.abs_diff(floor) <= 1,
            "{} vs {floor}",
            p.containers[0].limits.memory_bytes
        );
        let at = |what: &str| verdict.find(what).unwrap_or_else(|| panic!("{what} in {verdict}"));
        assert!(at("lowered: ") == 0 && at("; restored: ") < at("; raised: "), "{verdict}");
        // Not handed back (one refused observation): what last ran.
        let mut p = big();
        let mut verdict = "fallback: stale".to_string();
        crate::manager::guard_fallback(&g, &mut p, 60.0, &bounds, None, &mut verdict);
        assert_eq!(p.containers[0].limits.cpu_millicores, ran.cpu_millicores);
        assert!(verdict.starts_with("fallback: stale; lowered: replicas 84 → "), "{verdict}");
    }

    /// The policy alone (no fallback floors it) gets no floor after an OOM kill.
    #[test]
    fn the_oom_floor_comes_with_the_fallbacks_floor() {
        let limits = aware_core::GuardLimits::default();
        assert!(GuardConfig::for_agent(&limits, true, None).oom_hold_s > 0.0);
        let mut alone = Guard::new(GuardConfig::for_agent(&limits, false, None));
        let mut obs = observation(15.0, Some(0.5));
        obs.pods[0].oom_killed_at_bytes = Some((256 * MIB) as f64);
        let _ = alone.check(&obs, &[0.1]);
        let mut p = rec(1, 1000, 256);
        assert_eq!(alone.keep_oom_floor(&mut p, 15.0, &Profile::default().bounds), None);
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
        // A pod ready for longer than the grace without a sample lost it: refused, though the
        // others have theirs (a pod ready more recently would be set aside).
        let mut lost = observation(0.0, Some(0.5));
        let ready_since = lost.pods.iter().find_map(|p| p.ready_since_s).unwrap();
        lost.time_s = ready_since + aware_core::USAGE_SAMPLE_GRACE_S + 15.0;
        let pod = lost.pods.iter_mut().find(|p| p.phase == PodPhase::Ready).unwrap();
        pod.cpu_usage_cores = None;
        let e = Guard::new(GuardConfig::default()).check(&lost, &[0.1]).unwrap_err();
        assert!(matches!(e, Untrusted::Observation(ObservationError::NoUsageSample { .. })), "{e}");
        lost.time_s = ready_since + aware_core::USAGE_SAMPLE_GRACE_S - 15.0;
        let recent = Guard::new(GuardConfig::default()).check(&lost, &[0.1]);
        assert_eq!(recent.is_ok(), lost.pods.iter().filter(|p| p.phase == PodPhase::Ready).count() > 1);
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
        // No ready pod (all starting or crash-looping after OOM kills): nothing was measured,
        // so the agent does not act on it.
        let mut down = observation(45.0, Some(0.5));
        for p in &mut down.pods {
            p.phase = PodPhase::Starting;
        }
        let mut g = Guard::new(GuardConfig::for_agent(&aware_core::GuardLimits::default(), true, None));
        let e = g.check(&down, &[0.1]).unwrap_err();
        assert!(matches!(e, Untrusted::NotServing { pods } if pods == down.pods.len()), "{e}");
        assert!(e.to_string().contains("nothing serves"), "{e}");
        // Unless no fallback watched the app (the policy alone): the agent acts, as before.
        let cold = GuardConfig::for_agent(&aware_core::GuardLimits::default(), false, None);
        assert!(Guard::new(cold).check(&down, &[0.1]).is_ok());
    }

    /// Table: now 2 replicas × (1000 m, 512 MiB); (usage: cores, largest working set MiB;
    /// the agent's proposal; what acts).
    #[test]
    fn a_cut_the_measured_usage_does_not_fit_is_undone_table() {
        let cases = [
            // 1.12 cores in use: one replica of 1000 m would saturate (the seed-83 collapse).
            ((1.12, 300), rec(1, 1000, 512), rec(2, 1000, 512)),
            // 0.6 cores in use: one replica holds it with more than 15 % to spare.
            ((0.6, 300), rec(1, 1000, 512), rec(1, 1000, 512)),
            // Both cut, replicas restored first: 2 × 700 m = 1.4 cores ≥ 1.12 × 1.15.
            ((1.12, 300), rec(1, 700, 512), rec(2, 700, 512)),
            // Both cut, and 2 × 600 m is still short of 1.29: CPU held too.
            ((1.12, 300), rec(1, 600, 512), rec(2, 1000, 512)),
            // Memory below the working set + 15 % is held; above it the cut stands.
            ((0.3, 480), rec(2, 1000, 400), rec(2, 1000, 512)),
            ((0.3, 300), rec(2, 1000, 400), rec(2, 1000, 400)),
            // Increases pass, even one still short of the usage (3 cores for 3.45 needed).
            ((3.0, 500), rec(3, 1000, 1024), rec(3, 1000, 1024)),
            // Replicas and CPU moved apart: held whole, never above the current 2 cores.
            ((1.9, 300), rec(4, 400, 512), rec(2, 1000, 512)),
            ((1.9, 300), rec(1, 1800, 512), rec(2, 1000, 512)),
            // Already short (throttled at 2 cores): no cut, but no forced increase either.
            ((2.0, 300), rec(2, 1000, 512), rec(2, 1000, 512)),
        ];
        for ((cores, mib), agent, want) in cases {
            let mut g = Guard::new(GuardConfig::default());
            let usage = Usage { cpu_cores: cores, memory_bytes: (mib * MIB) as f64, serving_cores: None };
            let (out, why) = g.fit_usage(agent.clone(), &usage, 2, &container(1000, 512), &Profile::default().bounds);
            assert_eq!(
                (out.replicas, out.containers[0].limits),
                (want.replicas, want.containers[0].limits),
                "{agent:?}"
            );
            assert_eq!(why.is_some(), want != agent, "{agent:?}: {why:?}");
            if let Some(why) = why {
                assert!(why.contains("does not fit"), "{why}");
            }
        }
        // What acts is what the stabilisation window remembers: a later cut to 1 replica is held.
        let mut g = Guard::new(GuardConfig::default());
        let usage = Usage { cpu_cores: 1.12, memory_bytes: (300 * MIB) as f64, serving_cores: None };
        let (out, _) = g.limit_under(
            &rec(1, 1000, 512),
            None,
            None,
            Some(&usage),
            2,
            &container(1000, 512),
            &Profile::default().bounds,
        );
        assert_eq!(out.replicas, 2);
        let (out, why) = g.limit(&rec(1, 1000, 512), 2, &container(1000, 512), &Profile::default().bounds);
        assert_eq!(out.replicas, 2, "{why:?}");
    }

    /// Once the SLO has been missed in two intervals in a row, a proposal below the replicas or
    /// the CPU limit of the last interval that met it is raised to them (memory left alone);
    /// one missed interval, a proposal at or above them, or the rule off, change nothing; the
    /// window then holds the rolled-back allocation against the next cut.
    /// An app served by two ready pods of 1000 m, and the same app cut to one pod of 250 m.
    fn met_and_small() -> (Observation, Observation) {
        let mut met = observation(10.0, Some(0.2));
        let pod = met.pods.iter().find(|p| p.phase == PodPhase::Ready).cloned().expect("a ready pod");
        met.pods = vec![pod; 2];
        met.desired_replicas = 2;
        for p in &mut met.pods {
            p.resources = container(1000, 512);
        }
        let mut small = met.clone();
        small.pods.truncate(1);
        small.pods[0].resources = container(250, 256);
        small.desired_replicas = 1;
        (met, small)
    }

    #[test]
    fn a_cut_the_slo_does_not_fit_is_rolled_back() {
        let bounds = Profile::default().bounds;
        let on = GuardConfig { slo_roll_back: true, stabilisation_intervals: 0, ..GuardConfig::default() };
        // Two ready pods of 1000 m served the interval that last met the SLO; the same app once
        // cut to one pod of 250 m.
        let (met, small) = met_and_small();
        let cut = container(250, 256);
        // (intervals missed after the last one met, replicas and CPU now, the proposal, what acts)
        let cases = [
            (1, (1, 250), rec(1, 250, 256), rec(1, 250, 256)),
            (2, (1, 250), rec(1, 250, 256), rec(2, 1000, 256)),
            (3, (1, 500), rec(1, 500, 256), rec(2, 1000, 256)),
            (2, (1, 250), rec(3, 250, 256), rec(3, 1000, 256)),
            (2, (1, 1000), rec(1, 2000, 256), rec(2, 2000, 256)),
            // At or above what last met the SLO: nothing to roll back (memory is left alone).
            (2, (2, 1000), rec(2, 1000, 128), rec(2, 1000, 128)),
            (2, (2, 1000), rec(4, 1500, 256), rec(4, 1500, 256)),
        ];
        for (missed, (replicas, cpu), proposal, want) in cases {
            let mut g = Guard::new(on.clone());
            g.note_slo(&met, Some(false));
            for _ in 0..missed {
                g.note_slo(&met, Some(true));
            }
            // An interval not measured neither counts nor resets.
            g.note_slo(&met, None);
            let now = container(cpu, 256);
            let (out, why) = g.limit_under(&proposal, None, None, None, replicas, &now, &bounds);
            assert_eq!(
                (out.replicas, out.containers[0].limits),
                (want.replicas, want.containers[0].limits),
                "{missed} {proposal:?}"
            );
            assert_eq!(why.as_ref().is_some_and(|w| w.contains("SLO was missed")), want != proposal, "{why:?}");
        }
        // Off (an agent the fallback does not floor), nothing is rolled back.
        let mut off = Guard::new(GuardConfig { slo_roll_back: false, ..on.clone() });
        off.note_slo(&met, Some(false));
        off.note_slo(&met, Some(true));
        off.note_slo(&met, Some(true));
        let (out, _) = off.limit_under(&rec(1, 250, 256), None, None, None, 1, &cut, &bounds);
        assert_eq!((out.replicas, out.containers[0].limits.cpu_millicores), (1, 250));
        // Never met (or met with no pod ready): nothing to roll back to.
        let mut down = met.clone();
        down.pods.clear();
        let mut never = Guard::new(on.clone());
        never.note_slo(&down, Some(false));
        never.note_slo(&met, Some(true));
        never.note_slo(&met, Some(true));
        let (out, why) = never.limit_under(&rec(1, 250, 256), None, None, None, 1, &cut, &bounds);
        assert_eq!((out.replicas, out.containers[0].limits.cpu_millicores, why), (1, 250, None));
        // A met interval resets the count: the next cut stands.
        let mut g = Guard::new(on.clone());
        for missed in [false, true, false, true] {
            g.note_slo(&met, Some(missed));
        }
        let (out, why) = g.limit_under(&rec(1, 500, 256), None, None, None, 1, &container(500, 256), &bounds);
        assert_eq!((out.replicas, out.containers[0].limits.cpu_millicores, why), (1, 500, None));
        // The metrics lag the pods: an interval reported met while the pods already show the
        // cut is credited to what ran in the intervals before it.
        let mut g = Guard::new(on.clone());
        g.note_slo(&met, None);
        g.note_slo(&small, Some(false));
        g.note_slo(&small, Some(true));
        g.note_slo(&small, Some(true));
        let (out, _) = g.limit_under(&rec(1, 250, 256), None, None, None, 1, &cut, &bounds);
        assert_eq!((out.replicas, out.containers[0].limits.cpu_millicores), (2, 1000));
        // More pods ready than desired (a surge during a rollout) count as the desired number.
        let mut surge = met.clone();
        surge.desired_replicas = 1;
        let mut g = Guard::new(on.clone());
        g.note_slo(&surge, Some(false));
        g.note_slo(&small, Some(true));
        g.note_slo(&small, Some(true));
        let (out, _) = g.limit_under(&rec(1, 250, 256), None, None, None, 1, &cut, &bounds);
        assert_eq!((out.replicas, out.containers[0].limits.cpu_millicores), (1, 1000));
        // The window holds what was rolled back to against the next cut.
        let mut g = Guard::new(GuardConfig { stabilisation_intervals: 20, ..on });
        g.note_slo(&met, Some(false));
        g.note_slo(&met, Some(true));
        g.note_slo(&met, Some(true));
        let (out, _) = g.limit_under(&rec(1, 250, 256), None, None, None, 1, &cut, &bounds);
        assert_eq!((out.replicas, out.containers[0].limits.cpu_millicores), (2, 1000));
        g.note_slo(&met, Some(false));
        let (out, why) = g.limit_under(&rec(1, 250, 256), None, None, None, 2, &container(1000, 256), &bounds);
        assert_eq!((out.replicas, out.containers[0].limits.cpu_millicores), (2, 1000), "{why:?}");
        assert!(why.as_ref().is_some_and(|w| w.contains("stabilisation window") && !w.contains("SLO")), "{why:?}");
    }

    /// A roll-back is remembered: the cut stays refused for two windows after it, missed or
    /// not, then passes; refused again soon after, it is held twice as long; an interval met on
    /// less than the floor forgets it, and so does as long again without a roll-back.
    #[test]
    fn a_cut_the_slo_refused_stays_refused_longer_each_time() {
        let bounds = Profile::default().bounds;
        // A window of one interval holds nothing: only the refusal holds.
        let mut g =
            Guard::new(GuardConfig { slo_roll_back: true, stabilisation_intervals: 1, ..GuardConfig::default() });
        let (met, small) = met_and_small();
        let cut = container(250, 256);
        let try_cut = |g: &mut Guard| {
            // Within one interval's step: half the replicas, half the CPU.
            let (out, why) = g.limit_under(&rec(1, 500, 256), None, None, None, 2, &container(1000, 256), &bounds);
            ((out.replicas, out.containers[0].limits.cpu_millicores), why.unwrap_or_default())
        };
        let miss_twice = |g: &mut Guard| {
            g.note_slo(&met, Some(false));
            g.note_slo(&small, Some(true));
            g.note_slo(&small, Some(true));
        };
        miss_twice(&mut g);
        let (got, why) = try_cut(&mut g);
        assert_eq!(got, (2, 1000));
        assert!(why.contains("rolled back") && why.contains("refused for 2 intervals"), "{why}");
        // A second interval of the same misses is the same refusal, not a repeat.
        g.note_slo(&small, Some(true));
        let (_, why) = try_cut(&mut g);
        assert!(why.contains("refused for 2 intervals"), "{why}");
        // Met at the floor: the cut is refused for the rest of the hold (two intervals after the
        // last roll-back), then passes.
        g.note_slo(&met, Some(false));
        let (got, why) = try_cut(&mut g);
        assert_eq!(got, (2, 1000));
        assert!(why.contains("cut refused") && why.contains("for 2 more intervals"), "{why}");
        g.note_slo(&met, Some(false));
        let (got, why) = try_cut(&mut g);
        assert_eq!(got, (2, 1000));
        assert!(why.contains("for 1 more intervals"), "{why}");
        g.note_slo(&met, Some(false));
        let (got, why) = try_cut(&mut g);
        assert_eq!((got, why.as_str()), ((1, 500), ""));
        // Made again and missed again: held twice as long (4 intervals).
        g.note_slo(&small, Some(true));
        g.note_slo(&small, Some(true));
        let (got, why) = try_cut(&mut g);
        assert_eq!(got, (2, 1000));
        assert!(why.contains("refused for 4 intervals"), "{why}");
        for _ in 0..4 {
            g.note_slo(&met, Some(false));
            assert_eq!(try_cut(&mut g).0, (2, 1000));
        }
        g.note_slo(&met, Some(false));
        assert_eq!(try_cut(&mut g).0, (1, 500));
        // A third time, eight; then the cut meets the SLO (the fallback made it, say) over the
        // lookback: forgotten, and the next refusal starts again at two.
        miss_twice(&mut g);
        assert!(try_cut(&mut g).1.contains("refused for 8 intervals"));
        for _ in 0..SLO_MET_LOOKBACK {
            g.note_slo(&small, Some(false));
        }
        let (got, why) = g.limit_under(&rec(1, 250, 256), None, None, None, 1, &cut, &bounds);
        assert_eq!(((got.replicas, got.containers[0].limits.cpu_millicores), why), ((1, 250), None));
        miss_twice(&mut g);
        assert!(try_cut(&mut g).1.contains("refused for 2 intervals"));
        // Run out (2 intervals after the roll-back), then as long again (2) and the slack: a
        // roll-back after that is a new refusal, held two windows, not a repeat doubled. (A
        // roll-back comes on the third note of `miss_twice`.)
        let edge = 2 + 2 + SLO_REFUSAL_REPEAT_SLACK as usize;
        for _ in 0..edge + 1 - 3 {
            g.note_slo(&met, Some(false));
        }
        miss_twice(&mut g);
        assert!(try_cut(&mut g).1.contains("refused for 2 intervals"));
        // At the edge, it is a repeat.
        for _ in 0..edge - 3 {
            g.note_slo(&met, Some(false));
        }
        miss_twice(&mut g);
        assert!(try_cut(&mut g).1.contains("refused for 4 intervals"));
        // A fresh cluster forgets it.
        g.restart();
        let (got, why) = g.limit_under(&rec(1, 250, 256), None, None, None, 1, &cut, &bounds);
        assert_eq!(((got.replicas, got.containers[0].limits.cpu_millicores), why), ((1, 250), None));
    }

    /// While the SLO is met, growth of replicas or CPU at HPA's scale-down point or beyond is
    /// held at the current allocation, or at the fallback's proposal where it is higher; memory
    /// passes; a missed interval, a busy app or the rule off let it through.
    #[test]
    fn growth_the_usage_does_not_need_is_held_while_the_slo_is_met() {
        let bounds = Profile::default().bounds;
        let h = hpa_idle_headroom(0.5);
        assert!((h - 1.0 / 0.45).abs() < 1e-12);
        let on = GuardConfig { idle_growth_headroom: h, stabilisation_intervals: 0, ..GuardConfig::default() };
        let (met, _) = met_and_small();
        let now = container(1000, 512);
        let idle = Usage { cpu_cores: 0.4, memory_bytes: 100.0 * MIB as f64, serving_cores: Some(2.0) };
        let busy = Usage { cpu_cores: 1.0, memory_bytes: 100.0 * MIB as f64, serving_cores: Some(2.0) };
        let grow = rec(4, 2000, 1024);
        let mut g = Guard::new(on.clone());
        g.note_slo(&met, Some(false));
        // 2 cores for 0.4 in use: held at 2 × 1000 m; memory grows.
        let (out, why) = g.limit_under(&grow, None, None, Some(&idle), 2, &now, &bounds);
        assert_eq!((out.replicas, out.containers[0].limits), (2, Resources::new(1000, 1024 * MIB)));
        assert!(why.as_ref().is_some_and(|w| w.contains("growth held")), "{why:?}");
        // Never below the fallback's proposal: the floor raised it to 3 replicas.
        let (out, _) = g.limit_under(&grow, Some(&rec(3, 1000, 512)), None, Some(&idle), 2, &now, &bounds);
        assert_eq!((out.replicas, out.containers[0].limits.cpu_millicores), (3, 1000));
        // A cut is no growth.
        let (out, _) = g.limit_under(&rec(1, 1000, 512), None, None, Some(&idle), 2, &now, &bounds);
        assert_eq!(out.replicas, 1);
        // More replicas of less CPU is no idle growth: not turned into a CPU cut.
        let (out, why) = g.limit_under(&rec(4, 500, 512), None, None, Some(&idle), 2, &now, &bounds);
        assert_eq!((out.replicas, out.containers[0].limits.cpu_millicores, why), (4, 500, None));
        // Busy enough (2 cores for 1 in use, below ×2.22): it grows.
        let (out, why) = g.limit_under(&grow, None, None, Some(&busy), 2, &now, &bounds);
        assert_eq!((out.replicas, out.containers[0].limits.cpu_millicores, why), (4, 2000, None));
        // 0.6 cores in use: held where both pods served it (2 cores, ×3.3), not where one of
        // them is still starting (1 core served it, ×1.7): the usage may need the growth.
        let both = Usage { cpu_cores: 0.6, ..idle };
        let (out, _) = g.limit_under(&grow, None, None, Some(&both), 2, &now, &bounds);
        assert_eq!(out.replicas, 2);
        let starting = Usage { serving_cores: Some(1.0), ..both };
        let (out, why) = g.limit_under(&grow, None, None, Some(&starting), 2, &now, &bounds);
        assert_eq!((out.replicas, out.containers[0].limits.cpu_millicores, why), (4, 2000, None));
        // The SLO missed in the last interval: it grows.
        g.note_slo(&met, Some(true));
        let (out, _) = g.limit_under(&grow, None, None, Some(&idle), 2, &now, &bounds);
        assert_eq!((out.replicas, out.containers[0].limits.cpu_millicores), (4, 2000));
        // An exploring agent grows.
        g.note_slo(&met, Some(false));
        g.set_explores(true);
        let (out, _) = g.limit_under(&grow, None, None, Some(&idle), 2, &now, &bounds);
        assert_eq!(out.replicas, 4);
        g.set_explores(false);
        let (out, _) = g.limit_under(&grow, None, None, Some(&idle), 2, &now, &bounds);
        assert_eq!(out.replicas, 2);
        // Never known met, or the rule off: it grows.
        let mut fresh = Guard::new(on.clone());
        let (out, _) = fresh.limit_under(&grow, None, None, Some(&idle), 2, &now, &bounds);
        assert_eq!(out.replicas, 4);
        let mut off = Guard::new(GuardConfig { idle_growth_headroom: 0.0, ..on });
        off.note_slo(&met, Some(false));
        let (out, _) = off.limit_under(&grow, None, None, Some(&idle), 2, &now, &bounds);
        assert_eq!(out.replicas, 4);
        // Only with the floor, under an HPA fallback.
        let limits = aware_core::GuardLimits::default();
        assert_eq!(GuardConfig::for_agent(&limits, true, Some(0.5)).idle_growth_headroom, h);
        assert_eq!(GuardConfig::for_agent(&limits, false, Some(0.5)).idle_growth_headroom, 0.0);
        assert_eq!(GuardConfig::for_agent(&limits, true, None).idle_growth_headroom, 0.0);
    }

    #[test]
    fn under_an_hpa_fallback_a_cut_past_its_scale_up_point_is_not_made() {
        // HPA at 50 % scales up beyond a usage ratio of 1.1: 1 / 0.55 cores per core in use.
        assert!((hpa_cut_headroom(0.5) - 1.0 / 0.55).abs() < 1e-12);
        // A target so high that HPA's point is below VPA's margin keeps the margin.
        assert_eq!(hpa_cut_headroom(0.95), 1.0 + USAGE_MARGIN);
        let limits = aware_core::GuardLimits::default();
        let floored = GuardConfig::for_agent(&limits, true, Some(0.5));
        assert_eq!(floored.cpu_cut_headroom, hpa_cut_headroom(0.5));
        // Without the floor nothing would undo the cut, and the target is not read.
        assert_eq!(GuardConfig::for_agent(&limits, false, Some(0.5)).cpu_cut_headroom, 1.0 + USAGE_MARGIN);
        assert_eq!(GuardConfig::for_agent(&limits, true, None).cpu_cut_headroom, 1.0 + USAGE_MARGIN);
        // 15 one-core replicas at 39 % use 5.85 cores; HPA at 50 % holds at 11 (53 %) and would
        // scale 10 (58.5 %) back up, which VPA's margin alone lets through.
        let bounds = Profile::default().bounds;
        let usage = Usage { cpu_cores: 5.85, memory_bytes: (300 * MIB) as f64, serving_cores: None };
        for (config, agent, want) in [
            (floored.clone(), 11, 11),
            (floored.clone(), 10, 15),
            (GuardConfig::default(), 10, 10),
            (GuardConfig::default(), 5, 15),
        ] {
            let mut g = Guard::new(config);
            let (out, why) = g.fit_usage(rec(agent, 1000, 512), &usage, 15, &container(1000, 512), &bounds);
            assert_eq!(out.replicas, want, "{agent}: {why:?}");
            if want != agent {
                assert!(why.unwrap().contains("5.85 in use"));
            }
        }
    }

    #[test]
    fn usage_sums_the_ready_pods_cpu_and_takes_the_largest_working_set() {
        let obs = observation(15.0, Some(0.25));
        let ready: Vec<_> = serving_pods(&obs).collect();
        let u = Usage::of(&obs).unwrap();
        assert!((u.cpu_cores - 0.25 * ready.len() as f64).abs() < 1e-9, "{u:?}");
        let largest = ready.iter().filter_map(|p| p.memory_working_set_bytes).fold(0.0, f64::max);
        assert_eq!(u.memory_bytes, largest);
        let limits: f64 = ready.iter().map(|p| p.resources.limits.cpu_millicores as f64 / 1000.0).sum();
        assert!(limits > 0.0 && (u.serving_cores.unwrap() - limits).abs() < 1e-9, "{u:?}");
        // A ready pod without a CPU limit: its cores are not known, nor is the sum.
        let mut unlimited = obs.clone();
        let pod = unlimited.pods.iter_mut().find(|p| p.phase == PodPhase::Ready && !p.deleting).unwrap();
        pod.resources.limits.cpu_millicores = 0;
        assert_eq!(Usage::of(&unlimited).unwrap().serving_cores, None);
        assert_eq!(Usage::of(&observation(15.0, None)), None);
    }
}
