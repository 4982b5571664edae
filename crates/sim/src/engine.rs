//! The simulated engine: handshake as a headless vLLM or TokenSpeed engine, then the scheduler
//! loop.

use std::collections::{HashMap, HashSet, VecDeque};
use std::sync::Arc;
use std::time::{Duration, Instant};

use shardgate_text::tokenizer::Tokenizer;
use shardgate_wire::tokenspeed as ts_wire;
use shardgate_wire::vllm::handshake::{
    decode_init, encode_kv_events_config, encode_registration, encode_status, EngineRegistration, KvEventsEndpoints,
};
use shardgate_wire::vllm::{ENGINE_CORE_DEAD, REQUEST_ABORT, REQUEST_ADD, REQUEST_START_DP_WAVE, REQUEST_UTILITY};
use shardgate_wire::RequestError;

use crate::error::{ArgError, EngineError, HandshakeError};
use crate::lockstep::Lockstep;
use crate::script::{self, ScriptLine};
use crate::vllm_wire::{self as wire, AddRequest, Load, StepOutput};
use crate::{Args, Backend, FaultKind};

mod tokenspeed;
use tokenspeed::{engine_eos_ids, handshake_tokenspeed};

/// vLLM's finish codes.
const FINISH_STOP: u8 = 0;
const FINISH_LENGTH: u8 = 1;
const FINISH_ERROR: u8 = 3;
/// Prefix-cache block size (tokens) for the simulated cache hits.
const BLOCK_TOKENS: usize = 16;
/// KV capacity in tokens (for the reported usage).
const KV_CAPACITY_TOKENS: f64 = 262_144.0;
/// The vLLM release whose wire the simulator speaks, reported at registration.
const SPOKEN_VLLM_VERSION: &str = "0.33.0";
/// The per-step token budget reported at registration (vLLM's default for a GPU).
const MAX_NUM_BATCHED_TOKENS: u32 = 8192;
/// The version a simulated TokenSpeed engine reports (the prefix is what identifies one).
const TOKENSPEED_VERSION: &str = "tokenspeed-sim";

/// One request's output in a step: (running index, new tokens, finish).
type StepItem = (usize, Vec<u32>, Option<(u8, Option<u32>)>);

struct Running {
    req: AddRequest,
    plan: Vec<u32>,
    emitted: usize,
    first_token_at: Instant,
    cached_tokens: u32,
    sent_first: bool,
    /// TokenSpeed: generated tokens (and their logprobs) not yet in a frame, and the finish.
    unsent: Vec<u32>,
    unsent_logprobs: Vec<f64>,
    finish: Option<&'static str>,
}

struct Sockets {
    inputs: Vec<zmq::Socket>,
    outputs: Vec<zmq::Socket>,
}

