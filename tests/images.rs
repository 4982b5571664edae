//! Images in chat requests, end to end against the simulator: the gateway fetches, decodes and
//! processes each `image_url` part, expands the model's image token in the prompt and sends
//! the tensors in `mm_features`; the simulator checks every tensor against its shape and every
//! placeholder range against the prompt, and records what it got. Every refusal is a 400
//! naming the part, with a log line, and nothing reaches the engine.

mod common;

use base64::Engine as _;
use common::{Gateway, Options};
use serde_json::{json, Value};

/// The Qwen2-VL model card's processor values, `max_pixels` lowered to 64 merged patches (as
/// the tiny vision model of the real-vLLM tests has them).
const PREPROCESSOR: &str = r#"{"min_pixels": 3136, "max_pixels": 50176, "patch_size": 14,
  "temporal_patch_size": 2, "merge_size": 2, "image_mean": [0.48145466, 0.4578275, 0.40821073],
  "image_std": [0.26862954, 0.26130258, 0.27577711], "image_processor_type": "Qwen2VLImageProcessor"}"#;

/// The demo model (Qwen3's tokenizer, which has Qwen2-VL's vision tokens) with a vision tower
/// named in its config and the processor's config beside it.
fn vision_model() -> std::path::PathBuf {
    vision_model_as("vision", None)
}

/// The same, under `architectures` when given (which decides where vLLM normalises pixels).
fn vision_model_as(name: &str, architecture: Option<&str>) -> std::path::PathBuf {
    let mut config = json!({"vision_config": {"patch_size": 14, "spatial_merge_size": 2}, "image_token_id": 151655});
    if let Some(a) = architecture {
        config["architectures"] = json!([a]);
    }
    let dir = common::model_dir_with(name, &config);
    std::fs::write(dir.join("preprocessor_config.json"), PREPROCESSOR).unwrap();
    dir
}

fn vision_gateway() -> Gateway {
    Gateway::start_with(Options { model_path: Some(vision_model()), ..Default::default() })
}

/// An RGB PNG of `w`×`h` (a gradient).
fn png(w: u32, h: u32) -> Vec<u8> {
    let pixels: Vec<u8> =
        (0..h).flat_map(|y| (0..w).flat_map(move |x| [(x * 255 / w) as u8, (y * 255 / h) as u8, 128])).collect();
    let mut out = Vec::new();
    let mut enc = png::Encoder::new(&mut out, w, h);
    enc.set_color(png::ColorType::Rgb);
    enc.set_depth(png::BitDepth::Eight);
    let mut writer = enc.write_header().unwrap();
    writer.write_image_data(&pixels).unwrap();
    writer.finish().unwrap();
    out
}

fn data_url(media_type: &str, bytes: &[u8]) -> String {
    format!("data:{media_type};base64,{}", base64::engine::general_purpose::STANDARD.encode(bytes))
}

fn image_part(url: &str) -> Value {
    json!({"type": "image_url", "image_url": {"url": url, "detail": "high"}})
}

fn chat(messages: Value) -> Value {
    json!({"model": "test-model", "messages": messages, "max_tokens": 4, "temperature": 0})
}

/// `/tokenize`'s count for chat messages: the prompt the engine gets, placeholders expanded.
fn tokenized_len(g: &Gateway, messages: &Value) -> u64 {
    let r = g.post_json("/tokenize", &json!({"model": "test-model", "messages": messages}));
    assert_eq!(r.status, 200, "{}", r.text());
    let count = r.json()["count"].as_u64().unwrap();
    assert_eq!(r.json()["tokens"].as_array().unwrap().len() as u64, count);
    count
}

/// Image sizes, and the placeholder tokens each costs.
type ImageCase = (&'static [(u32, u32)], &'static [u64]);

