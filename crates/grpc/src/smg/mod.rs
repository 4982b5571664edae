//! SMG's `vllm.grpc.engine.VllmEngine` service (PyPI `smg-grpc-servicer` around a vLLM engine):
//! its messages, the request and answer mappings, and the client.

mod client;
pub mod messages;
mod request;
mod response;

pub use client::{GenerateStream, SmgClient};
pub use request::{generate_request, Unsupported};
pub use response::{finish_reason, GenerateReader};
