//! The configuration's schema (`[server]`, `[defaults]`, `[[tables]]`, `[cluster]`) and its
//! loading: built-in defaults < a TOML file < `HUDI_KEEPER_…` environment variables.

use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::time::Duration;

use anyhow::{bail, Context};
use figment::providers::{Env, Format, Toml};
use figment::Figment;
use hudi_keeper_core::protocol::detect::FailedWritesPolicy;
use hudi_keeper_core::protocol::heartbeat::HeartbeatPolicy;
use hudi_keeper_core::protocol::lock::LockOptions;
use hudi_keeper_core::storage::StorageOptions;
use serde::{Deserialize, Serialize};

use super::overrides::Setting;
use super::table_entries;
use super::{ConfigError, Location, LockSettings};
use crate::daemon::cluster;
use crate::duration::serde_helpers::{de_duration, ser_duration};

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
    pub cluster: cluster::ClusterConfig,
    /// Discovery sources: the tables they find are watched too (issue #34).
    #[serde(default)]
    pub discover: Vec<super::DiscoverSource>,
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
    pub table_metrics: TableSeries,
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
    /// Table audits running at once, over all tables (a fleet's audits queue for these slots,
    /// apart from the poll slots).
    pub max_concurrent_audits: usize,
    /// The longest one audit may run: then it stops (failed) and frees its slot, so that a
    /// table whose store hangs does not keep the others' audits waiting.
    #[serde(deserialize_with = "de_duration", serialize_with = "ser_duration")]
    pub audit_timeout: Duration,
}

