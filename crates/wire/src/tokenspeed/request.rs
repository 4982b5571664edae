//! Client → engine messages: ADD (`TokenizedGenerateReqInput`) and ABORT.
//!
//! ADD is msgspec `array_like` + `tag`: element 0 is the class name, the fields follow in
//! declaration order, trailing fields may be left off (they take their defaults). We send the
//! 11-element prefix up to `stream`, as SMG does; everything after it is multimodal, session or
//! disaggregation state a text request leaves at its default. The nested `SamplingParams` goes
//! out whole (29 fields) with `is_normalized = false`, so the engine runs its own normalization
//! (greedy collapse, top-k sentinel, stop-string defaults) exactly as for its own front end.

use std::fmt;

use super::super::msgpack::Writer;
use super::{ENGINE_REPETITION_PENALTY_MAX, ENGINE_TOP_K_MAX};
use crate::{Constraint, EngineRequest, SamplingParams};
use shardgate_util::json::py_float;

/// The tag (element 0) of an ADD payload.
pub const ADD_TAG: &str = "TokenizedGenerateReqInput";

/// Elements of our ADD array: the tag and the fields `rid` … `stream`.
const ADD_ELEMENTS: usize = 11;

/// Fields of TokenSpeed 0.1.1's `SamplingParams`.
const SAMPLING_FIELDS: usize = 29;

/// An `EngineRequest` the TokenSpeed wire cannot carry faithfully. Checked before anything is
/// sent, so the gateway can answer 400 instead of the engine aborting the request with a reason
/// that never reaches the client (or, worse, silently doing something else).
#[derive(Debug, Clone, PartialEq)]
pub enum Unsupported {
    /// More than the sampled token's logprob (`logprobs` above 1): the wire returns one value
    /// per token and the engine aborts `top_logprobs_num > 0`.
    TopLogprobs(i32),
    /// Prompt logprobs (completions `echo` with `logprobs`): not on the output wire.
    PromptLogprobs,
    /// No field for it; dropping it would sample from the whole vocabulary.
    AllowedTokenIds,
    /// No field for it; dropping it would let the banned words through.
    BadWords,
    /// No field for it; dropping it would share prefix-cache entries the salt keeps apart.
    CacheSalt,
    /// No scheduling priority on this engine.
    Priority(i32),
    /// The engine's fused top-k kernel stops at 127.
    TopK(i32),
    /// The engine caps `repetition_penalty` at 2.
    RepetitionPenalty(f64),
    /// Images: this codec does not write TokenSpeed's multimodal fields, and for MRoPE models
    /// (an `image_grid_thw` field) the position tensors are not derivable on this wire at all.
    Multimodal { mrope: bool },
}

impl Unsupported {
    /// The request parameter to name in the 400 (the API field that usually sets it).
    pub fn param(&self) -> &'static str {
        match self {
            Unsupported::TopLogprobs(_) => "top_logprobs",
            Unsupported::PromptLogprobs => "echo",
            Unsupported::AllowedTokenIds => "allowed_token_ids",
            Unsupported::BadWords => "bad_words",
            Unsupported::CacheSalt => "cache_salt",
            Unsupported::Priority(_) => "priority",
            Unsupported::TopK(_) => "top_k",
            Unsupported::RepetitionPenalty(_) => "repetition_penalty",
            Unsupported::Multimodal { .. } => "messages",
        }
    }
}

impl fmt::Display for Unsupported {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        const OVER: &str = "over the TokenSpeed ZMQ backend";
        match self {
            // SMG's texts for the two logprob cases (SMG's documented "... not supported over the
            // TokenSpeed ZMQ backend").
            Unsupported::TopLogprobs(_) => write!(f, "top_logprobs are not supported {OVER}"),
            Unsupported::PromptLogprobs => write!(f, "prompt logprobs are not supported {OVER}"),
            Unsupported::AllowedTokenIds => write!(f, "allowed_token_ids are not supported {OVER}"),
            Unsupported::BadWords => write!(f, "bad_words are not supported {OVER}"),
            Unsupported::CacheSalt => write!(f, "cache_salt is not supported {OVER}"),
            Unsupported::Priority(_) => write!(f, "priority is not supported {OVER}"),
            // The engine's own validation texts (`SamplingParams.verify`).
            Unsupported::TopK(k) => {
                write!(f, "top_k must be < {} (fused kernel limit) or -1 (disable), got {k}.", ENGINE_TOP_K_MAX + 1)
            }
            Unsupported::RepetitionPenalty(p) => {
                write!(f, "repetition_penalty must be in (0, 2], got {}.", py_float(*p))
            }
            // SMG's text for MRoPE models.
            Unsupported::Multimodal { mrope: true } => write!(
                f,
                "MRoPE position tensors are not derivable over the TokenSpeed ZMQ wire yet; use the gRPC transport for this model"
            ),
            Unsupported::Multimodal { mrope: false } => write!(f, "multimodal inputs are not supported {OVER}"),
        }
    }
}

