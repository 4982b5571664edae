//! `POST /v1/responses`: the request → the pipeline's neutral `GenerateRequest`. The input
//! items, after the items `history::load` returns for `previous_response_id` / `conversation`,
//! become a conversation in the chat template's shape (`input.rs`), with the tools
//! (`tools.rs`) and reasoning controls rendered like chat's (`api::chat_prompt`); sampling and
//! `text.format` as in `sampling.rs`. The response is `ResponsesFormat`'s, which saves it once
//! complete when `store` (default true) is set.

use std::rc::Rc;
use std::sync::Arc;
use std::time::Instant;

use serde_json::{Map, Value};

use super::approval::{self, Answer};
use super::format::{CountTokens, ResponsesFormat, Save};
use super::input::{self, item_id};
use super::mcp_tools::{Listed, McpFunction};
use super::object::{reasoning_echo, Echo, Response};
use super::tools;
use super::{history, sampling};
use crate::api::chat_prompt::ChatPrompt;
use crate::api::fields::{Body, Fields};
use crate::api::invalid::Names;
use crate::api::openai::thinking;
use crate::api::sink::serve;
use crate::error::ApiError;
use crate::http::response::Responder;
use crate::media::{Collector, MediaItem};
use crate::metrics::Endpoint;
use crate::pipeline::plan::{plan, Generation};
use crate::pipeline::request::{GenerateRequest, Prompt, SamplingRequest};
use crate::shard::ShardCtx;
use shardgate_text::render::Renderer;
use shardgate_text::ModelAssets;

/// A request without MCP tools: one generation (`tool_loop` serves the others).
pub async fn handle(ctx: &Rc<ShardCtx>, body: &[u8], r: &mut Responder<'_>) {
    serve(ctx, Endpoint::Responses, r, async |started| {
        let (mut turns, seed) = read(ctx, body, started, None).await?;
        let g = turns.generation(ctx, &[])?;
        let format = seed.format(&turns, &g);
        Ok((g, format))
    })
    .await
}

/// A request read once, whose prompt is rendered again with the items of each tool-loop turn
/// after its input (one generation when there is no loop).
pub struct Turns {
    id: String,
    started: Instant,
    model: Arc<ModelAssets>,
    renderer: Rc<Renderer>,
    instructions: Option<String>,
    history: Vec<Value>,
    history_param: &'static str,
    /// The request's input as a list of items.
    input: Vec<Value>,
    /// The images of the history and the input, in prompt order, processed once.
    media: Vec<MediaItem>,
    images: crate::media::Processed,
    chat: ChatPrompt,
    sampling: SamplingRequest,
    parallel_tool_calls: bool,
    turn: usize,
    answers: Vec<Answer>,
}

impl Turns {
    /// The model's served name.
    pub fn model_name(&self) -> &str {
        &self.model.served_name
    }

    /// The approval requests the input answers (`approval.rs`), once.
    pub fn take_answers(&mut self) -> Vec<Answer> {
        std::mem::take(&mut self.answers)
    }

    /// The next generation: the request's input followed by `more` items (calls and their
    /// outputs), rendered, tokenized, validated and given a worker.
    pub fn generation(&mut self, ctx: &Rc<ShardCtx>, more: &[Value]) -> Result<Generation, ApiError> {
        let mut items = self.input.clone();
        items.extend_from_slice(more);
        // The images were collected and processed once (`read`); each turn places them again.
        let vision = ctx.shared.vision();
        let mut media = Collector::new(vision, &self.model.served_name);
        let input = input::read(&Value::Array(items), self.renderer.content_format(), &mut media)?;
        let conversation = input::conversation(
            self.instructions.as_deref(),
            &self.history,
            self.history_param,
            input,
            &self.renderer,
            &mut media,
        )?;
        let mut chat = self.chat.clone();
        chat.conversation = conversation.messages;
        chat.add_generation_prompt = !conversation.continue_final;
        chat.continue_final_message = conversation.continue_final;
        let rendered = chat.render(&self.model, &self.renderer, "input")?;
        let parse = chat.parse_spec(ctx, &self.model, true, self.parallel_tool_calls)?;
        let prompt = Prompt::from_rendered(ctx, &self.model, &rendered)?;
        let prompt = match vision {
            Ok(v) => crate::media::expand(v, &self.media, &self.images, prompt)?,
            Err(_) => prompt,
        };
        // Each generation's engine requests get ids of their own.
        let id = if self.turn == 0 { self.id.clone() } else { format!("{}_{}", self.id, self.turn) };
        self.turn += 1;
        let request = GenerateRequest {
            endpoint: Endpoint::Responses,
            id,
            started: self.started,
            model: self.model.clone(),
            prompts: vec![prompt],
            sampling: self.sampling.clone(),
            parse,
        };
        plan(ctx, request).map_err(|e| Names::RESPONSES.refusal(e))
    }
}

