//! An HTTP/2 request as the router's `Request`: method, path and query from the pseudo-headers,
//! the header fields held to HTTP/1.1's rules (UTF-8, one credential header), `:authority` as
//! `host`, and the body read within the same size and time limits.

use std::time::Duration;

use h2::RecvStream;

use crate::error::ApiError;
use crate::http::request::{check_singletons, BodyFraming, Request, RequestHead};
use crate::limits;

/// Why a request was not read.
pub enum ReadStop {
    /// The client reset the stream or the connection failed: nobody to answer.
    Gone,
    /// Answer with this error.
    Fail(ApiError),
}

pub async fn read(request: http::Request<RecvStream>) -> Result<Request, ReadStop> {
    let (parts, mut body) = request.into_parts();
    let mut head = head(&parts).map_err(ReadStop::Fail)?;
    let declared = match head.header("content-length") {
        Some(v) => Some(
            v.parse::<usize>()
                .map_err(|_| ReadStop::Fail(ApiError::bad_request(format!("invalid Content-Length: {v:?}"))))?,
        ),
        None => None,
    };
    let too_large = |n: usize| {
        ReadStop::Fail(ApiError::payload_too_large(format!(
            "request body of {n} bytes exceeds the limit of {} bytes",
            limits::http_body_bytes_max
        )))
    };
    if let Some(n) = declared.filter(|&n| n > limits::http_body_bytes_max) {
        return Err(too_large(n));
    }
    let mut bytes = Vec::with_capacity(declared.unwrap_or(0));
    let deadline = monoio::time::Instant::now() + Duration::from_secs(limits::http_body_read_timeout_s);
    while !body.is_end_stream() {
        let data = match monoio::time::timeout_at(deadline, body.data()).await {
            Err(_) => return Err(ReadStop::Fail(ApiError::request_timeout("timed out reading the request"))),
            Ok(None) => break,
            Ok(Some(Err(e))) => {
                tracing::debug!("HTTP/2 request body: {e}");
                return Err(ReadStop::Gone);
            }
            Ok(Some(Ok(data))) => data,
        };
        let _ = body.flow_control().release_capacity(data.len());
        if bytes.len() + data.len() > limits::http_body_bytes_max {
            return Err(too_large(bytes.len() + data.len()));
        }
        bytes.extend_from_slice(&data);
    }
    head.framing = if bytes.is_empty() { BodyFraming::None } else { BodyFraming::Length(bytes.len()) };
    Ok(Request { head, body: bytes })
}

fn head(parts: &http::request::Parts) -> Result<RequestHead, ApiError> {
    let mut headers = Vec::with_capacity(parts.headers.len() + 1);
    for (name, value) in &parts.headers {
        let value = std::str::from_utf8(value.as_bytes())
            .map_err(|_| ApiError::bad_request(format!("header {name} is not valid UTF-8")))?;
        headers.push((name.as_str().to_string(), value.trim().to_string()));
    }
    if let Some(authority) = parts.uri.authority().filter(|_| !parts.headers.contains_key(http::header::HOST)) {
        headers.push(("host".to_string(), authority.as_str().to_string()));
    }
    check_singletons(headers.iter().map(|(k, _)| k.as_str()))?;
    Ok(RequestHead {
        method: parts.method.as_str().to_string(),
        path: parts.uri.path().to_string(),
        query: parts.uri.query().map(str::to_string),
        version_minor: 1,
        framing: BodyFraming::None,
        keep_alive: true,
        expect_continue: false,
        headers,
    })
}
