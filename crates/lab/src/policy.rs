//! The policies a run can name (`hpa`, `mpa`, `fixed:1x0.1x64`, `rl:DIR`, …) and how each is
//! built for one application.

use std::fmt;
use std::path::PathBuf;
use std::str::FromStr;

use aware_baselines::{Baseline, BaselineKind};
use aware_core::{CPU_MILLICORES_RANGE, MEMORY_MIB_RANGE, MIB, REPLICAS_RANGE};
use aware_core::{ContainerResources, FixedRecommender, Profile, Recommendation, Recommender, Resources};
use aware_sim::{AppSpec, CONTAINER};

use crate::agent::RlRecommender;
use crate::{LabError, ParseError};

/// A manual allocation, `fixed:RxCPUxMEM`: R replicas × CPU cores × MEM MiB per replica (what most
/// teams run today). Kept with the name as given, which is the policy's name in reports.
#[derive(Debug, Clone, PartialEq)]
pub struct FixedAllocation {
    pub spec: String,
    pub replicas: u32,
    pub cpu_millicores: u64,
    pub memory_bytes: u64,
}

/// Valid ranges of replicas and of a container's resources: core's, the one definition.
const MAX_REPLICAS: u32 = REPLICAS_RANGE.1 as u32;
const MAX_CPU_MILLICORES: u64 = CPU_MILLICORES_RANGE.1;
const MAX_MEMORY_BYTES: u64 = MEMORY_MIB_RANGE.1 * MIB;

impl FromStr for FixedAllocation {
    type Err = ParseError;
    fn from_str(s: &str) -> Result<Self, ParseError> {
        let bad = |reason: String| ParseError::new(s, reason);
        let body = s.strip_prefix("fixed:").unwrap_or(s);
        let parts: Vec<&str> = body.split('x').collect();
        let [r, c, m] = parts.as_slice() else {
            return Err(bad("is not fixed:REPLICASxCPU_CORESxMEMORY_MIB (e.g. fixed:1x0.1x64)".to_string()));
        };
        let replicas: u32 = r.parse().map_err(|_| bad(format!("replicas {r:?} is not a whole number")))?;
        if !(1..=MAX_REPLICAS).contains(&replicas) {
            return Err(bad(format!("replicas {replicas} is outside 1–{MAX_REPLICAS}")));
        }
        let cores: f64 = c.parse().map_err(|_| bad(format!("CPU {c:?} is not a number of cores")))?;
        let cpu_millicores = (cores * 1000.0).round();
        if !(cores.is_finite() && (1.0..=MAX_CPU_MILLICORES as f64).contains(&cpu_millicores)) {
            return Err(bad(format!("CPU {c} cores is outside 0.001–1000")));
        }
        let mib: f64 = m.parse().map_err(|_| bad(format!("memory {m:?} is not a number of MiB")))?;
        let memory_bytes = (mib * MIB as f64).round();
        if !(mib.is_finite() && (MIB as f64..=MAX_MEMORY_BYTES as f64).contains(&memory_bytes)) {
            return Err(bad(format!("memory {m} MiB is outside 1 MiB–16 TiB")));
        }
        Ok(FixedAllocation {
            spec: s.to_string(),
            replicas,
            cpu_millicores: cpu_millicores as u64,
            memory_bytes: memory_bytes as u64,
        })
    }
}

#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
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
    /// A manual allocation, the same for every app.
    Fixed(FixedAllocation),
    /// A trained agent's checkpoint directory (`rl:DIR`).
    Rl(PathBuf),
}

impl PolicyName {
    /// The policies named by a plain word.
    pub const NAMED: [PolicyName; 7] = [
        PolicyName::Hpa,
        PolicyName::Vpa,
        PolicyName::Mpa,
        PolicyName::Threshold,
        PolicyName::Aimd,
        PolicyName::Static,
        PolicyName::StaticPeak,
    ];

    /// The word for a named policy; `fixed` and `rl` for the parameterised ones.
    pub fn kind(&self) -> &str {
        match self {
            PolicyName::Hpa => "hpa",
            PolicyName::Vpa => "vpa",
            PolicyName::Mpa => "mpa",
            PolicyName::Threshold => "threshold",
            PolicyName::Aimd => "aimd",
            PolicyName::Static => "static",
            PolicyName::StaticPeak => "static-peak",
            PolicyName::Fixed(_) => "fixed",
            PolicyName::Rl(_) => "rl",
        }
    }
}

