//! The status page's suites: a demo table with a write rolled back and one pending.

use std::path::Path;
use std::time::{Duration, SystemTime};

use super::{run, set_mtime, stderr};

/// The two writes of [`demo_with_history`]'s table.
pub struct DemoHistory {
    /// The demo's failed write, rolled back by `hudi-keeper rollback`.
    pub rolled_back: String,
    /// A later write whose writer stopped six minutes ago: its heartbeat expired.
    pub pending: String,
}

/// `hudi-keeper demo --no-rollback` at `table`, its failed write rolled back by
/// `hudi-keeper rollback --lock none`, then a write requested eight minutes ago whose heartbeat
/// stopped six minutes ago, left pending (a daemon watching the table must only observe it).
pub fn demo_with_history(table: &Path) -> DemoHistory {
    let path = table.to_str().expect("a UTF-8 path");
    let out = run(&["demo", "--dir", path, "--no-rollback"]);
    assert!(out.status.success(), "demo: {}", stderr(&out));
    let timeline = table.join(".hoodie/timeline");
    let names: Vec<String> = std::fs::read_dir(&timeline)
        .expect("the demo's timeline")
        .map(|e| {
            e.expect("a timeline entry")
                .file_name()
                .to_string_lossy()
                .into_owned()
        })
        .collect();
    let failed: Vec<&str> = names
        .iter()
        .filter_map(|n| n.strip_suffix(".deltacommit.inflight"))
        .filter(|t| !names.iter().any(|n| n.starts_with(&format!("{t}_"))))
        .collect();
    assert_eq!(failed.len(), 1, "one failed write in the demo: {names:?}");
    let rolled_back = failed[0].to_string();
    let out = run(&["rollback", path, "--lock", "none", "--yes"]);
    assert!(out.status.success(), "rollback: {}", stderr(&out));
    let pending = super::fixtures::instant_now(-480_000);
    for suffix in ["deltacommit.requested", "deltacommit.inflight"] {
        let file = timeline.join(format!("{pending}.{suffix}"));
        std::fs::write(&file, b"").expect("write");
        set_mtime(&file, SystemTime::now() - Duration::from_secs(480));
    }
    let heartbeat = table.join(".hoodie/.heartbeat").join(&pending);
    std::fs::create_dir_all(table.join(".hoodie/.heartbeat")).expect("mkdir");
    std::fs::write(&heartbeat, b"").expect("write the heartbeat");
    set_mtime(&heartbeat, SystemTime::now() - Duration::from_secs(360));
    DemoHistory {
        rolled_back,
        pending,
    }
}
