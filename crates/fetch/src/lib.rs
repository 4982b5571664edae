//! Media URLs to bytes, under limits: `data:` URLs, `http(s)` URLs and (only where the operator
//! names a directory) `file:` URLs inside it. Blocking by design: the gateway calls it from its
//! media side pool, never from a shard thread. Nothing here knows of requests or APIs; the
//! gateway maps each `FetchError` to a 400 naming the request part.

mod conn;
pub mod data_url;
pub mod error;
mod file;
mod http;
pub mod limits;
pub mod policy;
mod response;
mod tls;
pub mod url;

pub use error::FetchError;
pub use policy::FetchPolicy;

/// What a URL held, and the media type it declared (a `data:` URL's, or `Content-Type`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Fetched {
    pub bytes: Vec<u8>,
    pub media_type: Option<String>,
}

/// The bytes behind `url`, within `policy`.
pub fn fetch(url: &str, policy: &FetchPolicy) -> Result<Fetched, FetchError> {
    let scheme = url::scheme(url).ok_or(FetchError::NotAUrl)?;
    match scheme.as_str() {
        "data" => data_url::decode(url, policy.max_bytes),
        "http" | "https" => http::fetch(url, policy),
        "file" => file::read(url, policy.local_root.as_deref(), policy.max_bytes),
        _ => Err(FetchError::Scheme(scheme)),
    }
}
