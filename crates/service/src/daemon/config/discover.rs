//! `[[discover]]`: the discovery sources, each rescanned on its own interval, with the policy
//! defaults of the tables it finds (`[discover.defaults]`, the keys of a `[[tables]]` entry).

use std::collections::BTreeMap;
use std::time::Duration;

use hudi_keeper_core::discover::{FilterSettings, Filters, ScanLimits};
use serde::{Deserialize, Serialize};

use super::{valid_name, ConfigError, Location, TableOverrides};
use crate::duration::serde_helpers::{de_duration, ser_duration};

/// Where a source finds its tables.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Deserialize, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum SourceKind {
    /// Folders holding `.hoodie/hoodie.properties` under `prefix`.
    #[default]
    Prefix,
    /// The Hudi tables of the AWS Glue Data Catalog of `region`.
    Glue,
    /// The Hudi tables of the Hive Metastore at `uri` (`thrift://HOST:PORT`).
    HiveMetastore,
}

impl SourceKind {
    /// Lower-case name.
    pub fn as_str(self) -> &'static str {
        match self {
            SourceKind::Prefix => "prefix",
            SourceKind::Glue => "glue",
            SourceKind::HiveMetastore => "hive_metastore",
        }
    }
}

fn five_minutes() -> Duration {
    Duration::from_secs(300)
}
fn ten_minutes() -> Duration {
    Duration::from_secs(600)
}
fn max_depth() -> u32 {
    ScanLimits::default().max_depth
}
fn max_requests() -> u64 {
    ScanLimits::default().max_requests
}

/// One `[[discover]]` source.
#[derive(Debug, Clone, PartialEq, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct DiscoverSource {
    /// A unique name (the `source` of its tables in the API and in metrics).
    pub name: String,
    /// `prefix`.
    #[serde(default)]
    pub kind: SourceKind,
    /// `kind = "prefix"`: where to look (a local path, `s3://`, `gs://`, `az://`, …).
    #[serde(default)]
    pub prefix: Option<String>,
    /// `kind = "hive_metastore"`: the metastore, `thrift://HOST:PORT`.
    #[serde(default)]
    pub uri: Option<String>,
    /// `kind = "glue"`: the catalog's region.
    #[serde(default)]
    pub region: Option<String>,
    /// `kind = "glue"`: another endpoint than `https://glue.<region>.amazonaws.com/`.
    #[serde(default)]
    pub endpoint: Option<String>,
    /// `kind = "glue"`: the catalog's account (default: the credentials').
    #[serde(default)]
    pub catalog_id: Option<String>,
    /// `kind = "glue"` or `"hive_metastore"`: only these databases (default: every one).
    #[serde(default)]
    pub databases: Vec<String>,
    /// How often the source is scanned (the first scan runs at start).
    #[serde(
        default = "five_minutes",
        deserialize_with = "de_duration",
        serialize_with = "ser_duration"
    )]
    pub interval: Duration,
    /// The longest one scan may take; a later one counts as failed.
    #[serde(
        default = "ten_minutes",
        deserialize_with = "de_duration",
        serialize_with = "ser_duration"
    )]
    pub scan_timeout: Duration,
    /// The deepest folder listed (the prefix is depth 0).
    #[serde(default = "max_depth")]
    pub max_depth: u32,
    /// The most requests one scan makes; a scan that needs more is incomplete.
    #[serde(default = "max_requests")]
    pub max_requests: u64,
    /// Globs on `hoodie.table.name`: only these.
    #[serde(default)]
    pub include_names: Vec<String>,
    /// Globs on `hoodie.table.name`: not these.
    #[serde(default)]
    pub exclude_names: Vec<String>,
    /// Globs on the table URI: only these.
    #[serde(default)]
    pub include_locations: Vec<String>,
    /// Globs on the table URI: not these, nor anything below a folder they match.
    #[serde(default)]
    pub exclude_locations: Vec<String>,
    /// `object_store` options of the source's store, merged over `[defaults]`'.
    #[serde(default)]
    pub storage_options: BTreeMap<String, String>,
    /// The settings of the tables found, over `[defaults]` (the keys a `[[tables]]` entry may
    /// override).
    #[serde(default)]
    pub defaults: TableOverrides,
}

