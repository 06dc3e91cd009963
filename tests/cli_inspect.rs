//! `hudi-keeper inspect` end to end: the real binary on hand-made tables, including bad input.

use hudi_keeper_test_support as common;

use common::{run, stderr, stdout, TableDir};
use serde_json::Value;

fn inspect_json(t: &TableDir, extra: &[&str]) -> Value {
    let uri = t.uri();
    let mut args = vec!["inspect", uri.as_str(), "--json"];
    args.extend_from_slice(extra);
    let out = run(&args);
    assert!(out.status.success(), "inspect failed: {}", stderr(&out));
    serde_json::from_str(&stdout(&out)).expect("inspect --json prints one JSON document")
}

/// The helpers (test-support, a library compiled without `CARGO_BIN_EXE_hudi-keeper`) find the
/// binary cargo built for these suites.
#[test]
fn the_helpers_run_the_binary_cargo_built_for_the_tests() {
    let cargo = std::path::Path::new(env!("CARGO_BIN_EXE_hudi-keeper"));
    let found = common::bin_path();
    assert_eq!(
        std::fs::canonicalize(&found).unwrap(),
        std::fs::canonicalize(cargo).unwrap(),
        "{} is not {}",
        found.display(),
        cargo.display()
    );
}

#[test]
fn json_lists_instants_and_judges_pending_ones() {
    let t = TableDir::v8_mor();
    t.touch(&[
        ".hoodie/timeline/20200101000000000.deltacommit.requested",
        ".hoodie/timeline/20200101000000000.deltacommit.inflight",
        ".hoodie/timeline/20200101000000000_20200101000001000.deltacommit",
        ".hoodie/timeline/20200102000000000.deltacommit.requested",
        ".hoodie/timeline/20200102000000000.deltacommit.inflight",
        ".hoodie/timeline/20200103000000000.compaction.requested",
        ".hoodie/.temp/20200102000000000/p1/a_0-1-2_20200102000000000.parquet.marker.CREATE",
        ".hoodie/.temp/20200102000000000/p1/.a_20200101000000000.log.1_0-1-2.marker.APPEND",
    ]);
    // Written an hour ago, by writers the operator knows to be LAZY.
    t.age_all(std::time::Duration::from_secs(3600));
    let v = inspect_json(&t, &["--assume-lazy-writers"]);
    assert_eq!(v["table"]["name"], "t");
    assert_eq!(v["table"]["type"], "MERGE_ON_READ");
    assert_eq!(v["table"]["version"], 8);
    assert_eq!(v["table"]["timeline_layout"], 2);
    let instants = v["instants"].as_array().unwrap();
    assert_eq!(instants.len(), 3);
    assert_eq!(instants[0]["requested_time"], "20200101000000000");
    assert_eq!(instants[0]["state"], "completed");
    assert_eq!(instants[0]["completion_time"], "20200101000001000");
    assert_eq!(instants[1]["state"], "inflight");
    assert!(instants[1]["completion_time"].is_null());
    let pending = v["pending"].as_array().unwrap();
    assert_eq!(pending.len(), 2);
    // Newest first: the compaction is never a candidate.
    assert_eq!(pending[0]["action"], "compaction");
    assert_eq!(pending[0]["verdict"], "not_a_candidate");
    assert_eq!(pending[1]["requested_time"], "20200102000000000");
    assert_eq!(pending[1]["verdict"], "no_heartbeat");
    assert!(pending[1]["heartbeat_age_ms"].is_null());
    assert!(pending[1]["reason"]
        .as_str()
        .unwrap()
        .contains("no heartbeat"));
    assert_eq!(pending[1]["markers"]["total"], 2);
    assert_eq!(pending[1]["markers"]["kind"], "DIRECT");
}

#[test]
fn a_fresh_heartbeat_makes_an_instant_live() {
    let t = TableDir::v8_mor();
    t.touch(&[
        ".hoodie/timeline/20200102000000000.deltacommit.requested",
        ".hoodie/.heartbeat/20200102000000000",
    ]);
    let v = inspect_json(&t, &["--heartbeat-interval", "60s"]);
    let p = &v["pending"][0];
    assert_eq!(p["verdict"], "live");
    assert!(p["heartbeat_age_ms"].as_i64().unwrap() < 60_000);
}

