//! hudi-keeper against real Hudi (Java, from Maven Central), through the harness in
//! `tests/interop/`: Hudi writes tables and a killed writer leaves a failed write; hudi-keeper
//! rolls it back; Hudi's own validator judges the result, and the result is compared file by file
//! with Hudi's own rollback of the same table.
//!
//! Run by `scripts/test` (which builds the harness and sets HUDI_KEEPER_INTEROP=1).
//! HUDI_KEEPER_INTEROP_TABLES=<dir> reuses tables generated earlier into <dir>/<version>/.

use hudi_keeper_test_support as common;

use std::path::{Path, PathBuf};

use common::interop::{
    copy_table, enabled, enabled_full, failed_checks, files_below, generated,
    roll_back_like_the_harness_writers, run_sh, scenario_json, tables_root, upgrade_with_hudi_0_15,
    verify_with_each_hfile_reader,
};
use common::{stderr, stdout};

const SCENARIOS: &[&str] = &[
    "cow-nomdt-direct",
    "cow-mdt-direct",
    "mor-nomdt-direct",
    "mor-mdt-direct",
    "cow-nomdt-timeline",
    "cow-mdt-timeline",
    "mor-nomdt-timeline",
    "mor-mdt-timeline",
    "cow-mdt-direct-mdtdone",
    "mor-mdt-direct-mdtdone",
    "cow-nomdt-direct-requested",
    "mor-mdt-direct-requested",
    // Two failed writes in a row on the same file slices (0.15 only).
    "mor-mdt-direct-twice",
    // The writer killed inside its metadata-table write (0.15 only): Hudi's EAGER pre-step.
    "mor-mdt-direct-mdtinflight",
];

fn supported(version: &str, scenario: &str) -> bool {
    // Timeline-server markers need the embedded timeline server (see tests/interop/README.md);
    // two failed writes in a row and a writer killed inside its metadata-table write are made
    // with 0.15 only.
    // (A write killed right after `startCommit` is rolled back alike on versions 8 and 9: CI
    // time goes to 1.1's and 1.2's.) Hudi 1.2 (table version 9) makes the scenarios 1.1 makes.
    (version == "0.15"
        || !(scenario.contains("-timeline")
            || scenario.ends_with("-twice")
            || scenario.ends_with("-mdtinflight")))
        && !(version == "1.0" && scenario.ends_with("-requested"))
}

/// The generated tables of `version`: reused from HUDI_KEEPER_INTEROP_TABLES, else made once
/// under target/.
fn tables(version: &str) -> PathBuf {
    for s in SCENARIOS.iter().filter(|s| supported(version, s)) {
        generated(version, s);
    }
    tables_root().join(version)
}

struct Outcome {
    scenario: String,
    result: Result<String, String>,
}

