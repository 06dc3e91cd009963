//! What a scan registers, through a daemon that is never started (no scan or poll of its own
//! runs): one registration per table whatever the spelling, nothing inside or around another
//! table, only under `server.allowed_table_uris` as written, names every replica derives alike,
//! and the API's precedence only once its registration is accepted.

use std::collections::BTreeMap;
use std::path::Path;
use std::sync::Arc;

use hudi_keeper_core::discover::{FoundTable, ScanReport};
use hudi_keeper_core::storage::RelPath;

use crate::daemon::config::{Config, TableEntry};
use crate::daemon::{Daemon, Source, TableError};

/// Two sources (`zero`, `one`; never scanned here) and `extra` (server keys first, then
/// `[[tables]]`, whose tables are registered as the config's).
async fn daemon(dir: &Path, server: &str, extra: &str) -> Arc<Daemon> {
    let path = dir.join("c.toml");
    let text = format!(
        "[server]\nstate_dir = \"{}\"\n{server}\n[defaults]\npoll_interval = \"1h\"\n\
         failed_writes_policy = \"observe\"\n{extra}\n\
         [[discover]]\nname = \"zero\"\nkind = \"glue\"\nregion = \"us-east-1\"\n\
         [[discover]]\nname = \"one\"\nkind = \"glue\"\nregion = \"us-east-1\"\n",
        dir.join("state").display()
    );
    std::fs::write(&path, text).unwrap();
    let d = Daemon::new(Config::load(&path, true).unwrap()).unwrap();
    let initial = std::mem::take(&mut *d.initial.lock().unwrap());
    for e in initial {
        d.add(e, Source::Config, None).await.unwrap();
    }
    d
}

/// A complete scan that found `tables` (`(hoodie.table.name, location)`).
fn report(tables: &[(&str, &str)]) -> ScanReport {
    let mut r = super::glue::empty_report("test");
    r.complete = true;
    r.tables = tables
        .iter()
        .map(|(name, location)| FoundTable {
            location: location.to_string(),
            path: RelPath::root(),
            name: name.to_string(),
            table_type: None,
        })
        .collect();
    r
}

async fn scan(d: &Arc<Daemon>, index: u16, tables: &[(&str, &str)]) {
    let source = d.config.discover[usize::from(index)].clone();
    d.apply(index, &source, &report(tables)).await;
}

/// The registered tables: URI → (name, source).
async fn registered(d: &Daemon) -> BTreeMap<String, (String, Source)> {
    d.tables()
        .await
        .iter()
        .map(|t| (t.entry.uri.clone(), (t.entry.name.to_string(), t.source)))
        .collect()
}

/// The registered tables' URIs → names.
async fn names(d: &Daemon) -> BTreeMap<String, String> {
    registered(d)
        .await
        .into_iter()
        .map(|(uri, (name, _))| (uri, name))
        .collect()
}

fn entry(name: &str, uri: &str) -> TableEntry {
    serde_json::from_value(serde_json::json!({"name": name, "uri": uri})).unwrap()
}

#[tokio::test]
async fn one_place_spelt_two_ways_in_one_scan_is_registered_once() {
    let dir = tempfile::tempdir().unwrap();
    let d = daemon(dir.path(), "", "").await;
    scan(
        &d,
        0,
        &[
            ("t", "s3://B/wh/t"),
            ("t", "s3://b/wh/t"),
            ("u", "az://c/wh/u"),
            ("u", "abfss://c@acct.dfs.core.windows.net/wh/u"),
        ],
    )
    .await;
    let r = registered(&d).await;
    assert_eq!(r.len(), 2, "{r:?}");
}

#[tokio::test]
async fn a_place_registered_otherwise_is_not_registered_again_under_another_spelling() {
    let dir = tempfile::tempdir().unwrap();
    let tables = "[[tables]]\nname = \"cfg\"\nuri = \"s3://b/wh/cfg\"\n";
    let d = daemon(dir.path(), "", tables).await;
    d.add(
        entry("api", "abfss://c@acct.dfs.core.windows.net/wh/api"),
        Source::Api,
        None,
    )
    .await
    .unwrap();
    scan(&d, 0, &[("cfg", "s3://B/wh/cfg"), ("api", "az://c/wh/api")]).await;
    let r = registered(&d).await;
    assert_eq!(r.len(), 2, "{r:?}");
}

