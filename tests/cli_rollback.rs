//! `hudi-keeper rollback` end to end on a hand-made table: dry run, confirmation, JSON.

use hudi_keeper_test_support as common;

use common::{bin, run, stderr, stdout, TableDir};
use std::process::Stdio;

const TF: &str = "20200102000000000";

fn failed_table() -> TableDir {
    let t = TableDir::v8_mor();
    t.touch(&[
        ".hoodie/timeline/20200101000000000.deltacommit.requested",
        ".hoodie/timeline/20200101000000000.deltacommit.inflight",
        ".hoodie/timeline/20200101000000000_20200101000001000.deltacommit",
        ".hoodie/timeline/20200102000000000.deltacommit.requested",
        ".hoodie/timeline/20200102000000000.deltacommit.inflight",
        "p1/committed-0_0-1-2_20200101000000000.parquet",
        "p1/failed-0_0-1-2_20200102000000000.parquet",
        "p1/.failed-0_20200102000000000.log.1_0-1-2",
        ".hoodie/.temp/20200102000000000/p1/failed-0_0-1-2_20200102000000000.parquet.marker.CREATE",
        // The LAZY writer of TF was killed: its heartbeat stopped an hour ago.
        ".hoodie/.heartbeat/20200102000000000",
    ]);
    t.age_all(std::time::Duration::from_secs(3600));
    t
}

/// The run was refused as a usage error (status 2), saying `why` on stderr.
fn assert_usage_error(out: &std::process::Output, why: &str) {
    assert_eq!(out.status.code(), Some(2), "{}", stderr(out));
    assert!(stderr(out).contains(why), "{}", stderr(out));
}

/// The run failed with status 1, saying `why` on stderr.
fn assert_refused(out: &std::process::Output, why: &str) {
    assert_eq!(out.status.code(), Some(1));
    assert!(stderr(out).contains(why), "{}", stderr(out));
}

#[test]
fn dry_run_prints_the_plan_and_changes_nothing() {
    let t = failed_table();
    let out = run(&["rollback", &t.uri(), "--dry-run", "--json"]);
    assert!(out.status.success(), "{}", stderr(&out));
    let v: serde_json::Value = serde_json::from_str(&stdout(&out)).unwrap();
    assert_eq!(v["dry_run"], true);
    assert_eq!(v["rollbacks"][0]["instant"], TF);
    assert_eq!(v["rollbacks"][0]["files"], 2);
    assert_eq!(v["rollbacks"][0]["files_not_in_markers"], 1);
    assert!(t
        .path()
        .join("p1/failed-0_0-1-2_20200102000000000.parquet")
        .exists());
    let text = stdout(&run(&["rollback", &t.uri(), "--dry-run"]));
    assert!(text.contains("p1: 2 files"), "{text}");
    assert!(text.contains("nothing was changed"), "{text}");
}

#[test]
fn executing_without_a_terminal_needs_yes() {
    let t = failed_table();
    let out = bin()
        .args(["rollback", &t.uri(), "--lock", "none"])
        .stdin(Stdio::null())
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1));
    assert!(stderr(&out).contains("--yes"), "{}", stderr(&out));
    assert!(t
        .path()
        .join("p1/failed-0_0-1-2_20200102000000000.parquet")
        .exists());
}

#[test]
fn yes_rolls_back_and_a_second_run_finds_nothing() {
    let t = failed_table();
    let out = run(&[
        "rollback",
        &t.uri(),
        "--yes",
        "--json",
        "--lock",
        "filesystem",
    ]);
    assert!(out.status.success(), "{}", stderr(&out));
    let v: serde_json::Value = serde_json::from_str(&stdout(&out)).unwrap();
    assert_eq!(v["rollbacks"][0]["instant"], TF);
    assert_eq!(v["rollbacks"][0]["files_deleted"], 2);
    assert!(!t
        .path()
        .join("p1/failed-0_0-1-2_20200102000000000.parquet")
        .exists());
    assert!(!t
        .path()
        .join("p1/.failed-0_20200102000000000.log.1_0-1-2")
        .exists());
    assert!(t
        .path()
        .join("p1/committed-0_0-1-2_20200101000000000.parquet")
        .exists());
    assert!(!t.path().join(".hoodie/.temp/20200102000000000").exists());
    let again = run(&["rollback", &t.uri(), "--yes", "--lock", "none"]);
    assert!(again.status.success());
    assert!(
        stdout(&again).contains("Nothing to roll back"),
        "{}",
        stdout(&again)
    );
}

