//! Partition paths as real Hudi writes them (issue #13): URL-encoded values with `:`, `%`, `/`, a
//! space, `#`, `~` and non-ASCII letters, hive-style multi-level folders (`part=<v>/hr=<h>`, with an
//! encoded `=` and `:`), and a non-partitioned table. tests/interop/README.md ("Partition layouts")
//! lists the folder names Hudi 0.15 and 1.1 write for each.
//!
//! Each case has Hudi's Java client write three commits and a SIGKILLed write, then:
//! * rollback: hudi-keeper rolls back one copy, Hudi the other; `run.sh diff` finds them equal and
//!   Hudi's validator passes on hudi-keeper's;
//! * savepoint: hudi-keeper's savepoint of c2 names the same partitions and files as Hudi's own;
//! * restore: after one more commit and another killed write, hudi-keeper and Hudi each restore a
//!   copy to c2; `run.sh diff --restore` finds them equal and Hudi's validator reads exactly c2's
//!   records from hudi-keeper's.
//!
//! One more case uploads a failed table to the S3-compatible server with the exact keys Hudi wrote;
//! hudi-keeper's rollback there leaves what Hudi's rollback left on disk.
//!
//! Run by `scripts/test` (HUDI_KEEPER_INTEROP=1, and the S3 server for the last case).
//! HUDI_KEEPER_INTEROP_TABLES=<dir> reuses tables generated earlier into <dir>/partitions/.

use hudi_keeper_test_support as common;

use std::path::{Path, PathBuf};
use std::process::Output;
use std::time::{Duration, Instant};

use common::interop::{
    copy_table, enabled, enabled_full, must, roll_back_like_the_harness_writers, run_sh,
    scenario_json, tables_root,
};
use common::{bin, run, stderr, stdout};

fn s(p: &Path) -> &str {
    p.to_str().expect("utf-8 path")
}

/// Every file under `dir` (relative, `/`-separated), without Hadoop's `.crc` side files.
fn files(dir: &Path) -> Vec<String> {
    let mut out = Vec::new();
    let mut stack = vec![dir.to_path_buf()];
    while let Some(d) = stack.pop() {
        for e in std::fs::read_dir(&d).expect("read_dir").flatten() {
            let p = e.path();
            if p.is_dir() {
                stack.push(p);
            } else if !e.file_name().to_string_lossy().ends_with(".crc") {
                let rel = p.strip_prefix(dir).expect("prefix");
                out.push(
                    rel.components()
                        .map(|c| c.as_os_str().to_str().expect("utf-8 name"))
                        .collect::<Vec<_>>()
                        .join("/"),
                );
            }
        }
    }
    out.sort();
    out
}

/// Data files (base and log files) outside `.hoodie`, at any depth.
fn data_files(dir: &Path) -> Vec<String> {
    files(dir)
        .into_iter()
        .filter(|f| !f.starts_with(".hoodie/"))
        .filter(|f| {
            let name = f.rsplit('/').next().unwrap_or_default();
            name.ends_with(".parquet") || name.contains(".log.")
        })
        .collect()
}

/// The generated table (failed write) and Hudi's rolled-back reference copy of one scenario,
/// made once per scenario (tests of this file run in parallel and share them).
fn generated(key: &str, scenario: &str) -> (PathBuf, PathBuf) {
    // One lock per scenario: two tests wait for one generation, different scenarios generate
    // at the same time.
    type Locks = std::collections::HashMap<String, std::sync::Arc<std::sync::Mutex<()>>>;
    static GENERATE: std::sync::OnceLock<std::sync::Mutex<Locks>> = std::sync::OnceLock::new();
    let lock = GENERATE
        .get_or_init(Default::default)
        .lock()
        .unwrap_or_else(|p| p.into_inner())
        .entry(format!("{key}/{scenario}"))
        .or_default()
        .clone();
    let _guard = lock.lock().unwrap_or_else(|p| p.into_inner());
    let table = tables_root().join("partitions").join(key).join(scenario);
    let reference = PathBuf::from(format!("{}-hudi-rollback", table.display()));
    if !(table.join("scenario.json").exists() && reference.join("scenario.json").exists()) {
        let _ = std::fs::remove_dir_all(&table);
        let _ = std::fs::remove_dir_all(&reference);
        std::fs::create_dir_all(table.parent().expect("parent")).expect("mkdir");
        let t0 = Instant::now();
        must(run_sh(&["generate", key, scenario, s(&table)]), "generate");
        eprintln!(
            "Hudi {key} {scenario}: generated in {:.1} s",
            t0.elapsed().as_secs_f64()
        );
    }
    (table, reference)
}

