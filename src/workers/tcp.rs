//! `tcp://IP:PORT` workers: engines on other hosts dial the gateway over TCP (vLLM's multi-node
//! data parallelism). The handshake socket binds IP:PORT and each shard's data sockets bind the
//! same IP on free ports, which INIT tells the engines.
//!
//! ZMTP's NULL mechanism has no authentication: whoever reaches these ports can register as an
//! engine, read every prompt sent to it and answer with anything. So the IP must be a loopback
//! or private address (a network the operator controls) unless `--allow-public-engine-bind`
//! says otherwise, and it must name one interface: INIT must carry an address the engines can
//! dial, which 0.0.0.0 is not.

use std::net::{IpAddr, SocketAddr};

use super::refusal::WorkerRefusal;

/// The handshake address of a `tcp://` worker URL, checked as a bind address.
pub fn parse(url: &str, allow_public: bool) -> Result<SocketAddr, WorkerRefusal> {
    let Some(rest) = url.strip_prefix("tcp://") else {
        return Err(WorkerRefusal::NotZmq { url: url.to_string() });
    };
    let addr: SocketAddr = rest.parse().map_err(|_| WorkerRefusal::TcpAddress { url: url.to_string() })?;
    if addr.port() == 0 || addr.ip().is_unspecified() || addr.ip().is_multicast() {
        return Err(WorkerRefusal::TcpAddress { url: url.to_string() });
    }
    if !allow_public && !is_private(addr.ip()) {
        return Err(WorkerRefusal::PublicBind { url: url.to_string(), ip: addr.ip() });
    }
    Ok(addr)
}

/// Loopback, private (RFC 1918, IPv6 unique local) or link-local.
pub fn is_private(ip: IpAddr) -> bool {
    match ip {
        IpAddr::V4(v4) => v4.is_loopback() || v4.is_private() || v4.is_link_local(),
        IpAddr::V6(v6) => {
            let first = v6.segments()[0];
            v6.is_loopback() || (first & 0xfe00) == 0xfc00 || (first & 0xffc0) == 0xfe80
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bind_addresses_are_private_unless_allowed() {
        // (url, allow public, Ok(address) or the refusal's text)
        let cases: [(&str, bool, Result<&str, &str>); 12] = [
            ("tcp://127.0.0.1:20100", false, Ok("127.0.0.1:20100")),
            ("tcp://10.1.2.3:5570", false, Ok("10.1.2.3:5570")),
            ("tcp://192.168.0.9:5570", false, Ok("192.168.0.9:5570")),
            ("tcp://[fd00::1]:5570", false, Ok("[fd00::1]:5570")),
            ("tcp://[::1]:5570", false, Ok("[::1]:5570")),
            ("tcp://203.0.113.7:5570", false, Err("is not a loopback or private address")),
            ("tcp://[2001:db8::1]:5570", false, Err("is not a loopback or private address")),
            ("tcp://203.0.113.7:5570", true, Ok("203.0.113.7:5570")),
            ("tcp://0.0.0.0:5570", true, Err("must be tcp://IP:PORT")),
            ("tcp://engines.internal:5570", false, Err("must be tcp://IP:PORT")),
            ("tcp://127.0.0.1:0", false, Err("must be tcp://IP:PORT")),
            ("tcp://127.0.0.1", false, Err("must be tcp://IP:PORT")),
        ];
        for (url, allow, want) in cases {
            let got = parse(url, allow).map(|a| a.to_string()).map_err(|e| e.to_string());
            match (got, want) {
                (Ok(a), Ok(w)) => assert_eq!(a, w, "{url}"),
                (Err(e), Err(w)) => assert!(e.contains(w) && e.contains(url), "{url}: {e}"),
                (got, want) => panic!("{url}: got {got:?}, want {want:?}"),
            }
        }
    }
}
