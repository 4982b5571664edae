//! The OpenAI-compatible API: chat completions, completions, models, tokenize/detokenize.
//! Responses are written by hand into strings (no serializer round trip per token); the shapes
//! follow `shared/reference/openai-api.md` (role chunk, content deltas, one finish chunk per
//! choice, a usage chunk with `choices: []` only when asked).

pub mod chat;
pub mod completion;
pub mod models;
pub mod render;
pub mod tokenize;
pub mod tools;
