//! Tests of [`super`] (rollback planning).

use super::*;
use crate::protocol::markers::{Marker, MarkerKind};

const T: &str = "20250101000000000";

fn meta(path: &str, size: u64) -> FileMeta {
    FileMeta {
        path: RelPath::parse(path).unwrap(),
        size,
        last_modified: chrono::DateTime::from_timestamp_millis(0).unwrap(),
    }
}

fn marker(partition: &str, file: &str, io: IoType) -> Marker {
    Marker {
        partition: partition.into(),
        file_name: file.into(),
        io_type: io,
    }
}

fn direct(markers: Vec<Marker>, folders: &[&str]) -> Markers {
    Markers {
        kind: Some(MarkerKind::Direct),
        markers,
        folders: folders.iter().map(|f| f.to_string()).collect(),
    }
}

fn partitions(scope: &ListingScope) -> Vec<&str> {
    match scope {
        ListingScope::Partitions { partitions, .. } => {
            partitions.iter().map(RelPath::as_str).collect()
        }
        other => panic!("expected partitions, got {other:?}"),
    }
}

#[test]
fn the_cross_check_lists_every_partition_any_source_names() {
    let m = direct(
        vec![
            marker("p1", &format!("a_0-1-2_{T}.parquet"), IoType::Create),
            marker("p2/x=1", &format!("b_0-1-2_{T}.parquet"), IoType::Create),
        ],
        &["p1", "p2/x=1", "p3"],
    );
    let workload: BTreeSet<String> = ["p2/x=1", "p4", ""].map(String::from).into();
    let scope = listing_scope(Some(&m), Ok(Some(&workload)));
    assert_eq!(partitions(&scope), ["", "p1", "p2/x=1", "p3", "p4"]);
    let ListingScope::Partitions { sources, .. } = &scope else {
        unreachable!()
    };
    assert_eq!(
        sources.iter().copied().collect::<Vec<_>>(),
        [
            ScopeSource::Markers,
            ScopeSource::MarkerFolder,
            ScopeSource::Workload
        ]
    );
    // The workload alone (no marker folder) is enough; so are markers alone.
    assert_eq!(
        partitions(&listing_scope(None, Ok(Some(&workload)))),
        ["", "p2/x=1", "p4"]
    );
    assert_eq!(
        partitions(&listing_scope(Some(&m), Ok(None))),
        ["p1", "p2/x=1", "p3"]
    );
}

#[test]
fn the_whole_table_is_listed_when_the_instant_names_no_partition_or_a_doubtful_one() {
    let whole = |s: ListingScope| match s {
        ListingScope::WholeTable { why } => why,
        other => panic!("expected the whole table, got {other:?}"),
    };
    assert!(whole(listing_scope(None, Ok(None))).contains("names no partition"));
    let empty = Markers {
        kind: Some(MarkerKind::TimelineServerBased),
        markers: vec![],
        folders: BTreeSet::new(),
    };
    assert!(whole(listing_scope(Some(&empty), Ok(None))).contains("names no partition"));
    let m = direct(
        vec![marker(
            "p1",
            &format!("a_0-1-2_{T}.parquet"),
            IoType::Create,
        )],
        &[],
    );
    // An unreadable workload never narrows, even with markers.
    assert!(whole(listing_scope(Some(&m), Err("truncated"))).contains("truncated"));
    for bad in ["../other", "/abs", ".hoodie/metadata", "a//b"] {
        let w: BTreeSet<String> = [bad.to_string()].into();
        let why = whole(listing_scope(Some(&m), Ok(Some(&w))));
        assert!(why.contains("partition it names"), "{bad}: {why}");
    }
}

fn target(state: State) -> PlanTarget {
    PlanTarget {
        requested_time: T.into(),
        action: Action::DeltaCommit,
        state,
    }
}

fn plan(
    version: TableVersion,
    table_type: TableType,
    markers: Option<Vec<Marker>>,
    files: &[FileMeta],
) -> Result<PlannedRollback, PlanError> {
    let base = BasePath::from_uri("file:///t");
    let markers = markers.map(|m| Markers {
        kind: Some(MarkerKind::Direct),
        markers: m,
        folders: Default::default(),
    });
    plan_rollback(&PlanInput {
        version,
        table_type,
        base: &base,
        target: &target(State::Inflight),
        markers: markers.as_ref(),
        data_files: files,
        cross_check: true,
    })
}

