//! Videos in chat requests, end to end against the simulator: the gateway fetches each
//! `video_url` part, decodes the frames vLLM's `qwen2_vl` loader samples (2 per second),
//! processes them with Qwen2-VL's video processor, expands the video token and sends
//! `pixel_values_videos` and `video_grid_thw` in `mm_features`; the simulator checks every
//! tensor against its shape and every range against the prompt. Refusals are 400s naming the
//! part, with a log line, and nothing reaches the engine. The videos are made at test time.

mod common;

#[path = "../crates/media/tests/support/mp4_writer.rs"]
mod mp4_writer;

use base64::Engine as _;
use common::{Gateway, Options};
use mp4_writer::{make, Spec};
use serde_json::{json, Value};

/// Qwen2-VL's processor values with `max_pixels` lowered to 64 merged patches, as the tiny
/// vision model of the real-vLLM tests has them (its video processor falls back to them).
const PREPROCESSOR: &str = r#"{"min_pixels": 3136, "max_pixels": 50176, "patch_size": 14,
  "temporal_patch_size": 2, "merge_size": 2, "image_mean": [0.48145466, 0.4578275, 0.40821073],
  "image_std": [0.26862954, 0.26130258, 0.27577711], "image_processor_type": "Qwen2VLImageProcessor"}"#;

/// The demo model with a Qwen-VL vision tower of `architecture`.
fn gateway(name: &str, architecture: &str) -> Gateway {
    let config = json!({"vision_config": {"patch_size": 14, "spatial_merge_size": 2}, "image_token_id": 151655,
                        "video_token_id": 151656, "architectures": [architecture]});
    let dir = common::model_dir_with(name, &config);
    std::fs::write(dir.join("preprocessor_config.json"), PREPROCESSOR).unwrap();
    Gateway::start_with(Options { model_path: Some(dir), ..Default::default() })
}

fn video_part(bytes: &[u8]) -> Value {
    let url = format!("data:video/mp4;base64,{}", base64::engine::general_purpose::STANDARD.encode(bytes));
    json!({"type": "video_url", "video_url": {"url": url}})
}

fn chat(content: Value) -> Value {
    json!({"model": "test-model", "messages": [{"role": "user", "content": content}], "max_tokens": 4, "temperature": 0})
}

#[test]
fn videos_expand_their_placeholders_and_reach_the_engine() {
    let g = gateway("video", "Qwen2VLForConditionalGeneration");
    // (width, height, frames, fps) -> placeholder tokens, worked out by hand: frames sampled
    // at 2 fps, at least 4, floored to pairs (grid_t); smart_resize to multiples of 28 within
    // 3136..50176 pixels; grid_t * (h/14) * (w/14) / 4.
    let cases = [
        ((64, 48, 20, 10), 8),     // 4 frames -> t 2; 56x56
        ((100, 60, 9, 4), 16),     // 4.5 -> 4 frames; 112x56
        ((320, 240, 31, 30), 108), // 2.07 -> 4 frames; 252x168 (capped)
        ((64, 48, 60, 10), 24),    // 12 frames -> t 6; 56x56
    ];
    for ((w, h, frames, fps), tokens) in cases {
        let video = make(&Spec::h264(w, h, frames, fps));
        let content = json!([video_part(&video), {"type": "text", "text": "What happens?"}]);
        let before = g.adds().len();
        let r = g.post_json("/v1/chat/completions", &chat(content.clone()));
        assert_eq!(r.status, 200, "{w}x{h}x{frames}: {}", r.text());
        let prompt_tokens = r.json()["usage"]["prompt_tokens"].as_u64().unwrap();
        let counted = g.post_json(
            "/tokenize",
            &json!({"model": "test-model", "messages": [{"role": "user", "content": content}]}),
        );
        // /tokenize processes the video as chat does: the same expanded count.
        assert_eq!(prompt_tokens, counted.json()["count"].as_u64().unwrap(), "{w}x{h}x{frames}");
        let add = &g.adds()[before];
        let mm = &add["mm"];
        assert_eq!(mm["ranges"][0][1].as_u64(), Some(tokens), "{w}x{h}x{frames}");
        assert_eq!(mm["modalities"], json!(["video"]));
        assert_eq!(mm["keys"], json!([["pixel_values_videos", "video_grid_thw"]]));
        // Raw uint8 pixels (the engine normalises on its device): rows of 3·2·14·14 bytes.
        let rows = tokens * 4;
        assert_eq!(mm["tensor_bytes"].as_u64(), Some(rows * 1176 + 24), "{w}x{h}x{frames}");
    }
}

