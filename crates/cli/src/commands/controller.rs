//! `aware controller`: the Kubernetes MultidimPodAutoscaler recommender and updater.

use std::process::ExitCode;
use std::time::Duration;

use anyhow::Result;
use aware_kube::ControllerConfig;

#[derive(clap::Args, Debug)]
#[command(after_help = "With neither --recommender nor --updater, both run. \
The admission webhook is not implemented yet: for Recreate/Auto pass --evict only when another \
admission controller (upstream's MPA admission controller) applies recommendations to new pods.")]
pub struct Args {
    /// Run the recommender: compute recommendations and write MPA status.
    #[arg(long)]
    pub recommender: bool,
    /// Run the updater: scale subresource, in-place resize, eviction.
    #[arg(long)]
    pub updater: bool,
    /// Serve MPAs whose spec.recommenders names this recommender.
    #[arg(long, default_value = aware_kube::DEFAULT_RECOMMENDER_NAME)]
    pub recommender_name: String,
    /// Also serve MPAs with an empty recommenders list (upstream's default recommender's).
    #[arg(long)]
    pub claim_default: bool,
    /// Watch one namespace (default: all).
    #[arg(long)]
    pub namespace: Option<String>,
    /// Evict pods for updateMode Recreate/Auto (needs an admission webhook to apply resources).
    #[arg(long)]
    pub evict: bool,
    /// Ready pods that must remain after an eviction.
    #[arg(long, default_value_t = 1)]
    pub min_live_pods: u32,
    /// Seconds between passes over each MPA.
    #[arg(long, default_value_t = 15.0, value_parser = crate::commands::positive_f64)]
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
    /// Observe each MPA's target through Prometheus with this backend configuration (YAML:
    /// `url`, `queries`, staleness; `namespace` and `apps` are each MPA's own), which gives the
    /// agent the latency and load it was trained on; without it, the API server and
    /// metrics.k8s.io (usage only). Unreachable or stale: nothing is decided that pass.
    #[arg(long, value_name = "FILE")]
    pub prometheus: Option<std::path::PathBuf>,
}

pub fn run(args: Args) -> Result<ExitCode> {
    let prometheus = match &args.prometheus {
        Some(path) => Some(aware_kube::PrometheusConfig::load(path).map_err(|e| anyhow::anyhow!("--prometheus {e}"))?),
        None => None,
    };
    let both = !args.recommender && !args.updater;
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
    let options = aware_kube::RunOptions {
        listen: args.listen,
        vertical_cpu: args.vertical_cpu,
        leader,
        checkpoint: args.checkpoint,
        prometheus,
    };
    aware_kube::run_blocking(config, options)?;
    Ok(ExitCode::SUCCESS)
}
