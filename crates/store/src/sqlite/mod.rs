//! The `sqlite` backend: one connection, owned by the storage thread, to a file that outlives
//! the process. Writes of more than one row run in one transaction, so a conversation is never
//! left half created or half deleted.
//!
//! A statement that fails (disk full, the file locked past the busy timeout) is `Io` for that
//! call; a row that cannot be read back is `Corrupt` (`rows.rs`).

mod rows;
mod schema;

use std::path::Path;

use rusqlite::types::Value as Sql;
use rusqlite::{params, Connection, OptionalExtension, Transaction, TransactionBehavior};
use serde_json::Value;

use crate::error::StoreError;
use crate::limits::Limits;
use crate::records::{Conversation, Item, ListQuery, Order, Page, StoredResponse};
use crate::storage::{duplicate_item, repeated_id, Storage};
use rows::{conversation_of, item_of, response_of, unix_seconds_column};
use rows::{CONVERSATION_COLUMNS, ITEM_COLUMNS, RESPONSE_COLUMNS};

pub(crate) use schema::SCHEMA_VERSION_SUPPORTED;

pub(crate) struct Sqlite {
    connection: Connection,
}

impl Sqlite {
    pub(crate) fn open(path: &Path, limits: &Limits) -> Result<Sqlite, StoreError> {
        Ok(Sqlite { connection: schema::open(path, limits)? })
    }

    fn write(&mut self) -> Result<Transaction<'_>, StoreError> {
        self.connection.transaction_with_behavior(TransactionBehavior::Immediate).map_err(io)
    }
}

fn io(e: rusqlite::Error) -> StoreError {
    StoreError::Io(e.to_string())
}

fn conversation_exists(connection: &Connection, id: &str) -> Result<bool, StoreError> {
    let mut statement = connection.prepare_cached("SELECT 1 FROM conversations WHERE id = ?1").map_err(io)?;
    statement.exists([id]).map_err(io)
}

/// The insertion position of an item, if its conversation holds it.
fn item_seq(connection: &Connection, conversation_id: &str, item_id: &str) -> Result<Option<i64>, StoreError> {
    let mut statement =
        connection.prepare_cached("SELECT seq FROM items WHERE conversation_id = ?1 AND id = ?2").map_err(io)?;
    statement.query_row([conversation_id, item_id], |row| row.get(0)).optional().map_err(io)
}

/// Appends `items` to a conversation that exists, refusing an id it already holds.
fn insert_items(transaction: &Transaction, conversation_id: &str, items: &[Item]) -> Result<(), StoreError> {
    if let Some(id) = repeated_id(items) {
        return Err(duplicate_item(conversation_id, id));
    }
    let mut statement = transaction
        .prepare_cached("INSERT INTO items (conversation_id, id, created_at, body) VALUES (?1, ?2, ?3, ?4)")
        .map_err(io)?;
    for item in items {
        if item_seq(transaction, conversation_id, &item.id)?.is_some() {
            return Err(duplicate_item(conversation_id, &item.id));
        }
        let created_at = unix_seconds_column(&format!("item {}", item.id), item.created_at)?;
        statement.execute(params![conversation_id, item.id, created_at, item.body.to_string()]).map_err(io)?;
    }
    Ok(())
}

impl Storage for Sqlite {
    fn put_response(&mut self, response: StoredResponse) -> Result<(), StoreError> {
        let created_at = unix_seconds_column(&format!("response {}", response.id), response.created_at)?;
        let mut statement = self
            .connection
            .prepare_cached(&format!(
                "INSERT OR REPLACE INTO responses ({RESPONSE_COLUMNS}) VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7)"
            ))
            .map_err(io)?;
        statement
            .execute(params![
                response.id,
                created_at,
                response.model,
                response.previous_response_id,
                response.conversation_id,
                response.input_items.to_string(),
                response.response.to_string(),
            ])
            .map_err(io)?;
        Ok(())
    }

    fn get_response(&mut self, id: &str) -> Result<Option<StoredResponse>, StoreError> {
        let mut statement = self
            .connection
            .prepare_cached(&format!("SELECT {RESPONSE_COLUMNS} FROM responses WHERE id = ?1"))
            .map_err(io)?;
        let mut rows = statement.query([id]).map_err(io)?;
        match rows.next().map_err(io)? {
            Some(row) => response_of(row, &format!("response {id}")).map(Some),
            None => Ok(None),
        }
    }

    fn delete_response(&mut self, id: &str) -> Result<bool, StoreError> {
        let mut statement = self.connection.prepare_cached("DELETE FROM responses WHERE id = ?1").map_err(io)?;
        Ok(0 < statement.execute([id]).map_err(io)?)
    }

