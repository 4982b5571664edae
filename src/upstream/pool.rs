//! A shard's idle keep-alive connections, per upstream (by worker key). Single-threaded: the
//! shard's own requests take and return them.

use std::cell::RefCell;
use std::collections::HashMap;

use super::client::Conn;
use crate::limits;

#[derive(Default)]
pub struct Pool {
    idle: RefCell<HashMap<u64, Vec<Conn>>>,
}

impl Pool {
    /// The most recently returned connection (the one least likely to have been closed by the
    /// upstream's own idle timeout).
    pub fn take(&self, worker: u64) -> Option<Conn> {
        self.idle.borrow_mut().get_mut(&worker)?.pop()
    }

    /// Keeps a connection whose last response was read completely. Connections to workers no
    /// longer `live` (removed) are closed on the way.
    pub fn put(&self, worker: u64, conn: Conn, live: impl Fn(u64) -> bool) {
        if !conn.is_clean() {
            return;
        }
        let mut idle = self.idle.borrow_mut();
        idle.retain(|key, _| *key == worker || live(*key));
        let conns = idle.entry(worker).or_default();
        if conns.len() < limits::upstream_idle_connections_max {
            conns.push(conn);
        }
    }

    /// Closes the idle connections to a worker (it went unhealthy or was removed).
    pub fn forget(&self, worker: u64) {
        self.idle.borrow_mut().remove(&worker);
    }
}
