//! The one rollout loop. Every run in `aware` — simulating or comparing recommenders, training
//! an agent, the provisioning problem, every experiment — is this loop: reset the arena, then per
//! interval let the driver decide for every application at once, step the arena, show the outcome
//! to the observers (scoring, recording) and to the driver (learning).

use aware_agents::action_values;
use aware_agents::{Agent, Experience};
use aware_core::{Action, Cluster, Observation, StepInfo, VecEnv, VecStep};
use aware_env::{ClusterVecEnv, Control};
use aware_sim::{AppStepStats, SimCluster};

use crate::LabError;
use crate::policy::Policy;
use crate::progress::Progress;

/// What a rollout runs against: the simulator's vectorised environment, a remote environment,
/// the provisioning environment.
pub trait Arena {
    fn num_apps(&self) -> usize;
    /// Seconds per interval (what core-seconds are measured in).
    fn interval_s(&self) -> f64;
    /// Starts an episode; the state and info of every application.
    fn reset(&mut self, seed: u64) -> Result<Vec<(Vec<f32>, StepInfo)>, LabError>;
    /// How the last [`Arena::reset`] started its episode: on a cluster built afresh (the
    /// default) or going on from the one an earlier episode left.
    fn episode_start(&self) -> EpisodeStart {
        EpisodeStart::Fresh
    }
    fn step(&mut self, controls: &[Control]) -> Result<VecStep, LabError>;
    /// What a recommender sees of application `app`; `None` (the default) where the arena only
    /// speaks states (a remote environment), so only agents can drive it.
    fn observe(&self, _app: usize) -> Option<Result<Observation, LabError>> {
        None
    }
    /// The noise-free outcome of `app`'s last interval where the arena knows it (the simulator);
    /// scoring falls back on the step's info otherwise (the default).
    fn truth(&self, _app: usize) -> Option<AppStepStats> {
        None
    }
    /// The SLO (p99 latency, ms) application `app` is judged against, where known.
    fn slo_p99_ms(&self, _app: usize) -> Option<f64> {
        None
    }
}

impl Arena for ClusterVecEnv<SimCluster> {
    fn num_apps(&self) -> usize {
        self.num_envs()
    }

    fn interval_s(&self) -> f64 {
        self.cluster().interval_s()
    }

    fn reset(&mut self, seed: u64) -> Result<Vec<(Vec<f32>, StepInfo)>, LabError> {
        Ok(VecEnv::reset(self, Some(seed))?)
    }

    fn step(&mut self, controls: &[Control]) -> Result<VecStep, LabError> {
        Ok(self.step_controls(controls)?)
    }

    fn observe(&self, app: usize) -> Option<Result<Observation, LabError>> {
        Some(ClusterVecEnv::observe(self, app).map_err(LabError::from))
    }

    /// Continued where the cluster was configured to go on from another's end
    /// ([`aware_sim::SimConfig::start`]).
    fn episode_start(&self) -> EpisodeStart {
        match self.cluster().config().start {
            Some(_) => EpisodeStart::Continued,
            None => EpisodeStart::Fresh,
        }
    }

    fn truth(&self, app: usize) -> Option<AppStepStats> {
        Some(*self.cluster().stats(self.app(app)))
    }

    fn slo_p99_ms(&self, app: usize) -> Option<f64> {
        Some(self.cluster().slo_p99_ms(self.app(app)))
    }
}

/// Any [`VecEnv`] (a remote environment over gRPC, say) as an arena agents can drive: controls
/// must be actions, and scoring reads the steps' info.
pub struct ActionsOnly<E> {
    pub env: E,
    pub interval_s: f64,
}

impl<E: VecEnv> Arena for ActionsOnly<E> {
    fn num_apps(&self) -> usize {
        self.env.num_envs()
    }

    fn interval_s(&self) -> f64 {
        self.interval_s
    }

    fn reset(&mut self, seed: u64) -> Result<Vec<(Vec<f32>, StepInfo)>, LabError> {
        Ok(self.env.reset(Some(seed))?)
    }

    fn step(&mut self, controls: &[Control]) -> Result<VecStep, LabError> {
        let actions = controls
            .iter()
            .map(|c| match c {
                Control::Action(a) => Ok(a.clone()),
                other => Err(LabError::input("control", format!("{other:?}: this environment only takes actions"))),
            })
            .collect::<Result<Vec<_>, _>>()?;
        Ok(self.env.step(&actions)?)
    }
}

