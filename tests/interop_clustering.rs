//! hudi-keeper against real Hudi 1.2 on a failed clustering (issue #32): the harness's
//! `-clusterfail` scenarios (tests/interop/README.md) schedule a clustering with
//! `hoodie.clustering.enable.expirations=true`, write its base files and kill the JVM before the
//! commit, so the clustering instant stays inflight and its heartbeat goes stale. Hudi 1.2's own
//! lazy rollback (with `hoodie.clustering.expiration.threshold.mins=0`) rolls it back in the
//! reference copy. Here hudi-keeper must leave the clustering alone without
//! `--clustering-expirations`, roll it back with it as Hudi did (Hudi's validator, `run.sh diff`,
//! and Hudi's own reading of both rollback plans and metadata), and, like Hudi, leave a
//! clustering younger than the threshold alone.
//!
//! Run by `scripts/test` (which builds the harness and sets HUDI_KEEPER_INTEROP=1); the MOR table
//! and the threshold and missing-heartbeat cases run with HUDI_KEEPER_INTEROP_FULL=1.
//! HUDI_KEEPER_INTEROP_TABLES=<dir> reuses tables generated earlier into <dir>/1.2/.

use hudi_keeper_test_support as common;

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use common::interop::{
    copy_table, enabled, enabled_full, roll_back_like_the_harness_writers, run_sh, run_sh_command,
    scenario_json, tables_root,
};
use common::{stderr, stdout};

const VERSION: &str = "1.2";
/// Clustering expirations on, with the threshold Hudi's reference rollback had
/// (`hoodie.clustering.expiration.threshold.mins=0`).
const EXPIRATIONS_ON: &[&str] = &[
    "--clustering-expirations",
    "--clustering-expiration-threshold",
    "0s",
];
/// A clustering expiration threshold no generated table reaches (about 1.9 years, in minutes, as
/// `hoodie.clustering.expiration.threshold.mins` takes it): tables reused from an earlier run may
/// be older than Hudi's default of 60 minutes.
const FAR_THRESHOLD_MINS: u64 = 1_000_000;

/// The generated `-clusterfail` table `scenario` (and its `-hudi-rollback` reference): reused from
/// HUDI_KEEPER_INTEROP_TABLES, else made once under target/.
fn table(scenario: &str) -> PathBuf {
    // Tests of this file run in parallel; two of them must not generate the same table.
    static GENERATE: std::sync::Mutex<()> = std::sync::Mutex::new(());
    let _guard = GENERATE.lock().unwrap_or_else(|p| p.into_inner());
    let dir = tables_root().join(VERSION);
    let table = dir.join(scenario);
    let reference = dir.join(format!("{scenario}-hudi-rollback"));
    if !(table.join("scenario.json").exists() && reference.exists()) {
        let _ = std::fs::remove_dir_all(&table);
        let _ = std::fs::remove_dir_all(&reference);
        std::fs::create_dir_all(&dir).expect("mkdir");
        let out = run_sh(&[
            "generate",
            VERSION,
            scenario,
            table.to_str().expect("utf-8"),
        ]);
        assert!(
            out.status.success(),
            "Hudi {VERSION} could not generate {scenario}: {}",
            stderr(&out)
        );
    }
    table
}

/// Every file under `dir` (relative path) with its bytes.
fn tree(dir: &Path) -> BTreeMap<String, Vec<u8>> {
    let mut out = BTreeMap::new();
    let mut stack = vec![dir.to_path_buf()];
    while let Some(d) = stack.pop() {
        for e in std::fs::read_dir(&d).expect("read_dir").flatten() {
            let p = e.path();
            if p.is_dir() {
                stack.push(p);
            } else {
                let rel = p.strip_prefix(dir).expect("prefix").display().to_string();
                out.insert(rel, std::fs::read(&p).expect("read"));
            }
        }
    }
    out
}

