//! Tests of [`super`]: taking, holding, fencing and releasing the table lock with each provider.

use super::*;
use crate::storage::StorageError;
use bytes::Bytes;
use chrono::Utc;
use object_store::memory::InMemory;
use std::sync::Arc;

fn storage() -> Storage {
    Storage::from_store(Arc::new(InMemory::new()), "t", "memory://t")
}

fn fs(expire: Duration, timeout: Duration) -> LockOptions {
    LockOptions {
        provider: LockProvider::FileSystem {
            dir: RelPath::parse(".hoodie").unwrap(),
            expire,
        },
        timeout,
        retry_interval: Duration::from_millis(10),
    }
}

#[tokio::test]
async fn a_zookeeper_lock_gets_the_tables_name_when_it_has_no_key_and_is_never_taken_without_one() {
    let zk = |key: &str| LockOptions {
        provider: LockProvider::ZooKeeper(ZkLockConfig {
            connect: "127.0.0.1:1".into(),
            base_path: "/hudi/locks".into(),
            lock_key: key.into(),
            session_timeout: Duration::from_secs(1),
            connection_timeout: Duration::from_secs(1),
            tls: None,
            sasl: None,
        }),
        timeout: Duration::from_millis(10),
        retry_interval: Duration::from_millis(5),
    };
    assert_eq!(zk("").for_table("orders"), zk("orders"));
    assert_eq!(zk("mine").for_table("orders"), zk("mine"));
    let fs = fs(Duration::ZERO, Duration::from_millis(10));
    assert_eq!(fs.for_table("orders"), fs);
    let Err(err) = acquire(&storage(), &zk("")).await else {
        panic!("a lock without a key was taken");
    };
    assert!(err.to_string().contains("lock key is unknown"), "{err}");
}

#[tokio::test]
async fn the_lock_is_a_file_created_if_absent_and_deleted_on_release() {
    let s = storage();
    let o = fs(Duration::ZERO, Duration::from_millis(100));
    let g = acquire(&s, &o).await.unwrap();
    let lock = RelPath::parse(".hoodie/lock").unwrap();
    assert!(s.head(&lock).await.unwrap().is_some());
    // A second holder waits, then gives up with an error.
    let err = acquire(&s, &o).await.unwrap_err();
    assert!(matches!(err, Error::LockTimeout { .. }), "{err}");
    assert!(err.to_string().contains("never expires"), "{err}");
    g.release().await.unwrap();
    assert!(s.head(&lock).await.unwrap().is_none());
    acquire(&s, &o).await.unwrap().release().await.unwrap();
}

#[tokio::test]
async fn a_waiter_proceeds_once_the_holder_releases() {
    let s = storage();
    let held = acquire(&s, &fs(Duration::ZERO, Duration::from_secs(1)))
        .await
        .unwrap();
    let s2 = s.clone();
    let waiter =
        tokio::spawn(
            async move { acquire(&s2, &fs(Duration::ZERO, Duration::from_secs(5))).await },
        );
    tokio::time::sleep(Duration::from_millis(100)).await;
    assert!(!waiter.is_finished());
    held.release().await.unwrap();
    let g = waiter.await.unwrap().unwrap();
    g.release().await.unwrap();
}

#[tokio::test]
async fn an_expired_lock_file_is_taken_over_but_a_fresh_one_is_not() {
    let dir = tempfile::tempdir().unwrap();
    let s = Storage::open(dir.path().to_str().unwrap(), &Default::default()).unwrap();
    // A holder that died with the lock 70 s ago; the expiry is 60 s (+ 6 s margin).
    let _dead_holder = acquire(&s, &fs(Duration::ZERO, Duration::from_secs(1)))
        .await
        .unwrap();
    backdate_lock_file(dir.path(), Duration::from_secs(70));
    let g = acquire(&s, &fs(Duration::from_secs(60), Duration::from_millis(200)))
        .await
        .unwrap();
    g.release().await.unwrap();
    let _held = acquire(&s, &fs(Duration::ZERO, Duration::from_secs(1)))
        .await
        .unwrap();
    let err = acquire(
        &s,
        &fs(Duration::from_secs(3600), Duration::from_millis(50)),
    )
    .await
    .unwrap_err();
    assert!(err.to_string().contains("expires 3600 s"), "{err}");
}

