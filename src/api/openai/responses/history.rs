//! What `/v1/responses` keeps between requests: the items that precede a request
//! (`previous_response_id`'s chain, or a `conversation`'s items) and the response saved once
//! it is complete (`store`).

use serde_json::Value;

use crate::error::ApiError;
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

/// The items that come before this request's input, oldest first: each earlier response's
/// input items then its output items. 404 when the response or conversation does not exist.
pub async fn load(
    _ctx: &ShardCtx,
    previous_response_id: Option<&str>,
    conversation: Option<&str>,
) -> Result<Vec<Value>, ApiError> {
    if let Some(id) = previous_response_id {
        return Err(ApiError::not_found(format!("Previous response with id '{id}' not found."))
            .with_param("previous_response_id"));
    }
    if let Some(id) = conversation {
        return Err(ApiError::not_found(format!("Conversation with id '{id}' not found.")).with_param("conversation"));
    }
    Ok(Vec::new())
}

/// Saves a complete response (and appends it to its conversation).
pub async fn save(_ctx: &ShardCtx, _saved: Saved) -> Result<(), ApiError> {
    Ok(())
}
