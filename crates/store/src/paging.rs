//! A page of items held in memory, as a `ListQuery` asks for it: the memory backend's
//! conversation items and every backend's response input items. SQLite pages its conversation
//! items in SQL (`sqlite.rs`) with the same rules; the behaviour suite checks they agree.

use crate::error::StoreError;
use crate::records::{Item, ListQuery, Order, Page};

/// The page of `items` (in insertion order) that `query` asks for. `after` names an item that
/// must be among them.
pub(crate) fn page_of(items: &[Item], query: &ListQuery) -> Result<Page<Item>, StoreError> {
    // Positions in the query's order: position p is items[p] ascending, items[len-1-p]
    // descending.
    let at = |position: usize| match query.order {
        Order::Asc => &items[position],
        Order::Desc => &items[items.len() - 1 - position],
    };
    let start = match &query.after {
        None => 0,
        Some(after) => match (0..items.len()).find(|&position| at(position).id == *after) {
            Some(position) => position + 1,
            None => return Err(StoreError::NotFound(format!("item {after}"))),
        },
    };
    let limit = query.limit_clamped();
    let end = items.len().min(start.saturating_add(limit));
    let data = (start..end).map(|position| at(position).clone()).collect();
    Ok(Page::of_items(data, end < items.len()))
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn items(n: usize) -> Vec<Item> {
        (0..n).map(|i| Item { id: format!("i{i}"), created_at: 1, body: json!({"id": format!("i{i}")}) }).collect()
    }

    /// A page asked for and what it holds: (after, limit, order, ids, has_more).
    type PageCase<'a> = (Option<&'a str>, usize, Order, &'a [&'a str], bool);

    fn ids(page: &Page<Item>) -> Vec<&str> {
        page.data.iter().map(|item| item.id.as_str()).collect()
    }

    #[test]
    fn pages_follow_order_after_and_limit() {
        let five = items(5);
        let cases: &[PageCase] = &[
            (None, 2, Order::Asc, &["i0", "i1"], true),
            (Some("i1"), 2, Order::Asc, &["i2", "i3"], true),
            (Some("i3"), 2, Order::Asc, &["i4"], false),
            (Some("i4"), 2, Order::Asc, &[], false),
            (None, 2, Order::Desc, &["i4", "i3"], true),
            (Some("i3"), 3, Order::Desc, &["i2", "i1", "i0"], false),
            (None, 5, Order::Asc, &["i0", "i1", "i2", "i3", "i4"], false),
            (None, 0, Order::Asc, &["i0"], true),
        ];
        for (after, limit, order, expected, has_more) in cases {
            let query = ListQuery { after: after.map(str::to_string), limit: *limit, order: *order };
            let page = page_of(&five, &query).expect("page");
            assert_eq!(ids(&page), *expected, "{query:?}");
            assert_eq!(page.has_more, *has_more, "{query:?}");
            assert_eq!(page.first_id.as_deref(), expected.first().copied(), "{query:?}");
            assert_eq!(page.last_id.as_deref(), expected.last().copied(), "{query:?}");
        }
    }

    #[test]
    fn unknown_cursor_is_not_found() {
        let query = ListQuery { after: Some("nope".into()), ..ListQuery::default() };
        assert_eq!(page_of(&items(3), &query), Err(StoreError::NotFound("item nope".into())));
        assert_eq!(page_of(&[], &query), Err(StoreError::NotFound("item nope".into())));
    }
}
