//! The names of discovered tables: `hoodie.table.name` where it is free, made into a name the
//! API and the metrics take (letters, digits, `-`, `_`, `.`); where two tables found have the
//! same name, or a table of the config or the API has it, the name and a hash of the location
//! (`orders-5f3a09c2`), which is the same on every replica and every scan.

use std::collections::BTreeMap;

use crate::daemon::config::valid_name;

/// The longest base a name keeps (the hash suffix adds 9).
const MAX_BASE: usize = 100;

/// 32-bit FNV-1a of `text`: short, stable across processes and builds.
fn fnv1a(text: &str) -> u32 {
    let mut h: u32 = 0x811c_9dc5;
    for b in text.as_bytes() {
        h ^= u32::from(*b);
        h = h.wrapping_mul(0x0100_0193);
    }
    h
}

fn clean(text: &str) -> String {
    let s: String = text
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.') {
                c
            } else {
                '_'
            }
        })
        .take(MAX_BASE)
        .collect();
    s.trim_matches('.').to_string()
}

/// The name a table found would have on its own: its Hudi name made valid, else its folder's.
pub fn base_name(hudi_name: &str, location: &str) -> String {
    let from_name = clean(hudi_name.trim());
    if valid_name(&from_name) {
        return from_name;
    }
    let folder = location
        .trim_end_matches('/')
        .rsplit('/')
        .next()
        .unwrap_or("");
    let from_folder = clean(folder);
    if valid_name(&from_folder) {
        return from_folder;
    }
    "table".to_string()
}

/// The base with a hash of the location.
pub fn disambiguated(base: &str, location: &str) -> String {
    format!("{base}-{:08x}", fnv1a(location))
}

/// A name for each of `found` (`(hoodie.table.name, location)`), in order: its base name when
/// no other of them has it and `taken` says it is free, else the base with its location's hash.
pub fn assign<'a>(
    found: impl IntoIterator<Item = (&'a str, &'a str)> + Clone,
    taken: impl Fn(&str) -> bool,
) -> Vec<String> {
    let mut count: BTreeMap<String, usize> = BTreeMap::new();
    for (name, location) in found.clone() {
        *count.entry(base_name(name, location)).or_default() += 1;
    }
    found
        .into_iter()
        .map(|(name, location)| {
            let base = base_name(name, location);
            if count.get(&base) == Some(&1) && !taken(&base) {
                base
            } else {
                disambiguated(&base, location)
            }
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_free_name_is_kept_and_a_shared_one_gets_its_location_hash() {
        let found = [
            ("orders", "s3://b/wh/db1/orders"),
            ("orders", "s3://b/wh/db2/orders"),
            ("users", "s3://b/wh/db1/users"),
            ("taken", "s3://b/wh/taken"),
        ];
        let names = assign(found.iter().copied(), |n| n == "taken");
        assert_eq!(names[2], "users");
        assert!(names[0].starts_with("orders-") && names[1].starts_with("orders-"));
        assert_ne!(names[0], names[1]);
        assert!(names[3].starts_with("taken-"));
        // The same on every call (every replica, every scan).
        assert_eq!(names, assign(found.iter().copied(), |n| n == "taken"));
        assert!(names.iter().all(|n| valid_name(n)), "{names:?}");
    }

    #[test]
    fn a_name_that_cannot_be_taken_is_made_valid_or_replaced_by_the_folders() {
        assert_eq!(base_name("my table/x", "s3://b/t"), "my_table_x");
        assert_eq!(base_name("", "s3://b/wh/t1"), "t1");
        assert_eq!(base_name("..", "/"), "table");
        assert_eq!(base_name(&"a".repeat(300), "/x").len(), MAX_BASE);
    }
}
