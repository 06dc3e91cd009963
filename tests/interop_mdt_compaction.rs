//! Table versions 8 and 9 against real Hudi (1.0.1 and 1.1.1): the metadata table compacted
//! between the start and the completion of the failed write's metadata-table deltacommit, and
//! the failed write's log files carrying APPEND markers (issue #14, items 4 and 5).
//!
//! The harness scenario `mor-mdt-direct-mdtcompact-append` (tests/interop/README.md): the writers
//! compact the metadata table at the start of every write, so the failed write's own upsert
//! compacts it at C after the failed instant T started; its metadata-table deltacommit T then
//! completes after C, and the writer is killed before the data table's commit completes. Its
//! log-file markers are APPEND markers. Hudi 1.0.1 refuses to roll that back (it compares T's
//! requested time with C); Hudi 1.1.1 rolls it back (it compares T's completion time), on a
//! version-9 table and, writing table version 8, on the version-8 table: that is the reference.
//! Hudi 1.2.0 makes and rolls back its own version-9 table (with HUDI_KEEPER_INTEROP_FULL=1).
//! hudi-keeper's rollback must equal it file for file, with the same plan and metadata, and
//! Hudi's validator must read the right records from it.
//!
//! Run by `scripts/test` (HUDI_KEEPER_INTEROP=1). HUDI_KEEPER_INTEROP_TABLES=<dir> reuses tables
//! generated earlier into <dir>/<version>/.

use hudi_keeper_test_support as common;

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use common::interop::{
    copy_table, enabled, enabled_full, hudi_1_2_metadata_write_after_compaction_fails,
    roll_back_like_the_harness_writers, run_sh, scenario_json, tables_root,
};
use common::{stderr, stdout};
use hudi_keeper_core::format::rollback::{RollbackMetadata, RollbackPlan};

const SCENARIO: &str = "mor-mdt-direct-mdtcompact-append";

/// The table of `version`: reused when generated before, else made by the harness.
fn table(version: &str) -> PathBuf {
    try_table(version)
        .unwrap_or_else(|e| panic!("Hudi {version} could not generate {SCENARIO}: {e}"))
}

/// [`table`], or the harness's error output when Hudi could not make it.
fn try_table(version: &str) -> Result<PathBuf, String> {
    let dir = tables_root().join(version);
    let table = dir.join(SCENARIO);
    let reference = dir.join(format!("{SCENARIO}-hudi-rollback"));
    if table.join("scenario.json").exists() && reference.exists() {
        return Ok(table);
    }
    let _ = std::fs::remove_dir_all(&table);
    let _ = std::fs::remove_dir_all(&reference);
    std::fs::create_dir_all(&dir).expect("mkdir");
    let out = run_sh(&[
        "generate",
        version,
        SCENARIO,
        table.to_str().expect("utf-8"),
    ]);
    if out.status.success() {
        Ok(table)
    } else {
        Err(stderr(&out))
    }
}

/// The file names of a timeline folder (no `.crc`).
fn names(dir: &Path) -> Vec<String> {
    let mut out: Vec<String> = std::fs::read_dir(dir)
        .expect("read_dir")
        .flatten()
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .filter(|n| !n.ends_with(".crc"))
        .collect();
    out.sort();
    out
}

/// The one file of `dir` whose name ends with `suffix`.
fn one(dir: &Path, suffix: &str) -> Vec<u8> {
    let found: Vec<String> = names(dir)
        .into_iter()
        .filter(|n| n.ends_with(suffix))
        .collect();
    assert_eq!(
        found.len(),
        1,
        "one {suffix} in {}: {found:?}",
        dir.display()
    );
    std::fs::read(dir.join(&found[0])).expect("read")
}

/// The failed write's metadata-table deltacommit completed after a compaction was requested
/// that was requested after the write started: T < C <= completion(T).
fn assert_compacted_during_the_deltacommit(table: &Path, t: &str) {
    let tl = names(&table.join(".hoodie/metadata/.hoodie/timeline"));
    let done = tl
        .iter()
        .find_map(|n| {
            n.strip_prefix(&format!("{t}_"))?
                .strip_suffix(".deltacommit")
                .map(str::to_string)
        })
        .expect("the failed write's metadata-table deltacommit completed");
    let compactions: Vec<&str> = tl
        .iter()
        .filter(|n| n.ends_with(".commit"))
        .filter_map(|n| n.split('_').next())
        .collect();
    assert!(
        compactions.iter().any(|c| t < *c && *c <= done.as_str()),
        "no compaction between {t} and {done}: {tl:?}"
    );
}

