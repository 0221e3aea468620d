//! The multi-tenant environment, the team and the batched policies on the real simulator.

use aware_agents::ppo::{Ppo, PpoActions, PpoConfig};
use aware_core::{Cluster, VecEnv};
use aware_env::STATE_DIM;
use aware_lab::faults::Faulty;
use aware_lab::progress::Silent;
use aware_lab::rollout::rollout;
use aware_lab::workload::{Workload, WorkloadSpec};
use aware_simppo::batched::BatchedPolicy;
use aware_simppo::category::Category;
use aware_simppo::driver::{Team, TeamConfig, Variant};
use aware_simppo::global::{Capacity, GLOBAL_DIM};
use aware_simppo::tenant::Tenancy;

fn tenancy(apps: usize, seed: u64) -> Tenancy {
    let w = Workload::load(&WorkloadSpec { apps, seed, steps: 50, ..Default::default() }).unwrap();
    let all: Vec<usize> = (0..apps).collect();
    Tenancy::new(w, &all, 1.25).unwrap()
}

fn config(variant: Variant, sharing: bool, capacity: Capacity) -> TeamConfig {
    TeamConfig {
        variant,
        ppo: PpoConfig::default(),
        parameter_sharing: sharing,
        seed: 3,
        heartbeat_timeout: 1,
        capacity,
    }
}

#[test]
fn absent_apps_run_no_pods_and_join_or_leave_mid_episode() {
    let t = tenancy(3, 2);
    let mut env = t.env(&[true, false, true], 50, 0).unwrap();
    env.reset(Some(5)).unwrap();
    assert_eq!(env.cluster().stats(1).scheduled_replicas, 0);
    assert!(env.cluster().observe(1).unwrap().pods.is_empty());
    assert!(env.cluster().stats(0).scheduled_replicas > 0);

    let categories: Vec<Category> = t.workload.apps.iter().map(Category::of).collect();
    let mut team = Team::new(config(Variant::Simppo, true, t.capacity()), categories);
    team.add(0, None).unwrap();
    team.add(2, None).unwrap();
    team.set_training(true);
    rollout(&mut env, &mut team, 5, 3, &mut [], &Silent).unwrap();
    assert_eq!(team.coordinator().members(), vec![0, 2]);
    // Mid-episode: app 1 arrives at its reference allocation, app 0 leaves (scaled to zero).
    let mut env = t.env(&[true, false, true], 50, 0).unwrap();
    team.end_episode();
    let mut steps = 0;
    struct Changes<'a> {
        team: &'a mut Team,
        t: &'a Tenancy,
        steps: &'a mut u32,
    }
    impl aware_lab::rollout::Driver for Changes<'_> {
        fn decide(
            &mut self,
            arena: &dyn aware_lab::rollout::Arena,
            states: &[Vec<f32>],
            infos: &[aware_core::StepInfo],
        ) -> Result<Vec<aware_env::Control>, aware_lab::LabError> {
            if *self.steps == 2 {
                self.team.add(1, Some(self.t.arrival(1))).unwrap();
                self.team.remove(0, Some(Tenancy::departure())).unwrap();
            }
            *self.steps += 1;
            self.team.decide(arena, states, infos)
        }
        fn feedback(&mut self, interval: &aware_lab::rollout::Interval) -> Result<(), aware_lab::LabError> {
            self.team.feedback(interval)
        }
    }
    let mut driver = Changes { team: &mut team, t: &t, steps: &mut steps };
    rollout(&mut env, &mut driver, 6, 12, &mut [], &Silent).unwrap();
    assert!(env.cluster().stats(1).scheduled_replicas > 0, "the arrival runs pods");
    assert_eq!(env.cluster().observe(0).unwrap().desired_replicas, 0, "the leaver is scaled to zero");
    assert_eq!(env.cluster().stats(0).scheduled_replicas, 0, "and has released its nodes");
    assert_eq!(team.present(), vec![1, 2]);
    assert_eq!(team.coordinator().members(), vec![1, 2], "the silent leaver was dropped");
}

