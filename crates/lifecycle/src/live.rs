//! The lifecycle on a live backend: Kubernetes read through Prometheus, or the controller's own
//! observations. The same stages, guard, fallback, state encoder and reward as on the simulator
//! ([`crate::manager`]); what differs is what a live cluster cannot do.
//!
//! - **No episodes to reset.** The lifecycle's windows are runs of `episode_steps` *measured*
//!   intervals per application; Algorithm 1 reads their mean rewards as it reads episodes'.
//! - **Observations can be missing.** A backend that cannot answer (Prometheus stopped, metrics
//!   older than the backend's staleness limit) gives no observation: the fallback acts for that
//!   interval — with nothing to read, it keeps the allocation, as upstream's HPA does when its
//!   metrics fail — and the decision log says why. The agent resumes with the first observation
//!   the guard trusts again. An interval without an observation is not measured: it neither
//!   pays a reward nor ends a transition (the agent never learns across a gap).
//! - **No simulator model of the app: one is fitted.** OFFLINE → ONLINE needs the
//!   bootstrapping check, the agent run against the fallback on the app's recent traffic
//!   ([`crate::shadow`]). On the simulator that replay runs on the app's own model; live, it runs
//!   on a model fitted from the app's metrics ([`crate::fit`]: CPU work and I/O wait per request,
//!   memory per pod against requests in flight), replaying each recent window's measured
//!   arrivals from the deployment, fallback and guard the window began with. The fallback drove
//!   the newest window, so its replay must come out as the window did
//!   ([`crate::manager::replay_misses`]): where it does not, the model is not trusted with the
//!   agent, the app is not checked on it, and the decision log's stage reason says so. Until the
//!   app has been measured enough for a model, OFFLINE holds. The replay assumes the cluster has
//!   room for whatever the profile's bounds allow (a live cluster's free capacity is not known);
//!   a window with a gap in its observations is not replayed. ONLINE → SERVING (rewards
//!   converged) and SERVING → ONLINE (rewards degraded) need only rewards.
//! - **Exploring is the operator's call.** A DDPG agent retraining explores (Gaussian noise on
//!   its actions, under the guard and the fallback's floor); on a real cluster that costs real
//!   violations, so it does so only with [`ManagerConfig::live_exploration`] (`aware controller
//!   --explore-while-retraining`). Without it the fallback serves a retraining app while the
//!   agent learns offline from it, as under high stakes.

use crate::agent::{Learner, LifecycleAgent, act_served, acting_policy};
use aware_agents::Experience;
use aware_agents::FrozenPolicy;
use aware_core::{Cluster, Observation, Profile, Recommendation};
use aware_env::{ActionDecoder, RewardFunction, STATE_DIM, StateEncoder};
use aware_lab::policy::Policy;
use aware_sim::CONTAINER;
use serde::Serialize;

use crate::LifecycleError;
use crate::algorithm::{AppLifecycle, EpisodeOutcome, LifecycleState, ShadowComparison, Transition};
use crate::decision::{self, Decision, Seen, Set};
use crate::fit::MeasuredApp;
use crate::guard::{Guard, OomFloor};
use crate::manager::{
    AGENT_ACTIONS, Counts, Learning, ManagerConfig, Probe, action_origin, ask_features, observed_start,
};
use crate::shadow::{self, ShadowApp};
use crate::stage::{Stage, StageChange};
use aware_baselines::AggregateCheckpoint;
use aware_sim::{DeploymentState, SimConfig};
use std::collections::VecDeque;

/// The last interval's decision for one app, waiting for the next observation to say what it
/// earned.
#[derive(Debug, Clone)]
struct Pending {
    state: Vec<f32>,
    /// In the agent's coordinates (what the fallback did, mapped, when the fallback acted; 0
    /// then for a residual agent).
    action: Vec<f32>,
    oscillation: bool,
    /// The action a PPO agent sampled (learned from online, whatever was applied).
    sampled: Option<Vec<f32>>,
    /// The stage the decision was taken in (it says how the outcome may be learned from).
    stage: Stage,
    /// Taken while retraining ([`AppLifecycle::retraining`]): learned from as
    /// [`ManagerConfig::learning`] says (a DDPG agent online, PPO offline).
    retraining: bool,
    /// The backend's clock at the decision: an outcome read much later is not its outcome.
    time_s: f64,
    interval_s: f64,
}

/// One window's traffic as the bootstrapping check replays it live: the arrivals measured at
/// each of its decisions, from the deployment, the fallback and the guard it began with.
struct LiveReplay {
    rates: Vec<f64>,
    start: DeploymentState,
    /// The backend's clock when the window's first interval began.
    start_s: f64,
    interval_s: f64,
    /// The backend's clock at the window's last observation.
    last_s: f64,
    fallback: Option<Policy>,
    guard: Guard,
    /// An observation of the window was missing or unreadable, or came late or from a clock
    /// that went back: it is not replayed.
    gap: bool,
    /// Why the fallback's replay of this window, which it drove, did not come out as the window
    /// did: no check pools it while it is among the recent windows.
    unfaithful: Option<String>,
}

impl LiveReplay {
    /// This window's traffic replayed on `spec` under `profile`, in `sim`, the fallback's
    /// replay handing back what it does not manage as `deployed`.
    fn shadow_app<'a>(
        &'a self,
        spec: &'a aware_sim::AppSpec,
        profile: &'a Profile,
        sim: &'a SimConfig,
        deployed: Option<&'a (u32, aware_core::ContainerResources)>,
        seed: u64,
    ) -> ShadowApp<'a> {
        ShadowApp {
            spec,
            profile,
            sim,
            rates: &self.rates,
            payload_scale: 1.0,
            start: Some(&self.start),
            start_s: self.start_s,
            fallback: self.fallback.as_ref(),
            guard: Some(&self.guard),
            deployed,
            seed,
            // A live window's violations are counted by the p99 its metrics observed.
            observed_slo: true,
        }
    }
}

/// How the check says a recent window's replay was not believed.
const RECENT_UNTRUSTED: &str = "a recent window's replay is not trusted: ";

/// An outcome read more than this many intervals after its decision closes no transition
/// (a backend that answered late, a pass backed off, an MPA recreated).
const MAX_TRANSITION_INTERVALS: f64 = 1.5;

/// Whether `elapsed` seconds are one interval of `interval_s` on: forward, and at most
/// [`MAX_TRANSITION_INTERVALS`] of them.
fn one_interval_on(elapsed: f64, interval_s: f64) -> bool {
    elapsed > 0.0 && elapsed <= MAX_TRANSITION_INTERVALS * interval_s.max(f64::EPSILON)
}

/// One application under the live lifecycle.
pub struct LiveApp {
    name: String,
    /// The app's profile (its bounds, SLO, targets, reward weights, thresholds).
    profile: Profile,
    lifecycle: AppLifecycle,
    guard: Guard,
    fallback: Policy,
    decoder: ActionDecoder,
    encoder: StateEncoder,
    reward: RewardFunction,
    previous_arrival: Option<f64>,
    previous_direction: [i8; 3],
    /// `previous_direction` before this interval's decision (restored if it is not applied).
    direction_before: [i8; 3],
    pending: Option<Pending>,
    /// The window so far: measured intervals, their reward and SLO-violating intervals.
    window_reward: f64,
    window_intervals: u64,
    window_violations: u64,
    /// `counts.agent_actions` when the window began.
    window_start_agent_actions: u64,
    counts: Counts,
    /// Intervals the backend gave no observation (a subset of `counts.fallback_actions`).
    unavailable: u64,
    /// The policy the app acts with while the agent acts for it without learning, frozen when
    /// the app first acted so ([`ManagerConfig::acts_with_learner`]): the checkpoint's agent, or
    /// the agent as retraining left it, not what it becomes by learning from the apps the
    /// fallback serves.
    certified: Option<FrozenPolicy>,
    /// Its last probe while retraining ([`crate::manager::Probe`]).
    probe: Probe,
    /// The allocation first observed (replicas, CPU and memory limits), its pod resources those
    /// the workload declares where they are known ([`LiveManager::set_declared`]): what the
    /// fallback does not manage is handed back to it as this ([`crate::manager::guard_fallback`]).
    deployed: Option<(u32, aware_core::ContainerResources)>,
    /// The pod resources the workload's own template declares (`spec.template` of a
    /// Deployment, which a controller that resizes pods in place never changes), where the
    /// backend told them.
    declared: Option<aware_core::ContainerResources>,
    /// What the app's metrics measured, for the model the bootstrapping check replays on.
    measured: MeasuredApp,
    /// The window under way's traffic, from its first observation.
    replay: Option<LiveReplay>,
    /// The last [`ManagerConfig::shadow_episodes`] windows' traffic, oldest first.
    recent: VecDeque<LiveReplay>,
    /// Windows ended (seeds each replay).
    windows: u64,
    /// The window's transitions so far, kept with [`ManagerConfig::log`] for the store
    /// ([`LiveManager::take_records`]).
    window_log: Vec<Experience>,
}

impl LiveApp {
    /// `profile`: the app's (its bounds, SLO, targets and reward weights).
    fn new(name: &str, profile: &Profile, config: &ManagerConfig) -> Result<Self, LifecycleError> {
        let bootstrapping = config.bootstrapping.unwrap_or(profile.bootstrapping);
        // Until the app's windows replay on a model fitted from its metrics, an agent handed
        // the app because the rules failed there could not be handed back should it do worse,
        // so the fallback keeps it ([`LiveManager::end_window`] lifts this per window).
        let lifecycle = AppLifecycle::new(profile.lifecycle.clone(), bootstrapping).holding_where_rules_fail();
        Ok(Self {
            name: name.to_string(),
            profile: profile.clone(),
            lifecycle: if config.may_retrain { lifecycle } else { lifecycle.without_retraining() },
            guard: Guard::new(config.guard_config(profile)),
            fallback: Policy::build(&config.fallback, profile, None, profile.slo.latency_p99_ms)?,
            decoder: ActionDecoder {
                kind: AGENT_ACTIONS,
                bounds: profile.bounds.clone(),
                container: CONTAINER.into(),
                cpu_request_ratio: 1.0,
            },
            encoder: StateEncoder {
                bounds: profile.bounds.clone(),
                latency_slo_ms: profile.slo.latency_p99_ms,
                throughput_slo_rps: profile.slo.throughput_rps,
            },
            reward: RewardFunction { weights: profile.reward.clone() },
            previous_arrival: None,
            previous_direction: [0; 3],
            direction_before: [0; 3],
            pending: None,
            window_reward: 0.0,
            window_intervals: 0,
            window_violations: 0,
            window_start_agent_actions: 0,
            counts: Counts::default(),
            unavailable: 0,
            certified: None,
            probe: Probe::default(),
            deployed: None,
            declared: None,
            measured: MeasuredApp::default(),
            replay: None,
            recent: VecDeque::new(),
            windows: 0,
            window_log: Vec::new(),
        })
    }

    /// Notes `obs` for the bootstrapping check: its metrics for the app's model, its arrivals
    /// for the window's replay (which it opens, from the fallback and guard before they see it:
    /// the fallback as `before` where it was shown `obs` already, else as it is now). `None`:
    /// the backend gave nothing this interval.
    fn record(&mut self, obs: Option<&Observation>, before: Option<Option<Policy>>) {
        let Some(obs) = obs else {
            if let Some(r) = &mut self.replay {
                r.gap = true;
            }
            return;
        };
        self.measured.push(obs);
        let replay = self.replay.get_or_insert_with(|| LiveReplay {
            rates: Vec::new(),
            start: observed_start(obs),
            start_s: obs.time_s - obs.interval_s,
            interval_s: obs.interval_s,
            last_s: obs.time_s - obs.interval_s,
            fallback: before.unwrap_or_else(|| self.fallback.snapshot()),
            guard: self.guard.clone(),
            gap: false,
            unfaithful: None,
        });
        // One interval on from the last observation, as a decision's outcome must be
        // (`MAX_TRANSITION_INTERVALS`): a pass read late, or a clock that went back, leaves
        // arrivals the replay would put at the wrong time.
        let on_time = one_interval_on(obs.time_s - replay.last_s, replay.interval_s);
        replay.last_s = obs.time_s;
        if on_time && obs.arrival_rate.is_finite() && obs.arrival_rate >= 0.0 && obs.interval_s == replay.interval_s {
            replay.rates.push(obs.arrival_rate);
        } else {
            replay.gap = true;
        }
    }
}

/// `observed` with each resource the workload `declared` (a limit above 0) as declared: a
/// template that leaves a resource to a LimitRange declares nothing for it, and the pods'
/// own value stands.
fn with_declared(
    observed: &aware_core::ContainerResources,
    declared: &aware_core::ContainerResources,
) -> aware_core::ContainerResources {
    let mut out = observed.clone();
    if declared.limits.cpu_millicores > 0 {
        out.requests.cpu_millicores = declared.requests.cpu_millicores;
        out.limits.cpu_millicores = declared.limits.cpu_millicores;
    }
    if declared.limits.memory_bytes > 0 {
        out.requests.memory_bytes = declared.requests.memory_bytes;
        out.limits.memory_bytes = declared.limits.memory_bytes;
    }
    out
}

/// Requests in the ratio to limits the app's template has (a Burstable pod stays Burstable):
/// the agent decides limits, and a recommendation's target is read as requests (the MPA
/// status, the updater, the webhook).
fn keep_request_ratio(rec: &mut Recommendation, template: &aware_core::ContainerResources) {
    let scaled = |limit: u64, t_request: u64, t_limit: u64| {
        if t_limit == 0 || t_request >= t_limit {
            limit
        } else {
            ((limit as f64 * t_request as f64 / t_limit as f64).round() as u64).clamp(1, limit.max(1))
        }
    };
    for c in &mut rec.containers {
        c.requests.cpu_millicores =
            scaled(c.limits.cpu_millicores, template.requests.cpu_millicores, template.limits.cpu_millicores);
        c.requests.memory_bytes =
            scaled(c.limits.memory_bytes, template.requests.memory_bytes, template.limits.memory_bytes);
    }
}

