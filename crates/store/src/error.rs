//! `StoreError`: why a storage operation did not answer, in words a client may be shown, and
//! `UnknownBackend`, a `--history-backend` value that names no backend.
//!
//! No HTTP here: the gateway maps each variant to a status. `retryable` tells it which ones say
//! nothing about the request itself (the store was busy or gone), so a client may try again.

use std::fmt;
use std::path::PathBuf;

/// Why a storage operation failed. Every failure of one operation is one of these, for that
/// operation only: the store keeps serving the others.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum StoreError {
    /// The storage queue was full when the operation was offered; nothing was done.
    Busy,
    /// The storage thread is gone (it stopped or died); nothing was done, or what was done is
    /// unknown.
    Unavailable,
    /// The thing named (`response resp_1`, `conversation conv_1`, `item msg_1`) does not exist.
    NotFound(String),
    /// An item with this id already exists where it was to be added.
    Duplicate(String),
    /// A stored record could not be read back: its JSON does not parse, a column has the wrong
    /// type, a chain of responses is broken or loops.
    Corrupt { what: String, why: String },
    /// `response_chain` found more responses than the depth it was allowed to follow.
    ChainTooLong { id: String, depth_max: usize },
    /// The database file was written by a newer build, with a schema this one does not know.
    SchemaTooNew { path: PathBuf, found: i64, supported: i64 },
    /// Opening, reading or writing the database failed (the SQLite error's text).
    Io(String),
}

impl StoreError {
    /// Whether the same request may succeed if sent again: the store was busy or unavailable,
    /// which says nothing about the request itself.
    pub fn retryable(&self) -> bool {
        matches!(self, StoreError::Busy | StoreError::Unavailable)
    }
}

impl fmt::Display for StoreError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            StoreError::Busy => write!(f, "the response store is busy; try again"),
            StoreError::Unavailable => write!(f, "the response store is unavailable"),
            StoreError::NotFound(what) => write!(f, "{what} not found"),
            StoreError::Duplicate(what) => write!(f, "{what} already exists"),
            StoreError::Corrupt { what, why } => write!(f, "stored {what} cannot be read: {why}"),
            StoreError::ChainTooLong { id, depth_max } => {
                write!(f, "response {id} continues a chain of more than {depth_max} responses")
            }
            StoreError::SchemaTooNew { path, found, supported } => write!(
                f,
                "{} has schema version {found}, newer than {supported}, the newest this build \
                 supports (it was written by a newer shardgate)",
                path.display()
            ),
            StoreError::Io(why) => write!(f, "response store error: {why}"),
        }
    }
}

impl std::error::Error for StoreError {}

/// A `--history-backend` value that is none of `sqlite`, `memory`, `none`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct UnknownBackend(pub String);

impl fmt::Display for UnknownBackend {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "unknown history backend '{}': expected sqlite, memory or none", self.0)
    }
}

impl std::error::Error for UnknownBackend {}
