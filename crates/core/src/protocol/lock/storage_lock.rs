//! Hudi 1.x's `StorageBasedLockProvider`: a lease kept in the table's own storage.
//!
//! The lock file (`.hoodie/.locks/table_lock.json` by default) holds
//! `{"expired": bool, "validUntil": <epoch ms>, "owner": "<uuid>"}`. It is free when it does
//! not exist, says `expired: true`, or its `validUntil` has passed. A contender takes it with a
//! conditional write: create-if-absent (If-None-Match) when there is no file, otherwise
//! replace-if-unchanged (If-Match on the version it read), so of two contenders exactly one
//! wins. The holder renews by rewriting `validUntil` with If-Match on its own last version,
//! and releases by writing `expired: true` the same way.
//!
//! Fencing: the holder stops mutating a safety margin before the `validUntil` it last wrote,
//! whether or not its renewal task is still running, so it can never write after another
//! contender could have taken the lease.

use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use chrono::Utc;
use serde::{Deserialize, Serialize};
use tokio::sync::watch;
use tokio::task::JoinHandle;
use tokio::time::Instant;
use tracing::{debug, info, warn};

use super::LeaseState;
use crate::protocol::heartbeat::duration_ms;
use crate::storage::{ObjectVersion, RelPath, Storage, StorageError, SMALL_FILE_MAX_READ};

/// How long after `validUntil` a lapsed lease is still respected (Hudi's fixed allowance).
pub const CLOCK_DRIFT_MS: i64 = 500;

/// The default lock file, relative to the table.
pub const DEFAULT_PATH: &str = ".hoodie/.locks/table_lock.json";

/// Where the lease lives and how long it lasts.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StorageLockConfig {
    /// The lock file, relative to the table.
    pub path: RelPath,
    /// How long one write of the lease keeps it (`hoodie.write.lock.storage.validity.timeout.secs`).
    pub validity: Duration,
    /// How often the holder renews (`hoodie.write.lock.storage.renew.interval.secs`).
    pub renew_interval: Duration,
}

impl Default for StorageLockConfig {
    fn default() -> Self {
        Self {
            path: RelPath::parse(DEFAULT_PATH).unwrap_or_default(),
            validity: Duration::from_secs(300),
            renew_interval: Duration::from_secs(30),
        }
    }
}

impl StorageLockConfig {
    /// Check that renewals can keep the lease: the renew interval must be shorter than the
    /// validity less the safety margin.
    pub fn validate(&self) -> Result<(), String> {
        if self.validity < Duration::from_secs(2) {
            return Err(format!(
                "the validity ({:?}) must be at least 2 s",
                self.validity
            ));
        }
        if self.renew_interval.is_zero()
            || self.renew_interval >= self.validity.saturating_sub(self.safety_margin())
        {
            return Err(format!(
                "the renew interval ({:?}) must be positive and shorter than the validity ({:?}) less the safety margin ({:?})",
                self.renew_interval,
                self.validity,
                self.safety_margin()
            ));
        }
        Ok(())
    }

    /// How long before `validUntil` the holder stops mutating: a tenth of the validity, at
    /// most 10 s, and never less than 1 s (the time a last request may take to land).
    pub fn safety_margin(&self) -> Duration {
        (self.validity / 10).clamp(Duration::from_secs(1), Duration::from_secs(10))
    }
}

/// The content of the lock file.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct LockData {
    /// Released by its holder.
    pub expired: bool,
    /// Epoch milliseconds until which the holder owns it.
    #[serde(rename = "validUntil")]
    pub valid_until: i64,
    /// The holder's id (a UUID in Hudi).
    pub owner: String,
}