impl fmt::Display for PolicyName {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            PolicyName::Rl(dir) => write!(f, "rl:{}", dir.display()),
            PolicyName::Fixed(a) => f.write_str(&a.spec),
            other => f.write_str(other.kind()),
        }
    }
}

impl FromStr for PolicyName {
    type Err = ParseError;
    fn from_str(s: &str) -> Result<Self, ParseError> {
        if let Some(dir) = s.strip_prefix("rl:") {
            if dir.is_empty() {
                return Err(ParseError::new(s, "needs a checkpoint directory (rl:DIR)"));
            }
            return Ok(PolicyName::Rl(dir.into()));
        }
        if s.starts_with("fixed:") {
            return s.parse().map(PolicyName::Fixed);
        }
        PolicyName::NAMED.into_iter().find(|p| p.kind() == s).ok_or_else(|| {
            let names: Vec<_> = PolicyName::NAMED.iter().map(|p| p.kind()).collect();
            ParseError::new(
                s,
                format!("unknown policy (expected one of {}, fixed:RxCPUxMEM or rl:DIR)", names.join(", ")),
            )
        })
    }
}

/// A built recommender, kept concrete so a dry run can show its reasoning.
#[non_exhaustive]
pub enum Policy {
    /// HPA, VPA, the MPA default, threshold step scaling or AIMD.
    Baseline(Box<Baseline>),
    Fixed(FixedRecommender),
    Rl(Box<RlRecommender>),
}

/// Replicas at the profile's CPU target for `rps`, at one core per replica and the app's
/// reference memory, clamped to the profile bounds.
fn sized(name: &str, app: &AppSpec, rps: f64, profile: &Profile) -> FixedRecommender {
    let b = &profile.bounds;
    let target = profile.targets.cpu_utilisation;
    let replicas =
        ((rps * app.cost().cpu_s / target).ceil().min(u32::MAX as f64) as u32).clamp(b.min_replicas, b.max_replicas);
    let r = app.reference;
    fixed_recommender(
        name,
        replicas,
        r.cpu_millicores.clamp(b.min_cpu_millicores, b.max_cpu_millicores),
        r.memory_bytes.clamp(b.min_memory_bytes(), b.max_memory_bytes()),
    )
}

fn fixed_recommender(name: &str, replicas: u32, cpu_millicores: u64, memory_bytes: u64) -> FixedRecommender {
    FixedRecommender {
        name: name.into(),
        recommendation: Recommendation {
            replicas,
            containers: vec![ContainerResources::guaranteed(CONTAINER, Resources::new(cpu_millicores, memory_bytes))],
        },
    }
}

impl Policy {
    /// Builds `name` for one application. `app` is the simulated app (the static policies are
    /// sized from its load); `slo_p99_ms` its objective when the profile has none (AIMD and the
    /// RL policy's state need one).
    pub fn build(
        name: &PolicyName,
        profile: &Profile,
        app: Option<&AppSpec>,
        slo_p99_ms: Option<f64>,
    ) -> Result<Policy, LabError> {
        let refuse = |reason: &str| LabError::Policy { policy: name.to_string(), reason: reason.into() };
        let baseline = |kind: BaselineKind| -> Result<Policy, LabError> {
            Baseline::build(kind, profile, slo_p99_ms)
                .map(|b| Policy::Baseline(Box::new(b)))
                .map_err(|e| refuse(&e.to_string()))
        };
        Ok(match name {
            PolicyName::Hpa => baseline(BaselineKind::Hpa)?,
            PolicyName::Vpa => baseline(BaselineKind::Vpa)?,
            PolicyName::Mpa => baseline(BaselineKind::Mpa)?,
            PolicyName::Threshold => baseline(BaselineKind::Threshold)?,
            PolicyName::Aimd => baseline(BaselineKind::Aimd)?,
            PolicyName::Static | PolicyName::StaticPeak => {
                let Some(app) = app else {
                    return Err(refuse("is sized from a simulated app's load and only runs on the simulator"));
                };
                let rps = if *name == PolicyName::Static { app.mean_rps } else { app.peak_rps };
                Policy::Fixed(sized(name.kind(), app, rps, profile))
            }
            PolicyName::Fixed(a) => {
                Policy::Fixed(fixed_recommender(&a.spec, a.replicas, a.cpu_millicores, a.memory_bytes))
            }
            PolicyName::Rl(dir) => Policy::Rl(Box::new(RlRecommender::new(dir, profile, slo_p99_ms)?)),
        })
    }

