//! What a fetch may do: the operator's flags, with the crate's defaults.

use std::path::PathBuf;
use std::time::Duration;

use rustls::pki_types::CertificateDer;

use crate::limits;

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FetchPolicy {
    /// Bytes of one item, encoded (a `data:` URL's after base64 decoding).
    pub max_bytes: usize,
    /// The whole fetch: connecting (name resolution included), every redirect hop, the last
    /// byte of the body.
    pub timeout: Duration,
    pub max_redirects: u32,
    /// The directory `file:` URLs may read from (canonical); `None` refuses the scheme.
    pub local_root: Option<PathBuf>,
    /// Hosts `http(s)` URLs may name, every redirect hop included (exact, case aside); `None`
    /// allows any, `Some` of none allows none.
    pub allowed_domains: Option<Vec<String>>,
    /// CA certificates trusted for `https` besides the system's store (a private media host's
    /// CA, the tests' own).
    pub extra_roots: Vec<CertificateDer<'static>>,
}

impl Default for FetchPolicy {
    fn default() -> Self {
        FetchPolicy {
            max_bytes: limits::media_bytes_max,
            timeout: Duration::from_secs(limits::media_fetch_timeout_s),
            max_redirects: limits::media_redirects_max,
            local_root: None,
            allowed_domains: None,
            extra_roots: Vec::new(),
        }
    }
}
