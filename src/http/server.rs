//! A shard's accept loop: every shard binds the same address with SO_REUSEPORT and the kernel
//! spreads connections; a connection lives and dies on the shard that accepted it.
//!
//! Connections are capped per shard (`http::fd_budget`). At the cap, a few more are taken to
//! answer health probes (`Router::OverCap`); beyond those, a connection is closed as soon as it
//! is accepted, so the backlog never holds it and the process never runs out of descriptors.

use std::cell::Cell;
use std::rc::Rc;
use std::time::{Duration, Instant};

use monoio::net::{TcpListener, TcpStream};

use super::conn::{serve_http1, Router};
use super::sniff::{sniff, Protocol};
use crate::limits;
use crate::shard::ShardCtx;
use shardgate_util::throttle::Throttle;

pub async fn serve(ctx: Rc<ShardCtx>) {
    let addr = format!("{}:{}", ctx.shared.config.host, ctx.shared.config.port);
    let opts = monoio::net::ListenerOpts::new().reuse_port(true).reuse_addr(true).backlog(4096);
    let listener = match TcpListener::bind_with_config(addr.as_str(), &opts) {
        Ok(l) => l,
        Err(e) => {
            tracing::error!("shard {}: cannot listen on {addr}: {e}", ctx.index);
            std::process::exit(1);
        }
    };
    if ctx.index == 0 {
        let scheme = if ctx.shared.tls.is_some() { "https" } else { "http" };
        tracing::info!("listening on {scheme}://{addr} ({} shards)", ctx.shared.shards);
    }
    let cap = ctx.shared.connections_per_shard;
    let lanes = [(Router::Api, cap), (Router::OverCap, limits::http_over_cap_connections_per_shard)];
    let mut acceptor = Acceptor::new(format!("shard {}", ctx.index), &lanes);
    loop {
        let accepted = monoio::select! {
            a = acceptor.accept(&listener) => a,
            _ = ctx.stop_accepting.wait() => {
                tracing::debug!("shard {}: no longer accepting connections", ctx.index);
                return;
            }
        };
        let Some((stream, router, open)) = accepted else {
            ctx.metrics().connection_refused();
            continue;
        };
        let ctx = ctx.clone();
        monoio::spawn(async move {
            serve_connection(ctx, stream, router).await;
            open.set(open.get() - 1);
        });
    }
}

/// Serves one accepted connection in the protocol it speaks, counted in the metrics.
pub async fn serve_connection(ctx: Rc<ShardCtx>, stream: TcpStream, router: Router) {
    ctx.metrics().connection_opened();
    // Every protocol writes a response's pieces as they are ready; with Nagle on, a small write
    // behind one the client has not acknowledged waits for its delayed ACK (~40 ms): an HTTP/2
    // stream's first DATA after its HEADERS, or one step's write after the last.
    let _ = stream.set_nodelay(true);
    match (router, &ctx.shared.tls) {
        (Router::Api, Some(tls)) => super::tls::serve(&ctx, tls.clone(), stream).await,
        // HTTP/2 with prior knowledge shares the API port; the other lanes stay HTTP/1.x.
        (Router::Api, None) => {
            let deadline = Instant::now() + router.first_head_timeout();
            match sniff(&stream, deadline).await {
                Some(Protocol::Http1) => serve_http1(&ctx, stream, router).await,
                Some(Protocol::Http2) => match stream.try_into_poll_io() {
                    Ok(io) => super::http2::serve(&ctx, io).await,
                    Err((e, _)) => tracing::debug!("shard {}: HTTP/2 connection not served: {e}", ctx.index),
                },
                None => {}
            }
        }
        (Router::OverCap | Router::Metrics, _) => serve_http1(&ctx, stream, router).await,
    }
    ctx.metrics().connection_closed();
}

/// Accepts connections into lanes of bounded size (tried in order), and closes those no lane
/// has room for, logging failures and refusals at most once per `refusal_log_interval_ms`.
pub struct Acceptor {
    name: String,
    lanes: Vec<(Router, usize, Rc<Cell<usize>>)>,
    refused: Throttle,
    failed: Throttle,
}

impl Acceptor {
    pub fn new(name: String, lanes: &[(Router, usize)]) -> Self {
        let interval = Duration::from_millis(limits::refusal_log_interval_ms);
        Acceptor {
            name,
            lanes: lanes.iter().map(|&(router, max)| (router, max, Rc::new(Cell::new(0)))).collect(),
            refused: Throttle::new(interval),
            failed: Throttle::new(interval),
        }
    }

    /// The next connection, its lane and the lane's count (already incremented: decrement it
    /// when the connection ends). `None`: a connection was refused.
    pub async fn accept(&mut self, listener: &TcpListener) -> Option<(TcpStream, Router, Rc<Cell<usize>>)> {
        let stream = loop {
            match listener.accept().await {
                Ok((stream, _peer)) => break stream,
                Err(e) => {
                    // EMFILE and friends: back off briefly instead of spinning.
                    if let Some(n) = self.failed.hit(Instant::now()) {
                        tracing::warn!("{}: accept failed ({n} times since the last report): {e}", self.name);
                    }
                    monoio::time::sleep(Duration::from_millis(10)).await;
                }
            }
        };
        for (router, max, open) in &self.lanes {
            if open.get() < *max {
                open.set(open.get() + 1);
                return Some((stream, *router, open.clone()));
            }
        }
        drop(stream);
        if let Some(n) = self.refused.hit(Instant::now()) {
            let caps: Vec<String> = self.lanes.iter().map(|(r, max, _)| format!("{max} {}", r.label())).collect();
            tracing::warn!(
                "{}: connection limit reached ({}); refused {n} connection(s) since the last report",
                self.name,
                caps.join(" + ")
            );
        }
        None
    }
}
