//! The text pipeline behind every choice: `pipeline::choice::ChoiceState` (incremental
//! detokenization with the Qwen3 tokenizer, stop strings, holdback, finish reasons) and the
//! parse stage (`pipeline::parse::OutputParser`: every registered reasoning and tool-call
//! parser), on arbitrary token streams and arbitrary text.
//!
//! Tokens mode: one token stream is delivered three ways: as one engine event (how a
//! non-streamed request is collected), in the batch sizes the input picks, and one token per
//! event (both streamed: a delta is taken after every event, as `pipeline::generate` does).
//! Text mode: text fed to an `OutputParser` whole and in pieces.
//!
//! Oracles:
//! - the final text, token ids, finish reason, stop reason and parse result do not depend on
//!   how the engine batched the tokens;
//! - what was streamed, concatenated, is the final result (text, reasoning, content, every
//!   call's name, id and arguments), so a streaming client and a non-streaming one agree;
//! - streamed text is never taken back (`choice.rs` asserts this in debug builds, which the
//!   fuzz build is);
//! - the same logprob rows whatever the batching (without stop strings);
//! - the gateway's own BPE encoder gives `tokenizers`' ids for the text-mode text;
//! - nothing panics.

use std::sync::OnceLock;

use crate::model;
use arbitrary::{Arbitrary, Unstructured};
use shardgate::pipeline::choice::{ChoiceState, Finish, TokenLogprob};
use shardgate::pipeline::params::OutputOptions;
use shardgate::pipeline::parse::{OutputParser, ParseSpec, Parsed, ParsedDelta};
use shardgate_parsers::reasoning::reasoning_parser_names;
use shardgate_parsers::tool::{tool_parser_names, ToolSpec};
use shardgate_wire::output::LogprobRow;
use shardgate_wire::{FinishReason, Logprobs, StopReason, TokenEvent};

/// One input: panics (an oracle failed) or returns.
pub fn run(data: &[u8]) {
    let mut u = Unstructured::new(data);
    let Ok(input) = Input::arbitrary(&mut u) else { return };
    match input {
        Input::Tokens(case) => tokens_case(case),
        Input::Text(case) => text_case(case),
    }
}

#[derive(Debug, Arbitrary)]
enum Input {
    Tokens(TokensCase),
    Text(TextCase),
}

// ---------------------------------------------------------------------------------------------
// Parse stage selection.

#[derive(Debug, Clone, Arbitrary)]
struct ParseChoice {
    reasoning: Option<u8>,
    tool: Option<u8>,
    force_reasoning_start: bool,
    separate_reasoning: bool,
    tools: Vec<u8>,
    prior_tool_calls: u8,
    /// Tool-call id formats follow the model name: random `call_…` ids, or Kimi's counted ones.
    model: u8,
}

/// Tools a request may declare: a flat schema, a nested one, none at all.
fn tool_specs() -> &'static [ToolSpec] {
    static SPECS: OnceLock<Vec<ToolSpec>> = OnceLock::new();
    SPECS.get_or_init(|| {
        let schema = |v: serde_json::Value| Some(v);
        vec![
            ToolSpec {
                name: "get_weather".into(),
                parameters: schema(serde_json::json!({
                    "type": "object",
                    "properties": {"city": {"type": "string"}, "days": {"type": "integer"}, "metric": {"type": "boolean"}},
                    "required": ["city"],
                })),
            },
            ToolSpec {
                name: "search".into(),
                parameters: schema(serde_json::json!({
                    "type": "object",
                    "properties": {
                        "query": {"type": "string"},
                        "filters": {"type": "object", "properties": {"lang": {"type": "string"}}},
                        "tags": {"type": "array", "items": {"type": "string"}},
                        "score": {"type": "number"},
                    },
                })),
            },
            ToolSpec { name: "noop".into(), parameters: None },
        ]
    })
}

