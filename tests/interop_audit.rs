//! `hudi-keeper audit` on tables real Hudi made and rolled back (the harness's scenarios and
//! Hudi's own rollback of each, `interop_rollback`'s tables): before the rollback the failed
//! write's files are `pending`; after Hudi's rollback every data file is `committed` (no false
//! leftover, orphan or unknown); a file of the rolled-back instant put back afterwards (a missed
//! marker, a zombie writer) is a `rollback_leftover`, in its partition. No log file is opened
//! where metadata explains it. The metadata table, read as Hudi's reader of each version merges
//! it, agrees with the store before and after the rollback (this is what proves the merge
//! matches Hudi's); a data file it lists deleted and an unlisted copy of a committed one added
//! are both reported, each in its partition.
//!
//! Hudi 0.15's timeline-server markers too (`*-timeline`): its own rollback leaves nothing there.
//!
//! The leftover guard: a base file of the failed write that its markers miss, rolled back by
//! `hudi-keeper rollback --no-listing-cross-check` (markers alone decide the plan), is removed by the
//! guard after the rollback; the result equals Hudi's own rollback (`run.sh diff`) and Hudi's
//! validator passes.
//!
//! Run by `scripts/test` (HUDI_KEEPER_INTEROP=1): every version in CI (no JVM runs here but the
//! generation of missing tables and, for the guard, one validator and one diff per version).

use hudi_keeper_test_support as common;

use std::path::Path;

use common::interop::{
    copy_table, enabled, failed_checks, files_below, generated, roll_back_like_the_harness_writers,
    run_sh, scenario_json,
};
use common::{stderr, stdout};

/// The scenarios audited per version: copy-on-write and merge-on-read, with the metadata table.
const SCENARIOS: &[&str] = &["cow-mdt-direct", "mor-mdt-direct"];

fn audit(table: &Path) -> serde_json::Value {
    let out = common::run(&["audit", table.to_str().expect("utf-8"), "--json"]);
    assert!(out.status.success(), "audit: {}", stderr(&out));
    serde_json::from_str(&stdout(&out)).expect("audit --json")
}

/// The metadata table was compared with the store and agrees (`what` names the table).
fn no_drift(report: &serde_json::Value, what: &str) {
    let m = &report["metadata_table"];
    assert_eq!(m["checked"], true, "{what}: {m:#}");
    assert!(m["listed_files"].as_u64().unwrap_or(0) > 0, "{what}: {m:#}");
    assert_eq!(m["missing_from_store"], 0, "{what}: {m:#}");
    assert_eq!(m["not_listed"], 0, "{what}: {m:#}");
}

/// A data file the metadata table lists deleted in `p0`, a copy of a committed base file under
/// a new file group added in `p1`: both reported, each in its partition.
fn drift_is_reported(version: &str, s: &str, reference: &Path, work: &Path) {
    let t = work.join(format!("{version}-{s}-drift"));
    copy_table(reference, &t);
    let files = files_below(&t);
    let parquet = |part: &str| {
        files
            .iter()
            .find(|p| p.starts_with(&format!("{part}/")) && p.ends_with(".parquet"))
            .cloned()
            .unwrap_or_else(|| panic!("Hudi {version} {s}: no base file in {part}"))
    };
    let deleted = parquet("p0");
    std::fs::remove_file(t.join(&deleted)).expect("delete");
    let source = parquet("p1");
    let instant = source
        .rsplit('_')
        .next()
        .and_then(|x| x.strip_suffix(".parquet"))
        .expect("instant");
    let added = format!("p1/00000000-drift-0_9-9-9_{instant}.parquet");
    std::fs::copy(t.join(&source), t.join(&added)).expect("copy");
    let r = audit(&t);
    let m = &r["metadata_table"];
    assert_eq!(m["checked"], true, "Hudi {version} {s}: {m:#}");
    assert_eq!(
        (m["missing_from_store"].as_u64(), m["not_listed"].as_u64()),
        (Some(1), Some(1)),
        "Hudi {version} {s}: {m:#}"
    );
    assert_eq!(
        m["partitions"]["p0"]["missing_examples"][0], deleted,
        "{m:#}"
    );
    assert_eq!(
        m["partitions"]["p1"]["not_listed_examples"][0], added,
        "{m:#}"
    );
}

