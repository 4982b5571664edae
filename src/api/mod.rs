//! The HTTP API surface: routes, and the OpenAI and Anthropic wire types. Handlers turn JSON
//! into a `pipeline::request::GenerateRequest` and the pipeline's events back into JSON; they
//! own no engine or text logic themselves.

pub mod anthropic;
pub mod chat_prompt;
pub mod fields;
pub mod invalid;
pub mod list_query;
pub mod model;
pub mod openai;
pub mod routes;
pub mod security;
pub mod sink;
#[cfg(test)]
pub mod test_events;
