//! The Prometheus listener (`--metrics-port`, default 29000, on `--metrics-host`, default
//! `--host`), on the control shard. Its connections are capped apart from the API's, and their
//! descriptors come out of the reserve, so metrics stay readable when the API is at its cap.

use std::rc::Rc;

use crate::http::conn::Router;
use crate::http::server::Acceptor;
use crate::limits;
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
        let mut acceptor = Acceptor::new("metrics".into(), &[(Router::Metrics, limits::metrics_connections_max)]);
        loop {
            let Some((stream, router, open)) = acceptor.accept(&listener).await else { continue };
            let ctx = ctx.clone();
            monoio::spawn(async move {
                crate::http::server::serve_connection(ctx, stream, router).await;
                open.set(open.get() - 1);
            });
        }
    });
}
