//! The TokenSpeed wire codec (and the simulator's engine side of it) against TokenSpeed's own
//! code: the hex examples of the wire reference (captured from the engine's modules), and
//! fixtures that `tests/wire/tokenspeed/capture.py` made with the `tokenspeed==0.1.1` wheel's
//! `io_struct`/`zmq_wire`/`zmq_msgpack` modules. No Python runs here; `regen.sh` remakes the
//! fixtures:
//! - `requests.json`: our encoded messages (`write_request_fixture`, ignored by default);
//! - `tokenspeed-0.1.1.json`: what TokenSpeed decoded from them, and messages TokenSpeed
//!   encoded (batches, handshake, full-length ADDs) with the values it encoded.

use std::rc::Rc;

use serde_json::{json, Value};
use shardgate_wire::tokenspeed::handshake::{
    decode_registration, decode_status, encode_init, encode_registration, encode_status, EngineRegistration,
};
use shardgate_wire::tokenspeed::output::decode_batch;
use shardgate_wire::tokenspeed::request::{encode_abort, encode_add, encode_ping};
use shardgate_wire::tokenspeed::{ENGINE_CORE_DEAD, REQUEST_ABORT, REQUEST_ADD};
use shardgate_wire::{EngineRequest, FinishReason, SamplingParams};

#[allow(dead_code)]
#[path = "../crates/sim/src/tokenspeed_wire.rs"]
mod sim_wire;

const DIR: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/wire/tokenspeed");

fn hex(s: &str) -> Vec<u8> {
    (0..s.len()).step_by(2).map(|i| u8::from_str_radix(&s[i..i + 2], 16).unwrap()).collect()
}

fn to_hex(b: &[u8]) -> String {
    b.iter().map(|x| format!("{x:02x}")).collect()
}

fn fixture() -> Value {
    let text = std::fs::read_to_string(format!("{DIR}/tokenspeed-0.1.1.json")).unwrap();
    serde_json::from_str(&text).unwrap()
}

fn request(id: &str, prompt: Vec<u32>, sampling: SamplingParams) -> EngineRequest {
    EngineRequest {
        request_id: id.into(),
        prompt_token_ids: Rc::from(prompt),
        sampling,
        arrival_time: 1_700_000_000.5,
        cache_salt: None,
        priority: 0,
        mm_features: Default::default(),
    }
}

/// The requests sent to TokenSpeed's decoder: (name, request, stream).
fn request_cases() -> Vec<(&'static str, EngineRequest, bool)> {
    let long_id = "chatcmpl-0123456789abcdef0123456789abcdef-0-3.17-89abcdef";
    vec![
        (
            "greedy",
            request(
                "req-greedy",
                vec![1, 2, 3],
                SamplingParams { temperature: 0.0, max_tokens: 16, ..Default::default() },
            ),
            true,
        ),
        (
            "sampled",
            request(
                "req-sampled",
                vec![101, 102],
                SamplingParams {
                    temperature: 0.7,
                    top_p: 0.9,
                    top_k: 50,
                    min_p: 0.05,
                    frequency_penalty: 0.5,
                    presence_penalty: -0.5,
                    repetition_penalty: 1.1,
                    seed: Some(42),
                    max_tokens: 100,
                    min_tokens: 5,
                    stop_token_ids: vec![151643, 7],
                    eos_token_id: Some(151645),
                    all_stop_token_ids: vec![151645, 151643, 7],
                    logit_bias: vec![(50, -100.0), (7, 2.5)],
                    ..Default::default()
                },
            ),
            false,
        ),
        (
            "logprobs_ignore_eos",
            request(
                "req-lp",
                vec![9],
                SamplingParams { logprobs: Some(1), ignore_eos: true, max_tokens: 5000, ..Default::default() },
            ),
            true,
        ),
        (
            "logprobs_zero_top_k_minus_one",
            request("req-lp0", vec![9, 9], SamplingParams { logprobs: Some(0), top_k: -1, ..Default::default() }),
            true,
        ),
        (
            "long",
            request(
                long_id,
                (0..300).map(|i| 151_000 + i).collect(),
                SamplingParams { max_tokens: 1 << 20, seed: Some(-5), top_k: 127, ..Default::default() },
            ),
            true,
        ),
    ]
}