#[tokio::test]
async fn a_table_inside_or_around_a_registered_one_is_not_registered() {
    let dir = tempfile::tempdir().unwrap();
    let tables = "[[tables]]\nname = \"cfg\"\nuri = \"s3://b/wh/cfg\"\n";
    let d = daemon(dir.path(), "", tables).await;
    d.add(entry("api", "s3://b/api"), Source::Api, None)
        .await
        .unwrap();
    scan(&d, 0, &[("zero", "s3://b/zero")]).await;
    let before = registered(&d).await;
    assert_eq!(before.len(), 3, "{before:?}");
    // Inside or around the config's, the API's, and the other source's table.
    scan(
        &d,
        1,
        &[
            ("inner", "s3://b/wh/cfg/inner"),
            ("around", "s3://b/wh"),
            ("in_api", "s3://B/api/x"),
            ("in_zero", "s3://b/zero/p=1"),
        ],
    )
    .await;
    assert_eq!(registered(&d).await, before);
}

#[tokio::test]
async fn a_hoodie_folder_is_never_registered() {
    let dir = tempfile::tempdir().unwrap();
    let d = daemon(dir.path(), "", "").await;
    scan(
        &d,
        0,
        &[
            ("t_metadata", "s3://b/wh/t/.hoodie/metadata"),
            ("odd", "s3://b/wh/.hoodie/x"),
        ],
    )
    .await;
    let r = registered(&d).await;
    assert!(r.is_empty(), "{r:?}");
}

#[tokio::test]
async fn of_nested_findings_of_one_scan_the_first_by_location_is_registered() {
    let dir = tempfile::tempdir().unwrap();
    let d = daemon(dir.path(), "", "").await;
    scan(
        &d,
        0,
        &[
            ("part", "s3://b/wh/t/p=1"),
            ("t", "s3://b/wh/t"),
            ("other", "s3://b/wh/u"),
        ],
    )
    .await;
    let r = names(&d).await;
    let uris: Vec<&str> = r.keys().map(String::as_str).collect();
    assert_eq!(uris, ["s3://b/wh/t", "s3://b/wh/u"], "{r:?}");
}

#[tokio::test]
async fn only_tables_under_the_allowed_prefixes_as_written_are_registered() {
    let dir = tempfile::tempdir().unwrap();
    let server =
        "allowed_table_uris = [\"s3://b/wh/\", \"abfss://c@acct.dfs.core.windows.net/wh/\"]";
    let d = daemon(dir.path(), server, "").await;
    scan(
        &d,
        0,
        &[
            ("upper", "s3://B/wh/upper"),
            ("default_account", "az://c/wh/default_account"),
            ("ok", "s3://b/wh/ok"),
        ],
    )
    .await;
    let r = names(&d).await;
    let uris: Vec<&str> = r.keys().map(String::as_str).collect();
    assert_eq!(uris, ["s3://b/wh/ok"], "{r:?}");
}

#[tokio::test]
async fn a_discovered_table_is_checked_against_the_allowed_prefixes_when_opened() {
    let dir = tempfile::tempdir().unwrap();
    let lake = dir.path().join("lake");
    let outside = dir.path().join("outside/t");
    std::fs::create_dir_all(&lake).unwrap();
    std::fs::create_dir_all(&outside).unwrap();
    let server = format!("allowed_table_uris = [\"{}\"]", lake.display());
    let d = daemon(dir.path(), &server, "").await;
    // Registered while it was a folder of the lake, a link out of it since.
    let at = lake.join("t");
    std::fs::create_dir_all(&at).unwrap();
    let uri = at.to_str().unwrap();
    let state = d
        .add(entry("t", uri), Source::Discovered(0), None)
        .await
        .unwrap();
    std::fs::remove_dir(&at).unwrap();
    std::os::unix::fs::symlink(&outside, &at).unwrap();
    match d.open(&state).await {
        Err(crate::daemon::error::PollError::Refused(e)) => {
            assert!(e.contains("allowed_table_uris"), "{e}")
        }
        other => panic!("opened: {:?}", other.map(|_| ())),
    }
}

