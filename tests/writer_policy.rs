//! The writer policy (issue #13, item 2): what a missing heartbeat file proves and what it does
//! not, end to end through the real binary on hand-made tables whose files' modification times
//! (the store's clock) say how old each write is.
//!
//! LAZY writers write their heartbeat before their requested instant, EAGER writers (Hudi's
//! default) write none: a pending write with no heartbeat file is only rolled back on a table
//! known to have LAZY writers, under EAGER only once a newer write started after it, and an
//! instant's age comes from the store, never from its name.

mod common;

use std::time::{Duration, SystemTime};

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
fn an_expired_heartbeat_proves_a_dead_lazy_writer_and_makes_no_heartbeat_writes_failed_too() {
    let t = table();
    add_write(&t, W1);
    add_write(&t, W2);
    t.touch(&[&format!(".hoodie/.heartbeat/{W1}")]);
    t.age_all(HOUR);
    let v = inspect(&t, &[]);
    assert_eq!(pending(&v, W1)["verdict"], "expired", "{v:#}");
    assert_eq!(pending(&v, W2)["verdict"], "no_heartbeat", "{v:#}");
    assert_eq!(v["writers"]["lazy_writers_known"], true);
    assert_eq!(v["writers"]["evidence"], "heartbeat_files_now");
    assert_eq!(v["writers"]["heartbeat_files"], 1);
    assert_eq!(rollback(&t, &[]), vec![W2.to_string(), W1.to_string()]);
    assert!(!exists(&t, W1) && !exists(&t, W2));
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
    // Heartbeat evidence: a heartbeat file a LAZY writer left for a completed commit.
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
    let v = inspect(&t, &[]);
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
    assert_eq!(rollback(&t, &[]), vec![future.to_string()]);
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
fn the_daemon_rolls_back_a_no_heartbeat_write_only_once_heartbeats_were_seen_and_remembers_them_across_restarts(
) {
    let t = table();
    t.age_all(HOUR);
    let work = tempfile::tempdir().unwrap();
    let config = format!(
        "[server]\nstate_dir = \"state\"\nauth_token = \"{TOKEN}\"\n[defaults]\npoll_interval = \"200ms\"\nmin_instant_age = \"1m\"\nclock_skew_margin = \"0s\"\n[defaults.lock]\nprovider = \"filesystem\"\n[[tables]]\nname = \"t\"\nuri = \"{}\"\n",
        t.uri()
    );
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

    // A LAZY writer starts (its heartbeat is fresh): the table has LAZY writers now. The old
    // write without heartbeat was suspected to be an EAGER writer's while it was young: the
    // daemon remembers that, and never rolls it back as `no_heartbeat` (it may be a long EAGER
    // job still running).
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
        "a write suspected to be an EAGER writer's was rolled back"
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
    assert!(d.terminate(Duration::from_secs(20)).success());

    // The LAZY writer committed (its heartbeat went with it); another write died without a
    // heartbeat an hour ago. After a restart nothing on the table shows a heartbeat, but the
    // daemon remembers what it saw.
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
        "the dead write to be rolled back after the restart",
        Duration::from_secs(20),
        || (!exists(&t, w3)).then_some(()),
    );
    let s = d.table("t");
    assert_eq!(s["status"]["writers"]["evidence"], "seen_before", "{s}");
    assert_eq!(s["status"]["last_rollback"]["instant"], w3, "{s}");
    // The suspicion is kept across the restart too.
    wait_polls(&d, "t", 3);
    assert!(
        exists(&t, W1),
        "a suspected EAGER write was rolled back after a restart"
    );
    assert_eq!(verdict(&d, W1).as_deref(), Some("eager_writer_suspected"));
    // The dry run of the API shows the same verdicts.
    let dry = request(
        &d.addr,
        "POST",
        "/api/v1/tables/t/rollback",
        Some(TOKEN),
        Some(r#"{"dry_run": true}"#),
    );
    assert_eq!(dry.status, 200, "{}", dry.body);
    assert!(d.terminate(Duration::from_secs(20)).success());
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
    let config = format!(
        "[server]\nstate_dir = \"state\"\nauth_token = \"{TOKEN}\"\n[defaults]\npoll_interval = \"200ms\"\nmin_instant_age = \"1m\"\nclock_skew_margin = \"0s\"\n[defaults.lock]\nprovider = \"filesystem\"\n[[tables]]\nname = \"t\"\nuri = \"{}\"\n",
        t.uri()
    );
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
    assert!(d.terminate(Duration::from_secs(20)).success());
}