#[test]
fn the_text_output_names_the_table_and_the_verdicts() {
    let t = TableDir::v8_mor();
    t.touch(&[".hoodie/timeline/20200102000000000.deltacommit.requested"]);
    t.age_all(std::time::Duration::from_secs(3600));
    let out = run(&["inspect", &t.uri(), "--assume-lazy-writers"]);
    assert!(out.status.success(), "{}", stderr(&out));
    let text = stdout(&out);
    assert!(
        text.contains("MERGE_ON_READ, table version 8, timeline layout 2"),
        "{text}"
    );
    assert!(text.contains("no_heartbeat"), "{text}");
}

#[test]
fn a_corrupt_hoodie_properties_is_a_clear_error() {
    let t = TableDir::empty();
    t.write(".hoodie/hoodie.properties", &[0xff, 0xfe, 0x00, 0x13, 0x37]);
    let out = run(&["inspect", &t.uri()]);
    assert_eq!(out.status.code(), Some(1));
    let err = stderr(&out);
    assert!(err.contains("hoodie.properties"), "{err}");
    assert!(err.contains("corrupt"), "{err}");
    assert!(!err.contains("panicked"), "{err}");

    let t = TableDir::with_properties("hoodie.table.name=x\nhoodie.table.type=MERGE_ON_READ\n");
    let out = run(&["inspect", &t.uri()]);
    assert_eq!(out.status.code(), Some(1));
    assert!(
        stderr(&out).contains("has no `hoodie.table.version`"),
        "{}",
        stderr(&out)
    );
}

#[test]
fn an_unknown_table_version_is_a_clear_error() {
    for (v, needle) in [("7", "intermediate"), ("4", "older"), ("12", "newer")] {
        let t = TableDir::with_properties(&format!("hoodie.table.version={v}\n"));
        let out = run(&["inspect", &t.uri()]);
        assert_eq!(out.status.code(), Some(1));
        let err = stderr(&out);
        assert!(err.contains(&format!("hoodie.table.version={v}")), "{err}");
        assert!(err.contains(needle), "{err}");
    }
}

#[test]
fn junk_timeline_names_are_reported_not_fatal() {
    let t = TableDir::v8_mor();
    t.touch(&[
        ".hoodie/timeline/20200101000000000_20200101000001000.deltacommit",
        ".hoodie/timeline/20200101000000000.bogus",
        ".hoodie/timeline/2020_x.commit",
        ".hoodie/timeline/README.txt",
        ".hoodie/timeline/history/manifest_1",
    ]);
    let v = inspect_json(&t, &[]);
    assert_eq!(v["instants"].as_array().unwrap().len(), 1);
    let malformed: Vec<&str> = v["malformed"]
        .as_array()
        .unwrap()
        .iter()
        .map(|m| m["name"].as_str().unwrap())
        .collect();
    assert_eq!(malformed, vec!["20200101000000000.bogus", "2020_x.commit"]);
}

#[test]
fn an_empty_table_has_an_empty_timeline() {
    let t = TableDir::v8_mor();
    let v = inspect_json(&t, &[]);
    assert_eq!(v["instants"], serde_json::json!([]));
    assert_eq!(v["pending"], serde_json::json!([]));
    let out = run(&["inspect", &t.uri()]);
    assert!(stdout(&out).contains("the timeline is empty"));
}

#[test]
fn a_table_uri_that_does_not_exist_is_a_clear_error() {
    let out = run(&["inspect", "/no/such/hudi/table"]);
    assert_eq!(out.status.code(), Some(1));
    assert!(
        stderr(&out).contains("`/no/such/hudi/table` does not exist"),
        "{}",
        stderr(&out)
    );

    let t = TableDir::empty();
    let out = run(&["inspect", &format!("file://{}", t.uri())]);
    assert_eq!(out.status.code(), Some(1));
    assert!(
        stderr(&out).contains("is not a Hudi table"),
        "{}",
        stderr(&out)
    );

    let out = run(&["inspect", "ftp://host/table"]);
    assert_eq!(out.status.code(), Some(1));
    assert!(
        stderr(&out).contains("unsupported scheme"),
        "{}",
        stderr(&out)
    );
}

#[test]
fn bad_flags_are_usage_errors() {
    let out = run(&["inspect", "/tmp", "--heartbeat-interval", "soon"]);
    assert_eq!(out.status.code(), Some(2));
    assert!(stderr(&out).contains("not a duration"), "{}", stderr(&out));
}

