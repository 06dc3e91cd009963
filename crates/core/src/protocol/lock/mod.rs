//! Taking the table lock the writers take, so that a rollback never races a writer's commit or
//! another rollback (hudi-format.md §10).
//!
//! Providers, each speaking the protocol of one of Hudi's lock providers so that a Java writer
//! and hudi-keeper exclude each other:
//! - `filesystem` ([`filesystem`]): `FileSystemBasedLockProvider`, a lock file created if absent;
//! - `storage` ([`storage_lock`]): Hudi 1.x's `StorageBasedLockProvider`, a JSON lease in the
//!   table's storage, taken and renewed with conditional writes;
//! - `zookeeper` ([`zookeeper`]): `ZookeeperBasedLockProvider`, a Curator mutex;
//! - `none`: the explicit, logged opt-out.
//!
//! A held lock comes with a [`Fence`]: the holder checks it before every mutation, and a lock
//! whose lease could not be renewed, whose ZooKeeper session went quiet, or (a file-system lock
//! with an expiry) that is about to reach its expiry, fails the check before anyone else could
//! take it.

pub mod filesystem;
pub mod storage_lock;
pub mod zk_client;
pub mod zookeeper;

use std::sync::Arc;
use std::time::Duration;

use tokio::sync::watch;
use tokio_util::sync::CancellationToken;
use tracing::{error, info, warn};

use crate::storage::{RelPath, Storage, SMALL_FILE_MAX_READ};
use crate::Error;

pub use storage_lock::StorageLockConfig;
pub use zk_client::{ZkSasl, ZkTls};
pub use zookeeper::{ZkLockConfig, ZkSecurityFiles};

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
    /// Hudi 1.x's `StorageBasedLockProvider`.
    Storage(StorageLockConfig),
    /// Hudi's `ZookeeperBasedLockProvider`.
    ZooKeeper(ZkLockConfig),
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
            LockProvider::Storage(_) => "storage",
            LockProvider::ZooKeeper(_) => "zookeeper",
        }
    }

    /// Where the lock lives, for messages.
    pub fn describe(&self) -> String {
        match self {
            LockProvider::None => "no lock".into(),
            LockProvider::FileSystem { dir, .. } => filesystem::lock_file(dir)
                .map(|f| f.to_string())
                .unwrap_or_else(|_| dir.to_string()),
            LockProvider::Storage(c) => c.path.to_string(),
            LockProvider::ZooKeeper(c) => format!("zk://{}{}", c.connect, c.lock_path()),
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

    /// These options for the table named `table_name` (its `hoodie.table.name`): a ZooKeeper
    /// lock without a key gets the table's name, as Hudi's writers infer it. Every change takes
    /// its lock through this, so that the node is the writers' whatever a caller named the table.
    pub fn for_table(&self, table_name: &str) -> LockOptions {
        let mut options = self.clone();
        if let LockProvider::ZooKeeper(c) = &mut options.provider {
            if c.lock_key.is_empty() {
                c.lock_key = table_name.to_string();
            }
        }
        options
    }
}

/// Whether a held lock can still be trusted, as its keeper sees it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum LeaseState {
    /// Held; mutations may go on until `stop_by` unless renewed.
    Held {
        /// When the holder must stop mutating (a safety margin before the lease lapses).
        stop_by: tokio::time::Instant,
    },
    /// Lost (or about to lapse): stop mutating. The reason says why.
    Lost(String),
}

#[derive(Debug, Clone)]
enum FenceKind {
    /// Locks that cannot be lost while held (a file-system lock that never expires, none).
    Always,
    /// A file-system lock with an expiry: another writer may take it over once it has expired,
    /// so it counts as lost a safety margin before then.
    Until {
        stop_by: tokio::time::Instant,
        expire: Duration,
    },
    /// A lease kept by a renewal task.
    Lease(watch::Receiver<LeaseState>),
    /// A ZooKeeper session.
    Zk(zk_client::ZkLiveness),
}

/// The holder's view of its lock: check it right before every mutation.
#[derive(Debug, Clone)]
pub struct Fence {
    table: Arc<str>,
    lock: Arc<str>,
    kind: FenceKind,
}

impl Fence {
    /// A fence that always passes (no lock, or a lock that cannot be lost while held).
    pub fn always(table: &str) -> Self {
        Self {
            table: table.into(),
            lock: "no lock".into(),
            kind: FenceKind::Always,
        }
    }

