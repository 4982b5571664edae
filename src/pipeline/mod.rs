//! The serving pipeline, engine- and API-neutral: an adapter's request → validated engine
//! requests → per-choice output state → parse stage (reasoning, tool calls) → events for the
//! adapter's sink. Nothing here knows an API's field names, HTTP, SSE or JSON envelopes.
//!
//! Stages (`generate::run` owns the control flow): `request` is what an adapter hands in;
//! `plan` validates it (`params`, `constraint`; refusals in `invalid`) and picks a worker;
//! `generate` submits the `n` samples (`submit`), merges their outputs, and aborts everything on the
//! engine when the client leaves or a sample fails; `choice` turns engine tokens into text with
//! stop handling; `parse` splits reasoning and tool calls; `events` is what the adapter's
//! `sink` receives. `retry` sends a generation once more to another worker when its engine failed
//! before producing anything; `admission` bounds how many run at once.

pub mod admission;
pub mod choice;
pub mod constraint;
pub mod constraint_check;
pub mod events;
pub mod generate;
pub mod harmony_tag;
pub mod invalid;
pub mod params;
pub mod parse;
pub mod plan;
pub mod request;
pub mod retry;
pub mod sink;
pub mod submit;
