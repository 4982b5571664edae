//! gRPC workers: `grpc://HOST:PORT` URLs (engines on other hosts behind SMG's servicer or
//! vLLM's own gRPC front end): their supervisor on the control shard. The URL itself is
//! `config::grpc_worker`'s (configuration reads it for `launch` too).

pub mod supervisor;
