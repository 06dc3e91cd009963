//! Writing and deleting: create-if-absent, replace-if-unchanged, plain puts, deletes one by
//! one or in bulk (each key confirmed by the store), and the removal of emptied local folders.

use std::collections::HashMap;

use bytes::Bytes;
use futures::StreamExt;
use object_store::path::Path;
use object_store::{ObjectStoreExt, PutMode, PutOptions, PutPayload};

use super::{
    blocking, key_named, ChunkOutcome, ObjectVersion, OpKind, RelPath, Storage, StorageError,
};

impl Storage {
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

    /// Remove the folder `dir` and its subfolders where they hold no file, as Hudi's recursive
    /// delete of a folder leaves none: on the local file system only (object stores have no
    /// folder apart from the keys in it). Files are never removed here; a folder that is not
    /// empty (something was written into it since) or not there is left as it is. Counted as
    /// one delete request.
    pub async fn remove_empty_dir(&self, dir: &RelPath) -> Result<(), StorageError> {
        let Some(base) = self.local_dir() else {
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
