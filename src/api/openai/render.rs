//! JSON fragments shared by the chat and completions renderers, and how their streams end.

use crate::api::sink::SseOut;
use crate::engine::{FinishReason, StopReason};
use crate::error::{ApiError, Envelope};
use crate::pipeline::choice::{Finish, TokenLogprob};
use crate::pipeline::events::Usage;
use shardgate_util::json::{push_f64, push_int, push_str};

/// `"id":"…","object":"…","created":…,"model":"…"` (no braces).
pub fn push_header(out: &mut String, id: &str, object: &str, created: u64, model: &str) {
    out.push_str("\"id\":");
    push_str(out, id);
    out.push_str(",\"object\":\"");
    out.push_str(object);
    out.push_str("\",\"created\":");
    push_int(out, created);
    out.push_str(",\"model\":");
    push_str(out, model);
}

/// `finish_reason`: vLLM's names, and `tool_calls` for a choice that stopped having called tools.
pub fn finish_reason(finish: Option<&Finish>, tool_calls: bool) -> &'static str {
    match finish.map(|f| f.reason) {
        _ if tool_calls => "tool_calls",
        None | Some(FinishReason::Stop) => "stop",
        Some(FinishReason::Length) => "length",
        Some(FinishReason::Abort) => "abort",
        Some(FinishReason::Repetition) => "repetition",
        Some(FinishReason::Error) => "error",
    }
}

/// vLLM's `stop_reason`: the matched stop string, the stop token id, or null.
pub fn push_stop_reason(out: &mut String, stop_reason: Option<&StopReason>) {
    out.push_str("\"stop_reason\":");
    match stop_reason {
        None => out.push_str("null"),
        Some(StopReason::TokenId(id)) => push_int(out, *id),
        Some(StopReason::Text(s)) => push_str(out, s),
    }
}

pub fn push_usage(out: &mut String, u: &Usage) {
    out.push_str("{\"prompt_tokens\":");
    push_int(out, u.prompt_tokens);
    out.push_str(",\"total_tokens\":");
    push_int(out, u.prompt_tokens + u.completion_tokens);
    out.push_str(",\"completion_tokens\":");
    push_int(out, u.completion_tokens);
    out.push_str(",\"prompt_tokens_details\":{\"cached_tokens\":");
    push_int(out, u.cached_tokens);
    out.push_str("}}");
}

/// OpenAI never reports a logprob below this.
const LOGPROB_FLOOR: f64 = -9999.0;

fn push_logprob(out: &mut String, lp: f32) {
    push_f64(out, (lp as f64).max(LOGPROB_FLOOR));
}

fn push_bytes(out: &mut String, token: &str) {
    out.push('[');
    for (i, b) in token.bytes().enumerate() {
        if i > 0 {
            out.push(',');
        }
        push_int(out, b);
    }
    out.push(']');
}

/// Chat `logprobs`: `{"content":[{"token","logprob","bytes","top_logprobs":[…]}]}`, with the
/// first `top` alternatives of each position (vLLM's order: sampled token first).
pub fn push_chat_logprobs(out: &mut String, rows: &[TokenLogprob], top: usize) {
    out.push_str("{\"content\":[");
    for (i, row) in rows.iter().enumerate() {
        if i > 0 {
            out.push(',');
        }
        out.push_str("{\"token\":");
        push_str(out, &row.token);
        out.push_str(",\"logprob\":");
        push_logprob(out, row.logprob.unwrap_or(f32::NEG_INFINITY));
        out.push_str(",\"bytes\":");
        push_bytes(out, &row.token);
        out.push_str(",\"top_logprobs\":[");
        for (k, (token, lp)) in row.alternatives.iter().take(top).enumerate() {
            if k > 0 {
                out.push(',');
            }
            out.push_str("{\"token\":");
            push_str(out, token);
            out.push_str(",\"logprob\":");
            push_logprob(out, *lp);
            out.push_str(",\"bytes\":");
            push_bytes(out, token);
            out.push('}');
        }
        out.push_str("]}");
    }
    out.push_str("]}");
}

/// The text offset after `rows` starting at `offset_base` (characters, as Python counts).
pub fn next_text_offset(rows: &[TokenLogprob], offset_base: usize) -> usize {
    offset_base + rows.iter().map(|r| r.token.chars().count()).sum::<usize>()
}

/// Completions `logprobs`: parallel lists, `text_offset` counted from `offset_base`; each
/// position's `top_logprobs` has the first `top + 1` alternatives keyed by their text (two
/// tokens with one text collapse into one key holding the later value, as a Python dict does).
pub fn push_completion_logprobs(out: &mut String, rows: &[TokenLogprob], offset_base: usize, top: usize) {
    out.push_str("{\"text_offset\":[");
    let mut offset = offset_base;
    for (i, row) in rows.iter().enumerate() {
        if i > 0 {
            out.push(',');
        }
        push_int(out, offset);
        offset += row.token.chars().count();
    }
    out.push_str("],\"token_logprobs\":[");
    for (i, row) in rows.iter().enumerate() {
        if i > 0 {
            out.push(',');
        }
        match row.logprob {
            Some(lp) => push_logprob(out, lp),
            None => out.push_str("null"),
        }
    }
    out.push_str("],\"tokens\":[");
    for (i, row) in rows.iter().enumerate() {
        if i > 0 {
            out.push(',');
        }
        push_str(out, &row.token);
    }
    out.push_str("],\"top_logprobs\":[");
    for (i, row) in rows.iter().enumerate() {
        if i > 0 {
            out.push(',');
        }
        if row.logprob.is_none() {
            out.push_str("null");
            continue;
        }
        let mut keyed: Vec<(&str, f32)> = Vec::with_capacity(top + 1);
        for (token, lp) in row.alternatives.iter().take(top + 1) {
            match keyed.iter_mut().find(|(t, _)| *t == token.as_str()) {
                Some(entry) => entry.1 = *lp,
                None => keyed.push((token, *lp)),
            }
        }
        out.push('{');
        for (k, (token, lp)) in keyed.iter().enumerate() {
            if k > 0 {
                out.push(',');
            }
            push_str(out, token);
            out.push(':');
            push_logprob(out, *lp);
        }
        out.push('}');
    }
    out.push_str("]}");
}

/// A chat or completions stream ends with `data: [DONE]`.
pub fn push_done(out: &mut SseOut) {
    out.push("[DONE]".to_string());
}

/// A failure after a chat or completions stream began: the error envelope as one more event,
/// then `[DONE]` (the SDKs raise on an `error` payload).
pub fn push_stream_error(e: &ApiError, out: &mut SseOut) {
    out.push(e.to_json_in(Envelope::OpenAi));
    push_done(out);
}
