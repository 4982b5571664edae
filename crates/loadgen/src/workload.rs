//! The prompts of a run and the exact bytes of each request, all prepared before the clock
//! starts so that sending costs the client one buffer copy. Datasets: `random` (token ids of
//! the tokenizer, exact input lengths), `prefix` (groups sharing a random prefix), `sharegpt`
//! (first human turn of each conversation) and `jsonl` (`{"prompt", "output_tokens"}` lines).

use std::path::Path;

use rand::rngs::SmallRng;
use rand::seq::SliceRandom;
use rand::{Rng, SeedableRng};
use serde::Deserialize;
use serde_json::{json, Map, Value};

use super::args::{Backend, BenchArgs, BenchConfig, DatasetName};
use super::error::WorkloadError;
use super::tokenizer::BenchTokenizer;
use crate::limits;

#[derive(Clone, Debug, PartialEq)]
pub enum PromptInput {
    Text(String),
    TokenIds(Vec<u32>),
}

#[derive(Clone, Debug, PartialEq)]
pub struct Prompt {
    pub input: PromptInput,
    /// Tokens of the prompt by the client's tokenizer (chat templates add to it server-side).
    pub input_tokens: u32,
    /// `max_tokens` of the request.
    pub output_tokens: u32,
}

pub fn build_prompts(args: &BenchArgs, tok: &BenchTokenizer) -> Result<Vec<Prompt>, WorkloadError> {
    let mut rng = SmallRng::seed_from_u64(args.seed);
    let prompts = match args.dataset_name {
        DatasetName::Random => {
            let lens = RandomLens { prefix: args.random_prefix_len, groups: 1, ..RandomLens::of(args) };
            random_prompts(args, tok, &mut rng, lens)
        }
        DatasetName::Prefix => {
            let lens = RandomLens {
                prefix: args.prefix_len,
                groups: args.prefix_group_count,
                input: args.prefix_repetition_suffix_len.unwrap_or(args.random_input_len),
                output: args.prefix_repetition_output_len.unwrap_or(args.random_output_len),
            };
            random_prompts(args, tok, &mut rng, lens)
        }
        DatasetName::Sharegpt => sharegpt_prompts(args, tok, &mut rng)?,
        DatasetName::Jsonl => jsonl_prompts(args, tok)?,
    };
    if prompts.is_empty() {
        return Err(WorkloadError::NoPrompts);
    }
    Ok(prompts)
}

/// A length drawn uniformly from [len·(1−r), len·(1+r)], at least 1.
fn sample_len(rng: &mut SmallRng, len: usize, ratio: f64) -> usize {
    let low = (len as f64 * (1.0 - ratio)).floor() as usize;
    let high = (len as f64 * (1.0 + ratio)).ceil() as usize;
    rng.random_range(low..=high.max(low)).max(1)
}

/// The lengths of random prompts: `groups` prefixes of `prefix` tokens, then a random part
/// around `input` tokens; `output` tokens asked for.
struct RandomLens {
    prefix: usize,
    groups: usize,
    input: usize,
    output: usize,
}

impl RandomLens {
    fn of(args: &BenchArgs) -> RandomLens {
        RandomLens { prefix: 0, groups: 0, input: args.random_input_len, output: args.random_output_len }
    }
}

/// Random prompts; with a prefix, prompt i starts with the prefix of group i mod groups.
fn random_prompts(args: &BenchArgs, tok: &BenchTokenizer, rng: &mut SmallRng, lens: RandomLens) -> Vec<Prompt> {
    let prefix_len = lens.prefix;
    let groups = if prefix_len > 0 { lens.groups.max(1) } else { 0 };
    let prefixes: Vec<Vec<u32>> = (0..groups)
        .map(|_| {
            let start = tok.random_ids(rng, prefix_len);
            tok.text_of_len(start, prefix_len, rng).1
        })
        .collect();
    (0..args.num_prompts)
        .map(|i| {
            let suffix_len = sample_len(rng, lens.input, args.random_range_ratio.input);
            let output_tokens = sample_len(rng, lens.output, args.random_range_ratio.output);
            let mut ids = prefixes.get(i % groups.max(1)).cloned().unwrap_or_default();
            let target = ids.len() + suffix_len;
            ids.extend(tok.random_ids(rng, suffix_len));
            let (input, input_tokens) = if args.prompt_token_ids {
                (PromptInput::TokenIds(ids), target)
            } else {
                let (text, encoded) = tok.text_of_len(ids, target, rng);
                (PromptInput::Text(text), encoded.len())
            };
            Prompt { input, input_tokens: count_u32(input_tokens), output_tokens: count_u32(output_tokens) }
        })
        .collect()
}

