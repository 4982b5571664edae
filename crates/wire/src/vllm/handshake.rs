//! Startup handshake messages: HELLO / READY (engine → client on the handshake socket), INIT
//! (client → engine), and the registration map the engine sends on each input socket.

use super::super::msgpack::{DecodeError, DecodeResult, Kind, Reader, Writer};

/// A status message on the handshake socket (`HELLO` or `READY`).
#[derive(Debug, Clone, PartialEq)]
pub struct StatusMessage {
    pub status: String,
    pub local: bool,
    pub headless: bool,
}

pub fn decode_status(frame: &[u8]) -> DecodeResult<StatusMessage> {
    let mut r = Reader::new(frame);
    let n = r.map_len()?;
    let mut msg = StatusMessage { status: String::new(), local: false, headless: false };
    for _ in 0..n {
        match r.str()? {
            "status" => msg.status = r.str()?.to_string(),
            "local" => msg.local = r.bool()?,
            "headless" => msg.headless = r.bool()?,
            _ => r.skip()?,
        }
    }
    if msg.status.is_empty() {
        return Err(DecodeError("handshake message without a status".into()));
    }
    Ok(msg)
}

/// Encodes a status message as an engine does (the simulator's side of the handshake).
pub fn encode_status(status: &str, local: bool, headless: bool, out: &mut Vec<u8>) {
    let mut w = Writer::new(out);
    w.map(3);
    w.str("status");
    w.str(status);
    w.str("local");
    w.bool(local);
    w.str("headless");
    w.bool(headless);
}

/// Encodes INIT (`EngineHandshakeMetadata`): the input and output addresses in client-index
/// order, no coordinator, and an empty `parallel_config` (dense engines).
pub fn encode_init(inputs: &[String], outputs: &[String], out: &mut Vec<u8>) {
    let mut w = Writer::new(out);
    w.map(2);
    w.str("addresses");
    w.map(5);
    w.str("inputs");
    w.array(inputs.len());
    for a in inputs {
        w.str(a);
    }
    w.str("outputs");
    w.array(outputs.len());
    for a in outputs {
        w.str(a);
    }
    w.str("coordinator_input");
    w.nil();
    w.str("coordinator_output");
    w.nil();
    w.str("frontend_stats_publish_address");
    w.nil();
    w.str("parallel_config");
    w.map(0);
}

/// The INIT addresses, as an engine reads them.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct InitAddresses {
    pub inputs: Vec<String>,
    pub outputs: Vec<String>,
}

pub fn decode_init(frame: &[u8]) -> DecodeResult<InitAddresses> {
    let mut r = Reader::new(frame);
    let n = r.map_len()?;
    let mut addrs = InitAddresses::default();
    for _ in 0..n {
        if r.str()? != "addresses" {
            r.skip()?;
            continue;
        }
        let m = r.map_len()?;
        for _ in 0..m {
            let list = match r.str()? {
                "inputs" => &mut addrs.inputs,
                "outputs" => &mut addrs.outputs,
                _ => {
                    r.skip()?;
                    continue;
                }
            };
            let k = r.array_len()?;
            for _ in 0..k {
                list.push(r.str()?.to_string());
            }
        }
    }
    if addrs.inputs.is_empty() || addrs.inputs.len() != addrs.outputs.len() {
        return Err(DecodeError("INIT without matching input and output addresses".into()));
    }
    Ok(addrs)
}

