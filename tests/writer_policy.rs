//! The writer policy (issue #13, item 2): what a missing heartbeat file proves and what it does
//! not, end to end through the real binary on hand-made tables whose files' modification times
//! (the store's clock) say how old each write is.
//!
//! LAZY writers write their heartbeat before their requested instant, EAGER writers (Hudi's
//! default) write none: a pending write with no heartbeat file is only rolled back where the
//! operator states every writer is LAZY (heartbeat files of other writes show it is an EAGER
//! writer's), under EAGER only once a newer write started after it, and an instant's age comes
//! from the store, never from its name. No verdict rests on what one daemon remembers (issue
//! #29): a replica taking a table over, a poll interval longer than the minimum age, and a
//! state file that cannot be read all leave such a write alone.

use hudi_keeper_test_support as common;

use std::time::{Duration, SystemTime};

use common::config::DaemonConfig;
use common::daemon::Daemon;
use common::http::request;
use common::{run, stderr, stdout, TableDir};
use serde_json::Value;

const C1: &str = "20200101000000000";
const W1: &str = "20200102000000000";
const W2: &str = "20200103000000000";
const HOUR: Duration = Duration::from_secs(3600);
const TOKEN: &str = "test-token-0123456789abcdef";

/// A version-8 merge-on-read table with one completed deltacommit.
fn table() -> TableDir {
    let t = TableDir::v8_mor();
    t.touch(&[
        &format!(".hoodie/timeline/{C1}.deltacommit.requested"),
        &format!(".hoodie/timeline/{C1}.deltacommit.inflight"),
        &format!(".hoodie/timeline/{C1}_20200101000001000.deltacommit"),
        &format!("p1/base-0_0-1-2_{C1}.parquet"),
    ]);
    t
}

/// The data file a pending write `w` wrote.
fn data_file(w: &str) -> String {
    format!("p1/w{w}-0_0-1-2_{w}.parquet")
}

/// The timeline files of the pending write `w`.
fn timeline_files(w: &str) -> [String; 2] {
    [
        format!(".hoodie/timeline/{w}.deltacommit.requested"),
        format!(".hoodie/timeline/{w}.deltacommit.inflight"),
    ]
}

/// A pending write at `w`: requested and inflight, one data file and its marker.
fn add_write(t: &TableDir, w: &str) {
    let [req, inflight] = timeline_files(w);
    let data = data_file(w);
    t.touch(&[
        &req,
        &inflight,
        &data,
        &format!(".hoodie/.temp/{w}/{data}.marker.CREATE"),
    ]);
}

fn exists(t: &TableDir, w: &str) -> bool {
    t.path().join(data_file(w)).exists()
}

fn inspect(t: &TableDir, extra: &[&str]) -> Value {
    let uri = t.uri();
    let mut args = vec!["inspect", uri.as_str(), "--json"];
    args.extend_from_slice(extra);
    let out = run(&args);
    assert!(out.status.success(), "inspect failed: {}", stderr(&out));
    serde_json::from_str(&stdout(&out)).expect("one JSON document")
}

fn pending<'a>(v: &'a Value, w: &str) -> &'a Value {
    v["pending"]
        .as_array()
        .expect("pending")
        .iter()
        .find(|p| p["requested_time"] == w)
        .unwrap_or_else(|| panic!("{w} is not pending: {v:#}"))
}

/// `rollback --yes --json --lock none` with `extra`; the instants rolled back.
fn rollback(t: &TableDir, extra: &[&str]) -> Vec<String> {
    let uri = t.uri();
    let mut args = vec![
        "rollback",
        uri.as_str(),
        "--yes",
        "--json",
        "--lock",
        "none",
    ];
    args.extend_from_slice(extra);
    let out = run(&args);
    assert!(out.status.success(), "rollback failed: {}", stderr(&out));
    let v: Value = serde_json::from_str(&stdout(&out)).expect("one JSON document");
    v["rollbacks"]
        .as_array()
        .expect("rollbacks")
        .iter()
        .map(|r| r["instant"].as_str().expect("instant").to_string())
        .collect()
}

