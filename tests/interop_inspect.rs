//! `hudi-keeper inspect --json` lists every instant exactly as Hudi's own timeline does, on
//! tables real Hudi wrote (table versions 6, 8 and 9, the last by Hudi 1.1 and 1.2; copy-on-write and merge-on-read; the
//! metadata table too), before and after Hudi's own rollback.

use hudi_keeper_test_support as common;

use std::path::{Path, PathBuf};

use common::interop::{enabled, enabled_full, generated, run_sh};
use common::{run, stderr, stdout};
use serde_json::Value;

/// A table of `version`: reused if generated before (by this suite or another).
fn table(version: &str, scenario: &str) -> PathBuf {
    generated(version, scenario)
}

fn rows(instants: &Value) -> Vec<(String, String, String, Option<String>)> {
    instants
        .as_array()
        .expect("an instants array")
        .iter()
        .map(|i| {
            (
                i["requested_time"].as_str().unwrap_or_default().to_string(),
                i["action"].as_str().unwrap_or_default().to_string(),
                i["state"].as_str().unwrap_or_default().to_string(),
                i["completion_time"].as_str().map(str::to_string),
            )
        })
        .collect()
}

fn compare(version: &str, dir: &Path) {
    let hudi = run_sh(&["timeline", version, dir.to_str().expect("utf-8")]);
    assert!(
        hudi.status.success(),
        "Hudi's timeline of {}: {}",
        dir.display(),
        stderr(&hudi)
    );
    let hudi: Value = serde_json::from_str(&stdout(&hudi)).expect("Hudi's timeline JSON");
    let ours = run(&["inspect", dir.to_str().expect("utf-8"), "--json"]);
    assert!(ours.status.success(), "{}", stderr(&ours));
    let ours: Value = serde_json::from_str(&stdout(&ours)).expect("inspect JSON");
    assert_eq!(
        ours["table"]["version"],
        hudi["table_version"],
        "table version of {}",
        dir.display()
    );
    assert_eq!(
        rows(&ours["instants"]),
        rows(&hudi["instants"]),
        "instants of {}",
        dir.display()
    );
    match (&ours["metadata_table"], &hudi["metadata_table"]) {
        (Value::Null, Value::Null) => {}
        (o, h) if !o.is_null() && !h.is_null() => assert_eq!(
            rows(&o["instants"]),
            rows(&h["instants"]),
            "metadata-table instants of {}",
            dir.display()
        ),
        (o, h) => panic!("metadata table of {}: ours {o}, Hudi's {h}", dir.display()),
    }
}

fn compare_version(version: &str) {
    compare_scenarios(
        version,
        &[
            "cow-nomdt-direct",
            "mor-mdt-direct",
            "mor-mdt-direct-mdtdone",
        ],
    );
}

fn compare_scenarios(version: &str, scenarios: &[&str]) {
    for s in scenarios {
        let dir = table(version, s);
        compare(version, &dir);
        compare(
            version,
            &PathBuf::from(format!("{}-hudi-rollback", dir.display())),
        );
    }
}

#[test]
fn inspect_lists_instants_as_hudi_0_15_does() {
    if enabled() {
        compare_version("0.15");
    }
}

/// Table version 5 (Hudi 0.13.1, whose Java client writes no metadata table); the tables of
/// `interop_rollback`'s CI set.
#[test]
fn inspect_lists_instants_as_hudi_0_13_does() {
    if enabled() {
        compare_scenarios("0.13", &["cow-nomdt-direct", "mor-nomdt-direct"]);
    }
}

#[test]
fn inspect_lists_instants_as_hudi_1_0_does() {
    if enabled() {
        compare_version("1.0");
    }
}

#[test]
fn inspect_lists_instants_as_hudi_1_1_does() {
    if enabled() {
        compare_version("1.1");
    }
}

#[test]
fn inspect_lists_instants_as_hudi_1_2_does() {
    if enabled_full("inspect against Hudi 1.2") {
        compare_version("1.2");
    }
}
