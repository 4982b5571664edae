//! Why a URL gave no bytes; each says what the client can change. Where vLLM's media loader
//! has a text for the same refusal, this is it.

use std::fmt;
use std::path::PathBuf;
use std::time::Duration;

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum FetchError {
    NotAUrl,
    /// A scheme this gateway does not fetch (or not from where it was met: a redirect only
    /// leads to `http(s)`).
    Scheme(String),
    /// A `data:` URL that is not `data:[<media type>];base64,<data>`.
    DataUrl(&'static str),
    /// More than `max_bytes`.
    TooLarge {
        max_bytes: usize,
    },
    /// An `http(s)` URL this client will not send (what is wrong with it).
    Url(&'static str),
    /// The host is not in `--allowed-media-domains`.
    Domain {
        host: String,
        allowed: Vec<String>,
    },
    /// A redirect beyond `max_redirects`.
    Redirects {
        max: u32,
    },
    /// A redirect from `https` to `http`.
    Downgrade,
    /// The server answered with a status outside 2xx (and not a redirect followed).
    Status(u16),
    /// The whole fetch, connection to last byte, took longer than the policy's timeout.
    Timeout(Duration),
    /// No connection (name resolution or TCP): the host and port, and why.
    Connect {
        host: String,
        error: String,
    },
    /// The TLS handshake failed, an unverifiable certificate included.
    Tls {
        host: String,
        error: String,
    },
    /// The answer is not HTTP/1.1 this client can read.
    Protocol(&'static str),
    /// The connection broke or closed before the body's end.
    Truncated,
    /// A `file:` URL without `--allowed-local-media-path`.
    NoLocalRoot,
    /// A `file:` URL that is not an existing file inside `--allowed-local-media-path` (one
    /// answer for both, so that the answers tell nothing about files outside it).
    LocalPath(PathBuf),
    /// Inside the directory, but not a regular file.
    NotAFile(PathBuf),
    /// Reading a local file failed.
    Io(String),
}

impl fmt::Display for FetchError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            FetchError::NotAUrl => f.write_str("not a URL"),
            FetchError::Scheme(s) => {
                write!(f, "URLs with the scheme '{s}' are not fetched (use data: or http(s) URLs)")
            }
            FetchError::DataUrl(why) => write!(f, "invalid data URL: {why}"),
            FetchError::TooLarge { max_bytes } => write!(f, "the media is larger than {max_bytes} bytes"),
            FetchError::Url(why) => write!(f, "invalid URL: {why}"),
            FetchError::Domain { host, allowed } => {
                let allowed: Vec<String> = allowed.iter().map(|d| format!("'{d}'")).collect();
                write!(
                    f,
                    "The URL must be from one of the allowed domains: [{}]. Input URL domain: {host}",
                    allowed.join(", ")
                )
            }
            FetchError::Redirects { max } => write!(f, "the media URL redirected more than {max} times"),
            FetchError::Downgrade => f.write_str("the media URL redirected from https to http"),
            FetchError::Status(status) => write!(f, "Failed to fetch media from URL: HTTP {status} error"),
            FetchError::Timeout(limit) => {
                write!(f, "the media URL did not answer in full within {} s", limit.as_secs_f64())
            }
            FetchError::Connect { host, error } => write!(f, "cannot connect to {host}: {error}"),
            FetchError::Tls { host, error } => write!(f, "TLS to {host} failed: {error}"),
            FetchError::Protocol(why) => write!(f, "the media server's answer is not valid HTTP/1.1: {why}"),
            FetchError::Truncated => f.write_str("the media server closed the connection before the body's end"),
            FetchError::NoLocalRoot => f.write_str("Cannot load local files without `--allowed-local-media-path`."),
            FetchError::LocalPath(path) => write!(
                f,
                "The file path {} must be an existing file under `--allowed-local-media-path`.",
                path.display()
            ),
            FetchError::NotAFile(path) => write!(f, "The file path {} is not a regular file.", path.display()),
            FetchError::Io(e) => write!(f, "reading the media failed: {e}"),
        }
    }
}

impl std::error::Error for FetchError {}

#[cfg(test)]
mod tests {
    use super::*;

    /// The texts clients read (docs/multimodal.md lists them).
    #[test]
    fn texts() {
        let cases = [
            (FetchError::Scheme("ftp".into()), "URLs with the scheme 'ftp' are not fetched (use data: or http(s) URLs)"),
            (FetchError::TooLarge { max_bytes: 9 }, "the media is larger than 9 bytes"),
            (FetchError::Url("control characters in the URL"), "invalid URL: control characters in the URL"),
            (
                FetchError::Domain { host: "10.0.0.5".into(), allowed: vec!["a.example".into(), "b.example".into()] },
                "The URL must be from one of the allowed domains: ['a.example', 'b.example']. Input URL domain: 10.0.0.5",
            ),
            (FetchError::Redirects { max: 5 }, "the media URL redirected more than 5 times"),
            (FetchError::Downgrade, "the media URL redirected from https to http"),
            (FetchError::Status(404), "Failed to fetch media from URL: HTTP 404 error"),
            (FetchError::Timeout(Duration::from_secs(5)), "the media URL did not answer in full within 5 s"),
            (FetchError::Timeout(Duration::from_millis(1500)), "the media URL did not answer in full within 1.5 s"),
            (
                FetchError::Connect { host: "h:80".into(), error: "refused".into() },
                "cannot connect to h:80: refused",
            ),
            (FetchError::Tls { host: "h:443".into(), error: "bad".into() }, "TLS to h:443 failed: bad"),
            (FetchError::NoLocalRoot, "Cannot load local files without `--allowed-local-media-path`."),
            (
                FetchError::LocalPath("/m/../x".into()),
                "The file path /m/../x must be an existing file under `--allowed-local-media-path`.",
            ),
            (FetchError::NotAFile("/m/d".into()), "The file path /m/d is not a regular file."),
        ];
        for (error, text) in cases {
            assert_eq!(error.to_string(), text, "{error:?}");
        }
    }
}
