//! `--kv-events-publish-endpoint` (the PUB binds; subscribers dial in) or
//! `--kv-events-publish-connect` (the PUB dials a subscriber that binds, as llm-d's KV-event
//! listener), `--kv-events-replay-endpoint`, `--kv-events-topic`. The stream, like the engine
//! wire, has no authentication, so every `tcp://` address it uses must be loopback or private
//! unless `--allow-public-engine-bind`, and a bind is never a wildcard.

use std::fmt;
use std::net::{IpAddr, SocketAddr, ToSocketAddrs};

/// Where the host publishes.
#[derive(Debug, Clone, PartialEq)]
pub struct PublishEndpoints {
    pub endpoint: String,
    /// The PUB connects to `endpoint` rather than binding it.
    pub connect: bool,
    pub replay_endpoint: Option<String>,
    pub topic: String,
}

#[derive(Debug, Clone, PartialEq)]
pub enum PublishRefusal {
    /// A replay socket without a stream to replay.
    ReplayWithoutPublish,
    /// Both `--kv-events-publish-endpoint` and `--kv-events-publish-connect`.
    BindAndConnect,
    /// `--kv-events-publish-connect` not `tcp://HOST:PORT` that resolves, or `ipc://PATH`.
    ConnectAddress { url: String, why: String },
    /// Not `tcp://IP:PORT` (one interface, non-zero port) or `ipc://PATH`.
    Address { flag: &'static str, url: String },
    /// A public `tcp://` address without `--allow-public-engine-bind`.
    PublicBind { flag: &'static str, url: String, ip: IpAddr },
    /// Both sockets on one address.
    SameAddress(String),
}

impl fmt::Display for PublishRefusal {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            PublishRefusal::ReplayWithoutPublish => f.write_str(
                "--kv-events-replay-endpoint needs --kv-events-publish-endpoint or --kv-events-publish-connect",
            ),
            PublishRefusal::BindAndConnect => {
                f.write_str("--kv-events-publish-endpoint and --kv-events-publish-connect exclude each other")
            }
            PublishRefusal::ConnectAddress { url, why } => write!(
                f,
                "--kv-events-publish-connect {url} must be tcp://HOST:PORT (a subscriber that binds) or \
                 ipc://PATH: {why}"
            ),
            PublishRefusal::Address { flag, url } => write!(
                f,
                "{flag} {url} must be tcp://IP:PORT with the IP address of one interface of this host and a \
                 non-zero port, or ipc://PATH"
            ),
            PublishRefusal::PublicBind { flag, url, ip } => write!(
                f,
                "{flag} {url}: {ip} is not a loopback or private address, and the KV-event stream has no \
                 authentication; use a private network, or pass --allow-public-engine-bind"
            ),
            PublishRefusal::SameAddress(url) => {
                write!(f, "--kv-events-publish-endpoint and --kv-events-replay-endpoint are both {url}")
            }
        }
    }
}

impl std::error::Error for PublishRefusal {}

/// The flags as given.
pub struct PublishFlags<'a> {
    pub bind: Option<&'a str>,
    pub connect: Option<&'a str>,
    pub replay: Option<&'a str>,
    pub topic: &'a str,
    pub allow_public: bool,
}

/// The publisher's addresses, `None` when the host does not publish.
pub fn parse(flags: &PublishFlags<'_>) -> Result<Option<PublishEndpoints>, PublishRefusal> {
    let (replay, allow_public) = (flags.replay, flags.allow_public);
    let (endpoint, connect) = match (flags.bind, flags.connect) {
        (Some(_), Some(_)) => return Err(PublishRefusal::BindAndConnect),
        (Some(bind), None) => {
            check("--kv-events-publish-endpoint", bind, allow_public)?;
            (bind, false)
        }
        (None, Some(connect)) => {
            check_connect(connect, allow_public)?;
            (connect, true)
        }
        (None, None) if replay.is_some() => return Err(PublishRefusal::ReplayWithoutPublish),
        (None, None) => return Ok(None),
    };
    if let Some(replay) = replay {
        check("--kv-events-replay-endpoint", replay, allow_public)?;
        if replay == endpoint {
            return Err(PublishRefusal::SameAddress(replay.to_string()));
        }
    }
    Ok(Some(PublishEndpoints {
        endpoint: endpoint.to_string(),
        connect,
        replay_endpoint: replay.map(str::to_string),
        topic: flags.topic.to_string(),
    }))
}

/// A subscriber's address: every address its host name resolves to must be private.
fn check_connect(url: &str, allow_public: bool) -> Result<(), PublishRefusal> {
    let refused = |why: String| PublishRefusal::ConnectAddress { url: url.to_string(), why };
    if url.strip_prefix("ipc://").is_some_and(|path| !path.is_empty()) {
        return Ok(());
    }
    let Some(host_port) = url.strip_prefix("tcp://") else {
        return Err(refused("another scheme".into()));
    };
    let addrs: Vec<SocketAddr> =
        host_port.to_socket_addrs().map_err(|e| refused(format!("cannot resolve it ({e})")))?.collect();
    for addr in &addrs {
        if addr.port() == 0 || addr.ip().is_unspecified() || addr.ip().is_multicast() {
            return Err(refused(format!("{addr} is not one host's address")));
        }
        if !allow_public && !crate::workers::tcp::is_private(addr.ip()) {
            let flag = "--kv-events-publish-connect";
            return Err(PublishRefusal::PublicBind { flag, url: url.to_string(), ip: addr.ip() });
        }
    }
    if addrs.is_empty() {
        return Err(refused("it resolves to no address".into()));
    }
    Ok(())
}

