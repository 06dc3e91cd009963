//! Shared by the interop suites: whether they run, and how to call the Java harness.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

/// Whether the real-Hudi suites run: `scripts/test` sets HUDI_KEEPER_INTEROP=1 (0 with
/// `--no-interop`). Unset is an error, so that a plain `cargo test` cannot pass them vacuously.
pub fn enabled() -> bool {
    match std::env::var("HUDI_KEEPER_INTEROP").as_deref() {
        Ok("1") => true,
        Ok("0") => {
            eprintln!("interop disabled (scripts/test --no-interop)");
            false
        }
        _ => panic!(
            "HUDI_KEEPER_INTEROP is not set: run the tests through scripts/test, which builds the real-Hudi harness (or scripts/test --no-interop)"
        ),
    }
}

/// Whether the full set of real-Hudi cases runs: HUDI_KEEPER_INTEROP_FULL=1 (`scripts/interop-full`
/// sets it). Without it, CI's `scripts/test` runs a subset of the Hudi 1.2 cases (tests/interop/README.md,
/// "Which cases run where"); the others print that they were left out and pass.
pub fn full() -> bool {
    std::env::var("HUDI_KEEPER_INTEROP_FULL").as_deref() == Ok("1")
}

/// [`enabled`] and [`full`]: for a case that runs only in the full set. Prints `what` when it is
/// left out.
pub fn enabled_full(what: &str) -> bool {
    if !enabled() {
        return false;
    }
    if !full() {
        eprintln!("{what}: left out of CI's set; runs with HUDI_KEEPER_INTEROP_FULL=1 (scripts/interop-full)");
        return false;
    }
    true
}

/// Whether a harness command's output shows Hudi 1.2.0's known failure to write its metadata table
/// right after compacting it (tests/interop/README.md, "Hudi 1.2"): an `ArrayIndexOutOfBoundsException`
/// in `HoodieMetadataPayload.getInsertValue`. The cases that run into it assert it, so that a Hudi
/// without it turns them into their comparison.
pub fn hudi_1_2_metadata_write_after_compaction_fails(output: &str) -> bool {
    output.contains("ArrayIndexOutOfBoundsException")
        && output.contains("HoodieMetadataPayload.getInsertValue")
}

/// The workspace root.
pub fn workspace() -> PathBuf {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
    // Canonical: Hudi writes canonical absolute paths into its plans and metadata, and the
    // suites compare those with paths built from this one.
    std::fs::canonicalize(&dir).unwrap_or(dir)
}

/// Run `tests/interop/run.sh` with `args`.
pub fn run_sh(args: &[&str]) -> Output {
    Command::new("bash")
        .arg(workspace().join("tests/interop/run.sh"))
        .args(args)
        .output()
        .expect("run tests/interop/run.sh")
}

/// `tests/interop/run.sh` as a command to complete (its arguments, its spawning), with `env` set.
pub fn run_sh_command(env: &[(String, String)]) -> Command {
    let mut c = Command::new("bash");
    c.arg(workspace().join("tests/interop/run.sh"));
    for (k, v) in env {
        c.env(k, v);
    }
    c
}

