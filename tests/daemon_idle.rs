//! Idle tables cost less (issue #34): a table with nothing pending whose timeline stays unchanged
//! for `idle_after` is polled every `idle_poll_interval`, not every `poll_interval`; a pending
//! write puts it back on the fast rate, and a write that starts and dies between two idle polls
//! is rolled back within `idle_poll_interval` + its heartbeat's expiry + one poll, never before
//! its heartbeat expired. The real binary on a local table, its LISTs counted by the daemon's own
//! `hudi_keeper_object_store_requests_total`.

use hudi_keeper_test_support as common;

use std::time::{Duration, Instant};

use common::daemon::Daemon;
use common::fixtures::{build_local, instant_now, Fixture, Kind};
use hudi_keeper_core::protocol::heartbeat::Heartbeat;
use tokio_util::sync::CancellationToken;

const POLL: Duration = Duration::from_millis(200);
const IDLE: Duration = Duration::from_secs(4);
/// heartbeat_interval × heartbeat_tolerable_misses + clock_skew_margin.
const EXPIRY: Duration = Duration::from_millis(2_500);

/// A daemon watching the fixture table `t` (its old failed write rolled back at the first poll)
/// at 200 ms while active, every 4 s once idle (after 1 s unchanged); the leftover guard and the
/// audit off, so that polls make every request.
fn start(dir: &std::path::Path) -> (Daemon, Fixture, tokio::runtime::Runtime) {
    let rt = tokio::runtime::Runtime::new().unwrap();
    let table = dir.join("t");
    let f = build_local(&rt, &table, Kind::CowV8);
    let d = Daemon::start(
        &dir.join("daemon"),
        &format!(
            "[server]\nstate_dir = \"state\"\n[defaults]\npoll_interval = \"200ms\"\nidle_poll_interval = \"4s\"\nidle_after = \"1s\"\nheartbeat_interval = \"1s\"\nheartbeat_tolerable_misses = 2\nclock_skew_margin = \"500ms\"\nmin_instant_age = \"10s\"\nassume_lazy_writers = true\naudit_interval = 0\nleftover_guard_interval = 0\n[defaults.lock]\nprovider = \"filesystem\"\n[[tables]]\nname = \"t\"\nuri = \"{}\"\n",
            table.display()
        ),
    );
    d.wait_for(
        "the old failed write to be rolled back",
        Duration::from_secs(30),
        || (d.table("t")["status"]["rollbacks"] == 1).then_some(()),
    );
    (d, f, rt)
}

