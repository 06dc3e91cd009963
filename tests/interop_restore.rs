//! Savepoints and restore against real Hudi (issue #8). Each case makes a real table (three
//! commits c1..c3 and a rolled-back failed write), savepoints c2 (by hudi-keeper or by Hudi),
//! then adds a completed commit and a SIGKILLed write after it. Two copies are restored to c2:
//! one by Hudi's own `restoreToSavepoint`, one by `hudi-keeper restore`. Then:
//! * `diff --restore` shows both copies keep and remove the same data files and end with the
//!   same timeline (modulo the new instant times);
//! * Hudi's validator reads exactly c2's records from each copy, writes to it, cleans it (the
//!   savepointed files stay) and archives it.

use hudi_keeper_test_support as common;

use std::path::{Path, PathBuf};

use common::interop::{
    copy_table, enabled, enabled_full, hudi_1_2_metadata_write_after_compaction_fails, must,
    run_sh, tables_root,
};
use common::{run, stderr, stdout};

fn s(p: &Path) -> &str {
    p.to_str().expect("utf-8 path")
}

fn data_files(dir: &Path) -> Vec<String> {
    let mut out = Vec::new();
    for part in std::fs::read_dir(dir).expect("table dir").flatten() {
        let name = part.file_name().to_string_lossy().into_owned();
        if !part.path().is_dir() || name.starts_with('.') {
            continue;
        }
        for f in std::fs::read_dir(part.path()).expect("partition").flatten() {
            let n = f.file_name().to_string_lossy().into_owned();
            if !n.ends_with(".crc") && n != ".hoodie_partition_metadata" {
                out.push(format!("{name}/{n}"));
            }
        }
    }
    out.sort();
    out
}

#[derive(Clone, Copy, PartialEq, Eq, Debug)]
enum SavepointBy {
    HudiKeeper,
    Hudi,
}

fn restore_case(key: &str, scenario: &str, by: SavepointBy) {
    restore_case_with(key, scenario, by, 0);
}