/// What the live decider keeps of one application's lifecycle across a restart of the
/// controller (`aware controller --state FILE`; [`LiveManager::saved`]): its stage and recent
/// rewards (beside the guard's memory floor after an OOM kill, [`SavedApp`]). The policy it is
/// served with when the agent learned it live ([`LiveManager::served_policy`]) and the agent
/// itself ([`LiveManager::save_learner`]) are the caller's to keep beside it. Not kept, as
/// upstream's controllers keep none of theirs either: the guard's stabilisation window and
/// HPA's (minutes) and the window of measured intervals in progress.
#[derive(Debug, Clone, PartialEq, Serialize, serde::Deserialize)]
pub struct SavedLifecycle {
    pub lifecycle: LifecycleState,
    /// Acting with a policy frozen from what the live agent learned (retraining handed the
    /// app back to it), not the checkpoint's: taken up again only with that policy.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub served_by_live_agent: bool,
}

/// What [`LiveManager::saved`] gives of one app: its lifecycle (bound to the agent), the
/// guard's memory floor after an OOM kill and the fallback's VPA history by container as at its
/// last observation (the memory peaks of intervals still open then left out, as upstream's
/// checkpoint writer leaves them), which are facts about the workload, whatever agent decides.
#[derive(Debug, Clone, PartialEq)]
pub struct SavedApp {
    pub lifecycle: SavedLifecycle,
    pub oom_floor: Option<OomFloor>,
    pub fallback_vpa: Vec<(String, AggregateCheckpoint)>,
}

/// Per-application figures of a live run.
#[derive(Debug, Clone, Serialize)]
pub struct LiveAppReport {
    pub app: String,
    pub stage: Stage,
    /// ONLINE to retrain ([`crate::algorithm::AppLifecycle::retraining`]).
    pub retraining: bool,
    pub counts: Counts,
    /// Intervals the backend gave no observation (the fallback kept the allocation).
    pub unavailable: u64,
}

/// What one interval decided for one app.
#[derive(Debug, Clone, PartialEq)]
pub struct LiveDecision {
    /// What to apply; `None` keeps the allocation.
    pub recommendation: Option<Recommendation>,
    /// Whether the agent proposed it (otherwise the fallback, or nobody).
    pub agent_acted: bool,
    /// The decision as the log keeps it.
    pub decision: Decision,
}

/// What a live manager hands the store ([`LiveManager::take_records`]): its steps are the
/// manager's intervals, which a recorder numbers per app.
#[derive(Debug, Clone, Default)]
pub struct LiveRecords {
    pub decisions: Vec<Decision>,
    pub windows: Vec<LiveWindow>,
    pub changes: Vec<StageChange>,
}

impl LiveRecords {
    pub fn is_empty(&self) -> bool {
        self.decisions.is_empty() && self.windows.is_empty() && self.changes.is_empty()
    }
}

/// One app's window as the store keeps it: an episode of the app's transitions.
#[derive(Debug, Clone, PartialEq)]
pub struct LiveWindow {
    pub app: String,
    /// The stage the window ran in (before the stage change its end may have made).
    pub stage: Stage,
    /// Whether the agent acted in it (else the fallback did throughout).
    pub agent_acted: bool,
    /// Its transitions in the agent's coordinates with the state encoder's states (without a
    /// residual agent's [`crate::manager::ASK_FEATURES`]), each with the reward the app earned
    /// (not the violation price the agent learns with): as the simulator's manager logs them.
    pub transitions: Vec<Experience>,
}

/// What the guard and the stage made of one app's observation.
struct Taken {
    obs: Option<Observation>,
    /// As the agent reads it (with the fallback's proposal for a residual agent).
    state: Option<Vec<f32>>,
    /// The fallback's proposal, asked for a residual agent with the observation (it is in the
    /// state; `None` inside: the fallback proposed nothing).
    ask: Option<Option<Recommendation>>,
    /// The fallback's proposal as the guard's ceiling measures the agent's against it
    /// ([`ManagerConfig::ceiling`]), for an app the agent acts for.
    ceiling: Option<Recommendation>,
    stage: Stage,
    /// Why the agent may not act on it, if it wanted to.
    refused: Option<String>,
    wants_agent: bool,
}

/// The lifecycle manager on a live backend: Algorithm 1 and the guard per application, one
/// agent for all.
pub struct LiveManager {
    pub agent: LifecycleAgent,
    config: ManagerConfig,
    apps: Vec<LiveApp>,
    step: u64,
    changes: Vec<StageChange>,
    decisions: Vec<Decision>,
    /// Windows ended since the last [`LiveManager::take_records`] (kept only with
    /// [`ManagerConfig::log`]).
    windows: Vec<LiveWindow>,
    /// Stage changes [`LiveManager::take_records`] has handed out.
    changes_taken: usize,
    /// The agent as it was handed over (a checkpoint's), frozen: what every app a checkpoint
    /// places in a stage the agent acts in without learning is served with, whenever it is
    /// placed, however the agent has learned since.
    handed: FrozenPolicy,
}

/// `agent` would act exploring for an app in `stage` (`retraining`), which a live cluster
/// allows only with [`ManagerConfig::live_exploration`]: the fallback serves it instead and the
/// agent learns offline from it. A free function so that it can be asked while an app is
/// borrowed.
fn held_from_exploring(config: &ManagerConfig, agent: &LifecycleAgent, stage: Stage, retraining: bool) -> bool {
    !config.live_exploration && agent.explores(config, stage, retraining)
}

impl LiveManager {
    /// Manages `apps` (names as the backend knows them) under `profile`; every app starts in
    /// its first stage (with bootstrapping, OFFLINE: the fallback acts).
    pub fn new(
        apps: &[String],
        profile: &Profile,
        agent: impl Into<LifecycleAgent>,
        config: ManagerConfig,
    ) -> Result<Self, LifecycleError> {
        let mut agent = agent.into();
        // No workload embedding here: exactly the base width.
        if let Some(why) = crate::manager::state_width_refusal(agent.state_dim(), config.residual, true) {
            return Err(LifecycleError::input("agent", why));
        }
        if config.headroom != 0.0 {
            return Err(LifecycleError::input(
                "headroom",
                "the live decider adds no CPU headroom to the agent's proposals (only the experiments' converged reference, on the simulator, has one)",
            ));
        }
        if let Some(why) = config.fallback_refusal() {
            return Err(LifecycleError::input("--fallback", why));
        }
        // The caller's `high_stakes`, else the profile's.
        let config = ManagerConfig { high_stakes: Some(config.high_stakes.unwrap_or(profile.high_stakes)), ..config };
        agent.serving_settings(&config);
        let handed = agent.frozen();
        let mut m = Self {
            agent,
            config,
            apps: Vec::new(),
            step: 0,
            changes: Vec::new(),
            decisions: Vec::new(),
            windows: Vec::new(),
            changes_taken: 0,
            handed,
        };
        for name in apps {
            m.add_app(name, profile)?;
        }
        Ok(m)
    }

    /// Starts managing one more application (a new MPA, say) under `profile`; its index.
    pub fn add_app(&mut self, name: &str, profile: &Profile) -> Result<usize, LifecycleError> {
        let bootstrapping = self.config.bootstrapping.unwrap_or(profile.bootstrapping);
        if let Some(why) = self.agent.refuses(&self.config, bootstrapping) {
            return Err(LifecycleError::input("agent", why));
        }
        let mut app = LiveApp::new(name, profile, &self.config)?;
        let start = app.lifecycle.start();
        self.apps.push(app);
        let i = self.apps.len() - 1;
        if let Some(t) = start {
            self.log(i, t);
        }
        Ok(i)
    }

    /// The names of the apps it manages, in their order.
    pub fn app_names(&self) -> impl Iterator<Item = &str> {
        self.apps.iter().map(|a| a.name.as_str())
    }

    /// The index of the app named `name`.
    pub fn app_index(&self, name: &str) -> Option<usize> {
        self.apps.iter().position(|a| a.name == name)
    }

    /// The pod resources app `i`'s workload declares (its template as the operator deployed
    /// it): what the fallback does not manage is handed back as these, not as the pods first
    /// observed, which after a restart can be an agent's cut (a controller that resizes pods in
    /// place and scales through `/scale` leaves the template as deployed). The replicas stay
    /// those first observed. An unknown `i` is ignored.
    pub fn set_declared(&mut self, i: usize, template: aware_core::ContainerResources) {
        if let Some(a) = self.apps.get_mut(i) {
            if let Some(d) = &mut a.deployed {
                d.1 = with_declared(&d.1, &template);
            }
            a.declared = Some(template);
        }
    }

    /// Manages app `i` under an edited `profile`: its fallback, guard, bounds, SLO and reward
    /// start afresh from it; its lifecycle, counts and window carry on.
    pub fn set_profile(&mut self, i: usize, profile: &Profile) -> Result<(), LifecycleError> {
        let Some(a) = self.apps.get_mut(i) else {
            return Err(LifecycleError::input("app", format!("no managed application with index {i}")));
        };
        let fresh = LiveApp::new(&a.name, profile, &self.config)?;
        a.profile = fresh.profile;
        a.guard = fresh.guard;
        a.fallback = fresh.fallback;
        a.decoder = fresh.decoder;
        a.encoder = fresh.encoder;
        a.reward = fresh.reward;
        // The last decision was scored under the old profile: no transition spans the edit.
        a.pending = None;
        self.agent.cut(i);
        Ok(())
    }

    /// Stops managing app `i` (its MPA was deleted); later apps' indices shift down by one.
    pub fn remove_app(&mut self, i: usize) {
        if i < self.apps.len() {
            // A PPO agent's rollouts are kept by app index, which shift: the apps from `i` on
            // start theirs afresh.
            for j in i..self.apps.len() {
                self.agent.stop_online(j);
            }
            self.apps.remove(i);
        }
    }

    /// The profile app `i` is managed under.
    pub fn app_profile(&self, i: usize) -> Option<&Profile> {
        self.apps.get(i).map(|a| &a.profile)
    }

    /// App `i`'s lifecycle as a checkpoint keeps it.
    pub fn lifecycle(&self, i: usize) -> Option<LifecycleState> {
        self.apps.get(i).map(|a| a.lifecycle.snapshot())
    }

    /// Takes up checkpointed lifecycles for the apps they name; each stage that changes is a
    /// stage change with `reason`. Apps it does not name keep theirs.
    pub fn restore_lifecycles(&mut self, states: &[(String, LifecycleState)], reason: &str) {
        let apps = self.apps.iter_mut().map(|a| (a.name.as_str(), &mut a.lifecycle));
        for (i, t) in crate::algorithm::restore_named(apps, states, reason) {
            self.log(i, t);
        }
        for a in &mut self.apps {
            if states.iter().any(|(name, _)| *name == a.name) {
                a.certified = Some(self.handed.clone());
            }
        }
        self.certify();
    }

    /// What a restarted controller keeps of app `i` ([`SavedApp`]); `None` for an unknown `i`.
    pub fn saved(&self, i: usize) -> Option<SavedApp> {
        let a = self.apps.get(i)?;
        Some(SavedApp {
            lifecycle: SavedLifecycle {
                lifecycle: a.lifecycle.snapshot(),
                served_by_live_agent: self.served_policy(i).is_some(),
            },
            oom_floor: a.guard.oom_floor(),
            fallback_vpa: a.fallback.vpa().map(|v| v.save_checkpoints()).unwrap_or_default(),
        })
    }

    /// Takes up for app `i` what a previous run of the controller saved ([`LiveManager::saved`]):
    /// the fallback's VPA history (`vpa`: none for a decider that kept none), the guard's
    /// memory floor after an OOM kill, and its lifecycle (`saved`; a stage that changes is a
    /// stage change with `reason`). A lifecycle whose policy the live agent had learned
    /// (`served_by_live_agent`) goes on with that policy where the caller kept it
    /// (`served_with`, [`LiveManager::served_policy`] as saved): stage, rewards and policy as
    /// they were. Without it, the checkpoint's agent, never checked for the app, would serve:
    /// SERVING resumes retraining, as when its rewards degrade, and any other stage forgets the
    /// rewards that policy earned. What cannot be taken up is refused with the reason (what was
    /// taken up before it stands; the caller logs it, and the fallback still serves the app).
    pub fn restore_saved(
        &mut self,
        i: usize,
        saved: Option<&SavedLifecycle>,
        served_with: Option<FrozenPolicy>,
        oom_floor: Option<OomFloor>,
        vpa: &[(String, AggregateCheckpoint)],
        reason: &str,
    ) -> Result<(), String> {
        let state_dim = self.agent.state_dim();
        let Some(a) = self.apps.get_mut(i) else {
            return Err(format!("no managed application with index {i}"));
        };
        if let Some(p) = &served_with
            && p.state_dim() != state_dim
        {
            return Err(format!(
                "the policy it was served with reads states of {} features, the agent's have {state_dim}",
                p.state_dim()
            ));
        }
        // The floor first: a history that does not load (histogram options changed by an
        // upgrade, say) must not cost it. That history leaves the fallback as it was.
        if let Some(f) = oom_floor {
            a.guard.keep_saved_oom_floor(f)?;
        }
        if !vpa.is_empty() {
            let Some(fallback) = a.fallback.vpa_mut() else {
                return Err(format!("the fallback {} keeps no VPA history to take up", self.config.fallback));
            };
            fallback.load_checkpoints(vpa).map_err(|e| format!("the fallback's {e}"))?;
        }
        let Some(saved) = saved else { return Ok(()) };
        let name = a.name.clone();
        let mut state = saved.lifecycle.clone();
        let mut reason = reason.to_string();
        if let (true, Some(policy)) = (saved.served_by_live_agent, served_with) {
            self.restore_lifecycles(&[(name, state)], &format!("{reason}, with the policy it was served with"));
            self.apps[i].certified = Some(policy);
            // Dropped again where the stage taken up does not act with a certified policy.
            self.certify();
            return Ok(());
        }
        if saved.served_by_live_agent && state.stage == Stage::Serving {
            state = LifecycleState {
                stage: Stage::Online,
                retraining: true,
                recent: Vec::new(),
                recent_shadows: Vec::new(),
                reference: None,
                reference_comparison: None,
                behind: 0,
                retrain_episodes: 0,
                ..state
            };
            reason = format!(
                "{reason}: it served with a policy the agent learned live, which a restart does not keep (the checkpoint's agent was never checked for it), so it retrains"
            );
        } else if saved.served_by_live_agent {
            // Those rewards were the live policy's: the checkpoint's agent starts its own.
            state = LifecycleState { recent: Vec::new(), recent_shadows: Vec::new(), behind: 0, ..state };
        }
        self.restore_lifecycles(&[(name, state)], &reason);
        Ok(())
    }

