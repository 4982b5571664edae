//! Why a URL gave no bytes; each says what the client can change.

use std::fmt;

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum FetchError {
    NotAUrl,
    /// A scheme this gateway does not fetch (or `file` without a directory allowed).
    Scheme(String),
    /// A `data:` URL that is not `data:[<media type>];base64,<data>`.
    DataUrl(&'static str),
    /// More than `max_bytes`.
    TooLarge {
        max_bytes: usize,
    },
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
        }
    }
}

impl std::error::Error for FetchError {}
