//! AWARE's Algorithm 1 for one application: when the learned policy may act, when it stops
//! learning, and when it must learn again. It sees one number pair per episode (mean reward per
//! interval and SLO-violating intervals) and, while bootstrapping, a shadow comparison of the
//! agent against the fallback on the same recent traffic (those two numbers, and the
//! core-seconds each reserved where both ran in the shadow); it decides nothing else.
//!
//! With the profile's `lifecycle:` thresholds:
//! - INITIALIZED → OFFLINE when bootstrapping is on, else → ONLINE.
//! - OFFLINE → ONLINE once the agent, run greedily on the episode's traffic, earns at least
//!   `t_online` of the fallback's mean reward there **and** violates the SLO in no more
//!   intervals than the fallback did **and**, with as many, reserves at most `max(1, 2 −
//!   t_online)` times its core-seconds there (the operator's test, which the reward alone can
//!   rank the other way: see [`AppLifecycle`]'s check).
//! - ONLINE → SERVING once the last `reward_window` episodes' rewards vary by less than
//!   `t_serving` (their coefficient of variation) and the last episode did not violate the SLO
//!   in [`FAILING_SHARE`] of its intervals or more (steady at the floor of violating is stuck,
//!   not converged); their mean becomes the reference.
//! - SERVING → ONLINE (retraining) once the mean of the last [`DEGRADATION_EPISODES`] episodes
//!   falls more than `t_var` (a fraction of the reference's magnitude) below the reference,
//!   unless the fall is the traffic's: with bootstrapping, the fallback replayed on the same
//!   episodes' traffic fell as far (the agent's lead over it shrank by no more than `t_var` of
//!   the reference) and the agent served (see [`AppLifecycle`]'s `the_traffics_dip`).
//!   ONLINE entered so is [`AppLifecycle::retraining`]: the manager then has the agent learn
//!   from what it does on the changed workload, which an agent just out of OFFLINE does not.
//! - Any stage → ONLINE, retraining, once the rules have failed for [`DEGRADATION_EPISODES`]
//!   episodes in a row ([`FAILING_SHARE`]): the fallback acting violated the SLO in at least
//!   half of an episode's intervals, or the acting agent did and so did the fallback replayed
//!   on the same traffic. An agent that learned from the rules cannot do better than them
//!   without trying what they never do. Each time retraining has given up (below) since the
//!   app last served, the trigger waits twice as many failing episodes. An app already
//!   retraining (its rewards degraded) is only marked as one the rules failed
//!   ([`AppLifecycle::rules_failed`]), and those episodes start no streak after it.
//! - ONLINE, retraining, gives up after `max_retrain_episodes` episodes without converging
//!   (an app that no allocation within its bounds serves would explore forever): with
//!   bootstrapping → OFFLINE, the fallback serving again; without, the agent stays ONLINE but
//!   stops exploring.
//! - ONLINE or SERVING → OFFLINE (bootstrapping only) when the agent, acting, fell behind the
//!   fallback run on the same traffic by the test that let it out of OFFLINE (less than
//!   `t_online` of the fallback's reward, or more SLO-violating intervals; the core-seconds
//!   too where the agent was judged in the shadow as well, as under high stakes while the
//!   fallback acts, but not for an episode the agent served, whose reservation is not measured
//!   as the shadow's is) in [`DEGRADATION_EPISODES`] episodes in a row. AWARE hands control
//!   to the learned policy only while it is as good as the rules it replaced; this is that
//!   promise kept after the hand-over, not only at it. The agent keeps learning offline.
//!   Once the rules have failed acting for the app (the trigger above), only more
//!   SLO-violating intervals than the fallback's replay count as behind, until the app is
//!   next handed back: the replay starts from the allocation the agent built, and rules that
//!   serve from there for one episode had not served acting on from it.

use std::collections::VecDeque;

use aware_core::LifecycleThresholds;

use crate::stage::Stage;

/// Episodes whose mean reward the serving check averages: one bad episode can be noise (the
/// convergence test allows a spread of `t_serving`), two in a row are a trend.
pub const DEGRADATION_EPISODES: usize = 2;

/// Share of an episode's intervals violating the SLO at which the rules have failed there: the
/// fallback violated it in at least this share of the intervals it acted for (OFFLINE), or
/// both the acting agent and the fallback replayed on the same traffic did (ONLINE, SERVING).
/// For [`DEGRADATION_EPISODES`] episodes in a row, the app retrains
/// ([`AppLifecycle::retraining`]): as the manager has a retraining agent learn (a DDPG agent acts,
/// exploring, and learns from its own actions).
/// An agent that learned from the rules, and so only ever does what they do, cannot learn its
/// way out of a workload they cannot serve (`aware experiment fig9`: MPA never moves the CPU
/// limit, and after a payload increase every pod of its size violates the SLO).
pub const FAILING_SHARE: f64 = 0.5;

/// Relative slack on the core-seconds comparison of [`AppLifecycle`]'s check: rounding, not a
/// margin (the two runs are summed by the same scorer).
const COST_TOLERANCE: f64 = 1e-9;

/// What one episode of one application earned.
#[derive(Debug, Clone, Copy, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct EpisodeOutcome {
    /// Mean reward per interval.
    pub mean_reward: f64,
    /// Intervals that violated the SLO.
    pub slo_violations: u64,
    /// Intervals it covered.
    pub intervals: u64,
    /// Core-seconds reserved, where both sides of a comparison are measured alike (the
    /// bootstrapping check's shadow runs); `None` for an episode as served, whose reservation
    /// the manager does not measure as the shadow's scorer does.
    pub core_seconds: Option<f64>,
}

impl EpisodeOutcome {
    /// The share of its intervals that violated the SLO (0 for an episode of none).
    pub fn violating_share(&self) -> f64 {
        if self.intervals > 0 { self.slo_violations as f64 / self.intervals as f64 } else { 0.0 }
    }
}

/// The agent and the fallback, each run on the same recent traffic of the application.
#[derive(Debug, Clone, Copy, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct ShadowComparison {
    pub agent: EpisodeOutcome,
    pub fallback: EpisodeOutcome,
}

impl ShadowComparison {
    /// Several comparisons (on several episodes' traffic) as one: mean rewards averaged,
    /// SLO-violating intervals and core-seconds summed (unmeasured if any is).
    pub fn pooled(all: &[ShadowComparison]) -> ShadowComparison {
        let n = all.len().max(1) as f64;
        let pool = |f: fn(&ShadowComparison) -> EpisodeOutcome| EpisodeOutcome {
            mean_reward: all.iter().map(|c| f(c).mean_reward).sum::<f64>() / n,
            slo_violations: all.iter().map(|c| f(c).slo_violations).sum(),
            intervals: all.iter().map(|c| f(c).intervals).sum(),
            core_seconds: all.iter().map(|c| f(c).core_seconds).sum(),
        };
        ShadowComparison { agent: pool(|c| c.agent), fallback: pool(|c| c.fallback) }
    }
}

/// A stage change the algorithm decided, with its reason.
#[derive(Debug, Clone, PartialEq)]
pub struct Transition {
    pub from: Stage,
    pub to: Stage,
    pub reason: String,
}

/// The part of an [`AppLifecycle`] a checkpoint keeps between runs.
#[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct LifecycleState {
    pub stage: Stage,
    pub behind: usize,
    pub recent: Vec<f64>,
    pub reference: Option<f64>,
    /// ONLINE to retrain ([`AppLifecycle::retraining`]); absent in checkpoints written before
    /// it was kept.
    #[serde(default)]
    pub retraining: bool,
    /// Consecutive episodes in which the rules failed ([`FAILING_SHARE`]); absent in
    /// checkpoints written before it was kept.
    #[serde(default)]
    pub failing: usize,
    /// The rules failed acting for the app and it has not been handed back to them since
    /// ([`AppLifecycle::rules_failed`]); absent in checkpoints written before it was kept.
    #[serde(default)]
    pub rules_failed: bool,
    /// Episodes the current retraining has lasted; absent in checkpoints written before it
    /// was kept.
    #[serde(default)]
    pub retrain_episodes: u32,
    /// Times retraining gave up since the app last reached SERVING
    /// ([`AppLifecycle::gave_up`]); absent in checkpoints written before it was kept.
    #[serde(default)]
    pub gave_up: u32,
    /// The agent against the fallback over the episodes the reference was taken over, pooled
    /// ([`AppLifecycle::fallback_reference`]); absent in checkpoints written before it was
    /// kept.
    #[serde(default)]
    pub reference_comparison: Option<ShadowComparison>,
    /// The comparison with the fallback of each episode in `recent` (`None` where there was
    /// none), oldest first; absent in checkpoints written before it was kept.
    #[serde(default)]
    pub recent_shadows: Vec<Option<ShadowComparison>>,
}

impl LifecycleState {
    /// A lifecycle in `stage` with nothing remembered, held to `reference` (SERVING's
    /// converged reward): an app placed in a stage by hand, as a test or an operator would.
    pub fn fresh(stage: Stage, reference: Option<f64>) -> Self {
        Self {
            stage,
            behind: 0,
            recent: Vec::new(),
            reference,
            retraining: false,
            failing: 0,
            rules_failed: false,
            retrain_episodes: 0,
            gave_up: 0,
            reference_comparison: None,
            recent_shadows: Vec::new(),
        }
    }
}

/// Takes up checkpointed lifecycles (`states`, by app name) for the apps (`name`, lifecycle)
/// they name; each stage that changes, with its app's position, as a transition with `reason`.
/// Apps it does not name keep theirs.
pub(crate) fn restore_named<'a>(
    apps: impl Iterator<Item = (&'a str, &'a mut AppLifecycle)>,
    states: &[(String, LifecycleState)],
    reason: &str,
) -> Vec<(usize, Transition)> {
    apps.enumerate()
        .filter_map(|(i, (name, lifecycle))| {
            let (_, state) = states.iter().find(|(n, _)| n == name)?;
            lifecycle.restore(state, reason.to_string()).map(|t| (i, t))
        })
        .collect()
}

