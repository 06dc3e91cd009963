//! The metadata table against the store, pure: the files the metadata table's `files` partition
//! lists per data partition, held compactly ([`Listed`]: one sorted name arena per partition
//! and a bit per name), ticked off as the audit's listing streams by, and what is left on
//! either side ([`MetadataTableCheck`]).
//!
//! Only the audit's `committed` files count as "not listed": files of pending instants,
//! leftovers of rollbacks, orphans and unknown files are the audit's own classes. A file the
//! metadata table lists is ticked off by any file of that name on the store, whatever its class
//! (it is not missing: readers find it). Names are compared, not sizes (log files grow).

use std::collections::{BTreeMap, BTreeSet};

use serde::Serialize;

use crate::plan::metadata_table::files_listing::{listed_partitions_by, FilesRecord};
use crate::plan::metadata_table::name_hash::{NameHash, NameHasher};

/// The most file names the check holds (17 bytes each, plus their merged records while the
/// metadata table is read); a metadata table listing more is not checked.
pub const MAX_LISTED_FILES: usize = 4_000_000;

/// What the audit found comparing the metadata table with the store.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct MetadataTableCheck {
    /// Whether the comparison was made.
    pub checked: bool,
    /// Why not.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub not_checked: Option<String>,
    /// Partitions the metadata table lists.
    pub listed_partitions: u64,
    /// Files the metadata table lists, in every partition.
    pub listed_files: u64,
    /// Files it lists that the store lacks (readers of the metadata table fail on them).
    pub missing_from_store: u64,
    /// Committed files on the store it does not list (invisible to its readers).
    pub not_listed: u64,
    /// Files it lists that the audit calls `rollback_leftover` or `orphan`.
    pub listed_not_committed: u64,
    /// Every partition with a disagreement (`""`: the base path itself).
    pub partitions: BTreeMap<String, PartitionDrift>,
}

impl MetadataTableCheck {
    /// A check not made, and why.
    pub fn not_checked(why: impl Into<String>) -> Self {
        Self {
            not_checked: Some(why.into()),
            ..Self::default()
        }
    }

    /// Whether the metadata table was compared and disagrees with the store.
    pub fn disagrees(&self) -> bool {
        self.checked
            && (self.missing_from_store > 0 || self.not_listed > 0 || self.listed_not_committed > 0)
    }
}

/// The disagreement in one partition.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct PartitionDrift {
    /// Files the metadata table lists that the store lacks.
    pub missing_from_store: u64,
    /// Committed files on the store it does not list.
    pub not_listed: u64,
    /// Examples of the first (table-relative paths).
    pub missing_examples: Vec<String>,
    /// Examples of the second (table-relative paths).
    pub not_listed_examples: Vec<String>,
    /// Files it lists that the audit calls `rollback_leftover` or `orphan` (a zombie writer's
    /// commit completed the metadata table's deltacommit after the rollback): its readers see
    /// them once the rollback is archived.
    #[serde(skip_serializing_if = "is_zero")]
    pub listed_not_committed: u64,
    /// Examples of the third (table-relative paths).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub listed_not_committed_examples: Vec<String>,
}

fn is_zero(n: &u64) -> bool {
    *n == 0
}

/// Whether the metadata table lists one file on the store, as far as the audit knows.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum MetadataTableListing {
    /// The table has no metadata table in use.
    NoMetadataTable,
    /// The metadata table lists it.
    Listed,
    /// The metadata table was compared and does not list it.
    NotListed,
    /// The metadata table could not be compared: it may list it.
    Unknown,
}

/// The names of one partition, as sorted hashes, and whether each was seen.
#[derive(Debug, Default)]
struct Names {
    hashes: Vec<NameHash>,
    seen: Vec<bool>,
}

/// The files the metadata table lists, per data partition, held as hashes of their names
/// ([`NameHasher`]: 17 bytes a file), ticked off as the store's files are seen; the committed
/// files it does not list are counted as they come.
#[derive(Debug)]
pub struct Listed {
    hasher: NameHasher,
    partitions: BTreeMap<String, Names>,
    files: u64,
    drift: BTreeMap<String, PartitionDrift>,
    examples: usize,
}