pub fn run(args: Args) -> Result<(), EngineError> {
    let handshake_addr = handshake_address(&args)?;
    if args.zmq_engine_index as u32 + args.data_parallel_size as u32 - 1 > u16::MAX as u32 {
        return Err(ArgError::EngineIndexRange.into());
    }
    let tokenizer = match &args.model_path {
        Some(dir) => Some(Tokenizer::from_file(&dir.join("tokenizer.json"))?),
        None => None,
    };
    let script = match &args.script {
        Some(p) => script::load(p)?,
        None => Vec::new(),
    };
    if !script.is_empty() && tokenizer.is_none() {
        return Err(ArgError::ScriptWithoutModel.into());
    }
    let eos_ids = Arc::new(engine_eos_ids(&args));
    let ctx = zmq::Context::new();
    let tokenizer = tokenizer.map(Arc::new);
    let script = Arc::new(script);
    let lockstep = args.moe.then(|| Arc::new(Lockstep::new(args.data_parallel_size as usize)));
    // One thread per data-parallel rank; the headless launcher exits when any engine exits.
    let ranks: Vec<_> = (0..args.data_parallel_size)
        .map(|rank| {
            let (ctx, args, tokenizer, script, addr, eos_ids) =
                (ctx.clone(), args.clone(), tokenizer.clone(), script.clone(), handshake_addr.clone(), eos_ids.clone());
            let lockstep = lockstep.clone();
            std::thread::Builder::new()
                .name(format!("rank-{rank}"))
                .spawn(move || -> Result<(), EngineError> {
                    std::thread::sleep(Duration::from_secs(args.slow_start_s));
                    let sockets = match args.backend {
                        Backend::Vllm => handshake(&ctx, &addr, &args, rank)?,
                        Backend::Tokenspeed => handshake_tokenspeed(&ctx, &addr, &args, rank)?,
                    };
                    tracing::info!("rank {rank} registered with the gateway at {addr}; serving");
                    let record = match &args.record {
                        Some(p) => Some(
                            std::fs::OpenOptions::new()
                                .create(true)
                                .append(true)
                                .open(p)
                                .map_err(|source| EngineError::OpenRecord { path: p.clone(), source })?,
                        ),
                        None => None,
                    };
                    let mut sim = Sim::new(args, rank, tokenizer, script, sockets, eos_ids);
                    sim.record = record;
                    sim.lockstep = lockstep;
                    sim.serve()
                })
                .map_err(|source| EngineError::SpawnRank { rank, source })
        })
        .collect::<Result<_, _>>()?;
    for r in ranks {
        match r.join() {
            Ok(Ok(())) => {}
            Ok(Err(e)) => return Err(e),
            Err(_) => return Err(EngineError::RankPanicked),
        }
    }
    Ok(())
}

fn handshake_address(args: &Args) -> Result<String, ArgError> {
    if let Some(h) = &args.handshake {
        return Ok(h.clone());
    }
    let Some(url) = args.worker_url.as_deref() else {
        return match args.backend {
            // TokenSpeed without --data-parallel-address/--data-parallel-rpc-port.
            Backend::Tokenspeed => Ok(ts_wire::DEFAULT_HANDSHAKE_ADDRESS.into()),
            Backend::Vllm => Err(ArgError::NoHandshake),
        };
    };
    // A `tcp://` worker's URL is its handshake address, as the gateway binds it.
    if url.starts_with("tcp://") {
        return Ok(url.to_string());
    }
    let path = url.strip_prefix("ipc://").ok_or(ArgError::WorkerUrl)?;
    Ok(format!("tcp://127.0.0.1:{}", shardgate_wire::sockdir::derived_handshake_port(path)))
}

