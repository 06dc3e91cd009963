//! The executor: runs plans through storage in Hudi's order, resumable after a crash at any
//! step.

pub mod restore;
pub mod rollback;
pub mod savepoint;
mod timeline_ops;

pub use timeline_ops::new_instant_time;

use crate::Error;

/// The outcome of work done under the table lock, given the lock's release: the work's error
/// comes first, except that a stop at a safe point whose lock could not be released reports the
/// failed release (a stopped run promises its lock was released).
pub(crate) fn after_release<T>(
    result: Result<T, Error>,
    released: Result<(), Error>,
) -> Result<T, Error> {
    match (result, released) {
        (Err(Error::Cancelled { .. }), Err(e)) => Err(e),
        (Err(e), _) | (Ok(_), Err(e)) => Err(e),
        (Ok(v), Ok(())) => Ok(v),
    }
}
