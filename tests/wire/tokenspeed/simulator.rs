//! The simulator in TokenSpeed mode, driven through the gateway-side codec over real sockets:
//! handshake order and identities under DP with an index base, stream cadences, EOS and stop
//! tokens kept in the output, silent client aborts, the 300 s abort memory, engine-side aborts,
//! sampled-token logprobs, dropped messages, and what `--record` writes.

use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use serde_json::Value;
use shardgate_wire::tokenspeed::finish::{RequestFinish, REFUSED};
use shardgate_wire::tokenspeed::handshake::{decode_registration, decode_status, encode_init};
use shardgate_wire::tokenspeed::output::decode_batch;
use shardgate_wire::tokenspeed::request::{encode_abort, encode_add, encode_ping};
use shardgate_wire::tokenspeed::{ENGINE_CORE_DEAD, REQUEST_ABORT, REQUEST_ADD};
use shardgate_wire::{FinishReason, RequestError, SamplingParams, StopReason, TokenEvent};

use super::request;
use super::sim_bin::sim_binary;

struct Sim(Child);

impl Drop for Sim {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

struct Client {
    _ctx: zmq::Context,
    handshake: zmq::Socket,
    input: zmq::Socket,
    output: zmq::Socket,
    handshake_addr: String,
    init: Vec<u8>,
    dir: std::path::PathBuf,
    /// Whether batches must carry a load snapshot (not with `--no-load-snapshot`).
    snapshot: std::cell::Cell<bool>,
}

impl Client {
    fn bind(name: &str) -> Client {
        let dir = std::env::temp_dir().join(format!("sg-ts-{}-{name}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        let ctx = zmq::Context::new();
        let handshake = ctx.socket(zmq::ROUTER).unwrap();
        handshake.bind("tcp://127.0.0.1:*").unwrap();
        let handshake_addr = handshake.get_last_endpoint().unwrap().unwrap();
        let input = ctx.socket(zmq::ROUTER).unwrap();
        input.set_router_mandatory(true).unwrap();
        let (i, o) = (format!("ipc://{}/e-in.sock", dir.display()), format!("ipc://{}/e-out.sock", dir.display()));
        input.bind(&i).unwrap();
        let output = ctx.socket(zmq::PULL).unwrap();
        output.bind(&o).unwrap();
        let mut init = Vec::new();
        encode_init(&i, &o, &mut init);
        Client { _ctx: ctx, handshake, input, output, handshake_addr, init, dir, snapshot: true.into() }
    }

    fn spawn(&self, extra: &[&str]) -> Sim {
        self.snapshot.set(!extra.contains(&"--no-load-snapshot"));
        let log = std::fs::File::create(self.dir.join("sim.log")).unwrap();
        let child = Command::new(sim_binary())
            .args(["--backend", "tokenspeed", "--handshake", &self.handshake_addr, "--itl-ms", "2"])
            .args(["--ttft-ms", "5", "--record"])
            .arg(self.dir.join("record.jsonl"))
            .args(extra)
            .stdout(Stdio::null())
            .stderr(log)
            .spawn()
            .unwrap();
        Sim(child)
    }

    fn recv(socket: &zmq::Socket, ms: i64) -> Option<Vec<Vec<u8>>> {
        if socket.poll(zmq::POLLIN, ms).unwrap() == 0 {
            return None;
        }
        Some(socket.recv_multipart(0).unwrap())
    }

    /// Answers every HELLO with INIT; returns the identities registered, in rank order.
    fn handshake(&self, engines: usize) -> Vec<[u8; 2]> {
        let mut hellos = Vec::new();
        let mut readies = 0;
        let mut registered = Vec::new();
        let deadline = Instant::now() + Duration::from_secs(10);
        while readies < engines || registered.len() < engines {
            assert!(Instant::now() < deadline, "handshake incomplete; sim log:\n{}", self.log());
            if let Some(frames) = Self::recv(&self.handshake, 10) {
                let [identity, payload] = frames.as_slice() else { panic!("{} frames", frames.len()) };
                let status = decode_status(payload).unwrap();
                assert!(status.local && status.headless);
                match status.status.as_str() {
                    "HELLO" => {
                        hellos.push([identity[0], identity[1]]);
                        self.handshake.send_multipart([identity.as_slice(), &self.init], 0).unwrap();
                    }
                    "READY" => readies += 1,
                    other => panic!("{other}"),
                }
            }
            if let Some(frames) = Self::recv(&self.input, 0) {
                let reg = decode_registration(&frames[1]).unwrap();
                assert!(reg.is_tokenspeed());
                registered.push(([frames[0][0], frames[0][1]], reg));
            }
        }
        registered.sort_by_key(|(id, _)| u16::from_le_bytes(*id));
        for (rank, (_, reg)) in registered.iter().enumerate() {
            assert_eq!((reg.data_parallel_rank, reg.data_parallel_size), (rank as u32, engines as u32));
            assert_eq!(reg.prefix_granularity, 16);
        }
        hellos.sort();
        let ids: Vec<[u8; 2]> = registered.into_iter().map(|(id, _)| id).collect();
        assert_eq!(hellos, ids);
        ids
    }

    fn add(&self, identity: [u8; 2], id: &str, sampling: SamplingParams, stream: bool) {
        let mut payload = Vec::new();
        encode_add(&request(id, vec![1, 2, 3], sampling), stream, &mut payload).unwrap();
        self.input.send_multipart([&identity[..], &[REQUEST_ADD], &payload], 0).unwrap();
    }

    fn abort(&self, identity: [u8; 2], ids: &[&str]) {
        let mut payload = Vec::new();
        encode_abort(ids, &mut payload);
        self.input.send_multipart([&identity[..], &[REQUEST_ABORT], &payload], 0).unwrap();
    }

    /// Frames (engine index, events) for `id` until its finish, or until `quiet_ms` pass
    /// without any frame.
    fn collect(&self, id: &str, quiet_ms: i64) -> Vec<(u32, TokenEvent)> {
        self.collect_up_to(id, quiet_ms, usize::MAX)
    }

    fn collect_up_to(&self, id: &str, quiet_ms: i64, max: usize) -> Vec<(u32, TokenEvent)> {
        let mut got = Vec::new();
        while got.len() < max {
            let Some(frames) = Self::recv(&self.output, quiet_ms) else { break };
            assert_ne!(frames[0], ENGINE_CORE_DEAD);
            let b = decode_batch(&frames[0]).unwrap();
            assert_eq!(b.load.is_some(), self.snapshot.get(), "a load snapshot unless --no-load-snapshot");
            if let Some(load) = b.load {
                assert!(load.kv_total_pages > 0 && load.kv_active_pages <= load.kv_total_pages);
            }
            for (rid, ev) in b.outputs {
                if rid == id {
                    let done = ev.finish.is_some();
                    got.push((b.engine_index, ev));
                    if done {
                        return got;
                    }
                }
            }
        }
        got
    }

    fn records(&self) -> Vec<Value> {
        std::fs::read_to_string(self.dir.join("record.jsonl"))
            .unwrap_or_default()
            .lines()
            .map(|l| serde_json::from_str(l).unwrap())
            .collect()
    }

    fn log(&self) -> String {
        std::fs::read_to_string(self.dir.join("sim.log")).unwrap_or_default()
    }
}

impl Drop for Client {
    fn drop(&mut self) {
        if !std::thread::panicking() {
            let _ = std::fs::remove_dir_all(&self.dir);
        }
    }
}

fn tokens(events: &[(u32, TokenEvent)]) -> Vec<u32> {
    events.iter().flat_map(|(_, e)| e.token_ids.clone()).collect()
}

#[test]
fn simulator_speaks_tokenspeed() {
    let c = Client::bind("speaks");
    let _sim = c.spawn(&["--data-parallel-size", "2", "--zmq-engine-index", "4", "--output-len", "6"]);
    let ids = c.handshake(2);
    assert_eq!(ids, [[4, 0], [5, 0]], "identity = --zmq-engine-index + rank, little endian");
    let (r0, r1) = (ids[0], ids[1]);

    // Streamed, ends at max_new_tokens: one token per frame, from engine index 4.
    c.add(r0, "a", SamplingParams { max_tokens: 4, ..Default::default() }, true);
    let a = c.collect("a", 2000);
    assert_eq!(a.len(), 4);
    assert!(a.iter().all(|(idx, e)| *idx == 4 && e.token_ids.len() == 1));
    assert_eq!(a[3].1.finish, Some(FinishReason::Length));
    let plan = tokens(&a);

    // Not streamed: frames at token 1, 50 and the finish, as deltas.
    let long = SamplingParams { max_tokens: 60, ignore_eos: true, ..Default::default() };
    c.add(r0, "b", long, false);
    let b = c.collect("b", 2000);
    assert_eq!(b.iter().map(|(_, e)| e.token_ids.len()).collect::<Vec<_>>(), [1, 49, 10]);

    // A stop token id ends it with `stop`, the stop token kept as the last token.
    let stop = SamplingParams { max_tokens: 50, stop_token_ids: vec![plan[2]], ..Default::default() };
    c.add(r1, "c", stop.clone(), true);
    let mut cev = c.collect("c", 2000);
    assert!(cev.iter().all(|(idx, _)| *idx == 5));
    assert_eq!(tokens(&cev), plan[..3]);
    let mut fin = RequestFinish::new(&stop);
    let last = cev.last_mut().unwrap();
    assert!(!fin.apply(&mut last.1));
    assert_eq!(
        (last.1.finish, last.1.stop_reason.clone()),
        (Some(FinishReason::Stop), Some(StopReason::TokenId(plan[2])))
    );

    // A client abort ends a running request without a frame.
    c.add(r0, "d", SamplingParams { max_tokens: 5000, ignore_eos: true, ..Default::default() }, true);
    assert_eq!(c.collect_up_to("d", 2000, 1).len(), 1, "a first frame");
    c.abort(r0, &["d"]);
    std::thread::sleep(Duration::from_millis(30));
    assert!(c.collect("d", 200).iter().all(|(_, e)| e.finish.is_none()), "no final frame after ABORT");

    // An abort ahead of its request: the request is dropped without any output.
    c.abort(r0, &["e"]);
    c.add(r0, "e", SamplingParams { max_tokens: 3, ..Default::default() }, true);
    assert!(c.collect("e", 300).is_empty());

    // A request the engine's own checks refuse: one empty `abort` frame, an error for us.
    let refused = SamplingParams { top_p: 1.5, ..Default::default() };
    c.add(r0, "f", refused.clone(), true);
    let mut f = c.collect("f", 2000);
    assert_eq!(f.len(), 1);
    assert_eq!((f[0].1.finish, f[0].1.token_ids.len()), (Some(FinishReason::Abort), 0));
    RequestFinish::new(&refused).apply(&mut f[0].1);
    assert_eq!(f[0].1.error, Some(RequestError::fatal(REFUSED)));

    // Sampled-token logprobs, one per token.
    c.add(r1, "g", SamplingParams { max_tokens: 3, logprobs: Some(0), ..Default::default() }, true);
    for (_, e) in c.collect("g", 2000) {
        let rows = e.logprobs.unwrap().rows;
        assert_eq!(rows.iter().map(|r| r.token_id).collect::<Vec<_>>(), e.token_ids);
    }

    // Dropped without an answer: an unknown type byte and a truncated ADD; the ping is a
    // no-op; the engine still serves afterwards.
    c.input.send_multipart([&r0[..], &[0x03], &[0x90]], 0).unwrap();
    c.input.send_multipart([&r0[..], &[REQUEST_ADD], &[0x9b, 0xb9]], 0).unwrap();
    let mut ping = Vec::new();
    encode_ping(&mut ping);
    c.input.send_multipart([&r0[..], &[REQUEST_ABORT], &ping], 0).unwrap();
    c.add(r0, "h", SamplingParams { max_tokens: 2, ..Default::default() }, true);
    assert_eq!(c.collect("h", 2000).len(), 2);

    let records = c.records();
    let adds: Vec<&Value> = records.iter().filter(|r| r["type"] == "add").collect();
    assert_eq!(adds.len(), 8);
    let a_rec = adds.iter().find(|r| r["id"] == "a").unwrap();
    assert_eq!(
        (&a_rec["rank"], &a_rec["engine_index"], &a_rec["backend"]),
        (&Value::from(0), &Value::from(4), &Value::from("tokenspeed"))
    );
    assert_eq!(
        (&a_rec["max_tokens"], &a_rec["n"], &a_rec["is_normalized"]),
        (&Value::from(4), &Value::from(1), &Value::from(false))
    );
    assert_eq!(adds.iter().find(|r| r["id"] == "c").unwrap()["rank"], 1);
    assert_eq!(adds.iter().find(|r| r["id"] == "c").unwrap()["stop_token_ids"], serde_json::json!([plan[2]]));
    assert_eq!(records.iter().filter(|r| r["type"] == "invalid").count(), 2);
    assert!(records.iter().any(|r| r["type"] == "abort" && r["ids"] == serde_json::json!(["d"])));
}

/// With the model's files the engine knows EOS on its own: the request carries no EOS, the
/// output ends with it and `stop`, and no stop_reason is named. `die` sends the sentinel, and
/// `--no-load-snapshot` leaves the snapshot out.
#[test]
fn simulator_stops_on_the_models_eos_and_dies_with_the_sentinel() {
    let c = Client::bind("eos");
    let model = shardgate_text::demo_model::ensure().unwrap();
    let model = model.display().to_string();
    let _sim = c.spawn(&["--model-path", &model, "--output-len", "3", "--fault", "die@2", "--no-load-snapshot"]);
    let [r0] = c.handshake(1)[..] else { panic!() };
    let eos = SamplingParams { max_tokens: 100, stop_token_ids: vec![151643], ..Default::default() };
    c.add(r0, "a", eos.clone(), true);
    let mut a = c.collect("a", 3000);
    let all = tokens(&a);
    assert_eq!(all.len(), 4, "three planned tokens, then EOS");
    assert_eq!(all[3], 151645, "Qwen3's <|im_end|>, kept in the output");
    let last = a.last_mut().unwrap();
    assert_eq!(last.1.finish, Some(FinishReason::Stop));
    RequestFinish::new(&SamplingParams { eos_token_id: Some(151645), ..eos }).apply(&mut last.1);
    assert_eq!(last.1.stop_reason, None, "EOS names no stop reason, as in vLLM");
    c.add(r0, "b", SamplingParams::default(), true);
    let frames = Client::recv(&c.output, 3000).expect("the death sentinel");
    assert_eq!(frames, [ENGINE_CORE_DEAD.to_vec()]);
}