impl Default for ServerConfig {
    fn default() -> Self {
        Self {
            listen: SocketAddr::from(([127, 0, 0, 1], 9464)),
            probe_listen: None,
            max_concurrent_scrapes: 4,
            table_metrics: TableSeries::PerTable,
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
            max_concurrent_audits: 1,
            audit_timeout: Duration::from_secs(3600),
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

per_table_settings! {
    /// `[defaults]`.
    #[derive(Debug, Clone, Deserialize, Serialize)]
    #[serde(deny_unknown_fields, default)]
    pub struct Defaults;

    /// One `[[tables]]` entry (also the body of `POST /api/v1/tables`): its own name and URI,
    /// then overrides of `[defaults]`, each unset unless given.
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
    }

    overridable {
        /// How often each table is polled while it is active: something pending at its last
        /// poll, or its timeline changed within `idle_after`.
        poll_interval: Duration = Duration::from_secs(30),
        /// How often an idle table is polled: nothing pending at its last poll and its timeline
        /// unchanged for `idle_after` (never more often than `poll_interval`); `0` polls every
        /// table at `poll_interval` always. A write that starts and dies between two idle polls
        /// is rolled back within this plus its heartbeat's expiry plus one poll.
        idle_poll_interval: Duration = Duration::from_secs(600),
        /// How long a table's timeline must stay unchanged, with nothing pending, before it is
        /// polled at `idle_poll_interval`.
        idle_after: Duration = Duration::from_secs(300),
        /// `lazy`, `eager` or `observe`.
        failed_writes_policy: PolicySetting = PolicySetting::Lazy,
        /// The writers' `hoodie.client.heartbeat.interval_in_ms`.
        heartbeat_interval: Duration = Duration::from_secs(60),
        /// The writers' `hoodie.client.heartbeat.tolerable.misses`.
        heartbeat_tolerable_misses: u32 = 2,
        /// A pending instant without a heartbeat is failed only once older than this.
        min_instant_age: Duration = Duration::from_secs(600),
        /// Allowance between this clock and the store's.
        clock_skew_margin: Duration = Duration::from_secs(5),
        /// The operator states every writer is LAZY: a pending write without heartbeat file is
        /// failed once older than `min_instant_age`, even before the daemon saw a heartbeat file.
        assume_lazy_writers: bool = false,
        /// No write runs longer than this: an older pending write without heartbeat file is
        /// failed (under either policy). Unset: never by age alone.
        max_write_duration: Option<Duration> = None,
        /// The writers run Hudi 1.2 with `hoodie.clustering.enable.expirations` (LAZY only): an
        /// expired clustering (heartbeat file expired, older than the threshold) is rolled back.
        clustering_expirations: bool = false,
        /// Their `hoodie.clustering.expiration.threshold.mins`.
        clustering_expiration_threshold: Duration = Duration::from_secs(3600),
        /// The table lock (a table's replaces the default one as a whole). Boxed: a table
        /// entry without one of its own (most of them) costs 8 bytes for it, not 360.
        lock: Box<LockSettings> = Box::default(),
        /// How often the table is audited in the background (read-only, off the poll path;
        /// `hudi-keeper audit`'s classes); `0` switches the scheduled audit off.
        audit_interval: Duration = Duration::from_secs(24 * 3600),
        /// The most object-store requests one audit may make (as counted in
        /// `hudi_keeper_object_store_requests_total`); an audit that needs more stops there
        /// and is reported cut short, its counts not taken for the table's.
        audit_max_requests: u32 = 100_000,
        /// How often the leftover guard checks the partitions that completed rollbacks on the
        /// active timeline touched, for files of the instants they undid (it also runs after
        /// each rollback the daemon makes); `0` switches the guard off.
        leftover_guard_interval: Duration = Duration::from_secs(3600),
        /// Deletes in flight at once per rollback (1 to [`MAX_DELETE_CONCURRENCY`]).
        delete_concurrency: usize = 64,
        /// Cross-check markers against a listing of the table.
        listing_cross_check: bool = true,
    }

    not overridable {
        /// `object_store` options (credentials, endpoint, region); a table's are merged over
        /// them key by key (its own `storage_options`, below).
        storage_options: BTreeMap<String, String> = BTreeMap::new(),
    }

    table only {
        /// Merged over the default storage options.
        #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
        pub storage_options: BTreeMap<String, String>,
    }
}

/// Everything one table's polls need, resolved. Tables with the same settings share one.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct TableSettings {
    pub poll_interval_ms: u64,
    /// Between polls of the table while idle (ms), longer than `poll_interval_ms`; `None`: the
    /// table is always polled at `poll_interval_ms`.
    pub idle_poll_interval_ms: Option<u64>,
    /// How long the timeline must stay unchanged, with nothing pending, before the table is
    /// idle (ms).
    pub idle_after_ms: u64,
    pub failed_writes_policy: PolicySetting,
    #[serde(skip)]
    pub heartbeat: HeartbeatPolicy,
    /// The operator states every writer is LAZY.
    pub assume_lazy_writers: bool,
    /// No write runs longer than this (ms).
    pub max_write_duration_ms: Option<u64>,
    /// Expired clusterings are rolled back once this old (ms): clustering expirations on.
    pub clustering_expiration_ms: Option<u64>,
    #[serde(skip)]
    pub lock: Option<LockOptions>,
    pub lock_provider: String,
    #[serde(skip)]
    pub storage_options: StorageOptions,
    pub delete_concurrency: usize,
    pub listing_cross_check: bool,
    /// Between scheduled audits (ms); `None`: no scheduled audit.
    pub audit_interval_ms: Option<u64>,
    /// The most object-store requests one audit may make.
    pub audit_max_requests: u64,
    /// Between the leftover guard's checks of every completed rollback (ms); `None`: the guard
    /// is off (after rollbacks too).
    pub leftover_guard_interval_ms: Option<u64>,
}

/// The most deletes in flight one rollback may have (`delete_concurrency`).
pub const MAX_DELETE_CONCURRENCY: usize = 1024;

/// The default configuration (the demo), embedded so that `serve` runs from any folder.
pub const EMBEDDED: &str = include_str!("../../../../../config/hudi-keeper.toml");

impl Config {
    /// Load `path` (which must exist when `required`), then the environment.
    pub fn load(path: &Path, required: bool) -> anyhow::Result<Self> {
        let what = path.display().to_string();
        if !path.exists() {
            if required {
                bail!("the config file {what} does not exist");
            }
            return Self::extract(Figment::new(), &what);
        }
        let text = std::fs::read_to_string(path)
            .with_context(|| format!("could not read the config file {what}"))?;
        Self::from_text(&text, &what)
    }