#[test]
fn a_pending_write_without_a_heartbeat_file_is_left_alone_while_no_heartbeat_was_seen_on_the_table()
{
    let t = table();
    add_write(&t, W1);
    t.age_all(HOUR);
    let v = inspect(&t, &[]);
    let p = pending(&v, W1);
    assert_eq!(p["verdict"], "no_heartbeat_unconfirmed", "{v:#}");
    assert!(
        p["reason"].as_str().unwrap().contains("EAGER"),
        "the reason says it may be an EAGER writer: {p}"
    );
    assert_eq!(v["writers"]["lazy_writers_known"], false, "{v:#}");
    assert_eq!(v["writers"]["left_alone"]["no_heartbeat_unconfirmed"], 1);
    assert_eq!(rollback(&t, &[]), Vec::<String>::new());
    assert!(
        exists(&t, W1),
        "a write that may be running was rolled back"
    );
}

#[test]
fn an_expired_heartbeat_proves_a_dead_lazy_writer_but_not_that_a_write_without_heartbeat_is_dead() {
    let t = table();
    add_write(&t, W1);
    add_write(&t, W2);
    t.touch(&[&format!(".hoodie/.heartbeat/{W1}")]);
    t.age_all(HOUR);
    let v = inspect(&t, &[]);
    assert_eq!(pending(&v, W1)["verdict"], "expired", "{v:#}");
    // A LAZY writer would have a heartbeat file: W2 is an EAGER writer's, maybe still running.
    assert_eq!(
        pending(&v, W2)["verdict"],
        "eager_writer_suspected",
        "{v:#}"
    );
    assert_eq!(v["writers"]["lazy_writers_known"], true);
    assert_eq!(v["writers"]["evidence"], "heartbeat_files_now");
    assert_eq!(v["writers"]["heartbeat_files"], 1);
    assert_eq!(v["writers"]["eager_writer_suspected"], true);
    assert_eq!(rollback(&t, &[]), vec![W1.to_string()]);
    assert!(!exists(&t, W1));
    assert!(
        exists(&t, W2),
        "a write that may be running was rolled back"
    );
    // The operator's maximum write duration, or the statement that every writer is LAZY,
    // decides it.
    assert_eq!(
        rollback(&t, &["--max-write-duration", "30m"]),
        vec![W2.to_string()]
    );
}

#[test]
fn the_operator_can_state_that_every_writer_of_the_table_is_lazy() {
    let t = table();
    add_write(&t, W1);
    t.age_all(HOUR);
    let v = inspect(&t, &["--assume-lazy-writers"]);
    assert_eq!(pending(&v, W1)["verdict"], "no_heartbeat", "{v:#}");
    assert_eq!(v["writers"]["evidence"], "assumed");
    assert_eq!(
        rollback(&t, &["--assume-lazy-writers"]),
        vec![W1.to_string()]
    );
    assert!(!exists(&t, W1));
}

#[test]
fn instant_ages_come_from_the_store_not_from_the_instant_time() {
    // Every writer is stated LAZY, and a heartbeat file a LAZY writer left for a completed
    // commit shows it too.
    let t = table();
    t.touch(&[&format!(".hoodie/.heartbeat/{C1}")]);
    t.age_all(HOUR);
    // Named six years ago, written now: it just started.
    add_write(&t, W1);
    // Named in 2099, written an hour ago: an hour old.
    let future = "20990101000000000";
    add_write(&t, future);
    let [req, inflight] = timeline_files(future);
    t.set_mtime(&[&req, &inflight], SystemTime::now() - HOUR);
    let v = inspect(&t, &["--assume-lazy-writers"]);
    let young = pending(&v, W1);
    assert_eq!(young["verdict"], "eager_writer_suspected", "{v:#}");
    assert!(
        young["instant_age_ms"].as_i64().unwrap() < 600_000,
        "{young}"
    );
    let old = pending(&v, future);
    assert_eq!(old["verdict"], "no_heartbeat", "{v:#}");
    let age = old["instant_age_ms"].as_i64().unwrap();
    assert!((3_500_000..4_000_000).contains(&age), "{old}");
    assert_eq!(
        rollback(&t, &["--assume-lazy-writers"]),
        vec![future.to_string()]
    );
    assert!(exists(&t, W1), "a write that just started was rolled back");
}