#[test]
fn images_expand_their_placeholders_and_reach_the_engine() {
    let g = vision_gateway();
    // (sizes, the placeholder tokens each costs: smart_resize to multiples of 28 within
    // 3136..50176 pixels, then (h/14)·(w/14)/4, worked out by hand).
    let cases: [ImageCase; 3] = [
        (&[(96, 64)], &[6]),                               // 84×56
        (&[(28, 28), (300, 200)], &[4, 54]),               // 56×56 (raised to min_pixels); 252×168 (capped)
        (&[(640, 64), (64, 640), (96, 64)], &[46, 46, 6]), // 644×56, 56×644, 84×56
    ];
    for (sizes, tokens) in cases {
        let mut content: Vec<Value> =
            sizes.iter().map(|&(w, h)| image_part(&data_url("image/png", &png(w, h)))).collect();
        content.push(json!({"type": "text", "text": "Describe."}));
        let messages = json!([{"role": "system", "content": "Be brief."}, {"role": "user", "content": content}]);
        let before = g.adds().len();
        let r = g.post_json("/v1/chat/completions", &chat(messages.clone()));
        assert_eq!(r.status, 200, "{sizes:?}: {}", r.text());
        let prompt_tokens = r.json()["usage"]["prompt_tokens"].as_u64().unwrap();
        assert_eq!(prompt_tokens, tokenized_len(&g, &messages), "{sizes:?}");
        let adds = g.adds();
        assert_eq!(adds.len(), before + 1, "{sizes:?}");
        let add = &adds[before];
        assert_eq!(add["prompt_len"].as_u64(), Some(prompt_tokens), "{sizes:?}");
        let mm = &add["mm"];
        assert_eq!(mm["items"].as_u64(), Some(sizes.len() as u64), "{sizes:?}");
        let lengths: Vec<u64> = mm["ranges"].as_array().unwrap().iter().map(|r| r[1].as_u64().unwrap()).collect();
        assert_eq!(lengths, tokens, "{sizes:?}");
        // Each image's placeholders follow the previous one's <|vision_end|><|vision_start|>.
        let offsets: Vec<u64> = mm["ranges"].as_array().unwrap().iter().map(|r| r[0].as_u64().unwrap()).collect();
        for i in 1..offsets.len() {
            assert_eq!(
                offsets[i],
                offsets[i - 1] + lengths[i - 1] + 3,
                "{sizes:?}: the placeholders are \\n-separated"
            );
        }
        assert_eq!(mm["hashes"].as_array().unwrap().len(), sizes.len());
    }
}

#[test]
fn the_same_image_hashes_the_same_and_a_different_one_differently() {
    let g = vision_gateway();
    let (a, b) = (data_url("image/png", &png(96, 64)), data_url("image/png", &png(64, 96)));
    let content = json!([image_part(&a), image_part(&b), image_part(&a), {"type": "text", "text": "Compare."}]);
    let r = g.post_json("/v1/chat/completions", &chat(json!([{"role": "user", "content": content}])));
    assert_eq!(r.status, 200, "{}", r.text());
    let hashes = g.adds()[0]["mm"]["hashes"].clone();
    assert_eq!(hashes[0], hashes[2]);
    assert_ne!(hashes[0], hashes[1]);
}

/// A PNG signature and an `IHDR` claiming `w`×`h` (its CRC right), no image data.
fn png_header(w: u32, h: u32) -> Vec<u8> {
    let mut bytes = png(1, 1)[..33].to_vec();
    bytes[16..20].copy_from_slice(&w.to_be_bytes());
    bytes[20..24].copy_from_slice(&h.to_be_bytes());
    let crc = crc32(&bytes[12..29]);
    bytes[29..33].copy_from_slice(&crc.to_be_bytes());
    bytes
}

/// PNG's CRC-32 (ISO 3309), bit by bit.
fn crc32(bytes: &[u8]) -> u32 {
    let mut c = !0u32;
    for &b in bytes {
        c ^= u32::from(b);
        for _ in 0..8 {
            c = if c & 1 == 1 { 0xedb8_8320 ^ (c >> 1) } else { c >> 1 };
        }
    }
    !c
}

#[test]
fn every_refused_image_is_a_400_naming_its_part() {
    let g = vision_gateway();
    let ok = image_part(&data_url("image/png", &png(32, 32)));
    let placeholder = "<|vision_start|><|image_pad|><|vision_end|>";
    let cases: Vec<(Value, &str, &str)> = vec![
        (image_part("ftp://example.com/a.png"), "messages[0].content[0].image_url", "scheme 'ftp'"),
        (image_part("data:image/png;base64,@@@"), "messages[0].content[0].image_url", "invalid data URL"),
        (
            image_part(&data_url("text/plain", b"hello")),
            "messages[0].content[0].image_url",
            "not PNG, JPEG, WebP or GIF",
        ),
        (
            image_part(&data_url("image/png", &png_header(8000, 8000))),
            "messages[0].content[0].image_url",
            "more than the limit of 33554432 pixels",
        ),
        (
            image_part(&data_url("image/png", &png(32, 32)[..60])),
            "messages[0].content[0].image_url",
            "cannot be decoded",
        ),
        (image_part(&data_url("image/png", &png(1, 250))), "messages[0].content[0].image_url", "aspect ratio"),
        (image_part(""), "messages[0].content[0].image_url", "the image URL is empty"),
        (json!({"type": "image_url", "image_url": "x"}), "messages[0].content[0].image_url", "a string 'url'"),
        (json!({"type": "image_url"}), "messages[0].content[0].image_url", "a string 'url'"),
    ];
    for (part, at, says) in cases {
        let r = g.post_json("/v1/chat/completions", &chat(json!([{"role": "user", "content": [part]}])));
        assert_eq!(r.status, 400, "{at}: {}", r.text());
        let e = &r.json()["error"];
        assert_eq!(e["param"], at, "{says}: {e}");
        assert!(e["message"].as_str().unwrap().contains(says), "{says}: {e}");
    }
    // A refusal names the part where it is, after good ones.
    let second = json!([{"role": "user", "content": "hi"},
                        {"role": "user", "content": [ok.clone(), image_part("ftp://x/y.png")]}]);
    let r = g.post_json("/v1/chat/completions", &chat(second));
    assert_eq!((r.status, r.json()["error"]["param"].as_str()), (400, Some("messages[1].content[1].image_url")));
    // More placeholders written in the text than images.
    let text = json!({"type": "text", "text": format!("{placeholder} and {placeholder}")});
    let r = g.post_json("/v1/chat/completions", &chat(json!([{"role": "user", "content": [ok, text]}])));
    assert_eq!((r.status, r.json()["error"]["param"].as_str()), (400, Some("messages.[0].content")), "{}", r.text());
    assert!(g.adds().is_empty(), "a refused request reached the engine");
    let logs = g.logs();
    for at in ["messages[0].content[0].image_url: cannot fetch the image", "messages[1].content[1].image_url"] {
        assert!(logs.contains(&format!("image refused: {at}")), "no log line for {at}");
    }
    // The gateway still serves.
    let r = g.post_json("/v1/chat/completions", &chat(json!([{"role": "user", "content": "hi"}])));
    assert_eq!(r.status, 200);
}

