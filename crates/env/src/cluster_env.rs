//! `ClusterVecEnv` steps several applications of one backend with one `advance`, so a policy
//! acts on all of them in a batch; `ClusterEnv` is the single-application case.

use std::sync::Mutex;

use aware_core::Bounds;
use aware_core::{
    Action, AppId, Cluster, ClusterError, ContainerResources, Env, EnvError, Observation, PodPhase, Profile,
    Recommendation, Space, Step, StepInfo, VecEnv, VecStep,
};

use crate::action::{ActionDecoder, ActionKind, reverses};
use crate::reward::{RewardFunction, served_preservation, slo_preservation};

/// What acts on one application in one interval: an agent's action (decoded against the current
/// allocation), a recommender's proposal applied as it is, or nothing (the allocation is held).
/// One batched step may mix them, as when a fallback acts for some applications and an agent for
/// the others.
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
pub enum Control {
    Action(Action),
    Recommendation(Recommendation),
    Hold,
}

/// Direction of change per dimension (CPU limit, memory limit, replicas) from the current
/// allocation (`replicas` desired, new pods getting `template`) to a recommendation, in the
/// decoder's order.
pub fn direction(replicas: u32, template: &ContainerResources, rec: &Recommendation) -> [i8; 3] {
    let sign = |a: u64, b: u64| (a.cmp(&b) as i8).signum();
    let cur = &template.limits;
    let new = rec.containers.first().map(|c| c.limits).unwrap_or(*cur);
    [
        sign(new.cpu_millicores, cur.cpu_millicores),
        sign(new.memory_bytes, cur.memory_bytes),
        sign(rec.replicas as u64, replicas as u64),
    ]
}
use crate::state::{StateEncoder, UsageSource};

/// An application's objectives as the backend knows them (the simulator derives a latency SLO
/// per app); the profile's SLO, when set, takes precedence.
#[derive(Debug, Clone, Copy, PartialEq, Default)]
pub struct AppSlo {
    pub latency_p99_ms: Option<f64>,
    pub throughput_rps: Option<f64>,
}

#[derive(Debug, Clone, PartialEq)]
pub struct EnvConfig {
    pub profile: Profile,
    pub action: ActionKind,
    /// Steps before `truncated` (100 for DDPG in AWARE, 50 for PPO in SIMPPO).
    pub episode_steps: u32,
    /// The container the recommendations resize.
    pub container: String,
}

#[derive(Debug, Clone)]
struct Member {
    app: AppId,
    encoder: StateEncoder,
    decoder: ActionDecoder,
    previous_direction: [i8; 3],
    previous_arrival: Option<f64>,
    /// The CPU and memory utilisation of the last state that had usage samples.
    usage: Option<[f32; 2]>,
}

pub struct ClusterVecEnv<C: Cluster> {
    cluster: C,
    /// The action space every member decodes in (members differ only in their bounds).
    decoder: ActionDecoder,
    reward: RewardFunction,
    members: Vec<Member>,
    episode_steps: u32,
    steps: u32,
    needs_reset: bool,
    /// Per member, the observation its last outcome was measured from, until
    /// [`ClusterVecEnv::observe`] hands it out: a controller deciding the next interval reads
    /// what the step just measured, and the backend need not build it again (on the simulator
    /// that is every pod's name, usage and noise). Only `reset` and `step_controls` change the
    /// backend, and both clear these first.
    observed: Mutex<Vec<Option<Observation>>>,
}

impl<C: Cluster> ClusterVecEnv<C> {
    /// Every app under the profile's bounds.
    pub fn new(cluster: C, apps: &[(AppId, AppSlo)], config: EnvConfig) -> Self {
        let bounds = config.profile.bounds.clone();
        let apps: Vec<(AppId, AppSlo, Bounds)> = apps.iter().map(|&(a, s)| (a, s, bounds.clone())).collect();
        Self::with_bounds(cluster, &apps, config)
    }