impl ParseChoice {
    fn spec(&self) -> ParseSpec {
        let reasoning_names = reasoning_parser_names();
        let tool_names = tool_parser_names();
        let specs = tool_specs();
        ParseSpec {
            reasoning_parser: self.reasoning.map(|i| reasoning_names[i as usize % reasoning_names.len()]),
            tool_parser: self.tool.map(|i| tool_names[i as usize % tool_names.len()]),
            tools: self.tools.iter().take(3).map(|&i| specs[i as usize % specs.len()].clone()).collect(),
            force_reasoning_start: self.force_reasoning_start,
            separate_reasoning: self.separate_reasoning,
            model_name: ["qwen3-demo", "moonshotai/Kimi-K2-Instruct", "moonshotai/Kimi-K3"][self.model as usize % 3]
                .into(),
            prior_tool_calls: self.prior_tool_calls as usize % 4,
            ..Default::default()
        }
    }
}

/// Streamed deltas, accumulated as a client would.
#[derive(Debug, Default, Clone, PartialEq)]
struct Client {
    content: String,
    reasoning: String,
    /// Per call index: (id from the first delta, name, concatenated arguments).
    calls: Vec<(String, String, String)>,
}

impl Client {
    fn take(&mut self, d: ParsedDelta) {
        self.content.push_str(&d.content);
        self.reasoning.push_str(&d.reasoning);
        for c in d.calls {
            if c.index == self.calls.len() {
                let id = c.id.clone().unwrap_or_else(|| panic!("first delta of call {} has no id", c.index));
                let name = c.name.clone().unwrap_or_else(|| panic!("first delta of call {} has no name", c.index));
                self.calls.push((id, name, String::new()));
            } else {
                assert!(c.index < self.calls.len(), "call index {} skips ahead of {}", c.index, self.calls.len());
                assert!(c.id.is_none(), "only the first delta of call {} carries an id", c.index);
            }
            self.calls[c.index].2.push_str(&c.arguments);
        }
    }

    /// A streaming client ends up with exactly the non-streamed result.
    fn assert_matches(&self, parsed: &Parsed, what: &str) {
        assert_eq!(self.content, parsed.content, "{what}: streamed content");
        assert_eq!(self.reasoning, parsed.reasoning, "{what}: streamed reasoning");
        let calls: Vec<(String, String, String)> =
            parsed.calls.iter().map(|c| (c.id.clone(), c.name.clone(), c.arguments.clone())).collect();
        assert_eq!(self.calls, calls, "{what}: streamed tool calls");
    }
}

// ---------------------------------------------------------------------------------------------
// Text mode: the parse stage alone.

#[derive(Debug, Arbitrary)]
struct TextCase {
    pieces: Vec<Piece>,
    /// Piece lengths in bytes for the streamed run (rounded to char boundaries).
    splits: Vec<u8>,
    parse: ParseChoice,
}

#[derive(Debug, Arbitrary)]
enum Piece {
    Marker(u8),
    Text(String),
}