/// As [`restore_case`], with `compacting_commits` completed commits after the savepoint during
/// which the metadata table compacts every 2 deltacommits: the savepoint is then older than
/// the metadata table's oldest compaction, so both restores delete it (Hudi 1.1.1 then builds
/// it anew within its restore; hudi-keeper leaves it to the next writer, which the validator's
/// follow-up writes prove).
fn restore_case_with(key: &str, scenario: &str, by: SavepointBy, compacting_commits: usize) {
    if !enabled() {
        return;
    }
    let root = tables_root().join(format!(
        "restore-{key}-{scenario}-{compacting_commits}-{}",
        std::process::id()
    ));
    let _ = std::fs::remove_dir_all(&root);
    std::fs::create_dir_all(&root).expect("root");
    let gen = root.join("t");
    must(run_sh(&["generate", key, scenario, s(&gen)]), "generate");
    // The clean copy: Hudi rolled its failed write back (a completed rollback after c2).
    let table = PathBuf::from(format!("{}-hudi-rollback", gen.display()));
    let scenario_json: serde_json::Value =
        serde_json::from_slice(&std::fs::read(table.join("scenario.json")).expect("scenario"))
            .expect("scenario json");
    let c2 = scenario_json["completed_instants"][1]
        .as_str()
        .expect("c2")
        .to_string();
    let expected = table.join(format!("expected-records-{c2}.json"));
    assert!(expected.exists(), "{} missing", expected.display());

    // Savepoint c2.
    match by {
        SavepointBy::HudiKeeper => {
            let out = run(&[
                "savepoint",
                "create",
                s(&table),
                "--instant",
                &c2,
                "--user",
                "ops",
                "--comment",
                "known good",
                "--lock",
                "filesystem",
                "--json",
            ]);
            assert!(out.status.success(), "{}", stderr(&out));
            let v: serde_json::Value = serde_json::from_str(&stdout(&out)).expect("json");
            assert_eq!(v["savepoint"]["instant"], c2.as_str());
            // Hudi's timeline loader sees it as a completed savepoint.
            let tl = must(run_sh(&["timeline", key, s(&table)]), "timeline");
            assert!(
                tl.contains(&c2) && tl.contains("savepoint"),
                "Hudi does not see the savepoint:\n{tl}"
            );
        }
        SavepointBy::Hudi => {
            must(
                run_sh(&["savepoint", key, s(&table), &c2]),
                "Hudi's savepoint",
            );
        }
    }
    if compacting_commits > 0 {
        let out = std::process::Command::new("bash")
            .arg(common::interop::workspace().join("tests/interop/run.sh"))
            .args(["commits-n", key, s(&table), &compacting_commits.to_string()])
            .env(
                "INTEROP_EXTRA_PROPS",
                "hoodie.metadata.compact.max.delta.commits=2",
            )
            .output()
            .expect("run.sh commits-n");
        if key == "1.2"
            && !out.status.success()
            && hudi_1_2_metadata_write_after_compaction_fails(&stderr(&out))
        {
            // Hudi 1.2.0 cannot write these commits (tests/interop/README.md, "Hudi 1.2").
            eprintln!("Hudi 1.2 {scenario}: Hudi 1.2.0 fails its metadata-table write after compacting it; no restore to compare");
            let _ = std::fs::remove_dir_all(&root);
            return;
        }
        must(out, "commits-n");
    }
    // After it: a completed commit (touching p0..p2 and a new partition p3) and a write that
    // is SIGKILLed mid-way.
    must(run_sh(&["commit", key, s(&table)]), "commit");
    let killed = must(
        run_sh(&["kill-writer", key, s(&table), s(&root.join("killed-logs"))]),
        "kill-writer",
    )
    .trim()
    .to_string();
    // Its heartbeat must expire (harness writers beat every second, two misses tolerated).
    std::thread::sleep(std::time::Duration::from_secs(4));
    // Table version 5, merge-on-read: a restore past the killed (pending) deltacommit is refused
    // before anything changes; once hudi-keeper rolled the write back, both restores start from
    // that table and undo completed instants only.
    // The lock and detection flags of every restore here (the harness writers' heartbeats).
    let lock_and_detection = [
        "--lock",
        "filesystem",
        "--heartbeat-interval",
        "1s",
        "--heartbeat-tolerable-misses",
        "2",
        "--min-instant-age",
        "2s",
        "--clock-skew-margin",
        "500ms",
    ];
    let v5_mor = key == "0.13" && scenario.starts_with("mor-");
    if v5_mor {
        let probe = root.join("refused");
        copy_table(&table, &probe);
        let files_before = data_files(&probe);
        let mut args = vec!["restore", s(&probe), "--savepoint", &c2, "--yes", "--json"];
        args.extend(lock_and_detection);
        let out = run(&args);
        assert!(
            !out.status.success() && stderr(&out).contains("roll it back first"),
            "a version-5 MOR restore past a pending deltacommit was not refused: {}{}",
            stdout(&out),
            stderr(&out)
        );
        assert_eq!(
            data_files(&probe),
            files_before,
            "the refused restore changed data files"
        );
        assert!(
            probe
                .join(format!(".hoodie/{killed}.deltacommit.inflight"))
                .exists(),
            "the refused restore changed the timeline"
        );
        let out = common::interop::roll_back_like_the_harness_writers(&table, 1000, &[]);
        assert!(out.status.success(), "{}", stderr(&out));
    }
    let before = data_files(&table);

    let ours = root.join("ours");
    let hudis = root.join("hudis");
    copy_table(&table, &ours);
    copy_table(&table, &hudis);
    // Stale lock files of the killed writer are an operator's to remove, as in the rollback
    // suites (the writer was killed outside the commit transaction here, so there are none).
    for d in [&ours, &hudis] {
        let _ = std::fs::remove_file(d.join(".hoodie/lock"));
    }

    must(run_sh(&["restore", key, s(&hudis), &c2]), "Hudi's restore");

    let mut dry = vec![
        "restore",
        s(&ours),
        "--savepoint",
        &c2,
        "--dry-run",
        "--json",
    ];
    dry.extend(lock_and_detection);
    let plan = run(&dry);
    assert!(plan.status.success(), "{}", stderr(&plan));
    let plan: serde_json::Value = serde_json::from_str(&stdout(&plan)).expect("json");
    let order: Vec<&str> = plan["restore"]["instants"]
        .as_array()
        .expect("instants")
        .iter()
        .map(|i| i["instant"].as_str().unwrap_or(""))
        .collect();
    if !v5_mor {
        assert_eq!(
            order.first().copied(),
            Some(killed.as_str()),
            "the killed write comes first: {order:?}"
        );
    }
    assert_eq!(data_files(&ours), before, "a dry run changed the table");

    let mut real = vec!["restore", s(&ours), "--savepoint", &c2, "--yes", "--json"];
    real.extend(lock_and_detection);
    let done = run(&real);
    assert!(done.status.success(), "{}", stderr(&done));
    let done: serde_json::Value = serde_json::from_str(&stdout(&done)).expect("json");
    let undone = done["restore"]["undone"].as_array().expect("undone").len();
    let took_ms = done["restore"]["duration_ms"].as_u64().unwrap_or(0);
    // The metadata table is restored in place, as Hudi restores it (1.x; 0.15 with its sync
    // deltacommit).
    let mdt_action = done["restore"]["metadata_table"].as_str().unwrap_or("");
    let expected_mdt = if !scenario.contains("-mdt-") {
        "not_in_use"
    } else if compacting_commits > 0 {
        "deleted"
    } else {
        "restored"
    };
    assert_eq!(mdt_action, expected_mdt);
    let mdt_deleted = mdt_action == "deleted";
    assert_eq!(undone, order.len());
    // The requests it made, by kind: at least a bulk delete of the undone files and the
    // timeline's writes.
    let requests = &done["requests"];
    assert!(requests["delete"].as_u64().unwrap_or(0) > 0, "{requests}");
    assert!(
        requests["put_if_absent"].as_u64().unwrap_or(0) > 0,
        "{requests}"
    );

    // Same files kept and removed, same timeline (modulo new instant times).
    let mut diff_args = vec!["diff", "--restore"];
    if mdt_deleted {
        diff_args.push("--mdt-deleted");
    }
    diff_args.extend([s(&ours), s(&hudis)]);
    let diff = run_sh(&diff_args);
    assert!(
        diff.status.success(),
        "hudi-keeper's restore differs from Hudi's:\n{}\n{}",
        String::from_utf8_lossy(&diff.stdout),
        String::from_utf8_lossy(&diff.stderr)
    );
    let kept = data_files(&ours).len();
    let removed = before.iter().filter(|f| !ours.join(f).exists()).count();

    // Hudi reads exactly c2's records from both, then writes, cleans (the savepoint's files
    // stay) and archives.
    for d in [&ours, &hudis] {
        let v = run_sh(&["verify", key, s(d), "--expect", s(&expected)]);
        assert!(
            v.status.success(),
            "Hudi's validator on {}:\n{}\n{}",
            d.display(),
            String::from_utf8_lossy(&v.stdout),
            String::from_utf8_lossy(&v.stderr)
        );
    }
    eprintln!(
        "Hudi {key} {scenario}, savepoint by {by:?}: hudi-keeper undid {undone} instants ({}) in {took_ms} ms, {removed} data files removed, {kept} kept, metadata table {mdt_action}; same as Hudi's restore; Hudi's validator reads c2's records from both",
        if v5_mor {
            "the killed write refused, then rolled back by hudi-keeper first"
        } else {
            "killed write first"
        }
    );
    let _ = std::fs::remove_dir_all(&root);
    let _ = std::fs::remove_dir_all(&gen);
    let _ = std::fs::remove_dir_all(&table);
}

