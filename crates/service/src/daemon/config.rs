//! The daemon's configuration: built-in defaults < a TOML file < `HUDI_KEEPER_…` environment
//! variables (`__` separates levels: `HUDI_KEEPER_SERVER__LISTEN=0.0.0.0:9464`).
//!
//! Unknown keys and invalid values fail at start with the key named. Every table resolves to a
//! [`TableSettings`]: the `[defaults]` with the table's own overrides on top (a table's `lock`
//! section replaces the default one as a whole, so one provider's options never mix with
//! another's).

use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::time::Duration;

use anyhow::{bail, Context};
use figment::providers::{Env, Format, Toml};
use figment::Figment;
use hudi_keeper_core::protocol::detect::FailedWritesPolicy;
use hudi_keeper_core::protocol::heartbeat::HeartbeatPolicy;
use hudi_keeper_core::protocol::lock::zk_client::ZkConnect;
use hudi_keeper_core::protocol::lock::{
    storage_lock, LockOptions, LockProvider, StorageLockConfig, ZkLockConfig, ZkSecurityFiles,
};
use hudi_keeper_core::storage::{RelPath, StorageOptions};
use serde::{Deserialize, Deserializer, Serialize};

use crate::duration::{parse_duration, parse_lock_expire, MAX_DURATION};

/// The default config file, relative to the working directory.
pub const DEFAULT_PATH: &str = "config/hudi-keeper.toml";

pub(super) fn de_duration<'de, D: Deserializer<'de>>(d: D) -> Result<Duration, D::Error> {
    #[derive(Deserialize)]
    #[serde(untagged)]
    enum Raw {
        Text(String),
        Secs(u64),
    }
    match Raw::deserialize(d)? {
        Raw::Text(s) => parse_duration(&s).map_err(serde::de::Error::custom),
        Raw::Secs(n) => within_limit(Duration::from_secs(n), &format!("{n}")),
    }
}

/// A bare number is held to the limit a duration with a unit is (`crate::duration`): a longer one
/// would overflow the clock arithmetic of the polls (`Instant + d` panics).
fn within_limit<E: serde::de::Error>(d: Duration, given: &str) -> Result<Duration, E> {
    if d > MAX_DURATION {
        return Err(E::custom(format!(
            "`{given}` is longer than the limit of 100 years"
        )));
    }
    Ok(d)
}

/// `lock.filesystem_expire`: a bare number (a TOML integer or a string of digits) is minutes, as
/// Hudi reads `hoodie.write.lock.filesystem.expire`; a value with a unit keeps it.
fn de_lock_expire<'de, D: Deserializer<'de>>(d: D) -> Result<Duration, D::Error> {
    #[derive(Deserialize)]
    #[serde(untagged)]
    enum Raw {
        Text(String),
        Minutes(u64),
    }
    match Raw::deserialize(d)? {
        Raw::Text(s) => parse_lock_expire(&s).map_err(serde::de::Error::custom),
        Raw::Minutes(n) => within_limit(
            Duration::from_secs(n.saturating_mul(60)),
            &format!("{n} minutes"),
        ),
    }
}

fn de_opt_duration<'de, D: Deserializer<'de>>(d: D) -> Result<Option<Duration>, D::Error> {
    de_duration(d).map(Some)
}

pub(super) fn ser_duration<S: serde::Serializer>(d: &Duration, s: S) -> Result<S::Ok, S::Error> {
    s.serialize_str(&format!("{}ms", d.as_millis()))
}

fn ser_opt_duration<S: serde::Serializer>(d: &Option<Duration>, s: S) -> Result<S::Ok, S::Error> {
    match d {
        Some(d) => ser_duration(d, s),
        None => s.serialize_none(),
    }
}

/// The whole configuration.
#[derive(Debug, Clone, Default, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct Config {
    /// The HTTP server and process-wide settings.
    #[serde(default)]
    pub server: ServerConfig,
    /// Settings every table gets unless it overrides them.
    #[serde(default)]
    pub defaults: Defaults,
    /// The tables registered by configuration.
    #[serde(default)]
    pub tables: Vec<TableEntry>,
    /// Replicas sharing the tables (`docs/operations.md`, "Several replicas").
    #[serde(default)]
    pub cluster: super::cluster::ClusterConfig,
}

/// Connection slots of the probe listener (`server.probe_listen`): kubelet's probes and a
/// few Prometheus servers.
pub const PROBE_MAX_CONNECTIONS: usize = 32;

/// How long a client of the probe listener may take to send its request or take the response.
pub const PROBE_CLIENT_TIMEOUT: Duration = Duration::from_secs(5);

/// `[server]`.
#[derive(Debug, Clone, Deserialize, Serialize)]
#[serde(deny_unknown_fields, default)]
pub struct ServerConfig {
    /// Where the HTTP server listens.
    pub listen: SocketAddr,
    /// A second listener for probes and scrapes only (`/healthz`, `/readyz`, `/metrics`), with
    /// its own connection slots ([`PROBE_MAX_CONNECTIONS`]) and a short client timeout: clients
    /// of the API, however many, cannot starve the probes. Unset: none (the probes are served on
    /// `listen` with the API).
    pub probe_listen: Option<SocketAddr>,
    /// `/metrics` scrapes served at once, on both listeners; more are answered 503 with
    /// `Retry-After`. A scrape streams its text part by part, so each costs about the owned
    /// tables' names plus one part, whatever the number of tables.
    pub max_concurrent_scrapes: usize,
    /// The tables' series in `/metrics`: `per_table` (one per table, the default) or
    /// `aggregate` (one per family over all tables: a fleet's choice; BENCHMARKS.md has what each
    /// costs at 100,000 tables).
    pub table_metrics: super::metrics::TableSeries,
    /// The bearer token mutating endpoints require; without one they are off.
    #[serde(skip_serializing)]
    pub auth_token: Option<String>,
    /// Where tables registered through the API are kept across restarts.
    pub state_dir: PathBuf,
    /// Polls running at once, over all tables.
    pub max_concurrent_polls: usize,
    /// Consecutive failed polls after which a table is halted (until resumed through the API).
    pub halt_after_failures: u32,
    /// The longest wait between polls of a failing table (backoff doubles up to it).
    #[serde(deserialize_with = "de_duration", serialize_with = "ser_duration")]
    pub max_backoff: Duration,
    /// How long shutdown waits for running polls and changes to stop at a safe point and
    /// release their locks (then they are abandoned); also how long a change past
    /// `mutation_timeout` gets to reach a safe point.
    #[serde(deserialize_with = "de_duration", serialize_with = "ser_duration")]
    pub shutdown_grace: Duration,
    /// The longest a poll's reads (open, timeline, heartbeats) may take; a later poll counts as
    /// failed (and backs off) and frees its slot for other tables.
    #[serde(deserialize_with = "de_duration", serialize_with = "ser_duration")]
    pub poll_timeout: Duration,
    /// The longest a change (a rollback, restore or savepoint, automatic or through the API)
    /// may run before it is stopped at its next safe point (a failure; a rerun resumes it).
    #[serde(deserialize_with = "de_duration", serialize_with = "ser_duration")]
    pub mutation_timeout: Duration,
    /// The largest request body the API accepts, in bytes.
    pub max_body_bytes: usize,
    /// URI prefixes under which `POST /api/v1/tables` may register tables (a prefix ends at a
    /// `/`: `s3://b/t` allows `s3://b/t/x`, not `s3://b/t2`). Empty: the API registers no table.
    /// Tables of the config file are not bound by it.
    pub allowed_table_uris: Vec<String>,
    /// Let `POST /api/v1/tables` give a table a lock or policy weaker than `[defaults]` (see
    /// [`Config::check_api_entry`]). Off: such a registration is refused.
    pub api_may_weaken_safety: bool,
    /// HTTP connections open at once; more wait (in the listen backlog) until one closes.
    pub max_connections: usize,
    /// API requests being served at once (`/healthz`, `/readyz` and `/metrics` not counted);
    /// more are answered 503 with `Retry-After`.
    pub max_concurrent_requests: usize,
    /// Tables `POST /api/v1/tables` may hold registered at once (those kept but not restored at
    /// start count too); beyond it a registration is answered 409 until one is deleted. Each
    /// is a table to poll and a file in `state_dir`, so a holder of the token cannot grow the
    /// daemon's work and state without end. 0: the API registers no table. Tables kept from
    /// before are restored at start even above it.
    pub max_api_tables: usize,
    /// A client must send its request headers (also the next request on a kept-alive
    /// connection), then its body, each within this; and take each part of a response within it.
    #[serde(deserialize_with = "de_duration", serialize_with = "ser_duration")]
    pub client_timeout: Duration,
}

impl Default for ServerConfig {
    fn default() -> Self {
        Self {
            listen: SocketAddr::from(([127, 0, 0, 1], 9464)),
            probe_listen: None,
            max_concurrent_scrapes: 4,
            table_metrics: super::metrics::TableSeries::PerTable,
            auth_token: None,
            state_dir: PathBuf::from("hudi-keeper-state"),
            max_concurrent_polls: 16,
            halt_after_failures: 5,
            max_backoff: Duration::from_secs(600),
            shutdown_grace: Duration::from_secs(30),
            poll_timeout: Duration::from_secs(120),
            mutation_timeout: Duration::from_secs(600),
            max_body_bytes: 64 * 1024,
            allowed_table_uris: Vec::new(),
            api_may_weaken_safety: false,
            max_connections: 256,
            max_concurrent_requests: 64,
            max_api_tables: 1000,
            client_timeout: Duration::from_secs(15),
        }
    }
}

