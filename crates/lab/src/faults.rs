//! Faults injected between a driver and the arena it runs against, for the fault tests of
//! every driver (the lifecycle manager, the meta-learner's driver, SIMPPO's team): what a
//! lagging or broken metrics pipeline does to the states and observations a driver sees.

use std::ops::Range;

use aware_core::{Observation, StepInfo, VecStep};
use aware_env::Control;
use aware_sim::AppStepStats;

use crate::LabError;
use crate::rollout::{Arena, EpisodeStart};

/// An arena whose outcomes and observations carry injected faults; nothing else changes.
pub struct Faulty<A> {
    pub inner: A,
    /// Every this many intervals every app's outcome is marked as carrying its utilisation from
    /// an earlier interval (`StepInfo::usage_carried`), as a metrics pipeline that lags pod
    /// start-up marks it; intervals are counted from the arena's creation.
    pub carried_every: Option<u64>,
    /// Observations of this app carry a NaN arrival rate in these intervals (counted as
    /// above: the observation after the interval's step).
    pub nan_arrival: Option<(usize, Range<u64>)>,
    steps: u64,
}

impl<A: Arena> Faulty<A> {
    /// `inner` without faults yet.
    pub fn new(inner: A) -> Self {
        Self { inner, carried_every: None, nan_arrival: None, steps: 0 }
    }
}

impl<A: Arena> Arena for Faulty<A> {
    fn num_apps(&self) -> usize {
        self.inner.num_apps()
    }

    fn interval_s(&self) -> f64 {
        self.inner.interval_s()
    }

    fn reset(&mut self, seed: u64) -> Result<Vec<(Vec<f32>, StepInfo)>, LabError> {
        self.inner.reset(seed)
    }

    fn step(&mut self, controls: &[Control]) -> Result<VecStep, LabError> {
        let mut out = self.inner.step(controls)?;
        self.steps += 1;
        if self.carried_every.is_some_and(|n| n > 0 && self.steps.is_multiple_of(n)) {
            out.steps.iter_mut().for_each(|s| s.info.usage_carried = true);
        }
        Ok(out)
    }

    fn observe(&self, app: usize) -> Option<Result<Observation, LabError>> {
        let obs = self.inner.observe(app)?;
        let nan = self.nan_arrival.as_ref().is_some_and(|(a, window)| *a == app && window.contains(&self.steps));
        Some(obs.map(|mut o| {
            if nan {
                o.arrival_rate = f64::NAN;
            }
            o
        }))
    }

    fn truth(&self, app: usize) -> Option<AppStepStats> {
        self.inner.truth(app)
    }

    fn slo_p99_ms(&self, app: usize) -> Option<f64> {
        self.inner.slo_p99_ms(app)
    }

    fn episode_start(&self) -> EpisodeStart {
        self.inner.episode_start()
    }
}

#[cfg(test)]
mod tests {
    use aware_env::ActionKind;

    use super::*;
    use crate::workload::{Workload, WorkloadSpec};

    #[test]
    fn faults_land_where_they_are_asked_for_and_nowhere_else() {
        let w = Workload::load(&WorkloadSpec { apps: 2, seed: 1, steps: 20, ..WorkloadSpec::default() }).unwrap();
        let mut arena = Faulty::new(w.env(ActionKind::Continuous, 20, 1));
        arena.carried_every = Some(3);
        arena.nan_arrival = Some((1, 2..4));
        arena.reset(1).unwrap();
        let hold = vec![Control::Hold; 2];
        for t in 1..=6u64 {
            let out = arena.step(&hold).unwrap();
            assert!(out.steps.iter().all(|s| s.info.usage_carried == (t % 3 == 0)), "interval {t}");
            assert!(arena.observe(0).unwrap().unwrap().arrival_rate.is_finite());
            let arrival = arena.observe(1).unwrap().unwrap().arrival_rate;
            assert_eq!(arrival.is_nan(), (2..4).contains(&t), "interval {t}: {arrival}");
        }
    }
}
