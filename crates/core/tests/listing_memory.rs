//! Memory follows the work, not the table: the listing a rollback or a restore cross-checks its
//! plan against keeps only the entries the plan can use, judged while the listing streams in.
//!
//! A store wrapper appends 100,000 unrelated files (of an older commit) to one partition's
//! listing, generated one at a time, and records how much heap the listing's consumer holds
//! more after the last of them than after the first. This binary counts the heap of the thread
//! that allocates it (the tests run on a current-thread runtime, the in-memory store lists on
//! it), so tests running side by side do not disturb the count.

use std::alloc::{GlobalAlloc, Layout, System};
use std::cell::Cell;
use std::fmt;
use std::future::Future;
use std::pin::Pin;
use std::sync::{Arc, Mutex};

use bytes::Bytes;
use futures::stream::BoxStream;
use futures::StreamExt;
use hudi_keeper_core::exec::restore::{preview_restore, restore, RestoreOptions};
use hudi_keeper_core::exec::rollback::{preview, rollback, RollbackOptions, Selection};
use hudi_keeper_core::format::commit::workload_commit_metadata;
use hudi_keeper_core::storage::{RelPath, Storage};
use hudi_keeper_core::Table;
use object_store::memory::InMemory;
use object_store::path::Path;
use object_store::{ListResult, ObjectMeta, ObjectStore};

struct ThreadHeap;

thread_local! {
    static LIVE: Cell<i64> = const { Cell::new(0) };
    static PEAK: Cell<i64> = const { Cell::new(0) };
}

fn count(delta: i64) {
    let _ = LIVE.try_with(|c| {
        let now = c.get() + delta;
        c.set(now);
        let _ = PEAK.try_with(|p| p.set(p.get().max(now)));
    });
}

/// Start measuring the peak heap of this thread from now on; returns the heap now.
fn peak_from_here() -> i64 {
    let now = live();
    PEAK.with(|p| p.set(now));
    now
}

/// The most heap this thread held since [`peak_from_here`].
fn peak() -> i64 {
    PEAK.with(Cell::get)
}

/// Heap bytes allocated and not freed by this thread.
fn live() -> i64 {
    LIVE.with(Cell::get)
}

// SAFETY: every call is forwarded to the system allocator unchanged; the counter is a
// thread-local `Cell` with a constant initializer, which never allocates.
unsafe impl GlobalAlloc for ThreadHeap {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        let p = unsafe { System.alloc(layout) };
        if !p.is_null() {
            count(layout.size() as i64);
        }
        p
    }

    unsafe fn dealloc(&self, p: *mut u8, layout: Layout) {
        unsafe { System.dealloc(p, layout) };
        count(-(layout.size() as i64));
    }

    unsafe fn realloc(&self, p: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        let q = unsafe { System.realloc(p, layout, new_size) };
        if !q.is_null() {
            count(new_size as i64 - layout.size() as i64);
        }
        q
    }
}

#[global_allocator]
static HEAP: ThreadHeap = ThreadHeap;

const T1: &str = "20240101000000000";
const T2: &str = "20240101010000000";
const TF: &str = "20240101020000000";
const ROOT: &str = "wh/t";
const UNRELATED: usize = 100_000;

/// An in-memory store whose listings of `p1` end with `UNRELATED` files of `T1` that are not
/// there, generated one by one; for each such listing, the heap its consumer held more after the
/// last of them than after the first. Its listings of the table's root (a non-partitioned
/// table's files) end with as many unrelated files of its own, alike. One-level listings
/// (`list_with_delimiter`) of the root and of `p1` hold their unrelated files too, all at once
/// as the API returns them: a consumer that asks for one holds them all.
#[derive(Debug)]
struct PaddedListing {
    inner: Arc<dyn ObjectStore>,
    growth: Arc<Mutex<Vec<i64>>>,
}

impl fmt::Display for PaddedListing {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "PaddedListing({})", self.inner)
    }
}

type StoreFuture<'a, T> = Pin<Box<dyn Future<Output = object_store::Result<T>> + Send + 'a>>;

impl ObjectStore for PaddedListing {
    hudi_keeper_core::forward_to_inner!(
        put_opts,
        put_multipart_opts,
        get_opts,
        delete_stream,
        copy_opts
    );

