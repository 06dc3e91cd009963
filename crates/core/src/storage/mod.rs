//! The one storage seam of the crate.
//!
//! Every byte hudi-keeper reads or writes goes through [`Storage`]. A `Storage` is rooted at a
//! table's base path and only accepts *table-relative* paths ([`RelPath`]), so nothing built on
//! it can address a file outside the table. On the local file system, where a folder can be a
//! symbolic link, every mutation also checks its way first: the table folder must still be the
//! folder opened, and no folder between it and the path may be a link (see `links`), so no
//! delete or write follows a link out of the table. Tests plug an [`Interceptor`] into it to count
//! requests by kind ([`RequestCounter`], which the CLI also reports) or to fail the N-th request
//! of a kind (see [`testing`]).
//!
//! This file holds the types and the `Storage` handle; its requests live by kind in `list`,
//! `read` and `write`, and the local file system's checks of the way to a path in `ways`.

mod error;
mod links;
mod list;
mod open;
mod read;
mod relpath;
mod requests;
#[cfg(any(test, feature = "testing"))]
pub mod testing;
mod ways;
mod write;

use std::collections::HashMap;
use std::fmt;
use std::sync::Arc;

use chrono::{DateTime, Utc};
use object_store::list::PaginatedListStore;
use object_store::path::{Path, PathPart};
use object_store::ObjectStore;

pub use error::StorageError;
pub use open::{StorageOptions, StoreCache, DEFAULT_RETRY_TIMEOUT, RETRY_TIMEOUT};
pub use relpath::{RelPath, RelPathError};
pub use requests::RequestCounter;

/// The kinds of request the seam makes; the unit of request counting and fault injection.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum OpKind {
    /// A recursive listing under a prefix.
    List,
    /// A one-level listing (with delimiter) under a prefix.
    ListDir,
    /// Reading an object's bytes.
    Get,
    /// Reading an object's metadata.
    Head,
    /// Writing an object, replacing any existing one.
    Put,
    /// Writing an object only if none exists (create-if-absent).
    PutIfAbsent,
    /// Deleting an object.
    Delete,
    /// Replacing an object only if it is still the version read (If-Match).
    PutIfMatch,
}

impl OpKind {
    /// Every kind, in a stable order.
    pub const ALL: [OpKind; 8] = [
        OpKind::List,
        OpKind::ListDir,
        OpKind::Get,
        OpKind::Head,
        OpKind::Put,
        OpKind::PutIfAbsent,
        OpKind::Delete,
        OpKind::PutIfMatch,
    ];

    /// Whether the request changes the store.
    pub fn is_mutation(self) -> bool {
        matches!(
            self,
            OpKind::Put | OpKind::PutIfAbsent | OpKind::PutIfMatch | OpKind::Delete
        )
    }

    /// A short lower-case name, used in logs and metrics labels.
    pub fn as_str(self) -> &'static str {
        match self {
            OpKind::List => "list",
            OpKind::ListDir => "list_dir",
            OpKind::Get => "get",
            OpKind::Head => "head",
            OpKind::Put => "put",
            OpKind::PutIfAbsent => "put_if_absent",
            OpKind::Delete => "delete",
            OpKind::PutIfMatch => "put_if_match",
        }
    }
}

impl fmt::Display for OpKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// Called before every request the seam makes. Returning an error fails the request without
/// it reaching the store.
pub trait Interceptor: Send + Sync + fmt::Debug {
    /// Observe (and possibly fail) one request of `op` on the table-relative `path`.
    fn before(&self, op: OpKind, path: &RelPath) -> Result<(), StorageError>;

    /// Called after a request succeeded; an error here reports a failure although the request
    /// took effect (a crash after the store applied it).
    fn after(&self, _op: OpKind, _path: &RelPath) -> Result<(), StorageError> {
        Ok(())
    }
}

/// Checked before every mutating request (put, create, delete) of a fenced [`Storage`]: a lock
/// holder's proof that its lock is still safely held. An error stops the request before it
/// reaches the store.
pub trait WriteFence: Send + Sync + fmt::Debug {
    /// `Ok` while writes may go on; otherwise why not.
    fn check_write(&self) -> Result<(), String>;
}

/// Two fences, both checked (the first one first).
#[derive(Debug)]
struct BothFences(Arc<dyn WriteFence>, Arc<dyn WriteFence>);

impl WriteFence for BothFences {
    fn check_write(&self) -> Result<(), String> {
        self.0.check_write()?;
        self.1.check_write()
    }
}

/// Metadata of one object, with its path relative to the storage root.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FileMeta {
    /// Path relative to the storage root (the table base path).
    pub path: RelPath,
    /// Size in bytes.
    pub size: u64,
    /// Last modification time as the store reports it.
    pub last_modified: DateTime<Utc>,
}

