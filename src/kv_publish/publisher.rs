//! The host's KV-event publisher: a thread of its own (its sockets' sends and replays never
//! share a core's turn with requests), fed by shard 0 through `forward`.
//!
//! What a subscriber sees is what vLLM's `ZmqEventPublisher` sends: `[topic, seq, batch]` on PUB,
//! seq an 8-byte big-endian counter from 0 (the host's own: one per host, contiguous over all
//! ranks); a replay request `[8-byte start seq]` on the ROUTER is answered with every buffered
//! batch from there as `[topic, seq, batch]`, then `["", -1, ""]`.

use std::collections::{HashMap, VecDeque};
use std::time::{SystemTime, UNIX_EPOCH};

use super::endpoints::PublishEndpoints;
use super::forward;
use super::{HANDOVER_ADDRESS, KIND_BATCH, KIND_LOST};
use crate::limits;
use shardgate_wire::vllm::kv_events::{self, REPLAY_END_SEQ};

/// Binds the stream's sockets and starts the thread that serves them.
pub fn start(ctx: &zmq::Context, at: &PublishEndpoints) -> Result<(), String> {
    let open = |kind, endpoint: &str, connect: bool, flag: &str| {
        let socket = ctx.socket(kind).map_err(|e| e.to_string())?;
        socket.set_linger(0).map_err(|e| e.to_string())?;
        // A replay of the whole buffer fits in one go (a ROUTER drops what is over its mark);
        // the PUB drops past it for a subscriber that lags that far, which its seq then shows.
        socket.set_sndhwm(limits::kv_publish_replay_batches as i32 + 1).map_err(|e| e.to_string())?;
        let (verb, done) =
            if connect { ("connect to", socket.connect(endpoint)) } else { ("bind", socket.bind(endpoint)) };
        done.map_err(|e| format!("cannot {verb} {endpoint} ({flag}): {e}"))?;
        Ok::<_, String>(socket)
    };
    let handover = ctx.socket(zmq::PULL).map_err(|e| e.to_string())?;
    handover.set_rcvhwm(limits::kv_publish_handover_batches_max).map_err(|e| e.to_string())?;
    handover.bind(HANDOVER_ADDRESS).map_err(|e| e.to_string())?;
    let flag = if at.connect { "--kv-events-publish-connect" } else { "--kv-events-publish-endpoint" };
    let publisher = open(zmq::PUB, &at.endpoint, at.connect, flag)?;
    let replay = match &at.replay_endpoint {
        Some(r) => Some(open(zmq::ROUTER, r, false, "--kv-events-replay-endpoint")?),
        None => None,
    };
    tracing::info!(
        "publishing the host's KV events {} {} (replay: {}, topic {:?})",
        if at.connect { "to a subscriber at" } else { "at" },
        at.endpoint,
        at.replay_endpoint.as_deref().unwrap_or("none"),
        at.topic
    );
    let mut host = Host {
        publisher,
        topic: at.topic.clone().into_bytes(),
        next_seq: 0,
        buffer: VecDeque::new(),
        ranks: HashMap::new(),
    };
    std::thread::Builder::new()
        .name("kv-publisher".into())
        .spawn(move || host.serve(&handover, replay.as_ref()))
        .map_err(|e| e.to_string())?;
    Ok(())
}

struct Host {
    publisher: zmq::Socket,
    topic: Vec<u8>,
    next_seq: i64,
    /// The last `kv_publish_replay_batches` batches, for replay.
    buffer: VecDeque<(i64, Vec<u8>)>,
    /// (worker URL, engine rank) -> its host rank.
    ranks: HashMap<(String, u32), HostRank>,
}

struct HostRank {
    /// The `data_parallel_rank` its batches carry on the host stream.
    id: u32,
    /// It published something since its last clear.
    published: bool,
}