/// A plan's requests with the table folder taken out of paths, in a stable order.
fn requests(plan: &RollbackPlan, root: &str) -> Vec<String> {
    let mut out: Vec<String> = plan
        .requests
        .iter()
        .flatten()
        .map(|r| {
            let logs: BTreeMap<String, i64> = r
                .log_blocks_to_be_deleted
                .iter()
                .flatten()
                .map(|(k, v)| (k.replace(root, "<table>"), *v))
                .collect();
            let deletes: Vec<String> = r
                .files_to_be_deleted
                .iter()
                .map(|p| p.replace(root, "<table>"))
                .collect();
            format!(
                "{} fileId={:?} base={:?} delete={deletes:?} logBlocks={logs:?}",
                r.partition_path, r.file_id, r.latest_base_instant
            )
        })
        .collect();
    out.sort();
    out
}

/// The rollback metadata per partition, with the table folder taken out of paths.
fn partitions(meta: &RollbackMetadata, root: &str) -> Vec<String> {
    meta.partition_metadata
        .iter()
        .map(|(p, m)| {
            let strip = |v: &BTreeMap<String, i64>| -> BTreeMap<String, i64> {
                v.iter()
                    .map(|(k, n)| (k.replace(root, "<table>"), *n))
                    .collect()
            };
            let mut deleted: Vec<String> = m
                .success_delete_files
                .iter()
                .map(|f| f.replace(root, "<table>"))
                .collect();
            deleted.sort();
            format!(
                "{p}: deleted={deleted:?} failed={:?} rollbackLogFiles={:?} logFilesFromFailedCommit={:?}",
                m.failed_delete_files,
                m.rollback_log_files.as_ref().map(strip),
                m.log_files_from_failed_commit.as_ref().map(strip)
            )
        })
        .collect()
}

/// The file-system root of a table as Hudi writes it in plans (`file:/…`).
fn qualified(dir: &Path) -> String {
    let dir = std::fs::canonicalize(dir).unwrap_or_else(|_| dir.to_path_buf());
    format!("file:{}", dir.to_str().expect("utf-8"))
}

