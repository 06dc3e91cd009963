//! The command line.

mod audit;
pub(crate) mod demo;
mod discover;
mod health;
mod inspect;
mod interrupt;
mod progress;
mod restore;
mod rollback;
mod savepoint;
mod serve;

use std::process::ExitCode;

use anyhow::Context;
use clap::{Args, Parser, Subcommand, ValueEnum};
use hudi_keeper_core::protocol::detect::{FailedWritesPolicy, LazyWritersEvidence};
use hudi_keeper_core::protocol::heartbeat::HeartbeatPolicy;
use hudi_keeper_core::protocol::lock::{
    storage_lock, LockOptions, LockProvider, StorageLockConfig, ZkLockConfig, ZkSecurityFiles,
};
use hudi_keeper_core::storage::{RelPath, RequestCounter, Storage, StorageOptions};
use hudi_keeper_core::Table;

pub use crate::duration::{parse_duration, parse_lock_expire};

/// Keeps Apache Hudi tables free of partially failed writes.
#[derive(Debug, Parser)]
#[command(name = "hudi-keeper", version, about, propagate_version = true)]
pub struct Cli {
    /// Log format on stderr.
    #[arg(long, global = true, value_enum, default_value_t = LogFormat::Text)]
    pub log_format: LogFormat,
    #[command(subcommand)]
    pub command: Command,
}

/// Log output format.
#[derive(Debug, Clone, Copy, ValueEnum)]
pub enum LogFormat {
    /// Human-readable lines.
    Text,
    /// One JSON object per line.
    Json,
}

#[derive(Debug, Subcommand)]
pub enum Command {
    /// Show a table's configuration, its timeline, and its pending instants with heartbeat age,
    /// verdict and markers.
    Inspect(inspect::InspectArgs),
    /// Classify every data file of a table by the instant that wrote it: committed, pending,
    /// left behind by a rollback, orphaned, or unknown. Read-only.
    Audit(Box<audit::AuditArgs>),
    /// Roll back failed writes as Hudi would: every instant the policy calls failed (and every
    /// pending rollback), or one named instant.
    Rollback(Box<rollback::RollbackArgs>),
    /// Find the Hudi tables under a prefix and print what a `[[discover]]` source would
    /// register (read-only).
    Discover(Box<discover::DiscoverArgs>),
    /// Make a small demo table with a failed write in a local folder, inspect it, roll it back.
    Demo(demo::DemoArgs),
    /// Run the daemon: poll the registered tables, roll back failed writes, serve health,
    /// metrics and the API.
    Serve(serve::ServeArgs),
    /// Ask a running daemon whether it is healthy (exit 0) or not (exit 1): for container
    /// health checks.
    Health(health::HealthArgs),
    /// The savepoints of a table: create, list, delete.
    Savepoint(savepoint::SavepointArgs),
    /// Take a table back to a savepoint (or any completed commit on the active timeline) by
    /// rolling back everything after it, as Hudi's restore does.
    Restore(Box<restore::RestoreArgs>),
}

/// Where a table lives and how to reach its store.
#[derive(Debug, Args)]
pub struct TableArgs {
    /// The table's base path: a local path, file://, s3://, gs://, az://, abfss:// or memory://.
    #[arg(value_name = "TABLE_URI")]
    pub uri: String,
    /// An object-store option, in object_store's key names (repeatable), e.g.
    /// `--storage-option aws_endpoint=http://127.0.0.1:9000 --storage-option aws_allow_http=true`.
    #[arg(long = "storage-option", value_name = "KEY=VALUE", value_parser = parse_key_value)]
    pub storage_options: Vec<(String, String)>,
}

impl TableArgs {
    pub fn storage_options(&self) -> StorageOptions {
        StorageOptions::from_pairs(self.storage_options.iter().cloned())
    }

    /// Open the table, with an error that names its URI.
    pub async fn open(&self) -> anyhow::Result<Table> {
        Table::open(&self.uri, &self.storage_options())
            .await
            .with_context(|| format!("cannot open table `{}`", self.uri))
    }