/// Markers and fragments of every registered format (from `src/parsers`), and the JSON,
/// Python and XML-ish argument syntax around them.
const MARKERS: &[&str] = &[
    "<think>",
    "</think>",
    "<tool_call>",
    "</tool_call>",
    "<function=",
    "</function>",
    "<parameter=",
    "</parameter>",
    "<arg_key>",
    "</arg_key>",
    "<arg_value>",
    "</arg_value>",
    "<invoke",
    "</invoke>",
    "<minimax:tool_call>",
    "</minimax:tool_call>",
    "<mm:think>",
    "</mm:think>",
    "<steptml:invoke",
    "</steptml:invoke>",
    "<steptml:parameter",
    "</steptml:parameter>",
    "<|START_ACTION|>",
    "<|END_ACTION|>",
    "<|START_RESPONSE|>",
    "<|END_RESPONSE|>",
    "<|START_TEXT|>",
    "<|END_TEXT|>",
    "<|START_THINKING|>",
    "<|END_THINKING|>",
    "<|content_invoke_tool_json|>",
    "<|content_invoke_tool_text|>",
    "<|content_model_end_sampling|>",
    "<|content_text|>",
    "<|content_thinking|>",
    "<|end_message|>",
    "<|message_model|>",
    "<|endoftext|>",
    "<|python_tag|>",
    "<|python_start|>",
    "<|python_end|>",
    "<|open|>think<|sep|>",
    "<|close|>think<|sep|>",
    "<|open|>tools<|sep|>",
    "<|close|>tools<|sep|>",
    "<|open|>call",
    "<|close|>call<|sep|>",
    "<|open|>argument",
    "<|close|>argument<|sep|>",
    "<|open|>response<|sep|>",
    "<|close|>response<|sep|>",
    "<|open|>message<|sep|>",
    "<|sep|>",
    "<|tool_calls_section_begin|>",
    "<|tool_calls_section_end|>",
    "<|tool_call_begin|>",
    "<|tool_call_argument_begin|>",
    "<|tool_call_end|>",
    "<|tool_calls|>",
    "<｜tool▁calls▁begin｜>",
    "<｜tool▁calls▁end｜>",
    "<｜tool▁call▁begin｜>",
    "<｜tool▁call▁end｜>",
    "<｜tool▁sep｜>",
    "function<｜tool▁sep｜>",
    "<｜DSML｜function_calls>",
    "</｜DSML｜function_calls>",
    "<｜DSML｜invoke",
    "</｜DSML｜invoke>",
    "<｜DSML｜parameter",
    "</｜DSML｜parameter>",
    "<｜DSML｜ calls>",
    "<｜end▁of▁sentence｜>",
    "]<]minimax[>[<tool_call>",
    "]<]minimax[>[<invoke",
    "[TOOL_CALLS]",
    "[ARGS]",
    "[CALL_ID]",
    "◁think▷",
    "◁/think▷",
    "{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Paris\", \"days\": 3}}",
    "{\"name\": \"search\", \"parameters\": {\"query\": \"a\\\"b\", \"tags\": [\"x\"]}}",
    "[get_weather(city='Paris', days=3), search(query=\"q\")]",
    "get_weather",
    "search",
    "{\"city\": \"Paris\"}",
    " name=\"city\">",
    "<parameter=city>\nParis\n</parameter>",
    "<function=get_weather>",
    "```json\n",
    "```",
    "{",
    "}",
    "[",
    "]",
    "\"",
    ":",
    ",",
    "\n",
    " ",
    "\\",
    "=",
    ">",
    "<",
    "<|",
    "|>",
    "</",
    "日本",
    "🎉",
];

fn text_case(case: TextCase) {
    let mut text = String::new();
    for p in case.pieces.iter().take(64) {
        match p {
            Piece::Marker(i) => text.push_str(MARKERS[*i as usize % MARKERS.len()]),
            Piece::Text(s) => text.push_str(s),
        }
    }
    // The gateway's own encoder (text::tokenizer fast_bpe) gives exactly `tokenizers`' ids.
    let tok = &model().assets.tokenizer;
    assert!(tok.fast_encode_active(false), "Qwen3 is encoded by the fast path");
    let reference = model().reference.encode_fast(text.as_str(), false).map(|e| e.get_ids().to_vec());
    assert_eq!(tok.encode(&text, false).ok(), reference.ok(), "fast BPE and tokenizers differ on {text:?}");

    let spec = case.parse.spec();
    let Ok(mut whole) = OutputParser::new(&spec) else { return };
    let mut whole_client = Client::default();
    whole_client.take(whole.push(&text));
    whole_client.take(whole.finish());
    whole_client.assert_matches(&whole.parsed, "text, one push");
    check_calls(&whole.parsed, &spec);

    let mut split = OutputParser::new(&spec).expect("the parser was created once already");
    let mut client = Client::default();
    let mut rest = text.as_str();
    let mut sizes = case.splits.iter().cycle();
    while !rest.is_empty() {
        let want = sizes.next().map_or(rest.len(), |&n| (n as usize).max(1));
        let mut at = want.min(rest.len());
        while !rest.is_char_boundary(at) {
            at += 1;
        }
        client.take(split.push(&rest[..at]));
        rest = &rest[at..];
    }
    client.take(split.finish());
    client.assert_matches(&split.parsed, "text, in pieces");
    assert_eq!(
        masked(&split.parsed),
        masked(&whole.parsed),
        "{:?}: text {text:?} split into pieces {:?} parses differently",
        spec_names(&spec),
        case.splits
    );
}

/// A parse result with random tool-call ids (`call_` + 24 hex digits) masked: two runs mint
/// different ones by design. Counted (Kimi) ids stay, they must agree.
fn spec_names(spec: &ParseSpec) -> (Option<&'static str>, Option<&'static str>, bool, bool) {
    (spec.reasoning_parser, spec.tool_parser, spec.force_reasoning_start, spec.separate_reasoning)
}

