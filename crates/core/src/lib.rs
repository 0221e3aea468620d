//! The shared vocabulary of `aware`: what a cluster reports, what an autoscaler proposes, and the
//! traits that let the simulator, rule-based recommenders and RL agents (and, as it lands, a
//! Kubernetes backend) be swapped for one another without the layers above noticing.
//!
//! # One name per concept
//!
//! Every crate uses these names, with these meanings; names users and scripts read (JSON fields,
//! flags) are fixed by the project's interface list.
//!
//! - **application** (`app`): one managed workload (a Kubernetes Deployment, a function), the unit
//!   a policy acts on; [`AppId`] indexes it within a backend.
//! - **interval** (also *step*): one control period (15 s, the HPA sync period); an
//!   **app-interval** is one application during one interval, the unit SLO violations count.
//! - **episode**: a run of intervals an agent learns from (100 for DDPG, 50 for PPO). On the
//!   simulator each episode is a freshly built cluster: agents keep what they learned, rule-based
//!   recommenders **restart** ([`Recommender::restart`]) as if deployed on a new cluster. A
//!   **live** backend (Kubernetes, Prometheus) has no episodes to reset: the lifecycle reads
//!   **windows** of measured intervals instead, and an interval without an observation is a
//!   **gap** (the fallback keeps the allocation; no transition spans it).
//! - **observation** ([`Observation`]): what a backend reports about an application — possibly
//!   noisy, late or missing. **state**: an observation encoded for a learner (a fixed-length
//!   vector). **truth**: what really happened (only the simulator knows it; reports score it).
//!   A state is **measured** when its CPU and memory utilisation come from its interval's usage
//!   samples; where those cannot be trusted (no ready pod has one yet, as under a metrics
//!   pipeline lagging pod start-up, or one ready for over 5 minutes has none) the simulator's
//!   environment **carries** the last measured values into it
//!   ([`StepInfo::usage_carried`]). No learner learns from a transition with a carried end, and
//!   an on-policy learner's rollout is **cut** there, as at a gap.
//! - **allocation**: replicas × per-container CPU and memory; a **recommendation**
//!   ([`Recommendation`]) is a proposed allocation; **action**: a learner's output in its action
//!   space, decoded into a recommendation. A **policy** is anything that decides: a rule-based
//!   **recommender** ([`Recommender`]), an **agent** (a learner) or a fixed allocation; the
//!   **fallback** is the rule-based recommender that acts when a learned policy may not. The
//!   lifecycle's agent and the meta-learner's **base learner** are one of two **learners**
//!   (`aware_lab::agent::Learner`: DDPG or PPO), which start from what the fallback did. The
//!   **guard** checks every observation and limits every agent proposal; its **floor** raises an
//!   agent's proposal to the fallback's scale-ups (the fallback is asked beside the agent).
//!   A recommender's **scope** ([`Scope`]) is the part of the allocation it decides (HPA:
//!   replicas); the **deployment** is the allocation first observed, to which the lifecycle
//!   raises what a fallback does not decide when it hands an app back.
//! - **SLO target** (`slo_p99_ms`): the p99 latency, in milliseconds, an application must stay
//!   under. It is resolved in one place per run: the profile's `slo.latency_p99_ms` when set,
//!   otherwise the application's own (the simulator derives one per app). An app-interval
//!   **violates** its SLO when its p99 exceeds the target, it dropped ≥ 1 % of its requests, or it
//!   served nothing while requests arrived.
//! - **utilisation**: usage / *request* as a fraction (above 1 when usage exceeds the request),
//!   spelt `utilisation` everywhere in Rust; a name that means usage / *limit* says `limit`
//!   (`cpu_limit_utilisation`). Kubernetes' own fields keep Kubernetes' spelling
//!   (`averageUtilization`). Pods without a request are left out of utilisation means.
//! - **core-seconds**: CPU cores *reserved* (requests of scheduled pods) × seconds — what the
//!   operator pays for. **memory GiB-seconds**: memory reserved the same way, the rest of the
//!   bill. **dropped requests**: rejected, timed out, or lost on scale-down/restart.
//! - **cost**: what one interval's scheduled pods hold, Σ (cores + memory price × GiB),
//!   as a fraction of the app's cost scale (`max_replicas` one-core pods); the reward's
//!   efficiency term is one minus it in intervals that meet the SLO, so that the reward falls
//!   in step with the bill.
//! - **reward**: the per-interval scalar a learner is paid (see `aware-env`); a policy is judged
//!   as an operator pays, on SLO violations, dropped requests and core-seconds beside it, and a
//!   report lists any pair of its rows the reward ranks otherwise (`reward_misranked`).
//! - **profile** ([`Profile`]): the operator's promises and limits for a set of applications.
//! - **placed**: a pod with a node; a pod with none is **pending**, and, once the scheduler has
//!   tried it, **unschedulable** ([`Unschedulable`]: how many nodes lacked its CPU, its memory).
//!   An app none of whose pods is placed is **unplaced**; the guard's rules for it are the
//!   **roll-back** (to what its pods last ran ready) and the **spread** (the same cores over
//!   smaller pods).

mod cluster;
mod env;
mod observation;
mod profile;
mod recommendation;
mod space;

pub use cluster::{AppId, Cluster, ClusterError};
pub use env::{Env, EnvError, Step, StepInfo, VecEnv, VecStep};
pub use observation::{
    ContainerObservation, Observation, ObservationError, PodObservation, PodPhase, ReplicaCounts, USAGE_SAMPLE_GRACE_S,
    Unschedulable,
};
pub use profile::{
    Bounds, BoundsOverrides, CPU_MILLICORES_RANGE, DEFAULT_MEMORY_PRICE, GIB, GuardLimits, LifecycleThresholds,
    MEMORY_MIB_RANGE, MIB, Population, Profile, ProfileError, REPLICAS_RANGE, RewardWeights, STORE_SCHEMES, Simulation,
    Slo, Targets, UnknownPopulation, resolve_bounds, syntax_error_line,
};
pub use recommendation::{
    ContainerResources, FixedRecommender, Recommendation, Recommender, RecommenderError, Resources, Scope,
};
pub use space::{Action, Space};
