//! Tests of the configuration: loading, defaults, table settings and locks (`api.rs`: the
//! API's admission policy and locations).

mod api;
mod discover;

use std::path::Path;
use std::time::Duration;

use hudi_keeper_core::protocol::lock::{LockOptions, LockProvider};

use super::*;

fn parse(toml: &str) -> anyhow::Result<Config> {
    let dir = tempfile::tempdir().unwrap();
    let p = dir.path().join("c.toml");
    std::fs::write(&p, toml).unwrap();
    Config::load(&p, true)
}

#[test]
fn defaults_apply_and_tables_override_them() {
    let c = parse(
        r#"
[defaults]
poll_interval = "10s"
[defaults.lock]
provider = "filesystem"
[[tables]]
name = "a"
uri = "/tmp/a"
[[tables]]
name = "b"
uri = "/tmp/b"
poll_interval = "2s"
failed_writes_policy = "observe"
heartbeat_interval = 5
"#,
    )
    .unwrap();
    let a = c.defaults.resolve(&c.tables[0]).unwrap();
    let b = c.defaults.resolve(&c.tables[1]).unwrap();
    assert_eq!(a.poll_interval_ms, 10_000);
    assert_eq!(a.lock_provider, "filesystem");
    assert_eq!(b.poll_interval_ms, 2_000);
    assert_eq!(b.failed_writes_policy, PolicySetting::Observe);
    assert_eq!(b.heartbeat.interval, Duration::from_secs(5));
    assert_eq!(c.server.listen.to_string(), "127.0.0.1:9464");
}

#[test]
fn the_writer_policy_keys_default_off_and_tables_override_them() {
    let c = parse(
        r#"
[defaults]
max_write_duration = "6h"
[defaults.lock]
provider = "filesystem"
[[tables]]
name = "a"
uri = "/tmp/a"
[[tables]]
name = "b"
uri = "/tmp/b"
assume_lazy_writers = true
max_write_duration = "90m"
"#,
    )
    .unwrap();
    let a = c.defaults.resolve(&c.tables[0]).unwrap();
    let b = c.defaults.resolve(&c.tables[1]).unwrap();
    assert!(!a.assume_lazy_writers);
    assert_eq!(a.max_write_duration_ms, Some(6 * 3_600_000));
    assert!(b.assume_lazy_writers);
    assert_eq!(b.max_write_duration_ms, Some(90 * 60_000));
    let none =
        parse("[[tables]]\nname = \"t\"\nuri = \"/t\"\nfailed_writes_policy = \"observe\"\n")
            .unwrap();
    let t = none.defaults.resolve(&none.tables[0]).unwrap();
    assert!(!t.assume_lazy_writers);
    assert_eq!(t.max_write_duration_ms, None);
    let err = parse("[defaults]\nmax_write_duration = \"0s\"\n[[tables]]\nname = \"t\"\nuri = \"/t\"\nfailed_writes_policy = \"observe\"\n")
        .unwrap_err();
    assert!(format!("{err:#}").contains("max_write_duration"), "{err:#}");
}

#[test]
fn bare_numbers_are_held_to_the_duration_limit_as_durations_with_a_unit_are() {
    for toml in [
        "[server]\npoll_timeout = 9223372036854775807\n",
        "[defaults.lock]\nprovider = \"filesystem\"\nfilesystem_expire = 9223372036854775807\n",
    ] {
        let err = format!("{:#}", parse(toml).unwrap_err());
        assert!(err.contains("longer than the limit of 100 years"), "{err}");
    }
    assert!(parse("[server]\npoll_timeout = 30\n").is_ok());
}

#[test]
fn unknown_keys_fail_with_the_key_named() {
    let err = parse("[server]\nlisten = \"127.0.0.1:1\"\nlisen = 3\n").unwrap_err();
    let msg = format!("{err:#}");
    assert!(msg.contains("lisen"), "{msg}");
    let err = parse("[defaults]\npoll_interval = \"soon\"\n").unwrap_err();
    let msg = format!("{err:#}");
    assert!(msg.contains("poll_interval"), "{msg}");
    assert!(msg.contains("not a duration"), "{msg}");
}

