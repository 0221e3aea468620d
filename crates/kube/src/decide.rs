//! The decision seam of the recommender controller: for one MPA and its latest observation,
//! propose a shape. [`MpaDefaultDecider`] runs `aware-baselines`' MultidimPodAutoscaler default
//! (HPA on CPU for replicas, VPA for resources), one instance per MPA so each keeps its own
//! stabilisation window and histograms, as upstream's controllers keep per-object state.
//! [`LifecycleDecider`] is AWARE: the lifecycle manager on a live backend
//! ([`aware_lifecycle::live`]), its guard on every observation, the MPA default as its fallback.

use std::collections::{BTreeMap, HashMap, HashSet};
use std::sync::Mutex;

use aware_baselines::MultidimPodAutoscaler as MpaDefault;
use aware_core::{ContainerResources, Observation, Profile, Recommendation, Recommender, RecommenderError};
use aware_lifecycle::algorithm::LifecycleState;
use aware_lifecycle::live::{LiveAppReport, LiveManager};
use aware_lifecycle::manager::ManagerConfig;

#[cfg(doc)]
use crate::state::SavedState;
use crate::state::{LearnedStore, SavedMpa};

/// Proposes a recommendation for the MPA identified by `key` (`namespace/name`).
pub trait Decider: Send + Sync + 'static {
    /// A short name for status messages and logs (`mpa`, `aware`).
    fn name(&self) -> &str;

    fn decide(
        &self,
        key: &str,
        profile: &Profile,
        observation: &Observation,
    ) -> Result<Recommendation, RecommenderError>;

    /// The pass could not observe the MPA's target (`reason`: Prometheus unreachable, its
    /// samples stale): nothing is decided, and a decider that keeps a decision log says so.
    fn unavailable(&self, _key: &str, _profile: &Profile, _reason: &str) {}

    /// Forgets the state kept for an MPA that was deleted.
    fn forget(&self, _key: &str) {}

    /// The MPAs it keeps state for (not those a previous run saved and no pass has reached):
    /// after the watch re-lists, those it did not list are forgotten ([`Decider::forget`]).
    fn keys(&self) -> Vec<String> {
        Vec::new()
    }

    /// Whether the decider wants the pod resources the MPA's target declares (its
    /// `spec.template`) before it next decides: the controller then reads the target and hands
    /// them, or a lasting reason they cannot be read (403, 404), to [`Decider::declared`]; a
    /// read that failed for now (a timeout, a 5xx) is tried again at the next pass.
    fn wants_declared(&self, _key: &str) -> bool {
        false
    }

    /// The pod resources the MPA's target declares, or why they could not be read.
    fn declared(&self, _key: &str, _profile: &Profile, _template: Result<ContainerResources, String>) {}

    /// The decider's own metrics (OpenMetrics text ending in `# EOF`), if it has any.
    fn encode_metrics(&self) -> Option<String> {
        None
    }

    /// What the decider keeps of each MPA across a restart (`aware controller --state FILE`),
    /// by key, each as at its last observation; MPAs saved by a previous run and not decided
    /// for since are kept as they were. Empty where it keeps nothing.
    fn save(&self) -> BTreeMap<String, SavedMpa> {
        BTreeMap::new()
    }

    /// The identity of the lifecycle checkpoint the decider's agent came from, saved beside
    /// its state: lifecycles saved beside another are not taken up. `None`: no agent.
    fn checkpoint_identity(&self) -> Option<String> {
        None
    }

    /// Takes up what a previous run saved ([`Decider::save`]): each MPA's when it is first
    /// decided for (`from`: where it came from, for the stage changes' reasons).
    fn take_up(&self, _saved: BTreeMap<String, SavedMpa>, _from: &str) {}

    /// [`Decider::save`], having written what the decider learned live into `store` first
    /// (the state file naming it is written after), all as at one moment: the agent when its
    /// weights moved since it was last written (at most every [`LEARNED_AGENT_EVERY`] unless
    /// `last`, the save when the controller stops), and each policy an MPA is served with that
    /// the agent learned live, named in that MPA's state. A decider that does not learn writes
    /// nothing.
    fn save_with_learned(&self, _store: &LearnedStore, _last: bool) -> (BTreeMap<String, SavedMpa>, Learned) {
        (self.save(), Learned::default())
    }

    /// Takes up what a previous run learned live ([`Decider::save_with_learned`]), before any MPA's
    /// state: the agent named `agent`, to learn and act on from, and the `policies` MPAs were
    /// served with, for when each MPA is first decided for. What does not verify is set aside
    /// and not used; what to log about it is returned.
    fn take_up_learned(&self, _store: &LearnedStore, _agent: Option<&str>, _policies: &[&str]) -> Vec<String> {
        Vec::new()
    }

    /// The MPA `key` exists and is this controller's (a pass reached it, whether or not its
    /// target could be observed): what a previous run saved for it is kept until it is taken
    /// up, however long that takes.
    fn seen(&self, _key: &str) {}

    /// The controller stops: what the decider still has to write is written (or spooled).
    fn finish(&self) {}

    /// The controller's watch has listed every MPA it can see (in `namespace`, or in every
    /// namespace where `None`): the hour the MPAs a previous run saved are kept for when no pass
    /// reaches them counts from the first listing, and saved MPAs of other namespaces are not
    /// this controller's to drop.
    fn listed(&self, _namespace: Option<&str>) {}
}

