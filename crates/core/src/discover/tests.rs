//! The planner's rules, each on a made-up tree answered in memory (no storage).

use std::collections::BTreeMap;

use bytes::Bytes;

use super::*;
use crate::storage::RelPath;

/// A tree of folders: each folder's sub-folders, and the `hoodie.properties` of some.
#[derive(Default)]
struct Tree {
    dirs: BTreeMap<String, Vec<String>>,
    props: BTreeMap<String, String>,
    backups: BTreeMap<String, String>,
    failing: Vec<String>,
}

impl Tree {
    fn folder(mut self, path: &str, subs: &[&str]) -> Self {
        self.dirs
            .insert(path.into(), subs.iter().map(|s| s.to_string()).collect());
        self
    }
    fn table(mut self, path: &str, name: &str) -> Self {
        self.props.insert(
            path.into(),
            format!("hoodie.table.name={name}\nhoodie.table.type=MERGE_ON_READ\n"),
        );
        self
    }
}

/// Run the planner over `tree`, one step at a time; the steps in the order made.
fn run(
    tree: &Tree,
    prefix: &str,
    limits: ScanLimits,
    filters: &FilterSettings,
) -> (ScanReport, Vec<Step>) {
    let filters = Filters::compile(prefix, filters).expect("globs compile");
    let mut p = ScanPlanner::new(prefix, limits, filters).expect("planner");
    let mut steps = Vec::new();
    while let Some(step) = p.next_step() {
        steps.push(step.clone());
        match step {
            Step::List { folder, depth } => {
                let key = folder.as_str().to_string();
                let answer = if tree.failing.contains(&key) {
                    Err("store down".to_string())
                } else {
                    Ok(tree.dirs.get(&key).cloned().unwrap_or_default())
                };
                p.listed(&folder, depth, answer)
            }
            Step::ReadProperties { folder, backup } => {
                let map = if backup { &tree.backups } else { &tree.props };
                let got = map.get(folder.as_str()).map(|t| Bytes::from(t.clone()));
                p.read(&folder, backup, Ok(got))
            }
        }
    }
    assert!(p.is_done());
    (p.finish(), steps)
}

fn names(r: &ScanReport) -> Vec<(&str, &str)> {
    r.tables
        .iter()
        .map(|t| (t.location.as_str(), t.name.as_str()))
        .collect()
}

fn lists(steps: &[Step]) -> Vec<String> {
    steps
        .iter()
        .filter_map(|s| match s {
            Step::List { folder, .. } => Some(folder.as_str().to_string()),
            _ => None,
        })
        .collect()
}

fn warehouse() -> Tree {
    Tree::default()
        .folder("", &["db1", "db2", "t0"])
        .folder("db1", &["orders", "empty"])
        .folder("db1/orders", &[".hoodie", "dt=2024-01-01"])
        .table("db1/orders", "orders")
        .folder("db2", &["users"])
        .folder("db2/users", &[".hoodie"])
        .table("db2/users", "users")
        .folder("t0", &[".hoodie", "nested"])
        .table("t0", "t0")
}

#[test]
fn finds_each_table_once_and_never_lists_inside_one() {
    let (r, steps) = run(
        &warehouse(),
        "s3://b/wh/",
        ScanLimits::default(),
        &FilterSettings::default(),
    );
    assert_eq!(
        names(&r),
        vec![
            ("s3://b/wh/db1/orders", "orders"),
            ("s3://b/wh/db2/users", "users"),
            ("s3://b/wh/t0", "t0")
        ]
    );
    assert!(r.complete, "{r:?}");
    // Neither a table's partitions, nor its .hoodie, nor a folder below a table is listed.
    let listed = lists(&steps);
    assert_eq!(
        listed,
        vec![
            "",
            "db1",
            "db2",
            "t0",
            "db1/orders",
            "db1/empty",
            "db2/users"
        ]
    );
    assert!(listed
        .iter()
        .all(|f| !f.contains(".hoodie") && !f.contains("dt=") && !f.contains("nested")));
    // One listing per folder visited, one read per table.
    assert_eq!(r.requests, 7 + 3);
    assert_eq!(r.tables[0].table_type.as_deref(), Some("MERGE_ON_READ"));
}