    /// `Ok` while the lock is held and safely so; [`Error::LockLost`] otherwise.
    pub fn check(&self) -> Result<(), Error> {
        let reason = match &self.kind {
            FenceKind::Always => return Ok(()),
            FenceKind::Until { stop_by, expire } => {
                if tokio::time::Instant::now() < *stop_by {
                    return Ok(());
                }
                format!(
                    "the lock file may expire soon (it expires {} s after it was written, and is never refreshed): another writer could take it over",
                    expire.as_secs()
                )
            }
            FenceKind::Lease(rx) => match &*rx.borrow() {
                LeaseState::Held { stop_by } if tokio::time::Instant::now() < *stop_by => {
                    return Ok(())
                }
                LeaseState::Held { .. } => {
                    "the lease was not renewed in time and is about to lapse".into()
                }
                LeaseState::Lost(why) => why.clone(),
            },
            FenceKind::Zk(liveness) => {
                if liveness.is_alive() {
                    return Ok(());
                }
                "the ZooKeeper session went quiet or closed; its lock node may be gone".into()
            }
        };
        Err(Error::LockLost {
            table: self.table.to_string(),
            lock: self.lock.to_string(),
            reason,
        })
    }

    /// Resolves (with the error) once the lock is lost; never, for locks that cannot be lost.
    pub async fn lost(&self) -> Error {
        loop {
            if let Err(e) = self.check() {
                return e;
            }
            match &self.kind {
                FenceKind::Always => std::future::pending::<()>().await,
                FenceKind::Until { stop_by, .. } => tokio::time::sleep_until(*stop_by).await,
                FenceKind::Lease(rx) => {
                    let mut rx = rx.clone();
                    let stop_by = match &*rx.borrow_and_update() {
                        LeaseState::Held { stop_by } => *stop_by,
                        LeaseState::Lost(_) => continue,
                    };
                    tokio::select! {
                        _ = tokio::time::sleep_until(stop_by) => {}
                        changed = rx.changed() => {
                            if changed.is_err() {
                                // The keeper is gone: only the clock can end the lease now.
                                tokio::time::sleep_until(stop_by).await;
                            }
                        }
                    }
                }
                FenceKind::Zk(_) => tokio::time::sleep(Duration::from_millis(100)).await,
            }
        }
    }
}

impl crate::storage::WriteFence for Fence {
    fn check_write(&self) -> Result<(), String> {
        match self.check() {
            Ok(()) => Ok(()),
            Err(Error::LockLost { reason, .. }) => Err(reason),
            Err(e) => Err(e.to_string()),
        }
    }
}

#[derive(Debug)]
enum Held {
    None,
    File {
        storage: Storage,
        file: RelPath,
        /// What we wrote into the lock file: release deletes only a file that still holds it.
        token: bytes::Bytes,
    },
    Lease(storage_lock::Lease),
    Zk(zookeeper::ZkHeld),
}

/// A held lock. Release it with [`LockGuard::release`]. A guard dropped unreleased (its work
/// abandoned mid-way) is released in the background on the current tokio runtime as a backstop,
/// logged; [`release_dropped_locks`] waits for those releases. Without a runtime it is left
/// behind as a crashed holder's would be (a lease then lapses, a ZooKeeper node goes with its
/// session, a lock file stays).
#[derive(Debug)]
#[must_use = "release the lock when done"]
pub struct LockGuard {
    table: String,
    lock: String,
    held: Held,
    fence: Fence,
    /// How long taking the lock waited for another holder (zero when it was free).
    pub waited: Duration,
}

impl LockGuard {
    /// The fence to check before every mutation.
    pub fn fence(&self) -> Fence {
        self.fence.clone()
    }

    /// Release the lock.
    pub async fn release(mut self) -> Result<(), Error> {
        let held = std::mem::replace(&mut self.held, Held::None);
        if let Err(e) = release_held(&self.table, &self.lock, held).await {
            error!(table = %self.table, lock = %self.lock, error = %e, "could not release the table lock; it may be left behind");
            return Err(e);
        }
        info!(table = %self.table, lock = %self.lock, "released the table lock");
        Ok(())
    }
}

async fn release_held(table: &str, lock: &str, held: Held) -> Result<(), Error> {
    match held {
        Held::None => {}
        Held::File {
            storage,
            file,
            token,
        } => release_file(table, &storage, &file, &token).await?,
        Held::Lease(lease) => lease.release().await?,
        Held::Zk(zk) => zk.release().await.map_err(|e| Error::Lock {
            table: table.to_string(),
            lock: lock.to_string(),
            reason: format!("releasing: {e}"),
        })?,
    }
    Ok(())
}

/// The background releases of guards dropped unreleased.
static BACKSTOP: std::sync::LazyLock<tokio_util::task::TaskTracker> =
    std::sync::LazyLock::new(tokio_util::task::TaskTracker::new);

