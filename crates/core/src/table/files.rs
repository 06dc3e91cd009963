//! Data file names (base files and log files) and the absolute form of table paths that Hudi's
//! plans and metadata carry.

use std::fmt;

use crate::storage::{RelPath, RelPathError};

/// A data file of a table, parsed from its name.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum DataFile {
    /// `<fileId>_<writeToken>_<instant>.<ext>`
    Base {
        /// The file group.
        file_id: String,
        /// The write token.
        write_token: String,
        /// The instant that wrote it.
        instant: String,
    },
    /// `.<fileId>_<instant>.log.<version>_<writeToken>[.cdc]`
    Log {
        /// The file group.
        file_id: String,
        /// v6: the base instant of the file slice; v8+: the deltacommit that wrote it.
        instant: String,
        /// The log version (1-based).
        version: u32,
        /// The write token.
        write_token: String,
        /// Whether this is a change-data-capture log.
        cdc: bool,
    },
}

impl DataFile {
    /// Parse a file name; `None` for anything that is not a Hudi data file
    /// (`.hoodie_partition_metadata`, `.crc` files, …).
    pub fn parse(name: &str) -> Option<Self> {
        if let Some(rest) = name.strip_prefix('.') {
            // Log file: <fileId>_<instant>.log.<version>_<token>[.cdc]
            let (head, tail) = rest.split_once(".log.")?;
            let (file_id, instant) = head.rsplit_once('_')?;
            let (tail, cdc) = match tail.strip_suffix(".cdc") {
                Some(t) => (t, true),
                None => (tail, false),
            };
            let (version, write_token) = tail.split_once('_')?;
            if file_id.is_empty()
                || !is_digits(instant)
                || !is_digits(version)
                || !is_token(write_token)
            {
                return None;
            }
            return Some(DataFile::Log {
                file_id: file_id.to_string(),
                instant: instant.to_string(),
                version: version.parse().ok()?,
                write_token: write_token.to_string(),
                cdc,
            });
        }
        // Base file: <fileId>_<token>_<instant>.<ext>
        let (stem, ext) = name.split_once('.')?;
        if ext.is_empty() || ext.ends_with(".crc") {
            return None;
        }
        let mut parts = stem.rsplitn(3, '_');
        let instant = parts.next()?;
        let write_token = parts.next()?;
        let file_id = parts.next()?;
        if file_id.is_empty() || !is_digits(instant) || !is_token(write_token) {
            return None;
        }
        Some(DataFile::Base {
            file_id: file_id.to_string(),
            write_token: write_token.to_string(),
            instant: instant.to_string(),
        })
    }

    /// The file group.
    pub fn file_id(&self) -> &str {
        match self {
            DataFile::Base { file_id, .. } | DataFile::Log { file_id, .. } => file_id,
        }
    }

    /// The instant in the name (see the variants for what it means).
    pub fn instant(&self) -> &str {
        match self {
            DataFile::Base { instant, .. } | DataFile::Log { instant, .. } => instant,
        }
    }

    /// Whether this is a log file.
    pub fn is_log(&self) -> bool {
        matches!(self, DataFile::Log { .. })
    }
}

/// The log file name for these parts.
pub fn log_file_name(file_id: &str, instant: &str, version: u32, write_token: &str) -> String {
    format!(".{file_id}_{instant}.log.{version}_{write_token}")
}

fn is_digits(s: &str) -> bool {
    !s.is_empty() && s.bytes().all(|b| b.is_ascii_digit())
}

fn is_token(s: &str) -> bool {
    let parts: Vec<&str> = s.split('-').collect();
    parts.len() == 3 && parts.iter().all(|p| is_digits(p))
}

/// A path in a plan or metadata that is not inside the table.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("`{path}` is not inside the table base path `{base}`")]
pub struct OutsideTable {
    /// The path.
    pub path: String,
    /// The base path.
    pub base: String,
}

/// A table's base path as absolute paths in Hudi's plans name it: `scheme://authority/path` for
/// object stores, `/path` for the local file system.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BasePath {
    scheme: Option<String>,
    authority: String,
    path: String,
}

