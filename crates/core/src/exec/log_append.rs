//! Appending a block to a file slice as a new log version, the way Hudi writes on stores
//! without append (and the way hudi-keeper always writes): an APPEND marker first, then the
//! new log file created if absent. A rerun finds its earlier attempt's file through the marker
//! and reuses it when it holds the same block, so a crash at any step never leaves two blocks.
//!
//! Which version the new file gets is the writing Hudi's rule, chosen by the caller
//! ([`Versioning`]); either way an existing file is never written over.

use std::collections::BTreeSet;

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
    /// How the new log file's version is chosen.
    pub versioning: Versioning,
}

/// How the new log file's version is chosen. The name is never one that exists: a taken name
/// rolls over to the next version, as Hudi's log writer does.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Versioning {
    /// The version after the slice's latest log file, whatever that file's write token. Hudi
    /// 0.15 (table version 6): `HoodieLogFormat.WriterBuilder.build` takes the latest version
    /// (`FSUtils.getLatestLogVersion`) and `HoodieLogFormatWriter` rolls over past it, the
    /// file existing and the store having no append.
    AfterLatest,
    /// Version 1, rolled over while the exact name (this write token) exists, as Hudi 1.0.1 /
    /// 1.1.1 do on table version 8+ (`WriterBuilder.build` starts at `LOGFILE_BASE_VERSION`
    /// when a write token is given and `HoodieLogFormatWriter.getOutputStream` rolls over while
    /// `storage.exists(path)`), and further while the name would not sort after every log file
    /// of the slice. Hudi reads a slice's log files by version, then write token (its
    /// `LogFileComparator`), and a command block undoes only blocks read before it: Hudi's own
    /// first free name can sort before the failed file (version 1 with token `0-0-0` before a
    /// failed `1-2-0`), and then the failed write's records come back once its instant is
    /// archived (seen with Hudi 1.1.1's own rollback). hudi-keeper never names it so.
    FirstFree,
}

/// How many log versions an append finds taken by a create (not seen in its listing) before it
/// gives up.
const MAX_VERSION_TRIES: usize = 16;

