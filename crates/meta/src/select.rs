//! Which trajectories the meta-learner reads for an ⟨application, environment⟩ pair, and the
//! per-pair embedding cache: recomputed only when the chosen episodes change.

use std::collections::HashMap;

use aware_store::{EpisodeId, EpisodeRecord, TopMode, TrajectoryStore};

use crate::{Bundle, MetaError, MetaLearner, Profile, Selection};

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
    let records = chosen(store, app, learner, None)?;
    let bundle = bundle_of(store, &records, learner)?;
    Ok((records.iter().map(|r| r.id).collect(), bundle))
}

/// Which of an app's stored episodes its embedding is read from, in the lifecycle: those its
/// fallback drove under the lifecycle's own store agent, and at least as many as the pool's
/// embeddings were read from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct EpisodeFilter {
    /// The store agent of app A is `{agent_prefix}{A}` (the lifecycle manager's: `aware@`), so
    /// episodes other commands recorded for an app of the same name are never read.
    pub agent_prefix: String,
    /// Only the episodes this policy drove (the fallback: the behaviour the pool's embeddings
    /// were read from; the agent's own episodes never feed back into its embedding).
    pub policy: String,
    /// Fewer such episodes than this: no embedding (the pool's were read from its probes).
    pub min_episodes: usize,
    /// Only episodes of this many intervals (the pool's; 0: any), so that episodes an earlier
    /// run of another length recorded for an app of the same name are not read.
    pub episode_steps: u32,
}

/// The episode records [`select`] reads, without their transitions; with a filter, only the
/// episodes it admits, ranked by total reward (then oldest first) and chosen as the mode says.
fn chosen(
    store: &dyn TrajectoryStore,
    app: &str,
    learner: &MetaLearner,
    filter: Option<&EpisodeFilter>,
) -> Result<Vec<EpisodeRecord>, MetaError> {
    let config = learner.config();
    let mode: TopMode = config.selection.into();
    let Some(filter) = filter else {
        return Ok(store.top_episodes(app, config.trajectories, mode)?);
    };
    let (mut ranked, unusable): (Vec<EpisodeRecord>, Vec<EpisodeRecord>) = store
        .episodes(Some(&format!("{}{app}", filter.agent_prefix)))?
        .into_iter()
        .filter(|r| r.is_complete() && r.meta.app == app && r.meta.policy == filter.policy)
        .filter(|r| filter.episode_steps == 0 || r.length == filter.episode_steps)
        .partition(|r| r.total_reward.is_some_and(f64::is_finite));
    // An episode whose total reward is not a number can never be ranked or read: it is passed
    // over (a damaged record would otherwise rank first, or last, for good), and named when
    // too few usable ones are left.
    if ranked.len() < filter.min_episodes {
        return Err(match unusable.first() {
            Some(bad) => MetaError::Episode {
                id: bad.id,
                reason: format!(
                    "total reward is {} ({} of the app's episodes unusable so; {} usable, {} needed)",
                    bad.total_reward.unwrap_or(f64::NAN),
                    unusable.len(),
                    ranked.len(),
                    filter.min_episodes
                ),
            },
            None => MetaError::TooFewTrajectories { have: ranked.len(), need: filter.min_episodes },
        });
    }
    let reward = |r: &EpisodeRecord| r.total_reward.unwrap_or(f64::NEG_INFINITY);
    ranked.sort_by(|a, b| reward(b).total_cmp(&reward(a)).then(a.id.cmp(&b.id)));
    let (best, worst) = mode.split(config.trajectories);
    // The worst lowest first (oldest first among equals), as the store's own query returns them.
    let mut low = ranked.clone();
    low.sort_by(|a, b| reward(a).total_cmp(&reward(b)).then(a.id.cmp(&b.id)));
    low.truncate(worst);
    ranked.truncate(best);
    Ok(aware_store::best_then_worst(ranked, low))
}

