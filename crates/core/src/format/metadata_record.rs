//! Metadata-table records of the `files` partition, as Hudi 0.14/0.15 (table version 6) writes
//! them into `HFILE_DATA_BLOCK`s: Avro binary (no container) under the log block's schema, which
//! is `HoodieMetadataRecord` with Hudi's five meta fields (`_hoodie_commit_time`, ...) in front.
//!
//! The schemas are Hudi 0.15.0's, printed by its own classes (`crates/core/avro/`):
//! `HoodieMetadataRecord.v6.avsc` is `HoodieMetadataRecord.getClassSchema()`, and
//! `HoodieMetadataRecord.v6.withMetaFields.avsc` is `HoodieAvroUtils.addMetadataFields` of it,
//! byte for byte the `SCHEMA` header and file-info `schema` of a real 0.15 metadata-table log
//! block. Hudi 1.x's schema adds fields (`SecondaryIndexMetadata` at the end, column-stats
//! fields); only 0.15's matters for v6 tables, and 1.x readers use the block's own schema.

use std::collections::BTreeMap;

use super::rollback::MetadataSchema;

/// The schema of a metadata-table data block in the given table version's layout.
pub fn log_block_schema(schema: MetadataSchema) -> &'static str {
    match schema {
        MetadataSchema::Hudi013 => LOG_BLOCK_SCHEMA_V5,
        MetadataSchema::Current => LOG_BLOCK_SCHEMA_V6,
    }
}

/// `HoodieMetadataRecord` as Hudi 0.15.0 defines it.
pub const METADATA_RECORD_SCHEMA_V6: &str = include_str!("../../avro/HoodieMetadataRecord.v6.avsc");
/// The schema of a v6 metadata-table data block: [`METADATA_RECORD_SCHEMA_V6`] with Hudi's meta
/// fields. Goes in the block's `SCHEMA` header and the HFile's `schema` file info.
pub const LOG_BLOCK_SCHEMA_V6: &str =
    include_str!("../../avro/HoodieMetadataRecord.v6.withMetaFields.avsc");
/// The schema of a metadata-table data block on table version 5, as Hudi 0.13.1 writes it
/// (byte for byte the `SCHEMA` header of a real 0.13.1 metadata-table log block, made by the
/// `spark-0.13` interop harness): [`LOG_BLOCK_SCHEMA_V6`] without `recordIndexMetadata`,
/// which Hudi 0.14 added.
pub const LOG_BLOCK_SCHEMA_V5: &str =
    include_str!("../../avro/HoodieMetadataRecord.v5.withMetaFields.avsc");
/// The record type of a file listing (`MetadataPartitionType.FILES` record of one partition).
pub const FILES_RECORD_TYPE: i32 = 2;
/// The key of the record listing all partitions (type 1), for reference.
pub const ALL_PARTITIONS_KEY: &str = "__all_partitions__";

fn put_long(out: &mut Vec<u8>, v: i64) {
    let mut z = ((v << 1) ^ (v >> 63)) as u64;
    while z >= 0x80 {
        out.push((z as u8) | 0x80);
        z >>= 7;
    }
    out.push(z as u8);
}

fn put_str(out: &mut Vec<u8>, s: &str) {
    put_long(out, s.len() as i64);
    out.extend_from_slice(s.as_bytes());
}

/// The files-partition record of one data-table partition: `(row key, value)` for an HFile data
/// block. The row key is `partition_key` (the partition path as on disk, `.` for a
/// non-partitioned table); the value is the Avro binary record under [`LOG_BLOCK_SCHEMA_V6`]:
/// meta fields null, `key` "" (readers take the key from the row), `type` 2,
/// `filesystemMetadata` = each file name -> `{size, isDeleted: false}`, all other fields null.
/// Map entries are written in name order (Hudi writes `HashMap` order; readers do not care).
pub fn files_record(partition_key: &str, files: &BTreeMap<String, i64>) -> (String, Vec<u8>) {
    let entries = files.iter().map(|(n, s)| (n.as_str(), *s, false));
    file_list_record(partition_key, FILES_RECORD_TYPE, entries)
}

/// A `files`-partition record of any type (1: the partition list, 2: one partition's files):
/// `(row key, value)` as [`files_record`] makes it, each entry `(name, size, isDeleted)`, in
/// the order given.
pub fn file_list_record<'a>(
    key: &str,
    record_type: i32,
    entries: impl ExactSizeIterator<Item = (&'a str, i64, bool)>,
) -> (String, Vec<u8>) {
    file_list_record_in(MetadataSchema::Current, key, record_type, entries)
}