#[tokio::test(start_paused = true)]
async fn a_file_system_lock_with_an_expiry_fences_writes_before_it_may_expire() {
    let s = storage();
    // Hudi lets the next contender take this lock 60 s after its file was written.
    let g = acquire(&s, &fs(Duration::from_secs(60), Duration::from_secs(1)))
        .await
        .unwrap();
    let fenced = s.clone().with_fence(Arc::new(g.fence()));
    let probe = RelPath::parse("probe").unwrap();
    fenced.put(&probe, Bytes::new()).await.unwrap();
    // Still safe a little before the safety margin (6 s for a 60 s expiry)...
    tokio::time::advance(Duration::from_secs(53)).await;
    g.fence().check().unwrap();
    // ...but not once the lock may be taken over: no write goes out any more.
    tokio::time::advance(Duration::from_secs(2)).await;
    let err = g.fence().check().unwrap_err();
    assert!(matches!(err, Error::LockLost { .. }), "{err}");
    let err = fenced.put(&probe, Bytes::new()).await.unwrap_err();
    assert!(matches!(err, StorageError::Fenced { .. }), "{err}");
    assert!(matches!(
        tokio::time::timeout(Duration::from_millis(1), g.fence().lost()).await,
        Ok(Error::LockLost { .. })
    ));
    // A lock that never expires cannot be lost that way.
    g.release().await.unwrap();
    let never = acquire(&s, &fs(Duration::ZERO, Duration::from_secs(1)))
        .await
        .unwrap();
    tokio::time::advance(Duration::from_secs(86_400)).await;
    never.fence().check().unwrap();
    never.release().await.unwrap();
}

/// Set the modification time of the existing `.hoodie/lock` under `dir` to `ago` before now,
/// keeping its content.
fn backdate_lock_file(dir: &std::path::Path, ago: Duration) {
    let f = std::fs::OpenOptions::new()
        .write(true)
        .open(dir.join(".hoodie").join("lock"))
        .unwrap();
    f.set_modified(std::time::SystemTime::now() - ago).unwrap();
}

#[tokio::test]
async fn an_expired_lock_taken_over_by_another_writer_is_not_deleted_on_release() {
    let dir = tempfile::tempdir().unwrap();
    let s = Storage::open(dir.path().to_str().unwrap(), &Default::default()).unwrap();
    let lock = RelPath::parse(".hoodie/lock").unwrap();
    let o = fs(Duration::from_secs(60), Duration::from_secs(1));
    let g = acquire(&s, &o).await.unwrap();
    // Our lock file is now older than its expiry and the margin: another writer takes it.
    backdate_lock_file(dir.path(), Duration::from_secs(70));
    let other = acquire(&s, &o).await.unwrap();
    let theirs = s.head(&lock).await.unwrap().unwrap();
    g.release().await.unwrap();
    assert_eq!(
        s.head(&lock).await.unwrap(),
        Some(theirs),
        "the other writer's lock file stays"
    );
    other.release().await.unwrap();
    assert!(s.head(&lock).await.unwrap().is_none());
}

/// A lock file on the local file system whose modification time is set to `mtime`, as a
/// store whose clock differs from this host's would report it.
fn lock_file_written_at(dir: &std::path::Path, mtime: std::time::SystemTime) {
    let path = dir.join(".hoodie").join("lock");
    std::fs::create_dir_all(path.parent().unwrap()).unwrap();
    let f = std::fs::File::create(&path).unwrap();
    f.set_modified(mtime).unwrap();
}