/// The standard output of a harness command that must have succeeded; on failure the panic
/// names `what` and shows both outputs.
pub fn must(out: Output, what: &str) -> String {
    assert!(
        out.status.success(),
        "{what} failed:\n{}\n{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// Where generated tables are kept: HUDI_KEEPER_INTEROP_TABLES, else target/interop-tables.
pub fn tables_root() -> PathBuf {
    match std::env::var("HUDI_KEEPER_INTEROP_TABLES") {
        Ok(d) => PathBuf::from(d),
        Err(_) => workspace().join("target/interop-tables"),
    }
}

/// The HFile readers `run.sh verify` can make Hudi use for the metadata table of a `version` table:
/// HBase's (0.15.0's default) and Hudi's native one for 0.15 and 1.0 (`_hoodie.hfile.use.native.reader`
/// false and true); 1.1.1 and 1.2.0 have only the native reader, 0.13.1 only HBase's.
pub fn hfile_reader_flags(version: &str) -> &'static [&'static str] {
    match version {
        "1.1" | "1.2" => &["--native-hfile-reader"],
        "0.13" => &["--hbase-hfile-reader"],
        _ => &["--hbase-hfile-reader", "--native-hfile-reader"],
    }
}

/// `run.sh verify <version> <dir>` once per HFile reader of [`hfile_reader_flags`], the runs at the
/// same time (each verifies its own scratch copy): (flag, output), in the order of the flags.
pub fn verify_with_each_hfile_reader(version: &str, dir: &Path) -> Vec<(&'static str, Output)> {
    let dir = dir.to_str().expect("utf-8 path");
    std::thread::scope(|s| {
        let runs: Vec<_> = hfile_reader_flags(version)
            .iter()
            .map(|flag| {
                (
                    *flag,
                    s.spawn(move || run_sh(&["verify", version, dir, flag])),
                )
            })
            .collect();
        runs.into_iter()
            .map(|(flag, h)| (flag, h.join().expect("verify thread")))
            .collect()
    })
}

/// The `checks` of a `run.sh verify` JSON report that failed, by name.
pub fn failed_checks(report: &str) -> Vec<String> {
    let v: serde_json::Value = match serde_json::from_str(report) {
        Ok(v) => v,
        Err(_) => return vec![format!("not a JSON report: {report}")],
    };
    v["checks"]
        .as_array()
        .map(|cs| {
            cs.iter()
                .filter(|c| c["ok"] == false)
                .filter_map(|c| c["check"].as_str().map(str::to_string))
                .collect()
        })
        .unwrap_or_default()
}

/// Copy a generated table to `to` (replacing it), its parent folders made. `cp -a` keeps
/// modification times: the heartbeat's age is what the verdict reads.
pub fn copy_table(from: &Path, to: &Path) {
    let _ = std::fs::remove_dir_all(to);
    if let Some(parent) = to.parent() {
        std::fs::create_dir_all(parent).expect("mkdir");
    }
    let ok = Command::new("cp")
        .arg("-a")
        .arg(from)
        .arg(to)
        .status()
        .expect("cp");
    assert!(ok.success(), "cp -a {} {}", from.display(), to.display());
}

/// The harness's `scenario.json` of a generated table.
pub fn scenario_json(dir: &Path) -> serde_json::Value {
    let text = std::fs::read_to_string(dir.join("scenario.json")).expect("scenario.json");
    serde_json::from_str(&text).expect("scenario.json is JSON")
}

/// `hudi-keeper rollback <table> --yes --json` as the suites run it against a harness table:
/// the harness writers' heartbeat interval, a 1 s clock-skew margin, and their lock (Hudi's
/// FileSystemBasedLockProvider), then `extra` arguments.
pub fn roll_back_like_the_harness_writers(
    table: &Path,
    heartbeat_interval_ms: u64,
    extra: &[&str],
) -> Output {
    let interval = format!("{heartbeat_interval_ms}ms");
    let mut args = vec![
        "rollback",
        table.to_str().expect("utf-8 path"),
        "--heartbeat-interval",
        &interval,
        "--clock-skew-margin",
        "1s",
        "--yes",
        "--json",
        "--lock",
        "filesystem",
        "--lock-timeout",
        "30s",
    ];
    args.extend_from_slice(extra);
    super::bin().args(&args).output().expect("run hudi-keeper")
}

/// The harness's table `scenario` made by Hudi `version`, with its reference
/// `<scenario>-hudi-rollback` (Hudi's own rollback of it): under [`tables_root`]`/<version>/`,
/// reused when both are there (the suites share them), else generated. One generation at a time
/// per version, across test binaries too (`scripts/test` runs two lanes of suites at once): an
/// exclusive lock on `<version>/.generate.lock` is held while looking and generating.
pub fn generated(version: &str, scenario: &str) -> PathBuf {
    generated_by(version, scenario, |table| {
        run_sh(&["generate", version, scenario, table])
    })
}

/// `tests/interop/spark-0.13/run.sh` with `args`: Hudi 0.13.1 through Spark, whose tables have a
/// metadata table (tests/interop/README.md, "Hudi 0.13.1 through Spark").
pub fn spark013_sh(args: &[&str]) -> Output {
    Command::new("bash")
        .arg(workspace().join("tests/interop/spark-0.13/run.sh"))
        .args(args)
        .output()
        .expect("run tests/interop/spark-0.13/run.sh")
}

/// [`generated`] for the `spark-0.13` harness: the table `scenario` and its reference
/// `<scenario>-hudi-rollback` (Hudi 0.13.1's own rollback), under [`tables_root`]`/spark-0.13/`.
pub fn spark013_generated(scenario: &str) -> PathBuf {
    generated_by("spark-0.13", scenario, |table| {
        spark013_sh(&["generate", scenario, table])
    })
}

/// The table `scenario` under [`tables_root`]`/<key>/`, with its reference, reused when both are
/// there, else made by `generate` (given the table's path). One generation at a time per key.
fn generated_by(key: &str, scenario: &str, generate: impl FnOnce(&str) -> Output) -> PathBuf {
    type Slots = std::collections::BTreeMap<String, std::sync::Arc<std::sync::Mutex<()>>>;
    static GENERATE: std::sync::Mutex<Slots> = std::sync::Mutex::new(Slots::new());
    let slot = GENERATE
        .lock()
        .unwrap_or_else(|p| p.into_inner())
        .entry(key.to_string())
        .or_default()
        .clone();
    let _one = slot.lock().unwrap_or_else(|p| p.into_inner());
    let dir = tables_root().join(key);
    std::fs::create_dir_all(&dir).expect("mkdir");
    let lock = std::fs::File::create(dir.join(".generate.lock")).expect("the generate lock file");
    lock.lock().expect("lock the generate lock file");
    let table = dir.join(scenario);
    let reference = dir.join(format!("{scenario}-hudi-rollback"));
    if table.join("scenario.json").exists() && reference.exists() {
        return table;
    }
    let _ = std::fs::remove_dir_all(&table);
    let _ = std::fs::remove_dir_all(&reference);
    must(
        generate(table.to_str().expect("utf-8")),
        &format!("Hudi {key} generating {scenario}"),
    );
    table
}

/// A copy of `table` at `upgraded`, upgraded to version 6 by a Hudi 0.15 writer's commit (the
/// Java harness's `run.sh commit 0.15`), then Hudi 0.15's validator on the records as of that
/// commit: `None` when it passes, else the checks that failed.
pub fn upgrade_with_hudi_0_15(
    table: &Path,
    upgraded: &Path,
) -> Result<Option<Vec<String>>, String> {
    copy_table(table, upgraded);
    let upgraded_s = upgraded.to_str().expect("utf-8");
    let commit = run_sh(&["commit", "0.15", upgraded_s]);
    if !commit.status.success() {
        return Err(format!(
            "Hudi 0.15's commit failed: {}",
            String::from_utf8_lossy(&commit.stderr)
        ));
    }
    // The report is the JSON object the JVM prints last; a line another library printed to
    // standard output before it (seen once: a line starting with a date) is shown, not parsed.
    let out = String::from_utf8_lossy(&commit.stdout);
    let start = out
        .match_indices('\n')
        .map(|(i, _)| i + 1)
        .chain([0])
        .filter(|&i| out[i..].starts_with('{'))
        .min()
        .unwrap_or(0);
    if start > 0 {
        eprintln!(
            "Hudi 0.15's commit printed before its report: {}",
            &out[..start]
        );
    }
    let summary: serde_json::Value = serde_json::from_str(&out[start..]).map_err(|e| {
        let head: String = out.chars().take(400).collect();
        format!(
            "commit JSON: {e}: {head}\n{}",
            String::from_utf8_lossy(&commit.stderr)
        )
    })?;
    let expect = summary["expected_records_file"]
        .as_str()
        .ok_or("the commit wrote no expected-records file")?
        .to_string();
    let props = std::fs::read_to_string(upgraded.join(".hoodie/hoodie.properties"))
        .map_err(|e| e.to_string())?;
    if !props.contains("hoodie.table.version=6") {
        return Err(format!("Hudi 0.15 did not upgrade the table: {props}"));
    }
    let verify = run_sh(&["verify", "0.15", upgraded_s, "--expect", &expect]);
    if verify.status.success() {
        return Ok(None);
    }
    let report = String::from_utf8_lossy(&verify.stdout).into_owned();
    let failed = failed_checks(&report);
    if failed.is_empty() {
        return Err(format!(
            "Hudi 0.15's validator failed after its upgrade: {report}{}",
            String::from_utf8_lossy(&verify.stderr)
        ));
    }
    Ok(Some(failed))
}

/// Every file below `dir`, as paths relative to it, sorted.
pub fn files_below(dir: &Path) -> Vec<String> {
    let mut out = Vec::new();
    let mut stack = vec![dir.to_path_buf()];
    while let Some(d) = stack.pop() {
        for e in std::fs::read_dir(&d).expect("read_dir").flatten() {
            let p = e.path();
            if p.is_dir() {
                stack.push(p);
            } else {
                out.push(p.strip_prefix(dir).expect("prefix").display().to_string());
            }
        }
    }
    out.sort();
    out
}

/// The verdict `hudi-keeper inspect` gives the pending `instant` of `table`, judged as the
/// harness's writers run (1 s heartbeats, a 1 s clock-skew margin); `<instant> is not pending`
/// when it is not.
pub fn verdict_of(table: &Path, instant: &str) -> String {
    let out = super::run(&[
        "inspect",
        table.to_str().expect("utf-8"),
        "--json",
        "--heartbeat-interval",
        "1000ms",
        "--clock-skew-margin",
        "1s",
    ]);
    assert!(out.status.success(), "inspect: {}", super::stderr(&out));
    let v: serde_json::Value = serde_json::from_str(&super::stdout(&out)).expect("inspect --json");
    v["pending"]
        .as_array()
        .expect("pending")
        .iter()
        .find(|p| p["requested_time"] == instant)
        .map(|p| p["verdict"].as_str().unwrap_or_default().to_string())
        .unwrap_or_else(|| format!("{instant} is not pending"))
}
