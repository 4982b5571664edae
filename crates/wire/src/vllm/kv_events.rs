//! vLLM's KV-cache events: what an engine started with `--kv-events-config` publishes on its
//! ZMQ PUB socket after each scheduler step (`vllm/distributed/kv_events.py`).
//!
//! A message is three frames: topic, sequence number (8 bytes, big-endian; one counter per
//! publisher, so per engine rank), and a msgpack `KVEventBatch` `[ts, events, dp_rank]`. Each
//! event is a map tagged by `type`: `BlockStored` (block hashes, the parent's hash, the blocks'
//! token ids, block size, medium, extra keys), `BlockRemoved` (hashes, medium) or
//! `AllBlocksCleared`. The replay ROUTER answers a request for "everything from sequence S" with
//! the same three frames per batch, then an end marker whose sequence is -1.
//!
//! Block hashes are sha256 bytes by default and 64-bit integers when the engine runs with
//! `VLLM_KV_EVENTS_USE_INT_BLOCK_HASHES`; the integer form is the low 64 bits of the bytes
//! read big-endian, so both decode to that same `u64` here. The decoder is lenient: unknown keys
//! are skipped, so later versions' added fields (group, locality, session) do not break it.

use crate::msgpack::{DecodeError, DecodeResult, Kind, Reader, Writer};

/// The sequence number the replay socket ends its answer with.
pub const REPLAY_END_SEQ: i64 = -1;

#[derive(Debug, Clone, PartialEq)]
pub struct KvEventBatch {
    pub ts: f64,
    pub events: Vec<KvEvent>,
    pub data_parallel_rank: Option<u32>,
}

#[derive(Debug, Clone, PartialEq)]
pub enum KvEvent {
    Stored(BlockStored),
    Removed { block_hashes: Vec<u64>, on_gpu: bool },
    AllCleared,
}

#[derive(Debug, Clone, PartialEq)]
pub struct BlockStored {
    pub block_hashes: Vec<u64>,
    pub parent_block_hash: Option<u64>,
    pub token_ids: Vec<u32>,
    pub block_size: u32,
    /// Stored in the engine's own KV cache (medium GPU or unspecified), not an offload tier.
    pub on_gpu: bool,
    /// Some block's hash also covers more than its tokens (LoRA, media, cache salt).
    pub has_extra_keys: bool,
    /// The KV-cache group (hybrid models have several); `None` for a single-group model.
    pub group_idx: Option<u32>,
}

/// The sequence number of a message's second frame.
pub fn decode_seq(frame: &[u8]) -> DecodeResult<i64> {
    let bytes: [u8; 8] =
        frame.try_into().map_err(|_| DecodeError(format!("sequence frame of {} bytes, not 8", frame.len())))?;
    Ok(i64::from_be_bytes(bytes))
}

pub fn decode_batch(payload: &[u8]) -> DecodeResult<KvEventBatch> {
    let mut r = Reader::new(payload);
    let n = r.array_len()?;
    if n < 2 {
        return Err(DecodeError(format!("KV event batch of {n} fields")));
    }
    let ts = r.f64()?;
    let count = r.array_len()?;
    let mut events = Vec::with_capacity(count.min(crate::limits::decode_reserve_items_max));
    for _ in 0..count {
        events.push(decode_event(&mut r)?);
    }
    let data_parallel_rank = if n > 2 && !r.try_nil()? { Some(r.u32()?) } else { None };
    for _ in 3..n {
        r.skip()?;
    }
    Ok(KvEventBatch { ts, events, data_parallel_rank })
}

/// `payload` (a batch as an engine encoded it) with its `data_parallel_rank` set to `rank`,
/// written to `out`. The timestamp, the events and any later fields keep the engine's bytes, so
/// a subscriber reads exactly what the engine published, under the rank a re-publisher gives it.
pub fn with_rank(payload: &[u8], rank: u32, out: &mut Vec<u8>) -> DecodeResult<()> {
    let mut r = Reader::new(payload);
    let n = r.array_len()?;
    if n < 2 {
        return Err(DecodeError(format!("KV event batch of {n} fields")));
    }
    let head = r.position();
    r.skip()?;
    r.skip()?;
    let ts_and_events = &payload[head..r.position()];
    if n > 2 {
        r.skip()?;
    }
    let rest = &payload[r.position()..];
    for _ in 3..n {
        r.skip()?;
    }
    if !r.is_at_end() {
        return Err(DecodeError("bytes after the KV event batch".into()));
    }
    out.clear();
    let mut w = Writer::new(out);
    w.array(n.max(3));
    w.raw(ts_and_events);
    w.uint(u64::from(rank));
    w.raw(rest);
    Ok(())
}

/// A batch of one `AllBlocksCleared` for `rank`, as vLLM's encoder writes it.
pub fn encode_cleared(ts: f64, rank: u32, out: &mut Vec<u8>) {
    out.clear();
    let mut w = Writer::new(out);
    w.array(3);
    w.f64(ts);
    w.array(1);
    w.map(1);
    w.str("type");
    w.str("AllBlocksCleared");
    w.uint(u64::from(rank));
}

