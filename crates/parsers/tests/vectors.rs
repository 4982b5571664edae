//! Golden vectors for every reasoning and tool-call parser, run through one
//! harness (crates/parsers/crates/parsers/tests/vectors/{reasoning,tool}/*.json), plus parser selection
//! (crates/parsers/crates/parsers/tests/vectors/selection/detection.json, names, aliases, errors).
//!
//! Each case is checked one-shot (`push(whole)` + `finish()`) against the
//! vector's expectation, and streamed against the one-shot result: at every
//! two-chunk split, one character at a time, and in seeded random splits
//! into many chunks (splits fall inside markers and between the bytes'
//! characters, never inside one). The fuzz tests then recombine pieces of a
//! family's vectors into new inputs and check only the invariants: no panic,
//! streamed == one-shot, well-formed call deltas, arguments valid JSON.

use std::fs;
use std::path::{Path, PathBuf};

use serde_json::Value;

use shardgate_parsers as parsers;

use parsers::reasoning::{create_reasoning_parser, detect_reasoning_parser, reasoning_parser_names};
use parsers::tool::{create_tool_parser, detect_tool_parser, tool_call_id, tool_parser_names, ToolSpec};

/// Random splits tried per case.
const RANDOM_SPLIT_COUNT: usize = 24;
/// Generated inputs per parser in the fuzz tests.
const FUZZ_INPUT_COUNT: usize = 80;

// ---- shared plumbing ----------------------------------------------------

fn vector_files(kind: &str) -> Vec<PathBuf> {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/vectors").join(kind);
    let mut files: Vec<PathBuf> = fs::read_dir(&dir)
        .unwrap_or_else(|e| panic!("reading {}: {e}", dir.display()))
        .filter_map(|entry| entry.ok().map(|e| e.path()))
        .filter(|path| path.extension().is_some_and(|ext| ext == "json"))
        .collect();
    files.sort();
    files
}

fn load(path: &Path) -> Value {
    let text = fs::read_to_string(path).unwrap_or_else(|e| panic!("reading {}: {e}", path.display()));
    serde_json::from_str(&text).unwrap_or_else(|e| panic!("parsing {}: {e}", path.display()))
}

fn text_field<'a>(value: &'a Value, key: &str) -> &'a str {
    value.get(key).and_then(Value::as_str).unwrap_or("")
}

fn parsers_of(file: &Value) -> Vec<String> {
    file["parsers"]
        .as_array()
        .map(|names| names.iter().filter_map(|n| n.as_str().map(String::from)).collect())
        .unwrap_or_default()
}

/// splitmix64: small, seeded, good enough to pick split points.
struct Rng(u64);

impl Rng {
    fn seeded(text: &str) -> Self {
        Rng(text.bytes().fold(0x9E37_79B9_7F4A_7C15, |h, b| (h ^ u64::from(b)).wrapping_mul(0x100_0000_01B3)))
    }

    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }

    fn below(&mut self, bound: usize) -> usize {
        if bound == 0 {
            0
        } else {
            (self.next() % bound as u64) as usize
        }
    }
}

/// Every way of cutting `text` the streaming checks try.
fn splits<'a>(text: &'a str, seed: &str) -> Vec<Vec<&'a str>> {
    let bounds: Vec<usize> = text.char_indices().map(|(i, _)| i).skip(1).collect();
    let mut all: Vec<Vec<&str>> = bounds.iter().map(|&b| vec![&text[..b], &text[b..]]).collect();
    all.push(text.split_inclusive(|_: char| true).collect());
    let mut rng = Rng::seeded(seed);
    for _ in 0..RANDOM_SPLIT_COUNT {
        let mut cuts: Vec<usize> = (0..rng.below(bounds.len().min(12)) + 1)
            .filter_map(|_| bounds.get(rng.below(bounds.len())).copied())
            .collect();
        cuts.sort_unstable();
        cuts.dedup();
        let mut pieces = Vec::new();
        let mut start = 0;
        for cut in cuts {
            pieces.push(&text[start..cut]);
            start = cut;
        }
        pieces.push(&text[start..]);
        // Empty pushes are legal too.
        if rng.below(4) == 0 {
            pieces.insert(rng.below(pieces.len() + 1), "");
        }
        all.push(pieces);
    }
    all
}

// ---- reasoning ----------------------------------------------------------

