//! Savepoints as Hudi keeps them (`tests/interop/observations/savepoint-restore.md`): a savepoint
//! of commit `T` is `T.savepoint.inflight` (empty) and the completed `T.savepoint` (`T_C.savepoint`
//! in layout 2), a `HoodieSavepointMetadata`. Listing reads them; deleting removes the completed
//! file, then the inflight one, as Hudi's `deleteSavepoint` does. Creating writes the empty
//! inflight, then the completed file, under the table lock (as Hudi 1.x does), with the files of
//! the commit's view (`plan::savepoint`); nothing else changes, the metadata table included.

use serde::Serialize;
use tracing::info;

use super::steps::holding_lock;
use super::steps::{delete_newest_first, list_data_files, Wanted};
use super::timeline_ops::{create_if_absent, new_instant_time, timeline_file};
use crate::format::avro::{read_single_record, string_field};
use crate::format::savepoint::SavepointMetadata;
use crate::plan::savepoint::{default_target, plan_savepoint, SavepointInput};
use crate::protocol::lock::LockOptions;
use crate::timeline::{Action, State, Timeline};
use crate::{Error, Table};

/// One savepoint on the active timeline.
#[derive(Debug, Clone, Serialize)]
pub struct SavepointInfo {
    /// The savepointed commit's instant time (the savepoint's own time).
    pub instant: String,
    /// Requested, inflight or completed.
    pub state: State,
    /// The completion time (layout 2).
    pub completion_time: Option<String>,
    /// The metadata of a completed savepoint.
    pub metadata: Option<SavepointMetadata>,
}

/// Every savepoint of the active timeline, oldest first. A completed savepoint whose file cannot
/// be read is an error (naming the file), never skipped.
pub async fn list_savepoints(table: &Table) -> Result<Vec<SavepointInfo>, Error> {
    let timeline = table.timeline().await?;
    let mut out = Vec::new();
    for i in timeline
        .instants()
        .iter()
        .filter(|i| i.action == Action::Savepoint)
    {
        let metadata = match (i.is_pending(), i.file(State::Completed)) {
            (false, Some(f)) => {
                let bytes = table.storage().get(&f.path).await?;
                Some(
                    SavepointMetadata::from_avro(&bytes).map_err(|source| Error::Avro {
                        table: table.uri().to_string(),
                        instant: i.requested_time.clone(),
                        path: f.path.to_string(),
                        source,
                    })?,
                )
            }
            _ => None,
        };
        out.push(SavepointInfo {
            instant: i.requested_time.clone(),
            state: i.state,
            completion_time: i.completion_time.clone(),
            metadata,
        });
    }
    Ok(out)
}

/// Who and why, recorded in the savepoint.
#[derive(Debug, Clone)]
pub struct SavepointRequest {
    /// The commit to savepoint; the latest completed commit when `None`.
    pub instant: Option<String>,
    /// `savepointedBy`.
    pub user: String,
    /// `comments`.
    pub comment: String,
}

/// A savepoint as it would be (dry run) or was written.
#[derive(Debug, Clone, Serialize)]
pub struct SavepointCreated {
    /// The savepointed commit.
    pub instant: String,
    /// The completion time of the savepoint (layout 2), once written.
    pub completion_time: Option<String>,
    /// Whether it was written (false for a dry run).
    pub written: bool,
    /// What it records.
    pub metadata: SavepointMetadata,
}

async fn savepoint_metadata(
    table: &Table,
    request: &SavepointRequest,
) -> Result<(String, SavepointMetadata), Error> {
    let timeline = table.timeline().await?;
    let target = match &request.instant {
        Some(t) => t.clone(),
        None => default_target(&timeline).ok_or_else(|| Error::Refused {
            table: table.uri().to_string(),
            instant: "-".into(),
            reason: "the table has no completed commit to savepoint".into(),
        })?,
    };
    // The savepoint names every file of the commit's view: the whole listing is the work.
    let files = list_data_files(table.storage(), &Wanted::every()).await?;
    let retained = earliest_retained(table, &timeline).await?;
    let partitions = plan_savepoint(&SavepointInput {
        timeline: &timeline,
        layout: table.config().timeline_layout,
        target: &target,
        data_files: &files,
        list_empty_partitions: !table.config().metadata_table_enabled(),
        earliest_retained: retained.as_deref(),
    })
    .map_err(|r| Error::Refused {
        table: table.uri().to_string(),
        instant: target.clone(),
        reason: format!("{}; nothing was changed", r.0),
    })?;
    Ok((
        target,
        SavepointMetadata {
            savepointed_by: request.user.clone(),
            savepointed_at: chrono::Utc::now().timestamp_millis(),
            comments: request.comment.clone(),
            partition_metadata: partitions,
            version: Some(1),
        },
    ))
}

