//! Write markers: `.hoodie/.temp/<instant>/`, naming every data file a write created, merged or
//! appended to (hudi-format.md §4). Two kinds exist: DIRECT (one empty file per marker) and
//! TIMELINE_SERVER_BASED (`MARKERS.type` plus `MARKERS<n>` files listing marker names).

use std::collections::BTreeSet;
use std::fmt;

use serde::Serialize;

pub use crate::error::MarkerError;
use crate::storage::{FileMeta, RelPath, Storage, StorageError, SMALL_FILE_MAX_READ};

/// The marker folder root, relative to a table base path.
pub const MARKER_ROOT: &str = ".hoodie/.temp";
const TYPE_FILE: &str = "MARKERS.type";
const TIMELINE_SERVER_BASED: &str = "TIMELINE_SERVER_BASED";
const MARKER_EXT: &str = ".marker.";

/// The marker folder of `instant`.
pub fn marker_dir(instant: &str) -> Result<RelPath, StorageError> {
    Ok(RelPath::parse(MARKER_ROOT)?.join(instant)?)
}

/// How a data file was written.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize)]
#[serde(rename_all = "UPPERCASE")]
pub enum IoType {
    /// A new file.
    Create,
    /// A new version of a base file, merged from the old one.
    Merge,
    /// A log file appended to.
    Append,
}

impl IoType {
    fn parse(s: &str) -> Option<Self> {
        match s {
            "CREATE" => Some(IoType::Create),
            "MERGE" => Some(IoType::Merge),
            "APPEND" => Some(IoType::Append),
            _ => None,
        }
    }
}

impl fmt::Display for IoType {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            IoType::Create => "CREATE",
            IoType::Merge => "MERGE",
            IoType::Append => "APPEND",
        })
    }
}

/// The kind of marker folder.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "SCREAMING_SNAKE_CASE")]
pub enum MarkerKind {
    /// One file per marker.
    Direct,
    /// `MARKERS.type` + `MARKERS<n>` files written by the timeline server.
    TimelineServerBased,
}

impl MarkerKind {
    /// Hudi's name for the kind.
    pub fn as_str(self) -> &'static str {
        match self {
            MarkerKind::Direct => "DIRECT",
            MarkerKind::TimelineServerBased => "TIMELINE_SERVER_BASED",
        }
    }
}

/// One marker: a data file of the write.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize)]
pub struct Marker {
    /// The partition path (`""` for a non-partitioned table).
    pub partition: String,
    /// The data file name.
    pub file_name: String,
    /// How the file was written.
    pub io_type: IoType,
}

impl Marker {
    /// The data file's path relative to the table base path.
    pub fn data_path(&self) -> Result<RelPath, StorageError> {
        Ok(RelPath::parse(&self.partition)?.join(&self.file_name)?)
    }
}

/// The markers of one instant.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Markers {
    /// The kind of folder they came from; `None` when there is no marker folder.
    pub kind: Option<MarkerKind>,
    /// The markers, sorted and without duplicates.
    pub markers: Vec<Marker>,
    /// The partition folders below a direct marker folder that hold anything (a marker, its
    /// checksum, a stray file): the partitions the write had begun to write in. Empty for
    /// timeline-server markers (their folder has no partition folders).
    pub folders: BTreeSet<String>,
}

/// Parse one marker name, relative to the marker folder: `<partition>/<file>.marker.<IOType>`.
pub fn parse_marker(instant: &str, name: &str) -> Result<Marker, MarkerError> {
    let bad = |reason: &str| MarkerError::Malformed {
        instant: instant.to_string(),
        marker: name.to_string(),
        reason: reason.to_string(),
    };
    RelPath::parse(name).map_err(|e| bad(&format!("it would leave the table ({})", e.reason)))?;
    let (data, io) = name
        .find(MARKER_EXT)
        .map(|i| (&name[..i], &name[i + MARKER_EXT.len()..]))
        .ok_or_else(|| bad("no `.marker.` extension"))?;
    let io_type = IoType::parse(io).ok_or_else(|| bad("unknown IO type"))?;
    RelPath::parse(data).map_err(|e| {
        bad(&format!(
            "its data file would leave the table ({})",
            e.reason
        ))
    })?;
    let file_name = rel_file_name(data);
    if file_name.is_empty() {
        return Err(bad("no data file name"));
    }
    let partition = data[..data.len() - file_name.len()].trim_end_matches('/');
    Ok(Marker {
        partition: partition.to_string(),
        file_name: file_name.to_string(),
        io_type,
    })
}