#[test]
fn a_table_that_may_be_changed_needs_a_lock_decision() {
    let err = parse("[[tables]]\nname = \"t\"\nuri = \"/tmp/t\"\n").unwrap_err();
    assert!(
        format!("{err:#}").contains("lock.provider is not set"),
        "{err:#}"
    );
    parse("[[tables]]\nname = \"t\"\nuri = \"/tmp/t\"\nfailed_writes_policy = \"observe\"\n")
        .unwrap();
}

#[test]
fn duplicate_names_and_bad_lock_options_are_refused() {
    let err = parse(
        "[defaults.lock]\nprovider = \"none\"\n[[tables]]\nname = \"t\"\nuri = \"/a\"\n[[tables]]\nname = \"t\"\nuri = \"/b\"\n",
    )
    .unwrap_err();
    assert!(format!("{err:#}").contains("used twice"), "{err:#}");
    let err =
        parse("[[tables]]\nname = \"t\"\nuri = \"/a\"\n[tables.lock]\nprovider = \"zookeeper\"\n")
            .unwrap_err();
    assert!(format!("{err:#}").contains("zookeeper_url"), "{err:#}");
}

#[test]
fn the_environment_overrides_the_file() {
    // Each test process has its own environment; the variable names are unique to this test.
    std::env::set_var("HUDI_KEEPER_SERVER__HALT_AFTER_FAILURES", "9");
    let c = parse("[server]\nhalt_after_failures = 3\n").unwrap();
    std::env::remove_var("HUDI_KEEPER_SERVER__HALT_AFTER_FAILURES");
    assert_eq!(c.server.halt_after_failures, 9);
}

#[test]
fn every_shipped_config_file_is_valid() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
    for f in [
        "config/hudi-keeper.toml",
        "deploy/image/hudi-keeper.toml",
        "deploy/kubernetes/base/hudi-keeper.toml",
        "deploy/kubernetes/overlays/production/hudi-keeper.toml",
        "deploy/kubernetes/examples/spark-driver-sidecar/hudi-keeper.toml",
    ] {
        Config::load(&root.join(f), true).unwrap_or_else(|e| panic!("{f}: {e:#}"));
    }
}

#[test]
fn a_zookeeper_lock_key_defaults_to_the_tables_hoodie_name_not_its_registered_name() {
    let c = parse(
        "[defaults.lock]\nprovider = \"zookeeper\"\nzookeeper_url = \"127.0.0.1:2181\"\nzookeeper_base_path = \"/hudi/locks\"\n[[tables]]\nname = \"orders-api\"\nuri = \"/a\"\n[[tables]]\nname = \"b\"\nuri = \"/b\"\n[tables.lock]\nprovider = \"zookeeper\"\nzookeeper_url = \"127.0.0.1:2181\"\nzookeeper_base_path = \"/hudi/locks\"\nzookeeper_lock_key = \"orders\"\n",
    )
    .unwrap();
    let key = |i: usize| match c.defaults.resolve(&c.tables[i]).unwrap().lock {
        Some(LockOptions {
            provider: LockProvider::ZooKeeper(z),
            ..
        }) => z.lock_key,
        other => panic!("{other:?}"),
    };
    // Empty: the table's hoodie.table.name when the lock is taken (LockOptions::for_table).
    assert_eq!(key(0), "");
    assert_eq!(key(1), "orders");
}

