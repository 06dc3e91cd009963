//! What `POST /api/v1/tables` may register: where ([`Config::check_api_entry`]), with which
//! storage options ([`API_STORAGE_OPTIONS`]), and nothing weaker than `[defaults]` unless the
//! operator allows it ([`Defaults::weaker`]).

use std::collections::BTreeMap;
use std::time::Duration;

use super::{control_character, valid_name, Config, Defaults, Location, PolicySetting, TableEntry};

/// The shortest `poll_interval` a registration through the API may give its table: a holder of
/// the token may not have the daemon poll a store (and write a log line at each failed poll)
/// many times a second. The config file's tables may poll faster (down to 100ms).
pub const API_MIN_POLL_INTERVAL: Duration = Duration::from_secs(1);

/// The shortest `audit_interval` (other than 0, off) a registration through the API may give
/// its table: an audit lists the whole table.
pub const API_MIN_AUDIT_INTERVAL: Duration = Duration::from_secs(3600);

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
    /// fewer tolerated misses, `assume_lazy_writers`, `clustering_expirations` (or a shorter
    /// threshold) or a `max_write_duration` the defaults do not have (or a shorter one), the
    /// leftover guard on where the defaults have it off, a lock other than `[defaults.lock]` (only
    /// its `timeout` may differ). Whatever the table's policy.
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
        if entry.clustering_expirations == Some(true) && !self.clustering_expirations {
            w.push("clustering_expirations = true where the default is false".into());
        }
        if let Some(d) = entry
            .clustering_expiration_threshold
            .filter(|d| *d < self.clustering_expiration_threshold)
        {
            w.push(format!(
                "clustering_expiration_threshold {} is shorter than the default {}",
                show(d),
                show(self.clustering_expiration_threshold)
            ));
        }
        if entry.leftover_guard_interval.is_some_and(|d| !d.is_zero())
            && self.leftover_guard_interval.is_zero()
        {
            w.push(
                "leftover_guard_interval switches on the leftover guard, which the default has off"
                    .into(),
            );
        }
        match (entry.max_write_duration.flatten(), self.max_write_duration) {
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
            let mut same = lock.clone();
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
        if let Some(every) = entry
            .audit_interval
            .filter(|a| !a.is_zero() && *a < API_MIN_AUDIT_INTERVAL)
        {
            return Err(ApiRefusal::Invalid(format!(
                "table `{t}`: audit_interval {} is shorter than {}, the least a registration through the API may give (0: no scheduled audit)",
                show(every),
                show(API_MIN_AUDIT_INTERVAL)
            )));
        }
        if let Some(n) = entry
            .audit_max_requests
            .filter(|n| *n > self.defaults.audit_max_requests)
        {
            return Err(ApiRefusal::Forbidden(format!(
                "table `{t}`: audit_max_requests {n} is more than the default {}, the most a registration through the API may give",
                self.defaults.audit_max_requests
            )));
        }
        if let Some(n) = entry
            .delete_concurrency
            .filter(|n| *n > self.defaults.delete_concurrency)
        {
            return Err(ApiRefusal::Forbidden(format!(
                "table `{t}`: delete_concurrency {n} is more than the default {}, the most a registration through the API may give",
                self.defaults.delete_concurrency
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

    /// Whether a table a `[[discover]]` source found may be registered or opened where it is:
    /// with `server.allowed_table_uris` set, where an API table may be (under a prefix as
    /// written, and, for a local path, where it leads under where the prefix leads; not inside
    /// a `.hoodie` folder); without it, anywhere (the config file's sources are trusted as its
    /// `[[tables]]` are).
    pub fn check_found_location(&self, uri: &str) -> Result<(), String> {
        if self.server.allowed_table_uris.is_empty() {
            return Ok(());
        }
        self.check_api_uri(uri).map_err(|e| match e {
            ApiRefusal::Forbidden(e) | ApiRefusal::Invalid(e) => e,
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
        let in_hoodie = Location::in_hoodie;
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