fn check(flag: &'static str, url: &str, allow_public: bool) -> Result<(), PublishRefusal> {
    let refused = || PublishRefusal::Address { flag, url: url.to_string() };
    if url.strip_prefix("ipc://").is_some_and(|path| !path.is_empty()) {
        return Ok(());
    }
    let addr: SocketAddr = url.strip_prefix("tcp://").and_then(|a| a.parse().ok()).ok_or_else(refused)?;
    if addr.port() == 0 || addr.ip().is_unspecified() || addr.ip().is_multicast() {
        return Err(refused());
    }
    if !allow_public && !crate::workers::tcp::is_private(addr.ip()) {
        return Err(PublishRefusal::PublicBind { flag, url: url.to_string(), ip: addr.ip() });
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn private_addresses_unless_allowed_and_a_replay_only_with_a_stream() {
        // (publish, replay, allow public, Ok(publishes) or the refusal's text)
        type Case<'a> = (Option<&'a str>, Option<&'a str>, bool, Result<bool, &'a str>);
        let binds: &[Case] = &[
            (None, None, false, Ok(false)),
            (Some("tcp://127.0.0.1:21010"), None, false, Ok(true)),
            (Some("tcp://10.0.0.5:5557"), Some("tcp://10.0.0.5:5558"), false, Ok(true)),
            (Some("ipc:///run/sg/kv"), Some("ipc:///run/sg/kv-replay"), false, Ok(true)),
            (Some("tcp://[fd00::2]:5557"), None, false, Ok(true)),
            (Some("tcp://203.0.113.7:5557"), None, true, Ok(true)),
            (None, Some("tcp://127.0.0.1:5558"), false, Err("--kv-events-replay-endpoint needs --kv-events-publish")),
            (Some("tcp://203.0.113.7:5557"), None, false, Err("203.0.113.7 is not a loopback or private address")),
            (
                Some("tcp://127.0.0.1:5557"),
                Some("tcp://[2001:db8::1]:5558"),
                false,
                Err("--kv-events-replay-endpoint tcp://[2001:db8::1]:5558: 2001:db8::1 is not"),
            ),
            (Some("tcp://0.0.0.0:5557"), None, true, Err("must be tcp://IP:PORT")),
            (Some("tcp://*:5557"), None, false, Err("must be tcp://IP:PORT")),
            (Some("tcp://127.0.0.1:0"), None, false, Err("must be tcp://IP:PORT")),
            (Some("tcp://localhost:5557"), None, false, Err("must be tcp://IP:PORT")),
            (Some("ipc://"), None, false, Err("--kv-events-publish-endpoint ipc:// must be")),
            (Some("http://127.0.0.1:5557"), None, false, Err("must be tcp://IP:PORT")),
            (Some("tcp://127.0.0.1:5557"), Some("tcp://127.0.0.1:5557"), false, Err("are both tcp://127.0.0.1:5557")),
        ];
        // (connect, replay, allow public, Ok(publishes) or the refusal's text)
        let connects: &[Case] = &[
            (Some("tcp://127.0.0.1:5557"), None, false, Ok(true)),
            (Some("tcp://localhost:5557"), Some("tcp://127.0.0.1:5558"), false, Ok(true)),
            (Some("ipc:///run/llm-d/kv"), None, false, Ok(true)),
            (
                Some("tcp://203.0.113.7:5557"),
                None,
                false,
                Err("--kv-events-publish-connect tcp://203.0.113.7:5557: 203.0.113.7 is not"),
            ),
            (Some("tcp://203.0.113.7:5557"), None, true, Ok(true)),
            (Some("tcp://127.0.0.1:0"), None, false, Err("is not one host's address")),
            (Some("tcp://no-such-host.invalid:5557"), None, false, Err("cannot resolve it")),
            (Some("tcp://127.0.0.1"), None, false, Err("cannot resolve it")),
            (Some("udp://127.0.0.1:5557"), None, false, Err("another scheme")),
        ];
        let table = binds
            .iter()
            .map(|&(p, r, a, ref w)| (p, None, r, a, w))
            .chain(connects.iter().map(|&(c, r, a, ref w)| (None, c, r, a, w)));
        let both =
            (Some("tcp://127.0.0.1:5557"), Some("tcp://127.0.0.1:5559"), None, false, &Err("exclude each other"));
        for (bind, connect, replay, allow_public, want) in table.chain([both]) {
            let got = parse(&PublishFlags { bind, connect, replay, topic: "kv", allow_public });
            let case = format!("{bind:?} {connect:?} {replay:?}");
            match (want, got) {
                (Ok(publishes), Ok(got)) => {
                    assert_eq!(got.as_ref().map(|g| g.connect), publishes.then_some(connect.is_some()), "{case}")
                }
                (Err(text), Err(e)) => assert!(e.to_string().contains(text), "{case}: {e}"),
                (want, got) => panic!("{case}: want {want:?}, got {got:?}"),
            }
        }
    }
}
