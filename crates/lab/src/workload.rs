//! A workload: the applications, their traffic (synthetic or replayed traces), the simulator's
//! settings and the operator's profile — everything a run needs before its first interval, loaded
//! and validated in one place.

use std::path::PathBuf;
use std::sync::Arc;

use aware_core::{AppId, Profile};
use aware_core::{Bounds, Population};
use aware_env::ActionKind;
use aware_env::{AppSlo, ClusterVecEnv, EnvConfig};
use aware_sim::{
    AppSpec, CONTAINER, MAX_SIMULATED_REPLICAS, Scenario, SimCluster, SimConfig, Trace, VerticalUpdate,
    generate_population, load_traces, size_for_traces,
};

use crate::LabError;

/// What to load. Every field has the command line's default.
#[derive(Debug, Clone, PartialEq)]
pub struct WorkloadSpec {
    /// Number of applications.
    pub apps: usize,
    /// Seed for applications, traffic and measurement noise.
    pub seed: u64,
    /// Seed for traffic and measurement noise only (default: `seed`): the same apps under other
    /// traffic, which is how held-out traces are drawn.
    pub trace_seed: Option<u64>,
    /// Length of a simulated day in seconds (86,400 = real time).
    pub day_seconds: f64,
    /// The operator's profile (YAML); the default profile when absent.
    pub profile: Option<PathBuf>,
    /// Traffic replayed from a trace file instead of the synthetic load.
    pub trace: Option<PathBuf>,
    /// An instability scenario; its step defaults to half of `steps`.
    pub scenario: Option<Scenario>,
    pub vertical_update: VerticalUpdate,
    /// Control intervals the run will last (to place and check the scenario).
    pub steps: u64,
    /// The application population; the profile's `population` when absent.
    pub population: Option<Population>,
}

impl Default for WorkloadSpec {
    fn default() -> Self {
        Self {
            apps: 10,
            seed: 1,
            trace_seed: None,
            day_seconds: 86_400.0,
            profile: None,
            trace: None,
            scenario: None,
            vertical_update: VerticalUpdate::InPlace,
            steps: 240,
            population: None,
        }
    }
}

/// Everything loaded and validated before any simulation starts.
#[derive(Debug, Clone)]
pub struct Workload {
    pub apps: Vec<AppSpec>,
    pub traces: Vec<Arc<Trace>>,
    pub sim: SimConfig,
    pub profile: Profile,
    pub seed: u64,
    /// The trace seed a run starts from.
    pub trace_seed: u64,
}

/// Shortest simulated day, in seconds: an hour. The daily cycle must span many control
/// intervals, and the arrivals of a shorter one (a few seconds) overflowed into NaN.
pub const MIN_DAY_SECONDS: f64 = 3_600.0;

/// Whether `day_s` is a simulated day's length the simulator takes (at least
/// [`MIN_DAY_SECONDS`], finite); the reason when not.
pub fn check_day_seconds(day_s: f64) -> Result<(), String> {
    match day_s.is_finite() && (MIN_DAY_SECONDS..=MAX_DAY_SECONDS).contains(&day_s) {
        true => Ok(()),
        false => Err(format!("{day_s} is not a day length of {MIN_DAY_SECONDS} to {MAX_DAY_SECONDS} seconds")),
    }
}

/// The longest simulated day: a year (a daily cycle slower than that is no cycle a run sees).
pub const MAX_DAY_SECONDS: f64 = 365.0 * 86_400.0;

fn check(spec: &WorkloadSpec) -> Result<(), LabError> {
    if spec.apps == 0 {
        return Err(LabError::input("--apps", "must be at least 1"));
    }
    check_day_seconds(spec.day_seconds).map_err(|reason| LabError::input("--day-seconds", reason))
}

impl Workload {
    /// The store a run records into: `store` (`--store URL`) when given, else with `record`
    /// (`--record`) the profile's `store`, else none.
    pub fn recording_store<'a>(&'a self, store: Option<&'a str>, record: bool) -> Option<&'a str> {
        store.or(record.then_some(self.profile.store.as_str()))
    }

    pub fn load(spec: &WorkloadSpec) -> Result<Workload, LabError> {
        check(spec)?;
        let profile = match &spec.profile {
            Some(p) => Profile::load(p)?,
            None => Profile::default(),
        };
        let traces = match &spec.trace {
            Some(p) => load_traces(p)?,
            None => Vec::new(),
        };
        let workload = Self::build(spec, profile, traces)?;
        workload.check_simulable(spec)?;
        Ok(workload)
    }