/// HELLO → INIT → connect and register on every input → READY, as `vllm serve --headless`.
fn handshake(ctx: &zmq::Context, addr: &str, args: &Args, rank: u16) -> Result<Sockets, HandshakeError> {
    let engine_index = args.zmq_engine_index + rank;
    let identity = engine_index.to_le_bytes();
    let hs = ctx.socket(zmq::DEALER)?;
    hs.set_identity(&identity)?;
    hs.set_linger(5000)?;
    hs.connect(addr).map_err(|source| HandshakeError::Dial { addr: addr.to_string(), source })?;
    let mut hello = Vec::new();
    encode_status("HELLO", false, true, &mut hello);
    hs.send(&hello, 0)?;
    // A real engine waits 5 minutes for INIT, then dies.
    hs.set_rcvtimeo(300_000)?;
    let init = hs.recv_bytes(0).map_err(|source| HandshakeError::NoInit { addr: addr.to_string(), source })?;
    let addrs = decode_init(&init).map_err(HandshakeError::UndecodableInit)?;
    // vLLM loads the model between INIT and its registration.
    std::thread::sleep(Duration::from_millis(args.load_ms));
    let mut sockets = Sockets { inputs: Vec::new(), outputs: Vec::new() };
    // A one-GPU vLLM 0.33 engine's registration, whole: vLLM's Rust front end and SMG refuse
    // one with a field missing.
    let reg = EngineRegistration {
        max_model_len: args.max_model_len,
        num_gpu_blocks: KV_CAPACITY_TOKENS as u64 / BLOCK_TOKENS as u64,
        block_size: BLOCK_TOKENS as u32,
        dtype: "bfloat16".into(),
        vllm_version: SPOKEN_VLLM_VERSION.into(),
        world_size: 1,
        data_parallel_size: args.data_parallel_size as u32,
        tensor_parallel_size: 1,
        pipeline_parallel_size: 1,
        decode_context_parallel_size: 1,
        data_parallel_rank: engine_index as u32,
        max_num_seqs: args.max_num_seqs as u32,
        max_num_batched_tokens: MAX_NUM_BATCHED_TOKENS,
        instance_id: format!("shardgate-sim-{engine_index}"),
        kv_cache_size_tokens: Some(KV_CAPACITY_TOKENS as u64),
        kv_cache_max_concurrency: Some(KV_CAPACITY_TOKENS / args.max_model_len.max(1) as f64),
        effective_attention_block_size: Some(BLOCK_TOKENS as u32),
        kv_events_config: args.kv_events_endpoint.as_deref().map(|endpoint| {
            encode_kv_events_config(&KvEventsEndpoints {
                endpoint: offset_port(endpoint, engine_index as usize),
                replay_endpoint: args
                    .kv_events_replay_endpoint
                    .as_deref()
                    .map(|r| offset_port(r, engine_index as usize)),
                topic: String::new(),
            })
        }),
        ..Default::default()
    };
    let mut reg_bytes = Vec::new();
    encode_registration(&reg, &mut reg_bytes);
    for a in &addrs.inputs {
        let s = ctx.socket(zmq::DEALER)?;
        s.set_identity(&identity)?;
        s.set_rcvhwm(0)?;
        s.set_sndhwm(0)?;
        s.set_linger(0)?;
        s.connect(a).map_err(|source| HandshakeError::ConnectInput { addr: a.clone(), source })?;
        s.send(&reg_bytes, 0)?;
        sockets.inputs.push(s);
    }
    for a in &addrs.outputs {
        let s = ctx.socket(zmq::PUSH)?;
        s.set_sndhwm(0)?;
        s.set_linger(4000)?;
        s.connect(a).map_err(|source| HandshakeError::ConnectOutput { addr: a.clone(), source })?;
        sockets.outputs.push(s);
    }
    let mut ready = Vec::new();
    encode_status("READY", false, true, &mut ready);
    hs.send(&ready, 0)?;
    Ok(sockets)
}

struct Sim {
    args: Args,
    rank: u16,
    /// `--zmq-engine-index` + rank: the identity value, and the engine index outputs carry.
    engine_index: u32,
    /// TokenSpeed: the EOS ids the engine stops on by itself, primary first.
    eos_ids: Arc<Vec<u32>>,
    /// TokenSpeed: ABORTs for ids the engine did not know, remembered for a while.
    pending_aborts: HashMap<String, Instant>,
    tokenizer: Option<Arc<Tokenizer>>,
    script: Arc<Vec<ScriptLine>>,
    sockets: Sockets,
    waiting: VecDeque<AddRequest>,
    running: Vec<Running>,
    live_ids: HashSet<String>,
    cached_blocks: HashSet<u64>,
    /// Prefix-cache lookups since the last scheduler-stats report.
    prefix_counts: wire::PrefixCounts,
    /// The error the next ADD is answered with (`--fault error@N`).
    fail_next: Option<RequestError>,
    started: Instant,
    step: u64,
    deaf: bool,
    stalled: bool,
    garbage: bool,
    requests_seen: u64,
    /// Faults that fire once a request has been sent some tokens (`--fault KIND@N:T`), by id:
    /// (tokens, kinds).
    token_faults: HashMap<String, (u64, Vec<FaultKind>)>,
    record: Option<std::fs::File>,
    out_buf: Vec<u8>,
    /// MoE: the group's collective, whether this rank is in a running wave, and its wave.
    lockstep: Option<Arc<Lockstep>>,
    engines_running: bool,
    current_wave: u64,
}

