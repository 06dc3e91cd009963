//! Fuzz tests of what the daemon parses from its operator and its callers: durations (flags and
//! config), the TOML config file, and the JSON bodies and path segments of the HTTP API. Every
//! input gives a clear error or a value; nothing panics, and the API answers every request with
//! a 2xx, a 4xx, or 502/503 (the table's store failed, or it is busy), never a 500 (a handler
//! that ended abnormally), and keeps serving.
//!
//! `PROPTEST_CASES=N cargo test -p hudi-keeper fuzz_` runs them longer (docs/reliability.md).

use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use axum::body::Body;
use axum::http::{Request, StatusCode};
use proptest::prelude::*;
use proptest::sample::Index;
use proptest::test_runner::{Config as Cases, TestRunner};
use tower::ServiceExt;

use crate::cli::{parse_duration, parse_lock_expire};
use crate::daemon::config::{Config, TableEntry};
use crate::daemon::{http, Daemon};

/// `default` cases unless `PROPTEST_CASES` says otherwise.
fn cases(default: u32) -> Cases {
    let from_env = std::env::var("PROPTEST_CASES")
        .ok()
        .and_then(|v| v.parse::<u32>().ok());
    Cases {
        cases: from_env.unwrap_or(default),
        source_file: Some(file!()),
        ..Cases::default()
    }
}

/// `valid` with up to four changes: bits flipped, cut, bytes inserted or overwritten, or a
/// run of characters that matter to TOML and JSON put in.
fn mutated(valid: Vec<String>) -> impl Strategy<Value = String> {
    let change = prop_oneof![
        (any::<Index>(), any::<u8>()).prop_map(|(i, b)| (0u8, i, vec![b])),
        any::<Index>().prop_map(|i| (1u8, i, vec![])),
        (
            any::<Index>(),
            prop::collection::vec(
                prop::sample::select(b"\"'[]{}=,:.\\\n#0123456789-e9dhmsx\x00\xff".to_vec()),
                1..8
            )
        )
            .prop_map(|(i, b)| (2u8, i, b)),
        (any::<Index>(), prop::collection::vec(any::<u8>(), 1..8)).prop_map(|(i, b)| (3u8, i, b)),
    ];
    (
        prop::sample::select(valid),
        prop::collection::vec(change, 0..=4),
    )
        .prop_map(|(text, changes)| {
            let mut b = text.into_bytes();
            for (kind, at, bytes) in changes {
                let p = if b.is_empty() { 0 } else { at.index(b.len()) };
                match kind {
                    0 if !b.is_empty() => b[p] ^= 1 << (bytes[0] % 8),
                    1 => b.truncate(p),
                    2 => {
                        b.splice(p..p, bytes);
                    }
                    3 => {
                        let end = (p + bytes.len()).min(b.len());
                        b.splice(p..end, bytes);
                    }
                    _ => {}
                }
            }
            String::from_utf8_lossy(&b).into_owned()
        })
}

// ---- Durations ------------------------------------------------------------------------------

fn duration_text() -> impl Strategy<Value = String> {
    prop_oneof![
        "[0-9]{0,24}(ms|s|m|h|d|x|)([0-9]{0,24}(ms|s|m|h|d|))?",
        "[ +\\-0-9.smhd]{0,12}",
        any::<String>(),
    ]
}

#[test]
fn fuzz_durations_past_the_limit_are_refused() {
    for huge in [
        "99999999999999999999d",
        "18446744073709551615d",
        "18446744073709551615",
        "101y",
        "36501d",
        "36500d1s",
    ] {
        assert!(parse_duration(huge).is_err(), "{huge}");
    }
    assert_eq!(
        parse_duration("36500d"),
        Ok(Duration::from_secs(36_500 * 86_400))
    );
    assert!(parse_lock_expire("18446744073709551615").is_err());
    assert_eq!(parse_lock_expire("10"), Ok(Duration::from_secs(600)));
}

/// Found by fuzzing the config: a poll timeout of `u64::MAX` seconds was accepted, and the
/// daemon's first poll of each table panicked adding it to the clock (the table was then never
/// polled). Such a config is now refused at load, with the key named.
#[test]
fn fuzz_a_config_with_a_timeout_past_the_limit_is_refused_at_load() {
    let dir = tempfile::tempdir().unwrap();
    for (section, key) in [
        ("server", "poll_timeout"),
        ("server", "mutation_timeout"),
        ("server", "max_backoff"),
        ("defaults", "poll_interval"),
        ("defaults", "heartbeat_interval"),
    ] {
        let text = format!("[{section}]\n{key} = \"18446744073709551615s\"\n");
        let err = load(dir.path(), &text).unwrap_err();
        assert!(format!("{err:#}").contains(key), "{key}: {err:#}");
    }
}