fn rel_file_name(data: &str) -> &str {
    data.rsplit('/').next().unwrap_or_default()
}

/// Parse the text of one `MARKERS<n>` file: one marker name per line.
pub fn parse_markers_file(instant: &str, text: &str) -> Result<Vec<Marker>, MarkerError> {
    text.split('\n')
        .map(|l| l.strip_suffix('\r').unwrap_or(l))
        .filter(|l| !l.is_empty())
        .map(|l| parse_marker(instant, l))
        .collect()
}

/// The markers of `instant` from a recursive listing of its marker folder `dir`, the bytes of
/// its `MARKERS.type` file if any, and the bytes of its `MARKERS<n>` files (pure; see
/// [`read_markers`] for the I/O).
pub fn markers_from_listing(
    instant: &str,
    dir: &RelPath,
    listing: &[FileMeta],
    type_file: Option<&[u8]>,
    markers_files: &[(RelPath, Vec<u8>)],
) -> Result<Markers, MarkerError> {
    if listing.is_empty() && type_file.is_none() {
        return Ok(Markers {
            kind: None,
            markers: vec![],
            folders: BTreeSet::new(),
        });
    }
    let mut markers = Vec::new();
    let mut folders = BTreeSet::new();
    let kind = match type_file {
        Some(bytes) => {
            let found = String::from_utf8_lossy(bytes).trim().to_string();
            if found != TIMELINE_SERVER_BASED {
                return Err(MarkerError::UnknownType {
                    instant: instant.to_string(),
                    found,
                });
            }
            for (path, bytes) in markers_files {
                let text = std::str::from_utf8(bytes).map_err(|_| MarkerError::NotText {
                    instant: instant.to_string(),
                    path: path.to_string(),
                })?;
                markers.extend(parse_markers_file(instant, text)?);
            }
            MarkerKind::TimelineServerBased
        }
        None => {
            for meta in listing {
                let Some(rel) = meta.path.strip_prefix(dir) else {
                    continue;
                };
                let folder = rel.parent();
                if !folder.as_str().is_empty() {
                    folders.insert(folder.to_string());
                }
                let name = rel.file_name();
                // Hadoop checksum side files (`.x.marker.CREATE.crc`) are not markers.
                if name.starts_with('.') && name.ends_with(".crc") {
                    continue;
                }
                if !name.contains(MARKER_EXT) {
                    continue;
                }
                markers.push(parse_marker(instant, rel.as_str())?);
            }
            MarkerKind::Direct
        }
    };
    markers.sort();
    markers.dedup();
    Ok(Markers {
        kind: Some(kind),
        markers,
        folders,
    })
}

/// Whether a file in a marker folder is a timeline-server `MARKERS<n>` file.
fn is_markers_file(dir: &RelPath, meta: &FileMeta) -> bool {
    meta.path.parent() == *dir
        && meta.file_name().starts_with("MARKERS")
        && meta.file_name() != TYPE_FILE
}

/// Read the markers of `instant`: one recursive LIST of its marker folder, plus one GET per
/// `MARKERS*` file for timeline-server markers. A read error is an error, never "no markers".
pub async fn read_markers(storage: &Storage, instant: &str) -> Result<Markers, MarkerError> {
    let dir = marker_dir(instant)?;
    let listing = storage.list(&dir).await?;
    let type_path = dir.join(TYPE_FILE).map_err(StorageError::from)?;
    let has_type = listing.iter().any(|m| m.path == type_path);
    let type_file = if has_type {
        Some(
            storage
                .get_capped(&type_path, SMALL_FILE_MAX_READ)
                .await?
                .to_vec(),
        )
    } else {
        None
    };
    let mut files = Vec::new();
    if has_type {
        for meta in listing.iter().filter(|m| is_markers_file(&dir, m)) {
            files.push((meta.path.clone(), storage.get(&meta.path).await?.to_vec()));
        }
    }
    markers_from_listing(instant, &dir, &listing, type_file.as_deref(), &files)
}

#[cfg(test)]
mod tests {
    use super::*;
    use bytes::Bytes;
    use object_store::memory::InMemory;
    use proptest::prelude::*;
    use std::sync::Arc;

