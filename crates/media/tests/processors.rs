//! The processors without the Hugging Face goldens: which config gives which processor, each
//! config refusal, and grids and placeholder counts for sizes whose reference values are
//! written next to them (transformers' `smart_resize` and CLIP's patch count).

use shardgate_media::processor::{Clip, Qwen3VlVideo, QwenVl, VideoProcessor};
use shardgate_media::{Backend, ImageProcessor, MediaError, RgbImage};

fn config(name: &str) -> String {
    let path = format!("{}/tests/configs/{name}", env!("CARGO_MANIFEST_DIR"));
    std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{path}: {e}"))
}

fn qwen(name: &str) -> QwenVl {
    match ImageProcessor::from_configs(&config(name), None) {
        Ok(ImageProcessor::QwenVl(p)) => p,
        other => panic!("{name}: {other:?}"),
    }
}

fn clip() -> Clip {
    match ImageProcessor::from_configs(&config("llava-1.5.json"), Some(&config("llava-1.5.config.json"))) {
        Ok(ImageProcessor::Clip(p)) => p,
        other => panic!("llava: {other:?}"),
    }
}

#[test]
fn configs_choose_the_processor_and_its_values() {
    // (config, patch, min pixels, max pixels)
    let cases = [
        ("qwen2-vl.json", 14, 3136, 12845056),
        ("qwen2.5-vl.json", 14, 3136, 12845056),
        ("qwen2-vl-capped.json", 14, 3136, 1003520),
        ("qwen3-vl.json", 16, 65536, 16777216),
    ];
    for (name, patch, min, max) in cases {
        let p = qwen(name);
        assert_eq!((p.patch_size, p.merge_size, p.temporal_patch_size), (patch, 2, 2), "{name}");
        assert_eq!((p.min_pixels, p.max_pixels), (min, max), "{name}");
        // What vLLM runs (transformers 5 with torchvision installed).
        assert_eq!(p.backend, Backend::Torchvision, "{name}");
    }
    let c = clip();
    assert_eq!((c.crop, c.patch_size), (Some((336, 336)), 14));
}

#[test]
fn config_refusals() {
    let qwen = config("qwen2-vl.json");
    let with = |key: &str, value: &str| {
        let mut map: serde_json::Map<String, serde_json::Value> = serde_json::from_str(&qwen).expect("qwen");
        map.insert(key.to_string(), serde_json::from_str(value).expect("value"));
        serde_json::to_string(&map).expect("json")
    };
    let cases = [
        ("not JSON", "{".to_string(), "preprocessor_config.json: EOF"),
        ("not an object", "[]".to_string(), "not a JSON object"),
        ("no type", "{}".to_string(), "no `image_processor_type`"),
        (
            "unknown type",
            with("image_processor_type", "\"SiglipImageProcessor\""),
            "`SiglipImageProcessor` is not a supported",
        ),
        ("patch zero", with("patch_size", "0"), "`patch_size` is 0"),
        ("patch huge", with("patch_size", "100000"), "`patch_size` is 100000"),
        ("std zero", with("image_std", "[0.5, 0, 0.5]"), "`image_std` has a zero"),
        ("mean of two", with("image_mean", "[0.5, 0.5]"), "`image_mean` is [0.5,0.5]"),
        ("lanczos", with("resample", "1"), "`resample` 1 is not"),
        ("min below a block", with("min_pixels", "100"), "pixel bounds 100..12845056"),
        ("max below min", with("max_pixels", "1000"), "pixel bounds 3136..1000"),
    ];
    for (name, text, expected) in cases {
        let error = ImageProcessor::from_configs(&text, None).expect_err(name).to_string();
        assert!(error.contains(expected), "{name}: {error}");
    }
    let mut llava: serde_json::Value = serde_json::from_str(&config("llava-1.5.json")).expect("llava");
    llava["crop_size"] = serde_json::json!({"height": 400, "width": 400});
    let error = ImageProcessor::from_configs(&llava.to_string(), None).expect_err("crop").to_string();
    assert!(error.contains("the 400x400 crop is larger than the 336 shortest edge"), "{error}");
}

