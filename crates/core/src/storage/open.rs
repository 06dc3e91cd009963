//! Turning a table URI and store options into an `object_store` store rooted at the table.

use std::collections::{BTreeMap, HashMap};
use std::str::FromStr;
use std::sync::{Arc, Mutex, OnceLock};

use object_store::aws::{AmazonS3Builder, AmazonS3ConfigKey};
use object_store::azure::{AzureConfigKey, MicrosoftAzureBuilder};
use object_store::gcp::{GoogleCloudStorageBuilder, GoogleConfigKey};
use object_store::list::PaginatedListStore;
use object_store::local::LocalFileSystem;
use object_store::memory::InMemory;
use object_store::path::Path;
use object_store::{ObjectStore, RetryConfig};
use url::Url;

use super::StorageError;

/// Options for the object store behind a table, in `object_store`'s own key names
/// (`aws_endpoint`, `aws_region`, `aws_access_key_id`, `aws_allow_http`, `google_service_account`,
/// `azure_storage_account_name`, …). The provider's usual environment variables
/// (`AWS_*`, `GOOGLE_*`, `AZURE_*`) are read too; explicit options win.
///
/// Keys of another provider (an `aws_` key for a `gs://` table) are ignored, so one set of
/// defaults can serve tables on several stores; an unknown key of the table's own provider is an
/// error.
#[derive(Debug, Clone, Default, PartialEq, Eq, Hash, serde::Serialize, serde::Deserialize)]
#[serde(transparent)]
pub struct StorageOptions(pub BTreeMap<String, String>);

impl StorageOptions {
    /// Options from `key=value` pairs.
    pub fn from_pairs<I, K, V>(pairs: I) -> Self
    where
        I: IntoIterator<Item = (K, V)>,
        K: Into<String>,
        V: Into<String>,
    {
        Self(
            pairs
                .into_iter()
                .map(|(k, v)| (k.into(), v.into()))
                .collect(),
        )
    }

    /// `other`'s entries on top of these.
    pub fn merged(&self, other: &StorageOptions) -> StorageOptions {
        let mut m = self.0.clone();
        m.extend(other.0.iter().map(|(k, v)| (k.clone(), v.clone())));
        StorageOptions(m)
    }

    fn for_provider<'a>(&'a self, own: &'a str) -> impl Iterator<Item = (&'a str, &'a str)> + 'a {
        const PREFIXES: [&str; 3] = ["aws_", "google_", "azure_"];
        self.0.iter().filter_map(move |(k, v)| {
            let foreign = PREFIXES
                .iter()
                .any(|p| *p != own && k.to_ascii_lowercase().starts_with(p));
            let ours = k.eq_ignore_ascii_case(RETRY_TIMEOUT);
            (!foreign && !ours).then_some((k.as_str(), v.as_str()))
        })
    }

    /// How long one request is retried ([`RETRY_TIMEOUT`], else [`DEFAULT_RETRY_TIMEOUT`]),
    /// with `object_store`'s backoff and at most its 10 retries.
    pub fn retry(&self) -> Result<RetryConfig, String> {
        let timeout = match self
            .0
            .iter()
            .find(|(k, _)| k.eq_ignore_ascii_case(RETRY_TIMEOUT))
        {
            None => DEFAULT_RETRY_TIMEOUT,
            Some((_, v)) => humantime::parse_duration(v.trim())
                .map_err(|e| format!("storage option `{RETRY_TIMEOUT}` = `{v}`: {e}"))?,
        };
        Ok(RetryConfig {
            retry_timeout: timeout,
            ..RetryConfig::default()
        })
    }
}

/// The storage option that bounds how long one request is retried (every provider).
pub const RETRY_TIMEOUT: &str = "retry_timeout";

/// Its default: a store that accepts connections and never answers fails a request after one
/// attempt of `object_store`'s 30 s request timeout, not after its 3 minutes of retries. A
/// request that fails fast (a 503, a reset) is still retried with backoff within it.
pub const DEFAULT_RETRY_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(30);

type Opened = (Client, Path, String);

/// An object-store client, and the same client's page-by-page listing where the store has one
/// (S3, GCS, Azure: a one-level listing can then be judged page by page instead of whole).
#[derive(Clone)]
pub(super) struct Client {
    pub(super) store: Arc<dyn ObjectStore>,
    pub(super) pages: Option<Arc<dyn PaginatedListStore>>,
}

