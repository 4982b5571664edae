//! What `/v1/responses` keeps between requests: the items that precede a request
//! (`previous_response_id`'s chain, or a `conversation`'s items) and the response saved once
//! it is complete (`store`). The store runs on its own thread (`shardgate_store`); every call
//! here is queued to it and awaited, so a shard never waits on the disk, and a full queue is a
//! 503 at once.

use serde_json::Value;
use shardgate_store::{Item, ListQuery, Order, Reply, StoreError, StoredResponse};

use crate::error::ApiError;
use crate::limits;
use crate::shard::ShardCtx;

/// A complete response, as saved.
#[derive(Debug, Clone)]
pub struct Saved {
    /// `resp_…`
    pub id: String,
    pub created_at: u64,
    pub model: String,
    pub previous_response_id: Option<String>,
    /// The conversation the response continues (its input and output are appended to it).
    pub conversation: Option<String>,
    /// The request's input items, each with its `id`.
    pub input_items: Vec<Value>,
    /// The response object as the client received it.
    pub response: Value,
}

/// A store operation, queued and awaited.
pub async fn ask<T>(op: Result<Reply<T>, StoreError>) -> Result<T, StoreError> {
    op?.await
}

/// The items that come before this request's input, oldest first: each earlier response's
/// input items then its output items (a `conversation`'s items, in the order they were
/// added). 404 when the response or conversation does not exist.
pub async fn load(
    ctx: &ShardCtx,
    previous_response_id: Option<&str>,
    conversation: Option<&str>,
) -> Result<Vec<Value>, ApiError> {
    let store = &ctx.shared.store;
    let mut items = Vec::new();
    if let Some(id) = previous_response_id {
        let chain = ask(store.response_chain(id, limits::response_chain_depth_max)).await.map_err(|e| match e {
            StoreError::NotFound(_) => previous_not_found(id),
            e => ApiError::from(e).with_param("previous_response_id"),
        })?;
        for r in chain {
            items.extend(r.input_items.as_array().into_iter().flatten().cloned());
            items.extend(r.response.get("output").and_then(Value::as_array).into_iter().flatten().cloned());
        }
    }
    if let Some(id) = conversation {
        if ask(store.get_conversation(id)).await?.is_none() {
            return Err(conversation_not_found(id));
        }
        items.extend(conversation_items(ctx, id).await?);
    }
    Ok(items)
}

/// Every item of a conversation, oldest first, page by page; 400 past the gateway's bound.
async fn conversation_items(ctx: &ShardCtx, id: &str) -> Result<Vec<Value>, ApiError> {
    let mut out = Vec::new();
    let mut after = None;
    loop {
        let query = ListQuery { after, limit: shardgate_store::limits::list_limit_max, order: Order::Asc };
        let page = ask(ctx.shared.store.list_items(id, query)).await?;
        out.extend(page.data.into_iter().map(|item| item.body));
        if !page.has_more {
            return Ok(out);
        }
        if out.len() >= limits::conversation_items_max {
            return Err(ApiError::bad_request(format!(
                "conversation {id} has more than {} items; start a new conversation",
                limits::conversation_items_max
            ))
            .with_param("conversation"));
        }
        after = page.last_id;
    }
}

/// Saves a complete response, and appends its input and output items to its conversation.
pub async fn save(ctx: &ShardCtx, saved: Saved) -> Result<(), ApiError> {
    let store = &ctx.shared.store;
    let output: Vec<Value> = saved.response.get("output").and_then(Value::as_array).cloned().unwrap_or_default();
    let conversation_items: Vec<Item> = match &saved.conversation {
        Some(_) => saved
            .input_items
            .iter()
            .chain(output.iter())
            .map(|body| Item {
                // Items carry their own ids; one without gets a fresh one (ids key the list).
                id: body
                    .get("id")
                    .and_then(Value::as_str)
                    .map_or_else(|| format!("item_{}", shardgate_util::ids::random_hex(32)), str::to_string),
                created_at: saved.created_at,
                body: body.clone(),
            })
            .collect(),
        None => Vec::new(),
    };
    let record = StoredResponse {
        id: saved.id,
        created_at: saved.created_at,
        model: saved.model,
        previous_response_id: saved.previous_response_id,
        conversation_id: saved.conversation.clone(),
        input_items: Value::Array(saved.input_items),
        response: saved.response,
    };
    ask(store.put_response(record)).await?;
    if let Some(conversation) = &saved.conversation {
        ask(store.add_items(conversation, conversation_items)).await?;
    }
    Ok(())
}

pub fn previous_not_found(id: &str) -> ApiError {
    ApiError::not_found(format!("Previous response with id '{id}' not found.")).with_param("previous_response_id")
}

pub fn conversation_not_found(id: &str) -> ApiError {
    ApiError::not_found(format!("Conversation with id '{id}' not found.")).with_param("conversation")
}
