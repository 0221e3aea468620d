//! The behaviour every backend must have, run against each available backend.

mod common;

use aware_store::{SqliteStore, Sync};
use common::{run_lifecycle_log_suite, run_suite};

#[test]
fn sqlite_backend_passes_the_suite() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("store.db");
    run_suite(|| Box::new(SqliteStore::open(&path, Sync::Normal).unwrap()));
}

#[test]
fn sqlite_keeps_the_lifecycle_log() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("store.db");
    run_lifecycle_log_suite(|| Box::new(SqliteStore::open(&path, Sync::Normal).unwrap()));
}

#[test]
#[ignore = "needs PostgreSQL: set AWARE_TEST_POSTGRES_URL"]
fn postgres_keeps_the_lifecycle_log() {
    // Its own database: the suite below clears and checks the main one at the same time (tests
    // run in parallel), and clearing it under the suite lost the suite's episodes.
    let (url, _) = postgres_scratch(&server("AWARE_TEST_POSTGRES_URL"), "log");
    run_lifecycle_log_suite(|| Box::new(aware_store::PostgresStore::connect(&url).unwrap()));
}

/// A fresh, empty database beside the one `url` names (`{its name}_{suffix}`): its URL and
/// its name.
fn postgres_scratch(url: &str, suffix: &str) -> (String, String) {
    let name = url.rsplit('/').next().unwrap().split('?').next().unwrap();
    let scratch = format!("{name}_{suffix}");
    let mut admin = postgres::Client::connect(url, postgres::NoTls).unwrap();
    admin.batch_execute(&format!("DROP DATABASE IF EXISTS {scratch} WITH (FORCE)")).unwrap();
    admin.batch_execute(&format!("CREATE DATABASE {scratch}")).unwrap();
    (format!("{url}_{suffix}"), scratch)
}

#[test]
fn store_urls_select_backends_or_say_why_not() {
    use aware_store::StoreUrl;
    assert!(matches!("sqlite:/tmp/a.db".parse::<StoreUrl>().unwrap(), StoreUrl::Sqlite { sync: Sync::Normal, .. }));
    assert!(matches!("sqlite:a.db?sync=full".parse::<StoreUrl>().unwrap(), StoreUrl::Sqlite { sync: Sync::Full, .. }));
    for bad in ["mysql://x", "sqlite:", "sqlite:a.db?fast=yes", "a.db"] {
        let err = bad.parse::<StoreUrl>().unwrap_err().to_string();
        assert!(err.contains(bad.split('?').next().unwrap()) && !err.contains('\n'), "{err}");
    }
    assert!(matches!("postgres://u@127.0.0.1/db".parse::<StoreUrl>().unwrap(), StoreUrl::Postgres(_)));
    assert!(matches!("influxdb://127.0.0.1:8086/aware".parse::<StoreUrl>().unwrap(), StoreUrl::Influx(_)));
}

/// A server URL from the environment. These tests are `#[ignore]`d, so a plain `cargo test`
/// reports them as ignored, never as passed; CI starts real servers (`.ci/services.sh`), sets the
/// variables and runs them with `--include-ignored`, where a missing variable or an unreachable
/// server fails the test.
fn server(var: &str) -> String {
    std::env::var(var)
        .unwrap_or_else(|_| panic!("{var} is not set: start servers with `eval \"$(bash .ci/services.sh start)\"`"))
}

#[test]
#[ignore = "needs PostgreSQL: set AWARE_TEST_POSTGRES_URL"]
fn postgres_backend_passes_the_suite() {
    let url = server("AWARE_TEST_POSTGRES_URL");
    aware_store::PostgresStore::connect(&url).unwrap().clear().unwrap();
    run_suite(|| Box::new(aware_store::PostgresStore::connect(&url).unwrap()));
}

#[test]
#[ignore = "needs PostgreSQL: set AWARE_TEST_POSTGRES_URL"]
fn postgres_refuses_a_newer_schema() {
    let (scratch, _) = postgres_scratch(&server("AWARE_TEST_POSTGRES_URL"), "schema");
    drop(aware_store::PostgresStore::connect(&scratch).unwrap());
    let mut c = postgres::Client::connect(&scratch, postgres::NoTls).unwrap();
    c.batch_execute("UPDATE aware_schema SET version = 9").unwrap();
    let err = aware_store::PostgresStore::connect(&scratch).err().unwrap().to_string();
    assert!(err.contains("newer schema (v9)"), "{err}");
    let version: i32 = c.query_one("SELECT max(version) FROM aware_schema", &[]).unwrap().get(0);
    assert_eq!(version, 9, "untouched");
}

