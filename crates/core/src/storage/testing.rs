//! Interceptors for tests: count requests by kind (the [`RequestCounter`](super::RequestCounter)),
//! or fail the N-th request of a kind; and a store that confirms deletes it does not do.

use std::fmt;
use std::future::Future;
use std::pin::Pin;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use futures::stream::BoxStream;
use futures::StreamExt;
use object_store::path::Path;
use object_store::{GetOptions, GetResult, GetResultPayload, ObjectStore, ObjectStoreExt};

use super::{Interceptor, OpKind, RelPath, StorageError};

/// Methods of [`ObjectStore`] that pass each request unchanged to the wrapper's `inner` store
/// (an `Arc<dyn ObjectStore>` field): the test stores here and in the test suites change a
/// method or two and forward the rest with `forward_to_inner!(put_opts, get_opts, ...)` in their
/// `impl ObjectStore`. (The user needs `object_store` among its dependencies.)
#[macro_export]
macro_rules! forward_to_inner {
    ($($method:ident),+ $(,)?) => { $( $crate::forward_to_inner!(@ $method); )+ };
    (@ put_opts) => {
        fn put_opts<'s, 'l, 'f>(
            &'s self,
            location: &'l ::object_store::path::Path,
            payload: ::object_store::PutPayload,
            opts: ::object_store::PutOptions,
        ) -> ::std::pin::Pin<Box<dyn ::std::future::Future<
            Output = ::object_store::Result<::object_store::PutResult>> + Send + 'f>>
        where
            's: 'f,
            'l: 'f,
            Self: 'f,
        {
            self.inner.put_opts(location, payload, opts)
        }
    };
    (@ put_multipart_opts) => {
        fn put_multipart_opts<'s, 'l, 'f>(
            &'s self,
            location: &'l ::object_store::path::Path,
            opts: ::object_store::PutMultipartOptions,
        ) -> ::std::pin::Pin<Box<dyn ::std::future::Future<
            Output = ::object_store::Result<Box<dyn ::object_store::MultipartUpload>>> + Send + 'f>>
        where
            's: 'f,
            'l: 'f,
            Self: 'f,
        {
            self.inner.put_multipart_opts(location, opts)
        }
    };
    (@ get_opts) => {
        fn get_opts<'s, 'l, 'f>(
            &'s self,
            location: &'l ::object_store::path::Path,
            options: ::object_store::GetOptions,
        ) -> ::std::pin::Pin<Box<dyn ::std::future::Future<
            Output = ::object_store::Result<::object_store::GetResult>> + Send + 'f>>
        where
            's: 'f,
            'l: 'f,
            Self: 'f,
        {
            self.inner.get_opts(location, options)
        }
    };
    (@ delete_stream) => {
        fn delete_stream(
            &self,
            locations: ::futures::stream::BoxStream<
                'static, ::object_store::Result<::object_store::path::Path>>,
        ) -> ::futures::stream::BoxStream<'static, ::object_store::Result<::object_store::path::Path>> {
            self.inner.delete_stream(locations)
        }
    };
    (@ list) => {
        fn list(
            &self,
            prefix: Option<&::object_store::path::Path>,
        ) -> ::futures::stream::BoxStream<'static, ::object_store::Result<::object_store::ObjectMeta>> {
            self.inner.list(prefix)
        }
    };
    (@ list_with_delimiter) => {
        fn list_with_delimiter<'s, 'l, 'f>(
            &'s self,
            prefix: Option<&'l ::object_store::path::Path>,
        ) -> ::std::pin::Pin<Box<dyn ::std::future::Future<
            Output = ::object_store::Result<::object_store::ListResult>> + Send + 'f>>
        where
            's: 'f,
            'l: 'f,
            Self: 'f,
        {
            self.inner.list_with_delimiter(prefix)
        }
    };
    (@ copy_opts) => {
        fn copy_opts<'s, 'a, 'b, 'f>(
            &'s self,
            from: &'a ::object_store::path::Path,
            to: &'b ::object_store::path::Path,
            options: ::object_store::CopyOptions,
        ) -> ::std::pin::Pin<Box<dyn ::std::future::Future<
            Output = ::object_store::Result<()>> + Send + 'f>>
        where
            's: 'f,
            'a: 'f,
            'b: 'f,
            Self: 'f,
        {
            self.inner.copy_opts(from, to, options)
        }
    };
}

/// The request counter, under its older name (tests count with it).
pub use super::RequestCounter as CountingInterceptor;

/// When an injected failure strikes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FailMode {
    /// The request never reaches the store.
    Before,
    /// The request takes effect, then the caller sees an error (a crash after the write).
    After,
}

