//! Hudi's `FileSystemBasedLockProvider`: the lock is the file `<dir>/lock` (`.hoodie/lock` by
//! default), created only if absent and deleted on release. A lock file older than `expire` is
//! taken over; `expire` = 0 (Hudi's default) means never.
//!
//! What a lock file holds is informational only: Hudi writes it empty or with its `LockInfo`
//! text, and reads it back only to log the current owner. hudi-keeper writes an owner token
//! ([`owner_token`], unique per acquisition) and deletes the file on release only if it still
//! holds that token: a lock file an operator deleted and a writer re-created is left alone.
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
        None => match storage.put_if_absent(file, token.clone()).await {
            Ok(()) => Ok(true),
            Err(StorageError::AlreadyExists { .. }) => Ok(false),
            Err(e) => Err(e),
        },
        Some(meta) => {
            let now = Utc::now();
            let age = now - meta.last_modified;
            if expired(expire, meta.last_modified, now) {
                warn!(table = %storage.uri(), lock = %file, age_s = age.num_seconds(), "taking over an expired lock file");
                storage.delete(file).await?;
                // Create-if-absent again: whoever creates it first after the delete holds it.
                match storage.put_if_absent(file, token.clone()).await {
                    Ok(()) => Ok(true),
                    Err(StorageError::AlreadyExists { .. }) => Ok(false),
                    Err(e) => Err(e),
                }
            } else {
                Ok(false)
            }
        }
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
