//! The handshake, over a stream that is already connected.

use std::sync::Arc;

use rustls::pki_types::ServerName;
use rustls::ClientConfig;
use tokio_rustls::TlsConnector;

pub use tokio_rustls::client::TlsStream;

/// The name a worker's certificate must carry: the URL's host, an IP literal (brackets
/// stripped) or a DNS name. `None` for a host rustls cannot take as either.
pub fn server_name(host: &str) -> Option<ServerName<'static>> {
    let host = host.strip_prefix('[').and_then(|h| h.strip_suffix(']')).unwrap_or(host);
    ServerName::try_from(host.to_string()).ok()
}

/// Runs the handshake. An error is the peer's certificate refused, a protocol failure, or the
/// stream failing underneath. With the `h2` configuration a server that does not agree to
/// HTTP/2 by ALPN fails here too (gRPC requires it); an HTTP/1.1 server may ignore ALPN, as
/// many do.
pub async fn connect<IO>(config: Arc<ClientConfig>, name: ServerName<'static>, io: IO) -> std::io::Result<TlsStream<IO>>
where
    IO: tokio::io::AsyncRead + tokio::io::AsyncWrite + Unpin,
{
    let alpn_required = config.alpn_protocols.iter().any(|p| p.as_slice() == b"h2");
    let stream = TlsConnector::from(config).connect(name, io).await?;
    if alpn_required && stream.get_ref().1.alpn_protocol().is_none() {
        return Err(std::io::Error::new(
            std::io::ErrorKind::InvalidData,
            "the server negotiated no application protocol (ALPN)",
        ));
    }
    Ok(stream)
}
