//! Unit tests of the archived timeline reader, on files real Hudi wrote (`testdata/`: an archive
//! log file of Hudi 0.15.0, an LSM timeline parquet file and manifest of Hudi 1.2.0; the expected
//! values are what Hudi's own archived timeline printed for their tables, `run.sh archived`).

use std::sync::Arc;

use bytes::Bytes;
use object_store::memory::InMemory;
use proptest::prelude::*;

use super::*;
use crate::fuzz::{self, largest_allocation};
use crate::storage::testing::FailNth;
use crate::storage::OpKind;

const V6_ARCHIVE: &[u8] = include_bytes!("testdata/v6-commits-archive.1_1-0-1");
const V9_PARQUET: &[u8] = include_bytes!("testdata/v9-lsm-rollback.parquet");
const V9_MANIFEST: &[u8] = include_bytes!("testdata/v9-manifest_4");
const V9_PARQUET_NAME: &str = "20261203193123221_20261203193137792_0.parquet";

type Row = (String, String, EntryState, Option<String>, Vec<String>);
type Expected<'a> = (&'a str, &'a str, EntryState, Option<&'a str>, Vec<&'a str>);

fn summary(entries: &[Entry]) -> Vec<Row> {
    entries
        .iter()
        .map(|e| {
            (
                e.requested_time.clone(),
                e.action.clone(),
                e.state,
                e.completion_time.clone(),
                e.rolled_back.clone(),
            )
        })
        .collect()
}

fn rows(expected: Vec<Expected<'_>>) -> Vec<Row> {
    expected
        .into_iter()
        .map(|(t, a, s, c, rb)| {
            (
                t.to_string(),
                a.to_string(),
                s,
                c.map(str::to_string),
                rb.into_iter().map(str::to_string).collect(),
            )
        })
        .collect()
}

#[test]
fn reads_a_hudi_015_archive_log_file() {
    use EntryState::*;
    let entries = v6::read_archive_file(V6_ARCHIVE).unwrap();
    assert!(entries.iter().all(|e| e.incomplete.is_none()));
    assert_eq!(
        summary(&entries),
        rows(vec![
            ("20261203192729071", "rollback", Requested, None, vec![]),
            ("20261203192729071", "rollback", Inflight, None, vec![]),
            (
                "20261203192729071",
                "rollback",
                Completed,
                None,
                vec!["20261203192719277"]
            ),
            ("20261203192738560", "rollback", Requested, None, vec![]),
            ("20261203192738560", "rollback", Inflight, None, vec![]),
            (
                "20261203192738560",
                "rollback",
                Completed,
                None,
                vec!["20261203192732085"]
            ),
            ("20261203192714225", "commit", Requested, None, vec![]),
            ("20261203192714225", "commit", Inflight, None, vec![]),
            ("20261203192714225", "commit", Completed, None, vec![]),
            ("20261203192715901", "commit", Requested, None, vec![]),
            ("20261203192715901", "commit", Inflight, None, vec![]),
            ("20261203192715901", "commit", Completed, None, vec![]),
        ])
    );
    let merged = merge(entries);
    assert_eq!(merged.len(), 4);
    assert_eq!(
        merged[2],
        ArchivedInstant {
            requested_time: "20261203192729071".into(),
            action: "rollback".into(),
            completed: true,
            completion_time: None,
            rolled_back: vec!["20261203192719277".into()],
        }
    );
}

#[test]
fn reads_a_hudi_12_lsm_timeline_file() {
    use EntryState::*;
    let entries = lsm_parquet::read_lsm_file(Bytes::from_static(V9_PARQUET)).unwrap();
    assert_eq!(
        summary(&entries),
        rows(vec![
            (
                "20261203193123221",
                "commit",
                Completed,
                Some("20261203193123659"),
                vec![]
            ),
            (
                "20261203193135086",
                "rollback",
                Completed,
                Some("20261203193135605"),
                vec!["20261203193125720"]
            ),
            (
                "20261203193137792",
                "commit",
                Completed,
                Some("20261203193140883"),
                vec![]
            ),
        ])
    );
}

