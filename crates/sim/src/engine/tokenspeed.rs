//! The simulated TokenSpeed 0.1.1 engine: its handshake order, what its input socket does with
//! each message, and its output cadence (`Sim` itself and the step loop are shared with vLLM).
//!
//! Mimicked from the engine's code: the model loads before HELLO; registration comes after
//! READY, on the first input address only, and every output goes to the first output address;
//! a malformed message or an unknown type byte is dropped with a warning and never answered;
//! a request failing the engine's checks gets one `abort` frame with no tokens; EOS ids come
//! from the model files (the request carries none) and the matched stop/EOS token is part of
//! the output; `max_new_tokens` is checked before EOS and clamped to the context; `ignore_eos`
//! disables the request's stop token ids too; `min_new_tokens` is not enforced; an ABORT of a
//! running request ends it without a frame, and an ABORT of an id the engine does not know is
//! remembered for 300 s, during which a request with that id is dropped without output.
//! Not mimicked: sampling itself (the output plan ignores temperature and uses the seed as
//! sent, as the vLLM mode does), grammars (the simulated engine has no grammar backend).

use std::time::{Duration, Instant};

use shardgate_text::model::{ModelAssets, ModelSource};
use shardgate_wire::tokenspeed as ts_wire;

use super::{Running, Sim, Sockets, BLOCK_TOKENS, KV_CAPACITY_TOKENS, TOKENSPEED_VERSION};
use crate::error::{EngineError, HandshakeError};
use crate::tokenspeed_wire as ts;
use crate::vllm_wire::AddRequest;
use crate::{Args, Backend};

/// The EOS ids a TokenSpeed engine stops on by itself: the tokenizer's EOS and the model's
/// generation-config ones, primary first. vLLM leaves EOS to the front end.
pub(super) fn engine_eos_ids(args: &Args) -> Vec<u32> {
    let (Backend::Tokenspeed, Some(dir)) = (args.backend, &args.model_path) else { return Vec::new() };
    let src = ModelSource {
        model_path: dir.clone(),
        tokenizer_path: None,
        chat_template: None,
        served_name: String::new(),
        use_generation_config: false,
    };
    match ModelAssets::load(&src) {
        Ok(m) => m.eos_token_id.into_iter().chain(m.extra_eos_token_ids).collect(),
        Err(e) => {
            tracing::warn!("cannot read the model's EOS ids ({e}); generating until max_new_tokens");
            Vec::new()
        }
    }
}

