//! `/v1/responses`: OpenAI's Responses API, an adapter like chat's. `create` reads the request
//! (`input` items → the template's conversation, `tools`, `sampling` with `text.format`) into
//! the pipeline's `GenerateRequest`; `format` renders the events as typed SSE events or one
//! `response` object (`object`) and saves a complete response through `history`, which also
//! gives the items a request continues.

pub mod approval;
pub mod create;
pub mod format;
pub mod history;
pub mod input;
pub mod mcp_tools;
pub mod object;
pub mod sampling;
pub mod stored;
pub mod tool_loop;
pub mod tools;
