//! Against a real S3-compatible server on loopback (moto, started by `scripts/test` through
//! `scripts/s3-server`): conditional writes, a whole rollback, and `inspect` on an s3:// URI.

mod common;

use std::sync::Arc;

use common::fixtures::{Fixture, Kind, TF};
use common::{run, stderr, stdout};
use hudi_keeper_core::exec::rollback::{rollback, RollbackOptions, Selection};
use hudi_keeper_core::storage::{RelPath, Storage, StorageError, StorageOptions};
use hudi_keeper_core::Table;

const BUCKET: &str = "hudi-keeper";

fn endpoint() -> String {
    std::env::var("HUDI_KEEPER_S3_ENDPOINT").expect(
        "HUDI_KEEPER_S3_ENDPOINT is not set: run the tests through scripts/test, which starts an S3-compatible server",
    )
}

fn options() -> StorageOptions {
    StorageOptions::from_pairs([
        ("aws_endpoint", endpoint()),
        ("aws_allow_http", "true".to_string()),
        ("aws_region", "us-east-1".to_string()),
        ("aws_access_key_id", "test".to_string()),
        ("aws_secret_access_key", "test".to_string()),
    ])
}

fn unique(prefix: &str) -> String {
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_nanos())
        .unwrap_or_default();
    format!("{prefix}-{}-{nanos}", std::process::id())
}

fn s3_store() -> Arc<dyn object_store::ObjectStore> {
    let mut b = object_store::aws::AmazonS3Builder::new().with_bucket_name(BUCKET);
    for (k, v) in &options().0 {
        b = b.with_config(k.parse().expect("known key"), v);
    }
    Arc::new(b.build().expect("S3 client"))
}

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
async fn a_rollback_on_s3_deletes_the_failed_files_and_completes() {
    let root = unique("rb");
    let uri = format!("s3://{BUCKET}/{root}");
    let f = Fixture::build_in(s3_store(), &root, &uri, Kind::MorV9, true).await;
    let table = Table::open(&uri, &options()).await.unwrap();
    let done = rollback(
        &table,
        &Selection::AllFailed,
        &RollbackOptions::default(),
        None,
    )
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
    let ep = format!("aws_endpoint={}", endpoint());
    let out = run(&[
        "inspect",
        &uri,
        "--json",
        "--storage-option",
        &ep,
        "--storage-option",
        "aws_allow_http=true",
        "--storage-option",
        "aws_region=us-east-1",
        "--storage-option",
        "aws_access_key_id=test",
        "--storage-option",
        "aws_secret_access_key=test",
    ]);
    assert!(out.status.success(), "{}", stderr(&out));
    let v: serde_json::Value = serde_json::from_str(&stdout(&out)).unwrap();
    assert_eq!(v["table"]["version"], 8);
    assert_eq!(v["instants"].as_array().unwrap().len(), 3);
    assert_eq!(v["pending"][0]["requested_time"], TF);
}