impl FileMeta {
    /// The last path segment.
    pub fn file_name(&self) -> &str {
        self.path.file_name()
    }
}

/// The version of an object as the store reports it (its ETag, or its generation), for
/// conditional writes.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct ObjectVersion {
    /// The entity tag.
    pub e_tag: Option<String>,
    /// The store's version id, where it has one.
    pub version: Option<String>,
}

/// The folders directly below a folder, for a walk that must not leave the tree it walks
/// ([`Storage::list_folders`]).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Folders {
    /// Names of the folders (not symbolic links), in order.
    pub dirs: Vec<String>,
    /// Names of the symbolic links to folders, in order (local file system only).
    pub links: Vec<String>,
}

/// The result of a one-level listing.
#[derive(Debug, Clone, Default)]
pub struct DirListing {
    /// Objects directly under the prefix.
    pub files: Vec<FileMeta>,
    /// Names (last segment only) of the "folders" directly under the prefix.
    pub dirs: Vec<String>,
}

/// What one bulk delete confirmed per key, and an error that named no key.
type ChunkOutcome = (
    HashMap<String, Result<(), object_store::Error>>,
    Option<String>,
);

/// One segment of a store key, exactly as given. object_store's `Path::from` and `Path::join`
/// percent-encode `%`, `~`, `#`, brackets, non-ASCII and more, which would address another key
/// than the one Hudi wrote (and a listing returned); `PathPart::parse` keeps the text. Every
/// [`RelPath`] segment parses (it has no control character, `/`, `.` or `..`); only a
/// [`Storage::from_store`] root that the store could not hold anyway is encoded.
fn key_part(segment: &str) -> PathPart<'_> {
    PathPart::parse(segment).unwrap_or_else(|_| PathPart::from(segment))
}

/// The longest of `keys` that `matches`: the key a store error names (a longer key is the more
/// specific match when one key ends with another).
fn key_named(keys: &[String], matches: impl Fn(&str) -> bool) -> Option<&String> {
    keys.iter()
        .filter(|k| matches(k.as_str()))
        .max_by_key(|k| k.len())
}

/// `f` on tokio's blocking pool; a panicked or cancelled task is an I/O error.
async fn blocking<T: Send + 'static>(
    f: impl FnOnce() -> std::io::Result<T> + Send + 'static,
) -> std::io::Result<T> {
    tokio::task::spawn_blocking(f)
        .await
        .unwrap_or_else(|e| Err(std::io::Error::other(e.to_string())))
}

/// The most [`Storage::get`] reads of one object (256 MiB): far above any timeline file Hudi
/// writes (a rollback plan or commit of 100,000 files is tens of MB), far below what would
/// get the process killed. A larger object is refused before its body is read.
pub const DEFAULT_MAX_READ: u64 = 256 << 20;

/// The most read of a file known to be small (1 MiB): `hoodie.properties`, lock files.
pub const SMALL_FILE_MAX_READ: u64 = 1 << 20;

/// Table-rooted access to an object store.
#[derive(Clone)]
pub struct Storage {
    store: Arc<dyn ObjectStore>,
    /// The same store's page-by-page listing, where it has one.
    pages: Option<Arc<dyn PaginatedListStore>>,
    root: Path,
    uri: Arc<str>,
    interceptor: Option<Arc<dyn Interceptor>>,
    fence: Option<Arc<dyn WriteFence>>,
    /// For a local table, the table folder as opened: every mutation first checks that it is
    /// still that folder and that no folder on the way below it is a symbolic link.
    local_root: Option<links::LocalRoot>,
}

impl fmt::Debug for Storage {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Storage")
            .field("uri", &self.uri)
            .field("root", &self.root.as_ref())
            .field("interceptor", &self.interceptor)
            .finish()
    }
}

impl Storage {
    /// Open the storage of the table at `uri` (see [`StorageOptions`] for what a URI may be).
    pub fn open(uri: &str, options: &StorageOptions) -> Result<Self, StorageError> {
        Self::open_with(uri, options, None)
    }

    /// Like [`Storage::open`], sharing object-store clients through `cache` (one per bucket and
    /// options) with every other table opened through it.
    pub fn open_with(
        uri: &str,
        options: &StorageOptions,
        cache: Option<&StoreCache>,
    ) -> Result<Self, StorageError> {
        let (client, root, uri) = open::open_store(uri, options, cache)?;
        // A local table's URI is `file://` and its canonical folder.
        let uri: Arc<str> = uri.into();
        let local_root = links::LocalRoot::at(&uri);
        Ok(Self {
            store: client.store,
            pages: client.pages,
            root,
            uri,
            interceptor: None,
            fence: None,
            local_root,
        })
    }

