//! The table configuration in `.hoodie/hoodie.properties`: the lowest layer above storage and
//! Hudi's bytes, which the timeline and the table handle read.

pub mod properties;

use std::collections::BTreeMap;
use std::fmt;
use std::sync::{Arc, OnceLock};

use serde::Serialize;

use crate::storage::RelPath;

/// Property keys hudi-keeper reads.
pub mod keys {
    /// `hoodie.table.name`
    pub const NAME: &str = "hoodie.table.name";
    /// `hoodie.table.type`
    pub const TYPE: &str = "hoodie.table.type";
    /// `hoodie.table.version`
    pub const VERSION: &str = "hoodie.table.version";
    /// `hoodie.timeline.layout.version`
    pub const LAYOUT: &str = "hoodie.timeline.layout.version";
    /// `hoodie.timeline.path`
    pub const TIMELINE_PATH: &str = "hoodie.timeline.path";
    /// `hoodie.table.timeline.timezone`
    pub const TIMEZONE: &str = "hoodie.table.timeline.timezone";
    /// `hoodie.table.metadata.partitions`
    pub const MDT_PARTITIONS: &str = "hoodie.table.metadata.partitions";
    /// `hoodie.table.metadata.partitions.inflight`
    pub const MDT_PARTITIONS_INFLIGHT: &str = "hoodie.table.metadata.partitions.inflight";
    /// `hoodie.table.base.file.format`
    pub const BASE_FILE_FORMAT: &str = "hoodie.table.base.file.format";
    /// `hoodie.archivelog.folder`: the layout-1 archive folder under `.hoodie`.
    pub const ARCHIVELOG_FOLDER: &str = "hoodie.archivelog.folder";
    /// `hoodie.timeline.history.path`: the layout-2 archive (LSM timeline) folder under the
    /// timeline folder.
    pub const TIMELINE_HISTORY_PATH: &str = "hoodie.timeline.history.path";
}

/// Why a table's configuration cannot be used. Every variant names the table.
#[derive(Debug, thiserror::Error)]
pub enum ConfigError {
    /// `hoodie.properties` is absent.
    #[error("`{table}` is not a Hudi table: `.hoodie/hoodie.properties` does not exist")]
    Missing {
        /// The table URI.
        table: String,
    },
    /// The file could not be parsed.
    #[error("`.hoodie/hoodie.properties` of `{table}` is corrupt at {source}")]
    Corrupt {
        /// The table URI.
        table: String,
        /// Where and why.
        #[source]
        source: properties::PropertiesError,
    },
    /// The file is not text.
    #[error("`.hoodie/hoodie.properties` of `{table}` is not UTF-8 text (corrupt?)")]
    NotText {
        /// The table URI.
        table: String,
    },
    /// A required key is absent.
    #[error("`.hoodie/hoodie.properties` of `{table}` has no `{key}` (corrupt or truncated?)")]
    MissingKey {
        /// The table URI.
        table: String,
        /// The key.
        key: &'static str,
    },
    /// A key has a value hudi-keeper does not understand.
    #[error("`{key}={value}` in table `{table}`: {reason}")]
    Invalid {
        /// The table URI.
        table: String,
        /// The key.
        key: &'static str,
        /// The value found.
        value: String,
        /// What was expected or why it is refused.
        reason: String,
    },
}

/// `hoodie.table.type`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub enum TableType {
    /// Copy-on-write.
    #[serde(rename = "COPY_ON_WRITE")]
    CopyOnWrite,
    /// Merge-on-read.
    #[serde(rename = "MERGE_ON_READ")]
    MergeOnRead,
}

impl TableType {
    /// Hudi's name for it.
    pub fn as_str(self) -> &'static str {
        match self {
            TableType::CopyOnWrite => "COPY_ON_WRITE",
            TableType::MergeOnRead => "MERGE_ON_READ",
        }
    }
}

