//! Table version 5 with a metadata table, against real Hudi 0.13.1 through Spark (the
//! `tests/interop/spark-0.13` harness: Hudi 0.13.1's Java client writes no metadata table). Hudi
//! writes the table and a SIGKILLed writer leaves a failed write; hudi-keeper rolls it back; the
//! result must equal Hudi 0.13.1's own rollback of the same table (`diff.py --task-tokens`), Hudi
//! 0.13.1's Spark validator must pass on it (metadata table against the disk, every block read,
//! snapshot queries with and without the metadata table, a follow-up commit), hudi-keeper's audit
//! must find the metadata table in step and nothing but committed files (on Hudi's own rollback
//! too), and a Hudi 0.15 writer must upgrade it, commit and pass its own validator.
//!
//! Restores: Hudi 0.13.1's restore to a Hudi savepoint and hudi-keeper's, compared the same way
//! ([`restore_one`]). The daemon: its automatic rollback of a killed writer's table
//! ([`daemon_rolls_back`]).
//!
//! CI runs [`CI_SET`] and [`RESTORE_CI_SET`]; [`FULL_SET`] and [`RESTORE_FULL_SET`] add the rest
//! with HUDI_KEEPER_INTEROP_FULL=1
//! (tests/interop/README.md, "Which cases run where").

use hudi_keeper_test_support as common;

use std::path::Path;

