//! The recommenders the command line can name, built from a profile.

use std::fmt;
use std::str::FromStr;

use anyhow::{Result, bail};
use aware_baselines::vpa::{VerticalPodAutoscaler, VpaSpec};
use aware_baselines::{
    AdditiveIncreaseMultiplicativeDecrease, HorizontalPodAutoscaler, MultidimPodAutoscaler, ThresholdStepScaling,
};
use aware_core::{ContainerResources, FixedRecommender, Profile, Recommendation, Recommender, Resources};
use aware_sim::{AppSpec, CONTAINER};

#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum PolicyName {
    Hpa,
    Vpa,
    Mpa,
    Threshold,
    Aimd,
    /// A fixed allocation sized for the mean load (the app's reference allocation).
    Static,
    /// A fixed allocation sized for the peak of the daily cycle.
    StaticPeak,
    /// A trained agent's checkpoint directory (`rl:DIR`).
    Rl(std::path::PathBuf),
}

impl PolicyName {
    pub const ALL: [PolicyName; 7] = [
        PolicyName::Hpa,
        PolicyName::Vpa,
        PolicyName::Mpa,
        PolicyName::Threshold,
        PolicyName::Aimd,
        PolicyName::Static,
        PolicyName::StaticPeak,
    ];

    pub fn as_str(&self) -> &str {
        match self {
            PolicyName::Hpa => "hpa",
            PolicyName::Vpa => "vpa",
            PolicyName::Mpa => "mpa",
            PolicyName::Threshold => "threshold",
            PolicyName::Aimd => "aimd",
            PolicyName::Static => "static",
            PolicyName::StaticPeak => "static-peak",
            PolicyName::Rl(_) => "rl",
        }
    }
}

impl fmt::Display for PolicyName {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            PolicyName::Rl(dir) => write!(f, "rl:{}", dir.display()),
            other => f.write_str(other.as_str()),
        }
    }
}

impl FromStr for PolicyName {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        if let Some(dir) = s.strip_prefix("rl:") {
            if dir.is_empty() {
                return Err("rl: needs a checkpoint directory (rl:DIR)".into());
            }
            return Ok(PolicyName::Rl(dir.into()));
        }
        PolicyName::ALL.into_iter().find(|p| p.as_str() == s).ok_or_else(|| {
            let names: Vec<_> = PolicyName::ALL.iter().map(|p| p.as_str()).collect();
            format!("unknown policy {s:?} (expected one of {}, or rl:DIR)", names.join(", "))
        })
    }
}

/// A built recommender, kept concrete so a dry run can show its reasoning.
pub enum Policy {
    Hpa(HorizontalPodAutoscaler),
    Vpa(VerticalPodAutoscaler),
    Mpa(Box<MultidimPodAutoscaler>),
    Threshold(ThresholdStepScaling),
    Aimd(AdditiveIncreaseMultiplicativeDecrease),
    Fixed(FixedRecommender),
    Rl(Box<crate::learner::RlRecommender>),
}

/// Fixed allocation at one core per replica and the app's reference memory, with replicas for
/// the profile's target CPU utilisation at `rps`, clamped to the profile bounds.
fn fixed(name: &str, app: &AppSpec, rps: f64, profile: &Profile) -> FixedRecommender {
    let b = &profile.bounds;
    let replicas = app.replicas_for(rps, profile.targets.cpu_utilisation).clamp(b.min_replicas, b.max_replicas);
    let r = app.reference;
    FixedRecommender {
        name: name.into(),
        recommendation: Recommendation {
            replicas,
            containers: vec![ContainerResources::guaranteed(
                CONTAINER,
                Resources::new(
                    r.cpu_millicores.clamp(b.min_cpu_millicores, b.max_cpu_millicores),
                    r.memory_bytes.clamp(b.min_memory_bytes(), b.max_memory_bytes()),
                ),
            )],
        },
    }
}

impl Policy {
    /// `slo_p99_ms` is the workload's objective when the profile has none (AIMD needs one).
    pub fn build(
        name: &PolicyName,
        profile: &Profile,
        app: Option<&AppSpec>,
        slo_p99_ms: Option<f64>,
    ) -> Result<Policy> {
        Ok(match name {
            PolicyName::Hpa => Policy::Hpa(HorizontalPodAutoscaler::from_profile(profile)),
            PolicyName::Vpa => Policy::Vpa(VerticalPodAutoscaler::new(VpaSpec::from_profile(profile))),
            PolicyName::Mpa => Policy::Mpa(Box::new(MultidimPodAutoscaler::from_profile(profile, false))),
            PolicyName::Threshold => Policy::Threshold(ThresholdStepScaling::from_profile(profile)),
            PolicyName::Aimd => {
                if profile.slo.latency_p99_ms.or(slo_p99_ms).is_none() {
                    bail!("aimd needs a latency SLO: set slo.latency_p99_ms in the profile or slo_p99_ms in the input");
                }
                Policy::Aimd(AdditiveIncreaseMultiplicativeDecrease::from_profile(profile, slo_p99_ms))
            }
            PolicyName::Static | PolicyName::StaticPeak => {
                let Some(app) = app else {
                    bail!("{name} is sized from a simulated app's load and only runs on the simulator")
                };
                let rps = if *name == PolicyName::Static { app.mean_rps } else { app.peak_rps };
                Policy::Fixed(fixed(name.as_str(), app, rps, profile))
            }
            PolicyName::Rl(dir) => Policy::Rl(Box::new(crate::learner::RlRecommender::new(dir, profile, slo_p99_ms)?)),
        })
    }

    pub fn recommender(&mut self) -> &mut dyn Recommender {
        match self {
            Policy::Hpa(r) => r,
            Policy::Vpa(r) => r,
            Policy::Mpa(r) => r.as_mut(),
            Policy::Threshold(r) => r,
            Policy::Aimd(r) => r,
            Policy::Fixed(r) => r,
            Policy::Rl(r) => r.as_mut(),
        }
    }

    /// The controller's own reasoning for the last recommendation, for dry runs.
    pub fn details(&self) -> serde_json::Value {
        let vpa = |v: &VerticalPodAutoscaler| serde_json::json!({ "recommendation": v.recommendation(), "updater": v.decisions() });
        match self {
            Policy::Hpa(h) => serde_json::json!({ "hpa": h.last_decision() }),
            Policy::Vpa(v) => serde_json::json!({ "vpa": vpa(v) }),
            Policy::Mpa(m) => serde_json::json!({ "hpa": m.hpa.last_decision(), "vpa": vpa(&m.vpa) }),
            Policy::Threshold(t) => {
                serde_json::json!({ "steps": t.steps.iter().map(|(l, c)| serde_json::json!({"from_utilisation": if l.is_finite() { Some(*l) } else { None }, "change": c})).collect::<Vec<_>>() })
            }
            Policy::Aimd(a) => serde_json::json!({ "slo_p99_ms": a.slo_p99_ms }),
            Policy::Fixed(f) => serde_json::json!({ "fixed": f.recommendation }),
            Policy::Rl(r) => serde_json::json!({ "fallbacks_to_mpa": r.fallbacks }),
        }
    }
}