#[test]
fn a_requested_instant_gets_a_plan_without_file_requests() {
    let base = BasePath::from_uri("/t");
    let p = plan_rollback(&PlanInput {
        version: TableVersion::V8,
        table_type: TableType::CopyOnWrite,
        base: &base,
        target: &target(State::Requested),
        markers: None,
        data_files: &[meta(&format!("p/a_0-1-2_{T}.parquet"), 1)],
        cross_check: true,
    })
    .unwrap();
    assert_eq!(p.plan.requests, Some(vec![]));
    assert!(p.deletes.is_empty());
}

#[test]
fn markers_and_the_listing_are_cross_checked() {
    let files = [
        meta(&format!("p1/a_0-1-2_{T}.parquet"), 10),
        meta(&format!("p2/missed_0-1-2_{T}.parquet"), 20),
        meta("p1/old_0-1-2_20240101000000000.parquet", 30),
        meta(&format!("p1/.a_{T}.log.1_0-1-2"), 5),
    ];
    let p = plan(
        TableVersion::V8,
        TableType::MergeOnRead,
        Some(vec![
            marker("p1", &format!("a_0-1-2_{T}.parquet"), IoType::Create),
            marker("p3", &format!("never_0-1-2_{T}.parquet"), IoType::Create),
            // What Hudi 1.x writers write for a new log file: a CREATE marker.
            marker("p1", &format!(".a_{T}.log.1_0-1-2"), IoType::Create),
        ]),
        &files,
    )
    .unwrap();
    let paths: Vec<(&str, bool)> = p
        .deletes
        .iter()
        .map(|d| (d.path.as_str(), d.from_markers))
        .collect();
    assert_eq!(
        paths,
        vec![
            (&*format!("p1/.a_{T}.log.1_0-1-2"), true),
            (&*format!("p1/a_0-1-2_{T}.parquet"), true),
            (&*format!("p2/missed_0-1-2_{T}.parquet"), false),
            (&*format!("p3/never_0-1-2_{T}.parquet"), true),
        ]
    );
    assert_eq!(p.markers_without_files, 1);
    let reqs = p.plan.requests.unwrap();
    assert_eq!(reqs.len(), 4);
    // A v8 log file a marker names: its file group and the instant, a qualified path.
    assert_eq!(reqs[0].file_id.as_deref(), Some("a"));
    assert_eq!(reqs[0].latest_base_instant.as_deref(), Some(T));
    // A marker-named base file: its file group and instant.
    assert_eq!(reqs[1].partition_path, "p1");
    assert_eq!(reqs[1].file_id.as_deref(), Some("a"));
    assert_eq!(reqs[1].latest_base_instant.as_deref(), Some(T));
    assert_eq!(
        reqs[1].files_to_be_deleted,
        vec![format!("file:/t/p1/a_0-1-2_{T}.parquet")]
    );
    // A file only the listing found: a pure delete with a plain path.
    assert_eq!(reqs[2].file_id.as_deref(), Some(""));
    assert_eq!(reqs[2].latest_base_instant.as_deref(), Some(""));
    assert_eq!(
        reqs[2].files_to_be_deleted,
        vec![format!("/t/p2/missed_0-1-2_{T}.parquet")]
    );
}

#[test]
fn without_the_cross_check_only_markers_decide() {
    let base = BasePath::from_uri("/t");
    let markers = Markers {
        kind: Some(MarkerKind::Direct),
        markers: vec![marker(
            "p1",
            &format!("a_0-1-2_{T}.parquet"),
            IoType::Create,
        )],
        folders: Default::default(),
    };
    let p = plan_rollback(&PlanInput {
        version: TableVersion::V8,
        table_type: TableType::CopyOnWrite,
        base: &base,
        target: &target(State::Inflight),
        markers: Some(&markers),
        data_files: &[meta(&format!("p2/missed_0-1-2_{T}.parquet"), 1)],
        cross_check: false,
    })
    .unwrap();
    assert_eq!(p.deletes.len(), 1);
    assert_eq!(
        p.deletes[0].path.as_str(),
        format!("p1/a_0-1-2_{T}.parquet")
    );
    let err = plan_rollback(&PlanInput {
        version: TableVersion::V8,
        table_type: TableType::CopyOnWrite,
        base: &base,
        target: &target(State::Inflight),
        markers: None,
        data_files: &[],
        cross_check: false,
    })
    .unwrap_err();
    assert!(err.to_string().contains("no markers"), "{err}");
}

