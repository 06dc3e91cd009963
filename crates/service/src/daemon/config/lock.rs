//! `lock`: the table lock's provider and options, and the ZooKeeper session of a `zookeeper`
//! cluster (which takes the lock's TLS, SASL and connection timeout).

use std::time::Duration;

use hudi_keeper_core::protocol::lock::zk_client::ZkConnect;
use hudi_keeper_core::protocol::lock::{
    storage_lock, LockOptions, LockProvider, StorageLockConfig, ZkLockConfig, ZkSecurityFiles,
};
use hudi_keeper_core::storage::RelPath;
use serde::{Deserialize, Serialize};

use super::Config;
use crate::duration::serde_helpers::{de_duration, de_lock_expire, ser_duration};

/// `lock`: the provider the table's writers use, and its options.
#[derive(Debug, Clone, PartialEq, Deserialize, Serialize)]
#[serde(deny_unknown_fields, default)]
pub struct LockSettings {
    /// `storage`, `filesystem`, `zookeeper` or `none`; unset means no decision (then the table
    /// can only be observed).
    pub provider: Option<String>,
    /// How long to wait for the lock.
    #[serde(deserialize_with = "de_duration", serialize_with = "ser_duration")]
    pub timeout: Duration,
    /// `filesystem`: the lock folder, relative to the table.
    pub filesystem_dir: String,
    /// `filesystem`: `hoodie.write.lock.filesystem.expire` (0: never). A bare number is minutes,
    /// as in Hudi; `90s`, `10m` keep their unit.
    #[serde(deserialize_with = "de_lock_expire", serialize_with = "ser_duration")]
    pub filesystem_expire: Duration,
    /// `storage`: the lock file, relative to the table.
    pub storage_path: String,
    /// `storage`: the lease validity.
    #[serde(deserialize_with = "de_duration", serialize_with = "ser_duration")]
    pub storage_validity: Duration,
    /// `storage`: the renewal interval.
    #[serde(deserialize_with = "de_duration", serialize_with = "ser_duration")]
    pub storage_renew_interval: Duration,
    /// `zookeeper`: `host:port[,host:port…]`.
    pub zookeeper_url: Option<String>,
    /// `zookeeper`: the base path.
    pub zookeeper_base_path: Option<String>,
    /// `zookeeper`: the lock key (default: the table name from `hoodie.properties`).
    pub zookeeper_lock_key: Option<String>,
    /// `zookeeper`: the session timeout.
    #[serde(deserialize_with = "de_duration", serialize_with = "ser_duration")]
    pub zookeeper_session_timeout: Duration,
    /// `zookeeper`: the connection timeout.
    #[serde(deserialize_with = "de_duration", serialize_with = "ser_duration")]
    pub zookeeper_connection_timeout: Duration,
    /// `zookeeper`: SASL DIGEST-MD5 with the `DigestLoginModule` credentials of this JAAS file.
    pub zookeeper_jaas_file: Option<std::path::PathBuf>,
    /// `zookeeper`: the JAAS file's section (default `Client`).
    pub zookeeper_jaas_section: Option<String>,
    /// `zookeeper`: TLS, trusting these PEM CA certificates.
    pub zookeeper_tls_ca_file: Option<std::path::PathBuf>,
    /// `zookeeper`: the client certificate (PEM), with `zookeeper_tls_key_file`.
    pub zookeeper_tls_cert_file: Option<std::path::PathBuf>,
    /// `zookeeper`: the client key (PEM), with `zookeeper_tls_cert_file`.
    pub zookeeper_tls_key_file: Option<std::path::PathBuf>,
}

impl Default for LockSettings {
    fn default() -> Self {
        Self {
            provider: None,
            timeout: Duration::from_secs(60),
            filesystem_dir: ".hoodie".into(),
            filesystem_expire: Duration::ZERO,
            storage_path: storage_lock::DEFAULT_PATH.into(),
            storage_validity: Duration::from_secs(300),
            storage_renew_interval: Duration::from_secs(30),
            zookeeper_url: None,
            zookeeper_base_path: None,
            zookeeper_lock_key: None,
            zookeeper_session_timeout: Duration::from_secs(60),
            zookeeper_connection_timeout: Duration::from_secs(15),
            zookeeper_jaas_file: None,
            zookeeper_jaas_section: None,
            zookeeper_tls_ca_file: None,
            zookeeper_tls_cert_file: None,
            zookeeper_tls_key_file: None,
        }
    }
}

