//! Who may call what (`--api-key`, `--admin-api-key`) and from which browser origins
//! (`--cors-allow-origin`). Checked in `routes::dispatch` before any handler runs.
//!
//! Invariants: keys are compared in constant time and never logged or echoed; a CORS preflight
//! is answered without a key (browsers send none on preflight); CORS headers are set on the
//! responder before anything is written, so streamed responses carry them too.

use crate::config::Security;
use crate::error::ApiError;
use crate::http::request::RequestHead;
use crate::limits;

/// What a route requires.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Access {
    /// Health probes: load balancers and orchestrators call them without credentials.
    Open,
    /// The OpenAI API.
    Data,
    /// Worker management, cache and profiling routes.
    Admin,
}

pub fn access_of(path: &str) -> Access {
    match path {
        "/health" | "/liveness" | "/readiness" | "/health_generate" => Access::Open,
        "/workers" | "/flush_cache" | "/start_profile" | "/stop_profile" => Access::Admin,
        p if p.starts_with("/workers/") => Access::Admin,
        _ => Access::Data,
    }
}

/// Ok when the request may use a route of `access`. The admin key also opens the data plane;
/// without an admin key, admin routes take the data-plane key.
pub fn authorize(security: &Security, head: &RequestHead, access: Access) -> Result<(), ApiError> {
    let required: Vec<&str> = match access {
        Access::Open => return Ok(()),
        Access::Data => {
            [security.api_key.as_deref(), security.admin_api_key.as_deref()].into_iter().flatten().collect()
        }
        Access::Admin => match (&security.admin_api_key, &security.api_key) {
            (Some(admin), _) => vec![admin.as_str()],
            (None, Some(data)) => vec![data.as_str()],
            (None, None) => return Ok(()),
        },
    };
    if required.is_empty() {
        return Ok(());
    }
    let Some(presented) = presented_key(head) else {
        return Err(ApiError::unauthorized(
            "You didn't provide an API key. Provide it in an Authorization header (Authorization: Bearer YOUR_KEY) \
             or in x-api-key.",
        ));
    };
    // Compare against every accepted key so the time taken does not say which one was close.
    let matched = required.iter().fold(false, |acc, key| acc | constant_time_eq(presented.as_bytes(), key.as_bytes()));
    if matched {
        Ok(())
    } else if access == Access::Admin {
        Err(ApiError::unauthorized("Incorrect admin API key provided."))
    } else {
        Err(ApiError::unauthorized("Incorrect API key provided."))
    }
}

/// `Authorization: Bearer KEY` (scheme case-insensitive), else `x-api-key: KEY`.
fn presented_key(head: &RequestHead) -> Option<&str> {
    if let Some(auth) = head.header("authorization") {
        let (scheme, key) = auth.split_once(' ').unwrap_or((auth, ""));
        if scheme.eq_ignore_ascii_case("bearer") && !key.trim().is_empty() {
            return Some(key.trim());
        }
    }
    head.header("x-api-key").filter(|k| !k.is_empty())
}

/// Equal bytes, in time that depends only on the lengths.
pub fn constant_time_eq(a: &[u8], b: &[u8]) -> bool {
    let n = a.len().max(b.len());
    let mut diff = (a.len() ^ b.len()) as u64;
    for i in 0..n {
        let x = a.get(i).copied().unwrap_or(0);
        let y = b.get(i).copied().unwrap_or(0);
        diff |= u64::from(x ^ y);
    }
    // The optimiser may not turn the loop above into an early exit through this barrier.
    std::hint::black_box(diff) == 0
}

/// The CORS headers for a request from an allowed origin (none without `Origin`, or when CORS
/// is off, or the origin is not allowed: the browser then blocks the response).
pub fn cors_headers(security: &Security, head: &RequestHead) -> Vec<(&'static str, String)> {
    let Some(origin) = head.header("origin") else { return Vec::new() };
    let allowed = &security.cors_allow_origins;
    if allowed.iter().any(|o| o == "*") {
        vec![("access-control-allow-origin", "*".to_string())]
    } else if allowed.iter().any(|o| o.trim_end_matches('/').eq_ignore_ascii_case(origin.trim_end_matches('/'))) {
        vec![("access-control-allow-origin", origin.to_string()), ("vary", "origin".to_string())]
    } else {
        Vec::new()
    }
}

/// The request headers a preflight allows when the browser names none: the keys' two
/// headers and Anthropic's version headers.
const PREFLIGHT_HEADERS_DEFAULT: &str = "authorization, content-type, x-api-key, anthropic-version, anthropic-beta";

