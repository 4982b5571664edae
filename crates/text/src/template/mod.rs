//! Chat templates: Hugging Face Jinja templates rendered with minijinja, made to behave like
//! transformers' sandboxed Jinja2 environment.
//!
//! Python behaviours templates rely on: `trim_blocks` + `lstrip_blocks`; string, dict and list
//! methods (`.strip()`, `.items()`, `.get()`, ... via minijinja-contrib's pycompat);
//! `raise_exception`, `strftime_now`; transformers' own `tojson` (no HTML escaping, Python's
//! separators and float repr); booleans and none rendering as `True`, `False`, `None`; and
//! HF's `{% generation %}` tags (assistant masks) removed before compiling.
//! One `ChatTemplate` per shard: compiled once, rendered per request, never shared mutably.

pub mod content_format;
mod pyjson;
mod strftime;

use minijinja::value::{Kwargs, Value};
use minijinja::{Environment, Error, ErrorKind, State};

use crate::error::TemplateError;

pub use pyjson::{dumps as py_json_dumps, Options as PyJsonOptions};

/// Today's date (UTC) as `YYYY-MM-DD`, what `strftime_now('%Y-%m-%d')` gives a template.
pub fn utc_date() -> String {
    strftime::format_utc_now("%Y-%m-%d")
}

const TEMPLATE_NAME: &str = "chat";

/// A compiled chat template.
pub struct ChatTemplate {
    env: Environment<'static>,
}

/// What a render needs besides the template.
pub struct RenderInput<'a> {
    /// The conversation, already normalised (content strings, parsed tool-call arguments).
    pub messages: &'a serde_json::Value,
    pub tools: Option<&'a serde_json::Value>,
    pub documents: Option<&'a serde_json::Value>,
    pub add_generation_prompt: bool,
    pub continue_final_message: bool,
    /// Special tokens (`bos_token`, `eos_token`, ...) then `chat_template_kwargs`, later wins.
    pub extra: &'a [(String, serde_json::Value)],
}

impl ChatTemplate {
    pub fn compile(source: &str) -> Result<Self, TemplateError> {
        let mut env = Environment::new();
        let mut syntax = minijinja::syntax::SyntaxConfig::builder();
        syntax.trim_blocks(true).lstrip_blocks(true);
        env.set_syntax(syntax.build().map_err(|e| TemplateError::Syntax(e.to_string()))?);
        env.set_unknown_method_callback(minijinja_contrib::pycompat::unknown_method_callback);
        minijinja_contrib::add_to_environment(&mut env);
        env.set_formatter(python_formatter);
        env.add_function("raise_exception", raise_exception);
        env.add_function("strftime_now", strftime_now);
        env.add_filter("tojson", tojson);
        env.add_template_owned(TEMPLATE_NAME, strip_generation_tags(source))
            .map_err(|e| TemplateError::Compile(e.to_string()))?;
        Ok(ChatTemplate { env })
    }

    /// Renders the prompt text. Errors are the template's own (`raise_exception` messages) or
    /// minijinja's, meant for a 400.
    pub fn render(&self, input: &RenderInput<'_>) -> Result<String, TemplateError> {
        let template = self.env.get_template(TEMPLATE_NAME).map_err(|e| TemplateError::Lookup(e.to_string()))?;
        let mut ctx: Vec<(String, Value)> = Vec::with_capacity(5 + input.extra.len());
        ctx.push(("messages".into(), Value::from(minijinja::value::Serde(input.messages))));
        ctx.push((
            "tools".into(),
            input.tools.map(|t| Value::from(minijinja::value::Serde(t))).unwrap_or(Value::from(())),
        ));
        ctx.push((
            "documents".into(),
            input.documents.map(|d| Value::from(minijinja::value::Serde(d))).unwrap_or(Value::from(())),
        ));
        ctx.push(("add_generation_prompt".into(), Value::from(input.add_generation_prompt)));
        for (k, v) in input.extra {
            ctx.push((k.clone(), Value::from(minijinja::value::Serde(v))));
        }
        let ctx: Value = ctx.into_iter().collect::<std::collections::BTreeMap<String, Value>>().into();
        let rendered = template.render(ctx).map_err(render_error_text)?;
        if input.continue_final_message {
            return trim_to_final_message(rendered, input.messages);
        }
        Ok(rendered)
    }
}

