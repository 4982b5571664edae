//! Completion responses from the pipeline's events: `text_completion` SSE payloads (one per
//! output delta and one finishing each choice, the echoed prompt in a choice's first, a usage
//! chunk when asked), or one body.

use super::render::{
    finish_reason, next_text_offset, push_completion_logprobs, push_done, push_header, push_stop_reason,
    push_stream_error, push_usage,
};
use crate::api::invalid::Names;
use crate::api::sink::{Format, SseOut};
use crate::error::ApiError;
use crate::pipeline::choice::{Finish, TokenLogprob};
use crate::pipeline::events::{Collected, Event, Usage};
use crate::pipeline::params::RequestParams;
use shardgate_util::json::{push_int, push_str};

pub struct CompletionFormat {
    id: String,
    created: u64,
    model: String,
    usage_field: bool,
    /// `logprobs` (top count) when asked for.
    logprobs: Option<usize>,
    echo: bool,
    n: u32,
    /// Prompt texts, for echo.
    prompt_texts: Vec<String>,
    /// Per choice of a streamed response.
    streams: Vec<StreamPosition>,
}

/// How far a choice's stream got.
#[derive(Debug, Clone, Default)]
struct StreamPosition {
    /// The prompt went out (with the choice's first chunk).
    echoed: bool,
    /// The prompt's logprobs, until they go out with it.
    prompt_rows: Vec<TokenLogprob>,
    /// The next logprobs text offset.
    text_offset: usize,
}

impl CompletionFormat {
    /// `usage_field`: every chunk carries `"usage"`; `prompt_texts`: per prompt, for echo.
    pub fn new(
        id: String,
        created: u64,
        model: String,
        usage_field: bool,
        params: &RequestParams,
        prompt_texts: Vec<String>,
    ) -> Self {
        let choices = prompt_texts.len() * params.n as usize;
        CompletionFormat {
            id,
            created,
            model,
            usage_field,
            logprobs: params.output.logprobs.map(|k| k as usize),
            echo: params.output.echo,
            n: params.n,
            prompt_texts,
            streams: vec![StreamPosition::default(); choices],
        }
    }

    fn chunk(
        &self,
        choice: u32,
        text: &str,
        logprobs: Option<&str>,
        finish: Option<&Finish>,
        usage: Option<&Usage>,
    ) -> String {
        let mut s = String::with_capacity(192 + text.len());
        s.push('{');
        push_header(&mut s, &self.id, "text_completion", self.created, &self.model);
        s.push_str(",\"choices\":[{\"index\":");
        push_int(&mut s, choice);
        s.push_str(",\"text\":");
        push_str(&mut s, text);
        s.push_str(",\"logprobs\":");
        s.push_str(logprobs.unwrap_or("null"));
        s.push_str(",\"finish_reason\":");
        match finish {
            Some(f) => push_str(&mut s, finish_reason(Some(f), false)),
            None => s.push_str("null"),
        }
        s.push(',');
        push_stop_reason(&mut s, finish.and_then(|f| f.stop_reason.as_ref()));
        s.push_str("}]");
        if self.usage_field {
            s.push_str(",\"usage\":");
            match usage {
                Some(u) => push_usage(&mut s, u),
                None => s.push_str("null"),
            }
        }
        s.push('}');
        s
    }

    fn prompt_text(&self, choice: u32) -> &str {
        self.prompt_texts.get((choice / self.n.max(1)) as usize).map_or("", String::as_str)
    }

    /// The text and logprobs a stream chunk carries: the first one of a choice also carries the
    /// echoed prompt (vLLM sends prompt and first output together). Advances the choice's
    /// text offset.
    fn stream_piece(&mut self, choice: u32, text: &str, logprobs: &[TokenLogprob]) -> (String, Option<String>) {
        let echo = self.echo;
        let Some(st) = self.streams.get_mut(choice as usize) else { return (text.to_string(), None) };
        let (text, rows): (String, Vec<TokenLogprob>) = if echo && !st.echoed {
            st.echoed = true;
            let mut rows = std::mem::take(&mut st.prompt_rows);
            rows.extend_from_slice(logprobs);
            let prompt = self.prompt_texts.get((choice / self.n.max(1)) as usize).map_or("", String::as_str);
            (format!("{prompt}{text}"), rows)
        } else {
            (text.to_string(), logprobs.to_vec())
        };
        let lp = self.logprobs.map(|top| {
            let mut s = String::new();
            push_completion_logprobs(&mut s, &rows, st.text_offset, top);
            st.text_offset = next_text_offset(&rows, st.text_offset);
            s
        });
        (text, lp)
    }

