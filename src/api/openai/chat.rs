//! `POST /v1/chat/completions`.

use std::rc::Rc;

use super::render::{push_chat_logprobs, push_header, push_stop_reason, push_usage};
use super::tools::{self, ToolChoice};
use crate::api::fields::{Body, Fields};
use crate::error::ApiError;
use crate::http::response::Responder;
use crate::pipeline::choice::{ChoiceState, TokenLogprob};
use crate::pipeline::constraint::ForcedTool;
use crate::pipeline::generate::Generation;
use crate::pipeline::params::{self, Endpoint};
use crate::pipeline::parse::{ParseSpec, ParsedDelta};
use crate::pipeline::{conversation, generate, thinking, Format, Prompt, Usage};
use crate::shard::ShardCtx;
use shardgate_text::template::{ChatTemplate, RenderInput};
use shardgate_text::ModelAssets;
use shardgate_util::json::push_str;

pub async fn handle(ctx: &Rc<ShardCtx>, body: &[u8], r: &mut Responder<'_>) {
    let started = std::time::Instant::now();
    let Some(_permit) = generate::admit(ctx, crate::metrics::Endpoint::Chat, r).await else { return };
    match prepare(ctx, body, started) {
        Ok((g, format)) => generate::run(g, &format, r).await,
        Err(e) => {
            ctx.metrics().error(crate::metrics::Endpoint::Chat, crate::metrics::ErrorType::of(&e));
            tracing::info!("chat completion rejected: {}", e.message);
            let _ = r.send_error(&e).await;
        }
    }
}

/// Everything before dispatch: validation, template, tokenization, worker choice.
fn prepare(ctx: &Rc<ShardCtx>, body: &[u8], started: std::time::Instant) -> Result<(Generation, ChatFormat), ApiError> {
    let body = Body::parse(body)?;
    let f = body.fields();
    let model = super::models::resolve(ctx, &f)?;
    let mut params = params::parse(&f, Endpoint::Chat, &model)?;
    let template = ctx.chat_template(&model).map_err(ApiError::bad_request)?;
    check_mrope_over_tokenspeed(ctx, &model, &f)?;
    let RenderedChat { prompt: prompt_text, conversation, tools, tool_choice, thinking_on } =
        render_prompt(&model, &template, &f)?;
    let parse = parse_spec(ctx, &f, &model.served_name, tools, &tool_choice, thinking_on, &conversation)?;
    if let Some(forced) = &parse.forced {
        // vLLM keeps only the tool constraint when a call is forced (as SMG documents it too).
        let parallel = f.bool("parallel_tool_calls")?.unwrap_or(true);
        params.sampling.constraint = Some(crate::pipeline::constraint::tool_schema(forced, &parse.tools, parallel)?);
    } else if parse.tool_parser.is_some() || parse.reasoning_parser == Some("inkling") {
        // The parser needs to see its trigger tokens (under a JSON constraint there are none).
        params.output.skip_special_tokens = false;
    }
    let ids = ctx.encode(&model, &prompt_text, false).map_err(ApiError::internal)?;
    let link = ctx.pick_link(&ids).ok_or_else(|| ApiError::unavailable("no healthy worker is available"))?;
    params::check_max_tokens(&params, link.max_model_len())?;
    params::check_prompt_len(ids.len(), link.max_model_len(), "messages")?;
    let response_id = shardgate_util::ids::response_id("chatcmpl");
    let format = ChatFormat::new(
        response_id.clone(),
        shardgate_util::time::unix_time_s(),
        model.served_name.clone(),
        params.include_usage,
        params.output.logprobs.map(|k| k as usize),
    );
    let g = Generation {
        ctx: ctx.clone(),
        endpoint: crate::metrics::Endpoint::Chat,
        started,
        response_id,
        model,
        link,
        prompts: vec![Prompt { token_ids: Rc::from(ids), text: None }],
        params,
        parse,
    };
    Ok((g, format))
}