/// `earliestCommitToRetain` of the last completed clean (`HoodieCleanMetadata`), if any. An
/// unreadable clean file is an error, never "no clean". (Savepoint create and restore both
/// check a commit against it: `plan::savepoint::cleaned_beyond`.)
pub(super) async fn earliest_retained(
    table: &Table,
    timeline: &Timeline,
) -> Result<Option<String>, Error> {
    let Some(clean) = timeline
        .completed()
        .filter(|i| i.action == Action::Clean)
        .filter_map(|i| i.file(State::Completed))
        .last()
    else {
        return Ok(None);
    };
    let bytes = table.storage().get(&clean.path).await?;
    let record = read_single_record(&bytes).map_err(|source| Error::Avro {
        table: table.uri().to_string(),
        instant: clean.name.requested_time.clone(),
        path: clean.path.to_string(),
        source,
    })?;
    Ok(string_field(&record, "earliestCommitToRetain")
        .filter(|s| !s.is_empty())
        .map(str::to_string))
}

/// What [`create_savepoint`] would write, changing nothing.
pub async fn preview_savepoint(
    table: &Table,
    request: &SavepointRequest,
) -> Result<SavepointCreated, Error> {
    let (instant, metadata) = savepoint_metadata(table, request).await?;
    Ok(SavepointCreated {
        instant,
        completion_time: None,
        written: false,
        metadata,
    })
}

/// Savepoint a completed commit under the table lock: `T.savepoint.inflight` (empty), then the
/// completed `T.savepoint` (`T_C.savepoint` in layout 2). An interrupted earlier attempt (the
/// inflight file alone) is completed.
pub async fn create_savepoint(
    table: &Table,
    request: &SavepointRequest,
    lock: &LockOptions,
) -> Result<SavepointCreated, Error> {
    let (created, _) = holding_lock(table, lock, |fenced| async move {
        let (instant, metadata) = savepoint_metadata(&fenced, request).await?;
        let config = fenced.config();
        let storage = fenced.storage();
        let inflight = timeline_file(config, &instant, None, Action::Savepoint, State::Inflight)?;
        fenced.stop_point("before writing the savepoint", None)?;
        create_if_absent(storage, &inflight, Vec::new()).await?;
        let completion = match config.timeline_layout {
            crate::table::TimelineLayout::V1 => None,
            crate::table::TimelineLayout::V2 => {
                let now = fenced.timeline().await?;
                Some(new_instant_time(&[&now], fenced.zone()))
            }
        };
        let path = timeline_file(
            config,
            &instant,
            completion.as_deref(),
            Action::Savepoint,
            State::Completed,
        )?;
        let bytes = metadata.to_avro().map_err(|source| Error::Avro {
            table: table.uri().to_string(),
            instant: instant.clone(),
            path: path.to_string(),
            source,
        })?;
        if !create_if_absent(storage, &path, bytes).await? {
            return Err(Error::Refused {
                table: table.uri().to_string(),
                instant: instant.clone(),
                reason: "a savepoint of this commit was written meanwhile".into(),
            });
        }
        info!(table = %table.uri(), instant, files = metadata.file_count(), "savepoint created");
        Ok(SavepointCreated {
            instant,
            completion_time: completion,
            written: true,
            metadata,
        })
    })
    .await?;
    Ok(created)
}