/// Fields of the other OpenAI APIs that Responses spells differently or lacks: refused naming
/// the field and what Responses uses, so a client pointed at the wrong endpoint learns why
/// (silently ignoring `max_tokens` would drop the client's bound).
const OTHER_APIS: [(&str, &str); 9] = [
    ("messages", "In the Responses API, the conversation goes in 'input' (a string or a list of items)."),
    ("max_tokens", "In the Responses API, the output bound is 'max_output_tokens'."),
    ("max_completion_tokens", "In the Responses API, the output bound is 'max_output_tokens'."),
    ("response_format", "In the Responses API, the output format is 'text.format'."),
    ("n", "The Responses API generates one response per request; send several requests."),
    ("reasoning_effort", "In the Responses API, the effort is 'reasoning.effort'."),
    ("functions", "In the Responses API, functions go in 'tools' as {\"type\":\"function\",\"name\",...}."),
    ("function_call", "In the Responses API, the choice of tool is 'tool_choice'."),
    ("prompt", "Prompt templates are not supported; the conversation goes in 'input'."),
];

fn refuse_other_apis(f: &Fields<'_>) -> Result<(), ApiError> {
    match OTHER_APIS.iter().find(|(name, _)| f.has(name)) {
        Some((name, hint)) => Err(ApiError::invalid_param(name, format!("Unsupported parameter: '{name}'. {hint}"))
            .with_code("unsupported_parameter")),
        None => Ok(()),
    }
}

/// The request's own settings (what is kept, what it continues, what it echoes).
struct Options<'a> {
    store: bool,
    previous_response_id: Option<&'a str>,
    conversation: Option<&'a str>,
    instructions: Option<&'a str>,
    effort: Option<&'a str>,
}

fn read_options<'a>(f: &Fields<'a>) -> Result<Options<'a>, ApiError> {
    if f.bool("background")?.unwrap_or(false) {
        return Err(ApiError::invalid_param("background", "background mode is not supported"));
    }
    let conversation = match f.get("conversation") {
        None => None,
        Some(Value::String(id)) => Some(id.as_str()),
        Some(Value::Object(o)) => Some(
            o.get("id")
                .and_then(Value::as_str)
                .ok_or_else(|| ApiError::invalid_param("conversation.id", "'conversation' needs a string 'id'"))?,
        ),
        Some(_) => return Err(ApiError::invalid_param("conversation", "'conversation' must be an id or {\"id\"}")),
    };
    let previous_response_id = f.str("previous_response_id")?;
    if previous_response_id.is_some() && conversation.is_some() {
        return Err(ApiError::invalid_param(
            "conversation",
            "'previous_response_id' and 'conversation' cannot be used together",
        ));
    }
    if let Some(t) = f.str("truncation")?.filter(|t| !matches!(*t, "auto" | "disabled")) {
        return Err(ApiError::invalid_param(
            "truncation",
            format!("'truncation' must be 'auto' or 'disabled', got '{t}'"),
        ));
    }
    if f.array("include")?.is_some_and(|list| !list.iter().all(Value::is_string)) {
        return Err(ApiError::invalid_param("include", "'include' must be a list of strings"));
    }
    // Accepted and echoed (or ignored), type-checked like every known field.
    for name in ["service_tier", "user"] {
        f.str(name)?;
    }
    f.object("metadata")?;
    let effort = match f.object("reasoning")?.and_then(|r| r.get("effort")).filter(|e| !e.is_null()) {
        None => None,
        Some(Value::String(e)) => Some(e.as_str()),
        Some(_) => return Err(ApiError::invalid_param("reasoning.effort", "'reasoning.effort' must be a string")),
    };
    Ok(Options {
        store: f.bool("store")?.unwrap_or(true),
        previous_response_id,
        conversation,
        instructions: f.str("instructions")?,
        effort,
    })
}

