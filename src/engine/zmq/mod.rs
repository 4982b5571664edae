//! ZMQ engine transports for engines on this host (`ipc://` workers).
//!
//! Layout: `socket` drives libzmq sockets from a shard's monoio runtime through `ZMQ_FD`
//! readiness (no thread of ours ever blocks in libzmq); `sockdir` enforces the socket-directory
//! rules; `handshake` runs HELLO/INIT/registration/READY for a worker; `vllm` and `tokenspeed`
//! are the two engine wire codecs; `connection` is one shard's link to one worker; `hub` relays
//! the shards' traffic through the owner shard for an engine that serves one socket pair.

pub mod connection;
pub mod handshake;
pub mod hub;
pub mod msgpack;
pub mod sockdir;
pub mod socket;
pub mod tokenspeed;
pub mod vllm;