/// Where an interval's utilisation is carried from an earlier one (every fifth marked so here),
/// no agent of the team learns from the transition: of 20 intervals, the 7 with a carried end
/// (intervals 5, 10, 15, 20 and the three after the first three) are left out.
#[test]
fn no_agent_learns_across_a_carried_state() {
    let t = tenancy(2, 2);
    let categories: Vec<Category> = t.workload.apps.iter().map(Category::of).collect();
    let mut team = Team::new(config(Variant::Simppo, false, t.capacity()), categories);
    team.add(0, None).unwrap();
    team.add(1, None).unwrap();
    team.set_training(true);
    let mut arena = Faulty::new(t.env(&[true, true], 50, 0).unwrap());
    arena.carried_every = Some(5);
    rollout(&mut arena, &mut team, 5, 20, &mut [], &Silent).unwrap();
    let observed: Vec<u64> = (0..2).map(|a| team.agent(a).unwrap().observed()).collect();
    assert_eq!(observed, vec![13, 13]);
}

#[test]
fn a_new_agent_starts_from_its_categorys_base_model_only_with_sharing() {
    let cap = Capacity { cores: 32.0, memory_bytes: 1e11 };
    for sharing in [true, false] {
        let mut team =
            Team::new(config(Variant::Simppo, sharing, cap), vec![Category::Cpu, Category::Cpu, Category::Io]);
        team.add(0, None).unwrap();
        team.end_episode();
        let base = team.coordinator().base(Category::Cpu).expect("the episode's best agent is the base").parameters();
        assert_eq!(base, team.agent(0).unwrap().weights().parameters());
        team.add(1, None).unwrap();
        team.add(2, None).unwrap();
        let new = team.agent(1).unwrap().weights().parameters();
        assert_eq!(new == base, sharing, "sharing {sharing}");
        assert_ne!(team.agent(2).unwrap().weights().parameters(), base, "no I/O base model yet");
    }
}

#[test]
fn one_batched_pass_equals_each_agents_own_greedy_action() {
    let config = PpoConfig { critic_extra: GLOBAL_DIM, ..PpoConfig::default() };
    let agents: Vec<Ppo> =
        (0..5).map(|s| Ppo::new(STATE_DIM + GLOBAL_DIM, PpoActions::Discrete(7), config.clone(), 40 + s)).collect();
    let batched =
        BatchedPolicy::stack(&agents.iter().map(Ppo::policy_layers).collect::<Vec<_>>(), config.activation).unwrap();
    assert_eq!(batched.input_dim(), STATE_DIM, "the policy reads the local state only");
    let states: Vec<f32> = (0..5 * STATE_DIM).map(|i| ((i * 13) % 17) as f32 / 17.0).collect();
    let greedy = batched.greedy(&states).unwrap();
    for (a, agent) in agents.iter().enumerate() {
        let mut full = states[a * STATE_DIM..(a + 1) * STATE_DIM].to_vec();
        full.extend([0.5; GLOBAL_DIM]);
        assert_eq!(agent.greedy(&full).unwrap(), vec![greedy[a] as f32], "agent {a}");
    }
    assert!(batched.forward(&states[1..]).is_err(), "a mis-sized batch is refused");
}

/// Team reward per interval over held-out episodes, sampling (`explore`) or greedy, learning
/// nothing.
fn served(team: &mut Team, t: &Tenancy, seeds: std::ops::Range<u64>, explore: bool) -> f64 {
    let mut env = t.env(&team.presence(), 50, 0).unwrap();
    team.set_mode(explore, false);
    let mut total = 0.0;
    let n = seeds.end - seeds.start;
    for seed in seeds {
        rollout(&mut env, team, seed, 50, &mut [], &Silent).unwrap();
        total += team.end_episode();
    }
    total / n as f64
}

