//! The HTTP server's own limits, against the real binary: request body, connections, requests
//! in flight, slow clients.

use std::net::TcpStream;
use std::time::Duration;

use common::api::{closed_within, entry, register, send_raw, server, status_within, TOKEN};
use common::daemon::Daemon;
use common::fixtures::{build_local, Kind};
use common::http::request;
use hudi_keeper_test_support as common;
use serde_json::json;

#[test]
fn oversized_bodies_get_413_and_slow_clients_are_cut_off() {
    let work = tempfile::tempdir().unwrap();
    let w = work.path().canonicalize().unwrap();
    let d = Daemon::start(
        &w.join("d"),
        &format!(
            "{}[defaults]\npoll_interval = \"1h\"\nfailed_writes_policy = \"observe\"\n",
            server("max_body_bytes = 1024\nclient_timeout = \"1s\"\n")
        ),
    );
    let big = format!(r#"{{"name": "big", "uri": "{}"}}"#, "x".repeat(4096));
    let r = register(&d, &big);
    assert_eq!(r.status, 413, "{}", r.body);
    // Chunked, without a length up front.
    let mut s = send_raw(
        &d.addr,
        format!(
            "POST /api/v1/tables HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer {TOKEN}\r\nContent-Type: application/json\r\nTransfer-Encoding: chunked\r\nConnection: close\r\n\r\n{:x}\r\n{big}\r\n0\r\n\r\n",
            big.len()
        )
        .as_bytes(),
    );
    assert_eq!(status_within(&mut s, Duration::from_secs(10)), Some(413));
    // A body that stops coming.
    let mut s = send_raw(
        &d.addr,
        format!(
            "POST /api/v1/tables HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer {TOKEN}\r\nContent-Type: application/json\r\nContent-Length: 100\r\n\r\n{{\"name\": "
        )
        .as_bytes(),
    );
    assert_eq!(status_within(&mut s, Duration::from_secs(10)), Some(408));
    // Headers that stop coming, and a connection that never sends anything.
    let mut s = send_raw(&d.addr, b"GET /healthz HTTP/1.1\r\nHost: x\r\n");
    assert!(closed_within(&mut s, Duration::from_secs(10)));
    let mut s = send_raw(&d.addr, b"");
    assert!(closed_within(&mut s, Duration::from_secs(10)));
    // The server still answers.
    assert_eq!(d.get("/healthz").status, 200);
}

#[test]
fn unauthenticated_slow_clients_take_no_request_slot() {
    let work = tempfile::tempdir().unwrap();
    let w = work.path().canonicalize().unwrap();
    let d = Daemon::start(
        &w.join("d"),
        &format!(
            "{}[defaults]\npoll_interval = \"1h\"\nfailed_writes_policy = \"observe\"\n",
            server("max_connections = 16\nmax_concurrent_requests = 2\nclient_timeout = \"60s\"\n")
        ),
    );
    // As many clients as there are slots, and more, each sending a body that stops coming:
    // changes without a token (or with a wrong one), and reads (which take no body).
    let slow = |line: &str, headers: &str| {
        send_raw(
            &d.addr,
            format!("{line} HTTP/1.1\r\nHost: x\r\n{headers}Content-Type: application/json\r\nContent-Length: 100\r\n\r\n{{").as_bytes(),
        )
    };
    let mut clients = vec![
        (slow("POST /api/v1/tables", ""), 401),
        (
            slow(
                "POST /api/v1/tables/x/rollback",
                "Authorization: Bearer wrong\r\n",
            ),
            401,
        ),
        (slow("DELETE /api/v1/tables/x", ""), 401),
        (slow("GET /api/v1/tables", ""), 200),
        (slow("GET /api/v1/tables/x", ""), 404),
    ];
    // Each is answered at once, its body unread: none holds a slot.
    for (c, status) in &mut clients {
        assert_eq!(status_within(c, Duration::from_secs(10)), Some(*status));
    }
    // While they stay connected, an authorized change is served.
    let r = register(&d, &entry("t", "/nonexistent/t", json!({})));
    assert_ne!(r.status, 503, "{}", r.body);
    assert_eq!(d.get("/api/v1/tables").status, 200);
    drop(clients);
}

#[test]
fn connections_and_requests_in_flight_are_bounded() {
    let work = tempfile::tempdir().unwrap();
    let w = work.path().canonicalize().unwrap();
    let d = Daemon::start(
        &w.join("d"),
        &format!(
            "{}[defaults]\npoll_interval = \"1h\"\nfailed_writes_policy = \"observe\"\n",
            server("max_connections = 3\nmax_concurrent_requests = 1\nclient_timeout = \"60s\"\n")
        ),
    );
    // A request in flight (its body is still coming) takes the one slot.
    let slow_request = || {
        send_raw(
            &d.addr,
            format!(
                "POST /api/v1/tables HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer {TOKEN}\r\nContent-Type: application/json\r\nContent-Length: 100\r\n\r\n{{"
            )
            .as_bytes(),
        )
    };
    let mut slow = slow_request();
    d.wait_for(
        "the slow request to hold the slot",
        Duration::from_secs(10),
        || {
            if status_within(&mut slow, Duration::from_millis(1)) == Some(503) {
                // A request of this loop had the slot when it came: send it again.
                slow = slow_request();
            }
            let r = d.get("/api/v1/tables");
            (r.status == 503).then_some(r)
        },
    )
    .header("retry-after")
    .expect("Retry-After");
    // Probes and scrapes are not counted.
    assert_eq!(d.get("/healthz").status, 200);
    assert_eq!(d.get("/readyz").status, 200);
    assert_eq!(d.get("/metrics").status, 200);
    drop(slow);
    d.wait_for("the slot to be free again", Duration::from_secs(10), || {
        (d.get("/api/v1/tables").status == 200).then_some(())
    });

    // Three open connections are the most; a fourth waits until one closes.
    let idle: Vec<TcpStream> = (0..3).map(|_| send_raw(&d.addr, b"")).collect();
    let mut fourth = send_raw(
        &d.addr,
        b"GET /healthz HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n",
    );
    assert_eq!(
        status_within(&mut fourth, Duration::from_millis(1500)),
        None,
        "a fourth connection was served while three were open"
    );
    drop(idle);
    assert_eq!(
        status_within(&mut fourth, Duration::from_secs(10)),
        Some(200)
    );
}

#[test]
fn a_slow_client_does_not_hold_the_table() {
    let rt = tokio::runtime::Runtime::new().unwrap();
    let work = tempfile::tempdir().unwrap();
    let w = work.path().canonicalize().unwrap();
    let table = w.join("t");
    build_local(&rt, &table, Kind::CowV8);
    let d = Daemon::start(
        &w.join("d"),
        &format!(
            "{}[defaults]\npoll_interval = \"1h\"\n[defaults.lock]\nprovider = \"filesystem\"\n[[tables]]\nname = \"t\"\nuri = \"{}\"\n",
            server("client_timeout = \"60s\"\nmutation_timeout = \"3s\"\n"),
            table.display()
        ),
    );
    d.wait_for("the first poll", Duration::from_secs(20), || {
        (d.table("t")["status"]["polls"].as_u64() >= Some(1)).then_some(())
    });
    let dry_run = || {
        request(
            &d.addr,
            "POST",
            "/api/v1/tables/t/rollback",
            Some(TOKEN),
            Some(r#"{"dry_run": true}"#),
        )
    };
    // A change whose body trickles in (here: stops) holds nothing of the table.
    let _trickle = send_raw(
        &d.addr,
        format!(
            "POST /api/v1/tables/t/rollback HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer {TOKEN}\r\nContent-Type: application/json\r\nContent-Length: 64\r\n\r\n{{\"dry_run\":"
        )
        .as_bytes(),
    );
    std::thread::sleep(Duration::from_millis(300));
    let r = dry_run();
    assert_eq!(r.status, 200, "{}", r.body);
    // Nor do clients that never read their responses.
    let mut unread = Vec::new();
    for req in [
        "GET /api/v1/tables/t/timeline HTTP/1.1\r\nHost: x\r\n\r\n".to_string(),
        format!("POST /api/v1/tables/t/savepoints HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer {TOKEN}\r\nContent-Type: application/json\r\nContent-Length: 16\r\n\r\n{{\"dry_run\":true}}"),
        format!("POST /api/v1/tables/t/rollback HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer {TOKEN}\r\nContent-Type: application/json\r\nContent-Length: 16\r\n\r\n{{\"dry_run\":true}}"),
    ] {
        unread.push(send_raw(&d.addr, req.as_bytes()));
    }
    std::thread::sleep(Duration::from_millis(300));
    for _ in 0..3 {
        let r = dry_run();
        assert_eq!(r.status, 200, "{}", r.body);
    }
}