    /// Each app under its own bounds (an app's effective bounds: its own with the profile's
    /// overrides), which scale its state features and its actions.
    pub fn with_bounds(cluster: C, apps: &[(AppId, AppSlo, Bounds)], config: EnvConfig) -> Self {
        let p = &config.profile;
        let members = apps
            .iter()
            .map(|(app, slo, bounds)| Member {
                app: *app,
                encoder: StateEncoder {
                    bounds: bounds.clone(),
                    latency_slo_ms: p.slo.latency_p99_ms.or(slo.latency_p99_ms),
                    throughput_slo_rps: p.slo.throughput_rps.or(slo.throughput_rps),
                },
                decoder: ActionDecoder {
                    kind: config.action,
                    bounds: bounds.clone(),
                    container: config.container.clone(),
                    cpu_request_ratio: 1.0,
                },
                previous_direction: [0; 3],
                previous_arrival: None,
                usage: None,
            })
            .collect();
        Self {
            cluster,
            decoder: ActionDecoder {
                kind: config.action,
                bounds: p.bounds.clone(),
                container: config.container,
                cpu_request_ratio: 1.0,
            },
            reward: RewardFunction { weights: p.reward.clone() },
            members,
            episode_steps: config.episode_steps.max(1),
            steps: 0,
            needs_reset: true,
            observed: Mutex::new(Vec::new()),
        }
    }

    /// Every decoded action requests `ratio` × its CPU limit ([`ActionDecoder::cpu_request_ratio`]):
    /// the Burstable QoS class below 1, the default 1 Guaranteed.
    pub fn with_cpu_request_ratio(mut self, ratio: f64) -> Self {
        self.decoder.cpu_request_ratio = ratio;
        for m in &mut self.members {
            m.decoder.cpu_request_ratio = ratio;
        }
        self
    }

    pub fn cluster(&self) -> &C {
        &self.cluster
    }

    pub fn reward_function(&self) -> &RewardFunction {
        &self.reward
    }

    /// What member `index`'s application shows now, as [`Cluster::observe`] gives it (the
    /// observation the last step measured, the first time it is asked for).
    ///
    /// # Panics
    /// When `index` is not a member's, as [`ClusterVecEnv::app`].
    pub fn observe(&self, index: usize) -> Result<Observation, ClusterError> {
        let app = self.app(index);
        let measured = self.observed.lock().ok().and_then(|mut observed| observed.get_mut(index)?.take());
        match measured {
            Some(obs) => Ok(obs),
            None => self.cluster.observe(app),
        }
    }

