//! Checkpoints reproduce actions bit for bit; corrupted or mismatched ones are refused with
//! the reason.

use std::path::Path;

use aware_agents::ddpg::{Ddpg, DdpgConfig};
use aware_agents::dqn::{Dqn, DqnConfig};
use aware_agents::tabular::{QTable, QTableConfig};
use aware_agents::{AgentError, Experience};
use aware_core::Space;
use serde_json::json;

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

type Agent = (fn(&Path), fn(&Path) -> Result<(), AgentError>);

const DDPG: Agent = (
    |d| Ddpg::new(3, 2, DdpgConfig { hidden: vec![8], ..DdpgConfig::default() }, 1).save(d, &obs_space(), 0).unwrap(),
    |d| Ddpg::load(d, &obs_space(), 2, 0).map(|_| ()),
);
const DQN: Agent = (
    |d| Dqn::new(3, 4, DqnConfig { hidden: vec![8], ..DqnConfig::dqn() }, 1).save(d, &obs_space()).unwrap(),
    |d| Dqn::load(d, &obs_space(), 4, 0).map(|_| ()),
);
const PPO: Agent = (
    |d| {
        let config = aware_agents::ppo::PpoConfig { hidden: vec![8], ..Default::default() };
        aware_agents::ppo::Ppo::new(3, aware_agents::ppo::PpoActions::Discrete(4), config, 1)
            .save(d, &obs_space(), 0)
            .unwrap()
    },
    |d| aware_agents::ppo::Ppo::load(d, &obs_space(), aware_agents::ppo::PpoActions::Discrete(4), 0).map(|_| ()),
);
const WINDOWED_DQN: Agent = (
    |d| {
        let window = aware_agents::dqn::TimeWindow { steps: 3, features: 1, channels: 4, kernel: 2 };
        Dqn::new(3, 4, DqnConfig { window: Some(window), ..DqnConfig::dqn() }, 1).save(d, &obs_space()).unwrap()
    },
    DQN.1,
);
const QTABLE: Agent = (
    |d| QTable::new(3, 4, QTableConfig::default(), 1).save(d, &obs_space()).unwrap(),
    |d| QTable::load(d, &obs_space(), 4, 0).map(|_| ()),
);

/// Saves a valid checkpoint with `agent`, sets hyper-parameter `field` to `value` in its
/// `checkpoint.json`, and checks that loading returns (not panics with) a one-line error naming
/// checkpoint.json and saying `expected`.
fn refused(agent: Agent, field: &str, value: serde_json::Value, expected: &str) {
    refused_with(agent, &[(field, value)], expected);
}

/// [`refused`], with several fields set at once.
fn refused_with((save, load): Agent, fields: &[(&str, serde_json::Value)], expected: &str) {
    let dir = tempfile::tempdir().unwrap();
    save(dir.path());
    let meta = dir.path().join("checkpoint.json");
    let mut json: serde_json::Value = serde_json::from_slice(&std::fs::read(&meta).unwrap()).unwrap();
    for (field, value) in fields {
        json["hyperparameters"][*field] = value.clone();
    }
    let field = fields.iter().map(|f| f.0).collect::<Vec<_>>().join(", ");
    std::fs::write(&meta, serde_json::to_vec_pretty(&json).unwrap()).unwrap();
    let loaded = std::panic::catch_unwind(|| load(dir.path())).unwrap_or_else(|_| panic!("{field}: panicked"));
    let err = loaded.err().unwrap_or_else(|| panic!("{field}: loaded")).to_string();
    assert!(err.starts_with(&meta.display().to_string()) && err.contains(expected), "{err}");
    assert_eq!(err.lines().count(), 1, "{err}");
}

