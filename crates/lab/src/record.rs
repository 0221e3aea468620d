//! Recording a run's trajectories into a trajectory store (`simulate --store URL`, `compare
//! --store URL`, or the profile's `store`): one episode per application and policy, every
//! interval a transition ⟨state, action, reward, next state⟩. Each application's policy is its
//! own agent in the store, named `POLICY@APP`, and a run appends that agent's next episode (a
//! second run into the same store adds episodes; nothing is overwritten).
//!
//! The recorded action is the allocation the interval ran with, in the continuous action
//! space's coordinates (`[cpu, memory, replicas]` in [−1, 1] across the app's bounds), whatever
//! acted — a recommender, an agent or a hold — so rule-based trajectories can teach an agent.

use aware_core::Bounds;
use aware_core::StepInfo;
use aware_env::ActionKind;
use aware_store::{EpisodeId, EpisodeMeta, TrajectoryStore, Transition};

use crate::LabError;
use crate::rollout::{Arena, Interval, Observer};

/// An allocation in the continuous action space: each of CPU limit, memory limit and replicas
/// mapped linearly from the bounds onto [−1, 1] (clamped).
pub fn allocation_action(info: &StepInfo, bounds: &Bounds) -> Vec<f32> {
    allocation_coordinates(info.cpu_limit_millicores, info.memory_limit_bytes, info.replicas, bounds)
}

/// `[cpu, memory, replicas]` in the continuous action space's coordinates (see
/// [`aware_env::coordinates`]).
pub fn allocation_coordinates(cpu_millicores: u64, memory_bytes: u64, replicas: u32, bounds: &Bounds) -> Vec<f32> {
    let target = (cpu_millicores, memory_bytes, replicas);
    aware_env::coordinates(ActionKind::Continuous, bounds, target, target).unwrap_or_default()
}

/// Transitions buffered before an append.
const CHUNK: usize = 100;

struct Open {
    id: EpisodeId,
    buffer: Vec<Transition>,
    total_reward: f64,
    steps: u32,
}

/// Records every application's interval into `store` as the run goes; [`Recorder::finish`]
/// closes the episodes (an episode left open by a failed run is never counted by the store).
pub struct Recorder<'s> {
    store: &'s mut dyn TrajectoryStore,
    /// Who the episodes belong to (the policy's name).
    agent: String,
    stage: String,
    apps: Vec<String>,
    bounds: Vec<Bounds>,
    episode: u64,
    open: Vec<Option<Open>>,
}

impl<'s> Recorder<'s> {
    /// `apps[i]` and `bounds[i]` name and bound application i; `agent` names the policy;
    /// episodes are numbered from `episode` or after the agent's last stored one.
    pub fn new(
        store: &'s mut dyn TrajectoryStore,
        agent: &str,
        stage: &str,
        apps: Vec<String>,
        bounds: Vec<Bounds>,
        episode: u64,
    ) -> Self {
        let n = apps.len();
        Self {
            store,
            agent: agent.into(),
            stage: stage.into(),
            apps,
            bounds,
            episode,
            open: (0..n).map(|_| None).collect(),
        }
    }

    /// Appends what is buffered and closes every open episode; returns how many were closed.
    pub fn finish(mut self) -> Result<u64, LabError> {
        let mut closed = 0;
        for slot in self.open.iter_mut() {
            if let Some(mut o) = slot.take() {
                if !o.buffer.is_empty() {
                    self.store.append(o.id, &std::mem::take(&mut o.buffer))?;
                }
                self.store.close_episode(o.id, o.total_reward)?;
                closed += 1;
            }
        }
        Ok(closed)
    }
}

impl Observer for Recorder<'_> {
    fn record(&mut self, _arena: &dyn Arena, interval: &Interval) -> Result<(), LabError> {
        for (i, step) in interval.out.steps.iter().enumerate() {
            let Some(state) = interval.states.get(i) else { continue };
            if self.open[i].is_none() {
                let app = self.apps.get(i).cloned().unwrap_or_else(|| format!("app-{i}"));
                let agent = format!("{}@{app}", self.agent);
                let episode = self.store.episodes(Some(&agent))?.iter().map(|e| e.meta.episode + 1).max().unwrap_or(0);
                let meta = EpisodeMeta {
                    agent,
                    app,
                    episode: episode.max(self.episode),
                    stage: self.stage.clone(),
                    policy: self.agent.clone(),
                    state_dim: state.len() as u32,
                    action_dim: 3,
                    started_at_s: std::time::SystemTime::now()
                        .duration_since(std::time::UNIX_EPOCH)
                        .map_or(0.0, |d| d.as_secs_f64()),
                };
                let id = self.store.begin_episode(&meta)?;
                self.open[i] = Some(Open { id, buffer: Vec::with_capacity(CHUNK), total_reward: 0.0, steps: 0 });
            }
            let bounds = self
                .bounds
                .get(i)
                .or(self.bounds.first())
                .cloned()
                .unwrap_or_else(|| aware_core::Profile::default().bounds);
            let o = self.open[i].as_mut().expect("opened above");
            o.buffer.push(Transition {
                step: o.steps,
                state: state.clone(),
                action: allocation_action(&step.info, &bounds),
                reward: step.reward as f32,
                next_state: step.observation.clone(),
                done: step.terminated || step.truncated,
            });
            o.steps += 1;
            o.total_reward += step.reward;
            if o.buffer.len() >= CHUNK {
                let chunk = std::mem::take(&mut o.buffer);
                self.store.append(o.id, &chunk)?;
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn allocation_action_maps_bounds_onto_the_unit_box() {
        let b = aware_core::Profile::default().bounds;
        let lo = StepInfo {
            replicas: b.min_replicas,
            cpu_limit_millicores: b.min_cpu_millicores,
            memory_limit_bytes: b.min_memory_bytes(),
            ..StepInfo::default()
        };
        assert_eq!(allocation_action(&lo, &b), vec![-1.0, -1.0, -1.0]);
        let hi = StepInfo {
            replicas: b.max_replicas * 3,
            cpu_limit_millicores: b.max_cpu_millicores,
            memory_limit_bytes: b.max_memory_bytes(),
            ..StepInfo::default()
        };
        assert_eq!(allocation_action(&hi, &b), vec![1.0, 1.0, 1.0]);
    }
}
