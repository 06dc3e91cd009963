//! Table version 5 with a metadata table, against real Hudi 0.13.1 through Spark (the
//! `tests/interop/spark-0.13` harness: Hudi 0.13.1's Java client writes no metadata table). Hudi
//! writes the table and a SIGKILLed writer leaves a failed write; hudi-keeper rolls it back; the
//! result must equal Hudi 0.13.1's own rollback of the same table (`diff.py --task-tokens`), Hudi
//! 0.13.1's Spark validator must pass on it (metadata table against the disk, every block read,
//! snapshot queries with and without the metadata table, a follow-up commit), hudi-keeper's audit
//! must find the metadata table in step and nothing but committed files (on Hudi's own rollback
//! too), and a Hudi 0.15 writer must upgrade it, commit and pass its own validator.
//!
//! CI runs [`CI_SET`]; [`FULL_SET`] adds the rest with HUDI_KEEPER_INTEROP_FULL=1
//! (tests/interop/README.md, "Which cases run where").

use hudi_keeper_test_support as common;

use std::path::Path;

use common::interop::{
    copy_table, enabled, enabled_full, roll_back_like_the_harness_writers, spark013_generated,
    spark013_sh, upgrade_with_hudi_0_15, workspace,
};
use common::{stderr, stdout};

/// The failed write's metadata-table deltacommit completed (hudi-keeper marks its files
/// deleted), merge-on-read; and the writer killed inside its metadata-table write (the
/// metadata table's own rollback at a later instant first), copy-on-write.
const CI_SET: &[&str] = &["mor-mdt-mdtdone", "cow-mdt-mdtinflight"];
/// The other variants: the failed write never reached the metadata table (COW: an empty
/// deltacommit; MOR: the command-block files recorded), and the two other table types.
const FULL_SET: &[&str] = &[
    "cow-mdt",
    "mor-mdt",
    "cow-mdt-mdtdone",
    "mor-mdt-mdtinflight",
];

/// One table rolled back by hudi-keeper and judged as the module docs say; what was checked.
fn roll_back_one(scenario: &str, work: &Path) -> Result<String, String> {
    let table = spark013_generated(scenario);
    let reference = table.with_file_name(format!("{scenario}-hudi-rollback"));
    let ours = work.join(scenario);
    copy_table(&table, &ours);
    // A writer killed inside its commit leaves the file-system lock, which never expires
    // (Hudi's default): the reference had it removed before Hudi's own rollback too.
    let _ = std::fs::remove_file(ours.join(".hoodie/lock"));
    let _ = std::fs::remove_file(ours.join(".hoodie/.lock.crc"));
    let props = |t: &Path| -> Result<[Vec<u8>; 2], String> {
        let read = |p: &str| std::fs::read(t.join(p)).map_err(|e| format!("{p}: {e}"));
        Ok([
            read(".hoodie/hoodie.properties")?,
            read(".hoodie/metadata/.hoodie/hoodie.properties")?,
        ])
    };
    let before = props(&ours)?;
    if !String::from_utf8_lossy(&before[0]).contains("hoodie.table.version=5") {
        return Err("the generated table is not of version 5".into());
    }
    let out = roll_back_like_the_harness_writers(&ours, 1000, &[]);
    if !out.status.success() {
        return Err(format!("rollback failed: {}", stderr(&out)));
    }
    if props(&ours)? != before {
        return Err("hudi-keeper changed a hoodie.properties".into());
    }
    let diff = std::process::Command::new("python3")
        .arg(workspace().join("tests/interop/diff.py"))
        .arg("--task-tokens")
        .args([&ours, &reference])
        .output()
        .map_err(|e| e.to_string())?;
    if !diff.status.success() {
        return Err(format!(
            "differs from Hudi 0.13.1's rollback: {}",
            stdout(&diff)
        ));
    }
    // hudi-keeper's audit reads Hudi 0.13's metadata table as it reads its own: no drift, and
    // every data file committed (the failed log files a MOR rollback voids in place included),
    // on this table and on Hudi 0.13.1's own rollback.
    for t in [&ours, &reference] {
        audit_is_clean(t)?;
    }
    let verify = spark013_sh(&["verify", ours.to_str().expect("utf-8")]);
    if !verify.status.success() {
        return Err(format!(
            "Hudi 0.13.1's Spark validator failed: {}{}",
            stdout(&verify),
            stderr(&verify)
        ));
    }
    match upgrade_with_hudi_0_15(&ours, &work.join(format!("{scenario}-upgraded")))? {
        None => Ok("same as Hudi 0.13.1's rollback; Hudi 0.13.1's Spark validator passed; Hudi 0.15 upgraded, committed and validated".into()),
        Some(ours_failed) => {
            // Merge-on-read whose failed write never reached the metadata table: Hudi 0.13's own
            // rollback leaves the failed log files on disk and out of the metadata table
            // (tests/interop/observations/spark-0.13.md, section 4), which Hudi 0.15's validator
            // flags. Then it must flag the same on Hudi 0.13.1's own rollback.
            let theirs = upgrade_with_hudi_0_15(
                &reference,
                &work.join(format!("{scenario}-hudi-rollback-upgraded")),
            )?;
            match theirs {
                Some(theirs_failed) if theirs_failed == ours_failed => Ok(format!(
                    "same as Hudi 0.13.1's rollback; Hudi 0.13.1's Spark validator passed; after Hudi 0.15's upgrade and commit its validator fails {ours_failed:?} here and on Hudi 0.13.1's own rollback alike"
                )),
                other => Err(format!(
                    "Hudi 0.15's validator after its upgrade failed {ours_failed:?} on ours, {other:?} on Hudi 0.13.1's own rollback"
                )),
            }
        }
    }
}