    /// The policy app `i` acts with when the live agent learned it (frozen when retraining
    /// handed the app back), not the checkpoint's: what a restarted controller needs to go on
    /// serving the app as it was ([`LiveManager::restore_saved`]). `None` otherwise.
    pub fn served_policy(&self, i: usize) -> Option<&FrozenPolicy> {
        self.apps.get(i)?.certified.as_ref().filter(|c| !c.same(&self.handed))
    }

    /// Saves the agent as it has learned live (its weights and `checkpoint.json`, each weight
    /// file checksummed; not its replay or optimiser moments) in `dir`, as
    /// [`LiveManager::resume_learner`] takes it up.
    pub fn save_learner(&self, dir: &std::path::Path) -> Result<(), LifecycleError> {
        self.agent.save(dir, &crate::manager::agent_space(self.config.residual, 0))?;
        Ok(())
    }

    /// Goes on from the agent [`LiveManager::save_learner`] saved in `dir` (a previous run of
    /// the controller, which learned live from the agent it was handed): it learns and acts
    /// where the agent did; the policy apps a checkpoint places are served with stays the one
    /// handed over. Its replay starts empty. An agent that does not load (a weight file whose
    /// checksum differs, another algorithm, states of another width) is refused with the
    /// reason, and the agent stays as it was.
    pub fn resume_learner(&mut self, dir: &std::path::Path, seed: u64) -> Result<(), LifecycleError> {
        let space = crate::manager::agent_space(self.config.residual, 0);
        let mut agent = LifecycleAgent::load(dir, &space, seed)?;
        if agent.algorithm() != self.agent.algorithm() || agent.state_dim() != self.agent.state_dim() {
            return Err(LifecycleError::input(
                dir.display().to_string(),
                format!(
                    "a {} agent on states of {} features, the checkpoint's is a {} agent on {}",
                    agent.algorithm().name(),
                    agent.state_dim(),
                    self.agent.algorithm().name(),
                    self.agent.state_dim()
                ),
            ));
        }
        agent.serving_settings(&self.config);
        self.agent = agent;
        // No transition spans the change of agent.
        for (i, a) in self.apps.iter_mut().enumerate() {
            a.pending = None;
            self.agent.cut(i);
        }
        Ok(())
    }

    /// Gives the agent `transitions` of the fallback to learn offline from, as if it had seen
    /// them live (a restarted `aware controller --store` takes them up from the store:
    /// [`crate::record::recent_demonstrations`]); how many it kept. Refused for a residual
    /// agent (the store's states lack the fallback's proposals it reads) and where violations
    /// are priced (the store keeps the reward earned, not the one the agent learns from). A
    /// transition that is not finite or not of the agent's widths is skipped (the agent checks
    /// the state and the action; the reward, and the next state, which a cloning agent does
    /// not read, are checked here).
    pub fn take_up_demonstrations(&mut self, transitions: &[Experience]) -> Result<usize, LifecycleError> {
        if self.config.residual {
            return Err(LifecycleError::input(
                "store",
                "a residual agent reads the fallback's proposals beside the state, which the store's transitions do not hold",
            ));
        }
        if self.config.violation_price != 0.0 {
            return Err(LifecycleError::input(
                "store",
                "the agent learns violations at a price the store's rewards do not carry",
            ));
        }
        let usable =
            |e: &Experience| e.reward.is_finite() && aware_agents::check_observation(&e.next_state, STATE_DIM).is_ok();
        Ok(transitions.iter().filter(|e| usable(e) && self.agent.remember_offline(e).is_ok()).count())
    }

    /// [`crate::manager::certify`] for every app: an app that retraining hands back to
    /// SERVING, or one placed by hand, gets the agent as it is now.
    fn certify(&mut self) {
        let apps = self.apps.iter_mut().map(|a| (&a.lifecycle, &mut a.certified));
        crate::manager::certify(&self.agent, &self.config, apps);
    }

    pub fn stages(&self) -> Vec<Stage> {
        self.apps.iter().map(|a| a.lifecycle.stage()).collect()
    }

    /// Every stage change so far.
    pub fn changes(&self) -> &[StageChange] {
        &self.changes
    }

    /// The decisions logged since the last call (kept only with `ManagerConfig::log`).
    pub fn take_decisions(&mut self) -> Vec<Decision> {
        std::mem::take(&mut self.decisions)
    }

    /// What the store keeps, since the last call: the decisions and the windows ended (both
    /// kept only with `ManagerConfig::log`) and the stage changes
    /// ([`crate::record::LiveRecorder`] writes them).
    pub fn take_records(&mut self) -> LiveRecords {
        let changes = self.changes[self.changes_taken..].to_vec();
        self.changes_taken = self.changes.len();
        LiveRecords {
            decisions: std::mem::take(&mut self.decisions),
            windows: std::mem::take(&mut self.windows),
            changes,
        }
    }

    /// Keeps the decision log, with the features behind the agent's actions, and each window's
    /// transitions ([`LiveManager::take_records`]), or stops keeping them.
    pub fn set_log(&mut self, on: bool) {
        self.config.log = on;
    }

    /// Whether the agent is residual (acts on the fallback's proposals): its records live
    /// apart in a store ([`crate::record::RESIDUAL_AGENT`]).
    pub fn residual(&self) -> bool {
        self.config.residual
    }

    /// The fallback's name, as the decision log and the store name it.
    pub fn fallback_name(&self) -> String {
        self.config.fallback.to_string()
    }

    /// Intervals decided so far.
    pub fn step(&self) -> u64 {
        self.step
    }

    pub fn report(&self) -> Vec<LiveAppReport> {
        self.apps
            .iter()
            .map(|a| LiveAppReport {
                app: a.name.clone(),
                stage: a.lifecycle.stage(),
                retraining: a.lifecycle.retraining(),
                counts: a.counts.clone(),
                unavailable: a.unavailable,
            })
            .collect()
    }

    fn log(&mut self, app: usize, t: Transition) {
        self.changes.push(StageChange {
            app: self.apps[app].name.clone(),
            step: self.step,
            from: t.from,
            to: t.to,
            reason: t.reason,
        });
    }

    /// Whether the agent may act for an app in `stage` (`retraining`): as on the simulator,
    /// except where it would explore without the operator's opt-in
    /// ([`ManagerConfig::live_exploration`]).
    fn agent_acts(&self, stage: Stage, retraining: bool) -> bool {
        self.config.agent_acts(stage) && !self.held_from_exploring(stage, retraining)
    }

    /// [`held_from_exploring`] with this manager's agent and configuration.
    fn held_from_exploring(&self, stage: Stage, retraining: bool) -> bool {
        held_from_exploring(&self.config, &self.agent, stage, retraining)
    }

    /// One interval of every app of `cluster`: observe each, decide, apply. The caller moves
    /// time on (`cluster.advance()`). An app whose observation or actuation fails is held and
    /// logged; only the agent's own failure is an error.
    pub fn interval(&mut self, cluster: &mut dyn Cluster) -> Result<Vec<LiveDecision>, LifecycleError> {
        let names = cluster.app_names();
        let observations: Vec<(usize, Result<Observation, String>)> = (0..self.apps.len())
            .map(|i| {
                let obs = match names.iter().position(|n| *n == self.apps[i].name) {
                    Some(id) => cluster.observe(id).map_err(|e| e.to_string()),
                    None => Err(format!("the backend does not know the application {}", self.apps[i].name)),
                };
                (i, obs)
            })
            .collect();
        let mut decisions = self.decide(observations)?;
        for d in &mut decisions {
            let (Some(rec), Some(id)) = (&d.recommendation, names.iter().position(|n| *n == d.decision.app)) else {
                continue;
            };
            if let Err(e) = cluster.apply(id, rec) {
                // Not applied: nothing to learn from, and the log says so.
                let i = self.app_index(&d.decision.app).expect("decided apps are managed");
                let a = &mut self.apps[i];
                a.pending = None;
                self.agent.cut(i);
                a.previous_direction = a.direction_before;
                a.guard.forget_last();
                a.probe = Probe::default();
                d.decision.guard = format!("{}; not applied: {e}", d.decision.guard);
                if let Some(logged) = self.decisions.iter_mut().rev().find(|x| x.app == d.decision.app) {
                    logged.guard = d.decision.guard.clone();
                }
                d.recommendation = None;
            }
        }
        Ok(decisions)
    }

    /// One interval for the apps given, each with its observation or why there is none: what
    /// to apply to each (the caller applies it). One forward pass for every app the agent acts
    /// for. Apps not given are not decided this interval.
    pub fn decide(
        &mut self,
        observations: Vec<(usize, Result<Observation, String>)>,
    ) -> Result<Vec<LiveDecision>, LifecycleError> {
        let mut taken = Vec::with_capacity(observations.len());
        let mut offline = 0usize;
        for (i, obs) in observations {
            if i >= self.apps.len() {
                return Err(LifecycleError::input("app", format!("no managed application with index {i}")));
            }
            let (t, learned) = self.take(i, obs)?;
            offline += learned as usize;
            taken.push((i, t));
        }
        // Before this interval's training: an app handed over now gets the agent it was.
        self.certify();
        if offline > 0 {
            self.agent.train_offline(offline * self.config.offline_updates, self.config.bc_alpha)?;
        }
        let acting: Vec<usize> =
            (0..taken.len()).filter(|&k| taken[k].1.wants_agent && taken[k].1.refused.is_none()).collect();
        // The fallback's proposal the guard floors the agent's action under, asked (once per
        // interval and app, as ever) before the agent acts: an exploring app explores around
        // what the guard lets its action do.
        if self.config.fallback_floor {
            for &k in &acting {
                let (i, t) = &mut taken[k];
                if let (None, Some(obs)) = (&t.ask, &t.obs) {
                    t.ask = Some(self.apps[*i].fallback.recommender().recommend(obs).ok());
                }
            }
        }
        for &k in &acting {
            let (i, t) = &mut taken[k];
            let a = &mut self.apps[*i];
            let ask = t.ask.as_ref().and_then(|a| a.as_ref());
            let lifted = a.lifecycle.ceiling_lifted();
            t.ceiling = self.config.ceiling(&mut a.fallback, a.deployed.as_ref(), ask, lifted, &a.decoder.bounds);
        }
        let batch: Vec<f32> = acting.iter().flat_map(|&k| taken[k].1.state.clone().unwrap_or_default()).collect();
        let explore: Vec<Option<f32>> = acting
            .iter()
            .map(|&k| {
                self.agent.exploration(&self.config, taken[k].1.stage, self.apps[taken[k].0].lifecycle.retraining())
            })
            .collect();
        let apps: Vec<usize> = acting.iter().map(|&k| taken[k].0).collect();
        // An exploring app's growth is how it learns: the guard does not hold it as idle.
        for &k in &acting {
            let (i, t) = &taken[k];
            let explores = self.agent.explores(&self.config, t.stage, self.apps[*i].lifecycle.retraining());
            self.apps[*i].guard.set_explores(explores);
        }
        let served: Vec<Option<FrozenPolicy>> = apps.iter().map(|&i| self.apps[i].certified.clone()).collect();
        let sampling = self.agent.algorithm() == Learner::Ppo;
        // An exploring app explores around what the guard lets its action do
        // ([`ActingFrom::applied`]).
        let (config, live) = (&self.config, &self.apps);
        let mut centres: Vec<Option<Vec<f32>>> = vec![None; acting.len()];
        let mut effective = |j: usize, v: Vec<f32>| {
            let (i, t) = &taken[acting[j]];
            let Some(obs) = &t.obs else { return v };
            let ask = t.ask.as_ref().and_then(|a| a.as_ref());
            let (from, from_replicas) = action_origin(ask, config.residual, obs);
            let (from, from_replicas) = live[*i].probe.origin(from, from_replicas);
            let centre = config
                .acting_from(&live[*i].decoder, &from, from_replicas, ask, t.ceiling.as_ref(), obs)
                .applied(&live[*i].guard, v);
            if config.retrain_probes {
                centres[j] = Some(centre.clone());
            }
            centre
        };
        let mut actions = act_served(&mut self.agent, &batch, &apps, &served, &explore, &mut effective)?.into_iter();
        let mut out = Vec::with_capacity(taken.len());
        for (k, (i, t)) in taken.into_iter().enumerate() {
            let j = acting.iter().position(|&a| a == k);
            let (action, sampled, centre) = match j.and_then(|_| actions.next()) {
                Some((action, explored)) => {
                    let sampled = (sampling && explored).then(|| action.clone());
                    let probing = self.config.probes(self.apps[i].lifecycle.retraining(), explored);
                    let centre = j.and_then(|j| centres[j].take()).filter(|_| probing);
                    (Some(action), sampled, centre)
                }
                None => (None, None, None),
            };
            out.push(self.finish(i, t, action, sampled, centre)?);
        }
        self.step += 1;
        Ok(out)
    }

