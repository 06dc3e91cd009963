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
use hudi_keeper_core::protocol::lock::{
    storage_lock, LockOptions, LockProvider, StorageLockConfig, ZkLockConfig,
};
use hudi_keeper_core::storage::{RelPath, StorageOptions};
use serde::{Deserialize, Deserializer, Serialize};

use crate::cli::{parse_duration, parse_lock_expire};

/// The default config file, relative to the working directory.
pub const DEFAULT_PATH: &str = "config/hudi-keeper.toml";

fn de_duration<'de, D: Deserializer<'de>>(d: D) -> Result<Duration, D::Error> {
    #[derive(Deserialize)]
    #[serde(untagged)]
    enum Raw {
        Text(String),
        Secs(u64),
    }
    match Raw::deserialize(d)? {
        Raw::Text(s) => parse_duration(&s).map_err(serde::de::Error::custom),
        Raw::Secs(n) => Ok(Duration::from_secs(n)),
    }
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
        Raw::Minutes(n) => Ok(Duration::from_secs(n.saturating_mul(60))),
    }
}

fn de_opt_duration<'de, D: Deserializer<'de>>(d: D) -> Result<Option<Duration>, D::Error> {
    de_duration(d).map(Some)
}

fn ser_duration<S: serde::Serializer>(d: &Duration, s: S) -> Result<S::Ok, S::Error> {
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
}

/// `[server]`.
#[derive(Debug, Clone, Deserialize, Serialize)]
#[serde(deny_unknown_fields, default)]
pub struct ServerConfig {
    /// Where the HTTP server listens.
    pub listen: SocketAddr,
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
}

impl Default for ServerConfig {
    fn default() -> Self {
        Self {
            listen: SocketAddr::from(([127, 0, 0, 1], 9464)),
            auth_token: None,
            state_dir: PathBuf::from("hudi-keeper-state"),
            max_concurrent_polls: 16,
            halt_after_failures: 5,
            max_backoff: Duration::from_secs(600),
            shutdown_grace: Duration::from_secs(30),
            poll_timeout: Duration::from_secs(120),
            mutation_timeout: Duration::from_secs(600),
            max_body_bytes: 64 * 1024,
        }
    }
}

/// What the daemon does with failed writes of a table.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum PolicySetting {
    /// Writers with heartbeats: roll back instants whose heartbeat expired (and, on a table
    /// known to have LAZY writers, old pending writes without heartbeat file).
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
        }
    }
}

impl LockSettings {
    /// The lock options for a table named `table_name` (for the ZooKeeper key default), or why
    /// they are incomplete. `None` when no provider was chosen.
    pub fn options(&self, table_name: &str) -> Result<Option<LockOptions>, String> {
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
                let c = ZkLockConfig {
                    connect: self
                        .zookeeper_url
                        .clone()
                        .ok_or("lock.zookeeper_url is required with provider = \"zookeeper\"")?,
                    base_path: self.zookeeper_base_path.clone().ok_or(
                        "lock.zookeeper_base_path is required with provider = \"zookeeper\"",
                    )?,
                    lock_key: self
                        .zookeeper_lock_key
                        .clone()
                        .unwrap_or_else(|| table_name.to_string()),
                    session_timeout: self.zookeeper_session_timeout,
                    connection_timeout: self.zookeeper_connection_timeout,
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
            .options(t)
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
                    k.starts_with("server__") || k.starts_with("defaults__")
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
        if let Some(t) = &self.server.auth_token {
            if t.len() < 16 {
                bail!("server.auth_token must be at least 16 characters");
            }
        }
        let mut seen = std::collections::BTreeSet::new();
        for t in &self.tables {
            if !seen.insert(&t.name) {
                bail!("tables: the name `{}` is used twice", t.name);
            }
            self.defaults.resolve(t).map_err(|e| anyhow::anyhow!(e))?;
        }
        Ok(())
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
}