    /// Wrap an existing store, rooted at `root` inside it: `root` is the key prefix exactly as
    /// the store lists it (`wh/dt=1%3A0` is that text, not `wh/dt=1:0`). `uri` is only used in
    /// messages.
    pub fn from_store(store: Arc<dyn ObjectStore>, root: &str, uri: &str) -> Self {
        Self {
            store,
            pages: None,
            root: root.split('/').map(key_part).collect(),
            uri: uri.into(),
            interceptor: None,
            fence: None,
            local_root: None,
        }
    }

    /// The same storage with `interceptor` called before every request.
    pub fn with_interceptor(mut self, interceptor: Arc<dyn Interceptor>) -> Self {
        self.interceptor = Some(interceptor);
        self
    }

    /// The same storage with `fence` checked before every mutating request, after any fence
    /// it already has (children made from it share the fences): a rollback keeps its rollback
    /// heartbeat's fence while it also holds the table lock.
    pub fn with_fence(mut self, fence: Arc<dyn WriteFence>) -> Self {
        self.fence = Some(match self.fence.take() {
            None => fence,
            Some(earlier) => Arc::new(BothFences(earlier, fence)),
        });
        self
    }

    /// The same storage without fences: for a lock's and a heartbeat's own writes, which keep a
    /// claim and must not be stopped by it (nor by another).
    pub fn unfenced(&self) -> Self {
        let mut out = self.clone();
        out.fence = None;
        out
    }

    /// The table URI this storage was opened for.
    pub fn uri(&self) -> &str {
        &self.uri
    }

    /// A storage rooted at `sub` below this one (used for the metadata table), sharing the store
    /// and the interceptor.
    pub fn child(&self, sub: &RelPath) -> Self {
        let mut root = self.root.clone();
        root.extend(sub.segments().map(key_part));
        let uri = format!("{}/{}", self.uri.trim_end_matches('/'), sub);
        Self {
            store: Arc::clone(&self.store),
            pages: self.pages.clone(),
            root,
            uri: uri.into(),
            interceptor: self.interceptor.clone(),
            fence: self.fence.clone(),
            local_root: self.local_root.as_ref().map(|l| l.child(sub.segments())),
        }
    }

    /// The folder the root is on the local file system, for a local table (the one store with
    /// folders of their own, which outlive the files in them): its URI after `file://`, the
    /// table's canonical folder and the segments below it (no copy of it is kept).
    fn local_dir(&self) -> Option<&std::path::Path> {
        self.local_root.as_ref()?;
        self.uri.strip_prefix("file://").map(std::path::Path::new)
    }

    /// Whether the storage is a local table's: the one store with symbolic links, where
    /// [`Storage::check_way`] and [`Storage::check_tree`] look at anything.
    pub fn is_local(&self) -> bool {
        self.local_root.is_some()
    }

    fn check(&self, op: OpKind, path: &RelPath) -> Result<(), StorageError> {
        if op.is_mutation() {
            if let Some(fence) = &self.fence {
                fence.check_write().map_err(|reason| StorageError::Fenced {
                    uri: self.uri.to_string(),
                    op,
                    path: path.to_string(),
                    reason,
                })?;
            }
        }
        match &self.interceptor {
            Some(i) => i.before(op, path),
            None => Ok(()),
        }
    }

    fn done<T>(&self, op: OpKind, path: &RelPath, value: T) -> Result<T, StorageError> {
        match &self.interceptor {
            Some(i) => i.after(op, path).map(|()| value),
            None => Ok(value),
        }
    }

    /// The store key of a table-relative path: the root and the path's segments, verbatim.
    fn full(&self, path: &RelPath) -> Path {
        let mut full = self.root.clone();
        full.extend(path.segments().map(key_part));
        full
    }

    fn relativize(&self, full: &Path) -> Result<RelPath, StorageError> {
        let rel = full
            .prefix_match(&self.root)
            .ok_or_else(|| StorageError::OutsideRoot {
                uri: self.uri.to_string(),
                path: full.to_string(),
            })?;
        let parts: Vec<String> = rel.map(|p| p.as_ref().to_string()).collect();
        RelPath::from_segments(parts).map_err(|_| StorageError::OutsideRoot {
            uri: self.uri.to_string(),
            path: full.to_string(),
        })
    }

    fn meta(&self, m: object_store::ObjectMeta) -> Result<FileMeta, StorageError> {
        Ok(FileMeta {
            path: self.relativize(&m.location)?,
            size: m.size,
            last_modified: m.last_modified,
        })
    }

    fn err(&self, op: OpKind, path: &RelPath, source: object_store::Error) -> StorageError {
        StorageError::from_store(self.uri(), op, path, source)
    }
}

#[cfg(test)]
mod special_keys_tests;
#[cfg(test)]
mod tests;
