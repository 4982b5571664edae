//! The HTTP API surface: routes, and the OpenAI wire types. Handlers turn JSON into a
//! `pipeline::request::GenerateRequest` and the pipeline's events back into JSON; they own no
//! engine or text logic themselves.

pub mod fields;
pub mod openai;
pub mod routes;
pub mod security;
