//! What the tests driving a decider on the simulator's observations share.

use aware_core::{Cluster, Observation};
use aware_sim::{SimCluster, SimConfig};

/// One generated app (seed 11) on the simulator.
pub fn cluster() -> SimCluster {
    let apps = aware_sim::generate_apps(1, 11, 86_400.0);
    SimCluster::new(apps, Vec::new(), SimConfig::default(), 11)
}

/// The app's observation now, and the cluster one interval on.
pub fn observe(c: &mut SimCluster) -> Observation {
    let obs = c.observe(0).expect("observation");
    c.advance().expect("advance");
    obs
}
