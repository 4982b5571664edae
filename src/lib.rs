//! shardgate: a thread-per-core LLM serving gateway. See ARCHITECTURE.md for the map.

pub mod api;
pub mod cli;
pub mod config;
pub mod demo;
pub mod engine;
pub mod engine_process;
pub mod error;
pub mod gateway;
pub mod http;
pub mod inspect;
pub mod kv_publish;
pub mod limits;
pub mod media;
pub mod metrics;
pub mod pipeline;
pub mod routing;
pub mod serve;
pub mod shard;
pub mod shutdown;
pub mod startup;
pub mod upstream;
pub mod workers;