/// What [`Decider::save_with_learned`] wrote, or kept from an earlier write.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Learned {
    /// The agent's name in the store ([`SavedState::learned`]).
    pub agent: Option<String>,
    /// By MPA, the name of the policy it is served with ([`SavedMpa::policy`]).
    pub policies: BTreeMap<String, String>,
    /// What could not be written, and why (for the agent, the state names the one written
    /// before; an MPA whose policy was not written is named with none).
    pub failures: Vec<String>,
}

/// How often at most the lifecycle decider writes its agent as it learns live (about half a
/// megabyte each time for the default DDPG agent), and once more when the controller stops.
pub const LEARNED_AGENT_EVERY: std::time::Duration = std::time::Duration::from_secs(300);

/// How long the MPAs a previous run saved are kept for when no pass reaches them: one deleted
/// while the controller was down never is ([`Decider::seen`]), and upstream's recommender
/// garbage-collects the checkpoints of VPAs that no longer exist hourly too.
pub const SAVED_KEPT_FOR: std::time::Duration = std::time::Duration::from_secs(3600);

/// MPAs a previous run saved, not decided for since: taken up when each first is.
#[derive(Debug, Default)]
struct Saved(Mutex<SavedMpas>);

#[derive(Debug, Default)]
struct SavedMpas {
    mpas: BTreeMap<String, SavedMpa>,
    /// Where they came from, for the stage changes' reasons.
    from: String,
    /// When the watch first listed the MPAs after they were taken up (a pass reaches one only
    /// after a listing, and only the listing says which namespaces it covered): the hour they
    /// are kept for counts from there, so a controller that cannot list
    /// its MPAs for a while after starting (the API server down, RBAC not yet granted) does not
    /// drop what it saved before it has looked, and one that owns no MPA still drops what was
    /// deleted while it was down.
    since: Option<std::time::Instant>,
    /// The namespace the listing covered (`None`: every one); saved MPAs outside it are kept.
    scope: Option<String>,
    /// Saved MPAs a pass reached since they were taken up: kept past [`SAVED_KEPT_FOR`].
    seen: HashSet<String>,
}

impl Saved {
    fn lock(&self) -> std::sync::MutexGuard<'_, SavedMpas> {
        self.0.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    fn put(&self, saved: BTreeMap<String, SavedMpa>, from: &str) {
        let mut s = self.lock();
        s.mpas = saved;
        s.from = from.to_string();
        s.since = None;
        s.scope = None;
        s.seen.clear();
    }

    /// The state saved for `key`, taken out (it is taken up once), with where it came from.
    fn take(&self, key: &str) -> Option<(SavedMpa, String)> {
        let mut s = self.lock();
        let saved = s.mpas.remove(key)?;
        Some((saved, s.from.clone()))
    }

    /// Every MPA saved and not taken up yet: [`SAVED_KEPT_FOR`] after the MPAs were first
    /// listed ([`Saved::listed`]), only those a pass has reached
    /// ([`Saved::seen`]) and those of namespaces the listing did not cover.
    fn pending(&self) -> BTreeMap<String, SavedMpa> {
        self.pending_at(std::time::Instant::now())
    }

    /// [`Saved::pending`] at `now`.
    fn pending_at(&self, now: std::time::Instant) -> BTreeMap<String, SavedMpa> {
        let mut s = self.lock();
        if s.since.is_some_and(|t| now.saturating_duration_since(t) >= SAVED_KEPT_FOR) {
            let before = s.mpas.len();
            let SavedMpas { mpas, seen, scope, .. } = &mut *s;
            // A key is `namespace/name`; one of a namespace the listing did not cover stays.
            let in_scope =
                |key: &str| scope.as_deref().is_none_or(|ns| key.split_once('/').is_some_and(|(n, _)| n == ns));
            mpas.retain(|key, _| seen.contains(key) || !in_scope(key));
            if mpas.len() < before {
                tracing::info!(
                    "dropping the saved state of {} MPAs no pass has reached in the {SAVED_KEPT_FOR:?} since the MPAs were first listed (deleted while the controller was down?)",
                    before - mpas.len()
                );
            }
        }
        s.mpas.clone()
    }