/// One application's lifecycle.
#[derive(Debug, Clone)]
pub struct AppLifecycle {
    stage: Stage,
    /// Held in its stage whatever happens ([`AppLifecycle::fixed`]).
    fixed: bool,
    thresholds: LifecycleThresholds,
    bootstrapping: bool,
    /// Whether SERVING may hand back for retraining (off: the `no-retrain` ablation).
    may_retrain: bool,
    /// Whether an app retrains where the rules fail ([`FAILING_SHARE`]); off where the agent
    /// could not be handed back on a replay ([`AppLifecycle::holding_where_rules_fail`]).
    retrains_where_rules_fail: bool,
    /// Consecutive episodes in which the rules failed.
    failing: usize,
    /// The rules failed acting for this app and it has not been handed back to them since
    /// ([`AppLifecycle::rules_failed`]).
    rules_failed: bool,
    /// Consecutive episodes the acting agent fell behind the fallback.
    behind: usize,
    /// Mean rewards of the episodes since the stage began (at most `reward_window` kept).
    recent: VecDeque<f64>,
    /// The comparison with the fallback on the same traffic of each episode in `recent`.
    recent_shadows: VecDeque<Option<ShadowComparison>>,
    /// The converged mean reward SERVING is held to.
    reference: Option<f64>,
    /// The agent against the fallback over the same episodes ([`AppLifecycle::fallback_reference`]).
    reference_comparison: Option<ShadowComparison>,
    /// ONLINE to retrain ([`AppLifecycle::retraining`]).
    retraining: bool,
    /// The last comparison of the agent with the fallback that a stage decision read
    /// ([`AppLifecycle::last_check`]).
    last_check: Option<String>,
    /// The last episode's acting policy violated the SLO in at least [`FAILING_SHARE`] of its
    /// intervals: rewards steady at that level are stuck, not converged.
    last_failed: bool,
    /// Episodes the current retraining has lasted (0 while not retraining).
    retrain_episodes: u32,
    /// Times retraining gave up since the app last reached SERVING ([`AppLifecycle::gave_up`]).
    gave_up: u32,
}

impl AppLifecycle {
    pub fn new(thresholds: LifecycleThresholds, bootstrapping: bool) -> Self {
        Self {
            stage: Stage::Initialized,
            fixed: false,
            thresholds,
            bootstrapping,
            may_retrain: true,
            retrains_where_rules_fail: true,
            failing: 0,
            behind: 0,
            recent: VecDeque::new(),
            recent_shadows: VecDeque::new(),
            reference: None,
            reference_comparison: None,
            retraining: false,
            last_check: None,
            last_failed: false,
            rules_failed: false,
            retrain_episodes: 0,
            gave_up: 0,
        }
    }

    /// A lifecycle held in `stage` whatever happens: for training a reference policy (ONLINE)
    /// or evaluating one (SERVING) with everything else the manager does unchanged.
    pub fn fixed(thresholds: LifecycleThresholds, stage: Stage) -> Self {
        Self { stage, fixed: true, ..Self::new(thresholds, false) }
    }

    /// The same lifecycle except that SERVING is final: no retraining however rewards move,
    /// nor where the rules fail (the `no-retrain` ablation of AWARE's Figure 9).
    pub fn without_retraining(mut self) -> Self {
        self.may_retrain = false;
        self
    }

    /// The same lifecycle except that an app whose rules fail ([`FAILING_SHARE`]) is not handed
    /// to the learning agent for it: the live decider's while it has no faithful replay of the
    /// fallback to hand the app back on should the agent do worse
    /// ([`AppLifecycle::set_retrains_where_rules_fail`]).
    pub fn holding_where_rules_fail(mut self) -> Self {
        self.retrains_where_rules_fail = false;
        self
    }

    /// Whether an app whose rules fail is handed to the learning agent from now on
    /// ([`AppLifecycle::holding_where_rules_fail`] is `false`): the live decider's, per window,
    /// as it has a replay to hand the app back on or not.
    pub fn set_retrains_where_rules_fail(&mut self, on: bool) {
        self.retrains_where_rules_fail = on;
    }

    pub fn stage(&self) -> Stage {
        self.stage
    }

    /// The converged reward SERVING is held to, once reached.
    pub fn reference(&self) -> Option<f64> {
        self.reference
    }

    /// ONLINE to retrain (until the stage next changes), because SERVING's rewards degraded or
    /// the rules failed ([`FAILING_SHARE`]): the workload moved away from what the agent
    /// learned, or is one the rules it learned from cannot serve, so it learns again from what
    /// it does there.
    pub fn retraining(&self) -> bool {
        self.retraining
    }

    /// Whether the app bootstraps: OFFLINE with the fallback first, and an agent that falls
    /// behind the fallback's replay goes back there.
    pub fn bootstrapping(&self) -> bool {
        self.bootstrapping
    }

    /// Times retraining gave up (`lifecycle.max_retrain_episodes` episodes without converging)
    /// since the app last reached SERVING: each makes the rules-failing trigger wait twice as
    /// many failing episodes before the app retrains again ([`AppLifecycle::failing_needed`]).
    pub fn gave_up(&self) -> u32 {
        self.gave_up
    }

    /// Consecutive failing episodes of the rules after which the app retrains:
    /// [`DEGRADATION_EPISODES`], doubled for every time retraining gave up since the app last
    /// served (at most 64 times as many). Where nothing within the bounds meets the SLO, the
    /// rules and the agent take turns ever more slowly instead of the agent exploring forever.
    pub fn failing_needed(&self) -> usize {
        DEGRADATION_EPISODES << self.gave_up.min(6)
    }

    /// The last comparison with the fallback that a stage decision read, with its numbers:
    /// `as good as the fallback: …` or `behind the fallback: …`. It says why an app is still
    /// OFFLINE (its agent has not yet matched the fallback on the app's recent traffic), and
    /// what an agent acting for it last earned beside it. `None` before the first.
    pub fn last_check(&self) -> Option<&str> {
        self.last_check.as_deref()
    }

    /// The agent against the fallback in `s`, remembered as [`AppLifecycle::last_check`]:
    /// whether it is as good, and the numbers that say so.
    fn check(&mut self, s: &ShadowComparison) -> (bool, String) {
        let (as_good, numbers) = self.as_good(s);
        let verdict = if as_good { "as good as the fallback" } else { "behind the fallback" };
        self.last_check = Some(format!("{verdict}: the agent earned {numbers}"));
        (as_good, numbers)
    }

    /// No comparison this episode, and why (kept as [`AppLifecycle::last_check`]).
    pub fn unchecked(&mut self, why: &str) {
        self.last_check = Some(format!("not checked: {why}"));
    }

    /// INITIALIZED → OFFLINE or ONLINE; `None` once started.
    pub fn start(&mut self) -> Option<Transition> {
        if self.stage != Stage::Initialized {
            return None;
        }
        let (to, reason) = if self.bootstrapping {
            (Stage::Offline, "bootstrapping: the fallback acts while the agent learns from it".to_string())
        } else {
            (Stage::Online, "bootstrapping is off: the agent acts and learns from the start".to_string())
        };
        Some(self.enter(to, reason))
    }

    /// The end of an episode: `outcome` is what the acting policy earned; `shadow` the agent
    /// against the fallback on the same traffic — while OFFLINE the agent run greedily in the
    /// shadow, while ONLINE or SERVING the agent as it acted (`outcome`).
    pub fn episode_end(&mut self, outcome: EpisodeOutcome, shadow: Option<ShadowComparison>) -> Option<Transition> {
        self.remember([(outcome.mean_reward, shadow)]);
        self.last_failed = failed(&outcome);
        if self.retraining {
            self.retrain_episodes += 1;
        }
        if let Some(t) = self.rules_failing(&outcome, shadow.as_ref()) {
            return Some(t);
        }
        let t = self.decide(shadow);
        if t.is_some() {
            return t;
        }
        self.give_up(&outcome)
    }

    /// Retraining that has lasted `lifecycle.max_retrain_episodes` episodes without converging
    /// gives up: with bootstrapping the fallback serves the app again (OFFLINE, the agent
    /// learning from it and handed the app back by the bootstrapping check), without it the
    /// agent stops exploring and acts greedily (ONLINE, not retraining). Either way the next
    /// retraining the rules' failure starts waits twice as long ([`AppLifecycle::failing_needed`]).
    fn give_up(&mut self, last: &EpisodeOutcome) -> Option<Transition> {
        let cap = self.thresholds.max_retrain_episodes.max(1);
        if !(self.stage == Stage::Online && self.retraining && self.retrain_episodes >= cap) {
            return None;
        }
        let (mean, cv) = mean_and_cv(&self.recent);
        let what = format!(
            "retraining gave up: not converged in {cap} episodes (lifecycle.max_retrain_episodes; the last {} episodes' mean {mean:.4}, coefficient of variation {cv:.4}; the last violated the SLO in {} of {} intervals)",
            self.recent.len(),
            last.slo_violations,
            last.intervals
        );
        self.gave_up += 1;
        let wait = self.failing_needed();
        let (to, then) = if self.bootstrapping {
            (Stage::Offline, "the fallback serves while the agent learns from it")
        } else {
            (Stage::Online, "the agent acts greedily, no longer exploring")
        };
        self.reference = None;
        Some(self.enter(
            to,
            format!(
                "{what}; {then}; the rules failing starts retraining again only after {wait} failing episodes in a row"
            ),
        ))
    }

    /// The stage decision of an episode in which the rules did not fail (see
    /// [`AppLifecycle::episode_end`]).
    fn decide(&mut self, shadow: Option<ShadowComparison>) -> Option<Transition> {
        match self.stage {
            Stage::Initialized => None,
            Stage::Offline => {
                let s = shadow?;
                let (as_good, numbers) = self.check(&s);
                as_good.then(|| self.enter(Stage::Online, format!("agent earned {numbers}")))
            }
            Stage::Serving if !self.may_retrain => None,
            Stage::Online | Stage::Serving
                if self.bootstrapping && shadow.is_some_and(|s| self.behind_the_rules(&s)) =>
            {
                let s = shadow?;
                let (_, numbers) = self.check(&s);
                // One episode behind can be the shadow's noise (a one-app replay of the
                // episode); two in a row are a trend, as for the degradation check.
                self.behind += 1;
                if self.behind < DEGRADATION_EPISODES {
                    return self.serving_or_degraded();
                }
                self.reference = None;
                // Retraining found nothing that serves where the rules fail, at more cost:
                // as if it had given up, the next retraining waits twice as long.
                let unserved = if self.rules_failed && self.dearer_where_neither_serves(&s) {
                    self.gave_up += 1;
                    format!(
                        "; neither served the workload, and the agent at more cost (retraining counts as given up: the rules failing starts it again only after {} failing episodes in a row)",
                        self.failing_needed()
                    )
                } else {
                    String::new()
                };
                Some(self.enter(
                    Stage::Offline,
                    format!(
                        "agent fell behind the fallback for {DEGRADATION_EPISODES} episodes: in the last it earned {numbers}{unserved}"
                    ),
                ))
            }
            Stage::Online | Stage::Serving => {
                self.behind = 0;
                if let Some(s) = shadow.filter(|_| self.bootstrapping) {
                    self.check(&s);
                }
                self.serving_or_degraded()
            }
        }
    }

