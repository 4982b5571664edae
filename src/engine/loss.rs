//! Why a shard's link to a worker closed: the engine went away, the transport failed, or the
//! gateway closed it. Every request still on the link fails with `engine connection lost:
//! {loss}`, the worker is reported lost with it, and the supervisor logs it; the texts are the
//! ones those lines have always had.

use std::fmt;
use std::io;
use std::sync::Arc;

use shardgate_wire::msgpack::DecodeError;
use shardgate_wire::zmtp::SendError;

#[derive(Debug, Clone)]
pub enum LinkLoss {
    /// The engine sent ENGINE_CORE_DEAD.
    EngineDead,
    /// The connection of the engine with this identity (2 bytes: its rank) closed.
    EngineClosed(Vec<u8>),
    /// This shard's input socket failed.
    InputFailed(Arc<io::Error>),
    /// This shard's output socket failed.
    OutputFailed(Arc<io::Error>),
    /// An ADD could not be sent (no room within the send limit, or no engine).
    SendFailed(SendError),
    /// The owner shard could not send a relayed message.
    RelayedSendFailed(SendError),
    /// An ABORT found no connection for the engine.
    Unreachable(SendError),
    /// The liveness ping could not reach an engine rank.
    PingFailed { rank: u16, error: SendError },
    /// The ping found the link closed already.
    Closed,
    /// Outputs that could not be decoded, `count` in a row.
    Undecodable { count: u32, error: DecodeError },
    /// No output for `secs` with requests in flight.
    Silent { secs: u64 },
    /// A shard could not take its sockets for the link.
    Attach { shard: usize, error: Arc<io::Error> },
    /// The control shard has no open link to ping through.
    ControlLinkClosed,
    /// SIGTERM / SIGINT: the gateway aborts what is still running.
    Shutdown,
    /// The supervisor tore the worker down after another shard's (or its own) loss report.
    Reset(Box<LinkLoss>),
    /// The worker was removed (`DELETE /workers/{id}`) after draining.
    Removed,
    /// A gRPC worker's connection could not be made or was lost.
    Grpc(Arc<shardgate_grpc::Fault>),
}

impl fmt::Display for LinkLoss {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            LinkLoss::EngineDead => f.write_str("the engine reported a fatal error (ENGINE_CORE_DEAD)"),
            LinkLoss::EngineClosed(identity) => match identity.as_slice() {
                [lo, hi] => write!(f, "engine rank {} closed its connection", u16::from_le_bytes([*lo, *hi])),
                other => write!(f, "engine {other:02x?} closed its connection"),
            },
            LinkLoss::InputFailed(e) => write!(f, "input socket failed: {e}"),
            LinkLoss::OutputFailed(e) => write!(f, "output socket failed: {e}"),
            LinkLoss::SendFailed(e) => write!(f, "request send failed: {e}"),
            LinkLoss::RelayedSendFailed(e) => write!(f, "relayed send failed: {e}"),
            LinkLoss::Unreachable(e) => write!(f, "engine unreachable: {e}"),
            LinkLoss::PingFailed { rank, error } => write!(f, "engine rank {rank} unreachable: {error}"),
            LinkLoss::Closed => f.write_str("connection closed"),
            LinkLoss::Undecodable { count, error } => {
                write!(f, "{count} outputs in a row could not be decoded: {error}")
            }
            LinkLoss::Silent { secs } => write!(f, "no output for {secs} s while requests were in flight"),
            LinkLoss::Attach { shard, error } => {
                write!(f, "shard {shard} cannot take its sockets: cannot watch a worker socket: {error}")
            }
            LinkLoss::ControlLinkClosed => f.write_str("the control shard's connection closed"),
            LinkLoss::Shutdown => f.write_str("the gateway is shutting down"),
            LinkLoss::Reset(why) => write!(f, "worker connection reset: {why}"),
            LinkLoss::Removed => f.write_str("worker removed"),
            LinkLoss::Grpc(e) => write!(f, "gRPC worker: {e}"),
        }
    }
}

impl LinkLoss {
    /// Whether the requests this loss failed may be sent to another engine: the engine that
    /// held them is gone (it died, or its connection closed or cannot be reached), so nothing
    /// of them runs any more and resending duplicates no work. A silent, undecodable or
    /// unwritable engine may still be running them, and the gateway's own closes (shutdown,
    /// removal) are not failures to route around.
    pub fn retry_safe(&self) -> bool {
        match self {
            LinkLoss::EngineDead | LinkLoss::EngineClosed(_) => true,
            LinkLoss::SendFailed(e)
            | LinkLoss::RelayedSendFailed(e)
            | LinkLoss::Unreachable(e)
            | LinkLoss::PingFailed { error: e, .. } => *e == SendError::Unreachable,
            LinkLoss::Reset(why) => why.retry_safe(),
            // A gRPC server cancels the calls of a connection it lost.
            LinkLoss::Grpc(e) => e.retry_safe(),
            LinkLoss::InputFailed(_)
            | LinkLoss::OutputFailed(_)
            | LinkLoss::Closed
            | LinkLoss::Undecodable { .. }
            | LinkLoss::Silent { .. }
            | LinkLoss::Attach { .. }
            | LinkLoss::ControlLinkClosed
            | LinkLoss::Shutdown
            | LinkLoss::Removed => false,
        }
    }
}