    /// The configuration `text` (`what` names it in errors) with the environment merged over
    /// it: its `[[tables]]` entries parsed one at a time ([`table_entries`]), the rest through
    /// figment.
    fn from_text(text: &str, what: &str) -> anyhow::Result<Self> {
        let Some(cut) = table_entries::cut(text).filter(|c| !c.entries.is_empty()) else {
            return Self::extract(Figment::new().merge(Toml::string(text)), what);
        };
        let mut config =
            Self::extract_unchecked(Figment::new().merge(Toml::string(&cut.rest)), what)?;
        if !config.tables.is_empty() {
            bail!("invalid configuration: {what} gives tables both as `[[tables]]` entries and as `tables = [...]`");
        }
        config.tables.reserve_exact(cut.entries.len());
        for (line, entry) in cut.entries {
            let entry = table_entries::parse_entry(entry, line, what)
                .map_err(|e| anyhow::anyhow!(e))
                .context("invalid configuration")?;
            config.tables.push(entry);
        }
        config.validate()?;
        Ok(config)
    }

    /// The configuration embedded in the binary (`config/hudi-keeper.toml`, the demo), its
    /// relative paths (the state folder, the demo table) under `home`, then the environment.
    pub fn load_embedded(home: &Path) -> anyhow::Result<Self> {
        let mut config = Self::from_text(EMBEDDED, "the embedded default configuration")?;
        if config.server.state_dir.is_relative() {
            config.server.state_dir = home.join(&config.server.state_dir);
        }
        for t in config.tables.iter_mut().filter(|t| t.demo) {
            if !t.uri.contains("://") && Path::new(&t.uri).is_relative() {
                t.uri = home.join(&t.uri).display().to_string();
            }
        }
        config.validate()?;
        Ok(config)
    }

    /// `figment` (a file's or the embedded text) with the environment merged over it; `what`
    /// names the file in errors.
    fn extract(figment: Figment, what: &str) -> anyhow::Result<Self> {
        let config = Self::extract_unchecked(figment, what)?;
        config.validate()?;
        Ok(config)
    }

    /// [`Config::extract`] without the checks across keys.
    fn extract_unchecked(mut figment: Figment, what: &str) -> anyhow::Result<Self> {
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
        figment
            .extract()
            .map_err(|e| anyhow::anyhow!(describe(e, what)))
            .context("invalid configuration")
    }