/// SMG's "Features and Limits": TokenSpeed's ZMQ wire has no field for MRoPE position
/// tensors, so an image or video for such a model cannot be served there.
fn check_mrope_over_tokenspeed(ctx: &ShardCtx, model: &ModelAssets, f: &Fields<'_>) -> Result<(), ApiError> {
    let tokenspeed =
        || ctx.shared.registry.snapshot().iter().any(|w| w.backend() == crate::config::Backend::Tokenspeed);
    let has_media = || {
        f.get("messages").and_then(serde_json::Value::as_array).is_some_and(|messages| {
            messages.iter().filter_map(|m| m.get("content").and_then(serde_json::Value::as_array)).flatten().any(
                |part| {
                    part.get("type")
                        .and_then(serde_json::Value::as_str)
                        .is_some_and(|t| matches!(t, "image_url" | "input_image" | "image" | "video_url" | "video"))
                },
            )
        })
    };
    if model.uses_mrope && has_media() && tokenspeed() {
        return Err(ApiError::bad_request(
            "MRoPE position tensors are not derivable over the TokenSpeed ZMQ wire yet; use the gRPC transport for this model",
        )
        .with_param("messages"));
    }
    Ok(())
}

/// A chat request's prompt, and what rendering it decided.
pub struct RenderedChat {
    pub prompt: String,
    pub conversation: serde_json::Value,
    pub tools: Vec<shardgate_parsers::tool::ToolSpec>,
    pub tool_choice: ToolChoice,
    pub thinking_on: bool,
}

/// Renders a chat request's prompt exactly as the endpoint does (also behind
/// `shardgate template`, to compare with transformers).
pub fn render_prompt(model: &ModelAssets, template: &ChatTemplate, f: &Fields<'_>) -> Result<RenderedChat, ApiError> {
    let messages = f.get("messages").ok_or_else(|| ApiError::invalid_param("messages", "'messages' is required"))?;
    let template_source = model.chat_template.as_deref().unwrap_or("");
    let conversation = conversation::normalize(messages, template_source)?;
    let add_generation_prompt = f.bool("add_generation_prompt")?.unwrap_or(true);
    let continue_final_message = f.bool("continue_final_message")?.unwrap_or(false);
    if add_generation_prompt && continue_final_message {
        return Err(ApiError::bad_request(
            "Cannot set both `continue_final_message` and `add_generation_prompt` to True.",
        ));
    }
    let tools = tools::parse_tools(f)?;
    let tool_choice = tools::parse_tool_choice(f, &tools)?;
    let mut kwargs = f.object("chat_template_kwargs")?.cloned().unwrap_or_default();
    let thinking_on = thinking::apply(f, template_source, &mut kwargs)?;
    let mut extra: Vec<(String, serde_json::Value)> =
        model.special_tokens.iter().map(|(k, v)| (k.clone(), serde_json::Value::String(v.clone()))).collect();
    extra.extend(kwargs);
    let prompt = template
        .render(&RenderInput {
            messages: &conversation,
            tools: f.get("tools").filter(|_| !tools.is_empty()),
            documents: f.get("documents"),
            add_generation_prompt,
            continue_final_message,
            extra: &extra,
        })
        .map_err(|e| ApiError::bad_request(e).with_param("messages"))?;
    Ok(RenderedChat { prompt, conversation, tools, tool_choice, thinking_on })
}

/// The parse stage this request gets: the model's reasoning parser (unless reasoning
/// separation is off), and its tool-call parser when tools may be called.
fn parse_spec(
    ctx: &ShardCtx,
    f: &Fields<'_>,
    model_name: &str,
    tools: Vec<shardgate_parsers::tool::ToolSpec>,
    tool_choice: &ToolChoice,
    thinking_on: bool,
    conversation: &serde_json::Value,
) -> Result<ParseSpec, ApiError> {
    let parsers = ctx.shared.parsers();
    let separate_reasoning = f.bool("separate_reasoning")?.unwrap_or(true);
    let tool_parser = if *tool_choice == ToolChoice::None || tools.is_empty() { None } else { parsers.tool };
    let forced = match tool_choice {
        ToolChoice::Required => Some(ForcedTool::Required),
        ToolChoice::Named(name) => Some(ForcedTool::Named(name.clone())),
        ToolChoice::None | ToolChoice::Auto => None,
    };
    Ok(ParseSpec {
        reasoning_parser: parsers.reasoning,
        tool_parser,
        tools,
        force_reasoning_start: thinking_on,
        separate_reasoning,
        model_name: model_name.to_string(),
        prior_tool_calls: tools::prior_tool_calls(conversation),
        forced,
    })
}

