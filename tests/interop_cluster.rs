//! Replicas that find each other in ZooKeeper (issue #18, `[cluster] mode = "zookeeper"`): three
//! real `hudi-keeper serve` processes against the real ZooKeeper server share 3,000 idle tables
//! on the local file system and two tables real Hudi 1.1 wrote with LAZY writers under the
//! ZooKeeper lock (the same with Hudi 1.2's tables and writers: HUDI_KEEPER_INTEROP_FULL=1).
//!
//! - Every table is owned by exactly one replica, the one rendezvous hashing names (recomputed
//!   here), and polled by it alone; every replica names the same owner.
//! - One replica is SIGKILLed: its session is not closed, so its tables go to the other two once
//!   ZooKeeper expires the session; they poll them within the session timeout plus one poll
//!   interval (with a margin for a loaded machine), and no other table moves.
//! - While it is down, a Hudi writer of one of its tables is killed mid-write: a survivor rolls
//!   that write back.
//! - Started again under its name, it takes back exactly its tables.
//! - Every failed write was rolled back exactly once (one completed rollback per failed write,
//!   none pending), and Hudi's validator passes on both Hudi tables.
//!
//! The measured takeover times and moved-table counts are printed as `CLUSTER_REPORT {json}`
//! and written to `$HUDI_KEEPER_CLUSTER_REPORT` when set (`BENCHMARKS.md`, "Several replicas").
//! `HUDI_KEEPER_CLUSTER_TABLES` changes the number of idle tables (default 3,000).

use hudi_keeper_test_support as common;

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

use common::daemon::Daemon;
use common::interop::{copy_table, enabled, enabled_full, must, tables_root, workspace};

const SCENARIO: &str = "cow-nomdt-direct";
/// The membership sessions' timeout (the test server allows 1 s to 120 s).
const SESSION: Duration = Duration::from_secs(4);
const POLL: Duration = Duration::from_secs(5);
/// What a loaded CI machine may add to the bound (a poll of a thousand tables spread over a
/// second, processes competing for two cores).
const MARGIN: Duration = Duration::from_secs(15);
const REPLICAS: usize = 3;

fn zk() -> String {
    std::env::var("HUDI_KEEPER_ZK").expect(
        "HUDI_KEEPER_ZK is not set: run the tests through scripts/test, which starts ZooKeeper",
    )
}

fn pod(i: usize) -> String {
    format!("hudi-keeper-{i}")
}

/// The daemon's table weights, written again from their definition (FNV-1a 64 over member,
/// 0xff, table; then SplitMix64's finalizer): the owners the replicas name must be these.
fn weight(member: &str, table: &str) -> u64 {
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for b in member.bytes().chain([0xff]).chain(table.bytes()) {
        h ^= u64::from(b);
        h = h.wrapping_mul(0x0000_0100_0000_01b3);
    }
    h ^= h >> 30;
    h = h.wrapping_mul(0xbf58_476d_1ce4_e5b9);
    h ^= h >> 27;
    h = h.wrapping_mul(0x94d0_49bb_1331_11eb);
    h ^ (h >> 31)
}

fn owner_of<'a>(members: &[&'a str], table: &str) -> &'a str {
    members
        .iter()
        .copied()
        .max_by(|a, b| weight(a, table).cmp(&weight(b, table)).then(b.cmp(a)))
        .expect("members")
}

/// `n` idle tables (version 8, copy-on-write, three completed commits) under `root`.
fn make_idle(root: &Path, n: usize) -> Vec<(String, PathBuf)> {
    (0..n)
        .map(|i| {
            let name = format!("idle{i:05}");
            let t = root.join(&name);
            let tl = t.join(".hoodie/timeline");
            std::fs::create_dir_all(&tl).unwrap();
            std::fs::write(
                t.join(".hoodie/hoodie.properties"),
                format!("hoodie.table.name={name}\nhoodie.table.type=COPY_ON_WRITE\nhoodie.table.version=8\nhoodie.timeline.layout.version=2\nhoodie.table.timeline.timezone=UTC\n"),
            )
            .unwrap();
            for (req, done) in [
                ("20240101000000000", "20240101000001000"),
                ("20240101010000000", "20240101010001000"),
                ("20240101020000000", "20240101020001000"),
            ] {
                std::fs::write(tl.join(format!("{req}.commit.requested")), b"").unwrap();
                std::fs::write(tl.join(format!("{req}.inflight")), b"{}").unwrap();
                std::fs::write(tl.join(format!("{req}_{done}.commit")), b"{}").unwrap();
            }
            std::fs::create_dir_all(t.join("p1")).unwrap();
            std::fs::write(t.join("p1/fg-0_0-1-1_20240101000000000.parquet"), b"").unwrap();
            (name, t)
        })
        .collect()
}