fn files(report: &serde_json::Value, class: &str) -> u64 {
    report["classes"][class]["files"]
        .as_u64()
        .unwrap_or(u64::MAX)
}

/// A data file of `instant` under `table` (a path relative to it), outside `.hoodie/`.
fn data_file_of(table: &Path, instant: &str) -> Option<String> {
    files_below(table)
        .into_iter()
        .find(|p| !p.starts_with(".hoodie") && p.ends_with(&format!("_{instant}.parquet")))
}

/// Hudi 0.15's timeline-server-marker scenarios, audited besides [`SCENARIOS`].
const TIMELINE_SERVER_0_15: &[&str] = &["cow-mdt-timeline", "mor-mdt-timeline"];

fn audit_version(version: &str) {
    let work = tempfile::tempdir().expect("tempdir");
    let extra: &[&str] = if version == "0.15" {
        TIMELINE_SERVER_0_15
    } else {
        &[]
    };
    for s in SCENARIOS.iter().chain(extra) {
        let failed_table = generated(version, s);
        let reference = failed_table.with_file_name(format!("{s}-hudi-rollback"));
        let failed = scenario_json(&failed_table)["failed_instant"]
            .as_str()
            .expect("failed instant")
            .to_string();

        let before = audit(&failed_table);
        no_drift(&before, &format!("Hudi {version} {s} before its rollback"));
        assert!(
            files(&before, "pending") > 0,
            "Hudi {version} {s}: {before:#}"
        );
        for c in ["rollback_leftover", "orphan", "unknown"] {
            assert_eq!(
                files(&before, c),
                0,
                "Hudi {version} {s} before, {c}: {before:#}"
            );
        }

        let after = audit(&reference);
        no_drift(&after, &format!("Hudi {version} {s} after Hudi's rollback"));
        drift_is_reported(version, s, &reference, work.path());
        assert!(
            files(&after, "committed") > 0,
            "Hudi {version} {s}: {after:#}"
        );
        for c in ["pending", "rollback_leftover", "orphan", "unknown"] {
            assert_eq!(
                files(&after, c),
                0,
                "Hudi {version} {s} after Hudi's rollback, {c}: {after:#}"
            );
        }
        // Every log file is explained by metadata (write stats, the rollback's): none is opened.
        assert_eq!(after["logs_opened"], 0, "Hudi {version} {s}: {after:#}");

        // A base file of the failed write, put back after Hudi's rollback.
        let planted = work.path().join(format!("{version}-{s}"));
        copy_table(&reference, &planted);
        let file = data_file_of(&failed_table, &failed)
            .unwrap_or_else(|| panic!("Hudi {version} {s}: no base file of {failed}"));
        std::fs::copy(failed_table.join(&file), planted.join(&file)).expect("copy the file back");
        let report = audit(&planted);
        // A leftover is the audit's own class: not a file the metadata table should list.
        no_drift(&report, &format!("Hudi {version} {s} with a leftover"));
        assert_eq!(
            files(&report, "rollback_leftover"),
            1,
            "Hudi {version} {s}: {report:#}"
        );
        assert_eq!(
            report["examples"]["rollback_leftover"][0]["path"], file,
            "Hudi {version} {s}: {report:#}"
        );
        let partition = Path::new(&file)
            .parent()
            .map(|p| p.display().to_string())
            .unwrap_or_default();
        assert_eq!(
            report["partitions"][&partition]["rollback_leftover"]["files"], 1,
            "Hudi {version} {s}: {report:#}"
        );
        eprintln!(
            "Hudi {version} {s}: {} committed files after Hudi's rollback; the planted file is a leftover",
            files(&after, "committed")
        );
    }
}