/// [`file_list_record`] under the block schema of a table version: [`LOG_BLOCK_SCHEMA_V5`] for
/// [`MetadataSchema::Hudi013`] (no `recordIndexMetadata` at the end), else
/// [`LOG_BLOCK_SCHEMA_V6`].
pub fn file_list_record_in<'a>(
    schema: MetadataSchema,
    key: &str,
    record_type: i32,
    entries: impl ExactSizeIterator<Item = (&'a str, i64, bool)>,
) -> (String, Vec<u8>) {
    let mut v = Vec::with_capacity(16 + entries.len() * 64);
    // _hoodie_commit_time, _hoodie_commit_seqno, _hoodie_record_key, _hoodie_partition_path,
    // _hoodie_file_name: union branch 0 (null)
    v.extend_from_slice(&[0; 5]);
    put_str(&mut v, ""); // key
    put_long(&mut v, i64::from(record_type)); // type
    put_long(&mut v, 1); // filesystemMetadata: union branch 1 (map)
    if entries.len() > 0 {
        put_long(&mut v, entries.len() as i64);
        for (name, size, deleted) in entries {
            put_str(&mut v, name);
            put_long(&mut v, size); // size
            v.push(u8::from(deleted)); // isDeleted
        }
    }
    put_long(&mut v, 0); // end of map
                         // BloomFilterMetadata, ColumnStatsMetadata (and recordIndexMetadata from Hudi 0.14): null
    let trailing: &[u8] = match schema {
        MetadataSchema::Hudi013 => &[0; 2],
        MetadataSchema::Current => &[0; 3],
    };
    v.extend_from_slice(trailing);
    (key.to_string(), v)
}

/// A decoded `files`-partition record: its type and `filesystemMetadata` (name -> (size,
/// isDeleted); empty when null).
pub type DecodedFilesRecord = (i32, BTreeMap<String, (i64, bool)>);

/// [`decode_files_record`] of a record written under [`LOG_BLOCK_SCHEMA_V6`] (as hudi-keeper
/// writes them).
pub fn decode_v6_files_record(bytes: &[u8]) -> Result<DecodedFilesRecord, String> {
    let schema = apache_avro::Schema::parse_str(LOG_BLOCK_SCHEMA_V6).map_err(|e| e.to_string())?;
    decode_files_record(&schema, bytes)
}

/// Decode one `files`-partition record written under `schema` (the writer schema of its block
/// or base file). Errors name what is wrong. Every length and count is bounds-checked against
/// the bytes left, so a declared length or count larger than the record is an error, not an
/// allocation.
pub fn decode_files_record(
    schema: &apache_avro::Schema,
    bytes: &[u8],
) -> Result<DecodedFilesRecord, String> {
    let mut files = BTreeMap::new();
    let record_type = visit_files_record(schema, bytes, |name, size, deleted| {
        files.insert(name.to_string(), (size, deleted));
    })?;
    Ok((record_type, files))
}

/// [`decode_files_record`] without building its map: `entry` gets each `filesystemMetadata`
/// entry (name, size, isDeleted) in the order written (a name written twice comes twice; the
/// later one counts, as in a map); returns the record's type.
pub fn visit_files_record(
    schema: &apache_avro::Schema,
    bytes: &[u8],
    entry: impl FnMut(&str, i64, bool),
) -> Result<i32, String> {
    super::avro_check::visit_files_record(schema, bytes, entry).map_err(|e| e.to_string())
}

#[cfg(test)]
mod tests {
    use super::*;
    use apache_avro::types::Value;

    fn decode(bytes: &[u8]) -> Vec<(String, Value)> {
        let schema = apache_avro::Schema::parse_str(LOG_BLOCK_SCHEMA_V6).unwrap();
        let mut r = bytes;
        let v = apache_avro::from_avro_datum(&schema, &mut r, None).unwrap();
        assert!(r.is_empty(), "bytes left after the record");
        match v {
            Value::Record(fields) => fields,
            other => panic!("not a record: {other:?}"),
        }
    }

