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

mod error;
mod links;
mod open;
mod relpath;
mod requests;
#[cfg(any(test, feature = "testing"))]
pub mod testing;

use std::collections::HashMap;
use std::fmt;
use std::sync::Arc;

use bytes::Bytes;
use chrono::{DateTime, Utc};
use futures::{StreamExt, TryStreamExt};
use object_store::list::{PaginatedListOptions, PaginatedListStore};
use object_store::path::{Path, PathPart};
use object_store::{ObjectStore, ObjectStoreExt, PutMode, PutOptions, PutPayload};

pub use error::StorageError;
pub use open::{StorageOptions, StoreCache};
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

/// Directory entries read per blocking step of a local one-level listing.
const LOCAL_LIST_CHUNK: usize = 1024;

/// `f` on tokio's blocking pool; a panicked or cancelled task is an I/O error.
async fn blocking<T: Send + 'static>(
    f: impl FnOnce() -> std::io::Result<T> + Send + 'static,
) -> std::io::Result<T> {
    tokio::task::spawn_blocking(f)
        .await
        .unwrap_or_else(|e| Err(std::io::Error::other(e.to_string())))
}

/// Up to `max` entries of `rd` (fewer only at its end): each name, and whether it is a folder.
/// A symbolic link is judged by what it points to; a dangling one, and anything neither file
/// nor folder, is left out. A name that is not UTF-8 is an error, as in object_store's listing.
fn read_dir_chunk(rd: &mut std::fs::ReadDir, max: usize) -> std::io::Result<Vec<(String, bool)>> {
    let mut out = Vec::with_capacity(max);
    while out.len() < max {
        let Some(entry) = rd.next() else { break };
        let entry = entry?;
        let mut kind = entry.file_type()?;
        if kind.is_symlink() {
            match std::fs::metadata(entry.path()) {
                Ok(m) => kind = m.file_type(),
                Err(e) if e.kind() == std::io::ErrorKind::NotFound => continue,
                Err(e) => return Err(e),
            }
        }
        if !kind.is_dir() && !kind.is_file() {
            // a socket, pipe or device is no object (object_store lists none either)
            continue;
        }
        let is_dir = kind.is_dir();
        let name = entry.file_name().into_string().map_err(|n| {
            std::io::Error::new(
                std::io::ErrorKind::InvalidData,
                format!("file name {n:?} is not UTF-8"),
            )
        })?;
        out.push((name, is_dir));
    }
    Ok(out)
}

