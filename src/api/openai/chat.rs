//! `POST /v1/chat/completions`: the request → the pipeline's neutral `GenerateRequest` (the
//! conversation rendered through the model's chat template, the sampling fields, tools and
//! reasoning controls → the parse stage); the response is `ChatFormat`'s.

use std::rc::Rc;
use std::time::Instant;

use super::chat_format::ChatFormat;
use super::invalid::Names;
use super::sampling::{self, Api, Sampling};
use super::sink::serve;
use super::tools::{self, ToolChoice};
use crate::api::fields::{Body, Fields};
use crate::error::ApiError;
use crate::http::response::Responder;
use crate::metrics::Endpoint;
use crate::pipeline::constraint::ForcedTool;
use crate::pipeline::parse::ParseSpec;
use crate::pipeline::plan::{plan, Generation};
use crate::pipeline::request::{GenerateRequest, Prompt};
use crate::shard::ShardCtx;
use shardgate_text::template::{ChatTemplate, RenderInput};
use shardgate_text::ModelAssets;

pub async fn handle(ctx: &Rc<ShardCtx>, body: &[u8], r: &mut Responder<'_>) {
    serve(ctx, Endpoint::Chat, r, |started| prepare(ctx, body, started)).await
}

/// Everything before dispatch: the request read, the prompt rendered and tokenized, then
/// validated and a worker chosen (`plan`).
fn prepare(ctx: &Rc<ShardCtx>, body: &[u8], started: Instant) -> Result<(Generation, ChatFormat, Names), ApiError> {
    let body = Body::parse(body)?;
    let f = body.fields();
    let model = super::models::resolve(ctx, &f)?;
    let names = Names::chat(f.has("max_completion_tokens"));
    let Sampling { request: sampling, include_usage } = sampling::read(&f, Api::Chat)?;
    let template = ctx.chat_template(&model).map_err(ApiError::bad_request)?;
    check_mrope_over_tokenspeed(ctx, &model, &f)?;
    let RenderedChat { prompt, conversation, tools, tool_choice, thinking_on } = render_prompt(&model, &template, &f)?;
    let parse = parse_spec(ctx, &f, &model.served_name, tools, &tool_choice, thinking_on, &conversation)?;
    let prompt = Prompt::from_text(ctx, &model, &prompt, false, false)?;
    let id = shardgate_util::ids::response_id("chatcmpl");
    let request = GenerateRequest {
        endpoint: Endpoint::Chat,
        id: id.clone(),
        started,
        model: model.clone(),
        prompts: vec![prompt],
        sampling,
        parse,
    };
    let g = plan(ctx, request).map_err(|e| names.refusal(e))?;
    let logprobs = g.params.output.logprobs.map(|k| k as usize);
    let format =
        ChatFormat::new(id, shardgate_util::time::unix_time_s(), model.served_name.clone(), include_usage, logprobs);
    Ok((g, format, names))
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
    let conversation = super::conversation::normalize(messages, template_source)?;
    let add_generation_prompt = f.bool("add_generation_prompt")?.unwrap_or(true);
    let continue_final_message = f.bool("continue_final_message")?.unwrap_or(false);
    if add_generation_prompt && continue_final_message {
        return Err(ApiError::bad_request(
            "Cannot set both `continue_final_message` and `add_generation_prompt` to True.",
        ));
    }
    let tools = tools::parse_tools(f)?;
    let tool_choice = tools::parse_tool_choice(f, &tools)?;
    let (variables, thinking_on) = super::thinking::template_variables(f, template_source)?;
    let mut extra: Vec<(String, serde_json::Value)> =
        model.special_tokens.iter().map(|(k, v)| (k.clone(), serde_json::Value::String(v.clone()))).collect();
    extra.extend(variables);
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
    // Read only for a forced call, the one place it matters.
    let parallel_tool_calls = match forced {
        Some(_) => f.bool("parallel_tool_calls")?.unwrap_or(true),
        None => true,
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
        parallel_tool_calls,
    })
}