impl Sim {
    fn new(
        args: Args,
        rank: u16,
        tokenizer: Option<Arc<Tokenizer>>,
        script: Arc<Vec<ScriptLine>>,
        sockets: Sockets,
        eos_ids: Arc<Vec<u32>>,
    ) -> Self {
        Sim {
            engine_index: args.zmq_engine_index as u32 + rank as u32,
            eos_ids,
            pending_aborts: HashMap::new(),
            args,
            rank,
            tokenizer,
            script,
            sockets,
            waiting: VecDeque::new(),
            running: Vec::new(),
            live_ids: HashSet::new(),
            cached_blocks: HashSet::new(),
            prefix_counts: wire::PrefixCounts::default(),
            fail_next: None,
            started: Instant::now(),
            step: 0,
            deaf: false,
            stalled: false,
            garbage: false,
            requests_seen: 0,
            token_faults: HashMap::new(),
            record: None,
            out_buf: Vec::with_capacity(1 << 16),
            lockstep: None,
            engines_running: false,
            current_wave: 0,
        }
    }

    fn now_s(&self) -> f64 {
        self.started.elapsed().as_secs_f64()
    }

    fn serve(&mut self) -> Result<(), EngineError> {
        let itl_ms =
            self.args.rank_itl_ms.iter().find(|(r, _)| *r == self.rank).map_or(self.args.itl_ms, |(_, ms)| *ms);
        let itl = Duration::from_millis(itl_ms);
        let mut next_step = Instant::now() + itl;
        loop {
            let local_work = !self.running.is_empty() || !self.waiting.is_empty();
            let busy = local_work || self.engines_running;
            let timeout =
                if busy { next_step.saturating_duration_since(Instant::now()) } else { Duration::from_millis(100) };
            self.poll_inputs(timeout)?;
            if Instant::now() >= next_step || !busy {
                if !self.running.is_empty() || !self.waiting.is_empty() {
                    self.run_step()?;
                }
                if busy {
                    self.sync_wave()?;
                }
                next_step = Instant::now() + itl;
            }
        }
    }

    /// MoE: the end-of-step collective (a dummy step when this rank had nothing to run). When
    /// no rank has work the wave ends: report it to client 0 and pause until woken.
    fn sync_wave(&mut self) -> Result<(), EngineError> {
        let Some(lockstep) = self.lockstep.clone() else { return Ok(()) };
        let local = !self.running.is_empty() || !self.waiting.is_empty();
        self.engines_running = lockstep.any_unfinished(local);
        if !self.engines_running {
            tracing::debug!("wave {} finished, pausing", self.current_wave);
            self.out_buf.clear();
            wire::encode_wave_complete(self.engine_index, self.current_wave, self.now_s(), &mut self.out_buf);
            self.send_to(0, false)?;
            self.current_wave += 1;
        }
        Ok(())
    }

    /// START_DP_WAVE: a MoE rank joins the wave unless excluded or already past it; a dense
    /// engine logs it as unknown, as vLLM does.
    fn start_dp_wave(&mut self, payload: &[u8]) -> Result<(), EngineError> {
        let (wave, exclude) = wire::decode_start_dp_wave(payload).map_err(EngineError::StartDpWave)?;
        self.note(serde_json::json!({"type": "start_dp_wave", "wave": wave, "rank": self.rank}));
        if self.lockstep.is_none() {
            tracing::warn!("Unrecognized input request type encountered: {REQUEST_START_DP_WAVE}");
            return Ok(());
        }
        if exclude != Some(self.engine_index.into()) && wave >= self.current_wave {
            self.current_wave = wave;
            self.engines_running = true;
        }
        Ok(())
    }

