//! Store selection by URL, as in the profile and on the command line.

use std::path::{Path, PathBuf};
use std::str::FromStr;

use crate::TrajectoryStore;
use crate::model::StoreError;
use crate::sqlite::{SqliteStore, Sync};

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum StoreUrl {
    /// `sqlite:PATH`, optionally `?sync=full`. `sqlite://PATH` names the same file (sqlx's
    /// spelling: `sqlite:///var/aware.db` is absolute, `sqlite://aware.db` relative).
    Sqlite { path: PathBuf, sync: Sync },
    /// `postgres://…` or `postgresql://…`.
    Postgres(String),
    /// `influxdb://…`.
    Influx(String),
}

impl FromStr for StoreUrl {
    type Err = StoreError;

    fn from_str(s: &str) -> Result<Self, StoreError> {
        if let Some(rest) = s.strip_prefix("sqlite:") {
            let rest = rest.strip_prefix("//").unwrap_or(rest);
            let (path, query) = rest.split_once('?').unwrap_or((rest, ""));
            if path.is_empty() {
                return Err(StoreError::Invalid(format!("store URL {s:?}: sqlite: needs a file path")));
            }
            // SQLite would open a database that vanishes with the connection, and every
            // episode, stage change and decision with it.
            if path == ":memory:" || path.starts_with("file::memory:") {
                return Err(StoreError::Invalid(format!(
                    "store URL {s:?}: an in-memory database keeps nothing after the run; name a file"
                )));
            }
            let sync = match query {
                "" | "sync=normal" => Sync::Normal,
                "sync=full" => Sync::Full,
                other => {
                    return Err(StoreError::Invalid(format!(
                        "store URL {s:?}: unknown option {other:?} (expected sync=normal or sync=full)"
                    )));
                }
            };
            return Ok(StoreUrl::Sqlite { path: PathBuf::from(path), sync });
        }
        if s.starts_with("postgres://") || s.starts_with("postgresql://") {
            return Ok(StoreUrl::Postgres(s.to_string()));
        }
        if s.starts_with("influxdb://") {
            return Ok(StoreUrl::Influx(s.to_string()));
        }
        Err(StoreError::Invalid(format!(
            "store URL {s:?}: unknown scheme (expected sqlite:PATH, postgres://… or influxdb://…)"
        )))
    }
}

/// Opens the store a URL names; `read_only` opens an existing SQLite file without writing.
pub fn open(url: &StoreUrl, read_only: bool) -> Result<Box<dyn TrajectoryStore>, StoreError> {
    match url {
        StoreUrl::Sqlite { path, sync } => {
            // SQLite would say only "disk I/O error".
            if path.is_dir() {
                return Err(StoreError::Invalid(format!(
                    "{}: is a directory; a SQLite store is a file (sqlite:DIR/aware.db)",
                    path.display()
                )));
            }
            Ok(Box::new(if read_only { SqliteStore::open_read_only(path)? } else { SqliteStore::open(path, *sync)? }))
        }
        StoreUrl::Postgres(url) => Ok(Box::new(crate::postgres::PostgresStore::connect(url)?)),
        StoreUrl::Influx(url) => Ok(Box::new(crate::influx::InfluxStore::connect(url)?)),
    }
}

/// What SQLite writes beside a database file `F`: `F-wal`, `F-shm`, `F-journal`.
pub const SQLITE_JOURNALS: [&str; 3] = ["-wal", "-shm", "-journal"];

/// How much journal a spool keeps by default before refusing writes: 1 GiB.
pub const DEFAULT_SPOOL_BYTES: u64 = 1 << 30;

impl StoreUrl {
    /// Whether writing `path` would write over this store: the SQLite file itself or its
    /// journal (`-wal`, `-shm`, `-journal`). A server's store has no file here.
    pub fn is_store_file(&self, path: &Path) -> bool {
        let StoreUrl::Sqlite { path: db, .. } = self else {
            return false;
        };
        // The same file however it is spelled (relative or absolute, `./`, a link): resolved
        // whole where it exists, else its directory resolved and its name joined (a journal
        // or a store not written yet), else made absolute as given.
        let resolve = |p: &Path| {
            std::fs::canonicalize(p).unwrap_or_else(|_| {
                let parent = p.parent().filter(|d| !d.as_os_str().is_empty()).unwrap_or(Path::new("."));
                match (std::fs::canonicalize(parent), p.file_name()) {
                    (Ok(dir), Some(name)) => dir.join(name),
                    _ => std::env::current_dir().map(|d| d.join(p)).unwrap_or_else(|_| p.to_path_buf()),
                }
            })
        };
        let target = resolve(path);
        std::iter::once("").chain(SQLITE_JOURNALS).any(|suffix| {
            let mut name = db.as_os_str().to_os_string();
            name.push(suffix);
            resolve(Path::new(&name)) == target
        })
    }