/// What the daemon does with failed writes of a table.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum PolicySetting {
    /// Writers with heartbeats: roll back instants whose heartbeat expired (and, with
    /// `assume_lazy_writers`, old pending writes without heartbeat file).
    Lazy,
    /// One writer without heartbeats: roll back a pending write once a newer write started.
    Eager,
    /// Watch and report only; never change the table.
    Observe,
}

impl PolicySetting {
    /// The detection policy (`observe` judges as LAZY does).
    pub fn detection(self) -> FailedWritesPolicy {
        match self {
            PolicySetting::Eager => FailedWritesPolicy::Eager,
            PolicySetting::Lazy | PolicySetting::Observe => FailedWritesPolicy::Lazy,
        }
    }

    /// Lower-case name.
    pub fn as_str(self) -> &'static str {
        match self {
            PolicySetting::Lazy => "lazy",
            PolicySetting::Eager => "eager",
            PolicySetting::Observe => "observe",
        }
    }
}

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

/// `[defaults]`.
#[derive(Debug, Clone, Deserialize, Serialize)]
#[serde(deny_unknown_fields, default)]
pub struct Defaults {
    /// How often each table is polled.
    #[serde(deserialize_with = "de_duration", serialize_with = "ser_duration")]
    pub poll_interval: Duration,
    /// `lazy`, `eager` or `observe`.
    pub failed_writes_policy: PolicySetting,
    /// The writers' `hoodie.client.heartbeat.interval_in_ms`.
    #[serde(deserialize_with = "de_duration", serialize_with = "ser_duration")]
    pub heartbeat_interval: Duration,
    /// The writers' `hoodie.client.heartbeat.tolerable.misses`.
    pub heartbeat_tolerable_misses: u32,
    /// A pending instant without a heartbeat is failed only once older than this.
    #[serde(deserialize_with = "de_duration", serialize_with = "ser_duration")]
    pub min_instant_age: Duration,
    /// Allowance between this clock and the store's.
    #[serde(deserialize_with = "de_duration", serialize_with = "ser_duration")]
    pub clock_skew_margin: Duration,
    /// The operator states every writer is LAZY: a pending write without heartbeat file is
    /// failed once older than `min_instant_age`, even before the daemon saw a heartbeat file.
    pub assume_lazy_writers: bool,
    /// No write runs longer than this: an older pending write without heartbeat file is failed
    /// (under either policy). Unset: never by age alone.
    #[serde(
        deserialize_with = "de_opt_duration",
        serialize_with = "ser_opt_duration"
    )]
    pub max_write_duration: Option<Duration>,
    /// The table lock.
    pub lock: LockSettings,
    /// `object_store` options (credentials, endpoint, region).
    pub storage_options: BTreeMap<String, String>,
    /// Deletes in flight at once per rollback.
    pub delete_concurrency: usize,
    /// Cross-check markers against a listing of the table.
    pub listing_cross_check: bool,
}

impl Default for Defaults {
    fn default() -> Self {
        Self {
            poll_interval: Duration::from_secs(30),
            failed_writes_policy: PolicySetting::Lazy,
            heartbeat_interval: Duration::from_secs(60),
            heartbeat_tolerable_misses: 2,
            min_instant_age: Duration::from_secs(600),
            clock_skew_margin: Duration::from_secs(5),
            assume_lazy_writers: false,
            max_write_duration: None,
            lock: LockSettings::default(),
            storage_options: BTreeMap::new(),
            delete_concurrency: 64,
            listing_cross_check: true,
        }
    }
}

/// One `[[tables]]` entry (also the body of `POST /api/v1/tables`).
#[derive(Debug, Clone, Deserialize, Serialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct TableEntry {
    /// A unique name (letters, digits, `-`, `_`, `.`).
    pub name: String,
    /// The table URI.
    pub uri: String,
    /// Make the demo table at `uri` (a local folder) if it is missing.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub demo: bool,
    /// Overrides of `[defaults]`.
    #[serde(
        default,
        deserialize_with = "de_opt_duration",
        serialize_with = "ser_opt_duration",
        skip_serializing_if = "Option::is_none"
    )]
    pub poll_interval: Option<Duration>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub failed_writes_policy: Option<PolicySetting>,
    #[serde(
        default,
        deserialize_with = "de_opt_duration",
        serialize_with = "ser_opt_duration",
        skip_serializing_if = "Option::is_none"
    )]
    pub heartbeat_interval: Option<Duration>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub heartbeat_tolerable_misses: Option<u32>,
    #[serde(
        default,
        deserialize_with = "de_opt_duration",
        serialize_with = "ser_opt_duration",
        skip_serializing_if = "Option::is_none"
    )]
    pub min_instant_age: Option<Duration>,
    #[serde(
        default,
        deserialize_with = "de_opt_duration",
        serialize_with = "ser_opt_duration",
        skip_serializing_if = "Option::is_none"
    )]
    pub clock_skew_margin: Option<Duration>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub assume_lazy_writers: Option<bool>,
    #[serde(
        default,
        deserialize_with = "de_opt_duration",
        serialize_with = "ser_opt_duration",
        skip_serializing_if = "Option::is_none"
    )]
    pub max_write_duration: Option<Duration>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub lock: Option<Box<LockSettings>>,
    /// Merged over the default storage options.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub storage_options: BTreeMap<String, String>,
}

/// Everything one table's polls need, resolved. Tables with the same settings share one.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct TableSettings {
    pub poll_interval_ms: u64,
    pub failed_writes_policy: PolicySetting,
    #[serde(skip)]
    pub heartbeat: HeartbeatPolicy,
    /// The operator states every writer is LAZY.
    pub assume_lazy_writers: bool,
    /// No write runs longer than this (ms).
    pub max_write_duration_ms: Option<u64>,
    #[serde(skip)]
    pub lock: Option<LockOptions>,
    pub lock_provider: String,
    #[serde(skip)]
    pub storage_options: StorageOptions,
    pub delete_concurrency: usize,
    pub listing_cross_check: bool,
}

/// The shortest `poll_interval` a registration through the API may give its table: a holder of
/// the token may not have the daemon poll a store (and write a log line at each failed poll)
/// many times a second. The config file's tables may poll faster (down to 100ms).
pub const API_MIN_POLL_INTERVAL: Duration = Duration::from_secs(1);

/// Why `what` (a table's name or URI) cannot be taken: it holds a control character, which would
/// let it write lines of its own into text logs (a line break, a carriage return) or rewrite the
/// terminal (an escape). The text is shown escaped, never as given.
pub fn control_character(what: &str, text: &str) -> Option<String> {
    let c = text.chars().find(|c| c.is_control())?;
    Some(format!(
        "{what} \"{}\" holds a control character (U+{:04X}); table names and URIs may hold none",
        text.escape_debug(),
        c as u32
    ))
}

/// Whether `name` can name a table (it appears in URLs and metric labels).
pub fn valid_name(name: &str) -> bool {
    !name.is_empty()
        && name.len() <= 128
        && name != "."
        && name != ".."
        && name
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.'))
}

impl Defaults {
    /// Resolve `entry` against these defaults; the error names the table and the key.
    pub fn resolve(&self, entry: &TableEntry) -> Result<TableSettings, String> {
        let t = &entry.name;
        if let Some(e) = control_character("table name", t) {
            return Err(e);
        }
        if let Some(e) = control_character(&format!("table `{t}`: uri"), &entry.uri) {
            return Err(e);
        }
        if !valid_name(t) {
            return Err(format!(
                "table name `{t}`: use 1 to 128 letters, digits, `-`, `_` or `.` (not `.` or `..` alone)"
            ));
        }
        if entry.uri.trim().is_empty() {
            return Err(format!("table `{t}`: uri is empty"));
        }
        let policy = entry
            .failed_writes_policy
            .unwrap_or(self.failed_writes_policy);
        let lock_settings = entry.lock.as_deref().unwrap_or(&self.lock);
        let lock = lock_settings
            .options()
            .map_err(|e| format!("table `{t}`: {e}"))?;
        if lock.is_none() && policy != PolicySetting::Observe {
            return Err(format!(
                "table `{t}`: lock.provider is not set. The daemon never changes a table without a lock decision: set lock.provider to the provider the writers use (storage, filesystem, zookeeper) or none (no writer runs), or set failed_writes_policy = \"observe\""
            ));
        }
        let poll_interval = entry.poll_interval.unwrap_or(self.poll_interval);
        if poll_interval < Duration::from_millis(100) {
            return Err(format!("table `{t}`: poll_interval must be at least 100ms"));
        }
        let heartbeat = HeartbeatPolicy {
            interval: entry.heartbeat_interval.unwrap_or(self.heartbeat_interval),
            tolerable_misses: entry
                .heartbeat_tolerable_misses
                .unwrap_or(self.heartbeat_tolerable_misses),
            min_instant_age: entry.min_instant_age.unwrap_or(self.min_instant_age),
            clock_skew_margin: entry.clock_skew_margin.unwrap_or(self.clock_skew_margin),
        };
        if heartbeat.interval.is_zero() {
            return Err(format!("table `{t}`: heartbeat_interval must be positive"));
        }
        let max_write_duration = entry.max_write_duration.or(self.max_write_duration);
        if max_write_duration.is_some_and(|d| d.is_zero()) {
            return Err(format!(
                "table `{t}`: max_write_duration must be positive (leave it unset for none)"
            ));
        }
        let mut opts = self.storage_options.clone();
        opts.extend(entry.storage_options.clone());
        if self.delete_concurrency == 0 {
            return Err("defaults.delete_concurrency must be positive".into());
        }
        Ok(TableSettings {
            poll_interval_ms: poll_interval.as_millis() as u64,
            failed_writes_policy: policy,
            heartbeat,
            assume_lazy_writers: entry
                .assume_lazy_writers
                .unwrap_or(self.assume_lazy_writers),
            max_write_duration_ms: max_write_duration.map(|d| d.as_millis() as u64),
            lock_provider: lock
                .as_ref()
                .map(|l| l.provider.name().to_string())
                .unwrap_or_else(|| "unset".into()),
            lock,
            storage_options: StorageOptions::from_pairs(opts),
            delete_concurrency: self.delete_concurrency,
            listing_cross_check: self.listing_cross_check,
        })
    }
}

