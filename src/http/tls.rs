//! TLS on the API port (`--tls-cert-path` / `--tls-key-path`): rustls on the ring provider,
//! the certificate chain and key read from PEM files once at startup, ALPN `h2` then
//! `http/1.1`.
//!
//! A connection negotiating `h2` is served by `http::http2` over the TLS stream itself. An
//! HTTP/1.1 one (or one without ALPN) is served by the same HTTP/1.1 server as cleartext, on
//! one end of a socket pair whose other end is copied to and from the TLS stream: that server
//! watches its socket for the client leaving (a peek at the descriptor), which a TLS record
//! would defeat, while on the pair the end of the client's stream is a plain end of file.

use std::fmt;
use std::os::fd::{FromRawFd, IntoRawFd};
use std::path::{Path, PathBuf};
use std::rc::Rc;
use std::sync::Arc;
use std::time::Duration;

use monoio::net::TcpStream;
use rustls::ServerConfig;
use rustls_pki_types::pem::PemObject;
use rustls_pki_types::{CertificateDer, PrivateKeyDer};

use super::conn::{serve_http1, Router};
use crate::config::TlsFiles;
use crate::limits;
use crate::shard::ShardCtx;

/// Why the certificate or key could not be used; each names the flag and the file.
#[derive(Debug)]
pub enum TlsError {
    Read {
        flag: &'static str,
        path: PathBuf,
        source: std::io::Error,
    },
    /// Not PEM, or no item of the kind the flag needs.
    Pem {
        flag: &'static str,
        path: PathBuf,
        reason: String,
    },
    /// rustls refused the pair (the key does not match the certificate, an unsupported key).
    Refused(rustls::Error),
}

impl fmt::Display for TlsError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            TlsError::Read { flag, path, source } => write!(f, "cannot read {flag} {}: {source}", path.display()),
            TlsError::Pem { flag, path, reason } => write!(f, "{flag} {}: {reason}", path.display()),
            TlsError::Refused(e) => write!(f, "--tls-cert-path / --tls-key-path refused: {e}"),
        }
    }
}

impl std::error::Error for TlsError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            TlsError::Read { source, .. } => Some(source),
            TlsError::Refused(e) => Some(e),
            TlsError::Pem { .. } => None,
        }
    }
}

fn pem_error(flag: &'static str, path: &Path, e: rustls_pki_types::pem::Error) -> TlsError {
    match e {
        rustls_pki_types::pem::Error::Io(source) => TlsError::Read { flag, path: path.to_path_buf(), source },
        rustls_pki_types::pem::Error::NoItemsFound => {
            let what = if flag == "--tls-cert-path" { "certificate" } else { "private key" };
            TlsError::Pem { flag, path: path.to_path_buf(), reason: format!("no PEM {what} in the file") }
        }
        e => TlsError::Pem { flag, path: path.to_path_buf(), reason: format!("not a valid PEM file ({e})") },
    }
}

/// The server's TLS configuration from the files.
pub fn server_config(files: &TlsFiles) -> Result<Arc<ServerConfig>, TlsError> {
    let certs = CertificateDer::pem_file_iter(&files.cert)
        .and_then(|items| items.collect::<Result<Vec<_>, _>>())
        .map_err(|e| pem_error("--tls-cert-path", &files.cert, e))?;
    if certs.is_empty() {
        return Err(pem_error("--tls-cert-path", &files.cert, rustls_pki_types::pem::Error::NoItemsFound));
    }
    let key = PrivateKeyDer::from_pem_file(&files.key).map_err(|e| pem_error("--tls-key-path", &files.key, e))?;
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let mut config = ServerConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .map_err(TlsError::Refused)?
        .with_no_client_auth()
        .with_single_cert(certs, key)
        .map_err(TlsError::Refused)?;
    config.alpn_protocols = vec![b"h2".to_vec(), b"http/1.1".to_vec()];
    Ok(Arc::new(config))
}

/// Serves one connection on the TLS port: the handshake, then HTTP/2 or HTTP/1.1 by ALPN.
pub async fn serve(ctx: &Rc<ShardCtx>, config: Arc<ServerConfig>, stream: TcpStream) {
    let io = match stream.try_into_poll_io() {
        Ok(io) => io,
        Err((e, _)) => {
            tracing::debug!("shard {}: TLS connection not served: {e}", ctx.index);
            return;
        }
    };
    let handshake = tokio_rustls::TlsAcceptor::from(config).accept(io);
    let tls = match monoio::time::timeout(Duration::from_secs(limits::tls_handshake_timeout_s), handshake).await {
        Ok(Ok(tls)) => tls,
        Ok(Err(e)) => {
            tracing::info!("shard {}: TLS handshake failed: {e}", ctx.index);
            return;
        }
        Err(_) => return,
    };
    if tls.get_ref().1.alpn_protocol() == Some(b"h2") {
        super::http2::serve(ctx, tls).await;
    } else {
        serve_bridged_http1(ctx, tls).await;
    }
}

/// HTTP/1.1 inside TLS: the HTTP/1.1 server on one end of a socket pair, the other end copied
/// to and from the TLS stream until both directions have ended.
async fn serve_bridged_http1<T>(ctx: &Rc<ShardCtx>, mut tls: T)
where
    T: tokio::io::AsyncRead + tokio::io::AsyncWrite + Unpin,
{
    let pair = std::os::unix::net::UnixStream::pair().and_then(|(a, b)| {
        a.set_nonblocking(true)?;
        b.set_nonblocking(true)?;
        Ok((a, b))
    });
    let (inner, outer) = match pair {
        Ok(pair) => pair,
        Err(e) => {
            tracing::warn!("shard {}: no socket pair for an HTTP/1.1 TLS connection: {e}", ctx.index);
            return;
        }
    };
    // SAFETY: the descriptor is a connected stream socket owned by nothing else; the HTTP/1.1
    // server only reads, writes, peeks and polls it, which a Unix stream socket does exactly as
    // TCP does.
    let inner = unsafe { std::net::TcpStream::from_raw_fd(inner.into_raw_fd()) };
    let streams = TcpStream::from_std(inner).and_then(|inner| {
        let outer = monoio::net::UnixStream::from_std(outer)?;
        Ok((inner, outer.try_into_poll_io().map_err(|(e, _)| e)?))
    });
    let (inner, mut outer) = match streams {
        Ok(s) => s,
        Err(e) => {
            tracing::warn!("shard {}: HTTP/1.1 TLS connection not served: {e}", ctx.index);
            return;
        }
    };
    let copy = tokio::io::copy_bidirectional(&mut tls, &mut outer);
    let serve = serve_http1(ctx, inner, Router::Api);
    let mut copy = std::pin::pin!(copy);
    monoio::select! {
        _ = &mut copy => {}
        _ = serve => {
            // What the server wrote last is still on its way to the client.
            let flush = Duration::from_secs(ctx.shared.config.stream_write_timeout_s);
            let _ = monoio::time::timeout(flush, copy).await;
        }
    }
}