fn decode_event(r: &mut Reader<'_>) -> DecodeResult<KvEvent> {
    let n = r.map_len()?;
    let mut kind = None;
    let mut stored = BlockStored {
        block_hashes: Vec::new(),
        parent_block_hash: None,
        token_ids: Vec::new(),
        block_size: 0,
        on_gpu: true,
        has_extra_keys: false,
        group_idx: None,
    };
    for _ in 0..n {
        let key = r.str()?;
        if r.try_nil()? {
            continue;
        }
        match key {
            "type" => kind = Some(r.str()?),
            "block_hashes" => stored.block_hashes = decode_hashes(r)?,
            "parent_block_hash" => stored.parent_block_hash = Some(decode_hash(r)?),
            "token_ids" => stored.token_ids = decode_u32s(r)?,
            "block_size" => stored.block_size = r.u32()?,
            "medium" => stored.on_gpu = r.str()? == "GPU",
            "group_idx" => stored.group_idx = Some(r.u32()?),
            "extra_keys" => {
                let entries = r.array_len()?;
                for _ in 0..entries {
                    if !r.try_nil()? {
                        stored.has_extra_keys = true;
                        r.skip()?;
                    }
                }
            }
            _ => r.skip()?,
        }
    }
    match kind {
        Some("BlockStored") => {
            if stored.block_size == 0
                || stored.token_ids.len() != stored.block_hashes.len() * stored.block_size as usize
            {
                return Err(DecodeError(format!(
                    "BlockStored with {} hashes, {} tokens, block size {}",
                    stored.block_hashes.len(),
                    stored.token_ids.len(),
                    stored.block_size
                )));
            }
            Ok(KvEvent::Stored(stored))
        }
        Some("BlockRemoved") => Ok(KvEvent::Removed { block_hashes: stored.block_hashes, on_gpu: stored.on_gpu }),
        Some("AllBlocksCleared") => Ok(KvEvent::AllCleared),
        Some(other) => Err(DecodeError(format!("unknown KV event type {other:?}"))),
        None => Err(DecodeError("KV event without a type".into())),
    }
}

fn decode_hashes(r: &mut Reader<'_>) -> DecodeResult<Vec<u64>> {
    let n = r.array_len()?;
    let mut out = Vec::with_capacity(n.min(crate::limits::decode_reserve_items_max));
    for _ in 0..n {
        out.push(decode_hash(r)?);
    }
    Ok(out)
}

/// A block hash in either of vLLM's forms, as the integer form's value.
fn decode_hash(r: &mut Reader<'_>) -> DecodeResult<u64> {
    match r.peek_kind()? {
        Kind::Bin => {
            let b = r.bin()?;
            let tail = &b[b.len().saturating_sub(8)..];
            Ok(tail.iter().fold(0u64, |acc, &x| (acc << 8) | u64::from(x)))
        }
        _ => r.u64(),
    }
}

