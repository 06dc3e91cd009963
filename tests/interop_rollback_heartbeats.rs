//! Hudi 1.2's rollback heartbeats with real Hudi 1.2.0 writers on both sides of a held rollback:
//!
//! - a Hudi 1.2 writer's rollback of a failed write, held mid-way (`run.sh rollback-paused`: its
//!   plan scheduled, its heartbeat beating, no data file deleted yet), is left alone by
//!   hudi-keeper, `--force` or not; once that writer is killed and its rollback heartbeat has
//!   expired, hudi-keeper resumes the same rollback, and the table ends as Hudi's own rollback
//!   leaves it;
//! - hudi-keeper's rollback, held mid-way (its first data-file delete blocked in the storage seam,
//!   its heartbeat beating), is skipped by a Hudi 1.2 writer's `rollbackFailedWrites`, with
//!   `hoodie.rollback.avoid.duplicate.plan` off and on: no second plan, exactly one completed
//!   rollback, Hudi's validator passes.
//!
//! Run by `scripts/test` (HUDI_KEEPER_INTEROP=1); both cases are in CI's set.

use hudi_keeper_test_support as common;

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Condvar, Mutex};
use std::time::{Duration, Instant};

use common::interop::{
    copy_table, enabled, generated, must, roll_back_like_the_harness_writers, run_sh,
    run_sh_command, scenario_json, verdict_of,
};
use common::{stderr, stdout};
use hudi_keeper_core::exec::rollback::{rollback, RollbackOptions, Selection};
use hudi_keeper_core::protocol::detect::LazyWritersEvidence;
use hudi_keeper_core::protocol::heartbeat::HeartbeatPolicy;
use hudi_keeper_core::protocol::lock::{LockOptions, LockProvider};
use hudi_keeper_core::storage::{Interceptor, OpKind, RelPath, StorageError};
use hudi_keeper_core::Table;

const VERSION: &str = "1.2";

/// One case at a time: each holds a rollback against 1 s heartbeats, and the machine has two cores.
static SERIAL: Mutex<()> = Mutex::new(());

/// A copy of the generated `scenario` in `work`, and its failed instant.
fn failed_table(work: &Path, scenario: &str) -> (PathBuf, String) {
    let source = generated(VERSION, scenario);
    let table = work.join(scenario);
    copy_table(&source, &table);
    let failed = scenario_json(&table)["failed_instant"]
        .as_str()
        .expect("scenario.json names the failed instant")
        .to_string();
    (table, failed)
}

/// Hudi's own rollback of the generated `scenario`.
fn reference(scenario: &str) -> PathBuf {
    let table = generated(VERSION, scenario);
    table.with_file_name(format!("{scenario}-hudi-rollback"))
}

/// Every file under `dir` with its bytes, but heartbeat files (refreshed while a rollback runs:
/// their times change, they stay empty) and Hadoop's `.crc` side files.
fn contents(dir: &Path) -> BTreeMap<String, Vec<u8>> {
    let mut out = BTreeMap::new();
    let mut stack = vec![dir.to_path_buf()];
    while let Some(d) = stack.pop() {
        for e in std::fs::read_dir(&d).expect("read_dir").flatten() {
            let p = e.path();
            let rel = p.strip_prefix(dir).expect("prefix").display().to_string();
            if p.is_dir() {
                stack.push(p);
            } else if !rel.ends_with(".crc") {
                let bytes = if rel.starts_with(".hoodie/.heartbeat/") {
                    Vec::new()
                } else {
                    std::fs::read(&p).expect("read")
                };
                out.insert(rel, bytes);
            }
        }
    }
    out
}

/// `before` and `after` hold the same files with the same bytes; otherwise the panic names `what`
/// and the paths added, removed and changed.
fn assert_unchanged(
    before: &BTreeMap<String, Vec<u8>>,
    after: &BTreeMap<String, Vec<u8>>,
    what: &str,
) {
    let added: Vec<_> = after.keys().filter(|k| !before.contains_key(*k)).collect();
    let removed: Vec<_> = before.keys().filter(|k| !after.contains_key(*k)).collect();
    let changed: Vec<_> = before
        .iter()
        .filter(|(k, v)| after.get(*k).is_some_and(|w| w != *v))
        .map(|(k, _)| k)
        .collect();
    assert!(
        added.is_empty() && removed.is_empty() && changed.is_empty(),
        "{what}: added {added:?}, removed {removed:?}, changed {changed:?}"
    );
}

