//! Images in requests, API-neutral: each API's adapter lists its image parts as `MediaItem`s
//! (the URL and the request path naming the part) and puts the model's placeholder where the
//! template expects it (`Collector`); the side pool (`pool`) fetches, decodes and processes
//! them off the shard threads; `attach` expands the placeholders in the tokenized prompt and
//! fills the engine's `mm_features`. The model's processor and image token are chosen once, at
//! load (`vision`).

pub mod attach;
pub mod collect;
mod item;
pub mod pool;
pub mod refusal;
pub mod video;
pub mod video_support;
pub mod vision;

pub use attach::{attach, expand, process, Processed};
pub use collect::{Collector, MediaItem, MediaKind, Part};
pub use pool::MediaPool;
pub use vision::{Vision, VisionSupport};
