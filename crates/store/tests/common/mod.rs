//! The tests' harness: a throwaway data directory, a store of each backend in it, a minimal
//! executor, and record builders.

#![allow(dead_code)]

use std::path::{Path, PathBuf};
use std::pin::Pin;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::task::{Context, Poll, Wake, Waker};

use serde_json::{json, Value};
use shardgate_store::{Backend, Conversation, Item, Limits, Reply, Store, StoreError, StoredResponse};

/// A directory under the system's temp directory, removed with everything in it on drop.
pub struct TempDir(PathBuf);

impl TempDir {
    pub fn new(label: &str) -> TempDir {
        static NEXT: AtomicUsize = AtomicUsize::new(0);
        let name = format!("shardgate-store-{label}-{}-{}", std::process::id(), NEXT.fetch_add(1, Ordering::SeqCst));
        let path = std::env::temp_dir().join(name);
        let _ = std::fs::remove_dir_all(&path);
        std::fs::create_dir_all(&path).expect("create temp dir");
        TempDir(path)
    }

    pub fn path(&self) -> &Path {
        &self.0
    }

    pub fn database(&self) -> PathBuf {
        self.0.join("data").join("history.sqlite3")
    }
}

impl Drop for TempDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// Runs `body` once against a fresh SQLite store and once against a fresh memory store: one
/// behaviour, both backends. `body` gets the backend's name for its assertion messages.
pub fn each_backend(body: impl Fn(&str, &Store)) {
    let directory = TempDir::new("suite");
    let backends = [("sqlite", Backend::Sqlite { path: directory.database() }), ("memory", Backend::Memory)];
    for (name, backend) in backends {
        let store = Store::open(backend, &Limits::default()).unwrap_or_else(|e| panic!("{name}: open: {e}"));
        body(name, &store);
    }
}

/// Polls a future to its end on this thread, parking between wake-ups: the smallest
/// single-threaded executor.
pub fn block_on<F: std::future::Future>(future: F) -> F::Output {
    struct Unpark(std::thread::Thread);
    impl Wake for Unpark {
        fn wake(self: Arc<Self>) {
            self.0.unpark();
        }
    }
    let waker = Waker::from(Arc::new(Unpark(std::thread::current())));
    let mut cx = Context::from_waker(&waker);
    let mut future = std::pin::pin!(future);
    loop {
        if let Poll::Ready(output) = Pin::as_mut(&mut future).poll(&mut cx) {
            return output;
        }
        std::thread::park();
    }
}

/// The answer of an operation: refused at once, or what its reply resolves to.
pub fn answer<T>(offered: Result<Reply<T>, StoreError>) -> Result<T, StoreError> {
    block_on(offered?)
}

pub fn response(id: &str, previous: Option<&str>) -> StoredResponse {
    StoredResponse {
        id: id.into(),
        created_at: 1_700_000_000,
        model: "qwen3".into(),
        previous_response_id: previous.map(str::to_string),
        conversation_id: None,
        input_items: json!([
            {"id": format!("{id}_in0"), "type": "message", "role": "user", "content": "hi"},
            {"id": format!("{id}_in1"), "type": "message", "role": "user", "content": "there"},
        ]),
        response: json!({"id": id, "object": "response", "status": "completed", "output": [], "usage": {"total_tokens": 3}}),
    }
}

pub fn conversation(id: &str, metadata: Value) -> Conversation {
    Conversation { id: id.into(), created_at: 1_700_000_001, metadata }
}

pub fn item(id: &str) -> Item {
    Item {
        id: id.into(),
        created_at: 1_700_000_002,
        body: json!({"id": id, "type": "message", "role": "user", "content": id}),
    }
}

pub fn ids(items: &[Item]) -> Vec<&str> {
    items.iter().map(|item| item.id.as_str()).collect()
}
