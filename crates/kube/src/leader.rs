//! Leader election on a `coordination.k8s.io/v1` Lease, with client-go's semantics
//! (`k8s.io/client-go/tools/leaderelection`): the holder renews `renewTime` every retry period;
//! a candidate takes over only when it has seen the same lease record, unchanged, for longer than
//! `leaseDurationSeconds` by its own clock (so clock skew between replicas does not matter);
//! every write carries the resourceVersion it read, so two candidates cannot both win.
//! Defaults are client-go's: lease 15 s, renew deadline 10 s, retry period 2 s.

use std::time::{Duration, Instant};

use k8s_openapi::api::coordination::v1::{Lease, LeaseSpec};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{MicroTime, ObjectMeta};
use kube::Api;
use kube::api::PostParams;

#[derive(Debug, Clone)]
pub struct LeaderConfig {
    pub lease_name: String,
    pub identity: String,
    pub lease_duration: Duration,
    pub renew_deadline: Duration,
    pub retry_period: Duration,
}

impl LeaderConfig {
    pub fn new(lease_name: impl Into<String>, identity: impl Into<String>) -> Self {
        Self {
            lease_name: lease_name.into(),
            identity: identity.into(),
            lease_duration: Duration::from_secs(15),
            renew_deadline: Duration::from_secs(10),
            retry_period: Duration::from_secs(2),
        }
    }
}

pub struct LeaderElector {
    api: Api<Lease>,
    config: LeaderConfig,
    /// The last record seen (resourceVersion) and when, by our clock.
    observed: Option<(String, Instant)>,
}

fn now() -> MicroTime {
    MicroTime(k8s_openapi::jiff::Timestamp::now())
}

impl LeaderElector {
    pub fn new(api: Api<Lease>, config: LeaderConfig) -> Self {
        Self { api, config, observed: None }
    }

    pub fn config(&self) -> &LeaderConfig {
        &self.config
    }

    /// One attempt: `Ok(true)` when we hold the lease afterwards. Conflicts (someone else wrote
    /// first) are `Ok(false)`; other API errors are returned.
    pub async fn try_acquire_or_renew(&mut self) -> Result<bool, kube::Error> {
        let name = self.config.lease_name.clone();
        let duration_s = self.config.lease_duration.as_secs().max(1) as i32;
        let existing = match self.api.get_opt(&name).await? {
            Some(lease) => lease,
            None => {
                let lease = Lease {
                    metadata: ObjectMeta { name: Some(name.clone()), ..Default::default() },
                    spec: Some(LeaseSpec {
                        holder_identity: Some(self.config.identity.clone()),
                        lease_duration_seconds: Some(duration_s),
                        acquire_time: Some(now()),
                        renew_time: Some(now()),
                        lease_transitions: Some(0),
                        ..Default::default()
                    }),
                };
                return match self.api.create(&PostParams::default(), &lease).await {
                    Ok(_) => Ok(true),
                    Err(kube::Error::Api(s)) if s.code == 409 => Ok(false),
                    Err(e) => Err(e),
                };
            }
        };
        let version = existing.metadata.resource_version.clone().unwrap_or_default();
        let spec = existing.spec.clone().unwrap_or_default();
        let ours = spec.holder_identity.as_deref() == Some(self.config.identity.as_str());
        let seen_at = match &self.observed {
            Some((v, at)) if *v == version => *at,
            _ => {
                let at = Instant::now();
                self.observed = Some((version.clone(), at));
                at
            }
        };
        let held_by_someone = spec.holder_identity.as_deref().is_some_and(|h| !h.is_empty());
        let lease_duration = spec
            .lease_duration_seconds
            .map(|s| Duration::from_secs(s.max(0) as u64))
            .unwrap_or(self.config.lease_duration);
        if !ours && held_by_someone && seen_at.elapsed() <= lease_duration {
            return Ok(false);
        }
        let mut next = existing.clone();
        let mut new_spec = spec.clone();
        if !ours {
            new_spec.holder_identity = Some(self.config.identity.clone());
            new_spec.acquire_time = Some(now());
            new_spec.lease_transitions = Some(spec.lease_transitions.unwrap_or(0) + 1);
        }
        new_spec.lease_duration_seconds = Some(duration_s);
        new_spec.renew_time = Some(now());
        next.spec = Some(new_spec);
        match self.api.replace(&name, &PostParams::default(), &next).await {
            Ok(written) => {
                self.observed = Some((written.metadata.resource_version.unwrap_or_default(), Instant::now()));
                Ok(true)
            }
            Err(kube::Error::Api(s)) if s.code == 409 => Ok(false),
            Err(e) => Err(e),
        }
    }

    /// Blocks until this candidate holds the lease.
    pub async fn acquire(&mut self) {
        loop {
            match self.try_acquire_or_renew().await {
                Ok(true) => return,
                Ok(false) => {}
                Err(e) => tracing::warn!("leader election: {e}"),
            }
            tokio::time::sleep(self.config.retry_period).await;
        }
    }

    /// Renews every retry period; returns when the lease could not be renewed within the renew
    /// deadline (leadership lost: the caller must stop acting).
    pub async fn hold(&mut self) {
        let mut last_renewed = Instant::now();
        loop {
            tokio::time::sleep(self.config.retry_period).await;
            match self.try_acquire_or_renew().await {
                Ok(true) => last_renewed = Instant::now(),
                Ok(false) => return,
                Err(e) => tracing::warn!("leader election: renewing: {e}"),
            }
            if last_renewed.elapsed() > self.config.renew_deadline {
                return;
            }
        }
    }
}
