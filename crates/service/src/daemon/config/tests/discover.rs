//! `[[discover]]`: what a source may be, and how its defaults resolve.

use super::*;

/// Why `toml` is refused (with a lock decision in `[defaults]` unless it makes one).
fn err(toml: &str) -> String {
    let toml = match toml.contains("[defaults.lock]") {
        true => toml.to_string(),
        false => format!("[defaults.lock]\nprovider = \"filesystem\"\n{toml}"),
    };
    format!("{:#}", parse(&toml).expect_err("refused"))
}

#[test]
fn a_source_gets_its_defaults_over_the_config_defaults() {
    let c = parse(
        r#"
[defaults]
poll_interval = "10s"
[defaults.lock]
provider = "filesystem"
[[discover]]
name = "lake"
prefix = "s3://bucket/warehouse"
interval = "2m"
exclude_names = ["tmp_*"]
[discover.defaults]
failed_writes_policy = "observe"
[discover.storage_options]
aws_region = "eu-west-1"
"#,
    )
    .unwrap();
    let d = &c.discover[0];
    assert_eq!(d.interval, Duration::from_secs(120));
    assert_eq!(d.max_requests, 100_000);
    let entry = d.defaults.entry(
        "t".into(),
        "s3://bucket/warehouse/t".into(),
        d.storage_options.clone(),
    );
    let s = c.defaults.resolve(&entry).unwrap();
    assert_eq!(s.poll_interval_ms, 10_000);
    assert_eq!(s.failed_writes_policy, PolicySetting::Observe);
    assert_eq!(
        s.storage_options.0.get("aws_region").map(String::as_str),
        Some("eu-west-1")
    );
}

#[test]
fn sources_are_checked_at_start() {
    let two = "[[discover]]\nname = \"a\"\nprefix = \"/x\"\n[[discover]]\nname = \"a\"\nprefix = \"/y\"\n";
    assert!(err(two).contains("used twice"), "{}", err(two));
    let no_prefix = "[[discover]]\nname = \"a\"\n";
    assert!(err(no_prefix).contains("needs a prefix"));
    let glob = "[[discover]]\nname = \"a\"\nprefix = \"/x\"\ninclude_names = [\"[a\"]\n";
    assert!(err(glob).contains("include_names"), "{}", err(glob));
    let outside = "[server]\nallowed_table_uris = [\"s3://b/ok\"]\n[[discover]]\nname = \"a\"\nprefix = \"s3://b/other\"\n";
    assert!(
        err(outside).contains("allowed_table_uris"),
        "{}",
        err(outside)
    );
    // The bucket as written: the store addresses it so.
    let other_case = "[server]\nallowed_table_uris = [\"s3://b/ok\"]\n[[discover]]\nname = \"a\"\nprefix = \"s3://B/ok/wh\"\n";
    assert!(
        err(other_case).contains("allowed_table_uris"),
        "{}",
        err(other_case)
    );
    let inside = "[server]\nallowed_table_uris = [\"s3://b/ok\"]\n[defaults.lock]\nprovider = \"filesystem\"\n[[discover]]\nname = \"a\"\nprefix = \"s3://b/ok/wh\"\n";
    assert!(parse(inside).is_ok());
    let unknown = "[[discover]]\nname = \"a\"\nprefix = \"/x\"\n[discover.defaults]\npoll_intervall = \"1s\"\n";
    assert!(err(unknown).contains("poll_intervall"), "{}", err(unknown));
    let zero = "[[discover]]\nname = \"a\"\nprefix = \"/x\"\nmax_requests = 0\n";
    assert!(err(zero).contains("max_requests"));
    let shared = "[cluster]\nmode = \"static\"\nreplicas = 2\nreplica = 0\n[defaults.lock]\nprovider = \"none\"\n[[discover]]\nname = \"a\"\nprefix = \"/x\"\n";
    assert!(
        err(shared).contains("replicas sharing tables"),
        "{}",
        err(shared)
    );
}

#[test]
fn a_glue_source_needs_a_region_and_takes_no_prefix() {
    let ok = "[[discover]]\nname = \"g\"\nkind = \"glue\"\nregion = \"eu-west-1\"\ndatabases = [\"lake\"]\n";
    let c = parse(&format!("[defaults.lock]\nprovider = \"filesystem\"\n{ok}")).unwrap();
    assert_eq!(c.discover[0].target(), "glue://eu-west-1");
    let none = "[[discover]]\nname = \"g\"\nkind = \"glue\"\n";
    assert!(err(none).contains("needs a region"), "{}", err(none));
    let both = "[[discover]]\nname = \"g\"\nkind = \"glue\"\nregion = \"eu-west-1\"\nprefix = \"s3://b\"\n";
    assert!(err(both).contains("not prefix"), "{}", err(both));
    let misplaced = "[[discover]]\nname = \"p\"\nprefix = \"s3://b\"\nregion = \"eu-west-1\"\n";
    assert!(
        err(misplaced).contains("kind = \"glue\""),
        "{}",
        err(misplaced)
    );
}

#[test]
fn a_metastore_source_needs_a_thrift_uri() {
    let ok = "[[discover]]\nname = \"m\"\nkind = \"hive_metastore\"\nuri = \"thrift://hms:9083\"\n";
    let c = parse(&format!("[defaults.lock]\nprovider = \"filesystem\"\n{ok}")).unwrap();
    assert_eq!(c.discover[0].target(), "thrift://hms:9083");
    let bad = "[[discover]]\nname = \"m\"\nkind = \"hive_metastore\"\nuri = \"hms:9083\"\n";
    assert!(err(bad).contains("thrift://HOST:PORT"), "{}", err(bad));
    let prefix = "[[discover]]\nname = \"m\"\nkind = \"hive_metastore\"\nuri = \"thrift://h:1\"\nprefix = \"/x\"\n";
    assert!(err(prefix).contains("takes uri"), "{}", err(prefix));
    let misplaced = "[[discover]]\nname = \"p\"\nprefix = \"/x\"\nuri = \"thrift://h:1\"\n";
    assert!(
        err(misplaced).contains("hive_metastore"),
        "{}",
        err(misplaced)
    );
}