/// A base file of the failed write of `cow-mdt-direct` copied under a new file id (its markers
/// miss it); `hudi-keeper rollback --no-listing-cross-check` rolls the write back by its markers
/// and its leftover guard removes the copy: the table equals Hudi's own rollback and Hudi's
/// validator passes.
fn guard_after_rollback(version: &str) {
    let s = "cow-mdt-direct";
    let failed_table = generated(version, s);
    let reference = failed_table.with_file_name(format!("{s}-hudi-rollback"));
    let meta = scenario_json(&failed_table);
    let failed = meta["failed_instant"].as_str().expect("failed instant");
    let interval = meta["heartbeat_interval_ms"].as_u64().unwrap_or(1000);
    let work = tempfile::tempdir().expect("tempdir");
    let ours = work.path().join(s);
    copy_table(&failed_table, &ours);
    let file = data_file_of(&ours, failed).expect("a base file of the failed write");
    let (dir, name) = file.rsplit_once('/').unwrap_or(("", &file));
    let (_, rest) = name
        .split_once('_')
        .expect("<file id>_<token>_<instant>.parquet");
    let missed = if dir.is_empty() {
        format!("00000000-0000-0000-0000-00000000beef-0_{rest}")
    } else {
        format!("{dir}/00000000-0000-0000-0000-00000000beef-0_{rest}")
    };
    std::fs::copy(ours.join(&file), ours.join(&missed)).expect("copy");

    let out = roll_back_like_the_harness_writers(&ours, interval, &["--no-listing-cross-check"]);
    assert!(out.status.success(), "Hudi {version}: {}", stderr(&out));
    let report: serde_json::Value = serde_json::from_str(&stdout(&out)).expect("rollback --json");
    assert_eq!(report["rollbacks"][0]["instant"], failed, "{report:#}");
    let removed: Vec<&str> = report["leftover_guard"]["removed"]
        .as_array()
        .map(|a| a.iter().filter_map(|x| x["path"].as_str()).collect())
        .unwrap_or_default();
    assert_eq!(removed, vec![missed.as_str()], "Hudi {version}: {report:#}");
    assert!(!ours.join(&missed).exists());

    let ours_s = ours.to_str().expect("utf-8");
    let verify = run_sh(&["verify", version, ours_s]);
    assert!(
        verify.status.success(),
        "Hudi {version}: validator failed {:?}: {}{}",
        failed_checks(&stdout(&verify)),
        stdout(&verify),
        stderr(&verify)
    );
    let diff = run_sh(&["diff", ours_s, reference.to_str().expect("utf-8")]);
    assert!(
        diff.status.success(),
        "Hudi {version}: differs from Hudi's rollback: {}",
        stdout(&diff)
    );
    eprintln!(
        "Hudi {version}: the guard removed {missed}; validator passed; same as Hudi's rollback"
    );
}

#[test]
fn audits_of_hudi_0_15_tables() {
    if enabled() {
        audit_version("0.15");
    }
}

#[test]
fn the_leftover_guard_after_a_rollback_on_hudi_0_15_and_1_1_tables() {
    if enabled() {
        guard_after_rollback("0.15");
        guard_after_rollback("1.1");
    }
}

#[test]
fn audits_of_hudi_1_0_tables() {
    if enabled() {
        audit_version("1.0");
    }
}

#[test]
fn audits_of_hudi_1_1_tables() {
    if enabled() {
        audit_version("1.1");
    }
}

#[test]
fn audits_of_hudi_1_2_tables() {
    if enabled() {
        audit_version("1.2");
    }
}

/// A metadata table compacted during the failed write (`-mdtcompact-append`, Hudi 1.0.1 and
/// 1.1.1): its base HFile holds what the earlier deltacommits wrote, so it agrees with the store
/// only when the base file is merged under the log blocks as Hudi does. After Hudi's own
/// rollback the three rollback command-block log files are not listed: Hudi records none of
/// them in the metadata table (tests/interop/README.md, "APPEND markers on v8/v9"), and its
/// validator names the same files. The failed writer's log files that Hudi's rollback left in
/// place for those command blocks to undo are `committed`.
fn compacted_metadata_table(version: &str) {
    let s = "mor-mdt-direct-mdtcompact-append";
    let failed = generated(version, s);
    no_drift(&audit(&failed), &format!("Hudi {version} {s}"));
    let reference = failed.with_file_name(format!("{s}-hudi-rollback"));
    let r = audit(&reference);
    let m = &r["metadata_table"];
    assert_eq!(m["checked"], true, "{m:#}");
    assert_eq!(m["missing_from_store"], 0, "{m:#}");
    assert_eq!(m["not_listed"], 3, "{m:#}");
    for p in ["p0", "p1", "p2"] {
        let example = m["partitions"][p]["not_listed_examples"][0]
            .as_str()
            .unwrap_or_default();
        assert!(example.ends_with(".log.1_0-0-0"), "{p}: {m:#}");
    }
    // Hudi's rollback left the failed writer's log files in place, for its command blocks to
    // undo: committed (as Hudi leaves them), never leftovers for a repair or the leftover guard.
    for c in ["pending", "rollback_leftover", "orphan", "unknown"] {
        assert_eq!(
            files(&r, c),
            0,
            "Hudi {version} {s} after Hudi's rollback, {c}: {r:#}"
        );
    }
}

