//! What an agent reports to the coordinator each interval, and the auxiliary global states
//! built from the reports: SIMPPO's mean-field summary of the *other* agents, and the
//! SIMPPO-All ablation (the mean of every agent's local state).

use aware_core::StepInfo;

/// Width of the mean-field auxiliary global state g_i.
pub const GLOBAL_DIM: usize = 10;

/// The name of each component of g_i, in order.
pub const GLOBAL_FEATURES: [&str; GLOBAL_DIM] = [
    "others_cpu_limits",
    "others_memory_limits",
    "others_vertical_actions",
    "others_horizontal_actions",
    "others_mean_slo_preservation",
    "others_mean_utilisation",
    "others_std_cpu_limits",
    "others_std_memory_limits",
    "others_std_slo_preservation",
    "others_std_utilisation",
];

/// The cluster's allocatable resources, which the aggregated limits are expressed against.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Capacity {
    pub cores: f64,
    pub memory_bytes: f64,
}

/// One agent's report for one interval (its heartbeat's payload).
#[derive(Debug, Clone, Copy, PartialEq, Default)]
pub struct AgentReport {
    /// CPU limits of all its replicas, as a fraction of the cluster's cores.
    pub cpu_limits: f64,
    /// Memory limits of all its replicas, as a fraction of the cluster's memory.
    pub memory_limits: f64,
    /// Its last vertical action: the sum of the CPU and memory change directions, in [−2, 2].
    pub vertical_action: f64,
    /// Its last horizontal action: the replica change direction, in [−1, 1].
    pub horizontal_action: f64,
    /// SLO preservation in [0, 1].
    pub slo_preservation: f64,
    /// CPU utilisation (usage / request), clipped into [0, 2].
    pub utilisation: f64,
}

fn sign(a: f64, b: f64) -> f64 {
    if a > b {
        1.0
    } else if a < b {
        -1.0
    } else {
        0.0
    }
}

impl AgentReport {
    /// The report of an interval that ended with `after`, the allocation before it being
    /// `before` (`None` at an episode's start: no action yet).
    pub fn from_infos(before: Option<&StepInfo>, after: &StepInfo, capacity: Capacity) -> Self {
        let cores = after.replicas as f64 * after.cpu_limit_millicores as f64 / 1000.0;
        let memory = after.replicas as f64 * after.memory_limit_bytes as f64;
        let (vertical, horizontal) = match before {
            None => (0.0, 0.0),
            Some(b) => (
                sign(after.cpu_limit_millicores as f64, b.cpu_limit_millicores as f64)
                    + sign(after.memory_limit_bytes as f64, b.memory_limit_bytes as f64),
                sign(after.replicas as f64, b.replicas as f64),
            ),
        };
        let finite = |v: f64| if v.is_finite() { v } else { 0.0 };
        AgentReport {
            cpu_limits: finite(cores / capacity.cores.max(1e-9)),
            memory_limits: finite(memory / capacity.memory_bytes.max(1.0)),
            vertical_action: vertical,
            horizontal_action: horizontal,
            slo_preservation: finite(after.slo_preservation).clamp(0.0, 1.0),
            utilisation: finite(after.cpu_utilisation).clamp(0.0, 2.0),
        }
    }

    fn fields(&self) -> [f64; 6] {
        [
            self.cpu_limits,
            self.memory_limits,
            self.vertical_action,
            self.horizontal_action,
            self.slo_preservation,
            self.utilisation,
        ]
    }
}

/// Sums and sums of squares of every report's fields, so that each agent's g_i (everyone but
/// itself) is one subtraction: O(N) for all agents rather than O(N²).
#[derive(Debug, Clone, Copy, Default)]
pub struct Totals {
    n: usize,
    sum: [f64; 6],
    sum_sq: [f64; 6],
}