/// Hyper-parameters no agent can be built with (zero-width layers panicked in burn, a zero
/// replay capacity in the buffer, 10¹⁰-weight layers aborted on allocation) are refused on
/// loading, naming the field; so are values outside their meaningful range.
#[test]
fn checkpoints_with_impossible_hyperparameters_are_refused_naming_the_field() {
    for agent in [DDPG, DQN, PPO] {
        refused(agent, "hidden", json!([0, 0]), ": hyperparameters.hidden[0]: must be ≥ 1");
        refused(agent, "hidden", json!([100_000, 100_000]), "hyperparameters.hidden[0]: 100000 exceeds the limit");
        refused(agent, "hidden", json!([65_536, 65_536]), "hyperparameters.hidden: [65536, 65536] need more than");
        refused(agent, "gamma", json!(1.5), "hyperparameters.gamma: 1.5 must be a finite number in [0, 1]");
    }
    refused(DDPG, "replay_capacity", json!(0), "hyperparameters.replay_capacity: must be ≥ 1");
    refused(DDPG, "tau", json!(2.0), "hyperparameters.tau: 2 must be a finite number in [0, 1]");
    refused(DDPG, "actor_learning_rate", json!(-1.0), "hyperparameters.actor_learning_rate: -1 must be");
    refused(DDPG, "policy_delay", json!(0), "hyperparameters.policy_delay: must be ≥ 1");
    refused(DQN, "replay_capacity", json!(0), "hyperparameters.replay_capacity: must be ≥ 1");
    refused(DQN, "batch_size", json!(0), "hyperparameters.batch_size: must be ≥ 1");
    refused(DQN, "epsilon_end", json!(-0.5), "hyperparameters.epsilon_end: -0.5 must be a finite number in [0, 1]");
    let wide = json!({"steps": 3, "features": 1, "channels": 1_000_000_000, "kernel": 2});
    refused(WINDOWED_DQN, "window", wide, "hyperparameters.window: [2000000000, 64, 64, 64] need more than");
    // One hidden layer: the trunk repeats it, a 65,536 × 65,536 layer (an allocation abort).
    refused(DQN, "hidden", json!([65_536]), "hyperparameters.hidden: [65536, 65536] need more than");
    // A convolution of one position whose dense layers fit but whose kernels do not.
    let deep = json!({"steps": 3, "features": 100, "channels": 100_000_000, "kernel": 3});
    refused_with(
        WINDOWED_DQN,
        &[("window", deep), ("hidden", json!([1]))],
        "hyperparameters.window: 100000000 channels of 100 features × 3 steps need more than",
    );
    refused(PPO, "learning_rate", json!(0.0), "hyperparameters.learning_rate: 0 must be");
    refused(PPO, "gae_lambda", json!(3.0), "hyperparameters.gae_lambda: 3 must be a finite number in [0, 1]");
    refused(PPO, "max_grad_norm", json!(-0.5), "hyperparameters.max_grad_norm: -0.5 must be");
    // Absurd α or γ ran the Q-table's values to NaN.
    refused(QTABLE, "alpha", json!(50.0), "hyperparameters.alpha: 50 must be a finite number in [0, 1]");
    refused(QTABLE, "alpha", json!(0.0), "hyperparameters.alpha: 0 must be");
    refused(QTABLE, "gamma", json!(-2.0), "hyperparameters.gamma: -2 must be a finite number in [0, 1]");
    refused(QTABLE, "edges", json!([0.5, 0.1]), "hyperparameters.edges[1]: 0.1 is not above edges[0] 0.5");
    // The loader of any algorithm reports the same.
    let any = |d: &Path| {
        aware_agents::load(d, &obs_space(), &Space::Box { low: vec![-1.0; 2], high: vec![1.0; 2] }).map(|_| ())
    };
    refused((DDPG.0, any), "hidden", json!([0, 0]), "hyperparameters.hidden[0]: must be ≥ 1");
}