/// The chosen episodes' transitions as a bundle: enough of them, each with a finite total
/// reward and at least one transition.
fn bundle_of(
    store: &dyn TrajectoryStore,
    records: &[EpisodeRecord],
    learner: &MetaLearner,
) -> Result<Bundle, MetaError> {
    let need = learner.config().min_trajectories;
    if records.len() < need {
        return Err(MetaError::TooFewTrajectories { have: records.len(), need });
    }
    let mut episodes = Vec::with_capacity(records.len());
    for r in records {
        if let Some(reward) = r.total_reward.filter(|v| !v.is_finite()) {
            return Err(MetaError::Episode { id: r.id, reason: format!("total reward is {reward}") });
        }
        let (_, transitions) = store.episode(r.id)?;
        if transitions.is_empty() {
            return Err(MetaError::Episode { id: r.id, reason: "holds no transition".into() });
        }
        episodes.push(transitions);
    }
    Bundle::from_transitions(&episodes)
}

/// What an embedding was made from: the meta-learner's revision and the chosen episodes.
type Source = (u64, Vec<EpisodeId>);

/// Embeddings per pair, kept until the pair's chosen episodes change or the meta-learner
/// changes what it embeds them as ([`MetaLearner::revision`]: a training step, a new centre or
/// standardisation, another learner).
#[derive(Debug, Default)]
pub struct EmbeddingCache {
    entries: HashMap<String, (Source, Vec<f32>, Profile)>,
    computed: u64,
    /// Read only the episodes this admits (`None`: the app's best, whoever drove them).
    filter: Option<EpisodeFilter>,
}

impl EmbeddingCache {
    pub fn new() -> Self {
        Self::default()
    }

    /// A cache that reads only the episodes `filter` admits (the lifecycle's).
    pub fn filtered(filter: EpisodeFilter) -> Self {
        Self { filter: Some(filter), ..Self::default() }
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
        // One query for the chosen episodes; their transitions are read only on a miss.
        let records = chosen(store, app, learner, self.filter.as_ref())?;
        let key = (learner.revision(), records.iter().map(|r| r.id).collect::<Vec<_>>());
        if self.entries.get(app).is_none_or(|(k, _, _)| *k != key) {
            let bundle = bundle_of(store, &records, learner)?;
            let embedding = learner.embed(&bundle)?;
            let profile = learner.profile(&bundle)?;
            self.computed += 1;
            self.entries.insert(app.to_string(), (key, embedding, profile));
        }
        Ok(&self.entries[app].1)
    }

    /// The profile of the bundle `app`'s cached embedding was read from (after
    /// [`EmbeddingCache::embedding`] answered for it).
    pub fn profile(&self, app: &str) -> Option<&Profile> {
        self.entries.get(app).map(|(_, _, p)| p)
    }

    /// Embeddings computed so far (cache misses).
    pub fn computed(&self) -> u64 {
        self.computed
    }
}

/// The meta-learner behind lab's [`aware_lab::embed::WorkloadEmbedder`] seam: embeddings from
/// the store through the cache, judged against the training pool when a detector is given.
#[derive(Debug)]
pub struct StoreEmbedder {
    pub learner: MetaLearner,
    pub cache: EmbeddingCache,
    pub ood: Option<crate::OodDetector>,
}

impl StoreEmbedder {
    pub fn new(learner: MetaLearner, ood: Option<crate::OodDetector>) -> Self {
        Self { learner, cache: EmbeddingCache::new(), ood }
    }

    /// Reading only the episodes `filter` admits ([`EmbeddingCache::filtered`]).
    pub fn filtered(learner: MetaLearner, ood: Option<crate::OodDetector>, filter: EpisodeFilter) -> Self {
        Self { learner, cache: EmbeddingCache::filtered(filter), ood }
    }
}

impl aware_lab::embed::WorkloadEmbedder for StoreEmbedder {
    fn width(&self) -> usize {
        self.learner.config().embedding
    }