#[test]
fn a_bare_file_system_lock_expiry_is_minutes_as_in_hudi() {
    let c = parse(
        "[defaults.lock]\nprovider = \"filesystem\"\nfilesystem_expire = 10\n[[tables]]\nname = \"a\"\nuri = \"/a\"\n[[tables]]\nname = \"b\"\nuri = \"/b\"\n[tables.lock]\nprovider = \"filesystem\"\nfilesystem_expire = \"10\"\n[[tables]]\nname = \"c\"\nuri = \"/c\"\n[tables.lock]\nprovider = \"filesystem\"\nfilesystem_expire = \"90s\"\n",
    )
    .unwrap();
    let expire = |i: usize| match c.defaults.resolve(&c.tables[i]).unwrap().lock {
        Some(LockOptions {
            provider: LockProvider::FileSystem { expire, .. },
            ..
        }) => expire,
        other => panic!("{other:?}"),
    };
    assert_eq!(expire(0), Duration::from_secs(600));
    assert_eq!(expire(1), Duration::from_secs(600));
    assert_eq!(expire(2), Duration::from_secs(90));
    // What the registry persists reads back the same.
    let lock = LockSettings {
        filesystem_expire: Duration::from_secs(600),
        ..Default::default()
    };
    let back: LockSettings = serde_json::from_str(&serde_json::to_string(&lock).unwrap()).unwrap();
    assert_eq!(back.filesystem_expire, Duration::from_secs(600));
}

#[test]
fn a_table_entry_reads_and_writes_its_overrides_flat() {
    let body = serde_json::json!({
        "name": "t",
        "uri": "/t",
        "poll_interval": "2000ms",
        "failed_writes_policy": "eager",
        "heartbeat_interval": "30000ms",
        "heartbeat_tolerable_misses": 3,
        "min_instant_age": "60000ms",
        "clock_skew_margin": "1000ms",
        "assume_lazy_writers": true,
        "max_write_duration": "3600000ms",
        "storage_options": {"aws_region": "eu-west-1"},
    });
    let entry: TableEntry = serde_json::from_value(body.clone()).unwrap();
    assert_eq!(serde_json::to_value(&entry).unwrap(), body);
    let defaults = Defaults {
        lock: Box::new(LockSettings {
            provider: Some("none".into()),
            ..Default::default()
        }),
        ..Default::default()
    };
    let settings = defaults.resolve(&entry).unwrap();
    assert_eq!(settings.lock_provider, "none");
    assert_eq!(settings.poll_interval_ms, 2000);
    assert_eq!(settings.heartbeat.tolerable_misses, 3);
    assert_eq!(settings.max_write_duration_ms, Some(3_600_000));
    // Unset overrides are left out; `null` unsets a plain one, not a duration.
    let bare: TableEntry = serde_json::from_value(serde_json::json!({
        "name": "t", "uri": "/t", "failed_writes_policy": null, "lock": null
    }))
    .unwrap();
    assert_eq!(
        serde_json::to_value(&bare).unwrap(),
        serde_json::json!({"name": "t", "uri": "/t"})
    );
    assert!(serde_json::from_value::<TableEntry>(
        serde_json::json!({"name": "t", "uri": "/t", "poll_interval": null})
    )
    .is_err());
    let err = serde_json::from_value::<TableEntry>(
        serde_json::json!({"name": "t", "uri": "/t", "pol_interval": "1s"}),
    )
    .unwrap_err();
    assert!(err.to_string().contains("`pol_interval`"), "{err}");
}

