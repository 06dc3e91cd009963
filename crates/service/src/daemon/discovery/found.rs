//! What a scan found, judged before anything is registered: a table is taken only if a store
//! opens its scheme, no `.hoodie` folder holds it (a metadata table), it lies under
//! `server.allowed_table_uris` as written (a local path: where it leads), and, found under a
//! local prefix, it was reached without a symbolic link. Of two tables of one scan at one place
//! (two spellings) or one inside the other, the first in place-key order is taken (the outer
//! one), whatever order the scan found them in: every replica takes the same. Each kind of
//! table left out is logged once a scan, with how many and the first.

use hudi_keeper_core::discover::ScanReport;
use tracing::warn;

use crate::daemon::config::{Config, DiscoverSource, Location, SourceKind};
use crate::daemon::places;

/// The schemes a store opens (`Location` reads `s3a` as `s3` and every Azure scheme as `azure`).
const OPENED: &[&str] = &["file", "s3", "gs", "azure", "memory"];

/// A table a scan found and may register: its place key, and where it is in the report.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Finding {
    pub place: Box<str>,
    pub at: usize,
}

/// Tables left out for one reason: how many, and the first.
#[derive(Debug, Default)]
pub(super) struct Left {
    count: usize,
    first: Option<String>,
}

impl Left {
    pub(super) fn note(&mut self, what: impl FnOnce() -> String) {
        self.count += 1;
        if self.first.is_none() {
            self.first = Some(what());
        }
    }

    pub(super) fn log(&self, source: &str, why: &str) {
        if let Some(first) = &self.first {
            warn!(source = %source, count = self.count, first = %first, "discovery: {why}");
        }
    }
}

/// The tables of `report` that `source` may register, in place-key order, no two of them at
/// one place or one inside the other.
pub fn judge(config: &Config, source: &DiscoverSource, report: &ScanReport) -> Vec<Finding> {
    // A local prefix as written and where it leads, once a scan.
    let local_prefix = match (source.kind, source.prefix.as_deref()) {
        (SourceKind::Prefix, Some(p)) => Location::parse(p)
            .ok()
            .filter(|l| l.scheme() == "file")
            .map(|l| (Location::of_table(p), l)),
        _ => None,
    };
    let (mut unreadable, mut hoodie, mut outside, mut linked, mut overlapping) = (
        Left::default(),
        Left::default(),
        Left::default(),
        Left::default(),
        Left::default(),
    );
    let mut kept: Vec<Finding> = Vec::with_capacity(report.tables.len());
    for (at, t) in report.tables.iter().enumerate() {
        let uri = t.location.as_str();
        let written = match Location::parse(uri) {
            Ok(l) if OPENED.contains(&l.scheme()) => l,
            _ => {
                unreadable.note(|| uri.to_string());
                continue;
            }
        };
        if written.in_hoodie() {
            hoodie.note(|| uri.to_string());
            continue;
        }
        if let Err(e) = config.check_found_location(uri) {
            outside.note(|| e);
            continue;
        }
        // Where it is (a local path: where it leads now).
        let Some(real) = Location::of_table(uri) else {
            unreadable.note(|| uri.to_string());
            continue;
        };
        if let Some((prefix_real, prefix)) = &local_prefix {
            let below = prefix_real
                .as_ref()
                .is_some_and(|r| real.lies_as_written_below(&written, prefix, r));
            if !below {
                linked.note(|| format!("{uri} (leads to {real})"));
                continue;
            }
        }
        if real.in_hoodie() {
            hoodie.note(|| format!("{uri} (leads to {real})"));
            continue;
        }
        let Some(place) = real.place_key() else {
            unreadable.note(|| uri.to_string());
            continue;
        };
        kept.push(Finding {
            place: place.into(),
            at,
        });
    }
    let uri = |f: &Finding| report.tables[f.at].location.as_str();
    kept.sort_by(|a, b| a.place.cmp(&b.place).then_with(|| uri(a).cmp(uri(b))));
    // The places taken so far that may hold the next: in key order, a place's folders come
    // before it and everything below it right after, so the ones that do not hold the next
    // hold nothing after it either.
    let mut open: Vec<usize> = Vec::new();
    let mut taken = vec![false; kept.len()];
    for i in 0..kept.len() {
        let place = &kept[i].place;
        while open
            .last()
            .is_some_and(|&o| !place.starts_with(base(&kept[o].place)))
        {
            open.pop();
        }
        match open
            .iter()
            .find(|&&o| places::encloses(&kept[o].place, place))
        {
            Some(&o) => {
                overlapping.note(|| format!("{} (kept: {})", uri(&kept[i]), uri(&kept[o])));
            }
            None => {
                taken[i] = true;
                open.push(i);
            }
        }
    }
    let mut taken = taken.into_iter();
    kept.retain(|_| taken.next().unwrap_or(false));
    let name = source.name.as_str();
    unreadable.log(
        name,
        "tables found at a location no store opens (its scheme: use s3, gs, az, abfss or a local path), or that cannot be read, are not watched",
    );
    hoodie.log(
        name,
        "tables found inside a .hoodie folder (metadata tables) are not watched on their own",
    );
    outside.log(
        name,
        "tables found outside server.allowed_table_uris are not watched",
    );
    linked.log(
        name,
        "tables found through a symbolic link, or that lead out of the prefix, are not watched",
    );
    overlapping.log(
        name,
        "tables found at one place, or inside another table found, are one table: the first by location is watched",
    );
    kept
}

