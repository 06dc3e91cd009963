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

use crate::error::Error;
use crate::storage::{RelPath, Storage, SMALL_FILE_MAX_READ};

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
            Err(Error::LockLost { reason, .. }) => {
                Err(format!("the table lock is lost ({reason})"))
            }
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
    let wait = Wait {
        storage,
        options,
        cancel,
        table: storage.uri().to_string(),
        lock: options.provider.describe(),
        started: tokio::time::Instant::now(),
    };
    if cancel.is_some_and(CancellationToken::is_cancelled) {
        return Err(wait.cancelled());
    }
    match &options.provider {
        LockProvider::None => {
            warn!(table = %wait.table, "mutating the table without a lock (lock provider `none`)");
            Ok(wait.guard(Held::None, FenceKind::Always))
        }
        LockProvider::FileSystem { dir, expire } => wait.take_file(dir, *expire).await,
        LockProvider::Storage(config) => wait.take_lease(config).await,
        LockProvider::ZooKeeper(config) => wait.take_zk_mutex(config).await,
    }
}

/// One wait for the table lock: what it waits with, and since when.
struct Wait<'a> {
    storage: &'a Storage,
    options: &'a LockOptions,
    cancel: Option<&'a CancellationToken>,
    /// The table URI.
    table: String,
    /// The lock, described.
    lock: String,
    started: tokio::time::Instant,
}

impl Wait<'_> {
    /// The provider failed.
    fn lock_err(&self, reason: String) -> Error {
        Error::Lock {
            table: self.table.clone(),
            lock: self.lock.clone(),
            reason,
        }
    }

    /// The lock could not be had in time.
    fn timeout(&self, hint: String) -> Error {
        Error::LockTimeout {
            table: self.table.clone(),
            lock: self.lock.clone(),
            waited_ms: self.started.elapsed().as_millis() as u64,
            hint,
        }
    }

    /// The wait was asked to stop.
    fn cancelled(&self) -> Error {
        Error::Cancelled {
            table: self.table.clone(),
            at: format!("waiting for the lock `{}`", self.lock),
            pending: None,
        }
    }

    /// The guard of a lock just taken (logged).
    fn guard(&self, held: Held, kind: FenceKind) -> LockGuard {
        let waited = if self.started.elapsed() > self.options.retry_interval {
            self.started.elapsed()
        } else {
            Duration::ZERO
        };
        info!(table = %self.table, lock = %self.lock, provider = self.options.provider.name(), waited_ms = waited.as_millis() as u64, "took the table lock");
        LockGuard {
            table: self.table.clone(),
            lock: self.lock.clone(),
            held,
            fence: Fence {
                table: self.table.as_str().into(),
                lock: self.lock.as_str().into(),
                kind,
            },
            waited,
        }
    }

    /// `FileSystemBasedLockProvider`: create the lock file in `dir` if absent, retrying.
    async fn take_file(&self, dir: &RelPath, expire: Duration) -> Result<LockGuard, Error> {
        let file = filesystem::lock_file(dir)?;
        let token = filesystem::owner_token();
        loop {
            // Hudi counts the expiry from the file's modification time, which is no earlier
            // than this.
            let attempt = tokio::time::Instant::now();
            if filesystem::try_take(self.storage, &file, expire, &token).await? {
                let held = Held::File {
                    storage: self.storage.clone(),
                    file,
                    token,
                };
                if expire.is_zero() {
                    return Ok(self.guard(held, FenceKind::Always));
                }
                let stop_by = attempt + expire.saturating_sub(filesystem::safety_margin(expire));
                return Ok(self.guard(held, FenceKind::Until { stop_by, expire }));
            }
            if self.started.elapsed() >= self.options.timeout {
                return Err(self.timeout(filesystem::hint(expire)));
            }
            if cancelled_during(self.options.retry_interval, self.cancel).await {
                return Err(self.cancelled());
            }
        }
    }

    /// `StorageBasedLockProvider`: take the JSON lease with a conditional write, retrying.
    async fn take_lease(&self, config: &StorageLockConfig) -> Result<LockGuard, Error> {
        let owner = uuid::Uuid::new_v4().to_string();
        loop {
            match storage_lock::try_take(self.storage, config, &owner).await {
                Ok(storage_lock::Attempt::Taken(lease)) => {
                    let rx = lease.state();
                    return Ok(self.guard(Held::Lease(lease), FenceKind::Lease(rx)));
                }
                Ok(storage_lock::Attempt::Held { holder, valid_for }) => {
                    if self.started.elapsed() >= self.options.timeout {
                        return Err(self.timeout(format!(
                            "held by `{holder}`, valid for {} s more unless renewed",
                            valid_for.as_secs()
                        )));
                    }
                }
                Err(storage_lock::LeaseError::Storage(e)) => return Err(e.into()),
                Err(e) => return Err(self.lock_err(e.to_string())),
            }
            if cancelled_during(self.options.retry_interval, self.cancel).await {
                return Err(self.cancelled());
            }
        }
    }

    /// `ZookeeperBasedLockProvider`: the Curator mutex of the table's lock key.
    async fn take_zk_mutex(&self, config: &ZkLockConfig) -> Result<LockGuard, Error> {
        if config.lock_key.is_empty() {
            // `for_table` names it; without a name the node would not be the writers'.
            return Err(self.lock_err(
                "the ZooKeeper lock key is unknown (empty): it must be the table's name or hoodie.write.lock.zookeeper.lock_key".into(),
            ));
        }
        let owner = format!("{} pid {}", self.table, std::process::id());
        match zookeeper::acquire(
            config,
            &owner,
            self.options.timeout,
            self.options.retry_interval,
            self.cancel,
        )
        .await
        {
            Ok(held) => {
                let liveness = held.client.liveness();
                Ok(self.guard(Held::Zk(held), FenceKind::Zk(liveness)))
            }
            Err(zookeeper::ZkAcquireError::Timeout { holder }) => Err(self.timeout(match holder {
                Some(h) => format!("held by ZooKeeper node `{h}`; it goes away when its holder releases or its session ends"),
                None => "the lock was contended for the whole wait".into(),
            })),
            Err(zookeeper::ZkAcquireError::Zk(e)) => Err(self.lock_err(e.to_string())),
            Err(zookeeper::ZkAcquireError::Cancelled) => Err(self.cancelled()),
        }
    }
}

#[cfg(test)]
mod tests;
