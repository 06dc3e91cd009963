//! The ZooKeeper session a lock runs on, over the maintained `zookeeper-client` crate (SASL
//! DIGEST-MD5, TLS, several servers): the few operations the lock recipe needs (create,
//! optionally ephemeral and sequential; delete; list children; close) and whether the session
//! can still be trusted.
//!
//! A session that disconnected even once counts as lost for good ([`ZkClient::is_alive`]): the
//! crate reconnects and may resume the session, but while it was away the holder could not know
//! whether its ephemeral node survived, so a lock holder stops mutating at once (as Curator's
//! `SUSPENDED` tells a Hudi writer to) and never goes on under that session.

use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

use tracing::debug;
use zookeeper_client as zk;

/// How a node is created.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CreateMode {
    /// A persistent node.
    Persistent,
    /// A node that goes away with the session, with a sequence number appended to its name.
    EphemeralSequential,
}

/// A ZooKeeper error, by the server's answer or the session's state.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ZkError {
    /// The node does not exist (`NONODE`).
    #[error("no node `{0}`")]
    NoNode(String),
    /// The node exists already (`NODEEXISTS`).
    #[error("node `{0}` exists")]
    NodeExists(String),
    /// Any other error the server or the client reported for a request.
    #[error("ZooKeeper request on `{path}` failed: {reason}")]
    Request {
        /// The path of the request.
        path: String,
        /// What ZooKeeper said.
        reason: String,
    },
    /// No server of the connect string could be reached, or the session was refused
    /// (authentication failed, TLS refused).
    #[error("cannot connect to ZooKeeper `{connect}`: {reason}")]
    Connect {
        /// The connect string.
        connect: String,
        /// Why.
        reason: String,
    },
    /// The session broke; it (and any ephemeral node of it) is to be considered gone.
    #[error("the ZooKeeper session was lost: {0}")]
    SessionLost(String),
    /// The TLS or SASL settings cannot be used (an unreadable or malformed file).
    #[error("ZooKeeper security settings: {0}")]
    Config(String),
}

/// TLS to the ensemble (the servers' `secureClientPort`), PEM files: the CA that signed the
/// servers' certificates and, where the servers require client certificates
/// (`ssl.clientAuth`), this client's certificate and key. Java writers keep the same material
/// in the trust and key stores `zookeeper.ssl.trustStore.*` / `zookeeper.ssl.keyStore.*` name.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ZkTls {
    /// PEM file of the CA certificates to trust.
    pub ca_file: PathBuf,
    /// PEM file of the client certificate (chain), with `key_file`.
    pub cert_file: Option<PathBuf>,
    /// PEM file of the client's private key, with `cert_file`.
    pub key_file: Option<PathBuf>,
}

/// SASL DIGEST-MD5 credentials, as the `DigestLoginModule` entry of a Java writer's JAAS file
/// names them (the `Client` section ZooKeeper's client reads).
#[derive(Clone, PartialEq, Eq)]
pub struct ZkSasl {
    /// `username`.
    pub username: String,
    /// `password`.
    pub password: String,
}

impl std::fmt::Debug for ZkSasl {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ZkSasl")
            .field("username", &self.username)
            .field("password", &"<redacted>")
            .finish()
    }
}

/// Everything a session is opened with.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ZkConnect {
    /// `host:port[,host:port…]`.
    pub connect: String,
    /// The session timeout asked for.
    pub session_timeout: Duration,
    /// How long one server may take to open a session.
    pub connection_timeout: Duration,
    /// TLS, if the ensemble is reached over its secure port.
    pub tls: Option<ZkTls>,
    /// SASL DIGEST-MD5 credentials, if the ensemble authenticates clients.
    pub sasl: Option<ZkSasl>,
}

impl ZkConnect {
    /// A plain session (no TLS, no SASL).
    pub fn plain(connect: &str, session_timeout: Duration, connection_timeout: Duration) -> Self {
        Self {
            connect: connect.to_string(),
            session_timeout,
            connection_timeout,
            tls: None,
            sasl: None,
        }
    }
}

/// Whether a session can still be trusted, without holding it open: what a lock's fence
/// checks before every mutation.
#[derive(Debug, Clone)]
pub struct ZkLiveness(Arc<AtomicBool>);

impl ZkLiveness {
    /// Whether the session was connected all along and is not closed.
    pub fn is_alive(&self) -> bool {
        !self.0.load(Ordering::Acquire)
    }
}

/// One ZooKeeper session. Closed when [`ZkClient::close`]d or dropped.
#[derive(Debug)]
pub struct ZkClient {
    client: zk::Client,
    connect: String,
    /// Set once the session left `SyncConnected`, for good.
    lost: Arc<AtomicBool>,
}

