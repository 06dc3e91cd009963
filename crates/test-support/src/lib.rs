//! Helpers shared by hudi-keeper's test suites (a dev-dependency of both crates, never
//! published): run the real binary, build small tables by hand ([`fixtures`]), the S3 and Azure
//! test servers ([`s3`], [`azure`]), a slow or faulty store ([`proxy`]), the daemon ([`daemon`],
//! [`config`]), an HTTP client ([`http`]), the real-Hudi harness ([`interop`]), the test server's
//! Glue catalog ([`glue`]), the Hive Metastore ([`hms`]), runs cut off on a store ([`runs`]), snapshots with run-specific names normalized ([`normalize`]), the
//! crash-at-every-storage-call harness ([`crash`]) and the status page's demo table ([`status`]).

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

/// The `hudi-keeper` binary cargo built for the service crate's tests. `CARGO_BIN_EXE_hudi-keeper`
/// is known when those suites compile, not when this library does, nor (under `scripts/test`,
/// which runs the test executables itself) at run time: the binary is found beside the test
/// executable, in the profile folder above `deps/`, where cargo puts both. (The suite
/// `cli_inspect` checks that this is the binary cargo names.)
pub fn bin_path() -> PathBuf {
    if let Some(p) = std::env::var_os("CARGO_BIN_EXE_hudi-keeper") {
        return PathBuf::from(p);
    }
    let exe = std::env::current_exe().expect("the test executable's path");
    let mut dir = exe
        .parent()
        .expect("the test executable's folder")
        .to_path_buf();
    if dir.ends_with("deps") {
        dir.pop();
    }
    let p = dir.join(format!("hudi-keeper{}", std::env::consts::EXE_SUFFIX));
    assert!(
        p.is_file(),
        "{} is not built: the binary is built for the service crate's tests (cargo test -p hudi-keeper)",
        p.display()
    );
    p
}

/// The `hudi-keeper` binary cargo built for these tests.
pub fn bin() -> Command {
    Command::new(bin_path())
}

/// Run `hudi-keeper` with `args`.
pub fn run(args: &[&str]) -> Output {
    bin().args(args).output().expect("spawn hudi-keeper")
}

/// Stdout as UTF-8.
pub fn stdout(o: &Output) -> String {
    String::from_utf8_lossy(&o.stdout).into_owned()
}

/// Stderr as UTF-8.
pub fn stderr(o: &Output) -> String {
    String::from_utf8_lossy(&o.stderr).into_owned()
}

/// A table folder built file by file.
pub struct TableDir {
    pub dir: tempfile::TempDir,
}

impl TableDir {
    /// An empty folder.
    pub fn empty() -> Self {
        Self {
            dir: tempfile::tempdir().expect("tempdir"),
        }
    }

    /// A table with this `hoodie.properties` text.
    pub fn with_properties(text: &str) -> Self {
        let t = Self::empty();
        t.write(".hoodie/hoodie.properties", text.as_bytes());
        t
    }

    /// A version-8 MERGE_ON_READ table without instants.
    pub fn v8_mor() -> Self {
        Self::with_properties(
            "hoodie.table.name=t\nhoodie.table.type=MERGE_ON_READ\nhoodie.table.version=8\nhoodie.timeline.layout.version=2\nhoodie.table.timeline.timezone=UTC\n",
        )
    }

    pub fn path(&self) -> &Path {
        self.dir.path()
    }

    pub fn uri(&self) -> String {
        self.path().to_str().expect("utf-8 temp path").to_string()
    }

    /// Write a file (creating folders).
    pub fn write(&self, rel: &str, bytes: &[u8]) -> PathBuf {
        let p = self.path().join(rel);
        std::fs::create_dir_all(p.parent().expect("parent")).expect("mkdir");
        std::fs::write(&p, bytes).expect("write");
        p
    }

    /// Create empty files.
    pub fn touch(&self, rels: &[&str]) {
        for r in rels {
            self.write(r, b"");
        }
    }

    /// Set the modification time of files of the table.
    pub fn set_mtime(&self, rels: &[&str], at: std::time::SystemTime) {
        for r in rels {
            set_mtime(&self.path().join(r), at);
        }
    }

    /// Make every file of the table `by` older (as if written that long ago).
    pub fn age_all(&self, by: std::time::Duration) {
        age_all(self.path(), by);
    }
}

/// Set a file's modification time (what the store reports as its `last_modified`).
pub fn set_mtime(path: &Path, at: std::time::SystemTime) {
    std::fs::File::options()
        .write(true)
        .open(path)
        .and_then(|f| f.set_modified(at))
        .unwrap_or_else(|e| panic!("cannot set the mtime of {}: {e}", path.display()));
}

/// Set the modification time of every file below `dir` to `by` before now.
pub fn age_all(dir: &Path, by: std::time::Duration) {
    let at = std::time::SystemTime::now() - by;
    let mut stack = vec![dir.to_path_buf()];
    while let Some(d) = stack.pop() {
        for e in std::fs::read_dir(&d).expect("read_dir").flatten() {
            let p = e.path();
            if p.is_dir() {
                stack.push(p);
            } else {
                set_mtime(&p, at);
            }
        }
    }
}

/// Storage options as the binary's `--storage-option key=value` arguments.
pub fn storage_option_args(options: &hudi_keeper_core::storage::StorageOptions) -> Vec<String> {
    options
        .0
        .iter()
        .flat_map(|(k, v)| ["--storage-option".to_string(), format!("{k}={v}")])
        .collect()
}

pub mod api;
pub mod azure;
pub mod config;
pub mod crash;
pub mod daemon;
pub mod engine;
pub mod fixtures;
pub mod glue;
pub mod hms;
pub mod http;
pub mod interop;
pub mod normalize;
pub mod proxy;
pub mod runs;
pub mod s3;
pub mod status;