/// Renders chat completion responses and chunks.
pub struct ChatFormat {
    id: String,
    created: u64,
    model: String,
    /// `include_usage`: every chunk carries `"usage"` (null until the last).
    usage_field: bool,
    /// `top_logprobs` when logprobs were asked for.
    logprobs: Option<usize>,
}

impl ChatFormat {
    /// `usage_field`: every chunk carries `"usage"`; `logprobs`: the top logprobs asked for.
    pub fn new(id: String, created: u64, model: String, usage_field: bool, logprobs: Option<usize>) -> Self {
        ChatFormat { id, created, model, usage_field, logprobs }
    }
}

/// A non-streamed assistant message: content (null when only tool calls came back),
/// `reasoning_content` when there was reasoning, `tool_calls` when there were calls.
fn push_message(s: &mut String, c: &ChoiceState) {
    let (content, reasoning, calls) = match &c.parser {
        Some(p) => (p.parsed.content.as_str(), p.parsed.reasoning.as_str(), p.parsed.calls.as_slice()),
        None => (c.text.as_str(), "", &[][..]),
    };
    s.push_str("{\"role\":\"assistant\",\"content\":");
    if !calls.is_empty() && content.trim().is_empty() {
        s.push_str("null");
    } else {
        push_str(s, content);
    }
    if !reasoning.is_empty() {
        s.push_str(",\"reasoning_content\":");
        push_str(s, reasoning);
    }
    if !calls.is_empty() {
        s.push_str(",\"tool_calls\":[");
        for (i, call) in calls.iter().enumerate() {
            if i > 0 {
                s.push(',');
            }
            s.push_str("{\"id\":");
            push_str(s, &call.id);
            s.push_str(",\"type\":\"function\",\"function\":{\"name\":");
            push_str(s, &call.name);
            s.push_str(",\"arguments\":");
            push_str(s, &call.arguments);
            s.push_str("}}");
        }
        s.push(']');
    }
    s.push('}');
}

impl ChatFormat {
    /// A chunk whose delta is one text field.
    fn delta_chunk(
        &self,
        choice: u32,
        field: &str,
        text: &str,
        logprobs: &[TokenLogprob],
        usage: Option<&Usage>,
    ) -> String {
        let mut s = String::with_capacity(160 + text.len());
        self.chunk_open(&mut s, choice);
        s.push_str("\"delta\":{\"");
        s.push_str(field);
        s.push_str("\":");
        push_str(&mut s, text);
        s.push_str("},");
        self.push_logprobs(&mut s, logprobs);
        s.push_str(",\"finish_reason\":null");
        self.chunk_close(&mut s, usage);
        s
    }

    /// `{"id":…,"object":"chat.completion.chunk",…,"choices":[{"index":i,` (open).
    fn chunk_open(&self, out: &mut String, choice: u32) {
        out.push('{');
        push_header(out, &self.id, "chat.completion.chunk", self.created, &self.model);
        out.push_str(",\"choices\":[{\"index\":");
        shardgate_util::json::push_int(out, choice);
        out.push(',');
    }

    fn chunk_close(&self, out: &mut String, usage: Option<&Usage>) {
        out.push_str("}]");
        self.push_usage_field(out, usage);
        out.push('}');
    }

    fn push_usage_field(&self, out: &mut String, usage: Option<&Usage>) {
        if self.usage_field {
            out.push_str(",\"usage\":");
            match usage {
                Some(u) => push_usage(out, u),
                None => out.push_str("null"),
            }
        }
    }

    fn push_logprobs(&self, out: &mut String, rows: &[TokenLogprob]) {
        out.push_str("\"logprobs\":");
        match self.logprobs {
            Some(top) => push_chat_logprobs(out, rows, top),
            None => out.push_str("null"),
        }
    }
}