#[tokio::test]
async fn a_catalog_entry_of_a_scheme_no_store_opens_is_skipped() {
    let dir = tempfile::tempdir().unwrap();
    let d = daemon(dir.path(), "", "").await;
    scan(&d, 0, &[("h", "hdfs://nn/wh/h"), ("g", "gs://b/wh/g")]).await;
    let r = names(&d).await;
    let uris: Vec<&str> = r.keys().map(String::as_str).collect();
    assert_eq!(uris, ["gs://b/wh/g"], "{r:?}");
}

#[tokio::test]
async fn names_do_not_depend_on_what_was_registered_before() {
    let (a, b) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
    let (one, two) = (
        &[("orders", "s3://b/db1/orders")][..],
        &[
            ("orders", "s3://b/db1/orders"),
            ("orders", "s3://b/db2/orders"),
        ][..],
    );
    // One replica saw one `orders` first, then two; another sees the two at once.
    let da = daemon(a.path(), "", "").await;
    scan(&da, 0, one).await;
    assert_eq!(names(&da).await["s3://b/db1/orders"], "orders");
    scan(&da, 0, two).await;
    let db = daemon(b.path(), "", "").await;
    scan(&db, 0, two).await;
    let (na, nb) = (names(&da).await, names(&db).await);
    assert_eq!(na, nb);
    assert!(na.values().all(|n| n.starts_with("orders-")), "{na:?}");
    // The second goes: the first takes its plain name again, on both.
    scan(&da, 0, one).await;
    scan(&da, 0, one).await;
    let c = tempfile::tempdir().unwrap();
    let db2 = daemon(c.path(), "", "").await;
    scan(&db2, 0, one).await;
    assert_eq!(names(&da).await, names(&db2).await);
}

#[tokio::test]
async fn names_do_not_depend_on_which_source_scanned_first() {
    let (a, b) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
    let one = &[("orders", "s3://b/one/orders"), ("same", "s3://b/same")][..];
    let zero_too = &[("orders", "s3://b/zero/orders"), ("same", "s3://B/same")][..];
    let da = daemon(a.path(), "", "").await;
    let db = daemon(b.path(), "", "").await;
    for _ in 0..2 {
        scan(&da, 0, zero_too).await;
        scan(&da, 1, one).await;
        scan(&db, 1, one).await;
        scan(&db, 0, zero_too).await;
    }
    let (ra, rb) = (registered(&da).await, registered(&db).await);
    let by_place = |r: &BTreeMap<String, (String, Source)>| {
        r.iter()
            .map(|(uri, (name, source))| (uri.to_ascii_lowercase(), (name.clone(), *source)))
            .collect::<BTreeMap<_, _>>()
    };
    assert_eq!(by_place(&ra), by_place(&rb));
    assert_eq!(ra.len(), 3, "{ra:?}");
}

#[tokio::test]
async fn a_name_a_config_table_has_is_hashed_and_one_an_api_table_has_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    let tables = "[[tables]]\nname = \"orders\"\nuri = \"s3://b/cfg/orders\"\n";
    let d = daemon(dir.path(), "", tables).await;
    d.add(entry("users", "s3://b/api/users"), Source::Api, None)
        .await
        .unwrap();
    scan(
        &d,
        0,
        &[("orders", "s3://b/wh/orders"), ("users", "s3://b/wh/users")],
    )
    .await;
    let r = names(&d).await;
    assert!(r["s3://b/wh/orders"].starts_with("orders-"), "{r:?}");
    assert!(!r.contains_key("s3://b/wh/users"), "{r:?}");
}

/// A daemon whose API may register under `lake`, with source `zero`'s tables observed only
/// where `[defaults]` would roll back.
async fn api_daemon(dir: &Path, lake: &Path, max_api_tables: usize) -> Arc<Daemon> {
    let server = format!(
        "allowed_table_uris = [\"{}\"]\nmax_api_tables = {max_api_tables}",
        lake.display()
    );
    let path = dir.join("c.toml");
    let text = format!(
        "[server]\nstate_dir = \"{}\"\n{server}\n[defaults]\npoll_interval = \"1h\"\n\
         [defaults.lock]\nprovider = \"filesystem\"\n\
         [[discover]]\nname = \"zero\"\nprefix = \"{}\"\ninterval = \"1h\"\n\
         [discover.defaults]\nfailed_writes_policy = \"observe\"\n",
        dir.join("state").display(),
        lake.display()
    );
    std::fs::write(&path, text).unwrap();
    Daemon::new(Config::load(&path, true).unwrap()).unwrap()
}