/// Delete the savepoint of `instant` under the table lock: the completed file first, then the
/// inflight one. A timeline without that savepoint is refused and nothing changes.
pub async fn delete_savepoint(
    table: &Table,
    instant: &str,
    lock: &LockOptions,
) -> Result<(), Error> {
    holding_lock(table, lock, |fenced| async move {
        let timeline = fenced.timeline().await?;
        let Some(sp) = timeline
            .find(instant)
            .find(|i| i.action == Action::Savepoint)
        else {
            return Err(Error::Refused {
                table: table.uri().to_string(),
                instant: instant.to_string(),
                reason: "there is no savepoint at this instant; nothing was changed".into(),
            });
        };
        fenced.stop_point("before deleting the savepoint", None)?;
        delete_newest_first(fenced.storage(), sp.files.clone()).await?;
        info!(table = %table.uri(), instant, "deleted savepoint");
        Ok(())
    })
    .await?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;
    use std::sync::Arc;

    use bytes::Bytes;
    use object_store::memory::InMemory;

    use super::*;
    use crate::storage::{RelPath, Storage};

    async fn table_with_savepoint(layout2: bool) -> (Table, Storage) {
        let s = Storage::from_store(Arc::new(InMemory::new()), "t", "memory://t");
        let (version, tl) = if layout2 {
            (9, ".hoodie/timeline")
        } else {
            (6, ".hoodie")
        };
        let put = |p: String, b: Vec<u8>| {
            let s = s.clone();
            async move {
                s.put(&RelPath::parse(&p).unwrap(), Bytes::from(b))
                    .await
                    .unwrap()
            }
        };
        put(
            ".hoodie/hoodie.properties".into(),
            format!("hoodie.table.name=t\nhoodie.table.type=COPY_ON_WRITE\nhoodie.table.version={version}\nhoodie.table.timeline.timezone=UTC\n").into_bytes(),
        )
        .await;
        let t = "20240101000000000";
        put(format!("{tl}/{t}.commit.requested"), vec![]).await;
        put(format!("{tl}/{t}.inflight"), vec![]).await;
        let done = if layout2 {
            format!("{tl}/{t}_20240101000001000.commit")
        } else {
            format!("{tl}/{t}.commit")
        };
        put(done, b"{}".to_vec()).await;
        let meta = SavepointMetadata {
            savepointed_by: "u".into(),
            savepointed_at: 1,
            comments: "c".into(),
            partition_metadata: BTreeMap::from([(
                "p1".to_string(),
                vec!["f-0_0-1-1_20240101000000000.parquet".to_string()],
            )]),
            version: Some(1),
        };
        put(format!("{tl}/{t}.savepoint.inflight"), vec![]).await;
        let sp = if layout2 {
            format!("{tl}/{t}_20240101000002000.savepoint")
        } else {
            format!("{tl}/{t}.savepoint")
        };
        put(sp, meta.to_avro().unwrap()).await;
        (Table::open_storage(s.clone()).await.unwrap(), s)
    }

    #[tokio::test]
    async fn savepoints_are_listed_with_their_files_and_deleted_completed_file_first() {
        for layout2 in [false, true] {
            let (table, s) = table_with_savepoint(layout2).await;
            let sps = list_savepoints(&table).await.unwrap();
            assert_eq!(sps.len(), 1);
            assert_eq!(sps[0].instant, "20240101000000000");
            assert_eq!(sps[0].metadata.as_ref().unwrap().file_count(), 1);
            let err = delete_savepoint(&table, "20240101000000001", &LockOptions::none())
                .await
                .unwrap_err();
            assert!(matches!(err, Error::Refused { .. }), "{err}");
            delete_savepoint(&table, "20240101000000000", &LockOptions::none())
                .await
                .unwrap();
            assert!(list_savepoints(&table).await.unwrap().is_empty());
            // The savepointed commit itself is untouched.
            let left = s.list(&RelPath::root()).await.unwrap();
            assert!(left.iter().any(|m| m.path.to_string().ends_with(".commit")));
            assert!(!left
                .iter()
                .any(|m| m.path.to_string().contains("savepoint")));
        }
    }

    #[tokio::test]
    async fn a_corrupt_savepoint_file_is_an_error_naming_it() {
        let (table, s) = table_with_savepoint(false).await;
        s.put(
            &RelPath::parse(".hoodie/20240101000000000.savepoint").unwrap(),
            Bytes::from_static(b"junk"),
        )
        .await
        .unwrap();
        let err = list_savepoints(&table).await.unwrap_err();
        assert!(
            err.to_string().contains("20240101000000000.savepoint"),
            "{err}"
        );
    }
}
