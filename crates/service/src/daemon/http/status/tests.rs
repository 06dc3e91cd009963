//! The status page through the router: escaping, search and paging.

use std::sync::Arc;

use axum::http::StatusCode;
use axum::Router;
use tower::ServiceExt;

use super::view::{ChangeRow, PendingRow, TablePage};
use crate::daemon::config::Config;
use crate::daemon::http::router;
use crate::daemon::Daemon;

const XSS: &str = "<script>alert(1)</script>";

/// A started daemon with `tables` (TOML `[[tables]]` entries), never polled within a test.
async fn daemon(dir: &std::path::Path, tables: &str) -> Arc<Daemon> {
    let path = dir.join("c.toml");
    std::fs::write(
        &path,
        format!(
            "[server]\nstate_dir = \"{}\"\n[defaults]\npoll_interval = \"1h\"\nfailed_writes_policy = \"observe\"\n{tables}",
            dir.join("state").display()
        ),
    )
    .unwrap();
    let d = Daemon::new(Config::load(&path, true).unwrap()).unwrap();
    d.start().await.unwrap();
    d
}

async fn get(app: &Router, uri: &str) -> (StatusCode, String) {
    let req = axum::http::Request::builder()
        .uri(uri)
        .body(axum::body::Body::empty())
        .unwrap();
    let resp = app.clone().oneshot(req).await.unwrap();
    let status = resp.status();
    let body = axum::body::to_bytes(resp.into_body(), 1 << 24)
        .await
        .unwrap();
    (status, String::from_utf8_lossy(&body).into_owned())
}

fn assert_escaped(page: &str, what: &str) {
    assert!(
        !page.contains("<script"),
        "{what}: unescaped script:\n{page}"
    );
    assert!(
        page.contains("&lt;script&gt;alert(1)&lt;/script&gt;")
            || page.contains("&#60;script&#62;alert(1)&#60;/script&#62;"),
        "{what}: the text is missing:\n{page}"
    );
}