impl fmt::Display for TableType {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// The table versions hudi-keeper supports.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum TableVersion {
    /// Hudi 0.12 / 0.13 (timeline layout 1, as version 6; see docs/compatibility.md for what
    /// differs). hudi-keeper never upgrades it.
    V5,
    /// Hudi 0.14 / 0.15.
    V6,
    /// Hudi 1.0.
    V8,
    /// Hudi 1.1.
    V9,
}

impl TableVersion {
    /// The schema its completed rollback and restore files are written in (Hudi 0.13's for
    /// version 5).
    pub fn metadata_schema(self) -> crate::format::rollback::MetadataSchema {
        match self {
            Self::V5 => crate::format::rollback::MetadataSchema::Hudi013,
            _ => crate::format::rollback::MetadataSchema::Current,
        }
    }

    /// The number in `hoodie.table.version`.
    pub fn number(self) -> u32 {
        match self {
            TableVersion::V5 => 5,
            TableVersion::V6 => 6,
            TableVersion::V8 => 8,
            TableVersion::V9 => 9,
        }
    }

    /// The timeline layout this version uses.
    pub fn layout(self) -> TimelineLayout {
        match self {
            TableVersion::V5 | TableVersion::V6 => TimelineLayout::V1,
            TableVersion::V8 | TableVersion::V9 => TimelineLayout::V2,
        }
    }
}

impl TableVersion {
    /// A Hudi 0.x table (versions 5 and 6): timeline layout 1, and a merge-on-read rollback voids
    /// the failed write's blocks with a command block in the file slice it appended to (1.x
    /// tables: in a new log file named with the instant).
    pub fn is_0x(self) -> bool {
        matches!(self, TableVersion::V5 | TableVersion::V6)
    }
}

impl Serialize for TableVersion {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_u32(self.number())
    }
}

/// `hoodie.timeline.layout.version`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum TimelineLayout {
    /// Layout 1: the timeline in `.hoodie/`, completed files named `T.action`.
    V1,
    /// Layout 2: the timeline in `.hoodie/timeline/`, completed files named `T_C.action`.
    V2,
}

impl TimelineLayout {
    /// The number in `hoodie.timeline.layout.version`.
    pub fn number(self) -> u32 {
        match self {
            TimelineLayout::V1 => 1,
            TimelineLayout::V2 => 2,
        }
    }
}

impl Serialize for TimelineLayout {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_u32(self.number())
    }
}

/// `hoodie.table.timeline.timezone`: the zone instant times are written in.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub enum TimelineTimezone {
    /// The writers' JVM default zone (Hudi's default).
    #[serde(rename = "LOCAL")]
    Local,
    /// UTC.
    #[serde(rename = "UTC")]
    Utc,
}

/// What hudi-keeper needs from `hoodie.properties`.
#[derive(Debug, Clone, Serialize)]
pub struct TableConfig {
    /// `hoodie.table.name`.
    pub name: Box<str>,
    /// `hoodie.table.type` (Hudi's default: copy-on-write).
    pub table_type: TableType,
    /// `hoodie.table.version`.
    pub version: TableVersion,
    /// `hoodie.timeline.layout.version` (implied by the version when absent).
    pub timeline_layout: TimelineLayout,
    /// The active timeline folder, relative to the table base path.
    #[serde(serialize_with = "as_str")]
    pub timeline_dir: Arc<str>,
    /// `hoodie.table.timeline.timezone`.
    pub timezone: TimelineTimezone,
    /// Metadata-table partitions that are enabled (empty: no metadata table in use).
    pub metadata_partitions: Box<[String]>,
    /// Metadata-table partitions being built.
    pub metadata_partitions_inflight: Box<[String]>,
    /// `hoodie.table.base.file.format`.
    #[serde(serialize_with = "as_str")]
    pub base_file_format: Arc<str>,
    /// The layout-1 archive folder, `.hoodie/<hoodie.archivelog.folder>` (`archived` by
    /// default), relative to the table base path. Tables upgraded from layout 1 may keep one.
    #[serde(skip)]
    pub archive_dir: Arc<str>,
    /// Layout 2: the LSM (archived) timeline folder,
    /// `<timeline folder>/<hoodie.timeline.history.path>` (`history` by default).
    #[serde(skip)]
    pub history_dir: Option<Arc<str>>,
}

