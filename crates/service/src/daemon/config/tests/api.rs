use std::collections::BTreeMap;

use super::super::api::check_api_storage_options;
use super::*;

fn loc(uri: &str) -> Location {
    Location::parse(uri).unwrap_or_else(|e| panic!("{uri}: {e}"))
}

#[test]
fn a_location_compares_scheme_bucket_and_whole_segments() {
    let prefix = loc("s3://b/t");
    assert!(loc("s3://b/t").is_under(&prefix));
    assert!(loc("s3://b/t/").is_under(&prefix));
    assert!(loc("s3://b/t/x/y").is_under(&prefix));
    assert!(loc("s3a://b/t//x").is_under(&prefix));
    assert!(!loc("s3://b/t2").is_under(&prefix));
    assert!(!loc("s3://b/").is_under(&prefix));
    assert!(!loc("s3://c/t/x").is_under(&prefix));
    assert!(!loc("gs://b/t/x").is_under(&prefix));
    // Literal text, as the store reads it.
    assert!(!loc("s3://b/%74/x").is_under(&prefix));
    assert!(loc("s3://b/t/%2e%2e/x").is_under(&prefix));
    assert!(loc("s3://b/").is_under(&loc("s3://b")));
    // Local paths, however spelled.
    let local = loc("/data/tables/");
    for p in [
        "/data/tables/t",
        "file:///data/tables/t",
        "file:/data/tables/t",
        "file://localhost/data/tables/t",
    ] {
        assert!(loc(p).is_under(&local), "{p}");
    }
    assert!(!loc("/data/tables2/t").is_under(&local));
    assert!(loc("abfss://c@acct.dfs.core.windows.net/t/x")
        .is_under(&loc("abfss://c@acct.dfs.core.windows.net/t")));
    for bad in [
        "",
        "relative/t",
        "/data/../etc",
        "/data/./t",
        "s3://b/t/../u",
        "file:relative",
        "s3://user@b/t",
        "s3://b:9000/t",
        "s3:///t",
        "s3://b?x/t",
    ] {
        assert!(Location::parse(bad).is_err(), "{bad}");
    }
}

#[test]
fn a_location_of_a_table_resolves_local_paths() {
    let dir = tempfile::tempdir().unwrap();
    let real = std::fs::canonicalize(dir.path()).unwrap();
    std::fs::create_dir_all(real.join("t")).unwrap();
    std::fs::create_dir_all(real.join("x")).unwrap();
    std::os::unix::fs::symlink(real.join("t"), real.join("link")).unwrap();
    let t = Location::of_table(real.join("t").to_str().unwrap()).unwrap();
    assert_eq!(
        Location::of_table(real.join("link").to_str().unwrap()),
        Some(t.clone())
    );
    assert_eq!(
        Location::of_table(&format!("file://{}/x/../t/", real.display())),
        Some(t)
    );
    // Below a link, where nothing exists yet: where it will be.
    assert_eq!(
        Location::of_table(real.join("link/missing").to_str().unwrap()),
        Location::of_table(real.join("t/missing").to_str().unwrap())
    );
    assert!(Location::of_table("relative/missing").is_some());
    assert_eq!(Location::of_table("s3://b/t"), Some(loc("s3://b/t/")));
}

#[test]
fn api_storage_options_are_an_allow_list_with_checked_values() {
    let check = |k: &str, v: &str| {
        check_api_storage_options(&BTreeMap::from([(k.to_string(), v.to_string())]))
    };
    for (k, v) in [
        ("aws_region", "eu-west-1"),
        ("aws_default_region", "us-gov-west-1"),
        ("aws_unsigned_payload", "true"),
        ("aws_checksum_algorithm", "SHA256"),
        ("aws_timeout", "30s"),
        ("google_connect_timeout", "500ms"),
        ("azure_timeout", "2m"),
    ] {
        check(k, v).unwrap_or_else(|e| panic!("{k}={v}: {e}"));
    }
    for (k, v) in [
        ("aws_region", "a.evil.com/"),
        ("aws_region", "EU-WEST-1"),
        ("aws_region", ""),
        ("aws_unsigned_payload", "yes"),
        ("aws_checksum_algorithm", "crc32"),
        ("aws_timeout", "30"),
        ("aws_timeout", "1h"),
        ("aws_timeout", "9999999999s"),
    ] {
        let e = check(k, v).unwrap_err();
        assert!(e.contains(k), "{e}");
    }
    for k in [
        "aws_endpoint",
        "aws_endpoint_url_sts",
        "aws_web_identity_token_file",
        "aws_allow_http",
        "region",
        "AWS_REGION",
        "",
    ] {
        let e = check(k, "x").unwrap_err();
        assert!(e.contains(&format!("`{k}`")), "{e}");
    }
}

