//! The gateway's links to ZMQ engines on this host (`ipc://` workers), over the codecs and the
//! ZMTP of `shardgate_wire`.
//!
//! Layout: `socket` drives the libzmq handshake socket through `ZMQ_FD` readiness (no thread of
//! ours ever blocks in libzmq); `handshake` runs HELLO/INIT/registration/READY for a worker;
//! `connection` is one shard's link to one worker (`loss` says why one closed); `hub` relays the shards' traffic through the
//! owner shard for an engine that serves one socket pair.

pub mod connection;
pub mod handshake;
pub mod hub;
pub mod loss;
pub mod socket;