/// LISTs of the table's timeline (and heartbeat) folder so far.
fn lists(d: &Daemon) -> f64 {
    d.metric(r#"hudi_keeper_object_store_requests_total{kind="list_dir",table="t"}"#)
        .unwrap_or(0.0)
}

fn polls(d: &Daemon) -> f64 {
    d.metric(r#"hudi_keeper_polls_total{outcome="ok",table="t"}"#)
        .unwrap_or(0.0)
}

fn wait_idle(d: &Daemon) {
    d.wait_for(
        "the table to be polled at its idle rate",
        Duration::from_secs(20),
        || (d.metric("hudi_keeper_tables_polled_idle") == Some(1.0)).then_some(()),
    );
}

fn pending(d: &Daemon) -> usize {
    d.table("t")["status"]["pending"]
        .as_array()
        .map(|p| p.len())
        .unwrap_or(0)
}

#[test]
fn an_idle_table_backs_off_to_its_idle_interval_and_a_pending_write_brings_back_the_fast_rate() {
    let dir = tempfile::tempdir().unwrap();
    let (d, f, rt) = start(dir.path());
    wait_idle(&d);
    // 8 s idle: at most 3 polls (every 3.6 to 4 s), one LIST each; at 200 ms it would be 40.
    let (l0, p0) = (lists(&d), polls(&d));
    std::thread::sleep(Duration::from_secs(8));
    let (idle_lists, idle_polls) = (lists(&d) - l0, polls(&d) - p0);
    assert!(
        (1.0..=3.0).contains(&idle_polls) && idle_lists <= 3.0,
        "an idle table polled {idle_polls} times with {idle_lists} LISTs in 8 s (idle_poll_interval 4s)\n{}",
        d.logs()
    );

    // A live writer: seen at the next idle poll at the latest, then polled at the fast rate for
    // as long as it is pending (one more LIST a poll: the heartbeat folder).
    let token = CancellationToken::new();
    let t = instant_now(0);
    let beat = rt
        .block_on(Heartbeat::start(
            f.storage(),
            &t,
            Duration::from_secs(1),
            token.clone(),
        ))
        .unwrap();
    rt.block_on(f.start_write(&t));
    let seen = Instant::now();
    d.wait_for(
        "the pending write to be seen",
        IDLE + Duration::from_secs(3),
        || (pending(&d) == 1).then_some(()),
    );
    let seen_after = seen.elapsed();
    let p1 = polls(&d);
    std::thread::sleep(Duration::from_secs(4));
    let fast_polls = polls(&d) - p1;
    assert!(
        fast_polls >= 10.0,
        "a table with a pending write polled {fast_polls} times in 4 s (poll_interval 200ms)\n{}",
        d.logs()
    );
    assert_eq!(d.metric("hudi_keeper_tables_polled_idle"), Some(0.0));
    assert_eq!(
        d.table("t")["status"]["rollbacks"],
        1,
        "a live writer was rolled back"
    );
    assert_eq!(d.table("t")["status"]["pending"][0]["verdict"], "live");

    // The writer dies: polled at the fast rate, its write is rolled back within one poll of its
    // heartbeat's expiry, as on a table that was never idle; then the table backs off again.
    token.cancel();
    rt.block_on(beat.abandon());
    let died = Instant::now();
    d.wait_for(
        "the dead write to be rolled back",
        EXPIRY + POLL + Duration::from_millis(1_500),
        || (d.table("t")["status"]["rollbacks"] == 2).then_some(()),
    );
    let rolled_back_after = died.elapsed();
    wait_idle(&d);
    eprintln!(
        "idle: {idle_polls} polls / {idle_lists} LISTs in 8 s; pending write seen after {:.1} s; {fast_polls} polls in 4 s while pending; rolled back {:.1} s after its writer died",
        seen_after.as_secs_f64(),
        rolled_back_after.as_secs_f64()
    );
    d.terminate_cleanly(Duration::from_secs(20));
}

#[test]
fn a_write_that_starts_and_dies_on_an_idle_table_is_rolled_back_within_the_bound_never_before_its_heartbeat_expired(
) {
    let dir = tempfile::tempdir().unwrap();
    let (d, f, rt) = start(dir.path());
    wait_idle(&d);
    // Let a moment of the idle interval pass, so that the write starts between two idle polls.
    std::thread::sleep(Duration::from_millis(500));
    let token = CancellationToken::new();
    let t = instant_now(0);
    let started = Instant::now();
    let beat = rt
        .block_on(Heartbeat::start(
            f.storage(),
            &t,
            Duration::from_secs(1),
            token.clone(),
        ))
        .unwrap();
    rt.block_on(f.start_write(&t));
    // It beats once more, then dies (its heartbeat file stays, ageing).
    std::thread::sleep(Duration::from_millis(1_100));
    token.cancel();
    rt.block_on(beat.abandon());
    let died = Instant::now();
    let bound = IDLE + EXPIRY + POLL + Duration::from_secs(2);
    d.wait_for("the dead write to be rolled back", bound, || {
        (d.table("t")["status"]["rollbacks"] == 2).then_some(())
    });
    let (since_start, since_death) = (started.elapsed(), died.elapsed());
    // Never before its heartbeat expired: its first beat was when it started.
    assert!(
        since_start >= EXPIRY,
        "rolled back {since_start:?} after its write started: before its heartbeat expired\n{}",
        d.logs()
    );
    let last = &d.table("t")["status"]["last_rollback"];
    assert_eq!(last["instant"], t.as_str(), "{last}");
    eprintln!(
        "a write that started and died on an idle table was rolled back {:.1} s after it started, {:.1} s after its writer died (bound: idle {} s + expiry {} s + poll {} s = {:.1} s after it started)",
        since_start.as_secs_f64(),
        since_death.as_secs_f64(),
        IDLE.as_secs(),
        EXPIRY.as_secs_f64(),
        POLL.as_secs_f64(),
        (IDLE + EXPIRY + POLL).as_secs_f64()
    );
    d.terminate_cleanly(Duration::from_secs(20));
}