/// Everything before dispatch: the request read and the earlier items loaded; `mcp`, the
/// functions of its MCP tools (listed by the tool loop), are offered after its own.
pub async fn read(
    ctx: &Rc<ShardCtx>,
    body: &[u8],
    started: Instant,
    mcp: Option<&Listed>,
) -> Result<(Turns, FormatSeed), ApiError> {
    let body = Body::parse(body)?;
    let f = body.fields();
    refuse_other_apis(&f)?;
    let model = crate::api::model::resolve(ctx, &f)?;
    let options = read_options(&f)?;
    let input_value = f.get("input").ok_or_else(|| ApiError::invalid_param("input", "'input' is required"))?;
    let renderer = ctx.renderer(&model).map_err(ApiError::bad_request)?;
    let vision = ctx.shared.vision();
    let mut media = Collector::new(vision, &model.served_name);
    let input = input::read(input_value, renderer.content_format(), &mut media)?;
    let mut tools = tools::read(&f)?;
    if mcp.is_none() {
        // The route sends requests with MCP tools to the tool loop by a byte search first; one
        // that spells the type with escapes gets here and is refused, not served without them.
        if let Some(i) =
            f.array("tools")?.and_then(|t| t.iter().position(|t| t.get("type").and_then(Value::as_str) == Some("mcp")))
        {
            return Err(ApiError::invalid_param(&format!("tools[{i}].type"), "write the type 'mcp' without escapes"));
        }
        // Only the tool loop runs what an answer approves.
        if let Some(i) = input_value.as_array().and_then(|items| {
            items.iter().position(|t| t.get("type").and_then(Value::as_str) == Some("mcp_approval_response"))
        }) {
            return Err(ApiError::invalid_param(
                &format!("input[{i}].type"),
                "an 'mcp_approval_response' needs the MCP server of the call it answers in 'tools'",
            ));
        }
    }
    if let (Some(listed), Value::Array(template)) = (mcp, &mut tools.template) {
        tools.specs.extend(listed.specs.iter().cloned());
        template.extend(listed.template.iter().cloned());
    }
    let tool_choice = tools::choice(&f, &tools.specs)?;
    let sampling = sampling::read(&f)?;
    let history = history::load(ctx, options.previous_response_id, options.conversation).await?;
    let history_param = if options.conversation.is_some() { "conversation" } else { "previous_response_id" };
    // Before the conversation's check: an input of answers alone renders no message.
    let answers = match mcp {
        Some(listed) => approval::read(&history, input_value.as_array().map_or(&[], Vec::as_slice), &listed.functions)?,
        None => Vec::new(),
    };
    // Checked here, before anything runs; each turn reads it again with its items after it.
    input::conversation(options.instructions, &history, history_param, input, &renderer, &mut media)?;
    let images = match vision {
        Ok(v) => crate::media::process(ctx, v, &media.items).await?,
        Err(_) => crate::media::Processed::default(),
    };
    let media = media.items;
    // Passed to the template as chat passes it, and only with tools (as vLLM does).
    let passthrough = [("tool_choice", f.get("tool_choice").filter(|_| !tools.specs.is_empty()))];
    let reasoning = thinking::Reasoning {
        effort: options.effort.map(str::to_string),
        renderer: &renderer,
        model_name: &model.served_name,
    };
    let (variables, thinking_on) =
        thinking::variables(f.object("chat_template_kwargs")?, reasoning, &passthrough, || {
            Ok(options.effort.map(thinking::effort_thinks))
        })?;
    let chat = ChatPrompt {
        conversation: Value::Null,
        tools: tools.specs.clone(),
        template_tools: Some(tools.template.clone()),
        tool_choice,
        variables,
        thinking_on,
        documents: None,
        add_generation_prompt: true,
        continue_final_message: false,
    };
    let parallel_tool_calls = f.bool("parallel_tool_calls")?.unwrap_or(true);
    let id = item_id("resp");
    let echo = echo_members(&f, &options, &model.served_name);
    let save = options.store.then(|| Save {
        ctx: ctx.clone(),
        model: model.served_name.clone(),
        previous_response_id: options.previous_response_id.map(str::to_string),
        conversation: options.conversation.map(str::to_string),
        input_items: input::stored_items(input_value),
    });
    let counter = model.clone();
    let count_tokens: CountTokens =
        Box::new(move |text| counter.tokenizer.encode(text, false).map_or(0, |ids| ids.len() as u64));
    let input = match input_value {
        Value::String(text) => vec![serde_json::json!({"role": "user", "content": text})],
        Value::Array(items) => items.clone(),
        _ => Vec::new(),
    };
    let turns = Turns {
        id,
        started,
        model,
        renderer,
        instructions: options.instructions.map(str::to_string),
        history,
        history_param,
        input,
        media,
        images,
        chat,
        sampling,
        parallel_tool_calls,
        turn: 0,
        answers,
    };
    let format = FormatSeed { echo, count_tokens, parallel_tool_calls, save, mcp: mcp.map(|l| l.functions.clone()) };
    Ok((turns, format))
}