#[test]
fn a_model_without_a_vision_tower_refuses_images_naming_the_model() {
    let g = Gateway::start();
    let content = json!([image_part(&data_url("image/png", &png(32, 32))), {"type": "text", "text": "?"}]);
    let r = g.post_json("/v1/chat/completions", &chat(json!([{"role": "user", "content": content}])));
    assert_eq!(r.status, 400);
    let e = &r.json()["error"];
    assert_eq!(e["param"], "messages[0].content[0].image_url");
    assert_eq!(e["message"], "the model 'test-model' does not take images (its config.json has no vision_config)");
}

#[test]
fn messages_image_blocks_take_the_same_path() {
    let g = vision_gateway();
    let data = base64::engine::general_purpose::STANDARD.encode(png(96, 64));
    let image = json!({"type": "image", "source": {"type": "base64", "media_type": "image/png", "data": data}});
    let messages = json!([{"role": "user", "content": [image, {"type": "text", "text": "Describe."}]}]);
    let body = json!({"model": "test-model", "max_tokens": 4, "messages": messages});
    let counted = g.post_json("/v1/messages/count_tokens", &json!({"model": "test-model", "messages": messages}));
    assert_eq!(counted.status, 200, "{}", counted.text());
    let r = g.post_json("/v1/messages", &body);
    assert_eq!(r.status, 200, "{}", r.text());
    // 96×64 → 84×56: 6 placeholder tokens, counted by count_tokens as the engine gets them.
    let input_tokens = r.json()["usage"]["input_tokens"].as_u64().unwrap();
    assert_eq!(input_tokens, counted.json()["input_tokens"].as_u64().unwrap());
    let add = &g.adds()[0];
    assert_eq!((add["mm"]["items"].as_u64(), add["prompt_len"].as_u64()), (Some(1), Some(input_tokens)));
    assert_eq!(add["mm"]["ranges"][0][1], 6);

    let refusals = [
        (json!({"type": "url", "url": "ftp://example.com/a.png"}), "messages.0.content.0.source", "scheme 'ftp'"),
        (
            json!({"type": "base64", "media_type": "image/png", "data": "@@"}),
            "messages.0.content.0.source",
            "invalid data URL",
        ),
        (json!({"type": "file", "file_id": "f"}), "messages.0.content.0.source.type", "'file'"),
    ];
    for (source, at, says) in refusals {
        let messages = json!([{"role": "user", "content": [{"type": "image", "source": source}]}]);
        let r = g.post_json("/v1/messages", &json!({"model": "test-model", "max_tokens": 4, "messages": messages}));
        assert_eq!(r.status, 400, "{at}: {}", r.text());
        let message = r.json()["error"]["message"].as_str().unwrap().to_string();
        assert!(message.starts_with(at) && message.contains(says), "{says}: {message}");
    }
    assert_eq!(g.adds().len(), 1, "a refused request reached the engine");
}