proptest! {
    #![proptest_config(cases(2048))]

    #[test]
    fn fuzz_durations(text in duration_text()) {
        if let Ok(d) = parse_duration(&text) {
            // A plain number of seconds or of any unit reads back the same as its milliseconds
            // when it fits.
            if let Ok(ms) = u64::try_from(d.as_millis()) {
                prop_assert_eq!(parse_duration(&format!("{ms}ms")), Ok(Duration::from_millis(ms)));
            }
        }
        let _ = parse_lock_expire(&text);
    }
}

// ---- The TOML config ------------------------------------------------------------------------

/// The sample config (the daemon's embedded default).
const SAMPLE: &str = include_str!("../../../config/hudi-keeper.toml");

/// A config using most keys: lock providers, storage options, per-table overrides.
const RICH: &str = r#"
[server]
listen = "127.0.0.1:0"
state_dir = "state"
auth_token = "0123456789abcdef0123"
max_concurrent_polls = 4
halt_after_failures = 3
max_backoff = "1m"
poll_timeout = "30s"
mutation_timeout = "1m30s"
max_body_bytes = 65536

[defaults]
poll_interval = 15
failed_writes_policy = "eager"
heartbeat_interval = "500ms"
heartbeat_tolerable_misses = 4
min_instant_age = "1h"
clock_skew_margin = "2s"
max_write_duration = "6h"

[defaults.storage_options]
aws_region = "us-east-1"

[defaults.lock]
provider = "zookeeper"
zookeeper_url = "127.0.0.1:2181"
zookeeper_base_path = "/hudi/locks"
timeout = "2m"

[[tables]]
name = "a"
uri = "s3://bucket/warehouse/a"
poll_interval = "1d"
lock = { provider = "storage", storage_validity = "5m" }

[[tables]]
name = "b"
uri = "/data/b"
failed_writes_policy = "observe"
lock = { provider = "filesystem", filesystem_expire = 10 }
"#;

/// Load `text` as the config file the daemon would read.
fn load(dir: &Path, text: &str) -> anyhow::Result<Config> {
    let path = dir.join("hudi-keeper.toml");
    std::fs::write(&path, text)?;
    Config::load(&path, true)
}

#[test]
fn fuzz_the_config_seeds_load() {
    let dir = tempfile::tempdir().unwrap();
    load(dir.path(), SAMPLE).unwrap();
    let rich = load(dir.path(), RICH).unwrap();
    assert_eq!(rich.tables.len(), 2);
    // Absurd values are clear errors or saturate; they never panic.
    for (key, value) in [
        ("poll_interval", "\"18446744073709551615d\""),
        ("poll_interval", "18446744073709551615"),
        ("heartbeat_interval", "\"99999999999999999999999s\""),
        ("heartbeat_tolerable_misses", "4294967296"),
        ("min_instant_age", "-1"),
        ("clock_skew_margin", "1e400"),
        ("max_write_duration", "{}"),
    ] {
        let text = RICH.replace("[defaults]\n", &format!("[defaults]\n{key} = {value}\n# "));
        if let Ok(c) = load(dir.path(), &text) {
            for t in &c.tables {
                c.defaults.resolve(t).unwrap();
            }
        }
    }
}

proptest! {
    #![proptest_config(cases(512))]

    #[test]
    fn fuzz_config_files(text in prop_oneof![
        3 => mutated(vec![SAMPLE.to_string(), RICH.to_string()]),
        1 => "[\\[\\]a-z_.=\" 0-9\n{}]{0,200}",
    ]) {
        let dir = tempfile::tempdir().unwrap();
        if let Ok(c) = load(dir.path(), &text) {
            // What loads has every table resolved (the config checks it at load).
            for t in &c.tables {
                prop_assert!(c.defaults.resolve(t).is_ok());
            }
        }
    }
}

// ---- The HTTP API ---------------------------------------------------------------------------

const TOKEN: &str = "fuzz-token-0123456789abcdef";

/// A daemon with one table `t` (an empty version-9 table in `dir`), the API enabled, and
/// registrations allowed under `dir`.
fn api(rt: &tokio::runtime::Runtime, dir: &Path) -> axum::Router {
    let table = dir.join("t");
    std::fs::create_dir_all(table.join(".hoodie/timeline")).unwrap();
    std::fs::write(
        table.join(".hoodie/hoodie.properties"),
        "hoodie.table.name=t\nhoodie.table.version=9\nhoodie.timeline.layout.version=2\n",
    )
    .unwrap();
    let mut config = Config::default();
    config.server.auth_token = Some(TOKEN.into());
    config.server.state_dir = dir.join("state");
    config.server.allowed_table_uris = vec![format!("{}/", dir.display())];
    config.tables.push(
        serde_json::from_value::<TableEntry>(serde_json::json!({
            "name": "t",
            "uri": table.display().to_string(),
            "failed_writes_policy": "observe",
        }))
        .unwrap(),
    );
    rt.block_on(async {
        let daemon: Arc<Daemon> = Daemon::new(config).unwrap();
        daemon.start().await.unwrap();
        http::router(daemon)
    })
}