impl Listed {
    /// The partitions the merged `files` records list, and the files each lists, as Hudi's
    /// readers see them (`getAllPartitionPaths`, then each partition's file-list record, `.` for
    /// the base path): `merged` keyed by `hasher`'s hashes, `partition_name` the name of each
    /// hash the partition list holds. At most `max_files` names, else why not; `examples` per
    /// partition and direction are kept. Each record is dropped once it is held.
    pub fn new(
        mut merged: BTreeMap<String, FilesRecord<NameHash>>,
        hasher: NameHasher,
        partition_name: impl Fn(&NameHash) -> Option<String>,
        max_files: usize,
        examples: usize,
    ) -> Result<Self, String> {
        let Some(partitions) = listed_partitions_by(&merged, partition_name) else {
            return Err("its partition list names a partition hudi-keeper did not read".into());
        };
        let mut out = Listed {
            hasher,
            partitions: BTreeMap::new(),
            files: 0,
            drift: BTreeMap::new(),
            examples,
        };
        let mut total = 0usize;
        for partition in partitions {
            let id = if partition.is_empty() {
                "."
            } else {
                partition.as_str()
            };
            // A map's keys come in order: the hashes are sorted.
            let hashes: Vec<NameHash> = merged
                .remove(id)
                .map(|r| {
                    r.files
                        .into_iter()
                        .filter(|(_, i)| !i.deleted)
                        .map(|(h, _)| h)
                        .collect()
                })
                .unwrap_or_default();
            total = total.saturating_add(hashes.len());
            if total > max_files {
                return Err(format!(
                    "it lists more than {max_files} files, more than hudi-keeper holds to compare"
                ));
            }
            out.files += hashes.len() as u64;
            let seen = vec![false; hashes.len()];
            out.partitions.insert(partition, Names { hashes, seen });
        }
        Ok(out)
    }

    /// A file of `partition` named `name` is on the store; `committed` when the audit calls it
    /// so. Returns whether the metadata table lists it.
    pub fn see(&mut self, partition: &str, name: &str, committed: bool) -> bool {
        if let Some(names) = self.partitions.get_mut(partition) {
            if let Ok(i) = names.hashes.binary_search(&self.hasher.hash(name)) {
                names.seen[i] = true;
                return true;
            }
        }
        if committed {
            let d = self.drift.entry(partition.to_string()).or_default();
            d.not_listed += 1;
            if d.not_listed_examples.len() < self.examples {
                d.not_listed_examples.push(path(partition, name));
            }
        }
        false
    }

    /// A file of `partition` named `name` that the metadata table lists is a leftover or an
    /// orphan by the audit's classes.
    pub fn listed_not_committed(&mut self, partition: &str, name: &str) {
        let d = self.drift.entry(partition.to_string()).or_default();
        d.listed_not_committed += 1;
        if d.listed_not_committed_examples.len() < self.examples {
            d.listed_not_committed_examples.push(path(partition, name));
        }
    }

    /// The comparison, once every file of the store was seen, and the files the store lacks,
    /// whose names (held as hashes) [`Missing::name`] puts into the examples.
    pub fn finish(mut self) -> (MetadataTableCheck, Missing) {
        let mut unseen = BTreeMap::new();
        for (partition, names) in &self.partitions {
            let missing: Vec<NameHash> = names
                .hashes
                .iter()
                .zip(&names.seen)
                .filter(|(_, seen)| !**seen)
                .map(|(h, _)| *h)
                .collect();
            if missing.is_empty() {
                continue;
            }
            self.drift
                .entry(partition.clone())
                .or_default()
                .missing_from_store = missing.len() as u64;
            unseen.insert(partition.clone(), missing);
        }
        let check = MetadataTableCheck {
            checked: true,
            not_checked: None,
            listed_partitions: self.partitions.len() as u64,
            listed_files: self.files,
            missing_from_store: self.drift.values().map(|d| d.missing_from_store).sum(),
            not_listed: self.drift.values().map(|d| d.not_listed).sum(),
            listed_not_committed: self.drift.values().map(|d| d.listed_not_committed).sum(),
            partitions: self.drift,
        };
        let missing = Missing {
            hasher: self.hasher,
            unseen,
            examples: self.examples,
            named: BTreeMap::new(),
        };
        (check, missing)
    }
}

