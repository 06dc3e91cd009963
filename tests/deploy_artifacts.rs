//! The dashboard and the alerts against a running daemon: every metric they reference exists, and
//! every metric the daemon exports is on the dashboard.

mod common;

use std::collections::BTreeSet;
use std::time::Duration;

use common::daemon::Daemon;
use common::fixtures::{build_local, Kind};
use common::interop::workspace;

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
        &format!(
            "[server]\nstate_dir = \"state\"\n[defaults]\npoll_interval = \"500ms\"\nassume_lazy_writers = true\n[defaults.lock]\nprovider = \"filesystem\"\n[[tables]]\nname = \"t\"\nuri = \"{}\"\n",
            dir.display()
        ),
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