/// A Hudi table of the harness, with its writers' ZooKeeper lock key.
struct HudiTable {
    name: String,
    dir: PathBuf,
    lock_key: String,
}

fn harness(lock_key: &str) -> Command {
    let mut c = Command::new("bash");
    c.arg(workspace().join("tests/interop/run.sh")).env(
        "INTEROP_LOCK",
        format!("zookeeper,{},{},{lock_key}", zk(), zk_base()),
    );
    c
}

fn zk_base() -> String {
    format!("/hudi-cluster-locks-{}", std::process::id())
}

/// Completed rollbacks on a version-9 table's timeline, and the instants still pending (a
/// requested or inflight file without a completed one).
fn timeline_state(dir: &Path) -> (usize, Vec<String>) {
    let mut completed = std::collections::BTreeSet::new();
    let mut open = std::collections::BTreeSet::new();
    let mut rollbacks = 0;
    for e in std::fs::read_dir(dir.join(".hoodie/timeline"))
        .unwrap()
        .flatten()
    {
        let n = e.file_name().to_string_lossy().to_string();
        let Some((stem, _)) = n.split_once('.') else {
            continue;
        };
        match stem.split_once('_') {
            Some((ts, _)) => {
                completed.insert(ts.to_string());
                if n.ends_with(".rollback") {
                    rollbacks += 1;
                }
            }
            None if n.ends_with(".requested") || n.ends_with(".inflight") => {
                open.insert(stem.to_string());
            }
            None => {}
        }
    }
    (rollbacks, open.difference(&completed).cloned().collect())
}

/// Per table: who the replica says owns it, and whether this replica polled it.
struct View {
    members: usize,
    member: bool,
    owner: BTreeMap<String, String>,
    polls: BTreeMap<String, u64>,
}

/// What `d` tells of the cluster and of every table: the listing is paged (`limit` at most
/// 1,000), so this follows `next` to its end.
fn view(d: &Daemon) -> Option<View> {
    let mut owner = BTreeMap::new();
    let mut polls = BTreeMap::new();
    let mut after: Option<String> = None;
    loop {
        let path = match &after {
            None => "/api/v1/tables?limit=1000".to_string(),
            Some(a) => format!("/api/v1/tables?limit=1000&after={a}"),
        };
        let r = d.get(&path);
        if r.status != 200 {
            return None;
        }
        let v = r.json();
        for t in v["tables"].as_array()? {
            let name = t["name"].as_str()?.to_string();
            owner.insert(
                name.clone(),
                t["owner"]["name"].as_str().unwrap_or("").to_string(),
            );
            polls.insert(name, t["status"]["polls"].as_u64().unwrap_or(0));
        }
        match v["next"].as_str() {
            Some(next) => after = Some(next.to_string()),
            None => {
                // A view must hold every table, or it would judge on a part of them.
                if owner.len() as u64 != v["total"].as_u64()? {
                    return None;
                }
                return Some(View {
                    members: v["cluster"]["replicas"].as_u64()? as usize,
                    member: v["cluster"]["member"].as_bool()?,
                    owner,
                    polls,
                });
            }
        }
    }
}

