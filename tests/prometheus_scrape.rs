//! A real Prometheus (Debian's `prometheus` package, installed by `scripts/test`) scrapes the
//! daemon, and `promtool check metrics` lints what it exports.

use hudi_keeper_test_support as common;

use std::process::{Command, Stdio};
use std::time::Duration;

use common::config::DaemonConfig;
use common::daemon::Daemon;
use common::fixtures::{build_local, Kind};
use common::http::get;

fn tool(name: &str) -> String {
    let found = Command::new("sh")
        .args(["-c", &format!("command -v {name}")])
        .output()
        .expect("sh");
    assert!(
        found.status.success(),
        "`{name}` is not installed: run the tests through scripts/test, which installs Debian's prometheus package"
    );
    String::from_utf8_lossy(&found.stdout).trim().to_string()
}

fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

fn daemon_with_a_rollback(work: &std::path::Path) -> Daemon {
    let rt = tokio::runtime::Runtime::new().unwrap();
    let dir = work.join("t");
    build_local(&rt, &dir, Kind::MorV9);
    let d = Daemon::start(
        work,
        &DaemonConfig::new()
            .defaults("poll_interval", "500ms")
            .defaults("assume_lazy_writers", "true")
            .lock("provider", "filesystem")
            .table("t", &dir.display().to_string())
            .to_string(),
    );
    d.wait_for("the rollback", Duration::from_secs(20), || {
        (d.table("t")["status"]["rollbacks"] == 1).then_some(())
    });
    d
}

#[test]
fn promtool_finds_no_problem_in_the_exported_metrics() {
    let promtool = tool("promtool");
    let work = tempfile::tempdir().unwrap();
    let d = daemon_with_a_rollback(work.path());
    let metrics = d.get("/metrics");
    assert_eq!(metrics.status, 200);
    let mut child = Command::new(promtool)
        .args(["check", "metrics"])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    use std::io::Write;
    child
        .stdin
        .take()
        .unwrap()
        .write_all(metrics.body.as_bytes())
        .unwrap();
    let out = child.wait_with_output().unwrap();
    let report = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(out.status.success(), "promtool: {report}\n{}", metrics.body);
    assert!(
        report.trim().is_empty(),
        "promtool found problems: {report}"
    );
    // It did lint something: the rollback is there.
    assert!(metrics
        .body
        .contains(r#"hudi_keeper_rollbacks_total{outcome="success",table="t",trigger="auto"} 1"#));
}

#[test]
fn a_real_prometheus_scrapes_the_daemon() {
    let prometheus = tool("prometheus");
    let work = tempfile::tempdir().unwrap();
    let d = daemon_with_a_rollback(work.path());
    let port = free_port();
    let config = work.path().join("prometheus.yml");
    std::fs::write(
        &config,
        format!(
            "global:\n  scrape_interval: 1s\nscrape_configs:\n  - job_name: hudi-keeper\n    static_configs:\n      - targets: ['{}']\n",
            d.addr
        ),
    )
    .unwrap();
    let mut prom = Command::new(prometheus)
        .arg(format!("--config.file={}", config.display()))
        .arg(format!(
            "--storage.tsdb.path={}",
            work.path().join("tsdb").display()
        ))
        .arg(format!("--web.listen-address=127.0.0.1:{port}"))
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .expect("start prometheus");
    let addr = format!("127.0.0.1:{port}");
    let query = |q: &str| -> Option<serde_json::Value> {
        let r =
            std::panic::catch_unwind(|| get(&addr, &format!("/api/v1/query?query={q}"))).ok()?;
        (r.status == 200).then(|| r.json())
    };
    let result = d.wait_for(
        "Prometheus to scrape the daemon",
        Duration::from_secs(60),
        || {
            let v = query("hudi_keeper_rollbacks_total%7Boutcome%3D%22success%22%7D")?;
            let series = v["data"]["result"].as_array()?.clone();
            (!series.is_empty()).then_some(series)
        },
    );
    let _ = prom.kill();
    let _ = prom.wait();
    assert_eq!(result[0]["metric"]["table"], "t");
    assert_eq!(result[0]["metric"]["job"], "hudi-keeper");
    assert_eq!(result[0]["value"][1], "1");
}