#[test]
fn v6_mor_appends_to_older_slices_get_command_blocks() {
    let old_log = ".f1_20240101000000000.log.1_0-1-2";
    let files = [meta(&format!("p1/{old_log}"), 777)];
    let p = plan(
        TableVersion::V6,
        TableType::MergeOnRead,
        Some(vec![marker("p1", old_log, IoType::Append)]),
        &files,
    )
    .unwrap();
    assert!(p.deletes.is_empty());
    let reqs = p.plan.requests.unwrap();
    assert_eq!(reqs.len(), 1);
    assert_eq!(reqs[0].file_id.as_deref(), Some("f1"));
    assert_eq!(
        reqs[0].latest_base_instant.as_deref(),
        Some("20240101000000000")
    );
    assert_eq!(
        reqs[0].log_blocks_to_be_deleted,
        Some(BTreeMap::from([(old_log.to_string(), 1)]))
    );
}

#[test]
fn v8_and_v9_append_markers_get_command_blocks_and_the_log_file_stays() {
    // Hudi 1.0.1 / 1.1.1 MarkerBasedRollbackStrategy.createRollbackRequestForAppend on table
    // version 8+: one request per APPEND marker, the instant as base instant, the qualified
    // path with the placeholder size 1, nothing deleted (not even by the listing cross-check).
    for version in [TableVersion::V8, TableVersion::V9] {
        let log = format!(".a_{T}.log.1_0-1-2");
        let files = [
            meta(&format!("p1/{log}"), 777),
            meta(&format!("p3/n_0-1-2_{T}.parquet"), 10),
        ];
        let p = plan(
            version,
            TableType::MergeOnRead,
            Some(vec![
                marker("p1", &log, IoType::Append),
                marker("p3", &format!("n_0-1-2_{T}.parquet"), IoType::Create),
            ]),
            &files,
        )
        .unwrap();
        let deleted: Vec<&str> = p.deletes.iter().map(|d| d.path.as_str()).collect();
        assert_eq!(
            deleted,
            vec![format!("p3/n_0-1-2_{T}.parquet")],
            "{version:?}"
        );
        assert_eq!(
            p.log_blocks,
            vec![(
                "p1".to_string(),
                RelPath::parse(&format!("p1/{log}")).unwrap()
            )]
        );
        let reqs = p.plan.requests.unwrap();
        let append = reqs
            .iter()
            .find(|r| r.files_to_be_deleted.is_empty())
            .expect("a command-block request");
        assert_eq!(append.partition_path, "p1");
        assert_eq!(append.file_id.as_deref(), Some("a"));
        assert_eq!(append.latest_base_instant.as_deref(), Some(T));
        assert_eq!(
            append.log_blocks_to_be_deleted,
            Some(BTreeMap::from([(format!("file:/t/p1/{log}"), 1)]))
        );
        // And the plan resolves to one command block in that file group, named with T.
        let resolved = resolve_plan(
            &RollbackPlan {
                instant_to_rollback: p.plan.instant_to_rollback.clone(),
                requests: Some(reqs.clone()),
                version: Some(1),
            },
            &BasePath::from_uri("file:///t"),
        )
        .unwrap();
        assert_eq!(resolved.log_blocks.len(), 1);
        assert_eq!(resolved.log_blocks[0].1, "a");
        assert_eq!(resolved.log_blocks[0].2, T);
    }
    // A v8 APPEND marker naming another instant's log file is not guessed at.
    let err = plan(
        TableVersion::V8,
        TableType::MergeOnRead,
        Some(vec![marker(
            "p1",
            ".a_20240101000000000.log.1_0-1-2",
            IoType::Append,
        )]),
        &[],
    )
    .unwrap_err();
    assert!(matches!(err, PlanError::NotAttributable { .. }), "{err}");
}

#[test]
fn a_marker_naming_a_file_of_another_instant_is_refused() {
    let err = plan(
        TableVersion::V8,
        TableType::CopyOnWrite,
        Some(vec![marker(
            "p1",
            "a_0-1-2_20240101000000000.parquet",
            IoType::Create,
        )]),
        &[],
    )
    .unwrap_err();
    assert!(matches!(err, PlanError::NotAttributable { .. }), "{err}");
    let err = plan(
        TableVersion::V8,
        TableType::CopyOnWrite,
        Some(vec![marker("p1", "hoodie.properties", IoType::Create)]),
        &[],
    )
    .unwrap_err();
    assert!(err.to_string().contains("not a Hudi data file"), "{err}");
}

