//! The store's behaviour, one body per test run against both the SQLite and the memory backend
//! (`each_backend`): they must answer alike, so the memory backend is a faithful stand-in in
//! development and the SQL is checked against plain Rust.

mod common;

use common::{answer, conversation, each_backend, ids, item, response};
use serde_json::json;
use shardgate_store::{Item, ListQuery, Order, StoreError};

/// A page asked for and what it holds: (after, limit, order, ids, has_more).
type PageCase<'a> = (Option<&'a str>, usize, Order, &'a [&'a str], bool);

#[test]
fn responses_are_put_read_replaced_and_deleted() {
    each_backend(|backend, store| {
        assert_eq!(answer(store.get_response("r1")), Ok(None), "{backend}");
        assert_eq!(answer(store.put_response(response("r1", None))), Ok(()), "{backend}");
        assert_eq!(answer(store.get_response("r1")), Ok(Some(response("r1", None))), "{backend}");

        let mut again = response("r1", None);
        again.response = json!({"id": "r1", "status": "completed", "output": [{"type": "message"}]});
        again.conversation_id = Some("conv_1".into());
        assert_eq!(answer(store.put_response(again.clone())), Ok(()), "{backend}");
        assert_eq!(answer(store.get_response("r1")), Ok(Some(again)), "{backend}: a second put replaces");

        assert_eq!(answer(store.delete_response("r1")), Ok(true), "{backend}");
        assert_eq!(answer(store.delete_response("r1")), Ok(false), "{backend}");
        assert_eq!(answer(store.get_response("r1")), Ok(None), "{backend}");
    });
}

#[test]
fn chains_come_back_oldest_first() {
    each_backend(|backend, store| {
        for (id, previous) in [("r1", None), ("r2", Some("r1")), ("r3", Some("r2")), ("other", None)] {
            answer(store.put_response(response(id, previous))).expect("put");
        }
        let chain = answer(store.response_chain("r3", 10)).expect("chain");
        assert_eq!(
            chain,
            vec![response("r1", None), response("r2", Some("r1")), response("r3", Some("r2"))],
            "{backend}"
        );
        let ids: Vec<_> = answer(store.response_chain("r1", 10)).expect("chain").into_iter().map(|r| r.id).collect();
        assert_eq!(ids, ["r1"], "{backend}");
        assert_eq!(
            answer(store.response_chain("r3", 2)),
            Err(StoreError::ChainTooLong { id: "r3".into(), depth_max: 2 }),
            "{backend}"
        );
        assert_eq!(
            answer(store.response_chain("nope", 10)),
            Err(StoreError::NotFound("response nope".into())),
            "{backend}"
        );
    });
}

#[test]
fn a_chain_with_a_missing_middle_is_corrupt() {
    each_backend(|backend, store| {
        for (id, previous) in [("r1", None), ("r2", Some("r1")), ("r3", Some("r2"))] {
            answer(store.put_response(response(id, previous))).expect("put");
        }
        assert_eq!(answer(store.delete_response("r2")), Ok(true));
        assert_eq!(
            answer(store.response_chain("r3", 10)),
            Err(StoreError::Corrupt {
                what: "response chain of r3".into(),
                why: "response r3 names r2 as its previous response, which is not stored".into(),
            }),
            "{backend}"
        );
        assert_eq!(answer(store.get_response("r1")).map(|r| r.is_some()), Ok(true), "{backend}: the rest still serves");
    });
}

#[test]
fn input_items_are_listed_from_the_stored_response() {
    each_backend(|backend, store| {
        answer(store.put_response(response("r1", None))).expect("put");
        let page = answer(store.list_input_items("r1", ListQuery::default())).expect("page");
        assert_eq!(ids(&page.data), ["r1_in1", "r1_in0"], "{backend}: newest first by default");
        assert_eq!(page.data[0].created_at, 1_700_000_000, "{backend}: the response's time");
        let query = ListQuery { after: Some("r1_in0".into()), limit: 5, order: Order::Asc };
        let page = answer(store.list_input_items("r1", query)).expect("page");
        assert_eq!((ids(&page.data), page.has_more), (vec!["r1_in1"], false), "{backend}");
        assert_eq!(
            answer(store.list_input_items("r9", ListQuery::default())),
            Err(StoreError::NotFound("response r9".into())),
            "{backend}"
        );
    });
}

