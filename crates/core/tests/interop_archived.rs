//! The archived timeline as hudi-keeper reads it, against Hudi's own archived timeline reader
//! (`run.sh archived`): one table per Hudi version, each with at least one archived rollback.
//!
//! Each table starts from the harness's `cow-nomdt-direct` table rolled back by Hudi (one
//! completed rollback); 0.15 then gets three more failed writes rolled back by Hudi (0.15 archives
//! rollbacks only once more than `hoodie.keep.max.commits` of them completed, separately from
//! the commits); then eight commits with `hoodie.keep.min.commits=2`, `hoodie.keep.max.commits=3`
//! and `hoodie.cleaner.commits.retained=1` make the archiver move most of the timeline. Tables
//! are made once under the interop tables root and reused.

use hudi_keeper_test_support as common;

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use common::interop::{
    copy_table, enabled, enabled_full, failed_checks, files_below, generated, must, run_sh,
    run_sh_command, scenario_json, tables_root,
};
use hudi_keeper_core::audit::repair::{repair, RepairOptions};
use hudi_keeper_core::audit::{audit, AuditOptions, Class};
use hudi_keeper_core::protocol::lock::{LockOptions, LockProvider};
use hudi_keeper_core::storage::StorageOptions;
use hudi_keeper_core::timeline::archived::{read_archived_timeline, ArchivedInstant};
use hudi_keeper_core::Table;
use hudi_keeper_test_support::set_mtime;
use serde_json::Value;
use std::time::Duration;

const ARCHIVE_PROPS: &str =
    "hoodie.keep.min.commits=2;hoodie.keep.max.commits=3;hoodie.cleaner.commits.retained=1";

/// The table of `version` with archived rollbacks, and Hudi's archived timeline of it (JSON).
fn archived_table(version: &str) -> (PathBuf, Value) {
    let dir = tables_root().join(version).join("archived-cow");
    let json_path = dir.with_extension("hudi-archived.json");
    if let Ok(text) = std::fs::read_to_string(&json_path) {
        if let Ok(v) = serde_json::from_str(&text) {
            return (dir, v);
        }
    }
    let base = generated(version, "cow-nomdt-direct");
    let reference = base.with_file_name("cow-nomdt-direct-hudi-rollback");
    copy_table(&reference, &dir);
    let d = dir.to_str().expect("utf-8");
    if version == "0.15" {
        for i in 2..=4 {
            let logs = tables_root()
                .join(version)
                .join(format!("archived-cow.logs/{i}"));
            must(
                run_sh(&["kill-writer", version, d, logs.to_str().expect("utf-8")]),
                "kill-writer",
            );
            // the killed writer's heartbeat must expire before Hudi rolls it back
            std::thread::sleep(std::time::Duration::from_secs(2));
            must(run_sh(&["rollback", version, d]), "Hudi's rollback");
        }
    }
    let out = run_sh_command(&[("INTEROP_EXTRA_PROPS".into(), ARCHIVE_PROPS.into())])
        .args(["commits-n", version, d, "8"])
        .output()
        .expect("run.sh commits-n");
    must(out, "8 commits with the archiver on");
    let text = must(run_sh(&["archived", version, d]), "run.sh archived");
    let v: Value = serde_json::from_str(&text).expect("run.sh archived prints JSON");
    std::fs::write(&json_path, &text).expect("write Hudi's archived timeline");
    (dir, v)
}

/// The family an action's states share (a compaction completes as a commit).
fn family(action: &str) -> &str {
    match action {
        "compaction" => "commit",
        "logcompaction" => "deltacommit",
        "clustering" => "replacecommit",
        a => a,
    }
}

fn rank(state: &str) -> u8 {
    match state {
        "requested" => 0,
        "inflight" => 1,
        "completed" => 2,
        other => panic!("state {other}"),
    }
}

/// Hudi's instants as hudi-keeper reports them: one per requested time and action family, in
/// its latest archived state (Hudi 0.15 lists every archived state file; 1.x completed instants).
fn hudis_view(hudi: &Value) -> Vec<ArchivedInstant> {
    let mut groups: BTreeMap<(String, String), Vec<&Value>> = BTreeMap::new();
    for i in hudi["instants"].as_array().expect("instants") {
        let t = i["requested_time"].as_str().expect("time").to_string();
        let a = family(i["action"].as_str().expect("action")).to_string();
        groups.entry((t, a)).or_default().push(i);
    }
    let mut out: Vec<ArchivedInstant> = groups
        .into_values()
        .map(|mut g| {
            g.sort_by_key(|i| rank(i["state"].as_str().expect("state")));
            let latest = g[g.len() - 1];
            let mut rolled_back: Vec<String> = g
                .iter()
                .filter_map(|i| i["rolled_back"].as_array())
                .flatten()
                .map(|t| t.as_str().expect("instant").to_string())
                .collect();
            rolled_back.sort();
            rolled_back.dedup();
            ArchivedInstant {
                requested_time: latest["requested_time"].as_str().unwrap().to_string(),
                action: latest["action"].as_str().unwrap().to_string(),
                completed: latest["state"] == "completed",
                completion_time: latest["completion_time"].as_str().map(str::to_string),
                rolled_back,
            }
        })
        .collect();
    out.sort_by(|a, b| (&a.requested_time, &a.action).cmp(&(&b.requested_time, &b.action)));
    out
}