    /// Open the table with every object-store request counted by kind (what `--json` reports).
    pub async fn open_counted(&self) -> anyhow::Result<(Table, Counted)> {
        let requests = std::sync::Arc::new(RequestCounter::new());
        let context = || format!("cannot open table `{}`", self.uri);
        let storage = Storage::open(&self.uri, &self.storage_options())
            .with_context(context)?
            .with_interceptor(requests.clone());
        let table = Table::open_storage(storage).await.with_context(context)?;
        Ok((table, Counted(requests)))
    }
}

/// The requests of a table opened with [`TableArgs::open_counted`].
#[derive(Debug, Clone)]
pub struct Counted(std::sync::Arc<RequestCounter>);

impl Counted {
    /// The requests so far, by kind, as `--json` shows them.
    pub fn by_kind(&self) -> std::collections::BTreeMap<&'static str, u64> {
        self.0
            .snapshot()
            .into_iter()
            .map(|(k, n)| (k.as_str(), n))
            .collect()
    }
}

/// How the table's writers beat, and how to judge their pending instants.
#[derive(Debug, Args)]
pub struct DetectionArgs {
    /// LAZY (writers keep heartbeats; several writers) or EAGER (one writer, no heartbeats;
    /// Hudi's default).
    #[arg(long, value_enum, default_value_t = PolicyArg::Lazy)]
    pub policy: PolicyArg,
    /// The writers' `hoodie.client.heartbeat.interval_in_ms`.
    #[arg(long, value_parser = parse_duration, default_value = "60s")]
    pub heartbeat_interval: std::time::Duration,
    /// The writers' `hoodie.client.heartbeat.tolerable.misses`.
    #[arg(long, default_value_t = 2)]
    pub heartbeat_tolerable_misses: u32,
    /// A pending instant without any heartbeat file is never failed before it is this old (by
    /// the store's clock: its first timeline file's modification time).
    #[arg(long, value_parser = parse_duration, default_value = "10m")]
    pub min_instant_age: std::time::Duration,
    /// Allowance for the difference between this clock and the store's.
    #[arg(long, value_parser = parse_duration, default_value = "5s")]
    pub clock_skew_margin: std::time::Duration,
    /// State that every writer of this table is LAZY (writes heartbeats), so a pending write
    /// without heartbeat file is a dead one once older than --min-instant-age. Without it such a
    /// write is left alone (heartbeat files of other writes do not prove it dead).
    #[arg(long)]
    pub assume_lazy_writers: bool,
    /// No write of this table runs longer than this: a pending write without heartbeat file
    /// that is older is failed, under either policy (e.g. the newest write under EAGER, which is
    /// otherwise left alone until a newer write starts).
    #[arg(long, value_parser = parse_duration, value_name = "DURATION")]
    pub max_write_duration: Option<std::time::Duration>,
    /// The writers run Hudi 1.2 with `hoodie.clustering.enable.expirations` (LAZY only): a
    /// pending clustering whose heartbeat file expired and that is older than
    /// --clustering-expiration-threshold is rolled back, as Hudi 1.2 does.
    #[arg(long)]
    pub clustering_expirations: bool,
    /// The writers' `hoodie.clustering.expiration.threshold.mins`.
    #[arg(long, value_parser = parse_duration, default_value = "60m")]
    pub clustering_expiration_threshold: std::time::Duration,
}

impl DetectionArgs {
    /// What the operator states about the writers: `--assume-lazy-writers`.
    pub fn lazy_writers(&self) -> Option<LazyWritersEvidence> {
        self.assume_lazy_writers
            .then_some(LazyWritersEvidence::Assumed)
    }

    /// The clustering expiration threshold, when clustering expirations are on.
    pub fn clustering_expiration(&self) -> Option<std::time::Duration> {
        self.clustering_expirations
            .then_some(self.clustering_expiration_threshold)
    }

    pub fn heartbeat_policy(&self) -> HeartbeatPolicy {
        HeartbeatPolicy {
            interval: self.heartbeat_interval,
            tolerable_misses: self.heartbeat_tolerable_misses,
            min_instant_age: self.min_instant_age,
            clock_skew_margin: self.clock_skew_margin,
        }
    }
}