#[test]
fn the_audit_runs_daily_by_default_and_a_table_may_change_or_switch_it_off() {
    let c = parse(
        r#"
[server]
max_concurrent_audits = 2
[defaults]
audit_max_requests = 5000
[defaults.lock]
provider = "filesystem"
[[tables]]
name = "a"
uri = "/tmp/a"
[[tables]]
name = "b"
uri = "/tmp/b"
audit_interval = "6h"
audit_max_requests = 20
[[tables]]
name = "c"
uri = "/tmp/c"
audit_interval = 0
"#,
    )
    .unwrap();
    assert_eq!(c.server.max_concurrent_audits, 2);
    let s = |i: usize| c.defaults.resolve(&c.tables[i]).unwrap();
    assert_eq!(s(0).audit_interval_ms, Some(24 * 3_600_000));
    assert_eq!(s(0).audit_max_requests, 5000);
    assert_eq!(s(1).audit_interval_ms, Some(6 * 3_600_000));
    assert_eq!(s(1).audit_max_requests, 20);
    assert_eq!(s(2).audit_interval_ms, None, "0 switches it off");
    let plain = Config::default();
    assert_eq!(plain.server.max_concurrent_audits, 1);
    assert_eq!(plain.server.audit_timeout, Duration::from_secs(3600));
    assert_eq!(plain.defaults.audit_max_requests, 100_000);
    for (toml, key) in [
        ("[server]\nmax_concurrent_audits = 0\n", "max_concurrent_audits"),
        ("[server]\naudit_timeout = 0\n", "audit_timeout must be positive"),
        ("[defaults]\naudit_interval = \"500ms\"\n[[tables]]\nname = \"t\"\nuri = \"/t\"\nfailed_writes_policy = \"observe\"\n", "audit_interval must be at least 1s"),
        ("[[tables]]\nname = \"t\"\nuri = \"/t\"\nfailed_writes_policy = \"observe\"\naudit_max_requests = 0\n", "audit_max_requests must be positive"),
    ] {
        let err = format!("{:#}", parse(toml).unwrap_err());
        assert!(err.contains(key), "{toml}: {err}");
    }
}

#[test]
fn a_table_may_override_its_deletes_in_flight_and_the_listing_cross_check() {
    let c = parse(
        r#"
[defaults]
delete_concurrency = 32
[defaults.lock]
provider = "none"
[[tables]]
name = "a"
uri = "/tmp/a"
[[tables]]
name = "b"
uri = "/tmp/b"
delete_concurrency = 4
listing_cross_check = false
"#,
    )
    .unwrap();
    let a = c.defaults.resolve(&c.tables[0]).unwrap();
    let b = c.defaults.resolve(&c.tables[1]).unwrap();
    assert_eq!((a.delete_concurrency, a.listing_cross_check), (32, true));
    assert_eq!((b.delete_concurrency, b.listing_cross_check), (4, false));
    let err = parse(
        "[defaults.lock]\nprovider = \"none\"\n[[tables]]\nname = \"z\"\nuri = \"/tmp/z\"\ndelete_concurrency = 0\n",
    )
    .unwrap_err();
    let err = format!("{err:#}");
    assert!(
        err.contains("table `z`") && err.contains("delete_concurrency"),
        "{err}"
    );
}

/// The keys of the `[defaults]` table in docs/operations.md (`lock.*` rows as `lock`).
fn documented_default_keys() -> std::collections::BTreeSet<String> {
    let docs = std::fs::read_to_string(
        Path::new(env!("CARGO_MANIFEST_DIR")).join("../../docs/operations.md"),
    )
    .unwrap();
    let section = docs
        .split("### `[defaults]` and per-table overrides")
        .nth(1)
        .unwrap();
    let section = section.split("\n### ").next().unwrap();
    section
        .lines()
        .filter_map(|l| l.strip_prefix("| `"))
        .map(|l| l.split('`').next().unwrap())
        .filter(|k| *k != "key")
        .map(|k| k.split('.').next().unwrap().to_string())
        .collect()
}

#[test]
fn every_defaults_key_is_accepted_on_a_table_and_the_docs_list_exactly_them() {
    let defaults = serde_json::to_value(Defaults::default()).unwrap();
    let keys: std::collections::BTreeSet<String> =
        defaults.as_object().unwrap().keys().cloned().collect();
    assert_eq!(
        documented_default_keys(),
        keys,
        "docs/operations.md's [defaults] table"
    );
    for key in &keys {
        let value = match key.as_str() {
            "lock" => serde_json::json!({"provider": "none"}),
            "max_write_duration" => serde_json::json!("1h"),
            _ => defaults[key].clone(),
        };
        let entry = serde_json::json!({"name": "t", "uri": "/t", key.as_str(): value});
        if let Err(e) = serde_json::from_value::<TableEntry>(entry) {
            panic!("[[tables]] does not accept `{key}`: {e}");
        }
    }
}
