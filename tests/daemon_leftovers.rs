//! The leftover guard in the daemon (issue #33): after the daemon's own rollback, the partitions
//! it touched (a file its markers missed in a partition they name, left by a markers-only
//! rollback, goes; one in a partition they do not name stays, for the audit); and every
//! `leftover_guard_interval`, the partitions of every completed rollback on the active timeline
//! (a zombie's file of a write rolled back earlier goes); `0` switches it off. Counted in
//! `hudi_keeper_rollback_leftovers_total`. The real binary on local tables.

use hudi_keeper_test_support as common;

use std::time::Duration;

use common::config::DaemonConfig;
use common::daemon::Daemon;
use common::engine::{open, rollback_options};
use common::fixtures::{build_local, Kind, TF};
use hudi_keeper_core::exec::rollback::{rollback, Selection};

const REMOVED: &str = r#"hudi_keeper_rollback_leftovers_total{outcome="removed",table="t"}"#;

#[test]
fn after_its_markers_only_rollback_the_daemon_removes_the_file_the_markers_missed() {
    let rt = tokio::runtime::Runtime::new().unwrap();
    let work = tempfile::tempdir().unwrap();
    let dir = work.path().join("t");
    build_local(&rt, &dir, Kind::CowV8);
    // A base file of the failed write that its markers miss, in a partition they name (p1);
    // the fixture's own missed file is in a partition they do not name (p2), which only the
    // audit's whole listing reaches.
    let missed = dir.join(format!("p1/missed-0_0-9-9_{TF}.parquet"));
    std::fs::write(&missed, b"missed").unwrap();
    let elsewhere = dir.join(format!("p2/missed-0_0-9-9_{TF}.parquet"));
    assert!(elsewhere.exists());
    let d = Daemon::start(
        work.path(),
        &DaemonConfig::new()
            .defaults("poll_interval", "500ms")
            .defaults("assume_lazy_writers", "true")
            .defaults("audit_interval", "0")
            .defaults("listing_cross_check", "false")
            .lock("provider", "filesystem")
            .table("t", &dir.display().to_string())
            .to_string(),
    );
    d.wait_for(
        "the rollback and its guard",
        Duration::from_secs(20),
        || (d.metric(REMOVED) == Some(1.0)).then_some(()),
    );
    assert_eq!(d.table("t")["status"]["rollbacks"], 1);
    assert!(!missed.exists());
    assert!(elsewhere.exists());
    assert_eq!(
        d.metric(r#"hudi_keeper_rollback_leftovers_total{outcome="kept",table="t"}"#),
        Some(0.0)
    );
    assert!(dir
        .join("p1/fg1-0_0-1-1_20240101000000000.parquet")
        .exists());
}

/// A table whose failed write was rolled back before the daemon came, then a zombie's file of
/// it written; the daemon watching it with `interval` as its leftover guard interval.
fn zombie_under_daemon(interval: &str) -> (tempfile::TempDir, std::path::PathBuf, Daemon) {
    let rt = tokio::runtime::Runtime::new().unwrap();
    let work = tempfile::tempdir().unwrap();
    let dir = work.path().join("t");
    let f = build_local(&rt, &dir, Kind::MorV9);
    let table = rt.block_on(open(&f));
    rt.block_on(rollback(
        &table,
        &Selection::AllFailed,
        &rollback_options(),
        None,
    ))
    .expect("rollback");
    let zombie = dir.join(format!("p2/zombie-0_0-9-9_{TF}.parquet"));
    std::fs::write(&zombie, b"late").unwrap();
    let d = Daemon::start(
        work.path(),
        &DaemonConfig::new()
            .defaults("poll_interval", "300ms")
            .defaults("audit_interval", "0")
            .defaults("leftover_guard_interval", interval)
            .lock("provider", "filesystem")
            .table("t", &dir.display().to_string())
            .to_string(),
    );
    (work, zombie, d)
}

#[test]
fn the_periodic_check_removes_a_zombies_file_of_a_write_rolled_back_before() {
    let (_work, zombie, d) = zombie_under_daemon("1s");
    d.wait_for("the periodic guard", Duration::from_secs(20), || {
        (d.metric(REMOVED) == Some(1.0)).then_some(())
    });
    assert!(!zombie.exists());
    assert_eq!(d.table("t")["status"]["rollbacks"], 0);
}

#[test]
fn a_leftover_guard_interval_of_0_switches_the_guard_off() {
    let (_work, zombie, d) = zombie_under_daemon("0");
    d.wait_for("ten polls", Duration::from_secs(20), || {
        (d.metric(r#"hudi_keeper_polls_total{outcome="ok",table="t"}"#) >= Some(10.0)).then_some(())
    });
    assert!(zombie.exists());
    assert_eq!(d.metric(REMOVED), Some(0.0));
}
