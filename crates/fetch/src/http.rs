//! `http(s)` URLs: one GET per hop over a fresh connection (`Connection: close`), redirects
//! followed up to the policy's bound with every hop checked again (scheme, domain, no
//! downgrade from https), the whole fetch under one deadline.

use std::io::{BufReader, Write};
use std::time::Instant;

use crate::conn::{self, io_error};
use crate::response::{self, Head};
use crate::url::{self, HttpUrl};
use crate::{FetchError, FetchPolicy, Fetched};

pub fn fetch(url: &str, policy: &FetchPolicy) -> Result<Fetched, FetchError> {
    let deadline = Instant::now() + policy.timeout;
    let io = |e: std::io::Error| io_error(e, policy.timeout);
    let mut target = url::parse(url)?;
    check_domain(&target, policy)?;
    let mut redirects = 0;
    loop {
        let mut conn = BufReader::new(conn::open(&target, deadline, policy)?);
        let request = format!(
            "GET {} HTTP/1.1\r\nHost: {}\r\nUser-Agent: shardgate/{}\r\nAccept: */*\r\n\
             Accept-Encoding: identity\r\nConnection: close\r\n\r\n",
            target.target,
            target.authority(),
            env!("CARGO_PKG_VERSION")
        );
        conn.get_mut().write_all(request.as_bytes()).and_then(|()| conn.get_mut().flush()).map_err(io)?;
        let Head { status, location, content_type, framing } = response::read_head(&mut conn, io)?;
        match status {
            200..=299 => {
                let bytes = response::read_body(&mut conn, framing, policy.max_bytes, io)?;
                return Ok(Fetched { bytes, media_type: content_type });
            }
            301 | 302 | 303 | 307 | 308 => {
                let location = location.ok_or(FetchError::Protocol("a redirect without a Location"))?;
                if redirects == policy.max_redirects {
                    return Err(FetchError::Redirects { max: policy.max_redirects });
                }
                redirects += 1;
                let next = url::parse(&target.resolve(&location))?;
                if target.https && !next.https {
                    return Err(FetchError::Downgrade);
                }
                check_domain(&next, policy)?;
                target = next;
            }
            status => return Err(FetchError::Status(status)),
        }
    }
}

/// `--allowed-media-domains`: the host exactly as the URL names it (case aside), as vLLM
/// compares it; no subdomains, no wildcards.
fn check_domain(url: &HttpUrl, policy: &FetchPolicy) -> Result<(), FetchError> {
    match &policy.allowed_domains {
        Some(allowed) if !allowed.iter().any(|d| d.eq_ignore_ascii_case(&url.host)) => {
            Err(FetchError::Domain { host: url.host.clone(), allowed: allowed.clone() })
        }
        _ => Ok(()),
    }
}