    fn seen(&self, key: &str) {
        let mut s = self.lock();
        if s.mpas.contains_key(key) {
            s.seen.insert(key.to_string());
        }
    }

    fn listed(&self, namespace: Option<&str>, now: std::time::Instant) {
        let mut s = self.lock();
        s.since.get_or_insert(now);
        s.scope = namespace.map(str::to_string);
    }

    fn forget(&self, key: &str) {
        let mut s = self.lock();
        s.mpas.remove(key);
        s.seen.remove(key);
    }
}

/// `aware-baselines`' MPA default behind the [`Decider`] seam.
#[derive(Debug, Default)]
pub struct MpaDefaultDecider {
    /// Whether the VPA half also controls CPU (otherwise memory only, CPU left to the HPA).
    pub vertical_cpu: bool,
    state: Mutex<HashMap<String, (Profile, MpaDefault)>>,
    saved: Saved,
}

impl MpaDefaultDecider {
    pub fn new(vertical_cpu: bool) -> Self {
        Self { vertical_cpu, state: Mutex::default(), saved: Saved::default() }
    }

    /// A fresh MPA default for `key` under `profile`, with the VPA history a previous run saved
    /// for it, if any.
    fn fresh(&self, key: &str, profile: &Profile) -> MpaDefault {
        let mut mpa = MpaDefault::from_profile(profile, self.vertical_cpu);
        if let Some((saved, from)) = self.saved.take(key) {
            match mpa.vpa.load_checkpoints(&saved.vpa) {
                Ok(()) if !saved.vpa.is_empty() => {
                    tracing::info!(mpa = key, "VPA history taken up from {from}")
                }
                Ok(()) => {}
                Err(e) => tracing::warn!(mpa = key, "{from}: {e}: the VPA starts without it"),
            }
        }
        mpa
    }
}

impl Decider for MpaDefaultDecider {
    fn name(&self) -> &str {
        "mpa"
    }

    fn decide(
        &self,
        key: &str,
        profile: &Profile,
        observation: &Observation,
    ) -> Result<Recommendation, RecommenderError> {
        let mut state = self.state.lock().map_err(|_| RecommenderError::Other("decider state poisoned".into()))?;
        let entry = state.entry(key.to_string()).or_insert_with(|| (profile.clone(), self.fresh(key, profile)));
        // A changed profile (annotation or constraints edited) restarts the recommender from it.
        if entry.0 != *profile {
            *entry = (profile.clone(), MpaDefault::from_profile(profile, self.vertical_cpu));
        }
        entry.1.recommend(observation)
    }

    fn forget(&self, key: &str) {
        if let Ok(mut state) = self.state.lock() {
            state.remove(key);
        }
        self.saved.forget(key);
    }

    fn keys(&self) -> Vec<String> {
        self.state.lock().map(|s| s.keys().cloned().collect()).unwrap_or_default()
    }

    fn save(&self) -> BTreeMap<String, SavedMpa> {
        let mut out = self.saved.pending();
        if let Ok(state) = self.state.lock() {
            for (key, (_, mpa)) in state.iter() {
                out.insert(key.clone(), SavedMpa { vpa: mpa.vpa.save_checkpoints(), ..SavedMpa::default() });
            }
        }
        out
    }

    fn take_up(&self, saved: BTreeMap<String, SavedMpa>, from: &str) {
        self.saved.put(saved, from);
    }

    fn seen(&self, key: &str) {
        self.saved.seen(key);
    }

    fn listed(&self, namespace: Option<&str>) {
        self.saved.listed(namespace, std::time::Instant::now());
    }
}

