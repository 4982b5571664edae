//! The MCP tool loop on `/v1/responses` end to end, against real MCP servers: the npm
//! package `@modelcontextprotocol/server-everything` (over stdio, and over streamable HTTP as a
//! request's own `server_url`, as a `--mcp-config-path` server, and behind TLS) and `tools/mcp/pyserver.py`
//! (PyPI `mcp`, stdio), installed by `tools/mcp/install.sh`; the simulator is scripted to call
//! their tools and to answer once their outputs are in its prompt. One-shot and streamed
//! answers are compared item by item; the faults (a server that will not start, one that
//! crashes mid-call, hangs, fails, answers too much, lists nothing) each end the request with
//! a failed `mcp_call` item or an error naming the server, and leave no child behind. A call
//! held for approval is continued with the client's answer; a tool list the server says
//! changed is fetched again.

mod common;

use std::path::PathBuf;
use std::process::Command;
use std::time::Duration;

use common::{Gateway, Options, Response};
use serde_json::{json, Value};
use shardgate_testkit::tls::{Pki, ServerSetup, Terminator};

fn call(name: &str, arguments: Value) -> String {
    format!("<tool_call>\n{}\n</tool_call>", json!({"name": name, "arguments": arguments}))
}

/// The servers' cache (installed once by the script).
fn mcp_home() -> PathBuf {
    let root = env!("CARGO_MANIFEST_DIR");
    let out = Command::new(format!("{root}/tools/mcp/install.sh")).output().expect("tools/mcp/install.sh runs");
    assert!(out.status.success(), "tools/mcp/install.sh failed: {}", String::from_utf8_lossy(&out.stderr));
    PathBuf::from(String::from_utf8(out.stdout).unwrap().trim())
}

fn gateway() -> Gateway {
    gateway_with("", &[])
}

/// The gateway with `more` servers (YAML list entries) after the usual ones, and `args`.
fn gateway_with(more: &str, args: &[&str]) -> Gateway {
    let home = mcp_home();
    let python = home.join("venv/bin/python").display().to_string();
    let pyserver = format!("{}/tools/mcp/pyserver.py", env!("CARGO_MANIFEST_DIR"));
    let everything = home.join("npm/node_modules/@modelcontextprotocol/server-everything/dist/index.js");
    // SMG's format (YAML; `envs`, `required`): `py` is connected before the gateway serves.
    let config = format!(
        "servers:
  - name: py
    protocol: stdio
    command: {python}
    args: [{pyserver}]
    envs: {{PYTHONUNBUFFERED: '1'}}
    required: true
  - name: empty
    protocol: stdio
    command: {python}
    args: [{pyserver}, --no-tools]
  - name: everything
    protocol: stdio
    command: node
    args: [{everything}, stdio]
  - name: broken
    protocol: stdio
    command: /nonexistent/mcp-server
{more}",
        everything = everything.display()
    );
    let dir = common::test_dir();
    let path = dir.join("mcp.yaml");
    std::fs::write(&path, config).unwrap();
    // Tool outputs first: the first line whose text is in the prompt answers.
    let script = [
        json!({"prompt_contains": "sunny in Paris", "text": "It is sunny in Paris."}),
        json!({"prompt_contains": "Echo: hello mcp", "text": "The server echoed."}),
        json!({"prompt_contains": "The user denied this call", "text": "I did not look it up."}),
        json!({"prompt_contains": "error: ", "text": "The tool failed."}),
        json!({"prompt_contains": "ask py weather", "text": format!("<think>look it up</think>{}", call("weather", json!({"city": "Paris"})))}),
        json!({"prompt_contains": "ask collide", "text": call("py__weather", json!({"city": "Paris"}))}),
        json!({"prompt_contains": "ask everything echo", "text": call("echo", json!({"message": "hello mcp"}))}),
        json!({"prompt_contains": "ask py fail", "text": call("fail", json!({"reason": "testing"}))}),
        json!({"prompt_contains": "ask py crash", "text": call("crash", json!({}))}),
        json!({"prompt_contains": "ask py hang", "text": call("hang", json!({}))}),
        json!({"prompt_contains": "ask py grow", "text": call("grow", json!({}))}),
        json!({"prompt_contains": "ask py huge", "text": call("huge", json!({"size": 2_000_000}))}),
        json!({"prompt_contains": "ask both", "text": format!("{}{}", call("weather", json!({"city": "Paris"})), call("get_time", json!({})))}),
        json!({"text": "Nothing to call."}),
    ];
    let script = script.iter().map(Value::to_string).collect::<Vec<_>>().join("\n");
    let gateway_args = [
        "--reasoning-parser",
        "qwen3",
        "--tool-call-parser",
        "qwen",
        "--mcp-config-path",
        &path.display().to_string(),
        "--mcp-call-timeout-secs",
        "3",
        "--mcp-max-tool-calls",
        "4",
    ]
    .map(String::from)
    .to_vec();
    let gateway_args = gateway_args.into_iter().chain(args.iter().map(|a| a.to_string())).collect();
    Gateway::start_with(Options { script: Some(script), gateway_args, ..Default::default() })
}