#[test]
fn grids_and_placeholder_counts() {
    // (config, height, width, image_grid_thw from transformers, tokens = t*h*w / merge^2)
    let cases = [
        ("qwen2-vl.json", 1080, 1920, [1, 78, 138], 2691),
        ("qwen2-vl.json", 10, 10, [1, 4, 4], 4),
        ("qwen2-vl-capped.json", 3000, 2000, [1, 86, 58], 1247),
        ("qwen3-vl.json", 500, 375, [1, 32, 24], 192),
    ];
    for (name, height, width, grid, tokens) in cases {
        let p = qwen(name);
        assert_eq!(p.grid_thw(height, width).expect("grid"), grid, "{name} {height}x{width}");
        let image = RgbImage { width, height, pixels: vec![128; (width * height * 3) as usize] };
        let out = p.process(&image).expect("process");
        assert_eq!((out.grid_thw, out.tokens), (Some(grid), tokens), "{name} {height}x{width}");
        let patch = p.patch_size as usize;
        assert_eq!(out.shape, [(grid[1] * grid[2]) as usize, 3 * 2 * patch * patch]);
    }
    let out = clip().process(&RgbImage { width: 640, height: 480, pixels: vec![7; 640 * 480 * 3] }).expect("clip");
    assert_eq!((out.shape, out.grid_thw, out.tokens), (vec![3, 336, 336], None, 576));
}

#[test]
fn images_a_processor_refuses() {
    let thin = |width: u32, height: u32| RgbImage { width, height, pixels: vec![0; (width * height * 3) as usize] };
    let cases: [(ImageProcessor, RgbImage, &str); 3] = [
        (ImageProcessor::QwenVl(qwen("qwen2-vl.json")), thin(1, 201), "absolute aspect ratio must be smaller than 200"),
        (
            ImageProcessor::QwenVl(qwen("qwen3-vl.json")),
            thin(1000, 2),
            "absolute aspect ratio must be smaller than 200",
        ),
        (ImageProcessor::Clip(clip()), thin(1, 1000), "resizing it to 336x336000 passes the pixel limit"),
    ];
    for (processor, image, expected) in cases {
        let error = processor.process(&image).expect_err(expected);
        assert!(matches!(error, MediaError::AspectRatio { .. } | MediaError::Unprocessable { .. }));
        assert!(error.to_string().contains(expected), "{error}");
    }
}