/// AWARE behind the [`Decider`] seam: one [`LiveManager`] for every MPA served (one agent for
/// all), each MPA an application keyed `namespace/name`.
///
/// An MPA starts in the stage its key has in the checkpoint the decider was built with (the
/// lifecycles `aware run --checkpoint DIR` wrote, by app name), otherwise in its first stage —
/// with bootstrapping OFFLINE, the fallback acting (see [`aware_lifecycle::live`] for why a
/// live backend cannot hand an app over to the agent by itself). An edited profile restarts the
/// app's fallback and guard under the new one and keeps its lifecycle. A pass whose observation
/// the guard refuses and the fallback cannot act on either recommends the allocation the app has.
pub struct LifecycleDecider {
    manager: Mutex<LiveManager>,
    /// Stage per MPA, stage changes, who acted, guard verdicts (as `aware run` exports them).
    pub metrics: aware_lifecycle::metrics::LifecycleMetrics,
    /// Lifecycles to take up, by app name, when an app first appears.
    checkpointed: Vec<(String, LifecycleState)>,
    restored_from: String,
    /// The MPAs whose target's declared template was read (or tried): read once per MPA.
    declared_read: Mutex<HashSet<String>>,
    /// The checkpoint's identity ([`aware_lifecycle::checkpoint::Restored::identity`]).
    identity: Option<String>,
    /// What a previous run of the controller saved ([`Decider::take_up`]).
    saved: Saved,
    /// The agent as last written to the learned store: the fingerprint of its weights
    /// ([`fingerprint`]), its name there and when.
    learned_written: Mutex<Option<(String, String, std::time::Instant)>>,
    /// The fingerprint of the agent handed over: an agent that still has it learned nothing.
    handed: String,
    /// The policies MPAs are served with by name in the learned store: those taken up (each
    /// handed to its MPA when the MPA is first decided for) and those written since.
    policies: Mutex<Vec<(aware_agents::FrozenPolicy, String)>>,
    /// Where every decision, stage change and window goes (`--store`), if anywhere.
    writer: Mutex<Option<crate::record::StoreWriter>>,
    /// The fallback's transitions the store holds, for the agent to learn offline from again,
    /// as the store's writer reads them: given to it at the first pass after they are read
    /// (after any agent a state file resumes).
    demonstrations: Option<crate::record::Demonstrations>,
}

impl LifecycleDecider {
    /// `agent`: the shared policy (a checkpoint's); `checkpointed`: the lifecycles to start
    /// apps in, by name, and where they came from (for the stage change's reason).
    pub fn new(
        agent: impl Into<aware_lifecycle::LifecycleAgent>,
        config: ManagerConfig,
        checkpointed: Vec<(String, LifecycleState)>,
        restored_from: impl Into<String>,
    ) -> Result<Self, aware_lifecycle::LifecycleError> {
        let manager = LiveManager::new(&[], &Profile::default(), agent, config)?;
        Ok(Self {
            handed: fingerprint(&manager),
            manager: Mutex::new(manager),
            metrics: Default::default(),
            checkpointed,
            restored_from: restored_from.into(),
            declared_read: Mutex::default(),
            identity: None,
            saved: Saved::default(),
            learned_written: Mutex::default(),
            policies: Mutex::default(),
            writer: Mutex::default(),
            demonstrations: None,
        })
    }

    /// Records every decision (with the features behind the agent's), stage change and window
    /// through `writer` (`aware controller --store`), from the next pass on, and gives the
    /// agent the fallback's transitions `writer` reads from the store at the first pass after
    /// they are read ([`crate::record::StoreWriter::demonstrations`]).
    pub fn with_store(mut self, writer: crate::record::StoreWriter) -> Self {
        if let Ok(mut m) = self.manager.lock() {
            m.set_log(true);
        }
        self.demonstrations = Some(writer.demonstrations.clone());
        *self.writer.lock().unwrap_or_else(std::sync::PoisonError::into_inner) = Some(writer);
        self
    }

    /// A recorder of this decider's records ([`aware_lifecycle::record::LiveRecorder`]).
    pub fn recorder(&self) -> Result<aware_lifecycle::record::LiveRecorder, RecommenderError> {
        Ok(aware_lifecycle::record::LiveRecorder::of(&*self.lock()?))
    }

    /// At the first pass after the store's writer has read them (each pass asks until then):
    /// the fallback's transitions the store holds, given to the agent to learn offline from
    /// ([`LiveManager::take_up_demonstrations`]), or why they could not be read, logged.
    fn take_up_demonstrations(&self, m: &mut LiveManager) {
        let Some(pending) = self.demonstrations.as_ref().and_then(crate::record::Demonstrations::take) else {
            return;
        };
        let store = || {
            let writer = self.writer.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
            writer.as_ref().map(|w| w.describe.clone()).unwrap_or_default()
        };
        let taken =
            pending.map_err(|e| e.to_string()).and_then(|t| m.take_up_demonstrations(&t).map_err(|e| e.to_string()));
        match taken {
            Ok(0) => {}
            Ok(n) => {
                tracing::info!(store = %store(), "the agent learns offline again from {n} of the fallback's transitions the store holds")
            }
            Err(why) => {
                tracing::warn!(store = %store(), "the agent learns on without the fallback's transitions the store holds: they are not taken up: {why}")
            }
        }
    }