/// The table lock the writers use; hudi-keeper takes the same one before it changes a table.
#[derive(Debug, Args)]
pub struct LockArgs {
    /// The writers' lock provider: `storage` (Hudi 1.x's StorageBasedLockProvider),
    /// `filesystem` (FileSystemBasedLockProvider), `zookeeper` (ZookeeperBasedLockProvider) or
    /// `none` (no lock: only when no writer can run). Required to change a table.
    #[arg(long, value_enum)]
    pub lock: Option<LockArg>,
    /// How long to wait for the lock; not getting it is an error, never a reason to go on.
    #[arg(long, value_parser = parse_duration, default_value = "60s")]
    pub lock_timeout: std::time::Duration,
    /// `filesystem`: the folder of the lock file, relative to the table (the writers'
    /// `hoodie.write.lock.filesystem.path`; it must be inside the table).
    #[arg(long, default_value = ".hoodie")]
    pub lock_filesystem_dir: String,
    /// `filesystem`: the writers' `hoodie.write.lock.filesystem.expire`: a bare number is
    /// minutes, as in Hudi (`10` = 10 minutes); `30s`, `10m` keep their unit; 0: never expires.
    #[arg(long, value_parser = parse_lock_expire, default_value = "0")]
    pub lock_filesystem_expire: std::time::Duration,
    /// `storage`: the lock file, relative to the table.
    #[arg(long, default_value = storage_lock::DEFAULT_PATH)]
    pub lock_storage_path: String,
    /// `storage`: how long one write of the lease holds it (the writers'
    /// `hoodie.write.lock.storage.validity.timeout.secs`).
    #[arg(long, value_parser = parse_duration, default_value = "300s")]
    pub lock_storage_validity: std::time::Duration,
    /// `storage`: how often the lease is renewed while held
    /// (`hoodie.write.lock.storage.renew.interval.secs`).
    #[arg(long, value_parser = parse_duration, default_value = "30s")]
    pub lock_storage_renew_interval: std::time::Duration,
    /// `zookeeper`: the ensemble, `host:port[,host:port…]` (the writers'
    /// `hoodie.write.lock.zookeeper.url`, with the port in it).
    #[arg(long)]
    pub lock_zookeeper_url: Option<String>,
    /// `zookeeper`: `hoodie.write.lock.zookeeper.base_path`.
    #[arg(long)]
    pub lock_zookeeper_base_path: Option<String>,
    /// `zookeeper`: `hoodie.write.lock.zookeeper.lock_key` (default: the table name, as Hudi).
    #[arg(long)]
    pub lock_zookeeper_lock_key: Option<String>,
    /// `zookeeper`: the session timeout (`hoodie.write.lock.zookeeper.session_timeout_ms`).
    #[arg(long, value_parser = parse_duration, default_value = "60s")]
    pub lock_zookeeper_session_timeout: std::time::Duration,
    /// `zookeeper`: the connection timeout (`…connection_timeout_ms`).
    #[arg(long, value_parser = parse_duration, default_value = "15s")]
    pub lock_zookeeper_connection_timeout: std::time::Duration,
    /// `zookeeper`: SASL DIGEST-MD5 with the `DigestLoginModule` credentials of this JAAS file
    /// (the writers' `-Djava.security.auth.login.config`).
    #[arg(long)]
    pub lock_zookeeper_jaas_file: Option<std::path::PathBuf>,
    /// `zookeeper`: the JAAS file's section (ZooKeeper's `zookeeper.sasl.clientconfig`).
    #[arg(long, default_value = "Client")]
    pub lock_zookeeper_jaas_section: String,
    /// `zookeeper`: TLS to the servers' secure port, trusting these PEM CA certificates.
    #[arg(long)]
    pub lock_zookeeper_tls_ca: Option<std::path::PathBuf>,
    /// `zookeeper`: the client certificate (PEM) where the servers require one.
    #[arg(long, requires = "lock_zookeeper_tls_key")]
    pub lock_zookeeper_tls_cert: Option<std::path::PathBuf>,
    /// `zookeeper`: the client certificate's key (PEM).
    #[arg(long, requires = "lock_zookeeper_tls_cert")]
    pub lock_zookeeper_tls_key: Option<std::path::PathBuf>,
}

#[derive(Debug, Clone, Copy, ValueEnum)]
pub enum LockArg {
    /// No lock.
    None,
    /// Hudi's FileSystemBasedLockProvider.
    Filesystem,
    /// Hudi 1.x's StorageBasedLockProvider.
    Storage,
    /// Hudi's ZookeeperBasedLockProvider.
    Zookeeper,
}

