//! Meta-training learns: on apps whose best action depends on a property hidden from the state
//! and only visible in their trajectories, a base learner conditioned on the meta-learner's
//! embedding serves unseen apps far better than any policy without it can.

use aware_agents::ddpg::{Ddpg, DdpgConfig};
use aware_agents::ppo::{Ppo, PpoActions, PpoConfig};
use aware_core::{Action, Step, StepInfo, VecStep};
use aware_env::Control;
use aware_lab::LabError;
use aware_lab::progress::Silent;
use aware_lab::rollout::{Arena, rollout};
use aware_meta::train::{MetaDriver, MetaTrainConfig};
use aware_meta::{BaseLearner, MetaConfig, MetaLearner};
use rand::{RngExt, SeedableRng};
use rand_pcg::Pcg64Mcg;

/// A contextual bandit per app: the state is noise, the reward −(a − θ)² for the app's hidden
/// θ. No policy blind to θ earns more than −θ² on average over apps with θ = ±c.
struct HiddenTarget {
    thetas: Vec<f32>,
    /// Per app, how widely the state's first feature spreads (1 unless set).
    spread: Vec<f32>,
    steps: u32,
    t: u32,
    rng: Pcg64Mcg,
    /// Every this many steps the state's utilisation is carried rather than measured
    /// ([`StepInfo::usage_carried`]); 0: never.
    carried_every: u32,
}

impl HiddenTarget {
    fn new(thetas: Vec<f32>, steps: u32) -> Self {
        Self { spread: vec![1.0; thetas.len()], thetas, steps, t: 0, rng: Pcg64Mcg::seed_from_u64(0), carried_every: 0 }
    }

    fn state(&mut self, app: usize) -> Vec<f32> {
        vec![self.spread[app] * self.rng.random_range(-1.0..1.0), 1.0]
    }
}

impl Arena for HiddenTarget {
    fn num_apps(&self) -> usize {
        self.thetas.len()
    }

    fn interval_s(&self) -> f64 {
        1.0
    }

    fn reset(&mut self, seed: u64) -> Result<Vec<(Vec<f32>, StepInfo)>, LabError> {
        self.rng = Pcg64Mcg::seed_from_u64(seed);
        self.t = 0;
        Ok((0..self.thetas.len()).map(|i| (self.state(i), StepInfo::default())).collect())
    }

    fn step(&mut self, controls: &[Control]) -> Result<VecStep, LabError> {
        self.t += 1;
        let truncated = self.t >= self.steps;
        let usage_carried = self.carried_every > 0 && self.t.is_multiple_of(self.carried_every);
        let steps = controls
            .iter()
            .zip(self.thetas.clone())
            .enumerate()
            .map(|(i, (c, theta))| {
                let Control::Action(Action::Continuous(a)) = c else { panic!("actions only") };
                Step {
                    observation: self.state(i),
                    reward: -((a[0] - theta) as f64).powi(2),
                    terminated: false,
                    truncated,
                    info: StepInfo { usage_carried, ..StepInfo::default() },
                }
            })
            .collect();
        Ok(VecStep { steps })
    }
}

/// A small meta-learner and a conditioned DDPG for the bandits here (2 state features, an
/// 8-value embedding, one action), reading probe episodes only: the same behaviour in training
/// and at adaptation.
fn bandit_driver(config: MetaTrainConfig, seed: u64) -> MetaDriver {
    // A bandit: nothing to bootstrap from the next state.
    let ddpg_config = DdpgConfig { hidden: vec![32, 32], warmup: 200, gamma: 0.0, ..DdpgConfig::default() };
    bandit_driver_with(Ddpg::new(2 + 8, 1, ddpg_config, seed), config, seed)
}

/// The same with a PPO base learner (a Gaussian policy on one action, its mean the greedy
/// action).
fn ppo_bandit_driver(config: MetaTrainConfig, seed: u64) -> MetaDriver<Ppo> {
    let ppo_config = PpoConfig {
        hidden: vec![32, 32],
        learning_rate: 1e-3,
        gamma: 0.0,
        rollout_steps: 10,
        minibatch_size: 40,
        entropy_coef: 0.0,
        normalize_rewards: false,
        ..PpoConfig::default()
    };
    bandit_driver_with(Ppo::new(2 + 8, PpoActions::Continuous(1), ppo_config, seed), config, seed)
}