    fn usage_chunk(&self, usage: &Usage) -> String {
        let mut s = String::with_capacity(256);
        s.push('{');
        push_header(&mut s, &self.id, "text_completion", self.created, &self.model);
        s.push_str(",\"choices\":[],\"usage\":");
        push_usage(&mut s, usage);
        s.push('}');
        s
    }

    fn push_choice(&self, s: &mut String, index: usize, c: &Collected) {
        s.push_str("{\"index\":");
        push_int(s, index);
        s.push_str(",\"text\":");
        let echoed = if self.echo { self.prompt_text(index as u32) } else { "" };
        if echoed.is_empty() {
            push_str(s, &c.content);
        } else {
            push_str(s, &format!("{echoed}{}", c.content));
        }
        s.push_str(",\"logprobs\":");
        match self.logprobs {
            Some(top) => {
                // Prompt logprobs exist only with echo.
                let rows: Vec<TokenLogprob> = c.prompt_logprobs.iter().chain(&c.logprobs).cloned().collect();
                push_completion_logprobs(s, &rows, 0, top)
            }
            None => s.push_str("null"),
        }
        s.push_str(",\"finish_reason\":");
        push_str(s, finish_reason(c.finish.as_ref(), false));
        s.push(',');
        push_stop_reason(s, c.finish.as_ref().and_then(|f| f.stop_reason.as_ref()));
        s.push('}');
    }
}

impl Format for CompletionFormat {
    fn stream(&mut self, event: &Event, out: &mut SseOut) {
        match event {
            Event::Start { .. } => {}
            Event::PromptLogprobs { choice, rows } => {
                if let Some(st) = self.streams.get_mut(*choice as usize).filter(|st| !st.echoed) {
                    st.prompt_rows.extend_from_slice(rows);
                }
            }
            Event::Delta(d) => {
                let (text, lp) = self.stream_piece(d.choice, &d.output.content, &d.logprobs);
                out.push(self.chunk(d.choice, &text, lp.as_deref(), None, d.usage.as_ref()));
            }
            Event::Finished(f) => {
                let (text, _) = self.stream_piece(f.choice, "", &[]);
                out.push(self.chunk(f.choice, &text, None, Some(&f.finish), f.usage.as_ref()));
            }
            Event::Usage(u) if self.usage_field => out.push(self.usage_chunk(u)),
            Event::Usage(_) => {}
        }
    }

    fn end_stream(&mut self, out: &mut SseOut) {
        push_done(out);
    }

    fn client_error(&self, e: &ApiError) -> ApiError {
        Names::COMPLETIONS.engine_error(e)
    }

    fn stream_error(&mut self, e: &ApiError, out: &mut SseOut) {
        push_stream_error(e, out);
    }

    fn body(&mut self, choices: &[Collected], usage: &Usage) -> String {
        let mut s = String::with_capacity(256 + choices.iter().map(|c| c.content.len() + 128).sum::<usize>());
        s.push('{');
        push_header(&mut s, &self.id, "text_completion", self.created, &self.model);
        s.push_str(",\"choices\":[");
        for (k, c) in choices.iter().enumerate() {
            if k > 0 {
                s.push(',');
            }
            self.push_choice(&mut s, k, c);
        }
        s.push_str("],\"usage\":");
        push_usage(&mut s, usage);
        s.push('}');
        s
    }
}

#[cfg(test)]
mod tests {
    use serde_json::Value;

