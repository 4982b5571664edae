//! The TLS client for `https` media URLs: the workspace's one rustls, on ring. Servers are
//! verified against the system's CA store (what the operator's OS trusts and keeps current,
//! and what `--ca-cert-path` for workers starts from too) plus the policy's extra roots; there
//! is no switch to skip verification.

use std::sync::{Arc, OnceLock};

use rustls::pki_types::CertificateDer;
use rustls::{ClientConfig, RootCertStore};

/// The system store, read once per process (it is a directory walk and a parse of every
/// certificate; a fetch only clones the parsed anchors).
fn system_roots() -> &'static RootCertStore {
    static ROOTS: OnceLock<RootCertStore> = OnceLock::new();
    ROOTS.get_or_init(|| {
        let mut roots = RootCertStore::empty();
        // A missing store (common in containers) leaves the extra roots to do the work; a
        // fetch with neither says so.
        roots.add_parsable_certificates(rustls_native_certs::load_native_certs().certs);
        roots
    })
}

/// A configuration trusting the system's roots and `extra`; an error text when nothing would
/// be trusted or an extra root is not a CA certificate.
pub fn client_config(extra: &[CertificateDer<'static>]) -> Result<Arc<ClientConfig>, String> {
    let mut roots = system_roots().clone();
    for cert in extra {
        roots.add(cert.clone()).map_err(|e| format!("an extra root certificate is unusable: {e}"))?;
    }
    if roots.is_empty() {
        return Err("no trusted CA certificates (the system store is empty or missing)".into());
    }
    let mut config = ClientConfig::builder_with_provider(Arc::new(rustls::crypto::ring::default_provider()))
        .with_safe_default_protocol_versions()
        .map_err(|e| e.to_string())?
        .with_root_certificates(roots)
        .with_no_client_auth();
    config.alpn_protocols = vec![b"http/1.1".to_vec()];
    Ok(Arc::new(config))
}
