//! The API's registry and what a registration may cost and write (issues #15, #30): the
//! registry files are private, one per table, and a corrupt one does not stop the configured
//! tables; no control character in a name or URI, at most `server.max_api_tables`, no poll more
//! than once a second, no folder inside a table's base path, no path of the host in `/readyz`.

use std::path::Path;
use std::time::Duration;

use common::api::{
    api_daemon, api_table_files, api_work, entry, mode, names, register, server, ApiWork, TOKEN,
};
use common::daemon::Daemon;
use common::fixtures::{build_local, Kind};
use common::http::request;
use hudi_keeper_test_support as common;
use serde_json::{json, Value};

#[test]
fn the_registry_files_are_private_and_replaced_whole() {
    let ApiWork {
        work: _work,
        w: _,
        allowed,
        dir,
        state,
    } = api_work();
    // A registry an older version left readable by all: moved, and gone.
    let registry = state.join("tables.json");
    std::fs::write(&registry, "[]").unwrap();
    std::fs::set_permissions(
        &registry,
        std::os::unix::fs::PermissionsExt::from_mode(0o644),
    )
    .unwrap();
    let d = Daemon::start(
        &dir,
        &format!(
            "{}[defaults]\npoll_interval = \"1h\"\nfailed_writes_policy = \"observe\"\n",
            server(&format!(
                "allowed_table_uris = [\"{}\"]\n",
                allowed.display()
            ))
        ),
    );
    assert!(!registry.exists());
    for n in ["a", "b"] {
        let r = register(
            &d,
            &entry(n, &allowed.join(n).display().to_string(), json!({})),
        );
        assert_eq!(r.status, 201, "{}", r.body);
        let file = state.join(format!("api-tables/{n}.json"));
        assert_eq!(mode(&file), 0o600, "after registering {n}");
        let kept: Value = serde_json::from_slice(&std::fs::read(&file).unwrap()).unwrap();
        assert_eq!(kept["name"], n, "{kept}");
    }
    assert_eq!(mode(&state.join("api-tables")), 0o700);
    // Nothing but the tables' files is left of their writes.
    assert_eq!(api_table_files(&state), ["a.json", "b.json"]);
}

