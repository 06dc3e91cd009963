//! What a holder of the API token can and cannot do (issue #15), against the real binary as
//! deployed: registrations only under `server.allowed_table_uris`, storage options from a safe
//! list only (no endpoints, credential sources or token files), no second registration of a
//! table, no lock or policy weaker than `[defaults]`; the registry files are private, one per
//! table, and a corrupt one does not stop the configured tables. Issue #30: no control character
//! in a name or URI, at most `server.max_api_tables`, no poll more than once a second, no folder
//! inside a table's base path, no path of the host in `/readyz`. And the HTTP server's own
//! limits: request body, connections, requests in flight, slow clients.

use hudi_keeper_test_support as common;

use std::io::{ErrorKind, Read, Write};
use std::net::{TcpListener, TcpStream};
use std::path::Path;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use common::daemon::Daemon;
use common::fixtures::{build_local, Kind};
use common::http::{request, Response};
use serde_json::{json, Value};

const TOKEN: &str = "test-token-0123456789abcdef";

/// The body of a registration: `name`, `uri` and the fields of `extra`.
fn entry(name: &str, uri: &str, extra: Value) -> String {
    let mut v = json!({"name": name, "uri": uri});
    if let Value::Object(m) = extra {
        for (k, x) in m {
            v[k] = x;
        }
    }
    v.to_string()
}

fn register(d: &Daemon, body: &str) -> Response {
    request(&d.addr, "POST", "/api/v1/tables", Some(TOKEN), Some(body))
}

fn names(d: &Daemon) -> Vec<String> {
    d.get("/api/v1/tables").json()["tables"]
        .as_array()
        .expect("tables")
        .iter()
        .map(|t| t["name"].as_str().expect("name").to_string())
        .collect()
}

/// A `[server]` section with the token and the state folder, plus `extra` lines.
fn server(extra: &str) -> String {
    format!("[server]\nstate_dir = \"state\"\nauth_token = \"{TOKEN}\"\n{extra}")
}

/// Open a connection and send `bytes` (a request, or the start of one).
fn send_raw(addr: &str, bytes: &[u8]) -> TcpStream {
    let mut s = TcpStream::connect(addr).expect("connect");
    s.write_all(bytes).expect("send");
    s
}

/// The status of the response on `s`, if one arrives within `wait`.
fn status_within(s: &mut TcpStream, wait: Duration) -> Option<u16> {
    s.set_read_timeout(Some(wait)).expect("read timeout");
    let mut buf = [0u8; 4096];
    let mut got = Vec::new();
    loop {
        match s.read(&mut buf) {
            Ok(0) => break,
            Ok(n) => {
                got.extend_from_slice(&buf[..n]);
                if got.windows(4).any(|w| w == b"\r\n\r\n") {
                    break;
                }
            }
            Err(e) if matches!(e.kind(), ErrorKind::WouldBlock | ErrorKind::TimedOut) => {
                return None
            }
            Err(_) => break,
        }
    }
    String::from_utf8_lossy(&got)
        .split_whitespace()
        .nth(1)
        .and_then(|c| c.parse().ok())
}

/// Whether the server closes `s` (end of stream or reset, after any response) within `wait`.
fn closed_within(s: &mut TcpStream, wait: Duration) -> bool {
    s.set_read_timeout(Some(wait)).expect("read timeout");
    let mut buf = [0u8; 4096];
    loop {
        match s.read(&mut buf) {
            Ok(0) => return true,
            Ok(_) => continue,
            Err(e) if matches!(e.kind(), ErrorKind::WouldBlock | ErrorKind::TimedOut) => {
                return false
            }
            Err(_) => return true,
        }
    }
}

fn mode(path: &Path) -> u32 {
    use std::os::unix::fs::PermissionsExt;
    std::fs::metadata(path)
        .unwrap_or_else(|e| panic!("{}: {e}", path.display()))
        .permissions()
        .mode()
        & 0o777
}