#[test]
fn hudi_0_15_cow_restore_of_a_hudi_keeper_savepoint_matches_hudis_restore() {
    restore_case("0.15", "cow-nomdt-direct", SavepointBy::HudiKeeper);
}

#[test]
fn hudi_0_15_mor_restore_of_a_hudi_savepoint_matches_hudis_restore() {
    restore_case("0.15", "mor-nomdt-direct", SavepointBy::Hudi);
}

/// Table version 5 (Hudi 0.13.1, no metadata table: its Java client writes none). The MOR case is
/// in CI's set (tests/interop/README.md, "Which cases run where"), the COW case runs with
/// HUDI_KEEPER_INTEROP_FULL=1.
#[test]
fn hudi_0_13_mor_restore_of_a_hudi_keeper_savepoint_matches_hudis_restore() {
    restore_case("0.13", "mor-nomdt-direct", SavepointBy::HudiKeeper);
}

#[test]
fn hudi_0_13_cow_restore_of_a_hudi_savepoint_matches_hudis_restore() {
    if enabled_full("Hudi 0.13 COW restore of a Hudi savepoint") {
        restore_case("0.13", "cow-nomdt-direct", SavepointBy::Hudi);
    }
}

#[test]
fn hudi_1_1_cow_with_metadata_table_restore_of_a_hudi_savepoint_matches_hudis_restore() {
    restore_case("1.1", "cow-mdt-direct", SavepointBy::Hudi);
}

