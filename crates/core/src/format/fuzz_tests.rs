//! Fuzz tests of the Avro timeline-file readers (rollback plan and metadata, restore plan and
//! metadata, savepoint metadata, commit metadata, requested replace metadata) and of the JSON
//! commit metadata reader: arbitrary bytes, and valid files from our own writers with bytes
//! flipped, cut, inserted, appended or overwritten by huge lengths. Every read returns `Ok` or
//! `Err`, never panics, and allocates no more than a small multiple of its input (checked with
//! the test binary's allocation probe).

use std::collections::BTreeMap;

use apache_avro::Schema;
use proptest::prelude::*;

use super::avro::{read_single_record, requested_replace_is_clustering, AvroError};
use super::commit::{empty_commit_metadata, json_schema_of, json_write_stats, schema_of};
use super::restore::{RestoreMetadata, RestorePlan};
use super::rollback::{
    InstantInfo, RollbackMetadata, RollbackPartitionMetadata, RollbackPlan, RollbackRequest,
};
use super::savepoint::SavepointMetadata;
use crate::fuzz::{self, largest_allocation};

/// What a read of `len` input bytes may allocate at most in one piece: decoded values take a few
/// dozen bytes per input byte at worst (an array item of one byte becomes a `Value`).
fn allowance(len: usize) -> usize {
    256 * len + (1 << 20)
}

fn info(t: &str, action: &str) -> InstantInfo {
    InstantInfo {
        commit_time: t.into(),
        action: action.into(),
    }
}

fn rollback_plan() -> RollbackPlan {
    RollbackPlan {
        instant_to_rollback: Some(info("20250126040826878", "deltacommit")),
        requests: Some(vec![
            RollbackRequest {
                partition_path: "p=1".into(),
                file_id: Some("0712b9f9-0".into()),
                latest_base_instant: Some("20250126040823628".into()),
                files_to_be_deleted: vec!["/t/p=1/a-0_1-2-3_20250126040826878.parquet".into()],
                log_blocks_to_be_deleted: Some(BTreeMap::from([(
                    ".0712b9f9-0_20250126040823628.log.1_0-33-43".to_string(),
                    11828,
                )])),
            },
            RollbackRequest {
                partition_path: "".into(),
                file_id: None,
                latest_base_instant: None,
                files_to_be_deleted: vec![],
                log_blocks_to_be_deleted: None,
            },
        ]),
        version: Some(1),
    }
}

fn rollback_metadata() -> RollbackMetadata {
    RollbackMetadata {
        start_rollback_time: "20250126040936578".into(),
        time_taken_in_millis: 42,
        total_files_deleted: 1,
        commits_rollback: vec!["20250126040826878".into()],
        partition_metadata: BTreeMap::from([(
            "p=1".to_string(),
            RollbackPartitionMetadata {
                partition_path: "p=1".into(),
                success_delete_files: vec!["/t/p=1/a.parquet".into()],
                failed_delete_files: vec!["/t/p=1/b.parquet".into()],
                rollback_log_files: Some(BTreeMap::from([(".l.log.2_0-1-0".to_string(), 97)])),
                log_files_from_failed_commit: None,
            },
        )]),
        version: Some(1),
        instants_rollback: vec![info("20250126040826878", "deltacommit")],
    }
}

fn restore_plan() -> RestorePlan {
    RestorePlan {
        instants_to_rollback: vec![info("20250103", "commit"), info("20250102", "commit")],
        version: Some(2),
        savepoint_to_restore_timestamp: Some("20250101".into()),
    }
}

fn restore_metadata() -> RestoreMetadata {
    RestoreMetadata {
        start_restore_time: "20250105".into(),
        time_taken_in_millis: 10,
        instants_to_rollback: vec!["20250103".into()],
        hoodie_restore_metadata: BTreeMap::from([(
            "20250103".to_string(),
            vec![rollback_metadata()],
        )]),
        version: Some(1),
        restore_instant_info: vec![info("20250103", "commit")],
    }
}