#[test]
fn a_corrupt_registry_is_reported_while_the_configured_tables_keep_running() {
    let rt = tokio::runtime::Runtime::new().unwrap();
    let work = tempfile::tempdir().unwrap();
    let w = work.path().canonicalize().unwrap();
    let table = w.join("configured");
    build_local(&rt, &table, Kind::CowV8);
    let allowed = w.join("allowed");
    std::fs::create_dir_all(&allowed).unwrap();
    let dir = w.join("d");
    std::fs::create_dir_all(dir.join("state")).unwrap();
    let registry = dir.join("state/tables.json");
    let corrupt = b"[{\"name\": \"half-writ";
    std::fs::write(&registry, corrupt).unwrap();
    let d = Daemon::start(
        &dir,
        &format!(
            "{}[defaults]\npoll_interval = \"200ms\"\nfailed_writes_policy = \"observe\"\n[[tables]]\nname = \"configured\"\nuri = \"{}\"\n",
            server(&format!("allowed_table_uris = [\"{}\"]\n", allowed.display())),
            table.display()
        ),
    );
    d.wait_for(
        "the configured table's polls",
        Duration::from_secs(20),
        || (d.table("configured")["status"]["polls"].as_u64() >= Some(2)).then_some(()),
    );
    assert_eq!(d.table("configured")["status"]["last_poll_ok"], true);
    let ready = d.get("/readyz");
    assert_eq!(ready.status, 503, "{}", ready.body);
    let ready = ready.json();
    assert_eq!(ready["registry"]["ok"], false, "{ready}");
    assert!(
        ready["registry"]["error"]
            .as_str()
            .is_some_and(|e| e.contains("tables.json")),
        "{ready}"
    );
    assert_eq!(
        d.metric(r#"hudi_keeper_registry_errors_total{kind="unreadable"}"#),
        Some(1.0)
    );
    assert!(
        d.logs().contains("ERROR") && d.logs().contains("tables.json"),
        "{}",
        d.logs()
    );
    // Registering now would replace the file and lose what it held: refused until it is fixed.
    let r = register(
        &d,
        &entry("new", &allowed.join("new").display().to_string(), json!({})),
    );
    assert_eq!(r.status, 409, "{}", r.body);
    assert!(r.body.contains("tables.json"), "{}", r.body);
    assert_eq!(std::fs::read(&registry).unwrap(), corrupt);
}

#[test]
fn registry_entries_the_policy_refuses_are_reported_kept_and_removable() {
    let work = tempfile::tempdir().unwrap();
    let w = work.path().canonicalize().unwrap();
    let allowed = w.join("allowed");
    std::fs::create_dir_all(&allowed).unwrap();
    let dir = w.join("d");
    std::fs::create_dir_all(dir.join("state")).unwrap();
    let registry = dir.join("state/tables.json");
    // What an older version let the API register.
    let old = json!([
        {"name": "good", "uri": allowed.join("good").display().to_string()},
        {"name": "elsewhere", "uri": w.join("elsewhere").display().to_string()},
        {"name": "endpoint", "uri": allowed.join("e").display().to_string(),
         "storage_options": {"aws_endpoint": "http://127.0.0.1:1"}},
        {"name": "no-lock", "uri": allowed.join("n").display().to_string(),
         "failed_writes_policy": "eager", "lock": {"provider": "none"}},
    ]);
    std::fs::write(&registry, old.to_string()).unwrap();
    let d = Daemon::start(
        &dir,
        &format!(
            "{}[defaults]\npoll_interval = \"1h\"\nfailed_writes_policy = \"observe\"\n",
            server(&format!(
                "allowed_table_uris = [\"{}\"]\n",
                allowed.display()
            ))
        ),
    );
    assert_eq!(names(&d), ["good"]);
    let ready = d.get("/readyz");
    assert_eq!(ready.status, 503, "{}", ready.body);
    let ready = ready.json();
    let mut refused: Vec<String> = ready["registry"]["not_restored"]
        .as_array()
        .unwrap_or_else(|| panic!("{ready}"))
        .iter()
        .map(|e| {
            assert!(e["error"].is_string(), "{e}");
            e["name"].as_str().unwrap().to_string()
        })
        .collect();
    refused.sort();
    assert_eq!(refused, ["elsewhere", "endpoint", "no-lock"], "{ready}");
    assert_eq!(
        d.metric(r#"hudi_keeper_registry_errors_total{kind="not_restored"}"#),
        Some(3.0)
    );
    // Kept in the file across other changes, so a corrected config brings them back...
    let r = register(
        &d,
        &entry("new", &allowed.join("new").display().to_string(), json!({})),
    );
    assert_eq!(r.status, 201, "{}", r.body);
    // (Each in a file of its own now: tables.json was moved at start.)
    assert!(!registry.exists());
    let state = dir.join("state");
    let kept = |state: &Path| -> Vec<String> {
        api_table_files(state)
            .iter()
            .map(|f| {
                let v: Value = serde_json::from_slice(
                    &std::fs::read(state.join("api-tables").join(f)).unwrap(),
                )
                .unwrap();
                v["name"].as_str().unwrap().to_string()
            })
            .collect()
    };
    assert_eq!(
        kept(&state),
        ["elsewhere", "endpoint", "good", "new", "no-lock"]
    );
    // ...and removable through the API.
    for n in ["elsewhere", "endpoint", "no-lock"] {
        let r = request(
            &d.addr,
            "DELETE",
            &format!("/api/v1/tables/{n}"),
            Some(TOKEN),
            None,
        );
        assert_eq!(r.status, 204, "{n}: {}", r.body);
    }
    assert_eq!(kept(&state), ["good", "new"]);
    d.wait_for("readiness", Duration::from_secs(10), || {
        let r = d.get("/readyz");
        (r.json()["registry"]["ok"] == true).then_some(())
    });
}

#[test]
fn a_uri_or_name_with_a_control_character_is_refused_and_forges_no_log_line() {
    let work = tempfile::tempdir().unwrap();
    let w = work.path().canonicalize().unwrap();
    let allowed = w.join("allowed");
    std::fs::create_dir_all(&allowed).unwrap();
    let d = api_daemon(&w.join("d"), &allowed, "");
    // A line break followed by what a text log line looks like, and other control characters
    // (carriage return, an ANSI escape, C1's next-line).
    let forged =
        "2030-01-01T00:00:00.000000Z  INFO hudi_keeper: FORGED-LINE rolled back every table";
    for (name, uri) in [
        ("nl", format!("{}/t\n{forged}", allowed.display())),
        ("cr", format!("{}/t\r{forged}", allowed.display())),
        ("esc", format!("{}/t\u{1b}[2K{forged}", allowed.display())),
        ("nel", format!("{}/t\u{85}{forged}", allowed.display())),
        ("nul", format!("{}/t\u{0}", allowed.display())),
    ] {
        let r = register(&d, &entry(name, &uri, json!({})));
        assert_eq!(r.status, 422, "{name}: {}", r.body);
        assert!(r.body.contains("control character"), "{name}: {}", r.body);
    }
    let r = register(
        &d,
        &entry(
            &format!("n\n{forged}"),
            &allowed.join("n").display().to_string(),
            json!({}),
        ),
    );
    assert_eq!(r.status, 422, "{}", r.body);
    assert!(names(&d).is_empty());
    // Nothing the caller wrote became a line of the log (give any poll a moment to log).
    std::thread::sleep(Duration::from_millis(1500));
    let logs = d.logs();
    assert!(!logs.contains("FORGED-LINE"), "{logs}");
}

#[test]
fn api_registrations_are_capped_by_max_api_tables() {
    let work = tempfile::tempdir().unwrap();
    let w = work.path().canonicalize().unwrap();
    let allowed = w.join("allowed");
    std::fs::create_dir_all(&allowed).unwrap();
    let d = api_daemon(&w.join("d"), &allowed, "max_api_tables = 2\n");
    let uri = |n: &str| allowed.join(n).display().to_string();
    for n in ["a", "b"] {
        let r = register(&d, &entry(n, &uri(n), json!({})));
        assert_eq!(r.status, 201, "{n}: {}", r.body);
    }
    let r = register(&d, &entry("c", &uri("c"), json!({})));
    assert_eq!(r.status, 409, "{}", r.body);
    assert!(r.body.contains("server.max_api_tables"), "{}", r.body);
    assert_eq!(names(&d), ["a", "b"]);
    // A slot freed is a slot taken again.
    let r = request(&d.addr, "DELETE", "/api/v1/tables/a", Some(TOKEN), None);
    assert_eq!(r.status, 204, "{}", r.body);
    let r = register(&d, &entry("c", &uri("c"), json!({})));
    assert_eq!(r.status, 201, "{}", r.body);
    assert_eq!(names(&d), ["b", "c"]);
}

#[test]
fn each_api_table_is_its_own_private_file_and_a_registration_rewrites_no_other() {
    use std::os::unix::fs::MetadataExt;
    let work = tempfile::tempdir().unwrap();
    let w = work.path().canonicalize().unwrap();
    let allowed = w.join("allowed");
    std::fs::create_dir_all(&allowed).unwrap();
    let dir = w.join("d");
    let state = dir.join("state");
    let d = api_daemon(&dir, &allowed, "");
    // Long URIs, as in the review (4 KB each).
    let long = |n: &str| allowed.join(n).join("x".repeat(4000)).display().to_string();
    let r = register(&d, &entry("a", &long("a"), json!({})));
    assert_eq!(r.status, 201, "{}", r.body);
    let file_a = state.join("api-tables/a.json");
    let before = std::fs::metadata(&file_a).unwrap_or_else(|e| panic!("{}: {e}", file_a.display()));
    assert_eq!(mode(&file_a), 0o600);
    assert_eq!(mode(&state.join("api-tables")), 0o700);
    std::thread::sleep(Duration::from_millis(20));
    for n in ["b", "c"] {
        let r = register(&d, &entry(n, &long(n), json!({})));
        assert_eq!(r.status, 201, "{}", r.body);
    }
    // `a`'s file was not written again: same file, same time.
    let after = std::fs::metadata(&file_a).unwrap();
    assert_eq!(
        (before.ino(), before.mtime_nsec(), before.mtime()),
        (after.ino(), after.mtime_nsec(), after.mtime())
    );
    assert_eq!(api_table_files(&state), ["a.json", "b.json", "c.json"]);
    // Each file holds its own table and no other.
    let kept: Value =
        serde_json::from_slice(&std::fs::read(state.join("api-tables/b.json")).unwrap()).unwrap();
    assert_eq!(kept["name"], "b", "{kept}");
    assert_eq!(kept["uri"], long("b"), "{kept}");
    let r = request(&d.addr, "DELETE", "/api/v1/tables/b", Some(TOKEN), None);
    assert_eq!(r.status, 204, "{}", r.body);
    assert_eq!(api_table_files(&state), ["a.json", "c.json"]);
    assert!(!state.join("tables.json").exists());
    drop(d);
    // Read back at start.
    let d = api_daemon(&dir, &allowed, "");
    assert_eq!(names(&d), ["a", "c"]);
    assert_eq!(d.get("/readyz").json()["registry"]["ok"], true);
}

#[test]
fn an_older_tables_json_is_moved_to_one_file_per_table_at_start() {
    let ApiWork {
        work: _work,
        w: _,
        allowed,
        dir,
        state,
    } = api_work();
    let registry = state.join("tables.json");
    let old = json!([
        {"name": "x", "uri": allowed.join("x").display().to_string()},
        {"name": "y", "uri": allowed.join("y").display().to_string(), "poll_interval": "2h"},
    ]);
    std::fs::write(&registry, old.to_string()).unwrap();
    std::fs::set_permissions(
        &registry,
        std::os::unix::fs::PermissionsExt::from_mode(0o644),
    )
    .unwrap();
    let d = api_daemon(&dir, &allowed, "");
    assert_eq!(names(&d), ["x", "y"]);
    assert_eq!(api_table_files(&state), ["x.json", "y.json"]);
    assert!(
        !registry.exists(),
        "tables.json is left once every entry moved"
    );
    for n in ["x", "y"] {
        assert_eq!(mode(&state.join(format!("api-tables/{n}.json"))), 0o600);
    }
    assert_eq!(d.table("y")["settings"]["poll_interval_ms"], 7_200_000);
    let r = request(&d.addr, "DELETE", "/api/v1/tables/x", Some(TOKEN), None);
    assert_eq!(r.status, 204, "{}", r.body);
    drop(d);
    let d = api_daemon(&dir, &allowed, "");
    assert_eq!(names(&d), ["y"]);
    assert_eq!(d.get("/readyz").json()["registry"]["ok"], true);
}

#[test]
fn an_api_poll_interval_under_a_second_is_refused() {
    let work = tempfile::tempdir().unwrap();
    let w = work.path().canonicalize().unwrap();
    let allowed = w.join("allowed");
    std::fs::create_dir_all(&allowed).unwrap();
    let d = api_daemon(&w.join("d"), &allowed, "");
    let uri = |n: &str| allowed.join(n).display().to_string();
    for (i, every) in ["100ms", "999ms", "0s"].into_iter().enumerate() {
        let r = register(
            &d,
            &entry(&format!("f{i}"), &uri("f"), json!({"poll_interval": every})),
        );
        assert_eq!(r.status, 422, "{every}: {}", r.body);
        assert!(r.body.contains("poll_interval"), "{}", r.body);
    }
    let r = register(&d, &entry("ok", &uri("ok"), json!({"poll_interval": "1s"})));
    assert_eq!(r.status, 201, "{}", r.body);
    assert_eq!(names(&d), ["ok"]);
}

#[test]
fn a_folder_inside_a_table_is_not_registered_as_a_table_of_its_own() {
    let rt = tokio::runtime::Runtime::new().unwrap();
    let work = tempfile::tempdir().unwrap();
    let w = work.path().canonicalize().unwrap();
    let allowed = w.join("allowed");
    // Tables nobody registered.
    build_local(&rt, &allowed.join("t"), Kind::CowV8);
    build_local(&rt, &allowed.join("deep/er/u"), Kind::CowV8);
    std::fs::create_dir_all(allowed.join("t/dt=2024-01-01")).unwrap();
    // A link to a folder of a table.
    std::os::unix::fs::symlink(allowed.join("t/dt=2024-01-01"), allowed.join("plink")).unwrap();
    let d = api_daemon(&w.join("d"), &allowed, "");
    let u = |p: &Path| p.display().to_string();
    for (name, uri, table) in [
        ("p", u(&allowed.join("t/dt=2024-01-01")), allowed.join("t")),
        // Not there yet: where it would be still is.
        (
            "q",
            u(&allowed.join("t/dt=2024-01-02/x")),
            allowed.join("t"),
        ),
        (
            "r",
            u(&allowed.join("deep/er/u/a/b/c")),
            allowed.join("deep/er/u"),
        ),
        (
            "s",
            format!("file://{}", allowed.join("t/dt=2024-01-01").display()),
            allowed.join("t"),
        ),
        ("l", u(&allowed.join("plink")), allowed.join("t")),
    ] {
        let r = register(&d, &entry(name, &uri, json!({})));
        assert_eq!(r.status, 409, "{uri}: {}", r.body);
        assert!(
            r.body.contains(&table.display().to_string()),
            "{uri}: {}",
            r.body
        );
        assert!(r.body.contains("inside"), "{uri}: {}", r.body);
    }
    assert!(names(&d).is_empty());
    // The tables themselves, and folders beside them, are registered as before (also where no
    // table is yet).
    for (name, uri) in [
        ("t", u(&allowed.join("t"))),
        ("u", u(&allowed.join("deep/er/u"))),
        ("later", u(&allowed.join("deep/later"))),
    ] {
        let r = register(&d, &entry(name, &uri, json!({})));
        assert_eq!(r.status, 201, "{uri}: {}", r.body);
    }
}

#[test]
fn readyz_names_no_path_of_the_daemons_host() {
    let ApiWork {
        work: _work,
        w,
        allowed,
        dir,
        state,
    } = api_work();
    // `state_dir` given as an absolute path, as a deployment would.
    let config = format!(
        "[server]\nstate_dir = \"{}\"\nauth_token = \"{TOKEN}\"\nallowed_table_uris = [\"{}\"]\n[defaults]\npoll_interval = \"1h\"\nfailed_writes_policy = \"observe\"\n",
        state.display(),
        allowed.display()
    );
    let d = Daemon::start(&dir, &config);
    let ready = d.get("/readyz");
    assert_eq!(ready.status, 200, "{}", ready.body);
    assert!(
        !ready.body.contains(&w.display().to_string()),
        "{}",
        ready.body
    );
    drop(d);
    // Nor when the registry cannot be read: it is named below state_dir.
    std::fs::write(state.join("tables.json"), b"[{").unwrap();
    let d = Daemon::start(&dir, &config);
    let ready = d.get("/readyz");
    assert_eq!(ready.status, 503, "{}", ready.body);
    assert!(ready.body.contains("tables.json"), "{}", ready.body);
    assert!(
        !ready.body.contains(&w.display().to_string()),
        "{}",
        ready.body
    );
}
