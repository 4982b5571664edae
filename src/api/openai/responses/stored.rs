//! Stored responses: `GET` and `DELETE /v1/responses/{id}`, `GET /v1/responses/{id}/input_items`
//! and `POST /v1/responses/{id}/cancel`, answered from the store (`history`).

use serde_json::{json, Value};
use shardgate_store::{Item, Order, Page};

use super::history::ask;
use crate::api::list_query;
use crate::error::ApiError;
use crate::shard::ShardCtx;

fn not_found(id: &str) -> ApiError {
    ApiError::not_found(format!("Response with id '{id}' not found.")).with_param("response_id")
}

/// `GET /v1/responses/{id}`: the response as it was returned.
pub async fn get(ctx: &ShardCtx, id: &str) -> Result<String, ApiError> {
    match ask(ctx.shared.store.get_response(id)).await? {
        Some(r) => Ok(r.response.to_string()),
        None => Err(not_found(id)),
    }
}

/// `DELETE /v1/responses/{id}`.
pub async fn delete(ctx: &ShardCtx, id: &str) -> Result<String, ApiError> {
    if !ask(ctx.shared.store.delete_response(id)).await? {
        return Err(not_found(id));
    }
    tracing::info!("deleted stored response {id}");
    Ok(json!({"id": id, "object": "response", "deleted": true}).to_string())
}

/// `GET /v1/responses/{id}/input_items?limit&order&after` (newest first unless `order=asc`).
pub async fn input_items(ctx: &ShardCtx, id: &str, query: Option<&str>) -> Result<String, ApiError> {
    let q = list_query::parse(query, Order::Desc)?;
    let page = ask(ctx.shared.store.list_input_items(id, q)).await.map_err(|e| match e {
        shardgate_store::StoreError::NotFound(_) => not_found(id),
        e => e.into(),
    })?;
    Ok(list_body(page))
}

/// `POST /v1/responses/{id}/cancel`: only background responses can be cancelled, and this
/// gateway runs none.
pub async fn cancel(ctx: &ShardCtx, id: &str) -> Result<String, ApiError> {
    match ask(ctx.shared.store.get_response(id)).await? {
        Some(_) => Err(ApiError::bad_request("Only background responses can be cancelled.").with_param("response_id")),
        None => Err(not_found(id)),
    }
}

/// A page of items as OpenAI lists them.
pub fn list_body(page: Page<Item>) -> String {
    let data: Vec<Value> = page.data.into_iter().map(|item| item.body).collect();
    json!({
        "object": "list",
        "data": data,
        "first_id": page.first_id,
        "last_id": page.last_id,
        "has_more": page.has_more,
    })
    .to_string()
}
