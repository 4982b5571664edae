//! `shardgate serve`: starts headless engines and the gateway together, as SMG's `smg serve
//! --connection-mode zmq` does, and keeps the engines alive, which SMG does not.
//!
//! Everything that can be checked is checked before anything starts: `args` the command line,
//! `plan` the replicas' ports and socket paths, `python` the interpreter and its engine
//! package; `command` builds each engine's command line. `restart` decides when an exited
//! engine starts again, `output` logs an engine's output, `state` is what `GET /workers`
//! shows of an engine process.

pub mod args;
pub mod command;
mod error;
pub mod output;
pub mod plan;
pub mod python;
pub mod restart;
pub mod state;

pub use error::ServeError;