    /// Counts an episode in which the rules failed, whatever the stage: the fallback acting
    /// (OFFLINE: `acted` is its own) violated the SLO in at least [`FAILING_SHARE`] of its
    /// intervals, or the acting agent did and so did the fallback replayed on the same traffic
    /// (ONLINE, SERVING: `shadow`'s fallback; without a replay the episode says nothing either
    /// way). After [`AppLifecycle::failing_needed`] such episodes in a row
    /// ([`DEGRADATION_EPISODES`] until retraining first gives up), whatever stages they were
    /// spent in, the app retrains (ONLINE, the agent exploring and learning from its own
    /// actions), unless it may not; an app already retraining (its rewards degraded) is only
    /// marked as one the rules failed.
    fn rules_failing(&mut self, acted: &EpisodeOutcome, shadow: Option<&ShadowComparison>) -> Option<Transition> {
        let fallback = match self.stage {
            Stage::Initialized => return None,
            Stage::Offline => None,
            Stage::Online | Stage::Serving => match shadow.filter(|_| self.bootstrapping) {
                Some(s) => Some(&s.fallback),
                None => return None,
            },
        };
        // A window the trigger is held on (the live decider's, with no faithful replay or
        // the agent acting) is no evidence either way: the run starts again after it.
        let both_failed = failed(acted) && fallback.is_none_or(failed);
        if !(self.retrains_where_rules_fail && both_failed) {
            self.failing = 0;
            return None;
        }
        self.failing += 1;
        if self.failing < self.failing_needed() || !self.may_retrain {
            return None;
        }
        if self.retraining {
            // Retraining already (SERVING's rewards degraded): the rules failing on the changed
            // workload too is no new stage, but their proposal is no yardstick for it any
            // more ([`AppLifecycle::rules_failed`]: the guard's ceiling over it may be lifted,
            // [`AppLifecycle::ceiling_lifted`]).
            // Kept only at the trigger's count, so a retraining agent failing where the rules
            // serve is still measured by them.
            self.rules_failed = true;
            self.failing = 0;
            return None;
        }
        let share = |o: &EpisodeOutcome| format!("{} of {} intervals", o.slo_violations, o.intervals);
        let what = match fallback {
            None => format!("the fallback violated the SLO in {}", share(acted)),
            Some(f) => format!(
                "the agent violated the SLO in {} and the fallback on the same traffic in {}",
                share(acted),
                share(f)
            ),
        };
        self.reference = None;
        let t = self.enter(
            Stage::Online,
            format!(
                "the rules cannot serve this workload: {what} (at least {:.0} %) in each of the last {} episodes; the agent retrains on it",
                FAILING_SHARE * 100.0,
                self.failing
            ),
        );
        self.retraining = true;
        self.rules_failed = true;
        self.failing = 0;
        Some(t)
    }

    /// The ONLINE convergence test and the SERVING degradation test on the rewards so far.
    fn serving_or_degraded(&mut self) -> Option<Transition> {
        let window = self.thresholds.reward_window.max(1) as usize;
        match self.stage {
            Stage::Initialized | Stage::Offline => None,
            Stage::Online => {
                if self.recent.len() < window {
                    return None;
                }
                let (mean, cv) = mean_and_cv(&self.recent);
                // Rewards steady because every interval misses the SLO (each at its shortfall, and
                // since session 58 its idle and unserved share) are an agent stuck where it cannot serve, not one that converged:
                // promoted, it served at that floor until the rules-failing trigger sent it
                // back two episodes later (`aware experiment fig9 --quick --seed 31`: "rewards
                // converged: coefficient of variation 0.0000 … (mean −0.6015)").
                (cv < self.thresholds.t_serving && !self.last_failed).then(|| {
                    self.reference = Some(mean);
                    // The agent against the fallback on the same episodes' traffic, where every
                    // one of them was compared with it.
                    let compared: Option<Vec<ShadowComparison>> = self.recent_shadows.iter().copied().collect();
                    let reference_comparison = compared.map(|c| ShadowComparison::pooled(&c));
                    let t = self.enter(
                        Stage::Serving,
                        format!(
                            "rewards converged: coefficient of variation {cv:.4} < t_serving {} over {window} episodes (mean {mean:.4})",
                            self.thresholds.t_serving
                        ),
                    );
                    self.reference_comparison = reference_comparison.filter(finite);
                    t
                })
            }
            Stage::Serving => {
                let reference = self.reference?;
                if self.recent.len() < DEGRADATION_EPISODES {
                    return None;
                }
                let last: f64 =
                    self.recent.iter().rev().take(DEGRADATION_EPISODES).sum::<f64>() / DEGRADATION_EPISODES as f64;
                let floor = reference - self.thresholds.t_var * reference.abs();
                if last >= floor {
                    return None;
                }
                if let Some(why) = self.the_traffics_dip(reference, last) {
                    self.last_check = Some(why);
                    return None;
                }
                self.reference = None;
                let t = self.enter(
                    Stage::Online,
                    format!(
                        "rewards degraded: mean {last:.4} over the last {DEGRADATION_EPISODES} episodes < {floor:.4} (converged {reference:.4}, t_var {})",
                        self.thresholds.t_var
                    ),
                );
                self.retraining = true;
                Some(t)
            }
        }
    }

    /// Why a fall of the agent's reward below SERVING's floor (mean `last` over the last
    /// [`DEGRADATION_EPISODES`] episodes, against `reference`) is the traffic's and not the
    /// agent's, or `None` where it may be the agent's. It is the traffic's when the fallback,
    /// replayed on the same episodes' traffic, fell as far: the agent's lead over the fallback
    /// (its reward less the fallback's) shrank by no more than `t_var` of the reference's
    /// magnitude since the reference was taken ([`AppLifecycle::fallback_reference`]), and
    /// the agent served as it did then (no episode violating the SLO in [`FAILING_SHARE`] of its
    /// intervals, no more violating intervals than the fallback's replay, and no larger share
    /// of violating intervals than over the reference's episodes: a lasting change that makes
    /// both violate more is a change the agent may learn to serve better). The reward rises and falls
    /// with the time of day on a workload that has not changed (at low load every pod idles
    /// more); retraining on such a dip explored on an app the agent served as well as ever:
    /// `aware run --apps 4 --steps 2000`, all nine retrainings on 21 seeds, one of which took
    /// an app from 46 pods of 1 core to 332 of 4 (`docs/results/lifecycle.md`, sessions 70
    /// and 71). Without the comparisons (bootstrapping off, or a reference taken before they
    /// were kept) every fall below the floor is the agent's, as in Algorithm 1.
    fn the_traffics_dip(&self, reference: f64, last: f64) -> Option<String> {
        let then = self.reference_comparison?;
        let fallback_reference = then.fallback.mean_reward;
        let shadows: Vec<ShadowComparison> =
            self.recent_shadows.iter().rev().take(DEGRADATION_EPISODES).copied().collect::<Option<_>>()?;
        if shadows.len() < DEGRADATION_EPISODES {
            return None;
        }
        let pooled = ShadowComparison::pooled(&shadows);
        let served = !shadows.iter().any(|s| failed(&s.agent))
            && pooled.agent.slo_violations <= pooled.fallback.slo_violations
            && pooled.agent.violating_share() <= then.agent.violating_share();
        let lead_then = reference - fallback_reference;
        let lead_now = last - pooled.fallback.mean_reward;
        let allowed = self.thresholds.t_var * reference.abs();
        (served && lead_then - lead_now <= allowed).then(|| {
            format!(
                "rewards fell with the traffic: mean {last:.4} over the last {DEGRADATION_EPISODES} episodes (converged {reference:.4}), the fallback's on the same traffic {:.4} (then {fallback_reference:.4}); the agent's lead over it {lead_now:.4} against {lead_then:.4} (at most {allowed:.4} less, t_var {}), with {} SLO-violating intervals against {}: not retrained",
                pooled.fallback.mean_reward,
                self.thresholds.t_var,
                pooled.agent.slo_violations,
                pooled.fallback.slo_violations
            )
        })
    }

    /// The fallback's mean reward, replayed on the traffic of the episodes SERVING's reference
    /// was taken over (`None` where one of them had no comparison, or outside SERVING): what
    /// tells a dip of the traffic from a degraded agent. The lifecycle keeps the whole
    /// comparison of those episodes, pooled (the agent's violations too).
    pub fn fallback_reference(&self) -> Option<f64> {
        self.reference_comparison.map(|c| c.fallback.mean_reward)
    }

    /// Whether the agent's outcome in `s` is as good as the fallback's (at least `t_online` of
    /// its reward, no more SLO-violating intervals and, where both reservations are measured,
    /// at most `max(1, 2 − t_online)` times its core-seconds unless it violated the SLO less
    /// often: `t_online` 1 asks for no more, 0.95 lets 5 % more through as it lets 5 % less
    /// reward, and above 1, where the reward asks for more, no more core-seconds), and the
    /// numbers that say so.
    ///
    /// The last part is the operator's test: an agent with as many violations as the fallback
    /// and more core-seconds loses to it, whatever its reward. The reward charged no cores in a
    /// violating interval until session 58 (now it charges the idle ones) and pays for a
    /// shallower violation, so where the SLO cannot be met (every interval violated by both, as
    /// in `fig9`'s overloads) an agent reserving more earned more than the fallback and was
    /// handed the app on that alone, to fall behind it two episodes later (`aware experiment
    /// fig9 --quick --seed 20`: promotions "with 300 SLO-violating intervals against 300", then
    /// back to OFFLINE, over and over).
    fn as_good(&self, s: &ShadowComparison) -> (bool, String) {
        let t = self.thresholds.t_online;
        let needed = s.fallback.mean_reward - (1.0 - t) * s.fallback.mean_reward.abs();
        let good_enough = s.agent.mean_reward >= needed;
        let no_more_violations = s.agent.slo_violations <= s.fallback.slo_violations;
        let mut numbers = format!(
            "{:.4} per interval against the fallback's {:.4} (needed {needed:.4} = t_online {t}) with {} SLO-violating intervals against {}",
            s.agent.mean_reward, s.fallback.mean_reward, s.agent.slo_violations, s.fallback.slo_violations
        );
        let no_dearer = match (s.agent.core_seconds, s.fallback.core_seconds) {
            (Some(agent), Some(fallback)) => {
                let allowed = fallback * (2.0 - t).max(1.0);
                numbers.push_str(&format!(
                    ", reserving {agent:.0} core-seconds against {fallback:.0} (allowed {allowed:.0} with as many)"
                ));
                s.agent.slo_violations < s.fallback.slo_violations || agent <= allowed * (1.0 + COST_TOLERANCE)
            }
            _ => true,
        };
        (good_enough && no_more_violations && no_dearer, numbers)
    }