use common::interop::{
    copy_table, enabled, enabled_full, failed_checks, roll_back_like_the_harness_writers,
    spark013_generated, spark013_sh, upgrade_with_hudi_0_15, workspace,
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

/// A copy of `from` at `to` without the file-system lock a writer killed inside its commit
/// leaves, which never expires (Hudi's default): the references had it removed before Hudi's
/// own rollback too.
fn copy_without_lock(from: &Path, to: &Path) {
    copy_table(from, to);
    let _ = std::fs::remove_file(to.join(".hoodie/lock"));
    let _ = std::fs::remove_file(to.join(".hoodie/.lock.crc"));
}

/// `tests/interop/diff.py` with `flags` on `ours` against `hudis`.
fn diff_py(flags: &[&str], ours: &Path, hudis: &Path) -> Result<std::process::Output, String> {
    std::process::Command::new("python3")
        .arg(workspace().join("tests/interop/diff.py"))
        .args(flags)
        .args([ours, hudis])
        .output()
        .map_err(|e| e.to_string())
}

/// One table rolled back by hudi-keeper and judged as the module docs say; what was checked.
fn roll_back_one(scenario: &str, work: &Path) -> Result<String, String> {
    let table = spark013_generated(scenario);
    let reference = table.with_file_name(format!("{scenario}-hudi-rollback"));
    let ours = work.join(scenario);
    copy_without_lock(&table, &ours);
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
    let diff = diff_py(&["--task-tokens"], &ours, &reference)?;
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
    // Hudi 0.15 upgrades the table and commits, and its validator passes: also on merge-on-read
    // tables whose failed write never completed in the metadata table, where Hudi 0.13's own
    // rollback leaves the failed log files out of it (and 0.15's validator then fails) but
    // hudi-keeper adds them as Hudi 0.14+ does (docs/compatibility.md).
    match upgrade_with_hudi_0_15(&ours, &work.join(format!("{scenario}-upgraded")))? {
        None => Ok("same as Hudi 0.13.1's rollback; Hudi 0.13.1's Spark validator passed; Hudi 0.15 upgraded, committed and validated".into()),
        Some(failed) => Err(format!(
            "Hudi 0.15's validator after its upgrade and commit failed {failed:?}"
        )),
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

/// The restores CI runs: a savepoint at the second commit of the reference (Hudi's rollback) of
/// these tables, then Hudi's restore and hudi-keeper's of two copies.
const RESTORE_CI_SET: &[&str] = &["cow-mdt-mdtinflight", "mor-mdt-mdtdone"];
/// The others (HUDI_KEEPER_INTEROP_FULL=1); `cow-mdt!` is the failed table itself, whose
/// pending failed write the restore undoes too (a merge-on-read one is refused: roll it back
/// first).
const RESTORE_FULL_SET: &[&str] = &["cow-mdt", "mor-mdt", "cow-mdt!"];

/// Hudi 0.13.1's restore and hudi-keeper's of one table with a metadata table, to a Hudi
/// savepoint at its second commit: equal under `diff.py --restore --task-tokens`, both
/// `hoodie.properties` unchanged, and Hudi 0.13.1's Spark validator on the savepoint's records
/// passing, or failing the same checks as after Hudi's own restore (merge-on-read: Hudi 0.13's
/// restore leaves the failed and the rollback's log files outside the metadata table).
fn restore_one(case: &str, work: &Path) -> Result<String, String> {
    let (scenario, with_failed_write) = match case.strip_suffix('!') {
        Some(s) => (s, true),
        None => (case, false),
    };
    let table = spark013_generated(scenario);
    let from = match with_failed_write {
        true => table.clone(),
        false => table.with_file_name(format!("{scenario}-hudi-rollback")),
    };
    let name = case.replace('!', "-failed");
    let base = work.join(format!("{name}-savepoint"));
    copy_without_lock(&from, &base);
    let mut commits: Vec<String> = std::fs::read_dir(base.join(".hoodie"))
        .map_err(|e| e.to_string())?
        .flatten()
        .filter_map(|e| e.file_name().into_string().ok())
        .filter_map(|n| {
            n.strip_suffix(".commit")
                .or_else(|| n.strip_suffix(".deltacommit"))
                .map(str::to_string)
        })
        .collect();
    commits.sort();
    let c2 = commits.get(1).ok_or("fewer than two commits")?.clone();
    let base_s = base.to_str().expect("utf-8");
    let sp = spark013_sh(&["savepoint", base_s, &c2]);
    if !sp.status.success() {
        return Err(format!("Hudi's savepoint failed: {}", stderr(&sp)));
    }
    let hudis = work.join(format!("{name}-hudi-restore"));
    let ours = work.join(format!("{name}-restore"));
    copy_table(&base, &hudis);
    copy_table(&base, &ours);
    let theirs = spark013_sh(&["restore", hudis.to_str().expect("utf-8"), &c2]);
    if !theirs.status.success() {
        return Err(format!("Hudi's restore failed: {}", stderr(&theirs)));
    }
    let props = |t: &Path| -> Vec<Vec<u8>> {
        [
            ".hoodie/hoodie.properties",
            ".hoodie/metadata/.hoodie/hoodie.properties",
        ]
        .iter()
        .map(|p| std::fs::read(t.join(p)).unwrap_or_default())
        .collect()
    };
    let before = props(&ours);
    let out = common::run(&[
        "restore",
        ours.to_str().expect("utf-8"),
        "--savepoint",
        &c2,
        "--yes",
        "--json",
        "--lock",
        "filesystem",
        "--heartbeat-interval",
        "1000ms",
        "--clock-skew-margin",
        "1s",
    ]);
    if !out.status.success() {
        return Err(format!("hudi-keeper's restore failed: {}", stderr(&out)));
    }
    if !stdout(&out).contains("\"recorded\"") {
        return Err(format!(
            "the metadata table was not recorded in: {}",
            stdout(&out)
        ));
    }
    if props(&ours) != before {
        return Err("hudi-keeper's restore changed a hoodie.properties".into());
    }
    let diff = diff_py(&["--restore", "--task-tokens"], &ours, &hudis)?;
    if !diff.status.success() {
        return Err(format!(
            "differs from Hudi 0.13.1's restore: {}",
            stdout(&diff)
        ));
    }
    let expect = format!("expected-records-{c2}.json");
    let verify = |t: &Path| {
        let e = t.join(&expect);
        let out = spark013_sh(&[
            "verify",
            t.to_str().expect("utf-8"),
            "--expect",
            e.to_str().expect("utf-8"),
        ]);
        (out.status.success(), failed_checks(&stdout(&out)))
    };
    match verify(&ours) {
        (true, _) => Ok("same as Hudi 0.13.1's restore; Hudi 0.13.1's Spark validator passed".into()),
        (false, ours_failed) => match verify(&hudis) {
            (false, theirs) if theirs == ours_failed && !theirs.is_empty() => Ok(format!(
                "same as Hudi 0.13.1's restore; its Spark validator fails {ours_failed:?} here and after Hudi 0.13.1's own restore alike"
            )),
            other => Err(format!(
                "Hudi 0.13.1's Spark validator failed {ours_failed:?} on ours, {other:?} on Hudi's own restore"
            )),
        },
    }
}

#[test]
fn hudi_0_13_through_spark_restores_tables_with_a_metadata_table_as_we_do() {
    if !enabled() {
        return;
    }
    run_all("restore of", RESTORE_CI_SET, restore_one);
}

#[test]
fn hudi_0_13_through_spark_restores_the_other_tables_as_we_do() {
    if !enabled_full("Hudi 0.13 through Spark: restores of the other tables") {
        return;
    }
    run_all("restore of", RESTORE_FULL_SET, restore_one);
}

/// The daemon on a copy of `scenario`'s failed table: its automatic rollback (the leftover guard
/// after it included) equals Hudi 0.13.1's own rollback, Hudi 0.13.1's Spark validator passes,
/// and the audit finds the metadata table in step.
fn daemon_rolls_back(scenario: &str, work: &Path) -> Result<String, String> {
    let table = spark013_generated(scenario);
    let reference = table.with_file_name(format!("{scenario}-hudi-rollback"));
    let ours = work.join(format!("{scenario}-daemon"));
    copy_without_lock(&table, &ours);
    let scenario_json: serde_json::Value = serde_json::from_slice(
        &std::fs::read(ours.join("scenario.json")).map_err(|e| e.to_string())?,
    )
    .map_err(|e| e.to_string())?;
    let failed = scenario_json["failed_instant"]
        .as_str()
        .ok_or("no failed_instant in scenario.json")?
        .to_string();
    let state = work.join(format!("{scenario}-daemon-state"));
    std::fs::create_dir_all(&state).map_err(|e| e.to_string())?;
    let d = common::daemon::Daemon::start(
        &state,
        &format!(
            "[server]\nstate_dir = \"state\"\n[defaults]\npoll_interval = \"500ms\"\nheartbeat_interval = \"1s\"\nheartbeat_tolerable_misses = 2\nclock_skew_margin = \"500ms\"\n[defaults.lock]\nprovider = \"filesystem\"\ntimeout = \"10s\"\n[[tables]]\nname = \"hudi\"\nuri = \"{}\"\n",
            ours.display()
        ),
    );
    let status = d.wait_for(
        "the automatic rollback",
        std::time::Duration::from_secs(60),
        || {
            let s = d.table("hudi");
            (s["status"]["rollbacks"] == 1).then_some(s)
        },
    );
    d.terminate_cleanly(std::time::Duration::from_secs(30));
    if status["status"]["last_rollback"]["instant"] != failed.as_str() {
        return Err(format!("the daemon rolled back something else: {status}"));
    }
    let diff = diff_py(&["--task-tokens"], &ours, &reference)?;
    if !diff.status.success() {
        return Err(format!(
            "the daemon's rollback differs from Hudi 0.13.1's: {}",
            stdout(&diff)
        ));
    }
    audit_is_clean(&ours)?;
    let verify = spark013_sh(&["verify", ours.to_str().expect("utf-8")]);
    if !verify.status.success() {
        return Err(format!(
            "Hudi 0.13.1's Spark validator failed: {}{}",
            stdout(&verify),
            stderr(&verify)
        ));
    }
    Ok("the daemon's rollback equals Hudi 0.13.1's; its Spark validator passed".into())
}

#[test]
fn hudi_0_13_through_spark_accepts_the_daemons_rollback_of_a_table_with_a_metadata_table() {
    if !enabled() {
        return;
    }
    let work = tempfile::tempdir().expect("tempdir");
    match daemon_rolls_back("mor-mdt-mdtdone", work.path()) {
        Ok(msg) => eprintln!("Hudi 0.13 (Spark) daemon on mor-mdt-mdtdone: ok ({msg})"),
        Err(msg) => panic!("Hudi 0.13 (Spark) daemon on mor-mdt-mdtdone: {msg}"),
    }
}

/// Run `one` on each of `scenarios` in a scratch folder, print what each found, and fail
/// when any failed (`what` names the kind of case in the output).
fn run_all(what: &str, scenarios: &[&str], one: fn(&str, &Path) -> Result<String, String>) {
    let work = tempfile::tempdir().expect("tempdir");
    let mut failed = 0;
    for s in scenarios {
        match one(s, work.path()) {
            Ok(msg) => eprintln!("Hudi 0.13 (Spark) {what} {s}: ok ({msg})"),
            Err(msg) => {
                failed += 1;
                eprintln!("Hudi 0.13 (Spark) {what} {s}: FAILED: {msg}");
            }
        }
    }
    assert_eq!(
        failed,
        0,
        "{failed} of {} {what} cases failed",
        scenarios.len()
    );
}

#[test]
fn hudi_0_13_through_spark_accepts_our_rollbacks_of_tables_with_a_metadata_table() {
    if !enabled() {
        return;
    }
    run_all("rollback of", CI_SET, roll_back_one);
}

#[test]
fn hudi_0_13_through_spark_accepts_our_rollbacks_of_every_other_scenario() {
    if !enabled_full("Hudi 0.13 through Spark: the other metadata-table variants") {
        return;
    }
    run_all("rollback of", FULL_SET, roll_back_one);
}
