#![allow(non_upper_case_globals)]

//! Every bound and default of the store, in one place, and `Limits`, the ones a deployment (or
//! a test) may set.
//!
//! Names carry their unit last (`_ms`) and their qualifier after it (`_max`, `_default`).

/// Items a list call returns when it does not say (OpenAI's default).
pub const list_limit_default: usize = 20;

/// The most items one list call returns (OpenAI's bound); a larger `limit` is clamped to it.
pub const list_limit_max: usize = 100;

/// Operations waiting for the storage thread, at most, before `Busy`. A shard never waits for
/// room: a full queue means the disk is behind, and waiting would stall every stream the shard
/// carries.
pub const queue_capacity_default: usize = 1024;

/// Responses `response_chain` follows back through `previous_response_id`, at most. Each is
/// loaded whole, so this bounds the memory one request can make the storage thread hold.
pub const chain_depth_max_default: usize = 1024;

/// How long a SQLite statement waits for a lock another process holds (a backup, an operator's
/// `sqlite3` shell) before it fails. The storage thread is the database's only writer here.
pub const busy_timeout_ms_default: u64 = 5_000;

/// The file a SQLite store keeps in its data directory.
pub const sqlite_file_name: &str = "history.sqlite3";

const _: () = assert!(0 < list_limit_default);
const _: () = assert!(list_limit_default <= list_limit_max);
const _: () = assert!(0 < queue_capacity_default);
const _: () = assert!(0 < chain_depth_max_default);

/// The bounds a store is opened with. `Limits::default()` is the constants above.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Limits {
    /// Operations queued for the storage thread at most; 0 counts as 1.
    pub queue_capacity: usize,
    /// The deepest chain `response_chain` follows, whatever depth its caller asks for.
    pub chain_depth_max: usize,
    /// SQLite's busy timeout.
    pub busy_timeout_ms: u64,
}

impl Default for Limits {
    fn default() -> Self {
        Limits {
            queue_capacity: queue_capacity_default,
            chain_depth_max: chain_depth_max_default,
            busy_timeout_ms: busy_timeout_ms_default,
        }
    }
}