    /// Measures what the last interval earned (learning from it as the stage allows), ends the
    /// app's window when that fills it, and checks the new observation; whether a transition
    /// was kept for offline learning.
    fn take(&mut self, i: usize, obs: Result<Observation, String>) -> Result<(Taken, bool), LifecycleError> {
        let (stage, retraining) = (self.apps[i].lifecycle.stage(), self.apps[i].lifecycle.retraining());
        let wants_agent = self.agent_acts(stage, retraining);
        let a = &mut self.apps[i];
        let obs = match obs {
            Ok(obs) => obs,
            Err(reason) => {
                // A gap: the last decision's outcome is unknown, and the next state's load trend
                // has no previous interval to compare with.
                a.unavailable += 1;
                a.pending = None;
                self.agent.cut(i);
                a.previous_arrival = None;
                a.record(None, None);
                let refused = Some(format!("backend unavailable: {reason}"));
                return Ok((
                    Taken { obs: None, state: None, ask: None, ceiling: None, stage, refused, wants_agent },
                    false,
                ));
            }
        };
        if a.deployed.is_none() {
            let template = match &a.declared {
                Some(declared) => with_declared(&obs.template, declared),
                None => obs.template.clone(),
            };
            a.deployed = Some((obs.desired_replicas, template));
        }
        // A decision whose outcome comes too late (or from a clock that went back) is dropped.
        if let Some(p) = &a.pending
            && !one_interval_on(obs.time_s - p.time_s, p.interval_s)
        {
            a.pending = None;
            self.agent.cut(i);
        }
        let oscillation = a.pending.as_ref().is_some_and(|p| p.oscillation);
        let measured = aware_env::measure(&a.encoder, &a.reward, &obs, a.previous_arrival, false, oscillation);
        // Whether the interval `obs` closes met the SLO, for the guard's roll-back.
        let slo_missed = measured.as_ref().ok().map(|(_, _, info)| info.slo_violated);
        // The window that opens at `obs` (the first, or the next if this outcome fills the one
        // under way) replays from the fallback before it saw `obs`, which a residual agent's
        // ask (below) shows it first.
        let opens =
            a.replay.is_none() || (a.pending.is_some() && a.window_intervals + 1 >= self.config.episode_steps.max(1));
        let before = (opens && self.config.residual).then(|| a.fallback.snapshot());
        // A residual agent reads the fallback's proposal beside the state: asked here, once per
        // observation as ever, so the transition the state closes has it too.
        let ask = self.config.residual.then(|| a.fallback.recommender().recommend(&obs).ok());
        let measured = measured.map(|(state, reward, info)| match &ask {
            Some(ask) => {
                let asked = ask_features(&a.decoder.bounds, ask.as_ref(), &obs);
                (state.into_iter().chain(asked).collect(), reward, info)
            }
            None => (state, reward, info),
        });
        a.previous_arrival = obs.arrival_rate.is_finite().then_some(obs.arrival_rate);
        let mut learned = false;
        let state = match measured {
            Ok((state, reward, info)) => {
                if let Some(p) = a.pending.take() {
                    // Held from exploring, the fallback acted: the agent learns from it offline.
                    let learning = if held_from_exploring(&self.config, &self.agent, p.stage, p.retraining) {
                        Learning::Offline
                    } else {
                        self.config.learning(self.agent.algorithm(), p.stage, p.retraining)
                    };
                    let e = Experience {
                        state: p.state,
                        action: p.action,
                        reward: reward as f32,
                        next_state: state.clone(),
                        terminal: false,
                    };
                    let finite = e.state.iter().chain(&e.next_state).all(|v| v.is_finite()) && e.reward.is_finite();
                    if finite {
                        if self.config.log {
                            let state = e.state[..STATE_DIM.min(e.state.len())].to_vec();
                            let next_state = e.next_state[..STATE_DIM.min(e.next_state.len())].to_vec();
                            a.window_log.push(Experience { state, next_state, ..e.clone() });
                        }
                        a.window_reward += reward;
                        a.window_intervals += 1;
                        a.window_violations += info.slo_violated as u64;
                        // The agent learns what its violations are priced at (a live backend
                        // has no replay of the fallback for dual ascent: the fixed price only).
                        let price = if info.slo_violated { self.config.violation_price } else { 0.0 };
                        let e = Experience { reward: e.reward - price, ..e };
                        match learning {
                            Learning::Offline => {
                                self.agent.remember_offline(&e)?;
                                learned = true;
                            }
                            Learning::Online { bc } => {
                                let updates = if p.retraining { self.config.retrain_updates } else { 1 };
                                self.agent.learn_online(i, &e, p.sampled.as_deref(), false, bc, updates)?
                            }
                            Learning::None => self.agent.stop_online(i),
                        }
                    }
                }
                Some(state)
            }
            Err(_) => {
                a.pending = None;
                self.agent.cut(i);
                None
            }
        };
        // The window is full with this outcome: it ends before `obs` opens the next, so each
        // window's replay starts from the observation its first decision was taken on.
        if self.apps[i].window_intervals >= self.config.episode_steps.max(1) {
            self.end_window(i);
        }
        // The window's end may have moved the stage: this interval is decided in the new one.
        let (stage, retraining) = (self.apps[i].lifecycle.stage(), self.apps[i].lifecycle.retraining());
        let wants_agent = self.agent_acts(stage, retraining);
        let a = &mut self.apps[i];
        a.record(Some(&obs), before);
        // A frozen clock repeats the last interval's outcome: noted once.
        if a.guard.clock() != Some(obs.time_s) {
            a.guard.note_slo(&obs, slo_missed);
        }
        let checked = match &state {
            Some(s) => a.guard.check(&obs, s).map_err(|e| e.to_string()),
            None => a.guard.check(&obs, &[]).map_err(|e| e.to_string()).and(Err("the state cannot be encoded".into())),
        };
        let refused = checked.err();
        Ok((Taken { obs: Some(obs), state, ask, ceiling: None, stage, refused, wants_agent }, learned))
    }

    /// Decides app `i`'s interval from what [`LiveManager::take`] made of its observation and the
    /// agent's action (when it was asked).
    fn finish(
        &mut self,
        i: usize,
        t: Taken,
        agent_action: Option<Vec<f32>>,
        sampled: Option<Vec<f32>>,
        centre: Option<Vec<f32>>,
    ) -> Result<LiveDecision, LifecycleError> {
        let attribution = match (&agent_action, &t.state) {
            (Some(v), Some(state)) if self.config.log => {
                let names = decision::named_features(self.config.residual);
                let policy = acting_policy(&self.agent, self.apps[i].certified.as_ref());
                // The log's explanation never fails the decision it explains.
                decision::explain_action(policy, state, v, &names).ok()
            }
            _ => None,
        };
        let fallback_name = self.fallback_name();
        let held =
            self.config.agent_acts(t.stage) && self.held_from_exploring(t.stage, self.apps[i].lifecycle.retraining());
        let a = &mut self.apps[i];
        let mut verdict = "passed".to_string();
        if let (Some(reason), true, true) = (&t.refused, t.wants_agent, t.obs.is_some()) {
            a.counts.guard_fallbacks += 1;
            a.counts.last_guard_reason = Some(reason.clone());
            verdict = format!("fallback: {reason}");
        } else if t.obs.is_none() {
            verdict = format!("fallback: {}", t.refused.clone().unwrap_or_default());
        } else if held {
            verdict = "fallback: the agent retrains by exploring, which a live cluster allows only with \
                       --explore-while-retraining; the fallback acts while the agent learns from it"
                .to_string();
        }
        let agent_acted = agent_action.is_some();
        // Where the action in the agent's coordinates is measured from, when not from the
        // current allocation: a residual agent's from the fallback's proposal.
        let mut origin = None;
        let recommendation = match (&t.obs, agent_action) {
            (Some(obs), Some(v)) => {
                // The agent's allocation is in limits, for the app's own container.
                a.decoder.container = obs.template.name.clone();
                // Asked before the agent acted, where its state or the guard's floor needs it.
                let ask = t.ask.flatten();
                let (from, from_replicas) = action_origin(ask.as_ref(), self.config.residual, obs);
                // Measured from a probe's path while the app is where the probe left it.
                let (from, from_replicas) = a.probe.origin(from, from_replicas);
                if self.config.residual || matches!(from, std::borrow::Cow::Owned(_)) {
                    origin = Some((from.limits, from_replicas));
                }
                let g = self
                    .config
                    .acting_from(&a.decoder, &from, from_replicas, ask.as_ref(), t.ceiling.as_ref(), obs)
                    .guard_probing(&mut a.guard, &mut a.probe, v, centre.as_deref())?;
                if let Some(why) = g.limited {
                    a.counts.guard_limited += 1;
                    verdict = format!("limited: {why}");
                }
                let mut rec = g.rec;
                keep_request_ratio(&mut rec, &obs.template);
                Some(rec)
            }
            // The fallback sees every observation the backend gave (its own checks refuse bad ones).
            (Some(obs), None) => {
                // What the rules do is no probe's path.
                a.probe = Probe::default();
                let mut p = match t.ask {
                    Some(ask) => ask,
                    None => a.fallback.recommender().recommend(obs).ok(),
                };
                // The fallback's own decision as asked is a residual agent's action 0 (its
                // state read it): what the guard's rules change is its action.
                if let (true, Some(p)) = (self.config.residual, &p)
                    && let Some(c) = p.containers.first()
                {
                    origin = Some((c.limits, p.replicas));
                }
                // Handed to the rules (not for one refused observation): with what they do not
                // manage as first observed, never below (not for a residual agent, as in the
                // bootstrapping check's replays).
                let scope = a.fallback.recommender().scope();
                let handed_back =
                    a.deployed.as_ref().filter(|_| !t.wants_agent && !self.config.residual).map(|d| (scope, d));
                if let Some(p) = &mut p {
                    crate::manager::guard_fallback(
                        &a.guard,
                        p,
                        obs.time_s,
                        &a.decoder.bounds,
                        handed_back,
                        &mut verdict,
                    );
                    a.guard.witness(p, &obs.template);
                }
                p
            }
            (None, _) => None,
        };
        if agent_acted {
            a.counts.agent_actions += 1;
        } else {
            a.counts.fallback_actions += 1;
        }
        // What was decided, in the agent's coordinates, waits for its outcome.
        a.pending = match (&t.obs, &t.state) {
            (Some(obs), Some(state)) => {
                let now = obs.template.limits;
                let (target, direction) = match &recommendation {
                    Some(rec) => {
                        let c = rec.containers.first().map(|c| c.limits).unwrap_or(now);
                        (
                            (c.cpu_millicores, c.memory_bytes, rec.replicas),
                            aware_env::direction(obs.desired_replicas, &obs.template, rec),
                        )
                    }
                    None => ((now.cpu_millicores, now.memory_bytes, obs.desired_replicas), [0; 3]),
                };
                let (from, from_replicas) = origin.unwrap_or((now, obs.desired_replicas));
                let action = aware_env::coordinates(
                    AGENT_ACTIONS,
                    &a.decoder.bounds,
                    target,
                    (from.cpu_millicores, from.memory_bytes, from_replicas),
                )
                .unwrap_or_else(|| vec![0.0; 3]);
                a.direction_before = a.previous_direction;
                let oscillation = aware_env::reverses(a.previous_direction, direction);
                if direction != [0; 3] {
                    a.previous_direction = direction;
                }
                Some(Pending {
                    state: state.clone(),
                    action,
                    oscillation,
                    sampled,
                    stage: t.stage,
                    retraining: a.lifecycle.retraining(),
                    time_s: obs.time_s,
                    interval_s: obs.interval_s,
                })
            }
            _ => None,
        };
        let decision = Decision {
            app: a.name.clone(),
            step: self.step,
            stage: t.stage,
            acting_policy: if agent_acted { "aware".into() } else { fallback_name },
            observation: t.obs.as_ref().map(Seen::of),
            action: recommendation.as_ref().and_then(Set::of),
            guard: verdict,
            attribution,
        };
        if self.config.log {
            self.decisions.push(decision.clone());
        }
        Ok(LiveDecision { recommendation, agent_acted, decision })
    }

    /// App `i`'s window is full: Algorithm 1 reads its mean reward, and in OFFLINE the
    /// bootstrapping check's comparison on the model fitted from the app's metrics
    /// ([`LiveManager::check_in_shadow`]). Under high stakes, and where the agent is held from
    /// exploring ([`ManagerConfig::live_exploration`]), the fallback earned an ONLINE window's
    /// rewards while the agent retrained, and they say nothing of the agent's: it is judged by
    /// its greedy run on the window's traffic replayed on that model instead, as the
    /// simulator's manager judges it, and without a replay no stage moves on the window.
    fn end_window(&mut self, i: usize) {
        let (stage, retraining) = (self.apps[i].lifecycle.stage(), self.apps[i].lifecycle.retraining());
        let high_stakes = self.config.is_high_stakes() || self.held_from_exploring(stage, retraining);
        let keep = self.config.shadow_episodes.max(1);
        let a = &mut self.apps[i];
        let outcome = EpisodeOutcome {
            mean_reward: a.window_reward / a.window_intervals.max(1) as f64,
            slo_violations: a.window_violations,
            intervals: a.window_intervals,
            core_seconds: None,
        };
        let agent_acted = a.counts.agent_actions > a.window_start_agent_actions;
        let judged_in_shadow = high_stakes && stage == Stage::Online && !agent_acted;
        // The agent's actions explored (live only with `--explore-while-retraining`): what they
        // earned is the price of learning, and the policy is judged by its greedy replay.
        let bootstrapping = a.lifecycle.bootstrapping();
        let judged_greedily = stage == Stage::Online
            && bootstrapping
            && agent_acted
            && self.agent.explores(&self.config, stage, retraining);
        a.windows += 1;
        match a.replay.take() {
            Some(r) if !r.gap && !r.rates.is_empty() => a.recent.push_back(r),
            // A window that cannot be replayed breaks the run of recent traffic.
            _ => a.recent.clear(),
        }
        while a.recent.len() > keep {
            a.recent.pop_front();
        }
        let shadow = match stage {
            Stage::Offline => self.check_in_shadow(i, &outcome, agent_acted, false),
            Stage::Online if judged_in_shadow || judged_greedily => {
                self.check_in_shadow(i, &outcome, agent_acted, true)
            }
            // The agent served the window: what it earned against the fallback's replay, so
            // that one falling behind the rules goes back to OFFLINE, as on the simulator.
            Stage::Online | Stage::Serving if agent_acted && bootstrapping => self.fallback_on_window(i, &outcome),
            _ => Ok(None),
        };
        let shadow = shadow.unwrap_or_else(|why| {
            // The newest window's own replay missed it (not one pooled before it).
            if why.contains("does not reproduce it")
                && !why.starts_with(RECENT_UNTRUSTED)
                && let Some(newest) = self.apps[i].recent.back_mut()
            {
                newest.unfaithful = Some(why.clone());
            }
            self.apps[i].lifecycle.unchecked(&why);
            None
        });
        // The rules failing hands the app to the agent only where the agent can be handed back:
        // the app's windows replay on its fitted model, each as faithfully as its fallback's
        // window was reproduced, so that an acting agent behind the fallback's replay goes back
        // to OFFLINE ([`LiveManager::fallback_on_window`]) and a retraining one is judged
        // by its greedy replay. And only on the rules' own failing, not on a window the agent
        // served: the fallback's replay of it starts from the allocation the agent built, and
        // from an app the agent starved the rules fail too for a window's length (test
        // `a_serving_agent_that_falls_behind_the_fallbacks_replay_goes_back_to_offline`).
        let replayable = !agent_acted
            && self.apps[i].recent.iter().all(|r| r.unfaithful.is_none())
            && matches!(self.model(i), Ok(Some(_)));
        let a = &mut self.apps[i];
        a.lifecycle.set_retrains_where_rules_fail(replayable);
        let transition = match shadow {
            Some(s) if judged_in_shadow || judged_greedily => a.lifecycle.episode_end(s.agent, Some(s)),
            None if judged_in_shadow => None,
            shadow => a.lifecycle.episode_end(outcome, shadow),
        };
        (a.window_reward, a.window_intervals, a.window_violations) = (0.0, 0, 0);
        a.window_start_agent_actions = a.counts.agent_actions;
        if self.config.log {
            let transitions = std::mem::take(&mut a.window_log);
            self.windows.push(LiveWindow { app: a.name.clone(), stage, agent_acted, transitions });
        }
        if let Some(t) = transition {
            self.log(i, t);
        }
    }

