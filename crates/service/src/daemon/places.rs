//! Where the registered tables are ([`Places`]), so that no table is registered twice: not
//! under another spelling of its place (`s3://B/t` and `s3://b/t`, `az://c/t` and
//! `abfss://c@account.dfs.core.windows.net/t`), nor inside a registered table (its metadata
//! table, a partition folder) or around one. Every registration but the config's is checked
//! against every registered table; [`Registered`] keeps the places with the tables by name, so
//! that both change together under the daemon's lock of its tables.
//!
//! A place is its [`Location::place_key`]: the places around one are found by looking up each
//! of the key's folders, those inside it by a range scan from the key; `O(depth · log n)` a
//! check, and per table the key and the name's shared `Arc` (the table itself keeps no
//! [`Location`]).

use std::collections::BTreeMap;
use std::ops::{Bound, Deref};
use std::sync::Arc;

use super::config::Location;
use super::TableState;

/// The place key of the table at `uri` (a local path where it leads now), `None` when it cannot
/// be compared.
pub fn place_of(uri: &str) -> Option<String> {
    Location::of_table(uri)?.place_key()
}

/// The names registered at one place: one, but for tables of the config file given one place
/// twice (those are not checked).
#[derive(Debug)]
enum Held {
    One(Arc<str>),
    Many(Vec<Arc<str>>),
}

impl Held {
    fn names(&self) -> &[Arc<str>] {
        match self {
            Held::One(n) => std::slice::from_ref(n),
            Held::Many(v) => v,
        }
    }
}

/// How a registered place stands to the one looked for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Overlap {
    /// The same place, perhaps spelt otherwise.
    Same,
    /// The place looked for lies inside the registered one.
    Inside,
    /// The registered place lies inside the one looked for.
    Around,
}

/// A key's place without its Azure account, and the account.
fn split(key: &str) -> (&str, Option<&str>) {
    match key.split_once('\0') {
        Some((base, account)) => (base, Some(account)),
        None => (key, None),
    }
}

/// Whether two containers of one name may be one: the same account, or either the default
/// one (unnamed: it may be any).
fn accounts_meet(a: Option<&str>, b: Option<&str>) -> bool {
    a.is_none() || b.is_none() || a == b
}

/// Whether the place `outer` (a place key) is the place `inner` or holds it.
pub fn encloses(outer: &str, inner: &str) -> bool {
    let ((o, oa), (i, ia)) = (split(outer), split(inner));
    i.starts_with(o) && accounts_meet(oa, ia)
}

/// Where the registered tables are, by place key.
#[derive(Debug, Default)]
pub struct Places {
    by_key: BTreeMap<Box<str>, Held>,
}

impl Places {
    /// `name` is registered at `key`.
    pub fn insert(&mut self, key: &str, name: Arc<str>) {
        match self.by_key.get_mut(key) {
            None => {
                self.by_key.insert(key.into(), Held::One(name));
            }
            Some(held) => {
                let mut names = held.names().to_vec();
                names.push(name);
                *held = Held::Many(names);
            }
        }
    }

    /// `name` is no longer registered at `key`; whether it was.
    pub fn remove(&mut self, key: &str, name: &str) -> bool {
        let Some(held) = self.by_key.get_mut(key) else {
            return false;
        };
        let mut names = held.names().to_vec();
        let Some(i) = names.iter().position(|n| &**n == name) else {
            return false;
        };
        names.remove(i);
        match names.len() {
            0 => {
                self.by_key.remove(key);
            }
            1 => *held = Held::One(names.remove(0)),
            _ => *held = Held::Many(names),
        }
        true
    }

    /// Forget `name` wherever it is (its place reads otherwise than when it was registered: a
    /// local path whose links changed): a walk over every place.
    pub fn remove_name(&mut self, name: &str) -> bool {
        let key = self
            .by_key
            .iter()
            .find(|(_, h)| h.names().iter().any(|n| &**n == name))
            .map(|(k, _)| k.clone());
        key.is_some_and(|k| self.remove(&k, name))
    }

    /// How many places hold a table.
    #[cfg(test)]
    pub fn len(&self) -> usize {
        self.by_key.len()
    }

