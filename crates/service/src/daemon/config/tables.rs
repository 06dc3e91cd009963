//! A table's settings resolved: its `[[tables]]` entry over `[defaults]`, and the names and URIs
//! a table may have.

use std::time::Duration;

use hudi_keeper_core::protocol::heartbeat::HeartbeatPolicy;
use hudi_keeper_core::storage::StorageOptions;

use super::schema::MAX_DELETE_CONCURRENCY;
use super::{Defaults, PolicySetting, TableEntry, TableSettings};

/// The shortest `audit_interval` (other than 0, off).
pub const MIN_AUDIT_INTERVAL: Duration = Duration::from_secs(1);

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
        let given = self.overridden_by(entry);
        let policy = given.failed_writes_policy;
        let lock = given
            .lock
            .options()
            .map_err(|e| format!("table `{t}`: {e}"))?;
        if lock.is_none() && policy != PolicySetting::Observe {
            return Err(format!(
                "table `{t}`: lock.provider is not set. The daemon never changes a table without a lock decision: set lock.provider to the provider the writers use (storage, filesystem, zookeeper) or none (no writer runs), or set failed_writes_policy = \"observe\""
            ));
        }
        if given.poll_interval < Duration::from_millis(100) {
            return Err(format!("table `{t}`: poll_interval must be at least 100ms"));
        }
        if !given.idle_poll_interval.is_zero()
            && given.idle_poll_interval < Duration::from_millis(100)
        {
            return Err(format!(
                "table `{t}`: idle_poll_interval must be at least 100ms (or 0: never back off)"
            ));
        }
        let heartbeat = HeartbeatPolicy {
            interval: given.heartbeat_interval,
            tolerable_misses: given.heartbeat_tolerable_misses,
            min_instant_age: given.min_instant_age,
            clock_skew_margin: given.clock_skew_margin,
        };
        if heartbeat.interval.is_zero() {
            return Err(format!("table `{t}`: heartbeat_interval must be positive"));
        }
        if given.max_write_duration.is_some_and(|d| d.is_zero()) {
            return Err(format!(
                "table `{t}`: max_write_duration must be positive (leave it unset for none)"
            ));
        }
        if !given.audit_interval.is_zero() && given.audit_interval < MIN_AUDIT_INTERVAL {
            return Err(format!(
                "table `{t}`: audit_interval must be at least 1s (or 0: no scheduled audit)"
            ));
        }
        if !given.leftover_guard_interval.is_zero()
            && given.leftover_guard_interval < MIN_AUDIT_INTERVAL
        {
            return Err(format!(
                "table `{t}`: leftover_guard_interval must be at least 1s (or 0: no leftover guard)"
            ));
        }
        if given.audit_max_requests == 0 {
            return Err(format!(
                "table `{t}`: audit_max_requests must be positive (set audit_interval = 0 for no audit)"
            ));
        }
        let mut opts = given.storage_options;
        opts.extend(entry.storage_options.clone());
        if !(1..=MAX_DELETE_CONCURRENCY).contains(&given.delete_concurrency) {
            return Err(format!(
                "table `{t}`: delete_concurrency must be 1 to {MAX_DELETE_CONCURRENCY}"
            ));
        }
        Ok(TableSettings {
            poll_interval_ms: given.poll_interval.as_millis() as u64,
            // An idle interval no longer than the active one is no back-off at all.
            idle_poll_interval_ms: (given.idle_poll_interval > given.poll_interval)
                .then_some(given.idle_poll_interval.as_millis() as u64),
            idle_after_ms: given.idle_after.as_millis() as u64,
            failed_writes_policy: policy,
            heartbeat,
            assume_lazy_writers: given.assume_lazy_writers,
            max_write_duration_ms: given.max_write_duration.map(|d| d.as_millis() as u64),
            clustering_expiration_ms: given
                .clustering_expirations
                .then_some(given.clustering_expiration_threshold.as_millis() as u64),
            lock_provider: lock
                .as_ref()
                .map(|l| l.provider.name().to_string())
                .unwrap_or_else(|| "unset".into()),
            lock,
            storage_options: StorageOptions::from_pairs(opts),
            delete_concurrency: given.delete_concurrency,
            listing_cross_check: given.listing_cross_check,
            audit_interval_ms: (!given.audit_interval.is_zero())
                .then_some(given.audit_interval.as_millis() as u64),
            audit_max_requests: u64::from(given.audit_max_requests),
            leftover_guard_interval_ms: (!given.leftover_guard_interval.is_zero())
                .then_some(given.leftover_guard_interval.as_millis() as u64),
        })
    }
}