fn read_pem(path: &std::path::Path, what: &str) -> Result<String, ZkError> {
    // PEM files of certificates and keys are small; a larger file is not one.
    const MAX: u64 = 1 << 20;
    let meta = std::fs::metadata(path)
        .map_err(|e| ZkError::Config(format!("{what} `{}`: {e}", path.display())))?;
    if meta.len() > MAX {
        return Err(ZkError::Config(format!(
            "{what} `{}` is {} bytes, more than a PEM file of certificates or keys holds",
            path.display(),
            meta.len()
        )));
    }
    std::fs::read_to_string(path)
        .map_err(|e| ZkError::Config(format!("{what} `{}`: {e}", path.display())))
}

fn tls_options(tls: &ZkTls) -> Result<zk::TlsOptions, ZkError> {
    let config = |e: zk::Error| ZkError::Config(e.to_string());
    let ca = read_pem(&tls.ca_file, "the TLS CA file")?;
    let mut options = zk::TlsOptions::new().with_pem_ca(&ca).map_err(config)?;
    match (&tls.cert_file, &tls.key_file) {
        (Some(cert), Some(key)) => {
            let cert = read_pem(cert, "the TLS certificate file")?;
            let key = read_pem(key, "the TLS key file")?;
            options = options.with_pem_identity(&cert, &key).map_err(config)?;
        }
        (None, None) => {}
        _ => {
            return Err(ZkError::Config(
                "a client certificate needs both the certificate and the key file".into(),
            ))
        }
    }
    Ok(options)
}

impl ZkClient {
    /// Open a plain session with one of the servers of `connect`.
    pub async fn connect(
        connect: &str,
        session_timeout: Duration,
        connection_timeout: Duration,
    ) -> Result<Self, ZkError> {
        Self::open(&ZkConnect::plain(
            connect,
            session_timeout,
            connection_timeout,
        ))
        .await
    }

    /// Open a session as `how` says: the servers of the connect string are tried in turn, again
    /// and again with the crate's backoff, until one opens a session, one refuses the login, or
    /// the time is up (the connection timeout for each server and a second, at most the
    /// session timeout), as ZooKeeper's Java client and Curator keep trying until their
    /// connection timeout.
    pub async fn open(how: &ZkConnect) -> Result<Self, ZkError> {
        let err = |reason: String| ZkError::Connect {
            connect: how.connect.clone(),
            reason,
        };
        if how.connect.contains('/') {
            return Err(err(
                "a chroot suffix in the connect string is not supported; put it in the lock's base path".into(),
            ));
        }
        let hosts = how.connect.split(',').filter(|h| !h.trim().is_empty());
        let servers = u32::try_from(hosts.count()).unwrap_or(u32::MAX).max(1);
        // Not `with_fail_eagerly` (one try per server): a server on Netty (every TLS ensemble,
        // `secureClientPort` needs it) may answer the SASL request this crate sends right behind
        // the ConnectRequest before the ConnectRequest. ZooKeeper 3.8's NettyServerCnxn reads
        // on when the session was created before its read loop looks at the throttle again,
        // and answers the SASL request at once while the ConnectResponse still waits in its
        // event loop's queue (its Java client sends SASL only once connected). The crate takes
        // the SASL reply for the ConnectResponse ("unsupported server version 1") and drops
        // the connection: 1 in 300 sessions on the test server (scripts/zk-server
        // start-secure), 0 on its NIO server; one try made that "no available hosts" at once
        // (issue #29). The next connection opens the session. A refused login
        // (`AuthFailed`) still ends the attempt at once.
        let mut connector = zk::Client::connector()
            .with_session_timeout(how.session_timeout)
            .with_connection_timeout(how.connection_timeout);
        if let Some(tls) = &how.tls {
            connector = connector.with_tls(tls_options(tls)?);
        }
        if let Some(sasl) = &how.sasl {
            connector = connector.with_sasl(zk::SaslOptions::digest_md5(
                sasl.username.clone(),
                sasl.password.clone(),
            ));
        }
        let attempt = async {
            if how.tls.is_some() {
                connector.secure_connect(&how.connect).await
            } else {
                connector.connect(&how.connect).await
            }
        };
        // The crate bounds each try by the connection timeout and all of them by the session
        // timeout; this bounds them all by the connection timeout of each server (a session
        // handshake that hangs after the connection is made included).
        let bound = how.connection_timeout.saturating_mul(servers) + Duration::from_secs(1);
        let client = match tokio::time::timeout(bound, attempt).await {
            Ok(Ok(c)) => c,
            Ok(Err(e)) => return Err(err(e.to_string())),
            Err(_) => {
                return Err(err(format!(
                    "no server opened a session within {bound:?} (down, not answering, or refusing the TLS handshake)"
                )))
            }
        };
        let lost = Arc::new(AtomicBool::new(false));
        let mut states = client.state_watcher();
        let flag = Arc::clone(&lost);
        let id = format!("{:#x}", client.session_id().0);
        tokio::spawn(async move {
            loop {
                let state = states.changed().await;
                if state != zk::SessionState::SyncConnected {
                    debug!(session = %id, ?state, "ZooKeeper session left SyncConnected; its lock counts as lost");
                    flag.store(true, Ordering::Release);
                    if state.is_terminated() {
                        return;
                    }
                }
            }
        });
        debug!(
            server = %how.connect,
            session = format!("{:#x}", client.session_id().0),
            timeout_ms = client.session_timeout().as_millis() as u64,
            tls = how.tls.is_some(),
            sasl = how.sasl.is_some(),
            "ZooKeeper session opened"
        );
        Ok(Self {
            client,
            connect: how.connect.clone(),
            lost,
        })
    }

