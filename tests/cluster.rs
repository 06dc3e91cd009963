//! Replicas sharing tables (issue #18): the real binary, several daemons over one set of tables
//! on the local file system. A static cluster splits them by rendezvous hashing, each table
//! polled by exactly one replica; and safety does not rest on that split: daemons that all
//! believe they own every table still roll each failed write back exactly once, because every
//! change takes the table's lock and re-checks the timeline under it.

use hudi_keeper_test_support as common;

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

fn zk_env(key: &str) -> String {
    std::env::var(key).unwrap_or_else(|_| {
        panic!("{key} is not set: run the tests through scripts/test, which starts ZooKeeper")
    })
}

/// A `[cluster] mode = "zookeeper"` section: a path of its own under the test server.
fn zk_cluster(url: &str, path: &str, member: &str) -> String {
    format!(
        "[cluster]\nmode = \"zookeeper\"\nmember = \"{member}\"\nzookeeper_url = \"{url}\"\nzookeeper_path = \"{path}\"\nzookeeper_session_timeout = \"2s\"\n"
    )
}

/// The replica's view of the cluster: (member, replicas it sees, tables it owns).
fn membership(d: &Daemon) -> (bool, u64, usize) {
    let v = d.get("/api/v1/tables").json();
    let owned = v["tables"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|t| t["owner"]["this_replica"] == true)
        .count();
    (
        v["cluster"]["member"].as_bool().unwrap(),
        v["cluster"]["replicas"].as_u64().unwrap(),
        owned,
    )
}

/// A loopback TCP relay to `upstream` that can be cut: every open connection closed and new
/// ones refused until it is mended.
struct Relay {
    addr: String,
    cut: std::sync::Arc<std::sync::atomic::AtomicBool>,
    open: std::sync::Arc<std::sync::Mutex<Vec<std::net::TcpStream>>>,
}

impl Relay {
    fn start(upstream: &str) -> Relay {
        use std::sync::atomic::Ordering;
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let addr = listener.local_addr().unwrap().to_string();
        let cut = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
        let open = std::sync::Arc::new(std::sync::Mutex::new(Vec::new()));
        let (c, o, up) = (cut.clone(), open.clone(), upstream.to_string());
        std::thread::spawn(move || {
            for client in listener.incoming().flatten() {
                if c.load(Ordering::SeqCst) {
                    drop(client);
                    continue;
                }
                let Ok(server) = std::net::TcpStream::connect(&up) else {
                    continue;
                };
                let mut streams = o.lock().unwrap();
                for (mut from, mut to) in [
                    (client.try_clone().unwrap(), server.try_clone().unwrap()),
                    (server.try_clone().unwrap(), client.try_clone().unwrap()),
                ] {
                    std::thread::spawn(move || {
                        let _ = std::io::copy(&mut from, &mut to);
                        let _ = to.shutdown(std::net::Shutdown::Both);
                    });
                }
                streams.push(client);
                streams.push(server);
            }
        });
        Relay { addr, cut, open }
    }

    fn cut(&self) {
        self.cut.store(true, std::sync::atomic::Ordering::SeqCst);
        for s in self.open.lock().unwrap().drain(..) {
            let _ = s.shutdown(std::net::Shutdown::Both);
        }
    }

    fn mend(&self) {
        self.cut.store(false, std::sync::atomic::Ordering::SeqCst);
    }
}