/// File names in `checkpoint.json` stay inside the checkpoint directory: `../t.sh`, with the
/// right checksum of a file that exists there, was read.
#[test]
fn checkpoint_files_outside_the_directory_are_refused() {
    let root = tempfile::tempdir().unwrap();
    let dir = root.path().join("checkpoint");
    Dqn::new(3, 4, DqnConfig { hidden: vec![8], ..DqnConfig::dqn() }, 1).save(&dir, &obs_space()).unwrap();
    std::fs::write(root.path().join("t.sh"), b"echo hi\n").unwrap();
    std::fs::create_dir(dir.join("sub")).unwrap();
    std::fs::write(dir.join("sub").join("t.sh"), b"echo hi\n").unwrap();
    let digest = aware_agents::sha256(b"echo hi\n");
    let outside = root.path().join("t.sh").display().to_string();
    for name in ["../t.sh", outside.as_str(), "sub/t.sh", "./t.sh", "checkpoint.json"] {
        let meta = dir.join("checkpoint.json");
        let text = std::fs::read_to_string(&meta).unwrap();
        let mut json: serde_json::Value = serde_json::from_str(&text).unwrap();
        json["files"][name] = digest.clone().into();
        std::fs::write(&meta, serde_json::to_vec(&json).unwrap()).unwrap();
        let err = Dqn::load(&dir, &obs_space(), 4, 0).err().unwrap_or_else(|| panic!("{name} is read")).to_string();
        assert!(err.contains(&format!("files: {name:?} is not a file name inside")), "{err}");
        std::fs::write(&meta, text).unwrap();
    }
    assert!(Dqn::load(&dir, &obs_space(), 4, 0).is_ok());
    // The saver writes no such name either, and writes nothing when asked to.
    let target = root.path().join("new");
    let err = aware_agents::Checkpoint::save(
        &target,
        "dqn",
        &0,
        &obs_space(),
        Space::Discrete { n: 4 },
        0,
        &[("ok.bin", vec![1]), ("../escaped.bin", vec![2])],
    )
    .err()
    .unwrap()
    .to_string();
    assert!(err.contains("\"../escaped.bin\" is not a file name"), "{err}");
    assert!(!target.exists() && !root.path().join("escaped.bin").exists());
}

/// A Q-table holding NaN (α absurd enough to blow up) is not saved: its loader would refuse it.
#[test]
fn a_q_table_with_non_finite_values_is_not_saved() {
    let mut q = QTable::new(3, 2, QTableConfig { alpha: f32::NAN, ..QTableConfig::default() }, 1);
    q.learn(&[0.1, 0.2, 0.3], 1, 1.0, &[0.1, 0.2, 0.3], false).unwrap();
    let dir = tempfile::tempdir().unwrap();
    let err = q.save(dir.path(), &obs_space()).expect_err("a NaN table is saved").to_string();
    assert!(err.contains("q_table.json") && err.contains("not finite"), "{err}");
    assert!(!dir.path().join("checkpoint.json").exists());
    // A finite one round-trips.
    let mut q = QTable::new(3, 2, QTableConfig::default(), 1);
    q.learn(&[0.1, 0.2, 0.3], 1, 1.0, &[0.1, 0.2, 0.3], false).unwrap();
    q.save(dir.path(), &obs_space()).unwrap();
    assert_eq!(QTable::load(dir.path(), &obs_space(), 2, 0).unwrap().states_visited(), 1);
}

/// An agent built in code with a setting loading would refuse is not saved: nothing is written
/// that cannot be read back.
#[test]
fn a_configuration_loading_would_refuse_is_not_saved() {
    let q = QTable::new(3, 2, QTableConfig { alpha: 50.0, ..QTableConfig::default() }, 1);
    let dir = tempfile::tempdir().unwrap();
    let err = q.save(dir.path(), &obs_space()).expect_err("saved").to_string();
    assert!(err.contains("checkpoint.json") && err.contains("not saved: hyperparameters.alpha"), "{err}");
    assert_eq!(std::fs::read_dir(dir.path()).unwrap().count(), 0, "nothing written");
}
