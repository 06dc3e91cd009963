//! What a holder of the API token can and cannot do (issue #15), against the real binary as
//! deployed: registrations only under `server.allowed_table_uris`, storage options from a safe
//! list only (no endpoints, credential sources or token files), no second registration of a
//! table, no lock or policy weaker than `[defaults]`. (The registry files and issue #30's
//! limits on registrations are in `api_registry`, the HTTP server's own limits in `api_limits`.)

use std::io::{Read, Write};
use std::net::TcpListener;
use std::path::Path;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use common::api::{entry, names, register, server};
use common::daemon::Daemon;
use common::fixtures::{build_local, Kind};
use hudi_keeper_test_support as common;
use serde_json::json;

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
