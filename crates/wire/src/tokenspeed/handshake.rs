//! Startup handshake: HELLO / READY (engine → client on the handshake socket), INIT (client →
//! engine), and the ready response the engine registers with on the input socket.
//!
//! The statuses and INIT have vLLM's shapes (HELLO/READY add a nil `parallel_config_hash`,
//! which the shared decoder skips); the order differs. TokenSpeed loads its model *before*
//! HELLO, then answers INIT with READY at once, and only then connects to `inputs[0]` and sends
//! the ready response there: registration comes after READY, on one input socket only.

use super::super::msgpack::{DecodeError, DecodeResult, Kind, Reader, Writer};
use super::super::vllm::handshake as vllm;
use super::VERSION_PREFIX;

pub use vllm::{decode_status, StatusMessage};

/// Encodes HELLO or READY as TokenSpeed does (the simulator's side): always four keys.
pub fn encode_status(status: &str, out: &mut Vec<u8>) {
    let mut w = Writer::new(out);
    w.map(4);
    w.str("status");
    w.str(status);
    w.str("local");
    w.bool(true);
    w.str("headless");
    w.bool(true);
    w.str("parallel_config_hash");
    w.nil();
}

/// Encodes INIT with the one address pair the engine uses (it reads only element 0 of each
/// list); every rank of a group gets the same pair.
pub fn encode_init(input: &str, output: &str, out: &mut Vec<u8>) {
    vllm::encode_init(&[input.to_owned()], &[output.to_owned()], out);
}

/// The INIT addresses as the engine takes them.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct InitAddresses {
    pub input: String,
    pub output: String,
}

/// Decodes INIT as the engine does (the simulator's side): `addresses` is required and both
/// lists need an entry; only the first of each is used.
pub fn decode_init(frame: &[u8]) -> DecodeResult<InitAddresses> {
    let mut r = Reader::new(frame);
    let n = r.map_len()?;
    let (mut inputs, mut outputs, mut seen) = (Vec::new(), Vec::new(), false);
    for _ in 0..n {
        if r.str()? != "addresses" {
            r.skip()?;
            continue;
        }
        seen = true;
        let m = r.map_len()?;
        for _ in 0..m {
            let list = match r.str()? {
                "inputs" => &mut inputs,
                "outputs" => &mut outputs,
                _ => {
                    r.skip()?;
                    continue;
                }
            };
            list.clear();
            let k = r.array_len()?;
            for _ in 0..k {
                list.push(r.str()?.to_string());
            }
        }
    }
    if !seen {
        return Err(DecodeError("INIT without addresses".into()));
    }
    match (inputs.into_iter().next(), outputs.into_iter().next()) {
        (Some(input), Some(output)) => Ok(InitAddresses { input, output }),
        _ => Err(DecodeError("INIT did not carry both input and output addresses".into())),
    }
}

/// The ready response (`WireEngineCoreReadyResponse`), the fields a client can use. Missing keys
/// take the engine struct's defaults.
#[derive(Debug, Clone, PartialEq)]
pub struct EngineRegistration {
    /// The model's context length; the engine's own limit can be lower (`usable_context_len`).
    pub max_model_len: u32,
    /// Device KV pages, plus one reserved null page.
    pub num_gpu_blocks: u64,
    /// Tokens per KV page (vLLM's `block_size`, which older builds sent instead).
    pub prefix_granularity: u32,
    /// "bfloat16", "float16" or "float32".
    pub dtype: String,
    pub multimodal_encoder_dtype: Option<String>,
    /// "tokenspeed-<version>".
    pub vllm_version: String,
    pub world_size: u32,
    pub data_parallel_size: u32,
    pub tensor_parallel_size: u32,
    pub pipeline_parallel_size: u32,
    pub decode_context_parallel_size: u32,
    /// The DP rank *without* the `--zmq-engine-index` base; the identity frame has the sum.
    pub data_parallel_rank: u32,
    pub max_num_seqs: u32,
    /// Chunked-prefill size; 0 = no cap.
    pub max_num_batched_tokens: u64,
    /// Served model name or model path.
    pub instance_id: String,
    /// Total KV capacity in tokens.
    pub kv_cache_size_tokens: Option<u64>,
}

impl Default for EngineRegistration {
    fn default() -> Self {
        EngineRegistration {
            max_model_len: 0,
            num_gpu_blocks: 0,
            prefix_granularity: 0,
            dtype: "bfloat16".into(),
            multimodal_encoder_dtype: None,
            vllm_version: String::new(),
            world_size: 1,
            data_parallel_size: 1,
            tensor_parallel_size: 1,
            pipeline_parallel_size: 1,
            decode_context_parallel_size: 1,
            data_parallel_rank: 0,
            max_num_seqs: 0,
            max_num_batched_tokens: 0,
            instance_id: String::new(),
            kv_cache_size_tokens: None,
        }
    }
}

