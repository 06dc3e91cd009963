//! The soak's writer JVMs: which Hudi versions they run, and what they printed.

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;

/// HUDI_KEEPER_SOAK_VERSIONS: the version keys of the version-9 table's writers (default `1.1`);
/// each must write table version 9.
pub fn soak_versions() -> Vec<String> {
    let keys: Vec<String> = std::env::var("HUDI_KEEPER_SOAK_VERSIONS")
        .unwrap_or_else(|_| "1.1".to_string())
        .split(',')
        .map(|k| k.trim().to_string())
        .filter(|k| !k.is_empty())
        .collect();
    assert!(
        !keys.is_empty() && keys.iter().all(|k| k == "1.1" || k == "1.2"),
        "HUDI_KEEPER_SOAK_VERSIONS takes version keys that write table version 9 (1.1, 1.2): {keys:?}"
    );
    keys
}

/// What the writers printed: the records each write announced before committing, and the
/// instants they saw commit.
#[derive(Default)]
pub struct WriterLog {
    pub announced: BTreeMap<String, serde_json::Value>,
    pub committed: BTreeSet<String>,
    pub failed: usize,
}

pub fn read_writer_log(path: &Path, into: &mut WriterLog) {
    let text = std::fs::read_to_string(path).unwrap_or_default();
    for line in text.lines() {
        if let Some(rest) = line.strip_prefix("COMMITTING ") {
            // A line cut short by the kill is not a complete announcement.
            if let Some((t, records)) = rest.split_once(' ') {
                if let Ok(v) = serde_json::from_str(records) {
                    into.announced.insert(t.to_string(), v);
                }
            }
        } else if let Some(t) = line.strip_prefix("COMMITTED ") {
            into.committed.insert(t.trim().to_string());
        } else if line.starts_with("FAILED ") {
            into.failed += 1;
        }
    }
}
