//! Never follow a link out of a table (issue #30, item 3): no delete or write goes through a
//! symbolic link below a local table's base path, nor into a table folder swapped for a link
//! after it was opened. Each is a refusal before the first change, naming the link, on the CLI
//! (rollback and restore, dry run included), in the executors (a folder swapped before or
//! while they run) and in the daemon (its cached table handle, its polls).

use hudi_keeper_test_support as common;

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use common::daemon::Daemon;
use common::fixtures::{build_local, Kind, T1, TF};
use common::http::request;
use common::{run, stderr};
use hudi_keeper_core::exec::restore::{preview_restore, restore, RestoreOptions};
use hudi_keeper_core::exec::rollback::{preview, rollback, RollbackOptions, Selection};
use hudi_keeper_core::protocol::detect::LazyWritersEvidence;
use hudi_keeper_core::storage::{
    Interceptor, OpKind, RelPath, Storage, StorageError, StorageOptions,
};
use hudi_keeper_core::{Error, Table};

const TOKEN: &str = "links-test-token-0123456789abcdef";

/// What a folder holds, links not followed: each file with its bytes, each link with what it
/// points to, each folder.
fn snapshot(dir: &Path) -> BTreeMap<String, String> {
    let mut out = BTreeMap::new();
    let mut stack = vec![dir.to_path_buf()];
    while let Some(d) = stack.pop() {
        for e in std::fs::read_dir(&d).unwrap_or_else(|e| panic!("{}: {e}", d.display())) {
            let e = e.expect("entry");
            let path = e.path();
            let rel = path.strip_prefix(dir).expect("below").display().to_string();
            let kind = e.file_type().expect("file type");
            let what = if kind.is_symlink() {
                format!(
                    "link to {}",
                    std::fs::read_link(&path).expect("link").display()
                )
            } else if kind.is_dir() {
                stack.push(path);
                "folder".to_string()
            } else {
                format!("{:?}", std::fs::read(&path).expect("read"))
            };
            out.insert(rel, what);
        }
    }
    out
}

/// Neither the table nor the folder outside it changed since their snapshots `before` and
/// `outside_before`.
fn assert_unchanged(
    table: &Path,
    before: &BTreeMap<String, String>,
    outside: &Path,
    outside_before: &BTreeMap<String, String>,
) {
    assert_eq!(&snapshot(table), before, "the table changed");
    assert_eq!(
        &snapshot(outside),
        outside_before,
        "the outside folder changed"
    );
}

/// A runtime, a canonical work folder and the fixture's copy-on-write table built in its
/// folder `rel`.
fn local_table(rel: &str) -> (tokio::runtime::Runtime, tempfile::TempDir, PathBuf, PathBuf) {
    let rt = tokio::runtime::Runtime::new().unwrap();
    let (tmp, w) = work();
    let table = w.join(rel);
    build_local(&rt, &table, Kind::CowV8);
    (rt, tmp, w, table)
}

/// A canonical work folder (temp folders may lie below a link themselves).
fn work() -> (tempfile::TempDir, PathBuf) {
    let tmp = tempfile::tempdir().expect("tempdir");
    let w = tmp.path().canonicalize().expect("canonical");
    (tmp, w)
}

/// Move `dir/partition` out of the table to `outside`, and leave a link to it in its place.
fn link_partition_out(table: &Path, partition: &str, outside: &Path) {
    std::fs::create_dir_all(outside.parent().expect("parent")).expect("mkdir");
    std::fs::rename(table.join(partition), outside).expect("move the partition out");
    std::os::unix::fs::symlink(outside, table.join(partition)).expect("link");
}

/// Swap the table folder `table` for a link to `to`; the real folder is kept at `<table>.orig`.
fn swap_for_link(table: &Path, to: &Path) -> PathBuf {
    let orig = table.with_extension("orig");
    std::fs::rename(table, &orig).expect("move the table away");
    std::os::unix::fs::symlink(to, table).expect("link");
    orig
}

fn rollback_cli(table: &Path, extra: &[&str]) -> std::process::Output {
    let uri = table.display().to_string();
    let mut args = vec!["rollback", uri.as_str(), "--assume-lazy-writers"];
    args.extend_from_slice(extra);
    run(&args)
}

/// A refusal on stderr that names `link` and says it is a symbolic link.
fn assert_refused_naming(out: &std::process::Output, link: &str) {
    let err = stderr(out);
    assert_eq!(out.status.code(), Some(1), "{err}");
    assert!(err.contains("symbolic link"), "{err}");
    assert!(err.contains(link), "does not name `{link}`: {err}");
    assert!(err.contains("nothing was changed"), "{err}");
}