    /// Hands what the manager logged since the last pass to the store's writer, if any.
    fn record(&self, m: &mut LiveManager) {
        let writer = self.writer.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        if let Some(w) = writer.as_ref() {
            w.send(m.take_records());
        }
    }

    /// What is kept of every MPA: those a previous run saved and no pass has reached yet, as
    /// saved, and every one served, as now.
    fn saved_mpas(&self, m: &LiveManager) -> BTreeMap<String, SavedMpa> {
        let mut out = self.saved.pending();
        for (i, app) in m.app_names().enumerate() {
            if let Some(saved) = m.saved(i) {
                let kept = SavedMpa {
                    vpa: saved.fallback_vpa,
                    oom_floor: saved.oom_floor,
                    aware: Some(saved.lifecycle),
                    policy: None,
                };
                out.insert(app.to_string(), kept);
            }
        }
        out
    }

    /// Writes into `store` what [`Decider::save_with_learned`] says, with `m` held.
    fn write_learned(&self, m: &LiveManager, store: &LearnedStore, last: bool) -> Learned {
        let mut out = Learned::default();
        let mut written = self.learned_written.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        let recent = written.as_ref().filter(|(_, _, at)| !last && at.elapsed() < LEARNED_AGENT_EVERY);
        out.agent = match recent {
            Some((_, id, _)) => Some(id.clone()),
            None => {
                let now = fingerprint(m);
                match &*written {
                    Some((f, id, _)) if *f == now => Some(id.clone()),
                    None if now == self.handed => None,
                    _ => match store.write_agent(|dir| m.save_learner(dir).map_err(|e| e.to_string())) {
                        Ok(id) => {
                            *written = Some((now, id.clone(), std::time::Instant::now()));
                            Some(id)
                        }
                        Err(e) => {
                            out.failures.push(format!("{e}: the agent written before stands"));
                            written.as_ref().map(|(_, id, _)| id.clone())
                        }
                    },
                }
            }
        };
        let mut policies = self.policies.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        let mut used = vec![false; policies.len()];
        for (i, app) in m.app_names().enumerate() {
            let Some(policy) = m.served_policy(i) else { continue };
            let known = policies.iter().position(|(p, _)| p.same(policy));
            // Written again where it is not there (removed while no state named it).
            let id = match known {
                Some(k) if store.has_policy(&policies[k].1) => Ok(policies[k].1.clone()),
                _ => store.write_policy(&policy.to_bytes()),
            };
            match (id, known) {
                (Ok(id), Some(k)) => {
                    used[k] = true;
                    out.policies.insert(app.to_string(), id);
                }
                (Ok(id), None) => {
                    policies.push((policy.clone(), id.clone()));
                    used.push(true);
                    out.policies.insert(app.to_string(), id);
                }
                (Err(e), _) => out
                    .failures
                    .push(format!("{e}: MPA {app}'s policy is not kept (restarted before it is, the app retrains)")),
            }
        }
        // Policies taken up and not handed to their MPA yet stay; the others no MPA uses go.
        let pending: HashSet<String> = self.saved.pending().values().filter_map(|p| p.policy.clone()).collect();
        let mut k = 0;
        policies.retain(|(_, id)| {
            k += 1;
            used[k - 1] || pending.contains(id)
        });
        out
    }

    /// The policy the learned store keeps as `id`, taken up or written.
    fn policy_named(&self, id: &str) -> Option<aware_agents::FrozenPolicy> {
        let policies = self.policies.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        policies.iter().find(|(_, name)| name == id).map(|(p, _)| p.clone())
    }

    /// The identity of the checkpoint the agent came from: what a saved state is bound to.
    pub fn with_checkpoint_identity(mut self, identity: impl Into<String>) -> Self {
        self.identity = Some(identity.into());
        self
    }

    fn lock(&self) -> Result<std::sync::MutexGuard<'_, LiveManager>, RecommenderError> {
        self.manager.lock().map_err(|_| RecommenderError::Other("decider state poisoned".into()))
    }

    /// Every app's stage and counts of who acted.
    pub fn report(&self) -> Vec<LiveAppReport> {
        self.lock().map(|m| m.report()).unwrap_or_default()
    }

    /// The shared agent as it has learned so far, frozen (its greedy actions).
    pub fn learner(&self) -> Option<aware_agents::FrozenPolicy> {
        self.lock().ok().map(|m| m.agent.frozen())
    }

    /// The policy the MPA `key` is served with where the agent learned it live
    /// ([`LiveManager::served_policy`]).
    pub fn served_policy(&self, key: &str) -> Option<aware_agents::FrozenPolicy> {
        let m = self.lock().ok()?;
        m.app_index(key).and_then(|i| m.served_policy(i).cloned())
    }

    /// Every stage change so far.
    pub fn stage_changes(&self) -> Vec<aware_lifecycle::StageChange> {
        self.lock().map(|m| m.changes().to_vec()).unwrap_or_default()
    }
}

