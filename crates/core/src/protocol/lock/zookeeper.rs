//! Hudi's `ZookeeperBasedLockProvider`: a Curator `InterProcessMutex` at
//! `<base_path>/<lock_key>` (`hoodie.write.lock.zookeeper.base_path` and `.lock_key`, the
//! latter the table name by default).
//!
//! The recipe, as Curator runs it and as a Java writer expects a peer to run it: each contender
//! creates an ephemeral sequential node `<lock path>/_c_<uuid>-lock-<sequence>` (the `_c_<uuid>-`
//! prefix is Curator's "protection"); the children of the lock path are ordered by what follows
//! the last `lock-` in their names (the ten-digit sequence the server appends), and the
//! contender whose node comes first holds the lock. A contender that gives up, or a holder
//! that releases, deletes its node; a holder that dies loses its node when its session ends.
//! Missing parents are created (Curator creates them as container nodes; here they are
//! persistent, which a Curator peer treats the same).
//!
//! A waiting contender looks again every retry interval instead of watching its predecessor:
//! it costs a request per interval and keeps the client small.

use std::time::Duration;

use tokio_util::sync::CancellationToken;
use tracing::{info, warn};

use super::zk_client::{CreateMode, ZkClient, ZkError};

/// Curator's lock node name, after the protection prefix.
const LOCK_NAME: &str = "lock-";

/// Where a ZooKeeper lock lives and how to talk to the ensemble.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ZkLockConfig {
    /// `host:port[,host:port…]` (Hudi: `hoodie.write.lock.zookeeper.url` and `.port`).
    pub connect: String,
    /// `hoodie.write.lock.zookeeper.base_path`, for example `/hudi/locks`.
    pub base_path: String,
    /// `hoodie.write.lock.zookeeper.lock_key`. Empty: the table's `hoodie.table.name`, the key
    /// Hudi's writers infer when none is set ([`super::LockOptions::for_table`] fills it in before
    /// the lock is taken; a lock is never taken with an empty key).
    pub lock_key: String,
    /// `hoodie.write.lock.zookeeper.session_timeout_ms` (Hudi's default: 60 s).
    pub session_timeout: Duration,
    /// `hoodie.write.lock.zookeeper.connection_timeout_ms` (Hudi's default: 15 s).
    pub connection_timeout: Duration,
}

impl ZkLockConfig {
    /// Check the path rules Hudi applies: an absolute base path without a trailing `/`, a key
    /// without `/` (empty: the table's name), and a connect string without a chroot.
    pub fn validate(&self) -> Result<(), String> {
        if !self.base_path.starts_with('/')
            || (self.base_path.len() > 1 && self.base_path.ends_with('/'))
        {
            return Err(format!(
                "the base path `{}` must start with `/` and not end with `/`, as Hudi requires",
                self.base_path
            ));
        }
        if self.lock_key.contains('/') || self.lock_key == "." || self.lock_key == ".." {
            return Err(format!(
                "the lock key `{}` must be one path segment",
                self.lock_key
            ));
        }
        if self.connect.trim().is_empty() || self.connect.contains('/') {
            return Err(format!(
                "the url `{}` must be host:port[,host:port…] without a chroot",
                self.connect
            ));
        }
        Ok(())
    }

    /// The znode of the mutex: `<base_path>/<lock_key>`.
    pub fn lock_path(&self) -> String {
        format!("{}/{}", self.base_path.trim_end_matches('/'), self.lock_key)
    }
}

/// The sort key of a lock node: what follows the last `lock-` (Curator's rule); a name without
/// it sorts by its whole self, as in Curator.
pub fn sort_key(name: &str) -> &str {
    match name.rfind(LOCK_NAME) {
        Some(i) => &name[i + LOCK_NAME.len()..],
        None => name,
    }
}

/// Why a ZooKeeper lock attempt ended without the lock.
#[derive(Debug)]
pub enum ZkAcquireError {
    /// The lock was held by another contender for the whole wait; `holder` is its node.
    Timeout {
        /// The node that came first when the wait ended.
        holder: Option<String>,
    },
    /// ZooKeeper failed or could not be reached.
    Zk(ZkError),
    /// The wait was cancelled; our node (if any) was deleted.
    Cancelled,
}

impl From<ZkError> for ZkAcquireError {
    fn from(e: ZkError) -> Self {
        ZkAcquireError::Zk(e)
    }
}

/// A held ZooKeeper lock: the session and the node.
#[derive(Debug)]
pub struct ZkHeld {
    /// The session that owns the node.
    pub client: ZkClient,
    /// The full path of our node.
    pub node: String,
}

