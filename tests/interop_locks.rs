//! Real Hudi writers and hudi-keeper on one table under one lock (issue #5): Java writers commit in a
//! loop (optimistic concurrency, the file-system or ZooKeeper lock provider), one more writer is
//! SIGKILLed mid-write, and meanwhile hudi-keeper rolls back whatever has failed, taking the same
//! lock. At the end every commit a Java writer saw succeed must be intact and readable, no rollback
//! may have touched a live or committed instant, and Hudi's validator must pass. (Hudi 1.1's
//! storage lock against hudi-keeper's is in `interop_storage_lock`.)

use hudi_keeper_test_support as common;

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};
use std::process::Child;
use std::sync::Mutex;
use std::time::{Duration, Instant};

use common::interop::{enabled, enabled_full, must, run_sh_command as run_sh, tables_root};
use hudi_keeper_core::exec::rollback::{
    assess_table, rollback, rollback_observed, RollbackOptions, Selection,
};
use hudi_keeper_core::protocol::detect::LazyWritersEvidence;
use hudi_keeper_core::protocol::heartbeat::HeartbeatPolicy;
use hudi_keeper_core::protocol::lock::{LockOptions, LockProvider, ZkLockConfig};
use hudi_keeper_core::{Error, Table};

/// One case at a time: each runs several JVMs, and the machine has two cores.
static SERIAL: Mutex<()> = Mutex::new(());

const WRITERS: usize = 2;
const COMMITS_PER_WRITER: usize = 5;

#[derive(Clone, Copy, Debug)]
enum Lock {
    FileSystem,
    ZooKeeper,
}

struct Outcome {
    committed: Vec<(String, serde_json::Value)>,
    failed: Vec<String>,
}

/// The writers' `INTEROP_LOCK` and hudi-keeper's matching provider; `zk_key` names the
/// ZooKeeper lock (unique per case).
fn lock_setup(lock: Lock, zk_key: &str) -> (Vec<(String, String)>, LockProvider) {
    match lock {
        Lock::FileSystem => (
            vec![("INTEROP_LOCK".to_string(), "filesystem".to_string())],
            LockProvider::filesystem_default(),
        ),
        Lock::ZooKeeper => {
            let zk = std::env::var("HUDI_KEEPER_ZK").expect(
                "HUDI_KEEPER_ZK is not set: run the tests through scripts/test, which starts ZooKeeper",
            );
            (
                vec![(
                    "INTEROP_LOCK".to_string(),
                    format!("zookeeper,{zk},/hudi-interop,{zk_key}"),
                )],
                LockProvider::ZooKeeper(ZkLockConfig {
                    connect: zk,
                    base_path: "/hudi-interop".into(),
                    lock_key: zk_key.to_string(),
                    session_timeout: Duration::from_secs(10),
                    connection_timeout: Duration::from_secs(5),
                    tls: None,
                    sasl: None,
                }),
            )
        }
    }
}

fn summary(stdout: &Path) -> Outcome {
    let text = std::fs::read_to_string(stdout).expect("writer stdout");
    let line = text
        .lines()
        .find_map(|l| l.strip_prefix("SUMMARY "))
        .unwrap_or_else(|| panic!("no SUMMARY from the writer:\n{text}"));
    let v: serde_json::Value = serde_json::from_str(line).expect("summary JSON");
    let committed = v["committed"]
        .as_array()
        .expect("committed")
        .iter()
        .map(|c| {
            (
                c["instant"].as_str().expect("instant").to_string(),
                c["records"].clone(),
            )
        })
        .collect();
    let failed = v["failed"]
        .as_array()
        .expect("failed")
        .iter()
        .filter_map(|f| f["instant"].as_str().map(str::to_string))
        .collect();
    Outcome { committed, failed }
}

