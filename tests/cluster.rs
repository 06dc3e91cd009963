//! Replicas sharing tables (issue #18): the real binary, several daemons over one set of tables
//! on the local file system. A static cluster splits them by rendezvous hashing, each table
//! polled by exactly one replica; and safety does not rest on that split: daemons that all
//! believe they own every table still roll each failed write back exactly once, because every
//! change takes the table's lock and re-checks the timeline under it.

mod common;

use std::collections::BTreeMap;
use std::path::Path;
use std::time::Duration;

use common::daemon::Daemon;
use common::fixtures::{build_local, Kind, TF};
use common::http::request;

const TOKEN: &str = "cluster-test-token-0123456789";
const TABLES: usize = 30;

/// `TABLES` tables, each with a failed write (TF, old, no heartbeat file).
fn make_tables(root: &Path) -> Vec<(String, String)> {
    let rt = tokio::runtime::Runtime::new().unwrap();
    (0..TABLES)
        .map(|i| {
            let dir = root.join(format!("t{i:02}"));
            build_local(&rt, &dir, Kind::CowV8);
            (format!("t{i:02}"), dir.to_str().unwrap().to_string())
        })
        .collect()
}

fn config(tables: &[(String, String)], cluster: &str) -> String {
    let mut c = format!(
        "[server]\nstate_dir = \"state\"\nauth_token = \"{TOKEN}\"\n[defaults]\npoll_interval = \"300ms\"\nassume_lazy_writers = true\n[defaults.lock]\nprovider = \"filesystem\"\n{cluster}"
    );
    for (name, uri) in tables {
        c.push_str(&format!("[[tables]]\nname = \"{name}\"\nuri = \"{uri}\"\n"));
    }
    c
}

/// Completed rollbacks on the table's timeline, and whether TF's files are gone.
fn rollbacks(uri: &str) -> (usize, bool) {
    let timeline = Path::new(uri).join(".hoodie/timeline");
    let done = std::fs::read_dir(&timeline)
        .unwrap()
        .filter_map(Result::ok)
        .filter(|e| e.file_name().to_string_lossy().ends_with(".rollback"))
        .count();
    let pending = std::fs::read_dir(&timeline)
        .unwrap()
        .filter_map(Result::ok)
        .any(|e| {
            let n = e.file_name().to_string_lossy().to_string();
            n.starts_with(TF) && (n.ends_with(".inflight") || n.ends_with(".requested"))
        });
    (done, !pending)
}

fn all_rolled_back(tables: &[(String, String)]) -> bool {
    tables.iter().all(|(_, uri)| rollbacks(uri).1)
}