/// A `zookeeper` replica whose connection to ZooKeeper breaks owns nothing from then on (it
/// cannot know whether its node stood), while the other takes every table once the server
/// expires the lost session; mended, it registers a new session and takes its tables back.
/// Every failed write is rolled back once throughout.
#[test]
fn a_zookeeper_replica_cut_off_owns_nothing_until_it_registers_again() {
    let zk = zk_env("HUDI_KEEPER_ZK");
    let relay = Relay::start(&zk);
    let work = tempfile::tempdir().unwrap();
    let tables = make_tables(&work.path().join("tables"));
    let path = format!("/hudi-keeper-cluster-test-{}/replicas", std::process::id());
    let a = Daemon::start(
        &work.path().join("a"),
        &config(&tables, &zk_cluster(&relay.addr, &path, "replica-a")),
    );
    let b = Daemon::start(
        &work.path().join("b"),
        &config(&tables, &zk_cluster(&zk, &path, "replica-b")),
    );
    let both = |d: &Daemon| {
        let (member, replicas, owned) = membership(d);
        (member && replicas == 2).then_some(owned)
    };
    let owned_a = a.wait_for("two members", Duration::from_secs(30), || both(&a));
    let owned_b = b.wait_for("two members", Duration::from_secs(30), || both(&b));
    assert_eq!(owned_a + owned_b, TABLES);
    assert!(owned_a > 0 && owned_b > 0, "{owned_a} {owned_b}");

    relay.cut();
    a.wait_for(
        "the cut-off replica to give up",
        Duration::from_secs(10),
        || {
            let (member, _, owned) = membership(&a);
            (!member && owned == 0).then_some(())
        },
    );
    assert_eq!(a.metric("hudi_keeper_cluster_owned_tables"), Some(0.0));
    // A change sent to it names the owner it last saw, or says none is known: never done here.
    let (name, _) = &tables[0];
    let r = request(
        &a.addr,
        "POST",
        &format!("/api/v1/tables/{name}/rollback"),
        Some(TOKEN),
        Some("{}"),
    );
    assert!(
        r.status == 421 || r.status == 503,
        "{} {}",
        r.status,
        r.body
    );
    // The other takes everything once the server expires the lost session (2 s).
    b.wait_for(
        "the other to own every table",
        Duration::from_secs(15),
        || {
            let (member, replicas, owned) = membership(&b);
            (member && replicas == 1 && owned == TABLES).then_some(())
        },
    );
    let polls_a = |d: &Daemon| -> u64 {
        d.get("/api/v1/tables").json()["tables"]
            .as_array()
            .unwrap()
            .iter()
            .map(|t| t["status"]["polls"].as_u64().unwrap())
            .sum()
    };
    let before = polls_a(&a);
    std::thread::sleep(Duration::from_secs(1));
    assert_eq!(
        polls_a(&a),
        before,
        "a replica without a session polls nothing"
    );
    assert!(a.logs().contains("no ZooKeeper session"), "{}", a.logs());

    relay.mend();
    a.wait_for("registered again", Duration::from_secs(45), || {
        (both(&a) == Some(owned_a)).then_some(())
    });
    b.wait_for("two members again", Duration::from_secs(15), || {
        (both(&b) == Some(owned_b)).then_some(())
    });
    assert!(
        b.metric("hudi_keeper_cluster_ownership_changes_total")
            .unwrap()
            >= (2 * owned_a) as f64
    );
    a.wait_for(
        "every failed write rolled back",
        Duration::from_secs(60),
        || all_rolled_back(&tables).then_some(()),
    );
    for (name, uri) in &tables {
        assert_eq!(rollbacks(uri).0, 1, "{name}");
    }
}

/// The membership session uses `[defaults.lock]`'s ZooKeeper security settings: on a server that
/// requires SASL, the writers' JAAS file registers the replica; a wrong password leaves it
/// unregistered, owning nothing, and says why.
#[test]
fn a_zookeeper_cluster_logs_in_with_the_writers_jaas_file() {
    let sasl = zk_env("HUDI_KEEPER_ZK_SASL");
    let dir = std::path::PathBuf::from(zk_env("HUDI_KEEPER_ZK_SECURE_DIR"));
    let work = tempfile::tempdir().unwrap();
    let tables = make_tables(&work.path().join("tables"));
    let path = format!("/hudi-keeper-sasl-test-{}/replicas", std::process::id());
    let with = |jaas: &str, member: &str| {
        config(&tables, &zk_cluster(&sasl, &path, member)).replace(
            "provider = \"filesystem\"\n",
            &format!(
                "provider = \"filesystem\"\nzookeeper_jaas_file = \"{}\"\n",
                dir.join(jaas).display()
            ),
        )
    };
    let good = Daemon::start(&work.path().join("good"), &with("client-jaas.conf", "good"));
    let bad = Daemon::start(&work.path().join("bad"), &with("wrong-jaas.conf", "bad"));
    good.wait_for("registered", Duration::from_secs(30), || {
        let (member, replicas, owned) = membership(&good);
        (member && replicas == 1 && owned == TABLES).then_some(())
    });
    bad.wait_for("the refusal logged", Duration::from_secs(30), || {
        bad.logs().contains("no ZooKeeper session").then_some(())
    });
    let (member, _, owned) = membership(&bad);
    assert!(!member);
    assert_eq!(owned, 0);
}
