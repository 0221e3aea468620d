//! The lifecycle manager as a driver of the one rollout loop: each interval, per application,
//! the stage decides who proposes (the fallback or the agent), the guard checks the observation
//! and limits the proposal, and the outcome feeds the agent the way the stage allows — offline
//! from the fallback's transitions (TD3+BC for DDPG, cloning for PPO) while bootstrapping,
//! while retraining (after SERVING degraded, or where the rules failed) online from its own
//! exploring actions (DDPG) or offline from its own (PPO), online from its own when
//! `online_learning` is on, or not at all (ONLINE after bootstrapping, and SERVING). A
//! retraining app that explored is judged greedily against the fallback's replay at the end
//! of each episode, as a bootstrapping one is.
//! One agent learns for every application (one policy, states normalised per app). An app the
//! agent acts for without learning acts with the agent as it was when the app was handed over
//! (frozen then, [`aware_agents::FrozenPolicy`]): the one the bootstrapping check passed, not
//! what the shared agent becomes as it goes on learning from the apps still bootstrapping.

use std::borrow::Cow;

use aware_agents::{Experience, FrozenPolicy};
use aware_core::{Action, ContainerResources, MIB, Observation, Recommendation, StepInfo};
use aware_env::Control;
use aware_env::{ActionDecoder, ActionKind};
use aware_lab::LabError;
use aware_lab::embed::{EmbedRefusal, WorkloadEmbedding};
use aware_lab::policy::{Policy, PolicyName};
use aware_lab::rollout::{Arena, Driver, EpisodeStart, Interval};
use aware_lab::workload::Workload;
use aware_sim::{CONTAINER, DeploymentState};
use serde::Serialize;

use crate::agent::{Learner, LifecycleAgent, act_served, acting_policy};
use crate::algorithm::{AppLifecycle, EpisodeOutcome, LifecycleState, ShadowComparison, Transition};
use crate::decision::{self, Decision, Seen, Set};
use crate::guard::{Guard, GuardConfig, Usage, within_bounds};
use crate::shadow::{self, CostMeter, ShadowApp};
use crate::stage::{Stage, StageChange};

/// How the manager runs.
#[derive(Debug, Clone)]
pub struct ManagerConfig {
    /// Intervals per episode (AWARE's DDPG: 100).
    pub episode_steps: u64,
    /// TD3+BC updates per application-interval learned offline.
    pub offline_updates: usize,
    /// TD3+BC's α for offline learning: the weight of the critic's term against behaviour
    /// cloning (λ = α / mean |Q|). The paper's 2.5 assumes a critic trained for 10⁶ updates;
    /// after the few thousand a bootstrapping episode allows, its gradient still points
    /// wherever the critic is wrong, and at 2.5 the actor asked for +20 % CPU in states where
    /// the fallback held (measured on `aware run --apps 4`, the shadow check's states). At 0.5
    /// it reproduces the fallback's holds to within 0.01 while still using the critic.
    /// Infinite: no behaviour term (the plain agent on the fallback's data, for comparison).
    pub bc_alpha: f32,
    /// Keep the fallback acting while the agent (re)trains: ONLINE learns offline like
    /// OFFLINE, and only SERVING lets the agent act. (Without it, an app retraining lets the
    /// agent act and learns as [`ManagerConfig::learning`] says: a DDPG agent online from its
    /// exploring actions, a PPO agent offline.) `None`: the profile's `high_stakes` (false by
    /// default).
    pub high_stakes: Option<bool>,
    /// Exploration noise (σ in the [−1, 1] action box) while ONLINE. A bootstrapped agent
    /// starts near the fallback and learns online from its own greedy actions and the
    /// fallback's stored ones (TD3+BC keeps both in the buffer). Measured on `aware demo --apps 3
    /// --steps 2000`: σ 0.05 made every online agent fall behind MPA within 2–4 episodes, with or
    /// without online updates (the noise, compounded by relative actions, is what cost); at 0
    /// AWARE had 415 SLO-violating intervals and 2.354 M core-s against MPA's 465 and 2.399 M.
    pub online_noise_sigma: f32,
    /// Exploration noise (σ in the [−1, 1] action box, not scaled by the agent's ε) of a DDPG
    /// agent while it retrains ([`AppLifecycle::retraining`]: SERVING degraded, or the rules
    /// failed). The workload moved away from what the agent learned, or from what the
    /// fallback's rules can serve: without noise it learns
    /// only from the fallback's actions and its own clone of them, and never tries an
    /// allocation the rules never chose (measured on `aware experiment fig9`, see
    /// `docs/results/lifecycle.md`).
    pub retrain_noise_sigma: f32,
    /// Gradient steps a DDPG agent takes for each transition of an app retraining (1: DDPG's
    /// one per interval; 0 counts as 1). More learn a changed workload from fewer intervals:
    /// at 4 (the default) `aware experiment fig9 --quick` seed 31 ended 17.6 % below the
    /// reference's reward instead of 31.7 %, seed 30 23.1 % instead of 22.4 %
    /// (`docs/results/lifecycle.md`, session 53).
    pub retrain_updates: usize,
    /// Keep TD3+BC's behaviour term while learning ONLINE, towards the agent's own and the
    /// fallback's stored actions, so online updates refine rather than replace the policy.
    pub online_bc: bool,
    /// Recent episodes' traffic the bootstrapping check runs the agent against the fallback on
    /// (OFFLINE → ONLINE needs, over all of them, t_online of the fallback's reward, no more
    /// SLO-violating intervals and, with as many, no more core-seconds than `max(1, 2 −
    /// t_online)` times the fallback's). One episode's traffic let agents through that fell behind on
    /// the next: measured on `aware experiment fig10 --quick`.
    pub shadow_episodes: usize,
    /// Whether the acting agent keeps learning from its own transitions while ONLINE. Off by
    /// default: measured on `aware run --apps 4 --seed 1 --steps 2000`, online updates made
    /// the agents that had passed the bootstrapping check fall behind MPA within two episodes
    /// (AWARE 1,322 SLO-violating intervals against MPA's 1,117); without them AWARE had 358 at
    /// 8 % more core-seconds. The agent then learns, and relearns, offline from the fallback,
    /// and, while retraining after SERVING degraded ([`AppLifecycle::retraining`]), offline from
    /// its own transitions on the changed workload. Those go into the one shared buffer (the
    /// replay, or PPO's demonstrations) beside the fallback's, so later bootstrapping of any app
    /// learns from them too; N apps retraining at once train the shared agent N × 4 times an
    /// interval, which moves the policy of the apps still serving.
    /// The `no-bootstrap` variant turns it on (RL without bootstrapping learns online).
    pub online_learning: bool,
    /// The rule-based autoscaler that bootstraps the agent and stands in for it.
    pub fallback: PolicyName,
    /// Bootstrapping on or off; `None`: as the profile says (the `no-bootstrap` variant sets
    /// it off).
    pub bootstrapping: Option<bool>,
    /// Whether SERVING may hand back for retraining (off: the `no-retrain` variant).
    pub may_retrain: bool,
    /// Hold every app in this stage for the whole run, with no stage checks: ONLINE trains an
    /// agent from scratch (the `converged` reference), SERVING evaluates a trained one.
    pub fixed_stage: Option<Stage>,
    /// Ask the fallback every interval the agent acts and raise the agent's proposal to the
    /// fallback's wherever the fallback scales up ([`Guard::floor`]): the agent saves where the
    /// rules would hold or shrink, never where they react to pressure. The fallback then sees
    /// every observation, so its history (HPA's scale events and stabilisation window, VPA's
    /// histograms) is current when it takes over; HPA records its own proposals as scale
    /// events even when the floor did not apply them, as it would on a cluster where another
    /// controller overrode it. With the floor, a cut the measured usage does not fit (fewer
    /// cores than in use, or memory below the largest working set, plus VPA's 15 % margin) is
    /// undone too ([`Guard::fit_usage`]), and an app with no ready pod is handed to the
    /// fallback ([`GuardConfig::refuse_not_serving`]): the rules' net under the agent's
    /// proposals, off for the policy alone (`no-bootstrap`, the `converged` reference).
    pub fallback_floor: bool,
    /// The algorithm of the fresh agents the runs and experiments start from (an agent
    /// handed to the manager, a checkpoint's or a meta-learner's, keeps its own).
    pub agent: Learner,
    /// Keep the decision log (with attributions for the agent's actions) and every app's
    /// transitions for the caller, drained with [`Manager::take_log`] (to a store).
    pub log: bool,
    /// The agent's action is a change of the fallback's proposal of the interval (asked every
    /// interval, before the agent acts) instead of the current allocation: an action inside
    /// the dead band is the fallback's own decision (residual RL), and the fallback's own
    /// intervals are recorded as the action 0. The agent reads that proposal beside the state
    /// ([`ASK_FEATURES`]; an agent of the state encoder's width alone is refused). The
    /// bootstrapping check's shadow runs and the live decider act so too. An agent or
    /// transitions written with one setting and read with the other would mean other
    /// allocations, so a checkpoint records it and a run with the other
    /// setting sets it aside, and a residual run's episodes, decisions and stage changes are
    /// stored as the agent `aware-residual` ([`crate::record::RESIDUAL_AGENT`]). No command
    /// sets it but the experiments' `converged` reference.
    pub residual: bool,
    /// Taken off the reward the agent *learns* from in every SLO-violating interval (reports
    /// keep the reward as it is): a Lagrange multiplier on the violations.
    pub violation_price: f32,
    /// The CPU of the agent's proposals raised by this fraction before the guard sees them: a
    /// safety margin, as VPA's recommender adds 15 % to its estimate, kept out of the origin
    /// the agent's next action starts from ([`Headroom`]). 0 by default, and no command sets
    /// it: the experiments' `converged` reference chooses its own on validation traffic
    /// ([`crate::converged::Training::headrooms`]) and serves greedily with it. The action
    /// recorded for learning is measured to the raised CPU. Applied by [`Manager`] only: the
    /// live decider refuses a configuration with it, and the bootstrapping check's shadow runs
    /// act without it.
    pub headroom: f32,
    /// Whether an exploring agent's decreases of replicas and CPU go unheld by the guard's
    /// downscale stabilisation window ([`Guard::set_exploring`]; memory is held either way).
    /// Off by default: AWARE, retraining on a cluster it serves, keeps the window, which
    /// costs core-seconds and saves OOM kills and dropped requests (measured both ways in
    /// `docs/results/lifecycle.md`, session 59). On for the experiments' `converged`
    /// reference while it trains: trained "with unlimited, unsafe training", it must not be
    /// crippled by a window that walks an exploring allocation up (each step up acting at
    /// once, each step down held at the highest of the last 20 proposals).
    pub unheld_exploration: bool,
    /// Whether the agent may act exploring on a live cluster (the live decider, `aware
    /// controller --explore-while-retraining`): a DDPG agent retraining perturbs its actions
    /// (σ `retrain_noise_sigma`, under the guard and the fallback's floor) to learn what the
    /// rules it learned from never tried. Off by default: where the agent would explore, the
    /// fallback serves the app instead (as under `high_stakes`) and the agent learns offline
    /// from it, judged by its greedy run on each window's replay on the app's fitted model
    /// ([`crate::fit`]) until it converges there. The simulator's manager
    /// ignores it: exploring there costs nothing real.
    pub live_exploration: bool,
    /// Whether a DDPG agent retraining explores by probes around its greedy path ([`Probe`]):
    /// each interval's noise acts for that interval only (the next action is measured from
    /// the path, not from where the noise left the app), and the stabilisation window holds
    /// cuts of the path, not the probe's way back to it. Without it the noise compounds
    /// through the relative actions and the window ratchets it up (each step up acting at
    /// once, each step down held at the highest of the last 20 proposals): the allocation
    /// climbs towards the bounds' corner while retraining. Off by default, and set by no
    /// command: measured in session 63 (`docs/results/lifecycle.md`) it saved core-seconds and
    /// dropped requests at about as many SLO violations over fig9's scenarios, but on
    /// `aware run --apps 4 --seed 6 --steps 2000` one retraining app's probe grew a
    /// one-replica pod to 4 cores, the pod could not be placed again, and it stayed pending
    /// under the fallback for 700 intervals (758 violations against 129; 144 since session
    /// 64's guard spreads an unplaceable app over smaller pods, [`crate::guard::Guard::roll_back_unplaced`],
    /// against 129 without probes, and still worse on fig9's seed 40). Not for the
    /// experiments' `converged` reference, whose window is off
    /// ([`ManagerConfig::unheld_exploration`]). Before switching it on: the action recorded
    /// is measured from the path, which the agent's state does not show (it shows where the
    /// probe left the app), so the critic reads action 0 at an allocation up to one probe
    /// away from the one it meant. Measuring it from the allocation the state shows instead
    /// was tried in session 64 and did worse: over fig9's eight scenarios on seed 40 10,545
    /// SLO-violating intervals against 7,901 (retraining learned to cut where the payload
    /// grew), on seed 46 a trade (8,146 against 7,799 at 13 % fewer core-seconds), and
    /// `aware run --seed 6` 265 against 144 (`docs/results/lifecycle.md`, session 64).
    pub retrain_probes: bool,
}

impl ManagerConfig {
    /// Whether the fallback keeps acting while the agent (re)trains (as resolved: the caller's
    /// choice, else false; the manager resolves `None` to the profile's when it starts).
    pub fn is_high_stakes(&self) -> bool {
        self.high_stakes.unwrap_or(false)
    }

    /// Why the fallback cannot stand in for the agent, if it cannot: it acts when the agent's
    /// input cannot be trusted (NaN, missing or stale metrics) and while the agent is not yet
    /// as good, so it must be a rule that needs no learning, not another learned policy.
    pub fn fallback_refusal(&self) -> Option<String> {
        matches!(self.fallback, PolicyName::Rl(_)).then(|| {
            format!(
                "{} is a learned policy; the fallback stands in whenever the agent cannot be trusted and must be a rule-based autoscaler (hpa, vpa, mpa, threshold, aimd, static, static-peak or fixed:…)",
                self.fallback
            )
        })
    }

