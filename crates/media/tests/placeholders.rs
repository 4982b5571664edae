//! Placeholder expansion against the values vLLM's own prompt-update code computes
//! (`tests/goldens/placeholders.json`, written by tools/goldens/placeholders.py).

use serde_json::Value;
use shardgate_media::placeholders::{expand, PlaceholderRange, Replacement};
use shardgate_media::MediaError;

fn ids(value: &Value) -> Vec<u32> {
    value.as_array().expect("ids").iter().map(|v| v.as_u64().expect("id") as u32).collect()
}

#[test]
fn expansion_matches_vllm() {
    let text = include_str!("goldens/placeholders.json");
    let goldens: Value = serde_json::from_str(text).expect("goldens");
    let cases = goldens["cases"].as_array().expect("cases");
    for case in cases {
        let name = case["name"].as_str().expect("name");
        let sequences: Vec<Option<Vec<u32>>> = case["replacements"]
            .as_array()
            .expect("replacements")
            .iter()
            .map(|r| r.is_array().then(|| ids(r)))
            .collect();
        let replacements: Vec<Replacement<'_>> = case["replacements"]
            .as_array()
            .expect("replacements")
            .iter()
            .zip(&sequences)
            .map(|(r, sequence)| match sequence {
                Some(tokens) => Replacement::Tokens(tokens),
                None => Replacement::Copies(r.as_u64().expect("count") as usize),
            })
            .collect();
        let got = expand(&ids(&case["prompt"]), case["placeholder"].as_u64().expect("token") as u32, &replacements);
        match case.get("ranges") {
            Some(ranges) => {
                let (expanded, got_ranges) = got.unwrap_or_else(|e| panic!("{name}: {e}"));
                assert_eq!(expanded, ids(&case["ids"]), "{name}");
                let ranges: Vec<PlaceholderRange> = ranges
                    .as_array()
                    .expect("ranges")
                    .iter()
                    .map(|r| PlaceholderRange {
                        offset: r[0].as_u64().expect("offset") as usize,
                        length: r[1].as_u64().expect("length") as usize,
                        is_embed: r[2].as_array().map(|mask| mask.iter().map(|b| b == 1).collect()),
                    })
                    .collect();
                assert_eq!(got_ranges, ranges, "{name}");
            }
            None => {
                assert!(matches!(got, Err(MediaError::Placeholders { .. })), "{name}: vLLM refuses, we gave {got:?}")
            }
        }
    }
    assert!(cases.len() >= 12);
}
