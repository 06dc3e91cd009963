//! Symbolic links on the local file system: the checks every mutation of a local table makes
//! before it reaches the store, so that no delete or write goes through a link below the table's
//! base path, nor lands in a folder other than the one the table was opened at.
//!
//! A table folder is opened at its canonical path ([`super::open`]), but that is no guarantee for
//! later: the folder can be swapped for a link after it was opened (a long-running daemon keeps
//! its opened tables), and a partition or marker folder below it can be a link to anywhere. The
//! local store follows links in listings and in the paths it deletes and writes, so each
//! mutation looks at the way first: the table folder must still be the real folder it was
//! (not a link, still canonical), and no folder between it and the changed path may be a link.
//! The changed path itself may be one: deleting or replacing a link removes the link (the
//! store unlinks and renames, and its create-if-absent never follows one), which stays inside
//! the table. Object stores have no links; none of this applies to them.
//!
//! The checks run on tokio's blocking pool, one `lstat` per folder on the way (each folder once
//! per batch); a link created between the check and the store's request is not caught (nothing
//! here holds folders open), which needs write access to the table folder at that moment.

use std::collections::HashSet;
use std::path::{Path, PathBuf};
use std::sync::Arc;

/// The scheme of a local table's URI, followed by its canonical folder.
const FILE: &str = "file://";

/// A local table's folder as opened, shared by the storages made from it (the metadata table's).
#[derive(Debug, Clone)]
pub(super) struct LocalRoot {
    /// The table folder as opened (canonical, so at that moment the real folder, with no link
    /// on its way), as the table's `file://` URI: the same text as the table storage's own URI,
    /// shared with it (no copy a table).
    pub(super) table_uri: Arc<str>,
    /// The segments from `table` down to the storage's own root (`.hoodie/metadata` for the
    /// metadata table's storage; none for the table's).
    pub(super) below: Arc<[String]>,
}

impl LocalRoot {
    /// Rooted at the table folder that the `file://` URI `table_uri` names (canonical), with no
    /// segment below (the empty list allocates nothing); `None` for any other URI.
    pub(super) fn at(table_uri: &Arc<str>) -> Option<Self> {
        table_uri.starts_with(FILE).then(|| Self {
            table_uri: Arc::clone(table_uri),
            below: Arc::default(),
        })
    }

    /// The table folder as opened.
    pub(super) fn table(&self) -> &Path {
        Path::new(self.table_uri.strip_prefix(FILE).unwrap_or(&self.table_uri))
    }

    /// The same table, for a storage rooted `sub` (segments) further down.
    pub(super) fn child<'a>(&self, sub: impl Iterator<Item = &'a str>) -> Self {
        let below: Vec<String> = self
            .below
            .iter()
            .cloned()
            .chain(sub.map(str::to_owned))
            .collect();
        Self {
            table_uri: Arc::clone(&self.table_uri),
            below: Arc::from(below),
        }
    }

    /// The segments from the table folder to the folder holding `path` (a storage-relative
    /// path given by its segments): the folders a mutation of `path` goes through.
    pub(super) fn folders_of<'a>(&self, segments: impl Iterator<Item = &'a str>) -> Vec<String> {
        let mut all: Vec<String> = self.below.to_vec();
        all.extend(segments.map(str::to_owned));
        all.pop();
        all
    }

    /// The segments from the table folder to `dir` itself (storage-relative, by its segments).
    pub(super) fn way_to<'a>(&self, segments: impl Iterator<Item = &'a str>) -> Vec<String> {
        let mut all: Vec<String> = self.below.to_vec();
        all.extend(segments.map(str::to_owned));
        all
    }
}

/// What stands in a mutation's way.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) enum Obstacle {
    /// The table folder is not the folder opened any more; how it is now.
    Moved(String),
    /// A symbolic link on the way (its path on disk), and what it points to.
    Link(PathBuf, Option<PathBuf>),
}