fn roll_back_every_scenario(version: &str) {
    let dir = tables(version);
    let work = tempfile::tempdir().expect("tempdir");
    let mut outcomes = Vec::new();
    for s in SCENARIOS.iter().filter(|s| supported(version, s)) {
        let ours = work.path().join(s);
        copy_table(&dir.join(s), &ours);
        let meta = scenario_json(&ours);
        let interval = meta["heartbeat_interval_ms"].as_u64().unwrap_or(1000);
        let failed = meta["failed_instant"]
            .as_str()
            .unwrap_or_default()
            .to_string();
        if meta["stale_lock_file_left"] == true {
            // The killed writer held FileSystemBasedLockProvider's lock, which never expires by
            // default: remove it as an operator would, as the harness did for Hudi's own rollback.
            let _ = std::fs::remove_file(ours.join(".hoodie/lock"));
            let _ = std::fs::remove_file(ours.join(".hoodie/.lock.crc"));
        }
        let out = roll_back_like_the_harness_writers(&ours, interval, &[]);
        // A version-6 metadata table is read with both of Hudi 0.15's HFile readers (HBase's,
        // its default, and the native one) where hudi-keeper wrote an HFile block.
        let v6_mdt = version == "0.15" && meta["metadata_table"] == true;
        let mut expected: Vec<String> = meta["failed_instants"]
            .as_array()
            .map(|a| {
                a.iter()
                    .filter_map(|v| v.as_str().map(str::to_string))
                    .collect()
            })
            .unwrap_or_else(|| vec![failed.clone()]);
        expected.sort();
        let result = if !out.status.success() {
            Err(format!("rollback failed: {}", stderr(&out)))
        } else {
            let report: serde_json::Value =
                serde_json::from_str(&stdout(&out)).expect("rollback --json");
            let mut rolled: Vec<String> = report["rollbacks"]
                .as_array()
                .map(|a| {
                    a.iter()
                        .filter_map(|r| r["instant"].as_str().map(str::to_string))
                        .collect()
                })
                .unwrap_or_default();
            rolled.sort();
            if rolled != expected {
                Err(format!("rolled back {rolled:?}, expected {expected:?}"))
            } else {
                // Both readers where hudi-keeper wrote an HFile block (merge-on-read); a
                // copy-on-write rollback adds none, so one reader is enough there.
                let verifies = if v6_mdt && s.starts_with("mor-") {
                    verify_with_each_hfile_reader(version, &ours)
                } else {
                    vec![(
                        "default reader",
                        run_sh(&["verify", version, ours.to_str().expect("utf-8")]),
                    )]
                };
                let diff = run_sh(&[
                    "diff",
                    ours.to_str().expect("utf-8"),
                    dir.join(format!("{s}-hudi-rollback"))
                        .to_str()
                        .expect("utf-8"),
                ]);
                let failed_verify = verifies.iter().find(|(_, v)| !v.status.success());
                match (failed_verify, diff.status.success()) {
                    (None, true) => Ok(format!(
                        "Hudi validator passed ({}); same as Hudi's rollback",
                        verifies
                            .iter()
                            .map(|(f, _)| *f)
                            .collect::<Vec<_>>()
                            .join(", ")
                    )),
                    (Some((flag, v)), _) => Err(format!(
                        "Hudi's validator failed ({flag}): {}{}",
                        stdout(v),
                        stderr(v)
                    )),
                    (None, false) => {
                        Err(format!("differs from Hudi's rollback: {}", stdout(&diff)))
                    }
                }
            }
        };
        outcomes.push(Outcome {
            scenario: s.to_string(),
            result,
        });
    }
    let mut failed = 0;
    for o in &outcomes {
        match &o.result {
            Ok(msg) => eprintln!("Hudi {version} {}: ok ({msg})", o.scenario),
            Err(msg) => {
                failed += 1;
                eprintln!("Hudi {version} {}: FAILED: {msg}", o.scenario);
            }
        }
    }
    assert_eq!(failed, 0, "{failed} of {} scenarios failed", outcomes.len());
}

#[test]
fn hudi_0_15_accepts_our_rollbacks_of_every_scenario() {
    if enabled() {
        roll_back_every_scenario("0.15");
    }
}

#[test]
fn hudi_1_0_accepts_our_rollbacks_of_every_scenario() {
    if enabled() {
        roll_back_every_scenario("1.0");
    }
}

#[test]
fn hudi_1_1_accepts_our_rollbacks_of_every_scenario() {
    if enabled() {
        roll_back_every_scenario("1.1");
    }
}

/// Table version 5 (Hudi 0.13.1, whose Java client writes no metadata table): CI runs these two;
/// [`V5_FULL_SET`] adds the rest with HUDI_KEEPER_INTEROP_FULL=1 (tests/interop/README.md,
/// "Which cases run where").
const V5_CI_SET: &[&str] = &["cow-nomdt-direct", "mor-nomdt-direct"];
const V5_FULL_SET: &[&str] = &[
    "cow-nomdt-timeline",
    "mor-nomdt-timeline",
    "cow-nomdt-direct-requested",
    "mor-nomdt-direct-requested",
    "cow-nomdt-direct-urlenc",
    "mor-nomdt-direct-hive",
    "mor-nomdt-direct-slash",
    "cow-nomdt-direct-nopart",
    // Two failed writes in a row on the same file slices.
    "mor-nomdt-direct-twice",
];