#[test]
fn api_registrations_are_refused_outside_the_allowed_uris_and_twice() {
    let rt = tokio::runtime::Runtime::new().unwrap();
    let work = tempfile::tempdir().unwrap();
    let w = work.path().canonicalize().unwrap();
    let allowed = w.join("allowed");
    let outside = w.join("outside");
    build_local(&rt, &allowed.join("configured"), Kind::CowV8);
    build_local(&rt, &allowed.join("t"), Kind::CowV8);
    build_local(&rt, &w.join("allowed2/t"), Kind::CowV8);
    build_local(&rt, &outside.join("t"), Kind::CowV8);
    build_local(&rt, &outside.join("u"), Kind::CowV8);
    // A link inside the allowed folder to a table outside it.
    std::os::unix::fs::symlink(outside.join("u"), allowed.join("link")).unwrap();
    // A link to the folder outside (tables below it not created yet), and one to a table's
    // `.hoodie` folder.
    std::os::unix::fs::symlink(&outside, allowed.join("outlink")).unwrap();
    std::os::unix::fs::symlink(
        allowed.join("configured/.hoodie"),
        allowed.join("hoodielink"),
    )
    .unwrap();
    // A store that has one table, `tables/enclosing`, and nothing else: a registration is
    // refused inside a table's base path, which is looked for in every folder above it.
    let store = StandInStore::start(&["/hk-sec/tables/enclosing/.hoodie/hoodie.properties"]);
    let tables = format!(
        "[defaults]\npoll_interval = \"1h\"\nfailed_writes_policy = \"observe\"\n[defaults.storage_options]\naws_endpoint = \"http://127.0.0.1:{port}\"\naws_allow_http = \"true\"\naws_access_key_id = \"x\"\naws_secret_access_key = \"x\"\nazure_endpoint = \"http://127.0.0.1:{port}\"\nazure_allow_http = \"true\"\nazure_skip_signature = \"true\"\n[[tables]]\nname = \"configured\"\nuri = \"{}\"\n[[tables]]\nname = \"outside\"\nuri = \"{}\"\n",
        allowed.join("configured").display(),
        outside.join("t").display(),
        port = store.port,
    );
    let u = |p: &Path| p.display().to_string();

    // The default: the API registers no table at all.
    let d = Daemon::start(&w.join("d1"), &format!("{}{tables}", server("")));
    let r = register(&d, &entry("t", &u(&allowed.join("t")), json!({})));
    assert_eq!(r.status, 403, "{}", r.body);
    assert!(r.body.contains("server.allowed_table_uris"), "{}", r.body);
    drop(d);

    let allow = format!(
        "allowed_table_uris = [\"{}/\", \"s3://hk-sec/tables/\", \"abfss://hkc@hkacct.dfs.core.windows.net/tables/\"]\n",
        allowed.display()
    );
    let d = Daemon::start(&w.join("d2"), &format!("{}{tables}", server(&allow)));
    // A configured table outside the list runs as before.
    assert_eq!(names(&d), ["configured", "outside"]);
    for (name, uri, status) in [
        // A prefix ends at a `/`: `allowed` does not allow `allowed2`.
        ("a", u(&w.join("allowed2/t")), 403),
        ("b", u(&outside.join("t")), 403),
        // `..` and `.` are refused outright, wherever they lead.
        ("c", format!("{}/../outside/t", allowed.display()), 422),
        ("d", format!("{}/./t", allowed.display()), 422),
        (
            "e",
            format!("file://{}/../outside/t", allowed.display()),
            422,
        ),
        // A link is judged by where it leads, also above a table not created yet.
        ("f", u(&allowed.join("link")), 403),
        ("f2", u(&allowed.join("outlink/new/t")), 403),
        ("f3", u(&allowed.join("hoodielink/metadata")), 422),
        // A relative path would depend on the daemon's working folder.
        ("g", "allowed/t".to_string(), 422),
        ("h", "s3://hk-sec/tables2/t".to_string(), 403),
        ("i", "s3://other-bucket/tables/t".to_string(), 403),
        // The store addresses the bucket as written: another bucket.
        ("i2", "s3://HK-SEC/tables/t".to_string(), 403),
        // The container in the configured account, which need not be `hkacct`.
        ("i3", "az://hkc/tables/t".to_string(), 403),
        // Forms that cannot be compared with the prefix (Fabric).
        (
            "i4",
            "abfss://hkc@hkacct.dfs.fabric.microsoft.com/tables/t".to_string(),
            422,
        ),
        ("j", "gs://hk-sec/tables/t".to_string(), 403),
        ("k", "s3://hk-sec/tables/../../other/t".to_string(), 422),
        ("l", "s3://attacker@hk-sec/tables/t".to_string(), 422),
        // A table's metadata table is not a table of its own.
        (
            "m",
            format!("{}/.hoodie/metadata", allowed.join("configured").display()),
            422,
        ),
    ] {
        let r = register(&d, &entry(name, &uri, json!({})));
        assert_eq!(r.status, status, "{uri}: {}", r.body);
        assert!(r.json()["error"].is_string(), "{}", r.body);
    }
    let r = register(&d, &entry("t", &u(&allowed.join("t")), json!({})));
    assert_eq!(r.status, 201, "{}", r.body);
    // The same table again under other names and spellings.
    for (name, uri) in [
        ("t2", format!("file://{}/", allowed.join("t").display())),
        ("t3", format!("{}//t/", allowed.display())),
        ("c2", u(&allowed.join("configured"))),
        // Inside a registered table, or around one.
        ("t4", u(&allowed.join("t/p1"))),
        ("all", u(&allowed)),
    ] {
        let r = register(&d, &entry(name, &uri, json!({})));
        assert_eq!(r.status, 409, "{uri}: {}", r.body);
        assert!(r.body.contains("registered already"), "{}", r.body);
    }
    // s3a:// names the bucket s3:// does.
    let r = register(&d, &entry("s", "s3a://hk-sec/tables/x", json!({})));
    assert_eq!(r.status, 201, "{}", r.body);
    // Inside a table nobody registered: found in the store, and named.
    let r = register(
        &d,
        &entry("in", "s3://hk-sec/tables/enclosing/dt=1/x", json!({})),
    );
    assert_eq!(r.status, 409, "{}", r.body);
    assert!(
        r.body.contains("s3://hk-sec/tables/enclosing`"),
        "{}",
        r.body
    );
    // Only below the allowed prefix: its folder, then each below it.
    let asked = store.asked();
    assert!(
        asked.contains(&"HEAD /hk-sec/tables/.hoodie/hoodie.properties".to_string()),
        "{asked:?}"
    );
    assert!(
        !asked
            .iter()
            .any(|a| a == "HEAD /hk-sec/.hoodie/hoodie.properties"),
        "{asked:?}"
    );
    let r = register(&d, &entry("s-again", "s3://hk-sec/tables/x/", json!({})));
    assert_eq!(r.status, 409, "{}", r.body);
    // One Azure container, spelled as Hadoop and as object_store write it.
    let r = register(
        &d,
        &entry(
            "az",
            "abfss://hkc@hkacct.dfs.core.windows.net/tables/x",
            json!({}),
        ),
    );
    assert_eq!(r.status, 201, "{}", r.body);
    for uri in [
        "az://hkc@HKACCT.blob.core.windows.net/tables/x/",
        "abfs://hkc@hkacct.dfs.core.windows.net/tables/x/p",
    ] {
        let r = register(&d, &entry("az-again", uri, json!({})));
        assert_eq!(r.status, 409, "{uri}: {}", r.body);
    }
    assert_eq!(names(&d), ["az", "configured", "outside", "s", "t"]);
}

