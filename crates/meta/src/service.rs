//! FLASH's service interface to the meta-learner, for callers outside the lifecycle and its
//! store: register a base learner for a task, insert a task's trajectories (or, for a
//! supervised task, its samples), get the task's embedding, and turn meta-model updates on or
//! off.
//!
//! A task is any ⟨application, environment⟩ pair (or supervised problem) with its own base
//! learner, of whatever type the caller uses (`B`: a DDPG or PPO agent, a regression model).
//! The service keeps per task the trajectories the meta-learner reads, chosen as the
//! learner's [`MetaConfig`](crate::MetaConfig) says: the best M by total reward (AWARE), or the
//! best ⌈M/2⌉ and the worst ⌊M/2⌋ (FLASH). Supervised samples carry no reward: each inserted
//! batch is one trajectory of ⟨x ⊕ y⟩ steps, and the newest M batches are kept. A task's
//! embedding is computed when asked and kept until its trajectories or the meta-learner
//! change.
//!
//! Meta-training through the service ([`MetaService::meta_train_step`]) takes the loss the
//! caller's base learners put on the embeddings of a batch of tasks, as AWARE's base learner
//! does in `crate::train`; with updates off it is refused, and the meta-model stays as it is.

use std::collections::BTreeMap;

use aware_store::Transition;

use crate::{Bundle, MetaError, MetaLearner, Selection, step_features};

/// One kept trajectory: its rank (total reward, or arrival for supervised samples), its
/// arrival number (ties: the older first) and its steps.
struct Kept {
    score: f64,
    arrival: u64,
    steps: Vec<Vec<f32>>,
}

/// What a task's trajectories are: decided by its first insert, and the same afterwards.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Kind {
    Trajectories,
    Samples,
}

struct Task<B> {
    learner: B,
    kind: Option<Kind>,
    kept: Vec<Kept>,
    /// Bumped whenever the kept set changes.
    generation: u64,
    /// The embedding, with the meta-learner revision and the generation it was made at.
    cached: Option<(u64, u64, Vec<f32>)>,
}

/// The meta-learner as a service over named tasks (module docs).
pub struct MetaService<B> {
    meta: MetaLearner,
    tasks: BTreeMap<String, Task<B>>,
    arrivals: u64,
    computed: u64,
}

impl<B> MetaService<B> {
    pub fn new(meta: MetaLearner) -> Self {
        Self { meta, tasks: BTreeMap::new(), arrivals: 0, computed: 0 }
    }

    /// Registers `learner` as the base learner of a new task. Refused for a name already
    /// registered (deregister it first).
    pub fn register(&mut self, task: &str, learner: B) -> Result<(), MetaError> {
        if task.is_empty() {
            return Err(MetaError::Task { task: task.into(), reason: "a task needs a name".into() });
        }
        if self.tasks.contains_key(task) {
            return Err(MetaError::Task { task: task.into(), reason: "is registered already".into() });
        }
        let entry = Task { learner, kind: None, kept: Vec::new(), generation: 0, cached: None };
        self.tasks.insert(task.to_string(), entry);
        Ok(())
    }

    /// Removes a task with everything kept for it; returns its base learner.
    pub fn deregister(&mut self, task: &str) -> Option<B> {
        self.tasks.remove(task).map(|t| t.learner)
    }

    /// The registered tasks, in name order.
    pub fn tasks(&self) -> impl Iterator<Item = &str> {
        self.tasks.keys().map(String::as_str)
    }

    pub fn learner(&self, task: &str) -> Result<&B, MetaError> {
        Ok(&self.task(task)?.learner)
    }

    pub fn learner_mut(&mut self, task: &str) -> Result<&mut B, MetaError> {
        Ok(&mut self.task_mut(task)?.learner)
    }

    /// Inserts one trajectory of an RL task: its steps ⟨state, action, reward⟩, ranked by
    /// their total reward. Every step must have the meta-learner's width and finite values;
    /// a bad one is refused whole, naming the step and component, and nothing is kept.
    pub fn insert_trajectory(&mut self, task: &str, steps: &[Transition]) -> Result<(), MetaError> {
        let rows: Vec<Vec<f32>> = steps.iter().map(step_features).collect();
        let total: f64 = steps.iter().map(|t| f64::from(t.reward)).sum();
        self.insert(task, Kind::Trajectories, rows, Some(total))
    }

    /// Inserts one batch of a supervised task's samples ⟨x, y⟩ as one trajectory of ⟨x ⊕ y⟩
    /// steps; batches are kept newest first. Checked as [`MetaService::insert_trajectory`].
    pub fn insert_samples(&mut self, task: &str, samples: &[(Vec<f32>, Vec<f32>)]) -> Result<(), MetaError> {
        let rows = samples.iter().map(|(x, y)| x.iter().chain(y).copied().collect()).collect();
        self.insert(task, Kind::Samples, rows, None)
    }