#[test]
fn weaker_than_the_defaults_is_judged_key_by_key() {
    let c = parse(
        "[defaults]\nfailed_writes_policy = \"lazy\"\nmax_write_duration = \"6h\"\n[defaults.lock]\nprovider = \"filesystem\"\n",
    )
    .unwrap();
    let entry = |json: serde_json::Value| -> TableEntry {
        let mut v = serde_json::json!({"name": "t", "uri": "/t"});
        for (k, x) in json.as_object().unwrap() {
            v[k] = x.clone();
        }
        serde_json::from_value(v).unwrap()
    };
    let weaker = |json| c.defaults.weaker(&entry(json));
    assert!(weaker(serde_json::json!({})).is_empty());
    for same_or_stronger in [
        serde_json::json!({"failed_writes_policy": "lazy"}),
        serde_json::json!({"failed_writes_policy": "observe"}),
        serde_json::json!({"min_instant_age": "10m", "heartbeat_interval": "2m"}),
        serde_json::json!({"heartbeat_tolerable_misses": 5, "clock_skew_margin": "1m"}),
        serde_json::json!({"assume_lazy_writers": false, "max_write_duration": "12h"}),
        serde_json::json!({"lock": {"provider": "filesystem", "timeout": "1s"}}),
        serde_json::json!({"poll_interval": "1s"}),
    ] {
        assert!(
            weaker(same_or_stronger.clone()).is_empty(),
            "{same_or_stronger}"
        );
    }
    for (json, key) in [
        (
            serde_json::json!({"failed_writes_policy": "eager"}),
            "failed_writes_policy",
        ),
        (
            serde_json::json!({"min_instant_age": "9m"}),
            "min_instant_age",
        ),
        (
            serde_json::json!({"heartbeat_interval": "59s"}),
            "heartbeat_interval",
        ),
        (
            serde_json::json!({"clock_skew_margin": "1s"}),
            "clock_skew_margin",
        ),
        (
            serde_json::json!({"heartbeat_tolerable_misses": 1}),
            "heartbeat_tolerable_misses",
        ),
        (
            serde_json::json!({"assume_lazy_writers": true}),
            "assume_lazy_writers",
        ),
        (
            serde_json::json!({"max_write_duration": "5h"}),
            "max_write_duration",
        ),
        (serde_json::json!({"lock": {"provider": "none"}}), "lock"),
        (
            serde_json::json!({"lock": {"provider": "filesystem", "filesystem_expire": "10m"}}),
            "lock",
        ),
    ] {
        let w = weaker(json.clone());
        assert_eq!(w.len(), 1, "{json}: {w:?}");
        assert!(w[0].contains(key), "{json}: {w:?}");
    }
    // Eager defaults: lazy and observe are more cautious.
    let eager = parse(
        "[defaults]\nfailed_writes_policy = \"eager\"\n[defaults.lock]\nprovider = \"none\"\n",
    )
    .unwrap();
    assert!(eager
        .defaults
        .weaker(&entry(serde_json::json!({"failed_writes_policy": "lazy"})))
        .is_empty());
    // The leftover guard off by default: switching it on is weaker; off or on by default not.
    let guard_off = parse(
        "[defaults]\nleftover_guard_interval = \"0\"\n[defaults.lock]\nprovider = \"none\"\n",
    )
    .unwrap();
    let w = guard_off
        .defaults
        .weaker(&entry(serde_json::json!({"leftover_guard_interval": "1h"})));
    assert_eq!(w.len(), 1, "{w:?}");
    assert!(w[0].contains("leftover_guard_interval"), "{w:?}");
    assert!(weaker(serde_json::json!({"leftover_guard_interval": "0"})).is_empty());
    assert!(weaker(serde_json::json!({"leftover_guard_interval": "5m"})).is_empty());
    // No max_write_duration by default: setting one is weaker.
    let none = parse("[defaults.lock]\nprovider = \"none\"\n").unwrap();
    assert_eq!(
        none.defaults
            .weaker(&entry(serde_json::json!({"max_write_duration": "100d"})))
            .len(),
        1
    );
}

