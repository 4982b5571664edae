//! `http(s)` URLs as this client needs them: where to connect, what to ask for, and a
//! redirect's `Location` made absolute. Strict where laxness would be a hole: credentials in
//! the authority (`http://allowed.example@elsewhere/`) and control characters (header
//! injection) are refused, never interpreted.

use std::fmt::Write as _;
use std::net::Ipv6Addr;

use crate::FetchError;

/// An `http://` or `https://` URL, split for a request.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HttpUrl {
    pub https: bool,
    /// Lowercase; an IPv6 literal keeps its brackets (as it is written in a URL and compared
    /// against `--allowed-media-domains`).
    pub host: String,
    pub port: u16,
    /// Path and query, percent-encoded where the URL was not; never empty.
    pub target: String,
}

impl HttpUrl {
    pub fn scheme(&self) -> &'static str {
        if self.https {
            "https"
        } else {
            "http"
        }
    }

    /// The `Host` header: the port only where it is not the scheme's default.
    pub fn authority(&self) -> String {
        let default = if self.https { 443 } else { 80 };
        if self.port == default {
            self.host.clone()
        } else {
            format!("{}:{}", self.host, self.port)
        }
    }

    /// The host as a socket address or TLS server name wants it (no IPv6 brackets).
    pub fn bare_host(&self) -> &str {
        self.host.strip_prefix('[').and_then(|h| h.strip_suffix(']')).unwrap_or(&self.host)
    }

    /// Where a redirect's `Location` points, relative references resolved against this URL
    /// (RFC 3986 §5.2; `parse` then removes dot segments).
    pub fn resolve(&self, location: &str) -> String {
        let origin = format!("{}://{}", self.scheme(), self.authority());
        if has_scheme(location) {
            location.to_string()
        } else if location.starts_with("//") {
            format!("{}:{location}", self.scheme())
        } else if location.starts_with('/') {
            format!("{origin}{location}")
        } else if location.starts_with('?') {
            let path = self.target.split('?').next().unwrap_or("/");
            format!("{origin}{path}{location}")
        } else {
            let path = self.target.split('?').next().unwrap_or("/");
            let dir = &path[..path.rfind('/').map_or(0, |i| i + 1)];
            format!("{origin}{dir}{location}")
        }
    }
}

/// The scheme of a URL, lowercase, when it starts with one (`ALPHA *( ALPHA / DIGIT / "+" /
/// "-" / "." ) ":"`).
pub fn scheme(url: &str) -> Option<String> {
    let (scheme, _) = url.split_once(':')?;
    let mut chars = scheme.chars();
    let first_alpha = chars.next().is_some_and(|c| c.is_ascii_alphabetic());
    (first_alpha && chars.all(|c| c.is_ascii_alphanumeric() || matches!(c, '+' | '-' | '.')))
        .then(|| scheme.to_ascii_lowercase())
}

fn has_scheme(url: &str) -> bool {
    scheme(url).is_some()
}

/// An `http(s)` URL; any other scheme is the caller's to refuse.
pub fn parse(url: &str) -> Result<HttpUrl, FetchError> {
    if url.bytes().any(|b| b < 0x20 || b == 0x7f) {
        return Err(FetchError::Url("control characters in the URL"));
    }
    let scheme = scheme(url).ok_or(FetchError::NotAUrl)?;
    let https = match scheme.as_str() {
        "https" => true,
        "http" => false,
        _ => return Err(FetchError::Scheme(scheme)),
    };
    let rest = url[scheme.len() + 1..].strip_prefix("//").ok_or(FetchError::Url("no '//' after the scheme"))?;
    let rest = rest.split('#').next().unwrap_or_default();
    let end = rest.find(['/', '?']).unwrap_or(rest.len());
    let (authority, target) = rest.split_at(end);
    if authority.contains('@') {
        return Err(FetchError::Url("credentials (user@host) in the URL"));
    }
    let (host, port) = split_port(authority)?;
    let port = match port {
        None => {
            if https {
                443
            } else {
                80
            }
        }
        Some(p) => p.parse::<u16>().ok().filter(|&p| p != 0).ok_or(FetchError::Url("the port is not 1 to 65535"))?,
    };
    let (path, query) = target.split_at(target.find('?').unwrap_or(target.len()));
    let target = request_target(&format!("{}{query}", remove_dot_segments(path)));
    Ok(HttpUrl { https, host: valid_host(host)?, port, target })
}

/// `.` and `..` path segments resolved (RFC 3986 §5.2.4), as a browser sends the path.
fn remove_dot_segments(path: &str) -> String {
    let segments: Vec<&str> = path.split('/').skip(1).collect();
    let mut out: Vec<&str> = Vec::with_capacity(segments.len());
    for (i, segment) in segments.iter().enumerate() {
        let last = i + 1 == segments.len();
        match *segment {
            "." | ".." => {
                if *segment == ".." {
                    out.pop();
                }
                if last {
                    out.push("");
                }
            }
            other => out.push(other),
        }
    }
    format!("/{}", out.join("/"))
}