/// The files the metadata table lists and the store lacks, by their hashes, and the names of
/// the first few of each partition once a second read of the metadata table met them.
#[derive(Debug)]
pub struct Missing {
    hasher: NameHasher,
    unseen: BTreeMap<String, Vec<NameHash>>,
    examples: usize,
    named: BTreeMap<String, BTreeSet<String>>,
}

impl Missing {
    /// Whether any file is missing.
    pub fn is_empty(&self) -> bool {
        self.unseen.is_empty()
    }

    /// The hasher the names were held by.
    pub fn hasher(&self) -> &NameHasher {
        &self.hasher
    }

    /// An entry of `partition` named `name` was read again: kept as an example when it is one
    /// of the missing files (the first `examples` names of each partition, in name order).
    pub fn meet(&mut self, partition: &str, name: &str, hash: NameHash) {
        let Some(unseen) = self.unseen.get(partition) else {
            return;
        };
        if unseen.binary_search(&hash).is_err() {
            return;
        }
        let named = self.named.entry(partition.to_string()).or_default();
        named.insert(name.to_string());
        if named.len() > self.examples {
            named.pop_last();
        }
    }

    /// Puts the names met into `check`'s examples.
    pub fn name(self, check: &mut MetadataTableCheck) {
        for (partition, names) in self.named {
            if let Some(d) = check.partitions.get_mut(&partition) {
                d.missing_examples = names.iter().map(|n| path(&partition, n)).collect();
            }
        }
    }
}

