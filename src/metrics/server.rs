//! The Prometheus listener (`--metrics-port`, default 29000), on the control shard.

use std::rc::Rc;

use crate::http::conn::Router;
use crate::shard::ShardCtx;

pub fn spawn(ctx: Rc<ShardCtx>) {
    let addr = format!("{}:{}", ctx.shared.config.metrics_host, ctx.shared.config.metrics_port);
    let listener = match monoio::net::TcpListener::bind_with_config(
        addr.as_str(),
        &monoio::net::ListenerOpts::new().reuse_port(false),
    ) {
        Ok(l) => l,
        Err(e) => {
            tracing::error!("cannot listen for metrics on {addr}: {e}; metrics are disabled");
            return;
        }
    };
    tracing::info!("metrics on http://{addr}/metrics");
    monoio::spawn(async move {
        loop {
            match listener.accept().await {
                Ok((stream, _)) => {
                    monoio::spawn(crate::http::conn::serve_connection(ctx.clone(), stream, Router::Metrics));
                }
                Err(e) => {
                    tracing::warn!("metrics accept failed: {e}");
                    monoio::time::sleep(std::time::Duration::from_millis(10)).await;
                }
            }
        }
    });
}
