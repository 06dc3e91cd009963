//! The daemon's configuration: built-in defaults < a TOML file < `HUDI_KEEPER_…` environment
//! variables (`__` separates levels: `HUDI_KEEPER_SERVER__LISTEN=0.0.0.0:9464`).
//!
//! Unknown keys and invalid values fail at start with the key named. Every table resolves to a
//! [`TableSettings`]: the `[defaults]` with the table's own overrides on top (a table's `lock`
//! section replaces the default one as a whole, so one provider's options never mix with
//! another's).

mod api;
mod discover;
mod error;
mod locations;
mod lock;
#[macro_use]
mod overrides;
mod schema;
mod table_entries;
mod tables;
#[cfg(test)]
mod tests;

pub use api::ApiRefusal;
pub use discover::{DiscoverSource, SourceKind};
pub use error::ConfigError;
pub use locations::{EnclosingFolders, Location};
pub use lock::{LockSettings, ZkMembershipSettings};
pub use schema::{
    Config, Defaults, PolicySetting, ServerConfig, TableEntry, TableOverrides, TableSeries,
    TableSettings, PROBE_CLIENT_TIMEOUT, PROBE_MAX_CONNECTIONS,
};
pub use tables::{control_character, valid_name};

/// The default config file, relative to the working directory.
pub const DEFAULT_PATH: &str = "config/hudi-keeper.toml";
