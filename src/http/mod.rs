//! HTTP/1.1 on a shard: accept loop, request parsing (httparse), bodies (Content-Length and
//! chunked), keep-alive, pipelining, and response framing (full bodies, chunked SSE streams).
//! Knows nothing about the OpenAI API: it hands a parsed `Request` to `api::routes::dispatch`
//! and gives it a `Responder` to answer with.

pub mod chunked;
pub mod conn;
pub mod fd_budget;
pub mod request;
pub mod response;
pub mod server;
