//! Shared by the interop suites: whether they run, and how to call the Java harness.

#![allow(dead_code)]

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

/// The workspace root.
pub fn workspace() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

/// Run `tests/interop/run.sh` with `args`.
pub fn run_sh(args: &[&str]) -> Output {
    Command::new("bash")
        .arg(workspace().join("tests/interop/run.sh"))
        .args(args)
        .output()
        .expect("run tests/interop/run.sh")
}

/// Where generated tables are kept: HUDI_KEEPER_INTEROP_TABLES, else target/interop-tables.
pub fn tables_root() -> PathBuf {
    match std::env::var("HUDI_KEEPER_INTEROP_TABLES") {
        Ok(d) => PathBuf::from(d),
        Err(_) => workspace().join("target/interop-tables"),
    }
}