    /// The bootstrapping check of app `i`: the agent (greedy) against the fallback on each
    /// recent window's traffic (`newest_only`: on the window just ended), replayed on the model
    /// fitted from the app's metrics, pooled; `None` while no window can be replayed. An error
    /// says why the app is not checked: no model yet, a replay that failed, or a fallback whose
    /// replay of the window it drove (`outcome`) violated the SLO less often than it did
    /// ([`crate::manager::replay_misses`]).
    fn check_in_shadow(
        &self,
        i: usize,
        outcome: &EpisodeOutcome,
        agent_acted: bool,
        newest_only: bool,
    ) -> Result<Option<ShadowComparison>, String> {
        let a = &self.apps[i];
        let Some(model) = self.model(i)? else { return Ok(None) };
        let skip = if newest_only { a.recent.len() - 1 } else { 0 };
        let handed_back = a.deployed.as_ref().filter(|_| !self.config.residual);
        let guard = self.config.replay_guard_config(&a.profile, a.lifecycle.rules_failed());
        let mut outcomes = Vec::with_capacity(a.recent.len());
        for (k, r) in a.recent.iter().enumerate().skip(skip) {
            let app = r.shadow_app(&model.fitted.app, &a.profile, &model.sim, handed_back, model.seed(k));
            let c = shadow::compare(
                &app,
                &self.agent,
                None,
                &self.config.fallback,
                self.config.fallback_floor,
                self.config.residual,
                &guard,
            )
            .map_err(|e| format!("the replay on the app's fitted model failed: {e}"))?;
            outcomes.push(c);
        }
        if !agent_acted
            && let Some(replayed) = outcomes.last()
            && let Some(why) = crate::manager::replay_misses(outcome, &replayed.fallback, outcome.intervals)
        {
            return Err(format!(
                "{why} (the model fitted from the app's metrics: {:.1} ms of CPU and {:.1} ms of I/O per request)",
                model.fitted.app.cost().cpu_s * 1000.0,
                model.fitted.app.cost().io_s * 1000.0
            ));
        }
        // A window whose own replay was not believed stays unbelieved while it is pooled.
        if let Some(why) = a.recent.iter().skip(skip).find_map(|r| r.unfaithful.as_deref()) {
            return Err(format!("{RECENT_UNTRUSTED}{why}"));
        }
        Ok(Some(ShadowComparison::pooled(&outcomes)))
    }

    /// App `i`'s agent served the window just ended: what it earned (`outcome`) against the
    /// fallback replayed on the window's traffic on the model fitted from the app's metrics, as
    /// the simulator's manager judges an acting agent; `None` while the window cannot be
    /// replayed. No fidelity rule here (the fallback did not drive the window, so nothing
    /// live says what it would have done; a replay that flatters it can only hand the app back
    /// to the rules, the safe direction); the replay on a model fitted while the agent acted
    /// was measured against the same replay on the app's own model (test
    /// `the_fallbacks_replay_of_a_window_the_agent_served_comes_out_as_on_the_apps_own_model`).
    fn fallback_on_window(&self, i: usize, outcome: &EpisodeOutcome) -> Result<Option<ShadowComparison>, String> {
        let a = &self.apps[i];
        let (Some(model), Some(newest)) = (self.model(i)?, a.recent.back()) else { return Ok(None) };
        let handed_back = a.deployed.as_ref().filter(|_| !self.config.residual);
        let app =
            newest.shadow_app(&model.fitted.app, &a.profile, &model.sim, handed_back, model.seed(a.recent.len() - 1));
        let fallback = shadow::fallback_with_guard(&app, &self.config.fallback, &self.config.guard_config(&a.profile))
            .map_err(|e| format!("the replay on the app's fitted model failed: {e}"))?;
        Ok(Some(ShadowComparison { agent: *outcome, fallback }))
    }

    /// The model app `i`'s recent windows replay on, fitted from its metrics; `None` while no
    /// window can be replayed, an error where no model can be fitted.
    fn model(&self, i: usize) -> Result<Option<ReplayModel>, String> {
        let a = &self.apps[i];
        let Some(newest) = a.recent.back() else { return Ok(None) };
        let (replicas, template) = a.deployed.clone().unwrap_or((newest.start.replicas, newest.start.template.clone()));
        let deployed = aware_sim::Allocation {
            replicas,
            cpu_millicores: template.limits.cpu_millicores,
            memory_bytes: template.limits.memory_bytes,
        };
        Ok(Some(ReplayModel {
            fitted: a.measured.fit(&a.name, &a.profile, deployed)?,
            sim: replay_cluster(&a.profile, newest.interval_s),
            name_hash: a
                .name
                .bytes()
                .fold(0xcbf2_9ce4_8422_2325_u64, |h, b| (h ^ b as u64).wrapping_mul(0x100_0000_01b3)),
            windows: a.windows,
        }))
    }
}

/// What a live app's windows are replayed on ([`LiveManager::model`]).
struct ReplayModel {
    fitted: crate::fit::Fitted,
    sim: SimConfig,
    name_hash: u64,
    /// Windows the app has ended.
    windows: u64,
}

impl ReplayModel {
    /// The replay seed of the `k`-th recent window (oldest first).
    fn seed(&self, k: usize) -> u64 {
        self.name_hash ^ ((self.windows + k as u64) << 20)
    }
}

/// The simulated cluster a live app's recent traffic is replayed in: its interval, and room
/// for whatever `profile`'s bounds allow (a live cluster's free capacity is not known).
fn replay_cluster(profile: &Profile, interval_s: f64) -> SimConfig {
    let base = SimConfig::default();
    let b = &profile.bounds;
    let cores = b.max_replicas as f64 * b.max_cpu_millicores as f64 / 1000.0;
    let memory = b.max_replicas as f64 * b.max_memory_mib as f64 * aware_core::MIB as f64;
    let nodes = (base.node_headroom * (cores / base.node_cores).max(memory / base.node_memory_bytes as f64))
        .ceil()
        .clamp(1.0, aware_sim::MAX_NODES as f64) as usize;
    SimConfig { interval_s, scrape_interval_s: interval_s, metrics_lag_s: interval_s, nodes: Some(nodes), ..base }
}

#[cfg(test)]
mod tests {
    use super::*;
    use aware_core::MIB;
    use aware_core::{AppId, ClusterError, ContainerResources};
    use aware_sim::{SimCluster, SimConfig};

    /// The simulator behind a switch: while `down`, every observation is unavailable, as from a
    /// stopped Prometheus.
    struct Flaky {
        sim: SimCluster,
        down: bool,
        /// Every recommendation is refused (an API server answering 500).
        refuse: bool,
        /// Each observed p99 multiplied by this, the mean left as it is: a latency tail heavier
        /// than the queueing of the app's costs gives (garbage-collection pauses, say).
        tail: f64,
        /// Added to every observation's clock (a backend whose clock jumps).
        clock_s: f64,
    }

    impl Cluster for Flaky {
        fn app_names(&self) -> Vec<String> {
            self.sim.app_names()
        }
        fn interval_s(&self) -> f64 {
            self.sim.interval_s()
        }
        fn observe(&self, app: AppId) -> Result<Observation, ClusterError> {
            if self.down {
                return Err(ClusterError::Unavailable("connection refused".into()));
            }
            let mut obs = self.sim.observe(app)?;
            obs.latency_p99_ms = obs.latency_p99_ms.map(|p| p * self.tail);
            obs.time_s += self.clock_s;
            Ok(obs)
        }
        fn target(&self, app: AppId) -> Result<(u32, ContainerResources), ClusterError> {
            self.sim.target(app)
        }
        fn apply(&mut self, app: AppId, rec: &Recommendation) -> Result<(), ClusterError> {
            if self.refuse {
                return Err(ClusterError::Unavailable("the API server answered 500".into()));
            }
            self.sim.apply(app, rec)
        }
        fn advance(&mut self) -> Result<(), ClusterError> {
            self.sim.advance()
        }
    }

    fn cluster() -> Flaky {
        let apps = aware_sim::generate_apps(2, 7, 86_400.0);
        let mut sim = SimCluster::new(apps, Vec::new(), SimConfig::default(), 7);
        for _ in 0..4 {
            sim.advance().expect("warm-up");
        }
        Flaky { sim, down: false, refuse: false, tail: 1.0, clock_s: 0.0 }
    }

    fn manager(c: &Flaky, config: ManagerConfig) -> LiveManager {
        let agent = crate::agent::LifecycleAgent::fresh_for(&config, 3);
        LiveManager::new(&c.app_names(), &Profile::default(), agent, ManagerConfig { log: true, ..config })
            .expect("manager")
    }

    /// An agent cloned from demonstrations of cutting everything (the action −1 in every
    /// dimension, whatever the state).
    fn shrinking_agent(config: &ManagerConfig) -> crate::agent::LifecycleAgent {
        let mut agent = crate::agent::LifecycleAgent::fresh_for(config, 5);
        let width = crate::manager::base_state_width(false);
        for k in 0..256 {
            let state: Vec<f32> = (0..width).map(|j| ((k * 7 + j * 13) % 17) as f32 / 17.0).collect();
            let e = Experience {
                state: state.clone(),
                action: vec![-1.0; 3],
                reward: 1.0,
                next_state: state,
                terminal: false,
            };
            agent.remember_offline(&e).expect("remember");
        }
        agent.train_offline(400, 2.5).expect("clone");
        agent
    }

    /// Every app SERVING, held to a reference reward no interval falls below.
    fn serving(m: &mut LiveManager) {
        let state = LifecycleState::fresh(Stage::Serving, Some(-1e6));
        let names: Vec<String> = m.apps.iter().map(|a| a.name.clone()).collect();
        let states: Vec<_> = names.into_iter().map(|n| (n, state.clone())).collect();
        m.restore_lifecycles(&states, "test: a checkpoint that serves");
    }

