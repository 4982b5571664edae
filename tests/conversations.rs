//! The Conversations API and stored-response routes against a running gateway and its SQLite
//! history: create, read, update (merged metadata), items (ids, paging both ways, a bad item
//! refused whole), delete; unknown ids are 404s in OpenAI's envelope; the history survives a
//! restart; a corrupt row is a 500 for that request only.

mod common;

use std::time::Duration;

use common::{Gateway, Options};
use serde_json::{json, Value};

fn delete(g: &Gateway, path: &str) -> common::Response {
    g.try_request("DELETE", path, None, &[]).unwrap()
}

#[test]
fn conversations_and_their_items() {
    let g = Gateway::start();
    let created = g.post_json(
        "/v1/conversations",
        &json!({"metadata": {"topic": "demo"}, "items": [{"type": "message", "role": "user", "content": "hello"}]}),
    );
    assert_eq!(created.status, 200, "{}", created.text());
    let c = created.json();
    let id = c["id"].as_str().unwrap().to_string();
    assert!(id.starts_with("conv_"), "{c}");
    assert_eq!((c["object"].as_str(), c["metadata"]["topic"].as_str()), (Some("conversation"), Some("demo")));

    // Metadata merges; null removes a key.
    let updated = g.post_json(&format!("/v1/conversations/{id}"), &json!({"metadata": {"topic": null, "lang": "en"}}));
    assert_eq!(updated.status, 200, "{}", updated.text());
    assert_eq!(updated.json()["metadata"], json!({"lang": "en"}));
    assert_eq!(g.get(&format!("/v1/conversations/{id}")).json()["metadata"], json!({"lang": "en"}));

    let items: Vec<Value> = (0..4).map(|i| json!({"role": "assistant", "content": format!("reply {i}")})).collect();
    let added = g.post_json(&format!("/v1/conversations/{id}/items"), &json!({"items": items}));
    assert_eq!(added.status, 200, "{}", added.text());
    let added = added.json();
    assert_eq!(added["data"].as_array().unwrap().len(), 4);
    assert_eq!(added["data"][0]["content"], json!([{"type": "output_text", "text": "reply 0"}]));

    // Newest first by default; pages follow `after`.
    let page = g.get(&format!("/v1/conversations/{id}/items?limit=2")).json();
    let texts = |p: &Value| -> Vec<String> {
        p["data"].as_array().unwrap().iter().map(|i| i["content"][0]["text"].as_str().unwrap().to_string()).collect()
    };
    assert_eq!(texts(&page), ["reply 3", "reply 2"]);
    assert_eq!(page["has_more"], true);
    let after = page["last_id"].as_str().unwrap();
    let next = g.get(&format!("/v1/conversations/{id}/items?limit=2&after={after}")).json();
    assert_eq!(texts(&next), ["reply 1", "reply 0"]);
    let asc = g.get(&format!("/v1/conversations/{id}/items?order=asc&limit=100")).json();
    assert_eq!(texts(&asc), ["hello", "reply 0", "reply 1", "reply 2", "reply 3"]);
    assert_eq!(asc["has_more"], false);

    let item_id = asc["data"][1]["id"].as_str().unwrap().to_string();
    assert_eq!(g.get(&format!("/v1/conversations/{id}/items/{item_id}")).json()["id"], item_id.as_str());
    let after_delete = delete(&g, &format!("/v1/conversations/{id}/items/{item_id}"));
    assert_eq!((after_delete.status, after_delete.json()["id"].as_str()), (200, Some(id.as_str())));
    assert_eq!(g.get(&format!("/v1/conversations/{id}/items/{item_id}")).status, 404);

    // A bad item refuses the whole request, naming it; nothing is added.
    let bad = g.post_json(
        &format!("/v1/conversations/{id}/items"),
        &json!({"items": [{"role": "user", "content": "ok"}, {"type": "web_search_call"}]}),
    );
    assert_eq!(bad.status, 400, "{}", bad.text());
    assert_eq!(bad.json()["error"]["param"], "items[1].type");
    assert_eq!(g.get(&format!("/v1/conversations/{id}/items?limit=100")).json()["data"].as_array().unwrap().len(), 4);

    let gone = delete(&g, &format!("/v1/conversations/{id}"));
    assert_eq!(gone.json(), json!({"id": id, "object": "conversation.deleted", "deleted": true}));
    for path in [format!("/v1/conversations/{id}"), format!("/v1/conversations/{id}/items")] {
        let r = g.get(&path);
        assert_eq!(r.status, 404, "{path}");
        assert_eq!(r.json()["error"]["type"], "invalid_request_error", "{path}");
    }
}

