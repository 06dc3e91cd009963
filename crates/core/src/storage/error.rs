use super::relpath::{RelPath, RelPathError};
use super::OpKind;

/// A failed storage request, with the table URI and the path it concerned.
#[derive(Debug, thiserror::Error)]
pub enum StorageError {
    /// The URI could not be turned into a store.
    #[error("cannot open storage for `{uri}`: {reason}")]
    Open {
        /// The table URI.
        uri: String,
        /// Why.
        reason: String,
    },
    /// The object does not exist.
    #[error("`{path}` does not exist in table `{uri}`")]
    NotFound {
        /// The table URI.
        uri: String,
        /// The table-relative path.
        path: String,
    },
    /// A create-if-absent found the object already there.
    #[error("`{path}` already exists in table `{uri}`")]
    AlreadyExists {
        /// The table URI.
        uri: String,
        /// The table-relative path.
        path: String,
    },
    /// A conditional write found the object changed (or gone) since it was read.
    #[error("`{path}` in table `{uri}` changed since it was read (conditional write refused)")]
    Conflict {
        /// The table URI.
        uri: String,
        /// The table-relative path.
        path: String,
    },
    /// The store cannot do what was asked (a conditional update on the local file system).
    #[error("{op} of `{path}` in table `{uri}`: the store does not support it: {reason}")]
    Unsupported {
        /// The table URI.
        uri: String,
        /// The request kind.
        op: OpKind,
        /// The table-relative path.
        path: String,
        /// The store's words.
        reason: String,
    },
    /// A request refused before it reached the store: a mutation because the table lock is no
    /// longer safely held, or (from a caller's interceptor) any request past its budget (the
    /// daemon's audit, `audit_max_requests`).
    #[error("{op} of `{path}` in table `{uri}` was not sent: {reason}")]
    Fenced {
        /// The table URI.
        uri: String,
        /// The request kind.
        op: OpKind,
        /// The table-relative path.
        path: String,
        /// Why the claim it rests on (the table lock, a rollback heartbeat) is not safe.
        reason: String,
    },
    /// Any other failure of the store.
    #[error("{op} of `{path}` in table `{uri}` failed: {source}")]
    Request {
        /// The table URI.
        uri: String,
        /// The request kind.
        op: OpKind,
        /// The table-relative path.
        path: String,
        /// The store's error.
        #[source]
        source: Box<object_store::Error>,
    },
    /// An object larger than what is read of it: refused before its body is read, so that a
    /// huge or corrupt file cannot exhaust memory. The object is left as it is.
    #[error(
        "`{path}` in table `{uri}` is {size} bytes, more than the {max} bytes hudi-keeper reads \
         of such a file (left as it is; check what wrote it)"
    )]
    TooLarge {
        /// The table URI.
        uri: String,
        /// The table-relative path.
        path: String,
        /// Its size as the store reported it (or as much as was received before the read
        /// stopped).
        size: u64,
        /// The most that is read of it.
        max: u64,
    },
    /// A mutation refused before it reached the store: a folder on its way below the table's
    /// base path is a symbolic link, which the local store would follow out of the table (or
    /// into another part of it). Nothing was changed through it.
    #[error(
        "{op} of `{path}` in table `{uri}` refused: `{link}` is a symbolic link{}; hudi-keeper \
         never deletes or writes through a link below a table's base path",
        target.as_ref().map(|t| format!(" (to `{t}`)")).unwrap_or_default()
    )]
    SymbolicLink {
        /// The table URI.
        uri: String,
        /// The request kind.
        op: OpKind,
        /// The table-relative path the mutation was for.
        path: String,
        /// The link, as a path on disk.
        link: String,
        /// What the link points to, where it could be read.
        target: Option<String>,
    },
    /// A mutation refused before it reached the store: the local table's folder is no longer
    /// the folder it was opened at (swapped for a symbolic link, moved, removed). Nothing was
    /// changed.
    #[error(
        "{op} of `{path}` in table `{uri}` refused: the table folder `{folder}` {now}; \
         hudi-keeper only changes the folder it opened, never through a symbolic link"
    )]
    TableFolderMoved {
        /// The table URI.
        uri: String,
        /// The request kind.
        op: OpKind,
        /// The table-relative path the mutation was for.
        path: String,
        /// The table folder as opened (canonical).
        folder: String,
        /// How it is now.
        now: String,
    },
    /// The store returned a path outside the table root.
    #[error("the store returned `{path}`, which is outside table `{uri}`")]
    OutsideRoot {
        /// The table URI.
        uri: String,
        /// The offending path.
        path: String,
    },
    /// A path that would leave the table.
    #[error(transparent)]
    BadPath(#[from] RelPathError),
    /// A failure injected by a test interceptor.
    #[error("injected failure: {op} #{n} of `{path}`")]
    Injected {
        /// The request kind.
        op: OpKind,
        /// The 1-based index of the request among requests of its kind.
        n: u64,
        /// The table-relative path.
        path: String,
    },
}

impl StorageError {
    pub(crate) fn from_store(
        uri: &str,
        op: OpKind,
        path: &RelPath,
        source: object_store::Error,
    ) -> Self {
        match source {
            object_store::Error::Precondition { .. } | object_store::Error::NotFound { .. }
                if op == OpKind::PutIfMatch =>
            {
                StorageError::Conflict {
                    uri: uri.to_string(),
                    path: path.to_string(),
                }
            }
            object_store::Error::NotFound { .. } => StorageError::NotFound {
                uri: uri.to_string(),
                path: path.to_string(),
            },
            object_store::Error::AlreadyExists { .. }
            | object_store::Error::Precondition { .. }
                if op == OpKind::PutIfAbsent =>
            {
                StorageError::AlreadyExists {
                    uri: uri.to_string(),
                    path: path.to_string(),
                }
            }
            object_store::Error::NotImplemented {
                operation,
                implementer,
            } => StorageError::Unsupported {
                uri: uri.to_string(),
                op,
                path: path.to_string(),
                reason: format!("{implementer} does not implement {operation}"),
            },
            source => StorageError::Request {
                uri: uri.to_string(),
                op,
                path: path.to_string(),
                source: Box::new(source),
            },
        }
    }

    /// Whether this is a mutation refused for a symbolic link on its way, or a table folder
    /// that is no longer the one opened: a refusal made before anything reached the store.
    pub fn is_link_refusal(&self) -> bool {
        matches!(
            self,
            StorageError::SymbolicLink { .. } | StorageError::TableFolderMoved { .. }
        )
    }

    /// Whether this is a "does not exist".
    pub fn is_not_found(&self) -> bool {
        matches!(self, StorageError::NotFound { .. })
    }
}