fn roll_back_and_compare(version: &str) -> Result<String, String> {
    let generated = table(version);
    let reference = generated.with_file_name(format!("{SCENARIO}-hudi-rollback"));
    let meta = scenario_json(&generated);
    let failed = meta["failed_instant"]
        .as_str()
        .unwrap_or_default()
        .to_string();
    assert_compacted_during_the_deltacommit(&generated, &failed);
    if version == "1.0" {
        let own = meta["hudi_own_rollback"].as_str().unwrap_or_default();
        assert!(own.contains("refused by Hudi 1.0.1"), "{meta}");
    }
    let work = tempfile::tempdir().expect("tempdir");
    let ours = work.path().join(SCENARIO);
    copy_table(&generated, &ours);
    // The killed writer held FileSystemBasedLockProvider's lock (it never expires by default):
    // removed as an operator would, as the harness did for Hudi's own rollback.
    let _ = std::fs::remove_file(ours.join(".hoodie/lock"));
    let _ = std::fs::remove_file(ours.join(".hoodie/.lock.crc"));
    let out = roll_back_like_the_harness_writers(
        &ours,
        meta["heartbeat_interval_ms"].as_u64().unwrap_or(1000),
        &[],
    );
    if !out.status.success() {
        return Err(format!("rollback failed: {}", stderr(&out)));
    }
    let report: serde_json::Value = serde_json::from_str(&stdout(&out)).expect("rollback --json");
    let rolled: Vec<&str> = report["rollbacks"]
        .as_array()
        .map(|a| a.iter().filter_map(|r| r["instant"].as_str()).collect())
        .unwrap_or_default();
    if rolled != vec![failed.as_str()] {
        return Err(format!("rolled back {rolled:?}, expected [{failed}]"));
    }

    // The same plan and the same rollback metadata as Hudi's (1.1.1's for versions 1.0 and 1.1).
    let (tl_o, tl_h) = (
        ours.join(".hoodie/timeline"),
        reference.join(".hoodie/timeline"),
    );
    let plan_o = RollbackPlan::from_avro(&one(&tl_o, ".rollback.requested")).expect("our plan");
    let plan_h = RollbackPlan::from_avro(&one(&tl_h, ".rollback.requested")).expect("Hudi's plan");
    let (req_o, req_h) = (
        requests(&plan_o, &qualified(&ours)),
        requests(&plan_h, &qualified(&reference)),
    );
    if req_o != req_h {
        return Err(format!(
            "plans differ:\n ours: {req_o:#?}\n Hudi's: {req_h:#?}"
        ));
    }
    if !req_h.iter().any(|r| r.contains("logBlocks={\"<table>/")) {
        return Err(format!("no APPEND request in Hudi's plan: {req_h:#?}"));
    }
    let meta_o = RollbackMetadata::from_avro(&one(&tl_o, ".rollback")).expect("our metadata");
    let meta_h = RollbackMetadata::from_avro(&one(&tl_h, ".rollback")).expect("Hudi's metadata");
    let (parts_o, parts_h) = (
        partitions(&meta_o, &qualified(&ours)),
        partitions(&meta_h, &qualified(&reference)),
    );
    // The one difference: the command block's log file (see below), named as Hudi's here.
    let parts_o: Vec<String> = parts_o
        .iter()
        .map(|p| p.replace(".log.2_0-0-0", ".log.1_0-0-0"))
        .collect();
    if parts_o != parts_h || meta_o.total_files_deleted != meta_h.total_files_deleted {
        return Err(format!(
            "rollback metadata differs:\n ours: {parts_o:#?}\n Hudi's: {parts_h:#?}"
        ));
    }

    // The case where Hudi 1.x's name is not "the failed log file's version + 1": the failed
    // log file has another write token (1-2-0), and Hudi's command block takes its version
    // with 0-0-0: `.log.1_0-0-0`, which Hudi's log order (version, then token) reads before the
    // failed `.log.1_1-2-0`, so it undoes nothing. hudi-keeper's block is the first name read
    // after it, `.log.2_0-0-0`; otherwise the table is file for file Hudi's.
    let logs = data_logs(&reference);
    let hudis_block: Vec<&String> = logs
        .iter()
        .filter(|n| {
            n.ends_with(&format!("_{failed}.log.1_1-2-0"))
                && logs.contains(&n.replace(".log.1_1-2-0", ".log.1_0-0-0"))
        })
        .collect();
    if hudis_block.is_empty() {
        return Err(format!(
            "Hudi's rollback did not put a command block beside a failed log file of another \
             write token: {logs:?}"
        ));
    }
    let our_logs = data_logs(&ours);
    let as_hudis = work.path().join("ours-named-as-hudis");
    copy_table(&ours, &as_hudis);
    for failed_log in &hudis_block {
        let ours_name = failed_log.replace(".log.1_1-2-0", ".log.2_0-0-0");
        if !our_logs.contains(&ours_name)
            || our_logs.contains(&failed_log.replace(".log.1_1-2-0", ".log.1_0-0-0"))
        {
            return Err(format!(
                "our command block is not `{ours_name}` (read after the failed file): {our_logs:?}"
            ));
        }
        std::fs::rename(
            as_hudis.join(&ours_name),
            as_hudis.join(failed_log.replace(".log.1_1-2-0", ".log.1_0-0-0")),
        )
        .map_err(|e| format!("rename: {e}"))?;
    }

    // File for file the same as Hudi's rollback, metadata table included.
    let diff = run_sh(&[
        "diff",
        as_hudis.to_str().expect("utf-8"),
        reference.to_str().expect("utf-8"),
    ]);
    if !diff.status.success() {
        return Err(format!("differs from Hudi's rollback: {}", stdout(&diff)));
    }

    // Hudi's validator reads the right records and writes on. What Hudi's 1.x APPEND rule
    // leaves behind by design (the failed write's log files and the command-block log files,
    // named with T, which Hudi's file-system view ignores as uncommitted) is all it may report.
    // On Hudi's own rollback it finds the failed records back once a follow-up archived T
    // (`records_after_followup`): the defect hudi-keeper's name avoids.
    let v = verify(version, &ours)?;
    let theirs = work.path().join("hudi-rollback");
    copy_table(&reference, &theirs);
    let vh = verify(version, &theirs)?;
    let hudis_fail_alike = vh["checks"]
        .as_array()
        .into_iter()
        .flatten()
        .any(|c| c["check"] == "records_after_followup" && c["ok"] == false);
    if !hudis_fail_alike {
        return Err(format!(
            "Hudi's own rollback no longer brings the failed records back: {vh}"
        ));
    }
    let kept = format!("_{failed}.log.");
    for c in v["checks"].as_array().into_iter().flatten() {
        if c["ok"] == true {
            continue;
        }
        let name = c["check"].as_str().unwrap_or_default();
        let by_design = matches!(
            name,
            "no_uncommitted_data_files"
                | "fs_view_equals_listing"
                | "mdt_view_equals_fs_view"
                | "mdt_partitions_and_files_equal_listing"
        ) && c["detail"].as_array().is_some_and(|d| {
            d.iter()
                .all(|x| x.as_str().is_some_and(|s| s.contains(&kept)))
        });
        if by_design {
            continue;
        }
        return Err(format!("Hudi's validator failed {name}: {c}"));
    }
    let records_ok = v["checks"]
        .as_array()
        .into_iter()
        .flatten()
        .any(|c| c["check"] == "records_equal_expected" && c["ok"] == true);
    if !records_ok {
        return Err(format!("records not checked or wrong: {v}"));
    }
    let by = if version == "1.2" { "1.2.0" } else { "1.1.1" };
    Ok(format!(
        "rolled back {failed} like Hudi {by} (plan, metadata, files; the command block read after \
         the failed file); Hudi reads the right records, after a follow-up too (not on its own \
         rollback)"
    ))
}