/// `hudi-keeper inspect <table> --json` with the harness writers' heartbeat, then `extra`.
fn inspect(table: &Path, interval_ms: u64, extra: &[&str]) -> serde_json::Value {
    let interval = format!("{interval_ms}ms");
    let mut args = vec![
        "inspect",
        table.to_str().expect("utf-8"),
        "--heartbeat-interval",
        &interval,
        "--clock-skew-margin",
        "1s",
        "--json",
    ];
    args.extend_from_slice(extra);
    let out = common::run(&args);
    assert!(out.status.success(), "inspect failed: {}", stderr(&out));
    serde_json::from_str(&stdout(&out)).expect("inspect --json")
}

/// The pending instant `instant` of an inspect report: (action, state, verdict, reason).
fn pending(report: &serde_json::Value, instant: &str) -> (String, String, String, String) {
    let p = report["pending"]
        .as_array()
        .and_then(|a| a.iter().find(|p| p["requested_time"] == instant))
        .unwrap_or_else(|| panic!("{instant} is not pending: {}", report["pending"]));
    let s = |k: &str| p[k].as_str().unwrap_or_default().to_string();
    (s("action"), s("state"), s("verdict"), s("reason"))
}

/// The instants of a `rollback --json` report that were rolled back: (instant, action).
fn rolled_back(out: &std::process::Output) -> Vec<(String, String)> {
    assert!(out.status.success(), "rollback failed: {}", stderr(out));
    let report: serde_json::Value = serde_json::from_str(&stdout(out)).expect("rollback --json");
    report["rollbacks"]
        .as_array()
        .expect("rollbacks")
        .iter()
        .map(|r| {
            (
                r["instant"].as_str().unwrap_or_default().to_string(),
                r["action"].as_str().unwrap_or_default().to_string(),
            )
        })
        .collect()
}

/// A timeline file decoded by Hudi (`run.sh dump`): its Avro record as JSON.
fn dump(file: &Path) -> serde_json::Value {
    let out = run_sh(&["dump", VERSION, file.to_str().expect("utf-8")]);
    assert!(
        out.status.success(),
        "dump {}: {}",
        file.display(),
        stderr(&out)
    );
    let text = stdout(&out);
    let json = text
        .lines()
        .find(|l| !l.starts_with('#') && !l.trim().is_empty())
        .unwrap_or_else(|| panic!("no record in the dump of {}: {text}", file.display()));
    serde_json::from_str(json).expect("dump JSON")
}

/// The one rollback of `table`: its plan (`R.rollback.requested`) and its metadata
/// (`R_C.rollback`), as Hudi reads them.
fn rollback_plan_and_metadata(table: &Path) -> (serde_json::Value, serde_json::Value) {
    let timeline = table.join(".hoodie/timeline");
    let names: Vec<String> = std::fs::read_dir(&timeline)
        .expect("timeline")
        .flatten()
        .filter_map(|e| e.file_name().to_str().map(str::to_string))
        .filter(|n| !n.starts_with('.'))
        .collect();
    let requested: Vec<&String> = names
        .iter()
        .filter(|n| n.ends_with(".rollback.requested"))
        .collect();
    let completed: Vec<&String> = names
        .iter()
        .filter(|n| n.ends_with(".rollback") && n.contains('_'))
        .collect();
    assert_eq!(
        (requested.len(), completed.len()),
        (1, 1),
        "one rollback in {}: {names:?}",
        table.display()
    );
    (
        dump(&timeline.join(requested[0])),
        dump(&timeline.join(completed[0])),
    )
}

/// `v` with the table's own location taken out of every path (`file:<table>/p0/x` becomes
/// `p0/x`), every list of strings sorted, the rollback requests sorted, and the fields that
/// name the rollback itself (its time, its duration) dropped: what two rollbacks of copies of one
/// table must share.
fn comparable(v: &serde_json::Value, table: &Path) -> serde_json::Value {
    let prefix = format!("file:{}/", table.display());
    fn walk(v: &serde_json::Value, prefix: &str) -> serde_json::Value {
        use serde_json::Value;
        match v {
            Value::String(s) => Value::String(s.strip_prefix(prefix).unwrap_or(s).to_string()),
            Value::Array(a) => {
                let mut items: Vec<Value> = a.iter().map(|x| walk(x, prefix)).collect();
                items.sort_by_key(|x| x.to_string());
                Value::Array(items)
            }
            Value::Object(o) => Value::Object(
                o.iter()
                    .filter(|(k, _)| *k != "startRollbackTime" && *k != "timeTakenInMillis")
                    .map(|(k, x)| (k.clone(), walk(x, prefix)))
                    .collect(),
            ),
            other => other.clone(),
        }
    }
    walk(v, &prefix)
}

