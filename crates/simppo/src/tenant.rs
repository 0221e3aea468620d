//! The multi-tenant environment: a roster of applications whose pods share one finite set of
//! nodes in one simulated cluster (`aware_sim::SimCluster`, with its one contention model:
//! CPU shares on over-committed nodes, OOM kills, pending pods when no node has room).
//!
//! Membership: every application of the roster is in the cluster from the start, so traffic
//! and measurement noise of an application are the same whoever else is present. An absent
//! application runs no pods — it starts an episode at zero replicas (its reference allocation
//! otherwise) and holds no node — and no agent acts for it or counts it. Added during an
//! episode, it is scaled up to its reference allocation (its pods start up as any new pod
//! does); removed, its Deployment is scaled to zero (its pods drain and release their nodes).

use aware_core::{Recommendation, Resources};
use aware_env::{ActionKind, ClusterVecEnv};
use aware_lab::workload::Workload;
use aware_sim::{CONTAINER, MAX_NODES, SimCluster};

use crate::SimppoError;
use crate::global::Capacity;

/// The largest `headroom` a cluster is sized with (the bound of the profile's
/// `simulation.node_headroom`).
pub const MAX_HEADROOM: f64 = 100.0;

/// A roster of applications on a cluster of fixed size.
#[derive(Debug, Clone)]
pub struct Tenancy {
    /// Every application that may ever be present, with the traffic and profile.
    pub workload: Workload,
    /// Nodes of the shared cluster (each of the workload's node size).
    pub nodes: usize,
}

fn reference_cores(w: &Workload, app: usize) -> f64 {
    let r = w.apps[app].reference;
    r.replicas as f64 * r.cpu_millicores as f64 / 1000.0
}

fn reference_memory(w: &Workload, app: usize) -> f64 {
    let r = w.apps[app].reference;
    r.replicas as f64 * r.memory_bytes as f64
}

impl Tenancy {
    /// A cluster sized `headroom` × the reference reservation of the `sized_for` applications
    /// (the simulator's own sizing rule, applied to the applications present at the start).
    /// The reservation is what the scheduler reserves: with the workload's
    /// `sim.cpu_request_ratio` below 1 (Burstable pods) the CPU requests, that ratio × the
    /// reference CPU limits, so a node's pods may together be allowed more cores than it has.
    /// `headroom` is in (0, [`MAX_HEADROOM`]], and the cluster at most [`MAX_NODES`] nodes.
    pub fn new(workload: Workload, sized_for: &[usize], headroom: f64) -> Result<Self, SimppoError> {
        if !(headroom.is_finite() && headroom > 0.0) {
            return Err(SimppoError::input("headroom", format!("{headroom} is not a positive number")));
        }
        if headroom > MAX_HEADROOM {
            return Err(SimppoError::input("headroom", format!("{headroom} is above {MAX_HEADROOM}")));
        }
        if let Some(&bad) = sized_for.iter().find(|&&a| a >= workload.apps.len()) {
            return Err(SimppoError::input(
                "apps",
                format!("application {bad} is not in the roster of {}", workload.apps.len()),
            ));
        }
        let ratio = workload.sim.cpu_request_ratio;
        if !(ratio > 0.0 && ratio <= 1.0) {
            return Err(SimppoError::input("request_ratio", format!("{ratio} is not in (0, 1]")));
        }
        let cores: f64 = sized_for.iter().map(|&a| reference_cores(&workload, a)).sum::<f64>() * ratio;
        let memory: f64 = sized_for.iter().map(|&a| reference_memory(&workload, a)).sum();
        let by_cpu = (headroom * cores / workload.sim.node_cores).ceil();
        let by_memory = (headroom * memory / workload.sim.node_memory_bytes as f64).ceil();
        let needed = by_cpu.max(by_memory);
        if needed.is_nan() || needed > MAX_NODES as f64 {
            return Err(SimppoError::input(
                "headroom",
                format!(
                    "{headroom} × the reference reservation needs {needed:e} nodes; the simulator holds at most \
                     {MAX_NODES}"
                ),
            ));
        }
        Ok(Self { nodes: (needed as usize).max(1), workload })
    }

