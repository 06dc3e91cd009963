//! A run cut off mid-way (Ctrl-C in the CLI, SIGTERM to the daemon, an API client that goes
//! away) stops at a safe point, or runs to its end, and releases the table lock; a rerun then
//! ends where an uninterrupted run ends. Against the S3-compatible server on loopback (moto),
//! slowed down by a proxy in front of it, with Hudi's storage-based lock.

use hudi_keeper_test_support as common;

use std::io::Write;
use std::process::{Child, Stdio};
use std::sync::Arc;
use std::time::{Duration, Instant};

use common::daemon::Daemon;
use common::fixtures::{Fixture, Kind, T1, TF};
use common::normalize::Snapshot;
use common::proxy::SlowProxy;
use common::runs::{
    daemon_store_toml, finishing, held, keys, lease, normalize, rollback_cli,
    rolled_back_reference, s3_fixture, store_flags, with_expired_heartbeat, within, HEARTBEATS,
    LOCK_FLAGS,
};
use common::s3::{endpoint, options, BUCKET};
use common::{bin, stderr};
use hudi_keeper_core::exec::restore::{restore, RestoreOptions};
use hudi_keeper_core::exec::rollback::{rollback, RollbackOptions, Selection};
use hudi_keeper_core::exec::savepoint::{create_savepoint, SavepointRequest};
use hudi_keeper_core::protocol::lock::{LockOptions, LockProvider};
use hudi_keeper_core::storage::testing::CountingInterceptor;
use hudi_keeper_core::storage::{Interceptor, OpKind, RelPath, StorageError};
use hudi_keeper_core::{Error, Table};
use tokio_util::sync::CancellationToken;

const TOKEN: &str = "test-token-0123456789abcdef";

fn wait_exit(child: &mut Child, bound: Duration) -> std::process::ExitStatus {
    let start = Instant::now();
    loop {
        if let Some(s) = child.try_wait().expect("wait") {
            return s;
        }
        if start.elapsed() > bound {
            let _ = child.kill();
            panic!("the process did not exit within {bound:?}");
        }
        std::thread::sleep(Duration::from_millis(20));
    }
}

fn signal(child: &Child, sig: &str) {
    let status = std::process::Command::new("kill")
        .args([sig, &child.id().to_string()])
        .status()
        .expect("kill");
    assert!(status.success());
}

#[test]
fn ctrl_c_mid_rollback_stops_at_a_safe_point_releases_the_lock_and_a_rerun_ends_like_an_uninterrupted_rollback(
) {
    let rt = tokio::runtime::Runtime::new().unwrap();
    let expected = rolled_back_reference(&rt);

    let (f, root) = s3_fixture(&rt, "cut-sigint", Kind::MorV9, true);
    with_expired_heartbeat(&rt, &f);
    let proxy = SlowProxy::start(&endpoint(), Duration::from_millis(300));
    let mut child = bin()
        .args(["rollback", &f.uri, "--yes", "--instant", TF])
        .args(LOCK_FLAGS)
        .args(store_flags(&proxy.endpoint()))
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawn hudi-keeper rollback");
    assert!(
        within(Duration::from_secs(60), || finishing(&rt, &f, &root)),
        "the rollback never held the lock while finishing"
    );
    signal(&child, "-INT");
    let status = wait_exit(&mut child, Duration::from_secs(60));
    let out = child.wait_with_output().expect("output");
    let err = stderr(&out);
    assert_eq!(status.code(), Some(130), "{err}");
    assert!(err.contains("Stopped at a safe point"), "{err}");
    assert!(err.contains(&format!("--instant {TF} --force")), "{err}");
    let lock = lease(&rt, &root).expect("the lock file");
    assert!(lock.expired, "the lease was released: {lock:?}");
    let now = keys(&rt, &f);
    assert!(
        !now.iter()
            .any(|k| k.starts_with(".hoodie/timeline/") && k.ends_with(".rollback")),
        "the rollback was cut before it completed: {now:?}"
    );

    // The command the message names finishes it.
    let rerun = rollback_cli(&f.uri, &["--instant", TF, "--force"]);
    assert!(rerun.status.success(), "{}", stderr(&rerun));
    assert_eq!(normalize(&rt.block_on(f.snapshot())), expected);
    assert!(lease(&rt, &root).expect("the lock file").expired);
}

