//! Timeline mutations shared by the executors.

use bytes::Bytes;
use chrono::Utc;

use crate::storage::{RelPath, Storage, StorageError};
use crate::table::TableConfig;
use crate::timeline::{format_instant, Action, InstantZone, State, Timeline, TimelineFileName};

/// A new instant time: now in the table's zone, made strictly greater than every time on the
/// given timelines (so it sorts after them, as Hudi's time generator guarantees).
pub fn new_instant_time(timelines: &[&Timeline], zone: InstantZone) -> String {
    let now = format_instant(Utc::now(), zone);
    let max = timelines.iter().filter_map(|t| t.max_time()).max();
    match max {
        Some(m) if m.len() == now.len() && m >= now.as_str() => increment(m),
        Some(m) if m.len() > now.len() && m[..now.len()] >= *now.as_str() => {
            increment(&m[..now.len()])
        }
        _ => now,
    }
}

/// The decimal string one greater (same width; all-9s grows by a digit).
fn increment(s: &str) -> String {
    let mut digits: Vec<u8> = s.bytes().collect();
    for d in digits.iter_mut().rev() {
        if *d == b'9' {
            *d = b'0';
        } else {
            *d += 1;
            return String::from_utf8(digits).unwrap_or_default();
        }
    }
    format!("1{}", String::from_utf8(digits).unwrap_or_default())
}

/// The path of a timeline file.
pub(crate) fn timeline_file(
    config: &TableConfig,
    requested_time: &str,
    completion_time: Option<&str>,
    action: Action,
    state: State,
) -> Result<RelPath, StorageError> {
    let name = TimelineFileName {
        requested_time: requested_time.to_string(),
        completion_time: completion_time.map(str::to_string),
        action,
        state,
    }
    .format(config.timeline_layout);
    Ok(config.timeline_path().join(&name)?)
}

/// Create a timeline file only if it does not exist. `Ok(false)` if it already did.
///
/// A create whose answer was lost after the store wrote the object (the connection closed) is
/// sent again by the store client, and the store then reports the object as existing: an
/// existing object holding exactly these (non-empty) bytes is this create's own. Every such
/// file hudi-keeper creates is unique to its run (an Avro plan or metadata carries a random
/// sync marker; a log block names new instant times).
pub(crate) async fn create_if_absent(
    storage: &Storage,
    path: &RelPath,
    bytes: Vec<u8>,
) -> Result<bool, StorageError> {
    let bytes = Bytes::from(bytes);
    match storage.put_if_absent(path, bytes.clone()).await {
        Ok(()) => Ok(true),
        Err(StorageError::AlreadyExists { .. }) => is_our_own(storage, path, &bytes).await,
        Err(e) => Err(e),
    }
}

/// Whether the existing object at `path` is the one a create of `bytes` wrote (see
/// [`create_if_absent`]). An empty file cannot tell whose it is: not ours.
pub(crate) async fn is_our_own(
    storage: &Storage,
    path: &RelPath,
    bytes: &Bytes,
) -> Result<bool, StorageError> {
    if bytes.is_empty() {
        return Ok(false);
    }
    // A larger file is not ours: it is not read.
    match storage.get_opt_capped(path, bytes.len() as u64).await {
        Ok(found) => Ok(found.is_some_and(|b| b == *bytes)),
        Err(StorageError::TooLarge { .. }) => Ok(false),
        Err(e) => Err(e),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn a_file_larger_than_ours_is_not_ours_and_is_not_read() {
        use crate::storage::testing::SizeClaimingStore;
        use object_store::memory::InMemory;
        use object_store::ObjectStore;
        use std::sync::Arc;
        let inner: Arc<dyn ObjectStore> = Arc::new(InMemory::new());
        let path = RelPath::parse(".hoodie/1.rollback.requested").unwrap();
        let ours = Bytes::from_static(b"plan");
        Storage::from_store(Arc::clone(&inner), "t", "memory://t")
            .put(&path, ours.clone())
            .await
            .unwrap();
        assert!(is_our_own(
            &Storage::from_store(Arc::clone(&inner), "t", "m://t"),
            &path,
            &ours
        )
        .await
        .unwrap());
        // The same key, reported as 10 GiB (another writer's file, or a damaged one).
        let huge = Arc::new(SizeClaimingStore::new(inner, 10 << 30));
        let s = Storage::from_store(huge.clone(), "t", "memory://t");
        assert!(!is_our_own(&s, &path, &ours).await.unwrap());
        assert_eq!(huge.body_bytes_read(), 0);
    }

    #[test]
    fn increments_keep_the_width() {
        assert_eq!(increment("20250101000000999"), "20250101000001000");
        assert_eq!(increment("99"), "100");
    }

    #[test]
    fn new_times_sort_after_the_timeline() {
        let t = Timeline::from_files(
            vec![crate::storage::FileMeta {
                path: RelPath::parse(".hoodie/timeline/99990101000000000.commit.requested")
                    .unwrap(),
                size: 0,
                last_modified: Utc::now(),
            }],
            crate::table::TimelineLayout::V2,
            InstantZone::Utc,
        );
        assert_eq!(
            new_instant_time(&[&t], InstantZone::Utc),
            "99990101000000001"
        );
        let empty = Timeline::default();
        assert_eq!(new_instant_time(&[&empty], InstantZone::Utc).len(), 17);
    }
}
