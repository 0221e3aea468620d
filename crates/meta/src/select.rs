//! Which trajectories the meta-learner reads for an ⟨application, environment⟩ pair, and the
//! per-pair embedding cache: recomputed only when the chosen episodes change.

use std::collections::HashMap;

use aware_store::{EpisodeId, TopMode, TrajectoryStore};

use crate::{Bundle, MetaError, MetaLearner, Selection};

impl From<Selection> for TopMode {
    fn from(s: Selection) -> Self {
        match s {
            Selection::Best => TopMode::Best,
            Selection::BestAndWorst => TopMode::BestAndWorst,
        }
    }
}

/// The stored episodes of `app` the meta-learner reads (the M best by total reward, or FLASH's
/// best and worst halves), oldest id first within ties, and their transitions as a bundle.
pub fn select(
    store: &dyn TrajectoryStore,
    app: &str,
    learner: &MetaLearner,
) -> Result<(Vec<EpisodeId>, Bundle), MetaError> {
    let config = learner.config();
    let records = store.top_episodes(app, config.trajectories, config.selection.into())?;
    if records.len() < config.min_trajectories {
        return Err(MetaError::TooFewTrajectories { have: records.len(), need: config.min_trajectories });
    }
    let mut episodes = Vec::with_capacity(records.len());
    for r in &records {
        if let Some(reward) = r.total_reward.filter(|v| !v.is_finite()) {
            return Err(MetaError::Episode { id: r.id, reason: format!("total reward is {reward}") });
        }
        let (_, transitions) = store.episode(r.id)?;
        if transitions.is_empty() {
            return Err(MetaError::Episode { id: r.id, reason: "holds no transition".into() });
        }
        episodes.push(transitions);
    }
    let bundle = Bundle::from_transitions(&episodes)?;
    Ok((records.iter().map(|r| r.id).collect(), bundle))
}

/// What an embedding was made from: the meta-learner's update count and the chosen episodes.
type Source = (u64, Vec<EpisodeId>);

/// Embeddings per pair, kept until the pair's chosen episodes change or the meta-learner
/// takes a training step.
#[derive(Debug, Default)]
pub struct EmbeddingCache {
    entries: HashMap<String, (Source, Vec<f32>)>,
    computed: u64,
}

impl EmbeddingCache {
    pub fn new() -> Self {
        Self::default()
    }

    /// The embedding of `app` from its stored episodes: the cached one when the chosen episodes
    /// and the meta-learner are the same as last time, else recomputed (and cached). An error
    /// leaves the cache as it was.
    pub fn embedding(
        &mut self,
        store: &dyn TrajectoryStore,
        app: &str,
        learner: &MetaLearner,
    ) -> Result<&[f32], MetaError> {
        let config = learner.config();
        let chosen: Vec<EpisodeId> =
            store.top_episodes(app, config.trajectories, config.selection.into())?.iter().map(|r| r.id).collect();
        let key = (learner.updates(), chosen);
        if self.entries.get(app).is_none_or(|(k, _)| *k != key) {
            let (ids, bundle) = select(store, app, learner)?;
            let embedding = learner.embed(&bundle)?;
            self.computed += 1;
            self.entries.insert(app.to_string(), ((learner.updates(), ids), embedding));
        }
        Ok(&self.entries[app].1)
    }

    /// Embeddings computed so far (cache misses).
    pub fn computed(&self) -> u64 {
        self.computed
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::MetaConfig;
    use aware_store::{EpisodeMeta, SqliteStore, Sync, Transition};

    fn record(store: &mut SqliteStore, app: &str, n: u64, level: f32) {
        let meta = EpisodeMeta {
            agent: format!("ddpg-{app}"),
            app: app.into(),
            episode: n,
            stage: "online".into(),
            policy: "ddpg".into(),
            state_dim: 1,
            action_dim: 1,
            started_at_s: n as f64,
        };
        let id = store.begin_episode(&meta).unwrap();
        let steps: Vec<Transition> = (0..5)
            .map(|t| Transition {
                step: t,
                state: vec![level + t as f32 * 0.1],
                action: vec![0.5],
                reward: level,
                next_state: vec![level + (t + 1) as f32 * 0.1],
                done: t == 4,
            })
            .collect();
        store.append(id, &steps).unwrap();
        store.close_episode(id, 5.0 * level as f64).unwrap();
    }

    #[test]
    fn the_cache_recomputes_only_when_the_chosen_episodes_or_the_network_change() {
        let dir = tempfile::tempdir().unwrap();
        let mut store = SqliteStore::open(&dir.path().join("s.db"), Sync::Normal).unwrap();
        let config = MetaConfig { hidden: 8, fc: 8, embedding: 4, trajectories: 3, ..MetaConfig::aware(3) };
        let mut learner = MetaLearner::new(config, 1).unwrap();
        let mut cache = EmbeddingCache::new();
        record(&mut store, "a", 0, 0.5);
        record(&mut store, "a", 1, 0.6);
        let e = cache.embedding(&store, "a", &learner).unwrap_err();
        assert_eq!(e.to_string(), "2 trajectories, the meta-learner needs at least 3");
        record(&mut store, "a", 2, 0.7);
        record(&mut store, "b", 0, 0.1);
        let first = cache.embedding(&store, "a", &learner).unwrap().to_vec();
        assert_eq!(cache.embedding(&store, "a", &learner).unwrap(), first);
        assert_eq!(cache.computed(), 1);
        // A worse episode does not enter the top 3: nothing to recompute.
        record(&mut store, "a", 3, 0.2);
        cache.embedding(&store, "a", &learner).unwrap();
        assert_eq!(cache.computed(), 1);
        // A better one does, and so does a meta-training step.
        record(&mut store, "a", 4, 0.9);
        cache.embedding(&store, "a", &learner).unwrap();
        assert_eq!(cache.computed(), 2);
        let (_, bundle) = select(&store, "a", &learner).unwrap();
        assert_eq!((bundle.trajectories(), bundle.steps(), bundle.features()), (3, 5, 3));
        learner.train_step(&[&bundle], |e| crate::mean_squared_error(e, &[0.0; 4])).unwrap();
        cache.embedding(&store, "a", &learner).unwrap();
        assert_eq!(cache.computed(), 3);
        // Another pair has its own (too few) episodes.
        assert!(matches!(cache.embedding(&store, "b", &learner), Err(MetaError::TooFewTrajectories { have: 1, .. })));
    }
}