/// Partition folders of a table (folders holding `.hoodie_partition_metadata`; "" is the base path).
fn partitions(dir: &Path) -> Vec<String> {
    files(dir)
        .into_iter()
        .filter(|f| !f.starts_with(".hoodie/"))
        .filter_map(|f| {
            f.strip_suffix(".hoodie_partition_metadata")
                .map(|p| p.trim_end_matches('/').to_string())
        })
        .collect()
}

fn roll_back_with_hudi_keeper(table: &Path, extra: &[String]) -> Output {
    let extra: Vec<&str> = extra.iter().map(String::as_str).collect();
    roll_back_like_the_harness_writers(table, 1000, &extra)
}

fn rolled_back(out: &Output) -> Vec<String> {
    let report: serde_json::Value = serde_json::from_str(&stdout(out)).expect("rollback --json");
    report["rollbacks"]
        .as_array()
        .map(|a| {
            a.iter()
                .filter_map(|r| r["instant"].as_str().map(str::to_string))
                .collect()
        })
        .unwrap_or_default()
}

/// A savepoint's partitions and files as `hudi-keeper savepoint list` reads them: partition path ->
/// sorted file names. (Hudi's own reader checks hudi-keeper's savepoints too: verify reads them and
/// requires every file they name.)
fn savepoint_files(table: &Path, instant: &str) -> std::collections::BTreeMap<String, Vec<String>> {
    let out = run(&["savepoint", "list", s(table), "--json"]);
    assert!(out.status.success(), "{}", stderr(&out));
    let v: serde_json::Value = serde_json::from_str(&stdout(&out)).expect("savepoint list --json");
    let sp = v["savepoints"]
        .as_array()
        .expect("savepoints")
        .iter()
        .find(|sp| sp["instant"] == instant)
        .unwrap_or_else(|| panic!("no savepoint of {instant} in {}: {v}", table.display()));
    let mut out = std::collections::BTreeMap::new();
    for (partition, names) in sp["metadata"]["partition_metadata"]
        .as_object()
        .expect("partition_metadata")
    {
        let mut names: Vec<String> = names
            .as_array()
            .expect("file names")
            .iter()
            .map(|n| n.as_str().expect("file name").to_string())
            .collect();
        names.sort();
        out.insert(partition.clone(), names);
    }
    out
}

