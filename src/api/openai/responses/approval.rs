//! Continuing a response that stopped at an `mcp_approval_request`: each
//! `{"type":"mcp_approval_response","approval_request_id","approve","reason"?}` item of the
//! input is matched with the request it answers, found among the items before it (the
//! `previous_response_id` chain's output, or items the client passed back in `input`).
//!
//! An approved call is run by the tool loop before it generates (an `mcp_call` item with the
//! request's id as its `approval_request_id`); a denied one is shown to the model as the call
//! it made with `denied(reason)` as its output, and nothing runs. An answer to a request that
//! is not there, or that was answered already (an earlier answer, or an `mcp_call` that
//! carries its id), is a 400 naming the answer's field: answering twice must not run a tool
//! twice.

use serde_json::Value;

use super::mcp_tools::McpFunction;
use crate::error::ApiError;

/// One answered approval request.
#[derive(Debug, Clone, PartialEq)]
pub struct Answer {
    /// The request's id (`mcpr_…`): the call's id in the next prompt.
    pub request_id: String,
    pub server_label: String,
    /// The tool's name on its server.
    pub name: String,
    pub arguments: String,
    /// The name the model calls the tool by (its own name when this request does not offer it).
    pub function: String,
    pub approve: bool,
    pub reason: Option<String>,
}

/// What the model reads as the output of a call the client denied.
pub fn denied(reason: Option<&str>) -> String {
    match reason {
        Some(reason) => format!("The user denied this call; it was not run. Reason: {reason}"),
        None => "The user denied this call; it was not run.".to_string(),
    }
}

fn kind(item: &Value) -> Option<&str> {
    item.get("type").and_then(Value::as_str)
}

fn str_of<'v>(item: &'v Value, field: &str) -> Option<&'v str> {
    item.get(field).and_then(Value::as_str)
}

fn bad(param: &str, message: impl Into<String>) -> ApiError {
    ApiError::invalid_param(param, message)
}

