//! The `memory` backend: maps in the storage thread, gone when the process ends. For
//! development and tests; nothing bounds its size. It runs on the same storage thread behind the
//! same queue as SQLite, so its answers, its errors and its back-pressure are the same.

use std::collections::HashMap;

use serde_json::Value;

use crate::error::StoreError;
use crate::paging::page_of;
use crate::records::{Conversation, Item, ListQuery, Page, StoredResponse};
use crate::storage::{duplicate_item, repeated_id, Storage};

#[derive(Default)]
pub(crate) struct Memory {
    responses: HashMap<String, StoredResponse>,
    conversations: HashMap<String, (Conversation, Vec<Item>)>,
}

impl Memory {
    fn conversation_mut(&mut self, id: &str) -> Result<&mut (Conversation, Vec<Item>), StoreError> {
        self.conversations.get_mut(id).ok_or_else(|| StoreError::NotFound(format!("conversation {id}")))
    }
}

impl Storage for Memory {
    fn put_response(&mut self, response: StoredResponse) -> Result<(), StoreError> {
        self.responses.insert(response.id.clone(), response);
        Ok(())
    }

    fn get_response(&mut self, id: &str) -> Result<Option<StoredResponse>, StoreError> {
        Ok(self.responses.get(id).cloned())
    }

    fn delete_response(&mut self, id: &str) -> Result<bool, StoreError> {
        Ok(self.responses.remove(id).is_some())
    }

    fn create_conversation(&mut self, conversation: Conversation, items: Vec<Item>) -> Result<(), StoreError> {
        if self.conversations.contains_key(&conversation.id) {
            return Err(StoreError::Duplicate(format!("conversation {}", conversation.id)));
        }
        if let Some(id) = repeated_id(&items) {
            return Err(duplicate_item(&conversation.id, id));
        }
        self.conversations.insert(conversation.id.clone(), (conversation, items));
        Ok(())
    }

    fn get_conversation(&mut self, id: &str) -> Result<Option<Conversation>, StoreError> {
        Ok(self.conversations.get(id).map(|(conversation, _)| conversation.clone()))
    }

    fn update_conversation(&mut self, id: &str, metadata: Value) -> Result<Option<Conversation>, StoreError> {
        Ok(self.conversations.get_mut(id).map(|(conversation, _)| {
            conversation.metadata = metadata;
            conversation.clone()
        }))
    }

    fn delete_conversation(&mut self, id: &str) -> Result<bool, StoreError> {
        Ok(self.conversations.remove(id).is_some())
    }

    fn add_items(&mut self, conversation_id: &str, items: Vec<Item>) -> Result<Vec<Item>, StoreError> {
        let (_, held) = self.conversation_mut(conversation_id)?;
        if let Some(id) = repeated_id(&items) {
            return Err(duplicate_item(conversation_id, id));
        }
        if let Some(item) = items.iter().find(|item| held.iter().any(|old| old.id == item.id)) {
            return Err(duplicate_item(conversation_id, &item.id));
        }
        held.extend(items.iter().cloned());
        Ok(items)
    }

    fn list_items(&mut self, conversation_id: &str, query: &ListQuery) -> Result<Page<Item>, StoreError> {
        let (_, held) = self.conversation_mut(conversation_id)?;
        page_of(held, query)
    }

    fn get_item(&mut self, conversation_id: &str, item_id: &str) -> Result<Option<Item>, StoreError> {
        let Some((_, held)) = self.conversations.get(conversation_id) else { return Ok(None) };
        Ok(held.iter().find(|item| item.id == item_id).cloned())
    }

    fn delete_item(&mut self, conversation_id: &str, item_id: &str) -> Result<bool, StoreError> {
        let Some((_, held)) = self.conversations.get_mut(conversation_id) else { return Ok(false) };
        let before = held.len();
        held.retain(|item| item.id != item_id);
        Ok(held.len() < before)
    }
}