    /// The guard for an app with `profile` under this configuration: the profile's limits, and,
    /// with the floor, the rules that need the fallback watching ([`GuardConfig::for_agent`]);
    /// HPA's scale-up point where the fallback scales replicas by HPA (`hpa`, `mpa`).
    pub(crate) fn guard_config(&self, profile: &aware_core::Profile) -> GuardConfig {
        let hpa_target =
            matches!(self.fallback, PolicyName::Hpa | PolicyName::Mpa).then_some(profile.targets.cpu_utilisation);
        GuardConfig::for_agent(&profile.guard, self.fallback_floor, hpa_target)
    }

    /// How the agent learns from the outcome of an interval decided in `stage` (`retraining`:
    /// [`AppLifecycle::retraining`]) by `agent`'s algorithm. The manager and the live decider
    /// both ask this.
    /// - Offline from the fallback's transitions while bootstrapping (and while retraining in
    ///   high-stakes mode, where the fallback acts).
    /// - A DDPG agent retraining learns online from its own exploring actions (plain DDPG, no
    ///   behaviour term: the behaviour in its buffer is the rules' and its clone of them, which
    ///   is what stopped serving). Offline updates from its own greedy actions, as until session
    ///   52, only ever reinforced what it already did.
    /// - A PPO agent retraining clones its own transitions offline (what acted, the fallback's
    ///   scale-ups included): it explores only by sampling, and samples only where it learns
    ///   online.
    /// - An agent that learns online (`online_learning`) does so, TD3+BC's term kept with
    ///   `online_bc`.
    pub(crate) fn learning(&self, agent: Learner, stage: Stage, retraining: bool) -> Learning {
        let bc = || self.online_bc.then_some(self.bc_alpha).filter(|a| a.is_finite());
        match stage {
            Stage::Offline => Learning::Offline,
            Stage::Online if self.is_high_stakes() => Learning::Offline,
            Stage::Online if self.online_learning => Learning::Online { bc: bc() },
            Stage::Online if retraining && agent == Learner::Ddpg => Learning::Online { bc: None },
            Stage::Online if retraining => Learning::Offline,
            _ => Learning::None,
        }
    }

    /// Whether the agent may propose for an app in `stage`: in SERVING, and in ONLINE unless
    /// high stakes keep the fallback acting there.
    pub(crate) fn agent_acts(&self, stage: Stage) -> bool {
        match stage {
            Stage::Serving => true,
            Stage::Online => !self.is_high_stakes(),
            Stage::Initialized | Stage::Offline => false,
        }
    }

    /// Where an agent's action acts from for an app this interval ([`ActingFrom`]): floored
    /// under the fallback's proposal `ask` and fitted to the usage `obs` measures when the
    /// fallback's floor is on, with this config's headroom.
    pub(crate) fn acting_from<'a>(
        &self,
        decoder: &'a ActionDecoder,
        from: &'a ContainerResources,
        from_replicas: u32,
        ask: Option<&'a Recommendation>,
        ceiling: Option<&'a Recommendation>,
        obs: &'a Observation,
    ) -> ActingFrom<'a> {
        ActingFrom {
            decoder,
            from,
            from_replicas,
            floor: if self.fallback_floor { ask } else { None },
            ceiling: if self.fallback_floor { ceiling } else { None },
            usage: if self.fallback_floor { Usage::of(obs) } else { None },
            obs,
            headroom: self.headroom,
        }
    }

    /// The fallback's proposal `ask` as the guard's ceiling measures an agent against it
    /// ([`crate::guard::ceiling_reference`]: what `fallback` does not set at the `deployed`
    /// allocation, where it is known), where the fallback floors the agent and the ceiling is
    /// not `lifted` for the app ([`AppLifecycle::ceiling_lifted`]); `None` elsewhere.
    ///
    /// Where the rules have failed, what they propose is no yardstick: under a heavier payload
    /// (fig9's `payload-up`, `aware run --apps 4 --seed 30 --steps 2400 --scenario
    /// payload-up@1500`) the MPA default violated the SLO in every interval, and the agent
    /// retraining under a ceiling over it violated in 2,626 app-intervals against 1,538
    /// without one (at 0.89 M core-seconds against 2.43 M; MPA: 3,615 at 0.86 M).
    pub(crate) fn ceiling(
        &self,
        fallback: &mut Policy,
        deployed: Option<&(u32, ContainerResources)>,
        ask: Option<&Recommendation>,
        lifted: bool,
        bounds: &aware_core::Bounds,
    ) -> Option<Recommendation> {
        let ask = ask.filter(|_| self.fallback_floor && !lifted)?;
        Some(crate::guard::ceiling_reference(ask, fallback.recommender().scope(), deployed, bounds))
    }

    /// [`ManagerConfig::guard_config`] for a replay that judges the agent of an app for which
    /// the rules have failed (`rules_failed`) or not: no ceiling over rules that have failed it,
    /// so that a greedy replay shows what growth beyond them would do, the evidence
    /// [`AppLifecycle::ceiling_lifted`] reads for the acting app.
    pub(crate) fn replay_guard_config(&self, profile: &aware_core::Profile, rules_failed: bool) -> GuardConfig {
        let guard = self.guard_config(profile);
        if rules_failed { GuardConfig { fallback_ceiling: 0.0, ..guard } } else { guard }
    }

    /// Whether an app in `stage` (`retraining` as [`AppLifecycle::retraining`] says) that the
    /// agent acts for acts with the learning agent as it trains: while it learns from what it
    /// does (online learning; retraining after SERVING degraded) or explores (`explores`:
    /// [`LifecycleAgent::explores_with_noise`]). Otherwise it acts
    /// with the policy certified when it was handed over: the one the bootstrapping check
    /// passed (or the checkpoint's), not the one the shared agent has become since by learning
    /// from the apps it is bootstrapping. The manager and the live decider both ask this.
    pub(crate) fn acts_with_learner(&self, stage: Stage, retraining: bool, explores: bool) -> bool {
        stage == Stage::Online && (self.online_learning || retraining || explores)
    }

    /// Whether an app retraining (`retraining`) whose action `explored` acts as a probe
    /// ([`ManagerConfig::retrain_probes`]): not for an agent acting on the fallback's proposal
    /// (its origin is the proposal, not the allocation a probe applied) nor with a CPU
    /// headroom (the window would remember the path without it), as the `converged` reference
    /// does, nor where the window is off anyway ([`ManagerConfig::unheld_exploration`]).
    pub(crate) fn probes(&self, retraining: bool, explored: bool) -> bool {
        self.retrain_probes
            && retraining
            && explored
            && !self.unheld_exploration
            && !self.residual
            && self.headroom == 0.0
    }
}

impl Default for ManagerConfig {
    fn default() -> Self {
        Self {
            episode_steps: 100,
            offline_updates: 4,
            bc_alpha: 0.5,
            high_stakes: None,
            online_noise_sigma: 0.0,
            retrain_noise_sigma: crate::agent::RESIDUAL_NOISE_SIGMA,
            retrain_updates: 4,
            online_bc: true,
            shadow_episodes: 3,
            online_learning: false,
            fallback: PolicyName::Mpa,
            bootstrapping: None,
            may_retrain: true,
            fixed_stage: None,
            fallback_floor: true,
            agent: Learner::Ddpg,
            log: false,
            residual: false,
            violation_price: 0.0,
            headroom: 0.0,
            unheld_exploration: false,
            retrain_probes: false,
            live_exploration: false,
        }
    }
}

/// How the agent learns from one interval's outcome ([`ManagerConfig::learning`]).
#[derive(Debug, Clone, Copy, PartialEq)]
pub(crate) enum Learning {
    /// Kept for the offline updates that follow the interval (TD3+BC, or PPO's cloning).
    Offline,
    /// Learned from at once, TD3+BC's behaviour term at `bc` where given.
    Online { bc: Option<f32> },
    /// Not learned from.
    None,
}

/// Per-application counts of who acted and what the guard said.
#[derive(Debug, Clone, Default, Serialize)]
pub struct Counts {
    /// Intervals the agent proposed the allocation.
    pub agent_actions: u64,
    /// Intervals the fallback proposed it (bootstrapping, high stakes, or the guard).
    pub fallback_actions: u64,
    /// Intervals the guard refused the observation to the agent (a subset of the above).
    pub guard_fallbacks: u64,
    /// Intervals the guard clamped or capped the agent's proposal, or raised it to (held it
    /// under) the fallback's scale-up.
    pub guard_limited: u64,
    /// The last reason the guard refused an observation.
    pub last_guard_reason: Option<String>,
    /// Intervals the fallback acted because the meta-learner held the app back (its workload
    /// unlike the training pool's, or no embedding could be made; a subset of
    /// `fallback_actions`).
    pub workload_holds: u64,
    /// The meta-learner's last verdict on the app, when the run has one.
    pub workload_verdict: Option<String>,
    /// The last comparison of the agent with the fallback on the app's recent traffic that a
    /// stage decision read, with its numbers ([`AppLifecycle::last_check`]): why an app is
    /// still OFFLINE, or how an acting agent last stood beside the fallback. Read from the
    /// app's lifecycle when the counts are reported ([`Manager::counts`]).
    pub last_check: Option<String>,
}

/// One application in a live view of a run ([`Manager::live_view`]).
#[derive(Debug, Clone, PartialEq)]
pub struct AppView {
    pub app: String,
    pub stage: Stage,
    pub retraining: bool,
    pub last_reward: Option<f64>,
    pub slo_violations: u64,
    pub fallback_actions: u64,
    pub agent_actions: u64,
}

impl AppView {
    /// One line of a terminal table, under [`AppView::HEADER`].
    pub fn line(&self) -> String {
        let stage = if self.retraining { "online (retraining)".to_string() } else { self.stage.name().to_string() };
        let reward = self.last_reward.map_or("-".to_string(), |r| format!("{r:.3}"));
        let name: String = self.app.chars().take(34).collect();
        format!(
            "{name:<34} {stage:<19} {reward:>8} {:>8} {:>8} {:>8}",
            self.slo_violations, self.agent_actions, self.fallback_actions
        )
    }

    pub const HEADER: &'static str =
        "app                                stage                 reward   SLO-vi    agent fallback";
}

/// What the meta-learner said of an application's workload (runs with a meta-learner only).
#[derive(Debug, Clone, PartialEq)]
pub enum WorkloadVerdict {
    /// Like the training pool's: the agent acts as the stage allows.
    /// `detail`: what the embedder's detector read (each test's score beside its threshold, or
    /// the embedding's distance alone), where it has one.
    Known { detail: Option<String> },
    /// The fallback keeps acting, whatever the stage: the workload is unlike anything the
    /// meta-learner was trained on, or no embedding could be made (too few episodes, NaN
    /// rewards, the store away).
    Hold { reason: String },
}

impl WorkloadVerdict {
    /// The verdict on an embedding request's answer.
    pub fn of(answer: Result<WorkloadEmbedding, EmbedRefusal>) -> Self {
        match answer {
            Ok(e) if e.out_of_distribution => WorkloadVerdict::Hold {
                reason: match (&e.ood_reason, e.ood_score) {
                    (Some(why), _) => format!("workload out of distribution ({why})"),
                    (None, Some(s)) => {
                        format!("workload out of distribution (OOD score {s:.3} above the pool's threshold)")
                    }
                    (None, None) => "workload out of distribution".into(),
                },
            },
            Ok(e) => WorkloadVerdict::Known {
                detail: e.ood_detail.or_else(|| e.ood_score.map(|s| format!("OOD score {s:.3}"))),
            },
            Err(refusal) => WorkloadVerdict::Hold { reason: refusal.to_string() },
        }
    }

    fn describe(&self) -> String {
        match self {
            WorkloadVerdict::Known { detail: Some(d) } => format!("known workload ({d})"),
            WorkloadVerdict::Known { detail: None } => "known workload".into(),
            WorkloadVerdict::Hold { reason } => reason.clone(),
        }
    }
}

struct Managed {
    name: String,
    lifecycle: AppLifecycle,
    guard: Guard,
    fallback: Policy,
    /// Decodes the agent's actions within the app's bounds (`decoder.bounds`, which the guard
    /// and the action coordinates use too).
    decoder: ActionDecoder,
    /// This interval's action in the continuous coordinates.
    action: Vec<f32>,
    /// The episode so far.
    reward: f64,
    intervals: u64,
    violations: u64,
    /// The last finished episode's mean reward per interval, and SLO-violating intervals over
    /// the whole run (the live view's).
    last_reward: Option<f64>,
    run_violations: u64,
    rates: Vec<f64>,
    /// The deployment this episode's first observation showed.
    episode_start: Option<DeploymentState>,
    /// The allocation the run's first observation showed, as the operator deployed it
    /// (replicas and the pod template). What the fallback does not manage is handed back to it
    /// as this, never below ([`restore_unmanaged`]).
    deployed: Option<(u32, ContainerResources)>,
    /// The clock when this episode's first interval began.
    episode_start_s: f64,
    /// The fallback as this episode began (its histories and windows), for the bootstrapping
    /// check's replay of the episode to start from; `None` where it cannot be copied.
    episode_fallback: Option<Policy>,
    /// The guard as this episode began, likewise.
    episode_guard: Option<Guard>,
    /// What one request cost this episode so far, as measured.
    cost: CostMeter,
    /// The payload multiplier the last episode that could say measured (1 until one did).
    payload_scale: f64,
    /// The action a PPO agent sampled for this interval (learned from online whatever was
    /// applied); `None` when it did not sample.
    sampled: Option<Vec<f32>>,
    /// The last `shadow_episodes` episodes' traffic, oldest first; the current episode's
    /// collects in `rates` and `cost` until it ends.
    recent_traffic: std::collections::VecDeque<Replay>,
    counts: Counts,
    /// `counts.agent_actions` when the episode began.
    episode_start_agent_actions: u64,
    /// The meta-learner's verdict; `None` in a run without one.
    workload: Option<WorkloadVerdict>,
    /// `counts.workload_holds` when the episode began.
    episode_start_workload_holds: u64,
    /// The meta-learner's last embedding of the app's workload, which a conditioned agent reads
    /// beside the state (`None` until one could be made).
    embedding: Option<Vec<f32>>,
    /// What the agent's last proposal had applied with [`ManagerConfig::headroom`].
    headroom: Headroom,
    /// A retraining app's last probe: what it applied and the greedy path it probed around.
    probe: Probe,
    /// This interval's [`ASK_FEATURES`] for a residual agent (empty otherwise).
    ask: Vec<f32>,
    /// A residual agent's last transition, until the next interval's proposal completes it.
    pending: Option<Pending>,
    /// The policy the app was handed over with, frozen when it was: what acts for it while it
    /// acts without learning (ONLINE after the bootstrapping check, SERVING), however the shared
    /// agent learns from other apps meanwhile. `None` while the app is the fallback's or acts
    /// with the learning agent itself ([`ManagerConfig::acts_with_learner`]).
    certified: Option<FrozenPolicy>,
}

