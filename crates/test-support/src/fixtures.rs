//! Hand-made Hudi tables for engine tests: a few completed commits and one failed write, laid
//! out as hudi-format.md describes (the interop suite checks the same against real Hudi).

use std::collections::BTreeMap;
use std::sync::Arc;

use bytes::Bytes;
use hudi_keeper_core::storage::{RelPath, Storage};
use object_store::memory::InMemory;
use object_store::ObjectStore;

pub const T1: &str = "20240101000000000";
pub const T2: &str = "20240101010000000";
/// The failed write.
pub const TF: &str = "20240101020000000";

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    CowV6,
    CowV8,
    MorV6,
    MorV9,
}

impl Kind {
    pub fn layout2(self) -> bool {
        matches!(self, Kind::CowV8 | Kind::MorV9)
    }
    pub fn mor(self) -> bool {
        matches!(self, Kind::MorV6 | Kind::MorV9)
    }
    fn version(self) -> u32 {
        match self {
            Kind::CowV6 | Kind::MorV6 => 6,
            Kind::CowV8 => 8,
            Kind::MorV9 => 9,
        }
    }
    fn timeline(self) -> &'static str {
        if self.layout2() {
            ".hoodie/timeline"
        } else {
            ".hoodie"
        }
    }
    fn action(self) -> &'static str {
        if self.mor() {
            "deltacommit"
        } else {
            "commit"
        }
    }
}

pub struct Fixture {
    pub store: Arc<dyn ObjectStore>,
    pub root: String,
    pub uri: String,
    pub kind: Kind,
    pub mdt: bool,
}

pub fn rel(s: &str) -> RelPath {
    RelPath::parse(s).expect("valid relative path")
}

impl Fixture {
    pub fn storage(&self) -> Storage {
        Storage::from_store(Arc::clone(&self.store), &self.root, &self.uri)
    }

    pub async fn put(&self, path: &str, bytes: &[u8]) {
        self.storage()
            .put(&rel(path), Bytes::copy_from_slice(bytes))
            .await
            .expect("fixture write");
    }

    pub async fn delete(&self, path: &str) {
        self.storage()
            .delete(&rel(path))
            .await
            .expect("fixture delete");
    }

    /// Every object of the table with its bytes.
    pub async fn snapshot(&self) -> BTreeMap<String, Vec<u8>> {
        let s = self.storage();
        let mut out = BTreeMap::new();
        for m in s.list(&RelPath::root()).await.expect("list") {
            let b = s.get(&m.path).await.expect("get");
            out.insert(m.path.to_string(), b.to_vec());
        }
        out
    }

    fn completed_name(&self, t: &str, action: &str) -> String {
        if self.kind.layout2() {
            format!("{}/{t}_{}.{action}", self.kind.timeline(), bump(t))
        } else {
            format!("{}/{t}.{action}", self.kind.timeline())
        }
    }

    fn inflight_name(&self, t: &str, action: &str) -> String {
        if action == "commit" {
            format!("{}/{t}.inflight", self.kind.timeline())
        } else {
            format!("{}/{t}.{action}.inflight", self.kind.timeline())
        }
    }

    /// Build the table. With `mdt`, the table has a metadata table (v8/v9 layout) whose
    /// deltacommit of the failed write completed.
    pub async fn build(kind: Kind, mdt: bool) -> Fixture {
        Self::build_in(
            Arc::new(InMemory::new()),
            "wh/t",
            "memory://fixture/wh/t",
            kind,
            mdt,
        )
        .await
    }

    /// Build the table at `root` of `store`; `uri` is its URI.
    pub async fn build_in(
        store: Arc<dyn ObjectStore>,
        root: &str,
        uri: &str,
        kind: Kind,
        mdt: bool,
    ) -> Fixture {
        let f = Fixture {
            store,
            root: root.to_string(),
            uri: uri.to_string(),
            kind,
            mdt,
        };
        let ty = if kind.mor() {
            "MERGE_ON_READ"
        } else {
            "COPY_ON_WRITE"
        };
        let layout = if kind.layout2() { 2 } else { 1 };
        let mdt_parts = if mdt { "files" } else { "" };
        f.put(
            ".hoodie/hoodie.properties",
            format!(
                "hoodie.table.name=fx\nhoodie.table.type={ty}\nhoodie.table.version={}\nhoodie.timeline.layout.version={layout}\nhoodie.table.timeline.timezone=UTC\nhoodie.table.metadata.partitions={mdt_parts}\n",
                kind.version()
            )
            .as_bytes(),
        )
        .await;
        let a = kind.action();
        for t in [T1, T2] {
            f.put(&format!("{}/{t}.{a}.requested", kind.timeline()), b"")
                .await;
            f.put(&f.inflight_name(t, a), b"{}").await;
            f.put(&f.completed_name(t, a), b"{}").await;
        }
        // Committed data: base files of T1 in two partitions, and a T2 base file.
        f.put(&format!("p1/fg1-0_0-1-1_{T1}.parquet"), b"committed-1")
            .await;
        f.put(&format!("p2/fg2-0_0-1-1_{T1}.parquet"), b"committed-2")
            .await;
        f.put(&format!("p1/fg3-0_0-1-1_{T2}.parquet"), b"committed-3")
            .await;
        f.put("p1/.hoodie_partition_metadata", b"commitTime=1\n")
            .await;

        f.put_failed_write().await;
        if mdt && !kind.layout2() {
            f.put_v6_metadata_table().await;
        } else if mdt {
            f.put_metadata_table_timeline().await;
        }
        f
    }

