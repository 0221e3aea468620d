use std::process::ExitCode;

use anyhow::Result;
use aware_lifecycle::explain::{Query, explain};

use super::print_json;

#[derive(clap::Args, Debug)]
#[command(group(clap::ArgGroup::new("which").args(["step", "last"])))]
pub struct Args {
    /// The store the manager recorded into: sqlite:PATH, postgres://… or influxdb://…
    #[arg(long)]
    store: String,
    /// The application.
    #[arg(long)]
    app: String,
    /// The decision at this interval.
    #[arg(long)]
    step: Option<u64>,
    /// The last K decisions (default 5).
    #[arg(long, value_parser = clap::value_parser!(u64).range(1..=100_000))]
    last: Option<u64>,
    /// Print JSON instead of text.
    #[arg(long)]
    json: bool,
}

pub fn run(args: Args) -> Result<ExitCode> {
    let query = match (args.step, args.last) {
        (Some(n), _) => Query::Step(n),
        (None, k) => Query::Last(k.unwrap_or(5) as usize),
    };
    let report = explain(&args.store, &args.app, query)?;
    if args.json {
        print_json(&report)?;
        return Ok(ExitCode::SUCCESS);
    }
    for d in &report.decisions {
        let set = match &d.action {
            Some(a) => {
                format!("{} replicas × {} m CPU × {} MiB", a.replicas, a.cpu_millicores, a.memory_bytes / (1024 * 1024))
            }
            None => "kept the allocation".into(),
        };
        let saw = match &d.observation {
            Some(o) => format!(
                "saw {} replicas, {:.2} req/s, CPU utilisation {}, p99 {}",
                o.replicas,
                o.arrival_rate_per_s,
                o.cpu_utilisation.map_or("n/a".into(), |u| format!("{:.0} %", u * 100.0)),
                o.latency_p99_ms.map_or("n/a".into(), |l| format!("{l:.0} ms")),
            ),
            None => "no observation".into(),
        };
        outln!("step {}  {}  {} acted: {}  ({saw})  guard: {}", d.step, d.stage, d.acting_policy, set, d.guard);
        for dim in d.attribution.iter().flatten() {
            let top: Vec<String> = dim
                .features
                .iter()
                .take(3)
                .map(|f| format!("{} {:+.3} (value {:.2})", f.feature, f.attribution, f.value))
                .collect();
            let own = match dim.greedy {
                // What it chose differs from its own: it explored.
                Some(g) if (g - dim.action).abs() > 1e-3 => format!(" (its own {g:+.3}, explored)"),
                _ => String::new(),
            };
            if dim.saturated {
                let most = if dim.greedy.is_some_and(|g| g < 0.0) { "cut" } else { "growth" };
                outln!(
                    "    {:<8} action {:+.3}{own}: saturated at its bound (the policy asks for the largest {most} \
                     it can; no small change of a feature moves it, so no attribution is shown)",
                    dim.dimension,
                    dim.action
                );
            } else {
                outln!("    {:<8} action {:+.3}{own}: {}", dim.dimension, dim.action, top.join(", "));
            }
        }
    }
    Ok(ExitCode::SUCCESS)
}