fn partition_case(key: &str, scenario: &str) {
    if !enabled() {
        return;
    }
    let started = Instant::now();
    let (table, reference) = generated(key, scenario);
    let meta = scenario_json(&table);
    let failed = meta["failed_instant"].as_str().expect("failed instant");
    let c2 = meta["completed_instants"][1]
        .as_str()
        .expect("c2")
        .to_string();
    let work = tempfile::tempdir_in(table.parent().expect("parent")).expect("tempdir");
    let layout = partitions(&reference);

    // Rollback: hudi-keeper on one copy, Hudi's own on the other (made by generate).
    let t0 = Instant::now();
    let ours = work.path().join("rollback");
    copy_table(&table, &ours);
    let out = roll_back_with_hudi_keeper(&ours, &[]);
    assert!(
        out.status.success(),
        "hudi-keeper's rollback of {key} {scenario} failed:\n{}",
        stderr(&out)
    );
    assert_eq!(rolled_back(&out), vec![failed.to_string()]);
    let rollback_ms = t0.elapsed().as_millis();
    let diff = run_sh(&["diff", s(&ours), s(&reference)]);
    assert!(
        diff.status.success(),
        "hudi-keeper's rollback differs from Hudi's:\n{}",
        stdout(&diff)
    );
    let verify = run_sh(&["verify", key, s(&ours)]);
    assert!(
        verify.status.success(),
        "Hudi's validator on hudi-keeper's rollback:\n{}\n{}",
        stdout(&verify),
        stderr(&verify)
    );
    let rollback_total = t0.elapsed();

    // Savepoint c2 of the clean table: by hudi-keeper, and by Hudi on a copy of the same table.
    let t1 = Instant::now();
    let w = work.path().join("w");
    copy_table(&reference, &w);
    let hudi_sp = work.path().join("hudi-savepoint");
    copy_table(&reference, &hudi_sp);
    must(
        run_sh(&["savepoint", key, s(&hudi_sp), &c2]),
        "Hudi's savepoint",
    );
    let out = run(&[
        "savepoint",
        "create",
        s(&w),
        "--instant",
        &c2,
        "--lock",
        "filesystem",
        "--json",
    ]);
    assert!(out.status.success(), "{}", stderr(&out));
    let ours_sp = savepoint_files(&w, &c2);
    assert_eq!(
        ours_sp,
        savepoint_files(&hudi_sp, &c2),
        "hudi-keeper's savepoint names other partitions or files than Hudi's"
    );
    assert_eq!(
        ours_sp.keys().cloned().collect::<Vec<_>>(),
        {
            let mut l = layout.clone();
            // the failed write's new partition holds no file of c2
            l.retain(|p| ours_sp.contains_key(p));
            l
        },
        "the savepoint's partitions are not the folders Hudi wrote"
    );

    // After c2: a completed commit and a killed write, then two copies restored to c2.
    must(run_sh(&["commit", key, s(&w)]), "commit");
    let killed = must(
        run_sh(&[
            "kill-writer",
            key,
            s(&w),
            s(&work.path().join("killed-logs")),
        ]),
        "kill-writer",
    )
    .trim()
    .to_string();
    // Its heartbeat must expire (harness writers beat every second, two misses tolerated).
    std::thread::sleep(Duration::from_secs(4));
    let ours_r = work.path().join("ours-restore");
    let hudis_r = work.path().join("hudis-restore");
    copy_table(&w, &ours_r);
    copy_table(&w, &hudis_r);
    let before = data_files(&ours_r);
    must(
        run_sh(&["restore", key, s(&hudis_r), &c2]),
        "Hudi's restore",
    );
    let out = run(&[
        "restore",
        s(&ours_r),
        "--savepoint",
        &c2,
        "--yes",
        "--json",
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
    ]);
    assert!(
        out.status.success(),
        "hudi-keeper's restore of {key} {scenario} failed:\n{}",
        stderr(&out)
    );
    let done: serde_json::Value = serde_json::from_str(&stdout(&out)).expect("restore --json");
    let undone: Vec<&str> = done["restore"]["undone"]
        .as_array()
        .expect("undone")
        .iter()
        .filter_map(|u| u["instant"].as_str())
        .collect();
    assert!(
        undone.contains(&killed.as_str()),
        "the killed write {killed} was not undone: {undone:?}"
    );
    let mdt = done["restore"]["metadata_table"].as_str().unwrap_or("");
    let mut diff_args = vec!["diff", "--restore"];
    if mdt == "deleted" {
        diff_args.push("--mdt-deleted");
    }
    diff_args.extend([s(&ours_r), s(&hudis_r)]);
    let diff = run_sh(&diff_args);
    assert!(
        diff.status.success(),
        "hudi-keeper's restore differs from Hudi's:\n{}",
        stdout(&diff)
    );
    let expected = ours_r.join(format!("expected-records-{c2}.json"));
    let verify = run_sh(&["verify", key, s(&ours_r), "--expect", s(&expected)]);
    assert!(
        verify.status.success(),
        "Hudi's validator on hudi-keeper's restore:\n{}\n{}",
        stdout(&verify),
        stderr(&verify)
    );
    let removed = before.iter().filter(|f| !ours_r.join(f).exists()).count();
    eprintln!(
        "Hudi {key} {scenario}: partitions {layout:?}; rollback by hudi-keeper in {rollback_ms} ms, same as Hudi's, validator passed ({:.1} s with checks); savepoint same as Hudi's; restore undid {} instants, {removed} data files removed, metadata table {mdt}, same as Hudi's, validator reads c2's records ({:.1} s); case total {:.1} s",
        rollback_total.as_secs_f64(),
        undone.len(),
        t1.elapsed().as_secs_f64(),
        started.elapsed().as_secs_f64()
    );
}

#[test]
fn hudi_0_15_cow_url_encoded_partitions_roll_back_savepoint_and_restore_as_hudi_does() {
    partition_case("0.15", "cow-nomdt-direct-urlenc");
}

#[test]
fn hudi_0_15_mor_hive_style_two_level_partitions_roll_back_savepoint_and_restore_as_hudi_does() {
    partition_case("0.15", "mor-nomdt-direct-hive");
}

#[test]
fn hudi_1_1_mor_url_encoded_partitions_with_metadata_table_roll_back_savepoint_and_restore_as_hudi_does(
) {
    partition_case("1.1", "mor-mdt-direct-urlenc");
}

#[test]
fn hudi_1_1_cow_non_partitioned_table_with_metadata_table_rolls_back_savepoints_and_restores_as_hudi_does(
) {
    partition_case("1.1", "cow-mdt-direct-nopart");
}

#[test]
fn hudi_1_2_mor_url_encoded_partitions_with_metadata_table_roll_back_savepoint_and_restore_as_hudi_does(
) {
    if enabled_full("Hudi 1.2 URL-encoded partitions") {
        partition_case("1.2", "mor-mdt-direct-urlenc");
    }
}

#[test]
fn hudi_1_2_cow_non_partitioned_table_with_metadata_table_rolls_back_savepoints_and_restores_as_hudi_does(
) {
    if enabled_full("Hudi 1.2 non-partitioned table") {
        partition_case("1.2", "cow-mdt-direct-nopart");
    }
}

