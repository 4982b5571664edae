//! The OpenAI-compatible API: chat completions, completions, responses (`responses/`), models,
//! tokenize/detokenize.
//!
//! The generation endpoints are adapters around the pipeline: each reads its request's fields
//! into the neutral `pipeline::request::GenerateRequest` (`chat`, `completion`, with the
//! fields they share in `sampling`, `constraint`, `conversation`, `thinking`, `tools`; chat's
//! prompt through `api::chat_prompt`), names the pipeline's refusals (`api::invalid`), and
//! renders the pipeline's events (`chat_format`, `completion_format`) through `api::sink`. Responses are written by hand into
//! strings (no serializer round trip per token); the shapes follow
//! `shared/reference/openai-api.md` (role chunk, content deltas, one finish chunk per choice, a
//! usage chunk with `choices: []` only when asked).

pub mod chat;
pub mod chat_format;
pub mod completion;
pub mod completion_format;
pub mod constraint;
pub mod conversation;
pub mod conversations;
pub mod models;
pub mod render;
pub mod responses;
pub mod sampling;
pub mod thinking;
pub mod tokenize;
pub mod tools;
