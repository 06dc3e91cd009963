//! The rows of one LSM timeline parquet file (`HoodieLSMTimelineInstant`), through the `parquet`
//! crate's row reader, after [`super::parquet_check`] bounded what it will allocate.

use bytes::Bytes;
use parquet::file::reader::{FileReader, SerializedFileReader};
use parquet::record::Field;
use parquet::schema::types::Type;

use super::{parquet_check, rolled_back_of_restore, rolled_back_of_rollback, Entry, EntryState};
use crate::format::restore::RestoreMetadata;
use crate::format::rollback::RollbackMetadata;

/// The columns read (`plan` and `version` are not needed).
const COLUMNS: [&str; 4] = ["instantTime", "completionTime", "action", "metadata"];

/// Every row of the file as an entry (each a completed instant).
///
/// The `parquet` crate asserts on some damage [`parquet_check`] does not look for (parquet 60
/// panics in `read_num_bytes` when a dictionary page's plain values run past its bytes): a
/// panic left in it is caught and the file reported damaged, as `avro_check::parse_schema`
/// does for the Avro library. Nothing outlives the closure but its result.
pub(crate) fn read_lsm_file(bytes: Bytes) -> Result<Vec<Entry>, String> {
    parquet_check::check(&bytes)?;
    std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| read_rows(bytes)))
        .unwrap_or_else(|_| Err("the parquet reader failed on damaged data".into()))
}

fn read_rows(bytes: Bytes) -> Result<Vec<Entry>, String> {
    let reader = SerializedFileReader::new(bytes).map_err(|e| e.to_string())?;
    let schema = reader.metadata().file_metadata().schema();
    let fields: Vec<_> = schema
        .get_fields()
        .iter()
        .filter(|f| COLUMNS.contains(&f.name()))
        .cloned()
        .collect();
    for c in ["instantTime", "action"] {
        if !fields.iter().any(|f| f.name() == c) {
            return Err(format!("no `{c}` column"));
        }
    }
    let projection = Type::group_type_builder(schema.name())
        .with_fields(fields)
        .build()
        .map_err(|e| e.to_string())?;
    let rows = reader
        .get_row_iter(Some(projection))
        .map_err(|e| e.to_string())?;
    let mut out = Vec::new();
    for (n, row) in rows.enumerate() {
        let row = row.map_err(|e| format!("row {n}: {e}"))?;
        let mut time = None;
        let mut completion = None;
        let mut action = None;
        let mut metadata = None;
        for (name, value) in row.get_column_iter() {
            match (name.as_str(), value) {
                (_, Field::Null) => {}
                ("instantTime", Field::Str(s)) => time = Some(s.clone()),
                ("completionTime", Field::Str(s)) => completion = Some(s.clone()),
                ("action", Field::Str(s)) => action = Some(s.clone()),
                ("metadata", Field::Bytes(b)) => metadata = Some(b.data()),
                (name, other) => {
                    return Err(format!("row {n}: column `{name}` holds {other:?}"));
                }
            }
        }
        let (Some(time), Some(action)) = (time, action) else {
            return Err(format!("row {n}: no instant time or action"));
        };
        let mut entry = Entry {
            requested_time: time,
            action,
            state: EntryState::Completed,
            completion_time: completion,
            rolled_back: Vec::new(),
            incomplete: None,
        };
        rolled_back(&mut entry, metadata).map_err(|e| format!("row {n}: {e}"))?;
        out.push(entry);
    }
    Ok(out)
}

/// What a rollback or restore rolled back, from its completed file's bytes.
fn rolled_back(entry: &mut Entry, metadata: Option<&[u8]>) -> Result<(), String> {
    let undo = matches!(entry.action.as_str(), "rollback" | "restore");
    match metadata {
        Some(bytes) if !bytes.is_empty() && entry.action == "rollback" => {
            let m = RollbackMetadata::from_avro(bytes)
                .map_err(|e| format!("rollback {}: {e}", entry.requested_time))?;
            entry.rolled_back = rolled_back_of_rollback(&m);
        }
        Some(bytes) if !bytes.is_empty() && entry.action == "restore" => {
            let m = RestoreMetadata::from_avro(bytes)
                .map_err(|e| format!("restore {}: {e}", entry.requested_time))?;
            entry.rolled_back = rolled_back_of_restore(&m);
        }
        _ if undo => {
            entry.incomplete = Some(format!(
                "completed {} {} archived without its metadata: what it rolled back is not known",
                entry.action, entry.requested_time
            ));
        }
        _ => {}
    }
    Ok(())
}
