//! The bootstrapping check: the agent and the fallback each run, from the same start, on the
//! traffic an application has just seen, in the embedded simulator with the application's own
//! model; the lifecycle compares their rewards, SLO-violating intervals and core-seconds
//! reserved (the shadow's scorer measures both alike). Same arrivals for both (same trace,
//! same seed), so the difference is the policies'.

use std::sync::Arc;

use crate::agent::LifecycleAgent;
use aware_core::{ContainerResources, Observation, PodPhase, Profile, StepInfo};
use aware_env::{ActionDecoder, ActionKind};
use aware_env::{AppSlo, ClusterVecEnv, Control, EnvConfig};
use aware_lab::policy::{Policy, PolicyName};
use aware_lab::progress::Silent;
use aware_lab::rollout::{Arena, Driver, EpisodeStart, Recommenders, rollout};
use aware_lab::score::Scorer;
use aware_lab::{LabError, rollout::Observer};
use aware_sim::{AppSpec, CONTAINER, Continuation, DeploymentState, SimCluster, SimConfig, Trace};

use crate::algorithm::{EpisodeOutcome, ShadowComparison};
use crate::guard::{Guard, GuardConfig, Usage};
use crate::manager::{AGENT_ACTIONS, action_origin, ask_features, decode_action};

/// What the shadow run needs of one application.
pub struct ShadowApp<'a> {
    pub spec: &'a AppSpec,
    pub profile: &'a Profile,
    pub sim: &'a SimConfig,
    /// Arrival rates (requests per second) of the recent intervals, oldest first.
    pub rates: &'a [f64],
    /// Every segment's payload multiplied by this in the replay: the request cost measured
    /// while the traffic was seen, where it moved from the model's ([`AppSpec::with_payload_scale`]).
    pub payload_scale: f64,
    /// The app's deployment when the traffic began; the reference allocation when `None`.
    pub start: Option<&'a DeploymentState>,
    /// The cluster's clock when the traffic began (its first interval starts then), so a
    /// fallback carried over from then reads its own history at the times it was taken.
    pub start_s: f64,
    /// The fallback as it was when the traffic began (its histories and windows); `None`: a
    /// fresh one of the kind the comparison names (and for an RL policy, which is not copied;
    /// the lifecycle refuses one as its fallback).
    pub fallback: Option<&'a Policy>,
    /// The agent's guard as it was when the traffic began (its clock and recent proposals);
    /// `None`: a fresh one configured as the comparison says.
    pub guard: Option<&'a Guard>,
    /// The allocation the app was deployed with (replicas and pod template): the fallback's
    /// replay hands back what the fallback does not manage as this, never below, as the
    /// manager does where its stage hands the app to the fallback
    /// ([`crate::manager::guard_fallback`]). `None`: nothing handed back (a residual agent's
    /// runs); the guard's other rules for the fallback apply either way.
    pub deployed: Option<&'a (u32, ContainerResources)>,
    pub seed: u64,
    /// Count SLO-violating intervals by the p99 the replay observes, with the simulator's
    /// measurement noise, as a live window counts its own (a live cluster knows no other);
    /// else by the simulator's noise-free p99, as scoring counts a simulated episode.
    pub observed_slo: bool,
}

impl ShadowApp<'_> {
    /// The fallback the replay starts with: the one the traffic began with where it is known,
    /// else a fresh one of kind `kind`.
    fn fallback(&self, kind: &PolicyName) -> Result<Policy, LabError> {
        match self.fallback.and_then(Policy::snapshot) {
            Some(policy) => Ok(policy),
            None => Policy::build(kind, self.profile, Some(self.spec), None),
        }
    }
}

/// The fallback (as [`ShadowApp::fallback`] says, else a fresh one of kind `fallback`) on the
/// app's recent traffic, handing back what it does not manage as deployed where
/// [`ShadowApp::deployed`] is known, under the guard's rules for the fallback
/// ([`crate::manager::guard_fallback`]) with the guard the traffic began with, else a fresh one
/// as the profile's `guard:` section configures it where the fallback floors the agent.
pub fn fallback(app: &ShadowApp, fallback: &PolicyName) -> Result<EpisodeOutcome, LabError> {
    fallback_with_guard(app, fallback, &GuardConfig::for_agent(&app.profile.guard, true, None))
}