/// A usage error: a flag missing, or flags that do not go together. The binary exits with 2
/// for it, as for the errors the argument parser reports.
#[derive(Debug)]
pub struct UsageError(pub String);

impl std::fmt::Display for UsageError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for UsageError {}

/// A usage error, as an `anyhow` error.
pub fn usage(why: impl Into<String>) -> anyhow::Error {
    UsageError(why.into()).into()
}

impl LockArgs {
    /// The lock options for `table`, or the error an operator can act on when no provider was
    /// chosen or its options are incomplete.
    pub fn lock_options(&self, table: &Table) -> anyhow::Result<LockOptions> {
        let provider = match self.lock {
            None => return Err(usage(
                "no lock provider chosen: pass --lock storage|filesystem|zookeeper (the lock provider this table's writers use) or --lock none (only when no writer can run)"
            )),
            Some(LockArg::None) => LockProvider::None,
            Some(LockArg::Filesystem) => LockProvider::FileSystem {
                dir: RelPath::parse(&self.lock_filesystem_dir).map_err(|e| {
                    usage(format!("--lock-filesystem-dir: {e}"))
                })?,
                expire: self.lock_filesystem_expire,
            },
            Some(LockArg::Storage) => {
                let config = StorageLockConfig {
                    path: RelPath::parse(&self.lock_storage_path)
                        .map_err(|e| usage(format!("--lock-storage-path: {e}")))?,
                    validity: self.lock_storage_validity,
                    renew_interval: self.lock_storage_renew_interval,
                };
                config
                    .validate()
                    .map_err(|e| usage(format!("--lock-storage-*: {e}")))?;
                LockProvider::Storage(config)
            }
            Some(LockArg::Zookeeper) => {
                let connect = self.lock_zookeeper_url.clone().ok_or_else(|| {
                    usage("--lock zookeeper needs --lock-zookeeper-url host:port")
                })?;
                let base_path = self.lock_zookeeper_base_path.clone().ok_or_else(|| {
                    usage(
                        "--lock zookeeper needs --lock-zookeeper-base-path (the writers' hoodie.write.lock.zookeeper.base_path)",
                    )
                })?;
                let (tls, sasl) = ZkSecurityFiles {
                    jaas_file: self.lock_zookeeper_jaas_file.clone(),
                    jaas_section: self
                        .lock_zookeeper_jaas_file
                        .as_ref()
                        .map(|_| self.lock_zookeeper_jaas_section.clone()),
                    tls_ca_file: self.lock_zookeeper_tls_ca.clone(),
                    tls_cert_file: self.lock_zookeeper_tls_cert.clone(),
                    tls_key_file: self.lock_zookeeper_tls_key.clone(),
                }
                .load()
                .map_err(|e| anyhow::anyhow!("--lock-zookeeper-*: {e}"))?;
                let config = ZkLockConfig {
                    connect,
                    base_path,
                    lock_key: self
                        .lock_zookeeper_lock_key
                        .clone()
                        .unwrap_or_else(|| table.config().name.to_string()),
                    session_timeout: self.lock_zookeeper_session_timeout,
                    connection_timeout: self.lock_zookeeper_connection_timeout,
                    tls,
                    sasl,
                };
                config
                    .validate()
                    .map_err(|e| usage(format!("--lock-zookeeper-*: {e}")))?;
                LockProvider::ZooKeeper(config)
            }
        };
        Ok(LockOptions {
            provider,
            timeout: self.lock_timeout,
            retry_interval: std::time::Duration::from_millis(500),
        })
    }
}

#[derive(Debug, Clone, Copy, ValueEnum)]
pub enum PolicyArg {
    Lazy,
    Eager,
}

impl From<PolicyArg> for FailedWritesPolicy {
    fn from(p: PolicyArg) -> Self {
        match p {
            PolicyArg::Lazy => FailedWritesPolicy::Lazy,
            PolicyArg::Eager => FailedWritesPolicy::Eager,
        }
    }
}