fn config(state: &Path, tables: &[(String, PathBuf)], hudi: &[HudiTable], zk_path: &str) -> String {
    let mut c = format!(
        "[server]\nstate_dir = \"{}\"\nshutdown_grace = \"5s\"\nmax_concurrent_polls = 16\n[cluster]\nmode = \"zookeeper\"\nzookeeper_url = \"{}\"\nzookeeper_path = \"{zk_path}\"\nzookeeper_session_timeout = \"{}s\"\n[defaults]\npoll_interval = \"{}s\"\nfailed_writes_policy = \"lazy\"\nheartbeat_interval = \"1s\"\nheartbeat_tolerable_misses = 2\nclock_skew_margin = \"500ms\"\nassume_lazy_writers = true\n[defaults.lock]\nprovider = \"filesystem\"\n",
        state.display(),
        zk(),
        SESSION.as_secs(),
        POLL.as_secs()
    );
    for (name, dir) in tables {
        c.push_str(&format!(
            "[[tables]]\nname = \"{name}\"\nuri = \"{}\"\n",
            dir.display()
        ));
    }
    for t in hudi {
        c.push_str(&format!(
            "[[tables]]\nname = \"{}\"\nuri = \"{}\"\n[tables.lock]\nprovider = \"zookeeper\"\ntimeout = \"120s\"\nzookeeper_url = \"{}\"\nzookeeper_base_path = \"{}\"\nzookeeper_lock_key = \"{}\"\nzookeeper_session_timeout = \"10s\"\nzookeeper_connection_timeout = \"5s\"\n",
            t.name,
            t.dir.display(),
            zk(),
            zk_base(),
            t.lock_key
        ));
    }
    c
}

fn start(work: &Path, i: usize, config: &str) -> Daemon {
    Daemon::start_with(&work.join(pod(i)), config, |c| {
        c.env("POD_NAME", pod(i));
    })
}

/// Wait until every live replica sees `expect` members, itself among them, and names the owner
/// rendezvous hashing gives over them for every table; the owners, by table.
fn settled(live: &[(usize, &Daemon)], expect: &[&str], timeout: Duration) -> Duration {
    let start = Instant::now();
    loop {
        let ok = live.iter().all(|(_, d)| {
            view(d).is_some_and(|v| {
                v.members == expect.len()
                    && v.member
                    && v.owner.iter().all(|(t, o)| o == owner_of(expect, t))
            })
        });
        if ok {
            return start.elapsed();
        }
        assert!(
            start.elapsed() < timeout,
            "the replicas did not agree on {expect:?} within {timeout:?}; logs:\n{}",
            live.iter()
                .map(|(i, d)| format!("--- {}\n{}", pod(*i), tail(&d.logs())))
                .collect::<Vec<_>>()
                .join("\n")
        );
        std::thread::sleep(Duration::from_millis(200));
    }
}

fn tail(log: &str) -> String {
    let lines: Vec<&str> = log.lines().collect();
    lines[lines.len().saturating_sub(40)..].join("\n")
}

/// Wait until, for every table of `tables`, one of `live` polled it; how long that took.
fn polled_by_one_of(live: &[&Daemon], tables: &[String], timeout: Duration) -> Duration {
    let start = Instant::now();
    loop {
        let views: Vec<View> = live.iter().filter_map(|d| view(d)).collect();
        if views.len() == live.len()
            && tables.iter().all(|t| {
                views
                    .iter()
                    .any(|v| v.polls.get(t).copied().unwrap_or(0) > 0)
            })
        {
            return start.elapsed();
        }
        assert!(
            start.elapsed() < timeout,
            "{} tables were not polled within {timeout:?}",
            tables.len()
        );
        std::thread::sleep(Duration::from_millis(200));
    }
}

/// The daemons running, with their indexes.
fn running(daemons: &[Option<Daemon>]) -> Vec<(usize, &Daemon)> {
    daemons
        .iter()
        .enumerate()
        .filter_map(|(i, d)| d.as_ref().map(|d| (i, d)))
        .collect()
}

fn counter(d: &Daemon, name: &str) -> f64 {
    d.metric(name).unwrap_or_else(|| panic!("no {name}"))
}

#[test]
fn three_replicas_share_the_tables_through_zookeeper_and_take_over_a_killed_one() {
    if enabled() {
        three_replicas("1.1");
    }
}

#[test]
fn three_replicas_share_hudi_1_2_tables_through_zookeeper_and_take_over_a_killed_one() {
    if enabled_full("the cluster with Hudi 1.2's tables") {
        three_replicas("1.2");
    }
}

/// One case at a time: each runs three daemons over thousands of tables.
static SERIAL: std::sync::Mutex<()> = std::sync::Mutex::new(());

