//! Meta-training over a pool of generated applications on the simulator: the fallback (the MPA
//! default) probes each app for its first episodes, as it does in AWARE's OFFLINE stage, and
//! those probe episodes are what each app's embedding is read from; then the shared base
//! learner, conditioned on the embeddings, trains on every app at once through the vectorised
//! environment while the meta-learner trains through its loss.

use std::time::Instant;

use aware_agents::ddpg::{Ddpg, DdpgConfig};
use aware_agents::ppo::{Ppo, PpoActions, PpoConfig};
use aware_env::{ActionKind, STATE_DIM};
use aware_lab::policy::{Policy, PolicyName};
use aware_lab::progress::Progress;
use aware_lab::rollout::{Recommenders, rollout};
use aware_lab::workload::Workload;
use serde::Serialize;

use crate::base::{BaseLearner, Resumable};
use crate::train::{Fallback, MetaDriver, MetaTrainConfig, end_episodes};
use crate::{MetaConfig, MetaError, MetaLearner};

/// The action space the base learner acts in (the lifecycle's: multiplicative changes, one
/// policy for apps of any size).
pub const ACTIONS: ActionKind = ActionKind::Relative;

/// β of [`DdpgConfig::preactivation_penalty`] for the base learner and for fig8's per-app
/// learners (TL, TL+, scratch), which inherit it. Without it plain TD3's actor saturates on
/// this problem: fig8's TL source answered 0.9999 on CPU and replicas whatever the state, so
/// every TL copy was one fixed policy (the profile's maximum), and scratch's greedy policy, from
/// which r* comes, still swung at its budget's end (r* 6.9 and −16.2 on two apps of seed 1,
/// 47–56 with it). With it on every fig8 learner, `tl_over_aware` on `fig8 --quick` seeds 1, 2,
/// 3 and 5 was 2.33 / 1.37 / 1.06 / 0.79; with it on TL, TL+ and scratch only, 0.98 / 1.10 /
/// 1.19 / 0.79.
pub const BASE_PREACTIVATION_PENALTY: f32 = 0.1;

#[derive(Debug, Clone)]
pub struct PoolSpec {
    /// Episodes the fallback probes every app (its embedding is read from them).
    pub probes: u64,
    /// Episodes the conditioned base learner then trains.
    pub episodes: u64,
    /// Intervals per episode.
    pub episode_steps: u64,
    pub seed: u64,
    pub fallback: PolicyName,
    pub meta: MetaConfig,
    pub train: MetaTrainConfig,
    /// The base learner: TD3 that learns with TD3+BC's behaviour term (α 0.5, as the lifecycle's
    /// bootstrapping), so that it stays near the actions its replay buffer holds — the
    /// fallback's from the probes, then its own — and starts every unseen app from what the
    /// rules would do. Measured on `aware experiment fig8 --quick` with `adapt_noise_sigma`
    /// 0.05 (seeds 1–4): episodes to convergence 5.0 / 13.0 / 13.0 / 40.0 against 13.0 / 22.0
    /// / 23.0 / 32.5 with plain TD3 and σ 0.2; with plain TD3 and σ 0.05 it was not measured.
    /// Its actor carries the pre-activation penalty ([`BASE_PREACTIVATION_PENALTY`]).
    pub ddpg: DdpgConfig,
    /// The PPO base learner's settings, when PPO is the base learner ([`ppo_base_learner`]):
    /// SIMPPO's (2×64 hidden, lr 3e-4, γ 0.99, minibatch 10, 5 epochs, clip 0.2, entropy 0.01,
    /// value-loss weight 0.05), one rollout per app per episode.
    pub ppo: PpoConfig,
    /// Exploration noise (σ) of the base learner while it adapts to unseen apps (and of fig8's
    /// TL and TL+ while they fine-tune): small, since it keeps serving them while it learns
    /// (with TD3+BC, 0.2 — the training noise — cost SLO-violating intervals on fig8 seeds 1–3:
    /// 1,086 / 1,562 / 548 against 450 / 96 / 2 at 0.05, with the same episodes to convergence).
    /// A PPO base learner's Gaussian σ is set to it for adaptation (it trains on the pool with
    /// its own, from e^−0.5 ≈ 0.61): left at its pool value it took fig8 `--quick` seeds 1 and 5
    /// from 4.48 and 1.77 to 0.92 and 0.79 in `tl_over_aware` (at 20 cloning passes), the behaviour-cloned policy
    /// drifting away from the bar within a few episodes, with 1,612 and 1,826 violations.
    pub adapt_noise_sigma: f32,
    /// Standardise the meta-learner's input on the pool's probe episodes (fitted once, after
    /// the probes; kept at adaptation and in the checkpoint).
    pub normalise: bool,
}

