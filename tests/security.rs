//! API keys on the data plane and admin routes, and CORS (preflight, and headers on streamed
//! responses), end to end.

mod common;

use common::{Gateway, Options};
use serde_json::json;

const DATA_KEY: &str = "sk-data-4f1e9";
const ADMIN_KEY: &str = "sk-admin-77c2a";

fn with_args(args: &[&str]) -> Gateway {
    Gateway::start_with(Options { gateway_args: args.iter().map(|s| s.to_string()).collect(), ..Default::default() })
}

fn completion_body() -> String {
    json!({"model": "test-model", "prompt": "hi", "max_tokens": 2}).to_string()
}

/// (method, path, headers, expected status)
type Case = (&'static str, &'static str, Vec<(&'static str, String)>, u16);

#[test]
fn keys_guard_the_data_plane_and_the_admin_routes() {
    let g = with_args(&["--api-key", DATA_KEY, "--admin-api-key", ADMIN_KEY]);
    let body = completion_body();
    let bearer = |k: &str| format!("Bearer {k}");
    let cases: Vec<Case> = vec![
        ("POST", "/v1/completions", vec![], 401),
        ("POST", "/v1/completions", vec![("Authorization", bearer("wrong"))], 401),
        ("POST", "/v1/completions", vec![("Authorization", bearer(DATA_KEY))], 200),
        ("POST", "/v1/completions", vec![("x-api-key", DATA_KEY.to_string())], 200),
        ("POST", "/v1/completions", vec![("Authorization", bearer(ADMIN_KEY))], 200),
        ("GET", "/v1/models", vec![], 401),
        ("GET", "/health", vec![], 200),
        ("GET", "/readiness", vec![], 200),
        ("GET", "/workers", vec![], 401),
        ("GET", "/workers", vec![("Authorization", bearer(DATA_KEY))], 401),
        ("GET", "/workers", vec![("Authorization", bearer(ADMIN_KEY))], 200),
        ("POST", "/flush_cache", vec![("x-api-key", DATA_KEY.to_string())], 401),
        // Two credentials: servers differ on which one counts, so neither does.
        ("POST", "/v1/completions", vec![("Authorization", bearer(DATA_KEY)), ("Authorization", bearer("x"))], 400),
        ("GET", "/workers", vec![("Authorization", bearer("x")), ("Authorization", bearer(ADMIN_KEY))], 400),
        ("GET", "/v1/models", vec![("x-api-key", DATA_KEY.to_string()), ("x-api-key", "x".to_string())], 400),
    ];
    for (method, path, headers, status) in cases {
        let h: Vec<(&str, &str)> = headers.iter().map(|(k, v)| (*k, v.as_str())).collect();
        let b = (method == "POST").then_some(body.as_str());
        let r = g.try_request(method, path, b, &h).unwrap();
        assert_eq!(r.status, status, "{method} {path} {headers:?}: {}", r.text());
        if status == 401 {
            let e = r.json();
            assert_eq!(e["error"]["code"], "invalid_api_key", "{e}");
            assert_eq!(e["error"]["type"], "invalid_request_error");
        }
        assert!(!r.text().contains(DATA_KEY) && !r.text().contains(ADMIN_KEY));
    }
    // The Prometheus listener stays open to scrapers.
    assert!(g.metrics().contains("smg_http_responses_total"));
    let logs = g.logs();
    assert!(logs.contains("refused"), "refusals are logged");
    assert!(!logs.contains(DATA_KEY) && !logs.contains(ADMIN_KEY), "a key reached the log");
}

#[test]
fn cors_answers_preflight_and_marks_streams() {
    let g = with_args(&["--cors-allow-origin", "https://app.example", "--api-key", DATA_KEY]);
    // Preflight: no key needed, the requested headers are allowed.
    let r = g
        .try_request(
            "OPTIONS",
            "/v1/chat/completions",
            None,
            &[
                ("Origin", "https://app.example"),
                ("Access-Control-Request-Method", "POST"),
                ("Access-Control-Request-Headers", "authorization, content-type, x-stainless-os"),
            ],
        )
        .unwrap();
    assert_eq!(r.status, 204, "{}", r.text());
    assert_eq!(r.header("access-control-allow-origin"), Some("https://app.example"));
    assert!(r.header("access-control-allow-methods").unwrap().contains("POST"));
    assert!(r.header("access-control-allow-headers").unwrap().contains("x-stainless-os"));
    // A streamed response carries the origin header (it is set before the head goes out).
    let auth = format!("Bearer {DATA_KEY}");
    let body = json!({"model": "test-model", "messages": [{"role": "user", "content": "hi"}], "max_tokens": 3,
                      "stream": true})
    .to_string();
    let r = g
        .try_request(
            "POST",
            "/v1/chat/completions",
            Some(&body),
            &[("Origin", "https://app.example"), ("Authorization", &auth)],
        )
        .unwrap();
    assert_eq!(r.status, 200);
    assert_eq!(r.header("access-control-allow-origin"), Some("https://app.example"));
    assert_eq!(r.sse().last().map(String::as_str), Some("[DONE]"));
    // An error also carries it, so the browser can read the 401.
    let r = g.try_request("GET", "/v1/models", None, &[("Origin", "https://app.example")]).unwrap();
    assert_eq!(r.status, 401);
    assert_eq!(r.header("access-control-allow-origin"), Some("https://app.example"));
    // Other origins get nothing (the browser blocks them).
    let r = g
        .try_request("GET", "/v1/models", None, &[("Origin", "https://evil.example"), ("Authorization", &auth)])
        .unwrap();
    assert_eq!(r.status, 200);
    assert_eq!(r.header("access-control-allow-origin"), None);
    let r = g
        .try_request(
            "OPTIONS",
            "/v1/models",
            None,
            &[("Origin", "https://evil.example"), ("Access-Control-Request-Method", "GET")],
        )
        .unwrap();
    assert_ne!(r.status, 204);
}