    /// Reads every input socket until `timeout` passes with nothing to read.
    fn poll_inputs(&mut self, timeout: Duration) -> Result<(), EngineError> {
        if self.deaf {
            std::thread::sleep(timeout);
            return Ok(());
        }
        let ms = timeout.as_millis().min(i64::MAX as u128) as i64;
        let mut items: Vec<zmq::PollItem> = self.sockets.inputs.iter().map(|s| s.as_poll_item(zmq::POLLIN)).collect();
        zmq::poll(&mut items, ms).map_err(EngineError::Poll)?;
        let ready: Vec<usize> = items.iter().enumerate().filter(|(_, i)| i.is_readable()).map(|(k, _)| k).collect();
        drop(items);
        for k in ready {
            while let Ok(frames) = self.sockets.inputs[k].recv_multipart(zmq::DONTWAIT) {
                self.on_input(frames)?;
                if self.deaf {
                    return Ok(());
                }
            }
        }
        Ok(())
    }

    fn on_input(&mut self, frames: Vec<Vec<u8>>) -> Result<(), EngineError> {
        if self.args.backend == Backend::Tokenspeed {
            return self.on_input_tokenspeed(frames);
        }
        let (Some(kind), Some(payload)) = (frames.first().and_then(|f| f.first()), frames.get(1)) else {
            return self.go_deaf("a request without a type byte and payload");
        };
        match *kind {
            REQUEST_ADD => match wire::decode_add(payload, &frames[2..]) {
                Ok(req) => {
                    self.requests_seen += 1;
                    self.note(serde_json::json!({"type": "add", "id": req.request_id, "prompt_len": req.prompt.len(),
                        "max_tokens": req.max_tokens, "min_tokens": req.min_tokens, "seed": req.seed,
                        "temperature": req.temperature, "stop_token_ids": req.stop_token_ids,
                        "eos_token_id": req.eos_token_id, "ignore_eos": req.ignore_eos, "client_index": req.client_index,
                        "rank": self.rank, "structured_outputs": req.structured_outputs,
                        "mm": req.mm.as_ref().map(|m| serde_json::json!({"items": m.items,
                            "placeholder_tokens": m.placeholder_tokens, "embed_tokens": m.embed_tokens,
                            "tensor_bytes": m.tensor_bytes,
                            "hashes": m.hashes, "ranges": m.ranges,
                            "modalities": m.modalities, "keys": m.keys}))}));
                    if self.fire_faults(&req.request_id) {
                        return Ok(());
                    }
                    self.add(req)
                }
                Err(e) => self.go_deaf(&format!("undecodable ADD: {e}")),
            },
            REQUEST_ABORT => {
                let ids = wire::decode_abort(payload).map_err(EngineError::Abort)?;
                self.note(serde_json::json!({"type": "abort", "ids": ids, "rank": self.rank}));
                for id in ids {
                    self.abort(&id);
                }
                Ok(())
            }
            REQUEST_UTILITY => {
                let (client, call_id, method) = wire::decode_utility(payload).map_err(EngineError::Utility)?;
                tracing::debug!("utility call {method}");
                self.note(serde_json::json!({"type": "utility", "method": method, "rank": self.rank}));
                self.out_buf.clear();
                wire::encode_utility_reply(call_id, false, self.now_s(), &mut self.out_buf);
                self.send_to(client, false)
            }
            REQUEST_START_DP_WAVE => self.start_dp_wave(payload),
            other => {
                // vLLM logs and ignores unknown types.
                tracing::warn!("Unrecognized input request type encountered: {other}");
                Ok(())
            }
        }
    }

    fn note(&mut self, v: serde_json::Value) {
        if let Some(f) = &mut self.record {
            use std::io::Write;
            // One write per line: ranks (and other simulators) append to the same file, and
            // O_APPEND keeps only whole writes apart.
            let _ = f.write_all(format!("{v}\n").as_bytes());
        }
    }

