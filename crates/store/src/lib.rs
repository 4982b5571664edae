//! The storage layer of the OpenAI Responses API (stored responses, `previous_response_id`) and
//! the Conversations API: SQLite by default, `memory` or `none` (`Backend`).
//!
//! # Shape
//!
//! A `Store` is a cheap, `Send + Sync` handle to one storage thread (`shardgate-store`) that
//! owns the backend. Every operation is offered to the thread through a bounded queue and
//! returns at once: `Err(Busy)` when the queue is full, `Err(Unavailable)` when the thread is
//! gone, otherwise a `Reply`, a future of the answer that needs no particular runtime (monoio
//! shards await it directly) and resolves to `Unavailable` rather than hang if the thread dies.
//! So a shard never blocks on the disk, and the memory and SQLite backends queue and answer the
//! same way.
//!
//! # Invariants
//!
//! - A stored record that cannot be read back (a column of the wrong type, JSON that does not
//!   parse, a broken `previous_response_id` chain) is `StoreError::Corrupt` for that call, and
//!   the store goes on serving the others. Nothing read from the database or given by a caller
//!   can panic.
//! - JSON stays JSON: input items, the response object, metadata and item bodies are kept as
//!   the gateway gave them; the crate knows OpenAI's schema only as far as item ids.
//! - A SQLite file written by a newer build (schema version above this build's) is refused at
//!   `Store::open` with `SchemaTooNew`, untouched; older ones are migrated (`sqlite/schema.rs`).
//! - The crate knows no HTTP: the gateway maps `StoreError` to statuses (`retryable` marks the
//!   variants that say nothing about the request).
//!
//! # Layout
//!
//! `store.rs` the handle and its operations; `thread.rs` the queue, the thread and `Reply`;
//! `storage.rs` the contract each backend keeps (`sqlite/`, `memory.rs`, `none.rs`);
//! `chain.rs` and `input_items.rs` what is built on it, once for all backends; `paging.rs`
//! list pages in memory; `records.rs` the records; `error.rs`; `limits.rs`; `backend.rs` the
//! choice of backend and its flag value.

mod backend;
mod chain;
mod error;
mod input_items;
pub mod limits;
mod memory;
mod none;
mod paging;
mod records;
mod sqlite;
mod storage;
mod store;
mod thread;

pub use backend::{Backend, BackendKind};
pub use error::{StoreError, UnknownBackend};
pub use limits::Limits;
pub use records::{Conversation, Item, ListQuery, Order, Page, StoredResponse};
pub use store::Store;
pub use thread::Reply;

/// The SQLite schema version this build reads and writes (`PRAGMA user_version`).
pub const SCHEMA_VERSION: i64 = sqlite::SCHEMA_VERSION_SUPPORTED;