impl Totals {
    /// The totals over `reports`.
    pub fn of<'a>(reports: impl IntoIterator<Item = &'a AgentReport>) -> Self {
        let mut t = Totals::default();
        for r in reports {
            t.n += 1;
            for (k, v) in r.fields().into_iter().enumerate() {
                t.sum[k] += v;
                t.sum_sq[k] += v * v;
            }
        }
        t
    }

    /// g_i for the agent that reported `own` (which must be among the totals): over every other
    /// agent, the summed CPU and memory limits (fractions of the cluster), the mean vertical and
    /// horizontal actions, the mean SLO preservation and utilisation, and the standard
    /// deviations of the limits, SLO preservation and utilisation. All zeros when it is alone.
    pub fn excluding(&self, own: &AgentReport) -> [f32; GLOBAL_DIM] {
        let others = self.n.saturating_sub(1);
        if others == 0 {
            return [0.0; GLOBAL_DIM];
        }
        let m = others as f64;
        let f = own.fields();
        let sum: Vec<f64> = (0..6).map(|k| self.sum[k] - f[k]).collect();
        let sq: Vec<f64> = (0..6).map(|k| self.sum_sq[k] - f[k] * f[k]).collect();
        let std = |k: usize| ((sq[k] / m - (sum[k] / m).powi(2)).max(0.0)).sqrt();
        [sum[0], sum[1], sum[2] / m, sum[3] / m, sum[4] / m, sum[5] / m, std(0), std(1), std(4), std(5)]
            .map(|v| v as f32)
    }
}

/// The SIMPPO-All auxiliary state: the mean of every agent's local state (its own included).
pub fn mean_state(states: &[&[f32]]) -> Vec<f32> {
    let Some(first) = states.first() else { return Vec::new() };
    let mut mean = vec![0.0f32; first.len()];
    for s in states {
        for (m, v) in mean.iter_mut().zip(s.iter()) {
            *m += v;
        }
    }
    let n = states.len() as f32;
    mean.iter_mut().for_each(|m| *m /= n);
    mean
}

#[cfg(test)]
mod tests {
    use super::*;

    fn report(cpu: f64, mem: f64, v: f64, h: f64, sp: f64, u: f64) -> AgentReport {
        AgentReport {
            cpu_limits: cpu,
            memory_limits: mem,
            vertical_action: v,
            horizontal_action: h,
            slo_preservation: sp,
            utilisation: u,
        }
    }

    /// Three agents; agent 0's g excludes itself and matches a hand computation over 1 and 2.
    #[test]
    fn the_global_state_summarises_the_others_only() {
        let reports = [
            report(0.9, 0.9, 2.0, 1.0, 0.1, 1.9),
            report(0.1, 0.2, 1.0, -1.0, 1.0, 0.4),
            report(0.3, 0.4, -1.0, 0.0, 0.8, 0.6),
        ];
        let t = Totals::of(&reports);
        let g = t.excluding(&reports[0]);
        // Others: cpu 0.1 + 0.3 = 0.4; memory 0.6; vertical (1 − 1)/2 = 0; horizontal −0.5;
        // SP mean 0.9; utilisation mean 0.5; std cpu 0.1, memory 0.1, SP 0.1, utilisation 0.1.
        let want = [0.4, 0.6, 0.0, -0.5, 0.9, 0.5, 0.1, 0.1, 0.1, 0.1];
        for (k, (a, b)) in g.iter().zip(want).enumerate() {
            assert!((*a as f64 - b).abs() < 1e-6, "{}: {a} vs {b}", GLOBAL_FEATURES[k]);
        }
        // Agent 1's view holds agent 0's outlier limits.
        assert!((t.excluding(&reports[1])[0] - 1.2).abs() < 1e-6);
        assert_eq!(Totals::of(&reports[..1]).excluding(&reports[0]), [0.0; GLOBAL_DIM], "alone");
    }

    #[test]
    fn reports_read_allocation_and_action_from_the_infos() {
        let cap = Capacity { cores: 16.0, memory_bytes: 64.0 * (1u64 << 30) as f64 };
        let before =
            StepInfo { replicas: 2, cpu_limit_millicores: 1000, memory_limit_bytes: 1 << 30, ..Default::default() };
        let after = StepInfo {
            replicas: 3,
            cpu_limit_millicores: 500,
            memory_limit_bytes: 1 << 30,
            slo_preservation: 0.5,
            cpu_utilisation: 3.0,
            ..Default::default()
        };
        let r = AgentReport::from_infos(Some(&before), &after, cap);
        assert!((r.cpu_limits - 1.5 / 16.0).abs() < 1e-12);
        assert!((r.memory_limits - 3.0 / 64.0).abs() < 1e-12);
        assert_eq!((r.vertical_action, r.horizontal_action), (-1.0, 1.0));
        assert_eq!((r.slo_preservation, r.utilisation), (0.5, 2.0));
        assert_eq!(AgentReport::from_infos(None, &after, cap).horizontal_action, 0.0);
    }

    #[test]
    fn simppo_all_averages_every_state() {
        let a = [1.0, 0.0];
        let b = [0.0, 1.0];
        assert_eq!(mean_state(&[&a, &b, &b]), vec![1.0 / 3.0, 2.0 / 3.0]);
    }
}
