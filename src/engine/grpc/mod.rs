//! The gRPC transport of a shard's link: engines on other hosts, reached over HTTP/2 with the
//! `shardgate-grpc` client. One connection per shard per worker; each request is one Generate
//! stream on it, read into the link's request book by a task of its own.

pub mod transport;