/// What the table and the writers say of `instant` now: its timeline and heartbeat files with
/// their ages, hudi-keeper's verdict, and every writer line naming it.
fn diagnose(
    rt: &tokio::runtime::Runtime,
    dir: &str,
    instant: &str,
    options: &RollbackOptions,
    writers: &[(Child, PathBuf)],
) -> String {
    let mut out = String::new();
    let now = std::time::SystemTime::now();
    for sub in [".hoodie", ".hoodie/.heartbeat", ".hoodie/timeline"] {
        let Ok(entries) = std::fs::read_dir(Path::new(dir).join(sub)) else {
            continue;
        };
        for e in entries.flatten() {
            let name = e.file_name().to_string_lossy().to_string();
            if name.contains(instant) {
                let age = e
                    .metadata()
                    .and_then(|m| m.modified())
                    .ok()
                    .and_then(|m| now.duration_since(m).ok())
                    .map(|d| format!("{} ms old", d.as_millis()))
                    .unwrap_or_else(|| "no mtime".into());
                out.push_str(&format!("  file {sub}/{name}: {age}\n"));
            }
        }
    }
    let assessed = rt.block_on(async {
        let table = Table::open(dir, &Default::default()).await?;
        let timeline = table.timeline().await?;
        assess_table(&table, &timeline, options).await
    });
    match assessed {
        Ok(a) => {
            for x in a.assessments.iter().filter(|x| x.requested_time == instant) {
                out.push_str(&format!(
                    "  verdict now: {:?} {:?} {:?}: {}\n",
                    x.action, x.state, x.verdict, x.reason
                ));
            }
        }
        Err(e) => out.push_str(&format!("  assessing the table failed: {e}\n")),
    }
    for (_, stdout) in writers {
        let text = std::fs::read_to_string(stdout).unwrap_or_default();
        for l in text
            .lines()
            .filter(|l| l.contains(instant) && !l.starts_with("SUMMARY"))
        {
            out.push_str(&format!("  {}: {l}\n", stdout.display()));
        }
    }
    out
}

