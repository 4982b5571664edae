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
            "kv_events_config" => reg.kv_events_config = Some(r.raw_value()?.to_vec()),
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
        assert!(decode_registration(&[0x80]).is_err());
        assert!(decode_registration(&[]).is_err());
    }
}
