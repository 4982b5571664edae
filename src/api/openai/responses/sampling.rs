//! A Responses request's sampling and output fields → the pipeline's `SamplingRequest`:
//! OpenAI's (`max_output_tokens`, `temperature`, `top_p`, `text.format`) and the vLLM
//! extensions vLLM's own `ResponsesRequest` accepts (`top_k`, `min_p`, the penalties, `seed`,
//! `stop`, `stop_token_ids`, `ignore_eos`, `logit_bias`, `skip_special_tokens`,
//! `include_stop_str_in_output`, `priority`, `cache_salt`, `structured_outputs`). Chat's other
//! extensions (`min_tokens`, `bad_words`, `allowed_token_ids`, ...) are not Responses fields
//! there, so they are ignored here like any unknown field. Values are checked by the pipeline.

use crate::api::fields::Fields;
use crate::api::openai::{constraint, sampling};
use crate::engine::Constraint;
use crate::error::ApiError;
use crate::pipeline::request::SamplingRequest;

pub fn read(f: &Fields<'_>) -> Result<SamplingRequest, ApiError> {
    Ok(SamplingRequest {
        stream: f.bool("stream")?.unwrap_or(false),
        max_tokens: f.i64("max_output_tokens")?,
        constraint: read_constraint(f)?,
        ..sampling::common(f)?
    })
}

/// `text.format` (`text`, `json_object`, `json_schema` with its `schema`), or vLLM's
/// `structured_outputs`; not both (vLLM's rule and text).
fn read_constraint(f: &Fields<'_>) -> Result<Option<Constraint>, ApiError> {
    let format = f.object("text")?.and_then(|t| t.get("format")).filter(|v| !v.is_null());
    let structured = f.get("structured_outputs");
    match (format, structured) {
        (Some(_), Some(_)) => {
            Err(ApiError::invalid_param("structured_outputs", "Cannot specify both structured_outputs and text.format"))
        }
        (Some(format), None) => constraint::output_format(format, "text.format", &["schema"]),
        (None, Some(so)) => constraint::structured_outputs(so).map(Some),
        (None, None) => Ok(None),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::{json, Value};

    fn constraint_of(body: Value) -> Result<Option<Constraint>, String> {
        read(&Fields::new(&body)).map(|s| s.constraint).map_err(|e| e.param.unwrap_or_default())
    }

    #[test]
    fn text_format_is_the_constraint_chat_sends_for_response_format() {
        let schema = json!({"type": "object", "properties": {"a": {"type": "integer"}}});
        let cases = [
            (json!({}), Ok(None)),
            (json!({"text": {"format": {"type": "text"}}}), Ok(None)),
            (json!({"text": {"verbosity": "low"}}), Ok(None)),
            (json!({"text": {"format": {"type": "json_object"}}}), Ok(Some(Constraint::JsonObject))),
            (
                json!({"text": {"format": {"type": "json_schema", "name": "x", "schema": schema, "strict": true}}}),
                Ok(Some(Constraint::JsonSchema(schema.to_string()))),
            ),
            (json!({"text": {"format": {"type": "json_schema", "name": "x"}}}), Err("text.format")),
            (json!({"text": {"format": {"type": "yaml"}}}), Err("text.format")),
            (json!({"text": {"format": {"type": "json_schema", "schema": 3}}}), Err("text.format.schema")),
            (json!({"text": "json"}), Err("text")),
            (json!({"structured_outputs": {"regex": "[ab]+"}}), Ok(Some(Constraint::Regex("[ab]+".into())))),
            (
                json!({"structured_outputs": {"regex": "a"}, "text": {"format": {"type": "json_object"}}}),
                Err("structured_outputs"),
            ),
        ];
        for (body, expected) in cases {
            assert_eq!(constraint_of(body.clone()), expected.map_err(str::to_string), "{body}");
        }
        let chat = json!({"response_format": {"type": "json_schema", "json_schema": {"name": "x", "schema": schema}}});
        let chat = constraint::parse(&Fields::new(&chat)).unwrap();
        let responses =
            constraint_of(json!({"text": {"format": {"type": "json_schema", "name": "x", "schema": schema}}}));
        assert_eq!(responses, Ok(chat));
    }

    #[test]
    fn fields_land_where_the_pipeline_reads_them() {
        let body = json!({"max_output_tokens": 5, "temperature": 0.5, "top_p": 0.9, "top_k": 3, "seed": -1,
                          "stop": "x", "stream": true, "min_tokens": 4, "logit_bias": {"7": 1.5}});
        let s = read(&Fields::new(&body)).unwrap();
        assert_eq!(
            (s.max_tokens, s.temperature, s.top_p, s.top_k, s.seed),
            (Some(5), Some(0.5), Some(0.9), Some(3), None)
        );
        assert_eq!((s.stop, s.stream, s.min_tokens, s.logit_bias), (vec!["x".to_string()], true, None, vec![(7, 1.5)]));
        assert_eq!(s.n, None);
        let e = read(&Fields::new(&json!({"max_output_tokens": "5"}))).unwrap_err();
        assert_eq!(e.param.as_deref(), Some("max_output_tokens"));
    }
}
