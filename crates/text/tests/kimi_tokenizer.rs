//! Kimi's tokenizer (a tiktoken vocabulary file, no `tokenizer.json`) against Python
//! `tiktoken` with the checkpoints' pattern and special tokens (`goldens/kimi_tokenizer.json`,
//! made by `tools/goldens/kimi_tokenizer.py`): a model directory holding `tiktoken.model` and
//! `tokenizer_config.json` loads, every golden text encodes to the golden ids (through the fast
//! encoder and through `tokenizers`) and decodes back, and the configured special tokens are
//! the special ids.

use std::path::{Path, PathBuf};
use std::process::Command;

use serde_json::{json, Value};

use shardgate_text::model::{ModelAssets, ModelSource};
use shardgate_text::tokenizer::tiktoken_file;

/// The checkpoints' `tiktoken.model`, fetched on first use.
fn vocab() -> PathBuf {
    let repo = Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
    let out = Command::new(repo.join("tools/kimi/fetch-vocab.sh")).output().expect("run tools/kimi/fetch-vocab.sh");
    assert!(out.status.success(), "fetch-vocab.sh: {}", String::from_utf8_lossy(&out.stderr));
    PathBuf::from(String::from_utf8_lossy(&out.stdout).trim())
}

#[test]
fn kimi_tiktoken_vocabulary_encodes_as_tiktoken_does() {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/goldens/kimi_tokenizer.json");
    let golden: Value = serde_json::from_slice(&std::fs::read(path).expect("golden file")).expect("golden JSON");
    let named = golden["named_special_tokens"].as_object().expect("named special tokens");
    let decoder: serde_json::Map<String, Value> =
        named.iter().map(|(id, text)| (id.clone(), json!({"content": text, "special": true}))).collect();
    let dir = std::env::temp_dir().join(format!("sg-kimi-tokenizer-{}", std::process::id()));
    std::fs::create_dir_all(&dir).expect("model dir");
    std::fs::copy(vocab(), dir.join("tiktoken.model")).expect("copy the vocabulary");
    let config = json!({"tokenizer_class": "TikTokenTokenizer", "bos_token": "[BOS]", "eos_token": "[EOS]",
                        "added_tokens_decoder": decoder});
    std::fs::write(dir.join("tokenizer_config.json"), config.to_string()).expect("tokenizer_config.json");
    let source = ModelSource {
        model_path: dir.clone(),
        tokenizer_path: None,
        chat_template: None,
        served_name: "kimi".into(),
        use_generation_config: false,
    };
    let model = ModelAssets::load(&source).expect("a model directory with tiktoken.model loads");
    // `tokenizers` on the same vocabulary: the gateway drops its own copy after load.
    let ranks = std::fs::read_to_string(dir.join("tiktoken.model")).expect("the vocabulary");
    let named_tokens = tiktoken_file::named_special_tokens(&config);
    let json =
        tiktoken_file::tokenizer_json(&ranks, tiktoken_file::KIMI_PATTERN, &named_tokens).expect("tokenizer.json");
    let reference = tokenizers::Tokenizer::from_bytes(&json).expect("tokenizers loads it");
    std::fs::remove_dir_all(&dir).ok();
    let tokenizer = &model.tokenizer;
    assert_eq!(model.eos_token_id, Some(163585));
    assert_eq!(tokenizer.vocab_size(), 163840);
    assert_eq!(tokenizer.token_to_id("<|reserved_token_163700|>"), Some(163700));
    for (id, text) in named {
        let id: u32 = id.parse().expect("an id");
        assert!(tokenizer.is_special(id), "{id} {text}");
        assert_eq!(tokenizer.token_to_id(text.as_str().expect("text")), Some(id));
    }
    assert!(tokenizer.fast_encode_active(false) && tokenizer.fast_decode_active());
    let cases = golden["cases"].as_array().expect("cases");
    assert!(cases.len() >= 50, "{} cases", cases.len());
    let mut failed = Vec::new();
    for case in cases {
        let text = case["text"].as_str().expect("text");
        let want: Vec<u32> = serde_json::from_value(case["ids"].clone()).expect("ids");
        let got = tokenizer.encode(text, false).expect("encode");
        // The fast encoder serves this shape; `tokenizers` must agree with it too.
        let slow = reference.encode_fast(text, false).expect("encode").get_ids().to_vec();
        let back = tokenizer.decode(&want, false).expect("decode");
        if got != want || slow != want || back != text {
            failed.push(format!("{text:?}: ids {got:?} (tokenizers {slow:?}) want {want:?}; decoded {back:?}"));
        }
    }
    assert!(failed.is_empty(), "{} of {} differ:\n{}", failed.len(), cases.len(), failed.join("\n"));
}