impl std::fmt::Debug for Client {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Client")
            .field("store", &self.store)
            .field("pages", &self.pages.is_some())
            .finish()
    }
}

impl Client {
    fn plain(store: Arc<dyn ObjectStore>) -> Self {
        Self { store, pages: None }
    }

    fn paged<S: ObjectStore + PaginatedListStore>(store: S) -> Self {
        let store = Arc::new(store);
        Self {
            store: store.clone(),
            pages: Some(store),
        }
    }
}

/// Object-store clients shared between tables: one per bucket (or container) and options, so
/// that a process watching many tables of one bucket keeps one HTTP client and connection pool
/// for them instead of one per table. Local and in-memory stores are not cached.
#[derive(Debug, Default)]
pub struct StoreCache(Mutex<HashMap<(String, StorageOptions), Client>>);

impl StoreCache {
    /// An empty cache.
    pub fn new() -> Self {
        Self::default()
    }

    fn get_or_build(
        &self,
        key: String,
        options: &StorageOptions,
        build: impl FnOnce() -> Result<Client, StorageError>,
    ) -> Result<Client, StorageError> {
        let k = (key, options.clone());
        if let Some(s) = self.0.lock().ok().and_then(|m| m.get(&k).cloned()) {
            return Ok(s);
        }
        let store = build()?;
        if let Ok(mut m) = self.0.lock() {
            m.entry(k).or_insert_with(|| store.clone());
        }
        Ok(store)
    }

    /// How many clients are cached.
    pub fn len(&self) -> usize {
        self.0.lock().map(|m| m.len()).unwrap_or(0)
    }

    /// Whether no client is cached.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

/// The local path a table URI names: a plain path, or a `file:` URI read as Hadoop reads one
/// (the text is the path, `%` and all); `None` for any other URI.
fn local_path(trimmed: &str) -> Option<Result<&str, &'static str>> {
    if !trimmed.contains("://") && !trimmed.starts_with("file:") {
        return Some(Ok(trimmed));
    }
    let rest = trimmed.strip_prefix("file:")?;
    let path = match rest.strip_prefix("//") {
        Some(r) => r.strip_prefix("localhost").unwrap_or(r),
        None => rest,
    };
    if !path.starts_with('/') {
        return Some(Err("a file URI must hold an absolute local path"));
    }
    Some(Ok(path))
}

