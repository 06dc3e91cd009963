//! No poll or change without a deadline: a poll or a rollback that hangs on the store times out,
//! counts as a failure, releases its lock and leaves the other tables alone; the timeline API
//! answers while a long change holds the table. The real `hudi-keeper serve` against the
//! S3-compatible server on loopback (moto) behind a proxy that can hang requests.

use hudi_keeper_test_support as common;

use std::time::Duration;

use common::daemon::Daemon;
use common::fixtures::{build_local, Kind, TF};
use common::proxy::SlowProxy;
use common::runs::{
    daemon_store_toml, held, keys, lease, normalize, rolled_back_reference, s3_fixture,
    with_expired_heartbeat, within, HEARTBEATS,
};
use common::s3::endpoint;

/// A table on the local file system whose failed write has an expired heartbeat.
fn local_failed_table(rt: &tokio::runtime::Runtime, dir: &std::path::Path) {
    build_local(rt, dir, Kind::CowV8);
    let beat = dir.join(format!(".hoodie/.heartbeat/{TF}"));
    std::fs::create_dir_all(beat.parent().unwrap()).unwrap();
    std::fs::write(&beat, b"").unwrap();
    std::fs::File::options()
        .write(true)
        .open(&beat)
        .and_then(|f| f.set_modified(std::time::SystemTime::now() - Duration::from_secs(3600)))
        .unwrap();
}

fn local_rolled_back(dir: &std::path::Path) -> bool {
    !dir.join(format!("p1/fg4-0_0-9-9_{TF}.parquet")).exists()
}