impl PoolSpec {
    /// AWARE's sizes: the meta-learner of the paper, M = probe episodes.
    pub fn new(probes: u64, episodes: u64, episode_steps: u64, seed: u64) -> Self {
        let features = STATE_DIM + ACTIONS.space().dim() + 1;
        Self {
            probes,
            episodes,
            episode_steps,
            seed,
            fallback: PolicyName::Mpa,
            meta: MetaConfig {
                trajectories: probes.max(1) as usize,
                min_trajectories: 1,
                ..MetaConfig::aware(features)
            },
            train: MetaTrainConfig::default(),
            ddpg: DdpgConfig {
                bc_alpha: Some(0.5),
                preactivation_penalty: BASE_PREACTIVATION_PENALTY,
                ..aware_lab::agent::autoscaling_ddpg().td3()
            },
            // One rollout per app per episode.
            ppo: PpoConfig { rollout_steps: episode_steps.max(1) as usize, ..PpoConfig::default() },
            adapt_noise_sigma: 0.05,
            normalise: true,
        }
    }
}

pub use aware_lab::agent::Learner;

/// One episode of pool training.
#[derive(Debug, Clone, PartialEq, Serialize, serde::Deserialize)]
pub struct PoolEpisode {
    pub episode: u64,
    /// The fallback acted (a probe episode).
    pub probe: bool,
    /// Σ reward over the episode, averaged over apps.
    pub mean_reward: f64,
    pub slo_violations: u64,
    pub meta_steps: u64,
    pub seconds: f64,
}

/// Meta-trains on every app of `workload` with AWARE's base learner (DDPG, `spec.ddpg`);
/// returns the driver (base learner, meta-learner, each app's embedding) and the curve.
pub fn train_pool(
    workload: &Workload,
    spec: &PoolSpec,
    progress: &dyn Progress,
) -> Result<(MetaDriver, Vec<PoolEpisode>), MetaError> {
    let agent = Ddpg::new(STATE_DIM + spec.meta.embedding, ACTIONS.space().dim(), spec.ddpg.clone(), spec.seed);
    train_pool_with(agent, workload, spec, progress)
}

/// A PPO base learner for `spec` (a Gaussian policy on [`ACTIONS`], `spec.ppo`), reading the
/// state ⊕ the meta-learner's embedding.
pub fn ppo_base_learner(spec: &PoolSpec) -> Ppo {
    Ppo::new(
        STATE_DIM + spec.meta.embedding,
        PpoActions::Continuous(ACTIONS.space().dim()),
        spec.ppo.clone(),
        spec.seed,
    )
}

/// [`train_pool`] with `agent` as the base learner (its state: [`STATE_DIM`] + the embedding).
pub fn train_pool_with<A: BaseLearner>(
    agent: A,
    workload: &Workload,
    spec: &PoolSpec,
    progress: &dyn Progress,
) -> Result<(MetaDriver<A>, Vec<PoolEpisode>), MetaError> {
    let mut driver = pool_driver(agent, workload, spec)?;
    let curve = run_episodes(&mut driver, workload, spec, progress, "meta-training")?;
    Ok((driver, curve))
}

