//! A worker address and its current connection: reconnects when the connection is gone, with
//! exponential backoff between failed attempts so a dead worker costs one failed connect per
//! backoff period, not one per request.

use std::rc::Rc;
use std::time::Duration;

use monoio::time::Instant;

use shardgate_tls::ClientTls;

use crate::channel::Channel;
use crate::fault::Fault;
use crate::limits;

/// The delay before the next connect attempt: doubles per failure, from `backoff_min_ms` to
/// `backoff_max_ms`, and starts over after a success.
#[derive(Debug, Default)]
pub struct Backoff {
    failures: u32,
}

impl Backoff {
    pub fn failed(&mut self) -> u64 {
        self.failures = self.failures.saturating_add(1);
        let doublings = (self.failures - 1).min(31);
        (limits::backoff_min_ms << doublings).min(limits::backoff_max_ms)
    }

    pub fn succeeded(&mut self) {
        self.failures = 0;
    }
}

pub struct Endpoint {
    addr: String,
    tls: Option<ClientTls>,
    channel: Option<Rc<Channel>>,
    backoff: Backoff,
    next_attempt: Option<Instant>,
}

impl Endpoint {
    /// `addr` is `host:port`, reached over TLS when `tls` is given; nothing is connected until
    /// the first call.
    pub fn new(addr: &str, tls: Option<ClientTls>) -> Endpoint {
        Endpoint { addr: addr.to_string(), tls, channel: None, backoff: Backoff::default(), next_attempt: None }
    }

    pub fn addr(&self) -> &str {
        &self.addr
    }

    /// The live connection, connecting first if there is none; while backing off,
    /// `Fault::Backoff` at once.
    pub async fn channel(&mut self) -> Result<Rc<Channel>, Fault> {
        if let Some(c) = &self.channel {
            if c.ended().is_none() {
                return Ok(c.clone());
            }
            self.channel = None;
        }
        let now = Instant::now();
        if let Some(at) = self.next_attempt.filter(|&at| at > now) {
            return Err(Fault::Backoff { retry_in_ms: at.duration_since(now).as_millis() as u64 });
        }
        match Channel::connect(&self.addr, self.tls.as_ref()).await {
            Ok(c) => {
                self.backoff.succeeded();
                self.next_attempt = None;
                let c = Rc::new(c);
                self.channel = Some(c.clone());
                Ok(c)
            }
            Err(e) => {
                self.next_attempt = Some(Instant::now() + Duration::from_millis(self.backoff.failed()));
                Err(e)
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn backoff_doubles_to_its_cap_and_starts_over() {
        let mut b = Backoff::default();
        let delays: Vec<u64> = (0..8).map(|_| b.failed()).collect();
        assert_eq!(delays, [100, 200, 400, 800, 1600, 3200, 5000, 5000]);
        b.succeeded();
        assert_eq!(b.failed(), limits::backoff_min_ms);
        let mut many = Backoff { failures: u32::MAX - 1 };
        assert_eq!((many.failed(), many.failed()), (limits::backoff_max_ms, limits::backoff_max_ms));
    }
}
