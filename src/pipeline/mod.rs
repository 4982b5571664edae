//! The serving pipeline, engine- and API-neutral: parameters → engine requests → per-choice
//! output state → parse stage (reasoning, tool calls) → events for an API formatter.
//!
//! Stages (the parent, `generate::run`, owns the control flow): `params` validates and builds
//! sampling parameters; `conversation` normalises chat messages for the template; `choice`
//! turns engine tokens into text with stop handling; `generate` submits the `n` samples, merges
//! their outputs, streams or collects, and aborts everything on the engine when the client
//! leaves or a sample fails; `retry` sends a generation once more to another worker when its
//! engine failed before producing anything.

pub mod admission;
pub mod choice;
pub mod constraint;
pub mod constraint_check;
pub mod conversation;
pub mod generate;
pub mod params;
pub mod parse;
pub mod retry;
pub mod thinking;

pub use generate::{Format, Prompt, Usage};