#[test]
fn the_api_may_register_only_under_the_allowed_prefixes() {
    let mut c = parse("[defaults]\nfailed_writes_policy = \"observe\"\n").unwrap();
    let entry = |uri: &str| TableEntry {
        name: "t".into(),
        uri: uri.into(),
        ..serde_json::from_str(r#"{"name": "x", "uri": "x"}"#).unwrap()
    };
    assert!(matches!(
        c.check_api_entry(&entry("s3://b/t/x")),
        Err(ApiRefusal::Forbidden(e)) if e.contains("allowed_table_uris")
    ));
    c.server.allowed_table_uris = vec!["s3://b/t/".into()];
    c.check_api_entry(&entry("s3://b/t/x")).unwrap();
    assert!(matches!(
        c.check_api_entry(&entry("s3://b/t2")),
        Err(ApiRefusal::Forbidden(_))
    ));
    assert!(matches!(
        c.check_api_entry(&entry("s3://b/t/../x")),
        Err(ApiRefusal::Invalid(_))
    ));
    assert!(matches!(
        c.check_api_entry(&entry("s3://b/t/x/.hoodie/metadata")),
        Err(ApiRefusal::Invalid(_))
    ));
    let err = parse("[server]\nallowed_table_uris = [\"s3://b/../x\"]\n").unwrap_err();
    assert!(format!("{err:#}").contains("allowed_table_uris"), "{err:#}");
    let err = parse("[server]\nmax_connections = 0\n").unwrap_err();
    assert!(format!("{err:#}").contains("max_connections"), "{err:#}");
}

/// A config allowing the API `allowed` (observe tables, so no lock is needed).
fn allowing(allowed: &[&str]) -> Config {
    let mut c = parse("[defaults]\nfailed_writes_policy = \"observe\"\n").unwrap();
    c.server.allowed_table_uris = allowed.iter().map(|a| a.to_string()).collect();
    c
}

fn api_entry(uri: &str) -> TableEntry {
    TableEntry {
        name: "t".into(),
        uri: uri.into(),
        ..serde_json::from_str(r#"{"name": "x", "uri": "x"}"#).unwrap()
    }
}

#[test]
fn a_local_path_is_judged_by_where_its_deepest_existing_folder_leads() {
    let dir = tempfile::tempdir().unwrap();
    let real = std::fs::canonicalize(dir.path()).unwrap();
    let (allowed, outside) = (real.join("allowed"), real.join("outside"));
    std::fs::create_dir_all(outside.join("t/.hoodie")).unwrap();
    std::fs::create_dir_all(allowed.join("t/.hoodie/metadata")).unwrap();
    // A link to a folder outside, and a link to a table's metadata table.
    std::os::unix::fs::symlink(&outside, allowed.join("out")).unwrap();
    std::os::unix::fs::symlink(allowed.join("t/.hoodie/metadata"), allowed.join("md")).unwrap();
    // A link to where nothing is yet.
    std::os::unix::fs::symlink(outside.join("later"), allowed.join("dangling")).unwrap();
    let c = allowing(&[&format!("{}/", allowed.display())]);
    let at = |p: &str| format!("{}/{p}", allowed.display());
    // Below a link, where the table does not exist yet: still outside.
    assert!(matches!(
        c.check_api_entry(&api_entry(&at("out/missing/t"))),
        Err(ApiRefusal::Forbidden(_))
    ));
    assert!(matches!(
        c.check_api_entry(&api_entry(&at("dangling"))),
        Err(ApiRefusal::Forbidden(_))
    ));
    // A link to a metadata table, or below it.
    for p in ["md", "md/x"] {
        assert!(
            matches!(
                c.check_api_entry(&api_entry(&at(p))),
                Err(ApiRefusal::Invalid(e)) if e.contains(".hoodie")
            ),
            "{p}"
        );
    }
    // A table not created yet, in a real folder inside: allowed.
    c.check_api_entry(&api_entry(&at("new/t"))).unwrap();
    c.check_api_entry(&api_entry(&at("t"))).unwrap();
}

#[test]
fn an_api_table_is_checked_again_where_it_leads_when_it_is_opened() {
    let dir = tempfile::tempdir().unwrap();
    let real = std::fs::canonicalize(dir.path()).unwrap();
    let (allowed, outside) = (real.join("allowed"), real.join("outside"));
    std::fs::create_dir_all(allowed.join("t")).unwrap();
    std::fs::create_dir_all(outside.join("u/.hoodie/metadata")).unwrap();
    let c = allowing(&[&format!("{}/", allowed.display())]);
    let t = format!("{}/t", allowed.display());
    c.check_api_entry(&api_entry(&t)).unwrap();
    c.check_table_location(&t, true).unwrap();
    // The folder swapped for a link out of the allowed prefix after the registration.
    std::fs::remove_dir(allowed.join("t")).unwrap();
    std::os::unix::fs::symlink(outside.join("u"), allowed.join("t")).unwrap();
    let err = c.check_table_location(&t, true).unwrap_err();
    assert!(err.contains("allowed_table_uris"), "{err}");
    // Or for a link to a metadata table inside.
    std::fs::create_dir_all(allowed.join("v/.hoodie/metadata")).unwrap();
    std::fs::remove_file(allowed.join("t")).unwrap();
    std::os::unix::fs::symlink(allowed.join("v/.hoodie/metadata"), allowed.join("t")).unwrap();
    let err = c.check_table_location(&t, true).unwrap_err();
    assert!(err.contains(".hoodie"), "{err}");
    // A config table is the operator's: never checked.
    c.check_table_location(&t, false).unwrap();
}

#[test]
fn a_bucket_is_allowed_only_as_written_in_the_prefix() {
    // The store addresses the bucket verbatim: `MyBucket` is another bucket.
    for (uri, prefix) in [
        ("s3://MyBucket/x", "s3://mybucket/"),
        ("s3a://MYBUCKET/x", "s3://mybucket/"),
        ("gs://MyBucket/x", "gs://mybucket/"),
        ("s3://mybucket/x", "s3://MyBucket/"),
    ] {
        assert!(!loc(uri).is_allowed_under(&loc(prefix)), "{uri}");
        assert!(
            matches!(
                allowing(&[prefix]).check_api_entry(&api_entry(uri)),
                Err(ApiRefusal::Forbidden(_))
            ),
            "{uri}"
        );
        // A second registration is still found however it is spelled.
        assert!(loc(uri).is_under(&loc(prefix)), "{uri}");
    }
    allowing(&["s3://mybucket/"])
        .check_api_entry(&api_entry("s3a://mybucket/x"))
        .unwrap();
}

#[test]
fn azure_spellings_of_one_container_are_one_location() {
    // The container alone, in the default account (object_store's reading of each scheme).
    let short = loc("az://c/t");
    for u in ["azure://c/t", "adl://c/t", "abfs://c/t", "abfss://c//t/"] {
        assert_eq!(loc(u), short, "{u}");
    }
    // The container in a named account, through its dfs or blob host.
    let full = loc("abfss://c@acct.dfs.core.windows.net/t");
    for u in [
        "abfs://c@acct.blob.core.windows.net/t",
        "az://c@ACCT.dfs.core.windows.net/t",
        "abfss://c@acct.blob.core.windows.net//t/",
    ] {
        assert_eq!(loc(u), full, "{u}");
    }
    // A second registration: the default account may be that one.
    assert!(full.is_under(&short) && short.is_under(&full));
    assert!(loc("abfss://c@acct.dfs.core.windows.net/t/p").is_under(&short));
    assert!(!loc("abfss://c@other.dfs.core.windows.net/t").is_under(&full));
    assert!(!loc("abfss://d@acct.dfs.core.windows.net/t").is_under(&short));
    // Allowed: the account exactly as the prefix names it (or the default account).
    let named = allowing(&["abfss://c@acct.dfs.core.windows.net/"]);
    named
        .check_api_entry(&api_entry("az://c@acct.blob.core.windows.net/t"))
        .unwrap();
    let default = allowing(&["az://c/"]);
    default.check_api_entry(&api_entry("abfss://c/t")).unwrap();
    for (c, uri) in [
        (&named, "az://c/t"),
        (&named, "abfss://c@other.dfs.core.windows.net/t"),
        (&default, "abfss://c@acct.dfs.core.windows.net/t"),
    ] {
        assert!(
            matches!(
                c.check_api_entry(&api_entry(uri)),
                Err(ApiRefusal::Forbidden(_))
            ),
            "{uri}"
        );
    }
    // What object_store would not read as a container (or reads as another service).
    for bad in [
        "adl://c@acct.dfs.core.windows.net/t",
        "azure://c@acct.dfs.core.windows.net/t",
        "az://c.x/t",
        "abfss://c@acct.dfs.fabric.microsoft.com/t",
        "abfss://c@acct.example.com/t",
        "abfss://c@a.b.dfs.core.windows.net/t",
        "abfss://@acct.dfs.core.windows.net/t",
        "abfss://c@/t",
        "abfss://c@x@acct.dfs.core.windows.net/t",
    ] {
        assert!(Location::parse(bad).is_err(), "{bad}");
    }
}

#[test]
fn table_names_must_be_url_and_label_safe() {
    assert!(valid_name("trips_v2.prod-1"));
    assert!(!valid_name("a/b"));
    assert!(!valid_name(""));
    assert!(!valid_name("a b"));
    // They would name the parent folder in URLs and state files.
    assert!(!valid_name("."));
    assert!(!valid_name(".."));
}

#[test]
fn a_control_character_in_a_table_uri_or_name_is_refused_without_being_echoed() {
    // A line break in a config file's table: a forged log line at every poll otherwise.
    for uri in [
        "/data/t\\n2030-01-01T00:00:00Z  INFO FORGED",
        "/data/t\\r",
        "/data/t\\u001b[2K",
        "/data/t\\u0085",
    ] {
        let err = parse(&format!(
            "[defaults]\nfailed_writes_policy = \"observe\"\n[[tables]]\nname = \"t\"\nuri = \"{uri}\"\n"
        ))
        .unwrap_err();
        let msg = format!("{err:#}");
        assert!(msg.contains("control character"), "{msg}");
        assert!(!msg.chars().any(char::is_control), "{msg:?}");
    }
    // Through the API, the URI and the name alike.
    let c = allowing(&["/data/"]);
    let mut e = api_entry("/data/t\nFORGED");
    assert!(matches!(
        c.check_api_entry(&e),
        Err(ApiRefusal::Invalid(m)) if m.contains("control character") && !m.chars().any(char::is_control)
    ));
    e.uri = "/data/t".into();
    e.name = "t\nFORGED".into();
    assert!(matches!(
        c.check_api_entry(&e),
        Err(ApiRefusal::Invalid(m)) if m.contains("control character") && !m.chars().any(char::is_control)
    ));
}

#[test]
fn an_api_table_is_polled_at_most_once_a_second() {
    let c = allowing(&["/data/"]);
    for every in ["100ms", "999ms"] {
        let e: TableEntry = serde_json::from_value(serde_json::json!(
            {"name": "t", "uri": "/data/t", "poll_interval": every}
        ))
        .unwrap();
        assert!(
            matches!(c.check_api_entry(&e), Err(ApiRefusal::Invalid(m)) if m.contains("poll_interval")),
            "{every}"
        );
    }
    let e: TableEntry = serde_json::from_value(serde_json::json!(
        {"name": "t", "uri": "/data/t", "poll_interval": "1s"}
    ))
    .unwrap();
    c.check_api_entry(&e).unwrap();
    // The config file's tables may poll faster (the operator's choice).
    parse("[defaults]\nfailed_writes_policy = \"observe\"\npoll_interval = \"100ms\"\n").unwrap();
}

/// The table `t` at `/data/t` with the keys of `extra`.
fn entry(extra: serde_json::Value) -> TableEntry {
    let mut v = serde_json::json!({"name": "t", "uri": "/data/t"});
    for (k, x) in extra.as_object().unwrap() {
        v[k] = x.clone();
    }
    serde_json::from_value(v).unwrap()
}

#[test]
fn an_api_table_is_audited_at_most_hourly_within_the_default_request_budget() {
    let c = allowing(&["/data/"]);
    let e = entry(serde_json::json!({"audit_interval": "59m"}));
    assert!(
        matches!(c.check_api_entry(&e), Err(ApiRefusal::Invalid(m)) if m.contains("audit_interval")),
    );
    let e = entry(serde_json::json!({"audit_max_requests": 100_001}));
    assert!(
        matches!(c.check_api_entry(&e), Err(ApiRefusal::Forbidden(m)) if m.contains("audit_max_requests")),
    );
    for ok in [
        serde_json::json!({"audit_interval": "1h", "audit_max_requests": 100_000}),
        serde_json::json!({"audit_interval": "0s", "audit_max_requests": 10}),
    ] {
        c.check_api_entry(&entry(ok.clone()))
            .unwrap_or_else(|e| panic!("{ok}: {e:?}"));
    }
}

#[test]
fn an_api_table_has_at_most_the_default_deletes_in_flight() {
    let c = allowing(&["/data/"]);
    let e = entry(serde_json::json!({"delete_concurrency": 65}));
    assert!(
        matches!(c.check_api_entry(&e), Err(ApiRefusal::Forbidden(m)) if m.contains("delete_concurrency 65")),
    );
    for ok in [
        serde_json::json!({"delete_concurrency": 64, "listing_cross_check": true}),
        serde_json::json!({"delete_concurrency": 1, "listing_cross_check": false}),
    ] {
        c.check_api_entry(&entry(ok.clone()))
            .unwrap_or_else(|e| panic!("{ok}: {e:?}"));
    }
}

#[test]
fn the_folders_a_table_around_an_api_table_would_be_in_stop_at_the_allowed_prefix() {
    let c = allowing(&["s3://b/tables/", "s3://b/tables/deep/", "az://c/"]);
    assert_eq!(
        c.enclosing_folders("s3a://b/tables/deep/t/dt=1"),
        Some(EnclosingFolders::Store {
            store: "s3a://b".into(),
            folders: vec![
                "tables".into(),
                "tables/deep".into(),
                "tables/deep/t".into()
            ],
        })
    );
    assert_eq!(
        c.enclosing_folders("az://c/t"),
        Some(EnclosingFolders::Store {
            store: "az://c".into(),
            folders: vec!["".into()],
        })
    );
    assert_eq!(c.enclosing_folders("s3://other/tables/t"), None);
    let dir = tempfile::tempdir().unwrap();
    let real = std::fs::canonicalize(dir.path()).unwrap();
    std::fs::create_dir_all(real.join("allowed/t/p")).unwrap();
    std::os::unix::fs::symlink(real.join("allowed/t/p"), real.join("allowed/link")).unwrap();
    let c = allowing(&[real.join("allowed").to_str().unwrap()]);
    // Where a link leads.
    assert_eq!(
        c.enclosing_folders(real.join("allowed/link/x").to_str().unwrap()),
        Some(EnclosingFolders::Local(vec![
            real.join("allowed"),
            real.join("allowed/t"),
            real.join("allowed/t/p"),
        ]))
    );
}

#[test]
fn api_registrations_are_capped_by_default() {
    let server = |toml: &str| serde_json::to_value(parse(toml).unwrap().server).unwrap();
    assert_eq!(server("")["max_api_tables"], 1000);
    // None at all: the API registers no table, whatever it may register where.
    assert_eq!(
        server("[server]\nmax_api_tables = 0\n")["max_api_tables"],
        0
    );
}
