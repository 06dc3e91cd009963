//! The filters of a scan: globs on the names (`hoodie.table.name`) and on the locations of the
//! tables found. In a location glob `*` and `?` stay within one folder name and `**` crosses
//! folders (`s3://b/wh/**/tmp_*`); a name glob is matched against the whole name.

use globset::{GlobBuilder, GlobSet, GlobSetBuilder};
use serde::{Deserialize, Serialize};

use super::DiscoverError;

/// The globs as written (a source's `include_names`, `exclude_names`, `include_locations`,
/// `exclude_locations`).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct FilterSettings {
    /// A table is kept only if its name matches one of these (empty: every name).
    pub include_names: Vec<String>,
    /// A table whose name matches one of these is left out.
    pub exclude_names: Vec<String>,
    /// A table is kept only if its location matches one of these (empty: every location).
    pub include_locations: Vec<String>,
    /// A table whose location matches one of these is left out, and a folder whose location
    /// matches one is not listed at all (nor anything below it).
    pub exclude_locations: Vec<String>,
}

impl FilterSettings {
    /// Whether no glob is set.
    pub fn is_empty(&self) -> bool {
        self.include_names.is_empty()
            && self.exclude_names.is_empty()
            && self.include_locations.is_empty()
            && self.exclude_locations.is_empty()
    }
}

/// The compiled globs.
#[derive(Debug, Clone)]
pub struct Filters {
    include_names: Option<GlobSet>,
    exclude_names: Option<GlobSet>,
    include_locations: Option<GlobSet>,
    exclude_locations: Option<GlobSet>,
}

impl Filters {
    /// Every table, every folder.
    pub fn none() -> Self {
        Self {
            include_names: None,
            exclude_names: None,
            include_locations: None,
            exclude_locations: None,
        }
    }

    /// Compile `settings` for a scan of `prefix` (named in errors).
    pub fn compile(prefix: &str, settings: &FilterSettings) -> Result<Self, DiscoverError> {
        let set = |key: &'static str, globs: &[String]| -> Result<Option<GlobSet>, DiscoverError> {
            if globs.is_empty() {
                return Ok(None);
            }
            let mut b = GlobSetBuilder::new();
            for g in globs {
                let glob = GlobBuilder::new(g)
                    .literal_separator(true)
                    .backslash_escape(true)
                    .build()
                    .map_err(|e| DiscoverError::Glob {
                        prefix: prefix.to_string(),
                        key,
                        glob: g.clone(),
                        reason: e.kind().to_string(),
                    })?;
                b.add(glob);
            }
            b.build().map(Some).map_err(|e| DiscoverError::Glob {
                prefix: prefix.to_string(),
                key,
                glob: globs.join(", "),
                reason: e.to_string(),
            })
        };
        Ok(Self {
            include_names: set("include_names", &settings.include_names)?,
            exclude_names: set("exclude_names", &settings.exclude_names)?,
            include_locations: set("include_locations", &settings.include_locations)?,
            exclude_locations: set("exclude_locations", &settings.exclude_locations)?,
        })
    }

    /// Whether the folder at `location` is left out with everything below it.
    pub fn skips_folder(&self, location: &str) -> bool {
        self.exclude_locations
            .as_ref()
            .is_some_and(|s| s.is_match(location))
    }

    /// Whether the table `name` at `location` is kept.
    pub fn keeps(&self, name: &str, location: &str) -> bool {
        let hit = |s: &Option<GlobSet>, what: &str| s.as_ref().map(|s| s.is_match(what));
        hit(&self.exclude_names, name) != Some(true)
            && hit(&self.exclude_locations, location) != Some(true)
            && hit(&self.include_names, name) != Some(false)
            && hit(&self.include_locations, location) != Some(false)
    }
}