    fn embed(
        &mut self,
        store: &dyn TrajectoryStore,
        app: &str,
    ) -> Result<aware_lab::embed::WorkloadEmbedding, aware_lab::embed::EmbedRefusal> {
        let refuse = |e: MetaError| aware_lab::embed::EmbedRefusal { app: app.to_string(), reason: e.to_string() };
        let raw = self.cache.embedding(store, app, &self.learner).map_err(refuse)?.to_vec();
        if let Some(first) = raw.iter().position(|v| !v.is_finite()) {
            let count = raw.iter().filter(|v| !v.is_finite()).count();
            return Err(refuse(MetaError::Embedding(format!(
                "has {count} non-finite values of {} (the first at {first})",
                raw.len()
            ))));
        }
        // The detector knows the pool's embeddings and profiles as the meta-learner made them.
        let (ood_score, out_of_distribution, ood_reason, ood_detail) = match &self.ood {
            Some(d) => {
                let v = d.judge(&raw, self.cache.profile(app)).map_err(refuse)?;
                (Some(v.distance), v.out_of_distribution, v.reason, Some(v.detail))
            }
            None => (None, false, None, None),
        };
        // The base learner reads it at unit length, as in meta-training.
        let values = crate::train::unit(&raw).0;
        Ok(aware_lab::embed::WorkloadEmbedding { values, ood_score, out_of_distribution, ood_reason, ood_detail })
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
        // A new centre and a fitted standardisation change every embedding without a step.
        let before = cache.embedding(&store, "a", &learner).unwrap().to_vec();
        let updates = learner.updates();
        let other = bundle.standardised(&[0.5; 3], &[2.0; 3]);
        learner.centre_on(&[&bundle, &other]).unwrap();
        assert_eq!(learner.updates(), updates);
        let centred = cache.embedding(&store, "a", &learner).unwrap().to_vec();
        assert_eq!(cache.computed(), 4);
        assert_ne!(centred, before);
        assert_eq!(centred, learner.embed(&bundle).unwrap());
        learner.fit_normaliser(&[&bundle, &other]).unwrap();
        assert_eq!(cache.embedding(&store, "a", &learner).unwrap(), learner.embed(&bundle).unwrap());
        assert_eq!(cache.computed(), 5);
        // A learner built afresh never shares a revision, even with the same update count.
        let fresh = MetaLearner::new(learner.config().clone(), 2).unwrap();
        assert_ne!(fresh.revision(), learner.revision());
        cache.embedding(&store, "a", &fresh).unwrap();
        assert_eq!(cache.computed(), 6);
        // Back to the first learner (a miss); frozen, its centre stays and so does the entry.
        learner.set_learning(false);
        cache.embedding(&store, "a", &learner).unwrap();
        learner.centre_on(&[&bundle, &other]).unwrap();
        cache.embedding(&store, "a", &learner).unwrap();
        assert_eq!(cache.computed(), 7);
        // Another pair has its own (too few) episodes.
        assert!(matches!(cache.embedding(&store, "b", &learner), Err(MetaError::TooFewTrajectories { have: 1, .. })));
    }

    /// An episode of `agent` for `app` driven by `policy`, one step at `level`.
    fn stored(store: &mut SqliteStore, agent: &str, app: &str, policy: &str, n: u64, level: f32) {
        let meta = EpisodeMeta {
            agent: agent.into(),
            app: app.into(),
            episode: n,
            stage: "offline".into(),
            policy: policy.into(),
            state_dim: 1,
            action_dim: 1,
            started_at_s: n as f64,
        };
        let id = store.begin_episode(&meta).unwrap();
        let t = Transition {
            step: 0,
            state: vec![level],
            action: vec![0.0],
            reward: level,
            next_state: vec![level],
            done: true,
        };
        store.append(id, &[t]).unwrap();
        store.close_episode(id, level as f64).unwrap();
    }

