//! The S3-compatible server the tests run against (moto on loopback, started by `scripts/test`
//! through `scripts/s3-server`).

use std::sync::Arc;

use hudi_keeper_core::storage::StorageOptions;

/// The bucket `scripts/s3-server` creates.
pub const BUCKET: &str = "hudi-keeper";

pub fn endpoint() -> String {
    std::env::var("HUDI_KEEPER_S3_ENDPOINT").expect(
        "HUDI_KEEPER_S3_ENDPOINT is not set: run the tests through scripts/test, which starts an S3-compatible server",
    )
}

pub fn options() -> StorageOptions {
    StorageOptions::from_pairs([
        ("aws_endpoint", endpoint()),
        ("aws_allow_http", "true".to_string()),
        ("aws_region", "us-east-1".to_string()),
        ("aws_access_key_id", "test".to_string()),
        ("aws_secret_access_key", "test".to_string()),
    ])
}

/// The same options as `--storage-option` arguments for the binary.
pub fn cli_options() -> Vec<String> {
    super::storage_option_args(&options())
}

/// A prefix no other test run uses.
pub fn unique(prefix: &str) -> String {
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_nanos())
        .unwrap_or_default();
    format!("{prefix}-{}-{nanos}", std::process::id())
}

/// A raw client of the bucket.
pub fn s3_store() -> Arc<dyn object_store::ObjectStore> {
    let mut b = object_store::aws::AmazonS3Builder::new().with_bucket_name(BUCKET);
    for (k, v) in &options().0 {
        b = b.with_config(k.parse().expect("known key"), v);
    }
    Arc::new(b.build().expect("S3 client"))
}

/// Panic unless the server honours the conditional writes the storage-based lock stands on,
/// as a signed client (object_store's, as hudi-keeper's; the AWS SDK's, as Hudi's) sends them:
/// `If-None-Match: *` on an existing object and `If-Match` with a stale ETag are refused with
/// 412 Precondition Failed, and `If-Match` with the current ETag is accepted. Tests of mutual
/// exclusion through the lock prove nothing on a server that ignores them.
pub async fn assert_conditional_writes_honoured() {
    use object_store::{ObjectStoreExt, PutMode, PutOptions, PutPayload, UpdateVersion};
    let store = s3_store();
    let key = object_store::path::Path::from(format!("{}/lock.json", unique("ifmatch")));
    let put = |mode: PutMode, body: &'static str| {
        let store = Arc::clone(&store);
        let key = key.clone();
        async move {
            let opts = PutOptions {
                mode,
                ..PutOptions::default()
            };
            store
                .put_opts(&key, PutPayload::from_static(body.as_bytes()), opts)
                .await
        }
    };
    let at = |r: &object_store::PutResult| UpdateVersion {
        e_tag: r.e_tag.clone(),
        version: r.version.clone(),
    };
    let first = put(PutMode::Create, "first")
        .await
        .expect("create a new object");
    match put(PutMode::Create, "again").await {
        Err(object_store::Error::AlreadyExists { .. }) => {}
        other => panic!("the server ignores If-None-Match: {other:?}"),
    }
    let second = put(PutMode::Update(at(&first)), "second")
        .await
        .expect("replace at the current ETag");
    assert_ne!(first.e_tag, second.e_tag, "a replaced object kept its ETag");
    match put(PutMode::Update(at(&first)), "stale").await {
        Err(e @ object_store::Error::Precondition { .. }) => {
            assert!(format!("{e:?}").contains("412"), "not a 412: {e:?}")
        }
        other => panic!("the server ignores If-Match (a replace at a stale ETag): {other:?}"),
    }
    let now = store
        .get(&key)
        .await
        .expect("read")
        .bytes()
        .await
        .expect("body");
    assert_eq!(&now[..], b"second", "a refused write changed the object");
}
