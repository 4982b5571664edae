//! The `none` backend (SMG's `none` history backend): nothing is kept. Every write succeeds and
//! is dropped; every read finds nothing (gets answer `None`, lists an empty page, deletes
//! `false`), so a response or conversation created a moment ago is not found. What is built on
//! reads follows: `response_chain` and `list_input_items` answer `NotFound`.

use serde_json::Value;

use crate::error::StoreError;
use crate::records::{Conversation, Item, ListQuery, Page, StoredResponse};
use crate::storage::Storage;

pub(crate) struct Discard;

impl Storage for Discard {
    fn put_response(&mut self, _: StoredResponse) -> Result<(), StoreError> {
        Ok(())
    }

    fn get_response(&mut self, _: &str) -> Result<Option<StoredResponse>, StoreError> {
        Ok(None)
    }

    fn delete_response(&mut self, _: &str) -> Result<bool, StoreError> {
        Ok(false)
    }

    fn create_conversation(&mut self, _: Conversation, _: Vec<Item>) -> Result<(), StoreError> {
        Ok(())
    }

    fn get_conversation(&mut self, _: &str) -> Result<Option<Conversation>, StoreError> {
        Ok(None)
    }

    fn update_conversation(&mut self, _: &str, _: Value) -> Result<Option<Conversation>, StoreError> {
        Ok(None)
    }

    fn delete_conversation(&mut self, _: &str) -> Result<bool, StoreError> {
        Ok(false)
    }

    fn add_items(&mut self, _: &str, items: Vec<Item>) -> Result<Vec<Item>, StoreError> {
        Ok(items)
    }

    fn list_items(&mut self, _: &str, _: &ListQuery) -> Result<Page<Item>, StoreError> {
        Ok(Page::of_items(Vec::new(), false))
    }

    fn get_item(&mut self, _: &str, _: &str) -> Result<Option<Item>, StoreError> {
        Ok(None)
    }

    fn delete_item(&mut self, _: &str, _: &str) -> Result<bool, StoreError> {
        Ok(false)
    }
}
