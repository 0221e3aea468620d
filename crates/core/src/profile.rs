//! The AWARE user profile: what the operator promises (SLO), wants (utilisation targets, reward
//! trade-off) and allows (bounds, lifecycle thresholds). Every field has a sensible default so a
//! minimal profile is a few lines; every field is checked on load so that a typo never silently
//! becomes a default.

use std::path::Path;

use serde::{Deserialize, Serialize};
use serde_saphyr::{Location, Spanned};

/// One line naming the file, the field (with line/column when the parser knows it) and the reason.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[error("{0}")]
pub struct ProfileError(pub String);

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Slo {
    /// Target 99th-percentile latency. `None` means "derive it": the simulator uses the SIMPPO
    /// rule (p99 at a reference allocation in isolation plus 15%).
    pub latency_p99_ms: Option<f64>,
    /// Minimum completed requests per second, when the workload has one.
    pub throughput_rps: Option<f64>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Targets {
    /// Usage over request HPA aims for (the HPA `averageUtilization`, as a fraction).
    pub cpu_utilisation: f64,
    pub memory_utilisation: f64,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct RewardWeights {
    /// Weight of the SLO's shortfall against efficiency:
    /// `r = (1−α)·|R|·([SP = 1]·(1 − cost) − [SP < 1]·(idle + unserved)) − α·|R|·(1 − SP)`
    /// (`aware_env::RewardFunction`).
    pub alpha: f64,
    /// What one GiB of memory costs in cores, in the reward's cost term.
    pub memory_price: f64,
    /// Subtracted when an action asks for something outside the bounds.
    pub illegal_action_penalty: f64,
    /// Subtracted when an action reverses the previous one.
    pub oscillation_penalty: f64,
}

/// Replica and per-container resource bounds. Every simulated app carries its own (sized from its
/// load, as an HPA's `maxReplicas` is set per Deployment); the profile's `bounds:` section only
/// overrides them ([`BoundsOverrides`], resolved by [`resolve_bounds`]).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Bounds {
    pub min_replicas: u32,
    pub max_replicas: u32,
    pub min_cpu_millicores: u64,
    pub max_cpu_millicores: u64,
    pub min_memory_mib: u64,
    pub max_memory_mib: u64,
    /// Size of one discrete vertical CPU step.
    pub cpu_step_millicores: u64,
    /// Size of one discrete vertical memory step.
    pub memory_step_mib: u64,
}

/// The keys of the profile's `bounds:` section that the file actually set: each replaces the
/// corresponding value of an app's own bounds (see [`resolve_bounds`]). `None` = keep the app's.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct BoundsOverrides {
    pub min_replicas: Option<u32>,
    pub max_replicas: Option<u32>,
    pub min_cpu_millicores: Option<u64>,
    pub max_cpu_millicores: Option<u64>,
    pub min_memory_mib: Option<u64>,
    pub max_memory_mib: Option<u64>,
    pub cpu_step_millicores: Option<u64>,
    pub memory_step_mib: Option<u64>,
}

impl BoundsOverrides {
    pub fn is_empty(&self) -> bool {
        *self == BoundsOverrides::default()
    }
}

/// Valid replica counts (issue 19: 1–100,000).
pub const REPLICAS_RANGE: (u64, u64) = (1, 100_000);
/// Valid CPU per container, millicores: 1 m to 1,000 cores.
pub const CPU_MILLICORES_RANGE: (u64, u64) = (1, 1_000_000);
/// Valid memory per container, MiB: 1 MiB to 16 TiB.
pub const MEMORY_MIB_RANGE: (u64, u64) = (1, 16 * 1024 * 1024);

/// An app's effective bounds: its own, with each key the profile set replacing the app's value.
/// When an override of one side crosses the app's other side (profile `min_replicas: 50` on an
/// app whose own maximum is 30), the other side moves with it, so the result is always a valid
/// range. This is the one place effective bounds come from: the policy registry builds every
/// per-app recommender (HPA `minReplicas`/`maxReplicas`, VPA/MPA resource policy, threshold,
/// AIMD, the RL action decoder and state encoder) from `Profile::for_app(&app.bounds)`, which calls it.
pub fn resolve_bounds(app: &Bounds, overrides: &BoundsOverrides) -> Bounds {
    let o = overrides;
    let mut b = Bounds {
        min_replicas: o.min_replicas.unwrap_or(app.min_replicas),
        max_replicas: o.max_replicas.unwrap_or(app.max_replicas),
        min_cpu_millicores: o.min_cpu_millicores.unwrap_or(app.min_cpu_millicores),
        max_cpu_millicores: o.max_cpu_millicores.unwrap_or(app.max_cpu_millicores),
        min_memory_mib: o.min_memory_mib.unwrap_or(app.min_memory_mib),
        max_memory_mib: o.max_memory_mib.unwrap_or(app.max_memory_mib),
        cpu_step_millicores: o.cpu_step_millicores.unwrap_or(app.cpu_step_millicores),
        memory_step_mib: o.memory_step_mib.unwrap_or(app.memory_step_mib),
    };
    fn fix<T: Ord + Copy>(min: &mut T, max: &mut T, min_set: bool) {
        if *min > *max {
            if min_set {
                *max = *min;
            } else {
                *min = *max;
            }
        }
    }
    fix(&mut b.min_replicas, &mut b.max_replicas, o.min_replicas.is_some() && o.max_replicas.is_none());
    fix(
        &mut b.min_cpu_millicores,
        &mut b.max_cpu_millicores,
        o.min_cpu_millicores.is_some() && o.max_cpu_millicores.is_none(),
    );
    fix(&mut b.min_memory_mib, &mut b.max_memory_mib, o.min_memory_mib.is_some() && o.max_memory_mib.is_none());
    b
}

/// Which synthetic application population `generate` draws from (see `aware_sim::population`).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
#[non_exhaustive]
pub enum Population {
    /// Long-running services sized like Alibaba's 2021 microservices trace: tens of instances
    /// per service on average, 1 to several hundred at peak, heavy-tailed.
    #[default]
    Microservices,
    /// Functions with the Azure Functions 2019 invocation-rate distribution: 45 % of apps at most
    /// one invocation per hour, 81 % at most one per minute, a long tail of busy ones.
    Serverless,
}

impl Population {
    pub const ALL: [Population; 2] = [Population::Microservices, Population::Serverless];

    pub fn name(self) -> &'static str {
        match self {
            Population::Microservices => "microservices",
            Population::Serverless => "serverless",
        }
    }
}

impl std::fmt::Display for Population {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}

/// An unknown population name; the message lists the known ones.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("unknown population {0:?} (expected microservices or serverless)")]
pub struct UnknownPopulation(pub String);