impl Config {
    /// Load `path` (which must exist when `required`), then the environment.
    pub fn load(path: &Path, required: bool) -> anyhow::Result<Self> {
        let mut figment = Figment::new();
        if path.exists() {
            figment = figment.merge(Toml::file_exact(path));
        } else if required {
            bail!("the config file {} does not exist", path.display());
        }
        figment = figment.merge(
            Env::prefixed("HUDI_KEEPER_")
                .filter(|k| {
                    let k = k.as_str().to_ascii_lowercase();
                    k.starts_with("server__")
                        || k.starts_with("defaults__")
                        || k.starts_with("cluster__")
                })
                .split("__"),
        );
        let config: Config = figment
            .extract()
            .map_err(|e| anyhow::anyhow!(describe(e)))
            .with_context(|| format!("invalid configuration ({})", path.display()))?;
        config.validate()?;
        Ok(config)
    }

    /// Checks across keys: unique names, every table resolvable.
    pub fn validate(&self) -> anyhow::Result<()> {
        if self.server.max_concurrent_polls == 0 {
            bail!("server.max_concurrent_polls must be positive");
        }
        if self.server.halt_after_failures == 0 {
            bail!("server.halt_after_failures must be positive");
        }
        if self.server.poll_timeout.is_zero() || self.server.mutation_timeout.is_zero() {
            bail!("server.poll_timeout and server.mutation_timeout must be positive");
        }
        if self.server.probe_listen == Some(self.server.listen) && self.server.listen.port() != 0 {
            bail!("server.probe_listen must differ from server.listen");
        }
        if let Some(t) = &self.server.auth_token {
            if t.len() < 16 {
                bail!("server.auth_token must be at least 16 characters");
            }
        }
        if self.server.max_connections == 0
            || self.server.max_concurrent_scrapes == 0
            || self.server.max_concurrent_requests == 0
            || self.server.max_body_bytes == 0
        {
            bail!("server.max_connections, server.max_concurrent_scrapes, server.max_concurrent_requests and server.max_body_bytes must be positive");
        }
        if self.server.client_timeout.is_zero() {
            bail!("server.client_timeout must be positive");
        }
        for p in &self.server.allowed_table_uris {
            Location::parse(p)
                .map_err(|e| anyhow::anyhow!("server.allowed_table_uris: `{p}`: {e}"))?;
        }
        // The replica's index may come from its pod name; the rest is checked here.
        let shared = match self.cluster.mode {
            super::cluster::ClusterMode::None => {
                super::cluster::Cluster::from_config(&self.cluster, None)
                    .map_err(|e| anyhow::anyhow!(e))?;
                false
            }
            super::cluster::ClusterMode::Static => self.cluster.replicas.unwrap_or(0) > 1,
            super::cluster::ClusterMode::Zookeeper => {
                // The member id may come from the pod's name at start: a stand-in checks the rest.
                let stand_in = self.cluster.member.is_none().then_some("pod-0");
                super::cluster::Cluster::from_config(&self.cluster, stand_in)
                    .map_err(|e| anyhow::anyhow!(e))?;
                self.zookeeper_membership()
                    .map_err(|e| anyhow::anyhow!(e))?;
                true
            }
        };
        let mut seen = std::collections::BTreeSet::new();
        for t in &self.tables {
            if !seen.insert(&t.name) {
                bail!("tables: the name `{}` is used twice", t.name.escape_debug());
            }
            let settings = self.defaults.resolve(t).map_err(|e| anyhow::anyhow!(e))?;
            // Two replicas may briefly both poll a table (a replica restarting with another
            // count, a slow rollout): only the table's lock keeps them from racing.
            if shared && settings.lock_provider == "none" {
                bail!(
                    "tables: `{}` has lock.provider = \"none\", which replicas sharing tables (cluster.mode = \"static\" or \"zookeeper\") may not use: give it the writers' lock",
                    t.name
                );
            }
        }
        Ok(())
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

/// Where a table URI points, reduced for comparison: the scheme (`s3a` read as `s3`, every Azure
/// scheme as `azure`, `file` for a local path), the bucket or host as written (an Azure container
/// with its account, see [`azure_container`]), and the path's segments (empty ones dropped, so
/// `a//b/` is `a/b`). The path is taken literally, as the store reads it: `%2e%2e` is not `..`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Location {
    scheme: String,
    authority: String,
    segments: Vec<String>,
}

impl std::fmt::Display for Location {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "{}://{}/{}",
            self.scheme,
            self.authority,
            self.segments.join("/")
        )
    }
}

impl Location {
    /// Parse a table URI or a prefix: an absolute local path, `file:`, or `scheme://bucket/path`.
    /// Refused: a relative local path, a `.` or `..` segment, a bucket or host with anything but
    /// letters, digits, `-`, `.`, `_` (and `@` in Azure's `container@account`).
    pub fn parse(uri: &str) -> Result<Location, String> {
        let t = uri.trim();
        if t.is_empty() {
            return Err("the URI is empty".into());
        }
        let (scheme, authority, path) = if let Some(rest) = t.strip_prefix("file:") {
            // As the store opens it: `file:///p`, `file://localhost/p`, `file:/p`.
            let p = match rest.strip_prefix("//") {
                Some(r) => r.strip_prefix("localhost").unwrap_or(r),
                None => rest,
            };
            ("file".to_string(), String::new(), p)
        } else if let Some((scheme, rest)) = t.split_once("://") {
            let scheme = scheme.to_ascii_lowercase();
            let (authority, path) = rest.split_at(rest.find('/').unwrap_or(rest.len()));
            let azure = matches!(scheme.as_str(), "az" | "azure" | "abfs" | "abfss" | "adl");
            if authority.is_empty()
                || !authority.chars().all(|c| {
                    c.is_ascii_alphanumeric() || matches!(c, '-' | '.' | '_') || (azure && c == '@')
                })
            {
                return Err(format!(
                    "`{authority}` is not a plain bucket, container or host name"
                ));
            }
            let (scheme, authority) = match scheme.as_str() {
                "s3a" => ("s3".to_string(), authority.to_string()),
                _ if azure => ("azure".to_string(), azure_container(&scheme, authority)?),
                _ => (scheme, authority.to_string()),
            };
            (scheme, authority, path)
        } else {
            ("file".to_string(), String::new(), t)
        };
        if scheme == "file" && !path.starts_with('/') {
            return Err(format!("`{t}` is not an absolute path"));
        }
        let mut segments = Vec::new();
        for s in path.split('/') {
            match s {
                "" => {}
                "." | ".." => return Err(format!("`{t}` has a `{s}` segment")),
                s => segments.push(s.to_string()),
            }
        }
        Ok(Location {
            scheme,
            authority,
            segments,
        })
    }

    /// Where a registered table's URI points, to find a second registration of the same table:
    /// as [`Location::parse`], but a relative local path is read from the working folder, and a
    /// local path is resolved (links, `..`; one that does not exist yet, as far as it exists).
    /// `None` when it cannot be read.
    pub fn of_table(uri: &str) -> Option<Location> {
        let t = uri.trim();
        let local = match t.strip_prefix("file:") {
            Some(rest) => Some(match rest.strip_prefix("//") {
                Some(r) => r.strip_prefix("localhost").unwrap_or(r),
                None => rest,
            }),
            None => (!t.contains("://")).then_some(t),
        };
        match local {
            Some(p) => {
                let p = std::path::absolute(p).ok()?;
                if let Ok(real) = std::fs::canonicalize(&p) {
                    return Location::parse(real.to_str()?).ok();
                }
                // Not there (yet): where its deepest existing folder leads.
                let at = Location::parse(p.to_str()?).ok()?;
                Some(at.resolved().unwrap_or(at))
            }
            None => Location::parse(t).ok(),
        }
    }

    /// Where a local path leads: its deepest part that exists, resolved (links, `..`), with the
    /// rest appended as written (none of it exists, so no link lies in it). `None` for another
    /// scheme, or when it cannot be told: a link that leads nowhere, a folder that cannot be
    /// read.
    fn resolved(&self) -> Option<Location> {
        if self.scheme != "file" {
            return None;
        }
        for k in (0..=self.segments.len()).rev() {
            let p = format!("/{}", self.segments[..k].join("/"));
            match std::fs::symlink_metadata(&p) {
                Ok(_) => {
                    let real = std::fs::canonicalize(&p).ok()?;
                    let mut text = real.to_str()?.trim_end_matches('/').to_string();
                    for s in &self.segments[k..] {
                        text.push('/');
                        text.push_str(s);
                    }
                    if text.is_empty() {
                        text.push('/');
                    }
                    return Location::parse(&text).ok();
                }
                Err(e) if e.kind() == std::io::ErrorKind::NotFound => continue,
                Err(_) => return None,
            }
        }
        None
    }