fn masked(p: &Parsed) -> Parsed {
    let mut p = p.clone();
    for c in &mut p.calls {
        if c.id.len() == 29 && c.id.starts_with("call_") && c.id[5..].bytes().all(|b| b.is_ascii_hexdigit()) {
            c.id = "call_<random>".into();
        }
    }
    p
}

/// Every call names a declared tool... is not promised (models call what they like), but each
/// call's arguments must be one JSON object text, as the OpenAI API carries them.
fn check_calls(parsed: &Parsed, spec: &ParseSpec) {
    if spec.tool_parser.is_none() {
        assert!(parsed.calls.is_empty(), "calls without a tool parser");
        return;
    }
    for c in &parsed.calls {
        assert!(!c.id.is_empty(), "call without an id");
        match serde_json::from_str::<serde_json::Value>(&c.arguments) {
            Ok(serde_json::Value::Object(_)) => {}
            other => panic!("call {:?} arguments are not a JSON object: {:?} ({other:?})", c.name, c.arguments),
        }
    }
}

// ---------------------------------------------------------------------------------------------
// Tokens mode: the whole choice.

#[derive(Debug, Arbitrary)]
struct TokensCase {
    prompt: Vec<Tok>,
    tokens: Vec<Tok>,
    stops: Vec<StopSpec>,
    include_stop_str_in_output: bool,
    skip_special_tokens: bool,
    spaces_between_special_tokens: bool,
    min_tokens: u8,
    finish: FinishSpec,
    /// Event sizes (in tokens) for the batched run; cycled.
    batches: Vec<u8>,
    parse: Option<ParseChoice>,
    logprobs: bool,
}

#[derive(Debug, Clone, Copy, Arbitrary)]
enum Tok {
    /// A token of the palette (tokens of text the parsers and stops care about).
    Palette(u16),
    /// Any id of the model's vocabulary, including padded ids the tokenizer lacks.
    Vocab(u32),
    /// One of the tokenizer's special tokens.
    Special(u8),
}

#[derive(Debug, Arbitrary)]
enum StopSpec {
    /// A piece of the decoded output itself, so stops do match: (char offset, chars).
    FromOutput(u16, u8),
    Marker(u8),
    Text(String),
}

#[derive(Debug, Clone, Copy, Arbitrary)]
enum FinishSpec {
    /// EOS or a stop token: the last token is not text.
    Stop,
    /// A stop token reported by id (a stop string sent as a token id).
    StopToken,
    Length,
    Abort,
    Repetition,
    Error,
}

struct Palette {
    ids: Vec<u32>,
    specials: Vec<u32>,
}

/// Token ids of texts the pipeline treats specially, tokenized with the model's tokenizer.
fn palette() -> &'static Palette {
    static PALETTE: OnceLock<Palette> = OnceLock::new();
    PALETTE.get_or_init(|| {
        let tok = &model().assets.tokenizer;
        let mut ids: Vec<u32> = Vec::new();
        let texts = MARKERS.iter().copied().chain([
            "Hello world, this is a test.",
            " The answer is 42.\n\n",
            "日本語のテキスト",
            "emoji 🎉🎊 and accents é ü",
            "\u{FFFD}",
            "<|im_start|>assistant\n",
            "<|im_end|>",
        ]);
        for t in texts {
            if let Ok(enc) = tok.encode(t, false) {
                for id in enc {
                    if !ids.contains(&id) {
                        ids.push(id);
                    }
                }
            }
        }
        let specials = tok.special_tokens().into_iter().map(|(id, _)| id).collect();
        Palette { ids, specials }
    })
}

impl Tok {
    fn id(self) -> u32 {
        let p = palette();
        let vocab = model().assets.vocab_size as u32;
        match self {
            Tok::Palette(i) => p.ids[i as usize % p.ids.len()],
            Tok::Vocab(id) => id % vocab,
            Tok::Special(i) => p.specials.get(i as usize % p.specials.len().max(1)).copied().unwrap_or(0),
        }
    }
}