#[test]
fn merge_keeps_the_latest_state_and_a_pending_instant_stays_pending() {
    let e = |t: &str, a: &str, s, rb: &[&str]| Entry {
        requested_time: t.into(),
        action: a.into(),
        state: s,
        completion_time: None,
        rolled_back: rb.iter().map(|x| x.to_string()).collect(),
        incomplete: None,
    };
    let merged = merge(vec![
        e("2", "commit", EntryState::Completed, &[]),
        e("2", "compaction", EntryState::Requested, &[]),
        e("2", "compaction", EntryState::Inflight, &[]),
        e("1", "deltacommit", EntryState::Inflight, &[]),
        e("3", "rollback", EntryState::Completed, &["1", "0"]),
        e("3", "rollback", EntryState::Completed, &["1"]),
    ]);
    let got: Vec<(&str, &str, bool, Vec<String>)> = merged
        .iter()
        .map(|i| {
            (
                i.requested_time.as_str(),
                i.action.as_str(),
                i.completed,
                i.rolled_back.clone(),
            )
        })
        .collect();
    assert_eq!(
        got,
        vec![
            ("1", "deltacommit", false, vec![]),
            ("2", "commit", true, vec![]),
            (
                "3",
                "rollback",
                true,
                vec!["0".to_string(), "1".to_string()]
            ),
        ]
    );
}

// ---- whole tables on an in-memory store ------------------------------------------------------

const V9_PROPS: &str = "hoodie.table.name=t\nhoodie.table.version=9\nhoodie.timeline.layout.version=2\nhoodie.table.timeline.timezone=UTC\n";
const V6_PROPS: &str = "hoodie.table.name=t\nhoodie.table.version=6\n";
const HISTORY: &str = ".hoodie/timeline/history";

async fn table(files: &[(&str, &[u8])], fail: Option<FailNth>) -> Table {
    let store = Arc::new(InMemory::new());
    let s = Storage::from_store(store, "t", "memory://t");
    for (path, bytes) in files {
        s.put(
            &RelPath::parse(path).unwrap(),
            Bytes::copy_from_slice(bytes),
        )
        .await
        .unwrap();
    }
    let s = match fail {
        Some(f) => s.with_interceptor(Arc::new(f)),
        None => s,
    };
    Table::open_storage(s).await.unwrap()
}

fn v9_files(parquet: &'static [u8]) -> Vec<(String, &'static [u8])> {
    vec![
        (".hoodie/hoodie.properties".into(), V9_PROPS.as_bytes()),
        (format!("{HISTORY}/_version_"), b"4"),
        (format!("{HISTORY}/manifest_4"), V9_MANIFEST),
        (format!("{HISTORY}/manifest_3"), b"{\"files\":[]}"),
        (format!("{HISTORY}/{V9_PARQUET_NAME}"), parquet),
    ]
}