fn bandit_driver_with<A: BaseLearner>(agent: A, config: MetaTrainConfig, seed: u64) -> MetaDriver<A> {
    let meta_config = MetaConfig {
        hidden: 16,
        fc: 16,
        embedding: 8,
        trajectories: 5,
        min_trajectories: 3,
        learning_rate: 3e-3,
        ..MetaConfig::aware(2 + 1 + 1)
    };
    let meta = MetaLearner::new(meta_config, seed).unwrap();
    let mut driver = MetaDriver::new(agent, meta, 2, config, seed);
    driver.embed_own_episodes = false;
    driver
}

/// A transition whose state or next state carries utilisation from an earlier interval is
/// learned from neither by the base learner nor by the meta-learner's batches.
#[test]
fn nothing_is_learned_across_a_carried_state() {
    let mut arena = HiddenTarget::new(vec![0.6, -0.6, 0.6, -0.6], 20);
    arena.carried_every = 5;
    let mut driver = bandit_driver(MetaTrainConfig::default(), 1);
    rollout(&mut arena, &mut driver, 1, 20, &mut [], &Silent).unwrap();
    // Steps 5, 10, 15 and 20 end in a carried state; the intervals after 5, 10 and 15 start
    // in one: 7 of 20 intervals are not learned from, for each of the four apps.
    assert_eq!(driver.agent.stored(), 4 * 13);
    assert_eq!(driver.recent_transitions(), 4 * 13);
}

/// The same with a PPO base learner: it observes only the measured transitions (its rollouts
/// are cut at the others), and the meta-learner's batches hold only those.
#[test]
fn a_ppo_base_learner_learns_nothing_across_a_carried_state() {
    let mut arena = HiddenTarget::new(vec![0.6, -0.6, 0.6, -0.6], 20);
    arena.carried_every = 5;
    let mut driver = ppo_bandit_driver(MetaTrainConfig::default(), 1);
    rollout(&mut arena, &mut driver, 1, 20, &mut [], &Silent).unwrap();
    assert_eq!(driver.agent.observed(), 4 * 13);
    assert_eq!(driver.recent_transitions(), 4 * 13);
}

/// Meta-trains on a pool of apps (θ = ±0.6, alternating), then serves four unseen apps after
/// three probe episodes each, the meta-learner frozen and the base learner no longer learning.
/// Returns the unseen apps' mean reward per step, and the pool's over the last training episode.
fn meta_train_and_adapt(seed: u64) -> (f64, f64) {
    train_and_adapt(bandit_driver(MetaTrainConfig::default(), seed))
}

fn train_and_adapt<A: BaseLearner>(mut driver: MetaDriver<A>) -> (f64, f64) {
    let (theta, steps) = (0.6f32, 10u32);
    let pool: Vec<f32> = (0..24).map(|i| if i % 2 == 0 { theta } else { -theta }).collect();
    let mut arena = HiddenTarget::new(pool, steps);
    let mut pool_reward = 0.0;
    for episode in 0..200 {
        driver.probing = episode < 3;
        let t = rollout(&mut arena, &mut driver, episode, steps as u64, &mut [], &Silent).unwrap();
        pool_reward = t.reward / t.app_steps as f64;
    }
    assert!(driver.meta_steps > 1_000, "{} meta-learner steps", driver.meta_steps);
    driver.forget_apps();
    driver.meta.set_learning(false);
    driver.learn = false;
    let mut unseen = HiddenTarget::new(vec![theta, -theta, -theta, theta], steps);
    driver.probing = true;
    for episode in 0..3 {
        rollout(&mut unseen, &mut driver, 1_000 + episode, steps as u64, &mut [], &Silent).unwrap();
    }
    assert!((0..4).all(|i| driver.embedding(i).is_some()), "every unseen app has an embedding");
    driver.probing = false;
    driver.explore = false;
    let totals = rollout(&mut unseen, &mut driver, 2_000, steps as u64, &mut [], &Silent).unwrap();
    (totals.reward / totals.app_steps as f64, pool_reward)
}

/// Measured over seeds 1–10 with centred embeddings (session 33): all ten serve unseen apps at
/// −0.0012 to −0.0086 per step (the optimum is 0; exploration noise costs the pool ~−0.03 to
/// −0.05 in training). Uncentred, 8 of 10 did (−0.0002 to −0.018; seeds 6 and 9 never learned
/// the pool). The claim is checked on three seeds, two of which must hold it.
#[test]
fn an_embedding_conditioned_learner_serves_unseen_apps_by_what_their_trajectories_show() {
    let blind = -0.36; // −θ²: the best any policy blind to θ earns on average
    let results: Vec<(f64, f64)> = [1, 2, 3].into_iter().map(meta_train_and_adapt).collect();
    let served = results.iter().filter(|(unseen, _)| *unseen > 0.25 * blind).count();
    assert!(served >= 2, "unseen and pool mean reward per step by seed: {results:?}; blind policies earn {blind}");
}