    /// Where a writer spools this store's writes during an outage unless told otherwise:
    /// `PATH.spool/` beside a SQLite file, `aware-spool/` in the working directory for a server.
    pub fn default_spool_dir(&self) -> PathBuf {
        match self {
            StoreUrl::Sqlite { path, .. } => {
                let mut name = path.file_name().map(|n| n.to_os_string()).unwrap_or_default();
                name.push(".spool");
                path.with_file_name(name)
            }
            StoreUrl::Postgres(_) | StoreUrl::Influx(_) => PathBuf::from("aware-spool"),
        }
    }
}

/// Opens the store a URL names for writing, behind an on-disk spool in `spool` (its default
/// when `None`) holding at most `max_bytes` of writes made while the store is unreachable.
/// A server (PostgreSQL, InfluxDB) that does not answer now is connected to later: the writes
/// are spooled from the first one and flushed once it answers (`crate::deferred`). A SQLite
/// file that cannot be opened, or a server that answers with a refusal, is an error now.
pub fn open_spooled(url: &StoreUrl, spool: Option<&Path>, max_bytes: u64) -> Result<crate::Spooled, StoreError> {
    let dir = spool.map_or_else(|| url.default_spool_dir(), Path::to_path_buf);
    let inner = match open(url, false) {
        Ok(store) => store,
        Err(StoreError::Unavailable(why)) if !matches!(url, StoreUrl::Sqlite { .. }) => {
            Box::new(crate::deferred::Deferred::new(url, why))
        }
        Err(e) => return Err(e),
    };
    crate::Spooled::new(inner, &dir, max_bytes)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sqlite_urls_name_their_file_in_either_spelling() {
        let path = |url: &str| match url.parse::<StoreUrl>().unwrap() {
            StoreUrl::Sqlite { path, sync } => (path, sync),
            other => panic!("{url}: {other:?}"),
        };
        assert_eq!(path("sqlite:aware.db"), (PathBuf::from("aware.db"), Sync::Normal));
        assert_eq!(path("sqlite://aware.db"), (PathBuf::from("aware.db"), Sync::Normal));
        assert_eq!(path("sqlite:/var/aware.db"), (PathBuf::from("/var/aware.db"), Sync::Normal));
        assert_eq!(path("sqlite:///var/aware.db?sync=full"), (PathBuf::from("/var/aware.db"), Sync::Full));
        for bad in [
            "sqlite:",
            "sqlite://",
            "sqlite://?sync=full",
            "sqlite::memory:",
            "sqlite://:memory:",
            "sqlite:aware.db?sync=off",
        ] {
            let err = bad.parse::<StoreUrl>().expect_err(bad).to_string();
            assert!(err.contains(&format!("{bad:?}")), "{bad}: {err}");
        }
        assert!("sqlite::memory:".parse::<StoreUrl>().unwrap_err().to_string().contains("keeps nothing"));
    }

    #[test]
    fn a_directory_is_not_taken_for_a_sqlite_store() {
        let dir = tempfile::tempdir().unwrap();
        let url: StoreUrl = format!("sqlite:{}", dir.path().display()).parse().unwrap();
        for read_only in [true, false] {
            let err = open(&url, read_only).err().expect("refused").to_string();
            assert!(err.contains("is a directory") && err.starts_with(&dir.path().display().to_string()), "{err}");
        }
    }

    #[test]
    fn the_store_file_and_its_journal_are_the_store_however_spelled() {
        let dir = tempfile::tempdir().unwrap();
        let db = dir.path().join("s.db");
        std::fs::write(&db, b"").unwrap();
        let url: StoreUrl = format!("sqlite:{}?sync=full", db.display()).parse().unwrap();
        assert!(url.is_store_file(&db));
        assert!(url.is_store_file(&dir.path().join(".").join("s.db")), "another spelling of the same file");
        assert!(url.is_store_file(&dir.path().join("s.db-wal")), "its journal, even before it exists");
        assert!(url.is_store_file(&dir.path().join(".").join("s.db-shm")), "spelled otherwise, not there yet");
        // A store not written yet, named relative to the working directory and absolutely.
        let here = std::env::current_dir().unwrap();
        let relative: StoreUrl = "sqlite:not-yet-written.db".parse().unwrap();
        assert!(relative.is_store_file(&here.join("not-yet-written.db")));
        assert!(!relative.is_store_file(&here.join("other.db")));
        assert!(!url.is_store_file(&dir.path().join("s.csv")));
        assert!(!url.is_store_file(&dir.path().join("t.db")));
        let server: StoreUrl = "postgres://localhost/aware".parse().unwrap();
        assert!(!server.is_store_file(&db));
    }
}
