//! `aware demo`: AWARE end to end on the embedded simulator in a few minutes. Generated
//! applications run under AWARE (bootstrapping from the MPA default → online → serving, with a
//! workload change half way that makes rewards slip and triggers retraining), beside the MPA
//! default alone and an RL agent without bootstrapping, on identical traffic. The run leaves a
//! report directory: `report.md`, `report.json` (`policies`, `stages`), `timeline.png`, and the
//! store `aware.db` with every episode, stage change and decision (`aware explain` reads it).

use std::path::{Path, PathBuf};

use aware_lab::evaluate::PolicyRow;
use aware_lab::plot::{StageCounts, timeline};
use aware_lab::progress::{Progress, Silent};
use aware_lab::score::Summary;
use aware_lab::threads::beside;
use aware_lab::workload::{Workload, WorkloadSpec};
use aware_sim::{Scenario, ScenarioKind};
use serde::Serialize;

use crate::LifecycleError;
use crate::agent::Learner;
use crate::manager::{Counts, ManagerConfig};
use crate::record::StoreSink;
use crate::run::{Arm, Plan, Variant, plan_size, run_fallback, run_manager};
use crate::stage::{Stage, StageChange};

/// What the demo runs.
#[derive(Debug, Clone)]
pub struct DemoSpec {
    pub out: PathBuf,
    /// Write into a non-empty `out` (the demo's own files are replaced).
    pub force: bool,
    pub seed: u64,
    pub apps: usize,
    /// Intervals (15 s each), rounded up to whole episodes.
    pub steps: u64,
    pub episode_steps: u64,
    /// The workload change; at the episode half way unless it names its step.
    pub change: Scenario,
    /// Episodes whose rewards must settle before an app serves (the profile's
    /// `reward_window`, 20, would need more than the demo's hours: 5 here, said in the report).
    pub reward_window: u32,
    /// The learning agent of the `aware` and `no-bootstrap` rows.
    pub agent: Learner,
}

impl Default for DemoSpec {
    fn default() -> Self {
        Self {
            out: PathBuf::from("aware-demo"),
            force: false,
            seed: 1,
            apps: 6,
            steps: 6000,
            episode_steps: 100,
            change: Scenario { kind: ScenarioKind::LoadHighToLow, at_step: None },
            reward_window: 5,
            agent: Learner::Ddpg,
        }
    }
}

/// One application at the end of AWARE's run.
#[derive(Debug, Clone, Serialize)]
pub struct DemoApp {
    pub app: String,
    pub stage: Stage,
    /// ONLINE at the end because its rewards degraded in SERVING: the agent relearns (from its
    /// own transitions, or the fallback's under `high_stakes`;
    /// [`crate::algorithm::AppLifecycle::retraining`]).
    pub retraining: bool,
    #[serde(flatten)]
    pub counts: Counts,
    /// Whether the app reached SERVING at some point.
    pub reached_serving: bool,
    /// The app's row under AWARE and under the MPA default alone, on identical traffic: where
    /// AWARE gained or lost against the rules.
    pub aware: Summary,
    pub mpa: Summary,
}

/// `report.json` and `aware demo --json`.
#[derive(Debug, Clone, Serialize)]
pub struct DemoReport {
    pub apps: usize,
    pub steps: u64,
    pub episode_steps: u64,
    pub seed: u64,
    /// The workload change and the interval it starts at.
    pub change: String,
    pub change_step: u64,
    /// Episodes whose rewards must settle (coefficient of variation < `t_serving`) to serve.
    pub reward_window: u32,
    /// The learning agent of the `aware` and `no-bootstrap` rows.
    pub agent: Learner,
    /// `aware`, `mpa`, `no-bootstrap`, on identical traffic.
    pub policies: Vec<PolicyRow>,
    /// AWARE's stage changes, in order.
    pub stages: Vec<StageChange>,
    pub per_app: Vec<DemoApp>,
    /// The report directory and what is in it.
    pub out: PathBuf,
    pub files: Vec<String>,
    /// The store the run recorded into (`aware explain --store …`).
    pub store: String,
    /// Staging directories in `out` of earlier demos stopped while they replaced their files:
    /// each holds in `previous/` the files of the run before that one, which may be there and
    /// nowhere else. Kept (`--force` does not remove them) and named here until the operator
    /// moves or deletes them. Absent when there are none.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub interrupted: Vec<PathBuf>,
}

