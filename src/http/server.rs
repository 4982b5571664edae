//! A shard's accept loop: every shard binds the same address with SO_REUSEPORT and the kernel
//! spreads connections; a connection lives and dies on the shard that accepted it.

use std::cell::Cell;
use std::rc::Rc;

use crate::limits;
use crate::shard::ShardCtx;

pub async fn serve(ctx: Rc<ShardCtx>) {
    let addr = format!("{}:{}", ctx.shared.config.host, ctx.shared.config.port);
    let opts = monoio::net::ListenerOpts::new().reuse_port(true).reuse_addr(true).backlog(4096);
    let listener = match monoio::net::TcpListener::bind_with_config(addr.as_str(), &opts) {
        Ok(l) => l,
        Err(e) => {
            tracing::error!("shard {}: cannot listen on {addr}: {e}", ctx.index);
            std::process::exit(1);
        }
    };
    if ctx.index == 0 {
        tracing::info!("listening on http://{addr} ({} shards)", ctx.shared.shards);
    }
    let open = Rc::new(Cell::new(0usize));
    loop {
        let accepted = monoio::select! {
            a = listener.accept() => a,
            _ = ctx.stop_accepting.wait() => {
                tracing::debug!("shard {}: no longer accepting connections", ctx.index);
                return;
            }
        };
        let (stream, _peer) = match accepted {
            Ok(s) => s,
            Err(e) => {
                // EMFILE and friends: back off briefly instead of spinning.
                tracing::warn!("shard {}: accept failed: {e}", ctx.index);
                monoio::time::sleep(std::time::Duration::from_millis(10)).await;
                continue;
            }
        };
        if open.get() >= limits::http_connections_per_shard_max {
            tracing::warn!(
                "shard {}: connection limit {} reached; refusing",
                ctx.index,
                limits::http_connections_per_shard_max
            );
            drop(stream);
            continue;
        }
        open.set(open.get() + 1);
        let ctx = ctx.clone();
        let open = open.clone();
        monoio::spawn(async move {
            super::conn::serve_connection(ctx, stream, super::conn::Router::Api).await;
            open.set(open.get() - 1);
        });
    }
}
