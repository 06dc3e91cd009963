//! `hudi-keeper discover` end to end: the real binary on a local warehouse and on the
//! S3-compatible server; what it prints and its exit codes.

use hudi_keeper_test_support as common;

use common::{run, stderr, stdout};
use serde_json::Value;

fn table(root: &std::path::Path, rel: &str, name: &str) {
    let dir = root.join(rel).join(".hoodie");
    std::fs::create_dir_all(&dir).expect("mkdir");
    std::fs::write(
        dir.join("hoodie.properties"),
        format!("hoodie.table.name={name}\nhoodie.table.type=MERGE_ON_READ\n"),
    )
    .expect("write");
    let part = root.join(rel).join("dt=1");
    std::fs::create_dir_all(&part).expect("mkdir");
    std::fs::write(part.join("f.parquet"), "x").expect("write");
}

fn warehouse() -> tempfile::TempDir {
    let dir = tempfile::tempdir().expect("tempdir");
    table(dir.path(), "db1/orders", "orders");
    table(dir.path(), "db2/orders", "orders");
    table(dir.path(), "db2/users", "users");
    dir
}

/// `discover --json`'s tables as (name, URI, table type or `-`).
fn names_uris_types(v: &Value) -> Vec<(&str, &str, &str)> {
    v["tables"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| {
            (
                t["name"].as_str().unwrap(),
                t["uri"].as_str().unwrap(),
                t["table_type"].as_str().unwrap_or("-"),
            )
        })
        .collect()
}

#[test]
fn json_lists_the_tables_with_the_names_the_daemon_would_give() {
    let dir = warehouse();
    let prefix = dir.path().display().to_string();
    let out = run(&["discover", &prefix, "--json"]);
    assert!(out.status.success(), "{}", stderr(&out));
    let v: Value = serde_json::from_str(&stdout(&out)).expect("one JSON document");
    assert_eq!(v["complete"], true);
    let tables = v["tables"].as_array().expect("tables");
    let uris: Vec<&str> = tables.iter().map(|t| t["uri"].as_str().unwrap()).collect();
    assert_eq!(
        uris,
        vec![
            format!("{prefix}/db1/orders"),
            format!("{prefix}/db2/orders"),
            format!("{prefix}/db2/users")
        ]
    );
    // Two tables called `orders`: each gets its location's hash; `users` keeps its name.
    assert!(tables[0]["name"].as_str().unwrap().starts_with("orders-"));
    assert_ne!(tables[0]["name"], tables[1]["name"]);
    assert_eq!(tables[2]["name"], "users");
    assert_eq!(tables[2]["hudi_name"], "users");
    assert_eq!(tables[2]["table_type"], "MERGE_ON_READ");
    // 1 + 2 + 3 folders listed, 3 properties read.
    assert_eq!(v["folders_listed"], 6);
    assert_eq!(v["requests"], 9);
}

#[test]
fn text_output_filters_and_an_incomplete_scan_exits_3() {
    let dir = warehouse();
    let prefix = dir.path().display().to_string();
    let out = run(&["discover", &prefix, "--exclude-name", "orders"]);
    assert!(out.status.success(), "{}", stderr(&out));
    let text = stdout(&out);
    assert!(text.lines().next().unwrap().starts_with("NAME"), "{text}");
    assert!(
        text.contains(&format!("users  MERGE_ON_READ   {prefix}/db2/users")),
        "{text}"
    );
    assert!(!text.contains("/db1/orders"), "{text}");
    assert!(text.contains("1 tables under"), "{text}");
    assert!(text.contains("2 left out by filters"), "{text}");

    let out = run(&["discover", &prefix, "--max-requests", "3"]);
    assert_eq!(out.status.code(), Some(3), "{}", stderr(&out));
    assert!(stderr(&out).contains("incomplete"), "{}", stderr(&out));
    let out = run(&["discover", &prefix, "--max-requests", "3", "--json"]);
    assert_eq!(out.status.code(), Some(3));
    let v: Value = serde_json::from_str(&stdout(&out)).expect("JSON");
    assert_eq!(
        (v["complete"].as_bool(), v["cut_short"].as_bool()),
        (Some(false), Some(true))
    );
    assert_eq!(v["requests"], 3);
}

#[test]
fn a_bad_glob_is_an_error_and_a_bad_flag_a_usage_error() {
    let dir = warehouse();
    let prefix = dir.path().display().to_string();
    let out = run(&["discover", &prefix, "--include-name", "[x"]);
    assert_eq!(out.status.code(), Some(1));
    assert!(stderr(&out).contains("include_names"), "{}", stderr(&out));
    let out = run(&["discover", &prefix, "--max-requests", "many"]);
    assert_eq!(out.status.code(), Some(2));
}