#[test]
fn a_live_instant_needs_force() {
    let t = failed_table();
    t.touch(&[".hoodie/.heartbeat/20200102000000000"]);
    let out = run(&[
        "rollback",
        &t.uri(),
        "--instant",
        TF,
        "--yes",
        "--lock",
        "none",
    ]);
    assert_eq!(out.status.code(), Some(1));
    assert!(stderr(&out).contains("live"), "{}", stderr(&out));
    assert!(t
        .path()
        .join("p1/failed-0_0-1-2_20200102000000000.parquet")
        .exists());
    let out = run(&[
        "rollback",
        &t.uri(),
        "--instant",
        TF,
        "--force",
        "--yes",
        "--lock",
        "none",
    ]);
    assert!(out.status.success(), "{}", stderr(&out));
    assert!(!t
        .path()
        .join("p1/failed-0_0-1-2_20200102000000000.parquet")
        .exists());
}

#[test]
fn the_demo_makes_a_failed_write_and_rolls_it_back() {
    let dir = tempfile::tempdir().unwrap();
    let table = dir.path().join("demo");
    let out = run(&["demo", "--dir", table.to_str().unwrap()]);
    assert!(out.status.success(), "{}", stderr(&out));
    let text = stdout(&out);
    assert!(text.contains("expired"), "{text}");
    assert!(text.contains("rolled back"), "{text}");
    assert!(text.contains("3 files deleted"), "{text}");
    // Run again: the demo replaces its own table.
    let again = run(&["demo", "--dir", table.to_str().unwrap(), "--no-rollback"]);
    assert!(again.status.success(), "{}", stderr(&again));
    let v = run(&["inspect", table.to_str().unwrap(), "--json"]);
    let v: serde_json::Value = serde_json::from_str(&stdout(&v)).unwrap();
    assert_eq!(v["pending"][0]["verdict"], "expired");
}

#[test]
fn the_demo_never_replaces_a_folder_it_did_not_make() {
    let t = failed_table();
    let out = run(&["demo", "--dir", &t.uri()]);
    assert_refused(&out, "not a hudi-keeper demo table");
    assert!(t
        .path()
        .join("p1/failed-0_0-1-2_20200102000000000.parquet")
        .exists());
}

#[test]
fn changing_a_table_needs_a_lock_decision() {
    let t = failed_table();
    let out = run(&["rollback", &t.uri(), "--yes"]);
    assert_usage_error(&out, "--lock storage|filesystem|zookeeper");
    assert!(t
        .path()
        .join("p1/failed-0_0-1-2_20200102000000000.parquet")
        .exists());
    // Looking needs none.
    assert!(run(&["rollback", &t.uri(), "--dry-run"]).status.success());
}

#[test]
fn a_held_file_system_lock_is_waited_for_then_refused_with_nothing_changed() {
    let t = failed_table();
    t.touch(&[".hoodie/lock"]);
    let out = run(&[
        "rollback",
        &t.uri(),
        "--yes",
        "--lock",
        "filesystem",
        "--lock-timeout",
        "1s",
    ]);
    assert_eq!(out.status.code(), Some(1));
    let err = stderr(&out);
    assert!(err.contains("could not take the lock"), "{err}");
    assert!(err.contains("never expires"), "{err}");
    assert!(t
        .path()
        .join("p1/failed-0_0-1-2_20200102000000000.parquet")
        .exists());
    assert!(!std::fs::read_dir(t.path().join(".hoodie/timeline"))
        .unwrap()
        .flatten()
        .any(|e| e.file_name().to_string_lossy().contains("rollback")));
}