/// What an engine reports at registration (`EngineCoreReadyResponse`): every field of 0.33, in
/// its order. Older releases send a prefix of these keys (0.27.1 the first 18 less the LoRA
/// and Mamba ones), so what a release lacks keeps its default.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct EngineRegistration {
    pub max_model_len: u32,
    pub num_gpu_blocks: u64,
    pub block_size: u32,
    pub dp_stats_address: Option<String>,
    pub dtype: String,
    pub vllm_version: String,
    pub world_size: u32,
    pub data_parallel_size: u32,
    pub tensor_parallel_size: u32,
    pub pipeline_parallel_size: u32,
    pub decode_context_parallel_size: u32,
    pub data_parallel_rank: u32,
    pub max_num_seqs: u32,
    pub max_num_batched_tokens: u32,
    pub instance_id: String,
    pub supports_lora: bool,
    pub max_loras: u32,
    pub mamba_block_size: Option<u32>,
    pub kv_cache_size_tokens: Option<u64>,
    pub kv_cache_max_concurrency: Option<f64>,
    /// Where the engine publishes KV-cache events, kept as the raw msgpack map.
    pub kv_events_config: Option<Vec<u8>>,
    pub weight_transfer_backend: Option<String>,
    pub enable_sleep_mode: bool,
    pub supports_draft_weight_updates: bool,
    pub effective_attention_block_size: Option<u32>,
    pub coord_store_port: u32,
    pub coordinator_input_address: Option<String>,
    pub coordinator_output_address: Option<String>,
}

/// Decodes a registration leniently: unknown keys are skipped and a nil or missing key keeps
/// its default, so every release from 0.27.1 on decodes; only `max_model_len` is required.
pub fn decode_registration(frame: &[u8]) -> DecodeResult<EngineRegistration> {
    let mut r = Reader::new(frame);
    let n = r.map_len()?;
    let mut reg = EngineRegistration::default();
    for _ in 0..n {
        let key = r.str()?;
        if r.peek_kind()? == Kind::Nil {
            r.skip()?;
            continue;
        }
        let text = |r: &mut Reader<'_>| r.str().map(str::to_string);
        match key {
            "max_model_len" => reg.max_model_len = r.u32()?,
            "num_gpu_blocks" => reg.num_gpu_blocks = r.u64()?,
            "block_size" => reg.block_size = r.u32()?,
            "dp_stats_address" => reg.dp_stats_address = Some(text(&mut r)?),
            "dtype" => reg.dtype = text(&mut r)?,
            "vllm_version" => reg.vllm_version = text(&mut r)?,
            "world_size" => reg.world_size = r.u32()?,
            "data_parallel_size" => reg.data_parallel_size = r.u32()?,
            "tensor_parallel_size" => reg.tensor_parallel_size = r.u32()?,
            "pipeline_parallel_size" => reg.pipeline_parallel_size = r.u32()?,
            "decode_context_parallel_size" => reg.decode_context_parallel_size = r.u32()?,
            "data_parallel_rank" => reg.data_parallel_rank = r.u32()?,
            "max_num_seqs" => reg.max_num_seqs = r.u32()?,
            "max_num_batched_tokens" => reg.max_num_batched_tokens = r.u32()?,
            "instance_id" => reg.instance_id = text(&mut r)?,
            "supports_lora" => reg.supports_lora = r.bool()?,
            "max_loras" => reg.max_loras = r.u32()?,
            "mamba_block_size" => reg.mamba_block_size = Some(r.u32()?),
            "kv_cache_size_tokens" => reg.kv_cache_size_tokens = Some(r.u64()?),
            "kv_cache_max_concurrency" => reg.kv_cache_max_concurrency = Some(r.f64()?),
            "kv_events_config" => {
                let raw = r.raw_value()?;
                // Checked now, so a malformed map refuses the registration, not the routing.
                decode_kv_events_config(&mut Reader::new(raw))?;
                reg.kv_events_config = Some(raw.to_vec());
            }
            "weight_transfer_backend" => reg.weight_transfer_backend = Some(text(&mut r)?),
            "enable_sleep_mode" => reg.enable_sleep_mode = r.bool()?,
            "supports_draft_weight_updates" => reg.supports_draft_weight_updates = r.bool()?,
            "effective_attention_block_size" => reg.effective_attention_block_size = Some(r.u32()?),
            "coord_store_port" => reg.coord_store_port = r.u32()?,
            "coordinator_input_address" => reg.coordinator_input_address = Some(text(&mut r)?),
            "coordinator_output_address" => reg.coordinator_output_address = Some(text(&mut r)?),
            _ => r.skip()?,
        }
    }
    if reg.max_model_len == 0 {
        return Err(DecodeError("registration without max_model_len".into()));
    }
    Ok(reg)
}

