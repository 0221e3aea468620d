//! Building an environment from a config: the same construction `aware simulate` and `aware
//! train` use (`aware_lab`'s `Workload`: the population sized at the profile's target, the
//! profile's simulation settings and per-app bounds, a scenario, the per-app SLOs), so an
//! environment served over gRPC is the environment trained in-process.

use std::fmt;
use std::str::FromStr;

use aware_core::{Action, Env, EnvError, Population, Profile, Space, StepInfo, VecEnv, VecStep};
use aware_env::ActionKind;
use aware_lab::workload::{Workload, WorkloadSpec};
use aware_sim::provisioning::{ProvisioningConfig, ProvisioningEnv, synthetic_bins};
use aware_sim::{Scenario, VerticalUpdate};

/// Most sub-environments one session may hold (a bound on what one request can make the
/// server allocate).
pub const MAX_NUM_ENVS: u32 = 4096;
/// Longest episode a session may ask for.
pub const MAX_EPISODE_STEPS: u32 = 1_000_000;
/// Most days of synthetic provisioning load.
pub const MAX_DAYS: u32 = 3650;

/// The environments the service offers, by their Gymnasium ids.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum EnvId {
    /// The autoscaling environment with continuous `[cpu, memory, replicas]` actions in [−1, 1]³.
    Autoscale,
    /// The autoscaling environment with the seven discrete deltas.
    AutoscaleDiscrete,
    /// The cloud-provisioning environment (an auto-scaling group of one instance type).
    Provisioning,
}

impl EnvId {
    pub const ALL: [EnvId; 3] = [EnvId::Autoscale, EnvId::AutoscaleDiscrete, EnvId::Provisioning];

    pub fn name(self) -> &'static str {
        match self {
            EnvId::Autoscale => "aware/Autoscale-v0",
            EnvId::AutoscaleDiscrete => "aware/AutoscaleDiscrete-v0",
            EnvId::Provisioning => "aware/Provisioning-v0",
        }
    }
}

impl fmt::Display for EnvId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

impl FromStr for EnvId {
    type Err = MakeError;

    fn from_str(s: &str) -> Result<Self, MakeError> {
        EnvId::ALL.into_iter().find(|id| id.name() == s).ok_or_else(|| MakeError::UnknownEnv(s.to_string()))
    }
}

/// Why an environment could not be built; the message names the field.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[non_exhaustive]
pub enum MakeError {
    #[error(
        "env_id: unknown environment {0:?} (expected aware/Autoscale-v0, aware/AutoscaleDiscrete-v0 or aware/Provisioning-v0)"
    )]
    UnknownEnv(String),
    #[error("config.{field}: {reason}")]
    Field { field: &'static str, reason: String },
    #[error("config.profile_yaml: {0}")]
    Profile(String),
}

fn field(field: &'static str, reason: impl Into<String>) -> MakeError {
    MakeError::Field { field, reason: reason.into() }
}

/// What to build. `None`/zero fields take the defaults documented on each field.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct MakeConfig {
    /// Sub-environments: simulated applications (autoscaling) or copies (provisioning) [1].
    pub num_envs: u32,
    /// Seed for the generated applications and, unless `trace_seed` is set, their load.
    pub seed: u64,
    /// Seed for load realisations only [seed].
    pub trace_seed: Option<u64>,
    /// An AWARE profile in YAML [the built-in default].
    pub profile_yaml: Option<String>,
    /// An instability scenario (autoscaling only); without a step it strikes half way through
    /// an episode.
    pub scenario: Option<Scenario>,
    /// Steps before `truncated` [100 autoscaling (AWARE's DDPG), 288 provisioning (one day)].
    pub episode_steps: Option<u32>,
    /// Length of a simulated day in seconds (autoscaling) [86400].
    pub day_seconds: Option<f64>,
    /// Days of synthetic 5-minute load (provisioning) [14].
    pub days: Option<u32>,
    /// Mean requests per 5-minute bin before the ×20 scaling (provisioning) [1500].
    pub mean_count: Option<f64>,
    /// The application population (autoscaling) [the profile's].
    pub population: Option<Population>,
    /// How CPU and memory changes reach running pods (autoscaling) [in place].
    pub vertical_update: Option<VerticalUpdate>,
}

/// An environment a session serves: any `VecEnv` that can move between threads.
pub type BoxedVecEnv = Box<dyn VecEnv + Send>;