impl LockData {
    /// Parse the lock file as Hudi's reader (Jackson) does: unknown fields are ignored, and a
    /// value written as a string of the right kind (`"true"`, `"1732960000000"`) or an owner
    /// written as a number is accepted; a missing or null field, or a value of the wrong shape,
    /// is an error.
    pub fn parse(bytes: &[u8]) -> Result<Self, String> {
        let shown = || -> String { String::from_utf8_lossy(&bytes[..bytes.len().min(120)]).into() };
        let fail = |why: String| {
            format!(
                "not a Hudi storage lock file ({why}); it reads `{}`",
                shown()
            )
        };
        let value: serde_json::Value =
            serde_json::from_slice(bytes).map_err(|e| fail(e.to_string()))?;
        let obj = value
            .as_object()
            .ok_or_else(|| fail("not a JSON object".into()))?;
        let field = |name: &str| {
            obj.get(name)
                .filter(|v| !v.is_null())
                .ok_or_else(|| fail(format!("no `{name}`")))
        };
        let expired = match field("expired")? {
            serde_json::Value::Bool(b) => *b,
            serde_json::Value::String(s) if s == "true" || s == "false" => s == "true",
            other => return Err(fail(format!("`expired` is {other}, not a boolean"))),
        };
        let valid_until = match field("validUntil")? {
            serde_json::Value::Number(n) if n.as_i64().is_some() => n.as_i64().unwrap_or_default(),
            serde_json::Value::String(s) if s.parse::<i64>().is_ok() => {
                s.parse().unwrap_or_default()
            }
            other => {
                return Err(fail(format!(
                    "`validUntil` is {other}, not epoch milliseconds"
                )))
            }
        };
        let owner = match field("owner")? {
            serde_json::Value::String(s) => s.clone(),
            serde_json::Value::Number(n) => n.to_string(),
            serde_json::Value::Bool(b) => b.to_string(),
            other => return Err(fail(format!("`owner` is {other}, not a string"))),
        };
        Ok(Self {
            expired,
            valid_until,
            owner,
        })
    }

    fn to_bytes(&self) -> Bytes {
        // Serializing three plain fields cannot fail.
        Bytes::from(serde_json::to_vec(self).unwrap_or_default())
    }

    /// Whether a contender may take it at `now_ms`: released, or lapsed for longer than Hudi's
    /// fixed 500 ms allowance for clock drift. A `validUntil` read from the file is any `i64`:
    /// the sums saturate, so a lease written to run until the end of time stays held.
    pub fn is_free(&self, now_ms: i64) -> bool {
        self.expired || now_ms > self.valid_until.saturating_add(CLOCK_DRIFT_MS)
    }

    /// How long the lease still runs at `now_ms`, the drift allowance included.
    pub fn valid_for(&self, now_ms: i64) -> Duration {
        let left = self
            .valid_until
            .saturating_add(CLOCK_DRIFT_MS)
            .saturating_sub(now_ms);
        Duration::from_millis(u64::try_from(left).unwrap_or(0))
    }
}

/// Why the storage lock could not be used.
#[derive(Debug, thiserror::Error)]
pub enum LeaseError {
    /// Reading or writing the lock file failed.
    #[error(transparent)]
    Storage(StorageError),
    /// The lock file is not what Hudi writes; nothing was changed.
    #[error("the lock file `{path}` is corrupt: {reason}; nothing was changed. If no writer holds the lock, an operator can delete the file")]
    Corrupt {
        /// The lock file.
        path: String,
        /// What is wrong with it.
        reason: String,
    },
    /// The store offers no conditional replace (If-Match), without which two contenders could
    /// both win.
    #[error("the storage-based lock needs conditional writes (If-Match), which this store does not offer ({0}); use S3 or GCS, or the filesystem lock")]
    NoConditionalWrites(String),
}

/// The outcome of one attempt.
#[derive(Debug)]
pub enum Attempt {
    /// The lease is ours.
    Taken(Lease),
    /// Someone holds it.
    Held {
        /// Their owner id (or `unknown` when a racing contender won just now).
        holder: String,
        /// How long their lease runs unless renewed.
        valid_for: Duration,
    },
}

fn now_ms() -> i64 {
    Utc::now().timestamp_millis()
}

