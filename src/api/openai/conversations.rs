//! The Conversations API (`/v1/conversations` and its items), as OpenAI defines it and SMG
//! serves it: a conversation is an id, metadata and an ordered list of Responses items; a
//! `/v1/responses` request that names it continues from its items and appends its own
//! (`responses::history`). Metadata updates merge keys (a `null` value removes one), as SMG's.

use serde_json::{json, Map, Value};
use shardgate_store::{Conversation, Item, Order};

use super::responses::history::ask;
use super::responses::stored::list_body;
use crate::api::fields::Body;
use crate::api::list_query;
use crate::error::ApiError;
use crate::limits::{conversation_items_per_request_max, conversation_metadata_keys_max};
use crate::shard::ShardCtx;
use shardgate_util::ids::random_hex;
use shardgate_util::time::unix_time_s;

/// The item types a conversation holds (what `/v1/responses` reads back as history).
const ITEM_TYPES: [&str; 4] = ["message", "reasoning", "function_call", "function_call_output"];

fn not_found(id: &str) -> ApiError {
    ApiError::not_found(format!("Conversation with id '{id}' not found.")).with_param("conversation_id")
}

fn object(c: &Conversation) -> String {
    let metadata = if c.metadata.is_object() { c.metadata.clone() } else { json!({}) };
    json!({"id": c.id, "object": "conversation", "created_at": c.created_at, "metadata": metadata}).to_string()
}

async fn existing(ctx: &ShardCtx, id: &str) -> Result<Conversation, ApiError> {
    ask(ctx.shared.store.get_conversation(id)).await?.ok_or_else(|| not_found(id))
}

/// `metadata`: an object of at most 16 keys (absent: `None`).
fn metadata(body: &Body) -> Result<Option<Map<String, Value>>, ApiError> {
    match body.fields().get("metadata") {
        None | Some(Value::Null) => Ok(None),
        Some(Value::Object(m)) if m.len() <= conversation_metadata_keys_max => Ok(Some(m.clone())),
        Some(Value::Object(_)) => Err(ApiError::invalid_param(
            "metadata",
            format!("'metadata' can have at most {conversation_metadata_keys_max} keys"),
        )),
        Some(_) => Err(ApiError::invalid_param("metadata", "'metadata' must be an object")),
    }
}

/// `POST /v1/conversations`: `{"items"?: [...], "metadata"?: {...}}`.
pub async fn create(ctx: &ShardCtx, body: &[u8]) -> Result<String, ApiError> {
    let body = if body.is_empty() { Body::parse(b"{}")? } else { Body::parse(body)? };
    let metadata = metadata(&body)?.map_or(json!({}), Value::Object);
    let now = unix_time_s();
    let items = match body.fields().get("items") {
        Some(v) => items(v, now)?,
        None => Vec::new(),
    };
    let c = Conversation { id: format!("conv_{}", random_hex(32)), created_at: now, metadata };
    ask(ctx.shared.store.create_conversation(c.clone(), items)).await?;
    tracing::info!("created conversation {}", c.id);
    Ok(object(&c))
}

pub async fn get(ctx: &ShardCtx, id: &str) -> Result<String, ApiError> {
    Ok(object(&existing(ctx, id).await?))
}

/// `POST /v1/conversations/{id}`: `metadata` keys merged in; a `null` value removes its key.
pub async fn update(ctx: &ShardCtx, id: &str, body: &[u8]) -> Result<String, ApiError> {
    let body = Body::parse(body)?;
    let patch = metadata(&body)?.ok_or_else(|| ApiError::invalid_param("metadata", "'metadata' is required"))?;
    let current = existing(ctx, id).await?;
    let mut merged = current.metadata.as_object().cloned().unwrap_or_default();
    for (k, v) in patch {
        if v.is_null() {
            merged.remove(&k);
        } else {
            merged.insert(k, v);
        }
    }
    if merged.len() > conversation_metadata_keys_max {
        return Err(ApiError::invalid_param(
            "metadata",
            format!("'metadata' can have at most {conversation_metadata_keys_max} keys"),
        ));
    }
    let updated = ask(ctx.shared.store.update_conversation(id, Value::Object(merged))).await?;
    Ok(object(&updated.ok_or_else(|| not_found(id))?))
}

pub async fn delete(ctx: &ShardCtx, id: &str) -> Result<String, ApiError> {
    if !ask(ctx.shared.store.delete_conversation(id)).await? {
        return Err(not_found(id));
    }
    tracing::info!("deleted conversation {id}");
    Ok(json!({"id": id, "object": "conversation.deleted", "deleted": true}).to_string())
}

