//! TLS to `https://` and `grpcs://` workers: the gateway's flags, and the rustls
//! configurations built from them the first time a TLS worker needs them (at startup when
//! `--worker-urls` names one or a TLS flag is given, so that a bad file stops the start; else
//! on the first `POST /workers` that adds one). Reading the system's CA store costs memory
//! and start-up time a gateway without TLS workers does not pay.

use std::sync::{Arc, OnceLock};

use shardgate_tls::{ClientTls, ClientTlsSettings};

/// True for the worker URL schemes that are reached over TLS.
pub fn is_tls_url(url: &str) -> bool {
    url.starts_with("https://") || url.starts_with("grpcs://")
}

#[derive(Debug, Clone, Default)]
pub struct WorkerTls {
    settings: ClientTlsSettings,
    /// Shared by every copy of the configuration: loaded once per process.
    loaded: Arc<OnceLock<Result<ClientTls, String>>>,
}

impl WorkerTls {
    pub fn new(settings: ClientTlsSettings) -> WorkerTls {
        WorkerTls { settings, loaded: Arc::default() }
    }

    /// Whether any TLS flag was given.
    pub fn configured(&self) -> bool {
        self.settings != ClientTlsSettings::default()
    }

    /// The configurations, loading them on first use; the error says which file or flag is
    /// at fault.
    pub fn get(&self) -> Result<ClientTls, String> {
        self.loaded
            .get_or_init(|| {
                let loaded = ClientTls::load(&self.settings).map_err(|e| e.to_string());
                if let Ok(tls) = &loaded {
                    tracing::info!("TLS to workers: {} trusted CA certificates", tls.roots());
                }
                loaded
            })
            .clone()
    }
}