    /// A copy of a rule-based policy with everything it has learned so far (histories,
    /// windows, samples), to replay a stretch of traffic from the state it was in when the
    /// stretch began; `None` for an RL policy, whose network is not copied.
    pub fn snapshot(&self) -> Option<Policy> {
        match self {
            Policy::Baseline(b) => Some(Policy::Baseline(b.clone())),
            Policy::Fixed(r) => Some(Policy::Fixed(r.clone())),
            Policy::Rl(_) => None,
        }
    }

    /// The VPA inside a rule-based policy that has one (VPA, MPA): its history is what a
    /// restarted controller keeps ([`aware_baselines::VerticalPodAutoscaler::save_checkpoints`]).
    pub fn vpa(&self) -> Option<&aware_baselines::VerticalPodAutoscaler> {
        match self {
            Policy::Baseline(b) => b.vpa(),
            _ => None,
        }
    }

    /// [`Policy::vpa`], to load a saved history into.
    pub fn vpa_mut(&mut self) -> Option<&mut aware_baselines::VerticalPodAutoscaler> {
        match self {
            Policy::Baseline(b) => b.vpa_mut(),
            _ => None,
        }
    }

    pub fn recommender(&mut self) -> &mut dyn Recommender {
        match self {
            Policy::Baseline(b) => b.recommender(),
            Policy::Fixed(r) => r,
            Policy::Rl(r) => r.as_mut(),
        }
    }

    /// The controller's own reasoning for the last recommendation, for dry runs.
    pub fn details(&self) -> serde_json::Value {
        match self {
            Policy::Baseline(b) => b.details(),
            Policy::Fixed(f) => serde_json::json!({ "fixed": f.recommendation }),
            Policy::Rl(r) => {
                serde_json::json!({ "fallbacks_to_mpa": r.fallbacks(), "last_fallback_reason": r.last_fallback_reason() })
            }
        }
    }

    /// Intervals in which the policy refused its observation and a fallback answered.
    pub fn fallbacks(&self) -> u64 {
        match self {
            Policy::Rl(r) => r.fallbacks(),
            _ => 0,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fixed_allocation_parses_and_keeps_its_name() {
        let p: PolicyName = "fixed:1x0.1x64".parse().unwrap();
        let PolicyName::Fixed(a) = &p else { panic!("{p:?}") };
        assert_eq!((a.replicas, a.cpu_millicores, a.memory_bytes), (1, 100, 64 * MIB));
        assert_eq!(p.to_string(), "fixed:1x0.1x64");
        let q: PolicyName = "fixed:12x2x4096".parse().unwrap();
        assert_eq!(q.to_string(), "fixed:12x2x4096");
    }

    #[test]
    fn fixed_allocation_refuses_what_no_cluster_runs() {
        for bad in [
            "fixed:0x1x64",
            "fixed:100001x1x64",
            "fixed:1x0x64",
            "fixed:1x-1x64",
            "fixed:1x1001x64",
            "fixed:1xNaNx64",
            "fixed:1x1x0.5",
            "fixed:1x1x1e300",
            "fixed:1x1",
            "fixed:axbxc",
            "fixed:4294967297x1x64",
        ] {
            assert!(bad.parse::<PolicyName>().is_err(), "{bad} was accepted");
        }
    }

    #[test]
    fn names_round_trip() {
        for p in PolicyName::NAMED {
            assert_eq!(p.to_string().parse::<PolicyName>().unwrap(), p);
        }
        assert!("hpa2".parse::<PolicyName>().is_err());
        assert!("rl:".parse::<PolicyName>().is_err());
    }
}