/// Decides for every application of an arena each interval, and may learn from the outcome.
pub trait Driver {
    /// One control per application, given the current states and the last step's infos.
    fn decide(&mut self, arena: &dyn Arena, states: &[Vec<f32>], infos: &[StepInfo]) -> Result<Vec<Control>, LabError>;

    /// The outcome of the controls `decide` returned for the interval's states. A learner
    /// learns only from the transitions [`Interval::measured`] vouches for.
    fn feedback(&mut self, _interval: &Interval) -> Result<(), LabError> {
        Ok(())
    }

    /// A new episode began: the arena was reset. On a [`EpisodeStart::Fresh`] cluster the
    /// rule-based controllers held by the driver restart ([`aware_core::Recommender::restart`]);
    /// on a [`EpisodeStart::Continued`] one they carry on, as controllers running on a cluster
    /// do. Learned ones keep their weights either way.
    fn episode_start(&mut self, _start: EpisodeStart) {}
}

/// How an episode's cluster began.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum EpisodeStart {
    /// Built afresh: its clock starts again and every app is at its reference allocation, so
    /// what a controller learned of the earlier cluster (scale events, usage samples, the clock
    /// itself) describes a cluster that no longer exists.
    Fresh,
    /// Going on from the cluster an earlier episode left (its clock, replicas and pod
    /// templates): only the traffic is the new episode's.
    Continued,
}

/// One interval as the observers and the driver's feedback see it.
pub struct Interval<'a> {
    /// The states the driver decided on, and the infos that came with them.
    pub states: &'a [Vec<f32>],
    pub infos: &'a [StepInfo],
    pub controls: &'a [Control],
    /// What stepping with `controls` gave.
    pub out: &'a VecStep,
    /// Per application, the interval's noise-free outcome where the arena knows it
    /// ([`Arena::truth`]).
    pub truth: &'a [Option<AppStepStats>],
}

impl Interval<'_> {
    /// Whether application `app` violated its SLO this interval, as scoring counts it: by the
    /// true p99 where the arena knows it, else by the step's info (the measured p99).
    pub fn slo_violated(&self, app: usize) -> bool {
        match self.truth.get(app).copied().flatten() {
            Some(t) => t.slo_violated,
            None => self.out.steps.get(app).is_some_and(|s| s.info.slo_violated),
        }
    }

    /// Whether application `app`'s transition of this interval was measured at both ends:
    /// neither its state nor its next state carries utilisation from an earlier interval
    /// ([`StepInfo::usage_carried`]). Nothing learns from one that was not: its utilisation
    /// features describe another allocation than the one the action changed.
    pub fn measured(&self, app: usize) -> bool {
        let carried = |info: Option<&StepInfo>| info.is_some_and(|i| i.usage_carried);
        !carried(self.infos.get(app)) && !carried(self.out.steps.get(app).map(|s| &s.info))
    }
}

/// Sees every interval's outcome (scoring, recording trajectories, plots).
pub trait Observer {
    fn record(&mut self, arena: &dyn Arena, interval: &Interval) -> Result<(), LabError>;
}

/// Totals of one rollout, from the steps themselves (the reward the driver was paid).
#[derive(Debug, Clone, Copy, PartialEq, Default)]
pub struct Totals {
    /// Σ over applications and intervals of the reward.
    pub reward: f64,
    /// App-intervals whose info says the SLO was violated.
    pub slo_violations: u64,
    /// App-steps taken (intervals × applications).
    pub app_steps: u64,
}