/// As `tokenspeed.cli serve --headless`: the model loads first, then HELLO → INIT → READY, then
/// the ready response on the first input address only (the engine ignores the others) and the
/// output PUSH to the first output address.
pub(super) fn handshake_tokenspeed(
    ctx: &zmq::Context,
    addr: &str,
    args: &Args,
    rank: u16,
) -> Result<Sockets, HandshakeError> {
    std::thread::sleep(Duration::from_millis(args.load_ms));
    let identity = ts_wire::engine_identity(args.zmq_engine_index + rank);
    let hs = ctx.socket(zmq::DEALER)?;
    hs.set_identity(&identity)?;
    hs.set_linger(5000)?;
    hs.connect(addr).map_err(|source| HandshakeError::Dial { addr: addr.to_string(), source })?;
    let mut hello = Vec::new();
    ts_wire::handshake::encode_status("HELLO", &mut hello);
    hs.send(&hello, 0)?;
    let wait_ms = (ts_wire::ENGINE_INIT_TIMEOUT_S * 1000) as i32;
    hs.set_rcvtimeo(wait_ms)?;
    let init = hs.recv_multipart(0).map_err(|source| HandshakeError::InitTimeout { addr: addr.to_string(), source })?;
    // The engine reads the last frame, so an extra delimiter frame is tolerated.
    let init = init.last().ok_or(HandshakeError::EmptyInit)?;
    let addrs = ts_wire::handshake::decode_init(init).map_err(HandshakeError::UndecodableInit)?;
    let mut ready = Vec::new();
    ts_wire::handshake::encode_status("READY", &mut ready);
    hs.send(&ready, 0)?;
    let reg = ts_wire::handshake::EngineRegistration {
        max_model_len: args.max_model_len,
        num_gpu_blocks: (KV_CAPACITY_TOKENS as u64) / BLOCK_TOKENS as u64 + 1,
        prefix_granularity: BLOCK_TOKENS as u32,
        dtype: "bfloat16".into(),
        multimodal_encoder_dtype: None,
        vllm_version: TOKENSPEED_VERSION.into(),
        world_size: args.data_parallel_size as u32,
        data_parallel_size: args.data_parallel_size as u32,
        tensor_parallel_size: 1,
        pipeline_parallel_size: 1,
        decode_context_parallel_size: 1,
        data_parallel_rank: rank as u32,
        max_num_seqs: args.max_num_seqs as u32,
        max_num_batched_tokens: 8192,
        instance_id: args.model_path.as_ref().map_or_else(|| "sim".into(), |p| p.display().to_string()),
        kv_cache_size_tokens: Some(KV_CAPACITY_TOKENS as u64),
    };
    let mut reg_bytes = Vec::new();
    ts_wire::handshake::encode_registration(&reg, &mut reg_bytes);
    let input = ctx.socket(zmq::DEALER)?;
    input.set_identity(&identity)?;
    input.set_rcvhwm(0)?;
    input.set_sndhwm(0)?;
    input.set_linger(0)?;
    input.connect(&addrs.input).map_err(|source| HandshakeError::ConnectInput { addr: addrs.input.clone(), source })?;
    input.send(&reg_bytes, 0)?;
    let output = ctx.socket(zmq::PUSH)?;
    output.set_sndhwm(0)?;
    output.set_linger(4000)?;
    output
        .connect(&addrs.output)
        .map_err(|source| HandshakeError::ConnectOutput { addr: addrs.output.clone(), source })?;
    drop(hs);
    Ok(Sockets { inputs: vec![input], outputs: vec![output] })
}

impl Sim {
    pub(super) fn on_input_tokenspeed(&mut self, frames: Vec<Vec<u8>>) -> Result<(), EngineError> {
        let [kind, payload, ..] = frames.as_slice() else {
            return self.dropped(format!("a message of {} frame(s); needs type and payload", frames.len()));
        };
        match kind.as_slice() {
            [ts_wire::REQUEST_ADD] => match ts::decode_add(payload) {
                Ok(add) => {
                    self.requests_seen += 1;
                    self.note(self.add_record(&add));
                    if self.fire_faults(&add.rid) {
                        return Ok(());
                    }
                    self.add_tokenspeed(add)
                }
                Err(e) => self.dropped(format!("undecodable ADD: {e}")),
            },
            [ts_wire::REQUEST_ABORT] => match ts::decode_abort(payload) {
                Ok(ids) => {
                    self.note(serde_json::json!({"type": "abort", "ids": ids, "rank": self.rank}));
                    for id in ids {
                        self.abort_tokenspeed(id);
                    }
                    Ok(())
                }
                Err(e) => self.dropped(format!("undecodable ABORT: {e}")),
            },
            other => self.dropped(format!("unknown msgpack request type byte: {other:02x?}")),
        }
    }

    /// What the engine does with a message it cannot use: log it and carry on, answering nothing.
    fn dropped(&mut self, why: String) -> Result<(), EngineError> {
        tracing::warn!("msgpack input: dropping malformed message ({why})");
        self.note(serde_json::json!({"type": "invalid", "reason": why, "rank": self.rank}));
        Ok(())
    }