#[derive(Deserialize)]
struct Conversation {
    #[serde(default)]
    conversations: Vec<Turn>,
}

#[derive(Deserialize)]
struct Turn {
    #[serde(default)]
    value: String,
}

fn sharegpt_prompts(args: &BenchArgs, tok: &BenchTokenizer, rng: &mut SmallRng) -> Result<Vec<Prompt>, WorkloadError> {
    let path = args.dataset_path.as_deref().unwrap_or(Path::new(""));
    let text = read_dataset(path)?;
    let mut all: Vec<Conversation> =
        serde_json::from_str(&text).map_err(|source| WorkloadError::ShareGpt { path: path.to_path_buf(), source })?;
    all.retain(|c| c.conversations.len() >= 2);
    if !args.disable_shuffle {
        all.shuffle(rng);
    }
    let mut prompts = Vec::new();
    for c in &all {
        if prompts.len() == args.num_prompts {
            break;
        }
        let prompt = &c.conversations[0].value;
        let input_tokens = tok.count(prompt);
        let fixed = args.sharegpt_output_len;
        let output_tokens = fixed.unwrap_or_else(|| tok.count(&c.conversations[1].value));
        let too_short = input_tokens < limits::sharegpt_tokens_min
            || (fixed.is_none() && output_tokens < limits::sharegpt_tokens_min);
        let too_long = input_tokens > limits::sharegpt_prompt_tokens_max
            || (fixed.is_none() && input_tokens + output_tokens > limits::sharegpt_total_tokens_max);
        if too_short || too_long {
            continue;
        }
        prompts.push(text_prompt(args, tok, prompt, input_tokens, output_tokens));
    }
    Ok(oversample(args, prompts))
}

#[derive(Deserialize)]
struct JsonlLine {
    prompt: String,
    #[serde(default)]
    output_tokens: Option<usize>,
}

fn jsonl_prompts(args: &BenchArgs, tok: &BenchTokenizer) -> Result<Vec<Prompt>, WorkloadError> {
    let path = args.dataset_path.as_deref().unwrap_or(Path::new(""));
    let text = read_dataset(path)?;
    let mut prompts = Vec::new();
    for (n, line) in text.lines().enumerate().filter(|(_, l)| !l.trim().is_empty()) {
        if prompts.len() == args.num_prompts {
            break;
        }
        let parsed: JsonlLine = serde_json::from_str(line).map_err(|source| WorkloadError::JsonlLine {
            path: path.to_path_buf(),
            line: n + 1,
            source,
        })?;
        let output_tokens = match args.custom_output_len {
            Some(n) if n > 0 => usize::try_from(n).unwrap_or(usize::MAX),
            _ => parsed.output_tokens.unwrap_or(args.random_output_len),
        };
        let input_tokens = tok.count(&parsed.prompt);
        prompts.push(text_prompt(args, tok, &parsed.prompt, input_tokens, output_tokens));
    }
    Ok(oversample(args, prompts))
}

fn read_dataset(path: &Path) -> Result<String, WorkloadError> {
    std::fs::read_to_string(path).map_err(|source| WorkloadError::ReadDataset { path: path.to_path_buf(), source })
}

fn text_prompt(args: &BenchArgs, tok: &BenchTokenizer, text: &str, input_tokens: usize, output: usize) -> Prompt {
    let input =
        if args.prompt_token_ids { PromptInput::TokenIds(tok.encode(text)) } else { PromptInput::Text(text.into()) };
    Prompt { input, input_tokens: count_u32(input_tokens), output_tokens: count_u32(output.max(1)) }
}