#[test]
fn responses_input_images_take_the_same_path_with_their_history() {
    let g = vision_gateway();
    let url = data_url("image/png", &png(96, 64));
    let turn = |text: &str, url: &str| {
        json!([{"role": "user", "content": [{"type": "input_image", "image_url": url, "detail": "auto"},
                                            {"type": "input_text", "text": text}]}])
    };
    let first = json!({"model": "test-model", "input": turn("Describe.", &url), "max_output_tokens": 4});
    let r = g.post_json("/v1/responses", &first);
    assert_eq!(r.status, 200, "{}", r.text());
    let id = r.json()["id"].as_str().unwrap().to_string();
    let add = &g.adds()[0];
    assert_eq!(add["prompt_len"], r.json()["usage"]["input_tokens"]);
    assert_eq!((add["mm"]["items"].as_u64(), add["mm"]["ranges"][0][1].as_u64()), (Some(1), Some(6)));
    // A continuation carries the stored image before its own (a 28×28 one: 4 tokens).
    let next = json!({"model": "test-model", "previous_response_id": id, "max_output_tokens": 4,
                      "input": turn("And this?", &data_url("image/png", &png(28, 28)))});
    let r = g.post_json("/v1/responses", &next);
    assert_eq!(r.status, 200, "{}", r.text());
    let lengths: Vec<u64> =
        g.adds()[1]["mm"]["ranges"].as_array().unwrap().iter().map(|r| r[1].as_u64().unwrap()).collect();
    assert_eq!(lengths, [6, 4]);

    let by_file = json!([{"role": "user", "content": [{"type": "input_image", "file_id": "file-1"}]}]);
    let bad = json!([{"role": "user", "content": [{"type": "input_image", "image_url": "ftp://x/y.png"}]}]);
    for (input, at) in [(by_file, "input[0].content[0].file_id"), (bad, "input[0].content[0].image_url")] {
        let r = g.post_json("/v1/responses", &json!({"model": "test-model", "input": input}));
        assert_eq!((r.status, r.json()["error"]["param"].as_str()), (400, Some(at)), "{}", r.text());
    }
    assert_eq!(g.adds().len(), 2, "a refused request reached the engine");
}

/// A one-thread HTTP/1.1 server: `/cat.png` is `body`, anything else a 404.
fn serve_png(body: Vec<u8>) -> u16 {
    use std::io::{BufRead, BufReader, Write};
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    std::thread::spawn(move || {
        for stream in listener.incoming().flatten() {
            let mut reader = BufReader::new(stream);
            let mut request_line = String::new();
            if reader.read_line(&mut request_line).is_err() {
                continue;
            }
            let mut line = String::new();
            while reader.read_line(&mut line).is_ok_and(|n| n > 2) {
                line.clear();
            }
            let mut stream = reader.into_inner();
            let head = if request_line.starts_with("GET /cat.png ") {
                format!(
                    "HTTP/1.1 200 OK\r\ncontent-type: image/png\r\ncontent-length: {}\r\nconnection: close\r\n\r\n",
                    body.len()
                )
            } else {
                "HTTP/1.1 404 Not Found\r\ncontent-length: 0\r\nconnection: close\r\n\r\n".to_string()
            };
            let _ = stream.write_all(head.as_bytes());
            if request_line.starts_with("GET /cat.png ") {
                let _ = stream.write_all(&body);
            }
        }
    });
    port
}

/// `http(s)` and `file:` image URLs go through the fetcher under the operator's flags: the
/// bytes behind them are the image (the same hash as the same bytes in a data URL), and each
/// refusal of the policy is a 400 naming the part.
#[test]
fn http_and_file_urls_are_fetched_under_the_operators_flags() {
    let image = png(96, 64);
    let port = serve_png(image.clone());
    let dir = common::test_dir().join("media");
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::write(dir.join("cat.png"), &image).unwrap();
    let args = ["--allowed-local-media-path", dir.to_str().unwrap(), "--allowed-media-domains", "127.0.0.1"];
    let g = Gateway::start_with(Options {
        model_path: Some(vision_model()),
        gateway_args: args.iter().map(|s| s.to_string()).collect(),
        ..Default::default()
    });
    let hash_of = |url: &str| {
        let before = g.adds().len();
        let content = json!([image_part(url), {"type": "text", "text": "Describe."}]);
        let r = g.post_json("/v1/chat/completions", &chat(json!([{"role": "user", "content": content}])));
        assert_eq!(r.status, 200, "{url}: {}", r.text());
        g.adds()[before]["mm"]["hashes"][0].clone()
    };
    let inline = hash_of(&data_url("image/png", &image));
    assert_eq!(hash_of(&format!("http://127.0.0.1:{port}/cat.png")), inline);
    assert_eq!(hash_of(&format!("file://{}", dir.join("cat.png").display())), inline);
    let refused = [
        (format!("http://localhost:{port}/cat.png"), "allowed domains"),
        (format!("http://127.0.0.1:{port}/missing.png"), "HTTP 404"),
        ("file:///etc/passwd".to_string(), "messages[0].content[0].image_url"),
    ];
    for (url, says) in refused {
        let r = g.post_json("/v1/chat/completions", &chat(json!([{"role": "user", "content": [image_part(&url)]}])));
        assert_eq!(r.status, 400, "{url}: {}", r.text());
        let e = &r.json()["error"];
        assert_eq!(e["param"], "messages[0].content[0].image_url", "{url}: {e}");
        assert!(e.to_string().contains(says), "{url}: {says}: {e}");
    }
}