fn same_scheme(a: &str, b: &str) -> bool {
    let norm = |s: &str| match s {
        "s3a" | "s3n" => "s3".to_string(),
        "abfs" => "abfss".to_string(),
        other => other.to_string(),
    };
    norm(a) == norm(b)
}

impl BasePath {
    /// From a table URI as [`crate::storage::Storage::uri`] reports it.
    pub fn from_uri(uri: &str) -> Self {
        let (scheme, rest) = match uri.split_once("://") {
            Some((s, r)) => (Some(s.to_string()), r),
            None => (None, uri),
        };
        let (authority, path) = match (&scheme, rest.split_once('/')) {
            (Some(s), _) if s == "file" => ("".to_string(), rest.to_string()),
            (Some(_), Some((a, p))) => (a.to_string(), format!("/{p}")),
            (Some(_), None) => (rest.to_string(), "/".to_string()),
            (None, _) => ("".to_string(), rest.to_string()),
        };
        let mut path = if path.starts_with('/') {
            path
        } else {
            format!("/{path}")
        };
        while path.len() > 1 && path.ends_with('/') {
            path.pop();
        }
        let scheme = scheme.filter(|s| s != "file");
        Self {
            scheme,
            authority,
            path,
        }
    }

    /// The absolute form of a table-relative path.
    pub fn render(&self, rel: &RelPath) -> String {
        let mut s = self.to_string();
        if !rel.as_str().is_empty() {
            if !s.ends_with('/') {
                s.push('/');
            }
            s.push_str(rel.as_str());
        }
        s
    }

    /// The absolute form with a `file:` scheme for local tables (as Java's Hadoop paths print).
    pub fn render_qualified(&self, rel: &RelPath) -> String {
        match self.scheme {
            None => format!("file:{}", self.render(rel)),
            Some(_) => self.render(rel),
        }
    }

    /// The base path itself, qualified as [`Self::render_qualified`] renders a path (the key
    /// Hudi 0.13's listing-based plan gives a write stat without a path).
    pub fn qualified_root(&self) -> String {
        match self.scheme {
            None => format!("file:{}", self.path),
            Some(_) => self.to_string(),
        }
    }

    /// Whether an absolute path found in a plan names the base path itself (with or without
    /// scheme or a trailing slash), which [`Self::resolve`] refuses.
    pub fn is_root(&self, abs: &str) -> bool {
        let abs = abs.trim_end_matches('/');
        let (scheme, rest) = match abs.split_once(':') {
            Some((s, r)) if !s.contains('/') => (Some(s), r),
            _ => (None, abs),
        };
        match (scheme, &self.scheme) {
            (None, None) => rest == self.path,
            (Some("file"), None) => rest.strip_prefix("//").unwrap_or(rest) == self.path,
            (Some(s), Some(own)) if same_scheme(s, own) => {
                rest.strip_prefix("//")
                    .and_then(|r| r.strip_prefix(self.authority.as_str()))
                    == Some(self.path.as_str())
            }
            _ => false,
        }
    }

    /// The table-relative path of an absolute path found in a plan. Accepts the path with or
    /// without scheme (`file:/t/x`, `file:///t/x`, `/t/x`, `s3a://b/t/x` for `s3://b/t`), and
    /// refuses anything outside the base path.
    pub fn resolve(&self, abs: &str) -> Result<RelPath, OutsideTable> {
        let outside = || OutsideTable {
            path: abs.to_string(),
            base: self.to_string(),
        };
        let (scheme, rest) = match abs.split_once(':') {
            Some((s, r)) if !s.contains('/') => (Some(s), r),
            _ => (None, abs),
        };
        let path = match (scheme, &self.scheme) {
            (None, None) => rest.to_string(),
            (Some("file"), None) => {
                let r = rest.strip_prefix("//").unwrap_or(rest);
                if r.starts_with('/') {
                    r.to_string()
                } else {
                    return Err(outside());
                }
            }
            (Some(s), Some(own)) if same_scheme(s, own) => {
                let r = rest.strip_prefix("//").ok_or_else(outside)?;
                let (auth, p) = r.split_once('/').ok_or_else(outside)?;
                if auth != self.authority {
                    return Err(outside());
                }
                format!("/{p}")
            }
            _ => return Err(outside()),
        };
        let rel = if self.path == "/" {
            path.strip_prefix('/')
        } else {
            path.strip_prefix(&self.path)
                .and_then(|r| r.strip_prefix('/'))
        }
        .ok_or_else(outside)?;
        // A plan names files: the base path itself (with or without a trailing slash) is none.
        if rel.is_empty() {
            return Err(outside());
        }
        RelPath::parse(rel).map_err(|_: RelPathError| outside())
    }
}

