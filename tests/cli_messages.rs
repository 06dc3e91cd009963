//! What the CLI tells an operator, checked as a new user meets it (issue #35): the demo's
//! commands work as printed, summaries speak words, logs in a pipe carry no colour codes, usage
//! errors exit with 2.

use hudi_keeper_test_support as common;

use common::{run, stderr, stdout};

/// A fresh demo table (a failed write, its heartbeat expired), not rolled back.
fn demo_table(dir: &std::path::Path) -> String {
    let table = dir.join("demo");
    let out = run(&["demo", "--dir", table.to_str().unwrap(), "--no-rollback"]);
    assert!(out.status.success(), "{}", stderr(&out));
    table.to_str().unwrap().to_string()
}

/// The `hudi-keeper ...` commands a text prints after `marker`, as argument lists.
fn printed_commands(text: &str, marker: &str) -> Vec<Vec<String>> {
    text.lines()
        .filter_map(|l| l.strip_prefix(marker))
        .filter_map(|l| l.trim().strip_prefix("hudi-keeper "))
        .map(|l| l.split_whitespace().map(str::to_string).collect())
        .collect()
}

#[test]
fn the_demo_prints_commands_that_work_as_printed() {
    let dir = tempfile::tempdir().unwrap();
    // The full demo shows the commands it runs.
    let full = run(&["demo", "--dir", dir.path().join("demo").to_str().unwrap()]);
    assert!(full.status.success(), "{}", stderr(&full));
    let shown = printed_commands(&stdout(&full), "$ ");
    let rollback: Vec<_> = shown.iter().filter(|c| c[0] == "rollback").collect();
    assert_eq!(rollback.len(), 1, "{}", stdout(&full));
    // Typed by a user on a fresh demo table, each works.
    demo_table(dir.path());
    let args: Vec<&str> = rollback[0].iter().map(String::as_str).collect();
    let out = run(&args);
    assert!(
        out.status.success(),
        "`hudi-keeper {}` failed: {}",
        args.join(" "),
        stderr(&out)
    );
    assert!(stdout(&out).contains("rolled back"), "{}", stdout(&out));
    // So do the next steps `--no-rollback` suggests.
    let table = demo_table(dir.path());
    let next = run(&["demo", "--dir", &table, "--no-rollback"]);
    let text = stdout(&next);
    let suggested: Vec<_> = printed_commands(&text, "Next:")
        .into_iter()
        .chain(printed_commands(&text, "Then:"))
        .collect();
    assert_eq!(suggested.len(), 2, "{text}");
    for c in suggested {
        let args: Vec<&str> = c.iter().map(String::as_str).collect();
        let out = run(&args);
        assert!(
            out.status.success(),
            "`hudi-keeper {}` failed: {}",
            args.join(" "),
            stderr(&out)
        );
    }
}

#[test]
fn the_rollback_summary_speaks_words_and_logs_in_a_pipe_carry_no_colour() {
    let dir = tempfile::tempdir().unwrap();
    let table = demo_table(dir.path());
    let out = run(&["rollback", &table, "--lock", "none", "--yes"]);
    assert!(out.status.success(), "{}", stderr(&out));
    let text = stdout(&out);
    assert!(
        text.contains("3 files deleted, 0 command blocks, metadata table: not in use,"),
        "{text}"
    );
    assert!(!text.contains("NotInUse"), "{text}");
    // The run warns that it took no lock; stderr is a pipe here.
    let err = stderr(&out);
    assert!(err.contains("without a lock"), "{err}");
    assert!(!err.contains('\u{1b}'), "escape codes in a pipe: {err:?}");
}

#[test]
fn a_missing_lock_decision_is_a_usage_error() {
    let dir = tempfile::tempdir().unwrap();
    let table = demo_table(dir.path());
    let out = run(&["rollback", &table, "--yes"]);
    assert_eq!(out.status.code(), Some(2), "{}", stderr(&out));
    assert!(
        stderr(&out).starts_with("error: no lock provider chosen"),
        "{}",
        stderr(&out)
    );
    let out = run(&["rollback", &table, "--yes", "--lock", "zookeeper"]);
    assert_eq!(out.status.code(), Some(2), "{}", stderr(&out));
    assert!(
        stderr(&out).contains("--lock-zookeeper-url"),
        "{}",
        stderr(&out)
    );
}