#[tokio::test]
async fn a_refused_api_registration_leaves_the_discovered_table_in_place() {
    let dir = tempfile::tempdir().unwrap();
    let lake = dir.path().join("lake");
    for t in ["t", "first"] {
        std::fs::create_dir_all(lake.join(t)).unwrap();
    }
    let d = api_daemon(dir.path(), &lake, 1).await;
    let t = lake.join("t");
    let t = t.to_str().unwrap();
    scan(&d, 0, &[("t", t)]).await;
    let before = registered(&d).await;
    assert_eq!(before.len(), 1, "{before:?}");
    // Weaker than the source's settings (lazy where the source observes).
    let weaker = d.register(entry("mine", t)).await;
    assert!(
        matches!(weaker, Err(TableError::Forbidden(_))),
        "{weaker:?}"
    );
    assert_eq!(registered(&d).await, before);
    // Over server.max_api_tables.
    let first = lake.join("first");
    let mut ok = entry("first", first.to_str().unwrap());
    ok.failed_writes_policy = Some(crate::daemon::config::PolicySetting::Observe);
    d.register(ok).await.unwrap();
    let mut full = entry("mine", t);
    full.failed_writes_policy = Some(crate::daemon::config::PolicySetting::Observe);
    let r = d.register(full.clone()).await;
    assert!(matches!(r, Err(TableError::Conflict(_))), "{r:?}");
    let now = registered(&d).await;
    assert_eq!(now.get(t), before.get(t), "{now:?}");
    // A name taken.
    full.name = "first".into();
    let r = d.register(full).await;
    assert!(matches!(r, Err(TableError::Conflict(_))), "{r:?}");
    assert_eq!(registered(&d).await.get(t), before.get(t));
}

#[tokio::test]
async fn an_accepted_api_registration_replaces_the_discovered_table() {
    let dir = tempfile::tempdir().unwrap();
    let lake = dir.path().join("lake");
    std::fs::create_dir_all(lake.join("t")).unwrap();
    let d = api_daemon(dir.path(), &lake, 10).await;
    let t = lake.join("t");
    scan(&d, 0, &[("t", t.to_str().unwrap())]).await;
    let mut e = entry("mine", &format!("file://{}", t.display()));
    e.failed_writes_policy = Some(crate::daemon::config::PolicySetting::Observe);
    d.register(e).await.unwrap();
    let r = registered(&d).await;
    assert_eq!(r.len(), 1, "{r:?}");
    let (name, source) = r.values().next().unwrap();
    assert_eq!((name.as_str(), *source), ("mine", Source::Api));
    // The source's next scans leave it to the API.
    scan(&d, 0, &[("t", t.to_str().unwrap())]).await;
    assert_eq!(registered(&d).await, r);
}

#[tokio::test]
async fn a_refused_registration_of_an_earlier_source_leaves_the_later_sources_table() {
    let dir = tempfile::tempdir().unwrap();
    let d = daemon(dir.path(), "", "").await;
    d.add(entry("taken", "s3://b/api/taken"), Source::Api, None)
        .await
        .unwrap();
    scan(&d, 1, &[("t", "s3://b/wh/t")]).await;
    let before = registered(&d).await;
    // The earlier source finds the same place under a name the API's table has: refused, so
    // the later source's table stays.
    scan(&d, 0, &[("taken", "s3://B/wh/t")]).await;
    assert_eq!(registered(&d).await, before);
    // Under a name of its own, it takes the place over.
    scan(&d, 0, &[("mine", "s3://B/wh/t")]).await;
    let r = registered(&d).await;
    assert_eq!(
        r.get("s3://B/wh/t"),
        Some(&("mine".to_string(), Source::Discovered(0)))
    );
    assert!(!r.contains_key("s3://b/wh/t"), "{r:?}");
    // The later source leaves it alone from then on.
    scan(&d, 1, &[("t", "s3://b/wh/t")]).await;
    assert_eq!(registered(&d).await, r);
}