/// One delivery of the stream, and what a client saw of it.
#[derive(Debug, Clone, PartialEq)]
struct Outcome {
    text: String,
    token_ids: Vec<u32>,
    finish: Option<Finish>,
    /// It stopped having called tools.
    tool_calls: bool,
    parsed: Option<Parsed>,
    logprobs: Vec<TokenLogprob>,
}

fn tokens_case(case: TokensCase) {
    let m = model();
    let tok = &m.assets.tokenizer;
    let prompt: Vec<u32> = case.prompt.iter().take(32).map(|t| t.id()).collect();
    let tokens: Vec<u32> = case.tokens.iter().take(96).map(|t| t.id()).collect();
    if tokens.is_empty() {
        return;
    }
    let decoded = tok.decode(&tokens, case.skip_special_tokens).unwrap_or_default();
    // The gateway's own byte-level decoder gives exactly `tokenizers`' text, window by window.
    assert!(tok.fast_decode_active(), "Qwen3 is decoded by the byte table");
    for window in [&prompt[..], &tokens[..], &tokens[tokens.len() / 2..]] {
        assert_eq!(
            tok.decode(window, case.skip_special_tokens).ok(),
            m.reference.decode(window, case.skip_special_tokens).ok(),
            "byte-table decode and tokenizers differ on {window:?}"
        );
    }
    let mut stops: Vec<String> = Vec::new();
    for s in case.stops.iter().take(4) {
        let stop = match s {
            StopSpec::FromOutput(at, len) => {
                decoded.chars().skip(*at as usize % (decoded.chars().count() + 1)).take(1 + *len as usize % 8).collect()
            }
            StopSpec::Marker(i) => MARKERS[*i as usize % MARKERS.len()].to_string(),
            StopSpec::Text(t) => t.clone(),
        };
        // What `params::validate` lets through: non-empty, distinct.
        if !stop.is_empty() && !stops.contains(&stop) {
            stops.push(stop);
        }
    }
    let mut opts = OutputOptions {
        stop: stops,
        include_stop_str_in_output: case.include_stop_str_in_output,
        skip_special_tokens: case.skip_special_tokens,
        spaces_between_special_tokens: case.spaces_between_special_tokens,
        min_tokens: case.min_tokens as u32 % 8,
        logprobs: case.logprobs.then_some(2),
        ..Default::default()
    };
    // Single-token stop strings also go to the engine as stop token ids (`params::validate`).
    for (i, stop) in opts.stop.iter().enumerate() {
        if let Ok(ids) = tok.encode(stop, false) {
            if let [id] = ids[..] {
                if tok.decode(&[id], false).as_deref() == Ok(stop.as_str()) {
                    opts.stop_string_tokens.push((id, i));
                }
            }
        }
    }
    let last = *tokens.last().expect("non-empty");
    let (finish, stop_reason) = match case.finish {
        FinishSpec::Stop => (FinishReason::Stop, None),
        FinishSpec::StopToken => (FinishReason::Stop, Some(StopReason::TokenId(last))),
        FinishSpec::Length => (FinishReason::Length, None),
        FinishSpec::Abort => (FinishReason::Abort, None),
        FinishSpec::Repetition => (FinishReason::Repetition, None),
        FinishSpec::Error => (FinishReason::Error, None),
    };
    let spec = case.parse.as_ref().map(ParseChoice::spec);
    if spec.as_ref().is_some_and(|s| OutputParser::new(s).is_err()) {
        return;
    }

    let mut sizes: Vec<usize> = case.batches.iter().take(16).map(|&b| (b as usize % 16).max(1)).collect();
    if sizes.is_empty() {
        sizes.push(2);
    }
    let one = deliver(&prompt, &tokens, &opts, spec.as_ref(), finish, &stop_reason, &[tokens.len()], false);
    let batched = deliver(&prompt, &tokens, &opts, spec.as_ref(), finish, &stop_reason, &sizes, true);
    let single = deliver(&prompt, &tokens, &opts, spec.as_ref(), finish, &stop_reason, &[1], true);
    let (Some(one), Some(batched), Some(single)) = (one, batched, single) else {
        // An ERROR finish fails the request; which tokens were shown before it depends on
        // batching by design. Getting there without a panic is the check.
        return;
    };
    for (other, what) in [(&batched, "batched"), (&single, "one token per event")] {
        assert_eq!(other.text, one.text, "{what}: text");
        assert_eq!(other.token_ids, one.token_ids, "{what}: token ids");
        assert_eq!(other.finish, one.finish, "{what}: finish");
        assert_eq!(other.tool_calls, one.tool_calls, "{what}: ended in tool calls");
        assert_eq!(
            other.parsed.as_ref().map(masked),
            one.parsed.as_ref().map(masked),
            "{what}: parse result ({:?}, text {:?})",
            spec.as_ref().map(spec_names),
            one.text
        );
        if opts.stop.is_empty() {
            // With a stop string, a whole event's rows arrive before the cut: compared only
            // without one.
            assert_eq!(other.logprobs, one.logprobs, "{what}: logprobs");
        }
    }
    if let (Some(parsed), Some(spec)) = (&one.parsed, &spec) {
        check_calls(parsed, spec);
    }
}

