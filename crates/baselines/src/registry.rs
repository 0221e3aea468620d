//! The rule-based policies by name: [`BaselineKind`] names one (`hpa`, `vpa`, `mpa`,
//! `threshold`, `aimd`), [`Baseline`] is one built from a profile. Callers drive it through
//! [`Baseline::recommender`] and show its reasoning with [`Baseline::details`]; the lab's policy
//! registry wraps it next to the static, fixed and RL policies.

use std::fmt;
use std::str::FromStr;

use aware_core::{Profile, Recommender};
use serde_json::{Value, json};

use crate::vpa::{VerticalPodAutoscaler, VpaSpec};
use crate::{
    AdditiveIncreaseMultiplicativeDecrease, HorizontalPodAutoscaler, MultidimPodAutoscaler, ThresholdStepScaling,
};

/// Which rule-based policy.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
#[non_exhaustive]
pub enum BaselineKind {
    Hpa,
    Vpa,
    Mpa,
    Threshold,
    Aimd,
}

impl BaselineKind {
    pub const ALL: [BaselineKind; 5] =
        [BaselineKind::Hpa, BaselineKind::Vpa, BaselineKind::Mpa, BaselineKind::Threshold, BaselineKind::Aimd];

    /// The name used on the command line and in reports.
    pub fn as_str(self) -> &'static str {
        match self {
            BaselineKind::Hpa => "hpa",
            BaselineKind::Vpa => "vpa",
            BaselineKind::Mpa => "mpa",
            BaselineKind::Threshold => "threshold",
            BaselineKind::Aimd => "aimd",
        }
    }
}

impl fmt::Display for BaselineKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// Why a baseline could not be named or built.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum BaselineError {
    #[error("unknown rule-based policy {0:?} (expected one of hpa, vpa, mpa, threshold, aimd)")]
    UnknownKind(String),
    #[error("aimd needs a latency SLO: set slo.latency_p99_ms in the profile or slo_p99_ms in the input")]
    MissingSlo,
}

impl FromStr for BaselineKind {
    type Err = BaselineError;

    fn from_str(s: &str) -> Result<Self, BaselineError> {
        BaselineKind::ALL.into_iter().find(|k| k.as_str() == s).ok_or_else(|| BaselineError::UnknownKind(s.into()))
    }
}

/// A built rule-based policy, kept concrete so a dry run can show its reasoning.
#[derive(Debug, Clone)]
#[non_exhaustive]
pub enum Baseline {
    Hpa(HorizontalPodAutoscaler),
    Vpa(VerticalPodAutoscaler),
    Mpa(Box<MultidimPodAutoscaler>),
    Threshold(ThresholdStepScaling),
    Aimd(AdditiveIncreaseMultiplicativeDecrease),
}

impl Baseline {
    /// Builds `kind` from the profile's targets and bounds. `slo_p99_ms` is the workload's
    /// latency objective when the profile sets none (only AIMD needs one).
    pub fn build(kind: BaselineKind, profile: &Profile, slo_p99_ms: Option<f64>) -> Result<Baseline, BaselineError> {
        Ok(match kind {
            BaselineKind::Hpa => Baseline::Hpa(HorizontalPodAutoscaler::from_profile(profile)),
            BaselineKind::Vpa => Baseline::Vpa(VerticalPodAutoscaler::new(VpaSpec::from_profile(profile))),
            BaselineKind::Mpa => Baseline::Mpa(Box::new(MultidimPodAutoscaler::from_profile(profile, false))),
            BaselineKind::Threshold => Baseline::Threshold(ThresholdStepScaling::from_profile(profile)),
            BaselineKind::Aimd => {
                if profile.slo.latency_p99_ms.or(slo_p99_ms).is_none() {
                    return Err(BaselineError::MissingSlo);
                }
                Baseline::Aimd(AdditiveIncreaseMultiplicativeDecrease::from_profile(profile, slo_p99_ms))
            }
        })
    }

    pub fn kind(&self) -> BaselineKind {
        match self {
            Baseline::Hpa(_) => BaselineKind::Hpa,
            Baseline::Vpa(_) => BaselineKind::Vpa,
            Baseline::Mpa(_) => BaselineKind::Mpa,
            Baseline::Threshold(_) => BaselineKind::Threshold,
            Baseline::Aimd(_) => BaselineKind::Aimd,
        }
    }

    pub fn recommender(&mut self) -> &mut dyn Recommender {
        match self {
            Baseline::Hpa(r) => r,
            Baseline::Vpa(r) => r,
            Baseline::Mpa(r) => r.as_mut(),
            Baseline::Threshold(r) => r,
            Baseline::Aimd(r) => r,
        }
    }

    /// The HPA inside, if this policy has one (HPA, MPA).
    pub fn hpa_mut(&mut self) -> Option<&mut HorizontalPodAutoscaler> {
        match self {
            Baseline::Hpa(h) => Some(h),
            Baseline::Mpa(m) => Some(&mut m.hpa),
            _ => None,
        }
    }

    /// The VPA inside, if this policy has one (VPA, MPA).
    pub fn vpa(&self) -> Option<&VerticalPodAutoscaler> {
        match self {
            Baseline::Vpa(v) => Some(v),
            Baseline::Mpa(m) => Some(&m.vpa),
            _ => None,
        }
    }

    /// The VPA inside, if this policy has one (VPA, MPA).
    pub fn vpa_mut(&mut self) -> Option<&mut VerticalPodAutoscaler> {
        match self {
            Baseline::Vpa(v) => Some(v),
            Baseline::Mpa(m) => Some(&mut m.vpa),
            _ => None,
        }
    }

    /// The controller's own reasoning for its last recommendation, for dry runs:
    /// `hpa` {`current_replicas`, `desired_replicas`, `metric_replicas`, `utilizations`,
    /// `average_values`, `limit`, `error`}, `vpa` {`recommendation` {`target`, `lower_bound`,
    /// `upper_bound`}, `container_recommendations`, `updater`}, the threshold steps or AIMD's SLO.
    pub fn details(&self) -> Value {
        let vpa = |v: &VerticalPodAutoscaler| {
            json!({
                "recommendation": v.recommendation(),
                "container_recommendations": v.container_recommendations(),
                "updater": v.decisions(),
            })
        };
        match self {
            Baseline::Hpa(h) => json!({ "hpa": h.last_decision() }),
            Baseline::Vpa(v) => json!({ "vpa": vpa(v) }),
            Baseline::Mpa(m) => json!({ "hpa": m.hpa.last_decision(), "vpa": vpa(&m.vpa) }),
            Baseline::Threshold(t) => {
                let steps: Vec<Value> = t
                    .steps
                    .iter()
                    .map(|(l, c)| json!({ "from_utilisation": l.is_finite().then_some(*l), "change": c }))
                    .collect();
                json!({ "steps": steps })
            }
            Baseline::Aimd(a) => json!({ "slo_p99_ms": a.slo_p99_ms }),
        }
    }
}
