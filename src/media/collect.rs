//! An adapter's image parts → `MediaItem`s, and the text the chat template sees in their place.
//! vLLM hands a template that reads `content` as a string each message's text parts joined with
//! newlines, the model's placeholder (Qwen2-VL: `<|vision_start|><|image_pad|><|vision_end|>`)
//! in front once per image the text does not already place itself, joined by a newline
//! (`vllm/renderers/chat_utils.py`, `_get_full_multimodal_text_prompt`).

use super::refusal;
use super::vision::VisionSupport;
use crate::error::ApiError;

/// One image or video of a request: where to get it, and the path naming its part in the
/// request (`messages[1].content[0].image_url`), for every refusal about it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MediaItem {
    pub at: String,
    /// A `data:` or `http(s)` URL (an inline base64 source is given as a `data:` URL).
    pub url: String,
    pub kind: MediaKind,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum MediaKind {
    Image,
    Video,
}

/// The images of one request, in prompt order.
pub struct Collector<'a> {
    vision: &'a VisionSupport,
    model: &'a str,
    pub items: Vec<MediaItem>,
}

impl<'a> Collector<'a> {
    pub fn new(vision: &'a VisionSupport, model: &'a str) -> Collector<'a> {
        Collector { vision, model, items: Vec::new() }
    }

    /// Takes an image part; its placeholder text, or the 400 for a model that takes no images.
    pub fn image(&mut self, at: String, url: &str) -> Result<&'static str, ApiError> {
        let vision = match self.vision {
            Ok(v) => v,
            Err(why) => return Err(refusal::no_vision(&at, self.model, why)),
        };
        if url.is_empty() {
            return Err(refusal::item(&at, "the image URL is empty"));
        }
        self.items.push(MediaItem { at, url: url.to_string(), kind: MediaKind::Image });
        Ok(vision.placeholder)
    }

    /// Takes a video part; its placeholder text, or the 400 for a model that takes no videos.
    pub fn video(&mut self, at: String, url: &str) -> Result<&'static str, ApiError> {
        let vision = match self.vision {
            Ok(v) => v,
            Err(why) => return Err(refusal::no_vision(&at, self.model, why)),
        };
        if vision.video.is_none() {
            return Err(refusal::no_video(&at));
        }
        if url.is_empty() {
            return Err(refusal::item(&at, "the video URL is empty"));
        }
        self.items.push(MediaItem { at, url: url.to_string(), kind: MediaKind::Video });
        Ok(super::video_support::QWEN_VIDEO_PLACEHOLDER)
    }

    /// A message's content as vLLM gives it to a string-content template: the texts joined by
    /// `separator`, each of `images` placeholders the text does not place itself in front.
    pub fn message_text(
        texts: &[&str],
        separator: &str,
        images: &[&'static str],
        at: &str,
    ) -> Result<String, ApiError> {
        let text = texts.join(separator);
        let Some(&placeholder) = images.first() else {
            return Ok(text);
        };
        let written = text.matches(placeholder).count();
        let Some(missing) = images.len().checked_sub(written) else {
            return Err(ApiError::invalid_param(
                at,
                format!("Found more '{placeholder}' placeholders in input prompt than actual multimodal data items."),
            ));
        };
        let mut parts = vec![placeholder; missing];
        if !text.is_empty() {
            parts.push(&text);
        }
        Ok(parts.join("\n"))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const P: &str = "<|vision_start|><|image_pad|><|vision_end|>";

    #[test]
    fn placeholders_go_in_front_unless_the_text_places_them() {
        let cases: [(&[&str], usize, &str); 5] = [
            (&["What is this?"], 1, "<|vision_start|><|image_pad|><|vision_end|>\nWhat is this?"),
            (
                &["a", "b"],
                2,
                "<|vision_start|><|image_pad|><|vision_end|>\n<|vision_start|><|image_pad|><|vision_end|>\na\nb",
            ),
            (&[], 1, "<|vision_start|><|image_pad|><|vision_end|>"),
            (
                &["x <|vision_start|><|image_pad|><|vision_end|> y"],
                1,
                "x <|vision_start|><|image_pad|><|vision_end|> y",
            ),
            (&["plain"], 0, "plain"),
        ];
        for (texts, images, expected) in cases {
            let got = Collector::message_text(texts, "\n", &vec![P; images], "messages[0].content").unwrap();
            assert_eq!(got, expected, "{texts:?} with {images} images");
        }
    }

    #[test]
    fn more_written_placeholders_than_images_is_refused() {
        let text = format!("{P}{P}");
        let e = Collector::message_text(&[&text], "\n", &[P], "messages[0].content").unwrap_err();
        assert_eq!((e.status, e.param.as_deref()), (400, Some("messages[0].content")));
        assert!(e.message.starts_with("Found more"), "{}", e.message);
    }
}