impl Managed {
    /// Where this app's action is measured from this interval, as (container, replicas): the
    /// fallback's proposal `ask` for a residual agent, else the current allocation
    /// ([`action_origin`]); the greedy path while the app is where its last probe left it
    /// ([`Probe::origin`]); less the agent's own CPU headroom ([`Headroom::origin`]).
    fn origin<'a>(
        &self,
        ask: Option<&'a Recommendation>,
        residual: bool,
        obs: &'a Observation,
    ) -> (Cow<'a, ContainerResources>, u32) {
        let (from, replicas) = action_origin(ask, residual, obs);
        let (from, replicas) = self.probe.origin(from, replicas);
        let from = match self.headroom.origin(&from) {
            Cow::Owned(less) => Cow::Owned(less),
            Cow::Borrowed(_) => from,
        };
        (from, replicas)
    }
}

/// The agent's action space: multiplicative changes of the current allocation (of the
/// fallback's proposal for a residual agent, [`ManagerConfig::residual`]), so one policy fits
/// every application whatever its size, and what the fallback did maps onto it exactly (log₂
/// of its ratio, see [`aware_env::coordinates`]; 0 for a residual agent).
pub const AGENT_ACTIONS: ActionKind = ActionKind::Relative;
/// The agent's action: CPU, memory and replicas, each in [-1, 1].
pub const AGENT_ACTION_DIM: usize = 3;

/// What a residual agent ([`ManagerConfig::residual`]) reads beside the state encoder's
/// features: the fallback's proposal of the interval, as where it lies from the app's current
/// allocation in the agent's coordinates (CPU, memory, replicas: log₂ of each ratio over its
/// range, [`aware_env::coordinates`]; 0 where it holds). The agent's change lands on that
/// proposal: without it, a fallback about to scale out and one holding look alike to it.
pub const ASK_FEATURES: [&str; AGENT_ACTION_DIM] = ["fallback_cpu", "fallback_memory", "fallback_replicas"];

/// How many of [`ASK_FEATURES`] an agent reads: all for a residual agent, none otherwise.
pub fn ask_width(residual: bool) -> usize {
    if residual { ASK_FEATURES.len() } else { 0 }
}

/// The state values every agent of a driver acting `residual`ly (or not) reads before any
/// workload embedding: the state encoder's, then [`ASK_FEATURES`] for a residual agent.
pub fn base_state_width(residual: bool) -> usize {
    aware_env::STATE_DIM + ask_width(residual)
}

/// Why an agent reading `reads` state values cannot act for a driver acting `residual`ly (or
/// not), which gives [`base_state_width`] values before any embedding; `exact` when it gives no
/// embedding at all.
pub(crate) fn state_width_refusal(reads: usize, residual: bool, exact: bool) -> Option<String> {
    let width = base_state_width(residual);
    let fits = if exact { reads == width } else { reads >= width };
    (!fits).then(|| {
        format!(
            "the agent reads {reads} state values, the lifecycle gives {}{width} (the state encoder's {}{})",
            if exact { "" } else { "at least " },
            aware_env::STATE_DIM,
            if residual { " and the fallback's proposal" } else { "" }
        )
    })
}

/// [`ASK_FEATURES`] of the fallback's proposal `ask` (zeros without one: the agent's change
/// then lands on the current allocation, [`action_origin`]).
pub(crate) fn ask_features(bounds: &aware_core::Bounds, ask: Option<&Recommendation>, obs: &Observation) -> Vec<f32> {
    let now = obs.template.limits;
    ask.and_then(|r| r.containers.first().map(|c| (c.limits, r.replicas)))
        .and_then(|(c, replicas)| {
            aware_env::coordinates(
                AGENT_ACTIONS,
                bounds,
                (c.cpu_millicores, c.memory_bytes, replicas),
                (now.cpu_millicores, now.memory_bytes, obs.desired_replicas),
            )
        })
        .unwrap_or_else(|| vec![0.0; ASK_FEATURES.len()])
}

/// A residual agent's transition waiting for the next interval's proposal, the rest of its
/// next state.
struct Pending {
    /// The state in the agent's width; the next state as the encoder gave it.
    e: Experience,
    stage: Stage,
    retraining: bool,
    sampled: Option<Vec<f32>>,
}

/// A fresh DDPG agent for the lifecycle (AWARE's): [`LifecycleAgent::fresh`].
pub fn fresh_agent(seed: u64) -> LifecycleAgent {
    LifecycleAgent::fresh(Learner::Ddpg, seed)
}

/// The space of the states the agent reads: the state encoder's, then the fallback's proposal
/// for a residual agent ([`ASK_FEATURES`]), then `embedding_width` workload-embedding values
/// ([`aware_lab::embed::conditioned_space`]).
pub fn agent_space(residual: bool, embedding_width: usize) -> aware_core::Space {
    aware_lab::embed::conditioned_space(ask_width(residual) + embedding_width)
}

/// Width of the workload embedding `agent` reads beside the state encoder's features (and, when
/// it acts `residual`ly, the fallback's proposal); 0 for an agent not conditioned on one.
pub fn embedding_width_of(agent: &LifecycleAgent, residual: bool) -> usize {
    agent.state_dim().saturating_sub(base_state_width(residual))
}

/// A state as the agent reads it: `state`, then `ask` (the fallback's proposal for a residual
/// agent, else empty), then, for an agent conditioned on `width` embedding values, `embedding`
/// (`None` without one).
pub(crate) fn agent_state(width: usize, embedding: Option<&[f32]>, state: &[f32], ask: &[f32]) -> Option<Vec<f32>> {
    let e = if width == 0 { &[][..] } else { embedding? };
    Some(state.iter().chain(ask).chain(e).copied().collect())
}

/// The agent's continuous action as the allocation it means from `replicas` pods of `from`:
/// the app's current allocation (`obs.desired_replicas`, `obs.template`), or the fallback's
/// proposal for a residual agent.
pub(crate) fn decode_action(
    decoder: &ActionDecoder,
    action: Vec<f32>,
    replicas: u32,
    from: &ContainerResources,
) -> Result<Recommendation, LabError> {
    decoder
        .decode(&Action::Continuous(action), replicas, from)
        .map(|d| d.recommendation)
        .map_err(|e| LabError::input("agent", e.to_string()))
}

/// Where an agent's action acts from this interval, for one app: its decoder, the origin its
/// coordinates are measured from (`from_replicas` pods of `from`: the current allocation, or the
/// fallback's proposal for a residual agent, less any headroom of the agent's own), the
/// fallback's proposal the guard floors it under and the usage it fits it to (each where the
/// manager uses them), the current allocation `obs`, and the CPU `headroom`.
pub(crate) struct ActingFrom<'a> {
    pub decoder: &'a ActionDecoder,
    pub from: &'a ContainerResources,
    pub from_replicas: u32,
    pub floor: Option<&'a Recommendation>,
    /// The fallback's proposal as the guard's ceiling measures the agent's against it.
    pub ceiling: Option<&'a Recommendation>,
    pub usage: Option<Usage>,
    pub obs: &'a Observation,
    pub headroom: f32,
}

/// An agent's action as the guard lets it act ([`ActingFrom::guard`]).
pub(crate) struct Guarded {
    pub rec: Recommendation,
    /// The guard's reasons, when it changed anything.
    pub limited: Option<String>,
    /// The agent's own CPU limit beneath the headroom (`None` without headroom).
    pub base_cpu: Option<u64>,
}

impl ActingFrom<'_> {
    /// `action` decoded, its CPU raised by the headroom, then [`Guard::limit_under`] the floor
    /// and the usage from the current allocation: what acts. `guard` remembers it.
    pub(crate) fn guard(&self, guard: &mut Guard, action: Vec<f32>) -> Result<Guarded, LabError> {
        let p = decode_action(self.decoder, action, self.from_replicas, self.from)?;
        let base_cpu = if self.headroom > 0.0 { p.containers.first().map(|c| c.limits.cpu_millicores) } else { None };
        let p = with_headroom(p, self.headroom);
        let (rec, limited) = guard.limit_under(
            &p,
            self.floor,
            self.ceiling,
            self.usage.as_ref(),
            self.obs.desired_replicas,
            &self.obs.template,
            &self.decoder.bounds,
        );
        Ok(Guarded { rec, limited, base_cpu })
    }

    /// [`ActingFrom::guard`] for an app that may probe ([`Probe`]): with `centre` (the greedy
    /// action as the guard lets it act, which the probe's noise was drawn around) the probe's
    /// cuts are not held by the stabilisation window, the window remembers the path at the
    /// centre instead of the probe, and `probe` remembers both; without it the probe is
    /// forgotten.
    pub(crate) fn guard_probing(
        &self,
        guard: &mut Guard,
        probe: &mut Probe,
        action: Vec<f32>,
        centre: Option<&[f32]>,
    ) -> Result<Guarded, LabError> {
        *probe = Probe::default();
        let Some(centre) = centre else { return self.guard(guard, action) };
        guard.set_exploring(true);
        let g = self.guard(guard, action);
        guard.set_exploring(false);
        let g = g?;
        if let Ok(path) = decode_action(self.decoder, centre.to_vec(), self.from_replicas, self.from) {
            guard.remember_instead(&path, self.from, &self.decoder.bounds);
            probe.remember(&g.rec, &path, self.from, &self.decoder.bounds);
        }
        Ok(g)
    }

    /// `rec` in the agent's coordinates, measured from the origin: the action recorded for it.
    pub(crate) fn coordinates(&self, rec: &Recommendation) -> Option<Vec<f32>> {
        measured_from(&self.decoder.bounds, rec, self.obs, (&self.from.limits, self.from_replicas))
    }

    /// What `action` does, in the agent's coordinates: what the guard (a copy of `guard`, left
    /// as it is) would let it apply, measured back from the origin. An agent exploring around
    /// this, not around its `action`, tries what its greedy action cannot reach: growth where
    /// the guard holds its cut (noise around a held −0.9 stays a held cut), cuts where an
    /// actor saturated at a bound asks for more (noise around a clipped +1 stays at +1).
    /// `action` itself where it does not decode.
    ///
    /// Without the headroom: the draw around it is raised by the headroom when it acts, and
    /// must not be raised twice.
    pub(crate) fn applied(&self, guard: &Guard, action: Vec<f32>) -> Vec<f32> {
        let bare = ActingFrom { headroom: 0.0, ..*self };
        match bare.guard(&mut guard.clone(), action.clone()) {
            Ok(g) => self.coordinates(&g.rec).unwrap_or(action),
            Err(_) => action,
        }
    }
}

/// `rec`, a proposal of a fallback whose `scope` leaves some of the allocation as it runs, with
/// each such part below the `deployed` one (replicas, CPU and memory limits) raised to it; what
/// was raised, when anything was. An agent that cut a dimension the rules never set (the CPU
/// limit, under the MPA default) would otherwise hand the app back to rules that cannot undo it:
/// `aware demo` seed 1 (session 58), an app the agent left at 374 m of its deployed 1,000 m
/// violated its SLO in 79 of 100 intervals under MPA, which went on adding replicas of 374 m.
/// The manager and the live decider both apply it where the stage hands the app to the
/// fallback (not for one refused observation), against the first allocation they observed.
/// Requests move with their limits, in the proposal's ratio (a Burstable pod stays Burstable).
/// The deployment is taken within `bounds` (a profile changed since can have lowered them); a
/// limit of 0 (none: unlimited) is left alone.
pub(crate) fn restore_unmanaged(
    rec: &mut Recommendation,
    scope: aware_core::Scope,
    (replicas, template): (u32, &ContainerResources),
    bounds: &aware_core::Bounds,
) -> Option<String> {
    let deployed = within_bounds(replicas, template, bounds);
    let mut raised = Vec::new();
    if !scope.replicas && rec.replicas < deployed.0 {
        raised.push(format!("replicas {} → {}", rec.replicas, deployed.0));
        rec.replicas = deployed.0;
    }
    for c in rec.containers.iter_mut().take(1) {
        if !scope.cpu && c.limits.cpu_millicores > 0 && c.limits.cpu_millicores < deployed.1 {
            raised.push(format!("cpu millicores {} → {}", c.limits.cpu_millicores, deployed.1));
            crate::guard::move_limit(&mut c.requests.cpu_millicores, &mut c.limits.cpu_millicores, deployed.1);
        }
        if !scope.memory && c.limits.memory_bytes > 0 && c.limits.memory_bytes < deployed.2 {
            raised.push(format!("memory MiB {} → {}", c.limits.memory_bytes / MIB, deployed.2 / MIB));
            crate::guard::move_limit(&mut c.requests.memory_bytes, &mut c.limits.memory_bytes, deployed.2);
        }
    }
    (!raised.is_empty()).then(|| format!("{} (as deployed; the fallback does not set them)", raised.join(", ")))
}