    /// Applies the faults scheduled for the request that just arrived (and notes those that
    /// wait for its tokens). True: drop the request.
    pub(crate) fn fire_faults(&mut self, request_id: &str) -> bool {
        let n = self.requests_seen;
        let due = |f: &&crate::Fault| f.at_request == n;
        let later: Vec<(u64, FaultKind)> = self
            .args
            .faults
            .iter()
            .filter(due)
            .filter(|f| f.after_tokens > 0)
            .map(|f| (f.after_tokens, f.kind))
            .collect();
        for (tokens, kind) in later {
            let entry = self.token_faults.entry(request_id.to_string()).or_insert((tokens, Vec::new()));
            entry.0 = entry.0.min(tokens);
            entry.1.push(kind);
        }
        let kinds: Vec<FaultKind> =
            self.args.faults.iter().filter(due).filter(|f| f.after_tokens == 0).map(|f| f.kind).collect();
        let mut drop_request = false;
        for kind in kinds {
            tracing::warn!("fault {kind:?} fires at request {n}");
            drop_request |= self.fire(kind);
        }
        drop_request
    }

    /// The faults waiting for tokens whose request has now been sent that many.
    pub(crate) fn fire_token_faults(&mut self) {
        if self.token_faults.is_empty() {
            return;
        }
        let due: Vec<String> = self
            .running
            .iter()
            .filter(|r| {
                let sent = (r.emitted - r.unsent.len()) as u64;
                self.token_faults.get(&r.req.request_id).is_some_and(|(t, _)| sent >= *t)
            })
            .map(|r| r.req.request_id.clone())
            .collect();
        for id in due {
            let Some((tokens, kinds)) = self.token_faults.remove(&id) else { continue };
            for kind in kinds {
                tracing::warn!("fault {kind:?} fires after {tokens} token(s) of request {id}");
                self.fire(kind);
            }
        }
    }

    /// One fault. True: the request that fired it is dropped.
    fn fire(&mut self, kind: FaultKind) -> bool {
        match kind {
            FaultKind::Die => {
                for out in &self.sockets.outputs {
                    let _ = out.send(ENGINE_CORE_DEAD, 0);
                }
                std::thread::sleep(Duration::from_millis(200));
                std::process::exit(1);
            }
            FaultKind::DieSilent => std::process::exit(137),
            FaultKind::Stall => self.stalled = true,
            FaultKind::Deaf => {
                self.deaf = true;
                return true;
            }
            FaultKind::Garbage => self.garbage = true,
            FaultKind::RequestError { retryable } => {
                self.fail_next = Some(if retryable {
                    RequestError {
                        code: "kv_load_failed".into(),
                        message: "KV cache load failed (simulated)".into(),
                        retryable,
                    }
                } else {
                    RequestError {
                        code: "internal_error".into(),
                        message: "simulated request failure".into(),
                        retryable,
                    }
                });
            }
        }
        false
    }

    /// A real engine's input thread dies on an invalid request: the engine stays up, deaf.
    fn go_deaf(&mut self, why: &str) -> Result<(), EngineError> {
        tracing::error!("input thread died ({why}); the engine no longer reads requests");
        self.deaf = true;
        Ok(())
    }

    fn add(&mut self, req: AddRequest) -> Result<(), EngineError> {
        if !self.live_ids.insert(req.request_id.clone()) {
            // vLLM asserts on a duplicate live id: ENGINE_CORE_DEAD, then exit.
            tracing::error!("duplicate request id {}: engine core dies", req.request_id);
            for out in &self.sockets.outputs {
                let _ = out.send(ENGINE_CORE_DEAD, 0);
            }
            std::thread::sleep(Duration::from_millis(200));
            std::process::exit(1);
        }
        if req.client_index >= self.sockets.outputs.len() {
            return Err(EngineError::ClientIndex(req.client_index));
        }
        let error = self.fail_next.take();
        // vLLM answers a request without max_tokens with a request-scoped ERROR.
        if error.is_some() || req.max_tokens.is_none() {
            self.live_ids.remove(&req.request_id);
            let out = StepOutput {
                request_id: &req.request_id,
                tokens: &[],
                finish: Some((FINISH_ERROR, None)),
                cached_tokens: None,
                logprobs: None,
                prompt_logprobs: None,
                error: error.as_ref(),
            };
            let load = self.load();
            self.out_buf.clear();
            wire::encode_batch(self.engine_index, &[out], &load, self.now_s(), &mut self.out_buf);
            return self.send_to(req.client_index, false);
        }
        self.waiting.push_back(req);
        Ok(())
    }