pub(super) fn open_store(
    uri: &str,
    options: &StorageOptions,
    cache: Option<&StoreCache>,
) -> Result<Opened, StorageError> {
    let cached = |key: String,
                  build: &dyn Fn() -> Result<Client, StorageError>|
     -> Result<Client, StorageError> {
        match cache {
            Some(c) => c.get_or_build(key, options, build),
            None => build(),
        }
    };
    let fail = |reason: String| StorageError::Open {
        uri: uri.to_string(),
        reason,
    };
    let trimmed = uri.trim();
    if trimmed.is_empty() {
        return Err(fail("the table URI is empty".into()));
    }
    if let Some(path) = local_path(trimmed) {
        let path = path.map_err(|reason| fail(reason.into()))?;
        return open_local(uri, std::path::Path::new(path), cache);
    }
    let url = Url::parse(trimmed).map_err(|e| fail(format!("not a valid URI: {e}")))?;
    match url.scheme() {
        "memory" => {
            let name = url.host_str().unwrap_or_default().to_string();
            let store = Client::plain(memory_store(&name));
            Ok((store, prefix_of(trimmed, uri)?, uri.to_string()))
        }
        "s3" | "s3a" => {
            let bucket = url
                .host_str()
                .ok_or_else(|| fail("an s3 URI needs a bucket: s3://bucket/prefix".into()))?;
            let store = cached(format!("s3://{bucket}"), &|| {
                let mut b = AmazonS3Builder::from_env().with_url(format!("s3://{bucket}"))
                    .with_retry(options.retry().map_err(fail)?);
                for (k, v) in options.for_provider("aws_") {
                    let key = AmazonS3ConfigKey::from_str(k)
                        .map_err(|_| fail(format!("unknown S3 storage option `{k}`")))?;
                    b = b.with_config(key, v);
                }
                let store = b
                    .build()
                    .map_err(|e| fail(format!("cannot configure S3: {e}")))?;
                Ok(Client::paged(store))
            })?;
            Ok((store, prefix_of(trimmed, uri)?, uri.to_string()))
        }
        "gs" => {
            let bucket = url
                .host_str()
                .ok_or_else(|| fail("a gs URI needs a bucket: gs://bucket/prefix".into()))?;
            let store = cached(format!("gs://{bucket}"), &|| {
                let mut b =
                    GoogleCloudStorageBuilder::from_env().with_url(format!("gs://{bucket}"))
                    .with_retry(options.retry().map_err(fail)?);
                for (k, v) in options.for_provider("google_") {
                    let key = GoogleConfigKey::from_str(k)
                        .map_err(|_| fail(format!("unknown GCS storage option `{k}`")))?;
                    b = b.with_config(key, v);
                }
                let store = b
                    .build()
                    .map_err(|e| fail(format!("cannot configure GCS: {e}")))?;
                Ok(Client::paged(store))
            })?;
            Ok((store, prefix_of(trimmed, uri)?, uri.to_string()))
        }
        "az" | "azure" | "abfs" | "abfss" | "adl" => {
            let container_url = {
                let mut u = url.clone();
                u.set_path("");
                u.to_string()
            };
            let store = cached(container_url.clone(), &|| {
                let mut b = MicrosoftAzureBuilder::from_env().with_url(container_url.clone())
                    .with_retry(options.retry().map_err(fail)?);
                for (k, v) in options.for_provider("azure_") {
                    let key = AzureConfigKey::from_str(k)
                        .map_err(|_| fail(format!("unknown Azure storage option `{k}`")))?;
                    b = b.with_config(key, v);
                }
                let store = b
                    .build()
                    .map_err(|e| fail(format!("cannot configure Azure: {e}")))?;
                Ok(Client::paged(store))
            })?;
            Ok((store, prefix_of(trimmed, uri)?, uri.to_string()))
        }
        other => Err(fail(format!(
            "unsupported scheme `{other}`; use a local path, file://, s3://, gs://, az://, abfss:// or memory://"
        ))),
    }
}

/// The key prefix of a table URI: the text after `scheme://authority`, verbatim. This is how
/// Hudi (Hadoop's `Path`) reads a base path, so the URI a user gave Hudi names the same keys
/// here: `s3://b/my%20table` is the prefix `my%20table` (not `my table`), and `#` or `?` are part
/// of the path, not a fragment or query.
fn prefix_of(trimmed: &str, uri: &str) -> Result<Path, StorageError> {
    let after = trimmed
        .split_once("://")
        .map(|(_, rest)| rest)
        .unwrap_or_default();
    let raw = after
        .find('/')
        .map(|i| &after[i..])
        .unwrap_or_default()
        .trim_matches('/');
    Path::parse(raw).map_err(|e| StorageError::Open {
        uri: uri.to_string(),
        reason: format!("invalid table path `{raw}`: {e}"),
    })
}

fn open_local(
    uri: &str,
    path: &std::path::Path,
    cache: Option<&StoreCache>,
) -> Result<Opened, StorageError> {
    let fail = |reason: String| StorageError::Open {
        uri: uri.to_string(),
        reason,
    };
    let meta = std::fs::metadata(path).map_err(|e| match e.kind() {
        std::io::ErrorKind::NotFound => fail(format!("`{}` does not exist", path.display())),
        _ => fail(format!("cannot read `{}`: {e}", path.display())),
    })?;
    if !meta.is_dir() {
        return Err(fail(format!("`{}` is not a directory", path.display())));
    }
    let canonical = std::fs::canonicalize(path).map_err(|e| fail(e.to_string()))?;
    let display = format!("file://{}", canonical.display());
    if let Some(cache) = cache {
        // One store for the whole file system, each table rooted at its canonical path.
        let store = cache.get_or_build("file:///".into(), &StorageOptions::default(), || {
            Ok(Client::plain(Arc::new(
                LocalFileSystem::new().with_automatic_cleanup(true),
            )))
        })?;
        let root = Path::from_filesystem_path(&canonical).map_err(|e| fail(e.to_string()))?;
        return Ok((store, root, display));
    }
    let store = LocalFileSystem::new_with_prefix(path)
        .map_err(|e| fail(e.to_string()))?
        .with_automatic_cleanup(true);
    Ok((Client::plain(Arc::new(store)), Path::default(), display))
}