#[test]
fn the_prefix_itself_may_be_a_table() {
    let tree = Tree::default()
        .folder("", &[".hoodie", "p"])
        .table("", "root");
    let (r, steps) = run(
        &tree,
        "/data/t",
        ScanLimits::default(),
        &FilterSettings::default(),
    );
    assert_eq!(names(&r), vec![("/data/t", "root")]);
    assert_eq!(lists(&steps), vec![""]);
}

#[test]
fn stops_at_the_depth_without_calling_the_scan_incomplete() {
    let limits = ScanLimits {
        max_depth: 1,
        ..ScanLimits::default()
    };
    let (r, steps) = run(
        &warehouse(),
        "s3://b/wh",
        limits,
        &FilterSettings::default(),
    );
    assert_eq!(names(&r), vec![("s3://b/wh/t0", "t0")]);
    assert_eq!(lists(&steps), vec!["", "db1", "db2", "t0"]);
    assert_eq!(r.beyond_depth, 3);
    assert!(r.complete);
}

#[test]
fn a_budget_cuts_the_scan_short_and_bounds_the_queue() {
    let subs: Vec<String> = (0..1000).map(|i| format!("t{i}")).collect();
    let subs: Vec<&str> = subs.iter().map(String::as_str).collect();
    let tree = Tree::default().folder("", &subs);
    let limits = ScanLimits {
        max_requests: 10,
        ..ScanLimits::default()
    };
    let filters = Filters::none();
    let mut p = ScanPlanner::new("s3://b", limits, filters).expect("planner");
    let root = p.next_step().expect("root");
    assert_eq!(
        root,
        Step::List {
            folder: RelPath::root(),
            depth: 0
        }
    );
    p.listed(&RelPath::root(), 0, Ok(tree.dirs[""].clone()));
    // 1 spent, 9 queued: never more steps queued than the budget has requests left.
    assert_eq!(p.progress().queued, 9);
    let (r, steps) = run(&tree, "s3://b", limits, &FilterSettings::default());
    assert_eq!(steps.len(), 10);
    assert_eq!(r.requests, 10);
    assert!(r.cut_short && !r.complete);
    // A budget just large enough completes.
    let enough = ScanLimits {
        max_requests: 1001,
        ..ScanLimits::default()
    };
    let (r, _) = run(&tree, "s3://b", enough, &FilterSettings::default());
    assert!(r.complete && !r.cut_short, "{r:?}");
}

#[test]
fn a_failed_listing_makes_the_scan_incomplete_but_keeps_what_was_found() {
    let mut tree = warehouse();
    tree.failing.push("db2".into());
    let (r, _) = run(
        &tree,
        "s3://b/wh",
        ScanLimits::default(),
        &FilterSettings::default(),
    );
    assert!(!r.complete && !r.cut_short);
    assert_eq!(r.problem_count, 1);
    assert_eq!(r.problems[0].location, "s3://b/wh/db2");
    assert_eq!(
        names(&r),
        vec![("s3://b/wh/db1/orders", "orders"), ("s3://b/wh/t0", "t0")]
    );
}

#[test]
fn a_hoodie_folder_without_properties_is_read_through_its_backup_or_left_alone() {
    let mut tree = Tree::default()
        .folder("", &["a", "b"])
        .folder("a", &[".hoodie", "p"])
        .folder("b", &[".hoodie", "p"]);
    tree.backups
        .insert("a".into(), "hoodie.table.name=from_backup\n".into());
    let (r, steps) = run(
        &tree,
        "/wh",
        ScanLimits::default(),
        &FilterSettings::default(),
    );
    assert_eq!(names(&r), vec![("/wh/a", "from_backup")]);
    assert_eq!(r.without_properties, 1);
    assert!(r.complete);
    // b is not a table, but it is not looked into either.
    assert!(!lists(&steps).iter().any(|f| f.starts_with("b/")));
}

#[test]
fn unreadable_properties_are_a_problem() {
    let mut tree = Tree::default().folder("", &["a"]).folder("a", &[".hoodie"]);
    tree.props.insert("a".into(), "bad=\\u12".into());
    let (r, _) = run(
        &tree,
        "/wh",
        ScanLimits::default(),
        &FilterSettings::default(),
    );
    assert!(r.tables.is_empty());
    assert!(!r.complete);
    assert!(r.problems[0].error.contains("hoodie.properties"), "{r:?}");
}