impl Host {
    fn serve(&mut self, handover: &zmq::Socket, replay: Option<&zmq::Socket>) {
        loop {
            let mut items = vec![handover.as_poll_item(zmq::POLLIN)];
            items.extend(replay.map(|r| r.as_poll_item(zmq::POLLIN)));
            if let Err(e) = zmq::poll(&mut items, -1) {
                tracing::error!("KV event publisher stopped: {e}");
                return;
            }
            let (handed, asked) = (items[0].is_readable(), items.get(1).is_some_and(|i| i.is_readable()));
            if handed {
                while let Ok(m) = handover.recv_bytes(zmq::DONTWAIT) {
                    self.on_handover(&m);
                }
            }
            if let (true, Some(replay)) = (asked, replay) {
                while let Ok(request) = replay.recv_multipart(zmq::DONTWAIT) {
                    self.answer_replay(replay, &request);
                }
            }
        }
    }

    fn on_handover(&mut self, m: &[u8]) {
        let Some((kind, rank, worker, payload)) = forward::parse(m) else { return };
        let next_id = self.ranks.len() as u32;
        let host_rank = self.ranks.entry((worker.to_string(), rank)).or_insert_with(|| {
            tracing::info!("worker {worker} rank {rank}: its KV events go out as data_parallel_rank {next_id}");
            HostRank { id: next_id, published: false }
        });
        let id = host_rank.id;
        let mut batch = Vec::new();
        match kind {
            KIND_BATCH => match kv_events::with_rank(payload, id, &mut batch) {
                Ok(()) => host_rank.published = true,
                Err(e) => {
                    // A batch that cannot be relabelled may hold removals: the rank is cleared.
                    tracing::warn!("worker {worker} rank {rank}: KV event batch not re-published: {e}");
                    if !std::mem::take(&mut host_rank.published) {
                        return;
                    }
                    kv_events::encode_cleared(now(), id, &mut batch);
                }
            },
            KIND_LOST if std::mem::take(&mut host_rank.published) => {
                tracing::warn!("worker {worker} rank {rank}: KV event batches lost; published AllBlocksCleared for data_parallel_rank {id}");
                kv_events::encode_cleared(now(), id, &mut batch);
            }
            _ => return,
        }
        self.publish(batch);
    }

    fn publish(&mut self, batch: Vec<u8>) {
        let seq = self.next_seq;
        self.next_seq += 1;
        // A PUB socket drops for a subscriber that is over its mark; the seq tells it so.
        let frames: [&[u8]; 3] = [&self.topic, &seq.to_be_bytes(), &batch];
        if let Err(e) = self.publisher.send_multipart(frames, zmq::DONTWAIT) {
            tracing::warn!("KV event batch {seq} not sent: {e}");
        }
        if self.buffer.len() == limits::kv_publish_replay_batches {
            self.buffer.pop_front();
        }
        self.buffer.push_back((seq, batch));
    }

    /// vLLM's replay exchange: `[client, "", start seq]` in; each buffered batch from the start
    /// and then the end marker out.
    fn answer_replay(&self, replay: &zmq::Socket, request: &[Vec<u8>]) {
        let start = match request {
            [client, empty, start] if empty.is_empty() => {
                start.as_slice().try_into().ok().map(|s: [u8; 8]| (client, i64::from_be_bytes(s)))
            }
            _ => None,
        };
        let Some((client, start)) = start else {
            tracing::warn!("KV event replay: a request of {} frames, not [empty, 8-byte sequence]", request.len());
            return;
        };
        for (seq, batch) in self.buffer.iter().filter(|(seq, _)| *seq >= start) {
            let frames: [&[u8]; 5] = [client, b"", &self.topic, &seq.to_be_bytes(), batch];
            if let Err(e) = replay.send_multipart(frames, zmq::DONTWAIT) {
                tracing::warn!("KV event replay from {start}: {e}");
                return;
            }
        }
        let end: [&[u8]; 5] = [client, b"", b"", &REPLAY_END_SEQ.to_be_bytes(), b""];
        if let Err(e) = replay.send_multipart(end, zmq::DONTWAIT) {
            tracing::warn!("KV event replay from {start}: {e}");
        }
    }
}

fn now() -> f64 {
    SystemTime::now().duration_since(UNIX_EPOCH).map_or(0.0, |d| d.as_secs_f64())
}

#[cfg(test)]
mod tests {
    use super::*;
    use shardgate_wire::vllm::kv_events::{decode_batch, KvEvent};

