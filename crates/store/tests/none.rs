//! The `none` backend keeps nothing: every write succeeds, every read finds nothing.

mod common;

use common::{answer, conversation, item, response};
use serde_json::json;
use shardgate_store::{Backend, Limits, ListQuery, Page, Store, StoreError};

#[test]
fn the_none_backend_stores_nothing() {
    let store = Store::open(Backend::None, &Limits::default()).expect("open");
    assert_eq!(answer(store.put_response(response("r1", None))), Ok(()));
    assert_eq!(answer(store.get_response("r1")), Ok(None));
    assert_eq!(answer(store.delete_response("r1")), Ok(false));
    assert_eq!(answer(store.response_chain("r1", 10)), Err(StoreError::NotFound("response r1".into())));
    assert_eq!(
        answer(store.list_input_items("r1", ListQuery::default())),
        Err(StoreError::NotFound("response r1".into()))
    );

    let created = conversation("c1", json!({"k": "v"}));
    assert_eq!(answer(store.create_conversation(created.clone(), vec![item("a")])), Ok(created));
    assert_eq!(answer(store.get_conversation("c1")), Ok(None));
    assert_eq!(answer(store.update_conversation("c1", json!({}))), Ok(None));
    assert_eq!(answer(store.add_items("c1", vec![item("b")])), Ok(vec![item("b")]));
    let empty = Page { data: vec![], has_more: false, first_id: None, last_id: None };
    assert_eq!(answer(store.list_items("c1", ListQuery::default())), Ok(empty));
    assert_eq!(answer(store.get_item("c1", "a")), Ok(None));
    assert_eq!(answer(store.delete_item("c1", "a")), Ok(false));
    assert_eq!(answer(store.delete_conversation("c1")), Ok(false));
}
