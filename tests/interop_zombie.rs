//! A zombie writer with real Hudi (issue #33, "Proof with real Hudi"): a Hudi writer (the
//! harness's `writer`: LAZY, heartbeats of 1 s with 2 tolerable misses, the file-system lock)
//! is held at its first data-file create (`INTEROP_PAUSE_CREATES`: its instant inflight, the
//! file's marker written, the file not yet) and stopped with SIGSTOP. Once its heartbeat expired,
//! `hudi-keeper rollback` rolls the write back. Released and resumed with SIGCONT, the writer
//! creates the data files of the rolled-back instant and then fails its commit (Hudi finds the
//! instant's inflight file gone); nothing of it completes on the data table. `hudi-keeper audit`
//! classifies the files it wrote as `rollback_leftover`. Eight commits with the archiver on then
//! take the rollback off the active timeline: Hudi's validator reads the zombie's rows as the
//! table's (`records_equal_expected`); `hudi-keeper audit --repair` removes exactly the zombie's
//! files (their modification times set two hours back, past `--older-than 1h`, the smallest
//! floor the repair accepts) and Hudi's validator passes.
//!
//! The table: the harness's `cow-nomdt-direct` rolled back by Hudi (three commits, one rollback),
//! without the metadata table; the writer inserts three new keys into new file groups
//! (`hoodie.parquet.small.file.limit=0`), one in each of `p0`–`p2`, so nothing newer hides them
//! once the rollback is archived.
//!
//! With the metadata table (`cow-mdt-direct`, Hudi 1.1): the zombie's commit writes the metadata
//! table before it fails, so its deltacommit there completes after the rollback; once the
//! rollback is archived Hudi's reader returns the zombie's rows too, and the metadata table lists
//! its files. That case stops before the repair (see tests/interop/README.md, "A zombie writer").
//!
//! Run by `scripts/test` (HUDI_KEEPER_INTEROP=1): Hudi 1.1 without the metadata table in CI;
//! with HUDI_KEEPER_INTEROP_FULL=1 (`scripts/interop-full`), the same with Hudi 1.2 and with
//! Hudi 0.15 (which archives rollbacks only once more than `hoodie.keep.max.commits` of them
//! completed: two more killed writers are rolled back first), and the metadata-table case.

use hudi_keeper_test_support as common;

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant, SystemTime};

use common::interop::{
    copy_table, enabled, enabled_full, failed_checks, files_below, generated, must,
    roll_back_like_the_harness_writers, run_sh, run_sh_command, verdict_of,
};
use common::{set_mtime, stderr, stdout};
use serde_json::Value;

/// The archiver's settings of `interop_archived`: it keeps 2 to 3 commits on the active timeline.
const ARCHIVE_PROPS: &str =
    "hoodie.keep.min.commits=2;hoodie.keep.max.commits=3;hoodie.cleaner.commits.retained=1";

/// One case at a time: each stops a writer against 1 s heartbeats, and the machine has two cores.
static SERIAL: std::sync::Mutex<()> = std::sync::Mutex::new(());

/// The held JVM is killed whatever happens: a stopped writer must not outlive the test.
struct Kill(i32);

impl Drop for Kill {
    fn drop(&mut self) {
        let _ = signal(self.0, "KILL");
    }
}

fn signal(pid: i32, sig: &str) -> bool {
    Command::new("kill")
        .args([&format!("-{sig}"), &pid.to_string()])
        .stderr(Stdio::null())
        .status()
        .map(|s| s.success())
        .unwrap_or(false)
}

/// The timeline folder of a table of this Hudi version.
fn timeline_dir(table: &Path, version: &str) -> PathBuf {
    if version == "0.15" {
        table.join(".hoodie")
    } else {
        table.join(".hoodie/timeline")
    }
}

/// The names of the timeline files of `instant` (requested time), `.crc` side files left out.
fn timeline_files_of(table: &Path, version: &str, instant: &str) -> Vec<String> {
    let mut out: Vec<String> = std::fs::read_dir(timeline_dir(table, version))
        .expect("read the timeline")
        .flatten()
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .filter(|n| n.starts_with(instant) && !n.ends_with(".crc"))
        .collect();
    out.sort();
    out
}

