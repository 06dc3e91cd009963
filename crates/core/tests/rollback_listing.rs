//! What a rollback lists and counts: its requests by kind, and the cross-check of its plan
//! against the partitions the failed write names (the whole table only when it names none).

use std::sync::Arc;

use common::fixtures::{Fixture, Kind, T1, TF};
use hudi_keeper_core::exec::rollback::{preview, rollback, Selection};
use hudi_keeper_core::storage::testing::CountingInterceptor;
use hudi_keeper_core::storage::OpKind;
use hudi_keeper_core::Table;
use hudi_keeper_test_support as common;
use hudi_keeper_test_support::engine::{open, rollback_options as opts};

#[tokio::test]
async fn rollback_requests_are_counted() {
    let f = Fixture::build(Kind::CowV8, false).await;
    let counter = Arc::new(CountingInterceptor::new());
    let t = Table::open_storage(f.storage().with_interceptor(counter.clone()))
        .await
        .unwrap();
    rollback(&t, &Selection::AllFailed, &opts(), None)
        .await
        .unwrap();
    // 3 data files + 2 timeline files + 2 markers + the writer's heartbeat + the rollback's
    // own heartbeat (claimed with one put, released when done).
    assert_eq!(counter.count(OpKind::Delete), 9);
    assert_eq!(counter.count(OpKind::PutIfAbsent), 3);
    assert_eq!(counter.count(OpKind::Put), 1);
}

/// Records the folders listed (recursively or one level) through the storage seam.
#[derive(Debug, Default)]
struct ListedFolders(std::sync::Mutex<Vec<(OpKind, String)>>);

impl hudi_keeper_core::storage::Interceptor for ListedFolders {
    fn before(
        &self,
        op: OpKind,
        path: &hudi_keeper_core::storage::RelPath,
    ) -> Result<(), hudi_keeper_core::storage::StorageError> {
        if matches!(op, OpKind::List | OpKind::ListDir) {
            self.0.lock().unwrap().push((op, path.to_string()));
        }
        Ok(())
    }
}

impl ListedFolders {
    /// The data folders listed: what is not the timeline, the marker folder or a heartbeat.
    fn data_folders(&self) -> Vec<String> {
        let mut v: Vec<String> = self
            .0
            .lock()
            .unwrap()
            .iter()
            .map(|(_, p)| p.clone())
            .filter(|p| !p.starts_with(".hoodie"))
            .collect();
        v.sort();
        v.dedup();
        v
    }
}

/// The fixture with `n` more partitions of committed files that the failed write never touched.
async fn with_untouched_partitions(kind: Kind, n: usize) -> Fixture {
    let f = Fixture::build(kind, false).await;
    for i in 0..n {
        f.put(&format!("u{i:04}/fgu{i}-0_0-1-1_{T1}.parquet"), b"c")
            .await;
    }
    f
}

#[tokio::test]
async fn the_cross_check_lists_the_partitions_the_failed_write_names_not_the_table() {
    for kind in [Kind::CowV6, Kind::CowV8, Kind::MorV6, Kind::MorV9] {
        let mut listed_per_size = Vec::new();
        for untouched in [5, 200] {
            let f = with_untouched_partitions(kind, untouched).await;
            let listed = Arc::new(ListedFolders::default());
            let counter = Arc::new(CountingInterceptor::new());
            let chain =
                hudi_keeper_core::storage::testing::Chain(vec![listed.clone(), counter.clone()]);
            let t = Table::open_storage(f.storage().with_interceptor(Arc::new(chain)))
                .await
                .unwrap();
            let previews = preview(&t, &Selection::AllFailed, &opts()).await.unwrap();
            let json = serde_json::to_value(&previews[0].listing).unwrap();
            assert_eq!(json["scope"], "partitions", "{kind:?}: {json}");
            assert_eq!(json["partitions"], 2, "{kind:?}: {json}");
            let done = rollback(&t, &Selection::AllFailed, &opts(), None)
                .await
                .unwrap();
            assert_eq!(done.len(), 1);
            // Only the partitions the markers and the inflight workload name (p1, p2) were
            // listed: never the table root, never an untouched partition.
            assert_eq!(
                listed.data_folders(),
                ["p1", "p2"],
                "{kind:?}, {untouched} untouched"
            );
            // The file its markers missed (in p2, which the workload names) is gone.
            let after = f.snapshot().await;
            assert!(
                !after.contains_key(&format!("p2/missed-0_0-9-9_{TF}.parquet")),
                "{kind:?}: the file the markers missed is still there"
            );
            assert!(after.contains_key(&format!("u0000/fgu0-0_0-1-1_{T1}.parquet")));
            listed_per_size.push(counter.count(OpKind::List) + counter.count(OpKind::ListDir));
        }
        assert_eq!(
            listed_per_size[0], listed_per_size[1],
            "{kind:?}: the listings grew with the untouched partitions"
        );
    }
}

#[tokio::test]
async fn an_instant_that_names_no_partition_is_cross_checked_against_the_whole_table() {
    for kind in [Kind::CowV6, Kind::CowV8] {
        let f = with_untouched_partitions(kind, 3).await;
        // No markers, no workload (a bulk insert's empty inflight file), and a file of the
        // failed write in a partition nothing names.
        for m in f.snapshot().await.keys().filter(|k| k.contains(".temp/")) {
            f.delete(m).await;
        }
        let inflight = if kind.layout2() {
            format!(".hoodie/timeline/{TF}.inflight")
        } else {
            format!(".hoodie/{TF}.inflight")
        };
        f.put(&inflight, b"").await;
        let stray = format!("u0002/stray-0_0-9-9_{TF}.parquet");
        f.put(&stray, b"failed-stray").await;
        let t = open(&f).await;
        let previews = preview(&t, &Selection::AllFailed, &opts()).await.unwrap();
        let json = serde_json::to_value(&previews[0].listing).unwrap();
        assert_eq!(json["scope"], "whole_table", "{kind:?}: {json}");
        assert!(
            json["why"].as_str().unwrap().contains("names no partition"),
            "{json}"
        );
        rollback(&t, &Selection::AllFailed, &opts(), None)
            .await
            .unwrap();
        let after = f.snapshot().await;
        assert!(
            !after.contains_key(&stray),
            "{kind:?}: {stray} was not found"
        );
        assert!(!after.contains_key(&format!("p2/missed-0_0-9-9_{TF}.parquet")));
    }
}

#[tokio::test]
async fn a_damaged_inflight_workload_widens_the_listing_to_the_whole_table() {
    let f = with_untouched_partitions(Kind::CowV8, 3).await;
    f.put(
        &format!(".hoodie/timeline/{TF}.inflight"),
        b"Obj\x01garbage",
    )
    .await;
    let stray = format!("u0001/stray-0_0-9-9_{TF}.parquet");
    f.put(&stray, b"failed-stray").await;
    let t = open(&f).await;
    let previews = preview(&t, &Selection::AllFailed, &opts()).await.unwrap();
    let json = serde_json::to_value(&previews[0].listing).unwrap();
    assert_eq!(json["scope"], "whole_table", "{json}");
    rollback(&t, &Selection::AllFailed, &opts(), None)
        .await
        .unwrap();
    assert!(!f.snapshot().await.contains_key(&stray));
}
