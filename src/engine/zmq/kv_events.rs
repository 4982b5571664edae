//! Following an engine group's KV-cache events on one shard: a libzmq SUB socket per engine
//! rank (the address its registration gave), each batch applied to that rank's exact block
//! index (`routing::kv_index`), gaps in the sequence filled from the rank's replay socket.
//!
//! Every shard subscribes for itself, so each keeps its own index and routing reads it without
//! crossing a core (the publisher fans out; a batch is one step's stores and removals). When a
//! gap cannot be filled (no replay socket, replay too slow, or the batches fell out of the
//! engine's buffer), the rank's index is dropped and marked inexact: routing falls back to load
//! for it until the engine clears its cache or the worker reconnects, since an index missing
//! removals could send prompts to blocks that are gone.
//!
//! On shard 0, when the host re-publishes KV events (`kv_publish`), every batch applied here is
//! also handed to the host's publisher, in the rank's order, and every loss is reported to it.

use std::cell::RefCell;
use std::rc::Rc;
use std::time::Duration;

use super::handshake_socket::AsyncSocket;
use crate::engine::book::RequestBook;
use crate::kv_publish::forward::KvForward;
use crate::limits;
use crate::routing::kv_index::{prompt_keys, KvIndex};
use shardgate_wire::vllm::handshake::KvEventsEndpoints;
use shardgate_wire::vllm::kv_events::{self, KvEvent, REPLAY_END_SEQ};

/// One rank's view.
pub struct RankKv {
    pub index: KvIndex,
    /// The sequence number expected next; `None` before the first batch.
    next_seq: Option<i64>,
    /// False once a gap could not be filled (see the module doc).
    pub exact: bool,
    pub batches: u64,
    pub gaps_filled: u64,
    pub gaps_lost: u64,
}

/// The KV-event views of one link's ranks.
pub struct KvRanks {
    ranks: RefCell<Vec<RankKv>>,
    keys: RefCell<Vec<u64>>,
    /// On the shard that feeds the host's KV-event stream.
    forward: Option<KvForward>,
}

impl KvRanks {
    /// Cached leading tokens of `tokens` per rank; `None` where that rank has no exact view.
    pub fn cached_tokens(&self, tokens: &[u32], out: &mut Vec<Option<u32>>) {
        out.clear();
        let mut keys = self.keys.borrow_mut();
        let mut keyed_for = 0;
        for rank in self.ranks.borrow().iter() {
            let size = rank.index.block_size();
            if !rank.exact || size == 0 {
                out.push(None);
                continue;
            }
            if keyed_for != size {
                prompt_keys(tokens, size, &mut keys);
                keyed_for = size;
            }
            out.push(Some((rank.index.cached_blocks(&keys) * size as usize) as u32));
        }
    }

    /// Each rank's view as `GET /workers` shows it.
    pub fn summary(&self) -> Vec<RankKvSummary> {
        let view = |r: &RankKv| RankKvSummary {
            cached_blocks: r.index.blocks(),
            exact: r.exact,
            batches: r.batches,
            gaps_filled: r.gaps_filled,
            gaps_lost: r.gaps_lost,
        };
        self.ranks.borrow().iter().map(view).collect()
    }
}

/// One rank's view of its KV-cache events.
#[derive(Clone, Copy, Debug, serde::Serialize)]
pub struct RankKvSummary {
    pub cached_blocks: usize,
    pub exact: bool,
    pub batches: u64,
    pub gaps_filled: u64,
    pub gaps_lost: u64,
}

/// Subscribes to every rank that publishes (`endpoints[rank]`, `None` for one that does not)
/// until `book` closes. `host` replaces a wildcard bind address (`tcp://*:5557`). `publish`:
/// this shard feeds the host's KV-event stream.
pub fn follow(
    book: &Rc<RequestBook>,
    ctx: &zmq::Context,
    endpoints: Vec<Option<KvEventsEndpoints>>,
    host: &str,
    publish: bool,
) -> Option<Rc<KvRanks>> {
    if endpoints.iter().all(Option::is_none) {
        return None;
    }
    let ranks = endpoints
        .iter()
        .map(|e| RankKv {
            index: KvIndex::new(limits::kv_index_blocks_max),
            next_seq: None,
            exact: e.is_some(),
            batches: 0,
            gaps_filled: 0,
            gaps_lost: 0,
        })
        .collect();
    let forward = publish.then(|| KvForward::open(ctx, book.worker.url(), endpoints.len())).and_then(|f| {
        f.map_err(|e| tracing::warn!("worker {}: its KV events cannot reach the host stream: {e}", book.worker.url()))
            .ok()
    });
    if let Some(forward) = &forward {
        // A new link: whatever the host stream said about these ranks before may be stale.
        for rank in 0..endpoints.len() {
            forward.lost(rank);
        }
    }
    let kv = Rc::new(KvRanks { ranks: RefCell::new(ranks), keys: RefCell::new(Vec::new()), forward });
    for (rank, endpoints) in endpoints.into_iter().enumerate() {
        let Some(endpoints) = endpoints else { continue };
        if !publisher_binds(&endpoints.endpoint) {
            // vLLM's publisher connects out to any other address, to a subscriber that binds.
            tracing::warn!(
                "worker {} rank {rank}: its KV-event publisher connects out to {}; the gateway subscribes to a \
                 publisher that binds (tcp://*:PORT or ipc://): routing by load for this rank",
                book.worker.url(),
                endpoints.endpoint
            );
            kv.ranks.borrow_mut()[rank].exact = false;
            continue;
        }
        let sub = Subscription {
            endpoint: connect_address(&endpoints.endpoint, host),
            replay: endpoints.replay_endpoint.as_deref().map(|r| connect_address(r, host)),
            topic: endpoints.topic,
        };
        monoio::spawn(run(book.clone(), kv.clone(), rank, ctx.clone(), sub));
    }
    Some(kv)
}