/// [`fallback`] with a fresh guard configured as `guard` (the manager's) where the traffic's is
/// not known.
pub fn fallback_with_guard(
    app: &ShadowApp,
    fallback: &PolicyName,
    guard: &GuardConfig,
) -> Result<EpisodeOutcome, LabError> {
    let policy = app.fallback(fallback)?;
    let mut rules = HandedBack {
        rules: Recommenders::new(vec![policy]),
        deployed: app.deployed,
        bounds: &app.profile.bounds,
        guard: app.guard.cloned().unwrap_or_else(|| Guard::new(guard.clone())),
    };
    run(app, app.rates.len() as u64, &mut rules)
}

/// The fallback serving an app handed to it, as the manager has it act: under the guard's
/// rules for it, with what the fallback does not manage raised back to the deployment where
/// it is known ([`crate::manager::guard_fallback`]).
struct HandedBack<'a> {
    rules: Recommenders,
    deployed: Option<&'a (u32, ContainerResources)>,
    bounds: &'a aware_core::Bounds,
    /// For its rules on the fallback's proposals ([`crate::manager::guard_fallback`]), which the
    /// manager applies too: as the agent's guard was when the traffic began.
    guard: Guard,
}

impl Driver for HandedBack<'_> {
    fn decide(&mut self, arena: &dyn Arena, states: &[Vec<f32>], infos: &[StepInfo]) -> Result<Vec<Control>, LabError> {
        let mut controls = self.rules.decide(arena, states, infos)?;
        let obs = arena.observe(0).transpose()?;
        if let Some(obs) = &obs {
            let _ = self.guard.check(obs, &[]);
        }
        for (control, policy) in controls.iter_mut().zip(&mut self.rules.policies) {
            if let (Control::Recommendation(rec), Some(obs)) = (control, &obs) {
                let scope = policy.recommender().scope();
                let handed_back = self.deployed.map(|d| (scope, d));
                crate::manager::guard_fallback(
                    &self.guard,
                    rec,
                    obs.time_s,
                    self.bounds,
                    handed_back,
                    &mut String::new(),
                );
            }
        }
        Ok(controls)
    }

    fn episode_start(&mut self, start: EpisodeStart) {
        self.rules.episode_start(start);
    }
}

/// The agent (greedy, reading `embedding` beside the state when it is conditioned on one;
/// through a guard configured as `guard`; with `floor`, raised to the
/// fallback's scale-ups, and the fallback acting on observations the guard refuses; `residual`,
/// acting on the fallback's proposal, which it reads beside the state; as the manager does)
/// against the fallback ([`fallback`]); both start with the fallback the traffic began with.
pub fn compare(
    app: &ShadowApp,
    agent: &LifecycleAgent,
    embedding: Option<&[f32]>,
    fallback: &PolicyName,
    floor: bool,
    residual: bool,
    guard: &GuardConfig,
) -> Result<ShadowComparison, LabError> {
    let steps = app.rates.len() as u64;
    let fallback_outcome = fallback_with_guard(app, fallback, guard)?;
    if let Some(why) = crate::manager::state_width_refusal(agent.state_dim(), residual, false) {
        return Err(LabError::input("shadow", why));
    }
    let width = crate::manager::embedding_width_of(agent, residual);
    if width > 0 && embedding.is_none_or(|e| e.len() != width) {
        return Err(LabError::input("shadow", format!("the agent reads a workload embedding of {width} values")));
    }
    let mut greedy = Greedy {
        agent,
        embedding: embedding.filter(|_| width > 0).map(<[f32]>::to_vec),
        decoder: ActionDecoder {
            kind: AGENT_ACTIONS,
            bounds: app.profile.bounds.clone(),
            container: CONTAINER.into(),
            cpu_request_ratio: 1.0,
        },
        // Greedy: no exploring proposals, whatever the guard was carrying; the ceiling as the
        // caller says (none over rules that have failed the app, as the manager's judging
        // replays run; `ManagerConfig::replay_guard_config`), not as
        // the guard carried from the episode's start says.
        guard: {
            let mut g = app.guard.cloned().unwrap_or_else(|| Guard::new(guard.clone()));
            g.set_exploring(false);
            g.set_explores(false);
            g.config.fallback_ceiling = guard.fallback_ceiling;
            g
        },
        rules: match floor || residual {
            true => Some(app.fallback(fallback)?),
            false => None,
        },
        floor,
        residual,
        deployed: app.deployed,
        decided: false,
    };
    let agent_outcome = run(app, steps, &mut greedy)?;
    Ok(ShadowComparison { agent: agent_outcome, fallback: fallback_outcome })
}