#[test]
fn audits_of_hudi_1_0_and_1_1_metadata_tables_compacted_during_a_failed_write() {
    if enabled() {
        compacted_metadata_table("1.0");
        compacted_metadata_table("1.1");
    }
}

/// The metadata table's repair with real Hudi: after Hudi's own rollback of `cow-mdt-direct`,
/// the oldest base file of p0 (a file slice no read needs, which the metadata table lists) is
/// deleted, as a cleaner that missed the metadata table would. The audit reports it missing
/// from the store, in p0, and Hudi's validator fails (`mdt_view_equals_fs_view`,
/// `mdt_partitions_and_files_equal_listing`); `audit --repair --repair-metadata-table` deletes the
/// metadata table; Hudi's validator (whose follow-up write, with the metadata table on, rebuilds
/// it) passes.
fn metadata_table_repair(version: &str) {
    let s = "cow-mdt-direct";
    let reference = generated(version, s).with_file_name(format!("{s}-hudi-rollback"));
    let work = tempfile::tempdir().expect("tempdir");
    let ours = work.path().join(s);
    copy_table(&reference, &ours);
    let mut p0: Vec<String> = files_below(&ours.join("p0"))
        .into_iter()
        .filter(|p| p.ends_with(".parquet"))
        .collect();
    p0.sort();
    assert!(p0.len() >= 2, "Hudi {version}: {p0:?}");
    let oldest = format!("p0/{}", p0[0]);
    std::fs::remove_file(ours.join(&oldest)).expect("delete");

    let report = audit(&ours);
    let mdt = &report["metadata_table"];
    assert_eq!(mdt["checked"], true, "Hudi {version}: {mdt:#}");
    assert_eq!(mdt["missing_from_store"], 1, "Hudi {version}: {mdt:#}");
    assert_eq!(mdt["not_listed"], 0, "Hudi {version}: {mdt:#}");
    assert_eq!(
        mdt["partitions"]["p0"]["missing_examples"][0], oldest,
        "Hudi {version}: {mdt:#}"
    );

    let ours_s = ours.to_str().expect("utf-8");
    // Without the repair Hudi's validator sees the drift too.
    let before = run_sh(&["verify", version, ours_s]);
    let failed = failed_checks(&stdout(&before));
    assert!(
        !before.status.success() && failed.iter().any(|c| c.starts_with("mdt_")),
        "Hudi {version}: the validator should fail on the drift: {failed:?} {}",
        stdout(&before)
    );
    let out = common::run(&[
        "audit",
        ours_s,
        "--repair",
        "--repair-metadata-table",
        "--lock",
        "filesystem",
        "--yes",
        "--json",
    ]);
    assert!(out.status.success(), "Hudi {version}: {}", stderr(&out));
    assert!(
        !ours.join(".hoodie/metadata").exists(),
        "Hudi {version}: the metadata table is still there: {}",
        stdout(&out)
    );
    let after = audit(&ours);
    assert_eq!(after["metadata_table"]["checked"], false, "{after:#}");

    let verify = run_sh(&["verify", version, ours_s]);
    assert!(
        verify.status.success(),
        "Hudi {version}: validator failed {:?}: {}{}",
        failed_checks(&stdout(&verify)),
        stdout(&verify),
        stderr(&verify)
    );
    eprintln!("Hudi {version}: drift in p0 reported; the metadata table deleted; the next writer rebuilt it and the validator passed");
}

#[test]
fn the_metadata_table_repair_on_hudi_0_15_and_1_1_tables() {
    if enabled() {
        metadata_table_repair("0.15");
        metadata_table_repair("1.1");
    }
}