    /// Checks across keys: unique names, every table resolvable.
    pub fn validate(&self) -> Result<(), ConfigError> {
        self.server.validate()?;
        // The replica's index may come from its pod name; the rest is checked here.
        let shared = match self.cluster.mode {
            cluster::ClusterMode::None => {
                cluster::Cluster::from_config(&self.cluster, None)
                    .map_err(|e| ConfigError::Cluster(e.0))?;
                false
            }
            cluster::ClusterMode::Static => self.cluster.replicas.unwrap_or(0) > 1,
            cluster::ClusterMode::Zookeeper => {
                // The member id may come from the pod's name at start: a stand-in checks the rest.
                let stand_in = self.cluster.member.is_none().then_some("pod-0");
                cluster::Cluster::from_config(&self.cluster, stand_in)
                    .map_err(|e| ConfigError::Cluster(e.0))?;
                self.zookeeper_membership().map_err(ConfigError::Cluster)?;
                true
            }
        };
        let mut seen = std::collections::BTreeSet::new();
        for t in &self.tables {
            if !seen.insert(&t.name) {
                return Err(ConfigError::DuplicateName(t.name.clone()));
            }
            let settings = self.defaults.resolve(t).map_err(ConfigError::Table)?;
            // Two replicas may briefly both poll a table (a replica restarting with another
            // count, a slow rollout): only the table's lock keeps them from racing.
            if shared && settings.lock_provider == "none" {
                return Err(ConfigError::NoLockWhenShared(t.name.clone()));
            }
        }
        let mut sources = std::collections::BTreeSet::new();
        for d in &self.discover {
            if !sources.insert(&d.name) {
                return Err(ConfigError::Discover(format!(
                    "discover: the name `{}` is used twice",
                    d.name.escape_debug()
                )));
            }
            d.validate(&self.server.allowed_table_uris)?;
            // The tables it finds resolve as a `[[tables]]` entry with its defaults would.
            let probe =
                d.defaults
                    .entry("discovered".into(), d.target(), d.storage_options.clone());
            let settings = self
                .defaults
                .resolve(&probe)
                .map_err(|e| ConfigError::Discover(format!("discover `{}`: {e}", d.name)))?;
            if shared && settings.lock_provider == "none" {
                return Err(ConfigError::Discover(format!(
                    "discover `{}`: the tables it finds would have lock.provider = \"none\", which replicas sharing tables may not use: give [discover.defaults] or [defaults] the writers' lock",
                    d.name
                )));
            }
        }
        Ok(())
    }
}

impl ServerConfig {
    /// The checks of `[server]`'s settings.
    fn validate(&self) -> Result<(), ConfigError> {
        let refuse = |why| Err(ConfigError::Server(why));
        if self.max_concurrent_polls == 0 {
            return refuse("server.max_concurrent_polls must be positive");
        }
        if self.halt_after_failures == 0 {
            return refuse("server.halt_after_failures must be positive");
        }
        if self.poll_timeout.is_zero() || self.mutation_timeout.is_zero() {
            return refuse("server.poll_timeout and server.mutation_timeout must be positive");
        }
        if self.probe_listen == Some(self.listen) && self.listen.port() != 0 {
            return refuse("server.probe_listen must differ from server.listen");
        }
        if self.auth_token.as_ref().is_some_and(|t| t.len() < 16) {
            return refuse("server.auth_token must be at least 16 characters");
        }
        if self.max_connections == 0
            || self.max_concurrent_scrapes == 0
            || self.max_concurrent_requests == 0
            || self.max_body_bytes == 0
        {
            return refuse("server.max_connections, server.max_concurrent_scrapes, server.max_concurrent_requests and server.max_body_bytes must be positive");
        }
        if self.client_timeout.is_zero() {
            return refuse("server.client_timeout must be positive");
        }
        if self.max_concurrent_audits == 0 || self.audit_timeout.is_zero() {
            return refuse(
                "server.max_concurrent_audits and server.audit_timeout must be positive",
            );
        }
        for p in &self.allowed_table_uris {
            Location::parse(p).map_err(|problem| ConfigError::AllowedTableUri {
                prefix: p.clone(),
                problem,
            })?;
        }
        Ok(())
    }
}

/// Every error figment found, each with its key.
/// Each error with where it comes from: the key in `file`, or the environment variable.
fn describe(e: figment::Error, file: &str) -> String {
    e.into_iter()
        .map(|e| {
            let from_env = e
                .metadata
                .as_ref()
                .is_some_and(|m| m.name.contains("environment"));
            let key = match (from_env, e.path.is_empty()) {
                (true, true) => "the HUDI_KEEPER_* environment variables: ".to_string(),
                (true, false) => format!(
                    "environment variable HUDI_KEEPER_{}: ",
                    e.path.join("__").to_ascii_uppercase()
                ),
                (false, true) => format!("{file}: "),
                (false, false) => format!("`{}` in {file}: ", e.path.join(".")),
            };
            format!("{key}{}", e.kind)
        })
        .collect::<Vec<_>>()
        .join("; ")
}

/// Which series the exposition has for the tables (`server.table_metrics`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, serde::Deserialize, serde::Serialize)]
#[serde(rename_all = "snake_case")]
pub enum TableSeries {
    /// One series per table (and label combination): about 1.15 KB of text a table.
    #[default]
    PerTable,
    /// One series per family over the owned tables, no `table` label: what a fleet of many
    /// thousand tables scrapes. Which table needs attention is then read from the API.
    Aggregate,
}