#[test]
fn the_rollback_proceeds_once_the_writer_releases_the_lock() {
    let t = failed_table();
    let lock = t.write(".hoodie/lock", b"");
    let releaser = std::thread::spawn(move || {
        std::thread::sleep(std::time::Duration::from_millis(1500));
        std::fs::remove_file(lock).unwrap();
    });
    let started = std::time::Instant::now();
    let out = run(&[
        "rollback",
        &t.uri(),
        "--yes",
        "--lock",
        "filesystem",
        "--lock-timeout",
        "30s",
    ]);
    releaser.join().unwrap();
    assert!(out.status.success(), "{}", stderr(&out));
    assert!(started.elapsed() >= std::time::Duration::from_millis(1500));
    assert!(!t
        .path()
        .join("p1/failed-0_0-1-2_20200102000000000.parquet")
        .exists());
    // The lock is released after use.
    assert!(!t.path().join(".hoodie/lock").exists());
}

/// The failed table with a writer's file-system lock file last written `secs` ago, and
/// `rollback --yes` under the file-system lock with `--lock-filesystem-expire expire` and
/// `--lock-timeout timeout`: the table, the lock file and the run.
fn rollback_past_a_lock_file_written_ago(
    secs: u64,
    expire: &str,
    timeout: &str,
) -> (TableDir, std::path::PathBuf, std::process::Output) {
    let t = failed_table();
    let lock = t.write(".hoodie/lock", b"");
    let old = std::time::SystemTime::now() - std::time::Duration::from_secs(secs);
    std::fs::File::options()
        .write(true)
        .open(&lock)
        .unwrap()
        .set_modified(old)
        .unwrap();
    let out = run(&[
        "rollback",
        &t.uri(),
        "--yes",
        "--lock",
        "filesystem",
        "--lock-filesystem-expire",
        expire,
        "--lock-timeout",
        timeout,
    ]);
    (t, lock, out)
}

#[test]
fn an_expired_file_system_lock_is_taken_over() {
    let (t, _lock, out) = rollback_past_a_lock_file_written_ago(600, "5m", "5s");
    assert!(out.status.success(), "{}", stderr(&out));
    assert!(!t.path().join(".hoodie/lock").exists());
}

#[test]
fn a_bare_file_system_lock_expiry_is_in_minutes_as_in_hudi() {
    // A writer's lock file written 30 s ago, with the writers' hoodie.write.lock.filesystem.expire=1
    // (one minute): the lock is still the writer's.
    let (t, lock, out) = rollback_past_a_lock_file_written_ago(30, "1", "1s");
    assert_eq!(out.status.code(), Some(1), "{}", stderr(&out));
    let err = stderr(&out);
    assert!(err.contains("could not take the lock"), "{err}");
    assert!(err.contains("expires 60 s after"), "{err}");
    assert!(lock.exists(), "the writer's lock file stays");
    assert!(failed_file_still_there(&t));
}

fn failed_file_still_there(t: &TableDir) -> bool {
    t.path()
        .join("p1/failed-0_0-1-2_20200102000000000.parquet")
        .exists()
}

#[test]
fn the_zookeeper_lock_needs_its_url_and_base_path() {
    let t = failed_table();
    let out = run(&["rollback", &t.uri(), "--yes", "--lock", "zookeeper"]);
    assert_usage_error(&out, "--lock-zookeeper-url");
    let out = rollback_under_zookeeper(&t, "127.0.0.1:2181", "hudi/locks/", &[]);
    assert_usage_error(&out, "must start with `/`");
    assert!(failed_file_still_there(&t));
}

