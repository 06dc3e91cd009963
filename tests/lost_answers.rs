//! A store that acted on a request but whose answer never arrived (the connection closed after
//! the server wrote the object): the client retries the request, and a conditional create then
//! finds the object it wrote itself. Against the S3-compatible server on loopback (moto), through
//! a proxy that loses the answer to one chosen request (found by the chaos soak's fault proxy).

use hudi_keeper_test_support as common;

use std::time::Duration;

use common::fixtures::{Kind, TF};
use common::proxy::SlowProxy;
use common::runs::{
    keys, normalize, rolled_back_reference, s3_fixture, store_flags, with_expired_heartbeat,
    LOCK_FLAGS,
};
use common::s3::endpoint;
use common::{bin, stderr};

/// `hudi-keeper rollback` of the fixture's failed write through `proxy`.
fn rollback_through(proxy: &SlowProxy, uri: &str) -> std::process::Output {
    bin()
        .args(["rollback", uri, "--yes", "--instant", TF])
        .args(LOCK_FLAGS)
        .args(store_flags(&proxy.endpoint()))
        .output()
        .expect("run hudi-keeper")
}

#[test]
fn a_lost_answer_to_creating_the_rollback_plan_is_not_taken_for_someone_elses_rollback() {
    let rt = tokio::runtime::Runtime::new().unwrap();
    let expected = rolled_back_reference(&rt);

    let (f, root) = s3_fixture(&rt, "lost-plan", Kind::MorV9, true);
    with_expired_heartbeat(&rt, &f);
    let proxy = SlowProxy::start(&endpoint(), Duration::ZERO);
    // The rollback plan (`<R>.rollback.requested`, created if absent) reaches the server; its
    // answer does not. The client retries and the server answers 412: the plan exists.
    let timeline = format!("/{root}/.hoodie/timeline/");
    proxy.lose_answers(&["PUT ", &timeline, ".rollback.requested HTTP"], 1);
    let out = rollback_through(&proxy, &f.uri);
    assert_eq!(proxy.injected().answers_lost, 1, "the answer was lost");
    assert!(
        out.status.success(),
        "the rollback refused its own plan: {}\n{:?}",
        stderr(&out),
        keys(&rt, &f)
    );
    assert_eq!(normalize(&rt.block_on(f.snapshot())), expected);
}

#[test]
fn a_lost_answer_to_creating_a_rollback_log_block_writes_the_block_once() {
    let rt = tokio::runtime::Runtime::new().unwrap();
    // The same rollback, straight to the server.
    let (reference, _) = s3_fixture(&rt, "lost-log-ref", Kind::MorV6, true);
    with_expired_heartbeat(&rt, &reference);
    let out = common::runs::rollback_cli(&reference.uri, &["--instant", TF]);
    assert!(out.status.success(), "{}", stderr(&out));
    let expected = normalize(&rt.block_on(reference.snapshot()));

    let (f, root) = s3_fixture(&rt, "lost-log", Kind::MorV6, true);
    with_expired_heartbeat(&rt, &f);
    let proxy = SlowProxy::start(&endpoint(), Duration::ZERO);
    // The new log file with the rollback's command block (created if absent) reaches the
    // server; its answer does not.
    let partition = format!("/{root}/p1/.fg1-0_");
    proxy.lose_answers(&["PUT ", &partition, ".log."], 1);
    let out = rollback_through(&proxy, &f.uri);
    assert!(out.status.success(), "{}", stderr(&out));
    assert_eq!(proxy.injected().answers_lost, 1, "the answer was lost");
    let logs = |keys: Vec<String>| -> Vec<String> {
        keys.into_iter()
            .filter(|k| k.starts_with("p1/.fg1-0_") && k.contains(".log."))
            .collect()
    };
    assert_eq!(
        logs(keys(&rt, &f)),
        logs(expected.keys().cloned().collect()),
        "one command block, in one new log file"
    );
    assert_eq!(normalize(&rt.block_on(f.snapshot())), expected);
}

