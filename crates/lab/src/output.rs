//! Files a run leaves behind, written so that an interrupted run never leaves a half-written
//! result where a good one was.

use std::path::{Path, PathBuf};

use crate::LabError;

/// Writes `text` to `path` atomically: a temporary file of a fresh name beside it (never a
/// file of the user's: a fixed name such as `PATH.tmp` would replace one), then a rename. A
/// directory at `path` is refused before anything is written, and a failed write leaves no
/// temporary file behind. A symbolic link is written through (its target replaced, the link
/// kept), and something that is not a regular file — a FIFO, a device — or a path under
/// `/dev` or `/proc` (`/dev/stdout`, even when it leads to a file the shell redirected to) is
/// appended to directly, never replaced nor truncated. A file that exists keeps its permissions (a new one
/// gets what `std::fs::write` would give it). Errors name `path`, never the temporary file the
/// user did not give.
pub fn write_atomically(path: &Path, text: &str) -> Result<(), LabError> {
    write_bytes_atomically(path, text.as_bytes())
}

/// [`write_atomically`] for bytes.
pub fn write_bytes_atomically(path: &Path, bytes: &[u8]) -> Result<(), LabError> {
    write_atomically_with(path, |w| w.write_all(bytes))
}

/// [`write_atomically`] for what `write` streams into the file (buffered): a large state
/// serialised straight to disk, never held whole in memory beside the value it encodes.
pub fn write_atomically_with(
    path: &Path,
    write: impl FnOnce(&mut dyn std::io::Write) -> std::io::Result<()>,
) -> Result<(), LabError> {
    use std::io::Write;
    // tempfile's errors end by naming the temporary file ("… at path \"…\""): the OS's reason
    // before it is what the user needs.
    let fail = |e: std::io::Error| {
        let text = e.to_string();
        let reason = text.split(" at path ").next().unwrap_or(&text).to_string();
        LabError::io(path, format!("cannot write: {reason}"))
    };
    // Streams `write` into `file` through a buffer, flushed; the file handed back.
    let stream = |file: std::fs::File, write: &mut dyn FnMut(&mut dyn Write) -> std::io::Result<()>| {
        let mut buffered = std::io::BufWriter::with_capacity(64 << 10, file);
        write(&mut buffered)?;
        buffered.into_inner().map_err(|e| e.into_error())
    };
    let mut write = Some(write);
    let mut once = |w: &mut dyn Write| write.take().map_or(Ok(()), |f| f(w));
    if path.is_dir() {
        return Err(LabError::io(path, "cannot write: is a directory"));
    }
    // Follows links: what is there to be written (`None` when nothing is yet).
    let existing = std::fs::metadata(path).ok();
    let system = |p: &Path| p.starts_with("/dev") || p.starts_with("/proc");
    let resolved = std::fs::canonicalize(path).ok();
    if existing.as_ref().is_some_and(|m| !m.is_file()) || system(path) || resolved.as_deref().is_some_and(system) {
        // Appended to, never truncated: a file behind `/dev/stdout` (reopened through
        // `/proc/self/fd`) is written after what the shell and the process put there.
        let file = std::fs::OpenOptions::new().append(true).open(path).map_err(fail)?;
        return stream(file, &mut once).map(drop).map_err(fail);
    }
    // A link (or a chain of them) is replaced at its end, so that the link stays a link.
    let target: PathBuf = match std::fs::symlink_metadata(path) {
        Ok(m) if m.file_type().is_symlink() => match resolved {
            Some(t) => t,
            // A dangling link: writing through it makes the file it names.
            None => {
                let file = std::fs::File::create(path).map_err(fail)?;
                return stream(file, &mut once).map(drop).map_err(fail);
            }
        },
        _ => path.to_path_buf(),
    };
    let dir = match target.parent() {
        Some(d) if !d.as_os_str().is_empty() => d,
        _ => Path::new("."),
    };
    let mut builder = tempfile::Builder::new();
    builder.prefix(".aware-").suffix(".tmp");
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        // A new file's mode as `std::fs::write` makes it (0o666 less the umask).
        builder.permissions(std::fs::Permissions::from_mode(0o666));
    }
    // Dropped unpersisted on any error: the temporary file goes with it.
    let tmp = builder.tempfile_in(dir).map_err(fail)?;
    #[cfg(unix)]
    if let Some(meta) = &existing {
        use std::os::unix::fs::PermissionsExt;
        // The file's own mode, set exactly (the umask does not apply to a chmod).
        let mode = meta.permissions().mode() & 0o777;
        tmp.as_file().set_permissions(std::fs::Permissions::from_mode(mode)).map_err(fail)?;
    }
    let (file, tmp_path) = tmp.into_parts();
    // On disk before it replaces what was there: a crash then leaves the old file or the new.
    stream(file, &mut once).and_then(|f| f.sync_all()).map_err(fail)?;
    tmp_path.persist(&target).map_err(|e| fail(e.error))?;
    // The rename on disk too (best effort: not every file system lets a directory be synced).
    if let Ok(d) = std::fs::File::open(dir) {
        let _ = d.sync_all();
    }
    Ok(())
}