impl fmt::Display for BasePath {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match &self.scheme {
            Some(s) => write!(f, "{s}://{}{}", self.authority, self.path),
            None => f.write_str(&self.path),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn parses_base_and_log_file_names() {
        let b = DataFile::parse(
            "cd329d8f-0ce4-4654-84ab-2f769aae5034-0_1-33-44_20250126040826878.parquet",
        )
        .unwrap();
        assert_eq!(b.file_id(), "cd329d8f-0ce4-4654-84ab-2f769aae5034-0");
        assert_eq!(b.instant(), "20250126040826878");
        assert!(!b.is_log());
        let l = DataFile::parse(
            ".0712b9f9-d2d5-4cae-bcf4-8fd7146af503-0_20250126040823628.log.2_1-0-1",
        )
        .unwrap();
        assert_eq!(
            l,
            DataFile::Log {
                file_id: "0712b9f9-d2d5-4cae-bcf4-8fd7146af503-0".into(),
                instant: "20250126040823628".into(),
                version: 2,
                write_token: "1-0-1".into(),
                cdc: false,
            }
        );
        let mdt = DataFile::parse(".files-0000-0_20250126040823628.log.1_0-1-0").unwrap();
        assert_eq!(mdt.file_id(), "files-0000-0");
        for not in [
            ".hoodie_partition_metadata",
            ".cd329d8f-0_1-33-44_1.parquet.crc",
            "README",
            "a_b.parquet",
            "x_1-2_3.parquet",
        ] {
            assert_eq!(DataFile::parse(not), None, "{not}");
        }
    }

    #[test]
    fn resolves_absolute_paths_inside_the_table_only() {
        let local = BasePath::from_uri("file:///opt/t");
        assert_eq!(local.to_string(), "/opt/t");
        for ok in [
            "/opt/t/p/a.parquet",
            "file:/opt/t/p/a.parquet",
            "file:///opt/t/p/a.parquet",
        ] {
            assert_eq!(local.resolve(ok).unwrap().as_str(), "p/a.parquet", "{ok}");
        }
        for bad in [
            "/opt/t2/p/a.parquet",
            "/opt/t/../x",
            "/etc/passwd",
            "s3://b/opt/t/p/a",
            "file:opt/t/a",
            "p/a.parquet",
        ] {
            assert!(local.resolve(bad).is_err(), "{bad}");
        }
        let s3 = BasePath::from_uri("s3://bucket/wh/t");
        assert_eq!(
            s3.render(&RelPath::parse("p/a").unwrap()),
            "s3://bucket/wh/t/p/a"
        );
        assert_eq!(s3.resolve("s3a://bucket/wh/t/p/a").unwrap().as_str(), "p/a");
        assert!(s3.resolve("s3://other/wh/t/p/a").is_err());
        assert!(s3.resolve("/wh/t/p/a").is_err());
        assert_eq!(
            local.render_qualified(&RelPath::parse("p/.f_1.log.1_0-1-2").unwrap()),
            "file:/opt/t/p/.f_1.log.1_0-1-2"
        );
    }

