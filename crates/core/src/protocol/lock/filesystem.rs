//! Hudi's `FileSystemBasedLockProvider`: the lock is the file `<dir>/lock` (`.hoodie/lock` by
//! default), created only if absent and deleted on release. A lock file older than `expire` is
//! taken over; `expire` = 0 (Hudi's default) means never.
//!
//! What a lock file holds is informational only: Hudi writes it empty or with its `LockInfo`
//! text, and reads it back only to log the current owner. hudi-keeper writes an owner token
//! ([`owner_token`], unique per acquisition) and deletes the file on release only if it still
//! holds that token: a lock file an operator deleted and a writer re-created is left alone.
//!
//! A create whose answer was lost after the store wrote the file (the connection closed) is sent
//! again by the store client, and the store refuses the repeat (412): the lock file exists, and
//! holds this acquisition's own token. The taker reads the file back after any create that did
//! not report success, and holds the lock if it holds the token: taken for someone else's, a
//! lock file that never expires would lock out every writer until an operator deleted it.
//!
//! The taker compares this host's clock with the store's modification time, so it takes a lock
//! over only once it is older than `expire` + [`safety_margin`] (room for the clocks to
//! differ), and never when the store reports no usable time (at or before the Unix epoch).
//!
//! Hudi measures the age from the lock file's modification time (`hoodie.write.lock.filesystem.expire`
//! is a whole number of minutes), and its holder never refreshes it: a holder whose lock has an
//! expiry may lose it to the next contender once that much time has passed since it created the
//! file, whatever it is doing. hudi-keeper's holder therefore stops changing the table a
//! [`safety_margin`] before then (the lock's fence trips).

use std::time::Duration;

use bytes::Bytes;
use chrono::{DateTime, Utc};
use tracing::warn;

use crate::storage::{RelPath, Storage, StorageError};

/// The lock file of a lock folder.
pub fn lock_file(dir: &RelPath) -> Result<RelPath, StorageError> {
    Ok(dir.join("lock")?)
}

/// The content hudi-keeper writes into a lock file it creates: unique per acquisition, so that
/// release can tell its own file from one created after it by someone else.
pub fn owner_token() -> Bytes {
    Bytes::from(format!(
        "hudi-keeper {} pid {}",
        uuid::Uuid::new_v4(),
        std::process::id()
    ))
}

/// Whether a lock file last modified at `last_modified` (the store's clock) may be taken over at
/// `now` (this host's clock): never for `expire` = 0 or an unknown time (at or before the
/// epoch); otherwise once it is older than `expire` + [`safety_margin`].
pub fn expired(expire: Duration, last_modified: DateTime<Utc>, now: DateTime<Utc>) -> bool {
    if expire.is_zero() || last_modified.timestamp_millis() <= 0 {
        return false;
    }
    let limit = expire.saturating_add(safety_margin(expire));
    (now - last_modified)
        .to_std()
        .map(|age| age > limit)
        .unwrap_or(false)
}

/// One attempt: `Ok(true)` when the lock file is now ours (created with `token`), `Ok(false)`
/// when someone holds it.
pub async fn try_take(
    storage: &Storage,
    file: &RelPath,
    expire: Duration,
    token: &Bytes,
) -> Result<bool, StorageError> {
    match storage.head(file).await? {
        None => create(storage, file, token).await,
        Some(meta) => {
            let now = Utc::now();
            let age = now - meta.last_modified;
            if expired(expire, meta.last_modified, now) {
                warn!(table = %storage.uri(), lock = %file, age_s = age.num_seconds(), "taking over an expired lock file");
                storage.delete(file).await?;
                // Create-if-absent again: whoever creates it first after the delete holds it.
                create(storage, file, token).await
            } else {
                Ok(false)
            }
        }
    }
}