const FILES: [&str; 4] = ["report.md", "report.json", "timeline.png", "aware.db"];

/// Every file a demo run may leave in its directory: [`FILES`] and its store's SQLite journals.
fn own_files() -> Vec<String> {
    let journals = aware_store::SQLITE_JOURNALS.iter().map(|j| format!("aware.db{j}"));
    FILES.iter().map(|f| f.to_string()).chain(journals).collect()
}

/// An error about `--out DIR`, naming the flag and the directory.
fn out_error(out: &Path, reason: impl std::fmt::Display) -> LifecycleError {
    LifecycleError::input(format!("--out {}", out.display()), reason.to_string())
}

/// Refuses a non-empty output directory unless `force`; creates a missing one. Returns the
/// staging directories of interrupted runs it keeps ([`sweep_staging`]).
fn prepare(out: &Path, force: bool) -> Result<Vec<PathBuf>, LifecycleError> {
    aware_lab::output::refuse_non_directory("--out", out)?;
    if out.exists() {
        let non_empty =
            std::fs::read_dir(out).map_err(|e| out_error(out, format!("cannot read: {e}")))?.next().is_some();
        if non_empty && !force {
            return Err(LifecycleError::input(
                "--out",
                format!("{} is not empty; choose another directory or pass --force", out.display()),
            ));
        }
        sweep_staging(out)
    } else {
        std::fs::create_dir_all(out).map_err(|e| out_error(out, format!("cannot create: {e}")))?;
        Ok(Vec::new())
    }
}

/// Removes the staging directories ([`STAGING`]) a killed demo left in `out`, except one
/// holding `previous/`: a run killed while it replaced the files, whose earlier files may be
/// there and nowhere else. Returns those it keeps, sorted ([`DemoReport::interrupted`]).
fn sweep_staging(out: &Path) -> Result<Vec<PathBuf>, LifecycleError> {
    let entries = std::fs::read_dir(out).map_err(|e| out_error(out, format!("cannot read: {e}")))?;
    let mut kept = Vec::new();
    for entry in entries.flatten() {
        let path = entry.path();
        let ours = entry.file_name().to_string_lossy().starts_with(STAGING);
        if !ours || !entry.file_type().is_ok_and(|t| t.is_dir()) {
            continue;
        }
        if path.join("previous").exists() {
            kept.push(path);
        } else {
            std::fs::remove_dir_all(&path)
                .map_err(|e| out_error(out, format!("cannot remove {}: {e}", path.display())))?;
        }
    }
    kept.sort();
    Ok(kept)
}

/// What the demo says of a staging directory [`sweep_staging`] kept (on stderr and in
/// `report.md`).
pub fn interrupted_note(staging: &Path) -> String {
    format!(
        "an earlier demo was stopped while it replaced its files; the files of the run before it are kept in {}",
        staging.join("previous").display()
    )
}

/// The name every staging directory starts with.
const STAGING: &str = ".aware-demo-";

/// Runs `work`, which writes the demo's files into the directory it is given: a fresh one
/// inside `out` (so on the same filesystem), whose files replace an earlier run's in `out` only
/// once `work` succeeds. A run that fails leaves `out` as it was (an earlier report and store
/// included); files that are not the demo's own are never touched. `work` is also given the
/// staging directories of interrupted runs that [`prepare`] kept.
fn fill<T>(
    out: &Path,
    force: bool,
    work: impl FnOnce(&Path, Vec<PathBuf>) -> Result<T, LifecycleError>,
) -> Result<T, LifecycleError> {
    let kept = prepare(out, force)?;
    let staging = tempfile::Builder::new()
        .prefix(STAGING)
        .tempdir_in(out)
        .map_err(|e| out_error(out, format!("cannot create a directory in it: {e}")))?;
    let done = work(staging.path(), kept)?;
    if let Err(e) = replace(out, staging.path()) {
        // Kept, not removed: it holds the new run's files and whatever of the earlier run's
        // could not be moved back (in `previous/`).
        let kept = staging.keep();
        return Err(out_error(
            out,
            format!("cannot move the new report in: {e}; the new and earlier files are kept in {}", kept.display()),
        ));
    }
    // Dropping `staging` removes it, and with it an earlier run's files.
    Ok(done)
}