/// A new pool run's driver: `agent` as the base learner, a fresh meta-learner, the fallback probing.
fn pool_driver<A: BaseLearner>(agent: A, workload: &Workload, spec: &PoolSpec) -> Result<MetaDriver<A>, MetaError> {
    let meta = MetaLearner::new(spec.meta.clone(), spec.seed)?;
    let mut driver =
        MetaDriver::new(agent, meta, STATE_DIM, spec.train.clone(), spec.seed).with_fallback(fallback(workload, spec)?);
    // Embeddings read the fallback's episodes only: the same behaviour at adaptation.
    driver.embed_own_episodes = false;
    Ok(driver)
}

/// A pool run's training state at the end of an episode after the probes: the driver's
/// ([`crate::train::DriverTraining`]; `T` the base learner's training state, DDPG's by default)
/// and the curve so far. [`train_pool_resumable_with`] goes on from it exactly as the run it
/// was taken from would have.
#[derive(Debug, Clone, PartialEq, Serialize, serde::Deserialize)]
pub struct PoolTraining<T = aware_agents::DdpgTraining> {
    pub driver: crate::train::DriverTraining<T>,
    pub curve: Vec<PoolEpisode>,
}

impl<T: Serialize + serde::de::DeserializeOwned> PoolTraining<T> {
    /// Written compactly (CBOR: it holds the replay buffer and every app's recent transitions).
    pub fn to_bytes(&self) -> Result<Vec<u8>, MetaError> {
        let mut out = Vec::new();
        ciborium::into_writer(self, &mut out)
            .map_err(|e| MetaError::Config { field: "training state", reason: e.to_string() })?;
        Ok(out)
    }

    /// Read back from [`PoolTraining::to_bytes`]' form.
    pub fn from_bytes(bytes: &[u8]) -> Result<Self, MetaError> {
        ciborium::from_reader(bytes).map_err(|e| MetaError::Config { field: "training state", reason: e.to_string() })
    }
}

/// What a resumable pool run calls with its training state at the end of every episode after
/// the probes but the last (lent: written down, or copied, not kept by reference).
pub type Keep<'a, T = aware_agents::DdpgTraining> = dyn FnMut(&PoolTraining<T>) -> Result<(), MetaError> + 'a;

/// A pool run taken up from its training state ([`resume_pool`]): checked, ready to go on.
pub struct Resumed<A: BaseLearner = Ddpg> {
    driver: MetaDriver<A>,
    curve: Vec<PoolEpisode>,
}

/// Takes up `state` for a run of `workload` and `spec`: the driver rebuilt and checked (every
/// part sized and finite), the state kept for the pool's apps, after the probes and before the
/// last episode. Refused otherwise, before any episode runs.
pub fn resume_pool<A: Resumable>(
    workload: &Workload,
    spec: &PoolSpec,
    state: PoolTraining<A::Training>,
) -> Result<Resumed<A>, MetaError> {
    let bad = |reason: String| MetaError::Config { field: "training state", reason };
    let (done, total) = (state.curve.len() as u64, spec.probes + spec.episodes);
    if done < spec.probes || done >= total {
        return Err(bad(format!(
            "kept after {done} episodes, between the {} probes and the last of {total} expected",
            spec.probes
        )));
    }
    let driver = MetaDriver::resume(state.driver, Some(fallback(workload, spec)?))?;
    if driver.apps_known() != workload.apps.len() {
        return Err(bad(format!("kept for {} apps, the pool has {}", driver.apps_known(), workload.apps.len())));
    }
    Ok(Resumed { driver, curve: state.curve })
}

/// [`train_pool`], keeping the run's training state at the end of every episode after the
/// probes but the last (`keep`), or going on from one (`resume`, taken from a run of the same
/// workload and spec): the result is the uninterrupted run's, bit for bit.
pub fn train_pool_resumable(
    workload: &Workload,
    spec: &PoolSpec,
    progress: &dyn Progress,
    resume: Option<Resumed>,
    keep: &mut Keep<'_>,
) -> Result<(MetaDriver, Vec<PoolEpisode>), MetaError> {
    let fresh = || Ddpg::new(STATE_DIM + spec.meta.embedding, ACTIONS.space().dim(), spec.ddpg.clone(), spec.seed);
    train_pool_resumable_with(fresh, workload, spec, progress, resume, keep)
}