impl std::error::Error for LinkLoss {}

#[cfg(test)]
mod tests {
    use super::*;

    /// The typed causes read exactly as the texts they replaced (in `engine connection lost:
    /// ...` faults and the supervisor's log lines).
    #[test]
    fn loss_texts_are_unchanged() {
        let io = || Arc::new(io::Error::from(io::ErrorKind::BrokenPipe));
        let cases: Vec<(LinkLoss, String)> = vec![
            (LinkLoss::EngineDead, "the engine reported a fatal error (ENGINE_CORE_DEAD)".into()),
            (LinkLoss::EngineClosed(vec![1, 0]), "engine rank 1 closed its connection".into()),
            (LinkLoss::EngineClosed(vec![7]), "engine [07] closed its connection".into()),
            (LinkLoss::InputFailed(io()), format!("input socket failed: {}", io())),
            (LinkLoss::OutputFailed(io()), format!("output socket failed: {}", io())),
            (LinkLoss::SendFailed(SendError::Full), "request send failed: send queue full".into()),
            (LinkLoss::RelayedSendFailed(SendError::Full), "relayed send failed: send queue full".into()),
            (LinkLoss::Unreachable(SendError::Unreachable), "engine unreachable: engine not connected".into()),
            (
                LinkLoss::PingFailed { rank: 1, error: SendError::Unreachable },
                "engine rank 1 unreachable: engine not connected".into(),
            ),
            (LinkLoss::Closed, "connection closed".into()),
            (
                LinkLoss::Undecodable { count: 3, error: DecodeError("bad".into()) },
                "3 outputs in a row could not be decoded: bad".into(),
            ),
            (LinkLoss::Silent { secs: 300 }, "no output for 300 s while requests were in flight".into()),
            (
                LinkLoss::Attach { shard: 1, error: io() },
                format!("shard 1 cannot take its sockets: cannot watch a worker socket: {}", io()),
            ),
            (LinkLoss::ControlLinkClosed, "the control shard's connection closed".into()),
            (LinkLoss::Shutdown, "the gateway is shutting down".into()),
            (
                LinkLoss::Reset(Box::new(LinkLoss::EngineDead)),
                "worker connection reset: the engine reported a fatal error (ENGINE_CORE_DEAD)".into(),
            ),
            (LinkLoss::Removed, "worker removed".into()),
            (
                LinkLoss::Grpc(Arc::new(shardgate_grpc::Fault::Closed("closed by the worker".into()))),
                "gRPC worker: connection lost: closed by the worker".into(),
            ),
        ];
        for (loss, text) in cases {
            assert_eq!(loss.to_string(), text);
        }
    }

    /// Only an engine known to be gone makes its requests safe to send elsewhere.
    #[test]
    fn retry_safe_when_the_engine_is_gone() {
        let io = || Arc::new(io::Error::from(io::ErrorKind::BrokenPipe));
        let cases: Vec<(LinkLoss, bool)> = vec![
            (LinkLoss::EngineDead, true),
            (LinkLoss::EngineClosed(vec![0, 0]), true),
            (LinkLoss::Unreachable(SendError::Unreachable), true),
            (LinkLoss::SendFailed(SendError::Unreachable), true),
            (LinkLoss::SendFailed(SendError::Full), false),
            (LinkLoss::RelayedSendFailed(SendError::Full), false),
            (LinkLoss::PingFailed { rank: 0, error: SendError::Unreachable }, true),
            (LinkLoss::Reset(Box::new(LinkLoss::EngineDead)), true),
            (LinkLoss::Reset(Box::new(LinkLoss::Silent { secs: 1 })), false),
            (LinkLoss::Silent { secs: 300 }, false),
            (LinkLoss::Undecodable { count: 3, error: DecodeError("x".into()) }, false),
            (LinkLoss::InputFailed(io()), false),
            (LinkLoss::OutputFailed(io()), false),
            (LinkLoss::Shutdown, false),
            (LinkLoss::Removed, false),
            (LinkLoss::Closed, false),
            (LinkLoss::Grpc(Arc::new(shardgate_grpc::Fault::Closed("reset".into()))), true),
            (LinkLoss::Grpc(Arc::new(shardgate_grpc::Fault::Refused)), true),
            (LinkLoss::Grpc(Arc::new(shardgate_grpc::Fault::Deadline { ms: 1 })), false),
        ];
        for (loss, safe) in cases {
            assert_eq!(loss.retry_safe(), safe, "{loss}");
        }
    }
}