fn as_str<S: serde::Serializer>(v: &Arc<str>, s: S) -> Result<S::Ok, S::Error> {
    s.serialize_str(v)
}

/// `value` as one text shared by every table that has it when it is one of the values almost
/// every table has (Hudi's defaults: the timeline, archive and history folders, the base file
/// format), else as its own: a process watching 100,000 tables keeps one copy of each.
fn shared(value: &str) -> Arc<str> {
    const COMMON: [&str; 7] = [
        ".hoodie",
        ".hoodie/timeline",
        ".hoodie/archived",
        ".hoodie/timeline/history",
        "PARQUET",
        "HFILE",
        "ORC",
    ];
    static SHARED: OnceLock<[Arc<str>; 7]> = OnceLock::new();
    let shared = SHARED.get_or_init(|| COMMON.map(Arc::from));
    match COMMON.iter().position(|c| *c == value) {
        Some(i) => shared[i].clone(),
        None => Arc::from(value),
    }
}

impl TableConfig {
    /// The file, relative to the table base path.
    pub const PATH: &'static str = ".hoodie/hoodie.properties";

    /// Parse the text of `hoodie.properties` of table `table`.
    pub fn parse(table: &str, bytes: &[u8]) -> Result<Self, ConfigError> {
        let text = std::str::from_utf8(bytes).map_err(|_| ConfigError::NotText {
            table: table.to_string(),
        })?;
        let props = properties::parse(text).map_err(|source| ConfigError::Corrupt {
            table: table.to_string(),
            source,
        })?;
        Self::from_properties(table, props)
    }

    /// Interpret parsed properties of table `table`.
    pub fn from_properties(
        table: &str,
        props: BTreeMap<String, String>,
    ) -> Result<Self, ConfigError> {
        let p = Props {
            table,
            props: &props,
        };
        let version = p.version()?;
        let timeline_layout = p.timeline_layout(version)?;
        let table_type = p.table_type()?;
        let timeline_dir = p.timeline_dir(timeline_layout)?;
        let timezone = p.timezone()?;
        let archive_dir = shared(&p.sub_folder(keys::ARCHIVELOG_FOLDER, ".hoodie", "archived")?);
        let history_dir = match timeline_layout {
            TimelineLayout::V1 => None,
            TimelineLayout::V2 => Some(shared(&p.sub_folder(
                keys::TIMELINE_HISTORY_PATH,
                &timeline_dir,
                "history",
            )?)),
        };
        Ok(TableConfig {
            name: p.get(keys::NAME).unwrap_or_default().into(),
            table_type,
            version,
            timeline_layout,
            timeline_dir: shared(&timeline_dir),
            timezone,
            metadata_partitions: p.list(keys::MDT_PARTITIONS).into_boxed_slice(),
            metadata_partitions_inflight: p.list(keys::MDT_PARTITIONS_INFLIGHT).into_boxed_slice(),
            base_file_format: shared(p.get(keys::BASE_FILE_FORMAT).unwrap_or("PARQUET")),
            archive_dir,
            history_dir,
        })
    }

    /// Whether the metadata table is in use (some partition of it is enabled).
    pub fn metadata_table_enabled(&self) -> bool {
        !self.metadata_partitions.is_empty()
    }

    /// The active timeline folder as a relative path.
    pub fn timeline_path(&self) -> RelPath {
        RelPath::parse(&self.timeline_dir).unwrap_or_else(|_| RelPath::root())
    }
}