/// [`train_pool_resumable`] with the base learner `fresh` makes (DDPG's or PPO's) when the run
/// starts anew.
pub fn train_pool_resumable_with<A: Resumable>(
    fresh: impl FnOnce() -> A,
    workload: &Workload,
    spec: &PoolSpec,
    progress: &dyn Progress,
    resume: Option<Resumed<A>>,
    keep: &mut Keep<'_, A::Training>,
) -> Result<(MetaDriver<A>, Vec<PoolEpisode>), MetaError> {
    let total = spec.probes + spec.episodes;
    let (mut driver, done) = match resume {
        Some(Resumed { driver, curve }) => (driver, curve),
        None => (pool_driver(fresh(), workload, spec)?, Vec::new()),
    };
    let mut after = |driver: &mut MetaDriver<A>, curve: &[PoolEpisode]| {
        let n = curve.len() as u64;
        if n < spec.probes || n == total {
            return Ok(());
        }
        // Lent, not copied (a GB at 800 apps), and taken back whatever `keep` made of it.
        let state = PoolTraining { driver: driver.lend_training_state()?, curve: curve.to_vec() };
        let kept = keep(&state);
        driver.end_lending(state.driver);
        kept
    };
    let curve = run_episodes_from(&mut driver, workload, spec, progress, "meta-training", done, &mut after)?;
    Ok((driver, curve))
}

/// The fallback probing every app of `workload`, its choices read in [`ACTIONS`].
pub fn fallback(workload: &Workload, spec: &PoolSpec) -> Result<Fallback, MetaError> {
    let apps = workload.apps.len();
    let policies = (0..apps)
        .map(|i| Policy::build(&spec.fallback, &workload.app_profile(i), Some(&workload.apps[i]), None))
        .collect::<Result<Vec<_>, _>>()?;
    Ok(Fallback {
        recommenders: Recommenders::new(policies),
        kind: ACTIONS,
        bounds: (0..apps).map(|i| workload.profile.bounds_for(&workload.apps[i].bounds)).collect(),
    })
}

/// Adapts a meta-trained driver to the apps of `workload` it has never seen (AWARE §4.4): the
/// meta-learner frozen, the fallback probes each new app for `probes` episodes (its embedding is
/// read from them), then the shared base learner acts on the new apps and keeps training for
/// `episodes` episodes. Returns the curve (probe episodes first).
pub fn adapt<A: BaseLearner>(
    driver: &mut MetaDriver<A>,
    workload: &Workload,
    spec: &PoolSpec,
    progress: &dyn Progress,
) -> Result<Vec<PoolEpisode>, MetaError> {
    prepare_adaptation(driver, workload, spec)?;
    run_episodes(driver, workload, spec, progress, "adapting")
}

/// Readies a meta-trained driver for the unseen apps of `workload`: their fallback probes, no
/// app remembered, the meta-learner frozen, the base learner learning and exploring.
pub fn prepare_adaptation<A: BaseLearner>(
    driver: &mut MetaDriver<A>,
    workload: &Workload,
    spec: &PoolSpec,
) -> Result<(), MetaError> {
    driver.set_fallback(fallback(workload, spec)?);
    driver.forget_apps();
    driver.meta.set_learning(false);
    driver.learn = true;
    driver.explore = true;
    driver.agent.set_exploration(spec.adapt_noise_sigma)?;
    driver.embed_own_episodes = false;
    Ok(())
}

/// `spec.probes` fallback episodes then `spec.episodes` agent episodes on `workload`. After
/// the probes a base learner that cannot learn from them in its updates (PPO) behaviour-clones
/// them ([`MetaDriver::imitate_recent`]).
pub fn run_episodes<A: BaseLearner>(
    driver: &mut MetaDriver<A>,
    workload: &Workload,
    spec: &PoolSpec,
    progress: &dyn Progress,
    what: &str,
) -> Result<Vec<PoolEpisode>, MetaError> {
    run_episodes_from(driver, workload, spec, progress, what, Vec::new(), &mut |_, _| Ok(()))
}