#[test]
fn serve_from_any_folder_runs_the_embedded_demo_where_it_says() {
    let home = tempfile::tempdir().unwrap();
    let cwd = tempfile::tempdir().unwrap();
    let mut child = common::bin()
        .args(["serve", "--listen", "127.0.0.1:0"])
        .current_dir(cwd.path())
        .env("HOME", home.path())
        .env_remove("XDG_DATA_HOME")
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let data = home.path().join(".local/share/hudi-keeper");
    let demo = data.join("demo-data/demo-table/.hoodie/hoodie.properties");
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(60);
    while !demo.exists() && std::time::Instant::now() < deadline {
        std::thread::sleep(std::time::Duration::from_millis(100));
    }
    let _ = child.kill();
    let out = child.wait_with_output().unwrap();
    assert!(demo.exists(), "no demo table: {}", stderr(&out));
    // Nothing in the folder it was started from, and it said where it went.
    let left: Vec<_> = std::fs::read_dir(cwd.path()).unwrap().collect();
    assert!(left.is_empty(), "{left:?}");
    assert!(
        stderr(&out).contains(&data.display().to_string()),
        "{}",
        stderr(&out)
    );
}

#[test]
fn an_error_in_an_environment_variable_is_reported_as_one() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("keeper.toml");
    std::fs::write(&file, "[server]\nlisten = \"127.0.0.1:0\"\n").unwrap();
    let out = common::bin()
        .args(["serve", "--config", file.to_str().unwrap()])
        .env("HUDI_KEEPER_DEFAULTS__POLL_INTERVAL", "banana")
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1), "{}", stderr(&out));
    let err = stderr(&out);
    assert!(
        err.contains("environment variable HUDI_KEEPER_DEFAULTS__POLL_INTERVAL"),
        "{err}"
    );
    assert!(!err.contains("keeper.toml"), "blames the file: {err}");
    // An error in the file names the file and the key.
    std::fs::write(&file, "[defaults]\npoll_interval = \"banana\"\n").unwrap();
    let out = run(&["serve", "--config", file.to_str().unwrap()]);
    assert_eq!(out.status.code(), Some(1), "{}", stderr(&out));
    assert!(
        stderr(&out).contains("`defaults.poll_interval` in ")
            && stderr(&out).contains("keeper.toml"),
        "{}",
        stderr(&out)
    );
}

#[test]
fn a_store_that_never_answers_fails_and_the_message_names_the_endpoint_and_the_setting() {
    // Accepts connections and never answers.
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    std::thread::spawn(move || {
        let mut held = Vec::new();
        for s in listener.incoming().flatten() {
            held.push(s);
        }
    });
    let endpoint = format!("aws_endpoint=http://127.0.0.1:{port}");
    let out = run(&[
        "inspect",
        "s3://bucket/table",
        "--storage-option",
        &endpoint,
        "--storage-option",
        "aws_allow_http=true",
        "--storage-option",
        "aws_access_key_id=x",
        "--storage-option",
        "aws_secret_access_key=y",
        "--storage-option",
        "aws_region=us-east-1",
        // One attempt of 1 s, retried for at most 1 s (the defaults: 30 s and 30 s).
        "--storage-option",
        "timeout=1s",
        "--storage-option",
        "retry_timeout=1s",
    ]);
    assert_eq!(out.status.code(), Some(1), "{}", stderr(&out));
    let err = stderr(&out);
    assert!(err.contains(&format!("127.0.0.1:{port}")), "{err}");
    assert!(
        err.contains("hint: each object-store request is retried for at most retry_timeout")
            && err.contains("--storage-option retry_timeout="),
        "{err}"
    );
}