/// The case with tables and writers of Hudi `version` (a harness key).
fn three_replicas(version: &str) {
    let _serial = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let idle_count: usize = std::env::var("HUDI_KEEPER_CLUSTER_TABLES")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(3_000);
    let members: Vec<String> = (0..REPLICAS).map(pod).collect();
    let all: Vec<&str> = members.iter().map(String::as_str).collect();
    let victim = 2;
    let survivors: Vec<&str> = vec![all[0], all[1]];

    // Two tables real Hudi wrote, each with a LAZY writer killed mid-write: one a survivor owns,
    // one the victim owns (names picked by the weights).
    let root = tables_root().join(format!("cluster-{version}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&root);
    std::fs::create_dir_all(&root).unwrap();
    let generated = root.join("generated");
    let out = harness("generated")
        .args(["generate", version, SCENARIO])
        .arg(&generated)
        .output()
        .unwrap();
    must(out, "run.sh generate");
    let pick = |owner: &str, prefix: &str| {
        (0..)
            .map(|i| format!("{prefix}{i}"))
            .find(|n| owner_of(&all, n) == owner)
            .unwrap()
    };
    let hudi: Vec<HudiTable> = [pick(all[0], "hudi-s"), pick(all[victim], "hudi-v")]
        .into_iter()
        .map(|name| {
            let dir = root.join(&name);
            copy_table(&generated, &dir);
            HudiTable {
                lock_key: format!("{name}-{}", std::process::id()),
                name,
                dir,
            }
        })
        .collect();
    let work = tempfile::tempdir().unwrap();
    let idle = make_idle(&work.path().join("tables"), idle_count);
    let zk_path = format!(
        "/hudi-keeper-test-{}-{}/replicas",
        version.replace('.', ""),
        std::process::id()
    );
    let cfg: Vec<String> = (0..REPLICAS)
        .map(|i| {
            config(
                &work.path().join(pod(i)).join("state"),
                &idle,
                &hudi,
                &zk_path,
            )
        })
        .collect();
    let started = Instant::now();
    let mut daemons: Vec<Option<Daemon>> = (0..REPLICAS)
        .map(|i| Some(start(work.path(), i, &cfg[i])))
        .collect();
    let names: Vec<String> = idle
        .iter()
        .map(|(n, _)| n.clone())
        .chain(hudi.iter().map(|t| t.name.clone()))
        .collect();

    // 1. Three members, each table owned by the one the weights name, polled by it alone.
    {
        let live = running(&daemons);
        settled(&live, &all, Duration::from_secs(60));
        let refs: Vec<&Daemon> = live.iter().map(|(_, d)| *d).collect();
        polled_by_one_of(&refs, &names, Duration::from_secs(120));
    }
    let first_round = started.elapsed();
    // While the replicas joined one after the other, the first ones owned more for a moment;
    // from now on, over more than a poll interval, only the owners poll.
    let before: Vec<View> = daemons
        .iter()
        .map(|d| view(d.as_ref().unwrap()).unwrap())
        .collect();
    std::thread::sleep(POLL + POLL / 2);
    let mut owned = [0usize; REPLICAS];
    for (i, d) in daemons.iter().enumerate() {
        let v = view(d.as_ref().unwrap()).unwrap();
        assert_eq!(v.owner.len(), names.len());
        for (t, polls) in &v.polls {
            let mine = owner_of(&all, t) == pod(i);
            let new = polls - before[i].polls[t];
            assert_eq!(new > 0, mine, "{} polled {t} {new} times", pod(i));
            owned[i] += usize::from(mine);
        }
        assert_eq!(
            counter(d.as_ref().unwrap(), "hudi_keeper_cluster_owned_tables") as usize,
            owned[i]
        );
    }
    assert_eq!(owned.iter().sum::<usize>(), names.len());
    // Both failed writes rolled back, each by its owner.
    let wait_rollbacks = |t: &HudiTable, n: usize, timeout: Duration| {
        let start = Instant::now();
        loop {
            let (done, pending) = timeline_state(&t.dir);
            if done >= n && pending.is_empty() {
                return;
            }
            assert!(
                start.elapsed() < timeout,
                "{}: {done} rollbacks, pending {pending:?}",
                t.name
            );
            std::thread::sleep(Duration::from_millis(200));
        }
    };
    for t in &hudi {
        wait_rollbacks(t, 1, Duration::from_secs(120));
    }

    // 2. SIGKILL the victim: its session is not closed; the others take its tables once the
    //    server expires it.
    let victims: Vec<String> = names
        .iter()
        .filter(|t| owner_of(&all, t) == all[victim])
        .cloned()
        .collect();
    let moved_before: Vec<f64> = (0..2)
        .map(|i| {
            counter(
                daemons[i].as_ref().unwrap(),
                "hudi_keeper_cluster_ownership_changes_total",
            )
        })
        .collect();
    let killed = Instant::now();
    drop(daemons[victim].take());
    let live: Vec<(usize, &Daemon)> = (0..2).map(|i| (i, daemons[i].as_ref().unwrap())).collect();
    let bound = SESSION + POLL + MARGIN;
    settled(&live, &survivors, bound);
    let refs: Vec<&Daemon> = live.iter().map(|(_, d)| *d).collect();
    polled_by_one_of(&refs, &victims, bound.saturating_sub(killed.elapsed()));
    let takeover = killed.elapsed();
    for (i, d) in &live {
        let moved = counter(d, "hudi_keeper_cluster_ownership_changes_total") - moved_before[*i];
        assert_eq!(moved as usize, victims.len(), "{}", pod(*i));
        // No table of a survivor moved: settled() checked each owner against the weights.
    }

    // 3. While it is down, a writer of the victim's Hudi table is killed mid-write: a survivor
    //    rolls it back.
    let tv = &hudi[1];
    let logs = root.join("kill-writer.logs");
    let out = harness(&tv.lock_key)
        .args(["kill-writer", version])
        .arg(&tv.dir)
        .arg(&logs)
        .output()
        .unwrap();
    let failed = must(out, "run.sh kill-writer").trim().to_string();
    assert!(!failed.is_empty());
    wait_rollbacks(tv, 2, Duration::from_secs(120));

    // 4. Started again under its name, it takes exactly its tables back.
    let restarted = Instant::now();
    daemons[victim] = Some(start(work.path(), victim, &cfg[victim]));
    let live = running(&daemons);
    settled(&live, &all, Duration::from_secs(60));
    let back = daemons[victim].as_ref().unwrap();
    polled_by_one_of(&[back], &victims, Duration::from_secs(60));
    let taken_back = restarted.elapsed();
    for (i, d) in live.iter().take(2) {
        let moved = counter(d, "hudi_keeper_cluster_ownership_changes_total") - moved_before[*i];
        assert_eq!(moved as usize, 2 * victims.len(), "{}", pod(*i));
    }

    // 5. A replica that stops (SIGTERM) leaves at once: its node is deleted, not left to expire.
    let stopped = Instant::now();
    let exit = daemons[victim]
        .take()
        .unwrap()
        .terminate(Duration::from_secs(30));
    assert!(exit.success(), "{exit:?}");
    let live: Vec<(usize, &Daemon)> = (0..2).map(|i| (i, daemons[i].as_ref().unwrap())).collect();
    settled(&live, &survivors, SESSION);
    let leave = stopped.elapsed();
    for d in daemons.iter_mut() {
        if let Some(d) = d.take() {
            d.terminate_cleanly(Duration::from_secs(30));
        }
    }

    // 6. Each failed write rolled back once; Hudi accepts both tables.
    for (t, failures) in hudi.iter().zip([1, 2]) {
        let (done, pending) = timeline_state(&t.dir);
        assert_eq!(done, failures, "{}: completed rollbacks", t.name);
        assert!(pending.is_empty(), "{}: pending {pending:?}", t.name);
        let out = harness(&t.lock_key)
            .args(["verify", version])
            .arg(&t.dir)
            .output()
            .unwrap();
        must(out, &format!("run.sh verify {}", t.name));
    }

    let report = serde_json::json!({
        "replicas": REPLICAS,
        "tables": names.len(),
        "owned_at_start": owned,
        "session_timeout_s": SESSION.as_secs(),
        "poll_interval_s": POLL.as_secs(),
        "start_to_first_round_s": first_round.as_secs_f64(),
        "sigkill_to_all_tables_polled_s": takeover.as_secs_f64(),
        "tables_moved_per_change": victims.len(),
        "restart_to_tables_polled_again_s": taken_back.as_secs_f64(),
        "sigterm_to_tables_moved_s": leave.as_secs_f64(),
    });
    println!("CLUSTER_REPORT {report}");
    if let Ok(p) = std::env::var("HUDI_KEEPER_CLUSTER_REPORT") {
        std::fs::write(p, serde_json::to_string_pretty(&report).unwrap()).unwrap();
    }
    let _ = std::fs::remove_dir_all(&root);
}
