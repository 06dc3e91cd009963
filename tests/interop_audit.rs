//! `hudi-keeper audit` on tables real Hudi made and rolled back (the harness's scenarios and
//! Hudi's own rollback of each, `interop_rollback`'s tables): before the rollback the failed
//! write's files are `pending`; after Hudi's rollback every data file is `committed` (no false
//! leftover, orphan or unknown); a file of the rolled-back instant put back afterwards (a missed
//! marker, a zombie writer) is a `rollback_leftover`, in its partition. No log file is opened
//! where metadata explains it.
//!
//! Run by `scripts/test` (HUDI_KEEPER_INTEROP=1): every version in CI (no JVM runs here but the
//! generation of missing tables; the audits take seconds).

use hudi_keeper_test_support as common;

use std::path::Path;

use common::interop::{copy_table, enabled, files_below, generated, scenario_json};
use common::{stderr, stdout};

/// The scenarios audited per version: copy-on-write and merge-on-read, with the metadata table.
const SCENARIOS: &[&str] = &["cow-mdt-direct", "mor-mdt-direct"];

fn audit(table: &Path) -> serde_json::Value {
    let out = common::run(&["audit", table.to_str().expect("utf-8"), "--json"]);
    assert!(out.status.success(), "audit: {}", stderr(&out));
    serde_json::from_str(&stdout(&out)).expect("audit --json")
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

fn audit_version(version: &str) {
    let work = tempfile::tempdir().expect("tempdir");
    for s in SCENARIOS {
        let failed_table = generated(version, s);
        let reference = failed_table.with_file_name(format!("{s}-hudi-rollback"));
        let failed = scenario_json(&failed_table)["failed_instant"]
            .as_str()
            .expect("failed instant")
            .to_string();

        let before = audit(&failed_table);
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

#[test]
fn audits_of_hudi_0_15_tables() {
    if enabled() {
        audit_version("0.15");
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