#[tokio::test]
async fn an_expired_lock_file_is_taken_over_only_after_the_clock_skew_margin_too() {
    use std::time::SystemTime;
    let dir = tempfile::tempdir().unwrap();
    let s = Storage::open(dir.path().to_str().unwrap(), &Default::default()).unwrap();
    let lock = RelPath::parse(".hoodie/lock").unwrap();
    // 60 s expiry, 6 s margin: a lock file 63 s old (by this host's clock) may belong to a
    // live writer whose clock, or the store's, is a few seconds behind.
    let expire = Duration::from_secs(60);
    lock_file_written_at(dir.path(), SystemTime::now() - Duration::from_secs(63));
    let before = s.head(&lock).await.unwrap().unwrap();
    let err = acquire(&s, &fs(expire, Duration::from_millis(50)))
        .await
        .unwrap_err();
    assert!(matches!(err, Error::LockTimeout { .. }), "{err}");
    assert_eq!(s.head(&lock).await.unwrap(), Some(before), "left alone");
    // Beyond expiry + margin it is taken over.
    lock_file_written_at(dir.path(), SystemTime::now() - Duration::from_secs(67));
    let g = acquire(&s, &fs(expire, Duration::from_millis(50)))
        .await
        .unwrap();
    g.release().await.unwrap();
}

#[tokio::test]
async fn a_lock_file_with_an_unknown_modification_time_never_counts_as_expired() {
    let dir = tempfile::tempdir().unwrap();
    let s = Storage::open(dir.path().to_str().unwrap(), &Default::default()).unwrap();
    let lock = RelPath::parse(".hoodie/lock").unwrap();
    lock_file_written_at(dir.path(), std::time::SystemTime::UNIX_EPOCH);
    let before = s.head(&lock).await.unwrap().unwrap();
    let err = acquire(&s, &fs(Duration::from_secs(60), Duration::from_millis(50)))
        .await
        .unwrap_err();
    assert!(matches!(err, Error::LockTimeout { .. }), "{err}");
    assert_eq!(s.head(&lock).await.unwrap(), Some(before), "left alone");
}

#[tokio::test]
async fn a_lock_without_expiry_that_another_writer_took_after_an_operator_deleted_ours_is_left_alone_on_release(
) {
    let s = storage();
    let lock = RelPath::parse(".hoodie/lock").unwrap();
    let g = acquire(&s, &fs(Duration::ZERO, Duration::from_secs(1)))
        .await
        .unwrap();
    // An operator deletes the lock file believing it stale; a Hudi writer takes the lock
    // (its file may be empty, or carry its own lock info).
    for theirs in [
        &b""[..],
        b"LockInfo{lockCreateTime=2026-12-01 09:00:00.000}",
    ] {
        s.delete(&lock).await.unwrap();
        s.put_if_absent(&lock, Bytes::from(theirs)).await.unwrap();
    }
    let theirs = s.head(&lock).await.unwrap().unwrap();
    g.release().await.unwrap();
    assert_eq!(
        s.head(&lock).await.unwrap(),
        Some(theirs),
        "the writer's lock file stays"
    );
    assert_eq!(
        s.get(&lock).await.unwrap(),
        Bytes::from_static(b"LockInfo{lockCreateTime=2026-12-01 09:00:00.000}")
    );
    // A lock file that is simply gone is released without error.
    s.delete(&lock).await.unwrap();
    let g = acquire(&s, &fs(Duration::ZERO, Duration::from_secs(1)))
        .await
        .unwrap();
    s.delete(&lock).await.unwrap();
    g.release().await.unwrap();
    assert!(s.head(&lock).await.unwrap().is_none());
}

fn lease(validity_ms: u64, renew_ms: u64, timeout: Duration) -> LockOptions {
    LockOptions {
        provider: LockProvider::Storage(StorageLockConfig {
            path: RelPath::parse(storage_lock::DEFAULT_PATH).unwrap(),
            validity: Duration::from_millis(validity_ms),
            renew_interval: Duration::from_millis(renew_ms),
        }),
        timeout,
        retry_interval: Duration::from_millis(20),
    }
}

async fn lock_data(s: &Storage) -> storage_lock::LockData {
    let bytes = s
        .get(&RelPath::parse(storage_lock::DEFAULT_PATH).unwrap())
        .await
        .unwrap();
    storage_lock::LockData::parse(&bytes).unwrap()
}

