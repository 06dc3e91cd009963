//! The layout-1 archive: Hudi log files `.commits_.archive.<N>_<token>` of Avro data blocks of
//! `HoodieArchivedMetaEntry` records.

use apache_avro::types::Value;
use apache_avro::Schema;

use super::{rolled_back_of_restore, rolled_back_of_rollback, Entry, EntryState, Reading};
use crate::format::avro::{field, parse_schema, string_field, unwrap_union};
use crate::format::avro_check::check_datum;
use crate::format::log_block::{read_blocks, LogBlock};
use crate::format::restore::RestoreMetadata;
use crate::format::rollback::RollbackMetadata;
use crate::storage::RelPath;

/// The log block type of an Avro data block (`HoodieLogBlockType.AVRO_DATA_BLOCK`).
const BLOCK_TYPE_AVRO_DATA: i32 = 3;
/// The header key of the writer schema.
const HEADER_SCHEMA: i32 = 2;
const ARCHIVE_PREFIX: &str = ".commits_.archive.";

/// Whether `name` is an archive log file (Hudi's `^\.commits_\.archive\.([0-9]+).*`; `.crc`
/// side files of the local file system start with `..` and are not).
pub(crate) fn is_archive_file(name: &str) -> bool {
    name.strip_prefix(ARCHIVE_PREFIX)
        .is_some_and(|rest| rest.starts_with(|c: char| c.is_ascii_digit()))
}

/// List the folder and read every archive file in it.
pub(crate) async fn read_folder(r: &mut Reading<'_>, dir: &RelPath) {
    let listing = match r
        .storage
        .list_dir_filtered(dir, |p| is_archive_file(p.file_name()))
        .await
    {
        Ok(l) => l,
        Err(source) => {
            r.unread.push(super::ArchivedError::List {
                table: r.table.to_string(),
                path: dir.to_string(),
                source,
            });
            return;
        }
    };
    let mut files = listing.files;
    files.sort_by(|a, b| a.path.cmp(&b.path));
    for f in files {
        let Some(bytes) = r.read(&f.path).await else {
            continue;
        };
        match read_archive_file(&bytes) {
            Ok(entries) => r.add(&f.path, entries),
            Err(reason) => r.corrupt(&f.path, reason),
        }
    }
}

/// The entries of one archive log file. Any block or record that does not read makes the whole
/// file an error: a file read in part cannot tell what it lost.
pub(crate) fn read_archive_file(bytes: &[u8]) -> Result<Vec<Entry>, String> {
    let blocks = read_blocks(bytes).ok_or("not a sequence of well-formed Hudi log blocks")?;
    let mut out = Vec::new();
    for (i, block) in blocks.iter().enumerate() {
        if block.header.block_type != BLOCK_TYPE_AVRO_DATA {
            // Hudi's archived timeline reads Avro data blocks only.
            continue;
        }
        read_data_block(block, &mut out).map_err(|e| format!("block {i}: {e}"))?;
    }
    Ok(out)
}

fn be_i32(bytes: &[u8], at: usize) -> Option<i32> {
    Some(i32::from_be_bytes(
        bytes.get(at..at.checked_add(4)?)?.try_into().ok()?,
    ))
}

/// One Avro data block: `version`, `count`, then `count` times (`length`, Avro binary record),
/// all under the block's `SCHEMA` header.
fn read_data_block(block: &LogBlock<'_>, out: &mut Vec<Entry>) -> Result<(), String> {
    let schema_text = block
        .header
        .entries
        .iter()
        .find(|(k, _)| *k == HEADER_SCHEMA)
        .map(|(_, v)| v.as_str())
        .ok_or("no SCHEMA header")?;
    let schema = parse_schema(schema_text).map_err(|e| e.to_string())?;
    let content = block.content;
    let _version = be_i32(content, 0).ok_or("truncated block content")?;
    let count = be_i32(content, 4).ok_or("truncated block content")?;
    let count = usize::try_from(count).map_err(|_| format!("record count {count}"))?;
    let mut at = 8usize;
    for n in 0..count {
        let len = be_i32(content, at).ok_or_else(|| format!("record {n}: truncated"))?;
        let len = usize::try_from(len).map_err(|_| format!("record {n}: length {len}"))?;
        let start = at + 4;
        let record = start
            .checked_add(len)
            .and_then(|end| content.get(start..end))
            .ok_or_else(|| format!("record {n}: runs past the block"))?;
        out.push(read_record(&schema, record).map_err(|e| format!("record {n}: {e}"))?);
        at = start + len;
    }
    if at != content.len() {
        return Err(format!(
            "{} bytes after the last of {count} records",
            content.len() - at
        ));
    }
    Ok(())
}

/// One `HoodieArchivedMetaEntry`.
fn read_record(schema: &Schema, bytes: &[u8]) -> Result<Entry, String> {
    let used = check_datum(schema, bytes).map_err(|e| e.to_string())?;
    if used != bytes.len() {
        return Err(format!("{} bytes after the record", bytes.len() - used));
    }
    let mut reader = bytes;
    let v = apache_avro::from_avro_datum(schema, &mut reader, None).map_err(|e| e.to_string())?;
    let requested_time = string_field(&v, "commitTime").ok_or("no commitTime")?;
    let action = string_field(&v, "actionType").ok_or("no actionType")?;
    // Records of Hudi before 0.7 have no actionState: they were all completed instants.
    let state = match string_field(&v, "actionState") {
        None | Some("COMPLETED") => EntryState::Completed,
        Some("INFLIGHT") => EntryState::Inflight,
        Some("REQUESTED") => EntryState::Requested,
        Some(other) => return Err(format!("actionState `{other}`")),
    };
    let mut rolled_back = Vec::new();
    if state == EntryState::Completed {
        if let Some(m) = present(&v, "hoodieRollbackMetadata") {
            let m = RollbackMetadata::from_value(m).map_err(|e| e.to_string())?;
            rolled_back.extend(rolled_back_of_rollback(&m));
        }
        if let Some(m) = present(&v, "hoodieRestoreMetadata") {
            let m = RestoreMetadata::from_value(m).map_err(|e| e.to_string())?;
            rolled_back.extend(rolled_back_of_restore(&m));
        }
    }
    // An empty completed rollback file is archived without metadata (Hudi's
    // createMetaWrapperForEmptyInstant): what it rolled back is not known.
    let unknown = state == EntryState::Completed
        && ((action == "rollback" && present(&v, "hoodieRollbackMetadata").is_none())
            || (action == "restore" && present(&v, "hoodieRestoreMetadata").is_none()));
    Ok(Entry {
        requested_time: requested_time.to_string(),
        action: action.to_string(),
        state,
        completion_time: None,
        rolled_back,
        incomplete: unknown.then(|| {
            format!("completed {action} {requested_time} archived without its metadata: what it rolled back is not known")
        }),
    })
}

/// A field that is present and not null.
fn present<'a>(record: &'a Value, name: &str) -> Option<&'a Value> {
    field(record, name).filter(|v| !matches!(unwrap_union(v), Value::Null))
}