/// Removes the temporary files [`write_atomically`] left in `dir` when a process was killed
/// while writing (`.aware-*.tmp`: names no one else gives); returns how many. Only for a
/// directory a run owns (a long run's training state), where a writer of its own is not at work.
pub fn remove_stale_temporaries(dir: &Path) -> std::io::Result<usize> {
    let mut removed = 0;
    for entry in std::fs::read_dir(dir)? {
        let entry = entry?;
        let name = entry.file_name();
        let name = name.to_string_lossy();
        if name.starts_with(".aware-") && name.ends_with(".tmp") && entry.file_type()?.is_file() {
            std::fs::remove_file(entry.path())?;
            removed += 1;
        }
    }
    Ok(removed)
}

/// An exclusive hold on an output directory that one long run writes into over hours (a
/// resumable training state): a second process given the same directory is refused at once,
/// before it reads, clears or rewrites anything there. Held until dropped; the operating
/// system lets go of it when the process ends, however it ends, so a killed run leaves no
/// stale lock behind.
#[derive(Debug)]
pub struct DirLock {
    _held: Option<std::fs::File>,
}

/// Takes [`DirLock`] on `dir`, which must exist: an advisory lock (`flock`) on the directory
/// itself, so no file of its own is left in it. Refused with [`LabError::Busy`] when another
/// process holds it. Where the directory cannot be locked — a network file system (NFS
/// emulates `flock` with locks a directory cannot take), one without locks, a directory this
/// process cannot list, a platform without `flock` — the run goes on unlocked: refusing every
/// run there would cost more than the race it guards against.
pub fn lock_dir(dir: &Path) -> Result<DirLock, LabError> {
    #[cfg(unix)]
    {
        if !dir.is_dir() {
            return Err(LabError::io(dir, "cannot lock: not a directory"));
        }
        // A directory this process may write but not list cannot be opened to lock: unlocked,
        // as where the file system cannot lock.
        let Ok(file) = std::fs::File::open(dir) else {
            return Ok(DirLock { _held: None });
        };
        match file.try_lock() {
            Ok(()) => Ok(DirLock { _held: Some(file) }),
            Err(std::fs::TryLockError::WouldBlock) => Err(LabError::Busy { path: dir.to_path_buf() }),
            Err(std::fs::TryLockError::Error(_)) => Ok(DirLock { _held: None }),
        }
    }
    #[cfg(not(unix))]
    {
        let _ = dir;
        Ok(DirLock { _held: None })
    }
}

/// Creates `dir` (and its parents) unless it exists.
pub fn create_dir(dir: &Path) -> Result<(), LabError> {
    std::fs::create_dir_all(dir).map_err(|e| LabError::io(dir, format!("cannot create: {e}")))
}

/// Runs `work`, which fills the output directory `dir`; when it fails, removes what of `dir` this
/// call created: the outermost of `dir` and its parents that did not exist (with whatever `work`
/// wrote there), never a directory that existed before the call. That directory is made here,
/// before the work, by a `create_dir` that fails if it exists: a run that fails long after
/// another made the same directory (or a user did) removes nothing of theirs.
pub fn removing_created_dir_on_failure<T, E>(dir: &Path, work: impl FnOnce() -> Result<T, E>) -> Result<T, E> {
    removing_created_dir_on_failure_keeping(dir, &[], work)
}

