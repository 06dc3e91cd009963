//! What the audit knows about a table's instants, and the class of a data file by the instant that
//! wrote it. Pure: the executor ([`super::audit`]) gathers the [`Knowledge`] and feeds it every
//! listed file.

use std::collections::{BTreeMap, BTreeSet};

use serde::{Deserialize, Serialize};

/// A data file's class, strongest first: a file is put in the first class that applies.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Class {
    /// Written by a completed instant (active or archived timeline), or named by a completed
    /// rollback's metadata as its own (a command-block log file).
    Committed,
    /// Written by a pending instant: left alone.
    Pending,
    /// Written by an instant a completed rollback or restore undid: its rollback missed the
    /// file, or a zombie writer wrote it afterwards.
    RollbackLeftover,
    /// Written by an instant on neither timeline, older than the oldest instant on the active
    /// timeline, with every archive location read whole.
    Orphan,
    /// Anything else: reported, never deleted.
    Unknown,
}

impl Class {
    /// Every class, strongest first.
    pub const ALL: [Class; 5] = [
        Class::Committed,
        Class::Pending,
        Class::RollbackLeftover,
        Class::Orphan,
        Class::Unknown,
    ];

    /// The name in reports.
    pub fn as_str(self) -> &'static str {
        match self {
            Class::Committed => "committed",
            Class::Pending => "pending",
            Class::RollbackLeftover => "rollback_leftover",
            Class::Orphan => "orphan",
            Class::Unknown => "unknown",
        }
    }
}

/// Instants below this are Hudi's special ones (`00000000000000` init, `…01` metadata bootstrap,
/// `…02` full bootstrap, in 14 or 17 digits): never on a timeline, never an orphan.
const SPECIAL_INSTANT_BELOW: &str = "00000000000010";

/// What the audit knows about the instants of one table.
#[derive(Debug, Default, Clone)]
pub struct Knowledge {
    /// Requested times of completed instants on the active timeline.
    pub active_completed: BTreeSet<String>,
    /// Requested times of pending instants on the active timeline.
    pub active_pending: BTreeSet<String>,
    /// The oldest requested time on the active timeline.
    pub oldest_active: Option<String>,
    /// Requested times of completed instants on the archived timeline.
    pub archived_completed: BTreeSet<String>,
    /// Requested times of every instant on the archived timeline, in whatever state.
    pub archived_any: BTreeSet<String>,
    /// Whether every archive location was read whole.
    pub archive_complete: bool,
    /// Instants a completed rollback or restore undid (active or archived) -> the rollback or
    /// restore instant that names it.
    pub rolled_back: BTreeMap<String, String>,
    /// Paths (relative to the base path) that a completed rollback's metadata accounts for
    /// (command-block log files it wrote, version-6 log files of the failed write it left for
    /// its command block to undo) -> that rollback's instant.
    pub rollback_files: BTreeMap<String, String>,
    /// File groups in which a completed rollback wrote a command block undoing an instant, as
    /// `<partition>/<file id>@<instant>` -> that rollback's instant. Versions 8 and 9 name a log
    /// file by the deltacommit that wrote it: Hudi 1.0/1.1 roll back the failed write's log files
    /// of a file group the metadata table's compaction already took in by a command-block log
    /// file named with the failed instant, and leave the failed log files in place for it to undo
    /// (their metadata names only the command-block file).
    pub command_blocked: BTreeMap<String, String>,
    /// Table version 5: a log file whose every block is of an instant that a completed rollback
    /// undid with a command block in the same file group was left in place for that block to
    /// undo. Hudi 0.13 keeps the failed write's log files so, and its rollback metadata (which
    /// has no `logFilesFromFailedCommit`) does not name them.
    pub blocks_undone_in_place: bool,
}

/// The key of [`Knowledge::command_blocked`] for a log file at `path` (table-relative) of
/// `instant`, or `None` for a path that is no log file.
pub fn command_blocked_key(path: &str, instant: &str) -> Option<String> {
    let (partition, name) = path.rsplit_once('/').unwrap_or(("", path));
    match crate::table::files::DataFile::parse(name)? {
        crate::table::files::DataFile::Log { file_id, .. } => {
            Some(format!("{partition}/{file_id}@{instant}"))
        }
        crate::table::files::DataFile::Base { .. } => None,
    }
}

/// A file's class and why.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Verdict {
    /// The class.
    pub class: Class,
    /// Why, in words for the report.
    pub reason: String,
}