fn run(app: &ShadowApp, steps: u64, driver: &mut dyn Driver) -> Result<EpisodeOutcome, LabError> {
    // The recent traffic from its first interval, not a random point of a week, at the clock
    // and from the deployment the app had then. The rates were read from metrics as old as
    // the metrics lag, so `rates[lag]` is the arrival rate of the episode's first interval
    // (`rates[0]` that of the interval before, for a lag of one); the trace (which the
    // simulator reads as a loop from time 0) is turned so that rate falls on the start's
    // interval. The last `lag` intervals, never observed within the episode, replay the
    // first rates.
    let interval_s = app.sim.interval_s;
    let start_s = if app.start_s.is_finite() { (app.start_s / interval_s).round().max(0.0) * interval_s } else { 0.0 };
    let lag = app.sim.steps_of(app.sim.metrics_lag_s).min(app.rates.len() as u64) as i64;
    let rates = turned(app.rates, (start_s / interval_s).floor() as i64 - lag);
    let trace = Trace { name: app.spec.name.clone(), interval_s, rates };
    let start = Continuation {
        time_s: start_s,
        deployments: app.start.map(|d| vec![d.clone()]).unwrap_or_default(),
        scenario: None,
    };
    let sim = SimConfig { random_start: false, scenario: None, start: Some(start), ..app.sim.clone() };
    let measured = match app.payload_scale {
        scale if scale.is_finite() && scale > 0.0 => app.spec.with_payload_scale(scale),
        scale => return Err(LabError::input("shadow", format!("payload scale {scale} is not a positive number"))),
    };
    let cluster = SimCluster::new(vec![measured], vec![Arc::new(trace)], sim, app.seed);
    let slo = AppSlo { latency_p99_ms: Some(cluster.slo_p99_ms(0)), throughput_rps: None };
    let config = EnvConfig {
        profile: app.profile.clone(),
        action: ActionKind::Continuous,
        episode_steps: steps.max(1).min(u32::MAX as u64) as u32,
        container: CONTAINER.into(),
    };
    let mut env = ClusterVecEnv::with_bounds(cluster, &[(0, slo, app.profile.bounds.clone())], config);
    let mut scorer = Scorer::new(&env, std::slice::from_ref(&app.spec.name));
    let mut observed = ObservedViolations(0);
    rollout(&mut env, driver, app.seed, steps, &mut [&mut scorer as &mut dyn Observer, &mut observed], &Silent)?;
    let (per_app, _) = scorer.finish(&[0]);
    let s = &per_app[0];
    Ok(EpisodeOutcome {
        mean_reward: s.mean_reward,
        slo_violations: if app.observed_slo { observed.0 } else { s.slo_violations },
        intervals: s.intervals,
        core_seconds: Some(s.core_seconds),
    })
}

/// SLO-violating intervals by the observed p99 ([`ShadowApp::observed_slo`]).
struct ObservedViolations(u64);

impl Observer for ObservedViolations {
    fn record(&mut self, _arena: &dyn Arena, interval: &aware_lab::rollout::Interval) -> Result<(), LabError> {
        self.0 += interval.out.steps.first().is_some_and(|s| s.info.slo_violated) as u64;
        Ok(())
    }
}

