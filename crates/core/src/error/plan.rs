//! Why a plan cannot be made (or executed): the planners' error, on its own so that the crate's
//! error type takes it from a leaf.

/// Why a plan cannot be made (or a plan cannot be executed). Nothing is deleted then.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum PlanError {
    /// A marker or plan entry names something that is not a data file of the target instant.
    #[error("instant {instant}: `{path}` is not a file of this instant ({reason}); refusing to delete it")]
    NotAttributable {
        /// The instant being rolled back.
        instant: String,
        /// The offending path.
        path: String,
        /// Why.
        reason: String,
    },
    /// A path leaves the table.
    #[error("instant {instant}: `{path}` is outside the table; refusing to touch it")]
    OutsideTable {
        /// The instant being rolled back.
        instant: String,
        /// The offending path.
        path: String,
    },
    /// The situation is not supported; the message says what to do.
    #[error("instant {instant}: {reason}")]
    Unsupported {
        /// The instant being rolled back.
        instant: String,
        /// Why, and what the operator can do.
        reason: String,
    },
}