/// One attempt to take the lease for `owner`.
pub async fn try_take(
    storage: &Storage,
    config: &StorageLockConfig,
    owner: &str,
) -> Result<Attempt, LeaseError> {
    let path = &config.path;
    let ours = |at_ms: i64| LockData {
        expired: false,
        valid_until: at_ms.saturating_add(duration_ms(config.validity)),
        owner: owner.to_string(),
    };
    let written_at = Instant::now();
    let now = now_ms();
    let data = ours(now);
    let version = match storage.get_versioned(path, SMALL_FILE_MAX_READ).await? {
        None => {
            let created = match storage.create_versioned(path, data.to_bytes()).await {
                Ok(v) => v,
                Err(StorageError::AlreadyExists { .. }) => {
                    match landed(storage, path, &data).await? {
                        Some(v) => v,
                        None => {
                            return Ok(Attempt::Held {
                                holder: "unknown (taken just now)".into(),
                                valid_for: config.validity,
                            })
                        }
                    }
                }
                Err(e) => return Err(e.into()),
            };
            // A first lease on this table: prove the store can replace it conditionally (the
            // local file system cannot), or renewing and releasing would be impossible.
            match storage.put_if_match(path, data.to_bytes(), &created).await {
                Ok(v) => v,
                Err(StorageError::Unsupported { reason, .. }) => {
                    storage.delete(path).await?;
                    return Err(LeaseError::NoConditionalWrites(reason));
                }
                Err(StorageError::Conflict { .. }) => match landed(storage, path, &data).await? {
                    Some(v) => v,
                    None => {
                        return Err(LeaseError::NoConditionalWrites(
                            "the store refused to replace the lock file at the version it had just reported".into(),
                        ))
                    }
                },
                Err(e) => return Err(e.into()),
            }
        }
        Some((bytes, version)) => {
            let current = LockData::parse(&bytes).map_err(|reason| LeaseError::Corrupt {
                path: path.to_string(),
                reason,
            })?;
            if !current.is_free(now) {
                return Ok(Attempt::Held {
                    valid_for: current.valid_for(now),
                    holder: current.owner,
                });
            }
            if !current.expired {
                warn!(table = %storage.uri(), lock = %path, holder = %current.owner, lapsed_ms = now.saturating_sub(current.valid_until), "taking over a lease whose holder let it lapse");
            }
            match storage.put_if_match(path, data.to_bytes(), &version).await {
                Ok(v) => v,
                Err(StorageError::Conflict { .. }) => match landed(storage, path, &data).await? {
                    Some(v) => v,
                    None => {
                        return Ok(Attempt::Held {
                            holder: "unknown (taken just now)".into(),
                            valid_for: config.validity,
                        })
                    }
                },
                Err(StorageError::Unsupported { reason, .. }) => {
                    return Err(LeaseError::NoConditionalWrites(reason))
                }
                Err(e) => return Err(e.into()),
            }
        }
    };
    if version.e_tag.is_none() && version.version.is_none() {
        // Without a version the lease could neither be renewed nor released safely. Leave it
        // to lapse rather than write blindly.
        return Err(LeaseError::NoConditionalWrites(
            "the store returned no ETag or version for the lock file".into(),
        ));
    }
    info!(table = %storage.uri(), lock = %path, owner, valid_until = data.valid_until, "took the storage lock");
    Ok(Attempt::Taken(Lease::start(
        storage.clone(),
        config.clone(),
        data,
        version,
        written_at,
    )))
}

/// The version at which the lock file holds exactly `data`, or `None` when it holds anything
/// else. A conditional write whose answer was lost after the store wrote it (the connection
/// closed) is sent again by the store client, and the store refuses the repeat (412): the write
/// landed if the file is what it wrote (`data` names this process's owner id and a validity to
/// the millisecond), and was someone else's otherwise.
async fn landed(
    storage: &Storage,
    path: &RelPath,
    data: &LockData,
) -> Result<Option<ObjectVersion>, StorageError> {
    Ok(
        match storage.get_versioned(path, SMALL_FILE_MAX_READ).await? {
            Some((bytes, version)) if bytes == data.to_bytes() => Some(version),
            _ => None,
        },
    )
}

/// What the renewal task and the releaser share.
#[derive(Debug)]
struct Shared {
    /// The last version we wrote and what it says.
    last: tokio::sync::Mutex<(LockData, ObjectVersion)>,
}