#[test]
fn a_v6_mor_deltacommit_without_markers_is_refused() {
    let err = plan(TableVersion::V6, TableType::MergeOnRead, None, &[]).unwrap_err();
    assert!(matches!(err, PlanError::Unsupported { .. }));
}

#[test]
fn resolving_a_plan_refuses_foreign_and_outside_paths() {
    let base = BasePath::from_uri("/t");
    let mk = |files: Vec<&str>| RollbackPlan {
        instant_to_rollback: Some(InstantInfo {
            commit_time: T.into(),
            action: "commit".into(),
        }),
        requests: Some(vec![RollbackRequest {
            partition_path: "p".into(),
            file_id: Some("".into()),
            latest_base_instant: Some("".into()),
            files_to_be_deleted: files.into_iter().map(String::from).collect(),
            log_blocks_to_be_deleted: None,
        }]),
        version: Some(1),
    };
    let ok = resolve_plan(&mk(vec![&format!("file:/t/p/a_0-1-2_{T}.parquet")]), &base).unwrap();
    assert_eq!(ok.deletes["p"].len(), 1);
    let other = "/t/p/a_0-1-2_20240101000000000.parquet";
    assert!(matches!(
        resolve_plan(&mk(vec![other]), &base).unwrap_err(),
        PlanError::NotAttributable { .. }
    ));
    let outside = format!("/u/p/a_0-1-2_{T}.parquet");
    assert!(matches!(
        resolve_plan(&mk(vec![&outside]), &base).unwrap_err(),
        PlanError::OutsideTable { .. }
    ));
    let mut nameless = mk(vec![]);
    nameless.instant_to_rollback = Some(InstantInfo {
        commit_time: String::new(),
        action: "commit".into(),
    });
    assert!(resolve_plan(&nameless, &base).is_err());
    let escape = format!("/t/p/../../etc/a_0-1-2_{T}.parquet");
    assert!(resolve_plan(&mk(vec![&escape]), &base).is_err());
}

/// Hudi 0.13.1's plan of a merge-on-read deltacommit (seen in the interop harness, 0.13 key): an
/// APPEND marker names the slice's base file, the request voids the slice's latest log file by
/// qualified path with size -1; a CREATE marker's request is a pure delete.
#[test]
fn a_version_5_merge_on_read_plan_is_hudi_0_13s() {
    let base_t = "20240101000000000";
    let files = [
        meta(&format!("p0/f0_0-0-0_{base_t}.parquet"), 10),
        meta(&format!("p0/.f0_{base_t}.log.1_0-0-0"), 5),
        meta(&format!("p0/.f0_{base_t}.log.3_0-0-0"), 5),
        meta(&format!("p0/.f0_{base_t}.log.3_1-0-1"), 5),
        meta(&format!("p0/.f0_{base_t}.log.2_0-0-0"), 5),
        meta(&format!("p3/n_0-0-0_{T}.parquet"), 20),
    ];
    let markers = vec![
        marker("p0", &format!("f0_0-0-0_{base_t}.parquet"), IoType::Append),
        marker("p3", &format!("n_0-0-0_{T}.parquet"), IoType::Create),
        // a slice without any log file: Java's request names nothing to void
        marker("p1", &format!("f1_0-0-0_{base_t}.parquet"), IoType::Append),
    ];
    let p = plan(
        TableVersion::V5,
        TableType::MergeOnRead,
        Some(markers.clone()),
        &files,
    )
    .unwrap();
    let reqs = p.plan.requests.clone().unwrap();
    let delete = reqs
        .iter()
        .find(|r| !r.files_to_be_deleted.is_empty())
        .unwrap();
    assert_eq!(delete.partition_path, "p3");
    assert_eq!(delete.file_id.as_deref(), Some(""));
    assert_eq!(delete.latest_base_instant.as_deref(), Some(""));
    assert_eq!(
        delete.files_to_be_deleted,
        vec![format!("file:/t/p3/n_0-0-0_{T}.parquet")]
    );
    let void = reqs.iter().find(|r| r.partition_path == "p0").unwrap();
    assert_eq!(void.file_id.as_deref(), Some("f0"));
    assert_eq!(void.latest_base_instant.as_deref(), Some(base_t));
    assert!(void.files_to_be_deleted.is_empty());
    // the latest log file: version 3, then the greater write token
    assert_eq!(
        void.log_blocks_to_be_deleted,
        Some(BTreeMap::from([(
            format!("file:/t/p0/.f0_{base_t}.log.3_1-0-1"),
            -1
        )]))
    );
    let empty = reqs.iter().find(|r| r.partition_path == "p1").unwrap();
    assert_eq!(empty.log_blocks_to_be_deleted, Some(BTreeMap::new()));
    assert_eq!(
        p.log_blocks,
        vec![(
            "p0".to_string(),
            RelPath::parse(&format!("p0/.f0_{base_t}.log.3_1-0-1")).unwrap()
        )]
    );
    // nothing but the new base file is deleted: the failed write's log files stay
    assert_eq!(
        p.deletes
            .iter()
            .map(|d| d.path.as_str())
            .collect::<Vec<_>>(),
        [format!("p3/n_0-0-0_{T}.parquet")]
    );
    // Its plan resolves for execution: one command block in f0's slice.
    let resolved = resolve_plan(&p.plan, &BasePath::from_uri("file:///t")).unwrap();
    assert_eq!(resolved.log_blocks.len(), 1);
    assert_eq!(resolved.log_blocks[0].1, "f0");

    // The same markers on version 6 are refused: a 0.14+ APPEND marker names a log file, and
    // a base-file-named one is taken as a file of another instant.
    assert!(plan(
        TableVersion::V6,
        TableType::MergeOnRead,
        Some(markers),
        &files
    )
    .is_err());
}