/// The data-table timeline's rollback files: (instants scheduled, instants completed).
fn rollbacks(table: &Path) -> (Vec<String>, Vec<String>) {
    let mut scheduled = Vec::new();
    let mut completed = Vec::new();
    for e in std::fs::read_dir(table.join(".hoodie/timeline"))
        .expect("read the timeline")
        .flatten()
    {
        let name = e.file_name().to_string_lossy().into_owned();
        if let Some(r) = name.strip_suffix(".rollback.requested") {
            scheduled.push(r.to_string());
        } else if let Some(r_done) = name.strip_suffix(".rollback") {
            // version 9: `<R>_<completion time>.rollback`
            completed.push(r_done.split('_').next().unwrap_or_default().to_string());
        }
    }
    scheduled.sort();
    completed.sort();
    (scheduled, completed)
}

/// Hudi's validator on `table`, and the comparison with Hudi's own rollback of `scenario`.
fn assert_as_hudi_leaves_it(table: &Path, scenario: &str) {
    let t = table.to_str().expect("utf-8");
    must(run_sh(&["verify", VERSION, t]), "Hudi 1.2's validator");
    let r = reference(scenario);
    must(
        run_sh(&["diff", t, r.to_str().expect("utf-8")]),
        "the comparison with Hudi 1.2's own rollback",
    );
}

/// A Hudi 1.2 writer's rollback of the failed write, held at its first data-file delete; `go` is
/// its release file. Returns the rollback instant and the held JVM's pid.
fn hudi_rollback_held(table: &Path, go: &Path) -> (String, i32) {
    let out = must(
        run_sh(&[
            "rollback-paused",
            VERSION,
            table.to_str().expect("utf-8"),
            go.to_str().expect("utf-8"),
        ]),
        "run.sh rollback-paused",
    );
    let pid: i32 = out
        .split_whitespace()
        .find_map(|w| w.strip_prefix("pid="))
        .and_then(|p| p.parse().ok())
        .unwrap_or_else(|| panic!("no pid in {out:?}"));
    let (scheduled, completed) = rollbacks(table);
    assert_eq!(scheduled.len(), 1, "{scheduled:?}");
    assert!(completed.is_empty(), "{completed:?}");
    (scheduled[0].clone(), pid)
}

/// The same case with the JVM gone whatever happens: a held JVM must not outlive the test.
struct Kill(i32);

impl Drop for Kill {
    fn drop(&mut self) {
        let _ = std::process::Command::new("kill")
            .args(["-9", &self.0.to_string()])
            .status();
    }
}

