//! The way to a path on the local file system: every mutation of a local table first checks
//! that the table folder is the one opened and that no folder on the way is a symbolic link
//! (the checks themselves are in `links`).

use super::{blocking, links, OpKind, RelPath, Storage, StorageError};

impl Storage {
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
        let root = local.table().to_path_buf();
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
    pub(super) async fn ways(
        &self,
        op: OpKind,
        paths: &[RelPath],
    ) -> Vec<Result<(), StorageError>> {
        let Some(local) = &self.local_root else {
            return paths.iter().map(|_| Ok(())).collect();
        };
        let root = local.table().to_path_buf();
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
                    .map(|l| l.table().display().to_string())
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
}