/// The data files (outside `.hoodie/`, no `.crc`) of `instant`, relative to the table.
fn data_files_of(table: &Path, instant: &str) -> Vec<String> {
    files_below(table)
        .into_iter()
        .filter(|p| !p.starts_with(".hoodie") && !p.ends_with(".crc"))
        .filter(|p| p.ends_with(&format!("_{instant}.parquet")))
        .collect()
}

/// Waits until `instant`'s heartbeat expired, then `hudi-keeper rollback` rolls back exactly it.
/// Returns the rollback instant.
fn roll_back_once_expired(table: &Path, instant: &str) -> String {
    let start = Instant::now();
    loop {
        let v = verdict_of(table, instant);
        if v == "expired" {
            break;
        }
        assert!(
            start.elapsed() < Duration::from_secs(60),
            "the heartbeat of {instant} never expired (verdict {v})"
        );
        std::thread::sleep(Duration::from_millis(300));
    }
    let out = roll_back_like_the_harness_writers(table, 1000, &[]);
    assert!(out.status.success(), "rollback: {}", stderr(&out));
    let report: Value = serde_json::from_str(&stdout(&out)).expect("rollback --json");
    let done = report["rollbacks"].as_array().expect("rollbacks");
    assert_eq!(done.len(), 1, "{report:#}");
    assert_eq!(done[0]["instant"], instant, "{report:#}");
    done[0]["rollback_instant"]
        .as_str()
        .expect("rollback instant")
        .to_string()
}

fn audit(table: &Path) -> Value {
    let out = common::run(&["audit", table.to_str().expect("utf-8"), "--json"]);
    assert!(out.status.success(), "audit: {}", stderr(&out));
    serde_json::from_str(&stdout(&out)).expect("audit --json")
}

fn class_files(report: &Value, class: &str) -> u64 {
    report["classes"][class]["files"]
        .as_u64()
        .unwrap_or(u64::MAX)
}

/// The audit finds exactly `files` as `rollback_leftover`, one per partition, and nothing else
/// that is not committed.
fn assert_leftovers(report: &Value, files: &[String], what: &str) {
    assert_eq!(
        class_files(report, "rollback_leftover"),
        files.len() as u64,
        "{what}: {report:#}"
    );
    for c in ["pending", "orphan", "unknown"] {
        assert_eq!(class_files(report, c), 0, "{what}, {c}: {report:#}");
    }
    let mut examples: Vec<String> = report["examples"]["rollback_leftover"]
        .as_array()
        .expect("leftover examples")
        .iter()
        .map(|e| e["path"].as_str().expect("path").to_string())
        .collect();
    examples.sort();
    assert_eq!(examples, files, "{what}");
    for f in files {
        let partition = f.rsplit_once('/').map(|(p, _)| p).unwrap_or_default();
        assert_eq!(
            report["partitions"][partition]["rollback_leftover"]["files"], 1,
            "{what}: {report:#}"
        );
    }
}

/// What the zombie left: its instant, the rollback of it, and the data files it wrote after the
/// rollback.
struct Zombie {
    instant: String,
    rollback: String,
    files: Vec<String>,
}

