//! A table snapshot with the names and bytes that differ from run to run replaced, so that the
//! end states of two runs (an uninterrupted one and one cut off, then rerun) compare equal when
//! they are alike. One function, three presets: what the rollback engine's, the restore
//! engine's and the cut-off runs' tests can hold equal differs (see [`Normalization`]).

use std::collections::BTreeMap;

use super::fixtures::{bump, T1, T2, TF};

/// What a table snapshot is: every object's table-relative key and bytes.
pub type Snapshot = BTreeMap<String, Vec<u8>>;

/// What [`normalize`] replaces besides the times of the runs (rollback and restore instants,
/// named `<R>`, their completion times `<C>`) and the bytes of the files that embed times
/// (rollback, restore and savepoint files, log blocks), which it always replaces.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Normalization {
    /// Other instants than the fixture's (T1, T2, TF and their completion times) are new: named
    /// `<N>` (their completion times `<C>`), their bytes left out. Off, an instant named by a
    /// run's time is named `<R>` and its bytes kept (a version-6 metadata table's deltacommit
    /// that records a rollback).
    pub new_instants: bool,
    /// The bytes of Avro files (a random sync marker in each) are left out.
    pub avro_bytes: bool,
    /// The lock file is left out (its owner and validity differ run to run).
    pub lock_file: bool,
}

impl Normalization {
    /// The rollback engine's crash tests: only the rollback is new; every other file compares
    /// byte for byte.
    pub const ROLLBACK: Normalization = Normalization {
        new_instants: false,
        avro_bytes: false,
        lock_file: false,
    };
    /// The restore engine's crash tests: the restore's children and the metadata table's new
    /// instants have new times.
    pub const RESTORE: Normalization = Normalization {
        new_instants: true,
        avro_bytes: true,
        lock_file: false,
    };
    /// Runs of the binary on a store, cut off and rerun: as [`Self::RESTORE`], and the lock
    /// file is left out.
    pub const RUNS: Normalization = Normalization {
        new_instants: true,
        avro_bytes: true,
        lock_file: true,
    };
}

/// A new instant's time under [`Normalization::new_instants`]: 17 digits (or a metadata-table
/// instant's 20, ending 003), none of the fixture's.
fn is_new(t: &str, known: &[String]) -> bool {
    (t.len() == 17 || (t.len() == 20 && t.ends_with("003")))
        && t.bytes().all(|b| b.is_ascii_digit())
        && !known.iter().any(|k| k == t)
}

/// Whether a file name's action (what follows its times) is a run's: a rollback or a restore.
fn is_run(rest: &str) -> bool {
    rest.starts_with("rollback") || rest.starts_with("restore")
}

/// `snapshot` with run-specific names and bytes replaced as `how` says.
pub fn normalize(snapshot: &Snapshot, how: Normalization) -> Snapshot {
    let known: Vec<String> = [T1, T2, TF]
        .iter()
        .flat_map(|t| [t.to_string(), bump(t)])
        .collect();
    let new = |t: &str| how.new_instants && is_new(t, &known);
    // The requested times of the runs, from their files' names.
    let mut runs: Vec<String> = Vec::new();
    for k in snapshot.keys() {
        for seg in k.split('/') {
            if let Some((times, rest)) = seg.split_once('.') {
                if is_run(rest) {
                    runs.push(times.split('_').next().unwrap_or(times).to_string());
                }
            }
        }
    }
    let of_a_run = |t: &str| runs.iter().any(|r| r == t);
    snapshot
        .iter()
        .filter(|(k, _)| !(how.lock_file && k.starts_with(".hoodie/.locks/")))
        .map(|(k, v)| {
            let k = k
                .split('/')
                .map(|seg| {
                    if of_a_run(seg) {
                        return "<R>".to_string();
                    }
                    let Some((times, rest)) = seg.split_once('.') else {
                        return seg.to_string();
                    };
                    let (first, completion) = match times.split_once('_') {
                        Some((a, b)) => (a, Some(b)),
                        None => (times, None),
                    };
                    let first = if is_run(rest) || (!how.new_instants && of_a_run(first)) {
                        "<R>".to_string()
                    } else if new(first) {
                        "<N>".to_string()
                    } else {
                        first.to_string()
                    };
                    match completion {
                        Some(_) if first == "<R>" => format!("<R>_<C>.{rest}"),
                        Some(c) if new(c) => format!("{first}_<C>.{rest}"),
                        Some(c) => format!("{first}_{c}.{rest}"),
                        None => format!("{first}.{rest}"),
                    }
                })
                .collect::<Vec<_>>()
                .join("/");
            let v = if k.contains(".rollback")
                || k.contains(".restore")
                || k.contains(".savepoint")
                || k.contains("<N>")
                || (how.avro_bytes && v.starts_with(b"Obj\x01"))
                || v.starts_with(b"#HUDI#\0")
            {
                Vec::new()
            } else {
                v.clone()
            };
            (k, v)
        })
        .collect()
}

/// The keys of a snapshot, in order.
pub fn names(snapshot: &Snapshot) -> Vec<String> {
    snapshot.keys().cloned().collect()
}
