//! The tables registered through the API, kept across restarts: one file per table,
//! `state_dir/api-tables/<name>.json` (the registration's [`TableEntry`], mode 0600, written
//! atomically by [`state_files::write_atomically`]), so that a registration or a deletion writes
//! its own table's bytes and no other's, however many tables are kept.
//!
//! Versions before this one kept every entry in one file, `state_dir/tables.json`, rewritten
//! whole at each change (1,000 registrations of 4 KB URIs took 37 s). At start its entries are
//! moved to files of their own, then it is removed. An entry that cannot have a file of its own
//! (a name no registration may have now) stays in it until it is deleted through the API.
//!
//! What cannot be read (a file, the folder, `tables.json`) is a problem of the whole registry:
//! it is reported, what could be read is restored, and the API registers and deletes no table
//! until the operator fixes it and restarts, so that no write is made on a registry only partly
//! known. Problems name files relative to `state_dir` (they are shown by `/readyz`); the logs
//! name the full paths.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::Mutex as StdMutex;

use anyhow::Context;
use tracing::{info, warn};

use super::config::{valid_name, TableEntry};
use super::state_files;

/// The folder of the per-table files, in `state_dir`.
pub const DIR: &str = "api-tables";

/// The single file of older versions, in `state_dir`.
pub const LEGACY_FILE: &str = "tables.json";

/// What an unreadable file of the registry means, for the warning that names it.
const CONSEQUENCE: &str = "its table is not restored, and the API registers and deletes no table until the file is fixed or removed and the daemon restarted";

/// The tables registered through the API, on disk.
#[derive(Debug)]
pub struct Registry {
    dir: PathBuf,
    legacy_file: PathBuf,
    /// The entries kept in `tables.json` still (those that could not be moved).
    legacy: StdMutex<Vec<TableEntry>>,
}

/// What was read at start.
#[derive(Debug, Default)]
pub struct Restored {
    /// The entries, in name order.
    pub entries: Vec<TableEntry>,
    /// Why the registry cannot be changed through the API: a file or the folder that could not
    /// be read, or `tables.json` that could not be moved.
    pub problem: Option<String>,
}

impl Registry {
    /// The registry of `state_dir` (nothing is read yet: see [`Registry::load`]).
    pub fn new(state_dir: &Path) -> Self {
        Self {
            dir: state_dir.join(DIR),
            legacy_file: state_dir.join(LEGACY_FILE),
            legacy: StdMutex::new(Vec::new()),
        }
    }

    /// Where the registry is, relative to `state_dir`, for `/readyz`.
    pub fn shown_name() -> String {
        format!("{DIR}/")
    }

