//! Rollback of one failed commit with many files, against deleting the same files with nothing
//! else to do, on the local file system and on an S3-compatible server.
//!
//! cargo bench -p hudi-keeper-core --bench rollback -- [--files 10000,100000] [--stores local,s3]
//!   [--cross-check on,off]
//!   s3 needs HUDI_KEEPER_S3_ENDPOINT (scripts/s3-server start) and curl (to create buckets).
//!
//! Prints one Markdown row per (store, files): wall time of the rollback, of the plain deletes,
//! their ratio, and the rollback's object-store requests by kind.

use std::sync::Arc;
use std::time::Instant;

use bytes::Bytes;
use futures::StreamExt;
use hudi_keeper_core::exec::rollback::{rollback, RollbackOptions, Selection};
use hudi_keeper_core::protocol::detect::LazyWritersEvidence;
use hudi_keeper_core::storage::RequestCounter;
use hudi_keeper_core::storage::{OpKind, RelPath, Storage, StorageOptions};
use hudi_keeper_core::Table;

const TF: &str = "20240101020000000";
const PARTITIONS: usize = 100;

fn rel(s: &str) -> RelPath {
    RelPath::parse(s).expect("path")
}

fn data_files(n: usize) -> Vec<RelPath> {
    (0..n)
        .map(|i| {
            rel(&format!(
                "p{:03}/{:08x}-0000-0000-0000-000000000000-0_0-9-{i}_{TF}.parquet",
                i % PARTITIONS,
                i
            ))
        })
        .collect()
}

/// A v8 copy-on-write table with one completed commit and a failed commit of `n` files, with
/// timeline-server markers (one `MARKERS<k>` file per 5,000 markers).
async fn build(storage: &Storage, n: usize) {
    let put = |p: String, b: Vec<u8>| {
        let s = storage.clone();
        async move { s.put(&rel(&p), Bytes::from(b)).await.expect("put") }
    };
    put(
        ".hoodie/hoodie.properties".into(),
        b"hoodie.table.name=bench\nhoodie.table.type=COPY_ON_WRITE\nhoodie.table.version=8\nhoodie.timeline.layout.version=2\nhoodie.table.timeline.timezone=UTC\n".to_vec(),
    )
    .await;
    for f in [
        "20240101000000000.commit.requested",
        "20240101000000000.inflight",
        "20240101000000000_20240101000001000.commit",
        &format!("{TF}.commit.requested"),
        &format!("{TF}.inflight"),
    ] {
        put(format!(".hoodie/timeline/{f}"), Vec::new()).await;
    }
    let files = data_files(n);
    put(
        format!(".hoodie/.temp/{TF}/MARKERS.type"),
        b"TIMELINE_SERVER_BASED".to_vec(),
    )
    .await;
    for (k, chunk) in files.chunks(5000).enumerate() {
        let text: String = chunk
            .iter()
            .map(|p| format!("{p}.marker.CREATE\n"))
            .collect();
        put(format!(".hoodie/.temp/{TF}/MARKERS{k}"), text.into_bytes()).await;
    }
    futures::stream::iter(files)
        .map(|p| {
            let s = storage.clone();
            async move { s.put(&p, Bytes::from_static(b"x")).await.expect("put") }
        })
        .buffer_unordered(64)
        .collect::<Vec<_>>()
        .await;
}

