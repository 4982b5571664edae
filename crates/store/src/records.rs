//! What the store keeps and hands back: stored responses, conversations, their items, and the
//! list query and page of OpenAI's list endpoints.
//!
//! JSON stays JSON: the request's input items, the response object and an item's body are kept
//! as the gateway gave them, so the store never needs to know OpenAI's schema (nor follow its
//! changes). Only what the store indexes or orders by is a field of its own.

use serde_json::Value;

use crate::limits::{list_limit_default, list_limit_max};

/// One response as stored for `previous_response_id`, `GET /v1/responses/{id}` and its input
/// items.
#[derive(Debug, Clone, PartialEq)]
pub struct StoredResponse {
    /// `resp_...`
    pub id: String,
    /// Unix seconds.
    pub created_at: u64,
    pub model: String,
    pub previous_response_id: Option<String>,
    pub conversation_id: Option<String>,
    /// An array: the request's input items, normalized, each with an `"id"`.
    pub input_items: Value,
    /// The whole response object as returned to the client (output, usage, status, ...).
    pub response: Value,
}

/// A conversation of the Conversations API; its items are kept apart (`Item`).
#[derive(Debug, Clone, PartialEq)]
pub struct Conversation {
    /// `conv_...`
    pub id: String,
    /// Unix seconds.
    pub created_at: u64,
    /// An object, or null.
    pub metadata: Value,
}

/// One item of a conversation, or one input item of a stored response.
#[derive(Debug, Clone, PartialEq)]
pub struct Item {
    pub id: String,
    /// Unix seconds.
    pub created_at: u64,
    /// The item's JSON, including its `"id"` and `"type"`.
    pub body: Value,
}

/// Which way a list runs through insertion order.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Order {
    Asc,
    /// Newest first: OpenAI's default for both item lists.
    #[default]
    Desc,
}

/// A list request: the page after the item `after` (in `order`), of at most `limit` items.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ListQuery {
    /// An item id; the page starts with the item after it. An id the list does not hold is
    /// `StoreError::NotFound`.
    pub after: Option<String>,
    /// Clamped to `1..=list_limit_max` when the list is read.
    pub limit: usize,
    pub order: Order,
}

impl Default for ListQuery {
    fn default() -> Self {
        ListQuery { after: None, limit: list_limit_default, order: Order::default() }
    }
}

impl ListQuery {
    /// The number of items a page of this query holds at most.
    pub fn limit_clamped(&self) -> usize {
        self.limit.clamp(1, list_limit_max)
    }
}

/// One page of a list, shaped like OpenAI's list object.
#[derive(Debug, Clone, PartialEq)]
pub struct Page<T> {
    pub data: Vec<T>,
    /// Whether items follow the last one of this page.
    pub has_more: bool,
    pub first_id: Option<String>,
    pub last_id: Option<String>,
}

impl Page<Item> {
    pub(crate) fn of_items(data: Vec<Item>, has_more: bool) -> Self {
        let first_id = data.first().map(|item| item.id.clone());
        let last_id = data.last().map(|item| item.id.clone());
        Page { data, has_more, first_id, last_id }
    }
}
