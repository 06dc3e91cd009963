//! Discovery through the storage seam, on the local file system: which tables a scan finds,
//! what it costs in requests, and what a failed request makes of it.

use std::path::Path;
use std::sync::Arc;

use hudi_keeper_core::discover::{scan, FilterSettings, ScanLimits, ScanOptions};
use hudi_keeper_core::storage::testing::FailNth;
use hudi_keeper_core::storage::{OpKind, RequestCounter, Storage, StorageOptions};

fn write(root: &Path, rel: &str, text: &str) {
    let p = root.join(rel);
    std::fs::create_dir_all(p.parent().expect("parent")).expect("mkdir");
    std::fs::write(p, text).expect("write");
}

fn table(root: &Path, rel: &str, name: &str) {
    write(
        root,
        &format!("{rel}/.hoodie/hoodie.properties"),
        &format!(
            "hoodie.table.name={name}\nhoodie.table.type=COPY_ON_WRITE\nhoodie.table.version=6\n"
        ),
    );
    write(
        root,
        &format!("{rel}/.hoodie/20240101000000000.commit"),
        "{}",
    );
    write(root, &format!("{rel}/dt=2024-01-01/f1.parquet"), "x");
    write(root, &format!("{rel}/dt=2024-01-02/f2.parquet"), "x");
}

/// A warehouse: two tables in databases, one with a metadata table (a table inside its
/// `.hoodie`, never to be found on its own), one deep table, and folders that hold none.
fn warehouse() -> tempfile::TempDir {
    let dir = tempfile::tempdir().expect("tempdir");
    let root = dir.path();
    table(root, "db1/orders", "orders");
    write(
        root,
        "db1/orders/.hoodie/metadata/.hoodie/hoodie.properties",
        "hoodie.table.name=orders_metadata\n",
    );
    // A table inside a table's partition folder is not looked for.
    table(root, "db1/orders/dt=2024-01-01/inner", "inner");
    table(root, "db2/users", "users");
    write(root, "db2/notes/readme.txt", "not a table");
    table(root, "deep/a/b/c/events", "events");
    dir
}

async fn run(
    storage: &Storage,
    prefix: &str,
    options: &ScanOptions,
) -> hudi_keeper_core::discover::ScanReport {
    scan(storage, prefix, options, |_| {})
        .await
        .expect("scan starts")
}

#[tokio::test]
async fn finds_the_tables_with_one_listing_per_folder_and_one_read_per_table() {
    let dir = warehouse();
    let prefix = dir.path().display().to_string();
    let counter = Arc::new(RequestCounter::new());
    let storage = Storage::open(&prefix, &StorageOptions::default())
        .expect("open")
        .with_interceptor(counter.clone());
    let r = run(&storage, &prefix, &ScanOptions::default()).await;
    let found: Vec<(String, &str)> = r
        .tables
        .iter()
        .map(|t| (t.location.replace(&prefix, "P"), t.name.as_str()))
        .collect();
    assert_eq!(
        found,
        vec![
            ("P/db1/orders".to_string(), "orders"),
            ("P/db2/users".to_string(), "users"),
            ("P/deep/a/b/c/events".to_string(), "events"),
        ]
    );
    assert!(r.complete, "{r:?}");
    // Folders listed: the prefix, db1, db2, deep, orders, users, notes, a, b, c, events.
    assert_eq!(counter.count(OpKind::ListDir), 11);
    assert_eq!(r.folders_listed, 11);
    assert_eq!(counter.count(OpKind::Get), 3);
    assert_eq!(counter.count(OpKind::List), 0, "no recursive listing");
    assert_eq!(counter.total(), r.requests);
}

#[tokio::test]
async fn depth_and_budget_limit_a_scan() {
    let dir = warehouse();
    let prefix = dir.path().display().to_string();
    let storage = Storage::open(&prefix, &StorageOptions::default()).expect("open");
    let shallow = ScanOptions {
        limits: ScanLimits {
            max_depth: 2,
            ..ScanLimits::default()
        },
        ..ScanOptions::default()
    };
    let r = run(&storage, &prefix, &shallow).await;
    assert_eq!(r.tables.len(), 2, "{r:?}");
    assert!(r.complete);
    let counter = Arc::new(RequestCounter::new());
    let counted = storage.clone().with_interceptor(counter.clone());
    let tight = ScanOptions {
        limits: ScanLimits {
            max_requests: 5,
            ..ScanLimits::default()
        },
        ..ScanOptions::default()
    };
    let r = run(&counted, &prefix, &tight).await;
    assert!(r.cut_short && !r.complete, "{r:?}");
    assert_eq!(counter.total(), 5, "the budget is a hard limit");
}

#[tokio::test]
async fn a_failed_request_leaves_the_scan_incomplete() {
    let dir = warehouse();
    let prefix = dir.path().display().to_string();
    for (kind, n) in [(OpKind::ListDir, 3), (OpKind::Get, 1)] {
        let fail = Arc::new(FailNth::new(&[kind], n));
        let storage = Storage::open(&prefix, &StorageOptions::default())
            .expect("open")
            .with_interceptor(fail.clone());
        let r = run(&storage, &prefix, &ScanOptions::default()).await;
        assert!(fail.fired());
        assert!(!r.complete, "{kind}: {r:?}");
        assert_eq!(r.problem_count, 1);
        assert!(!r.tables.is_empty(), "the rest is still found");
    }
}

#[tokio::test]
async fn filters_apply_to_names_and_locations() {
    let dir = warehouse();
    let prefix = dir.path().display().to_string();
    let storage = Storage::open(&prefix, &StorageOptions::default()).expect("open");
    let options = ScanOptions {
        filters: FilterSettings {
            exclude_locations: vec![format!("{prefix}/deep")],
            exclude_names: vec!["user*".into()],
            ..FilterSettings::default()
        },
        ..ScanOptions::default()
    };
    let r = run(&storage, &prefix, &options).await;
    let names: Vec<&str> = r.tables.iter().map(|t| t.name.as_str()).collect();
    assert_eq!(names, vec!["orders"]);
    assert_eq!((r.filtered_out, r.folders_excluded), (1, 1));
}
