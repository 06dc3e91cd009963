//! File names held as 128-bit hashes, so that the audit's check of the metadata table holds
//! 16 bytes per listed file instead of its name (Hudi's names run to 70-90 bytes): a million
//! names in 16 MB. Pure.
//!
//! Two SipHash-1-3 functions with keys drawn at random for each [`NameHasher`] (std's
//! `RandomState`): names chosen by a writer cannot be made to collide, and two different names
//! share a hash with a probability of about n²/2¹²⁹ (for 10⁷ names, about 10⁻²⁵). A hash stands
//! for its name only within one hasher.

use std::hash::{BuildHasher, RandomState};

/// The hash of one file name (see the module docs).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct NameHash(u64, u64);

/// Hashes names with keys of its own.
#[derive(Debug, Clone, Default)]
pub struct NameHasher {
    a: RandomState,
    b: RandomState,
}

impl NameHasher {
    /// A hasher with fresh random keys.
    pub fn new() -> Self {
        Self::default()
    }

    /// The hash of `name`.
    pub fn hash(&self, name: &str) -> NameHash {
        NameHash(self.a.hash_one(name), self.b.hash_one(name))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::BTreeSet;

    #[test]
    fn a_name_hashes_alike_within_one_hasher_and_names_apart() {
        let h = NameHasher::new();
        assert_eq!(h.hash("a_0-1-0_1.parquet"), h.hash("a_0-1-0_1.parquet"));
        let n = 100_000;
        let hashes: BTreeSet<NameHash> = (0..n).map(|i| h.hash(&format!("{i:08x}"))).collect();
        assert_eq!(hashes.len(), n, "no two of {n} names share a hash");
        // Another hasher has other keys.
        assert_ne!(NameHasher::new().hash("x"), h.hash("x"));
    }
}