impl Format for ChatFormat {
    fn stream_open(&self, out: &mut Vec<String>, choice: u32, _prompt: &Prompt) {
        let mut s = String::with_capacity(160);
        self.chunk_open(&mut s, choice);
        s.push_str("\"delta\":{\"role\":\"assistant\",\"content\":\"\"},\"logprobs\":null,\"finish_reason\":null");
        self.chunk_close(&mut s, None);
        out.push(s);
    }

    fn stream_delta(
        &self,
        out: &mut Vec<String>,
        choice: &ChoiceState,
        delta: &ParsedDelta,
        logprobs: &[TokenLogprob],
        usage: Option<&Usage>,
    ) {
        if !delta.reasoning.is_empty() {
            out.push(self.delta_chunk(choice.index, "reasoning_content", &delta.reasoning, &[], usage));
        }
        if !delta.content.is_empty() || (!logprobs.is_empty() && delta.calls.is_empty()) {
            out.push(self.delta_chunk(choice.index, "content", &delta.content, logprobs, usage));
        }
        // One tool-call delta per chunk; id, type and name only on a call's first piece.
        for call in &delta.calls {
            let mut s = String::with_capacity(192 + call.arguments.len());
            self.chunk_open(&mut s, choice.index);
            s.push_str("\"delta\":{\"tool_calls\":[{\"index\":");
            shardgate_util::json::push_int(&mut s, call.index);
            if let Some(id) = &call.id {
                s.push_str(",\"id\":");
                push_str(&mut s, id);
                s.push_str(",\"type\":\"function\"");
            }
            s.push_str(",\"function\":{");
            if let Some(name) = &call.name {
                s.push_str("\"name\":");
                push_str(&mut s, name);
                s.push(',');
            }
            s.push_str("\"arguments\":");
            push_str(&mut s, &call.arguments);
            s.push_str("}}]},\"logprobs\":null,\"finish_reason\":null");
            self.chunk_close(&mut s, usage);
            out.push(s);
        }
    }

    fn stream_finish(&self, out: &mut Vec<String>, choice: &ChoiceState, usage: Option<&Usage>) {
        let mut s = String::with_capacity(192);
        self.chunk_open(&mut s, choice.index);
        s.push_str("\"delta\":{},\"logprobs\":null,\"finish_reason\":");
        push_str(&mut s, choice.finish_reason());
        s.push(',');
        push_stop_reason(&mut s, choice.finish.as_ref().and_then(|f| f.stop_reason.as_ref()));
        self.chunk_close(&mut s, usage);
        out.push(s);
    }

    fn stream_usage(&self, out: &mut Vec<String>, usage: &Usage) {
        let mut s = String::with_capacity(256);
        s.push('{');
        push_header(&mut s, &self.id, "chat.completion.chunk", self.created, &self.model);
        s.push_str(",\"choices\":[],\"usage\":");
        push_usage(&mut s, usage);
        s.push('}');
        out.push(s);
    }

    fn full(&self, choices: &[ChoiceState], _prompts: &[Prompt], usage: &Usage) -> String {
        let mut s = String::with_capacity(256 + choices.iter().map(|c| c.text.len() + 96).sum::<usize>());
        s.push('{');
        push_header(&mut s, &self.id, "chat.completion", self.created, &self.model);
        s.push_str(",\"choices\":[");
        for (k, c) in choices.iter().enumerate() {
            if k > 0 {
                s.push(',');
            }
            s.push_str("{\"index\":");
            shardgate_util::json::push_int(&mut s, c.index);
            s.push_str(",\"message\":");
            push_message(&mut s, c);
            s.push(',');
            self.push_logprobs(&mut s, &c.pending_logprobs);
            s.push_str(",\"finish_reason\":");
            push_str(&mut s, c.finish_reason());
            s.push(',');
            push_stop_reason(&mut s, c.finish.as_ref().and_then(|f| f.stop_reason.as_ref()));
            s.push('}');
        }
        s.push_str("],\"usage\":");
        push_usage(&mut s, usage);
        s.push('}');
        s
    }
}