/// vLLM (0.28 on) normalises the Qwen-VL family's pixels on its device by default
/// (`--mm-device-do-normalize`) and then takes them raw, as `uint8`: the gateway sends them so
/// for those architectures, `float32` normalised ones otherwise, and the flag decides where
/// given (it must match the engine's).
#[test]
fn pixels_go_raw_where_the_engine_normalises_them() {
    const QWEN2_VL: Option<&str> = Some("Qwen2VLForConditionalGeneration");
    // (model directory, architecture, flag, bytes per sample); a 96×64 image is 24 rows of 1176
    // samples, and its grid three int64s.
    let cases: [(&str, Option<&str>, Option<&str>, usize); 4] = [
        ("vision-any", None, None, 4),
        ("vision-qwen2", QWEN2_VL, None, 1),
        ("vision-qwen2-off", QWEN2_VL, Some("false"), 4),
        ("vision-any-on", None, Some("true"), 1),
    ];
    for (name, architecture, flag, width) in cases {
        let gateway_args =
            flag.map(|f| vec!["--mm-device-do-normalize".to_string(), f.to_string()]).unwrap_or_default();
        let g = Gateway::start_with(Options {
            model_path: Some(vision_model_as(name, architecture)),
            gateway_args,
            ..Default::default()
        });
        let content = json!([image_part(&data_url("image/png", &png(96, 64))), {"type": "text", "text": "Describe."}]);
        let r = g.post_json("/v1/chat/completions", &chat(json!([{"role": "user", "content": content}])));
        assert_eq!(r.status, 200, "{name}: {}", r.text());
        assert_eq!(g.adds()[0]["mm"]["tensor_bytes"].as_u64(), Some((24 * 1176 * width + 3 * 8) as u64), "{name}");
    }
}

/// LLaVA-1.5's preprocessor values (CLIP's processor: shortest edge 336, centre crop 336).
const LLAVA_PREPROCESSOR: &str = r#"{"crop_size": {"height": 336, "width": 336}, "do_center_crop": true,
  "do_normalize": true, "do_rescale": true, "do_resize": true, "resample": 3, "size": {"shortest_edge": 336},
  "image_mean": [0.48145466, 0.4578275, 0.40821073], "image_std": [0.26862954, 0.26130258, 0.27577711],
  "image_processor_type": "CLIPImageProcessor"}"#;
/// The id the test tokenizer gives LLaVA's `<image>` (one past Qwen3's last added token).
const LLAVA_IMAGE_TOKEN: u64 = 151669;
/// One 336×336 image as `float32` pixel values.
const LLAVA_PIXEL_BYTES: u64 = 3 * 336 * 336 * 4;

/// The demo model as a LLaVA-1.5 (`LlavaForConditionalGeneration`, a CLIP tower of 336-pixel
/// input and 14-pixel patches), `patch` merged into its config, its tokenizer given `<image>`.
fn llava_model(name: &str, patch: Value) -> std::path::PathBuf {
    let mut config = json!({"architectures": ["LlavaForConditionalGeneration"],
                            "vision_config": {"model_type": "clip_vision_model", "image_size": 336, "patch_size": 14},
                            "image_token_index": LLAVA_IMAGE_TOKEN, "vision_feature_select_strategy": "default"});
    for (k, v) in patch.as_object().unwrap() {
        config[k] = v.clone();
    }
    let dir = common::model_dir_with(name, &config);
    let mut tokenizer: Value = serde_json::from_slice(&std::fs::read(dir.join("tokenizer.json")).unwrap()).unwrap();
    tokenizer["added_tokens"].as_array_mut().unwrap().push(json!({"id": LLAVA_IMAGE_TOKEN, "content": "<image>",
        "single_word": false, "lstrip": false, "rstrip": false, "normalized": false, "special": true}));
    std::fs::write(dir.join("tokenizer.json"), tokenizer.to_string()).unwrap();
    std::fs::write(dir.join("preprocessor_config.json"), LLAVA_PREPROCESSOR).unwrap();
    dir
}