#[test]
fn bad_requests_and_unknown_ids() {
    let g = Gateway::start();
    let cases: &[(&str, &str, Option<Value>, u16, &str)] = &[
        ("GET", "/v1/responses/resp_nope", None, 404, "response_id"),
        ("DELETE", "/v1/responses/resp_nope", None, 404, "response_id"),
        ("GET", "/v1/responses/resp_nope/input_items", None, 404, "response_id"),
        ("GET", "/v1/conversations/conv_nope", None, 404, "conversation_id"),
        ("POST", "/v1/conversations", Some(json!({"metadata": "x"})), 400, "metadata"),
        (
            "POST",
            "/v1/conversations",
            Some(json!({"items": [{"role": "robot", "content": "x"}]})),
            400,
            "items[0].role",
        ),
        (
            "POST",
            "/v1/conversations",
            Some(json!({"items": (0..21).map(|_| json!({"role": "user", "content": "x"})).collect::<Vec<_>>()})),
            400,
            "items",
        ),
        ("GET", "/v1/conversations/conv_x/items?limit=0", None, 400, "limit"),
    ];
    for (method, path, body, status, param) in cases {
        let body = body.as_ref().map(Value::to_string);
        let r = g.try_request(method, path, body.as_deref(), &[]).unwrap();
        assert_eq!(r.status, *status, "{method} {path}: {}", r.text());
        assert_eq!(r.json()["error"]["param"], *param, "{method} {path}");
    }
    assert_eq!(g.try_request("PUT", "/v1/conversations/conv_x", None, &[]).unwrap().status, 405);
}