#[test]
fn a_version_5_slice_the_failed_write_started_has_its_latest_log_file_deleted() {
    // Hudi 0.13 (MarkerBasedRollbackStrategy.getRollbackRequestForAppend): the base instant is
    // the instant rolled back, so the log file is deleted, not voided.
    let files = [meta(&format!("p0/.g_{T}.log.1_0-0-0"), 5)];
    let p = plan(
        TableVersion::V5,
        TableType::MergeOnRead,
        Some(vec![marker(
            "p0",
            &format!("g_0-0-0_{T}.parquet"),
            IoType::Append,
        )]),
        &files,
    )
    .unwrap();
    assert!(p.log_blocks.is_empty());
    assert_eq!(
        p.deletes
            .iter()
            .map(|d| d.path.as_str())
            .collect::<Vec<_>>(),
        [format!("p0/.g_{T}.log.1_0-0-0")]
    );
    let reqs = p.plan.requests.unwrap();
    assert_eq!(reqs.len(), 1);
    assert_eq!(reqs[0].file_id.as_deref(), Some(""));
}

#[test]
fn a_version_5_append_marker_named_after_a_log_file_is_refused() {
    let base_t = "20240101000000000";
    let err = plan(
        TableVersion::V5,
        TableType::MergeOnRead,
        Some(vec![marker(
            "p0",
            &format!(".f0_{base_t}.log.2_0-0-0"),
            IoType::Append,
        )]),
        &[meta(&format!("p0/.f0_{base_t}.log.2_0-0-0"), 5)],
    )
    .unwrap_err();
    assert!(err.to_string().contains("version 5"), "{err}");
}

#[test]
fn a_java_plan_naming_a_qualified_log_file_outside_its_partition_is_refused() {
    let base_t = "20240101000000000";
    let plan = RollbackPlan {
        instant_to_rollback: Some(InstantInfo {
            commit_time: T.into(),
            action: "deltacommit".into(),
        }),
        requests: Some(vec![RollbackRequest {
            partition_path: "p0".into(),
            file_id: Some("f0".into()),
            latest_base_instant: Some(base_t.into()),
            files_to_be_deleted: vec![],
            log_blocks_to_be_deleted: Some(BTreeMap::from([(
                format!("file:/t/p1/.f0_{base_t}.log.3_0-0-0"),
                -1,
            )])),
        }]),
        version: Some(1),
    };
    let base = BasePath::from_uri("file:///t");
    assert!(matches!(
        resolve_plan(&plan, &base),
        Err(PlanError::OutsideTable { .. })
    ));
    let mut ok = plan.clone();
    ok.requests.as_mut().unwrap()[0].log_blocks_to_be_deleted = Some(BTreeMap::from([(
        format!("file:/t/p0/.f0_{base_t}.log.3_0-0-0"),
        -1,
    )]));
    assert_eq!(resolve_plan(&ok, &base).unwrap().log_blocks.len(), 1);
}