#[test]
fn sigterm_mid_rollback_stops_the_daemon_at_a_safe_point_with_its_lock_released_and_a_rerun_ends_alike(
) {
    let rt = tokio::runtime::Runtime::new().unwrap();
    let expected = rolled_back_reference(&rt);

    let (f, root) = s3_fixture(&rt, "cut-sigterm", Kind::MorV9, true);
    with_expired_heartbeat(&rt, &f);
    let proxy = SlowProxy::start(&endpoint(), Duration::from_millis(300));
    // The completed rollback never gets through: a run that does not stop at a safe point
    // hangs there, holding its lock.
    let timeline = format!("/{root}/.hoodie/timeline/");
    proxy.hang(&["PUT ", &timeline, ".rollback HTTP"]);
    let work = tempfile::tempdir().unwrap();
    let d = Daemon::start(
        work.path(),
        &format!(
            "[server]\nstate_dir = \"state\"\nshutdown_grace = \"5s\"\n[defaults]\npoll_interval = \"1h\"\n{HEARTBEATS}[defaults.lock]\nprovider = \"storage\"\nstorage_validity = \"20s\"\nstorage_renew_interval = \"2s\"\n{}[[tables]]\nname = \"t\"\nuri = \"{}\"\n",
            daemon_store_toml(&proxy.endpoint()),
            f.uri
        ),
    );
    assert!(
        within(Duration::from_secs(60), || finishing(&rt, &f, &root)),
        "the automatic rollback never held the lock while finishing\n{}",
        d.logs()
    );
    let log = d.log.clone();
    let status = d.terminate(Duration::from_secs(30));
    let log = log.lock().unwrap().join("\n");
    assert!(status.success(), "exit status {status}\n{log}");
    let lock = lease(&rt, &root).expect("the lock file");
    assert!(lock.expired, "the lease was released: {lock:?}\n{log}");
    assert!(log.contains("stopping at a safe point"), "{log}");
    assert_eq!(
        proxy.hung(),
        0,
        "the run stopped before the hung request\n{log}"
    );

    let rerun = rollback_cli(&f.uri, &["--instant", TF, "--force"]);
    assert!(rerun.status.success(), "{}", stderr(&rerun));
    assert_eq!(normalize(&rt.block_on(f.snapshot())), expected);
}

/// The pending rollback of the fixture's failed write, if any: its instant.
fn pending_rollback(rt: &tokio::runtime::Runtime, f: &Fixture) -> Option<String> {
    let keys = keys(rt, f);
    let completed = |r: &str| {
        keys.iter()
            .any(|k| k.starts_with(&format!(".hoodie/timeline/{r}_")) && k.ends_with(".rollback"))
    };
    keys.iter()
        .filter_map(|k| k.strip_prefix(".hoodie/timeline/"))
        .filter_map(|k| k.strip_suffix(".rollback.requested"))
        .find(|r| !completed(r))
        .map(str::to_string)
}