#[test]
fn globs_filter_names_and_locations_and_prune_excluded_folders() {
    let f = FilterSettings {
        exclude_locations: vec!["s3://b/wh/db2".into()],
        ..FilterSettings::default()
    };
    let (r, steps) = run(&warehouse(), "s3://b/wh", ScanLimits::default(), &f);
    assert_eq!(names(&r).len(), 2);
    assert!(
        !lists(&steps).iter().any(|l| l.starts_with("db2")),
        "excluded folder listed"
    );
    assert_eq!(r.folders_excluded, 1);

    let f = FilterSettings {
        include_names: vec!["o*".into(), "t?".into()],
        ..FilterSettings::default()
    };
    let (r, _) = run(&warehouse(), "s3://b/wh", ScanLimits::default(), &f);
    assert_eq!(
        names(&r),
        vec![("s3://b/wh/db1/orders", "orders"), ("s3://b/wh/t0", "t0")]
    );
    assert_eq!(r.filtered_out, 1);

    // `*` stays within a folder name, `**` crosses folders.
    let f = FilterSettings {
        include_locations: vec!["s3://b/wh/*".into()],
        exclude_names: vec!["t0".into()],
        ..FilterSettings::default()
    };
    let (r, _) = run(&warehouse(), "s3://b/wh", ScanLimits::default(), &f);
    assert!(r.tables.is_empty(), "{r:?}");
    let f = FilterSettings {
        include_locations: vec!["s3://b/wh/**/users".into()],
        ..FilterSettings::default()
    };
    let (r, _) = run(&warehouse(), "s3://b/wh", ScanLimits::default(), &f);
    assert_eq!(names(&r), vec![("s3://b/wh/db2/users", "users")]);
}

#[test]
fn a_bad_glob_or_no_budget_is_refused_before_the_scan() {
    let f = FilterSettings {
        include_names: vec!["[a".into()],
        ..FilterSettings::default()
    };
    let e = Filters::compile("s3://b", &f).expect_err("bad glob");
    assert!(e.to_string().contains("include_names"), "{e}");
    let limits = ScanLimits {
        max_requests: 0,
        ..ScanLimits::default()
    };
    assert!(ScanPlanner::new("s3://b", limits, Filters::none()).is_err());
}

/// On the local file system a scan finds a table only where it is: a symbolic link to a folder
/// is not followed (it could lead out of the prefix, or find a table twice), nor is a folder
/// whose `.hoodie` is a link taken for a table.
#[cfg(unix)]
#[tokio::test]
async fn a_local_scan_follows_no_symbolic_link() {
    use std::os::unix::fs::symlink;
    let tmp = tempfile::tempdir().unwrap();
    let (lake, outside) = (tmp.path().join("lake"), tmp.path().join("outside"));
    let table = |dir: &std::path::Path, name: &str| {
        std::fs::create_dir_all(dir.join(".hoodie")).unwrap();
        std::fs::write(
            dir.join(".hoodie/hoodie.properties"),
            format!("hoodie.table.name={name}\n"),
        )
        .unwrap();
    };
    table(&lake.join("db/t"), "t");
    table(&outside.join("u"), "u");
    std::fs::create_dir_all(lake.join("linked_meta")).unwrap();
    symlink(outside.join("u/.hoodie"), lake.join("linked_meta/.hoodie")).unwrap();
    symlink(&outside, lake.join("out")).unwrap();
    symlink(lake.join("db"), lake.join("again")).unwrap();
    let storage = crate::storage::Storage::open(
        lake.to_str().unwrap(),
        &crate::storage::StorageOptions::default(),
    )
    .unwrap();
    let prefix = lake.to_str().unwrap();
    let r = scan(&storage, prefix, &ScanOptions::default(), |_| {})
        .await
        .unwrap();
    let found: Vec<&str> = r.tables.iter().map(|t| t.location.as_str()).collect();
    assert_eq!(found, [format!("{prefix}/db/t")]);
    assert_eq!(r.links_skipped, 3);
    assert!(r.complete);
}