#[test]
fn an_api_table_is_not_opened_once_its_folder_leads_out_of_the_allowed_uris() {
    let rt = tokio::runtime::Runtime::new().unwrap();
    let work = tempfile::tempdir().unwrap();
    let w = work.path().canonicalize().unwrap();
    let allowed = w.join("allowed");
    std::fs::create_dir_all(&allowed).unwrap();
    let outside = w.join("outside/u");
    build_local(&rt, &outside, Kind::CowV8);
    let d = Daemon::start(
        &w.join("d"),
        &format!(
            "{}[defaults]\npoll_interval = \"200ms\"\nfailed_writes_policy = \"observe\"\n",
            server(&format!(
                "allowed_table_uris = [\"{}/\"]\nmax_backoff = \"1s\"\nhalt_after_failures = 1000\n",
                allowed.display()
            ))
        ),
    );
    // Registered where no table is yet: allowed, and its polls fail.
    let later = allowed.join("later");
    let r = register(&d, &entry("later", &later.display().to_string(), json!({})));
    assert_eq!(r.status, 201, "{}", r.body);
    d.wait_for("a failed poll", Duration::from_secs(20), || {
        d.table("later")["status"]["last_error"]
            .as_str()
            .map(str::to_string)
    });
    // Then the folder becomes a link to a table outside: it is never opened.
    std::os::unix::fs::symlink(&outside, &later).unwrap();
    let err = d.wait_for("the open refused", Duration::from_secs(20), || {
        let t = d.table("later");
        let polls = t["status"]["polls"].as_u64().unwrap_or(0);
        let e = t["status"]["last_error"]
            .as_str()
            .unwrap_or_default()
            .to_string();
        (e.contains("allowed_table_uris") || t["status"]["last_poll_ok"] == json!(true))
            .then_some((e, polls))
    });
    assert!(err.0.contains("allowed_table_uris"), "{err:?}");
}

#[test]
fn api_storage_options_are_limited_to_a_safe_list() {
    let work = tempfile::tempdir().unwrap();
    let w = work.path().canonicalize().unwrap();
    let allowed = w.join("allowed");
    std::fs::create_dir_all(&allowed).unwrap();
    let d = Daemon::start(
        &w.join("d"),
        &format!(
            "{}[defaults]\npoll_interval = \"1h\"\nfailed_writes_policy = \"observe\"\n",
            server(&format!(
                "allowed_table_uris = [\"{}\"]\n",
                allowed.display()
            ))
        ),
    );
    // Endpoints, credentials and their sources, token files, the metadata service, proxies,
    // plain HTTP, TLS checks, another bucket or account, and keys nobody listed.
    let refused = [
        "aws_endpoint",
        "endpoint",
        "aws_endpoint_url",
        "aws_endpoint_url_s3",
        "aws_endpoint_url_sts",
        "aws_web_identity_token_file",
        "aws_role_arn",
        "aws_container_credentials_full_uri",
        "aws_container_credentials_relative_uri",
        "aws_container_authorization_token_file",
        "aws_metadata_endpoint",
        "aws_imdsv1_fallback",
        "aws_access_key_id",
        "aws_secret_access_key",
        "aws_session_token",
        "aws_allow_http",
        "allow_http",
        "aws_proxy_url",
        "proxy_url",
        "aws_allow_invalid_certificates",
        "aws_bucket",
        // With a configured endpoint, requests would go to the endpoint's root, where the
        // table's first folder is read as the bucket.
        "aws_virtual_hosted_style_request",
        "aws_s3_express",
        "aws_copy_if_not_exists",
        "aws_conditional_put",
        "aws_sse_kms_key_id",
        "google_service_account",
        "google_application_credentials",
        "google_base_url",
        "google_bearer_token",
        "azure_storage_account_name",
        "azure_storage_account_key",
        "azure_federated_token_file",
        "azure_msi_endpoint",
        "azure_authority_host",
        "azure_endpoint",
        "azure_use_emulator",
        "AWS_ENDPOINT",
        "no_such_option",
    ];
    for (i, key) in refused.iter().enumerate() {
        let r = register(
            &d,
            &entry(
                &format!("t{i}"),
                &allowed.join(format!("t{i}")).display().to_string(),
                json!({"storage_options": {*key: "http://127.0.0.1:1/x"}}),
            ),
        );
        assert_eq!(r.status, 422, "{key}: {}", r.body);
        assert!(r.body.contains(&format!("`{key}`")), "{key}: {}", r.body);
    }
    // A region goes into host names (`sts.<region>.amazonaws.com`): only a region's letters.
    for region in ["evil.example.com/x?", "127.0.0.1:9", "us-east-1#"] {
        let r = register(
            &d,
            &entry(
                "r",
                &allowed.join("r").display().to_string(),
                json!({"storage_options": {"aws_region": region}}),
            ),
        );
        assert_eq!(r.status, 422, "{region}: {}", r.body);
        assert!(r.body.contains("aws_region"), "{}", r.body);
    }
    let r = register(
        &d,
        &entry(
            "ok",
            &allowed.join("ok").display().to_string(),
            json!({"storage_options": {
                "aws_region": "eu-west-1",
                "aws_unsigned_payload": "true",
                "aws_timeout": "30s",
            }}),
        ),
    );
    assert_eq!(r.status, 201, "{}", r.body);
    assert_eq!(names(&d), ["ok"]);
}

/// A stand-in for an STS (or container credentials) endpoint: records every connection and
/// what it sent.
struct Listener {
    port: u16,
    seen: Arc<Mutex<Vec<Vec<u8>>>>,
    stop: Arc<AtomicBool>,
}

impl Listener {
    fn start() -> Self {
        let l = TcpListener::bind("127.0.0.1:0").unwrap();
        l.set_nonblocking(true).unwrap();
        let port = l.local_addr().unwrap().port();
        let seen = Arc::new(Mutex::new(Vec::new()));
        let stop = Arc::new(AtomicBool::new(false));
        {
            let (seen, stop) = (seen.clone(), stop.clone());
            std::thread::spawn(move || {
                while !stop.load(Ordering::Relaxed) {
                    match l.accept() {
                        Ok((mut s, _)) => {
                            let _ = s.set_nonblocking(false);
                            let _ = s.set_read_timeout(Some(Duration::from_millis(500)));
                            let mut got = Vec::new();
                            let mut buf = [0u8; 4096];
                            while let Ok(n) = s.read(&mut buf) {
                                if n == 0 {
                                    break;
                                }
                                got.extend_from_slice(&buf[..n]);
                            }
                            seen.lock().unwrap().push(got);
                        }
                        Err(_) => std::thread::sleep(Duration::from_millis(20)),
                    }
                }
            });
        }
        Self { port, seen, stop }
    }
}

