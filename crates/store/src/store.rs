//! `Store`, the handle shards hold: every operation is offered to the storage thread and
//! answered by a `Reply`.
//!
//! Each operation returns `Err(Busy)` or `Err(Unavailable)` at once when it cannot be queued,
//! and otherwise a `Reply` with the operation's own answer. A record given to an operation is
//! the store's: a caller that must still answer its client after a refused write keeps its own
//! copy of what it sent.

use std::sync::Arc;

use serde_json::Value;

use crate::backend::Backend;
use crate::chain::response_chain;
use crate::error::StoreError;
use crate::input_items::list_input_items;
use crate::limits::Limits;
use crate::memory::Memory;
use crate::none::Discard;
use crate::records::{Conversation, Item, ListQuery, Page, StoredResponse};
use crate::sqlite::Sqlite;
use crate::storage::Storage;
use crate::thread::{Reply, Worker};

/// A handle to the store. Clones share one storage thread; the thread ends, after answering
/// everything queued, when the last handle is dropped, and that drop waits for it (so the
/// database is closed when it returns).
#[derive(Clone)]
pub struct Store {
    worker: Arc<Worker>,
    chain_depth_max: usize,
}

impl std::fmt::Debug for Store {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Store").field("chain_depth_max", &self.chain_depth_max).finish_non_exhaustive()
    }
}

impl Store {
    /// Opens the backend and starts its storage thread. For SQLite this creates the directory
    /// and the file if needed and brings the schema to this build's version; a file from a newer
    /// build is `SchemaTooNew`, and the file is left untouched.
    pub fn open(backend: Backend, limits: &Limits) -> Result<Store, StoreError> {
        let storage: Box<dyn Storage> = match backend {
            Backend::Sqlite { path } => Box::new(Sqlite::open(&path, limits)?),
            Backend::Memory => Box::new(Memory::default()),
            Backend::None => Box::new(Discard),
        };
        let worker = Worker::start(storage, limits.queue_capacity)?;
        Ok(Store { worker: Arc::new(worker), chain_depth_max: limits.chain_depth_max })
    }

    /// Stores a response, replacing one with the same id.
    pub fn put_response(&self, response: StoredResponse) -> Result<Reply<()>, StoreError> {
        self.worker.submit(move |storage| storage.put_response(response))
    }

    pub fn get_response(&self, id: &str) -> Result<Reply<Option<StoredResponse>>, StoreError> {
        let id = id.to_string();
        self.worker.submit(move |storage| storage.get_response(&id))
    }

    /// Whether there was a response to delete.
    pub fn delete_response(&self, id: &str) -> Result<Reply<bool>, StoreError> {
        let id = id.to_string();
        self.worker.submit(move |storage| storage.delete_response(&id))
    }

    /// The responses from the first of the chain to `id`, oldest first, following
    /// `previous_response_id`. `NotFound` when `id` is not stored; `Corrupt` when a link names a
    /// response that is not stored, or the chain loops; `ChainTooLong` past `depth_max`
    /// responses (itself capped by `Limits::chain_depth_max`).
    pub fn response_chain(&self, id: &str, depth_max: usize) -> Result<Reply<Vec<StoredResponse>>, StoreError> {
        let id = id.to_string();
        let depth_max = depth_max.min(self.chain_depth_max);
        self.worker.submit(move |storage| response_chain(storage, &id, depth_max))
    }

    /// A page of the input items of response `id` (`NotFound` when it is not stored).
    pub fn list_input_items(&self, id: &str, query: ListQuery) -> Result<Reply<Page<Item>>, StoreError> {
        let id = id.to_string();
        self.worker.submit(move |storage| list_input_items(storage, &id, &query))
    }

    /// Creates a conversation with `items` as its first items, all or nothing; answers the
    /// conversation. `Duplicate` when its id, or an item id among `items`, is taken.
    pub fn create_conversation(
        &self,
        conversation: Conversation,
        items: Vec<Item>,
    ) -> Result<Reply<Conversation>, StoreError> {
        self.worker.submit(move |storage| {
            storage.create_conversation(conversation.clone(), items)?;
            Ok(conversation)
        })
    }

    pub fn get_conversation(&self, id: &str) -> Result<Reply<Option<Conversation>>, StoreError> {
        let id = id.to_string();
        self.worker.submit(move |storage| storage.get_conversation(&id))
    }

    /// Replaces the conversation's metadata; answers the conversation, or `None` if there is
    /// none with this id.
    pub fn update_conversation(&self, id: &str, metadata: Value) -> Result<Reply<Option<Conversation>>, StoreError> {
        let id = id.to_string();
        self.worker.submit(move |storage| storage.update_conversation(&id, metadata))
    }

    /// Deletes the conversation and its items; whether there was one.
    pub fn delete_conversation(&self, id: &str) -> Result<Reply<bool>, StoreError> {
        let id = id.to_string();
        self.worker.submit(move |storage| storage.delete_conversation(&id))
    }

    /// Appends items to a conversation, all or nothing, and answers them. `NotFound` when the
    /// conversation does not exist, `Duplicate` when an item id is taken in it.
    pub fn add_items(&self, conversation_id: &str, items: Vec<Item>) -> Result<Reply<Vec<Item>>, StoreError> {
        let conversation_id = conversation_id.to_string();
        self.worker.submit(move |storage| storage.add_items(&conversation_id, items))
    }

    /// A page of a conversation's items in insertion order (or its reverse). `NotFound` when the
    /// conversation, or the item `after` names, does not exist.
    pub fn list_items(&self, conversation_id: &str, query: ListQuery) -> Result<Reply<Page<Item>>, StoreError> {
        let conversation_id = conversation_id.to_string();
        self.worker.submit(move |storage| storage.list_items(&conversation_id, &query))
    }

    pub fn get_item(&self, conversation_id: &str, item_id: &str) -> Result<Reply<Option<Item>>, StoreError> {
        let (conversation_id, item_id) = (conversation_id.to_string(), item_id.to_string());
        self.worker.submit(move |storage| storage.get_item(&conversation_id, &item_id))
    }

    /// Whether the conversation held the item.
    pub fn delete_item(&self, conversation_id: &str, item_id: &str) -> Result<Reply<bool>, StoreError> {
        let (conversation_id, item_id) = (conversation_id.to_string(), item_id.to_string());
        self.worker.submit(move |storage| storage.delete_item(&conversation_id, &item_id))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn handles_and_replies_cross_threads() {
        fn send_sync<T: Send + Sync>() {}
        fn send<T: Send>() {}
        send_sync::<Store>();
        send::<Reply<Option<StoredResponse>>>();
    }
}