fn mcp(label: &str) -> Value {
    json!({"type": "mcp", "server_label": label})
}

fn request(input: &str, tools: Value) -> Value {
    json!({"model": "test-model", "input": input, "tools": tools})
}

fn streamed(g: &Gateway, body: &Value) -> (Vec<(String, Value)>, Value) {
    let mut body = body.clone();
    body["stream"] = json!(true);
    let r: Response = g.post_json("/v1/responses", &body);
    assert_eq!(r.status, 200, "{}", r.text());
    let events = r.named_events();
    for (k, (_, v)) in events.iter().enumerate() {
        assert_eq!(v["sequence_number"], k, "{events:?}");
    }
    let last = events.last().expect("events").1["response"].clone();
    (events, last)
}

/// Output items without their ids (which differ between two answers).
fn items(response: &Value) -> Vec<Value> {
    let mut out = response["output"].as_array().expect("output").clone();
    for item in &mut out {
        item.as_object_mut().unwrap().remove("id");
    }
    out
}

fn kinds(response: &Value) -> Vec<String> {
    items(response).iter().map(|i| i["type"].as_str().unwrap().to_string()).collect()
}

#[test]
fn mcp_tools_run_in_the_gateway_streamed_and_not() {
    let g = gateway();
    let cases = [
        (
            "ask py weather",
            mcp("py"),
            "weather",
            json!({"city": "Paris"}),
            "sunny in Paris, 21 C",
            "It is sunny in Paris.",
        ),
        (
            "ask everything echo",
            mcp("everything"),
            "echo",
            json!({"message": "hello mcp"}),
            "Echo: hello mcp",
            "The server echoed.",
        ),
    ];
    for (input, tool, name, arguments, output, answer) in cases {
        let body = request(input, json!([tool]));
        let r = g.post_json("/v1/responses", &body);
        assert_eq!(r.status, 200, "{}", r.text());
        let v = r.json();
        let expected: &[&str] = if name == "weather" {
            &["mcp_list_tools", "reasoning", "mcp_call", "message"]
        } else {
            &["mcp_list_tools", "mcp_call", "message"]
        };
        assert_eq!(kinds(&v), expected, "{v}");
        let listed = &v["output"][0];
        assert_eq!(listed["server_label"], tool["server_label"]);
        assert!(
            listed["tools"].as_array().unwrap().iter().any(|t| t["name"] == name && t["input_schema"].is_object()),
            "{listed}"
        );
        let call = v["output"].as_array().unwrap().iter().find(|i| i["type"] == "mcp_call").unwrap();
        assert_eq!(
            (call["name"].as_str(), call["status"].as_str(), &call["error"]),
            (Some(name), Some("completed"), &Value::Null)
        );
        assert_eq!(serde_json::from_str::<Value>(call["arguments"].as_str().unwrap()).unwrap(), arguments);
        assert_eq!(call["output"].as_str(), Some(output));
        assert!(call["id"].as_str().unwrap().starts_with("mcp_"));
        assert_eq!(v["output"].as_array().unwrap().last().unwrap()["content"][0]["text"], answer);
        assert_eq!(v["status"], "completed");
        // Two generations: both counted.
        assert!(v["usage"]["output_tokens"].as_u64().unwrap() > 0);
        // A stored MCP response is continued: its calls and outputs are the next prompt's history.
        let next =
            json!({"model": "test-model", "input": "thanks", "previous_response_id": v["id"], "tools": [tool.clone()]});
        let r = g.post_json("/v1/responses", &next);
        assert_eq!(r.status, 200, "{}", r.text());
        assert_eq!(kinds(&r.json()), ["mcp_list_tools", "message"]);

        let (events, done) = streamed(&g, &body);
        assert_eq!(items(&done), items(&v), "streamed and one-shot answers agree");
        assert_eq!(done["usage"]["output_tokens"], v["usage"]["output_tokens"]);
        let names: Vec<&str> = events.iter().map(|(n, _)| n.as_str()).collect();
        let at = |n: &str| names.iter().position(|x| *x == n).unwrap_or_else(|| panic!("no {n} in {names:?}"));
        assert!(at("response.created") < at("response.mcp_list_tools.in_progress"));
        assert!(at("response.mcp_list_tools.completed") < at("response.mcp_call.in_progress"));
        assert!(at("response.mcp_call.in_progress") < at("response.mcp_call_arguments.delta"));
        assert!(at("response.mcp_call_arguments.done") < at("response.mcp_call.completed"));
        assert!(at("response.mcp_call.completed") < at("response.output_text.delta"));
        assert_eq!(names.last(), Some(&"response.completed"));
        let deltas: String = events
            .iter()
            .filter(|(n, _)| n == "response.mcp_call_arguments.delta")
            .map(|(_, v)| v["delta"].as_str().unwrap())
            .collect();
        assert_eq!(deltas, call["arguments"].as_str().unwrap());
        let done_item = events
            .iter()
            .rev()
            .find(|(n, v)| n == "response.output_item.done" && v["item"]["type"] == "mcp_call")
            .expect("the call's output_item.done");
        assert_eq!(done_item.1["item"]["output"].as_str(), Some(output));
    }
    let metrics = g.metrics();
    for line in [
        "smg_mcp_tool_calls_total{model=\"test-model\",tool_name=\"weather\",result=\"success\"} 2",
        "smg_mcp_tool_calls_total{model=\"test-model\",tool_name=\"echo\",result=\"success\"} 2",
        "smg_mcp_tool_iterations_total 10",
    ] {
        assert!(metrics.contains(line), "{line} not in\n{metrics}");
    }
}