impl std::str::FromStr for Population {
    type Err = UnknownPopulation;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        Population::ALL.into_iter().find(|p| p.name() == s).ok_or_else(|| UnknownPopulation(s.into()))
    }
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct LifecycleThresholds {
    /// OFFLINE → ONLINE once the agent's estimated reward reaches this fraction of the fallback
    /// recommender's mean reward (with no more SLO-violating intervals and, with as many, at
    /// most `max(1, 2 − t_online)` times its core-seconds in the same shadow run); with bootstrapping, an
    /// acting agent that falls below it twice in a row goes back to OFFLINE. Default 1: as good
    /// as the fallback. At 0.95 an agent that held more than the fallback for the same
    /// violations was handed control: over `fig10 --quick` seeds 1–16 and 53–68 AWARE spent
    /// 3.5 % more core-seconds than the MPA default for 97 more SLO-violating intervals; at 1,
    /// 0.43 % more for 9 more (`docs/results/lifecycle.md`).
    pub t_online: f64,
    /// ONLINE → SERVING once the coefficient of variation of recent episode rewards is below this.
    pub t_serving: f64,
    /// SERVING → ONLINE (retrain) once the recent mean reward drops by more than this fraction.
    pub t_var: f64,
    /// Number of recent episodes the three thresholds look at.
    pub reward_window: u32,
    /// Episodes an app may retrain (ONLINE after SERVING degraded or the rules failed) without
    /// converging before retraining gives up: the fallback serves it again (OFFLINE; without
    /// bootstrapping the agent stops exploring), and a retraining the rules' failure starts
    /// next waits twice as many failing episodes each time it gives up again. An app that no
    /// allocation within its bounds serves would otherwise explore forever. Default 40: about
    /// what a DDPG agent trained from scratch on one workload takes to stop improving (the
    /// `converged` reference of `aware experiment fig9 --quick`, 40–42 episodes). At least
    /// `reward_window`, the fewest a retraining app can converge in.
    pub max_retrain_episodes: u32,
}

/// The `guard:` section: the lifecycle's safety guard on every action the agent proposes
/// (`aware_lifecycle::guard`). Defaults are upstream HPA's where it has one.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct GuardLimits {
    /// Observations whose clock has not advanced for this many intervals are stale: the
    /// fallback acts instead of the agent (3).
    pub stale_after_intervals: u32,
    /// Largest factor one interval may multiply replicas by (HPA's default scale-up: 2).
    pub max_replica_growth: f64,
    /// Replicas one interval may always add, whatever the factor (HPA's default: 4).
    pub min_replica_step: u32,
    /// Largest factor one interval may multiply or divide a CPU or memory limit by (2).
    pub max_resource_factor: f64,
    /// Intervals a scale-down looks back over (HPA's downscale stabilisation, 5 minutes: 20
    /// intervals of 15 s).
    pub stabilisation_intervals: u32,
    /// Seconds an OOM kill holds the memory limit up: no proposal, the fallback's or the
    /// agent's, goes below the killed limit bumped as VPA bumps it (VPA's memory aggregation
    /// interval, 24 h, for which its recommender keeps an OOM kill as the container's peak).
    /// 0: no floor.
    pub oom_hold_s: f64,
    /// Seconds with none of an app's pods on a node after which the fallback's proposals go
    /// back to what its pods last ran ready (2 minutes; with nothing running, the rules measure
    /// nothing and keep what does not fit), and, after each further wait as long (at least a
    /// minute) with the scheduler short of CPU, over pods of half the CPU, down to one core.
    /// Raise it where a cluster autoscaler adds nodes for pending pods more slowly than that.
    pub unplaced_grace_s: f64,
    /// The most an agent's proposal may reserve, as a multiple of what the fallback proposes
    /// in the same interval: in cores (replicas × CPU) and in memory (replicas × memory), fewer
    /// replicas first. A dimension the fallback does not set (the CPU limit, under the MPA
    /// default) is measured against the deployment. Part of the rules' net, with the floor of
    /// their scale-ups: a learner that diverges wastes at most this much (unless the measured
    /// usage or an OOM kill needs more). Lifted while the rules have failed the app, where
    /// their proposal is no yardstick, and the agent, in the last episode's comparison on the
    /// same traffic (for a retraining app, its greedy policy replayed without the ceiling),
    /// served better than the fallback's replay (fewer SLO-violating intervals or more
    /// reward): growth that buys nothing stays under it.
    /// 0: no ceiling (2).
    pub fallback_ceiling: f64,
}

impl Default for GuardLimits {
    fn default() -> Self {
        Self {
            stale_after_intervals: 3,
            max_replica_growth: 2.0,
            min_replica_step: 4,
            max_resource_factor: 2.0,
            stabilisation_intervals: 20,
            oom_hold_s: 86_400.0,
            unplaced_grace_s: 120.0,
            fallback_ceiling: 2.0,
        }
    }
}

/// The `simulation:` section: control-loop realism of the embedded simulator. Defaults are the
/// Kubernetes defaults or typical production values, as named on each field; the simulator's
/// `SimConfig::with_profile` applies them.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Simulation {
    /// Control interval, seconds (HPA's sync period, 15 s).
    pub interval_s: f64,
    /// Metrics scrape interval, seconds (metrics-server `--metric-resolution`, 15 s).
    pub scrape_interval_s: f64,
    /// Age of the newest metrics a policy sees, seconds (15 s: the previous window).
    pub metrics_lag_s: f64,
    /// From scheduling to ready, seconds (image pull, start, readiness probe: 30 s).
    pub startup_delay_s: f64,
    /// CPU a starting container burns, as a fraction of its limit (0.3).
    pub startup_cpu_fraction: f64,
    /// In-place resize: from the request to the container running with new limits (5 s).
    pub resize_latency_s: f64,
    /// `terminationGracePeriodSeconds` (30 s): a deleted pod drains this long, the rest is dropped.
    pub termination_grace_s: f64,
    /// Client timeout, seconds (30 s): requests waiting longer are abandoned and dropped.
    pub request_timeout_s: f64,
    /// Fixed node count; absent: sized by `node_headroom`.
    pub nodes: Option<u32>,
    pub node_cores: f64,
    pub node_memory_mib: u64,
    /// Node capacity over the apps' reference reservation when `nodes` is absent (1.5); under
    /// a scenario, over the larger of the reservation before and after the change.
    pub node_headroom: f64,
    /// Episodes start at a seed-drawn time of the week (true) or at t = 0.
    pub random_start: bool,
}