fn run_case(key: &str, scenario: &str, lock: Lock) {
    if !enabled() {
        return;
    }
    let _serial = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let dir: PathBuf = tables_root().join(format!(
        "locks-{key}-{scenario}-{lock:?}-{}",
        std::process::id()
    ));
    let logs = PathBuf::from(format!("{}.logs", dir.display()));
    for d in [&dir, &logs] {
        let _ = std::fs::remove_dir_all(d);
    }
    let _ = std::fs::remove_dir_all(format!("{}-hudi-rollback", dir.display()));
    std::fs::create_dir_all(&logs).expect("logs dir");
    let dir_s = dir.to_str().expect("utf-8").to_string();

    let (env, provider) = lock_setup(
        lock,
        &format!("interop-{}-{}", key.replace('.', ""), std::process::id()),
    );

    // A table with completed commits and one failed write, made by real Hudi.
    must(
        run_sh(&env)
            .args(["generate", key, scenario, &dir_s])
            .output()
            .expect("run.sh generate"),
        "generate",
    );
    // A writer killed inside the file-system lock leaves it behind (expire = 0): an operator
    // removes it, as in the other interop suites.
    let _ = std::fs::remove_file(dir.join(".hoodie/lock"));

    let options = RollbackOptions {
        heartbeat: HeartbeatPolicy {
            interval: Duration::from_secs(1),
            tolerable_misses: 2,
            min_instant_age: Duration::from_secs(5),
            clock_skew_margin: Duration::from_millis(500),
        },
        // The harness's writers are LAZY (heartbeats): a write without one is a dead one.
        lazy_writers: Some(LazyWritersEvidence::Assumed),
        lock: LockOptions {
            provider,
            timeout: Duration::from_secs(120),
            retry_interval: Duration::from_millis(100),
        },
        ..Default::default()
    };

    // The writers, and one more that is killed mid-write while they run.
    let mut writers: Vec<(Child, PathBuf)> = (1..=WRITERS)
        .map(|id| {
            let out = logs.join(format!("writer{id}.stdout"));
            let err = logs.join(format!("writer{id}.stderr"));
            let child = run_sh(&env)
                .args([
                    "writer",
                    key,
                    &dir_s,
                    &id.to_string(),
                    &COMMITS_PER_WRITER.to_string(),
                ])
                .stdout(std::fs::File::create(&out).expect("stdout file"))
                .stderr(std::fs::File::create(&err).expect("stderr file"))
                .spawn()
                .expect("spawn writer");
            (child, out)
        })
        .collect();
    let killer = {
        let (env, key, dir_s, logs) = (env.clone(), key.to_string(), dir_s.clone(), logs.clone());
        std::thread::spawn(move || {
            std::thread::sleep(Duration::from_secs(8));
            let out = run_sh(&env)
                .args([
                    "kill-writer",
                    &key,
                    &dir_s,
                    logs.join("killed").to_str().expect("utf-8"),
                ])
                .output()
                .expect("run.sh kill-writer");
            must(out, "kill-writer").trim().to_string()
        })
    };

    let rt = tokio::runtime::Runtime::new().expect("runtime");
    let mut rolled_back: Vec<String> = Vec::new();
    let mut rounds = 0usize;
    let mut lock_waits = 0usize;
    let mut races = 0usize;
    let started = Instant::now();
    let mut pass = |final_pass: bool| {
        let table = rt
            .block_on(Table::open(&dir_s, &Default::default()))
            .expect("open table");
        rounds += 1;
        // Each rollback as it completes: a round that fails after one (a later instant's
        // race, below) still rolled that one back.
        let completed = Mutex::new(Vec::new());
        let result = rt.block_on(rollback_observed(
            &table,
            &Selection::AllFailed,
            &options,
            None,
            &|d| {
                completed
                    .lock()
                    .unwrap_or_else(|e| e.into_inner())
                    .push(d.clone())
            },
        ));
        for d in completed.into_inner().unwrap_or_else(|e| e.into_inner()) {
            if d.lock_wait_ms > 0 {
                lock_waits += 1;
            }
            rolled_back.push(d.instant);
        }
        match result {
            Ok(_) => {}
            // The timeline moved between planning and the re-check under the lock: a writer
            // won the race, nothing more was changed; the next round looks again.
            Err(Error::Refused { reason, .. })
                if !final_pass && reason.contains("nothing was changed") =>
            {
                races += 1
            }
            Err(e) => panic!("rollback round {rounds} failed: {e}"),
        }
    };
    loop {
        let running = writers
            .iter_mut()
            .any(|(c, _)| matches!(c.try_wait(), Ok(None)));
        if !running && killer.is_finished() {
            break;
        }
        assert!(
            started.elapsed() < Duration::from_secs(900),
            "the writers did not finish in 15 minutes"
        );
        pass(false);
        std::thread::sleep(Duration::from_millis(700));
    }
    for (c, _) in &mut writers {
        let status = c.wait().expect("writer exit");
        assert!(status.success(), "a writer JVM failed: {status}");
    }
    let killed = killer.join().expect("killer thread");
    // Every failed write's heartbeat has expired by now (1 s x 2 misses); one more pass cleans
    // whatever failed at the very end.
    std::thread::sleep(Duration::from_secs(4));
    pass(true);

    let outcomes: Vec<Outcome> = writers.iter().map(|(_, out)| summary(out)).collect();
    let committed: BTreeSet<String> = outcomes
        .iter()
        .flat_map(|o| o.committed.iter().map(|(t, _)| t.clone()))
        .collect();
    let failed: BTreeSet<String> = outcomes.iter().flat_map(|o| o.failed.clone()).collect();
    let ours: BTreeSet<String> = rolled_back.iter().cloned().collect();
    assert_eq!(
        ours.len(),
        rolled_back.len(),
        "an instant was rolled back twice: {rolled_back:?}"
    );
    let touched: Vec<_> = ours.intersection(&committed).collect();
    assert!(
        touched.is_empty(),
        "rolled back committed instants: {touched:?}"
    );
    assert!(
        ours.contains(&killed),
        "the killed writer's {killed} was not rolled back: {ours:?}"
    );
    for f in &failed {
        if !ours.contains(f) {
            panic!(
                "the failed commit {f} was not rolled back: {ours:?}\n{}",
                diagnose(&rt, &dir_s, f, &options, &writers)
            );
        }
    }
    assert!(
        committed.len() >= WRITERS,
        "too few commits succeeded: {committed:?}"
    );

    // Hudi's validator, with every committed record expected.
    let expected_path = logs.join("expected-records.json");
    let mut expected: serde_json::Value = serde_json::from_str(
        &std::fs::read_to_string(dir.join("expected-records.json")).expect("expected records"),
    )
    .expect("expected JSON");
    for o in &outcomes {
        for (_, records) in &o.committed {
            for (k, v) in records.as_object().expect("records") {
                expected["records"][k] = v.clone();
            }
        }
    }
    std::fs::write(
        &expected_path,
        serde_json::to_vec_pretty(&expected).expect("json"),
    )
    .expect("write expected");
    let verify = run_sh(&env)
        .args([
            "verify",
            key,
            &dir_s,
            "--expect",
            expected_path.to_str().expect("utf-8"),
        ])
        .output()
        .expect("run.sh verify");
    let report = must(verify, "Hudi's validator");
    eprintln!(
        "interop locks {key} {scenario} {lock:?}: {} commits, {} failed commits, 1 killed writer, {} rollbacks by hudi-keeper in {rounds} rounds ({} with a lock wait, {races} lost races), {:.0} s",
        committed.len(),
        failed.len(),
        ours.len(),
        lock_waits,
        started.elapsed().as_secs_f64()
    );
    let v: serde_json::Value = serde_json::from_str(&report).expect("validator report");
    assert_eq!(v["ok"], true, "{report}");
    let _ = std::fs::remove_dir_all(&dir);
    let _ = std::fs::remove_dir_all(format!("{}-hudi-rollback", dir.display()));
}

