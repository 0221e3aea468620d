//! Between the wire messages and `aware_core`'s types, validating everything that arrives:
//! a request that does not fit its session's spaces is refused with a reason, never guessed at.

use aware_core::{Action, Population, Space, Step, StepInfo};
use aware_sim::VerticalUpdate;

use crate::envs::{EnvId, MakeConfig, MakeError};
use crate::proto;

/// Why a request's payload was refused; the text is what the caller's gRPC status says.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[non_exhaustive]
pub enum RequestError {
    #[error("{field}: expected {expected} values ({num_envs} env(s) x {dim}), got {got}")]
    WrongLength { field: &'static str, expected: usize, num_envs: usize, dim: usize, got: usize },
    #[error("{field}: this session's action space is {space}; send `{expected}` values")]
    WrongKind { field: &'static str, space: String, expected: &'static str },
    #[error("{field}[{index}]: {value} is not in the action space {space}")]
    OutOfSpace { field: &'static str, index: usize, value: String, space: String },
    #[error("{field}: {value} is negative; seeds are non-negative integers")]
    NegativeSeed { field: &'static str, value: i64 },
    #[error("options: unknown reset option {0:?} (none is recognised)")]
    UnknownOption(String),
    #[error(transparent)]
    Make(#[from] MakeError),
}

pub fn space_to_proto(space: &Space) -> proto::Space {
    use proto::space::Kind;
    let kind = match space {
        Space::Box { low, high } => Kind::Box(proto::BoxSpace {
            low: low.clone(),
            high: high.clone(),
            shape: vec![low.len() as u32],
            dtype: "float32".into(),
        }),
        Space::Discrete { n } => Kind::Discrete(proto::DiscreteSpace { n: *n as u64, start: 0 }),
        Space::MultiDiscrete { nvec } => {
            Kind::MultiDiscrete(proto::MultiDiscreteSpace { nvec: nvec.iter().map(|&n| n as u64).collect() })
        }
    };
    proto::Space { kind: Some(kind) }
}

/// A space as a server sent it; `None` when the message holds none this client understands.
pub fn space_from_proto(space: &proto::Space) -> Option<Space> {
    use proto::space::Kind;
    Some(match space.kind.as_ref()? {
        Kind::Box(b) if b.low.len() == b.high.len() => Space::Box { low: b.low.clone(), high: b.high.clone() },
        Kind::Box(_) => return None,
        Kind::Discrete(d) if d.start == 0 => Space::Discrete { n: usize::try_from(d.n).ok()? },
        Kind::Discrete(_) => return None,
        Kind::MultiDiscrete(m) => {
            Space::MultiDiscrete { nvec: m.nvec.iter().map(|&n| usize::try_from(n).ok()).collect::<Option<_>>()? }
        }
    })
}

pub fn info_to_proto(info: &StepInfo) -> proto::Info {
    proto::Info {
        slo_violated: info.slo_violated,
        dropped_requests: info.dropped_requests,
        oom_events: info.oom_events,
        illegal_action: info.illegal_action,
        oscillation: info.oscillation,
        cpu_utilisation: info.cpu_utilisation,
        memory_utilisation: info.memory_utilisation,
        slo_preservation: info.slo_preservation,
        replicas: info.replicas,
        cpu_limit_millicores: info.cpu_limit_millicores,
        memory_limit_bytes: info.memory_limit_bytes,
        usage_carried: info.usage_carried,
    }
}

pub fn info_from_proto(info: &proto::Info) -> StepInfo {
    StepInfo {
        slo_violated: info.slo_violated,
        dropped_requests: info.dropped_requests,
        oom_events: info.oom_events,
        illegal_action: info.illegal_action,
        oscillation: info.oscillation,
        cpu_utilisation: info.cpu_utilisation,
        memory_utilisation: info.memory_utilisation,
        slo_preservation: info.slo_preservation,
        replicas: info.replicas,
        cpu_limit_millicores: info.cpu_limit_millicores,
        memory_limit_bytes: info.memory_limit_bytes,
        usage_carried: info.usage_carried,
    }
}

/// Encodes actions for the wire (the client side).
pub fn actions_to_proto(actions: &[Action]) -> proto::Actions {
    let mut out = proto::Actions::default();
    for a in actions {
        match a {
            Action::Continuous(v) => out.continuous.extend_from_slice(v),
            Action::Discrete(d) => out.discrete.push(*d as i64),
            Action::MultiDiscrete(v) => out.discrete.extend(v.iter().map(|&d| d as i64)),
        }
    }
    out
}

/// Decodes and checks `num_envs` actions against `space`: the right kind and count of values,
/// every value finite and inside the space (Gymnasium's `action_space.contains`).
pub fn actions_from_proto(
    field: &'static str,
    actions: Option<&proto::Actions>,
    space: &Space,
    num_envs: usize,
) -> Result<Vec<Action>, RequestError> {
    let empty = proto::Actions::default();
    let a = actions.unwrap_or(&empty);
    let dim = space.dim();
    let expected = num_envs * dim;
    let wrong_len = |got| RequestError::WrongLength { field, expected, num_envs, dim, got };
    match space {
        Space::Box { low, high } => {
            if !a.discrete.is_empty() {
                return Err(RequestError::WrongKind { field, space: space.to_string(), expected: "continuous" });
            }
            if a.continuous.len() != expected {
                return Err(wrong_len(a.continuous.len()));
            }
            if let Some(i) = a.continuous.iter().enumerate().position(|(i, x)| {
                let j = i % dim;
                !(x.is_finite() && *x >= low[j] && *x <= high[j])
            }) {
                return Err(RequestError::OutOfSpace {
                    field,
                    index: i,
                    value: a.continuous[i].to_string(),
                    space: space.to_string(),
                });
            }
            Ok(a.continuous.chunks(dim.max(1)).map(|c| Action::Continuous(c.to_vec())).collect())
        }
        Space::Discrete { n } => {
            if !a.continuous.is_empty() {
                return Err(RequestError::WrongKind { field, space: space.to_string(), expected: "discrete" });
            }
            if a.discrete.len() != expected {
                return Err(wrong_len(a.discrete.len()));
            }
            check_discrete(field, &a.discrete, space, |_| *n)?;
            Ok(a.discrete.iter().map(|&d| Action::Discrete(d as usize)).collect())
        }
        Space::MultiDiscrete { nvec } => {
            if !a.continuous.is_empty() {
                return Err(RequestError::WrongKind { field, space: space.to_string(), expected: "discrete" });
            }
            if a.discrete.len() != expected {
                return Err(wrong_len(a.discrete.len()));
            }
            check_discrete(field, &a.discrete, space, |i| nvec[i % dim])?;
            Ok(a.discrete
                .chunks(dim.max(1))
                .map(|c| Action::MultiDiscrete(c.iter().map(|&d| d as usize).collect()))
                .collect())
        }
    }
}

fn check_discrete(
    field: &'static str,
    values: &[i64],
    space: &Space,
    n_at: impl Fn(usize) -> usize,
) -> Result<(), RequestError> {
    match values.iter().enumerate().find(|&(i, &d)| d < 0 || d as u64 >= n_at(i) as u64) {
        Some((i, d)) => {
            Err(RequestError::OutOfSpace { field, index: i, value: d.to_string(), space: space.to_string() })
        }
        None => Ok(()),
    }
}

/// A seed from the wire: absent, or a non-negative integer.
pub fn seed_from_proto(field: &'static str, seed: Option<i64>) -> Result<Option<u64>, RequestError> {
    match seed {
        None => Ok(None),
        Some(s) if s < 0 => Err(RequestError::NegativeSeed { field, value: s }),
        Some(s) => Ok(Some(s as u64)),
    }
}

/// The id and config of a `Make` request, validated (the environment itself is built by
/// [`crate::envs::make`], which checks the ranges).
pub fn make_from_proto(req: &proto::MakeRequest) -> Result<(EnvId, MakeConfig), RequestError> {
    let id: EnvId = req.env_id.parse()?;
    let c = req.config.clone().unwrap_or_default();
    let seed = seed_from_proto("config.seed", Some(c.seed))?.unwrap_or(0);
    let trace_seed = seed_from_proto("config.trace_seed", c.trace_seed)?;
    let scenario = if c.scenario.is_empty() {
        None
    } else {
        Some(
            c.scenario
                .parse()
                .map_err(|e: aware_sim::ScenarioError| MakeError::Field { field: "scenario", reason: e.to_string() })?,
        )
    };
    let population = match c.population.as_str() {
        "" => None,
        name => Some(
            name.parse::<Population>().map_err(|e| MakeError::Field { field: "population", reason: e.to_string() })?,
        ),
    };
    let vertical_update = match c.vertical_update.as_str() {
        "" => None,
        "in-place" => Some(VerticalUpdate::InPlace),
        "restart" => Some(VerticalUpdate::Restart),
        other => {
            return Err(MakeError::Field {
                field: "vertical_update",
                reason: format!("unknown mode {other:?} (expected in-place or restart)"),
            }
            .into());
        }
    };
    let nonzero_f = |v: f64| (v != 0.0).then_some(v);
    let config = MakeConfig {
        num_envs: c.num_envs,
        seed,
        trace_seed,
        profile_yaml: (!c.profile_yaml.is_empty()).then_some(c.profile_yaml),
        scenario,
        episode_steps: (c.episode_steps != 0).then_some(c.episode_steps),
        day_seconds: nonzero_f(c.day_seconds),
        days: (c.days != 0).then_some(c.days),
        mean_count: nonzero_f(c.mean_count),
        population,
        vertical_update,
    };
    Ok((id, config))
}

/// The wire form of a `MakeConfig` (the client side).
pub fn make_to_proto(id: EnvId, c: &MakeConfig) -> proto::MakeRequest {
    proto::MakeRequest {
        env_id: id.name().into(),
        config: Some(proto::EnvConfig {
            num_envs: c.num_envs,
            seed: c.seed as i64,
            trace_seed: c.trace_seed.map(|s| s as i64),
            profile_yaml: c.profile_yaml.clone().unwrap_or_default(),
            scenario: c.scenario.map(|s| s.to_string()).unwrap_or_default(),
            episode_steps: c.episode_steps.unwrap_or(0),
            day_seconds: c.day_seconds.unwrap_or(0.0),
            days: c.days.unwrap_or(0),
            mean_count: c.mean_count.unwrap_or(0.0),
            population: c.population.map(|p| p.name().to_string()).unwrap_or_default(),
            vertical_update: match c.vertical_update {
                None => String::new(),
                Some(VerticalUpdate::InPlace) => "in-place".into(),
                Some(VerticalUpdate::Restart) => "restart".into(),
            },
        }),
    }
}

/// Concatenates steps into one `StepManyResponse`.
pub fn steps_to_proto(steps: &[Step]) -> proto::StepManyResponse {
    let dim = steps.first().map_or(0, |s| s.observation.len());
    let mut out = proto::StepManyResponse {
        observations: Vec::with_capacity(steps.len() * dim),
        rewards: Vec::with_capacity(steps.len()),
        terminated: Vec::with_capacity(steps.len()),
        truncated: Vec::with_capacity(steps.len()),
        infos: Vec::with_capacity(steps.len()),
    };
    for s in steps {
        out.observations.extend_from_slice(&s.observation);
        out.rewards.push(s.reward);
        out.terminated.push(s.terminated);
        out.truncated.push(s.truncated);
        out.infos.push(info_to_proto(&s.info));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn boxed() -> Space {
        Space::Box { low: vec![-1.0; 3], high: vec![1.0; 3] }
    }

    #[test]
    fn actions_round_trip() {
        let acts = vec![Action::Continuous(vec![0.5, -1.0, 1.0]), Action::Continuous(vec![0.0, 0.1, -0.2])];
        let wire = actions_to_proto(&acts);
        assert_eq!(actions_from_proto("actions", Some(&wire), &boxed(), 2).unwrap(), acts);
        let d = vec![Action::Discrete(6), Action::Discrete(0)];
        let wire = actions_to_proto(&d);
        assert_eq!(actions_from_proto("actions", Some(&wire), &Space::Discrete { n: 7 }, 2).unwrap(), d);
        let m = vec![Action::MultiDiscrete(vec![1, 2])];
        let wire = actions_to_proto(&m);
        assert_eq!(actions_from_proto("a", Some(&wire), &Space::MultiDiscrete { nvec: vec![2, 3] }, 1).unwrap(), m);
    }

    #[test]
    fn refusals_name_the_problem() {
        let nan = proto::Actions { continuous: vec![0.0, f32::NAN, 0.0], discrete: vec![] };
        let e = actions_from_proto("action", Some(&nan), &boxed(), 1).unwrap_err().to_string();
        assert!(e.starts_with("action[1]: NaN is not in the action space Box(-1, 1, (3,)"), "{e}");
        let short = proto::Actions { continuous: vec![0.0; 2], discrete: vec![] };
        let e = actions_from_proto("action", Some(&short), &boxed(), 1).unwrap_err().to_string();
        assert_eq!(e, "action: expected 3 values (1 env(s) x 3), got 2");
        let neg = proto::Actions { continuous: vec![], discrete: vec![-1] };
        let e = actions_from_proto("action", Some(&neg), &Space::Discrete { n: 7 }, 1).unwrap_err().to_string();
        assert!(e.contains("-1 is not in the action space Discrete(7)"), "{e}");
        let kind = proto::Actions { continuous: vec![0.0], discrete: vec![] };
        let e = actions_from_proto("action", Some(&kind), &Space::Discrete { n: 7 }, 1).unwrap_err().to_string();
        assert!(e.contains("send `discrete` values"), "{e}");
        assert!(seed_from_proto("seed", Some(-3)).unwrap_err().to_string().contains("-3 is negative"));
    }

    /// Every field of a step's info crosses the wire, `usage_carried` included: a remote
    /// learner must skip what an in-process one skips.
    #[test]
    fn infos_round_trip() {
        let info = StepInfo {
            slo_violated: true,
            dropped_requests: 3,
            oom_events: 1,
            illegal_action: true,
            oscillation: true,
            cpu_utilisation: 0.7,
            memory_utilisation: 0.4,
            slo_preservation: 0.9,
            replicas: 5,
            cpu_limit_millicores: 500,
            memory_limit_bytes: 1 << 30,
            usage_carried: true,
        };
        assert_eq!(info_from_proto(&info_to_proto(&info)), info);
        let plain = StepInfo::default();
        assert_eq!(info_from_proto(&info_to_proto(&plain)), plain);
    }

    #[test]
    fn spaces_round_trip() {
        for s in [boxed(), Space::Discrete { n: 7 }, Space::MultiDiscrete { nvec: vec![2, 5] }] {
            assert_eq!(space_from_proto(&space_to_proto(&s)), Some(s));
        }
    }
}