/// The writer held, stopped, rolled back by hudi-keeper, released and resumed (see the module
/// documentation) on `table`.
fn make_zombie(version: &str, table: &Path, work: &Path) -> Zombie {
    let go = work.join("go");
    let paused = work.join("go.paused");
    let (out_path, err_path) = (work.join("writer.stdout"), work.join("writer.stderr"));
    let mut child = run_sh_command(&[
        ("INTEROP_PAUSE_CREATES".into(), go.display().to_string()),
        (
            "INTEROP_EXTRA_PROPS".into(),
            "hoodie.parquet.small.file.limit=0".into(),
        ),
    ])
    .args(["writer", version, table.to_str().expect("utf-8"), "1", "1"])
    .stdin(Stdio::null())
    .stdout(std::fs::File::create(&out_path).expect("writer stdout"))
    .stderr(std::fs::File::create(&err_path).expect("writer stderr"))
    .spawn()
    .expect("run.sh writer");
    let outputs = || {
        format!(
            "{}\n{}",
            std::fs::read_to_string(&out_path).unwrap_or_default(),
            std::fs::read_to_string(&err_path).unwrap_or_default()
        )
    };
    let start = Instant::now();
    let line = loop {
        if let Ok(l) = std::fs::read_to_string(&paused) {
            break l;
        }
        if let Ok(Some(status)) = child.try_wait() {
            panic!(
                "the writer ended ({status}) before it created a data file: {}",
                outputs()
            );
        }
        assert!(
            start.elapsed() < Duration::from_secs(300),
            "the writer never reached a data-file create: {}",
            outputs()
        );
        std::thread::sleep(Duration::from_millis(100));
    };
    let pid: i32 = line
        .split_whitespace()
        .find_map(|w| w.strip_prefix("pid="))
        .and_then(|p| p.parse().ok())
        .unwrap_or_else(|| panic!("no pid in {line:?}"));
    let _jvm = Kill(pid);
    assert!(signal(pid, "STOP"), "SIGSTOP {pid}");
    let held = line
        .split_whitespace()
        .find_map(|w| w.strip_prefix("path="))
        .map(PathBuf::from)
        .unwrap_or_else(|| panic!("no path in {line:?}"));
    let instant = held
        .file_name()
        .and_then(|n| n.to_str())
        .and_then(|n| n.strip_suffix(".parquet"))
        .and_then(|n| n.rsplit('_').next())
        .unwrap_or_else(|| panic!("not a base file of an instant: {}", held.display()))
        .to_string();
    // Stopped mid-write: the instant inflight, no data file of it yet.
    assert!(
        timeline_files_of(table, version, &instant)
            .iter()
            .any(|n| n.ends_with(".inflight")),
        "{:?}",
        timeline_files_of(table, version, &instant)
    );
    assert!(
        !held.exists(),
        "{} exists before its create",
        held.display()
    );
    assert!(data_files_of(table, &instant).is_empty());

    let rollback = roll_back_once_expired(table, &instant);
    assert!(timeline_files_of(table, version, &instant).is_empty());
    assert!(data_files_of(table, &instant).is_empty());

    // Released and resumed: the zombie.
    std::fs::write(&go, b"").expect("the release file");
    assert!(signal(pid, "CONT"), "SIGCONT {pid}");
    let start = Instant::now();
    let status = loop {
        if let Some(s) = child.try_wait().expect("wait for the writer") {
            break s;
        }
        assert!(
            start.elapsed() < Duration::from_secs(300),
            "the resumed writer never ended: {}",
            outputs()
        );
        std::thread::sleep(Duration::from_millis(200));
    };
    let said = std::fs::read_to_string(&out_path).unwrap_or_default();
    // What Hudi's writer did: its commit failed, because the rollback took the instant's
    // inflight file away (ActiveTimelineV2.transitionStateToComplete on 1.x).
    assert!(status.success(), "{}", outputs());
    assert!(
        said.contains(&format!("FAILED {instant} "))
            && said.contains(&format!("{instant}.inflight does not exist")),
        "the zombie's commit did not fail as seen before: {}",
        outputs()
    );
    assert!(!said.contains("COMMITTED "), "{}", outputs());
    // Nothing of it completed: no timeline file of the instant.
    assert_eq!(
        timeline_files_of(table, version, &instant),
        Vec::<String>::new()
    );
    let files = data_files_of(table, &instant);
    assert_eq!(
        files.len(),
        3,
        "one new file group per partition p0-p2: {files:?}"
    );
    eprintln!(
        "Hudi {version}: the zombie of {instant} (rolled back by {rollback}) wrote {files:?}; its writer said: {}",
        said.lines()
            .filter(|l| l.starts_with("FAILED"))
            .collect::<Vec<_>>()
            .join(" ")
    );
    Zombie {
        instant,
        rollback,
        files,
    }
}

