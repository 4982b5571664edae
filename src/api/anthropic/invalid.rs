//! How the Messages API tells a client what is wrong with its request. Anthropic's error
//! envelope has no `param`, so the field goes into the message, in Anthropic's own form
//! (`messages.1.content.0.type: …`, `max_tokens: Field required`). A field of one of OpenAI's
//! APIs (a request written for another endpoint) is refused naming the API it belongs to,
//! instead of being ignored like an unknown field: the request would otherwise run without
//! what its author asked for.

use crate::api::fields::Fields;
use crate::error::ApiError;

/// `e` with its field named at the start of the message, unless the message already starts
/// with it, bare or quoted (vLLM's words for a bad value, `temperature must be in [0, 2], got
/// 3.0.`; a type error, `'top_k' must be an integer, got a string`).
pub fn named(mut e: ApiError) -> ApiError {
    if let Some(param) = &e.param {
        let quoted = e.message.strip_prefix('\'').is_some_and(|m| m.starts_with(param.as_str()));
        if !e.message.starts_with(param.as_str()) && !quoted {
            e.message = format!("{param}: {}", e.message);
        }
    }
    e
}

/// 400 for a field this API does not have; `api` is the one it belongs to.
pub fn other_api(param: &str, api: &str, instead: &str) -> ApiError {
    ApiError::invalid_param(
        param,
        format!("this field belongs to OpenAI's {api} API, not to the Messages API; {instead}"),
    )
}

/// Top-level fields of OpenAI's APIs: (field, API, what to send here instead).
const OTHER_API_FIELDS: [(&str, &str, &str); 14] = [
    ("max_completion_tokens", "Chat Completions", "use `max_tokens`"),
    ("response_format", "Chat Completions", "for JSON output, force a tool call with `tool_choice`"),
    ("n", "Chat Completions", "a message has one answer"),
    ("functions", "Chat Completions", "use `tools` (name, description, input_schema)"),
    ("function_call", "Chat Completions", "use `tool_choice`"),
    ("stop", "Chat Completions", "use `stop_sequences`"),
    ("stream_options", "Chat Completions", "usage is always reported"),
    ("parallel_tool_calls", "Chat Completions", "use `tool_choice.disable_parallel_tool_use`"),
    ("logprobs", "Chat Completions", "the Messages API has no logprobs"),
    ("top_logprobs", "Chat Completions", "the Messages API has no logprobs"),
    ("prompt", "Completions", "use `messages`"),
    ("input", "Responses", "use `messages`"),
    ("instructions", "Responses", "use `system`"),
    ("max_output_tokens", "Responses", "use `max_tokens`"),
];

/// Refuses a body that carries a top-level field of one of OpenAI's APIs.
pub fn refuse_other_apis(f: &Fields<'_>) -> Result<(), ApiError> {
    match OTHER_API_FIELDS.iter().find(|(field, _, _)| f.has(field)) {
        Some((field, api, instead)) => Err(other_api(field, api, instead)),
        None => Ok(()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn the_field_leads_the_message_once() {
        let e = named(ApiError::invalid_param("max_tokens", "Field required"));
        assert_eq!(e.message, "max_tokens: Field required");
        let e = named(ApiError::invalid_param("temperature", "temperature must be in [0, 2], got 3.0."));
        assert_eq!(e.message, "temperature must be in [0, 2], got 3.0.");
        let e = named(ApiError::invalid_param("stop_sequences", "stop cannot contain an empty string."));
        assert_eq!(e.message, "stop_sequences: stop cannot contain an empty string.");
        let e = named(ApiError::invalid_param("top_k", "'top_k' must be an integer, got a string"));
        assert_eq!(e.message, "'top_k' must be an integer, got a string");
        assert_eq!(named(ApiError::bad_request("invalid JSON body: x")).message, "invalid JSON body: x");
    }

    #[test]
    fn fields_of_other_apis_are_refused_by_name() {
        for (body, param, api) in [
            (json!({"max_completion_tokens": 5}), "max_completion_tokens", "Chat Completions"),
            (json!({"response_format": {"type": "json_object"}}), "response_format", "Chat Completions"),
            (json!({"n": 2}), "n", "Chat Completions"),
            (json!({"functions": []}), "functions", "Chat Completions"),
            (json!({"input": "hi"}), "input", "Responses"),
        ] {
            let e = refuse_other_apis(&Fields::new(&body)).expect_err("refused");
            assert_eq!((e.status, e.param.as_deref()), (400, Some(param)), "{body}");
            assert!(e.message.contains(api), "{}", e.message);
        }
        let fine = json!({"model": "m", "max_tokens": 5, "messages": [], "service_tier": "auto", "container": null});
        assert!(refuse_other_apis(&Fields::new(&fine)).is_ok());
    }
}
