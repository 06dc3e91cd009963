//! Appending a block to a file slice as a new log version, the way Hudi writes on stores
//! without append (and the way hudi-keeper always writes): an APPEND marker first, then the
//! new log file created if absent. A rerun finds its earlier attempt's file through the marker
//! and reuses it when it holds the same block, so a crash at any step never leaves two blocks.

use bytes::Bytes;

use super::timeline_ops::{create_if_absent, is_our_own};
use crate::storage::{RelPath, Storage, StorageError};
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
        if let Some(bytes) = storage.get_opt(&rel).await? {
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