/// The response's format, made once the first generation is planned: the object repeats the
/// sampling values the engine got.
pub struct FormatSeed {
    echo: Vec<(&'static str, Value)>,
    count_tokens: CountTokens,
    parallel_tool_calls: bool,
    save: Option<Save>,
    mcp: Option<Rc<[McpFunction]>>,
}

impl FormatSeed {
    pub fn format(self, turns: &Turns, g: &Generation) -> ResponsesFormat {
        let echo = sampled(self.echo, (g.params.sampling.temperature, g.params.sampling.top_p));
        let response = Response { id: turns.id.clone(), created_at: shardgate_util::time::unix_time_s(), echo };
        let format = ResponsesFormat::new(response, self.count_tokens, self.parallel_tool_calls, self.save);
        match self.mcp {
            Some(functions) => format.with_mcp(functions),
            None => format,
        }
    }
}

/// The settings the response object repeats: as the request gave them (OpenAI's defaults
/// where it gave none), and the sampling values the engine got (as vLLM reports them; filled
/// in by `sampled`).
fn echo_members(f: &Fields<'_>, o: &Options<'_>, model: &str) -> Vec<(&'static str, Value)> {
    let given = |name: &str, default: Value| f.get(name).cloned().unwrap_or(default);
    let format = f.object("text").ok().flatten().and_then(|t| t.get("format")).filter(|v| !v.is_null());
    let mut text = Map::new();
    text.insert("format".into(), format.cloned().unwrap_or_else(|| serde_json::json!({"type": "text"})));
    let mut members = vec![
        ("instructions", o.instructions.map_or(Value::Null, Value::from)),
        ("max_output_tokens", given("max_output_tokens", Value::Null)),
        ("model", Value::from(model)),
        ("parallel_tool_calls", given("parallel_tool_calls", Value::Bool(true))),
        ("previous_response_id", o.previous_response_id.map_or(Value::Null, Value::from)),
        ("reasoning", reasoning_echo(o.effort)),
        ("store", Value::Bool(o.store)),
        ("temperature", Value::Null),
        ("text", Value::Object(text)),
        ("tool_choice", given("tool_choice", Value::from("auto"))),
        ("tools", given("tools", Value::Array(Vec::new()))),
        ("top_p", Value::Null),
        ("truncation", given("truncation", Value::from("disabled"))),
        ("user", given("user", Value::Null)),
        ("metadata", given("metadata", Value::Object(Map::new()))),
    ];
    if let Some(id) = o.conversation {
        members.push(("conversation", serde_json::json!({"id": id})));
    }
    members
}

fn sampled(mut members: Vec<(&'static str, Value)>, (temperature, top_p): (f64, f64)) -> Echo {
    for (name, value) in &mut members {
        match *name {
            "temperature" => *value = Value::from(temperature),
            "top_p" => *value = Value::from(top_p),
            _ => {}
        }
    }
    Echo::new(&members)
}

#[cfg(test)]
mod tests {
    use super::super::object::{Snapshot, Status};
    use super::*;
    use serde_json::json;

    #[test]
    fn fields_of_other_apis_are_refused_naming_what_responses_uses() {
        let cases = [
            (json!({"messages": []}), "messages", "'input'"),
            (json!({"max_tokens": 5}), "max_tokens", "'max_output_tokens'"),
            (json!({"response_format": {"type": "json_object"}}), "response_format", "'text.format'"),
            (json!({"n": 2}), "n", "one response per request"),
        ];
        for (body, param, hint) in cases {
            let e = refuse_other_apis(&Fields::new(&body)).unwrap_err();
            assert_eq!((e.status, e.param.as_deref(), e.code), (400, Some(param), Some("unsupported_parameter")));
            assert!(
                e.message.starts_with(&format!("Unsupported parameter: '{param}'.")) && e.message.contains(hint),
                "{}",
                e.message
            );
        }
        assert!(refuse_other_apis(&Fields::new(&json!({"input": "x", "max_output_tokens": 5, "n": null}))).is_ok());
    }

    #[test]
    fn options_are_checked() {
        let cases = [
            (json!({"background": true}), "background"),
            (json!({"conversation": 5}), "conversation"),
            (json!({"conversation": {}}), "conversation.id"),
            (json!({"conversation": "conv_1", "previous_response_id": "resp_1"}), "conversation"),
            (json!({"truncation": "sometimes"}), "truncation"),
            (json!({"include": [1]}), "include"),
            (json!({"store": "yes"}), "store"),
            (json!({"reasoning": {"effort": 1}}), "reasoning.effort"),
            (json!({"metadata": []}), "metadata"),
        ];
        for (body, param) in cases {
            let e = read_options(&Fields::new(&body)).err().unwrap_or_else(|| panic!("{body} accepted"));
            assert_eq!(e.param.as_deref(), Some(param), "{body}");
        }
        let body = json!({"background": false, "conversation": {"id": "conv_1"}, "reasoning": {"effort": "low", "summary": "auto"}});
        let o = read_options(&Fields::new(&body)).unwrap();
        assert_eq!(
            (o.store, o.conversation, o.effort, o.previous_response_id),
            (true, Some("conv_1"), Some("low"), None)
        );
    }

    #[test]
    fn the_echo_repeats_the_request_with_openais_defaults() {
        let body = json!({"input": "x"});
        let f = Fields::new(&body);
        let o = read_options(&f).unwrap();
        let echo = sampled(echo_members(&f, &o, "m"), (1.0, 1.0));
        let response = Response { id: "resp_1".into(), created_at: 5, echo };
        let snapshot = Snapshot { status: Status::InProgress, items: &[], usage: None, error: None };
        let v: Value = serde_json::from_str(&response.render(&snapshot)).unwrap();
        let expected = json!({"id": "resp_1", "object": "response", "created_at": 5, "status": "in_progress", "error": null,
            "incomplete_details": null, "instructions": null, "max_output_tokens": null, "model": "m", "parallel_tool_calls": true,
            "previous_response_id": null, "reasoning": {"effort": null, "summary": null}, "store": true, "temperature": 1.0,
            "text": {"format": {"type": "text"}}, "tool_choice": "auto", "tools": [], "top_p": 1.0, "truncation": "disabled",
            "user": null, "metadata": {}, "output": [], "usage": null});
        assert_eq!(v, expected);
    }
}
