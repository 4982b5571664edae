//! One request relayed to an HTTP worker: the client's body (its `model` spliced if the worker
//! has an alias) and its end-to-end headers go up; the response comes back as it is, a stream
//! chunk by chunk as it arrives, a one-shot body whole. A fault before anything reached the
//! client sends the request once more to another worker of its model; after that, the client
//! gets the fault in its API's envelope (502, 504 for a stall), or a cut-off stream.

use std::borrow::Cow;
use std::rc::Rc;
use std::sync::Arc;
use std::time::Duration;

use super::body::BodyDecoder;
use super::choose::{self, Route};
use super::client::Conn;
use super::fault::UpstreamFault;
use super::head::ResponseHead;
use super::peek::{splice_model, Peek};
use super::Upstream;
use crate::http::request::Request;
use crate::http::response::Responder;
use crate::metrics::{Endpoint, ErrorType};
use crate::shard::ShardCtx;
use crate::workers::{Worker, WorkerStatus};

/// How a relay ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Outcome {
    /// The client has its answer (or went away).
    Done,
    /// The HTTP worker failed before anything was sent, and the policy's next choice is an
    /// engine worker: the API adapter serves the request.
    ToEngine,
}

enum Failure {
    Upstream(UpstreamFault),
    ClientGone,
}

impl From<UpstreamFault> for Failure {
    fn from(f: UpstreamFault) -> Self {
        Failure::Upstream(f)
    }
}

/// The paths relayed to HTTP workers, and the endpoint each is counted as.
pub fn relayed_path(path: &str) -> Option<Option<Endpoint>> {
    Some(match path {
        "/v1/chat/completions" => Some(Endpoint::Chat),
        "/v1/completions" => Some(Endpoint::Completions),
        "/v1/messages" => Some(Endpoint::Messages),
        "/v1/responses" => Some(Endpoint::Responses),
        "/v1/embeddings" => None,
        _ => return None,
    })
}

pub async fn relay(
    ctx: &Rc<ShardCtx>,
    first: Arc<Worker>,
    endpoint: Option<Endpoint>,
    req: &Request,
    peek: &Peek,
    r: &mut Responder<'_>,
) -> Outcome {
    let _permit = match endpoint {
        Some(e) => match ctx.admit(e).await {
            Ok(p) => Some(p),
            Err(e) => {
                let _ = r.send_error(&e).await;
                return Outcome::Done;
            }
        },
        None => None,
    };
    if let Some(e) = endpoint {
        ctx.metrics().relayed(e, peek.stream);
    }
    let mut worker = first;
    let mut resent = false;
    loop {
        let Some(up) = worker.config.upstream.clone() else { return Outcome::ToEngine };
        worker.in_flight.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
        let result = attempt(ctx, &worker, &up, req, peek, r).await;
        worker.request_finished();
        let fault = match result {
            Ok(()) => {
                up.succeeded();
                return Outcome::Done;
            }
            Err(Failure::ClientGone) => {
                tracing::info!("shard {}: client left; closed its request to HTTP worker {}", ctx.index, up.url);
                return Outcome::Done;
            }
            Err(Failure::Upstream(fault)) => fault,
        };
        tracing::warn!("shard {}: HTTP worker {} failed a request: {fault}", ctx.index, up.url);
        ctx.upstreams.forget(worker.key);
        if up.failed() && worker.status() == WorkerStatus::Ready {
            tracing::warn!(
                "HTTP worker {} marked unhealthy after {} failed requests in a row",
                up.url,
                crate::limits::upstream_failures_max
            );
            worker.set_status(WorkerStatus::Dead);
        }
        if r.has_started() {
            // A stream under way ends without its last chunk: the client sees it cut off.
            r.close_after();
            return Outcome::Done;
        }
        if !resent {
            resent = true;
            match choose::choose(ctx, peek, &req.body, Some(worker.key)) {
                Route::Http(next) => {
                    if let Some(e) = endpoint {
                        ctx.metrics().relayed_retry(e);
                    }
                    tracing::info!("shard {}: resending the request to HTTP worker {}", ctx.index, next.url());
                    worker = next;
                    continue;
                }
                Route::Engine => {
                    if let Some(e) = endpoint {
                        ctx.metrics().relayed_retry(e);
                    }
                    return Outcome::ToEngine;
                }
                _ => {}
            }
        }
        let e = fault.to_api_error(&up.url);
        if let Some(endpoint) = endpoint {
            ctx.metrics().relayed_error(endpoint, ErrorType::of(&e));
        }
        let _ = r.send_error(&e).await;
        return Outcome::Done;
    }
}