impl Default for Simulation {
    fn default() -> Self {
        Self {
            interval_s: 15.0,
            scrape_interval_s: 15.0,
            metrics_lag_s: 15.0,
            startup_delay_s: 30.0,
            startup_cpu_fraction: 0.3,
            resize_latency_s: 5.0,
            termination_grace_s: 30.0,
            request_timeout_s: 30.0,
            nodes: None,
            node_cores: 16.0,
            node_memory_mib: 64 * 1024,
            node_headroom: 1.5,
            random_start: true,
        }
    }
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Profile {
    pub app: Option<String>,
    pub slo: Slo,
    pub targets: Targets,
    pub reward: RewardWeights,
    /// Fleet-wide bounds: the defaults below with the file's `bounds:` keys applied. Used where
    /// no app is known (`recommend` on a bare observation); simulated apps use
    /// [`Profile::bounds_for`] instead.
    pub bounds: Bounds,
    /// The `bounds:` keys the file set, which override every app's own bounds.
    pub bound_overrides: BoundsOverrides,
    /// Application population to generate (`population:`; default `microservices`).
    pub population: Population,
    /// AWARE's stage thresholds (`lifecycle:`), read by the lifecycle manager
    /// (`aware_lifecycle`: `aware run`, `aware demo`, the lifecycle experiments).
    pub lifecycle: LifecycleThresholds,
    /// Control-loop realism of the embedded simulator.
    #[serde(default)]
    pub simulation: Simulation,
    /// Whether the fallback recommender acts while the agent learns offline first (the
    /// OFFLINE stage); read by the lifecycle manager, which `--no-bootstrap` variants override.
    pub bootstrapping: bool,
    /// The safety guard's limits on the agent's actions.
    #[serde(default)]
    pub guard: GuardLimits,
    /// High stakes: the fallback recommender keeps acting while the agent retrains (ONLINE),
    /// and the agent is judged there by its run in the simulator's shadow, not by the rewards
    /// the fallback earned. Default false; `aware run --high-stakes` turns it on too.
    #[serde(default)]
    pub high_stakes: bool,
    /// Where trajectories go: `sqlite:PATH`, `postgres://…` or `influxdb://HOST:PORT/DB`.
    /// `simulate --record` and `compare --record` record there (`Workload::recording_store`);
    /// `--store URL` overrides it.
    pub store: String,
}

/// The URL schemes a store may have (the store crate opens them; the profile only checks form).
pub const STORE_SCHEMES: [&str; 4] = ["sqlite:", "postgres://", "postgresql://", "influxdb://"];

impl Default for Profile {
    fn default() -> Self {
        Self {
            app: None,
            slo: Slo { latency_p99_ms: None, throughput_rps: None },
            targets: Targets { cpu_utilisation: 0.5, memory_utilisation: 0.8 },
            reward: RewardWeights {
                alpha: 0.3,
                memory_price: DEFAULT_MEMORY_PRICE,
                illegal_action_penalty: 0.1,
                oscillation_penalty: 0.05,
            },
            bounds: Bounds {
                min_replicas: 1,
                max_replicas: 20,
                min_cpu_millicores: 100,
                max_cpu_millicores: 4000,
                min_memory_mib: 64,
                max_memory_mib: 8192,
                cpu_step_millicores: 250,
                memory_step_mib: 128,
            },
            bound_overrides: BoundsOverrides::default(),
            population: Population::Microservices,
            lifecycle: LifecycleThresholds {
                t_online: 1.0,
                t_serving: 0.05,
                t_var: 0.1,
                reward_window: 20,
                max_retrain_episodes: 40,
            },
            simulation: Simulation::default(),
            bootstrapping: true,
            guard: GuardLimits::default(),
            high_stakes: false,
            store: "sqlite:aware.db".into(),
        }
    }
}

impl Bounds {
    pub fn min_memory_bytes(&self) -> u64 {
        self.min_memory_mib * MIB
    }
    pub fn max_memory_bytes(&self) -> u64 {
        self.max_memory_mib * MIB
    }
    pub fn memory_step_bytes(&self) -> u64 {
        self.memory_step_mib * MIB
    }
}

pub const MIB: u64 = 1024 * 1024;
pub const GIB: u64 = 1024 * MIB;

/// Default `reward.memory_price`: what one GiB of memory costs in cores. On-demand prices of
/// general-purpose cloud machines put a GiB-hour at about 1/7.5 of a vCPU-hour.
pub const DEFAULT_MEMORY_PRICE: f64 = 0.134;

impl Profile {
    /// An app's effective bounds: its own with this profile's overrides ([`resolve_bounds`]).
    pub fn bounds_for(&self, app: &Bounds) -> Bounds {
        resolve_bounds(app, &self.bound_overrides)
    }

    /// This profile as seen by one app: `bounds` replaced by [`Profile::bounds_for`], so every
    /// recommender built `from_profile` gets the app's own replica and resource bounds.
    pub fn for_app(&self, app: &Bounds) -> Profile {
        Profile { bounds: self.bounds_for(app), ..self.clone() }
    }
}

// The raw, span-carrying mirror of the file: used only while loading so that a semantic error
// (min above max, α outside [0, 1]) can point at its line like a syntax error does.
type S<T> = Option<Spanned<T>>;

#[derive(Deserialize, Default)]
#[serde(deny_unknown_fields, default)]
struct RawProfile {
    app: Option<String>,
    slo: RawSlo,
    targets: RawTargets,
    reward: RawReward,
    bounds: RawBounds,
    lifecycle: RawLifecycle,
    population: Option<Spanned<String>>,
    simulation: RawSimulation,
    bootstrapping: Option<bool>,
    guard: RawGuard,
    high_stakes: Option<bool>,
    store: Option<Spanned<String>>,
}
#[derive(Deserialize, Default)]
#[serde(deny_unknown_fields, default)]
struct RawSlo {
    latency_p99_ms: S<f64>,
    throughput_rps: S<f64>,
}
#[derive(Deserialize, Default)]
#[serde(deny_unknown_fields, default)]
struct RawTargets {
    cpu_utilisation: S<f64>,
    memory_utilisation: S<f64>,
}
#[derive(Deserialize, Default)]
#[serde(deny_unknown_fields, default)]
struct RawReward {
    alpha: S<f64>,
    memory_price: S<f64>,
    illegal_action_penalty: S<f64>,
    oscillation_penalty: S<f64>,
}
#[derive(Deserialize, Default)]
#[serde(deny_unknown_fields, default)]
struct RawBounds {
    // Read as u64 so that a count beyond u32 is a range error at its line, never a wrap.
    min_replicas: S<u64>,
    max_replicas: S<u64>,
    min_cpu_millicores: S<u64>,
    max_cpu_millicores: S<u64>,
    min_memory_mib: S<u64>,
    max_memory_mib: S<u64>,
    cpu_step_millicores: S<u64>,
    memory_step_mib: S<u64>,
}
#[derive(Deserialize, Default)]
#[serde(deny_unknown_fields, default)]
struct RawLifecycle {
    t_online: S<f64>,
    t_serving: S<f64>,
    t_var: S<f64>,
    reward_window: S<u32>,
    max_retrain_episodes: S<u32>,
}

#[derive(Deserialize, Default)]
#[serde(deny_unknown_fields, default)]
struct RawGuard {
    stale_after_intervals: S<u32>,
    max_replica_growth: S<f64>,
    min_replica_step: S<u32>,
    max_resource_factor: S<f64>,
    stabilisation_intervals: S<u32>,
    oom_hold_s: S<f64>,
    unplaced_grace_s: S<f64>,
    fallback_ceiling: S<f64>,
}

#[derive(Deserialize, Default)]
#[serde(deny_unknown_fields, default)]
struct RawSimulation {
    interval_s: S<f64>,
    scrape_interval_s: S<f64>,
    metrics_lag_s: S<f64>,
    startup_delay_s: S<f64>,
    startup_cpu_fraction: S<f64>,
    resize_latency_s: S<f64>,
    termination_grace_s: S<f64>,
    request_timeout_s: S<f64>,
    nodes: S<u32>,
    node_cores: S<f64>,
    node_memory_mib: S<u64>,
    node_headroom: S<f64>,
    random_start: Option<bool>,
}

/// Collects values with their positions and the first rule they break.
struct Checker<'a> {
    source: &'a str,
    error: Option<ProfileError>,
}