fn run_reasoning(parser: &str, force: bool, chunks: &[&str]) -> (String, String) {
    let mut p = create_reasoning_parser(parser, force).unwrap_or_else(|e| panic!("{e}"));
    let (mut reasoning, mut content) = (String::new(), String::new());
    for chunk in chunks {
        let delta = p.push(chunk);
        reasoning.push_str(&delta.reasoning);
        content.push_str(&delta.content);
    }
    let delta = p.finish();
    reasoning.push_str(&delta.reasoning);
    content.push_str(&delta.content);
    (reasoning, content)
}

fn check_reasoning_streaming(parser: &str, force: bool, input: &str, label: &str, failures: &mut Vec<String>) {
    let whole = run_reasoning(parser, force, &[input]);
    for chunks in splits(input, label) {
        let streamed = run_reasoning(parser, force, &chunks);
        if streamed != whole {
            failures.push(format!("{label}: streamed {chunks:?} gave {streamed:?}, one-shot gave {whole:?}"));
            return;
        }
    }
}

#[test]
fn reasoning_vectors() {
    let mut failures = Vec::new();
    let mut case_count = 0;
    for path in vector_files("reasoning") {
        let file = load(&path);
        for parser in parsers_of(&file) {
            for case in file["cases"].as_array().into_iter().flatten() {
                case_count += 1;
                let label = format!("{parser} / {}", text_field(case, "name"));
                let input = text_field(case, "input");
                let force = case["force_reasoning_start"].as_bool().unwrap_or(false);
                let want = (text_field(case, "reasoning").to_string(), text_field(case, "content").to_string());
                let got = run_reasoning(&parser, force, &[input]);
                if got != want {
                    failures.push(format!("{label}: got {got:?}, want {want:?}"));
                }
                check_reasoning_streaming(&parser, force, input, &label, &mut failures);
            }
        }
    }
    assert!(case_count > 0, "no reasoning vectors found");
    assert!(failures.is_empty(), "{} failures:\n{}", failures.len(), failures.join("\n"));
}

// ---- tool calls ---------------------------------------------------------

#[derive(Debug, Clone, PartialEq)]
struct Call {
    name: String,
    arguments: String,
}

#[derive(Debug, Clone, PartialEq)]
struct ToolOutcome {
    content: String,
    calls: Vec<Call>,
}

fn tools_of(value: &Value) -> Vec<ToolSpec> {
    value
        .as_array()
        .into_iter()
        .flatten()
        .map(|tool| ToolSpec {
            name: text_field(tool, "name").to_string(),
            parameters: tool.get("parameters").cloned(),
        })
        .collect()
}

/// Runs a tool parser and checks the delta shape: a call's first delta has
/// its name, later ones do not, and new calls take the next index.
fn run_tool(parser: &str, tools: &[ToolSpec], chunks: &[&str]) -> Result<ToolOutcome, String> {
    let mut p = create_tool_parser(parser, tools).map_err(|e| e.to_string())?;
    let mut outcome = ToolOutcome { content: String::new(), calls: Vec::new() };
    let mut deltas = Vec::new();
    for chunk in chunks {
        deltas.push(p.push(chunk));
    }
    deltas.push(p.finish());
    for delta in deltas {
        outcome.content.push_str(&delta.content);
        for call in delta.calls {
            match (call.name, call.index) {
                (Some(name), index) if index == outcome.calls.len() => {
                    outcome.calls.push(Call { name, arguments: call.arguments })
                }
                (None, index) if index + 1 == outcome.calls.len() => {
                    outcome.calls[index].arguments.push_str(&call.arguments);
                }
                (name, index) => {
                    return Err(format!(
                        "bad delta shape: index {index} name {name:?} after {} calls",
                        outcome.calls.len()
                    ))
                }
            }
        }
    }
    for call in &outcome.calls {
        match serde_json::from_str::<Value>(&call.arguments) {
            Ok(Value::Object(_)) => {}
            _ => return Err(format!("arguments of {} are not a JSON object: {:?}", call.name, call.arguments)),
        }
    }
    Ok(outcome)
}

/// Equal as the contract requires: same content, same call names, arguments
/// equal as JSON.
fn same_outcome(a: &ToolOutcome, b: &ToolOutcome) -> bool {
    let json = |text: &str| serde_json::from_str::<Value>(text).ok();
    a.content == b.content
        && a.calls.len() == b.calls.len()
        && a.calls.iter().zip(&b.calls).all(|(x, y)| x.name == y.name && json(&x.arguments) == json(&y.arguments))
}