/// [`removing_created_dir_on_failure`], but a directory in which the work left one of `kept`
/// (a long run's training state, that a later run can go on from) stays, with all it holds.
pub fn removing_created_dir_on_failure_keeping<T, E>(
    dir: &Path,
    kept: &[&str],
    work: impl FnOnce() -> Result<T, E>,
) -> Result<T, E> {
    let created = claim_missing(dir);
    let result = work();
    if result.is_err()
        && !kept.iter().any(|k| dir.join(k).exists())
        && let Some(created) = created
    {
        // Held while it goes: a run refused because another process took `dir` first (a
        // second start of the same command) leaves that process's directory alone.
        let held = lock_dir(dir);
        if !matches!(held, Err(LabError::Busy { .. })) {
            // Best effort: the work's own error is what the caller needs to hear.
            let _ = std::fs::remove_dir_all(created);
        }
    }
    result
}

/// Makes the outermost of `dir` and its parents that does not exist (not even as a dangling
/// link) and returns it; `None` when none is missing or this call could not make it (another
/// did first, or the work will say why it cannot).
fn claim_missing(dir: &Path) -> Option<PathBuf> {
    let absent = |d: &Path| matches!(std::fs::symlink_metadata(d), Err(e) if e.kind() == std::io::ErrorKind::NotFound);
    let top = dir.ancestors().take_while(|d| !d.as_os_str().is_empty() && absent(d)).last()?;
    std::fs::create_dir(top).ok()?;
    Some(top.to_path_buf())
}

/// Refuses an output directory `flag` names that is something else (a file): refused before
/// the work that would fill it, not after.
pub fn refuse_non_directory(flag: &str, dir: &Path) -> Result<(), LabError> {
    if dir.exists() && !dir.is_dir() {
        return Err(LabError::input(flag, format!("{} is not a directory", dir.display())));
    }
    // One still to be made cannot be made under a file.
    let above = dir.ancestors().skip(1).take_while(|a| !a.as_os_str().is_empty()).find(|a| a.exists());
    if let Some(file) = above.filter(|a| !a.is_dir()) {
        return Err(LabError::input(
            flag,
            format!("{} cannot be made: {} is not a directory", dir.display(), file.display()),
        ));
    }
    Ok(())
}

/// The learning curve, its plot and the summary a training run writes beside its checkpoint.
pub const LEARNING_CURVE_CSV: &str = "learning_curve.csv";
pub const LEARNING_CURVE_PNG: &str = "learning_curve.png";
pub const TRAINING_SUMMARY: &str = "train.json";

/// What a training run writes into its `--out` directory beside the agent's checkpoint
/// ([`write_training_outputs`]).
pub const TRAINING_OUTPUTS: [&str; 3] = [LEARNING_CURVE_CSV, LEARNING_CURVE_PNG, TRAINING_SUMMARY];

/// The file that marks a meta-trained pool (`aware train-meta --out DIR`, read by `--meta DIR`).
pub const KEPT_POOL: &str = "pool.json";

/// The file that marks a lifecycle checkpoint (`aware run --checkpoint DIR`), beside its `agent/`.
pub const LIFECYCLE_CHECKPOINT: &str = "lifecycle.json";

/// Refuses an output directory that already holds any of `names` (what the run would write
/// there: a run never overwrites what another left), or that is not a directory
/// ([`refuse_non_directory`]). The error names the first one found.
pub fn refuse_overwrite(flag: &str, dir: &Path, names: &[&str]) -> Result<(), LabError> {
    refuse_non_directory(flag, dir)?;
    if let Some(found) = names.iter().find(|n| dir.join(n).exists()) {
        return Err(LabError::input(
            flag,
            format!("{} already holds {found}; choose another directory", dir.display()),
        ));
    }
    Ok(())
}

/// Refuses an output directory that already holds a checkpoint, a training run's outputs
/// ([`TRAINING_OUTPUTS`]), a meta-trained pool or a lifecycle checkpoint: a run never
/// overwrites any of them or writes beside them.
pub fn refuse_checkpoint(flag: &str, dir: &Path) -> Result<(), LabError> {
    refuse_non_directory(flag, dir)?;
    if dir.join(aware_agents::METADATA).exists() {
        return Err(LabError::input(
            flag,
            format!("{} already holds a checkpoint; choose another directory", dir.display()),
        ));
    }
    let mut kept = TRAINING_OUTPUTS.to_vec();
    kept.extend([KEPT_POOL, LIFECYCLE_CHECKPOINT]);
    refuse_overwrite(flag, dir, &kept)
}

