//! What only the SQLite backend has: a file that outlives the store, rows that can be damaged
//! behind its back, and a schema version. Damage is done with a second, raw connection to the
//! same file, as an operator's tool or a newer build would.

mod common;

use common::{answer, conversation, item, response, TempDir};
use rusqlite::Connection;
use serde_json::json;
use shardgate_store::{Backend, Limits, ListQuery, Store, StoreError, SCHEMA_VERSION};

fn open(directory: &TempDir) -> Result<Store, StoreError> {
    Store::open(Backend::Sqlite { path: directory.database() }, &Limits::default())
}

#[test]
fn what_was_written_is_read_back_after_a_restart() {
    let directory = TempDir::new("durable");
    let store = open(&directory).expect("open creates the directory and the file");
    answer(store.put_response(response("r1", None))).expect("put");
    answer(store.put_response(response("r2", Some("r1")))).expect("put");
    answer(store.create_conversation(conversation("c1", json!({"k": "v"})), vec![item("a")])).expect("create");
    answer(store.add_items("c1", vec![item("b")])).expect("add");
    // The last handle's drop waits for the thread to close the database.
    drop(store);

    let store = open(&directory).expect("reopen");
    let chain = answer(store.response_chain("r2", 10)).expect("chain");
    assert_eq!(chain, vec![response("r1", None), response("r2", Some("r1"))]);
    assert_eq!(answer(store.get_conversation("c1")), Ok(Some(conversation("c1", json!({"k": "v"})))));
    let page = answer(store.list_items("c1", ListQuery::default())).expect("page");
    assert_eq!(page.data, vec![item("b"), item("a")]);
    // Insertion order goes on after the restart.
    answer(store.add_items("c1", vec![item("c")])).expect("add");
    let page = answer(store.list_items("c1", ListQuery::default())).expect("page");
    assert_eq!(page.first_id.as_deref(), Some("c"));
}

#[test]
fn the_file_is_in_wal_mode_at_the_current_version() {
    let directory = TempDir::new("pragmas");
    let store = open(&directory).expect("open");
    let raw = Connection::open(directory.database()).expect("raw");
    let mode: String = raw.pragma_query_value(None, "journal_mode", |row| row.get(0)).expect("journal_mode");
    let version: i64 = raw.pragma_query_value(None, "user_version", |row| row.get(0)).expect("user_version");
    assert_eq!((mode.as_str(), version), ("wal", SCHEMA_VERSION));
    drop(store);
}

/// A damaged row is `Corrupt` for the call that reads it, naming the record and the column,
/// and the store goes on serving: the undamaged record is read right after.
#[test]
fn a_damaged_row_is_corrupt_for_its_call_only() {
    let directory = TempDir::new("corrupt");
    let store = open(&directory).expect("open");
    // (the damage, the read that meets it, what it names, the start of why)
    type Read = fn(&Store) -> Result<(), StoreError>;
    let cases: &[(&str, Read, &str, &str)] = &[
        (
            "UPDATE responses SET response = '{not json' WHERE id = 'bad'",
            |store| answer(store.get_response("bad")).map(drop),
            "response bad",
            "column response: not JSON",
        ),
        (
            "UPDATE responses SET input_items = '' WHERE id = 'bad'",
            |store| answer(store.list_input_items("bad", ListQuery::default())).map(drop),
            "response bad",
            "column input_items: not JSON",
        ),
        (
            "UPDATE responses SET created_at = 'yesterday' WHERE id = 'bad'",
            |store| answer(store.get_response("bad")).map(drop),
            "response bad",
            "column created_at: text where an integer belongs",
        ),
        (
            "UPDATE responses SET created_at = -5 WHERE id = 'bad'",
            |store| answer(store.response_chain("bad", 10)).map(drop),
            "response bad",
            "column created_at: a negative time",
        ),
        (
            "UPDATE responses SET model = X'00ff' WHERE id = 'bad'",
            |store| answer(store.get_response("bad")).map(drop),
            "response bad",
            "column model: a blob where text belongs",
        ),
        (
            "UPDATE conversations SET metadata = '{' WHERE id = 'c_bad'",
            |store| answer(store.get_conversation("c_bad")).map(drop),
            "conversation c_bad",
            "column metadata: not JSON",
        ),
        (
            "UPDATE items SET body = 'nope' WHERE id = 'i_bad'",
            |store| answer(store.get_item("c_bad", "i_bad")).map(drop),
            "item i_bad",
            "column body: not JSON",
        ),
        (
            "UPDATE items SET body = X'7b7d' WHERE id = 'i_bad'",
            |store| answer(store.list_items("c_bad", ListQuery::default())).map(drop),
            "item in conversation c_bad",
            "column body: a blob where text belongs",
        ),
    ];
    let raw = Connection::open(directory.database()).expect("raw");
    for (damage, read, what, why) in cases {
        answer(store.put_response(response("bad", None))).expect("put");
        answer(store.put_response(response("good", None))).expect("put");
        let _ = answer(store.delete_conversation("c_bad"));
        answer(store.create_conversation(conversation("c_bad", json!(null)), vec![item("i_bad")])).expect("create");
        raw.execute_batch(damage).expect("damage");

        match read(&store) {
            Err(StoreError::Corrupt { what: found_what, why: found_why }) => {
                assert_eq!(found_what, *what, "{damage}");
                assert!(found_why.starts_with(why), "{damage}: {found_why}");
            }
            other => panic!("{damage}: expected Corrupt, got {other:?}"),
        }
        assert_eq!(answer(store.get_response("good")), Ok(Some(response("good", None))), "{damage}");
    }
}