#[test]
fn unreachable_postgres_is_a_one_line_error() {
    let err =
        aware_store::PostgresStore::connect("postgres://aware:secret@127.0.0.1:1/none").err().unwrap().to_string();
    assert!(err.contains("cannot connect") && !err.contains('\n') && !err.contains("secret"), "{err}");
}

#[test]
#[ignore = "needs InfluxDB: set AWARE_TEST_INFLUXDB_URL"]
fn influxdb_backend_passes_the_suite() {
    let url = server("AWARE_TEST_INFLUXDB_URL");
    aware_store::InfluxStore::connect(&url).unwrap().clear().unwrap();
    run_suite(|| Box::new(aware_store::InfluxStore::connect(&url).unwrap()));
}

#[test]
#[ignore = "needs InfluxDB: set AWARE_TEST_INFLUXDB_URL"]
fn influxdb_refuses_a_newer_schema() {
    let url = server("AWARE_TEST_INFLUXDB_URL");
    let scratch = format!("{url}_schema");
    drop(aware_store::InfluxStore::connect(&scratch).unwrap());
    let base = url.trim_start_matches("influxdb://").split('/').next().unwrap().to_string();
    let agent = ureq::Agent::new_with_defaults();
    agent
        .post(format!("http://{base}/write"))
        .query("db", format!("{}_schema", url.rsplit('/').next().unwrap()))
        .send("aware_schema version=9i 0\n")
        .unwrap();
    let err = aware_store::InfluxStore::connect(&scratch).err().unwrap().to_string();
    assert!(err.contains("newer schema (v9)"), "{err}");
    agent
        .post(format!("http://{base}/write"))
        .query("db", format!("{}_schema", url.rsplit('/').next().unwrap()))
        .send("aware_schema version=1i 0\n")
        .unwrap();
}

#[test]
fn unreachable_influxdb_is_a_one_line_error() {
    let err = aware_store::InfluxStore::connect("influxdb://127.0.0.1:1/aware").err().unwrap().to_string();
    assert!(err.contains("cannot connect") && !err.contains('\n'), "{err}");
}

#[test]
#[ignore = "needs InfluxDB: set AWARE_TEST_INFLUXDB_URL"]
fn influxdb_keeps_the_lifecycle_log() {
    let url = format!("{}_log", server("AWARE_TEST_INFLUXDB_URL"));
    aware_store::InfluxStore::connect(&url).unwrap().clear().unwrap();
    run_lifecycle_log_suite(|| Box::new(aware_store::InfluxStore::connect(&url).unwrap()));
}

/// A PostgreSQL connection killed by the server in the middle of an episode: the next write
/// reconnects, writes again what the lost transaction held, and the episode closes whole.
#[test]
#[ignore = "needs PostgreSQL: set AWARE_TEST_POSTGRES_URL"]
fn postgres_survives_a_dropped_connection() {
    use aware_store::TrajectoryStore;
    let url = server("AWARE_TEST_POSTGRES_URL");
    let (scratch, name) = postgres_scratch(&url, "reconnect");
    let mut admin = postgres::Client::connect(&url, postgres::NoTls).unwrap();
    let mut store = aware_store::PostgresStore::connect(&scratch).unwrap();
    let kill = |admin: &mut postgres::Client| {
        let killed = admin
            .query(
                "SELECT pg_terminate_backend(pid) FROM pg_stat_activity
                 WHERE datname = $1 AND pid <> pg_backend_pid()",
                &[&name],
            )
            .unwrap();
        assert!(!killed.is_empty(), "the store's connection was found");
        std::thread::sleep(std::time::Duration::from_millis(100));
    };
    let m = common::meta("a", "x", 0, "mpa");
    let id = store.begin_episode(&m).unwrap();
    let steps: Vec<_> = (0..10).map(|s| common::transition(0, s)).collect();
    store.append(id, &steps[..5]).unwrap();
    kill(&mut admin);
    store.append(id, &steps[5..]).unwrap();
    store.close_episode(id, 4.5).unwrap();
    let (rec, read) = store.episode(id).unwrap();
    assert_eq!((rec.total_reward, rec.length), (Some(4.5), 10));
    assert_eq!(read, steps, "the transitions of the lost transaction were written again");
    // A read after a kill reconnects too.
    kill(&mut admin);
    assert_eq!(store.last_rewards("a", 5).unwrap(), vec![4.5]);
}