#[test]
fn a_daemon_killed_mid_rollback_resumes_its_own_rollback_at_once_and_leaves_anyone_elses_to_its_age(
) {
    let rt = tokio::runtime::Runtime::new().unwrap();
    let expected = rolled_back_reference(&rt);

    let (f, _root) = s3_fixture(&rt, "cut-sigkill", Kind::MorV9, true);
    with_expired_heartbeat(&rt, &f);
    let proxy = SlowProxy::start(&endpoint(), Duration::ZERO);
    // The deletes never get through: the daemon is killed while its rollback deletes.
    proxy.hang(&["?delete"]);
    let work = tempfile::tempdir().unwrap();
    // min_instant_age is its default (10 min): a pending rollback someone else may be running
    // is left that long.
    let config = |endpoint: &str| {
        format!(
            "[server]\nstate_dir = \"state\"\n[defaults]\npoll_interval = \"1s\"\n{HEARTBEATS}[defaults.lock]\nprovider = \"storage\"\nstorage_validity = \"5s\"\nstorage_renew_interval = \"1s\"\n{}[[tables]]\nname = \"t\"\nuri = \"{}\"\n",
            daemon_store_toml(endpoint),
            f.uri
        )
    };
    let mut killed = Daemon::start(work.path(), &config(&proxy.endpoint()));
    assert!(
        within(Duration::from_secs(60), || proxy.hung() > 0),
        "the automatic rollback never deleted\n{}",
        killed.logs()
    );
    let r = pending_rollback(&rt, &f).expect("a pending rollback");
    killed.child.kill().expect("SIGKILL");
    killed.child.wait().expect("reap");
    proxy.hang(&[]);
    let record = work.path().join("state/own-changes/t.json");
    let recorded = std::fs::read_to_string(&record).expect("the daemon recorded its rollback");
    assert!(recorded.contains(&r), "{recorded}");

    // The rollback's heartbeat the killed daemon left (it expires in 2.5 s under HEARTBEATS;
    // then anyone takes the rollback over) goes, as for a rollback of a writer before Hudi 1.2,
    // which writes none: then its age decides.
    let heartbeat = format!(".hoodie/.heartbeat/{r}");
    assert!(
        keys(&rt, &f).contains(&heartbeat),
        "the rollback's heartbeat"
    );
    rt.block_on(f.delete(&heartbeat));
    // Without its record the rollback is anyone's: left to its age, after a restart too.
    let aside = work.path().join("own-changes-t.json");
    std::fs::rename(&record, &aside).unwrap();
    let other = Daemon::start(work.path(), &config(&endpoint()));
    other.wait_for(
        "a poll that leaves the rollback",
        Duration::from_secs(60),
        || {
            other
                .logs()
                .contains("may still be running in another process")
                .then_some(())
        },
    );
    assert_eq!(pending_rollback(&rt, &f).as_deref(), Some(r.as_str()));
    other.terminate_cleanly(Duration::from_secs(30));

    // With it, the restarted daemon finishes its own rollback at its first poll.
    std::fs::rename(&aside, &record).unwrap();
    let restarted = Daemon::start(work.path(), &config(&endpoint()));
    // Done: completed, and its heartbeat released (deleted right after the completed file).
    assert!(
        within(Duration::from_secs(60), || pending_rollback(&rt, &f)
            .is_none()
            && !keys(&rt, &f)
                .iter()
                .any(|k| k.starts_with(".hoodie/.heartbeat/"))),
        "the restarted daemon did not finish its rollback\n{}",
        restarted.logs()
    );
    assert_eq!(normalize(&rt.block_on(f.snapshot())), expected);
    restarted.wait_for("the record dropped", Duration::from_secs(30), || {
        let now = std::fs::read_to_string(&record).unwrap_or_default();
        (!now.contains(&r)).then_some(())
    });
    restarted.terminate_cleanly(Duration::from_secs(30));
}