    /// Read every entry (files of at most `max_bytes`), and move those of `tables.json` to
    /// files of their own when nothing else is wrong. Blocking: called once at start.
    pub fn load(&self, max_bytes: u64) -> Restored {
        let mut problems = Vec::new();
        let (docs, unreadable) = match state_files::load_dir::<TableEntry>(
            &self.dir,
            max_bytes,
            "API table registry",
            CONSEQUENCE,
        ) {
            Ok(loaded) => loaded,
            Err(e) => {
                warn!(dir = %self.dir.display(), error = %format!("{e:#}"), "the folder of the tables registered through the API cannot be read");
                problems.push(format!("{DIR}/ cannot be read: {}", e.root_cause()));
                Default::default()
            }
        };
        for u in unreadable.values() {
            problems.push(format!("{} cannot be read: {}", u.file, u.error));
        }
        let mut entries: BTreeMap<String, TableEntry> = BTreeMap::new();
        for (stem, entry) in docs {
            if entry.name == stem {
                entries.insert(stem, entry);
            } else {
                // Deleting `entry.name` would not remove this file: it would come back.
                problems.push(format!(
                    "{DIR}/{stem}.json holds the table `{}`, not `{stem}`",
                    entry.name.escape_debug()
                ));
            }
        }
        let mut legacy = Vec::new();
        match read_legacy(&self.legacy_file) {
            Ok(None) => {}
            Err(e) => problems.push(e),
            Ok(Some(old)) => {
                // Moved only onto a registry read whole; otherwise kept as it is, and what it
                // holds restored (unless a file of the same name, newer, is there).
                let blocked = !problems.is_empty();
                let count = old.len();
                let mut moved = 0usize;
                let mut failed = None;
                for e in old {
                    if entries.contains_key(&e.name) || unreadable.contains_key(&e.name) {
                        if !blocked && !unreadable.contains_key(&e.name) {
                            // Moved by an earlier start that stopped before removing the file
                            // (or named twice in it): the file of its own is the newer entry.
                            warn!(table = %e.name.escape_debug(), "an entry of tables.json is kept in a file of its own already: the file's is kept");
                        }
                        continue;
                    }
                    if !blocked && failed.is_none() && valid_name(&e.name) {
                        match self.write(&e) {
                            Ok(()) => {
                                moved += 1;
                                entries.insert(e.name.clone(), e);
                                continue;
                            }
                            Err(err) => failed = Some(err),
                        }
                    }
                    legacy.push(e);
                }
                if let Some(err) = failed {
                    warn!(file = %self.legacy_file.display(), error = %format!("{err:#}"), "could not move the entries of tables.json to files of their own; it is kept as it is");
                    problems.push(format!(
                        "the entries of {LEGACY_FILE} could not be moved to {DIR}/: {}",
                        err.root_cause()
                    ));
                } else if !blocked {
                    let done = if legacy.is_empty() {
                        state_files::remove_durably(&self.legacy_file)
                    } else {
                        self.write_legacy(&legacy)
                    };
                    match done {
                        Ok(()) => info!(moved, of = count, kept = legacy.len(), "moved the tables registered through the API from tables.json to api-tables/ (one file per table)"),
                        Err(err) => {
                            warn!(file = %self.legacy_file.display(), error = %format!("{err:#}"), "could not remove tables.json after moving its entries");
                            problems.push(format!(
                                "{LEGACY_FILE} could not be removed once its entries were moved to {DIR}/: {}",
                                err.root_cause()
                            ));
                        }
                    }
                }
            }
        }
        for e in &legacy {
            entries.entry(e.name.clone()).or_insert_with(|| e.clone());
        }
        *self.legacy.lock().unwrap_or_else(|e| e.into_inner()) = legacy;
        Restored {
            entries: entries.into_values().collect(),
            problem: (!problems.is_empty()).then(|| problems.join("; ")),
        }
    }

    /// Keep `entry` (a registration: its name is a valid one): its own file, replaced whole.
    /// Blocking.
    pub fn put(&self, entry: &TableEntry) -> anyhow::Result<()> {
        self.write(entry)
    }

    /// Forget the entry named `name`, wherever it is kept. Blocking.
    pub fn remove(&self, name: &str) -> anyhow::Result<()> {
        let mut legacy = self.legacy.lock().unwrap_or_else(|e| e.into_inner());
        if legacy.iter().any(|e| e.name == name) {
            let rest: Vec<TableEntry> = legacy.iter().filter(|e| e.name != name).cloned().collect();
            if rest.is_empty() {
                state_files::remove_durably(&self.legacy_file)?;
            } else {
                self.write_legacy(&rest)?;
            }
            *legacy = rest;
            return Ok(());
        }
        drop(legacy);
        if !valid_name(name) {
            return Ok(()); // no file can have been written for it
        }
        state_files::remove_durably(&self.dir.join(format!("{name}.json")))
    }

    fn write(&self, entry: &TableEntry) -> anyhow::Result<()> {
        let bytes = serde_json::to_vec_pretty(entry)?;
        state_files::write_atomically(&self.dir, &format!("{}.json", entry.name), &bytes)
    }

    fn write_legacy(&self, entries: &[TableEntry]) -> anyhow::Result<()> {
        let dir = self
            .legacy_file
            .parent()
            .filter(|d| !d.as_os_str().is_empty())
            .unwrap_or(Path::new("."));
        let bytes = serde_json::to_vec_pretty(entries)?;
        state_files::write_atomically(dir, LEGACY_FILE, &bytes)
    }
}