fn check_tool_streaming(parser: &str, tools: &[ToolSpec], input: &str, label: &str, failures: &mut Vec<String>) {
    let whole = match run_tool(parser, tools, &[input]) {
        Ok(outcome) => outcome,
        Err(e) => return failures.push(format!("{label}: one-shot: {e}")),
    };
    for chunks in splits(input, label) {
        match run_tool(parser, tools, &chunks) {
            Ok(streamed) if same_outcome(&streamed, &whole) => {}
            Ok(streamed) => {
                return failures
                    .push(format!("{label}: streamed {chunks:?} gave {streamed:?}, one-shot gave {whole:?}"))
            }
            Err(e) => return failures.push(format!("{label}: streamed {chunks:?}: {e}")),
        }
    }
}

fn expected_tool_outcome(case: &Value) -> ToolOutcome {
    ToolOutcome {
        content: text_field(case, "content").to_string(),
        calls: case["calls"]
            .as_array()
            .into_iter()
            .flatten()
            .map(|call| Call { name: text_field(call, "name").to_string(), arguments: call["arguments"].to_string() })
            .collect(),
    }
}

#[test]
fn tool_vectors() {
    let mut failures = Vec::new();
    let mut case_count = 0;
    for path in vector_files("tool") {
        let file = load(&path);
        for parser in parsers_of(&file) {
            for case in file["cases"].as_array().into_iter().flatten() {
                case_count += 1;
                let label = format!("{parser} / {}", text_field(case, "name"));
                let tools = tools_of(case.get("tools").unwrap_or(&file["tools"]));
                let input = text_field(case, "input");
                let want = expected_tool_outcome(case);
                match run_tool(&parser, &tools, &[input]) {
                    Ok(got) if same_outcome(&got, &want) => {}
                    Ok(got) => failures.push(format!("{label}: got {got:?}, want {want:?}")),
                    Err(e) => failures.push(format!("{label}: {e}")),
                }
                check_tool_streaming(&parser, &tools, input, &label, &mut failures);
            }
        }
    }
    assert!(case_count > 0, "no tool vectors found");
    assert!(failures.is_empty(), "{} failures:\n{}", failures.len(), failures.join("\n"));
}

// ---- coverage -----------------------------------------------------------

fn covered_parsers(kind: &str) -> Vec<String> {
    vector_files(kind).iter().flat_map(|path| parsers_of(&load(path))).collect()
}

#[test]
fn every_parser_has_vectors() {
    let reasoning = covered_parsers("reasoning");
    let tool = covered_parsers("tool");
    let missing: Vec<&str> = reasoning_parser_names()
        .iter()
        .filter(|name| !reasoning.iter().any(|c| c == *name))
        .chain(tool_parser_names().iter().filter(|name| !tool.iter().any(|c| c == *name)))
        .copied()
        .collect();
    assert!(missing.is_empty(), "parsers without vectors: {missing:?}");
}

// ---- promptness ------------------------------------------------------------

/// A false start is released as soon as it can no longer become a call, by
/// the `push` that proves it, not held until the end of the stream.
#[test]
fn false_starts_are_released_promptly() {
    let cases = [
        ("qwen", "Use the <tool_call> tag."),
        ("qwen_xml", "<tool_call> is how I call tools."),
        ("minimax_m3", "]<]minimax[>[<tool_call>\nhello"),
        ("json", "{\"note\": 1}"),
        ("mistral", "[TOOL_CALLS] [{\"foo\": 1}]"),
        ("cohere", "<|START_ACTION|>nothing."),
        ("deepseek32", "<｜DSML｜function_calls> not really."),
        ("deepseek_v41", "<｜DSML｜ calls> not really."),
        ("llama", "{\"temperature\": 21}"),
        ("pythonic", "[Note] text."),
        ("kimik2", "<|tool_calls_section_begin|> hmm."),
        ("glm45_moe", "<tool_call> is a tag\n."),
    ];
    for (parser, input) in cases {
        let mut p = create_tool_parser(parser, &[]).unwrap_or_else(|e| panic!("{e}"));
        let delta = p.push(input);
        assert_eq!(delta.content, input, "{parser}: held back");
        assert!(delta.calls.is_empty(), "{parser}");
        assert!(p.finish().is_empty(), "{parser}");
    }
}

// ---- truncation: every prefix of every case ------------------------------

/// A stream can stop anywhere (length limit, abort). Every prefix of every
/// case must still give well-formed output, the same streamed as one-shot.
fn prefixes(text: &str) -> impl Iterator<Item = &str> {
    text.char_indices().map(move |(i, _)| &text[..i])
}

