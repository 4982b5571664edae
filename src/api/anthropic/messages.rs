//! `POST /v1/messages`: the request → the pipeline's neutral `GenerateRequest` (the
//! conversation rendered through the model's chat template, the sampling fields, tools and the
//! thinking switch → the parse stage); the response is `MessagesFormat`'s.
//!
//! Fields: `model`, `max_tokens` (required), `messages`, `system`, `stop_sequences`,
//! `temperature`, `top_p`, `top_k`, `stream`, `tools`, `tool_choice`, `thinking`, `metadata`
//! (accepted; `user_id` is not used). Other Anthropic fields (`service_tier`, `container`,
//! `mcp_servers`, …) are ignored like unknown fields everywhere; OpenAI's fields are refused
//! (`invalid`). Values are checked by the pipeline with vLLM's rules (`temperature` up to 2,
//! where Anthropic stops at 1), its refusals named by Anthropic's names (`Names::MESSAGES`).

use std::rc::Rc;
use std::time::Instant;

use super::format::MessagesFormat;
use super::invalid::{named, refuse_other_apis};
use super::{content, thinking, tools};
use crate::api::chat_prompt::ChatPrompt;
use crate::api::fields::{Body, Fields};
use crate::api::invalid::Names;
use crate::api::sink::serve;
use crate::error::ApiError;
use crate::http::response::Responder;
use crate::media::Collector;
use crate::metrics::Endpoint;
use crate::pipeline::plan::{plan, Generation};
use crate::pipeline::request::{GenerateRequest, Prompt, SamplingRequest};
use crate::shard::ShardCtx;
use shardgate_text::render::Renderer;
use shardgate_text::ModelAssets;

pub async fn handle(ctx: &Rc<ShardCtx>, body: &[u8], r: &mut Responder<'_>) {
    serve(ctx, Endpoint::Messages, r, async |started| prepare(ctx, body, started).await.map_err(named)).await
}

/// Everything before dispatch: the request read, the prompt rendered and tokenized, then
/// validated and a worker chosen (`plan`); images processed on the media pool.
async fn prepare(ctx: &Rc<ShardCtx>, body: &[u8], started: Instant) -> Result<(Generation, MessagesFormat), ApiError> {
    let body = Body::parse(body)?;
    let f = body.fields();
    refuse_other_apis(&f)?;
    let model = crate::api::model::resolve(ctx, &f)?;
    let sampling = sampling(&f)?;
    let vision = ctx.shared.vision();
    let mut media = Collector::new(vision, &model.served_name);
    let (MessagesPrompt { chat, one_call }, prompt) = render_prompt(ctx, &model, &f, &mut media)?;
    let prompt = match vision {
        Ok(v) => crate::media::attach(ctx, v, &media.items, prompt).await?,
        Err(_) => prompt,
    };
    let input_tokens = prompt.token_ids.len() as u64;
    // A forced call is one call when parallel calls are off; `auto` keeps the first (format).
    let parse = chat.parse_spec(ctx, &model, true, !one_call)?;
    let id = format!("msg_{}", shardgate_util::ids::random_hex(32));
    let request = GenerateRequest {
        endpoint: Endpoint::Messages,
        id: id.clone(),
        started,
        model: model.clone(),
        prompts: vec![prompt],
        sampling,
        parse,
    };
    let g = plan(ctx, request).map_err(|e| Names::MESSAGES.refusal(e))?;
    Ok((g, MessagesFormat::new(id, model.served_name.clone(), input_tokens, one_call)))
}

/// The sampling and output fields.
fn sampling(f: &Fields<'_>) -> Result<SamplingRequest, ApiError> {
    let max_tokens = f.i64("max_tokens")?.ok_or_else(|| ApiError::invalid_param("max_tokens", "Field required"))?;
    if let Some(metadata) = f.object("metadata")? {
        if metadata.get("user_id").is_some_and(|u| !u.is_null() && !u.is_string()) {
            return Err(ApiError::invalid_param("metadata.user_id", "Input should be a valid string"));
        }
    }
    Ok(SamplingRequest {
        stream: f.bool("stream")?.unwrap_or(false),
        temperature: f.f64("temperature")?,
        top_p: f.f64("top_p")?,
        top_k: f.i64("top_k")?,
        max_tokens: Some(max_tokens),
        stop: f.strings("stop_sequences")?,
        ..Default::default()
    })
}

/// What the template and the parse stage need of a Messages request.
pub struct MessagesPrompt {
    pub chat: ChatPrompt,
    /// `disable_parallel_tool_use`.
    pub one_call: bool,
}

/// A Messages request's prompt, rendered through the chat template and tokenized: what the
/// request sends (its images, unexpanded, in `media`), and what `count_tokens` counts.
pub fn render_prompt(
    ctx: &ShardCtx,
    model: &ModelAssets,
    f: &Fields<'_>,
    media: &mut Collector<'_>,
) -> Result<(MessagesPrompt, Prompt), ApiError> {
    let renderer = ctx.renderer(model).map_err(ApiError::bad_request)?;
    let read = read_prompt(model, &renderer, f, media)?;
    let rendered = read.chat.render(model, &renderer, "messages")?;
    let prompt = Prompt::from_rendered(ctx, model, &rendered)?;
    Ok((read, prompt))
}

/// The conversation, tools, tool choice and thinking switch of a Messages request (or of a
/// `count_tokens` request, which has the same fields).
fn read_prompt(
    model: &ModelAssets,
    renderer: &Renderer,
    f: &Fields<'_>,
    media: &mut Collector<'_>,
) -> Result<MessagesPrompt, ApiError> {
    let conversation = content::conversation(f, renderer.content_format(), media)?;
    let tools = tools::read(f)?;
    let choice = tools::read_choice(f, &tools.specs)?;
    let (variables, thinking_on) = thinking::template_variables(f, renderer, &model.served_name)?;
    let chat = ChatPrompt {
        conversation,
        tools: tools.specs,
        template_tools: tools.template,
        tool_choice: choice.choice,
        variables,
        thinking_on,
        documents: None,
        add_generation_prompt: true,
        continue_final_message: false,
    };
    Ok(MessagesPrompt { chat, one_call: choice.one_call })
}