/// vLLM's LLaVA gives every image the tower's patch grid, (336 / 14)² = 576 tokens (one more
/// with the `full` strategy, which keeps the class token), whatever the image's size, and sends
/// `pixel_values` as one `(3, 336, 336)` `float32` entry per image, normalised by the gateway
/// even when the flag asks for the device (vLLM's LLaVA never normalises there).
#[test]
fn llava_images_cost_the_towers_grid_and_go_batched() {
    // (model directory, config patch, flag, image sizes, tokens per image)
    type Case = (&'static str, Value, Option<&'static str>, &'static [(u32, u32)], u64);
    let cases: [Case; 4] = [
        ("llava", json!({}), None, &[(96, 64)], 576),
        ("llava-many", json!({}), None, &[(64, 96), (336, 336), (500, 20)], 576),
        ("llava-full", json!({"vision_feature_select_strategy": "full"}), None, &[(120, 90)], 577),
        ("llava-flag", json!({}), Some("true"), &[(200, 300), (96, 64)], 576),
    ];
    for (name, patch, flag, sizes, tokens) in cases {
        let gateway_args =
            flag.map(|f| vec!["--mm-device-do-normalize".to_string(), f.to_string()]).unwrap_or_default();
        let g = Gateway::start_with(Options {
            model_path: Some(llava_model(name, patch)),
            gateway_args,
            ..Default::default()
        });
        let mut content: Vec<Value> = sizes
            .iter()
            .enumerate()
            .map(|(i, &(w, h))| image_part(&data_url("image/png", &png(w + i as u32, h))))
            .collect();
        content.push(json!({"type": "text", "text": "Describe."}));
        let messages = json!([{"role": "user", "content": content}]);
        let r = g.post_json("/v1/chat/completions", &chat(messages.clone()));
        assert_eq!(r.status, 200, "{name}: {}", r.text());
        let n = sizes.len() as u64;
        let prompt_tokens = r.json()["usage"]["prompt_tokens"].as_u64().unwrap();
        assert_eq!(prompt_tokens, tokenized_len(&g, &messages), "{name}: /tokenize counts the expanded placeholders");
        let add = &g.adds()[0];
        let mm = &add["mm"];
        assert_eq!((mm["items"].as_u64(), add["prompt_len"].as_u64()), (Some(n), Some(prompt_tokens)), "{name}");
        assert_eq!(mm["tensor_bytes"].as_u64(), Some(n * LLAVA_PIXEL_BYTES), "{name}");
        let ranges: Vec<(u64, u64)> =
            mm["ranges"].as_array().unwrap().iter().map(|r| (r[0].as_u64().unwrap(), r[1].as_u64().unwrap())).collect();
        for (i, &(offset, length)) in ranges.iter().enumerate() {
            assert_eq!(length, tokens, "{name}: image {i}");
            // `<image>\n<image>`: each image's tokens one newline after the previous one's.
            if i > 0 {
                assert_eq!(offset, ranges[i - 1].0 + tokens + 1, "{name}: image {i}");
            }
        }
    }
}

/// A CLIP processor serves only a LLaVA with a CLIP tower whose input is the crop; anything
/// else is a model that takes no images, said in the 400 naming the model.
#[test]
fn clip_models_outside_llava_15_take_no_images() {
    let cases = [
        ("llava-other-arch", json!({"architectures": ["CLIPModel"]}), "CLIP's for LlavaForConditionalGeneration"),
        (
            "llava-siglip",
            json!({"vision_config": {"model_type": "siglip_vision_model", "image_size": 336, "patch_size": 14}}),
            "siglip_vision_model",
        ),
        (
            "llava-224",
            json!({"vision_config": {"model_type": "clip_vision_model", "image_size": 224, "patch_size": 14}}),
            "does not crop to the vision tower's 224x224",
        ),
        ("llava-class", json!({"vision_feature_select_strategy": "class"}), "\"class\" is not default or full"),
    ];
    for (name, patch, says) in cases {
        let g = Gateway::start_with(Options { model_path: Some(llava_model(name, patch)), ..Default::default() });
        let content = json!([image_part(&data_url("image/png", &png(32, 32))), {"type": "text", "text": "?"}]);
        let r = g.post_json("/v1/chat/completions", &chat(json!([{"role": "user", "content": content}])));
        assert_eq!(r.status, 400, "{name}: {}", r.text());
        let e = &r.json()["error"];
        assert_eq!(e["param"], "messages[0].content[0].image_url", "{name}");
        let message = e["message"].as_str().unwrap();
        assert!(
            message.starts_with("the model 'test-model' does not take images (") && message.contains(says),
            "{name}: {message}"
        );
        assert!(g.adds().is_empty(), "{name}: a refused request reached the engine");
    }
}

/// A template in the Qwen-VL templates' style that reads `content` as a list of parts (vLLM's
/// "openai" content format): each image part's placeholder where the part is.
const LIST_TEMPLATE: &str = "{% for message in messages %}<|im_start|>{{ message.role }}\n\
    {% if message.content is string %}{{ message.content }}{% else %}{% for part in message.content %}\
    {% if part.type == 'image' %}<|vision_start|><|image_pad|><|vision_end|>\
    {% elif part.type == 'text' %}{{ part.text }}{% endif %}{% endfor %}{% endif %}<|im_end|>\n{% endfor %}\
    <|im_start|>assistant\n";

#[test]
fn a_list_template_places_each_image_where_its_part_is_unless_told_string() {
    const IMAGE_PAD: u64 = 151655;
    let template = std::env::temp_dir().join(format!("sg-list-template-{}.jinja", std::process::id()));
    std::fs::write(&template, LIST_TEMPLATE).unwrap();
    let url = data_url("image/png", &png(96, 64));
    let content = json!([{"type": "text", "text": "Before"}, image_part(&url), {"type": "text", "text": "Between"},
                         image_part(&url)]);
    let messages = json!([{"role": "user", "content": content}]);
    // (--chat-template-content-format, the user turn's text before the first image, between the
    // two): detected, the parts in order; as strings, the placeholders in front, then the texts.
    let cases = [
        (None, "user\nBefore", "Between"),
        (Some("openai"), "user\nBefore", "Between"),
        (Some("string"), "user\n", "\n"),
    ];
    for (format, before, between) in cases {
        let mut gateway_args = vec!["--chat-template".to_string(), template.display().to_string()];
        if let Some(f) = format {
            gateway_args.extend(["--chat-template-content-format".to_string(), f.to_string()]);
        }
        let g = Gateway::start_with(Options { model_path: Some(vision_model()), gateway_args, ..Default::default() });
        let r = g.post_json("/tokenize", &json!({"model": "test-model", "messages": messages}));
        assert_eq!(r.status, 200, "{format:?}: {}", r.text());
        let tokens: Vec<u64> = r.json()["tokens"].as_array().unwrap().iter().map(|t| t.as_u64().unwrap()).collect();
        // The two runs of image tokens (6 each: 96×64 → 84×56) and the text around them.
        let first = tokens.iter().position(|&t| t == IMAGE_PAD).unwrap();
        let first_end = first + tokens[first..].iter().take_while(|&&t| t == IMAGE_PAD).count();
        let second = first_end + tokens[first_end..].iter().position(|&t| t == IMAGE_PAD).unwrap();
        assert_eq!((first_end - first, tokens[second..].iter().take_while(|&&t| t == IMAGE_PAD).count()), (6, 6));
        let text = |ids: &[u64]| {
            let r = g.post_json("/detokenize", &json!({"model": "test-model", "tokens": ids}));
            r.json()["prompt"].as_str().unwrap().to_string()
        };
        assert!(text(&tokens[..first]).ends_with(before), "{format:?}: {:?}", text(&tokens[..first]));
        assert_eq!(text(&tokens[first_end..second]), between, "{format:?}");
        let r = g.post_json("/v1/chat/completions", &chat(messages.clone()));
        assert_eq!(r.json()["usage"]["prompt_tokens"].as_u64(), Some(tokens.len() as u64), "{format:?}");
    }
}

#[test]
fn tokenize_and_count_tokens_refuse_an_image_as_chat_does() {
    let g = vision_gateway();
    let bad = json!({"type": "image_url", "image_url": {"url": "ftp://example.com/a.png"}});
    let chat_messages = json!([{"role": "user", "content": [{"type": "text", "text": "?"}, bad]}]);
    let source = json!({"type": "url", "url": "ftp://example.com/a.png"});
    let messages = json!([{"role": "user", "content": [{"type": "image", "source": source}]}]);
    let cases = [
        ("/tokenize", json!({"model": "test-model", "messages": chat_messages}), "messages[0].content[1].image_url"),
        (
            "/v1/messages/count_tokens",
            json!({"model": "test-model", "messages": messages}),
            "messages.0.content.0.source",
        ),
    ];
    for (path, body, at) in cases {
        let r = g.post_json(path, &body);
        assert_eq!(r.status, 400, "{path}: {}", r.text());
        let message = r.json()["error"]["message"].as_str().unwrap().to_string();
        assert!(message.contains(at) && message.contains("scheme 'ftp'"), "{path}: {message}");
        assert!(g.logs().contains(&format!("image refused: {at}")), "{path}: no log line");
    }
}

// Messages and Responses under either content format: the Anthropic and Responses adapters
// hand the template each message's parts as vLLM's chat path would, so the engine gets what
// the equivalent chat request gives it.

/// The (prompt length, placeholder ranges) of the engine request a POST made.
fn engine_view(g: &Gateway, path: &str, body: &Value) -> (Value, Value) {
    let before = g.adds().len();
    let r = g.post_json(path, body);
    assert_eq!(r.status, 200, "{path}: {}", r.text());
    let adds = g.adds();
    assert_eq!(adds.len(), before + 1, "{path}");
    (adds[before]["prompt_len"].clone(), adds[before]["mm"]["ranges"].clone())
}

#[test]
fn messages_and_responses_place_images_as_chat_does_in_either_content_format() {
    let template = std::env::temp_dir().join(format!("sg-list-template-apis-{}.jinja", std::process::id()));
    std::fs::write(&template, LIST_TEMPLATE).unwrap();
    let (a, b) = (data_url("image/png", &png(96, 64)), data_url("image/png", &png(28, 28)));
    let block = |url: &str| {
        let data = url.split_once(',').unwrap().1;
        json!({"type": "image", "source": {"type": "base64", "media_type": "image/png", "data": data}})
    };
    let input_image = |url: &str| json!({"type": "input_image", "image_url": url, "detail": "low"});
    let text = |t: &str| json!({"type": "text", "text": t});
    let input_text = |t: &str| json!({"type": "input_text", "text": t});
    let call = json!({"id": "c1", "type": "function", "function": {"name": "camera", "arguments": "{}"}});
    let messages = |m: Value| json!({"model": "test-model", "max_tokens": 4, "messages": m});
    let responses = |input: Value| json!({"model": "test-model", "max_output_tokens": 4, "input": input});
    // (the chat messages, the same conversation on the other route): interleaved text and
    // images; a tool result's image (Messages: a user message after the tool's, before the
    // turn's own content whatever the block order); a call's output holding an image.
    let cases = [
        (
            json!([{"role": "user", "content": [text("Before"), image_part(&a), text("Between"), image_part(&b)]}]),
            (
                "/v1/messages",
                messages(json!([{"role": "user", "content": [text("Before"), block(&a), text("Between"), block(&b)]}])),
            ),
        ),
        (
            json!([{"role": "user", "content": [text("Before"), image_part(&a), text("Between"), image_part(&b)]}]),
            (
                "/v1/responses",
                responses(json!([{"role": "user", "content": [input_text("Before"), input_image(&a),
                                                                            input_text("Between"), input_image(&b)]}])),
            ),
        ),
        (
            json!([{"role": "user", "content": "Take it."}, {"role": "assistant", "content": null, "tool_calls": [call]},
                   {"role": "tool", "tool_call_id": "c1", "content": "Here:"}, {"role": "user", "content": [image_part(&a)]},
                   {"role": "user", "content": [text("What is it?"), image_part(&b)]}]),
            (
                "/v1/messages",
                messages(json!([
                {"role": "user", "content": "Take it."},
                {"role": "assistant", "content": [{"type": "tool_use", "id": "c1", "name": "camera", "input": {}}]},
                {"role": "user", "content": [text("What is it?"),
                    {"type": "tool_result", "tool_use_id": "c1", "content": [text("Here:"), block(&a)]}, block(&b)]}])),
            ),
        ),
        (
            json!([{"role": "user", "content": "Take it."}, {"role": "assistant", "content": null, "tool_calls": [call]},
                   {"role": "tool", "tool_call_id": "c1", "content": [text("Here:"), image_part(&a)]},
                   {"role": "user", "content": [image_part(&b), text("What is it?")]}]),
            (
                "/v1/responses",
                responses(json!([
                {"role": "user", "content": "Take it."},
                {"type": "function_call", "call_id": "c1", "name": "camera", "arguments": "{}"},
                {"type": "function_call_output", "call_id": "c1", "output": [input_text("Here:"), input_image(&a)]},
                {"role": "user", "content": [input_image(&b), input_text("What is it?")]}])),
            ),
        ),
    ];
    // The template's format as detected (the list), then forced to strings.
    let mut interleaved = Vec::new();
    for format in [None, Some("string")] {
        let mut gateway_args = vec!["--chat-template".to_string(), template.display().to_string()];
        if let Some(f) = format {
            gateway_args.extend(["--chat-template-content-format".to_string(), f.to_string()]);
        }
        let g = Gateway::start_with(Options { model_path: Some(vision_model()), gateway_args, ..Default::default() });
        for (chat_messages, (path, body)) in &cases {
            let want = engine_view(&g, "/v1/chat/completions", &chat(chat_messages.clone()));
            assert_eq!(engine_view(&g, path, body), want, "{format:?}: {path} {chat_messages}");
        }
        interleaved.push(engine_view(&g, cases[0].1 .0, &cases[0].1 .1));
    }
    // In the list format the first image follows "Before"; as strings both go in front.
    assert_ne!(interleaved[0].1, interleaved[1].1, "the content format changed nothing");
}