/// Writes `requests.json` for `capture.py` (run by `regen.sh`).
#[test]
#[ignore]
fn write_request_fixture() {
    let mut cases = Vec::new();
    for (name, req, stream) in request_cases() {
        let mut out = Vec::new();
        encode_add(&req, stream, &mut out).unwrap();
        cases.push(json!({"name": name, "type": REQUEST_ADD, "hex": to_hex(&out)}));
    }
    let mut abort = Vec::new();
    encode_abort(&["req-1", "req-2"], &mut abort);
    cases.push(json!({"name": "abort", "type": REQUEST_ABORT, "hex": to_hex(&abort)}));
    let mut ping = Vec::new();
    encode_ping(&mut ping);
    cases.push(json!({"name": "ping", "type": REQUEST_ABORT, "hex": to_hex(&ping)}));
    let mut init = Vec::new();
    encode_init("ipc:///tmp/sg/engine-in.sock", "ipc:///tmp/sg/engine-out.sock", &mut init);
    let doc = json!({"requests": cases, "init": to_hex(&init)});
    std::fs::write(format!("{DIR}/requests.json"), serde_json::to_string_pretty(&doc).unwrap() + "\n").unwrap();
}

#[test]
fn request_fixture_is_current() {
    let text = std::fs::read_to_string(format!("{DIR}/requests.json")).unwrap();
    let doc: Value = serde_json::from_str(&text).unwrap();
    for (name, req, stream) in request_cases() {
        let mut out = Vec::new();
        encode_add(&req, stream, &mut out).unwrap();
        let case = doc["requests"].as_array().unwrap().iter().find(|c| c["name"] == name).unwrap();
        assert_eq!(case["hex"], to_hex(&out), "{name}: the encoder changed; run tests/wire/tokenspeed/regen.sh");
    }
}

/// Every request as TokenSpeed decoded, normalized and validated it.
#[test]
fn tokenspeed_decodes_our_requests() {
    let fx = fixture();
    let decoded = |name: &str| -> Value {
        let case = fx["requests"].as_array().unwrap().iter().find(|c| c["name"] == name).unwrap().clone();
        assert_eq!(case["error"], Value::Null, "{name}: TokenSpeed could not decode it: {}", case["error"]);
        assert_eq!(case["validation_error"], Value::Null, "{name}: TokenSpeed would abort it");
        case["decoded"].clone()
    };
    for (name, req, stream) in request_cases() {
        let d = decoded(name);
        let s = &d["sampling_params"];
        let p = &req.sampling;
        assert_eq!(d["rid"], req.request_id, "{name}");
        assert_eq!(d["input_ids"], json!(*req.prompt_token_ids), "{name}");
        assert_eq!(d["stream"], stream, "{name}");
        assert_eq!(d["return_logprob"], p.logprobs.is_some(), "{name}");
        assert_eq!((&d["logprob_start_len"], &d["top_logprobs_num"]), (&json!(-1), &json!(0)), "{name}");
        assert_eq!(d["token_ids_logprob"], Value::Null, "{name}");
        assert_eq!(d["data_parallel_rank"], Value::Null, "{name}");
        assert_eq!(s["max_new_tokens"], p.max_tokens, "{name}");
        assert_eq!(s["min_new_tokens"], p.min_tokens, "{name}");
        assert_eq!(s["n"], 1, "{name}");
        assert_eq!(s["logprobs"], Value::Null, "{name}");
        assert_eq!((&s["stop"], &s["stop_strs"]), (&Value::Null, &json!([])), "{name}");
        assert_eq!(s["is_normalized"], true, "{name}: normalized by the engine, not by us");
        assert_eq!(s["ignore_eos"], p.ignore_eos, "{name}");
        assert_eq!(s["skip_special_tokens"], true, "{name}");
        let mut stops = p.stop_token_ids.clone();
        stops.sort_unstable();
        assert_eq!(s["stop_token_ids"], if stops.is_empty() { Value::Null } else { json!(stops) }, "{name}");
        let greedy = p.temperature < 1e-6;
        assert_eq!(s["temperature"], if greedy { 1.0 } else { p.temperature }, "{name}");
        let top_k = match p.top_k {
            _ if greedy => 1,
            k if k <= 0 => 1 << 30,
            k => k as i64,
        };
        assert_eq!(s["top_k"], top_k, "{name}");
        for (key, v) in [
            ("top_p", p.top_p),
            ("min_p", p.min_p),
            ("frequency_penalty", p.frequency_penalty),
            ("presence_penalty", p.presence_penalty),
            ("repetition_penalty", p.repetition_penalty),
        ] {
            assert_eq!(s[key], v, "{name} {key}");
        }
        match (greedy, p.seed) {
            (true, _) => assert_eq!(s["seed"], 0, "{name}: greedy pins the seed"),
            (false, Some(seed)) => assert_eq!(s["seed"], seed, "{name}"),
            (false, None) => assert_eq!(s["seed"], d["crc32_rid"], "{name}: derived from the rid"),
        }
        let bias: serde_json::Map<String, Value> =
            p.logit_bias.iter().map(|(k, v)| (k.to_string(), json!(v))).collect();
        assert_eq!(s["logit_bias"], if bias.is_empty() { Value::Null } else { Value::Object(bias) }, "{name}");
    }
    let abort = fx["requests"].as_array().unwrap().iter().find(|c| c["name"] == "abort").unwrap();
    assert_eq!(abort["decoded"], json!(["req-1", "req-2"]));
    let ping = fx["requests"].as_array().unwrap().iter().find(|c| c["name"] == "ping").unwrap();
    assert_eq!(ping["decoded"], json!([]), "the ping decodes to no abort at all");
    assert_eq!(fx["init"]["decoded"]["inputs"], json!(["ipc:///tmp/sg/engine-in.sock"]));
    assert_eq!(fx["init"]["decoded"]["outputs"], json!(["ipc:///tmp/sg/engine-out.sock"]));
}