/// Whether the table folder `root` (canonical when opened) is still that folder: a real folder,
/// not a link, that still canonicalizes to itself (a folder above it swapped for a link moves
/// it). `None` when it is. A table folder that is gone (the local store removes folders a
/// delete left empty) is no obstacle as long as the nearest folder above it is still where it
/// was: the store creates real folders from there.
pub(super) fn root_moved(root: &Path) -> std::io::Result<Option<Obstacle>> {
    let moved = |how: String| Ok(Some(Obstacle::Moved(how)));
    let meta = match std::fs::symlink_metadata(root) {
        Ok(m) => m,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
            let Some(above) = root.ancestors().skip(1).find(|a| a.exists()) else {
                return Ok(None);
            };
            return match std::fs::canonicalize(above) {
                Ok(real) if real == above => Ok(None),
                Ok(real) => moved(format!(
                    "is gone, and `{}` above it now resolves to `{}` (swapped for a symbolic link)",
                    above.display(),
                    real.display()
                )),
                Err(e) => Err(e),
            };
        }
        Err(e) => return Err(e),
    };
    if meta.file_type().is_symlink() {
        return moved(match std::fs::read_link(root) {
            Ok(to) => format!("is now a symbolic link (to `{}`)", to.display()),
            Err(_) => "is now a symbolic link".into(),
        });
    }
    if !meta.is_dir() {
        return moved("is no longer a folder".into());
    }
    match std::fs::canonicalize(root) {
        Ok(real) if real == root => Ok(None),
        Ok(real) => moved(format!(
            "now resolves to `{}` (a folder above it was swapped for a symbolic link)",
            real.display()
        )),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => moved("no longer exists".into()),
        Err(e) => Err(e),
    }
}

/// The first symbolic link among the folders `root/steps[0]`, `root/steps[0]/steps[1]`, …
/// Folders found real are remembered in `real` (one `lstat` each per batch). The way ends
/// without a link at the first step that does not exist (the store creates real folders from
/// there) or that is a file (the store's own request fails there).
pub(super) fn first_link(
    root: &Path,
    steps: &[String],
    real: &mut HashSet<PathBuf>,
) -> std::io::Result<Option<Obstacle>> {
    let mut path = root.to_path_buf();
    for step in steps {
        path.push(step);
        if real.contains(&path) {
            continue;
        }
        match std::fs::symlink_metadata(&path) {
            Ok(m) if m.file_type().is_symlink() => {
                let to = std::fs::read_link(&path).ok();
                return Ok(Some(Obstacle::Link(path, to)));
            }
            Ok(m) if m.is_dir() => {
                real.insert(path.clone());
            }
            Ok(_) => return Ok(None),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
            Err(e) => return Err(e),
        }
    }
    Ok(None)
}

/// For each way (the folders from `root` to a changed path), the link on it, if any; or the
/// table folder moved, which stands in every way.
pub(super) fn obstacles(
    root: &Path,
    ways: &[Vec<String>],
) -> std::io::Result<Result<Vec<Option<Obstacle>>, Obstacle>> {
    if let Some(moved) = root_moved(root)? {
        return Ok(Err(moved));
    }
    let mut real = HashSet::new();
    let found = ways
        .iter()
        .map(|steps| first_link(root, steps, &mut real))
        .collect::<std::io::Result<Vec<_>>>()?;
    Ok(Ok(found))
}

