//! One scan of a source: where it looks and with what limits, and what it found.

use hudi_keeper_core::discover::{self, DiscoverError, ScanOptions, ScanProgress, ScanReport};
use hudi_keeper_core::storage::{Storage, StorageOptions, StoreCache};

/// Scan the prefix `prefix` (a local path, `s3://`, `gs://`, `az://`, …) for tables, its store
/// opened with `storage` (through `stores` when given); `progress` after each request.
pub async fn prefix(
    prefix: &str,
    options: &ScanOptions,
    storage: &StorageOptions,
    stores: Option<&StoreCache>,
    progress: impl FnMut(&ScanProgress),
) -> Result<ScanReport, DiscoverError> {
    let store = Storage::open_with(prefix, storage, stores).map_err(|e| DiscoverError::Open {
        prefix: prefix.to_string(),
        source: Box::new(e),
    })?;
    discover::scan(&store, prefix, options, progress).await
}