/// `rec` in the agent's coordinates within `bounds`, measured from `replicas` pods of `from`
/// (a proposal without a container keeps `obs`'s).
fn measured_from(
    bounds: &aware_core::Bounds,
    rec: &Recommendation,
    obs: &Observation,
    (from, replicas): (&aware_core::Resources, u32),
) -> Option<Vec<f32>> {
    let c = rec.containers.first().map(|c| c.limits).unwrap_or(obs.template.limits);
    aware_env::coordinates(
        AGENT_ACTIONS,
        bounds,
        (c.cpu_millicores, c.memory_bytes, rec.replicas),
        (from.cpu_millicores, from.memory_bytes, replicas),
    )
}

/// `rec` with every container's CPU (requests and limits) raised by the fraction `headroom`.
pub(crate) fn with_headroom(mut rec: Recommendation, headroom: f32) -> Recommendation {
    if headroom > 0.0 {
        let raise = |m: u64| (m as f64 * (1.0 + headroom as f64)).round() as u64;
        for c in &mut rec.containers {
            c.requests.cpu_millicores = raise(c.requests.cpu_millicores);
            c.limits.cpu_millicores = raise(c.limits.cpu_millicores);
        }
    }
    rec
}

/// One app's CPU headroom ([`ManagerConfig::headroom`]) kept out of the origin the agent's next
/// action starts from (the state, the fallback and the recorded action see the raised CPU).
/// The agent's actions are changes of an origin (the current allocation, or the fallback's
/// proposal, which VPA leaves at the current allocation while it is within its bounds): were
/// the raised CPU the next origin, the headroom would compound every interval. So where the
/// origin's CPU is what the agent's last proposal applied (whoever acted since, if the CPU is
/// still that), the agent's own decision beneath the headroom stands in.
#[derive(Debug, Clone, Copy, Default)]
pub(crate) struct Headroom {
    /// (CPU millicores applied, the agent's own decision beneath them).
    last: Option<(u64, u64)>,
}

/// A retraining app's exploration as a probe around its greedy path: the allocation its
/// last probe applied, and the path's allocation beneath it (the greedy action's, as the guard
/// let it act). While the app's allocation is still what the probe applied, the next action is
/// measured from the path, so the probe's noise does not compound into a random walk.
#[derive(Debug, Clone, Default)]
pub(crate) struct Probe {
    /// (What the probe applied, the path's).
    last: Option<(Allocation, Allocation)>,
}

/// Replicas, CPU millicores and memory bytes (limits).
type Allocation = (u32, u64, u64);

impl Probe {
    /// Where the next action is measured from: the path where `from` is what the probe applied
    /// (`from` itself, uncopied, everywhere else).
    pub(crate) fn origin<'a>(&self, from: &'a ContainerResources, replicas: u32) -> (Cow<'a, ContainerResources>, u32) {
        match self.last {
            Some((applied, (r, cpu, memory)))
                if applied == (replicas, from.limits.cpu_millicores, from.limits.memory_bytes) =>
            {
                let mut path = from.clone();
                // A limit of 0 (none) has no ratio to keep: the probe never set one.
                if path.limits.cpu_millicores > 0 {
                    crate::guard::move_limit(&mut path.requests.cpu_millicores, &mut path.limits.cpu_millicores, cpu);
                }
                if path.limits.memory_bytes > 0 {
                    crate::guard::move_limit(&mut path.requests.memory_bytes, &mut path.limits.memory_bytes, memory);
                }
                (Cow::Owned(path), r)
            }
            _ => (Cow::Borrowed(from), replicas),
        }
    }

    /// Remembers the probe `applied` over the greedy `path` (within `bounds`).
    pub(crate) fn remember(
        &mut self,
        applied: &Recommendation,
        path: &Recommendation,
        current: &ContainerResources,
        bounds: &aware_core::Bounds,
    ) {
        let c = applied.containers.first().unwrap_or(current);
        let applied = (applied.replicas, c.limits.cpu_millicores, c.limits.memory_bytes);
        let path = crate::guard::within_bounds(path.replicas, path.containers.first().unwrap_or(current), bounds);
        self.last = Some((applied, path));
    }
}

impl Headroom {
    /// `from` as the agent's action starts from: the headroom taken off where its CPU limit is
    /// what was last applied with it (`from` itself, uncopied, everywhere else).
    pub(crate) fn origin<'a>(&self, from: &'a ContainerResources) -> Cow<'a, ContainerResources> {
        match self.last {
            Some((applied, base)) if from.limits.cpu_millicores == applied => {
                let mut from = from.clone();
                from.requests.cpu_millicores = from.requests.cpu_millicores.min(base);
                from.limits.cpu_millicores = base;
                Cow::Owned(from)
            }
            _ => Cow::Borrowed(from),
        }
    }

    /// Remembers what was applied (`applied`, after the guard) over the agent's own CPU limit
    /// `base` (`None` when no headroom was added: nothing to remember).
    pub(crate) fn remember(&mut self, base: Option<u64>, applied: &Recommendation) {
        self.last = match (base, applied.containers.first()) {
            (Some(base), Some(c)) if c.limits.cpu_millicores != base => {
                Some((c.limits.cpu_millicores, base.min(c.limits.cpu_millicores)))
            }
            _ => None,
        };
    }

    /// A new episode began: nothing of the agent's is applied.
    pub(crate) fn forget(&mut self) {
        self.last = None;
    }
}

/// Where the agent's action is measured from, as (container, replicas): the fallback's
/// proposal `ask` for a residual agent (when it has one), else the app's current allocation.
pub(crate) fn action_origin<'a>(
    ask: Option<&'a Recommendation>,
    residual: bool,
    obs: &'a Observation,
) -> (&'a ContainerResources, u32) {
    match ask {
        Some(f) if residual && !f.containers.is_empty() => (&f.containers[0], f.replicas),
        _ => (&obs.template, obs.desired_replicas),
    }
}

/// The deployment `obs` shows, as the bootstrapping check's replay starts from it (the
/// manager's and the live decider's alike): its pods of
/// the template that a node holds counted as bound, and those of an older one that a node holds
/// and that serve (a rollout or an in-place resize the cluster could not admit yet) listed
/// with what they run, so that the replay goes on with the rollout where the episode did
/// instead of starting every pod at the template (the simulator's own continuation,
/// [`DeploymentState::outdated`], carries them the same way).
pub(crate) fn observed_start(obs: &Observation) -> DeploymentState {
    let placed = obs.pods.iter().filter(|p| p.node.is_some() && !p.deleting);
    // A pod is of the template when its node holds the template's requests for it, whatever
    // it still runs with (a memory decrease the kubelet defers while the working set is above
    // it is the template's already).
    let current =
        |p: &&aware_core::PodObservation| p.allocated.unwrap_or(p.resources.requests) == obs.template.requests;
    DeploymentState {
        replicas: obs.desired_replicas,
        template: obs.template.clone(),
        bound: Some(placed.clone().filter(current).count().min(u32::MAX as usize) as u32),
        outdated: placed
            .filter(|p| !current(p) && p.phase == aware_core::PodPhase::Ready)
            .map(|p| p.resources.clone())
            .collect(),
    }
}

/// App `i`'s traffic of one recent episode, for the bootstrapping check to replay from its
/// start (the seed is the episode's, so the same episode replays the same arrivals), the
/// fallback's replay handing back what it does not manage as `deployed`.
fn replay<'a>(
    workload: &'a Workload,
    profile: &'a aware_core::Profile,
    i: usize,
    r: &'a Replay,
    deployed: Option<&'a (u32, ContainerResources)>,
) -> ShadowApp<'a> {
    ShadowApp {
        spec: &workload.apps[i],
        profile,
        sim: &workload.sim,
        rates: &r.rates,
        payload_scale: r.payload_scale,
        start: r.start.as_ref(),
        start_s: r.start_s,
        fallback: r.fallback.as_ref(),
        guard: r.guard.as_ref(),
        deployed,
        seed: workload.seed ^ (r.episode << 20) ^ i as u64,
        observed_slo: false,
    }
}

/// Share of an episode's intervals by which the fallback's replay may violate the SLO less
/// often than the fallback did on the episode itself before the replay is not believed: the
/// one-app replay has no neighbours and other noise, so a few intervals part them; a model that
/// missed a change parts them by most of the episode (a payload increase that saturated every
/// pod, where the cost meter measures nothing: 100 of 100 intervals violating, 0 replayed).
pub const REPLAY_SLACK: f64 = 0.1;

/// Why the replay of an episode the fallback drove is not believed (`None`: it is): it
/// violated the SLO in fewer intervals than `real` did, by more than [`REPLAY_SLACK`] of the
/// episode's `intervals` (at least one). Only this direction matters to a promotion: a replay
/// that flatters the fallback would flatter the agent too.
pub fn replay_misses(real: &EpisodeOutcome, replayed: &EpisodeOutcome, intervals: u64) -> Option<String> {
    let slack = (REPLAY_SLACK * intervals as f64).ceil().max(1.0) as u64;
    (real.slo_violations > replayed.slo_violations + slack).then(|| {
        format!(
            "the replay of this episode does not reproduce it: the fallback violated the SLO in {} of {intervals} \
             intervals, its replay in {} (more than {slack} apart), so the replay's model of the app is not \
             trusted with the agent",
            real.slo_violations, replayed.slo_violations
        )
    })
}

/// One episode's traffic as the bootstrapping check replays it.
struct Replay {
    episode: u64,
    /// Arrival rates, requests per second, one per interval.
    rates: Vec<f64>,
    /// The payload multiplier under which the app's model costs what the episode measured
    /// ([`CostMeter::payload_scale`]).
    payload_scale: f64,
    /// The app's deployment when the episode began (episodes go on from one another, so not
    /// necessarily the reference allocation): the replay starts from it.
    start: Option<DeploymentState>,
    /// The clock when the episode's first interval began.
    start_s: f64,
    /// The fallback and the guard as the episode began, which the replay starts with.
    fallback: Option<Policy>,
    guard: Option<Guard>,
    /// Why its replay did not reproduce the episode, where the check found so (it can only
    /// tell for an episode the fallback drove, when the episode is the newest).
    unfaithful: Option<String>,
}

/// Why the bootstrapping check cannot trust its pool of `recent` replays, if it cannot: the
/// oldest replay in it found not to reproduce its own episode. The check pools every recent
/// episode's replay but can test a replay's fidelity only when its episode is the newest, so a
/// replay found unfaithful then stays untrusted until it leaves the pool.
fn pooled_unfaithful<'r>(recent: impl IntoIterator<Item = &'r Replay>, episode_steps: u64) -> Option<String> {
    let recent: Vec<&Replay> = recent.into_iter().collect();
    recent.iter().find_map(|r| {
        let why = r.unfaithful.as_deref()?;
        let details = why.split_once(": ").map_or(why, |(_, d)| d);
        Some(format!(
            "the replay of the episode from step {}, one of the {} the check pools, did not reproduce it: {details}",
            r.episode * episode_steps,
            recent.len()
        ))
    })
}

/// Freezes `agent` as it is now for every app (its lifecycle and certified policy) that the
/// agent acts for without learning and that has no certified policy yet (one copy for all of
/// them), and drops the certified policy of every app the agent does not act for so. The
/// manager and the live decider both keep their apps' certificates so.
pub(crate) fn certify<'a>(
    agent: &LifecycleAgent,
    config: &ManagerConfig,
    apps: impl Iterator<Item = (&'a AppLifecycle, &'a mut Option<FrozenPolicy>)>,
) {
    let explores = agent.explores_with_noise(config);
    let mut now: Option<FrozenPolicy> = None;
    for (lifecycle, certified) in apps {
        let (stage, retraining) = (lifecycle.stage(), lifecycle.retraining());
        if !config.agent_acts(stage) || config.acts_with_learner(stage, retraining, explores) {
            *certified = None;
        } else if certified.is_none() {
            *certified = Some(now.get_or_insert_with(|| agent.frozen()).clone());
        }
    }
}

/// The manager: Algorithm 1 and the guard for every application, one agent for all.
pub struct Manager<'w> {
    workload: &'w Workload,
    pub agent: LifecycleAgent,
    apps: Vec<Managed>,
    config: ManagerConfig,
    /// Intervals since the run started.
    step: u64,
    episode: u64,
    changes: Vec<StageChange>,
    /// Apps in each stage after every interval, in [`Stage::ALL`] order.
    stage_series: Vec<[u32; 4]>,
    log: Log,
}

/// What the manager logged since the last [`Manager::take_log`].
#[derive(Debug, Default)]
pub struct Log {
    pub decisions: Vec<Decision>,
    /// Per app, the episode's transitions in the agent's coordinates (relative actions), with
    /// the state encoder's states: without a residual agent's [`ASK_FEATURES`] (nor a workload
    /// embedding), so they cannot be replayed into a residual agent as they are.
    pub transitions: Vec<Vec<Experience>>,
    /// Per app, the stage the episode began in and whether the agent acted in it.
    pub episode_stage: Vec<Stage>,
    pub agent_acted: Vec<bool>,
}