/// What names the weights the agent acts with now: whether it learned since (an update count
/// does not tell, PPO's cloning moves its weights without one).
fn fingerprint(m: &LiveManager) -> String {
    aware_agents::sha256(&m.agent.frozen().to_bytes())
}

fn log_changes(m: &LiveManager, from: usize) {
    for c in &m.changes()[from..] {
        tracing::info!(app = %c.app, from = c.from.name(), to = c.to.name(), reason = %c.reason, "stage change");
    }
}

impl LifecycleDecider {
    /// The index of the MPA `key` in the manager: added when new (in the checkpoint's stage when
    /// it names the MPA), its profile replaced in place when edited (lifecycle and counts carry on).
    fn app(&self, m: &mut LiveManager, key: &str, profile: &Profile) -> Result<usize, RecommenderError> {
        let fail = |e: aware_lifecycle::LifecycleError| RecommenderError::Other(e.to_string());
        if let Some(i) = m.app_index(key) {
            if m.app_profile(i) != Some(profile) {
                m.set_profile(i, profile).map_err(fail)?;
                tracing::info!(app = key, "profile edited: fallback, guard and reward restarted under it");
            }
            return Ok(i);
        }
        let i = m.add_app(key, profile).map_err(fail)?;
        // What the controller saved before a restart is newer than the checkpoint: its
        // lifecycle stands where there is one (else the checkpoint's), its VPA history either way.
        let saved = self.saved.take(key);
        let from_checkpoint = || {
            self.checkpointed.iter().find(|(name, _)| name == key).map(|(_, state)| (key.to_string(), state.clone()))
        };
        let mut lifecycle_taken = false;
        if let Some((saved, from)) = &saved {
            match m.restore_saved(i, None, None, saved.oom_floor, &saved.vpa, from) {
                Ok(()) if !saved.vpa.is_empty() || saved.oom_floor.is_some() => tracing::info!(
                    app = key,
                    vpa_containers = saved.vpa.len(),
                    oom_floor = saved.oom_floor.is_some(),
                    "the fallback's VPA history and the OOM floor, as saved, taken up from {from}"
                ),
                Ok(()) => {}
                Err(e) => tracing::warn!(app = key, "{from}: {e}: the app goes on without it"),
            }
            if let Some(aware) = &saved.aware {
                let served_with = saved.policy.as_deref().and_then(|id| self.policy_named(id));
                if aware.served_by_live_agent && served_with.is_none() {
                    tracing::warn!(
                        app = key,
                        "{from}: the policy the agent learned live and served it with was not kept{}",
                        if aware.lifecycle.stage == aware_lifecycle::Stage::Serving { ": it retrains" } else { "" }
                    );
                }
                match m.restore_saved(i, Some(aware), served_with, None, &[], &format!("restored from {from}")) {
                    Ok(()) => lifecycle_taken = true,
                    Err(e) => tracing::warn!(app = key, "{from}: {e}: the app's lifecycle starts from the checkpoint"),
                }
            }
        }
        if !lifecycle_taken && let Some(state) = from_checkpoint() {
            m.restore_lifecycles(&[state], &format!("restored from {}", self.restored_from));
        }
        Ok(i)
    }
}

impl Decider for LifecycleDecider {
    fn name(&self) -> &str {
        "aware"
    }

    fn decide(
        &self,
        key: &str,
        profile: &Profile,
        observation: &Observation,
    ) -> Result<Recommendation, RecommenderError> {
        let mut m = self.lock()?;
        self.take_up_demonstrations(&mut m);
        let changes_before = m.changes().len();
        let i = self.app(&mut m, key, profile)?;
        let decided =
            m.decide(vec![(i, Ok(observation.clone()))]).map_err(|e| RecommenderError::Other(e.to_string()))?;
        log_changes(&m, changes_before);
        self.metrics.update_live(&m);
        self.record(&mut m);
        let d = decided.into_iter().next().ok_or_else(|| RecommenderError::Other("no decision".into()))?;
        tracing::info!(
            app = key,
            stage = d.decision.stage.name(),
            acting = %d.decision.acting_policy,
            guard = %d.decision.guard,
            "decided"
        );
        // Nobody proposed (the fallback had nothing it could act on): the allocation is kept,
        // and the recommendation says so rather than failing the pass.
        Ok(d.recommendation.unwrap_or_else(|| Recommendation {
            replicas: observation.desired_replicas,
            containers: vec![observation.template.clone()],
        }))
    }

