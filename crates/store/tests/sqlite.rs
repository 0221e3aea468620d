//! SQLite-specific guarantees: refusals that leave the file untouched, and corruption caught
//! on read.

mod common;

use std::os::unix::fs::PermissionsExt;

use aware_store::{SqliteStore, StoreError, Sync, TrajectoryStore, export};
use common::{meta, write};

fn store_with_data(path: &std::path::Path) {
    let mut s = SqliteStore::open(path, Sync::Normal).unwrap();
    write(&mut s, &meta("a", "x", 0, "agent"), 10, 5.0);
}

#[test]
fn newer_schema_is_refused_untouched() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("s.db");
    store_with_data(&path);
    rusqlite::Connection::open(&path).unwrap().execute_batch("PRAGMA user_version = 7").unwrap();
    let before = std::fs::read(&path).unwrap();
    let err = SqliteStore::open(&path, Sync::Normal).err().unwrap();
    assert!(matches!(err, StoreError::NewerSchema { found: 7, .. }), "{err}");
    assert!(err.to_string().contains("newer schema (v7)"));
    assert_eq!(std::fs::read(&path).unwrap(), before, "nothing overwritten");
    // Refused read-only too, and the reader leaves no journal files behind.
    let err = SqliteStore::open_read_only(&path).err().unwrap();
    assert!(matches!(err, StoreError::NewerSchema { found: 7, .. }), "{err}");
    for suffix in ["-wal", "-shm"] {
        let journal = std::path::PathBuf::from(format!("{}{suffix}", path.display()));
        assert!(!journal.exists(), "{} left behind", journal.display());
    }
    assert_eq!(std::fs::read(&path).unwrap(), before, "nothing overwritten");
}

/// A store written by schema version 1 (trajectories only) keeps every episode and gains the
/// lifecycle tables when opened for writing; opened read-only it shows no decisions.
#[test]
fn version_one_store_migrates_in_place() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("s.db");
    store_with_data(&path);
    {
        let c = rusqlite::Connection::open(&path).unwrap();
        c.execute_batch("DROP TABLE decisions; DROP TABLE stage_changes; PRAGMA user_version = 1").unwrap();
    }
    let ro = SqliteStore::open_read_only(&path).unwrap();
    assert!(ro.decisions("x", aware_store::DecisionQuery::Last(5)).unwrap().is_empty());
    drop(ro);
    let before = SqliteStore::open_read_only(&path).unwrap().episodes(None).unwrap();
    let mut s = SqliteStore::open(&path, Sync::Normal).unwrap();
    assert_eq!(s.episodes(None).unwrap(), before, "episodes kept");
    let d = aware_store::DecisionRecord {
        agent: "aware".into(),
        app: "x".into(),
        step: 4,
        stage: "online".into(),
        acting_policy: "aware".into(),
        guard: "passed".into(),
        detail: serde_json::json!({}),
    };
    s.record_decisions(std::slice::from_ref(&d)).unwrap();
    assert_eq!(s.decisions("x", aware_store::DecisionQuery::Step(4)).unwrap(), vec![d]);
    let version: i64 =
        rusqlite::Connection::open(&path).unwrap().query_row("PRAGMA user_version", [], |r| r.get(0)).unwrap();
    assert_eq!(version, 2);
}

#[test]
fn read_only_file_is_refused_for_writing_and_readable_for_inspection() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("s.db");
    store_with_data(&path);
    std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o444)).unwrap();
    let before = std::fs::read(&path).unwrap();
    let err = SqliteStore::open(&path, Sync::Normal).err().unwrap();
    assert!(matches!(err, StoreError::ReadOnly { .. }), "{err}");
    assert!(err.to_string().contains("read-only"));
    let ro = SqliteStore::open_read_only(&path).unwrap();
    assert_eq!(ro.stats().unwrap().episodes, 1);
    assert_eq!(std::fs::read(&path).unwrap(), before);
}

#[test]
fn a_file_that_is_not_a_store_is_refused_untouched() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("notes.db");
    std::fs::write(&path, b"these are my notes, not a database, and they must survive").unwrap();
    let err = SqliteStore::open(&path, Sync::Normal).err().unwrap();
    assert!(matches!(err, StoreError::Corrupt { .. }), "{err}");
    assert_eq!(std::fs::read(&path).unwrap(), b"these are my notes, not a database, and they must survive");
    let other = dir.path().join("other.db");
    rusqlite::Connection::open(&other).unwrap().execute_batch("CREATE TABLE t (x)").unwrap();
    assert!(SqliteStore::open(&other, Sync::Normal).err().unwrap().to_string().contains("not an aware store"));
}