impl Drop for Listener {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
    }
}

/// A stand-in for an object store's endpoint: `200` to a request for one of `present` (a path,
/// as S3's path-style addressing spells it), `404` to anything else; records each request's
/// method and path.
struct StandInStore {
    port: u16,
    asked: Arc<Mutex<Vec<String>>>,
    stop: Arc<AtomicBool>,
}

impl StandInStore {
    fn start(present: &[&str]) -> Self {
        let l = TcpListener::bind("127.0.0.1:0").unwrap();
        l.set_nonblocking(true).unwrap();
        let port = l.local_addr().unwrap().port();
        let asked = Arc::new(Mutex::new(Vec::new()));
        let stop = Arc::new(AtomicBool::new(false));
        let present: Vec<String> = present.iter().map(|p| p.to_string()).collect();
        {
            let (asked, stop) = (asked.clone(), stop.clone());
            std::thread::spawn(move || {
                while !stop.load(Ordering::Relaxed) {
                    let Ok((mut s, _)) = l.accept() else {
                        std::thread::sleep(Duration::from_millis(10));
                        continue;
                    };
                    let _ = s.set_nonblocking(false);
                    let _ = s.set_read_timeout(Some(Duration::from_secs(2)));
                    let mut got = Vec::new();
                    let mut buf = [0u8; 4096];
                    while !got.windows(4).any(|w| w == b"\r\n\r\n") {
                        match s.read(&mut buf) {
                            Ok(0) | Err(_) => break,
                            Ok(n) => got.extend_from_slice(&buf[..n]),
                        }
                    }
                    let head = String::from_utf8_lossy(&got).into_owned();
                    let mut line = head.lines().next().unwrap_or_default().split(' ');
                    let (method, target) = (
                        line.next().unwrap_or_default(),
                        line.next().unwrap_or_default(),
                    );
                    let path = target.split('?').next().unwrap_or_default();
                    asked.lock().unwrap().push(format!("{method} {path}"));
                    let answer = if present.iter().any(|p| p == path) {
                        "HTTP/1.1 200 OK\r\nContent-Length: 1\r\nLast-Modified: Wed, 21 Oct 2015 07:28:00 GMT\r\nETag: \"1\"\r\nConnection: close\r\n\r\n"
                    } else {
                        "HTTP/1.1 404 Not Found\r\nContent-Length: 0\r\nConnection: close\r\n\r\n"
                    };
                    let _ = s.write_all(answer.as_bytes());
                }
            });
        }
        Self { port, asked, stop }
    }

    fn asked(&self) -> Vec<String> {
        self.asked.lock().unwrap().clone()
    }
}

impl Drop for StandInStore {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
    }
}

#[test]
fn a_registration_naming_a_credentials_endpoint_is_refused_and_nothing_reaches_it() {
    let work = tempfile::tempdir().unwrap();
    let w = work.path().canonicalize().unwrap();
    // The pod's identity token, as a projected service-account token would be.
    let secret = format!("pod-identity-token-{}", std::process::id());
    let token_file = w.join("token");
    std::fs::write(&token_file, &secret).unwrap();
    let sts = Listener::start();
    let d = Daemon::start_with(
        &w.join("d"),
        &format!(
            "{}[defaults]\npoll_interval = \"1s\"\nfailed_writes_policy = \"observe\"\n[defaults.storage_options]\naws_endpoint = \"http://127.0.0.1:1\"\naws_allow_http = \"true\"\naws_region = \"us-east-1\"\n",
            server("allowed_table_uris = [\"s3://hk-sec/tables/\"]\n")
        ),
        |c| {
            // Only the registration names a credential source.
            for (k, _) in std::env::vars() {
                if k.starts_with("AWS_") {
                    c.env_remove(k);
                }
            }
        },
    );
    let web_identity = register(
        &d,
        &entry(
            "sts",
            "s3://hk-sec/tables/a",
            json!({"storage_options": {
                "aws_endpoint_url_sts": format!("https://127.0.0.1:{}", sts.port),
                "aws_web_identity_token_file": token_file.display().to_string(),
                "aws_role_arn": "arn:aws:iam::123456789012:role/attacker",
            }}),
        ),
    );
    let container = register(
        &d,
        &entry(
            "container",
            "s3://hk-sec/tables/b",
            json!({"storage_options": {
                "aws_container_credentials_full_uri": format!("http://127.0.0.1:{}/creds", sts.port),
                "aws_container_authorization_token_file": token_file.display().to_string(),
            }}),
        ),
    );
    // A registered table is first polled within a second; give it several polls.
    std::thread::sleep(Duration::from_secs(5));
    let seen = sts.seen.lock().unwrap().clone();
    let leaked = seen
        .iter()
        .filter(|b| String::from_utf8_lossy(b).contains(&secret))
        .count();
    assert!(
        seen.is_empty(),
        "the daemon connected {} times to the caller's endpoint ({leaked} carried the pod's token)",
        seen.len()
    );
    assert_eq!(web_identity.status, 422, "{}", web_identity.body);
    assert!(
        web_identity.body.contains("aws_endpoint_url_sts"),
        "{}",
        web_identity.body
    );
    assert_eq!(container.status, 422, "{}", container.body);
    assert!(
        container
            .body
            .contains("aws_container_authorization_token_file")
            || container
                .body
                .contains("aws_container_credentials_full_uri"),
        "{}",
        container.body
    );
    assert!(names(&d).is_empty());
}