/// `hudi-keeper audit --json` of `table`: the metadata table checked and in step with the store,
/// and no data file of any class but committed.
fn audit_is_clean(table: &Path) -> Result<(), String> {
    let out = common::run(&["audit", table.to_str().expect("utf-8"), "--json"]);
    if !out.status.success() {
        return Err(format!("audit failed: {}", stderr(&out)));
    }
    let v: serde_json::Value =
        serde_json::from_str(&stdout(&out)).map_err(|e| format!("audit JSON: {e}"))?;
    let m = &v["metadata_table"];
    let drift = ["missing_from_store", "not_listed", "listed_not_committed"]
        .iter()
        .any(|k| m[k].as_u64() != Some(0));
    if m["checked"] != true || drift {
        return Err(format!("audit of {}: metadata table {m}", table.display()));
    }
    for class in ["pending", "rollback_leftover", "orphan", "unknown"] {
        if v["classes"][class]["files"].as_u64() != Some(0) {
            return Err(format!(
                "audit of {}: {class} files {}",
                table.display(),
                v["classes"]
            ));
        }
    }
    Ok(())
}

fn roll_back_all(scenarios: &[&str]) {
    let work = tempfile::tempdir().expect("tempdir");
    let mut failed = 0;
    for s in scenarios {
        match roll_back_one(s, work.path()) {
            Ok(msg) => eprintln!("Hudi 0.13 (Spark) {s}: ok ({msg})"),
            Err(msg) => {
                failed += 1;
                eprintln!("Hudi 0.13 (Spark) {s}: FAILED: {msg}");
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

#[test]
fn hudi_0_13_through_spark_accepts_our_rollbacks_of_tables_with_a_metadata_table() {
    if !enabled() {
        return;
    }
    roll_back_all(CI_SET);
}

#[test]
fn hudi_0_13_through_spark_accepts_our_rollbacks_of_every_other_scenario() {
    if !enabled_full("Hudi 0.13 through Spark: the other metadata-table variants") {
        return;
    }
    roll_back_all(FULL_SET);
}