fn verdict(class: Class, reason: impl Into<String>) -> Verdict {
    Verdict {
        class,
        reason: reason.into(),
    }
}

impl Knowledge {
    /// Whether the log file at `path` of `instant` is one a completed rollback left in place for
    /// its command block to undo ([`Knowledge::command_blocked`]).
    pub fn undone_in_place(&self, path: &str, instant: &str) -> bool {
        !self.rollback_files.contains_key(path)
            && command_blocked_key(path, instant)
                .is_some_and(|k| self.command_blocked.contains_key(&k))
    }

    /// [`Self::undone_in_place`] for a log file holding blocks of each of `instants` (table
    /// version 5, where a rollback voids a failed write's blocks with a command block and keeps
    /// the file): every one of them undone so. No instant: false.
    pub fn blocks_all_undone_in_place(&self, path: &str, instants: &[String]) -> bool {
        self.blocks_undone_in_place
            && !instants.is_empty()
            && instants.iter().all(|i| self.undone_in_place(path, i))
    }

    /// The class of the file at `path` written by `instant`.
    pub fn classify(&self, path: &str, instant: &str) -> Verdict {
        if let Some(v) = in_hoodie_like_folder(path) {
            return v;
        }
        if let Some(r) = self.rollback_files.get(path) {
            return verdict(
                Class::Committed,
                format!("accounted for by completed rollback {r}"),
            );
        }
        if let Some(r) =
            command_blocked_key(path, instant).and_then(|k| self.command_blocked.get(&k))
        {
            return verdict(
                Class::Committed,
                format!("its blocks of {instant} are undone in place by completed rollback {r}'s command block in its file group"),
            );
        }
        self.classify_instant(instant)
    }

    /// The class of a file written by `instant` (see [`Class`] for the order).
    pub fn classify_instant(&self, instant: &str) -> Verdict {
        if self.active_completed.contains(instant) {
            return verdict(Class::Committed, "completed instant on the active timeline");
        }
        if self.archived_completed.contains(instant) {
            return verdict(
                Class::Committed,
                "completed instant on the archived timeline",
            );
        }
        if self.active_pending.contains(instant) {
            return verdict(Class::Pending, "pending instant");
        }
        if let Some(r) = self.rolled_back.get(instant) {
            return verdict(
                Class::RollbackLeftover,
                format!("instant {instant} was rolled back by {r}, which missed this file or ran before it was written"),
            );
        }
        if instant < SPECIAL_INSTANT_BELOW {
            return verdict(
                Class::Unknown,
                format!("{instant} is one of Hudi's special instants (bootstrap)"),
            );
        }
        let Some(oldest) = &self.oldest_active else {
            return verdict(Class::Unknown, "the active timeline is empty");
        };
        if instant >= oldest.as_str() {
            return verdict(
                Class::Unknown,
                format!("{instant} is on no timeline but not older than the oldest active instant {oldest}"),
            );
        }
        if self.archived_any.contains(instant) {
            return verdict(
                Class::Unknown,
                format!("{instant} is archived, but not as completed"),
            );
        }
        if !self.archive_complete {
            return verdict(
                Class::Unknown,
                format!("{instant} is older than the active timeline and the archived timeline could not be read whole"),
            );
        }
        verdict(
            Class::Orphan,
            format!("{instant} is on neither timeline and older than the oldest active instant {oldest}"),
        )
    }

    /// The strongest class of a file holding blocks of each of `instants` (a version-6 log file:
    /// appended by several instants). No instant at all: unknown.
    pub fn classify_blocks<'a>(
        &self,
        path: &str,
        instants: impl IntoIterator<Item = &'a str>,
    ) -> Verdict {
        if let Some(v) = in_hoodie_like_folder(path) {
            return v;
        }
        if let Some(r) = self.rollback_files.get(path) {
            return verdict(
                Class::Committed,
                format!("accounted for by completed rollback {r}"),
            );
        }
        let instants: Vec<&str> = instants.into_iter().collect();
        if self.blocks_undone_in_place && !instants.is_empty() {
            let by: Option<Vec<&String>> = instants
                .iter()
                .map(|i| command_blocked_key(path, i).and_then(|k| self.command_blocked.get(&k)))
                .collect();
            if let Some(by) = by {
                let by: BTreeSet<&String> = by.into_iter().collect();
                return verdict(
                    Class::Committed,
                    format!(
                        "its blocks are undone in place by the command block of completed rollback {} in its file group",
                        by.into_iter().cloned().collect::<Vec<_>>().join(", ")
                    ),
                );
            }
        }
        instants
            .into_iter()
            .map(|i| self.classify_instant(i))
            .min_by_key(|v| v.class)
            .unwrap_or_else(|| verdict(Class::Unknown, "a log file without readable blocks"))
    }
}

