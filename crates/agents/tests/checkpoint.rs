//! Checkpoints reproduce actions bit for bit; corrupted or mismatched ones are refused with
//! the reason.

use aware_agents::Experience;
use aware_agents::ddpg::{Ddpg, DdpgConfig};
use aware_agents::dqn::{Dqn, DqnConfig};
use aware_core::Space;

fn obs_space() -> Space {
    Space::Box { low: vec![0.0; 3], high: vec![1.0; 3] }
}

fn probes() -> Vec<Vec<f32>> {
    (0..100).map(|i| vec![(i as f32 * 0.37) % 1.0, (i as f32 * 0.11) % 1.0, (i as f32 * 0.73) % 1.0]).collect()
}

fn trained_dqn() -> Dqn {
    let mut agent = Dqn::new(3, 4, DqnConfig { warmup: 64, ..DqnConfig::d3qn() }, 9);
    for i in 0..200 {
        let s = probes()[i % 100].clone();
        let e = Experience {
            state: s.clone(),
            action: vec![(i % 4) as f32],
            reward: s[0] - 0.5,
            next_state: s,
            terminal: false,
        };
        agent.observe(&e).unwrap();
    }
    agent
}

#[test]
fn dqn_round_trip_reproduces_q_values_bit_for_bit() {
    let dir = tempfile::tempdir().unwrap();
    let agent = trained_dqn();
    assert!(agent.updates() > 0);
    agent.save(dir.path(), &obs_space()).unwrap();
    let loaded = Dqn::load(dir.path(), &obs_space(), 4, 0).unwrap();
    for p in probes() {
        assert_eq!(agent.q_values(&p).unwrap(), loaded.q_values(&p).unwrap());
    }
    assert_eq!(loaded.algorithm(), "d3qn");
}

#[test]
fn ddpg_round_trip_reproduces_actions_bit_for_bit() {
    let dir = tempfile::tempdir().unwrap();
    let mut agent = Ddpg::new(3, 2, DdpgConfig { hidden: vec![32, 32], warmup: 64, ..DdpgConfig::default() }, 4);
    for (i, s) in probes().into_iter().cycle().take(150).enumerate() {
        let a = agent.act(&s, true).unwrap();
        agent
            .observe(&Experience {
                state: s.clone(),
                action: a,
                reward: (i % 3) as f32,
                next_state: s,
                terminal: false,
            })
            .unwrap();
    }
    agent.save(dir.path(), &obs_space(), 150).unwrap();
    let loaded = Ddpg::load(dir.path(), &obs_space(), 2, 0).unwrap();
    for p in probes() {
        assert_eq!(agent.greedy(&p).unwrap(), loaded.greedy(&p).unwrap());
    }
}

#[test]
fn corrupted_or_mismatched_checkpoints_are_refused() {
    let dir = tempfile::tempdir().unwrap();
    trained_dqn().save(dir.path(), &obs_space()).unwrap();
    // Wrong spaces.
    let other = Space::Box { low: vec![0.0; 4], high: vec![1.0; 4] };
    let err = Dqn::load(dir.path(), &other, 4, 0).err().unwrap().to_string();
    assert!(err.contains("observation space") && err.contains("does not match"), "{err}");
    let err = Dqn::load(dir.path(), &obs_space(), 7, 0).err().unwrap().to_string();
    assert!(err.contains("action space"), "{err}");
    // Wrong algorithm.
    let err = Ddpg::load(dir.path(), &obs_space(), 2, 0).err().unwrap().to_string();
    assert!(err.contains("d3qn checkpoint cannot be loaded as ddpg"), "{err}");
    // A flipped byte in the weights.
    let weights = dir.path().join("q_network.safetensors");
    let mut bytes = std::fs::read(&weights).unwrap();
    let last = bytes.len() - 1;
    bytes[last] ^= 0x01;
    std::fs::write(&weights, bytes).unwrap();
    let err = Dqn::load(dir.path(), &obs_space(), 4, 0).err().unwrap().to_string();
    assert!(err.contains("checksum mismatch for q_network.safetensors"), "{err}");
    // Missing metadata.
    let empty = tempfile::tempdir().unwrap();
    assert!(Dqn::load(empty.path(), &obs_space(), 4, 0).err().unwrap().to_string().contains("checkpoint.json"));
}