#[test]
fn an_instant_whose_age_cannot_be_established_is_never_failed() {
    let t = table();
    t.touch(&[&format!(".hoodie/.heartbeat/{C1}")]);
    add_write(&t, W1);
    t.age_all(HOUR);
    // A store that reports no modification time (the epoch).
    let [req, inflight] = timeline_files(W1);
    t.set_mtime(&[&req, &inflight], SystemTime::UNIX_EPOCH);
    let v = inspect(&t, &[]);
    assert_eq!(pending(&v, W1)["verdict"], "age_unknown", "{v:#}");
    assert!(pending(&v, W1)["instant_age_ms"].is_null());
    assert_eq!(rollback(&t, &[]), Vec::<String>::new());
    assert!(exists(&t, W1));
    let uri = t.uri();
    let named = run(&["rollback", &uri, "--instant", W1, "--yes", "--lock", "none"]);
    assert_eq!(named.status.code(), Some(1));
    assert!(stderr(&named).contains("--force"), "{}", stderr(&named));
    assert!(exists(&t, W1));
}

#[test]
fn an_orphan_heartbeat_file_of_an_instant_absent_from_the_timeline_is_no_evidence_of_lazy_writers()
{
    // A heartbeat file left by an instant a restore undid (or Hudi archived): its instant is
    // not on the timeline, so it says nothing about the writers the table has now.
    let t = table();
    add_write(&t, W1);
    t.touch(&[".hoodie/.heartbeat/20200101120000000"]);
    t.age_all(HOUR);
    let v = inspect(&t, &[]);
    assert_eq!(
        pending(&v, W1)["verdict"],
        "no_heartbeat_unconfirmed",
        "{v:#}"
    );
    assert_eq!(v["writers"]["lazy_writers_known"], false, "{v:#}");
    assert_eq!(v["writers"]["heartbeat_files"], 0, "{v:#}");
    assert_eq!(rollback(&t, &[]), Vec::<String>::new());
    assert!(
        exists(&t, W1),
        "a write that may be running was rolled back"
    );
}

#[test]
fn a_heartbeat_file_without_a_modification_time_is_never_taken_for_an_expired_one() {
    // A store that reports no modification time for the heartbeat (the epoch): the writer may
    // be beating right now.
    let t = table();
    add_write(&t, W1);
    let hb = format!(".hoodie/.heartbeat/{W1}");
    t.touch(&[&hb]);
    t.age_all(HOUR);
    t.set_mtime(&[&hb], SystemTime::UNIX_EPOCH);
    let v = inspect(&t, &[]);
    let p = pending(&v, W1);
    assert_eq!(p["verdict"], "age_unknown", "{v:#}");
    assert!(p["heartbeat_age_ms"].is_null(), "{p}");
    assert_eq!(rollback(&t, &[]), Vec::<String>::new());
    assert!(
        exists(&t, W1),
        "a LAZY writer that may be alive was rolled back"
    );
}

#[test]
fn a_young_pending_write_without_a_heartbeat_file_on_a_lazy_table_is_a_sign_of_eager_writers() {
    let t = table();
    t.age_all(HOUR);
    add_write(&t, W1);
    let v = inspect(&t, &[]);
    assert_eq!(
        pending(&v, W1)["verdict"],
        "eager_writer_suspected",
        "{v:#}"
    );
    assert_eq!(v["writers"]["eager_writer_suspected"], true, "{v:#}");
    let text = stdout(&run(&["inspect", &t.uri()]));
    assert!(text.contains("EAGER writers"), "{text}");
    // Configured EAGER, the same write is just young.
    let v = inspect(&t, &["--policy", "eager"]);
    assert_eq!(pending(&v, W1)["verdict"], "too_young", "{v:#}");
    assert_eq!(v["writers"]["eager_writer_suspected"], false);
}