/// `rates` as a loop whose entry `first` (modulo its length) holds `rates[0]`.
fn turned(rates: &[f64], first: i64) -> Vec<f64> {
    let n = rates.len();
    if n == 0 {
        return Vec::new();
    }
    let k = first.rem_euclid(n as i64) as usize;
    let mut out = vec![0.0; n];
    for (j, &r) in rates.iter().enumerate() {
        out[(k + j) % n] = r;
    }
    out
}

/// What one request cost an application over an episode, from its metrics: the CPU its ready
/// pods used over the requests they served, in the intervals where that ratio is the work per
/// request (see [`CostMeter::measure`]). A simulator's notion: the shadow replays on the app's
/// model, which a live backend does not have (no shadow runs there).
#[derive(Debug, Default, Clone)]
pub struct CostMeter {
    cpu_core_s: f64,
    requests: f64,
    intervals: u32,
    /// The ready pods of the last observation (sorted names): usage samples lag the pod list,
    /// so an interval whose ready set changed is not measured.
    ready: Vec<String>,
}

/// CPU utilisation (usage over limit) of the busiest ready pod above which an interval is not
/// measured: near its limit a pod's usage is capped and no longer says what a request costs.
pub const METER_MAX_UTILISATION: f64 = 0.8;
/// Intervals an episode needs measured before its estimate replaces the model's cost.
pub const METER_MIN_INTERVALS: u32 = 10;
/// How far the measured CPU per request may sit from the model's (as a ratio) before the
/// shadow believes the measurement: inside it, metric noise, not a workload change.
pub const METER_DEADBAND: f64 = 1.15;

impl CostMeter {
    /// Adds one interval's metrics (an observation the guard passed). Measured only where CPU
    /// used over requests served is the work per request: requests arrived and were served
    /// as they came (throughput within 5 % of arrivals, nothing dropped), every ready pod has
    /// a usage sample below [`METER_MAX_UTILISATION`] of a positive limit and has been ready
    /// for two intervals, no pod is terminating, and the ready set is the one the interval
    /// before saw.
    pub fn measure(&mut self, obs: &Observation) {
        let mut ready: Vec<&str> =
            obs.pods.iter().filter(|p| p.phase == PodPhase::Ready).map(|p| p.name.as_str()).collect();
        ready.sort_unstable();
        let same_set = ready.len() == self.ready.len() && ready.iter().zip(&self.ready).all(|(a, b)| *a == b);
        if !same_set {
            self.ready = ready.iter().map(|n| n.to_string()).collect();
            return;
        }
        let dt = obs.interval_s;
        let usable = dt.is_finite()
            && dt > 0.0
            && obs.arrival_rate.is_finite()
            && obs.arrival_rate > 0.0
            && obs.dropped_requests == 0
            && (obs.throughput - obs.arrival_rate).abs() <= 0.05 * obs.arrival_rate
            && !obs.pods.iter().any(|p| p.deleting);
        if !usable {
            return;
        }
        let mut cpu = 0.0;
        for p in obs.pods.iter().filter(|p| p.phase == PodPhase::Ready) {
            let limit = p.resources.limits.cpu_cores();
            let settled = p.ready_since_s.is_some_and(|t| t <= obs.time_s - 2.0 * dt);
            match p.cpu_usage_cores {
                Some(u)
                    if settled && u.is_finite() && u >= 0.0 && limit > 0.0 && u <= METER_MAX_UTILISATION * limit =>
                {
                    cpu += u;
                }
                _ => return,
            }
        }
        if cpu <= 0.0 {
            return;
        }
        self.cpu_core_s += cpu * dt;
        self.requests += obs.throughput * dt;
        self.intervals += 1;
    }

    /// Intervals measured so far.
    pub fn intervals(&self) -> u32 {
        self.intervals
    }

