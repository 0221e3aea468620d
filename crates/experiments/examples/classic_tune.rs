//! Tuning aid for `experiment classic`: one pair at a time, with the training curve.
//! `cargo run --release -p aware-experiments --example classic_tune -- ddpg|dqn|ppo SEED [quick]`

use aware_experiments::classic::{ClassicConfig, ClassicPair, ClassicProgress, run_pairs};

fn main() {
    let args: Vec<String> = std::env::args().collect();
    let pair = match args.get(1).map(String::as_str) {
        Some("ddpg") => ClassicPair::DdpgPendulum,
        Some("dqn") => ClassicPair::DqnCartpole,
        Some("ppo") => ClassicPair::PpoCartpole,
        _ => {
            eprintln!("usage: classic_tune ddpg|dqn|ppo SEED [quick]");
            std::process::exit(2);
        }
    };
    let seed = args.get(2).and_then(|s| s.parse().ok()).unwrap_or(0);
    let config =
        if args.get(3).is_some_and(|s| s == "quick") { ClassicConfig::quick(seed) } else { ClassicConfig::full(seed) };
    let start = std::time::Instant::now();
    let recent = std::cell::RefCell::new(Vec::new());
    let report = run_pairs(&config, &[pair], &|p| {
        if let ClassicProgress::Episode { step, total, episode_return, .. } = p {
            let mut r = recent.borrow_mut();
            r.push(*episode_return);
            if r.len() == 10 {
                let mean = r.iter().sum::<f64>() / 10.0;
                eprintln!("{step:>7}/{total} last-10 mean {mean:>9.1}  {:>6.1} s", start.elapsed().as_secs_f64());
                r.clear();
            }
        }
    })
    .unwrap_or_else(|e| {
        eprintln!("{e}");
        std::process::exit(1);
    });
    println!("{}", serde_json::to_string(&(&report.results, &report.details, report.wall_s)).unwrap());
}