/// Hudi 0.13's listing-based plan of a metadata-table deltacommit names the metadata table's
/// base path itself for a write stat without a path: the block goes to the request's slice. A
/// root key without a file group or base instant, or another folder, is still refused.
#[test]
fn a_hudi_0_13_plan_naming_the_base_path_itself_appends_to_its_slice() {
    let init = "00000000000000";
    let mk = |key: &str, file_id: &str| RollbackPlan {
        instant_to_rollback: Some(InstantInfo {
            commit_time: T.into(),
            action: "deltacommit".into(),
        }),
        requests: Some(vec![RollbackRequest {
            partition_path: "files".into(),
            file_id: Some(file_id.into()),
            latest_base_instant: Some(init.into()),
            files_to_be_deleted: vec![],
            log_blocks_to_be_deleted: Some(BTreeMap::from([(key.to_string(), 0)])),
        }]),
        version: Some(1),
    };
    let base = BasePath::from_uri("file:///t/.hoodie/metadata");
    for key in [
        "file:/t/.hoodie/metadata",
        "/t/.hoodie/metadata/",
        "file:///t/.hoodie/metadata",
    ] {
        let r = resolve_plan(&mk(key, "files-0000"), &base).unwrap();
        assert_eq!(r.log_blocks.len(), 1, "{key}");
        assert_eq!(r.log_blocks[0].1, "files-0000");
        assert!(r.deletes.is_empty());
    }
    assert!(resolve_plan(&mk("file:/t/.hoodie/metadata", ""), &base).is_err());
    assert!(resolve_plan(&mk("file:/t/.hoodie", "files-0000"), &base).is_err());
    assert!(resolve_plan(&mk("file:/t/.hoodie/metadata/files", "files-0000"), &base).is_err());
    let s3 = BasePath::from_uri("s3://b/t/.hoodie/metadata");
    assert!(resolve_plan(&mk("s3a://b/t/.hoodie/metadata", "files-0000"), &s3).is_ok());
    assert!(resolve_plan(&mk("s3a://c/t/.hoodie/metadata", "files-0000"), &s3).is_err());
    assert!(resolve_plan(&mk("gs://b/t/.hoodie/metadata", "files-0000"), &s3).is_err());
}

/// Version 5 merge-on-read: an APPEND marker names the slice's base file, which need not exist
/// (a slice of log files only), so a missing base file is no "marker without a file"; a CREATE
/// marker whose file is missing still is.
#[test]
fn a_version_5_append_marker_whose_base_file_is_absent_is_not_counted_missing() {
    let base_t = "20240101000000000";
    let files = [meta(&format!("p0/.f0_{base_t}.log.1_0-0-0"), 5)];
    let p = plan(
        TableVersion::V5,
        TableType::MergeOnRead,
        Some(vec![
            marker("p0", &format!("f0_0-0-0_{base_t}.parquet"), IoType::Append),
            marker("p3", &format!("n_0-0-0_{T}.parquet"), IoType::Create),
        ]),
        &files,
    )
    .unwrap();
    assert_eq!(p.markers_without_files, 1);
}

/// A marker whose partition is inside `.hoodie` names no data file of the table: the plan is
/// refused (on version 5, its APPEND marker would otherwise put a command block in a log file
/// found there).
#[test]
fn a_marker_inside_hoodie_is_refused() {
    let base_t = "20240101000000000";
    for (version, table_type, io, name) in [
        (
            TableVersion::V5,
            TableType::MergeOnRead,
            IoType::Append,
            format!("f0_0-0-0_{base_t}.parquet"),
        ),
        (
            TableVersion::V8,
            TableType::CopyOnWrite,
            IoType::Create,
            format!("f0_0-0-0_{T}.parquet"),
        ),
    ] {
        let files = [
            meta(&format!(".hoodie/x/.f0_{base_t}.log.1_0-0-0"), 5),
            meta(&format!(".hoodie/x/f0_0-0-0_{T}.parquet"), 5),
        ];
        let err = plan(
            version,
            table_type,
            Some(vec![marker(".hoodie/x", &name, io)]),
            &files,
        )
        .unwrap_err();
        assert!(err.to_string().contains(".hoodie"), "{version:?}: {err}");
    }
}