#[tokio::test]
async fn of_two_lease_contenders_one_holds_and_the_other_waits_for_the_release() {
    let s = storage();
    let first = acquire(&s, &lease(10_000, 1_000, Duration::from_secs(1)))
        .await
        .unwrap();
    let holder = lock_data(&s).await;
    assert!(!holder.expired);
    let err = acquire(&s, &lease(10_000, 1_000, Duration::from_millis(100)))
        .await
        .unwrap_err();
    assert!(matches!(err, Error::LockTimeout { .. }), "{err}");
    assert!(err.to_string().contains(&holder.owner), "{err}");
    let s2 = s.clone();
    let waiter =
        tokio::spawn(
            async move { acquire(&s2, &lease(10_000, 1_000, Duration::from_secs(5))).await },
        );
    tokio::time::sleep(Duration::from_millis(100)).await;
    assert!(!waiter.is_finished());
    first.release().await.unwrap();
    let second = waiter.await.unwrap().unwrap();
    assert!(second.waited > Duration::ZERO);
    let now = lock_data(&s).await;
    assert!(!now.expired);
    assert_ne!(now.owner, holder.owner);
    second.release().await.unwrap();
    assert!(lock_data(&s).await.expired, "release writes expired: true");
}

#[tokio::test]
async fn a_lapsed_lease_is_taken_over_and_a_valid_one_is_not() {
    let s = storage();
    let path = RelPath::parse(storage_lock::DEFAULT_PATH).unwrap();
    let now = Utc::now().timestamp_millis();
    let dead = format!(
        r#"{{"expired":false,"validUntil":{},"owner":"dead-writer"}}"#,
        now - 501
    );
    s.put(&path, Bytes::from(dead)).await.unwrap();
    let g = acquire(&s, &lease(10_000, 1_000, Duration::from_millis(200)))
        .await
        .unwrap();
    assert_ne!(lock_data(&s).await.owner, "dead-writer");
    g.release().await.unwrap();
    let live = format!(
        r#"{{"expired":false,"validUntil":{},"owner":"live-writer"}}"#,
        now + 60_000
    );
    s.put(&path, Bytes::from(live.clone())).await.unwrap();
    let err = acquire(&s, &lease(10_000, 1_000, Duration::from_millis(100)))
        .await
        .unwrap_err();
    assert!(err.to_string().contains("live-writer"), "{err}");
    assert_eq!(
        s.get(&path).await.unwrap(),
        Bytes::from(live),
        "a waiter writes nothing"
    );
}

#[tokio::test]
async fn a_corrupt_lock_file_or_an_unknown_owner_format_is_an_error_and_is_left_alone() {
    let s = storage();
    let path = RelPath::parse(storage_lock::DEFAULT_PATH).unwrap();
    for bad in [
        &b"{not json"[..],
        br#"{"expired":false,"validUntil":1,"owner":{"host":"h","pid":1}}"#,
    ] {
        s.put(&path, Bytes::from(bad)).await.unwrap();
        let err = acquire(&s, &lease(10_000, 1_000, Duration::from_secs(1)))
            .await
            .unwrap_err();
        assert!(matches!(err, Error::Lock { .. }), "{err}");
        assert!(err.to_string().contains("corrupt"), "{err}");
        assert_eq!(s.get(&path).await.unwrap(), Bytes::from(bad));
    }
}

#[tokio::test]
async fn a_storage_lock_file_over_a_mebibyte_is_refused_unread_and_left_alone() {
    let s = storage();
    let path = RelPath::parse(storage_lock::DEFAULT_PATH).unwrap();
    // A lapsed lease, padded with white space past 1 MiB: valid JSON, but no lock file
    // Hudi writes is that large.
    let mut big = br#"{"expired":false,"validUntil":1,"owner":"x"}"#.to_vec();
    big.resize(crate::storage::SMALL_FILE_MAX_READ as usize + 1, b' ');
    s.put(&path, Bytes::from(big.clone())).await.unwrap();
    let err = acquire(&s, &lease(10_000, 1_000, Duration::from_secs(1)))
        .await
        .unwrap_err();
    assert!(err.to_string().contains("more than the"), "{err}");
    assert!(s.get(&path).await.unwrap() == big, "left as it is");
}