impl<'w> Manager<'w> {
    pub fn new(
        workload: &'w Workload,
        agent: impl Into<LifecycleAgent>,
        config: ManagerConfig,
    ) -> Result<Self, LabError> {
        let mut agent = agent.into();
        if let Some(why) = state_width_refusal(agent.state_dim(), config.residual, false) {
            return Err(LabError::input("agent", why));
        }
        if let Some(why) = config.fallback_refusal() {
            return Err(LabError::input("--fallback", why));
        }
        let profile = &workload.profile;
        // The caller's `high_stakes`, else the profile's.
        let config = ManagerConfig { high_stakes: Some(config.high_stakes.unwrap_or(profile.high_stakes)), ..config };
        let bootstrapping = config.bootstrapping.unwrap_or(profile.bootstrapping);
        if let Some(why) = agent.refuses(&config, bootstrapping) {
            return Err(LabError::input("agent", why));
        }
        let apps = (0..workload.apps.len())
            .map(|i| {
                let app_profile = workload.app_profile(i);
                Ok(Managed {
                    name: workload.apps[i].name.clone(),
                    lifecycle: match config.fixed_stage {
                        Some(stage) => AppLifecycle::fixed(profile.lifecycle.clone(), stage),
                        None => {
                            let l = AppLifecycle::new(profile.lifecycle.clone(), bootstrapping);
                            if config.may_retrain { l } else { l.without_retraining() }
                        }
                    },
                    guard: Guard::new(config.guard_config(&app_profile)),
                    fallback: Policy::build(&config.fallback, &app_profile, Some(&workload.apps[i]), None)?,
                    decoder: ActionDecoder {
                        kind: AGENT_ACTIONS,
                        bounds: app_profile.bounds.clone(),
                        container: CONTAINER.into(),
                        cpu_request_ratio: 1.0,
                    },
                    action: Vec::new(),
                    sampled: None,
                    reward: 0.0,
                    intervals: 0,
                    violations: 0,
                    last_reward: None,
                    run_violations: 0,
                    rates: Vec::new(),
                    episode_start: None,
                    deployed: None,
                    episode_start_s: 0.0,
                    episode_fallback: None,
                    episode_guard: None,
                    cost: CostMeter::default(),
                    payload_scale: 1.0,
                    recent_traffic: Default::default(),
                    counts: Counts::default(),
                    episode_start_agent_actions: 0,
                    workload: None,
                    episode_start_workload_holds: 0,
                    embedding: None,
                    headroom: Headroom::default(),
                    probe: Probe::default(),
                    ask: Vec::new(),
                    pending: None,
                    certified: None,
                })
            })
            .collect::<Result<Vec<_>, LabError>>()?;
        agent.serving_settings(&config);
        let mut m = Self {
            workload,
            agent,
            apps,
            config,
            step: 0,
            episode: 0,
            changes: Vec::new(),
            stage_series: Vec::new(),
            log: Log::default(),
        };
        for i in 0..m.apps.len() {
            if let Some(t) = m.apps[i].lifecycle.start() {
                m.log(i, t);
            }
        }
        m.certify();
        Ok(m)
    }

    /// The agent, as the run left it.
    pub fn into_agent(self) -> LifecycleAgent {
        self.agent
    }

    /// Hands the apps to `agent` (a restored checkpoint's), with the manager's exploration:
    /// the apps that act without learning are served with it as it is now.
    pub fn replace_agent(&mut self, mut agent: LifecycleAgent) {
        agent.serving_settings(&self.config);
        self.agent = agent;
        for a in &mut self.apps {
            a.certified = None;
        }
        self.certify();
    }

    /// [`certify`] for every app.
    fn certify(&mut self) {
        let apps = self.apps.iter_mut().map(|a| (&a.lifecycle, &mut a.certified));
        certify(&self.agent, &self.config, apps);
    }

    /// Every app's lifecycle as a checkpoint keeps it, by app name.
    pub fn lifecycles(&self) -> Vec<(String, LifecycleState)> {
        self.apps.iter().map(|a| (a.name.clone(), a.lifecycle.snapshot())).collect()
    }

    /// Takes up checkpointed lifecycles for the apps they name (apps it does not name keep
    /// theirs); each stage that changes is a stage change with `reason`.
    pub fn restore_lifecycles(&mut self, states: &[(String, LifecycleState)], reason: &str) {
        let apps = self.apps.iter_mut().map(|a| (a.name.as_str(), &mut a.lifecycle));
        for (i, t) in crate::algorithm::restore_named(apps, states, reason) {
            self.log(i, t);
        }
        self.certify();
    }

    pub fn stages(&self) -> Vec<Stage> {
        self.apps.iter().map(|a| a.lifecycle.stage()).collect()
    }

    /// Per app, whether it is retraining ([`crate::algorithm::AppLifecycle::retraining`]).
    pub fn retraining(&self) -> Vec<bool> {
        self.apps.iter().map(|a| a.lifecycle.retraining()).collect()
    }

    pub fn changes(&self) -> &[StageChange] {
        &self.changes
    }

    pub fn app_names(&self) -> Vec<String> {
        self.apps.iter().map(|a| a.name.clone()).collect()
    }

    /// The fallback's name (the `acting_policy` of its decisions).
    pub fn fallback_name(&self) -> String {
        self.config.fallback.to_string()
    }

    /// Apps in each stage after every interval so far, in [`Stage::ALL`] order.
    pub fn stage_series(&self) -> &[[u32; 4]] {
        &self.stage_series
    }

    /// What was logged since the last call (empty unless `log` is on).
    pub fn take_log(&mut self) -> Log {
        std::mem::take(&mut self.log)
    }

    pub fn counts(&self) -> Vec<Counts> {
        self.apps
            .iter()
            .map(|a| Counts { last_check: a.lifecycle.last_check().map(str::to_owned), ..a.counts.clone() })
            .collect()
    }

    /// Per application, what a live view shows after an episode: name, stage, the last
    /// episode's mean reward per interval, SLO-violating intervals and fallback actions so far.
    /// Violations as the manager measured them (on the simulator the report counts the
    /// ground truth, from which metrics noise can part by an interval or two).
    pub fn live_view(&self) -> Vec<AppView> {
        self.apps
            .iter()
            .map(|a| AppView {
                app: a.name.clone(),
                stage: a.lifecycle.stage(),
                retraining: a.lifecycle.retraining(),
                last_reward: a.last_reward,
                slo_violations: a.run_violations + a.violations,
                fallback_actions: a.counts.fallback_actions,
                agent_actions: a.counts.agent_actions,
            })
            .collect()
    }

    /// Intervals the fallback stood in for the agent, per application (for the scorer).
    pub fn fallbacks(&self) -> Vec<u64> {
        self.apps.iter().map(|a| a.counts.fallback_actions).collect()
    }

    /// Takes up the meta-learner's answer for app `app` (asked when the app arrives and after
    /// each of its episodes): a workload unlike the training pool's, or no embedding, keeps the
    /// fallback acting for it, and every decision says why.
    pub fn judge_workload(&mut self, app: usize, answer: Result<WorkloadEmbedding, EmbedRefusal>) {
        let width = self.embedding_width();
        if let Some(a) = self.apps.get_mut(app) {
            let answer = match answer {
                // A conditioned agent reads the embedding beside the state: it must fit.
                Ok(e) if width > 0 => {
                    let finite = e.values.iter().all(|v| v.is_finite());
                    if e.values.len() == width && finite {
                        Ok(e)
                    } else {
                        Err(EmbedRefusal {
                            app: a.name.clone(),
                            reason: format!(
                                "the embedding has {} values{}, the agent reads {width}",
                                e.values.len(),
                                if finite { "" } else { " (not all finite)" }
                            ),
                        })
                    }
                }
                other => other,
            };
            if let Ok(e) = &answer {
                a.embedding = Some(e.values.clone());
            }
            let verdict = WorkloadVerdict::of(answer);
            a.counts.workload_verdict = Some(verdict.describe());
            a.workload = Some(verdict);
        }
    }

    /// What the manager was configured with.
    pub fn config(&self) -> &ManagerConfig {
        &self.config
    }

    /// Width of the workload embedding the agent reads beside the state (0: an agent that is
    /// not conditioned on one).
    pub fn embedding_width(&self) -> usize {
        embedding_width_of(&self.agent, self.config.residual)
    }

    /// App `i`'s state as the agent reads it, `ask` being the fallback's proposal for a
    /// residual agent ([`ASK_FEATURES`], else empty): with its workload embedding appended when
    /// the agent is conditioned on one (`None` while the app has none).
    fn agent_state(&self, i: usize, state: &[f32], ask: &[f32]) -> Option<Vec<f32>> {
        agent_state(self.embedding_width(), self.apps[i].embedding.as_deref(), state, ask)
    }

    /// Learns from app `i`'s transition `e` (states in the agent's width) as the stage it was
    /// decided in allows; whether it was kept for offline learning.
    fn learn(&mut self, i: usize, e: &Experience, decided: &Pending, truncated: bool) -> Result<bool, LabError> {
        match self.config.learning(self.agent.algorithm(), decided.stage, decided.retraining) {
            Learning::Offline => {
                self.agent.remember_offline(e)?;
                return Ok(true);
            }
            Learning::Online { bc } => {
                let updates = if decided.retraining { self.config.retrain_updates } else { 1 };
                self.agent.learn_online(i, e, decided.sampled.as_deref(), truncated, bc, updates)?
            }
            Learning::None => self.agent.stop_online(i),
        }
        Ok(false)
    }

    /// The meta-learner's verdict on app `app`, if the run has one.
    pub fn workload_verdict(&self, app: usize) -> Option<&WorkloadVerdict> {
        self.apps.get(app).and_then(|a| a.workload.as_ref())
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

    fn bootstrapping(&self) -> bool {
        self.config.bootstrapping.unwrap_or(self.workload.profile.bootstrapping)
    }

    /// Whether the agent may propose for an app in `stage`.
    fn agent_acts(&self, stage: Stage) -> bool {
        self.config.agent_acts(stage)
    }

    /// Ends the episode of every application: scores it, runs the bootstrapping check where
    /// the stage asks for one, and moves stages.
    fn end_episode(&mut self) -> Result<(), LabError> {
        for i in 0..self.apps.len() {
            // This episode's traffic joins the recent ones the bootstrapping check replays.
            let episode = self.episode;
            let a = &mut self.apps[i];
            let seen = !a.rates.is_empty();
            if seen {
                // An episode that measured too little to say keeps the last estimate.
                let payload_scale = a.cost.payload_scale(&self.workload.apps[i]).unwrap_or(a.payload_scale);
                a.payload_scale = payload_scale;
                a.cost = CostMeter::default();
                let (rates, start) = (std::mem::take(&mut a.rates), a.episode_start.take());
                let (start_s, fallback, guard) = (a.episode_start_s, a.episode_fallback.take(), a.episode_guard.take());
                a.recent_traffic.push_back(Replay {
                    episode,
                    rates,
                    payload_scale,
                    start,
                    start_s,
                    fallback,
                    guard,
                    unfaithful: None,
                });
                while a.recent_traffic.len() > self.config.shadow_episodes.max(1) {
                    a.recent_traffic.pop_front();
                }
            }
            let a = &self.apps[i];
            let outcome = EpisodeOutcome {
                mean_reward: if a.intervals > 0 { a.reward / a.intervals as f64 } else { f64::NAN },
                slo_violations: a.violations,
                intervals: a.intervals,
                // What the agent reserved acting is not measured as the shadow's scorer
                // measures the fallback's replay; the operator's test applies to shadow runs.
                core_seconds: None,
            };
            let stage = a.lifecycle.stage();
            // The agent acted this episode (not the fallback for it).
            let agent_acted = a.counts.agent_actions > a.episode_start_agent_actions;
            // High stakes: in ONLINE the fallback acted while the agent retrained, so its
            // rewards say nothing of the agent's. The agent is judged on this episode's traffic in
            // the shadow instead, and without that (no traffic seen, no embedding vouched for)
            // no stage moves on the episode.
            let judged_in_shadow = stage == Stage::Online && self.config.is_high_stakes() && !agent_acted;
            // Its actions this episode were the agent's exploring ones (retraining, or exploring
            // ONLINE with `online_noise_sigma`): what they earned is the price of learning, not
            // the policy's, which is judged greedily on the episode's traffic instead (below).
            let explored = agent_acted && self.agent.explores(&self.config, stage, a.lifecycle.retraining());
            let vouched = self.embedding_width() == 0
                || (a.embedding.is_some() && matches!(a.workload, Some(WorkloadVerdict::Known { .. })));
            let judged_greedily = stage == Stage::Online && explored && self.bootstrapping() && vouched;
            // Set where the replay did not reproduce what the fallback did on this episode's
            // traffic: its model of the app is not to be trusted with the agent either.
            let mut unfaithful = None;
            let shadow = if !seen || self.config.fixed_stage.is_some() {
                None
            } else {
                let profile = self.workload.app_profile(i);
                // Not for a residual agent, as where the manager hands an app back (only the
                // `converged` reference acts residually, and the policy alone is never handed back).
                let deployed = a.deployed.as_ref().filter(|_| !self.config.residual);
                let episode_app = |recent| replay(self.workload, &profile, i, recent, deployed);
                let guard = self.config.replay_guard_config(&profile, a.lifecycle.rules_failed());
                let compare = |recent| {
                    shadow::compare(
                        &episode_app(recent),
                        &self.agent,
                        a.embedding.as_deref(),
                        &self.config.fallback,
                        self.config.fallback_floor,
                        self.config.residual,
                        &guard,
                    )
                };
                match stage {
                    // A conditioned agent is tried only with an embedding the meta-learner
                    // vouches for now (none yet, a refusal or an unfamiliar workload: not yet).
                    _ if (stage == Stage::Offline || judged_in_shadow) && !vouched => None,
                    Stage::Online if judged_in_shadow => match a.recent_traffic.back() {
                        Some(this) => {
                            // The fallback drove this episode: the same test of its replay.
                            let c = compare(this)?;
                            unfaithful = replay_misses(&outcome, &c.fallback, a.intervals);
                            Some(c)
                        }
                        None => None,
                    },
                    Stage::Offline => {
                        let outcomes = a.recent_traffic.iter().map(compare).collect::<Result<Vec<_>, _>>()?;
                        // The fallback acted for this episode: its replay must come out as the
                        // episode did, or the replay's model of the app is wrong (a change the
                        // cost meter could not measure, e.g. pods saturated throughout).
                        unfaithful = outcomes
                            .last()
                            .filter(|_| !agent_acted)
                            .and_then(|replayed| replay_misses(&outcome, &replayed.fallback, a.intervals));
                        Some(ShadowComparison::pooled(&outcomes))
                    }
                    // An app whose actions explored (an app retraining) is judged as a
                    // bootstrapping agent is, greedily on this episode's traffic against the
                    // fallback's replay (judged on its noisy actions, an app handed back to
                    // retrain was handed back to the fallback two episodes later, learning from
                    // neither); its stage moves on the greedy replay's outcome too.
                    _ if judged_greedily => match a.recent_traffic.back() {
                        Some(this) => Some(compare(this)?),
                        None => None,
                    },
                    Stage::Online | Stage::Serving if agent_acted && self.bootstrapping() => {
                        // This episode's traffic: the last one added.
                        match a.recent_traffic.back() {
                            Some(this) => {
                                let fallback = shadow::fallback_with_guard(
                                    &episode_app(this),
                                    &self.config.fallback,
                                    &self.config.guard_config(&profile),
                                )?;
                                Some(ShadowComparison { agent: outcome, fallback })
                            }
                            None => None,
                        }
                    }
                    _ => None,
                }
            };
            // A replay found unfaithful stays so while the check pools it.
            if let (Some(why), Some(newest)) = (&unfaithful, self.apps[i].recent_traffic.back_mut()) {
                newest.unfaithful = Some(why.clone());
            }
            if stage == Stage::Offline && shadow.is_some() && unfaithful.is_none() {
                unfaithful = pooled_unfaithful(&self.apps[i].recent_traffic, self.config.episode_steps);
            }
            let a = &self.apps[i];
            // An episode the meta-learner held back for the fallback says nothing about the
            // agent: no stage moves on it (a held ONLINE app is not promoted on the fallback's
            // rewards, a held SERVING one not judged degraded by them).
            let held = a.counts.workload_holds > a.episode_start_workload_holds && !agent_acted;
            // A replay that missed its episode is no comparison: the app is not checked on it.
            let shadow = match &unfaithful {
                Some(why) => {
                    self.apps[i].lifecycle.unchecked(why);
                    None
                }
                None => shadow,
            };
            let transition = match self.config.fixed_stage {
                Some(_) => None,
                None if held => None,
                None if judged_in_shadow => match shadow {
                    Some(s) => self.apps[i].lifecycle.episode_end(s.agent, Some(s)),
                    None => None,
                },
                // The policy's rewards, not its exploration's, are what converge (and become
                // SERVING's reference); without a faithful replay, what it earned acting.
                None if judged_greedily => match shadow {
                    Some(s) => self.apps[i].lifecycle.episode_end(s.agent, Some(s)),
                    None => self.apps[i].lifecycle.episode_end(outcome, None),
                },
                None => self.apps[i].lifecycle.episode_end(outcome, shadow),
            };
            if let Some(t) = transition {
                self.log(i, t);
            }
            let a = &mut self.apps[i];
            if a.intervals > 0 {
                a.last_reward = Some(a.reward / a.intervals as f64);
            }
            a.run_violations += a.violations;
            (a.reward, a.intervals, a.violations) = (0.0, 0, 0);
            a.episode_start_agent_actions = a.counts.agent_actions;
            a.episode_start_workload_holds = a.counts.workload_holds;
        }
        // An app handed over now is served with the agent its check just passed.
        self.certify();
        self.episode += 1;
        Ok(())
    }
}

impl Driver for Manager<'_> {
    /// On a fresh cluster every app's fallback and guard start afresh; on one that goes on
    /// from the last episode's they carry on, as they would on a running cluster. The agent and
    /// the lifecycles carry on either way. The fallback and the guard as they are now are kept
    /// for the bootstrapping check's replay of the episode.
    fn episode_start(&mut self, start: EpisodeStart) {
        for a in &mut self.apps {
            if start == EpisodeStart::Fresh {
                a.fallback.recommender().restart();
                a.guard.restart();
                a.headroom.forget();
                a.probe = Probe::default();
            }
            a.episode_fallback = a.fallback.snapshot();
            a.episode_guard = Some(a.guard.clone());
            // The agent's episode ended with the last one (its last transition was cut there):
            // no transition spans two episodes.
            a.pending = None;
        }
    }