#[test]
fn a_held_hudi_1_2_rollback_is_left_alone_while_its_heartbeat_beats_and_resumed_once_it_expired() {
    if !enabled() {
        return;
    }
    let _serial = SERIAL.lock().unwrap_or_else(|p| p.into_inner());
    let scenario = "mor-mdt-direct";
    let work = tempfile::tempdir().expect("tempdir");
    let (table, failed) = failed_table(work.path(), scenario);
    let go = work.path().join("go");
    let (r, pid) = hudi_rollback_held(&table, &go);
    let jvm = Kill(pid);
    let heartbeat = table.join(format!(".hoodie/.heartbeat/{r}"));
    assert!(heartbeat.exists(), "Hudi 1.2 beats {}", heartbeat.display());
    let before = contents(&table);

    assert_eq!(verdict_of(&table, &r), "rollback_in_progress");
    // Neither the sweep nor the named, forced rollback of the failed write touches it.
    let out = roll_back_like_the_harness_writers(&table, 1000, &[]);
    assert!(out.status.success(), "{}", stderr(&out));
    let report: serde_json::Value = serde_json::from_str(&stdout(&out)).expect("rollback --json");
    assert_eq!(report["rollbacks"], serde_json::json!([]), "{report}");
    let out = roll_back_like_the_harness_writers(&table, 1000, &["--instant", &failed, "--force"]);
    assert_eq!(out.status.code(), Some(1), "{}", stdout(&out));
    assert!(
        stderr(&out).contains("running in another process"),
        "{}",
        stderr(&out)
    );
    assert_unchanged(
        &before,
        &contents(&table),
        "hudi-keeper changed the table while Hudi's rollback ran",
    );
    assert_eq!(
        std::fs::read_to_string(format!("{}.rc", go.display())).ok(),
        None,
        "Hudi's rollback ended while held"
    );

    // The writer dies; its rollback heartbeat stops. Once it expired (1 s x 2 misses + the 1 s
    // margin), hudi-keeper resumes that rollback with its plan.
    drop(jvm);
    let died = Instant::now();
    while verdict_of(&table, &r) == "rollback_in_progress" {
        assert!(
            died.elapsed() < Duration::from_secs(30),
            "the heartbeat of {r} never expired"
        );
        std::thread::sleep(Duration::from_millis(500));
    }
    let out = roll_back_like_the_harness_writers(&table, 1000, &[]);
    assert!(out.status.success(), "{}", stderr(&out));
    let report: serde_json::Value = serde_json::from_str(&stdout(&out)).expect("rollback --json");
    let done = report["rollbacks"].as_array().expect("rollbacks");
    assert_eq!(done.len(), 1, "{report}");
    assert_eq!(done[0]["instant"], failed.as_str(), "{report}");
    assert_eq!(done[0]["rollback_instant"], r.as_str(), "{report}");
    assert_eq!(done[0]["resumed"], true, "{report}");
    assert_eq!(rollbacks(&table), (vec![r.clone()], vec![r.clone()]));
    assert!(!heartbeat.exists(), "the claimed heartbeat was deleted");
    assert_as_hudi_leaves_it(&table, scenario);
}

/// Holds every data-file delete (a path outside `.hoodie/`) until released; counts the held ones.
#[derive(Debug, Default)]
struct HoldDataDeletes {
    state: Mutex<(usize, bool)>,
    changed: Condvar,
}

impl HoldDataDeletes {
    fn wait_held(&self, limit: Duration) {
        let guard = self.state.lock().unwrap_or_else(|p| p.into_inner());
        let (guard, _) = self
            .changed
            .wait_timeout_while(guard, limit, |(held, _)| *held == 0)
            .unwrap_or_else(|p| p.into_inner());
        assert!(
            guard.0 > 0,
            "hudi-keeper's rollback never reached a data-file delete"
        );
    }

    fn release(&self) {
        self.state.lock().unwrap_or_else(|p| p.into_inner()).1 = true;
        self.changed.notify_all();
    }
}

impl Interceptor for HoldDataDeletes {
    fn before(&self, op: OpKind, path: &RelPath) -> Result<(), StorageError> {
        if op != OpKind::Delete || path.as_str().starts_with(".hoodie") {
            return Ok(());
        }
        let mut guard = self.state.lock().unwrap_or_else(|p| p.into_inner());
        guard.0 += 1;
        self.changed.notify_all();
        // (bounded: a lost release must not hang the suite)
        let (_guard, _) = self
            .changed
            .wait_timeout_while(guard, Duration::from_secs(600), |(_, released)| !*released)
            .unwrap_or_else(|p| p.into_inner());
        Ok(())
    }
}

/// hudi-keeper's rollback as the harness's writers would run it: their heartbeat (1 s, 2 misses),
/// their lock (Hudi's file-system lock), LAZY.
fn options() -> RollbackOptions {
    RollbackOptions {
        heartbeat: HeartbeatPolicy {
            interval: Duration::from_secs(1),
            tolerable_misses: 2,
            min_instant_age: Duration::from_secs(5),
            clock_skew_margin: Duration::from_secs(1),
        },
        lazy_writers: Some(LazyWritersEvidence::Assumed),
        lock: LockOptions {
            provider: LockProvider::filesystem_default(),
            timeout: Duration::from_secs(120),
            retry_interval: Duration::from_millis(100),
        },
        // one delete at a time: one blocked worker thread
        delete_concurrency: 1,
        ..Default::default()
    }
}