/// `rollback --yes` of `t` under the ZooKeeper lock at `url`, `base_path`, then `extra`.
fn rollback_under_zookeeper(
    t: &TableDir,
    url: &str,
    base_path: &str,
    extra: &[&str],
) -> std::process::Output {
    let uri = t.uri();
    let mut args = vec![
        "rollback",
        uri.as_str(),
        "--yes",
        "--lock",
        "zookeeper",
        "--lock-zookeeper-url",
        url,
        "--lock-zookeeper-base-path",
        base_path,
    ];
    args.extend_from_slice(extra);
    run(&args)
}

#[test]
fn an_unreachable_zookeeper_is_an_error_and_nothing_changes() {
    let t = failed_table();
    let port = {
        let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        l.local_addr().unwrap().port()
    };
    let url = format!("127.0.0.1:{port}");
    let out = rollback_under_zookeeper(
        &t,
        &url,
        "/hudi/locks",
        &["--lock-zookeeper-connection-timeout", "2s"],
    );
    assert_refused(&out, "cannot connect to ZooKeeper");
    assert!(failed_file_still_there(&t));
}

#[test]
fn the_storage_lock_is_refused_on_the_local_file_system() {
    let t = failed_table();
    let out = run(&["rollback", &t.uri(), "--yes", "--lock", "storage"]);
    assert_refused(&out, "conditional writes");
    assert!(failed_file_still_there(&t));
    assert!(!t.path().join(".hoodie/.locks/table_lock.json").exists());
}

#[test]
fn a_storage_lock_renew_interval_that_cannot_keep_the_lease_is_a_usage_error() {
    let t = failed_table();
    let out = run(&[
        "rollback",
        &t.uri(),
        "--yes",
        "--lock",
        "storage",
        "--lock-storage-validity",
        "30s",
        "--lock-storage-renew-interval",
        "30s",
    ]);
    assert_usage_error(&out, "renew interval");
}

/// The failed table with a second completed commit after the first.
fn table_with_two_commits() -> TableDir {
    let t = failed_table();
    t.touch(&[
        ".hoodie/timeline/20200101120000000.deltacommit.requested",
        ".hoodie/timeline/20200101120000000.deltacommit.inflight",
        ".hoodie/timeline/20200101120000000_20200101120001000.deltacommit",
        "p1/second-0_0-1-2_20200101120000000.parquet",
    ]);
    t
}

