//! Why a configuration is refused ([`Config::validate`](super::Config::validate)): each error
//! names the setting, and the table when one is at fault.

/// A configuration that cannot be run.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ConfigError {
    /// A `[server]` setting out of its range (the message names it).
    #[error("{0}")]
    Server(&'static str),
    /// A prefix of `server.allowed_table_uris` that is no location.
    #[error("server.allowed_table_uris: `{prefix}`: {problem}")]
    AllowedTableUri { prefix: String, problem: String },
    /// `[cluster]`, or the ZooKeeper settings its membership takes (the message names them).
    #[error("{0}")]
    Cluster(String),
    /// Two `[[tables]]` with one name.
    #[error("tables: the name `{}` is used twice", .0.escape_debug())]
    DuplicateName(String),
    /// A table's settings that do not resolve (the message names the table and the key).
    #[error("{0}")]
    Table(String),
    /// A table without lock in a cluster whose replicas share the tables.
    #[error("tables: `{0}` has lock.provider = \"none\", which replicas sharing tables (cluster.mode = \"static\" or \"zookeeper\") may not use: give it the writers' lock")]
    NoLockWhenShared(String),
    /// A `[[discover]]` source that cannot run (the message names it and the key).
    #[error("{0}")]
    Discover(String),
}
