//! HTTP/1.1 and HTTP/2 on a shard: accept loop, request parsing (httparse), bodies
//! (Content-Length and chunked), keep-alive, pipelining, and response framing (full bodies,
//! chunked SSE streams); `sniff` tells a cleartext HTTP/2 client (prior knowledge) by its
//! preface, and `http2` serves it; `tls` terminates TLS and hands the stream to either by ALPN. Knows nothing about the OpenAI API: it hands a parsed
//! `Request` to `api::routes::dispatch` and gives it a `Responder` to answer with, the same
//! for both protocols.

pub mod chunked;
pub mod conn;
pub mod fd_budget;
pub mod http2;
pub mod request;
pub mod response;
pub mod server;
pub mod sniff;
pub mod tls;

/// The client went away (a write failed, the socket was closed, the stream was reset).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ClientGone;