/// The whole comparison on one `-clusterfail` table: left alone without clustering expirations,
/// left alone while younger than the threshold, rolled back as Hudi 1.2 did with them.
fn rolls_back_the_clustering_as_hudi_does(scenario: &str) {
    let dir = table(scenario);
    let reference = PathBuf::from(format!("{}-hudi-rollback", dir.display()));
    let meta = scenario_json(&dir);
    assert_eq!(meta["clustering_expirations"], true, "{meta}");
    let interval = meta["heartbeat_interval_ms"].as_u64().unwrap_or(1000);
    let failed = meta["failed_instant"]
        .as_str()
        .expect("failed_instant")
        .to_string();
    let work = tempfile::tempdir().expect("tempdir");
    let ours = work.path().join("ours");
    copy_table(&dir, &ours);
    let ours = std::fs::canonicalize(&ours).expect("canonical");
    let before = tree(&ours);

    // Without clustering expirations (Hudi's default): the clustering is no failed write.
    let (action, state, verdict, reason) = pending(&inspect(&ours, interval, &[]), &failed);
    assert_eq!(
        (action.as_str(), state.as_str(), verdict.as_str()),
        ("clustering", "inflight", "not_a_candidate"),
        "{reason}"
    );
    let out = roll_back_like_the_harness_writers(&ours, interval, &[]);
    assert_eq!(rolled_back(&out), vec![], "{}", stdout(&out));
    // Younger than the threshold: left alone too.
    let far = format!("{FAR_THRESHOLD_MINS}m");
    let young = [
        "--clustering-expirations",
        "--clustering-expiration-threshold",
        far.as_str(),
    ];
    let (_, _, verdict, reason) = pending(&inspect(&ours, interval, &young), &failed);
    assert_eq!(verdict, "not_a_candidate", "{reason}");
    assert!(reason.contains("threshold"), "{reason}");
    let out = roll_back_like_the_harness_writers(&ours, interval, &young);
    assert_eq!(rolled_back(&out), vec![], "{}", stdout(&out));
    assert!(
        tree(&ours) == before,
        "hudi-keeper changed the table while leaving the clustering alone"
    );

    // With clustering expirations and Hudi's threshold of the reference (0): rolled back.
    let (_, _, verdict, reason) = pending(&inspect(&ours, interval, EXPIRATIONS_ON), &failed);
    assert_eq!(verdict, "expired", "{reason}");
    let out = roll_back_like_the_harness_writers(&ours, interval, EXPIRATIONS_ON);
    assert_eq!(
        rolled_back(&out),
        vec![(failed.clone(), "clustering".to_string())],
        "{}",
        stdout(&out)
    );
    let ours_s = ours.to_str().expect("utf-8");
    let verify = run_sh(&["verify", VERSION, ours_s]);
    assert!(
        verify.status.success(),
        "Hudi's validator failed: {}{}",
        stdout(&verify),
        stderr(&verify)
    );
    let diff = run_sh(&["diff", ours_s, reference.to_str().expect("utf-8")]);
    assert!(
        diff.status.success(),
        "differs from Hudi's rollback: {}",
        stdout(&diff)
    );

    // The plans and the metadata, as Hudi reads them: the same target (the clustering), the same
    // files deleted.
    let (our_plan, our_meta) = rollback_plan_and_metadata(&ours);
    let (hudis_plan, hudis_meta) = rollback_plan_and_metadata(&reference);
    assert_eq!(
        our_plan["instantToRollback"],
        serde_json::json!({"commitTime": failed, "action": "clustering"})
    );
    assert_eq!(
        comparable(&our_plan, &ours),
        comparable(&hudis_plan, &reference),
        "rollback plans differ"
    );
    assert_eq!(
        comparable(&our_meta, &ours),
        comparable(&hudis_meta, &reference),
        "rollback metadata differ"
    );
    assert!(
        our_meta["totalFilesDeleted"].as_u64().unwrap_or(0) > 0,
        "{our_meta}"
    );
}