    fn insert(&mut self, task: &str, kind: Kind, rows: Vec<Vec<f32>>, total: Option<f64>) -> Result<(), MetaError> {
        let features = self.meta.config().features;
        let (m, selection) = (self.meta.config().trajectories, self.meta.config().selection);
        let t = self.task(task)?;
        let refuse = |reason: String| MetaError::Task { task: task.into(), reason };
        if let Some(k) = t.kind.filter(|k| *k != kind) {
            let held = if k == Kind::Trajectories { "RL trajectories" } else { "supervised samples" };
            return Err(refuse(format!("holds {held}: one kind per task")));
        }
        if let Some((step, width)) = rows.iter().map(Vec::len).enumerate().find(|(_, w)| *w != features) {
            return Err(refuse(format!("step {step} has {width} features, the meta-learner reads {features}")));
        }
        // The bundle's own checks: at least one step, every value finite (step and component).
        Bundle::new(std::slice::from_ref(&rows)).map_err(|e| {
            refuse(match e {
                MetaError::EmptyTrajectory { .. } => "the inserted trajectory has no step".into(),
                MetaError::BadStep { step, reason, .. } => format!("step {step}: {reason}"),
                other => other.to_string(),
            })
        })?;
        let arrival = self.arrivals;
        self.arrivals += 1;
        let t = self.task_mut(task)?;
        t.kind = Some(kind);
        // Supervised batches rank by arrival: the newest M are kept.
        let score = total.unwrap_or(arrival as f64);
        t.kept.push(Kept { score, arrival, steps: rows });
        t.kept.sort_by(|a, b| b.score.total_cmp(&a.score).then(a.arrival.cmp(&b.arrival)));
        let dropped = t.kept.len().saturating_sub(m);
        if dropped > 0 {
            // Supervised batches have no reward to tell the best from the worst: the newest M.
            let best = match (kind, selection) {
                (Kind::Samples, _) | (_, Selection::Best) => m,
                (Kind::Trajectories, Selection::BestAndWorst) => m.div_ceil(2),
            };
            let removed: Vec<u64> = t.kept.drain(best..best + dropped).map(|k| k.arrival).collect();
            // The new trajectory did not make the cut: the kept set is unchanged.
            if removed == [arrival] {
                return Ok(());
            }
        }
        t.generation += 1;
        Ok(())
    }

    /// Trajectories kept for a task.
    pub fn kept(&self, task: &str) -> Result<usize, MetaError> {
        Ok(self.task(task)?.kept.len())
    }

    /// The task's embedding from its kept trajectories: `TooFewTrajectories` below the
    /// meta-learner's minimum. Computed again only when they or the meta-learner changed.
    pub fn embedding(&mut self, task: &str) -> Result<&[f32], MetaError> {
        let need = self.meta.config().min_trajectories;
        let revision = self.meta.revision();
        let t = self.tasks.get(task).ok_or_else(|| unknown(task))?;
        if t.kept.len() < need {
            return Err(MetaError::TooFewTrajectories { have: t.kept.len(), need });
        }
        let fresh = t.cached.as_ref().is_some_and(|(r, g, _)| *r == revision && *g == t.generation);
        if !fresh {
            let embedding = self.meta.embed(&bundle(t)?)?;
            self.computed += 1;
            let t = self.tasks.get_mut(task).expect("looked up above");
            t.cached = Some((revision, t.generation, embedding));
        }
        Ok(&self.tasks[task].cached.as_ref().expect("cached above").2)
    }

    /// Embeddings computed so far (the rest were answered from the cache).
    pub fn computed(&self) -> u64 {
        self.computed
    }

    /// Turns meta-model updates on or off; off, the meta-learner is frozen (adaptation).
    pub fn set_meta_updates(&mut self, on: bool) {
        self.meta.set_learning(on);
    }

    pub fn meta_updates(&self) -> bool {
        self.meta.is_learning()
    }

    /// One meta-training step over `tasks`: their embeddings (in that order, concatenated) go
    /// to `loss`, which returns the base learners' loss on them and its gradient with respect
    /// to them. Refused with updates off, and for a task with too few trajectories. Returns the
    /// loss.
    pub fn meta_train_step(
        &mut self,
        tasks: &[&str],
        loss: impl FnOnce(&[f32]) -> (f32, Vec<f32>),
    ) -> Result<f32, MetaError> {
        if !self.meta.is_learning() {
            return Err(MetaError::Config { field: "updates", reason: "meta-model updates are off".into() });
        }
        let need = self.meta.config().min_trajectories;
        let bundles = tasks
            .iter()
            .map(|name| {
                let t = self.task(name)?;
                if t.kept.len() < need {
                    return Err(MetaError::TooFewTrajectories { have: t.kept.len(), need });
                }
                bundle(t)
            })
            .collect::<Result<Vec<_>, _>>()?;
        let refs: Vec<&Bundle> = bundles.iter().collect();
        self.meta.train_step(&refs, loss)
    }