/// In-memory stores by name, so that `memory://name/…` opened twice is the same store within
/// one process (used by tests and the demo).
fn memory_store(name: &str) -> Arc<dyn ObjectStore> {
    static STORES: OnceLock<Mutex<HashMap<String, Arc<InMemory>>>> = OnceLock::new();
    let stores = STORES.get_or_init(|| Mutex::new(HashMap::new()));
    let mut guard = match stores.lock() {
        Ok(g) => g,
        Err(poisoned) => poisoned.into_inner(),
    };
    let store = guard
        .entry(name.to_string())
        .or_insert_with(|| Arc::new(InMemory::new()));
    Arc::clone(store) as Arc<dyn ObjectStore>
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn requests_are_retried_for_30_s_unless_told_otherwise() {
        let d = StorageOptions::default().retry().unwrap();
        assert_eq!(d.retry_timeout, DEFAULT_RETRY_TIMEOUT);
        assert_eq!(DEFAULT_RETRY_TIMEOUT.as_secs(), 30);
        let o = StorageOptions::from_pairs([("retry_timeout", "2m")]);
        assert_eq!(o.retry().unwrap().retry_timeout.as_secs(), 120);
        assert!(StorageOptions::from_pairs([("retry_timeout", "soon")])
            .retry()
            .unwrap_err()
            .contains("retry_timeout"));
        // Not handed to the store's builder, which would refuse it as unknown.
        assert_eq!(o.for_provider("aws_").count(), 0);
    }

    #[test]
    fn a_missing_local_directory_is_a_clear_error() {
        let err = open_store("/definitely/not/here", &StorageOptions::default(), None).unwrap_err();
        assert!(err.to_string().contains("does not exist"), "{err}");
    }

    #[test]
    fn file_uris_and_bare_paths_open_the_same_directory() {
        let dir = tempfile::tempdir().unwrap();
        let bare = dir.path().to_str().unwrap();
        let (_, _, a) = open_store(bare, &StorageOptions::default(), None).unwrap();
        let (_, _, b) =
            open_store(&format!("file://{bare}"), &StorageOptions::default(), None).unwrap();
        assert_eq!(a, b);
    }

    #[test]
    fn s3_uris_keep_the_prefix_and_reject_unknown_options() {
        let opts = StorageOptions::from_pairs([
            ("aws_region", "us-east-1"),
            ("aws_endpoint", "http://127.0.0.1:9"),
            ("aws_allow_http", "true"),
            ("aws_access_key_id", "k"),
            ("aws_secret_access_key", "s"),
            ("google_service_account", "ignored-for-s3"),
        ]);
        let (_, prefix, _) = open_store("s3a://bucket/wh/db/t1", &opts, None).unwrap();
        assert_eq!(prefix.as_ref(), "wh/db/t1");
        let bad = opts.merged(&StorageOptions::from_pairs([("aws_no_such_key", "x")]));
        let err = open_store("s3://bucket/t", &bad, None).unwrap_err();
        assert!(err.to_string().contains("aws_no_such_key"), "{err}");
    }

    #[test]
    fn a_table_uri_names_its_key_prefix_verbatim_as_hudi_reads_a_base_path() {
        let opts = StorageOptions::from_pairs([
            ("aws_region", "us-east-1"),
            ("aws_access_key_id", "k"),
            ("aws_secret_access_key", "s"),
            ("azure_storage_account_name", "acct"),
            ("azure_storage_account_key", "a2V5"),
        ]);
        for (uri, prefix) in [
            ("s3://b/wh/my%20table", "wh/my%20table"),
            ("s3a://b/wh/my table/", "wh/my table"),
            ("s3://b/dt=1%3A0/x#1/t?v=1", "dt=1%3A0/x#1/t?v=1"),
            ("s3://b/[p]/1~0/é", "[p]/1~0/é"),
            ("memory://m/a%25b/t", "a%25b/t"),
            ("az://container/wh/a%3Ab", "wh/a%3Ab"),
        ] {
            let (_, p, shown) = open_store(uri, &opts, None).unwrap();
            assert_eq!(p.as_ref(), prefix, "{uri}");
            assert_eq!(shown, uri);
        }
        for bad in [
            "s3://b/wh/../t",
            "s3://b/wh//t",
            "s3://b/a\tb",
            "s3://b/a\u{7f}",
        ] {
            assert!(open_store(bad, &opts, None).is_err(), "{bad}");
        }
    }

    #[test]
    fn a_local_folder_named_with_spaces_and_escapes_opens_by_path_and_by_file_uri() {
        let dir = tempfile::tempdir().unwrap();
        let table = dir.path().join("my table %20 #1");
        std::fs::create_dir_all(&table).unwrap();
        // A folder literally named `my table` must not be taken for `my%20table`.
        std::fs::create_dir_all(dir.path().join("my table   #1")).unwrap();
        let bare = table.to_str().unwrap();
        let canonical = std::fs::canonicalize(&table).unwrap();
        for uri in [
            bare.to_string(),
            format!("file://{bare}"),
            format!("file:{bare}"),
            format!("file://localhost{bare}"),
        ] {
            let (_, _, shown) = open_store(&uri, &StorageOptions::default(), None).unwrap();
            assert_eq!(shown, format!("file://{}", canonical.display()), "{uri}");
        }
        let err = open_store(
            &format!(
                "file://{}",
                dir.path().join("my%20table%20%2520%20%231").display()
            ),
            &StorageOptions::default(),
            None,
        )
        .unwrap_err();
        assert!(err.to_string().contains("does not exist"), "{err}");
        assert!(open_store("file:relative/t", &StorageOptions::default(), None).is_err());
    }

    #[test]
    fn unknown_schemes_are_refused() {
        let err = open_store("ftp://h/x", &StorageOptions::default(), None).unwrap_err();
        assert!(err.to_string().contains("unsupported scheme"), "{err}");
    }

    #[test]
    fn memory_uris_share_a_store_by_name() {
        let (a, _, _) =
            open_store("memory://shared-name/t", &StorageOptions::default(), None).unwrap();
        let (b, _, _) =
            open_store("memory://shared-name/u", &StorageOptions::default(), None).unwrap();
        assert!(Arc::ptr_eq(&a.store, &b.store));
    }
}