#[tokio::test]
async fn the_storage_lock_is_refused_on_a_store_without_conditional_replace() {
    let dir = tempfile::tempdir().unwrap();
    let s = Storage::open(dir.path().to_str().unwrap(), &Default::default()).unwrap();
    let err = acquire(&s, &lease(10_000, 1_000, Duration::from_secs(1)))
        .await
        .unwrap_err();
    assert!(err.to_string().contains("conditional writes"), "{err}");
    let path = RelPath::parse(storage_lock::DEFAULT_PATH).unwrap();
    assert!(
        s.head(&path).await.unwrap().is_none(),
        "the probe file is removed"
    );
}

#[tokio::test]
async fn a_renewed_lease_outlives_its_validity() {
    let s = storage();
    let g = acquire(&s, &lease(1_500, 200, Duration::from_secs(1)))
        .await
        .unwrap();
    let first = lock_data(&s).await.valid_until;
    tokio::time::sleep(Duration::from_millis(2_500)).await;
    g.fence().check().unwrap();
    assert!(lock_data(&s).await.valid_until > first + 1_000);
    g.release().await.unwrap();
}

/// Fails every delete.
#[derive(Debug, Default)]
struct FailDeletes;

impl crate::storage::Interceptor for FailDeletes {
    fn before(&self, op: crate::storage::OpKind, path: &RelPath) -> Result<(), StorageError> {
        if op == crate::storage::OpKind::Delete {
            return Err(StorageError::Injected {
                op,
                n: 0,
                path: path.to_string(),
            });
        }
        Ok(())
    }
}

#[tokio::test(flavor = "current_thread")]
async fn a_failed_release_is_logged_at_error_level_with_table_and_lock() {
    let (captured, subscriber) = crate::test_logs::Captured::subscriber();
    let _log = tracing::subscriber::set_default(subscriber);
    let s = storage().with_interceptor(Arc::new(FailDeletes));
    let g = acquire(&s, &fs(Duration::ZERO, Duration::from_secs(1)))
        .await
        .unwrap();
    g.release().await.unwrap_err();
    let line = captured.error_line();
    assert!(line.contains("memory://t"), "{line}");
    assert!(line.contains(".hoodie/lock"), "{line}");
}

/// Fails every conditional replace of the lock file once armed.
#[derive(Debug, Default)]
struct FailRenewals(std::sync::atomic::AtomicBool);

impl crate::storage::Interceptor for FailRenewals {
    fn before(&self, op: crate::storage::OpKind, path: &RelPath) -> Result<(), StorageError> {
        if op == crate::storage::OpKind::PutIfMatch
            && self.0.load(std::sync::atomic::Ordering::SeqCst)
        {
            return Err(StorageError::Injected {
                op,
                n: 0,
                path: path.to_string(),
            });
        }
        Ok(())
    }
}

#[tokio::test]
async fn a_holder_whose_renewals_fail_stops_before_its_lease_lapses() {
    let fail = Arc::new(FailRenewals::default());
    let plain = storage();
    let s = plain.clone().with_interceptor(fail.clone());
    let validity = 2_000;
    let g = acquire(&s, &lease(validity, 300, Duration::from_secs(1)))
        .await
        .unwrap();
    fail.0.store(true, std::sync::atomic::Ordering::SeqCst);
    let valid_until = lock_data(&s).await.valid_until;
    let fence = g.fence();
    let fenced = s.clone().with_fence(Arc::new(fence.clone()));
    let probe = RelPath::parse("probe").unwrap();
    fenced.put(&probe, Bytes::new()).await.unwrap();
    // Wait for the fence to trip.
    let lost = tokio::time::timeout(Duration::from_secs(5), fence.lost())
        .await
        .expect("the fence trips");
    let tripped_at = Utc::now().timestamp_millis();
    assert!(matches!(lost, Error::LockLost { .. }), "{lost}");
    assert!(
        tripped_at < valid_until,
        "stopped {} ms before the lease lapsed",
        valid_until - tripped_at
    );
    let err = fenced.put(&probe, Bytes::new()).await.unwrap_err();
    assert!(matches!(err, StorageError::Fenced { .. }), "{err}");
    // Another contender takes it only once it lapsed.
    let other = acquire(&plain, &lease(validity, 300, Duration::from_secs(5)))
        .await
        .unwrap();
    assert!(Utc::now().timestamp_millis() > valid_until + storage_lock::CLOCK_DRIFT_MS);
    other.release().await.unwrap();
    drop(g);
}