#[test]
fn savepoint_create_then_restore_takes_the_table_back_and_explains_refusals() {
    let t = table_with_two_commits();
    let t1 = "20200101000000000";
    let dry = run(&[
        "savepoint",
        "create",
        &t.uri(),
        "--instant",
        t1,
        "--dry-run",
        "--json",
    ]);
    assert!(dry.status.success(), "{}", stderr(&dry));
    let v: serde_json::Value = serde_json::from_str(&stdout(&dry)).unwrap();
    assert_eq!(v["savepoint"]["written"], false);
    assert_eq!(
        v["savepoint"]["metadata"]["partition_metadata"]["p1"][0],
        "committed-0_0-1-2_20200101000000000.parquet"
    );
    // Changing the table needs a lock decision.
    let no_lock = run(&["savepoint", "create", &t.uri(), "--instant", t1]);
    assert_eq!(no_lock.status.code(), Some(2));
    assert!(stderr(&no_lock).contains("--lock"), "{}", stderr(&no_lock));
    let sp = run(&[
        "savepoint",
        "create",
        &t.uri(),
        "--instant",
        t1,
        "--lock",
        "filesystem",
    ]);
    assert!(sp.status.success(), "{}", stderr(&sp));
    assert!(
        stdout(&sp).contains("Created the savepoint"),
        "{}",
        stdout(&sp)
    );

    // Neither a savepoint nor an instant: clap says so.
    let neither = run(&["restore", &t.uri(), "--dry-run"]);
    assert_eq!(neither.status.code(), Some(2));
    // Not savepointed: refused with the way out.
    let later = run(&[
        "restore",
        &t.uri(),
        "--savepoint",
        "20200101120000000",
        "--dry-run",
    ]);
    assert_eq!(later.status.code(), Some(1));
    assert!(
        stderr(&later).contains("--to-instant"),
        "{}",
        stderr(&later)
    );
    let plan = run(&[
        "restore",
        &t.uri(),
        "--savepoint",
        t1,
        "--dry-run",
        "--min-instant-age",
        "0s",
    ]);
    assert!(plan.status.success(), "{}", stderr(&plan));
    let text = stdout(&plan);
    assert!(
        text.contains(&format!("Restore to {t1} (savepointed): undo 2 instants")),
        "{text}"
    );
    assert!(text.contains("nothing was changed"), "{text}");
    let second = t.path().join("p1/second-0_0-1-2_20200101120000000.parquet");
    assert!(second.exists());
    // Without a terminal, --yes is needed.
    let out = bin()
        .args([
            "restore",
            &t.uri(),
            "--savepoint",
            t1,
            "--lock",
            "none",
            "--min-instant-age",
            "0s",
        ])
        .stdin(Stdio::null())
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1));
    assert!(stderr(&out).contains("--yes"), "{}", stderr(&out));
    assert!(second.exists());
    let done = run(&[
        "restore",
        &t.uri(),
        "--savepoint",
        t1,
        "--lock",
        "filesystem",
        "--yes",
        "--json",
        "--min-instant-age",
        "0s",
    ]);
    assert!(done.status.success(), "{}", stderr(&done));
    let v: serde_json::Value = serde_json::from_str(&stdout(&done)).unwrap();
    let undone: Vec<&str> = v["restore"]["undone"]
        .as_array()
        .unwrap()
        .iter()
        .map(|u| u["instant"].as_str().unwrap())
        .collect();
    assert_eq!(undone, [TF, "20200101120000000"]);
    // Its requests by kind, as rollback --json reports them.
    assert!(
        v["requests"]["delete"].as_u64().unwrap() > 0,
        "{}",
        v["requests"]
    );
    assert!(
        v["requests"]["put_if_absent"].as_u64().unwrap() > 0,
        "{}",
        v["requests"]
    );
    assert!(!second.exists());
    assert!(!t
        .path()
        .join("p1/failed-0_0-1-2_20200102000000000.parquet")
        .exists());
    assert!(t
        .path()
        .join("p1/committed-0_0-1-2_20200101000000000.parquet")
        .exists());
    let list = run(&["savepoint", "list", &t.uri(), "--json"]);
    let v: serde_json::Value = serde_json::from_str(&stdout(&list)).unwrap();
    assert_eq!(v["savepoints"][0]["instant"], t1);
}

#[test]
fn json_reports_the_object_store_requests_of_the_run_by_kind() {
    let t = failed_table();
    let out = run(&[
        "rollback",
        &t.uri(),
        "--yes",
        "--json",
        "--lock",
        "filesystem",
    ]);
    assert!(out.status.success(), "{}", stderr(&out));
    let v: serde_json::Value = serde_json::from_str(&stdout(&out)).unwrap();
    let requests = v["requests"].as_object().expect("a requests object");
    // The two data files, their absent `.crc` side files, markers, timeline files, heartbeat
    // and lock file: deletes count per object.
    assert!(requests["delete"].as_u64().unwrap() >= 4, "{requests:?}");
    assert!(requests["list"].as_u64().unwrap() >= 1, "{requests:?}");
    assert!(
        requests["put_if_absent"].as_u64().unwrap() >= 3,
        "{requests:?}"
    );
    let kinds = [
        "list",
        "list_dir",
        "get",
        "head",
        "put",
        "put_if_absent",
        "delete",
        "put_if_match",
    ];
    assert!(
        requests.keys().all(|k| kinds.contains(&k.as_str())),
        "{requests:?}"
    );
}