fn savepoint_metadata() -> SavepointMetadata {
    SavepointMetadata {
        savepointed_by: "sp-user".into(),
        savepointed_at: 1_796_035_000_123,
        comments: "before the backfill".into(),
        partition_metadata: BTreeMap::from([
            (
                "p0".to_string(),
                vec!["fg-0_0-1-1_20261130.parquet".to_string()],
            ),
            ("p3".to_string(), vec![]),
        ]),
        version: Some(1),
    }
}

/// Valid files of every kind, from our own writers.
fn valid_files() -> Vec<Vec<u8>> {
    vec![
        rollback_plan().to_avro().unwrap(),
        rollback_metadata().to_avro().unwrap(),
        restore_plan().to_avro().unwrap(),
        restore_metadata().to_avro().unwrap(),
        savepoint_metadata().to_avro().unwrap(),
        empty_commit_metadata(r#"{"type":"record","name":"r","fields":[]}"#, "UPSERT").unwrap(),
    ]
}

/// Every Avro reader on `bytes`: none may panic, and none may allocate past the allowance.
fn read_all(bytes: &[u8]) {
    let ((), largest) = largest_allocation(|| {
        let _ = RollbackPlan::from_avro(bytes);
        let _ = RollbackMetadata::from_avro(bytes);
        let _ = RestorePlan::from_avro(bytes);
        let _ = RestoreMetadata::from_avro(bytes);
        let _ = SavepointMetadata::from_avro(bytes);
        let _ = read_single_record(bytes);
        let _ = requested_replace_is_clustering(bytes);
        let _ = schema_of(bytes);
    });
    assert!(
        largest <= allowance(bytes.len()),
        "reading {} bytes allocated {largest} bytes at once",
        bytes.len()
    );
}

// ---- Hand-made hostile files ----------------------------------------------------------------

fn long(out: &mut Vec<u8>, v: i64) {
    let mut z = ((v << 1) ^ (v >> 63)) as u64;
    while z >= 0x80 {
        out.push((z as u8) | 0x80);
        z >>= 7;
    }
    out.push(z as u8);
}

fn bytes_field(out: &mut Vec<u8>, b: &[u8]) {
    long(out, b.len() as i64);
    out.extend_from_slice(b);
}

const SYNC: [u8; 16] = [7; 16];

/// A container with `schema` and one block of one record `datum`, the block's size as given.
fn container_with_block_size(schema: &str, datum: &[u8], block_size: i64) -> Vec<u8> {
    let mut out = b"Obj\x01".to_vec();
    long(&mut out, 1);
    bytes_field(&mut out, b"avro.schema");
    bytes_field(&mut out, schema.as_bytes());
    long(&mut out, 0);
    out.extend_from_slice(&SYNC);
    long(&mut out, 1);
    long(&mut out, block_size);
    out.extend_from_slice(datum);
    out.extend_from_slice(&SYNC);
    out
}

fn container(schema: &str, datum: &[u8]) -> Vec<u8> {
    container_with_block_size(schema, datum, datum.len() as i64)
}

const PLAN_SCHEMA: &str = include_str!("../../avro/HoodieRollbackPlan.avsc");
const ROLLBACK_METADATA_SCHEMA: &str = include_str!("../../avro/HoodieRollbackMetadata.avsc");

/// Read `bytes` with the reader it is aimed at and every other one; all must refuse it without
/// allocating past the allowance.
fn assert_refused_cheaply(what: &str, bytes: &[u8], read: impl Fn(&[u8]) -> Result<(), AvroError>) {
    let (result, largest) = largest_allocation(|| read(bytes));
    assert!(result.is_err(), "{what}: accepted");
    assert!(
        largest <= allowance(bytes.len()),
        "{what}: {} bytes of input allocated {largest} bytes at once",
        bytes.len()
    );
    read_all(bytes);
}

fn plan(bytes: &[u8]) -> Result<(), AvroError> {
    RollbackPlan::from_avro(bytes).map(|_| ())
}

#[test]
fn fuzz_a_block_declaring_hundreds_of_mebibytes_is_refused_without_allocating_them() {
    let mut datum = Vec::new();
    long(&mut datum, 0); // instantToRollback: null
    long(&mut datum, 0); // RollbackRequests: null
    long(&mut datum, 0); // version: int
    long(&mut datum, 1);
    let bytes = container_with_block_size(PLAN_SCHEMA, &datum, 500 << 20);
    assert_refused_cheaply("block of 500 MiB", &bytes, plan);
}

#[test]
fn fuzz_a_string_declaring_hundreds_of_mebibytes_is_refused_without_allocating_them() {
    let mut datum = Vec::new();
    long(&mut datum, 1); // instantToRollback: a HoodieInstantInfo
    long(&mut datum, 500 << 20); // commitTime: 500 MiB, then the file ends
    datum.extend_from_slice(b"2025");
    let bytes = container(PLAN_SCHEMA, &datum);
    assert_refused_cheaply("string of 500 MiB", &bytes, plan);
}

#[test]
fn fuzz_an_array_declaring_half_a_billion_items_is_refused_without_reserving_them() {
    let mut datum = Vec::new();
    long(&mut datum, 0); // instantToRollback: null
    long(&mut datum, 1); // RollbackRequests: an array
    long(&mut datum, (512 << 20) - 1); // of 512 Mi - 1 requests (the decoder's own cap is 512 Mi)
    bytes_field(&mut datum, b"p0");
    let bytes = container(PLAN_SCHEMA, &datum);
    assert_refused_cheaply("array of 512 Mi items", &bytes, plan);
}

#[test]
fn fuzz_a_map_declaring_half_a_billion_entries_is_refused_without_reserving_them() {
    let mut datum = Vec::new();
    bytes_field(&mut datum, b"20250126040936578"); // startRollbackTime
    long(&mut datum, 42); // timeTakenInMillis
    long(&mut datum, 1); // totalFilesDeleted
    long(&mut datum, 0); // commitsRollback: []
    long(&mut datum, -((512 << 20) - 1)); // partitionMetadata: 512 Mi - 1 entries (negative:
    long(&mut datum, 3); // a block size follows)
    bytes_field(&mut datum, b"p0");
    let bytes = container(ROLLBACK_METADATA_SCHEMA, &datum);
    assert_refused_cheaply("map of 512 Mi entries", &bytes, |b| {
        RollbackMetadata::from_avro(b).map(|_| ())
    });
}

#[test]
fn fuzz_a_header_declaring_huge_metadata_is_refused_without_allocating_it() {
    let mut bytes = b"Obj\x01".to_vec();
    long(&mut bytes, (512 << 20) - 1); // metadata entries
    bytes_field(&mut bytes, b"avro.schema");
    long(&mut bytes, 400 << 20); // a 400 MiB schema
    bytes.extend_from_slice(b"{\"type\":");
    assert_refused_cheaply("header map", &bytes, plan);
}

#[test]
fn fuzz_a_writer_schema_with_a_huge_fixed_is_refused_without_allocating_it() {
    let schema = r#"{"type":"record","name":"HoodieRollbackPlan","namespace":"org.apache.hudi.avro.model","fields":[{"name":"f","type":{"type":"fixed","name":"big","size":1099511627776}}]}"#;
    let bytes = container(schema, &[1, 2, 3, 4]);
    assert_refused_cheaply("fixed of 1 TiB", &bytes, plan);
}

#[test]
fn fuzz_a_recursive_writer_schema_nested_a_hundred_thousand_deep_is_refused() {
    // A linked list: each level is one byte (union branch 1), so 100 000 bytes nest 100 000
    // records, which would overflow the decoder's stack.
    let schema = r#"{"type":"record","name":"HoodieRollbackPlan","namespace":"org.apache.hudi.avro.model","fields":[{"name":"next","type":["null","HoodieRollbackPlan"]}]}"#;
    let mut datum = vec![2u8; 100_000];
    datum.push(0);
    let bytes = container(schema, &datum);
    assert_refused_cheaply("100 000 levels", &bytes, plan);
}

/// Found by fuzzing: apache_avro's schema parser unwraps names, so a writer schema with a
/// damaged record name, type name or alias panicked the reader.
#[test]
fn fuzz_a_writer_schema_with_an_invalid_name_is_an_error_not_a_panic() {
    for schema in [
        r#"{"type":"record","name":"Hoodie`Plan","fields":[]}"#,
        r#"{"type":"record","name":"P","fields":[{"name":"f","type":{"type":"record","name":"a b","fields":[]}}]}"#,
        r#"{"type":"record","name":"P","fields":[{"name":"f","type":{"type":"fixed","name":"x","size":1}},{"name":"g","type":"x-y"}]}"#,
        r#"{"type":"record","name":"P","aliases":["a-b"],"fields":[]}"#,
        r#"{"type":"record","name":"P","namespace":"org..x","fields":[]}"#,
    ] {
        let bytes = container(schema, &[0]);
        let read = std::panic::catch_unwind(|| RollbackPlan::from_avro(&bytes).map(|_| ()));
        assert!(matches!(read, Ok(Err(_))), "{schema}: {read:?}");
        assert!(super::avro::parse_schema(schema).is_err(), "{schema}");
    }
    // Defaults may hold anything.
    let ok = r#"{"type":"record","name":"P","fields":[{"name":"f","type":{"type":"record","name":"R","fields":[{"name":"name","type":"string"}]},"default":{"name":"a b"}}]}"#;
    assert!(super::avro::parse_schema(ok).is_ok());
}

#[test]
fn fuzz_a_compressed_container_is_refused() {
    // A deflate block could inflate without bound; Hudi writes timeline files uncompressed.
    let mut bytes = b"Obj\x01".to_vec();
    long(&mut bytes, 2);
    bytes_field(&mut bytes, b"avro.schema");
    bytes_field(&mut bytes, PLAN_SCHEMA.as_bytes());
    bytes_field(&mut bytes, b"avro.codec");
    bytes_field(&mut bytes, b"deflate");
    long(&mut bytes, 0);
    bytes.extend_from_slice(&SYNC);
    let deflated = miniz_oxide::deflate::compress_to_vec(&[0u8; 1 << 20], 6);
    long(&mut bytes, 1);
    bytes_field(&mut bytes, &deflated);
    bytes.extend_from_slice(&SYNC);
    assert_refused_cheaply("deflate container", &bytes, plan);
}

#[test]
fn fuzz_every_valid_file_still_reads() {
    let files = valid_files();
    assert_eq!(RollbackPlan::from_avro(&files[0]).unwrap(), rollback_plan());
    assert_eq!(
        RollbackMetadata::from_avro(&files[1]).unwrap(),
        rollback_metadata()
    );
    assert_eq!(RestorePlan::from_avro(&files[2]).unwrap(), restore_plan());
    assert_eq!(
        RestoreMetadata::from_avro(&files[3]).unwrap(),
        restore_metadata()
    );
    assert_eq!(
        SavepointMetadata::from_avro(&files[4]).unwrap(),
        savepoint_metadata()
    );
    assert!(schema_of(&files[5]).is_some());
    for f in &files {
        read_all(f);
    }
}

// ---- Properties -----------------------------------------------------------------------------

/// A small writer schema of the kinds Hudi uses, for datum-level fuzzing.
fn files_record_schema() -> &'static Schema {
    static S: std::sync::OnceLock<Schema> = std::sync::OnceLock::new();
    S.get_or_init(|| Schema::parse_str(super::metadata_record::LOG_BLOCK_SCHEMA_V6).unwrap())
}

