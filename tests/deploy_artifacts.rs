//! The dashboard and the alerts against a running daemon: every metric they reference exists, and
//! every metric the daemon exports is on the dashboard. And the shipped daemon configs: each
//! serves the probes and `/metrics` on a listener of its own (`server.probe_listen`, issue #30),
//! the one the manifests' probes and monitors use (`scripts/check-deploy` checks those).

use hudi_keeper_test_support as common;

use std::collections::BTreeSet;
use std::time::Duration;

use common::config::DaemonConfig;
use common::daemon::Daemon;
use common::fixtures::{build_local, Kind};
use common::http::get;
use common::interop::workspace;
use common::{run, stderr};

/// Every daemon config the deployments ship (the Helm chart's is checked by scripts/check-deploy).
const SHIPPED_CONFIGS: [&str; 5] = [
    "deploy/image/hudi-keeper.toml",
    "deploy/kubernetes/base/hudi-keeper.toml",
    "deploy/kubernetes/overlays/production/hudi-keeper.toml",
    "deploy/kubernetes/overlays/statefulset/hudi-keeper.toml",
    SIDECAR_CONFIG,
];

/// The sidecar's, which listens on loopback only.
const SIDECAR_CONFIG: &str = "deploy/kubernetes/examples/spark-driver-sidecar/hudi-keeper.toml";

/// The string value of `key` in the `[server]` table of a config file (the shipped files write
/// each key on a line of its own).
fn server_value(text: &str, key: &str) -> Option<String> {
    let mut section = "";
    for line in text.lines().map(str::trim) {
        if line.starts_with('[') {
            section = line;
            continue;
        }
        if section != "[server]" {
            continue;
        }
        let Some((k, v)) = line.split_once('=') else {
            continue;
        };
        if k.trim() == key {
            let v = v.trim().strip_prefix('"')?;
            return Some(v[..v.find('"')?].to_string());
        }
    }
    None
}

/// `text` with the `[server]` line of `key` set to `value`.
fn with_server_value(text: &str, key: &str, value: &str) -> String {
    let mut section = "";
    let mut found = false;
    let mut out = String::new();
    for line in text.lines() {
        let t = line.trim();
        if t.starts_with('[') {
            section = t;
        }
        match t.split_once('=') {
            Some((k, _)) if section == "[server]" && k.trim() == key => {
                out.push_str(&format!("{key} = \"{value}\""));
                found = true;
            }
            _ => out.push_str(line),
        }
        out.push('\n');
    }
    assert!(found, "no [server] {key} in\n{text}");
    out
}

#[test]
fn every_shipped_config_has_a_probe_listener_on_9465_beside_the_api_on_9464() {
    for file in SHIPPED_CONFIGS {
        let text = std::fs::read_to_string(workspace().join(file)).unwrap();
        let host = if file == SIDECAR_CONFIG {
            "127.0.0.1"
        } else {
            "0.0.0.0"
        };
        assert_eq!(
            server_value(&text, "listen").as_deref(),
            Some(format!("{host}:9464").as_str()),
            "{file}: server.listen"
        );
        assert_eq!(
            server_value(&text, "probe_listen").as_deref(),
            Some(format!("{host}:9465").as_str()),
            "{file}: server.probe_listen (the port the probes and monitors use)"
        );
    }
    // The image declares both.
    let dockerfile = std::fs::read_to_string(workspace().join("Dockerfile")).unwrap();
    let exposed: Vec<&str> = dockerfile
        .lines()
        .filter_map(|l| l.strip_prefix("EXPOSE "))
        .flat_map(str::split_whitespace)
        .collect();
    for port in ["9464", "9465"] {
        assert!(
            exposed.contains(&port),
            "the Dockerfile does not EXPOSE {port}: {exposed:?}"
        );
    }
}

/// Each shipped config, with only its addresses moved to free loopback ports and `state_dir` to a
/// temporary folder, starts a probe listener that answers `/healthz` (also to the
/// `hudi-keeper health` the sidecar's exec probes run), `/readyz` and `/metrics`, and nothing of
/// the API. Its tables (object stores this test cannot reach) only make it unready.
#[test]
fn every_shipped_config_serves_the_probes_and_metrics_on_the_probe_listener() {
    for file in SHIPPED_CONFIGS {
        let work = tempfile::tempdir().unwrap();
        let text = std::fs::read_to_string(workspace().join(file)).unwrap();
        let text = with_server_value(&text, "probe_listen", "127.0.0.1:0");
        let text = with_server_value(&text, "state_dir", "state");
        // The StatefulSet's replicas take their index from their pod name.
        let d = Daemon::start_with(work.path(), &text, |cmd| {
            cmd.env("POD_NAME", "hudi-keeper-0");
        });
        let probes = d.wait_for("the probe listener", Duration::from_secs(20), || {
            d.logs()
                .lines()
                .find_map(|l| l.strip_prefix("hudi-keeper probes on http://"))
                .map(|a| a.trim().to_string())
        });
        assert_ne!(probes, d.addr, "{file}");
        let h = get(&probes, "/healthz");
        assert_eq!(h.status, 200, "{file}: {}", h.body);
        let ready = get(&probes, "/readyz");
        assert!(
            ready.status == 200 || ready.status == 503,
            "{file}: {ready:?}"
        );
        let metrics = get(&probes, "/metrics");
        assert_eq!(metrics.status, 200, "{file}");
        assert!(metrics.body.contains("hudi_keeper_"), "{file}");
        assert_eq!(get(&probes, "/api/v1/tables").status, 404, "{file}");
        assert_eq!(get(&d.addr, "/api/v1/tables").status, 200, "{file}");
        let health = run(&["health", "--addr", &probes]);
        assert!(health.status.success(), "{file}: {}", stderr(&health));
    }
}