#[test]
fn an_api_registration_cannot_weaken_the_lock_or_policy_of_the_defaults() {
    let work = tempfile::tempdir().unwrap();
    let w = work.path().canonicalize().unwrap();
    let allowed = w.join("allowed");
    std::fs::create_dir_all(&allowed).unwrap();
    let defaults = "[defaults]\npoll_interval = \"1h\"\nfailed_writes_policy = \"lazy\"\nheartbeat_interval = \"60s\"\nheartbeat_tolerable_misses = 2\nmin_instant_age = \"10m\"\nclock_skew_margin = \"5s\"\n[defaults.lock]\nprovider = \"filesystem\"\n";
    let allow = format!("allowed_table_uris = [\"{}\"]\n", allowed.display());
    let d = Daemon::start(&w.join("d1"), &format!("{}{defaults}", server(&allow)));
    let uri = |n: &str| allowed.join(n).display().to_string();
    for (i, (extra, key)) in [
        (json!({"lock": {"provider": "none"}}), "lock"),
        (
            json!({"lock": {"provider": "filesystem", "filesystem_dir": ".hoodie/elsewhere"}}),
            "lock",
        ),
        (
            json!({"lock": {"provider": "filesystem", "filesystem_expire": "1m"}}),
            "lock",
        ),
        (
            json!({"lock": {"provider": "zookeeper", "zookeeper_url": "127.0.0.1:2181", "zookeeper_base_path": "/x"}}),
            "lock",
        ),
        (json!({"failed_writes_policy": "eager"}), "failed_writes_policy"),
        (json!({"min_instant_age": "0s"}), "min_instant_age"),
        (json!({"heartbeat_interval": "1s"}), "heartbeat_interval"),
        (
            json!({"heartbeat_tolerable_misses": 0}),
            "heartbeat_tolerable_misses",
        ),
        (json!({"clock_skew_margin": "0s"}), "clock_skew_margin"),
        (json!({"assume_lazy_writers": true}), "assume_lazy_writers"),
        (json!({"max_write_duration": "1h"}), "max_write_duration"),
        // The issue's example, all at once.
        (
            json!({"lock": {"provider": "none"}, "failed_writes_policy": "eager", "min_instant_age": "0s"}),
            "min_instant_age",
        ),
    ]
    .into_iter()
    .enumerate()
    {
        let r = register(&d, &entry(&format!("w{i}"), &uri(&format!("w{i}")), extra));
        assert_eq!(r.status, 403, "{key}: {}", r.body);
        assert!(r.body.contains(key), "{key}: {}", r.body);
        assert!(r.body.contains("api_may_weaken_safety"), "{}", r.body);
    }
    // As strong or stronger is fine.
    for (i, extra) in [
        json!({"failed_writes_policy": "observe"}),
        json!({"min_instant_age": "20m", "heartbeat_tolerable_misses": 3, "clock_skew_margin": "10s"}),
        json!({"lock": {"provider": "filesystem", "timeout": "5m"}}),
        json!({"assume_lazy_writers": false, "poll_interval": "10m"}),
    ]
    .into_iter()
    .enumerate()
    {
        let r = register(&d, &entry(&format!("s{i}"), &uri(&format!("s{i}")), extra));
        assert_eq!(r.status, 201, "{}", r.body);
    }
    drop(d);

    // The operator may allow it.
    let d = Daemon::start(
        &w.join("d2"),
        &format!(
            "{}{defaults}",
            server(&format!("{allow}api_may_weaken_safety = true\n"))
        ),
    );
    let r = register(
        &d,
        &entry(
            "weak",
            &uri("weak"),
            json!({"lock": {"provider": "none"}, "failed_writes_policy": "eager", "min_instant_age": "0s"}),
        ),
    );
    assert_eq!(r.status, 201, "{}", r.body);
}

#[test]
fn the_registry_files_are_private_and_replaced_whole() {
    let work = tempfile::tempdir().unwrap();
    let w = work.path().canonicalize().unwrap();
    let allowed = w.join("allowed");
    std::fs::create_dir_all(&allowed).unwrap();
    let dir = w.join("d");
    let state = dir.join("state");
    std::fs::create_dir_all(&state).unwrap();
    // A registry an older version left readable by all: moved, and gone.
    let registry = state.join("tables.json");
    std::fs::write(&registry, "[]").unwrap();
    std::fs::set_permissions(
        &registry,
        std::os::unix::fs::PermissionsExt::from_mode(0o644),
    )
    .unwrap();
    let d = Daemon::start(
        &dir,
        &format!(
            "{}[defaults]\npoll_interval = \"1h\"\nfailed_writes_policy = \"observe\"\n",
            server(&format!(
                "allowed_table_uris = [\"{}\"]\n",
                allowed.display()
            ))
        ),
    );
    assert!(!registry.exists());
    for n in ["a", "b"] {
        let r = register(
            &d,
            &entry(n, &allowed.join(n).display().to_string(), json!({})),
        );
        assert_eq!(r.status, 201, "{}", r.body);
        let file = state.join(format!("api-tables/{n}.json"));
        assert_eq!(mode(&file), 0o600, "after registering {n}");
        let kept: Value = serde_json::from_slice(&std::fs::read(&file).unwrap()).unwrap();
        assert_eq!(kept["name"], n, "{kept}");
    }
    assert_eq!(mode(&state.join("api-tables")), 0o700);
    // Nothing but the tables' files is left of their writes.
    assert_eq!(api_table_files(&state), ["a.json", "b.json"]);
}

