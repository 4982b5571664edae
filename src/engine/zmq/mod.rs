//! ZMQ engine transports for engines on this host (`ipc://` workers).
//!
//! Layout: `zmtp` is our own ZMTP for the data-plane sockets, driven by each shard's runtime
//! with no I/O thread in between; `socket` drives the libzmq handshake socket through `ZMQ_FD`
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
pub mod zmtp;