/// Moves the demo's files from `staging` into `out`, an earlier run's first aside into
/// `staging/previous/` (so no journal of an earlier store is left beside the new one). On
/// failure `out` holds the earlier run's files again.
fn replace(out: &Path, staging: &Path) -> std::io::Result<()> {
    let previous = staging.join("previous");
    std::fs::create_dir(&previous)?;
    let own = own_files();
    move_files(out, &previous, &own)?;
    if let Err(e) = move_files(staging, out, &own) {
        // Best effort: the failure is what the caller needs to hear.
        let _ = move_files(&previous, out, &own);
        return Err(e);
    }
    Ok(())
}

/// Moves each of `names` that is in `from` to `to`; when one cannot be moved, moves back those
/// that were and says why.
fn move_files(from: &Path, to: &Path, names: &[String]) -> std::io::Result<()> {
    let mut moved: Vec<&str> = Vec::new();
    for name in names.iter().map(String::as_str) {
        // Only files (or links) are the demo's: a directory of that name is someone else's.
        match std::fs::symlink_metadata(from.join(name)) {
            Ok(m) if m.is_file() || m.is_symlink() => {}
            _ => continue,
        }
        if let Err(e) = std::fs::rename(from.join(name), to.join(name)) {
            for &back in moved.iter().rev() {
                let _ = std::fs::rename(to.join(back), from.join(back));
            }
            return Err(e);
        }
        moved.push(name);
    }
    Ok(())
}

pub fn demo(spec: &DemoSpec, progress: &dyn Progress) -> Result<DemoReport, LifecycleError> {
    if spec.apps == 0 {
        return Err(LifecycleError::input("--apps", "must be at least 1"));
    }
    let (episodes, steps) = plan_size(spec.steps, spec.episode_steps)?;
    // The change at the start of the episode half way through, unless told otherwise.
    let change_step = spec.change.at_step.unwrap_or(episodes / 2 * spec.episode_steps);
    if change_step >= steps {
        return Err(LifecycleError::input(
            "--change",
            format!("step {change_step} is not within the demo's {steps} steps"),
        ));
    }
    let mut workload = Workload::load(&WorkloadSpec {
        apps: spec.apps,
        seed: spec.seed,
        scenario: Some(Scenario { kind: spec.change.kind, at_step: Some(change_step) }),
        steps,
        ..WorkloadSpec::default()
    })?;
    if spec.reward_window == 0 {
        return Err(LifecycleError::input("--reward-window", "must be at least 1"));
    }
    workload.profile.lifecycle.reward_window = spec.reward_window;
    let plan = Plan::new(&workload, steps, spec.episode_steps)?;
    // The store as the report names it: where the run's lands once the demo has succeeded.
    let url = format!("sqlite:{}", spec.out.join("aware.db").display());
    // Everything is written into a fresh directory inside `--out` and moved over an earlier
    // run's files only once it all succeeded: a demo that fails loses nothing.
    fill(&spec.out, spec.force, |dir, kept| {
        let mut store = aware_store::open(&format!("sqlite:{}", dir.join("aware.db").display()).parse()?, false)?;
        let config = ManagerConfig {
            episode_steps: spec.episode_steps,
            log: true,
            agent: spec.agent,
            ..ManagerConfig::default()
        };
        // MPA and RL without bootstrapping run beside AWARE (nothing is shared; the store is
        // AWARE's alone), and the progress shown is AWARE's.
        let (others, aware) = beside(
            || {
                let mpa = run_fallback(&workload, &plan, &config.fallback, &Silent)?;
                let config = ManagerConfig { log: false, ..config.clone() };
                let no_bootstrap =
                    run_manager(&workload, &plan, Variant::NoBootstrap, &config, spec.seed, &mut (), &Silent)?;
                Ok::<_, LifecycleError>((mpa, no_bootstrap))
            },
            || {
                let mut sink = StoreSink::new(&mut *store);
                run_manager(&workload, &plan, Variant::Aware, &config, spec.seed, &mut sink, progress)
            },
        );
        let aware = aware?;
        let (mpa, no_bootstrap) = others?;
        drop(store);

        let names: Vec<String> = workload.apps.iter().map(|a| a.name.clone()).collect();
        let per_app = names
            .iter()
            .zip(aware.final_stages.iter().zip(&aware.final_retraining).zip(&aware.counts))
            .zip(aware.per_app.iter().zip(&mpa.per_app))
            .map(|((app, ((&stage, &retraining), counts)), (a, m))| DemoApp {
                app: app.clone(),
                stage,
                retraining,
                counts: counts.clone(),
                reached_serving: aware.stages.iter().any(|c| &c.app == app && c.to == Stage::Serving),
                aware: a.clone(),
                mpa: m.clone(),
            })
            .collect();
        let report = DemoReport {
            apps: workload.apps.len(),
            steps,
            episode_steps: spec.episode_steps,
            seed: spec.seed,
            agent: spec.agent,
            change: spec.change.kind.name().into(),
            change_step,
            reward_window: spec.reward_window,
            policies: vec![aware.row.clone(), mpa.row.clone(), no_bootstrap.row.clone()],
            stages: aware.stages.clone(),
            per_app,
            out: spec.out.clone(),
            files: FILES.iter().map(|f| f.to_string()).collect(),
            store: url,
            interrupted: kept,
        };
        write_plot(&dir.join("timeline.png"), &[&aware, &mpa, &no_bootstrap], workload.sim.interval_s)?;
        let json =
            serde_json::to_string_pretty(&report).map_err(|e| LifecycleError::input("report.json", e.to_string()))?;
        write(&dir.join("report.json"), &(json + "\n"))?;
        write(&dir.join("report.md"), &markdown(&report))?;
        Ok(report)
    })
}