/// Run `hudi-keeper args` with a terminal on stdin, stdout and stderr (util-linux `script`
/// gives it one): whether it succeeded, and what the terminal showed.
fn run_on_a_terminal(args: &[&str]) -> (bool, String) {
    let quoted: Vec<String> = std::iter::once(env!("CARGO_BIN_EXE_hudi-keeper"))
        .chain(args.iter().copied())
        .map(|a| format!("'{}'", a.replace('\'', r"'\''")))
        .collect();
    let out = std::process::Command::new("script")
        .args([
            "--quiet",
            "--return",
            "--command",
            &quoted.join(" "),
            "/dev/null",
        ])
        .env("TERM", "xterm")
        .stdin(Stdio::null())
        .output()
        .expect("util-linux `script`");
    (
        out.status.success(),
        String::from_utf8_lossy(&out.stdout).into_owned(),
    )
}

/// The last state a bar showed for `instant` on `screen`: `(done, total, rest of the line)`.
fn last_bar(screen: &str, instant: &str) -> Option<(u64, u64, String)> {
    let from = screen.rfind(&format!("rolling back {instant} ["))?;
    let line = screen[from..].split(['\r', '\n']).next()?;
    let (_, after) = line.split_once("] ")?;
    let (counts, rest) = after.split_once(" files")?;
    let (done, total) = counts.split_once('/')?;
    Some((
        done.parse().ok()?,
        total.parse().ok()?,
        rest.trim_end().to_string(),
    ))
}

#[test]
fn on_a_terminal_each_instant_shows_files_done_rate_and_eta() {
    let t = failed_table();
    let (ok, screen) = run_on_a_terminal(&["rollback", &t.uri(), "--yes", "--lock", "filesystem"]);
    assert!(ok, "{screen}");
    let (done, total, rest) = last_bar(&screen, TF).unwrap_or_else(|| panic!("{screen}"));
    assert_eq!(done, total, "{screen}");
    assert!(total >= 2, "the two files of the failed write: {screen}");
    assert!(
        rest.starts_with(", ") && rest.contains("/s, ETA "),
        "{screen}"
    );
    assert!(
        screen.contains(&format!("rolled back {TF} deltacommit")),
        "{screen}"
    );

    // A restore: one bar per undone instant, in order.
    let t = table_with_two_commits();
    let (ok, screen) = run_on_a_terminal(&[
        "restore",
        &t.uri(),
        "--to-instant",
        "20200101000000000",
        "--yes",
        "--lock",
        "filesystem",
        "--min-instant-age",
        "0s",
    ]);
    assert!(ok, "{screen}");
    for instant in [TF, "20200101120000000"] {
        let (done, total, rest) =
            last_bar(&screen, instant).unwrap_or_else(|| panic!("{instant}: {screen}"));
        assert_eq!(done, total, "{screen}");
        assert!(rest.contains("/s, ETA "), "{screen}");
    }
    assert!(
        screen.find(&format!("rolling back {TF}")) < screen.find("rolling back 20200101120000000"),
        "{screen}"
    );
    assert!(screen.contains("Restored to 20200101000000000"), "{screen}");
}

#[test]
fn json_on_a_terminal_draws_no_bar() {
    let t = failed_table();
    let (ok, screen) = run_on_a_terminal(&[
        "rollback",
        &t.uri(),
        "--yes",
        "--json",
        "--lock",
        "filesystem",
    ]);
    assert!(ok, "{screen}");
    assert!(!screen.contains("rolling back"), "{screen}");
    assert!(screen.contains("\"files_deleted\""), "{screen}");
}