fn render_error_text(e: Error) -> TemplateError {
    match e.kind() {
        // raise_exception messages are the template author's words: pass them through.
        ErrorKind::InvalidOperation => {
            TemplateError::Raised(e.detail().map(str::to_string).unwrap_or_else(|| e.to_string()))
        }
        _ => TemplateError::Render(e.to_string()),
    }
}

/// transformers' `continue_final_message`: cut the rendered text right after the final
/// message's content so the model continues it.
fn trim_to_final_message(rendered: String, messages: &serde_json::Value) -> Result<String, TemplateError> {
    let last = messages.as_array().and_then(|m| m.last()).and_then(|m| m.get("content"));
    let final_message = match last {
        Some(serde_json::Value::String(s)) => s.as_str(),
        Some(serde_json::Value::Array(parts)) => parts
            .iter()
            .rev()
            .find_map(|p| p.get("text").and_then(serde_json::Value::as_str))
            .ok_or(TemplateError::FinalMessageWithoutText)?,
        _ => return Err(TemplateError::FinalMessageWithoutContent),
    };
    let stripped = final_message.trim();
    let Some(loc) = rendered.rfind(stripped) else {
        return Err(TemplateError::FinalMessageNotRendered);
    };
    let lstripped = final_message.trim_start();
    let end = if rendered[loc..].starts_with(lstripped) { loc + lstripped.len() } else { loc + stripped.len() };
    let mut rendered = rendered;
    rendered.truncate(end);
    Ok(rendered)
}

/// transformers strips nothing, but its AssistantTracker extension makes `{% generation %}`
/// blocks render their body; removing the tags gives the same text.
pub(crate) fn strip_generation_tags(source: &str) -> String {
    let mut out = String::with_capacity(source.len());
    let mut rest = source;
    while let Some(start) = rest.find("{%") {
        let Some(len) = rest[start..].find("%}") else { break };
        let tag = &rest[start..start + len + 2];
        let inner = tag.trim_start_matches("{%").trim_end_matches("%}").trim_matches(|c: char| c == '-' || c == '+');
        out.push_str(&rest[..start]);
        match inner.trim() {
            "generation" | "endgeneration" => {}
            _ => out.push_str(tag),
        }
        rest = &rest[start + len + 2..];
    }
    out.push_str(rest);
    out
}

/// Renders values as Python's `str()` would for the scalars templates print.
fn python_formatter(out: &mut minijinja::Output, state: &mut State, value: &Value) -> Result<(), Error> {
    match value.kind() {
        minijinja::value::ValueKind::Bool => out.write_str(if value.is_true() { "True" } else { "False" })?,
        minijinja::value::ValueKind::None => out.write_str("None")?,
        _ => minijinja::escape_formatter(out, state, value)?,
    }
    Ok(())
}

fn raise_exception(message: String) -> Result<Value, Error> {
    Err(Error::new(ErrorKind::InvalidOperation, message))
}

fn strftime_now(format: String) -> Result<Value, Error> {
    Ok(Value::from(strftime::format_utc_now(&format)))
}

/// transformers' `tojson(x, ensure_ascii=False, indent=None, separators=None, sort_keys=False)`.
fn tojson(value: Value, kwargs: Kwargs) -> Result<Value, Error> {
    let indent: Option<Value> = kwargs.get("indent")?;
    let ensure_ascii: Option<bool> = kwargs.get("ensure_ascii")?;
    let sort_keys: Option<bool> = kwargs.get("sort_keys")?;
    let separators: Option<Value> = kwargs.get("separators")?;
    kwargs.assert_all_used()?;
    let indent = match indent {
        None => None,
        Some(v) if v.is_none() => None,
        Some(v) => match v.as_i64() {
            Some(n) => Some(" ".repeat(n.clamp(0, 64) as usize)),
            None => Some(v.as_str().unwrap_or("").to_string()),
        },
    };
    let separators = match separators {
        Some(v) if !v.is_none() => {
            let item: String = v.get_item(&Value::from(0))?.as_str().unwrap_or(", ").to_string();
            let key: String = v.get_item(&Value::from(1))?.as_str().unwrap_or(": ").to_string();
            Some((item, key))
        }
        _ => None,
    };
    let opts = pyjson::Options {
        indent,
        separators,
        sort_keys: sort_keys.unwrap_or(false),
        ensure_ascii: ensure_ascii.unwrap_or(false),
    };
    pyjson::dumps(&value, &opts).map(Value::from_safe_string)
}

#[cfg(test)]
mod tests;
