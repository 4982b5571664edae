//! One image or video as a media pool thread hands it back to the shard: its tensors, grid,
//! placeholder count and hash, or why it was refused. Shared by the image path (`attach`) and
//! the video path (`video`).

use shardgate_fetch::FetchError;
use shardgate_media::{MediaError, VideoError};
use shardgate_wire::mm::{FieldData, Modality, Tensor};

/// One image or video, processed (on a pool thread).
pub(super) struct Item {
    pub modality: Modality,
    pub pixel_values: Tensor,
    /// `image_grid_thw` (`video_grid_thw`), for the families whose processor gives one.
    pub grid_thw: Option<[u32; 3]>,
    pub tokens: usize,
    /// What the item's placeholder token becomes where it is not `tokens` copies of itself (a
    /// Qwen3-VL video: its frame groups with their timestamp text).
    pub replacement: Option<Vec<u32>>,
    pub hash: String,
    /// Fields batched per item beside the grid: Qwen2.5-VL's `second_per_grid_ts`, Qwen3-VL's
    /// `timestamps`.
    pub batched: Vec<(&'static str, FieldData)>,
}

pub(super) enum Refused {
    Fetch(FetchError),
    Media(MediaError),
    Video(VideoError),
    /// A video for a model whose processor takes none.
    NoVideo,
}

/// `pixel_values` as the engine takes them: normalised `float32`, or the raw samples as `uint8`
/// where it normalises on its device (the processor then left them as exact integers).
pub(super) fn pixel_tensor(processed: &shardgate_media::Processed, raw: bool) -> Tensor {
    let shape = processed.shape.iter().map(|&d| d as u64).collect();
    if raw {
        Tensor::u8(shape, processed.pixel_values.iter().map(|&v| v as u8))
    } else {
        Tensor::f32(shape, &processed.pixel_values)
    }
}