/// Builds `id` from `config`, validating every field.
pub fn make(id: EnvId, config: &MakeConfig) -> Result<BoxedVecEnv, MakeError> {
    let num_envs = match config.num_envs {
        0 => 1,
        n if n > MAX_NUM_ENVS => return Err(field("num_envs", format!("{n} is more than {MAX_NUM_ENVS}"))),
        n => n,
    };
    if let Some(s) = config.episode_steps
        && !(1..=MAX_EPISODE_STEPS).contains(&s)
    {
        return Err(field("episode_steps", format!("{s} is not in 1..={MAX_EPISODE_STEPS}")));
    }
    match id {
        EnvId::Autoscale => autoscale(num_envs, config, ActionKind::Continuous),
        EnvId::AutoscaleDiscrete => autoscale(num_envs, config, ActionKind::Discrete),
        EnvId::Provisioning => provisioning(num_envs, config),
    }
}

fn autoscale(num_envs: u32, config: &MakeConfig, action: ActionKind) -> Result<BoxedVecEnv, MakeError> {
    if config.days.is_some() || config.mean_count.is_some() {
        return Err(field("days", "days and mean_count apply to aware/Provisioning-v0 only"));
    }
    let day_s = config.day_seconds.unwrap_or(86_400.0);
    aware_lab::workload::check_day_seconds(day_s).map_err(|reason| field("day_seconds", reason))?;
    let profile = match &config.profile_yaml {
        Some(text) => Profile::parse(text, "profile_yaml").map_err(|e| MakeError::Profile(e.to_string()))?,
        None => Profile::default(),
    };
    let episode_steps = config.episode_steps.unwrap_or(100);
    let scenario = match config.scenario {
        None => None,
        Some(s) => {
            let at = s.at_step.unwrap_or(episode_steps as u64 / 2);
            if at >= episode_steps as u64 {
                return Err(field(
                    "scenario",
                    format!("{s}: step {at} is not within an episode's {episode_steps} steps"),
                ));
            }
            Some(Scenario { kind: s.kind, at_step: Some(at) })
        }
    };
    // The construction `aware train` and `aware simulate` use, so a served environment is the
    // one trained in-process.
    let spec = WorkloadSpec {
        apps: num_envs as usize,
        seed: config.seed,
        trace_seed: config.trace_seed,
        day_seconds: day_s,
        profile: None,
        trace: None,
        scenario,
        vertical_update: config.vertical_update.unwrap_or_default(),
        steps: episode_steps as u64,
        population: config.population,
    };
    let workload = Workload::build(&spec, profile, Vec::new()).map_err(|e| field("num_envs", e.to_string()))?;
    workload.check_simulable(&spec).map_err(|e| field("profile_yaml", e.to_string()))?;
    Ok(Box::new(workload.env(action, episode_steps as u64, workload.trace_seed)))
}

fn provisioning(num_envs: u32, config: &MakeConfig) -> Result<BoxedVecEnv, MakeError> {
    if config.profile_yaml.is_some()
        || config.scenario.is_some()
        || config.day_seconds.is_some()
        || config.population.is_some()
        || config.vertical_update.is_some()
    {
        return Err(field(
            "profile_yaml",
            "profile_yaml, scenario, day_seconds, population and vertical_update apply to the autoscaling envs only",
        ));
    }
    let days = config.days.unwrap_or(14);
    if !(1..=MAX_DAYS).contains(&days) {
        return Err(field("days", format!("{days} is not in 1..={MAX_DAYS}")));
    }
    let mean_count = config.mean_count.unwrap_or(1500.0);
    aware_sim::provisioning::check_mean_count(mean_count).map_err(|reason| field("mean_count", reason))?;
    let bins = synthetic_bins(days as usize, mean_count, config.seed);
    let mut pconfig = ProvisioningConfig::sized_for(&bins);
    if let Some(s) = config.episode_steps {
        pconfig.episode_steps = s as usize;
    }
    let env = ProvisioningEnv::new(bins, pconfig).map_err(|e| field("days", e.to_string()))?;
    Ok(Box::new(Copies::new(env, num_envs as usize, config.trace_seed.unwrap_or(config.seed))))
}

/// Independent copies of one `Env` as a `VecEnv`: copy `i` resets with seed `s + i`, so the copies
/// see different episode starts and noise but the whole is reproducible from one seed.
#[derive(Debug, Clone)]
pub struct Copies<E> {
    envs: Vec<E>,
    /// The seed of the last reset; a reset without one carries on from the next seeds.
    seed: u64,
}

impl<E: Clone> Copies<E> {
    /// `n` copies of `env` (at least one); `seed` is where resets without a seed start from.
    pub fn new(env: E, n: usize, seed: u64) -> Self {
        Self { envs: vec![env; n.max(1)], seed }
    }
}