fn refs<'a>(files: &'a [(String, &'static [u8])]) -> Vec<(&'a str, &'a [u8])> {
    files.iter().map(|(p, b)| (p.as_str(), *b)).collect()
}

#[tokio::test]
async fn a_missing_file_named_by_the_manifest_makes_the_timeline_incomplete() {
    // manifest_4 names four files; only one is there.
    let files = v9_files(V9_PARQUET);
    let t = read_archived_timeline(&table(&refs(&files), None).await)
        .await
        .unwrap();
    assert_eq!(t.locations, vec![".hoodie/archived", HISTORY]);
    assert!(!t.complete);
    assert_eq!(t.unread.len(), 3, "{:?}", t.unread);
    assert!(t.unread.iter().all(|(p, _)| p.starts_with(HISTORY)));
    assert_eq!(t.instants.len(), 3, "what could be read is kept");
}

#[tokio::test]
async fn an_lsm_timeline_read_whole_is_complete() {
    let manifest =
        format!("{{\"files\":[{{\"fileName\":\"{V9_PARQUET_NAME}\",\"fileLen\":3550}}]}}");
    let manifest: &'static [u8] = manifest.into_bytes().leak();
    let mut files = v9_files(V9_PARQUET);
    files[2].1 = manifest;
    // a parquet file no manifest names is ignored, as Hudi ignores it
    files.push((format!("{HISTORY}/1_2_0.parquet"), b"junk"));
    let t = read_archived_timeline(&table(&refs(&files), None).await)
        .await
        .unwrap();
    assert!(t.complete, "{:?}", t.unread);
    assert!(t.unread.is_empty());
    let rollback = &t.instants[1];
    assert_eq!(rollback.action, "rollback");
    assert_eq!(rollback.rolled_back, vec!["20261203193125720".to_string()]);

    // the same file damaged: not complete, the file named, no panic
    let mut damaged = V9_PARQUET.to_vec();
    damaged[300] ^= 0xff;
    files[4].1 = damaged.leak();
    let t = read_archived_timeline(&table(&refs(&files), None).await)
        .await
        .unwrap();
    assert!(!t.complete);
    assert_eq!(t.unread.len(), 1);
    assert_eq!(t.unread[0].0, format!("{HISTORY}/{V9_PARQUET_NAME}"));
}

#[tokio::test]
async fn without_a_version_file_the_greatest_manifest_is_read() {
    let manifest = format!("{{\"files\":[{{\"fileName\":\"{V9_PARQUET_NAME}\",\"fileLen\":1}}]}}");
    let mut files = v9_files(V9_PARQUET);
    files.remove(1);
    files[1].1 = manifest.into_bytes().leak();
    let t = read_archived_timeline(&table(&refs(&files), None).await)
        .await
        .unwrap();
    assert!(t.complete, "{:?}", t.unread);
    assert_eq!(t.instants.len(), 3);
}

#[tokio::test]
async fn a_v6_archive_folder_is_read_and_a_corrupt_file_is_named() {
    let mut truncated = V6_ARCHIVE.to_vec();
    truncated.truncate(V6_ARCHIVE.len() - 10);
    let files: Vec<(&str, &[u8])> = vec![
        (".hoodie/hoodie.properties", V6_PROPS.as_bytes()),
        (".hoodie/archived/.commits_.archive.1_1-0-1", V6_ARCHIVE),
        (".hoodie/archived/..commits_.archive.1_1-0-1.crc", b"crc"),
        (".hoodie/archived/mergeArchivePlan", b"x"),
    ];
    let t = read_archived_timeline(&table(&files, None).await)
        .await
        .unwrap();
    assert_eq!(t.locations, vec![".hoodie/archived"]);
    assert!(t.complete, "{:?}", t.unread);
    assert_eq!(t.instants.len(), 4);

    let mut files = files;
    files.push((".hoodie/archived/.commits_.archive.2_1-0-1", &truncated));
    let t = read_archived_timeline(&table(&files, None).await)
        .await
        .unwrap();
    assert!(!t.complete);
    assert_eq!(t.unread.len(), 1);
    assert_eq!(t.unread[0].0, ".hoodie/archived/.commits_.archive.2_1-0-1");
    assert_eq!(t.instants.len(), 4);
}

#[tokio::test]
async fn an_empty_table_has_a_complete_empty_archive() {
    for props in [V6_PROPS, V9_PROPS] {
        let files: Vec<(&str, &[u8])> = vec![(".hoodie/hoodie.properties", props.as_bytes())];
        let t = read_archived_timeline(&table(&files, None).await)
            .await
            .unwrap();
        assert!(t.complete && t.instants.is_empty() && t.unread.is_empty());
    }
}

#[tokio::test]
async fn a_failed_listing_or_read_makes_the_timeline_incomplete() {
    let files = v9_files(V9_PARQUET);
    for (kind, n) in [(OpKind::ListDir, 1), (OpKind::ListDir, 2), (OpKind::Get, 2)] {
        let t = read_archived_timeline(&table(&refs(&files), Some(FailNth::new(&[kind], n))).await)
            .await
            .unwrap();
        assert!(!t.complete, "{kind:?} {n}");
        assert!(!t.unread.is_empty(), "{kind:?} {n}");
    }
}

// ---- fuzz ----------------------------------------------------------------------------------

/// Read `bytes` as each kind of archive file; nothing may panic or allocate past a bound.
fn read_any(bytes: &[u8]) {
    let ((), largest) = largest_allocation(|| {
        let _ = v6::read_archive_file(bytes);
        let _ = lsm_parquet::read_lsm_file(Bytes::copy_from_slice(bytes));
    });
    // the parquet walk allows pages to decompress to 1032 times their size (deflate's limit)
    assert!(
        largest <= 1100 * bytes.len() + (4 << 20),
        "{} bytes allocated {largest} at once",
        bytes.len()
    );
}

#[test]
fn fuzz_valid_archive_files_read() {
    read_any(V6_ARCHIVE);
    read_any(V9_PARQUET);
}

#[test]
fn fuzz_a_page_claiming_a_huge_size_is_refused_before_it_is_allocated() {
    // The first page of the `metadata` column (byte 280) rewritten to claim i32::MAX bytes
    // uncompressed, with the column chunk keeping its length (the page body gives up the bytes
    // the longer header takes), so that only the claim is wrong.
    let at = 280;
    let page = parquet_check::read_page_header(&V9_PARQUET[at..]).unwrap();
    // thrift compact: 0x15 0x00 (type), 0x15 <varint> (uncompressed), 0x15 <varint> (compressed)
    assert_eq!(&V9_PARQUET[at..at + 3], &[0x15, 0x00, 0x15]);
    let u_len = varint_len(&V9_PARQUET[at + 3..]);
    assert_eq!(V9_PARQUET[at + 3 + u_len], 0x15);
    let c_len = varint_len(&V9_PARQUET[at + 4 + u_len..]);
    let huge = zigzag_varint(i32::MAX as i64);
    let grow = huge.len() - u_len;
    let compressed = zigzag_varint(i64::from(page.compressed) - grow as i64);
    assert_eq!(compressed.len(), c_len);
    let body_end = at + page.header_len + page.compressed as usize;
    let mut bad = V9_PARQUET[..at + 3].to_vec();
    bad.extend_from_slice(&huge);
    bad.push(0x15);
    bad.extend_from_slice(&compressed);
    bad.extend_from_slice(&V9_PARQUET[at + 4 + u_len + c_len..body_end - grow]);
    bad.extend_from_slice(&V9_PARQUET[body_end..]);
    assert_eq!(bad.len(), V9_PARQUET.len());
    let (r, largest) = largest_allocation(|| lsm_parquet::read_lsm_file(Bytes::from(bad)));
    assert!(largest < 1 << 20, "{largest} bytes allocated at once");
    let err = r.unwrap_err();
    assert!(err.contains("claims"), "{err}");
}

fn varint_len(b: &[u8]) -> usize {
    b.iter()
        .position(|x| x & 0x80 == 0)
        .map_or(b.len(), |p| p + 1)
}

fn zigzag_varint(v: i64) -> Vec<u8> {
    let mut z = ((v << 1) ^ (v >> 63)) as u64;
    let mut out = Vec::new();
    loop {
        if z < 0x80 {
            out.push(z as u8);
            return out;
        }
        out.push((z as u8 & 0x7f) | 0x80);
        z >>= 7;
    }
}

proptest! {
    #![proptest_config(fuzz::config(256))]

    #[test]
    fn fuzz_archive_files_of_arbitrary_bytes(bytes in fuzz::bytes(512)) {
        read_any(&bytes);
    }

    #[test]
    fn fuzz_damaged_archive_files(bytes in fuzz::mutated_one_of(vec![
        V6_ARCHIVE.to_vec(),
        V9_PARQUET.to_vec(),
    ])) {
        read_any(&bytes);
    }

    #[test]
    fn fuzz_parquet_after_a_valid_footer(tail in fuzz::bytes(512)) {
        // arbitrary bytes in place of the pages, the footer kept
        let mut b = V9_PARQUET[..4].to_vec();
        b.extend_from_slice(&tail);
        b.extend_from_slice(&V9_PARQUET[1900..]);
        read_any(&b);
    }
}