    /// Whether the agent fell behind the fallback in `s`: by the bootstrapping check's test
    /// ([`AppLifecycle::as_good`]), or, once the rules have failed acting for the app
    /// ([`AppLifecycle::rules_failed`]), only by violating the SLO in more intervals than the
    /// fallback's replay. A one-episode replay that starts from the allocation the agent built
    /// can show the rules serving where, acting on from there, they did not: handed back for
    /// reserving more at as many violations, apps went to the fallback, which violated the
    /// SLO in 100 of 100 intervals of the next two episodes, and back to retraining, every
    /// four episodes (`aware experiment fig9 --quick --episodes 40 --seed 31`,
    /// `load-low-to-high`).
    fn behind_the_rules(&self, s: &ShadowComparison) -> bool {
        if self.rules_failed {
            s.agent.slo_violations > s.fallback.slo_violations || self.dearer_where_neither_serves(s)
        } else {
            !self.as_good(s).0
        }
    }

    /// Whether, the rules having failed for the app, neither the agent nor the fallback's
    /// replay served the workload (each violated the SLO in at least [`FAILING_SHARE`] of its
    /// intervals), the agent in as many intervals or more, and the agent reserved more
    /// core-seconds than the bootstrapping check allows with as many: it loses to the rules in
    /// the operator's terms, and what it learned retraining has not found an allocation that
    /// serves. Retraining there explores on, and its exploration only ever grows the app (each
    /// step up passes, a step down is held by the guard's stabilisation window: see
    /// [`crate::guard::Guard::set_exploring`]): `aware experiment fig9 --quick --seed 38`,
    /// `io-payload-up`, an app retraining went from 1 to 4 cores a pod and from 7 to 16
    /// replicas, violating the SLO in every interval as the rules did; AWARE dropped 9.3 M
    /// requests in that scenario, `no-retrain` 0.1 M and MPA 0.2 M. The replay's own start (the allocation the
    /// agent built) is what made a replay that serves untrustworthy here
    /// ([`AppLifecycle::behind_the_rules`]); a replay that fails from there too does not have
    /// that doubt.
    fn dearer_where_neither_serves(&self, s: &ShadowComparison) -> bool {
        let allowed = (2.0 - self.thresholds.t_online).max(1.0) * (1.0 + COST_TOLERANCE);
        failed(&s.agent)
            && failed(&s.fallback)
            && s.agent.slo_violations >= s.fallback.slo_violations
            && matches!((s.agent.core_seconds, s.fallback.core_seconds), (Some(a), Some(f)) if a > f * allowed)
    }

    /// Whether the rules failed acting for this app ([`FAILING_SHARE`]) and it has not been
    /// handed back to them since (its retraining so caused, or marked so where they failed
    /// beside a retraining its rewards' fall started, and the SERVING that follows).
    pub fn rules_failed(&self) -> bool {
        self.rules_failed
    }

    /// Whether the guard's ceiling over the fallback's proposal is lifted for this app as it
    /// acts: the rules have failed it ([`AppLifecycle::rules_failed`]) and, in the last
    /// remembered episode's comparison on the same traffic (none right after a stage change),
    /// the agent violated the SLO in fewer intervals than the fallback's replay or earned more.
    /// That comparison is the agent's greedy policy replayed without the ceiling only for an
    /// ONLINE app retraining and judged greedily; in SERVING, and ONLINE where the agent is not
    /// judged greedily, it is the episode as the agent acted, under the ceiling (a known gap:
    /// `docs/results/lifecycle.md`, session 87's review). Where growth beyond what the rules
    /// propose served no better, what acts stays under the ceiling: lifted whenever the rules
    /// had failed, retraining agents reserved up to 7.5 times the fallback's core-seconds while
    /// both violated the SLO in every interval (`aware experiment fig9 --quick --seed 62`,
    /// `payload-up`), and the ceiling kept where that growth bought nothing gave fewer
    /// SLO-violating intervals at fewer core-seconds on each of seeds 61–64.
    pub fn ceiling_lifted(&self) -> bool {
        self.rules_failed
            && self.recent_shadows.back().copied().flatten().is_some_and(|s| {
                s.agent.slo_violations < s.fallback.slo_violations || s.agent.mean_reward > s.fallback.mean_reward
            })
    }

    /// What a checkpoint keeps of this lifecycle (its thresholds and switches come from the
    /// profile and the run's configuration instead).
    pub fn snapshot(&self) -> LifecycleState {
        LifecycleState {
            stage: self.stage,
            behind: self.behind,
            recent: self.recent.iter().copied().collect(),
            recent_shadows: self.recent_shadows.iter().copied().collect(),
            reference: self.reference,
            reference_comparison: self.reference_comparison,
            retraining: self.retraining,
            failing: self.failing,
            rules_failed: self.rules_failed,
            retrain_episodes: self.retrain_episodes,
            gave_up: self.gave_up,
        }
    }

    /// Takes up a checkpointed lifecycle; the transition from the stage it had to the
    /// restored one (`None` when they agree), with `reason`. A held lifecycle
    /// ([`AppLifecycle::fixed`]) stays where it is held.
    pub fn restore(&mut self, state: &LifecycleState, reason: String) -> Option<Transition> {
        if self.fixed {
            return None;
        }
        let from = self.stage;
        self.behind = state.behind;
        self.failing = state.failing;
        self.recent.clear();
        self.recent_shadows.clear();
        // Comparisons kept beside the rewards they belong to; a checkpoint written before
        // they were kept (or whose lists disagree) has none.
        let shadows = if state.recent_shadows.len() == state.recent.len() {
            state.recent_shadows.clone()
        } else {
            vec![None; state.recent.len()]
        };
        self.remember(state.recent.iter().copied().zip(shadows));
        self.reference = state.reference.filter(|r| r.is_finite());
        self.reference_comparison = state.reference_comparison.filter(|c| finite(c) && self.reference.is_some());
        // SERVING without the reference it is held to could never notice a degradation, and
        // OFFLINE without bootstrapping has no way out: both resume ONLINE. INITIALIZED (a
        // lifecycle that never started) starts as a fresh one would.
        self.stage = match state.stage {
            Stage::Serving if self.reference.is_none() => Stage::Online,
            Stage::Offline if !self.bootstrapping => Stage::Online,
            Stage::Initialized if self.bootstrapping => Stage::Offline,
            Stage::Initialized => Stage::Online,
            stage => stage,
        };
        // A `no-retrain` lifecycle never retrains, whatever the checkpoint says.
        self.retraining = state.retraining && self.may_retrain && self.stage == Stage::Online;
        self.rules_failed = state.rules_failed && self.may_retrain && self.stage != Stage::Offline;
        self.retrain_episodes = if self.retraining { state.retrain_episodes } else { 0 };
        self.gave_up = state.gave_up;
        (from != self.stage).then_some(Transition { from, to: self.stage, reason })
    }

    /// Keeps the finite ones of `rewards` among the last `reward_window` episodes' rewards,
    /// each with its episode's comparison with the fallback.
    fn remember(&mut self, rewards: impl IntoIterator<Item = (f64, Option<ShadowComparison>)>) {
        let window = self.thresholds.reward_window.max(1) as usize;
        for (r, shadow) in rewards.into_iter().filter(|(r, _)| r.is_finite()) {
            self.recent.push_back(r);
            // A comparison with a reward that is not a number says nothing (and would not
            // read back from a checkpoint).
            self.recent_shadows.push_back(shadow.filter(finite));
            if self.recent.len() > window {
                self.recent.pop_front();
                self.recent_shadows.pop_front();
            }
        }
    }

    fn enter(&mut self, to: Stage, reason: String) -> Transition {
        let from = self.stage;
        self.stage = to;
        self.recent.clear();
        self.recent_shadows.clear();
        if to != Stage::Serving {
            self.reference_comparison = None;
        }
        // Failing episodes counted while retraining only mark the app as one the rules failed;
        // they start no streak after it, as before they were counted at all.
        if self.retraining {
            self.failing = 0;
        }
        self.behind = 0;
        self.retraining = false;
        self.retrain_episodes = 0;
        if to == Stage::Offline {
            self.rules_failed = false;
        }
        if to == Stage::Serving {
            self.gave_up = 0;
        }
        Transition { from, to, reason }
    }
}

/// Whether both sides' rewards of a comparison are numbers.
fn finite(c: &ShadowComparison) -> bool {
    c.agent.mean_reward.is_finite() && c.fallback.mean_reward.is_finite()
}

/// Whether an episode violated the SLO in at least [`FAILING_SHARE`] of its intervals.
fn failed(o: &EpisodeOutcome) -> bool {
    o.intervals > 0 && o.violating_share() >= FAILING_SHARE
}

