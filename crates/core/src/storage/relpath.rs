use std::fmt;

/// Why a string is not a table-relative path.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("`{path}` is not a path inside the table: {reason}")]
pub struct RelPathError {
    /// The rejected input.
    pub path: String,
    /// What is wrong with it.
    pub reason: &'static str,
}

/// A path relative to a table's base path that cannot leave it: no `..` or `.` segments, no
/// empty segments, not absolute, no URI scheme, no backslashes and no control characters.
///
/// The text is the key exactly as Hudi wrote it: `dt=2024-01-01 10%3A00` is those characters
/// (Hudi's url-encoded partition value), never decoded or encoded again. Every segment is one
/// object_store accepts verbatim (`PathPart::parse`).
///
/// The empty path is the table root itself.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord, Default)]
pub struct RelPath(String);

impl RelPath {
    /// The table root.
    pub fn root() -> Self {
        RelPath(String::new())
    }

    /// Validate `s` as a table-relative path.
    pub fn parse(s: &str) -> Result<Self, RelPathError> {
        let bad = |reason| RelPathError {
            path: s.to_string(),
            reason,
        };
        if s.is_empty() {
            return Ok(Self::root());
        }
        if s.starts_with('/') {
            return Err(bad("it is absolute"));
        }
        if s.contains('\\') {
            return Err(bad("it contains a backslash"));
        }
        if s.chars().any(|c| c.is_ascii_control()) {
            // object_store cannot address a key with one, so such a path could never be the
            // exact key of a file.
            return Err(bad("it contains a control character"));
        }
        if has_scheme(s) {
            return Err(bad("it carries a URI scheme or drive letter"));
        }
        for seg in s.split('/') {
            match seg {
                "" => return Err(bad("it has an empty segment")),
                "." | ".." => return Err(bad("it has a `.` or `..` segment")),
                _ => {}
            }
        }
        Ok(RelPath(s.to_string()))
    }

    pub(crate) fn from_segments(parts: Vec<String>) -> Result<Self, RelPathError> {
        Self::parse(&parts.join("/"))
    }

    /// This path joined with `rel`; the joined path is validated like [`RelPath::parse`].
    pub fn join(&self, rel: &str) -> Result<Self, RelPathError> {
        if self.0.is_empty() {
            return Self::parse(rel);
        }
        if rel.is_empty() {
            return Ok(self.clone());
        }
        Self::parse(&format!("{}/{rel}", self.0))
    }

    /// This path joined with another relative path.
    pub fn join_rel(&self, child: &RelPath) -> Self {
        match (self.0.is_empty(), child.0.is_empty()) {
            (true, _) => child.clone(),
            (_, true) => self.clone(),
            _ => RelPath(format!("{}/{}", self.0, child.0)),
        }
    }

    /// The segments of the path (none for the root).
    pub fn segments(&self) -> impl Iterator<Item = &str> {
        self.0.split('/').filter(|s| !s.is_empty())
    }

    /// The last segment ("" for the root).
    pub fn file_name(&self) -> &str {
        self.0.rsplit('/').next().unwrap_or_default()
    }

    /// The path without its last segment (the root for a one-segment path).
    pub fn parent(&self) -> RelPath {
        match self.0.rfind('/') {
            Some(i) => RelPath(self.0[..i].to_string()),
            None => RelPath::root(),
        }
    }

    /// `self` without the leading `prefix`, if `prefix` is a whole-segment prefix of it.
    pub fn strip_prefix(&self, prefix: &RelPath) -> Option<RelPath> {
        if prefix.0.is_empty() {
            return Some(self.clone());
        }
        if self.0 == prefix.0 {
            return Some(RelPath::root());
        }
        self.0
            .strip_prefix(&prefix.0)
            .and_then(|rest| rest.strip_prefix('/'))
            .map(|rest| RelPath(rest.to_string()))
    }

    /// The path as a string.
    pub fn as_str(&self) -> &str {
        &self.0
    }
}

impl fmt::Display for RelPath {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

/// Whether `s` starts like a URI (`s3:`, `file:`, `C:`): letters, digits, `+`, `-`, `.` up to the
/// first `:`, starting with a letter.
fn has_scheme(s: &str) -> bool {
    let first = s.split('/').next().unwrap_or_default();
    match first.find(':') {
        Some(i) => {
            let head = &first[..i];
            head.starts_with(|c: char| c.is_ascii_alphabetic())
                && head
                    .chars()
                    .all(|c| c.is_ascii_alphanumeric() || matches!(c, '+' | '-' | '.'))
        }
        None => false,
    }
}

/// Build a [`RelPath`] from a string known at compile time to be valid.
#[macro_export]
#[doc(hidden)]
macro_rules! rel {
    ($s:expr) => {
        $crate::storage::RelPath::parse($s).expect("static relative path")
    };
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn rejects_every_way_out_of_the_table() {
        for bad in [
            "/etc/passwd",
            "../x",
            "a/../../x",
            "a/./b",
            "a//b",
            "a/",
            "s3://bucket/x",
            "file:/x",
            "C:/x",
            "a\\..\\b",
            "hdfs:x/y",
            "p/a\0b",
            "p\n/f",
            "p/f\r",
            "p\t/f",
            "p/\x7f",
        ] {
            assert!(RelPath::parse(bad).is_err(), "{bad} accepted");
        }
    }

    #[test]
    fn accepts_table_paths() {
        for good in [
            ".hoodie/hoodie.properties",
            "2024/01/01/f.parquet",
            ".hoodie/.temp/1/x.marker.CREATE",
            "ts=2024-01-01 10:00:00/f.parquet",
            "dt=2024-01-01 10%3A00/f.parquet",
            "1~0/x#1/[p]/{b}^|`\"<>*?/é/日本/k=v+w/%2e/f",
        ] {
            assert_eq!(RelPath::parse(good).unwrap().as_str(), good);
        }
    }

    #[test]
    fn strip_prefix_matches_whole_segments_only() {
        let p = RelPath::parse("ab/c").unwrap();
        assert!(p.strip_prefix(&RelPath::parse("a").unwrap()).is_none());
        assert_eq!(
            p.strip_prefix(&RelPath::parse("ab").unwrap())
                .unwrap()
                .as_str(),
            "c"
        );
    }

    proptest! {
        #[test]
        fn every_segment_of_an_accepted_path_is_a_key_segment_object_store_keeps_verbatim(
            s in "[a-z%~#\\[\\]{}^|`\"<>*?:=+ é日./\\\\\u{0}-\u{1f}\u{7f}]{0,16}"
        ) {
            if let Ok(p) = RelPath::parse(&s) {
                for seg in p.segments() {
                    let part = object_store::path::PathPart::parse(seg);
                    prop_assert!(part.is_ok(), "{seg:?}");
                    prop_assert_eq!(part.map(|p| p.as_ref().to_string()).unwrap_or_default(), seg);
                }
            }
        }

        #[test]
        fn accepted_paths_never_contain_dot_dot_segments(s in "[a-z./]{0,12}") {
            if let Ok(p) = RelPath::parse(&s) {
                prop_assert!(p.segments().all(|seg| seg != ".." && seg != "." && !seg.is_empty()));
                prop_assert!(!p.as_str().starts_with('/'));
            }
        }
    }
}