fn write(path: &Path, text: &str) -> Result<(), LifecycleError> {
    aware_lab::output::write_atomically(path, text).map_err(LifecycleError::from)
}

fn write_plot(path: &Path, arms: &[&Arm], interval_s: f64) -> Result<(), LifecycleError> {
    let runs: Vec<(&str, &aware_lab::score::Series)> =
        arms.iter().map(|a| (a.row.policy.as_str(), &a.series)).collect();
    let names: Vec<&str> = Stage::ALL.iter().map(|s| s.name()).collect();
    let aware = arms[0];
    let counts = (0..4).map(|k| aware.stage_series.iter().map(|c| c[k] as f64).collect()).collect::<Vec<Vec<f64>>>();
    let stages = StageCounts { label: &aware.row.policy, names: &names, counts };
    timeline(path, &runs, Some(&stages), interval_s)?;
    Ok(())
}

/// The report an operator reads.
pub fn markdown(r: &DemoReport) -> String {
    let mut md = String::new();
    let hours = r.steps as f64 * 15.0 / 3600.0;
    md.push_str("# AWARE demo\n\n");
    md.push_str(&format!(
        "{} generated applications, {} intervals of 15 s ({hours:.1} h, episodes of {}), seed {}. \
         From interval {} the workload changes (`{}`). The three policies ran on identical traffic. \
         An app serves once its rewards settle over {} episodes (the profile's default is 20; \
         `aware run` uses the profile).\n\n",
        r.apps, r.steps, r.episode_steps, r.seed, r.change_step, r.change, r.reward_window
    ));
    md.push_str(
        "| policy | SLO-violating intervals | dropped requests | core-seconds | CPU utilisation | mean reward |\n",
    );
    md.push_str("| --- | ---: | ---: | ---: | ---: | ---: |\n");
    for p in &r.policies {
        let s = &p.summary;
        md.push_str(&format!(
            "| {} | {} | {:.0} | {:.0} | {:.1} % | {:.3} |\n",
            p.policy,
            s.slo_violations,
            s.dropped_requests,
            s.core_seconds,
            s.cpu_utilisation * 100.0,
            s.mean_reward
        ));
    }
    md.push_str(
        "\n`aware` is the lifecycle manager: the MPA default (HPA + VPA) acts while the agent learns \
         from it offline; an app's agent acts once it is as good on the same traffic, serves once \
         its rewards settle, retrains on what it does when they degrade, and hands back to the \
         fallback when it falls behind; while it acts, the \
         fallback's scale-ups are a floor under its proposals. `no-bootstrap` is the same agent \
         acting and learning from the first interval, with no fallback floor.\n\n",
    );
    md.push_str("![timeline](timeline.png)\n\n## Stage changes\n\n| step | app | from | to | reason |\n| ---: | --- | --- | --- | --- |\n");
    for c in &r.stages {
        md.push_str(&format!("| {} | {} | {} | {} | {} |\n", c.step, c.app, c.from, c.to, c.reason));
    }
    md.push_str("\n## Applications\n\nSLO-violating intervals and core-seconds of each app under `aware` and under `mpa` alone.\n\n| app | final stage | reached serving | agent actions | fallback actions | guard fallbacks | guard-limited | aware: violations / core-seconds | mpa: violations / core-seconds |\n| --- | --- | --- | ---: | ---: | ---: | ---: | ---: | ---: |\n");
    for a in &r.per_app {
        let c = &a.counts;
        md.push_str(&format!(
            "| {} | {} | {} | {} | {} | {} | {} | {} / {:.0} | {} / {:.0} |\n",
            a.app,
            if a.retraining { format!("{} (retraining)", a.stage) } else { a.stage.to_string() },
            a.reached_serving,
            c.agent_actions,
            c.fallback_actions,
            c.guard_fallbacks,
            c.guard_limited,
            a.aware.slo_violations,
            a.aware.core_seconds,
            a.mpa.slo_violations,
            a.mpa.core_seconds
        ));
    }
    let waiting: Vec<&DemoApp> = r.per_app.iter().filter(|a| a.stage == Stage::Offline).collect();
    if !waiting.is_empty() {
        md.push_str("\nThe fallback serves these apps at the end; their agent's last bootstrapping check:\n\n");
        for a in waiting {
            let check = a.counts.last_check.as_deref().unwrap_or("none yet");
            md.push_str(&format!("- {}: {check}\n", a.app));
        }
    }
    md.push_str(&format!(
        "\nEvery decision is in the store: `aware explain --store {} --app APP --last 5`.\n",
        r.store
    ));
    for dir in &r.interrupted {
        md.push_str(&format!("\nNote: {}.\n", interrupted_note(dir)));
    }
    md
}