/// Create the lock file holding `token` if it is absent: `Ok(true)` when it is now ours.
///
/// A create refused because the file exists may be our own create's repeat (its first answer
/// lost), and a create that failed otherwise (the client gave up on a request the store may
/// have carried out) may have landed all the same: either way the file is read back, and it is
/// ours exactly when it holds `token` (unique to this acquisition). A read-back that fails is an
/// error: the lock is then neither free nor ours.
async fn create(storage: &Storage, file: &RelPath, token: &Bytes) -> Result<bool, StorageError> {
    match storage.put_if_absent(file, token.clone()).await {
        Ok(()) => Ok(true),
        Err(StorageError::AlreadyExists { .. }) => {
            let ours = holds(storage, file, token).await?;
            if ours {
                warn!(table = %storage.uri(), lock = %file, "the store refused to create the lock file because our own create had already written it (its answer was lost): the lock is ours");
            }
            Ok(ours)
        }
        Err(e) => match holds(storage, file, token).await {
            Ok(true) => {
                warn!(table = %storage.uri(), lock = %file, error = %e, "creating the lock file failed, but the create landed: the lock is ours");
                Ok(true)
            }
            Ok(false) => Err(e),
            Err(read) => {
                warn!(table = %storage.uri(), lock = %file, error = %read, "could not read back the lock file after a failed create: it may be ours and left behind");
                Err(e)
            }
        },
    }
}

/// Whether the lock file holds exactly `token`. A missing file is not ours; nor is a larger one,
/// which is not read (someone else's: Hudi writes its `LockInfo` text).
async fn holds(storage: &Storage, file: &RelPath, token: &Bytes) -> Result<bool, StorageError> {
    if token.is_empty() {
        // An empty file cannot tell whose it is (Hudi may write one).
        return Ok(false);
    }
    match storage.get_opt_capped(file, token.len() as u64).await {
        Ok(found) => Ok(found.as_ref() == Some(token)),
        Err(StorageError::TooLarge { .. }) => Ok(false),
        Err(e) => Err(e),
    }
}

/// How long before a file lock with an expiry may be taken over its holder stops changing the
/// table, and how much older than its expiry a lock file must be before hudi-keeper takes it
/// over: a tenth of the expiry, at least 1 s and at most 10 s (for the clock difference between
/// this host, the store and the other writers, and a last request in flight).
pub fn safety_margin(expire: Duration) -> Duration {
    (expire / 10).clamp(Duration::from_secs(1), Duration::from_secs(10))
}

