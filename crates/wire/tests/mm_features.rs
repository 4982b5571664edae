//! `mm_features` against vLLM's own encoder: `tools/goldens/mm_features.py` built each request
//! with vLLM's structs (Qwen2-VL's field factory, for images and Qwen3-VL videos, LLaVA's field
//! config) and `MsgpackEncoder`;
//! here the same request is encoded by the codec and every frame compared.

use std::rc::Rc;
use std::sync::Arc;

use serde_json::Value;
use shardgate_wire::mm::{Feature, Field, FieldData, Layout, Modality, Tensor};
use shardgate_wire::vllm::request::encode_add;
use shardgate_wire::{EngineRequest, SamplingParams};

const GOLDENS: &str = include_str!("goldens/mm_features.json");
/// Qwen2-VL's patch row: channels × temporal patch × patch².
const ROW: u64 = 3 * 2 * 14 * 14;
const MERGE: u64 = 2;
/// LLaVA-1.5's image token.
const LLAVA_IMAGE: u32 = 32000;
/// Qwen3-VL's patch row: channels × temporal patch × patch².
const VIDEO_ROW: u64 = 3 * 2 * 16 * 16;

/// The pattern both sides compute exactly, over `n` elements.
fn pattern(n: u64) -> Vec<f32> {
    (0..n).map(|i| (i % 251) as f32 * 0.25).collect()
}

fn pixels(rows: u64) -> Vec<f32> {
    pattern(rows * ROW)
}

fn ints(v: &Value) -> Vec<u64> {
    v.as_array().unwrap().iter().map(|x| x.as_u64().unwrap()).collect()
}

/// The features of one case as the gateway builds them: each image's rows of the request's
/// concatenated `pixel_values` and its grid.
fn features(grids: &[Vec<u64>], prompt: &[u32], hashes: &[&str]) -> Vec<Feature> {
    let rows: Vec<u64> = grids.iter().map(|g| g.iter().product()).collect();
    let all = pixels(rows.iter().sum());
    let mut slices = Vec::new();
    let mut start = 0;
    for &n in &rows {
        slices.push((start, start + n));
        start += n;
    }
    let pad = 151655;
    let mut offsets = (0..prompt.len()).filter(|&i| prompt[i] == pad && (i == 0 || prompt[i - 1] != pad));
    grids
        .iter()
        .enumerate()
        .map(|(i, g)| {
            let (a, b) = slices[i];
            let pixel_values = Field {
                key: "pixel_values",
                data: Tensor::f32(vec![b - a, ROW], &all[(a * ROW) as usize..(b * ROW) as usize]).into(),
                layout: Layout::Flat { slices: slices.clone(), dim: 0 },
                keep_on_cpu: false,
            };
            let grid = g.iter().map(|&x| x as i64).collect::<Vec<_>>();
            let image_grid_thw = Field {
                key: "image_grid_thw",
                data: Tensor::i64(vec![3], &grid).into(),
                layout: Layout::Batched,
                keep_on_cpu: true,
            };
            Feature {
                modality: Modality::Image,
                fields: Some(Arc::from([pixel_values, image_grid_thw])),
                hash: hashes[i].to_string(),
                offset: offsets.next().unwrap() as u32,
                length: (rows[i] / MERGE / MERGE) as u32,
                is_embed: None,
            }
        })
        .collect()
}

/// The features of a LLaVA case: each image its own `(3, height, width)` entry of the batch.
fn llava_features(case: &Value, prompt: &[u32], hashes: &[&str]) -> Vec<Feature> {
    let (images, shape, tokens) =
        (case["images"].as_u64().unwrap(), ints(&case["shape"]), case["tokens"].as_u64().unwrap());
    let size: u64 = shape.iter().product();
    let all = pattern(images * size);
    let mut offsets =
        (0..prompt.len()).filter(|&i| prompt[i] == LLAVA_IMAGE && (i == 0 || prompt[i - 1] != LLAVA_IMAGE));
    (0..images as usize)
        .map(|i| {
            let data = Tensor::f32(shape.clone(), &all[i * size as usize..(i + 1) * size as usize]);
            let pixel_values =
                Field { key: "pixel_values", data: data.into(), layout: Layout::Batched, keep_on_cpu: false };
            Feature {
                modality: Modality::Image,
                fields: Some(Arc::from([pixel_values])),
                hash: hashes[i].to_string(),
                offset: offsets.next().unwrap() as u32,
                length: tokens as u32,
                is_embed: None,
            }
        })
        .collect()
}

