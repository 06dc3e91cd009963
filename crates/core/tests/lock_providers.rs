//! The lock providers against real servers: ZooKeeper (Debian's package, started by
//! `scripts/test` through `scripts/zk-server`) and the storage-based lease on an S3-compatible
//! server on loopback (moto). Contenders here are separate clients with separate sessions, as
//! separate processes would be.

use hudi_keeper_test_support as common;

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

use common::fixtures::{rel, Fixture, Kind};
use common::s3::{options, s3_store, unique, BUCKET};
use hudi_keeper_core::exec::rollback::{rollback, RollbackOptions, Selection};
use hudi_keeper_core::protocol::detect::LazyWritersEvidence;
use hudi_keeper_core::protocol::lock::storage_lock::{LockData, DEFAULT_PATH};
use hudi_keeper_core::protocol::lock::zk_client::{CreateMode, ZkClient};
use hudi_keeper_core::protocol::lock::{
    acquire, LockOptions, LockProvider, StorageLockConfig, ZkLockConfig, ZkSecurityFiles,
};
use hudi_keeper_core::storage::{RelPath, Storage};
use hudi_keeper_core::{Error, Table};

fn zk() -> String {
    std::env::var("HUDI_KEEPER_ZK").expect(
        "HUDI_KEEPER_ZK is not set: run the tests through scripts/test, which starts a ZooKeeper server",
    )
}

fn zk_lock(connect: &str, key: &str) -> ZkLockConfig {
    ZkLockConfig {
        connect: connect.to_string(),
        base_path: "/hudi-keeper-tests".into(),
        lock_key: key.to_string(),
        // How long a session's opening (connect, SASL, TLS) and then any answer may take: Hudi's
        // default connection timeout, 15 s. 3 s was too tight on a loaded 2-core machine (issue
        // #29): the first session of a fresh server took up to 5.3 s there, and the secure
        // server, which fsyncs, answered a write after 2 to 3.6 s per fsync while the disk wrote
        // back (one request went unanswered for 5 s). The session timeout is 30 s as the crate
        // keeps the connection timeout only up to 0.6 x the session timeout. Neither costs time
        // when the server answers; the tests of refusals set 1 s.
        session_timeout: Duration::from_secs(30),
        connection_timeout: Duration::from_secs(15),
        tls: None,
        sasl: None,
    }
}

/// The secure ZooKeeper server `scripts/zk-server start-secure` runs: SASL DIGEST-MD5 required
/// on one port, TLS (and SASL) on the other, and the folder with its CA and JAAS files.
fn secure_zk() -> (String, String, std::path::PathBuf) {
    let var = |k: &str| {
        std::env::var(k).unwrap_or_else(|_| {
            panic!("{k} is not set: run the tests through scripts/test, which starts the secure ZooKeeper server")
        })
    };
    (
        var("HUDI_KEEPER_ZK_SASL"),
        var("HUDI_KEEPER_ZK_TLS"),
        var("HUDI_KEEPER_ZK_SECURE_DIR").into(),
    )
}

/// A lock on the secure server with the TLS and JAAS files named, read as the CLI and the
/// daemon read them.
fn secure_lock(connect: &str, key: &str, files: ZkSecurityFiles) -> ZkLockConfig {
    let (tls, sasl) = files.load().expect("the security files read");
    ZkLockConfig {
        tls,
        sasl,
        ..zk_lock(connect, key)
    }
}

/// Take and release the lock twice; the lock node is there while it is held.
async fn lock_cycles(config: ZkLockConfig) -> Result<(), Error> {
    let storage = Storage::from_store(
        Arc::new(object_store::memory::InMemory::new()),
        "t",
        "memory://t",
    );
    let opts = options_for(LockProvider::ZooKeeper(config), Duration::from_secs(10));
    for _ in 0..2 {
        let guard = acquire(&storage, &opts).await?;
        guard.fence().check()?;
        guard.release().await?;
    }
    Ok(())
}