#[cfg(test)]
mod tests {
    use super::*;

    fn files(dir: &Path) -> Vec<(String, String)> {
        let mut all: Vec<_> = std::fs::read_dir(dir)
            .unwrap()
            .map(|e| {
                let e = e.unwrap();
                (e.file_name().to_string_lossy().into_owned(), std::fs::read_to_string(e.path()).unwrap_or_default())
            })
            .collect();
        all.sort();
        all
    }

    /// `--force` replaces an earlier run's files only once the new run has succeeded: a run
    /// that fails leaves the earlier report and store (journal included) as they were, and
    /// files that are not the demo's own are never touched.
    #[test]
    fn a_failed_run_loses_nothing_and_a_successful_one_replaces_only_the_demos_files() {
        let dir = tempfile::tempdir().unwrap();
        let out = dir.path().join("report");
        std::fs::create_dir(&out).unwrap();
        for (f, text) in
            [("report.md", "old"), ("aware.db", "old db"), ("aware.db-wal", "old wal"), ("notes.txt", "mine")]
        {
            std::fs::write(out.join(f), text).unwrap();
        }
        let before = files(&out);

        // Refused without --force, nothing run.
        let err = fill(&out, false, |_, _| -> Result<(), LifecycleError> { unreachable!() }).unwrap_err().to_string();
        assert!(err.starts_with("--out: ") && err.contains("--force"), "{err}");

        let err = fill(&out, true, |staging, _| {
            std::fs::write(staging.join("report.md"), "new").unwrap();
            std::fs::write(staging.join("aware.db"), "new db").unwrap();
            Err::<(), _>(LifecycleError::input("--change", "the run failed"))
        })
        .unwrap_err()
        .to_string();
        assert_eq!(err, "--change: the run failed");
        assert_eq!(files(&out), before, "a failed run changes nothing");

        let done = fill(&out, true, |staging, _| {
            std::fs::write(staging.join("report.md"), "new").unwrap();
            std::fs::write(staging.join("aware.db"), "new db").unwrap();
            Ok(7)
        })
        .unwrap();
        assert_eq!(done, 7);
        let want: Vec<(String, String)> = [("aware.db", "new db"), ("notes.txt", "mine"), ("report.md", "new")]
            .iter()
            .map(|(f, t)| (f.to_string(), t.to_string()))
            .collect();
        assert_eq!(files(&out), want, "the old journal went with the old store; no staging left behind");
    }

