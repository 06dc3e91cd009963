//! What a scan changes (pure): the tables a source registered, and which of them a scan adds,
//! renames or drops. A table missing from [`DROP_AFTER`] complete scans in a row is dropped; a
//! scan cut short or with an error drops nothing (and leaves the count of misses as it was).
//!
//! A source tracks its tables by a 128-bit digest of their place key ([`id`]) and the name they
//! are registered under, shared with the table's own (`Arc<str>`): about 40 bytes a table
//! besides the map's own, whatever the length of its URI or name.

use std::collections::BTreeMap;
use std::sync::Arc;

/// Complete scans in a row a table must be missing from before it is dropped.
pub const DROP_AFTER: u8 = 2;

/// How a source knows a table it registered: the first 128 bits of the SHA-256 of its place
/// key (no two places meet by chance, nor by design): one place, one id, on every replica.
pub fn id(place: &str) -> u128 {
    let digest = ring::digest::digest(&ring::digest::SHA256, place.as_bytes());
    let mut first = [0u8; 16];
    first.copy_from_slice(&digest.as_ref()[..16]);
    u128::from_be_bytes(first)
}

/// A table the source registered.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Tracked {
    /// The name it is registered under: the table's own.
    pub name: Arc<str>,
    /// Complete scans in a row that missed it.
    pub misses: u8,
    /// Found by the scan being planned.
    seen: bool,
}

/// The tables a source registered, by [`id`].
#[derive(Debug, Default)]
pub struct SourceState {
    pub tracked: BTreeMap<u128, Tracked>,
    /// Scans in a row that failed or were incomplete.
    pub failed_in_a_row: u64,
}

/// What to do after a scan: indexes into what it found, names of tables to drop.
#[derive(Debug, Default, PartialEq, Eq)]
pub struct Changes {
    /// Found and not registered by this source: to register.
    pub add: Vec<usize>,
    /// Registered by this source under another name than the one the scan derives (a complete
    /// scan only): to register again under it.
    pub rename: Vec<usize>,
    /// Names of the source's tables to drop.
    pub drop: Vec<Arc<str>>,
}

impl SourceState {
    /// Forget the tracked tables that `still_ours` says are no longer registered as this
    /// source's (unregistered meanwhile, or taken over by the API or another source): a later
    /// scan judges them afresh.
    pub fn prune(&mut self, still_ours: impl Fn(&Tracked) -> bool) {
        self.tracked.retain(|_, t| still_ours(t));
    }

    /// The changes a scan that found `found` (each table's id and the name the scan derives
    /// for it, one entry per place) makes; `complete`: it looked everywhere without an error.
    pub fn plan<'a>(
        &mut self,
        found: impl IntoIterator<Item = (u128, &'a str)>,
        complete: bool,
    ) -> Changes {
        let mut changes = Changes::default();
        for (i, (id, name)) in found.into_iter().enumerate() {
            match self.tracked.get_mut(&id) {
                Some(t) => {
                    t.misses = 0;
                    t.seen = true;
                    if complete && *t.name != *name {
                        changes.rename.push(i);
                    }
                }
                None => changes.add.push(i),
            }
        }
        let mut gone = Vec::new();
        for (id, t) in self.tracked.iter_mut() {
            if complete && !t.seen {
                t.misses = t.misses.saturating_add(1);
                if t.misses >= DROP_AFTER {
                    gone.push(*id);
                }
            }
            t.seen = false;
        }
        for id in gone {
            if let Some(t) = self.tracked.remove(&id) {
                changes.drop.push(t.name);
            }
        }
        changes
    }

