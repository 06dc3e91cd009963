//! Savepoints Hudi writes, as hudi-keeper reads and deletes them (issue #8, first part): Hudi
//! savepoints a commit, `savepoint list` shows exactly what it keeps, `savepoint delete` removes it,
//! and Hudi's timeline loader and validator (follow-up writes, clean, archival) accept the table.

use hudi_keeper_test_support as common;

use common::interop::{enabled, enabled_full, run_sh, tables_root};
use common::{run, stderr, stdout};

fn savepoint_round_trip(key: &str, scenario: &str) {
    if !enabled() {
        return;
    }
    let dir = tables_root().join(format!("savepoint-{key}-{scenario}-{}", std::process::id()));
    let reference = std::path::PathBuf::from(format!("{}-hudi-rollback", dir.display()));
    let _ = std::fs::remove_dir_all(&dir);
    let _ = std::fs::remove_dir_all(&reference);
    let out = run_sh(&["generate", key, scenario, dir.to_str().expect("utf-8")]);
    assert!(
        out.status.success(),
        "generate: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    // The reference copy: Hudi rolled its failed write back; a clean table.
    let table = reference.to_str().expect("utf-8");
    let scenario_json: serde_json::Value =
        serde_json::from_slice(&std::fs::read(reference.join("scenario.json")).unwrap()).unwrap();
    let t = scenario_json["completed_instants"][1]
        .as_str()
        .unwrap()
        .to_string();

    let sp = run_sh(&["savepoint", key, table, &t]);
    assert!(
        sp.status.success(),
        "Hudi's savepoint: {}",
        String::from_utf8_lossy(&sp.stderr)
    );

    let listed = run(&["savepoint", "list", table, "--json"]);
    assert!(listed.status.success(), "{}", stderr(&listed));
    let v: serde_json::Value = serde_json::from_str(&stdout(&listed)).unwrap();
    let sps = v["savepoints"].as_array().unwrap();
    assert_eq!(sps.len(), 1, "{v}");
    assert_eq!(sps[0]["instant"], t.as_str());
    let meta = &sps[0]["metadata"];
    assert_eq!(meta["savepointed_by"], "interop");
    assert_eq!(meta["comments"], "harness");
    let now_ms = chrono::Utc::now().timestamp_millis();
    let at = meta["savepointed_at"].as_i64().unwrap();
    assert!(
        now_ms - at < 10 * 60 * 1000 && at <= now_ms,
        "savepointed_at {at} is not epoch ms"
    );
    let mut files = 0;
    for (partition, names) in meta["partition_metadata"].as_object().unwrap() {
        for name in names.as_array().unwrap() {
            let f = reference.join(partition).join(name.as_str().unwrap());
            assert!(
                f.exists(),
                "the savepoint keeps {}, which is not there",
                f.display()
            );
            files += 1;
        }
    }
    assert!(files > 0, "{v}");

    let del = run(&[
        "savepoint",
        "delete",
        table,
        "--instant",
        &t,
        "--lock",
        "filesystem",
        "--yes",
    ]);
    assert!(del.status.success(), "{}", stderr(&del));
    let again = run(&[
        "savepoint",
        "delete",
        table,
        "--instant",
        &t,
        "--lock",
        "filesystem",
        "--yes",
    ]);
    assert_eq!(
        again.status.code(),
        Some(1),
        "a second delete finds nothing"
    );

    let timeline = run_sh(&["timeline", key, table]);
    assert!(
        timeline.status.success(),
        "{}",
        String::from_utf8_lossy(&timeline.stderr)
    );
    let tl = String::from_utf8_lossy(&timeline.stdout);
    assert!(
        !tl.contains("savepoint"),
        "Hudi still sees a savepoint:\n{tl}"
    );
    let verify = run_sh(&["verify", key, table]);
    assert!(
        verify.status.success(),
        "Hudi's validator after the delete:\n{}",
        String::from_utf8_lossy(&verify.stdout)
    );
    eprintln!("Hudi {key} {scenario}: savepoint of {t} keeps {files} files; listed and deleted by hudi-keeper; Hudi's validator passes");
    let _ = std::fs::remove_dir_all(&dir);
    let _ = std::fs::remove_dir_all(&reference);
}

#[test]
fn a_hudi_0_15_savepoint_is_listed_and_deleted() {
    savepoint_round_trip("0.15", "mor-nomdt-direct");
}

#[test]
fn a_hudi_1_1_savepoint_is_listed_and_deleted() {
    savepoint_round_trip("1.1", "cow-mdt-direct");
}

#[test]
fn a_hudi_1_2_savepoint_is_listed_and_deleted() {
    if enabled_full("savepoints of Hudi 1.2") {
        savepoint_round_trip("1.2", "cow-mdt-direct");
    }
}