/// What `apache_avro`'s generic decoder reads of a `files` record (the one-pass visitor must
/// read the same, and refuse what it refuses): its type and entries, or `None`.
fn files_record_by_the_avro_library(
    bytes: &[u8],
) -> Option<super::metadata_record::DecodedFilesRecord> {
    use apache_avro::types::Value;
    super::avro_check::check_datum(files_record_schema(), bytes).ok()?;
    let mut r = bytes;
    let value = apache_avro::from_avro_datum(files_record_schema(), &mut r, None).ok()?;
    if !r.is_empty() {
        return None;
    }
    let Value::Record(fields) = value else {
        return None;
    };
    let field = |name: &str| {
        fields
            .iter()
            .find(|(n, _)| n == name)
            .map(|(_, v)| v.clone())
    };
    let unwrap = |v: Value| match v {
        Value::Union(_, inner) => *inner,
        other => other,
    };
    let Some(Value::Int(t)) = field("type").map(unwrap) else {
        return None;
    };
    let mut files = BTreeMap::new();
    match field("filesystemMetadata").map(unwrap)? {
        Value::Null => {}
        Value::Map(map) => {
            for (name, info) in map {
                let Value::Record(info) = unwrap(info) else {
                    return None;
                };
                let get = |n: &str| {
                    info.iter()
                        .find(|(k, _)| k == n)
                        .map(|(_, v)| unwrap(v.clone()))
                };
                let (Some(Value::Long(size)), Some(Value::Boolean(deleted))) =
                    (get("size"), get("isDeleted"))
                else {
                    return None;
                };
                files.insert(name, (size, deleted));
            }
        }
        _ => return None,
    }
    Some((t, files))
}