    /// Whether this is `prefix` or lies under it, for `server.allowed_table_uris`: the bucket,
    /// container and account exactly as the prefix names them (the store addresses the bucket
    /// as written: `s3://MyBucket` is not `s3://mybucket`), a prefix ending at a `/`.
    pub fn is_allowed_under(&self, prefix: &Location) -> bool {
        self.scheme == prefix.scheme
            && self.authority == prefix.authority
            && self.segments.starts_with(&prefix.segments)
    }

    /// Whether this may be `other` or lie under it, to find a second registration of a table:
    /// as [`Location::is_allowed_under`], but buckets in any case, and an Azure container in the
    /// default account (`az://c`) as the same container in any named account (it may be the
    /// default one).
    pub fn is_under(&self, other: &Location) -> bool {
        let same_authority = self.authority.eq_ignore_ascii_case(&other.authority)
            || (self.scheme == "azure" && {
                let container = |a: &str| a.split('@').next().unwrap_or_default().to_string();
                (!self.authority.contains('@') || !other.authority.contains('@'))
                    && container(&self.authority) == container(&other.authority)
            });
        self.scheme == other.scheme && same_authority && self.segments.starts_with(&other.segments)
    }
}

/// The container (and account) an Azure URI names, as object_store 0.14 reads it: `az://c`,
/// `azure://c`, `adl://c`, `abfs://c`, `abfss://c` name container `c` of the configured account
/// (`c`); `az`, `abfs` and `abfss` with `c@account.dfs.core.windows.net` (or
/// `blob.core.windows.net`) name container `c` of `account` (`c@account`, the account in lower
/// case as DNS reads it). Other forms (Fabric, private endpoints, `adl`/`azure` with an account)
/// are refused: they cannot be compared.
fn azure_container(scheme: &str, authority: &str) -> Result<String, String> {
    let plain = |s: &str| {
        !s.is_empty()
            && s.chars()
                .all(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '_'))
    };
    match authority.split_once('@') {
        None if plain(authority) => Ok(authority.to_string()),
        None => Err(format!("`{authority}` is not a plain Azure container name")),
        Some((container, host)) => {
            let host = host.to_ascii_lowercase();
            let account = host
                .strip_suffix(".dfs.core.windows.net")
                .or_else(|| host.strip_suffix(".blob.core.windows.net"));
            match account {
                Some(account)
                    if matches!(scheme, "az" | "abfs" | "abfss")
                        && plain(container)
                        && !account.is_empty()
                        && account.chars().all(|c| c.is_ascii_alphanumeric()) =>
                {
                    Ok(format!("{container}@{account}"))
                }
                _ => Err(format!(
                    "`{authority}` is not `container@account.dfs.core.windows.net` (or `blob.core.windows.net`) of an {scheme}:// URI; give the table as az://container/path or abfss://container@account.dfs.core.windows.net/path"
                )),
            }
        }
    }
}

/// Why `POST /api/v1/tables` may not register a table.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ApiRefusal {
    /// Beyond what the operator allowed the API (403).
    Forbidden(String),
    /// Not acceptable as given (422).
    Invalid(String),
}

/// How a storage option given through the API must read.
#[derive(Debug, Clone, Copy)]
enum OptionValue {
    /// A region's name: letters, digits and `-` (it goes into host names).
    Region,
    /// `sha256`.
    Checksum,
    /// A duration such as `30s` or `500ms`.
    Duration,
}

/// The storage options `POST /api/v1/tables` may set. None says where requests go or with
/// which credentials: endpoints, credentials and their sources (token files, STS, web identity,
/// the metadata service), proxies, plain HTTP, TLS checks, the bucket or account, addressing
/// style, encryption keys and conditional-write modes come only from the config file or the
/// environment.
pub const API_STORAGE_OPTIONS: &[&str] = &[
    "aws_region",
    "aws_default_region",
    "aws_unsigned_payload",
    "aws_checksum_algorithm",
    "aws_timeout",
    "aws_connect_timeout",
    "google_timeout",
    "google_connect_timeout",
    "azure_timeout",
    "azure_connect_timeout",
];

fn api_option_rule(key: &str) -> Option<Option<OptionValue>> {
    if !API_STORAGE_OPTIONS.contains(&key) {
        return None;
    }
    Some(match key {
        "aws_region" | "aws_default_region" => Some(OptionValue::Region),
        "aws_checksum_algorithm" => Some(OptionValue::Checksum),
        k if k.ends_with("timeout") => Some(OptionValue::Duration),
        // `true` or `false`.
        _ => None,
    })
}

/// Whether the storage options of an API registration are all on [`API_STORAGE_OPTIONS`], with
/// values of the expected form; the error names the first key that is not.
pub fn check_api_storage_options(options: &BTreeMap<String, String>) -> Result<(), String> {
    for (k, v) in options {
        let Some(rule) = api_option_rule(k) else {
            return Err(format!(
                "storage option `{k}` cannot be set through the API: endpoints, credentials and their sources, token files, proxies and the like come only from the config file or the environment (the API accepts {})",
                API_STORAGE_OPTIONS.join(", ")
            ));
        };
        let ok = match rule {
            None => matches!(v.as_str(), "true" | "false"),
            Some(OptionValue::Region) => {
                (1..=32).contains(&v.len())
                    && v.chars()
                        .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-')
            }
            Some(OptionValue::Checksum) => v.eq_ignore_ascii_case("sha256"),
            Some(OptionValue::Duration) => {
                let digits = v.chars().take_while(|c| c.is_ascii_digit()).count();
                (1..=9).contains(&digits) && matches!(&v[digits..], "ms" | "s" | "m")
            }
        };
        if !ok {
            let expected = match rule {
                None => "true or false",
                Some(OptionValue::Region) => "a region name (a-z, 0-9, -)",
                Some(OptionValue::Checksum) => "sha256",
                Some(OptionValue::Duration) => "a duration such as 30s or 500ms",
            };
            return Err(format!("storage option `{k}`: `{v}` is not {expected}"));
        }
    }
    Ok(())
}

impl PolicySetting {
    /// How much a policy keeps the daemon from changing a table: `observe` (never) over `lazy`
    /// (a heartbeat that expired) over `eager` (a newer write started).
    fn caution(self) -> u8 {
        match self {
            PolicySetting::Eager => 0,
            PolicySetting::Lazy => 1,
            PolicySetting::Observe => 2,
        }
    }
}

fn show(d: Duration) -> String {
    format!("{}ms", d.as_millis())
}

impl Defaults {
    /// Where `entry` would judge or lock its table less carefully than these defaults, one
    /// sentence per key: a less cautious policy, shorter heartbeat, age or skew thresholds,
    /// fewer tolerated misses, `assume_lazy_writers` or a `max_write_duration` the defaults do
    /// not have (or a shorter one), a lock other than `[defaults.lock]` (only its `timeout` may
    /// differ). Whatever the table's policy.
    pub fn weaker(&self, entry: &TableEntry) -> Vec<String> {
        let mut w = Vec::new();
        if let Some(p) = entry.failed_writes_policy {
            if p.caution() < self.failed_writes_policy.caution() {
                w.push(format!(
                    "failed_writes_policy `{}` is less cautious than the default `{}`",
                    p.as_str(),
                    self.failed_writes_policy.as_str()
                ));
            }
        }
        for (key, given, default) in [
            (
                "heartbeat_interval",
                entry.heartbeat_interval,
                self.heartbeat_interval,
            ),
            (
                "min_instant_age",
                entry.min_instant_age,
                self.min_instant_age,
            ),
            (
                "clock_skew_margin",
                entry.clock_skew_margin,
                self.clock_skew_margin,
            ),
        ] {
            if let Some(d) = given.filter(|d| *d < default) {
                w.push(format!(
                    "{key} {} is shorter than the default {}",
                    show(d),
                    show(default)
                ));
            }
        }
        if let Some(m) = entry
            .heartbeat_tolerable_misses
            .filter(|m| *m < self.heartbeat_tolerable_misses)
        {
            w.push(format!(
                "heartbeat_tolerable_misses {m} is fewer than the default {}",
                self.heartbeat_tolerable_misses
            ));
        }
        if entry.assume_lazy_writers == Some(true) && !self.assume_lazy_writers {
            w.push("assume_lazy_writers = true where the default is false".into());
        }
        match (entry.max_write_duration, self.max_write_duration) {
            (Some(d), None) => w.push(format!(
                "max_write_duration {} where the default has none",
                show(d)
            )),
            (Some(d), Some(default)) if d < default => w.push(format!(
                "max_write_duration {} is shorter than the default {}",
                show(d),
                show(default)
            )),
            _ => {}
        }
        if let Some(lock) = &entry.lock {
            let mut same = (**lock).clone();
            same.timeout = self.lock.timeout;
            if same != self.lock {
                w.push(
                    "lock differs from [defaults.lock] (through the API only lock.timeout may be set; leave lock out to use the default)"
                        .into(),
                );
            }
        }
        w
    }
}