#[test]
fn a_newer_schema_is_refused_naming_both_versions() {
    let directory = TempDir::new("newer");
    drop(open(&directory).expect("create"));
    let raw = Connection::open(directory.database()).expect("raw");
    raw.pragma_update(None, "user_version", 999).expect("set version");

    let error = open(&directory).expect_err("a newer file must not open");
    assert_eq!(error, StoreError::SchemaTooNew { path: directory.database(), found: 999, supported: SCHEMA_VERSION });
    let text = error.to_string();
    assert!(text.contains(&directory.database().display().to_string()), "{text}");
    assert!(text.contains("999") && text.contains(&format!("newer than {SCHEMA_VERSION}")), "{text}");
    let version: i64 = raw.pragma_query_value(None, "user_version", |row| row.get(0)).expect("user_version");
    assert_eq!(version, 999, "the file is left as it was");
}

#[test]
fn an_empty_database_is_migrated_to_the_current_version() {
    let directory = TempDir::new("empty");
    std::fs::create_dir_all(directory.database().parent().expect("parent")).expect("mkdir");
    let raw = Connection::open(directory.database()).expect("raw");
    raw.execute_batch("CREATE TABLE operator_notes (note TEXT)").expect("a foreign table");
    let store = open(&directory).expect("open");
    answer(store.put_response(response("r1", None))).expect("put");
    let version: i64 = raw.pragma_query_value(None, "user_version", |row| row.get(0)).expect("user_version");
    assert_eq!(version, SCHEMA_VERSION);
}

#[test]
fn files_that_are_not_a_store_fail_to_open() {
    let directory = TempDir::new("garbage");
    std::fs::create_dir_all(directory.database().parent().expect("parent")).expect("mkdir");
    std::fs::write(directory.database(), vec![0x5a; 8192]).expect("write");
    match open(&directory) {
        Err(StoreError::Io(why)) => assert!(why.contains(&directory.database().display().to_string()), "{why}"),
        other => panic!("expected Io, got {other:?}"),
    }

    let directory = TempDir::new("negative");
    std::fs::create_dir_all(directory.database().parent().expect("parent")).expect("mkdir");
    let raw = Connection::open(directory.database()).expect("raw");
    raw.pragma_update(None, "user_version", -1).expect("set version");
    match open(&directory) {
        Err(StoreError::Io(why)) => assert!(why.contains("schema version -1"), "{why}"),
        other => panic!("expected Io, got {other:?}"),
    }
}

#[test]
fn a_directory_in_the_way_is_an_open_error() {
    let directory = TempDir::new("blocked");
    std::fs::write(directory.path().join("data"), b"a file where the directory goes").expect("write");
    match open(&directory) {
        Err(StoreError::Io(why)) => assert!(why.starts_with("cannot create"), "{why}"),
        other => panic!("expected Io, got {other:?}"),
    }
}