    #[test]
    fn parses_partitioned_and_unpartitioned_markers() {
        let m = parse_marker(
            "1",
            "2024/01/01/abc-0_1-2-3_20240101000000000.parquet.marker.CREATE",
        )
        .unwrap();
        assert_eq!(m.partition, "2024/01/01");
        assert_eq!(m.file_name, "abc-0_1-2-3_20240101000000000.parquet");
        assert_eq!(m.io_type, IoType::Create);
        let m = parse_marker("1", ".abc-0_20240101.log.1_0-1-2.marker.APPEND").unwrap();
        assert_eq!(m.partition, "");
        assert_eq!(m.file_name, ".abc-0_20240101.log.1_0-1-2");
        assert_eq!(m.io_type, IoType::Append);
    }

    #[test]
    fn markers_that_would_leave_the_table_are_errors() {
        for bad in [
            "../../etc/passwd.marker.CREATE",
            "p/../../x.parquet.marker.CREATE",
            "/abs/x.parquet.marker.CREATE",
            "s3://other-bucket/x.parquet.marker.CREATE",
            "file:/x.parquet.marker.MERGE",
            "p//x.parquet.marker.CREATE",
        ] {
            let err = parse_marker("1", bad).unwrap_err();
            assert!(err.to_string().contains("leave the table"), "{bad}: {err}");
        }
    }

