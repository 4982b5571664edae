//! `--kv-events-publish-endpoint`, `--kv-events-replay-endpoint`, `--kv-events-topic`: where
//! the host's KV-event stream is bound. The stream, like the engine wire, has no
//! authentication, so a `tcp://` address must be loopback or private unless
//! `--allow-public-engine-bind`, and never a wildcard.

use std::fmt;
use std::net::{IpAddr, SocketAddr};

/// Where the host publishes.
#[derive(Debug, Clone, PartialEq)]
pub struct PublishEndpoints {
    pub endpoint: String,
    pub replay_endpoint: Option<String>,
    pub topic: String,
}

#[derive(Debug, Clone, PartialEq)]
pub enum PublishRefusal {
    /// A replay socket without a stream to replay.
    ReplayWithoutPublish,
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
            PublishRefusal::ReplayWithoutPublish => {
                f.write_str("--kv-events-replay-endpoint needs --kv-events-publish-endpoint")
            }
            PublishRefusal::Address { flag, url } => write!(
                f,
                "{flag} {url} must be tcp://IP:PORT with the IP address of one interface of this host and a \
                 non-zero port, or ipc://PATH"
            ),
            PublishRefusal::PublicBind { flag, url, ip } => write!(
                f,
                "{flag} {url}: {ip} is not a loopback or private address, and the KV-event stream has no \
                 authentication; bind on a private network, or pass --allow-public-engine-bind"
            ),
            PublishRefusal::SameAddress(url) => {
                write!(f, "--kv-events-publish-endpoint and --kv-events-replay-endpoint are both {url}")
            }
        }
    }
}

impl std::error::Error for PublishRefusal {}

/// The publisher's addresses, `None` when the host does not publish.
pub fn parse(
    endpoint: Option<&str>,
    replay: Option<&str>,
    topic: &str,
    allow_public: bool,
) -> Result<Option<PublishEndpoints>, PublishRefusal> {
    let Some(endpoint) = endpoint else {
        return match replay {
            Some(_) => Err(PublishRefusal::ReplayWithoutPublish),
            None => Ok(None),
        };
    };
    check("--kv-events-publish-endpoint", endpoint, allow_public)?;
    if let Some(replay) = replay {
        check("--kv-events-replay-endpoint", replay, allow_public)?;
        if replay == endpoint {
            return Err(PublishRefusal::SameAddress(replay.to_string()));
        }
    }
    Ok(Some(PublishEndpoints {
        endpoint: endpoint.to_string(),
        replay_endpoint: replay.map(str::to_string),
        topic: topic.to_string(),
    }))
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
        let cases: &[Case] = &[
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
        for &(publish, replay, allow, ref want) in cases {
            let got = parse(publish, replay, "kv", allow);
            match (want, got) {
                (Ok(publishes), Ok(got)) => assert_eq!(got.is_some(), *publishes, "{publish:?} {replay:?}"),
                (Err(text), Err(e)) => assert!(e.to_string().contains(text), "{publish:?} {replay:?}: {e}"),
                (want, got) => panic!("{publish:?} {replay:?}: want {want:?}, got {got:?}"),
            }
        }
    }
}