    proptest! {
        #[test]
        fn rendered_paths_resolve_back(rel in "[a-z0-9=]{1,6}(/[a-z0-9._=-]{1,8}){0,3}") {
            let rel = match RelPath::parse(&rel) { Ok(r) => r, Err(_) => return Ok(()) };
            for base in ["file:///opt/t", "s3://b/wh/t", "gs://b/t", "memory://m/x"] {
                let b = BasePath::from_uri(base);
                prop_assert_eq!(b.resolve(&b.render(&rel)).unwrap(), rel.clone());
                prop_assert_eq!(b.resolve(&b.render_qualified(&rel)).unwrap(), rel.clone());
            }
        }

        #[test]
        fn data_file_parsing_never_panics(name in "\\.?[a-z0-9_.-]{0,40}") {
            let _ = DataFile::parse(&name);
        }
    }
}

#[cfg(test)]
mod fuzz_tests {
    //! Data file names from listings and absolute paths from plans and metadata (written by
    //! Java or damaged): parsed without panicking; a resolved path is inside the base path and
    //! renders back to itself.

    use proptest::prelude::*;

    use super::*;
    use crate::fuzz;

    const NAMES: [&str; 4] = [
        "cd32-0_1-33-44_20250126040826878.parquet",
        ".0712b9f9-0_20250126040823628.log.1_0-33-43",
        ".0712b9f9-0_20250126040823628.log.12_0-33-43.cdc",
        "files-0000-0_0-0-0_00000000000000010.hfile",
    ];
    const BASES: [&str; 4] = [
        "s3://bucket/warehouse/t",
        "/tmp/t",
        "file:///tmp/t/",
        "gs://b",
    ];
    const PATHS: [&str; 5] = [
        "s3a://bucket/warehouse/t/p=1/a-0_1-2-3_20250126.parquet",
        "file:/tmp/t/p/x.parquet",
        "/tmp/t/.hoodie/.temp/1/p/x.parquet.marker.CREATE",
        "gs://b/dt=2024-01-01 10%3A00/f.parquet",
        "abfss://c@a.dfs.core.windows.net/t/p/f",
    ];

    #[test]
    fn fuzz_the_base_path_itself_is_no_file_of_the_table() {
        // Found by fuzzing: `file:/tmp/t/` resolved to the table root while `/tmp/t` was
        // outside it.
        let b = BasePath::from_uri("/tmp/t");
        for p in ["/tmp/t", "/tmp/t/", "file:/tmp/t/", "file:///tmp/t/"] {
            assert!(b.resolve(p).is_err(), "{p}");
        }
        let root = BasePath::from_uri("s3://b");
        for p in ["s3://b/", "s3a://b/", "s3://b"] {
            assert!(root.resolve(p).is_err(), "{p}");
        }
        assert_eq!(root.resolve("s3://b/p/f").unwrap().as_str(), "p/f");
    }

    proptest! {
        #![proptest_config(fuzz::config(1024))]

        #[test]
        fn fuzz_data_file_names(
            name in prop_oneof![
                fuzz::mutated_one_of(NAMES.iter().map(|n| n.as_bytes().to_vec()).collect())
                    .prop_map(|b| String::from_utf8_lossy(&b).into_owned()),
                fuzz::text_from("abc0123456789_-.logparquetcd", 60),
            ]
        ) {
            if let Some(f) = DataFile::parse(&name) {
                prop_assert!(!f.file_id().is_empty());
                prop_assert!(f.instant().bytes().all(|b| b.is_ascii_digit()));
            }
        }

        #[test]
        fn fuzz_absolute_paths_from_plans(
            base in prop_oneof![proptest::sample::select(BASES.to_vec()).prop_map(str::to_string), fuzz::text_from("s3:/bfile.t", 24)],
            path in prop_oneof![
                fuzz::mutated_one_of(PATHS.iter().map(|n| n.as_bytes().to_vec()).collect())
                    .prop_map(|b| String::from_utf8_lossy(&b).into_owned()),
                fuzz::text_from("s3a:/bucket.warehouse/t/..%:", 60),
            ]
        ) {
            let b = BasePath::from_uri(&base);
            if let Ok(rel) = b.resolve(&path) {
                prop_assert!(rel.segments().all(|s| s != ".." && s != "."), "{rel}");
                prop_assert_eq!(b.resolve(&b.render(&rel)).ok(), Some(rel.clone()));
                prop_assert_eq!(b.resolve(&b.render_qualified(&rel)).ok(), Some(rel));
            }
        }
    }
}