    fn unavailable(&self, key: &str, profile: &Profile, reason: &str) {
        let Ok(mut m) = self.lock() else { return };
        self.take_up_demonstrations(&mut m);
        let changes_before = m.changes().len();
        let Ok(i) = self.app(&mut m, key, profile) else { return };
        match m.decide(vec![(i, Err(reason.to_string()))]) {
            Ok(d) => {
                if let Some(d) = d.first() {
                    tracing::warn!(app = key, acting = %d.decision.acting_policy, guard = %d.decision.guard, "decided");
                }
            }
            Err(e) => tracing::warn!(app = key, "{e}"),
        }
        log_changes(&m, changes_before);
        self.metrics.update_live(&m);
        self.record(&mut m);
    }

    fn encode_metrics(&self) -> Option<String> {
        let own = self.metrics.encode();
        let writer = self.writer.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        Some(match writer.as_ref() {
            Some(w) => format!("{}{}", own.strip_suffix("# EOF\n").unwrap_or(&own), w.stats.encode()),
            None => own,
        })
    }

    fn finish(&self) {
        let writer = self.writer.lock().unwrap_or_else(std::sync::PoisonError::into_inner).take();
        if let Some(mut w) = writer {
            w.close();
        }
    }

    /// Once per MPA: what the fallback does not manage (the CPU limit, under the MPA default)
    /// is handed back as the target's template declares it, not as the pods first observed,
    /// which after a restart of the controller can be the agent's cut.
    fn wants_declared(&self, key: &str) -> bool {
        self.declared_read.lock().is_ok_and(|read| !read.contains(key))
    }

    fn declared(&self, key: &str, profile: &Profile, template: Result<ContainerResources, String>) {
        if let Ok(mut read) = self.declared_read.lock() {
            read.insert(key.to_string());
        }
        match template {
            Ok(template) => {
                let Ok(mut m) = self.lock() else { return };
                let changes_before = m.changes().len();
                match self.app(&mut m, key, profile) {
                    Ok(i) => m.set_declared(i, template),
                    Err(e) => tracing::warn!(app = key, "{e}"),
                }
                // A new MPA starts (or is restored from the checkpoint) here.
                log_changes(&m, changes_before);
                self.metrics.update_live(&m);
            }
            Err(reason) => tracing::warn!(
                app = key,
                "the target's pod template could not be read ({reason}): what the fallback does not manage is handed back as the pods were first observed"
            ),
        }
    }

    fn keys(&self) -> Vec<String> {
        self.manager.lock().map(|m| m.app_names().map(str::to_string).collect()).unwrap_or_default()
    }

    fn forget(&self, key: &str) {
        if let Ok(mut read) = self.declared_read.lock() {
            read.remove(key);
        }
        if let Ok(mut m) = self.manager.lock()
            && let Some(i) = m.app_index(key)
        {
            m.remove_app(i);
            self.metrics.update_live(&m);
        }
        self.saved.forget(key);
    }

    fn save(&self) -> BTreeMap<String, SavedMpa> {
        match self.manager.lock() {
            Ok(m) => self.saved_mpas(&m),
            Err(_) => self.saved.pending(),
        }
    }

    fn checkpoint_identity(&self) -> Option<String> {
        self.identity.clone()
    }

    fn take_up(&self, saved: BTreeMap<String, SavedMpa>, from: &str) {
        self.saved.put(saved, from);
    }

    fn save_with_learned(&self, store: &LearnedStore, last: bool) -> (BTreeMap<String, SavedMpa>, Learned) {
        let Ok(m) = self.manager.lock() else { return (self.saved.pending(), Learned::default()) };
        let learned = self.write_learned(&m, store, last);
        let mut mpas = self.saved_mpas(&m);
        for (key, id) in &learned.policies {
            if let Some(mpa) = mpas.get_mut(key) {
                mpa.policy = Some(id.clone());
            }
        }
        (mpas, learned)
    }