/// `POST /v1/conversations/{id}/items`: `{"items": [...]}` appended in order.
pub async fn add_items(ctx: &ShardCtx, id: &str, body: &[u8]) -> Result<String, ApiError> {
    let body = Body::parse(body)?;
    let list = body.fields().get("items").ok_or_else(|| ApiError::invalid_param("items", "'items' is required"))?;
    let items = items(list, unix_time_s())?;
    existing(ctx, id).await?;
    let added = ask(ctx.shared.store.add_items(id, items)).await?;
    let data: Vec<Value> = added.into_iter().map(|i| i.body).collect();
    let (first, last) =
        (data.first().and_then(|v| v.get("id")).cloned(), data.last().and_then(|v| v.get("id")).cloned());
    Ok(json!({"object": "list", "data": data, "first_id": first, "last_id": last, "has_more": false}).to_string())
}

/// `GET /v1/conversations/{id}/items?limit&order&after` (newest first unless `order=asc`).
pub async fn list_items(ctx: &ShardCtx, id: &str, query: Option<&str>) -> Result<String, ApiError> {
    let q = list_query::parse(query, Order::Desc)?;
    existing(ctx, id).await?;
    Ok(list_body(ask(ctx.shared.store.list_items(id, q)).await?))
}

pub async fn get_item(ctx: &ShardCtx, id: &str, item_id: &str) -> Result<String, ApiError> {
    existing(ctx, id).await?;
    match ask(ctx.shared.store.get_item(id, item_id)).await? {
        Some(item) => Ok(item.body.to_string()),
        None => Err(item_not_found(item_id)),
    }
}

/// `DELETE /v1/conversations/{id}/items/{item_id}`: answers the conversation, as OpenAI does.
pub async fn delete_item(ctx: &ShardCtx, id: &str, item_id: &str) -> Result<String, ApiError> {
    let c = existing(ctx, id).await?;
    if !ask(ctx.shared.store.delete_item(id, item_id)).await? {
        return Err(item_not_found(item_id));
    }
    Ok(object(&c))
}

fn item_not_found(item_id: &str) -> ApiError {
    ApiError::not_found(format!("Item with id '{item_id}' not found.")).with_param("item_id")
}

/// The request's items, checked and given ids (`items[i]` names a bad one).
fn items(list: &Value, now: u64) -> Result<Vec<Item>, ApiError> {
    let list = list.as_array().ok_or_else(|| ApiError::invalid_param("items", "'items' must be an array"))?;
    if list.len() > conversation_items_per_request_max {
        return Err(ApiError::invalid_param(
            "items",
            format!("Cannot add more than {conversation_items_per_request_max} items at a time"),
        ));
    }
    list.iter().enumerate().map(|(i, v)| item(v, &format!("items[{i}]"), now)).collect()
}

fn item(v: &Value, param: &str, now: u64) -> Result<Item, ApiError> {
    let mut body = v.as_object().cloned().ok_or_else(|| ApiError::invalid_param(param, "an item must be an object"))?;
    let kind = body.get("type").and_then(Value::as_str).unwrap_or("message").to_string();
    if !ITEM_TYPES.contains(&kind.as_str()) {
        return Err(ApiError::invalid_param(
            &format!("{param}.type"),
            format!("item type '{kind}' is not supported; expected one of {}", ITEM_TYPES.join(", ")),
        ));
    }
    body.insert("type".into(), Value::String(kind.clone()));
    if kind == "message" {
        message_content(&mut body, param)?;
    }
    let prefix = match kind.as_str() {
        "message" => "msg",
        "reasoning" => "rs",
        "function_call" => "fc",
        _ => "fco",
    };
    let id = match body.get("id") {
        Some(Value::String(id)) if !id.is_empty() => id.clone(),
        None => format!("{prefix}_{}", random_hex(32)),
        Some(_) => {
            return Err(ApiError::invalid_param(&format!("{param}.id"), "an item id must be a non-empty string"))
        }
    };
    body.insert("id".into(), Value::String(id.clone()));
    Ok(Item { id, created_at: now, body: Value::Object(body) })
}

/// A message item: a known role, and content as parts (a string becomes one text part).
fn message_content(body: &mut Map<String, Value>, param: &str) -> Result<(), ApiError> {
    let role = body.get("role").and_then(Value::as_str).unwrap_or_default().to_string();
    if !matches!(role.as_str(), "user" | "assistant" | "system" | "developer") {
        return Err(ApiError::invalid_param(
            &format!("{param}.role"),
            format!("'role' must be user, assistant, system or developer, got '{role}'"),
        ));
    }
    let part = if role == "assistant" { "output_text" } else { "input_text" };
    match body.get("content") {
        Some(Value::String(text)) => {
            let parts = json!([{"type": part, "text": text}]);
            body.insert("content".into(), parts);
        }
        Some(Value::Array(_)) => {}
        _ => {
            return Err(ApiError::invalid_param(
                &format!("{param}.content"),
                "'content' must be a string or an array of parts",
            ))
        }
    }
    Ok(())
}