/// What a waiter can tell the operator about a file lock it could not take.
pub fn hint(expire: Duration) -> String {
    if expire.is_zero() {
        "the lock file never expires (expire = 0, Hudi's default): if its holder is gone, an operator must delete it".into()
    } else {
        format!("it expires {} s after it was written", expire.as_secs())
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use object_store::memory::InMemory;

    use super::*;
    use crate::storage::testing::{FailMode, FailNth};
    use crate::storage::OpKind;

    fn lock() -> RelPath {
        RelPath::parse(".hoodie/lock").unwrap()
    }

    fn storage(store: &Arc<InMemory>) -> Storage {
        Storage::from_store(store.clone(), "t", "memory://t")
    }

    #[tokio::test]
    async fn a_create_whose_answer_was_lost_is_read_back_as_ours() {
        let store = Arc::new(InMemory::new());
        // The create lands; the caller sees an error (its answer lost, the client gave up).
        let fail = Arc::new(FailNth::with_mode(
            &[OpKind::PutIfAbsent],
            1,
            FailMode::After,
        ));
        let s = storage(&store).with_interceptor(fail.clone());
        let token = owner_token();
        assert!(try_take(&s, &lock(), Duration::ZERO, &token).await.unwrap());
        assert!(fail.fired());
        assert_eq!(storage(&store).get(&lock()).await.unwrap(), token);
        // Another acquisition (another token) finds it held.
        assert!(
            !try_take(&storage(&store), &lock(), Duration::ZERO, &owner_token())
                .await
                .unwrap()
        );
    }

    #[tokio::test]
    async fn a_create_that_never_reached_the_store_is_an_error() {
        let store = Arc::new(InMemory::new());
        let s = storage(&store).with_interceptor(Arc::new(FailNth::new(&[OpKind::PutIfAbsent], 1)));
        let err = try_take(&s, &lock(), Duration::ZERO, &owner_token())
            .await
            .unwrap_err();
        assert!(matches!(err, StorageError::Injected { .. }), "{err}");
        assert!(storage(&store).head(&lock()).await.unwrap().is_none());
    }

    #[tokio::test]
    async fn a_lock_file_found_by_the_create_is_ours_only_if_it_holds_our_token() {
        let store = Arc::new(InMemory::new());
        let s = storage(&store);
        let token = owner_token();
        // Our own create's repeat: the store answers that the file exists, and it holds our token.
        s.put(&lock(), token.clone()).await.unwrap();
        assert!(create(&s, &lock(), &token).await.unwrap());
        // Someone else's: another acquisition's token, Hudi's empty file or its `LockInfo` text.
        for other in [
            owner_token(),
            Bytes::new(),
            Bytes::from(format!(
                "LockInfo{{lockCreateTime=1, lockThreadName=main}}{}",
                "x".repeat(200)
            )),
        ] {
            s.put(&lock(), other).await.unwrap();
            assert!(!create(&s, &lock(), &token).await.unwrap());
        }
        // An empty token owns nothing, not even an empty file.
        s.put(&lock(), Bytes::new()).await.unwrap();
        assert!(!create(&s, &lock(), &Bytes::new()).await.unwrap());
    }

    #[tokio::test]
    async fn a_failed_read_back_is_an_error_never_free_nor_ours() {
        let store = Arc::new(InMemory::new());
        let token = owner_token();
        // The create finds the file (ours, its answer lost), and the read-back fails.
        storage(&store).put(&lock(), token.clone()).await.unwrap();
        let s = storage(&store).with_interceptor(Arc::new(FailNth::new(&[OpKind::Get], 1)));
        let err = create(&s, &lock(), &token).await.unwrap_err();
        assert!(
            matches!(
                err,
                StorageError::Injected {
                    op: OpKind::Get,
                    ..
                }
            ),
            "{err}"
        );
        // The create fails after it landed, and so does the read-back: the create's error.
        let store = Arc::new(InMemory::new());
        let fail = Arc::new(crate::storage::testing::Chain(vec![
            Arc::new(FailNth::with_mode(
                &[OpKind::PutIfAbsent],
                1,
                FailMode::After,
            )),
            Arc::new(FailNth::new(&[OpKind::Get], 1)),
        ]));
        let s = storage(&store).with_interceptor(fail);
        let err = try_take(&s, &lock(), Duration::ZERO, &token)
            .await
            .unwrap_err();
        assert!(
            matches!(
                err,
                StorageError::Injected {
                    op: OpKind::PutIfAbsent,
                    ..
                }
            ),
            "{err}"
        );
    }

    #[tokio::test]
    async fn taking_over_an_expired_lock_file_reads_a_lost_create_back_as_ours() {
        let dir = tempfile::tempdir().unwrap();
        let plain = Storage::open(dir.path().to_str().unwrap(), &Default::default()).unwrap();
        // A holder that died with the lock 70 s ago; the expiry is 60 s (+ 6 s margin).
        plain
            .put(&lock(), Bytes::from_static(b"LockInfo{}"))
            .await
            .unwrap();
        std::fs::OpenOptions::new()
            .write(true)
            .open(dir.path().join(".hoodie").join("lock"))
            .unwrap()
            .set_modified(std::time::SystemTime::now() - Duration::from_secs(70))
            .unwrap();
        let s = plain.clone().with_interceptor(Arc::new(FailNth::with_mode(
            &[OpKind::PutIfAbsent],
            1,
            FailMode::After,
        )));
        let token = owner_token();
        assert!(try_take(&s, &lock(), Duration::from_secs(60), &token)
            .await
            .unwrap());
        assert_eq!(plain.get(&lock()).await.unwrap(), token);
    }
}