/// The feature of a Qwen3-VL video case: raw `uint8` rows, the grid, the timestamps as a list
/// of floats and the range's `is_embed` mask.
fn video_features(case: &Value, hashes: &[&str]) -> Vec<Feature> {
    let grid = ints(&case["grid"]);
    let rows: u64 = grid.iter().product();
    let pixels = Tensor::u8(vec![rows, VIDEO_ROW], (0..rows * VIDEO_ROW).map(|i| (i % 251) as u8));
    let timestamps: Vec<f64> = case["timestamps"].as_array().unwrap().iter().map(|t| t.as_f64().unwrap()).collect();
    let mask: Vec<bool> = ints(&case["is_embed"]).into_iter().map(|b| b == 1).collect();
    let batched = |key, data| Field { key, data, layout: Layout::Batched, keep_on_cpu: true };
    let fields = [
        Field {
            key: "pixel_values_videos",
            data: pixels.into(),
            layout: Layout::Flat { slices: vec![(0, rows)], dim: 0 },
            keep_on_cpu: false,
        },
        batched("video_grid_thw", Tensor::i64(vec![3], &grid.iter().map(|&g| g as i64).collect::<Vec<_>>()).into()),
        batched("timestamps", FieldData::Floats(timestamps.into())),
    ];
    vec![Feature {
        modality: Modality::Video,
        fields: Some(Arc::from(fields)),
        hash: hashes[0].to_string(),
        offset: case["offset"].as_u64().unwrap() as u32,
        length: mask.len() as u32,
        is_embed: Some(Tensor::bool(&mask)),
    }]
}

#[test]
fn mm_features_are_the_bytes_vllm_encodes() {
    let goldens: Value = serde_json::from_str(GOLDENS).unwrap();
    let cases = goldens["cases"].as_array().unwrap();
    assert_eq!(cases.len(), 8);
    for case in cases {
        let name = case["name"].as_str().unwrap();
        let prompt: Vec<u32> = ints(&case["prompt"]).into_iter().map(|t| t as u32).collect();
        let hashes: Vec<&str> = case["mm_hashes"].as_array().unwrap().iter().map(|h| h.as_str().unwrap()).collect();
        let req = EngineRequest {
            request_id: "mm-1".into(),
            mm_features: match case["family"].as_str() {
                Some("llava") => llava_features(case, &prompt, &hashes),
                Some("qwen3-vl-video") => video_features(case, &hashes),
                _ => {
                    let grids: Vec<Vec<u64>> = case["grids"].as_array().unwrap().iter().map(ints).collect();
                    features(&grids, &prompt, &hashes)
                }
            }
            .into(),
            prompt_token_ids: Rc::from(prompt),
            sampling: SamplingParams { temperature: 0.0, max_tokens: 4, ..Default::default() },
            arrival_time: 1700000000.5,
            cache_salt: None,
            priority: 0,
        };
        let (mut main, mut aux) = (Vec::new(), Vec::new());
        encode_add(&req, 0, &mut main, &mut aux);
        assert_eq!(hex(&main), case["main"].as_str().unwrap(), "{name}: main frame");
        let want = case["aux"].as_array().unwrap();
        assert_eq!(aux.len(), want.len(), "{name}: aux frames");
        for (i, (frame, w)) in aux.iter().zip(want).enumerate() {
            assert_eq!(frame.len() as u64, w["bytes"].as_u64().unwrap(), "{name}: aux frame {}", i + 1);
            // Zero-copy: the frame is the tensor's own buffer, not a copy of it.
            let FieldData::Tensor(tensor) = &req.mm_features[i].fields.as_ref().unwrap()[0].data else {
                panic!("{name}: the first field is a tensor")
            };
            assert!(Arc::ptr_eq(frame, &tensor.data), "{name}: aux frame {} is a copy", i + 1);
        }
    }
}

#[test]
fn a_text_request_has_nil_mm_features_and_no_aux_frame() {
    let req = EngineRequest {
        request_id: "t".into(),
        prompt_token_ids: Rc::from(vec![1u32]),
        sampling: SamplingParams::default(),
        arrival_time: 0.0,
        cache_salt: None,
        priority: 0,
        mm_features: Rc::from([]),
    };
    let (mut main, mut aux) = (Vec::new(), Vec::new());
    encode_add(&req, 0, &mut main, &mut aux);
    // [0] request_id "t", [1] [1], [2] nil
    assert_eq!(&main[..8], &[0xdc, 0x00, 0x16, 0xa1, b't', 0x91, 0x01, 0xc0]);
    assert!(aux.is_empty());
}

fn hex(b: &[u8]) -> String {
    b.iter().map(|x| format!("{x:02x}")).collect()
}