#[test]
fn colliding_names_are_prefixed_and_function_tools_end_the_turn() {
    let g = gateway();
    let own = json!({"type": "function", "name": "weather", "parameters": {"type": "object"}});
    let v = g.post_json("/v1/responses", &request("ask collide", json!([own, mcp("py")]))).json();
    let call =
        v["output"].as_array().unwrap().iter().find(|i| i["type"] == "mcp_call").unwrap_or_else(|| panic!("{v}"));
    assert_eq!((call["name"].as_str(), call["output"].as_str()), (Some("weather"), Some("sunny in Paris, 21 C")));
    // A call to a function tool is the client's: it ends the response, after the MCP call ran.
    let get_time = json!({"type": "function", "name": "get_time"});
    let v = g.post_json("/v1/responses", &request("ask both", json!([get_time, mcp("py")]))).json();
    assert_eq!(kinds(&v), ["mcp_list_tools", "mcp_call", "function_call"], "{v}");
    assert_eq!(v["output"][1]["status"], "completed");
}

fn answer(id: &Value, approve: bool) -> Value {
    json!({"type": "mcp_approval_response", "approval_request_id": id, "approve": approve})
}

/// Streamed and one-shot, the same body gives the same items; the one-shot response.
fn both(g: &Gateway, body: &Value) -> Value {
    let r = g.post_json("/v1/responses", body);
    assert_eq!(r.status, 200, "{}", r.text());
    let v = r.json();
    let (_, done) = streamed(g, body);
    assert_eq!(items(&done), items(&v), "streamed and one-shot answers agree");
    v
}

