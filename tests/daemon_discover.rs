//! `[[discover]]` end to end: a daemon whose whole config is one discovery prefix finds the
//! demo tables and a real Hudi table, rolls back their failed writes, keeps the tables apart
//! from the API's, and drops a table only after two complete scans in a row missed it.

use hudi_keeper_test_support as common;

use std::path::Path;
use std::time::Duration;

use common::daemon::Daemon;
use common::http::request;
use common::interop;
use serde_json::Value;

const TOKEN: &str = "discover-test-token-0123456789";

fn demo(dir: &Path) {
    let out = common::run(&["demo", "--dir", dir.to_str().unwrap(), "--no-rollback"]);
    assert!(out.status.success(), "demo: {}", common::stderr(&out));
}

/// The tables the daemon lists, by name.
fn tables(d: &Daemon) -> Vec<Value> {
    let r = d.get("/api/v1/tables?limit=1000");
    assert_eq!(r.status, 200, "{}", r.body);
    r.json()["tables"].as_array().cloned().unwrap_or_default()
}

fn by_uri<'a>(ts: &'a [Value], uri: &str) -> Option<&'a Value> {
    ts.iter().find(|t| t["uri"] == uri)
}

/// `[server]` (with `server` keys), the `tables` text, then one `[[discover]]` source of `wh`
/// (with `source` keys) whose tables get the harness writers' settings.
fn discover_config(wh: &Path, server: &str, tables: &str, source: &str) -> String {
    format!(
        "[server]\nstate_dir = \"state\"\nauth_token = \"{TOKEN}\"\n{server}\n{tables}\n\
         [[discover]]\nname = \"lake\"\nprefix = \"{}\"\ninterval = \"1s\"\n{source}\n\
         [discover.defaults]\npoll_interval = \"500ms\"\nheartbeat_interval = \"1s\"\n\
         heartbeat_tolerable_misses = 2\nclock_skew_margin = \"500ms\"\n\
         [discover.defaults.lock]\nprovider = \"filesystem\"\ntimeout = \"10s\"\n",
        wh.display()
    )
}

#[test]
fn one_discover_prefix_finds_demo_and_hudi_tables_and_rolls_back_their_failed_writes() {
    let work = tempfile::tempdir().unwrap();
    let wh = work.path().join("lake");
    let (a, b) = (wh.join("team-a/demo"), wh.join("team-b/demo"));
    demo(&a);
    demo(&b);
    std::fs::create_dir_all(wh.join("notes")).unwrap();
    std::fs::write(wh.join("notes/readme.txt"), "no table here").unwrap();
    // A real Hudi 1.1 merge-on-read table with a metadata table, whose last writer was killed.
    let hudi = wh.join("hudi/orders");
    let hudi_failed = interop::enabled().then(|| {
        let generated = interop::generated("1.1", "mor-mdt-direct");
        interop::copy_table(&generated, &hudi);
        interop::scenario_json(&hudi)["failed_instant"]
            .as_str()
            .expect("failed_instant")
            .to_string()
    });
    let expected = 2 + usize::from(hudi_failed.is_some());

    let d = Daemon::start(
        &work.path().join("daemon"),
        &discover_config(&wh, "", "", ""),
    );
    let found = d.wait_for("the tables found", Duration::from_secs(30), || {
        let ts = tables(&d);
        (ts.len() == expected).then_some(ts)
    });
    for t in &found {
        assert_eq!(t["source"], "discovered", "{t}");
        assert_eq!(t["discovered_by"], "lake", "{t}");
        // The source's defaults, not the built-in ones.
        assert_eq!(t["settings"]["poll_interval_ms"], 500, "{t}");
        assert_eq!(t["settings"]["lock_provider"], "filesystem", "{t}");
    }
    // Two tables named `demo`: each gets its location's hash, both stable and distinct.
    let (ta, tb) = (
        by_uri(&found, a.to_str().unwrap()).expect("team-a's demo"),
        by_uri(&found, b.to_str().unwrap()).expect("team-b's demo"),
    );
    let (na, nb) = (ta["name"].as_str().unwrap(), tb["name"].as_str().unwrap());
    assert!(
        na.starts_with("demo-") && nb.starts_with("demo-") && na != nb,
        "{na} {nb}"
    );
    // Each failed write is rolled back.
    let mut names = vec![na.to_string(), nb.to_string()];
    if let Some(failed) = &hudi_failed {
        let t = by_uri(&found, hudi.to_str().unwrap()).expect("the Hudi table");
        let name = t["name"].as_str().unwrap().to_string();
        let s = d.wait_for("the Hudi table's rollback", Duration::from_secs(60), || {
            let s = d.table(&name);
            (s["status"]["rollbacks"] == 1).then_some(s)
        });
        assert_eq!(s["status"]["last_rollback"]["instant"], failed.as_str());
        assert_eq!(s["status"]["last_rollback"]["trigger"], "auto");
        names.push(name);
    }
    for name in &names[..2] {
        d.wait_for("the demo table's rollback", Duration::from_secs(30), || {
            (d.table(name)["status"]["rollbacks"] == 1).then_some(())
        });
    }
    assert_eq!(
        d.metric("hudi_keeper_discovered_tables{source=\"lake\"}"),
        Some(expected as f64)
    );
    // Not API tables: nothing in the registry, and DELETE is refused.
    let registry = work.path().join("daemon/state/api-tables");
    let kept = std::fs::read_dir(&registry).map(|r| r.count()).unwrap_or(0);
    assert_eq!(kept, 0, "discovered tables written into the API registry");
    let r = request(
        &d.addr,
        "DELETE",
        &format!("/api/v1/tables/{na}"),
        Some(TOKEN),
        None,
    );
    assert_eq!(r.status, 409, "{}", r.body);

    // A table that goes is dropped after two complete scans in a row missed it.
    std::fs::remove_dir_all(&b).unwrap();
    d.wait_for("team-b's table dropped", Duration::from_secs(30), || {
        let ts = tables(&d);
        (ts.len() == expected - 1).then_some(())
    });
    assert!(d
        .logs()
        .contains("dropped a table two complete scans in a row did not find"));
    let scans = d
        .metric("hudi_keeper_discovery_scans_total{outcome=\"complete\",source=\"lake\"}")
        .expect("scans counted");
    assert!(scans >= 3.0, "{scans}");
    d.terminate_cleanly(Duration::from_secs(30));
    if let Some(failed) = hudi_failed {
        let verify = interop::run_sh(&["verify", "1.1", hudi.to_str().unwrap()]);
        assert!(
            verify.status.success(),
            "Hudi's validator refused the rollback of {failed}:\n{}",
            String::from_utf8_lossy(&verify.stdout)
        );
    }
}