struct Subscription {
    endpoint: String,
    replay: Option<String>,
    topic: String,
}

/// Whether vLLM's publisher binds `endpoint` (a wildcard host, ipc or inproc) rather than
/// connecting to it (`ZmqEventPublisher._is_bind_endpoint`).
fn publisher_binds(endpoint: &str) -> bool {
    endpoint.contains('*')
        || endpoint.contains("::")
        || endpoint.starts_with("ipc://")
        || endpoint.starts_with("inproc://")
}

/// A publisher's bind address as a subscriber dials it: a wildcard host becomes `host`.
fn connect_address(bound: &str, host: &str) -> String {
    for wildcard in ["tcp://*:", "tcp://0.0.0.0:", "tcp://[::]:"] {
        if let Some(port) = bound.strip_prefix(wildcard) {
            return format!("tcp://{host}:{port}");
        }
    }
    bound.to_string()
}

async fn run(book: Rc<RequestBook>, kv: Rc<KvRanks>, rank: usize, ctx: zmq::Context, sub: Subscription) {
    let url = book.worker.url().to_string();
    let socket = match open(&ctx, zmq::SUB, &sub.endpoint, Some(&sub.topic)) {
        Ok(s) => s,
        Err(e) => {
            tracing::warn!("worker {url} rank {rank}: cannot subscribe to KV events at {}: {e}", sub.endpoint);
            kv.ranks.borrow_mut()[rank].exact = false;
            return;
        }
    };
    tracing::info!("worker {url} rank {rank}: following KV events at {}", sub.endpoint);
    let mut frames = Vec::new();
    loop {
        monoio::select! {
            r = socket.readable() => if let Err(e) = r {
                tracing::warn!("worker {url} rank {rank}: KV event socket failed: {e}");
                return;
            },
            _ = book.close_signal.wait() => return,
        }
        for _ in 0..limits::kv_batches_per_poll_max {
            match socket.try_recv_multipart(&mut frames) {
                Ok(true) => on_message(&kv, rank, &frames, &sub, &ctx, &url).await,
                Ok(false) => break,
                Err(e) => {
                    tracing::warn!("worker {url} rank {rank}: KV event socket failed: {e}");
                    return;
                }
            }
        }
    }
}

/// One published message: applied in sequence, after the batches a gap before it missed.
async fn on_message(
    kv: &KvRanks,
    rank: usize,
    frames: &[zmq::Message],
    sub: &Subscription,
    ctx: &zmq::Context,
    url: &str,
) {
    let Some(seq) = frames.get(1).and_then(|f| kv_events::decode_seq(f).ok()) else {
        tracing::warn!("worker {url} rank {rank}: KV event message without a sequence number");
        return;
    };
    let expected = kv.ranks.borrow()[rank].next_seq;
    if let Some(expected) = expected {
        if seq < expected {
            return;
        }
        if seq > expected {
            let filled = match &sub.replay {
                Some(replay) => fill_gap(kv, rank, ctx, replay, &sub.topic, expected, seq).await,
                None => Err("the engine has no replay socket".to_string()),
            };
            let mut ranks = kv.ranks.borrow_mut();
            let r = &mut ranks[rank];
            match filled {
                Ok(()) => r.gaps_filled += 1,
                Err(why) => {
                    tracing::warn!(
                        "worker {url} rank {rank}: KV event batches {expected}..{seq} lost ({why}); routing by load for this rank"
                    );
                    r.index.clear();
                    r.exact = false;
                    r.gaps_lost += 1;
                    if let Some(forward) = &kv.forward {
                        forward.lost(rank);
                    }
                }
            }
        }
    }
    if let Some(payload) = frames.get(2) {
        apply(kv, rank, seq, payload, url);
    }
}

