//! `hudi-keeper serve`, end to end: the real binary against tables on the local file system and
//! on an S3-compatible server on loopback (moto, started by `scripts/test`).

use hudi_keeper_test_support as common;

use std::time::{Duration, Instant};

use common::config::DaemonConfig;
use common::daemon::Daemon;
use common::fixtures::{build_local, instant_now, Fixture, Kind, T1, T2, TF};
use common::http::request;
use common::s3::{endpoint, s3_store, unique, BUCKET};
use hudi_keeper_core::protocol::heartbeat::Heartbeat;
use tokio_util::sync::CancellationToken;

const TOKEN: &str = "test-token-0123456789abcdef";

fn s3_options_toml() -> String {
    format!(
        "[defaults.storage_options]\naws_endpoint = \"{}\"\naws_allow_http = \"true\"\naws_region = \"us-east-1\"\naws_access_key_id = \"test\"\naws_secret_access_key = \"test\"\n",
        endpoint()
    )
}

/// Whether `t` is gone from the table: no pending timeline file, no data file (a listing
/// only, so it can run while a rollback deletes).
fn rolled_back(f: &Fixture, rt: &tokio::runtime::Runtime, t: &str) -> bool {
    let keys: Vec<String> = rt
        .block_on(
            f.storage()
                .list(&hudi_keeper_core::storage::RelPath::root()),
        )
        .expect("list the table")
        .into_iter()
        .map(|m| m.path.to_string())
        .collect();
    let pending = keys.iter().any(|k| {
        k.contains(&format!("/{t}."))
            && (k.ends_with(".inflight") || k.ends_with(".requested"))
            && !k.contains("rollback")
    });
    !pending
        && !keys
            .iter()
            .any(|k| !k.starts_with(".hoodie") && k.contains(t))
}

#[test]
fn a_dead_writer_is_rolled_back_within_a_poll_of_expiry_and_live_writers_never_are() {
    let rt = tokio::runtime::Runtime::new().unwrap();
    let root = unique("daemon-writers");
    let uri = format!("s3://{BUCKET}/{root}");
    let f = rt.block_on(Fixture::build_in(
        s3_store(),
        &root,
        &uri,
        Kind::CowV8,
        false,
    ));
    let work = tempfile::tempdir().unwrap();
    let d = Daemon::start(
        work.path(),
        &format!(
            "[server]\nstate_dir = \"state\"\n[defaults]\npoll_interval = \"1s\"\nheartbeat_interval = \"1s\"\nheartbeat_tolerable_misses = 2\nclock_skew_margin = \"500ms\"\nmin_instant_age = \"10s\"\nassume_lazy_writers = true\n[defaults.lock]\nprovider = \"storage\"\nstorage_validity = \"20s\"\nstorage_renew_interval = \"2s\"\n{}[[tables]]\nname = \"writers\"\nuri = \"{uri}\"\n",
            s3_options_toml()
        ),
    );
    // The failed write (no heartbeat file, on a table whose writers are LAZY) goes once it is
    // min_instant_age old by the store's clock.
    d.wait_for(
        "the old failed write to be rolled back",
        Duration::from_secs(30),
        || rolled_back(&f, &rt, TF).then_some(()),
    );

    // Four writers with live heartbeats (1 s interval, as configured).
    let token = CancellationToken::new();
    let writers: Vec<String> = (0..4).map(|i| instant_now(i * 10)).collect();
    let mut beats = Vec::new();
    for t in &writers {
        rt.block_on(f.start_write(t));
        beats.push(Some(
            rt.block_on(Heartbeat::start(
                f.storage(),
                t,
                Duration::from_secs(1),
                token.clone(),
            ))
            .unwrap(),
        ));
    }
    std::thread::sleep(Duration::from_secs(2));
    // Writer 3 dies; writer 1 pauses for one interval (shorter than the tolerance) and goes on.
    let died = Instant::now();
    rt.block_on(beats[3].take().unwrap().abandon());
    rt.block_on(beats[1].take().unwrap().abandon());
    std::thread::sleep(Duration::from_secs(1));
    beats[1] = Some(
        rt.block_on(Heartbeat::start(
            f.storage(),
            &writers[1],
            Duration::from_secs(1),
            token.clone(),
        ))
        .unwrap(),
    );
    // Poll interval + expiry (1 s × 2 misses + 0.5 s margin) + a few seconds.
    let bound = Duration::from_secs(1) + Duration::from_millis(2_500) + Duration::from_secs(4);
    d.wait_for("the dead writer to be rolled back", bound, || {
        rolled_back(&f, &rt, &writers[3]).then_some(())
    });
    let took = died.elapsed();
    // Let the live writers run through several more polls.
    std::thread::sleep(Duration::from_secs(5));
    for t in &writers[..3] {
        assert!(
            !rolled_back(&f, &rt, t),
            "live writer {t} was rolled back\n{}",
            d.logs()
        );
    }
    let status = d.table("writers");
    assert_eq!(status["status"]["rollbacks"], 2, "{status}");
    let live: Vec<_> = status["status"]["pending"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|p| p["verdict"] == "live")
        .collect();
    assert_eq!(live.len(), 3, "{status}");
    assert_eq!(
        d.metric(
            r#"hudi_keeper_rollbacks_total{outcome="success",table="writers",trigger="auto"}"#
        ),
        Some(2.0)
    );
    eprintln!("dead writer rolled back {:.1} s after its last heartbeat (bound {:.1} s); 3 live writers, 0 false rollbacks", took.as_secs_f64(), bound.as_secs_f64());
    for b in beats.into_iter().flatten() {
        rt.block_on(b.stop()).unwrap();
    }
    d.terminate_cleanly(Duration::from_secs(20));
}