    /// The names registered at `key`'s place (under any spelling), around it or inside it, with
    /// how each stands to it: at most `max + 1` of them (more than `max` says "too many").
    pub fn overlapping(&self, key: &str, max: usize) -> Vec<(Arc<str>, Overlap)> {
        let mut out = Vec::new();
        let (base, account) = split(key);
        let take = |k: &str, names: &[Arc<str>], how: Overlap, out: &mut Vec<_>| {
            if accounts_meet(split(k).1, account) {
                out.extend(names.iter().map(|n| (n.clone(), how)));
            }
            out.len() > max
        };
        // The folders from the bucket's root down to the place itself: each exactly, with any
        // account (`folder` and `folder\0account` sort before anything below the folder).
        let root = base
            .find("://")
            .and_then(|i| base[i + 3..].find('/').map(|j| i + 3 + j))
            .unwrap_or(base.len());
        for (i, _) in base.match_indices('/').filter(|(i, _)| *i >= root) {
            let folder = &base[..=i];
            let how = if folder.len() == base.len() {
                Overlap::Same
            } else {
                Overlap::Inside
            };
            let end = format!("{folder}\u{1}");
            let range = (Bound::Included(folder), Bound::Excluded(end.as_str()));
            for (k, held) in self.by_key.range::<str, _>(range) {
                if take(k, held.names(), how, &mut out) {
                    return out;
                }
            }
        }
        // Below it: every key that extends it by a folder (no segment holds a control
        // character, so those sort after `base\u{1}`).
        let from = format!("{base}\u{1}");
        let below = (Bound::Excluded(from.as_str()), Bound::Unbounded);
        for (k, held) in self.by_key.range::<str, _>(below) {
            if !k.starts_with(base) {
                break;
            }
            if take(k, held.names(), Overlap::Around, &mut out) {
                return out;
            }
        }
        out
    }
}

/// The registered tables by name (read through `Deref`), and where they are: both changed
/// only together, through [`Registered::insert`] and [`Registered::remove`].
#[derive(Debug, Default)]
pub struct Registered {
    by_name: BTreeMap<Arc<str>, Arc<TableState>>,
    places: Places,
}

impl Deref for Registered {
    type Target = BTreeMap<Arc<str>, Arc<TableState>>;
    fn deref(&self) -> &Self::Target {
        &self.by_name
    }
}

impl Registered {
    /// Where the tables are.
    pub fn places(&self) -> &Places {
        &self.places
    }

    /// Register `state` at `place` (its place key; `None`: a table of the config whose place
    /// is not compared). The caller checked that its name is free.
    pub fn insert(&mut self, state: Arc<TableState>, place: Option<&str>) {
        let name = state.entry.name.clone();
        if let Some(key) = place {
            self.places.insert(key, name.clone());
        }
        self.by_name.insert(name, state);
    }

