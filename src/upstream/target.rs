//! The upstream an `http://` or `https://` worker URL names, and what the control shard learned
//! about it.

use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::Arc;

use arc_swap::ArcSwap;

/// An OpenAI-compatible server behind an HTTP worker.
#[derive(Debug)]
pub struct Upstream {
    /// `http://host:port` or `https://host:port`, normalised (no path, no trailing slash).
    pub url: String,
    /// `host:port`, what the connection dials and the `Host` header says.
    pub authority: String,
    /// The host alone: the name an `https://` upstream's certificate must carry.
    pub host: String,
    /// `https://`: the connection runs TLS.
    pub tls: bool,
    /// Sent as `Authorization: Bearer` on every request to this upstream (the client's own key
    /// is for the gateway and is never forwarded).
    pub api_key: Option<String>,
    /// The model name clients use for this worker when it differs from the upstream's own
    /// (`models[0].id` on `POST /workers`): requests carry it, and the relay splices the
    /// upstream's name in its place.
    pub alias: Option<String>,
    /// The upstream's model ids, from its `/v1/models` (the probe refreshes them).
    models: ArcSwap<Vec<String>>,
    /// Requests that failed in a row; `limits::upstream_failures_max` makes the worker
    /// unhealthy until its `/health` answers again.
    failures: AtomicU32,
}

/// Why a worker URL is not a usable upstream.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum TargetError {
    NoHost,
    /// Characters no host name or IP literal has (whitespace, control characters, `@`, ...).
    BadHost(String),
    Port(String),
    Path(String),
}

impl std::fmt::Display for TargetError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            TargetError::NoHost => f.write_str("HTTP worker URL has no host"),
            TargetError::BadHost(h) => write!(f, "HTTP worker URL has an invalid host '{h}'"),
            TargetError::Port(p) => write!(f, "HTTP worker URL has an invalid port '{p}'"),
            TargetError::Path(p) => write!(f, "HTTP worker URL must name a server, not a path ('{p}')"),
        }
    }
}

impl std::error::Error for TargetError {}

impl PartialEq for Upstream {
    fn eq(&self, other: &Self) -> bool {
        self.url == other.url && self.api_key == other.api_key && self.alias == other.alias
    }
}

/// True for the URL schemes of HTTP workers.
pub fn is_http_url(url: &str) -> bool {
    url.starts_with("http://") || url.starts_with("https://")
}

impl Upstream {
    /// Parses `http://host[:port][/]` (port 80 by default) or `https://host[:port][/]` (443).
    pub fn parse(url: &str, api_key: Option<String>, alias: Option<String>) -> Result<Upstream, TargetError> {
        let (tls, rest) = match url.strip_prefix("https://") {
            Some(rest) => (true, rest),
            None => (false, url.strip_prefix("http://").ok_or(TargetError::NoHost)?),
        };
        let default_port = if tls { 443 } else { 80 };
        let (authority, path) = rest.split_once('/').map_or((rest, ""), |(a, p)| (a, p));
        if !path.is_empty() {
            return Err(TargetError::Path(path.to_string()));
        }
        let (host, port) = match authority.rsplit_once(':') {
            // An IPv6 literal's colons are inside brackets.
            Some((h, p)) if !p.contains(']') => (h, p.parse::<u16>().map_err(|_| TargetError::Port(p.to_string()))?),
            _ => (authority, default_port),
        };
        if host.is_empty() {
            return Err(TargetError::NoHost);
        }
        if !host.bytes().all(|b| b.is_ascii_alphanumeric() || matches!(b, b'.' | b'-' | b'_' | b'[' | b']' | b':')) {
            return Err(TargetError::BadHost(host.to_string()));
        }
        let authority = format!("{host}:{port}");
        let scheme = if tls { "https" } else { "http" };
        Ok(Upstream {
            url: format!("{scheme}://{authority}"),
            authority,
            host: host.to_string(),
            tls,
            api_key,
            alias,
            models: ArcSwap::from_pointee(Vec::new()),
            failures: AtomicU32::new(0),
        })
    }

    /// The names clients may send in `model` for this worker.
    pub fn serves(&self, model: &str) -> bool {
        match &self.alias {
            Some(alias) => alias == model,
            None => self.models.load().iter().any(|m| m == model),
        }
    }

    /// The name the upstream wants in `model` when the client used the alias.
    pub fn upstream_model(&self) -> Option<String> {
        self.alias.as_ref()?;
        self.models.load().first().cloned()
    }

    pub fn models(&self) -> Arc<Vec<String>> {
        self.models.load_full()
    }

    pub fn set_models(&self, models: Vec<String>) {
        if *self.models.load().as_ref() != models {
            self.models.store(Arc::new(models));
        }
    }

    /// A request failed here; true once the failures in a row reach the limit.
    pub fn failed(&self) -> bool {
        self.failures.fetch_add(1, Ordering::Relaxed) + 1 >= crate::limits::upstream_failures_max
    }

    pub fn succeeded(&self) {
        if self.failures.load(Ordering::Relaxed) != 0 {
            self.failures.store(0, Ordering::Relaxed);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn worker_urls_parse_or_say_why_not() {
        let cases: &[(&str, Result<&str, TargetError>)] = &[
            ("http://127.0.0.1:8000", Ok("127.0.0.1:8000")),
            ("http://127.0.0.1:8000/", Ok("127.0.0.1:8000")),
            ("http://upstream", Ok("upstream:80")),
            ("http://[::1]:9000", Ok("[::1]:9000")),
            ("https://upstream", Ok("upstream:443")),
            ("https://10.0.0.2:8443/", Ok("10.0.0.2:8443")),
            ("http://:80", Err(TargetError::NoHost)),
            ("http://user@h:80", Err(TargetError::BadHost("user@h".into()))),
            ("http://h\nx:80", Err(TargetError::BadHost("h\nx".into()))),
            ("http://h:99999", Err(TargetError::Port("99999".into()))),
            ("http://h:80/v1", Err(TargetError::Path("v1".into()))),
        ];
        for (url, want) in cases {
            if let Ok(u) = Upstream::parse(url, None, None) {
                assert_eq!(u.tls, url.starts_with("https://"), "{url}");
                assert!(u.url.starts_with(if u.tls { "https://" } else { "http://" }), "{url}");
            }
            let got = Upstream::parse(url, None, None).map(|u| u.authority);
            assert_eq!(got.as_deref().map_err(Clone::clone), want.clone(), "{url}");
        }
    }

    #[test]
    fn an_alias_is_what_clients_send_and_the_upstream_name_is_spliced_in() {
        let plain = Upstream::parse("http://h:1", None, None).unwrap();
        plain.set_models(vec!["m".into()]);
        assert!(plain.serves("m") && !plain.serves("other"));
        assert_eq!(plain.upstream_model(), None, "no alias: the body goes as it came");
        let aliased = Upstream::parse("http://h:1", None, Some("alias".into())).unwrap();
        aliased.set_models(vec!["m".into()]);
        assert!(aliased.serves("alias") && !aliased.serves("m"));
        assert_eq!(aliased.upstream_model().as_deref(), Some("m"));
    }

    #[test]
    fn failures_in_a_row_reach_the_limit_and_a_success_resets_them() {
        let u = Upstream::parse("http://h:1", None, None).unwrap();
        for _ in 1..crate::limits::upstream_failures_max {
            assert!(!u.failed());
        }
        u.succeeded();
        for _ in 1..crate::limits::upstream_failures_max {
            assert!(!u.failed());
        }
        assert!(u.failed());
    }
}
