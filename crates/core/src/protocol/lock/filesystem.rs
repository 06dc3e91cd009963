//! Hudi's `FileSystemBasedLockProvider`: the lock is the file `<dir>/lock` (`.hoodie/lock` by
//! default; empty in the Hudi versions the interop harness runs), created only if absent and
//! deleted on release. A lock file older than `expire` is taken over; `expire` = 0 (Hudi's
//! default) means never.

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

/// What a waiter can tell the operator about a file lock it could not take.
pub fn hint(expire: Duration) -> String {
    if expire.is_zero() {
        "the lock file never expires (expire = 0, Hudi's default): if its holder is gone, an operator must delete it".into()
    } else {
        format!("it expires {} s after it was written", expire.as_secs())
    }
}
