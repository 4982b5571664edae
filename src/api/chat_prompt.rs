//! A conversation rendered into a prompt through the model's chat template, and the parse
//! stage its output gets: the step every conversational API (chat, Messages, Responses)
//! shares. Each API reads its own messages, tools and reasoning controls into a `ChatPrompt`
//! (messages in the shape chat templates are written for: OpenAI chat messages with
//! `tool_calls` arguments as objects, as vLLM hands them to the template); from there on
//! nothing depends on the API.

use serde_json::{Map, Value};

use crate::error::ApiError;
use crate::pipeline::constraint::ForcedTool;
use crate::pipeline::parse::ParseSpec;
use crate::shard::ShardCtx;
use shardgate_parsers::tool::ToolSpec;
use shardgate_text::render::{RenderedPrompt, Renderer};
use shardgate_text::template::RenderInput;
use shardgate_text::ModelAssets;

/// How the model may use the tools.
#[derive(Debug, Clone, PartialEq)]
pub enum ToolChoice {
    None,
    Auto,
    /// At least one call, to any tool.
    Required,
    Named(String),
}

/// Everything the template and the parse stage need of a conversational request.
#[derive(Debug, Clone)]
pub struct ChatPrompt {
    /// The messages as the template sees them.
    pub conversation: Value,
    pub tools: Vec<ToolSpec>,
    /// The tools as the template sees them (`[{"type":"function","function":{...}}]`).
    pub template_tools: Option<Value>,
    pub tool_choice: ToolChoice,
    /// Template variables (the client's own and what the reasoning controls imply).
    pub variables: Map<String, Value>,
    /// Thinking is on: the reasoning parser starts inside reasoning.
    pub thinking_on: bool,
    pub documents: Option<Value>,
    pub add_generation_prompt: bool,
    pub continue_final_message: bool,
}

impl ChatPrompt {
    /// The prompt; a renderer's refusal is the client's 400 (naming `messages_param`).
    pub fn render(
        &self,
        model: &ModelAssets,
        renderer: &Renderer,
        messages_param: &str,
    ) -> Result<RenderedPrompt, ApiError> {
        let mut extra: Vec<(String, Value)> =
            model.special_tokens.iter().map(|(k, v)| (k.clone(), Value::String(v.clone()))).collect();
        extra.extend(self.variables.iter().map(|(k, v)| (k.clone(), v.clone())));
        renderer
            .render(&RenderInput {
                messages: &self.conversation,
                tools: self.template_tools.as_ref().filter(|_| !self.tools.is_empty()),
                documents: self.documents.as_ref(),
                add_generation_prompt: self.add_generation_prompt,
                continue_final_message: self.continue_final_message,
                extra: &extra,
            })
            .map_err(|e| ApiError::bad_request(e).with_param(messages_param))
    }

    /// The parse stage: the model's reasoning parser (unless `separate_reasoning` is off), and
    /// its tool-call parser when tools may be called; a forced call is read as constrained
    /// JSON, several calls when `parallel_tool_calls`. A Harmony model's output is read by
    /// channel instead, a forced call included (its constraint keeps the channels:
    /// `pipeline::harmony_tag`).
    pub fn parse_spec(
        &self,
        ctx: &ShardCtx,
        model: &ModelAssets,
        separate_reasoning: bool,
        parallel_tool_calls: bool,
    ) -> Result<ParseSpec, ApiError> {
        let forced = match &self.tool_choice {
            ToolChoice::Required => Some(ForcedTool::Required),
            ToolChoice::Named(name) => Some(ForcedTool::Named(name.clone())),
            ToolChoice::None | ToolChoice::Auto => None,
        };
        if let Some(encoding) = &model.harmony {
            return Ok(ParseSpec {
                separate_reasoning,
                model_name: model.served_name.clone(),
                prior_tool_calls: prior_tool_calls(&self.conversation),
                tools: self.tools.clone(),
                forced,
                harmony: Some(encoding.clone()),
                ..Default::default()
            });
        }
        let model_name = model.served_name.as_str();
        let parsers = ctx.shared.parsers();
        let tool_parser =
            if self.tool_choice == ToolChoice::None || self.tools.is_empty() { None } else { parsers.tool };
        Ok(ParseSpec {
            reasoning_parser: parsers.reasoning,
            tool_parser,
            tools: self.tools.clone(),
            force_reasoning_start: self.thinking_on,
            separate_reasoning,
            model_name: model_name.to_string(),
            prior_tool_calls: prior_tool_calls(&self.conversation),
            forced,
            parallel_tool_calls,
            harmony: None,
        })
    }
}

/// Tool calls already made in the conversation (Kimi call ids count across it).
pub fn prior_tool_calls(conversation: &Value) -> usize {
    conversation
        .as_array()
        .map(|msgs| msgs.iter().filter_map(|m| m.get("tool_calls").and_then(Value::as_array)).map(Vec::len).sum())
        .unwrap_or(0)
}