#[test]
fn inspect_tells_which_lock_the_writers_leave_behind() {
    let t = TableDir::v8_mor();
    let v = inspect_json(&t, &[]);
    assert!(v["lock"]["filesystem_lock_age_ms"].is_null());
    assert_eq!(v["lock"]["storage_lock_file"], false);
    t.touch(&[".hoodie/lock"]);
    let v = inspect_json(&t, &[]);
    assert!(v["lock"]["filesystem_lock_age_ms"].as_i64().unwrap() >= 0);
    assert!(v["lock"]["hint"]
        .as_str()
        .unwrap()
        .contains("--lock filesystem"));
    assert_eq!(v["lock"]["suggested_provider"], "filesystem");
    t.touch(&[".hoodie/.locks/table_lock.json"]);
    let text = stdout(&run(&["inspect", &t.uri()]));
    assert!(text.contains("Lock      `.hoodie/lock` exists"), "{text}");
}

#[test]
fn inspect_reads_the_storage_lock_file_and_names_its_holder() {
    let t = TableDir::v8_mor();
    let far = chrono::Utc::now().timestamp_millis() + 600_000;
    t.write(
        ".hoodie/.locks/table_lock.json",
        format!(r#"{{"expired":false,"validUntil":{far},"owner":"writer-7"}}"#).as_bytes(),
    );
    let v = inspect_json(&t, &[]);
    assert_eq!(v["lock"]["suggested_provider"], "storage");
    assert_eq!(v["lock"]["storage_lock"]["held"], true);
    assert_eq!(v["lock"]["storage_lock"]["owner"], "writer-7");
    assert!(v["lock"]["hint"]
        .as_str()
        .unwrap()
        .contains("held now by `writer-7`"));
    t.write(
        ".hoodie/.locks/table_lock.json",
        br#"{"expired":true,"validUntil":1,"owner":"writer-7"}"#,
    );
    let v = inspect_json(&t, &[]);
    assert_eq!(v["lock"]["storage_lock"]["held"], false);
    assert!(v["lock"]["hint"].as_str().unwrap().contains("free now"));
    t.write(".hoodie/.locks/table_lock.json", b"{broken");
    let v = inspect_json(&t, &[]);
    assert!(v["lock"]["suggested_provider"].is_null());
    assert!(v["lock"]["storage_lock"]["corrupt"]
        .as_str()
        .unwrap()
        .contains("not a Hudi storage lock file"));
}

/// `hudi-keeper audit`: the classes in JSON and in the text report, on a hand-made table.
#[test]
fn audit_classifies_data_files_by_their_instant() {
    let t = TableDir::v8_mor();
    t.touch(&[
        ".hoodie/timeline/20200101000000000.deltacommit.requested",
        ".hoodie/timeline/20200101000000000.deltacommit.inflight",
        ".hoodie/timeline/20200101000000000_20200101000001000.deltacommit",
        ".hoodie/timeline/20200102000000000.deltacommit.requested",
        ".hoodie/timeline/20200102000000000.deltacommit.inflight",
        "p1/a_0-1-2_20200101000000000.parquet",
        "p1/.a_20200102000000000.log.1_0-1-2",
        "p1/.hoodie_partition_metadata",
        // older than the oldest active instant, on no timeline, and no archive: an orphan
        "p2/b_0-1-2_20191231000000000.parquet",
    ]);
    let uri = t.uri();
    let out = run(&["audit", uri.as_str(), "--json"]);
    assert!(out.status.success(), "audit failed: {}", stderr(&out));
    let v: Value = serde_json::from_str(&stdout(&out)).expect("audit --json");
    assert_eq!(v["classes"]["committed"]["files"], 1, "{v:#}");
    assert_eq!(v["classes"]["pending"]["files"], 1, "{v:#}");
    assert_eq!(v["classes"]["orphan"]["files"], 1, "{v:#}");
    assert_eq!(v["classes"]["rollback_leftover"]["files"], 0, "{v:#}");
    assert_eq!(v["partitions"]["p2"]["orphan"]["files"], 1, "{v:#}");
    assert_eq!(
        v["examples"]["orphan"][0]["path"],
        "p2/b_0-1-2_20191231000000000.parquet"
    );
    assert_eq!(v["other_files"], 1);
    assert!(v["requests"]["list"].as_u64().unwrap_or(0) >= 1, "{v:#}");

    let out = run(&["audit", uri.as_str()]);
    assert!(out.status.success(), "audit failed: {}", stderr(&out));
    let text = stdout(&out);
    assert!(text.contains("orphan"), "{text}");
    assert!(
        text.contains("p2/b_0-1-2_20191231000000000.parquet"),
        "{text}"
    );
}

/// `hudi-keeper audit --repair`: a dry run changes nothing, a floor under an hour is refused,
/// a lock decision is needed, and the orphan older than the floor goes.
#[test]
fn audit_repair_removes_old_orphans_only_with_a_lock_decision() {
    let t = TableDir::v8_mor();
    t.touch(&[
        ".hoodie/timeline/20200101000000000.deltacommit.requested",
        ".hoodie/timeline/20200101000000000.deltacommit.inflight",
        ".hoodie/timeline/20200101000000000_20200101000001000.deltacommit",
        "p1/a_0-1-2_20200101000000000.parquet",
        "p2/b_0-1-2_20191231000000000.parquet",
    ]);
    t.age_all(std::time::Duration::from_secs(2 * 3600));
    let uri = t.uri();
    let orphan = t.path().join("p2/b_0-1-2_20191231000000000.parquet");

    let out = run(&[
        "audit",
        uri.as_str(),
        "--repair",
        "--older-than",
        "1h",
        "--dry-run",
        "--json",
    ]);
    assert!(out.status.success(), "{}", stderr(&out));
    let v: Value = serde_json::from_str(&stdout(&out)).expect("json");
    assert_eq!(
        v["repair"]["removed"][0]["path"],
        "p2/b_0-1-2_20191231000000000.parquet"
    );
    assert_eq!(v["repair"]["dry_run"], true);
    assert!(orphan.exists());

    let out = run(&[
        "audit",
        uri.as_str(),
        "--repair",
        "--older-than",
        "30m",
        "--yes",
    ]);
    assert_eq!(out.status.code(), Some(1), "{}", stdout(&out));
    assert!(stderr(&out).contains("1 hour"), "{}", stderr(&out));
    assert!(orphan.exists());

    let out = run(&[
        "audit",
        uri.as_str(),
        "--repair",
        "--older-than",
        "1h",
        "--yes",
    ]);
    assert_eq!(out.status.code(), Some(2), "{}", stdout(&out));
    assert!(
        stderr(&out).contains("no lock provider chosen"),
        "{}",
        stderr(&out)
    );
    assert!(orphan.exists());

    let out = run(&[
        "audit",
        uri.as_str(),
        "--repair",
        "--older-than",
        "1h",
        "--yes",
        "--lock",
        "filesystem",
    ]);
    assert!(out.status.success(), "{}", stderr(&out));
    assert!(
        stdout(&out).contains("Removed 1 file ("),
        "{}",
        stdout(&out)
    );
    assert!(!orphan.exists());
    assert!(t
        .path()
        .join("p1/a_0-1-2_20200101000000000.parquet")
        .exists());
}

#[test]
fn audit_adds_the_audits_summary_to_the_report() {
    let rt = tokio::runtime::Runtime::new().unwrap();
    let work = tempfile::tempdir().unwrap();
    let dir = work.path().join("t");
    common::fixtures::build_local(&rt, &dir, common::fixtures::Kind::CowV8);
    // Older than the oldest active instant, on no timeline, the archive read whole: an orphan.
    let orphan = "p1/old-0_0-1-1_20231201000000000.parquet";
    std::fs::write(dir.join(orphan), b"orphan").unwrap();
    let uri = dir.display().to_string();

    let out = run(&["inspect", &uri, "--json", "--audit"]);
    assert!(out.status.success(), "{}", stderr(&out));
    let v: Value = serde_json::from_str(&stdout(&out)).unwrap();
    assert_eq!(v["pending"].as_array().map(Vec::len), Some(1), "{v:#}");
    assert_eq!(v["audit"]["classes"]["orphan"]["files"], 1, "{v:#}");
    assert_eq!(v["audit"]["classes"]["pending"]["files"], 3, "{v:#}");
    assert_eq!(v["audit"]["classes"]["committed"]["files"], 3, "{v:#}");
    assert_eq!(v["audit"]["examples"]["orphan"][0]["path"], orphan);

    let out = run(&["inspect", &uri, "--json"]);
    assert!(out.status.success(), "{}", stderr(&out));
    let v: Value = serde_json::from_str(&stdout(&out)).unwrap();
    assert!(v.get("audit").is_none(), "no audit unless asked: {v:#}");

    let out = run(&["inspect", &uri, "--audit"]);
    assert!(out.status.success(), "{}", stderr(&out));
    let text = stdout(&out);
    assert!(text.contains("\nAudit\n"), "{text}");
    assert!(
        text.lines()
            .any(|l| l.trim_start().starts_with("orphan") && l.contains(" 1 ")),
        "{text}"
    );
    assert!(text.contains(orphan), "{text}");
}