/// A savepoint older than the metadata table's oldest compaction: the metadata table is deleted
/// (Hudi 1.1.1 deletes it too, then builds it again within its restore); Hudi's readers list the
/// file system meanwhile, and the next Hudi writer builds it from a listing (the validator's
/// follow-up commits, after which its lists must equal the disk).
#[test]
fn hudi_1_1_cow_restore_past_the_metadata_tables_compaction_leaves_it_for_the_next_writer() {
    restore_case_with("1.1", "cow-mdt-direct", SavepointBy::Hudi, 4);
}

#[test]
fn hudi_1_1_mor_with_metadata_table_restore_of_a_hudi_keeper_savepoint_matches_hudis_restore() {
    restore_case("1.1", "mor-mdt-direct", SavepointBy::HudiKeeper);
}

#[test]
fn hudi_1_1_mor_restore_of_a_hudi_keeper_savepoint_matches_hudis_restore() {
    restore_case("1.1", "mor-nomdt-direct", SavepointBy::HudiKeeper);
}

/// Hudi 1.2 (table version 9): the main case in CI's set (tests/interop/README.md, "Which cases
/// run where"), the others with HUDI_KEEPER_INTEROP_FULL=1.
#[test]
fn hudi_1_2_mor_with_metadata_table_restore_of_a_hudi_keeper_savepoint_matches_hudis_restore() {
    restore_case("1.2", "mor-mdt-direct", SavepointBy::HudiKeeper);
}

#[test]
fn hudi_1_2_cow_with_metadata_table_restore_of_a_hudi_savepoint_matches_hudis_restore() {
    if enabled_full("Hudi 1.2 COW restore of a Hudi savepoint") {
        restore_case("1.2", "cow-mdt-direct", SavepointBy::Hudi);
    }
}

#[test]
fn hudi_1_2_cow_restore_past_the_metadata_tables_compaction_leaves_it_for_the_next_writer() {
    if enabled_full("Hudi 1.2 restore past the metadata table's compaction") {
        restore_case_with("1.2", "cow-mdt-direct", SavepointBy::Hudi, 4);
    }
}

#[test]
fn hudi_1_2_mor_restore_of_a_hudi_keeper_savepoint_matches_hudis_restore() {
    if enabled_full("Hudi 1.2 MOR restore without the metadata table") {
        restore_case("1.2", "mor-nomdt-direct", SavepointBy::HudiKeeper);
    }
}

#[test]
fn hudi_1_0_mor_with_metadata_table_restore_of_a_hudi_keeper_savepoint_matches_hudis_restore() {
    restore_case("1.0", "mor-mdt-direct", SavepointBy::HudiKeeper);
}

#[test]
fn hudi_0_15_mor_with_metadata_table_restore_of_a_hudi_savepoint_matches_hudis_restore() {
    restore_case("0.15", "mor-mdt-direct", SavepointBy::Hudi);
}

/// Hudi's `restoreToInstant(c1)` fails midway when c2 is savepointed (it undoes the newer
/// commits, then refuses c2), leaving a pending restore. hudi-keeper refuses to continue while
/// the savepoint is in the way, then, once it is deleted, finishes Hudi's restore with Hudi's
/// own plan and instant; the result matches Hudi finishing it, and Hudi reads c1's records.
#[test]
fn a_restore_hudi_left_halfway_is_finished_by_hudi_keeper_as_hudi_would() {
    if enabled() {
        restore_left_halfway("1.1");
    }
}

#[test]
fn a_restore_hudi_1_2_left_halfway_is_finished_by_hudi_keeper_as_hudi_would() {
    if enabled_full("a restore Hudi 1.2 left halfway") {
        restore_left_halfway("1.2");
    }
}