#[test]
fn an_incomplete_scan_drops_nothing_and_config_and_api_tables_take_precedence() {
    let work = tempfile::tempdir().unwrap();
    let wh = work.path().join("lake");
    demo(&wh.join("a/kept"));
    demo(&wh.join("b/configured"));
    demo(&wh.join("c/api"));
    // The config registers b's table itself; the source finds it too: one table, the config's.
    // One API table at most: the source's tables do not count against it.
    let server = format!(
        "allowed_table_uris = [\"{}\"]\nmax_api_tables = 1",
        wh.display()
    );
    let configured = format!(
        "[defaults.lock]\nprovider = \"filesystem\"\n[[tables]]\nname = \"mine\"\nuri = \"{}\"\n",
        wh.join("b/configured").display()
    );
    // A budget the first scans fit in: 4 folders (the prefix, a, b, c), 3 table folders, 3 reads.
    let config = discover_config(&wh, &server, &configured, "max_requests = 10");
    let d = Daemon::start(&work.path().join("daemon"), &config);
    let ts = d.wait_for("the tables", Duration::from_secs(30), || {
        let ts = tables(&d);
        (ts.len() == 3).then_some(ts)
    });
    let configured = by_uri(&ts, wh.join("b/configured").to_str().unwrap()).unwrap();
    assert_eq!(
        (configured["name"].as_str(), configured["source"].as_str()),
        (Some("mine"), Some("config"))
    );
    // The gauge is set once the scan's registrations are all done, just after the tables show.
    d.wait_for("the source's count", Duration::from_secs(10), || {
        (d.metric("hudi_keeper_discovered_tables{source=\"lake\"}") == Some(2.0)).then_some(())
    });

    // The API registers c's table: it replaces the discovered one.
    let api = wh.join("c/api");
    let body = format!("{{\"name\": \"via-api\", \"uri\": \"{}\"}}", api.display());
    let r = request(&d.addr, "POST", "/api/v1/tables", Some(TOKEN), Some(&body));
    assert_eq!(r.status, 201, "{}", r.body);
    d.wait_for("one table at c", Duration::from_secs(10), || {
        let ts = tables(&d);
        let at_c: Vec<_> = ts
            .iter()
            .filter(|t| t["uri"] == api.to_str().unwrap())
            .collect();
        (ts.len() == 3 && at_c.len() == 1 && at_c[0]["source"] == "api").then_some(())
    });
    d.wait_for("the source to let go of c", Duration::from_secs(10), || {
        (d.metric("hudi_keeper_discovered_tables{source=\"lake\"}") == Some(1.0)).then_some(())
    });

    // a's table goes, and ten folders come that cut every scan short of its budget.
    std::fs::remove_dir_all(wh.join("a/kept")).unwrap();
    for i in 0..10 {
        std::fs::create_dir_all(wh.join(format!("a/empty{i}"))).unwrap();
    }
    let incomplete = "hudi_keeper_discovery_scans_total{outcome=\"incomplete\",source=\"lake\"}";
    d.wait_for("three incomplete scans", Duration::from_secs(30), || {
        (d.metric(incomplete).unwrap_or(0.0) >= 3.0).then_some(())
    });
    assert!(
        tables(&d)
            .iter()
            .any(|t| t["uri"] == wh.join("a/kept").to_str().unwrap()),
        "an incomplete scan dropped a table"
    );
    // Counted once the scan is applied, just after the scan itself is.
    d.wait_for(
        "three failed scans in a row",
        Duration::from_secs(10),
        || {
            (d.metric("hudi_keeper_discovery_failed_scans_in_a_row{source=\"lake\"}")
                .unwrap_or(0.0)
                >= 3.0)
                .then_some(())
        },
    );
    // The scans complete again: two in a row drop it.
    std::fs::remove_dir_all(wh.join("a")).unwrap();
    d.wait_for("a's table dropped", Duration::from_secs(30), || {
        (tables(&d).len() == 2).then_some(())
    });
    d.wait_for("the source's count", Duration::from_secs(10), || {
        (d.metric("hudi_keeper_discovered_tables{source=\"lake\"}") == Some(0.0)).then_some(())
    });
    assert_eq!(
        d.metric("hudi_keeper_discovery_failed_scans_in_a_row{source=\"lake\"}"),
        Some(0.0)
    );
}

