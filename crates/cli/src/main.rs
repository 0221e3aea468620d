//! `aware`: reinforcement-learning workload autoscaling that is safe to run in production.
//!
//! The binary parses arguments, calls one library function per command and prints; the work
//! lives in the library crates (`aware-lab`, `aware-experiments`, …).

/// `println!` for results: a closed stdout (`aware … --json | head`) ends the command quietly
/// with exit code 0 instead of a panic.
macro_rules! outln {
    ($($arg:tt)*) => {
        $crate::stdout::line(format_args!($($arg)*))
    };
}

mod commands;
mod policy;
mod progress;
mod stdout;

use std::process::ExitCode;

/// mimalloc instead of the system allocator: the simulations allocate small objects on every
/// interval (see the workspace manifest); the figures do not depend on it.
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

use clap::{CommandFactory, FromArgMatches, Parser, Subcommand};

#[derive(Parser)]
#[command(name = "aware", version, about = "Safe reinforcement-learning workload autoscaling", long_about = None)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// AWARE end to end on the embedded simulator: bootstrapping, serving, retraining after a
    /// workload change, beside the MPA default and RL without bootstrapping; writes a report.
    Demo(commands::demo::Args),
    /// Why the lifecycle manager scaled an application: its decisions read from the store.
    Explain(commands::explain::Args),
    /// Generate applications (segment chains with synthetic load) from a seed.
    Generate(commands::generate::Args),
    /// Run one recommender over generated apps on the embedded simulator.
    Simulate(commands::simulate::Args),
    /// A/B: several recommenders over identical apps and traces.
    Compare(commands::compare::Args),
    /// Dry run: what would a rule-based autoscaler recommend for this observation?
    Recommend(commands::recommend::Args),
    /// Check the fast simulator against its request-level discrete-event mode.
    ValidateSim(commands::validate::Args),
    /// Train an RL agent on the simulator; writes a checkpoint and a learning curve.
    Train(commands::train::Args),
    /// Meta-train AWARE's meta-learner and its shared base learner on a pool of generated apps
    /// and keep them, with the pool's out-of-distribution detector (`aware run --meta DIR`).
    TrainMeta(commands::train_meta::Args),
    /// AWARE: the lifecycle manager (bootstrapping, online, serving, retraining) over a backend.
    Run(commands::run::Args),
    /// The cloud-provisioning problem: an auto-scaling group billed by the instance-hour.
    #[command(subcommand)]
    Provision(commands::provision::Provision),
    /// End-to-end checks of the project's claims.
    #[command(subcommand)]
    Experiment(commands::experiment::Experiment),
    /// Inspect and export a trajectory store.
    #[command(subcommand)]
    Store(commands::store::Store),
    /// Throughput and latency benchmarks.
    #[command(subcommand)]
    Bench(commands::bench::Bench),
    /// Serve the environments over gRPC (Gymnasium-style; Python: `pip install ./python`).
    ServeEnv(commands::serve_env::Args),
    /// Print the MultidimPodAutoscaler CRD (autoscaling.k8s.io/v1alpha1) as YAML.
    Crd(commands::crd::Args),
    /// Run the Kubernetes MultidimPodAutoscaler recommender and updater.
    Controller(commands::controller::Args),
}

fn main() -> ExitCode {
    let matches = with_negative_numbers(Cli::command()).get_matches();
    let cli = Cli::from_arg_matches(&matches).unwrap_or_else(|e| e.exit());
    init_logging();
    let result = match cli.command {
        Command::Demo(a) => commands::demo::run(a),
        Command::Explain(a) => commands::explain::run(a),
        Command::Generate(a) => commands::generate::run(a),
        Command::Simulate(a) => commands::simulate::run(a),
        Command::ValidateSim(a) => commands::validate::run(a),
        Command::Recommend(a) => commands::recommend::run(a),
        Command::Compare(a) => commands::compare::run(a),
        Command::Bench(b) => commands::bench::run(b),
        Command::Store(s) => commands::store::run(s),
        Command::Train(a) => commands::train::run(a),
        Command::TrainMeta(a) => commands::train_meta::run(a),
        Command::Run(a) => commands::run::run(a),
        Command::Provision(p) => commands::provision::run(p),
        Command::Experiment(e) => commands::experiment::run(e),
        Command::ServeEnv(a) => commands::serve_env::run(a),
        Command::Crd(a) => commands::crd::run(a),
        Command::Controller(a) => commands::controller::run(a),
    };
    match result {
        Ok(code) => code,
        Err(e) => {
            eprintln!("error: {}", one_line(&e));
            ExitCode::from(1)
        }
    }
}

/// Every option that takes a value reads `-1` or `-0.5` as its value, so that a negative number
/// is refused by the option's own parser, naming the option ("invalid value '-1' for
/// '--apps <N>'"), rather than taken for an unknown flag.
fn with_negative_numbers(command: clap::Command) -> clap::Command {
    command
        .mut_args(|a| if a.get_action().takes_values() { a.allow_negative_numbers(true) } else { a })
        .mut_subcommands(with_negative_numbers)
}