/// Held-out team reward of a team of `variant` (agents seeded from `seed`) before and after 300
/// training episodes on three applications sharing a cluster: (untrained sampling, trained
/// sampling, trained greedy).
///
/// The learning rate and clip range anneal to zero over the 300 episodes, as the experiment's
/// serving rows do: with a constant rate the policy served is whatever the last update left.
fn trained(variant: Variant, seed: u64) -> (f64, f64, f64) {
    const EPISODES: u64 = 300;
    let t = tenancy(3, 4);
    let categories: Vec<Category> = t.workload.apps.iter().map(Category::of).collect();
    let mut config = config(variant, true, t.capacity());
    config.seed = seed;
    config.ppo.anneal_steps = Some(EPISODES * 50);
    let mut team = Team::new(config, categories);
    for app in 0..3 {
        team.add(app, None).unwrap();
    }
    let before = served(&mut team, &t, 9000..9005, true);
    let mut env = t.env(&team.presence(), 50, 0).unwrap();
    team.set_training(true);
    for e in 0..EPISODES {
        rollout(&mut env, &mut team, 100 + e, 50, &mut [], &Silent).unwrap();
        team.end_episode();
    }
    let sampled = served(&mut team, &t, 9000..9005, true);
    let greedy = served(&mut team, &t, 9000..9005, false);
    eprintln!("{variant:?} seed {seed}: untrained {before:.3}, trained sampling {sampled:.3}, greedy {greedy:.3}");
    (before, sampled, greedy)
}

/// The policy PPO starts from samples from near-uniform action probabilities. After training,
/// on each of three team seeds the policy it samples from earns more team reward on held-out
/// traffic, and over the seeds its greedy policy does too (the median gain).
///
/// The greedy claim is a median because the greedy policy of these discrete step actions is in
/// practice one action repeated all episode (it pushes one dimension to its bound), and which
/// action wins the argmax turns on the floating-point summation order during training: on an
/// Intel Xeon with AVX-512, S-RL's team seed 3 ends on `memory-step` for two of its three
/// agents, an OOM loop (0.419 → 0.272 greedy, 0.820 sampling), while seeds 1, 2, 5, 7 and 11
/// improve there; on an AMD EPYC without AVX-512 seeds 1, 2, 3, 5 and 7 all improved. Every
/// seed's sampling policy improves on both.
fn improves(variant: Variant) {
    const SEEDS: [u64; 3] = [1, 2, 3];
    let runs: Vec<(f64, f64, f64)> = SEEDS.into_iter().map(|seed| trained(variant, seed)).collect();
    for (seed, (before, sampled, _)) in SEEDS.into_iter().zip(&runs) {
        assert!(sampled > &(before + 0.03), "{variant:?} seed {seed}: sampling {before:.3} → {sampled:.3}");
    }
    let mut gains: Vec<f64> = runs.iter().map(|(before, _, greedy)| greedy - before).collect();
    gains.sort_by(f64::total_cmp);
    assert!(gains[1] > 0.02, "{variant:?}: greedy gains over the seeds {gains:?}");
}

#[test]
fn simppo_improves_over_its_untrained_start() {
    improves(Variant::Simppo);
}

#[test]
fn srl_improves_over_its_untrained_start() {
    improves(Variant::SRl);
}

/// A headroom beyond the profile's bound is refused, naming it (1e300 once sized a cluster of
/// `usize::MAX` nodes and aborted in the simulator); so is a cluster the simulator cannot hold.
#[test]
fn absurd_headrooms_are_refused() {
    let w = Workload::load(&WorkloadSpec { apps: 2, seed: 1, steps: 50, ..Default::default() }).unwrap();
    for headroom in [1e300, 100.5, f64::INFINITY, f64::NAN, 0.0, -1.0] {
        let e = Tenancy::new(w.clone(), &[0, 1], headroom).unwrap_err().to_string();
        assert!(e.starts_with("headroom: "), "{headroom}: {e}");
    }
    assert!(Tenancy::new(w.clone(), &[0, 1], aware_simppo::tenant::MAX_HEADROOM).is_ok());
    // Nodes so small that even a sane headroom needs more than the simulator holds.
    let mut tiny = w;
    tiny.sim.node_cores = 1e-9;
    let e = Tenancy::new(tiny, &[0, 1], 1.25).unwrap_err().to_string();
    assert!(e.starts_with("headroom: ") && e.contains("1000000"), "{e}");
}
