//! Taking the table lock the writers take, so that a rollback never races a writer's commit or
//! another rollback (hudi-format.md §10).
//!
//! Providers: `none` (the explicit, logged opt-out) and `filesystem`, which speaks Hudi's
//! `FileSystemBasedLockProvider` protocol: the lock is the file `<dir>/lock` (`.hoodie/lock` by
//! default, empty in the Hudi versions the interop harness runs), created only if absent and
//! deleted on release; a lock file older than `expire` is taken over, and `expire` = 0 (Hudi's
//! default) means never. The storage-based and ZooKeeper providers are not there yet.

use std::time::Duration;

use bytes::Bytes;
use chrono::Utc;
use tracing::{info, warn};

use crate::storage::{RelPath, Storage, StorageError};
use crate::Error;

/// Which lock provider a table's writers use, with its options.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum LockProvider {
    /// No lock: the operator vouches that no writer runs (logged on every use).
    None,
    /// Hudi's `FileSystemBasedLockProvider`.
    FileSystem {
        /// The folder of the lock file, relative to the table (`.hoodie` by default; Hudi's
        /// `hoodie.write.lock.filesystem.path`).
        dir: RelPath,
        /// `hoodie.write.lock.filesystem.expire`: a lock file older than this is stale and taken
        /// over; zero means a lock never expires.
        expire: Duration,
    },
}

impl LockProvider {
    /// The file-system lock with Hudi's defaults.
    pub fn filesystem_default() -> Self {
        LockProvider::FileSystem {
            dir: RelPath::parse(".hoodie").unwrap_or_default(),
            expire: Duration::ZERO,
        }
    }

    /// A short name for logs and metrics.
    pub fn name(&self) -> &'static str {
        match self {
            LockProvider::None => "none",
            LockProvider::FileSystem { .. } => "filesystem",
        }
    }
}

/// How to take the lock.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LockOptions {
    /// The provider.
    pub provider: LockProvider,
    /// How long to wait for the lock before giving up (an error, never a reason to proceed).
    pub timeout: Duration,
    /// How long to wait between attempts.
    pub retry_interval: Duration,
}

impl LockOptions {
    /// No lock (the explicit opt-out).
    pub fn none() -> Self {
        Self {
            provider: LockProvider::None,
            timeout: Duration::from_secs(60),
            retry_interval: Duration::from_millis(500),
        }
    }
}

/// A held lock. Release it with [`LockGuard::release`]; a guard that is dropped unreleased
/// leaves the lock file behind (as a crashed holder would).
#[derive(Debug)]
#[must_use = "release the lock when done"]
pub struct LockGuard {
    storage: Storage,
    file: Option<RelPath>,
}

impl LockGuard {
    /// Release the lock.
    pub async fn release(self) -> Result<(), Error> {
        if let Some(file) = &self.file {
            self.storage.delete(file).await?;
            info!(table = %self.storage.uri(), lock = %file, "released the table lock");
        }
        Ok(())
    }
}

/// Take the table lock, waiting up to `options.timeout`.
pub async fn acquire(storage: &Storage, options: &LockOptions) -> Result<LockGuard, Error> {
    match &options.provider {
        LockProvider::None => {
            warn!(table = %storage.uri(), "mutating the table without a lock (lock provider `none`)");
            Ok(LockGuard {
                storage: storage.clone(),
                file: None,
            })
        }
        LockProvider::FileSystem { dir, expire } => {
            let file = dir.join("lock").map_err(StorageError::from)?;
            let started = tokio::time::Instant::now();
            loop {
                match storage.head(&file).await? {
                    None => match storage.put_if_absent(&file, Bytes::new()).await {
                        Ok(()) => {
                            info!(table = %storage.uri(), lock = %file, "took the table lock");
                            return Ok(LockGuard {
                                storage: storage.clone(),
                                file: Some(file),
                            });
                        }
                        Err(StorageError::AlreadyExists { .. }) => {}
                        Err(e) => return Err(e.into()),
                    },
                    Some(meta) => {
                        let age = Utc::now() - meta.last_modified;
                        let stale =
                            !expire.is_zero() && age.to_std().map(|a| a > *expire).unwrap_or(false);
                        if stale {
                            warn!(table = %storage.uri(), lock = %file, age_s = age.num_seconds(), "taking over an expired lock file");
                            storage.delete(&file).await?;
                            continue;
                        }
                    }
                }
                if started.elapsed() >= options.timeout {
                    return Err(Error::LockTimeout {
                        table: storage.uri().to_string(),
                        lock: file.to_string(),
                        waited_ms: started.elapsed().as_millis() as u64,
                        hint: if expire.is_zero() {
                            "the lock file never expires (expire = 0, Hudi's default): if its holder is gone, an operator must delete it".into()
                        } else {
                            format!("it expires {} s after it was written", expire.as_secs())
                        },
                    });
                }
                tokio::time::sleep(options.retry_interval).await;
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
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
        let s = storage();
        // A holder that died with the lock. InMemory stamps files with the wall clock: a 1 ms
        // expiry makes its lock stale at once.
        let _dead_holder = acquire(&s, &fs(Duration::ZERO, Duration::from_secs(1)))
            .await
            .unwrap();
        tokio::time::sleep(Duration::from_millis(20)).await;
        let g = acquire(
            &s,
            &fs(Duration::from_millis(1), Duration::from_millis(200)),
        )
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
}