    #[test]
    fn a_filtered_cache_reads_only_the_lifecycles_fallback_episodes_and_enough_of_them() {
        let dir = tempfile::tempdir().unwrap();
        let mut store = SqliteStore::open(&dir.path().join("s.db"), Sync::Normal).unwrap();
        let config =
            MetaConfig { hidden: 8, fc: 8, embedding: 4, trajectories: 2, min_trajectories: 2, ..MetaConfig::aware(3) };
        let learner = MetaLearner::new(config, 1).unwrap();
        let filter =
            EpisodeFilter { agent_prefix: "aware@".into(), policy: "mpa".into(), min_episodes: 3, episode_steps: 1 };
        // Another agent's episodes of the same app and policy (`aware compare` records `mpa@a`),
        // and the lifecycle agent's own: never read.
        for (n, level) in [(0, 0.5), (1, 0.9)] {
            stored(&mut store, "mpa@a", "a", "mpa", n, level);
        }
        stored(&mut store, "aware@a", "a", "aware", 0, 0.95);
        assert_eq!(chosen(&store, "a", &learner, None).unwrap().len(), 2);
        let mut cache = EmbeddingCache::filtered(filter.clone());
        assert!(matches!(
            cache.embedding(&store, "a", &learner),
            Err(MetaError::TooFewTrajectories { have: 0, need: 3 })
        ));
        stored(&mut store, "aware@a", "a", "mpa", 1, 0.1);
        stored(&mut store, "aware@a", "a", "mpa", 2, 0.3);
        assert!(matches!(
            cache.embedding(&store, "a", &learner),
            Err(MetaError::TooFewTrajectories { have: 2, need: 3 })
        ));
        stored(&mut store, "aware@a", "a", "mpa", 3, 0.2);
        stored(&mut store, "aware@a", "a", "mpa", 4, 0.2);
        let picked = chosen(&store, "a", &learner, Some(&filter)).unwrap();
        let episodes = |p: &[EpisodeRecord]| p.iter().map(|r| r.meta.episode).collect::<Vec<_>>();
        assert_eq!(episodes(&picked), vec![2, 3]);
        // FLASH's halves within them: the best and the worst (oldest first among equals).
        let flash =
            MetaLearner::new(MetaConfig { selection: Selection::BestAndWorst, ..learner.config().clone() }, 1).unwrap();
        assert_eq!(episodes(&chosen(&store, "a", &flash, Some(&filter)).unwrap()), vec![2, 1]);
        assert_eq!(cache.embedding(&store, "a", &learner).unwrap().len(), 4);
        // A damaged record (a total reward that is not a number) is passed over, not ranked
        // first for good; with too few usable ones left the error names it.
        let meta = EpisodeMeta {
            agent: "aware@a".into(),
            app: "a".into(),
            episode: 5,
            stage: "offline".into(),
            policy: "mpa".into(),
            state_dim: 1,
            action_dim: 1,
            started_at_s: 5.0,
        };
        let id = store.begin_episode(&meta).unwrap();
        let t =
            Transition { step: 0, state: vec![0.0], action: vec![0.0], reward: 0.0, next_state: vec![0.0], done: true };
        store.append(id, &[t]).unwrap();
        // The store refuses a total that is not finite; a record damaged on disk has one.
        assert!(store.close_episode(id, f64::INFINITY).is_err());
        store.close_episode(id, 0.0).unwrap();
        let db = rusqlite::Connection::open(dir.path().join("s.db")).unwrap();
        db.execute("UPDATE episodes SET total_reward = 1e999 WHERE id = ?1", [id]).unwrap();
        assert_eq!(episodes(&chosen(&store, "a", &learner, Some(&filter)).unwrap()), vec![2, 3]);
        let two = EpisodeFilter { min_episodes: 5, ..filter.clone() };
        let e = chosen(&store, "a", &learner, Some(&two)).unwrap_err().to_string();
        assert!(e.contains("total reward is inf") && e.contains("4 usable, 5 needed"), "{e}");
    }