#[test]
fn conversations_are_created_read_updated_and_deleted() {
    each_backend(|backend, store| {
        let created = conversation("c1", json!({"topic": "x"}));
        assert_eq!(answer(store.create_conversation(created.clone(), vec![item("a"), item("b")])), Ok(created.clone()));
        assert_eq!(answer(store.get_conversation("c1")), Ok(Some(created.clone())), "{backend}");
        assert_eq!(
            answer(store.create_conversation(conversation("c1", json!(null)), vec![])),
            Err(StoreError::Duplicate("conversation c1".into())),
            "{backend}"
        );

        let updated = answer(store.update_conversation("c1", json!({"topic": "y"}))).expect("update");
        assert_eq!(updated, Some(conversation("c1", json!({"topic": "y"}))), "{backend}");
        assert_eq!(answer(store.get_conversation("c1")), Ok(updated), "{backend}");
        assert_eq!(answer(store.update_conversation("c9", json!(null))), Ok(None), "{backend}");

        assert_eq!(answer(store.get_item("c1", "a")), Ok(Some(item("a"))), "{backend}");
        assert_eq!(answer(store.delete_conversation("c1")), Ok(true), "{backend}");
        assert_eq!(answer(store.delete_conversation("c1")), Ok(false), "{backend}");
        assert_eq!(answer(store.get_conversation("c1")), Ok(None), "{backend}");
        assert_eq!(answer(store.get_item("c1", "a")), Ok(None), "{backend}: its items went with it");
        assert_eq!(
            answer(store.list_items("c1", ListQuery::default())),
            Err(StoreError::NotFound("conversation c1".into())),
            "{backend}"
        );
        // A conversation made again with the same id starts empty.
        answer(store.create_conversation(conversation("c1", json!(null)), vec![])).expect("again");
        assert_eq!(answer(store.list_items("c1", ListQuery::default())).map(|page| page.data), Ok(vec![]), "{backend}");
    });
}

#[test]
fn items_page_in_both_orders_with_cursors() {
    each_backend(|backend, store| {
        answer(store.create_conversation(conversation("c1", json!(null)), vec![item("i0"), item("i1")]))
            .expect("create");
        let added = answer(store.add_items("c1", vec![item("i2"), item("i3"), item("i4")])).expect("add");
        assert_eq!(ids(&added), ["i2", "i3", "i4"], "{backend}");
        let cases: &[PageCase] = &[
            (None, 2, Order::Asc, &["i0", "i1"], true),
            (Some("i1"), 2, Order::Asc, &["i2", "i3"], true),
            (Some("i3"), 2, Order::Asc, &["i4"], false),
            (Some("i4"), 2, Order::Asc, &[], false),
            (None, 2, Order::Desc, &["i4", "i3"], true),
            (Some("i3"), 2, Order::Desc, &["i2", "i1"], true),
            (Some("i1"), 2, Order::Desc, &["i0"], false),
            (None, 5, Order::Desc, &["i4", "i3", "i2", "i1", "i0"], false),
            (None, 0, Order::Asc, &["i0"], true),
        ];
        for (after, limit, order, expected, has_more) in cases {
            let query = ListQuery { after: after.map(str::to_string), limit: *limit, order: *order };
            let page = answer(store.list_items("c1", query.clone())).expect("page");
            assert_eq!(ids(&page.data), *expected, "{backend} {query:?}");
            assert_eq!(page.has_more, *has_more, "{backend} {query:?}");
            assert_eq!(page.first_id.as_deref(), expected.first().copied(), "{backend} {query:?}");
            assert_eq!(page.last_id.as_deref(), expected.last().copied(), "{backend} {query:?}");
        }
        let query = ListQuery { after: Some("nope".into()), ..ListQuery::default() };
        assert_eq!(answer(store.list_items("c1", query)), Err(StoreError::NotFound("item nope".into())), "{backend}");
    });
}