/// What [`run_episodes_from`] calls at the end of every episode: the driver and the curve.
pub type EpisodeEnd<'a, A> = dyn FnMut(&mut MetaDriver<A>, &[PoolEpisode]) -> Result<(), MetaError> + 'a;

/// [`run_episodes`] going on after the episodes of `done` (the curve so far: a run resumed from
/// a driver's training state taken after them), calling `after` with the driver and the curve
/// at the end of every episode.
pub fn run_episodes_from<A: BaseLearner>(
    driver: &mut MetaDriver<A>,
    workload: &Workload,
    spec: &PoolSpec,
    progress: &dyn Progress,
    what: &str,
    done: Vec<PoolEpisode>,
    after: &mut EpisodeEnd<'_, A>,
) -> Result<Vec<PoolEpisode>, MetaError> {
    let apps = workload.apps.len();
    let mut arena = workload.env(ACTIONS, spec.episode_steps, workload.trace_seed);
    let total = spec.probes + spec.episodes;
    let first = done.len() as u64;
    if first > total || (first > 0 && first < spec.probes) {
        return Err(MetaError::Config {
            field: "training state",
            reason: format!("{first} episodes done of {total}, resumed only after the {} probes", spec.probes),
        });
    }
    progress.start(total, what);
    progress.inc(first);
    let mut curve = done;
    // The meta-learner waits for its input standardisation: no step on unscaled probes.
    let fit_pending =
        spec.normalise && spec.probes > 0 && driver.meta.is_learning() && driver.meta.config().normaliser.is_none();
    if fit_pending {
        driver.meta.set_learning(false);
    }
    for episode in first..total {
        let start = Instant::now();
        driver.probing = episode < spec.probes;
        let seed = workload.trace_seed.wrapping_add(episode);
        let totals = rollout(&mut arena, driver, seed, spec.episode_steps, &mut [], &aware_lab::progress::Silent)?;
        end_episodes(driver)?;
        // After the pool's probes, before any meta-training step: the input standardisation.
        if fit_pending && episode + 1 == spec.probes {
            driver.meta.set_learning(true);
            driver.fit_normaliser()?;
        }
        if episode + 1 == spec.probes {
            driver.probes_done()?;
        }
        let row = PoolEpisode {
            episode,
            probe: driver.probing,
            mean_reward: totals.reward / apps as f64,
            slo_violations: totals.slo_violations,
            meta_steps: driver.meta_steps,
            seconds: start.elapsed().as_secs_f64(),
        };
        progress.message(&format!("ep {episode} r {:.1} viol {}", row.mean_reward, row.slo_violations));
        progress.inc(1);
        curve.push(row);
        after(driver, &curve)?;
    }
    driver.probing = false;
    Ok(curve)
}

#[cfg(test)]
mod tests {
    use super::*;
    use aware_lab::workload::WorkloadSpec;

    /// A pool run stopped after an episode and resumed from its kept state ends as the run that
    /// never stopped: the same curve (but for wall time), the same driver, bit for bit, with
    /// either base learner (PPO's having cloned the probes and learning on-policy since).
    #[test]
    fn a_resumed_pool_run_ends_as_the_uninterrupted_one() {
        let workload =
            Workload::load(&WorkloadSpec { apps: 4, seed: 6, steps: 60, ..WorkloadSpec::default() }).unwrap();
        let mut pool = PoolSpec::new(1, 3, 15, 6);
        pool.meta = MetaConfig { hidden: 8, fc: 8, embedding: 4, ..pool.meta };
        pool.ddpg = DdpgConfig { hidden: vec![16, 16], warmup: 16, replay_capacity: 100, ..pool.ddpg };
        pool.ppo = PpoConfig { hidden: vec![16, 16], ..pool.ppo };
        let ddpg = || Ddpg::new(STATE_DIM + pool.meta.embedding, ACTIONS.space().dim(), pool.ddpg.clone(), pool.seed);
        resumes_exactly(&workload, &pool, ddpg);
        resumes_exactly(&workload, &pool, || ppo_base_learner(&pool));
    }