/// A held lease, renewed in the background until released.
#[derive(Debug)]
pub struct Lease {
    storage: Storage,
    config: StorageLockConfig,
    shared: Arc<Shared>,
    state: watch::Receiver<LeaseState>,
    renewer: JoinHandle<()>,
}

impl Lease {
    fn start(
        storage: Storage,
        config: StorageLockConfig,
        data: LockData,
        version: ObjectVersion,
        written_at: Instant,
    ) -> Self {
        let stop_by = written_at + config.validity.saturating_sub(config.safety_margin());
        let (tx, rx) = watch::channel(LeaseState::Held { stop_by });
        let shared = Arc::new(Shared {
            last: tokio::sync::Mutex::new((data, version)),
        });
        let renewer = tokio::spawn(renew(
            storage.clone(),
            config.clone(),
            shared.clone(),
            tx,
            stop_by,
        ));
        Self {
            storage,
            config,
            shared,
            state: rx,
            renewer,
        }
    }

    /// The lease's state, for the fence.
    pub fn state(&self) -> watch::Receiver<LeaseState> {
        self.state.clone()
    }

    /// Stop renewing and write `expired: true` (If-Match on our last version). A lease someone
    /// else took meanwhile is left alone.
    ///
    /// The version may have moved on under our own name: a renewal that landed without its
    /// answer (lost, or cut off by stopping the renewer mid-request), or this release landed
    /// and its answer lost. The lock file then still names this lease's owner (an id of its
    /// own): released at the version read, instead of left held until it lapses.
    pub async fn release(mut self) -> Result<(), StorageError> {
        self.renewer.abort();
        let _ = (&mut self.renewer).await;
        let last = self.shared.last.lock().await;
        let (data, version) = &*last;
        let path = &self.config.path;
        // As Hudi releases: `expired: true`, `validUntil` left as it was.
        let released = |d: &LockData| LockData {
            expired: true,
            ..d.clone()
        };
        let left_alone = || {
            warn!(table = %self.storage.uri(), lock = %path, "the lease was taken by someone else before release; left alone");
            Ok(())
        };
        match self
            .storage
            .put_if_match(path, released(data).to_bytes(), version)
            .await
        {
            Ok(_) => return Ok(()),
            Err(StorageError::Conflict { .. }) => {}
            Err(e) => return Err(e),
        }
        let Some((bytes, now_at)) = self
            .storage
            .get_versioned(path, SMALL_FILE_MAX_READ)
            .await?
        else {
            return left_alone();
        };
        let current = match LockData::parse(&bytes) {
            Ok(c) if c.owner == data.owner => c,
            _ => return left_alone(),
        };
        if current.expired {
            return Ok(());
        }
        match self
            .storage
            .put_if_match(path, released(&current).to_bytes(), &now_at)
            .await
        {
            Ok(_) => Ok(()),
            Err(StorageError::Conflict { .. }) => left_alone(),
            Err(e) => Err(e),
        }
    }
}

impl Drop for Lease {
    fn drop(&mut self) {
        // An unreleased lease stops renewing and lapses, as a crashed holder's would.
        self.renewer.abort();
    }
}