impl ZkHeld {
    /// Delete our node and close the session.
    pub async fn release(self) -> Result<(), ZkError> {
        let deleted = match self.client.delete(&self.node).await {
            Ok(()) | Err(ZkError::NoNode(_)) => Ok(()),
            Err(e) => Err(e),
        };
        // Closing the session removes the node too, should the delete have failed.
        let closed = self.client.close().await;
        deleted?;
        if let Err(e) = closed {
            warn!(error = %e, "closing the ZooKeeper session failed; the server will expire it");
        }
        Ok(())
    }
}

/// Contend for the lock, waiting up to `timeout` (or until `cancel` fires) and looking again
/// every `retry`.
pub async fn acquire(
    config: &ZkLockConfig,
    owner: &str,
    timeout: Duration,
    retry: Duration,
    cancel: Option<&CancellationToken>,
) -> Result<ZkHeld, ZkAcquireError> {
    let started = tokio::time::Instant::now();
    let client = ZkClient::connect(
        &config.connect,
        config.session_timeout,
        config.connection_timeout,
    )
    .await?;
    let result = contend(&client, config, owner, started, timeout, retry, cancel).await;
    match result {
        Ok(node) => {
            info!(lock = %node, session = format!("{:#x}", client.session_id()), "took the ZooKeeper lock");
            Ok(ZkHeld { client, node })
        }
        Err(e) => {
            // Our node (if any) goes with the session.
            let _ = client.close().await;
            Err(e)
        }
    }
}

async fn contend(
    client: &ZkClient,
    config: &ZkLockConfig,
    owner: &str,
    started: tokio::time::Instant,
    timeout: Duration,
    retry: Duration,
    cancel: Option<&CancellationToken>,
) -> Result<String, ZkAcquireError> {
    let dir = config.lock_path();
    let prefix = format!("{dir}/_c_{}-{LOCK_NAME}", uuid::Uuid::new_v4());
    client.create_parents(&prefix).await?;
    let node = client
        .create(
            &prefix,
            format!("hudi-keeper {owner}").as_bytes(),
            CreateMode::EphemeralSequential,
        )
        .await?;
    let ours = node.rsplit('/').next().unwrap_or_default().to_string();
    loop {
        let mut children = client.children(&dir).await?;
        children.sort_by(|a, b| sort_key(a).cmp(sort_key(b)));
        match children.iter().position(|c| *c == ours) {
            Some(0) => return Ok(node),
            Some(_) => {}
            None => {
                return Err(ZkAcquireError::Zk(ZkError::SessionLost(format!(
                    "our lock node `{node}` disappeared while waiting"
                ))))
            }
        }
        let cancelled = cancel.is_some_and(CancellationToken::is_cancelled);
        if cancelled || started.elapsed() >= timeout {
            let holder = children.first().map(|c| format!("{dir}/{c}"));
            match client.delete(&node).await {
                Ok(()) | Err(ZkError::NoNode(_)) => {}
                Err(e) => {
                    warn!(node = %node, error = %e, "could not delete our lock node; it goes with the session")
                }
            }
            if cancelled {
                return Err(ZkAcquireError::Cancelled);
            }
            return Err(ZkAcquireError::Timeout { holder });
        }
        match cancel {
            Some(c) => {
                tokio::select! {
                    _ = tokio::time::sleep(retry) => {}
                    _ = c.cancelled() => {}
                }
            }
            None => tokio::time::sleep(retry).await,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn nodes_sort_by_the_sequence_after_the_last_lock_name() {
        let mut names = [
            "_c_bbbb-lock-0000000003",
            "_c_zzzz-lock-0000000001",
            "_c_aaaa-lock-0000000002",
        ];
        names.sort_by(|a, b| sort_key(a).cmp(sort_key(b)));
        assert_eq!(names[0], "_c_zzzz-lock-0000000001");
        assert_eq!(names[2], "_c_bbbb-lock-0000000003");
        // A protection prefix that itself contains `lock-` does not confuse the order.
        assert_eq!(sort_key("_c_lock-x-lock-0000000007"), "0000000007");
    }

    #[test]
    fn the_lock_path_joins_base_path_and_key() {
        let c = ZkLockConfig {
            connect: "127.0.0.1:2181".into(),
            base_path: "/hudi/locks".into(),
            lock_key: "trips".into(),
            session_timeout: Duration::from_secs(60),
            connection_timeout: Duration::from_secs(15),
        };
        assert_eq!(c.lock_path(), "/hudi/locks/trips");
    }
}