/// The parsed properties of one table, read key by key.
struct Props<'a> {
    table: &'a str,
    props: &'a BTreeMap<String, String>,
}

impl Props<'_> {
    /// The trimmed value of `key`.
    fn get(&self, key: &str) -> Option<&str> {
        self.props.get(key).map(|v| v.trim())
    }

    /// The comma-separated values of `key` (none when absent).
    fn list(&self, key: &str) -> Vec<String> {
        self.get(key)
            .map(|v| {
                v.split(',')
                    .map(str::trim)
                    .filter(|s| !s.is_empty())
                    .map(str::to_string)
                    .collect::<Vec<_>>()
            })
            .unwrap_or_default()
    }

    fn invalid(&self, key: &'static str, value: &str, reason: String) -> ConfigError {
        ConfigError::Invalid {
            table: self.table.to_string(),
            key,
            value: value.to_string(),
            reason,
        }
    }

    /// `hoodie.table.version`: required, 5, 6, 8 or 9.
    fn version(&self) -> Result<TableVersion, ConfigError> {
        let version_raw = self
            .get(keys::VERSION)
            .ok_or_else(|| ConfigError::MissingKey {
                table: self.table.to_string(),
                key: keys::VERSION,
            })?;
        match version_raw {
            "5" => Ok(TableVersion::V5),
            "6" => Ok(TableVersion::V6),
            "8" => Ok(TableVersion::V8),
            "9" => Ok(TableVersion::V9),
            other => {
                let reason = match other.parse::<u32>() {
                    Ok(n) if n < 5 => "tables older than version 5 (Hudi 0.12) are not supported; upgrade the table with Hudi first".to_string(),
                    Ok(7) => "table version 7 is an intermediate upgrade state that hudi-keeper does not support; finish the upgrade to 8 with Hudi first".to_string(),
                    Ok(_) => "this table version is newer than hudi-keeper knows (it supports 5, 6, 8 and 9)".to_string(),
                    Err(_) => "not a number".to_string(),
                };
                Err(self.invalid(keys::VERSION, other, reason))
            }
        }
    }

    /// `hoodie.timeline.layout.version`: the version's own (1 or 2), the default.
    fn timeline_layout(&self, version: TableVersion) -> Result<TimelineLayout, ConfigError> {
        let timeline_layout =
            match self.get(keys::LAYOUT) {
                None => version.layout(),
                Some("1") => TimelineLayout::V1,
                Some("2") => TimelineLayout::V2,
                Some(other) => return Err(self.invalid(
                    keys::LAYOUT,
                    other,
                    "only timeline layouts 1 and 2 are supported (layout 0 predates Hudi 0.5.1)"
                        .into(),
                )),
            };
        if timeline_layout != version.layout() {
            return Err(self.invalid(
                keys::LAYOUT,
                &timeline_layout.number().to_string(),
                format!(
                    "table version {} uses timeline layout {}",
                    version.number(),
                    version.layout().number()
                ),
            ));
        }
        Ok(timeline_layout)
    }

    /// `hoodie.table.type`, copy-on-write by default.
    fn table_type(&self) -> Result<TableType, ConfigError> {
        match self.get(keys::TYPE) {
            None | Some("COPY_ON_WRITE") => Ok(TableType::CopyOnWrite),
            Some("MERGE_ON_READ") => Ok(TableType::MergeOnRead),
            Some(other) => Err(self.invalid(
                keys::TYPE,
                other,
                "expected COPY_ON_WRITE or MERGE_ON_READ".into(),
            )),
        }
    }

    /// The active timeline folder: `.hoodie` in layout 1, `.hoodie/<hoodie.timeline.path>`
    /// (`timeline` by default) in layout 2.
    fn timeline_dir(&self, layout: TimelineLayout) -> Result<String, ConfigError> {
        match layout {
            TimelineLayout::V1 => Ok(".hoodie".to_string()),
            TimelineLayout::V2 => {
                let sub = self.get(keys::TIMELINE_PATH).unwrap_or("timeline");
                let path = RelPath::parse(&format!(".hoodie/{sub}")).map_err(|e| {
                    self.invalid(keys::TIMELINE_PATH, sub, format!("not a folder name: {e}"))
                })?;
                Ok(path.to_string())
            }
        }
    }

    /// `<parent>/<value of key>` (`default` when absent), checked to be a relative folder path.
    fn sub_folder(
        &self,
        key: &'static str,
        parent: &str,
        default: &str,
    ) -> Result<String, ConfigError> {
        let sub = self.get(key).filter(|s| !s.is_empty()).unwrap_or(default);
        let path = RelPath::parse(&format!("{parent}/{sub}"))
            .map_err(|e| self.invalid(key, sub, format!("not a folder name: {e}")))?;
        Ok(path.to_string())
    }

    /// `hoodie.table.timeline.timezone`, LOCAL by default.
    fn timezone(&self) -> Result<TimelineTimezone, ConfigError> {
        match self.get(keys::TIMEZONE) {
            None => Ok(TimelineTimezone::Local),
            Some(v) if v.eq_ignore_ascii_case("LOCAL") => Ok(TimelineTimezone::Local),
            Some(v) if v.eq_ignore_ascii_case("UTC") => Ok(TimelineTimezone::Utc),
            Some(other) => Err(self.invalid(keys::TIMEZONE, other, "expected LOCAL or UTC".into())),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cfg(text: &str) -> Result<TableConfig, ConfigError> {
        TableConfig::parse("file:///t", text.as_bytes())
    }

    #[test]
    fn reads_a_version_6_mor_table() {
        let c = cfg("hoodie.table.name=trips\nhoodie.table.type=MERGE_ON_READ\nhoodie.table.version=6\nhoodie.timeline.layout.version=1\nhoodie.table.metadata.partitions=files,column_stats\n").unwrap();
        assert_eq!(c.version, TableVersion::V6);
        assert_eq!(c.table_type, TableType::MergeOnRead);
        assert_eq!(c.timeline_layout, TimelineLayout::V1);
        assert_eq!(&*c.timeline_dir, ".hoodie");
        assert_eq!(&*c.metadata_partitions, ["files", "column_stats"]);
        assert!(c.metadata_table_enabled());
        assert_eq!(c.timezone, TimelineTimezone::Local);
    }

    #[test]
    fn reads_a_version_5_table_as_hudi_0_13_writes_it() {
        // hoodie.properties of a table Hudi 0.13.1's Java client made (tests/interop, 0.13 key)
        let c = cfg("hoodie.table.type=MERGE_ON_READ\nhoodie.table.precombine.field=ts\nhoodie.table.partition.fields=part\nhoodie.archivelog.folder=archived\nhoodie.timeline.layout.version=1\nhoodie.table.checksum=1085354821\nhoodie.table.recordkey.fields=id\nhoodie.table.name=interop\nhoodie.table.keygenerator.class=org.apache.hudi.keygen.SimpleKeyGenerator\nhoodie.table.base.file.format=PARQUET\nhoodie.table.version=5\n").unwrap();
        assert_eq!(c.version, TableVersion::V5);
        assert_eq!(c.version.number(), 5);
        assert_eq!(c.timeline_layout, TimelineLayout::V1);
        assert_eq!(&*c.timeline_dir, ".hoodie");
        assert_eq!(&*c.archive_dir, ".hoodie/archived");
        assert!(!c.metadata_table_enabled());
        assert!(c.version.is_0x() && TableVersion::V6.is_0x());
        assert!(!TableVersion::V8.is_0x() && !TableVersion::V9.is_0x());
        // a version-5 table in layout 2 is not one Hudi writes
        let err = cfg("hoodie.table.version=5\nhoodie.timeline.layout.version=2\n").unwrap_err();
        assert!(
            err.to_string()
                .contains("table version 5 uses timeline layout 1"),
            "{err}"
        );
    }

    #[test]
    fn reads_a_version_9_table_with_a_custom_timeline_path() {
        let c = cfg("hoodie.table.version=9\nhoodie.timeline.layout.version=2\nhoodie.timeline.path=tl\nhoodie.table.timeline.timezone=UTC\nhoodie.table.metadata.partitions=\n").unwrap();
        assert_eq!(c.version, TableVersion::V9);
        assert_eq!(c.table_type, TableType::CopyOnWrite);
        assert_eq!(&*c.timeline_dir, ".hoodie/tl");
        assert_eq!(c.timezone, TimelineTimezone::Utc);
        assert!(!c.metadata_table_enabled());
    }

    #[test]
    fn archive_folders_default_and_follow_their_keys() {
        let v6 = cfg("hoodie.table.version=6\n").unwrap();
        assert_eq!(&*v6.archive_dir, ".hoodie/archived");
        assert_eq!(v6.history_dir, None);
        let v9 = cfg("hoodie.table.version=9\nhoodie.timeline.path=tl\n").unwrap();
        assert_eq!(&*v9.archive_dir, ".hoodie/archived");
        assert_eq!(v9.history_dir.as_deref(), Some(".hoodie/tl/history"));
        let custom = cfg("hoodie.table.version=8\nhoodie.archivelog.folder=old\nhoodie.timeline.history.path=h2\n").unwrap();
        assert_eq!(&*custom.archive_dir, ".hoodie/old");
        assert_eq!(custom.history_dir.as_deref(), Some(".hoodie/timeline/h2"));
        let err = cfg("hoodie.table.version=9\nhoodie.timeline.history.path=../x\n").unwrap_err();
        assert!(
            err.to_string().contains("hoodie.timeline.history.path"),
            "{err}"
        );
    }

    #[test]
    fn unsupported_versions_are_named_errors() {
        for (v, needle) in [
            ("4", "older than version 5"),
            ("7", "intermediate"),
            ("10", "newer"),
            ("six", "not a number"),
        ] {
            let err = cfg(&format!("hoodie.table.version={v}\n")).unwrap_err();
            let msg = err.to_string();
            assert!(msg.contains("hoodie.table.version"), "{msg}");
            assert!(msg.contains("file:///t"), "{msg}");
            assert!(msg.contains(needle), "{msg}");
        }
    }

    #[test]
    fn tables_share_the_folder_and_format_texts_almost_every_table_has() {
        let text = "hoodie.table.version=8\nhoodie.table.base.file.format=PARQUET\n";
        let (a, b) = (cfg(text).unwrap(), cfg(text).unwrap());
        assert!(Arc::ptr_eq(&a.timeline_dir, &b.timeline_dir));
        assert!(Arc::ptr_eq(&a.archive_dir, &b.archive_dir));
        assert!(Arc::ptr_eq(&a.base_file_format, &b.base_file_format));
        let (ha, hb) = (a.history_dir.unwrap(), b.history_dir.unwrap());
        assert!(Arc::ptr_eq(&ha, &hb));
        assert_eq!(&*ha, ".hoodie/timeline/history");
        // Another value is the table's own, and kept as written.
        let c = cfg("hoodie.table.version=8\nhoodie.timeline.path=tl\n").unwrap();
        assert_eq!(&*c.timeline_dir, ".hoodie/tl");
        assert!(!Arc::ptr_eq(&a.timeline_dir, &c.timeline_dir));
    }

    #[test]
    fn layout_0_and_mismatched_layouts_are_refused() {
        let err = cfg("hoodie.table.version=6\nhoodie.timeline.layout.version=0\n").unwrap_err();
        assert!(err.to_string().contains("layout"), "{err}");
        let err = cfg("hoodie.table.version=8\nhoodie.timeline.layout.version=1\n").unwrap_err();
        assert!(err.to_string().contains("uses timeline layout 2"), "{err}");
    }

    #[test]
    fn a_missing_version_or_bad_type_is_an_error() {
        let err = cfg("hoodie.table.name=x\n").unwrap_err();
        assert!(matches!(
            err,
            ConfigError::MissingKey {
                key: keys::VERSION,
                ..
            }
        ));
        let err = cfg("hoodie.table.version=6\nhoodie.table.type=WHATEVER\n").unwrap_err();
        assert!(err.to_string().contains("hoodie.table.type"), "{err}");
    }

    #[test]
    fn binary_garbage_is_reported_as_corrupt() {
        let err = TableConfig::parse("t", &[0xff, 0xfe, 0x00, 0x01]).unwrap_err();
        assert!(matches!(err, ConfigError::NotText { .. }));
        let err = cfg("hoodie.table.version=6\nx=\\uZZZZ\n").unwrap_err();
        assert!(matches!(err, ConfigError::Corrupt { .. }), "{err}");
    }
}

#[cfg(test)]
mod fuzz_tests {
    //! `hoodie.properties` as read from storage: arbitrary bytes, near-valid text, and real
    //! files damaged. A parse is `Ok` or a `ConfigError` naming the table, never a panic, and an
    //! accepted configuration's timeline folder is inside `.hoodie`.

    use proptest::prelude::*;

    use super::*;
    use crate::fuzz;

    const V6: &str = "#Updated at 2025-01-26T04:08:23.532Z\n#Sun Jan 26 04:08:23 UTC 2025\nhoodie.table.name=trips\nhoodie.table.type=MERGE_ON_READ\nhoodie.table.version=6\nhoodie.timeline.layout.version=1\nhoodie.table.metadata.partitions=files,column_stats\nhoodie.table.create.schema={\"type\"\\:\"record\"}\nhoodie.archivelog.folder=archived\n";
    const V9: &str = "hoodie.table.version=9\r\nhoodie.timeline.layout.version=2\r\nhoodie.timeline.path=timeline\r\nhoodie.table.timeline.timezone=UTC\r\nhoodie.table.metadata.partitions=\\\r\n  files\r\nhoodie.table.name=t\\u0041\r\n";

    fn check(bytes: &[u8]) {
        match TableConfig::parse("s3://b/t", bytes) {
            Ok(c) => {
                let p = c.timeline_path();
                assert!(p.as_str().starts_with(".hoodie"), "{p}");
                assert!(p.segments().all(|s| s != ".." && s != "."), "{p}");
            }
            Err(e) => assert!(e.to_string().contains("s3://b/t"), "{e}"),
        }
    }

    #[test]
    fn fuzz_real_properties_files_parse() {
        assert_eq!(
            TableConfig::parse("t", V6.as_bytes()).unwrap().version,
            TableVersion::V6
        );
        let c = TableConfig::parse("t", V9.as_bytes()).unwrap();
        assert_eq!((c.version, &*c.name), (TableVersion::V9, "tA"));
        assert_eq!(&*c.metadata_partitions, ["files"]);
    }

    proptest! {
        #![proptest_config(fuzz::config(1024))]

        #[test]
        fn fuzz_properties_of_arbitrary_bytes(bytes in fuzz::bytes(256)) {
            check(&bytes);
        }

        #[test]
        fn fuzz_near_valid_properties(text in fuzz::text_from("hoodie.table.version=689\\u0041:#! \t\r\nlayout12timelinepath./", 200)) {
            check(text.as_bytes());
            check(format!("hoodie.table.version=9\n{text}").as_bytes());
        }

        #[test]
        fn fuzz_damaged_properties_files(bytes in fuzz::mutated_one_of(vec![V6.as_bytes().to_vec(), V9.as_bytes().to_vec()])) {
            check(&bytes);
        }
    }
}
