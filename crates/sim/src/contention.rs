//! CPU contention on an over-committed node: the one model the simulator uses wherever
//! co-located containers compete for a node's cores (this simulator's pods, a co-located
//! tenant's interference, and later multi-tenant clusters).
//!
//! Linux CFS gives runnable containers CPU in proportion to their `cpu.shares` (from their
//! requests) and caps each at its quota (its limit). When the containers of a node together
//! want more cores than the node has, each is throttled; with shares proportional to requests
//! and every container running at its limit (the overloaded case), every container's share
//! shrinks by the same factor, capacity over demand. That factor is what this module computes;
//! containers that want less than their fair share are not slowed in reality, so applying the
//! same factor to every container is a slight over-statement of contention for the light ones.

/// Fraction of what it asks for that every container on a node gets, in (0, 1]: 1 when the
/// node's cores cover the demand, otherwise capacity over demand.
pub fn cpu_share(capacity_cores: f64, demand_cores: f64) -> f64 {
    if demand_cores > capacity_cores && demand_cores > 0.0 { (capacity_cores / demand_cores).max(0.0) } else { 1.0 }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn share_is_one_until_the_node_is_over_committed() {
        assert_eq!(cpu_share(16.0, 8.0), 1.0);
        assert_eq!(cpu_share(16.0, 16.0), 1.0);
        assert!((cpu_share(16.0, 32.0) - 0.5).abs() < 1e-12);
        assert_eq!(cpu_share(16.0, 0.0), 1.0);
    }
}
