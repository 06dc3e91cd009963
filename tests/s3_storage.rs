//! Against a real S3-compatible server on loopback (moto, started by `scripts/test` through
//! `scripts/s3-server`): conditional writes, a whole rollback, and `inspect` on an s3:// URI.

use hudi_keeper_test_support as common;

use common::fixtures::{Fixture, Kind, TF};
use common::s3::{cli_options, options, s3_store, unique, BUCKET};
use common::{run, stderr, stdout};
use hudi_keeper_core::exec::rollback::{rollback, RollbackOptions, Selection};
use hudi_keeper_core::storage::{RelPath, Storage, StorageError};
use hudi_keeper_core::Table;

#[tokio::test]
async fn the_server_honours_create_if_absent() {
    let root = unique("cond");
    let s = Storage::open(&format!("s3://{BUCKET}/{root}"), &options()).unwrap();
    let p = RelPath::parse(".hoodie/timeline/1.rollback.requested").unwrap();
    s.put_if_absent(&p, bytes::Bytes::from_static(b"first"))
        .await
        .unwrap();
    let err = s
        .put_if_absent(&p, bytes::Bytes::from_static(b"second"))
        .await
        .unwrap_err();
    assert!(matches!(err, StorageError::AlreadyExists { .. }), "{err}");
    assert_eq!(
        s.get(&p).await.unwrap(),
        bytes::Bytes::from_static(b"first")
    );
}

#[tokio::test]
async fn the_server_refuses_a_stale_if_match_with_412() {
    common::s3::assert_conditional_writes_honoured().await;
}

#[tokio::test]
async fn a_replace_at_a_stale_version_is_a_conflict_and_changes_nothing() {
    let root = unique("stale");
    let s = Storage::open(&format!("s3://{BUCKET}/{root}"), &options()).unwrap();
    let p = RelPath::parse(".hoodie/.locks/table_lock.json").unwrap();
    let first = s
        .create_versioned(&p, bytes::Bytes::from_static(b"first"))
        .await
        .unwrap();
    s.put_if_match(&p, bytes::Bytes::from_static(b"second"), &first)
        .await
        .unwrap();
    let err = s
        .put_if_match(&p, bytes::Bytes::from_static(b"stale"), &first)
        .await
        .unwrap_err();
    assert!(matches!(err, StorageError::Conflict { .. }), "{err}");
    assert_eq!(
        s.get(&p).await.unwrap(),
        bytes::Bytes::from_static(b"second")
    );
}

#[tokio::test]
async fn a_read_over_its_cap_is_refused_on_the_size_the_server_reports() {
    use hudi_keeper_core::storage::{testing::CountingInterceptor, OpKind};
    let root = unique("cap");
    let counter = std::sync::Arc::new(CountingInterceptor::new());
    let s = Storage::open(&format!("s3://{BUCKET}/{root}"), &options())
        .unwrap()
        .with_interceptor(counter.clone());
    let p = RelPath::parse(".hoodie/hoodie.properties").unwrap();
    s.put(&p, bytes::Bytes::from(vec![b'#'; 3000]))
        .await
        .unwrap();
    match s.get_capped(&p, 1000).await {
        Err(StorageError::TooLarge { size, max, .. }) => assert_eq!((size, max), (3000, 1000)),
        Err(e) => panic!("{e}"),
        Ok(b) => panic!("read {} bytes over a cap of 1000", b.len()),
    }
    assert_eq!(s.get_capped(&p, 3000).await.unwrap().len(), 3000);
    assert_eq!(counter.count(OpKind::Get), 2);
    assert_eq!(counter.total(), 3, "the put and one GET per read");
}

#[tokio::test]
async fn a_rollback_on_s3_deletes_the_failed_files_and_completes() {
    let root = unique("rb");
    let uri = format!("s3://{BUCKET}/{root}");
    let f = Fixture::build_in(s3_store(), &root, &uri, Kind::MorV9, true).await;
    let table = Table::open(&uri, &options()).await.unwrap();
    // The failed write has no heartbeat file and was written just now: judged failed on a
    // table whose writers are LAZY, with no minimum age.
    let mut opts = RollbackOptions {
        lazy_writers: Some(hudi_keeper_core::protocol::detect::LazyWritersEvidence::Assumed),
        ..RollbackOptions::default()
    };
    opts.heartbeat.min_instant_age = std::time::Duration::ZERO;
    opts.heartbeat.clock_skew_margin = std::time::Duration::ZERO;
    let done = rollback(&table, &Selection::AllFailed, &opts, None)
        .await
        .unwrap();
    assert_eq!(done.len(), 1);
    assert_eq!(done[0].instant, TF);
    let after = f.snapshot().await;
    assert!(
        !after
            .keys()
            .any(|k| !k.starts_with(".hoodie") && k.contains(TF)),
        "{after:?}"
    );
    assert!(after
        .keys()
        .any(|k| k.starts_with(".hoodie/timeline/") && k.ends_with(".rollback")));
}

#[test]
fn inspect_reads_an_s3_table() {
    let rt = tokio::runtime::Runtime::new().unwrap();
    let root = unique("insp");
    let uri = format!("s3://{BUCKET}/{root}");
    rt.block_on(Fixture::build_in(
        s3_store(),
        &root,
        &uri,
        Kind::CowV8,
        false,
    ));
    let mut args = vec!["inspect".to_string(), uri.clone(), "--json".to_string()];
    args.extend(cli_options());
    let out = run(&args.iter().map(String::as_str).collect::<Vec<_>>());
    assert!(out.status.success(), "{}", stderr(&out));
    let v: serde_json::Value = serde_json::from_str(&stdout(&out)).unwrap();
    assert_eq!(v["table"]["version"], 8);
    assert_eq!(v["instants"].as_array().unwrap().len(), 3);
    assert_eq!(v["pending"][0]["requested_time"], TF);
}