/// The failed table uploaded to the S3-compatible server with the exact keys Hudi wrote
/// (`50%25~1/…`, `x%231 é日本/…`): hudi-keeper's rollback there leaves the same objects as Hudi's
/// rollback left on disk.
#[test]
fn a_rollback_on_s3_of_url_encoded_partitions_leaves_what_hudis_rollback_leaves() {
    if enabled() {
        rollback_on_s3_of_url_encoded_partitions("1.1");
    }
}

#[test]
fn a_rollback_on_s3_of_hudi_1_2_url_encoded_partitions_leaves_what_hudis_rollback_leaves() {
    if enabled_full("Hudi 1.2 URL-encoded partitions on S3") {
        rollback_on_s3_of_url_encoded_partitions("1.2");
    }
}

fn rollback_on_s3_of_url_encoded_partitions(key: &str) {
    use common::s3::{cli_options, s3_store, unique, BUCKET};
    use futures::TryStreamExt;
    use object_store::path::Path as Key;
    use object_store::{ObjectStore, ObjectStoreExt};

    let started = Instant::now();
    let scenario = "mor-mdt-direct-urlenc";
    let (table, reference) = generated(key, scenario);
    let failed = scenario_json(&table)["failed_instant"]
        .as_str()
        .expect("failed instant")
        .to_string();
    let store = s3_store();
    let prefix = unique("partitions");
    let rt = tokio::runtime::Runtime::new().expect("runtime");

    // Upload every file Hudi wrote (not Hadoop's .crc files), each under the key that is its
    // path relative to the table: Key::parse keeps `%` and every other character as they are.
    let local = files(&table);
    rt.block_on(async {
        for rel in &local {
            let k = Key::parse(format!("{prefix}/{rel}")).expect("a valid key");
            let bytes = std::fs::read(table.join(rel)).expect("read");
            store.put(&k, bytes.into()).await.expect("upload");
        }
    });
    let listed: Vec<String> = rt.block_on(async {
        let p = Key::parse(&prefix).expect("prefix");
        let mut keys: Vec<String> = store
            .list(Some(&p))
            .map_ok(|m| m.location.as_ref()[prefix.len() + 1..].to_string())
            .try_collect()
            .await
            .expect("list");
        keys.sort();
        keys
    });
    assert_eq!(
        listed, local,
        "the server does not hold the exact keys Hudi wrote"
    );
    assert!(
        listed
            .iter()
            .any(|k| k.starts_with("50%25~1/") && k.ends_with(&format!("{failed}.log.1_0-0-0"))),
        "the failed write's log file in 50%25~1 is not there: {listed:?}"
    );
    // The heartbeat's age is the upload's: wait until it is expired (1 s, two misses).
    std::thread::sleep(Duration::from_secs(4));

    let uri = format!("s3://{BUCKET}/{prefix}");
    let out = bin()
        .args([
            "rollback",
            &uri,
            "--heartbeat-interval",
            "1s",
            "--clock-skew-margin",
            "1s",
            "--yes",
            "--json",
            "--lock",
            "filesystem",
            "--lock-timeout",
            "30s",
        ])
        .args(cli_options())
        .output()
        .expect("run hudi-keeper");
    assert!(
        out.status.success(),
        "hudi-keeper's rollback on S3 failed:\n{}",
        stderr(&out)
    );
    assert_eq!(rolled_back(&out), vec![failed.clone()]);

    // Download what is left and compare it with Hudi's rollback of the same table on disk.
    let work = tempfile::tempdir_in(table.parent().expect("parent")).expect("tempdir");
    let back = work.path().join("downloaded");
    rt.block_on(async {
        let p = Key::parse(&prefix).expect("prefix");
        let metas: Vec<object_store::ObjectMeta> =
            store.list(Some(&p)).try_collect().await.expect("list");
        for m in metas {
            let rel = &m.location.as_ref()[prefix.len() + 1..];
            let bytes = store
                .get(&m.location)
                .await
                .expect("get")
                .bytes()
                .await
                .expect("body");
            let dest = back.join(rel);
            std::fs::create_dir_all(dest.parent().expect("parent")).expect("mkdir");
            std::fs::write(&dest, &bytes).expect("write");
        }
    });
    let diff = run_sh(&["diff", s(&back), s(&reference)]);
    assert!(
        diff.status.success(),
        "hudi-keeper's rollback on S3 differs from Hudi's on disk:\n{}",
        stdout(&diff)
    );
    let left = data_files(&back);
    assert_eq!(
        left,
        data_files(&reference),
        "other data files than Hudi's rollback left"
    );
    assert!(
        !left.iter().any(|f| f.contains(&failed)),
        "a data file of the failed write is left: {left:?}"
    );
    eprintln!(
        "Hudi {key} {scenario} on S3: {} objects uploaded, hudi-keeper's rollback left the data files Hudi's left ({} data files), {:.1} s",
        local.len(),
        left.len(),
        started.elapsed().as_secs_f64()
    );
}