/// An engine's KV-event publisher as it resolved it: the PUB endpoint (offset by its rank
/// already), the replay ROUTER's if any, and the topic.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct KvEventsEndpoints {
    pub endpoint: String,
    pub replay_endpoint: Option<String>,
    pub topic: String,
}

impl EngineRegistration {
    /// Where the engine publishes KV-cache events, when it was started with them
    /// (`kv_events_config`, checked when the registration was decoded).
    pub fn kv_events(&self) -> Option<KvEventsEndpoints> {
        let raw = self.kv_events_config.as_deref()?;
        decode_kv_events_config(&mut Reader::new(raw)).ok().flatten()
    }
}

/// `kv_events_config`: `None` unless it is enabled with the ZMQ publisher.
fn decode_kv_events_config(r: &mut Reader<'_>) -> DecodeResult<Option<KvEventsEndpoints>> {
    let n = r.map_len()?;
    let (mut enabled, mut zmq) = (false, false);
    let mut out = KvEventsEndpoints::default();
    for _ in 0..n {
        let key = r.str()?;
        if r.try_nil()? {
            continue;
        }
        match key {
            "enable_kv_cache_events" => enabled = r.bool()?,
            "publisher" => zmq = r.str()? == "zmq",
            "endpoint" => out.endpoint = r.str()?.to_string(),
            "replay_endpoint" => out.replay_endpoint = Some(r.str()?.to_string()),
            "topic" => out.topic = r.str()?.to_string(),
            _ => r.skip()?,
        }
    }
    Ok((enabled && zmq && !out.endpoint.is_empty()).then_some(out))
}

/// A `kv_events_config` map as vLLM's `KVEventsConfig` encodes it (the simulator's side).
pub fn encode_kv_events_config(kv: &KvEventsEndpoints) -> Vec<u8> {
    let mut out = Vec::new();
    let mut w = Writer::new(&mut out);
    w.map(5 + usize::from(kv.replay_endpoint.is_some()));
    w.str("enable_kv_cache_events");
    w.bool(true);
    w.str("publisher");
    w.str("zmq");
    w.str("endpoint");
    w.str(&kv.endpoint);
    if let Some(replay) = &kv.replay_endpoint {
        w.str("replay_endpoint");
        w.str(replay);
    }
    w.str("buffer_steps");
    w.uint(10_000);
    w.str("topic");
    w.str(&kv.topic);
    out
}

/// Encodes a registration as a vLLM 0.33 engine does (msgspec's encoding of the dataclass:
/// every field, in order, nil for None), so front ends that require all of them attach.
pub fn encode_registration(reg: &EngineRegistration, out: &mut Vec<u8>) {
    let mut w = Writer::new(out);
    w.map_wide(28);
    uint(&mut w, "max_model_len", Some(reg.max_model_len.into()));
    uint(&mut w, "num_gpu_blocks", Some(reg.num_gpu_blocks));
    uint(&mut w, "block_size", Some(reg.block_size.into()));
    text(&mut w, "dp_stats_address", reg.dp_stats_address.as_deref());
    text(&mut w, "dtype", Some(&reg.dtype));
    text(&mut w, "vllm_version", Some(&reg.vllm_version));
    for (key, v) in [
        ("world_size", reg.world_size),
        ("data_parallel_size", reg.data_parallel_size),
        ("tensor_parallel_size", reg.tensor_parallel_size),
        ("pipeline_parallel_size", reg.pipeline_parallel_size),
        ("decode_context_parallel_size", reg.decode_context_parallel_size),
        ("data_parallel_rank", reg.data_parallel_rank),
        ("max_num_seqs", reg.max_num_seqs),
        ("max_num_batched_tokens", reg.max_num_batched_tokens),
    ] {
        uint(&mut w, key, Some(v.into()));
    }
    text(&mut w, "instance_id", Some(&reg.instance_id));
    w.str("supports_lora");
    w.bool(reg.supports_lora);
    uint(&mut w, "max_loras", Some(reg.max_loras.into()));
    uint(&mut w, "mamba_block_size", reg.mamba_block_size.map(u64::from));
    uint(&mut w, "kv_cache_size_tokens", reg.kv_cache_size_tokens);
    w.str("kv_cache_max_concurrency");
    match reg.kv_cache_max_concurrency {
        Some(v) => w.f64(v),
        None => w.nil(),
    }
    w.str("kv_events_config");
    match &reg.kv_events_config {
        Some(raw) => w.raw(raw),
        None => w.nil(),
    }
    text(&mut w, "weight_transfer_backend", reg.weight_transfer_backend.as_deref());
    w.str("enable_sleep_mode");
    w.bool(reg.enable_sleep_mode);
    w.str("supports_draft_weight_updates");
    w.bool(reg.supports_draft_weight_updates);
    uint(&mut w, "effective_attention_block_size", reg.effective_attention_block_size.map(u64::from));
    uint(&mut w, "coord_store_port", Some(reg.coord_store_port.into()));
    text(&mut w, "coordinator_input_address", reg.coordinator_input_address.as_deref());
    text(&mut w, "coordinator_output_address", reg.coordinator_output_address.as_deref());
}

