//! HTTP/2 on a shard: one connection driven by the `h2` crate on the shard's own runtime
//! (monoio's poll-io stream; no second runtime), each stream a request served by the same
//! router as HTTP/1.1 through a `Responder` that frames its answer as HEADERS + DATA.
//!
//! The connection's task reads and writes every frame: the chunks one engine step gives the
//! connection's streams leave in one write (`coalesce`); each stream's request runs in its own
//! task. Drain (graceful shutdown) sends
//! GOAWAY and lets the open streams finish; an idle connection (no open stream for the
//! keep-alive idle time) is closed the same way.

pub mod coalesce;
pub mod flood_guard;
pub mod request;
pub mod resets;
pub mod stream_out;

use std::rc::Rc;
use std::time::Duration;

use bytes::Bytes;
use h2::server::SendResponse;
use h2::RecvStream;
use monoio::time::{sleep_until, timeout, Instant};

use self::coalesce::Coalesce;
use self::flood_guard::FloodGuard;
use self::request::ReadStop;
use self::resets::Resets;
use self::stream_out::StreamOut;
use super::response::Responder;
use crate::limits;
use crate::shard::ShardCtx;

/// The server's SETTINGS and its defences, all from `limits`.
fn builder() -> h2::server::Builder {
    let mut b = h2::server::Builder::new();
    b.max_concurrent_streams(limits::http2_concurrent_streams_max)
        .max_frame_size(limits::http2_frame_bytes_max)
        .max_header_list_size(limits::http2_header_list_bytes_max)
        .initial_window_size(limits::http2_stream_window_bytes)
        .initial_connection_window_size(limits::http2_connection_window_bytes)
        .max_send_buffer_size(limits::http2_send_buffer_bytes)
        .max_pending_accept_reset_streams(limits::http2_pending_accept_resets_max)
        .max_local_error_reset_streams(Some(limits::http2_local_error_resets_max));
    b
}

/// Serves one HTTP/2 connection: cleartext after the preface was seen, or TLS after ALPN
/// chose `h2`.
pub async fn serve<T>(ctx: &Rc<ShardCtx>, io: T)
where
    T: tokio::io::AsyncRead + tokio::io::AsyncWrite + Unpin + 'static,
{
    let handshake = builder().handshake::<_, Bytes>(Coalesce(FloodGuard::new(io)));
    let mut conn = match timeout(Duration::from_secs(limits::http2_handshake_timeout_s), handshake).await {
        Ok(Ok(conn)) => conn,
        Ok(Err(e)) => {
            tracing::debug!("shard {}: HTTP/2 handshake failed: {e}", ctx.index);
            return;
        }
        Err(_) => return,
    };
    let idle = Duration::from_secs(limits::http_keepalive_idle_timeout_s);
    let mut idle_deadline = Instant::now() + idle;
    let mut closing = false;
    let resets = Rc::new(Resets::default());
    loop {
        let next = monoio::select! {
            next = conn.accept() => next,
            _ = ctx.stop_accepting.wait(), if !closing => {
                // GOAWAY: the client opens no new stream here; those open run to their end.
                conn.graceful_shutdown();
                closing = true;
                continue;
            }
            _ = sleep_until(idle_deadline), if !closing => {
                if conn.has_streams() {
                    idle_deadline = Instant::now() + idle;
                } else {
                    conn.graceful_shutdown();
                    closing = true;
                }
                continue;
            }
        };
        match next {
            Some(Ok((request, respond))) => {
                if resets.exceeded() {
                    tracing::warn!(
                        "shard {}: HTTP/2 client reset more than {} streams in {} s; closing its connection",
                        ctx.index,
                        limits::http2_client_resets_max,
                        limits::http2_client_resets_window_s
                    );
                    conn.abrupt_shutdown(h2::Reason::ENHANCE_YOUR_CALM);
                    closing = true;
                    continue;
                }
                idle_deadline = Instant::now() + idle;
                monoio::spawn(serve_stream(ctx.clone(), request, respond, resets.clone()));
            }
            Some(Err(e)) => {
                // `Other` is the flood guard's verdict; the rest are the client's own failures.
                if e.get_io().is_some_and(|io| io.kind() == std::io::ErrorKind::Other) {
                    tracing::warn!("shard {}: HTTP/2 connection closed: {e}", ctx.index);
                } else {
                    tracing::debug!("shard {}: HTTP/2 connection ended: {e}", ctx.index);
                }
                return;
            }
            None => return,
        }
    }
}

/// One stream: read the request, route it, count the response (and the client's reset).
async fn serve_stream(
    ctx: Rc<ShardCtx>,
    request: http::Request<RecvStream>,
    respond: SendResponse<Bytes>,
    resets: Rc<Resets>,
) {
    let out = StreamOut::new(respond);
    let mut r = Responder::http2(out.clone());
    r.write_timeout = Duration::from_secs(ctx.shared.config.stream_write_timeout_s);
    match request::read(request).await {
        Ok(request) => {
            crate::api::routes::dispatch(&ctx, request, &mut r).await;
            if out.was_reset() {
                resets.count();
            }
        }
        Err(ReadStop::Gone) => {
            resets.count();
            return;
        }
        Err(ReadStop::Fail(e)) => {
            tracing::info!("shard {}: rejecting request: {}", ctx.index, e);
            let _ = r.send_error(&e).await;
        }
    }
    if let Some(status) = r.status() {
        ctx.metrics().response(status);
    }
}