/// The log files of the data table's partitions (`<partition>/<name>`, no `.crc`).
fn data_logs(table: &Path) -> Vec<String> {
    let mut out = Vec::new();
    for part in std::fs::read_dir(table).expect("read_dir").flatten() {
        let p = part.file_name().to_string_lossy().into_owned();
        if p.starts_with('.') || !part.path().is_dir() {
            continue;
        }
        out.extend(
            names(&part.path())
                .into_iter()
                .filter(|n| n.contains(".log."))
                .map(|n| format!("{p}/{n}")),
        );
    }
    out.sort();
    out
}

/// Hudi's validator on `table` (it writes follow-up commits there), as JSON.
fn verify(version: &str, table: &Path) -> Result<serde_json::Value, String> {
    let out = run_sh(&["verify", version, table.to_str().expect("utf-8")]);
    serde_json::from_str(&stdout(&out))
        .map_err(|e| format!("verify output: {e}: {}{}", stdout(&out), stderr(&out)))
}

#[test]
fn a_metadata_table_compacted_during_the_failed_deltacommit_and_append_markers_are_rolled_back_as_hudi_1_1_does(
) {
    if !enabled() {
        return;
    }
    // Both versions at once: each case is mostly JVM time.
    let handles: Vec<_> = ["1.0", "1.1"]
        .into_iter()
        .map(|v| std::thread::spawn(move || (v, roll_back_and_compare(v))))
        .collect();
    let mut failed = 0;
    for h in handles {
        let (v, result) = h.join().expect("thread");
        match result {
            Ok(msg) => eprintln!("Hudi {v} {SCENARIO}: ok ({msg})"),
            Err(msg) => {
                failed += 1;
                eprintln!("Hudi {v} {SCENARIO}: FAILED: {msg}");
            }
        }
    }
    assert_eq!(failed, 0, "{failed} of 2 versions failed");
}

#[test]
fn a_metadata_table_compacted_during_the_failed_deltacommit_and_append_markers_are_rolled_back_as_hudi_1_2_does(
) {
    if !enabled_full("Hudi 1.2's metadata table compacted during the failed deltacommit") {
        return;
    }
    // Hudi 1.2.0 cannot make this table: its failed writer's metadata-table deltacommit, after
    // the compaction that writer ran, fails in HoodieMetadataPayload.getInsertValue (seen every
    // time; tests/interop/README.md, "Hudi 1.2"). That failure is asserted, so that a Hudi 1.2
    // that makes the table turns this case into the comparison.
    if let Err(e) = try_table("1.2") {
        assert!(
            hudi_1_2_metadata_write_after_compaction_fails(&e),
            "Hudi 1.2 could not generate {SCENARIO}, for another reason than the known one: {e}"
        );
        eprintln!("Hudi 1.2 {SCENARIO}: Hudi 1.2.0 cannot make it (its metadata-table write fails after its own compaction); nothing to compare");
        return;
    }
    match roll_back_and_compare("1.2") {
        Ok(msg) => eprintln!("Hudi 1.2 {SCENARIO}: ok ({msg})"),
        Err(msg) => panic!("Hudi 1.2 {SCENARIO}: FAILED: {msg}"),
    }
}