    fn list(&self, prefix: Option<&Path>) -> BoxStream<'static, object_store::Result<ObjectMeta>> {
        let real = self.inner.list(prefix);
        let folders: &[&str] = match prefix.map(Path::as_ref) {
            Some(p) if p == ROOT => &["", "p1/"],
            Some(p) if p == format!("{ROOT}/p1") => &["p1/"],
            _ => return real,
        };
        let mut stream = real;
        for folder in folders {
            stream = stream.chain(self.unrelated(folder)).boxed();
        }
        stream
    }

    fn list_with_delimiter<'s, 'l, 'f>(
        &'s self,
        prefix: Option<&'l Path>,
    ) -> StoreFuture<'f, ListResult>
    where
        's: 'f,
        'l: 'f,
        Self: 'f,
    {
        let folder = match prefix.map(Path::as_ref) {
            Some(p) if p == ROOT => "",
            Some(p) if p == format!("{ROOT}/p1") => "p1/",
            _ => return self.inner.list_with_delimiter(prefix),
        };
        Box::pin(async move {
            let mut listing = self.inner.list_with_delimiter(prefix).await?;
            listing
                .objects
                .extend((0..UNRELATED).map(|i| unrelated_file(folder, i)));
            Ok(listing)
        })
    }
}

/// One unrelated file (of `T1`, not in the store) in `folder` (`""` or `"p1/"`).
fn unrelated_file(folder: &str, i: usize) -> ObjectMeta {
    ObjectMeta {
        location: Path::from(format!(
            "{ROOT}/{folder}{i:08x}-0000-0000-0000-000000000000-0_0-1-{i}_{T1}.parquet"
        )),
        last_modified: chrono::DateTime::from_timestamp_millis(0).unwrap(),
        size: 1,
        e_tag: None,
        version: None,
    }
}

impl PaddedListing {
    /// `UNRELATED` files in `folder`, generated one by one, recording the heap the consumer
    /// held more after the last than after the first.
    fn unrelated(&self, folder: &str) -> BoxStream<'static, object_store::Result<ObjectMeta>> {
        let folder = folder.to_string();
        let growth = Arc::clone(&self.growth);
        let mut first = 0;
        futures::stream::iter(0..UNRELATED)
            .map(move |i| {
                if i == 0 {
                    first = live();
                }
                if i == UNRELATED - 1 {
                    let held = live() - first;
                    growth.lock().unwrap().push(held);
                }
                Ok(unrelated_file(&folder, i))
            })
            .boxed()
    }
}

/// A version-8 copy-on-write table: T1 and T2 completed, TF failed (its heartbeat expired at
/// once under `options()`), each with a file or two in `p1` and `p2`.
async fn table() -> (Table, Arc<Mutex<Vec<i64>>>) {
    let growth = Arc::new(Mutex::new(Vec::new()));
    let store = Arc::new(PaddedListing {
        inner: Arc::new(InMemory::new()),
        growth: Arc::clone(&growth),
    });
    let s = Storage::from_store(store, ROOT, "memory://padded/wh/t");
    let tl = ".hoodie/timeline";
    let files: Vec<(String, &[u8])> = vec![
        (
            ".hoodie/hoodie.properties".into(),
            b"hoodie.table.name=m\nhoodie.table.type=COPY_ON_WRITE\nhoodie.table.version=8\nhoodie.timeline.layout.version=2\nhoodie.table.timeline.timezone=UTC\n",
        ),
        (format!("{tl}/{T1}.commit.requested"), b""),
        (format!("{tl}/{T1}.inflight"), b"{}"),
        (format!("{tl}/{T1}_20240101000000500.commit"), b"{}"),
        (format!("{tl}/{T2}.commit.requested"), b""),
        (format!("{tl}/{T2}.inflight"), b"{}"),
        (format!("{tl}/{T2}_20240101010000500.commit"), b"{}"),
        (format!("{tl}/{TF}.commit.requested"), b""),
        ("p1/.hoodie_partition_metadata".into(), b"x"),
        (format!("p1/a-0_0-1-1_{T1}.parquet"), b"t1"),
        (format!("p2/b-0_0-1-1_{T2}.parquet"), b"t2"),
        (format!("p1/c-0_0-9-9_{TF}.parquet"), b"tf"),
        (
            format!(".hoodie/.temp/{TF}/p1/c-0_0-9-9_{TF}.parquet.marker.CREATE"),
            b"",
        ),
        (format!("p2/missed-0_0-9-9_{TF}.parquet"), b"tf"),
        (format!(".hoodie/.heartbeat/{TF}"), b""),
    ];
    for (path, bytes) in files {
        let rel = RelPath::parse(&path).unwrap();
        s.put(&rel, Bytes::from_static(bytes)).await.unwrap();
    }
    // TF's workload names both partitions it wrote to (the missed file is in p2).
    let workload = workload_commit_metadata(&[("p1", 1), ("p2", 1)]).unwrap();
    let inflight = RelPath::parse(&format!("{tl}/{TF}.inflight")).unwrap();
    s.put(&inflight, Bytes::from(workload)).await.unwrap();
    // Older than any threshold of `options()`.
    tokio::time::sleep(std::time::Duration::from_millis(20)).await;
    (Table::open_storage(s).await.unwrap(), growth)
}