async fn send(app: &axum::Router, method: &str, uri: &str, body: String) -> (StatusCode, String) {
    let Ok(req) = Request::builder()
        .method(method)
        .uri(uri)
        .header("content-type", "application/json")
        .header("authorization", format!("Bearer {TOKEN}"))
        .body(Body::from(body))
    else {
        // Not a request a client could send (the URI does not parse).
        return (StatusCode::BAD_REQUEST, String::new());
    };
    let resp = app.clone().oneshot(req).await.unwrap();
    let status = resp.status();
    let bytes = axum::body::to_bytes(resp.into_body(), 1 << 20)
        .await
        .unwrap_or_default();
    (status, String::from_utf8_lossy(&bytes).into_owned())
}

/// Each mutating route with bodies it accepts.
fn requests(dir: &Path) -> Vec<(&'static str, &'static str, Vec<String>)> {
    let uri = dir.join("u").display().to_string();
    vec![
        (
            "POST",
            "/api/v1/tables",
            vec![
                format!(
                    r#"{{"name":"u","uri":"{uri}","poll_interval":"30s","failed_writes_policy":"observe"}}"#
                ),
                format!(
                    r#"{{"name":"v","uri":"{uri}","heartbeat_interval":"1m","lock":{{"provider":"filesystem","filesystem_expire":"10"}},"storage_options":{{"aws_region":"x"}}}}"#
                ),
            ],
        ),
        (
            "POST",
            "/api/v1/tables/{name}/rollback",
            vec![
                r#"{"instant":"20250126040823628","dry_run":true}"#.into(),
                r#"{"dry_run":true}"#.into(),
            ],
        ),
        (
            "POST",
            "/api/v1/tables/{name}/restore",
            vec![
                r#"{"to_instant":"20250126040823628","dry_run":true}"#.into(),
                r#"{"savepoint":"20250126040823628","dry_run":true}"#.into(),
            ],
        ),
        (
            "POST",
            "/api/v1/tables/{name}/savepoints",
            vec![
                r#"{"instant":"20250126040823628","user":"u","comment":"c","dry_run":true}"#.into(),
                r#"{"dry_run":true}"#.into(),
            ],
        ),
        ("POST", "/api/v1/tables/{name}/resume", vec!["{}".into()]),
        ("DELETE", "/api/v1/tables/{name}", vec![String::new()]),
    ]
}

fn check_status(status: StatusCode, what: &str, body: &str) {
    assert!(
        status.is_success()
            || status.is_client_error()
            || status == StatusCode::BAD_GATEWAY
            || status == StatusCode::SERVICE_UNAVAILABLE,
        "{what}: {status} {body}"
    );
}

#[test]
fn fuzz_api_bodies_and_names() {
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(1)
        .enable_all()
        .build()
        .unwrap();
    let dir = tempfile::tempdir().unwrap();
    let app = api(&rt, dir.path());
    let name = prop_oneof![
        4 => Just("t".to_string()),
        1 => "[a-z0-9._%~-]{0,12}",
        1 => any::<String>().prop_map(|s| s.bytes().map(|b| format!("%{b:02X}")).collect::<String>()),
    ];
    let request = prop::strategy::Union::new(requests(dir.path()).into_iter().map(
        |(method, route, seeds)| {
            let body = prop_oneof![4 => mutated(seeds), 1 => any::<String>()];
            (Just(method), Just(route), body).boxed()
        },
    ));
    let strategy = (request, name);
    let mut runner = TestRunner::new(cases(512));
    let result = runner.run(&strategy, |((method, route, body), name)| {
        // Only dry runs and refusals: a body that would change table `t` is sent as a dry run.
        let body = if route.ends_with("/tables") || body.contains("\"dry_run\":true") {
            body
        } else {
            body.replace("\"dry_run\":false", "\"dry_run\":true")
        };
        // The table the test works on stays registered.
        let name = if method == "DELETE" && name == "t" {
            "x".to_string()
        } else {
            name
        };
        let uri = route.replace("{name}", &name);
        let (status, text) = rt.block_on(send(&app, method, &uri, body.clone()));
        check_status(status, &format!("{method} {uri} {body:?}"), &text);
        Ok(())
    });
    if let Err(e) = result {
        panic!("{e}");
    }
    // Still serving, and `t` still there.
    let (status, text) = rt.block_on(send(&app, "GET", "/api/v1/tables/t", String::new()));
    assert_eq!(status, StatusCode::OK, "{text}");
}