    /// The table `id` is registered under `name` (the table's own).
    pub fn registered(&mut self, id: u128, name: Arc<str>) {
        self.tracked.insert(
            id,
            Tracked {
                name,
                misses: 0,
                seen: false,
            },
        );
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A scan that found `keys` (named after themselves), whose additions and renames are
    /// registered as `n-<key>`, or as `name(key)` where given.
    fn scan_named(
        s: &mut SourceState,
        keys: &[&str],
        complete: bool,
        name: impl Fn(&str) -> String,
    ) -> (Vec<String>, Vec<String>, Vec<String>) {
        let names: Vec<String> = keys.iter().map(|k| name(k)).collect();
        let changes = s.plan(
            keys.iter().zip(&names).map(|(k, n)| (id(k), n.as_str())),
            complete,
        );
        for &i in changes.add.iter().chain(&changes.rename) {
            s.registered(id(keys[i]), Arc::from(names[i].as_str()));
        }
        let keys_of = |v: &[usize]| v.iter().map(|i| keys[*i].to_string()).collect();
        (
            keys_of(&changes.add),
            keys_of(&changes.rename),
            changes.drop.iter().map(|n| n.to_string()).collect(),
        )
    }

    fn scan(s: &mut SourceState, keys: &[&str], complete: bool) -> (Vec<String>, Vec<String>) {
        let (add, rename, drop) = scan_named(s, keys, complete, |k| format!("n-{k}"));
        assert!(rename.is_empty());
        (add, drop)
    }

    fn none() -> (Vec<String>, Vec<String>) {
        (vec![], vec![])
    }

    #[test]
    fn a_table_is_dropped_after_two_complete_scans_in_a_row_miss_it() {
        let mut s = SourceState::default();
        let (add, _) = scan(&mut s, &["a", "b"], true);
        assert_eq!(add, ["a", "b"]);
        // One miss: kept.
        assert_eq!(scan(&mut s, &["a"], true), none());
        // Found again: the count starts over.
        assert_eq!(scan(&mut s, &["a", "b"], true), none());
        assert_eq!(scan(&mut s, &["a"], true), none());
        let (_, drop) = scan(&mut s, &["a"], true);
        assert_eq!(drop, ["n-b"]);
        assert!(!s.tracked.contains_key(&id("b")));
    }

    #[test]
    fn an_incomplete_scan_drops_nothing_and_counts_no_miss() {
        let mut s = SourceState::default();
        scan(&mut s, &["a", "b"], true);
        assert_eq!(scan(&mut s, &["a"], true), none());
        // Incomplete scans missing b: nothing dropped, b's one miss stays one.
        for _ in 0..5 {
            assert_eq!(scan(&mut s, &[], false), none());
        }
        assert_eq!(s.tracked[&id("b")].misses, 1);
        // An incomplete scan still adds what it found.
        let (add, _) = scan(&mut s, &["a", "c"], false);
        assert_eq!(add, ["c"]);
        let (_, drop) = scan(&mut s, &["a", "c"], true);
        assert_eq!(drop, ["n-b"]);
    }

    #[test]
    fn a_table_no_longer_registered_as_the_sources_is_judged_afresh() {
        let mut s = SourceState::default();
        let (add, _) = scan(&mut s, &["x"], true);
        assert_eq!(add, ["x"]);
        s.prune(|t| &*t.name != "n-x");
        // Pruned: judged afresh (found again, registered again).
        assert_eq!(scan(&mut s, &["x"], true).0, ["x"]);
    }

    #[test]
    fn a_complete_scan_renames_a_table_whose_derived_name_changed() {
        let mut s = SourceState::default();
        scan_named(&mut s, &["a"], true, |_| "orders".into());
        // An incomplete scan renames nothing.
        let (_, rename, _) = scan_named(&mut s, &["a"], false, |_| "orders-1".into());
        assert!(rename.is_empty());
        let (add, rename, drop) = scan_named(&mut s, &["a"], true, |_| "orders-1".into());
        assert_eq!(
            (add.len(), rename, drop.len()),
            (0, vec!["a".to_string()], 0)
        );
        assert_eq!(&*s.tracked[&id("a")].name, "orders-1");
    }

    #[test]
    fn ids_are_stable_and_tell_places_apart() {
        assert_eq!(id("s3://b/t/"), id("s3://b/t/"));
        assert_ne!(id("s3://b/t/"), id("s3://b/u/"));
        assert_ne!(id("s3://b/t/"), id("s3://b/t/\0acct"));
        // The same on every build and host.
        assert_eq!(id(""), 0xe3b0_c442_98fc_1c14_9afb_f4c8_996f_b924);
    }
}
