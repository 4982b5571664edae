//! Anthropic's Messages API: `POST /v1/messages` and `POST /v1/messages/count_tokens`.
//!
//! An adapter around the pipeline like the OpenAI endpoints, sharing only what sits at `api/`
//! level: `messages` reads the request (`content`: `system` and the messages' blocks → the
//! conversation in the chat template's shape; `tools`: `tools` and `tool_choice`; `thinking`:
//! the thinking switch) into `api::chat_prompt` and the pipeline's `GenerateRequest`;
//! `format` renders the pipeline's events as Anthropic's named SSE events or one `message`
//! body; `count_tokens` renders the same prompt and counts it. Errors take Anthropic's
//! envelope (the router chooses it from the path); since that envelope has no `param`,
//! `invalid` puts the field into the message, and refuses fields of OpenAI's APIs by name.
//!
//! What differs from Anthropic's API, and from vLLM's implementation of it, is listed in
//! `docs/anthropic.md`.

pub mod content;
pub mod count_tokens;
pub mod format;
pub mod invalid;
pub mod messages;
pub mod thinking;
pub mod tools;