/// Fails the `n`-th request (1-based) whose kind is in `kinds`; every other request passes.
/// With `kinds` empty, the `n`-th request of any kind fails.
#[derive(Debug)]
pub struct FailNth {
    kinds: Vec<OpKind>,
    n: u64,
    mode: FailMode,
    seen: AtomicU64,
    struck: std::sync::Mutex<Option<(OpKind, String)>>,
}

impl FailNth {
    /// Fail the `n`-th request of one of `kinds` (of any kind when empty) before it is made.
    pub fn new(kinds: &[OpKind], n: u64) -> Self {
        Self::with_mode(kinds, n, FailMode::Before)
    }

    /// Fail the `n`-th request of one of `kinds`, before or after it takes effect.
    pub fn with_mode(kinds: &[OpKind], n: u64, mode: FailMode) -> Self {
        Self {
            kinds: kinds.to_vec(),
            n,
            mode,
            seen: AtomicU64::new(0),
            struck: std::sync::Mutex::new(None),
        }
    }

    /// The request that was failed, once it was: its kind and path.
    pub fn struck(&self) -> Option<(OpKind, String)> {
        self.struck
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .clone()
    }

    /// How many matching requests were seen so far.
    pub fn seen(&self) -> u64 {
        self.seen.load(Ordering::SeqCst)
    }

    /// Whether the failure was injected.
    pub fn fired(&self) -> bool {
        self.seen() >= self.n
    }
}

impl FailNth {
    fn strike(&self, op: OpKind, path: &RelPath) -> Result<(), StorageError> {
        if !self.kinds.is_empty() && !self.kinds.contains(&op) {
            return Ok(());
        }
        let k = self.seen.fetch_add(1, Ordering::SeqCst) + 1;
        if k == self.n {
            *self.struck.lock().unwrap_or_else(|e| e.into_inner()) = Some((op, path.to_string()));
            return Err(StorageError::Injected {
                op,
                n: k,
                path: path.to_string(),
            });
        }
        Ok(())
    }
}

impl Interceptor for FailNth {
    fn before(&self, op: OpKind, path: &RelPath) -> Result<(), StorageError> {
        match self.mode {
            FailMode::Before => self.strike(op, path),
            FailMode::After => Ok(()),
        }
    }

    fn after(&self, op: OpKind, path: &RelPath) -> Result<(), StorageError> {
        match self.mode {
            FailMode::Before => Ok(()),
            FailMode::After => self.strike(op, path),
        }
    }
}

/// Runs several interceptors in order; the first error wins.
#[derive(Debug)]
pub struct Chain(pub Vec<std::sync::Arc<dyn Interceptor>>);

impl Interceptor for Chain {
    fn before(&self, op: OpKind, path: &RelPath) -> Result<(), StorageError> {
        self.0.iter().try_for_each(|i| i.before(op, path))
    }

    fn after(&self, op: OpKind, path: &RelPath) -> Result<(), StorageError> {
        self.0.iter().try_for_each(|i| i.after(op, path))
    }
}

/// A store that confirms every delete but carries out only those of keys without `swallow` in
/// them: what a store that reports a key it does not have as deleted (the local store, S3) looks
/// like when it is asked for another key than the one a listing returned.
#[derive(Debug)]
pub struct DeleteSwallowingStore {
    inner: Arc<dyn ObjectStore>,
    swallow: String,
}

impl DeleteSwallowingStore {
    /// Wrap `inner`; deletes of keys containing `swallow` are confirmed and not done.
    pub fn new(inner: Arc<dyn ObjectStore>, swallow: &str) -> Self {
        Self {
            inner,
            swallow: swallow.to_string(),
        }
    }
}

impl fmt::Display for DeleteSwallowingStore {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "DeleteSwallowingStore({})", self.inner)
    }
}

/// What `ObjectStore`'s `async fn`s are underneath (the trait is written with `async_trait`).
type StoreFuture<'a, T> = Pin<Box<dyn Future<Output = object_store::Result<T>> + Send + 'a>>;

impl ObjectStore for DeleteSwallowingStore {
    crate::forward_to_inner!(
        put_opts,
        put_multipart_opts,
        get_opts,
        list,
        list_with_delimiter,
        copy_opts
    );

    fn delete_stream(
        &self,
        locations: BoxStream<'static, object_store::Result<Path>>,
    ) -> BoxStream<'static, object_store::Result<Path>> {
        let inner = Arc::clone(&self.inner);
        let swallow = self.swallow.clone();
        locations
            .then(move |location| {
                let inner = Arc::clone(&inner);
                let swallow = swallow.clone();
                async move {
                    let location = location?;
                    if !location.as_ref().contains(&swallow) {
                        inner.delete(&location).await?;
                    }
                    Ok(location)
                }
            })
            .boxed()
    }
}

