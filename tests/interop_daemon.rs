//! The daemon's automatic rollbacks on tables real Hudi wrote and broke (a writer SIGKILLed
//! mid-commit), validated by Hudi's own code afterwards.

use hudi_keeper_test_support as common;

use std::time::Duration;

use common::daemon::Daemon;
use common::interop::{enabled, enabled_full, run_sh, tables_root};

fn daemon_rolls_back(key: &str, scenario: &str) {
    daemon_rolls_back_and_compares(key, scenario, false);
}

/// As [`daemon_rolls_back`]; with `diff`, the table is also compared with Hudi's own rollback of
/// it (`run.sh diff`), after the daemon's leftover guard ran.
fn daemon_rolls_back_and_compares(key: &str, scenario: &str, diff: bool) {
    if !enabled() {
        return;
    }
    let dir = tables_root().join(format!("daemon-{key}-{scenario}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    let _ = std::fs::remove_dir_all(format!("{}-hudi-rollback", dir.display()));
    let dir_s = dir.to_str().expect("utf-8");
    let out = run_sh(&["generate", key, scenario, dir_s]);
    assert!(
        out.status.success(),
        "generate: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let scenario_json: serde_json::Value =
        serde_json::from_slice(&std::fs::read(dir.join("scenario.json")).unwrap()).unwrap();
    let failed = scenario_json["failed_instant"]
        .as_str()
        .unwrap()
        .to_string();

    let work = tempfile::tempdir().unwrap();
    let d = Daemon::start(
        work.path(),
        &format!(
            "[server]\nstate_dir = \"state\"\n[defaults]\npoll_interval = \"500ms\"\nheartbeat_interval = \"1s\"\nheartbeat_tolerable_misses = 2\nclock_skew_margin = \"500ms\"\n[defaults.lock]\nprovider = \"filesystem\"\ntimeout = \"10s\"\n[[tables]]\nname = \"hudi\"\nuri = \"{dir_s}\"\n"
        ),
    );
    let status = d.wait_for("the automatic rollback", Duration::from_secs(60), || {
        let s = d.table("hudi");
        (s["status"]["rollbacks"] == 1).then_some(s)
    });
    assert_eq!(
        status["status"]["last_rollback"]["instant"],
        failed.as_str()
    );
    assert_eq!(status["status"]["last_rollback"]["trigger"], "auto");
    d.terminate_cleanly(Duration::from_secs(30));
    let verify = run_sh(&["verify", key, dir_s]);
    assert!(
        verify.status.success(),
        "Hudi's validator refused the daemon's rollback:\n{}\n{}",
        String::from_utf8_lossy(&verify.stdout),
        String::from_utf8_lossy(&verify.stderr)
    );
    if diff {
        let reference = format!("{}-hudi-rollback", dir.display());
        let out = run_sh(&["diff", dir_s, &reference]);
        assert!(
            out.status.success(),
            "the daemon's rollback differs from Hudi's:\n{}",
            String::from_utf8_lossy(&out.stdout)
        );
    }
    let _ = std::fs::remove_dir_all(&dir);
    let _ = std::fs::remove_dir_all(format!("{}-hudi-rollback", dir.display()));
}

#[test]
fn hudi_0_15_accepts_the_daemons_rollback_of_a_killed_mor_writer_with_metadata_table() {
    // Version 6 with the metadata table: the daemon records the rollback there as Hudi 0.15 does.
    daemon_rolls_back("0.15", "mor-mdt-direct");
}

#[test]
fn hudi_1_1_accepts_the_daemons_rollback_of_a_killed_mor_writer_with_metadata_table() {
    daemon_rolls_back("1.1", "mor-mdt-direct");
}

#[test]
fn hudi_1_2_accepts_the_daemons_rollback_of_a_killed_mor_writer_with_metadata_table() {
    if enabled_full("the daemon against Hudi 1.2") {
        daemon_rolls_back("1.2", "mor-mdt-direct");
    }
}

/// Table version 5 (Hudi 0.13.1, no metadata table): the daemon's rollback, its leftover guard
/// included (which keeps the failed log files Hudi 0.13 leaves for its command block), equals
/// Hudi 0.13.1's own.
#[test]
fn hudi_0_13_accepts_the_daemons_rollback_of_a_killed_mor_writer() {
    if enabled_full("the daemon against Hudi 0.13") {
        daemon_rolls_back_and_compares("0.13", "mor-nomdt-direct", true);
    }
}