proptest! {
    #![proptest_config(fuzz::config(512))]

    #[test]
    fn fuzz_the_files_record_visitor_reads_what_the_avro_library_reads(
        entries in proptest::collection::vec(
            (fuzz::text_from("abc_-.0123456789", 40), any::<i64>(), any::<bool>()),
            0..40,
        ),
        record_type in 1..3i32,
    ) {
        let (_, bytes) = super::metadata_record::file_list_record(
            "p",
            record_type,
            entries.iter().map(|(n, s, d)| (n.as_str(), *s, *d)).collect::<Vec<_>>().into_iter(),
        );
        let ours = super::metadata_record::decode_files_record(files_record_schema(), &bytes);
        prop_assert_eq!(ours.ok(), files_record_by_the_avro_library(&bytes));
    }

    #[test]
    fn fuzz_avro_readers_take_arbitrary_bytes(bytes in fuzz::bytes(512)) {
        read_all(&bytes);
    }

    #[test]
    fn fuzz_avro_readers_take_arbitrary_bytes_after_the_magic(bytes in fuzz::bytes(512)) {
        let mut b = b"Obj\x01".to_vec();
        b.extend_from_slice(&bytes);
        read_all(&b);
    }

    #[test]
    fn fuzz_avro_readers_take_damaged_valid_files(bytes in fuzz::mutated_one_of(valid_files())) {
        read_all(&bytes);
    }

    #[test]
    fn fuzz_metadata_records_take_damaged_valid_records(
        bytes in fuzz::mutated_one_of(vec![
            super::metadata_record::files_record(
                "2024/01/p0",
                &BTreeMap::from([("f1_0-1-0_1.parquet".to_string(), 1234), (".f2_1.log.1_0-1-0".to_string(), 7)]),
            ).1,
            super::metadata_record::file_list_record(
                super::metadata_record::ALL_PARTITIONS_KEY,
                1,
                [("p1", 0i64, false), ("p2", 0, true)].into_iter(),
            ).1,
        ])
    ) {
        let schema = files_record_schema();
        let (_, largest) = largest_allocation(|| super::metadata_record::decode_files_record(schema, &bytes));
        prop_assert!(largest <= allowance(bytes.len()), "{} bytes allocated {largest}", bytes.len());
        let ours = super::metadata_record::decode_files_record(schema, &bytes);
        prop_assert_eq!(ours.ok(), files_record_by_the_avro_library(&bytes), "the visitor and the library disagree");
    }

    #[test]
    fn fuzz_metadata_records_take_arbitrary_bytes(bytes in fuzz::bytes(256)) {
        let schema = files_record_schema();
        let (_, largest) = largest_allocation(|| super::metadata_record::decode_files_record(schema, &bytes));
        prop_assert!(largest <= allowance(bytes.len()), "{} bytes allocated {largest}", bytes.len());
        let ours = super::metadata_record::decode_files_record(schema, &bytes);
        prop_assert_eq!(ours.ok(), files_record_by_the_avro_library(&bytes), "the visitor and the library disagree");
    }

    #[test]
    fn fuzz_json_commit_metadata_readers_take_damaged_files(
        bytes in fuzz::mutated(super::commit::json_deltacommit_metadata(
            &[super::commit::AppendedLog {
                partition: "files".into(),
                file_id: "files-0000-0".into(),
                base_instant: "00000000000000010".into(),
                base_file: None,
                earlier_logs: vec![],
                log_file: ".files-0000-0_00000000000000010.log.2_0-0-0".into(),
                log_version: 2,
                size: 1234,
                records: 3,
            }],
            "{}",
        ))
    ) {
        let _ = json_write_stats(&bytes);
        let _ = json_schema_of(&bytes);
    }
}
