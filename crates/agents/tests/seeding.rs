//! The same seed gives the same network, even when other threads build agents at the same time
//! (burn's random generator is global to the process).

use aware_agents::ddpg::{Ddpg, DdpgConfig};
use aware_agents::ppo::{Ppo, PpoActions, PpoConfig};

fn ddpg_output(seed: u64) -> Vec<f32> {
    Ddpg::new(4, 2, DdpgConfig::default(), seed).greedy(&[0.3, -0.2, 0.9, 0.1]).unwrap()
}

#[test]
fn agents_built_on_many_threads_at_once_match_their_seed() {
    let reference: Vec<Vec<f32>> = (0..4).map(ddpg_output).collect();
    std::thread::scope(|scope| {
        let handles: Vec<_> = (0..16u64)
            .map(|k| {
                scope.spawn(move || {
                    // PPO builds interleave with DDPG's, drawing from the same generator.
                    let _ = Ppo::new(4, PpoActions::Continuous(2), PpoConfig::default(), 100 + k);
                    (k % 4, ddpg_output(k % 4))
                })
            })
            .collect();
        for h in handles {
            let (seed, out) = h.join().unwrap();
            assert_eq!(out, reference[seed as usize], "seed {seed} built on another thread");
        }
    });
}