/// The entries of `tables.json`, `None` when there is none; the error names the file relative
/// to `state_dir` (the full path is logged).
fn read_legacy(path: &Path) -> Result<Option<Vec<TableEntry>>, String> {
    let bytes = match std::fs::read(path) {
        Ok(b) => b,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
        Err(e) => {
            warn!(file = %path.display(), error = %e, "cannot read the registry of tables registered through the API");
            return Err(format!("{LEGACY_FILE} cannot be read: {e}"));
        }
    };
    serde_json::from_slice(&bytes)
        .with_context(|| format!("{LEGACY_FILE} is not a table registry"))
        .map(Some)
        .map_err(|e| format!("{e:#}"))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn entry(name: &str) -> TableEntry {
        serde_json::from_value(serde_json::json!({"name": name, "uri": format!("/data/{name}")}))
            .unwrap()
    }

    fn names(r: &Restored) -> Vec<&str> {
        r.entries.iter().map(|e| e.name.as_str()).collect()
    }

    #[test]
    fn tables_json_is_moved_to_one_file_per_table_and_removed() {
        let state = tempfile::tempdir().unwrap();
        let old = serde_json::to_vec(&[entry("b"), entry("a")]).unwrap();
        std::fs::write(state.path().join(LEGACY_FILE), old).unwrap();
        let r = Registry::new(state.path());
        let got = r.load(1 << 20);
        assert_eq!(got.problem, None);
        assert_eq!(names(&got), ["a", "b"]);
        assert!(!state.path().join(LEGACY_FILE).exists());
        assert!(state.path().join("api-tables/a.json").exists());
        // Read back from the files alone.
        let again = Registry::new(state.path()).load(1 << 20);
        assert_eq!(names(&again), ["a", "b"]);
        r.remove("a").unwrap();
        assert_eq!(names(&Registry::new(state.path()).load(1 << 20)), ["b"]);
    }

    #[test]
    fn an_entry_that_cannot_have_a_file_stays_in_tables_json_until_removed() {
        let state = tempfile::tempdir().unwrap();
        let old = serde_json::to_vec(&[entry("a"), entry("a/b")]).unwrap();
        let legacy = state.path().join(LEGACY_FILE);
        std::fs::write(&legacy, old).unwrap();
        let r = Registry::new(state.path());
        let got = r.load(1 << 20);
        assert_eq!(got.problem, None);
        assert_eq!(names(&got), ["a", "a/b"]);
        let kept: Vec<TableEntry> =
            serde_json::from_slice(&std::fs::read(&legacy).unwrap()).unwrap();
        assert_eq!(kept, [entry("a/b")]);
        r.remove("a/b").unwrap();
        assert!(!legacy.exists());
        assert_eq!(names(&Registry::new(state.path()).load(1 << 20)), ["a"]);
    }

    #[test]
    fn a_file_of_its_own_wins_over_tables_json_and_a_problem_blocks_the_move() {
        let state = tempfile::tempdir().unwrap();
        let r = Registry::new(state.path());
        let mut newer = entry("a");
        newer.uri = "/data/newer".into();
        r.put(&newer).unwrap();
        let legacy = state.path().join(LEGACY_FILE);
        std::fs::write(
            &legacy,
            serde_json::to_vec(&[entry("a"), entry("c")]).unwrap(),
        )
        .unwrap();
        // An unreadable file: nothing is moved, tables.json stays, what can be read is restored.
        std::fs::write(state.path().join("api-tables/b.json"), b"{").unwrap();
        let got = Registry::new(state.path()).load(1 << 20);
        let problem = got.problem.clone().unwrap();
        assert!(problem.contains("api-tables/b.json"), "{problem}");
        assert!(
            !problem.contains(&state.path().display().to_string()),
            "{problem}"
        );
        assert_eq!(names(&got), ["a", "c"]);
        assert_eq!(got.entries[0].uri, "/data/newer");
        assert!(legacy.exists());
        assert!(!state.path().join("api-tables/c.json").exists());
        // Fixed: moved.
        std::fs::remove_file(state.path().join("api-tables/b.json")).unwrap();
        let got = Registry::new(state.path()).load(1 << 20);
        assert_eq!(got.problem, None);
        assert_eq!(names(&got), ["a", "c"]);
        assert_eq!(got.entries[0].uri, "/data/newer");
        assert!(!legacy.exists());
    }

    #[test]
    fn a_file_naming_another_table_is_a_problem() {
        let state = tempfile::tempdir().unwrap();
        let r = Registry::new(state.path());
        r.put(&entry("a")).unwrap();
        std::fs::rename(
            state.path().join("api-tables/a.json"),
            state.path().join("api-tables/z.json"),
        )
        .unwrap();
        let got = Registry::new(state.path()).load(1 << 20);
        assert!(got.problem.unwrap().contains("api-tables/z.json"));
        assert!(got.entries.is_empty());
    }
}