/// The extra headers of a preflight answer, when `head` is a preflight from an allowed origin.
pub fn preflight(security: &Security, head: &RequestHead) -> Option<Vec<(&'static str, String)>> {
    if head.method != "OPTIONS" || head.header("access-control-request-method").is_none() {
        return None;
    }
    let mut headers = cors_headers(security, head);
    if headers.is_empty() {
        return None;
    }
    headers.push(("access-control-allow-methods", "GET, POST, PATCH, DELETE, OPTIONS".to_string()));
    // Echo what the browser asks for (the SDKs send authorization, x-stainless-*, and
    // Anthropic's anthropic-version and anthropic-beta), keeping only header-name characters so
    // nothing can be injected into our response.
    let requested = head.header("access-control-request-headers").unwrap_or("");
    let clean: String =
        requested.chars().filter(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | ',' | ' ')).collect();
    let allow = if clean.trim().is_empty() { PREFLIGHT_HEADERS_DEFAULT.to_string() } else { clean };
    headers.push(("access-control-allow-headers", allow));
    headers.push(("access-control-max-age", limits::cors_preflight_max_age_s.to_string()));
    Some(headers)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn head(headers: &[(&str, &str)]) -> RequestHead {
        RequestHead {
            method: "POST".into(),
            path: "/v1/completions".into(),
            query: None,
            version_minor: 1,
            framing: crate::http::request::BodyFraming::None,
            keep_alive: true,
            expect_continue: false,
            headers: headers.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect(),
        }
    }

    fn keys(api: Option<&str>, admin: Option<&str>) -> Security {
        Security {
            api_key: api.map(str::to_string),
            admin_api_key: admin.map(str::to_string),
            cors_allow_origins: Vec::new(),
        }
    }

    #[test]
    fn who_may_call_what() {
        let bearer = |k: &str| head(&[("authorization", &format!("Bearer {k}"))]);
        let x_api = |k: &str| head(&[("x-api-key", k)]);
        let none = head(&[]);
        // (security, request, access, allowed)
        let cases: Vec<(Security, RequestHead, Access, bool)> = vec![
            (keys(None, None), none.clone(), Access::Data, true),
            (keys(None, None), none.clone(), Access::Admin, true),
            (keys(Some("k1"), None), none.clone(), Access::Data, false),
            (keys(Some("k1"), None), none.clone(), Access::Open, true),
            (keys(Some("k1"), None), bearer("k1"), Access::Data, true),
            (keys(Some("k1"), None), head(&[("authorization", "bearer k1")]), Access::Data, true),
            (keys(Some("k1"), None), x_api("k1"), Access::Data, true),
            (keys(Some("k1"), None), x_api("k2"), Access::Data, false),
            (keys(Some("k1"), Some("a1")), x_api("a1"), Access::Admin, true),
            (keys(Some("k1"), Some("a1")), x_api("k1"), Access::Admin, false),
            (keys(Some("k1"), None), bearer("k2"), Access::Data, false),
            (keys(Some("k1"), None), bearer("k1x"), Access::Data, false),
            (keys(Some("k1"), None), bearer("k"), Access::Data, false),
            (keys(Some("k1"), None), head(&[("authorization", "Basic k1")]), Access::Data, false),
            (keys(Some("k1"), None), bearer("k1"), Access::Admin, true),
            (keys(Some("k1"), Some("a1")), bearer("k1"), Access::Admin, false),
            (keys(Some("k1"), Some("a1")), bearer("a1"), Access::Admin, true),
            (keys(Some("k1"), Some("a1")), bearer("a1"), Access::Data, true),
            (keys(None, Some("a1")), none.clone(), Access::Data, false),
            (keys(None, Some("a1")), bearer("a1"), Access::Data, true),
        ];
        for (i, (sec, req, access, allowed)) in cases.into_iter().enumerate() {
            let got = authorize(&sec, &req, access);
            assert_eq!(got.is_ok(), allowed, "case {i}: {got:?}");
            if let Err(e) = got {
                assert_eq!(e.status, 401);
                assert!(!e.message.contains("k1") && !e.message.contains("a1"), "case {i}: key echoed");
            }
        }
    }

    #[test]
    fn constant_time_eq_is_equality() {
        for (a, b) in [("", ""), ("a", "a"), ("a", ""), ("", "a"), ("ab", "a"), ("abc", "abd"), ("sk-1", "sk-1")] {
            assert_eq!(constant_time_eq(a.as_bytes(), b.as_bytes()), a == b, "{a:?} {b:?}");
        }
    }

    #[test]
    fn cors_origins_and_preflight() {
        let sec = |origins: &[&str]| Security {
            cors_allow_origins: origins.iter().map(|s| s.to_string()).collect(),
            ..Default::default()
        };
        let from = |o: &str| head(&[("origin", o)]);
        assert!(cors_headers(&sec(&[]), &from("https://a.example")).is_empty());
        assert_eq!(cors_headers(&sec(&["*"]), &from("https://a.example"))[0].1, "*");
        assert_eq!(cors_headers(&sec(&["https://a.example"]), &from("https://a.example"))[0].1, "https://a.example");
        assert!(cors_headers(&sec(&["https://a.example"]), &from("https://b.example")).is_empty());
        assert!(cors_headers(&sec(&["*"]), &head(&[])).is_empty());
        let mut pre = head(&[
            ("origin", "https://a.example"),
            ("access-control-request-method", "POST"),
            ("access-control-request-headers", "authorization, x-stainless-os\r\nx-evil: 1"),
        ]);
        pre.method = "OPTIONS".into();
        let h = preflight(&sec(&["*"]), &pre).expect("a preflight");
        let allow = &h.iter().find(|(k, _)| *k == "access-control-allow-headers").unwrap().1;
        assert_eq!(allow, "authorization, x-stainless-osx-evil 1");
        assert!(preflight(&sec(&[]), &pre).is_none());
        // An Anthropic SDK in a browser: its key and version headers are allowed, asked for
        // or not.
        let allowed = |pre: &RequestHead| {
            let h = preflight(&sec(&["*"]), pre).expect("a preflight");
            h.iter().find(|(k, _)| *k == "access-control-allow-headers").map(|(_, v)| v.clone()).unwrap_or_default()
        };
        let mut asked = head(&[
            ("origin", "https://a.example"),
            ("access-control-request-method", "POST"),
            ("access-control-request-headers", "x-api-key, anthropic-version, anthropic-beta, content-type"),
        ]);
        asked.method = "OPTIONS".into();
        let mut unasked = head(&[("origin", "https://a.example"), ("access-control-request-method", "POST")]);
        unasked.method = "OPTIONS".into();
        for pre in [asked, unasked] {
            let allow = allowed(&pre);
            for name in ["x-api-key", "anthropic-version", "anthropic-beta", "content-type"] {
                assert!(allow.split(", ").any(|h| h == name), "{name} not in {allow:?}");
            }
        }
    }
}