fn path(partition: &str, name: &str) -> String {
    if partition.is_empty() {
        name.to_string()
    } else {
        format!("{partition}/{name}")
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::plan::metadata_table::files_listing::{FileInfo, ALL_PARTITIONS_KEY};

    fn rec(t: i32, files: &[(&str, bool)]) -> FilesRecord {
        FilesRecord {
            record_type: t,
            files: files
                .iter()
                .map(|(n, d)| {
                    (
                        n.to_string(),
                        FileInfo {
                            size: 1,
                            deleted: *d,
                        },
                    )
                })
                .collect(),
        }
    }

    /// `m` as the audit reads it (keyed by the hashes of a fresh hasher), held.
    fn listed(
        m: &BTreeMap<String, FilesRecord>,
        max: usize,
        examples: usize,
    ) -> Result<Listed, String> {
        let hasher = NameHasher::new();
        let mut names = std::collections::HashMap::new();
        let hashed = m
            .iter()
            .map(|(k, r)| {
                let files = r
                    .files
                    .iter()
                    .map(|(n, i)| {
                        let h = hasher.hash(n);
                        names.insert(h, n.clone());
                        (h, *i)
                    })
                    .collect();
                (
                    k.clone(),
                    FilesRecord {
                        record_type: r.record_type,
                        files,
                    },
                )
            })
            .collect();
        Listed::new(hashed, hasher, |h| names.get(h).cloned(), max, examples)
    }

    /// The comparison, its examples named by a second read of `m`.
    fn finish(l: Listed, m: &BTreeMap<String, FilesRecord>) -> MetadataTableCheck {
        let (mut check, mut missing) = l.finish();
        for (key, r) in m {
            let partition = if key == "." { "" } else { key.as_str() };
            for name in r.files.keys() {
                let h = missing.hasher().hash(name);
                missing.meet(partition, name, h);
            }
        }
        missing.name(&mut check);
        check
    }

    fn merged() -> BTreeMap<String, FilesRecord> {
        BTreeMap::from([
            (
                ALL_PARTITIONS_KEY.to_string(),
                rec(1, &[("p0", false), ("p1", false), ("gone", true)]),
            ),
            (
                "p0".to_string(),
                rec(
                    2,
                    &[("a", false), ("b", false), ("c", false), ("old", true)],
                ),
            ),
            ("p1".to_string(), rec(2, &[("d", false), ("e", false)])),
            // a file list of a partition the partition list does not name: no reader sees it
            ("gone".to_string(), rec(2, &[("z", false)])),
        ])
    }

    #[test]
    fn both_directions_are_reported_for_every_partition() {
        let mut l = listed(&merged(), 100, 10).unwrap();
        assert!(l.see("p0", "a", true));
        assert!(l.see("p0", "c", false), "listed, of any class");
        // not listed: committed counts, other classes do not
        assert!(!l.see("p0", "x", true));
        assert!(!l.see("p0", "pending", false));
        assert!(!l.see("p0", "old", true), "a deleted entry is not listed");
        assert!(l.see("p1", "d", true));
        assert!(!l.see("p2", "y", true), "a partition it does not list");
        assert!(!l.see("gone", "z", true));
        let c = finish(l, &merged());
        assert!(c.checked && c.disagrees());
        assert_eq!((c.listed_partitions, c.listed_files), (2, 5));
        assert_eq!((c.missing_from_store, c.not_listed), (2, 4));
        assert_eq!(
            c.partitions["p0"],
            PartitionDrift {
                missing_from_store: 1,
                not_listed: 2,
                missing_examples: vec!["p0/b".into()],
                not_listed_examples: vec!["p0/x".into(), "p0/old".into()],
                ..PartitionDrift::default()
            }
        );
        assert_eq!(
            c.partitions["p1"].missing_examples,
            vec!["p1/e".to_string()]
        );
        assert_eq!(c.partitions["p1"].not_listed, 0);
        assert_eq!(
            c.partitions["p2"].not_listed_examples,
            vec!["p2/y".to_string()]
        );
        assert_eq!(c.partitions["gone"].not_listed, 1);
    }

    #[test]
    fn a_listed_leftover_is_a_disagreement() {
        let mut l = listed(&merged(), 100, 10).unwrap();
        for (p, n) in [("p0", "a"), ("p0", "b"), ("p1", "d"), ("p1", "e")] {
            assert!(l.see(p, n, true));
        }
        assert!(l.see("p0", "c", false));
        l.listed_not_committed("p0", "c");
        let c = finish(l, &merged());
        assert!(c.disagrees(), "{c:?}");
        assert_eq!(
            (c.missing_from_store, c.not_listed, c.listed_not_committed),
            (0, 0, 1)
        );
        assert_eq!(
            c.partitions["p0"].listed_not_committed_examples,
            vec!["p0/c".to_string()]
        );
    }

    #[test]
    fn a_store_that_matches_shows_no_drift() {
        let mut l = listed(&merged(), 100, 10).unwrap();
        for (p, n) in [
            ("p0", "a"),
            ("p0", "b"),
            ("p0", "c"),
            ("p1", "d"),
            ("p1", "e"),
        ] {
            assert!(l.see(p, n, true));
        }
        let c = finish(l, &merged());
        assert!(c.checked && !c.disagrees(), "{c:?}");
        assert!(c.partitions.is_empty());
    }

    #[test]
    fn the_base_path_is_listed_under_dot_and_examples_are_capped() {
        let m = BTreeMap::from([
            (ALL_PARTITIONS_KEY.to_string(), rec(1, &[(".", false)])),
            (
                ".".to_string(),
                rec(2, &[("a", false), ("b", false), ("c", false)]),
            ),
        ]);
        let mut l = listed(&m, 100, 1).unwrap();
        assert!(l.see("", "a", true));
        let c = finish(l, &m);
        assert_eq!(c.partitions[""].missing_from_store, 2);
        assert_eq!(c.partitions[""].missing_examples, vec!["b".to_string()]);
    }

    #[test]
    fn more_names_than_the_cap_are_not_held() {
        let why = listed(&merged(), 4, 10).unwrap_err();
        assert!(why.contains("more than 4 files"), "{why}");
        assert!(listed(&merged(), 5, 10).is_ok());
    }

    #[test]
    fn a_partition_list_naming_a_hash_it_did_not_read_is_not_checked() {
        let why = Listed::new(
            BTreeMap::from([(
                ALL_PARTITIONS_KEY.to_string(),
                FilesRecord {
                    record_type: 1,
                    files: BTreeMap::from([(
                        NameHasher::new().hash("p0"),
                        FileInfo {
                            size: 0,
                            deleted: false,
                        },
                    )]),
                },
            )]),
            NameHasher::new(),
            |_| None,
            100,
            10,
        )
        .unwrap_err();
        assert!(why.contains("did not read"), "{why}");
    }
}
