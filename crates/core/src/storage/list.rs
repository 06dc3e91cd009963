//! Listing a table's objects: recursively, or one level at a time (page by page on object
//! stores, in bounded chunks on the local file system), keeping only what a predicate accepts.

use futures::TryStreamExt;
use object_store::list::PaginatedListOptions;

use super::{blocking, DirListing, FileMeta, Folders, OpKind, RelPath, Storage, StorageError};

/// Directory entries read per blocking step of a local one-level listing.
pub(super) const LOCAL_LIST_CHUNK: usize = 1024;

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

impl Storage {
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

    /// Whether a recursive listing can start past a folder without reading it
    /// ([`Storage::list_filtered_past`]): object stores (S3's `start-after`, GCS's and Azure's
    /// offsets); not the local file system, whose listing walks every folder.
    pub fn lists_past_a_folder(&self) -> bool {
        self.pages.is_some()
    }

    /// [`Storage::list_filtered`] of the objects below `prefix` whose keys sort after the
    /// folder `skip` (a name directly below `prefix`) and everything in it: one listing that
    /// starts past the folder, so its objects are never read where the store can start there
    /// ([`Storage::lists_past_a_folder`]); where it cannot, they are read and dropped. Objects
    /// sorting before `skip` are not listed. One [`OpKind::List`] request.
    pub async fn list_filtered_past(
        &self,
        prefix: &RelPath,
        skip: &str,
        mut keep: impl FnMut(&FileMeta) -> bool,
    ) -> Result<Vec<FileMeta>, StorageError> {
        self.check(OpKind::List, prefix)?;
        let full = self.full(prefix);
        // The greatest key in `skip/` a store holds in practice: U+10FFFF is the last
        // character, so the listing starts right after the folder.
        let mut offset = full.clone();
        offset.extend([super::key_part(skip), super::key_part("\u{10FFFF}")]);
        let inside = format!("{skip}/");
        let mut stream = self.store.list_with_offset(Some(&full), &offset);
        let mut kept = Vec::new();
        while let Some(m) = stream
            .try_next()
            .await
            .map_err(|e| self.err(OpKind::List, prefix, e))?
        {
            let meta = self.meta(m)?;
            let rel = meta
                .path
                .as_str()
                .strip_prefix(prefix.as_str())
                .map(|r| r.trim_start_matches('/'))
                .unwrap_or(meta.path.as_str());
            if rel.starts_with(&inside) || rel < skip {
                continue;
            }
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
        match (&self.pages, self.local_dir()) {
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

    /// The folders directly below `prefix`, for a walk that must not leave the tree it walks
    /// (a scan for tables): the folder names [`Storage::list_dir_filtered`] lists, except that
    /// on the local file system a symbolic link is not followed: one to a folder is named in
    /// [`Folders::links`], not in [`Folders::dirs`]. One [`OpKind::ListDir`] request; a missing
    /// prefix lists as empty.
    pub async fn list_folders(&self, prefix: &RelPath) -> Result<Folders, StorageError> {
        let Some(base) = self.local_dir().filter(|_| self.pages.is_none()) else {
            let listing = self.list_dir_filtered(prefix, |_| false).await?;
            return Ok(Folders {
                dirs: listing.dirs,
                links: Vec::new(),
            });
        };
        self.check(OpKind::ListDir, prefix)?;
        let folder = prefix.segments().fold(base.to_path_buf(), |p, s| p.join(s));
        let read = blocking(move || {
            let mut out = Folders::default();
            let entries = match std::fs::read_dir(&folder) {
                Ok(rd) => rd,
                Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(out),
                Err(e) => return Err(e),
            };
            for entry in entries {
                let entry = entry?;
                let kind = entry.file_type()?;
                let to = if kind.is_dir() {
                    &mut out.dirs
                } else if kind.is_symlink()
                    && std::fs::metadata(entry.path()).is_ok_and(|m| m.is_dir())
                {
                    &mut out.links
                } else {
                    continue;
                };
                to.push(entry.file_name().into_string().map_err(|n| {
                    std::io::Error::new(
                        std::io::ErrorKind::InvalidData,
                        format!("file name {n:?} is not UTF-8"),
                    )
                })?);
            }
            out.dirs.sort();
            out.links.sort();
            Ok(out)
        })
        .await
        .map_err(|e| self.local_err(OpKind::ListDir, prefix, e))?;
        self.done(OpKind::ListDir, prefix, read)
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

    pub(super) fn local_err(&self, op: OpKind, path: &RelPath, e: std::io::Error) -> StorageError {
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
}