#[test]
fn a_poll_that_hangs_on_the_store_times_out_as_a_failure_and_the_other_tables_are_still_polled() {
    let rt = tokio::runtime::Runtime::new().unwrap();
    let (hung, hung_root) = s3_fixture(&rt, "deadline-poll", Kind::CowV8, false);
    let proxy = SlowProxy::start(&endpoint(), Duration::ZERO);
    // Every request for this table hangs.
    proxy.hang(&[&hung_root]);
    let work = tempfile::tempdir().unwrap();
    let other = work.path().join("other");
    local_failed_table(&rt, &other);
    // One poll at a time: a hung poll that kept its slot would stop every other table.
    let d = Daemon::start(
        work.path(),
        &format!(
            "[server]\nstate_dir = \"state\"\nmax_concurrent_polls = 1\npoll_timeout = \"2s\"\nmax_backoff = \"2s\"\nhalt_after_failures = 100\n[defaults]\npoll_interval = \"500ms\"\n{HEARTBEATS}{}[[tables]]\nname = \"hung\"\nuri = \"{}\"\nfailed_writes_policy = \"observe\"\n[[tables]]\nname = \"other\"\nuri = \"{}\"\n[tables.lock]\nprovider = \"filesystem\"\n",
            daemon_store_toml(&proxy.endpoint()),
            hung.uri,
            other.display()
        ),
    );
    let ok = within(Duration::from_secs(60), || {
        let h = &d.table("hung")["status"];
        let o = &d.table("other")["status"];
        h["consecutive_failures"].as_u64().unwrap_or(0) >= 2
            && o["polls"].as_u64().unwrap_or(0) >= 3
            && local_rolled_back(&other)
    });
    let h = d.table("hung");
    assert!(
        ok,
        "hung: {}\nother: {}\n{}",
        h["status"],
        d.table("other")["status"],
        d.logs()
    );
    let err = h["status"]["last_error"].as_str().unwrap_or_default();
    assert!(err.contains("server.poll_timeout"), "{err}");
    assert!(
        d.metric(r#"hudi_keeper_polls_total{outcome="error",table="hung"}"#)
            .unwrap_or(0.0)
            >= 2.0
    );
    assert!(proxy.hung() > 0, "the store still hangs\n{}", d.logs());
}

/// The daemon's config for one S3 table behind `proxy` with the storage lock.
fn s3_table_config(endpoint: &str, uri: &str, server: &str) -> String {
    format!(
        "[server]\nstate_dir = \"state\"\n{server}[defaults]\npoll_interval = \"1s\"\nmin_instant_age = \"1s\"\n{HEARTBEATS}[defaults.lock]\nprovider = \"storage\"\nstorage_validity = \"20s\"\nstorage_renew_interval = \"2s\"\n{}[[tables]]\nname = \"t\"\nuri = \"{uri}\"\n",
        daemon_store_toml(endpoint)
    )
}

#[test]
fn a_rollback_that_hangs_on_the_store_times_out_as_a_failure_releases_its_lock_and_resumes_later() {
    let rt = tokio::runtime::Runtime::new().unwrap();
    let expected = rolled_back_reference(&rt);

    let (f, root) = s3_fixture(&rt, "deadline-rollback", Kind::MorV9, true);
    with_expired_heartbeat(&rt, &f);
    let proxy = SlowProxy::start(&endpoint(), Duration::ZERO);
    // The completed rollback never gets through while the store hangs.
    let timeline = format!("/{root}/.hoodie/timeline/");
    proxy.hang(&["PUT ", &timeline, ".rollback HTTP"]);
    let work = tempfile::tempdir().unwrap();
    let d = Daemon::start(
        work.path(),
        &s3_table_config(
            &proxy.endpoint(),
            &f.uri,
            "mutation_timeout = \"3s\"\nshutdown_grace = \"2s\"\nhalt_after_failures = 100\n",
        ),
    );
    // Timed out (3 s, then 2 s to reach a safe point), a failure, and the lock released
    // although the request still hangs (the store client alone would give up only after 30 s).
    let ok = within(Duration::from_secs(20), || {
        let s = &d.table("t")["status"];
        s["consecutive_failures"].as_u64().unwrap_or(0) >= 1
            && lease(&rt, &root).is_some_and(|l| l.expired)
    });
    let status = d.table("t")["status"].clone();
    assert!(ok, "{status}\n{}", d.logs());
    assert!(proxy.hung() > 0, "the store still hangs\n{}", d.logs());
    let err = status["last_error"].as_str().unwrap_or_default();
    assert!(err.contains("server.mutation_timeout"), "{err}");
    assert_eq!(status["last_rollback"]["outcome"], "failure", "{status}");

    // Once the store answers again, a later poll resumes the rollback and finishes it.
    proxy.hang(&[]);
    let done = within(Duration::from_secs(60), || {
        d.table("t")["status"]["last_rollback"]["outcome"] == "success"
    });
    assert!(done, "{}\n{}", d.table("t")["status"], d.logs());
    assert!(lease(&rt, &root).is_some_and(|l| l.expired));
    assert_eq!(normalize(&rt.block_on(f.snapshot())), expected);
}

#[test]
fn the_timeline_answers_while_a_long_rollback_holds_the_table() {
    let rt = tokio::runtime::Runtime::new().unwrap();
    let (f, root) = s3_fixture(&rt, "deadline-timeline", Kind::MorV9, true);
    with_expired_heartbeat(&rt, &f);
    let proxy = SlowProxy::start(&endpoint(), Duration::ZERO);
    let timeline = format!("/{root}/.hoodie/timeline/");
    proxy.hang(&["PUT ", &timeline, ".rollback HTTP"]);
    let work = tempfile::tempdir().unwrap();
    let d = Daemon::start(work.path(), &s3_table_config(&proxy.endpoint(), &f.uri, ""));
    // The rollback is stuck on its last write, holding the table (and its lock).
    assert!(
        within(Duration::from_secs(60), || proxy.hung() > 0),
        "{}",
        d.logs()
    );
    let (tx, rx) = std::sync::mpsc::channel();
    let addr = d.addr.clone();
    std::thread::spawn(move || {
        let _ = tx.send(common::http::get(&addr, "/api/v1/tables/t/timeline"));
    });
    let answer = rx.recv_timeout(Duration::from_secs(20));
    // Still in progress when the answer came: the request hangs, the lock is held, the poll
    // has not finished.
    assert!(proxy.hung() > 0 && held(&rt, &root));
    assert_eq!(
        d.table("t")["status"]["polls"],
        0,
        "the first poll is still running"
    );
    let answer = answer.expect("the timeline answers while the rollback runs");
    assert_eq!(answer.status, 200, "{}", answer.body);
    let instants = answer.json()["instants"].as_array().unwrap().len();
    assert!(instants >= 3, "{}", answer.body);
    assert!(keys(&rt, &f)
        .iter()
        .any(|k| k.ends_with(".rollback.inflight")));
}

/// Table `a` on S3 behind `proxy` (storage lock) and table `b` on the local file system
/// (observe), polled one at a time.
fn two_tables_one_poll_slot(proxy: &SlowProxy, a_uri: &str, b: &std::path::Path) -> String {
    format!(
        "[server]\nstate_dir = \"state\"\nauth_token = \"secret-token-for-tests\"\nmax_concurrent_polls = 1\nmutation_timeout = \"300s\"\nhalt_after_failures = 100\n[defaults]\npoll_interval = \"500ms\"\nmin_instant_age = \"1s\"\n{HEARTBEATS}[defaults.lock]\nprovider = \"storage\"\nstorage_validity = \"20s\"\nstorage_renew_interval = \"2s\"\n{}[[tables]]\nname = \"a\"\nuri = \"{a_uri}\"\n[[tables]]\nname = \"b\"\nuri = \"{}\"\nfailed_writes_policy = \"observe\"\n",
        daemon_store_toml(&proxy.endpoint()),
        b.display()
    )
}

/// Whether table `b` is polled at least `more` times more within 20 s.
fn still_polled(d: &Daemon, more: u64) -> bool {
    let polls = |d: &Daemon| d.table("b")["status"]["polls"].as_u64().unwrap_or(0);
    let before = polls(d);
    within(Duration::from_secs(20), || polls(d) >= before + more)
}

#[test]
fn a_hung_rollback_does_not_keep_the_only_poll_slot_from_the_other_tables() {
    let rt = tokio::runtime::Runtime::new().unwrap();
    let (f, root) = s3_fixture(&rt, "deadline-slot-rollback", Kind::MorV9, true);
    with_expired_heartbeat(&rt, &f);
    let proxy = SlowProxy::start(&endpoint(), Duration::ZERO);
    let timeline = format!("/{root}/.hoodie/timeline/");
    proxy.hang(&["PUT ", &timeline, ".rollback HTTP"]);
    let work = tempfile::tempdir().unwrap();
    let b = work.path().join("b");
    build_local(&rt, &b, Kind::CowV8);
    let d = Daemon::start(work.path(), &two_tables_one_poll_slot(&proxy, &f.uri, &b));
    // The automatic rollback of `a` is stuck on its last write (for up to 300 s).
    assert!(
        within(Duration::from_secs(60), || proxy.hung() > 0),
        "{}",
        d.logs()
    );
    assert!(
        still_polled(&d, 3),
        "b: {}\n{}",
        d.table("b")["status"],
        d.logs()
    );
    assert!(
        proxy.hung() > 0 && held(&rt, &root),
        "the rollback still runs"
    );
}

#[test]
fn a_poll_of_a_table_an_api_change_holds_is_skipped_as_busy_and_the_other_tables_are_still_polled()
{
    let rt = tokio::runtime::Runtime::new().unwrap();
    // No heartbeat file: the pending write is left alone, the polls of `a` only look.
    let (f, root) = s3_fixture(&rt, "deadline-slot-busy", Kind::MorV9, true);
    let proxy = SlowProxy::start(&endpoint(), Duration::ZERO);
    let timeline = format!("/{root}/.hoodie/timeline/");
    proxy.hang(&["PUT ", &timeline, ".savepoint"]);
    let work = tempfile::tempdir().unwrap();
    let b = work.path().join("b");
    build_local(&rt, &b, Kind::CowV8);
    let d = Daemon::start(work.path(), &two_tables_one_poll_slot(&proxy, &f.uri, &b));
    assert!(
        within(Duration::from_secs(30), || d.table("a")["status"]["polls"]
            .as_u64()
            .unwrap_or(0)
            >= 1),
        "{}",
        d.logs()
    );
    // A savepoint through the API, stuck on its write, holds `a` (for up to 300 s).
    let addr = d.addr.clone();
    std::thread::spawn(move || {
        common::http::request(
            &addr,
            "POST",
            "/api/v1/tables/a/savepoints",
            Some("secret-token-for-tests"),
            Some("{}"),
        )
    });
    assert!(
        within(Duration::from_secs(30), || proxy.hung() > 0),
        "{}",
        d.logs()
    );
    assert!(
        still_polled(&d, 3),
        "a: {}\nb: {}\n{}",
        d.table("a")["status"],
        d.table("b")["status"],
        d.logs()
    );
    let busy = d
        .metric(r#"hudi_keeper_polls_total{outcome="skipped_busy",table="a"}"#)
        .unwrap_or(0.0);
    assert!(busy >= 1.0, "{}", d.logs());
    // Skipped, not failed.
    assert_eq!(d.table("a")["status"]["consecutive_failures"], 0);
}

#[test]
fn timeline_reads_of_a_table_whose_store_hangs_are_bounded_and_the_excess_is_told_to_retry() {
    let rt = tokio::runtime::Runtime::new().unwrap();
    let (f, root) = s3_fixture(&rt, "deadline-timeline-bound", Kind::CowV8, false);
    let proxy = SlowProxy::start(&endpoint(), Duration::ZERO);
    // Every request for this table hangs: it is never opened, each read would open it afresh.
    proxy.hang(&[&root]);
    let work = tempfile::tempdir().unwrap();
    let d = Daemon::start(
        work.path(),
        &format!(
            "[server]\nstate_dir = \"state\"\npoll_timeout = \"30s\"\nhalt_after_failures = 100\n[defaults]\npoll_interval = \"1h\"\nfailed_writes_policy = \"observe\"\n{}[[tables]]\nname = \"t\"\nuri = \"{}\"\n",
            daemon_store_toml(&proxy.endpoint()),
            f.uri
        ),
    );
    // The first poll hangs on its first request.
    assert!(
        within(Duration::from_secs(30), || proxy.hung() >= 1),
        "{}",
        d.logs()
    );
    let (tx, rx) = std::sync::mpsc::channel();
    for _ in 0..6 {
        let (tx, addr) = (tx.clone(), d.addr.clone());
        std::thread::spawn(move || {
            let _ = tx.send(common::http::get(&addr, "/api/v1/tables/t/timeline"));
        });
    }
    // The excess reads are answered at once; the others wait for the store.
    let busy: Vec<_> = (0..4)
        .map(|_| rx.recv_timeout(Duration::from_secs(25)))
        .collect();
    for answer in busy {
        let answer = answer.expect("a timeline read beyond the bound answers at once");
        assert_eq!(answer.status, 503, "{}", answer.body);
        assert_eq!(answer.header("retry-after"), Some("1"), "{}", answer.head);
    }
    // The poll and two reads: the store never saw the other reads.
    assert!(within(Duration::from_secs(20), || proxy.hung() >= 3));
    assert_eq!(proxy.hung(), 3);
}
