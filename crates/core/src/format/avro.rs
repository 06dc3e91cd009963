//! Reading Hudi's Avro timeline files: object container files holding one record, written by
//! Java's `DataFileWriter` (hudi-format.md §8.1).

use std::hash::{BuildHasher, Hasher};

use apache_avro::types::Value;
use apache_avro::Schema;

pub use super::avro_check::parse_schema;
pub use super::avro_error::AvroError;

/// Parse `json` once into `cell` (a `static` of the caller's) and hand out the cached schema.
pub(crate) fn cached_schema(
    cell: &'static std::sync::OnceLock<Schema>,
    json: &str,
) -> Result<&'static Schema, AvroError> {
    if let Some(s) = cell.get() {
        return Ok(s);
    }
    let parsed = Schema::parse_str(json).map_err(|e| AvroError::Shape(e.to_string()))?;
    Ok(cell.get_or_init(|| parsed))
}

/// Decode the single record of an Avro timeline file. The bytes are bounds-checked first
/// ([`super::avro_check`]): every length and count must fit in the input, so nothing is
/// allocated beyond a small multiple of its size; compressed files are refused.
pub fn read_single_record(bytes: &[u8]) -> Result<Value, AvroError> {
    super::avro_check::check_container(bytes)?;
    let reader =
        apache_avro::Reader::new(bytes).map_err(|e| AvroError::Container(e.to_string()))?;
    let mut records = reader;
    match records.next() {
        Some(Ok(v)) => Ok(v),
        Some(Err(e)) => Err(AvroError::Container(e.to_string())),
        None => Err(AvroError::Empty),
    }
}

/// Decode the single record of an Avro timeline file, resolving its embedded writer schema
/// against `reader` (so files with extra or missing defaulted fields still read). Bounds-checked
/// as [`read_single_record`].
pub fn read_single_record_as(bytes: &[u8], reader: &Schema) -> Result<Value, AvroError> {
    super::avro_check::check_container(bytes)?;
    let mut records = apache_avro::Reader::with_schema(reader, bytes)
        .map_err(|e| AvroError::Container(e.to_string()))?;
    match records.next() {
        Some(Ok(v)) => Ok(v),
        Some(Err(e)) => Err(AvroError::Container(e.to_string())),
        None => Err(AvroError::Empty),
    }
}

/// Write one record as an Avro object container file the way Hudi's Java `DataFileWriter`
/// does: no codec entry, the schema text `schema_json` embedded verbatim, one data block.
pub fn write_single_record(
    schema_json: &str,
    schema: &Schema,
    record: Value,
) -> Result<Vec<u8>, AvroError> {
    let datum =
        apache_avro::to_avro_datum(schema, record).map_err(|e| AvroError::Shape(e.to_string()))?;
    let sync = sync_marker();
    let mut out = Vec::with_capacity(schema_json.len() + datum.len() + 64);
    out.extend_from_slice(b"Obj\x01");
    // File metadata: a map with one entry, then the end-of-map marker.
    put_long(&mut out, 1);
    put_bytes(&mut out, b"avro.schema");
    put_bytes(&mut out, schema_json.as_bytes());
    put_long(&mut out, 0);
    out.extend_from_slice(&sync);
    // One data block of one record.
    put_long(&mut out, 1);
    put_long(&mut out, datum.len() as i64);
    out.extend_from_slice(&datum);
    out.extend_from_slice(&sync);
    Ok(out)
}

fn put_long(out: &mut Vec<u8>, v: i64) {
    let mut z = ((v << 1) ^ (v >> 63)) as u64;
    loop {
        if z & !0x7f == 0 {
            out.push(z as u8);
            return;
        }
        out.push(((z & 0x7f) | 0x80) as u8);
        z >>= 7;
    }
}

fn put_bytes(out: &mut Vec<u8>, b: &[u8]) {
    put_long(out, b.len() as i64);
    out.extend_from_slice(b);
}

/// 16 unpredictable bytes for the container's sync marker.
fn sync_marker() -> [u8; 16] {
    let state = std::collections::hash_map::RandomState::new();
    let mut out = [0u8; 16];
    for (i, chunk) in out.chunks_mut(8).enumerate() {
        let mut h = state.build_hasher();
        h.write_usize(i);
        h.write_u128(
            std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .map(|d| d.as_nanos())
                .unwrap_or_default(),
        );
        chunk.copy_from_slice(&h.finish().to_le_bytes());
    }
    out
}

/// A field of a record value, looking through a `["null", T]` union.
pub fn field<'a>(record: &'a Value, name: &str) -> Option<&'a Value> {
    let Value::Record(fields) = record else {
        return None;
    };
    fields
        .iter()
        .find(|(n, _)| n == name)
        .map(|(_, v)| unwrap_union(v))
}

/// The value inside a union (or the value itself).
pub fn unwrap_union(v: &Value) -> &Value {
    match v {
        Value::Union(_, inner) => inner,
        other => other,
    }
}

/// A string field, if present and a string.
pub fn string_field<'a>(record: &'a Value, name: &str) -> Option<&'a str> {
    match field(record, name)? {
        Value::String(s) => Some(s),
        _ => None,
    }
}

/// Whether the bytes of a `replacecommit.requested` (or `clustering.requested`) file describe a
/// clustering: a `HoodieRequestedReplaceMetadata` whose `operationType` is `CLUSTER`. An empty
/// file is not a clustering (Hudi's `ClusteringUtils` reads it the same way).
pub fn requested_replace_is_clustering(bytes: &[u8]) -> Result<bool, AvroError> {
    if bytes.is_empty() {
        return Ok(false);
    }
    let record = read_single_record(bytes)?;
    match string_field(&record, "operationType") {
        Some(op) => Ok(op == "CLUSTER"),
        None => Err(AvroError::Shape(
            "no `operationType` in the requested replace metadata".into(),
        )),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use apache_avro::{Schema, Writer};

    pub(crate) fn requested_replace(op: &str) -> Vec<u8> {
        let schema = Schema::parse_str(
            r#"{"type":"record","name":"HoodieRequestedReplaceMetadata","namespace":"org.apache.hudi.avro.model",
                "fields":[{"name":"operationType","type":["null","string"],"default":null},
                          {"name":"version","type":["int","null"],"default":1}]}"#,
        )
        .unwrap();
        let mut w = Writer::new(&schema, Vec::new());
        w.append(Value::Record(vec![
            (
                "operationType".into(),
                Value::Union(1, Box::new(Value::String(op.into()))),
            ),
            ("version".into(), Value::Union(0, Box::new(Value::Int(1)))),
        ]))
        .unwrap();
        w.into_inner().unwrap()
    }

    #[test]
    fn tells_clustering_from_other_replace_commits() {
        assert!(requested_replace_is_clustering(&requested_replace("CLUSTER")).unwrap());
        assert!(!requested_replace_is_clustering(&requested_replace("INSERT_OVERWRITE")).unwrap());
        assert!(!requested_replace_is_clustering(b"").unwrap());
    }

    #[test]
    fn garbage_and_truncated_files_are_errors() {
        assert!(requested_replace_is_clustering(b"not avro at all").is_err());
        let full = requested_replace("CLUSTER");
        assert!(requested_replace_is_clustering(&full[..full.len() / 2]).is_err());
    }
}