#[test]
fn the_history_survives_a_restart_and_a_corrupt_row_fails_only_its_request() {
    let data = std::env::temp_dir().join(format!("sg-history-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&data);
    let args = vec!["--data-dir".to_string(), data.display().to_string()];
    let id = {
        let mut g = Gateway::start_with(Options { gateway_args: args.clone(), ..Default::default() });
        let c = g.post_json("/v1/conversations", &json!({"items": [{"role": "user", "content": "kept"}]})).json();
        g.signal_gateway(libc::SIGTERM);
        assert!(g.wait_gateway_exit(Duration::from_secs(30)).is_some());
        c["id"].as_str().unwrap().to_string()
    };
    let g = Gateway::start_with(Options { gateway_args: args, ..Default::default() });
    let items = g.get(&format!("/v1/conversations/{id}/items")).json();
    assert_eq!(items["data"][0]["content"][0]["text"], "kept", "{items}");

    // Another conversation's row is damaged behind the gateway's back.
    let other = g.post_json("/v1/conversations", &json!({"metadata": {"a": "b"}})).json();
    let other_id = other["id"].as_str().unwrap();
    let db = rusqlite::Connection::open(data.join("history.sqlite3")).unwrap();
    let changed = db.execute("UPDATE conversations SET metadata = '{not json' WHERE id = ?1", [other_id]).unwrap();
    assert_eq!(changed, 1, "the test damaged the row");
    let r = g.get(&format!("/v1/conversations/{other_id}"));
    assert_eq!(r.status, 500, "{}", r.text());
    assert!(r.json()["error"]["message"].as_str().unwrap().contains("cannot be read"), "{}", r.text());
    assert_eq!(g.get(&format!("/v1/conversations/{id}")).status, 200);
    let _ = std::fs::remove_dir_all(&data);
}

/// A scripted engine that says whether the prompt carried the earlier turn: the first answer
/// ("Kept answer about stripes") is only in a prompt that continues it.
fn history_script() -> String {
    [
        json!({"prompt_contains": "Kept answer about stripes", "text": "history seen"}),
        json!({"prompt_contains": "zebras", "text": "Kept answer about stripes"}),
        json!({"text": "no history"}),
    ]
    .iter()
    .map(Value::to_string)
    .collect::<Vec<_>>()
    .join("\n")
}

fn respond(g: &Gateway, extra: Value) -> Value {
    let mut body = json!({"model": "test-model", "max_output_tokens": 16});
    for (k, v) in extra.as_object().unwrap() {
        body[k] = v.clone();
    }
    let r = g.post_json("/v1/responses", &body);
    assert_eq!(r.status, 200, "{}", r.text());
    r.json()
}

fn output_text(response: &Value) -> String {
    let items = response["output"].as_array().unwrap();
    let message = items.iter().find(|i| i["type"] == "message").expect("a message item");
    message["content"][0]["text"].as_str().unwrap().to_string()
}

#[test]
fn a_stored_response_survives_a_restart_and_previous_response_id_continues_it() {
    let data = std::env::temp_dir().join(format!("sg-history-resp-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&data);
    let opts = || Options {
        gateway_args: vec!["--data-dir".into(), data.display().to_string()],
        script: Some(history_script()),
        ..Default::default()
    };
    let (first, unstored) = {
        let mut g = Gateway::start_with(opts());
        let first = respond(&g, json!({"input": "tell me about zebras"}));
        assert_eq!(output_text(&first), "Kept answer about stripes");
        let unstored = respond(&g, json!({"input": "tell me about zebras", "store": false}));
        g.signal_gateway(libc::SIGTERM);
        assert!(g.wait_gateway_exit(Duration::from_secs(30)).is_some());
        (first, unstored)
    };
    let g = Gateway::start_with(opts());
    let id = first["id"].as_str().unwrap();
    assert_eq!(g.get(&format!("/v1/responses/{id}")).json(), first, "stored as returned");
    assert_eq!(g.get(&format!("/v1/responses/{}", unstored["id"].as_str().unwrap())).status, 404);
    let inputs = g.get(&format!("/v1/responses/{id}/input_items")).json();
    assert_eq!(inputs["data"][0]["content"][0]["text"], "tell me about zebras", "{inputs}");

    // The earlier turn is in the prompt only when the request continues it; streamed too.
    let second = respond(&g, json!({"input": "and then?", "previous_response_id": id}));
    assert_eq!((output_text(&second), second["previous_response_id"].as_str()), ("history seen".into(), Some(id)));
    assert_eq!(output_text(&respond(&g, json!({"input": "and then?"}))), "no history");
    let streamed = g.post_json(
        "/v1/responses",
        &json!({"model": "test-model", "input": "and then?",
        "previous_response_id": second["id"], "stream": true}),
    );
    let done = streamed.named_events().into_iter().find(|(name, _)| name == "response.completed").expect("completed");
    assert_eq!(output_text(&done.1["response"]), "history seen");

    // Deleted: gone, and nothing continues it.
    assert_eq!(delete(&g, &format!("/v1/responses/{id}")).json()["deleted"], true);
    assert_eq!(g.get(&format!("/v1/responses/{id}")).status, 404);
    let r = g.post_json("/v1/responses", &json!({"model": "test-model", "input": "x", "previous_response_id": id}));
    assert_eq!((r.status, r.json()["error"]["param"].as_str()), (404, Some("previous_response_id")));
    let _ = std::fs::remove_dir_all(&data);
}

#[test]
fn a_response_in_a_conversation_appends_its_items_and_continues_them() {
    let g = Gateway::start_with(Options { script: Some(history_script()), ..Default::default() });
    let conv = g.post_json("/v1/conversations", &json!({})).json();
    let cid = conv["id"].as_str().unwrap();
    let first = respond(&g, json!({"input": "tell me about zebras", "conversation": cid}));
    assert_eq!(output_text(&first), "Kept answer about stripes");
    let items = g.get(&format!("/v1/conversations/{cid}/items?order=asc")).json();
    let kinds: Vec<(&str, &str)> = items["data"]
        .as_array()
        .unwrap()
        .iter()
        .map(|i| (i["type"].as_str().unwrap(), i["role"].as_str().unwrap_or("")))
        .collect();
    assert_eq!(kinds, [("message", "user"), ("message", "assistant")], "{items}");
    let second = respond(&g, json!({"input": "and then?", "conversation": {"id": cid}}));
    assert_eq!(output_text(&second), "history seen");
    assert_eq!(g.get(&format!("/v1/conversations/{cid}/items")).json()["data"].as_array().unwrap().len(), 4);
    let r = g.post_json("/v1/responses", &json!({"model": "test-model", "input": "x", "conversation": "conv_nope"}));
    assert_eq!((r.status, r.json()["error"]["param"].as_str()), (404, Some("conversation")));
}

/// Another process holds the database's write lock past the store's busy timeout: saving
/// fails, and the client is told so (500 `store_error`) with the generated response beside
/// the error; a stream, which already carried the output, ends with `response.failed`. Once
/// the lock is gone, responses are stored again.
#[test]
fn a_failed_write_is_a_500_that_keeps_the_generated_response() {
    let data = std::env::temp_dir().join(format!("sg-history-lock-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&data);
    let g = Gateway::start_with(Options {
        gateway_args: vec!["--data-dir".into(), data.display().to_string()],
        script: Some(history_script()),
        ..Default::default()
    });
    let body = json!({"model": "test-model", "input": "tell me about zebras", "max_output_tokens": 16});
    let db = rusqlite::Connection::open(data.join("history.sqlite3")).unwrap();
    db.execute_batch("BEGIN EXCLUSIVE").unwrap();
    let r = g.post_json("/v1/responses", &body);
    assert_eq!(r.status, 500, "{}", r.text());
    let v = r.json();
    assert_eq!(v["error"]["code"], "store_error", "{v}");
    assert_eq!(output_text(&v["response"]), "Kept answer about stripes", "the result is not lost: {v}");
    let mut streamed = body.clone();
    streamed["stream"] = json!(true);
    let events = g.post_json("/v1/responses", &streamed).named_events();
    let last = events.last().unwrap();
    assert_eq!(last.0, "response.failed", "{events:?}");
    assert!(events.iter().any(|(n, e)| n == "response.output_text.delta" && e["delta"].is_string()));
    db.execute_batch("COMMIT").unwrap();
    let ok = respond(&g, json!({"input": "tell me about zebras"}));
    assert_eq!(g.get(&format!("/v1/responses/{}", ok["id"].as_str().unwrap())).status, 200);
    assert!(g.logs().contains("was generated but not stored"), "the log names the cause");
    let _ = std::fs::remove_dir_all(&data);
}