#[test]
fn approval_holds_the_call_until_the_client_answers() {
    let g = gateway();
    // As in SMG, only a request that asks for approval gets it: without `require_approval`
    // the call runs (OpenAI's hosted default is to ask).
    for approval in [None, Some("never")] {
        let mut tool = mcp("py");
        if let Some(a) = approval {
            tool["require_approval"] = json!(a);
        }
        let v = g.post_json("/v1/responses", &request("ask py weather", json!([tool]))).json();
        assert_eq!(kinds(&v), ["mcp_list_tools", "reasoning", "mcp_call", "message"], "{approval:?}: {v}");
    }
    let tool = json!({"type": "mcp", "server_label": "py", "require_approval": "always"});
    let body = request("ask py weather", json!([tool]));
    let v = both(&g, &body);
    assert_eq!(kinds(&v), ["mcp_list_tools", "reasoning", "mcp_approval_request"], "{v}");
    let asked = &v["output"][2];
    assert_eq!((asked["name"].as_str(), asked["server_label"].as_str()), (Some("weather"), Some("py")));
    let id = &asked["id"];
    let continued =
        |input: Value| json!({"model": "test-model", "input": input, "previous_response_id": v["id"], "tools": [tool]});

    // Approved: the gateway runs the call, then the model answers with its output.
    let approved = both(&g, &continued(json!([answer(id, true)])));
    assert_eq!(kinds(&approved), ["mcp_list_tools", "mcp_call", "message"], "{approved}");
    let call = &approved["output"][1];
    assert_eq!(
        (&call["approval_request_id"], call["output"].as_str(), call["status"].as_str()),
        (id, Some("sunny in Paris, 21 C"), Some("completed"))
    );
    assert_eq!(call["arguments"], asked["arguments"]);
    assert_eq!(approved["output"][2]["content"][0]["text"], "It is sunny in Paris.");
    let (events, _) = streamed(&g, &continued(json!([answer(id, true)])));
    let names: Vec<&str> = events.iter().map(|(n, _)| n.as_str()).collect();
    let at = |n: &str| names.iter().position(|x| *x == n).unwrap_or_else(|| panic!("no {n} in {names:?}"));
    assert!(at("response.mcp_call.in_progress") < at("response.mcp_call_arguments.delta"));
    assert!(at("response.mcp_call_arguments.done") < at("response.mcp_call.completed"));
    assert!(at("response.mcp_call.completed") < at("response.output_text.delta"));

    // Denied: nothing runs; the model reads that the user denied it, with the reason.
    let mut no = answer(id, false);
    no["reason"] = json!("not today");
    let denied = both(&g, &continued(json!([no])));
    assert_eq!(kinds(&denied), ["mcp_list_tools", "message"], "{denied}");
    assert_eq!(denied["output"][1]["content"][0]["text"], "I did not look it up.");

    // Passed back by hand, without previous_response_id: the request item is in the input.
    let by_hand = json!({"model": "test-model", "tools": [tool],
        "input": [{"role": "user", "content": "ask py weather"}, asked, answer(id, true)]});
    assert_eq!(items(&both(&g, &by_hand)), items(&approved));

    // Refused, naming the answer: an unknown request, one answered already in the chain, one
    // without the response that asked, and an answer in a request without MCP tools.
    let again = json!({"model": "test-model", "input": [answer(id, true)], "previous_response_id": approved["id"], "tools": [tool]});
    let cases = [
        (
            continued(json!([answer(&json!("mcpr_nope"), true)])),
            "input[0].approval_request_id",
            "no mcp_approval_request",
        ),
        (again, "input[0].approval_request_id", "answered already"),
        (
            json!({"model": "test-model", "input": [answer(id, true)], "tools": [tool]}),
            "input[0].approval_request_id",
            "no mcp_approval_request",
        ),
        (
            json!({"model": "test-model", "input": [answer(id, true)], "previous_response_id": v["id"]}),
            "input[0].type",
            "'tools'",
        ),
    ];
    for (mut body, param, says) in cases {
        for stream in [false, true] {
            body["stream"] = json!(stream);
            let r = g.post_json("/v1/responses", &body);
            assert_eq!((r.status, r.json()["error"]["param"].as_str()), (400, Some(param)), "{body}: {}", r.text());
            assert!(r.json()["error"]["message"].as_str().unwrap().contains(says), "{}", r.text());
        }
    }
}

