//! Every refusal of an image, as the 400 the client gets: the message and `param` name the
//! request part, the log line the cause. The one place fetch, decode and processing errors
//! become API errors.

use crate::error::ApiError;
use shardgate_fetch::FetchError;
use shardgate_media::{MediaError, VideoError};

/// A refusal of the item at `at`, for any reason the client can change.
pub fn item(at: &str, cause: impl std::fmt::Display) -> ApiError {
    tracing::info!("image refused: {at}: {cause}");
    ApiError::invalid_param(at, format!("{at}: {cause}"))
}

pub fn fetch(at: &str, e: &FetchError) -> ApiError {
    item(at, format!("cannot fetch the image: {e}"))
}

pub fn media(at: &str, e: &MediaError) -> ApiError {
    item(at, e)
}

pub fn video(at: &str, e: &VideoError) -> ApiError {
    tracing::info!("video refused: {at}: {e}");
    ApiError::invalid_param(at, format!("{at}: {e}"))
}

/// A video for a vision model whose processor is not one with a video processor ported.
pub fn no_video(at: &str) -> ApiError {
    video(at, &VideoError::Unsupported { what: "for a model whose processor takes no videos".into() })
}

/// An image for a model that takes none (`why`: what its files lack).
pub fn no_vision(at: &str, model: &str, why: &str) -> ApiError {
    tracing::info!("image refused: {at}: model {model} takes no images: {why}");
    ApiError::invalid_param(at, format!("the model '{model}' does not take images ({why})"))
}