    fn decide(&mut self, arena: &dyn Arena, states: &[Vec<f32>], infos: &[StepInfo]) -> Result<Vec<Control>, LabError> {
        let mut controls = Vec::with_capacity(self.apps.len());
        if self.config.log && self.log.transitions.len() < self.apps.len() {
            self.log.transitions.resize_with(self.apps.len(), Vec::new);
            self.log.episode_stage = self.apps.iter().map(|a| a.lifecycle.stage()).collect();
            self.log.agent_acted = vec![false; self.apps.len()];
        }
        let mut seen = Vec::with_capacity(states.len());
        for (i, state) in states.iter().enumerate() {
            let obs = arena
                .observe(i)
                .ok_or_else(|| LabError::input("backend", "the lifecycle manager needs observations"))??;
            let stage = self.apps[i].lifecycle.stage();
            let held = match &self.apps[i].workload {
                Some(WorkloadVerdict::Hold { reason }) if self.agent_acts(stage) => Some(reason.clone()),
                _ if self.agent_acts(stage) && self.embedding_width() > 0 && self.apps[i].embedding.is_none() => Some(
                    "no workload embedding yet (the meta-learner reads it from the app's recorded episodes)".into(),
                ),
                _ => None,
            };
            let wants_agent = self.agent_acts(stage) && held.is_none();
            let checked = self.apps[i].guard.check(&obs, state);
            // The episode's first decision reads the outcome its reset reported, not an
            // interval served.
            let served = infos.get(i).filter(|_| !self.apps[i].rates.is_empty()).map(|info| info.slo_violated);
            self.apps[i].guard.note_slo(&obs, served);
            seen.push((obs, stage, wants_agent, checked, held));
        }
        // A residual agent reads the fallback's proposal in its state: asked here, once per
        // interval and app as ever, before the agent acts; it completes the last interval's
        // transitions too.
        let asking = ask_width(self.config.residual) > 0;
        let mut asks: Vec<Option<Recommendation>> = vec![None; seen.len()];
        if asking {
            let mut offline = 0;
            for (i, (obs, ..)) in seen.iter().enumerate() {
                let a = &mut self.apps[i];
                asks[i] = a.fallback.recommender().recommend(obs).ok();
                a.ask = ask_features(&a.decoder.bounds, asks[i].as_ref(), obs);
                let Some(decided) = a.pending.take() else { continue };
                let ask = &self.apps[i].ask;
                if let Some(next_state) = self.agent_state(i, &decided.e.next_state, ask) {
                    let e = Experience { next_state, ..decided.e.clone() };
                    offline += self.learn(i, &e, &decided, false)? as usize;
                }
            }
            if offline > 0 {
                self.agent.train_offline(offline * self.config.offline_updates, self.config.bc_alpha)?;
            }
        }
        // One forward pass for every app the agent acts for this interval.
        let acting: Vec<usize> = (0..seen.len()).filter(|&i| seen[i].2 && seen[i].3.is_ok()).collect();
        // The fallback's proposal the guard floors the agent's action under, asked (once per
        // interval and app, as ever) before the agent acts: an exploring app explores around
        // what the guard lets its action do.
        if !asking && self.config.fallback_floor {
            for &i in &acting {
                asks[i] = self.apps[i].fallback.recommender().recommend(&seen[i].0).ok();
            }
        }
        let agent_states: Vec<Option<Vec<f32>>> =
            (0..states.len())
                .map(|i| {
                    if seen[i].2 && seen[i].3.is_ok() {
                        self.agent_state(i, &states[i], &self.apps[i].ask)
                    } else {
                        None
                    }
                })
                .collect();
        // The apps that act with the learning agent, in one batched pass; the others with the
        // policy each was handed over with (certified wherever a stage changes), one pass per
        // certified copy.
        let batch: Vec<f32> = acting.iter().flat_map(|&i| agent_states[i].iter().flatten().copied()).collect();
        let served: Vec<Option<FrozenPolicy>> = acting.iter().map(|&i| self.apps[i].certified.clone()).collect();
        let explore: Vec<Option<f32>> = acting
            .iter()
            .map(|&i| self.agent.exploration(&self.config, seen[i].1, self.apps[i].lifecycle.retraining()))
            .collect();
        // Where the configuration says so, an exploring app's decreases are not held by the
        // guard's stabilisation window ([`ManagerConfig::unheld_exploration`]).
        for &i in &acting {
            let explores = self.agent.explores(&self.config, seen[i].1, self.apps[i].lifecycle.retraining());
            self.apps[i].guard.set_exploring(self.config.unheld_exploration && explores);
            self.apps[i].guard.set_explores(explores);
        }
        let mut actions: Vec<Option<Vec<f32>>> = vec![None; seen.len()];
        let mut explored = vec![false; seen.len()];
        // An exploring app explores around what the guard lets its action do, measured from
        // where its actions are (the fallback's proposal for a residual agent, the current
        // allocation otherwise).
        let mut ceilings: Vec<Option<Recommendation>> = vec![None; seen.len()];
        for &i in &acting {
            let a = &mut self.apps[i];
            let lifted = a.lifecycle.ceiling_lifted();
            ceilings[i] =
                self.config.ceiling(&mut a.fallback, a.deployed.as_ref(), asks[i].as_ref(), lifted, &a.decoder.bounds);
        }
        let apps = &self.apps;
        let config = &self.config;
        let mut centres: Vec<Option<Vec<f32>>> = vec![None; seen.len()];
        let mut effective = |k: usize, v: Vec<f32>| {
            let i = acting[k];
            let obs = &seen[i].0;
            let (from, from_replicas) = apps[i].origin(asks[i].as_ref(), config.residual, obs);
            let at =
                config.acting_from(&apps[i].decoder, &from, from_replicas, asks[i].as_ref(), ceilings[i].as_ref(), obs);
            let c = at.applied(&apps[i].guard, v);
            if config.retrain_probes {
                centres[i] = Some(c.clone());
            }
            c
        };
        let acted = act_served(&mut self.agent, &batch, &acting, &served, &explore, &mut effective)?;
        for (&i, (action, e)) in acting.iter().zip(acted) {
            (actions[i], explored[i]) = (Some(action), e);
        }
        let sampling = self.agent.algorithm() == Learner::Ppo;
        for (i, (obs, stage, wants_agent, checked, held)) in seen.into_iter().enumerate() {
            let agent_action = if wants_agent && checked.is_ok() { actions[i].take() } else { None };
            let probing =
                agent_action.is_some() && self.config.probes(self.apps[i].lifecycle.retraining(), explored[i]);
            let centre = if probing { centres[i].take() } else { None };
            self.apps[i].sampled = None;
            if explored[i] && sampling {
                self.apps[i].sampled = agent_action.clone();
            }
            let attribution = match (&agent_action, &agent_states[i]) {
                (Some(v), Some(s)) if self.config.log => {
                    let names = decision::named_features(self.config.residual);
                    let policy = acting_policy(&self.agent, self.apps[i].certified.as_ref());
                    Some(decision::explain_action(policy, s, v, &names)?)
                }
                _ => None,
            };
            let a = &mut self.apps[i];
            a.deployed.get_or_insert_with(|| (obs.desired_replicas, obs.template.clone()));
            if a.rates.is_empty() {
                a.episode_start = Some(observed_start(&obs));
                // The episode's first interval (the one its reset ran) ended now.
                a.episode_start_s = obs.time_s - arena.interval_s();
            }
            a.rates.push(obs.arrival_rate.max(0.0));
            // Only the shadow check reads the meter, and a fixed stage runs none.
            if checked.is_ok() && self.config.fixed_stage.is_none() {
                a.cost.measure(&obs);
            }
            let mut verdict = "passed".to_string();
            if let Some(reason) = held {
                a.counts.workload_holds += 1;
                verdict = format!("fallback: {reason}");
            }
            if let (Err(reason), true) = (&checked, wants_agent) {
                a.counts.guard_fallbacks += 1;
                a.counts.last_guard_reason = Some(reason.to_string());
                verdict = format!("fallback: {reason}");
            }
            let agent_acted = agent_action.is_some();
            if agent_acted {
                a.counts.agent_actions += 1;
            } else {
                a.counts.fallback_actions += 1;
            }
            if agent_action.is_none() {
                // What the rules do is no probe's path.
                a.probe = Probe::default();
            }
            let control = match agent_action {
                Some(v) => {
                    // The fallback's proposal was asked before the agent acted (for its state
                    // or the guard's floor), where either needs it.
                    let fallback_ask = asks[i].take();
                    let (from, from_replicas) = a.origin(fallback_ask.as_ref(), self.config.residual, &obs);
                    let ceiling = ceilings[i].take();
                    let at = self.config.acting_from(
                        &a.decoder,
                        &from,
                        from_replicas,
                        fallback_ask.as_ref(),
                        ceiling.as_ref(),
                        &obs,
                    );
                    let g = at.guard_probing(&mut a.guard, &mut a.probe, v, centre.as_deref())?;
                    if let Some(why) = g.limited {
                        a.counts.guard_limited += 1;
                        verdict = format!("limited: {why}");
                    }
                    a.headroom.remember(g.base_cpu, &g.rec);
                    a.action = at.coordinates(&g.rec).unwrap_or_default();
                    Control::Recommendation(g.rec)
                }
                // The fallback sees every observation (its own checks refuse bad ones).
                None => match if asking { asks[i].take() } else { a.fallback.recommender().recommend(&obs).ok() } {
                    Some(mut rec) => {
                        // A residual agent's action 0 is the proposal as asked (its state
                        // read it): what the guard's rules change is its action.
                        let asked = {
                            let (c, replicas) = action_origin(Some(&rec), true, &obs);
                            (replicas, c.limits)
                        };
                        // Handed to the rules (not for one refused observation): with what
                        // they do not manage as deployed, never below (not for a residual
                        // agent, as in the bootstrapping check's replays).
                        let scope = a.fallback.recommender().scope();
                        let handed_back =
                            a.deployed.as_ref().filter(|_| !wants_agent && !self.config.residual).map(|d| (scope, d));
                        guard_fallback(&a.guard, &mut rec, obs.time_s, &a.decoder.bounds, handed_back, &mut verdict);
                        // The headroom's record stays: a fallback that keeps the current
                        // allocation keeps the raised CPU, and one that moves it no longer
                        // matches the record.
                        a.guard.witness(&rec, &obs.template);
                        // Measured from where the agent's action is: the fallback's own
                        // decision as asked is the action 0 for a residual agent.
                        let now = match self.config.residual {
                            true => (&asked.1, asked.0),
                            false => (&obs.template.limits, obs.desired_replicas),
                        };
                        a.action = measured_from(&a.decoder.bounds, &rec, &obs, now).unwrap_or_default();
                        Control::Recommendation(rec)
                    }
                    None => {
                        a.action = vec![0.0; 3];
                        Control::Hold
                    }
                },
            };
            if self.config.log {
                let action = match &control {
                    Control::Recommendation(rec) => Set::of(rec),
                    _ => None,
                };
                let acting_policy = if agent_acted { "aware".to_string() } else { self.config.fallback.to_string() };
                self.log.agent_acted[i] |= agent_acted;
                self.log.decisions.push(Decision {
                    app: a.name.clone(),
                    step: self.step,
                    stage,
                    acting_policy,
                    observation: Some(Seen::of(&obs)),
                    action,
                    guard: verdict,
                    attribution,
                });
            }
            controls.push(control);
        }
        Ok(controls)
    }

