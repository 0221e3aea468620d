//! The laboratory every higher layer runs in: workloads (apps + traces + profile), the policy
//! registry, the agent factory, the one rollout loop and the one scoring path.