#[tokio::test]
async fn a_zookeeper_that_requires_sasl_digest_takes_our_lock_with_the_writers_jaas_file() {
    let (sasl_port, _, dir) = secure_zk();
    let key = unique("sasl");
    let jaas = |file: &str| ZkSecurityFiles {
        jaas_file: Some(dir.join(file)),
        ..Default::default()
    };
    lock_cycles(secure_lock(&sasl_port, &key, jaas("client-jaas.conf")))
        .await
        .expect("the lock with the writers' credentials");
    // The server does require them: without SASL, or with a wrong password, no lock.
    for (what, files) in [
        ("no SASL", ZkSecurityFiles::default()),
        ("a wrong password", jaas("wrong-jaas.conf")),
    ] {
        let started = std::time::Instant::now();
        let err = lock_cycles(secure_lock(&sasl_port, &key, files))
            .await
            .expect_err(what);
        assert!(
            matches!(err, Error::Lock { .. } | Error::LockLost { .. }),
            "{what}: {err}"
        );
        assert!(
            started.elapsed() < Duration::from_secs(30),
            "{what}: took {:?}",
            started.elapsed()
        );
    }
}

#[tokio::test]
async fn a_zookeeper_secure_port_takes_our_lock_over_tls_and_refuses_an_unknown_ca() {
    let (_, tls_port, dir) = secure_zk();
    let key = unique("tls");
    let files = |ca: &str| ZkSecurityFiles {
        jaas_file: Some(dir.join("client-jaas.conf")),
        tls_ca_file: Some(dir.join(ca)),
        ..Default::default()
    };
    lock_cycles(secure_lock(&tls_port, &key, files("ca.pem")))
        .await
        .expect("the lock over TLS");
    // A CA that did not sign the server's certificate, and plain TCP to the TLS port: refused.
    let plain = ZkSecurityFiles {
        jaas_file: Some(dir.join("client-jaas.conf")),
        ..Default::default()
    };
    for (what, f) in [("another CA", files("other-ca.pem")), ("plain TCP", plain)] {
        // Refused on every try, and tried again until the connection timeout is up (a failed
        // TLS handshake is not final to the client): a short one keeps this quick.
        let config = ZkLockConfig {
            connection_timeout: Duration::from_secs(1),
            ..secure_lock(&tls_port, &key, f)
        };
        let err = lock_cycles(config).await.expect_err(what);
        assert!(matches!(err, Error::Lock { .. }), "{what}: {err}");
    }
}

/// How the fixture's failed write (no heartbeat file, written just now) is judged failed: its
/// writers are LAZY (the operator says so) and no minimum age applies.
fn failed_write_detection() -> RollbackOptions {
    let mut o = RollbackOptions {
        lazy_writers: Some(LazyWritersEvidence::Assumed),
        ..Default::default()
    };
    o.heartbeat.min_instant_age = Duration::ZERO;
    o.heartbeat.clock_skew_margin = Duration::ZERO;
    o
}

fn options_for(provider: LockProvider, timeout: Duration) -> LockOptions {
    LockOptions {
        provider,
        timeout,
        retry_interval: Duration::from_millis(25),
    }
}

async fn zk_client() -> ZkClient {
    // (the timeouts of `zk_lock`)
    ZkClient::connect(&zk(), Duration::from_secs(30), Duration::from_secs(15))
        .await
        .expect("ZooKeeper is up")
}

/// Run `rounds` lock cycles in each of `contenders` tasks; return the most holders ever seen
/// at once and the number of cycles that held the lock.
async fn contend<F>(contenders: usize, rounds: usize, make: F) -> (usize, usize)
where
    F: Fn(usize) -> (Storage, LockOptions),
{
    let holders = Arc::new(AtomicUsize::new(0));
    let max = Arc::new(AtomicUsize::new(0));
    let cycles = Arc::new(AtomicUsize::new(0));
    let mut tasks = Vec::new();
    for i in 0..contenders {
        let (storage, opts) = make(i);
        let (holders, max, cycles) = (holders.clone(), max.clone(), cycles.clone());
        tasks.push(tokio::spawn(async move {
            for _ in 0..rounds {
                let guard = acquire(&storage, &opts)
                    .await
                    .expect("lock within the timeout");
                let now = holders.fetch_add(1, Ordering::SeqCst) + 1;
                max.fetch_max(now, Ordering::SeqCst);
                tokio::time::sleep(Duration::from_millis(15)).await;
                guard.fence().check().expect("still held");
                holders.fetch_sub(1, Ordering::SeqCst);
                cycles.fetch_add(1, Ordering::SeqCst);
                guard.release().await.expect("release");
            }
        }));
    }
    for t in tasks {
        t.await.expect("contender task");
    }
    (max.load(Ordering::SeqCst), cycles.load(Ordering::SeqCst))
}