/// The first symbolic link in the folder tree at `dir` (not followed; `dir` itself included),
/// anything in it: a listing of the tree would follow one to a folder, and deletes of what it
/// lists would land there. A tree that is not there holds none.
pub(super) fn first_link_in_tree(dir: &Path) -> std::io::Result<Option<Obstacle>> {
    match std::fs::symlink_metadata(dir) {
        Ok(m) if m.file_type().is_symlink() => {
            return Ok(Some(Obstacle::Link(
                dir.to_path_buf(),
                std::fs::read_link(dir).ok(),
            )))
        }
        Ok(m) if m.is_dir() => {}
        Ok(_) => return Ok(None),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
        Err(e) => return Err(e),
    }
    let mut stack = vec![dir.to_path_buf()];
    while let Some(d) = stack.pop() {
        let entries = match std::fs::read_dir(&d) {
            Ok(e) => e,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => continue,
            Err(e) => return Err(e),
        };
        for entry in entries {
            let entry = entry?;
            let kind = entry.file_type()?;
            if kind.is_symlink() {
                let path = entry.path();
                let to = std::fs::read_link(&path).ok();
                return Ok(Some(Obstacle::Link(path, to)));
            }
            if kind.is_dir() {
                stack.push(entry.path());
            }
        }
    }
    Ok(None)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_root_swapped_for_a_link_or_moved_by_a_link_above_it_is_no_longer_the_folder_opened() {
        let tmp = tempfile::tempdir().unwrap();
        let base = std::fs::canonicalize(tmp.path()).unwrap();
        let t = base.join("a/t");
        std::fs::create_dir_all(&t).unwrap();
        std::fs::create_dir_all(base.join("elsewhere/t")).unwrap();
        assert_eq!(root_moved(&t).unwrap(), None);
        // The folder above swapped for a link to another folder holding a `t`.
        std::fs::rename(base.join("a"), base.join("a.orig")).unwrap();
        std::os::unix::fs::symlink(base.join("elsewhere"), base.join("a")).unwrap();
        assert!(
            matches!(root_moved(&t).unwrap(), Some(Obstacle::Moved(how)) if how.contains("elsewhere")),
        );
        // The folder itself swapped for a link.
        std::fs::remove_file(base.join("a")).unwrap();
        std::fs::rename(base.join("a.orig"), base.join("a")).unwrap();
        std::fs::rename(&t, base.join("a/t.orig")).unwrap();
        std::os::unix::fs::symlink(base.join("elsewhere/t"), &t).unwrap();
        assert!(
            matches!(root_moved(&t).unwrap(), Some(Obstacle::Moved(how)) if how.contains("symbolic link")),
        );
        // Gone: the store would create it again where it was, unless a folder above moved.
        std::fs::remove_file(&t).unwrap();
        assert_eq!(root_moved(&t).unwrap(), None);
        std::fs::rename(base.join("a"), base.join("a.orig")).unwrap();
        std::os::unix::fs::symlink(base.join("elsewhere"), base.join("a")).unwrap();
        std::fs::remove_dir(base.join("elsewhere/t")).unwrap();
        assert!(
            matches!(root_moved(&t).unwrap(), Some(Obstacle::Moved(how)) if how.contains("is gone")),
        );
    }

    #[test]
    fn the_first_link_on_the_way_is_found_and_missing_folders_end_the_way() {
        let tmp = tempfile::tempdir().unwrap();
        let root = std::fs::canonicalize(tmp.path()).unwrap();
        std::fs::create_dir_all(root.join("p1/deeper")).unwrap();
        std::fs::create_dir_all(root.join("outside")).unwrap();
        std::os::unix::fs::symlink(root.join("outside"), root.join("p1/link")).unwrap();
        let s = |v: &[&str]| v.iter().map(|x| x.to_string()).collect::<Vec<_>>();
        let ways = [
            s(&["p1", "deeper"]),
            s(&["p1", "link", "x"]),
            s(&["p2", "new"]),
            s(&[]),
        ];
        let found = obstacles(&root, &ways).unwrap().unwrap();
        assert_eq!(found[0], None);
        assert_eq!(
            found[1],
            Some(Obstacle::Link(
                root.join("p1/link"),
                Some(root.join("outside"))
            ))
        );
        assert_eq!(found[2], None);
        assert_eq!(found[3], None);
        assert_eq!(first_link_in_tree(&root.join("p1/deeper")).unwrap(), None);
        assert!(matches!(
            first_link_in_tree(&root.join("p1")).unwrap(),
            Some(Obstacle::Link(at, _)) if at == root.join("p1/link")
        ));
        assert!(matches!(
            first_link_in_tree(&root.join("p1/link")).unwrap(),
            Some(Obstacle::Link(at, _)) if at == root.join("p1/link")
        ));
        assert_eq!(first_link_in_tree(&root.join("nothing")).unwrap(), None);
    }
}