async fn check(version: &str, expected_table_version: u64, locations: &[&str]) {
    let (dir, hudi) = archived_table(version);
    assert_eq!(hudi["table_version"], expected_table_version, "{hudi}");
    let table = Table::open(dir.to_str().unwrap(), &StorageOptions::default())
        .await
        .expect("open");
    let ours = read_archived_timeline(&table).await.expect("read");
    assert!(ours.complete, "{:?}", ours.unread);
    assert!(ours.unread.is_empty());
    assert_eq!(ours.locations, locations);
    let expected = hudis_view(&hudi);
    assert_eq!(ours.instants, expected, "{version}: ours vs Hudi's");
    // The case is only worth its cost with archived commits and an archived rollback.
    assert!(
        ours.instants
            .iter()
            .filter(|i| i.action == "commit")
            .count()
            >= 3,
        "{:?}",
        ours.instants
    );
    let rollbacks: Vec<&ArchivedInstant> = ours
        .instants
        .iter()
        .filter(|i| i.action == "rollback" && i.completed)
        .collect();
    assert!(
        !rollbacks.is_empty(),
        "no archived rollback: {:?}",
        ours.instants
    );
    let timeline = table.timeline().await.expect("active timeline");
    for r in rollbacks {
        assert_eq!(r.rolled_back.len(), 1, "{r:?}");
        let target = &r.rolled_back[0];
        assert!(target < &r.requested_time, "{r:?}");
        assert_eq!(timeline.find(target).count(), 0, "{target} still active");
        assert!(
            !ours.instants.iter().any(|i| &i.requested_time == target),
            "{target} archived"
        );
    }
    if expected_table_version >= 8 {
        assert!(ours
            .instants
            .iter()
            .all(|i| i.completed && i.completion_time.is_some()));
    }
    assert_lsm_layout(&dir, expected_table_version);
    audit_with_the_rollback_archived(version, &dir).await;
}