    fn create_conversation(&mut self, conversation: Conversation, items: Vec<Item>) -> Result<(), StoreError> {
        let created_at = unix_seconds_column(&format!("conversation {}", conversation.id), conversation.created_at)?;
        let transaction = self.write()?;
        if conversation_exists(&transaction, &conversation.id)? {
            return Err(StoreError::Duplicate(format!("conversation {}", conversation.id)));
        }
        transaction
            .execute(
                &format!("INSERT INTO conversations ({CONVERSATION_COLUMNS}) VALUES (?1, ?2, ?3)"),
                params![conversation.id, created_at, conversation.metadata.to_string()],
            )
            .map_err(io)?;
        insert_items(&transaction, &conversation.id, &items)?;
        transaction.commit().map_err(io)
    }

    fn get_conversation(&mut self, id: &str) -> Result<Option<Conversation>, StoreError> {
        let mut statement = self
            .connection
            .prepare_cached(&format!("SELECT {CONVERSATION_COLUMNS} FROM conversations WHERE id = ?1"))
            .map_err(io)?;
        let mut rows = statement.query([id]).map_err(io)?;
        match rows.next().map_err(io)? {
            Some(row) => conversation_of(row, &format!("conversation {id}")).map(Some),
            None => Ok(None),
        }
    }

    fn update_conversation(&mut self, id: &str, metadata: Value) -> Result<Option<Conversation>, StoreError> {
        let updated = self
            .connection
            .execute("UPDATE conversations SET metadata = ?2 WHERE id = ?1", params![id, metadata.to_string()])
            .map_err(io)?;
        if updated == 0 {
            return Ok(None);
        }
        self.get_conversation(id)
    }

    fn delete_conversation(&mut self, id: &str) -> Result<bool, StoreError> {
        let transaction = self.write()?;
        transaction.execute("DELETE FROM items WHERE conversation_id = ?1", [id]).map_err(io)?;
        let deleted = transaction.execute("DELETE FROM conversations WHERE id = ?1", [id]).map_err(io)?;
        transaction.commit().map_err(io)?;
        Ok(0 < deleted)
    }

    fn add_items(&mut self, conversation_id: &str, items: Vec<Item>) -> Result<Vec<Item>, StoreError> {
        let transaction = self.write()?;
        if !conversation_exists(&transaction, conversation_id)? {
            return Err(StoreError::NotFound(format!("conversation {conversation_id}")));
        }
        insert_items(&transaction, conversation_id, &items)?;
        transaction.commit().map_err(io)?;
        Ok(items)
    }

    fn list_items(&mut self, conversation_id: &str, query: &ListQuery) -> Result<Page<Item>, StoreError> {
        if !conversation_exists(&self.connection, conversation_id)? {
            return Err(StoreError::NotFound(format!("conversation {conversation_id}")));
        }
        let after = match &query.after {
            None => None,
            Some(after) => match item_seq(&self.connection, conversation_id, after)? {
                Some(seq) => Some(seq),
                None => return Err(StoreError::NotFound(format!("item {after}"))),
            },
        };
        let (sql, after) = match query.order {
            Order::Asc => ("seq > ?2 ORDER BY seq ASC", after.unwrap_or(i64::MIN)),
            Order::Desc => ("seq < ?2 ORDER BY seq DESC", after.unwrap_or(i64::MAX)),
        };
        let limit = query.limit_clamped();
        let mut statement = self
            .connection
            .prepare_cached(&format!("SELECT {ITEM_COLUMNS} FROM items WHERE conversation_id = ?1 AND {sql} LIMIT ?3"))
            .map_err(io)?;
        // One more than the page holds: whether it exists is `has_more`.
        let fetch = Sql::Integer(i64::try_from(limit + 1).unwrap_or(i64::MAX));
        let mut rows = statement.query(params![conversation_id, after, fetch]).map_err(io)?;
        let what = format!("item in conversation {conversation_id}");
        let mut data = Vec::with_capacity(limit);
        while let Some(row) = rows.next().map_err(io)? {
            if data.len() == limit {
                return Ok(Page::of_items(data, true));
            }
            data.push(item_of(row, &what)?);
        }
        Ok(Page::of_items(data, false))
    }

    fn get_item(&mut self, conversation_id: &str, item_id: &str) -> Result<Option<Item>, StoreError> {
        let mut statement = self
            .connection
            .prepare_cached(&format!("SELECT {ITEM_COLUMNS} FROM items WHERE conversation_id = ?1 AND id = ?2"))
            .map_err(io)?;
        let mut rows = statement.query([conversation_id, item_id]).map_err(io)?;
        match rows.next().map_err(io)? {
            Some(row) => item_of(row, &format!("item {item_id}")).map(Some),
            None => Ok(None),
        }
    }

    fn delete_item(&mut self, conversation_id: &str, item_id: &str) -> Result<bool, StoreError> {
        let mut statement =
            self.connection.prepare_cached("DELETE FROM items WHERE conversation_id = ?1 AND id = ?2").map_err(io)?;
        Ok(0 < statement.execute([conversation_id, item_id]).map_err(io)?)
    }
}