/// A place key without its Azure account.
fn base(place: &str) -> &str {
    place.split('\0').next().unwrap_or(place)
}

#[cfg(test)]
mod tests {
    use super::*;
    use hudi_keeper_core::discover::FoundTable;
    use hudi_keeper_core::storage::RelPath;

    fn found(locations: &[&str]) -> Vec<String> {
        let config = Config::default();
        let source: DiscoverSource = toml_source("name = \"g\"\nkind = \"glue\"\nregion = \"r\"\n");
        let mut report = super::super::glue::empty_report("t");
        report.tables = locations
            .iter()
            .map(|l| FoundTable {
                location: l.to_string(),
                path: RelPath::root(),
                name: "t".into(),
                table_type: None,
            })
            .collect();
        judge(&config, &source, &report)
            .iter()
            .map(|f| report.tables[f.at].location.clone())
            .collect()
    }

    fn toml_source(text: &str) -> DiscoverSource {
        #[derive(serde::Deserialize)]
        struct One {
            discover: Vec<DiscoverSource>,
        }
        use figment::providers::Format;
        let one: One = figment::Figment::from(figment::providers::Toml::string(&format!(
            "[[discover]]\n{text}"
        )))
        .extract()
        .unwrap();
        one.discover.into_iter().next().unwrap()
    }

    #[test]
    fn the_outer_of_nested_places_and_one_spelling_of_a_place_are_kept() {
        let kept = found(&[
            "s3://b/wh/t/p=1",
            "s3://b/wh/u",
            "s3://b/wh/t",
            "s3a://b/wh/t",
            "s3://b/wh/t2",
            "s3://b/wh/t/p=2/x",
            "az://c/wh/v/x",
            "abfss://c@one.dfs.core.windows.net/wh/v",
            "abfss://c@two.dfs.core.windows.net/wh/v",
        ]);
        assert_eq!(
            kept,
            [
                "abfss://c@one.dfs.core.windows.net/wh/v",
                "abfss://c@two.dfs.core.windows.net/wh/v",
                "s3://b/wh/t",
                "s3://b/wh/t2",
                "s3://b/wh/u",
            ]
        );
    }

    #[test]
    fn metadata_tables_and_schemes_no_store_opens_are_left_out() {
        let kept = found(&[
            "s3://b/wh/t/.hoodie/metadata",
            "hdfs://nn/wh/t",
            "hdfs://nn:8020/wh/t",
            "gs://b/wh/t",
        ]);
        assert_eq!(kept, ["gs://b/wh/t"]);
    }
}