/// Repeats a short dataset in order until it has --num-prompts prompts (not with
/// --no-oversample).
fn oversample(args: &BenchArgs, prompts: Vec<Prompt>) -> Vec<Prompt> {
    if prompts.is_empty() || prompts.len() >= args.num_prompts || args.no_oversample {
        return prompts;
    }
    prompts.iter().cycle().take(args.num_prompts).cloned().collect()
}

fn count_u32(n: usize) -> u32 {
    u32::try_from(n).unwrap_or(u32::MAX)
}

/// The body of one streaming request, in the shape of the backend's API: completions and chat
/// ask for usage in the stream (per chunk too, unless --no-per-chunk-usage); Messages and
/// Responses always stream it. --ignore-eos and the extras (sampling flags, --extra-body) go
/// into every body, the extras last.
pub fn request_body(args: &BenchArgs, config: &BenchConfig, model: &str, prompt: &Prompt) -> Value {
    let mut body = Map::new();
    body.insert("model".into(), json!(model));
    let input = match &prompt.input {
        PromptInput::Text(t) => json!(t),
        PromptInput::TokenIds(ids) => json!(ids),
    };
    let usage_in_stream = match args.backend {
        Backend::Openai | Backend::Vllm => {
            body.insert("prompt".into(), input);
            body.insert("max_tokens".into(), json!(prompt.output_tokens));
            true
        }
        Backend::OpenaiChat => {
            body.insert("messages".into(), json!([{"role": "user", "content": input}]));
            body.insert("max_completion_tokens".into(), json!(prompt.output_tokens));
            true
        }
        Backend::AnthropicMessages => {
            body.insert("max_tokens".into(), json!(prompt.output_tokens));
            body.insert("messages".into(), json!([{"role": "user", "content": input}]));
            false
        }
        Backend::OpenaiResponses => {
            body.insert("input".into(), input);
            body.insert("max_output_tokens".into(), json!(prompt.output_tokens));
            false
        }
    };
    body.insert("stream".into(), json!(true));
    if usage_in_stream {
        let mut stream_options = json!({"include_usage": true});
        if !args.no_per_chunk_usage {
            stream_options["continuous_usage_stats"] = json!(true);
        }
        body.insert("stream_options".into(), stream_options);
    }
    if args.backend == Backend::OpenaiResponses {
        // As vLLM's openai-responses backend: a benchmark's responses need not be kept.
        body.insert("store".into(), json!(false));
    }
    if args.ignore_eos {
        body.insert("ignore_eos".into(), json!(true));
    }
    for (k, v) in config.extra_body.iter().flatten() {
        body.insert(k.clone(), v.clone());
    }
    Value::Object(body)
}

/// The complete HTTP/1.1 request.
pub fn request_bytes(config: &BenchConfig, body: &Value, close: bool) -> Vec<u8> {
    let body = body.to_string();
    let mut head = format!(
        "POST {} HTTP/1.1\r\nHost: {}\r\nContent-Type: application/json\r\nAccept: text/event-stream\r\nContent-Length: {}\r\n",
        config.path,
        config.authority,
        body.len()
    );
    if close {
        head.push_str("Connection: close\r\n");
    }
    for (k, v) in &config.headers {
        head.push_str(&format!("{k}: {v}\r\n"));
    }
    head.push_str("\r\n");
    let mut out = head.into_bytes();
    out.extend_from_slice(body.as_bytes());
    out
}

#[cfg(test)]
pub mod tests {
    use super::*;
    use crate::args::tests::parsed as args;
    use crate::tokenizer::tests::tiny_tokenizer;

    #[test]
    fn random_prompts_have_exact_lengths() {
        let tok = tiny_tokenizer();
        let a = args(&["--num-prompts", "20", "--random-input-len", "12", "--random-output-len", "5"]);
        let prompts = build_prompts(&a, &tok).unwrap_or_default();
        assert_eq!(prompts.len(), 20);
        for p in &prompts {
            let PromptInput::Text(t) = &p.input else { panic!("text expected") };
            assert_eq!((p.input_tokens, tok.count(t), p.output_tokens), (12, 12, 5));
        }
        let ranged = args(&["--num-prompts", "200", "--random-input-len", "10", "--random-range-ratio", "0.5"]);
        let lens: Vec<u32> = build_prompts(&ranged, &tok).unwrap_or_default().iter().map(|p| p.input_tokens).collect();
        assert!(lens.iter().all(|l| (5..=15).contains(l)), "{lens:?}");
        assert!(lens.iter().any(|&l| l < 8) && lens.iter().any(|&l| l > 12));
    }