/// Batch columns from the fixture, as the values TokenSpeed encoded.
fn batch_rows(f: &Value) -> Vec<Value> {
    let n = f["rids"].as_array().unwrap().len();
    (0..n)
        .map(|i| {
            json!({
                "rid": f["rids"][i], "output_ids": f["output_ids"][i], "finished_reason": f["finished_reasons"][i],
                "prompt_tokens": f["prompt_tokens"][i], "completion_tokens": f["completion_tokens"][i],
                "cached_tokens": f["cached_tokens"][i], "val": f["output_token_logprobs_val"][i],
                "idx": f["output_token_logprobs_idx"][i],
            })
        })
        .collect()
}

#[test]
fn batches_tokenspeed_encoded_decode() {
    let fx = fixture();
    let batches = fx["batches"].as_array().unwrap();
    assert!(batches.len() >= 4);
    for case in batches {
        let (name, f) = (case["name"].as_str().unwrap(), &case["fields"]);
        let bytes = hex(case["hex"].as_str().unwrap());
        let b = decode_batch(&bytes).unwrap_or_else(|e| panic!("{name}: {e}"));
        assert_eq!(b.engine_index, f["engine_index"], "{name}");
        match f["kv_total_pages"].as_u64().unwrap() {
            0 => assert_eq!(b.load, None, "{name}"),
            total => {
                let load = b.load.unwrap();
                assert_eq!(
                    (load.running, load.waiting, load.kv_active_pages, load.kv_total_pages),
                    (
                        f["num_running"].as_u64().unwrap() as u32,
                        f["num_waiting"].as_u64().unwrap() as u32,
                        f["kv_active_pages"].as_u64().unwrap(),
                        total
                    ),
                    "{name}"
                );
            }
        }
        let rows = batch_rows(f);
        assert_eq!(b.outputs.len(), rows.len(), "{name}");
        for ((id, ev), row) in b.outputs.iter().zip(&rows) {
            assert_eq!(*id, row["rid"], "{name}");
            assert_eq!(json!(ev.token_ids), row["output_ids"], "{name} {id}");
            let finish = match row["finished_reason"].as_str().unwrap() {
                "" => None,
                "stop" => Some(FinishReason::Stop),
                "length" => Some(FinishReason::Length),
                "abort" => Some(FinishReason::Abort),
                other => panic!("{other}"),
            };
            assert_eq!(ev.finish, finish, "{name} {id}");
            assert_eq!(ev.cached_tokens.map(u64::from), row["cached_tokens"].as_u64(), "{name} {id}");
            let vals = row["val"].as_array().unwrap();
            match &ev.logprobs {
                None => assert!(vals.is_empty(), "{name} {id}"),
                Some(lp) => {
                    assert_eq!(lp.rows.len(), vals.len());
                    for (r, (v, t)) in lp.rows.iter().zip(vals.iter().zip(row["idx"].as_array().unwrap())) {
                        assert_eq!(r.logprob, v.as_f64().unwrap() as f32, "{name} {id}");
                        assert_eq!(r.token_id as u64, t.as_u64().unwrap(), "{name} {id}");
                    }
                }
            }
        }
    }
}