#[test]
fn hudi_0_15_writers_and_hudi_keeper_share_the_file_system_lock() {
    run_case("0.15", "mor-nomdt-direct", Lock::FileSystem);
}

#[test]
fn hudi_0_15_writers_and_hudi_keeper_share_the_zookeeper_lock() {
    run_case("0.15", "cow-nomdt-direct", Lock::ZooKeeper);
}

#[test]
fn hudi_1_1_writers_and_hudi_keeper_share_the_zookeeper_lock() {
    run_case("1.1", "mor-mdt-direct", Lock::ZooKeeper);
}

#[test]
fn hudi_1_1_writers_and_hudi_keeper_share_the_file_system_lock() {
    run_case("1.1", "cow-mdt-direct", Lock::FileSystem);
}

#[test]
fn hudi_1_2_writers_and_hudi_keeper_share_the_zookeeper_lock() {
    if enabled_full("Hudi 1.2 writers under the ZooKeeper lock") {
        run_case("1.2", "mor-mdt-direct", Lock::ZooKeeper);
    }
}

#[test]
fn hudi_1_2_writers_and_hudi_keeper_share_the_file_system_lock() {
    if enabled_full("Hudi 1.2 writers under the file-system lock") {
        run_case("1.2", "cow-mdt-direct", Lock::FileSystem);
    }
}

/// A Java process takes the lock with Hudi's own provider class and holds it for `hold_s`
/// seconds; a rollback started meanwhile waits for it, then proceeds.
fn java_holder_makes_us_wait(key: &str, lock: Lock) {
    if !enabled() {
        return;
    }
    let _serial = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    use std::io::BufRead;
    let work = tempfile::tempdir().expect("tempdir");
    let dir = work.path().join("t");
    let rt = tokio::runtime::Runtime::new().expect("runtime");
    common::fixtures::build_local(&rt, &dir, common::fixtures::Kind::CowV8);
    let (env, provider) = lock_setup(
        lock,
        &format!("hold-{}-{}", key.replace('.', ""), std::process::id()),
    );
    let hold_s = 5;
    let mut java = run_sh(&env)
        .args([
            "hold-lock",
            key,
            dir.to_str().expect("utf-8"),
            &hold_s.to_string(),
        ])
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::null())
        .spawn()
        .expect("spawn hold-lock");
    let mut lines = std::io::BufReader::new(java.stdout.take().expect("stdout")).lines();
    let locked = lines
        .by_ref()
        .map_while(Result::ok)
        .find(|l| l.starts_with("LOCKED "))
        .expect("the Java holder took the lock");
    let table = rt
        .block_on(Table::open(
            dir.to_str().expect("utf-8"),
            &Default::default(),
        ))
        .expect("open");
    let options = RollbackOptions {
        // The fixture's failed write has no heartbeat file; its writers are LAZY.
        lazy_writers: Some(LazyWritersEvidence::Assumed),
        lock: LockOptions {
            provider,
            timeout: Duration::from_secs(60),
            retry_interval: Duration::from_millis(100),
        },
        ..Default::default()
    };
    let started = Instant::now();
    let done = rt
        .block_on(rollback(&table, &Selection::AllFailed, &options, None))
        .expect("the rollback proceeds once the Java holder releases");
    let waited = started.elapsed();
    let unlocked = lines
        .map_while(Result::ok)
        .find(|l| l.starts_with("UNLOCKED "))
        .expect("the Java holder released");
    assert!(java.wait().expect("java exit").success());
    assert_eq!(done.len(), 1);
    assert!(
        done[0].lock_wait_ms >= 2_000,
        "hudi-keeper did not wait for the Java holder ({} ms): {locked} / {unlocked}",
        done[0].lock_wait_ms
    );
    eprintln!(
        "Hudi {key} {lock:?}: {locked}; hudi-keeper waited {} ms for the lock, rollback done {:.1} s after it asked",
        done[0].lock_wait_ms,
        waited.as_secs_f64()
    );
}

#[test]
fn a_hudi_0_15_writer_holding_the_file_system_lock_makes_hudi_keeper_wait() {
    java_holder_makes_us_wait("0.15", Lock::FileSystem);
}

#[test]
fn a_hudi_1_1_writer_holding_the_zookeeper_lock_makes_hudi_keeper_wait() {
    java_holder_makes_us_wait("1.1", Lock::ZooKeeper);
}

#[test]
fn a_hudi_1_2_writer_holding_the_zookeeper_lock_makes_hudi_keeper_wait() {
    if enabled_full("a Hudi 1.2 holder of the ZooKeeper lock") {
        java_holder_makes_us_wait("1.2", Lock::ZooKeeper);
    }
}