/// Hudi 0.15 archives rollbacks only once more than `hoodie.keep.max.commits` (3) of them
/// completed: two more failed writes, killed and rolled back by hudi-keeper, make four.
fn more_rollbacks(version: &str, table: &Path, work: &Path) {
    for i in 0..2 {
        let logs = work.join(format!("killed-{i}"));
        let failed = must(
            run_sh(&[
                "kill-writer",
                version,
                table.to_str().expect("utf-8"),
                logs.to_str().expect("utf-8"),
            ]),
            "kill-writer",
        );
        roll_back_once_expired(table, failed.trim());
    }
}

/// Hudi's validator (`run.sh verify`) on `table` against `expected`: the report as JSON.
fn verify(version: &str, table: &Path, expected: &Path) -> Value {
    let out = run_sh(&[
        "verify",
        version,
        table.to_str().expect("utf-8"),
        "--expect",
        expected.to_str().expect("utf-8"),
    ]);
    serde_json::from_str(&stdout(&out))
        .unwrap_or_else(|_| panic!("verify printed no report: {}{}", stdout(&out), stderr(&out)))
}

fn check_detail(report: &Value, check: &str) -> String {
    report["checks"]
        .as_array()
        .and_then(|cs| cs.iter().find(|c| c["check"] == check))
        .map(|c| c["detail"].to_string())
        .unwrap_or_default()
}

/// A zombie on a copy of Hudi's rollback of `scenario`, found by the audit, then the rollback
/// archived (the audit finds the zombie's files through the archived rollback). Returns the
/// zombie and the expected records of the newest commit.
fn zombie_with_its_rollback_archived(
    version: &str,
    scenario: &str,
    table: &Path,
    work: &Path,
) -> (Zombie, PathBuf) {
    let source = generated(version, scenario).with_file_name(format!("{scenario}-hudi-rollback"));
    copy_table(&source, table);
    let z = make_zombie(version, table, work);

    let report = audit(table);
    assert_leftovers(
        &report,
        &z.files,
        &format!("Hudi {version}, rollback active"),
    );
    assert!(class_files(&report, "committed") > 0, "{report:#}");
    if scenario.contains("-mdt-") {
        // The zombie's commit wrote the metadata table before it found its instant gone: its
        // deltacommit there completed, after the rollback (Hudi 1.1.1; see the module doc).
        let mdt = table.join(".hoodie/metadata/.hoodie/timeline");
        let completed: Vec<String> = std::fs::read_dir(&mdt)
            .expect("the metadata table's timeline")
            .flatten()
            .map(|e| e.file_name().to_string_lossy().into_owned())
            .filter(|n| n.starts_with(&format!("{}_", z.instant)) && n.ends_with(".deltacommit"))
            .collect();
        assert_eq!(
            completed.len(),
            1,
            "no completed deltacommit {} in {}",
            z.instant,
            mdt.display()
        );
    }

    // The archiver takes the rollback away.
    if version == "0.15" {
        more_rollbacks(version, table, work);
    }
    let out = run_sh_command(&[("INTEROP_EXTRA_PROPS".into(), ARCHIVE_PROPS.into())])
        .args(["commits-n", version, table.to_str().expect("utf-8"), "8"])
        .output()
        .expect("run.sh commits-n");
    must(out, "8 commits with the archiver on");
    assert_eq!(
        timeline_files_of(table, version, &z.rollback),
        Vec::<String>::new(),
        "the rollback {} should be archived",
        z.rollback
    );
    let report = audit(table);
    assert_eq!(report["archive"]["complete"], true, "{report:#}");
    assert_leftovers(
        &report,
        &z.files,
        &format!("Hudi {version}, rollback archived"),
    );
    assert_eq!(data_files_of(table, &z.instant), z.files);

    // The committed records: those of the newest commit's expected records.
    let expected = files_below(table)
        .into_iter()
        .filter(|p| p.starts_with("expected-records-") && p.ends_with(".json"))
        .max()
        .map(|p| table.join(p))
        .expect("expected records of the last commit");
    (z, expected)
}