impl std::error::Error for Unsupported {}

/// Whether the TokenSpeed wire can carry `req`. `encode_add` runs the same check; call this
/// first to reject a request before choosing a worker or rank.
pub fn check(req: &EngineRequest) -> Result<(), Unsupported> {
    let s = &req.sampling;
    if let Some(k) = s.logprobs.filter(|&k| !(0..=1).contains(&k)) {
        return Err(Unsupported::TopLogprobs(k));
    }
    if s.prompt_logprobs.is_some() {
        return Err(Unsupported::PromptLogprobs);
    }
    if s.allowed_token_ids.is_some() {
        return Err(Unsupported::AllowedTokenIds);
    }
    if !s.bad_words_token_ids.is_empty() {
        return Err(Unsupported::BadWords);
    }
    if req.cache_salt.is_some() {
        return Err(Unsupported::CacheSalt);
    }
    if req.priority != 0 {
        return Err(Unsupported::Priority(req.priority));
    }
    if s.top_k > ENGINE_TOP_K_MAX {
        return Err(Unsupported::TopK(s.top_k));
    }
    if s.repetition_penalty > ENGINE_REPETITION_PENALTY_MAX {
        return Err(Unsupported::RepetitionPenalty(s.repetition_penalty));
    }
    if !req.mm_features.is_empty() {
        let mrope = req
            .mm_features
            .iter()
            .flat_map(|f| f.fields.iter().flat_map(|fs| fs.iter()))
            .any(|f| matches!(f.key, "image_grid_thw" | "video_grid_thw"));
        return Err(Unsupported::Multimodal { mrope });
    }
    Ok(())
}

/// Encodes an ADD payload (sent as `[identity, REQUEST_ADD, payload]`). `stream = true` gets a
/// frame every engine step; `false` only at the first token, every 50 tokens and at the finish,
/// which delays client-side stop strings by up to 50 tokens. Writes nothing on error.
pub fn encode_add(req: &EngineRequest, stream: bool, out: &mut Vec<u8>) -> Result<(), Unsupported> {
    check(req)?;
    let mut w = Writer::new(out);
    w.array(ADD_ELEMENTS);
    w.str(ADD_TAG);
    w.str(&req.request_id); // 1 rid
    w.nil(); // 2 http_worker_ipc
    w.nil(); // 3 input_text
    w.array(req.prompt_token_ids.len()); // 4 input_ids
    for &t in req.prompt_token_ids.iter() {
        w.uint(t as u64);
    }
    encode_sampling_params(&req.sampling, &mut w); // 5 sampling_params
    w.bool(req.sampling.logprobs.is_some()); // 6 return_logprob: the sampled token's logprob
    w.int(-1); // 7 logprob_start_len: no prompt logprobs
    w.uint(0); // 8 top_logprobs_num
    w.nil(); // 9 token_ids_logprob
    w.bool(stream); // 10 stream
    Ok(())
}