async fn fresh(store: &str, n: usize, tag: &str) -> (Storage, Option<tempfile::TempDir>) {
    match store {
        "local" => {
            let dir = tempfile::tempdir().expect("tempdir");
            let s = Storage::open(
                dir.path().to_str().expect("utf-8"),
                &StorageOptions::default(),
            )
            .expect("open");
            build(&s, n).await;
            (s, Some(dir))
        }
        "s3" => {
            let endpoint = std::env::var("HUDI_KEEPER_S3_ENDPOINT")
                .expect("HUDI_KEEPER_S3_ENDPOINT (scripts/s3-server start)");
            let opts = StorageOptions::from_pairs([
                ("aws_endpoint", endpoint.as_str()),
                ("aws_allow_http", "true"),
                ("aws_region", "us-east-1"),
                ("aws_access_key_id", "test"),
                ("aws_secret_access_key", "test"),
            ]);
            let nanos = std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .map(|d| d.as_nanos())
                .unwrap_or_default();
            // A bucket of its own: moto's listings scan the whole bucket.
            let bucket = format!("bench-{tag}-{n}-{nanos}");
            let made = std::process::Command::new("curl")
                .args(["-fs", "-X", "PUT", &format!("{endpoint}/{bucket}")])
                .status()
                .expect("curl");
            assert!(made.success(), "cannot create bucket {bucket}");
            let s = Storage::open(&format!("s3://{bucket}/warehouse/t"), &opts).expect("open");
            build(&s, n).await;
            (s, None)
        }
        other => panic!("unknown store {other}"),
    }
}

fn arg(name: &str, default: &str) -> Vec<String> {
    let args: Vec<String> = std::env::args().collect();
    let v = args
        .iter()
        .position(|a| a == name)
        .and_then(|i| args.get(i + 1).cloned())
        .unwrap_or_else(|| default.to_string());
    v.split(',').map(str::to_string).collect()
}

#[tokio::main]
async fn main() {
    let sizes: Vec<usize> = arg("--files", "10000")
        .iter()
        .map(|s| s.parse().expect("--files takes numbers"))
        .collect();
    let stores = arg("--stores", "local");
    let cross_checks: Vec<bool> = arg("--cross-check", "on,off")
        .iter()
        .map(|v| v == "on")
        .collect();
    println!("| store | files | listing cross-check | rollback | plain deletes | ratio | rollback requests |");
    println!("|---|---|---|---|---|---|---|");
    for store in &stores {
        for &n in &sizes {
            for &cross_check in &cross_checks {
                // The rollback.
                let (storage, _dir) = fresh(store, n, "rb").await;
                let counter = Arc::new(RequestCounter::new());
                let table = Table::open_storage(storage.clone().with_interceptor(counter.clone()))
                    .await
                    .expect("open table");
                let started = Instant::now();
                // The failed write has no heartbeat file and was written just now: judged
                // failed on a table whose writers are LAZY, with no minimum age.
                let mut options = RollbackOptions {
                    listing_cross_check: cross_check,
                    lazy_writers: Some(LazyWritersEvidence::Assumed),
                    ..RollbackOptions::default()
                };
                options.heartbeat.min_instant_age = std::time::Duration::ZERO;
                options.heartbeat.clock_skew_margin = std::time::Duration::ZERO;
                let done = rollback(&table, &Selection::AllFailed, &options, None)
                    .await
                    .expect("rollback");
                let rollback_time = started.elapsed();
                assert_eq!(done.len(), 1);
                assert_eq!(done[0].files_deleted, n);

                // The same files deleted with nothing else to do.
                let (storage, _dir2) = fresh(store, n, "plain").await;
                let started = Instant::now();
                let results = storage.delete_many_with(data_files(n), 64, || {}).await;
                let plain_time = started.elapsed();
                assert!(results.iter().all(|(_, r)| r.is_ok()));

                let counts = counter.snapshot();
                let requests: Vec<String> = OpKind::ALL
                    .iter()
                    .filter_map(|k| counts.get(k).map(|c| format!("{k} {c}")))
                    .collect();
                println!(
                    "| {store} | {n} | {} | {:.2} s | {:.2} s | {:.2} | {} |",
                    if cross_check { "on" } else { "off" },
                    rollback_time.as_secs_f64(),
                    plain_time.as_secs_f64(),
                    rollback_time.as_secs_f64() / plain_time.as_secs_f64().max(1e-9),
                    requests.join(", ")
                );
            }
        }
    }
}
