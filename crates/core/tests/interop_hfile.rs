//! The HFile data blocks hudi-keeper writes into v6 metadata-table log files, read by real Hudi:
//! an HFile of `files`-partition records written with the core crate's writer is read back by
//! Hudi 0.15's HBase-based reader (its default), Hudi 0.15's native reader and Hudi 1.1's and 1.2's
//! readers, each by a full scan and by point lookups of every key (through the root index). The file is
//! over 1 MiB, so it has several data blocks, a multi-entry root index with HBase's shortened
//! index keys, and one record larger than a block.

use hudi_keeper_test_support as common;

use std::collections::BTreeMap;

use common::interop::{enabled, run_sh};
use hudi_keeper_core::format::hfile;
use hudi_keeper_core::format::metadata_record::{files_record, LOG_BLOCK_SCHEMA_V6};
use serde_json::Value;

/// partition -> file name -> size
type Listing = BTreeMap<String, BTreeMap<String, i64>>;

fn listing() -> Listing {
    let mut out = Listing::new();
    let file = |p: usize, i: usize| {
        format!(".{p:04}a1b2c3-d4e5-f6a7-b8c9-d0e1f2a3b4c5-0_20240101000000000.log.{i}_0-1-0")
    };
    for p in 0..300 {
        let files = (0..50)
            .map(|i| (file(p, i), (p * 1000 + i) as i64 + 1))
            .collect();
        out.insert(format!("2024/{:02}/p{p:03}", p % 12 + 1), files);
    }
    // one record larger than a 1 MiB block
    let big = (0..14_000).map(|i| (file(9999, i), i as i64)).collect();
    out.insert("big".to_string(), big);
    out.insert(
        "x%231 é日本".to_string(),
        BTreeMap::from([("f_0-1-0_20240101000000000.parquet".to_string(), 1)]),
    );
    out.insert(
        ".".to_string(),
        BTreeMap::from([("f2_0-1-0_20240101000000000.parquet".to_string(), i64::MAX)]),
    );
    out
}

/// What a reader printed for one record -> (key, file map), after checking the other fields.
fn parse_record(r: &Value) -> (String, BTreeMap<String, i64>) {
    let key = r["key"].as_str().expect("key").to_string();
    assert_eq!(r["type"], 2, "{key}: type");
    for f in [
        "_hoodie_commit_time",
        "_hoodie_commit_seqno",
        "_hoodie_record_key",
        "_hoodie_partition_path",
        "_hoodie_file_name",
        "BloomFilterMetadata",
        "ColumnStatsMetadata",
        "recordIndexMetadata",
    ] {
        assert!(r[f].is_null(), "{key}: {f} = {}", r[f]);
    }
    let files = r["filesystemMetadata"]
        .as_object()
        .expect("filesystemMetadata")
        .iter()
        .map(|(name, info)| {
            assert_eq!(info["isDeleted"], false, "{key}/{name}");
            (name.clone(), info["size"].as_i64().expect("size"))
        })
        .collect();
    (key, files)
}

#[test]
fn hudi_015_11_and_12_readers_return_exactly_the_records_of_our_hfile() {
    if !enabled() {
        return;
    }
    let expected = listing();
    let records: BTreeMap<String, Vec<u8>> = expected
        .iter()
        .map(|(p, files)| files_record(p, files))
        .collect();
    let bytes = hfile::write_hudi_hfile(&records, LOG_BLOCK_SCHEMA_V6).expect("write");
    let ours = hfile::read(&bytes).expect("our reader reads it");
    assert!(
        ours.root_index.len() >= 3,
        "{} data blocks",
        ours.root_index.len()
    );
    let dir = tempfile::tempdir().expect("tempdir");
    let path = dir.path().join("files.hfile");
    std::fs::write(&path, &bytes).expect("write file");

    for (version, native) in [
        ("0.15", false),
        ("0.15", true),
        ("1.1", true),
        ("1.2", true),
    ] {
        let mut args = vec!["hfile-read", version, path.to_str().expect("utf-8")];
        if native {
            args.push("--native");
        }
        let out = run_sh(&args);
        let what = format!("Hudi {version} {}", if native { "native" } else { "HBase" });
        assert!(
            out.status.success(),
            "{what}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        let json: Value = serde_json::from_slice(&out.stdout).expect("JSON");
        assert_eq!(
            json["schema_name"], "org.apache.hudi.avro.model.HoodieMetadataRecord",
            "{what}"
        );
        let scan: Listing = json["scan"]
            .as_array()
            .expect("scan")
            .iter()
            .map(parse_record)
            .collect();
        let scan_keys: Vec<&str> = json["scan"]
            .as_array()
            .expect("scan")
            .iter()
            .map(|r| r["key"].as_str().unwrap_or_default())
            .collect();
        assert_eq!(
            scan_keys,
            expected.keys().map(String::as_str).collect::<Vec<_>>(),
            "{what}: scan order"
        );
        assert!(scan == expected, "{what}: the scan differs");
        let lookup: Listing = json["lookup"]
            .as_object()
            .expect("lookup")
            .values()
            .map(parse_record)
            .collect();
        assert!(lookup == expected, "{what}: the key lookups differ");
    }
}