async fn attempt(
    ctx: &Rc<ShardCtx>,
    worker: &Worker,
    up: &Upstream,
    req: &Request,
    peek: &Peek,
    r: &mut Responder<'_>,
) -> Result<(), Failure> {
    let limit = Duration::from_secs(ctx.shared.config.http_worker_timeout_s);
    let request = request_bytes(up, req, peek);
    let (mut conn, head) = exchange(ctx, worker.key, up, request, limit, r).await?;
    if head.status >= 500 {
        return Err(UpstreamFault::Status(head.status).into());
    }
    let extra: Vec<(&str, &str)> = head.relayed.iter().map(|(k, v)| (k.as_str(), v.as_str())).collect();
    let content_type = head.content_type.as_deref().unwrap_or("application/json");
    let mut body = BodyDecoder::new(head.framing);
    let mut piece = Vec::new();
    if head.is_event_stream() {
        r.start_chunked(head.status, content_type, &extra).await.map_err(|_| Failure::ClientGone)?;
        // One watch for the whole stream: a new one per piece cost a readiness request and its
        // cancellation on every chunk.
        let mut gone = r.gone();
        loop {
            piece.clear();
            let read = monoio::select! {
                read = conn.read_body(&mut body, &mut piece, limit) => read,
                _ = &mut gone => return Err(Failure::ClientGone),
            };
            // What arrived before a fault goes out first.
            if !piece.is_empty() {
                r.push_bytes(&piece);
                r.flush().await.map_err(|_| Failure::ClientGone)?;
            }
            if !read? {
                break;
            }
        }
        r.end_sse().await.map_err(|_| Failure::ClientGone)?;
    } else {
        while conn.read_body(&mut body, &mut piece, limit).await? {
            if piece.len() > crate::limits::upstream_body_bytes_max {
                return Err(UpstreamFault::Malformed("response body too large".into()).into());
            }
        }
        r.send(head.status, content_type, &piece, &extra).await.map_err(|_| Failure::ClientGone)?;
    }
    if head.keep_alive {
        let registry = ctx.shared.registry.snapshot();
        ctx.upstreams.put(worker.key, conn, |key| registry.iter().any(|w| w.key == key));
    }
    Ok(())
}

/// Sends the request and reads the response head, watching the client meanwhile. A pooled
/// connection that the upstream had closed while idle fails before any byte of a response;
/// the request then goes once more on a new connection.
async fn exchange(
    ctx: &Rc<ShardCtx>,
    key: u64,
    up: &Upstream,
    request: Vec<u8>,
    limit: Duration,
    r: &Responder<'_>,
) -> Result<(Conn, ResponseHead), Failure> {
    let mut request = request;
    let mut pooled = ctx.upstreams.take(key);
    loop {
        let reused = pooled.is_some();
        let mut conn = match pooled.take() {
            Some(c) => c,
            None => {
                let tls = if up.tls { ctx.shared.config.worker_tls.get().ok() } else { None };
                Conn::connect(up, tls.as_ref()).await?
            }
        };
        let (sent, back) = conn.send(request).await;
        request = back;
        let head = match sent {
            Ok(()) => monoio::select! {
                head = conn.read_head(limit) => head,
                _ = r.gone() => return Err(Failure::ClientGone),
            },
            Err(f) => Err(f),
        };
        match head {
            Ok(head) => return Ok((conn, head)),
            Err(UpstreamFault::Broken(f)) if reused && !conn.has_input() => {
                tracing::debug!("shard {}: pooled connection to {} was closed ({f}); reconnecting", ctx.index, up.url);
            }
            Err(f) => return Err(f.into()),
        }
    }
}