/// object_store's local store writes an upload to `name#<digits>` before renaming it and
/// never lists such a file.
fn is_staged_upload(name: &str) -> bool {
    match name.split_once('#') {
        Some((_, suffix)) => !suffix.is_empty() && suffix.bytes().all(|b| b.is_ascii_digit()),
        None => false,
    }
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
    /// The folder `root` is on the local file system, for a local table: the one store with
    /// folders of their own, which outlive the files in them.
    local_dir: Option<Arc<std::path::Path>>,
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
        let local_dir: Option<Arc<std::path::Path>> = uri
            .strip_prefix("file://")
            .map(|dir| Arc::from(std::path::Path::new(dir)));
        let local_root = local_dir.as_deref().map(links::LocalRoot::at);
        Ok(Self {
            store: client.store,
            pages: client.pages,
            root,
            uri: uri.into(),
            interceptor: None,
            fence: None,
            local_dir,
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
            local_dir: None,
            local_root: None,
        }
    }

    /// The same storage with `interceptor` called before every request.
    pub fn with_interceptor(mut self, interceptor: Arc<dyn Interceptor>) -> Self {
        self.interceptor = Some(interceptor);
        self
    }

    /// The same storage with `fence` checked before every mutating request (children made
    /// from it share the fence).
    pub fn with_fence(mut self, fence: Arc<dyn WriteFence>) -> Self {
        self.fence = Some(fence);
        self
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
            local_dir: self
                .local_dir
                .as_ref()
                .map(|d| Arc::from(sub.segments().fold(d.to_path_buf(), |p, s| p.join(s)))),
            local_root: self.local_root.as_ref().map(|l| l.child(sub.segments())),
        }
    }

    /// Whether the storage is a local table's: the one store with symbolic links, where
    /// [`Storage::check_way`] and [`Storage::check_tree`] look at anything.
    pub fn is_local(&self) -> bool {
        self.local_root.is_some()
    }

    /// Refuse a mutation (`op`) of any of `paths` that must not reach the store: on a local
    /// table, when the table folder is no longer the folder opened
    /// ([`StorageError::TableFolderMoved`]) or a folder on the way to a path is a symbolic
    /// link ([`StorageError::SymbolicLink`], naming the first one). Every mutating request
    /// makes this check itself; callers make it up front to refuse before their first change.
    /// Nothing to check on object stores.
    pub async fn check_way(&self, op: OpKind, paths: &[RelPath]) -> Result<(), StorageError> {
        for way in self.ways(op, paths).await {
            way?;
        }
        Ok(())
    }

    /// Refuse a mutation (`op`) of what lies in the folder tree at `dir` (a marker folder,
    /// deleted by listing it) when it must not reach the store: [`Storage::check_way`] for
    /// `dir`, and a symbolic link anywhere in the tree, `dir` itself included (a listing
    /// follows a link to a folder, and the deletes of what it lists would land there).
    pub async fn check_tree(&self, op: OpKind, dir: &RelPath) -> Result<(), StorageError> {
        let Some(local) = &self.local_root else {
            return Ok(());
        };
        let root = local.table.to_path_buf();
        let way = local.folders_of(dir.segments());
        let tree = local
            .way_to(dir.segments())
            .iter()
            .fold(root.clone(), |p, s| p.join(s));
        let found = blocking(
            move || match links::obstacles(&root, std::slice::from_ref(&way))? {
                Err(moved) => Ok(Some(moved)),
                Ok(found) => match found.into_iter().flatten().next() {
                    Some(link) => Ok(Some(link)),
                    None => links::first_link_in_tree(&tree),
                },
            },
        )
        .await
        .map_err(|e| self.local_err(op, dir, e))?;
        match found {
            Some(o) => Err(self.obstacle_err(op, dir, o)),
            None => Ok(()),
        }
    }

    /// For each of `paths`, whether a mutation (`op`) of it may reach the store (see
    /// [`Storage::check_way`]): one blocking step for all of them, each folder looked at once.
    async fn ways(&self, op: OpKind, paths: &[RelPath]) -> Vec<Result<(), StorageError>> {
        let Some(local) = &self.local_root else {
            return paths.iter().map(|_| Ok(())).collect();
        };
        let root = local.table.to_path_buf();
        let ways: Vec<Vec<String>> = paths
            .iter()
            .map(|p| local.folders_of(p.segments()))
            .collect();
        match blocking(move || links::obstacles(&root, &ways)).await {
            Ok(Ok(found)) => paths
                .iter()
                .zip(found)
                .map(|(p, o)| match o {
                    Some(o) => Err(self.obstacle_err(op, p, o)),
                    None => Ok(()),
                })
                .collect(),
            Ok(Err(moved)) => paths
                .iter()
                .map(|p| Err(self.obstacle_err(op, p, moved.clone())))
                .collect(),
            Err(e) => paths
                .iter()
                .map(|p| {
                    let e = std::io::Error::new(e.kind(), e.to_string());
                    Err(self.local_err(op, p, e))
                })
                .collect(),
        }
    }

    fn obstacle_err(&self, op: OpKind, path: &RelPath, o: links::Obstacle) -> StorageError {
        match o {
            links::Obstacle::Moved(now) => StorageError::TableFolderMoved {
                uri: self.uri.to_string(),
                op,
                path: path.to_string(),
                folder: self
                    .local_root
                    .as_ref()
                    .map(|l| l.table.display().to_string())
                    .unwrap_or_default(),
                now,
            },
            links::Obstacle::Link(at, to) => StorageError::SymbolicLink {
                uri: self.uri.to_string(),
                op,
                path: path.to_string(),
                link: at.display().to_string(),
                target: to.map(|t| t.display().to_string()),
            },
        }
    }

    /// Remove the folder `dir` and its subfolders where they hold no file, as Hudi's recursive
    /// delete of a folder leaves none: on the local file system only (object stores have no
    /// folder apart from the keys in it). Files are never removed here; a folder that is not
    /// empty (something was written into it since) or not there is left as it is. Counted as
    /// one delete request.
    pub async fn remove_empty_dir(&self, dir: &RelPath) -> Result<(), StorageError> {
        let Some(base) = &self.local_dir else {
            return Ok(());
        };
        self.check(OpKind::Delete, dir)?;
        self.check_way(OpKind::Delete, std::slice::from_ref(dir))
            .await?;
        let base = base.to_path_buf();
        let segments: Vec<String> = dir.segments().map(str::to_owned).collect();
        blocking(move || remove_empty_tree_below(&base, &segments))
            .await
            .map_err(|e| self.local_err(OpKind::Delete, dir, e))?;
        self.done(OpKind::Delete, dir, ())
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

    /// Every object below `prefix`, recursively. A missing prefix lists as empty.
    pub async fn list(&self, prefix: &RelPath) -> Result<Vec<FileMeta>, StorageError> {
        self.list_filtered(prefix, |_| true).await
    }

    /// The objects below `prefix`, recursively, that `keep` accepts. Each entry is judged as
    /// the listing streams in, so only kept entries are ever held, however many objects lie
    /// below the prefix. One [`OpKind::List`] request, counted and failed like any other. A
    /// missing prefix lists as empty.
    pub async fn list_filtered(
        &self,
        prefix: &RelPath,
        mut keep: impl FnMut(&FileMeta) -> bool,
    ) -> Result<Vec<FileMeta>, StorageError> {
        self.check(OpKind::List, prefix)?;
        let full = self.full(prefix);
        let mut stream = self.store.list(Some(&full));
        let mut kept = Vec::new();
        while let Some(m) = stream
            .try_next()
            .await
            .map_err(|e| self.err(OpKind::List, prefix, e))?
        {
            let meta = self.meta(m)?;
            if keep(&meta) {
                kept.push(meta);
            }
        }
        self.done(OpKind::List, prefix, kept)
    }

    /// The objects and folders directly below `prefix`. A missing prefix lists as empty.
    pub async fn list_dir(&self, prefix: &RelPath) -> Result<DirListing, StorageError> {
        self.check(OpKind::ListDir, prefix)?;
        let full = self.full(prefix);
        let listing = self
            .store
            .list_with_delimiter(Some(&full))
            .await
            .map_err(|e| self.err(OpKind::ListDir, prefix, e))?;
        let files = listing
            .objects
            .into_iter()
            .map(|m| self.meta(m))
            .collect::<Result<Vec<_>, _>>()?;
        let dirs = listing
            .common_prefixes
            .into_iter()
            .filter_map(|p| p.filename().map(str::to_string))
            .collect();
        self.done(OpKind::ListDir, prefix, DirListing { files, dirs })
    }

    /// The objects directly below `prefix` whose paths `keep` accepts, and the names of the
    /// folders directly below it. Each object is judged as the listing comes in, so only kept
    /// objects (and folder names) are held, however many objects the folder has: where the
    /// store lists page by page (S3, GCS, Azure), one page at a time with a delimiter; on the
    /// local file system by directory entries, a chunk at a time, with only the kept files
    /// looked at; elsewhere (memory, a wrapped store) by a recursive listing streamed and cut
    /// to one level. One [`OpKind::ListDir`] request, counted and failed like any other. A
    /// missing prefix lists as empty.
    pub async fn list_dir_filtered(
        &self,
        prefix: &RelPath,
        mut keep: impl FnMut(&RelPath) -> bool,
    ) -> Result<DirListing, StorageError> {
        self.check(OpKind::ListDir, prefix)?;
        let full = self.full(prefix);
        let mut files = Vec::new();
        let mut dirs = std::collections::BTreeSet::new();
        match (&self.pages, &self.local_dir) {
            (None, Some(base)) => {
                let folder = prefix.segments().fold(base.to_path_buf(), |p, s| p.join(s));
                self.list_local_dir(prefix, folder, &mut keep, &mut files, &mut dirs)
                    .await?;
            }
            (Some(pages), _) => {
                // Unlike `list`, a paginated listing takes the prefix as given: the folder
                // needs its trailing delimiter.
                let folder = (!full.as_ref().is_empty()).then(|| format!("{full}/"));
                let mut token = None;
                loop {
                    let options = PaginatedListOptions {
                        delimiter: Some("/".into()),
                        page_token: token.take(),
                        ..PaginatedListOptions::default()
                    };
                    let page = pages
                        .list_paginated(folder.as_deref(), options)
                        .await
                        .map_err(|e| self.err(OpKind::ListDir, prefix, e))?;
                    for m in page.result.objects {
                        let meta = self.meta(m)?;
                        if keep(&meta.path) {
                            files.push(meta);
                        }
                    }
                    dirs.extend(
                        page.result
                            .common_prefixes
                            .iter()
                            .filter_map(|p| p.filename().map(str::to_string)),
                    );
                    match page.page_token {
                        Some(t) => token = Some(t),
                        None => break,
                    }
                }
            }
            (None, None) => {
                let depth = full.parts().count();
                let mut stream = self.store.list(Some(&full));
                while let Some(m) = stream
                    .try_next()
                    .await
                    .map_err(|e| self.err(OpKind::ListDir, prefix, e))?
                {
                    let mut below = m.location.parts().skip(depth);
                    let (Some(first), second) = (below.next(), below.next()) else {
                        continue;
                    };
                    if second.is_some() {
                        // Deeper down: only the folder it is in counts.
                        let name = first.as_ref();
                        if !dirs.contains(name) {
                            dirs.insert(name.to_string());
                        }
                        continue;
                    }
                    let meta = self.meta(m)?;
                    if keep(&meta.path) {
                        files.push(meta);
                    }
                }
            }
        }
        let listing = DirListing {
            files,
            dirs: dirs.into_iter().collect(),
        };
        self.done(OpKind::ListDir, prefix, listing)
    }

    /// [`Storage::list_dir_filtered`] on the local file system: one level of `folder` read
    /// a chunk of entries at a time, judged by name, and only the kept files looked at
    /// (`stat`): a partition's untouched files cost a directory entry each, not a `stat` and a
    /// URL round trip as in object_store's walk. The same names as that walk (the on-disk
    /// name is the key segment; symbolic links followed; object_store's staged uploads,
    /// `name#123`, left out; a name that is no table path an error), except that a folder
    /// holding no file is listed too, as a listing of it finds nothing.
    async fn list_local_dir(
        &self,
        prefix: &RelPath,
        folder: std::path::PathBuf,
        keep: &mut impl FnMut(&RelPath) -> bool,
        files: &mut Vec<FileMeta>,
        dirs: &mut std::collections::BTreeSet<String>,
    ) -> Result<(), StorageError> {
        let fail = |e: std::io::Error| self.local_err(OpKind::ListDir, prefix, e);
        let entries = {
            let folder = folder.clone();
            blocking(move || match std::fs::read_dir(&folder) {
                Ok(rd) => Ok(Some(rd)),
                Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(None),
                Err(e) => Err(e),
            })
            .await
            .map_err(fail)?
        };
        let Some(mut entries) = entries else {
            return Ok(());
        };
        loop {
            let (rest, chunk) = blocking(move || {
                let chunk = read_dir_chunk(&mut entries, LOCAL_LIST_CHUNK)?;
                Ok((entries, chunk))
            })
            .await
            .map_err(fail)?;
            entries = rest;
            let done = chunk.len() < LOCAL_LIST_CHUNK;
            let mut wanted = Vec::new();
            for (name, is_dir) in chunk {
                if is_dir {
                    dirs.insert(name);
                    continue;
                }
                if is_staged_upload(&name) {
                    continue;
                }
                let path = prefix.join(&name).map_err(|_| StorageError::OutsideRoot {
                    uri: self.uri.to_string(),
                    path: folder.join(&name).display().to_string(),
                })?;
                if keep(&path) {
                    wanted.push((folder.join(&name), path));
                }
            }
            if !wanted.is_empty() {
                let stated = blocking(move || {
                    let mut out = Vec::with_capacity(wanted.len());
                    for (full, path) in wanted {
                        match std::fs::metadata(&full) {
                            Ok(m) => out.push(FileMeta {
                                path,
                                size: m.len(),
                                last_modified: m.modified()?.into(),
                            }),
                            // deleted since the directory was read
                            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
                            Err(e) => return Err(e),
                        }
                    }
                    Ok(out)
                })
                .await
                .map_err(fail)?;
                files.extend(stated);
            }
            if done {
                return Ok(());
            }
        }
    }

    fn local_err(&self, op: OpKind, path: &RelPath, e: std::io::Error) -> StorageError {
        StorageError::Request {
            uri: self.uri.to_string(),
            op,
            path: path.to_string(),
            source: Box::new(object_store::Error::Generic {
                store: "LocalFileSystem",
                source: Box::new(e),
            }),
        }
    }

    /// Whether [`Storage::list_dir_filtered`] lists one level only page by page, so that
    /// listing a whole table folder by folder costs no more than one recursive listing. On the
    /// local file system a recursive listing is one walk, which listing folder by folder would
    /// only repeat; elsewhere (memory) a one-level listing walks everything below the folder.
    pub fn lists_one_level(&self) -> bool {
        self.pages.is_some()
    }

    /// The bytes of `path`, at most [`DEFAULT_MAX_READ`] of them (else
    /// [`StorageError::TooLarge`]); a missing object is [`StorageError::NotFound`].
    pub async fn get(&self, path: &RelPath) -> Result<Bytes, StorageError> {
        self.get_capped(path, DEFAULT_MAX_READ).await
    }

    /// The bytes of `path`, refused as [`StorageError::TooLarge`] when it holds more than
    /// `max` bytes; a missing object is [`StorageError::NotFound`].
    pub async fn get_capped(&self, path: &RelPath, max: u64) -> Result<Bytes, StorageError> {
        self.check(OpKind::Get, path)?;
        let full = self.full(path);
        let result = self
            .store
            .get(&full)
            .await
            .map_err(|e| self.err(OpKind::Get, path, e))?;
        let bytes = self.body(path, result, max).await?;
        self.done(OpKind::Get, path, bytes)
    }

    /// The body of a GET, at most `max` bytes: the size the store reported with the response
    /// (the object's size and the range it sends, known before any of the body is read) is
    /// checked first, and a body that runs past `max` anyway (a store that said less than it
    /// sends) is cut off at `max`.
    async fn body(
        &self,
        path: &RelPath,
        result: object_store::GetResult,
        max: u64,
    ) -> Result<Bytes, StorageError> {
        let too_large = |size: u64| StorageError::TooLarge {
            uri: self.uri.to_string(),
            path: path.to_string(),
            size,
            max,
        };
        let len = result.range.end.saturating_sub(result.range.start);
        let declared = result.meta.size.max(len);
        if declared > max {
            return Err(too_large(declared));
        }
        if !matches!(result.payload, object_store::GetResultPayload::Stream(_)) {
            // A local file: object_store reads exactly the range it measured when it opened
            // the file, so never more than `len` bytes, however the file grows meanwhile.
            return result
                .bytes()
                .await
                .map_err(|e| self.err(OpKind::Get, path, e));
        }
        let mut stream = result.into_stream();
        let mut first: Option<Bytes> = None;
        let mut joined: Vec<u8> = Vec::new();
        let mut received: u64 = 0;
        while let Some(chunk) = stream
            .try_next()
            .await
            .map_err(|e| self.err(OpKind::Get, path, e))?
        {
            received = received.saturating_add(chunk.len() as u64);
            if received > max {
                return Err(too_large(received));
            }
            match first.take() {
                None if joined.is_empty() => first = Some(chunk),
                None => joined.extend_from_slice(&chunk),
                Some(f) => {
                    // `len` is at most `max`, and so is what is kept.
                    joined.reserve(usize::try_from(len.max(received)).unwrap_or(0));
                    joined.extend_from_slice(&f);
                    joined.extend_from_slice(&chunk);
                }
            }
        }
        Ok(match first {
            Some(f) => f,
            None => Bytes::from(joined),
        })
    }

    /// The bytes of `path` (at most [`DEFAULT_MAX_READ`]), or `None` when it does not exist.
    /// Any other failure is an error.
    pub async fn get_opt(&self, path: &RelPath) -> Result<Option<Bytes>, StorageError> {
        self.get_opt_capped(path, DEFAULT_MAX_READ).await
    }

    /// [`Storage::get_capped`], with a missing object as `None`.
    pub async fn get_opt_capped(
        &self,
        path: &RelPath,
        max: u64,
    ) -> Result<Option<Bytes>, StorageError> {
        match self.get_capped(path, max).await {
            Ok(b) => Ok(Some(b)),
            Err(StorageError::NotFound { .. }) => Ok(None),
            Err(e) => Err(e),
        }
    }

    /// The bytes of `path` and the version they were read at, or `None` when it does not
    /// exist; refused as [`StorageError::TooLarge`] when it holds more than `max` bytes.
    pub async fn get_versioned(
        &self,
        path: &RelPath,
        max: u64,
    ) -> Result<Option<(Bytes, ObjectVersion)>, StorageError> {
        self.check(OpKind::Get, path)?;
        let full = self.full(path);
        let result = match self.store.get(&full).await {
            Ok(r) => r,
            Err(object_store::Error::NotFound { .. }) => return self.done(OpKind::Get, path, None),
            Err(e) => return Err(self.err(OpKind::Get, path, e)),
        };
        let version = ObjectVersion {
            e_tag: result.meta.e_tag.clone(),
            version: result.meta.version.clone(),
        };
        let bytes = self.body(path, result, max).await?;
        self.done(OpKind::Get, path, Some((bytes, version)))
    }

    /// Create `path` only if it does not exist, and return the version written; an existing
    /// object is [`StorageError::AlreadyExists`].
    pub async fn create_versioned(
        &self,
        path: &RelPath,
        bytes: Bytes,
    ) -> Result<ObjectVersion, StorageError> {
        self.check(OpKind::PutIfAbsent, path)?;
        self.check_way(OpKind::PutIfAbsent, std::slice::from_ref(path))
            .await?;
        let full = self.full(path);
        let opts = PutOptions {
            mode: PutMode::Create,
            ..Default::default()
        };
        let r = self
            .store
            .put_opts(&full, PutPayload::from_bytes(bytes), opts)
            .await
            .map_err(|e| self.err(OpKind::PutIfAbsent, path, e))?;
        self.done(
            OpKind::PutIfAbsent,
            path,
            ObjectVersion {
                e_tag: r.e_tag,
                version: r.version,
            },
        )
    }

    /// Replace `path` only if it is still at `expected` (If-Match); otherwise
    /// [`StorageError::Conflict`]. Returns the version written.
    pub async fn put_if_match(
        &self,
        path: &RelPath,
        bytes: Bytes,
        expected: &ObjectVersion,
    ) -> Result<ObjectVersion, StorageError> {
        self.check(OpKind::PutIfMatch, path)?;
        self.check_way(OpKind::PutIfMatch, std::slice::from_ref(path))
            .await?;
        let full = self.full(path);
        let opts = PutOptions {
            mode: PutMode::Update(object_store::UpdateVersion {
                e_tag: expected.e_tag.clone(),
                version: expected.version.clone(),
            }),
            ..Default::default()
        };
        let r = self
            .store
            .put_opts(&full, PutPayload::from_bytes(bytes), opts)
            .await
            .map_err(|e| self.err(OpKind::PutIfMatch, path, e))?;
        self.done(
            OpKind::PutIfMatch,
            path,
            ObjectVersion {
                e_tag: r.e_tag,
                version: r.version,
            },
        )
    }

    /// The metadata of `path`, or `None` when it does not exist.
    pub async fn head(&self, path: &RelPath) -> Result<Option<FileMeta>, StorageError> {
        self.check(OpKind::Head, path)?;
        let full = self.full(path);
        let meta = match self.store.head(&full).await {
            Ok(m) => Some(self.meta(m)?),
            Err(object_store::Error::NotFound { .. }) => None,
            Err(e) => return Err(self.err(OpKind::Head, path, e)),
        };
        self.done(OpKind::Head, path, meta)
    }

    /// Write `bytes` to `path`, replacing what is there.
    pub async fn put(&self, path: &RelPath, bytes: Bytes) -> Result<(), StorageError> {
        self.check(OpKind::Put, path)?;
        self.check_way(OpKind::Put, std::slice::from_ref(path))
            .await?;
        let full = self.full(path);
        self.store
            .put(&full, PutPayload::from_bytes(bytes))
            .await
            .map_err(|e| self.err(OpKind::Put, path, e))?;
        self.done(OpKind::Put, path, ())
    }

    /// Create `path` with `bytes` only if it does not exist yet; an existing object is
    /// [`StorageError::AlreadyExists`].
    pub async fn put_if_absent(&self, path: &RelPath, bytes: Bytes) -> Result<(), StorageError> {
        self.check(OpKind::PutIfAbsent, path)?;
        self.check_way(OpKind::PutIfAbsent, std::slice::from_ref(path))
            .await?;
        let full = self.full(path);
        let opts = PutOptions {
            mode: PutMode::Create,
            ..Default::default()
        };
        self.store
            .put_opts(&full, PutPayload::from_bytes(bytes), opts)
            .await
            .map_err(|e| self.err(OpKind::PutIfAbsent, path, e))?;
        self.done(OpKind::PutIfAbsent, path, ())
    }

    /// Delete `path`. A missing object counts as deleted.
    pub async fn delete(&self, path: &RelPath) -> Result<(), StorageError> {
        self.check(OpKind::Delete, path)?;
        self.check_way(OpKind::Delete, std::slice::from_ref(path))
            .await?;
        let full = self.full(path);
        match self.store.delete(&full).await {
            Ok(()) | Err(object_store::Error::NotFound { .. }) => {
                self.done(OpKind::Delete, path, ())
            }
            Err(e) => Err(self.err(OpKind::Delete, path, e)),
        }
    }

    /// One `delete_stream` call: which keys it confirmed (a missing object counts), which
    /// failed, and an error that names no key.
    async fn delete_chunk(&self, keys: Vec<Path>) -> ChunkOutcome {
        let mut out = HashMap::with_capacity(keys.len());
        let mut general = None;
        let names: Vec<String> = keys.iter().map(|k| k.to_string()).collect();
        let locations: Vec<object_store::Result<Path>> = keys.into_iter().map(Ok).collect();
        let mut stream = self
            .store
            .delete_stream(futures::stream::iter(locations).boxed());
        while let Some(item) = stream.next().await {
            match item {
                Ok(path) => {
                    out.insert(path.to_string(), Ok(()));
                }
                Err(object_store::Error::NotFound { path, .. }) => {
                    // Object stores name the key, the local store its file system path.
                    if let Some(k) =
                        key_named(&names, |k| path == *k || path.ends_with(&format!("/{k}")))
                    {
                        out.insert(k.clone(), Ok(()));
                    }
                }
                Err(e) => {
                    let text = e.to_string();
                    match key_named(&names, |k| text.contains(k)) {
                        Some(k) => {
                            out.insert(k.clone(), Err(e));
                        }
                        None => general = Some(text),
                    }
                }
            }
        }
        (out, general)
    }

    /// Delete many paths, with bulk requests where the store has them (S3 `DeleteObjects`, 1,000
    /// keys a request) and otherwise at most `concurrency` requests in flight; `on_done` is called
    /// once per path. A missing object counts as deleted. Returns one result per path.
    pub async fn delete_many_with(
        &self,
        paths: Vec<RelPath>,
        concurrency: usize,
        on_done: impl Fn() + Send + Sync,
    ) -> Vec<(RelPath, Result<(), StorageError>)> {
        let mut results = Vec::with_capacity(paths.len());
        let mut by_full: HashMap<String, RelPath> = HashMap::with_capacity(paths.len());
        let mut keys: Vec<Path> = Vec::with_capacity(paths.len());
        let mut checked = Vec::with_capacity(paths.len());
        for p in paths {
            match self.check(OpKind::Delete, &p) {
                Ok(()) => checked.push(p),
                Err(e) => {
                    on_done();
                    results.push((p, Err(e)));
                }
            }
        }
        // The way to each path, right before the requests: no delete through a symbolic link.
        let ways = self.ways(OpKind::Delete, &checked).await;
        for (p, way) in checked.into_iter().zip(ways) {
            match way {
                Ok(()) => {
                    let key = self.full(&p);
                    if by_full.insert(key.to_string(), p).is_none() {
                        keys.push(key);
                    }
                }
                Err(e) => {
                    on_done();
                    results.push((p, Err(e)));
                }
            }
        }
        if by_full.is_empty() {
            return results;
        }
        let chunks: Vec<Vec<Path>> = keys.chunks(1000).map(<[Path]>::to_vec).collect();
        let outcomes: Vec<ChunkOutcome> = futures::stream::iter(chunks)
            .map(|chunk| self.delete_chunk(chunk))
            .buffer_unordered((concurrency / 10).max(1))
            .collect()
            .await;
        let mut confirmed: HashMap<String, Result<(), StorageError>> = HashMap::new();
        let mut general: Option<String> = None;
        for (map, err) in outcomes {
            for (key, r) in map {
                let rel = by_full.get(&key).cloned().unwrap_or_default();
                confirmed.insert(key, r.map_err(|e| self.err(OpKind::Delete, &rel, e)));
            }
            if err.is_some() {
                general = err;
            }
        }
        for (full, rel) in by_full {
            let result = match confirmed.remove(&full) {
                Some(Ok(())) => self.done(OpKind::Delete, &rel, ()),
                Some(Err(e)) => Err(e),
                None => Err(StorageError::Request {
                    uri: self.uri.to_string(),
                    op: OpKind::Delete,
                    path: rel.to_string(),
                    source: Box::new(object_store::Error::Generic {
                        store: "hudi-keeper",
                        source: general
                            .clone()
                            .unwrap_or_else(|| "the store did not confirm the delete".into())
                            .into(),
                    }),
                }),
            };
            on_done();
            results.push((rel, result));
        }
        results
    }
}

