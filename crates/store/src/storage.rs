//! The contract every backend keeps: the primitive operations, run one at a time on the storage
//! thread (hence `&mut self` and no locking inside a backend).
//!
//! What can be built from these (a chain of responses, a response's input items) is built once,
//! above the backends (`chain.rs`, `input_items.rs`), so it cannot differ between them.
//!
//! Semantics every backend shares: `put_response` replaces a response with the same id (the
//! gateway may store a response again as it completes); creating a conversation whose id exists,
//! or adding an item whose id its conversation already holds, is `Duplicate` and changes
//! nothing; adding items to, or listing, a conversation that does not exist is `NotFound`;
//! items keep insertion order.

use serde_json::Value;

use crate::error::StoreError;
use crate::records::{Conversation, Item, ListQuery, Page, StoredResponse};

pub(crate) trait Storage: Send {
    fn put_response(&mut self, response: StoredResponse) -> Result<(), StoreError>;
    fn get_response(&mut self, id: &str) -> Result<Option<StoredResponse>, StoreError>;
    fn delete_response(&mut self, id: &str) -> Result<bool, StoreError>;

    /// Creates the conversation with `items` as its first items, all or nothing.
    fn create_conversation(&mut self, conversation: Conversation, items: Vec<Item>) -> Result<(), StoreError>;
    fn get_conversation(&mut self, id: &str) -> Result<Option<Conversation>, StoreError>;
    fn update_conversation(&mut self, id: &str, metadata: Value) -> Result<Option<Conversation>, StoreError>;
    /// Deletes the conversation and its items.
    fn delete_conversation(&mut self, id: &str) -> Result<bool, StoreError>;

    /// Appends `items` to the conversation, all or nothing.
    fn add_items(&mut self, conversation_id: &str, items: Vec<Item>) -> Result<Vec<Item>, StoreError>;
    fn list_items(&mut self, conversation_id: &str, query: &ListQuery) -> Result<Page<Item>, StoreError>;
    fn get_item(&mut self, conversation_id: &str, item_id: &str) -> Result<Option<Item>, StoreError>;
    fn delete_item(&mut self, conversation_id: &str, item_id: &str) -> Result<bool, StoreError>;
}

/// The `Duplicate` error for an item id seen twice, in a batch or against its conversation.
pub(crate) fn duplicate_item(conversation_id: &str, item_id: &str) -> StoreError {
    StoreError::Duplicate(format!("item {item_id} in conversation {conversation_id}"))
}

/// The first id that occurs twice in `items`: a batch that repeats an id is refused whole, by
/// every backend alike.
pub(crate) fn repeated_id(items: &[Item]) -> Option<&str> {
    let mut seen = std::collections::HashSet::with_capacity(items.len());
    items.iter().map(|item| item.id.as_str()).find(|id| !seen.insert(*id))
}
