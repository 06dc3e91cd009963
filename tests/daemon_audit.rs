//! The table audit in the daemon (issue #33): `hudi-keeper serve` audits each table on its
//! `audit_interval`, shows the result in `GET /api/v1/tables/{name}/audit`, the table's view and
//! `/metrics`; an audit past its request budget is reported cut short and exports no counts; an
//! audit never holds up polls, nor a shutdown. The real binary, on local tables and (the hung
//! store) on the S3-compatible server on loopback behind a proxy.

use hudi_keeper_test_support as common;

use std::time::Duration;

use common::config::DaemonConfig;
use common::daemon::Daemon;
use common::fixtures::{build_local, Kind, TF};
use common::http::request;
use common::proxy::SlowProxy;
use common::runs::{daemon_store_toml, s3_fixture};
use common::s3::endpoint;

const TOKEN: &str = "test-token-0123456789abcdef";

fn audit_doc(d: &Daemon, table: &str) -> Option<serde_json::Value> {
    let r = d.get(&format!("/api/v1/tables/{table}/audit"));
    (r.status == 200).then(|| r.json())
}

#[test]
fn a_scheduled_audit_finds_a_planted_leftover_and_the_api_and_metrics_show_it() {
    let rt = tokio::runtime::Runtime::new().unwrap();
    let work = tempfile::tempdir().unwrap();
    let dir = work.path().join("t");
    build_local(&rt, &dir, Kind::CowV8);
    let off = work.path().join("off");
    build_local(&rt, &off, Kind::CowV8);
    let d = Daemon::start(
        work.path(),
        &DaemonConfig::new()
            .server("auth_token", TOKEN)
            .defaults("poll_interval", "500ms")
            .defaults("assume_lazy_writers", "true")
            .defaults("audit_interval", "1s")
            // The leftover guard would remove the planted file (tests/daemon_leftovers.rs).
            .defaults("leftover_guard_interval", "0")
            .lock("provider", "filesystem")
            .table("t", &dir.display().to_string())
            .table_with(
                "off",
                &off.display().to_string(),
                &[("failed_writes_policy", "observe"), ("audit_interval", "0")],
            )
            .to_string(),
    );
    d.wait_for("the rollback", Duration::from_secs(20), || {
        (d.table("t")["status"]["rollbacks"] == 1).then_some(())
    });
    // A file of the rolled-back write put back after its rollback (a zombie writer).
    let zombie = format!("p2/zombie-0_0-9-9_{TF}.parquet");
    std::fs::write(dir.join(&zombie), b"late").unwrap();
    let doc = d.wait_for(
        "an audit that sees the leftover",
        Duration::from_secs(30),
        || {
            audit_doc(&d, "t").filter(|a| {
                a["last_complete"]["summary"]["classes"]["rollback_leftover"]["files"] == 1
            })
        },
    );
    let complete = &doc["last_complete"];
    assert_eq!(complete["outcome"], "complete", "{doc:#}");
    assert_eq!(complete["trigger"], "scheduled", "{doc:#}");
    assert!(complete["requests"].as_u64().unwrap() > 0, "{doc:#}");
    assert_eq!(complete["max_requests"], 100_000, "{doc:#}");
    let summary = &complete["summary"];
    assert_eq!(summary["classes"]["committed"]["files"], 3, "{doc:#}");
    assert_eq!(
        summary["examples"]["rollback_leftover"][0]["path"],
        zombie.as_str()
    );
    assert_eq!(
        summary["partitions"]["p2"]["rollback_leftover"]["files"], 1,
        "{doc:#}"
    );
    assert_eq!(summary["partitions_with_findings"], 1, "{doc:#}");
    // The fixture has no metadata table: the comparison is not made, and says why.
    assert_eq!(summary["metadata_table"]["checked"], false, "{doc:#}");
    assert!(
        summary["metadata_table"]["not_checked"]
            .as_str()
            .is_some_and(|w| w.contains("metadata table")),
        "{doc:#}"
    );
    // The table's view, in short.
    let view = d.table("t");
    assert_eq!(view["audit"]["files"]["rollback_leftover"], 1, "{view:#}");
    assert!(view["audit"]["last_complete_ms"].as_i64().unwrap() > 0);
    assert_eq!(view["settings"]["audit_interval_ms"], 1000);
    // The metrics.
    assert_eq!(
        d.metric(r#"hudi_keeper_audit_files{class="rollback_leftover",table="t"}"#),
        Some(1.0)
    );
    assert_eq!(
        d.metric(r#"hudi_keeper_audit_bytes{class="rollback_leftover",table="t"}"#),
        Some(4.0)
    );
    assert!(
        d.metric(r#"hudi_keeper_audit_last_complete_timestamp_seconds{table="t"}"#)
            .unwrap()
            > 1.0e9
    );
    assert!(d.metric(r#"hudi_keeper_audits_total{outcome="complete",table="t"}"#) >= Some(1.0));
    assert!(d.metric("hudi_keeper_audit_duration_seconds_count") >= Some(1.0));
    // The audit only reads: the leftover is still there.
    assert!(dir.join(&zombie).exists());

    // audit_interval = 0: no scheduled audit, and a clear 404 until one is asked for.
    std::thread::sleep(Duration::from_secs(2));
    let none = d.get("/api/v1/tables/off/audit");
    assert_eq!(none.status, 404, "{}", none.body);
    assert!(none.body.contains("audit_interval = 0"), "{}", none.body);
    assert!(d
        .metric(r#"hudi_keeper_audit_files{class="committed",table="off"}"#)
        .is_none());
    let path = "/api/v1/tables/off/audit";
    let refused = request(&d.addr, "POST", path, None, None);
    assert_eq!(refused.status, 401, "{}", refused.body);
    let queued = request(&d.addr, "POST", path, Some(TOKEN), None);
    assert_eq!(queued.status, 202, "{}", queued.body);
    let manual = d.wait_for("the audit asked for", Duration::from_secs(20), || {
        audit_doc(&d, "off")
    });
    assert_eq!(manual["last"]["trigger"], "manual", "{manual:#}");
    assert_eq!(manual["last"]["outcome"], "complete", "{manual:#}");
    assert_eq!(manual["audit_interval_ms"], serde_json::Value::Null);
    // The failed write of this observe table is left alone: its files are pending.
    assert_eq!(
        manual["last"]["summary"]["classes"]["pending"]["files"], 3,
        "{manual:#}"
    );
}

#[test]
fn a_tiny_request_budget_cuts_the_audit_short_and_exports_no_counts() {
    let rt = tokio::runtime::Runtime::new().unwrap();
    let work = tempfile::tempdir().unwrap();
    let dir = work.path().join("t");
    build_local(&rt, &dir, Kind::CowV8);
    let d = Daemon::start(
        work.path(),
        &DaemonConfig::new()
            .defaults("poll_interval", "500ms")
            .defaults("failed_writes_policy", "observe")
            .defaults("audit_interval", "1s")
            .defaults("audit_max_requests", "3")
            .table("t", &dir.display().to_string())
            .to_string(),
    );
    let doc = d.wait_for("two audits", Duration::from_secs(30), || {
        audit_doc(&d, "t").filter(|a| a["runs"].as_u64() >= Some(2))
    });
    let last = &doc["last"];
    assert_eq!(last["outcome"], "cut_short", "{doc:#}");
    let why = last["reason"].as_str().unwrap_or_default();
    assert!(why.contains("audit_max_requests = 3"), "{why}");
    assert_eq!(last["requests"], 3, "{doc:#}");
    assert!(last["summary"].is_null(), "no counts from it: {doc:#}");
    assert!(doc["last_complete"].is_null(), "{doc:#}");
    let view = d.table("t");
    assert_eq!(view["audit"]["last_outcome"], "cut_short", "{view:#}");
    assert!(view["audit"]["files"].is_null(), "{view:#}");
    let text = d.get("/metrics").body;
    assert!(
        !text
            .lines()
            .any(|l| l.starts_with("hudi_keeper_audit_files{") && l.contains("table=\"t\"")),
        "{text}"
    );
    assert!(d.metric(r#"hudi_keeper_audits_total{outcome="cut_short",table="t"}"#) >= Some(2.0));
    assert_eq!(
        d.metric(r#"hudi_keeper_audits_total{outcome="complete",table="t"}"#),
        Some(0.0)
    );
    assert_eq!(
        d.metric(r#"hudi_keeper_audit_last_complete_timestamp_seconds{table="t"}"#),
        Some(0.0)
    );
}

/// A daemon auditing an observed table on the S3-compatible server every second, behind a proxy
/// on which the audit's listing of the first partition hangs (polls list only `.hoodie/`); `server`
/// is more of the `[server]` section. The proxy and the daemon's folder live as long as the first.
fn audit_hanging_on_the_store(
    bucket_prefix: &str,
    server: &str,
) -> ((SlowProxy, tempfile::TempDir), Daemon) {
    let rt = tokio::runtime::Runtime::new().unwrap();
    let (f, root) = s3_fixture(&rt, bucket_prefix, Kind::CowV8, false);
    let proxy = SlowProxy::start(&endpoint(), Duration::ZERO);
    // The audit's one listing of the table, past `.hoodie/` (S3's `start-after`); polls never
    // list that way.
    proxy.hang(&["list-type=2", &format!("prefix={root}%2F"), "start-after="]);
    let work = tempfile::tempdir().unwrap();
    let d = Daemon::start(
        work.path(),
        &format!(
            "[server]\nstate_dir = \"state\"\n{server}[defaults]\npoll_interval = \"500ms\"\nfailed_writes_policy = \"observe\"\naudit_interval = \"1s\"\n{}[[tables]]\nname = \"t\"\nuri = \"{}\"\n",
            daemon_store_toml(&proxy.endpoint()),
            f.uri
        ),
    );
    ((proxy, work), d)
}

#[test]
fn polls_go_on_and_sigterm_does_not_wait_while_an_audit_hangs_on_the_store() {
    // One poll slot: an audit that took it would stop the polls.
    let (_proxy_and_dir, d) = audit_hanging_on_the_store(
        "daemon-audit-hang",
        "max_concurrent_polls = 1\nshutdown_grace = \"60s\"\n",
    );
    let proxy = &_proxy_and_dir.0;
    d.wait_for("the audit to hang", Duration::from_secs(30), || {
        let running = !d.table("t")["audit"]["running_since_ms"].is_null();
        (running && proxy.hung() > 0).then_some(())
    });
    let polls = |d: &Daemon| d.table("t")["status"]["polls"].as_u64().unwrap_or(0);
    let before = polls(&d);
    std::thread::sleep(Duration::from_secs(3));
    let status = d.table("t");
    assert!(
        polls(&d) >= before + 3,
        "polls stopped while the audit hangs: {before} -> {}\n{}",
        polls(&d),
        d.logs()
    );
    assert_eq!(status["status"]["last_poll_ok"], true, "{status:#}");
    assert!(!status["audit"]["running_since_ms"].is_null(), "{status:#}");
    assert!(proxy.hung() > 0);
    // Far less than shutdown_grace: the hung audit is dropped at once.
    d.terminate_cleanly(Duration::from_secs(15));
}

#[test]
fn an_audit_that_hangs_fails_at_audit_timeout_and_frees_its_slot() {
    let (_proxy_and_dir, d) =
        audit_hanging_on_the_store("daemon-audit-timeout", "audit_timeout = \"1s\"\n");
    // The one audit slot is freed each time: the audits go on, each failing.
    let doc = d.wait_for("two audits timed out", Duration::from_secs(30), || {
        audit_doc(&d, "t").filter(|a| a["runs"].as_u64() >= Some(2))
    });
    assert_eq!(doc["last"]["outcome"], "failed", "{doc:#}");
    let why = doc["last"]["reason"].as_str().unwrap_or_default();
    assert!(why.contains("server.audit_timeout"), "{why}");
    assert!(doc["last_complete"].is_null(), "{doc:#}");
    assert!(d.metric(r#"hudi_keeper_audits_total{outcome="failed",table="t"}"#) >= Some(2.0));
}