/// Hudi's validator reads the zombie's three rows as the table's.
fn assert_zombie_rows_read(version: &str, report: &Value) {
    let failed = failed_checks(&report.to_string());
    assert!(
        failed.contains(&"records_equal_expected".to_string()),
        "Hudi {version} should read the zombie's rows: {failed:?}"
    );
    let detail = check_detail(report, "records_equal_expected");
    for i in 0..3 {
        assert!(
            detail.contains(&format!("unexpected record w1c01r{i}")),
            "{detail}"
        );
    }
}

fn zombie_case(version: &str) {
    let _serial = SERIAL.lock().unwrap_or_else(|p| p.into_inner());
    let started = Instant::now();
    let work = tempfile::tempdir().expect("tempdir");
    let table = work.path().join("t");
    let (z, expected) =
        zombie_with_its_rollback_archived(version, "cow-nomdt-direct", &table, work.path());

    // Written two hours ago, as far as the repair's age floor can tell.
    let two_hours_ago = SystemTime::now() - Duration::from_secs(7200);
    for f in &z.files {
        set_mtime(&table.join(f), two_hours_ago);
    }
    // Hudi's validator on a copy left as it is, and the repair (then the validator) on the
    // table, at the same time.
    let unrepaired = work.path().join("unrepaired");
    copy_table(&table, &unrepaired);
    let (before, (repair, after)) = std::thread::scope(|s| {
        let before = s.spawn(|| verify(version, &unrepaired, &expected));
        let repair = common::run(&[
            "audit",
            table.to_str().expect("utf-8"),
            "--repair",
            "--older-than",
            "1h",
            "--lock",
            "filesystem",
            "--yes",
            "--json",
        ]);
        let after = verify(version, &table, &expected);
        (before.join().expect("verify thread"), (repair, after))
    });

    // Without the repair, Hudi's reader returns the zombie's rows.
    assert_zombie_rows_read(version, &before);

    assert!(
        repair.status.success(),
        "audit --repair: {}",
        stderr(&repair)
    );
    let repaired: Value = serde_json::from_str(&stdout(&repair)).expect("audit --repair --json");
    let mut removed: Vec<String> = repaired["repair"]["removed"]
        .as_array()
        .expect("removed")
        .iter()
        .map(|r| {
            assert_eq!(r["class"], "rollback_leftover", "{r}");
            r["path"].as_str().expect("path").to_string()
        })
        .collect();
    removed.sort();
    assert_eq!(removed, z.files, "{repaired:#}");
    assert_eq!(
        repaired["repair"]["kept"],
        serde_json::json!([]),
        "{repaired:#}"
    );
    assert!(data_files_of(&table, &z.instant).is_empty());

    // After it, the rows are exactly the committed ones and the validator passes.
    assert_eq!(
        failed_checks(&after.to_string()),
        Vec::<String>::new(),
        "Hudi {version}'s validator after the repair: {after:#}"
    );
    eprintln!(
        "Hudi {version}: whole case {:.1} s",
        started.elapsed().as_secs_f64()
    );
}