    /// The observations kept for [`ClusterVecEnv::observe`] (a lock poisoned by a panic
    /// elsewhere still holds whole ones: each slot is replaced in one move).
    fn observed_mut(&mut self) -> &mut Vec<Option<Observation>> {
        self.observed.get_mut().unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    /// Forgets the observations of the backend as it was (it is about to change).
    fn forget_observed(&mut self) {
        let members = self.members.len();
        let observed = self.observed_mut();
        observed.clear();
        observed.resize_with(members, || None);
    }

    fn outcome(&mut self, i: usize, illegal: bool, oscillation: bool) -> Result<Step, EnvError> {
        let m = &mut self.members[i];
        let obs = self.cluster.observe(m.app)?;
        let (state, reward, info, measured) =
            measure_carrying(&m.encoder, &self.reward, &obs, m.previous_arrival, m.usage, illegal, oscillation)?;
        m.previous_arrival = Some(obs.arrival_rate);
        if measured {
            m.usage = Some([state[3], state[4]]);
        }
        if let Some(slot) = self.observed_mut().get_mut(i) {
            *slot = Some(obs);
        }
        Ok(Step { observation: state, reward, terminated: false, truncated: self.steps >= self.episode_steps, info })
    }
}

/// What one interval's observation says, as every backend reports it: the encoded state, the
/// reward and the step's info (`previous_arrival_rps`: the arrival rate the interval before,
/// for the state's load trend; `illegal`, `oscillation`: what the action that led here was).
/// The simulator's environment and the lifecycle on a live backend both measure with this one
/// function, so a policy is paid the same on either.
pub fn measure(
    encoder: &StateEncoder,
    reward: &RewardFunction,
    obs: &aware_core::Observation,
    previous_arrival_rps: Option<f64>,
    illegal: bool,
    oscillation: bool,
) -> Result<(Vec<f32>, f64, StepInfo), aware_core::ObservationError> {
    measure_carrying(encoder, reward, obs, previous_arrival_rps, None, illegal, oscillation)
        .map(|(state, reward, info, _)| (state, reward, info))
}

/// [`measure`], with the state's CPU and memory utilisation `carried` from the last state that
/// measured them where the usage samples cannot be trusted ([`StateEncoder::encode_carrying`]:
/// the info says so); the last value says whether the utilisation was measured.
fn measure_carrying(
    encoder: &StateEncoder,
    reward: &RewardFunction,
    obs: &aware_core::Observation,
    previous_arrival_rps: Option<f64>,
    carried: Option<[f32; 2]>,
    illegal: bool,
    oscillation: bool,
) -> Result<(Vec<f32>, f64, StepInfo, bool), aware_core::ObservationError> {
    let (state, source) = encoder.encode_carrying(obs, previous_arrival_rps, carried)?;
    let usage_carried = source == UsageSource::Carried;
    let served = served_preservation(obs.dropped_requests as f64, obs.arrival_rate * obs.interval_s);
    let sp = slo_preservation(
        encoder.latency_slo_ms,
        encoder.throughput_slo_rps,
        obs.latency_p99_ms,
        obs.throughput,
        obs.arrival_rate,
    )
    .min(served);
    // The utilisation the interval is judged by: measured, carried from the last state that
    // measured it, or unknown (NaN: no ready pod with a sample; reported as 0, charged as busy).
    let (cpu, memory) = if usage_carried {
        (state[3] as f64, state[4] as f64)
    } else {
        (obs.cpu_utilisation().unwrap_or(f64::NAN), obs.memory_utilisation().unwrap_or(f64::NAN))
    };
    let info = StepInfo {
        slo_violated: sp < 1.0,
        dropped_requests: obs.dropped_requests,
        oom_events: obs.oom_events,
        illegal_action: illegal,
        oscillation,
        cpu_utilisation: if cpu.is_finite() { cpu } else { 0.0 },
        memory_utilisation: if memory.is_finite() { memory } else { 0.0 },
        slo_preservation: sp,
        replicas: obs.desired_replicas,
        cpu_limit_millicores: obs.template.limits.cpu_millicores,
        memory_limit_bytes: obs.template.limits.memory_bytes,
        usage_carried,
    };
    // What the node holds for each scheduled pod, as the bill counts it: an admitted resize as
    // soon as it is admitted, a decrease the kubelet defers at its new size, a resize no node
    // can fit not at all (the container's running requests where the backend does not say).
    let held = obs
        .pods
        .iter()
        .filter(|p| matches!(p.phase, PodPhase::Starting | PodPhase::Ready))
        .map(|p| (p.allocated.unwrap_or(p.resources.requests), p.resources.limits))
        .collect::<Vec<_>>();
    let cost = reward.cost(&encoder.bounds, held.iter().map(|(h, _)| *h));
    let idle = reward.idle_cost(&encoder.bounds, held, cpu, memory);
    Ok((
        state,
        reward.reward(sp, cost, idle, 1.0 - served, illegal, oscillation),
        info,
        source == UsageSource::Measured,
    ))
}

impl<C: Cluster> VecEnv for ClusterVecEnv<C> {
    fn num_envs(&self) -> usize {
        self.members.len()
    }

    fn observation_space(&self) -> Space {
        StateEncoder::space()
    }

    fn action_space(&self) -> Space {
        self.decoder.space()
    }

    /// Restarts the backend (a fresh trace realisation for `seed` on the simulator) and runs one
    /// interval under the initial allocation so that the first state holds real measurements.
    fn reset(&mut self, seed: Option<u64>) -> Result<Vec<(Vec<f32>, StepInfo)>, EnvError> {
        self.forget_observed();
        self.cluster.reset(seed)?;
        self.cluster.advance()?;
        self.steps = 0;
        self.needs_reset = false;
        for m in &mut self.members {
            m.previous_direction = [0; 3];
            m.previous_arrival = None;
            m.usage = None;
        }
        (0..self.members.len()).map(|i| self.outcome(i, false, false).map(|s| (s.observation, s.info))).collect()
    }

