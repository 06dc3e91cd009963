//! `[cluster] mode = "zookeeper"`: the live replicas are the ones holding an ephemeral node
//! under `cluster.zookeeper_path` on the writers' ZooKeeper ensemble (issue #18).
//!
//! Each replica opens a session, creates `<path>/<member id>-<sequence>` (ephemeral, so the
//! server deletes it when the session ends: a replica killed loses its node once its session
//! times out; one that stops closes its session and loses it at once), and watches the
//! children of `<path>`. Every change of the children is a new [`Cluster`] view, which the
//! daemon applies (`Daemon::apply_cluster`): tables whose owner changed are counted, and the
//! ones this replica now owns are polled soon.
//!
//! A session that leaves `SyncConnected` even once is given up (as the ZooKeeper lock does):
//! while it was away this replica could not know whether its node still stood. Until a new
//! session is registered, this replica owns no table; the others take its tables once its old
//! session expires. Sequence numbers keep a replica that restarts under the same id from
//! colliding with the node of its previous session, which may stand until that session
//! expires: both count as one member.

use std::sync::Arc;
use std::time::Duration;

use hudi_keeper_core::protocol::lock::zk_client::{CreateMode, ZkClient, ZkConnect, ZkError};
use tracing::{info, warn};

use super::cluster::{member_of_node, node_prefix, Cluster};
use super::config::{Config, ZkMembershipSettings};
use super::Daemon;

/// The first wait after a session could not be opened or was lost; doubled up to
/// [`MAX_BACKOFF`].
const FIRST_BACKOFF: Duration = Duration::from_millis(500);
const MAX_BACKOFF: Duration = Duration::from_secs(30);

/// How often the session's state is looked at while no child changes.
const LIVENESS_CHECK: Duration = Duration::from_millis(250);

/// The children are listed again this often even without a watch event (a watch lost with a
/// connection that resumed is otherwise not noticed).
const RELIST: Duration = Duration::from_secs(60);

/// The most children of the membership node read (a replica per node; more is not ours).
const MAX_CHILDREN: usize = 4 * super::cluster::MAX_REPLICAS as usize;

/// How a `zookeeper` cluster's replicas find each other.
#[derive(Debug, Clone)]
pub struct ZkMembership {
    connect: ZkConnect,
    path: String,
}

impl ZkMembership {
    /// The membership `config` describes ([`Config::zookeeper_membership`], which validates
    /// it). Errors name the setting to fix.
    pub fn from_config(config: &Config) -> Result<Self, String> {
        let ZkMembershipSettings { connect, path } = config.zookeeper_membership()?;
        Ok(Self { connect, path })
    }

    /// Keep this replica registered and the daemon's view current until the daemon shuts
    /// down; then close the session, so the others take its tables at once.
    pub async fn run(self, daemon: Arc<Daemon>, base: Cluster) {
        let mut backoff = FIRST_BACKOFF;
        loop {
            // The session watches the shutdown itself: it deletes its node before it ends.
            match self.session(&daemon, &base, &mut backoff).await {
                Ok(()) => return,
                Err(e) => {
                    warn!(zookeeper = %self.connect.connect, path = %self.path, member = %base.id(), error = %e, retry_ms = backoff.as_millis() as u64, "cluster membership: no ZooKeeper session; this replica owns no table until it is registered again");
                    let current = daemon.cluster();
                    let others = current
                        .members()
                        .iter()
                        .filter(|m| *m != base.id())
                        .cloned()
                        .collect::<Vec<_>>();
                    daemon.apply_cluster(base.with_members(others, false)).await;
                }
            }
            tokio::select! {
                () = tokio::time::sleep(backoff) => {}
                () = daemon.shutdown.cancelled() => return,
            }
            backoff = (backoff * 2).min(MAX_BACKOFF);
        }
    }

    /// One session: register, then follow the children until the session is lost (an error)
    /// or the daemon shuts down (`Ok`, the session closed).
    async fn session(
        &self,
        daemon: &Arc<Daemon>,
        base: &Cluster,
        backoff: &mut Duration,
    ) -> Result<(), ZkError> {
        let shutdown = daemon.shutdown.clone();
        let Some(client) = until_shutdown(&shutdown, ZkClient::open(&self.connect)).await? else {
            return Ok(());
        };
        let prepared = async {
            client.create_parents(&self.path).await?;
            match client.create(&self.path, &[], CreateMode::Persistent).await {
                Ok(_) | Err(ZkError::NodeExists(_)) => Ok(()),
                Err(e) => Err(e),
            }
        };
        if until_shutdown(&shutdown, prepared).await?.is_none() {
            return client.close().await;
        }
        let data = serde_json::json!({
            "member": base.id(),
            "pid": std::process::id(),
            "started": chrono::Utc::now().to_rfc3339(),
            "version": env!("CARGO_PKG_VERSION"),
        })
        .to_string();
        let created = client
            .create(
                &format!("{}/{}", self.path, node_prefix(base.id())),
                data.as_bytes(),
                CreateMode::EphemeralSequential,
            )
            .await?;
        let mine = created.rsplit('/').next().unwrap_or_default().to_string();
        info!(zookeeper = %self.connect.connect, node = %created, session = format!("{:#x}", client.session_id()), "cluster membership: registered");
        *backoff = FIRST_BACKOFF;
        loop {
            let (children, changed) = client.children_and_watch(&self.path).await?;
            if !children.contains(&mine) {
                return Err(ZkError::SessionLost(format!(
                    "this replica's node `{}/{mine}` is gone",
                    self.path
                )));
            }
            let ids: Vec<String> = children
                .iter()
                .take(MAX_CHILDREN)
                .filter(|c| **c != mine)
                .filter_map(|c| member_of_node(c).map(str::to_string))
                .collect();
            if children
                .iter()
                .any(|c| *c != mine && member_of_node(c) == Some(base.id()))
            {
                // Its own earlier session (a restart before that session expired), or another
                // replica configured with the same id: then both poll the same tables, which
                // the tables' locks keep safe but is double work.
                info!(member = %base.id(), "cluster membership: another node carries this replica's id (an earlier session of it not expired yet, or a second replica with the same cluster.member)");
            }
            daemon.apply_cluster(base.with_members(ids, true)).await;
            let mut changed = std::pin::pin!(changed);
            let mut relist = std::pin::pin!(tokio::time::sleep(RELIST));
            loop {
                tokio::select! {
                    () = &mut changed => break,
                    () = &mut relist => break,
                    () = tokio::time::sleep(LIVENESS_CHECK) => {
                        if !client.is_alive() {
                            return Err(ZkError::SessionLost("the session left SyncConnected".into()));
                        }
                    }
                    () = daemon.shutdown.cancelled() => {
                        // The node is deleted first, and its deletion awaited: the close of a
                        // dropped session is sent in the background, which a process that exits
                        // next may never do (the node would then stand until the session times
                        // out).
                        info!(node = %created, "cluster membership: leaving (the others take this replica's tables now)");
                        if let Err(e) = client.delete(&created).await {
                            warn!(node = %created, error = %e, "cluster membership: the node could not be deleted; it goes when the session expires");
                        }
                        return client.close().await;
                    }
                }
            }
        }
    }
}

/// `step`'s outcome, or `None` once the daemon shuts down first.
async fn until_shutdown<T>(
    shutdown: &tokio_util::sync::CancellationToken,
    step: impl std::future::Future<Output = Result<T, ZkError>>,
) -> Result<Option<T>, ZkError> {
    tokio::select! {
        r = step => r.map(Some),
        () = shutdown.cancelled() => Ok(None),
    }
}