/// `audit` on the table whose rollback of the scenario's failed write is archived: every data
/// file committed (archived commits included), the archive read whole; a base file of the failed
/// write put back is a leftover of the archived rollback.
async fn audit_with_the_rollback_archived(version: &str, dir: &Path) {
    let work = tempfile::tempdir().expect("tempdir");
    let copy = work.path().join("t");
    copy_table(dir, &copy);
    let open = || async {
        Table::open(copy.to_str().unwrap(), &StorageOptions::default())
            .await
            .expect("open")
    };
    let clean = audit(&open().await, &AuditOptions::default())
        .await
        .expect("audit");
    assert!(clean.archive.complete, "{version}: {:?}", clean.archive);
    assert!(
        clean.count(Class::Committed).files > 0,
        "{version}: {clean:#?}"
    );
    for c in [
        Class::Pending,
        Class::RollbackLeftover,
        Class::Orphan,
        Class::Unknown,
    ] {
        assert_eq!(clean.count(c).files, 0, "{version} {c:?}: {clean:#?}");
    }

    let failed_table = generated(version, "cow-nomdt-direct");
    let failed = scenario_json(&failed_table)["failed_instant"]
        .as_str()
        .expect("failed instant")
        .to_string();
    // A base file of the failed write in a file group the table no longer has (the failed
    // write's new keys): nothing newer hides it from Hudi's reader.
    let present = files_below(&copy);
    let file = files_below(&failed_table)
        .into_iter()
        .filter(|p| !p.starts_with(".hoodie") && p.ends_with(&format!("_{failed}.parquet")))
        .find(|p| {
            let name = p.rsplit('/').next().unwrap_or(p);
            let group = name.split('_').next().unwrap_or(name);
            !present.iter().any(|q| q.contains(group))
        })
        .expect("a base file of the failed write in a file group of its own");
    // The committed records: those of the newest commit's expected records.
    let expected = files_below(&copy)
        .into_iter()
        .filter(|p| p.starts_with("expected-records-") && p.ends_with(".json"))
        .max()
        .expect("expected records of the last commit");
    let expected = copy.join(expected);
    let verify = || {
        let out = run_sh(&[
            "verify",
            version,
            copy.to_str().expect("utf-8"),
            "--expect",
            expected.to_str().expect("utf-8"),
        ]);
        failed_checks(&String::from_utf8_lossy(&out.stdout))
    };
    // Hudi's validator on the table as it is: its `no_uncommitted_data_files` takes files of
    // archived commits that the cleaner kept (1.0.1's kept every version here) for uncommitted,
    // so the repair is judged against this baseline.
    let baseline = verify();
    assert!(
        !baseline.contains(&"records_equal_expected".to_string()),
        "{version}: {baseline:?}"
    );

    std::fs::copy(failed_table.join(&file), copy.join(&file)).expect("put the file back");
    // Written two hours ago (a zombie's, or one the rollback's markers missed).
    set_mtime(
        &copy.join(&file),
        std::time::SystemTime::now() - Duration::from_secs(7200),
    );
    // With the rollback archived, Hudi's reader returns the failed write's rows.
    let planted_checks = verify();
    assert!(
        planted_checks.contains(&"records_equal_expected".to_string()),
        "{version}: Hudi's reader should see the leftover's rows: {planted_checks:?}"
    );
    let planted = audit(&open().await, &AuditOptions::default())
        .await
        .expect("audit");
    assert_eq!(
        planted.count(Class::RollbackLeftover).files,
        1,
        "{version}: {planted:#?}"
    );
    let example = &planted.examples[&Class::RollbackLeftover][0];
    assert_eq!(example.path, file);
    assert!(
        !table_has_instant(&open().await, &failed).await,
        "{failed} should be archived away"
    );
    eprintln!(
        "Hudi {version}: a file of {failed}, whose rollback is archived: {}",
        example.reason
    );

    // The repair removes it, and Hudi's reader returns exactly the committed rows again.
    let options = RepairOptions {
        older_than: Duration::from_secs(3600),
        lock: LockOptions {
            provider: LockProvider::filesystem_default(),
            ..LockOptions::none()
        },
        dry_run: false,
        quarantine: None,
        metadata_table_first: false,
    };
    let repaired = repair(&open().await, &options, &AuditOptions::default())
        .await
        .expect("repair");
    let removed: Vec<String> = repaired.removed.iter().map(|r| r.path.clone()).collect();
    assert_eq!(
        removed,
        vec![file.clone()],
        "{version}: kept {:?}",
        repaired.kept
    );
    assert_eq!(
        verify(),
        baseline,
        "{version}: Hudi's validator after the repair"
    );
}

async fn table_has_instant(table: &Table, instant: &str) -> bool {
    table
        .timeline()
        .await
        .expect("timeline")
        .find(instant)
        .count()
        > 0
}

/// What real Hudi wrote there: the files of the archive folder.
fn assert_lsm_layout(dir: &Path, version: u64) {
    let names = |p: PathBuf| -> Vec<String> {
        std::fs::read_dir(p)
            .map(|d| {
                d.map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
                    .filter(|n| !n.ends_with(".crc"))
                    .collect()
            })
            .unwrap_or_default()
    };
    if version == 6 {
        let files = names(dir.join(".hoodie/archived"));
        assert!(
            !files.is_empty() && files.iter().all(|n| n.starts_with(".commits_.archive.")),
            "{files:?}"
        );
    } else {
        let files = names(dir.join(".hoodie/timeline/history"));
        assert!(files.iter().any(|n| n == "_version_"), "{files:?}");
        assert!(
            files.iter().any(|n| n.starts_with("manifest_")),
            "{files:?}"
        );
        assert!(files.iter().any(|n| n.ends_with("_0.parquet")), "{files:?}");
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn hudi_015_archived_timeline_v6_is_read_as_hudi_reads_it() {
    if !enabled() {
        return;
    }
    check("0.15", 6, &[".hoodie/archived"]).await;
}

#[tokio::test(flavor = "multi_thread")]
async fn hudi_10_archived_timeline_v8_is_read_as_hudi_reads_it() {
    if !enabled() {
        return;
    }
    check("1.0", 8, &[".hoodie/archived", ".hoodie/timeline/history"]).await;
}

#[tokio::test(flavor = "multi_thread")]
async fn hudi_11_archived_timeline_v9_is_read_as_hudi_reads_it() {
    if !enabled() {
        return;
    }
    check("1.1", 9, &[".hoodie/archived", ".hoodie/timeline/history"]).await;
}

#[tokio::test(flavor = "multi_thread")]
async fn hudi_12_archived_timeline_v9_is_read_as_hudi_reads_it() {
    if !enabled_full("Hudi 1.2's archived timeline") {
        return;
    }
    check("1.2", 9, &[".hoodie/archived", ".hoodie/timeline/history"]).await;
}