    fn host(ctx: &zmq::Context) -> Host {
        let publisher = ctx.socket(zmq::PUB).unwrap();
        publisher.bind("inproc://test-host-pub").unwrap();
        Host { publisher, topic: b"kv".to_vec(), next_seq: 0, buffer: VecDeque::new(), ranks: HashMap::new() }
    }

    /// (seq, data_parallel_rank, whether the batch is the engine's (its ts 1.0) or a clear the
    /// host made)
    type Published = (i64, Option<u32>, bool);

    fn published(host: &Host) -> Vec<Published> {
        let view = |(seq, b): &(i64, Vec<u8>)| {
            let batch = decode_batch(b).unwrap();
            let engines = batch.ts == 1.0;
            assert!(engines || batch.events == vec![KvEvent::AllCleared]);
            (*seq, batch.data_parallel_rank, engines)
        };
        host.buffer.iter().map(view).collect()
    }

    #[test]
    fn one_sequence_host_ranks_and_a_clear_only_for_what_was_said() {
        let ctx = zmq::Context::new();
        let mut host = host(&ctx);
        let mut engine_batch = Vec::new();
        kv_events::encode_cleared(1.0, 7, &mut engine_batch);
        let garbage = b"\x93\x01".to_vec();
        // (hand-over kind, worker, engine rank, payload, what the host stream holds after it)
        type Step<'a> = (u8, &'a str, u32, &'a [u8], &'a [Published]);
        let steps: [Step; 10] = [
            (KIND_LOST, "w1", 0, b"", &[]),
            (KIND_LOST, "w1", 1, b"", &[]),
            (KIND_BATCH, "w1", 1, &engine_batch, &[(0, Some(1), true)]),
            (KIND_BATCH, "w2", 0, &engine_batch, &[(1, Some(2), true)]),
            (KIND_LOST, "w1", 1, b"", &[(2, Some(1), false)]),
            (KIND_LOST, "w1", 1, b"", &[]),
            (KIND_BATCH, "w1", 0, &garbage, &[]),
            (KIND_BATCH, "w2", 0, &garbage, &[(3, Some(2), false)]),
            (KIND_BATCH, "w1", 1, &engine_batch, &[(4, Some(1), true)]),
            (b'?', "w1", 1, b"", &[]),
        ];
        let (mut m, mut want) = (Vec::new(), Vec::new());
        for (kind, worker, rank, payload, added) in steps {
            forward::encode(kind, rank, worker, payload, &mut m);
            host.on_handover(&m);
            want.extend_from_slice(added);
            assert_eq!(published(&host), want, "after {} {worker} {rank}", kind as char);
        }
        host.on_handover(&m[..3]);
        assert_eq!(host.next_seq, 5);

        // vLLM's replay exchange, over real sockets.
        let router = ctx.socket(zmq::ROUTER).unwrap();
        router.bind("inproc://test-host-replay").unwrap();
        let dealer = ctx.socket(zmq::DEALER).unwrap();
        dealer.connect("inproc://test-host-replay").unwrap();
        for (start, seqs) in [(0i64, vec![0, 1, 2, 3, 4]), (3, vec![3, 4]), (5, vec![])] {
            dealer.send_multipart([&b""[..], &start.to_be_bytes()], 0).unwrap();
            host.answer_replay(&router, &router.recv_multipart(0).unwrap());
            let mut got = Vec::new();
            loop {
                let frames = dealer.recv_multipart(0).unwrap();
                let seq = kv_events::decode_seq(&frames[2]).unwrap();
                if seq == REPLAY_END_SEQ {
                    assert_eq!(frames, [&b""[..], b"", &seq.to_be_bytes(), b""]);
                    break;
                }
                assert_eq!(frames[1], b"kv");
                assert_eq!(frames[3], host.buffer[seq as usize].1);
                got.push(seq);
            }
            assert_eq!(got, seqs, "replay from {start}");
        }
        // A malformed request gets no answer, and the socket serves the next one.
        dealer.send_multipart([&b""[..], b"short"], 0).unwrap();
        host.answer_replay(&router, &router.recv_multipart(0).unwrap());
        assert!(dealer.poll(zmq::POLLIN, 0).unwrap() == 0);
    }
}