/// Ask on the terminal before changing a table: `preview`, then `question` with [y/N]. Without a
/// terminal on stdin this is an error naming `--yes`; `Ok(false)` when the answer is not yes.
pub(crate) fn confirm(action: &str, preview: &str, question: &str) -> anyhow::Result<bool> {
    use std::io::{IsTerminal, Write};
    if !std::io::stdin().is_terminal() {
        anyhow::bail!("refusing to {action} without confirmation: stdin is not a terminal; pass --yes (or --dry-run to look first)");
    }
    eprint!("{preview}");
    eprint!("{question} [y/N] ");
    let _ = std::io::stderr().flush();
    let mut answer = String::new();
    std::io::stdin().read_line(&mut answer)?;
    let yes = matches!(answer.trim(), "y" | "Y" | "yes");
    if !yes {
        eprintln!("Nothing was changed.");
    }
    Ok(yes)
}

/// Change `table` with Ctrl-C and SIGTERM handled (see [`interrupt`]): `work` gets the table
/// with a stop token. `Ok(Ok(value))` when it ran to the end; `Ok(Err(code))` when a signal
/// stopped it at a safe point (or abandoned it), after telling the operator how to resume:
/// `resume` is given the instant a rerun resumes, if any.
pub(crate) async fn change_table<T, Fut>(
    table: &Table,
    resume: impl Fn(Option<&str>) -> String,
    work: impl FnOnce(Table) -> Fut,
) -> anyhow::Result<Result<T, ExitCode>>
where
    Fut: std::future::Future<Output = Result<T, hudi_keeper_core::Error>>,
{
    let signals = interrupt::Interrupt::install();
    let cancellable = table.with_cancel(signals.token());
    match signals.run(work(cancellable)).await {
        interrupt::Outcome::Ended(Ok(v)) => Ok(Ok(v)),
        interrupt::Outcome::Ended(Err(hudi_keeper_core::Error::Cancelled {
            at, pending, ..
        })) => {
            eprintln!(
                "Stopped at a safe point ({at}); the table lock was released and the table is consistent. To resume, run {}.",
                resume(pending.as_deref())
            );
            Ok(Err(signals.exit_code()))
        }
        interrupt::Outcome::Ended(Err(e)) => Err(e.into()),
        interrupt::Outcome::Abandoned => {
            eprintln!(
                "Abandoned mid-request; the table is resumable as after a crash (see above whether the lock was released). To resume, run {}.",
                resume(None)
            );
            Ok(Err(signals.exit_code()))
        }
    }
}

/// `n` and the noun in its number: "1 file deleted", "3 files deleted".
pub(crate) fn count(n: u64, one: &str, many: &str) -> String {
    format!("{n} {}", if n == 1 { one } else { many })
}

fn parse_key_value(s: &str) -> Result<(String, String), String> {
    s.split_once('=')
        .map(|(k, v)| (k.trim().to_string(), v.to_string()))
        .filter(|(k, _)| !k.is_empty())
        .ok_or_else(|| format!("expected KEY=VALUE, got `{s}`"))
}

fn init_logging(format: LogFormat, default_level: &str) {
    let filter = tracing_subscriber::EnvFilter::try_from_default_env()
        .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new(default_level));
    // Colour only on a terminal: escape codes in a file or a pipe are noise.
    let builder = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_ansi(std::io::IsTerminal::is_terminal(&std::io::stderr()))
        .with_writer(std::io::stderr);
    let _ = match format {
        LogFormat::Text => builder.try_init(),
        LogFormat::Json => builder.json().try_init(),
    };
}

pub async fn run(cli: Cli) -> anyhow::Result<ExitCode> {
    // The daemon reports what it does; one-shot commands only warn.
    let level = match cli.command {
        Command::Serve(_) => "info",
        _ => "warn",
    };
    init_logging(cli.log_format, level);
    match cli.command {
        Command::Inspect(args) => inspect::run(args).await,
        Command::Audit(args) => audit::run(*args).await,
        Command::Rollback(args) => rollback::run(*args).await,
        Command::Serve(args) => serve::run(args).await,
        Command::Health(args) => health::run(args),
        Command::Savepoint(args) => savepoint::run(args).await,
        Command::Restore(args) => restore::run(*args).await,
        Command::Demo(args) => demo::run(args).await,
        Command::Discover(args) => discover::run(*args).await,
    }
}