    /// A restarted decider takes up what it saved, through JSON as the controller's state file
    /// keeps it: the stage a degradation left (not the checkpoint's SERVING), the memory floor
    /// after an OOM kill, and the fallback's VPA history (its recommendation as the one that
    /// ran on gives it, where one restarted empty starts its confidence over). An app served by
    /// a policy the live agent learned resumes retraining instead.
    #[test]
    fn a_restarted_decider_takes_up_the_stages_the_oom_floor_and_the_fallbacks_history_it_saved() {
        let mut c = cluster();
        let config = ManagerConfig { episode_steps: 5, ..ManagerConfig::default() };
        let checkpoint = |m: &mut LiveManager| {
            let name = m.apps[0].name.clone();
            m.restore_lifecycles(&[(name, LifecycleState::fresh(Stage::Serving, Some(1e6)))], "the checkpoint");
        };
        let mut ran_on = manager(&c, config.clone());
        checkpoint(&mut ran_on);
        for _ in 0..120 {
            ran_on.interval(&mut c).expect("interval");
            c.advance().expect("advance");
        }
        // App 0 degraded from the checkpoint's SERVING; app 1 bootstraps (and may have been
        // handed over by the bootstrapping check on its fitted model).
        assert_eq!(ran_on.stages()[0], Stage::Online, "{:?}", ran_on.changes());
        let now = c.observe(0).expect("observation").time_s;
        let floor = OomFloor { killed_bytes: 512 * MIB, bytes: 612 * MIB, at_s: now - 60.0 };
        ran_on.apps[1].guard.keep_saved_oom_floor(floor).expect("a floor");
        let saved: Vec<_> = (0..2).map(|i| ran_on.saved(i).expect("saved")).collect();
        assert_eq!(saved[1].oom_floor, Some(floor));
        assert!(!saved[1].fallback_vpa.is_empty(), "the MPA default's VPA keeps a history");
        let kept: Vec<_> = saved.iter().map(|s| (&s.lifecycle, s.oom_floor, &s.fallback_vpa)).collect();
        let text = serde_json::to_string(&kept).expect("serialised");
        type Kept = (SavedLifecycle, Option<OomFloor>, Vec<(String, AggregateCheckpoint)>);
        let saved: Vec<Kept> = serde_json::from_str(&text).expect("read back");

        let mut restarted = manager(&c, config.clone());
        checkpoint(&mut restarted);
        for (i, (lifecycle, floor, vpa)) in saved.iter().enumerate() {
            restarted
                .restore_saved(i, Some(lifecycle), None, *floor, vpa, "restored from the state")
                .expect("taken up");
        }
        // Taken up, not yet checked against an observation: a save keeps it.
        assert_eq!(restarted.saved(1).expect("saved").oom_floor, Some(floor));
        assert_eq!(restarted.stages(), ran_on.stages());
        // Each app's stage and retraining as it ran on (app 0 degraded, then judged on its
        // fitted model by the bootstrapping check; the rewards a policy frozen live earned are
        // not taken up without that policy, see below).
        for i in 0..2 {
            let (now, then) = (restarted.lifecycle(i).expect("app"), ran_on.lifecycle(i).expect("app"));
            assert_eq!((now.stage, now.retraining), (then.stage, then.retraining), "{:?}", ran_on.changes());
        }
        let mut empty = manager(&c, config.clone());
        checkpoint(&mut empty);
        let observations = || (0..2).map(|i| (i, c.observe(i as AppId).map_err(|e| e.to_string()))).collect();
        for m in [&mut ran_on, &mut restarted, &mut empty] {
            m.decide(observations()).expect("decide");
        }
        assert_eq!(restarted.saved(1).expect("saved").oom_floor, Some(floor));
        assert_eq!(empty.saved(1).expect("saved").oom_floor, None);
        let rec =
            |m: &LiveManager| *m.apps[1].fallback.vpa().and_then(|v| v.recommendation()).expect("a recommendation");
        let (a, b, e) = (rec(&ran_on), rec(&restarted), rec(&empty));
        let (a, b, e) = (
            a.lower_bound.cpu_millicores as f64,
            b.lower_bound.cpu_millicores as f64,
            e.lower_bound.cpu_millicores as f64,
        );
        assert!((a - b).abs() <= 0.05 * a, "the fallback's CPU lower bound: ran on {a}, restarted {b}");
        assert!(e < a / 1.5, "restarted empty, the fallback starts its confidence over: {e} against {a}");

        // SERVING with a policy frozen from the live agent: retraining after a restart.
        let live = SavedLifecycle {
            lifecycle: LifecycleState { recent: vec![0.5; 3], ..LifecycleState::fresh(Stage::Serving, Some(0.5)) },
            served_by_live_agent: true,
        };
        // With the policy it was served with kept, it goes on SERVING with it, its rewards kept,
        // deciding as that policy does.
        let mut kept = manager(&c, config.clone());
        let learned = crate::agent::LifecycleAgent::fresh_for(&config, 99).frozen();
        kept.restore_saved(0, Some(&live), Some(learned.clone()), None, &[], "restored from the state")
            .expect("taken up");
        let now = kept.lifecycle(0).expect("app 0");
        assert_eq!((now.stage, now.retraining, now.recent.len()), (Stage::Serving, false, 3));
        kept.decide(observations()).expect("decide");
        assert_eq!(kept.served_policy(0).map(|p| p.to_bytes()), Some(learned.to_bytes()), "served with it still");
        assert!(kept.saved(0).expect("saved").lifecycle.served_by_live_agent);
        assert_eq!(kept.served_policy(1).map(|p| p.to_bytes()), None, "app 1 was not taken up so");
        let wide = crate::agent::LifecycleAgent::Ddpg(aware_agents::ddpg::Ddpg::new(
            aware_env::STATE_DIM + 1,
            crate::manager::AGENT_ACTION_DIM,
            Default::default(),
            1,
        ));
        let err = kept.restore_saved(1, Some(&live), Some(wide.frozen()), None, &[], "restored").unwrap_err();
        assert!(err.contains("reads states of"), "{err}");
        let mut m = manager(&c, config);
        m.restore_saved(0, Some(&live), None, None, &[], "restored from the state").expect("taken up");
        assert_eq!(m.stages()[0], Stage::Online);
        assert!(m.apps[0].lifecycle.retraining());
        assert!(m.changes().last().expect("a change").reason.contains("learned live"), "{:?}", m.changes());
        // In another stage it keeps the stage and forgets what that policy earned.
        let online = SavedLifecycle {
            lifecycle: LifecycleState { stage: Stage::Online, reference: None, ..live.lifecycle.clone() },
            ..live.clone()
        };
        m.restore_saved(1, Some(&online), None, None, &[], "restored from the state").expect("taken up");
        let now = m.lifecycle(1).expect("app 1");
        assert_eq!((now.stage, now.recent.len()), (Stage::Online, 0));
        // A history that does not load is refused; the floor beside it is still taken up.
        let broken = vec![(
            "app".to_string(),
            AggregateCheckpoint {
                cpu_histogram: aware_baselines::HistogramCheckpoint { total_weight: -1.0, ..Default::default() },
                ..Default::default()
            },
        )];
        assert!(m.restore_saved(1, None, None, Some(floor), &broken, "restored").unwrap_err().contains("VPA history"));
        assert_eq!(m.saved(1).expect("saved").oom_floor, Some(floor));
        // What makes no sense is refused, and the app keeps what it had.
        let bad = Some(OomFloor { bytes: 0, ..floor });
        assert!(m.restore_saved(1, Some(&live), None, bad, &[], "restored").unwrap_err().contains("makes no sense"));
        assert_eq!(m.stages()[1], Stage::Online);
    }

    /// A serving app acts with the agent the checkpoint gave it while the agent learns offline
    /// from the app the fallback serves: its actions are what that agent takes, although the
    /// agent's own moved.
    #[test]
    fn a_serving_app_acts_with_the_checkpoints_agent_while_another_bootstraps() {
        let mut c = cluster();
        let config = ManagerConfig { offline_updates: 16, ..ManagerConfig::default() };
        let mut m = manager(&c, config.clone());
        let reference = crate::agent::LifecycleAgent::fresh_for(&config, 3);
        let serving = LifecycleState::fresh(Stage::Serving, Some(-1e6));
        m.restore_lifecycles(&[(m.apps[0].name.clone(), serving)], "test: a checkpoint that serves app 0");
        assert_eq!(m.stages(), vec![Stage::Serving, Stage::Offline]);
        let mut served = Vec::new();
        for k in 0..180 {
            // App 0's backend answers nothing for the first 60 intervals, while the agent
            // learns from app 1: it is still served with the checkpoint's agent afterwards.
            let observations = (0..2)
                .map(|i| match (i, k < 60) {
                    (0, true) => (0, Err("connection refused".to_string())),
                    _ => (i, c.observe(i as AppId).map_err(|e| e.to_string())),
                })
                .collect();
            for d in m.decide(observations).expect("decide") {
                if let Some(rec) = &d.recommendation {
                    let id = c.app_names().iter().position(|n| *n == d.decision.app).expect("a managed app");
                    c.apply(id as AppId, rec).expect("applied");
                }
                if d.agent_acted {
                    let a = d.decision.attribution.expect("logged with its attribution");
                    let state: Vec<f32> = decision::named_features(false)
                        .iter()
                        .map(|n| a[0].features.iter().find(|f| f.feature == *n).expect("every feature").value)
                        .collect();
                    served.push((state, a.iter().map(|x| x.action).collect::<Vec<f32>>()));
                }
            }
            c.advance().expect("advance");
        }
        assert_eq!(m.stages(), vec![Stage::Serving, Stage::Offline]);
        assert!(m.agent.updates() > 0 && served.len() == 120, "{} updates, {} served", m.agent.updates(), served.len());
        let mut moved = 0.0f32;
        for (state, acted) in &served {
            let checkpoint = reference.greedy(state).unwrap();
            assert!(acted.iter().zip(&checkpoint).all(|(a, b)| (a - b).abs() < 1e-4), "{acted:?} vs {checkpoint:?}");
            let now = m.agent.greedy(state).unwrap();
            moved = moved.max(now.iter().zip(&checkpoint).map(|(a, b)| (a - b).abs()).fold(0.0, f32::max));
        }
        assert!(moved > 1e-2, "the agent acts as it started ({moved})");
    }

    /// Each app's profile with its simulated SLO times `scale` (the live decider reads the SLO
    /// from the profile alone).
    fn with_slos(m: &mut LiveManager, sim: &SimCluster, scale: f64) {
        with_slos_on(m, sim, scale, &Profile::default());
    }

    /// [`with_slos`] on `base`.
    fn with_slos_on(m: &mut LiveManager, sim: &SimCluster, scale: f64, base: &Profile) {
        for i in 0..m.apps.len() {
            let mut profile = base.clone();
            profile.slo.latency_p99_ms = Some(sim.slo_p99_ms(i) * scale);
            m.set_profile(i, &profile).expect("profile");
        }
    }

    /// OFFLINE live: until the app is measured enough for a model the check says so; then each
    /// window the agent is compared with the fallback on the recent traffic replayed on the
    /// model fitted from the app's metrics, and that replay comes out as a replay on the app's
    /// own model does (the fallback's violations within a tenth of the intervals, its
    /// core-seconds within 10 %, the agent's too).
    #[test]
    fn offline_live_the_agent_is_checked_on_a_model_fitted_from_the_apps_metrics() {
        let mut c = cluster();
        let apps = aware_sim::generate_apps(2, 7, 86_400.0);
        let mut m = manager(&c, ManagerConfig { episode_steps: 5, ..ManagerConfig::default() });
        with_slos(&mut m, &c.sim, 1.0);
        for _ in 0..6 {
            m.interval(&mut c).expect("interval");
            c.advance().expect("advance");
        }
        for i in 0..2 {
            let why = m.apps[i].lifecycle.last_check().expect("checked");
            assert!(why.contains("no model of the app yet"), "{why}");
            assert_eq!(m.apps[i].lifecycle.stage(), Stage::Offline);
        }
        // An SLO tighter than the app's own, so that the replays violate it at times.
        const TIGHTER: f64 = 0.7;
        let mut m = manager(&c, ManagerConfig { episode_steps: 60, ..ManagerConfig::default() });
        with_slos(&mut m, &c.sim, TIGHTER);
        for _ in 0..61 {
            m.interval(&mut c).expect("interval");
            c.advance().expect("advance");
        }
        for (i, spec) in apps.iter().enumerate() {
            let a = &m.apps[i];
            let why = a.lifecycle.last_check().expect("checked");
            assert!(why.contains("the agent earned"), "{why}");
            let r = a.recent.back().expect("a window to replay");
            let deployed = aware_sim::Allocation {
                replicas: r.start.replicas,
                cpu_millicores: r.start.template.limits.cpu_millicores,
                memory_bytes: r.start.template.limits.memory_bytes,
            };
            let fitted = a.measured.fit(&a.name, &a.profile, deployed).expect("a model");
            let sim = replay_cluster(&a.profile, r.interval_s);
            let replay = |spec: &aware_sim::AppSpec| {
                let app = r.shadow_app(spec, &a.profile, &sim, a.deployed.as_ref(), 5);
                let guard = m.config.guard_config(&a.profile);
                shadow::compare(&app, &m.agent, None, &m.config.fallback, true, false, &guard).expect("replay")
            };
            let mut own = spec.clone();
            own.slo_p99_ms = c.sim.slo_p99_ms(i) * TIGHTER;
            let (on_fit, on_own) = (replay(&fitted.app), replay(&own));
            for (got, want) in [(on_fit.fallback, on_own.fallback), (on_fit.agent, on_own.agent)] {
                let what = format!("{}: fitted {got:?} against its own model {want:?}", a.name);
                assert!(got.slo_violations.abs_diff(want.slo_violations) <= 6, "{what}");
                let (g, w) = (got.core_seconds.expect("measured"), want.core_seconds.expect("measured"));
                assert!((g / w - 1.0).abs() <= 0.1, "{what}");
            }
        }
    }

    /// An app the check finds the agent as good for on its fitted model is handed over live:
    /// OFFLINE → ONLINE with the check's numbers, and from the next interval the agent acts
    /// for it.
    #[test]
    fn a_live_app_is_handed_over_once_the_agent_is_as_good_on_its_fitted_model() {
        let mut c = cluster();
        let mut m = manager(&c, ManagerConfig { episode_steps: 20, ..ManagerConfig::default() });
        with_slos(&mut m, &c.sim, 1.0);
        let mut handed: Option<usize> = None;
        for _ in 0..200 {
            let ds = m.interval(&mut c).expect("interval");
            c.advance().expect("advance");
            if let Some(i) = handed {
                assert!(ds[i].agent_acted, "{:?}", ds[i].decision);
                break;
            }
            handed = m.changes.iter().find(|t| t.from == Stage::Offline).map(|t| m.app_index(&t.app).expect("app"));
        }
        let t = m.changes.iter().find(|t| t.from == Stage::Offline).expect("an app handed over");
        assert_eq!(t.to, Stage::Online);
        assert!(t.reason.starts_with("agent earned") && t.reason.contains("SLO-violating intervals"), "{}", t.reason);
    }

    /// Each window's replay starts from the observation its first decision was taken on: at
    /// its clock, from its deployment, with the arrivals of its own decisions and none of the
    /// next window's (they began one interval late, after the window's first decision).
    #[test]
    fn each_windows_replay_starts_at_its_first_decision() {
        let n = 5;
        let mut c = cluster();
        let mut m = manager(&c, ManagerConfig { episode_steps: n, ..ManagerConfig::default() });
        let mut seen = Vec::new();
        for _ in 0..3 * n {
            seen.push(c.observe(0).expect("observe"));
            m.interval(&mut c).expect("interval");
            c.advance().expect("advance");
        }
        let a = &m.apps[0];
        assert_eq!(a.windows, 2, "windows end as their n-th outcome is read");
        assert_eq!(a.recent.len(), 2);
        for (k, r) in a.recent.iter().enumerate() {
            let first = &seen[k * n as usize];
            assert_eq!(r.start_s, first.time_s - first.interval_s, "window {k}");
            assert_eq!(r.start.replicas, first.desired_replicas, "window {k}");
            let rates: Vec<f64> = seen[k * n as usize..(k + 1) * n as usize].iter().map(|o| o.arrival_rate).collect();
            assert_eq!(r.rates, rates, "window {k}");
        }
        let open = a.replay.as_ref().expect("the third window is under way");
        assert_eq!(open.rates.len(), n as usize);
        assert_eq!(open.start_s, seen[2 * n as usize].time_s - seen[2 * n as usize].interval_s);
    }

