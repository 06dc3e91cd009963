//! A Hudi table: its storage, its configuration, and its metadata table.

pub mod files;

pub use crate::config::properties;
pub use crate::config::{
    keys, ConfigError, TableConfig, TableType, TableVersion, TimelineLayout, TimelineTimezone,
};

use crate::error::Error;
use crate::storage::{RelPath, Storage, StorageOptions, SMALL_FILE_MAX_READ};
use crate::timeline::{InstantZone, Timeline};
use tokio_util::sync::CancellationToken;

/// The metadata table's base path, relative to its data table.
pub const METADATA_TABLE_PATH: &str = ".hoodie/metadata";

/// An opened Hudi table.
#[derive(Debug, Clone)]
pub struct Table {
    storage: Storage,
    config: TableConfig,
    zone: InstantZone,
    /// Asks the executors working on this handle to stop at their next safe point.
    cancel: Option<CancellationToken>,
}

impl Table {
    /// Open the table at `uri`: read and check `.hoodie/hoodie.properties`.
    pub async fn open(uri: &str, options: &StorageOptions) -> Result<Self, Error> {
        Self::open_storage(Storage::open(uri, options)?).await
    }

    /// Open the table whose base path `storage` is rooted at.
    pub async fn open_storage(storage: Storage) -> Result<Self, Error> {
        let path = RelPath::parse(TableConfig::PATH).map_err(crate::storage::StorageError::from)?;
        let bytes = match storage.get_opt_capped(&path, SMALL_FILE_MAX_READ).await? {
            Some(b) => b,
            None => {
                // Hudi falls back to the backup while an upgrade rewrites the file.
                let backup = RelPath::parse(".hoodie/hoodie.properties.backup")
                    .map_err(crate::storage::StorageError::from)?;
                storage
                    .get_opt_capped(&backup, SMALL_FILE_MAX_READ)
                    .await?
                    .ok_or_else(|| {
                        Error::Config(ConfigError::Missing {
                            table: storage.uri().to_string(),
                        })
                    })?
            }
        };
        let config = TableConfig::parse(storage.uri(), &bytes)?;
        let zone = InstantZone::from(config.timezone);
        Ok(Self {
            storage,
            config,
            zone,
            cancel: None,
        })
    }

    /// The table's storage.
    pub fn storage(&self) -> &Storage {
        &self.storage
    }

    /// The same table with every mutation of its storage (and its metadata table's) checked
    /// against `fence` first.
    pub fn fenced(&self, fence: std::sync::Arc<dyn crate::storage::WriteFence>) -> Self {
        Self {
            storage: self.storage.clone().with_fence(fence),
            config: self.config.clone(),
            zone: self.zone,
            cancel: self.cancel.clone(),
        }
    }

    /// The same table with `cancel` asking every executor working on it (rollback, restore,
    /// savepoint, and the lock waits they make) to stop at its next safe point: between
    /// storage calls, where the table is left resumable, never between a write and the one that
    /// must follow it. A stopped run releases its lock and returns [`Error::Cancelled`].
    pub fn with_cancel(&self, cancel: CancellationToken) -> Self {
        Self {
            cancel: Some(cancel),
            ..self.clone()
        }
    }

    /// The token that stops work on this handle, if it has one.
    pub fn cancel_token(&self) -> Option<&CancellationToken> {
        self.cancel.as_ref()
    }

    /// A safe point: [`Error::Cancelled`] when the work was asked to stop. `at` says where, and
    /// `pending` names the instant a rerun resumes (if anything is left pending).
    pub fn stop_point(&self, at: &str, pending: Option<&str>) -> Result<(), Error> {
        match &self.cancel {
            Some(c) if c.is_cancelled() => {
                tracing::info!(table = %self.uri(), at, "stopping at a safe point");
                Err(Error::Cancelled {
                    table: self.uri().to_string(),
                    at: at.to_string(),
                    pending: pending.map(str::to_string),
                })
            }
            _ => Ok(()),
        }
    }

    /// The table URI.
    pub fn uri(&self) -> &str {
        self.storage.uri()
    }

    /// The table configuration.
    pub fn config(&self) -> &TableConfig {
        &self.config
    }

    /// The zone the table's instant times are written in.
    pub fn zone(&self) -> InstantZone {
        self.zone
    }

    /// Load the active timeline (one listing).
    pub async fn timeline(&self) -> Result<Timeline, Error> {
        Ok(Timeline::load(&self.storage, &self.config, self.zone).await?)
    }

    /// The metadata table, when `.hoodie/metadata` holds one.
    pub async fn metadata_table(&self) -> Result<Option<Table>, Error> {
        let sub =
            RelPath::parse(METADATA_TABLE_PATH).map_err(crate::storage::StorageError::from)?;
        let child = self.storage.child(&sub);
        let props =
            RelPath::parse(TableConfig::PATH).map_err(crate::storage::StorageError::from)?;
        if child.head(&props).await?.is_none() {
            return Ok(None);
        }
        let mut mdt = Self::open_storage(child).await?;
        mdt.cancel = self.cancel.clone();
        Ok(Some(mdt))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::storage::StorageError;
    use bytes::Bytes;
    use object_store::memory::InMemory;
    use std::sync::Arc;

    #[tokio::test]
    async fn a_hoodie_properties_larger_than_a_mebibyte_is_refused_without_reading_it() {
        let s = Storage::from_store(Arc::new(InMemory::new()), "t", "memory://t");
        let mut text =
            b"hoodie.table.name=t\nhoodie.table.type=COPY_ON_WRITE\nhoodie.table.version=6\n"
                .to_vec();
        text.resize(SMALL_FILE_MAX_READ as usize + 1, b'#');
        let path = RelPath::parse(TableConfig::PATH).unwrap();
        s.put(&path, Bytes::from(text)).await.unwrap();
        let err = Table::open_storage(s.clone()).await.unwrap_err();
        assert!(
            matches!(
                &err,
                Error::Storage(StorageError::TooLarge { size, max, .. })
                    if *size == SMALL_FILE_MAX_READ + 1 && *max == SMALL_FILE_MAX_READ
            ),
            "{err}"
        );
        assert_eq!(
            s.head(&path).await.unwrap().map(|m| m.size),
            Some(SMALL_FILE_MAX_READ + 1),
            "left as it is"
        );
    }
}