#[test]
fn a_glue_source_finds_its_hudi_tables_and_rolls_back_a_failed_write() {
    use common::glue;
    let work = tempfile::tempdir().unwrap();
    let table = work.path().join("lake/events");
    demo(&table);
    let db = glue::database("daemon");
    // Hudi's sync registers a merge-on-read table twice (`_ro`, `_rt`): one table to watch.
    glue::mor_table(&db, "events", table.to_str().unwrap());
    glue::parquet_table(&db, "raw", "s3://lake/raw");
    let config = format!(
        "[server]\nstate_dir = \"state\"\n\
         [[discover]]\nname = \"catalog\"\nkind = \"glue\"\nregion = \"us-east-1\"\n\
         endpoint = \"{}\"\ndatabases = [\"{db}\"]\ninterval = \"1s\"\n\
         [discover.storage_options]\naws_access_key_id = \"test\"\naws_secret_access_key = \"test\"\n\
         [discover.defaults]\npoll_interval = \"500ms\"\nheartbeat_interval = \"1s\"\n\
         [discover.defaults.lock]\nprovider = \"filesystem\"\ntimeout = \"10s\"\n",
        common::s3::endpoint()
    );
    let d = Daemon::start(&work.path().join("daemon"), &config);
    let t = d.wait_for("the Glue table", Duration::from_secs(30), || {
        let ts = tables(&d);
        (ts.len() == 1).then(|| ts[0].clone())
    });
    assert_eq!(t["name"], "events");
    assert_eq!(t["uri"], table.to_str().unwrap());
    assert_eq!(t["discovered_by"], "catalog");
    d.wait_for("the rollback", Duration::from_secs(30), || {
        (d.table("events")["status"]["rollbacks"] == 1).then_some(())
    });
    // Scans go on; the pair stays one table.
    d.wait_for("more scans", Duration::from_secs(10), || {
        (d.metric("hudi_keeper_discovery_scans_total{outcome=\"complete\",source=\"catalog\"}")
            .unwrap_or(0.0)
            >= 3.0)
            .then_some(())
    });
    assert_eq!(tables(&d).len(), 1);
}