/// One version-5 table rolled back by hudi-keeper: the result equals Hudi 0.13.1's own rollback
/// (`run.sh diff`), Hudi 0.13.1's validator passes (its follow-up writes, clean and archive
/// included), `hoodie.properties` is byte for byte what it was (no upgrade), and then a Hudi 0.15
/// writer upgrades the table to version 6 and commits, and Hudi 0.15's validator passes on the
/// records as of that commit.
fn roll_back_a_version_5_table(scenario: &str, work: &Path) -> Result<String, String> {
    let dir = tables_root().join("0.13");
    generated("0.13", scenario);
    let ours = work.join(scenario);
    copy_table(&dir.join(scenario), &ours);
    let properties_before =
        std::fs::read(ours.join(".hoodie/hoodie.properties")).map_err(|e| e.to_string())?;
    if !String::from_utf8_lossy(&properties_before).contains("hoodie.table.version=5") {
        return Err("the generated table is not of version 5".into());
    }
    let out = roll_back_like_the_harness_writers(&ours, 1000, &[]);
    if !out.status.success() {
        return Err(format!("rollback failed: {}", stderr(&out)));
    }
    let properties_after =
        std::fs::read(ours.join(".hoodie/hoodie.properties")).map_err(|e| e.to_string())?;
    if properties_after != properties_before {
        return Err("hudi-keeper changed hoodie.properties".into());
    }
    // The completed rollback in Hudi 0.13's schema, as Hudi 0.13.1 writes it: without the
    // `logFilesFromFailedCommit` field 0.14 added (`run.sh diff` compares file names only).
    for table in [ours.clone(), dir.join(format!("{scenario}-hudi-rollback"))] {
        let rollbacks: Vec<PathBuf> = std::fs::read_dir(table.join(".hoodie"))
            .map_err(|e| e.to_string())?
            .flatten()
            .map(|e| e.path())
            .filter(|p| p.extension().is_some_and(|x| x == "rollback"))
            .collect();
        if rollbacks.is_empty() {
            return Err(format!("no completed rollback in {}", table.display()));
        }
        for rollback in &rollbacks {
            let bytes = std::fs::read(rollback).map_err(|e| e.to_string())?;
            let text = String::from_utf8_lossy(&bytes);
            if !text.contains("HoodieRollbackPartitionMetadata")
                || text.contains("logFilesFromFailedCommit")
            {
                return Err(format!(
                    "{} is not in Hudi 0.13's rollback schema",
                    rollback.display()
                ));
            }
        }
    }
    let ours_s = ours.to_str().expect("utf-8");
    let diff = run_sh(&[
        "diff",
        ours_s,
        dir.join(format!("{scenario}-hudi-rollback"))
            .to_str()
            .expect("utf-8"),
    ]);
    if !diff.status.success() {
        return Err(format!(
            "differs from Hudi 0.13.1's rollback: {}",
            stdout(&diff)
        ));
    }
    let verify = run_sh(&["verify", "0.13", ours_s]);
    if !verify.status.success() {
        return Err(format!(
            "Hudi 0.13.1's validator failed: {}{}",
            stdout(&verify),
            stderr(&verify)
        ));
    }
    // Hudi 0.15 upgrades the table (FiveToSixUpgradeHandler) in its next write and commits.
    match upgrade_with_hudi_0_15(&ours, &work.join(format!("{scenario}-upgraded")))? {
        None => Ok("same as Hudi 0.13.1's rollback; Hudi 0.13.1's validator passed; Hudi 0.15 upgraded, committed and validated".into()),
        Some(ours_failed) => {
            // Hudi 0.15 fails on this table after Hudi 0.13.1's own rollback too: then it must
            // fail the same checks on both (a difference between the releases, not ours).
            let theirs = upgrade_with_hudi_0_15(
                &dir.join(format!("{scenario}-hudi-rollback")),
                &work.join(format!("{scenario}-hudi-rollback-upgraded")),
            )?;
            match theirs {
                Some(theirs_failed) if theirs_failed == ours_failed => Ok(format!(
                    "same as Hudi 0.13.1's rollback; Hudi 0.13.1's validator passed; after Hudi 0.15's upgrade and commit its validator fails {ours_failed:?} here and on Hudi 0.13.1's own rollback alike"
                )),
                other => Err(format!(
                    "Hudi 0.15's validator after its upgrade failed {ours_failed:?} on ours, {other:?} on Hudi 0.13.1's own rollback"
                )),
            }
        }
    }
}

fn roll_back_version_5_tables(scenarios: &[&str]) {
    let work = tempfile::tempdir().expect("tempdir");
    let mut failed = 0;
    for s in scenarios {
        match roll_back_a_version_5_table(s, work.path()) {
            Ok(msg) => eprintln!("Hudi 0.13 {s}: ok ({msg})"),
            Err(msg) => {
                failed += 1;
                eprintln!("Hudi 0.13 {s}: FAILED: {msg}");
            }
        }
    }
    assert_eq!(
        failed,
        0,
        "{failed} of {} scenarios failed",
        scenarios.len()
    );
}