#[test]
fn under_eager_only_a_write_with_a_newer_write_after_it_is_rolled_back() {
    let t = table();
    add_write(&t, W1);
    add_write(&t, W2);
    t.age_all(HOUR);
    let v = inspect(&t, &["--policy", "eager"]);
    assert_eq!(pending(&v, W1)["verdict"], "superseded", "{v:#}");
    assert_eq!(pending(&v, W2)["verdict"], "awaiting_newer_write", "{v:#}");
    assert_eq!(v["writers"]["left_alone"]["awaiting_newer_write"], 1);
    assert_eq!(rollback(&t, &["--policy", "eager"]), vec![W1.to_string()]);
    assert!(
        exists(&t, W2),
        "the newest write of the single writer was rolled back"
    );
    // A newer completed write counts as well: the writer has moved on.
    t.touch(&[
        ".hoodie/timeline/20200104000000000.deltacommit.requested",
        ".hoodie/timeline/20200104000000000.deltacommit.inflight",
        ".hoodie/timeline/20200104000000000_20200104000001000.deltacommit",
    ]);
    t.age_all(HOUR);
    assert_eq!(rollback(&t, &["--policy", "eager"]), vec![W2.to_string()]);
}

#[test]
fn a_maximum_write_duration_lets_the_newest_eager_write_be_rolled_back() {
    let t = table();
    add_write(&t, W1);
    t.age_all(HOUR);
    let v = inspect(&t, &["--policy", "eager", "--max-write-duration", "2h"]);
    assert_eq!(pending(&v, W1)["verdict"], "awaiting_newer_write", "{v:#}");
    let v = inspect(&t, &["--policy", "eager", "--max-write-duration", "30m"]);
    assert_eq!(pending(&v, W1)["verdict"], "overdue", "{v:#}");
    assert_eq!(
        rollback(&t, &["--policy", "eager", "--max-write-duration", "30m"]),
        vec![W1.to_string()]
    );
}

#[test]
fn naming_a_write_that_is_left_alone_rolls_it_back_and_a_suspected_eager_write_needs_force() {
    let t = table();
    add_write(&t, W1);
    t.age_all(HOUR);
    assert_eq!(
        rollback(&t, &["--policy", "eager", "--instant", W1]),
        vec![W1.to_string()]
    );
    add_write(&t, W2);
    let uri = t.uri();
    let refused = run(&["rollback", &uri, "--instant", W2, "--yes", "--lock", "none"]);
    assert_eq!(refused.status.code(), Some(1));
    let err = stderr(&refused);
    assert!(err.contains("eager_writer_suspected"), "{err}");
    assert!(err.contains("--force"), "{err}");
    assert!(exists(&t, W2));
    assert_eq!(
        rollback(&t, &["--instant", W2, "--force"]),
        vec![W2.to_string()]
    );
}

/// Whether the daemon rolled `w` back (its data file is gone).
fn wait_polls(d: &Daemon, name: &str, n: u64) {
    let start = d.table(name)["status"]["polls"].as_u64().unwrap_or(0);
    d.wait_for(&format!("{n} more polls"), Duration::from_secs(30), || {
        (d.table(name)["status"]["polls"].as_u64().unwrap_or(0) >= start + n).then_some(())
    });
}

fn verdict(d: &Daemon, w: &str) -> Option<String> {
    d.table("t")["status"]["pending"]
        .as_array()?
        .iter()
        .find(|p| p["requested_time"] == w)
        .and_then(|p| p["verdict"].as_str().map(str::to_string))
}