#[test]
fn the_restore_preview_counts_the_rollback_instants_the_run_removes() {
    let dir = tempfile::tempdir().unwrap();
    let table = dir.path().join("demo");
    let table = table.to_str().unwrap();
    // Two completed deltacommits and a rollback of the failed write after them.
    let out = run(&["demo", "--dir", table]);
    assert!(out.status.success(), "{}", stderr(&out));
    let first = std::fs::read_dir(dir.path().join("demo/.hoodie/timeline"))
        .unwrap()
        .filter_map(|e| e.unwrap().file_name().into_string().ok())
        .filter(|n| n.ends_with(".deltacommit") && n.contains('_'))
        .min()
        .unwrap();
    let first = first.split('_').next().unwrap().to_string();
    // Restoring to the first undoes the second through a rollback of its own, and removes that
    // one and the demo's: two, in the preview as in the run.
    let args = ["restore", table, "--to-instant", &first, "--lock", "none"];
    let preview = run(&[&args[..], &["--dry-run"]].concat());
    assert!(preview.status.success(), "{}", stderr(&preview));
    let text = stdout(&preview);
    assert!(text.contains("then remove 2 rollback instants"), "{text}");
    let done = run(&[&args[..], &["--yes"]].concat());
    assert!(done.status.success(), "{}", stderr(&done));
    let text = stdout(&done);
    assert!(text.contains("2 rollback instants removed"), "{text}");
    assert!(!text.contains("(s)"), "{text}");
}

#[test]
fn a_health_check_that_gets_no_answer_says_so_and_for_how_long_it_waited() {
    // A listener that accepts (the kernel does, from its backlog) and never answers.
    let silent = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = silent.local_addr().unwrap().to_string();
    let out = run(&["health", "--addr", &addr, "--timeout", "1s"]);
    assert_eq!(out.status.code(), Some(1));
    let err = stderr(&out);
    assert!(
        err.contains(&format!("no answer from {addr} within 1s")),
        "{err}"
    );
    assert!(!err.contains("Resource temporarily unavailable"), "{err}");
    drop(silent);
}

#[test]
fn every_flag_of_every_command_is_in_the_readme() {
    let readme =
        std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/../../README.md")).unwrap();
    let commands: [&[&str]; 11] = [
        &["inspect"],
        &["rollback"],
        &["restore"],
        &["savepoint", "create"],
        &["savepoint", "list"],
        &["savepoint", "delete"],
        &["audit"],
        &["discover"],
        &["serve"],
        &["health"],
        &["demo"],
    ];
    let mut missing = Vec::new();
    for c in commands {
        let out = run(&[c, &["--help"]].concat());
        assert!(out.status.success(), "{c:?}: {}", stderr(&out));
        for line in stdout(&out).lines() {
            let l = line.trim_start();
            // `-y, --yes` or `--dir <DIR>`: the long flag, whatever follows it.
            let l = match l.as_bytes() {
                [b'-', c, b',', b' ', ..] if c.is_ascii_alphabetic() => &l[4..],
                _ => l,
            };
            if !l.starts_with("--") {
                continue;
            }
            let flag = l.split([' ', '=', '<']).next().unwrap_or(l);
            if flag == "--help" || flag == "--version" {
                continue;
            }
            let found = readme.match_indices(flag).any(|(at, _)| {
                !readme[at + flag.len()..]
                    .starts_with(|ch: char| ch.is_ascii_alphanumeric() || ch == '-')
            });
            if !found {
                missing.push(format!("{} {flag}", c.join(" ")));
            }
        }
    }
    assert!(missing.is_empty(), "not in README.md: {missing:?}");
}

#[test]
fn savepoint_list_names_states_as_inspect_does() {
    let dir = tempfile::tempdir().unwrap();
    let table = demo_table(dir.path());
    let out = run(&["savepoint", "create", &table, "--lock", "none"]);
    assert!(out.status.success(), "{}", stderr(&out));
    let list = stdout(&run(&["savepoint", "list", &table]));
    assert!(list.contains("  completed  "), "{list}");
    assert!(!list.contains("Completed"), "{list}");
}