/// The simulator's encoder writes what msgspec writes, byte for byte.
#[test]
fn simulator_batches_are_byte_identical_to_tokenspeed() {
    let fx = fixture();
    for case in fx["batches"].as_array().unwrap() {
        let f = &case["fields"];
        let rows = batch_rows(f);
        let ids: Vec<Vec<u32>> =
            rows.iter().map(|r| serde_json::from_value(r["output_ids"].clone()).unwrap()).collect();
        let vals: Vec<Vec<f64>> = rows.iter().map(|r| serde_json::from_value(r["val"].clone()).unwrap()).collect();
        let idx: Vec<Vec<u32>> = rows.iter().map(|r| serde_json::from_value(r["idx"].clone()).unwrap()).collect();
        let sim_rows: Vec<sim_wire::Row<'_>> = rows
            .iter()
            .enumerate()
            .map(|(i, r)| sim_wire::Row {
                rid: r["rid"].as_str().unwrap(),
                output_ids: &ids[i],
                finished_reason: r["finished_reason"].as_str().unwrap(),
                prompt_tokens: r["prompt_tokens"].as_u64().unwrap(),
                completion_tokens: r["completion_tokens"].as_u64().unwrap(),
                cached_tokens: r["cached_tokens"].as_u64().unwrap(),
                logprob_values: &vals[i],
                logprob_ids: &idx[i],
            })
            .collect();
        let load = sim_wire::Snapshot {
            running: f["num_running"].as_u64().unwrap(),
            waiting: f["num_waiting"].as_u64().unwrap(),
            kv_active_pages: f["kv_active_pages"].as_u64().unwrap(),
            kv_total_pages: f["kv_total_pages"].as_u64().unwrap(),
        };
        let mut out = Vec::new();
        sim_wire::encode_batch(f["engine_index"].as_u64().unwrap(), &sim_rows, &load, &mut out);
        assert_eq!(to_hex(&out), case["hex"], "{}", case["name"]);
    }
}

#[test]
fn handshake_messages_match_tokenspeed() {
    let fx = fixture();
    let hello = hex(fx["status"]["hello"].as_str().unwrap());
    let status = decode_status(&hello).unwrap();
    assert_eq!((status.status.as_str(), status.local, status.headless), ("HELLO", true, true));
    let mut ours = Vec::new();
    encode_status("HELLO", &mut ours);
    assert_eq!(ours, hello);
    let mut ready = Vec::new();
    encode_status("READY", &mut ready);
    assert_eq!(to_hex(&ready), fx["status"]["ready"]);

    let r = &fx["registration"];
    let bytes = hex(r["hex"].as_str().unwrap());
    let reg = decode_registration(&bytes).unwrap();
    let f = &r["fields"];
    let expected = EngineRegistration {
        max_model_len: f["max_model_len"].as_u64().unwrap() as u32,
        num_gpu_blocks: f["num_gpu_blocks"].as_u64().unwrap(),
        prefix_granularity: f["prefix_granularity"].as_u64().unwrap() as u32,
        dtype: f["dtype"].as_str().unwrap().into(),
        multimodal_encoder_dtype: f["multimodal_encoder_dtype"].as_str().map(str::to_string),
        vllm_version: f["vllm_version"].as_str().unwrap().into(),
        world_size: f["world_size"].as_u64().unwrap() as u32,
        data_parallel_size: f["data_parallel_size"].as_u64().unwrap() as u32,
        tensor_parallel_size: f["tensor_parallel_size"].as_u64().unwrap() as u32,
        pipeline_parallel_size: f["pipeline_parallel_size"].as_u64().unwrap() as u32,
        decode_context_parallel_size: f["decode_context_parallel_size"].as_u64().unwrap() as u32,
        data_parallel_rank: f["data_parallel_rank"].as_u64().unwrap() as u32,
        max_num_seqs: f["max_num_seqs"].as_u64().unwrap() as u32,
        max_num_batched_tokens: f["max_num_batched_tokens"].as_u64().unwrap(),
        instance_id: f["instance_id"].as_str().unwrap().into(),
        kv_cache_size_tokens: f["kv_cache_size_tokens"].as_u64(),
    };
    assert_eq!(reg, expected);
    assert!(reg.is_tokenspeed());
    let mut again = Vec::new();
    encode_registration(&expected, &mut again);
    assert_eq!(again, bytes, "the simulator's registration is msgspec's");
    assert_eq!(hex(fx["dead"].as_str().unwrap()), ENGINE_CORE_DEAD);
}