    #[test]
    fn prefix_groups_share_their_prefix() {
        let tok = tiny_tokenizer();
        let a = args(&[
            "--dataset-name",
            "prefix",
            "--num-prompts",
            "6",
            "--prefix-len",
            "4",
            "--prefix-group-count",
            "2",
            "--random-input-len",
            "3",
            "--prompt-token-ids",
        ]);
        let ids: Vec<Vec<u32>> = build_prompts(&a, &tok)
            .unwrap_or_default()
            .into_iter()
            .map(|p| match p.input {
                PromptInput::TokenIds(ids) => ids,
                PromptInput::Text(_) => Vec::new(),
            })
            .collect();
        assert_eq!(ids.len(), 6);
        assert!(ids.iter().all(|i| i.len() == 7));
        assert_eq!(ids[0][..4], ids[2][..4]);
        assert_eq!(ids[1][..4], ids[5][..4]);
        assert_ne!(ids[0][..4], ids[1][..4]);
    }

    #[test]
    fn vllm_prefix_flags_shape_the_prompts() {
        let tok = tiny_tokenizer();
        // (flags, prompt length, shared leading ids, output tokens)
        let cases: &[(&[&str], usize, usize, u32)] = &[
            (&["--random-prefix-len", "4", "--random-input-len", "3"], 7, 4, 128),
            (
                &[
                    "--dataset-name",
                    "prefix_repetition",
                    "--prefix-repetition-prefix-len",
                    "5",
                    "--prefix-repetition-num-prefixes",
                    "1",
                    "--prefix-repetition-suffix-len",
                    "2",
                    "--prefix-repetition-output-len",
                    "9",
                ],
                7,
                5,
                9,
            ),
        ];
        for (flags, len, shared, output) in cases {
            let a = args(&[&["--num-prompts", "4", "--prompt-token-ids"], *flags].concat());
            let prompts = build_prompts(&a, &tok).unwrap_or_default();
            let ids: Vec<&Vec<u32>> = prompts
                .iter()
                .filter_map(|p| match &p.input {
                    PromptInput::TokenIds(ids) => Some(ids),
                    PromptInput::Text(_) => None,
                })
                .collect();
            assert_eq!(ids.len(), 4, "{flags:?}");
            assert!(ids.iter().all(|i| i.len() == *len && i[..*shared] == ids[0][..*shared]), "{flags:?}: {ids:?}");
            assert_ne!(ids[0][*shared..], ids[1][*shared..], "{flags:?}: suffixes differ");
            assert!(prompts.iter().all(|p| p.output_tokens == *output), "{flags:?}");
        }
    }

    #[test]
    fn custom_dataset_output_len_and_oversampling() {
        let tok = tiny_tokenizer();
        let path = std::env::temp_dir().join(format!("sg-bench-custom-{}.jsonl", std::process::id()));
        let written = std::fs::write(&path, "{\"prompt\": \"red\", \"output_tokens\": 7}\n{\"prompt\": \"green\"}\n");
        assert!(written.is_ok());
        let file = path.to_string_lossy().into_owned();
        // (flags, output tokens of each prompt)
        let cases: &[(&[&str], &[u32])] = &[
            (&[], &[7, 128, 7, 128]),
            (&["--custom-output-len", "5"], &[5, 5, 5, 5]),
            (&["--custom-output-len", "-1", "--no-oversample"], &[7, 128]),
        ];
        for (flags, want) in cases {
            let a =
                args(&[&["--dataset-name", "custom", "--dataset-path", &file, "--num-prompts", "4"], *flags].concat());
            let got: Vec<u32> = build_prompts(&a, &tok).unwrap_or_default().iter().map(|p| p.output_tokens).collect();
            assert_eq!(&got, want, "{flags:?}");
        }
        let _ = std::fs::remove_file(&path);
    }

