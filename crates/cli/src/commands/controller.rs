//! `aware controller`: the Kubernetes MultidimPodAutoscaler recommender and updater.

use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Duration;

use anyhow::Result;
use aware_kube::ControllerConfig;

#[derive(clap::Args, Debug)]
#[command(after_help = "--recommender, --updater and --webhook select what runs; with none of them, \
the recommender and the updater run (not the webhook: it needs a certificate). The admission \
webhook (--webhook, TLS on --webhook-listen) sets the recommended resources on pods as they are \
created, on every replica whether or not it holds the leader lease. For updateMode Recreate/Auto, \
pass --evict only where a webhook (this one, or upstream's MPA admission controller) applies \
recommendations to new pods: without one, evicted pods come back with their old resources.")]
pub struct Args {
    /// Run the recommender: compute recommendations and write MPA status.
    #[arg(long)]
    pub recommender: bool,
    /// Run the updater: scale subresource, in-place resize, eviction.
    #[arg(long)]
    pub updater: bool,
    /// Run the admission webhook: set recommended resources on new pods (needs --webhook-cert and
    /// --webhook-key).
    #[arg(long, requires_all = ["webhook_cert", "webhook_key"])]
    pub webhook: bool,
    /// Address of the webhook's TLS listener.
    #[arg(long, default_value = "0.0.0.0:8443", value_name = "ADDR")]
    pub webhook_listen: String,
    /// PEM certificate chain the webhook serves (re-read when the file changes).
    #[arg(long, value_name = "FILE", requires = "webhook")]
    pub webhook_cert: Option<PathBuf>,
    /// PEM private key of --webhook-cert.
    #[arg(long, value_name = "FILE", requires = "webhook")]
    pub webhook_key: Option<PathBuf>,
    /// Serve MPAs whose spec.recommenders names this recommender.
    #[arg(long, default_value = aware_kube::DEFAULT_RECOMMENDER_NAME)]
    pub recommender_name: String,
    /// Also serve MPAs with an empty recommenders list (upstream's default recommender's).
    #[arg(long)]
    pub claim_default: bool,
    /// Watch one namespace (default: all).
    #[arg(long)]
    pub namespace: Option<String>,
    /// Evict pods for updateMode Recreate/Auto (needs an admission webhook, e.g. --webhook, to
    /// apply resources to the recreated pods).
    #[arg(long)]
    pub evict: bool,
    /// Ready pods that must remain after an eviction.
    #[arg(long, default_value_t = 1)]
    pub min_live_pods: u32,
    /// Seconds between passes over each MPA.
    #[arg(long, default_value_t = 15.0, value_parser = crate::commands::pause_seconds)]
    pub interval_s: f64,
    /// The VPA half of the MPA default also controls CPU (otherwise memory only).
    #[arg(long)]
    pub vertical_cpu: bool,
    /// Address for /healthz and /metrics.
    #[arg(long, default_value = "0.0.0.0:8080")]
    pub listen: String,
    /// Act only while holding a coordination.k8s.io Lease (for several replicas).
    #[arg(long)]
    pub leader_elect: bool,
    /// Namespace of the leader Lease (default: $POD_NAMESPACE, else aware-system).
    #[arg(long)]
    pub lease_namespace: Option<String>,
    /// Name of the leader Lease.
    #[arg(long, default_value = "aware-controller")]
    pub lease_name: String,
    /// AWARE decides (the lifecycle, its guard, the MPA default as fallback) with the agent and
    /// the apps' stages of this `aware run --checkpoint` directory; an MPA whose namespace/name
    /// it does not name starts in its first stage. Without it, the MPA default decides.
    #[arg(long, value_name = "DIR")]
    pub checkpoint: Option<std::path::PathBuf>,
    /// With --checkpoint: let an agent retraining after its app's rewards degraded explore on
    /// the cluster (Gaussian noise on its actions, under the guard and the fallback's floor).
    /// Without it the fallback serves a retraining app while the agent learns from it.
    #[arg(long, requires = "checkpoint")]
    pub explore_while_retraining: bool,
    /// Observe each MPA's target through Prometheus with this backend configuration (YAML:
    /// `url`, `queries`, staleness; `namespace` and `apps` are each MPA's own), which gives the
    /// agent the latency and load it was trained on; without it, the API server and
    /// metrics.k8s.io (usage only). Unreachable or stale: nothing is decided that pass.
    #[arg(long, value_name = "FILE")]
    pub prometheus: Option<std::path::PathBuf>,
    /// Keep the deciders' state in this file across restarts (on a volume that outlives the
    /// pod): the MPA default's VPA histories, and with --checkpoint each app's stage, the
    /// memory floor after an OOM kill, and in FILE.learned/ the agent as it learned live and
    /// the policies it serves apps with. Taken up at the start (as leader, with
    /// --leader-elect), written every control interval and when the controller stops; a
    /// damaged file is set aside as FILE.rejected-N (a damaged learned entry as
    /// FILE.learned/rejected-N-…) and not used.
    #[arg(long, value_name = "FILE")]
    pub state: Option<std::path::PathBuf>,
    /// With --checkpoint: record every decision (who acted, on what, the guard's verdict, the
    /// features behind the agent's action), stage change and window (as an episode of the
    /// app's transitions) in this trajectory store (sqlite:PATH, postgres://…, influxdb://…),
    /// each MPA as the app NAMESPACE/NAME; `aware explain --store URL --app NAMESPACE/NAME`
    /// reads it back. Its steps and episodes go on after what the store holds for the app.
    #[arg(long, value_name = "URL", requires = "checkpoint")]
    pub store: Option<String>,
    /// Where --store's writes wait on disk while the store is unreachable (default: PATH.spool/
    /// beside a SQLite file, ./aware-spool/ for a server; in a pod, a volume that outlives it).
    /// Flushed, in order, when the store returns.
    #[arg(long, value_name = "DIR", requires = "store")]
    pub spool: Option<std::path::PathBuf>,
}

pub fn run(args: Args) -> Result<ExitCode> {
    let prometheus = match &args.prometheus {
        Some(path) => Some(aware_kube::PrometheusConfig::load(path).map_err(|e| anyhow::anyhow!("--prometheus {e}"))?),
        None => None,
    };
    let both = !args.recommender && !args.updater && !args.webhook;
    let config = ControllerConfig {
        recommender_name: args.recommender_name,
        claim_default: args.claim_default,
        recommend: both || args.recommender,
        update: both || args.updater,
        evict: args.evict,
        min_live_pods: args.min_live_pods,
        interval: Duration::from_secs_f64(args.interval_s),
        namespace: args.namespace,
        ..ControllerConfig::default()
    };
    let leader = args.leader_elect.then(|| {
        let namespace = args
            .lease_namespace
            .or_else(|| std::env::var("POD_NAMESPACE").ok())
            .unwrap_or_else(|| "aware-system".into());
        // Pod names are unique among live pods: a good candidate identity.
        let identity = std::env::var("HOSTNAME").unwrap_or_else(|_| format!("aware-{}", std::process::id()));
        (namespace, aware_kube::leader::LeaderConfig::new(args.lease_name, identity))
    });
    let webhook = match (args.webhook, args.webhook_cert, args.webhook_key) {
        (true, Some(cert), Some(key)) => Some(aware_kube::WebhookOptions { listen: args.webhook_listen, cert, key }),
        (true, _, _) => anyhow::bail!("--webhook needs --webhook-cert and --webhook-key"),
        _ => None,
    };
    let options = aware_kube::RunOptions {
        listen: args.listen,
        vertical_cpu: args.vertical_cpu,
        leader,
        webhook,
        checkpoint: args.checkpoint,
        explore_while_retraining: args.explore_while_retraining,
        prometheus,
        state: args.state,
        store: args.store,
        spool: args.spool,
    };
    aware_kube::run_blocking(config, options)?;
    Ok(ExitCode::SUCCESS)
}