impl Checker<'_> {
    fn fail(&mut self, field: &str, at: Option<Location>, reason: String) {
        if self.error.is_none() {
            let pos = at.map(|l| format!(":{}:{}", l.line(), l.column())).unwrap_or_default();
            self.error = Some(ProfileError(format!("{}{pos}: {field}: {reason}", self.source)));
        }
    }

    /// Takes a value (or the default), checking `ok` on it.
    fn take<T: Copy + std::fmt::Display>(
        &mut self,
        field: &str,
        raw: S<T>,
        default: T,
        ok: impl Fn(T) -> Result<(), Rule>,
    ) -> (T, Option<Location>) {
        let (value, at) = match raw {
            Some(s) => (s.value, Some(s.referenced)),
            None => (default, None),
        };
        if let Err(reason) = ok(value) {
            self.fail(field, at, format!("{reason} (got {value})"));
        }
        (value, at)
    }
}

/// The rule a profile value broke; the error adds the field, its place and the value.
#[derive(Debug, thiserror::Error)]
enum Rule {
    #[error("must be in [{0}, {1}]")]
    Within(f64, f64),
    #[error("must be a positive finite number")]
    PositiveFinite,
    #[error("must be at least {0}")]
    AtLeast(String),
    /// A rule particular to one field, stated in words.
    #[error("{0}")]
    Stated(String),
}

impl From<&str> for Rule {
    fn from(rule: &str) -> Self {
        Rule::Stated(rule.to_string())
    }
}

impl From<String> for Rule {
    fn from(rule: String) -> Self {
        Rule::Stated(rule)
    }
}

fn finite_in(lo: f64, hi: f64) -> impl Fn(f64) -> Result<(), Rule> {
    move |v: f64| if v.is_finite() && v >= lo && v <= hi { Ok(()) } else { Err(Rule::Within(lo, hi)) }
}
fn positive_finite(v: f64) -> Result<(), Rule> {
    if v.is_finite() && v > 0.0 { Ok(()) } else { Err(Rule::PositiveFinite) }
}
fn at_least<T: PartialOrd + std::fmt::Display + Copy>(lo: T) -> impl Fn(T) -> Result<(), Rule> {
    move |v: T| if v >= lo { Ok(()) } else { Err(Rule::AtLeast(lo.to_string())) }
}

impl Profile {
    /// Loads and validates a profile file.
    pub fn load(path: &Path) -> Result<Profile, ProfileError> {
        let text =
            std::fs::read_to_string(path).map_err(|e| ProfileError(format!("{}: cannot read: {e}", path.display())))?;
        Self::parse(&text, &path.display().to_string())
    }