/// Every heartbeat and pending instant counts as old at once.
fn options() -> RollbackOptions {
    let mut o = RollbackOptions::default();
    o.heartbeat.interval = std::time::Duration::ZERO;
    o.heartbeat.min_instant_age = std::time::Duration::ZERO;
    o.heartbeat.clock_skew_margin = std::time::Duration::ZERO;
    o
}

/// The padded partition was listed, and each listing's consumer held less than 1 MiB more at
/// its end than at its start: less than 11 bytes per unrelated entry (holding them takes well
/// over 100). And since `base` (the heap before the run), the run never held 4 MiB more: no
/// one-level listing of the root or of `p1` was held whole (each holds over 10 MiB).
fn assert_unrelated_entries_were_not_held(growth: &Mutex<Vec<i64>>, base: i64, what: &str) {
    let held = peak() - base;
    assert!(
        held < 4 << 20,
        "{what}: the run held {held} bytes more at its peak (a listing held whole?)"
    );
    let growth = growth.lock().unwrap().clone();
    assert!(!growth.is_empty(), "{what}: the partition was not listed");
    for g in growth {
        assert!(
            g < 1 << 20,
            "{what}: the listing held {g} bytes more after {UNRELATED} unrelated entries"
        );
    }
}

#[tokio::test]
async fn a_rollback_holds_only_the_listed_files_of_its_instant_however_many_others_a_partition_has()
{
    let (table, growth) = table().await;
    let base = peak_from_here();
    let plans = preview(&table, &Selection::AllFailed, &options())
        .await
        .unwrap();
    assert_eq!(plans.len(), 1);
    assert_eq!(plans[0].instant, TF);
    assert_eq!(plans[0].files, 2);
    assert_eq!(plans[0].files_not_in_markers, 1);
    assert_unrelated_entries_were_not_held(&growth, base, "dry run");

    growth.lock().unwrap().clear();
    let base = peak_from_here();
    let done = rollback(&table, &Selection::AllFailed, &options(), None)
        .await
        .unwrap();
    assert_eq!(done.len(), 1);
    assert_eq!(done[0].files_deleted, 2);
    assert_unrelated_entries_were_not_held(&growth, base, "rollback");
}

#[tokio::test]
async fn a_restore_holds_only_the_listed_files_of_the_instants_it_undoes() {
    let (table, growth) = table().await;
    let options = RestoreOptions {
        rollback: options(),
        require_savepoint: false,
    };
    let base = peak_from_here();
    let p = preview_restore(&table, T1, &options).await.unwrap();
    let undone: Vec<(&str, usize)> = p
        .instants
        .iter()
        .map(|i| (i.instant.as_str(), i.files))
        .collect();
    assert_eq!(undone, vec![(TF, 2), (T2, 1)]);
    assert_unrelated_entries_were_not_held(&growth, base, "restore dry run");

    growth.lock().unwrap().clear();
    let base = peak_from_here();
    let done = restore(&table, T1, &options, None).await.unwrap();
    assert_eq!(done.files_deleted, 3);
    assert_unrelated_entries_were_not_held(&growth, base, "restore");
}