/// In CI's set.
#[test]
fn hudi_0_13_accepts_our_rollbacks_and_hudi_0_15_upgrades_after_them() {
    if enabled() {
        roll_back_version_5_tables(V5_CI_SET);
    }
}

#[test]
fn hudi_0_13_accepts_our_rollbacks_of_every_other_scenario() {
    if enabled_full("Hudi 0.13: timeline-server markers, requested-only writes, partition layouts")
    {
        roll_back_version_5_tables(V5_FULL_SET);
    }
}

/// In CI's set (tests/interop/README.md, "Which cases run where").
#[test]
fn hudi_1_2_accepts_our_rollbacks_of_every_scenario() {
    if enabled() {
        roll_back_every_scenario("1.2");
    }
}

/// The validator must be able to fail: a failed write's data file left in place, and a committed
/// data file deleted, are both caught.
#[test]
fn hudis_validator_catches_left_over_and_missing_files() {
    if !enabled() {
        return;
    }
    let dir = tables("1.0");
    let work = tempfile::tempdir().expect("tempdir");
    let reference = dir.join("cow-nomdt-direct-hudi-rollback");
    let failed_table = dir.join("cow-nomdt-direct");
    let failed = scenario_json(&failed_table)["failed_instant"]
        .as_str()
        .expect("failed instant")
        .to_string();

    // A data file of the failed write put back.
    let left_over = work.path().join("left-over");
    copy_table(&reference, &left_over);
    let stray = files_below(&failed_table)
        .into_iter()
        .find(|p| p.ends_with(&format!("_{failed}.parquet")))
        .expect("the failed write left a data file");
    std::fs::copy(failed_table.join(&stray), left_over.join(&stray)).expect("copy stray file");
    let out = run_sh(&["verify", "1.0", left_over.to_str().expect("utf-8")]);
    assert!(
        !out.status.success(),
        "validator accepted a left-over file {stray}"
    );
    assert!(stdout(&out).contains("\"ok\" : false"), "{}", stdout(&out));

    // A committed data file deleted.
    let missing = work.path().join("missing");
    copy_table(&reference, &missing);
    // The newest base file of a file group is in the latest file slice: readers need it.
    let committed = files_below(&missing)
        .into_iter()
        .filter(|p| p.ends_with(".parquet") && !p.starts_with(".hoodie"))
        .max_by_key(|p| {
            p.rsplit('_')
                .next()
                .unwrap_or_default()
                .trim_end_matches(".parquet")
                .to_string()
        })
        .expect("a committed data file");
    std::fs::remove_file(missing.join(&committed)).expect("remove");
    let out = run_sh(&["verify", "1.0", missing.to_str().expect("utf-8")]);
    assert!(
        !out.status.success(),
        "validator accepted a missing file {committed}"
    );
}

/// The log files of the metadata table's `files` partition of `table`, oldest version first.
fn mdt_files_logs(table: &Path) -> Vec<PathBuf> {
    let dir = table.join(".hoodie/metadata/files");
    let mut logs: Vec<(u64, PathBuf)> = std::fs::read_dir(&dir)
        .expect("read the MDT files partition")
        .flatten()
        .map(|e| e.path())
        .filter_map(|p| {
            let name = p.file_name()?.to_str()?.to_string();
            if name.ends_with(".crc") || !name.contains(".log.") {
                return None;
            }
            let version = name
                .split(".log.")
                .nth(1)?
                .split('_')
                .next()?
                .parse()
                .ok()?;
            Some((version, p))
        })
        .collect();
    logs.sort();
    logs.into_iter().map(|(_, p)| p).collect()
}

/// Removes `file` and its Hadoop checksum side file `.<name>.crc`.
fn remove_with_crc(file: &Path) {
    std::fs::remove_file(file).expect("remove");
    let name = file.file_name().and_then(|n| n.to_str()).expect("name");
    let _ = std::fs::remove_file(file.with_file_name(format!(".{name}.crc")));
}