/// Append `block` to `slice` as a new log version, with its APPEND marker under `markers` (the
/// marker folder of the writing instant). A log file an earlier attempt wrote (named by one of
/// those markers, of this slice, and whose bytes `is_ours`) is reused, unless it is in
/// `claimed` (the files this run already wrote for other blocks of the same bytes). Returns the
/// log file and its size. Errors name `instant`, the instant the block is written for.
pub(super) async fn append_block(
    storage: &Storage,
    instant: &str,
    markers: &RelPath,
    slice: &Slice<'_>,
    block: &[u8],
    claimed: &BTreeSet<RelPath>,
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
        if claimed.contains(&rel) {
            continue;
        }
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
    let taken: BTreeSet<&str> = listing.files.iter().map(|m| m.file_name()).collect();
    // The slice's log file read last (version, then write token, as Hudi orders them).
    let last: Option<(u32, String)> = listing
        .files
        .iter()
        .filter_map(|m| match DataFile::parse(m.file_name()) {
            Some(DataFile::Log {
                file_id: f,
                instant,
                version,
                write_token,
                ..
            }) if f == slice.file_id && instant == slice.base_instant => {
                Some((version, write_token))
            }
            _ => None,
        })
        .max();
    let mut version = match slice.versioning {
        Versioning::AfterLatest => last.as_ref().map_or(0, |(v, _)| *v).checked_add(1),
        Versioning::FirstFree => Some(1),
    };
    // The block must be read after every log file of the slice.
    let reads_first = |v: u32| {
        last.as_ref()
            .is_some_and(|(lv, lt)| (v, slice.write_token) <= (*lv, lt.as_str()))
    };
    let mut conflicts = 0;
    // A version past u32 (a listed name claiming the largest one) ends the search as taken.
    while let Some(v) = version.filter(|_| conflicts < MAX_VERSION_TRIES) {
        let name = log_file_name(slice.file_id, slice.base_instant, v, slice.write_token);
        let rel = part.join(&name).map_err(StorageError::from)?;
        version = v.checked_add(1);
        if taken.contains(name.as_str()) || claimed.contains(&rel) || reads_first(v) {
            continue;
        }
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
            // Created since the listing: the next version, as Hudi rolls over.
            Err(StorageError::AlreadyExists { .. }) => conflicts += 1,
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
            versioning: Versioning::AfterLatest,
        };
        let (rel, size) = append_block(
            &s,
            "200",
            &p(".hoodie/.temp/200"),
            &slice,
            b"block",
            &BTreeSet::new(),
            |_| true,
        )
        .await
        .unwrap();
        assert_eq!(rel.file_name(), log_file_name("fg1", "100", 2, "1-0-1"));
        assert_eq!(size, 5);
        assert_eq!(huge.body_bytes_read(), 0);
    }

    fn memory() -> Storage {
        Storage::from_store(Arc::new(InMemory::new()), "t", "memory://t")
    }

    fn rel(s: &str) -> RelPath {
        RelPath::parse(s).unwrap()
    }

    /// The file name `append_block` picks for `versioning` in a partition holding `existing`
    /// (names in `p1`), with token `0-0-0` and instant `300`; the block written there.
    async fn picked(versioning: Versioning, existing: &[&str]) -> String {
        let s = memory();
        for name in existing {
            s.put(&rel(&format!("p1/{name}")), Bytes::from_static(b"other"))
                .await
                .unwrap();
        }
        let slice = Slice {
            partition: "p1",
            file_id: "fg1",
            base_instant: "300",
            write_token: "0-0-0",
            versioning,
        };
        let markers = rel(".hoodie/.temp/400");
        let no = BTreeSet::new();
        let (written, size) = append_block(&s, "300", &markers, &slice, b"block", &no, |_| true)
            .await
            .unwrap();
        assert_eq!(size, 5);
        assert_eq!(s.get(&written).await.unwrap().as_ref(), b"block");
        for name in existing {
            assert_eq!(
                s.get(&rel(&format!("p1/{name}"))).await.unwrap().as_ref(),
                b"other",
                "{name} written over"
            );
        }
        written.file_name().to_string()
    }

    #[tokio::test]
    async fn first_free_starts_at_version_1_passes_over_taken_names_and_never_sorts_before_the_slices_log_files(
    ) {
        use Versioning::FirstFree;
        // Hudi 1.x: nothing there, or only other write tokens, or another slice: version 1.
        assert_eq!(picked(FirstFree, &[]).await, ".fg1_300.log.1_0-0-0");
        // Never read before a log file of the slice (Hudi's own first free name would be
        // `.log.1_0-0-0`, read before both and so undoing neither).
        assert_eq!(
            picked(
                FirstFree,
                &[".fg1_300.log.1_1-0-1", ".fg1_300.log.2_3-12-0"]
            )
            .await,
            ".fg1_300.log.3_0-0-0"
        );
        assert_eq!(
            picked(FirstFree, &[".fg1_300.log.1_1-2-0"]).await,
            ".fg1_300.log.2_0-0-0"
        );
        assert_eq!(
            picked(FirstFree, &[".fg1_200.log.1_0-0-0", ".fg2_300.log.1_0-0-0"]).await,
            ".fg1_300.log.1_0-0-0"
        );
        // Rolled over while the exact name exists; the first free version, not the latest + 1.
        assert_eq!(
            picked(FirstFree, &[".fg1_300.log.1_0-0-0"]).await,
            ".fg1_300.log.2_0-0-0"
        );
        assert_eq!(
            picked(
                FirstFree,
                &[
                    ".fg1_300.log.1_0-0-0",
                    ".fg1_300.log.3_0-0-0",
                    ".fg1_300.log.2_1-0-1"
                ]
            )
            .await,
            ".fg1_300.log.4_0-0-0"
        );
    }

    #[tokio::test]
    async fn after_latest_follows_the_latest_version_of_any_write_token() {
        use Versioning::AfterLatest;
        // Hudi 0.15 (table version 6): the latest version whatever its token, plus one.
        assert_eq!(picked(AfterLatest, &[]).await, ".fg1_300.log.1_0-0-0");
        assert_eq!(
            picked(
                AfterLatest,
                &[".fg1_300.log.1_1-0-1", ".fg1_300.log.3_3-12-0"]
            )
            .await,
            ".fg1_300.log.4_0-0-0"
        );
    }

    #[tokio::test]
    async fn a_latest_version_at_the_largest_number_is_refused_not_overflowed() {
        let s = memory();
        let top = format!("p1/.fg1_300.log.{}_1-0-1", u32::MAX);
        s.put(&rel(&top), Bytes::from_static(b"other"))
            .await
            .unwrap();
        let slice = Slice {
            partition: "p1",
            file_id: "fg1",
            base_instant: "300",
            write_token: "1-0-1",
            versioning: Versioning::AfterLatest,
        };
        let no = BTreeSet::new();
        let err = append_block(
            &s,
            "300",
            &rel(".hoodie/.temp/400"),
            &slice,
            b"b",
            &no,
            |_| true,
        )
        .await
        .unwrap_err();
        assert!(
            matches!(&err, Error::Refused { reason, .. } if reason.contains("free log version")),
            "{err}"
        );
        assert_eq!(s.list_dir(&rel("p1")).await.unwrap().files.len(), 1);
    }

    /// A store whose listings leave out one file: as if it were created after the listing.
    #[derive(Debug)]
    struct Hiding {
        inner: Arc<dyn ObjectStore>,
        hidden: object_store::path::Path,
    }

    impl std::fmt::Display for Hiding {
        fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
            write!(f, "Hiding({})", self.inner)
        }
    }

    impl ObjectStore for Hiding {
        crate::forward_to_inner!(
            put_opts,
            put_multipart_opts,
            get_opts,
            delete_stream,
            list,
            copy_opts
        );

        fn list_with_delimiter<'s, 'l, 'f>(
            &'s self,
            prefix: Option<&'l object_store::path::Path>,
        ) -> std::pin::Pin<
            Box<
                dyn std::future::Future<Output = object_store::Result<object_store::ListResult>>
                    + Send
                    + 'f,
            >,
        >
        where
            's: 'f,
            'l: 'f,
            Self: 'f,
        {
            Box::pin(async move {
                let mut out = self.inner.list_with_delimiter(prefix).await?;
                out.objects.retain(|o| o.location != self.hidden);
                Ok(out)
            })
        }
    }

    #[tokio::test]
    async fn a_name_taken_after_the_listing_rolls_over_to_the_next_version() {
        // The create-if-absent is the existence check: a file the listing did not show is not
        // written over, and the block goes to the next version, as Hudi's writer rolls over on
        // FileAlreadyExistsException.
        let inner: Arc<dyn ObjectStore> = Arc::new(InMemory::new());
        let plain = Storage::from_store(Arc::clone(&inner), "t", "memory://t");
        let racer = rel("p1/.fg1_300.log.1_0-0-0");
        plain
            .put(&racer, Bytes::from_static(b"other"))
            .await
            .unwrap();
        let hiding = Arc::new(Hiding {
            inner,
            hidden: object_store::path::Path::from("t/p1/.fg1_300.log.1_0-0-0"),
        });
        let s = Storage::from_store(hiding, "t", "memory://t");
        assert!(s.list_dir(&rel("p1")).await.unwrap().files.is_empty());
        let slice = Slice {
            partition: "p1",
            file_id: "fg1",
            base_instant: "300",
            write_token: "0-0-0",
            versioning: Versioning::FirstFree,
        };
        let (written, _) = append_block(
            &s,
            "300",
            &rel(".hoodie/.temp/400"),
            &slice,
            b"block",
            &BTreeSet::new(),
            |_| true,
        )
        .await
        .unwrap();
        assert_eq!(written.file_name(), ".fg1_300.log.2_0-0-0");
        assert_eq!(plain.get(&racer).await.unwrap().as_ref(), b"other");
    }

    #[tokio::test]
    async fn an_earlier_attempts_file_already_claimed_by_this_run_is_not_reused() {
        // Two blocks of the same bytes for one slice (two v8 APPEND markers of one file
        // group): the second does not take the first's file, found through its marker.
        let s = memory();
        let slice = Slice {
            partition: "p1",
            file_id: "fg1",
            base_instant: "300",
            write_token: "0-0-0",
            versioning: Versioning::FirstFree,
        };
        let markers = rel(".hoodie/.temp/400");
        let mut claimed = BTreeSet::new();
        let (first, _) = append_block(&s, "300", &markers, &slice, b"block", &claimed, |_| true)
            .await
            .unwrap();
        // A rerun of the first block finds it again through its marker.
        let (again, _) = append_block(&s, "300", &markers, &slice, b"block", &claimed, |_| true)
            .await
            .unwrap();
        assert_eq!(again, first);
        claimed.insert(first.clone());
        let (second, _) = append_block(&s, "300", &markers, &slice, b"block", &claimed, |_| true)
            .await
            .unwrap();
        assert_eq!(first.file_name(), ".fg1_300.log.1_0-0-0");
        assert_eq!(second.file_name(), ".fg1_300.log.2_0-0-0");
    }
}