fn decode_u32s(r: &mut Reader<'_>) -> DecodeResult<Vec<u32>> {
    let n = r.array_len()?;
    let mut out = Vec::with_capacity(n.min(crate::limits::decode_reserve_items_max));
    for _ in 0..n {
        out.push(r.u32()?);
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Printed by `tools/real-vllm/kv_event_bytes.py` (vLLM 0.32.0's structs and encoder).
    const STORED_BYTES: &str = "93cb41d954fc401000009188a474797065ab426c6f636b53746f726564ac626c6f636b5f68617368657392c420000102030405060708090a0b0c0d0e0f101112131415161718191a1b1c1d1e1fc420202122232425262728292a2b2c2d2e2f303132333435363738393a3b3c3d3e3fb1706172656e745f626c6f636b5f68617368c0a9746f6b656e5f696473dc00206465666768696a6b6c6d6e6f707172737475767778797a7b7c7d7e7fcc80cc81cc82cc83aa626c6f636b5f73697a6510a76c6f72615f6964c0a66d656469756da3475055a96c6f72615f6e616d65c001";
    const CHAIN_REMOVED_CLEARED_INT: &str = "93cb41d954fc40600000938aa474797065ab426c6f636b53746f726564ac626c6f636b5f6861736865739107b1706172656e745f626c6f636b5f68617368cffffffffffffffffda9746f6b656e5f6964739405060708aa626c6f636b5f73697a6504a76c6f72615f6964c0a66d656469756dc0a96c6f72615f6e616d65c0aa65787472615f6b6579739191a473616c74a967726f75705f6964780083a474797065ac426c6f636b52656d6f766564ac626c6f636b5f6861736865739207cffffffffffffffffda66d656469756da347505581a474797065b0416c6c426c6f636b73436c6561726564c0";

    fn bytes(hex: &str) -> Vec<u8> {
        (0..hex.len()).step_by(2).map(|i| u8::from_str_radix(&hex[i..i + 2], 16).unwrap()).collect()
    }

    #[test]
    fn decodes_the_real_publishers_batches() {
        let b = decode_batch(&bytes(STORED_BYTES)).unwrap();
        assert_eq!(b.ts, 1700000000.25);
        assert_eq!(b.data_parallel_rank, Some(1));
        let KvEvent::Stored(s) = &b.events[0] else { panic!("{:?}", b.events) };
        // sha256-sized hashes read as their low 64 bits, big-endian: the integer form.
        assert_eq!(s.block_hashes, vec![0x18191a1b1c1d1e1f, 0x38393a3b3c3d3e3f]);
        assert_eq!(s.parent_block_hash, None);
        assert_eq!(s.token_ids, (100..132).collect::<Vec<u32>>());
        assert_eq!((s.block_size, s.on_gpu, s.has_extra_keys, s.group_idx), (16, true, false, None));

        let b = decode_batch(&bytes(CHAIN_REMOVED_CLEARED_INT)).unwrap();
        assert_eq!(b.data_parallel_rank, None);
        let want = vec![
            KvEvent::Stored(BlockStored {
                block_hashes: vec![7],
                parent_block_hash: Some(u64::MAX - 2),
                token_ids: vec![5, 6, 7, 8],
                block_size: 4,
                on_gpu: true,
                has_extra_keys: true,
                group_idx: Some(0),
            }),
            KvEvent::Removed { block_hashes: vec![7, u64::MAX - 2], on_gpu: true },
            KvEvent::AllCleared,
        ];
        assert_eq!(b.events, want);
    }

    #[test]
    fn a_batch_takes_a_new_rank_and_keeps_the_engines_bytes() {
        // (payload, the rank it gets): the rank field is nil, 1, or absent (a 2-field batch).
        let two_fields = {
            let mut b = bytes(CHAIN_REMOVED_CLEARED_INT);
            b[0] = 0x92;
            b.pop();
            b
        };
        let cases = [(bytes(STORED_BYTES), 7), (bytes(CHAIN_REMOVED_CLEARED_INT), 300), (two_fields, 0)];
        let mut out = Vec::new();
        for (payload, rank) in cases {
            with_rank(&payload, rank, &mut out).unwrap();
            let (was, now) = (decode_batch(&payload).unwrap(), decode_batch(&out).unwrap());
            assert_eq!((now.ts, &now.events, now.data_parallel_rank), (was.ts, &was.events, Some(rank)));
            // Everything before the rank field is the engine's, byte for byte.
            let kept = if payload[0] == 0x93 { payload.len() - 1 } else { payload.len() };
            assert_eq!(out[1..kept], payload[1..kept]);
        }
        for bad in [&bytes(STORED_BYTES)[..40], &[0x91, 0x01][..], &[0x93, 0x01, 0x90, 0xc0, 0xc0][..]] {
            assert!(with_rank(bad, 1, &mut out).is_err(), "{bad:02x?}");
        }
        encode_cleared(1700000000.25, 3, &mut out);
        let b = decode_batch(&out).unwrap();
        assert_eq!((b.ts, b.events, b.data_parallel_rank), (1700000000.25, vec![KvEvent::AllCleared], Some(3)));
        // The tail of the real publisher's batch above: `{"type": "AllBlocksCleared"}`, then the rank.
        let engines = CHAIN_REMOVED_CLEARED_INT.strip_suffix("c0").unwrap();
        assert!(engines.ends_with(&hex(&out[out.len() - 24..out.len() - 1])));
    }

    fn hex(b: &[u8]) -> String {
        b.iter().map(|x| format!("{x:02x}")).collect()
    }

    #[test]
    fn refuses_what_it_cannot_index_and_every_truncation() {
        let real = bytes(STORED_BYTES);
        for cut in 0..real.len() {
            assert!(decode_batch(&real[..cut]).is_err(), "cut at {cut}");
        }
        // A BlockStored whose tokens do not fill its blocks: `block_size` 0x10 -> 0x11.
        let mut bad = real.clone();
        let at = real.windows(2).position(|w| w == [0x65, 0x10]).unwrap() + 1;
        bad[at] = 0x11;
        assert!(decode_batch(&bad).unwrap_err().0.contains("block size 17"));
        // An event type no version has.
        let renamed = STORED_BYTES.replace("426c6f636b53746f726564", "426c6f636b53746f726566");
        assert!(decode_batch(&bytes(&renamed)).unwrap_err().0.contains("unknown KV event type"));
        assert_eq!(decode_seq(&5i64.to_be_bytes()).unwrap(), 5);
        assert_eq!(decode_seq(&(-1i64).to_be_bytes()).unwrap(), REPLAY_END_SEQ);
        assert!(decode_seq(&[0; 7]).is_err());
    }
}