#[tokio::test]
async fn zookeeper_contenders_never_both_hold_the_lock() {
    let key = unique("mutex");
    let connect = zk();
    let (max, cycles) = contend(4, 5, |_| {
        (
            Storage::from_store(
                Arc::new(object_store::memory::InMemory::new()),
                "t",
                "memory://t",
            ),
            options_for(
                LockProvider::ZooKeeper(zk_lock(&connect, &key)),
                Duration::from_secs(30),
            ),
        )
    })
    .await;
    assert_eq!(cycles, 20);
    assert_eq!(max, 1, "two contenders held the ZooKeeper lock at once");
    let c = zk_client().await;
    assert!(
        c.children(&format!("/hudi-keeper-tests/{key}"))
            .await
            .unwrap()
            .is_empty(),
        "every lock node is gone after release"
    );
    c.close().await.unwrap();
}

#[tokio::test]
async fn a_curator_style_holder_makes_us_wait_and_we_proceed_once_it_releases() {
    let key = unique("curator");
    let dir = format!("/hudi-keeper-tests/{key}");
    // A Java writer's node, as Curator's InterProcessMutex names it.
    let java = zk_client().await;
    java.create_parents(&format!("{dir}/x")).await.unwrap();
    let node = java
        .create(
            &format!("{dir}/_c_3f1c0e1e-0000-4000-8000-000000000000-lock-"),
            b"10.0.0.7",
            CreateMode::EphemeralSequential,
        )
        .await
        .unwrap();
    let storage = Storage::from_store(
        Arc::new(object_store::memory::InMemory::new()),
        "t",
        "memory://t",
    );
    let opts = options_for(
        LockProvider::ZooKeeper(zk_lock(&zk(), &key)),
        Duration::from_secs(10),
    );
    let waiter = {
        let (s, o) = (storage.clone(), opts.clone());
        tokio::spawn(async move { acquire(&s, &o).await })
    };
    tokio::time::sleep(Duration::from_millis(400)).await;
    assert!(
        !waiter.is_finished(),
        "hudi-keeper took a lock a writer holds"
    );
    // While we wait, our node is queued behind the writer's, named as Curator names it.
    let children = java.children(&dir).await.unwrap();
    assert_eq!(children.len(), 2, "{children:?}");
    let ours = children
        .iter()
        .find(|c| !node.ends_with(c.as_str()))
        .unwrap();
    assert!(ours.starts_with("_c_") && ours.contains("-lock-"), "{ours}");
    let seq = ours.rsplit("-lock-").next().unwrap();
    assert_eq!(seq.len(), 10, "{ours}");
    java.delete(&node).await.unwrap();
    let guard = waiter
        .await
        .unwrap()
        .expect("lock after the writer released");
    assert!(guard.waited >= Duration::from_millis(300));
    guard.release().await.unwrap();
    assert!(java.children(&dir).await.unwrap().is_empty());
    // And the other way round: while we hold it, a writer's node queues behind ours.
    let guard = acquire(&storage, &opts).await.unwrap();
    let late = java
        .create(
            &format!("{dir}/_c_late-lock-"),
            &[],
            CreateMode::EphemeralSequential,
        )
        .await
        .unwrap();
    let mut children = java.children(&dir).await.unwrap();
    children.sort_by(|a, b| {
        hudi_keeper_core::protocol::lock::zookeeper::sort_key(a)
            .cmp(hudi_keeper_core::protocol::lock::zookeeper::sort_key(b))
    });
    assert!(
        !late.ends_with(&children[0]),
        "the writer's later node must not come first"
    );
    guard.release().await.unwrap();
    java.close().await.unwrap();
}

#[tokio::test]
async fn a_lock_wait_that_times_out_is_an_error_and_leaves_no_node_behind() {
    let key = unique("timeout");
    let storage = Storage::from_store(
        Arc::new(object_store::memory::InMemory::new()),
        "t",
        "memory://t",
    );
    let held = acquire(
        &storage,
        &options_for(
            LockProvider::ZooKeeper(zk_lock(&zk(), &key)),
            Duration::from_secs(5),
        ),
    )
    .await
    .unwrap();
    let err = acquire(
        &storage,
        &options_for(
            LockProvider::ZooKeeper(zk_lock(&zk(), &key)),
            Duration::from_millis(300),
        ),
    )
    .await
    .unwrap_err();
    assert!(matches!(err, Error::LockTimeout { .. }), "{err}");
    assert!(err.to_string().contains("held by ZooKeeper node"), "{err}");
    let c = zk_client().await;
    assert_eq!(
        c.children(&format!("/hudi-keeper-tests/{key}"))
            .await
            .unwrap()
            .len(),
        1,
        "the waiter removed its node"
    );
    held.release().await.unwrap();
    c.close().await.unwrap();
}