#[test]
fn qwen2_5_vl_videos_carry_their_seconds_per_grid() {
    let g = gateway("video25", "Qwen2_5_VLForConditionalGeneration");
    let r = g.post_json("/v1/chat/completions", &chat(json!([video_part(&make(&Spec::h264(64, 48, 20, 10)))])));
    assert_eq!(r.status, 200, "{}", r.text());
    let mm = &g.adds()[0]["mm"];
    assert_eq!(mm["keys"], json!([["pixel_values_videos", "video_grid_thw", "second_per_grid_ts"]]));
}

#[test]
fn the_same_video_hashes_the_same_and_a_different_one_differently() {
    let g = gateway("videohash", "Qwen2VLForConditionalGeneration");
    let (a, b) = (make(&Spec::h264(64, 48, 8, 4)), make(&Spec::h264(64, 48, 10, 4)));
    let content = json!([video_part(&a), video_part(&b), video_part(&a)]);
    let r = g.post_json("/v1/chat/completions", &chat(content));
    assert_eq!(r.status, 200, "{}", r.text());
    let hashes = g.adds()[0]["mm"]["hashes"].clone();
    assert_eq!(hashes[0], hashes[2]);
    assert_ne!(hashes[0], hashes[1]);
}

#[test]
fn every_refused_video_is_a_400_naming_its_part() {
    let g = gateway("videorefuse", "Qwen2VLForConditionalGeneration");
    let webm = [&[0x1a, 0x45, 0xdf, 0xa3][..], &[0; 60]].concat();
    let hevc = make(&Spec { fourcc: *b"hvc1", ..Spec::h264(64, 48, 4, 4) });
    let good = make(&Spec::h264(64, 48, 8, 4));
    let at = "messages[0].content[0].video_url";
    let cases: Vec<(Value, &str, &str)> = vec![
        (video_part(&webm), at, "the video is WebM / Matroska; only MP4 (ISO-BMFF) with H.264 is decoded"),
        (video_part(&hevc), at, "the video's codec is 'hvc1'; only H.264 ('avc1') is decoded"),
        (video_part(&good[..good.len() - 40]), at, "the video cannot be decoded"),
        (video_part(&make(&Spec::h264(64, 48, 1, 4))), at, "the video's frames cannot be processed"),
        (json!({"type": "video_url", "video_url": {"url": "ftp://x/y.mp4"}}), at, "scheme 'ftp'"),
        (json!({"type": "video_url", "video_url": "x"}), at, "a string 'url'"),
        (json!({"type": "video_url", "video_url": {"url": ""}}), at, "the video URL is empty"),
        (
            json!([video_part(&good), {"type": "image_url", "image_url": {"url": "data:image/png;base64,AA"}}]),
            "messages",
            "the vLLM ZMQ backend takes one modality per request (this one has images and videos)",
        ),
    ];
    for (part, at, says) in cases {
        let content = if part.is_array() { part } else { json!([part]) };
        let r = g.post_json("/v1/chat/completions", &chat(content));
        assert_eq!(r.status, 400, "{says}: {}", r.text());
        let e = &r.json()["error"];
        assert_eq!(e["param"], at, "{says}: {e}");
        assert!(e["message"].as_str().unwrap().contains(says), "{says}: {e}");
    }
    assert!(g.adds().is_empty(), "a refused request reached the engine");
    assert!(g.logs().contains(&format!("video refused: {at}: the video is WebM")), "no log line");
    let r = g.post_json("/v1/chat/completions", &chat(json!([video_part(&good)])));
    assert_eq!(r.status, 200, "the gateway still serves: {}", r.text());
}