impl<E: Env> VecEnv for Copies<E> {
    fn num_envs(&self) -> usize {
        self.envs.len()
    }

    fn observation_space(&self) -> Space {
        self.envs[0].observation_space()
    }

    fn action_space(&self) -> Space {
        self.envs[0].action_space()
    }

    fn reset(&mut self, seed: Option<u64>) -> Result<Vec<(Vec<f32>, StepInfo)>, EnvError> {
        let base = match seed {
            Some(s) => s,
            // Carry on: the next seed after the last episode's copies.
            None => self.seed.wrapping_add(self.envs.len() as u64),
        };
        self.seed = base;
        self.envs.iter_mut().enumerate().map(|(i, e)| e.reset(Some(base.wrapping_add(i as u64)))).collect()
    }

    fn step(&mut self, actions: &[Action]) -> Result<VecStep, EnvError> {
        if actions.len() != self.envs.len() {
            return Err(EnvError::WrongActionCount { expected: self.envs.len(), got: actions.len() });
        }
        let steps = self.envs.iter_mut().zip(actions).map(|(e, a)| e.step(a)).collect::<Result<Vec<_>, _>>()?;
        Ok(VecStep { steps })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ids_round_trip_and_unknown_is_named() {
        for id in EnvId::ALL {
            assert_eq!(id.name().parse::<EnvId>().unwrap(), id);
        }
        let e = "CartPole-v1".parse::<EnvId>().unwrap_err().to_string();
        assert!(e.contains("CartPole-v1") && e.contains("aware/Autoscale-v0"), "{e}");
    }

    #[test]
    fn builds_each_env_with_its_spaces() {
        let cfg = MakeConfig { num_envs: 3, seed: 7, ..MakeConfig::default() };
        let env = make(EnvId::Autoscale, &cfg).unwrap();
        assert_eq!(env.num_envs(), 3);
        assert_eq!(env.action_space(), Space::Box { low: vec![-1.0; 3], high: vec![1.0; 3] });
        let env = make(EnvId::AutoscaleDiscrete, &cfg).unwrap();
        assert_eq!(env.action_space(), Space::Discrete { n: 7 });
        let env = make(EnvId::Provisioning, &MakeConfig { days: Some(2), ..cfg }).unwrap();
        assert_eq!(env.num_envs(), 3);
        assert_eq!(env.action_space(), Space::Discrete { n: 5 });
    }

    #[test]
    fn bad_fields_are_named() {
        let too_many = MakeConfig { num_envs: MAX_NUM_ENVS + 1, ..MakeConfig::default() };
        assert!(make(EnvId::Autoscale, &too_many).err().unwrap().to_string().starts_with("config.num_envs"));
        let bad_profile =
            MakeConfig { profile_yaml: Some("targets: {cpu_utilisation: 7}".into()), ..Default::default() };
        let e = make(EnvId::Autoscale, &bad_profile).err().unwrap().to_string();
        assert!(e.starts_with("config.profile_yaml") && e.contains("cpu_utilisation"), "{e}");
        let bad_day = MakeConfig { day_seconds: Some(f64::NAN), ..Default::default() };
        assert!(make(EnvId::Autoscale, &bad_day).err().unwrap().to_string().contains("day_seconds"));
        let bad_days = MakeConfig { days: Some(0), ..Default::default() };
        assert!(make(EnvId::Provisioning, &bad_days).err().unwrap().to_string().contains("config.days"));
        // A profile whose apps may scale beyond what the simulator runs: refused at make, not
        // part-way through an episode.
        let too_wide = MakeConfig { profile_yaml: Some("bounds: {max_replicas: 20000}".into()), ..Default::default() };
        let e = make(EnvId::Autoscale, &too_wide).err().unwrap().to_string();
        assert!(
            e.starts_with("config.profile_yaml") && e.contains("bounds.max_replicas") && e.contains("10000"),
            "{e}"
        );
    }

    #[test]
    fn copies_reset_reproducibly() {
        let cfg = MakeConfig { num_envs: 2, seed: 3, days: Some(2), ..MakeConfig::default() };
        let mut a = make(EnvId::Provisioning, &cfg).unwrap();
        let mut b = make(EnvId::Provisioning, &cfg).unwrap();
        assert_eq!(a.reset(Some(11)).unwrap(), b.reset(Some(11)).unwrap());
        let s = a.step(&[Action::Discrete(4), Action::Discrete(0)]).unwrap();
        let t = b.step(&[Action::Discrete(4), Action::Discrete(0)]).unwrap();
        assert_eq!(s, t);
    }
}