impl Config {
    /// Whether `POST /api/v1/tables` may register `entry`: its URI is under
    /// `server.allowed_table_uris` (and, for a local path that exists, so is where it leads), its
    /// storage options are on [`API_STORAGE_OPTIONS`], and, unless
    /// `server.api_may_weaken_safety`, nothing in it is weaker than `[defaults]`
    /// ([`Defaults::weaker`]). A second registration of a table is found by the daemon.
    pub fn check_api_entry(&self, entry: &TableEntry) -> Result<(), ApiRefusal> {
        let t = &entry.name;
        // First, before either is shown in a message or a log line.
        if let Some(e) = control_character("table name", t) {
            return Err(ApiRefusal::Invalid(e));
        }
        if let Some(e) = control_character(&format!("table `{t}`: uri"), &entry.uri) {
            return Err(ApiRefusal::Invalid(e));
        }
        if !valid_name(t) {
            return Err(ApiRefusal::Invalid(format!(
                "table name `{t}`: use 1 to 128 letters, digits, `-`, `_` or `.` (not `.` or `..` alone)"
            )));
        }
        if entry.demo {
            return Err(ApiRefusal::Invalid(
                "demo tables come from the config file only".into(),
            ));
        }
        if let Some(every) = entry.poll_interval.filter(|p| *p < API_MIN_POLL_INTERVAL) {
            return Err(ApiRefusal::Invalid(format!(
                "table `{t}`: poll_interval {} is shorter than {}, the least a registration through the API may give",
                show(every),
                show(API_MIN_POLL_INTERVAL)
            )));
        }
        self.check_api_uri(&entry.uri).map_err(|e| match e {
            ApiRefusal::Forbidden(e) => ApiRefusal::Forbidden(format!("table `{t}`: {e}")),
            ApiRefusal::Invalid(e) => ApiRefusal::Invalid(format!("table `{t}`: {e}")),
        })?;
        check_api_storage_options(&entry.storage_options)
            .map_err(|e| ApiRefusal::Invalid(format!("table `{t}`: {e}")))?;
        if let Some(lock) = &entry.lock {
            // Files on the daemon's host are the operator's to name, whatever may be weakened.
            if lock.zookeeper_security_files() != self.defaults.lock.zookeeper_security_files() {
                return Err(ApiRefusal::Forbidden(format!(
                    "table `{t}`: lock.zookeeper_jaas_* and lock.zookeeper_tls_* name files on the daemon's host and come from the config file ([defaults.lock]) only"
                )));
            }
        }
        if !self.server.api_may_weaken_safety {
            let weaker = self.defaults.weaker(entry);
            if !weaker.is_empty() {
                return Err(ApiRefusal::Forbidden(format!(
                    "table `{t}`: {}. An API registration may not weaken what [defaults] sets (server.api_may_weaken_safety = true allows it)",
                    weaker.join("; ")
                )));
            }
        }
        Ok(())
    }
}

impl Config {
    /// Whether the table at `uri` may be opened now: for an API table (`from_api`), the
    /// registration's checks of where it is ([`Config::check_api_entry`]) made again, on where
    /// a local path leads now (a folder may have been swapped for a link since). A config
    /// table: always.
    pub fn check_table_location(&self, uri: &str, from_api: bool) -> Result<(), String> {
        if !from_api {
            return Ok(());
        }
        self.check_api_uri(uri).map_err(|e| match e {
            ApiRefusal::Forbidden(e) | ApiRefusal::Invalid(e) => {
                format!("not opened, its location is no longer one the API may register: {e}")
            }
        })
    }

    /// Where an API table may be: under `server.allowed_table_uris`, not inside a `.hoodie`
    /// folder; a local path judged also by where it leads (its deepest existing folder
    /// resolved), against where the prefixes lead.
    fn check_api_uri(&self, uri: &str) -> Result<(), ApiRefusal> {
        let allowed = &self.server.allowed_table_uris;
        if allowed.is_empty() {
            return Err(ApiRefusal::Forbidden(
                "the API registers no table: server.allowed_table_uris is empty (list the URI prefixes it may register under)".into(),
            ));
        }
        let at = Location::parse(uri).map_err(|e| ApiRefusal::Invalid(format!("uri: {e}")))?;
        let in_hoodie = |l: &Location| l.segments.iter().any(|s| s == ".hoodie");
        let metadata = || {
            // A table's own folder: its metadata table is no table to watch on its own.
            ApiRefusal::Invalid(format!(
                "`{uri}` is inside a table's .hoodie folder; give the table's base path"
            ))
        };
        if in_hoodie(&at) {
            return Err(metadata());
        }
        let prefixes: Vec<Location> = allowed
            .iter()
            .filter_map(|p| Location::parse(p).ok())
            .collect();
        let outside = |how: &str| {
            ApiRefusal::Forbidden(format!(
                "`{uri}`{how} is not under server.allowed_table_uris ({})",
                allowed.join(", ")
            ))
        };
        if !prefixes.iter().any(|p| at.is_allowed_under(p)) {
            return Err(outside(""));
        }
        if at.scheme == "file" {
            // Where a local path leads, against where the prefixes lead.
            let Some(real) = at.resolved() else {
                return Err(outside(
                    " leads through a link to nothing or a folder that cannot be read, so where it leads",
                ));
            };
            if !prefixes
                .iter()
                .any(|p| real.is_allowed_under(&p.resolved().unwrap_or_else(|| p.clone())))
            {
                return Err(outside(&format!(" leads to `{real}`, which")));
            }
            if in_hoodie(&real) {
                return Err(metadata());
            }
        }
        Ok(())
    }
}

/// The folders where a table holding an API table's URI would have its base path (each one's
/// `.hoodie/hoodie.properties` is looked for): from the allowed prefix the URI lies under down
/// to the URI's parent, outermost first.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum EnclosingFolders {
    /// Local folders: absolute, where the URI leads (links resolved).
    Local(Vec<PathBuf>),
    /// Folders of an object store: the store as the URI names it (`scheme://bucket`), and each
    /// folder's path in it, as the URI spells it (`""`: the bucket's root).
    Store { store: String, folders: Vec<String> },
}

impl Config {
    /// Where a table around the API table at `uri` would be ([`EnclosingFolders`]): every
    /// folder from the prefix of `server.allowed_table_uris` it lies under (the shortest, when
    /// several do) down to its parent; nothing above the prefix is looked at. `None` when `uri`
    /// is not one the API may register ([`Config::check_api_entry`] says why).
    pub fn enclosing_folders(&self, uri: &str) -> Option<EnclosingFolders> {
        let at = Location::parse(uri).ok()?;
        let prefixes = self
            .server
            .allowed_table_uris
            .iter()
            .filter_map(|p| Location::parse(p).ok());
        if at.scheme == "file" {
            let real = at.resolved()?;
            let base = prefixes
                .map(|p| p.resolved().unwrap_or(p))
                .filter(|p| real.is_allowed_under(p))
                .map(|p| p.segments.len())
                .min()?;
            let folders = (base..real.segments.len())
                .map(|k| PathBuf::from(format!("/{}", real.segments[..k].join("/"))))
                .collect();
            return Some(EnclosingFolders::Local(folders));
        }
        let base = prefixes
            .filter(|p| at.is_allowed_under(p))
            .map(|p| p.segments.len())
            .min()?;
        // The store as the URI names it (`s3a://b`, `abfss://c@account…`), to be opened as the
        // table is; the path's segments are the location's, as written.
        let (scheme, rest) = uri.trim().split_once("://")?;
        let authority = &rest[..rest.find('/').unwrap_or(rest.len())];
        Some(EnclosingFolders::Store {
            store: format!("{scheme}://{authority}"),
            folders: (base..at.segments.len())
                .map(|k| at.segments[..k].join("/"))
                .collect(),
        })
    }
}