    /// The failed write: requested + inflight (with the workload Hudi profiled: it writes to p1
    /// and p2), data files, markers, no heartbeat (old).
    async fn put_failed_write(&self) {
        let (f, kind, a) = (self, self.kind, self.kind.action());
        f.put(&format!("{}/{TF}.{a}.requested", kind.timeline()), b"")
            .await;
        f.put(&f.inflight_name(TF, a), &workload(kind, &["p1", "p2"]))
            .await;
        let new_base = format!("fg4-0_0-9-9_{TF}.parquet");
        f.put(&format!("p1/{new_base}"), b"failed-new").await;
        f.put(
            &format!(".hoodie/.temp/{TF}/p1/{new_base}.marker.CREATE"),
            b"",
        )
        .await;
        // A file the markers missed.
        f.put(&format!("p2/missed-0_0-9-9_{TF}.parquet"), b"failed-missed")
            .await;
        match kind {
            Kind::MorV6 => {
                // An append to the older slice of fg1 (base instant T1).
                let log = format!(".fg1-0_{T1}.log.1_0-9-9");
                f.put(&format!("p1/{log}"), b"#HUDI#failed-blocks").await;
                f.put(&format!(".hoodie/.temp/{TF}/p1/{log}.marker.APPEND"), b"")
                    .await;
            }
            Kind::MorV9 => {
                // Hudi 1.x writers mark a new log file (named with the instant) CREATE.
                let log = format!(".fg1-0_{TF}.log.1_0-9-9");
                f.put(&format!("p1/{log}"), b"#HUDI#failed-blocks").await;
                f.put(&format!(".hoodie/.temp/{TF}/p1/{log}.marker.CREATE"), b"")
                    .await;
            }
            _ => {
                let merged = format!("fg1-0_0-9-9_{TF}.parquet");
                f.put(&format!("p1/{merged}"), b"failed-merge").await;
                f.put(&format!(".hoodie/.temp/{TF}/p1/{merged}.marker.MERGE"), b"")
                    .await;
            }
        }
    }

    /// The metadata table's timeline (layout 2): a completed deltacommit and a log file for each
    /// instant of the data table.
    async fn put_metadata_table_timeline(&self) {
        let f = self;
        let kind = self.kind;
        let m = ".hoodie/metadata";
        f.put(
            &format!("{m}/.hoodie/hoodie.properties"),
            format!("hoodie.table.name=fx_metadata\nhoodie.table.type=MERGE_ON_READ\nhoodie.table.version={}\nhoodie.timeline.layout.version=2\nhoodie.table.timeline.timezone=UTC\n", kind.version()).as_bytes(),
        )
        .await;
        for t in [T1, T2, TF] {
            f.put(
                &format!("{m}/.hoodie/timeline/{t}.deltacommit.requested"),
                b"",
            )
            .await;
            f.put(
                &format!("{m}/.hoodie/timeline/{t}.deltacommit.inflight"),
                b"",
            )
            .await;
            f.put(
                &format!("{m}/.hoodie/timeline/{t}_{}.deltacommit", bump(t)),
                b"x",
            )
            .await;
            f.put(
                &format!("{m}/files/.files-0000-0_{t}.log.1_0-1-0"),
                t.as_bytes(),
            )
            .await;
        }
    }
}

/// The inflight file of a profiled write to `partitions`, as Hudi writes it: commit metadata
/// with a write stat per partition, JSON on version 6, Avro from version 8 on.
pub fn workload(kind: Kind, partitions: &[&str]) -> Vec<u8> {
    if kind.layout2() {
        let counts: Vec<(&str, i64)> = partitions.iter().map(|p| (*p, 1)).collect();
        hudi_keeper_core::format::commit::workload_commit_metadata(&counts).expect("workload")
    } else {
        let stats: serde_json::Map<String, serde_json::Value> = partitions
            .iter()
            .map(|p| {
                let stat = serde_json::json!([{"fileId": "", "prevCommit": "00000000000000", "numInserts": 1}]);
                (p.to_string(), stat)
            })
            .collect();
        serde_json::json!({"partitionToWriteStats": stats, "compacted": false, "extraMetadata": {}, "operationType": "UPSERT"})
            .to_string()
            .into_bytes()
    }
}