    /// The payload multiplier under which `app`'s model costs what was measured: 1 when the
    /// measurement is within [`METER_DEADBAND`] of the model; `None` when too little was
    /// measured or the model cannot say ([`AppSpec::payload_scale_for`]).
    pub fn payload_scale(&self, app: &AppSpec) -> Option<f64> {
        if self.intervals < METER_MIN_INTERVALS || self.requests <= 0.0 {
            return None;
        }
        let measured = self.cpu_core_s / self.requests;
        let ratio = measured / app.cost().cpu_s;
        if (1.0 / METER_DEADBAND..=METER_DEADBAND).contains(&ratio) {
            return Some(1.0);
        }
        app.payload_scale_for(measured)
    }
}

/// The agent acting greedily for one application, its proposals through the guard's caps.
struct Greedy<'a> {
    agent: &'a LifecycleAgent,
    /// Appended to the state for an agent conditioned on a workload embedding.
    embedding: Option<Vec<f32>>,
    decoder: ActionDecoder,
    guard: Guard,
    /// The fallback, asked every interval when it floors the agent's proposals or a residual
    /// agent acts on its proposal.
    rules: Option<Policy>,
    /// The fallback's scale-ups floor the agent's proposals ([`Guard::floor`]), and cuts the
    /// measured usage does not fit are undone ([`Guard::fit_usage`]).
    floor: bool,
    /// The agent's action changes the fallback's proposal, not the current allocation.
    residual: bool,
    /// The allocation the app was deployed with, which the guard's ceiling measures what the
    /// fallback does not set against ([`crate::guard::ceiling_reference`]).
    deployed: Option<&'a (u32, ContainerResources)>,
    /// Whether it has decided since the replay's reset, whose outcome is not an interval served
    /// ([`Guard::note_slo`] is not told it).
    decided: bool,
}

impl Driver for Greedy<'_> {
    fn decide(&mut self, arena: &dyn Arena, states: &[Vec<f32>], infos: &[StepInfo]) -> Result<Vec<Control>, LabError> {
        let obs = arena.observe(0).ok_or_else(|| LabError::input("shadow", "the arena reports no observations"))??;
        let checked = self.guard.check(&obs, &states[0]);
        let served = infos.first().filter(|_| self.decided).map(|info| info.slo_violated);
        self.guard.note_slo(&obs, served);
        self.decided = true;
        if checked.is_err() {
            // The manager lets the fallback act here (it sees every observation).
            return Ok(vec![match self.rules.as_mut().and_then(|f| f.recommender().recommend(&obs).ok()) {
                Some(mut rec) => {
                    // One refused observation: the fallback acts for it, not handed back.
                    crate::manager::guard_fallback(
                        &self.guard,
                        &mut rec,
                        obs.time_s,
                        &self.decoder.bounds,
                        None,
                        &mut String::new(),
                    );
                    self.guard.witness(&rec, &obs.template);
                    Control::Recommendation(rec)
                }
                None => Control::Hold,
            }]);
        }
        let ask = self.rules.as_mut().and_then(|f| f.recommender().recommend(&obs).ok());
        // A residual agent reads the fallback's proposal beside the state, as in the manager.
        let asked = if self.residual { ask_features(&self.decoder.bounds, ask.as_ref(), &obs) } else { Vec::new() };
        let state: Vec<f32> = states[0].iter().chain(&asked).chain(self.embedding.iter().flatten()).copied().collect();
        let (from, from_replicas) = action_origin(ask.as_ref(), self.residual, &obs);
        let proposal = decode_action(&self.decoder, self.agent.greedy(&state)?, from_replicas, from)?;
        let floor = if self.floor { ask.as_ref() } else { None };
        let usage = if self.floor { Usage::of(&obs) } else { None };
        // The ceiling over the fallback's proposal, measured as the manager measures it.
        let ceiling = match (floor, self.rules.as_mut()) {
            (Some(ask), Some(rules)) => Some(crate::guard::ceiling_reference(
                ask,
                rules.recommender().scope(),
                self.deployed,
                &self.decoder.bounds,
            )),
            _ => None,
        };
        let (rec, _) = self.guard.limit_under(
            &proposal,
            floor,
            ceiling.as_ref(),
            usage.as_ref(),
            obs.desired_replicas,
            &obs.template,
            &self.decoder.bounds,
        );
        Ok(vec![Control::Recommendation(rec)])
    }
}