#[test]
fn a_lost_answer_to_creating_the_storage_lock_file_does_not_make_the_run_wait_out_its_own_lease() {
    let rt = tokio::runtime::Runtime::new().unwrap();
    let (f, root) = s3_fixture(&rt, "lost-lock", Kind::MorV9, true);
    with_expired_heartbeat(&rt, &f);
    let proxy = SlowProxy::start(&endpoint(), Duration::ZERO);
    // The first lease on the table (`table_lock.json`, created if absent) reaches the server; its
    // answer does not, and the retry finds the file. The lease is this run's own (20 s valid):
    // a run that took it for someone else's could not get the lock within 5 s.
    proxy.lose_answers(
        &["PUT ", &format!("/{root}/.hoodie/.locks/table_lock.json ")],
        1,
    );
    let out = bin()
        .args(["rollback", &f.uri, "--yes", "--instant", TF])
        .args(LOCK_FLAGS)
        .args(["--lock-timeout", "5s"])
        .args(store_flags(&proxy.endpoint()))
        .output()
        .expect("run hudi-keeper");
    assert_eq!(proxy.injected().answers_lost, 1, "the answer was lost");
    assert!(out.status.success(), "{}", stderr(&out));
    let lock = common::runs::lease(&rt, &root).expect("the lock file");
    assert!(lock.expired, "the lease was released: {lock:?}");
}

#[test]
fn a_lost_answer_to_creating_the_filesystem_lock_file_does_not_leave_the_table_locked_forever() {
    let rt = tokio::runtime::Runtime::new().unwrap();
    let expected = rolled_back_reference(&rt);

    let (f, root) = s3_fixture(&rt, "lost-fs-lock", Kind::MorV9, true);
    with_expired_heartbeat(&rt, &f);
    let proxy = SlowProxy::start(&endpoint(), Duration::ZERO);
    // The lock file (`.hoodie/lock`, created if absent) reaches the server; its answer does not,
    // and the retry finds the file. It holds this run's token, and never expires (expire = 0,
    // Hudi's default): a run that took it for someone else's would wait out its 5 s and leave it
    // behind, locking out every writer until an operator deleted it.
    proxy.lose_answers(&["PUT ", &format!("/{root}/.hoodie/lock ")], 1);
    let out = bin()
        .args(["rollback", &f.uri, "--yes", "--instant", TF])
        .args(["--lock", "filesystem", "--lock-timeout", "5s"])
        .args([
            "--heartbeat-interval",
            "1s",
            "--heartbeat-tolerable-misses",
            "1",
            "--clock-skew-margin",
            "500ms",
        ])
        .args(store_flags(&proxy.endpoint()))
        .output()
        .expect("run hudi-keeper");
    assert_eq!(proxy.injected().answers_lost, 1, "the answer was lost");
    assert!(out.status.success(), "{}", stderr(&out));
    assert!(
        !keys(&rt, &f).iter().any(|k| k == ".hoodie/lock"),
        "the lock file was released: {:?}",
        keys(&rt, &f)
    );
    assert_eq!(normalize(&rt.block_on(f.snapshot())), expected);
}

#[test]
fn a_lost_answer_to_a_storage_lock_write_mid_rollback_leaves_no_lease_held_by_nobody() {
    let rt = tokio::runtime::Runtime::new().unwrap();
    let expected = rolled_back_reference(&rt);

    let (f, root) = s3_fixture(&rt, "lost-renewal", Kind::MorV9, true);
    with_expired_heartbeat(&rt, &f);
    // Slow enough that the run renews its lease (every 2 s) in its first lock window.
    let proxy = SlowProxy::start(&endpoint(), Duration::from_millis(300));
    // The lock file's third write (after the create and the proof that the store replaces it
    // conditionally): a renewal, or the first window's release. It lands; its answer does not,
    // and the store refuses the repeat: the ETag it names is gone. The lease is still this
    // run's own: the second lock window must not wait 20 s for it to lapse.
    proxy.lose_answers_after(
        &["PUT ", &format!("/{root}/.hoodie/.locks/table_lock.json ")],
        2,
        1,
    );
    let out = bin()
        .args(["rollback", &f.uri, "--yes", "--instant", TF])
        .args(LOCK_FLAGS)
        .args(["--lock-timeout", "5s"])
        .args(store_flags(&proxy.endpoint()))
        .output()
        .expect("run hudi-keeper");
    assert_eq!(proxy.injected().answers_lost, 1, "the answer was lost");
    assert!(out.status.success(), "{}", stderr(&out));
    assert_eq!(normalize(&rt.block_on(f.snapshot())), expected);
    let lock = common::runs::lease(&rt, &root).expect("the lock file");
    assert!(lock.expired, "the lease was released: {lock:?}");
}