    fn feedback(&mut self, interval: &Interval) -> Result<(), LabError> {
        let mut offline = 0;
        for (i, (state, step)) in interval.states.iter().zip(&interval.out.steps).enumerate() {
            let a = &mut self.apps[i];
            a.reward += step.reward;
            a.intervals += 1;
            // Counted as the shadow's scorer counts its replays (by the true p99 where the
            // backend knows it), so the two compare like with like.
            a.violations += interval.slo_violated(i) as u64;
            let stage = a.lifecycle.stage();
            let e = Experience {
                state: state.clone(),
                action: a.action.clone(),
                reward: step.reward as f32,
                next_state: step.observation.clone(),
                terminal: step.terminated,
            };
            let finite = e.state.iter().chain(&e.next_state).all(|v| v.is_finite()) && e.reward.is_finite();
            if !(interval.measured(i) && finite) {
                // Never learn from what the guard would not let act; PPO's rollout is cut
                // there, so no advantage reaches across the gap.
                self.agent.cut(i);
                continue;
            }
            if self.config.log {
                self.log.transitions[i].push(e.clone());
            }
            // A conditioned agent learns from an app's transitions once it has the app's
            // embedding (the store keeps them all, and the embedding is read from them). It
            // learns from the fallback's transitions of a held app too, with its last embedding:
            // they show the fallback on that workload, whatever the verdict on acting.
            // The agent learns what its violations are priced at (the log and the store keep
            // the reward itself).
            let reward = e.reward - if step.info.slo_violated { self.config.violation_price } else { 0.0 };
            let a = &self.apps[i];
            let Some(state) = self.agent_state(i, &e.state, &a.ask) else { continue };
            let truncated = step.truncated || a.intervals >= self.config.episode_steps;
            let decided = Pending {
                e: Experience { state, reward, ..e },
                stage,
                retraining: a.lifecycle.retraining(),
                sampled: a.sampled.clone(),
            };
            // A residual agent's next state holds the fallback's next proposal, asked when the
            // next interval is decided; at the episode's end, none (the fallback holding).
            if ask_width(self.config.residual) > 0 && !(truncated || step.terminated) {
                self.apps[i].pending = Some(decided);
                continue;
            }
            let ask = vec![0.0; ask_width(self.config.residual)];
            let Some(next_state) = self.agent_state(i, &decided.e.next_state, &ask) else { continue };
            let e = Experience { next_state, ..decided.e.clone() };
            offline += self.learn(i, &e, &decided, truncated)? as usize;
        }
        if offline > 0 {
            self.agent.train_offline(offline * self.config.offline_updates, self.config.bc_alpha)?;
        }
        let mut in_stage = [0u32; 4];
        for a in &self.apps {
            in_stage[a.lifecycle.stage().index()] += 1;
        }
        self.stage_series.push(in_stage);
        self.step += 1;
        if interval.out.steps.iter().any(|s| s.truncated || s.terminated)
            || self.apps.first().is_some_and(|a| a.intervals >= self.config.episode_steps)
        {
            self.end_episode()?;
        }
        Ok(())
    }
}

