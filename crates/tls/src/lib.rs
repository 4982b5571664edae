//! TLS to remote workers: `https://` HTTP workers and `grpcs://` gRPC workers.
//!
//! `client.rs` builds the rustls client configurations once, at startup, from the gateway's
//! flags (`--ca-cert-path`, `--client-cert-path`, `--client-key-path`): one per application
//! protocol, because ALPN is part of the configuration (`h2` for gRPC, `http/1.1` for the HTTP
//! relay). `pem.rs` reads the PEM files, every failure naming its file. `connect.rs` runs the
//! handshake over any stream with tokio's IO traits: monoio's poll-io streams have them, so
//! TLS runs on the shard's own runtime like everything else.
//!
//! *Invariants:* the server's certificate is always verified (there is no switch to turn it
//! off), against the system's roots plus the given CA files, for the host the worker URL names;
//! a client identity is a certificate and its key together, never one alone.

pub mod client;
pub mod connect;
pub mod error;
pub mod pem;

pub use client::{Alpn, ClientTls, ClientTlsSettings};
pub use connect::{connect, server_name, TlsStream};
pub use error::TlsError;
