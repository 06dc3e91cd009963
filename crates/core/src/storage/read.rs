//! Reading objects: capped reads (a larger object is refused on the size the store reports,
//! before its body is read), optional and versioned reads, and `head`.

use bytes::Bytes;
use futures::TryStreamExt;
use object_store::ObjectStoreExt;

use super::{FileMeta, ObjectVersion, OpKind, RelPath, Storage, StorageError, DEFAULT_MAX_READ};

impl Storage {
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
}