/// Renew every `renew_interval`; mark the lease lost when a renewal cannot land before the
/// stop-by time, or when the lock file changed under us.
async fn renew(
    storage: Storage,
    config: StorageLockConfig,
    shared: Arc<Shared>,
    tx: watch::Sender<LeaseState>,
    mut stop_by: Instant,
) {
    let lost = |tx: &watch::Sender<LeaseState>, why: String| {
        warn!(table = %storage.uri(), lock = %config.path, reason = %why, "lost the storage lock");
        let _ = tx.send(LeaseState::Lost(why));
    };
    loop {
        let next = Instant::now() + config.renew_interval;
        if next >= stop_by {
            // Renewing on schedule would be too late: try right away.
        } else {
            tokio::select! {
                _ = tokio::time::sleep_until(next) => {}
                _ = tx.closed() => return,
            }
        }
        if Instant::now() >= stop_by {
            lost(
                &tx,
                "the lease could not be renewed before it would lapse".into(),
            );
            return;
        }
        let mut last = shared.last.lock().await;
        let written_at = Instant::now();
        let data = LockData {
            expired: false,
            valid_until: now_ms().saturating_add(duration_ms(config.validity)),
            owner: last.0.owner.clone(),
        };
        let attempt = tokio::time::timeout(
            stop_by.saturating_duration_since(Instant::now()),
            storage.put_if_match(&config.path, data.to_bytes(), &last.1),
        )
        .await;
        match attempt {
            Ok(Ok(version)) => {
                *last = (data, version);
                stop_by = written_at + config.validity.saturating_sub(config.safety_margin());
                let _ = tx.send(LeaseState::Held { stop_by });
                debug!(table = %storage.uri(), lock = %config.path, "renewed the storage lock");
            }
            Ok(Err(StorageError::Conflict { .. })) => {
                match landed(&storage, &config.path, &data).await {
                    Ok(Some(version)) => {
                        // Our renewal, its answer lost: renewed.
                        *last = (data, version);
                        stop_by =
                            written_at + config.validity.saturating_sub(config.safety_margin());
                        let _ = tx.send(LeaseState::Held { stop_by });
                        continue;
                    }
                    Ok(None) => lost(
                        &tx,
                        "the lock file changed under us: another process took the lease".into(),
                    ),
                    Err(e) => lost(
                        &tx,
                        format!("the lock file changed under us and could not be read back: {e}"),
                    ),
                }
                return;
            }
            Ok(Err(e)) => {
                warn!(table = %storage.uri(), lock = %config.path, error = %e, "renewing the storage lock failed; retrying");
                drop(last);
                tokio::time::sleep(
                    (config.renew_interval / 10)
                        .max(Duration::from_millis(50))
                        .min(stop_by.saturating_duration_since(Instant::now())),
                )
                .await;
                continue;
            }
            Err(_) => {
                lost(
                    &tx,
                    "renewing the lease did not finish before it would lapse".into(),
                );
                return;
            }
        }
    }
}