/// (b) A partition folder that is a link to a folder outside the table, holding a file named
/// with the failed instant: the dry run and the rollback refuse before any change, naming the
/// link; the table and the outside folder are byte for byte as they were.
#[test]
fn a_partition_folder_that_is_a_link_refuses_the_rollback_before_any_change() {
    let (_rt, _tmp, w, table) = local_table("t");
    let outside = w.join("outside/p2");
    link_partition_out(&table, "p2", &outside);
    assert!(outside
        .join(format!("missed-0_0-9-9_{TF}.parquet"))
        .exists());
    let (before, outside_before) = (snapshot(&table), snapshot(&outside));
    let link = table.join("p2").display().to_string();

    for json in [false, true] {
        let mut args = vec!["--dry-run"];
        if json {
            args.push("--json");
        }
        assert_refused_naming(&rollback_cli(&table, &args), &link);
    }
    let out = rollback_cli(&table, &["--yes", "--lock", "none"]);
    assert_refused_naming(&out, &link);
    assert!(stderr(&out).contains(TF), "{}", stderr(&out));
    // Under the file-system lock too (its lock file is the first thing written).
    assert_refused_naming(
        &rollback_cli(&table, &["--yes", "--lock", "filesystem"]),
        &link,
    );
    assert_unchanged(&table, &before, &outside, &outside_before);
}

/// (b) The failed write's marker folder holds a link to a folder outside the table: deleting
/// the marker folder (by listing it) would delete what the link leads to. Refused before any
/// change.
#[test]
fn a_marker_folder_holding_a_link_refuses_the_rollback_before_any_change() {
    let (_rt, _tmp, w, table) = local_table("t");
    let outside = w.join("outside-markers");
    std::fs::create_dir_all(&outside).unwrap();
    let marker = format!("x-0_0-9-9_{TF}.parquet.marker.CREATE");
    std::fs::write(outside.join(&marker), b"keep me").unwrap();
    std::fs::write(outside.join("unrelated.txt"), b"keep me too").unwrap();
    let linked = table.join(format!(".hoodie/.temp/{TF}/p3"));
    std::os::unix::fs::symlink(&outside, &linked).unwrap();
    let (before, outside_before) = (snapshot(&table), snapshot(&outside));

    let link = linked.display().to_string();
    assert_refused_naming(&rollback_cli(&table, &["--dry-run"]), &link);
    assert_refused_naming(&rollback_cli(&table, &["--yes", "--lock", "none"]), &link);
    assert_unchanged(&table, &before, &outside, &outside_before);
}

/// (b) A restore whose undone commits' files lie in a partition folder that is a link:
/// refused before any change (dry run and run), naming the link.
#[test]
fn a_restore_through_a_linked_partition_folder_is_refused_before_any_change() {
    let (_rt, _tmp, w, table) = local_table("t");
    let outside = w.join("outside/p1");
    link_partition_out(&table, "p1", &outside);
    let (before, outside_before) = (snapshot(&table), snapshot(&outside));
    let link = table.join("p1").display().to_string();
    let uri = table.display().to_string();
    let restore_cli = |extra: &[&str]| {
        let mut args = vec![
            "restore",
            uri.as_str(),
            "--to-instant",
            T1,
            "--assume-lazy-writers",
        ];
        args.extend_from_slice(extra);
        run(&args)
    };
    assert_refused_naming(&restore_cli(&["--dry-run"]), &link);
    assert_refused_naming(&restore_cli(&["--yes", "--lock", "none"]), &link);
    assert_unchanged(&table, &before, &outside, &outside_before);
}

fn options() -> RollbackOptions {
    RollbackOptions {
        lazy_writers: Some(LazyWritersEvidence::Assumed),
        ..RollbackOptions::default()
    }
}

fn refusal_naming(e: Error, what: &str) -> String {
    match e {
        Error::Refused { reason, .. } => {
            assert!(reason.contains(what), "does not name `{what}`: {reason}");
            assert!(reason.contains("nothing was changed"), "{reason}");
            reason
        }
        other => panic!("not a refusal: {other}"),
    }
}