impl Drop for LockGuard {
    fn drop(&mut self) {
        let held = std::mem::replace(&mut self.held, Held::None);
        if matches!(held, Held::None) {
            return;
        }
        let (table, lock) = (self.table.clone(), self.lock.clone());
        match tokio::runtime::Handle::try_current() {
            Ok(handle) => {
                warn!(table = %table, lock = %lock, "a table lock was dropped without release (its work was abandoned); releasing it in the background");
                BACKSTOP.spawn_on(
                    async move {
                        match release_held(&table, &lock, held).await {
                            Ok(()) => {
                                info!(table = %table, lock = %lock, "released the dropped table lock")
                            }
                            Err(e) => {
                                error!(table = %table, lock = %lock, error = %e, "could not release the dropped table lock; it is left behind")
                            }
                        }
                    },
                    &handle,
                );
            }
            Err(_) => {
                error!(table = %table, lock = %lock, "a table lock was dropped outside an async runtime and is left behind (a lease lapses, a ZooKeeper node goes with its session, a lock file stays until deleted)");
            }
        }
    }
}

/// Wait up to `within` for the background releases of guards that were dropped unreleased;
/// `true` when none is left. A process calls this before it exits.
pub async fn release_dropped_locks(within: Duration) -> bool {
    BACKSTOP.close();
    let done = tokio::time::timeout(within, BACKSTOP.wait()).await.is_ok();
    BACKSTOP.reopen();
    done
}

/// Sleep `pause`; `true` when `cancel` fired first.
async fn cancelled_during(pause: Duration, cancel: Option<&CancellationToken>) -> bool {
    match cancel {
        Some(c) => tokio::select! {
            _ = tokio::time::sleep(pause) => false,
            _ = c.cancelled() => true,
        },
        None => {
            tokio::time::sleep(pause).await;
            false
        }
    }
}

/// Delete our lock file, but only if it is still ours: it holds the token we wrote (checked
/// by size first, so a large foreign file is never read). A lock file someone else created after
/// ours was deleted (an operator who judged it stale, or a writer that took over an expired
/// lock) is left alone, with a warning; a lock file already gone needs no release.
async fn release_file(
    table: &str,
    storage: &Storage,
    file: &RelPath,
    token: &bytes::Bytes,
) -> Result<(), Error> {
    let Some(meta) = storage.head(file).await? else {
        warn!(table = %table, lock = %file, "our lock file is already gone (deleted by someone else); nothing to release");
        return Ok(());
    };
    let ours = meta.size == token.len() as u64
        && storage
            .get_opt_capped(file, SMALL_FILE_MAX_READ)
            .await?
            .as_ref()
            == Some(token);
    if !ours {
        warn!(table = %table, lock = %file, "the lock file is no longer ours (ours was deleted and someone else created this one): it is left alone");
        return Ok(());
    }
    storage.delete(file).await?;
    Ok(())
}

/// Take the table lock, waiting up to `options.timeout`. A lock that cannot be had in time is
/// [`Error::LockTimeout`]; a provider that fails (unreachable, corrupt lock file) is
/// [`Error::Lock`]. Neither is a reason to proceed.
pub async fn acquire(storage: &Storage, options: &LockOptions) -> Result<LockGuard, Error> {
    acquire_until(storage, options, None).await
}