    /// `--force` removes the staging directories a killed demo left, but keeps one holding
    /// `previous/` (an earlier run's files may be there and nowhere else).
    #[test]
    fn force_sweeps_a_killed_demos_staging_but_not_one_holding_earlier_files() {
        let dir = tempfile::tempdir().unwrap();
        let out = dir.path().join("report");
        let killed = out.join(format!("{STAGING}killed"));
        let replacing = out.join(format!("{STAGING}replacing"));
        std::fs::create_dir_all(&killed).unwrap();
        std::fs::write(killed.join("aware.db"), "half a run").unwrap();
        std::fs::create_dir_all(replacing.join("previous")).unwrap();
        std::fs::write(replacing.join("previous").join("report.md"), "the only copy").unwrap();
        std::fs::write(out.join(format!("{STAGING}a-file")), "not a directory").unwrap();
        assert!(prepare(&out, false).is_err(), "a leftover staging directory makes --out non-empty");
        let kept = prepare(&out, true).unwrap();
        assert!(!killed.exists());
        assert_eq!(std::fs::read_to_string(replacing.join("previous").join("report.md")).unwrap(), "the only copy");
        assert!(out.join(format!("{STAGING}a-file")).exists());
        assert_eq!(kept, vec![replacing], "the kept one is named, the swept one is gone");
    }

    /// Moving files is all or nothing: when one cannot be moved, those moved before it go
    /// back (what [`replace`] relies on to leave `out` as it was).
    #[test]
    fn moving_files_moves_back_what_it_moved_when_one_cannot_be_moved() {
        let dir = tempfile::tempdir().unwrap();
        let (from, to) = (dir.path().join("from"), dir.path().join("to"));
        std::fs::create_dir(&from).unwrap();
        std::fs::create_dir(&to).unwrap();
        std::fs::write(from.join("report.md"), "md").unwrap();
        std::fs::write(from.join("report.json"), "json").unwrap();
        // A file cannot be renamed over a non-empty directory.
        std::fs::create_dir(to.join("report.json")).unwrap();
        std::fs::write(to.join("report.json").join("x"), "").unwrap();
        let before = files(&from);
        assert!(move_files(&from, &to, &own_files()).is_err());
        assert_eq!(files(&from), before);
        assert!(!to.join("report.md").exists());
    }

    /// Errors about the output directory name `--out` and the directory, and a plan too large
    /// is refused naming `--steps` before anything is made.
    #[test]
    fn errors_name_the_flag() {
        if Path::new("/proc/self").is_dir() {
            let err = prepare(Path::new("/proc/x"), false).unwrap_err().to_string();
            assert!(err.starts_with("--out /proc/x: cannot create: "), "{err}");
        }
        let dir = tempfile::tempdir().unwrap();
        let out = dir.path().join("report");
        for (steps, episode_steps) in [(u64::MAX, 100), (1_000_000_000_000, 1)] {
            let spec = DemoSpec { out: out.clone(), steps, episode_steps, ..DemoSpec::default() };
            let err = demo(&spec, &Silent).unwrap_err().to_string();
            assert!(err.starts_with("--steps: "), "{err}");
        }
        let spec = DemoSpec { out: out.clone(), episode_steps: 0, ..DemoSpec::default() };
        assert!(demo(&spec, &Silent).unwrap_err().to_string().starts_with("--episode-steps: "));
        assert!(!out.exists());
    }
}