/// TokenSpeed's `SamplingParams`, all 29 positions, un-normalized.
fn encode_sampling_params(p: &SamplingParams, w: &mut Writer<'_>) {
    w.array(SAMPLING_FIELDS);
    w.uint(p.max_tokens as u64); // 0 max_new_tokens
    w.nil(); // 1 stop: stop strings are matched by the gateway
    if p.stop_token_ids.is_empty() {
        w.nil(); // 2 stop_token_ids
    } else {
        w.array(p.stop_token_ids.len());
        for &id in &p.stop_token_ids {
            w.uint(id as u64);
        }
    }
    w.f64(p.temperature); // 3
    w.f64(p.top_p); // 4
                    // vLLM disables top-k with 0 (or -1); TokenSpeed only with -1 and aborts 0.
    w.int(if p.top_k <= 0 { -1 } else { p.top_k as i64 }); // 5 top_k
    w.f64(p.min_p); // 6
    w.f64(p.frequency_penalty); // 7
    w.f64(p.presence_penalty); // 8
    w.f64(p.repetition_penalty); // 9
    w.uint(p.min_tokens as u64); // 10 min_new_tokens (validated by the engine, not enforced)
                                 // 11 json_schema, 12 regex, 13 ebnf, 14 structural_tag: at most one set.
    let (json, regex, ebnf, tag) = match &p.constraint {
        Some(Constraint::JsonSchema(s)) => (Some(s.as_str()), None, None, None),
        Some(Constraint::JsonObject) => (Some(r#"{"type":"object"}"#), None, None, None),
        Some(Constraint::Regex(s)) => (None, Some(s.as_str()), None, None),
        Some(Constraint::Grammar(s)) => (None, None, Some(s.as_str()), None),
        Some(Constraint::StructuralTag(s)) => (None, None, None, Some(s.as_str())),
        None => (None, None, None, None),
    };
    for v in [json, regex, ebnf, tag] {
        match v {
            Some(s) => w.str(s),
            None => w.nil(),
        }
    }
    w.bool(p.ignore_eos); // 15
    w.bool(true); // 16 skip_special_tokens: the gateway detokenizes
    w.bool(true); // 17 spaces_between_special_tokens
    w.bool(false); // 18 no_stop_trim
    w.nil(); // 19 thinking_budget
    w.nil(); // 20 custom_params
    w.nil(); // 21 stream_interval: the server's
    if p.logit_bias.is_empty() {
        w.nil(); // 22 logit_bias
    } else {
        // Keys are token ids as decimal strings (`dict[str, float]`).
        w.map(p.logit_bias.len());
        let mut key = itoa::Buffer::new();
        for &(id, bias) in &p.logit_bias {
            w.str(key.format(id));
            w.f64(bias);
        }
    }
    match p.seed {
        Some(seed) => w.int(seed), // 23 seed; nil makes the engine derive one from the rid
        None => w.nil(),
    }
    w.nil(); // 24 logprobs: the engine accepts only nil or 0, and return_logprob is the switch
    w.uint(1); // 25 n: the gateway fans out n > 1 itself
    w.nil(); // 26 stop_strs
    w.uint(0); // 27 stop_str_max_len
    w.bool(false); // 28 is_normalized: let the engine normalize
}

/// Encodes an ABORT payload: an array of request ids. The engine sends no terminal frame for an
/// aborted request it knows, and remembers an id it does not know for 300 s.
pub fn encode_abort<S: AsRef<str>>(request_ids: &[S], out: &mut Vec<u8>) {
    let mut w = Writer::new(out);
    w.array(request_ids.len());
    for id in request_ids {
        w.str(id.as_ref());
    }
}

/// A no-op message for liveness probes: an ABORT of no ids (send with `REQUEST_ABORT`). The
/// engine decodes it to nothing and logs nothing, and a send to an engine that went away fails
/// (no connection holds its identity). (The wire has no UTILITY call to use instead.)
pub fn encode_ping(out: &mut Vec<u8>) {
    encode_abort::<&str>(&[], out);
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::msgpack::{Kind, Reader};
    use std::rc::Rc;

    fn request(sampling: SamplingParams) -> EngineRequest {
        EngineRequest {
            request_id: "req-1".into(),
            prompt_token_ids: Rc::from(vec![1u32, 2, 3]),
            sampling,
            arrival_time: 0.0,
            cache_salt: None,
            priority: 0,
            mm_features: Default::default(),
        }
    }

    /// Element `i` of the sampling array of an encoded ADD, as raw bytes.
    fn sampling_field(add: &[u8], i: usize) -> Vec<u8> {
        let mut r = Reader::new(add);
        r.array_len().unwrap();
        for _ in 0..5 {
            r.skip().unwrap();
        }
        assert_eq!(r.array_len().unwrap(), SAMPLING_FIELDS);
        for _ in 0..i {
            r.skip().unwrap();
        }
        r.raw_value().unwrap().to_vec()
    }

    #[test]
    fn add_layout_matches_the_reference_prefix() {
        let mut out = Vec::new();
        let sampling = SamplingParams { max_tokens: 8, stop_token_ids: vec![2], ..Default::default() };
        encode_add(&request(sampling), true, &mut out).unwrap();
        // `9b`, the tag, rid, two nils, [1,2,3], `dc 001d`: the reference's bytes up to the
        // sampling values.
        let prefix = "9bb9546f6b656e697a656447656e6572617465526571496e707574a57265712d31c0c093010203dc001d";
        let hex: String = out.iter().map(|b| format!("{b:02x}")).collect();
        assert!(hex.starts_with(prefix), "{hex}");
        assert!(hex.ends_with("c2ff00c0c3"), "return_logprob F, -1, 0, nil, stream T: {hex}");
        assert_eq!(sampling_field(&out, 0), [0x08]);
        assert_eq!(sampling_field(&out, 2), [0x91, 0x02]);
        assert_eq!(sampling_field(&out, 5), [0xff], "top_k 0 goes out as -1");
        assert_eq!(sampling_field(&out, 25), [0x01], "n");
        assert_eq!(sampling_field(&out, 28), [0xc2], "is_normalized");
    }

    #[test]
    fn logprobs_seed_and_logit_bias() {
        let sampling = SamplingParams {
            logprobs: Some(1),
            seed: Some(-3),
            top_k: 20,
            logit_bias: vec![(50, -100.0)],
            ..Default::default()
        };
        let mut out = Vec::new();
        encode_add(&request(sampling), false, &mut out).unwrap();
        assert!(out.ends_with(&[0xc3, 0xff, 0x00, 0xc0, 0xc2]), "return_logprob T, stream F");
        assert_eq!(sampling_field(&out, 5), [20]);
        assert_eq!(sampling_field(&out, 23), [0xfd], "seed -3");
        let bias = sampling_field(&out, 22);
        let mut r = Reader::new(&bias);
        assert_eq!(r.map_len().unwrap(), 1);
        assert_eq!(r.str().unwrap(), "50");
        assert_eq!(r.f64().unwrap(), -100.0);
        assert_eq!(Reader::new(&sampling_field(&out, 24)).peek_kind().unwrap(), Kind::Nil);
    }

    /// A request with one item (an image; a video's grid key reads the same) whose only field is `key`.
    fn with_image(key: &'static str) -> EngineRequest {
        use crate::mm::{Feature, Field, Layout, Modality, Tensor};
        let field =
            Field { key, data: Tensor::i64(vec![3], &[1, 2, 2]).into(), layout: Layout::Batched, keep_on_cpu: true };
        let image = Feature {
            modality: Modality::Image,
            fields: Some(vec![field].into()),
            hash: "h".into(),
            offset: 0,
            length: 1,
            is_embed: None,
        };
        EngineRequest { mm_features: vec![image].into(), ..request(SamplingParams::default()) }
    }

    #[test]
    fn unsupported_parameters_are_typed_errors_with_smgs_texts() {
        let cases: Vec<(EngineRequest, &str)> = vec![
            (
                request(SamplingParams { logprobs: Some(2), ..Default::default() }),
                "top_logprobs are not supported over the TokenSpeed ZMQ backend",
            ),
            (
                request(SamplingParams { prompt_logprobs: Some(0), ..Default::default() }),
                "prompt logprobs are not supported over the TokenSpeed ZMQ backend",
            ),
            (
                request(SamplingParams { allowed_token_ids: Some(vec![1]), ..Default::default() }),
                "allowed_token_ids are not supported over the TokenSpeed ZMQ backend",
            ),
            (
                request(SamplingParams { bad_words_token_ids: vec![vec![1]], ..Default::default() }),
                "bad_words are not supported over the TokenSpeed ZMQ backend",
            ),
            (
                EngineRequest { cache_salt: Some("s".into()), ..request(SamplingParams::default()) },
                "cache_salt is not supported over the TokenSpeed ZMQ backend",
            ),
            (
                EngineRequest { priority: 1, ..request(SamplingParams::default()) },
                "priority is not supported over the TokenSpeed ZMQ backend",
            ),
            (
                request(SamplingParams { top_k: 128, ..Default::default() }),
                "top_k must be < 128 (fused kernel limit) or -1 (disable), got 128.",
            ),
            (
                request(SamplingParams { repetition_penalty: 2.5, ..Default::default() }),
                "repetition_penalty must be in (0, 2], got 2.5.",
            ),
            (
                with_image("image_grid_thw"),
                "MRoPE position tensors are not derivable over the TokenSpeed ZMQ wire yet; use the gRPC transport for this model",
            ),
            (
                with_image("video_grid_thw"),
                "MRoPE position tensors are not derivable over the TokenSpeed ZMQ wire yet; use the gRPC transport for this model",
            ),
            (with_image("pixel_values"), "multimodal inputs are not supported over the TokenSpeed ZMQ backend"),
        ];
        for (req, text) in cases {
            let mut out = Vec::new();
            let e = encode_add(&req, true, &mut out).unwrap_err();
            assert_eq!(e.to_string(), text);
            assert!(out.is_empty(), "nothing written for {text}");
            assert_eq!(check(&req), Err(e));
        }
        for ok in [Some(0), Some(1), None] {
            assert!(check(&request(SamplingParams { logprobs: ok, top_k: 127, ..Default::default() })).is_ok());
        }
    }

    #[test]
    fn abort_and_ping() {
        let mut out = Vec::new();
        encode_abort(&["req-1"], &mut out);
        assert_eq!(out, [0x91, 0xa5, b'r', b'e', b'q', b'-', b'1']);
        let mut ping = Vec::new();
        encode_ping(&mut ping);
        assert_eq!(ping, [0x90]);
    }
}