    use super::*;
    use crate::engine::FinishReason;
    use crate::pipeline::events::{Collector, Delta, Finished};
    use crate::pipeline::params::OutputOptions;
    use crate::pipeline::parse::ParsedDelta;

    fn row(token: &str, logprob: Option<f32>) -> TokenLogprob {
        let alternatives = logprob.map(|l| vec![(token.to_string(), l)]).unwrap_or_default();
        TokenLogprob { token: token.into(), logprob, alternatives }
    }

    /// Echo with logprobs: the prompt (its first token unscored) and the output, in pieces.
    fn events(pieces: &[&str]) -> Vec<Event> {
        let mut out = vec![
            Event::Start { choice: 0 },
            Event::PromptLogprobs { choice: 0, rows: vec![row("Say", None), row(" hi", Some(-1.0))] },
        ];
        for piece in pieces {
            let logprobs = vec![row(piece, Some(-0.5))];
            out.push(Event::Delta(Delta {
                choice: 0,
                output: ParsedDelta::text(piece.to_string()),
                logprobs,
                usage: None,
            }));
        }
        let finish = Finish { reason: FinishReason::Length, stop_reason: None };
        out.push(Event::Finished(Finished { choice: 0, finish, tool_calls: false, usage: None }));
        out.push(Event::Usage(Usage { prompt_tokens: 2, completion_tokens: pieces.len() as u64, cached_tokens: 0 }));
        out
    }

    fn format() -> CompletionFormat {
        let params = crate::pipeline::params::RequestParams {
            n: 1,
            sampling: Default::default(),
            output: OutputOptions { logprobs: Some(1), echo: true, ..Default::default() },
            stream: true,
            running_usage: false,
            priority: 0,
            cache_salt: None,
            max_tokens_requested: None,
            max_tokens_client: None,
        };
        CompletionFormat::new("cmpl-test".into(), 1, "m".into(), false, &params, vec!["Say hi".into()])
    }

    /// Text, logprob tokens and text offsets, and the finish reason a client ends up with.
    fn accumulate(choices: &[&Value]) -> (String, Vec<String>, Vec<u64>, String) {
        let (mut text, mut tokens, mut offsets, mut finish) = (String::new(), Vec::new(), Vec::new(), String::new());
        for c in choices {
            text.push_str(c["text"].as_str().expect("text"));
            for t in c["logprobs"]["tokens"].as_array().into_iter().flatten() {
                tokens.push(t.as_str().expect("token").to_string());
            }
            offsets.extend(c["logprobs"]["text_offset"].as_array().into_iter().flatten().filter_map(Value::as_u64));
            if let Some(f) = c["finish_reason"].as_str() {
                finish = f.into();
            }
        }
        (text, tokens, offsets, finish)
    }

    #[test]
    fn streamed_chunks_add_up_to_the_one_shot_body() {
        let pieces = ["Hel", "lo", " wörld"];
        let mut f = format();
        let mut out = SseOut::default();
        for e in events(&pieces) {
            f.stream(&e, &mut out);
        }
        let payloads: Vec<String> = out.drain().map(|(_, data)| data).collect();
        let chunks: Vec<Value> = payloads.iter().map(|p| serde_json::from_str(p).expect("JSON")).collect();
        let streamed = accumulate(&chunks.iter().map(|c| &c["choices"][0]).collect::<Vec<_>>());
        let mut collector = Collector::default();
        for e in events(&pieces) {
            collector.add(e);
        }
        let body: Value = serde_json::from_str(&format().body(&collector.choices, &collector.usage)).expect("JSON");
        let whole = accumulate(&[&body["choices"][0]]);
        assert_eq!(streamed, whole);
        assert_eq!(whole.0, "Say hiHello wörld", "the prompt, echoed, then the output");
        assert_eq!(whole.1, vec!["Say", " hi", "Hel", "lo", " wörld"]);
        assert_eq!(whole.2, vec![0, 3, 6, 9, 11], "offsets run on across chunks");
        assert_eq!(whole.3, "length");
        assert_eq!(chunks.len(), 4, "one chunk per delta (the first with the prompt) and the finish");
    }
}