    /// Parses and validates profile text; `source` names it in errors.
    pub fn parse(text: &str, source: &str) -> Result<Profile, ProfileError> {
        let raw: RawProfile = if text.trim().is_empty() {
            RawProfile::default()
        } else {
            serde_saphyr::from_str(text).map_err(|e| ProfileError(syntax_error_line(source, text, &e)))?
        };
        let d = Profile::default();
        let mut c = Checker { source, error: None };
        let opt = |c: &mut Checker, field: &str, raw: S<f64>| -> Option<f64> {
            let at = raw.as_ref().map(|s| s.referenced);
            let v = raw.map(|s| s.value)?;
            if let Err(reason) = positive_finite(v) {
                c.fail(field, at, format!("{reason} (got {v})"));
            }
            Some(v)
        };
        let slo = Slo {
            latency_p99_ms: opt(&mut c, "slo.latency_p99_ms", raw.slo.latency_p99_ms),
            throughput_rps: opt(&mut c, "slo.throughput_rps", raw.slo.throughput_rps),
        };
        let unit = || finite_in(0.0, 1.0);
        let (cpu_t, _) =
            c.take("targets.cpu_utilisation", raw.targets.cpu_utilisation, d.targets.cpu_utilisation, |v| {
                if v.is_finite() && v > 0.0 && v <= 1.0 { Ok(()) } else { Err("must be in (0, 1]".into()) }
            });
        let (mem_t, _) =
            c.take("targets.memory_utilisation", raw.targets.memory_utilisation, d.targets.memory_utilisation, |v| {
                if v.is_finite() && v > 0.0 && v <= 1.0 { Ok(()) } else { Err("must be in (0, 1]".into()) }
            });
        let (alpha, _) = c.take("reward.alpha", raw.reward.alpha, d.reward.alpha, unit());
        let (memory_price, _) =
            c.take("reward.memory_price", raw.reward.memory_price, d.reward.memory_price, finite_in(0.0, 10.0));
        let (illegal, _) = c.take(
            "reward.illegal_action_penalty",
            raw.reward.illegal_action_penalty,
            d.reward.illegal_action_penalty,
            finite_in(0.0, 10.0),
        );
        let (osc, _) = c.take(
            "reward.oscillation_penalty",
            raw.reward.oscillation_penalty,
            d.reward.oscillation_penalty,
            finite_in(0.0, 10.0),
        );
        let b = &d.bounds;
        let within = |(lo, hi): (u64, u64), unit: &'static str| {
            move |v: u64| {
                if (lo..=hi).contains(&v) {
                    Ok(())
                } else {
                    Err(Rule::Stated(format!("must be in {lo}–{hi} {unit}")))
                }
            }
        };
        let set = |r: &S<u64>| r.as_ref().map(|s| s.value);
        let rb = &raw.bounds;
        let o = BoundsOverrides {
            min_replicas: set(&rb.min_replicas).map(|v| v.min(u32::MAX as u64) as u32),
            max_replicas: set(&rb.max_replicas).map(|v| v.min(u32::MAX as u64) as u32),
            min_cpu_millicores: set(&rb.min_cpu_millicores),
            max_cpu_millicores: set(&rb.max_cpu_millicores),
            min_memory_mib: set(&rb.min_memory_mib),
            max_memory_mib: set(&rb.max_memory_mib),
            cpu_step_millicores: set(&rb.cpu_step_millicores),
            memory_step_mib: set(&rb.memory_step_mib),
        };
        let replicas = || within(REPLICAS_RANGE, "replicas");
        let cpu = || within(CPU_MILLICORES_RANGE, "millicores (1 m to 1,000 cores)");
        let mem = || within(MEMORY_MIB_RANGE, "MiB (1 MiB to 16 TiB)");
        let (min_r, _) = c.take("bounds.min_replicas", rb.min_replicas.clone(), b.min_replicas as u64, replicas());
        let (max_r, max_r_at) =
            c.take("bounds.max_replicas", rb.max_replicas.clone(), b.max_replicas as u64, replicas());
        let (min_cpu, _) =
            c.take("bounds.min_cpu_millicores", rb.min_cpu_millicores.clone(), b.min_cpu_millicores, cpu());
        let (max_cpu, max_cpu_at) =
            c.take("bounds.max_cpu_millicores", rb.max_cpu_millicores.clone(), b.max_cpu_millicores, cpu());
        let (min_mem, _) = c.take("bounds.min_memory_mib", rb.min_memory_mib.clone(), b.min_memory_mib, mem());
        let (max_mem, max_mem_at) = c.take("bounds.max_memory_mib", rb.max_memory_mib.clone(), b.max_memory_mib, mem());
        c.take("bounds.cpu_step_millicores", rb.cpu_step_millicores.clone(), b.cpu_step_millicores, cpu());
        c.take("bounds.memory_step_mib", rb.memory_step_mib.clone(), b.memory_step_mib, mem());
        // Only a pair the file set both sides of can contradict itself; one side crossing the
        // default (or an app's own) other side moves it (resolve_bounds).
        let both = |a: &S<u64>, b: &S<u64>| a.is_some() && b.is_some();
        if both(&rb.min_replicas, &rb.max_replicas) && max_r < min_r {
            c.fail("bounds.max_replicas", max_r_at, format!("must be ≥ bounds.min_replicas ({max_r} < {min_r})"));
        }
        if both(&rb.min_cpu_millicores, &rb.max_cpu_millicores) && max_cpu < min_cpu {
            c.fail(
                "bounds.max_cpu_millicores",
                max_cpu_at,
                format!("must be ≥ bounds.min_cpu_millicores ({max_cpu} < {min_cpu})"),
            );
        }
        if both(&rb.min_memory_mib, &rb.max_memory_mib) && max_mem < min_mem {
            c.fail(
                "bounds.max_memory_mib",
                max_mem_at,
                format!("must be ≥ bounds.min_memory_mib ({max_mem} < {min_mem})"),
            );
        }
        let population = match raw.population {
            Some(s) => match s.value.parse::<Population>() {
                Ok(p) => p,
                Err(e) => {
                    c.fail("population", Some(s.referenced), e.to_string());
                    Population::default()
                }
            },
            None => d.population,
        };
        let l = &d.lifecycle;
        let (t_online, _) = c.take("lifecycle.t_online", raw.lifecycle.t_online, l.t_online, finite_in(0.0, 10.0));
        let (t_serving, _) = c.take("lifecycle.t_serving", raw.lifecycle.t_serving, l.t_serving, finite_in(0.0, 10.0));
        let (t_var, _) = c.take("lifecycle.t_var", raw.lifecycle.t_var, l.t_var, finite_in(0.0, 1.0));
        let (window, _) = c.take("lifecycle.reward_window", raw.lifecycle.reward_window, l.reward_window, at_least(1));
        // Unset, it is never below the window (a profile with a long window keeps working).
        let (max_retrain, max_retrain_at) = c.take(
            "lifecycle.max_retrain_episodes",
            raw.lifecycle.max_retrain_episodes,
            l.max_retrain_episodes.max(window),
            at_least(1),
        );
        if max_retrain < window {
            c.fail(
                "lifecycle.max_retrain_episodes",
                max_retrain_at,
                format!(
                    "must be ≥ lifecycle.reward_window ({max_retrain} < {window}): a retraining app needs a full reward window to converge"
                ),
            );
        }
        let g = &d.guard;
        let rg = raw.guard;
        let (stale, _) =
            c.take("guard.stale_after_intervals", rg.stale_after_intervals, g.stale_after_intervals, at_least(1));
        let (growth, _) =
            c.take("guard.max_replica_growth", rg.max_replica_growth, g.max_replica_growth, finite_in(1.0, 100.0));
        let (step, _) = c.take("guard.min_replica_step", rg.min_replica_step, g.min_replica_step, at_least(0));
        let (factor, _) =
            c.take("guard.max_resource_factor", rg.max_resource_factor, g.max_resource_factor, finite_in(1.0, 100.0));
        // At most a day of 15-s intervals: the guard scans its window every interval.
        let (stabilisation, _) =
            c.take("guard.stabilisation_intervals", rg.stabilisation_intervals, g.stabilisation_intervals, |v: u32| {
                if v <= 5_760 { Ok(()) } else { Err(Rule::Within(0.0, 5_760.0)) }
            });
        // At most a week: VPA keeps an OOM kill for a day.
        let (oom_hold, _) = c.take("guard.oom_hold_s", rg.oom_hold_s, g.oom_hold_s, finite_in(0.0, 604_800.0));
        let (unplaced_grace, _) =
            c.take("guard.unplaced_grace_s", rg.unplaced_grace_s, g.unplaced_grace_s, finite_in(0.0, 86_400.0));
        // 0 (off), or a multiple no smaller than the fallback's own proposal.
        let (ceiling, _) = c.take("guard.fallback_ceiling", rg.fallback_ceiling, g.fallback_ceiling, |v: f64| {
            if v == 0.0 || (v.is_finite() && (1.0..=100.0).contains(&v)) {
                Ok(())
            } else {
                Err("must be 0 (no ceiling) or in [1, 100]".into())
            }
        });
        let guard = GuardLimits {
            stale_after_intervals: stale,
            max_replica_growth: growth,
            min_replica_step: step,
            max_resource_factor: factor,
            stabilisation_intervals: stabilisation,
            oom_hold_s: oom_hold,
            unplaced_grace_s: unplaced_grace,
            fallback_ceiling: ceiling,
        };
        let simulation = parse_simulation(&mut c, raw.simulation);
        let store = match raw.store {
            Some(s) => {
                let ok = STORE_SCHEMES.iter().any(|p| s.value.starts_with(p) && s.value.len() > p.len());
                if !ok {
                    c.fail(
                        "store",
                        Some(s.referenced),
                        format!(
                            "{:?} is not a store URL (expected sqlite:PATH, postgres://… or influxdb://HOST:PORT/DB)",
                            s.value
                        ),
                    );
                }
                s.value
            }
            None => d.store.clone(),
        };
        if let Some(e) = c.error {
            return Err(e);
        }
        Ok(Profile {
            app: raw.app,
            slo,
            targets: Targets { cpu_utilisation: cpu_t, memory_utilisation: mem_t },
            reward: RewardWeights { alpha, memory_price, illegal_action_penalty: illegal, oscillation_penalty: osc },
            bounds: resolve_bounds(&d.bounds, &o),
            bound_overrides: o,
            population,
            lifecycle: LifecycleThresholds {
                t_online,
                t_serving,
                t_var,
                reward_window: window,
                max_retrain_episodes: max_retrain,
            },
            simulation,
            bootstrapping: raw.bootstrapping.unwrap_or(d.bootstrapping),
            guard,
            high_stakes: raw.high_stakes.unwrap_or(d.high_stakes),
            store,
        })
    }
}