/// ADDs as TokenSpeed's own encoder writes them (all 25 fields) read back by the simulator.
#[test]
fn simulator_decodes_tokenspeed_encoded_requests() {
    let fx = fixture();
    for case in fx["python_adds"].as_array().unwrap() {
        let name = case["name"].as_str().unwrap();
        let add = sim_wire::decode_add(&hex(case["hex"].as_str().unwrap())).unwrap_or_else(|e| panic!("{name}: {e}"));
        let f = &case["fields"];
        let s = &f["sampling_params"];
        assert_eq!(add.rid, f["rid"].as_str().unwrap(), "{name}");
        assert_eq!(json!(add.input_ids), f["input_ids"], "{name}");
        assert_eq!(add.return_logprob, f["return_logprob"], "{name}");
        assert_eq!(add.stream, f["stream"], "{name}");
        assert_eq!(add.sampling.max_new_tokens, s["max_new_tokens"].as_i64(), "{name}");
        assert_eq!(json!(add.sampling.stop_token_ids), s["stop_token_ids"], "{name}");
        assert_eq!(add.sampling.temperature, s["temperature"], "{name}");
        assert_eq!(add.sampling.top_k, s["top_k"], "{name}");
        assert_eq!(add.sampling.seed, s["seed"].as_i64(), "{name}");
        assert_eq!(add.sampling.ignore_eos, s["ignore_eos"], "{name}");
        assert_eq!(add.sampling.n, s["n"], "{name}");
        assert_eq!(add.sampling.is_normalized, s["is_normalized"], "{name}");
        assert_eq!(add.sampling.stream_interval, s["stream_interval"].as_i64(), "{name}");
        assert_eq!(json!(add.sampling.stop), s["stop_list"], "{name}");
        assert_eq!(add.validation_error.as_deref(), f["validation_error"].as_str(), "{name}");
        let verdict = sim_wire::validation_error(&add);
        assert_eq!(verdict.as_deref(), case["engine_validation_error"].as_str(), "{name}");
    }
}

/// Whether a malformed message is dropped: the simulator agrees with TokenSpeed's decoder.
#[test]
fn simulator_drops_what_tokenspeed_drops() {
    let fx = fixture();
    for case in fx["malformed"].as_array().unwrap() {
        let name = case["name"].as_str().unwrap();
        let bytes = hex(case["hex"].as_str().unwrap());
        let accepted = match case["type"].as_u64().unwrap() as u8 {
            REQUEST_ADD => sim_wire::decode_add(&bytes).is_ok(),
            _ => sim_wire::decode_abort(&bytes).is_ok(),
        };
        assert_eq!(accepted, case["accepted"], "{name}");
    }
}