    fn resumes_exactly<A: Resumable>(workload: &Workload, pool: &PoolSpec, fresh: impl Fn() -> A) {
        let silent = &aware_lab::progress::Silent;
        let mut kept = Vec::new();
        let (straight, curve) = train_pool_resumable_with(&fresh, workload, pool, silent, None, &mut |s| {
            kept.push(s.to_bytes()?);
            Ok(())
        })
        .unwrap();
        // Kept after episodes 1, 2 and 3 of 4 (the probe's, then two training episodes), not the last.
        assert_eq!(kept.len(), 3);
        // Keeping lends the state out and takes it back: the run is the one that keeps nothing.
        let (plain, plain_curve) = train_pool_with(fresh(), workload, pool, silent).unwrap();
        assert!(plain.training_state().unwrap() == straight.training_state().unwrap());
        assert_eq!(plain_curve.len(), curve.len());
        let wall = |c: &[PoolEpisode]| c.iter().map(|r| PoolEpisode { seconds: 0.0, ..r.clone() }).collect::<Vec<_>>();
        let end = straight.training_state().unwrap();
        for bytes in &kept {
            let state = PoolTraining::<A::Training>::from_bytes(bytes).unwrap();
            let done = state.curve.len();
            let mut again = Vec::new();
            let taken = resume_pool::<A>(workload, pool, state).unwrap();
            let (resumed, rest) = train_pool_resumable_with(&fresh, workload, pool, silent, Some(taken), &mut |s| {
                again.push(s.clone());
                Ok(())
            })
            .unwrap();
            assert_eq!(wall(&rest), wall(&curve), "resumed after {done} episodes");
            assert!(resumed.training_state().unwrap() == end, "resumed after {done} episodes");
            assert_eq!(again.len(), 3 - done);
        }
        // A state kept for another pool is refused, not run on.
        let other = Workload::load(&WorkloadSpec { apps: 3, seed: 6, steps: 60, ..WorkloadSpec::default() }).unwrap();
        let state = PoolTraining::<A::Training>::from_bytes(&kept[0]).unwrap();
        let e = resume_pool::<A>(&other, pool, state).err().unwrap().to_string();
        assert!(e.contains("kept for 4 apps, the pool has 3"), "{e}");
        assert!(PoolTraining::<A::Training>::from_bytes(&kept[0][..100]).is_err());
    }

    /// A kept state whose PPO base learner picks among discrete actions is refused by name
    /// before any episode runs: the meta-learner's steps are read in a continuous box.
    #[test]
    fn a_state_kept_with_a_discrete_base_learner_is_refused() {
        let workload =
            Workload::load(&WorkloadSpec { apps: 4, seed: 6, steps: 60, ..WorkloadSpec::default() }).unwrap();
        let mut pool = PoolSpec::new(1, 2, 15, 6);
        pool.meta = MetaConfig { hidden: 8, fc: 8, embedding: 4, ..pool.meta };
        pool.ppo = PpoConfig { hidden: vec![16, 16], ..pool.ppo };
        let mut kept = Vec::new();
        let silent = &aware_lab::progress::Silent;
        train_pool_resumable_with(|| ppo_base_learner(&pool), &workload, &pool, silent, None, &mut |s| {
            kept.push(s.to_bytes()?);
            Ok(())
        })
        .unwrap();
        let state = PoolTraining::<aware_agents::PpoTraining>::from_bytes(&kept[0]).unwrap();
        // The continuous state resumes; the same state with a discrete learner does not.
        assert!(resume_pool::<Ppo>(&workload, &pool, state.clone()).is_ok());
        let mut state = state;
        let discrete = Ppo::new(STATE_DIM + pool.meta.embedding, PpoActions::Discrete(5), pool.ppo.clone(), pool.seed);
        state.driver.agent = discrete.training_state();
        let e = resume_pool::<Ppo>(&workload, &pool, state).err().unwrap().to_string();
        assert!(e.contains("does not act in a continuous box"), "{e}");
    }