/// A file in a top-level folder named like Hudi's own (`.hoodie-old/`, `.hoodie.bak/`: a copy of
/// `.hoodie` an operator keeps): never a partition of this table, and its metadata-table files
/// carry this table's instants, so whatever they are named, they are unknown (never repaired).
fn in_hoodie_like_folder(path: &str) -> Option<Verdict> {
    let (top, _) = path.split_once('/')?;
    (top.starts_with(".hoodie") && top != ".hoodie").then(|| {
        verdict(
            Class::Unknown,
            format!("inside `{top}/`, a folder named like Hudi's `.hoodie` (a copy of it?), not a partition: left alone"),
        )
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn set(items: &[&str]) -> BTreeSet<String> {
        items.iter().map(|s| s.to_string()).collect()
    }

    fn knowledge() -> Knowledge {
        Knowledge {
            active_completed: set(&["20240105000000000", "20240107000000000"]),
            active_pending: set(&["20240108000000000"]),
            oldest_active: Some("20240105000000000".into()),
            archived_completed: set(&["20240101000000000", "20240102000000000"]),
            archived_any: set(&[
                "20240101000000000",
                "20240102000000000",
                "20240103000000000",
            ]),
            archive_complete: true,
            rolled_back: BTreeMap::from([
                ("20240104000000000".into(), "20240105000000000".into()),
                // rolled back, then run again under the same instant (a compaction)
                ("20240107000000000".into(), "20240105000000000".into()),
            ]),
            rollback_files: BTreeMap::from([(
                "p/.f1_20240104000000000.log.1_0-0-0".into(),
                "20240105000000000".into(),
            )]),
            command_blocked: BTreeMap::from([(
                "p/f1@20240104000000000".into(),
                "20240105000000000".into(),
            )]),
            blocks_undone_in_place: false,
        }
    }

    #[test]
    fn classes_in_their_order() {
        let k = knowledge();
        let c = |i: &str| k.classify("p/f", i).class;
        assert_eq!(c("20240105000000000"), Class::Committed);
        assert_eq!(c("20240101000000000"), Class::Committed);
        assert_eq!(c("20240108000000000"), Class::Pending);
        assert_eq!(c("20240104000000000"), Class::RollbackLeftover);
        // completed again after its rollback: committed outranks the leftover
        assert_eq!(c("20240107000000000"), Class::Committed);
        assert_eq!(c("20240100000000000"), Class::Orphan);
        // archived, but not as completed
        assert_eq!(c("20240103000000000"), Class::Unknown);
        // newer than the oldest active instant but on no timeline
        assert_eq!(c("20240106000000000"), Class::Unknown);
        assert_eq!(c("00000000000001"), Class::Unknown);
        assert_eq!(c("00000000000000000"), Class::Unknown);
    }

    /// A copy of `.hoodie` an operator keeps beside it (`.hoodie-old/`, `.hoodie.bak/`) holds
    /// metadata-table files named with instants of this table: never a partition, never repaired.
    #[test]
    fn files_in_a_folder_named_like_hoodie_are_unknown_whatever_their_instant() {
        let k = knowledge();
        for dir in [".hoodie-old", ".hoodie.bak", ".hoodie_backup"] {
            let path = format!("{dir}/metadata/files/.files-0000_20240104000000000.log.1_0-0-0");
            let v = k.classify(&path, "20240104000000000");
            assert_eq!(v.class, Class::Unknown, "{path}: {}", v.reason);
            assert!(v.reason.contains(dir), "{}", v.reason);
            let v = k.classify_blocks(&path, ["20240104000000000"]);
            assert_eq!(v.class, Class::Unknown, "{path}: {}", v.reason);
        }
        // A partition that merely starts with a dot, or contains `.hoodie` deeper, is classified.
        for path in [
            ".p/f_0-0-0_20240104000000000.parquet",
            "p/.hoodie-x/f_0-0-0_20240104000000000.parquet",
        ] {
            assert_eq!(
                k.classify(path, "20240104000000000").class,
                Class::RollbackLeftover,
                "{path}"
            );
        }
    }

    #[test]
    fn a_version_5_log_file_is_undone_in_place_only_when_all_its_blocks_are() {
        let mut k = knowledge();
        let path = "p/.f1_20240101000000000.log.2_0-1-1";
        let t = "20240104000000000".to_string();
        assert!(!k.blocks_all_undone_in_place(path, std::slice::from_ref(&t)));
        k.blocks_undone_in_place = true;
        assert!(k.blocks_all_undone_in_place(path, std::slice::from_ref(&t)));
        assert!(!k.blocks_all_undone_in_place(path, &[t.clone(), "20240105000000000".into()]));
        assert!(!k.blocks_all_undone_in_place(path, &[]));
        assert!(!k.blocks_all_undone_in_place("p/.f9_20240101000000000.log.2_0-1-1", &[t]));
    }

    #[test]
    fn a_rollbacks_own_file_is_committed_whatever_its_instant() {
        let k = knowledge();
        let v = k.classify("p/.f1_20240104000000000.log.1_0-0-0", "20240104000000000");
        assert_eq!(v.class, Class::Committed, "{}", v.reason);
    }

    #[test]
    fn a_failed_log_file_its_rollback_undid_in_place_is_committed() {
        let k = knowledge();
        // The failed writer's log file of the file group where the rollback wrote its command
        // block (Hudi 1.0/1.1, APPEND markers after the metadata table's compaction).
        let v = k.classify("p/.f1_20240104000000000.log.1_1-2-0", "20240104000000000");
        assert_eq!(v.class, Class::Committed, "{}", v.reason);
        // Another file group, or a base file, of the same instant: a leftover.
        let v = k.classify("p/.f9_20240104000000000.log.1_1-2-0", "20240104000000000");
        assert_eq!(v.class, Class::RollbackLeftover);
        let v = k.classify("p/f1_1-2-0_20240104000000000.parquet", "20240104000000000");
        assert_eq!(v.class, Class::RollbackLeftover);
        // Another partition.
        let v = k.classify("q/.f1_20240104000000000.log.1_1-2-0", "20240104000000000");
        assert_eq!(v.class, Class::RollbackLeftover);
    }

    #[test]
    fn no_orphan_without_the_whole_archive() {
        let mut k = knowledge();
        k.archive_complete = false;
        let v = k.classify_instant("20240100000000000");
        assert_eq!(v.class, Class::Unknown);
        assert!(v.reason.contains("could not be read whole"), "{}", v.reason);
        k.oldest_active = None;
        assert_eq!(
            k.classify_instant("20240100000000000").class,
            Class::Unknown
        );
    }

    #[test]
    fn a_log_file_takes_the_strongest_class_of_its_blocks() {
        let k = knowledge();
        let v = k.classify_blocks(
            "p/.f2_x.log.1_0-0-0",
            ["20240104000000000", "20240105000000000"],
        );
        assert_eq!(v.class, Class::Committed);
        let v = k.classify_blocks("p/.f2_x.log.1_0-0-0", ["20240104000000000"]);
        assert_eq!(v.class, Class::RollbackLeftover);
        let v = k.classify_blocks("p/.f2_x.log.1_0-0-0", []);
        assert_eq!(v.class, Class::Unknown);
    }

    #[test]
    fn a_version_5_log_file_of_a_rolled_back_instant_is_kept_where_its_file_group_has_the_command_block(
    ) {
        // Hudi 0.13 leaves the failed write's log file `.f1_<base>.log.3_0-0-0` in place; the
        // rollback's command block in f1 undoes its blocks, and its metadata names only the
        // command-block file.
        let mut k = knowledge();
        let failed_log = "p/.f1_20240101000000000.log.3_0-0-0";
        assert_eq!(
            k.classify_blocks(failed_log, ["20240104000000000"]).class,
            Class::RollbackLeftover
        );
        k.blocks_undone_in_place = true;
        let v = k.classify_blocks(failed_log, ["20240104000000000"]);
        assert_eq!(v.class, Class::Committed, "{}", v.reason);
        assert!(v.reason.contains("20240105000000000"), "{}", v.reason);
        // another file group got no command block: still a leftover
        let other = "p/.f2_20240101000000000.log.3_0-0-0";
        assert_eq!(
            k.classify_blocks(other, ["20240104000000000"]).class,
            Class::RollbackLeftover
        );
        // a block of an instant no rollback undid there keeps the file out of the rule
        assert_eq!(
            k.classify_blocks(failed_log, ["20240104000000000", "20240108000000000"])
                .class,
            Class::Pending
        );
    }
}