    /// A window opened while a resize the nodes could not admit leaves the old pods serving
    /// replays from those pods, as the manager's check does (`manager::observed_start`), not
    /// from every pod at the template the cluster had not let the app reach.
    #[test]
    fn a_windows_replay_starts_with_the_pods_a_stuck_resize_left_serving() {
        let mut c = cluster();
        let before = c.sim.observe(1).expect("observe");
        let held = before.replica_counts().ready;
        assert!(held > 0);
        // More CPU a pod than a node has: the old pods go on serving, the new ones pend.
        let cores = (c.sim.config().node_cores * 1000.0) as u64 + 1000;
        let rec = Recommendation {
            replicas: held,
            containers: vec![ContainerResources::guaranteed(
                before.template.name.clone(),
                aware_core::Resources::new(cores, before.template.requests.memory_bytes),
            )],
        };
        c.sim.apply(1, &rec).expect("apply");
        for _ in 0..3 {
            c.sim.advance().expect("advance");
        }
        let first = c.observe(1).expect("observe");
        let mut m = manager(&c, ManagerConfig { episode_steps: 5, ..ManagerConfig::default() });
        m.interval(&mut c).expect("interval");
        let start = &m.apps[1].replay.as_ref().expect("the first window is under way").start;
        assert_eq!(start.outdated.len(), held as usize, "the serving old pods are dropped: {start:?}");
        assert_eq!((start.bound, start.template.requests.cpu_millicores), (Some(0), cores));
        assert_eq!(start.replicas, first.desired_replicas);
    }

    /// A window whose clock went back, or that a pass reached late, is not replayed (its
    /// arrivals would fall at the wrong times), as one with a pass missing is not: the run of
    /// recent windows starts over after it.
    #[test]
    fn a_window_whose_clock_jumps_is_not_replayed() {
        for jump in [-120.0, 90.0] {
            let n = 5;
            let mut c = cluster();
            let mut m = manager(&c, ManagerConfig { episode_steps: n, ..ManagerConfig::default() });
            for k in 0..3 * n {
                if k == n + 2 {
                    c.clock_s = jump;
                }
                m.interval(&mut c).expect("interval");
                c.advance().expect("advance");
            }
            let a = &m.apps[0];
            assert_eq!(a.windows, 2, "jump {jump}");
            assert!(a.recent.is_empty(), "jump {jump}: the second window broke the run");
            assert!(!a.replay.as_ref().expect("the third window").gap, "jump {jump}: the next window is whole");
        }
    }

    /// A handed-over agent that falls behind the fallback's replay of the windows it served
    /// goes back to OFFLINE live, as on the simulator: here one cloned from demonstrations that
    /// scale every resource down as far as a step may, served once the fallback has run long
    /// enough for the app's model to be fitted, with the guard not flooring it to the
    /// fallback's scale-ups.
    #[test]
    fn a_serving_agent_that_falls_behind_the_fallbacks_replay_goes_back_to_offline() {
        let mut c = cluster();
        let config = ManagerConfig { episode_steps: 10, fallback_floor: false, ..ManagerConfig::default() };
        let mut m = manager(&c, config.clone());
        with_slos(&mut m, &c.sim, 1.0);
        for _ in 0..60 {
            m.interval(&mut c).expect("interval");
            c.advance().expect("advance");
        }
        let shrinking = shrinking_agent(&config);
        m.handed = shrinking.frozen();
        m.agent = shrinking;
        serving(&mut m);
        let web = m.apps[0].name.clone();
        for _ in 0..60 {
            m.interval(&mut c).expect("interval");
            c.advance().expect("advance");
            if m.changes().iter().any(|t| t.app == web && t.from == Stage::Serving) {
                break;
            }
        }
        let back = m.changes().iter().find(|t| t.app == web && t.from == Stage::Serving);
        let back =
            back.unwrap_or_else(|| panic!("never left SERVING; last check {:?}", m.apps[0].lifecycle.last_check()));
        assert_eq!(back.to, Stage::Offline, "{}", back.reason);
        assert!(back.reason.contains("fell behind the fallback"), "{}", back.reason);
        // The windows the agent served count for nothing towards the rules failing: the first
        // window of the fallback after the agent's cuts does not hand the app to retraining.
        let (demoted, step) = (m.changes().len(), m.step());
        while m.step() < step + 10 {
            m.interval(&mut c).expect("interval");
            c.advance().expect("advance");
        }
        let retrained =
            m.changes()[demoted..].iter().find(|t| t.app == web && t.reason.starts_with("the rules cannot"));
        assert!(retrained.is_none(), "{retrained:?}");
    }

    /// An app whose latency tail the fitted model does not reproduce (its p99 ten times what
    /// the queueing of its measured costs gives) is not checked on that model: the fallback's
    /// replay of the window it drove violates the SLO far less often than the window did, and
    /// the app stays OFFLINE saying why.
    #[test]
    fn a_model_that_does_not_reproduce_the_fallbacks_window_is_not_trusted() {
        let mut c = Flaky { tail: 10.0, ..cluster() };
        let mut m = LiveManager::new(
            &c.app_names(),
            &Profile::default(),
            crate::agent::LifecycleAgent::fresh_for(&ManagerConfig::default(), 3),
            ManagerConfig { episode_steps: 40, log: true, ..ManagerConfig::default() },
        )
        .expect("manager");
        with_slos(&mut m, &c.sim, 1.0);
        for _ in 0..121 {
            m.interval(&mut c).expect("interval");
            c.advance().expect("advance");
        }
        for a in &m.apps {
            let why = a.lifecycle.last_check().expect("checked");
            assert!(why.contains("does not reproduce it") && why.contains("fitted from the app's metrics"), "{why}");
            assert_eq!(a.lifecycle.stage(), Stage::Offline, "{:?}", m.changes);
        }
    }

    /// Where the rules fail acting (an SLO a fifth of the apps' own: the MPA default violates it in
    /// every interval), the app is handed to the agent to retrain as on the simulator, where
    /// its windows replay on its fitted model (the replay is what hands the agent back should it
    /// do worse); where no window can be replayed (the backend misses a pass in each), the
    /// fallback keeps the app.
    #[test]
    fn where_the_rules_fail_live_the_agent_retrains_only_where_its_windows_replay() {
        let run = |gaps: bool| {
            let mut c = cluster();
            let mut m = manager(&c, ManagerConfig { episode_steps: 20, ..ManagerConfig::default() });
            with_slos(&mut m, &c.sim, 0.2);
            for k in 0..101 {
                c.down = gaps && k % 10 == 9;
                m.interval(&mut c).expect("interval");
                c.advance().expect("advance");
            }
            m
        };
        let rules_failed = |m: &LiveManager| -> Vec<StageChange> {
            m.changes.iter().filter(|t| t.reason.starts_with("the rules cannot serve")).cloned().collect()
        };
        let m = run(false);
        let failed = rules_failed(&m);
        assert!(!failed.is_empty(), "{:#?}", m.changes);
        assert!(failed.iter().all(|t| t.from == Stage::Offline && t.to == Stage::Online), "{failed:#?}");
        let m = run(true);
        assert!(rules_failed(&m).is_empty(), "{:#?}", m.changes);
        assert_eq!(m.stages(), vec![Stage::Offline; 2], "{:#?}", m.changes);
        for a in &m.apps {
            assert!(a.recent.is_empty(), "no window to replay");
        }
    }

    /// The fallback's replay that judges an acting agent live ([`LiveManager::fallback_on_window`])
    /// is run on a model fitted from the app's metrics, which the agent's own operating points
    /// now feed, from the allocation the agent built (its second window): it comes out as the
    /// same replay on the app's own model (SLO-violating intervals within a tenth of the
    /// window, core-seconds within 10 %), for an agent that holds the allocation and for one
    /// that cuts everything.
    #[test]
    fn the_fallbacks_replay_of_a_window_the_agent_served_comes_out_as_on_the_apps_own_model() {
        const TIGHTER: f64 = 0.5;
        let apps = aware_sim::generate_apps(2, 7, 86_400.0);
        let config = ManagerConfig { episode_steps: 20, fallback_floor: false, ..ManagerConfig::default() };
        let mut starts = Vec::new();
        for shrinking in [false, true] {
            let mut c = cluster();
            let mut m = manager(&c, config.clone());
            with_slos(&mut m, &c.sim, TIGHTER);
            for _ in 0..61 {
                m.interval(&mut c).expect("interval");
                c.advance().expect("advance");
            }
            if shrinking {
                let agent = shrinking_agent(&config);
                m.handed = agent.frozen();
                m.agent = agent;
            }
            serving(&mut m);
            let (windows, acted): (Vec<u64>, Vec<u64>) =
                m.apps.iter().map(|a| (a.windows, a.counts.agent_actions)).unzip();
            // Two windows: the second's replay starts from the allocation the agent built.
            while m.apps.iter().zip(&windows).any(|(a, w)| a.windows < *w + 2) {
                m.interval(&mut c).expect("interval");
                c.advance().expect("advance");
            }
            for (i, spec) in apps.iter().enumerate() {
                let a = &m.apps[i];
                assert!(a.counts.agent_actions >= acted[i] + 39, "{}: the agent served the windows", a.name);
                let served = EpisodeOutcome { mean_reward: 0.0, slo_violations: 0, intervals: 20, core_seconds: None };
                let fitted = m.fallback_on_window(i, &served).expect("a model").expect("a replay").fallback;
                let model = m.model(i).expect("a model").expect("a window");
                let r = a.recent.back().expect("the window");
                starts.push((r.start.replicas, r.start.template.limits));
                let mut own = spec.clone();
                own.slo_p99_ms = c.sim.slo_p99_ms(i) * TIGHTER;
                let app =
                    r.shadow_app(&own, &a.profile, &model.sim, a.deployed.as_ref(), model.seed(a.recent.len() - 1));
                let truth = shadow::fallback_with_guard(&app, &m.config.fallback, &m.config.guard_config(&a.profile))
                    .expect("replay");
                let what =
                    format!("{} (shrinking: {shrinking}): fitted {fitted:?} against its own model {truth:?}", a.name);
                assert!(fitted.slo_violations.abs_diff(truth.slo_violations) <= 2, "{what}");
                let (f, t) = (fitted.core_seconds.expect("measured"), truth.core_seconds.expect("measured"));
                assert!((f / t - 1.0).abs() <= 0.1, "{what}");
            }
        }
        // The agent that cuts everything left the second window another start than the one
        // that holds.
        assert_ne!(starts[..2], starts[2..], "the replays start from what each agent built");
    }

    #[test]
    fn with_bootstrapping_the_fallback_acts_and_the_agent_learns_offline() {
        let mut c = cluster();
        let mut m = manager(&c, ManagerConfig::default());
        assert_eq!(m.stages(), vec![Stage::Offline; 2]);
        for _ in 0..5 {
            let ds = m.interval(&mut c).expect("interval");
            assert!(ds.iter().all(|d| !d.agent_acted && d.decision.acting_policy == "mpa"));
            c.advance().expect("advance");
        }
        // Each interval after the first ends one transition per app.
        assert_eq!(m.agent.stored(), 8);
        assert_eq!(m.agent.updates(), 0, "fewer transitions than a batch");
        assert_eq!(m.take_decisions().len(), 10);
        for _ in 0..30 {
            m.interval(&mut c).expect("interval");
            c.advance().expect("advance");
        }
        assert!(m.agent.updates() > 0, "the agent learned nothing offline from the fallback");
    }

    /// A decider restarted after an agent cut an app's CPU limit first observes the cut; told
    /// what the workload declares, it hands the app to the fallback (MPA, which never sets CPU
    /// limits) with the limit as declared and says so; not told, it has nothing to restore to.
    #[test]
    fn the_declared_template_not_the_first_observation_is_what_the_fallback_gets_back() {
        let first_decision = |declare: bool| {
            let mut c = cluster();
            let deployed = c.observe(0).expect("observe").template;
            let mut cut = deployed.clone();
            cut.limits.cpu_millicores = (deployed.limits.cpu_millicores / 4).max(100);
            cut.requests.cpu_millicores = cut.requests.cpu_millicores.min(cut.limits.cpu_millicores);
            let replicas = c.observe(0).expect("observe").desired_replicas;
            c.apply(0, &Recommendation { replicas, containers: vec![cut.clone()] }).expect("applied");
            for _ in 0..6 {
                c.advance().expect("advance");
            }
            assert_eq!(c.observe(0).expect("observe").template.limits.cpu_millicores, cut.limits.cpu_millicores);
            let mut m = manager(&c, ManagerConfig::default());
            if declare {
                m.set_declared(0, deployed.clone());
            }
            let d = m.interval(&mut c).expect("interval").remove(0);
            assert_eq!(d.decision.acting_policy, "mpa");
            (d, deployed.limits.cpu_millicores, cut.limits.cpu_millicores)
        };
        let (told, deployed, cut) = first_decision(true);
        let rec = told.recommendation.expect("the fallback proposes");
        assert_eq!(rec.containers[0].limits.cpu_millicores, deployed);
        assert!(
            told.decision.guard.contains(&format!("restored: cpu millicores {cut} → {deployed}")),
            "{}",
            told.decision.guard
        );
        let (untold, _, _) = first_decision(false);
        assert_eq!(untold.recommendation.expect("the fallback proposes").containers[0].limits.cpu_millicores, cut);
        assert!(!untold.decision.guard.contains("restored"), "{}", untold.decision.guard);
    }