/// The validator reads the metadata table with the HFile reader it is asked for, under 0.15: a
/// metadata-table log block whose HFile names an unknown comparator class is refused by HBase's
/// reader (it loads that class) and read by the native one (which does not), and a files-partition
/// log file removed from the metadata table fails both.
#[test]
fn hudis_validator_reads_the_metadata_table_with_either_hfile_reader() {
    if !enabled() {
        return;
    }
    let dir = tables("0.15");
    let reference = dir.join("mor-mdt-direct-hudi-rollback");
    let work = tempfile::tempdir().expect("tempdir");

    // The HFile block of the rollback's own metadata-table deltacommit, its comparator renamed.
    let broken = work.path().join("broken-comparator");
    copy_table(&reference, &broken);
    let newest = mdt_files_logs(&broken)
        .pop()
        .expect("an MDT files log file");
    let mut bytes = std::fs::read(&newest).expect("read");
    let name = b"org.apache.hudi.io.storage.HoodieHBaseKVComparator";
    let at = bytes
        .windows(name.len())
        .position(|w| w == name)
        .expect("the comparator class name in the HFile trailer");
    bytes[at + name.len() - 1] = b'X';
    remove_with_crc(&newest);
    std::fs::write(&newest, &bytes).expect("write");
    let runs = verify_with_each_hfile_reader("0.15", &broken);
    let (hbase, native) = (&runs[0], &runs[1]);
    assert_eq!(hbase.0, "--hbase-hfile-reader");
    assert!(
        !hbase.1.status.success() && stdout(&hbase.1).contains("HoodieHBaseKVComparatoX"),
        "HBase's reader accepted an unknown comparator class: {}",
        stdout(&hbase.1)
    );
    assert!(
        native.1.status.success(),
        "the native reader, which ignores the comparator, failed: {}",
        stdout(&native.1)
    );
    assert!(
        stdout(&native.1).contains("native (HoodieNativeAvroHFileReader"),
        "{}",
        stdout(&native.1)
    );

    // The metadata table without the files log of the rollback's deltacommit.
    let removed = work.path().join("removed-files-log");
    copy_table(&reference, &removed);
    remove_with_crc(
        &mdt_files_logs(&removed)
            .pop()
            .expect("an MDT files log file"),
    );
    for (flag, out) in verify_with_each_hfile_reader("0.15", &removed) {
        assert!(
            !out.status.success(),
            "verify {flag} accepted a metadata table without its newest files log"
        );
        let failed = failed_checks(&stdout(&out));
        assert!(
            failed.contains(&"mdt_partitions_and_files_equal_listing".to_string()),
            "verify {flag}: {failed:?}"
        );
    }
}

/// `run.sh diff` compares the metadata table of two rollbacks: the failed table against Hudi's
/// rollback differs in the MDT's files and its rollback deltacommit, and a log file whose block was
/// replaced by another kind of block differs in its blocks even though every name is the same.
#[test]
fn diff_compares_the_metadata_tables_of_two_rollbacks() {
    if !enabled() {
        return;
    }
    let dir = tables("0.15");
    let reference = dir.join("mor-mdt-direct-mdtdone-hudi-rollback");
    let reference_s = reference.to_str().expect("utf-8");
    let same = run_sh(&["diff", reference_s, reference_s]);
    assert!(same.status.success(), "{}", stdout(&same));

    let failed = run_sh(&[
        "diff",
        dir.join("mor-mdt-direct-mdtdone").to_str().expect("utf-8"),
        reference_s,
    ]);
    assert!(!failed.status.success());
    let report: serde_json::Value = serde_json::from_str(&stdout(&failed)).expect("diff JSON");
    for key in ["mdt_data_files", "mdt_rollback_deltacommits"] {
        assert!(
            report["differences"].get(key).is_some(),
            "no {key} difference: {}",
            report["differences"]
        );
    }

    // The MDT rollback's command block replaced by the HFile block before it: same file names.
    let work = tempfile::tempdir().expect("tempdir");
    let swapped = work.path().join("swapped");
    copy_table(&reference, &swapped);
    let logs = mdt_files_logs(&swapped);
    let (data, command) = (&logs[logs.len() - 2], &logs[logs.len() - 1]);
    std::fs::copy(data, command).expect("copy a block over");
    let _ = std::fs::remove_file(command.with_file_name(format!(
        ".{}.crc",
        command.file_name().and_then(|n| n.to_str()).expect("name")
    )));
    let out = run_sh(&["diff", swapped.to_str().expect("utf-8"), reference_s]);
    assert!(!out.status.success());
    let report: serde_json::Value = serde_json::from_str(&stdout(&out)).expect("diff JSON");
    assert!(
        report["differences"].get("mdt_log_blocks").is_some()
            && report["differences"].get("mdt_data_files").is_none(),
        "{}",
        report["differences"]
    );
}