#[test]
fn faults_end_the_request_with_a_failed_call_or_an_error_naming_the_server() {
    let g = gateway();
    // A call that fails: the item says why, the model reads the error, the response completes.
    let cases = [
        ("ask py fail", "mcp_tool_execution_error", "refused: testing"),
        ("ask py crash", "mcp_protocol_error", "MCP server 'py'"),
        ("ask py hang", "mcp_protocol_error", "timed out"),
        ("ask py huge", "mcp_protocol_error", "cap"),
    ];
    for (input, kind, says) in cases {
        let body = request(input, json!([mcp("py")]));
        for stream in [false, true] {
            let v = if stream { streamed(&g, &body).1 } else { g.post_json("/v1/responses", &body).json() };
            let call = v["output"]
                .as_array()
                .unwrap()
                .iter()
                .find(|i| i["type"] == "mcp_call")
                .unwrap_or_else(|| panic!("{v}"));
            assert_eq!((call["status"].as_str(), call["output"].as_str()), (Some("failed"), None), "{input}: {call}");
            assert_eq!(call["error"]["type"], kind, "{input}: {call}");
            assert!(call["error"].to_string().contains(says), "{input}: {call}");
            assert_eq!(kinds(&v).last().map(String::as_str), Some("message"), "{input}: {v}");
        }
    }
    // The server is started again after the crash and the hang.
    let v = g.post_json("/v1/responses", &request("ask py weather", json!([mcp("py")]))).json();
    assert_eq!(v["output"][2]["output"], "sunny in Paris, 21 C", "{v}");
    // max_tool_calls: the call is not run.
    let mut body = request("ask py weather", json!([mcp("py")]));
    body["max_tool_calls"] = json!(0);
    let v = g.post_json("/v1/responses", &body).json();
    assert!(v["output"][2]["error"]["message"].as_str().unwrap().contains("max_tool_calls (0)"), "{v}");
    // No list of tools: an error naming the server, before anything is generated; streamed
    // too (as SMG, no `response.mcp_list_tools.failed`: the stream has not begun).
    for (label, status, code, says) in [
        ("broken", 424, Some("connect_mcp_server_failed"), "MCP server 'broken' could not be started"),
        ("nope", 400, Some("invalid_value"), "no MCP server named 'nope'"),
    ] {
        for stream in [false, true] {
            let mut body = request("ask py weather", json!([mcp(label)]));
            body["stream"] = json!(stream);
            let r = g.post_json("/v1/responses", &body);
            let e = &r.json()["error"];
            assert_eq!((r.status, e["code"].as_str()), (status, code), "{}", r.text());
            assert!(e["message"].as_str().unwrap().contains(says), "{}", r.text());
        }
    }
    // The type spelled with escapes misses the route's byte search: refused, not served without it.
    let r = g.post(
        "/v1/responses",
        r#"{"model":"test-model","input":"hi","tools":[{"type":"m\u0063p","server_label":"py"}]}"#,
    );
    assert_eq!((r.status, r.json()["error"]["param"].as_str()), (400, Some("tools[0].type")), "{}", r.text());
    // A server that lists no tools offers the model nothing, and says so.
    let v = g.post_json("/v1/responses", &request("hello", json!([mcp("empty")]))).json();
    assert_eq!(
        (kinds(&v), &v["output"][0]["tools"]),
        (vec!["mcp_list_tools".to_string(), "message".to_string()], &json!([])),
        "{v}"
    );
    // Nothing is left behind: the crashed and the hung server were reaped, and each python
    // server runs once at most (the hung one was killed, not left beside its successor).
    let settled = || {
        let now = children(g.pid());
        now.iter().all(|(state, _)| *state != 'Z')
            && now.iter().filter(|(_, cmd)| cmd.contains("pyserver")).count() <= 2
    };
    common::eventually_within(Duration::from_secs(10), settled, "no zombie or leftover server");
}

/// A port of this project's test range (24000-24999) that nobody listens on.
fn range_port() -> u16 {
    (24_500..25_000)
        .find(|p| std::net::TcpListener::bind(("127.0.0.1", *p)).is_ok())
        .expect("a free port in 24500-24999")
}

