//! The transport to ZMQ engines on this host (`ipc://` workers), over the codecs and the ZMTP
//! of `shardgate_wire`.
//!
//! Layout: `handshake_socket` drives the libzmq handshake socket through `ZMQ_FD` readiness (no
//! thread of ours ever blocks in libzmq); `bringup` binds a worker's sockets and runs
//! HELLO/INIT/registration/READY with each of its engines; `transport` carries one shard's
//! messages to the group once connected; `hub` relays the shards' traffic through the owner
//! shard for an engine that serves one socket pair; `kv_events` follows the engines' KV-cache
//! events, where they publish them, into each rank's exact block index.

pub mod bringup;
pub mod handshake_socket;
pub mod hub;
pub mod kv_events;
pub mod transport;