impl DiscoverSource {
    /// The scan's filters as written.
    pub fn filters(&self) -> FilterSettings {
        FilterSettings {
            include_names: self.include_names.clone(),
            exclude_names: self.exclude_names.clone(),
            include_locations: self.include_locations.clone(),
            exclude_locations: self.exclude_locations.clone(),
        }
    }

    /// The scan's limits.
    pub fn limits(&self) -> ScanLimits {
        ScanLimits {
            max_depth: self.max_depth,
            max_requests: self.max_requests,
        }
    }

    /// What the source scans, as shown (its prefix, or `glue://<region>`).
    pub fn target(&self) -> String {
        match self.kind {
            SourceKind::Prefix => self.prefix.clone().unwrap_or_default(),
            SourceKind::Glue => format!("glue://{}", self.region.as_deref().unwrap_or_default()),
            SourceKind::HiveMetastore => self.uri.clone().unwrap_or_default(),
        }
    }

    /// The checks of one source; `allowed`: `server.allowed_table_uris`.
    pub(super) fn validate(&self, allowed: &[String]) -> Result<(), ConfigError> {
        let bad = |why: String| ConfigError::Discover(format!("discover `{}`: {why}", self.name));
        if let Some(e) = super::control_character("source name", &self.name) {
            return Err(ConfigError::Discover(e));
        }
        if !valid_name(&self.name) {
            return Err(bad(
                "name: use 1 to 128 letters, digits, `-`, `_` or `.`".into()
            ));
        }
        if self.interval.is_zero() || self.scan_timeout.is_zero() {
            return Err(bad("interval and scan_timeout must be positive".into()));
        }
        if self.max_requests == 0 {
            return Err(bad("max_requests must be positive".into()));
        }
        if self.kind == SourceKind::HiveMetastore {
            if self.prefix.is_some() || self.region.is_some() || self.endpoint.is_some() {
                return Err(bad(
                    "kind = \"hive_metastore\" takes uri, not prefix, region or endpoint".into(),
                ));
            }
            let uri = self.uri.as_deref().unwrap_or_default();
            let ok = uri
                .strip_prefix("thrift://")
                .and_then(|r| r.trim_end_matches('/').rsplit_once(':'))
                .is_some_and(|(h, p)| !h.is_empty() && p.parse::<u16>().is_ok());
            if !ok {
                return Err(bad(
                    "kind = \"hive_metastore\" needs uri = \"thrift://HOST:PORT\"".into(),
                ));
            }
            Filters::compile(uri, &self.filters()).map_err(|e| bad(e.to_string()))?;
            return Ok(());
        }
        if self.uri.is_some() {
            return Err(bad("uri is for kind = \"hive_metastore\"".into()));
        }
        if self.kind == SourceKind::Glue {
            if self.prefix.is_some() {
                return Err(bad("kind = \"glue\" takes region, not prefix".into()));
            }
            let region = self.region.as_deref().unwrap_or_default();
            if region.is_empty()
                || !region
                    .chars()
                    .all(|c| c.is_ascii_alphanumeric() || c == '-')
            {
                return Err(bad("kind = \"glue\" needs a region (`us-east-1`)".into()));
            }
            let target = self.target();
            Filters::compile(&target, &self.filters()).map_err(|e| bad(e.to_string()))?;
            return Ok(());
        }
        if self.region.is_some() || self.endpoint.is_some() || !self.databases.is_empty() {
            return Err(bad(
                "region, endpoint and databases are for kind = \"glue\"".into(),
            ));
        }
        let Some(prefix) = self.prefix.as_deref() else {
            return Err(bad("kind = \"prefix\" needs a prefix".into()));
        };
        let at = Location::parse(prefix).map_err(|e| bad(format!("prefix: {e}")))?;
        if !allowed.is_empty()
            && !allowed
                .iter()
                .filter_map(|a| Location::parse(a).ok())
                .any(|a| at.is_allowed_under(&a))
        {
            return Err(bad(format!(
                "prefix `{prefix}` is not under server.allowed_table_uris"
            )));
        }
        Filters::compile(prefix, &self.filters()).map_err(|e| bad(e.to_string()))?;
        Ok(())
    }
}