impl EngineRegistration {
    /// Whether the engine says it is TokenSpeed (the HELLO of both engines is the same).
    pub fn is_tokenspeed(&self) -> bool {
        self.vllm_version.starts_with(VERSION_PREFIX)
    }

    /// The most prompt + output tokens one request can have: the engine caps a request at
    /// min(context, KV capacity) − 1 tokens and clamps `max_new_tokens` one below that, so a
    /// request asked for more ends early with `length`.
    pub fn usable_context_len(&self) -> u32 {
        let kv = self.kv_cache_size_tokens.filter(|&t| t > 0).map_or(u32::MAX, |t| t.min(u32::MAX as u64) as u32);
        self.max_model_len.min(kv).saturating_sub(2)
    }

    /// The same engine in the vLLM codec's terms (`block_size` = `prefix_granularity`), for code
    /// that keeps one registration type for both wires.
    pub fn to_vllm(&self) -> vllm::EngineRegistration {
        vllm::EngineRegistration {
            max_model_len: self.max_model_len,
            num_gpu_blocks: self.num_gpu_blocks,
            block_size: self.prefix_granularity,
            data_parallel_rank: self.data_parallel_rank,
            data_parallel_size: self.data_parallel_size,
            max_num_seqs: self.max_num_seqs,
            vllm_version: self.vllm_version.clone(),
            dtype: self.dtype.clone(),
            world_size: self.world_size,
            tensor_parallel_size: self.tensor_parallel_size,
            pipeline_parallel_size: self.pipeline_parallel_size,
            decode_context_parallel_size: self.decode_context_parallel_size,
            max_num_batched_tokens: u32::try_from(self.max_num_batched_tokens).unwrap_or(u32::MAX),
            instance_id: self.instance_id.clone(),
            kv_cache_size_tokens: self.kv_cache_size_tokens,
            ..Default::default()
        }
    }
}

pub fn decode_registration(frame: &[u8]) -> DecodeResult<EngineRegistration> {
    let mut r = Reader::new(frame);
    let n = r.map_len()?;
    let mut reg = EngineRegistration::default();
    let mut granularity_key = false;
    for _ in 0..n {
        let key = r.str()?;
        if r.try_nil()? {
            continue;
        }
        let narrow = |v: u64| u32::try_from(v).map_err(|_| DecodeError(format!("{key} {v} does not fit u32")));
        match key {
            "max_model_len" => reg.max_model_len = narrow(r.u64()?)?,
            "num_gpu_blocks" => reg.num_gpu_blocks = r.u64()?,
            "prefix_granularity" => {
                reg.prefix_granularity = narrow(r.u64()?)?;
                granularity_key = true;
            }
            // Older builds' name; the current key wins wherever it stands.
            "block_size" if !granularity_key => reg.prefix_granularity = narrow(r.u64()?)?,
            "dtype" => reg.dtype = r.str()?.to_string(),
            "multimodal_encoder_dtype" => reg.multimodal_encoder_dtype = Some(r.str()?.to_string()),
            "vllm_version" => reg.vllm_version = r.str()?.to_string(),
            "world_size" => reg.world_size = narrow(r.u64()?)?,
            "data_parallel_size" => reg.data_parallel_size = narrow(r.u64()?)?,
            "tensor_parallel_size" => reg.tensor_parallel_size = narrow(r.u64()?)?,
            "pipeline_parallel_size" => reg.pipeline_parallel_size = narrow(r.u64()?)?,
            "decode_context_parallel_size" => reg.decode_context_parallel_size = narrow(r.u64()?)?,
            "data_parallel_rank" => reg.data_parallel_rank = narrow(r.u64()?)?,
            "max_num_seqs" => reg.max_num_seqs = narrow(r.u64()?)?,
            "max_num_batched_tokens" => reg.max_num_batched_tokens = r.u64()?,
            "instance_id" => reg.instance_id = r.str()?.to_string(),
            "kv_cache_size_tokens" if r.peek_kind()? == Kind::Int => reg.kv_cache_size_tokens = Some(r.u64()?),
            _ => r.skip()?,
        }
    }
    if !r.is_at_end() {
        return Err(DecodeError(format!("{} trailing bytes after the registration", frame.len() - r.position())));
    }
    if reg.max_model_len == 0 {
        return Err(DecodeError("registration without max_model_len".into()));
    }
    Ok(reg)
}