    fn take_up_learned(&self, store: &LearnedStore, agent: Option<&str>, policies: &[&str]) -> Vec<String> {
        let mut notes = Vec::new();
        let where_ = store.dir.display();
        let mut set_aside = |id: &str, policy: bool, why: String| match store.set_aside(id, policy) {
            Ok(to) => notes.push(format!("{why}: not used, moved to {}", to.display())),
            Err(e) => notes.push(format!("{why}: not used ({e})")),
        };
        if let Some(id) = agent
            && let Ok(mut m) = self.manager.lock()
        {
            // Exploration goes on from a fresh draw, not the same noise at every restart.
            let seed =
                std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map_or(0, |d| d.as_nanos()) as u64;
            match store
                .agent_dir(id)
                .map_err(|e| e.to_string())
                .and_then(|dir| m.resume_learner(&dir, seed).map_err(|e| format!("{}: {e}", dir.display())))
            {
                Ok(()) => {
                    *self.learned_written.lock().unwrap_or_else(std::sync::PoisonError::into_inner) =
                        Some((fingerprint(&m), id.to_string(), std::time::Instant::now()));
                    tracing::info!("the agent goes on from what it learned live ({where_}: agent {id})");
                }
                Err(why) => set_aside(
                    id,
                    false,
                    format!("{why}: the agent learned live does not verify; the checkpoint's agent learns from here"),
                ),
            }
        }
        let mut kept = self.policies.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        for id in policies.iter().copied().collect::<std::collections::BTreeSet<_>>() {
            match store.read_policy(id) {
                Ok(p) => kept.push((p, id.to_string())),
                Err(e) => set_aside(id, true, format!("{e}: an MPA served with it retrains")),
            }
        }
        notes
    }

    fn seen(&self, key: &str) {
        self.saved.seen(key);
    }

    fn listed(&self, namespace: Option<&str>) {
        self.saved.listed(namespace, std::time::Instant::now());
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::{Duration, Instant};

    /// The hour the saved MPAs are kept for counts from the first listing, not from when they
    /// were taken up nor from a pass: a controller that could not list its MPAs for longer than
    /// that after starting keeps them all until it has looked.
    #[test]
    fn saved_mpas_no_pass_reached_are_dropped_an_hour_after_the_first_listing() {
        let saved = Saved::default();
        let mpas: BTreeMap<String, SavedMpa> =
            ["shop/web", "shop/gone"].iter().map(|k| (k.to_string(), SavedMpa::default())).collect();
        saved.put(mpas, "the state file");
        let later = Instant::now() + SAVED_KEPT_FOR + Duration::from_secs(60);
        saved.seen("shop/web");
        assert_eq!(saved.pending_at(later).len(), 2, "not listed yet: nothing expires however long it takes");
        saved.listed(None, Instant::now());
        assert_eq!(saved.pending_at(Instant::now() + Duration::from_secs(60)).len(), 2, "within the hour");
        let after = Instant::now() + SAVED_KEPT_FOR + Duration::from_secs(1);
        assert_eq!(saved.pending_at(after).keys().collect::<Vec<_>>(), ["shop/web"], "the one never reached goes");
        // A second take-up starts the clock again.
        saved.put([("shop/other".to_string(), SavedMpa::default())].into(), "the state file");
        assert_eq!(saved.pending_at(after + SAVED_KEPT_FOR).len(), 1);
    }

    /// A controller that owns no MPA (every saved one deleted while it was down) starts the
    /// hour at the watch's first listing, as no pass ever reaches one; saved MPAs of namespaces
    /// a namespaced controller's listing does not cover are not its to drop.
    #[test]
    fn the_hour_starts_at_the_first_listing_and_covers_only_the_listed_namespace() {
        let keys = ["shop/web", "shop/gone", "billing/api"];
        let saved = Saved::default();
        saved.put(keys.iter().map(|k| (k.to_string(), SavedMpa::default())).collect(), "the state file");
        let start = Instant::now();
        saved.listed(None, start);
        assert_eq!(saved.pending_at(start + Duration::from_secs(60)).len(), 3, "within the hour");
        assert!(saved.pending_at(start + SAVED_KEPT_FOR).is_empty(), "listed, never reached: all deleted");

        let saved = Saved::default();
        saved.put(keys.iter().map(|k| (k.to_string(), SavedMpa::default())).collect(), "the state file");
        saved.listed(Some("shop"), start);
        saved.seen("shop/web");
        // A later listing (the watch re-listed) does not start the hour again.
        saved.listed(Some("shop"), start + Duration::from_secs(1800));
        let left = saved.pending_at(start + SAVED_KEPT_FOR);
        assert_eq!(left.keys().collect::<Vec<_>>(), ["billing/api", "shop/web"], "reached, or not listed");
    }
}
