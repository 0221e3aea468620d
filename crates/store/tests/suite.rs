//! The behaviour every backend must have, run against each available backend.

mod common;

use aware_store::{SqliteStore, Sync};
use common::run_suite;

#[test]
fn sqlite_backend_passes_the_suite() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("store.db");
    run_suite(|| Box::new(SqliteStore::open(&path, Sync::Normal).unwrap()));
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