/// The input's answers, in order; `history` is what precedes the input, `functions` the MCP
/// tools this request offers (an approved call must be to one of them).
pub fn read(history: &[Value], input: &[Value], functions: &[McpFunction]) -> Result<Vec<Answer>, ApiError> {
    let mut answers = Vec::new();
    for (i, item) in input.iter().enumerate() {
        if kind(item) != Some("mcp_approval_response") {
            continue;
        }
        let at = format!("input[{i}]");
        let id_param = format!("{at}.approval_request_id");
        let id = str_of(item, "approval_request_id")
            .ok_or_else(|| bad(&id_param, "'approval_request_id' must be a string"))?;
        let approve = item
            .get("approve")
            .and_then(Value::as_bool)
            .ok_or_else(|| bad(&format!("{at}.approve"), "'approve' must be a boolean"))?;
        let reason = match item.get("reason") {
            None | Some(Value::Null) => None,
            Some(Value::String(r)) => Some(r.clone()),
            Some(_) => return Err(bad(&format!("{at}.reason"), "'reason' must be a string")),
        };
        let earlier = || history.iter().chain(&input[..i]);
        let request = earlier()
            .find(|x| kind(x) == Some("mcp_approval_request") && str_of(x, "id") == Some(id))
            .ok_or_else(|| {
                bad(
                    &id_param,
                    format!(
                        "no mcp_approval_request '{id}' comes before this item: continue the response that \
                             asked for it ('previous_response_id'), or pass its items back in 'input'"
                    ),
                )
            })?;
        let answered = |x: &Value| match kind(x) {
            Some("mcp_approval_response" | "mcp_call") => str_of(x, "approval_request_id") == Some(id),
            _ => false,
        };
        if earlier().any(answered) {
            return Err(bad(&id_param, format!("the mcp_approval_request '{id}' was answered already")));
        }
        let field = |name: &str| {
            str_of(request, name)
                .ok_or_else(|| bad(&id_param, format!("the mcp_approval_request '{id}' has no string '{name}'")))
        };
        let (server_label, name, arguments) = (field("server_label")?, field("name")?, field("arguments")?);
        let offered = functions.iter().find(|f| f.server_label == server_label && f.tool == name);
        if approve && offered.is_none() {
            return Err(bad(
                &id_param,
                format!(
                    "the approved call is to '{name}' of MCP server '{server_label}', which this request's \
                     'tools' does not offer"
                ),
            ));
        }
        answers.push(Answer {
            request_id: id.to_string(),
            server_label: server_label.to_string(),
            name: name.to_string(),
            arguments: arguments.to_string(),
            function: offered.map_or(name, |f| f.function.as_str()).to_string(),
            approve,
            reason,
        });
    }
    Ok(answers)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;
    use shardgate_mcp::ServerRef;

    fn request(id: &str) -> Value {
        json!({"type": "mcp_approval_request", "id": id, "server_label": "py", "name": "weather",
               "arguments": "{\"city\":\"Paris\"}"})
    }

    fn answer(id: &str, approve: bool) -> Value {
        json!({"type": "mcp_approval_response", "approval_request_id": id, "approve": approve})
    }

    #[test]
    fn answers_are_matched_with_their_requests() {
        let functions = [McpFunction {
            function: "py__weather".into(),
            server_label: "py".into(),
            server: ServerRef::Configured("py".into()),
            tool: "weather".into(),
            approval: true,
        }];
        let history = [json!({"type": "message", "role": "user", "content": "hi"}), request("mcpr_1")];
        let mut denied = answer("mcpr_2", false);
        denied["reason"] = json!("not now");
        let input = [answer("mcpr_1", true), request("mcpr_2"), denied];
        let got = read(&history, &input, &functions).unwrap();
        assert_eq!(
            got.iter()
                .map(|a| (a.request_id.as_str(), a.function.as_str(), a.approve, a.reason.as_deref()))
                .collect::<Vec<_>>(),
            [("mcpr_1", "py__weather", true, None), ("mcpr_2", "py__weather", false, Some("not now"))]
        );
        assert_eq!((got[0].server_label.as_str(), got[0].arguments.as_str()), ("py", "{\"city\":\"Paris\"}"));
        // A denial needs no offered tool: the model is told under the tool's own name.
        let got = read(&history, &[answer("mcpr_1", false)], &[]).unwrap();
        assert_eq!(got[0].function, "weather");

        let ran = json!({"type": "mcp_call", "id": "mcp_1", "approval_request_id": "mcpr_1"});
        let cases = [
            (vec![answer("mcpr_9", true)], &history[..], "input[0].approval_request_id", "no mcp_approval_request"),
            (vec![answer("mcpr_1", true)], &[][..], "input[0].approval_request_id", "no mcp_approval_request"),
            (
                vec![answer("mcpr_1", true), answer("mcpr_1", false)],
                &history[..],
                "input[1].approval_request_id",
                "answered already",
            ),
            (
                vec![ran.clone(), answer("mcpr_1", true)],
                &history[..],
                "input[1].approval_request_id",
                "answered already",
            ),
            (
                vec![json!({"type": "mcp_approval_response", "approve": true})],
                &history[..],
                "input[0].approval_request_id",
                "string",
            ),
            (
                vec![json!({"type": "mcp_approval_response", "approval_request_id": "mcpr_1", "approve": "yes"})],
                &history[..],
                "input[0].approve",
                "boolean",
            ),
            (
                vec![
                    json!({"type": "mcp_approval_response", "approval_request_id": "mcpr_1", "approve": true, "reason": 1}),
                ],
                &history[..],
                "input[0].reason",
                "string",
            ),
        ];
        for (input, history, param, says) in cases {
            let e = read(history, &input, &functions).expect_err(&format!("{input:?}"));
            assert_eq!((e.status, e.param.as_deref()), (400, Some(param)), "{input:?}: {}", e.message);
            assert!(e.message.contains(says), "{input:?}: {}", e.message);
        }
        // Approved, the call must be to a tool this request offers.
        let e = read(&history, &[answer("mcpr_1", true)], &[]).unwrap_err();
        assert!(e.message.contains("does not offer"), "{}", e.message);
    }
}