/// A one-level listing on S3 goes page by page (the server returns at most 1,000 keys a page):
/// it keeps only the files its filter accepts, across pages, and names the folders below.
#[tokio::test]
async fn a_filtered_one_level_listing_on_s3_keeps_only_what_it_accepts_across_pages() {
    use futures::StreamExt;
    let root = unique("ls");
    let s = Storage::open(&format!("s3://{BUCKET}/{root}"), &options()).unwrap();
    let names: Vec<String> = (0..1_205).map(|i| format!("f{i:05}.parquet")).collect();
    futures::stream::iter(names.iter().cloned())
        .map(|n| {
            let s = s.clone();
            async move {
                s.put(&RelPath::parse(&format!("d/{n}")).unwrap(), "x".into())
                    .await
                    .unwrap()
            }
        })
        .buffer_unordered(32)
        .collect::<Vec<_>>()
        .await;
    for extra in ["d/sub/deep.parquet", "d/other/x", "e/f00007.parquet"] {
        s.put(&RelPath::parse(extra).unwrap(), "x".into())
            .await
            .unwrap();
    }
    let listing = s
        .list_dir_filtered(&RelPath::parse("d").unwrap(), |f| {
            f.file_name().ends_with("7.parquet")
        })
        .await
        .unwrap();
    let mut got: Vec<String> = listing.files.iter().map(|f| f.path.to_string()).collect();
    got.sort();
    let want: Vec<String> = names
        .iter()
        .filter(|n| n.ends_with("7.parquet"))
        .map(|n| format!("d/{n}"))
        .collect();
    assert_eq!(got, want);
    assert_eq!(listing.dirs, vec!["other".to_string(), "sub".to_string()]);
    // The same as the whole listing, filtered.
    let whole = s.list_dir(&RelPath::parse("d").unwrap()).await.unwrap();
    assert_eq!(whole.files.len(), 1_205);
}

/// A fixture table (version 8, copy-on-write) at a new folder of the bucket, and its URI.
fn cow_table(rt: &tokio::runtime::Runtime, name: &str) -> (Fixture, String) {
    let root = unique(name);
    let uri = format!("s3://{BUCKET}/{root}");
    let f = rt.block_on(Fixture::build_in(
        s3_store(),
        &root,
        &uri,
        Kind::CowV8,
        false,
    ));
    (f, uri)
}

/// The audit on S3 lists the table's data files in one listing that starts past `.hoodie`,
/// not one per partition: 40 small partitions cost one listing (about one LIST request per
/// 1,000 keys however the files are spread), and every data file is still classified.
#[test]
fn the_audit_on_s3_lists_every_partition_in_one_listing_past_hoodie() {
    let rt = tokio::runtime::Runtime::new().unwrap();
    let (f, uri) = cow_table(&rt, "audit");
    let before = rt.block_on(f.snapshot());
    let data_files = before
        .keys()
        .filter(|k| !k.starts_with(".hoodie") && k.ends_with(".parquet"))
        .count();
    rt.block_on(async {
        for i in 0..40 {
            f.put(&format!("q{i:02}/.hoodie_partition_metadata"), b"x")
                .await;
            f.put(&format!("q{i:02}/stray-{i}.txt"), b"x").await;
        }
    });
    let mut args = vec!["audit".to_string(), uri.clone(), "--json".to_string()];
    args.extend(cli_options());
    let out = run(&args.iter().map(String::as_str).collect::<Vec<_>>());
    assert!(out.status.success(), "{}", stderr(&out));
    let v: serde_json::Value = serde_json::from_str(&stdout(&out)).unwrap();
    assert_eq!(v["requests"]["list"], 1, "{}", v["requests"]);
    let classified: u64 = v["classes"]
        .as_object()
        .unwrap()
        .values()
        .map(|c| c["files"].as_u64().unwrap_or(0))
        .sum();
    assert!(data_files > 0);
    assert_eq!(classified as usize, data_files, "{}", v["classes"]);
    // The 80 objects of the new partitions are seen too (not data files).
    assert!(v["other_files"].as_u64().unwrap() >= 80, "{v}");
}

/// Folders whose name starts with `.hoodie` and a character that sorts before `/` (a
/// `.hoodie-old/` or `.hoodie.bak/` an operator kept) sort before `.hoodie/`'s keys on S3: the
/// listing past `.hoodie` never reaches them, so they are listed one by one before it.
#[test]
fn the_audit_on_s3_sees_folders_that_sort_just_before_hoodie() {
    let rt = tokio::runtime::Runtime::new().unwrap();
    let (f, uri) = cow_table(&rt, "audit-near");
    let audit = || {
        let mut args = vec!["audit".to_string(), uri.clone(), "--json".to_string()];
        args.extend(cli_options());
        let out = run(&args.iter().map(String::as_str).collect::<Vec<_>>());
        assert!(out.status.success(), "{}", stderr(&out));
        serde_json::from_str::<serde_json::Value>(&stdout(&out)).unwrap()
    };
    let before = audit();
    rt.block_on(async {
        f.put(".hoodie-old/kept.txt", b"x").await;
        f.put(".hoodie.bak/timeline/1.commit", b"x").await;
        f.put(".hoodie0/after.txt", b"x").await;
    });
    let after = audit();
    assert_eq!(
        after["other_files"].as_u64().unwrap(),
        before["other_files"].as_u64().unwrap() + 3,
        "before: {before}\nafter: {after}"
    );
    // One listing past `.hoodie`, and one for each of the two folders before it.
    assert_eq!(after["requests"]["list"], 3, "{}", after["requests"]);
}