/// (a) In the executors: a table opened, then its folder swapped for a link to a copy outside
/// that holds a failed write. The opened handle would follow it; the dry run, the rollback and
/// the restore are refused before any change, naming the table folder.
#[test]
fn a_table_folder_swapped_for_a_link_after_it_was_opened_is_refused_before_any_change() {
    let rt = tokio::runtime::Runtime::new().unwrap();
    let (_tmp, w) = work();
    let table_dir = w.join("t");
    build_local(&rt, &table_dir, Kind::CowV8);
    let outside = w.join("outside/t");
    build_local(&rt, &outside, Kind::CowV8);
    let table = rt
        .block_on(Table::open(
            table_dir.to_str().unwrap(),
            &StorageOptions::default(),
        ))
        .unwrap();
    let orig = swap_for_link(&table_dir, &outside);
    let (orig_before, outside_before) = (snapshot(&orig), snapshot(&outside));
    let folder = table_dir.display().to_string();

    let why = refusal_naming(
        rt.block_on(preview(&table, &Selection::AllFailed, &options()))
            .unwrap_err(),
        &folder,
    );
    assert!(why.contains("symbolic link"), "{why}");
    refusal_naming(
        rt.block_on(rollback(&table, &Selection::AllFailed, &options(), None))
            .unwrap_err(),
        &folder,
    );
    refusal_naming(
        rt.block_on(rollback(
            &table,
            &Selection::Instant(TF.into()),
            &RollbackOptions {
                force: true,
                ..options()
            },
            None,
        ))
        .unwrap_err(),
        &folder,
    );
    let restore_options = RestoreOptions {
        rollback: options(),
        require_savepoint: false,
    };
    refusal_naming(
        rt.block_on(preview_restore(&table, T1, &restore_options))
            .unwrap_err(),
        &folder,
    );
    refusal_naming(
        rt.block_on(restore(&table, T1, &restore_options, None))
            .unwrap_err(),
        &folder,
    );
    assert_eq!(snapshot(&orig), orig_before, "the table changed");
    assert_eq!(
        snapshot(&outside),
        outside_before,
        "the outside copy changed"
    );
}

/// Runs `swap` once, right before the first request of kind `op` on a path ending with
/// `suffix` is sent.
struct SwapBefore {
    op: OpKind,
    suffix: &'static str,
    swap: Mutex<Option<Box<dyn FnOnce() + Send>>>,
}

impl std::fmt::Debug for SwapBefore {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SwapBefore")
            .field("op", &self.op)
            .field("suffix", &self.suffix)
            .finish()
    }
}

impl Interceptor for SwapBefore {
    fn before(&self, op: OpKind, path: &RelPath) -> Result<(), StorageError> {
        if op == self.op && path.as_str().ends_with(self.suffix) {
            if let Some(swap) = self.swap.lock().unwrap().take() {
                swap();
            }
        }
        Ok(())
    }
}

/// (a) The folder swapped while the rollback runs: right before it schedules (its first
/// change), and right before its first delete. Each change checks the table folder again: the
/// change is refused, and nothing is written or deleted in the copy the link leads to.
#[test]
fn a_table_folder_swapped_while_a_rollback_runs_stops_it_at_its_next_change() {
    let rt = tokio::runtime::Runtime::new().unwrap();
    for (op, suffix) in [
        (OpKind::PutIfAbsent, ".rollback.requested"),
        (OpKind::Delete, ".parquet"),
    ] {
        let (_tmp, w) = work();
        let table_dir = w.join("t");
        build_local(&rt, &table_dir, Kind::CowV8);
        let outside = w.join("outside/t");
        build_local(&rt, &outside, Kind::CowV8);
        let outside_before = snapshot(&outside);
        let (from, to) = (table_dir.clone(), outside.clone());
        let swap = SwapBefore {
            op,
            suffix,
            swap: Mutex::new(Some(Box::new(move || {
                swap_for_link(&from, &to);
            }))),
        };
        let storage = Storage::open(table_dir.to_str().unwrap(), &StorageOptions::default())
            .unwrap()
            .with_interceptor(Arc::new(swap));
        let table = rt.block_on(Table::open_storage(storage)).unwrap();
        let err = rt
            .block_on(rollback(&table, &Selection::AllFailed, &options(), None))
            .unwrap_err();
        let text = err.to_string();
        assert!(
            text.contains("symbolic link") && text.contains(&table_dir.display().to_string()),
            "{op}: {text}"
        );
        assert!(
            matches!(
                &err,
                Error::Storage(StorageError::TableFolderMoved { .. })
                    | Error::Delete { .. }
                    | Error::Refused { .. }
            ),
            "{op}: {err:?}"
        );
        assert_eq!(snapshot(&outside), outside_before, "{op}: the copy changed");
        assert!(
            table_dir
                .with_extension("orig")
                .join(format!("p2/missed-0_0-9-9_{TF}.parquet"))
                .exists(),
            "{op}"
        );
    }
}

