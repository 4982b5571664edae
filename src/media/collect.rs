//! An adapter's image parts → `MediaItem`s, and the text the chat template sees in their place.
//! vLLM hands a template that reads `content` as a string each message's text parts joined with
//! newlines, the model's placeholder (Qwen2-VL: `<|vision_start|><|image_pad|><|vision_end|>`)
//! in front once per image the text does not already place itself, joined by a newline
//! (`vllm/renderers/chat_utils.py`, `_get_full_multimodal_text_prompt`). A template that reads
//! `content` as a list of parts (vLLM's "openai" format) gets the parts in order instead, an
//! image as `{"type": "image"}`, and places the image where the part is.

use serde_json::{json, Value};
use shardgate_text::template::content_format::ContentFormat;

use super::refusal;
use super::vision::VisionSupport;
use crate::error::ApiError;

/// One content part of a message, as the template will see it: text, or an image's or a
/// video's placeholder (from [`Collector::image`], [`Collector::video`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Part<'a> {
    Text(&'a str),
    Image(&'static str),
    Video(&'static str),
}

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

    /// A message's parts as vLLM hands them to a template reading content in `format`: the
    /// string below, or the list of parts (`{"type": "text", "text": ...}`, `{"type":
    /// "image"}`, `{"type": "video"}`) in the client's order.
    pub fn content(parts: &[Part<'_>], separator: &str, at: &str, format: ContentFormat) -> Result<Value, ApiError> {
        if format == ContentFormat::OpenAi {
            let list = parts.iter().map(|p| match p {
                Part::Text(text) => json!({"type": "text", "text": text}),
                Part::Image(_) => json!({"type": "image"}),
                Part::Video(_) => json!({"type": "video"}),
            });
            return Ok(Value::Array(list.collect()));
        }
        let texts: Vec<&str> =
            parts.iter().filter_map(|p| if let Part::Text(t) = p { Some(*t) } else { None }).collect();
        let placeholders: Vec<&'static str> = parts
            .iter()
            .filter_map(|p| match p {
                Part::Image(placeholder) | Part::Video(placeholder) => Some(*placeholder),
                Part::Text(_) => None,
            })
            .collect();
        Collector::message_text(&texts, separator, &placeholders, at).map(Value::String)
    }

    /// A string content as vLLM's chat path hands it to a template reading `format`: itself,
    /// or one text part.
    pub fn text(text: &str, format: ContentFormat) -> Value {
        match format {
            ContentFormat::String => Value::String(text.to_string()),
            ContentFormat::OpenAi => json!([{"type": "text", "text": text}]),
        }
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
    fn parts_in_each_format() {
        let parts = [Part::Text("a"), Part::Image(P), Part::Text("b"), Part::Image(P)];
        let cases = [
            (ContentFormat::String, json!(format!("{P}\n{P}\na\nb"))),
            (
                ContentFormat::OpenAi,
                json!([{"type": "text", "text": "a"}, {"type": "image"}, {"type": "text", "text": "b"}, {"type": "image"}]),
            ),
        ];
        for (format, want) in cases {
            assert_eq!(Collector::content(&parts, "\n", "messages[0].content", format).unwrap(), want, "{format:?}");
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