fn apply(kv: &KvRanks, rank: usize, seq: i64, payload: &[u8], url: &str) {
    let mut ranks = kv.ranks.borrow_mut();
    let r = &mut ranks[rank];
    if r.next_seq.is_some_and(|next| seq < next) {
        return;
    }
    r.next_seq = Some(seq + 1);
    let decoded = kv_events::decode_batch(payload);
    if let Some(forward) = &kv.forward {
        match decoded {
            Ok(_) => forward.batch(rank, payload),
            Err(_) => forward.lost(rank),
        }
    }
    match decoded {
        Ok(batch) => {
            r.batches += 1;
            for event in &batch.events {
                if matches!(event, KvEvent::AllCleared) {
                    // A cleared cache is a known state again.
                    r.exact = true;
                }
                if r.exact {
                    r.index.apply(event);
                }
            }
        }
        Err(e) => {
            // A batch we cannot read may hold removals: the index can no longer be trusted.
            tracing::warn!("worker {url} rank {rank}: undecodable KV event batch {seq}: {e}");
            r.index.clear();
            r.exact = false;
        }
    }
}

/// Asks the rank's replay socket for the batches from `from` and applies them; Ok once the
/// batches up to `until` (exclusive) were all applied.
async fn fill_gap(
    kv: &KvRanks,
    rank: usize,
    ctx: &zmq::Context,
    replay: &str,
    topic: &str,
    from: i64,
    until: i64,
) -> Result<(), String> {
    let socket = open(ctx, zmq::DEALER, replay, None).map_err(|e| format!("cannot reach {replay}: {e}"))?;
    socket.send_multipart(&[b"", &from.to_be_bytes()]).map_err(|e| format!("cannot ask {replay}: {e}"))?;
    let mut frames = Vec::new();
    let replayed = async {
        loop {
            socket.readable().await.map_err(|e| e.to_string())?;
            while socket.try_recv_multipart(&mut frames).map_err(|e| e.to_string())? {
                // [empty delimiter, topic, seq, payload]
                let seq = frames.get(2).and_then(|f| kv_events::decode_seq(f).ok()).ok_or("a malformed replay")?;
                if seq == REPLAY_END_SEQ {
                    return Ok::<(), String>(());
                }
                if frames.get(1).is_some_and(|t| &t[..] == topic.as_bytes()) {
                    let next = kv.ranks.borrow()[rank].next_seq.unwrap_or(from);
                    if seq > next {
                        // The engine's buffer starts after the gap: batch `next` is gone.
                        return Err(format!("the replay starts at {seq}: the engine no longer buffers {next}"));
                    }
                    if let Some(payload) = frames.get(3) {
                        apply(kv, rank, seq, payload, replay);
                    }
                }
            }
        }
    };
    monoio::select! {
        r = replayed => r?,
        _ = monoio::time::sleep(Duration::from_millis(limits::kv_replay_timeout_ms)) => {
            return Err(format!("no complete replay within {} ms", limits::kv_replay_timeout_ms));
        }
    }
    let next = kv.ranks.borrow()[rank].next_seq.unwrap_or(from);
    if next < until {
        return Err(format!("the replay ended at {next}: the engine no longer buffers those batches"));
    }
    Ok(())
}

fn open(ctx: &zmq::Context, kind: zmq::SocketType, endpoint: &str, topic: Option<&str>) -> Result<AsyncSocket, String> {
    let socket = ctx.socket(kind).map_err(|e| e.to_string())?;
    socket.set_linger(0).map_err(|e| e.to_string())?;
    if let Some(topic) = topic {
        socket.set_subscribe(topic.as_bytes()).map_err(|e| e.to_string())?;
    }
    socket.connect(endpoint).map_err(|e| e.to_string())?;
    AsyncSocket::attach(socket).map_err(|e| e.to_string())
}

#[cfg(test)]
mod tests {
    use super::connect_address;

    #[test]
    fn wildcard_binds_are_dialled_on_the_engines_host() {
        let cases = [
            ("tcp://*:5557", "127.0.0.1", "tcp://127.0.0.1:5557"),
            ("tcp://0.0.0.0:5558", "10.0.0.7", "tcp://10.0.0.7:5558"),
            ("tcp://[::]:5559", "127.0.0.1", "tcp://127.0.0.1:5559"),
            ("tcp://10.1.2.3:5557", "127.0.0.1", "tcp://10.1.2.3:5557"),
            ("ipc:///tmp/kv", "127.0.0.1", "ipc:///tmp/kv"),
        ];
        for (bound, host, want) in cases {
            assert_eq!(connect_address(bound, host), want);
        }
        // vLLM binds only wildcard, ipc and inproc addresses; it dials any other.
        let binds = [
            ("tcp://*:5557", true),
            ("tcp://[::]:5557", true),
            ("ipc:///tmp/kv", true),
            ("tcp://10.0.0.1:5557", false),
        ];
        for (endpoint, want) in binds {
            assert_eq!(super::publisher_binds(endpoint), want, "{endpoint}");
        }
    }
}
