//! Appending a block to a file slice as a new log version, the way Hudi writes on stores
//! without append (and the way hudi-keeper always writes): an APPEND marker first, then the
//! new log file created if absent. A rerun finds its earlier attempt's file through the marker
//! and reuses it when it holds the same block, so a crash at any step never leaves two blocks.

use bytes::Bytes;

use super::timeline_ops::{create_if_absent, is_our_own};
use crate::storage::{RelPath, Storage, StorageError, DEFAULT_MAX_READ};
use crate::table::files::{log_file_name, DataFile};
use crate::Error;

/// Where a block goes: the file slice, and the write token of the new log file's name.
pub(super) struct Slice<'a> {
    /// The partition (folder) of the file group, relative to the table.
    pub partition: &'a str,
    /// The file group.
    pub file_id: &'a str,
    /// The file slice's base instant (the instant in its log files' names).
    pub base_instant: &'a str,
    /// The write token of the new log file's name.
    pub write_token: &'a str,
}

/// How many taken log versions in a row an append skips before it gives up.
const MAX_VERSION_TRIES: usize = 16;

/// Append `block` to `slice` as a new log version, with its APPEND marker under `markers` (the
/// marker folder of the writing instant). A log file an earlier attempt wrote (named by one of
/// those markers, of this slice, and whose bytes `is_ours`) is reused. Returns the log file and
/// its size. Errors name `instant`, the instant the block is written for.
pub(super) async fn append_block(
    storage: &Storage,
    instant: &str,
    markers: &RelPath,
    slice: &Slice<'_>,
    block: &[u8],
    is_ours: impl Fn(&[u8]) -> bool,
) -> Result<(RelPath, i64), Error> {
    let part = RelPath::parse(slice.partition).map_err(StorageError::from)?;
    let rmarkers = markers.join_rel(&part);
    for m in storage.list_dir(&rmarkers).await?.files {
        let Some(log) = m.file_name().strip_suffix(".marker.APPEND") else {
            continue;
        };
        let Some(DataFile::Log {
            file_id: f,
            instant,
            ..
        }) = DataFile::parse(log)
        else {
            continue;
        };
        if f != slice.file_id || instant != slice.base_instant {
            continue;
        }
        let rel = part.join(log).map_err(StorageError::from)?;
        // Ours holds the one block: a file over the usual cap (or over the block, if that is
        // larger) is not ours, and is not read.
        let cap = DEFAULT_MAX_READ.max(block.len() as u64);
        let found = match storage.get_opt_capped(&rel, cap).await {
            Ok(found) => found,
            Err(StorageError::TooLarge { .. }) => None,
            Err(e) => return Err(e.into()),
        };
        if let Some(bytes) = found {
            if is_ours(&bytes) {
                return Ok((rel, bytes.len() as i64));
            }
        }
    }
    let listing = storage.list_dir(&part).await?;
    let mut version = listing
        .files
        .iter()
        .filter_map(|m| match DataFile::parse(m.file_name()) {
            Some(DataFile::Log {
                file_id: f,
                instant,
                version,
                ..
            }) if f == slice.file_id && instant == slice.base_instant => Some(version),
            _ => None,
        })
        .max()
        .unwrap_or(0);
    for _ in 0..MAX_VERSION_TRIES {
        version += 1;
        let name = log_file_name(
            slice.file_id,
            slice.base_instant,
            version,
            slice.write_token,
        );
        let rel = part.join(&name).map_err(StorageError::from)?;
        let marker = rmarkers
            .join(&format!("{name}.marker.APPEND"))
            .map_err(StorageError::from)?;
        create_if_absent(storage, &marker, Vec::new()).await?;
        let bytes = Bytes::copy_from_slice(block);
        match storage.put_if_absent(&rel, bytes.clone()).await {
            Ok(()) => return Ok((rel, block.len() as i64)),
            // A create whose answer was lost, sent again: the file is this block (see
            // `create_if_absent`), not another writer's.
            Err(StorageError::AlreadyExists { .. })
                if is_our_own(storage, &rel, &bytes).await? =>
            {
                return Ok((rel, block.len() as i64))
            }
            Err(StorageError::AlreadyExists { .. }) => continue,
            Err(e) => return Err(e.into()),
        }
    }
    Err(Error::Refused {
        table: storage.uri().to_string(),
        instant: instant.to_string(),
        reason: format!(
            "could not find a free log version for file group {} in `{}`",
            slice.file_id, slice.partition
        ),
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::storage::testing::SizeClaimingStore;
    use object_store::memory::InMemory;
    use object_store::ObjectStore;
    use std::sync::Arc;

    #[tokio::test]
    async fn a_log_file_of_an_earlier_attempt_too_large_to_be_ours_is_passed_over_unread() {
        let inner: Arc<dyn ObjectStore> = Arc::new(InMemory::new());
        let plain = Storage::from_store(Arc::clone(&inner), "t", "memory://t");
        let earlier = log_file_name("fg1", "100", 1, "1-0-1");
        let p = |s: &str| RelPath::parse(s).unwrap();
        plain
            .put(&p(&format!("p1/{earlier}")), Bytes::from_static(b"block"))
            .await
            .unwrap();
        plain
            .put(
                &p(&format!(".hoodie/.temp/200/p1/{earlier}.marker.APPEND")),
                Bytes::new(),
            )
            .await
            .unwrap();
        // Every read reports 10 GiB: the earlier attempt's file cannot be our block.
        let huge = Arc::new(SizeClaimingStore::new(inner, 10 << 30));
        let s = Storage::from_store(huge.clone(), "t", "memory://t");
        let slice = Slice {
            partition: "p1",
            file_id: "fg1",
            base_instant: "100",
            write_token: "1-0-1",
        };
        let (rel, size) =
            append_block(&s, "200", &p(".hoodie/.temp/200"), &slice, b"block", |_| {
                true
            })
            .await
            .unwrap();
        assert_eq!(rel.file_name(), log_file_name("fg1", "100", 2, "1-0-1"));
        assert_eq!(size, 5);
        assert_eq!(huge.body_bytes_read(), 0);
    }
}