/// The same claim with a PPO base learner, which learns only from the actions it sampled (never
/// from the uniform probes), its actor-critic loss training the meta-learner. Measured on seeds
/// 1–10 with centred embeddings: −0.00000 to −0.0004 per step on the unseen apps on nine, seed 3
/// blind (−0.35; uncentred, seeds 1–3 read −0.00004, −0.00005 and −0.00006). With the meta-learner left
/// at its random initial weights: −0.20, −0.31, −0.26. With the critic's term alone training it:
/// −0.36, −0.11, −0.00003 (V averages over the policy's actions: −θ² − σ² for both θ = ±0.6
/// while the policy is blind, so the policy's term is what first tells the apps apart).
#[test]
fn a_ppo_base_learner_conditioned_on_the_embedding_serves_unseen_apps_too() {
    let blind = -0.36;
    let results: Vec<(f64, f64)> = [1, 2, 3]
        .into_iter()
        .map(|seed| train_and_adapt(ppo_bandit_driver(MetaTrainConfig::default(), seed)))
        .collect();
    let served = results.iter().filter(|(unseen, _)| *unseen > 0.25 * blind).count();
    assert!(served >= 2, "unseen and pool mean reward per step by seed: {results:?}; blind policies earn {blind}");
}

/// Two groups of apps alike in what the critic needs (one θ for all) and different in what
/// their trajectories look like (the state's first feature spread by ±0.2 or ±1). Returns the
/// mean cosine of the pool's embeddings within groups and across them.
fn group_cosines(signature_weight: f32, seed: u64) -> (f64, f64) {
    let steps = 10u32;
    let mut driver = bandit_driver(MetaTrainConfig { signature_weight, ..MetaTrainConfig::default() }, seed);
    let apps = 12;
    let mut arena = HiddenTarget::new(vec![0.3; apps], steps);
    arena.spread = (0..apps).map(|i| if i % 2 == 0 { 0.2 } else { 1.0 }).collect();
    for episode in 0..60 {
        driver.probing = episode < 3;
        rollout(&mut arena, &mut driver, episode, steps as u64, &mut [], &Silent).unwrap();
        if episode == 2 {
            driver.fit_normaliser().unwrap();
        }
    }
    driver.refresh_embeddings().unwrap();
    let e: Vec<Vec<f32>> = (0..apps).map(|i| driver.embedding(i).unwrap().to_vec()).collect();
    let cos = |a: &[f32], b: &[f32]| {
        let dot: f32 = a.iter().zip(b).map(|(x, y)| x * y).sum();
        let n = |v: &[f32]| v.iter().map(|x| x * x).sum::<f32>().sqrt();
        (dot / (n(a) * n(b)).max(1e-12)) as f64
    };
    let (mut within, mut across) = (Vec::new(), Vec::new());
    for i in 0..apps {
        for j in i + 1..apps {
            if i % 2 == j % 2 { &mut within } else { &mut across }.push(cos(&e[i], &e[j]));
        }
    }
    let mean = |v: &[f64]| v.iter().sum::<f64>() / v.len() as f64;
    (mean(&within), mean(&across))
}

/// The auxiliary task: trained on the critic's gradient alone, an embedding has no reason to
/// keep apart apps the critic treats alike; asked to tell its trajectories' signature too, the
/// embedding's direction separates them. Centred embeddings (the default) sometimes separate
/// the groups without the task too, by as much on some seeds (the margin without it ranged
/// from −0.19 to 0.66 over seeds 1–6, and moved by 0.15 on one seed when the batch means were
/// summed in another order), so the claim is over six seeds: with the task the groups are
/// apart on every one, and by more on average.
#[test]
fn the_signature_task_keeps_apart_apps_whose_trajectories_differ() {
    let margin = |weight: f32, seed: u64| {
        let (within, across) = group_cosines(weight, seed);
        within - across
    };
    let seeds = 1..=6u64;
    let with: Vec<f64> = seeds.clone().map(|seed| margin(2.0, seed)).collect();
    let without: Vec<f64> = seeds.map(|seed| margin(0.0, seed)).collect();
    let mean = |v: &[f64]| v.iter().sum::<f64>() / v.len() as f64;
    assert!(
        with.iter().all(|m| *m > 0.0) && mean(&with) > mean(&without) + 0.15,
        "within − across by seed, with the task {with:.3?}, without {without:.3?}"
    );
}