#[test]
fn a_table_being_unregistered_mid_change_cannot_be_registered_again_until_the_change_ends() {
    let rt = tokio::runtime::Runtime::new().unwrap();
    let (f, _root) = s3_fixture(&rt, "unregister-race", Kind::MorV9, true);
    with_expired_heartbeat(&rt, &f);
    let proxy = SlowProxy::start(&endpoint(), Duration::ZERO);
    // The rollback's deletes hang: the change runs until the hang is lifted.
    proxy.hang(&["?delete"]);
    let work = tempfile::tempdir().unwrap();
    let d = Daemon::start(
        work.path(),
        &format!(
            "[server]\nstate_dir = \"state\"\nauth_token = \"{TOKEN}\"\nallowed_table_uris = [\"s3://{BUCKET}/\"]\n[defaults]\npoll_interval = \"1h\"\n{HEARTBEATS}[defaults.lock]\nprovider = \"storage\"\nstorage_validity = \"5s\"\nstorage_renew_interval = \"1s\"\n{}",
            daemon_store_toml(&proxy.endpoint()),
        ),
    );
    let entry = format!(r#"{{"name": "t", "uri": "{}"}}"#, f.uri);
    let r = common::http::request(&d.addr, "POST", "/api/v1/tables", Some(TOKEN), Some(&entry));
    assert_eq!(r.status, 201, "{}", r.body);
    // A manual rollback, left running (the client does not wait for it).
    let mut client = std::net::TcpStream::connect(&d.addr).expect("connect");
    write!(
        client,
        "POST /api/v1/tables/t/rollback HTTP/1.1\r\nHost: {}\r\nAuthorization: Bearer {TOKEN}\r\nContent-Type: application/json\r\nContent-Length: 2\r\n\r\n{{}}",
        d.addr
    )
    .expect("send");
    assert!(
        within(Duration::from_secs(60), || proxy.hung() > 0),
        "the rollback never deleted\n{}",
        d.logs()
    );
    // Unregistering waits for the change; meanwhile the table cannot come back under any name.
    let addr = d.addr.clone();
    let unregister = std::thread::spawn(move || {
        common::http::request(&addr, "DELETE", "/api/v1/tables/t", Some(TOKEN), None)
    });
    std::thread::sleep(Duration::from_millis(500));
    for name in ["t", "t2"] {
        let again = format!(r#"{{"name": "{name}", "uri": "{}"}}"#, f.uri);
        let r = common::http::request(&d.addr, "POST", "/api/v1/tables", Some(TOKEN), Some(&again));
        assert_eq!(
            r.status, 409,
            "registered {name} again mid-change: {}",
            r.body
        );
    }
    proxy.hang(&[]);
    drop(client);
    let r = unregister.join().expect("unregister");
    assert_eq!(r.status, 204, "{}", r.body);
    let r = common::http::request(&d.addr, "POST", "/api/v1/tables", Some(TOKEN), Some(&entry));
    assert_eq!(r.status, 201, "{}", r.body);
    d.terminate_cleanly(Duration::from_secs(30));
}

#[test]
fn a_second_daemon_on_the_same_state_dir_refuses_to_start() {
    let work = tempfile::tempdir().unwrap();
    let config = "[server]\nstate_dir = \"state\"\n";
    let first = Daemon::start(work.path(), config);
    let path = work.path().join("hudi-keeper.toml");
    let out = bin()
        .args(["serve", "--config"])
        .arg(&path)
        .args(["--listen", "127.0.0.1:0"])
        .current_dir(work.path())
        .output()
        .expect("run serve");
    assert!(!out.status.success());
    assert!(
        stderr(&out).contains("in use by another hudi-keeper daemon"),
        "{}",
        stderr(&out)
    );
    first.terminate_cleanly(Duration::from_secs(30));
}

/// The fixture with its failed write rolled back and a savepoint of T1, ready for a restore.
fn restorable(rt: &tokio::runtime::Runtime, name: &str) -> (Fixture, String) {
    let (f, root) = s3_fixture(rt, name, Kind::CowV8, false);
    rt.block_on(async {
        let t = Table::open(&f.uri, &options()).await.unwrap();
        let forced = RollbackOptions {
            force: true,
            ..Default::default()
        };
        rollback(&t, &Selection::Instant(TF.into()), &forced, None)
            .await
            .unwrap();
        create_savepoint(
            &t,
            &SavepointRequest {
                instant: Some(T1.into()),
                user: "test".into(),
                comment: String::new(),
            },
            &LockOptions::none(),
        )
        .await
        .unwrap();
    });
    (f, root)
}

/// What an uninterrupted restore to T1 of a [`restorable`] table named `name` leaves, normalized.
fn restored_reference(rt: &tokio::runtime::Runtime, name: &str) -> Snapshot {
    let (reference, _) = restorable(rt, name);
    rt.block_on(async {
        let t = Table::open(&reference.uri, &options()).await.unwrap();
        let opts = RestoreOptions {
            rollback: RollbackOptions::default(),
            require_savepoint: true,
        };
        restore(&t, T1, &opts, None).await.unwrap();
    });
    normalize(&rt.block_on(reference.snapshot()))
}

#[test]
fn a_daemon_killed_mid_restore_finishes_its_own_restore_once_the_heartbeat_it_left_expired() {
    let rt = tokio::runtime::Runtime::new().unwrap();
    let expected = restored_reference(&rt, "kill-restore-ref");

    let (f, _root) = restorable(&rt, "kill-restore");
    let proxy = SlowProxy::start(&endpoint(), Duration::ZERO);
    proxy.hang(&["?delete"]);
    let work = tempfile::tempdir().unwrap();
    let config = |endpoint: &str| {
        format!(
            "[server]\nstate_dir = \"state\"\nauth_token = \"{TOKEN}\"\n[defaults]\npoll_interval = \"1s\"\n{HEARTBEATS}[defaults.lock]\nprovider = \"storage\"\nstorage_validity = \"5s\"\nstorage_renew_interval = \"1s\"\n{}[[tables]]\nname = \"t\"\nuri = \"{}\"\n",
            daemon_store_toml(endpoint),
            f.uri
        )
    };
    // The killed daemon's child rollback leaves its heartbeat: the restarted daemon finishes
    // the restore once that heartbeat expired (2.5 s under HEARTBEATS).
    let mut killed = Daemon::start(work.path(), &config(&proxy.endpoint()));
    let body = format!(r#"{{"savepoint": "{T1}"}}"#);
    let mut client = std::net::TcpStream::connect(&killed.addr).expect("connect");
    write!(
        client,
        "POST /api/v1/tables/t/restore HTTP/1.1\r\nHost: {}\r\nAuthorization: Bearer {TOKEN}\r\nContent-Type: application/json\r\nContent-Length: {}\r\n\r\n{body}",
        killed.addr,
        body.len()
    )
    .expect("send");
    assert!(
        within(Duration::from_secs(60), || proxy.hung() > 0),
        "the restore never deleted\n{}",
        killed.logs()
    );
    killed.child.kill().expect("SIGKILL");
    killed.child.wait().expect("reap");
    drop(client);
    proxy.hang(&[]);
    let restored = |keys: &[String]| {
        keys.iter()
            .any(|k| k.starts_with(".hoodie/timeline/") && k.ends_with(".restore"))
    };
    assert!(
        !restored(&keys(&rt, &f)),
        "the restore finished before the kill"
    );

    let restarted = Daemon::start(work.path(), &config(&endpoint()));
    restarted.wait_for("the restore finished", Duration::from_secs(60), || {
        restarted
            .logs()
            .contains("resumed restore finished")
            .then_some(())
    });
    assert!(restored(&keys(&rt, &f)));
    assert_eq!(normalize(&rt.block_on(f.snapshot())), expected);
    restarted.terminate_cleanly(Duration::from_secs(30));
}

#[test]
fn a_client_that_drops_the_connection_mid_restore_does_not_cut_it_short_and_the_lock_is_released() {
    let rt = tokio::runtime::Runtime::new().unwrap();
    let expected = restored_reference(&rt, "cut-restore-ref");

    let (f, root) = restorable(&rt, "cut-restore");
    let proxy = SlowProxy::start(&endpoint(), Duration::from_millis(300));
    let work = tempfile::tempdir().unwrap();
    let d = Daemon::start(
        work.path(),
        &format!(
            "[server]\nstate_dir = \"state\"\nauth_token = \"{TOKEN}\"\n[defaults]\npoll_interval = \"1h\"\n[defaults.lock]\nprovider = \"storage\"\nstorage_validity = \"20s\"\nstorage_renew_interval = \"2s\"\n{}[[tables]]\nname = \"t\"\nuri = \"{}\"\n",
            daemon_store_toml(&proxy.endpoint()),
            f.uri
        ),
    );
    let body = format!(r#"{{"savepoint": "{T1}"}}"#);
    let mut client = std::net::TcpStream::connect(&d.addr).expect("connect");
    write!(
        client,
        "POST /api/v1/tables/t/restore HTTP/1.1\r\nHost: {}\r\nAuthorization: Bearer {TOKEN}\r\nContent-Type: application/json\r\nContent-Length: {}\r\n\r\n{body}",
        d.addr,
        body.len()
    )
    .expect("send");
    assert!(
        within(Duration::from_secs(60), || {
            keys(&rt, &f)
                .iter()
                .any(|k| k.ends_with(".restore.requested"))
                && held(&rt, &root)
        }),
        "the restore never started under the lock\n{}",
        d.logs()
    );
    // The client goes away mid-restore.
    client.shutdown(std::net::Shutdown::Both).expect("hang up");
    drop(client);
    assert!(
        within(Duration::from_secs(120), || lease(&rt, &root)
            .is_some_and(|l| l.expired)),
        "the lock was not released: {:?}\n{}",
        keys(&rt, &f),
        d.logs()
    );
    let now = keys(&rt, &f);
    assert!(
        now.iter()
            .any(|k| k.starts_with(".hoodie/timeline/") && k.ends_with(".restore")),
        "the restore ran to its end: {now:?}\n{}",
        d.logs()
    );
    // Running it again changes nothing more.
    let again = common::http::request(
        &d.addr,
        "POST",
        "/api/v1/tables/t/restore",
        Some(TOKEN),
        Some(&body),
    );
    assert_eq!(again.status, 200, "{}", again.body);
    assert_eq!(normalize(&rt.block_on(f.snapshot())), expected);
    assert!(lease(&rt, &root).expect("the lock file").expired);
}

/// Asks the run to stop right before its `n`-th storage call.
#[derive(Debug)]
struct StopAt {
    n: u64,
    seen: std::sync::atomic::AtomicU64,
    token: CancellationToken,
}

impl Interceptor for StopAt {
    fn before(&self, _op: OpKind, _path: &RelPath) -> Result<(), StorageError> {
        if self.seen.fetch_add(1, std::sync::atomic::Ordering::SeqCst) + 1 == self.n {
            self.token.cancel();
        }
        Ok(())
    }
}

fn file_lock() -> LockOptions {
    LockOptions {
        provider: LockProvider::filesystem_default(),
        timeout: Duration::from_secs(1),
        retry_interval: Duration::from_millis(10),
    }
}

/// Stop `run` before each of its storage calls in turn (`run` gets the table with the stop
/// token); each time it ends at a safe point (or finishes) with the lock file gone, and
/// `rerun` then ends where an uninterrupted run ends. Returns the number of stop points tried.
async fn stop_at_every_call<R, RF, Q, QF>(build: impl Fn() -> BuildFut, run: R, rerun: Q) -> usize
where
    R: Fn(Table) -> RF,
    RF: std::future::Future<Output = Result<(), Error>>,
    Q: Fn(Table) -> QF,
    QF: std::future::Future<Output = Result<(), Error>>,
{
    let lock = RelPath::parse(".hoodie/lock").unwrap();
    let reference = build().await;
    let counter = Arc::new(CountingInterceptor::new());
    let t = Table::open_storage(reference.storage().with_interceptor(counter.clone()))
        .await
        .unwrap();
    run(t).await.unwrap();
    let expected = normalize(&reference.snapshot().await);
    let calls = counter.total();
    assert!(calls > 10, "suspiciously few calls: {calls}");
    let mut stopped = 0;
    for n in 1..=calls {
        let f = build().await;
        let heartbeats_before: Vec<String> = f.snapshot().await.into_keys().collect();
        let token = CancellationToken::new();
        let stop = Arc::new(StopAt {
            n,
            seen: Default::default(),
            token: token.clone(),
        });
        let t = Table::open_storage(f.storage().with_interceptor(stop))
            .await
            .unwrap()
            .with_cancel(token);
        match run(t).await {
            Ok(()) => {}
            Err(Error::Cancelled { .. }) => stopped += 1,
            Err(e) => panic!("stopping before call {n} of {calls}: {e}"),
        }
        assert!(
            f.storage().head(&lock).await.unwrap().is_none(),
            "the lock was released after a stop before call {n}"
        );
        // A stopped run leaves its rollback heartbeats to expire; the rerun does not wait.
        for hb in f.snapshot().await.into_keys().filter(|k| {
            (k.starts_with(".hoodie/.heartbeat/") || k.contains("/.hoodie/.heartbeat/"))
                && !heartbeats_before.contains(k)
        }) {
            f.delete(&hb).await;
        }
        let t = Table::open_storage(f.storage()).await.unwrap();
        rerun(t)
            .await
            .unwrap_or_else(|e| panic!("rerun after a stop before call {n}: {e}"));
        assert_eq!(
            normalize(&f.snapshot().await),
            expected,
            "end state after a stop before call {n}"
        );
    }
    assert!(
        stopped > calls as usize / 2,
        "{stopped} of {calls} runs stopped"
    );
    calls as usize
}

type BuildFut = std::pin::Pin<Box<dyn std::future::Future<Output = Fixture>>>;

fn forced() -> RollbackOptions {
    RollbackOptions {
        force: true,
        lock: file_lock(),
        ..Default::default()
    }
}

#[tokio::test]
async fn a_rollback_asked_to_stop_before_any_storage_call_stops_at_a_safe_point_with_its_lock_released_and_resumes(
) {
    let n = stop_at_every_call(
        || Box::pin(Fixture::build(Kind::MorV9, true)),
        |t| async move {
            rollback(&t, &Selection::Instant(TF.into()), &forced(), None)
                .await
                .map(|_| ())
        },
        |t| async move {
            // The failed write, unless the stopped run got to the end.
            if t.timeline().await?.find(TF).next().is_none() {
                return Ok(());
            }
            rollback(&t, &Selection::Instant(TF.into()), &forced(), None)
                .await
                .map(|_| ())
        },
    )
    .await;
    eprintln!("{n} stop points");
}

async fn savepointed(kind: Kind, mdt: bool) -> Fixture {
    let f = Fixture::build(kind, mdt).await;
    let t = Table::open_storage(f.storage()).await.unwrap();
    rollback(
        &t,
        &Selection::Instant(TF.into()),
        &RollbackOptions {
            force: true,
            ..Default::default()
        },
        None,
    )
    .await
    .unwrap();
    create_savepoint(
        &t,
        &SavepointRequest {
            instant: Some(T1.into()),
            user: "test".into(),
            comment: String::new(),
        },
        &LockOptions::none(),
    )
    .await
    .unwrap();
    f
}

#[tokio::test]
async fn a_restore_asked_to_stop_before_any_storage_call_stops_at_a_safe_point_with_its_lock_released_and_resumes(
) {
    let restore_to_t1 = |t: Table| async move {
        let opts = RestoreOptions {
            rollback: RollbackOptions {
                lock: file_lock(),
                ..Default::default()
            },
            require_savepoint: true,
        };
        restore(&t, T1, &opts, None).await.map(|_| ())
    };
    let n = stop_at_every_call(
        || Box::pin(savepointed(Kind::MorV9, true)),
        restore_to_t1,
        restore_to_t1,
    )
    .await;
    eprintln!("{n} stop points");
}

#[tokio::test]
async fn a_lock_dropped_without_release_is_released_in_the_background() {
    let f = Fixture::build(Kind::CowV8, false).await;
    let lock = RelPath::parse(".hoodie/lock").unwrap();
    let guard = hudi_keeper_core::protocol::lock::acquire(&f.storage(), &file_lock())
        .await
        .unwrap();
    assert!(f.storage().head(&lock).await.unwrap().is_some());
    // Work abandoned mid-way drops its guard.
    drop(guard);
    assert!(hudi_keeper_core::protocol::lock::release_dropped_locks(Duration::from_secs(5)).await);
    assert!(f.storage().head(&lock).await.unwrap().is_none());
}
