//! What a scan changes (pure): the tables a source registered, and which of them a scan adds or
//! drops. A table missing from [`DROP_AFTER`] complete scans in a row is dropped; a scan cut
//! short or with an error drops nothing (and leaves the count of misses as it was).

use std::collections::{BTreeMap, BTreeSet};

/// Complete scans in a row a table must be missing from before it is dropped.
pub const DROP_AFTER: u8 = 2;

/// A table the source registered.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Tracked {
    /// The name it is registered under.
    pub name: String,
    /// Complete scans in a row that missed it.
    pub misses: u8,
}

/// A table a scan found: its location (reduced: the key two spellings of one place share), its
/// URI, its `hoodie.table.name`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Found {
    pub key: String,
    pub uri: String,
    pub hudi_name: String,
}

/// The tables a source registered, by location key.
#[derive(Debug, Default)]
pub struct SourceState {
    pub tracked: BTreeMap<String, Tracked>,
    /// Scans in a row that failed or were incomplete.
    pub failed_in_a_row: u64,
}

/// What to do after a scan.
#[derive(Debug, Default, PartialEq, Eq)]
pub struct Changes {
    /// Tables to register (not registered by this source, nor by anything else).
    pub add: Vec<Found>,
    /// Names of the source's tables to drop.
    pub drop: Vec<String>,
}

impl SourceState {
    /// Forget the tracked tables that `still_ours` says are no longer registered as this
    /// source's (unregistered meanwhile, or taken over by the API): a later scan judges them
    /// afresh.
    pub fn prune(&mut self, still_ours: impl Fn(&Tracked) -> bool) {
        self.tracked.retain(|_, t| still_ours(t));
    }

    /// The changes a scan that found `found` makes (`complete`: it looked everywhere without
    /// an error); `elsewhere`: whether a location key is registered by the config, the API or
    /// another source (which keep it).
    pub fn plan(
        &mut self,
        found: Vec<Found>,
        complete: bool,
        elsewhere: impl Fn(&str) -> bool,
    ) -> Changes {
        let mut changes = Changes::default();
        let mut seen = BTreeSet::new();
        for f in found {
            if !seen.insert(f.key.clone()) {
                continue; // one place, spelt twice
            }
            match self.tracked.get_mut(&f.key) {
                Some(t) => t.misses = 0,
                None if elsewhere(&f.key) => {}
                None => changes.add.push(f),
            }
        }
        if complete {
            let mut gone = Vec::new();
            for (key, t) in self.tracked.iter_mut() {
                if seen.contains(key) {
                    continue;
                }
                t.misses = t.misses.saturating_add(1);
                if t.misses >= DROP_AFTER {
                    gone.push(key.clone());
                }
            }
            for key in gone {
                if let Some(t) = self.tracked.remove(&key) {
                    changes.drop.push(t.name);
                }
            }
        }
        changes
    }

    /// `found` was registered under `name`.
    pub fn registered(&mut self, found: &Found, name: String) {
        self.tracked
            .insert(found.key.clone(), Tracked { name, misses: 0 });
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn f(key: &str) -> Found {
        Found {
            key: key.into(),
            uri: key.into(),
            hudi_name: key.into(),
        }
    }

    fn scan(s: &mut SourceState, keys: &[&str], complete: bool) -> Changes {
        let changes = s.plan(keys.iter().map(|k| f(k)).collect(), complete, |k| {
            k == "cfg"
        });
        for a in &changes.add {
            s.registered(a, format!("n-{}", a.key));
        }
        changes
    }

    #[test]
    fn a_table_is_dropped_after_two_complete_scans_in_a_row_miss_it() {
        let mut s = SourceState::default();
        let c = scan(&mut s, &["a", "b", "cfg"], true);
        assert_eq!(
            c.add.iter().map(|a| a.key.as_str()).collect::<Vec<_>>(),
            ["a", "b"]
        );
        // One miss: kept.
        assert_eq!(scan(&mut s, &["a"], true), Changes::default());
        // Found again: the count starts over.
        assert_eq!(scan(&mut s, &["a", "b"], true), Changes::default());
        assert_eq!(scan(&mut s, &["a"], true), Changes::default());
        let c = scan(&mut s, &["a"], true);
        assert_eq!(c.drop, vec!["n-b".to_string()]);
        assert!(!s.tracked.contains_key("b"));
    }

    #[test]
    fn an_incomplete_scan_drops_nothing_and_counts_no_miss() {
        let mut s = SourceState::default();
        scan(&mut s, &["a", "b"], true);
        assert_eq!(scan(&mut s, &["a"], true), Changes::default());
        // Incomplete scans missing b: nothing dropped, b's one miss stays one.
        for _ in 0..5 {
            assert_eq!(scan(&mut s, &[], false), Changes::default());
        }
        assert_eq!(s.tracked["b"].misses, 1);
        // An incomplete scan still adds what it found.
        let c = scan(&mut s, &["a", "c"], false);
        assert_eq!(c.add.len(), 1);
        let c = scan(&mut s, &["a", "c"], true);
        assert_eq!(c.drop, vec!["n-b".to_string()]);
    }

    #[test]
    fn a_location_registered_elsewhere_or_found_twice_is_one_table() {
        let mut s = SourceState::default();
        let c = scan(&mut s, &["cfg", "x", "x"], true);
        assert_eq!(c.add, vec![f("x")]);
        s.prune(|t| t.name != "n-x");
        // Pruned: judged afresh (found again, registered again).
        assert_eq!(scan(&mut s, &["x"], true).add, vec![f("x")]);
    }
}