/// A store whose reads claim another size than the object has (a corrupt or hostile store, or
/// a file that grew), and which counts the body bytes its readers actually pulled: a read capped
/// by the claimed size pulls none; one that trusts the claim reads the real body.
#[derive(Debug)]
pub struct SizeClaimingStore {
    inner: Arc<dyn ObjectStore>,
    claimed: u64,
    body_read: Arc<AtomicU64>,
}

impl SizeClaimingStore {
    /// Wrap `inner`; every read reports an object of `claimed` bytes.
    pub fn new(inner: Arc<dyn ObjectStore>, claimed: u64) -> Self {
        Self {
            inner,
            claimed,
            body_read: Arc::new(AtomicU64::new(0)),
        }
    }

    /// The body bytes readers pulled so far.
    pub fn body_bytes_read(&self) -> u64 {
        self.body_read.load(Ordering::SeqCst)
    }
}

impl fmt::Display for SizeClaimingStore {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "SizeClaimingStore({})", self.inner)
    }
}

impl ObjectStore for SizeClaimingStore {
    crate::forward_to_inner!(
        put_opts,
        put_multipart_opts,
        delete_stream,
        list,
        list_with_delimiter,
        copy_opts
    );

    fn get_opts<'s, 'l, 'f>(
        &'s self,
        location: &'l Path,
        options: GetOptions,
    ) -> StoreFuture<'f, GetResult>
    where
        's: 'f,
        'l: 'f,
        Self: 'f,
    {
        let claimed = self.claimed;
        let counter = Arc::clone(&self.body_read);
        Box::pin(async move {
            let r = self.inner.get_opts(location, options).await?;
            let mut meta = r.meta.clone();
            meta.size = claimed;
            let attributes = r.attributes.clone();
            let stream = r.into_stream().inspect(move |chunk| {
                if let Ok(b) = chunk {
                    counter.fetch_add(b.len() as u64, Ordering::SeqCst);
                }
            });
            Ok(GetResult {
                payload: GetResultPayload::Stream(stream.boxed()),
                meta,
                range: 0..claimed,
                attributes,
                extensions: Default::default(),
            })
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::storage::Storage;
    use bytes::Bytes;
    use object_store::memory::InMemory;
    use std::sync::Arc;

    #[tokio::test]
    async fn counts_requests_by_kind() {
        let counter = Arc::new(CountingInterceptor::new());
        let s = Storage::from_store(Arc::new(InMemory::new()), "t", "memory://t")
            .with_interceptor(counter.clone());
        let p = RelPath::parse("a").unwrap();
        s.put(&p, Bytes::new()).await.unwrap();
        s.get(&p).await.unwrap();
        s.head(&p).await.unwrap();
        s.list(&RelPath::root()).await.unwrap();
        assert_eq!(counter.count(OpKind::Put), 1);
        assert_eq!(counter.count(OpKind::Get), 1);
        assert_eq!(counter.count(OpKind::Head), 1);
        assert_eq!(counter.count(OpKind::List), 1);
        assert_eq!(counter.total(), 4);
    }

    #[tokio::test]
    async fn fails_exactly_the_nth_request_of_a_kind() {
        let fail = Arc::new(FailNth::new(&[OpKind::Put], 2));
        let s = Storage::from_store(Arc::new(InMemory::new()), "t", "memory://t")
            .with_interceptor(fail.clone());
        let p = RelPath::parse("a").unwrap();
        s.put(&p, Bytes::new()).await.unwrap();
        s.get(&p).await.unwrap();
        let err = s.put(&p, Bytes::new()).await.unwrap_err();
        assert!(matches!(err, StorageError::Injected { n: 2, .. }), "{err}");
        s.put(&p, Bytes::new()).await.unwrap();
        assert!(fail.fired());
    }

    #[tokio::test]
    async fn an_after_failure_reports_an_error_for_a_write_that_landed() {
        let fail = Arc::new(FailNth::with_mode(
            &[OpKind::PutIfAbsent],
            1,
            FailMode::After,
        ));
        let s = Storage::from_store(Arc::new(InMemory::new()), "t", "memory://t")
            .with_interceptor(fail.clone());
        let p = RelPath::parse("a").unwrap();
        assert!(s.put_if_absent(&p, Bytes::from_static(b"x")).await.is_err());
        assert_eq!(s.get(&p).await.unwrap(), Bytes::from_static(b"x"));
    }
}