/// Mean and coefficient of variation (population standard deviation over |mean|; infinite
/// when the mean is zero and the values differ).
fn mean_and_cv(values: &VecDeque<f64>) -> (f64, f64) {
    let n = values.len().max(1) as f64;
    let mean = values.iter().sum::<f64>() / n;
    let var = values.iter().map(|v| (v - mean).powi(2)).sum::<f64>() / n;
    let sd = var.sqrt();
    let cv = if sd == 0.0 {
        0.0
    } else if mean == 0.0 {
        f64::INFINITY
    } else {
        sd / mean.abs()
    };
    (mean, cv)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn thresholds(window: u32) -> LifecycleThresholds {
        LifecycleThresholds {
            t_online: 0.95,
            t_serving: 0.05,
            t_var: 0.1,
            reward_window: window,
            max_retrain_episodes: 40,
        }
    }

    /// Retraining where nothing meets the SLO gives up after `max_retrain_episodes`: the
    /// fallback serves again, and each give-up doubles the failing episodes the rules' trigger
    /// waits for before the agent explores again; a checkpoint keeps the count, and reaching
    /// SERVING clears it.
    #[test]
    fn retraining_that_never_converges_gives_up_and_backs_off() {
        let cap = 4;
        let mut a = AppLifecycle::new(LifecycleThresholds { max_retrain_episodes: cap, ..thresholds(3) }, true);
        a.start();
        // Nothing serves this workload: the fallback and the agent both fail every episode.
        let failing = ShadowComparison { agent: ep(-0.5, 100), fallback: ep(-0.3, 100) };
        // The fallback fails for `needed` episodes in a row; then the agent explores for `cap`
        // episodes (rewards swinging: never converged), and gives up.
        for (round, needed) in [(1, 2), (2, 4), (3, 8)] {
            assert_eq!(a.failing_needed(), needed, "round {round}");
            for _ in 1..needed {
                assert!(a.episode_end(ep(-0.3, 100), None).is_none(), "round {round}: too few failing episodes");
            }
            let t = a.episode_end(ep(-0.3, 100), None).unwrap();
            assert_eq!((t.from, t.to), (Stage::Offline, Stage::Online), "round {round}");
            assert!(t.reason.contains(&format!("in each of the last {needed} episodes")), "{}", t.reason);
            assert!(a.retraining());
            for k in 1..cap {
                let r = if k % 2 == 0 { -0.1 } else { -0.6 };
                assert!(a.episode_end(ep(r, 90), Some(failing)).is_none(), "round {round}, episode {k}");
                assert!(a.retraining());
            }
            let t = a.episode_end(ep(-0.6, 90), Some(failing)).unwrap();
            assert_eq!((t.from, t.to), (Stage::Online, Stage::Offline), "round {round}");
            assert!(
                t.reason.contains(&format!("retraining gave up: not converged in {cap} episodes"))
                    && t.reason.contains("the last violated the SLO in 90 of 100 intervals")
                    && t.reason.contains(&format!("only after {} failing episodes", needed * 2)),
                "{}",
                t.reason
            );
            assert!(!a.retraining() && !a.rules_failed());
            assert_eq!(a.gave_up(), round);
        }
        // A checkpoint keeps how often it gave up, and how far a retraining has gone.
        let mut restored = AppLifecycle::new(thresholds(3), true);
        restored.start();
        restored.restore(&a.snapshot(), "restored".into());
        assert_eq!((restored.gave_up(), restored.failing_needed()), (3, 16));
        let mid = LifecycleState { stage: Stage::Online, retraining: true, retrain_episodes: 39, ..a.snapshot() };
        let mut restored = AppLifecycle::new(thresholds(3), true);
        restored.start();
        restored.restore(&mid, "restored".into());
        assert_eq!(restored.snapshot().retrain_episodes, 39);
        assert_eq!(restored.episode_end(ep(-0.6, 90), Some(failing)).unwrap().to, Stage::Offline);
        // An old checkpoint, without the fields, restores as never having given up.
        let old = r#"{"stage":"offline","behind":0,"recent":[],"reference":null,"retraining":false,"failing":0,"rules_failed":false}"#;
        let old: LifecycleState = serde_json::from_str(old).unwrap();
        assert_eq!((old.gave_up, old.retrain_episodes), (0, 0));

        // Back OFFLINE the agent can be handed the app again, and a SERVING app has converged:
        // the backoff is cleared.
        let good = ShadowComparison { agent: ep(0.5, 0), fallback: ep(0.4, 0) };
        assert_eq!(a.episode_end(ep(0.4, 0), Some(good)).unwrap().to, Stage::Online);
        for _ in 0..2 {
            assert!(a.episode_end(ep(0.5, 0), Some(good)).is_none());
        }
        assert_eq!(a.episode_end(ep(0.5, 0), Some(good)).unwrap().to, Stage::Serving);
        assert_eq!((a.gave_up(), a.failing_needed()), (0, DEGRADATION_EPISODES));
    }

    /// Without bootstrapping there is no fallback to hand the app to: retraining that gives up
    /// leaves the agent acting greedily (ONLINE, no longer retraining), which may converge.
    #[test]
    fn without_bootstrapping_retraining_gives_up_to_the_greedy_agent() {
        let mut a = AppLifecycle::new(LifecycleThresholds { max_retrain_episodes: 3, ..thresholds(3) }, false);
        a.start();
        for _ in 0..2 {
            assert!(a.episode_end(ep(0.5, 0), None).is_none());
        }
        assert_eq!(a.episode_end(ep(0.5, 0), None).unwrap().to, Stage::Serving);
        assert!(a.episode_end(ep(0.1, 0), None).is_none());
        let t = a.episode_end(ep(0.1, 0), None).unwrap();
        assert_eq!(t.to, Stage::Online);
        assert!(a.retraining());
        assert!(a.episode_end(ep(0.2, 0), None).is_none());
        assert!(a.episode_end(ep(0.4, 0), None).is_none());
        let t = a.episode_end(ep(0.1, 0), None).unwrap();
        assert_eq!((t.from, t.to), (Stage::Online, Stage::Online));
        assert!(t.reason.contains("retraining gave up") && t.reason.contains("no longer exploring"), "{}", t.reason);
        assert!(!a.retraining());
        assert_eq!(a.gave_up(), 1);
        // Acting greedily it converges, and serves.
        for _ in 0..2 {
            assert!(a.episode_end(ep(0.3, 0), None).is_none());
        }
        assert_eq!(a.episode_end(ep(0.3, 0), None).unwrap().to, Stage::Serving);
        assert_eq!(a.gave_up(), 0);
    }

    fn ep(mean_reward: f64, slo_violations: u64) -> EpisodeOutcome {
        EpisodeOutcome { mean_reward, slo_violations, intervals: 100, core_seconds: None }
    }

    fn costed(mean_reward: f64, slo_violations: u64, core_seconds: f64) -> EpisodeOutcome {
        EpisodeOutcome { mean_reward, slo_violations, intervals: 100, core_seconds: Some(core_seconds) }
    }

    /// Once the rules have failed acting for an app, its agent is handed back to them only for
    /// violating the SLO more often than their replay, not for reserving more at as many
    /// violations; handed back, the app is judged by the full test again.
    #[test]
    fn an_app_the_rules_failed_is_handed_back_only_for_more_violations() {
        // A window no episode here fills: nothing converges.
        let mut a = AppLifecycle::new(thresholds(10), true);
        a.start();
        let failing = ShadowComparison { agent: ep(-0.5, 100), fallback: ep(-0.3, 100) };
        assert!(a.episode_end(ep(-0.3, 100), Some(failing)).is_none());
        assert_eq!(a.episode_end(ep(-0.3, 100), Some(failing)).unwrap().to, Stage::Online);
        assert!(a.retraining() && a.rules_failed());
        let dearer = ShadowComparison { agent: costed(0.2, 2, 900.0), fallback: costed(0.4, 2, 600.0) };
        assert!(!a.as_good(&dearer).0, "behind by the bootstrapping check's test");
        for _ in 0..2 {
            assert!(a.episode_end(ep(0.1, 10), Some(dearer)).is_none());
        }
        assert_eq!(a.stage(), Stage::Online);
        // A checkpoint keeps it.
        let mut restored = AppLifecycle::new(thresholds(3), true);
        restored.start();
        restored.restore(&a.snapshot(), "restored".into());
        assert!(restored.rules_failed());
        let worse = ShadowComparison { agent: costed(0.2, 5, 600.0), fallback: costed(0.4, 2, 600.0) };
        assert!(a.episode_end(ep(0.1, 10), Some(worse)).is_none());
        assert_eq!(a.episode_end(ep(0.1, 10), Some(worse)).unwrap().to, Stage::Offline);
        assert!(!a.rules_failed());
        // Where the rules never failed, the dearer agent is handed back as before.
        let mut b = AppLifecycle::new(thresholds(3), true);
        b.start();
        let level = ShadowComparison { agent: costed(0.4, 2, 600.0), fallback: costed(0.4, 2, 600.0) };
        assert_eq!(b.episode_end(ep(0.4, 2), Some(level)).unwrap().to, Stage::Online);
        assert!(b.episode_end(ep(0.4, 2), Some(dearer)).is_none());
        assert_eq!(b.episode_end(ep(0.4, 2), Some(dearer)).unwrap().to, Stage::Offline);
    }

    /// The ceiling over the fallback's proposal is lifted only for an app the rules failed, and
    /// only while the last episode's replay showed the agent's greedy policy, without it,
    /// serving better than the fallback: fewer SLO-violating intervals or more reward. Not in
    /// the first episode after the rules failed (no comparison yet), not after an episode
    /// without one; a checkpoint keeps the answer.
    #[test]
    fn the_ceiling_is_lifted_only_where_growth_beyond_the_rules_served_better() {
        let mut a = AppLifecycle::new(thresholds(10), true);
        a.start();
        let better = ShadowComparison { agent: ep(-0.2, 100), fallback: ep(-0.3, 100) };
        // Where the rules serve, a better agent lifts nothing.
        assert!(a.episode_end(ep(0.4, 0), Some(better)).is_some_and(|t| t.to == Stage::Online));
        assert!(!a.rules_failed() && !a.ceiling_lifted());
        assert!(a.episode_end(ep(0.4, 0), Some(better)).is_none());
        assert!(!a.rules_failed() && !a.ceiling_lifted(), "a comparison that would lift it, without the rules failing");
        let mut a = AppLifecycle::new(thresholds(10), true);
        a.start();
        let failing = ShadowComparison { agent: ep(-0.5, 100), fallback: ep(-0.3, 100) };
        assert!(a.episode_end(ep(-0.3, 100), Some(failing)).is_none());
        assert_eq!(a.episode_end(ep(-0.3, 100), Some(failing)).unwrap().to, Stage::Online);
        assert!(a.rules_failed() && !a.ceiling_lifted(), "no comparison since the rules failed");
        let cases = [
            (Some(failing), false),
            (Some(better), true),
            (Some(ShadowComparison { agent: ep(-0.6, 90), fallback: ep(-0.3, 100) }), true),
            (Some(ShadowComparison { agent: ep(-0.3, 100), fallback: ep(-0.3, 100) }), false),
            (Some(better), true),
            (None, false),
        ];
        for (shadow, lifted) in cases {
            assert!(a.episode_end(ep(-0.3, 10), shadow).is_none());
            assert_eq!(a.ceiling_lifted(), lifted, "{shadow:?}");
        }
        assert!(a.episode_end(ep(-0.3, 10), Some(better)).is_none());
        let mut restored = AppLifecycle::new(thresholds(10), true);
        restored.start();
        restored.restore(&a.snapshot(), "restored".into());
        assert!(restored.ceiling_lifted());
    }

    /// Where the rules failed and neither the retraining agent nor the fallback's replay serves
    /// the workload, an agent violating as often at more than the allowed core-seconds is
    /// behind: handed back after two such episodes, and the next retraining waits twice as
    /// long, as after giving up. At no more cost, or where the replay serves, it retrains on.
    #[test]
    fn where_neither_serves_a_dearer_retraining_agent_is_handed_back_as_given_up() {
        let retraining = || {
            let mut a = AppLifecycle::new(thresholds(10), true);
            a.start();
            let failing = ShadowComparison { agent: ep(-0.5, 100), fallback: ep(-0.3, 100) };
            a.episode_end(ep(-0.3, 100), Some(failing));
            assert_eq!(a.episode_end(ep(-0.3, 100), Some(failing)).unwrap().to, Stage::Online);
            assert!(a.retraining() && a.rules_failed() && a.failing_needed() == 2);
            a
        };
        let mut a = retraining();
        let dearer = ShadowComparison { agent: costed(-0.9, 100, 900.0), fallback: costed(-0.3, 100, 600.0) };
        assert!(a.episode_end(ep(-0.9, 100), Some(dearer)).is_none());
        let t = a.episode_end(ep(-0.9, 100), Some(dearer)).unwrap();
        assert_eq!(t.to, Stage::Offline);
        assert!(t.reason.contains("neither served") && t.reason.contains("after 4 failing episodes"), "{}", t.reason);
        assert_eq!((a.gave_up(), a.failing_needed()), (1, 4));
        // As dear as allowed, or the replay serving (the replay's start is then in doubt), or
        // the agent serving where the replay does not: it retrains on.
        for other in [
            ShadowComparison { agent: costed(-0.9, 100, 600.0), fallback: costed(-0.3, 100, 600.0) },
            ShadowComparison { agent: costed(0.2, 10, 900.0), fallback: costed(0.3, 10, 600.0) },
            ShadowComparison { agent: costed(0.1, 40, 900.0), fallback: costed(-0.3, 100, 600.0) },
        ] {
            let mut b = retraining();
            for _ in 0..3 {
                assert!(b.episode_end(ep(-0.9, 100), Some(other)).is_none(), "{other:?}");
            }
            assert!(b.retraining() && b.gave_up() == 0, "{other:?}");
        }
    }

    #[test]
    fn a_restored_lifecycle_never_lands_where_it_cannot_move() {
        let state = |stage, reference| LifecycleState {
            behind: 1,
            recent: vec![0.5, f64::NAN, 0.6],
            ..LifecycleState::fresh(stage, reference)
        };
        let restored = |bootstrapping: bool, s: LifecycleState| {
            let mut l = AppLifecycle::new(thresholds(3), bootstrapping);
            l.start();
            let t = l.restore(&s, "restored".into());
            (l.stage(), t.map(|t| (t.from, t.to)))
        };
        let on = Stage::Offline;
        assert_eq!(restored(true, state(Stage::Serving, Some(0.55))), (Stage::Serving, Some((on, Stage::Serving))));
        assert_eq!(restored(true, state(Stage::Serving, None)), (Stage::Online, Some((on, Stage::Online))));
        assert_eq!(restored(true, state(Stage::Serving, Some(f64::NAN))).0, Stage::Online);
        assert_eq!(restored(true, state(Stage::Offline, None)), (Stage::Offline, None));
        assert_eq!(restored(false, state(Stage::Offline, None)), (Stage::Online, None));
        assert_eq!(restored(true, state(Stage::Initialized, None)), (Stage::Offline, None));
        // Non-finite rewards are dropped; a held lifecycle stays held.
        let mut l = AppLifecycle::new(thresholds(3), true);
        l.restore(&state(Stage::Online, None), "restored".into());
        assert_eq!(l.snapshot().recent, vec![0.5, 0.6]);
        let mut held = AppLifecycle::fixed(thresholds(3), Stage::Online);
        assert!(held.restore(&state(Stage::Serving, Some(0.5)), "restored".into()).is_none());
        assert_eq!(held.stage(), Stage::Online);
    }

    #[test]
    fn starts_offline_only_when_bootstrapping() {
        let mut a = AppLifecycle::new(thresholds(3), true);
        assert_eq!(a.start().unwrap().to, Stage::Offline);
        assert!(a.start().is_none());
        let mut b = AppLifecycle::new(thresholds(3), false);
        assert_eq!(b.start().unwrap().to, Stage::Online);
    }

    /// (agent reward, agent violations, fallback reward, fallback violations, goes online)
    #[test]
    fn offline_to_online_table() {
        let cases: [(f64, u64, f64, u64, bool); 7] = [
            (0.50, 3, 0.50, 3, true),    // as good
            (0.48, 3, 0.50, 3, true),    // within 5 %
            (0.47, 3, 0.50, 3, false),   // 6 % short
            (0.60, 4, 0.50, 3, false),   // more reward but more violations
            (0.60, 0, 0.50, 3, true),    // better on both
            (-0.11, 0, -0.10, 0, false), // negative rewards: 10 % worse
            (-0.104, 0, -0.10, 0, true), // negative rewards: 4 % worse
        ];
        for (ar, av, fr, fv, online) in cases {
            let mut a = AppLifecycle::new(thresholds(3), true);
            a.start();
            let s = ShadowComparison { agent: ep(ar, av), fallback: ep(fr, fv) };
            let t = a.episode_end(ep(fr, fv), Some(s));
            assert_eq!(t.is_some(), online, "agent {ar}/{av} vs fallback {fr}/{fv}");
            assert_eq!(a.stage(), if online { Stage::Online } else { Stage::Offline });
        }
    }

    /// With both reservations measured, the operator's test as well, to `2 − t_online` times
    /// the fallback's core-seconds: (t_online, agent reward, violations, core-seconds,
    /// fallback reward, violations, core-seconds, goes online).
    #[test]
    fn offline_to_online_with_core_seconds_table() {
        type Case = (f64, f64, u64, f64, f64, u64, f64, bool);
        let cases: [Case; 12] = [
            (1.0, 0.50, 3, 100.0, 0.50, 3, 100.0, true),         // a tie
            (1.0, 0.55, 3, 90.0, 0.50, 3, 100.0, true),          // cheaper, as many violations
            (1.0, -0.55, 300, 140.0, -0.60, 300, 100.0, false), // every interval violated: dearer loses, more reward or not
            (1.0, 0.52, 3, 101.0, 0.50, 3, 100.0, false),       // more reward, as many violations, dearer
            (1.0, 0.60, 2, 120.0, 0.50, 3, 100.0, true),        // dearer, but fewer violations: a trade
            (1.0, 0.40, 3, 80.0, 0.50, 3, 100.0, false),        // cheaper, but short of t_online
            (0.95, 0.52, 3, 104.0, 0.50, 3, 100.0, true),       // 4 % dearer, within t_online 0.95
            (0.95, 0.52, 3, 106.0, 0.50, 3, 100.0, false),      // 6 % dearer, beyond it
            (0.95, -0.55, 300, 140.0, -0.60, 300, 100.0, false), // 40 % dearer
            (1.05, 0.60, 3, 100.0, 0.50, 3, 100.0, true),       // t_online above 1: no more core-seconds
            (1.05, 0.60, 3, 101.0, 0.50, 3, 100.0, false),
            (0.95, 0.52, 3, 105.0, 0.50, 3, 100.0, true), // at the allowance
        ];
        for (t_online, ar, av, ac, fr, fv, fc, online) in cases {
            let mut a = AppLifecycle::new(LifecycleThresholds { t_online, ..thresholds(3) }, true);
            a.start();
            let s = ShadowComparison { agent: costed(ar, av, ac), fallback: costed(fr, fv, fc) };
            let t = a.episode_end(ep(fr, fv), Some(s));
            assert_eq!(t.is_some(), online, "t_online {t_online}: agent {ar}/{av}/{ac} vs fallback {fr}/{fv}/{fc}");
            assert!(
                a.last_check().unwrap().contains(&format!("reserving {ac:.0} core-seconds against {fc:.0} (allowed")),
                "{:?}",
                a.last_check()
            );
        }
        // Pooled over episodes, reservations add up; one unmeasured side leaves them unmeasured.
        let one = ShadowComparison { agent: costed(1.0, 1, 10.0), fallback: costed(1.0, 1, 12.0) };
        let pooled = ShadowComparison::pooled(&[one, one]);
        assert_eq!((pooled.agent.core_seconds, pooled.fallback.core_seconds), (Some(20.0), Some(24.0)));
        let unmeasured = ShadowComparison { agent: ep(1.0, 1), ..one };
        assert_eq!(ShadowComparison::pooled(&[one, unmeasured]).agent.core_seconds, None);
        // A side unmeasured (an episode as served): reward and violations alone decide.
        let mut a = AppLifecycle::new(LifecycleThresholds { t_online: 1.0, ..thresholds(3) }, true);
        a.start();
        let dear = ShadowComparison { agent: ep(-0.55, 300), fallback: costed(-0.60, 300, 100.0) };
        assert!(a.episode_end(ep(-0.60, 300), Some(dear)).is_some());
        assert!(!a.last_check().unwrap().contains("core-seconds"), "{:?}", a.last_check());
    }

    /// The last comparison a stage decision read names its verdict and numbers: why an app is
    /// still OFFLINE, then what got it ONLINE, then how the acting agent last stood.
    #[test]
    fn the_last_check_says_why_an_app_is_still_offline() {
        let mut a = AppLifecycle::new(thresholds(3), true);
        a.start();
        assert!(a.last_check().is_none());
        let behind = ShadowComparison { agent: ep(1.11, 0), fallback: ep(1.26, 0) };
        assert!(a.episode_end(ep(1.26, 0), Some(behind)).is_none());
        let check = a.last_check().unwrap().to_string();
        assert!(
            check
                .starts_with("behind the fallback: the agent earned 1.1100 per interval against the fallback's 1.2600"),
            "{check}"
        );
        // An episode without a comparison leaves the last one.
        assert!(a.episode_end(ep(1.26, 0), None).is_none());
        assert_eq!(a.last_check(), Some(check.as_str()));
        let good = ShadowComparison { agent: ep(1.25, 0), fallback: ep(1.26, 0) };
        assert_eq!(a.episode_end(ep(1.26, 0), Some(good)).unwrap().to, Stage::Online);
        assert!(a.last_check().unwrap().starts_with("as good as the fallback: the agent earned 1.2500"));
        // Acting and behind once: recorded, the stage kept (two in a row are a trend).
        let slipped = ShadowComparison { agent: ep(0.90, 2), fallback: ep(1.26, 0) };
        assert!(a.episode_end(ep(0.90, 2), Some(slipped)).is_none());
        assert_eq!(a.stage(), Stage::Online);
        assert!(a.last_check().unwrap().contains("with 2 SLO-violating intervals against 0"), "{:?}", a.last_check());
        // Without bootstrapping no comparison is read, and none is kept.
        let mut plain = AppLifecycle::new(thresholds(3), false);
        plain.start();
        plain.episode_end(ep(0.5, 0), Some(good));
        assert!(plain.last_check().is_none());
    }

    #[test]
    fn offline_waits_for_a_shadow_comparison() {
        let mut a = AppLifecycle::new(thresholds(3), true);
        a.start();
        assert!(a.episode_end(ep(1.0, 0), None).is_none());
        assert_eq!(a.stage(), Stage::Offline);
    }

    #[test]
    fn online_serves_once_a_full_window_is_steady_and_retrains_on_a_drop() {
        let mut a = AppLifecycle::new(thresholds(3), false);
        a.start();
        // Spread too wide, then a steady window.
        for r in [0.3, 0.5, 0.4] {
            assert!(a.episode_end(ep(r, 0), None).is_none());
        }
        assert!(a.episode_end(ep(0.50, 0), None).is_none()); // window 0.5, 0.4, 0.5: cv 0.1
        assert!(a.episode_end(ep(0.50, 0), None).is_none()); // 0.4, 0.5, 0.5
        let t = a.episode_end(ep(0.51, 0), None).unwrap(); // 0.5, 0.5, 0.51
        assert_eq!((t.from, t.to), (Stage::Online, Stage::Serving));
        let reference = a.reference().unwrap();
        assert!((reference - 0.5033).abs() < 1e-3);
        // One bad episode is not yet a trend.
        assert!(a.episode_end(ep(0.30, 0), None).is_none());
        assert_eq!(a.stage(), Stage::Serving);
    }

    #[test]
    fn serving_retrains_after_two_bad_episodes() {
        let mut a = AppLifecycle::new(thresholds(2), false);
        a.start();
        a.episode_end(ep(0.5, 0), None);
        assert_eq!(a.episode_end(ep(0.5, 0), None).unwrap().to, Stage::Serving);
        assert!(a.episode_end(ep(0.48, 0), None).is_none()); // one episode: no verdict yet
        assert!(a.episode_end(ep(0.47, 0), None).is_none()); // mean 0.475 ≥ 0.45
        let t = a.episode_end(ep(0.30, 0), None).unwrap(); // mean 0.385 < 0.45
        assert_eq!((t.from, t.to), (Stage::Serving, Stage::Online));
        assert!(a.reference().is_none());
        assert!(t.reason.contains("degraded"), "{}", t.reason);
        assert!(a.retraining());
        // Until the stage next changes, and kept by a checkpoint.
        let mut restored = AppLifecycle::new(thresholds(2), false);
        restored.restore(&a.snapshot(), "restored".into());
        assert!(restored.retraining());
        let mut ablation = AppLifecycle::new(thresholds(2), false).without_retraining();
        ablation.restore(&a.snapshot(), "restored".into());
        assert!(!ablation.retraining());
        let mut elsewhere = AppLifecycle::new(thresholds(2), false);
        elsewhere.restore(
            &LifecycleState { stage: Stage::Serving, reference: Some(0.5), ..a.snapshot() },
            "restored".into(),
        );
        assert!(!elsewhere.retraining(), "only ONLINE retrains");
        // A checkpoint written before the flag was kept reads as not retraining.
        let old: LifecycleState =
            serde_json::from_str(r#"{"stage":"online","behind":0,"recent":[0.4],"reference":null}"#).unwrap();
        assert!(!old.retraining);
        a.episode_end(ep(0.4, 0), None);
        assert!(a.episode_end(ep(0.4, 0), None).is_some_and(|t| t.to == Stage::Serving));
        assert!(!a.retraining());
    }

    /// SERVING's rewards falling below the floor retrain the agent unless the fallback,
    /// replayed on the same traffic, fell as far: the agent's lead over it (0.25 when the
    /// reference was taken) shrinking by more than t_var of the reference (0.125) is the
    /// agent's; a dip both share is the traffic's. One row per case, each from SERVING; a
    /// checkpoint keeps what the test reads, and one written before it was kept reads as
    /// Algorithm 1's test alone.
    #[test]
    fn a_dip_the_fallback_shares_is_the_traffics_not_the_agents() {
        let served = |agent: f64, fallback: f64| ShadowComparison { agent: ep(agent, 0), fallback: ep(fallback, 0) };
        let serving = || {
            let mut a = AppLifecycle::new(thresholds(2), true);
            a.start();
            a.episode_end(ep(0.9, 0), Some(served(0.9, 1.0)));
            assert_eq!(a.episode_end(ep(0.9, 0), Some(served(1.0, 1.0))).unwrap().to, Stage::Online);
            a.episode_end(ep(1.25, 0), Some(served(1.25, 1.0)));
            assert_eq!(a.episode_end(ep(1.25, 0), Some(served(1.25, 1.0))).unwrap().to, Stage::Serving);
            assert_eq!((a.reference(), a.fallback_reference()), (Some(1.25), Some(1.0)));
            a
        };
        // (agent's reward, fallback's on the same traffic, retrained)
        let cases = [
            (1.05, 0.80, false), // both fell 0.20: the lead is 0.25 as it was
            (1.05, 0.90, false), // the lead shrank 0.10: within t_var
            (1.05, 0.95, true),  // the lead shrank 0.15: the agent's
            (1.05, 1.00, true),  // the fallback earns what it did, the agent 0.20 less
            (1.20, 1.00, false), // above the floor (1.125): nothing to explain
        ];
        for (agent, fallback, retrained) in cases {
            let mut a = serving();
            assert!(a.episode_end(ep(agent, 0), Some(served(agent, fallback))).is_none());
            let t = a.episode_end(ep(agent, 0), Some(served(agent, fallback)));
            assert_eq!(t.is_some(), retrained, "{agent} {fallback}: {t:?}");
            if let Some(t) = t {
                assert_eq!((t.from, t.to), (Stage::Serving, Stage::Online));
                assert!(t.reason.contains("rewards degraded") && a.retraining(), "{}", t.reason);
                assert_eq!(a.fallback_reference(), None);
            } else if agent < 1.125 {
                let why = a.last_check().unwrap();
                assert!(why.contains("rewards fell with the traffic") && why.contains("not retrained"), "{why}");
            }
        }
        // Both fell as far, but the agent now violates the SLO where it did not (in fewer
        // intervals than the fallback's replay, and far from failing): a change it may learn
        // to serve better, not the traffic's dip.
        let mut a = serving();
        let violating = ShadowComparison { agent: ep(1.05, 10), fallback: ep(0.8, 12) };
        assert!(a.episode_end(ep(1.05, 10), Some(violating)).is_none());
        assert!(a.episode_end(ep(1.05, 10), Some(violating)).is_some_and(|t| t.to == Stage::Online));
        // A comparison whose reward is not a number is kept as none (and the checkpoint reads
        // back).
        let mut a = serving();
        a.episode_end(ep(1.05, 0), Some(served(1.05, f64::NAN)));
        let json = serde_json::to_string(&a.snapshot()).unwrap();
        let back: LifecycleState = serde_json::from_str(&json).expect(&json);
        assert_eq!(back.recent_shadows, vec![None]);
        // One of the two episodes without a comparison: nothing says it is the traffic's.
        let mut a = serving();
        a.episode_end(ep(1.05, 0), None);
        assert!(a.episode_end(ep(1.05, 0), Some(served(1.05, 0.8))).is_some_and(|t| t.to == Stage::Online));
        // A checkpoint keeps the fallback's reference and the comparisons beside the rewards.
        let mut a = serving();
        a.episode_end(ep(1.05, 0), Some(served(1.05, 0.8)));
        let mut restored = AppLifecycle::new(thresholds(2), true);
        restored.restore(&a.snapshot(), "restored".into());
        assert_eq!(restored.fallback_reference(), Some(1.0));
        assert!(restored.episode_end(ep(1.05, 0), Some(served(1.05, 0.8))).is_none());
        // One written before they were kept (no comparisons, no fallback reference): Algorithm
        // 1's test alone.
        let old = LifecycleState { reference_comparison: None, recent_shadows: Vec::new(), ..a.snapshot() };
        let json =
            serde_json::to_string(&old).unwrap().replace(",\"reference_comparison\":null,\"recent_shadows\":[]", "");
        assert!(!json.contains("recent_shadows"), "{json}");
        let mut restored = AppLifecycle::new(thresholds(2), true);
        restored.restore(&serde_json::from_str(&json).unwrap(), "restored".into());
        assert_eq!(restored.fallback_reference(), None);
        assert!(restored.episode_end(ep(1.05, 0), Some(served(1.05, 0.8))).is_some_and(|t| t.to == Stage::Online));
    }

    #[test]
    fn nan_rewards_never_move_a_stage() {
        let mut a = AppLifecycle::new(thresholds(2), false);
        a.start();
        for _ in 0..5 {
            assert!(a.episode_end(ep(f64::NAN, 0), None).is_none());
        }
        assert_eq!(a.stage(), Stage::Online);
    }

    /// After the hand-over the agent stays only while it is as good as the fallback on the
    /// same traffic; falling behind (reward or violations) hands control back, from ONLINE
    /// and from SERVING, and only when bootstrapping (there is a fallback to return to).
    #[test]
    fn an_agent_behind_the_fallback_goes_back_offline() {
        let online = |bootstrapping| {
            let mut a = AppLifecycle::new(thresholds(3), bootstrapping);
            a.start();
            if bootstrapping {
                let s = ShadowComparison { agent: ep(0.5, 0), fallback: ep(0.5, 0) };
                assert_eq!(a.episode_end(ep(0.5, 0), Some(s)).unwrap().to, Stage::Online);
            }
            a
        };
        // (agent reward, violations, fallback reward, violations, back offline)
        for (ar, av, fr, fv, back) in
            [(0.49, 1, 0.5, 1, false), (0.40, 0, 0.5, 0, true), (0.55, 2, 0.5, 1, true), (0.6, 0, 0.5, 3, false)]
        {
            let mut a = online(true);
            let s = ShadowComparison { agent: ep(ar, av), fallback: ep(fr, fv) };
            // One episode behind is not yet a trend.
            assert!(a.episode_end(ep(ar, av), Some(s)).is_none());
            let t = a.episode_end(ep(ar, av), Some(s));
            assert_eq!(t.as_ref().map(|t| t.to), back.then_some(Stage::Offline), "{ar}/{av} vs {fr}/{fv}");
            if let Some(t) = t {
                assert!(t.reason.contains("fell behind"), "{}", t.reason);
            }
        }
        // Without bootstrapping there is no fallback stage to return to.
        let mut a = online(false);
        let s = ShadowComparison { agent: ep(0.1, 5), fallback: ep(0.5, 0) };
        assert!(a.episode_end(ep(0.1, 5), Some(s)).is_none());
        // From SERVING too.
        let mut a = online(true);
        for _ in 0..3 {
            a.episode_end(ep(0.5, 0), None);
        }
        assert_eq!(a.stage(), Stage::Serving);
        let s = ShadowComparison { agent: ep(0.5, 2), fallback: ep(0.5, 0) };
        let good = ShadowComparison { agent: ep(0.5, 0), fallback: ep(0.5, 0) };
        // Behind, level again, behind: no streak, still serving.
        assert!(a.episode_end(ep(0.5, 2), Some(s)).is_none());
        assert!(a.episode_end(ep(0.5, 0), Some(good)).is_none());
        assert!(a.episode_end(ep(0.5, 2), Some(s)).is_none());
        assert_eq!(a.stage(), Stage::Serving);
        assert_eq!(a.episode_end(ep(0.5, 2), Some(s)).unwrap().to, Stage::Offline);
        assert!(a.reference().is_none());
    }

    /// An app retraining because its rewards degraded is marked as one the rules failed (the
    /// guard's ceiling over their proposal may be lifted) once they have failed beside it for as many
    /// episodes as the trigger waits for, and not for the agent's failures alone; the episodes
    /// so counted start no streak after the retraining ends.
    #[test]
    fn a_retraining_app_the_rules_fail_beside_is_marked_so() {
        let served = |agent: f64, fallback: f64| ShadowComparison { agent: ep(agent, 0), fallback: ep(fallback, 0) };
        let retraining = |cap: u32| {
            let mut a = AppLifecycle::new(LifecycleThresholds { max_retrain_episodes: cap, ..thresholds(2) }, true);
            a.start();
            assert_eq!(a.episode_end(ep(0.6, 0), Some(served(0.6, 0.6))).unwrap().to, Stage::Online);
            // The agent earns well above the fallback, then only as much: its lead is gone.
            a.episode_end(ep(1.0, 0), Some(served(1.0, 0.6)));
            assert_eq!(a.episode_end(ep(1.0, 0), Some(served(1.0, 0.6))).unwrap().to, Stage::Serving);
            a.episode_end(ep(0.5, 0), Some(served(0.5, 0.5)));
            let t = a.episode_end(ep(0.5, 0), Some(served(0.5, 0.5)));
            assert!(t.is_some_and(|t| t.reason.contains("rewards degraded")));
            assert!(a.retraining() && !a.rules_failed());
            a
        };
        let failing = ShadowComparison { agent: ep(-0.3, 90), fallback: ep(-0.3, 90) };
        let mut a = retraining(40);
        assert!(a.episode_end(ep(-0.3, 90), Some(failing)).is_none());
        assert!(!a.rules_failed(), "one failing episode is not a trend");
        assert_eq!(a.snapshot().failing, 1);
        assert!(a.episode_end(ep(-0.3, 90), Some(failing)).is_none(), "no new stage");
        assert!(a.retraining() && a.rules_failed());
        assert_eq!(a.snapshot().failing, 0);
        // The agent failing where the fallback's replay serves is the agent's failure: not
        // counted.
        let mut a = retraining(40);
        let agents = ShadowComparison { agent: ep(-0.3, 90), fallback: ep(-0.3, 40) };
        assert!(a.episode_end(ep(-0.3, 90), Some(agents)).is_none());
        assert_eq!((a.stage(), a.retraining(), a.snapshot().failing), (Stage::Online, true, 0));
        assert!(!a.rules_failed());
        // Retraining gives up on an episode both failed (the third, one after the mark): back
        // OFFLINE with no streak carried, so the fallback's next failing episode alone does
        // not start another retraining.
        let mut a = retraining(3);
        for _ in 0..2 {
            assert!(a.episode_end(ep(-0.3, 90), Some(failing)).is_none());
        }
        let t = a.episode_end(ep(-0.3, 90), Some(failing)).unwrap();
        assert!(t.reason.contains("retraining gave up"), "{}", t.reason);
        assert_eq!((t.to, a.snapshot().failing), (Stage::Offline, 0));
    }

    /// Where the fallback itself violates the SLO in at least half of an episode's intervals for
    /// two episodes in a row, the app retrains: ONLINE, exploring and learning from its own
    /// actions, whatever the bootstrapping check says.
    #[test]
    fn an_app_retrains_where_the_rules_fail() {
        let offline = || {
            let mut a = AppLifecycle::new(thresholds(3), true);
            a.start();
            a
        };
        // The agent is no better than the fallback on the replays: the check alone holds it.
        let level = |v| ShadowComparison { agent: ep(-0.3, v), fallback: ep(-0.3, v) };
        let behind = |v| ShadowComparison { agent: ep(-0.5, v), fallback: ep(-0.3, v) };
        // (violations in each of two episodes, retrains)
        for (first, second, retrains) in [(50, 50, true), (100, 100, true), (49, 100, false), (100, 49, false)] {
            let mut a = offline();
            assert!(a.episode_end(ep(-0.3, first), Some(behind(first))).is_none(), "one episode is not a trend");
            let t = a.episode_end(ep(-0.3, second), Some(behind(second)));
            assert_eq!(t.is_some(), retrains, "{first} then {second} of 100 intervals");
            if let Some(t) = t {
                assert_eq!((t.from, t.to), (Stage::Offline, Stage::Online));
                assert!(
                    t.reason.contains("rules cannot serve") && t.reason.contains("of 100 intervals"),
                    "{}",
                    t.reason
                );
                assert!(a.retraining());
            }
        }
        // A failing episode, a good one, a failing one: no streak.
        let mut a = offline();
        a.episode_end(ep(-0.3, 80), Some(behind(80)));
        a.episode_end(ep(0.3, 0), Some(behind(0)));
        assert!(a.episode_end(ep(-0.3, 80), Some(behind(80))).is_none());
        assert_eq!(a.stage(), Stage::Offline);
        // The streak runs across a stage change: the clone of the failing rules passes the
        // check, then fails beside the fallback's replay.
        let mut a = offline();
        assert_eq!(a.episode_end(ep(-0.3, 90), Some(level(90))).unwrap().to, Stage::Online);
        assert!(!a.retraining());
        let t = a.episode_end(ep(-0.3, 90), Some(level(90))).unwrap();
        assert_eq!((t.from, t.to), (Stage::Online, Stage::Online));
        assert!(t.reason.contains("the agent violated the SLO in 90 of 100 intervals"), "{}", t.reason);
        assert!(a.retraining());
        // While retraining nothing more is counted, and it stays retraining while it fails,
        // however steady its rewards: stuck is not converged.
        for _ in 0..5 {
            assert!(a.episode_end(ep(-0.3, 90), Some(level(90))).is_none());
        }
        assert!(a.retraining());
        // Once it serves and its rewards settle (a full window of 3), it is SERVING.
        for _ in 0..2 {
            assert!(a.episode_end(ep(0.4, 10), Some(level(10))).is_none());
        }
        assert_eq!(a.episode_end(ep(0.4, 10), Some(level(10))).unwrap().to, Stage::Serving);
        // An acting agent failing where the fallback's replay does not: the agent's failure,
        // not the rules' (one episode behind; the second sends it back offline).
        let mut a = offline();
        a.episode_end(ep(0.5, 0), Some(level(0)));
        assert_eq!(a.stage(), Stage::Online);
        let worse = ShadowComparison { agent: ep(-0.3, 90), fallback: ep(0.5, 0) };
        assert!(a.episode_end(ep(-0.3, 90), Some(worse)).is_none());
        assert_eq!(a.episode_end(ep(-0.3, 90), Some(worse)).unwrap().to, Stage::Offline);
        // From SERVING held to a failing reference (the rules' own): retrains, reference dropped.
        let mut a = offline();
        a.episode_end(ep(-0.3, 0), Some(level(0)));
        for _ in 0..3 {
            a.episode_end(ep(-0.3, 0), None);
        }
        assert_eq!(a.stage(), Stage::Serving);
        assert!(a.episode_end(ep(-0.3, 70), Some(level(70))).is_none());
        assert_eq!(a.episode_end(ep(-0.3, 70), Some(level(70))).unwrap().from, Stage::Serving);
        assert!(a.retraining() && a.reference().is_none());
        // Not without a replay of the fallback beside an acting agent, nor for `no-retrain`, nor
        // where the app could not be handed back (the live decider).
        let mut a = AppLifecycle::new(thresholds(10), true);
        a.start();
        a.episode_end(ep(-0.3, 0), Some(level(0)));
        for _ in 0..4 {
            assert!(a.episode_end(ep(-0.3, 100), None).is_none());
        }
        assert!(!a.retraining());
        for mut a in [
            AppLifecycle::new(thresholds(3), true).without_retraining(),
            AppLifecycle::new(thresholds(3), true).holding_where_rules_fail(),
        ] {
            a.start();
            for _ in 0..4 {
                assert!(a.episode_end(ep(-0.3, 100), Some(behind(100))).is_none());
            }
            assert_eq!(a.stage(), Stage::Offline);
        }
        // A checkpoint keeps the streak.
        let mut a = offline();
        a.episode_end(ep(-0.3, 100), Some(behind(100)));
        let mut b = offline();
        b.restore(&a.snapshot(), "test".into());
        assert!(b.episode_end(ep(-0.3, 100), Some(behind(100))).is_some_and(|t| t.to == Stage::Online));
    }

    #[test]
    fn without_retraining_serving_is_final() {
        let mut a = AppLifecycle::new(thresholds(2), true).without_retraining();
        a.start();
        let s = ShadowComparison { agent: ep(0.5, 0), fallback: ep(0.5, 0) };
        a.episode_end(ep(0.5, 0), Some(s));
        a.episode_end(ep(0.5, 0), None);
        assert_eq!(a.episode_end(ep(0.5, 0), None).unwrap().to, Stage::Serving);
        let behind = ShadowComparison { agent: ep(0.1, 9), fallback: ep(0.5, 0) };
        for _ in 0..4 {
            assert!(a.episode_end(ep(0.1, 9), Some(behind)).is_none());
        }
        assert_eq!(a.stage(), Stage::Serving);
    }
}