/// Another program's database whose own `user_version` reads like one of the store's schema
/// versions is refused before the migration writes anything into it (its version and tables
/// stay as they were), for writers and readers.
#[test]
fn a_foreign_database_with_a_schema_version_is_refused_untouched() {
    let dir = tempfile::tempdir().unwrap();
    for (version, tables, missing) in [
        (1, "", "no table episodes"),
        (1, "CREATE TABLE episodes (id INTEGER PRIMARY KEY, name TEXT);", "table episodes has no column agent"),
        (2, "CREATE TABLE t (x);", "no table"),
        (-1, "CREATE TABLE t (x);", "schema version -1"),
        (-7, "", "schema version -7"),
    ] {
        let path = dir.path().join(format!("foreign-{version}-{}.db", tables.len()));
        let setup = format!("{tables} PRAGMA user_version = {version};");
        rusqlite::Connection::open(&path).unwrap().execute_batch(&setup).unwrap();
        let before = std::fs::read(&path).unwrap();
        let err = SqliteStore::open(&path, Sync::Normal).err().unwrap();
        assert!(matches!(err, StoreError::Corrupt { .. }), "{err}");
        let text = err.to_string();
        assert!(text.contains("not an aware store") && text.contains(missing), "{text}");
        assert_eq!(std::fs::read(&path).unwrap(), before, "{setup}: nothing written");
        let err = SqliteStore::open_read_only(&path).err().unwrap().to_string();
        assert!(err.contains("not an aware store"), "{err}");
    }
    // A device is no store file, for writers and readers, and nothing is left beside it.
    if std::path::Path::new("/dev/null").exists() {
        for err in [
            SqliteStore::open(std::path::Path::new("/dev/null"), Sync::Normal).err().unwrap(),
            SqliteStore::open_read_only(std::path::Path::new("/dev/null")).err().unwrap(),
        ] {
            assert!(err.to_string().contains("not a regular file"), "{err}");
        }
        assert!(!std::path::Path::new("/dev/null-journal").exists());
    }
}

/// A store with a damaged page is refused, for writing and for reading, before anything reads
/// rows from it or writes into it: a damaged index page can hide episodes from a query with no
/// error (an export then writes fewer records and says nothing).
#[test]
fn a_damaged_page_is_refused_untouched() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("s.db");
    {
        let mut s = SqliteStore::open(&path, Sync::Normal).unwrap();
        for e in 0..20 {
            write(&mut s, &meta("a", "x", e, "agent"), 100, e as f64);
        }
    }
    let mut bytes = std::fs::read(&path).unwrap();
    assert!(bytes.len() > 16 * 4096, "the store spans the page damaged below ({} bytes)", bytes.len());
    // Page 13 of 4 KiB, past its header: overwritten, as a bad disk sector or a stray write would.
    bytes[12 * 4096 + 100..12 * 4096 + 3100].fill(0x37);
    std::fs::write(&path, &bytes).unwrap();
    for err in
        [SqliteStore::open(&path, Sync::Normal).err().unwrap(), SqliteStore::open_read_only(&path).err().unwrap()]
    {
        assert!(matches!(err, StoreError::Corrupt { .. }), "{err}");
        let text = err.to_string();
        assert!(text.starts_with(&path.display().to_string()) && text.contains("damaged"), "{text}");
    }
    assert_eq!(std::fs::read(&path).unwrap(), bytes, "nothing written into it");
}

#[test]
fn wrong_vector_dimension_on_disk_is_reported_on_read() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("s.db");
    store_with_data(&path);
    rusqlite::Connection::open(&path)
        .unwrap()
        .execute("UPDATE transitions SET state = x'00000000' WHERE step = 3", [])
        .unwrap();
    let s = SqliteStore::open(&path, Sync::Normal).unwrap();
    let err = s.episode(1).unwrap_err().to_string();
    assert!(err.contains("episode 1 step 3") && err.contains("dimension 4"), "{err}");
}

#[test]
fn exports_closed_episodes() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("s.db");
    let mut s = SqliteStore::open(&path, Sync::Full).unwrap();
    write(&mut s, &meta("a", "x,y", 0, "agent"), 3, 5.0);
    let open = s.begin_episode(&meta("a", "x,y", 1, "agent")).unwrap();
    s.append(open, &[common::transition(1, 0)]).unwrap();
    let mut csv = Vec::new();
    assert_eq!(export::csv(&s, None, &mut csv).unwrap(), 3, "only the closed episode");
    let csv = String::from_utf8(csv).unwrap();
    assert!(csv.starts_with("episode_id,agent,app,episode,stage,policy,step,reward,done,state,action,next_state\n"));
    assert!(csv.contains("\"x,y\""), "quoted field: {csv}");
    let mut lp = Vec::new();
    assert_eq!(export::line_protocol(&s, Some("a"), &mut lp).unwrap(), 4);
    let lp = String::from_utf8(lp).unwrap();
    assert!(
        lp.lines()
            .next()
            .unwrap()
            .starts_with("transition,agent=a,app=x\\,y,policy=agent,stage=online episode=0i,step=0i")
    );
    assert!(lp.contains("s3=0.5") && lp.contains("episode,agent=a"));
}
