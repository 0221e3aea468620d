use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::Result;
use aware_store::{StoreUrl, TrajectoryStore, export};

use super::write_atomically;

#[derive(clap::Subcommand, Debug)]
pub enum Store {
    /// Counts of episodes (complete and incomplete), transitions, agents and apps.
    Stats(Target),
    /// Lists episodes with their stage, policy, length and total reward.
    Episodes(Target),
    /// Exports closed episodes as CSV or InfluxDB line protocol.
    Export(ExportArgs),
}

#[derive(clap::Args, Debug)]
pub struct Target {
    /// sqlite:PATH, postgres://… or influxdb://…
    #[arg(long)]
    store: String,
    /// Only this agent's episodes.
    #[arg(long)]
    agent: Option<String>,
    /// Print JSON instead of a table.
    #[arg(long)]
    json: bool,
}

#[derive(clap::ValueEnum, Clone, Copy, Debug)]
pub enum Format {
    Csv,
    LineProtocol,
}

#[derive(clap::Args, Debug)]
pub struct ExportArgs {
    /// sqlite:PATH, postgres://… or influxdb://…
    #[arg(long)]
    store: String,
    /// Only this agent's episodes.
    #[arg(long)]
    agent: Option<String>,
    /// csv (one row per transition) or line-protocol (InfluxDB's).
    #[arg(long, value_enum, default_value = "csv")]
    format: Format,
    /// Write here (atomically) instead of standard output.
    #[arg(long)]
    out: Option<PathBuf>,
}

/// Operators inspect; they never create a store by mistyping its path.
fn open(url: &str) -> Result<Box<dyn TrajectoryStore>> {
    Ok(aware_store::open(&url.parse::<StoreUrl>()?, true)?)
}

/// Refuses an `--agent` the store holds no episode of (a typo would otherwise read as an empty
/// store), naming the agents it does hold.
fn check_agent(store: &dyn TrajectoryStore, url: &str, agent: Option<&str>) -> Result<()> {
    let Some(agent) = agent else { return Ok(()) };
    let known = store.stats()?.agents;
    if !known.iter().any(|a| a == agent) {
        let known = if known.is_empty() { "none".to_string() } else { known.join(", ") };
        anyhow::bail!("--agent {agent}: {url} holds no episode of that agent (agents: {known})");
    }
    Ok(())
}

pub fn run(cmd: Store) -> Result<ExitCode> {
    match cmd {
        Store::Stats(t) => {
            let store = open(&t.store)?;
            check_agent(store.as_ref(), &t.store, t.agent.as_deref())?;
            let mut stats = store.stats()?;
            if let Some(agent) = &t.agent {
                let eps = store.episodes(Some(agent))?;
                stats.episodes = eps.len() as u64;
                stats.incomplete_episodes = eps.iter().filter(|e| !e.is_complete()).count() as u64;
                stats.transitions = eps.iter().map(|e| e.length as u64).sum();
                stats.agents.retain(|a| a == agent);
                stats.apps =
                    eps.iter().map(|e| e.meta.app.as_str()).collect::<std::collections::BTreeSet<_>>().len() as u64;
            }
            if t.json {
                outln!("{}", serde_json::to_string_pretty(&stats)?);
            } else {
                outln!("episodes:    {} ({} incomplete)", stats.episodes, stats.incomplete_episodes);
                outln!("transitions: {}", stats.transitions);
                outln!("agents:      {}", stats.agents.join(", "));
                outln!("apps:        {}", stats.apps);
            }
        }
        Store::Episodes(t) => {
            let store = open(&t.store)?;
            check_agent(store.as_ref(), &t.store, t.agent.as_deref())?;
            let episodes = store.episodes(t.agent.as_deref())?;
            if t.json {
                outln!("{}", serde_json::to_string_pretty(&episodes)?);
            } else {
                outln!(
                    "{:>8} {:<16} {:<40} {:>8} {:<8} {:<10} {:>6} {:>12} complete",
                    "id",
                    "agent",
                    "app",
                    "episode",
                    "stage",
                    "policy",
                    "steps",
                    "reward"
                );
                for e in &episodes {
                    let m = &e.meta;
                    outln!(
                        "{:>8} {:<16} {:<40} {:>8} {:<8} {:<10} {:>6} {:>12} {}",
                        e.id,
                        m.agent,
                        m.app,
                        m.episode,
                        m.stage,
                        m.policy,
                        e.length,
                        e.total_reward.map(|r| format!("{r:.3}")).unwrap_or_else(|| "-".into()),
                        if e.is_complete() { "yes" } else { "no" }
                    );
                }
            }
        }
        Store::Export(a) => {
            if let Some(out) = &a.out
                && a.store.parse::<aware_store::StoreUrl>().is_ok_and(|url| url.is_store_file(out))
            {
                anyhow::bail!(
                    "--out {}: is the store being exported ({}); choose another file",
                    out.display(),
                    a.store
                );
            }
            let store = open(&a.store)?;
            check_agent(store.as_ref(), &a.store, a.agent.as_deref())?;
            let mut buf = Vec::new();
            let written = match a.format {
                Format::Csv => export::csv(store.as_ref(), a.agent.as_deref(), &mut buf)?,
                Format::LineProtocol => export::line_protocol(store.as_ref(), a.agent.as_deref(), &mut buf)?,
            };
            match &a.out {
                Some(path) => {
                    write_atomically(path, &String::from_utf8(buf)?)?;
                    eprintln!("{written} records written to {}", path.display());
                }
                None => crate::stdout::bytes(&buf),
            }
        }
    }
    Ok(ExitCode::SUCCESS)
}