fn uint(w: &mut Writer<'_>, key: &str, v: Option<u64>) {
    w.str(key);
    match v {
        Some(v) => w.uint(v),
        None => w.nil(),
    }
}

fn text(w: &mut Writer<'_>, key: &str, v: Option<&str>) {
    w.str(key);
    match v {
        Some(s) => w.str(s),
        None => w.nil(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn hex(s: &str) -> Vec<u8> {
        (0..s.len()).step_by(2).map(|i| u8::from_str_radix(&s[i..i + 2], 16).unwrap()).collect()
    }

    #[test]
    fn decodes_real_hello_and_ready() {
        let hello = decode_status(&hex("83a6737461747573a548454c4c4fa56c6f63616cc2a8686561646c657373c3")).unwrap();
        assert_eq!(hello, StatusMessage { status: "HELLO".into(), local: false, headless: true });
        let ready = decode_status(&hex("83a6737461747573a55245414459a56c6f63616cc2a8686561646c657373c3")).unwrap();
        assert_eq!(ready.status, "READY");
        let mut again = Vec::new();
        encode_status("HELLO", false, true, &mut again);
        assert_eq!(again, hex("83a6737461747573a548454c4c4fa56c6f63616cc2a8686561646c657373c3"));
    }

    #[test]
    fn init_matches_the_reference_bytes() {
        let mut out = Vec::new();
        encode_init(&["tcp://127.0.0.1:46335".into()], &["tcp://127.0.0.1:37233".into()], &mut out);
        let mut expected = vec![0x82, 0xa9];
        expected.extend_from_slice(b"addresses");
        expected.push(0x85);
        expected.push(0xa6);
        expected.extend_from_slice(b"inputs");
        expected.extend_from_slice(&[0x91, 0xb5]);
        expected.extend_from_slice(b"tcp://127.0.0.1:46335");
        expected.push(0xa7);
        expected.extend_from_slice(b"outputs");
        expected.extend_from_slice(&[0x91, 0xb5]);
        expected.extend_from_slice(b"tcp://127.0.0.1:37233");
        expected.push(0xb1);
        expected.extend_from_slice(b"coordinator_input");
        expected.push(0xc0);
        expected.push(0xb2);
        expected.extend_from_slice(b"coordinator_output");
        expected.push(0xc0);
        expected.push(0xbe);
        expected.extend_from_slice(b"frontend_stats_publish_address");
        expected.push(0xc0);
        expected.push(0xaf);
        expected.extend_from_slice(b"parallel_config");
        expected.push(0x80);
        assert_eq!(out, expected);
        let back = decode_init(&out).unwrap();
        assert_eq!(back.inputs, ["tcp://127.0.0.1:46335"]);
    }

    #[test]
    fn registration_round_trips_and_rejects_garbage() {
        let reg = EngineRegistration {
            max_model_len: 256,
            num_gpu_blocks: 4096,
            block_size: 128,
            data_parallel_rank: 1,
            data_parallel_size: 2,
            max_num_seqs: 8,
            vllm_version: "0.32.0".into(),
            dtype: "float32".into(),
            instance_id: "i-1".into(),
            kv_cache_size_tokens: Some(65536),
            kv_cache_max_concurrency: Some(64.0),
            kv_events_config: Some(vec![0x81, 0xa1, b'a', 0x01]),
            coordinator_input_address: Some("tcp://10.0.0.1:5555".into()),
            ..Default::default()
        };
        let mut out = Vec::new();
        encode_registration(&reg, &mut out);
        assert_eq!(decode_registration(&out).unwrap(), reg);
        let kv = KvEventsEndpoints {
            endpoint: "tcp://127.0.0.1:5557".into(),
            replay_endpoint: Some("tcp://127.0.0.1:5558".into()),
            topic: String::new(),
        };
        let with_kv = EngineRegistration { kv_events_config: Some(encode_kv_events_config(&kv)), ..reg.clone() };
        out.clear();
        encode_registration(&with_kv, &mut out);
        assert_eq!(decode_registration(&out).unwrap().kv_events(), Some(kv));
        assert!(decode_registration(&[0x80]).is_err());
        assert!(decode_registration(&[]).is_err());
    }

    /// vLLM 0.32.0's `EngineCoreReadyResponse` (a one-CPU engine's values) with a KV-event
    /// publisher, encoded by msgspec.
    #[test]
    fn registration_names_the_kv_event_publisher() {
        let real = hex("de0019ad6d61785f6d6f64656c5f6c656ecd0100ae6e756d5f6770755f626c6f636b7340aa626c6f636b5f73697a6510b064705f73746174735f61646472657373c0a56474797065a7666c6f61743332ac766c6c6d5f76657273696f6ea6302e33322e30aa776f726c645f73697a6501b2646174615f706172616c6c656c5f73697a6501b474656e736f725f706172616c6c656c5f73697a6501b6706970656c696e655f706172616c6c656c5f73697a6501bc6465636f64655f636f6e746578745f706172616c6c656c5f73697a6501b2646174615f706172616c6c656c5f72616e6b00ac6d61785f6e756d5f7365717308b66d61785f6e756d5f626174636865645f746f6b656e73cd0400ab696e7374616e63655f6964a3692d30ad737570706f7274735f6c6f7261c2a96d61785f6c6f72617300b06d616d62615f626c6f636b5f73697a65c0b46b765f63616368655f73697a655f746f6b656e73c0b86b765f63616368655f6d61785f636f6e63757272656e6379c0b06b765f6576656e74735f636f6e66696788b6656e61626c655f6b765f63616368655f6576656e7473c3a97075626c6973686572a37a6d71a8656e64706f696e74ac7463703a2f2f2a3a35353537af7265706c61795f656e64706f696e74ac7463703a2f2f2a3a35353538ac6275666665725f7374657073cd2710a368776dce000186a0ae6d61785f71756575655f73697a65ce000186a0a5746f706963a26b76b77765696768745f7472616e736665725f6261636b656e64c0b1656e61626c655f736c6565705f6d6f6465c2bd737570706f7274735f64726166745f7765696768745f75706461746573c2be6566666563746976655f617474656e74696f6e5f626c6f636b5f73697a65c0");
        let reg = decode_registration(&real).unwrap();
        assert_eq!((reg.max_model_len, reg.block_size), (256, 16));
        let want = KvEventsEndpoints {
            endpoint: "tcp://*:5557".into(),
            replay_endpoint: Some("tcp://*:5558".into()),
            topic: "kv".into(),
        };
        assert_eq!(reg.kv_events(), Some(want));
        // Disabled: `enable_kv_cache_events` false -> no publisher to subscribe to.
        let mut off = real.clone();
        let at = real.windows(2).position(|w| w == [0x73, 0xc3]).unwrap() + 1;
        off[at] = 0xc2;
        assert_eq!(decode_registration(&off).unwrap().kv_events(), None);
    }
}