#[test]
fn three_static_replicas_poll_every_table_exactly_once() {
    let work = tempfile::tempdir().unwrap();
    let tables = make_tables(&work.path().join("tables"));
    let daemons: Vec<Daemon> = (0..3)
        .map(|i| {
            Daemon::start_with(
                &work.path().join(format!("replica-{i}")),
                &config(&tables, "[cluster]\nmode = \"static\"\nreplicas = 3\n"),
                // The index from the pod name, as in a StatefulSet.
                |c| {
                    c.env("POD_NAME", format!("hudi-keeper-{i}"));
                },
            )
        })
        .collect();
    daemons[0].wait_for(
        "every failed write rolled back",
        Duration::from_secs(60),
        || all_rolled_back(&tables).then_some(()),
    );
    // Each rolled back once; and let a few more polls run.
    std::thread::sleep(Duration::from_secs(1));
    let mut owners: BTreeMap<String, Vec<usize>> = BTreeMap::new();
    let mut named: BTreeMap<String, String> = BTreeMap::new();
    for (i, d) in daemons.iter().enumerate() {
        let v = d.get("/api/v1/tables").json();
        let listed = v["tables"].as_array().unwrap();
        assert_eq!(listed.len(), TABLES, "every replica lists every table");
        for t in listed {
            let name = t["name"].as_str().unwrap().to_string();
            let owner = &t["owner"];
            let polled = t["status"]["polls"].as_u64().unwrap() > 0;
            assert_eq!(
                owner["this_replica"].as_bool().unwrap(),
                polled,
                "replica {i}, {name}: polled only where owned: {t}"
            );
            if polled {
                owners.entry(name.clone()).or_default().push(i);
            }
            // Every replica names the same owner, by its pod name.
            let o = owner["name"].as_str().unwrap().to_string();
            assert_eq!(named.entry(name).or_insert(o.clone()), &o);
        }
    }
    assert_eq!(owners.len(), TABLES, "{owners:?}");
    for (name, by) in &owners {
        assert_eq!(by.len(), 1, "{name} polled by {by:?}");
        assert_eq!(named[name], format!("hudi-keeper-{}", by[0]));
    }
    for (name, uri) in &tables {
        assert_eq!(rollbacks(uri).0, 1, "{name}");
    }
    // The split is even enough, and the metrics say what each replica owns.
    let mut owned = 0.0;
    for d in &daemons {
        let n = d.metric("hudi_keeper_cluster_owned_tables").unwrap();
        assert!(n >= 3.0, "{n}");
        owned += n;
        assert_eq!(d.metric("hudi_keeper_cluster_replicas"), Some(3.0));
    }
    assert_eq!(owned, TABLES as f64);
    // A change sent to a replica that does not own the table is refused, naming the owner;
    // a dry run is answered anywhere.
    let (name, by) = owners.iter().next().unwrap();
    let other = (by[0] + 1) % 3;
    let r = request(
        &daemons[other].addr,
        "POST",
        &format!("/api/v1/tables/{name}/rollback"),
        Some(TOKEN),
        Some("{}"),
    );
    assert_eq!(r.status, 421, "{}", r.body);
    assert!(
        r.body.contains(&format!("hudi-keeper-{}", by[0])),
        "{}",
        r.body
    );
    let dry = request(
        &daemons[other].addr,
        "POST",
        &format!("/api/v1/tables/{name}/rollback"),
        Some(TOKEN),
        Some("{\"dry_run\": true}"),
    );
    assert_eq!(dry.status, 200, "{}", dry.body);
    // Tables come from the shared configuration, not one replica's API.
    let reg = request(
        &daemons[0].addr,
        "POST",
        "/api/v1/tables",
        Some(TOKEN),
        Some(&format!(
            "{{\"name\": \"extra\", \"uri\": \"{}\"}}",
            work.path().join("extra").display()
        )),
    );
    assert!(
        reg.status == 409 || reg.status == 403,
        "{} {}",
        reg.status,
        reg.body
    );
}

/// Ownership overlapping completely: three daemons that each believe they own every table (no
/// `[cluster]`) race for the same failed writes. Each is rolled back exactly once.
#[test]
fn daemons_that_all_believe_they_own_every_table_roll_each_failed_write_back_once() {
    let work = tempfile::tempdir().unwrap();
    let tables = make_tables(&work.path().join("tables"));
    let daemons: Vec<Daemon> = (0..3)
        .map(|i| Daemon::start(&work.path().join(format!("d{i}")), &config(&tables, "")))
        .collect();
    daemons[0].wait_for(
        "every failed write rolled back",
        Duration::from_secs(60),
        || all_rolled_back(&tables).then_some(()),
    );
    // More polls on every daemon: none may roll anything back again.
    std::thread::sleep(Duration::from_secs(2));
    for (name, uri) in &tables {
        assert_eq!(rollbacks(uri).0, 1, "{name}");
    }
    // They did overlap: more than one daemon polled the tables.
    for d in &daemons {
        let v = d.get("/api/v1/tables").json();
        assert!(v["tables"]
            .as_array()
            .unwrap()
            .iter()
            .all(|t| t["status"]["polls"].as_u64().unwrap() > 0
                && t["owner"]["this_replica"] == true));
    }
}

#[test]
fn a_shared_cluster_refuses_tables_without_a_lock() {
    let work = tempfile::tempdir().unwrap();
    let out = common::run(&[
        "serve",
        "--config",
        &{
            let p = work.path().join("c.toml");
            std::fs::write(
                &p,
                "[cluster]\nmode = \"static\"\nreplicas = 2\nreplica = 0\n[defaults.lock]\nprovider = \"none\"\n[[tables]]\nname = \"t\"\nuri = \"/tmp/nowhere\"\n",
            )
            .unwrap();
            p.to_str().unwrap().to_string()
        },
        "--listen",
        "127.0.0.1:0",
    ]);
    assert!(!out.status.success());
    assert!(
        common::stderr(&out).contains("lock.provider = \"none\""),
        "{}",
        common::stderr(&out)
    );
}