#[tokio::test]
async fn with_zookeeper_down_a_rollback_stops_with_a_clear_error_and_changes_nothing() {
    let f = Fixture::build(Kind::CowV8, false).await;
    let before = f.snapshot().await;
    let table = Table::open_storage(f.storage()).await.unwrap();
    let dead_port = {
        let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        l.local_addr().unwrap().port()
    };
    // (Refused on every try until the connection timeout is up: a short one keeps this quick.)
    let down = ZkLockConfig {
        connection_timeout: Duration::from_secs(1),
        ..zk_lock(&format!("127.0.0.1:{dead_port}"), "t")
    };
    let opts = RollbackOptions {
        lock: options_for(LockProvider::ZooKeeper(down), Duration::from_secs(2)),
        ..failed_write_detection()
    };
    let err = rollback(&table, &Selection::AllFailed, &opts, None)
        .await
        .unwrap_err();
    assert!(matches!(err, Error::Lock { .. }), "{err}");
    assert!(
        err.to_string().contains("cannot connect to ZooKeeper"),
        "{err}"
    );
    assert_eq!(
        f.snapshot().await,
        before,
        "nothing may change without the lock"
    );
}

#[tokio::test]
async fn a_zookeeper_lock_without_a_key_is_the_tables_hoodie_table_name_as_for_hudis_writers() {
    let f = Fixture::build(Kind::MorV9, true).await;
    let table = Table::open_storage(f.storage()).await.unwrap();
    let name = table.config().name.to_string();
    // A writer holds the table's lock under the key Hudi's writers infer: hoodie.table.name.
    let writer = acquire(
        &f.storage(),
        &options_for(
            LockProvider::ZooKeeper(zk_lock(&zk(), &name)),
            Duration::from_secs(5),
        ),
    )
    .await
    .unwrap();
    let opts = RollbackOptions {
        lock: options_for(
            LockProvider::ZooKeeper(zk_lock(&zk(), "")),
            Duration::from_secs(2),
        ),
        ..failed_write_detection()
    };
    let err = rollback(&table, &Selection::AllFailed, &opts, None)
        .await
        .unwrap_err();
    assert!(matches!(err, Error::LockTimeout { .. }), "{err}");
    writer.release().await.unwrap();
    let done = rollback(&table, &Selection::AllFailed, &opts, None)
        .await
        .unwrap();
    assert_eq!(done.len(), 1);
}

#[tokio::test]
async fn a_rollback_under_the_zookeeper_lock_completes_and_releases_it() {
    let key = unique("rollback");
    let f = Fixture::build(Kind::MorV9, true).await;
    let table = Table::open_storage(f.storage()).await.unwrap();
    let opts = RollbackOptions {
        lock: options_for(
            LockProvider::ZooKeeper(zk_lock(&zk(), &key)),
            Duration::from_secs(10),
        ),
        ..failed_write_detection()
    };
    let done = rollback(&table, &Selection::AllFailed, &opts, None)
        .await
        .unwrap();
    assert_eq!(done.len(), 1);
    let c = zk_client().await;
    assert!(c
        .children(&format!("/hudi-keeper-tests/{key}"))
        .await
        .unwrap()
        .is_empty());
    c.close().await.unwrap();
}

fn lease_config(validity_ms: u64, renew_ms: u64) -> StorageLockConfig {
    StorageLockConfig {
        path: RelPath::parse(DEFAULT_PATH).unwrap(),
        validity: Duration::from_millis(validity_ms),
        renew_interval: Duration::from_millis(renew_ms),
    }
}

#[tokio::test]
async fn storage_lock_contenders_on_s3_never_both_hold_it() {
    let uri = format!("s3://{BUCKET}/{}", unique("lease"));
    let (max, cycles) = contend(3, 4, |_| {
        (
            // A client of its own per contender, as separate processes have.
            Storage::open(&uri, &options()).unwrap(),
            options_for(
                LockProvider::Storage(lease_config(10_000, 1_000)),
                Duration::from_secs(60),
            ),
        )
    })
    .await;
    assert_eq!(cycles, 12);
    assert_eq!(max, 1, "two contenders held the storage lock at once");
    let s = Storage::open(&uri, &options()).unwrap();
    let data = LockData::parse(&s.get(&rel(DEFAULT_PATH)).await.unwrap()).unwrap();
    assert!(data.expired, "the last holder released");
}