    /// Unregister `state`, if it is still the registration of its name; whether it was.
    pub fn remove(&mut self, state: &Arc<TableState>) -> bool {
        let name = &state.entry.name;
        if !self
            .by_name
            .get(name)
            .is_some_and(|s| Arc::ptr_eq(s, state))
        {
            return false;
        }
        self.by_name.remove(name);
        let key = place_of(&state.entry.uri);
        if !key.is_some_and(|k| self.places.remove(&k, name)) {
            self.places.remove_name(name);
        }
        true
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn key(uri: &str) -> String {
        Location::parse(uri).unwrap().place_key().unwrap()
    }

    fn places(uris: &[&str]) -> Places {
        let mut p = Places::default();
        for u in uris {
            p.insert(&key(u), Arc::from(*u));
        }
        p
    }

    fn hits(p: &Places, uri: &str) -> Vec<(String, Overlap)> {
        let mut v: Vec<_> = p
            .overlapping(&key(uri), 10)
            .into_iter()
            .map(|(n, o)| (n.to_string(), o))
            .collect();
        v.sort_by(|a, b| a.0.cmp(&b.0));
        v
    }

    #[test]
    fn every_spelling_of_a_place_has_one_key() {
        for (a, b) in [
            ("s3://B/wh/t", "s3a://b/wh//t/"),
            ("/data/lake/t", "file:///data/lake/t"),
            ("az://c/t", "azure://C/t"),
            (
                "abfss://c@Acct.dfs.core.windows.net/t",
                "az://c@acct.blob.core.windows.net/t",
            ),
        ] {
            assert_eq!(key(a), key(b), "{a} {b}");
        }
        assert_ne!(key("s3://b/wh/t"), key("gs://b/wh/t"));
        assert_ne!(key("s3://b/wh/t"), key("s3://b/wh/T"));
        assert_eq!(Location::parse("s3://b/a\u{1}b").unwrap().place_key(), None);
    }

    #[test]
    fn a_place_meets_itself_its_folders_and_what_lies_below_it_only() {
        let p = places(&[
            "s3://b/wh/t",
            "s3://b/wh/t2",
            "s3://b/wh/u/p=1",
            "s3://b/other",
            "s3://c/wh/t",
            "gs://b/wh/t",
        ]);
        assert_eq!(
            hits(&p, "s3://B/wh/t"),
            [("s3://b/wh/t".into(), Overlap::Same)]
        );
        assert_eq!(
            hits(&p, "s3://b/wh/t/.hoodie/metadata"),
            [("s3://b/wh/t".into(), Overlap::Inside)]
        );
        assert_eq!(
            hits(&p, "s3://b/wh/u"),
            [("s3://b/wh/u/p=1".into(), Overlap::Around)]
        );
        assert_eq!(hits(&p, "s3://b/wh").len(), 3);
        assert_eq!(hits(&p, "s3://b").len(), 4);
        // A sibling whose name extends another's is neither inside nor around it.
        assert!(hits(&p, "s3://b/wh/t2x").is_empty());
        assert!(hits(&p, "s3://b/w").is_empty());
        assert!(hits(&p, "s3://b/wh/v").is_empty());
    }

    #[test]
    fn a_key_encloses_another_exactly_where_one_location_lies_under_the_other() {
        let uris = [
            "s3://b/wh/t",
            "s3://B/wh/t/p=1",
            "s3a://b/wh",
            "s3://b/wh/t2",
            "s3://b",
            "s3://c/wh/t",
            "gs://b/wh/t",
            "/lake/t",
            "file:///lake",
            "/lake/t/.hoodie/metadata",
            "az://c/wh/t",
            "abfss://c@one.dfs.core.windows.net/wh",
            "abfss://c@two.dfs.core.windows.net/wh/t/x",
            "azure://d/wh/t",
        ];
        for a in uris {
            for b in uris {
                let (la, lb) = (Location::parse(a).unwrap(), Location::parse(b).unwrap());
                assert_eq!(encloses(&key(a), &key(b)), lb.is_under(&la), "{a} {b}");
            }
        }
    }

    #[test]
    fn an_azure_container_of_the_default_account_meets_it_in_any_account() {
        let p = places(&["az://c/wh/t", "abfss://c@one.dfs.core.windows.net/wh/u"]);
        let two = "abfss://c@two.dfs.core.windows.net/wh";
        assert_eq!(hits(&p, two), [("az://c/wh/t".into(), Overlap::Around)]);
        assert_eq!(
            hits(&p, "abfss://c@one.dfs.core.windows.net/wh/t"),
            [("az://c/wh/t".into(), Overlap::Same)]
        );
        assert_eq!(hits(&p, "az://c/wh/u/x").len(), 1);
        assert!(hits(&p, "abfss://c@two.dfs.core.windows.net/wh/u").is_empty());
    }

    #[test]
    fn at_most_max_and_one_more_are_told_and_a_place_is_forgotten_by_name() {
        let uris: Vec<String> = (0..20).map(|i| format!("s3://b/wh/t{i}")).collect();
        let refs: Vec<&str> = uris.iter().map(String::as_str).collect();
        let mut p = places(&refs);
        assert_eq!(p.overlapping(&key("s3://b/wh"), 3).len(), 4);
        assert!(p.remove(&key("s3://b/wh/t3"), "s3://b/wh/t3"));
        assert!(!p.remove(&key("s3://b/wh/t3"), "s3://b/wh/t3"));
        assert!(p.remove_name("s3://b/wh/t4"));
        assert_eq!(p.len(), 18);
        // Two tables of the config at one place.
        p.insert(&key("s3://b/wh/t0"), Arc::from("again"));
        assert_eq!(hits(&p, "s3://b/wh/t0").len(), 2);
        assert!(p.remove(&key("s3://b/wh/t0"), "again"));
        assert_eq!(hits(&p, "s3://b/wh/t0").len(), 1);
    }
}
