//! Clients without the token that try to take the daemon down (issue #30): idle connections that
//! hold every API slot, floods of scrapes and listings. The probes keep answering on their own
//! listener (`server.probe_listen`), and the listing of tables is paged. The memory a flood
//! costs is measured by `scripts/hostile-client` (figures in BENCHMARKS.md), not asserted here.

use hudi_keeper_test_support as common;

use std::io::{Read, Write};
use std::net::TcpStream;
use std::time::{Duration, Instant};

use common::config::DaemonConfig;
use common::daemon::Daemon;
use common::http::get;
use common::TableDir;

/// The probe listener's address, from the daemon's log.
fn probe_addr(d: &Daemon) -> String {
    d.wait_for("the probe listener", Duration::from_secs(20), || {
        d.logs()
            .lines()
            .find_map(|l| l.strip_prefix("hudi-keeper probes on http://"))
            .map(|a| a.trim().to_string())
    })
}

/// `GET /healthz` on `addr` within `limit`: whether it answered `ok`.
fn healthz_within(addr: &str, limit: Duration) -> bool {
    let Ok(mut s) = TcpStream::connect(addr) else {
        return false;
    };
    let _ = s.set_read_timeout(Some(limit));
    let _ = s.set_write_timeout(Some(limit));
    if s.write_all(b"GET /healthz HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
        .is_err()
    {
        return false;
    }
    let mut out = String::new();
    let _ = s.read_to_string(&mut out);
    out.starts_with("HTTP/1.1 200") && out.ends_with("ok\n")
}

#[test]
fn probes_answer_on_their_own_listener_while_300_idle_connections_hold_every_api_slot() {
    let work = tempfile::tempdir().unwrap();
    let t = TableDir::v8_mor();
    let d = Daemon::start(
        work.path(),
        &DaemonConfig::new()
            .server("probe_listen", "127.0.0.1:0")
            .defaults("poll_interval", "1s")
            .defaults("failed_writes_policy", "observe")
            .table("t", &t.uri())
            .to_string(),
    );
    let probes = probe_addr(&d);
    assert!(healthz_within(&d.addr, Duration::from_secs(2)));
    // One client opens 300 connections and sends nothing (more than server.max_connections,
    // 256 by default): every API slot is held, the rest wait in the backlog.
    let idle: Vec<TcpStream> = (0..300)
        .filter_map(|_| TcpStream::connect(&d.addr).ok())
        .collect();
    assert!(idle.len() >= 257, "only {} connections opened", idle.len());
    std::thread::sleep(Duration::from_millis(500));
    // The attack works on the API listener (this is what the shipped probes saw before)...
    assert!(
        !healthz_within(&d.addr, Duration::from_secs(2)),
        "the API listener answered with every slot held"
    );
    // ...and not on the probe listener: 12 probes over the next few seconds all answer.
    for i in 0..12 {
        let start = Instant::now();
        assert!(
            healthz_within(&probes, Duration::from_secs(2)),
            "probe {i} did not answer"
        );
        assert!(start.elapsed() < Duration::from_secs(2));
        std::thread::sleep(Duration::from_millis(250));
    }
    let ready = get(&probes, "/readyz");
    assert!(ready.status == 200 || ready.status == 503, "{}", ready.body);
    let metrics = get(&probes, "/metrics");
    assert_eq!(metrics.status, 200);
    assert!(
        metrics.body.contains("hudi_keeper_tables 1"),
        "{}",
        metrics.body
    );
    // The probe listener serves no API.
    assert_eq!(get(&probes, "/api/v1/tables").status, 404);
    drop(idle);
    d.terminate_cleanly(Duration::from_secs(20));
}

#[test]
fn the_list_of_tables_is_paged() {
    let work = tempfile::tempdir().unwrap();
    let tables: Vec<TableDir> = (0..5).map(|_| TableDir::v8_mor()).collect();
    let mut config = "[server]\nstate_dir = \"state\"\n[defaults]\npoll_interval = \"1s\"\nfailed_writes_policy = \"observe\"\n".to_string();
    for (i, t) in tables.iter().enumerate() {
        config.push_str(&format!(
            "[[tables]]\nname = \"t{i}\"\nuri = \"{}\"\n",
            t.uri()
        ));
    }
    let d = Daemon::start(work.path(), &config);
    // Without a limit: the default page holds all five.
    let all = d.get("/api/v1/tables").json();
    assert_eq!(all["total"], 5);
    assert_eq!(all["tables"].as_array().unwrap().len(), 5);
    assert!(all["next"].is_null(), "{all}");
    // Two by two, following `next`.
    let mut names = Vec::new();
    let mut after: Option<String> = None;
    for _ in 0..3 {
        let path = match &after {
            Some(a) => format!("/api/v1/tables?limit=2&after={a}"),
            None => "/api/v1/tables?limit=2".to_string(),
        };
        let page = d.get(&path).json();
        assert_eq!(page["total"], 5);
        for t in page["tables"].as_array().unwrap() {
            names.push(t["name"].as_str().unwrap().to_string());
        }
        after = page["next"].as_str().map(str::to_string);
        if after.is_none() {
            break;
        }
    }
    assert_eq!(names, ["t0", "t1", "t2", "t3", "t4"]);
    assert!(after.is_none());
    for bad in ["limit=0", "limit=1001", "limit=x", "page=2"] {
        let r = d.get(&format!("/api/v1/tables?{bad}"));
        assert_eq!(r.status, 400, "{bad}: {}", r.body);
    }
    d.terminate_cleanly(Duration::from_secs(20));
}