/// Runs `steps` intervals from a reset with `seed` (or until the arena truncates the episode).
pub fn rollout(
    arena: &mut dyn Arena,
    driver: &mut dyn Driver,
    seed: u64,
    steps: u64,
    observers: &mut [&mut dyn Observer],
    progress: &dyn Progress,
) -> Result<Totals, LabError> {
    let (mut states, mut infos): (Vec<Vec<f32>>, Vec<StepInfo>) = arena.reset(seed)?.into_iter().unzip();
    driver.episode_start(arena.episode_start());
    let mut totals = Totals::default();
    for _ in 0..steps {
        let controls = driver.decide(&*arena, &states, &infos)?;
        let out = arena.step(&controls)?;
        let truth: Vec<Option<AppStepStats>> = (0..out.steps.len()).map(|i| arena.truth(i)).collect();
        let interval = Interval { states: &states, infos: &infos, controls: &controls, out: &out, truth: &truth };
        for o in observers.iter_mut() {
            o.record(&*arena, &interval)?;
        }
        driver.feedback(&interval)?;
        let done = out.steps.iter().any(|s| s.truncated || s.terminated);
        for s in &out.steps {
            totals.reward += s.reward;
            totals.slo_violations += s.info.slo_violated as u64;
            totals.app_steps += 1;
        }
        (states, infos) = out.steps.into_iter().map(|s| (s.observation, s.info)).unzip();
        progress.inc(1);
        if done {
            break;
        }
    }
    Ok(totals)
}

/// One built recommender per application: each interval it observes its application and
/// proposes an allocation; a refused observation holds the allocation and is counted.
pub struct Recommenders {
    pub policies: Vec<Policy>,
    /// Per application, intervals in which the recommender refused its observation.
    pub refusals: Vec<u64>,
}

impl Recommenders {
    pub fn new(policies: Vec<Policy>) -> Self {
        let refusals = vec![0; policies.len()];
        Self { policies, refusals }
    }
}

impl Driver for Recommenders {
    fn decide(
        &mut self,
        arena: &dyn Arena,
        _states: &[Vec<f32>],
        _infos: &[StepInfo],
    ) -> Result<Vec<Control>, LabError> {
        let mut controls = Vec::with_capacity(self.policies.len());
        for (i, policy) in self.policies.iter_mut().enumerate() {
            let obs = arena
                .observe(i)
                .ok_or_else(|| LabError::input("policy", "recommenders need an arena that reports observations"))??;
            controls.push(match policy.recommender().recommend(&obs) {
                Ok(rec) => Control::Recommendation(rec),
                Err(_) => {
                    self.refusals[i] += 1;
                    Control::Hold
                }
            });
        }
        Ok(controls)
    }

    fn episode_start(&mut self, start: EpisodeStart) {
        if start == EpisodeStart::Fresh {
            for policy in &mut self.policies {
                policy.recommender().restart();
            }
        }
    }
}

/// An agent acting for every application at once (one batched forward pass per interval),
/// exploring and learning when training, greedy and frozen when evaluated.
pub struct Learner {
    pub agent: Box<dyn Agent>,
    pub explore: bool,
    pub learn: bool,
    /// What the agent sampled last, before clipping: what it learns from.
    sampled: Vec<Action>,
}

impl Learner {
    pub fn new(agent: Box<dyn Agent>, explore: bool, learn: bool) -> Self {
        Self { agent, explore, learn, sampled: Vec::new() }
    }
}

impl Driver for Learner {
    /// The agent's actions clipped into its action space: a Gaussian policy's sample may fall
    /// outside the box, and a served environment (rightly) refuses out-of-space actions, so the
    /// environment is always given what it accepts, in-process or remote alike. The agent
    /// learns from what it sampled (as Stable-Baselines3 does).
    fn decide(
        &mut self,
        _arena: &dyn Arena,
        states: &[Vec<f32>],
        _infos: &[StepInfo],
    ) -> Result<Vec<Control>, LabError> {
        self.sampled = self.agent.act(states, self.explore)?;
        let space = self.agent.action_space();
        Ok(self.sampled.iter().map(|a| Control::Action(space.clip(a.clone()))).collect())
    }

    fn feedback(&mut self, interval: &Interval) -> Result<(), LabError> {
        if !self.learn {
            return Ok(());
        }
        let steps = interval.states.iter().zip(interval.controls).zip(&interval.out.steps);
        for (i, ((state, control), step)) in steps.enumerate() {
            if !matches!(control, Control::Action(_)) {
                continue;
            }
            if !interval.measured(i) {
                self.agent.cut(i);
                continue;
            }
            let e = Experience {
                state: state.clone(),
                action: action_values(
                    self.sampled.get(i).ok_or_else(|| LabError::input("learner", "an outcome without a decision"))?,
                ),
                reward: step.reward as f32,
                next_state: step.observation.clone(),
                terminal: step.terminated,
            };
            self.agent.observe(i, &e, step.truncated)?;
        }
        Ok(())
    }
}