fn random_split<'a>(text: &'a str, rng: &mut Rng) -> Vec<&'a str> {
    let mut pieces = Vec::new();
    let mut start = 0;
    for (i, _) in text.char_indices().skip(1) {
        if rng.below(3) == 0 {
            pieces.push(&text[start..i]);
            start = i;
        }
    }
    pieces.push(&text[start..]);
    pieces
}

#[test]
fn truncated_streams() {
    let mut failures = Vec::new();
    for path in vector_files("reasoning") {
        let file = load(&path);
        for parser in parsers_of(&file) {
            let mut rng = Rng::seeded(&parser);
            for case in file["cases"].as_array().into_iter().flatten() {
                let force = case["force_reasoning_start"].as_bool().unwrap_or(false);
                for prefix in prefixes(text_field(case, "input")) {
                    let whole = run_reasoning(&parser, force, &[prefix]);
                    let chunks = random_split(prefix, &mut rng);
                    let streamed = run_reasoning(&parser, force, &chunks);
                    if streamed != whole {
                        failures.push(format!("{parser} prefix {chunks:?}: {streamed:?} vs {whole:?}"));
                    }
                }
            }
        }
    }
    for path in vector_files("tool") {
        let file = load(&path);
        for parser in parsers_of(&file) {
            let mut rng = Rng::seeded(&parser);
            for case in file["cases"].as_array().into_iter().flatten() {
                let tools = tools_of(case.get("tools").unwrap_or(&file["tools"]));
                for prefix in prefixes(text_field(case, "input")) {
                    let label = format!("{parser} prefix {prefix:?}");
                    let whole = match run_tool(&parser, &tools, &[prefix]) {
                        Ok(outcome) => outcome,
                        Err(e) => {
                            failures.push(format!("{label}: {e}"));
                            continue;
                        }
                    };
                    let chunks = random_split(prefix, &mut rng);
                    match run_tool(&parser, &tools, &chunks) {
                        Ok(streamed) if same_outcome(&streamed, &whole) => {}
                        Ok(streamed) => failures.push(format!("{label} as {chunks:?}: {streamed:?} vs {whole:?}")),
                        Err(e) => failures.push(format!("{label} as {chunks:?}: {e}")),
                    }
                }
            }
        }
    }
    assert!(failures.is_empty(), "{} failures:\n{}", failures.len(), failures.join("\n"));
}

// ---- fuzz: recombined vector pieces -------------------------------------

/// Cuts every input of a file into pieces (at random char boundaries) and
/// glues random pieces into new inputs: markers get split, reordered,
/// duplicated and truncated in ways the hand-written cases do not cover.
fn recombined_inputs(file: &Value, seed: &str) -> Vec<String> {
    let mut rng = Rng::seeded(seed);
    let mut pieces: Vec<String> = Vec::new();
    for case in file["cases"].as_array().into_iter().flatten() {
        let input = text_field(case, "input");
        let bounds: Vec<usize> = input.char_indices().map(|(i, _)| i).chain([input.len()]).collect();
        let mut start = 0;
        while start < input.len() {
            let step = 1 + rng.below(24);
            let end = bounds.iter().copied().find(|&b| b >= start + step).unwrap_or(input.len());
            pieces.push(input[start..end].to_string());
            start = end;
        }
    }
    if pieces.is_empty() {
        return Vec::new();
    }
    (0..FUZZ_INPUT_COUNT)
        .map(|_| {
            let count = 1 + rng.below(12);
            (0..count).map(|_| pieces[rng.below(pieces.len())].as_str()).collect()
        })
        .collect()
}

#[test]
fn fuzz_reasoning_streaming() {
    let mut failures = Vec::new();
    for path in vector_files("reasoning") {
        let file = load(&path);
        for parser in parsers_of(&file) {
            for (n, input) in recombined_inputs(&file, &parser).iter().enumerate() {
                for force in [false, true] {
                    let label = format!("{parser} fuzz #{n} force={force} input {input:?}");
                    check_reasoning_streaming(&parser, force, input, &label, &mut failures);
                }
            }
        }
    }
    assert!(failures.is_empty(), "{} failures:\n{}", failures.len(), failures.join("\n"));
}