impl LockSettings {
    /// The files the ZooKeeper lock's TLS and SASL keys name.
    pub fn zookeeper_security_files(&self) -> ZkSecurityFiles {
        ZkSecurityFiles {
            jaas_file: self.zookeeper_jaas_file.clone(),
            jaas_section: self.zookeeper_jaas_section.clone(),
            tls_ca_file: self.zookeeper_tls_ca_file.clone(),
            tls_cert_file: self.zookeeper_tls_cert_file.clone(),
            tls_key_file: self.zookeeper_tls_key_file.clone(),
        }
    }
}

impl LockSettings {
    /// The lock options, or why they are incomplete. `None` when no provider was chosen. A
    /// ZooKeeper lock without `zookeeper_lock_key` is the table's `hoodie.table.name` node, as
    /// for Hudi's writers (filled in when the lock is taken: `LockOptions::for_table`), never
    /// the name the table is registered under.
    pub fn options(&self) -> Result<Option<LockOptions>, String> {
        let Some(provider) = self.provider.as_deref() else {
            return Ok(None);
        };
        let provider = match provider {
            "none" => LockProvider::None,
            "filesystem" => LockProvider::FileSystem {
                dir: RelPath::parse(&self.filesystem_dir)
                    .map_err(|e| format!("lock.filesystem_dir: {e}"))?,
                expire: self.filesystem_expire,
            },
            "storage" => {
                let c = StorageLockConfig {
                    path: RelPath::parse(&self.storage_path)
                        .map_err(|e| format!("lock.storage_path: {e}"))?,
                    validity: self.storage_validity,
                    renew_interval: self.storage_renew_interval,
                };
                c.validate().map_err(|e| format!("lock.storage_*: {e}"))?;
                LockProvider::Storage(c)
            }
            "zookeeper" => {
                let (tls, sasl) = self
                    .zookeeper_security_files()
                    .load()
                    .map_err(|e| format!("lock.zookeeper_*: {e}"))?;
                let c = ZkLockConfig {
                    connect: self
                        .zookeeper_url
                        .clone()
                        .ok_or("lock.zookeeper_url is required with provider = \"zookeeper\"")?,
                    base_path: self.zookeeper_base_path.clone().ok_or(
                        "lock.zookeeper_base_path is required with provider = \"zookeeper\"",
                    )?,
                    // None: the table's hoodie.table.name, filled in when the lock is taken
                    // (the writers' node, whatever name the table is registered under).
                    lock_key: self.zookeeper_lock_key.clone().unwrap_or_default(),
                    session_timeout: self.zookeeper_session_timeout,
                    connection_timeout: self.zookeeper_connection_timeout,
                    tls,
                    sasl,
                };
                c.validate().map_err(|e| format!("lock.zookeeper_*: {e}"))?;
                LockProvider::ZooKeeper(c)
            }
            other => {
                return Err(format!(
                    "lock.provider: `{other}` is not one of storage, filesystem, zookeeper, none"
                ))
            }
        };
        Ok(Some(LockOptions {
            provider,
            timeout: self.timeout,
            retry_interval: Duration::from_millis(500),
        }))
    }
}

/// The ZooKeeper session and node of a `zookeeper` cluster's membership, as validated from the
/// configuration ([`Config::zookeeper_membership`]).
#[derive(Debug, Clone)]
pub struct ZkMembershipSettings {
    /// The ensemble, its timeouts, TLS and SASL.
    pub connect: ZkConnect,
    /// The node the replicas register under.
    pub path: String,
}

impl Config {
    /// The membership this configuration describes: `cluster.zookeeper_url` (else
    /// `[defaults.lock] zookeeper_url`), `[defaults.lock]`'s TLS, SASL and connection timeout,
    /// and `cluster.zookeeper_session_timeout`. Errors name the setting to fix.
    pub fn zookeeper_membership(&self) -> Result<ZkMembershipSettings, String> {
        let lock = &self.defaults.lock;
        let url = self
            .cluster
            .zookeeper_url
            .clone()
            .or_else(|| lock.zookeeper_url.clone())
            .ok_or("cluster.mode = \"zookeeper\" needs cluster.zookeeper_url or [defaults.lock] zookeeper_url")?;
        let (tls, sasl) = lock
            .zookeeper_security_files()
            .load()
            .map_err(|e| format!("lock.zookeeper_* (the cluster's session uses them): {e}"))?;
        Ok(ZkMembershipSettings {
            connect: ZkConnect {
                connect: url,
                session_timeout: self.cluster.zookeeper_session_timeout,
                connection_timeout: lock.zookeeper_connection_timeout,
                tls,
                sasl,
            },
            path: self.cluster.zookeeper_path.clone(),
        })
    }
}