fn restore_left_halfway(key: &str) {
    let root = tables_root().join(format!("restore-halfway-{key}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&root);
    std::fs::create_dir_all(&root).expect("root");
    let gen = root.join("t");
    must(
        run_sh(&["generate", key, "cow-nomdt-direct", s(&gen)]),
        "generate",
    );
    let table = PathBuf::from(format!("{}-hudi-rollback", gen.display()));
    let scenario_json: serde_json::Value =
        serde_json::from_slice(&std::fs::read(table.join("scenario.json")).expect("scenario"))
            .expect("scenario json");
    let c1 = scenario_json["completed_instants"][0]
        .as_str()
        .expect("c1")
        .to_string();
    let c2 = scenario_json["completed_instants"][1]
        .as_str()
        .expect("c2")
        .to_string();
    must(
        run_sh(&["savepoint", key, s(&table), &c2]),
        "Hudi's savepoint",
    );
    must(run_sh(&["commit", key, s(&table)]), "commit");
    // Two copies (plans carry absolute paths, so each copy gets its own failed attempt).
    let ours = root.join("ours");
    let hudis = root.join("hudis");
    copy_table(&table, &ours);
    copy_table(&table, &hudis);
    let mut hudi_restores = Vec::new();
    for d in [&ours, &hudis] {
        let failed = run_sh(&["restore", key, s(d), &c1, "--to-instant"]);
        assert!(
            !failed.status.success(),
            "Hudi was expected to stop at the savepointed commit"
        );
        let pending: Vec<String> = std::fs::read_dir(d.join(".hoodie/timeline"))
            .expect("timeline")
            .flatten()
            .map(|e| e.file_name().to_string_lossy().into_owned())
            .filter(|n| n.ends_with(".restore.requested"))
            .collect();
        assert_eq!(pending.len(), 1, "{pending:?}");
        hudi_restores.push(pending[0].split('.').next().unwrap_or("").to_string());
    }
    // The pending restore Hudi left in our copy.
    let hudi_restore = hudi_restores[0].clone();

    let lock = ["--lock", "filesystem"];
    // The savepoint is in the way: refused, nothing changed.
    let mut args = vec!["restore", s(&ours), "--to-instant", &c1, "--yes"];
    args.extend(lock);
    let refused = run(&args);
    assert_eq!(refused.status.code(), Some(1), "{}", stdout(&refused));
    assert!(
        stderr(&refused).contains(&format!("commit {c2} is savepointed")),
        "{}",
        stderr(&refused)
    );
    for d in [&ours, &hudis] {
        let mut del = vec!["savepoint", "delete", s(d), "--instant", &c2, "--yes"];
        del.extend(lock);
        assert!(run(&del).status.success());
    }
    must(
        run_sh(&["restore", key, s(&hudis), &c1, "--to-instant"]),
        "Hudi finishing its restore",
    );
    let mut args = vec!["restore", s(&ours), "--to-instant", &c1, "--yes", "--json"];
    args.extend(lock);
    let done = run(&args);
    assert!(done.status.success(), "{}", stderr(&done));
    let v: serde_json::Value = serde_json::from_str(&stdout(&done)).expect("json");
    assert_eq!(v["restore"]["resumed"], true);
    assert_eq!(v["restore"]["restore_instant"], hudi_restore.as_str());
    let diff = run_sh(&["diff", "--restore", s(&ours), s(&hudis)]);
    assert!(
        diff.status.success(),
        "hudi-keeper finishing Hudi's restore differs from Hudi finishing it:\n{}",
        String::from_utf8_lossy(&diff.stdout)
    );
    let expected = table.join(format!("expected-records-{c1}.json"));
    for d in [&ours, &hudis] {
        let out = run_sh(&["verify", key, s(d), "--expect", s(&expected)]);
        assert!(
            out.status.success(),
            "Hudi's validator on {}:\n{}",
            d.display(),
            String::from_utf8_lossy(&out.stdout)
        );
    }
    eprintln!("Hudi {key}: restore {hudi_restore} left halfway by Hudi, finished by hudi-keeper like Hudi finishes it; Hudi reads c1's records");
    let _ = std::fs::remove_dir_all(&root);
    let _ = std::fs::remove_dir_all(&gen);
    let _ = std::fs::remove_dir_all(&table);
}