#[test]
fn fuzz_tool_streaming() {
    let mut failures = Vec::new();
    for path in vector_files("tool") {
        let file = load(&path);
        let tools = tools_of(&file["tools"]);
        for parser in parsers_of(&file) {
            for (n, input) in recombined_inputs(&file, &parser).iter().enumerate() {
                let label = format!("{parser} fuzz #{n} input {input:?}");
                check_tool_streaming(&parser, &tools, input, &label, &mut failures);
                // And with no declared tools (no schema, no name check).
                check_tool_streaming(&parser, &[], input, &format!("{label} (no tools)"), &mut failures);
            }
        }
    }
    assert!(failures.is_empty(), "{} failures:\n{}", failures.len(), failures.join("\n"));
}

// ---- selection ----------------------------------------------------------

#[test]
fn registries_have_the_documented_names() {
    assert_eq!(reasoning_parser_names().len(), 19);
    assert_eq!(tool_parser_names().len(), 24);
    for name in reasoning_parser_names() {
        assert!(create_reasoning_parser(name, false).is_ok(), "{name}");
        assert!(create_reasoning_parser(name, true).is_ok(), "{name}");
    }
    for name in tool_parser_names() {
        assert!(create_tool_parser(name, &[]).is_ok(), "{name}");
    }
}

#[test]
fn unknown_names_have_exact_error_texts() {
    let cases = [
        ("deepseek-r1", "unknown reasoning parser 'deepseek-r1'"),
        ("", "unknown reasoning parser ''"),
        ("Qwen3", "unknown reasoning parser 'Qwen3'"),
    ];
    for (name, text) in cases {
        match create_reasoning_parser(name, false) {
            Err(e) => assert_eq!(e.to_string(), text),
            Ok(_) => panic!("{name:?} was accepted"),
        }
    }
    let cases = [
        ("qwen-xml", "unknown tool-call parser 'qwen-xml'"),
        ("deepseek_r1", "unknown tool-call parser 'deepseek_r1'"),
        ("JSON", "unknown tool-call parser 'JSON'"),
    ];
    for (name, text) in cases {
        match create_tool_parser(name, &[]) {
            Err(e) => assert_eq!(e.to_string(), text),
            Ok(_) => panic!("{name:?} was accepted"),
        }
    }
}

#[test]
fn aliases_parse_like_qwen_xml() {
    let input = "<tool_call>\n<function=ping>\n<parameter=host>\nexample.com\n</parameter>\n</function>\n</tool_call>";
    let run = |name: &str| {
        let mut parser = create_tool_parser(name, &[]).unwrap_or_else(|e| panic!("{e}"));
        let mut deltas = vec![parser.push(input)];
        deltas.push(parser.finish());
        deltas
    };
    let reference = run("qwen_xml");
    assert!(!reference[0].calls.is_empty());
    assert_eq!(run("qwen_coder"), reference);
    assert_eq!(run("nemotron"), reference);
}

#[test]
fn detection_table() {
    let table = load(&Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/vectors/selection/detection.json"));
    let mut failures = Vec::new();
    for row in table["cases"].as_array().into_iter().flatten() {
        let model = row["model"].as_str().unwrap_or("");
        let want_reasoning = row["reasoning"].as_str();
        let want_tool = row["tool"].as_str();
        let got_reasoning = detect_reasoning_parser(model);
        let got_tool = detect_tool_parser(model);
        if got_reasoning != want_reasoning {
            failures.push(format!("{model}: reasoning {got_reasoning:?}, want {want_reasoning:?}"));
        }
        if got_tool != want_tool {
            failures.push(format!("{model}: tool {got_tool:?}, want {want_tool:?}"));
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

#[test]
fn detected_names_are_registered() {
    for model in ["deepseek-ai/DeepSeek-V4.1-Flash", "Qwen/Qwen3-Coder-30B", "moonshotai/Kimi-K3"] {
        if let Some(name) = detect_reasoning_parser(model) {
            assert!(reasoning_parser_names().contains(&name));
        }
        if let Some(name) = detect_tool_parser(model) {
            assert!(tool_parser_names().contains(&name));
        }
    }
}

#[test]
fn tool_call_ids() {
    assert_eq!(tool_call_id("moonshotai/Kimi-K2-Instruct", "get_weather", 3), "functions.get_weather:3");
    assert_eq!(tool_call_id("moonshotai/Kimi-K3", "search", 0), "search_0");
    assert_eq!(tool_call_id("KIMI_K3", "search", 7), "search_7");
    let id = tool_call_id("Qwen/Qwen3-8B", "get_weather", 0);
    assert!(id.starts_with("call_") && id.len() == 29, "{id}");
    assert!(id[5..].chars().all(|c| c.is_ascii_hexdigit()), "{id}");
    assert_ne!(id, tool_call_id("Qwen/Qwen3-8B", "get_weather", 0));
}