/// Every `hudi_keeper_…` name in `text`.
fn metric_names(text: &str) -> BTreeSet<String> {
    let mut out = BTreeSet::new();
    let bytes = text.as_bytes();
    let mut i = 0;
    while let Some(pos) = text[i..].find("hudi_keeper_") {
        let start = i + pos;
        let mut end = start;
        while end < bytes.len() && (bytes[end].is_ascii_alphanumeric() || bytes[end] == b'_') {
            end += 1;
        }
        out.insert(text[start..end].to_string());
        i = end;
    }
    out
}

/// The family a referenced series belongs to (`_bucket`, `_sum`, `_count` of histograms).
fn family(name: &str, families: &BTreeSet<String>) -> Option<String> {
    if families.contains(name) {
        return Some(name.to_string());
    }
    for suffix in ["_bucket", "_sum", "_count"] {
        if let Some(base) = name.strip_suffix(suffix) {
            if families.contains(base) {
                return Some(base.to_string());
            }
        }
    }
    None
}

#[test]
fn the_dashboard_and_the_alerts_cover_exactly_the_exported_metrics() {
    let rt = tokio::runtime::Runtime::new().unwrap();
    let work = tempfile::tempdir().unwrap();
    let dir = work.path().join("t");
    build_local(&rt, &dir, Kind::CowV8);
    let d = Daemon::start(
        work.path(),
        &DaemonConfig::new()
            .defaults("poll_interval", "500ms")
            .defaults("assume_lazy_writers", "true")
            .lock("provider", "filesystem")
            // A discovery source, so that its series are exported too.
            .raw(&format!(
                "[[discover]]\nname = \"lake\"\nprefix = \"{}\"\n",
                work.path().join("lake").display()
            ))
            .table("t", &dir.display().to_string())
            .to_string(),
    );
    d.wait_for("the rollback", Duration::from_secs(20), || {
        (d.table("t")["status"]["rollbacks"] == 1).then_some(())
    });
    let exposition = d.get("/metrics").body;
    let families: BTreeSet<String> = exposition
        .lines()
        .filter_map(|l| l.strip_prefix("# TYPE "))
        .filter_map(|l| l.split_whitespace().next())
        .map(str::to_string)
        .collect();
    assert!(families.len() >= 15, "{families:?}");

    let dashboard: serde_json::Value = serde_json::from_str(
        &std::fs::read_to_string(workspace().join("deploy/grafana/hudi-keeper.json")).unwrap(),
    )
    .unwrap();
    let mut exprs = String::new();
    for panel in dashboard["panels"].as_array().unwrap() {
        assert!(
            panel["fieldConfig"]["defaults"]["unit"].is_string(),
            "panel {} has no unit",
            panel["title"]
        );
        for t in panel["targets"].as_array().unwrap() {
            exprs.push_str(t["expr"].as_str().unwrap());
            exprs.push('\n');
        }
    }
    let on_dashboard: BTreeSet<String> = metric_names(&exprs);
    let unknown: Vec<_> = on_dashboard
        .iter()
        .filter(|n| family(n, &families).is_none())
        .collect();
    assert!(
        unknown.is_empty(),
        "the dashboard uses metrics the daemon does not export: {unknown:?}"
    );
    let covered: BTreeSet<String> = on_dashboard
        .iter()
        .filter_map(|n| family(n, &families))
        .collect();
    let missing: Vec<_> = families.difference(&covered).collect();
    assert!(
        missing.is_empty(),
        "exported metrics without a dashboard panel: {missing:?}"
    );
    // The table variable is there and the per-table panels use it.
    assert!(dashboard["templating"]["list"]
        .as_array()
        .unwrap()
        .iter()
        .any(|v| v["name"] == "table"));
    assert!(exprs.contains("$table"));

    let alerts =
        std::fs::read_to_string(workspace().join("deploy/prometheus/alerts.yaml")).unwrap();
    let in_alerts = metric_names(&alerts);
    assert!(in_alerts.len() >= 5, "{in_alerts:?}");
    let unknown: Vec<_> = in_alerts
        .iter()
        .filter(|n| family(n, &families).is_none())
        .collect();
    assert!(
        unknown.is_empty(),
        "the alerts use metrics the daemon does not export: {unknown:?}"
    );
}