#[tokio::test]
async fn a_lapsed_lease_on_s3_is_taken_over_and_a_live_one_waited_for() {
    let uri = format!("s3://{BUCKET}/{}", unique("stale"));
    let s = Storage::open(&uri, &options()).unwrap();
    let now = chrono::Utc::now().timestamp_millis();
    let dead = format!(
        r#"{{"expired":false,"validUntil":{},"owner":"crashed-writer"}}"#,
        now - 2_000
    );
    s.put(&rel(DEFAULT_PATH), dead.into()).await.unwrap();
    let opts = options_for(
        LockProvider::Storage(lease_config(10_000, 1_000)),
        Duration::from_secs(5),
    );
    let g = acquire(&s, &opts).await.unwrap();
    let mine = LockData::parse(&s.get(&rel(DEFAULT_PATH)).await.unwrap()).unwrap();
    assert_ne!(mine.owner, "crashed-writer");
    assert!(!mine.expired);
    // A second process sees a live lease and waits, then gives up without writing.
    let other = Storage::open(&uri, &options()).unwrap();
    let err = acquire(
        &other,
        &options_for(
            LockProvider::Storage(lease_config(10_000, 1_000)),
            Duration::from_millis(300),
        ),
    )
    .await
    .unwrap_err();
    assert!(matches!(err, Error::LockTimeout { .. }), "{err}");
    assert!(err.to_string().contains(&mine.owner), "{err}");
    g.release().await.unwrap();
}

#[tokio::test]
async fn a_rollback_on_s3_under_the_storage_lock_completes_and_releases_the_lease() {
    let root = unique("rb-lease");
    let uri = format!("s3://{BUCKET}/{root}");
    let f = Fixture::build_in(s3_store(), &root, &uri, Kind::CowV8, false).await;
    let table = Table::open(&uri, &options()).await.unwrap();
    let opts = RollbackOptions {
        lock: options_for(
            LockProvider::Storage(lease_config(10_000, 1_000)),
            Duration::from_secs(10),
        ),
        ..failed_write_detection()
    };
    let done = rollback(&table, &Selection::AllFailed, &opts, None)
        .await
        .unwrap();
    assert_eq!(done.len(), 1);
    let data = LockData::parse(&f.storage().get(&rel(DEFAULT_PATH)).await.unwrap()).unwrap();
    assert!(data.expired);
}

#[tokio::test]
async fn a_savepoint_and_a_restore_on_s3_run_under_the_storage_lock_and_release_it() {
    use hudi_keeper_core::exec::restore::{restore, RestoreOptions};
    use hudi_keeper_core::exec::savepoint::{create_savepoint, SavepointRequest};
    let root = unique("restore-lease");
    let uri = format!("s3://{BUCKET}/{root}");
    let f = Fixture::build_in(s3_store(), &root, &uri, Kind::MorV9, false).await;
    let table = Table::open(&uri, &options()).await.unwrap();
    let lock = options_for(
        LockProvider::Storage(lease_config(10_000, 1_000)),
        Duration::from_secs(10),
    );
    let t1 = common::fixtures::T1;
    create_savepoint(
        &table,
        &SavepointRequest {
            instant: Some(t1.into()),
            user: "ops".into(),
            comment: String::new(),
        },
        &lock,
    )
    .await
    .unwrap();
    let mut rollback = RollbackOptions {
        lock,
        ..failed_write_detection()
    };
    rollback.heartbeat.min_instant_age = Duration::ZERO;
    let done = restore(
        &table,
        t1,
        &RestoreOptions {
            rollback,
            require_savepoint: true,
        },
        None,
    )
    .await
    .unwrap();
    assert_eq!(done.undone.len(), 2, "{done:?}");
    let data = LockData::parse(&f.storage().get(&rel(DEFAULT_PATH)).await.unwrap()).unwrap();
    assert!(data.expired, "the lease is released");
    let left = f.snapshot().await;
    assert!(left.keys().any(|k| k.ends_with(".restore")));
    assert!(!left
        .keys()
        .any(|k| k.contains(common::fixtures::T2) || k.contains(".rollback")));
}