    fn abort(&mut self, id: &str) {
        // A client-initiated abort produces no output.
        self.live_ids.remove(id);
        self.waiting.retain(|r| r.request_id != id);
        self.running.retain(|r| r.req.request_id != id);
    }

    /// This step's load; the prefix-cache counts are since the last report, as vLLM's are.
    fn load(&mut self) -> Load {
        let tokens: usize = self.running.iter().map(|r| r.req.prompt.len() + r.emitted).sum();
        let background = self.args.rank_background_load.iter().find(|(r, _)| *r == self.rank).map_or(0, |(_, n)| *n);
        let kv_cache_usage = (tokens as f64 / KV_CAPACITY_TOKENS).min(1.0);
        Load {
            running: self.running.len(),
            waiting: self.waiting.len() + background as usize,
            kv_cache_usage: if background > 0 { kv_cache_usage.max(0.9) } else { kv_cache_usage },
            step: self.step,
            current_wave: self.current_wave,
            prefix: std::mem::take(&mut self.prefix_counts),
        }
    }

    /// Prefix-cache hits: whole blocks of the prompt seen before.
    fn cached_tokens(&mut self, prompt: &[u32]) -> u32 {
        let mut h: u64 = 0xcbf2_9ce4_8422_2325;
        let mut hits = 0;
        let mut all_hit = true;
        for (i, block) in prompt.chunks(BLOCK_TOKENS).enumerate() {
            if block.len() < BLOCK_TOKENS {
                break;
            }
            for &t in block {
                h = (h ^ t as u64).wrapping_mul(0x0000_0100_0000_01b3);
            }
            let key = h ^ i as u64;
            if all_hit && self.cached_blocks.contains(&key) {
                hits += BLOCK_TOKENS;
            } else {
                all_hit = false;
                self.cached_blocks.insert(key);
            }
        }
        let hits = hits.min(prompt.len().saturating_sub(1));
        self.prefix_counts.requests += 1;
        self.prefix_counts.queries += prompt.len() as u64;
        self.prefix_counts.hits += hits as u64;
        hits as u32
    }

    fn admit(&mut self) {
        let ttft = Duration::from_millis(self.args.ttft_ms);
        while self.running.len() < self.args.max_num_seqs {
            let Some(req) = self.waiting.pop_front() else { break };
            let plan = script::plan(
                self.tokenizer.as_deref(),
                &self.script,
                &req.prompt,
                self.args.seed,
                req.seed,
                self.args.output_len,
            );
            let cached_tokens = self.cached_tokens(&req.prompt);
            self.running.push(Running {
                req,
                plan,
                emitted: 0,
                first_token_at: Instant::now() + ttft,
                cached_tokens,
                sent_first: false,
                unsent: Vec::new(),
                unsent_logprobs: Vec::new(),
                finish: None,
            });
        }
    }