#[test]
fn ppo_round_trip_through_the_agent_loader_reproduces_actions_bit_for_bit() {
    use aware_agents::ppo::{Ppo, PpoActions, PpoConfig};
    for actions in [PpoActions::Discrete(5), PpoActions::Continuous(3)] {
        let dir = tempfile::tempdir().unwrap();
        let config = PpoConfig { rollout_steps: 20, ..PpoConfig::default() };
        let mut agent = Ppo::new(3, actions, config, 8);
        for (i, s) in probes().into_iter().cycle().take(60).enumerate() {
            let a = agent.act(std::slice::from_ref(&s), true).unwrap().remove(0);
            let e = Experience { state: s.clone(), action: a, reward: (i % 3) as f32, next_state: s, terminal: false };
            agent.observe(0, &e, false).unwrap();
        }
        assert_eq!(agent.updates(), 3);
        agent.save(dir.path(), &obs_space(), 60).unwrap();
        let mut loaded = aware_agents::load(dir.path(), &obs_space(), &actions.space()).unwrap();
        assert_eq!(loaded.algorithm(), "ppo");
        let mut original: Box<dyn aware_agents::Agent> = Box::new(agent);
        assert_eq!(original.act(&probes(), false).unwrap(), loaded.act(&probes(), false).unwrap());
        // The other kind of action space is refused, naming both.
        let other = match actions {
            PpoActions::Discrete(_) => PpoActions::Continuous(3).space(),
            PpoActions::Continuous(_) => PpoActions::Discrete(5).space(),
        };
        let err = aware_agents::load(dir.path(), &obs_space(), &other).err().unwrap().to_string();
        assert!(err.contains("action space") && err.contains("does not match"), "{err}");
    }
}

#[test]
fn the_agent_loader_refuses_unknown_algorithms() {
    let dir = tempfile::tempdir().unwrap();
    trained_dqn().save(dir.path(), &obs_space()).unwrap();
    let meta = dir.path().join("checkpoint.json");
    let text = std::fs::read_to_string(&meta).unwrap().replace("\"d3qn\"", "\"bcq\"");
    std::fs::write(&meta, text).unwrap();
    let err = aware_agents::load(dir.path(), &obs_space(), &Space::Discrete { n: 4 }).err().unwrap();
    assert!(err.to_string().contains("a bcq checkpoint cannot be loaded as ddpg, ppo"), "{err}");
}

#[test]
fn ddpg_batched_serving_agrees_with_single_observations() {
    let mut agent = Ddpg::new(3, 2, DdpgConfig { hidden: vec![32, 32], warmup: 64, ..DdpgConfig::default() }, 6);
    let check = |agent: &Ddpg| {
        let flat: Vec<f32> = probes().concat();
        let batched = agent.greedy_batch(&flat, 100).unwrap();
        for (i, p) in probes().iter().enumerate() {
            for (a, b) in agent.greedy(p).unwrap().iter().zip(&batched[i * 2..i * 2 + 2]) {
                assert!((a - b).abs() < 1e-5, "row {i}: {a} vs {b}");
            }
        }
    };
    check(&agent);
    // After updates the cached serving weights must follow the new policy.
    for (i, s) in probes().into_iter().cycle().take(100).enumerate() {
        let a = agent.act(&s, true).unwrap();
        let e = Experience { state: s.clone(), action: a, reward: i as f32 / 50.0, next_state: s, terminal: false };
        agent.observe(&e).unwrap();
    }
    assert!(agent.updates() > 0);
    check(&agent);
}

#[test]
fn windowed_d3qn_round_trip_reproduces_q_values_bit_for_bit() {
    use aware_agents::dqn::TimeWindow;
    let window = TimeWindow { steps: 3, features: 1, channels: 4, kernel: 2 };
    let mut agent = Dqn::new(3, 5, DqnConfig { warmup: 64, window: Some(window), ..DqnConfig::d3qn() }, 2);
    for (i, s) in probes().into_iter().cycle().take(120).enumerate() {
        let e =
            Experience { state: s.clone(), action: vec![(i % 5) as f32], reward: s[1], next_state: s, terminal: false };
        agent.observe(&e).unwrap();
    }
    let dir = tempfile::tempdir().unwrap();
    agent.save(dir.path(), &obs_space()).unwrap();
    let loaded = Dqn::load(dir.path(), &obs_space(), 5, 0).unwrap();
    assert_eq!(loaded.config.window, Some(window));
    for p in probes() {
        assert_eq!(agent.q_values(&p).unwrap(), loaded.q_values(&p).unwrap());
    }
}

#[test]
fn a_checkpoint_whose_window_cannot_read_the_observation_is_refused() {
    use aware_agents::dqn::TimeWindow;
    let window = TimeWindow { steps: 3, features: 1, channels: 4, kernel: 2 };
    let agent = Dqn::new(3, 5, DqnConfig { window: Some(window), ..DqnConfig::d3qn() }, 2);
    let dir = tempfile::tempdir().unwrap();
    agent.save(dir.path(), &obs_space()).unwrap();
    let meta = dir.path().join("checkpoint.json");
    let mut json: serde_json::Value = serde_json::from_slice(&std::fs::read(&meta).unwrap()).unwrap();
    json["hyperparameters"]["window"]["kernel"] = 5.into();
    std::fs::write(&meta, serde_json::to_vec(&json).unwrap()).unwrap();
    let e = Dqn::load(dir.path(), &obs_space(), 5, 0).err().expect("a kernel longer than the window loads");
    assert!(e.to_string().contains("kernel 5 is longer than the 3 steps"), "{e}");
}