#[cfg(test)]
mod cache_tests {
    use super::super::{RelPath, Storage};
    use super::*;

    #[tokio::test]
    async fn tables_opened_through_a_cache_share_one_local_store_and_stay_in_their_roots() {
        let dir = tempfile::tempdir().unwrap();
        for t in ["a", "b"] {
            std::fs::create_dir_all(dir.path().join(t).join(".hoodie")).unwrap();
            std::fs::write(dir.path().join(t).join(".hoodie/x"), t).unwrap();
        }
        let cache = StoreCache::new();
        let opts = StorageOptions::default();
        let a = Storage::open_with(dir.path().join("a").to_str().unwrap(), &opts, Some(&cache))
            .unwrap();
        let b = Storage::open_with(dir.path().join("b").to_str().unwrap(), &opts, Some(&cache))
            .unwrap();
        assert_eq!(cache.len(), 1, "one store for both tables");
        let x = RelPath::parse(".hoodie/x").unwrap();
        assert_eq!(a.get(&x).await.unwrap().as_ref(), b"a");
        assert_eq!(b.get(&x).await.unwrap().as_ref(), b"b");
        let listed: Vec<String> = a
            .list(&RelPath::root())
            .await
            .unwrap()
            .into_iter()
            .map(|m| m.path.to_string())
            .collect();
        assert_eq!(listed, [".hoodie/x"]);
        a.put(
            &RelPath::parse("p1/f").unwrap(),
            bytes::Bytes::from_static(b"1"),
        )
        .await
        .unwrap();
        assert!(dir.path().join("a/p1/f").exists());
        assert!(!dir.path().join("b/p1/f").exists());
    }

    #[test]
    fn clients_for_one_bucket_and_options_are_shared_and_others_are_not() {
        let cache = StoreCache::new();
        let opts = StorageOptions::from_pairs([
            ("aws_region", "us-east-1".to_string()),
            ("aws_access_key_id", "k".to_string()),
            ("aws_secret_access_key", "s".to_string()),
        ]);
        for uri in ["s3://b1/t1", "s3://b1/t2", "s3a://b1/t3"] {
            Storage::open_with(uri, &opts, Some(&cache)).unwrap();
        }
        assert_eq!(cache.len(), 1);
        Storage::open_with("s3://b2/t", &opts, Some(&cache)).unwrap();
        Storage::open_with("s3://b1/t", &StorageOptions::default(), Some(&cache)).unwrap();
        assert_eq!(cache.len(), 3);
    }
}