    /// One scheduler step: one token for every running request whose first token is due.
    fn run_step(&mut self) -> Result<(), EngineError> {
        if self.stalled {
            return Ok(());
        }
        if self.garbage {
            self.out_buf.clear();
            self.out_buf.extend_from_slice(&[0x99, 0xc1, 0xff, 0x00]);
            for client in 0..self.sockets.outputs.len() {
                self.send_to(client, false)?;
            }
            return Ok(());
        }
        self.admit();
        self.step += 1;
        if self.args.backend == Backend::Tokenspeed {
            return self.step_tokenspeed();
        }
        let now = Instant::now();
        let mut per_client: HashMap<usize, Vec<StepItem>> = HashMap::new();
        let mut finished: Vec<usize> = Vec::new();
        for (i, r) in self.running.iter_mut().enumerate() {
            if now < r.first_token_at {
                continue;
            }
            let (token, finish) = next_token(r);
            r.emitted += 1;
            if finish.is_some() {
                finished.push(i);
            }
            per_client.entry(r.req.client_index).or_default().push((i, vec![token], finish));
        }
        let load = self.load();
        for (client, items) in per_client {
            let outputs: Vec<StepOutput<'_>> = items
                .iter()
                .map(|(i, tokens, finish)| {
                    let r = &self.running[*i];
                    StepOutput {
                        request_id: &r.req.request_id,
                        tokens,
                        finish: *finish,
                        cached_tokens: (!r.sent_first).then_some(r.cached_tokens),
                        logprobs: r.req.logprobs.map(|k| k.clamp(0, 20) as usize),
                        prompt_logprobs: r
                            .req
                            .prompt_logprobs
                            .filter(|_| !r.sent_first)
                            .map(|k| (r.req.prompt.as_slice(), k.clamp(0, 20) as usize)),
                        error: None,
                    }
                })
                .collect();
            let mut buf = std::mem::take(&mut self.out_buf);
            buf.clear();
            wire::encode_batch(self.engine_index, &outputs, &load, self.started.elapsed().as_secs_f64(), &mut buf);
            self.out_buf = buf;
            for (i, _, _) in &items {
                self.running[*i].sent_first = true;
            }
            self.send_to(client, false)?;
        }
        self.fire_token_faults();
        for i in finished.into_iter().rev() {
            let r = self.running.remove(i);
            self.live_ids.remove(&r.req.request_id);
        }
        Ok(())
    }

    fn send_to(&self, client: usize, more: bool) -> Result<(), EngineError> {
        let sock = self.sockets.outputs.get(client).ok_or(EngineError::NoOutputSocket(client))?;
        sock.send(&self.out_buf, if more { zmq::SNDMORE } else { 0 }).map_err(EngineError::Send)
    }
}

/// The next token of a running request and whether it finishes it, honouring the plan, EOS,
/// stop token ids, `min_tokens` (stop tokens masked until reached) and `max_tokens`.
fn next_token(r: &Running) -> (u32, Option<(u8, Option<u32>)>) {
    let n = r.emitted; // tokens already emitted
    let max_tokens = r.req.max_tokens.unwrap_or(16) as usize;
    let masked = n < r.req.min_tokens as usize;
    let planned = r.plan.get(n).copied();
    let token = match (planned, r.req.eos_token_id) {
        (Some(t), _) => t,
        // Past the plan: EOS, unless EOS is ignored or masked; then keep talking.
        (None, Some(eos)) if !r.req.ignore_eos && !masked => eos,
        (None, _) => r.plan.get(n % r.plan.len().max(1)).copied().unwrap_or(220),
    };
    let is_eos = Some(token) == r.req.eos_token_id && !r.req.ignore_eos;
    let finish = if !masked && is_eos {
        Some((FINISH_STOP, None))
    } else if !masked && r.req.stop_token_ids.contains(&token) {
        Some((FINISH_STOP, Some(token)))
    } else if n + 1 >= max_tokens {
        Some((FINISH_LENGTH, None))
    } else {
        None
    };
    (token, finish)
}

/// vLLM's per-rank publisher address: the port plus the data-parallel rank.
fn offset_port(endpoint: &str, rank: usize) -> String {
    match endpoint.rsplit_once(':').and_then(|(host, port)| Some((host, port.parse::<usize>().ok()?))) {
        Some((host, port)) if rank > 0 => format!("{host}:{}", port + rank),
        _ => endpoint.to_string(),
    }
}