    pub fn meta(&self) -> &MetaLearner {
        &self.meta
    }

    /// The meta-learner back (to keep it: [`MetaLearner`]'s checkpoint).
    pub fn into_meta(self) -> MetaLearner {
        self.meta
    }

    fn task(&self, task: &str) -> Result<&Task<B>, MetaError> {
        self.tasks.get(task).ok_or_else(|| unknown(task))
    }

    fn task_mut(&mut self, task: &str) -> Result<&mut Task<B>, MetaError> {
        self.tasks.get_mut(task).ok_or_else(|| unknown(task))
    }
}

fn unknown(task: &str) -> MetaError {
    MetaError::Task { task: task.into(), reason: "is not registered".into() }
}

fn bundle<B>(t: &Task<B>) -> Result<Bundle, MetaError> {
    let trajectories: Vec<Vec<Vec<f32>>> = t.kept.iter().map(|k| k.steps.clone()).collect();
    Bundle::new(&trajectories)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::MetaConfig;

    fn learner(selection: Selection) -> MetaLearner {
        let config = MetaConfig {
            hidden: 8,
            fc: 8,
            embedding: 4,
            trajectories: 3,
            min_trajectories: 2,
            selection,
            ..MetaConfig::aware(3)
        };
        MetaLearner::new(config, 7).unwrap()
    }

    /// A 5-step trajectory of one state, one action and a reward of `level` per step.
    fn trajectory(level: f32) -> Vec<Transition> {
        (0..5)
            .map(|t| Transition {
                step: t,
                state: vec![level + t as f32 * 0.1],
                action: vec![-level],
                reward: level,
                next_state: vec![level + (t + 1) as f32 * 0.1],
                done: t == 4,
            })
            .collect()
    }

    #[test]
    fn tasks_are_registered_once_and_named_in_every_refusal() {
        let mut s: MetaService<&str> = MetaService::new(learner(Selection::Best));
        s.register("checkout", "ddpg").unwrap();
        let e = s.register("checkout", "ppo").unwrap_err().to_string();
        assert_eq!(e, "task checkout: is registered already");
        assert_eq!(s.register("", "x").unwrap_err().to_string(), "task : a task needs a name");
        assert_eq!(s.embedding("cart").unwrap_err().to_string(), "task cart: is not registered");
        assert_eq!(*s.learner("checkout").unwrap(), "ddpg");
        *s.learner_mut("checkout").unwrap() = "td3";
        assert_eq!(s.deregister("checkout"), Some("td3"));
        assert_eq!(s.tasks().count(), 0);
    }

    #[test]
    fn a_tasks_embedding_is_read_from_its_kept_trajectories_and_kept_until_they_change() {
        let mut s: MetaService<()> = MetaService::new(learner(Selection::Best));
        s.register("a", ()).unwrap();
        s.register("b", ()).unwrap();
        s.insert_trajectory("a", &trajectory(0.5)).unwrap();
        assert_eq!(s.embedding("a").unwrap_err().to_string(), "1 trajectories, the meta-learner needs at least 2");
        s.insert_trajectory("a", &trajectory(0.6)).unwrap();
        s.insert_trajectory("a", &trajectory(0.7)).unwrap();
        let first = s.embedding("a").unwrap().to_vec();
        assert_eq!(first.len(), 4);
        assert_eq!(s.embedding("a").unwrap(), first);
        assert_eq!(s.computed(), 1, "answered from the cache");
        // Equal to embedding the kept bundle directly.
        let direct =
            s.meta().embed(&Bundle::from_transitions(&[trajectory(0.7), trajectory(0.6), trajectory(0.5)]).unwrap());
        assert_eq!(first, direct.unwrap());
        // Full (M = 3): a worse trajectory is not kept, and nothing is recomputed.
        s.insert_trajectory("a", &trajectory(0.1)).unwrap();
        assert_eq!(s.kept("a").unwrap(), 3);
        s.embedding("a").unwrap();
        assert_eq!(s.computed(), 1);
        // A better one replaces the worst.
        s.insert_trajectory("a", &trajectory(0.9)).unwrap();
        let second = s.embedding("a").unwrap().to_vec();
        assert_eq!(s.computed(), 2);
        assert_ne!(second, first);
        // Another task with other data embeds elsewhere.
        s.insert_trajectory("b", &trajectory(-0.8)).unwrap();
        s.insert_trajectory("b", &trajectory(-0.7)).unwrap();
        assert_ne!(s.embedding("b").unwrap(), second.as_slice());
    }

    #[test]
    fn flash_selection_keeps_the_best_and_the_worst() {
        let mut s: MetaService<()> = MetaService::new(learner(Selection::BestAndWorst));
        s.register("a", ()).unwrap();
        for level in [0.5, 0.1, 0.9, 0.3] {
            s.insert_trajectory("a", &trajectory(level)).unwrap();
        }
        // M = 3: the two best (0.9, 0.5) and the worst (0.1).
        let kept =
            s.meta().embed(&Bundle::from_transitions(&[trajectory(0.9), trajectory(0.5), trajectory(0.1)]).unwrap());
        assert_eq!(s.embedding("a").unwrap(), kept.unwrap().as_slice());
    }

    #[test]
    fn bad_input_is_refused_whole_with_its_place() {
        let mut s: MetaService<()> = MetaService::new(learner(Selection::Best));
        s.register("a", ()).unwrap();
        let mut bad = trajectory(0.5);
        bad[3].reward = f32::NAN;
        let e = s.insert_trajectory("a", &bad).unwrap_err().to_string();
        assert_eq!(e, "task a: step 3: component 2 is NaN");
        assert_eq!(s.kept("a").unwrap(), 0, "nothing kept of it");
        let mut wide = trajectory(0.5);
        wide[1].state.push(1.0);
        let e = s.insert_trajectory("a", &wide).unwrap_err().to_string();
        assert_eq!(e, "task a: step 1 has 4 features, the meta-learner reads 3");
        let e = s.insert_trajectory("a", &[]).unwrap_err().to_string();
        assert_eq!(e, "task a: the inserted trajectory has no step");
        s.insert_trajectory("a", &trajectory(0.5)).unwrap();
        let e = s.insert_samples("a", &[(vec![1.0, 2.0], vec![3.0])]).unwrap_err().to_string();
        assert_eq!(e, "task a: holds RL trajectories: one kind per task");
    }

    #[test]
    fn supervised_samples_are_embedded_newest_batches_first() {
        // FLASH's selection too: samples have no reward to pick the worst by.
        for selection in [Selection::Best, Selection::BestAndWorst] {
            newest_batches(selection);
        }
    }

    fn newest_batches(selection: Selection) {
        let mut s: MetaService<()> = MetaService::new(learner(selection));
        s.register("regression", ()).unwrap();
        let batch = |k: f32| -> Vec<(Vec<f32>, Vec<f32>)> {
            (0..6).map(|i| (vec![i as f32 * 0.1, k], vec![k * i as f32 * 0.1])).collect()
        };
        for k in [1.0, 2.0, 3.0, 4.0, 5.0] {
            s.insert_samples("regression", &batch(k)).unwrap();
        }
        let rows = |k: f32| batch(k).into_iter().map(|(x, y)| x.into_iter().chain(y).collect()).collect::<Vec<_>>();
        let newest = Bundle::new(&[rows(5.0), rows(4.0), rows(3.0)]).unwrap();
        let expected = s.meta().embed(&newest).unwrap();
        assert_eq!(s.embedding("regression").unwrap(), expected.as_slice());
    }

    #[test]
    fn meta_updates_can_be_turned_off_and_on() {
        let mut s: MetaService<()> = MetaService::new(learner(Selection::Best));
        for (task, levels) in [("a", [0.2, 0.4]), ("b", [-0.3, -0.1])] {
            s.register(task, ()).unwrap();
            for level in levels {
                s.insert_trajectory(task, &trajectory(level)).unwrap();
            }
        }
        let before = s.embedding("a").unwrap().to_vec();
        let params = s.meta().params().to_vec();
        // The base learners' loss on the two embeddings: task a's towards +1, b's towards −1.
        let targets: Vec<f32> = [1.0; 4].into_iter().chain([-1.0; 4]).collect();
        s.set_meta_updates(false);
        assert!(!s.meta_updates());
        let e = s.meta_train_step(&["a", "b"], |e| crate::mean_squared_error(e, &targets)).unwrap_err();
        assert_eq!(e.to_string(), "meta-learner updates: meta-model updates are off");
        assert_eq!(s.meta().params(), params.as_slice());
        assert_eq!(s.embedding("a").unwrap(), before.as_slice(), "frozen: the same embedding");
        s.set_meta_updates(true);
        let mut losses = Vec::new();
        for _ in 0..30 {
            losses.push(s.meta_train_step(&["a", "b"], |e| crate::mean_squared_error(e, &targets)).unwrap());
        }
        assert!(losses[29] < 0.9 * losses[0], "the loss through the service falls: {losses:?}");
        let after = s.embedding("a").unwrap().to_vec();
        assert_ne!(after, before, "a new meta-model, a new embedding");
        assert_eq!(s.computed(), 2);
        let e = s.meta_train_step(&["a", "c"], |e| crate::mean_squared_error(e, &targets)).unwrap_err();
        assert_eq!(e.to_string(), "task c: is not registered");
    }
}