/// `server-everything` over streamable HTTP on a port of the range, until dropped.
fn everything_http() -> (common::ChildGuard, u16) {
    let home = mcp_home();
    let everything = home.join("npm/node_modules/@modelcontextprotocol/server-everything/dist/index.js");
    let port = range_port();
    let server = Command::new("node")
        .arg(everything)
        .arg("streamableHttp")
        .env("PORT", port.to_string())
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn()
        .expect("node runs");
    let guard = common::ChildGuard(server);
    common::eventually_within(
        Duration::from_secs(20),
        || std::net::TcpStream::connect(("127.0.0.1", port)).is_ok(),
        "server-everything listening",
    );
    (guard, port)
}

#[test]
fn a_requests_own_server_over_streamable_http() {
    let (_server, port) = everything_http();
    let url = format!("http://127.0.0.1:{port}/mcp");
    // The same server from the config file too (SMG's `streamable` protocol).
    let g = gateway_with(&format!("  - name: configured_web\n    protocol: streamable\n    url: {url}\n"), &[]);
    let v = both(&g, &request("ask everything echo", json!([mcp("configured_web")])));
    assert_eq!(kinds(&v), ["mcp_list_tools", "mcp_call", "message"], "{v}");
    assert_eq!(v["output"][1]["output"].as_str(), Some("Echo: hello mcp"), "{v}");
    let secret = "Bearer not-for-the-logs-4711";
    let tool = json!({"type": "mcp", "server_label": "web", "server_url": url, "headers": {"Authorization": secret}});
    let body = request("ask everything echo", json!([tool]));
    let v = g.post_json("/v1/responses", &body).json();
    assert_eq!(kinds(&v), ["mcp_list_tools", "mcp_call", "message"], "{v}");
    assert_eq!(
        (v["output"][1]["server_label"].as_str(), v["output"][1]["output"].as_str()),
        (Some("web"), Some("Echo: hello mcp"))
    );
    let (_, done) = streamed(&g, &body);
    assert_eq!(items(&done), items(&v));
    assert!(!g.logs().contains("not-for-the-logs"), "a header value reached the log");
    // Nobody listening there: the request fails naming the server.
    let gone = json!({"type": "mcp", "server_label": "nowhere", "server_url": format!("http://127.0.0.1:{}/mcp", range_port())});
    let r = g.post_json("/v1/responses", &request("hello", json!([gone])));
    assert_eq!(r.status, 424, "{}", r.text());
    assert!(r.text().contains("MCP server 'nowhere'"), "{}", r.text());
}

/// An `https://` server behind a TLS terminator whose certificate a throwaway CA signed: trusted
/// with `--ca-cert-path`, refused (424, naming the server) without it.
#[test]
fn an_https_server_is_verified() {
    let (_server, port) = everything_http();
    let dir = common::test_dir();
    let pki = Pki::new(&dir.join("pki"), "mcp");
    let setup = ServerSetup { leaf: pki.leaf("server", &["127.0.0.1"]), alpn: Vec::new(), client_ca: None };
    let front = Terminator::start(&setup, format!("127.0.0.1:{port}"));
    let tool =
        json!({"type": "mcp", "server_label": "tls", "server_url": format!("https://127.0.0.1:{}/mcp", front.port)});
    let body = request("ask everything echo", json!([tool]));
    let ca = pki.ca_path().display().to_string();
    let g = gateway_with("", &["--ca-cert-path", &ca]);
    let v = both(&g, &body);
    assert_eq!(kinds(&v), ["mcp_list_tools", "mcp_call", "message"], "{v}");
    assert_eq!(v["output"][1]["output"].as_str(), Some("Echo: hello mcp"), "{v}");
    drop(g);
    let untrusting = gateway();
    let r = untrusting.post_json("/v1/responses", &body);
    assert_eq!(r.status, 424, "{}", r.text());
    assert!(r.text().contains("MCP server 'tls'"), "{}", r.text());
}

