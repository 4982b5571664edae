//! The client configurations, built once at startup and shared by every shard (rustls
//! configurations are immutable and `Send + Sync`; each connection takes an `Arc`).

use std::path::PathBuf;
use std::sync::Arc;

use rustls::{ClientConfig, RootCertStore};

use crate::error::TlsError;
use crate::pem;

/// The gateway's TLS flags for connections to workers.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ClientTlsSettings {
    /// Extra trust anchors, on top of the system's (`--ca-cert-path`, repeatable).
    pub ca_cert_paths: Vec<PathBuf>,
    /// The gateway's own certificate chain, for workers that ask for one (mutual TLS).
    pub client_cert_path: Option<PathBuf>,
    pub client_key_path: Option<PathBuf>,
}

/// The application protocol a connection negotiates.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Alpn {
    /// gRPC: HTTP/2, which gRPC over TLS requires to be negotiated by ALPN.
    H2,
    /// The HTTP workers' relay, which speaks HTTP/1.1.
    Http1,
}

#[derive(Clone)]
pub struct ClientTls {
    h2: Arc<ClientConfig>,
    http1: Arc<ClientConfig>,
    /// How many anchors verify servers (for the startup log).
    roots: usize,
}

impl std::fmt::Debug for ClientTls {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "ClientTls {{ roots: {} }}", self.roots)
    }
}

impl ClientTls {
    /// Reads the system's roots and the given files.
    pub fn load(settings: &ClientTlsSettings) -> Result<ClientTls, TlsError> {
        let mut roots = RootCertStore::empty();
        let native = rustls_native_certs::load_native_certs();
        for e in &native.errors {
            // A missing or unreadable system store is common in containers; the CA files
            // given may be all the deployment needs.
            tracing::debug!("system CA store: {e}");
        }
        let (added, _ignored) = roots.add_parsable_certificates(native.certs);
        tracing::debug!("system CA store: {added} certificates");
        for path in &settings.ca_cert_paths {
            for cert in pem::certificates(path)? {
                roots.add(cert).map_err(|e| TlsError::Anchor { path: path.clone(), error: e.to_string() })?;
            }
        }
        if roots.is_empty() {
            return Err(TlsError::NoRoots);
        }
        let count = roots.len();
        let builder = ClientConfig::builder_with_provider(Arc::new(rustls::crypto::ring::default_provider()))
            .with_safe_default_protocol_versions()
            .map_err(|e| TlsError::Identity(e.to_string()))?
            .with_root_certificates(roots);
        let base = match (&settings.client_cert_path, &settings.client_key_path) {
            (None, None) => builder.with_no_client_auth(),
            (Some(cert), Some(key)) => builder
                .with_client_auth_cert(pem::certificates(cert)?, pem::private_key(key)?)
                .map_err(|e| TlsError::Identity(e.to_string()))?,
            (Some(_), None) => {
                return Err(TlsError::HalfIdentity { given: "--client-cert-path", missing: "--client-key-path" })
            }
            (None, Some(_)) => {
                return Err(TlsError::HalfIdentity { given: "--client-key-path", missing: "--client-cert-path" })
            }
        };
        let with_alpn = |alpn: &[u8]| {
            let mut c = base.clone();
            c.alpn_protocols = vec![alpn.to_vec()];
            Arc::new(c)
        };
        Ok(ClientTls { h2: with_alpn(b"h2"), http1: with_alpn(b"http/1.1"), roots: count })
    }

    pub fn config(&self, alpn: Alpn) -> Arc<ClientConfig> {
        match alpn {
            Alpn::H2 => self.h2.clone(),
            Alpn::Http1 => self.http1.clone(),
        }
    }

    pub fn roots(&self) -> usize {
        self.roots
    }
}