#[test]
fn video_configs_and_refusals() {
    let video = match VideoProcessor::from_config(&config("qwen2-vl.video.json")) {
        Ok(VideoProcessor::Qwen2Vl(p)) => p,
        other => panic!("{other:?}"),
    };
    // Qwen2VLVideoProcessor's own `size` default, not the image processor's.
    assert_eq!((video.min_pixels, video.max_pixels, video.temporal_patch_size), (128 * 28 * 28, 28 * 28 * 768, 2));
    let configs = [
        ("{}", "no `video_processor_type`"),
        (r#"{"video_processor_type": "Glm4vVideoProcessor"}"#, "`Glm4vVideoProcessor` is not a supported video"),
        (
            r#"{"video_processor_type": "Qwen3VLVideoProcessor", "size": {"shortest_edge": 0}}"#,
            "`size.shortest_edge` is 0",
        ),
        (r#"{"video_processor_type": "Qwen2VLVideoProcessor", "merge_size": 0}"#, "`merge_size` is 0"),
    ];
    for (text, expected) in configs {
        let error = VideoProcessor::from_config(text).expect_err(expected).to_string();
        assert!(error.contains(expected), "{error}");
    }
    let frame = |width: u32, height: u32| RgbImage { width, height, pixels: vec![9; (width * height * 3) as usize] };
    let clips: [(Vec<RgbImage>, &str); 3] = [
        (vec![], "a video needs a frame"),
        (vec![frame(64, 48), frame(64, 48), frame(48, 64)], "a frame of the same video is 48x64"),
        (vec![frame(1, 300)], "absolute aspect ratio must be smaller than 200"),
    ];
    for (frames, expected) in clips {
        let error = video.process_video(&frames).expect_err(expected).to_string();
        assert!(error.contains(expected), "{error}");
    }
    // Three frames: the last is repeated to make two temporal groups.
    let out = video.process_video(&[frame(64, 48), frame(64, 48), frame(64, 48)]).expect("video");
    assert_eq!((out.grid_thw, out.tokens), (Some([2, 20, 28]), 280));
}

/// With its normalisation off, a processor gives the resized samples themselves (what an engine
/// normalising on its device takes as `uint8`): exact integers, each the normalised value's
/// sample (`(x / 255 - mean) / std` in its channel).
#[test]
fn without_normalize_gives_the_samples_the_normalised_values_come_from() {
    let (width, height) = (97u32, 61u32);
    let pixels = (0..width * height * 3).map(|i| (i * 7 % 251) as u8).collect();
    let image = RgbImage { width, height, pixels };
    for name in ["qwen2-vl.json", "qwen3-vl.json"] {
        let normalised = ImageProcessor::QwenVl(qwen(name));
        let raw = normalised.clone().without_normalize();
        let (n, r) = (normalised.process(&image).expect(name), raw.process(&image).expect(name));
        assert_eq!((n.shape.clone(), n.grid_thw), (r.shape.clone(), r.grid_thw), "{name}");
        let p = qwen(name);
        let (mean, std) = p.normalize.mean_std.expect(name);
        let per_channel = (p.temporal_patch_size * p.patch_size * p.patch_size) as usize;
        for (i, (&x, &y)) in r.pixel_values.iter().zip(&n.pixel_values).enumerate() {
            assert!(x.fract() == 0.0 && (0.0..=255.0).contains(&x), "{name}: sample {i} is {x}");
            let c = i % (3 * per_channel) / per_channel;
            let expected = (x / 255.0 - mean[c]) / std[c];
            assert!((expected - y).abs() < 1e-5, "{name}: sample {i}: {x} normalises to {expected}, not {y}");
        }
    }
}

fn qwen3_video(name: &str) -> Qwen3VlVideo {
    qwen3_video_from(&config(name))
}

#[test]
fn qwen3_vl_video_sizes_and_refusals() {
    // Qwen3VLVideoProcessor's class defaults: patch 16, bounds on frames x pixels, mean/std 0.5.
    let defaults = qwen3_video_from(r#"{"video_processor_type": "Qwen3VLVideoProcessorFast"}"#);
    let p = &defaults.frames;
    assert_eq!((p.patch_size, p.min_pixels, p.max_pixels), (16, 128 * 32 * 32, 32 * 32 * 768));
    assert_eq!(p.normalize.mean_std, Some(([0.5; 3], [0.5; 3])));
    // Top-level pixel keys are Qwen2-VL's: Qwen3-VL's video processor reads only `size`.
    let keys = qwen3_video_from(r#"{"video_processor_type": "Qwen3VLVideoProcessor", "max_pixels": 9999999}"#);
    assert_eq!(keys.frames.max_pixels, 32 * 32 * 768);
    // (config, frames, height, width) -> transformers' video smart_resize
    let cases = [
        ("qwen3-vl.video.json", 4, 48, 64, (64, 64)),
        ("qwen3-vl.video.json", 8, 1080, 1920, (1088, 1920)),
        ("qwen3-vl-capped.video.json", 7, 100, 300, (64, 224)),
        ("qwen3-vl-capped.video.json", 2, 10, 10, (64, 64)),
        ("qwen3-vl-capped.video.json", 3, 20, 3000, (32, 2560)),
    ];
    for (name, frames, height, width, expected) in cases {
        assert_eq!(
            qwen3_video(name).target_size(frames, height, width).unwrap(),
            expected,
            "{name} {frames}x{height}x{width}"
        );
    }
    assert_eq!(defaults.target_size(5, 48, 64).unwrap(), (160, 192));
    let frame = |width: u32, height: u32| RgbImage { width, height, pixels: vec![9; (width * height * 3) as usize] };
    let clips: [(Vec<RgbImage>, &str); 3] = [
        (vec![frame(64, 48)], "a clip of 1 frames is shorter than the 2 of one temporal patch"),
        (vec![frame(2, 500), frame(2, 500)], "absolute aspect ratio must be smaller than 200"),
        (vec![frame(64, 48), frame(48, 64)], "a frame of the same video is 48x64"),
    ];
    for (frames, expected) in clips {
        let error = defaults.process_video(&frames).expect_err(expected).to_string();
        assert!(error.contains(expected), "{error}");
    }
    // Three frames (a 3x192x256 clip within the bounds): the last is repeated to make two
    // temporal groups of 6x8 merged patches.
    let out = defaults.process_video(&[frame(64, 48), frame(64, 48), frame(64, 48)]).expect("video");
    assert_eq!((out.grid_thw, out.tokens), (Some([2, 12, 16]), 96));
}

fn qwen3_video_from(text: &str) -> Qwen3VlVideo {
    match VideoProcessor::from_config(text) {
        Ok(VideoProcessor::Qwen3Vl(p)) => p,
        other => panic!("{text}: {other:?}"),
    }
}