    #[test]
    fn malformed_markers_are_errors() {
        for bad in [
            "p/x.parquet",
            "p/x.parquet.marker.DELETE",
            "p/.marker.CREATE",
            "..marker.CREATE",
            "p/...marker.MERGE",
        ] {
            assert!(parse_marker("1", bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn timeline_server_files_are_one_marker_per_line() {
        let ms = parse_markers_file(
            "1",
            "p1/a_1-0-1_1.parquet.marker.CREATE\np2/b_1-0-1_1.parquet.marker.MERGE\n",
        )
        .unwrap();
        assert_eq!(ms.len(), 2);
        assert_eq!(ms[1].partition, "p2");
        assert_eq!(ms[1].io_type, IoType::Merge);
        assert!(parse_markers_file("1", "../x.parquet.marker.CREATE\n").is_err());
    }

    async fn store_with(files: &[(&str, &[u8])]) -> Storage {
        let s = Storage::from_store(Arc::new(InMemory::new()), "t", "memory://t");
        for (p, b) in files {
            s.put(&RelPath::parse(p).unwrap(), Bytes::copy_from_slice(b))
                .await
                .unwrap();
        }
        s
    }

    #[tokio::test]
    async fn reads_direct_markers() {
        let s = store_with(&[
            (".hoodie/.temp/1/p1/a_0-1-2_1.parquet.marker.CREATE", b""),
            (
                ".hoodie/.temp/1/p1/.a_0-1-2_1.parquet.marker.CREATE.crc",
                b"",
            ),
            (".hoodie/.temp/1/p2/b_0-1-2_1.parquet.marker.MERGE", b""),
            (".hoodie/.temp/10/p2/c_0-1-2_10.parquet.marker.MERGE", b""),
        ])
        .await;
        let m = read_markers(&s, "1").await.unwrap();
        assert_eq!(m.kind, Some(MarkerKind::Direct));
        assert_eq!(m.markers.len(), 2);
        assert_eq!(
            m.markers[0].data_path().unwrap().as_str(),
            "p1/a_0-1-2_1.parquet"
        );
    }

    #[tokio::test]
    async fn reads_timeline_server_markers() {
        let s = store_with(&[
            (".hoodie/.temp/1/MARKERS.type", b"TIMELINE_SERVER_BASED"),
            (
                ".hoodie/.temp/1/MARKERS0",
                b"p1/a_0-1-2_1.parquet.marker.CREATE\n",
            ),
            (
                ".hoodie/.temp/1/MARKERS3",
                b"p2/b_0-1-2_1.parquet.marker.CREATE\np1/a_0-1-2_1.parquet.marker.CREATE\n",
            ),
        ])
        .await;
        let m = read_markers(&s, "1").await.unwrap();
        assert_eq!(m.kind, Some(MarkerKind::TimelineServerBased));
        assert_eq!(m.markers.len(), 2);
    }

    #[tokio::test]
    async fn an_unknown_marker_type_and_no_folder_are_told_apart() {
        let s = store_with(&[(".hoodie/.temp/1/MARKERS.type", b"SOMETHING_ELSE")]).await;
        assert!(matches!(
            read_markers(&s, "1").await.unwrap_err(),
            MarkerError::UnknownType { .. }
        ));
        let m = read_markers(&s, "2").await.unwrap();
        assert_eq!(m.kind, None);
        assert!(m.markers.is_empty());
    }

    #[tokio::test]
    async fn a_markers_type_file_over_a_mebibyte_is_refused_unread() {
        let mut big = b"TIMELINE_SERVER_BASED".to_vec();
        big.resize(crate::storage::SMALL_FILE_MAX_READ as usize + 1, b' ');
        let s = store_with(&[(".hoodie/.temp/1/MARKERS.type", &big)]).await;
        let err = read_markers(&s, "1").await.unwrap_err();
        assert!(
            matches!(err, MarkerError::Storage(StorageError::TooLarge { .. })),
            "{err}"
        );
    }

    proptest! {
        #[test]
        fn parsed_markers_never_point_outside_the_table(name in "[a-z./:]{0,10}\\.marker\\.(CREATE|MERGE|APPEND)") {
            if let Ok(m) = parse_marker("1", &name) {
                let p = m.data_path().unwrap();
                prop_assert!(p.segments().all(|s| s != ".." && s != "."));
            }
        }
    }
}

#[cfg(test)]
mod fuzz_tests {
    //! Marker names (DIRECT listings) and `MARKERS<n>` / `MARKERS.type` files as read from
    //! storage: arbitrary bytes, near-valid names, and valid files damaged. Every read is `Ok`
    //! or a `MarkerError`, and every marker read names a data file inside the table.

    use chrono::{TimeZone, Utc};
    use proptest::prelude::*;

    use super::*;
    use crate::fuzz;

    const MARKERS0: &str = "2024/01/01/abc-0_1-2-3_20240101000000000.parquet.marker.CREATE\np2/b_1-0-1_1.parquet.marker.MERGE\r\n.abc-0_20240101.log.1_0-1-2.marker.APPEND\n";

    fn assert_inside(m: &Marker) {
        let p = m.data_path().expect("a marker read has a data path");
        assert!(p.segments().all(|s| s != ".." && s != "."), "{p}");
        assert!(
            !m.file_name.is_empty() && !m.file_name.contains('/'),
            "{m:?}"
        );
        assert_eq!(p.file_name(), m.file_name);
    }

    fn check_text(bytes: &[u8]) {
        let text = String::from_utf8_lossy(bytes);
        if let Ok(ms) = parse_markers_file("1", &text) {
            ms.iter().for_each(assert_inside);
        }
        let dir = marker_dir("1").unwrap();
        let files = [(dir.join("MARKERS0").unwrap(), bytes.to_vec())];
        for type_file in [b"TIMELINE_SERVER_BASED".as_slice(), bytes] {
            if let Ok(ms) = markers_from_listing("1", &dir, &[], Some(type_file), &files) {
                ms.markers.iter().for_each(assert_inside);
            }
        }
        // The same lines as DIRECT marker files.
        let listing: Vec<FileMeta> = text
            .split('\n')
            .filter_map(|l| dir.join(l).ok())
            .map(|path| FileMeta {
                path,
                size: 0,
                last_modified: Utc.timestamp_millis_opt(1).unwrap(),
            })
            .collect();
        if let Ok(ms) = markers_from_listing("1", &dir, &listing, None, &[]) {
            ms.markers.iter().for_each(assert_inside);
        }
    }

    #[test]
    fn fuzz_a_real_markers_file_reads() {
        let ms = parse_markers_file("1", MARKERS0).unwrap();
        assert_eq!(ms.len(), 3);
        ms.iter().for_each(assert_inside);
        check_text(MARKERS0.as_bytes());
    }

    proptest! {
        #![proptest_config(fuzz::config(1024))]

        #[test]
        fn fuzz_marker_files_of_arbitrary_bytes(bytes in fuzz::bytes(256)) {
            check_text(&bytes);
        }

        #[test]
        fn fuzz_near_valid_marker_names(text in fuzz::text_from("ab01_-./:\\\n.marker.CREATEMERGEAPPEND", 120)) {
            check_text(text.as_bytes());
        }

        #[test]
        fn fuzz_damaged_marker_files(bytes in fuzz::mutated(MARKERS0.as_bytes().to_vec())) {
            check_text(&bytes);
        }
    }
}