#[test]
fn a_model_without_a_vision_tower_refuses_videos_naming_the_model() {
    let g = Gateway::start();
    let r = g.post_json("/v1/chat/completions", &chat(json!([video_part(&make(&Spec::h264(64, 48, 4, 4)))])));
    assert_eq!(r.status, 400);
    let e = &r.json()["error"];
    assert_eq!(e["param"], "messages[0].content[0].video_url");
    assert!(e["message"].as_str().unwrap().starts_with("the model 'test-model' does not take images"), "{e}");
}

// Qwen3-VL: vLLM's `qwen3_vl` loader samples evenly from the first frame to the last, the
// video processor bounds the whole clip, and each frame group is announced by its time.

/// The tiny Qwen3-VL model's processor values (tools/real-vllm/make_qwen3_vl_model.py).
const QWEN3_PREPROCESSOR: &str = r#"{"size": {"shortest_edge": 4096, "longest_edge": 65536}, "patch_size": 16,
  "temporal_patch_size": 2, "merge_size": 2, "image_mean": [0.5, 0.5, 0.5], "image_std": [0.5, 0.5, 0.5],
  "image_processor_type": "Qwen2VLImageProcessorFast"}"#;
const QWEN3_VIDEO_PREPROCESSOR: &str = r#"{"size": {"shortest_edge": 4096, "longest_edge": 131072},
  "patch_size": 16, "temporal_patch_size": 2, "merge_size": 2, "image_mean": [0.5, 0.5, 0.5],
  "image_std": [0.5, 0.5, 0.5], "video_processor_type": "Qwen3VLVideoProcessor"}"#;
const VISION_START: u64 = 151652;
const VISION_END: u64 = 151653;
const VIDEO_PAD: u64 = 151656;

fn qwen3_gateway(name: &str) -> Gateway {
    let config = json!({"vision_config": {"patch_size": 16, "spatial_merge_size": 2}, "image_token_id": 151655,
                        "video_token_id": VIDEO_PAD, "vision_start_token_id": VISION_START,
                        "vision_end_token_id": VISION_END, "architectures": ["Qwen3VLForConditionalGeneration"]});
    let dir = common::model_dir_with(name, &config);
    std::fs::write(dir.join("preprocessor_config.json"), QWEN3_PREPROCESSOR).unwrap();
    std::fs::write(dir.join("video_preprocessor_config.json"), QWEN3_VIDEO_PREPROCESSOR).unwrap();
    Gateway::start_with(Options { model_path: Some(dir), ..Default::default() })
}

fn ids(v: &Value) -> Vec<u64> {
    v.as_array().unwrap().iter().map(|t| t.as_u64().unwrap()).collect()
}