/// The base instant of the v6 fixture metadata table's `files` file slice (its initialization).
pub const MDT_INIT: &str = "00000000000000010";

impl Fixture {
    /// A table-version-6 metadata table (timeline layout 1) as Hudi 0.15 leaves it: the `files`
    /// partition's one file group (base file of the initialization), one log version per
    /// deltacommit appended to that slice, and completed deltacommits (JSON commit metadata
    /// with their write stats) of T1, T2 and the failed write TF (which completed its
    /// metadata-table deltacommit before it died).
    async fn put_v6_metadata_table(&self) {
        let m = ".hoodie/metadata";
        self.put(
            &format!("{m}/.hoodie/hoodie.properties"),
            b"hoodie.table.name=fx_metadata\nhoodie.table.type=MERGE_ON_READ\nhoodie.table.version=6\nhoodie.timeline.layout.version=1\nhoodie.table.timeline.timezone=UTC\n",
        )
        .await;
        self.put(
            &format!("{m}/files/files-0000-0_0-0-0_{MDT_INIT}.hfile"),
            b"hfile",
        )
        .await;
        let schema = "{\"type\":\"record\",\"name\":\"HoodieMetadataRecord\"}";
        for (i, t) in [MDT_INIT, T1, T2, TF].into_iter().enumerate() {
            self.put(&format!("{m}/.hoodie/{t}.deltacommit.requested"), b"")
                .await;
            self.put(&format!("{m}/.hoodie/{t}.deltacommit.inflight"), b"")
                .await;
            let stats = if i == 0 {
                serde_json::json!({})
            } else {
                let log = format!(".files-0000-0_{MDT_INIT}.log.{i}_0-0-0");
                self.put(&format!("{m}/files/{log}"), t.as_bytes()).await;
                serde_json::json!({ "files": [{
                    "fileId": "files-0000-0",
                    "path": format!("files/{log}"),
                    "prevCommit": MDT_INIT,
                    "fileSizeInBytes": t.len(),
                }]})
            };
            let metadata = serde_json::json!({
                "partitionToWriteStats": stats,
                "compacted": false,
                "extraMetadata": { "schema": schema },
                "operationType": "UPSERT_PREPPED",
            });
            self.put(
                &format!("{m}/.hoodie/{t}.deltacommit"),
                metadata.to_string().as_bytes(),
            )
            .await;
        }
    }

    /// A write in progress at instant `t` (requested + inflight, one data file and its marker),
    /// without a heartbeat: the caller starts one for it.
    pub async fn start_write(&self, t: &str) {
        let a = self.kind.action();
        self.put(&format!("{}/{t}.{a}.requested", self.kind.timeline()), b"")
            .await;
        self.put(&self.inflight_name(t, a), b"{}").await;
        let base = format!("w{t}-0_0-1-1_{t}.parquet");
        self.put(&format!("p1/{base}"), b"in-progress").await;
        self.put(&format!(".hoodie/.temp/{t}/p1/{base}.marker.CREATE"), b"")
            .await;
    }
}

/// Build the fixture table (with the old failed write `TF`) in the local folder `dir`. Every
/// file is dated an hour back, so that by the store's clock `TF` is an hour old (no heartbeat
/// file: a failed write only on a table known to have LAZY writers, `assume_lazy_writers`).
pub fn build_local(rt: &tokio::runtime::Runtime, dir: &std::path::Path, kind: Kind) -> Fixture {
    std::fs::create_dir_all(dir).expect("table dir");
    let store =
        Arc::new(object_store::local::LocalFileSystem::new_with_prefix(dir).expect("local store"));
    let f = rt.block_on(Fixture::build_in(
        store,
        "",
        dir.to_str().expect("utf-8"),
        kind,
        false,
    ));
    super::age_all(dir, std::time::Duration::from_secs(3600));
    f
}

/// An instant time for now (UTC, the fixtures' timeline zone), `offset_ms` later.
pub fn instant_now(offset_ms: i64) -> String {
    let t = chrono::Utc::now() + chrono::Duration::milliseconds(offset_ms);
    t.format("%Y%m%d%H%M%S%3f").to_string()
}

/// A time a little after `t` (as its completion time).
pub fn bump(t: &str) -> String {
    let n: u128 = t.parse().expect("digits");
    format!("{:0width$}", n + 500, width = t.len())
}
