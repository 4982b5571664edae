//! `list_input_items`: the input items of a stored response, paged like any item list.
//!
//! They are kept as the JSON array the gateway stored (`StoredResponse::input_items`), so an
//! array that is not one, or an item without a string `"id"` to page by, is `Corrupt`. Built on
//! `Storage::get_response`, so it is the same for every backend.

use serde_json::Value;

use crate::error::StoreError;
use crate::paging::page_of;
use crate::records::{Item, ListQuery, Page, StoredResponse};
use crate::storage::Storage;

/// A page of the input items of response `id`; `NotFound` when it is not stored.
pub(crate) fn list_input_items(
    storage: &mut dyn Storage,
    id: &str,
    query: &ListQuery,
) -> Result<Page<Item>, StoreError> {
    let Some(response) = storage.get_response(id)? else {
        return Err(StoreError::NotFound(format!("response {id}")));
    };
    page_of(&items_of(response)?, query)
}

fn items_of(response: StoredResponse) -> Result<Vec<Item>, StoreError> {
    let corrupt = |why: String| StoreError::Corrupt { what: format!("response {}", response.id), why };
    let Value::Array(bodies) = response.input_items else {
        return Err(corrupt("input_items is not an array".into()));
    };
    bodies
        .into_iter()
        .enumerate()
        .map(|(index, body)| match body.get("id").and_then(Value::as_str) {
            Some(id) => Ok(Item { id: id.to_string(), created_at: response.created_at, body }),
            None => Err(corrupt(format!("input item {index} has no string id"))),
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;
    use crate::memory::Memory;

    fn stored(input_items: Value) -> Memory {
        let mut memory = Memory::default();
        let response = StoredResponse {
            id: "r1".into(),
            created_at: 7,
            model: "m".into(),
            previous_response_id: None,
            conversation_id: None,
            input_items,
            response: json!({}),
        };
        memory.put_response(response).expect("put");
        memory
    }

    #[test]
    fn input_items_are_paged_and_bad_arrays_refused() {
        let corrupt = |why: &str| Err(StoreError::Corrupt { what: "response r1".into(), why: why.into() });
        let cases: Vec<(Value, Result<Vec<&str>, StoreError>)> = vec![
            (json!([{"id": "a"}, {"id": "b"}]), Ok(vec!["b", "a"])),
            (json!([]), Ok(vec![])),
            (json!({"id": "a"}), corrupt("input_items is not an array")),
            (json!([{"id": "a"}, {"type": "message"}]), corrupt("input item 1 has no string id")),
            (json!([{"id": 3}]), corrupt("input item 0 has no string id")),
        ];
        for (input_items, expected) in cases {
            let mut memory = stored(input_items.clone());
            let page = list_input_items(&mut memory, "r1", &ListQuery::default());
            let ids = page.map(|page| page.data.into_iter().map(|item| item.id).collect::<Vec<_>>());
            let expected = expected.map(|ids| ids.into_iter().map(str::to_string).collect::<Vec<_>>());
            assert_eq!(ids, expected, "{input_items}");
        }
        let mut memory = stored(json!([{"id": "a"}]));
        let page = list_input_items(&mut memory, "r1", &ListQuery::default()).expect("page");
        assert_eq!(page.data, vec![Item { id: "a".into(), created_at: 7, body: json!({"id": "a"}) }]);
        assert_eq!(
            list_input_items(&mut memory, "r2", &ListQuery::default()),
            Err(StoreError::NotFound("response r2".into()))
        );
    }
}