#[test]
fn qwen3_vl_videos_announce_each_frame_group_by_its_time() {
    let g = qwen3_gateway("video3");
    // (width, height, frames, fps) -> each frame group's time and tokens, worked out by hand:
    // int(frames / fps * 2) frames (at least 4), at linspace(0, frames - 1).round(); the time
    // of a group the mean of its two frames'; the clip's frames x height x width within
    // 4096..131072 in multiples of 32; (h/16) * (w/16) / 4 tokens a group.
    // ((width, height, frames, fps), each group's time, video tokens a group)
    type Case<'a> = ((usize, usize, usize, u32), &'a [&'a str], u64);
    let cases: [Case<'_>; 4] = [
        // [0, 6, 13, 19] at 10 fps; 4x48x64 -> 64x64
        ((64, 48, 20, 10), &["<0.3 seconds>", "<1.6 seconds>"], 4),
        // [0, 3, 5, 8] at 4 fps; 4x60x100 -> 64x96
        ((100, 60, 9, 4), &["<0.4 seconds>", "<1.6 seconds>"], 6),
        // 8 frames [0, 3, 5, 8, 11, 14, 16, 19] at 5 fps; 8x64x128 -> 64x128
        ((128, 64, 20, 5), &["<0.3 seconds>", "<1.3 seconds>", "<2.5 seconds>", "<3.5 seconds>"], 8),
        // 5 frames [0, 6, 12, 18, 24] at 10 fps, the last group padded; 5x240x320 -> 128x160
        ((320, 240, 25, 10), &["<0.3 seconds>", "<1.5 seconds>", "<2.4 seconds>"], 20),
    ];
    for ((w, h, frames, fps), times, per_group) in cases {
        let video = make(&Spec::h264(w, h, frames, fps));
        let content = json!([video_part(&video), {"type": "text", "text": "What happens?"}]);
        let before = g.adds().len();
        let r = g.post_json("/v1/chat/completions", &chat(content.clone()));
        assert_eq!(r.status, 200, "{w}x{h}x{frames}: {}", r.text());
        let counted = g.post_json(
            "/tokenize",
            &json!({"model": "test-model", "messages": [{"role": "user", "content": content}]}),
        );
        let prompt = ids(&counted.json()["tokens"]);
        let usage = r.json()["usage"]["prompt_tokens"].as_u64().unwrap();
        assert_eq!(usage, prompt.len() as u64, "{w}x{h}x{frames}: /tokenize expands as chat does");
        // The replacement: per group its time's tokens (encoded alone), <|vision_start|>, the
        // group's video tokens, <|vision_end|>.
        let mut replacement = Vec::new();
        for time in times {
            let stamp =
                g.post_json("/tokenize", &json!({"model": "test-model", "prompt": time, "add_special_tokens": false}));
            replacement.extend(ids(&stamp.json()["tokens"]));
            replacement.push(VISION_START);
            replacement.extend(std::iter::repeat_n(VIDEO_PAD, per_group as usize));
            replacement.push(VISION_END);
        }
        let mm = &g.adds()[before]["mm"];
        let (offset, length) = (mm["ranges"][0][0].as_u64().unwrap() as usize, mm["ranges"][0][1].as_u64().unwrap());
        assert_eq!(length, replacement.len() as u64, "{w}x{h}x{frames}");
        assert_eq!(prompt[offset..offset + replacement.len()], replacement[..], "{w}x{h}x{frames}");
        // The outer markers of the placeholder stay around the replacement, as vLLM leaves them.
        assert_eq!((prompt[offset - 1], prompt[offset + replacement.len()]), (VISION_START, VISION_END));
        assert_eq!(mm["embed_tokens"].as_u64(), Some(per_group * times.len() as u64), "{w}x{h}x{frames}");
        assert_eq!(mm["keys"], json!([["pixel_values_videos", "video_grid_thw", "timestamps"]]));
    }
}

#[test]
fn qwen3_vl_video_refusals_are_400s_naming_their_part() {
    let g = qwen3_gateway("video3refuse");
    let at = "messages[0].content[0].video_url";
    let cases: [(Vec<u8>, &str); 3] = [
        // One frame: fewer than the two of one temporal patch (transformers' ValueError).
        (make(&Spec::h264(64, 48, 1, 4)), "a clip of 1 frames is shorter than the 2 of one temporal patch"),
        (make(&Spec::h264(16, 16 * 220, 4, 4)), "absolute aspect ratio must be smaller than 200"),
        (vec![0; 64], "the video"),
    ];
    for (video, says) in cases {
        let r = g.post_json("/v1/chat/completions", &chat(json!([video_part(&video)])));
        assert_eq!(r.status, 400, "{says}: {}", r.text());
        let e = &r.json()["error"];
        assert_eq!(e["param"], at, "{says}: {e}");
        assert!(e["message"].as_str().unwrap().contains(says), "{says}: {e}");
    }
    assert!(g.adds().is_empty(), "a refused request reached the engine");
    assert!(g.logs().contains(&format!("video refused: {at}: the video's frames cannot be processed")), "no log line");
}