#[test]
fn the_daemon_remembers_heartbeat_files_across_restarts_but_never_rolls_back_a_write_without_heartbeat_on_that_memory(
) {
    let t = table();
    t.age_all(HOUR);
    let work = tempfile::tempdir().unwrap();
    let config = finding_config(&t, "200ms", "1m");
    // A write that just started, without a heartbeat file: a sign of an EAGER writer.
    add_write(&t, W1);
    let d = Daemon::start(work.path(), &config);
    d.wait_for(
        "the young write to be suspected",
        Duration::from_secs(20),
        || (verdict(&d, W1).as_deref() == Some("eager_writer_suspected")).then_some(()),
    );
    let s = d.table("t");
    assert_eq!(
        s["status"]["writers"]["eager_writer_suspected"], true,
        "{s}"
    );
    assert_eq!(
        d.metric(r#"hudi_keeper_eager_writer_suspected{table="t"}"#),
        Some(1.0)
    );

    // An hour later (by the store's clock) it is still there: nothing proves it dead.
    let [req, inflight] = timeline_files(W1);
    t.set_mtime(&[&req, &inflight], SystemTime::now() - HOUR);
    d.wait_for(
        "the old write to be left alone",
        Duration::from_secs(20),
        || (verdict(&d, W1).as_deref() == Some("no_heartbeat_unconfirmed")).then_some(()),
    );
    wait_polls(&d, "t", 5);
    assert!(
        exists(&t, W1),
        "a write that may be running was rolled back"
    );
    let s = d.table("t");
    assert_eq!(s["status"]["rollbacks"], 0, "{s}");
    assert_eq!(s["status"]["writers"]["lazy_writers_known"], false, "{s}");
    assert_eq!(
        s["status"]["writers"]["left_alone"]["no_heartbeat_unconfirmed"],
        1
    );
    assert_eq!(
        d.metric(
            r#"hudi_keeper_pending_writes_left_alone{reason="no_heartbeat_unconfirmed",table="t"}"#
        ),
        Some(1.0)
    );
    assert_eq!(
        d.metric(r#"hudi_keeper_eager_writer_suspected{table="t"}"#),
        Some(0.0)
    );
    assert_eq!(
        d.metric(r#"hudi_keeper_failed_instants{table="t"}"#),
        Some(0.0)
    );
    // The listing of tables carries the same.
    let all = d.get("/api/v1/tables").json();
    assert_eq!(
        all["tables"][0]["status"]["writers"]["left_alone"]["no_heartbeat_unconfirmed"], 1,
        "{all}"
    );

    // A LAZY writer starts (its heartbeat is fresh): the table has LAZY writers now. A LAZY
    // writer would have a heartbeat file, so the old write without one is an EAGER writer's
    // (maybe a long job still running): never rolled back as `no_heartbeat`.
    add_write(&t, W2);
    t.touch(&[&format!(".hoodie/.heartbeat/{W2}")]);
    d.wait_for(
        "the table to be known to have LAZY writers",
        Duration::from_secs(20),
        || (d.table("t")["status"]["writers"]["lazy_writers_known"] == true).then_some(()),
    );
    wait_polls(&d, "t", 5);
    assert!(
        exists(&t, W1),
        "a write without heartbeat beside a LAZY writer was rolled back"
    );
    assert_eq!(verdict(&d, W1).as_deref(), Some("eager_writer_suspected"));
    assert!(exists(&t, W2), "the live LAZY writer was rolled back");
    let s = d.table("t");
    assert_eq!(s["status"]["rollbacks"], 0, "{s}");
    assert!(
        s["status"]["writers"]["heartbeats_first_seen_ms"].is_i64(),
        "{s}"
    );
    assert!(work.path().join("state/writer-evidence/t.json").exists());
    d.terminate_cleanly(Duration::from_secs(20));

    // The LAZY writer committed (its heartbeat went with it); another write without heartbeat
    // started an hour ago. After a restart nothing on the table shows a heartbeat, but the
    // daemon remembers what it saw: that names the verdicts, and decides nothing.
    t.touch(&[&format!(
        ".hoodie/timeline/{W2}_20200103000001000.deltacommit"
    )]);
    std::fs::remove_file(t.path().join(format!(".hoodie/.heartbeat/{W2}"))).unwrap();
    let w3 = "20200105000000000";
    add_write(&t, w3);
    let [req, inflight] = timeline_files(w3);
    t.set_mtime(&[&req, &inflight], SystemTime::now() - HOUR);
    let d = Daemon::start(work.path(), &config);
    d.wait_for(
        "the write to be judged after the restart",
        Duration::from_secs(20),
        || verdict(&d, w3).map(|_| ()),
    );
    wait_polls(&d, "t", 3);
    let s = d.table("t");
    assert_eq!(s["status"]["writers"]["evidence"], "seen_before", "{s}");
    assert_eq!(verdict(&d, w3).as_deref(), Some("eager_writer_suspected"));
    assert_eq!(verdict(&d, W1).as_deref(), Some("eager_writer_suspected"));
    assert!(
        exists(&t, w3) && exists(&t, W1),
        "a write without heartbeat was rolled back"
    );
    assert_eq!(s["status"]["rollbacks"], 0, "{s}");
    // The dry run of the API shows the same verdicts.
    let dry = request(
        &d.addr,
        "POST",
        "/api/v1/tables/t/rollback",
        Some(TOKEN),
        Some(r#"{"dry_run": true}"#),
    );
    assert_eq!(dry.status, 200, "{}", dry.body);
    d.terminate_cleanly(Duration::from_secs(20));
}

/// The daemon config of the issue-#29 findings: a LAZY table, the minimum age `min_age`, polls
/// every `poll`.
fn finding_config(t: &TableDir, poll: &str, min_age: &str) -> String {
    DaemonConfig::new()
        .server("auth_token", TOKEN)
        .defaults("poll_interval", poll)
        .defaults("min_instant_age", min_age)
        .defaults("clock_skew_margin", "0s")
        .lock("provider", "filesystem")
        .table("t", &t.uri())
        .to_string()
}

/// A LAZY writer's live write W2 (fresh heartbeat) beside an EAGER writer's write W1 that
/// started `age` ago (no heartbeat file).
fn lazy_and_eager_writes(t: &TableDir, age: Duration) {
    add_write(t, W1);
    let [req, inflight] = timeline_files(W1);
    t.set_mtime(&[&req, &inflight], SystemTime::now() - age);
    add_write(t, W2);
    t.touch(&[&format!(".hoodie/.heartbeat/{W2}")]);
}

#[test]
fn a_replica_that_takes_a_table_over_leaves_an_eager_write_it_never_saw_young_alone() {
    // Finding 1: one replica watched the EAGER write while it was young; after a rollout the
    // table's new owner (another process, its own state_dir) sees it only once old.
    let t = table();
    t.age_all(HOUR);
    lazy_and_eager_writes(&t, Duration::ZERO);
    let config = finding_config(&t, "200ms", "1m");
    let first = tempfile::tempdir().unwrap();
    let d = Daemon::start(first.path(), &config);
    d.wait_for(
        "the young write to be suspected",
        Duration::from_secs(20),
        || (verdict(&d, W1).as_deref() == Some("eager_writer_suspected")).then_some(()),
    );
    d.terminate_cleanly(Duration::from_secs(20));

    let [req, inflight] = timeline_files(W1);
    t.set_mtime(&[&req, &inflight], SystemTime::now() - HOUR);
    t.touch(&[&format!(".hoodie/.heartbeat/{W2}")]);
    let second = tempfile::tempdir().unwrap();
    let d = Daemon::start(second.path(), &config);
    d.wait_for("the write to be judged", Duration::from_secs(20), || {
        verdict(&d, W1).map(|_| ())
    });
    wait_polls(&d, "t", 5);
    assert!(
        exists(&t, W1),
        "the new owner rolled back an EAGER write it never saw young"
    );
    assert!(exists(&t, W2), "the live LAZY writer was rolled back");
    assert_eq!(verdict(&d, W1).as_deref(), Some("eager_writer_suspected"));
    assert_eq!(d.table("t")["status"]["rollbacks"], 0);
    d.terminate_cleanly(Duration::from_secs(20));
}

#[test]
fn a_poll_interval_longer_than_the_minimum_age_leaves_an_eager_write_alone() {
    // Finding 2: the write starts between two polls and is first seen older than the minimum
    // age (here, with the minimum age 1 s and polls 2 s apart, it is 30 s old when first seen).
    let t = table();
    t.age_all(HOUR);
    t.touch(&[&format!(".hoodie/.heartbeat/{C1}")]);
    let work = tempfile::tempdir().unwrap();
    let d = Daemon::start(work.path(), &finding_config(&t, "2s", "1s"));
    wait_polls(&d, "t", 1);
    lazy_and_eager_writes(&t, Duration::from_secs(30));
    d.wait_for("the write to be judged", Duration::from_secs(20), || {
        verdict(&d, W1).map(|_| ())
    });
    wait_polls(&d, "t", 2);
    assert!(
        exists(&t, W1),
        "an EAGER write first seen old was rolled back"
    );
    assert_eq!(verdict(&d, W1).as_deref(), Some("eager_writer_suspected"));
    assert!(exists(&t, W2), "the live LAZY writer was rolled back");
    d.terminate_cleanly(Duration::from_secs(20));
}

#[test]
fn unreadable_state_files_leave_an_eager_write_alone_and_are_reported() {
    // Finding 3: the daemon's state files cannot be read after a restart (a folder in each
    // file's place: CI runs as root, so permissions would not do).
    let t = table();
    t.age_all(HOUR);
    lazy_and_eager_writes(&t, Duration::ZERO);
    let config = finding_config(&t, "200ms", "1m");
    let work = tempfile::tempdir().unwrap();
    let d = Daemon::start(work.path(), &config);
    d.wait_for(
        "the young write to be suspected",
        Duration::from_secs(20),
        || (verdict(&d, W1).as_deref() == Some("eager_writer_suspected")).then_some(()),
    );
    d.terminate_cleanly(Duration::from_secs(20));
    let state = work.path().join("state");
    for folder in ["suspected-eager-writes", "writer-evidence", "own-changes"] {
        let file = state.join(folder).join("t.json");
        let _ = std::fs::remove_file(&file);
        std::fs::create_dir_all(file.join("not-a-file")).unwrap();
    }

    let [req, inflight] = timeline_files(W1);
    t.set_mtime(&[&req, &inflight], SystemTime::now() - HOUR);
    t.touch(&[&format!(".hoodie/.heartbeat/{W2}")]);
    let d = Daemon::start(work.path(), &config);
    d.wait_for("the write to be judged", Duration::from_secs(20), || {
        verdict(&d, W1).map(|_| ())
    });
    wait_polls(&d, "t", 5);
    assert!(
        exists(&t, W1),
        "an EAGER write was rolled back after its state could not be read"
    );
    assert_eq!(verdict(&d, W1).as_deref(), Some("eager_writer_suspected"));
    // The API, a metric and a log line say which file and why.
    let s = d.table("t");
    let unreadable = s["status"]["state_files_unreadable"]
        .as_array()
        .unwrap_or_else(|| panic!("no state_files_unreadable: {s}"));
    let files: Vec<&str> = unreadable
        .iter()
        .map(|u| u["file"].as_str().unwrap_or_default())
        .collect();
    assert_eq!(
        files,
        ["writer-evidence/t.json", "own-changes/t.json"],
        "{s}"
    );
    assert!(
        unreadable[0]["error"]
            .as_str()
            .is_some_and(|e| e.contains("cannot read it")),
        "{s}"
    );
    assert_eq!(d.metric("hudi_keeper_state_files_unreadable"), Some(2.0));
    let logs = d.logs();
    assert!(
        logs.contains("skipping an unreadable writer-evidence file")
            && logs.contains("writer-evidence/t.json"),
        "{logs}"
    );
    d.terminate_cleanly(Duration::from_secs(20));
}

#[test]
fn the_daemon_takes_no_orphan_heartbeat_file_for_evidence_of_lazy_writers() {
    // A heartbeat file of an instant a restore undid (absent from the timeline), and a write
    // without heartbeat file an hour old: nothing shows LAZY writers, so it is left alone and
    // nothing is remembered.
    let t = table();
    add_write(&t, W1);
    t.touch(&[".hoodie/.heartbeat/20200101120000000"]);
    t.age_all(HOUR);
    let work = tempfile::tempdir().unwrap();
    let config = finding_config(&t, "200ms", "1m");
    let d = Daemon::start(work.path(), &config);
    d.wait_for("the write to be judged", Duration::from_secs(20), || {
        verdict(&d, W1).map(|_| ())
    });
    wait_polls(&d, "t", 5);
    assert_eq!(verdict(&d, W1).as_deref(), Some("no_heartbeat_unconfirmed"));
    assert!(
        exists(&t, W1),
        "a write that may be running was rolled back"
    );
    let s = d.table("t");
    assert_eq!(s["status"]["writers"]["lazy_writers_known"], false, "{s}");
    assert!(!work.path().join("state/writer-evidence/t.json").exists());
    d.terminate_cleanly(Duration::from_secs(20));
}