/// `serve` with the API token, the file-system lock and table `t` at `table_dir` (the fixture
/// `f`, its writers lazy) polled once an hour, once its first poll rolled back the failed write.
fn serve_one_table_with_the_token(
    dir: &std::path::Path,
    table_dir: &std::path::Path,
    f: &Fixture,
    rt: &tokio::runtime::Runtime,
) -> Daemon {
    let config = DaemonConfig::new()
        .server("auth_token", TOKEN)
        .defaults("poll_interval", "1h")
        .defaults("assume_lazy_writers", "true")
        .lock("provider", "filesystem")
        .table("t", &table_dir.display().to_string());
    let d = Daemon::start(dir, &config.to_string());
    d.wait_for("the first poll", Duration::from_secs(20), || {
        rolled_back(f, rt, TF).then_some(())
    });
    d
}

#[test]
fn the_manual_rollback_api_needs_the_token_and_returns_the_plan_or_the_result() {
    let rt = tokio::runtime::Runtime::new().unwrap();
    let work = tempfile::tempdir().unwrap();
    let table_dir = work.path().join("t");
    let f = build_local(&rt, &table_dir, Kind::CowV8);
    let d = serve_one_table_with_the_token(work.path(), &table_dir, &f, &rt);
    // A new failed write, which the next scheduled poll (an hour away) would find.
    let t2 = "20240101030000000";
    rt.block_on(f.start_write(t2));
    common::age_all(&table_dir, Duration::from_secs(3600));
    let path = "/api/v1/tables/t/rollback";
    let none = request(&d.addr, "POST", path, None, Some("{}"));
    assert_eq!(none.status, 401, "{}", none.body);
    assert!(none.json()["error"]
        .as_str()
        .unwrap()
        .contains("bearer token"));
    let wrong = request(
        &d.addr,
        "POST",
        path,
        Some("not-the-token-at-all"),
        Some("{}"),
    );
    assert_eq!(wrong.status, 401);
    let plan = request(
        &d.addr,
        "POST",
        path,
        Some(TOKEN),
        Some(r#"{"dry_run": true}"#),
    );
    assert_eq!(plan.status, 200, "{}", plan.body);
    let plan = plan.json();
    assert_eq!(plan["dry_run"], true);
    assert_eq!(plan["rollbacks"][0]["instant"], t2);
    assert!(!rolled_back(&f, &rt, t2), "a dry run changed the table");
    let bad = request(
        &d.addr,
        "POST",
        path,
        Some(TOKEN),
        Some(r#"{"instnt": "x"}"#),
    );
    assert_eq!(bad.status, 422, "{}", bad.body);
    assert!(bad.json()["error"].is_string());
    let done = request(
        &d.addr,
        "POST",
        path,
        Some(TOKEN),
        Some(&format!(r#"{{"instant": "{t2}"}}"#)),
    );
    assert_eq!(done.status, 200, "{}", done.body);
    assert_eq!(done.json()["rollbacks"][0]["instant"], t2);
    assert!(rolled_back(&f, &rt, t2));
    // A completed instant is refused with the reason.
    let refused = request(
        &d.addr,
        "POST",
        path,
        Some(TOKEN),
        Some(r#"{"instant": "20240101000000000"}"#),
    );
    assert_eq!(refused.status, 409, "{}", refused.body);
    assert!(refused.body.contains("restore"), "{}", refused.body);
    assert_eq!(
        d.metric(r#"hudi_keeper_rollbacks_total{outcome="success",table="t",trigger="manual"}"#),
        Some(1.0)
    );
    assert_eq!(d.get("/api/v1/tables/nope").status, 404);
    drop(d);

    // Without a configured token, mutating endpoints are off.
    let work2 = tempfile::tempdir().unwrap();
    let d = Daemon::start(
        work2.path(),
        &DaemonConfig::new()
            .defaults("failed_writes_policy", "observe")
            .table("t", &table_dir.display().to_string())
            .to_string(),
    );
    let off = request(&d.addr, "POST", path, Some(TOKEN), Some("{}"));
    assert_eq!(off.status, 403, "{}", off.body);
    assert!(off.body.contains("auth_token"));
}

#[test]
fn the_savepoint_and_restore_api_need_the_token_preview_and_take_the_table_back() {
    let rt = tokio::runtime::Runtime::new().unwrap();
    let work = tempfile::tempdir().unwrap();
    let table_dir = work.path().join("t");
    let f = build_local(&rt, &table_dir, Kind::CowV6);
    let d = serve_one_table_with_the_token(work.path(), &table_dir, &f, &rt);
    let sp = "/api/v1/tables/t/savepoints";
    let body = format!(r#"{{"instant": "{T1}", "user": "ops", "comment": "before the bad load"}}"#);
    assert_eq!(request(&d.addr, "POST", sp, None, Some(&body)).status, 401);
    let created = request(&d.addr, "POST", sp, Some(TOKEN), Some(&body));
    assert_eq!(created.status, 200, "{}", created.body);
    let created = created.json();
    assert_eq!(created["savepoint"]["instant"], T1);
    assert_eq!(created["savepoint"]["metadata"]["savepointed_by"], "ops");
    assert!(table_dir.join(format!(".hoodie/{T1}.savepoint")).exists());

    let path = "/api/v1/tables/t/restore";
    let restore_body = format!(r#"{{"savepoint": "{T1}"}}"#);
    assert_eq!(
        request(&d.addr, "POST", path, None, Some(&restore_body)).status,
        401
    );
    let both = request(
        &d.addr,
        "POST",
        path,
        Some(TOKEN),
        Some(&format!(r#"{{"savepoint": "{T1}", "to_instant": "{T1}"}}"#)),
    );
    assert_eq!(both.status, 422, "{}", both.body);
    let plan = request(
        &d.addr,
        "POST",
        path,
        Some(TOKEN),
        Some(&format!(r#"{{"savepoint": "{T1}", "dry_run": true}}"#)),
    );
    assert_eq!(plan.status, 200, "{}", plan.body);
    assert_eq!(plan.json()["restore"]["instants"][0]["instant"], T2);
    let t2_file = table_dir.join(format!("p1/fg3-0_0-1-1_{T2}.parquet"));
    assert!(t2_file.exists(), "a dry run changed the table");
    // No savepoint at T2: refused with the reason, nothing changed.
    let refused = request(
        &d.addr,
        "POST",
        path,
        Some(TOKEN),
        Some(&format!(r#"{{"savepoint": "{T2}"}}"#)),
    );
    assert_eq!(refused.status, 409, "{}", refused.body);
    assert!(refused.body.contains("no savepoint"), "{}", refused.body);
    let done = request(&d.addr, "POST", path, Some(TOKEN), Some(&restore_body));
    assert_eq!(done.status, 200, "{}", done.body);
    let done = done.json();
    assert_eq!(done["restore"]["undone"][0]["instant"], T2);
    assert!(!t2_file.exists());
    let restore_instant = done["restore"]["restore_instant"].as_str().unwrap();
    assert!(table_dir
        .join(format!(".hoodie/{restore_instant}.restore"))
        .exists());
    // The rollback of the failed write (after T1) was removed by the restore, as Hudi does.
    let rollbacks = std::fs::read_dir(table_dir.join(".hoodie"))
        .unwrap()
        .filter_map(|e| e.ok())
        .filter(|e| e.file_name().to_string_lossy().contains(".rollback"))
        .count();
    assert_eq!(rollbacks, 0);
}

#[test]
fn a_pending_restore_pauses_automatic_rollbacks_without_failing_the_table() {
    let rt = tokio::runtime::Runtime::new().unwrap();
    let work = tempfile::tempdir().unwrap();
    let table_dir = work.path().join("t");
    let f = build_local(&rt, &table_dir, Kind::CowV6);
    // A restore that stopped after writing its plan.
    std::fs::write(
        table_dir.join(".hoodie/20240101030000000.restore.requested"),
        b"",
    )
    .unwrap();
    let d = Daemon::start(
        work.path(),
        &format!(
            "[server]\nstate_dir = \"state\"\nhalt_after_failures = 2\n[defaults]\npoll_interval = \"200ms\"\nassume_lazy_writers = true\n[defaults.lock]\nprovider = \"filesystem\"\n[[tables]]\nname = \"t\"\nuri = \"{}\"\n",
            table_dir.display()
        ),
    );
    d.wait_for("five polls", Duration::from_secs(30), || {
        (d.table("t")["status"]["polls"].as_u64().unwrap_or(0) >= 5).then_some(())
    });
    let t = &d.table("t")["status"];
    assert_eq!(t["halted"], false, "{t}");
    assert_eq!(t["last_poll_ok"], true, "{t}");
    assert!(
        !rolled_back(&f, &rt, TF),
        "the failed write belongs to the restore"
    );
    assert!(d.logs().contains("a restore is pending"));
}

#[test]
fn observe_tables_are_never_changed() {
    let rt = tokio::runtime::Runtime::new().unwrap();
    let work = tempfile::tempdir().unwrap();
    let table_dir = work.path().join("t");
    let f = build_local(&rt, &table_dir, Kind::MorV9);
    let before = rt.block_on(f.snapshot());
    let d = Daemon::start(
        work.path(),
        &format!(
            "[server]\nstate_dir = \"state\"\nauth_token = \"{TOKEN}\"\n[defaults]\npoll_interval = \"200ms\"\nfailed_writes_policy = \"observe\"\nassume_lazy_writers = true\n[[tables]]\nname = \"watched\"\nuri = \"{}\"\n",
            table_dir.display()
        ),
    );
    d.wait_for("five polls", Duration::from_secs(20), || {
        (d.table("watched")["status"]["polls"].as_u64().unwrap_or(0) >= 5).then_some(())
    });
    let s = d.table("watched");
    assert_eq!(s["status"]["pending"][0]["requested_time"], TF);
    assert_eq!(s["status"]["pending"][0]["verdict"], "no_heartbeat");
    assert_eq!(
        d.metric(r#"hudi_keeper_failed_instants{table="watched"}"#),
        Some(1.0)
    );
    let manual = request(
        &d.addr,
        "POST",
        "/api/v1/tables/watched/rollback",
        Some(TOKEN),
        Some("{}"),
    );
    assert_eq!(manual.status, 409, "{}", manual.body);
    // The dry run is allowed: it changes nothing.
    let dry = request(
        &d.addr,
        "POST",
        "/api/v1/tables/watched/rollback",
        Some(TOKEN),
        Some(r#"{"dry_run": true}"#),
    );
    assert_eq!(dry.status, 200, "{}", dry.body);
    assert_eq!(
        rt.block_on(f.snapshot()),
        before,
        "an observe table changed"
    );
}

#[test]
fn a_failing_table_is_reported_and_halted_while_the_others_go_on() {
    let rt = tokio::runtime::Runtime::new().unwrap();
    let work = tempfile::tempdir().unwrap();
    let good_dir = work.path().join("good");
    let good = build_local(&rt, &good_dir, Kind::CowV8);
    let broken_dir = work.path().join("broken");
    std::fs::create_dir_all(broken_dir.join(".hoodie")).unwrap();
    std::fs::write(
        broken_dir.join(".hoodie/hoodie.properties"),
        b"hoodie.table.version=banana\n",
    )
    .unwrap();
    let d = Daemon::start(
        work.path(),
        &format!(
            "[server]\nstate_dir = \"state\"\nauth_token = \"{TOKEN}\"\nhalt_after_failures = 2\nmax_backoff = \"300ms\"\n[defaults]\npoll_interval = \"200ms\"\nassume_lazy_writers = true\n[defaults.lock]\nprovider = \"filesystem\"\n{}[[tables]]\nname = \"good\"\nuri = \"{}\"\n[[tables]]\nname = \"broken\"\nuri = \"{}\"\n[[tables]]\nname = \"no-bucket\"\nuri = \"s3://no-such-bucket-{}/t\"\n",
            s3_options_toml(),
            good_dir.display(),
            broken_dir.display(),
            std::process::id()
        ),
    );
    for name in ["broken", "no-bucket"] {
        d.wait_for(
            &format!("{name} to be halted"),
            Duration::from_secs(20),
            || (d.table(name)["status"]["halted"] == true).then_some(()),
        );
        let s = d.table(name);
        assert!(s["status"]["last_error"].is_string(), "{s}");
        assert!(s["status"]["halted_reason"]
            .as_str()
            .unwrap()
            .contains("consecutive failed polls"));
        assert_eq!(
            d.metric(&format!(r#"hudi_keeper_table_halted{{table="{name}"}}"#)),
            Some(1.0)
        );
    }
    assert!(d.table("broken")["status"]["last_error"]
        .as_str()
        .unwrap()
        .contains("banana"));
    assert!(rolled_back(&good, &rt, TF), "the good table was held up");
    assert_eq!(d.metric("hudi_keeper_tables_halted"), Some(2.0));
    // Halted tables do not hold readiness back; the good one is ok.
    let ready = d.get("/readyz");
    assert_eq!(ready.status, 200, "{}", ready.body);
    let ready = ready.json();
    assert_eq!(ready["tables"]["halted"], 2, "{ready}");
    assert_eq!(ready["tables"]["ok"], 1, "{ready}");
    let not_ok: Vec<_> = ready["not_ok"].as_array().unwrap().iter().collect();
    assert_eq!(
        not_ok,
        [
            &serde_json::json!({"name": "broken", "state": "halted"}),
            &serde_json::json!({"name": "no-bucket", "state": "halted"})
        ],
        "{ready}"
    );
    // Resume clears the state; the table fails again and is halted again.
    let r = request(
        &d.addr,
        "POST",
        "/api/v1/tables/broken/resume",
        Some(TOKEN),
        None,
    );
    assert_eq!(r.status, 200, "{}", r.body);
    assert_eq!(d.table("broken")["status"]["halted"], false);
    d.wait_for("broken to be halted again", Duration::from_secs(20), || {
        (d.table("broken")["status"]["halted"] == true).then_some(())
    });
}

/// A readiness probe stays small at any number of tables: counts by state, and the names of at
/// most 100 tables that hold readiness back (the first 100 in name order).
#[test]
fn readyz_counts_the_tables_and_names_at_most_a_hundred_that_are_not_ok() {
    let rt = tokio::runtime::Runtime::new().unwrap();
    let work = tempfile::tempdir().unwrap();
    let good_dir = work.path().join("good");
    build_local(&rt, &good_dir, Kind::CowV8);
    let mut config = format!(
        "[server]\nstate_dir = \"state\"\n[defaults]\npoll_interval = \"1h\"\nfailed_writes_policy = \"observe\"\n[[tables]]\nname = \"good\"\nuri = \"{}\"\n",
        good_dir.display()
    );
    // 120 tables whose folder is missing: their first poll fails.
    for i in 0..120 {
        config.push_str(&format!(
            "[[tables]]\nname = \"gone-{i:03}\"\nuri = \"{}\"\n",
            work.path().join(format!("gone-{i:03}")).display()
        ));
    }
    let d = Daemon::start(work.path(), &config);
    let ready = d.wait_for("every first poll", Duration::from_secs(30), || {
        let r = d.get("/readyz");
        (r.json()["tables"]["not_polled_yet"] == 0).then_some(r)
    });
    assert_eq!(ready.status, 503, "{}", ready.body);
    let ready = ready.json();
    assert_eq!(ready["ready"], false);
    assert_eq!(
        ready["tables"],
        serde_json::json!({"total": 121, "ok": 1, "not_polled_yet": 0, "last_poll_failed": 120, "halted": 0}),
    );
    let named: Vec<&str> = ready["not_ok"]
        .as_array()
        .unwrap_or_else(|| panic!("{ready}"))
        .iter()
        .map(|t| {
            assert_eq!(t["state"], "last_poll_failed", "{t}");
            t["name"].as_str().unwrap()
        })
        .collect();
    let expected: Vec<String> = (0..100).map(|i| format!("gone-{i:03}")).collect();
    assert_eq!(named, expected);
    assert_eq!(ready["not_ok_more"], 20);
}

#[test]
fn tables_registered_through_the_api_survive_a_restart_and_sigterm_exits_zero() {
    let rt = tokio::runtime::Runtime::new().unwrap();
    let work = tempfile::tempdir().unwrap();
    let a_dir = work.path().join("a");
    let _a = build_local(&rt, &a_dir, Kind::CowV8);
    let b_dir = work.path().join("b");
    let _b = build_local(&rt, &b_dir, Kind::CowV8);
    let config = format!(
        "[server]\nstate_dir = \"state\"\nauth_token = \"{TOKEN}\"\nmax_body_bytes = 2048\nallowed_table_uris = [\"{}\"]\n[defaults]\npoll_interval = \"1s\"\nfailed_writes_policy = \"observe\"\n[[tables]]\nname = \"configured\"\nuri = \"{}\"\n",
        work.path().display(),
        a_dir.display()
    );
    let d = Daemon::start(work.path(), &config);
    let body = format!(
        r#"{{"name": "added", "uri": "{}", "poll_interval": "2s"}}"#,
        b_dir.display()
    );
    let unauth = request(&d.addr, "POST", "/api/v1/tables", None, Some(&body));
    assert_eq!(unauth.status, 401);
    let created = request(&d.addr, "POST", "/api/v1/tables", Some(TOKEN), Some(&body));
    assert_eq!(created.status, 201, "{}", created.body);
    assert_eq!(created.json()["source"], "api");
    let dup = request(&d.addr, "POST", "/api/v1/tables", Some(TOKEN), Some(&body));
    assert_eq!(dup.status, 409, "{}", dup.body);
    let bad_name = request(
        &d.addr,
        "POST",
        "/api/v1/tables",
        Some(TOKEN),
        Some(r#"{"name": "a/b", "uri": "/x"}"#),
    );
    assert_eq!(bad_name.status, 422, "{}", bad_name.body);
    let huge = format!(r#"{{"name": "big", "uri": "{}"}}"#, "x".repeat(4096));
    let too_big = request(&d.addr, "POST", "/api/v1/tables", Some(TOKEN), Some(&huge));
    assert_eq!(too_big.status, 413, "{}", too_big.body);
    // The defaults only observe: an API registration may not make a table changeable.
    let lazy = request(
        &d.addr,
        "POST",
        "/api/v1/tables",
        Some(TOKEN),
        Some(&format!(
            r#"{{"name": "x", "uri": "{}", "failed_writes_policy": "lazy"}}"#,
            work.path().join("x").display()
        )),
    );
    assert_eq!(lazy.status, 403, "{}", lazy.body);
    assert!(lazy.body.contains("failed_writes_policy"), "{}", lazy.body);
    let addr = d.addr.clone();
    let status = d.terminate(Duration::from_secs(20));
    assert!(status.success(), "exit status {status}");
    let down = common::bin()
        .args(["health", "--addr", &addr, "--timeout", "1s"])
        .output()
        .unwrap();
    assert_eq!(
        down.status.code(),
        Some(1),
        "a stopped daemon is not healthy"
    );

    let d = Daemon::start(work.path(), &config);
    let tables = d.get("/api/v1/tables").json();
    let names: Vec<_> = tables["tables"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t["name"].as_str().unwrap().to_string())
        .collect();
    assert_eq!(names, ["added", "configured"]);
    let timeline = d.get("/api/v1/tables/added/timeline");
    assert_eq!(timeline.status, 200);
    assert!(timeline.json()["instants"].as_array().unwrap().len() >= 3);
    let gone = request(&d.addr, "DELETE", "/api/v1/tables/added", Some(TOKEN), None);
    assert_eq!(gone.status, 204, "{}", gone.body);
    let config_table = request(
        &d.addr,
        "DELETE",
        "/api/v1/tables/configured",
        Some(TOKEN),
        None,
    );
    assert_eq!(config_table.status, 409);
    assert!(
        d.metric(r#"hudi_keeper_table_halted{table="added"}"#)
            .is_none(),
        "series of an unregistered table stay"
    );
    let health = common::bin()
        .args(["health", "--addr", &d.addr])
        .output()
        .unwrap();
    assert!(
        health.status.success(),
        "{}",
        String::from_utf8_lossy(&health.stderr)
    );
    let doc = d.get("/api/v1/openapi.json");
    assert_eq!(doc.status, 200);
    assert_eq!(doc.json()["openapi"], "3.0.3");
    d.terminate_cleanly(Duration::from_secs(20));
}

#[test]
fn invalid_configuration_fails_at_start_with_the_key_named() {
    let work = tempfile::tempdir().unwrap();
    let path = work.path().join("c.toml");
    std::fs::write(&path, "[server]\nlisten = \"127.0.0.1:0\"\npoll = 3\n").unwrap();
    let out = common::bin()
        .args(["serve", "--config"])
        .arg(&path)
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("poll"), "{err}");
    std::fs::write(&path, "[server]\nlisten = \"127.0.0.1:0\"\n").unwrap();
    let out = common::bin()
        .args(["serve", "--config"])
        .arg(&path)
        .env("HUDI_KEEPER_SERVER__MAX_CONCURRENT_POLLS", "many")
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("environment variable HUDI_KEEPER_SERVER__MAX_CONCURRENT_POLLS"),
        "{err}"
    );
}
