//! The status page served by the daemon binary (issue #35, item 1), over HTTP: `/` lists the
//! tables and searches them, `/tables/{name}` draws a demo table's timeline as SVG with its
//! pending write's verdict and the write a rollback undid, a URI holding `<script>` comes out
//! escaped (and no script or outside asset may load: the pages' Content-Security-Policy), and
//! the pages are admitted as `GET /api/v1/tables` is (no token), while a change
//! sent to them is refused without the token as the API's changes are.

use std::time::Duration;

use hudi_keeper_test_support as common;

use common::config::DaemonConfig;
use common::daemon::Daemon;
use common::http::request;
use common::status::demo_with_history;

const TOKEN: &str = "status-page-token-0123456789";
const XSS: &str = "<script>alert(1)</script>";

fn assert_escaped(page: &str, what: &str) {
    assert!(
        !page.contains("<script"),
        "{what}: unescaped script:\n{page}"
    );
    assert!(
        page.contains("&lt;script&gt;alert(1)&lt;/script&gt;")
            || page.contains("&#60;script&#62;alert(1)&#60;/script&#62;"),
        "{what}: the URI is missing:\n{page}"
    );
}

#[test]
fn the_pages_list_draw_and_escape_and_are_read_as_the_api_is() {
    let dir = tempfile::tempdir().unwrap();
    let demo = dir.path().join("demo");
    let history = demo_with_history(&demo);
    let xss = dir.path().join(format!("lake/{XSS}"));
    let config = DaemonConfig::new()
        .server("auth_token", TOKEN)
        .defaults("poll_interval", "1h")
        .defaults("failed_writes_policy", "observe")
        .table("demo", &demo.display().to_string())
        .table("xss", &xss.display().to_string());
    let d = Daemon::start(&dir.path().join("daemon"), &config.to_string());
    let verdict = d.wait_for(
        "the demo table's first poll",
        Duration::from_secs(60),
        || {
            let t = d.table("demo");
            let pending = t["status"]["pending"].as_array()?.first()?.clone();
            Some(pending["verdict"].as_str()?.to_string())
        },
    );
    assert_eq!(verdict, "expired", "{}", d.table("demo"));

    // `/`: both tables, their URIs escaped; a search keeps only the matches.
    let index = d.get("/");
    assert_eq!(index.status, 200, "{}", index.body);
    assert!(
        index
            .header("content-type")
            .is_some_and(|c| c.starts_with("text/html")),
        "{}",
        index.head
    );
    // Nothing but inline styles may load or run, whatever a page holds.
    assert_eq!(
        index.header("content-security-policy"),
        Some(
            "default-src 'none'; style-src 'unsafe-inline'; base-uri 'none'; form-action 'self'; frame-ancestors 'none'"
        ),
        "{}",
        index.head
    );
    assert_eq!(index.header("x-content-type-options"), Some("nosniff"));
    assert!(
        index.body.contains(r#"<tr data-table="demo">"#),
        "{}",
        index.body
    );
    assert!(
        index.body.contains(r#"<tr data-table="xss">"#),
        "{}",
        index.body
    );
    assert!(index.body.contains("expired"), "{}", index.body);
    // Its last change: the rollback `hudi-keeper rollback` made, which this daemon did not.
    let row = index
        .body
        .split(r#"<tr data-table="demo">"#)
        .nth(1)
        .and_then(|r| r.split("</tr>").next())
        .unwrap_or_default();
    assert!(
        row.contains("<td>rollback on the timeline, 20"),
        "the demo's row: {row}"
    );
    assert_escaped(&index.body, "/");
    let search = d.get("/?q=DEM");
    assert!(
        search.body.contains(r#"data-table="demo""#),
        "{}",
        search.body
    );
    assert!(
        !search.body.contains(r#"data-table="xss""#),
        "{}",
        search.body
    );

    // `/tables/demo`: the SVG, the pending write with its verdict, the write rolled back.
    let page = d.get("/tables/demo");
    assert_eq!(page.status, 200, "{}", page.body);
    let body = &page.body;
    assert!(body.contains(r#"<svg xmlns="http://www.w3.org/2000/svg" class="timeline""#));
    assert!(
        body.contains(&format!(
            r#"class="instant pending failed" data-instant="{}" data-verdict="expired""#,
            history.pending
        )),
        "{body}"
    );
    assert!(
        body.contains(&format!(
            r#"class="instant rolled-back" data-instant="{}""#,
            history.rolled_back
        )),
        "{body}"
    );
    assert_eq!(
        body.matches(r#"class="instant completed""#).count(),
        3,
        "{body}"
    );
    assert!(
        body.contains(&format!(
            r#"<tr data-instant="{}" class="failed">"#,
            history.pending
        )),
        "{body}"
    );
    assert!(
        body.contains(&format!("undid {}", history.rolled_back)),
        "{body}"
    );

    // `/tables/xss`: no such folder; the page says so with the URI escaped.
    let page = d.get("/tables/xss");
    assert_eq!(page.status, 200, "{}", page.body);
    assert_escaped(&page.body, "/tables/xss");
    let missing = d.get("/tables/nope");
    assert_eq!(missing.status, 404);
    assert!(
        missing
            .header("content-security-policy")
            .is_some_and(|p| p.starts_with("default-src 'none';")),
        "{}",
        missing.head
    );

    // The same rule as the API's reads: no token needed to read, a change needs it.
    for path in ["/api/v1/tables", "/", "/tables/demo"] {
        assert_eq!(d.get(path).status, 200, "GET {path}");
        let wrong = request(&d.addr, "GET", path, Some("not-the-token-at-all"), None);
        assert_eq!(wrong.status, 200, "GET {path} with another token");
        let change = request(&d.addr, "POST", path, None, Some("{}"));
        assert_eq!(change.status, 401, "POST {path}: {}", change.body);
    }
}

/// A table page reads at most 1 MiB of each rollback's metadata (it reads up to 20 of them
/// at once): a larger one is not read, and the page says so instead of what it undid.
#[test]
fn a_table_page_does_not_read_a_rollback_metadata_file_over_1_mib() {
    let dir = tempfile::tempdir().unwrap();
    let demo = dir.path().join("demo");
    let history = demo_with_history(&demo);
    let timeline = demo.join(".hoodie/timeline");
    let rollback = std::fs::read_dir(&timeline)
        .unwrap()
        .map(|e| e.unwrap().path())
        .find(|p| p.extension().is_some_and(|e| e == "rollback"))
        .expect("the demo's completed rollback");
    let mut bytes = std::fs::read(&rollback).unwrap();
    bytes.resize(bytes.len() + (1 << 20) + 1, 0);
    std::fs::write(&rollback, bytes).unwrap();
    let config = DaemonConfig::new()
        .defaults("poll_interval", "1h")
        .defaults("failed_writes_policy", "observe")
        .table("demo", &demo.display().to_string());
    let d = Daemon::start(&dir.path().join("daemon"), &config.to_string());
    let page = d.get("/tables/demo");
    assert_eq!(page.status, 200, "{}", page.body);
    assert!(page.body.contains("metadata not read"), "{}", page.body);
    assert!(
        !page
            .body
            .contains(&format!("undid {}", history.rolled_back)),
        "{}",
        page.body
    );
}