#[test]
fn list_limits_are_clamped_to_openais_bounds() {
    each_backend(|backend, store| {
        let many: Vec<Item> = (0..105).map(|n| item(&format!("i{n:03}"))).collect();
        answer(store.create_conversation(conversation("c1", json!(null)), many)).expect("create");
        // (limit asked, items returned)
        for (limit, returned) in [(0, 1), (1, 1), (20, 20), (100, 100), (101, 100), (usize::MAX, 100)] {
            let query = ListQuery { after: None, limit, order: Order::Asc };
            let page = answer(store.list_items("c1", query)).expect("page");
            assert_eq!(page.data.len(), returned, "{backend} limit {limit}");
            assert!(page.has_more, "{backend} limit {limit}");
        }
        let page = answer(store.list_items("c1", ListQuery::default())).expect("page");
        assert_eq!(
            (page.data.len(), page.first_id.as_deref()),
            (20, Some("i104")),
            "{backend}: default 20, newest first"
        );
    });
}

#[test]
fn items_are_got_deleted_and_kept_apart_per_conversation() {
    each_backend(|backend, store| {
        answer(store.create_conversation(conversation("c1", json!(null)), vec![item("a"), item("b"), item("c")]))
            .expect("create");
        answer(store.create_conversation(conversation("c2", json!({})), vec![item("a")])).expect("same id elsewhere");
        assert_eq!(answer(store.get_item("c1", "b")), Ok(Some(item("b"))), "{backend}");
        assert_eq!(answer(store.get_item("c2", "b")), Ok(None), "{backend}");
        assert_eq!(answer(store.delete_item("c1", "b")), Ok(true), "{backend}");
        assert_eq!(answer(store.delete_item("c1", "b")), Ok(false), "{backend}");
        assert_eq!(answer(store.delete_item("c9", "a")), Ok(false), "{backend}");
        let query = ListQuery { order: Order::Asc, ..ListQuery::default() };
        let page = answer(store.list_items("c1", query.clone())).expect("page");
        assert_eq!(ids(&page.data), ["a", "c"], "{backend}");
        answer(store.add_items("c1", vec![item("d")])).expect("add after a delete");
        let page = answer(store.list_items("c1", query.clone())).expect("page");
        assert_eq!(ids(&page.data), ["a", "c", "d"], "{backend}: insertion order holds");
        let page = answer(store.list_items("c2", query)).expect("page");
        assert_eq!(ids(&page.data), ["a"], "{backend}");
    });
}

#[test]
fn adding_items_is_all_or_nothing() {
    each_backend(|backend, store| {
        assert_eq!(
            answer(store.add_items("c1", vec![item("a")])),
            Err(StoreError::NotFound("conversation c1".into())),
            "{backend}"
        );
        answer(store.create_conversation(conversation("c1", json!(null)), vec![item("a")])).expect("create");
        let duplicate = |id: &str| Err(StoreError::Duplicate(format!("item {id} in conversation c1")));
        // Each batch fails whole: nothing of it is added.
        let batches = [vec![item("x"), item("a")], vec![item("y"), item("y")]];
        assert_eq!(answer(store.add_items("c1", batches[0].clone())), duplicate("a"), "{backend}");
        assert_eq!(answer(store.add_items("c1", batches[1].clone())), duplicate("y"), "{backend}");
        assert_eq!(
            answer(store.create_conversation(conversation("c2", json!(null)), vec![item("z"), item("z")])),
            Err(StoreError::Duplicate("item z in conversation c2".into())),
            "{backend}"
        );
        assert_eq!(answer(store.get_conversation("c2")), Ok(None), "{backend}: the conversation was not created");
        let page = answer(store.list_items("c1", ListQuery::default())).expect("page");
        assert_eq!(ids(&page.data), ["a"], "{backend}");
    });
}