#[test]
fn without_a_terminal_nothing_but_the_summary_is_printed() {
    let t = failed_table();
    let out = run(&["rollback", &t.uri(), "--yes", "--lock", "filesystem"]);
    assert!(out.status.success(), "{}", stderr(&out));
    assert_eq!(
        stderr(&out),
        "",
        "no progress on a stderr that is not a terminal"
    );
    // The summary: one line per rolled-back instant, as before.
    let text = stdout(&out);
    let lines: Vec<&str> = text.lines().collect();
    assert_eq!(lines.len(), 1, "{text}");
    let (head, tail) = lines[0]
        .split_once(": ")
        .unwrap_or_else(|| panic!("{text}"));
    assert!(
        head.starts_with(&format!("rolled back {TF} deltacommit with rollback 20")),
        "{text}"
    );
    assert!(
        tail.starts_with("2 files deleted, 0 command blocks, metadata table: ")
            && tail.ends_with('s')
            && !tail.contains(" ms"),
        "{text}"
    );

    let t = table_with_two_commits();
    let out = run(&[
        "restore",
        &t.uri(),
        "--to-instant",
        "20200101000000000",
        "--yes",
        "--lock",
        "filesystem",
        "--min-instant-age",
        "0s",
    ]);
    assert!(out.status.success(), "{}", stderr(&out));
    assert_eq!(
        stderr(&out),
        "",
        "no progress on a stderr that is not a terminal"
    );
    let text = stdout(&out);
    let lines: Vec<&str> = text.lines().collect();
    assert_eq!(lines.len(), 3, "{text}");
    assert!(
        lines[0].starts_with("Restored to 20200101000000000 with restore 20"),
        "{text}"
    );
    assert!(
        lines[0].contains(": 2 instants undone, 3 files deleted, "),
        "{text}"
    );
    assert!(
        lines[1].starts_with(&format!("  undid {TF} deltacommit with rollback 20")),
        "{text}"
    );
    assert!(
        lines[2].starts_with("  undid 20200101120000000 deltacommit with rollback 20"),
        "{text}"
    );
}

#[test]
fn files_the_markers_missed_are_removed_by_the_leftover_guard_unless_it_is_off() {
    let missed = [
        "p1/missed-0_0-1-2_20200102000000000.parquet",
        "p1/.failed-0_20200102000000000.log.1_0-1-2",
    ];
    for guard_on in [true, false] {
        let t = failed_table();
        t.touch(&[missed[0]]);
        // Markers alone decide the rollback's plan: the files they missed stay behind it.
        let mut args = vec![
            "rollback",
            &t.uri(),
            "--yes",
            "--json",
            "--lock",
            "filesystem",
            "--no-listing-cross-check",
        ]
        .into_iter()
        .map(String::from)
        .collect::<Vec<_>>();
        if !guard_on {
            args.push("--no-leftover-guard".into());
        }
        let args: Vec<&str> = args.iter().map(String::as_str).collect();
        let out = run(&args);
        assert!(out.status.success(), "{}", stderr(&out));
        let v: serde_json::Value = serde_json::from_str(&stdout(&out)).unwrap();
        assert_eq!(v["rollbacks"][0]["files_deleted"], 1, "{v}");
        assert!(!t
            .path()
            .join("p1/failed-0_0-1-2_20200102000000000.parquet")
            .exists());
        if guard_on {
            let mut removed: Vec<&str> = v["leftover_guard"]["removed"]
                .as_array()
                .unwrap()
                .iter()
                .map(|x| x["path"].as_str().unwrap())
                .collect();
            removed.sort();
            let mut expected = missed.to_vec();
            expected.sort();
            assert_eq!(removed, expected, "{v}");
            for p in missed {
                assert!(!t.path().join(p).exists(), "{p}");
            }
        } else {
            assert!(v["leftover_guard"].is_null(), "{v}");
            for p in missed {
                assert!(t.path().join(p).exists(), "{p}");
            }
        }
        assert!(t
            .path()
            .join("p1/committed-0_0-1-2_20200101000000000.parquet")
            .exists());
        assert!(!t.path().join(".hoodie/lock").exists());
    }
}