/// In CI's set (tests/interop/README.md, "Which cases run where").
#[test]
fn hudi_1_2_copy_on_write_failed_clustering_rolled_back_as_hudi_does() {
    if enabled() {
        rolls_back_the_clustering_as_hudi_does("cow-mdt-direct-clusterfail");
    }
}

#[test]
fn hudi_1_2_merge_on_read_failed_clustering_rolled_back_as_hudi_does() {
    if enabled_full("Hudi 1.2 mor-mdt-direct-clusterfail") {
        rolls_back_the_clustering_as_hudi_does("mor-mdt-direct-clusterfail");
    }
}

/// Hudi 1.2's rollback with a threshold the clustering has not reached leaves it pending, as
/// hudi-keeper does (checked in [`rolls_back_the_clustering_as_hudi_does`]); and where the
/// heartbeat file is gone, Hudi 1.2 reads it as expired and rolls the clustering back, while
/// hudi-keeper leaves it alone by design (docs/compatibility.md, "Clustering expiration").
#[test]
fn hudi_1_2_threshold_and_missing_heartbeat() {
    if !enabled_full("Hudi 1.2 clustering threshold and missing heartbeat") {
        return;
    }
    let dir = table("cow-mdt-direct-clusterfail");
    let meta = scenario_json(&dir);
    let interval = meta["heartbeat_interval_ms"].as_u64().unwrap_or(1000);
    let failed = meta["failed_instant"]
        .as_str()
        .expect("failed_instant")
        .to_string();
    let work = tempfile::tempdir().expect("tempdir");
    let hudi_rollback = |table: &Path, props: &str| {
        run_sh_command(&[("INTEROP_EXTRA_PROPS".to_string(), props.to_string())])
            .args(["rollback", VERSION, table.to_str().expect("utf-8")])
            .output()
            .expect("run.sh rollback")
    };
    let pending_after = |out: &std::process::Output| -> Vec<String> {
        let report: serde_json::Value = serde_json::from_str(&stdout(out)).expect("rollback JSON");
        report["pending_after"]
            .as_array()
            .expect("pending_after")
            .iter()
            .filter_map(|p| p.as_str().map(str::to_string))
            .collect()
    };

    // A threshold not reached: Hudi leaves the clustering pending (and exits 1 for it).
    let young = work.path().join("young");
    copy_table(&dir, &young);
    let out = hudi_rollback(
        &young,
        &format!("hoodie.clustering.expiration.threshold.mins={FAR_THRESHOLD_MINS}"),
    );
    assert!(!out.status.success(), "{}", stdout(&out));
    assert_eq!(
        pending_after(&out),
        vec![format!("{failed}.clustering.INFLIGHT")],
        "{}",
        stderr(&out)
    );

    // No heartbeat file: Hudi rolls the clustering back, hudi-keeper leaves it alone.
    let bare = work.path().join("bare");
    copy_table(&dir, &bare);
    for f in [failed.clone(), format!(".{failed}.crc")] {
        let _ = std::fs::remove_file(bare.join(".hoodie/.heartbeat").join(f));
    }
    let keeper = work.path().join("bare-keeper");
    copy_table(&bare, &keeper);
    let out = hudi_rollback(&bare, "");
    assert!(out.status.success(), "{}{}", stdout(&out), stderr(&out));
    assert!(pending_after(&out).is_empty(), "{}", stdout(&out));
    let (_, _, verdict, reason) = pending(&inspect(&keeper, interval, EXPIRATIONS_ON), &failed);
    assert_eq!(verdict, "not_a_candidate", "{reason}");
    assert!(reason.contains("without heartbeat file"), "{reason}");
    let before = tree(&keeper);
    let out = roll_back_like_the_harness_writers(&keeper, interval, EXPIRATIONS_ON);
    assert_eq!(rolled_back(&out), vec![], "{}", stdout(&out));
    assert!(tree(&keeper) == before, "hudi-keeper changed the table");
}
