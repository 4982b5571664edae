//! `/v1/responses`: OpenAI's Responses API.

pub mod history;
pub mod stored;