#[test]
fn finds_tables_on_the_s3_compatible_server() {
    use object_store::ObjectStoreExt;
    let rt = tokio::runtime::Runtime::new().expect("runtime");
    let store = common::s3::s3_store();
    let base = common::s3::unique("discover-cli");
    rt.block_on(async {
        for (rel, name) in [("a/t1", "t1"), ("a/t2", "t2"), ("b/c/t3", "t3")] {
            let key =
                object_store::path::Path::from(format!("{base}/{rel}/.hoodie/hoodie.properties"));
            let body = format!("hoodie.table.name={name}\n");
            store.put(&key, body.into()).await.expect("put");
            let data = object_store::path::Path::from(format!("{base}/{rel}/p=1/f.parquet"));
            store.put(&data, "x".into()).await.expect("put");
        }
    });
    let prefix = format!("s3://{}/{base}", common::s3::BUCKET);
    let mut args = vec!["discover".to_string(), prefix.clone(), "--json".into()];
    args.extend(common::s3::cli_options());
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    let out = run(&args);
    assert!(out.status.success(), "{}", stderr(&out));
    let v: Value = serde_json::from_str(&stdout(&out)).expect("JSON");
    let names: Vec<&str> = v["tables"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t["name"].as_str().unwrap())
        .collect();
    assert_eq!(names, vec!["t1", "t2", "t3"]);
    // prefix, a, b, c, t1, t2, t3 listed; 3 reads.
    assert_eq!(v["requests"], 7 + 3);
}

#[test]
fn finds_the_hudi_tables_of_a_glue_catalog_once_per_location() {
    use common::glue;
    let db = glue::database("cli");
    let other = glue::database("cli-other");
    glue::mor_table(&db, "events", "s3://lake/events");
    glue::cow_table(&db, "orders", "s3://lake/orders/");
    glue::parquet_table(&db, "raw", "s3://lake/raw");
    glue::cow_table(&other, "elsewhere", "s3://lake/elsewhere");
    let endpoint = common::s3::endpoint();
    let args = [
        "discover",
        "glue://us-east-1",
        "--glue-endpoint",
        &endpoint,
        "--glue-database",
        &db,
        "--storage-option",
        "aws_access_key_id=test",
        "--storage-option",
        "aws_secret_access_key=test",
        "--json",
    ];
    let out = run(&args);
    assert!(out.status.success(), "{}", stderr(&out));
    let v: Value = serde_json::from_str(&stdout(&out)).expect("JSON");
    assert_eq!(v["kind"], "glue");
    let tables = names_uris_types(&v);
    // events_ro and events_rt are one table; raw is no Hudi table; the other database is not read.
    assert_eq!(
        tables,
        vec![
            ("events", "s3://lake/events", "MERGE_ON_READ"),
            ("orders", "s3://lake/orders", "-")
        ]
    );
    // One GetTables page (no GetDatabases: the database was named).
    assert_eq!(v["requests"], 1);
}

#[test]
fn finds_the_hudi_tables_of_a_hive_metastore_once_per_location() {
    use common::hms;
    // Local locations: the metastore checks a table's file system, and has no S3 one.
    let lake = tempfile::tempdir().unwrap();
    let at = |t: &str| lake.path().join(t).display().to_string();
    let db = hms::database("cli");
    hms::register(&db, "events", &at("events"), "mor");
    hms::register(&db, "orders", &at("orders"), "cow");
    hms::register(&db, "raw", &at("raw"), "parquet");
    let uri = hms::uri();
    let out = run(&["discover", &uri, "--database", &db, "--json"]);
    assert!(out.status.success(), "{}", stderr(&out));
    let v: Value = serde_json::from_str(&stdout(&out)).expect("JSON");
    assert_eq!(v["kind"], "hive_metastore");
    let tables = names_uris_types(&v);
    let (events, orders) = (
        format!("file:{}", at("events")),
        format!("file:{}", at("orders")),
    );
    assert_eq!(
        tables,
        vec![
            ("events", events.as_str(), "MERGE_ON_READ"),
            ("orders", orders.as_str(), "-")
        ]
    );
    // get_all_tables, then one get_table_objects_by_name_req for the 4 entries.
    assert_eq!(v["requests"], 2);
    // A metastore that does not answer: the scan cannot start (exit 1).
    let out = run(&["discover", "thrift://127.0.0.1:1", "--json"]);
    assert_eq!(out.status.code(), Some(1), "{}", stderr(&out));
}