/// [`acquire`], giving up waiting with [`Error::Cancelled`] once `cancel` fires (never in the
/// middle of an attempt, so that a lock just taken is never left behind).
pub async fn acquire_until(
    storage: &Storage,
    options: &LockOptions,
    cancel: Option<&CancellationToken>,
) -> Result<LockGuard, Error> {
    let table = storage.uri().to_string();
    let lock = options.provider.describe();
    let started = tokio::time::Instant::now();
    let lock_err = |reason: String| Error::Lock {
        table: table.clone(),
        lock: lock.clone(),
        reason,
    };
    let timeout = |hint: String| Error::LockTimeout {
        table: table.clone(),
        lock: lock.clone(),
        waited_ms: started.elapsed().as_millis() as u64,
        hint,
    };
    let guard = |held: Held, kind: FenceKind| {
        let waited = if started.elapsed() > options.retry_interval {
            started.elapsed()
        } else {
            Duration::ZERO
        };
        info!(table = %table, lock = %lock, provider = options.provider.name(), waited_ms = waited.as_millis() as u64, "took the table lock");
        LockGuard {
            table: table.clone(),
            lock: lock.clone(),
            held,
            fence: Fence {
                table: table.as_str().into(),
                lock: lock.as_str().into(),
                kind,
            },
            waited,
        }
    };
    let cancelled = || Error::Cancelled {
        table: table.clone(),
        at: format!("waiting for the lock `{lock}`"),
        pending: None,
    };
    if cancel.is_some_and(CancellationToken::is_cancelled) {
        return Err(cancelled());
    }
    match &options.provider {
        LockProvider::None => {
            warn!(table = %table, "mutating the table without a lock (lock provider `none`)");
            Ok(guard(Held::None, FenceKind::Always))
        }
        LockProvider::FileSystem { dir, expire } => {
            let file = filesystem::lock_file(dir)?;
            let token = filesystem::owner_token();
            loop {
                // Hudi counts the expiry from the file's modification time, which is no earlier
                // than this.
                let attempt = tokio::time::Instant::now();
                if filesystem::try_take(storage, &file, *expire, &token).await? {
                    let held = Held::File {
                        storage: storage.clone(),
                        file,
                        token,
                    };
                    if expire.is_zero() {
                        return Ok(guard(held, FenceKind::Always));
                    }
                    let stop_by =
                        attempt + expire.saturating_sub(filesystem::safety_margin(*expire));
                    return Ok(guard(
                        held,
                        FenceKind::Until {
                            stop_by,
                            expire: *expire,
                        },
                    ));
                }
                if started.elapsed() >= options.timeout {
                    return Err(timeout(filesystem::hint(*expire)));
                }
                if cancelled_during(options.retry_interval, cancel).await {
                    return Err(cancelled());
                }
            }
        }
        LockProvider::Storage(config) => {
            let owner = uuid::Uuid::new_v4().to_string();
            loop {
                match storage_lock::try_take(storage, config, &owner).await {
                    Ok(storage_lock::Attempt::Taken(lease)) => {
                        let rx = lease.state();
                        return Ok(guard(Held::Lease(lease), FenceKind::Lease(rx)));
                    }
                    Ok(storage_lock::Attempt::Held { holder, valid_for }) => {
                        if started.elapsed() >= options.timeout {
                            return Err(timeout(format!(
                                "held by `{holder}`, valid for {} s more unless renewed",
                                valid_for.as_secs()
                            )));
                        }
                    }
                    Err(storage_lock::LeaseError::Storage(e)) => return Err(e.into()),
                    Err(e) => return Err(lock_err(e.to_string())),
                }
                if cancelled_during(options.retry_interval, cancel).await {
                    return Err(cancelled());
                }
            }
        }
        LockProvider::ZooKeeper(config) => {
            if config.lock_key.is_empty() {
                // `for_table` names it; without a name the node would not be the writers'.
                return Err(lock_err(
                    "the ZooKeeper lock key is unknown (empty): it must be the table's name or hoodie.write.lock.zookeeper.lock_key".into(),
                ));
            }
            let owner = format!("{table} pid {}", std::process::id());
            match zookeeper::acquire(
                config,
                &owner,
                options.timeout,
                options.retry_interval,
                cancel,
            )
            .await
            {
                Ok(held) => {
                    let liveness = held.client.liveness();
                    Ok(guard(Held::Zk(held), FenceKind::Zk(liveness)))
                }
                Err(zookeeper::ZkAcquireError::Timeout { holder }) => Err(timeout(match holder {
                    Some(h) => format!("held by ZooKeeper node `{h}`; it goes away when its holder releases or its session ends"),
                    None => "the lock was contended for the whole wait".into(),
                })),
                Err(zookeeper::ZkAcquireError::Zk(e)) => Err(lock_err(e.to_string())),
                Err(zookeeper::ZkAcquireError::Cancelled) => Err(cancelled()),
            }
        }
    }
}

#[cfg(test)]
mod tests {
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
    async fn a_zookeeper_lock_gets_the_tables_name_when_it_has_no_key_and_is_never_taken_without_one(
    ) {
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
        let waiter = tokio::spawn(async move {
            acquire(&s2, &lease(10_000, 1_000, Duration::from_secs(5))).await
        });
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

    /// Collects what a tracing subscriber writes.
    #[derive(Clone, Default)]
    struct Captured(Arc<std::sync::Mutex<Vec<u8>>>);

    impl std::io::Write for Captured {
        fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
            self.0.lock().unwrap().extend_from_slice(buf);
            Ok(buf.len())
        }
        fn flush(&mut self) -> std::io::Result<()> {
            Ok(())
        }
    }

    #[tokio::test(flavor = "current_thread")]
    async fn a_failed_release_is_logged_at_error_level_with_table_and_lock() {
        let captured = Captured::default();
        let writer = captured.clone();
        let subscriber = tracing_subscriber::fmt()
            .with_writer(move || writer.clone())
            .with_ansi(false)
            .finish();
        let _log = tracing::subscriber::set_default(subscriber);
        let s = storage().with_interceptor(Arc::new(FailDeletes));
        let g = acquire(&s, &fs(Duration::ZERO, Duration::from_secs(1)))
            .await
            .unwrap();
        g.release().await.unwrap_err();
        let log = String::from_utf8(captured.0.lock().unwrap().clone()).unwrap();
        let line = log
            .lines()
            .find(|l| l.contains("ERROR"))
            .unwrap_or_else(|| panic!("no error logged: {log}"));
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
}