    pub fn roster(&self) -> usize {
        self.workload.apps.len()
    }

    /// The shared cluster's allocatable resources.
    pub fn capacity(&self) -> Capacity {
        Capacity {
            cores: self.nodes as f64 * self.workload.sim.node_cores,
            memory_bytes: self.nodes as f64 * self.workload.sim.node_memory_bytes as f64,
        }
    }

    /// The shared cluster with the `present` applications running (the others at zero
    /// replicas), as a vectorised environment over the whole roster (one sub-environment per
    /// application; absent ones are held), discrete actions, episodes of `episode_steps`.
    pub fn env(
        &self,
        present: &[bool],
        episode_steps: u64,
        trace_seed: u64,
    ) -> Result<ClusterVecEnv<SimCluster>, SimppoError> {
        self.env_on(
            present,
            self.nodes,
            self.workload.sim.node_cores,
            self.workload.sim.node_memory_bytes as f64,
            episode_steps,
            trace_seed,
        )
    }

    /// Application `app` alone on its share of the shared cluster: one node holding the
    /// fraction of the cluster's cores and memory that `app`'s reference reservation is of the
    /// `shared_by` applications' (every other application absent, so traffic is the same as
    /// in the shared cluster).
    pub fn alone(
        &self,
        app: usize,
        shared_by: &[usize],
        episode_steps: u64,
        trace_seed: u64,
    ) -> Result<ClusterVecEnv<SimCluster>, SimppoError> {
        if app >= self.roster() {
            return Err(SimppoError::input("app", format!("{app} is not in the roster of {}", self.roster())));
        }
        let cores: f64 = shared_by.iter().map(|&a| reference_cores(&self.workload, a)).sum::<f64>().max(1e-9);
        let memory: f64 = shared_by.iter().map(|&a| reference_memory(&self.workload, a)).sum::<f64>().max(1.0);
        let cap = self.capacity();
        let share_cores = cap.cores * reference_cores(&self.workload, app) / cores;
        let share_memory = cap.memory_bytes * reference_memory(&self.workload, app) / memory;
        let mut present = vec![false; self.roster()];
        present[app] = true;
        // Whole millicores and bytes, as a node reports them.
        self.env_on(
            &present,
            1,
            (share_cores * 1000.0).floor() / 1000.0,
            share_memory.floor(),
            episode_steps,
            trace_seed,
        )
    }

    fn env_on(
        &self,
        present: &[bool],
        nodes: usize,
        node_cores: f64,
        node_memory: f64,
        episode_steps: u64,
        trace_seed: u64,
    ) -> Result<ClusterVecEnv<SimCluster>, SimppoError> {
        if present.len() != self.roster() {
            return Err(SimppoError::input(
                "present",
                format!("{} flags for a roster of {}", present.len(), self.roster()),
            ));
        }
        let mut w = self.workload.clone();
        for (app, here) in w.apps.iter_mut().zip(present) {
            if !here {
                app.reference.replicas = 0;
            }
        }
        w.sim.nodes = Some(nodes);
        w.sim.node_cores = node_cores;
        w.sim.node_memory_bytes = node_memory as u64;
        Ok(w.env(ActionKind::Discrete, episode_steps, trace_seed))
    }

    /// CPU request over CPU limit of every allocation in this cluster (the workload's
    /// `sim.cpu_request_ratio`): 1 Guaranteed, below 1 Burstable.
    pub fn request_ratio(&self) -> f64 {
        self.workload.sim.cpu_request_ratio
    }

    /// What adding `app` during an episode applies: its reference allocation (requests at
    /// [`Self::request_ratio`] of the limits, as the pods it starts with).
    pub fn arrival(&self, app: usize) -> Recommendation {
        let r = self.workload.apps[app].reference;
        Recommendation {
            replicas: r.replicas,
            containers: vec![aware_core::ContainerResources::burstable(
                CONTAINER,
                Resources::new(r.cpu_millicores, r.memory_bytes),
                self.request_ratio(),
            )],
        }
    }

    /// What removing an application during an episode applies: zero replicas.
    pub fn departure() -> Recommendation {
        Recommendation { replicas: 0, containers: Vec::new() }
    }
}