/// With the metadata table: the zombie's commit completes its metadata-table deltacommit after
/// the rollback, and once the rollback is archived Hudi's reader returns its rows (through the
/// metadata table's listing). The metadata table lists the zombie's files (its compaction folded
/// that deltacommit in; tests/interop/README.md, "A zombie writer"): the audit reports them as
/// listed leftovers, a disagreement; `--repair` alone keeps them (removing them would fail the
/// metadata table's readers, as an earlier repair did); `--repair --repair-metadata-table`
/// deletes the metadata table first, then removes them, and Hudi's validator, whose follow-up
/// write rebuilds the metadata table, passes.
fn zombie_with_metadata_table_case(version: &str) {
    let _serial = SERIAL.lock().unwrap_or_else(|p| p.into_inner());
    let work = tempfile::tempdir().expect("tempdir");
    let table = work.path().join("t");
    let (z, expected) =
        zombie_with_its_rollback_archived(version, "cow-mdt-direct", &table, work.path());
    let report = verify(version, &table, &expected);
    assert_zombie_rows_read(version, &report);
    // The metadata table lists them as the store has them.
    let failed = failed_checks(&report.to_string());
    assert!(
        !failed.contains(&"mdt_partitions_and_files_equal_listing".to_string()),
        "{report:#}"
    );
    let audited = audit(&table);
    assert_leftovers(&audited, &z.files, "with the metadata table");
    let mdt = &audited["metadata_table"];
    assert_eq!(mdt["checked"], true, "{mdt:#}");
    assert_eq!(
        mdt["listed_not_committed"],
        z.files.len(),
        "the metadata table lists the zombie's files: {mdt:#}"
    );

    let two_hours_ago = SystemTime::now() - Duration::from_secs(7200);
    for f in &z.files {
        set_mtime(&table.join(f), two_hours_ago);
    }
    let table_s = table.to_str().expect("utf-8");
    let repair = |extra: &[&str]| -> Value {
        let mut args = vec![
            "audit",
            table_s,
            "--repair",
            "--older-than",
            "1h",
            "--lock",
            "filesystem",
            "--yes",
            "--json",
        ];
        args.extend_from_slice(extra);
        let out = common::run(&args);
        assert!(out.status.success(), "audit --repair: {}", stderr(&out));
        serde_json::from_str(&stdout(&out)).expect("audit --repair --json")
    };
    // The files alone: kept, since the metadata table lists them.
    let kept = repair(&[]);
    assert_eq!(kept["repair"]["removed"], serde_json::json!([]), "{kept:#}");
    let reasons: Vec<&str> = kept["repair"]["kept"]
        .as_array()
        .expect("kept")
        .iter()
        .filter_map(|k| k["reason"].as_str())
        .collect();
    assert_eq!(reasons.len(), z.files.len(), "{kept:#}");
    assert!(
        reasons
            .iter()
            .all(|r| r.contains("metadata table lists it")),
        "{kept:#}"
    );
    assert_eq!(data_files_of(&table, &z.instant).len(), z.files.len());

    // With the metadata table: it goes first, then the files.
    let done = repair(&["--repair-metadata-table"]);
    assert_eq!(done["metadata_table_repair"]["deleted"], true, "{done:#}");
    assert!(!table.join(".hoodie/metadata").exists());
    let mut removed: Vec<String> = done["repair"]["removed"]
        .as_array()
        .expect("removed")
        .iter()
        .filter_map(|r| r["path"].as_str().map(str::to_string))
        .collect();
    removed.sort();
    assert_eq!(removed, z.files, "{done:#}");
    let after = verify(version, &table, &expected);
    assert_eq!(
        failed_checks(&after.to_string()),
        Vec::<String>::new(),
        "Hudi {version}'s validator after the repair: {after:#}"
    );
}

#[test]
fn hudi_1_1_zombie_writers_files_are_leftovers_and_repaired_after_the_rollback_is_archived() {
    if enabled() {
        zombie_case("1.1");
    }
}

#[test]
fn hudi_0_15_zombie_writers_files_are_leftovers_and_repaired_after_the_rollback_is_archived() {
    if enabled_full("Hudi 0.15's zombie writer") {
        zombie_case("0.15");
    }
}

#[test]
fn hudi_1_1_zombie_with_the_metadata_table_completes_its_deltacommit_there_and_is_repaired_with_it()
{
    if enabled() {
        zombie_with_metadata_table_case("1.1");
    }
}

#[test]
fn hudi_1_2_zombie_writers_files_are_leftovers_and_repaired_after_the_rollback_is_archived() {
    if enabled_full("Hudi 1.2's zombie writer") {
        zombie_case("1.2");
    }
}