    /// Each backend's body, byte for byte (keys in the order sent).
    #[test]
    fn request_bodies_per_backend() {
        let chat_usage = r#""stream":true,"stream_options":{"include_usage":true,"continuous_usage_stats":true}"#;
        let cases: &[(&str, String)] = &[
            (
                "openai",
                format!(r#"{{"model":"m","prompt":"hi","max_tokens":9,{chat_usage},"ignore_eos":true,"temperature":0}}"#),
            ),
            (
                "vllm",
                format!(r#"{{"model":"m","prompt":"hi","max_tokens":9,{chat_usage},"ignore_eos":true,"temperature":0}}"#),
            ),
            (
                "openai-chat",
                format!(
                    r#"{{"model":"m","messages":[{{"role":"user","content":"hi"}}],"max_completion_tokens":9,{chat_usage},"ignore_eos":true,"temperature":0}}"#
                ),
            ),
            (
                "anthropic-messages",
                r#"{"model":"m","max_tokens":9,"messages":[{"role":"user","content":"hi"}],"stream":true,"ignore_eos":true,"temperature":0}"#
                    .into(),
            ),
            (
                "openai-responses",
                r#"{"model":"m","input":"hi","max_output_tokens":9,"stream":true,"store":false,"ignore_eos":true,"temperature":0}"#
                    .into(),
            ),
        ];
        let prompt = Prompt { input: PromptInput::Text("hi".into()), input_tokens: 1, output_tokens: 9 };
        for (backend, golden) in cases {
            let a = args(&["--backend", backend, "--ignore-eos", "--extra-body", r#"{"temperature":0}"#]);
            let config = BenchConfig::from_args(&a).unwrap_or_else(|e| panic!("{e}"));
            assert_eq!(request_body(&a, &config, "m", &prompt).to_string(), *golden, "{backend}");
        }
        let a = args(&["--backend", "openai-chat", "--no-per-chunk-usage"]);
        let config = BenchConfig::from_args(&a).unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(request_body(&a, &config, "m", &prompt)["stream_options"], json!({"include_usage": true}));
    }

    #[test]
    fn anthropic_requests_carry_the_version_header() {
        let a = args(&["--backend", "anthropic-messages", "--header", "X-Team=perf"]);
        let config = BenchConfig::from_args(&a).unwrap_or_else(|e| panic!("{e}"));
        let prompt = Prompt { input: PromptInput::Text("hi".into()), input_tokens: 1, output_tokens: 9 };
        let bytes = request_bytes(&config, &request_body(&a, &config, "m", &prompt), false);
        let text = String::from_utf8_lossy(&bytes);
        let (head, _) = text.split_once("\r\n\r\n").unwrap_or_default();
        assert!(head.starts_with("POST /v1/messages HTTP/1.1\r\n"), "{head}");
        assert!(head.contains("\r\nanthropic-version: 2023-06-01\r\n"), "{head}");
        assert!(head.ends_with("\r\nX-Team: perf"), "--header last: {head}");
    }

    #[test]
    fn request_bytes_frame_the_body() {
        let a = args(&["--backend", "openai-chat", "--ignore-eos", "--extra-body", r#"{"temperature":0}"#]);
        let config = BenchConfig::from_args(&a).unwrap_or_else(|e| panic!("{e}"));
        let prompt = Prompt { input: PromptInput::Text("hi".into()), input_tokens: 1, output_tokens: 9 };
        let body = request_body(&a, &config, "m", &prompt);
        assert_eq!(body["messages"][0]["content"], "hi");
        assert_eq!(body["max_completion_tokens"], 9);
        assert_eq!(body["stream_options"], json!({"include_usage": true, "continuous_usage_stats": true}));
        assert_eq!((body["ignore_eos"].clone(), body["temperature"].clone()), (json!(true), json!(0)));
        let bytes = request_bytes(&config, &body, false);
        let text = String::from_utf8_lossy(&bytes);
        let (head, sent_body) = text.split_once("\r\n\r\n").unwrap_or_default();
        assert!(head.starts_with("POST /v1/chat/completions HTTP/1.1\r\nHost: 127.0.0.1:8000\r\n"), "{head}");
        assert!(head.contains(&format!("Content-Length: {}", sent_body.len())));
    }
}
