//! Reasoning and tool-call parsers: pure, synchronous text state machines.
//!
//! The pipeline feeds each generated choice's decoded text deltas through one
//! reasoning parser ([`reasoning`]) and then, on the content it returns, one
//! tool-call parser ([`tool`]). Both are selected by name from a registry (a
//! per-model override, the gateway flag, or detection from the model name).
//!
//! Invariants every parser keeps:
//! - **Streamed == one-shot.** Feeding a text in any split (`push` per chunk,
//!   then `finish`) yields the same reasoning, content and tool calls as
//!   `push(whole)` + `finish()`. The machinery guarantees it by construction:
//!   a parser only acts on a prefix of its input once no later text could
//!   change the decision (see `stream_core`).
//! - **Nothing is dropped by accident.** Text held back because it might be
//!   the start of a marker or a call is released to the right field as soon
//!   as it can no longer match, and at the latest by `finish`. Only protocol
//!   markers themselves (and frames the formats define as protocol data) are
//!   consumed.
//! - **No panics, no I/O, no async.** Inputs are untrusted model output.
//!
//! gpt-oss's Harmony output is the one stream read as token ids ([`harmony`]): the official
//! `openai-harmony` parser decides its channels, and only its routing to reasoning, content
//! and calls is ours.
//!
//! What this module must not know: HTTP, SSE framing, tokenizers, engines.
//! Tool-call ids are minted here ([`tool::tool_call_id`]) only because their
//! format is a per-model-family convention.

pub mod harmony;
pub mod limits;
pub mod reasoning;
pub(crate) mod stream_core;
pub mod tool;