#[test]
fn a_corrupt_registry_is_reported_while_the_configured_tables_keep_running() {
    let rt = tokio::runtime::Runtime::new().unwrap();
    let work = tempfile::tempdir().unwrap();
    let w = work.path().canonicalize().unwrap();
    let table = w.join("configured");
    build_local(&rt, &table, Kind::CowV8);
    let allowed = w.join("allowed");
    std::fs::create_dir_all(&allowed).unwrap();
    let dir = w.join("d");
    std::fs::create_dir_all(dir.join("state")).unwrap();
    let registry = dir.join("state/tables.json");
    let corrupt = b"[{\"name\": \"half-writ";
    std::fs::write(&registry, corrupt).unwrap();
    let d = Daemon::start(
        &dir,
        &format!(
            "{}[defaults]\npoll_interval = \"200ms\"\nfailed_writes_policy = \"observe\"\n[[tables]]\nname = \"configured\"\nuri = \"{}\"\n",
            server(&format!("allowed_table_uris = [\"{}\"]\n", allowed.display())),
            table.display()
        ),
    );
    d.wait_for(
        "the configured table's polls",
        Duration::from_secs(20),
        || (d.table("configured")["status"]["polls"].as_u64() >= Some(2)).then_some(()),
    );
    assert_eq!(d.table("configured")["status"]["last_poll_ok"], true);
    let ready = d.get("/readyz");
    assert_eq!(ready.status, 503, "{}", ready.body);
    let ready = ready.json();
    assert_eq!(ready["registry"]["ok"], false, "{ready}");
    assert!(
        ready["registry"]["error"]
            .as_str()
            .is_some_and(|e| e.contains("tables.json")),
        "{ready}"
    );
    assert_eq!(
        d.metric(r#"hudi_keeper_registry_errors_total{kind="unreadable"}"#),
        Some(1.0)
    );
    assert!(
        d.logs().contains("ERROR") && d.logs().contains("tables.json"),
        "{}",
        d.logs()
    );
    // Registering now would replace the file and lose what it held: refused until it is fixed.
    let r = register(
        &d,
        &entry("new", &allowed.join("new").display().to_string(), json!({})),
    );
    assert_eq!(r.status, 409, "{}", r.body);
    assert!(r.body.contains("tables.json"), "{}", r.body);
    assert_eq!(std::fs::read(&registry).unwrap(), corrupt);
}

#[test]
fn registry_entries_the_policy_refuses_are_reported_kept_and_removable() {
    let work = tempfile::tempdir().unwrap();
    let w = work.path().canonicalize().unwrap();
    let allowed = w.join("allowed");
    std::fs::create_dir_all(&allowed).unwrap();
    let dir = w.join("d");
    std::fs::create_dir_all(dir.join("state")).unwrap();
    let registry = dir.join("state/tables.json");
    // What an older version let the API register.
    let old = json!([
        {"name": "good", "uri": allowed.join("good").display().to_string()},
        {"name": "elsewhere", "uri": w.join("elsewhere").display().to_string()},
        {"name": "endpoint", "uri": allowed.join("e").display().to_string(),
         "storage_options": {"aws_endpoint": "http://127.0.0.1:1"}},
        {"name": "no-lock", "uri": allowed.join("n").display().to_string(),
         "failed_writes_policy": "eager", "lock": {"provider": "none"}},
    ]);
    std::fs::write(&registry, old.to_string()).unwrap();
    let d = Daemon::start(
        &dir,
        &format!(
            "{}[defaults]\npoll_interval = \"1h\"\nfailed_writes_policy = \"observe\"\n",
            server(&format!(
                "allowed_table_uris = [\"{}\"]\n",
                allowed.display()
            ))
        ),
    );
    assert_eq!(names(&d), ["good"]);
    let ready = d.get("/readyz");
    assert_eq!(ready.status, 503, "{}", ready.body);
    let ready = ready.json();
    let mut refused: Vec<String> = ready["registry"]["not_restored"]
        .as_array()
        .unwrap_or_else(|| panic!("{ready}"))
        .iter()
        .map(|e| {
            assert!(e["error"].is_string(), "{e}");
            e["name"].as_str().unwrap().to_string()
        })
        .collect();
    refused.sort();
    assert_eq!(refused, ["elsewhere", "endpoint", "no-lock"], "{ready}");
    assert_eq!(
        d.metric(r#"hudi_keeper_registry_errors_total{kind="not_restored"}"#),
        Some(3.0)
    );
    // Kept in the file across other changes, so a corrected config brings them back...
    let r = register(
        &d,
        &entry("new", &allowed.join("new").display().to_string(), json!({})),
    );
    assert_eq!(r.status, 201, "{}", r.body);
    // (Each in a file of its own now: tables.json was moved at start.)
    assert!(!registry.exists());
    let state = dir.join("state");
    let kept = |state: &Path| -> Vec<String> {
        api_table_files(state)
            .iter()
            .map(|f| {
                let v: Value = serde_json::from_slice(
                    &std::fs::read(state.join("api-tables").join(f)).unwrap(),
                )
                .unwrap();
                v["name"].as_str().unwrap().to_string()
            })
            .collect()
    };
    assert_eq!(
        kept(&state),
        ["elsewhere", "endpoint", "good", "new", "no-lock"]
    );
    // ...and removable through the API.
    for n in ["elsewhere", "endpoint", "no-lock"] {
        let r = request(
            &d.addr,
            "DELETE",
            &format!("/api/v1/tables/{n}"),
            Some(TOKEN),
            None,
        );
        assert_eq!(r.status, 204, "{n}: {}", r.body);
    }
    assert_eq!(kept(&state), ["good", "new"]);
    d.wait_for("readiness", Duration::from_secs(10), || {
        let r = d.get("/readyz");
        (r.json()["registry"]["ok"] == true).then_some(())
    });
}

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

// Issue #30 (items 4, 5, 7): what a registration may cost and what it may write.

/// A daemon whose API may register observed tables under `allowed`, with `extra` lines in
/// `[server]`.
fn api_daemon(dir: &Path, allowed: &Path, extra: &str) -> Daemon {
    Daemon::start(
        dir,
        &format!(
            "{}[defaults]\npoll_interval = \"1h\"\nfailed_writes_policy = \"observe\"\n",
            server(&format!(
                "allowed_table_uris = [\"{}\"]\n{extra}",
                allowed.display()
            ))
        ),
    )
}

/// The names of the tables kept in `state/api-tables/`, sorted.
fn api_table_files(state: &Path) -> Vec<String> {
    let mut n: Vec<String> = match std::fs::read_dir(state.join("api-tables")) {
        Ok(entries) => entries
            .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
            .collect(),
        Err(e) if e.kind() == ErrorKind::NotFound => Vec::new(),
        Err(e) => panic!("{e}"),
    };
    n.sort();
    n
}

#[test]
fn a_uri_or_name_with_a_control_character_is_refused_and_forges_no_log_line() {
    let work = tempfile::tempdir().unwrap();
    let w = work.path().canonicalize().unwrap();
    let allowed = w.join("allowed");
    std::fs::create_dir_all(&allowed).unwrap();
    let d = api_daemon(&w.join("d"), &allowed, "");
    // A line break followed by what a text log line looks like, and other control characters
    // (carriage return, an ANSI escape, C1's next-line).
    let forged =
        "2030-01-01T00:00:00.000000Z  INFO hudi_keeper: FORGED-LINE rolled back every table";
    for (name, uri) in [
        ("nl", format!("{}/t\n{forged}", allowed.display())),
        ("cr", format!("{}/t\r{forged}", allowed.display())),
        ("esc", format!("{}/t\u{1b}[2K{forged}", allowed.display())),
        ("nel", format!("{}/t\u{85}{forged}", allowed.display())),
        ("nul", format!("{}/t\u{0}", allowed.display())),
    ] {
        let r = register(&d, &entry(name, &uri, json!({})));
        assert_eq!(r.status, 422, "{name}: {}", r.body);
        assert!(r.body.contains("control character"), "{name}: {}", r.body);
    }
    let r = register(
        &d,
        &entry(
            &format!("n\n{forged}"),
            &allowed.join("n").display().to_string(),
            json!({}),
        ),
    );
    assert_eq!(r.status, 422, "{}", r.body);
    assert!(names(&d).is_empty());
    // Nothing the caller wrote became a line of the log (give any poll a moment to log).
    std::thread::sleep(Duration::from_millis(1500));
    let logs = d.logs();
    assert!(!logs.contains("FORGED-LINE"), "{logs}");
}

#[test]
fn api_registrations_are_capped_by_max_api_tables() {
    let work = tempfile::tempdir().unwrap();
    let w = work.path().canonicalize().unwrap();
    let allowed = w.join("allowed");
    std::fs::create_dir_all(&allowed).unwrap();
    let d = api_daemon(&w.join("d"), &allowed, "max_api_tables = 2\n");
    let uri = |n: &str| allowed.join(n).display().to_string();
    for n in ["a", "b"] {
        let r = register(&d, &entry(n, &uri(n), json!({})));
        assert_eq!(r.status, 201, "{n}: {}", r.body);
    }
    let r = register(&d, &entry("c", &uri("c"), json!({})));
    assert_eq!(r.status, 409, "{}", r.body);
    assert!(r.body.contains("server.max_api_tables"), "{}", r.body);
    assert_eq!(names(&d), ["a", "b"]);
    // A slot freed is a slot taken again.
    let r = request(&d.addr, "DELETE", "/api/v1/tables/a", Some(TOKEN), None);
    assert_eq!(r.status, 204, "{}", r.body);
    let r = register(&d, &entry("c", &uri("c"), json!({})));
    assert_eq!(r.status, 201, "{}", r.body);
    assert_eq!(names(&d), ["b", "c"]);
}

#[test]
fn each_api_table_is_its_own_private_file_and_a_registration_rewrites_no_other() {
    use std::os::unix::fs::MetadataExt;
    let work = tempfile::tempdir().unwrap();
    let w = work.path().canonicalize().unwrap();
    let allowed = w.join("allowed");
    std::fs::create_dir_all(&allowed).unwrap();
    let dir = w.join("d");
    let state = dir.join("state");
    let d = api_daemon(&dir, &allowed, "");
    // Long URIs, as in the review (4 KB each).
    let long = |n: &str| allowed.join(n).join("x".repeat(4000)).display().to_string();
    let r = register(&d, &entry("a", &long("a"), json!({})));
    assert_eq!(r.status, 201, "{}", r.body);
    let file_a = state.join("api-tables/a.json");
    let before = std::fs::metadata(&file_a).unwrap_or_else(|e| panic!("{}: {e}", file_a.display()));
    assert_eq!(mode(&file_a), 0o600);
    assert_eq!(mode(&state.join("api-tables")), 0o700);
    std::thread::sleep(Duration::from_millis(20));
    for n in ["b", "c"] {
        let r = register(&d, &entry(n, &long(n), json!({})));
        assert_eq!(r.status, 201, "{}", r.body);
    }
    // `a`'s file was not written again: same file, same time.
    let after = std::fs::metadata(&file_a).unwrap();
    assert_eq!(
        (before.ino(), before.mtime_nsec(), before.mtime()),
        (after.ino(), after.mtime_nsec(), after.mtime())
    );
    assert_eq!(api_table_files(&state), ["a.json", "b.json", "c.json"]);
    // Each file holds its own table and no other.
    let kept: Value =
        serde_json::from_slice(&std::fs::read(state.join("api-tables/b.json")).unwrap()).unwrap();
    assert_eq!(kept["name"], "b", "{kept}");
    assert_eq!(kept["uri"], long("b"), "{kept}");
    let r = request(&d.addr, "DELETE", "/api/v1/tables/b", Some(TOKEN), None);
    assert_eq!(r.status, 204, "{}", r.body);
    assert_eq!(api_table_files(&state), ["a.json", "c.json"]);
    assert!(!state.join("tables.json").exists());
    drop(d);
    // Read back at start.
    let d = api_daemon(&dir, &allowed, "");
    assert_eq!(names(&d), ["a", "c"]);
    assert_eq!(d.get("/readyz").json()["registry"]["ok"], true);
}

#[test]
fn an_older_tables_json_is_moved_to_one_file_per_table_at_start() {
    let work = tempfile::tempdir().unwrap();
    let w = work.path().canonicalize().unwrap();
    let allowed = w.join("allowed");
    std::fs::create_dir_all(&allowed).unwrap();
    let dir = w.join("d");
    let state = dir.join("state");
    std::fs::create_dir_all(&state).unwrap();
    let registry = state.join("tables.json");
    let old = json!([
        {"name": "x", "uri": allowed.join("x").display().to_string()},
        {"name": "y", "uri": allowed.join("y").display().to_string(), "poll_interval": "2h"},
    ]);
    std::fs::write(&registry, old.to_string()).unwrap();
    std::fs::set_permissions(
        &registry,
        std::os::unix::fs::PermissionsExt::from_mode(0o644),
    )
    .unwrap();
    let d = api_daemon(&dir, &allowed, "");
    assert_eq!(names(&d), ["x", "y"]);
    assert_eq!(api_table_files(&state), ["x.json", "y.json"]);
    assert!(
        !registry.exists(),
        "tables.json is left once every entry moved"
    );
    for n in ["x", "y"] {
        assert_eq!(mode(&state.join(format!("api-tables/{n}.json"))), 0o600);
    }
    assert_eq!(d.table("y")["settings"]["poll_interval_ms"], 7_200_000);
    let r = request(&d.addr, "DELETE", "/api/v1/tables/x", Some(TOKEN), None);
    assert_eq!(r.status, 204, "{}", r.body);
    drop(d);
    let d = api_daemon(&dir, &allowed, "");
    assert_eq!(names(&d), ["y"]);
    assert_eq!(d.get("/readyz").json()["registry"]["ok"], true);
}

#[test]
fn an_api_poll_interval_under_a_second_is_refused() {
    let work = tempfile::tempdir().unwrap();
    let w = work.path().canonicalize().unwrap();
    let allowed = w.join("allowed");
    std::fs::create_dir_all(&allowed).unwrap();
    let d = api_daemon(&w.join("d"), &allowed, "");
    let uri = |n: &str| allowed.join(n).display().to_string();
    for (i, every) in ["100ms", "999ms", "0s"].into_iter().enumerate() {
        let r = register(
            &d,
            &entry(&format!("f{i}"), &uri("f"), json!({"poll_interval": every})),
        );
        assert_eq!(r.status, 422, "{every}: {}", r.body);
        assert!(r.body.contains("poll_interval"), "{}", r.body);
    }
    let r = register(&d, &entry("ok", &uri("ok"), json!({"poll_interval": "1s"})));
    assert_eq!(r.status, 201, "{}", r.body);
    assert_eq!(names(&d), ["ok"]);
}

#[test]
fn a_folder_inside_a_table_is_not_registered_as_a_table_of_its_own() {
    let rt = tokio::runtime::Runtime::new().unwrap();
    let work = tempfile::tempdir().unwrap();
    let w = work.path().canonicalize().unwrap();
    let allowed = w.join("allowed");
    // Tables nobody registered.
    build_local(&rt, &allowed.join("t"), Kind::CowV8);
    build_local(&rt, &allowed.join("deep/er/u"), Kind::CowV8);
    std::fs::create_dir_all(allowed.join("t/dt=2024-01-01")).unwrap();
    // A link to a folder of a table.
    std::os::unix::fs::symlink(allowed.join("t/dt=2024-01-01"), allowed.join("plink")).unwrap();
    let d = api_daemon(&w.join("d"), &allowed, "");
    let u = |p: &Path| p.display().to_string();
    for (name, uri, table) in [
        ("p", u(&allowed.join("t/dt=2024-01-01")), allowed.join("t")),
        // Not there yet: where it would be still is.
        (
            "q",
            u(&allowed.join("t/dt=2024-01-02/x")),
            allowed.join("t"),
        ),
        (
            "r",
            u(&allowed.join("deep/er/u/a/b/c")),
            allowed.join("deep/er/u"),
        ),
        (
            "s",
            format!("file://{}", allowed.join("t/dt=2024-01-01").display()),
            allowed.join("t"),
        ),
        ("l", u(&allowed.join("plink")), allowed.join("t")),
    ] {
        let r = register(&d, &entry(name, &uri, json!({})));
        assert_eq!(r.status, 409, "{uri}: {}", r.body);
        assert!(
            r.body.contains(&table.display().to_string()),
            "{uri}: {}",
            r.body
        );
        assert!(r.body.contains("inside"), "{uri}: {}", r.body);
    }
    assert!(names(&d).is_empty());
    // The tables themselves, and folders beside them, are registered as before (also where no
    // table is yet).
    for (name, uri) in [
        ("t", u(&allowed.join("t"))),
        ("u", u(&allowed.join("deep/er/u"))),
        ("later", u(&allowed.join("deep/later"))),
    ] {
        let r = register(&d, &entry(name, &uri, json!({})));
        assert_eq!(r.status, 201, "{uri}: {}", r.body);
    }
}

#[test]
fn readyz_names_no_path_of_the_daemons_host() {
    let work = tempfile::tempdir().unwrap();
    let w = work.path().canonicalize().unwrap();
    let allowed = w.join("allowed");
    std::fs::create_dir_all(&allowed).unwrap();
    let dir = w.join("d");
    let state = dir.join("state");
    std::fs::create_dir_all(&state).unwrap();
    // `state_dir` given as an absolute path, as a deployment would.
    let config = format!(
        "[server]\nstate_dir = \"{}\"\nauth_token = \"{TOKEN}\"\nallowed_table_uris = [\"{}\"]\n[defaults]\npoll_interval = \"1h\"\nfailed_writes_policy = \"observe\"\n",
        state.display(),
        allowed.display()
    );
    let d = Daemon::start(&dir, &config);
    let ready = d.get("/readyz");
    assert_eq!(ready.status, 200, "{}", ready.body);
    assert!(
        !ready.body.contains(&w.display().to_string()),
        "{}",
        ready.body
    );
    drop(d);
    // Nor when the registry cannot be read: it is named below state_dir.
    std::fs::write(state.join("tables.json"), b"[{").unwrap();
    let d = Daemon::start(&dir, &config);
    let ready = d.get("/readyz");
    assert_eq!(ready.status, 503, "{}", ready.body);
    assert!(ready.body.contains("tables.json"), "{}", ready.body);
    assert!(
        !ready.body.contains(&w.display().to_string()),
        "{}",
        ready.body
    );
}