/// The request as it goes up: request line, `Host`, the client's end-to-end headers (not its
/// credentials for the gateway), the worker's own key, and the body.
fn request_bytes(up: &Upstream, req: &Request, peek: &Peek) -> Vec<u8> {
    let body: Cow<'_, [u8]> = match up.upstream_model() {
        Some(name) if peek.model.is_some() && peek.model.as_deref() == up.alias.as_deref() => {
            Cow::Owned(splice_model(&req.body, peek, &name))
        }
        _ => Cow::Borrowed(&req.body),
    };
    let head = &req.head;
    let mut out = Vec::with_capacity(512 + body.len());
    out.extend_from_slice(head.method.as_bytes());
    out.push(b' ');
    out.extend_from_slice(head.path.as_bytes());
    if let Some(q) = &head.query {
        out.push(b'?');
        out.extend_from_slice(q.as_bytes());
    }
    out.extend_from_slice(b" HTTP/1.1\r\nhost: ");
    out.extend_from_slice(up.authority.as_bytes());
    out.extend_from_slice(b"\r\ncontent-length: ");
    out.extend_from_slice(itoa::Buffer::new().format(body.len()).as_bytes());
    out.extend_from_slice(b"\r\n");
    for (name, value) in &head.headers {
        if forwarded(name) {
            out.extend_from_slice(name.as_bytes());
            out.extend_from_slice(b": ");
            out.extend_from_slice(value.as_bytes());
            out.extend_from_slice(b"\r\n");
        }
    }
    if let Some(key) = &up.api_key {
        out.extend_from_slice(b"authorization: Bearer ");
        out.extend_from_slice(key.as_bytes());
        out.extend_from_slice(b"\r\n");
    }
    out.extend_from_slice(b"\r\n");
    out.extend_from_slice(&body);
    out
}

/// A client request header that goes up: not hop-by-hop, not framing (the relay sets its own),
/// not the client's credentials for the gateway.
fn forwarded(name: &str) -> bool {
    const KEPT_BACK: &[&str] = &[
        "connection",
        "keep-alive",
        "proxy-connection",
        "proxy-authorization",
        "te",
        "trailer",
        "transfer-encoding",
        "upgrade",
        "content-length",
        "host",
        "expect",
        "authorization",
        "x-api-key",
    ];
    !KEPT_BACK.iter().any(|k| k.eq_ignore_ascii_case(name))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::http::request::parse_head;

    fn request(text: &str) -> Request {
        let (head, len) = parse_head(text.as_bytes()).unwrap().unwrap();
        Request { head, body: text.as_bytes()[len..].to_vec() }
    }

    #[test]
    fn the_upstream_request_keeps_end_to_end_headers_and_swaps_credentials() {
        let body = r#"{"model":"alias","prompt":"p"}"#;
        let text = format!(
            "POST /v1/completions?x=1 HTTP/1.1\r\nHost: gw\r\nAuthorization: Bearer gateway-key\r\nX-Api-Key: k\r\n\
             Connection: keep-alive\r\nContent-Type: application/json\r\nX-Trace: t\r\nContent-Length: {}\r\n\r\n{body}",
            body.len()
        );
        let req = request(&text);
        let peek = super::super::peek::peek(&req.body).unwrap();
        let cases: &[(Option<&str>, Option<&str>, &str)] = &[
            (None, None, r#"{"model":"alias","prompt":"p"}"#),
            (Some("alias"), Some("upstream-key"), r#"{"model":"real","prompt":"p"}"#),
        ];
        for (alias, key, want_body) in cases {
            let up =
                Upstream::parse("http://10.0.0.1:8000", key.map(str::to_string), alias.map(str::to_string)).unwrap();
            up.set_models(vec!["real".into()]);
            let out = String::from_utf8(request_bytes(&up, &req, &peek)).unwrap();
            let (head, got_body) = out.split_once("\r\n\r\n").unwrap();
            assert_eq!(got_body, *want_body);
            let mut want_head = format!(
                "POST /v1/completions?x=1 HTTP/1.1\r\nhost: 10.0.0.1:8000\r\ncontent-length: {}\r\n\
                 content-type: application/json\r\nx-trace: t",
                want_body.len()
            );
            if let Some(k) = key {
                want_head.push_str(&format!("\r\nauthorization: Bearer {k}"));
            }
            assert_eq!(head, want_head);
        }
    }
}