/// `host[:port]`, an IPv6 literal in brackets.
fn split_port(authority: &str) -> Result<(&str, Option<&str>), FetchError> {
    if authority.starts_with('[') {
        let close = authority.find(']').ok_or(FetchError::Url("an IPv6 host without its ']'"))?;
        let (host, after) = authority.split_at(close + 1);
        return match after {
            "" => Ok((host, None)),
            _ => after.strip_prefix(':').map(|p| (host, Some(p))).ok_or(FetchError::Url("junk after the IPv6 host")),
        };
    }
    Ok(match authority.split_once(':') {
        Some((host, port)) => (host, Some(port)),
        None => (authority, None),
    })
}

/// A DNS name or an IP literal, lowercase. Internationalised names must come as punycode
/// (`xn--`), as HTTP clients send them.
fn valid_host(host: &str) -> Result<String, FetchError> {
    if let Some(v6) = host.strip_prefix('[').and_then(|h| h.strip_suffix(']')) {
        v6.parse::<Ipv6Addr>().map_err(|_| FetchError::Url("an invalid IPv6 host"))?;
        return Ok(host.to_ascii_lowercase());
    }
    let ok = !host.is_empty()
        && host.len() <= 253
        && host.strip_suffix('.').unwrap_or(host).split('.').all(|label| !label.is_empty())
        && host.bytes().all(|b| b.is_ascii_alphanumeric() || matches!(b, b'-' | b'.' | b'_'));
    if !ok {
        return Err(FetchError::Url("the host is not a DNS name or an IP address"));
    }
    Ok(host.to_ascii_lowercase())
}

/// Path and query as sent: bytes HTTP does not allow raw (spaces, non-ASCII) percent-encoded,
/// as browsers do.
fn request_target(target: &str) -> String {
    let mut out = String::with_capacity(target.len() + 1);
    if !target.starts_with('/') {
        out.push('/');
    }
    for b in target.bytes() {
        if b.is_ascii_graphic() && !matches!(b, b'"' | b'<' | b'>' | b'\\' | b'^' | b'`' | b'{' | b'|' | b'}') {
            out.push(b as char);
        } else {
            let _ = write!(out, "%{b:02X}");
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn url(https: bool, host: &str, port: u16, target: &str) -> HttpUrl {
        HttpUrl { https, host: host.into(), port, target: target.into() }
    }

    #[test]
    fn parses() {
        let cases: Vec<(&str, Result<HttpUrl, FetchError>)> = vec![
            ("http://example.com", Ok(url(false, "example.com", 80, "/"))),
            ("HTTPS://Example.COM:8443/a/b.png?x=1#frag", Ok(url(true, "example.com", 8443, "/a/b.png?x=1"))),
            ("http://h?q", Ok(url(false, "h", 80, "/?q"))),
            ("http://[::1]:9/i", Ok(url(false, "[::1]", 9, "/i"))),
            ("http://127.0.0.1/a b/é", Ok(url(false, "127.0.0.1", 80, "/a%20b/%C3%A9"))),
            ("ftp://h/x", Err(FetchError::Scheme("ftp".into()))),
            ("http:/h/x", Err(FetchError::Url("no '//' after the scheme"))),
            ("http://user:pw@h/x", Err(FetchError::Url("credentials (user@host) in the URL"))),
            ("http://h:0/", Err(FetchError::Url("the port is not 1 to 65535"))),
            ("http://h:99999/", Err(FetchError::Url("the port is not 1 to 65535"))),
            ("http://h:/", Err(FetchError::Url("the port is not 1 to 65535"))),
            ("http:///x", Err(FetchError::Url("the host is not a DNS name or an IP address"))),
            ("http://a..b/", Err(FetchError::Url("the host is not a DNS name or an IP address"))),
            ("http://hé.com/", Err(FetchError::Url("the host is not a DNS name or an IP address"))),
            ("http://[::1/", Err(FetchError::Url("an IPv6 host without its ']'"))),
            ("http://[zz]/", Err(FetchError::Url("an invalid IPv6 host"))),
            ("http://h/\r\nX: y", Err(FetchError::Url("control characters in the URL"))),
            ("//h/x", Err(FetchError::NotAUrl)),
        ];
        for (input, want) in cases {
            assert_eq!(parse(input), want, "{input}");
        }
    }

    #[test]
    fn resolves_locations() {
        let base = url(true, "h", 8443, "/a/b/c.png?x=1");
        let cases = [
            ("http://other/x", "http://other/x"),
            ("//other/x", "https://other/x"),
            ("/x?y", "https://h:8443/x?y"),
            ("d.png", "https://h:8443/a/b/d.png"),
            ("?z", "https://h:8443/a/b/c.png?z"),
        ];
        for (location, want) in cases {
            assert_eq!(base.resolve(location), want, "{location}");
        }
        assert_eq!(url(false, "h", 80, "/").resolve("x"), "http://h/x");
    }

    #[test]
    fn removes_dot_segments() {
        let cases = [
            ("http://h/a/b/../c?x=/../", "/a/c?x=/../"),
            ("http://h/a/b/..", "/a/"),
            ("http://h/a/./b/.", "/a/b/"),
            ("http://h/../../x", "/x"),
            ("http://h", "/"),
            ("http://h?q", "/?q"),
        ];
        for (input, want) in cases {
            assert_eq!(parse(input).map(|u| u.target), Ok(want.to_string()), "{input}");
        }
    }
}
