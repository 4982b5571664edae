//! Opening a SQLite store: the file and its directory, the connection's settings, and the
//! schema, created or migrated to this build's version (kept in `PRAGMA user_version`).
//!
//! A file whose version is newer than this build's is refused before anything in it changes: a
//! newer shardgate wrote it, and an older one writing into it could lose what it cannot read.
//! An older file is migrated one version at a time, each step in its own transaction together
//! with the version it reaches, so a crash leaves the file at one version or the next. A new
//! version is one function appended to `MIGRATIONS`.

use std::path::Path;
use std::time::Duration;

use rusqlite::{Connection, Transaction, TransactionBehavior};

use crate::error::StoreError;
use crate::limits::Limits;

/// `MIGRATIONS[v]` brings a database from version `v` to `v + 1`; version 0 is an empty file.
const MIGRATIONS: &[fn(&Transaction) -> rusqlite::Result<()>] = &[migrate_to_version_1];

/// The schema version this build writes and reads.
pub(crate) const SCHEMA_VERSION_SUPPORTED: i64 = MIGRATIONS.len() as i64;

const _: () = assert!(0 < SCHEMA_VERSION_SUPPORTED);

/// Opens (creating it and its directory if needed) the database at `path`, at this build's
/// schema version.
pub(super) fn open(path: &Path, limits: &Limits) -> Result<Connection, StoreError> {
    if let Some(directory) = path.parent().filter(|directory| !directory.as_os_str().is_empty()) {
        std::fs::create_dir_all(directory)
            .map_err(|e| StoreError::Io(format!("cannot create {}: {e}", directory.display())))?;
    }
    let at = |e: rusqlite::Error| StoreError::Io(format!("{}: {e}", path.display()));
    let mut connection = Connection::open(path).map_err(at)?;
    connection.busy_timeout(Duration::from_millis(limits.busy_timeout_ms)).map_err(at)?;
    // Checked before the journal mode is set, which writes to the file.
    check_version(path, read_version(&connection).map_err(at)?)?;
    // WAL: readers never wait for the writer, and a commit is one append. With NORMAL a commit
    // survives the process crashing; only a power loss may take the last ones back.
    connection.pragma_update_and_check(None, "journal_mode", "WAL", |_| Ok(())).map_err(at)?;
    connection.pragma_update(None, "synchronous", "NORMAL").map_err(at)?;
    migrate(&mut connection, path)?;
    Ok(connection)
}

fn read_version(connection: &Connection) -> rusqlite::Result<i64> {
    connection.pragma_query_value(None, "user_version", |row| row.get(0))
}

fn check_version(path: &Path, found: i64) -> Result<(), StoreError> {
    if found < 0 {
        return Err(StoreError::Io(format!(
            "{} has schema version {found}, which no shardgate writes",
            path.display()
        )));
    }
    if SCHEMA_VERSION_SUPPORTED < found {
        return Err(StoreError::SchemaTooNew { path: path.to_path_buf(), found, supported: SCHEMA_VERSION_SUPPORTED });
    }
    Ok(())
}

/// Runs the migrations from the file's version to this build's. Each step reads the version
/// again inside its write transaction, so two processes opening one file migrate it once.
fn migrate(connection: &mut Connection, path: &Path) -> Result<(), StoreError> {
    let at = |e: rusqlite::Error| StoreError::Io(format!("{}: {e}", path.display()));
    loop {
        let transaction = connection.transaction_with_behavior(TransactionBehavior::Immediate).map_err(at)?;
        let version = read_version(&transaction).map_err(at)?;
        check_version(path, version)?;
        let Some(step) = usize::try_from(version).ok().and_then(|index| MIGRATIONS.get(index)) else {
            return Ok(());
        };
        step(&transaction)
            .map_err(|e| StoreError::Io(format!("{}: migrating from version {version}: {e}", path.display())))?;
        transaction.pragma_update(None, "user_version", version + 1).map_err(at)?;
        transaction.commit().map_err(at)?;
    }
}

/// Version 1: responses, conversations and their items. JSON is kept as text. `seq` is the
/// items' insertion order: a rowid, and SQLite gives a new row the largest rowid so far plus one.
fn migrate_to_version_1(transaction: &Transaction) -> rusqlite::Result<()> {
    transaction.execute_batch(
        "CREATE TABLE responses (
             id TEXT PRIMARY KEY NOT NULL,
             created_at INTEGER NOT NULL,
             model TEXT NOT NULL,
             previous_response_id TEXT,
             conversation_id TEXT,
             input_items TEXT NOT NULL,
             response TEXT NOT NULL
         );
         CREATE INDEX responses_previous_response_id ON responses (previous_response_id);
         CREATE TABLE conversations (
             id TEXT PRIMARY KEY NOT NULL,
             created_at INTEGER NOT NULL,
             metadata TEXT NOT NULL
         );
         CREATE TABLE items (
             seq INTEGER PRIMARY KEY,
             conversation_id TEXT NOT NULL,
             id TEXT NOT NULL,
             created_at INTEGER NOT NULL,
             body TEXT NOT NULL,
             UNIQUE (conversation_id, id)
         );
         CREATE INDEX items_conversation_id_seq ON items (conversation_id, seq);",
    )
}