impl From<StorageError> for LeaseError {
    fn from(e: StorageError) -> Self {
        LeaseError::Storage(e)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lock_data_is_read_and_written_as_hudi_writes_it() {
        let d = LockData::parse(
            br#"{"expired":false,"validUntil":1732960000000,"owner":"5f0e2c1a-6a7e-4f61-a2bd-0d9a8b4e8c11","extra":1}"#,
        )
        .unwrap();
        assert!(!d.expired);
        assert_eq!(d.valid_until, 1_732_960_000_000);
        let back = String::from_utf8(d.to_bytes().to_vec()).unwrap();
        assert_eq!(
            back,
            r#"{"expired":false,"validUntil":1732960000000,"owner":"5f0e2c1a-6a7e-4f61-a2bd-0d9a8b4e8c11"}"#
        );
    }

    #[test]
    fn a_lock_file_without_a_field_or_with_a_mistyped_owner_is_corrupt() {
        for bad in [
            &br#"{"expired":false,"validUntil":1}"#[..],
            br#"{"expired":false,"validUntil":1,"owner":{"host":"h"}}"#,
            br#"{"expired":"no","validUntil":1,"owner":"x"}"#,
            br#"{"expired":false,"validUntil":null,"owner":"x"}"#,
            br#"[1,2]"#,
            b"garbage",
            b"",
        ] {
            let err = LockData::parse(bad).unwrap_err();
            assert!(err.contains("not a Hudi storage lock file"), "{err}");
        }
    }

    #[test]
    fn values_jackson_would_coerce_are_accepted() {
        let d = LockData::parse(br#"{"expired":"true","validUntil":"17","owner":42}"#).unwrap();
        assert!(d.expired);
        assert_eq!(d.valid_until, 17);
        assert_eq!(d.owner, "42");
    }

    #[test]
    fn a_lease_is_free_when_released_or_lapsed() {
        let d = |expired, valid_until| LockData {
            expired,
            valid_until,
            owner: "o".into(),
        };
        assert!(!d(false, 2000).is_free(1000));
        assert!(d(true, 2000).is_free(1000));
        assert!(!d(false, 1000).is_free(1500), "500 ms of drift are allowed");
        assert!(d(false, 1000).is_free(1501));
    }

    #[test]
    fn the_safety_margin_is_a_tenth_of_the_validity_within_bounds() {
        let c = |secs| StorageLockConfig {
            validity: Duration::from_secs(secs),
            ..Default::default()
        };
        assert_eq!(c(300).safety_margin(), Duration::from_secs(10));
        assert_eq!(c(30).safety_margin(), Duration::from_secs(3));
        assert_eq!(c(5).safety_margin(), Duration::from_secs(1));
    }
}

#[cfg(test)]
mod fuzz_tests {
    use proptest::prelude::*;

    use super::*;
    use crate::fuzz;

    const VALID: &[u8] =
        br#"{"expired":false,"validUntil":1732960000000,"owner":"5f0e2c1a-6a7e-4f61-a2bd-0d9a8b4e8c11"}"#;

    /// Plausible clocks: anything within ±10 000 years of the epoch, in ms.
    fn now() -> impl Strategy<Value = i64> {
        -315_569_520_000_000i64..315_569_520_000_000
    }

    /// A parsed lock file is judged without panicking, and a lease that runs past `now` (more
    /// than the drift allowance) is held unless released.
    fn judge(d: &LockData, now: i64) {
        let free = d.is_free(now);
        if !d.expired && d.valid_until >= now.saturating_add(CLOCK_DRIFT_MS) {
            assert!(!free, "{d:?} is free at {now}");
        }
        let _ = d.valid_for(now);
    }

    #[test]
    fn fuzz_a_lease_valid_until_the_end_of_time_is_held_not_overflowed() {
        let forever = LockData::parse(
            format!(
                r#"{{"expired":false,"validUntil":{},"owner":"o"}}"#,
                i64::MAX
            )
            .as_bytes(),
        )
        .unwrap();
        assert!(!forever.is_free(1_732_960_000_000));
        assert!(forever.valid_for(1_732_960_000_000) > Duration::from_secs(1 << 40));
        let long_ago = LockData::parse(
            format!(
                r#"{{"expired":false,"validUntil":"{}","owner":"o"}}"#,
                i64::MIN
            )
            .as_bytes(),
        )
        .unwrap();
        assert!(long_ago.is_free(0));
        assert_eq!(long_ago.valid_for(0), Duration::ZERO);
    }

    proptest! {
        #![proptest_config(fuzz::config(1024))]

        #[test]
        fn fuzz_lock_files_of_arbitrary_bytes_are_errors_or_judged(bytes in fuzz::bytes(256), now in now()) {
            if let Ok(d) = LockData::parse(&bytes) {
                judge(&d, now);
            }
        }

        #[test]
        fn fuzz_damaged_lock_files_are_errors_or_judged(bytes in fuzz::mutated(VALID.to_vec()), now in now()) {
            match LockData::parse(&bytes) {
                Ok(d) => judge(&d, now),
                Err(e) => prop_assert!(e.contains("not a Hudi storage lock file"), "{e}"),
            }
        }

        #[test]
        fn fuzz_lock_files_with_any_values_are_errors_or_judged(
            expired in prop_oneof![Just("true".to_string()), Just("\"false\"".to_string()), "[a-z0-9\"]{0,6}"],
            valid_until in prop_oneof![
                any::<i64>().prop_map(|v| v.to_string()),
                prop_oneof![Just(i64::MAX), Just(i64::MIN), i64::MAX - 1000..=i64::MAX, i64::MIN..i64::MIN + 1000]
                    .prop_map(|v| v.to_string()), any::<i64>().prop_map(|v| format!("\"{v}\"")), any::<f64>().prop_map(|v| v.to_string()), "[-0-9e.\"]{0,24}"],
            owner in prop_oneof![any::<i64>().prop_map(|v| v.to_string()), ".{0,12}".prop_map(|s| serde_json::to_string(&s).unwrap()), Just("null".to_string()), Just("{}".to_string())],
            now in now(),
        ) {
            let text = format!(r#"{{"expired":{expired},"validUntil":{valid_until},"owner":{owner}}}"#);
            if let Ok(d) = LockData::parse(text.as_bytes()) {
                judge(&d, now);
            }
        }
    }
}