#[tokio::test]
async fn a_uri_and_a_search_holding_script_are_escaped() {
    let dir = tempfile::tempdir().unwrap();
    let uri = dir.path().join(format!("tables/{XSS}"));
    let d = daemon(
        dir.path(),
        &format!("[[tables]]\nname = \"xss\"\nuri = \"{}\"\n", uri.display()),
    )
    .await;
    let app = router(d);
    let (status, list) = get(&app, "/").await;
    assert_eq!(status, StatusCode::OK);
    assert!(list.contains(r#"<a href="/tables/xss">xss</a>"#), "{list}");
    assert_escaped(&list, "/");
    let (status, one) = get(&app, "/tables/xss").await;
    assert_eq!(status, StatusCode::OK, "{one}");
    assert_escaped(&one, "/tables/xss");
    let (status, search) = get(&app, "/?q=%3Cscript%3Ealert(1)%3C%2Fscript%3E").await;
    assert_eq!(status, StatusCode::OK);
    assert_escaped(&search, "a search");
    assert!(search.contains(r#"data-table="xss""#), "{search}");
    let (status, missing) = get(&app, "/tables/nope").await;
    assert_eq!(status, StatusCode::NOT_FOUND);
    assert!(missing.contains("nope"), "{missing}");
}

#[test]
fn a_reason_and_a_partition_holding_script_are_escaped() {
    let page = TablePage {
        name: "t".into(),
        uri: "/t".into(),
        state: "ok",
        state_class: "ok",
        halted_reason: Some(XSS.into()),
        last_error: Some(XSS.into()),
        last_poll: String::new(),
        owner: String::new(),
        audit: String::new(),
        svg: "<svg></svg>".into(),
        timeline_note: String::new(),
        writers: XSS.into(),
        pending: vec![PendingRow {
            instant: "1".into(),
            action: "commit".into(),
            state: "inflight",
            verdict: "awaiting_newer_write",
            class: "left-alone",
            heartbeat: String::new(),
            age: String::new(),
            reason: format!("writer of {XSS}"),
        }],
        changes: vec![ChangeRow {
            what: "rollback".into(),
            instant: "2".into(),
            when: String::new(),
            outcome: "completed".into(),
            duration: String::new(),
            detail: format!("undid 1; 3 files deleted in city={XSS}"),
        }],
    };
    let html = askama::Template::render(&page).unwrap();
    assert_escaped(&html, "the table page");
    // The SVG, escaped where it is built, goes in as it is.
    assert!(html.contains("<svg></svg>"));
}

#[tokio::test]
async fn search_and_pages_cover_every_match_once() {
    let dir = tempfile::tempdir().unwrap();
    let mut tables = String::new();
    for i in 0..230 {
        tables.push_str(&format!(
            "[[tables]]\nname = \"t{i:03}\"\nuri = \"{}\"\n",
            dir.path().join(format!("lake/T{i:03}")).display()
        ));
    }
    let d = daemon(dir.path(), &tables).await;
    let app = router(d);
    let names = |page: &str| -> Vec<String> {
        page.split(r#"<tr data-table=""#)
            .skip(1)
            .map(|s| s.split('"').next().unwrap().to_string())
            .collect()
    };
    let mut seen = Vec::new();
    for p in 1..=3 {
        let (status, page) = get(&app, &format!("/?page={p}")).await;
        assert_eq!(status, StatusCode::OK);
        assert!(page.contains(&format!("page {p} of 3")), "{page}");
        assert_eq!(page.contains(r#"rel="next""#), p < 3);
        assert_eq!(page.contains(r#"rel="prev""#), p > 1);
        seen.extend(names(&page));
    }
    let all: Vec<String> = (0..230).map(|i| format!("t{i:03}")).collect();
    assert_eq!(seen, all);
    // A search on the URI (`lake/T12x`), ignoring case.
    let (_, page) = get(&app, "/?q=lake%2Ft12").await;
    assert_eq!(
        names(&page),
        (120..130).map(|i| format!("t{i:03}")).collect::<Vec<_>>()
    );
    assert!(page.contains("of 10"), "{page}");
    // Past the last page: no row, and a link back.
    let (_, page) = get(&app, "/?page=9").await;
    assert!(names(&page).is_empty());
    assert!(page.contains(r#"rel="prev""#));
}

#[tokio::test]
async fn a_table_of_a_thousand_instants_is_drawn_whole() {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path().join("t1000");
    let timeline = root.join(".hoodie/timeline");
    std::fs::create_dir_all(&timeline).unwrap();
    std::fs::write(
        root.join(".hoodie/hoodie.properties"),
        "hoodie.table.name=t1000\nhoodie.table.type=MERGE_ON_READ\nhoodie.table.version=8\nhoodie.timeline.layout.version=2\nhoodie.table.timeline.timezone=UTC\n",
    )
    .unwrap();
    let start = chrono::DateTime::from_timestamp_millis(1_767_225_600_000).unwrap_or_default();
    let time = |n: i64| {
        hudi_keeper_core::timeline::format_instant(
            start + chrono::Duration::seconds(60 * n),
            hudi_keeper_core::timeline::InstantZone::Utc,
        )
    };
    for n in 0..1000 {
        let (t, c) = (time(n), time(n).replace("000", "999"));
        for f in [
            format!("{t}.deltacommit.requested"),
            format!("{t}.deltacommit.inflight"),
            format!("{t}_{c}.deltacommit"),
        ] {
            std::fs::write(timeline.join(f), b"").unwrap();
        }
    }
    let d = daemon(
        dir.path(),
        &format!(
            "[[tables]]\nname = \"t1000\"\nuri = \"{}\"\n",
            root.display()
        ),
    )
    .await;
    let app = router(d);
    let begun = std::time::Instant::now();
    let (status, page) = get(&app, "/tables/t1000").await;
    // A figure for the log (`--nocapture`), not a test: timings depend on the machine.
    eprintln!(
        "/tables/t1000: {} bytes in {:?} (debug build)",
        page.len(),
        begun.elapsed()
    );
    assert_eq!(status, StatusCode::OK, "{page}");
    assert_eq!(
        page.matches(r#"class="instant completed""#).count(),
        1000,
        "{page}"
    );
    assert!(page.contains("1000 instants on the active timeline."));
}