/// The outputs every training run leaves beside its checkpoint: `learning_curve.csv` (as
/// given), `learning_curve.png` (episode → reward) and `train.json` (the summary). Returns the
/// summary's JSON text.
pub fn write_training_outputs(
    out: &Path,
    algorithm: &str,
    csv: &str,
    points: &[(f64, f64)],
    summary: &impl serde::Serialize,
) -> Result<String, LabError> {
    let [curve, plot, summary_file] = TRAINING_OUTPUTS.map(|n| out.join(n));
    write_atomically(&curve, csv)?;
    crate::plot::learning_curve(&plot, algorithm, points)?;
    let text = serde_json::to_string_pretty(summary).map_err(|e| LabError::io(&summary_file, e))?;
    write_atomically(&summary_file, &(text.clone() + "\n"))?;
    Ok(text)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A directory one holder locks is refused to a second (another open file, as another
    /// process would have), and free again once the first lets go; nothing is left in it.
    #[cfg(unix)]
    #[test]
    fn a_locked_directory_is_refused_until_its_holder_lets_go() {
        let dir = tempfile::tempdir().unwrap();
        let first = lock_dir(dir.path()).unwrap();
        let refused = lock_dir(dir.path()).unwrap_err().to_string();
        assert!(refused.contains("another process is writing into this directory"), "{refused}");
        assert!(refused.contains(&dir.path().display().to_string()), "{refused}");
        drop(first);
        let again = lock_dir(dir.path()).unwrap();
        assert_eq!(std::fs::read_dir(dir.path()).unwrap().count(), 0, "the lock leaves no file");
        drop(again);
        let missing = lock_dir(&dir.path().join("missing")).unwrap_err().to_string();
        assert!(missing.contains("cannot lock: not a directory"), "{missing}");
    }

    /// A run refused because another process holds the directory it made (both started at
    /// once: the other took it first) leaves it to that process.
    #[cfg(unix)]
    #[test]
    fn a_failed_run_leaves_a_directory_another_process_holds() {
        let dir = tempfile::tempdir().unwrap();
        let out = dir.path().join("out");
        let mut other = None;
        let refused: Result<(), ()> = removing_created_dir_on_failure(&out, || {
            other = Some(lock_dir(&out).unwrap());
            Err(())
        });
        assert!(refused.is_err() && out.is_dir(), "the other process's directory stays");
        drop(other);
        let failed: Result<(), ()> = removing_created_dir_on_failure(&dir.path().join("mine"), || Err(()));
        assert!(failed.is_err() && !dir.path().join("mine").exists(), "one no one holds goes");
    }

    /// A streamed write that fails part way (a serialiser's error after some bytes) leaves the
    /// file as it was and no temporary file; one that succeeds replaces it whole, past the
    /// buffer's size.
    #[test]
    fn a_streamed_write_replaces_the_file_whole_or_not_at_all() {
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("state.cbor");
        std::fs::write(&file, "old").unwrap();
        let e = write_atomically_with(&file, |w| {
            w.write_all(&[7; 3 << 20])?;
            Err(std::io::Error::other("the encoder gave up"))
        })
        .unwrap_err()
        .to_string();
        assert!(e.contains("state.cbor") && e.contains("the encoder gave up"), "{e}");
        assert_eq!(std::fs::read_to_string(&file).unwrap(), "old");
        assert_eq!(std::fs::read_dir(dir.path()).unwrap().count(), 1, "no temporary file left");
        write_atomically_with(&file, |w| {
            for chunk in 0..5u8 {
                w.write_all(&[chunk; 1 << 20])?;
            }
            Ok(())
        })
        .unwrap();
        let written = std::fs::read(&file).unwrap();
        assert_eq!(written.len(), 5 << 20);
        assert!(written.chunks(1 << 20).enumerate().all(|(i, c)| c.iter().all(|b| usize::from(*b) == i)));
        assert_eq!(std::fs::read_dir(dir.path()).unwrap().count(), 1);
    }

    /// Only the temporary files a killed write leaves are cleared, nothing else of the directory.
    #[test]
    fn stale_temporaries_are_cleared_and_nothing_else() {
        let dir = tempfile::tempdir().unwrap();
        let d = dir.path();
        for name in [".aware-abc.tmp", "state.cbor", "keep.tmp", ".aware-notes.txt"] {
            std::fs::write(d.join(name), "x").unwrap();
        }
        std::fs::create_dir(d.join(".aware-dir.tmp")).unwrap();
        assert_eq!(remove_stale_temporaries(d).unwrap(), 1);
        let mut left: Vec<String> =
            std::fs::read_dir(d).unwrap().map(|e| e.unwrap().file_name().into_string().unwrap()).collect();
        left.sort();
        assert_eq!(left, [".aware-dir.tmp", ".aware-notes.txt", "keep.tmp", "state.cbor"]);
        assert_eq!(remove_stale_temporaries(d).unwrap(), 0);
    }

    #[test]
    fn an_atomic_write_replaces_only_the_file_it_names() {
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("apps.json");
        // A file of the user's that a fixed temporary name (`apps.json.tmp`) would have taken.
        let theirs = dir.path().join("apps.json.tmp");
        std::fs::write(&theirs, "userdata").unwrap();
        write_atomically(&file, "one").unwrap();
        write_atomically(&file, "two").unwrap();
        assert_eq!(std::fs::read_to_string(&file).unwrap(), "two");
        assert_eq!(std::fs::read_to_string(&theirs).unwrap(), "userdata");
        let mut names: Vec<_> = std::fs::read_dir(dir.path()).unwrap().map(|e| e.unwrap().file_name()).collect();
        names.sort();
        assert_eq!(names, ["apps.json", "apps.json.tmp"], "no temporary file left");
        #[cfg(unix)]
        {
            use std::os::unix::fs::{FileTypeExt, PermissionsExt};
            // A file keeps its permissions.
            for mode in [0o640, 0o664, 0o666] {
                std::fs::set_permissions(&file, std::fs::Permissions::from_mode(mode)).unwrap();
                write_atomically(&file, "three").unwrap();
                assert_eq!(std::fs::metadata(&file).unwrap().permissions().mode() & 0o7777, mode, "{mode:o}");
            }
            // A link is written through: it stays a link, its target holds the text.
            let real = dir.path().join("real.json");
            std::fs::write(&real, "old").unwrap();
            let link = dir.path().join("link.json");
            std::os::unix::fs::symlink(&real, &link).unwrap();
            write_atomically(&link, "new").unwrap();
            assert!(std::fs::symlink_metadata(&link).unwrap().file_type().is_symlink());
            assert_eq!(std::fs::read_to_string(&real).unwrap(), "new");
            // A FIFO is written into, not replaced by a file its reader never sees.
            let fifo = dir.path().join("fifo");
            let made = std::process::Command::new("mkfifo").arg(&fifo).status();
            #[cfg(target_os = "linux")]
            if made.is_ok_and(|s| s.success()) {
                use std::io::Read;
                use std::os::unix::fs::OpenOptionsExt;
                // Opened for reading first without blocking (O_NONBLOCK), so that neither side
                // waits for the other: were the FIFO replaced, the reader would read nothing.
                let mut reader = std::fs::OpenOptions::new().read(true).custom_flags(0o4000).open(&fifo).unwrap();
                write_atomically(&fifo, "through the pipe").unwrap();
                let mut got = String::new();
                reader.read_to_string(&mut got).unwrap();
                assert_eq!(got, "through the pipe");
                assert!(std::fs::symlink_metadata(&fifo).unwrap().file_type().is_fifo());
            }
            // A device is written into: `/dev/full` reports the full disk, and stays a device.
            if std::fs::metadata("/dev/full").is_ok_and(|m| m.file_type().is_char_device()) {
                let e = write_atomically(Path::new("/dev/full"), "x").unwrap_err().to_string();
                assert!(e.starts_with("/dev/full: cannot write: "), "{e}");
                assert!(std::fs::metadata("/dev/full").unwrap().file_type().is_char_device());
            }
        }
    }

    #[test]
    fn a_failed_atomic_write_leaves_nothing_behind() {
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("out.json");
        write_atomically(&file, "{}").unwrap();
        assert_eq!(std::fs::read_to_string(&file).unwrap(), "{}");
        // A directory where the file should go: refused, and no `out.d.tmp` left beside it.
        let sub = dir.path().join("out.d");
        std::fs::create_dir(&sub).unwrap();
        let e = write_atomically(&sub, "x").unwrap_err().to_string();
        assert!(e.contains("is a directory"), "{e}");
        let mut names: Vec<_> = std::fs::read_dir(dir.path()).unwrap().map(|e| e.unwrap().file_name()).collect();
        names.sort();
        assert_eq!(names, ["out.d", "out.json"]);
        // A missing directory: the error names the file given, not the temporary one beside it.
        let lost = dir.path().join("nope").join("x.json");
        let e = write_atomically(&lost, "{}").unwrap_err().to_string();
        assert!(e.starts_with(&format!("{}: cannot write: ", lost.display())) && !e.contains(".aware-"), "{e}");
        // A file where a directory should go is refused; a directory, or nothing yet, is fine.
        let e = refuse_non_directory("--out", &file).unwrap_err().to_string();
        assert!(e.contains("--out") && e.contains("not a directory"), "{e}");
        assert!(refuse_non_directory("--out", &sub).is_ok());
        assert!(refuse_non_directory("--out", &dir.path().join("new")).is_ok());
        assert!(refuse_non_directory("--out", &dir.path().join("new").join("deeper")).is_ok());
        // Nor can one be made under a file.
        let e = refuse_non_directory("--out", &file.join("sub").join("dir")).unwrap_err().to_string();
        assert!(e.contains("--out") && e.contains("out.json is not a directory"), "{e}");
    }

    #[test]
    fn an_output_directory_holding_another_runs_files_is_refused() {
        let dir = tempfile::tempdir().unwrap();
        // Empty, or holding files no run writes: fine.
        std::fs::write(dir.path().join("notes.txt"), "mine").unwrap();
        assert!(refuse_checkpoint("--out", dir.path()).is_ok());
        // Each training output alone is refused, named, and left as it was.
        for name in TRAINING_OUTPUTS {
            std::fs::write(dir.path().join(name), "precious").unwrap();
            let e = refuse_checkpoint("--out", dir.path()).unwrap_err().to_string();
            assert!(
                e.starts_with("--out: ") && e.contains(&format!("already holds {name}")) && !e.contains('\n'),
                "{e}"
            );
            assert_eq!(std::fs::read_to_string(dir.path().join(name)).unwrap(), "precious");
            std::fs::remove_file(dir.path().join(name)).unwrap();
        }
        for name in [KEPT_POOL, LIFECYCLE_CHECKPOINT] {
            std::fs::write(dir.path().join(name), "{}").unwrap();
            let e = refuse_checkpoint("--out", dir.path()).unwrap_err().to_string();
            assert!(e.contains(&format!("already holds {name}")), "{e}");
            std::fs::remove_file(dir.path().join(name)).unwrap();
        }
        std::fs::write(dir.path().join(aware_agents::METADATA), "{}").unwrap();
        let e = refuse_checkpoint("--out", dir.path()).unwrap_err().to_string();
        assert!(e.contains("already holds a checkpoint"), "{e}");
        let e = refuse_overwrite("--out", dir.path(), &["pool.json", "notes.txt"]).unwrap_err().to_string();
        assert!(e.contains("already holds notes.txt"), "{e}");
    }

    #[test]
    fn a_failed_run_removes_only_the_directories_it_created() {
        let dir = tempfile::tempdir().unwrap();
        let fail = |out: &Path| {
            removing_created_dir_on_failure(out, || -> Result<(), &str> {
                std::fs::create_dir_all(out).unwrap();
                std::fs::write(out.join("part"), "x").unwrap();
                Err("failed")
            })
        };
        // Created with a parent: both go.
        let out = dir.path().join("new").join("out");
        assert!(fail(&out).is_err());
        assert!(!dir.path().join("new").exists());
        // An existing directory stays, with what it held; only the new child goes.
        let existing = dir.path().join("kept");
        std::fs::create_dir(&existing).unwrap();
        std::fs::write(existing.join("mine"), "y").unwrap();
        assert!(fail(&existing.join("sub")).is_err());
        assert!(!existing.join("sub").exists());
        assert!(fail(&existing).is_err());
        assert_eq!(std::fs::read_to_string(existing.join("mine")).unwrap(), "y");
        // The directory is made before the work (so a failing run can tell it made it).
        let made = dir.path().join("made");
        let _ = removing_created_dir_on_failure(&made, || -> Result<(), &str> {
            assert!(made.is_dir(), "claimed before the work");
            std::fs::write(made.join("part"), "x").unwrap();
            Err("failed")
        });
        assert!(!made.exists());
        // A dangling link is not a missing directory: it stays.
        #[cfg(unix)]
        {
            let link = dir.path().join("link");
            std::os::unix::fs::symlink(dir.path().join("nowhere"), &link).unwrap();
            let _ = removing_created_dir_on_failure(&link, || -> Result<(), &str> { Err("failed") });
            assert!(std::fs::symlink_metadata(&link).is_ok(), "the link is kept");
        }
        // Success keeps what was made.
        let ok = dir.path().join("ok");
        removing_created_dir_on_failure(&ok, || std::fs::create_dir_all(&ok)).unwrap();
        assert!(ok.is_dir());
    }
}