    /// A template that declares no CPU (a LimitRange sets it) leaves the pods' CPU as the
    /// deployment's; what it declares replaces what was observed.
    #[test]
    fn a_resource_the_template_leaves_unset_stays_as_observed() {
        let observed = ContainerResources {
            name: "web".into(),
            requests: aware_core::Resources::new(250, 256 << 20),
            limits: aware_core::Resources::new(500, 512 << 20),
        };
        let declared = ContainerResources {
            name: "web".into(),
            requests: aware_core::Resources::new(0, 512 << 20),
            limits: aware_core::Resources::new(0, 1 << 30),
        };
        let got = with_declared(&observed, &declared);
        assert_eq!((got.requests.cpu_millicores, got.limits.cpu_millicores), (250, 500));
        assert_eq!((got.requests.memory_bytes, got.limits.memory_bytes), (512 << 20, 1 << 30));
    }

    /// The CPU headroom is the simulated manager's (the experiments' reference): the live
    /// decider says so instead of serving without it.
    #[test]
    fn the_live_decider_refuses_a_cpu_headroom() {
        let c = cluster();
        let config = ManagerConfig { headroom: 0.05, ..ManagerConfig::default() };
        let err = LiveManager::new(&c.app_names(), &Profile::default(), crate::manager::fresh_agent(3), config)
            .err()
            .expect("refused");
        assert!(err.to_string().starts_with("headroom: the live decider adds no CPU headroom"), "{err}");
    }

    /// Bootstrapping a residual agent, the fallback's decisions wait for their outcomes as the
    /// action 0 (no change of the fallback's proposal), whatever they changed; the state they
    /// were taken in holds that proposal, as the agent reads it.
    #[test]
    fn a_residual_agent_learns_the_fallbacks_decisions_as_no_change() {
        let mut c = cluster();
        let mut m = manager(&c, ManagerConfig { residual: true, ..ManagerConfig::default() });
        let (mut changed, mut read) = (0, 0);
        for _ in 0..40 {
            let before: Vec<_> = (0..2).map(|i| c.target(i).expect("target")).collect();
            let ds = m.interval(&mut c).expect("interval");
            for (d, (replicas, template)) in ds.iter().zip(&before) {
                if let Some(rec) = &d.recommendation {
                    changed += (rec.replicas != *replicas || rec.containers[0].limits != template.limits) as u32;
                }
            }
            for (a, (d, (replicas, template))) in m.apps.iter().zip(ds.iter().zip(&before)) {
                let (Some(p), Some(rec)) = (a.pending.as_ref(), &d.recommendation) else { continue };
                assert!(p.action.iter().all(|x| *x == 0.0), "{:?}", p.action);
                let l = rec.containers[0].limits;
                let (t, r) = (template.limits, *replicas);
                let asked = aware_env::coordinates(
                    AGENT_ACTIONS,
                    &a.decoder.bounds,
                    (l.cpu_millicores, l.memory_bytes, rec.replicas),
                    (t.cpu_millicores, t.memory_bytes, r),
                )
                .unwrap();
                assert_eq!(p.state.len(), aware_env::STATE_DIM + 3);
                assert_eq!(p.state[aware_env::STATE_DIM..], asked[..]);
                read += asked.iter().any(|x| *x != 0.0) as u32;
            }
            c.advance().expect("advance");
        }
        assert!(changed > 0, "the fallback changed nothing in 40 intervals: the test shows nothing");
        assert!(read > 0, "no proposal the agent read moved anything");
        assert!(m.agent.stored() >= 70);
        // An agent that does not read the proposal is refused, naming why.
        let reads_less = crate::manager::fresh_agent(3);
        let config = ManagerConfig { residual: true, ..ManagerConfig::default() };
        let err = LiveManager::new(&c.app_names(), &Profile::default(), reads_less, config).err().unwrap();
        assert!(err.to_string().contains("the fallback's proposal"), "{err}");
    }

    #[test]
    fn an_unavailable_backend_makes_the_fallback_hold_and_the_agent_resumes_after() {
        let mut c = cluster();
        let mut m = manager(&c, ManagerConfig::default());
        serving(&mut m);
        assert_eq!(m.stages(), vec![Stage::Serving; 2]);
        let mut acted = Vec::new();
        for step in 0..12 {
            c.down = (4..8).contains(&step);
            let ds = m.interval(&mut c).expect("an unavailable backend is not an error");
            acted.push(ds.iter().all(|d| d.agent_acted));
            if c.down {
                for d in &ds {
                    assert!(d.recommendation.is_none(), "nothing to act on: the allocation is kept");
                    assert_eq!(d.decision.acting_policy, "mpa");
                    assert!(d.decision.observation.is_none());
                    assert!(d.decision.guard.contains("backend unavailable"), "{}", d.decision.guard);
                }
            }
            c.advance().expect("advance");
        }
        assert_eq!(acted, [true, true, true, true, false, false, false, false, true, true, true, true]);
        let report = m.report();
        assert!(report.iter().all(|r| r.unavailable == 4 && r.counts.agent_actions == 8));
    }

    #[test]
    fn no_transition_spans_a_gap_or_an_outcome_read_late() {
        let mut c = cluster();
        let mut m = manager(&c, ManagerConfig::default());
        let mut stored = Vec::new();
        for step in 0..9 {
            c.down = (3..5).contains(&step);
            m.interval(&mut c).expect("interval");
            stored.push(m.agent.stored());
            c.advance().expect("advance");
            if step == 6 {
                // Three intervals pass unseen: the decision of step 6 is not step 7's outcome.
                for _ in 0..3 {
                    c.advance().expect("advance");
                }
            }
        }
        // Two apps: a transition each per interval after the first, none across the outage
        // (steps 3–4) or into the first interval after it (5), none across the late read (7).
        assert_eq!(stored, [0, 2, 4, 4, 4, 4, 6, 6, 8]);
    }

    #[test]
    fn a_refused_recommendation_is_logged_and_not_learned_from() {
        let mut c = cluster();
        let mut m = manager(&c, ManagerConfig::default());
        m.interval(&mut c).expect("interval");
        c.advance().expect("advance");
        c.refuse = true;
        let ds = m.interval(&mut c).expect("a refused recommendation is not an error");
        assert!(ds.iter().all(|d| d.recommendation.is_none() && d.decision.guard.contains("not applied")), "{ds:?}");
        let logged = m.take_decisions();
        assert!(logged.iter().rev().take(2).all(|d| d.guard.contains("not applied")), "{logged:?}");
        c.advance().expect("advance");
        c.refuse = false;
        let before = m.agent.stored();
        m.interval(&mut c).expect("interval");
        assert_eq!(m.agent.stored(), before, "the refused decision closed no transition");
    }

    #[test]
    fn an_edited_profile_keeps_the_lifecycle_and_the_counts() {
        let mut c = cluster();
        let mut m = manager(&c, ManagerConfig::default());
        serving(&mut m);
        for _ in 0..3 {
            m.interval(&mut c).expect("interval");
            c.advance().expect("advance");
        }
        let changes = m.changes().len();
        let mut edited = Profile::default();
        edited.bounds.max_replicas = 7;
        m.set_profile(0, &edited).expect("edit");
        assert_eq!(m.app_profile(0), Some(&edited));
        assert_eq!(m.stages()[0], Stage::Serving);
        assert_eq!(m.changes().len(), changes, "an edit is not a stage change");
        assert_eq!(m.report()[0].counts.agent_actions, 3);
        m.interval(&mut c).expect("interval under the edited profile");
        assert_eq!(m.report()[0].counts.agent_actions, 4);
    }

    #[test]
    fn a_frozen_clock_is_stale_and_the_fallback_acts_on_it() {
        let mut c = cluster();
        let mut m = manager(&c, ManagerConfig::default());
        serving(&mut m);
        // The backend answers, but with the same measurements every interval (no advance).
        let mut verdicts = Vec::new();
        for _ in 0..5 {
            let ds = m.interval(&mut c).expect("interval");
            verdicts.push(ds[0].decision.guard.clone());
        }
        assert!(verdicts[0].starts_with("passed") || verdicts[0].starts_with("limited"), "{verdicts:?}");
        assert!(verdicts[4].contains("stale"), "{verdicts:?}");
    }

    #[test]
    fn serving_degrades_to_online_on_rewards_alone() {
        let mut c = cluster();
        let config = ManagerConfig { episode_steps: 5, ..ManagerConfig::default() };
        let mut m = manager(&c, config);
        // A SERVING lifecycle held to a reference no allocation can earn.
        let state = LifecycleState::fresh(Stage::Serving, Some(1e6));
        let web = m.apps[0].name.clone();
        // Every app: none learns from the fallback meanwhile.
        let states: Vec<_> = m.apps.iter().map(|a| (a.name.clone(), state.clone())).collect();
        m.restore_lifecycles(&states, "test");
        let stored = m.agent.stored();
        for _ in 0..15 {
            m.interval(&mut c).expect("interval");
            c.advance().expect("advance");
        }
        let change = m.changes().iter().find(|c| c.app == web && c.from == Stage::Serving).expect("degraded");
        assert_eq!(change.to, Stage::Online);
        // Retraining: the agent learns, offline, from what it does there.
        assert!(m.apps[0].lifecycle.retraining());
        for _ in 0..3 {
            m.interval(&mut c).expect("interval");
            c.advance().expect("advance");
        }
        assert!(m.agent.stored() > stored, "{} → {}", stored, m.agent.stored());
    }

    /// Under high stakes an ONLINE app's windows are the fallback's, and say nothing of the
    /// agent: it is judged by its greedy run on each window's traffic replayed on the app's
    /// fitted model, and promoted on that while the fallback acts. Where the model does not
    /// reproduce the fallback's window (a latency tail ten times what it gives), there is no
    /// replay to judge it on and nothing is promoted. Without high stakes the acting agent's
    /// windows promote it.
    #[test]
    fn under_high_stakes_an_online_app_is_promoted_only_on_its_replays() {
        // Whether an app reached SERVING, and whether the agent acted before one did.
        let promoted = |high_stakes: bool, tail: f64| {
            let mut c = Flaky { tail, ..cluster() };
            let mut profile = Profile::default();
            // Any two windows converge.
            (profile.lifecycle.reward_window, profile.lifecycle.t_serving) = (2, 10.0);
            profile.high_stakes = high_stakes;
            let config = ManagerConfig { episode_steps: 5, log: true, ..ManagerConfig::default() };
            let agent = crate::agent::LifecycleAgent::fresh_for(&config, 3);
            let mut m = LiveManager::new(&c.app_names(), &profile, agent, config).expect("manager");
            with_slos_on(&mut m, &c.sim, 1.0, &profile);
            let state = LifecycleState::fresh(Stage::Online, None);
            let states: Vec<_> = m.apps.iter().map(|a| (a.name.clone(), state.clone())).collect();
            m.restore_lifecycles(&states, "test: online");
            let mut acted_before = false;
            for _ in 0..40 {
                let decided = m.interval(&mut c).expect("interval");
                acted_before |= decided.iter().any(|d| d.agent_acted && d.decision.stage != Stage::Serving);
                c.advance().expect("advance");
            }
            (m.changes().iter().any(|c| c.to == Stage::Serving), acted_before)
        };
        assert_eq!(promoted(false, 1.0), (true, true));
        assert_eq!(promoted(true, 1.0), (true, false), "promoted on the agent's replays, the fallback acting");
        assert_eq!(promoted(true, 10.0), (false, false), "no replay believed: nothing promoted");
    }

    /// A retraining DDPG agent explores; on a live cluster it does so only where the operator
    /// opted in. Without it the fallback serves the app, the agent learns from it offline, and
    /// the fallback's windows neither promote the app nor count towards giving up.
    #[test]
    fn a_retraining_agent_explores_live_only_with_the_operators_opt_in() {
        let run = |live_exploration: bool| {
            let mut c = cluster();
            let mut profile = Profile::default();
            // Any two windows converge; retraining gives up after two.
            (profile.lifecycle.reward_window, profile.lifecycle.t_serving) = (2, 10.0);
            profile.lifecycle.max_retrain_episodes = 2;
            let config = ManagerConfig { episode_steps: 5, live_exploration, ..ManagerConfig::default() };
            let agent = crate::agent::LifecycleAgent::fresh_for(&config, 3);
            let mut m = LiveManager::new(&c.app_names(), &profile, agent, config).expect("manager");
            let state = LifecycleState { retraining: true, ..LifecycleState::fresh(Stage::Online, None) };
            let states: Vec<_> = m.apps.iter().map(|a| (a.name.clone(), state.clone())).collect();
            m.restore_lifecycles(&states, "test: retraining");
            assert!(m.apps.iter().all(|a| a.lifecycle.retraining()));
            let stored = m.agent.stored();
            let (mut agent_acted, mut verdict) = (false, String::new());
            for _ in 0..12 {
                let ds = m.interval(&mut c).expect("interval");
                agent_acted |= ds.iter().any(|d| d.agent_acted);
                verdict = ds[0].decision.guard.clone();
                c.advance().expect("advance");
            }
            (agent_acted, m.agent.stored() > stored, m.changes().to_vec(), verdict)
        };
        let (acted, learned_offline, changes, verdict) = run(false);
        assert!(verdict.contains("--explore-while-retraining"), "the decision says why: {verdict}");
        assert!(!acted, "the fallback served every retraining app");
        assert!(learned_offline, "the agent learned from the fallback's transitions");
        let moved = |changes: &[StageChange]| changes.iter().any(|c| c.from == Stage::Online);
        assert!(!moved(&changes), "no stage moved on the fallback's windows: {changes:?}");
        let (acted, _, changes, _) = run(true);
        assert!(acted, "opted in, the retraining agent acted");
        // Exploring, its windows count: two without converging (t_serving 10 converges any
        // two, so these were promoted) or giving up.
        assert!(moved(&changes), "the acting agent's windows moved its stage: {changes:?}");
    }
}
