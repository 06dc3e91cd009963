//! Counting the requests a [`Storage`](super::Storage) makes, by kind (the CLI reports them;
//! tests and benchmarks assert on them).

use std::collections::BTreeMap;
use std::sync::Mutex;

use super::{Interceptor, OpKind, RelPath, StorageError};

/// An [`Interceptor`] that counts every request by kind and fails none.
#[derive(Debug, Default)]
pub struct RequestCounter {
    counts: Mutex<BTreeMap<OpKind, u64>>,
}

impl RequestCounter {
    /// A fresh counter.
    pub fn new() -> Self {
        Self::default()
    }

    /// The number of requests of `op` so far.
    pub fn count(&self, op: OpKind) -> u64 {
        self.snapshot().get(&op).copied().unwrap_or(0)
    }

    /// The number of requests of every kind so far.
    pub fn total(&self) -> u64 {
        self.snapshot().values().sum()
    }

    /// All counts so far.
    pub fn snapshot(&self) -> BTreeMap<OpKind, u64> {
        match self.counts.lock() {
            Ok(g) => g.clone(),
            Err(p) => p.into_inner().clone(),
        }
    }
}

impl Interceptor for RequestCounter {
    fn before(&self, op: OpKind, _path: &RelPath) -> Result<(), StorageError> {
        let mut g = match self.counts.lock() {
            Ok(g) => g,
            Err(p) => p.into_inner(),
        };
        *g.entry(op).or_insert(0) += 1;
        Ok(())
    }
}