    /// Refuses, before the first interval, an app whose replicas a policy could drive beyond
    /// what the simulator runs ([`MAX_SIMULATED_REPLICAS`]): its effective `max_replicas` (its
    /// own, sized at four times its peak's, or the profile's `bounds.max_replicas`) is above
    /// it. The run would otherwise fail part-way, naming only the app. The error names what
    /// set the bound (the trace file and where its peak is, or the profile's key) and how to
    /// run anyway: the profile's `bounds.max_replicas` at most the simulator's. Then refuses a
    /// cluster of more nodes than the simulator holds ([`aware_sim::MAX_NODES`]).
    pub fn check_simulable(&self, spec: &WorkloadSpec) -> Result<(), LabError> {
        for i in 0..self.apps.len() {
            let max = self.app_profile(i).bounds.max_replicas;
            if max <= MAX_SIMULATED_REPLICAS {
                continue;
            }
            let app = &self.apps[i].name;
            let why = format!(
                "app {app} may scale to {max} replicas, more than the simulator's {MAX_SIMULATED_REPLICAS}; \
                 set the profile's bounds.max_replicas to at most {MAX_SIMULATED_REPLICAS}"
            );
            if let Some(override_max) = self.profile.bound_overrides.max_replicas {
                let file = spec.profile.as_ref().map_or("the profile".to_string(), |p| p.display().to_string());
                return Err(LabError::input(format!("{file}: bounds.max_replicas"), format!("{override_max}: {why}")));
            }
            let (Some(path), Some(trace)) = (&spec.trace, self.traces.get(i % self.traces.len().max(1))) else {
                return Err(LabError::input("apps", why));
            };
            let peak = trace.peak_rps();
            let at = trace.rates.iter().position(|&r| r == peak).unwrap_or(0);
            return Err(LabError::input(
                format!("--trace {}", path.display()),
                format!(
                    "series {:?} peaks at {peak:e} requests/s (interval {}, {} s into the series): {why}",
                    trace.name,
                    at + 1,
                    at as f64 * trace.interval_s,
                ),
            ));
        }
        // A cluster the simulator cannot hold is refused here, not when it is built.
        self.sim.node_count(&self.apps).map_err(|e| LabError::input("simulation", e.to_string()))?;
        Ok(())
    }

    /// As [`Workload::load`], with the profile and the replayed traces given rather than read
    /// from `spec.profile` and `spec.trace` (which are ignored): how a workload arrives over the
    /// network. The one construction every environment in `aware` goes through, in-process or
    /// served.
    pub fn build(spec: &WorkloadSpec, profile: Profile, traces: Vec<Trace>) -> Result<Workload, LabError> {
        check(spec)?;
        let traces: Vec<Arc<Trace>> = traces.into_iter().map(Arc::new).collect();
        let scenario = match spec.scenario {
            None => None,
            Some(s) => {
                let at = s.at_step.unwrap_or(spec.steps / 2);
                if at >= spec.steps {
                    return Err(LabError::input(
                        "--scenario",
                        format!("{s}: step {at} is not within the run's {} steps", spec.steps),
                    ));
                }
                Some(Scenario { kind: s.kind, at_step: Some(at) })
            }
        };
        let sim = SimConfig {
            scenario,
            slo_p99_ms: profile.slo.latency_p99_ms,
            vertical_update: spec.vertical_update,
            ..SimConfig::default().with_profile(&profile.simulation)
        };
        // Apps are sized at the profile's CPU target and, when replaying traces, from their trace.
        let target = profile.targets.cpu_utilisation;
        let mut apps =
            generate_population(spec.apps, spec.seed, spec.day_seconds, spec.population.unwrap_or(profile.population));
        for app in &mut apps {
            app.size(target);
        }
        size_for_traces(&mut apps, &traces, target);
        Ok(Workload { apps, traces, sim, profile, seed: spec.seed, trace_seed: spec.trace_seed.unwrap_or(spec.seed) })
    }

    /// A fresh simulated cluster running every app, its traffic drawn from `trace_seed`.
    pub fn cluster(&self, trace_seed: u64) -> SimCluster {
        SimCluster::new(self.apps.clone(), self.traces.clone(), self.sim.clone(), trace_seed)
    }

    /// The profile that governs app `app`: the workload's profile with the app's own bounds
    /// (the profile's `bounds:` keys override them). The one place per-app settings resolve.
    pub fn app_profile(&self, app: AppId) -> Profile {
        self.profile.for_app(&self.apps[app].bounds)
    }

    /// Every app's CPU utilisation target (what `utilisation_deficit` is measured against).
    pub fn cpu_targets(&self) -> Vec<f64> {
        (0..self.apps.len()).map(|i| self.app_profile(i).targets.cpu_utilisation).collect()
    }

    /// The vectorised environment over every app (one sub-environment per app) in `action`
    /// space, truncating episodes after `episode_steps`.
    pub fn env(&self, action: ActionKind, episode_steps: u64, trace_seed: u64) -> ClusterVecEnv<SimCluster> {
        let cluster = self.cluster(trace_seed);
        let members: Vec<(AppId, AppSlo, Bounds)> = (0..self.apps.len())
            .map(|i| {
                let slo = AppSlo { latency_p99_ms: Some(cluster.slo_p99_ms(i)), throughput_rps: None };
                (i, slo, self.profile.bounds_for(&self.apps[i].bounds))
            })
            .collect();
        let config = EnvConfig {
            profile: self.profile.clone(),
            action,
            episode_steps: episode_steps.min(u32::MAX as u64) as u32,
            container: CONTAINER.into(),
        };
        let ratio = self.sim.cpu_request_ratio;
        ClusterVecEnv::with_bounds(cluster, &members, config).with_cpu_request_ratio(ratio)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn day_lengths_from_an_hour_to_a_year_are_taken() {
        for ok in [MIN_DAY_SECONDS, 86_400.0, MAX_DAY_SECONDS] {
            assert!(check_day_seconds(ok).is_ok(), "{ok}");
        }
        for bad in [MIN_DAY_SECONDS - 1.0, MAX_DAY_SECONDS + 1.0, 1e300, f64::INFINITY, f64::NAN, -86_400.0] {
            let e = check_day_seconds(bad).unwrap_err();
            assert!(e.contains("3600") && e.contains("31536000"), "{bad}: {e}");
        }
    }
}
