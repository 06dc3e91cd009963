//! Hudi's `FileSystemBasedLockProvider`: the lock is the file `<dir>/lock` (`.hoodie/lock` by
//! default; empty in the Hudi versions the interop harness runs), created only if absent and
//! deleted on release. A lock file older than `expire` is taken over; `expire` = 0 (Hudi's
//! default) means never.
//!
//! Hudi measures the age from the lock file's modification time (`hoodie.write.lock.filesystem.expire`
//! is a whole number of minutes), and its holder never refreshes it: a holder whose lock has an
//! expiry may lose it to the next contender once that much time has passed since it created the
//! file, whatever it is doing. hudi-keeper's holder therefore stops changing the table a
//! [`safety_margin`] before then (the lock's fence trips).

use std::time::Duration;

use bytes::Bytes;
use chrono::Utc;
use tracing::warn;

use crate::storage::{RelPath, Storage, StorageError};

/// The lock file of a lock folder.
pub fn lock_file(dir: &RelPath) -> Result<RelPath, StorageError> {
    Ok(dir.join("lock")?)
}

/// One attempt: `Ok(true)` when the lock file is now ours, `Ok(false)` when someone holds it.
pub async fn try_take(
    storage: &Storage,
    file: &RelPath,
    expire: Duration,
) -> Result<bool, StorageError> {
    match storage.head(file).await? {
        None => match storage.put_if_absent(file, Bytes::new()).await {
            Ok(()) => Ok(true),
            Err(StorageError::AlreadyExists { .. }) => Ok(false),
            Err(e) => Err(e),
        },
        Some(meta) => {
            let age = Utc::now() - meta.last_modified;
            let stale = !expire.is_zero() && age.to_std().map(|a| a > expire).unwrap_or(false);
            if stale {
                warn!(table = %storage.uri(), lock = %file, age_s = age.num_seconds(), "taking over an expired lock file");
                storage.delete(file).await?;
                // Create-if-absent again: whoever creates it first after the delete holds it.
                match storage.put_if_absent(file, Bytes::new()).await {
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
/// table: a tenth of the expiry, at least 1 s and at most 10 s (for the clock difference between
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