/// Delivers `tokens` in events of `sizes` (cycled); `streaming` takes a delta after every
/// event, otherwise one at the end. `None`: the engine failed the request.
#[allow(clippy::too_many_arguments)]
fn deliver(
    prompt: &[u32],
    tokens: &[u32],
    opts: &OutputOptions,
    spec: Option<&ParseSpec>,
    finish: FinishReason,
    stop_reason: &Option<StopReason>,
    sizes: &[usize],
    streaming: bool,
) -> Option<Outcome> {
    let tok = &model().assets.tokenizer;
    let mut state = ChoiceState::new(0, tok, prompt, opts);
    if let Some(spec) = spec {
        state.parser = Some(OutputParser::new(spec).expect("checked by the caller"));
    }
    let mut client_text = String::new();
    let mut client = Client::default();
    let mut logprobs: Vec<TokenLogprob> = Vec::new();
    let mut at = 0;
    let mut sizes = sizes.iter().cycle();
    while at < tokens.len() && !state.is_finished() {
        let n = (*sizes.next().expect("non-empty sizes")).min(tokens.len() - at);
        let ids = tokens[at..at + n].to_vec();
        at += n;
        let last = at == tokens.len();
        let ev = TokenEvent {
            logprobs: opts.logprobs.map(|_| Logprobs {
                rows: ids
                    .iter()
                    .map(|&id| LogprobRow {
                        token_id: id,
                        logprob: -0.5,
                        rank: 1,
                        top: vec![(id, -0.5), (id.wrapping_add(1) % 151_936, -1.5)],
                    })
                    .collect(),
            }),
            token_ids: ids,
            finish: last.then_some(finish),
            stop_reason: if last { stop_reason.clone() } else { None },
            ..Default::default()
        };
        if ev.finish == Some(FinishReason::Error) {
            // The pipeline turns an ERROR finish into a fault before any choice sees it.
            return None;
        }
        let applied = state.apply(tok, opts, ev);
        assert_eq!(applied.finished, state.is_finished(), "Applied.finished agrees with the state");
        if streaming {
            logprobs.append(&mut state.pending_logprobs);
            let delta = state.take_parsed_delta(opts);
            if state.parser.is_some() {
                client.take(delta);
            } else {
                assert!(delta.reasoning.is_empty() && delta.calls.is_empty(), "plain text choice with parse output");
                client_text.push_str(&delta.content);
            }
        }
    }
    assert!(state.is_finished(), "the last event finishes the choice");
    if !streaming {
        logprobs.append(&mut state.pending_logprobs);
        let delta = state.take_parsed_delta(opts);
        if state.parser.is_some() {
            client.take(delta);
        } else {
            client_text.push_str(&delta.content);
        }
    }
    match &state.parser {
        Some(p) => client.assert_matches(&p.parsed, if streaming { "streamed" } else { "collected" }),
        None => assert_eq!(client_text, state.text, "streamed text is the final text"),
    }
    Some(Outcome {
        text: state.text.clone(),
        token_ids: state.token_ids.clone(),
        finish: state.finish.clone(),
        tool_calls: state.ended_in_tool_calls(),
        parsed: state.parser.as_ref().map(|p| p.parsed.clone()),
        logprobs,
    })
}
