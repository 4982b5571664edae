//! Everything the engine never sees: tokenizer, prompt renderers (the chat template or a
//! checkpoint's native encoder), incremental detokenization and stop strings. Pure and
//! synchronous: these modules do no I/O after loading and know nothing about HTTP, shards or
//! engines.

pub mod assets;
pub mod demo_model;
pub mod detokenize;
pub mod error;
pub mod limits;
pub mod model;
pub mod render;
pub mod stops;
pub mod template;
pub mod tokenizer;

pub use error::{AssetError, ModelError, PromptError, TemplateError, TokenizerError};
pub use model::ModelAssets;