    fn step(&mut self, actions: &[Action]) -> Result<VecStep, EnvError> {
        let controls: Vec<Control> = actions.iter().cloned().map(Control::Action).collect();
        self.step_controls(&controls)
    }
}

impl<C: Cluster> ClusterVecEnv<C> {
    /// Steps every application once under its control; actions are decoded, recommendations
    /// applied as proposed (an oscillation is a change that reverses the previous one either way;
    /// a recommender's proposal is never illegal), `Hold` keeps the allocation. The reward and
    /// every outcome are computed the same way whatever acted.
    pub fn step_controls(&mut self, controls: &[Control]) -> Result<VecStep, EnvError> {
        if self.needs_reset {
            return Err(EnvError::NeedsReset);
        }
        if controls.len() != self.members.len() {
            return Err(EnvError::WrongActionCount { expected: self.members.len(), got: controls.len() });
        }
        self.forget_observed();
        let mut flags = Vec::with_capacity(controls.len());
        for (m, control) in self.members.iter_mut().zip(controls) {
            let (recommendation, illegal, direction) = match control {
                Control::Hold => {
                    flags.push((false, false));
                    continue;
                }
                Control::Action(action) => {
                    let (replicas, template) = self.cluster.target(m.app)?;
                    let decoded = m
                        .decoder
                        .decode(action, replicas, &template)
                        .map_err(|_| EnvError::ActionOutOfSpace { action: action.clone(), space: m.decoder.space() })?;
                    (decoded.recommendation, decoded.illegal, decoded.direction)
                }
                Control::Recommendation(rec) => {
                    let (replicas, template) = self.cluster.target(m.app)?;
                    (rec.clone(), false, direction(replicas, &template, rec))
                }
            };
            let oscillation = reverses(m.previous_direction, direction);
            if direction != [0; 3] {
                m.previous_direction = direction;
            }
            self.cluster.apply(m.app, &recommendation)?;
            flags.push((illegal, oscillation));
        }
        self.cluster.advance()?;
        self.steps += 1;
        let steps = flags
            .into_iter()
            .enumerate()
            .map(|(i, (illegal, oscillation))| self.outcome(i, illegal, oscillation))
            .collect::<Result<Vec<_>, _>>()?;
        if self.steps >= self.episode_steps {
            self.needs_reset = true;
        }
        Ok(VecStep { steps })
    }

    /// The application each sub-environment steps, in sub-environment order.
    pub fn app(&self, index: usize) -> AppId {
        self.members[index].app
    }
}

/// One application of a backend as a Gymnasium `Env`.
pub struct ClusterEnv<C: Cluster> {
    inner: ClusterVecEnv<C>,
}

impl<C: Cluster> ClusterEnv<C> {
    pub fn new(cluster: C, app: AppId, slo: AppSlo, config: EnvConfig) -> Self {
        Self { inner: ClusterVecEnv::new(cluster, &[(app, slo)], config) }
    }

    pub fn cluster(&self) -> &C {
        self.inner.cluster()
    }

    pub fn reward_function(&self) -> &RewardFunction {
        self.inner.reward_function()
    }
}

impl<C: Cluster> Env for ClusterEnv<C> {
    fn observation_space(&self) -> Space {
        self.inner.observation_space()
    }

    fn action_space(&self) -> Space {
        self.inner.action_space()
    }

    fn reset(&mut self, seed: Option<u64>) -> Result<(Vec<f32>, StepInfo), EnvError> {
        Ok(self.inner.reset(seed)?.remove(0))
    }

    fn step(&mut self, action: &Action) -> Result<Step, EnvError> {
        Ok(self.inner.step(std::slice::from_ref(action))?.steps.remove(0))
    }
}