    /// The session id.
    pub fn session_id(&self) -> i64 {
        self.client.session_id().0
    }

    /// The connect string it was opened with.
    pub fn connect_string(&self) -> &str {
        &self.connect
    }

    /// Whether the session is connected and never was disconnected: while it is, its
    /// ephemeral nodes stand.
    pub fn is_alive(&self) -> bool {
        !self.lost.load(Ordering::Acquire) && self.client.state() == zk::SessionState::SyncConnected
    }

    /// The session's liveness, for a fence (it does not keep the session open).
    pub fn liveness(&self) -> ZkLiveness {
        ZkLiveness(Arc::clone(&self.lost))
    }

    fn error(&self, path: &str, e: zk::Error) -> ZkError {
        match e {
            zk::Error::NoNode => ZkError::NoNode(path.to_string()),
            zk::Error::NodeExists => ZkError::NodeExists(path.to_string()),
            zk::Error::SessionExpired
            | zk::Error::ClientClosed
            | zk::Error::ConnectionLoss
            | zk::Error::AuthFailed => ZkError::SessionLost(e.to_string()),
            e => ZkError::Request {
                path: path.to_string(),
                reason: e.to_string(),
            },
        }
    }

    /// Create `path` (with the ACL open to anyone, as Curator's default); returns the path
    /// created (with the sequence number of a sequential node).
    pub async fn create(
        &self,
        path: &str,
        data: &[u8],
        mode: CreateMode,
    ) -> Result<String, ZkError> {
        let mode = match mode {
            CreateMode::Persistent => zk::CreateMode::Persistent,
            CreateMode::EphemeralSequential => zk::CreateMode::EphemeralSequential,
        };
        let options = mode.with_acls(zk::Acls::anyone_all());
        match self.client.create(path, data, &options).await {
            Ok((_, sequence)) if mode == zk::CreateMode::EphemeralSequential => {
                Ok(format!("{path}{sequence}"))
            }
            Ok(_) => Ok(path.to_string()),
            Err(e) => Err(self.error(path, e)),
        }
    }

    /// Create the missing parents of `path` (not `path` itself) as persistent nodes.
    pub async fn create_parents(&self, path: &str) -> Result<(), ZkError> {
        let mut at = String::new();
        let segments: Vec<&str> = path.split('/').filter(|s| !s.is_empty()).collect();
        for seg in segments.iter().take(segments.len().saturating_sub(1)) {
            at.push('/');
            at.push_str(seg);
            match self.create(&at, &[], CreateMode::Persistent).await {
                Ok(_) | Err(ZkError::NodeExists(_)) => {}
                Err(e) => return Err(e),
            }
        }
        Ok(())
    }

    /// Delete `path`, whatever its version.
    pub async fn delete(&self, path: &str) -> Result<(), ZkError> {
        self.client
            .delete(path, None)
            .await
            .map_err(|e| self.error(path, e))
    }

    /// The names of the children of `path`.
    pub async fn children(&self, path: &str) -> Result<Vec<String>, ZkError> {
        self.client
            .list_children(path)
            .await
            .map_err(|e| self.error(path, e))
    }

    /// The names of the children of `path`, and a future that completes once they change (a
    /// child created or deleted, the node deleted) or the session ends: ZooKeeper's one-shot
    /// child watch.
    pub async fn children_and_watch(
        &self,
        path: &str,
    ) -> Result<
        (
            Vec<String>,
            impl std::future::Future<Output = ()> + Send + 'static,
        ),
        ZkError,
    > {
        let (children, watcher) = self
            .client
            .list_and_watch_children(path)
            .await
            .map_err(|e| self.error(path, e))?;
        Ok((children, async move {
            let _ = watcher.changed().await;
        }))
    }

    /// Close the session (its ephemeral nodes go): its one handle is dropped, and the crate's
    /// session task sends the close.
    pub async fn close(self) -> Result<(), ZkError> {
        self.lost.store(true, Ordering::Release);
        drop(self.client);
        Ok(())
    }
}