/// A server's `notifications/tools/list_changed` makes the gateway list its tools again: the
/// list is cached until then.
#[test]
fn a_changed_tool_list_is_fetched_again() {
    let g = gateway();
    let listed = |g: &Gateway| -> Vec<String> {
        let v = g.post_json("/v1/responses", &request("hello", json!([mcp("py")]))).json();
        let tools = v["output"][0]["tools"].as_array().unwrap_or_else(|| panic!("{v}")).clone();
        tools.iter().map(|t| t["name"].as_str().unwrap().to_string()).collect()
    };
    assert!(!listed(&g).contains(&"grown".to_string()));
    let v = g.post_json("/v1/responses", &request("ask py grow", json!([mcp("py")]))).json();
    assert_eq!(v["output"][1]["output"], "added grown", "{v}");
    common::eventually_within(Duration::from_secs(10), || listed(&g).contains(&"grown".to_string()), "grown listed");
}

#[test]
fn shutdown_closes_every_session_and_reaps_the_children() {
    let mut g = gateway();
    for label in ["py", "everything"] {
        let v = g.post_json("/v1/responses", &request("hello", json!([mcp(label)]))).json();
        assert_eq!(v["output"][0]["type"], "mcp_list_tools", "{v}");
    }
    let servers: Vec<u32> = children_pids(g.pid());
    assert!(servers.len() >= 2, "the two servers run as children: {servers:?}");
    g.signal_gateway(libc::SIGTERM);
    assert!(g.wait_gateway_exit(Duration::from_secs(30)).is_some(), "the gateway exits");
    assert!(g.logs().contains("MCP sessions closed"), "{}", g.logs());
    for pid in servers {
        assert!(!std::path::Path::new(&format!("/proc/{pid}")).exists(), "server {pid} outlived the gateway");
    }
}

fn children_pids(pid: u32) -> Vec<u32> {
    let list = std::fs::read_to_string(format!("/proc/{pid}/task/{pid}/children")).unwrap_or_default();
    let mut out: Vec<u32> = list.split_whitespace().filter_map(|p| p.parse().ok()).collect();
    for task in std::fs::read_dir(format!("/proc/{pid}/task")).unwrap().flatten() {
        let more = std::fs::read_to_string(task.path().join("children")).unwrap_or_default();
        out.extend(more.split_whitespace().filter_map(|p| p.parse::<u32>().ok()));
    }
    out.sort_unstable();
    out.dedup();
    out
}

/// The gateway's child processes: (state, command line).
fn children(pid: u32) -> Vec<(char, String)> {
    let mut out = Vec::new();
    for entry in std::fs::read_dir("/proc").unwrap().flatten() {
        let Ok(stat) = std::fs::read_to_string(entry.path().join("stat")) else { continue };
        let Some(after) = stat.rfind(')').map(|i| &stat[i + 2..]) else { continue };
        let fields: Vec<&str> = after.split(' ').collect();
        if fields.get(1).and_then(|p| p.parse::<u32>().ok()) == Some(pid) {
            let cmd = std::fs::read_to_string(entry.path().join("cmdline")).unwrap_or_default().replace('\0', " ");
            out.push((fields[0].chars().next().unwrap_or('?'), cmd));
        }
    }
    out
}

/// A server marked `required` that cannot start stops the gateway at startup, naming it.
#[test]
fn a_required_server_that_cannot_start_stops_the_gateway() {
    let dir = common::test_dir();
    let path = dir.join("mcp.yaml");
    let config =
        "servers:\n  - name: broken\n    protocol: stdio\n    command: /nonexistent/mcp-server\n    required: true\n";
    std::fs::write(&path, config).unwrap();
    let out = Command::new(env!("CARGO_BIN_EXE_shardgate"))
        .args(["launch", "--worker-urls", &format!("ipc://{}/engine", dir.display())])
        .args(["--model-path", &common::model_dir().display().to_string()])
        .args(["--port", &common::free_port().to_string(), "--metrics-port", &common::free_port().to_string()])
        .args(["--history-backend", "none", "--mcp-config-path", &path.display().to_string()])
        .output()
        .expect("the gateway runs");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success(), "{stderr}");
    assert!(stderr.contains("Failed to connect to static server 'broken' (required in --mcp-config-path)"), "{stderr}");
}