    /// The JSON line `--record` writes: the request as sent (before the engine normalizes it).
    fn add_record(&self, add: &ts::Add) -> serde_json::Value {
        let s = &add.sampling;
        serde_json::json!({"type": "add", "backend": "tokenspeed", "id": add.rid, "prompt_len": add.input_ids.len(),
            "max_tokens": s.max_new_tokens, "min_tokens": s.min_new_tokens, "seed": s.seed,
            "temperature": s.temperature, "top_p": s.top_p, "top_k": s.top_k, "min_p": s.min_p,
            "frequency_penalty": s.frequency_penalty, "presence_penalty": s.presence_penalty,
            "repetition_penalty": s.repetition_penalty,
            "stop_token_ids": s.stop_token_ids.clone().unwrap_or_default(), "stop": s.stop,
            "eos_token_id": serde_json::Value::Null, "ignore_eos": s.ignore_eos,
            "logit_bias": s.logit_bias.as_ref().map(|b| b.iter().map(|(k, v)| (k.clone(), serde_json::json!(v))).collect::<serde_json::Map<_, _>>()),
            "logprobs": s.logprobs, "n": s.n, "is_normalized": s.is_normalized,
            "return_logprob": add.return_logprob, "logprob_start_len": add.logprob_start_len,
            "top_logprobs_num": add.top_logprobs_num, "stream": add.stream, "client_index": 0,
            "rank": self.rank, "engine_index": self.engine_index})
    }

    fn add_tokenspeed(&mut self, add: ts::Add) -> Result<(), EngineError> {
        if let Some(reason) = ts::validation_error(&add) {
            tracing::warn!("msgpack input: aborting invalid request {}: {reason}", add.rid);
            let row = ts::Row {
                rid: &add.rid,
                finished_reason: "abort",
                prompt_tokens: add.input_ids.len() as u64,
                ..Default::default()
            };
            return self.send_rows(&[row]);
        }
        self.sweep_pending_aborts();
        if self.pending_aborts.remove(&add.rid).is_some() {
            tracing::info!("request {} was aborted before it arrived: finished without output", add.rid);
            return Ok(());
        }
        if !self.live_ids.insert(add.rid.clone()) {
            tracing::error!("request id {} is already live: dropped", add.rid);
            return Ok(());
        }
        let s = add.sampling.normalized();
        // The engine caps a request at max_model_len - 1 tokens and max_new_tokens one below.
        let room = self.args.max_model_len as i64 - 1 - add.input_ids.len() as i64 - 1;
        let max_new = s.max_new_tokens.map_or(room, |m| m.min(room)).max(1);
        let mut stop_token_ids = s.stop_token_ids.clone().unwrap_or_default();
        stop_token_ids.extend(self.eos_ids.iter().copied());
        self.waiting.push_back(AddRequest {
            request_id: add.rid,
            prompt: add.input_ids,
            client_index: 0,
            max_tokens: Some(max_new.min(u32::MAX as i64) as u32),
            min_tokens: 0,
            stop_token_ids,
            eos_token_id: self.eos_ids.first().copied(),
            ignore_eos: s.ignore_eos,
            seed: add.sampling.seed,
            temperature: s.temperature,
            top_p: s.top_p,
            logprobs: None,
            prompt_logprobs: None,
            stream: add.stream,
            stream_interval: s.stream_interval.filter(|&k| k > 0).map_or(0, |k| k.min(u32::MAX as i64) as u32),
            return_logprob: add.return_logprob,
            structured_outputs: None,
            mm: None,
        });
        Ok(())
    }

    fn abort_tokenspeed(&mut self, id: String) {
        if self.live_ids.remove(&id) {
            // A registered request just ends: the client tore down its side already.
            self.waiting.retain(|r| r.request_id != id);
            self.running.retain(|r| r.req.request_id != id);
        } else {
            self.sweep_pending_aborts();
            self.pending_aborts.insert(id, Instant::now());
        }
    }

    fn sweep_pending_aborts(&mut self) {
        let ttl = Duration::from_secs(ts_wire::ENGINE_PENDING_ABORT_TTL_S);
        self.pending_aborts.retain(|_, at| at.elapsed() < ttl);
    }

    /// The load tail, sampled before the step's tokens as the engine samples it each round.
    fn snapshot(&self) -> ts::Snapshot {
        if self.args.no_load_snapshot {
            return ts::Snapshot::default();
        }
        let total = KV_CAPACITY_TOKENS as u64 / BLOCK_TOKENS as u64;
        let mut active: u64 =
            self.running.iter().map(|r| (r.req.prompt.len() + r.emitted).div_ceil(BLOCK_TOKENS) as u64).sum();
        let background = self.args.rank_background_load.iter().find(|(r, _)| *r == self.rank).map_or(0, |(_, n)| *n);
        if background > 0 {
            active = active.max(total * 9 / 10);
        }
        ts::Snapshot {
            running: self.running.len() as u64,
            waiting: (self.waiting.len() as u64).saturating_add(background),
            kv_active_pages: active.min(total),
            kv_total_pages: total,
        }
    }

