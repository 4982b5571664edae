//! CLIP's image processor, the one LLaVA-1.5 and its kin ship: the shortest edge resized to
//! `size` (the long side `int(size * long / short)`), a centred crop, rescale and normalise;
//! `pixel_values` is `(3, crop_height, crop_width)` and the vision tower sees
//! `(crop_height / patch) * (crop_width / patch)` patches, one placeholder token each.

use super::normalize::Normalize;
use super::Processed;
use crate::decode::RgbImage;
use crate::error::MediaError;
use crate::limits;
use crate::resize::{resize, Backend, Filter};

/// What `size` in the config asks for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ClipSize {
    ShortestEdge(u32),
    Exact { height: u32, width: u32 },
}

#[derive(Debug, Clone, PartialEq)]
pub struct Clip {
    pub resize: Option<(ClipSize, Filter)>,
    /// `(height, width)`; never larger than the resized image (the config is refused otherwise).
    pub crop: Option<(u32, u32)>,
    pub normalize: Normalize,
    /// The vision tower's patch side (`vision_config.patch_size` of `config.json`).
    pub patch_size: u32,
    pub backend: Backend,
}

impl Clip {
    /// `(height, width)` after the resize.
    fn resized_size(size: ClipSize, height: u32, width: u32) -> (u32, u32) {
        match size {
            ClipSize::Exact { height, width } => (height, width),
            ClipSize::ShortestEdge(edge) => {
                let (short, long) = (height.min(width) as f64, height.max(width) as f64);
                let new_long = (edge as f64 * long / short) as u32;
                if width <= height {
                    (new_long, edge)
                } else {
                    (edge, new_long)
                }
            }
        }
    }

    pub fn process(&self, image: &RgbImage) -> Result<Processed, MediaError> {
        let resized;
        let image = match self.resize {
            Some((size, filter)) => {
                let (height, width) = Self::resized_size(size, image.height, image.width);
                // The shortest edge scaled up can make a thin image enormous (4x804 to 336x67536).
                if width as u64 * height as u64 > limits::image_pixels_max {
                    let detail = format!(
                        "resizing it to {width}x{height} passes the pixel limit of {}",
                        limits::image_pixels_max
                    );
                    return Err(MediaError::Unprocessable { width: image.width, height: image.height, detail });
                }
                resized = resize(image, width, height, filter, self.backend);
                &resized
            }
            None => image,
        };
        let (height, width) = self.crop.unwrap_or((image.height, image.width));
        if height > image.height || width > image.width {
            let detail = format!("smaller than the {width}x{height} crop");
            return Err(MediaError::Unprocessable { width: image.width, height: image.height, detail });
        }
        let (top, left) = ((image.height - height) / 2, (image.width - width) / 2);
        let row = image.width as usize * 3;
        let mut cropped = Vec::with_capacity(height as usize * width as usize * 3);
        for y in top..top + height {
            let at = y as usize * row + left as usize * 3;
            cropped.extend_from_slice(&image.pixels[at..at + width as usize * 3]);
        }
        let cropped = RgbImage { width, height, pixels: cropped };
        let tokens = (height / self.patch_size) as usize * (width / self.patch_size) as usize;
        Ok(Processed {
            shape: vec![3, height as usize, width as usize],
            pixel_values: self.normalize.planes(&cropped, self.backend),
            grid_thw: None,
            tokens,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn shortest_edge_keeps_the_ratio_truncating() {
        // (height, width) -> transformers' get_resize_output_image_size(size=336, default_to_square=False)
        let cases =
            [((480, 640), (336, 448)), ((640, 480), (448, 336)), ((100, 333), (336, 1118)), ((336, 336), (336, 336))];
        for ((h, w), expected) in cases {
            assert_eq!(Clip::resized_size(ClipSize::ShortestEdge(336), h, w), expected, "{h}x{w}");
        }
    }
}