/// The fallback's `rec` under the guard's rules for it, each said in `verdict` when it changed
/// anything, in this order: back to what the pods last ran where none has had a node for the
/// grace, spread over smaller pods (none below the CPU the restore hands back) where that did
/// not get one placed ([`Guard::roll_back_unplaced_keeping`]); where the stage hands the app to the fallback
/// (`handed_back`: the fallback's scope and the app's deployed allocation), what the fallback
/// does not set raised back to the deployment ([`restore_unmanaged`], so the roll-back never
/// undoes it); then over the floor after an OOM kill ([`Guard::keep_oom_floor`]). The manager,
/// the live decider and the bootstrapping check's replays apply it wherever the fallback acts.
pub(crate) fn guard_fallback(
    guard: &Guard,
    rec: &mut Recommendation,
    now_s: f64,
    bounds: &aware_core::Bounds,
    handed_back: Option<(aware_core::Scope, &(u32, ContainerResources))>,
    verdict: &mut String,
) {
    let mut say = |what: &str, why: String| {
        *verdict = if verdict == "passed" { format!("{what}: {why}") } else { format!("{verdict}; {what}: {why}") };
    };
    // CPU the restore below raises back to (a fallback that does not set it): the spread of an
    // unplaced app cuts no pod below it.
    let cpu_kept = match handed_back {
        Some((scope, (replicas, template))) if !scope.cpu => within_bounds(*replicas, template, bounds).1,
        _ => 0,
    };
    if let Some(why) = guard.roll_back_unplaced_keeping(rec, bounds, cpu_kept) {
        say("lowered", why);
    }
    if let Some((scope, (replicas, template))) = handed_back
        && let Some(why) = restore_unmanaged(rec, scope, (*replicas, template), bounds)
    {
        say("restored", why);
    }
    if let Some(why) = guard.keep_oom_floor(rec, now_s, bounds) {
        say("raised", why);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use aware_core::Resources;

    /// The guard's ceiling measures the agent against the fallback's proposal, the CPU limit
    /// MPA does not set against the deployment; not where it is lifted (the rules failed the
    /// app, and growth beyond their proposal served better), nor for the policy alone (no
    /// floor, no ceiling).
    #[test]
    fn the_ceiling_is_the_fallbacks_proposal_unless_the_rules_failed() {
        let profile = aware_core::Profile::default();
        let mut mpa = Policy::build(&PolicyName::Mpa, &profile, None, Some(200.0)).unwrap();
        let c = |cpu, mib: u64| ContainerResources::guaranteed(CONTAINER, Resources::new(cpu, mib * MIB));
        let ask = Recommendation { replicas: 6, containers: vec![c(4000, 300)] };
        let deployed = (4, c(1000, 512));
        let config = ManagerConfig::default();
        let got = config.ceiling(&mut mpa, Some(&deployed), Some(&ask), false, &profile.bounds).unwrap();
        assert_eq!((got.replicas, got.containers[0].limits), (6, Resources::new(1000, 300 * MIB)));
        assert!(config.ceiling(&mut mpa, Some(&deployed), Some(&ask), true, &profile.bounds).is_none());
        let alone = ManagerConfig { fallback_floor: false, ..config };
        assert!(alone.ceiling(&mut mpa, Some(&deployed), Some(&ask), false, &profile.bounds).is_none());
    }

    /// The replay of an episode starts from the deployment its first observation shows as the
    /// simulator's own continuation carries it: a pod whose resize no node could admit still
    /// serves at its old size, and the replay goes on with the rollout instead of starting
    /// every pod at the new template (which a full cluster had not let it reach).
    #[test]
    fn a_replay_starts_with_the_pods_a_stuck_resize_left_serving() {
        use aware_core::Cluster;
        use aware_sim::{SimCluster, SimConfig, generate_apps};
        let rec = |replicas, cpu, mem| Recommendation {
            replicas,
            containers: vec![ContainerResources::guaranteed(CONTAINER, Resources::new(cpu, mem))],
        };
        let apps = generate_apps(2, 11, 86_400.0);
        let config = SimConfig { noise: 0.0, nodes: Some(1), node_cores: 64.0, ..SimConfig::default() };
        let mut cluster = SimCluster::new(apps, Vec::new(), config, 3);
        // The first app fills the node, then the second asks for more CPU per pod than it
        // holds in all: no resize is admitted.
        cluster.apply(0, &rec(200, 1000, 256 * MIB)).unwrap();
        cluster.advance().unwrap();
        let before = cluster.observe(1).unwrap();
        let held = before.replica_counts().ready;
        assert!(held > 0);
        let bigger = (held as u64 + 1) * before.template.requests.cpu_millicores;
        cluster.apply(1, &rec(held, bigger, before.template.requests.memory_bytes)).unwrap();
        for _ in 0..3 {
            cluster.advance().unwrap();
        }
        let start = observed_start(&cluster.observe(1).unwrap());
        assert_eq!(start.outdated.len(), held as usize, "the serving old pods are dropped: {start:?}");
        assert_eq!(start.bound, Some(0));
        assert_eq!(start.template.requests.cpu_millicores, bigger);
        let carried = &cluster.continuation().deployments[1];
        assert_eq!(
            (start.replicas, &start.template, start.bound),
            (carried.replicas, &carried.template, carried.bound)
        );
        assert_eq!(start.outdated, carried.outdated);
        // With no rollout under way, every pod a node holds counts as bound, none as old.
        let settled = observed_start(&cluster.observe(0).unwrap());
        assert!(settled.outdated.is_empty());
        assert_eq!(settled.bound, cluster.continuation().deployments[0].bound);
    }

    /// What the fallback does not set is handed back as deployed, never below; what it sets,
    /// and anything at or above the deployment, passes. Deployed: 4 × (1000 m, 512 MiB); one
    /// case per row: (the fallback's scope, its proposal, what acts).
    #[test]
    fn a_dimension_the_fallback_does_not_set_is_handed_back_as_deployed_table() {
        let rec = |replicas, cpu, mib: u64| Recommendation {
            replicas,
            containers: vec![ContainerResources::guaranteed(CONTAINER, Resources::new(cpu, mib * MIB))],
        };
        let mpa = aware_core::Scope { replicas: true, cpu: false, memory: true };
        let hpa = aware_core::Scope { replicas: true, cpu: false, memory: false };
        let vpa = aware_core::Scope { replicas: false, cpu: true, memory: true };
        let deployed = ContainerResources::guaranteed(CONTAINER, Resources::new(1000, 512 * MIB));
        for (scope, proposal, want) in [
            // The agent left 374 m: MPA adds replicas of 374 m, the limit comes back.
            (mpa, rec(6, 374, 256), rec(6, 1000, 256)),
            // Above the deployment: left as the agent grew it.
            (mpa, rec(6, 2000, 256), rec(6, 2000, 256)),
            (hpa, rec(2, 500, 300), rec(2, 1000, 512)),
            (vpa, rec(2, 500, 300), rec(4, 500, 300)),
            (aware_core::Scope::ALL, rec(1, 100, 64), rec(1, 100, 64)),
        ] {
            let mut got = proposal.clone();
            let why = restore_unmanaged(&mut got, scope, (4, &deployed), &aware_core::Profile::default().bounds);
            assert_eq!(got, want, "{scope:?} {proposal:?}");
            assert_eq!(why.is_some(), want != proposal, "{why:?}");
            if let Some(why) = why {
                assert!(why.contains("as deployed"), "{why}");
            }
        }
        // The baselines say what they set: HPA replicas, the MPA default replicas and memory.
        use aware_core::Recommender;
        let profile = aware_core::Profile::default();
        let hpa_scope = aware_baselines::HorizontalPodAutoscaler::from_profile(&profile).scope();
        assert_eq!(hpa_scope, hpa);
        assert_eq!(aware_baselines::MultidimPodAutoscaler::from_profile(&profile, false).scope(), mpa);
        assert_eq!(
            aware_baselines::MultidimPodAutoscaler::from_profile(&profile, true).scope(),
            aware_core::Scope::ALL
        );
    }

    /// A replay of an episode the fallback drove is believed unless it violates the SLO in
    /// fewer intervals than the episode did by more than a tenth of the episode (at least one):
    /// one case per row.
    #[test]
    fn a_replay_that_misses_the_episode_it_replays_is_not_believed_table() {
        let outcome =
            |slo_violations| EpisodeOutcome { mean_reward: 0.0, slo_violations, intervals: 100, core_seconds: None };
        // (violations in the episode, in its replay, intervals, believed)
        for (real, replayed, intervals, believed) in [
            (100, 0, 100, false),
            (4, 0, 100, true),
            (10, 0, 100, true),
            (11, 0, 100, false),
            (30, 20, 100, true),
            (31, 20, 100, false),
            (0, 50, 100, true),
            (1, 0, 5, true),
            (2, 0, 5, false),
            (0, 0, 0, true),
        ] {
            let why = replay_misses(&outcome(real), &outcome(replayed), intervals);
            assert_eq!(why.is_none(), believed, "{real} / {replayed} of {intervals}: {why:?}");
            if let Some(why) = why {
                assert!(why.contains(&format!("{real} of {intervals} intervals, its replay in {replayed}")), "{why}");
            }
        }
    }

    /// A replay found not to reproduce its episode keeps the pooled check from trusting the
    /// pool until it leaves it, however the newer replays fare.
    #[test]
    fn a_replay_found_unfaithful_is_distrusted_while_the_check_pools_it() {
        let replay = |episode, unfaithful: Option<&str>| Replay {
            episode,
            rates: vec![1.0; 4],
            payload_scale: 1.0,
            start: None,
            start_s: 0.0,
            fallback: None,
            guard: None,
            unfaithful: unfaithful.map(str::to_string),
        };
        let outcome =
            |slo_violations| EpisodeOutcome { mean_reward: 0.0, slo_violations, intervals: 100, core_seconds: None };
        let miss = replay_misses(&outcome(40), &outcome(0), 100).unwrap();
        let mut pool: std::collections::VecDeque<Replay> = std::collections::VecDeque::new();
        pool.push_back(replay(3, None));
        assert_eq!(pooled_unfaithful(&pool, 100), None);
        pool.push_back(replay(4, Some(&miss)));
        pool.push_back(replay(5, None));
        let why = pooled_unfaithful(&pool, 100).expect("an unfaithful replay is pooled");
        assert_eq!(
            why,
            "the replay of the episode from step 400, one of the 3 the check pools, did not reproduce it: \
             the fallback violated the SLO in 40 of 100 intervals, its replay in 0 (more than 10 apart), so the \
             replay's model of the app is not trusted with the agent"
        );
        // It names the oldest such replay, and trusts the pool once the last has left it.
        pool.push_back(replay(6, Some(&miss)));
        pool.pop_front();
        assert!(pooled_unfaithful(&pool, 100).unwrap().contains("from step 400"));
        pool.pop_front();
        assert!(pooled_unfaithful(&pool, 100).unwrap().contains("from step 600"));
        pool.pop_back();
        assert_eq!(pooled_unfaithful(&pool, 100), None);
    }

    fn rec(cpu: u64, replicas: u32) -> Recommendation {
        Recommendation {
            replicas,
            containers: vec![ContainerResources::guaranteed(CONTAINER, Resources::new(cpu, 1 << 30))],
        }
    }

    /// A decoder within 20 replicas × 4,000 m × 8 GiB, and a simulated app's first observation.
    fn box_of_20_by_4_cores() -> (ActionDecoder, Observation) {
        use aware_core::Cluster;
        let bounds = aware_core::Bounds {
            max_replicas: 20,
            max_cpu_millicores: 4_000,
            max_memory_mib: 8_192,
            ..aware_core::Profile::default().bounds
        };
        let decoder =
            ActionDecoder { kind: AGENT_ACTIONS, bounds, container: CONTAINER.into(), cpu_request_ratio: 1.0 };
        let mut c = aware_sim::SimCluster::new(
            aware_sim::generate_apps(1, 7, 86_400.0),
            Vec::new(),
            aware_sim::SimConfig::default(),
            7,
        );
        c.advance().unwrap();
        (decoder, c.observe(0).unwrap())
    }

    /// The next action is measured from the probe's path only while the app is where the
    /// probe left it: once anything else moved it (the rules, a restart), from where it is.
    #[test]
    fn a_probe_is_the_origin_only_while_the_app_is_where_it_left_it() {
        let bounds = aware_core::Profile::default().bounds;
        let c = |cpu: u64, mib: u64| ContainerResources::guaranteed(CONTAINER, Resources::new(cpu, mib << 20));
        let rec = |replicas: u32, cpu: u64, mib: u64| Recommendation { replicas, containers: vec![c(cpu, mib)] };
        let mut probe = Probe::default();
        let origin = |probe: &Probe, from: &ContainerResources, replicas: u32| {
            let (from, replicas) = probe.origin(from, replicas);
            (from.into_owned(), replicas)
        };
        assert_eq!(origin(&probe, &c(1_200, 1_024), 5), (c(1_200, 1_024), 5), "no probe yet");
        probe.remember(&rec(5, 1_200, 1_280), &rec(4, 1_000, 1_024), &c(1_000, 1_024), &bounds);
        assert_eq!(origin(&probe, &c(1_200, 1_280), 5), (c(1_000, 1_024), 4), "where the probe left it");
        assert_eq!(origin(&probe, &c(1_300, 1_280), 5), (c(1_300, 1_280), 5), "moved since");
        assert_eq!(origin(&probe, &c(1_200, 1_280), 6), (c(1_200, 1_280), 6), "scaled since");
    }

    /// A retraining app's noise acts as a probe around its greedy path: an agent whose greedy
    /// action holds, exploring by steps of ±0.25 in turn, stays within one step of where it
    /// began. Without the probe the same noise compounds through the relative actions and the
    /// stabilisation window turns it into a ratchet (each step up acts, each step down is held
    /// at the highest of the last 20 proposals): the allocation climbs to the bounds.
    #[test]
    fn a_retraining_probe_returns_to_its_path_where_compounding_noise_ratchets_up() {
        let (decoder, mut obs) = box_of_20_by_4_cores();
        let config = ManagerConfig { fallback_floor: false, ..ManagerConfig::default() };
        let start = (4u32, 1_000u64, 1_024u64 << 20);
        let mut run = |probing: bool| {
            let (mut guard, mut probe) = (Guard::new(GuardConfig::default()), Probe::default());
            let (mut replicas, mut cpu, mut memory) = start;
            let mut highest = start;
            for t in 0..200 {
                obs.desired_replicas = replicas;
                obs.template = ContainerResources::guaranteed(CONTAINER, Resources::new(cpu, memory));
                let (from, from_replicas) = if probing {
                    probe.origin(&obs.template, replicas)
                } else {
                    (Cow::Borrowed(&obs.template), replicas)
                };
                let at = config.acting_from(&decoder, &from, from_replicas, None, None, &obs);
                // The greedy action holds; the noise is drawn around what the guard lets it do.
                let centre = at.applied(&guard, vec![0.0; 3]);
                let step = if t % 2 == 0 { 0.25 } else { -0.25 };
                let noisy: Vec<f32> = centre.iter().map(|c| (c + step).clamp(-1.0, 1.0)).collect();
                let g = at.guard_probing(&mut guard, &mut probe, noisy, probing.then_some(centre.as_slice())).unwrap();
                let container = &g.rec.containers[0].limits;
                (replicas, cpu, memory) = (g.rec.replicas, container.cpu_millicores, container.memory_bytes);
                highest = (highest.0.max(replicas), highest.1.max(cpu), highest.2.max(memory));
            }
            ((replicas, cpu, memory), highest)
        };
        let (end, highest) = run(true);
        // One step up of each: CPU and memory ×2^0.25, replicas ×2^0.5 (their range is twice).
        assert!(
            highest.0 <= 6 && highest.1 <= 1_200 && highest.2 <= 1_250 << 20,
            "probing: {end:?}, highest {highest:?}"
        );
        assert!(
            end.0 >= 3 && end.1 >= 840 && end.2 >= 1_024 << 20,
            "probing never goes below the path's memory: {end:?}"
        );
        let (end, _) = run(false);
        assert!(end.0 >= 16 && end.1 >= 3_000, "compounding noise ratchets to the bounds: {end:?}");
    }

    /// An actor saturated at "grow everything" acts through the rules' net: with the ceiling,
    /// what acts stays within twice the cores and twice the memory the fallback proposes
    /// (here 2 pods of 1,000 m and 512 MiB, every interval); without it, the step caps only
    /// slow its climb to the bounds.
    #[test]
    fn a_saturated_actor_stays_under_the_ceiling_and_climbs_to_the_bounds_without_it() {
        let (decoder, mut obs) = box_of_20_by_4_cores();
        let ask = Recommendation {
            replicas: 2,
            containers: vec![ContainerResources::guaranteed(CONTAINER, Resources::new(1_000, 512 << 20))],
        };
        let run = |ceiling: f64, obs: &mut Observation| {
            let limits = aware_core::GuardLimits { fallback_ceiling: ceiling, ..Default::default() };
            let mut guard = Guard::new(GuardConfig::for_agent(&limits, true, None));
            let config = ManagerConfig::default();
            obs.desired_replicas = 2;
            obs.template = ask.containers[0].clone();
            let mut most = (0.0f64, 0u64);
            for _ in 0..40 {
                let template = obs.template.clone();
                let at = config.acting_from(&decoder, &template, obs.desired_replicas, Some(&ask), Some(&ask), obs);
                let g = at.guard(&mut guard, vec![1.0; 3]).unwrap();
                let c = g.rec.containers[0].limits;
                let cores = g.rec.replicas as f64 * c.cpu_millicores as f64 / 1000.0;
                most = (most.0.max(cores), most.1.max(g.rec.replicas as u64 * c.memory_bytes));
                obs.desired_replicas = g.rec.replicas;
                obs.template = g.rec.containers[0].clone();
            }
            most
        };
        let (cores, bytes) = run(2.0, &mut obs);
        assert!(cores <= 4.0 + 1e-9 && bytes <= (2 * 1024) << 20, "{cores} cores, {} MiB", bytes >> 20);
        let (cores, bytes) = run(0.0, &mut obs);
        assert!(cores >= 80.0 - 1e-9 && bytes >= (20 * 8_192) << 20, "{cores} cores, {} MiB", bytes >> 20);
    }

    /// What an action does, in the agent's coordinates, is what the guard lets it apply: at the
    /// bounds a request to grow is no change (so exploring around it tries cuts), and so is a
    /// cut the stabilisation window holds (so exploring around it tries growth); inside the
    /// bounds and the guard's caps, the action itself. The guard asked is left as it was.
    #[test]
    fn an_action_does_what_the_bounds_and_the_guard_let_it_do() {
        let (decoder, mut obs) = box_of_20_by_4_cores();
        let config = ManagerConfig { fallback_floor: false, ..ManagerConfig::default() };
        let mut applied = |guard: &Guard, replicas: u32, cpu: u64, mib: u64, v: Vec<f32>| {
            obs.desired_replicas = replicas;
            obs.template = ContainerResources::guaranteed(CONTAINER, Resources::new(cpu, mib << 20));
            config.acting_from(&decoder, &obs.template, replicas, None, None, &obs).applied(guard, v)
        };
        let fresh = Guard::new(GuardConfig::default());
        // The whole box: growing any further is nothing.
        let v = applied(&fresh, 20, 4_000, 8_192, vec![1.0, 1.0, 1.0]);
        assert!(v.iter().all(|x| x.abs() < 1e-6), "{v:?}");
        // A cut is a cut there, for a guard that has seen nothing larger.
        let v = applied(&fresh, 20, 4_000, 8_192, vec![-0.5, 0.0, -0.5]);
        assert!((v[0] + 0.5).abs() < 0.01 && v[1].abs() < 1e-6 && (v[2] + 0.5).abs() < 0.05, "{v:?}");
        // Inside the bounds an action is itself (doubling 2,000 m reaches 4,000 exactly); past
        // them, what they allow (3,000 m doubled is held at 4,000).
        let v = applied(&fresh, 4, 2_000, 1_024, vec![1.0, 0.0, 0.5]);
        assert!((v[0] - 1.0).abs() < 1e-6 && (v[2] - 0.5).abs() < 0.05, "{v:?}");
        let v = applied(&fresh, 4, 3_000, 1_024, vec![1.0, 0.0, 0.0]);
        assert!((v[0] - (4_000f32 / 3_000.0).log2()).abs() < 0.01, "{v:?}");
        // A guard whose window remembers 11 pods of 1,000 m holds a cut of either: the cut
        // does nothing, growth does what it asks.
        let mut held = Guard::new(GuardConfig::default());
        let eleven = Recommendation {
            replicas: 11,
            containers: vec![ContainerResources::guaranteed(CONTAINER, Resources::new(1_000, 1_024 << 20))],
        };
        held.witness(&eleven, &eleven.containers[0]);
        let before = format!("{held:?}");
        let v = applied(&held, 11, 1_000, 1_024, vec![-0.9, 0.0, -0.9]);
        assert!(v.iter().all(|x| x.abs() < 1e-6), "{v:?}");
        assert_eq!(format!("{held:?}"), before, "the dry run left the guard's window as it was");
        let v = applied(&held, 11, 1_000, 1_024, vec![0.2, 0.0, 0.2]);
        assert!((v[0] - 0.2).abs() < 0.01 && (v[2] - 0.2).abs() < 0.05, "{v:?}");
        // The same cut from a fresh guard is the cut, the replicas' as far as halving them.
        let v = applied(&fresh, 11, 1_000, 1_024, vec![-0.9, 0.0, -0.9]);
        assert!((v[0] + 0.9).abs() < 0.01 && v[2] < -0.3 && v[2] > -0.9, "{v:?}");
        // The headroom is added when the draw acts, not to the centre it is drawn around.
        let raised = ManagerConfig { headroom: 0.1, ..config.clone() };
        let at = raised.acting_from(&decoder, &obs.template, 11, None, None, &obs);
        assert!(at.applied(&fresh, vec![0.0; 3]).iter().all(|x| x.abs() < 1e-6));
        assert!(at.coordinates(&at.guard(&mut fresh.clone(), vec![0.0; 3]).unwrap().rec).unwrap()[0] > 0.0);
    }

    #[test]
    fn headroom_raises_cpu_alone_and_does_not_compound() {
        let raised = with_headroom(rec(1000, 3), 0.1);
        assert_eq!(raised.containers[0].limits, Resources::new(1100, 1 << 30));
        assert_eq!(raised.containers[0].requests.cpu_millicores, 1100);
        assert_eq!(raised.replicas, 3);
        assert_eq!(with_headroom(rec(1000, 3), 0.0), rec(1000, 3));
        // An origin that keeps the current allocation (VPA within its bounds) while the agent
        // holds it: every interval applies 1,100, not 1,100 × 1.1ⁿ.
        let mut h = Headroom::default();
        let mut current = rec(1000, 3).containers[0].clone();
        for _ in 0..10 {
            let base = h.origin(&current).limits.cpu_millicores;
            assert_eq!(base, 1000);
            let applied = with_headroom(rec(base, 3), 0.1);
            h.remember(Some(base), &applied);
            current = applied.containers[0].clone();
            assert_eq!(current.limits.cpu_millicores, 1100);
        }
        // The fallback acting in between and keeping the current allocation keeps the raised
        // CPU: the record holds, and the agent's next origin is still its own 1,000.
        assert_eq!(h.origin(&rec(1100, 3).containers[0]).limits.cpu_millicores, 1000);
        // An origin elsewhere (the fallback moved) is taken as it is.
        assert_eq!(h.origin(&rec(1500, 3).containers[0]).limits.cpu_millicores, 1500);
        // Without headroom, or in a new episode, nothing is taken off.
        h.remember(None, &rec(1100, 3));
        assert_eq!(h.origin(&current).limits.cpu_millicores, 1100);
        h.remember(Some(1000), &rec(1100, 3));
        h.forget();
        assert_eq!(h.origin(&current).limits.cpu_millicores, 1100);
    }
}