/// Checks the `simulation:` section: durations within a day (the interval at least a second),
/// fractions in [0, 1], node sizes within what a real node has.
fn parse_simulation(c: &mut Checker, raw: RawSimulation) -> Simulation {
    let d = Simulation::default();
    let day = 86_400.0;
    let (interval_s, _) = c.take("simulation.interval_s", raw.interval_s, d.interval_s, finite_in(1.0, day));
    let dur = |c: &mut Checker, field: &str, v: S<f64>, default: f64| c.take(field, v, default, finite_in(0.0, day)).0;
    let scrape_interval_s = dur(c, "simulation.scrape_interval_s", raw.scrape_interval_s, d.scrape_interval_s);
    let metrics_lag_s = dur(c, "simulation.metrics_lag_s", raw.metrics_lag_s, d.metrics_lag_s);
    let startup_delay_s = dur(c, "simulation.startup_delay_s", raw.startup_delay_s, d.startup_delay_s);
    let resize_latency_s = dur(c, "simulation.resize_latency_s", raw.resize_latency_s, d.resize_latency_s);
    let termination_grace_s = dur(c, "simulation.termination_grace_s", raw.termination_grace_s, d.termination_grace_s);
    let (request_timeout_s, _) =
        c.take("simulation.request_timeout_s", raw.request_timeout_s, d.request_timeout_s, |v: f64| {
            if v.is_finite() && v > 0.0 && v <= day {
                Ok(())
            } else {
                Err(Rule::Stated(format!("must be in (0, {day}]")))
            }
        });
    let (startup_cpu_fraction, _) = c.take(
        "simulation.startup_cpu_fraction",
        raw.startup_cpu_fraction,
        d.startup_cpu_fraction,
        finite_in(0.0, 1.0),
    );
    let nodes = raw.nodes.map(|n| {
        if n.value == 0 || n.value > 1_000_000 {
            c.fail("simulation.nodes", Some(n.referenced), format!("must be in [1, 1000000] (got {})", n.value));
        }
        n.value
    });
    let (node_cores, _) = c.take("simulation.node_cores", raw.node_cores, d.node_cores, finite_in(0.001, 1000.0));
    let (node_memory_mib, _) =
        c.take("simulation.node_memory_mib", raw.node_memory_mib, d.node_memory_mib, |v: u64| {
            if (1..=16 * 1024 * 1024).contains(&v) { Ok(()) } else { Err("must be in [1, 16777216] MiB".into()) }
        });
    let (node_headroom, _) =
        c.take("simulation.node_headroom", raw.node_headroom, d.node_headroom, finite_in(1.0, 100.0));
    Simulation {
        interval_s,
        scrape_interval_s,
        metrics_lag_s,
        startup_delay_s,
        startup_cpu_fraction,
        resize_latency_s,
        termination_grace_s,
        request_timeout_s,
        nodes,
        node_cores,
        node_memory_mib,
        node_headroom,
        random_start: raw.random_start.unwrap_or(d.random_start),
    }
}

/// Renders a YAML parser error as `file:line:col: key.path: message` on one line (`source`
/// names the file, `text` is what was parsed): how every YAML input of `aware` reports one.
pub fn syntax_error_line(source: &str, text: &str, error: &serde_saphyr::Error) -> String {
    let options = serde_saphyr::render_options! { snippets: serde_saphyr::SnippetMode::Off };
    let message = error.render_with_options(options);
    let mut message = message.split_whitespace().collect::<Vec<_>>().join(" ");
    // The parser's advice to its programmer, not to the file's author.
    for (hint, instead) in [
        (", set DuplicateKeyPolicy in Options if acceptable", ""),
        (
            "; use from_str_multiple or from_str_multiple_with_options",
            " (a file holds one YAML document: remove the `---` and what follows, or merge them)",
        ),
    ] {
        message = message.replace(hint, instead);
    }
    match error.location() {
        Some(l) if l != Location::UNKNOWN => {
            let (line, column) = (l.line(), l.column());
            let at = format!(" at line {line}, column {column}");
            message = message.replace(&at, "");
            if let Some(expected) = scalar_expectation(&message) {
                let found = scalar_at(text, line as usize, column as usize);
                message = format!("{found:?} is not {expected}");
            }
            match key_path_at(text, line as usize) {
                Some(path) => format!("{source}:{line}:{column}: {path}: {message}"),
                None => format!("{source}:{line}:{column}: {message}"),
            }
        }
        _ => format!("{source}: {message}"),
    }
}

/// What the parser's terse verdict on a scalar (`invalid u64`) expected, in the file author's
/// words; `None` for any other message.
fn scalar_expectation(message: &str) -> Option<&'static str> {
    match message {
        "invalid u64" | "invalid usize" => Some("a whole number from 0 to 18446744073709551615"),
        "invalid u32" => Some("a whole number from 0 to 4294967295"),
        "invalid i64" | "invalid i32" => Some("a whole number"),
        "invalid floating point" | "invalid f64" | "invalid f32" => Some("a number"),
        "invalid boolean" | "invalid bool" => Some("true or false"),
        _ => None,
    }
}

/// The plain scalar at 1-based `line` and `column` of `text`, up to a comment or the line's end.
fn scalar_at(text: &str, line: usize, column: usize) -> String {
    let rest = text.lines().nth(line.saturating_sub(1)).and_then(|l| l.get(column.saturating_sub(1)..)).unwrap_or("");
    let value = rest.split(" #").next().unwrap_or(rest).trim();
    value.trim_end_matches(',').to_string()
}