    #[test]
    fn a_files_record_decodes_under_the_v6_schema() {
        let files = BTreeMap::from([
            (".f1_20240101.log.1_0-1-0".to_string(), 1234i64),
            ("f2_0-1-0_20240101.parquet".to_string(), 1),
        ]);
        let (key, bytes) = files_record("2024/01/p0", &files);
        assert_eq!(key, "2024/01/p0");
        let fields = decode(&bytes);
        let names: Vec<&str> = fields.iter().map(|(n, _)| n.as_str()).collect();
        assert_eq!(names[5..8], ["key", "type", "filesystemMetadata"]);
        assert_eq!(fields[5].1, Value::String(String::new()));
        assert_eq!(fields[6].1, Value::Int(2));
        let Value::Union(1, map) = &fields[7].1 else {
            panic!("filesystemMetadata not set: {:?}", fields[7].1)
        };
        let Value::Map(map) = map.as_ref() else {
            panic!("not a map")
        };
        assert_eq!(map.len(), 2);
        assert_eq!(
            map[".f1_20240101.log.1_0-1-0"],
            Value::Record(vec![
                ("size".into(), Value::Long(1234)),
                ("isDeleted".into(), Value::Boolean(false))
            ])
        );
        for (i, (name, value)) in fields.iter().enumerate() {
            if i != 5 && i != 6 && i != 7 {
                assert_eq!(*value, Value::Union(0, Box::new(Value::Null)), "{name}");
            }
        }
    }

    #[test]
    fn records_with_deletions_round_trip_through_the_decoder() {
        let schema = apache_avro::Schema::parse_str(LOG_BLOCK_SCHEMA_V6).unwrap();
        let entries = [("p2", 0i64, true), ("p3", 0, false)];
        let (key, bytes) = file_list_record(ALL_PARTITIONS_KEY, 1, entries.iter().copied());
        assert_eq!(key, ALL_PARTITIONS_KEY);
        let (t, files) = decode_files_record(&schema, &bytes).unwrap();
        assert_eq!(t, 1);
        assert_eq!(
            files,
            BTreeMap::from([
                ("p2".to_string(), (0, true)),
                ("p3".to_string(), (0, false))
            ])
        );
        let (_, bytes) = files_record("p0", &BTreeMap::from([("a".to_string(), 7i64)]));
        assert_eq!(
            decode_files_record(&schema, &bytes).unwrap(),
            (2, BTreeMap::from([("a".to_string(), (7, false))]))
        );
        assert!(decode_files_record(&schema, &bytes[..10]).is_err());
        let mut longer = bytes.clone();
        longer.push(0);
        assert!(decode_files_record(&schema, &longer).is_err());
    }

    #[test]
    fn a_version_5_record_decodes_under_hudi_0_13s_block_schema() {
        let schema = apache_avro::Schema::parse_str(LOG_BLOCK_SCHEMA_V5).unwrap();
        let entries = [("a.parquet", 0i64, true), (".b.log.2_1-0-1", 105, false)];
        let (key, bytes) =
            file_list_record_in(MetadataSchema::Hudi013, "p0", 2, entries.iter().copied());
        assert_eq!(key, "p0");
        let mut r = bytes.as_slice();
        apache_avro::from_avro_datum(&schema, &mut r, None).unwrap();
        assert!(r.is_empty(), "bytes left after the record");
        assert_eq!(
            decode_files_record(&schema, &bytes).unwrap(),
            (
                2,
                BTreeMap::from([
                    ("a.parquet".to_string(), (0, true)),
                    (".b.log.2_1-0-1".to_string(), (105, false))
                ])
            )
        );
        // The v6 encoding has one more field, so it does not read under the v5 schema.
        let (_, v6) = file_list_record("p0", 2, entries.iter().copied());
        assert!(decode_files_record(&schema, &v6).is_err());
        // Hudi 0.13.1's fields are 0.15's first ten.
        let v5: serde_json::Value = serde_json::from_str(LOG_BLOCK_SCHEMA_V5).unwrap();
        let v6: serde_json::Value = serde_json::from_str(LOG_BLOCK_SCHEMA_V6).unwrap();
        let fields = |v: &serde_json::Value| v["fields"].as_array().unwrap().clone();
        assert_eq!(fields(&v5)[..], fields(&v6)[..10]);
        assert_eq!(fields(&v6).len(), 11);
        assert!(LOG_BLOCK_SCHEMA_V5.ends_with('}'));
        assert_eq!(LOG_BLOCK_SCHEMA_V5.len(), 5225);
    }

    #[test]
    fn the_log_block_schema_is_the_record_schema_with_meta_fields() {
        let plain: serde_json::Value = serde_json::from_str(METADATA_RECORD_SCHEMA_V6).unwrap();
        let with: serde_json::Value = serde_json::from_str(LOG_BLOCK_SCHEMA_V6).unwrap();
        let fields = |v: &serde_json::Value| v["fields"].as_array().unwrap().clone();
        assert_eq!(fields(&with)[5..], fields(&plain)[..]);
        assert_eq!(fields(&with)[0]["name"], "_hoodie_commit_time");
        // no trailing newline: the header bytes must be exactly Hudi's
        assert!(LOG_BLOCK_SCHEMA_V6.ends_with('}'));
    }
}