fn a_hudi_1_2_writer_skips_our_held_rollback(avoid_duplicate_plan: bool) {
    let _serial = SERIAL.lock().unwrap_or_else(|p| p.into_inner());
    let scenario = "cow-mdt-direct";
    let work = tempfile::tempdir().expect("tempdir");
    let (table, failed) = failed_table(work.path(), scenario);
    if scenario_json(&table)["stale_lock_file_left"] == true {
        let _ = std::fs::remove_file(table.join(".hoodie/lock"));
    }
    let hold = Arc::new(HoldDataDeletes::default());
    let rt = Arc::new(
        tokio::runtime::Builder::new_multi_thread()
            .worker_threads(4)
            .enable_all()
            .build()
            .expect("runtime"),
    );
    let ours = {
        let (rt, hold) = (rt.clone(), hold.clone());
        let uri = table.to_str().expect("utf-8").to_string();
        std::thread::spawn(move || {
            rt.block_on(async {
                let plain = Table::open(&uri, &Default::default()).await?;
                let held =
                    Table::open_storage(plain.storage().clone().with_interceptor(hold)).await?;
                rollback(&held, &Selection::AllFailed, &options(), None).await
            })
        })
    };
    hold.wait_held(Duration::from_secs(120));
    let (scheduled, completed) = rollbacks(&table);
    assert_eq!(scheduled.len(), 1, "{scheduled:?}");
    assert!(completed.is_empty(), "{completed:?}");
    let r = scheduled[0].clone();
    assert!(table.join(format!(".hoodie/.heartbeat/{r}")).exists());
    // Past the heartbeat's expiry (1 s x 2 misses): from here only a claim that keeps beating
    // keeps Hudi off.
    std::thread::sleep(Duration::from_secs(4));
    let before = contents(&table);

    // Hudi 1.2's `rollbackFailedWrites` takes our pending plan and finds its heartbeat alive.
    let out = run_sh_command(&[(
        "INTEROP_EXTRA_PROPS".to_string(),
        format!("hoodie.rollback.avoid.duplicate.plan={avoid_duplicate_plan}"),
    )])
    .args(["rollback", VERSION, table.to_str().expect("utf-8")])
    .output()
    .expect("run.sh rollback");
    let said = format!("{}{}", stdout(&out), stderr(&out));
    assert!(
        said.contains(&format!(
            "Rollback heartbeat already exists for instant {r}"
        )),
        "Hudi 1.2 did not skip our rollback {r} (exit {:?}): {said}",
        out.status.code()
    );
    // All it touched is the failed write's expired heartbeat: `rollbackFailedWrites` deletes the
    // heartbeat of each instant it was to roll back, whether its rollback ran or was skipped.
    let mut before = before;
    before.remove(&format!(".hoodie/.heartbeat/{failed}"));
    assert_unchanged(
        &before,
        &contents(&table),
        "Hudi 1.2 changed the table while our rollback ran",
    );

    hold.release();
    let done = ours
        .join()
        .expect("our rollback's thread")
        .expect("our rollback");
    assert_eq!(done.len(), 1, "{done:?}");
    assert_eq!(done[0].instant, failed);
    assert_eq!(done[0].rollback_instant, r);
    assert_eq!(rollbacks(&table), (vec![r.clone()], vec![r]));
    assert_as_hudi_leaves_it(&table, scenario);
}

#[test]
fn a_hudi_1_2_writer_skips_our_held_rollback_without_avoid_duplicate_plan() {
    if enabled() {
        a_hudi_1_2_writer_skips_our_held_rollback(false);
    }
}

#[test]
fn a_hudi_1_2_writer_skips_our_held_rollback_with_avoid_duplicate_plan() {
    if enabled() {
        a_hudi_1_2_writer_skips_our_held_rollback(true);
    }
}
