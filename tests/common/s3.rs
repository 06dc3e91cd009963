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
    options()
        .0
        .iter()
        .flat_map(|(k, v)| ["--storage-option".to_string(), format!("{k}={v}")])
        .collect()
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