fn daemon_config(table: &Path, extra_defaults: &str) -> String {
    format!(
        "[server]\nstate_dir = \"state\"\nauth_token = \"{TOKEN}\"\n[defaults]\npoll_interval = \"300ms\"\n{extra_defaults}[defaults.lock]\nprovider = \"filesystem\"\n[[tables]]\nname = \"t\"\nuri = \"{}\"\n",
        table.display()
    )
}

/// (a) In the daemon: a table registered and polled (its handle opened and cached), whose
/// failed write is left alone (a LAZY table with no heartbeat file ever seen). Its folder is
/// then swapped for a link to a copy outside with a failed write. The rollback the API asks for
/// (and its dry run) is refused, naming the table folder, and the copy is untouched.
#[test]
fn the_daemon_refuses_a_rollback_of_a_table_folder_swapped_for_a_link_after_it_was_opened() {
    let (rt, _tmp, w, table) = local_table("tables/t");
    let outside = w.join("outside/t");
    build_local(&rt, &outside, Kind::CowV8);
    let d = Daemon::start(&w.join("d"), &daemon_config(&table, ""));
    d.wait_for("two polls", Duration::from_secs(30), || {
        (d.table("t")["status"]["polls"].as_u64() >= Some(2)).then_some(())
    });
    let failed_file = format!("p2/missed-0_0-9-9_{TF}.parquet");
    assert!(table.join(&failed_file).exists(), "{}", d.logs());
    let orig = swap_for_link(&table, &outside);
    let (orig_before, outside_before) = (snapshot(&orig), snapshot(&outside));
    let folder = table.display().to_string();
    let path = "/api/v1/tables/t/rollback";

    let plan = request(
        &d.addr,
        "POST",
        path,
        Some(TOKEN),
        Some(&format!(r#"{{"instant": "{TF}", "dry_run": true}}"#)),
    );
    assert_eq!(plan.status, 409, "{}", plan.body);
    assert!(plan.body.contains("symbolic link"), "{}", plan.body);
    assert!(plan.body.contains(&folder), "{}", plan.body);
    let done = request(
        &d.addr,
        "POST",
        path,
        Some(TOKEN),
        Some(&format!(r#"{{"instant": "{TF}"}}"#)),
    );
    assert_eq!(done.status, 409, "{}", done.body);
    assert!(done.body.contains("symbolic link"), "{}", done.body);
    assert!(done.body.contains(&folder), "{}", done.body);
    assert!(done.body.contains("nothing was changed"), "{}", done.body);
    // Polls go on meanwhile, and change nothing either.
    let polls = d.table("t")["status"]["polls"].as_u64().unwrap_or(0);
    d.wait_for("two more polls", Duration::from_secs(30), || {
        (d.table("t")["status"]["polls"].as_u64() >= Some(polls + 2)).then_some(())
    });
    assert_eq!(
        snapshot(&outside),
        outside_before,
        "the outside copy changed"
    );
    assert_eq!(snapshot(&orig), orig_before, "the table changed");
}

/// (b) In the daemon: a table whose partition folder is a link out of it, with a failed write
/// the daemon rolls back at its poll. The poll's rollback is refused before any change, the
/// table status names the link, and both folders are untouched.
#[test]
fn the_daemon_refuses_a_rollback_through_a_linked_partition_folder() {
    let (_rt, _tmp, w, table) = local_table("tables/t");
    let outside = w.join("outside/p2");
    link_partition_out(&table, "p2", &outside);
    let (before, outside_before) = (snapshot(&table), snapshot(&outside));
    let d = Daemon::start(
        &w.join("d"),
        &daemon_config(&table, "assume_lazy_writers = true\n"),
    );
    let link = table.join("p2").display().to_string();
    let error = d.wait_for("the refused rollback", Duration::from_secs(30), || {
        let t = d.table("t");
        t["status"]["last_error"]
            .as_str()
            .filter(|e| e.contains("symbolic link"))
            .map(str::to_string)
    });
    assert!(error.contains(&link), "{error}");
    assert!(error.contains("nothing was changed"), "{error}");
    let polls = d.table("t")["status"]["polls"].as_u64().unwrap_or(0);
    d.wait_for("two more polls", Duration::from_secs(30), || {
        (d.table("t")["status"]["polls"].as_u64() >= Some(polls + 2)).then_some(())
    });
    let plan = request(
        &d.addr,
        "POST",
        "/api/v1/tables/t/rollback",
        Some(TOKEN),
        Some(r#"{"dry_run": true}"#),
    );
    assert_eq!(plan.status, 409, "{}", plan.body);
    assert!(plan.body.contains(&link), "{}", plan.body);
    // The daemon's own state folder is outside the table; the table itself is as it was.
    assert_unchanged(&table, &before, &outside, &outside_before);
}
