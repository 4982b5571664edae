//! Rows to records, and records to column values. Whatever a row holds (a column of the wrong
//! type, JSON that does not parse, a negative time) is `StoreError::Corrupt` naming the record
//! and the column: an error for the one call that read it, never a panic.

use rusqlite::types::{Value as Sql, ValueRef};
use rusqlite::Row;
use serde_json::Value;

use crate::error::StoreError;
use crate::records::{Conversation, Item, StoredResponse};

/// The columns `response_of` reads, in its order.
pub(super) const RESPONSE_COLUMNS: &str =
    "id, created_at, model, previous_response_id, conversation_id, input_items, response";
/// The columns `conversation_of` reads, in its order.
pub(super) const CONVERSATION_COLUMNS: &str = "id, created_at, metadata";
/// The columns `item_of` reads, in its order.
pub(super) const ITEM_COLUMNS: &str = "id, created_at, body";

pub(super) fn response_of(row: &Row, what: &str) -> Result<StoredResponse, StoreError> {
    let columns = Columns { row, what };
    Ok(StoredResponse {
        id: columns.text(0)?,
        created_at: columns.unix_seconds(1)?,
        model: columns.text(2)?,
        previous_response_id: columns.text_or_null(3)?,
        conversation_id: columns.text_or_null(4)?,
        input_items: columns.json(5)?,
        response: columns.json(6)?,
    })
}

pub(super) fn conversation_of(row: &Row, what: &str) -> Result<Conversation, StoreError> {
    let columns = Columns { row, what };
    Ok(Conversation { id: columns.text(0)?, created_at: columns.unix_seconds(1)?, metadata: columns.json(2)? })
}

pub(super) fn item_of(row: &Row, what: &str) -> Result<Item, StoreError> {
    let columns = Columns { row, what };
    Ok(Item { id: columns.text(0)?, created_at: columns.unix_seconds(1)?, body: columns.json(2)? })
}

/// A time as SQLite's INTEGER holds it. Times past 2^63 seconds are refused rather than wrapped.
pub(super) fn unix_seconds_column(what: &str, seconds: u64) -> Result<Sql, StoreError> {
    match i64::try_from(seconds) {
        Ok(seconds) => Ok(Sql::Integer(seconds)),
        Err(_) => Err(StoreError::Io(format!("{what}: created_at {seconds} is past what the store can hold"))),
    }
}

struct Columns<'r, 's> {
    row: &'r Row<'s>,
    what: &'r str,
}

impl Columns<'_, '_> {
    fn corrupt(&self, index: usize, why: impl std::fmt::Display) -> StoreError {
        let name = self.row.as_ref().column_name(index).unwrap_or("?");
        StoreError::Corrupt { what: self.what.to_string(), why: format!("column {name}: {why}") }
    }

    fn value(&self, index: usize) -> Result<ValueRef<'_>, StoreError> {
        self.row.get_ref(index).map_err(|e| self.corrupt(index, e))
    }

    fn text(&self, index: usize) -> Result<String, StoreError> {
        self.text_or_null(index)?.ok_or_else(|| self.corrupt(index, "null where text belongs"))
    }

    fn text_or_null(&self, index: usize) -> Result<Option<String>, StoreError> {
        match self.value(index)? {
            ValueRef::Null => Ok(None),
            ValueRef::Text(bytes) => match std::str::from_utf8(bytes) {
                Ok(text) => Ok(Some(text.to_string())),
                Err(e) => Err(self.corrupt(index, e)),
            },
            other => Err(self.corrupt(index, format_args!("{} where text belongs", kind(other)))),
        }
    }

    fn unix_seconds(&self, index: usize) -> Result<u64, StoreError> {
        match self.value(index)? {
            ValueRef::Integer(seconds) => u64::try_from(seconds).map_err(|_| self.corrupt(index, "a negative time")),
            other => Err(self.corrupt(index, format_args!("{} where an integer belongs", kind(other)))),
        }
    }

    fn json(&self, index: usize) -> Result<Value, StoreError> {
        let text = self.text(index)?;
        serde_json::from_str(&text).map_err(|e| self.corrupt(index, format_args!("not JSON ({e})")))
    }
}

/// A value's type, as the reason for refusing it reads it.
fn kind(value: ValueRef<'_>) -> &'static str {
    match value {
        ValueRef::Null => "null",
        ValueRef::Integer(_) => "an integer",
        ValueRef::Real(_) => "a real number",
        ValueRef::Text(_) => "text",
        ValueRef::Blob(_) => "a blob",
    }
}
