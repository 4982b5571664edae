//! One module per cargo-fuzz target (`tests/fuzz/fuzz_targets/<name>.rs` calls its `run`); the
//! module's doc says what it covers and its oracle.

pub mod constraint_check;
pub mod http_request;
pub mod image_decode;
pub mod request_json;
pub mod text_pipeline;
pub mod tokenspeed_output;
pub mod video_decode;
pub mod vllm_output;
pub mod zmtp_peer;
