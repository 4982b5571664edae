//! vLLM's own `vllm.Inference` / `vllm.Control` services (served by `vllm-rs serve
//! --grpc-port`, the Rust front end in the vllm wheel, attached to a headless engine): its
//! messages, the request and answer mappings, and the client.

mod client;
pub mod messages;
mod request;
mod response;

pub use client::{GenerateStream, VllmClient, GENERATE_STREAM, GET_SERVER_INFO};
pub use request::generate_request;
pub use response::GenerateReader;