/// `tracing` events (the Kubernetes controller's reconcile failures, leader election, the
/// webhook; kube-rs's own) on stderr, at `warn` and above unless `RUST_LOG` says otherwise:
/// a service that fails over and over says so. Results stay on stdout.
fn init_logging() {
    use tracing_subscriber::EnvFilter;
    let filter = match std::env::var("RUST_LOG") {
        Ok(spec) if !spec.trim().is_empty() => EnvFilter::try_new(&spec).unwrap_or_else(|e| {
            eprintln!("warning: RUST_LOG={spec:?} is not a log filter ({e}); logging warnings and errors");
            EnvFilter::new("warn")
        }),
        _ => EnvFilter::new("warn"),
    };
    let _ = tracing_subscriber::fmt().with_env_filter(filter).with_writer(std::io::stderr).with_ansi(false).try_init();
}

/// The error and its causes on one line, never a backtrace: each cause joined with `: ` unless
/// the cause before it ends with it (a library error that writes its source at the end of its
/// own message would otherwise print every cause twice or more), line breaks as spaces.
fn one_line(e: &anyhow::Error) -> String {
    let mut line = String::new();
    let mut previous = String::new();
    for cause in e.chain() {
        let text = cause.to_string().replace(['\n', '\r'], " ").trim().to_string();
        // Said already: at the end of the last message, or (a long cause, which cannot be a
        // chance match such as "EOF" inside a path) anywhere in the line, as libraries that
        // quote their source in parentheses write it.
        let repeated = previous.ends_with(&text) || (text.chars().count() >= 24 && line.contains(&text));
        if !text.is_empty() && !repeated {
            if !line.is_empty() {
                line.push_str(": ");
            }
            line.push_str(&text);
        }
        previous = text;
    }
    shortened(line)
}

/// A line longer than a screenful (a 10 MB app name echoed back, a 300-digit number) keeps its
/// start, which names the flag, file or field, and its end, which says why; the middle goes.
fn shortened(line: String) -> String {
    const HEAD: usize = 1_500;
    const TAIL: usize = 500;
    let chars = line.chars().count();
    if chars <= HEAD + TAIL + 100 {
        return line;
    }
    let head: String = line.chars().take(HEAD).collect();
    let tail: String = line.chars().skip(chars - TAIL).collect();
    format!("{head} … ({} characters left out) … {tail}", chars - HEAD - TAIL)
}

#[cfg(test)]
mod tests {
    use super::one_line;

    /// A library error that writes its source into its own message, as many do.
    #[derive(Debug)]
    struct Connect(std::io::Error);

    impl std::fmt::Display for Connect {
        fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
            write!(f, "cannot connect: {}", self.0)
        }
    }

    impl std::error::Error for Connect {
        fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
            Some(&self.0)
        }
    }

    /// One that quotes its source in parentheses, mid-message.
    #[derive(Debug)]
    struct Quoting(std::io::Error);

    impl std::fmt::Display for Quoting {
        fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
            write!(f, "failed to infer config: ({})", self.0)
        }
    }

    impl std::error::Error for Quoting {
        fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
            Some(&self.0)
        }
    }

    #[test]
    fn an_error_chain_is_one_line_without_repeats() {
        let io = || std::io::Error::new(std::io::ErrorKind::ConnectionRefused, "Connection refused");
        // The cause's text is already in the message: said once.
        let e = anyhow::Error::new(Connect(io())).context("--env grpc://127.0.0.1:1");
        assert_eq!(one_line(&e), "--env grpc://127.0.0.1:1: cannot connect: Connection refused");
        // Causes that add something are all kept, in order; line breaks become spaces.
        let e = anyhow::Error::new(io()).context("reading\nthe trace").context("--trace t.csv");
        assert_eq!(one_line(&e), "--trace t.csv: reading the trace: Connection refused");
        // A short cause that happens to appear in a path further up is still said.
        let eof = std::io::Error::new(std::io::ErrorKind::UnexpectedEof, "EOF");
        let e = anyhow::Error::new(eof).context("reading /data/EOF/t.csv");
        assert_eq!(one_line(&e), "reading /data/EOF/t.csv: EOF");
        // A long cause the message quotes in parentheses (as kube's inference errors do).
        let yaml = std::io::Error::other("failed to parse kubeconfig YAML: line 1 column 1");
        let e = anyhow::Error::new(Quoting(yaml)).context("no Kubernetes configuration");
        assert_eq!(
            one_line(&e),
            "no Kubernetes configuration: failed to infer config: (failed to parse kubeconfig YAML: line 1 column 1)"
        );
        // A huge one keeps both ends.
        let name = "x".repeat(10_000_000);
        let e = anyhow::anyhow!("app {name} is unknown").context("--input obs.json: observation.app");
        let line = one_line(&e);
        assert!(line.len() < 2_200 && !line.contains('\n'), "{}", line.len());
        assert!(line.starts_with("--input obs.json: observation.app: app xxx") && line.ends_with("xxx is unknown"));
        assert!(line.contains("(9998050 characters left out)"), "{}", &line[1_490..1_560]);
    }
}
