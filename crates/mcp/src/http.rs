//! The HTTP client of the streamable HTTP servers: one per MCP thread, made when the first
//! such server is opened, so a gateway without them never reads the system's CA store.
//! `https://` servers are verified against the system's roots and the CA files of
//! `ClientTlsSettings` (the gateway's `--ca-cert-path`), on the workspace's one rustls (ring):
//! reqwest gets the configuration made, and brings no TLS stack or provider of its own.

use std::cell::OnceCell;
use std::sync::Arc;

use rustls::{ClientConfig, RootCertStore};
use shardgate_tls::{Alpn, ClientTls, ClientTlsSettings};

pub(crate) struct HttpClient {
    tls: ClientTlsSettings,
    client: OnceCell<Result<reqwest::Client, String>>,
}

impl HttpClient {
    pub(crate) fn new(tls: ClientTlsSettings) -> HttpClient {
        HttpClient { tls, client: OnceCell::new() }
    }

    pub(crate) fn get(&self) -> Result<reqwest::Client, String> {
        self.client
            .get_or_init(|| {
                let config = match ClientTls::load(&self.tls) {
                    Ok(tls) => {
                        tracing::info!("TLS to MCP servers: {} trusted CA certificates", tls.roots());
                        (*tls.config(Alpn::Http1)).clone()
                    }
                    // `http://` servers still work; an `https://` one fails its handshake.
                    Err(e) => {
                        tracing::warn!("TLS to MCP servers: {e}; no https:// server can be verified");
                        no_roots()?
                    }
                };
                reqwest::Client::builder().tls_backend_preconfigured(config).build().map_err(|e| e.to_string())
            })
            .clone()
    }
}

/// A configuration that trusts nothing.
fn no_roots() -> Result<ClientConfig, String> {
    let builder = ClientConfig::builder_with_provider(Arc::new(rustls::crypto::ring::default_provider()))
        .with_safe_default_protocol_versions()
        .map_err(|e| e.to_string())?;
    Ok(builder.with_root_certificates(RootCertStore::empty()).with_no_client_auth())
}