/// Encodes a ready response as the engine does (the simulator's side): all 19 keys in the
/// engine struct's declaration order, byte-identical to msgspec.
pub fn encode_registration(reg: &EngineRegistration, out: &mut Vec<u8>) {
    let mut w = Writer::new(out);
    let opt_str = |w: &mut Writer<'_>, v: &Option<String>| match v {
        Some(s) => w.str(s),
        None => w.nil(),
    };
    w.map(19);
    w.str("max_model_len");
    w.uint(reg.max_model_len as u64);
    w.str("num_gpu_blocks");
    w.uint(reg.num_gpu_blocks);
    w.str("prefix_granularity");
    w.uint(reg.prefix_granularity as u64);
    w.str("dp_stats_address");
    w.nil();
    w.str("dtype");
    w.str(&reg.dtype);
    w.str("multimodal_encoder_dtype");
    opt_str(&mut w, &reg.multimodal_encoder_dtype);
    w.str("vllm_version");
    w.str(&reg.vllm_version);
    for (key, v) in [
        ("world_size", reg.world_size),
        ("data_parallel_size", reg.data_parallel_size),
        ("tensor_parallel_size", reg.tensor_parallel_size),
        ("pipeline_parallel_size", reg.pipeline_parallel_size),
        ("decode_context_parallel_size", reg.decode_context_parallel_size),
        ("data_parallel_rank", reg.data_parallel_rank),
        ("max_num_seqs", reg.max_num_seqs),
    ] {
        w.str(key);
        w.uint(v as u64);
    }
    w.str("max_num_batched_tokens");
    w.uint(reg.max_num_batched_tokens);
    w.str("instance_id");
    w.str(&reg.instance_id);
    w.str("kv_cache_size_tokens");
    match reg.kv_cache_size_tokens {
        Some(t) => w.uint(t),
        None => w.nil(),
    }
    w.str("kv_cache_max_concurrency");
    w.nil();
    w.str("kv_events_config");
    w.nil();
}

#[cfg(test)]
mod tests {
    use super::*;

    fn hex(s: &str) -> Vec<u8> {
        (0..s.len()).step_by(2).map(|i| u8::from_str_radix(&s[i..i + 2], 16).unwrap()).collect()
    }

    const HELLO: &str =
        "84a6737461747573a548454c4c4fa56c6f63616cc3a8686561646c657373c3b4706172616c6c656c5f636f6e6669675f68617368c0";

    #[test]
    fn hello_and_ready_match_the_reference() {
        let hello = decode_status(&hex(HELLO)).unwrap();
        assert_eq!(hello, StatusMessage { status: "HELLO".into(), local: true, headless: true });
        let mut ours = Vec::new();
        encode_status("HELLO", &mut ours);
        assert_eq!(ours, hex(HELLO));
        let mut ready = Vec::new();
        encode_status("READY", &mut ready);
        assert_eq!(ready, hex(&HELLO.replace("a548454c4c4f", "a55245414459")));
    }

    #[test]
    fn init_uses_the_first_pair_and_needs_both() {
        let mut out = Vec::new();
        encode_init("ipc:///t/w-in.sock", "ipc:///t/w-out.sock", &mut out);
        assert!(out.starts_with(&[0x82, 0xa9]));
        let a = decode_init(&out).unwrap();
        assert_eq!((a.input.as_str(), a.output.as_str()), ("ipc:///t/w-in.sock", "ipc:///t/w-out.sock"));
        let mut two = Vec::new();
        vllm::encode_init(&["a".into(), "b".into()], &["c".into(), "d".into()], &mut two);
        assert_eq!(decode_init(&two).unwrap(), InitAddresses { input: "a".into(), output: "c".into() });
        let mut none = Vec::new();
        vllm::encode_init(&["a".into()], &[], &mut none);
        assert!(decode_init(&none).is_err());
        assert!(decode_init(&[0x80]).is_err());
    }

    #[test]
    fn registration_round_trips_with_the_reference_start() {
        let reg = EngineRegistration {
            max_model_len: 4096,
            num_gpu_blocks: 1000,
            prefix_granularity: 64,
            vllm_version: "tokenspeed-0.1.1".into(),
            max_num_seqs: 160,
            instance_id: "m".into(),
            kv_cache_size_tokens: Some(63936),
            ..Default::default()
        };
        let mut out = Vec::new();
        encode_registration(&reg, &mut out);
        let start = hex("de0013ad6d61785f6d6f64656c5f6c656ecd1000ae6e756d5f6770755f626c6f636b73cd03e8b2");
        assert!(out.starts_with(&start));
        let back = decode_registration(&out).unwrap();
        assert_eq!(back, reg);
        assert!(back.is_tokenspeed());
        assert_eq!(back.usable_context_len(), 4094);
        assert_eq!(back.to_vllm().block_size, 64);
        let small_kv = EngineRegistration { kv_cache_size_tokens: Some(1000), ..reg };
        assert_eq!(small_kv.usable_context_len(), 998);
    }

    #[test]
    fn block_size_alias_and_garbage() {
        let mut out = Vec::new();
        let mut w = Writer::new(&mut out);
        w.map(2);
        w.str("max_model_len");
        w.uint(100);
        w.str("block_size");
        w.uint(16);
        let reg = decode_registration(&out).unwrap();
        assert_eq!(reg.prefix_granularity, 16);
        assert_eq!(reg.world_size, 1, "defaults for missing keys");
        assert!(!reg.is_tokenspeed());
        for bad in [&[][..], &[0x80], &[0x81, 0xa1, b'x'], &[0x90]] {
            assert!(decode_registration(bad).is_err(), "{bad:02x?}");
        }
    }
}