/// The dotted key path of the block-style mapping entry on 1-based `line` (`bounds.max_replicas`),
/// found by walking up to the less-indented parent keys. `None` when the line holds no key.
fn key_path_at(text: &str, line: usize) -> Option<String> {
    let lines: Vec<&str> = text.lines().collect();
    let key_of = |l: &str| -> Option<(usize, String)> {
        let indent = l.len() - l.trim_start().len();
        let body = l.trim_start().trim_start_matches("- ");
        let (key, _) = body.split_once(':')?;
        let key = key.trim();
        (!key.is_empty() && !key.starts_with('#') && !key.contains(' ')).then(|| (indent, key.to_string()))
    };
    let (mut indent, key) = key_of(lines.get(line.checked_sub(1)?)?)?;
    let mut path = vec![key];
    for l in lines[..line - 1].iter().rev() {
        if let Some((i, k)) = key_of(l)
            && i < indent
        {
            path.push(k);
            indent = i;
        }
    }
    path.reverse();
    Some(path.join("."))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn empty_profile_is_the_default() {
        assert_eq!(Profile::parse("", "p.yaml").unwrap(), Profile::default());
        assert_eq!(Profile::parse("{}", "p.yaml").unwrap(), Profile::default());
    }

    #[test]
    fn full_profile_round_trips_its_values() {
        let text = "app: checkout\nslo:\n  latency_p99_ms: 250\n  throughput_rps: 40\ntargets:\n  cpu_utilisation: 0.6\nreward:\n  alpha: 0.5\nbounds:\n  min_replicas: 2\n  max_replicas: 8\nlifecycle:\n  reward_window: 30\nbootstrapping: false\nhigh_stakes: true\nstore: postgres://aware@db/aware\n";
        let p = Profile::parse(text, "p.yaml").unwrap();
        assert_eq!(p.app.as_deref(), Some("checkout"));
        assert_eq!(p.slo.latency_p99_ms, Some(250.0));
        assert_eq!(p.slo.throughput_rps, Some(40.0));
        assert_eq!(p.targets.cpu_utilisation, 0.6);
        assert_eq!(p.targets.memory_utilisation, 0.8);
        assert_eq!(p.reward.alpha, 0.5);
        assert_eq!((p.bounds.min_replicas, p.bounds.max_replicas), (2, 8));
        assert_eq!(p.lifecycle.reward_window, 30);
        // Unset, the retraining cap is the default's, and never below the window.
        assert_eq!(p.lifecycle.max_retrain_episodes, 40);
        let long = Profile::parse("lifecycle:\n  reward_window: 50\n", "l.yaml").unwrap();
        assert_eq!(long.lifecycle.max_retrain_episodes, 50);
        let set = Profile::parse("lifecycle:\n  max_retrain_episodes: 25\n", "l.yaml").unwrap();
        assert_eq!(set.lifecycle.max_retrain_episodes, 25);
        assert!(p.high_stakes);
        assert!(!Profile::default().high_stakes);
        assert_eq!(p.guard, GuardLimits::default());
        let g = Profile::parse("guard:\n  stale_after_intervals: 5\n  stabilisation_intervals: 0\n", "g.yaml").unwrap();
        assert_eq!((g.guard.stale_after_intervals, g.guard.stabilisation_intervals), (5, 0));
        assert_eq!(g.guard.max_replica_growth, 2.0);
        let e = Profile::parse("guard:\n  stale_after_intervals: 0\n", "g.yaml").unwrap_err().to_string();
        assert!(e.contains("g.yaml:2:") && e.contains("guard.stale_after_intervals"), "{e}");
        let e = Profile::parse("guard:\n  max_resource_factor: 0.5\n", "g.yaml").unwrap_err().to_string();
        assert!(e.contains("guard.max_resource_factor"), "{e}");
        let g = Profile::parse("guard:\n  oom_hold_s: 0\n  unplaced_grace_s: 600\n", "g.yaml").unwrap();
        assert_eq!((g.guard.oom_hold_s, g.guard.unplaced_grace_s), (0.0, 600.0));
        assert_eq!((Profile::default().guard.oom_hold_s, Profile::default().guard.unplaced_grace_s), (86_400.0, 120.0));
        let g = Profile::parse("guard:\n  fallback_ceiling: 0\n", "g.yaml").unwrap();
        assert_eq!((g.guard.fallback_ceiling, Profile::default().guard.fallback_ceiling), (0.0, 2.0));
        for bad in [
            "oom_hold_s: -1",
            "oom_hold_s: .nan",
            "unplaced_grace_s: 100000",
            "fallback_ceiling: 0.5",
            "fallback_ceiling: .inf",
        ] {
            let e = Profile::parse(&format!("guard:\n  {bad}\n"), "g.yaml").unwrap_err().to_string();
            assert!(e.contains("g.yaml:2:") && e.contains(bad.split(':').next().unwrap()), "{e}");
        }
        assert!(!p.bootstrapping);
        assert_eq!(p.store, "postgres://aware@db/aware");
    }

    #[test]
    fn simulation_section_overrides_defaults() {
        let p =
            Profile::parse("simulation:\n  metrics_lag_s: 30\n  nodes: 4\n  random_start: false\n", "p.yaml").unwrap();
        assert_eq!(p.simulation.metrics_lag_s, 30.0);
        assert_eq!(p.simulation.nodes, Some(4));
        assert!(!p.simulation.random_start);
        assert_eq!(p.simulation.startup_delay_s, Simulation::default().startup_delay_s);
    }

    /// Table: (yaml, substrings the one-line error must contain).
    #[test]
    fn bad_profiles_name_file_field_position_and_reason() {
        let cases: &[(&str, &[&str])] = &[
            ("reward:\n  alpha: 1.5\n", &["p.yaml:2:", "reward.alpha", "[0, 1]", "1.5"]),
            ("bounds:\n  min_replicas: 5\n  max_replicas: 3\n", &["p.yaml:3:", "bounds.max_replicas", "5"]),
            ("slo:\n  latency_p99_ms: -4\n", &["p.yaml:2:", "slo.latency_p99_ms", "positive"]),
            ("targets:\n  cpu_utilisation: 0\n", &["targets.cpu_utilisation", "(0, 1]"]),
            ("rewrd:\n  alpha: 0.3\n", &["p.yaml:1:", "rewrd"]),
            ("bounds:\n  max_replicas: many\n", &["p.yaml:2:", "max_replicas"]),
            ("bounds:\n  min_cpu_millicores: 0\n", &["bounds.min_cpu_millicores", "1–1000000"]),
            ("bounds: [1, 2\n", &["p.yaml"]),
            ("lifecycle:\n  t_var: 2\n", &["lifecycle.t_var"]),
            ("lifecycle:\n  max_retrain_episodes: 0\n", &["p.yaml:2:", "lifecycle.max_retrain_episodes", "at least 1"]),
            (
                "lifecycle:\n  reward_window: 10\n  max_retrain_episodes: 5\n",
                &["p.yaml:3:", "lifecycle.max_retrain_episodes", "≥ lifecycle.reward_window (5 < 10)"],
            ),
            ("store: mysql://db\n", &["p.yaml:1:", "store", "not a store URL"]),
            ("store: \"sqlite:\"\n", &["store", "not a store URL"]),
            // Issue 19: a count beyond 2³¹ (or 2³²) is a range error at its position, never a wrap.
            (
                "bounds:\n  max_replicas: 3000000000\n",
                &["p.yaml:2:17", "bounds.max_replicas", "1–100000", "3000000000"],
            ),
            ("bounds:\n  max_replicas: 2147483649\n", &["p.yaml:2:17", "bounds.max_replicas", "1–100000"]),
            ("bounds:\n  max_replicas: 100001\n", &["p.yaml:2:", "bounds.max_replicas", "1–100000"]),
            ("bounds:\n  min_replicas: 0\n", &["p.yaml:2:", "bounds.min_replicas", "1–100000"]),
            ("bounds:\n  max_replicas: -1\n", &["p.yaml:2:", "max_replicas", "\"-1\" is not a whole number from 0"]),
            (
                "bounds:\n  max_replicas: 99999999999999999999999 # too many\n",
                &[
                    "p.yaml:2:",
                    "max_replicas",
                    "\"99999999999999999999999\" is not a whole number from 0 to 18446744073709551615",
                ],
            ),
            ("bounds:\n  min_replicas: many\n", &["bounds.min_replicas", "\"many\" is not a whole number"]),
            ("reward:\n  alpha: high\n", &["p.yaml:2:", "reward.alpha", "\"high\" is not a number"]),
            ("bounds:\n  max_cpu_millicores: 1000001\n", &["p.yaml:2:", "bounds.max_cpu_millicores", "1,000 cores"]),
            ("bounds:\n  max_memory_mib: 16777217\n", &["p.yaml:2:", "bounds.max_memory_mib", "16 TiB"]),
            ("bounds:\n  memory_step_mib: 0\n", &["p.yaml:2:", "bounds.memory_step_mib"]),
            ("population: mainframe\n", &["p.yaml:1:", "population", "microservices"]),
            ("simulation:\n  metrics_lag_s: -1\n", &["p.yaml:2:", "simulation.metrics_lag_s", "-1"]),
            ("simulation:\n  startup_cpu_fraction: 2\n", &["simulation.startup_cpu_fraction", "[0, 1]"]),
            ("simulation:\n  nodes: 0\n", &["p.yaml:2:", "simulation.nodes"]),
            ("simulation:\n  scrape_lag: 3\n", &["p.yaml:2:", "scrape_lag"]),
            // Said to the file's author, not in the parser's terms.
            ("reward:\n  alpha: 0.5\nreward:\n  alpha: 0.6\n", &["p.yaml:3:", "duplicate mapping key: reward"]),
            ("app: x\n---\napp: y\n", &["p.yaml:3:", "one YAML document"]),
        ];
        for (yaml, wants) in cases {
            let err = Profile::parse(yaml, "p.yaml").unwrap_err().to_string();
            assert!(!err.contains('\n'), "error must be one line: {err:?}");
            assert!(!err.contains("Options") && !err.contains("from_str"), "{err}");
            for want in *wants {
                assert!(err.contains(want), "{yaml:?}: error {err:?} lacks {want:?}");
            }
        }
    }

    #[test]
    fn valid_range_edges_are_accepted() {
        let text = "bounds:\n  min_replicas: 1\n  max_replicas: 100000\n  min_cpu_millicores: 1\n  max_cpu_millicores: 1000000\n  min_memory_mib: 1\n  max_memory_mib: 16777216\n";
        let p = Profile::parse(text, "p.yaml").unwrap();
        assert_eq!((p.bounds.min_replicas, p.bounds.max_replicas), (1, 100_000));
        assert_eq!(p.bounds.max_memory_mib, 16 * 1024 * 1024);
        assert_eq!(p.bound_overrides.max_cpu_millicores, Some(1_000_000));
    }

    fn app_bounds() -> Bounds {
        Bounds { min_replicas: 2, max_replicas: 300, max_memory_mib: 16_384, ..Profile::default().bounds }
    }

    #[test]
    fn profile_bounds_override_only_the_keys_the_file_sets() {
        let p = Profile::parse("bounds:\n  max_replicas: 40\n", "p.yaml").unwrap();
        assert_eq!(p.bound_overrides, BoundsOverrides { max_replicas: Some(40), ..Default::default() });
        let b = p.bounds_for(&app_bounds());
        assert_eq!((b.min_replicas, b.max_replicas), (2, 40));
        assert_eq!(b.max_memory_mib, 16_384, "keys the file did not set stay the app's");
        assert_eq!(p.for_app(&app_bounds()).bounds, b);
        // No overrides: the app's own bounds, untouched.
        assert_eq!(Profile::default().bounds_for(&app_bounds()), app_bounds());
        assert!(Profile::default().bound_overrides.is_empty());
    }

    #[test]
    fn an_override_crossing_the_apps_other_side_moves_it() {
        let o = BoundsOverrides { min_replicas: Some(500), ..Default::default() };
        let b = resolve_bounds(&app_bounds(), &o);
        assert_eq!((b.min_replicas, b.max_replicas), (500, 500));
        let o = BoundsOverrides { max_replicas: Some(1), ..Default::default() };
        let b = resolve_bounds(&app_bounds(), &o);
        assert_eq!((b.min_replicas, b.max_replicas), (1, 1));
        let o = BoundsOverrides { min_memory_mib: Some(20_000), ..Default::default() };
        let b = resolve_bounds(&app_bounds(), &o);
        assert_eq!((b.min_memory_mib, b.max_memory_mib), (20_000, 20_000));
        // A lone min_replicas above the fleet default max is no longer an error: it moves it.
        let p = Profile::parse("bounds:\n  min_replicas: 30\n", "p.yaml").unwrap();
        assert_eq!((p.bounds.min_replicas, p.bounds.max_replicas), (30, 30));
    }

    #[test]
    fn population_is_read_from_the_profile() {
        assert_eq!(Profile::default().population, Population::Microservices);
        let p = Profile::parse("population: serverless\n", "p.yaml").unwrap();
        assert_eq!(p.population, Population::Serverless);
        for pop in Population::ALL {
            assert_eq!(pop.name().parse::<Population>(), Ok(pop));
        }
    }

    proptest::proptest! {
        #![proptest_config(proptest::prelude::ProptestConfig::with_cases(512))]

        /// Arbitrary text never panics the parser; an error is one line naming the file.
        #[test]
        fn arbitrary_text_never_panics(text in "\\PC{0,200}") {
            if let Err(e) = Profile::parse(&text, "p.yaml") {
                let e = e.to_string();
                proptest::prop_assert!(e.starts_with("p.yaml"), "{e}");
                proptest::prop_assert!(!e.contains('\n'), "{e}");
            }
        }

        /// Text shaped like a profile (known keys, arbitrary values) never panics either.
        #[test]
        fn profile_shaped_text_never_panics(
            section in proptest::sample::select(vec!["bounds", "slo", "targets", "reward", "lifecycle"]),
            key in proptest::sample::select(vec![
                "max_replicas", "min_replicas", "max_cpu_millicores", "min_memory_mib", "latency_p99_ms",
                "cpu_utilisation", "alpha", "t_var", "reward_window", "memory_step_mib",
            ]),
            value in "[-0-9.eE+a-z\\[\\]{}:\"']{0,30}",
        ) {
            let text = format!("{section}:\n  {key}: {value}\n");
            if let Err(e) = Profile::parse(&text, "p.yaml") {
                proptest::prop_assert!(!e.to_string().contains('\n'));
            }
        }
    }
}