    /// One scheduler round: a token for every running request whose first token is due, and one
    /// batch with the requests whose cadence says so (every finish among them).
    pub(super) fn step_tokenspeed(&mut self) -> Result<(), EngineError> {
        let load = self.snapshot();
        let now = Instant::now();
        let mut due: Vec<usize> = Vec::new();
        for (i, r) in self.running.iter_mut().enumerate() {
            if now < r.first_token_at {
                continue;
            }
            let (token, finish) = next_token(r);
            r.emitted += 1;
            r.unsent.push(token);
            if r.req.return_logprob {
                r.unsent_logprobs.push(-0.5 * r.emitted as f64);
            }
            r.finish = finish;
            if finish.is_some() || frame_due(r) {
                due.push(i);
            }
        }
        if !due.is_empty() {
            let rows: Vec<ts::Row<'_>> = due.iter().map(|&i| row(&self.running[i])).collect();
            let mut buf = std::mem::take(&mut self.out_buf);
            buf.clear();
            ts::encode_batch(self.engine_index as u64, &rows, &load, &mut buf);
            self.out_buf = buf;
            self.send_to(0, false)?;
            for &i in &due {
                let r = &mut self.running[i];
                r.unsent.clear();
                r.unsent_logprobs.clear();
                r.sent_first = true;
            }
        }
        self.fire_token_faults();
        for i in (0..self.running.len()).rev() {
            if self.running[i].finish.is_some() {
                let r = self.running.remove(i);
                self.live_ids.remove(&r.req.request_id);
            }
        }
        Ok(())
    }

    fn send_rows(&mut self, rows: &[ts::Row<'_>]) -> Result<(), EngineError> {
        let load = self.snapshot();
        self.out_buf.clear();
        ts::encode_batch(self.engine_index as u64, rows, &load, &mut self.out_buf);
        self.send_to(0, false)
    }
}

fn row(r: &Running) -> ts::Row<'_> {
    ts::Row {
        rid: &r.req.request_id,
        output_ids: &r.unsent,
        finished_reason: r.finish.unwrap_or(""),
        prompt_tokens: r.req.prompt.len() as u64,
        completion_tokens: r.emitted as u64,
        cached_tokens: r.cached_tokens as u64,
        logprob_values: &r.unsent_logprobs,
        logprob_ids: if r.req.return_logprob { &r.unsent } else { &[] },
    }
}

/// `stream`: every round, or at tokens 1, k+1, 2k+1, … with a stream interval k > 1. Otherwise
/// the first token and every 50th.
fn frame_due(r: &Running) -> bool {
    let n = r.emitted;
    match (r.req.stream, r.req.stream_interval as usize) {
        (true, k) if k > 1 => n % k == 1,
        (true, _) => true,
        (false, _) => n == 1 || n.is_multiple_of(ts_wire::ENGINE_NON_STREAM_FRAME_TOKENS as usize),
    }
}

/// The next token and the finish it causes, in the engine's order: length first, then EOS and
/// stop token ids (all ignored with `ignore_eos`); no `min_new_tokens` masking.
fn next_token(r: &Running) -> (u32, Option<&'static str>) {
    let n = r.emitted;
    let token = match (r.plan.get(n).copied(), r.req.eos_token_id) {
        (Some(t), _) => t,
        (None, Some(eos)) if !r.req.ignore_eos => eos,
        (None, _) => r.plan.get(n % r.plan.len().max(1)).copied().unwrap_or(220),
    };
    let finish = if n + 1 >= r.req.max_tokens.unwrap_or(u32::MAX) as usize {
        Some("length")
    } else if !r.req.ignore_eos && r.req.stop_token_ids.contains(&token) {
        Some("stop")
    } else {
        None
    };
    (token, finish)
}
