//! `POST /v1/chat/completions`: the request → the pipeline's neutral `GenerateRequest` (the
//! conversation rendered through the model's chat template, the sampling fields, tools and
//! reasoning controls → the parse stage); the response is `ChatFormat`'s.

use std::rc::Rc;
use std::time::Instant;

use super::chat_format::ChatFormat;
use super::sampling::{self, Api, Sampling};
use super::tools;
use crate::api::chat_prompt::{ChatPrompt, ToolChoice};
use crate::api::fields::{Body, Fields};
use crate::api::invalid::Names;
use crate::api::sink::serve;
use crate::error::ApiError;
use crate::http::response::Responder;
use crate::media::Collector;
use crate::metrics::Endpoint;
use crate::pipeline::parse::ParseSpec;
use crate::pipeline::plan::{plan, Generation};
use crate::pipeline::request::{GenerateRequest, Prompt};
use crate::shard::ShardCtx;
use shardgate_text::render::{RenderedPrompt, Renderer};
use shardgate_text::ModelAssets;

pub async fn handle(ctx: &Rc<ShardCtx>, body: &[u8], r: &mut Responder<'_>) {
    serve(ctx, Endpoint::Chat, r, async |started| prepare(ctx, body, started).await).await
}

/// Everything before dispatch: the request read, the prompt rendered and tokenized, then
/// validated and a worker chosen (`plan`). Images are processed on the media pool while the
/// shard serves others.
async fn prepare(ctx: &Rc<ShardCtx>, body: &[u8], started: Instant) -> Result<(Generation, ChatFormat), ApiError> {
    let body = Body::parse(body)?;
    let f = body.fields();
    let model = crate::api::model::resolve(ctx, &f)?;
    let names = Names::chat(f.has("max_completion_tokens"));
    let Sampling { request: sampling, include_usage } = sampling::read(&f, Api::Chat)?;
    let renderer = ctx.renderer(&model).map_err(ApiError::bad_request)?;
    check_mrope_over_tokenspeed(ctx, &model, &f)?;
    let vision = ctx.shared.vision();
    let mut media = Collector::new(vision, &model.served_name);
    let RenderedChat { prompt, chat } = render_prompt(&model, &renderer, &f, &mut media)?;
    let parse = parse_spec(ctx, &f, &model, &chat)?;
    let prompt = Prompt::from_rendered(ctx, &model, &prompt)?;
    let prompt = match vision {
        Ok(v) => crate::media::attach(ctx, v, &media.items, prompt).await?,
        Err(_) => prompt,
    };
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
    let format = ChatFormat::new(
        id,
        shardgate_util::time::unix_time_s(),
        model.served_name.clone(),
        include_usage,
        logprobs,
        names,
    );
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
    pub prompt: RenderedPrompt,
    pub chat: ChatPrompt,
}

/// Renders a chat request's prompt exactly as the endpoint does (also behind
/// `shardgate template`, to compare with transformers).
/// `media` gets the request's images.
pub fn render_prompt(
    model: &ModelAssets,
    renderer: &Renderer,
    f: &Fields<'_>,
    media: &mut Collector<'_>,
) -> Result<RenderedChat, ApiError> {
    let messages = f.get("messages").ok_or_else(|| ApiError::invalid_param("messages", "'messages' is required"))?;
    let conversation = super::conversation::normalize(messages, renderer, media)?;
    let add_generation_prompt = f.bool("add_generation_prompt")?.unwrap_or(true);
    let continue_final_message = f.bool("continue_final_message")?.unwrap_or(false);
    if add_generation_prompt && continue_final_message {
        return Err(ApiError::bad_request(
            "Cannot set both `continue_final_message` and `add_generation_prompt` to True.",
        ));
    }
    let tools = tools::parse_tools(f)?;
    let tool_choice = tools::parse_tool_choice(f, &tools)?;
    let (variables, thinking_on) = super::thinking::template_variables(f, renderer, &model.served_name)?;
    let chat = ChatPrompt {
        conversation,
        tools,
        template_tools: f.get("tools").cloned(),
        tool_choice,
        variables,
        thinking_on,
        documents: f.get("documents").cloned(),
        add_generation_prompt,
        continue_final_message,
    };
    let prompt = chat.render(model, renderer, "messages")?;
    Ok(RenderedChat { prompt, chat })
}

/// The parse stage this request gets (`separate_reasoning` off: no reasoning parser).
fn parse_spec(ctx: &ShardCtx, f: &Fields<'_>, model: &ModelAssets, chat: &ChatPrompt) -> Result<ParseSpec, ApiError> {
    let separate_reasoning = f.bool("separate_reasoning")?.unwrap_or(true);
    // Read only for a forced call, the one place it matters.
    let parallel_tool_calls = match chat.tool_choice {
        ToolChoice::Required | ToolChoice::Named(_) => f.bool("parallel_tool_calls")?.unwrap_or(true),
        ToolChoice::None | ToolChoice::Auto => true,
    };
    chat.parse_spec(ctx, model, separate_reasoning, parallel_tool_calls)
}