/// The wire reference's §7 examples, captured from the engine's code.
#[test]
fn reference_examples() {
    let hello = hex(concat!(
        "84a6737461747573a548454c4c4fa56c6f63616cc3a8686561646c657373c3",
        "b4706172616c6c656c5f636f6e6669675f68617368c0"
    ));
    assert_eq!(hello.len(), 53);
    assert_eq!(decode_status(&hello).unwrap().status, "HELLO");

    // The SMG-style ADD: normalized by the client, 11 elements, 129 bytes.
    let add = hex(concat!(
        "9bb9546f6b656e697a656447656e6572617465526571496e707574a57265712d31c0c093010203",
        "dc001d08c09102cb3fe0000000000000cb3feccccccccccccdce40000000",
        "cb0000000000000000cb0000000000000000cb0000000000000000cb3ff0000000000000",
        "00c0c0c0c0c2c3c3c2c0c0c0c02ac00190",
        "00c3c3ff00c0c3"
    ));
    assert_eq!(add.len(), 129);
    let a = sim_wire::decode_add(&add).unwrap();
    assert_eq!((a.rid.as_str(), a.input_ids.as_slice()), ("req-1", &[1, 2, 3][..]));
    assert_eq!((a.sampling.max_new_tokens, a.sampling.seed, a.sampling.top_k), (Some(8), Some(42), 1 << 30));
    assert_eq!((a.sampling.temperature, a.sampling.top_p), (0.5, 0.9));
    assert_eq!(a.sampling.stop_token_ids, Some(vec![2]));
    assert!(a.return_logprob && a.stream && a.sampling.is_normalized);
    assert_eq!(sim_wire::validation_error(&a), None);

    // The minimal ADD: the engine normalizes temperature 0 into top_k 1, seed 0.
    let minimal =
        hex("9bb9546f6b656e697a656447656e6572617465526571496e707574a57265712d32c0c09265669410c0c000c2ff00c0c2");
    assert_eq!(minimal.len(), 48);
    let m = sim_wire::decode_add(&minimal).unwrap();
    assert_eq!(
        (m.rid.as_str(), m.input_ids.as_slice(), m.sampling.max_new_tokens),
        ("req-2", &[101, 102][..], Some(16))
    );
    let n = m.sampling.normalized();
    assert_eq!((n.temperature, n.top_k, n.seed), (1.0, 1, Some(0)));

    let mut abort = Vec::new();
    encode_abort(&["req-1"], &mut abort);
    assert_eq!(abort, hex("91a57265712d31"));

    let batch = hex(concat!(
        "9eb34261746368546f6b656e49444f7574536c696d92a57265712d31a57265712d32",
        "9291cd01c292cd06280292a0a473746f70920305920107920000",
        "9291cbbfd0000000000000909291cd01c29000030178cd03e8"
    ));
    assert_eq!(batch.len(), 85);
    let b = decode_batch(&batch).unwrap();
    assert_eq!(b.outputs[1].1.token_ids, [1576, 2], "the trailing stop token reaches the pipeline");
    assert_eq!(b.load.map(|l| (l.running, l.waiting, l.kv_active_pages, l.kv_total_pages)), Some((3, 1, 120, 1000)));
    assert_eq!(hex("454e47494e455f434f52455f44454144"), ENGINE_CORE_DEAD);
}

/// Decoders return errors, never panic: every truncation and single-byte corruption of real
/// messages, and hand-picked hostile ones.
#[test]
fn truncated_and_garbage_inputs_never_panic() {
    let fx = fixture();
    let mut seeds: Vec<Vec<u8>> =
        vec![hex(fx["status"]["hello"].as_str().unwrap()), hex(fx["registration"]["hex"].as_str().unwrap())];
    seeds.extend(fx["batches"].as_array().unwrap().iter().map(|c| hex(c["hex"].as_str().unwrap())));
    seeds.extend(fx["python_adds"].as_array().unwrap().iter().map(|c| hex(c["hex"].as_str().unwrap())));
    let hostile: Vec<Vec<u8>> = vec![
        vec![],
        vec![0xc1],
        vec![0x9e],
        vec![0xdd, 0xff, 0xff, 0xff, 0xff],
        vec![0xdf, 0xff, 0xff, 0xff, 0xff],
        [&[0x9e, 0xb3][..], b"BatchTokenIDOutSlim", &[0xdd, 0xff, 0xff, 0xff, 0xff]].concat(),
        [&[0x9e, 0xb3][..], b"BatchTokenIDOutSlim", &[0x91, 0xa1, b'r', 0x91, 0xdd, 0x7f, 0xff, 0xff, 0xff]].concat(),
        vec![0x91; 100_000],
        ENGINE_CORE_DEAD.to_vec(),
    ];
    let run = |bytes: &[u8]| {
        let _ = decode_batch(bytes);
        let _ = decode_status(bytes);
        let _ = decode_registration(bytes);
        let _ = shardgate_wire::tokenspeed::handshake::decode_init(bytes);
        let _ = sim_wire::decode_add(bytes);
        let _ = sim_wire::decode_abort(bytes);
    };
    for bytes in &hostile {
        run(bytes);
        assert!(decode_batch(bytes).is_err(), "{:02x?}", &bytes[..bytes.len().min(16)]);
    }
    for seed in &seeds {
        for cut in 0..seed.len() {
            run(&seed[..cut]);
            assert!(decode_batch(&seed[..cut]).is_err(), "a truncated frame never decodes");
        }
        for at in 0..seed.len() {
            for b in [0x00, 0xc1, 0xff, 0xdd, 0x9f] {
                let mut m = seed.clone();
                m[at] = b;
                run(&m);
            }
        }
    }
}

#[path = "common/sim_bin.rs"]
mod sim_bin;
/// The simulator in TokenSpeed mode over real sockets, driven through the gateway-side codec.
#[path = "wire/tokenspeed/simulator.rs"]
mod simulator;