    #[test]
    fn the_lifecycle_seam_refuses_with_a_reason_and_flags_unfamiliar_workloads() {
        use aware_lab::embed::WorkloadEmbedder;
        let dir = tempfile::tempdir().unwrap();
        let mut store = SqliteStore::open(&dir.path().join("s.db"), Sync::Normal).unwrap();
        let config = MetaConfig { hidden: 8, fc: 8, embedding: 4, trajectories: 3, ..MetaConfig::aware(3) };
        let learner = MetaLearner::new(config, 1).unwrap();
        record(&mut store, "a", 0, 0.5);
        let mut plain = StoreEmbedder::new(learner, None);
        let err = plain.embed(&store, "a").unwrap_err();
        assert_eq!(err.to_string(), "no workload embedding for a: 1 trajectories, the meta-learner needs at least 3");
        record(&mut store, "a", 1, 0.6);
        record(&mut store, "a", 2, 0.7);
        let e = plain.embed(&store, "a").unwrap();
        assert_eq!((e.values.len(), e.ood_score, e.out_of_distribution), (4, None, false));
        // The base learner reads it at unit length; the detector scores it as it was made.
        let raw = plain.cache.embedding(&store, "a", &plain.learner).unwrap().to_vec();
        let norm = raw.iter().map(|v| v * v).sum::<f32>().sqrt();
        for (u, r) in e.values.iter().zip(&raw) {
            assert!((u - r / norm).abs() < 1e-6, "{:?} vs {raw:?}", e.values);
        }
        // A pool far from this app's embedding flags it; one around it does not.
        let far: Vec<Vec<f32>> = (0..10).map(|i| raw.iter().map(|v| v + 100.0 + i as f32 * 0.01).collect()).collect();
        let near: Vec<Vec<f32>> = (0..10).map(|i| raw.iter().map(|v| v + (i as f32 - 4.5) * 0.01).collect()).collect();
        for (pool, unfamiliar) in [(far, true), (near, false)] {
            let learner = MetaLearner::new(plain.learner.config().clone(), 1).unwrap();
            let mut judged = StoreEmbedder::new(learner, Some(crate::OodDetector::fit(pool, 3, 0.95).unwrap()));
            let got = judged.embed(&store, "a").unwrap();
            assert_eq!(got.out_of_distribution, unfamiliar, "{got:?}");
            assert!(got.ood_score.is_some());
        }
        // With the input tests: this app holds its action and reward at one value every step,
        // which no pool app did, so it is flagged though its embedding lies among the pool's.
        let profile = plain.cache.profile("a").unwrap().clone();
        assert_eq!(profile.persistence, vec![0.0, 1.0, 1.0]);
        let pool_profiles: Vec<Profile> = (0..10)
            .map(|i| Profile {
                signature: profile.signature.iter().map(|v| v + (i as f32 - 4.5) * 0.01).collect(),
                persistence: vec![0.0, 0.01 * (i % 3) as f32, 0.0],
            })
            .collect();
        let detector =
            crate::OodDetector::fit(near_pool(&raw), 3, 0.95).unwrap().with_inputs(&pool_profiles, 0.95).unwrap();
        let learner = MetaLearner::new(plain.learner.config().clone(), 1).unwrap();
        let got = StoreEmbedder::new(learner, Some(detector)).embed(&store, "a").unwrap();
        assert!(got.out_of_distribution, "{got:?}");
        assert!(got.ood_reason.as_deref().unwrap().starts_with("persistence "), "{got:?}");
        // A pool that held its action and reward as this app does: known, and the decision log
        // reads each test's score beside its threshold.
        let alike: Vec<Profile> = pool_profiles
            .iter()
            .enumerate()
            .map(|(i, p)| Profile { persistence: vec![0.0, 1.0 - 0.01 * (i % 3) as f32, 1.0], ..p.clone() })
            .collect();
        let detector = crate::OodDetector::fit(near_pool(&raw), 3, 0.95).unwrap().with_inputs(&alike, 0.95).unwrap();
        let learner = MetaLearner::new(plain.learner.config().clone(), 1).unwrap();
        let got = StoreEmbedder::new(learner, Some(detector)).embed(&store, "a").unwrap();
        assert!(!got.out_of_distribution && got.ood_reason.is_none(), "{got:?}");
        let detail = got.ood_detail.as_deref().unwrap();
        assert!(detail.starts_with("input signature ") && detail.contains("persistence "), "{detail}");
        assert!(detail.contains("threshold") && detail.contains("embedding distance"), "{detail}");
    }

    fn near_pool(raw: &[f32]) -> Vec<Vec<f32>> {
        (0..10).map(|i| raw.iter().map(|v| v + (i as f32 - 4.5) * 0.01).collect()).collect()
    }
}