/// Every error figment found, each with its key.
fn describe(e: figment::Error) -> String {
    e.into_iter()
        .map(|e| {
            let key = if e.path.is_empty() {
                String::new()
            } else {
                format!("`{}`: ", e.path.join("."))
            };
            format!("{key}{}", e.kind)
        })
        .collect::<Vec<_>>()
        .join("; ")
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(toml: &str) -> anyhow::Result<Config> {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("c.toml");
        std::fs::write(&p, toml).unwrap();
        Config::load(&p, true)
    }

    #[test]
    fn defaults_apply_and_tables_override_them() {
        let c = parse(
            r#"
[defaults]
poll_interval = "10s"
[defaults.lock]
provider = "filesystem"
[[tables]]
name = "a"
uri = "/tmp/a"
[[tables]]
name = "b"
uri = "/tmp/b"
poll_interval = "2s"
failed_writes_policy = "observe"
heartbeat_interval = 5
"#,
        )
        .unwrap();
        let a = c.defaults.resolve(&c.tables[0]).unwrap();
        let b = c.defaults.resolve(&c.tables[1]).unwrap();
        assert_eq!(a.poll_interval_ms, 10_000);
        assert_eq!(a.lock_provider, "filesystem");
        assert_eq!(b.poll_interval_ms, 2_000);
        assert_eq!(b.failed_writes_policy, PolicySetting::Observe);
        assert_eq!(b.heartbeat.interval, Duration::from_secs(5));
        assert_eq!(c.server.listen.to_string(), "127.0.0.1:9464");
    }

    #[test]
    fn the_writer_policy_keys_default_off_and_tables_override_them() {
        let c = parse(
            r#"
[defaults]
max_write_duration = "6h"
[defaults.lock]
provider = "filesystem"
[[tables]]
name = "a"
uri = "/tmp/a"
[[tables]]
name = "b"
uri = "/tmp/b"
assume_lazy_writers = true
max_write_duration = "90m"
"#,
        )
        .unwrap();
        let a = c.defaults.resolve(&c.tables[0]).unwrap();
        let b = c.defaults.resolve(&c.tables[1]).unwrap();
        assert!(!a.assume_lazy_writers);
        assert_eq!(a.max_write_duration_ms, Some(6 * 3_600_000));
        assert!(b.assume_lazy_writers);
        assert_eq!(b.max_write_duration_ms, Some(90 * 60_000));
        let none =
            parse("[[tables]]\nname = \"t\"\nuri = \"/t\"\nfailed_writes_policy = \"observe\"\n")
                .unwrap();
        let t = none.defaults.resolve(&none.tables[0]).unwrap();
        assert!(!t.assume_lazy_writers);
        assert_eq!(t.max_write_duration_ms, None);
        let err = parse("[defaults]\nmax_write_duration = \"0s\"\n[[tables]]\nname = \"t\"\nuri = \"/t\"\nfailed_writes_policy = \"observe\"\n")
            .unwrap_err();
        assert!(format!("{err:#}").contains("max_write_duration"), "{err:#}");
    }

    #[test]
    fn bare_numbers_are_held_to_the_duration_limit_as_durations_with_a_unit_are() {
        for toml in [
            "[server]\npoll_timeout = 9223372036854775807\n",
            "[defaults.lock]\nprovider = \"filesystem\"\nfilesystem_expire = 9223372036854775807\n",
        ] {
            let err = format!("{:#}", parse(toml).unwrap_err());
            assert!(err.contains("longer than the limit of 100 years"), "{err}");
        }
        assert!(parse("[server]\npoll_timeout = 30\n").is_ok());
    }

    #[test]
    fn unknown_keys_fail_with_the_key_named() {
        let err = parse("[server]\nlisten = \"127.0.0.1:1\"\nlisen = 3\n").unwrap_err();
        let msg = format!("{err:#}");
        assert!(msg.contains("lisen"), "{msg}");
        let err = parse("[defaults]\npoll_interval = \"soon\"\n").unwrap_err();
        let msg = format!("{err:#}");
        assert!(msg.contains("poll_interval"), "{msg}");
        assert!(msg.contains("not a duration"), "{msg}");
    }

    #[test]
    fn a_table_that_may_be_changed_needs_a_lock_decision() {
        let err = parse("[[tables]]\nname = \"t\"\nuri = \"/tmp/t\"\n").unwrap_err();
        assert!(
            format!("{err:#}").contains("lock.provider is not set"),
            "{err:#}"
        );
        parse("[[tables]]\nname = \"t\"\nuri = \"/tmp/t\"\nfailed_writes_policy = \"observe\"\n")
            .unwrap();
    }

    #[test]
    fn duplicate_names_and_bad_lock_options_are_refused() {
        let err = parse(
            "[defaults.lock]\nprovider = \"none\"\n[[tables]]\nname = \"t\"\nuri = \"/a\"\n[[tables]]\nname = \"t\"\nuri = \"/b\"\n",
        )
        .unwrap_err();
        assert!(format!("{err:#}").contains("used twice"), "{err:#}");
        let err = parse(
            "[[tables]]\nname = \"t\"\nuri = \"/a\"\n[tables.lock]\nprovider = \"zookeeper\"\n",
        )
        .unwrap_err();
        assert!(format!("{err:#}").contains("zookeeper_url"), "{err:#}");
    }

    #[test]
    fn the_environment_overrides_the_file() {
        // Each test process has its own environment; the variable names are unique to this test.
        std::env::set_var("HUDI_KEEPER_SERVER__HALT_AFTER_FAILURES", "9");
        let c = parse("[server]\nhalt_after_failures = 3\n").unwrap();
        std::env::remove_var("HUDI_KEEPER_SERVER__HALT_AFTER_FAILURES");
        assert_eq!(c.server.halt_after_failures, 9);
    }

    #[test]
    fn every_shipped_config_file_is_valid() {
        let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
        for f in [
            "config/hudi-keeper.toml",
            "deploy/image/hudi-keeper.toml",
            "deploy/kubernetes/base/hudi-keeper.toml",
            "deploy/kubernetes/overlays/production/hudi-keeper.toml",
            "deploy/kubernetes/examples/spark-driver-sidecar/hudi-keeper.toml",
        ] {
            Config::load(&root.join(f), true).unwrap_or_else(|e| panic!("{f}: {e:#}"));
        }
    }

    #[test]
    fn a_zookeeper_lock_key_defaults_to_the_tables_hoodie_name_not_its_registered_name() {
        let c = parse(
            "[defaults.lock]\nprovider = \"zookeeper\"\nzookeeper_url = \"127.0.0.1:2181\"\nzookeeper_base_path = \"/hudi/locks\"\n[[tables]]\nname = \"orders-api\"\nuri = \"/a\"\n[[tables]]\nname = \"b\"\nuri = \"/b\"\n[tables.lock]\nprovider = \"zookeeper\"\nzookeeper_url = \"127.0.0.1:2181\"\nzookeeper_base_path = \"/hudi/locks\"\nzookeeper_lock_key = \"orders\"\n",
        )
        .unwrap();
        let key = |i: usize| match c.defaults.resolve(&c.tables[i]).unwrap().lock {
            Some(LockOptions {
                provider: LockProvider::ZooKeeper(z),
                ..
            }) => z.lock_key,
            other => panic!("{other:?}"),
        };
        // Empty: the table's hoodie.table.name when the lock is taken (LockOptions::for_table).
        assert_eq!(key(0), "");
        assert_eq!(key(1), "orders");
    }

    #[test]
    fn a_bare_file_system_lock_expiry_is_minutes_as_in_hudi() {
        let c = parse(
            "[defaults.lock]\nprovider = \"filesystem\"\nfilesystem_expire = 10\n[[tables]]\nname = \"a\"\nuri = \"/a\"\n[[tables]]\nname = \"b\"\nuri = \"/b\"\n[tables.lock]\nprovider = \"filesystem\"\nfilesystem_expire = \"10\"\n[[tables]]\nname = \"c\"\nuri = \"/c\"\n[tables.lock]\nprovider = \"filesystem\"\nfilesystem_expire = \"90s\"\n",
        )
        .unwrap();
        let expire = |i: usize| match c.defaults.resolve(&c.tables[i]).unwrap().lock {
            Some(LockOptions {
                provider: LockProvider::FileSystem { expire, .. },
                ..
            }) => expire,
            other => panic!("{other:?}"),
        };
        assert_eq!(expire(0), Duration::from_secs(600));
        assert_eq!(expire(1), Duration::from_secs(600));
        assert_eq!(expire(2), Duration::from_secs(90));
        // What the registry persists reads back the same.
        let lock = LockSettings {
            filesystem_expire: Duration::from_secs(600),
            ..Default::default()
        };
        let back: LockSettings =
            serde_json::from_str(&serde_json::to_string(&lock).unwrap()).unwrap();
        assert_eq!(back.filesystem_expire, Duration::from_secs(600));
    }

    fn loc(uri: &str) -> Location {
        Location::parse(uri).unwrap_or_else(|e| panic!("{uri}: {e}"))
    }

    #[test]
    fn a_location_compares_scheme_bucket_and_whole_segments() {
        let prefix = loc("s3://b/t");
        assert!(loc("s3://b/t").is_under(&prefix));
        assert!(loc("s3://b/t/").is_under(&prefix));
        assert!(loc("s3://b/t/x/y").is_under(&prefix));
        assert!(loc("s3a://b/t//x").is_under(&prefix));
        assert!(!loc("s3://b/t2").is_under(&prefix));
        assert!(!loc("s3://b/").is_under(&prefix));
        assert!(!loc("s3://c/t/x").is_under(&prefix));
        assert!(!loc("gs://b/t/x").is_under(&prefix));
        // Literal text, as the store reads it.
        assert!(!loc("s3://b/%74/x").is_under(&prefix));
        assert!(loc("s3://b/t/%2e%2e/x").is_under(&prefix));
        assert!(loc("s3://b/").is_under(&loc("s3://b")));
        // Local paths, however spelled.
        let local = loc("/data/tables/");
        for p in [
            "/data/tables/t",
            "file:///data/tables/t",
            "file:/data/tables/t",
            "file://localhost/data/tables/t",
        ] {
            assert!(loc(p).is_under(&local), "{p}");
        }
        assert!(!loc("/data/tables2/t").is_under(&local));
        assert!(loc("abfss://c@acct.dfs.core.windows.net/t/x")
            .is_under(&loc("abfss://c@acct.dfs.core.windows.net/t")));
        for bad in [
            "",
            "relative/t",
            "/data/../etc",
            "/data/./t",
            "s3://b/t/../u",
            "file:relative",
            "s3://user@b/t",
            "s3://b:9000/t",
            "s3:///t",
            "s3://b?x/t",
        ] {
            assert!(Location::parse(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn a_location_of_a_table_resolves_local_paths() {
        let dir = tempfile::tempdir().unwrap();
        let real = std::fs::canonicalize(dir.path()).unwrap();
        std::fs::create_dir_all(real.join("t")).unwrap();
        std::fs::create_dir_all(real.join("x")).unwrap();
        std::os::unix::fs::symlink(real.join("t"), real.join("link")).unwrap();
        let t = Location::of_table(real.join("t").to_str().unwrap()).unwrap();
        assert_eq!(
            Location::of_table(real.join("link").to_str().unwrap()),
            Some(t.clone())
        );
        assert_eq!(
            Location::of_table(&format!("file://{}/x/../t/", real.display())),
            Some(t)
        );
        // Below a link, where nothing exists yet: where it will be.
        assert_eq!(
            Location::of_table(real.join("link/missing").to_str().unwrap()),
            Location::of_table(real.join("t/missing").to_str().unwrap())
        );
        assert!(Location::of_table("relative/missing").is_some());
        assert_eq!(Location::of_table("s3://b/t"), Some(loc("s3://b/t/")));
    }

    #[test]
    fn api_storage_options_are_an_allow_list_with_checked_values() {
        let check = |k: &str, v: &str| {
            check_api_storage_options(&BTreeMap::from([(k.to_string(), v.to_string())]))
        };
        for (k, v) in [
            ("aws_region", "eu-west-1"),
            ("aws_default_region", "us-gov-west-1"),
            ("aws_unsigned_payload", "true"),
            ("aws_checksum_algorithm", "SHA256"),
            ("aws_timeout", "30s"),
            ("google_connect_timeout", "500ms"),
            ("azure_timeout", "2m"),
        ] {
            check(k, v).unwrap_or_else(|e| panic!("{k}={v}: {e}"));
        }
        for (k, v) in [
            ("aws_region", "a.evil.com/"),
            ("aws_region", "EU-WEST-1"),
            ("aws_region", ""),
            ("aws_unsigned_payload", "yes"),
            ("aws_checksum_algorithm", "crc32"),
            ("aws_timeout", "30"),
            ("aws_timeout", "1h"),
            ("aws_timeout", "9999999999s"),
        ] {
            let e = check(k, v).unwrap_err();
            assert!(e.contains(k), "{e}");
        }
        for k in [
            "aws_endpoint",
            "aws_endpoint_url_sts",
            "aws_web_identity_token_file",
            "aws_allow_http",
            "region",
            "AWS_REGION",
            "",
        ] {
            let e = check(k, "x").unwrap_err();
            assert!(e.contains(&format!("`{k}`")), "{e}");
        }
    }

    #[test]
    fn weaker_than_the_defaults_is_judged_key_by_key() {
        let c = parse(
            "[defaults]\nfailed_writes_policy = \"lazy\"\nmax_write_duration = \"6h\"\n[defaults.lock]\nprovider = \"filesystem\"\n",
        )
        .unwrap();
        let entry = |json: serde_json::Value| -> TableEntry {
            let mut v = serde_json::json!({"name": "t", "uri": "/t"});
            for (k, x) in json.as_object().unwrap() {
                v[k] = x.clone();
            }
            serde_json::from_value(v).unwrap()
        };
        let weaker = |json| c.defaults.weaker(&entry(json));
        assert!(weaker(serde_json::json!({})).is_empty());
        for same_or_stronger in [
            serde_json::json!({"failed_writes_policy": "lazy"}),
            serde_json::json!({"failed_writes_policy": "observe"}),
            serde_json::json!({"min_instant_age": "10m", "heartbeat_interval": "2m"}),
            serde_json::json!({"heartbeat_tolerable_misses": 5, "clock_skew_margin": "1m"}),
            serde_json::json!({"assume_lazy_writers": false, "max_write_duration": "12h"}),
            serde_json::json!({"lock": {"provider": "filesystem", "timeout": "1s"}}),
            serde_json::json!({"poll_interval": "1s"}),
        ] {
            assert!(
                weaker(same_or_stronger.clone()).is_empty(),
                "{same_or_stronger}"
            );
        }
        for (json, key) in [
            (
                serde_json::json!({"failed_writes_policy": "eager"}),
                "failed_writes_policy",
            ),
            (
                serde_json::json!({"min_instant_age": "9m"}),
                "min_instant_age",
            ),
            (
                serde_json::json!({"heartbeat_interval": "59s"}),
                "heartbeat_interval",
            ),
            (
                serde_json::json!({"clock_skew_margin": "1s"}),
                "clock_skew_margin",
            ),
            (
                serde_json::json!({"heartbeat_tolerable_misses": 1}),
                "heartbeat_tolerable_misses",
            ),
            (
                serde_json::json!({"assume_lazy_writers": true}),
                "assume_lazy_writers",
            ),
            (
                serde_json::json!({"max_write_duration": "5h"}),
                "max_write_duration",
            ),
            (serde_json::json!({"lock": {"provider": "none"}}), "lock"),
            (
                serde_json::json!({"lock": {"provider": "filesystem", "filesystem_expire": "10m"}}),
                "lock",
            ),
        ] {
            let w = weaker(json.clone());
            assert_eq!(w.len(), 1, "{json}: {w:?}");
            assert!(w[0].contains(key), "{json}: {w:?}");
        }
        // Eager defaults: lazy and observe are more cautious.
        let eager = parse(
            "[defaults]\nfailed_writes_policy = \"eager\"\n[defaults.lock]\nprovider = \"none\"\n",
        )
        .unwrap();
        assert!(eager
            .defaults
            .weaker(&entry(serde_json::json!({"failed_writes_policy": "lazy"})))
            .is_empty());
        // No max_write_duration by default: setting one is weaker.
        let none = parse("[defaults.lock]\nprovider = \"none\"\n").unwrap();
        assert_eq!(
            none.defaults
                .weaker(&entry(serde_json::json!({"max_write_duration": "100d"})))
                .len(),
            1
        );
    }

    #[test]
    fn the_api_may_register_only_under_the_allowed_prefixes() {
        let mut c = parse("[defaults]\nfailed_writes_policy = \"observe\"\n").unwrap();
        let entry = |uri: &str| TableEntry {
            name: "t".into(),
            uri: uri.into(),
            ..serde_json::from_str(r#"{"name": "x", "uri": "x"}"#).unwrap()
        };
        assert!(matches!(
            c.check_api_entry(&entry("s3://b/t/x")),
            Err(ApiRefusal::Forbidden(e)) if e.contains("allowed_table_uris")
        ));
        c.server.allowed_table_uris = vec!["s3://b/t/".into()];
        c.check_api_entry(&entry("s3://b/t/x")).unwrap();
        assert!(matches!(
            c.check_api_entry(&entry("s3://b/t2")),
            Err(ApiRefusal::Forbidden(_))
        ));
        assert!(matches!(
            c.check_api_entry(&entry("s3://b/t/../x")),
            Err(ApiRefusal::Invalid(_))
        ));
        assert!(matches!(
            c.check_api_entry(&entry("s3://b/t/x/.hoodie/metadata")),
            Err(ApiRefusal::Invalid(_))
        ));
        let err = parse("[server]\nallowed_table_uris = [\"s3://b/../x\"]\n").unwrap_err();
        assert!(format!("{err:#}").contains("allowed_table_uris"), "{err:#}");
        let err = parse("[server]\nmax_connections = 0\n").unwrap_err();
        assert!(format!("{err:#}").contains("max_connections"), "{err:#}");
    }

    /// A config allowing the API `allowed` (observe tables, so no lock is needed).
    fn allowing(allowed: &[&str]) -> Config {
        let mut c = parse("[defaults]\nfailed_writes_policy = \"observe\"\n").unwrap();
        c.server.allowed_table_uris = allowed.iter().map(|a| a.to_string()).collect();
        c
    }

    fn api_entry(uri: &str) -> TableEntry {
        TableEntry {
            name: "t".into(),
            uri: uri.into(),
            ..serde_json::from_str(r#"{"name": "x", "uri": "x"}"#).unwrap()
        }
    }

    #[test]
    fn a_local_path_is_judged_by_where_its_deepest_existing_folder_leads() {
        let dir = tempfile::tempdir().unwrap();
        let real = std::fs::canonicalize(dir.path()).unwrap();
        let (allowed, outside) = (real.join("allowed"), real.join("outside"));
        std::fs::create_dir_all(outside.join("t/.hoodie")).unwrap();
        std::fs::create_dir_all(allowed.join("t/.hoodie/metadata")).unwrap();
        // A link to a folder outside, and a link to a table's metadata table.
        std::os::unix::fs::symlink(&outside, allowed.join("out")).unwrap();
        std::os::unix::fs::symlink(allowed.join("t/.hoodie/metadata"), allowed.join("md")).unwrap();
        // A link to where nothing is yet.
        std::os::unix::fs::symlink(outside.join("later"), allowed.join("dangling")).unwrap();
        let c = allowing(&[&format!("{}/", allowed.display())]);
        let at = |p: &str| format!("{}/{p}", allowed.display());
        // Below a link, where the table does not exist yet: still outside.
        assert!(matches!(
            c.check_api_entry(&api_entry(&at("out/missing/t"))),
            Err(ApiRefusal::Forbidden(_))
        ));
        assert!(matches!(
            c.check_api_entry(&api_entry(&at("dangling"))),
            Err(ApiRefusal::Forbidden(_))
        ));
        // A link to a metadata table, or below it.
        for p in ["md", "md/x"] {
            assert!(
                matches!(
                    c.check_api_entry(&api_entry(&at(p))),
                    Err(ApiRefusal::Invalid(e)) if e.contains(".hoodie")
                ),
                "{p}"
            );
        }
        // A table not created yet, in a real folder inside: allowed.
        c.check_api_entry(&api_entry(&at("new/t"))).unwrap();
        c.check_api_entry(&api_entry(&at("t"))).unwrap();
    }

    #[test]
    fn an_api_table_is_checked_again_where_it_leads_when_it_is_opened() {
        let dir = tempfile::tempdir().unwrap();
        let real = std::fs::canonicalize(dir.path()).unwrap();
        let (allowed, outside) = (real.join("allowed"), real.join("outside"));
        std::fs::create_dir_all(allowed.join("t")).unwrap();
        std::fs::create_dir_all(outside.join("u/.hoodie/metadata")).unwrap();
        let c = allowing(&[&format!("{}/", allowed.display())]);
        let t = format!("{}/t", allowed.display());
        c.check_api_entry(&api_entry(&t)).unwrap();
        c.check_table_location(&t, true).unwrap();
        // The folder swapped for a link out of the allowed prefix after the registration.
        std::fs::remove_dir(allowed.join("t")).unwrap();
        std::os::unix::fs::symlink(outside.join("u"), allowed.join("t")).unwrap();
        let err = c.check_table_location(&t, true).unwrap_err();
        assert!(err.contains("allowed_table_uris"), "{err}");
        // Or for a link to a metadata table inside.
        std::fs::create_dir_all(allowed.join("v/.hoodie/metadata")).unwrap();
        std::fs::remove_file(allowed.join("t")).unwrap();
        std::os::unix::fs::symlink(allowed.join("v/.hoodie/metadata"), allowed.join("t")).unwrap();
        let err = c.check_table_location(&t, true).unwrap_err();
        assert!(err.contains(".hoodie"), "{err}");
        // A config table is the operator's: never checked.
        c.check_table_location(&t, false).unwrap();
    }

    #[test]
    fn a_bucket_is_allowed_only_as_written_in_the_prefix() {
        // The store addresses the bucket verbatim: `MyBucket` is another bucket.
        for (uri, prefix) in [
            ("s3://MyBucket/x", "s3://mybucket/"),
            ("s3a://MYBUCKET/x", "s3://mybucket/"),
            ("gs://MyBucket/x", "gs://mybucket/"),
            ("s3://mybucket/x", "s3://MyBucket/"),
        ] {
            assert!(!loc(uri).is_allowed_under(&loc(prefix)), "{uri}");
            assert!(
                matches!(
                    allowing(&[prefix]).check_api_entry(&api_entry(uri)),
                    Err(ApiRefusal::Forbidden(_))
                ),
                "{uri}"
            );
            // A second registration is still found however it is spelled.
            assert!(loc(uri).is_under(&loc(prefix)), "{uri}");
        }
        allowing(&["s3://mybucket/"])
            .check_api_entry(&api_entry("s3a://mybucket/x"))
            .unwrap();
    }

    #[test]
    fn azure_spellings_of_one_container_are_one_location() {
        // The container alone, in the default account (object_store's reading of each scheme).
        let short = loc("az://c/t");
        for u in ["azure://c/t", "adl://c/t", "abfs://c/t", "abfss://c//t/"] {
            assert_eq!(loc(u), short, "{u}");
        }
        // The container in a named account, through its dfs or blob host.
        let full = loc("abfss://c@acct.dfs.core.windows.net/t");
        for u in [
            "abfs://c@acct.blob.core.windows.net/t",
            "az://c@ACCT.dfs.core.windows.net/t",
            "abfss://c@acct.blob.core.windows.net//t/",
        ] {
            assert_eq!(loc(u), full, "{u}");
        }
        // A second registration: the default account may be that one.
        assert!(full.is_under(&short) && short.is_under(&full));
        assert!(loc("abfss://c@acct.dfs.core.windows.net/t/p").is_under(&short));
        assert!(!loc("abfss://c@other.dfs.core.windows.net/t").is_under(&full));
        assert!(!loc("abfss://d@acct.dfs.core.windows.net/t").is_under(&short));
        // Allowed: the account exactly as the prefix names it (or the default account).
        let named = allowing(&["abfss://c@acct.dfs.core.windows.net/"]);
        named
            .check_api_entry(&api_entry("az://c@acct.blob.core.windows.net/t"))
            .unwrap();
        let default = allowing(&["az://c/"]);
        default.check_api_entry(&api_entry("abfss://c/t")).unwrap();
        for (c, uri) in [
            (&named, "az://c/t"),
            (&named, "abfss://c@other.dfs.core.windows.net/t"),
            (&default, "abfss://c@acct.dfs.core.windows.net/t"),
        ] {
            assert!(
                matches!(
                    c.check_api_entry(&api_entry(uri)),
                    Err(ApiRefusal::Forbidden(_))
                ),
                "{uri}"
            );
        }
        // What object_store would not read as a container (or reads as another service).
        for bad in [
            "adl://c@acct.dfs.core.windows.net/t",
            "azure://c@acct.dfs.core.windows.net/t",
            "az://c.x/t",
            "abfss://c@acct.dfs.fabric.microsoft.com/t",
            "abfss://c@acct.example.com/t",
            "abfss://c@a.b.dfs.core.windows.net/t",
            "abfss://@acct.dfs.core.windows.net/t",
            "abfss://c@/t",
            "abfss://c@x@acct.dfs.core.windows.net/t",
        ] {
            assert!(Location::parse(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn table_names_must_be_url_and_label_safe() {
        assert!(valid_name("trips_v2.prod-1"));
        assert!(!valid_name("a/b"));
        assert!(!valid_name(""));
        assert!(!valid_name("a b"));
        // They would name the parent folder in URLs and state files.
        assert!(!valid_name("."));
        assert!(!valid_name(".."));
    }

    #[test]
    fn a_control_character_in_a_table_uri_or_name_is_refused_without_being_echoed() {
        // A line break in a config file's table: a forged log line at every poll otherwise.
        for uri in [
            "/data/t\\n2030-01-01T00:00:00Z  INFO FORGED",
            "/data/t\\r",
            "/data/t\\u001b[2K",
            "/data/t\\u0085",
        ] {
            let err = parse(&format!(
                "[defaults]\nfailed_writes_policy = \"observe\"\n[[tables]]\nname = \"t\"\nuri = \"{uri}\"\n"
            ))
            .unwrap_err();
            let msg = format!("{err:#}");
            assert!(msg.contains("control character"), "{msg}");
            assert!(!msg.chars().any(char::is_control), "{msg:?}");
        }
        // Through the API, the URI and the name alike.
        let c = allowing(&["/data/"]);
        let mut e = api_entry("/data/t\nFORGED");
        assert!(matches!(
            c.check_api_entry(&e),
            Err(ApiRefusal::Invalid(m)) if m.contains("control character") && !m.chars().any(char::is_control)
        ));
        e.uri = "/data/t".into();
        e.name = "t\nFORGED".into();
        assert!(matches!(
            c.check_api_entry(&e),
            Err(ApiRefusal::Invalid(m)) if m.contains("control character") && !m.chars().any(char::is_control)
        ));
    }

    #[test]
    fn an_api_table_is_polled_at_most_once_a_second() {
        let c = allowing(&["/data/"]);
        for every in ["100ms", "999ms"] {
            let e: TableEntry = serde_json::from_value(serde_json::json!(
                {"name": "t", "uri": "/data/t", "poll_interval": every}
            ))
            .unwrap();
            assert!(
                matches!(c.check_api_entry(&e), Err(ApiRefusal::Invalid(m)) if m.contains("poll_interval")),
                "{every}"
            );
        }
        let e: TableEntry = serde_json::from_value(serde_json::json!(
            {"name": "t", "uri": "/data/t", "poll_interval": "1s"}
        ))
        .unwrap();
        c.check_api_entry(&e).unwrap();
        // The config file's tables may poll faster (the operator's choice).
        parse("[defaults]\nfailed_writes_policy = \"observe\"\npoll_interval = \"100ms\"\n")
            .unwrap();
    }

    #[test]
    fn the_folders_a_table_around_an_api_table_would_be_in_stop_at_the_allowed_prefix() {
        let c = allowing(&["s3://b/tables/", "s3://b/tables/deep/", "az://c/"]);
        assert_eq!(
            c.enclosing_folders("s3a://b/tables/deep/t/dt=1"),
            Some(EnclosingFolders::Store {
                store: "s3a://b".into(),
                folders: vec![
                    "tables".into(),
                    "tables/deep".into(),
                    "tables/deep/t".into()
                ],
            })
        );
        assert_eq!(
            c.enclosing_folders("az://c/t"),
            Some(EnclosingFolders::Store {
                store: "az://c".into(),
                folders: vec!["".into()],
            })
        );
        assert_eq!(c.enclosing_folders("s3://other/tables/t"), None);
        let dir = tempfile::tempdir().unwrap();
        let real = std::fs::canonicalize(dir.path()).unwrap();
        std::fs::create_dir_all(real.join("allowed/t/p")).unwrap();
        std::os::unix::fs::symlink(real.join("allowed/t/p"), real.join("allowed/link")).unwrap();
        let c = allowing(&[real.join("allowed").to_str().unwrap()]);
        // Where a link leads.
        assert_eq!(
            c.enclosing_folders(real.join("allowed/link/x").to_str().unwrap()),
            Some(EnclosingFolders::Local(vec![
                real.join("allowed"),
                real.join("allowed/t"),
                real.join("allowed/t/p"),
            ]))
        );
    }

    #[test]
    fn api_registrations_are_capped_by_default() {
        let server = |toml: &str| serde_json::to_value(parse(toml).unwrap().server).unwrap();
        assert_eq!(server("")["max_api_tables"], 1000);
        // None at all: the API registers no table, whatever it may register where.
        assert_eq!(
            server("[server]\nmax_api_tables = 0\n")["max_api_tables"],
            0
        );
    }
}