/// [`remove_empty_tree`] of `base/segments...`, only when every step below `base` is a real
/// folder: a symbolic link on the way (`.hoodie/.temp/<instant>` pointing elsewhere) could lead
/// out of the table, so then nothing is removed. `base` itself may be a link (a table path).
fn remove_empty_tree_below(base: &std::path::Path, segments: &[String]) -> std::io::Result<()> {
    let mut path = base.to_path_buf();
    for segment in segments {
        path.push(segment);
        match std::fs::symlink_metadata(&path) {
            Ok(meta) if meta.file_type().is_dir() => {}
            Ok(_) => return Ok(()),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(()),
            Err(e) => return Err(e),
        }
    }
    remove_empty_tree(&path)
}

/// Remove `dir` and the folders below it that hold no file, deepest first (a marker folder has
/// one per partition); files, symbolic links and the folders holding them stay. A folder that
/// is gone already, or that something was written into meanwhile, is left as it is.
fn remove_empty_tree(dir: &std::path::Path) -> std::io::Result<()> {
    let entries = match std::fs::read_dir(dir) {
        Ok(e) => e,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(()),
        Err(e) => return Err(e),
    };
    for entry in entries {
        let entry = entry?;
        if entry.file_type()?.is_dir() {
            remove_empty_tree(&entry.path())?;
        }
    }
    match std::fs::remove_dir(dir) {
        Err(e)
            if !matches!(
                e.kind(),
                std::io::ErrorKind::NotFound | std::io::ErrorKind::DirectoryNotEmpty
            ) =>
        {
            Err(e)
        }
        _ => Ok(()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use object_store::memory::InMemory;

    /// A local table's empty folder goes (a writer that died before its first marker leaves its
    /// marker folder so); one that is not empty, or missing, is left; on other stores, nothing.
    #[tokio::test]
    async fn an_empty_local_folder_is_removed_and_nothing_else() {
        let tmp = tempfile::tempdir().unwrap();
        let dir = tmp.path().join("my table %20");
        std::fs::create_dir_all(dir.join(".hoodie/.temp/1/p1/deeper")).unwrap();
        std::fs::create_dir_all(dir.join(".hoodie/.temp/2")).unwrap();
        std::fs::write(dir.join(".hoodie/.temp/2/m.marker.CREATE"), b"").unwrap();
        let s = Storage::open(dir.to_str().unwrap(), &StorageOptions::default()).unwrap();
        s.remove_empty_dir(&p(".hoodie/.temp/1")).await.unwrap();
        s.remove_empty_dir(&p(".hoodie/.temp/2")).await.unwrap();
        s.remove_empty_dir(&p(".hoodie/.temp/3")).await.unwrap();
        assert!(!dir.join(".hoodie/.temp/1").exists());
        assert!(dir.join(".hoodie/.temp/2/m.marker.CREATE").exists());
        // Through a child storage (the metadata table's) too.
        std::fs::create_dir_all(dir.join(".hoodie/metadata/.hoodie/.temp/4")).unwrap();
        s.child(&p(".hoodie/metadata"))
            .remove_empty_dir(&p(".hoodie/.temp/4"))
            .await
            .unwrap();
        assert!(!dir.join(".hoodie/metadata/.hoodie/.temp/4").exists());
        mem().remove_empty_dir(&p(".hoodie/.temp/1")).await.unwrap();
    }

    /// A marker folder that is a symbolic link, or lies below one, is not followed: the empty
    /// folders it points at (outside the table) stay, and so does the link. A folder below a
    /// link is refused, as every mutation through a link is.
    #[cfg(unix)]
    #[tokio::test]
    async fn a_linked_marker_folder_is_not_followed() {
        let tmp = tempfile::tempdir().unwrap();
        let outside = tmp.path().join("outside");
        std::fs::create_dir_all(outside.join("empty/deeper")).unwrap();
        let dir = tmp.path().join("t");
        std::fs::create_dir_all(dir.join(".hoodie/.temp")).unwrap();
        std::os::unix::fs::symlink(outside.join("empty"), dir.join(".hoodie/.temp/1")).unwrap();
        std::os::unix::fs::symlink(&outside, dir.join(".hoodie/.temp/2")).unwrap();
        let s = Storage::open(dir.to_str().unwrap(), &StorageOptions::default()).unwrap();
        s.remove_empty_dir(&p(".hoodie/.temp/1")).await.unwrap();
        let err = s
            .remove_empty_dir(&p(".hoodie/.temp/2/empty"))
            .await
            .unwrap_err();
        assert!(matches!(err, StorageError::SymbolicLink { .. }), "{err}");
        assert!(outside.join("empty/deeper").is_dir());
        assert!(std::fs::symlink_metadata(dir.join(".hoodie/.temp/1")).is_ok());
    }

    /// Every mutation of a local table looks at its way first: a folder on it that is a
    /// symbolic link refuses the request (naming the link) before it reaches the store, and so
    /// does a table folder swapped for a link after it was opened; the files the link leads to
    /// stay. Reads go on; the link itself (the changed path) may be deleted, which removes the
    /// link only.
    #[cfg(unix)]
    #[tokio::test]
    async fn no_mutation_of_a_local_table_goes_through_a_symbolic_link() {
        let tmp = tempfile::tempdir().unwrap();
        let w = std::fs::canonicalize(tmp.path()).unwrap();
        let outside = w.join("outside");
        std::fs::create_dir_all(&outside).unwrap();
        std::fs::write(outside.join("f_1.parquet"), b"outside").unwrap();
        let dir = w.join("t");
        std::fs::create_dir_all(dir.join("p1")).unwrap();
        std::fs::write(dir.join("p1/g_1.parquet"), b"inside").unwrap();
        std::os::unix::fs::symlink(&outside, dir.join("p2")).unwrap();
        std::os::unix::fs::symlink(outside.join("f_1.parquet"), dir.join("p1/leaf")).unwrap();
        for cached in [false, true] {
            let cache = StoreCache::new();
            let s = Storage::open_with(
                dir.to_str().unwrap(),
                &StorageOptions::default(),
                cached.then_some(&cache),
            )
            .unwrap();
            let f = p("p2/f_1.parquet");
            assert_eq!(s.get(&f).await.unwrap(), Bytes::from_static(b"outside"));
            let link = |e: StorageError| match e {
                StorageError::SymbolicLink { link, path, .. } => (link, path),
                other => panic!("not a link refusal: {other}"),
            };
            let want = (dir.join("p2").display().to_string(), f.to_string());
            assert_eq!(link(s.delete(&f).await.unwrap_err()), want);
            let put = s.put(&f, Bytes::from_static(b"x")).await.unwrap_err();
            assert!(put.to_string().contains("symbolic link"), "{put}");
            assert!(put.is_link_refusal());
            let created = s.put_if_absent(&p("p2/new"), Bytes::new()).await;
            assert_eq!(link(created.unwrap_err()).0, want.0);
            let many = s
                .delete_many_with(vec![f.clone(), p("p1/g_1.parquet")], 4, || {})
                .await;
            for (path, r) in many {
                match path.as_str() {
                    "p2/f_1.parquet" => assert_eq!(link(r.unwrap_err()), want),
                    _ => r.unwrap(),
                }
            }
            assert!(!dir.join("p1/g_1.parquet").exists());
            std::fs::write(dir.join("p1/g_1.parquet"), b"inside").unwrap();
            assert_eq!(
                std::fs::read(outside.join("f_1.parquet")).unwrap(),
                b"outside"
            );
            s.check_tree(OpKind::Delete, &p("p1")).await.unwrap_err();
            s.check_tree(OpKind::Delete, &p("p2")).await.unwrap_err();
            // Below the table's child (the metadata table's) storage too.
            let err = s
                .child(&p("p2"))
                .delete(&p("f_1.parquet"))
                .await
                .unwrap_err();
            assert_eq!(link(err).0, want.0);
        }
        // The leaf itself may be a link: deleting it removes the link, not what it points to.
        let s = Storage::open(dir.to_str().unwrap(), &StorageOptions::default()).unwrap();
        s.delete(&p("p1/leaf")).await.unwrap();
        assert!(std::fs::symlink_metadata(dir.join("p1/leaf")).is_err());
        assert_eq!(
            std::fs::read(outside.join("f_1.parquet")).unwrap(),
            b"outside"
        );
        s.check_tree(OpKind::Delete, &p("p1")).await.unwrap();

        // The table folder swapped for a link after it was opened: every mutation refused.
        std::fs::create_dir_all(outside.join("p1")).unwrap();
        std::fs::write(outside.join("p1/g_1.parquet"), b"outside").unwrap();
        std::fs::rename(&dir, w.join("t.orig")).unwrap();
        std::os::unix::fs::symlink(&outside, &dir).unwrap();
        let g = p("p1/g_1.parquet");
        let moved = |e: StorageError| match e {
            StorageError::TableFolderMoved { folder, now, .. } => (folder, now),
            other => panic!("not a moved table folder: {other}"),
        };
        let (folder, now) = moved(s.delete(&g).await.unwrap_err());
        assert_eq!(folder, dir.display().to_string());
        assert!(now.contains("symbolic link"), "{now}");
        moved(s.put(&g, Bytes::new()).await.unwrap_err());
        moved(s.remove_empty_dir(&p("p1")).await.unwrap_err());
        for (_, r) in s.delete_many_with(vec![g.clone()], 4, || {}).await {
            moved(r.unwrap_err());
        }
        assert_eq!(
            std::fs::read(outside.join("p1/g_1.parquet")).unwrap(),
            b"outside"
        );
        // Object stores have no links: nothing to look at.
        let m = mem();
        assert!(!m.is_local());
        m.check_way(OpKind::Delete, &[g]).await.unwrap();
    }

    fn mem() -> Storage {
        Storage::from_store(
            Arc::new(InMemory::new()),
            "warehouse/t1",
            "memory://test/t1",
        )
    }

    fn p(s: &str) -> RelPath {
        RelPath::parse(s).unwrap()
    }

    #[tokio::test]
    async fn a_filtered_one_level_listing_keeps_what_it_accepts_and_names_each_folder_once() {
        let s = mem();
        for k in [
            "a.parquet",
            "b.log",
            "p1/x.parquet",
            "p1/y/z",
            "p2/w",
            ".hoodie/t",
        ] {
            s.put(&p(k), Bytes::from_static(b"1")).await.unwrap();
        }
        let root = s
            .list_dir_filtered(&RelPath::root(), |f| f.file_name().ends_with(".parquet"))
            .await
            .unwrap();
        let files: Vec<String> = root.files.iter().map(|f| f.path.to_string()).collect();
        assert_eq!(files, vec!["a.parquet"]);
        assert_eq!(root.dirs, vec![".hoodie", "p1", "p2"]);
        let p1 = s.list_dir_filtered(&p("p1"), |_| true).await.unwrap();
        let files: Vec<String> = p1.files.iter().map(|f| f.path.to_string()).collect();
        assert_eq!(files, vec!["p1/x.parquet"]);
        assert_eq!(p1.dirs, vec!["y"]);
        let none = s.list_dir_filtered(&p("nothing"), |_| true).await.unwrap();
        assert!(none.files.is_empty() && none.dirs.is_empty());
    }

    #[tokio::test]
    async fn put_if_absent_refuses_to_overwrite() {
        let s = mem();
        s.put_if_absent(&p("a/b"), Bytes::from_static(b"1"))
            .await
            .unwrap();
        let err = s
            .put_if_absent(&p("a/b"), Bytes::from_static(b"2"))
            .await
            .unwrap_err();
        assert!(matches!(err, StorageError::AlreadyExists { .. }), "{err}");
        assert_eq!(s.get(&p("a/b")).await.unwrap(), Bytes::from_static(b"1"));
    }

    #[tokio::test]
    async fn missing_objects_read_as_none_and_delete_as_done() {
        let s = mem();
        assert!(s.get_opt(&p("nope")).await.unwrap().is_none());
        assert!(s.head(&p("nope")).await.unwrap().is_none());
        assert!(matches!(
            s.get(&p("nope")).await.unwrap_err(),
            StorageError::NotFound { .. }
        ));
        s.delete(&p("nope")).await.unwrap();
    }

    #[tokio::test]
    async fn listings_are_relative_to_the_root_and_stay_inside_it() {
        let store: Arc<dyn ObjectStore> = Arc::new(InMemory::new());
        let s = Storage::from_store(Arc::clone(&store), "wh/t1", "memory://x/t1");
        let other = Storage::from_store(store, "wh/t10", "memory://x/t10");
        other
            .put(&p(".hoodie/x"), Bytes::from_static(b"o"))
            .await
            .unwrap();
        s.put(&p(".hoodie/1.commit"), Bytes::from_static(b"c"))
            .await
            .unwrap();
        s.put(&p(".hoodie/.temp/1/p/f.marker.CREATE"), Bytes::new())
            .await
            .unwrap();
        let all = s.list(&RelPath::root()).await.unwrap();
        let mut names: Vec<_> = all.iter().map(|m| m.path.to_string()).collect();
        names.sort();
        assert_eq!(
            names,
            vec![".hoodie/.temp/1/p/f.marker.CREATE", ".hoodie/1.commit"]
        );
        let dir = s.list_dir(&p(".hoodie")).await.unwrap();
        assert_eq!(dir.files.len(), 1);
        assert_eq!(dir.files[0].file_name(), "1.commit");
        assert_eq!(dir.dirs, vec![".temp".to_string()]);
    }

    #[tokio::test]
    async fn a_filtered_listing_keeps_only_the_accepted_entries_and_is_one_list_request() {
        let counter = Arc::new(testing::CountingInterceptor::new());
        let s = mem().with_interceptor(counter.clone());
        for k in [
            "p/a_1.parquet",
            "p/b_2.parquet",
            "p/q/c_1.parquet",
            "other/d_1.parquet",
        ] {
            s.put(&p(k), Bytes::new()).await.unwrap();
        }
        let mut judged = 0;
        let kept = s
            .list_filtered(&p("p"), |m| {
                judged += 1;
                m.file_name().ends_with("_1.parquet")
            })
            .await
            .unwrap();
        let names: Vec<&str> = kept.iter().map(|m| m.path.as_str()).collect();
        assert_eq!(names, vec!["p/a_1.parquet", "p/q/c_1.parquet"]);
        assert_eq!(judged, 3, "every entry below the prefix is judged once");
        assert_eq!(counter.count(OpKind::List), 1);

        let fail = Arc::new(testing::FailNth::new(&[OpKind::List], 1));
        let s = s.with_interceptor(fail);
        let err = s.list_filtered(&p("p"), |_| true).await.unwrap_err();
        assert!(matches!(err, StorageError::Injected { .. }), "{err}");
    }

    fn too_large(err: &StorageError) -> Option<(u64, u64)> {
        match err {
            StorageError::TooLarge { size, max, .. } => Some((*size, *max)),
            _ => None,
        }
    }

    #[tokio::test]
    async fn an_object_larger_than_the_cap_is_refused_before_its_body_is_read() {
        let inner: Arc<dyn ObjectStore> = Arc::new(InMemory::new());
        let plain = Storage::from_store(Arc::clone(&inner), "t", "memory://t");
        let path = p(".hoodie/1.rollback.requested");
        plain.put(&path, Bytes::from_static(b"plan")).await.unwrap();
        // The store reports the object as 10 GiB: refused on the size the store reported,
        // with the one GET (no extra request) and none of the body pulled.
        let huge = Arc::new(testing::SizeClaimingStore::new(inner, 10 << 30));
        let counter = Arc::new(testing::CountingInterceptor::new());
        let s =
            Storage::from_store(huge.clone(), "t", "memory://t").with_interceptor(counter.clone());
        let err = refused(s.get(&path).await);
        assert_eq!(too_large(&err), Some((10 << 30, DEFAULT_MAX_READ)), "{err}");
        assert!(
            err.to_string().contains(".hoodie/1.rollback.requested"),
            "{err}"
        );
        let err = refused(s.get_opt(&path).await.map(Option::unwrap_or_default));
        assert!(too_large(&err).is_some(), "{err}");
        let err = refused(
            s.get_versioned(&path, SMALL_FILE_MAX_READ)
                .await
                .map(|v| v.map(|(b, _)| b).unwrap_or_default()),
        );
        assert_eq!(
            too_large(&err),
            Some((10 << 30, SMALL_FILE_MAX_READ)),
            "{err}"
        );
        assert_eq!(huge.body_bytes_read(), 0, "no body byte was read");
        assert_eq!(counter.count(OpKind::Get), 3);
        assert_eq!(counter.total(), 3, "the size came with the GET");
    }

    #[tokio::test]
    async fn a_body_longer_than_the_store_said_stops_at_the_cap() {
        let inner: Arc<dyn ObjectStore> = Arc::new(InMemory::new());
        let path = p(".hoodie/hoodie.properties");
        Storage::from_store(Arc::clone(&inner), "t", "memory://t")
            .put(&path, Bytes::from(vec![b'x'; 3000]))
            .await
            .unwrap();
        // Claims 10 bytes, sends 3,000.
        let lying = Arc::new(testing::SizeClaimingStore::new(inner, 10));
        let s = Storage::from_store(lying, "t", "memory://t");
        let err = refused(s.get_capped(&path, 1000).await);
        let (size, max) = too_large(&err).unwrap_or_else(|| panic!("{err}"));
        assert_eq!(max, 1000);
        assert!(size > 1000, "{err}");
        let err = refused(
            s.get_versioned(&path, 1000)
                .await
                .map(|v| v.map(|(b, _)| b).unwrap_or_default()),
        );
        assert!(too_large(&err).is_some(), "{err}");
    }

    /// The error of a read expected to fail, without printing bytes a wrong success returned.
    fn refused(r: Result<impl AsRef<[u8]>, StorageError>) -> StorageError {
        match r {
            Ok(b) => panic!("read {} bytes instead of refusing", b.as_ref().len()),
            Err(e) => e,
        }
    }

    #[tokio::test]
    async fn local_files_over_the_cap_are_refused_and_files_at_the_cap_are_read() {
        let tmp = tempfile::tempdir().unwrap();
        let dir = tmp.path().join(".hoodie");
        std::fs::create_dir_all(&dir).unwrap();
        // Sparse files: their size costs no disk.
        let sized = |name: &str, len: u64| {
            let f = std::fs::File::create(dir.join(name)).unwrap();
            f.set_len(len).unwrap();
        };
        sized("over", SMALL_FILE_MAX_READ + 1);
        sized("at", SMALL_FILE_MAX_READ);
        let counter = Arc::new(testing::CountingInterceptor::new());
        let s = Storage::open(tmp.path().to_str().unwrap(), &StorageOptions::default())
            .unwrap()
            .with_interceptor(counter.clone());
        let err = refused(s.get_capped(&p(".hoodie/over"), SMALL_FILE_MAX_READ).await);
        assert_eq!(
            too_large(&err),
            Some((SMALL_FILE_MAX_READ + 1, SMALL_FILE_MAX_READ)),
            "{err}"
        );
        let err = refused(
            s.get_opt_capped(&p(".hoodie/over"), SMALL_FILE_MAX_READ)
                .await
                .map(Option::unwrap_or_default),
        );
        assert!(too_large(&err).is_some(), "{err}");
        let err = refused(
            s.get_versioned(&p(".hoodie/over"), SMALL_FILE_MAX_READ)
                .await
                .map(|v| v.map(|(b, _)| b).unwrap_or_default()),
        );
        assert!(too_large(&err).is_some(), "{err}");
        let at = s
            .get_capped(&p(".hoodie/at"), SMALL_FILE_MAX_READ)
            .await
            .unwrap();
        assert_eq!(at.len() as u64, SMALL_FILE_MAX_READ);
        assert!(s
            .get_opt_capped(&p(".hoodie/missing"), 1)
            .await
            .unwrap()
            .is_none());
        assert_eq!(counter.total(), 5, "one GET each, nothing else");
    }

    #[tokio::test]
    async fn child_storage_is_rooted_below_the_parent() {
        let s = mem();
        let md = s.child(&p(".hoodie/metadata"));
        md.put(&p(".hoodie/hoodie.properties"), Bytes::from_static(b"x"))
            .await
            .unwrap();
        assert!(s
            .head(&p(".hoodie/metadata/.hoodie/hoodie.properties"))
            .await
            .unwrap()
            .is_some());
        assert_eq!(md.uri(), "memory://test/t1/.hoodie/metadata");
    }
}

/// Keys as Hudi writes them (url-encoded partition values, `~`, `#`, brackets, spaces, non-ASCII):
/// every request addresses exactly the key a listing returned, never a re-encoded one.
#[cfg(test)]
mod special_keys {
    use super::*;
    use object_store::local::LocalFileSystem;
    use object_store::memory::InMemory;

    /// Partition folders as Hudi names them, one per character class object_store would
    /// percent-encode (or that URLs treat specially).
    const PARTITIONS: [&str; 14] = [
        "3%3A0",
        "dt=2024-01-01 10%3A00",
        "a%25b",
        "1~0",
        "x#1",
        "[p]",
        "with space",
        "é",
        "日本",
        "k=v+w",
        "dt=10:00",
        "{b}^|`\"<>*?",
        "q?x=1&y",
        "%2e",
    ];

    fn rel(s: &str) -> RelPath {
        RelPath::parse(s).unwrap()
    }

    fn keys() -> Vec<String> {
        PARTITIONS
            .iter()
            .map(|p| format!("{p}/fg-0_0-1-1_20240101000000000.parquet"))
            .collect()
    }

    /// The raw keys below `root` in `store`, relative to `root`, as the store lists them.
    async fn raw_keys(store: &dyn ObjectStore, root: &str) -> Vec<String> {
        let prefix = Path::parse(root).unwrap();
        let mut out: Vec<String> = store
            .list(Some(&prefix))
            .map_ok(|m| {
                m.location.as_ref()[root.len()..]
                    .trim_start_matches('/')
                    .to_string()
            })
            .try_collect()
            .await
            .unwrap();
        out.sort();
        out
    }

    async fn round_trip(
        s: &Storage,
        raw: impl Fn() -> futures::future::BoxFuture<'static, Vec<String>>,
    ) {
        // Written through the seam: the store holds exactly the key asked for.
        for k in keys() {
            s.put(&rel(&k), Bytes::from(k.clone())).await.unwrap();
        }
        let mut want = keys();
        want.sort();
        assert_eq!(raw().await, want, "the store holds the exact keys");
        // Listed keys are the raw keys, and each is read, headed and deleted by it.
        let mut listed: Vec<String> = s
            .list(&RelPath::root())
            .await
            .unwrap()
            .into_iter()
            .map(|m| m.path.to_string())
            .collect();
        listed.sort();
        assert_eq!(listed, want);
        let mut dirs = s.list_dir(&RelPath::root()).await.unwrap().dirs;
        dirs.sort();
        let mut parts: Vec<String> = PARTITIONS.iter().map(|p| p.to_string()).collect();
        parts.sort();
        assert_eq!(dirs, parts);
        for d in &dirs {
            let inside = s.list_dir(&rel(d)).await.unwrap();
            assert_eq!(inside.files.len(), 1, "{d}");
            let key = inside.files[0].path.clone();
            assert_eq!(s.get(&key).await.unwrap(), Bytes::from(key.to_string()));
            assert!(s.head(&key).await.unwrap().is_some(), "{key}");
            assert!(s.get_opt(&key).await.unwrap().is_some(), "{key}");
        }
        // One listed key deleted on its own, by the exact key it was listed as.
        let first = s.list_dir(&rel(PARTITIONS[0])).await.unwrap().files[0]
            .path
            .clone();
        s.delete(&first).await.unwrap();
        assert!(s.head(&first).await.unwrap().is_none());
        assert!(!raw().await.contains(&first.to_string()));
        // The rest in bulk: every delete confirmed, and the store really is empty.
        let rest: Vec<RelPath> = s
            .list(&RelPath::root())
            .await
            .unwrap()
            .into_iter()
            .map(|m| m.path)
            .collect();
        assert_eq!(rest.len(), PARTITIONS.len() - 1);
        for (p, r) in s.delete_many_with(rest, 4, || {}).await {
            r.unwrap_or_else(|e| panic!("{p}: {e}"));
        }
        assert_eq!(raw().await, Vec::<String>::new());
        // Create-if-absent and conditional writes address the same keys.
        let k = rel(&keys()[1]);
        s.put_if_absent(&k, Bytes::from_static(b"1")).await.unwrap();
        assert!(matches!(
            s.put_if_absent(&k, Bytes::from_static(b"2"))
                .await
                .unwrap_err(),
            StorageError::AlreadyExists { .. }
        ));
        assert_eq!(raw().await, vec![keys()[1].clone()]);
        s.delete(&k).await.unwrap();
    }

    #[tokio::test]
    async fn in_memory_keys_round_trip_exactly_as_listed() {
        let store: Arc<dyn ObjectStore> = Arc::new(InMemory::new());
        let s = Storage::from_store(Arc::clone(&store), "wh/t", "memory://x/wh/t");
        let raw = move || {
            let store = Arc::clone(&store);
            Box::pin(async move { raw_keys(store.as_ref(), "wh/t").await })
                as futures::future::BoxFuture<'static, Vec<String>>
        };
        round_trip(&s, raw).await;
    }

    fn local_files(dir: &std::path::Path) -> Vec<String> {
        let mut out = Vec::new();
        let mut stack = vec![dir.to_path_buf()];
        while let Some(d) = stack.pop() {
            // The shared local store removes folders a delete left empty, this one too.
            let Ok(entries) = std::fs::read_dir(&d) else {
                continue;
            };
            for e in entries {
                let e = e.unwrap();
                if e.file_type().unwrap().is_dir() {
                    stack.push(e.path());
                } else {
                    let rel = e
                        .path()
                        .strip_prefix(dir)
                        .unwrap()
                        .to_str()
                        .unwrap()
                        .to_string();
                    out.push(rel);
                }
            }
        }
        out.sort();
        out
    }

    #[tokio::test]
    async fn local_keys_round_trip_exactly_as_listed_in_a_folder_named_with_a_space_and_percent() {
        let tmp = tempfile::tempdir().unwrap();
        let dir = tmp.path().join("my table %3A~#1");
        std::fs::create_dir_all(&dir).unwrap();
        for opened in [
            Storage::open(dir.to_str().unwrap(), &StorageOptions::default()).unwrap(),
            Storage::open_with(
                dir.to_str().unwrap(),
                &StorageOptions::default(),
                Some(&StoreCache::new()),
            )
            .unwrap(),
        ] {
            let d = dir.clone();
            let raw = move || {
                let d = d.clone();
                Box::pin(async move { local_files(&d) })
                    as futures::future::BoxFuture<'static, Vec<String>>
            };
            round_trip(&opened, raw).await;
        }
    }

    #[tokio::test]
    async fn files_written_by_another_writer_are_found_read_and_deleted_by_their_listed_key() {
        // Hudi wrote these (not through the seam): the listing returns them raw, and the
        // seam must address that same file.
        let tmp = tempfile::tempdir().unwrap();
        for k in keys() {
            let path = tmp.path().join(&k);
            std::fs::create_dir_all(path.parent().unwrap()).unwrap();
            std::fs::write(&path, k.as_bytes()).unwrap();
        }
        let store: Arc<dyn ObjectStore> =
            Arc::new(LocalFileSystem::new_with_prefix(tmp.path()).unwrap());
        let s = Storage::from_store(store, "", "file:///t");
        let listed = s.list(&RelPath::root()).await.unwrap();
        assert_eq!(listed.len(), PARTITIONS.len());
        for m in &listed {
            assert_eq!(
                s.get(&m.path).await.unwrap(),
                Bytes::from(m.path.to_string())
            );
        }
        let paths: Vec<RelPath> = listed.into_iter().map(|m| m.path).collect();
        for (p, r) in s.delete_many_with(paths, 8, || {}).await {
            r.unwrap_or_else(|e| panic!("{p}: {e}"));
        }
        assert_eq!(local_files(tmp.path()), Vec::<String>::new());
    }

    /// The local one-level listing (directory entries, `stat` for kept files only) names what
    /// object_store's own walk of the same folder names, special names, links and object_store's
    /// staged uploads included, and keeps only what the filter accepts.
    #[tokio::test]
    async fn the_local_one_level_listing_names_what_object_stores_walk_names() {
        let tmp = tempfile::tempdir().unwrap();
        let base = tmp.path();
        let mut names: Vec<String> = PARTITIONS.iter().map(|p| p.to_string()).collect();
        names.push("g#x".into());
        for (i, folder) in PARTITIONS.iter().enumerate() {
            let dir = base.join(folder);
            std::fs::create_dir_all(&dir).unwrap();
            for n in &names {
                std::fs::write(dir.join(format!("{n}_{i}.parquet")), n.as_bytes()).unwrap();
            }
            std::fs::create_dir_all(dir.join("sub").join("deeper")).unwrap();
            std::fs::write(dir.join("sub").join("deeper").join("x"), b"x").unwrap();
        }
        let first = base.join(PARTITIONS[0]);
        std::os::unix::fs::symlink(first.join("1~0_0.parquet"), first.join("link-to-file"))
            .unwrap();
        std::os::unix::fs::symlink(base.join(PARTITIONS[1]), first.join("link-to-dir")).unwrap();
        std::os::unix::fs::symlink(first.join("gone"), first.join("dangling")).unwrap();
        let _socket = std::os::unix::net::UnixListener::bind(first.join("socket")).unwrap();
        // object_store's staged upload of `h_0.parquet`: never listed
        std::fs::write(first.join("h_0.parquet#12"), b"h").unwrap();
        std::fs::write(base.join("top.parquet"), b"t").unwrap();

        let fast = Storage::open(base.to_str().unwrap(), &StorageOptions::default()).unwrap();
        assert!(fast.local_dir.is_some());
        let walk = Storage::from_store(
            Arc::new(LocalFileSystem::new_with_prefix(base).unwrap()),
            "",
            "file:///walk",
        );
        let mut folders: Vec<RelPath> = PARTITIONS.iter().map(|p| rel(p)).collect();
        folders.push(RelPath::root());
        folders.push(rel("no such folder"));
        for folder in &folders {
            for only_parquet in [false, true] {
                let keep = |p: &RelPath| !only_parquet || p.file_name().ends_with(".parquet");
                let a = fast.list_dir_filtered(folder, keep).await.unwrap();
                let b = walk.list_dir_filtered(folder, keep).await.unwrap();
                let names = |l: &DirListing| {
                    let mut v: Vec<(String, u64)> = l
                        .files
                        .iter()
                        .map(|f| (f.path.to_string(), f.size))
                        .collect();
                    v.sort();
                    v
                };
                assert_eq!(names(&a), names(&b), "{folder}");
                assert_eq!(a.dirs, b.dirs, "{folder}");
                if folder.as_str() == PARTITIONS[0] {
                    let listed: Vec<&str> = a.files.iter().map(|f| f.file_name()).collect();
                    assert!(!listed.contains(&"h_0.parquet#12"), "{listed:?}");
                    assert!(listed.contains(&"g#x_0.parquet"), "{listed:?}");
                    assert_eq!(
                        listed.contains(&"link-to-file"),
                        !only_parquet,
                        "{listed:?}"
                    );
                    assert!(!listed.contains(&"dangling") && !listed.contains(&"socket"));
                    assert!(a.dirs.contains(&"link-to-dir".to_string()), "{:?}", a.dirs);
                }
            }
        }
        let kept = fast
            .list_dir_filtered(&rel(PARTITIONS[2]), |p| p.file_name().starts_with("[p]"))
            .await
            .unwrap();
        assert_eq!(kept.files.len(), 1);
        assert_eq!(
            kept.files[0].path.as_str(),
            format!("{}/[p]_2.parquet", PARTITIONS[2])
        );
        assert_eq!(kept.files[0].size, 3);
        // Every key it lists is the key the seam reads and deletes.
        let key = kept.files[0].path.clone();
        assert_eq!(fast.get(&key).await.unwrap(), Bytes::from_static(b"[p]"));
        fast.delete(&key).await.unwrap();
        assert!(!base.join(PARTITIONS[2]).join("[p]_2.parquet").exists());
    }

    #[tokio::test]
    async fn a_local_folder_listing_more_entries_than_one_chunk_lists_them_all() {
        let tmp = tempfile::tempdir().unwrap();
        let n = LOCAL_LIST_CHUNK * 2 + 7;
        for i in 0..n {
            std::fs::write(tmp.path().join(format!("f{i:05}")), b"").unwrap();
        }
        let s = Storage::open(tmp.path().to_str().unwrap(), &StorageOptions::default()).unwrap();
        let all = s
            .list_dir_filtered(&RelPath::root(), |_| true)
            .await
            .unwrap();
        assert_eq!(all.files.len(), n);
        let some = s
            .list_dir_filtered(&RelPath::root(), |p| p.file_name().ends_with('3'))
            .await
            .unwrap();
        assert_eq!(some.files.len(), (0..n).filter(|i| i % 10 == 3).count());
    }

    #[tokio::test]
    async fn a_child_storage_below_a_special_folder_addresses_its_keys_exactly() {
        let store: Arc<dyn ObjectStore> = Arc::new(InMemory::new());
        let s = Storage::from_store(Arc::clone(&store), "wh/a%3Ab", "memory://x/wh/a%3Ab");
        let child = s.child(&rel("x#1/[p]"));
        child
            .put(&rel("1~0/f"), Bytes::from_static(b"c"))
            .await
            .unwrap();
        assert_eq!(
            raw_keys(store.as_ref(), "wh").await,
            vec!["a%3Ab/x#1/[p]/1~0/f"]
        );
        assert_eq!(
            s.list(&RelPath::root()).await.unwrap()[0].path.as_str(),
            "x#1/[p]/1~0/f"
        );
    }
}
