//! ZMQ engine transports for engines on this host (`ipc://` workers).
//!
//! Layout: `socket` drives libzmq sockets from a shard's monoio runtime through `ZMQ_FD`
//! readiness (no thread of ours ever blocks in libzmq); `sockdir` enforces the socket-directory
//! rules; `handshake` runs HELLO/INIT/registration/READY for a worker; `vllm` is the
//! EngineCore wire codec; `connection` owns one shard's socket pair for one worker.

pub mod connection;
pub mod handshake;
pub mod msgpack;
pub mod sockdir;
pub mod socket;
pub mod tokenspeed;
pub mod vllm;