#[test]
fn a_hive_metastore_source_finds_its_hudi_tables_and_rolls_back_a_failed_write() {
    use common::hms;
    let work = tempfile::tempdir().unwrap();
    let table = work.path().join("lake/events");
    demo(&table);
    let db = hms::database("daemon");
    hms::register(&db, "events", table.to_str().unwrap(), "mor");
    hms::register(
        &db,
        "raw",
        work.path().join("lake/raw").to_str().unwrap(),
        "parquet",
    );
    let config = format!(
        "[server]\nstate_dir = \"state\"\n\
         [[discover]]\nname = \"metastore\"\nkind = \"hive_metastore\"\nuri = \"{}\"\n\
         databases = [\"{db}\"]\ninterval = \"1s\"\n\
         [discover.defaults]\npoll_interval = \"500ms\"\nheartbeat_interval = \"1s\"\n\
         [discover.defaults.lock]\nprovider = \"filesystem\"\ntimeout = \"10s\"\n",
        hms::uri()
    );
    let d = Daemon::start(&work.path().join("daemon"), &config);
    let t = d.wait_for("the metastore's table", Duration::from_secs(30), || {
        let ts = tables(&d);
        (ts.len() == 1).then(|| ts[0].clone())
    });
    assert_eq!(t["name"], "events");
    // The metastore keeps a local location qualified.
    assert_eq!(t["uri"], format!("file:{}", table.display()));
    assert_eq!(t["discovered_by"], "metastore");
    d.wait_for("the rollback", Duration::from_secs(30), || {
        (d.table("events")["status"]["rollbacks"] == 1).then_some(())
    });
    d.wait_for("more scans", Duration::from_secs(10), || {
        (d.metric("hudi_keeper_discovery_scans_total{outcome=\"complete\",source=\"metastore\"}")
            .unwrap_or(0.0)
            >= 3.0)
            .then_some(())
    });
    assert_eq!(tables(&d).len(), 1);
}

#[test]
fn a_prefix_scan_registers_no_table_through_a_symbolic_link() {
    let work = tempfile::tempdir().unwrap();
    let wh = work.path().join("lake");
    demo(&wh.join("real/t"));
    // A table outside the prefix, reached through a link in it; and a link to a folder of the
    // prefix (its table is found where it is).
    demo(&work.path().join("outside/u"));
    std::os::unix::fs::symlink(work.path().join("outside"), wh.join("out")).unwrap();
    std::os::unix::fs::symlink(wh.join("real"), wh.join("again")).unwrap();
    let d = Daemon::start(
        &work.path().join("daemon"),
        &discover_config(&wh, "", "", ""),
    );
    d.wait_for("two complete scans", Duration::from_secs(30), || {
        (d.metric("hudi_keeper_discovery_scans_total{outcome=\"complete\",source=\"lake\"}")
            .unwrap_or(0.0)
            >= 2.0)
            .then_some(())
    });
    let ts = tables(&d);
    let uris: Vec<&str> = ts.iter().filter_map(|t| t["uri"].as_str()).collect();
    assert_eq!(uris, [wh.join("real/t").to_str().unwrap()], "{ts:?}");
}

#[test]
fn a_catalog_entry_of_a_scheme_no_store_opens_does_not_hold_readiness_back() {
    use common::glue;
    let work = tempfile::tempdir().unwrap();
    let table = work.path().join("lake/events");
    demo(&table);
    let db = glue::database("scheme");
    glue::cow_table(&db, "events", table.to_str().unwrap());
    glue::cow_table(&db, "far", "hdfs://namenode/warehouse/far");
    let config = format!(
        "[server]\nstate_dir = \"state\"\nhalt_after_failures = 1000\n\
         [[discover]]\nname = \"catalog\"\nkind = \"glue\"\nregion = \"us-east-1\"\n\
         endpoint = \"{}\"\ndatabases = [\"{db}\"]\ninterval = \"1s\"\n\
         [discover.storage_options]\naws_access_key_id = \"test\"\naws_secret_access_key = \"test\"\n\
         [discover.defaults]\npoll_interval = \"500ms\"\nfailed_writes_policy = \"observe\"\n",
        common::s3::endpoint()
    );
    let d = Daemon::start(&work.path().join("daemon"), &config);
    d.wait_for("the table polled", Duration::from_secs(30), || {
        (d.metric("hudi_keeper_discovery_scans_total{outcome=\"complete\",source=\"catalog\"}")
            .unwrap_or(0.0)
            >= 2.0
            && d.table("events")["status"]["polls"].as_u64().unwrap_or(0) >= 2)
            .then_some(())
    });
    let r = d.get("/readyz");
    assert_eq!(r.status, 200, "{}", r.body);
    let names: Vec<Value> = tables(&d).iter().map(|t| t["name"].clone()).collect();
    assert_eq!(names, ["events"]);
    assert!(
        d.logs().contains("hdfs://namenode/warehouse/far"),
        "no warning"
    );
}