    #[test]
    fn a_pool_meta_trains_on_the_simulator_with_the_fallback_probing() {
        let spec = WorkloadSpec { apps: 6, seed: 4, steps: 40, ..WorkloadSpec::default() };
        let workload = Workload::load(&spec).unwrap();
        let mut pool = PoolSpec::new(2, 2, 20, 4);
        pool.meta = MetaConfig { hidden: 16, fc: 16, embedding: 8, ..pool.meta };
        pool.ddpg = DdpgConfig { hidden: vec![32, 32], warmup: 64, ..pool.ddpg };
        let (driver, curve) = train_pool(&workload, &pool, &aware_lab::progress::Silent).unwrap();
        assert_eq!(curve.len(), 4);
        assert!(curve[0].probe && curve[1].probe && !curve[2].probe);
        assert_eq!(curve[1].meta_steps, 0, "no meta-learner step before the normaliser is fitted");
        // Probe episodes feed the embeddings; training episodes step the meta-learner.
        assert!(curve[3].meta_steps > curve[2].meta_steps, "{curve:?}");
        assert!(driver.meta.updates() > 0);
        assert!(driver.meta.config().normaliser.is_some(), "fitted on the probes");
        let embeddings: Vec<&[f32]> = (0..6).map(|i| driver.embedding(i).expect("every app is embedded")).collect();
        assert!(embeddings.iter().all(|e| e.len() == 8 && e.iter().all(|v| v.is_finite())));
        // Apps with different traffic and sizes are told apart.
        assert!(embeddings.windows(2).any(|w| w[0] != w[1]));
        assert!(curve.iter().all(|r| r.mean_reward.is_finite()));
        // Unseen apps: the meta-learner frozen, the new apps probed and embedded, the base
        // learner training on.
        let (meta_updates, agent_updates) = (driver.meta.updates(), driver.agent.updates());
        let mut driver = driver;
        let unseen = Workload::load(&WorkloadSpec { apps: 3, seed: 99, steps: 40, ..WorkloadSpec::default() }).unwrap();
        let curve = adapt(&mut driver, &unseen, &pool, &aware_lab::progress::Silent).unwrap();
        assert_eq!(curve.len(), 4);
        assert_eq!(driver.meta.updates(), meta_updates, "frozen");
        assert!(driver.agent.updates() > agent_updates, "the base learner keeps learning");
        assert!((0..3).all(|i| driver.embedding(i).is_some()) && driver.embedding(3).is_none());
    }

    /// A PPO base learner clones the pool's probes without an anchor (the meta-learner is
    /// learning, so the embeddings in those states move), and each new app's probes with one
    /// (the meta-learner frozen).
    #[test]
    fn a_ppo_base_learner_is_anchored_to_the_probes_only_while_the_meta_learner_is_frozen() {
        let workload =
            Workload::load(&WorkloadSpec { apps: 4, seed: 5, steps: 40, ..WorkloadSpec::default() }).unwrap();
        let mut pool = PoolSpec::new(2, 1, 20, 5);
        pool.meta = MetaConfig { hidden: 16, fc: 16, embedding: 8, ..pool.meta };
        let agent = ppo_base_learner(&pool);
        let (mut driver, _) = train_pool_with(agent, &workload, &pool, &aware_lab::progress::Silent).unwrap();
        assert_eq!(driver.agent.behaviour_anchor_weight(), 0.0, "no anchor from the pool's probes");
        let unseen = Workload::load(&WorkloadSpec { apps: 2, seed: 98, steps: 40, ..WorkloadSpec::default() }).unwrap();
        adapt(&mut driver, &unseen, &pool, &aware_lab::progress::Silent).unwrap();
        assert_eq!(
            driver.agent.behaviour_anchor_weight(),
            crate::base::ANCHOR_WEIGHT,
            "anchored to the new apps' probes"
        );
    }
}
